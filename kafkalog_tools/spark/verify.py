"""`verify --spark`: stage 1 per segment and stage 2 per partition on executors; the driver then
replays the partitions' findings in order, exactly as `Verification` yields them in one process."""
from __future__ import annotations

from functools import partial
from typing import Iterable, Iterator

from .. import verify as v
from . import jobs, plan, schemas


class SparkVerification(v.Verification):
    """A `Verification` whose partitions are checked on a Spark cluster: the same findings, in the
    same order, and the same summary."""

    def __init__(self, spark, paths: Iterable[str], *, deep: bool = True,
                 max_findings_per_code: int = v.MAX_FINDINGS_PER_CODE):
        self.paths = list(paths)
        super().__init__(self.paths, deep=deep, max_findings_per_code=max_findings_per_code)
        self.spark = spark
        self.outcomes: dict[tuple[int, int], v.PartitionOutcome] | None = None
        self.current_path: str | None = None
        """The path given whose findings are being yielded."""

    def __iter__(self) -> Iterator[v.Finding]:
        if self.outcomes is None:
            self.outcomes = run_partition_checks(self.spark, self.targets, self.deep)
        yield from super().__iter__()

    def _target_findings(self, target, summary) -> Iterator[v.Finding]:
        self.current_path = self.paths[self._number(target)]
        yield from super()._target_findings(target, summary)

    def _partition_checks(self, target, summary) -> Iterator[v.PartitionOutcome]:
        number = self._number(target)
        for index in range(len(target.partitions)):
            outcome = self.outcomes[(number, index)]
            summary.add(outcome.summary)
            yield outcome

    def _number(self, target) -> int:
        return next(number for number, known in enumerate(self.targets) if known is target)


def run_partition_checks(spark, targets, deep: bool) -> dict[tuple[int, int], v.PartitionOutcome]:
    """Both stages on the cluster: segments balanced by bytes, then each partition's reports
    brought together (a shuffle of compact facts, never of segment bytes)."""
    sc = spark.sparkContext
    cores = sc.defaultParallelism
    groups = plan.balance(plan.segment_units(targets), cores)
    partitions = [((number, index), (partition, named)) for number, target in enumerate(targets)
                  for index, (partition, named) in enumerate(target.partitions)]
    if not partitions:
        return {}
    reports = sc.parallelize(groups, max(1, len(groups))).flatMap(partial(jobs.check_segments, deep=deep))
    described = sc.parallelize(partitions, max(1, min(len(partitions), cores)))
    checked = described.cogroup(reports, max(1, min(len(partitions), plan.TASKS_PER_CORE * cores)))
    return dict(checked.map(partial(jobs.check_partition, deep=deep)).collect())


def write_findings(spark, rows: list[tuple], output: str) -> None:
    """Findings (as `schemas.finding_row`) as a Parquet dataset in `output`/findings."""
    spark.createDataFrame(rows, schemas.finding_schema()).coalesce(1).write.parquet(f"{output}/findings")

"""`verify --spark`: stage 1 per segment and stage 2 per partition on executors; the driver then
replays the partitions' findings in order, exactly as `Verification` yields them in one process."""
from __future__ import annotations

from functools import partial
from typing import Iterable, Iterator

from .. import verify as v
from . import jobs, plan, schemas
from .remote import HadoopLayout, staged
from .session import task_errors


class SparkVerification(v.Verification):
    """A `Verification` whose partitions are checked on a Spark cluster: the same findings, in the
    same order, and the same summary. Paths may be Hadoop URIs (`remote`): findings name them."""

    def __init__(self, spark, paths: Iterable[str], *, deep: bool = True,
                 max_findings_per_code: int = v.MAX_FINDINGS_PER_CODE, stage_2_on: str | None = None,
                 read_as: str | None = None):
        self.stage_2_on = stage_2_on
        self.layout = HadoopLayout(spark, paths)
        self.paths = self.layout.paths
        try:
            super().__init__(self.layout.local_paths, deep=deep, max_findings_per_code=max_findings_per_code,
                             files=self.layout, read_as=read_as)
            for summary in self.target_summaries:
                summary.log_dirs = [{**state, "log_dir": self.layout.dir_uri(state["log_dir"])}
                                    for state in summary.log_dirs]
        except BaseException:
            self.layout.close()
            raise
        self.spark = spark
        self.outcomes: dict[tuple[int, int], v.PartitionOutcome] | None = None
        self.current_path: str | None = None
        """The path given whose findings are being yielded."""
        self.units: list[plan.SegmentUnit] = []
        """Stage 1's tasks' units: a segment each, or a byte range of a big one."""

    def __iter__(self) -> Iterator[v.Finding]:
        try:
            if self.outcomes is None:
                with task_errors():
                    self.outcomes = run_partition_checks(self.spark, self.targets, self.deep, self.layout,
                                                         self.stage_2_on, self.units)
            log_dir_files = [path for target in self.targets if target.log_dir for path in target.log_dir.files.values()]
            with staged(self.layout.remote_files(log_dir_files)):
                for finding in super().__iter__():
                    yield self.layout.map_finding(finding)
        finally:
            self.layout.close()

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


DRIVER_STAGE_2_MAX_BYTES = 64 << 30
"""Up to this much .log, stage 2 runs on the driver over the collected facts (about 100 bytes per
batch; it saves a shuffle stage, ~1 s); above it, on executors after a shuffle by partition."""


def run_partition_checks(spark, targets, deep: bool, layout: HadoopLayout, stage_2_on: str | None = None,
                         planned: list | None = None) -> dict[tuple[int, int], v.PartitionOutcome]:
    """Stage 1 per segment (a big one cut into byte ranges) on the cluster, balanced by bytes; then
    stage 2 per partition, on the driver or (`stage_2_on="executors"`, the default above DRIVER_STAGE_2_MAX_BYTES) on executors.
    Only compact facts travel, never segment bytes; files behind URIs are staged where they are read.
    `planned` gets stage 1's units."""
    sc = spark.sparkContext
    cores = sc.defaultParallelism
    units = plan.split(plan.segment_units(targets, layout), cores, plan.range_bytes_setting(spark))
    if planned is not None:
        planned.extend(units)
    groups = plan.balance(units, cores)
    partitions = [((number, index), (partition, named, layout.remote_files(plan.stage_2_inputs(partition, named))))
                  for number, target in enumerate(targets) for index, (partition, named) in enumerate(target.partitions)]
    if not partitions:
        return {}
    reports = sc.parallelize(groups, max(1, len(groups))).flatMap(partial(jobs.check_segments, deep=deep))
    if stage_2_on is None:
        stage_2_on = "driver" if sum(unit.size for unit in units) <= DRIVER_STAGE_2_MAX_BYTES else "executors"
    if stage_2_on == "driver":
        by_partition: dict[tuple[int, int], list[v.SegmentReport | v.RangeReport]] = {key: [] for key, _ in partitions}
        for key, report in reports.collect():
            by_partition[key].append(report)
        outcomes = {}
        for key, (partition, named, remote) in partitions:
            with staged(remote, prune=False):  # the staging root goes at `layout.close`
                outcomes[key] = v.check_partition(partition, named, deep, by_partition[key])
        return outcomes
    described = sc.parallelize(partitions, max(1, min(len(partitions), cores)))
    checked = described.cogroup(reports, max(1, min(len(partitions), plan.TASKS_PER_CORE * cores)))
    return dict(checked.map(partial(jobs.check_partition, deep=deep)).collect())


def write_findings(spark, rows: list[tuple], output: str) -> None:
    """Findings (as `schemas.finding_row`) as a Parquet dataset in `output`/findings."""
    spark.createDataFrame(rows, schemas.finding_schema()).coalesce(1).write.parquet(f"{output}/findings")

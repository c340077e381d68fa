"""Verification over the paths given (segment files, partition dirs, log dirs): each partition's two
stages in order, then what a log dir holds besides partitions (meta.properties, the clean-shutdown
marker, offset checkpoints)."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..broker import BrokerState, BrokerStates
from ..errors import KafkaLogError
from ..formats import checkpoint, properties
from ..formats.logdir import LOCAL, LocalFiles, LogDir, PartitionDir, Segment, classify
from ..recovery import segment_of
from .findings import ERROR, INFO, MAX_FINDINGS_PER_CODE, WARNING, Finding, ProgressCallback, Summary, from_error
from . import parallel
from .partition import PartitionCheck, PartitionFacts, SegmentChecker
from .segment import BatchConsumer, SegmentReport, check_segment


BatchWatcher = Callable[[int, PartitionDir], BatchConsumer]
"""Given (the index of the path given, a partition about to be checked), a consumer that sees every
intact batch's facts of that partition as stage 1 reads them, in log order, before stage 2 does:
what a caller that also wants the batches (the incident report's timelines) taps, instead of
reading the segments twice. A `FactsRun`'s columns hold only for the call."""


@dataclass
class _Target:
    log_dir: LogDir | None
    partitions: list[tuple[PartitionDir, list[Segment] | None]]
    """Each partition with the segments named, or None for all of them."""
    broker: BrokerState | None = None
    """Of the log dir the path given is or lies in: whether its active segments may be growing."""

    @property
    def live(self) -> bool:
        return self.broker is not None and self.broker.live


class Verification:
    """Verify segment files, partition dirs or log dirs; iterate to get the findings.

    Two stages, one implementation for every scheduler: `check_segment` reads one segment's own
    files (batches, CRCs, records, damage, offset and time indexes) and needs nothing else;
    `PartitionCheck` then carries what crosses segments (offset order, leader epochs, producer
    state, snapshots, transaction indexes) through the compact per-batch facts stage 1 returns.
    Here both stages run in this process; `kafkalog_tools.spark` runs them on Spark executors.
    """

    def __init__(self, paths: Iterable[str], *, deep: bool = True, on_progress: ProgressCallback | None = None,
                 max_findings_per_code: int = MAX_FINDINGS_PER_CODE, files: LocalFiles = LOCAL,
                 read_as: str | None = None, watch: BatchWatcher | None = None, jobs: int | None = 1):
        """`read_as`: "live" or "offline" for every log dir (--live/--offline); None: as its lock says.
        `watch`: hands each partition's batches to a consumer of the caller's too (here, where
        stage 1 runs in this process, so never in workers).
        `jobs`: processes checking partitions at once, at most the usable CPUs (`parallel`; more
        than one may start them with multiprocessing's spawn, which needs the `if __name__ ==
        "__main__"` guard in the calling script); None: every usable CPU, for scans of
        PARALLEL_MIN_BYTES or more."""
        self.deep = deep
        self.watch = watch
        self.jobs = jobs
        self.pool: parallel.PartitionPool | None = None
        self.on_progress = on_progress
        self.max_findings_per_code = max_findings_per_code
        brokers = BrokerStates(read_as, files.broker_lock)
        self.targets = [_resolve(path, files, brokers) for path in paths]
        self.target_summaries = [Summary(paths=1, records=0 if deep else None, log_dirs=[t.broker.to_json()])
                                 for t in self.targets]
        """Totals per path given (the Spark summary table shows them per log dir)."""
        self.partition_bytes = [sum(files.size(s.log) for s in (named if named is not None else p.segments)
                                    if s.log is not None) for t in self.targets for p, named in t.partitions]
        """The .log bytes of each partition to check, over every path given in order."""
        self.total_bytes = sum(self.partition_bytes)

    @property
    def summary(self) -> Summary:
        """Totals over every path given."""
        total = Summary(paths=len(self.targets), records=0 if self.deep else None)
        for part in self.target_summaries:
            total.add(part)
        return total

    def __iter__(self) -> Iterator[Finding]:
        try:
            yield from self._findings()
        finally:
            if self.pool is not None:
                self.pool.close()
                self.pool = None

    def _findings(self) -> Iterator[Finding]:
        self.pool = self._start_pool()
        for target, summary in zip(self.targets, self.target_summaries):
            counts: dict[tuple[str, str], int] = {}
            for finding in self._target_findings(target, summary):
                key = (finding.file, finding.code)
                counts[key] = counts.get(key, 0) + 1
                if counts[key] > self.max_findings_per_code:
                    summary.suppressed += 1
                    continue
                summary.count(finding)
                yield finding
            for (file, code), count in counts.items():
                if count > self.max_findings_per_code:
                    note = Finding(INFO, "findings-suppressed", file, None,
                                   f"{count - self.max_findings_per_code} more '{code}' findings in this file "
                                   f"are not shown", {"suppressed": count - self.max_findings_per_code})
                    summary.count(note)
                    yield note

    def _target_findings(self, target: _Target, summary: Summary) -> Iterator[Finding]:
        facts: dict[tuple[str, int], PartitionFacts] = {}
        if target.log_dir is not None:
            yield from _check_log_dir_files(target.log_dir)
        for check in self._partition_checks(target, summary):
            yield from check.run()
            facts[check.topic_partition] = check.facts
        if target.log_dir is not None:
            yield from _check_offset_checkpoints(target.log_dir, facts)

    def _partition_checks(self, target: _Target, summary: Summary) -> Iterator["PartitionCheck"]:
        """Stage 2 of each partition of `target`, in order (the Spark scheduler replaces this with
        the same checks run on executors)."""
        number = next(n for n, known in enumerate(self.targets) if known is target)  # equal ones may repeat
        first_job = sum(len(t.partitions) for t in self.targets[:number])
        for job, (partition, named) in enumerate(target.partitions, first_job):
            if self.pool is not None and not self.pool.take(job):
                outcome = self.pool.outcome(job)
                if outcome is not None:
                    summary.add(outcome.summary)
                    yield outcome
                    continue  # else its worker died before it: checked here
            check = functools.partial(self._check_segment, live=target.live)
            if self.watch is not None:
                check = _watched(check, self.watch(number, partition))
            yield PartitionCheck(partition, named, self.deep, summary, check)
            if self.pool is not None:
                self.pool.receive()

    def _start_pool(self) -> parallel.PartitionPool | None:
        """Workers for the partitions of every path given, when they pay (see `jobs`)."""
        if self.jobs == 1 or self.watch is not None:
            return None
        partitions = [(target, partition, named) for target in self.targets for partition, named in target.partitions]
        jobs = [parallel.PartitionJob(partition, named, target.live, size)
                for (target, partition, named), size in zip(partitions, self.partition_bytes)]
        processes = min(self.jobs or parallel.usable_cpus(), parallel.usable_cpus())
        if self.jobs is None and self.total_bytes < parallel.PARALLEL_MIN_BYTES:
            processes = 1
        workers = min(processes, len(jobs)) - 1
        if workers < 1:
            return None
        return parallel.PartitionPool(jobs, workers, self.deep, self._report_progress)

    def _report_progress(self, n: int) -> None:
        if self.on_progress is not None:  # set once the progress bar shows
            self.on_progress(n)

    def _check_segment(self, segment: Segment, is_active: bool, on_batch: "BatchConsumer",
                       live: bool) -> "SegmentReport":
        return check_segment(segment, is_active, self.deep, self.on_progress, on_batch, live, outlines=True)


def _watched(check_segment: SegmentChecker, watcher: BatchConsumer) -> SegmentChecker:
    """`check_segment`, its batches handed to `watcher` too."""
    def checked(segment: Segment, is_active: bool, on_batch: BatchConsumer) -> SegmentReport:
        def both(facts) -> None:
            watcher(facts)  # first: a FactsRun's columns are overwritten once on_batch returns
            on_batch(facts)

        return check_segment(segment, is_active, both)
    return checked


def _resolve(path: str, files: LocalFiles, brokers: BrokerStates) -> _Target:
    found = classify(path, files)
    if isinstance(found, LogDir):
        return _Target(found, [(p, None) for p in found.partitions], brokers.of(found.path))
    if isinstance(found, PartitionDir):
        return _Target(None, [(found, None)], brokers.of_partition(found.path))
    partition, segment = segment_of(found, files)
    return _Target(None, [(partition, [segment])], brokers.of_partition(partition.path))


# ---------------------------------------------------------------------------------------------
# A log dir: meta.properties, clean-shutdown marker, offset checkpoints
# ---------------------------------------------------------------------------------------------


def _check_log_dir_files(log_dir: LogDir) -> Iterator[Finding]:
    for path, reason in log_dir.unknown:
        yield Finding(INFO, "unknown-file", str(path), None, f"ignored: {reason}")
    meta = log_dir.files.get("meta.properties")
    if meta is None:
        yield Finding(WARNING, "meta-properties-missing", str(log_dir.path / "meta.properties"), None,
                      "no meta.properties: a broker formats this directory anew (KRaft refuses to start)")
    else:
        yield from _check_meta_properties(meta)
    if ".kafka_cleanshutdown" not in log_dir.files:
        yield Finding(INFO, "unclean-shutdown", str(log_dir.path), None,
                      "no .kafka_cleanshutdown marker: Kafka recovers every segment after the recovery point on load")


def _check_meta_properties(path: Path) -> Iterator[Finding]:
    try:
        props = properties.read_meta_properties(path)
    except KafkaLogError as exc:
        yield from_error(exc, "meta-properties-corrupt", str(path))
        return
    required = {"0": ("broker.id",), "1": ("node.id", "cluster.id")}.get(props["version"])
    if required is None:
        yield Finding(ERROR, "meta-properties-corrupt", str(path), None,
                      f"unknown meta.properties version {props['version']}", {"expected": "0 or 1"})
        return
    for key in required:
        if key not in props:
            yield Finding(ERROR, "meta-properties-corrupt", str(path), None,
                          f"meta.properties version {props['version']} has no {key}")


def _check_offset_checkpoints(log_dir: LogDir, facts: dict[tuple[str, int], PartitionFacts]) -> Iterator[Finding]:
    """Recovery point, high watermark, log start and cleaner offsets against the logs."""
    rules = {
        "recovery-point-offset-checkpoint": (ERROR, "recovery-point-beyond-log-end",
                                             "the recovery point is past the log end: flushed data is missing"),
        "replication-offset-checkpoint": (ERROR, "high-watermark-beyond-log-end",
                                          "the high watermark is past the log end: committed data is missing"),
        "log-start-offset-checkpoint": (ERROR, "log-start-beyond-log-end",
                                        "the log start offset is past the log end: Kafka deletes every segment"),
        "cleaner-offset-checkpoint": (WARNING, "cleaner-offset-beyond-log-end",
                                      "the cleaner checkpoint is past the log end"),
    }
    for name, (severity, code, meaning) in rules.items():
        path = log_dir.files.get(name)
        if path is None:
            continue
        try:
            offsets = checkpoint.read_offsets(path)
        except KafkaLogError as exc:
            yield from_error(exc, "checkpoint-corrupt", str(path))
            continue
        for (topic, partition), offset in offsets.items():
            known = facts.get((topic, partition))
            where = {"topic": topic, "partition": partition, "offset": offset}
            if known is None:
                yield Finding(WARNING, "checkpoint-unknown-partition", str(path), None,
                              f"{topic}-{partition} has an entry ({offset}) but no partition directory", where)
            elif known.log_end_offset is not None and offset > known.log_end_offset:
                yield Finding(severity, code, str(path), None,
                              f"{topic}-{partition}: {offset} > log end offset {known.log_end_offset}: {meaning}",
                              {**where, "log_end_offset": known.log_end_offset})
            elif (name == "log-start-offset-checkpoint" and known.first_segment_offset is not None
                  and offset < known.first_segment_offset):
                yield Finding(WARNING, "log-start-below-first-segment", str(path), None,
                              f"{topic}-{partition}: log start offset {offset} is below the first segment "
                              f"({known.first_segment_offset}); Kafka raises it to the segment's base offset",
                              {**where, "first_segment_offset": known.first_segment_offset})

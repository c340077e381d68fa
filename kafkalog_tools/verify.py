"""Verification of log directories, partitions and segments: everything Kafka's own loading would
trip over, and nothing that Kafka itself wrote and considers valid.

Sources: FORMAT.md section 2.7 (segment iteration), 3 (indexes and their sanity checks), 4.3 (what
an index entry means, by version and write path), 4.4 (loading), 6 (snapshots, checkpoints).

Indexes are checked by meaning, never by byte equality with a rebuild: live appends, follower
appends, restarts and old brokers all write entries that differ from recovery's and are valid.
What is really wrong is reported: entries out of order, positions off batch boundaries, offsets
that do not exist, a lookup that would start after its target, time entries claiming timestamps
the data does not hold, a missing final time entry or a preallocated tail on a closed segment.

Damage (a truncated tail, a corrupt batch, a zero-filled region) is reported with its exact byte
range; the scan then resynchronises - the next position where a plausible header with a valid CRC
starts - and says how much intact data follows.

`Verification` streams `Finding`s and totals them in `summary`. Nothing is ever written.
"""
from __future__ import annotations

import bisect
import functools
import re
import struct
import zlib
from array import array
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, NamedTuple

from . import codecs
from .broker import BrokerState, BrokerStates
from .crc import crc32c
from .errors import CorruptDataError, DecompressionError, InputError, KafkaLogError
from .formats import checkpoint, legacy, producer_snapshot, properties
from .formats.batch import INT32_MAX, Batch, Record, java_long
from .formats.batch import last_sequence as batch_last_sequence
from .formats.index_file import IndexFile
from .formats.logdir import LOCAL, LocalFiles, LogDir, PartitionDir, Segment, classify
from .formats.offset_index import OffsetIndex
from .formats.record_batch import (ATTR_CODEC, ATTR_CONTROL, ATTR_TRANSACTIONAL, HEADER_SIZE, parse_batch,
                                  skim_records)
from .formats.segment import LOG_OVERHEAD, MAGIC_OFFSET, BadEntry, SegmentFile, Stop
from .formats.segment import all_zero as _all_zero, next_non_zero as _next_non_zero
from .formats.time_index import TimeIndex
from .formats.txn_index import AbortedTxn, TransactionIndex
from .native import bulk_scan
from .native.columns import (ATTRIBUTES, BASE_OFFSET, BASE_SEQUENCE, LAST_OFFSET_DELTA, LEADER_EPOCH, MAX_TIMESTAMP,
                             POSITION, PRODUCER_EPOCH, PRODUCER_ID, RECORDS_COUNT, SIZE)
from .payloads.versions import newer_versions
from .recovery import (ProducerState, ProducerStateError, RecoveryDrops, marker_records, recovery_drops,
                       segment_of, starting_producer_state)

ERROR, WARNING, INFO = "error", "warning", "info"
MAX_FINDINGS_PER_CODE = 100
"""Per file and code; the rest are counted in one closing finding."""
PROGRESS_STEP = 8 << 20


# ---------------------------------------------------------------------------------------------
# What verification reports
# ---------------------------------------------------------------------------------------------


@dataclass
class Finding:
    severity: str
    """"error" (Kafka would fail, lose or misread data), "warning" (Kafka copes; worth knowing),
    or "info"."""
    code: str
    file: str
    position: int | None
    """Byte position in `file`, when the finding has one."""
    message: str
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"type": "finding", "severity": self.severity, "code": self.code, "file": self.file,
                "position": self.position, "message": self.message, **self.extra}


@dataclass
class Summary:
    paths: int = 0
    partitions: int = 0
    segments: int = 0
    batches: int = 0
    records: int | None = 0
    """Records decoded (None when verifying shallowly)."""
    log_bytes: int = 0
    intact_bytes: int = 0
    damaged_bytes: int = 0
    errors: int = 0
    warnings: int = 0
    infos: int = 0
    suppressed: int = 0
    io_errors: int = 0
    log_dirs: list[dict] = field(default_factory=list)
    """Whether a broker runs on each log dir read, and how it was read (`broker.BrokerState.to_json`)."""

    def count(self, finding: Finding) -> None:
        if finding.severity == ERROR:
            self.errors += 1
        elif finding.severity == WARNING:
            self.warnings += 1
        else:
            self.infos += 1
        if finding.code == "io-error":
            self.io_errors += 1

    def add(self, other: "Summary") -> None:
        """Add another summary's counts (every field but `paths`)."""
        for name, value in vars(other).items():
            if name == "log_dirs":
                self.log_dirs.extend(state for state in value if state not in self.log_dirs)
            elif name != "paths" and value is not None:
                setattr(self, name, (getattr(self, name) or 0) + value)

    def to_json(self) -> dict:
        return {"type": "summary", **vars(self)}


ProgressCallback = Callable[[int], None]


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


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
    `_PartitionCheck` then carries what crosses segments (offset order, leader epochs, producer
    state, snapshots, transaction indexes) through the compact per-batch facts stage 1 returns.
    Here both stages run in this process; `kafkalog_tools.spark` runs them on Spark executors.
    """

    def __init__(self, paths: Iterable[str], *, deep: bool = True, on_progress: ProgressCallback | None = None,
                 max_findings_per_code: int = MAX_FINDINGS_PER_CODE, files: LocalFiles = LOCAL,
                 read_as: str | None = None):
        """`read_as`: "live" or "offline" for every log dir (--live/--offline); None: as its lock says."""
        self.deep = deep
        self.on_progress = on_progress
        self.max_findings_per_code = max_findings_per_code
        brokers = BrokerStates(read_as, files.broker_lock)
        self.targets = [_resolve(path, files, brokers) for path in paths]
        self.target_summaries = [Summary(paths=1, records=0 if deep else None, log_dirs=[t.broker.to_json()])
                                 for t in self.targets]
        """Totals per path given (the Spark summary table shows them per log dir)."""
        self.total_bytes = sum(files.size(s.log) for t in self.targets for p, named in t.partitions
                               for s in (named if named is not None else p.segments) if s.log is not None)

    @property
    def summary(self) -> Summary:
        """Totals over every path given."""
        total = Summary(paths=len(self.targets), records=0 if self.deep else None)
        for part in self.target_summaries:
            total.add(part)
        return total

    def __iter__(self) -> Iterator[Finding]:
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
        facts: dict[tuple[str, int], _PartitionFacts] = {}
        if target.log_dir is not None:
            yield from _check_log_dir_files(target.log_dir)
        for check in self._partition_checks(target, summary):
            yield from check.run()
            facts[check.topic_partition] = check.facts
        if target.log_dir is not None:
            yield from _check_offset_checkpoints(target.log_dir, facts)

    def _partition_checks(self, target: _Target, summary: Summary) -> Iterator["_PartitionCheck"]:
        """Stage 2 of each partition of `target`, in order (the Spark scheduler replaces this with
        the same checks run on executors)."""
        for partition, named in target.partitions:
            yield _PartitionCheck(partition, named, self.deep, summary,
                                  functools.partial(self._check_segment, live=target.live))

    def _check_segment(self, segment: Segment, is_active: bool, on_batch: "BatchConsumer",
                       live: bool) -> "SegmentReport":
        return check_segment(segment, is_active, self.deep, self.on_progress, on_batch, live)


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


@dataclass
class _PartitionFacts:
    first_segment_offset: int | None = None
    log_end_offset: int | None = None
    """Where Kafka would resume appending: after the last intact batch."""


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
        yield _from_error(exc, "meta-properties-corrupt", str(path))
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


def _check_offset_checkpoints(log_dir: LogDir, facts: dict[tuple[str, int], _PartitionFacts]) -> Iterator[Finding]:
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
            yield _from_error(exc, "checkpoint-corrupt", str(path))
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


# ---------------------------------------------------------------------------------------------
# Stage 2, a partition: its segments in order, producer state, leader epochs, snapshots
# ---------------------------------------------------------------------------------------------

SegmentChecker = Callable[[Segment, bool, "BatchConsumer"], "SegmentReport"]
"""Stage 1 of (segment, is_active): run here, handing each batch's facts to the consumer as it
reads them (memory flat in the batch count), or looked up from an executor's result, whose report
carries the facts."""


class _PartitionCheck:
    def __init__(self, partition: PartitionDir, named: list[Segment] | None, deep: bool, summary: Summary,
                 check_segment: SegmentChecker):
        self.partition = partition
        self.topic_partition = partition.topic_partition
        self.whole = named is None
        self.segments = [s for s in (partition.segments if named is None else named) if s.log is not None]
        self.deep = deep
        self.summary = summary
        self.check_segment = check_segment
        self.facts = _PartitionFacts()
        self.last_offset: int | None = None
        """Last offset of the last intact batch so far (offsets must keep increasing)."""
        self.epochs: list[tuple[int, int, int | None]] = []  # (epoch, first offset in the log, last offset before it)
        """(leader epoch, first offset) as the batches assign them, like the leader epoch cache."""
        self.exact_state = True
        self.state = ProducerState()
        self.pending_snapshots: list[tuple[int, producer_snapshot.ProducerSnapshot]] = []
        self.sink: list[Finding] = []

    def run(self) -> Iterator[Finding]:
        self.summary.partitions += 1
        yield from self._check_partition_files()
        if not self.segments:
            return
        yield from self._start_producer_state()
        last_base = self.partition.segments[-1].base_offset
        previous_last: int | None = None
        for segment in self.segments:
            replay = _SegmentReplay(self)
            report = self.check_segment(segment, segment.base_offset == last_base, replay.batch)
            for facts in report.batches:  # a report made elsewhere; one made here has streamed them
                replay.batch(facts)
            yield from self._segment_findings(segment, report, replay)
            first = replay.first_base_offset
            if previous_last is not None and first is not None and first <= previous_last:
                yield Finding(ERROR, "segment-overlap", str(segment.log), 0,
                              f"the segment starts at offset {first}, not after the previous "
                              f"segment's last offset {previous_last}", {"previous_last_offset": previous_last})
            previous_last = replay.last_offset
        last = self.segments[-1]
        self.facts.first_segment_offset = self.partition.segments[0].base_offset
        self.facts.log_end_offset = max(last.base_offset, (self.last_offset + 1) if self.last_offset is not None else 0)
        if self.whole:
            yield from self._finish_snapshots()
            yield from self._check_leader_epoch_checkpoint()
        if self.deep:
            yield from self._newer_record_versions()

    def _newer_record_versions(self) -> Iterator[Finding]:
        """One info finding per kind and version of internal-topic records a newer Kafka wrote."""
        logs = [segment.log for segment in self.segments if isinstance(segment.log, Path)]
        try:
            found = newer_versions(self.partition.topic, logs)
        except (OSError, KafkaLogError):
            return  # the segment checks report what cannot be read
        for entry in found:
            yield Finding(INFO, "newer-record-version", entry.file, entry.position,
                          f"{entry.count} {entry.kind} record(s) of value version {entry.version}, newer than "
                          f"any known (newest: {entry.read_as}), first at offset {entry.offset}; decoded as far "
                          f"as the v{entry.read_as} layout goes (dump's decode_warning says whether Kafka "
                          "reads them)",
                          {"kind": entry.kind, "version": entry.version, "read_as_version": entry.read_as,
                           "count": entry.count, "offset": entry.offset})

    # -- partition files ---------------------------------------------------------------------

    def _check_partition_files(self) -> Iterator[Finding]:
        for path in self.partition.leftovers:
            yield Finding(WARNING, "leftover-file", str(path), None,
                          "left by an interrupted operation; Kafka completes or deletes it on load")
        for path, reason in self.partition.unknown:
            yield Finding(INFO, "unknown-file", str(path), None, f"ignored: {reason}")
        for segment in self.partition.segments:
            if segment.log is None:
                for orphan in (segment.index, segment.timeindex, segment.txnindex):
                    if orphan is not None:
                        yield Finding(WARNING, "orphan-index", str(orphan), None,
                                      "an index without its .log: Kafka deletes it on load")

    def _start_producer_state(self) -> Iterator[Finding]:
        first = self.segments[0].base_offset
        try:
            start = starting_producer_state(self.partition, first)  # not in the progress total
        except KafkaLogError as exc:
            yield _from_error(exc, "io-error" if isinstance(exc, InputError) else "producer-state-unavailable",
                              str(self.partition.path))
            self.exact_state = False
            return
        self.state, self.exact_state = start.state, start.exact
        self.state.on_anomaly = self._producer_anomaly
        if self.whole:
            for path in self.partition.snapshots:
                yield from self._read_snapshot_for_later(path)

    def _producer_anomaly(self, kind: str, message: str, batch: Batch) -> None:
        self.sink.append(Finding(WARNING, kind, batch.path, batch.position, message,
                                 {"producer_id": batch.producer_id}))

    # -- snapshots -----------------------------------------------------------------------------

    def _read_snapshot_for_later(self, path: Path) -> Iterator[Finding]:
        try:
            snapshot = producer_snapshot.read(path)
        except KafkaLogError as exc:
            yield _from_error(exc, "snapshot-corrupt", str(path))
            return
        if snapshot.offset is not None:
            self.pending_snapshots.append((snapshot.offset, snapshot))
            self.pending_snapshots.sort(key=lambda item: item[0])

    def compare_snapshots_before(self, offset: int) -> None:
        """Compare the snapshots taken at or before `offset` with the replayed state."""
        while self.pending_snapshots and self.pending_snapshots[0][0] <= offset:
            _, snapshot = self.pending_snapshots.pop(0)
            if self.exact_state:
                self.sink.extend(_compare_snapshot(snapshot, self.state))

    def _finish_snapshots(self) -> Iterator[Finding]:
        end = self.facts.log_end_offset
        self.sink = []
        self.compare_snapshots_before(end)
        yield from self.sink
        for offset, snapshot in self.pending_snapshots:
            yield Finding(WARNING, "snapshot-beyond-log-end", snapshot.path, None,
                          f"snapshot at offset {offset} is past the log end offset {end}: Kafka deletes it on load",
                          {"log_end_offset": end})

    # -- leader epochs -------------------------------------------------------------------------

    def _check_leader_epoch_checkpoint(self) -> Iterator[Finding]:
        path = self.partition.files.get(checkpoint.LEADER_EPOCH_CHECKPOINT)
        if path is None:
            if self.epochs:
                yield Finding(WARNING, "leader-epoch-checkpoint-missing", str(self.partition.path), None,
                              "no leader-epoch-checkpoint although batches carry leader epochs; Kafka rebuilds it")
            return
        try:
            entries = checkpoint.read_leader_epochs(path)
        except KafkaLogError as exc:
            yield _from_error(exc, "checkpoint-corrupt", str(path))
            return
        file = str(path)
        for (epoch_a, start_a), (epoch_b, start_b) in zip(entries, entries[1:]):
            if epoch_b <= epoch_a or start_b < start_a:
                yield Finding(ERROR, "leader-epoch-checkpoint-order", file, None,
                              f"entry ({epoch_b}, {start_b}) does not follow ({epoch_a}, {start_a}): epochs must "
                              f"increase and start offsets must not decrease")
        recorded = dict(entries)
        for epoch, start, previous_last_offset in self.epochs:
            if epoch not in recorded:
                yield Finding(ERROR, "leader-epoch-not-in-checkpoint", file, None,
                              f"batches of leader epoch {epoch} start at offset {start}, but the checkpoint has "
                              f"no entry for epoch {epoch}", {"epoch": epoch, "log_start_offset": start})
            elif recorded[epoch] != start and not _epoch_start_compacted(recorded[epoch], start, previous_last_offset):
                yield Finding(ERROR, "leader-epoch-start-mismatch", file, None,
                              f"leader epoch {epoch} starts at offset {start} in the log but at "
                              f"{recorded[epoch]} in the checkpoint",
                              {"epoch": epoch, "log_start_offset": start, "checkpoint_start_offset": recorded[epoch]})
        in_log = {epoch for epoch, _, _ in self.epochs}
        end = self.facts.log_end_offset
        for epoch, start in entries:
            if epoch in in_log:
                continue
            if start > end:
                yield Finding(WARNING, "leader-epoch-beyond-log-end", file, None,
                              f"leader epoch {epoch} starts at {start}, past the log end offset {end}: the data "
                              f"it saw is gone (Kafka truncates the entry on load)", {"epoch": epoch})
            elif start < end:
                yield Finding(WARNING, "leader-epoch-without-batches", file, None,
                              f"leader epoch {epoch} (from offset {start}) has no batch in the log "
                              f"(compacted away, or never written)", {"epoch": epoch})

    # -- one segment's facts, in order -----------------------------------------------------------

    def _segment_findings(self, segment: Segment, report: SegmentReport, replay: "_SegmentReplay") -> Iterator[Finding]:
        """Merge stage 1's findings of a segment with what its batches mean for the partition, in
        the order one pass over the segment finds them (by position, then batch, then check)."""
        if not report.opened:
            yield from (finding for _, finding in report.log_findings)
            return
        self.summary.add(report.counts)
        if report.tail is not None:
            self._transactions_cut(report)
        ordered = report.log_findings + replay.found
        ordered.sort(key=itemgetter(0))
        yield from (finding for _, finding in ordered)
        yield from report.index_findings
        yield from _check_txn_index(segment, report, replay.aborted, replay.abort_markers, self.exact_state)

    def _transactions_cut(self, report: SegmentReport) -> None:
        """Add to a segment's `truncated-tail` what the cut does to transactions: the producer state
        replayed up to it says which of the dropped batches' transactions were already open."""
        notes, still_open, seen = [], [], set()
        for producer_id, base_offset, is_marker in report.tail.transactional:
            if producer_id in seen:
                continue
            seen.add(producer_id)
            status = self.state.producers.get(producer_id)
            first = None if status is None else status.current_txn_first_offset
            if first is not None:
                still_open.append({"producer_id": producer_id, "first_offset": first})
            if is_marker:
                notes.append(f"the transaction marker of producer {producer_id} at offset {base_offset} is lost"
                             + ("" if first is None else f": its transaction from offset {first} is open again"))
            elif first is not None:
                notes.append(f"the open transaction of producer {producer_id} (from offset {first}) loses its "
                             f"batches from offset {base_offset} and stays open")
            else:
                notes.append(f"the transaction producer {producer_id} began at offset {base_offset} is lost")
        for _, finding in report.log_findings:
            if finding.code == "truncated-tail":
                finding.extra["recovery_drops"]["open_transactions"] = still_open
                finding.message += "".join("; " + note for note in notes) + TRUNCATE_HINT

    def _replay(self, batch: BatchFacts, ordinal: int, ordered: list, aborted: list[AbortedTxn],
                abort_markers: set[tuple[int, int]]) -> None:
        last_offset = self.last_offset
        if last_offset is not None and batch.base_offset <= last_offset:
            finding = Finding(ERROR, "offset-not-increasing", batch.path, batch.position,
                              f"batch offsets {batch.base_offset}..{batch.last_offset} do not follow the previous "
                              f"last offset {last_offset}", {"previous_last_offset": last_offset})
            ordered.append(((batch.position, ordinal, _RANK_ORDER), finding))
        if batch.magic >= 2 and batch.partition_leader_epoch >= 0:
            self._check_leader_epoch(batch, ordinal, ordered)
        if self.pending_snapshots or (batch.magic >= 2 and batch.producer_id >= 0):  # else no producer state moves
            sink = self.sink = []
            self._apply_producer_state(batch, aborted, abort_markers)
            if sink:
                ordered.extend(((_position_key(finding), ordinal, _RANK_PRODUCER), finding) for finding in sink)
        if last_offset is None or batch.last_offset > last_offset:
            self.last_offset = batch.last_offset

    def _check_leader_epoch(self, batch: BatchFacts, ordinal: int, ordered: list) -> None:
        """A V2 batch with a leader epoch (>= 0)."""
        epochs = self.epochs
        epoch = batch.partition_leader_epoch
        if epochs and epoch < epochs[-1][0]:
            finding = Finding(
                ERROR, "leader-epoch-decreased", batch.path, batch.position,
                f"leader epoch {epoch} at offset {batch.base_offset} is lower than epoch {epochs[-1][0]} which "
                f"started at offset {epochs[-1][1]}", {"epoch": epoch, "previous_epoch": epochs[-1][0]})
            ordered.append(((batch.position, ordinal, _RANK_EPOCH), finding))
        elif not epochs or epoch > epochs[-1][0]:
            epochs.append((epoch, batch.base_offset, self.last_offset))

    def _apply_producer_state(self, batch: BatchFacts, aborted: list[AbortedTxn],
                              abort_markers: set[tuple[int, int]]) -> None:
        if self.whole:
            self.compare_snapshots_before(batch.base_offset if batch.magic >= 2 else batch.last_offset)
        try:
            txn = self.state.apply(batch)
        except ProducerStateError as exc:
            self.sink.append(_from_error(exc, "transaction-state-invalid", batch.path))
            return
        except CorruptDataError as exc:
            if not self.deep:  # a deep check has reported the unreadable marker already
                self.sink.append(_from_error(exc, "record-corrupt", batch.path))
            return
        if txn is not None:
            aborted.append(txn)
        if batch.is_control and batch.producer_id >= 0:
            records = batch.records()
            if records and records[0].control is not None and records[0].control.name == "ABORT":
                abort_markers.add((batch.producer_id, batch.base_offset))


class _SegmentReplay:
    """Stage 2 over one segment's batch facts, one at a time, in file order."""

    def __init__(self, check: _PartitionCheck):
        self.check = check
        self.found: list[tuple[tuple[int, int, int], Finding]] = []
        """Stage 2's findings, keyed as stage 1's are."""
        self.aborted: list[AbortedTxn] = []
        self.abort_markers: set[tuple[int, int]] = set()
        self.count = 0
        self.first_base_offset: int | None = None
        self.last_offset: int | None = None
        """Of the segment's last intact batch."""

    def batch(self, facts: "BatchFacts | FactsRun") -> None:
        if type(facts) is FactsRun:
            self._run(facts)
            return
        if not self.count:
            self.first_base_offset = facts.base_offset
        self.check._replay(facts, self.count, self.found, self.aborted, self.abort_markers)
        self.count += 1
        self.last_offset = facts.last_offset

    def _run(self, run: "FactsRun") -> None:
        """A run of clean V2 batches at once, when `_replay` would find nothing in it and only note
        new leader epochs and producers' last batches; otherwise batch by batch."""
        import numpy as np

        check = self.check
        columns = run.columns
        base = columns[BASE_OFFSET]
        last = base + columns[LAST_OFFSET_DELTA]
        if check.pending_snapshots:  # compared when the first batch at or past a snapshot's offset replays
            reached = np.flatnonzero((base if run.magic >= 2 else last) >= check.pending_snapshots[0][0])
            if len(reached):
                at = int(reached[0])
                for part in (columns[:, :at], columns[:, at:at + 1], columns[:, at + 1:]):
                    if part.shape[1]:
                        (self._run if part.shape[1] > 1 else self._one_by_one)(FactsRun(run.path, part, run.magic))
                return
        before = np.empty_like(last)  # each batch's previous last offset (they only increase in a clean run)
        before[1:] = np.maximum.accumulate(last)[:-1]
        if check.last_offset is None:
            before[0] = last[0]  # nothing to follow
            if (base[1:] <= before[1:]).any():
                return self._one_by_one(run)  # offset-not-increasing
        else:
            before[0] = check.last_offset
            np.maximum(before, check.last_offset, out=before)
            if (base <= before).any():
                return self._one_by_one(run)
        new_epochs = []
        epochs = columns[LEADER_EPOCH]
        has_epoch = np.flatnonzero(epochs >= 0)
        if len(has_epoch):
            ordered = epochs[has_epoch]
            highest = np.maximum.accumulate(ordered)
            previous = np.empty_like(highest)
            previous[1:] = highest[:-1]
            previous[0] = check.epochs[-1][0] if check.epochs else -1
            if (ordered < previous).any():
                return self._one_by_one(run)  # leader-epoch-decreased
            for row in has_epoch[ordered > previous].tolist():  # a new epoch starts
                prior = None if row == 0 and check.last_offset is None else int(before[row])
                new_epochs.append((int(epochs[row]), int(base[row]), prior))
        producers = check.state.plan_run(columns, last)
        if producers is None:
            return self._one_by_one(run)  # a transaction, or an anomaly to report
        check.state.commit_run(producers, columns, last)
        check.epochs.extend(new_epochs)
        if check.last_offset is None or int(last[-1]) > check.last_offset:
            check.last_offset = int(last[-1])
        if not self.count:
            self.first_base_offset = int(base[0])
        self.count += len(base)
        self.last_offset = int(last[-1])

    def _one_by_one(self, run: "FactsRun") -> None:
        for facts in run.rows():
            self.batch(facts)


@dataclass
class PartitionOutcome:
    """Stage 2 of a partition finished elsewhere (on a Spark executor), replayed on the driver."""

    topic_partition: tuple[str, int]
    findings: list[Finding]
    facts: _PartitionFacts
    summary: Summary

    def run(self) -> Iterator[Finding]:
        return iter(self.findings)


def check_partition(partition: PartitionDir, named: list[Segment] | None, deep: bool,
                    reports: Mapping[str, SegmentReport]) -> PartitionOutcome:
    """Stage 2 of one partition over stage 1 reports made elsewhere, keyed by .log path."""
    summary = Summary(records=0 if deep else None)
    check = _PartitionCheck(partition, named, deep, summary, lambda segment, _active, _consumer: reports[str(segment.log)])
    findings = list(check.run())
    return PartitionOutcome(check.topic_partition, findings, check.facts, summary)


# Where a finding goes among those at the same position of a segment: the order in which one
# pass over a batch makes them (stage 1 and stage 2 findings interleave).
_RANK_BASE_OFFSET, _RANK_ORDER, _RANK_BOUNDS, _RANK_EPOCH, _RANK_RECORDS, _RANK_PRODUCER, _RANK_AFTER = range(7)


def _position_key(finding: Finding) -> int:
    return -1 if finding.position is None else finding.position


# ---------------------------------------------------------------------------------------------
# Stage 1, a segment: the .log (every batch, damage and resynchronisation) and its indexes
# ---------------------------------------------------------------------------------------------


class BatchFacts(NamedTuple):
    """What stage 2 needs of an intact batch: offsets, leader epoch, producer fields and, for a
    transaction marker, its first control record. It answers ProducerState as a `Batch` would."""

    path: str
    position: int
    base_offset: int
    """As verify reads it: a legacy wrapper whose inner offsets are unreadable gives its last offset."""
    last_offset: int
    magic: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    is_transactional: bool
    is_control: bool
    max_timestamp: int
    marker: list[Record] | CorruptDataError | None
    """A producer's control batch: its first record, or why its records cannot be read."""

    @classmethod
    def of(cls, batch: Batch, base: int) -> "BatchFacts":
        marker = None
        if batch.is_control and batch.magic >= 2 and batch.producer_id >= 0:
            try:
                marker = marker_records(batch)[:1]
            except CorruptDataError as exc:  # a ProducerStateError stays one: Kafka's recovery throws there
                marker = type(exc)(exc.message, path=exc.path, position=exc.position,
                                   expected=_plain(exc.expected), actual=_plain(exc.actual))
        return cls(batch.path, batch.position, base, batch.last_offset, batch.magic, batch.partition_leader_epoch,
                   batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_sequence,
                   batch.is_transactional, batch.is_control, batch.max_timestamp, marker)

    def records(self) -> list[Record]:
        if isinstance(self.marker, CorruptDataError):
            raise self.marker
        return self.marker or []


class FactsRun:
    """The facts of consecutive clean batches of one magic, as stage 1's bulk scan read them:
    columns (`bulk_scan.COLUMNS`) rather than one `BatchFacts` each. None is a control batch.

    Handed to a `BatchConsumer`, the columns are the scan's own buffer, which its next range
    overwrites: a consumer that keeps the run keeps `held()`."""

    def __init__(self, path: str, columns, magic: int = 2):
        self.path = path
        self.columns = columns
        self.magic = magic

    def held(self) -> "FactsRun":
        """This run with columns of its own."""
        return FactsRun(self.path, self.columns.copy(), self.magic)

    def rows(self) -> Iterator[BatchFacts]:
        path, magic = self.path, self.magic
        for (position, base, delta, epoch, attributes, max_timestamp, producer_id, producer_epoch,
             base_sequence) in zip(*self.columns[[POSITION, BASE_OFFSET, LAST_OFFSET_DELTA, LEADER_EPOCH, ATTRIBUTES,
                                                  MAX_TIMESTAMP, PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE]].tolist()):
            last_sequence = batch_last_sequence(base_sequence, delta)
            yield BatchFacts(path, position, base, java_long(base + delta), magic, epoch, producer_id, producer_epoch,
                             base_sequence, last_sequence, bool(attributes & ATTR_TRANSACTIONAL),
                             bool(attributes & ATTR_CONTROL), max_timestamp, None)


@dataclass
class SegmentReport:
    """Stage 1 of one segment: what its own files say, and the facts stage 2 carries across
    segments. Picklable: it comes back from a Spark executor as it is."""

    log: str
    counts: Summary
    """segments, log_bytes, batches, records, intact_bytes, damaged_bytes."""
    opened: bool = True
    log_findings: list[tuple[tuple[int, int, int], Finding]] = field(default_factory=list)
    """The .log's findings keyed (position, batch ordinal, rank), to merge with stage 2's."""
    batches: list[BatchFacts | FactsRun] = field(default_factory=list)
    """Every intact batch, in file order (empty when they were handed to a consumer instead)."""
    index_findings: list[Finding] = field(default_factory=list)
    """The .index's and the .timeindex's."""
    txn_entries: list[AbortedTxn] | None = None
    txn_findings: list[Finding] = field(default_factory=list)
    """What the .txnindex says on its own; stage 2 compares its entries with the ABORT markers."""
    tail: RecoveryDrops | None = None
    """What recovery truncates from the end of an active segment read offline (its `truncated-tail`);
    stage 2 says which open transactions that touches."""


BatchConsumer = Callable[[BatchFacts | FactsRun], None]
"""Takes each intact batch's facts as stage 1 reads them; a `FactsRun` only for the call."""


def check_segment(segment: Segment, is_active: bool, deep: bool = True,
                  on_progress: ProgressCallback | None = None, on_batch: BatchConsumer | None = None,
                  live: bool = False) -> SegmentReport:
    """Stage 1: everything a segment's own files say (batches, CRCs, records, damage, offset and
    time indexes). Needs nothing from other segments, so it runs wherever the files can be read.
    Each intact batch's facts go to `on_batch` as they are read, or without one into the report.
    `live`: a broker may be appending to the active segment (`broker.BrokerState.live`)."""
    report = SegmentReport(str(segment.log), Summary(records=0 if deep else None))
    try:
        log = SegmentFile(segment.log)
    except InputError as exc:
        report.opened = False
        report.log_findings.append(((0, 0, 0), _from_error(exc, "io-error", str(segment.log))))
        return report
    with log:
        report.counts.segments += 1
        report.counts.log_bytes += log.file_size
        scan = _LogScan(log, segment, deep, report, on_progress, on_batch or functools.partial(_keep, report.batches))
        scan.is_active, scan.live = is_active, live
        scan.run()
        report.index_findings.extend(_check_offset_index(segment, log, scan.table, is_active))
        report.index_findings.extend(_check_time_index(segment, log, scan.table, is_active))
    report.txn_entries, report.txn_findings = _read_txn_index(segment)
    return report


def _keep(batches: list, facts: "BatchFacts | FactsRun") -> None:
    batches.append(facts.held() if type(facts) is FactsRun else facts)


class _BatchTable:
    """The intact batches of a segment, column by column (compact for millions of batches); for a
    segment without index files only their count, extent and first and largest values."""

    def __init__(self, keep_rows: bool = True):
        self.keep_rows = keep_rows
        self.count = 0
        self.first_base_offset: int | None = None
        self.positions = array("q")
        self.end = 0
        """Where the last batch ends."""
        self.base_offsets = array("q")
        self.last_offsets = array("q")
        self.prefix_max_timestamps = array("q")
        """Largest batch max timestamp up to and including each batch."""
        self.max_timestamp = -1
        """Of the whole segment so far (-1 when no batch has a timestamp)."""

    def add(self, batch: Batch, base_offset: int) -> None:
        if not self.count:
            self.first_base_offset = base_offset
        self.count += 1
        self.end = batch.position + batch.size
        if batch.max_timestamp > self.max_timestamp:
            self.max_timestamp = batch.max_timestamp
        if self.keep_rows:
            self.positions.append(batch.position)
            self.base_offsets.append(base_offset)
            self.last_offsets.append(batch.last_offset)
            self.prefix_max_timestamps.append(self.max_timestamp)

    def extend(self, positions, sizes, base_offsets, last_offsets, max_timestamps) -> None:
        """`add` for many batches, from numpy columns."""
        import numpy as np

        if not self.count:
            self.first_base_offset = int(base_offsets[0])
        self.count += len(positions)
        self.end = int(positions[-1] + sizes[-1])
        if not self.keep_rows:
            self.max_timestamp = max(self.max_timestamp, int(max_timestamps.max()))
            return
        prefix = np.maximum.accumulate(np.maximum(max_timestamps, self.max_timestamp))
        for kept, column in ((self.positions, positions), (self.base_offsets, base_offsets),
                             (self.last_offsets, last_offsets), (self.prefix_max_timestamps, prefix)):
            # the int64 column's own bytes, not a copy of them (`tobytes`) first
            kept.frombytes(memoryview(np.ascontiguousarray(column, dtype=np.int64)).cast("B"))
        self.max_timestamp = int(prefix[-1])

    def __len__(self) -> int:
        return self.count

    def at_position(self, position: int) -> int | None:
        index = bisect.bisect_left(self.positions, position)
        return index if index < len(self.positions) and self.positions[index] == position else None

    def holding(self, offset: int) -> int | None:
        """Index of the batch whose offsets include `offset`, if any."""
        index = bisect.bisect_left(self.last_offsets, offset)
        return index if index < len(self.last_offsets) and self.base_offsets[index] <= offset else None

    def last_at_or_before(self, offset: int) -> int:
        """Index of the last batch whose last offset is <= `offset` (-1 if none)."""
        return bisect.bisect_right(self.last_offsets, offset) - 1



@dataclass
class _Damage:
    start: int
    end: int
    code: str
    what: str
    resync: int | None
    intact_bytes: int = 0
    intact_batches: int = 0
    offsets: list[int] = field(default_factory=list)
    drops: RecoveryDrops | None = None
    """A `truncated-tail`: what recovery cuts there."""


class _LogScan:
    """Walk a segment as Kafka's reader does, check every batch, and step over damage."""

    def __init__(self, log: SegmentFile, segment: Segment, deep: bool, report: SegmentReport,
                 on_progress: ProgressCallback | None, on_batch: BatchConsumer):
        self.log = log
        self.on_batch = on_batch
        self.segment = segment
        self.deep = deep
        self.report = report
        self.counts = report.counts
        self.on_progress = on_progress
        # only the index checks read the table's rows: without index files a count will do
        self.table = _BatchTable(keep_rows=segment.index is not None or segment.timeindex is not None)
        self.damage: list[_Damage] = []
        self.reported = 0
        self.last_offset: int | None = None
        """Largest last offset of this segment's intact batches so far."""
        self.is_active = False
        """The partition's last segment: a broker may be appending to it as we read."""
        self.live = False
        """A broker runs on the log dir (or --live): the active segment's end may be a write in progress."""
        self.bulk = _BulkScan(self) if bulk_scan.wanted(log.buffer, log.end, deep, legacy=True) else None

    def run(self) -> None:
        position: int | None = 0
        while position is not None:
            position = self._walk_from(position)
        self.bulk = None  # its numpy view pins the map
        after = (_RANK_AFTER, self.counts.batches)  # found after every batch, as one pass finds them
        findings = self.report.log_findings
        for damage in self.damage:
            findings.append(((damage.start, after[1], after[0]), _damage_finding(self.log.path, damage)))
            self.counts.damaged_bytes += damage.end - damage.start
        if self.table and self.table.first_base_offset > self.segment.base_offset:
            findings.append(((0, after[1], after[0]), Finding(
                INFO, "segment-offset-gap", self.log.path, 0,
                f"the first batch starts at offset {self.table.first_base_offset}, after the base offset "
                f"{self.segment.base_offset} in the file name (compaction or DeleteRecords)")))
        if self.on_progress is not None:
            self.on_progress(self.log.file_size - self.reported)

    def _walk_from(self, position: int) -> int | None:
        """Read batches from `position`; return where to continue after damage, or None at the end."""
        log, bulk = self.log, self.bulk
        while True:
            if bulk is not None:
                position = bulk.accept_from(position)
            taken = 0
            for entry in log.entries(position):
                if isinstance(entry, BadEntry) or not entry.crc_valid:
                    return self._entry_damage(entry)
                self._accept(entry)
                taken += 1
                if bulk is not None and taken == bulk.then_one_by_one:
                    position = entry.end
                    break
            else:
                break
        if log.stop is Stop.END:
            return None
        start = log.stop_position
        if log.stop is Stop.SHORT_TAIL:
            self._add_damage(start, log.end, "short-tail",
                             f"{log.end - start} trailing bytes, too few for a batch header (17)", None, writing=True)
            return None
        resync = self._resync(start + 1)
        declared = LOG_OVERHEAD + int.from_bytes(log.buffer[start + 8 : start + 12], "big", signed=True)
        if log.stop is Stop.CORRUPT_SIZE:
            what = f"the entry at {start} declares a size of {declared - LOG_OVERHEAD} bytes, below the minimum 14 " \
                   f"(Kafka's reader throws CorruptRecordException)"
            code = "corrupt-size"
        elif resync is None:
            what = f"the batch at {start} declares {declared} bytes but only {log.end - start} remain: a truncated write"
            code = "truncated-batch"
        else:
            what = f"the batch at {start} declares {declared} bytes, running past the end of the file: " \
                   f"its length field is corrupt"
            code = "corrupt-length"
        self._add_damage(start, resync if resync is not None else log.end, code, what, resync,
                         writing=log.stop is Stop.PARTIAL_ENTRY)
        return resync

    def _write_in_progress(self, start: int, end: int, writing: bool, entry_end: int | None) -> str | None:
        """What a live broker's write looks like at the end of the active segment, if [start, end) does:
        a batch not yet complete (`writing`), or zeros: log.preallocate=true reserves the segment
        ahead of the writes, a batch's first bytes are zeros (its base offset's high bytes), and a
        batch being written into preallocated space is followed by them."""
        buf, length = self.log.buffer, end - start
        if _all_zero(buf, start, end):
            return (f"{length} bytes are zeros: the space log.preallocate=true reserves ahead of the writes, or the "
                    f"first bytes of a batch being written")
        if writing:
            declared = _declared_size(buf, start, end)
            return f"{length} bytes are a {'' if declared is None else f'{declared}-byte '}batch still being written"
        if entry_end is not None and entry_end < end and _all_zero(buf, entry_end, end):
            return (f"{length} bytes are a {entry_end - start}-byte batch being written into the zeros "
                    f"log.preallocate=true reserves ahead of the writes")
        return None

    def _entry_damage(self, entry: Batch | BadEntry) -> int | None:
        """A batch of plausible size that is unreadable or fails its CRC. Its length is trusted only
        when a valid batch (or the end of the file) follows it."""
        if isinstance(entry, BadEntry):
            code, what = "corrupt-batch", f"unreadable batch at {entry.position}: {entry.error.message}"
        else:
            code, what = "crc-mismatch", (f"batch at {entry.position} (offsets up to {entry.last_offset}) fails its "
                                          f"CRC{'-32C' if entry.magic >= 2 else '-32'}: stored {entry.crc}")
        if entry.end == self.log.end or self._plausible_batch_at(entry.end):
            self._add_damage(entry.position, entry.end, code, what, entry.end if entry.end < self.log.end else None,
                             entry_end=entry.end)
            return entry.end if entry.end < self.log.end else None
        resync = self._resync(entry.position + 1)
        self._add_damage(entry.position, resync if resync is not None else self.log.end, code,
                         what + "; its length cannot be trusted either", resync, entry_end=entry.end)
        return resync

    def _add_damage(self, start: int, end: int, code: str, what: str, resync: int | None, *,
                    writing: bool = False, entry_end: int | None = None) -> None:
        """`writing`: the walk stopped at an entry not complete in the file; `entry_end`: where the
        bad entry at `start` says it ends."""
        zeros = _all_zero(self.log.buffer, start, end)
        if zeros:
            code, what = "zero-filled", f"{end - start} zero bytes from {start} (" + what + ")"
        drops = None
        if self.is_active and resync is None:  # the end of the active segment
            if self.live:
                progress = self._write_in_progress(start, end, writing, entry_end)
                if progress is not None:
                    self._note_still_being_written(start, end, progress)
                    return
            else:  # what Kafka's recovery truncates after a crash
                drops = self.report.tail = recovery_drops(self.log.buffer, start, end)
                code = "truncated-tail"
                if self.damage:  # LogSegment.recover stops at the first invalid entry
                    what += (f"; recovery cuts earlier still, at byte {self.damage[0].start} (this segment's first "
                             f"damage), and everything after it goes too")
        self.damage.append(_Damage(start, end, code, what, resync, drops=drops))

    def _note_still_being_written(self, start: int, end: int, progress: str) -> None:
        self.report.log_findings.append(((start, self.counts.batches, _RANK_AFTER), Finding(
            WARNING, "still-being-written", self.log.path, start,
            f"at the end of the active segment, the last {progress}: a live broker's write in progress, not "
            f"corruption (after a crash, Kafka's recovery would truncate them)",
            {"length": end - start, "declared_size": _declared_size(self.log.buffer, start, end)})))

    def _accept(self, batch: Batch) -> None:
        counts = self.counts
        ordinal = counts.batches
        findings = self.report.log_findings
        last_offset = batch.last_offset
        try:
            if self.deep or batch.magic >= 2 or not batch.compression_id:
                base = batch.base_offset  # a legacy wrapper decompresses to find its first inner offset
            else:
                base = self.legacy_base_floor(last_offset)
        except CorruptDataError as exc:
            base = last_offset
            unreadable = _from_error(exc, "record-corrupt", batch.path)
            findings.append(((_position_key(unreadable), ordinal, _RANK_BASE_OFFSET), unreadable))
        segment_base = self.segment.base_offset
        if base < segment_base:
            findings.append(((batch.position, ordinal, _RANK_BOUNDS), Finding(
                ERROR, "offset-below-segment-base", batch.path, batch.position,
                f"batch offset {base} is below the segment's base offset {segment_base}")))
        if not 0 <= last_offset - segment_base <= INT32_MAX:
            findings.append(((batch.position, ordinal, _RANK_BOUNDS), Finding(
                ERROR, "offset-overflow", batch.path, batch.position,
                f"last offset {last_offset} is not within 2^31-1 of the base offset {segment_base} "
                f"(LogSegmentOffsetOverflowException)")))
        if self.deep:
            for finding in _record_findings(batch, base, counts):
                findings.append(((_position_key(finding), ordinal, _RANK_RECORDS), finding))
        self.on_batch(BatchFacts.of(batch, base))
        self.table.add(batch, base)
        if self.last_offset is None or last_offset > self.last_offset:
            self.last_offset = last_offset
        counts.batches = ordinal + 1
        counts.intact_bytes += batch.size
        if self.damage:
            latest = self.damage[-1]
            latest.intact_bytes += batch.size
            latest.intact_batches += 1
            latest.offsets = [latest.offsets[0] if latest.offsets else base, last_offset]
        if self.on_progress is not None:
            end = batch.position + batch.size
            if end - self.reported >= PROGRESS_STEP:
                self.on_progress(end - self.reported)
                self.reported = end

    def legacy_base_floor(self, last_offset: int) -> int:
        """A shallow check's stand-in for a compressed legacy wrapper's base offset, which only its
        inner messages know (Kafka's recovery does not open it either): the lowest it can be, just
        past every batch before it in the segment (or the segment's base offset), capped at its last
        offset. `kernels.scan_legacy` computes the same."""
        return min(last_offset, self.legacy_floor())

    def legacy_floor(self) -> int:
        base = self.segment.base_offset
        return base if self.last_offset is None or self.last_offset < base else min(self.last_offset + 1, (1 << 63) - 1)

    def accept_clean(self, columns, magic: int = 2) -> None:
        """`_accept` for a run of batches the bulk scan vouched for, in which it would find nothing."""
        counts = self.counts
        positions, sizes, base = columns[POSITION], columns[SIZE], columns[BASE_OFFSET]
        last = base + columns[LAST_OFFSET_DELTA]
        if self.deep:
            counts.records += int(columns[RECORDS_COUNT].sum())
        self.on_batch(FactsRun(self.log.path, columns, magic))
        self.table.extend(positions, sizes, base, last, columns[MAX_TIMESTAMP])
        largest = int(last.max())
        if self.last_offset is None or largest > self.last_offset:
            self.last_offset = largest
        counts.batches += len(positions)
        size = int(sizes.sum())
        counts.intact_bytes += size
        if self.damage:
            latest = self.damage[-1]
            latest.intact_bytes += size
            latest.intact_batches += len(positions)
            latest.offsets = [latest.offsets[0] if latest.offsets else int(base[0]), int(last[-1])]
        if self.on_progress is not None:
            end = int(positions[-1] + sizes[-1])
            if end - self.reported >= PROGRESS_STEP:
                self.on_progress(end - self.reported)
                self.reported = end

    # -- resynchronisation -----------------------------------------------------------------------

    def _plausible_batch_at(self, position: int) -> bool:
        """A header whose offset can follow what was read so far, a size that fits, and a valid CRC."""
        buf, end = self.log.buffer, self.log.end
        if position > end - 17:
            return False
        offset, size = _OFFSET_AND_SIZE.unpack_from(buf, position)
        if size < 14 or position + LOG_OVERHEAD + size > end:
            return False
        floor = self.segment.base_offset if self.last_offset is None else self.last_offset + 1
        if not floor <= offset <= self.segment.base_offset + INT32_MAX:
            return False
        magic = buf[position + 16]
        batch_end = position + LOG_OVERHEAD + size
        if magic == 2:
            return size + LOG_OVERHEAD >= 61 and crc32c(memoryview(buf)[position + 21 : batch_end]) == \
                int.from_bytes(buf[position + 17 : position + 21], "big")
        if magic in (0, 1):
            return zlib.crc32(memoryview(buf)[position + 16 : batch_end]) == \
                int.from_bytes(buf[position + 12 : position + 16], "big")
        return False

    def _resync(self, start: int) -> int | None:
        """The first position from `start` where a plausible batch begins, or None."""
        buf, last = self.log.buffer, self.log.end - 17
        position = start
        while position < last:
            candidate = _MAGIC_CANDIDATE.search(buf, position + MAGIC_OFFSET, last + MAGIC_OFFSET)
            if candidate is None:
                return None
            position = candidate.start() - MAGIC_OFFSET
            if buf[position + 8 : position + 12] == b"\x00\x00\x00\x00":
                # inside zeros: a header's size field needs a non-zero byte, so jump near the next one
                non_zero = _next_non_zero(buf, position + 8, last + 12)
                if non_zero is None:
                    return None
                position = max(position + 1, non_zero - 11)
                continue
            if self._plausible_batch_at(position):
                return position
            position += 1
        return None


class _BulkScan:
    """Stage 1 over runs of clean V2 batches, read by the compiled `bulk_scan` kernel. A batch
    that `_accept` could report on (offsets outside the segment, records the kernel did not walk, a
    control batch) goes through `_accept` itself, in order; the kernel stops before anything else
    and `_walk_from`'s per-batch path takes it from there."""

    def __init__(self, scan: _LogScan):
        self.scan = scan
        self.reader = bulk_scan.Reader(scan.log)
        self.kernel = self.reader.kernel
        self.lz4_out = []
        """Where `_check_lz4` decodes lz4 payloads, a buffer per thread, made on first use."""

    @property
    def then_one_by_one(self) -> int:
        return self.reader.then_one_by_one

    def accept_from(self, position: int) -> int:
        """Accept what the kernel vouches for from `position`; return where it stopped."""
        scan, log, reader = self.scan, self.scan.log, self.reader
        lowest, highest = scan.segment.base_offset, scan.segment.base_offset + INT32_MAX
        start = position
        stopped = False
        while position < log.end and not stopped:
            magic = log.buffer[position + MAGIC_OFFSET] if position + MAGIC_OFFSET < log.end else 2
            if magic >= 2:
                for columns, n, position, stopped in reader.runs(position, scan.deep):
                    if n:
                        self._accept(columns[:, :n], lowest, highest, 2)
                        reader.release_before(position)
                continue
            # a legacy message set, its wrappers opened only where deep (each call needs the floor
            # the one before left, so none runs ahead)
            n, position, stopped = reader.read(position, False, scan.legacy_floor())
            if n:
                columns = reader.columns[:, :n].copy()  # (whole rows, for the kernels)
                if scan.deep:
                    self._open_wrappers(columns, magic)
                self._accept(columns, lowest, highest, magic)
                reader.release_before(position)
        reader.read_anything(position != start)
        return position

    def _accept(self, columns, lowest: int, highest: int, magic: int) -> None:
        import numpy as np

        scan = self.scan
        base = columns[BASE_OFFSET]
        last = base + columns[LAST_OFFSET_DELTA]
        control = columns[ATTRIBUTES] & ATTR_CONTROL != 0
        one_by_one = (base < lowest) | (last < lowest) | (last > highest) | control
        if scan.deep:
            compressed = np.flatnonzero((columns[bulk_scan.CHECKED] == 0) & (columns[ATTRIBUTES] & ATTR_CODEC != 0)
                                        & ~one_by_one & (columns[RECORDS_COUNT] >= 0))
            if len(compressed) and magic >= 2:  # (`_open_wrappers` has read V0/V1 wrappers)
                columns = np.ascontiguousarray(columns)  # (whole rows, for the kernels)
                self._check_compressed(columns, compressed)
            one_by_one |= columns[bulk_scan.CHECKED] == 0
        start = 0
        log = scan.log
        for row in np.flatnonzero(one_by_one).tolist():
            if row > start:
                scan.accept_clean(columns[:, start:row], magic)
            position = int(columns[POSITION, row])
            if magic >= 2:
                scan._accept(parse_batch(log.buffer, position, log.path, log.decompress_limit))
            else:
                scan._accept(legacy.parse_batch(log.buffer, position, position + int(columns[SIZE, row]), log.path,
                                                log.decompress_limit))
            start = row + 1
        if start < columns.shape[1]:
            scan.accept_clean(columns[:, start:], magic)

    def _check_compressed(self, columns, rows) -> None:
        """Decompress these batches and let the kernel walk their records (it marks those that
        agree): lz4 frames in the kernel too, the others and those it refuses here. One that will
        not decompress is left to `_accept`, which reports why."""
        import numpy as np

        log = self.scan.log
        buffer, limit = log.buffer, log.decompress_limit
        lz4 = columns[ATTRIBUTES, rows] & ATTR_CODEC == codecs.IDS["lz4"]
        if lz4.any():
            rows = np.concatenate((rows[~lz4], self._check_lz4(columns, rows[lz4], limit)))
        rows = rows.tolist()
        ranges = [(attributes & ATTR_CODEC, position + HEADER_SIZE, position + size) for position, size, attributes
                  in zip(columns[POSITION, rows].tolist(), columns[SIZE, rows].tolist(),
                         columns[ATTRIBUTES, rows].tolist())]
        # a budget at a time bounds what is held at once (each batch is bounded by `limit`)
        for first, results in codecs.decompress_in_rounds(buffer, ranges, magic=2, limit=limit,
                                                           budget=self.reader.step):
            payloads, spans = codecs.laid_end_to_end(results)
            kept = [(row, span) for row, span in zip(rows[first:], spans) if span is not None]
            if kept:
                self.kernel.agree_each(np.frombuffer(payloads, dtype=np.uint8),
                                       np.array([0] + [end for _, (_, end) in kept], dtype=np.int64), columns,
                                       np.array([row for row, _ in kept], dtype=np.int64))

    def _open_wrappers(self, columns, magic: int) -> None:
        """Deep verify of V0/V1 messages of `magic`: each wrapper's message set is decompressed and
        read by `decode_legacy_each` as `LegacyBatch.records` reads it. A wrapper whose records it
        reads and in which `_record_findings` would find nothing gets its real base offset (its
        first record's) and is marked checked, as is every uncompressed message (`scan_legacy` read
        it whole); the rest are left to `_accept`'s per-batch path, which reports what it finds."""
        import numpy as np

        log, view = self.scan.log, self.reader.view
        codec = columns[ATTRIBUTES] & ATTR_CODEC
        columns[bulk_scan.CHECKED] = codec == 0
        wrappers = np.flatnonzero(codec != 0)
        starts, ends = np.full(columns.shape[1], -1, dtype=np.int64), np.zeros(columns.shape[1], dtype=np.int64)
        starts[wrappers], ends[wrappers] = bulk_scan.wrapper_values(view, columns[POSITION, wrappers], codec[wrappers],
                                                                    magic)
        wrappers = wrappers[starts[wrappers] >= 0].tolist()
        in_payloads = np.ones(columns.shape[1], dtype=np.int64)
        first_record = np.empty(columns.shape[1], dtype=np.int64)
        ranges = [(int(codec[row]), int(starts[row]), int(ends[row])) for row in wrappers]
        for first, results in codecs.decompress_in_rounds(log.buffer, ranges, magic=magic, limit=log.decompress_limit,
                                                           budget=self.reader.step):
            taken = wrappers[first:first + len(results)]
            payloads, spans = codecs.laid_end_to_end(results)
            round_starts, round_ends = np.full_like(starts, -1), np.zeros_like(ends)
            for row, span in zip(taken, spans):
                if span is not None:
                    round_starts[row], round_ends[row] = span
            if payloads:
                self._check_wrappers(columns, taken[0], taken[-1] + 1, np.frombuffer(payloads, np.uint8),
                                     round_starts, round_ends, in_payloads, first_record, magic)

    def _check_wrappers(self, columns, row: int, stop: int, payloads, starts, ends, in_payloads, first_record,
                        magic: int) -> None:
        """`_open_wrappers` for the rows row..stop-1 whose decompressed message sets lie in
        `payloads` (start -1: not these)."""
        import numpy as np

        records = np.empty((len(bulk_scan.RECORD_COLUMNS), max(1024, len(payloads) // bulk_scan.SMALLEST_LEGACY_ENTRY
                                                                + stop - row)), dtype=np.int64)
        legacy_records = np.empty((len(bulk_scan.LEGACY_RECORD_COLUMNS), records.shape[1]), dtype=np.int64)
        done, n = self.kernel.decode_legacy_each(self.reader.view, payloads, columns, row, stop, starts, ends,
                                                 in_payloads, first_record, records, 0, legacy_records)
        assert done == stop  # room for the smallest entries the payloads could hold
        rows = np.arange(row, stop)
        rows = rows[(starts[row:stop] >= 0) & (first_record[row:stop] != bulk_scan.NOT_DECODED)]
        if not len(rows):
            return
        offsets, firsts = records[bulk_scan.R_OFFSET, :n], first_record[rows]
        lasts = firsts + columns[RECORDS_COUNT, rows] - 1
        wrapper_last = columns[BASE_OFFSET, rows] + columns[LAST_OFFSET_DELTA, rows]
        # what `_record_findings` checks: offsets increasing and within the wrapper's, a V0 wrapper's
        # offset its last record's, the largest CreateTime timestamp the wrapper's (inner CRCs and
        # magics: `decode_legacy_each` refuses those)
        increasing = np.ones(n, dtype=bool)
        increasing[1:] = offsets[1:] > offsets[:-1]
        increasing[firsts] = True
        clean = np.logical_and.reduceat(increasing, firsts) & (offsets[lasts] <= wrapper_last)
        if magic == 0:
            clean &= offsets[lasts] == wrapper_last
        else:
            create_time = columns[ATTRIBUTES, rows] & legacy.ATTR_LOG_APPEND_TIME == 0
            largest = np.maximum.reduceat(records[bulk_scan.R_TIMESTAMP, :n], firsts)
            clean &= ~create_time | (largest == columns[MAX_TIMESTAMP, rows])
        rows = rows[clean]
        base = offsets[firsts[clean]]
        columns[LAST_OFFSET_DELTA, rows] = wrapper_last[clean] - base
        columns[BASE_OFFSET, rows] = base
        columns[bulk_scan.CHECKED, rows] = 1

    def _check_lz4(self, columns, rows, limit: int):
        """`kernels.lz4_each` then `agree_each` on these lz4 batches, an output buffer at a
        time, in pieces of about equal compressed bytes shared among threads; returns the rows
        whose frames the kernel refused."""
        import numpy as np

        sizes = np.cumsum(columns[SIZE, rows])
        threads = codecs.threads_for(int(sizes[-1]))
        while len(self.lz4_out) < threads:
            self.lz4_out.append(np.empty(self.reader.step, dtype=np.uint8))
        pieces = 4 * threads if threads > 1 else 1
        cuts = [0, *np.searchsorted(sizes, [sizes[-1] * piece // pieces for piece in range(1, pieces)]).tolist(),
                len(rows)]
        refused = codecs.in_pieces(lambda piece, slot: self._check_lz4_part(
            columns, rows[cuts[piece]:cuts[piece + 1]], limit, self.lz4_out[slot]), pieces, threads)
        return np.concatenate(refused)

    def _check_lz4_part(self, columns, rows, limit: int, out):
        import numpy as np

        positions = columns[POSITION, rows]
        starts, ends = positions + HEADER_SIZE, positions + columns[SIZE, rows]
        bounds, decoded = np.empty(len(rows) + 1, dtype=np.int64), np.empty(len(rows), dtype=np.int64)
        done = 0
        while done < len(rows):
            went = self.kernel.lz4_each(self.reader.view, starts[done:], ends[done:], limit, out, bounds[done:],
                                        decoded[done:])
            kept = done + np.flatnonzero(decoded[done:done + went])
            if len(kept):  # refused frames hold no bytes: the kept ones lie end to end
                self.kernel.agree_each(out, np.append(bounds[kept], bounds[done + went]), columns, rows[kept])
            done += went
        return rows[decoded == 0]


def _epoch_start_compacted(recorded_start: int, first_in_log: int, previous_last_offset: int | None) -> bool:
    """The checkpoint may name an offset the log no longer holds: retention or the cleaner removed
    the epoch's first batches (LeaderEpochFileCache keeps the entry). That is consistent as long as
    no earlier epoch's batch sits at or after the recorded start."""
    return recorded_start <= first_in_log and (previous_last_offset is None or recorded_start > previous_last_offset)


def _declared_size(buf, start: int, end: int) -> int | None:
    """The size the entry at `start` declares (with its offset and size fields), if it is there."""
    return LOG_OVERHEAD + int.from_bytes(buf[start + 8 : start + 12], "big", signed=True) \
        if end - start >= LOG_OVERHEAD else None


def _damage_finding(path: str, damage: _Damage) -> Finding:
    length = damage.end - damage.start
    if damage.drops is not None:
        return _truncated_tail_finding(path, damage)
    if damage.resync is None:
        after = "no valid batch follows: nothing after it can be read"
    else:
        offsets = f", offsets {damage.offsets[0]}..{damage.offsets[1]}" if damage.offsets else ""
        after = (f"resynchronised at {damage.resync}: {damage.intact_bytes} intact bytes "
                 f"({damage.intact_batches} batches{offsets}) follow")
    return Finding(ERROR, damage.code, path, damage.start,
                   f"bytes {damage.start}..{damage.end} ({length}) are damaged: {damage.what}; {after}",
                   {"end": damage.end, "length": length, "resync_position": damage.resync,
                    "intact_bytes_after": damage.intact_bytes, "intact_batches_after": damage.intact_batches,
                    "intact_offsets_after": damage.offsets or None})


def _truncated_tail_finding(path: str, damage: _Damage) -> Finding:
    """The end of an active segment read offline: what Kafka's recovery (LogSegment.recover, run on
    the active segment at every start after a crash) truncates, and what that loses."""
    drops = damage.drops
    return Finding(ERROR, "truncated-tail", path, damage.start,
                   f"Kafka's recovery truncates the segment at byte {damage.start}, dropping its last {drops.bytes} "
                   f"bytes ({damage.what}): {_lost(drops)}",
                   {"end": damage.end, "length": drops.bytes, "recovery_drops": drops.to_json()})


TRUNCATE_HINT = ("; `kafkalog rebuild-index --truncate` makes the same cut offline, keeping a backup (read as offline: "
                 "--live if a broker is still writing this segment)")


def _lost(drops: RecoveryDrops) -> str:
    if drops.first_offset is None and drops.records == 0:
        return ("no record is lost: zeros are what log.preallocate=true leaves ahead of the writes when the broker "
                "does not stop cleanly, or what a crash left")
    if drops.first_offset is None:
        return "the offsets and records of the batch they began cannot be read"
    offsets = (f"offsets {drops.first_offset}..{drops.last_offset}" if drops.last_offset is not None
               else f"offsets from {drops.first_offset}")
    records = "an unknown number of records" if drops.records is None else \
        f"{drops.records} record{'' if drops.records == 1 else 's'}"
    producers = ""
    if drops.producer_ids:
        listed = ", ".join(map(str, drops.producer_ids))
        producers = (f"; producers {listed} go back to their last batches before the cut" if len(drops.producer_ids) > 1
                     else f"; producer {listed} goes back to its last batch before the cut")
    return f"{offsets} ({records}) are lost{producers}"


def _record_findings(batch: Batch, base: int, summary: Summary) -> list[Finding]:
    """Read every record and check what Kafka's readers rely on: framing, offsets inside the batch
    and increasing, legacy inner CRCs and wrapper offsets, the batch max timestamp. A V2 batch is
    skimmed first (every length walked, no Record built); only one the skim refuses is decoded, for
    the exact finding."""
    skimmed = None
    if batch.magic >= 2 and base == batch.base_offset:
        try:
            skimmed = skim_records(batch)
        except DecompressionError as exc:  # what decoding would raise, without decompressing (a bomb) twice
            return [_from_error(exc, "record-corrupt", batch.path)]
        except CorruptDataError:
            pass  # decoding reports it
    findings = []
    if skimmed is not None:
        count, largest = skimmed
    else:
        try:
            records = batch.records()
        except CorruptDataError as exc:
            return [_from_error(exc, "record-corrupt", batch.path)]
        count = len(records)
        previous = None
        for record in records:
            if not base <= record.offset <= batch.last_offset or (previous is not None and record.offset <= previous):
                findings.append(Finding(ERROR, "record-offset-invalid", batch.path, batch.position,
                                        f"record offset {record.offset} is outside {base}..{batch.last_offset} or "
                                        f"does not follow the previous record's {previous}", {"offset": record.offset}))
                break
            previous = record.offset
            if record.legacy_crc_valid is False and record.position is None:
                findings.append(Finding(ERROR, "inner-crc-mismatch", batch.path, batch.position,
                                        f"inner message {record.offset} of the compressed wrapper fails its CRC-32",
                                        {"offset": record.offset}))
        if batch.magic == 0 and batch.compression_id and records and records[-1].offset != batch.last_offset:
            findings.append(Finding(ERROR, "wrapper-offset-mismatch", batch.path, batch.position,
                                    f"wrapper offset {batch.last_offset} is not its last inner offset "
                                    f"{records[-1].offset}"))
        largest = max((record.timestamp for record in records), default=None)
    summary.records += count
    if batch.timestamp_type == "CreateTime" and count:
        if largest != batch.max_timestamp:
            findings.append(Finding(WARNING, "max-timestamp-mismatch", batch.path, batch.position,
                                    f"the batch's max timestamp {batch.max_timestamp} is not its largest record "
                                    f"timestamp {largest} (time index and timestamp lookups use the former)",
                                    {"max_timestamp": batch.max_timestamp, "largest_record_timestamp": largest}))
    return findings


# ---------------------------------------------------------------------------------------------
# Indexes, by meaning (FORMAT.md 4.3)
# ---------------------------------------------------------------------------------------------


def _index_path(segment: Segment, suffix: str) -> str:
    return str(Path(segment.log).with_suffix(suffix))


def _open_index(kind: type, path: Path, base: int) -> tuple[IndexFile | None, list[Finding]]:
    try:
        return kind(path, base), []
    except KafkaLogError as exc:
        return None, [_from_error(exc, "io-error", str(path))]


def _index_prefix(index: IndexFile, is_active: bool, file: str, what: str) -> tuple[int, list[Finding]]:
    """How many entries are real, and what to say about a zero-filled tail after them."""
    findings = []
    if index.trailing_bytes:
        findings.append(Finding(ERROR, f"{what}-size", file, index.entry_count * index.ENTRY.size,
                                f"{len(index.data)} bytes is not a multiple of the {index.ENTRY.size}-byte entry",
                                {"size": len(index.data)}))
    whole = len(index.data) - index.trailing_bytes
    if whole and not index.data[:whole].strip(b"\x00"):
        tail = (0, whole)  # nothing but preallocation
    else:
        tail = index.zero_tail()
    if tail is None:
        return index.entry_count, findings
    slot, length = tail
    position = slot * index.ENTRY.size
    if is_active:
        findings.append(Finding(INFO, f"{what}-preallocated", file, position,
                                f"{length} zero bytes after {slot} entries: the active segment's preallocated "
                                f"index (Kafka trims it when the segment is closed)", {"entries": slot}))
    else:
        findings.append(Finding(ERROR, f"{what}-zero-tail", file, position,
                                f"{length} zero bytes after {slot} entries on a segment that is not the active "
                                f"one: Kafka counts them as entries and binary-searches them", {"entries": slot}))
    return slot, findings


VECTORISED_INDEX_MIN_ENTRIES = 1000
"""Smaller indexes go entry by entry only. Measured: the pre-check costs ~0.1 ms plus well under
1 us an entry against the loop's ~6 us, but importing numpy, where the bulk scan has not, ~0.1 s."""


def _vectorisable(index: IndexFile, count: int, table: _BatchTable) -> bool:
    """Whether numpy can tell which entries the per-entry loop would report: the index is big
    enough to pay for it, its offsets fit int64, and the batches' positions and last offsets
    ascend (on a log whose offsets go backwards bisect and searchsorted may land apart)."""
    if count < VECTORISED_INDEX_MIN_ENTRIES or not table or not -(1 << 62) < index.base_offset < 1 << 62:
        return False
    import numpy as np

    starts, lasts = np.frombuffer(table.positions, np.int64), np.frombuffer(table.last_offsets, np.int64)
    return bool((starts[1:] > starts[:-1]).all() and (lasts[1:] >= lasts[:-1]).all())


def _offset_slots_to_check(index: OffsetIndex, count: int, table: _BatchTable) -> Iterable[int]:
    """The slots `_check_offset_index`'s loop would report anything for (all, when not vectorisable):
    each of its conditions, for every entry at once."""
    if not _vectorisable(index, count, table):
        return range(count)
    import numpy as np

    entries = index.columns(count)
    offsets = entries["relative_offset"].astype(np.int64) + index.base_offset
    positions = entries["position"].astype(np.int64)
    starts, bases, lasts = (np.frombuffer(column, np.int64)
                            for column in (table.positions, table.base_offsets, table.last_offsets))
    last = len(starts) - 1
    report = np.zeros(count, dtype=bool)
    report[1:] = (offsets[1:] <= offsets[:-1]) | (positions[1:] <= positions[:-1])
    report |= (offsets < index.base_offset) | (offsets > lasts[last])
    batch = np.searchsorted(starts, positions)  # table.at_position
    report |= (batch > last) | (starts[np.minimum(batch, last)] != positions)
    report |= (batch > 0) & (lasts[np.maximum(batch - 1, 0)] >= offsets)  # skips an offset
    holder = np.searchsorted(lasts, offsets)  # table.holding
    report |= (holder > last) | (bases[np.minimum(holder, last)] > offsets)
    return np.flatnonzero(report).tolist()


def _time_slots_to_check(index: TimeIndex, count: int, table: _BatchTable) -> Iterable[int]:
    """The slots `_check_time_index`'s loop would report anything for (all, when not vectorisable),
    and those whose offset is inside a batch with a timestamp above the batches before it: only
    that batch's records can tell (`_largest_timestamp_up_to`)."""
    if not _vectorisable(index, count, table):
        return range(count)
    import numpy as np

    entries = index.columns(count)
    timestamps = entries["timestamp"].astype(np.int64)
    offsets = entries["relative_offset"].astype(np.int64) + index.base_offset
    lasts, prefix_max = (np.frombuffer(column, np.int64) for column in (table.last_offsets, table.prefix_max_timestamps))
    report = np.zeros(count, dtype=bool)
    report[1:] = (timestamps[1:] <= timestamps[:-1]) | (offsets[1:] < offsets[:-1])
    report |= (offsets < index.base_offset) | (offsets > lasts[-1])
    whole = np.searchsorted(lasts, offsets, side="right") - 1  # table.last_at_or_before
    largest_of_whole_batches = np.where(whole >= 0, prefix_max[np.maximum(whole, 0)], -1)
    report |= timestamps > largest_of_whole_batches
    return np.flatnonzero(report).tolist()


def _check_offset_index(segment: Segment, log: SegmentFile, table: _BatchTable, is_active: bool) -> Iterator[Finding]:
    if segment.index is None:
        yield Finding(WARNING, "index-missing", _index_path(segment, ".index"), None,
                      "no offset index: Kafka rebuilds it (recovery) or creates it empty")
        return
    index, problems = _open_index(OffsetIndex, segment.index, segment.base_offset)
    yield from problems
    if index is None:
        return
    file = str(segment.index)
    count, findings = _index_prefix(index, is_active, file, "index")
    yield from findings
    last_offset = table.last_offsets[-1] if table else None
    valid_end = table.end
    previous = None
    for slot in _offset_slots_to_check(index, count, table):
        entry = index.entry(slot)
        if slot and (previous is None or previous.slot != slot - 1):
            previous = index.entry(slot - 1)  # skipped by the pre-check: nothing to say about it
        at = slot * index.ENTRY.size
        where = {"slot": slot, "offset": entry.offset, "log_position": entry.position}
        if previous is not None and (entry.offset <= previous.offset or entry.position <= previous.position):
            yield Finding(ERROR, "index-entry-order", file, at,
                          f"entry {slot} (offset {entry.offset}, position {entry.position}) does not follow entry "
                          f"{slot - 1} (offset {previous.offset}, position {previous.position})", where)
        previous = entry
        if entry.offset < segment.base_offset:
            yield Finding(ERROR, "index-offset-below-base", file, at,
                          f"entry {slot} has offset {entry.offset}, below the base offset {segment.base_offset}", where)
            continue
        batch = table.at_position(entry.position)
        if batch is None:
            beyond = entry.position >= valid_end
            yield Finding(ERROR, "index-position-beyond-log" if beyond else "index-position-not-batch-start",
                          file, at, f"entry {slot} points at byte {entry.position} of {log.path}, "
                          + ("past its last intact batch" if beyond else "which is not where a batch starts"), where)
            continue
        if last_offset is not None and entry.offset > last_offset:
            yield Finding(ERROR, "index-offset-beyond-log", file, at,
                          f"entry {slot} names offset {entry.offset}, past the segment's last offset {last_offset}",
                          where)
            continue
        if batch > 0 and table.last_offsets[batch - 1] >= entry.offset:
            yield Finding(ERROR, "index-entry-skips-offset", file, at,
                          f"entry {slot} sends a lookup of offset {entry.offset} to byte {entry.position}, after the "
                          f"batch at {table.positions[batch - 1]} that holds offsets up to "
                          f"{table.last_offsets[batch - 1]}", where)
            continue
        if table.holding(entry.offset) is None:
            yield Finding(WARNING, "index-offset-not-in-log", file, at,
                          f"entry {slot} names offset {entry.offset}, which no batch holds", where)


def _check_time_index(segment: Segment, log: SegmentFile, table: _BatchTable, is_active: bool) -> Iterator[Finding]:
    if segment.timeindex is None:
        yield Finding(WARNING, "timeindex-missing", _index_path(segment, ".timeindex"), None,
                      "no time index: Kafka creates it empty, so timestamp lookups fall back to the file's mtime "
                      "until the segment is recovered")
        return
    index, problems = _open_index(TimeIndex, segment.timeindex, segment.base_offset)
    yield from problems
    if index is None:
        return
    file = str(segment.timeindex)
    count, findings = _index_prefix(index, is_active, file, "timeindex")
    yield from findings
    last_offset = table.last_offsets[-1] if table else None
    previous = None
    for slot in _time_slots_to_check(index, count, table):
        entry = index.entry(slot)
        if slot and (previous is None or previous.slot != slot - 1):
            previous = index.entry(slot - 1)  # skipped by the pre-check: nothing to say about it
        at = slot * index.ENTRY.size
        where = {"slot": slot, "timestamp": entry.timestamp, "offset": entry.offset}
        if previous is not None and (entry.timestamp <= previous.timestamp or entry.offset < previous.offset):
            yield Finding(ERROR, "timeindex-entry-order", file, at,
                          f"entry {slot} ({entry.timestamp}, offset {entry.offset}) does not follow "
                          f"({previous.timestamp}, offset {previous.offset}): timestamps must increase and "
                          f"offsets must not decrease", where)
        previous = entry
        if entry.offset < segment.base_offset or last_offset is None or entry.offset > last_offset:
            yield Finding(ERROR, "timeindex-offset-outside-segment", file, at,
                          f"entry {slot} names offset {entry.offset}, outside the segment's offsets "
                          f"{segment.base_offset}..{last_offset}", where)
            continue
        largest = _largest_timestamp_up_to(log, table, entry.offset)
        if largest is not None and entry.timestamp > largest:
            yield Finding(ERROR, "timeindex-timestamp-not-in-log", file, at,
                          f"entry {slot} claims timestamp {entry.timestamp} by offset {entry.offset}, but the "
                          f"largest timestamp up to that offset is {largest}", {**where, "largest": largest})
    segment_max = table.max_timestamp
    if segment_max < 0:
        return
    last = index.entry(count - 1) if count else None
    if last is None or last.timestamp != segment_max:
        found = "no entry" if last is None else f"({last.timestamp}, offset {last.offset})"
        text = f"the last entry is {found}, not the segment's max timestamp {segment_max}"
        if is_active:
            yield Finding(INFO, "timeindex-no-final-entry", file, None,
                          text + ": the active segment gets it when closed", {"max_timestamp": segment_max})
        else:
            yield Finding(ERROR, "timeindex-final-entry-wrong", file, None,
                          text + ": timestamp lookups use the last entry to choose a segment",
                          {"max_timestamp": segment_max})


def _largest_timestamp_up_to(log: SegmentFile, table: _BatchTable, offset: int) -> int | None:
    """The largest timestamp among records with offsets <= `offset` (batch maxima, and the records
    of the batch that holds `offset` when it ends later)."""
    whole = table.last_at_or_before(offset)
    largest = table.prefix_max_timestamps[whole] if whole >= 0 else -1
    holder = whole + 1
    if holder < len(table) and table.base_offsets[holder] <= offset:
        batch = next(log.entries(table.positions[holder]), None)
        if not isinstance(batch, Batch):
            return None
        try:
            largest = max([largest] + [r.timestamp for r in batch.records() if r.offset <= offset])
        except CorruptDataError:
            return None  # reported with the batch already
    return largest


def _read_txn_index(segment: Segment) -> tuple[list[AbortedTxn] | None, list[Finding]]:
    """A .txnindex on its own: its entries (None when absent or unreadable) and what is wrong
    with it regardless of the log."""
    if segment.txnindex is None:
        return None, []
    file = str(segment.txnindex)
    try:
        index = TransactionIndex(segment.txnindex)
        entries = index.entries()
    except KafkaLogError as exc:
        return None, [_from_error(exc, "txnindex-corrupt", file)]
    findings = []
    if index.trailing_bytes:
        findings.append(Finding(WARNING, "txnindex-partial-entry", file, index.entry_count * 34,
                                f"{index.trailing_bytes} trailing bytes after the last whole 34-byte entry "
                                f"(Kafka ignores them)"))
    previous = None
    for entry in entries:
        if entry.last_offset < segment.base_offset:
            findings.append(Finding(ERROR, "txnindex-offset-below-base", file, entry.position,
                                    f"aborted transaction ending at {entry.last_offset} is below the base offset "
                                    f"{segment.base_offset}: the broker refuses to load the segment (sanity check)"))
        if previous is not None and entry.last_offset <= previous:
            findings.append(Finding(ERROR, "txnindex-entry-order", file, entry.position,
                                    f"entry ending at {entry.last_offset} does not follow the previous one ending "
                                    f"at {previous}"))
        previous = entry.last_offset
    return entries, findings


def _check_txn_index(segment: Segment, report: SegmentReport, expected: list[AbortedTxn],
                     abort_markers: set[tuple[int, int]], exact_state: bool) -> Iterator[Finding]:
    """The .txnindex against the aborted transactions that the producer state says this
    segment's ABORT markers end (`abort_markers`: every ABORT marker, as (producer id, offset))."""
    if segment.txnindex is None:
        if expected:
            yield Finding(ERROR, "txnindex-missing", _index_path(segment, ".txnindex"), None,
                          f"no transaction index, but {len(expected)} aborted transaction(s) end in this segment: "
                          f"read_committed consumers would see their records",
                          {"aborted": [_txn_json(t) for t in expected]})
        return
    yield from report.txn_findings
    if report.txn_entries is None:
        return
    file = str(segment.txnindex)
    actual = {(e.producer_id, e.last_offset): e for e in report.txn_entries}
    wanted = {(e.producer_id, e.last_offset): e for e in expected}
    for key, entry in actual.items():
        known = wanted.get(key)
        if known is None and (exact_state or key not in abort_markers):
            yield Finding(ERROR, "txnindex-unknown-abort", file, entry.position,
                          f"entry for producer {entry.producer_id} ending at {entry.last_offset} matches no ABORT "
                          f"marker that ends a transaction in this segment", {"entry": _txn_json(entry)})
        elif known is not None and exact_state and (known.first_offset, known.last_stable_offset) != (
                entry.first_offset, entry.last_stable_offset):
            yield Finding(ERROR, "txnindex-entry-mismatch", file, entry.position,
                          f"entry for producer {entry.producer_id} ending at {entry.last_offset} says first offset "
                          f"{entry.first_offset}, LSO {entry.last_stable_offset}; the log says "
                          f"{known.first_offset}, LSO {known.last_stable_offset}",
                          {"entry": _txn_json(entry), "expected": _txn_json(known)})
    for key, entry in wanted.items():
        if key not in actual:
            yield Finding(ERROR, "txnindex-missing-abort", file, None,
                          f"the ABORT marker of producer {entry.producer_id} at offset {entry.last_offset} ends a "
                          f"transaction from offset {entry.first_offset}, but the index has no entry for it",
                          {"expected": _txn_json(entry)})


def _txn_json(txn: AbortedTxn) -> dict:
    return {"producer_id": txn.producer_id, "first_offset": txn.first_offset, "last_offset": txn.last_offset,
            "last_stable_offset": txn.last_stable_offset}


def _compare_snapshot(snapshot: producer_snapshot.ProducerSnapshot, state: ProducerState) -> list[Finding]:
    """A snapshot against the state replayed up to its offset (producers expired from the
    snapshot are not differences)."""
    replayed = state.snapshot_entries()
    findings = []
    for entry in snapshot.entries:
        ours = replayed.get(entry.producer_id)
        if ours != entry:
            findings.append(Finding(WARNING, "snapshot-disagrees", snapshot.path, None,
                                    f"producer {entry.producer_id}: the snapshot says {_snapshot_text(entry)}, "
                                    f"the log says {_snapshot_text(ours)}", {"producer_id": entry.producer_id}))
    return findings


def _snapshot_text(entry: producer_snapshot.ProducerEntry | None) -> str:
    if entry is None:
        return "nothing (no batch of this producer)"
    return (f"epoch {entry.epoch}, last sequence {entry.last_sequence}, last offset {entry.last_offset}, "
            f"coordinator epoch {entry.coordinator_epoch}, open transaction from {entry.current_txn_first_offset}")


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------

_OFFSET_AND_SIZE = struct.Struct(">qi")
_MAGIC_CANDIDATE = re.compile(rb"[\x00-\x02]")
"""A batch's magic byte is 0, 1 or 2: in random bytes, 3 positions in 256 are worth a closer look."""


def _from_error(exc: KafkaLogError, code: str, file: str) -> Finding:
    extra = {}
    if exc.expected is not None:
        extra["expected"] = _plain(exc.expected)
    if exc.actual is not None:
        extra["actual"] = _plain(exc.actual)
    return Finding(ERROR, code, exc.path or file, exc.position, exc.message, extra)


def _plain(value):
    """An error's expected/actual as a finding shows it (and as it pickles anywhere)."""
    return value if value is None or isinstance(value, (int, str)) else str(value)

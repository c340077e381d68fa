"""Compaction: what one run of Kafka's log cleaner would do to a compacted partition, and why.

Kafka 3.8 sources: core/.../log/LogCleanerManager.scala (cleanableOffsets, calculateCleanableBytes,
maxCompactionDelay, grabFilthiestCompactedLog), core/.../log/LogCleaner.scala (LogToClean,
Cleaner.doClean, buildOffsetMap, buildOffsetMapForSegment, cleanSegments, cleanInto,
shouldRetainRecord, groupSegmentsBySize, CleanedTransactionMetadata), clients/.../record/
MemoryRecords.java (filterTo, buildRetainedRecordsInto), DefaultRecordBatch.writeEmptyHeader,
MemoryRecordsBuilder (KIP-534 delete horizon), UnifiedLog.lastStableOffset.

One run: the dirty section starts at the cleaner-offset-checkpoint entry (the log start offset when
absent or out of range) and ends at the first uncleanable offset (the last stable offset, the active
segment, segments younger than min.compaction.lag.ms), rounded down to a segment boundary. The
offset map holds the latest offset of every key in the dirty section (aborted transactional data
excluded); then every segment from the start of the log up to the end of the dirty section is
filtered with it. Records past the map, or that are the latest for their key, stay; tombstones
stay until their batch's delete horizon (set to now + delete.retention.ms the first time a batch
holding one is cleaned, KIP-534; V0/V1 tombstones use the segment mtime rule); records without a
key in the cleaned range go. Aborted transactional data goes; markers go once their transaction's
data is gone (and, for control batches, past their delete horizon); the last batch of each active
producer is kept as an empty header to keep its sequence and epoch, and (Kafka 4.0; 3.9 and
before drop it) so is the batch that ends at the first uncleanable offset, so that the cleaned log
keeps its last offset.

The cleaner works on the log as Kafka's loader opened it (`retention.load_log`): after a clean
shutdown (the log dir's `.kafka_cleanshutdown`) as it is on disk, but for segments without their
.index, which are recovered; after an unclean one recovered from the recovery point on, the first
segment cut short ending the log. The producers it keeps a last batch for are those the loader's
state holds: a snapshot load drops the expired ones, the batches read after it add theirs. Where
the loader throws, or the cleaner meets what is no batch in a segment it reads (it checks no CRC),
a batch it cannot rebuild or an offset its cleaned segment cannot hold, Kafka cleans nothing and
neither do we.

Rules checked against 3.9.0-rc2 too: unchanged but for that batch; against Kafka 4.0's cleaner by the
differential run (`fuzz/against_kafka.py`). Differences we accept: the offset map is exact (Kafka's holds MD5 hashes in a bounded buffer and
may stop early when full). Aborted transactions come from the segments' `.txnindex` files, as
Kafka's cleaner reads them. Everything read is held in memory: this is for forensic-size logs.
"""
from __future__ import annotations

import bisect
import copy
import os
import shutil
import time
import heapq
from typing import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CorruptDataError, InputError, KafkaLogError
from .formats import checkpoint, txn_index
from .formats.batch import Batch, Record, java_long
from .formats.logdir import PartitionDir, Segment
from .formats.offset_index import OffsetIndex
from .formats.record_batch import (ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_LOG_APPEND_TIME, ATTR_TRANSACTIONAL,
                                   NO_TIMESTAMP, build_batch, build_record)
from .formats.segment import BadEntry, SegmentFile, Stop, filename_prefix, offset_from_name
from .formats.time_index import TimeIndex
from .formats.txn_index import AbortedTxn, TransactionIndex
from .recovery import (ProducerState, Rebuild, RebuildOptions, SegmentRecovery, copy_prefix,
                       refuse_output_in_input_tree)
from .retention import (AUTO, LoadedLog, adopt_split_log_start, checkpointed, initial_high_watermark,
                        initial_log_start_offset, largest_timestamp, load_log, loader_recovery_point,
                        recovered_largest_timestamp)

DEFAULT_DELETE_RETENTION_MS = 24 * 60 * 60 * 1000  # delete.retention.ms
DEFAULT_MIN_CLEANABLE_RATIO = 0.5  # min.cleanable.dirty.ratio
DEFAULT_SEGMENT_BYTES = 1 << 30  # segment.bytes
DEFAULT_MAX_INDEX_BYTES = 10 * 1024 * 1024  # segment.index.bytes
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 24 * 60 * 60 * 1000  # producer.id.expiration.ms
LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

# record fates
KEPT, SUPERSEDED, TOMBSTONE_EXPIRED, NO_KEY, ABORTED, MARKER_REMOVED = (
    "kept", "superseded", "tombstone-expired", "no-key", "aborted", "marker-removed")
# batch outcomes (MemoryRecords.filterTo)
ORIGINAL, REBUILT, EMPTY_HEADER, DROPPED, UNTOUCHED = "original", "rebuilt", "empty-header", "dropped", "not-cleaned"


@dataclass
class CompactionSettings:
    now: int | None = None
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_ratio: float = DEFAULT_MIN_CLEANABLE_RATIO
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    first_dirty_offset: int | None = None
    high_watermark: int | None = None
    shutdown: str = AUTO
    """How the broker stopped (`retention.loader_recovery_point`)."""


# ---------------------------------------------------------------------------------------------
# Typed results
# ---------------------------------------------------------------------------------------------


@dataclass
class RecordFate:
    offset: int
    key: bytes | None
    tombstone: bool
    fate: str


@dataclass
class BatchPlan:
    """One batch of the log and what this cleaning makes of it."""

    segment: int
    batch: Batch
    data: bytes
    outcome: str = UNTOUCHED
    records: list[RecordFate] = field(default_factory=list)
    kept: list[Record] = field(default_factory=list)
    delete_horizon_ms: int | None = None
    """The delete horizon the output batch carries."""

    @property
    def removed(self) -> list[int]:
        return [r.offset for r in self.records if r.fate != KEPT]


@dataclass
class SegmentSummary:
    base_offset: int
    file: str
    size: int
    section: str
    """clean, dirty (cleanable), uncleanable, active."""
    records: int = 0
    removed: list[int] = field(default_factory=list)
    group: int | None = None
    """Base offset of the cleaned segment this one is merged into (groupSegmentsBySize)."""
    loaded_from: tuple[str, int] | None = None
    """Where its bytes as loaded begin when not at the start of `file`: a piece of a split, in the
    split segment's .log (the path, the byte)."""


@dataclass
class KeyHistory:
    key: bytes
    versions: int = 0
    latest_offset: int = -1
    latest_is_tombstone: bool = False
    removed: int = 0


@dataclass
class Tombstone:
    offset: int
    key: bytes
    delete_horizon_ms: int | None
    """The horizon its batch carries now (None: never cleaned since KIP-534)."""
    fate: str
    new_delete_horizon_ms: int | None = None


@dataclass
class CompactionReport:
    path: str
    name: str
    now: int
    settings: CompactionSettings
    segments: list[SegmentSummary] = field(default_factory=list)
    batches: list[BatchPlan] = field(default_factory=list)
    keys: dict[bytes, KeyHistory] = field(default_factory=dict)
    tombstones: list[Tombstone] = field(default_factory=list)
    null_key_offsets: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    failure: str | None = None
    """Why Kafka cannot clean the partition at all: its loader or its cleaner throws."""
    log_start_offset: int = 0
    log_end_offset: int = 0
    loader_empties_log: bool = False
    """The log start offset lies past the log end: the loader deletes every segment and starts the
    log again with an empty segment at the log start offset."""
    high_watermark: int = 0
    high_watermark_source: str = ""
    last_stable_offset: int = 0
    first_dirty_offset: int = 0
    first_dirty_source: str = ""
    first_uncleanable_offset: int = 0
    uncleanable_reason: str = ""
    clean_bytes: int = 0
    cleanable_bytes: int = 0
    would_clean: bool = False
    clean_reason: str = ""
    end_offset: int = 0
    """Where this cleaning stops; the new cleaner-offset-checkpoint entry."""
    groups: list[list[int]] = field(default_factory=list)
    txn_indexes: dict[int, bytes] = field(default_factory=dict)
    """Each segment's .txnindex as this cleaning leaves it, by base offset: a cleaned one's the
    transactions the cleaner appended, any other's as the loader left it."""

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def removed_offsets(self) -> list[int]:
        return [offset for plan in self.batches for offset in plan.removed]


# ---------------------------------------------------------------------------------------------
# Reading the partition
# ---------------------------------------------------------------------------------------------


@dataclass
class _Segment:
    segment: Segment
    size: int
    """Its bytes as Kafka's loader leaves them (a recovery may cut the file)."""
    mtime_ms: int
    batches: list[tuple[Batch, bytes]]
    recovery: SegmentRecovery | None
    """The loader's recovery of the segment, if it recovered it."""
    unreadable: str | None = None
    """Where reading stopped short of `size`, and why: the cleaner throws there if it reads that far."""
    first_batch_unreadable: bool = False
    """The first entry's size is below 14: LogSegment.getFirstBatchTimestamp throws."""
    lookup: Callable[[int], int] | None = None
    """Its offset index's lookup as loaded: the position Kafka reads from for an offset."""
    rolling_timestamp: int | None = None
    """LogSegment.rollingBasedTimestamp as the loader leaves it (a piece of a split recoverLog made);
    None: getFirstBatchTimestamp reads the first batch."""

    def first_batch_timestamp(self) -> int:
        """LogSegment.getFirstBatchTimestamp: the rolling timestamp, else the first batch's max
        timestamp; Long.MAX_VALUE where that is negative or there is no batch."""
        if self.rolling_timestamp is not None:
            timestamp = self.rolling_timestamp
        else:
            timestamp = self.batches[0][0].max_timestamp if self.batches else -1
        return timestamp if timestamp >= 0 else LONG_MAX


def _read_segments(loaded: LoadedLog, open_files: ExitStack) -> list[_Segment]:
    """The segments as loaded, each read up to where its batches stop being readable; their records
    are read where the cleaner reads them, so the files stay open in `open_files`."""
    by_base = {segment.base_offset: segment for segment in loaded.files}
    out = []
    for held in loaded.segments:
        batches, unreadable = [], None
        log = open_files.enter_context(SegmentFile(held.path, max_bytes=held.end))
        log.path = loaded.kafka_path(held.path)  # (a split's piece: named where Kafka puts it)
        for entry in log.entries():
            if isinstance(entry, BadEntry):  # (a bad CRC alone: the cleaner does not check CRCs)
                unreadable = f"{log.path}: byte {entry.position}: unreadable batch"
                break
            if not 0 <= entry.magic <= 2:  # ByteBufferLogInputStream, the cleaner's reader, checks it
                unreadable = f"{log.path}: byte {entry.position}: Invalid magic found in record: {entry.magic}"
                break
            batches.append((entry, bytes(log.buffer[entry.position:entry.end])))
        if unreadable is None and log.stop is not Stop.END:
            unreadable = _stop_reason(log)
        out.append(_Segment(by_base[held.base_offset], log.end, log.mtime_ms, batches,
                            loaded.recovered.get(held.base_offset), unreadable,
                            log.stop is Stop.CORRUPT_SIZE and log.stop_position == 0, held.lookup,
                            loaded.rolling_timestamps.get(held.base_offset)))
    return out


def _stop_reason(log: SegmentFile) -> str:
    """Why the walk of `log` ended before its end. The cleaner reads with a buffer that grows up to
    max.message.bytes and throws where what is left is no batch: a size below 14
    (CorruptRecordException), a batch past the end or a tail too short for a header (the buffer
    cannot grow past it: IllegalStateException)."""
    where = f"{log.path}: byte {log.stop_position}"
    if log.stop is Stop.CORRUPT_SIZE:
        return str(log.stop_error)
    if log.stop is Stop.PARTIAL_ENTRY:
        return f"{where}: a batch runs past the end of the file"
    return f"{where}: {log.end - log.stop_position} bytes left, too few for a batch header"


def _load(partition: PartitionDir, segments: list[Segment], report: CompactionReport) -> LoadedLog:
    """The log as Kafka's loader opens it: after a clean shutdown (the log dir's marker) as it is,
    but for segments without their .index; else recovered from the recovery point on."""
    report.log_start_offset, source = initial_log_start_offset(partition, segments[0].base_offset, report.problems)
    checkpoint_start = report.log_start_offset if source == "log-start-offset-checkpoint" else 0
    recovery_point = loader_recovery_point(partition, report.settings.shutdown, report.problems, report.notes,
                                           "anything cleans them")
    loaded = load_log(partition, segments, checkpoint_start, report.log_start_offset, recovery_point,
                      (report.now, report.settings.producer_id_expiration_ms))
    report.log_start_offset = adopt_split_log_start(loaded, report.log_start_offset, source)[0]
    if recovery_point is None and not partition.snapshots and not loaded.recovered:
        report.notes.append("no producer snapshot after a clean shutdown: Kafka's loader starts the producer state "
                            "empty at the log end, so the cleaner keeps no producer's last batch")
    for recovery in loaded.recovered.values():
        if recovery.truncated_bytes:
            report.notes.append(f"{loaded.kafka_path(recovery.log_path)}: Kafka's loader recovers it and cuts it to "
                                f"{recovery.valid_bytes} bytes")
    report.notes.extend(loaded.splits)
    if loaded.deleted:
        report.notes.append(f"Kafka's loader deletes the segments after the one it cut: base offsets "
                            f"{', '.join(map(str, loaded.deleted))}")
    return loaded


def _aborted_transactions(read: list[_Segment], loaded: dict[int, bytes]) -> list[tuple[int, list[AbortedTxn]]]:
    """Each segment's base offset and the entries of its `.txnindex` as loaded (`loaded`, by base
    offset), in file order: rebuilt by the loader's recovery, else read from the file."""
    indexes = []
    for seg in read:
        base = seg.segment.base_offset
        if seg.recovery is not None:
            entries = list(seg.recovery.aborted_txns)
        elif loaded[base]:
            entries = TransactionIndex(seg.segment.txnindex, loaded[base]).entries()
        else:
            entries = []
        indexes.append((base, entries))
    return indexes


def _loaded_txn_index(seg: _Segment) -> bytes:
    """A segment's .txnindex as Kafka's loader leaves it: rebuilt by its recovery, else the file's bytes."""
    if seg.recovery is not None:
        return txn_index.build(seg.recovery.aborted_txns)
    return Path(seg.segment.txnindex).read_bytes() if seg.segment.txnindex is not None else b""


def _collect_aborted(indexes: list[tuple[int, list[AbortedTxn]]], start: int, upper: int,
                     log_start: int) -> list[AbortedTxn]:
    """LocalLog.collectAbortedTransactions(log start, start, upper): from the segment holding `start`
    on, each index's entries that end at or after the log start offset (not `start`: found by the
    differential run) and begin before `upper`, until an entry's last stable offset reaches `upper`
    (TransactionIndex.collectAbortedTxns: the search is complete, and what follows is not read, even
    in later segments)."""
    first = bisect.bisect_right([base for base, _ in indexes], start) - 1
    collected: list[AbortedTxn] = []
    for _, entries in indexes[first:] if first >= 0 else []:  # (no segment at or below `start`: none)
        for txn in entries:
            if txn.last_offset >= log_start and txn.first_offset < upper:
                collected.append(txn)
            if txn.last_stable_offset >= upper:
                return collected
    return collected


# ---------------------------------------------------------------------------------------------
# LogCleanerManager: what is dirty, what can be cleaned, would the cleaner pick this log
# ---------------------------------------------------------------------------------------------


def offset_ranges(offsets: list[int]) -> list[list[int]]:
    """Sorted offsets as inclusive [first, last] runs."""
    out: list[list[int]] = []
    for offset in sorted(offsets):
        if out and offset == out[-1][1] + 1:
            out[-1][1] = offset
        else:
            out.append([offset, offset])
    return out


def analyze_partition(partition: PartitionDir, settings: CompactionSettings | None = None) -> CompactionReport:
    settings = settings or CompactionSettings()
    now = settings.now if settings.now is not None else int(time.time() * 1000)
    report = CompactionReport(str(partition.path), partition.name, now, settings)
    segments = [s for s in partition.segments if s.log is not None]
    if not segments:
        report.notes.append("no .log segments")
        return report
    loaded = _load(partition, segments, report)
    if loaded.failure is not None:
        _cannot_clean(report, loaded.failure)
        return report
    report.log_end_offset = loaded.log_end_offset
    if report.log_start_offset > report.log_end_offset:
        report.notes.append(f"the log start offset {report.log_start_offset} is beyond the log end offset "
                            f"{report.log_end_offset}: Kafka's loader deletes every segment")
        report.loader_empties_log = True
        report.would_clean, report.clean_reason = False, "no bytes to clean"
        return report
    with ExitStack() as open_files:
        _analyze_loaded(partition, report, loaded, _read_segments(loaded, open_files))
    return report


def _analyze_loaded(partition: PartitionDir, report: CompactionReport, loaded: LoadedLog, read: list[_Segment]) -> None:
    """The cleaner's run over the segments as loaded."""
    settings = report.settings
    report.high_watermark, report.high_watermark_source = initial_high_watermark(
        partition, settings.high_watermark, report.log_start_offset, report.log_end_offset, report.problems)
    loaded.update_high_watermark(report.high_watermark)
    if loaded.failure is not None:
        _cannot_clean(report, loaded.failure)
        _summaries(read, report, loaded)
        return
    state = loaded.state
    report.last_stable_offset = loaded.last_stable_offset(report.high_watermark)
    _cleanable_offsets(partition, read, report)
    _cleanable_bytes(read, report)
    _would_clean(read, report)
    active_producers = _active_producers(state)
    # what the cleaner reads: the first batch of each dirty non-active segment (maxCompactionDelay), the
    # records of the dirty segments (the offset map), then the segments it cleans
    unreadable = next((seg.unreadable for seg in _non_active_from(read, report.first_dirty_offset)
                       if seg.first_batch_unreadable and seg.rolling_timestamp is None), None)
    report.txn_indexes = {seg.segment.base_offset: _loaded_txn_index(seg) for seg in read}
    try:
        aborted = _aborted_transactions(read, report.txn_indexes)
        offset_map, latest = _build_offset_map(read, report, aborted)
        report.end_offset = latest + 1
        cleaned = _segments_between(read, 0, report.end_offset) if latest >= 0 else []
        unreadable = unreadable or next((seg.unreadable for seg in cleaned if seg.unreadable), None)
        _clean(read, report, offset_map, latest, aborted, active_producers, cleaned)
    except CorruptDataError as exc:
        unreadable = unreadable or str(exc)
        report.batches.clear()
    if unreadable is not None:
        _cannot_clean(report, f"{unreadable}; Kafka's cleaner throws here and marks the partition uncleanable")
    _summaries(read, report, loaded)


def _cannot_clean(report: CompactionReport, why: str) -> None:
    report.failure = why
    report.problems.append(why)
    report.would_clean, report.clean_reason = False, why


def _cleanable_offsets(partition: PartitionDir, read: list[_Segment], report: CompactionReport) -> None:
    """LogCleanerManager.cleanableOffsets."""
    settings, now = report.settings, report.now
    if settings.first_dirty_offset is not None:
        recorded, source = settings.first_dirty_offset, "--first-dirty-offset"
    else:
        recorded = checkpointed(partition, "cleaner-offset-checkpoint", report.problems)
        source = "cleaner-offset-checkpoint"
    if recorded is None:
        report.first_dirty_offset, report.first_dirty_source = report.log_start_offset, "log start offset (never cleaned)"
    elif recorded < report.log_start_offset or recorded > report.log_end_offset:
        report.first_dirty_offset = report.log_start_offset
        report.first_dirty_source = f"log start offset ({source} entry {recorded} is out of range; Kafka resets it)"
    else:
        report.first_dirty_offset, report.first_dirty_source = recorded, source
    candidates = [(report.last_stable_offset, "the last stable offset"),
                  (read[-1].segment.base_offset, "the active segment")]
    lag = max(settings.min_compaction_lag_ms, 0)
    if lag > 0:
        for seg in _non_active_from(read, report.first_dirty_offset):
            largest = _largest_timestamp(seg, now)
            if largest > now - lag:
                candidates.append((seg.segment.base_offset, f"segment {seg.segment.base_offset} is younger than "
                                   f"min.compaction.lag.ms"))
                break
    offset, reason = min(candidates, key=lambda c: c[0])
    report.first_uncleanable_offset = max(report.first_dirty_offset, offset)
    report.uncleanable_reason = reason


def _largest_timestamp(seg: _Segment, now: int) -> int:
    """LogSegment.largestTimestamp of the segment as loaded."""
    if seg.recovery is None:
        return largest_timestamp(seg.segment)[0]
    return recovered_largest_timestamp(seg.segment, seg.recovery, now)[0]


def _non_active_from(read: list[_Segment], offset: int) -> list[_Segment]:
    """LogSegments.nonActiveLogSegmentsFrom: from the segment holding `offset` to the active one."""
    non_active = read[:-1]
    start = max((i for i, s in enumerate(non_active) if s.segment.base_offset <= offset), default=0)
    return non_active[start:] if offset < read[-1].segment.base_offset else []


def _segments_between(read: list[_Segment], start: int, end: int) -> list[_Segment]:
    """LocalLog.logSegments(from, to): the segment holding `from`, and every later one below `to`."""
    first = max((i for i, s in enumerate(read) if s.segment.base_offset <= start), default=0)
    return [s for s in read[first:] if s.segment.base_offset < end]


def _cleanable_bytes(read: list[_Segment], report: CompactionReport) -> None:
    """LogToClean and LogCleanerManager.calculateCleanableBytes."""
    uncleanable = _non_active_from(read, report.first_uncleanable_offset)
    first_uncleanable = (uncleanable[0] if uncleanable else read[-1]).segment.base_offset
    report.first_uncleanable_offset = first_uncleanable
    report.clean_bytes = sum(s.size for s in read if s.segment.base_offset < report.first_dirty_offset)
    report.cleanable_bytes = sum(s.size for s in _segments_between(
        read, min(report.first_dirty_offset, first_uncleanable), first_uncleanable))


def _would_clean(read: list[_Segment], report: CompactionReport) -> None:
    """grabFilthiestCompactedLog: ratio above min.cleanable.dirty.ratio, or max.compaction.lag.ms passed."""
    settings = report.settings
    firsts = [s.first_batch_timestamp() for s in _non_active_from(read, report.first_dirty_offset)]
    earliest = min((t for t in firsts if t > 0), default=LONG_MAX)
    clean_until = report.now - max(settings.max_compaction_lag_ms, 0)
    overdue = earliest < clean_until
    total = report.clean_bytes + report.cleanable_bytes
    if total == 0:
        report.would_clean, report.clean_reason = False, "no bytes to clean"
    elif overdue and report.cleanable_bytes > 0:
        report.would_clean, report.clean_reason = True, "max.compaction.lag.ms has passed for a dirty segment"
    elif report.dirty_ratio > settings.min_cleanable_ratio:
        report.would_clean = True
        report.clean_reason = f"dirty ratio {report.dirty_ratio:.4f} > min.cleanable.dirty.ratio {settings.min_cleanable_ratio}"
    else:
        report.would_clean = False
        report.clean_reason = f"dirty ratio {report.dirty_ratio:.4f} <= min.cleanable.dirty.ratio {settings.min_cleanable_ratio}"


def _active_producers(state: ProducerState) -> dict[int, tuple[int, int]]:
    """UnifiedLog.lastRecordsOfActiveProducers: producer -> (last data offset or -1, epoch), for every
    producer the loader's state holds (those a snapshot load found expired are gone; the periodic
    expiry check has not run yet when the cleaner first runs)."""
    return {pid: (status.last_offset, status.epoch) for pid, status in state.producers.items()}


# ---------------------------------------------------------------------------------------------
# LogCleaner: the offset map and the filter
# ---------------------------------------------------------------------------------------------


class _TransactionFilter:
    """CleanedTransactionMetadata: which data batches are aborted, which markers can go."""

    def __init__(self, aborted: list[AbortedTxn]):
        self.pending: list[tuple[int, int, AbortedTxn]] = []
        self.added = 0
        self.ongoing_aborted: dict[int, dict] = {}
        self.ongoing_committed: set[int] = set()
        self.cleaned_base: int | None = None
        """The cleaned segment whose transaction index the retained ABORT markers' transactions are
        appended to (None: none, as while the offset map is built)."""
        self.cleaned_indexes: dict[int, list[AbortedTxn]] = {}
        """Each cleaned segment's transaction index, by base offset."""
        self.add(aborted)

    def start_group(self, base_offset: int) -> None:
        """cleanSegments' new cleaned segment: its transaction index starts empty."""
        self.cleaned_base = base_offset
        self.cleaned_indexes[base_offset] = []

    def _append_to_cleaned_index(self, txn: AbortedTxn, batch: Batch) -> None:
        """TransactionIndex.append, which refuses a last offset that does not increase (the entries
        come from the .txnindex files, which damage may have changed)."""
        if self.cleaned_base is None:
            return
        index = self.cleaned_indexes[self.cleaned_base]
        if index and index[-1].last_offset >= txn.last_offset:
            raise CorruptDataError(
                f"IllegalArgumentException: The last offset of appended transactions must increase sequentially, "
                f"but {txn.last_offset} is not greater than current last offset {index[-1].last_offset} of index "
                f"{filename_prefix(self.cleaned_base)}.txnindex.cleaned", path=batch.path, position=batch.position)
        index.append(txn)

    def add(self, aborted: list[AbortedTxn]) -> None:
        """addAbortedTransactions: into the queue by first offset (a transaction added twice is
        consumed twice, as Kafka's PriorityQueue does)."""
        for txn in aborted:
            heapq.heappush(self.pending, (txn.first_offset, self.added, txn))
            self.added += 1

    def _consume_up_to(self, offset: int) -> None:
        while self.pending and self.pending[0][0] <= offset:
            txn = heapq.heappop(self.pending)[2]
            self.ongoing_aborted.setdefault(txn.producer_id, {"txn": txn, "last_batch": None})

    def on_control(self, batch: Batch) -> bool:
        """True when the control batch can be discarded."""
        self._consume_up_to(batch.last_offset)
        records = batch.records()
        if not records:
            return True  # an empty control batch was already cleaned
        if records[0].control_error is not None:  # the cleaner reads its key: the first record, no more
            raise copy.copy(records[0].control_error).located(batch.path, batch.position)
        name = records[0].control.name if records[0].control else None
        if name == "ABORT":
            txn = self.ongoing_aborted.pop(batch.producer_id, None)
            if txn is not None and txn["last_batch"] is not None:  # kept until its data is gone
                self._append_to_cleaned_index(txn["txn"], batch)
                return False
            return True
        if name == "COMMIT":
            if batch.producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(batch.producer_id)
                return False
            return True
        return False

    def on_data(self, batch: Batch) -> bool:
        """True when the data batch belongs to an aborted transaction."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        txn = self.ongoing_aborted.get(batch.producer_id)
        if txn is not None:
            txn["last_batch"] = batch.last_offset
            return True
        self.ongoing_committed.add(batch.producer_id)
        return False


def _build_offset_map(read: list[_Segment], report: CompactionReport,
                      aborted: list[tuple[int, list[AbortedTxn]]]) -> tuple[dict[bytes, int], int]:
    """Cleaner.buildOffsetMap: the latest offset of each key in [first dirty, first uncleanable)."""
    start, end = report.first_dirty_offset, report.first_uncleanable_offset
    if start > end:  # the first dirty offset inside the first uncleanable segment: LogSegments.values throws
        raise CorruptDataError(f"Invalid log segment range: requested segments in {report.name} from offset {start} "
                               f"which is greater than limit offset {end}")
    dirty = _segments_between(read, start, end) if start < end else []
    offsets: dict[bytes, int] = {}
    latest = -1
    if not dirty:
        return offsets, latest
    transactions = _TransactionFilter(_collect_aborted(aborted, start, end, report.log_start_offset))
    for index, seg in enumerate(dirty):
        # buildOffsetMapForSegment reads from where the offset index puts `start`: a marker before that is
        # not seen, and the aborted transaction it ended stays open for its producer
        position = seg.lookup(start) if seg.lookup is not None else 0
        for batch, _ in seg.batches:
            if batch.position < position:
                continue
            if batch.is_control:
                transactions.on_control(batch)
            elif not transactions.on_data(batch):
                for record in batch.records():
                    if record.key is not None and record.offset >= start:
                        offsets[record.key] = record.offset
            if batch.last_offset >= start:
                latest = batch.last_offset
        latest = (dirty[index + 1].segment.base_offset if index + 1 < len(dirty) else end) - 1
    return offsets, latest


def _clean(read: list[_Segment], report: CompactionReport, offset_map: dict[bytes, int], latest: int,
           aborted: list[tuple[int, list[AbortedTxn]]], active: dict[int, tuple[int, int]],
           cleaned: list[_Segment]) -> None:
    """Cleaner.doClean / cleanSegments / cleanInto over the segments `cleaned`, one batch at a time."""
    settings, now = report.settings, report.now
    clean_part = [s for s in read if s.segment.base_offset < report.first_dirty_offset]
    legacy_horizon = clean_part[-1].mtime_ms - settings.delete_retention_ms if clean_part else 0
    report.groups = _group_segments(cleaned, report)
    transactions = _TransactionFilter([])
    cleaned_ids = {id(s) for s in cleaned}
    upper_bounds = _upper_bounds(cleaned, report.groups)
    group_base = {base: group[0] for group in report.groups for base in group}
    for seg in read:
        if id(seg) in cleaned_ids:
            # cleanSegments: the aborted transactions of each segment's range, added as it comes to it
            start, upper = seg.segment.base_offset, upper_bounds[seg.segment.base_offset]
            if group_base[start] == start:
                transactions.start_group(start)
            transactions.add(_collect_aborted(aborted, start, upper, report.log_start_offset))
        retain_legacy_deletes = seg.mtime_ms > legacy_horizon
        written: int | None = None  # the largest offset this segment writes into the cleaned one
        for batch, data in seg.batches:
            plan = BatchPlan(seg.segment.base_offset, batch, data)
            report.batches.append(plan)
            if id(seg) not in cleaned_ids:
                try:
                    plan.kept = batch.records()
                except CorruptDataError as exc:  # not read by the cleaner
                    report.notes.append(f"{exc.located(batch.path, batch.position)}: its records are unreadable "
                                        f"(the cleaner does not read them)")
                plan.records = [RecordFate(r.offset, r.key, r.value is None and not batch.is_control, KEPT)
                                for r in plan.kept]
                continue
            _filter_batch(plan, transactions, offset_map, latest, active, retain_legacy_deletes, now,
                          settings.delete_retention_ms, report.first_uncleanable_offset)
            if plan.outcome != DROPPED:
                written = batch.last_offset if written is None else max(written, batch.last_offset)
        if written is not None:
            _check_offset_fits(seg, written, group_base[seg.segment.base_offset])
    # a cleaned segment's index holds what the cleaner appended to it; the merged segments' go with them
    report.txn_indexes.update((base, txn_index.build(entries)) for base, entries in transactions.cleaned_indexes.items())


def _check_offset_fits(seg: _Segment, written: int, base: int) -> None:
    """LogSegment.append's ensureOffsetInRange on the cleaned segment: the largest offset written from
    `seg` must be within 2^31 - 1 of the cleaned segment's base (its group's first). Where it is not,
    Kafka's cleaner splits the segment (LocalLog.splitOverflowedSegment) and abandons this cleaning."""
    if not 0 <= written - base <= INT_MAX:
        raise CorruptDataError(f"Detected offset overflow at offset {written} in the cleaned segment at base "
                               f"offset {base}: Kafka's cleaner splits segment {seg.segment.base_offset} and gives "
                               f"up this cleaning", path=seg.segment.log)


def _upper_bounds(cleaned: list[_Segment], groups: list[list[int]]) -> dict[int, int]:
    """Base offset -> the end of the range whose aborted transactions cleanSegments collects for the
    segment: the next segment's base offset in its group, for the group's last its readNextOffset."""
    by_base = {seg.segment.base_offset: seg for seg in cleaned}
    bounds = {}
    for group in groups:
        for base, following in zip(group, group[1:] + [None]):
            seg = by_base[base]
            bounds[base] = following if following is not None else (
                seg.batches[-1][0].last_offset + 1 if seg.batches else base)
    return bounds


def _filter_batch(plan: BatchPlan, transactions: _TransactionFilter, offset_map: dict[bytes, int], latest: int,
                  active: dict[int, tuple[int, int]], retain_legacy_deletes: bool, now: int,
                  delete_retention_ms: int, upper_bound: int) -> None:
    """cleanInto's RecordFilter (checkBatchRetention, shouldRetainRecord) and MemoryRecords.filterTo.
    `upper_bound` is the cleaning round's first uncleanable offset: Kafka 4.0 keeps the batch that
    ends there, as an empty header if nothing in it stays, so the cleaned log keeps its last offset."""
    batch = plan.batch
    can_discard = transactions.on_control(batch) if batch.is_control else transactions.on_data(batch)
    if batch.is_control:
        discard_records = can_discard and batch.delete_horizon_ms is not None and batch.delete_horizon_ms <= now
    else:
        discard_records = can_discard
    last_of_producer = False
    if batch.producer_id >= 0 and batch.producer_id in active:
        last_data_offset, epoch = active[batch.producer_id]
        last_of_producer = (batch.last_offset == last_data_offset if last_data_offset >= 0
                            else batch.is_control and batch.producer_epoch == epoch)
    marker_for_empty_txn = can_discard and batch.is_control
    if discard_records and not last_of_producer and batch.last_offset + 1 != upper_bound:
        # BatchRetention.DELETE: filterTo drops the batch without reading its records
        plan.outcome = DROPPED
        try:
            records = batch.records()
        except CorruptDataError:
            records = []
        fate = MARKER_REMOVED if batch.is_control else ABORTED
        plan.records = [RecordFate(r.offset, r.key, r.value is None and not batch.is_control, fate) for r in records]
        return
    tombstones = False
    for record in batch.records():
        tombstone = record.value is None and not batch.is_control
        if discard_records:
            fate = MARKER_REMOVED if batch.is_control else ABORTED
        elif batch.is_control:
            fate = KEPT
        else:
            fate = _record_fate(batch, record, offset_map, latest, retain_legacy_deletes, now)
        plan.records.append(RecordFate(record.offset, record.key, tombstone, fate))
        if fate == KEPT:
            plan.kept.append(record)
            tombstones |= record.value is None
    if plan.kept:
        set_horizon = batch.magic >= 2 and (tombstones or marker_for_empty_txn) and batch.delete_horizon_ms is None
        if len(plan.kept) == len(plan.records) and not set_horizon:
            plan.outcome, plan.delete_horizon_ms = ORIGINAL, batch.delete_horizon_ms
        else:
            _check_rebuildable(batch, plan.kept)
            plan.outcome = REBUILT
            # Java's long sum: a delete.retention.ms near Long.MAX_VALUE wraps it negative, as Kafka writes it
            plan.delete_horizon_ms = java_long(now + delete_retention_ms) if set_horizon else batch.delete_horizon_ms
    elif last_of_producer or batch.last_offset + 1 == upper_bound:
        plan.outcome = EMPTY_HEADER  # BatchRetention.RETAIN_EMPTY
    else:
        plan.outcome = DROPPED
    _check_retained(plan)


def _check_retained(plan: BatchPlan) -> None:
    """FilterResult.updateRetainedBatchMetadata, which filterTo calls for each batch it keeps: a max
    timestamp needs the offset it is reported at (the batch's last offset; for a rebuilt batch as
    MemoryRecordsBuilder.info gives it), and the largest offset kept must not be negative. A damaged
    batch (a negative offset) makes Kafka's cleaner throw there."""
    batch = plan.batch
    if plan.outcome in (ORIGINAL, EMPTY_HEADER):
        max_timestamp, shallow_offset = batch.max_timestamp, batch.last_offset
        max_offset = batch.last_offset
    elif plan.outcome == REBUILT:
        max_offset = max(-1, *(record.offset for record in plan.kept))
        # the builder's last offset: the original batch's (overridden) in V2, the last record's in V0/V1
        last_offset = batch.last_offset if batch.magic >= 2 else plan.kept[-1].offset
        if batch.timestamp_type == "LogAppendTime":
            max_timestamp, shallow_offset = batch.max_timestamp, last_offset
        else:
            max_timestamp = max(NO_TIMESTAMP, *(record.timestamp for record in plan.kept))
            shallow_offset = -1 if max_timestamp == NO_TIMESTAMP else last_offset
    else:
        return
    refused = None
    if max_timestamp != NO_TIMESTAMP and shallow_offset < 0:
        refused = f"shallowOffset undefined for maximum timestamp {max_timestamp}"
    elif max_offset < 0:
        refused = "maxOffset undefined"
    if refused is not None:
        raise CorruptDataError(f"IllegalArgumentException keeping the batch: {refused}", path=batch.path,
                               position=batch.position)


def _check_rebuildable(batch: Batch, kept: list[Record]) -> None:
    """What MemoryRecordsBuilder checks when the cleaner rebuilds a batch of the records it keeps:
    each record as appendWithOffset takes it, then validateProducerState as close() does. A damaged
    batch may carry what makes it throw."""
    refused = None
    previous = None
    for record in kept:
        if previous is not None and record.offset <= previous:
            refused = (f"Illegal offset {record.offset} following previous offset {previous} "
                       f"(Offsets must increase monotonically).")
        elif record.timestamp < 0 and record.timestamp != NO_TIMESTAMP:
            refused = f"Invalid negative timestamp {record.timestamp}"
        if refused is not None:
            break
        previous = record.offset
    if refused is None and batch.magic >= 2:
        if batch.is_transactional and batch.producer_id == -1:
            refused = "Cannot write transactional messages without a valid producer ID"
        elif batch.producer_id != -1 and batch.producer_epoch == -1:
            refused = "Invalid negative producer epoch"
        elif batch.producer_id != -1 and batch.base_sequence < 0 and not batch.is_control:
            refused = "Invalid negative sequence number used"
    if refused is not None:
        raise CorruptDataError(f"IllegalArgumentException rebuilding the batch: {refused}", path=batch.path,
                               position=batch.position)


def _record_fate(batch: Batch, record: Record, offset_map: dict[bytes, int], latest: int,
                 retain_legacy_deletes: bool, now: int) -> str:
    """Cleaner.shouldRetainRecord."""
    if record.offset > latest:
        return KEPT
    if record.key is None:
        return NO_KEY
    if record.offset < offset_map.get(record.key, -1):
        return SUPERSEDED
    if record.value is not None:
        return KEPT
    if batch.magic >= 2:
        retain = batch.delete_horizon_ms is None or now < batch.delete_horizon_ms
    else:
        retain = retain_legacy_deletes
    return KEPT if retain else TOMBSTONE_EXPIRED


def _group_segments(cleaned: list[_Segment], report: CompactionReport) -> list[list[int]]:
    """Cleaner.groupSegmentsBySize: consecutive segments merged while the log and index sizes fit,
    and the next one's offsets (up to the base offset after it) fit the group's first base offset's
    4-byte relative offsets (found by the differential run: we measured from the group's last)."""
    settings = report.settings
    groups: list[list[_Segment]] = []
    rest = list(cleaned)
    while rest:
        group = [rest.pop(0)]
        log_size = group[0].size
        index_size, time_size = _index_sizes(group[0])
        while rest:
            nxt = rest[0]
            nxt_index, nxt_time = _index_sizes(nxt)
            bound = (rest[1].segment.base_offset - 1) if len(rest) > 1 else report.first_uncleanable_offset - 1
            if not (log_size + nxt.size <= settings.segment_bytes
                    and index_size + nxt_index <= settings.max_index_bytes
                    and time_size + nxt_time <= settings.max_index_bytes
                    and (nxt.size == 0 or bound - group[0].segment.base_offset <= INT_MAX)):
                break
            group.append(rest.pop(0))
            log_size += nxt.size
            index_size += nxt_index
            time_size += nxt_time
        groups.append(group)
    return [[s.segment.base_offset for s in group] for group in groups]


def _index_sizes(seg: _Segment) -> tuple[int, int]:
    """Bytes of the real entries of the offset and time indexes (what sizeInBytes is once trimmed); a
    recovered segment's are those its recovery rebuilt."""
    if seg.recovery is not None:
        return len(seg.recovery.offset_entries) * 8, len(seg.recovery.time_entries) * 12
    segment, sizes = seg.segment, []
    for path, kind, entry in ((segment.index, OffsetIndex, 8), (segment.timeindex, TimeIndex, 12)):
        try:
            sizes.append(kind(path, segment.base_offset).valid_count() * entry if path else 0)
        except KafkaLogError:
            sizes.append(0)
    return sizes[0], sizes[1]


def _summaries(read: list[_Segment], report: CompactionReport, loaded: LoadedLog) -> None:
    group_of = {base: group[0] for group in report.groups for base in group}
    for seg in read:
        base = seg.segment.base_offset
        if seg is read[-1]:
            section = "active"
        elif base < report.first_dirty_offset:
            section = "clean"
        elif base < report.first_uncleanable_offset:
            section = "dirty"
        else:
            section = "uncleanable"
        report.segments.append(SegmentSummary(base, loaded.kafka_path(seg.segment.log), seg.size, section,
                                              group=group_of.get(base),
                                              loaded_from=loaded.pieces.get(str(seg.segment.log))))
    by_base = {s.base_offset: s for s in report.segments}
    for plan in report.batches:
        summary = by_base[plan.segment]
        summary.records += len(plan.records)
        summary.removed.extend(plan.removed)
        for fate in plan.records:
            if fate.key is None:
                if not plan.batch.is_control:
                    report.null_key_offsets.append(fate.offset)
                continue
            if plan.batch.is_control:
                continue
            history = report.keys.setdefault(fate.key, KeyHistory(fate.key))
            history.versions += 1
            history.latest_offset = fate.offset
            history.latest_is_tombstone = fate.tombstone
            history.removed += fate.fate != KEPT
            if fate.tombstone:
                report.tombstones.append(Tombstone(
                    fate.offset, fate.key, plan.batch.delete_horizon_ms, fate.fate,
                    plan.delete_horizon_ms if fate.fate == KEPT and plan.outcome == REBUILT else None))


# ---------------------------------------------------------------------------------------------
# --simulate: write the cleaned partition elsewhere
# ---------------------------------------------------------------------------------------------


def simulate(report: CompactionReport, partition: PartitionDir, output_dir: str | os.PathLike) -> Path:
    """Write the partition as this cleaning leaves it to <output_dir>/<partition>/, with a
    cleaner-offset-checkpoint (and replication-offset-checkpoint) in <output_dir>, so that the next
    cleaning can be simulated on it. Offset and time indexes are rebuilt by recovery's rules, each
    .txnindex is as Kafka's cleaner leaves it (`_write_txn_indexes`). Returns the new dir."""
    output_dir = Path(os.path.realpath(output_dir))  # realpath: a symlink loop given is no RuntimeError
    refuse_output_in_input_tree(output_dir, [partition.path])
    target = output_dir / partition.name
    if target.exists():
        raise InputError("already exists; choose an empty output dir", path=target)
    output_dir.mkdir(parents=True, exist_ok=True)
    staging = output_dir / f".{partition.name}.partial"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    try:
        _write_partition(report, partition, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    os.replace(staging, target)
    if partition.partition >= 0:
        _update_checkpoint(output_dir / "cleaner-offset-checkpoint", partition.topic_partition, report.end_offset)
        _update_checkpoint(output_dir / "replication-offset-checkpoint", partition.topic_partition,
                           report.high_watermark)
    for _ in Rebuild([target], RebuildOptions(backup=False)):
        pass
    _write_txn_indexes(report, target)
    return target


def _write_txn_indexes(report: CompactionReport, target: Path) -> None:
    """Each segment's .txnindex as Kafka leaves it (`CompactionReport.txn_indexes`), over the one
    recovery's rules rebuilt: a cleaned segment's holds the entries the cleaner appended, as they
    were read (recovery would take the first offsets from the batches left, not the entries'); none
    is written empty."""
    for segment in target.glob("*.log"):
        path = segment.with_suffix(".txnindex")
        data = report.txn_indexes.get(offset_from_name(segment), b"")
        if data:
            path.write_bytes(data)
        else:
            path.unlink(missing_ok=True)


def _write_partition(report: CompactionReport, partition: PartitionDir, staging: Path) -> None:
    if report.loader_empties_log:  # (found by the differential run, seed 24122, compaction case 251)
        (staging / f"{filename_prefix(report.log_start_offset)}.log").write_bytes(b"")
        return
    groups = {group[0]: group for group in report.groups}
    merged = {base for group in report.groups for base in group[1:]}
    by_segment: dict[int, list[BatchPlan]] = {}
    for plan in report.batches:
        by_segment.setdefault(plan.segment, []).append(plan)
    for segment in report.segments:
        if segment.base_offset in merged:
            continue
        with open(staging / f"{filename_prefix(segment.base_offset)}.log", "wb") as out:
            if segment.base_offset not in groups:  # not cleaned: its bytes as loaded, unreadable ones too
                source, start = segment.loaded_from or (segment.file, 0)
                copy_prefix(Path(source), out, segment.size, start)
                continue
            for base in groups[segment.base_offset]:
                for plan in by_segment.get(base, []):
                    out.write(output_bytes(plan))
    for name in ("leader-epoch-checkpoint", "partition.metadata"):
        if name in partition.files:
            shutil.copyfile(partition.files[name], staging / name)
    for snapshot in partition.snapshots:
        if offset_from_name(snapshot) not in merged:  # UnifiedLog.replaceSegments deletes the merged ones' snapshots
            shutil.copyfile(snapshot, staging / snapshot.name)


def _update_checkpoint(path: Path, topic_partition: tuple[str, int], offset: int) -> None:
    entries = checkpoint.read_offsets(path) if path.exists() else {}
    entries[topic_partition] = offset
    # a partition dir name that is not UTF-8 is written back as the bytes it was read from
    path.write_bytes(checkpoint.format_offsets(entries).encode("utf-8", "surrogateescape"))


def output_bytes(plan: BatchPlan) -> bytes:
    """The bytes this cleaning writes for a batch: the original, a rebuilt batch of the kept
    records (buildRetainedRecordsInto), an empty header (writeEmptyHeader), or nothing."""
    batch = plan.batch
    if plan.outcome in (ORIGINAL, UNTOUCHED):
        return plan.data
    if plan.outcome == DROPPED:
        return b""
    if batch.magic < 2:
        raise InputError(f"rewriting a V{batch.magic} message set is not supported by --simulate",
                         path=batch.path, position=batch.position)
    flags = ((ATTR_TRANSACTIONAL if batch.is_transactional else 0) | (ATTR_CONTROL if batch.is_control else 0)
             | (ATTR_LOG_APPEND_TIME if batch.timestamp_type == "LogAppendTime" else 0))
    common = dict(last_offset_delta=batch.last_offset - batch.base_offset, producer_id=batch.producer_id,
                  producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                  partition_leader_epoch=batch.partition_leader_epoch)
    if plan.outcome == EMPTY_HEADER:
        return build_batch(batch.base_offset, [], base_timestamp=NO_TIMESTAMP, max_timestamp=batch.max_timestamp,
                           attributes=flags, **common)
    kept = plan.kept
    horizon = plan.delete_horizon_ms
    base_timestamp = horizon if horizon is not None else kept[0].timestamp
    if batch.timestamp_type == "LogAppendTime":
        max_timestamp = batch.max_timestamp
    else:
        max_timestamp = max(r.timestamp for r in kept)
    records = [build_record(r.offset - batch.base_offset, java_long(r.timestamp - base_timestamp), r.key, r.value,
                            r.headers) for r in kept]
    return build_batch(batch.base_offset, records, base_timestamp=base_timestamp, max_timestamp=max_timestamp,
                       compression_id=batch.compression_id,
                       attributes=flags | (ATTR_DELETE_HORIZON if horizon is not None else 0), **common)


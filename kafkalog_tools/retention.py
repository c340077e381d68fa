"""Retention: which segments Kafka's retention would delete at a given time, and why; and what
Kafka's loader will do with the leftovers of interrupted operations.

Kafka 3.8 sources: core/.../log/UnifiedLog.scala (deleteOldSegments, deletableSegments,
deleteSegments, deleteRetentionMsBreachedSegments, deleteRetentionSizeBreachedSegments,
deleteLogStartOffsetBreachedSegments, updateHighWatermark), core/.../log/LogLoader.scala (load,
removeTempFilesAndCollectSwapFiles), storage/.../log/LogSegment.java (largestTimestamp),
core/.../log/LogManager.scala (log start offset checkpoint); FORMAT.md sections 3.3 and 4.4.

The three retention passes run in Kafka's order - log start offset, then size, then time - each
from the oldest segment, stopping at the first segment it keeps; a pass that deletes advances
the log start offset to the next segment's base offset before the next pass runs. No segment whose
offsets reach the high watermark is deleted, nor an empty last segment. Tiered storage (remote
log) is not modelled. The same rules hold in 3.9 (whose changes concern tiered storage only). Nothing is
written.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import KafkaLogError
from .formats import checkpoint
from .formats.logdir import PartitionDir, Segment
from .formats.offset_index import OffsetIndex
from .formats.segment import BadEntry, SegmentFile, offset_from_name
from .formats.time_index import TimeIndex

DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000  # retention.ms
UNLIMITED = -1  # retention.bytes default; -1 also switches retention.ms off
DELETE, COMPACT = "delete", "compact"
BY_START, BY_SIZE, BY_TIME = "log-start-offset", "size", "time"
FILE_DELETE_DELAY_MS = 60_000  # file.delete.delay.ms


# ---------------------------------------------------------------------------------------------
# Facts about a partition that the retention, cleaner and replication rules all need
# ---------------------------------------------------------------------------------------------


def segment_next_offset(log_path: str | os.PathLike, base_offset: int) -> tuple[int, str | None]:
    """LogSegment.readNextOffset: one past the last offset of the last readable batch (the base
    offset of an empty segment), and a note when damage cut the scan short."""
    next_offset, note = base_offset, None
    with SegmentFile(log_path) as log:
        for entry in log.entries():
            if isinstance(entry, BadEntry) or not entry.crc_valid:
                note = f"{log.path}: byte {entry.position}: unreadable batch; the segment is read up to it"
                break
            next_offset = max(next_offset, entry.last_offset + 1)
    return next_offset, note


def log_end_offset(segments: list[Segment]) -> tuple[int, list[str]]:
    """The log end offset: the next offset of the last segment (LocalLog.logEndOffset)."""
    last = segments[-1]
    next_offset, note = segment_next_offset(last.log, last.base_offset)
    return next_offset, [note] if note else []


def largest_timestamp(segment: Segment) -> tuple[int, str]:
    """LogSegment.largestTimestamp: the time index's last entry (maxTimestampSoFar), else the .log
    mtime. A time index without its final entry (copied while the broker ran) gets the maximum of
    the batches after it, as recovery would rebuild it; without a time index, the batches' maximum."""
    with SegmentFile(segment.log) as log:
        last_entry, start = None, 0
        if segment.timeindex is not None:
            try:
                entries = TimeIndex(segment.timeindex, segment.base_offset).entries()
                last_entry = entries[-1] if entries else None
                if last_entry is not None and segment.index is not None:
                    start = OffsetIndex(segment.index, segment.base_offset).lookup(last_entry.offset).position
            except KafkaLogError:
                last_entry, start = None, 0
        scanned = -1
        for entry in log.entries(start if 0 <= start < log.file_size else 0):  # a damaged index may point anywhere
            if isinstance(entry, BadEntry) or not entry.crc_valid:
                break
            scanned = max(scanned, entry.max_timestamp)
        indexed = last_entry.timestamp if last_entry is not None else -1
        if last_entry is not None and indexed >= scanned and indexed >= 0:
            return indexed, "time index"
        if max(indexed, scanned) >= 0:
            return max(indexed, scanned), "batches (time index incomplete)" if last_entry else "batches (no time index)"
        return log.mtime_ms, "file mtime (no timestamps)"


def checkpointed(partition: PartitionDir, name: str, problems: list[str]) -> int | None:
    """A partition's entry in a log-dir checkpoint; a malformed file is a note, not a failure."""
    if partition.partition < 0:
        return None
    try:
        return checkpoint.partition_offset(partition.path, partition.topic_partition, name)
    except KafkaLogError as exc:
        problems.append(f"{exc} (checkpoint ignored)")
        return None


def initial_log_start_offset(partition: PartitionDir, first_base: int, problems: list[str]) -> tuple[int, str]:
    """LogLoader.load: max(log-start-offset-checkpoint entry (0 when absent), first segment's base)."""
    recorded = checkpointed(partition, "log-start-offset-checkpoint", problems)
    if recorded is not None and recorded > first_base:
        return recorded, "log-start-offset-checkpoint"
    return first_base, "first segment's base offset"


def initial_high_watermark(partition: PartitionDir, log_start: int, log_end: int, problems: list[str]) -> tuple[int, str]:
    """Partition.createLog + UnifiedLog.updateHighWatermark: the replication-offset-checkpoint entry
    clamped to [log start, log end]. Without an entry we assume a fully replicated log (log end)."""
    recorded = checkpointed(partition, "replication-offset-checkpoint", problems)
    if recorded is None:
        return log_end, "assumed = log end offset (no replication-offset-checkpoint entry)"
    return min(max(recorded, log_start), log_end), "replication-offset-checkpoint"


# ---------------------------------------------------------------------------------------------
# Typed results
# ---------------------------------------------------------------------------------------------


@dataclass
class SegmentVerdict:
    base_offset: int
    file: str
    size: int
    largest_timestamp: int
    timestamp_source: str
    upper_bound_offset: int
    """The next segment's base offset, or the log end offset for the last segment."""
    deleted_by: str | None = None
    reason: str = ""
    kept_because: list[str] = field(default_factory=list)
    snapshot: str | None = None
    """The producer snapshot Kafka deletes with this segment."""

    @property
    def deleted(self) -> bool:
        return self.deleted_by is not None


@dataclass
class Leftover:
    file: str
    kind: str
    action: str


@dataclass
class RetentionSettings:
    now: int | None = None
    retention_ms: int = DEFAULT_RETENTION_MS
    retention_bytes: int = UNLIMITED
    log_start_offset: int | None = None
    high_watermark: int | None = None
    cleanup_policy: tuple[str, ...] = (DELETE,)


@dataclass
class RetentionReport:
    path: str
    name: str
    now: int
    settings: RetentionSettings
    segments: list[SegmentVerdict] = field(default_factory=list)
    leftovers: list[Leftover] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Data that could not be read (damaged segments, malformed checkpoints): exit 1."""
    log_start_offset: int | None = None
    log_start_source: str = ""
    high_watermark: int | None = None
    high_watermark_source: str = ""
    log_end_offset: int | None = None
    size: int = 0
    new_log_start_offset: int | None = None
    rolled_empty_segment: bool = False
    """Every segment goes: Kafka first rolls a new empty active segment (at `rolled_at`)."""
    rolled_at: int | None = None
    """The new segment's base offset: the log end offset, or the log start offset when the loader
    deletes every segment because the log start offset lies beyond the log's end."""

    @property
    def deleted(self) -> list[SegmentVerdict]:
        return [s for s in self.segments if s.deleted]


# ---------------------------------------------------------------------------------------------
# The passes
# ---------------------------------------------------------------------------------------------


def analyze_partition(partition: PartitionDir, settings: RetentionSettings | None = None) -> RetentionReport:
    settings = settings or RetentionSettings()
    now = settings.now if settings.now is not None else int(time.time() * 1000)
    report = RetentionReport(str(partition.path), partition.name, now, settings)
    report.leftovers = loader_leftovers(partition, report.problems)
    segments = [s for s in partition.segments if s.log is not None]
    if not segments:
        report.notes.append("no .log segments")
        return report
    for s in partition.segments:
        if s.log is None:
            report.notes.append(f"index files at base offset {s.base_offset} have no .log: Kafka's loader deletes "
                                f"them as orphans")
    report.log_end_offset, problems = log_end_offset(segments)
    report.problems.extend(problems)
    first = segments[0].base_offset
    if settings.log_start_offset is not None:
        report.log_start_offset, report.log_start_source = max(settings.log_start_offset, first), "--log-start-offset"
    else:
        report.log_start_offset, report.log_start_source = initial_log_start_offset(partition, first, report.problems)
    if settings.high_watermark is not None:
        report.high_watermark = min(max(settings.high_watermark, report.log_start_offset), report.log_end_offset)
        report.high_watermark_source = "--high-watermark"
    else:
        report.high_watermark, report.high_watermark_source = initial_high_watermark(
            partition, report.log_start_offset, report.log_end_offset, report.problems)
    snapshots = {offset_from_name(p): p for p in partition.snapshots}
    for index, segment in enumerate(segments):
        upper = segments[index + 1].base_offset if index + 1 < len(segments) else report.log_end_offset
        largest, source = largest_timestamp(segment)
        snapshot = snapshots.get(segment.base_offset)
        report.segments.append(SegmentVerdict(segment.base_offset, str(segment.log), _size(segment.log), largest,
                                              source, upper, snapshot=str(snapshot) if snapshot else None))
    report.size = sum(s.size for s in report.segments)
    if report.log_start_offset > report.log_end_offset:
        _loader_deletes_everything(report)
    else:
        _run_passes(report)
    return report


def _loader_deletes_everything(report: RetentionReport) -> None:
    """LogLoader.deleteSegmentsIfLogStartGreaterThanLogEnd: when the broker next opens the log, every
    segment goes, the active one too, and a new empty one starts at the log start offset; the
    retention passes then find nothing to delete."""
    start, end = report.log_start_offset, report.log_end_offset
    report.notes.append(f"the log start offset {start} is beyond the log end offset {end}: Kafka's loader deletes "
                        "every segment when it opens the log")
    for verdict in report.segments:
        verdict.deleted_by = BY_START
        verdict.reason = (f"the log start offset {start} is beyond the log end offset {end}: the loader deletes "
                          "every segment")
    report.rolled_empty_segment, report.rolled_at = True, start
    report.new_log_start_offset = start


def _run_passes(report: RetentionReport) -> None:
    """UnifiedLog.deleteOldSegments: the log-start-offset pass always; size and time only when the
    cleanup policy includes delete."""
    settings, state = report.settings, _State(report)
    state.run(BY_START, _start_offset_predicate(state))
    if DELETE in settings.cleanup_policy:
        if settings.retention_bytes >= 0 and state.size() >= settings.retention_bytes:
            state.run(BY_SIZE, _size_predicate(state, state.size() - settings.retention_bytes))
        elif settings.retention_bytes >= 0:
            state.note_kept(f"size: the log ({state.size()} bytes) is below retention.bytes "
                            f"({settings.retention_bytes})")
        if settings.retention_ms >= 0:
            state.run(BY_TIME, _time_predicate(report.now, settings.retention_ms))
    else:
        state.note_kept("size and time: cleanup.policy has no 'delete', only the log start offset applies")
    report.new_log_start_offset = state.log_start
    for verdict in report.segments:
        if not verdict.deleted and not verdict.kept_because:
            verdict.kept_because.append("an older segment is kept: each pass stops at the first segment it keeps")


class _State:
    """The segments still present and the log start offset, as the passes change them."""

    def __init__(self, report: RetentionReport):
        self.report = report
        self.remaining = list(report.segments)
        self.log_start = report.log_start_offset

    def size(self) -> int:
        return sum(s.size for s in self.remaining)

    def note_kept(self, why: str) -> None:
        if self.remaining:
            self.remaining[0].kept_because.append(why)

    def run(self, reason: str, predicate) -> None:
        """UnifiedLog.deletableSegments then deleteSegments."""
        high_watermark, log_end = self.report.high_watermark, self.report.log_end_offset
        deletable: list[SegmentVerdict] = []
        for index, segment in enumerate(self.remaining):
            nxt = self.remaining[index + 1] if index + 1 < len(self.remaining) else None
            upper = nxt.base_offset if nxt is not None else log_end
            if nxt is None and segment.size == 0:
                segment.kept_because.append(f"{reason}: the last segment is empty (never deleted)")
                break
            if high_watermark < upper:
                segment.kept_because.append(f"{reason}: its offsets reach the high watermark {high_watermark} "
                                            f"(upper bound {upper})")
                break
            verdict = predicate(segment, nxt)
            if verdict is None:
                break
            segment.deleted_by, segment.reason = reason, verdict
            deletable.append(segment)
        if not deletable:
            return
        if len(deletable) == len(self.remaining):
            self.report.rolled_empty_segment = True  # deleteSegments rolls a new active segment first
            self.report.rolled_at = log_end
            self.log_start = max(self.log_start, log_end)
        else:
            self.log_start = max(self.log_start, self.remaining[len(deletable)].base_offset)
        self.remaining = self.remaining[len(deletable):]


def _start_offset_predicate(state: _State):
    """deleteLogStartOffsetBreachedSegments: the next segment's base offset <= the log start offset."""
    def predicate(segment: SegmentVerdict, nxt: SegmentVerdict | None) -> str | None:
        if nxt is not None and nxt.base_offset <= state.log_start:
            return f"the next segment's base offset {nxt.base_offset} <= log start offset {state.log_start}"
        segment.kept_because.append(f"log-start-offset: it holds offsets at or after the log start offset "
                                    f"{state.log_start}")
        return None
    return predicate


def _size_predicate(state: _State, excess: int):
    """deleteRetentionSizeBreachedSegments: oldest first while the excess over retention.bytes covers
    the whole segment."""
    remaining_excess = [excess]

    def predicate(segment: SegmentVerdict, nxt: SegmentVerdict | None) -> str | None:
        if remaining_excess[0] - segment.size >= 0:
            before = remaining_excess[0]
            remaining_excess[0] -= segment.size
            return f"the log exceeds retention.bytes by {before} bytes, this segment is {segment.size}"
        segment.kept_because.append(f"size: deleting its {segment.size} bytes would take the log below "
                                    f"retention.bytes (excess left: {remaining_excess[0]} bytes)")
        return None
    return predicate


def _time_predicate(now: int, retention_ms: int):
    """deleteRetentionMsBreachedSegments: now - largestTimestamp > retention.ms."""
    def predicate(segment: SegmentVerdict, nxt: SegmentVerdict | None) -> str | None:
        age = now - segment.largest_timestamp
        if age > retention_ms:
            return f"largest timestamp {segment.largest_timestamp} ({segment.timestamp_source}) is {age} ms old " \
                   f"> retention.ms {retention_ms}"
        segment.kept_because.append(f"time: largest timestamp {segment.largest_timestamp} "
                                    f"({segment.timestamp_source}) is {age} ms old <= retention.ms {retention_ms}")
        return None
    return predicate


def _size(path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


# ---------------------------------------------------------------------------------------------
# Leftovers: LogLoader.removeTempFilesAndCollectSwapFiles and the swap passes of LogLoader.load
# ---------------------------------------------------------------------------------------------


def loader_leftovers(partition: PartitionDir, problems: list[str]) -> list[Leftover]:
    out: list[Leftover] = []
    cleaned = [offset_from_name(p) for p in partition.leftovers if p.name.endswith(".cleaned")]
    min_cleaned = min((o for o in cleaned if o is not None), default=None)
    valid_swaps: list[Path] = []
    for path in partition.leftovers:
        name = path.name
        if name.endswith(".checkpoint.deleted") or name.endswith(".checkpoint.part"):
            out.append(Leftover(str(path), name.rsplit(".", 1)[1], "KRaft snapshot file: KafkaMetadataLog "
                                "deletes it when the metadata log loads"))
        elif name.endswith(".deleted"):
            out.append(Leftover(str(path), "deleted", "deleted at the next start (a deletion scheduled "
                                f"file.delete.delay.ms = {FILE_DELETE_DELAY_MS} ms after retention or cleaning "
                                "had not run yet)"))
        elif name.endswith(".cleaned"):
            out.append(Leftover(str(path), "cleaned", "deleted at the next start (the output of a cleaning "
                                "the broker did not finish)"))
        elif name.endswith(".swap"):
            offset = offset_from_name(path)
            if min_cleaned is not None and offset is not None and offset >= min_cleaned:
                out.append(Leftover(str(path), "swap", f"deleted at the next start: at or after the smallest "
                                    f".cleaned offset {min_cleaned}, part of an incomplete split (KAFKA-6264)"))
            else:
                valid_swaps.append(path)
        else:
            out.append(Leftover(str(path), "unknown", "not a file Kafka's loader handles"))
    out.extend(_swap_actions(partition, valid_swaps, problems))
    return out


def _swap_actions(partition: PartitionDir, swaps: list[Path], problems: list[str]) -> list[Leftover]:
    """Segments between the smallest .log.swap base offset and the largest swap next offset are
    deleted, then every remaining .swap file is renamed into place."""
    low = high = None
    for path in swaps:
        if not path.name.endswith(".log.swap"):
            continue
        base = offset_from_name(path)
        if base is None:
            continue
        try:
            upper, note = segment_next_offset(path, base)
        except KafkaLogError as exc:
            problems.append(str(exc))
            upper, note = base, None
        if note:
            problems.append(note)
        low = base if low is None else min(low, base)
        high = upper if high is None else max(high, upper)
    out = [Leftover(str(p), "swap", f"renamed to {p.name[:-len('.swap')]} at the next start (a cleaning or "
                    "split that had finished writing)") for p in swaps]
    if low is None:
        return out
    replaced = []
    for segment in partition.segments:
        if low <= segment.base_offset < high:
            replaced.extend(p for p in (segment.log, segment.index, segment.timeindex, segment.txnindex) if p)
    replaced.extend(p for p in partition.snapshots if (o := offset_from_name(p)) is not None and low <= o < high)
    out.extend(Leftover(str(p), "replaced", f"deleted at the next start: replaced by the .swap segment(s) covering "
                        f"offsets [{low}, {high})") for p in replaced)
    return out

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

The log is judged as Kafka 4.0's loader opens it (LogLoader.loadSegmentFiles and recoverLog;
LogSegment.readNextOffset, FileRecords.searchForOffsetWithSize). After a clean shutdown (the log dir's
`.kafka_cleanshutdown`) a segment without its .index is recovered first, and the log end offset is
read from the active segment's offset index's last entry on, so a big active segment is not read
again and damage before that entry is not seen. Without the marker (a broker that died) every segment
from the recovery point on is recovered first, as the broker will on its next start: a damaged tail
is cut, and the segments after the first one cut are deleted before any retention pass runs.
"""
from __future__ import annotations

import bisect
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import KafkaLogError
from .formats import checkpoint, txn_index
from .formats.logdir import CLEAN_SHUTDOWN, PartitionDir, Segment
from .formats.offset_index import OffsetIndex
from .formats.segment import SegmentFile, offset_from_name
from .formats.time_index import TimeIndex
from .formats.txn_index import TransactionIndex
from .producer_rebuild import LoadedSegment, Snapshots, entry_lookup, index_lookup, rebuild_producer_state
from .recovery import (DEFAULT_INDEX_INTERVAL_BYTES, InvalidOffsetError, LeaderEpochs, ProducerState,
                       SegmentOffsetOverflowError, SegmentRecovery, first_offset, read_next_offset, recover_segment,
                       translate_offset)
from .split import has_overflow, left_by_failed_recovery, split_segment, write_pieces

DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000  # retention.ms
UNLIMITED = -1  # retention.bytes default; -1 also switches retention.ms off
DELETE, COMPACT = "delete", "compact"
BY_START, BY_SIZE, BY_TIME = "log-start-offset", "size", "time"
AUTO, CLEAN, UNCLEAN = "auto", "clean", "unclean"
"""How the broker stopped: as the log dir's .kafka_cleanshutdown marker says, or as the caller says."""
FILE_DELETE_DELAY_MS = 60_000  # file.delete.delay.ms


# ---------------------------------------------------------------------------------------------
# Facts about a partition that the retention, cleaner and replication rules all need
# ---------------------------------------------------------------------------------------------


def segment_next_offset(log_path: str | os.PathLike, base_offset: int,
                        index_path: str | os.PathLike | None = None) -> int:
    """LogSegment.readNextOffset: from the offset index's last entry (where Kafka's lookup of its
    offset points; without an index, from the start) to the end of the file, the last batch's next
    offset, or the base offset when no batch there reaches the entry's offset. Damage before the
    entry is never read; damage after it that Kafka's reader throws on raises KafkaLogError."""
    target, position = base_offset, 0
    if index_path is not None:
        index = OffsetIndex(index_path, base_offset)
        target = index.last_offset()
        position = index.search(target).position
    with SegmentFile(log_path) as log:
        return read_next_offset(log, target, position)


@dataclass
class LoadedLog:
    """What Kafka's loader makes of a partition's segments when it opens the log (LogLoader.load): a
    segment without its .index is recovered (LogSegment.recover: its invalid tail cut off, its
    indexes rebuilt); after a clean shutdown the others are taken as they are, after an unclean one
    every segment from the recovery point is recovered too, and the first one cut short is the
    last (recoverLog). The log end offset is the last segment's readNextOffset. `failure` is why
    Kafka cannot open the log at all (its loader throws: the broker takes the log dir offline and
    nothing runs on the log)."""

    log_end_offset: int | None = None
    recovered: dict[int, SegmentRecovery] = field(default_factory=dict)
    """base offset -> the (latest) recovery of a segment"""
    epochs: LeaderEpochs = field(default_factory=LeaderEpochs)
    """The log's leader epoch cache, as its checkpoint starts it: every recovery of the load moves it,
    passes after a split included (a piece recovered again assigns no epoch the cache has)."""
    failure: str | None = None
    segments: list[LoadedSegment] = field(default_factory=list)
    """The segments as loaded, each ending where its recovery cut it; those deleted are not here."""
    deleted: list[int] = field(default_factory=list)
    """Base offsets of the segments the recovery after an unclean shutdown deleted."""
    state: ProducerState | None = None
    """The producer state the loader ends with (None: it failed, or every segment went)."""
    files: list[Segment] = field(default_factory=list)
    """The segments' files as the loader leaves them: where it split a segment whose offsets overflow,
    the pieces (written to `scratch`) in its place."""
    splits: list[str] = field(default_factory=list)
    """Each split, in words."""
    log_start: int | None = None
    """The log start offset the loader settles on (None: it failed first)."""
    scratch: tempfile.TemporaryDirectory | None = None
    """Where the pieces of split segments are written; it goes with this object."""
    pieces: dict[str, tuple[str, int]] = field(default_factory=dict)
    """A piece's .log in `scratch` -> the split segment's .log and the byte the piece starts at."""
    rolling_timestamps: dict[int, int] = field(default_factory=dict)
    """Base offset -> the rollingBasedTimestamp of a piece recoverLog's split put in the segment map
    (`split.Piece.rolling_timestamp`); a segment loaded from its file has none until it is read."""
    directory: Path | None = None
    """The partition's directory."""

    first_unstable: int | None = None
    """UnifiedLog's first unstable offset as last looked up (`_read_first_unstable`); None: none."""

    def update_high_watermark(self, high_watermark: int) -> None:
        """UnifiedLog.updateHighWatermark: the transactions whose markers it passed leave the first
        unstable offset, which is looked up in the log again; where that read throws, the log cannot
        be opened (`failure`)."""
        try:
            self.first_unstable = _read_first_unstable(self, high_watermark)
        except KafkaLogError as exc:
            self.failure = f"Kafka's loader cannot open the log: {exc}"

    def last_stable_offset(self, high_watermark: int) -> int:
        """UnifiedLog.lastStableOffset: the first unstable offset where it is below the high watermark."""
        if self.first_unstable is not None and self.first_unstable < high_watermark:
            return self.first_unstable
        return high_watermark

    def kafka_path(self, log: str | os.PathLike) -> str:
        """A segment's .log as Kafka's loader leaves it: a piece of a split is named after its base
        offset in the partition's directory."""
        if os.fspath(log) in self.pieces:
            return str(self.directory / Path(log).name)
        return os.fspath(log)


def loader_recovery_point(partition: PartitionDir, shutdown: str, problems: list[str], notes: list[str],
                          before: str) -> int | None:
    """Where Kafka's loader recovers the log from when the broker next starts: None after a clean
    shutdown, else the recovery-point-offset-checkpoint's entry (0 without one). `shutdown` AUTO
    takes the log dir's marker (a partition copied out of its log dir has none); what was assumed goes
    to `notes`, saying that it happens `before` what the caller models."""
    if shutdown == AUTO:
        if (partition.path.parent / CLEAN_SHUTDOWN).exists():
            return None
        why = "no clean shutdown marker in the log dir"
    elif shutdown == CLEAN:
        return None
    else:
        why = f"--shutdown {shutdown}"
    point = checkpointed(partition, "recovery-point-offset-checkpoint", problems) or 0
    notes.append(f"{why}: Kafka's loader recovers the segments from offset {point} (the recovery point) "
                 f"before {before}")
    return point


def load_log(partition: PartitionDir, segments: list[Segment], checkpoint_start: int, log_start: int,
             recovery_point: int | None = None, expiry: tuple[int, int] | None = None) -> LoadedLog:
    """LogLoader.load: loadSegmentFiles (`checkpoint_start`: the log-start-offset checkpoint's entry,
    0 without one), after an unclean shutdown recoverLog from `recovery_point` (None: a clean
    shutdown), the log end offset (readNextOffset), then the producer state rebuilt up to it from
    the latest snapshot (`log_start`: the log start offset the loader settles on, which a split
    moves to max(`checkpoint_start`, the first segment's base offset): `LoadedLog.log_start`), unless
    the log start lies past the log end and every segment goes. `expiry`: (now,
    producer.id.expiration.ms), the producers a snapshot load drops (None: none, where only whether
    the loader throws matters)."""
    loaded = LoadedLog(files=list(segments), directory=partition.path, epochs=LeaderEpochs.of(partition))
    try:
        snapshots = Snapshots(partition.snapshots, expiry)
        held = _retrying_on_overflow(loaded, snapshots, None,
                                     lambda: _load_segment_files(loaded.files, snapshots, checkpoint_start, loaded))
        if recovery_point is not None:
            held = _retrying_on_overflow(loaded, snapshots, held,
                                         lambda: _recover_log(list(held), snapshots, checkpoint_start, recovery_point,
                                                              loaded))
        loaded.segments = held
        if loaded.splits:
            log_start = max(checkpoint_start, held[0].base_offset)
        loaded.log_start = log_start
        last = held[-1]
        recovered = loaded.recovered.get(last.base_offset)
        if recovered is not None:
            loaded.log_end_offset = recovered.next_offset
        else:
            segment = next(s for s in loaded.files if s.base_offset == last.base_offset)
            loaded.log_end_offset = segment_next_offset(segment.log, segment.base_offset, segment.index)
        if log_start <= loaded.log_end_offset:
            snapshots.remove_stray([segment.base_offset for segment in held])
            loaded.state, _ = rebuild_producer_state(held, snapshots, log_start, loaded.log_end_offset,
                                                     clean_shutdown=recovery_point is None)
            loaded.first_unstable = _read_first_unstable(loaded, None)
    except KafkaLogError as exc:
        loaded.failure = f"Kafka's loader cannot open the log: {exc}"
    return loaded


def _read_first_unstable(loaded: LoadedLog, high_watermark: int | None) -> int | None:
    """UnifiedLog.maybeIncrementFirstUnstableOffset, as the log is created (`high_watermark` None) and
    as its high watermark is set: the first offset of the earliest open transaction, or of one the
    loader's replay saw end at or past the high watermark (all of them before it is set), no lower
    than the log start offset, is looked up in the log (LocalLog.convertToOffsetMetadataOrThrow:
    from the segment holding it, each from where its offset index puts it, to the first batch that
    reaches it). Returns the offset found, which is that batch's base offset (LogSegment.read), or
    the log end offset where no batch reaches it; None without a transaction. What Kafka's reader
    throws on the way is raised (both found by the differential run: a damaged closed segment before
    an open transaction, and a first batch whose base offset a bit flip changed)."""
    state = loaded.state
    if state is None:
        return None
    firsts = list(state.ongoing) + [first for first, marker in state.completed
                                    if high_watermark is None or marker >= high_watermark]
    if not firsts:
        return None
    offset = max(min(firsts), loaded.log_start)
    if offset >= loaded.log_end_offset:
        return loaded.log_end_offset  # LocalLog.read at the log end reads nothing
    bases = [segment.base_offset for segment in loaded.segments]
    for segment in loaded.segments[max(bisect.bisect_right(bases, offset) - 1, 0):]:
        with SegmentFile(segment.path, max_bytes=segment.end) as log:
            found = translate_offset(log, offset, segment.lookup(offset), log.end)
            if found is not None:
                return first_offset(log, found, "looking up the first unstable offset")
    return loaded.log_end_offset


def _retrying_on_overflow(loaded: LoadedLog, snapshots: Snapshots, held: list[LoadedSegment] | None, load):
    """LogLoader.retryOnOffsetOverflow: `load` again after each split of a segment whose offsets
    overflow. `held`: the segments `load` recovers (recoverLog), which take the pieces in the split
    segment's place; None: `load` lists them again from `loaded.files` (loadSegmentFiles)."""
    while True:
        try:
            return load()
        except SegmentOffsetOverflowError as overflow:
            pieces = _split(loaded, snapshots, overflow, in_segment_map=held is not None)
            if held is not None:
                bases = {piece.base_offset for piece in pieces}
                held[:] = sorted([h for h in held if h.base_offset not in bases and h.path != Path(overflow.path)]
                                 + [LoadedSegment(p.base_offset, p.log, None, index_lookup(p.index, p.base_offset))
                                    for p in pieces], key=lambda h: h.base_offset)


def _split(loaded: LoadedLog, snapshots: Snapshots, overflow: SegmentOffsetOverflowError,
           in_segment_map: bool) -> list[Segment]:
    """LocalLog.splitOverflowedSegment of the segment whose recovery threw `overflow`, and
    replaceSegments: the pieces take the place of any segment at a piece's base offset (keeping its
    .txnindex), and the split segment's where it is `in_segment_map` (recoverLog's), its producer
    snapshot going unless a piece starts where it did. Else (loadSegmentFiles recovered it) its files
    stay beside the pieces, with the indexes the failed recovery left (`split.left_by_failed_recovery`;
    found live: Kafka kept segment 0 and deleted it by size)."""
    segment = next(s for s in loaded.files if s.log is not None and os.fspath(s.log) == overflow.path)
    failed = loaded.recovered.pop(segment.base_offset)
    with SegmentFile(segment.log) as log:
        # hasOverflow reads the next offset from the offset index the failed recovery left
        target, position = failed.offset_entries[-1] if failed.offset_entries else (segment.base_offset, 0)
        next_offset = read_next_offset(log, target, position)
        if not has_overflow(segment.base_offset, next_offset):
            raise KafkaLogError(f"{overflow.message}, and Kafka's split refuses the segment "
                                f"(IllegalArgumentException): its last batch does not overflow (next offset "
                                f"{next_offset})", path=overflow.path)
        pieces = split_segment(log, DEFAULT_INDEX_INTERVAL_BYTES)
        if loaded.scratch is None:
            loaded.scratch = tempfile.TemporaryDirectory(prefix="kafkalog-split-")
        directory = Path(loaded.scratch.name) / str(len(loaded.splits))
        directory.mkdir()
        files = write_pieces(pieces, log, directory)
    split_at = {file.base_offset for file in files}
    left_out = ""
    # replaceSegments adds the pieces to the map, then takes the split segment's base offset out of
    # it unless the lowest piece starts there: a later piece there is left out (its files stay)
    if in_segment_map and segment.base_offset in split_at and min(split_at) != segment.base_offset:
        left_out = f" (the piece at {segment.base_offset} is left out of the loader's segment map)"
        kept = [at for at, file in enumerate(files) if file.base_offset != segment.base_offset]
        files, pieces = [files[at] for at in kept], [pieces[at] for at in kept]
    loaded.pieces.update({str(file.log): (str(segment.log), piece.start) for file, piece in zip(files, pieces)})
    if in_segment_map:  # (loadSegmentFiles' retry opens every segment from its file again)
        loaded.rolling_timestamps.update({piece.base_offset: piece.rolling_timestamp for piece in pieces})
    by_base = {s.base_offset: s for s in loaded.files if s is not segment}
    if not in_segment_map:  # (a piece at its base offset takes its place, and the .txnindex left)
        by_base[segment.base_offset] = left_by_failed_recovery(segment, failed.index_bytes(), failed.timeindex_bytes(),
                                                               failed.txnindex_bytes(), directory)
    for piece in files:
        replaced = by_base.pop(piece.base_offset, None)
        if replaced is not None:
            piece.txnindex = replaced.txnindex
            loaded.recovered.pop(piece.base_offset, None)
        by_base[piece.base_offset] = piece
    loaded.files = [by_base[base] for base in sorted(by_base)]
    if in_segment_map and segment.base_offset not in split_at:
        snapshots.remove(segment.base_offset)
    bases = ", ".join(str(file.base_offset) for file in files)
    loaded.splits.append(f"{segment.log}: {overflow.message}: Kafka's loader splits the segment (KAFKA-6264) into "
                         f"segments at base offsets {bases}{left_out}, then loads the log again")
    return files


def adopt_split_log_start(loaded: LoadedLog, log_start: int, source: str) -> tuple[int, str]:
    """The log start offset and its source once the loader split a segment: the first segment may
    start elsewhere now (LogLoader.load takes max(checkpoint, first segment's base offset) after it)."""
    if not loaded.splits or loaded.log_start is None or loaded.log_start == log_start:
        return log_start, source
    if loaded.log_start == loaded.segments[0].base_offset:
        return loaded.log_start, "first segment's base offset, as the loader's split leaves it"
    return loaded.log_start, source


def _load_segment_files(segments: list[Segment], snapshots: Snapshots, checkpoint_start: int,
                        loaded: LoadedLog) -> list[LoadedSegment]:
    """LogLoader.loadSegmentFiles: LogSegment.sanityCheck's NoSuchFileException (no .index) or
    CorruptIndexException (a .txnindex entry ending below the base offset) means recoverSegment (what
    it throws, the loader does not catch). A segment an earlier pass recovered (before a split) has
    the indexes that recovery wrote."""
    held: list[LoadedSegment] = []
    for segment in segments:
        earlier = loaded.recovered.get(segment.base_offset)
        if earlier is not None and earlier.failure is None:
            held.append(_as_recovered(segment.base_offset, segment.log, earlier))
            continue
        if segment.index is not None and (segment.txnindex is None
                                          or txn_index.sanity_check(TransactionIndex(segment.txnindex)) is None):
            held.append(LoadedSegment(segment.base_offset, segment.log, None,
                                      index_lookup(segment.index, segment.base_offset)))
            continue
        recovery = _recover_segment(held, LoadedSegment(segment.base_offset, segment.log, None, None), snapshots,
                                    checkpoint_start, loaded)
        if recovery.failure is not None:
            raise recovery.failure
        held.append(_as_recovered(segment.base_offset, segment.log, recovery))
    return held


def _recover_log(held: list[LoadedSegment], snapshots: Snapshots, checkpoint_start: int, recovery_point: int,
                 loaded: LoadedLog) -> list[LoadedSegment]:
    """LogLoader.recoverLog after an unclean shutdown: each segment from the one holding the recovery
    point is recovered again, in order; an InvalidOffsetException empties the segment. The first
    segment that loses bytes ends the log: the segments after it are deleted."""
    bases = [segment.base_offset for segment in held]
    first = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
    for index in range(first, len(held)):
        segment = held[index]
        recovery = _recover_segment(held[:index], segment, snapshots, checkpoint_start, loaded)
        size = _size(segment.path) if segment.end is None else segment.end
        if isinstance(recovery.failure, InvalidOffsetError):
            recovery = SegmentRecovery(str(segment.path), segment.base_offset, size, next_offset=segment.base_offset)
            loaded.recovered[segment.base_offset] = recovery
        elif recovery.failure is not None:
            raise recovery.failure
        held[index] = _as_recovered(segment.base_offset, segment.path, recovery)
        if recovery.valid_bytes < size:
            loaded.deleted = bases[index + 1:]
            return held[:index + 1]
    return held


def _recover_segment(before: list[LoadedSegment], segment: LoadedSegment, snapshots: Snapshots,
                     checkpoint_start: int, loaded: LoadedLog) -> SegmentRecovery:
    """LogLoader.recoverSegment: the producer state of the segments `before`, rebuilt by a
    ProducerStateManager of its own (what that throws, the loader does not catch), then
    LogSegment.recover over the segment's bytes as loaded so far; a snapshot after it."""
    state, last_snapshot = rebuild_producer_state(before, snapshots, checkpoint_start, segment.base_offset,
                                                  clean_shutdown=False)
    with SegmentFile(segment.path, max_bytes=segment.end) as log:
        recovery = recover_segment(log, state, epochs=loaded.epochs)
    loaded.recovered[segment.base_offset] = recovery
    if recovery.failure is None and (recovery.map_end_offset or 0) > last_snapshot:
        snapshots.take(recovery.map_end_offset, state)
    return recovery


def _as_recovered(base_offset: int, path: Path, recovery: SegmentRecovery) -> LoadedSegment:
    """The segment as its recovery leaves it: cut to its valid bytes, with the offset index it rebuilt."""
    return LoadedSegment(base_offset, path, recovery.valid_bytes, entry_lookup(recovery.offset_entries))


def log_end_offset(segments: list[Segment]) -> int:
    """The log end offset: the next offset of the last segment (LocalLog.logEndOffset)."""
    last = segments[-1]
    return segment_next_offset(last.log, last.base_offset, last.index)


def largest_timestamp(segment: Segment) -> tuple[int, str]:
    """LogSegment.largestTimestamp of a segment Kafka's loader opened without recovering it:
    maxTimestampSoFar, the time index's last entry (TimeIndex.lastEntry: its last whole slot as the
    file holds it, a zero-filled one too) where that is >= 0, else the .log mtime. Kafka reads no
    batch for it, not even those after that entry (found by the differential run: we read them). A
    missing .timeindex is created empty (LogSegment.sanityCheck resizes it to 0): the mtime too."""
    if segment.timeindex is None:
        return _mtime_ms(segment.log), "file mtime (no .timeindex: Kafka's loader starts an empty one)"
    try:
        index = TimeIndex(segment.timeindex, segment.base_offset)
        last = index.entry(index.entry_count - 1) if index.entry_count else None
    except KafkaLogError:
        last = None
    if last is not None and last.timestamp >= 0:
        return last.timestamp, "time index"
    return _mtime_ms(segment.log), "file mtime (no timestamps)"


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


def initial_high_watermark(partition: PartitionDir, given: int | None, log_start: int, log_end: int,
                           problems: list[str]) -> tuple[int, str]:
    """Partition.createLog + UnifiedLog.updateHighWatermark: the high watermark `given`
    (--high-watermark), else the replication-offset-checkpoint entry, clamped to [log start, log end].
    Without either we assume a fully replicated log (log end)."""
    if given is not None:
        return min(max(given, log_start), log_end), "--high-watermark"
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
    upper_bound_offset: int | None
    """The next segment's base offset, or the log end offset for the last segment (None when Kafka
    cannot open the log)."""
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
    shutdown: str = AUTO
    """How the broker stopped (`loader_recovery_point`)."""


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
    load_failure: str | None = None
    """Why Kafka's loader cannot open the log (no retention pass runs), when it cannot."""
    retention_failure: str | None = None
    """Why Kafka's retention pass throws (it deletes nothing from the failing pass on), when it does."""

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
    first = segments[0].base_offset
    if settings.log_start_offset is not None:
        checkpoint_start = settings.log_start_offset
        report.log_start_offset, report.log_start_source = max(settings.log_start_offset, first), "--log-start-offset"
    else:
        report.log_start_offset, report.log_start_source = initial_log_start_offset(partition, first, report.problems)
        # (an entry below the first segment's base offset changes nothing the loader reads)
        checkpoint_start = report.log_start_offset if report.log_start_source == "log-start-offset-checkpoint" else 0
    recovery_point = loader_recovery_point(partition, settings.shutdown, report.problems, report.notes,
                                           "the retention passes run")
    loaded = load_log(partition, segments, checkpoint_start, report.log_start_offset, recovery_point)
    report.log_start_offset, report.log_start_source = adopt_split_log_start(loaded, report.log_start_offset,
                                                                             report.log_start_source)
    report.log_end_offset = loaded.log_end_offset
    snapshots = {offset_from_name(p): p for p in partition.snapshots}
    report.notes.extend(loaded.splits)
    kept = [segment for segment in loaded.files if segment.base_offset not in loaded.deleted]
    for index, segment in enumerate(kept):
        upper = kept[index + 1].base_offset if index + 1 < len(kept) else report.log_end_offset
        recovered = loaded.recovered.get(segment.base_offset)
        if recovered is not None:
            size, (largest, source) = recovered.valid_bytes, recovered_largest_timestamp(segment, recovered, now)
            why = ("no .index: " if segment.index is None else
                   "a .txnindex entry ends below its base offset: " if recovery_point is None else "")
            if why or recovered.truncated_bytes:
                report.notes.append(f"{loaded.kafka_path(segment.log)}: {why}Kafka's loader recovers the segment"
                                    + (f", cutting it to {size} bytes" if recovered.truncated_bytes else ""))
        else:
            size, (largest, source) = _size(segment.log), largest_timestamp(segment)
        snapshot = snapshots.get(segment.base_offset)
        report.segments.append(SegmentVerdict(segment.base_offset, loaded.kafka_path(segment.log), size,
                                              largest, source, upper, snapshot=str(snapshot) if snapshot else None))
    report.size = sum(s.size for s in report.segments)
    if loaded.deleted:
        report.notes.append(f"Kafka's loader deletes the segments after the one it cut, before any retention pass: "
                            f"base offsets {', '.join(map(str, loaded.deleted))}")
    if loaded.failure is None:
        report.high_watermark, report.high_watermark_source = initial_high_watermark(
            partition, settings.high_watermark, report.log_start_offset, report.log_end_offset, report.problems)
        loaded.update_high_watermark(report.high_watermark)
    if loaded.failure is not None:
        report.problems.append(loaded.failure)
        report.load_failure = loaded.failure
        for verdict in report.segments:
            verdict.kept_because.append("Kafka's loader cannot open the log: no retention pass runs")
        return report
    if report.log_start_offset > report.log_end_offset:
        _loader_deletes_everything(report)
    else:
        _run_passes(report)
    return report


TRUNCATED_MTIME = "loading time (no timestamps; recovery cut the file, which sets its mtime)"


def recovered_largest_timestamp(segment: Segment, recovered: SegmentRecovery, now: int) -> tuple[int, str]:
    """LogSegment.largestTimestamp after recover: the largest batch timestamp it read, else the .log
    mtime, which the truncation sets to the moment the broker opens the log (taken as `now`)."""
    if recovered.max_timestamp >= 0:
        return recovered.max_timestamp, "batches (recovered" + (": no .index)" if segment.index is None else ")")
    if recovered.truncated_bytes:
        return now, TRUNCATED_MTIME
    return _mtime_ms(segment.log), "file mtime (no timestamps)"


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
    if report.retention_failure is not None:
        pass
    elif DELETE in settings.cleanup_policy:
        if settings.retention_bytes >= 0 and state.size() >= settings.retention_bytes:
            state.run(BY_SIZE, _size_predicate(state, state.size() - settings.retention_bytes))
        elif settings.retention_bytes >= 0:
            state.note_kept(f"size: the log ({state.size()} bytes) is below retention.bytes "
                            f"({settings.retention_bytes})")
        if settings.retention_ms >= 0 and report.retention_failure is None:
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
        if len(deletable) == len(self.remaining) and (failure := self._roll_failure(max(0, log_end))):
            for segment in deletable:
                segment.deleted_by, segment.reason = None, ""
                segment.kept_because.append(f"{reason}: it would go, but {failure}")
            self.report.retention_failure = failure
            self.report.problems.append(failure)
            return
        if len(deletable) == len(self.remaining):
            self.report.rolled_empty_segment = True  # deleteSegments rolls a new active segment first
            self.report.rolled_at = log_end
            self.log_start = max(self.log_start, log_end)
        else:
            self.log_start = max(self.log_start, self.remaining[len(deletable)].base_offset)
        self.remaining = self.remaining[len(deletable):]


    def _roll_failure(self, offset: int) -> str | None:
        """LocalLog.roll throws when a segment already starts at the new segment's offset (the log end
        offset) or the active segment starts after it: deleteOldSegments fails, this pass and the
        later ones delete nothing (a broker logs the error at every retention check)."""
        active = self.remaining[-1].base_offset
        if any(s.base_offset == offset for s in self.remaining):
            why = f"segment {offset} already exists"
        elif offset < active:
            why = f"the active segment starts at {active}, after it"
        else:
            return None
        return (f"Kafka's retention throws: every segment would go, and rolling a new segment at the log end "
                f"offset {offset} fails because {why}")


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


def _mtime_ms(path) -> int:
    try:
        return os.stat(path).st_mtime_ns // 1_000_000
    except OSError:
        return 0


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
        index = path.with_name(path.name[:-len(".log.swap")] + ".index.swap")
        try:  # LogSegment.open with the .swap suffix: its own .index.swap, else an empty new index
            upper = segment_next_offset(path, base, index if index.is_file() else None)
        except KafkaLogError as exc:
            problems.append(str(exc))
            upper = base
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

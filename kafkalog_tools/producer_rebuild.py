"""The producer state as Kafka's log loader rebuilds it (UnifiedLog.rebuildProducerState), to learn
where the loader throws.

The loader runs it before it recovers each segment that has no `.index`
(LogLoader.recoverSegment: up to the segment's base offset, a fresh ProducerStateManager), and
once at the end of loading (up to the log end offset, after a clean shutdown too). From the latest
snapshot (or the log start offset) it reads every batch with a producer id up to that offset, as
ProducerAppendInfo does: no CRC is checked and nothing it throws is caught. A control batch whose
marker cannot be read, an entry size below 14 or a data batch in an open transaction that is not
transactional makes the broker unable to open the log (found by the differential run against
Kafka: a damaged marker in a segment after the last snapshot).

Snapshots are the files in the partition dir plus those the loader writes as it goes
(`Snapshots`); the batches are read in bulk where the compiled scan vouches for them, else one by
one as FileLogInputStream reads them.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .errors import CorruptDataError, KafkaLogError
from .formats import producer_snapshot
from .formats.record_batch import HEADER_SIZE, parse_batch
from .formats.offset_index import OffsetIndex
from .formats.segment import LOG_OVERHEAD, SegmentFile, offset_from_name
from .native import bulk_scan
from .recovery import ProducerState, require_v2_header, shallow_entries, translate_offset

_PRODUCER_ID_AT = 43
"""A V2 header's producer id (`record_batch.HEADER`)."""


@dataclass
class LoadedSegment:
    """A segment as the loader holds it: its `.log`, where its bytes end (None: the file's end; a
    recovered segment's valid prefix) and its offset index's lookup (the position of the largest
    entry at or below an offset)."""

    base_offset: int
    path: Path
    end: int | None
    lookup: Callable[[int], int]


def index_lookup(path: Path, base_offset: int) -> Callable[[int], int]:
    """The lookup of an offset index file as Kafka searches it, damaged or not (`OffsetIndex.search`),
    read on the first lookup: most segments' indexes are never looked up."""
    index = None

    def lookup(target: int) -> int:
        nonlocal index
        if index is None:
            index = OffsetIndex(path, base_offset)
        return index.search(target).position

    return lookup


def entry_lookup(entries) -> Callable[[int], int]:
    """The lookup of an offset index rebuilt by recovery: (offset, position) entries, increasing."""
    offsets = [offset for offset, _ in entries]
    positions = [position for _, position in entries]

    def lookup(target: int) -> int:
        slot = bisect.bisect_right(offsets, target) - 1
        return positions[slot] if slot >= 0 else 0

    return lookup


class Snapshots:
    """The producer snapshots the loader sees, by offset: a file of the partition dir, or a state
    the loader wrote meanwhile (ProducerState.saved)."""

    def __init__(self, files: list[Path], expiry: tuple[int, int] | None = None):
        """`expiry`: (now, producer.id.expiration.ms), to drop the producers a load finds expired
        (None: keep them all)."""
        self.expiry = expiry
        self.by_offset: dict[int, object] = {}
        for path in files:
            offset = offset_from_name(path)
            if offset is not None:
                self.by_offset[offset] = path

    def take(self, offset: int, state: ProducerState) -> None:
        self.by_offset[offset] = state.saved()

    def remove(self, offset: int) -> None:
        """ProducerStateManager.removeAndMarkSnapshotForDeletion: the snapshot at `offset`, if any."""
        self.by_offset.pop(offset, None)

    def remove_stray(self, base_offsets: list[int]) -> None:
        """ProducerStateManager.removeStraySnapshots: those not at a segment's base offset go, but
        the latest of them where it is not below the last segment's base offset."""
        bases = set(base_offsets)
        stray = sorted(offset for offset in self.by_offset if offset not in bases)
        for offset in stray[:-1]:
            del self.by_offset[offset]
        if stray and base_offsets and stray[-1] < max(base_offsets):
            del self.by_offset[stray[-1]]

    def load_latest(self, log_start: int, last_offset: int) -> tuple[ProducerState, int]:
        """ProducerStateManager.truncateAndReload: snapshots past `last_offset` or at or below the
        log start go, then the latest readable one is loaded (an unreadable one is deleted);
        without any, an empty state at the log start. Returns the state and its offset."""
        for offset in [o for o in self.by_offset if o > last_offset or o <= log_start]:
            del self.by_offset[offset]
        for offset in sorted(self.by_offset, reverse=True):
            kept = self.by_offset[offset]
            if isinstance(kept, Path):
                try:
                    state = ProducerState.from_snapshot(producer_snapshot.read(kept))
                except KafkaLogError:
                    del self.by_offset[offset]
                    continue
            else:
                state = ProducerState()
                state.restore(kept)
            if self.expiry is not None:
                state.expire(*self.expiry)
            return state, offset
        return ProducerState(), log_start


def rebuild_producer_state(segments: list[LoadedSegment], snapshots: Snapshots, log_start: int, last_offset: int,
                           clean_shutdown: bool) -> tuple[ProducerState, int]:
    """UnifiedLog.rebuildProducerState up to `last_offset` over `segments` (those loaded so far, in
    order); `snapshots` changes as Kafka's do. Returns the state and the offset of the last snapshot
    taken. Raises KafkaLogError where Kafka throws."""
    bases = [segment.base_offset for segment in segments]
    to_snapshot = {*bases[-2:], last_offset}
    if not snapshots.by_offset and clean_shutdown:
        # no snapshot after a clean shutdown: empty ones, nothing read
        for offset in sorted(to_snapshot):
            snapshots.take(offset, ProducerState())
        return ProducerState(), max(to_snapshot)
    state, map_end = snapshots.load_latest(log_start, last_offset)
    last_snapshot = map_end
    if last_offset > map_end:
        last_segment = bisect.bisect_right(bases, last_offset) - 1
        first = max(bisect.bisect_right(bases, map_end) - 1, 0)
        for index in range(first, len(segments)):
            segment = segments[index]
            if segment.base_offset >= last_offset:
                break
            start_offset = max(segment.base_offset, map_end, log_start)
            map_end = start_offset
            if segment.base_offset in to_snapshot and map_end > last_snapshot:
                snapshots.take(map_end, state)
                last_snapshot = map_end
            with SegmentFile(segment.path) as log:
                _read(segment, log, start_offset, last_offset if index == last_segment else None, state)
    if last_offset > last_snapshot:
        snapshots.take(last_offset, state)
        last_snapshot = last_offset
    return state, last_snapshot


def _read(segment: LoadedSegment, log: SegmentFile, start_offset: int, last_offset: int | None,
          state: ProducerState) -> None:
    """LogSegment.read(start_offset, maxPosition) then loadProducersFromRecords; the read stops
    where `last_offset` translates to, if given."""
    size = log.file_size if segment.end is None else segment.end
    end = size
    if last_offset is not None:
        found = translate_offset(log, last_offset, segment.lookup(last_offset), size)
        end = size if found is None else found
    start = translate_offset(log, start_offset, segment.lookup(start_offset), size)
    if start is None:
        return
    if end < start:
        raise KafkaLogError(f"IllegalArgumentException: Invalid size: {end - start} in read from {log.path}",
                            path=log.path, position=start)
    load_producers(log, start, end, state)


def load_producers(log: SegmentFile, start: int, end: int, state: ProducerState) -> None:
    """UnifiedLog.loadProducersFromRecords over the bytes start..end of a segment: every batch with a
    producer id applied (REPLICATION), CRCs unchecked; runs of batches the compiled scan vouches for
    a run at a time."""
    header = bytes(log.buffer[start:start + HEADER_SIZE])
    reader = bulk_scan.Reader(log) if bulk_scan.wanted(header, end - start, records=False) else None
    if reader is not None:
        reader.until = end
    position = start
    while position is not None and position < end:
        if reader is not None:
            position = _load_in_bulk(reader, log, position, state)
        position = _load_one_by_one(log, position, end, state,
                                    reader.then_one_by_one if reader is not None else None)


def _load_in_bulk(reader, log: SegmentFile, position: int, state: ProducerState) -> int:
    """Runs of clean V2 batches from `position`: producers moved as `ProducerState.plan_run` says,
    those kept apart applied one by one. Returns where the kernel stopped."""
    start = position
    for columns, n, after, _ in reader.runs(position, False):
        if n:
            columns = columns[:, :n]
            last = columns[bulk_scan.BASE_OFFSET] + columns[bulk_scan.LAST_OFFSET_DELTA]
            plan = state.plan_run(columns, last)
            if plan.apart:
                def one(row: int, columns=columns):
                    return True, state.apply(parse_batch(log.buffer, int(columns[bulk_scan.POSITION, row]),
                                                         log.path, log.decompress_limit))

                state.replay_rows(columns, last, plan.apart, one)
            state.commit_run(plan, columns, last)
            reader.release_before(after)
        position = after
    reader.read_anything(position != start)
    return position


def _load_one_by_one(log: SegmentFile, position: int, end: int, state: ProducerState, most: int | None) -> int | None:
    """Entries from `position` as FileLogInputStream reads them, at most `most`; returns where the next
    starts, or None at the end."""
    taken = 0
    for position, size, magic in shallow_entries(log, position, end):
        if magic >= 2:
            _apply_entry(log, position, size, state)
        taken += 1
        if taken == most:
            return position + size
    return None


def _apply_entry(log: SegmentFile, position: int, size: int, state: ProducerState) -> None:
    """One V2 entry (any magic from 2: Kafka reads them all as V2): ProducerAppendInfo.append where
    its header has a producer id. Its 61-byte header is read from the file, past the entry's end
    where it is shorter (FileChannelRecordBatch.loadBatchHeader)."""
    buf = log.buffer
    require_v2_header(log, position)
    if int.from_bytes(buf[position + _PRODUCER_ID_AT:position + _PRODUCER_ID_AT + 8], "big", signed=True) < 0:
        return
    if size >= HEADER_SIZE:
        state.apply(parse_batch(buf, position, log.path, log.decompress_limit))
        return
    header = bytearray(buf[position:position + HEADER_SIZE])
    header[8:12] = (HEADER_SIZE - LOG_OVERHEAD).to_bytes(4, "big")  # (its fields as read; the size is not one)
    batch = parse_batch(bytes(header), 0, log.path)
    if batch.is_control:
        # the marker's records are read from the entry's own `size` bytes: its count lies beyond them
        raise CorruptDataError(f"IndexOutOfBoundsException reading the control batch of {size} bytes: shorter than "
                               f"its {HEADER_SIZE}-byte header", path=log.path, position=position)
    batch.path, batch.position = log.path, position
    state.apply(batch)

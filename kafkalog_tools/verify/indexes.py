"""A segment's indexes by meaning (FORMAT.md 4.3): the offset and time indexes against the batches
the scan found (`BatchTable`), and the transaction index on its own."""
from __future__ import annotations

import bisect
from array import array
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

from ..errors import CorruptDataError, KafkaLogError
from ..formats.batch import Batch
from ..formats.index_file import IndexFile
from ..formats.logdir import Segment
from ..formats.offset_index import OffsetIndex
from ..formats.segment import SegmentFile
from ..formats.time_index import TimeIndex
from ..formats.txn_index import ENTRY as TXN_ENTRY, TransactionIndex
from ..spares import Spares
from .findings import ERROR, INFO, WARNING, Finding, from_error


class IndexQueries(NamedTuple):
    """What the index checks will look up in a segment's batch table, read from its index files
    before the scan: the offset index's positions (a batch that starts there, and the one before)
    and offsets (the batch that holds each), and the time index's offsets (the last batch at or
    before each, and the one after). Each sorted, without repeats."""

    positions: object
    holding: object
    after: object

    @classmethod
    def of(cls, segment: Segment) -> "IndexQueries | None":
        """None where a file cannot be read (the checks say why) or its offsets may not fit int64."""
        import numpy as np

        if not -(1 << 62) < segment.base_offset < 1 << 62:
            return None
        asked = {"positions": np.empty(0, np.int64), "holding": np.empty(0, np.int64), "after": np.empty(0, np.int64)}
        for kind, path in ((OffsetIndex, segment.index), (TimeIndex, segment.timeindex)):
            if path is None:
                continue
            index, _ = _open_index(kind, path, segment.base_offset)
            if index is None:
                return None
            count, _ = _index_prefix(index, False, str(path), "")  # (the entries the checks read)
            entries = index.columns(count)
            offsets = entries["relative_offset"].astype(np.int64) + segment.base_offset
            if kind is OffsetIndex:
                asked["positions"], asked["holding"] = _sorted(entries["position"].astype(np.int64)), _sorted(offsets)
            else:
                asked["after"] = _sorted(offsets)
        return cls(**asked)


def _sorted(values):
    """`values` ascending, without repeats (an index's usually are already)."""
    import numpy as np

    return values if (values[1:] > values[:-1]).all() else np.unique(values)


class BatchTable:
    """The intact batches of a segment, column by column (compact for millions of batches); for a
    segment without index files only their count, extent and first and largest values.

    Rows added one by one (the per-batch path, which may run without numpy) go into arrays; rows
    added a run at a time (the bulk scan's) into one numpy block that grows in place: `room` rows are
    reserved up front, where pages nobody writes cost nothing, and the block doubles when full. A
    growing array was reallocated (and copied) tens of times a segment: 12 of the ~110 ms of CPU a
    256 MiB segment of one-record batches took. A block `release`d when its segment is done serves
    the next table in the process: the kernel zeroes every fresh page on first touch, and for a log
    dir of 256 MiB KRaft segments (~100 MB of rows each) that zeroing was 24% of verify's CPU.

    With `queries` (`IndexQueries`), a run keeps only the rows the index checks can reach: its
    first and last, and those the queries land on and the rows before them. While the batches'
    positions and last offsets ascend (`in_order`), a search of the kept rows lands on the same
    batch as one of every row, so the checks find the same; where they do not, the caller reads
    the segment again for every row (`lacks_rows`)."""

    ROOM_AT_MOST = 1 << 22
    """Rows reserved up front at most (128 MiB of address space); the block doubles from there."""

    def __init__(self, keep_rows: bool = True, room: int = 0, queries: IndexQueries | None = None):
        """`room`: the rows the segment can hold at most, if known (its bytes over the smallest batch's)."""
        self.keep_rows = keep_rows
        self.queries = queries if keep_rows else None
        self.room = 0 if self.queries is not None else min(room, self.ROOM_AT_MOST)
        self.count = 0
        """Rows kept."""
        self.first_base_offset: int | None = None
        self.end = 0
        """Where the last batch ends."""
        self.max_timestamp = -1
        """Of the whole segment so far (-1 when no batch has a timestamp)."""
        self.rows = [array("q") for _ in range(4)]
        """Position, base offset, last offset, and the largest batch max timestamp up to and including
        each batch: arrays, or rows of one int64 block (`_grown`) once runs are added."""
        self.block = None
        self.in_order = True
        """Whether the positions ascend and the last offsets do not fall, over every batch so far."""
        self.left_out = False
        """Whether `queries` left rows out."""

    @property
    def lacks_rows(self) -> bool:
        """Whether rows were left out where a search of those kept may land elsewhere."""
        return self.left_out and not self.in_order

    def _follow(self, first_position: int, first_last: int, in_order: bool = True) -> None:
        """Batches in order or not (`in_order`) come next, the first at this position with this
        last offset. (Every way of adding rows keeps the last one, so the row before is there.)"""
        if self.count:
            at = self.count - 1
            in_order = in_order and first_position > self.positions[at] and first_last >= self.last_offsets[at]
        self.in_order = self.in_order and in_order

    positions = property(lambda self: self._column(0))
    base_offsets = property(lambda self: self._column(1))
    last_offsets = property(lambda self: self._column(2))
    prefix_max_timestamps = property(lambda self: self._column(3))

    def _column(self, index: int):
        return self.rows[index] if self.block is None else self.block[index, :self.count]

    def add(self, batch: Batch, base_offset: int) -> None:
        if not self.count:
            self.first_base_offset = base_offset
        if batch.max_timestamp > self.max_timestamp:
            self.max_timestamp = batch.max_timestamp
        if self.keep_rows:
            self._follow(batch.position, batch.last_offset)
            row = (batch.position, base_offset, batch.last_offset, self.max_timestamp)
            if self.block is None:
                for column, value in zip(self.rows, row):
                    column.append(value)
            else:
                self._grown(1)[:, self.count] = row
        self.count += 1
        self.end = batch.position + batch.size

    def extend(self, positions, sizes, base_offsets, last_offsets, max_timestamps) -> None:
        """`add` for many batches, from numpy columns."""
        import numpy as np

        if not self.count:
            self.first_base_offset = int(base_offsets[0])
        n = len(positions)
        self.end = int(positions[-1] + sizes[-1])
        if not self.keep_rows:
            self.max_timestamp = max(self.max_timestamp, int(max_timestamps.max()))
            self.count += n
            return
        first = (int(positions[0]), int(last_offsets[0]))
        kernel = _loaded_kernel() if self.queries is not None else None
        if kernel is not None:
            block, at = self._grown(n), self.count
            kept, in_order, self.max_timestamp = kernel.keep_asked(
                *(np.ascontiguousarray(column) for column in (positions, base_offsets, last_offsets, max_timestamps)),
                self.queries, self.max_timestamp, block, at)
            self._follow(*first, in_order)
            self.left_out = self.left_out or kept < n
            self.count += kept
            return
        self._follow(*first, bool((last_offsets[1:] >= last_offsets[:-1]).all()
                                  and (positions[1:] > positions[:-1]).all()))
        if self.queries is None:
            block, at = self._grown(n), self.count
            block[0, at:at + n], block[1, at:at + n], block[2, at:at + n] = positions, base_offsets, last_offsets
            self.max_timestamp = _prefix_max(max_timestamps, self.max_timestamp, block[3, at:at + n])
            self.count += n
            return
        prefix = np.empty(n, dtype=np.int64)
        self.max_timestamp = _prefix_max(max_timestamps, self.max_timestamp, prefix)
        rows = self._rows_asked(positions, last_offsets)
        kept = len(rows)
        self.left_out = self.left_out or kept < n
        block, at = self._grown(kept), self.count
        for index, column in enumerate((positions, base_offsets, last_offsets, prefix)):
            np.take(column, rows, out=block[index, at:at + kept])
        self.count += kept

    def room_for(self, n: int):
        """The block, with room for `n` more rows after `count` (for `kernels.scan_outlined`)."""
        return self._grown(n)

    def add_stretch(self, count: int, kept: int, in_order: bool, first_base_offset: int, first_position: int,
                    first_last_offset: int, end: int, max_timestamp: int) -> None:
        """`extend` for a stretch of `count` batches folded by `kernels.scan_outlined`, which wrote
        the `kept` rows of them the queries reach after `self.count` in the block."""
        if not self.count:
            self.first_base_offset = first_base_offset
        self.end = end
        self._follow(first_position, first_last_offset, in_order)
        self.left_out = self.left_out or kept < count
        self.count += kept
        self.max_timestamp = max_timestamp

    def _rows_asked(self, positions, last_offsets):
        """The rows of a run `queries` can reach, in order: its first and last, and for each query
        within its span the row a search lands on and the row before that. (`kernels.keep_asked`
        does this and the rest of `extend` in one pass where the kernels are loaded.)"""
        import numpy as np

        n = len(positions)
        keep = np.zeros(n + 1, dtype=bool)  # (slot n: where a search lands past the run, and row -1)
        keep[0] = keep[n - 1] = True
        queries = self.queries
        for column, asked, side in ((positions, queries.positions, "left"), (last_offsets, queries.holding, "left"),
                                    (last_offsets, queries.after, "right")):
            within = asked[asked.searchsorted(column[0]):asked.searchsorted(column[-1], "right")]
            if len(within):
                landed = column.searchsorted(within, side)
                keep[landed] = True
                keep[landed - 1] = True
        return np.flatnonzero(keep[:n])

    def append(self, other: "BatchTable") -> None:
        """The batches of `other`, which follow these in the segment (a range of it, read apart)."""
        if not other.count:
            return
        if not self.count:
            self.first_base_offset = other.first_base_offset
        if self.keep_rows:
            import numpy as np

            self._follow(int(other.positions[0]), int(other.last_offsets[0]), other.in_order)
            self.left_out = self.left_out or other.left_out
            block, at, n = self._grown(other.count), self.count, other.count
            for index in range(3):
                block[index, at:at + n] = np.asarray(other._column(index))
            np.maximum(np.asarray(other.prefix_max_timestamps), self.max_timestamp, out=block[3, at:at + n])
        self.count += other.count
        self.end = other.end
        self.max_timestamp = max(self.max_timestamp, other.max_timestamp)

    def _grown(self, n: int):
        """The block, with room for `n` more rows (made from the rows so far when there is none)."""
        import numpy as np

        if self.block is not None and self.count + n <= self.block.shape[1]:
            return self.block
        capacity = max(self.room, self.count + n) if self.block is None else max(2 * self.block.shape[1],
                                                                                  self.count + n)
        block = _SPARE_BLOCKS.take(lambda spare: spare.shape[1] >= capacity)
        if block is None:
            block = np.empty((4, capacity), dtype=np.int64)
        for index in range(4):
            block[index, :self.count] = np.asarray(self._column(index))
        self.block, self.rows = block, None
        return block

    def release(self) -> None:
        """Done with the rows: their block goes to the next table made in this process, unless
        something still holds it or a view of it (the table is empty from here)."""
        block = self.block
        self.__init__(self.keep_rows)
        _SPARE_BLOCKS.give(block)

    def __getstate__(self) -> dict:
        """Sent to another process (a range read apart) without the room it has not used."""
        state = dict(self.__dict__)
        if self.block is not None:
            state["block"] = self.block[:, :self.count].copy()
        state["queries"] = None  # (done with: its rows are chosen)
        return state

    def __len__(self) -> int:
        return self.count

    def at_position(self, position: int) -> int | None:
        index = bisect.bisect_left(self.positions, position)
        return index if index < self.count and self.positions[index] == position else None

    def holding(self, offset: int) -> int | None:
        """Index of the batch whose offsets include `offset`, if any."""
        index = bisect.bisect_left(self.last_offsets, offset)
        return index if index < self.count and self.base_offsets[index] <= offset else None

    def last_at_or_before(self, offset: int) -> int:
        """Index of the last batch whose last offset is <= `offset` (-1 if none)."""
        return bisect.bisect_right(self.last_offsets, offset) - 1


def _loaded_kernel():
    from ..native import bulk_scan

    return bulk_scan.loaded_kernel()


def _prefix_max(max_timestamps, before: int, out) -> int:
    """Into `out`, the largest of `before` and the batches' max timestamps up to each; returns the last."""
    import numpy as np

    np.maximum(max_timestamps, before, out=out)
    if not (out[1:] >= out[:-1]).all():  # (they usually ascend: a comparison costs less)
        np.maximum.accumulate(out, out=out)
    return int(out[-1])


_SPARE_BLOCKS = Spares(keep=1)
"""A `BatchTable` block, released and not yet taken again."""


def index_path(segment: Segment, suffix: str) -> str:
    return str(Path(segment.log).with_suffix(suffix))


def _open_index(kind: type, path: Path, base: int) -> tuple[IndexFile | None, list[Finding]]:
    try:
        return kind(path, base), []
    except KafkaLogError as exc:
        return None, [from_error(exc, "io-error", str(path))]


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


def _vectorisable(index: IndexFile, count: int, table: BatchTable) -> bool:
    """Whether numpy can tell which entries the per-entry loop would report: the index is big
    enough to pay for it, its offsets fit int64, and the batches' positions and last offsets
    ascend (on a log whose offsets go backwards bisect and searchsorted may land apart)."""
    return (count >= VECTORISED_INDEX_MIN_ENTRIES and bool(table) and -(1 << 62) < index.base_offset < 1 << 62
            and table.in_order)


def _search(column, needles, side: str = "left"):
    """`np.searchsorted` into a table column that ascends (`_vectorisable` made sure), by the
    compiled kernel where this process has it loaded: it gallops from one entry's batch to the
    next's, where bisecting a KRaft segment's 3.35 M batches for each of its index's 65,536 entries
    missed the cache (12 ms a search, the biggest part of a shallow verify's main thread)."""
    import numpy as np

    kernel = _loaded_kernel()
    if kernel is None:
        return np.searchsorted(column, needles, side)
    return kernel.search_ascending(np.ascontiguousarray(column), np.ascontiguousarray(needles), side)


def _offset_slots_to_check(index: OffsetIndex, count: int, table: BatchTable) -> Iterable[int]:
    """The slots `_offset_entry_findings` would report anything for (all, when not vectorisable):
    each of its conditions, for every entry at once."""
    if not _vectorisable(index, count, table):
        return range(count)
    import numpy as np

    entries = index.columns(count)
    offsets = entries["relative_offset"].astype(np.int64) + index.base_offset
    positions = entries["position"].astype(np.int64)
    starts, bases, lasts = np.asarray(table.positions), np.asarray(table.base_offsets), np.asarray(table.last_offsets)
    last = len(starts) - 1
    report = np.zeros(count, dtype=bool)
    report[1:] = (offsets[1:] <= offsets[:-1]) | (positions[1:] <= positions[:-1])
    report |= (offsets < index.base_offset) | (offsets > lasts[last])
    batch = _search(starts, positions)  # table.at_position
    report |= (batch > last) | (starts[np.minimum(batch, last)] != positions)
    report |= (batch > 0) & (lasts[np.maximum(batch - 1, 0)] >= offsets)  # skips an offset
    holder = _search(lasts, offsets)  # table.holding
    report |= (holder > last) | (bases[np.minimum(holder, last)] > offsets)
    return np.flatnonzero(report).tolist()


def _time_slots_to_check(index: TimeIndex, count: int, table: BatchTable) -> Iterable[int]:
    """The slots `_time_entry_findings` would report anything for (all, when not vectorisable),
    and those whose offset is inside a batch with a timestamp above the batches before it: only
    that batch's records can tell (`_largest_timestamp_up_to`)."""
    if not _vectorisable(index, count, table):
        return range(count)
    import numpy as np

    entries = index.columns(count)
    timestamps = entries["timestamp"].astype(np.int64)
    offsets = entries["relative_offset"].astype(np.int64) + index.base_offset
    lasts, prefix_max = np.asarray(table.last_offsets), np.asarray(table.prefix_max_timestamps)
    report = np.zeros(count, dtype=bool)
    report[1:] = (timestamps[1:] <= timestamps[:-1]) | (offsets[1:] < offsets[:-1])
    report |= (offsets < index.base_offset) | (offsets > lasts[-1])
    whole = _search(lasts, offsets, "right") - 1  # table.last_at_or_before
    largest_of_whole_batches = np.where(whole >= 0, prefix_max[np.maximum(whole, 0)], -1)
    report |= timestamps > largest_of_whole_batches
    return np.flatnonzero(report).tolist()


class _IndexKind(NamedTuple):
    """What differs between the offset and the time index's checks; `_check_index` does the rest."""

    what: str
    """The findings' code prefix: "index" or "timeindex"."""
    suffix: str
    reader: type
    missing: str
    """Why a missing file matters."""
    entry_findings: Callable
    """(segment, log, table, file, last offset, slot, byte position, entry, the entry before): what
    is wrong with one entry."""
    closing: Callable | None = None
    """(table, index, entries, file, is_active): what is wrong with the index as a whole."""


def check_offset_index(segment: Segment, log: SegmentFile, table: BatchTable, is_active: bool) -> Iterator[Finding]:
    return _check_index(_OFFSET_INDEX, segment.index, _offset_slots_to_check, segment, log, table, is_active)


def check_time_index(segment: Segment, log: SegmentFile, table: BatchTable, is_active: bool) -> Iterator[Finding]:
    return _check_index(_TIME_INDEX, segment.timeindex, _time_slots_to_check, segment, log, table, is_active)


def _check_index(kind: _IndexKind, path: Path | None, slots_to_check: Callable, segment: Segment, log: SegmentFile,
                 table: BatchTable, is_active: bool) -> Iterator[Finding]:
    """One index file against the segment's batches: its entries in the slots `slots_to_check`
    picks (each with the entry before it), then the whole."""
    if path is None:
        yield Finding(WARNING, f"{kind.what}-missing", index_path(segment, kind.suffix), None, kind.missing)
        return
    index, problems = _open_index(kind.reader, path, segment.base_offset)
    yield from problems
    if index is None:
        return
    file = str(path)
    count, findings = _index_prefix(index, is_active, file, kind.what)
    yield from findings
    last_offset = int(table.last_offsets[-1]) if table else None
    previous = None
    for slot in slots_to_check(index, count, table):
        entry = index.entry(slot)
        if slot and (previous is None or previous.slot != slot - 1):
            previous = index.entry(slot - 1)  # skipped by the pre-check: nothing to say about it
        yield from kind.entry_findings(segment, log, table, file, last_offset, slot, slot * index.ENTRY.size, entry,
                                       previous)
        previous = entry
    if kind.closing is not None:
        yield from kind.closing(table, index, count, file, is_active)


def _offset_entry_findings(segment: Segment, log: SegmentFile, table: BatchTable, file: str, last_offset: int | None,
                           slot: int, at: int, entry, previous) -> Iterator[Finding]:
    where = {"slot": slot, "offset": entry.offset, "log_position": entry.position}
    if previous is not None and (entry.offset <= previous.offset or entry.position <= previous.position):
        yield Finding(ERROR, "index-entry-order", file, at,
                      f"entry {slot} (offset {entry.offset}, position {entry.position}) does not follow entry "
                      f"{slot - 1} (offset {previous.offset}, position {previous.position})", where)
    if entry.offset < segment.base_offset:
        yield Finding(ERROR, "index-offset-below-base", file, at,
                      f"entry {slot} has offset {entry.offset}, below the base offset {segment.base_offset}", where)
        return
    batch = table.at_position(entry.position)
    if batch is None:
        beyond = entry.position >= table.end
        yield Finding(ERROR, "index-position-beyond-log" if beyond else "index-position-not-batch-start",
                      file, at, f"entry {slot} points at byte {entry.position} of {log.path}, "
                      + ("past its last intact batch" if beyond else "which is not where a batch starts"), where)
        return
    if last_offset is not None and entry.offset > last_offset:
        yield Finding(ERROR, "index-offset-beyond-log", file, at,
                      f"entry {slot} names offset {entry.offset}, past the segment's last offset {last_offset}",
                      where)
        return
    if batch > 0 and table.last_offsets[batch - 1] >= entry.offset:
        yield Finding(ERROR, "index-entry-skips-offset", file, at,
                      f"entry {slot} sends a lookup of offset {entry.offset} to byte {entry.position}, after the "
                      f"batch at {table.positions[batch - 1]} that holds offsets up to "
                      f"{table.last_offsets[batch - 1]}", where)
        return
    if table.holding(entry.offset) is None:
        yield Finding(WARNING, "index-offset-not-in-log", file, at,
                      f"entry {slot} names offset {entry.offset}, which no batch holds", where)


def _time_entry_findings(segment: Segment, log: SegmentFile, table: BatchTable, file: str, last_offset: int | None,
                         slot: int, at: int, entry, previous) -> Iterator[Finding]:
    where = {"slot": slot, "timestamp": entry.timestamp, "offset": entry.offset}
    if previous is not None and (entry.timestamp <= previous.timestamp or entry.offset < previous.offset):
        yield Finding(ERROR, "timeindex-entry-order", file, at,
                      f"entry {slot} ({entry.timestamp}, offset {entry.offset}) does not follow "
                      f"({previous.timestamp}, offset {previous.offset}): timestamps must increase and "
                      f"offsets must not decrease", where)
    if entry.offset < segment.base_offset or last_offset is None or entry.offset > last_offset:
        yield Finding(ERROR, "timeindex-offset-outside-segment", file, at,
                      f"entry {slot} names offset {entry.offset}, outside the segment's offsets "
                      f"{segment.base_offset}..{last_offset}", where)
        return
    largest = _largest_timestamp_up_to(log, table, entry.offset)
    if largest is not None and entry.timestamp > largest:
        yield Finding(ERROR, "timeindex-timestamp-not-in-log", file, at,
                      f"entry {slot} claims timestamp {entry.timestamp} by offset {entry.offset}, but the "
                      f"largest timestamp up to that offset is {largest}", {**where, "largest": largest})


def _time_index_final_entry(table: BatchTable, index: TimeIndex, count: int, file: str,
                            is_active: bool) -> Iterator[Finding]:
    """The last entry holds the segment's max timestamp once the segment is closed."""
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


_OFFSET_INDEX = _IndexKind("index", ".index", OffsetIndex,
                           "no offset index: Kafka rebuilds it (recovery) or creates it empty", _offset_entry_findings)
_TIME_INDEX = _IndexKind("timeindex", ".timeindex", TimeIndex,
                         "no time index: Kafka creates it empty, so timestamp lookups fall back to the file's mtime "
                         "until the segment is recovered", _time_entry_findings, _time_index_final_entry)


def _largest_timestamp_up_to(log: SegmentFile, table: BatchTable, offset: int) -> int | None:
    """The largest timestamp among records with offsets <= `offset` (batch maxima, and the records
    of the batch that holds `offset` when it ends later)."""
    whole = table.last_at_or_before(offset)
    largest = int(table.prefix_max_timestamps[whole]) if whole >= 0 else -1
    holder = whole + 1
    if holder < len(table) and table.base_offsets[holder] <= offset:
        batch = next(log.entries(int(table.positions[holder])), None)
        if not isinstance(batch, Batch):
            return None
        try:
            largest = max([largest] + [r.timestamp for r in batch.records_reading_controls() if r.offset <= offset])
        except CorruptDataError:
            return None  # reported with the batch already
    return largest


def read_txn_index(segment: Segment):
    """A .txnindex on its own: its entries (`TransactionIndex.columns`; None when absent or
    unreadable) and what is wrong with it regardless of the log."""
    if segment.txnindex is None:
        return None, []
    import numpy as np

    file = str(segment.txnindex)
    try:
        index = TransactionIndex(segment.txnindex)
        entries = index.columns()
    except KafkaLogError as exc:
        return None, [from_error(exc, "txnindex-corrupt", file)]
    findings = []
    if index.trailing_bytes:
        findings.append(Finding(WARNING, "txnindex-partial-entry", file, index.entry_count * TXN_ENTRY.size,
                                f"{index.trailing_bytes} trailing bytes after the last whole 34-byte entry "
                                f"(Kafka ignores them)"))
    last = entries["last_offset"]
    below = last < segment.base_offset
    unordered = np.r_[False, last[1:] <= last[:-1]]
    for slot in np.flatnonzero(below | unordered).tolist():
        position = slot * TXN_ENTRY.size
        if below[slot]:
            findings.append(Finding(ERROR, "txnindex-offset-below-base", file, position,
                                    f"aborted transaction ending at {last[slot]} is below the base offset "
                                    f"{segment.base_offset}: the broker refuses to load the segment (sanity check)"))
        if unordered[slot]:
            findings.append(Finding(ERROR, "txnindex-entry-order", file, position,
                                    f"entry ending at {last[slot]} does not follow the previous one ending "
                                    f"at {last[slot - 1]}"))
    return entries, findings

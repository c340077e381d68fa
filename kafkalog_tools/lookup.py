"""Kafka's read path, offline: find a record by offset or by timestamp through the sparse indexes.

Sources: FORMAT.md section 5; core/.../LocalLog.scala (read), UnifiedLog.scala
(fetchOffsetByTimestamp, searchOffsetInLocalLog), storage/.../LogSegment.java (translateOffset,
findOffsetByTimestamp, largestTimestamp), FileRecords.java (searchForOffsetWithSize,
searchForTimestamp).

By offset: the segment with the largest base offset <= N (then the next ones, if it ends before
N); in it, the offset index's last entry <= N gives a byte position, and a scan from there finds
the first batch whose last offset >= N; the answer is its first record with offset >= N.

By timestamp: the first segment, in offset order, whose largest timestamp >= T - the last entry of
its time index (12 bytes read per segment; for the active segment also the batches after its last
offset index entry, which a broker has in memory), or its .log mtime when it has no timestamps
(Kafka's fallback; no other segment is tried); in it, the time index's last entry <= T gives an
offset, the offset index a position, and a scan from there the first record, in offset order, with
timestamp >= T.

Indexes are binary-searched in place: O(log n) entries are read, each checked against the
segment's bounds and the entries read before it (a contradiction means the whole index is read and
checked: ordering, bounds, zero tail). Every index and .log byte read is counted in the answer. The entry used must point at a
valid batch; an offset answer that depends on nothing before the entry holding the
target is confirmed on the batch before it. A missing or broken index means a scan from the
segment start, with a warning: never a wrong answer. Nothing is written.
"""
from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from .errors import CorruptDataError, InputError, KafkaLogError
from .formats import checkpoint
from .formats.batch import Batch, Record
from .formats.logdir import PartitionDir, Segment, read_partition_dir
from .formats.offset_index import OffsetIndex, OffsetPosition
from .formats.segment import BadEntry, SegmentFile, Stop
from .formats.time_index import TimeIndex, TimestampOffset
from .timestamps import parse_timestamp  # noqa: F401 (part of this module's API)

OFFSET, TIMESTAMP = "offset", "timestamp"


# ---------------------------------------------------------------------------------------------
# Queries and answers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    kind: str
    """"offset" or "timestamp"."""
    value: int


@dataclass
class Answer:
    query: Query
    found: bool = False
    reason: str | None = None
    """Why nothing was found."""
    damaged: bool = False
    """Damaged data stood in the way (Kafka's own read would fail there)."""
    offset: int | None = None
    timestamp: int | None = None
    timestamp_type: str | None = None
    leader_epoch: int | None = None
    segment: str | None = None
    batch_position: int | None = None
    batch_base_offset: int | None = None
    batch_last_offset: int | None = None
    batch_size: int | None = None
    record_position: int | None = None
    """File position of the record (None inside a compressed batch)."""
    key_size: int | None = None
    value_size: int | None = None
    control: str | None = None
    """ABORT, COMMIT, ... for a control record."""
    offset_index_entry: dict | None = None
    time_index_entry: dict | None = None
    scan_start: int | None = None
    bytes_scanned: int = 0
    """Bytes of .log batches read by scans for this answer."""
    batches_scanned: int = 0
    index_bytes_read: int = 0
    """Bytes of .index/.timeindex files read for this answer (an index read whole is read once per reader)."""
    index_entries_read: int = 0
    warnings: list[str] = field(default_factory=list)
    explanation: list[str] = field(default_factory=list)

    def to_json(self, explain: bool = False) -> dict:
        data = {"query": {self.query.kind: self.query.value}, "found": self.found}
        if self.found:
            data.update(offset=self.offset, timestamp=self.timestamp, timestamp_type=self.timestamp_type,
                        leader_epoch=self.leader_epoch, segment=self.segment, batch_position=self.batch_position,
                        batch_base_offset=self.batch_base_offset, batch_last_offset=self.batch_last_offset,
                        batch_size=self.batch_size, record_position=self.record_position,
                        key_size=self.key_size, value_size=self.value_size, control=self.control)
        else:
            data.update(reason=self.reason, damaged=self.damaged, segment=self.segment)
        data.update(offset_index_entry=self.offset_index_entry, time_index_entry=self.time_index_entry,
                    scan_start=self.scan_start, bytes_scanned=self.bytes_scanned,
                    batches_scanned=self.batches_scanned, index_bytes_read=self.index_bytes_read,
                    index_entries_read=self.index_entries_read, warnings=self.warnings)
        if explain:
            data["explanation"] = self.explanation
        return data


# ---------------------------------------------------------------------------------------------
# A partition opened for lookups
# ---------------------------------------------------------------------------------------------


class PartitionReader:
    """A partition directory, read only, answering offset and timestamp queries."""

    def __init__(self, path: str | os.PathLike, *, use_indexes: bool = True):
        path = Path(path)
        if not path.is_dir():
            raise InputError("not a partition directory", path=path)
        self.partition: PartitionDir = read_partition_dir(path)
        segments = [s for s in self.partition.segments if s.log is not None]
        if not segments:
            raise InputError("no .log segments in this directory", path=path)
        self.use_indexes = use_indexes
        self.views = [_SegmentView(s, next_base=segments[i + 1].base_offset if i + 1 < len(segments) else None,
                                   is_active=i + 1 == len(segments), use_indexes=use_indexes)
                      for i, s in enumerate(segments)]
        self.log_start_offset, self.log_start_origin = self._log_start_offset()

    def __enter__(self) -> "PartitionReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for view in self.views:
            view.close()

    def lookup(self, query: Query) -> Answer:
        answer = Answer(query)
        try:
            if query.kind == OFFSET:
                self._by_offset(query.value, answer)
            else:
                self._by_timestamp(query.value, answer)
        except CorruptDataError as exc:
            answer.found, answer.damaged = False, True
            answer.reason = f"damaged data: {exc}"
        return answer

    def _log_start_offset(self) -> tuple[int, str]:
        """Kafka's log start offset: the log dir's checkpoint, but never below the first segment."""
        first = self.views[0].segment.base_offset
        path = self.partition.path.parent / "log-start-offset-checkpoint"
        if path.is_file() and self.partition.partition >= 0:
            try:
                recorded = checkpoint.read_offsets(path).get(self.partition.topic_partition)
            except KafkaLogError:
                recorded = None
            if recorded is not None and recorded > first:
                return recorded, f"log start offset {recorded} (log-start-offset-checkpoint)"
        return first, f"log start offset {first} (the first segment's base offset)"

    # -- by offset ---------------------------------------------------------------------------

    def _by_offset(self, target: int, answer: Answer) -> None:
        say = answer.explanation.append
        say(f"{len(self.views)} segments (base offsets {self.views[0].segment.base_offset}.."
            f"{self.views[-1].segment.base_offset}); {self.log_start_origin}")
        if target < self.log_start_offset:
            answer.reason = (f"offset {target} is below the log start offset {self.log_start_offset} "
                             f"(Kafka answers OffsetOutOfRangeException)")
            return
        bases = [v.segment.base_offset for v in self.views]
        number = bisect.bisect_right(bases, target) - 1
        say(f"segment {self.views[number].name}: the last whose base offset ({bases[number]}) <= {target}")
        while number < len(self.views):
            view = self.views[number]
            found = self._batch_holding_offset(view, target, answer)
            if found is not None:
                self._answer_offset_record(number, found, target, answer)
                return
            number += 1
            if number < len(self.views):
                say(f"segment {view.name} ends before offset {target}: next segment {self.views[number].name}")
        end = self._log_end_offset()
        answer.reason = (f"offset {target} is at or past the log end offset {end}"
                         + (" (nothing there yet)" if target == end else " (Kafka answers OffsetOutOfRangeException)"))

    def _batch_holding_offset(self, view: "_SegmentView", target: int, answer: Answer) -> Batch | None:
        """translateOffset: index lookup, then the first batch from there whose last offset >= target."""
        say = answer.explanation.append
        used, entry, previous = view.offset_floor(target, answer)
        start = 0
        if not used:
            say(f"offset index of {view.name} not used: scan from byte 0")
        elif entry is None:
            say(f"offset index: no entry <= {target}: scan from byte 0")
        elif not view.batch_starts_at(entry.position):
            view.distrust_offset_index(answer, f"entry {entry.slot} points at byte {entry.position}, where no valid "
                                               f"batch starts")
            entry = None
        else:
            start = entry.position
            answer.offset_index_entry = {"segment": view.name, "slot": entry.slot, "offset": entry.offset,
                                         "position": entry.position}
            say(f"offset index entry {entry.slot} (offset {entry.offset} -> byte {entry.position}): the last with "
                f"offset <= {target}")
        batch = self._scan_for_offset(view, start, target, answer)
        if entry is not None and (batch is None or batch.base_offset > target):
            # The answer now rests on no earlier batch holding the target: check the one before the entry.
            if not view.nothing_at_or_after(previous, entry.position, target):
                view.distrust_offset_index(answer, f"entry {entry.slot} (offset {entry.offset} -> byte "
                                                   f"{entry.position}) skips batches holding offset {target}")
                batch = self._scan_for_offset(view, 0, target, answer)
        return batch

    def _scan_for_offset(self, view: "_SegmentView", start: int, target: int, answer: Answer) -> Batch | None:
        answer.scan_start = start
        for batch in view.scan(start, answer):
            if batch.last_offset >= target:
                answer.explanation.append(
                    f"scanned {answer.batches_scanned} batches ({answer.bytes_scanned} bytes) from byte {start}: "
                    f"the batch at {batch.position} holds offsets {batch.base_offset}..{batch.last_offset}")
                return batch
        answer.explanation.append(f"scanned to the end of {view.name} from byte {start}: no batch reaches offset "
                                  f"{target}")
        return None

    def _answer_offset_record(self, number: int, batch: Batch, target: int, answer: Answer) -> None:
        """The first record with offset >= target, from this batch on (compaction leaves gaps)."""
        for view_number in range(number, len(self.views)):
            view = self.views[view_number]
            batches = [batch] if view_number == number else []
            following = view.scan(batch.end if view_number == number else 0, answer)
            for candidate in _chain(batches, following):
                for record in candidate.records_reading_controls():
                    if record.offset >= target:
                        if record.offset != target:
                            answer.explanation.append(f"offset {target} is not in the log (compaction leaves "
                                                      f"gaps): the next record is {record.offset}")
                        _fill(answer, view, candidate, record)
                        return
        answer.reason = f"no record at or after offset {target}"

    def _log_end_offset(self) -> int:
        last = self.views[-1]
        end = last.segment.base_offset
        for batch in last.scan(last.last_indexed_position(), None):
            end = batch.last_offset + 1
        return end

    # -- by timestamp --------------------------------------------------------------------------

    def _by_timestamp(self, target: int, answer: Answer) -> None:
        say = answer.explanation.append
        chosen = None
        skipped = 0
        for view in self.views:
            largest, source = view.largest_timestamp(answer)
            if largest >= target:
                chosen = view
                say(f"segment {view.name}: the first whose largest timestamp ({largest}, {source}) >= {target}"
                    + (f"; {skipped} earlier segments end below it" if skipped else ""))
                break
            skipped += 1
        if chosen is None:
            answer.reason = f"no segment has a timestamp >= {target}"
            return
        answer.segment = chosen.log_path
        used, entry = chosen.time_floor(target, answer)
        if entry is None:
            time_offset = chosen.segment.base_offset
            say(f"time index: no entry <= {target}: start from the base offset {time_offset}"
                if used else f"time index of {chosen.name} not used: start from its base offset")
        else:
            time_offset = entry.offset
            answer.time_index_entry = {"segment": chosen.name, "slot": entry.slot, "timestamp": entry.timestamp,
                                       "offset": entry.offset}
            say(f"time index entry {entry.slot} ({entry.timestamp} -> offset {entry.offset}): the last with "
                f"timestamp <= {target}")
        from_offset = max(time_offset, self.log_start_offset)
        start = self._position_for_offset(chosen, from_offset, answer)
        answer.scan_start = start
        skipped_batches = 0
        for batch in chosen.scan(start, answer):
            if batch.max_timestamp < target:
                skipped_batches += 1
                continue
            for record in batch.records_reading_controls():
                if record.timestamp >= target and record.offset >= self.log_start_offset:
                    say(f"scanned {answer.batches_scanned} batches ({answer.bytes_scanned} bytes) from byte {start}, "
                        f"{skipped_batches} with max timestamps below {target}: record {record.offset} has timestamp "
                        f"{record.timestamp}, the first >= {target} in offset order")
                    _fill(answer, chosen, batch, record)
                    return
        answer.reason = (f"segment {chosen.name} holds no record with timestamp >= {target} from offset "
                         f"{from_offset}, and Kafka tries no other segment")

    def _position_for_offset(self, view: "_SegmentView", offset: int, answer: Answer) -> int:
        _, entry, _ = view.offset_floor(offset, answer)
        if entry is None:
            return 0
        if not view.batch_starts_at(entry.position):
            view.distrust_offset_index(answer, f"entry {entry.slot} points at byte {entry.position}, where no valid "
                                               f"batch starts")
            return 0
        answer.offset_index_entry = {"segment": view.name, "slot": entry.slot, "offset": entry.offset,
                                     "position": entry.position}
        answer.explanation.append(f"offset index entry {entry.slot} (offset {entry.offset} -> byte {entry.position}): "
                                  f"the last with offset <= {offset}")
        return entry.position


# ---------------------------------------------------------------------------------------------
# One segment: its indexes (checked before use) and scans of its .log
# ---------------------------------------------------------------------------------------------


class _SegmentView:
    def __init__(self, segment: Segment, next_base: int | None, is_active: bool, use_indexes: bool):
        self.segment = segment
        self.log_path = str(segment.log)
        self.name = Path(segment.log).name
        self.next_base = next_base
        self.is_active = is_active
        self.use_indexes = use_indexes
        self._log: SegmentFile | None = None
        self._offset_entries: list[OffsetPosition] | None | bool = False  # False: not loaded yet
        self._time_entries: list[TimestampOffset] | None | bool = False
        self._notes: list[str] = []
        """Warnings about this segment's indexes, repeated in every answer that uses them."""
        self._largest: tuple[int, str] | None = None

    @property
    def log(self) -> SegmentFile:
        if self._log is None:
            self._log = SegmentFile(self.segment.log)
        return self._log

    def close(self) -> None:
        if self._log is not None:
            self._log.close()

    # -- indexes -------------------------------------------------------------------------------

    def offset_entries(self, answer: Answer | None, reader: Answer | None = None) -> list[OffsetPosition] | None:
        """The offset index's entries, or None when it is missing, broken or not to be used. Its
        warnings go to `answer`, the bytes read are counted in `answer` or `reader`."""
        if self._offset_entries is False:
            self._offset_entries = self._load(OffsetIndex, self.segment.index, ".index", _offset_entries_problem,
                                              answer or reader)
        self._warn(answer)
        return self._offset_entries

    def offset_floor(self, target: int, answer: Answer) -> tuple[bool, OffsetPosition | None, int]:
        """OffsetIndex.lookup: (whether the index is used, its last entry with offset <= target, the
        position of the entry before that one, else 0). A binary search reads O(log n) entries;
        only when they contradict each other is the whole index read and checked."""
        if self._offset_entries is False and self.use_indexes and self.segment.index is not None:
            probed = self._probe_offset_index(target, answer)
            if probed is not None:
                self._warn(answer)
                return probed
        entries = self.offset_entries(answer)
        entry = _floor_offset_entry(entries, target) if entries else None
        previous = entries[entry.slot - 1].position if entry is not None and entry.slot > 0 else 0
        return entries is not None, entry, previous

    def _probe_offset_index(self, target: int, answer: Answer) -> tuple[bool, OffsetPosition | None, int] | None:
        """offset_floor by reading only the entries a binary search visits; each must lie inside the
        segment and between the entries already read (offsets and positions increasing). None when
        anything is off: the caller then reads the whole index, which says what is wrong."""
        base, log_size = self.segment.base_offset, self.log.file_size
        limit = self.next_base if self.next_base is not None else base + (1 << 31)
        with _IndexProbe(self.segment.index, OffsetIndex, base, answer) as probe:
            if probe.broken:
                return None
            valid = self._valid_slots(probe, ".index")
            if valid == 0:
                return True, None, 0

            def sound(entry: OffsetPosition) -> bool:
                return base <= entry.offset < limit and 0 <= entry.position < log_size

            def ordered(lower: OffsetPosition, upper: OffsetPosition) -> bool:
                return lower.offset < upper.offset and lower.position < upper.position

            found = probe.floor(valid, lambda entry: entry.offset <= target, sound, ordered)
            if found is None:
                return None
            below = found[0]
            if below is None or below.slot == 0:
                return True, below, 0
            before = probe.read(below.slot - 1)
            if before.offset >= below.offset or before.position >= below.position or before.offset < base:
                return None
            return True, below, before.position

    def _valid_slots(self, probe: "_IndexProbe", suffix: str) -> int:
        """The entries before the index's zero-filled tail, noted on a closed segment."""
        valid = probe.valid_slots()
        if valid < probe.count and not self.is_active:
            self._note_once(f"{self.name[:-4]}{suffix} has a zero-filled tail after {valid} entries on a closed "
                            f"segment (ignored)")
        return valid

    def _probe_time_index(self, target: int | None, answer: Answer) -> tuple[bool, TimestampOffset | None] | None:
        """TimeIndex.lookup by reading only the entries a binary search visits (target None: only
        the last entry, LogSegment's largest timestamp), each inside the segment and between the
        entries read before it (timestamps increasing, offsets not decreasing). None when anything is
        off: the caller then reads the whole index, which says what is wrong."""
        base = self.segment.base_offset
        limit = self.next_base if self.next_base is not None else base + (1 << 31)
        with _IndexProbe(self.segment.timeindex, TimeIndex, base, answer) as probe:
            if probe.broken:
                return None
            valid = self._valid_slots(probe, ".timeindex")
            if valid == 0:
                return True, None
            if target is None:
                last = probe.read(valid - 1)
                return (True, last) if base <= last.offset < limit else None
            found = probe.floor(valid, lambda entry: entry.timestamp <= target,
                                lambda entry: base <= entry.offset < limit,
                                lambda lower, upper: lower.timestamp < upper.timestamp and lower.offset <= upper.offset)
            return None if found is None else (True, found[0])

    def _note_once(self, note: str) -> None:
        if note not in self._notes:
            self._notes.append(note)

    def time_entries(self, answer: Answer | None) -> list[TimestampOffset] | None:
        if self._time_entries is False:
            self._time_entries = self._load(TimeIndex, self.segment.timeindex, ".timeindex", _time_entries_problem,
                                            answer)
        self._warn(answer)
        return self._time_entries

    def _warn(self, answer: Answer | None) -> None:
        if answer is not None:
            answer.warnings.extend(n for n in self._notes if n not in answer.warnings)

    def _load(self, kind, path: Path | None, suffix: str, problem_of, answer: Answer | None) -> list | None:
        if not self.use_indexes:
            return None
        name = self.name[: -len(".log")] + suffix
        if path is None:
            self._notes.append(f"{name} is missing: scanning the segment instead")
            return None
        try:
            index = kind(path, self.segment.base_offset)
        except KafkaLogError as exc:
            self._notes.append(f"{name} cannot be read ({exc.message}): scanning the segment instead")
            return None
        if answer is not None:
            answer.index_bytes_read += len(index.data)
            answer.index_entries_read += index.entry_count
        if index.trailing_bytes:
            self._notes.append(f"{name} is {len(index.data)} bytes, not a whole number of entries: scanning the "
                               f"segment instead")
            return None
        entries = _real_entries(index)
        if len(entries) < index.entry_count and not self.is_active:
            self._notes.append(f"{name} has a zero-filled tail after {len(entries)} entries on a closed segment "
                               f"(ignored)")
        problem = problem_of(entries, self.segment.base_offset, self.next_base, self.log.file_size)
        if problem is not None:
            self._notes.append(f"{name} is broken ({problem}): scanning the segment instead")
            return None
        return entries

    def distrust_offset_index(self, answer: Answer, why: str) -> None:
        note = f"{self.name[:-4]}.index is wrong ({why}): scanning the segment instead"
        self._notes.append(note)
        self._offset_entries = None
        answer.warnings.append(note)

    def last_indexed_position(self, reader: Answer | None = None) -> int:
        """Where the part of the segment after its last offset index entry begins."""
        entries = self.offset_entries(None, reader)
        return entries[-1].position if entries else 0

    def time_floor(self, target: int, answer: Answer) -> tuple[bool, TimestampOffset | None]:
        """TimeIndex.lookup: (whether the index is used, its last entry with timestamp <= target),
        by binary search; the whole index is read and checked only when the entries read contradict
        each other."""
        if self._time_entries is False and self.use_indexes and self.segment.timeindex is not None:
            probed = self._probe_time_index(target, answer)
            if probed is not None:
                self._warn(answer)
                return probed
        entries = self.time_entries(answer)
        return entries is not None, _floor_time_entry(entries, target) if entries else None

    def largest_timestamp(self, answer: Answer) -> tuple[int, str]:
        """LogSegment.largestTimestamp: the max timestamp so far, which Kafka takes from the time
        index's last entry (closing a segment appends the max there); for the active segment, whose
        max a broker keeps in memory as it appends, the batches after the last offset index entry
        are scanned too. Without a usable time index, a scan of the whole segment; without any
        timestamp, the .log file's mtime. Every byte read is counted in `answer`."""
        if self._largest is None:
            probed = None
            if self._time_entries is False and self.use_indexes and self.segment.timeindex is not None:
                probed = self._probe_time_index(None, answer)
            if probed is not None:
                indexed, source = probed[1].timestamp if probed[1] is not None else -1, "its time index's last entry"
            else:
                entries = self.time_entries(answer)
                indexed, source = (entries[-1].timestamp if entries else -1), "its time index's last entry"
                if entries is None:
                    indexed, source = max((b.max_timestamp for b in self.scan(0, answer)), default=-1), "by a scan"
            largest = indexed
            if self.is_active and source != "by a scan":
                tail = max((b.max_timestamp for b in self.scan(self._last_offset_entry_position(answer), answer)),
                           default=-1)
                if tail > indexed:
                    largest, source = tail, "from its time index and a scan of its unindexed tail (the active segment)"
            if largest < 0:
                largest, source = self.log.mtime_ms, "the .log mtime, as Kafka does for a segment without timestamps"
            self._largest = (largest, source)
        self._warn(answer)
        return self._largest

    def _last_offset_entry_position(self, answer: Answer) -> int:
        """Where the batches after the offset index's last entry begin (0 without a usable entry)."""
        if self._offset_entries is False and self.use_indexes and self.segment.index is not None:
            base = self.segment.base_offset
            with _IndexProbe(self.segment.index, OffsetIndex, base, answer) as probe:
                valid = 0 if probe.broken else self._valid_slots(probe, ".index")
                last = probe.read(valid - 1) if valid else None
            if last is not None and base <= last.offset and self.batch_starts_at(last.position):
                return last.position
        return self.last_indexed_position(answer)

    # -- the .log ------------------------------------------------------------------------------

    def batch_starts_at(self, position: int) -> bool:
        if not 0 <= position < self.log.file_size:  # (an index entry's position may be any int32)
            return False
        entry = next(self.log.entries(position), None)
        return isinstance(entry, Batch) and entry.crc_valid

    def nothing_at_or_after(self, start: int, stop: int, target: int) -> bool:
        """Walking from `start` lands exactly on `stop`, and the batch before it ends below `target`."""
        last = None
        for entry in self.log.entries(start):
            if isinstance(entry, BadEntry) or entry.position >= stop:
                return not isinstance(entry, BadEntry) and entry.position == stop and (
                    last is None or last.last_offset < target)
            last = entry
        return False

    def scan(self, start: int, answer: Answer | None) -> Iterator[Batch]:
        """Batches from `start`, counted in the answer; damage is raised as Kafka's read would fail."""
        log = self.log
        for entry in log.entries(start):
            if isinstance(entry, BadEntry):
                raise CorruptDataError(entry.error.message, path=self.log_path, position=entry.position)
            if answer is not None:
                answer.bytes_scanned += entry.size
                answer.batches_scanned += 1
                if not entry.crc_valid:
                    answer.warnings.append(f"the batch at byte {entry.position} of {self.name} fails its CRC")
            yield entry
        if log.stop is Stop.CORRUPT_SIZE:
            raise log.stop_error


class _IndexProbe:
    """An index file read an entry at a time (`pread`), each entry once, every byte counted in the
    answer. `broken` when it cannot be opened or is not a whole number of entries."""

    def __init__(self, path: Path, kind, base_offset: int, answer: Answer):
        self.kind, self.base_offset, self.answer = kind, base_offset, answer
        self.fd, self.count, self.broken, self.read_slots = None, 0, True, {}
        try:
            self.fd = os.open(path, os.O_RDONLY)
            size = os.fstat(self.fd).st_size
        except OSError:
            return
        self.count, self.broken = size // kind.ENTRY.size, size % kind.ENTRY.size != 0

    def __enter__(self) -> "_IndexProbe":
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)

    def read(self, slot: int):
        if slot not in self.read_slots:
            size = self.kind.ENTRY.size
            self.answer.index_bytes_read += size
            self.answer.index_entries_read += 1
            first, second = self.kind.ENTRY.unpack(os.pread(self.fd, size, slot * size))
            self.read_slots[slot] = (OffsetPosition(self.base_offset + first, second, slot) if self.kind is OffsetIndex
                                     else TimestampOffset(first, self.base_offset + second, slot))
        return self.read_slots[slot]

    def valid_slots(self) -> int:
        """Entries end at the first slot after 0 whose relative offset is 0 (a preallocated zero
        tail), found by binary search; an index of zeros only has none."""
        if self.count == 0:
            return 0
        valid = self.count
        if self.count > 1 and self.read(self.count - 1).offset == self.base_offset:
            low, high = 1, self.count - 1  # the first zero slot is in [low, high]
            while low < high:
                middle = (low + high) // 2
                if self.read(middle).offset == self.base_offset:
                    high = middle
                else:
                    low = middle + 1
            valid = low
        if valid > 1:
            return valid
        first = self.read(0)
        other = first.position if self.kind is OffsetIndex else first.timestamp
        return 0 if first.offset == self.base_offset and other == 0 else 1

    def floor(self, valid: int, at_most, sound, ordered):
        """The last of the `valid` entries for which `at_most` holds, by binary search, as (entry or
        None,); None when an entry read is not `sound` or not `ordered` with those read before."""
        below = above = None
        low, high = 0, valid - 1
        while low <= high:
            middle = (low + high) // 2
            entry = self.read(middle)
            if not sound(entry) or (below is not None and not ordered(below, entry)) or (
                    above is not None and not ordered(entry, above)):
                return None
            if at_most(entry):
                below, low = entry, middle + 1
            else:
                above, high = entry, middle - 1
        return (below,)


def _real_entries(index) -> list:
    """Entries before a zero-filled tail (an index of zeros only has none)."""
    whole = len(index.data) - index.trailing_bytes
    if not index.data[:whole].strip(b"\x00"):
        return []
    return index.entries()


def _offset_entries_problem(entries: list[OffsetPosition], base: int, next_base: int | None,
                            log_size: int) -> str | None:
    previous = None
    for entry in entries:
        if entry.offset < base or (next_base is not None and entry.offset >= next_base):
            return f"entry {entry.slot} has offset {entry.offset}, outside the segment"
        if entry.position >= log_size:
            return f"entry {entry.slot} points at byte {entry.position}, past the end of the .log ({log_size})"
        if entry.position < 0:
            return f"entry {entry.slot} points at byte {entry.position}, before the start of the .log"
        if previous is not None and (entry.offset <= previous.offset or entry.position <= previous.position):
            return f"entry {entry.slot} does not follow entry {previous.slot}"
        previous = entry
    return None


def _time_entries_problem(entries: list[TimestampOffset], base: int, next_base: int | None,
                          log_size: int) -> str | None:
    previous = None
    for entry in entries:
        if entry.offset < base or (next_base is not None and entry.offset >= next_base):
            return f"entry {entry.slot} has offset {entry.offset}, outside the segment"
        if previous is not None and (entry.timestamp <= previous.timestamp or entry.offset < previous.offset):
            return f"entry {entry.slot} does not follow entry {previous.slot}"
        previous = entry
    return None


def _floor_offset_entry(entries: list[OffsetPosition], target: int) -> OffsetPosition | None:
    """OffsetIndex.lookup: the last entry with offset <= target."""
    index = bisect.bisect_right([e.offset for e in entries], target) - 1
    return entries[index] if index >= 0 else None


def _floor_time_entry(entries: list[TimestampOffset], target: int) -> TimestampOffset | None:
    """TimeIndex.lookup: the last entry with timestamp <= target."""
    index = bisect.bisect_right([e.timestamp for e in entries], target) - 1
    return entries[index] if index >= 0 else None


def _chain(first: list[Batch], rest: Iterator[Batch]) -> Iterator[Batch]:
    yield from first
    yield from rest


def _fill(answer: Answer, view: _SegmentView, batch: Batch, record: Record) -> None:
    answer.found = True
    answer.offset, answer.timestamp, answer.timestamp_type = record.offset, record.timestamp, batch.timestamp_type
    answer.leader_epoch = batch.partition_leader_epoch if batch.partition_leader_epoch >= 0 else None
    answer.segment = view.log_path
    answer.batch_position, answer.batch_size = batch.position, batch.size
    answer.batch_base_offset, answer.batch_last_offset = batch.base_offset, batch.last_offset
    answer.record_position = record.position
    answer.key_size, answer.value_size = record.key_size, record.value_size
    answer.control = record.control.name if record.control is not None else None

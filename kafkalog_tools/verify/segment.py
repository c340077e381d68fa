"""Stage 1, a segment: the .log (every batch, damage and resynchronisation) and its indexes. Needs
nothing from other segments, so it runs wherever the files can be read; what stage 2 needs of each
batch (`BatchFacts`, `FactsRun`) goes to a consumer as it is read."""
from __future__ import annotations

import bisect
import functools
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterator, NamedTuple

from ..crc import crc32c
from ..errors import CorruptDataError, DecompressionError, InputError
from ..formats.batch import INT32_MAX, Batch, Record, java_long
from ..formats.logdir import Segment
from ..formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, HEADER_SIZE, skim_records
from ..formats.segment import LOG_OVERHEAD, MAGIC_OFFSET, BadEntry, SegmentFile, Stop
from ..formats.segment import all_zero as _all_zero, next_non_zero as _next_non_zero
from ..native import bulk_scan
from ..native.columns import (ATTRIBUTES, BASE_OFFSET, BASE_SEQUENCE, BASE_TIMESTAMP, COORDINATOR_EPOCH,
                              LAST_OFFSET_DELTA, LEADER_EPOCH, MARKER, MAX_TIMESTAMP, NOT_A_MARKER, OUTLINE_FIELDS,
                              POSITION, PRODUCER_EPOCH, PRODUCER_ID, RECORDS_COUNT, RO_ASCENDING, RO_BYTES,
                              RO_EPOCHS_RISE, RO_LARGEST_LAST, RO_LARGEST_PRODUCER, RO_RECORDS, S_BYTES, S_EPOCH,
                              S_FIRST_BASE, S_FIRST_LAST, S_FIRST_POSITION, S_FOLDED, S_IN_ORDER, S_KEPT,
                              S_LARGEST_TIMESTAMP, S_LAST_LAST, S_RECORDS, SIZE)
from ..payloads.versions import SigningTable, signs_versions
from ..recovery import RecoveryDrops, marker_records, recovery_drops
from .bulk import BulkScan
from .findings import (ERROR, INFO, RANK_AFTER, RANK_BASE_OFFSET, RANK_BOUNDS, RANK_RECORDS, WARNING, Finding,
                       ProgressCallback, Summary, from_error, plain, position_key)
from .indexes import BatchTable, IndexQueries, check_offset_index, check_time_index, read_txn_index


PROGRESS_STEP = 8 << 20
SPARSE_TABLE_ROWS = 1 << 21
"""A segment of this many batches or more (if all were the size of its first) keeps only the rows
of its batch table the index checks reach (`IndexQueries`), so that the table stays small however
big the segment: a 256 MiB segment of KRaft's ~80-byte batches had 3.35 M rows, 107 MB that each
new process zeroed on first touch (its 2 GiB log dir's `verify --shallow` 1.00 -> 0.73 s, system
time 0.58 -> 0.19 s, 11 runs interleaved). Below it a table of every row (up to 64 MB) is as fast
or faster: on 256 MiB segments of 1.29 M batches, 0.51 s against 0.55 s."""


class BatchFacts(NamedTuple):
    """What stage 2 needs of an intact batch: offsets, leader epoch, producer fields and, for a
    transaction marker, its first control record. It answers ProducerState as a `Batch` would."""

    path: str
    position: int
    size: int
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
                                   expected=plain(exc.expected), actual=plain(exc.actual))
        return cls(batch.path, batch.position, batch.size, base, batch.last_offset, batch.magic,
                   batch.partition_leader_epoch, batch.producer_id, batch.producer_epoch, batch.base_sequence,
                   batch.last_sequence, batch.is_transactional, batch.is_control, batch.max_timestamp, marker)

    def records_reading_controls(self) -> list[Record]:
        if isinstance(self.marker, CorruptDataError):
            raise self.marker
        return self.marker or []


class Stretch(NamedTuple):
    """Batches `kernels.scan_outlined` folded without keeping their columns: V2, clean, no producer
    id, no control batch, offsets ascending, one leader epoch (>= 0)."""

    count: int
    first_base_offset: int
    last_offset: int
    """Of its last batch, the largest (its offsets ascend)."""
    epoch: int


class FactsRun:
    """The facts of consecutive clean batches of one magic, as stage 1's bulk scan read them:
    columns (`bulk_scan.COLUMNS`) rather than one `BatchFacts` each. The only control batches among
    them are transaction markers the kernel read (`MARKER`) or rows `given`.

    Handed to a `BatchConsumer`, the columns are the scan's own buffer, which its next range
    overwrites: a consumer that keeps the run keeps `held()`. A run that is a `stretch` has no
    columns until they are asked for: then `rescan` reads its batches again (during the call)."""

    def __init__(self, path: str, columns, magic: int = 2, given: dict[int, BatchFacts] | None = None,
                 outline: list[int] | None = None, last=None, stretch: Stretch | None = None,
                 rescan: Callable[[], object] | None = None):
        self.path = path
        self._columns = columns
        self.stretch = stretch
        self._rescan = rescan
        self.magic = magic
        self.given = given or {}
        """Rows that stand for a batch read one by one (a transaction marker): its own facts."""
        self.outline = outline
        """What `kernels.rows_apart` learnt of exactly these rows (`OUTLINE_FIELDS`), or None."""
        self.last = last
        """Their last offsets (numpy), where the scan computed them already, or None."""

    @property
    def columns(self):
        if self._columns is None:
            self._columns = self._rescan()
        return self._columns

    def __len__(self) -> int:
        return self.stretch.count if self._columns is None else self._columns.shape[1]

    @property
    def last_offsets(self):
        """Each row's last offset: base offset + last offset delta (computed once)."""
        if self.last is None:
            self.last = self.columns[BASE_OFFSET] + self.columns[LAST_OFFSET_DELTA]
        return self.last

    def held(self) -> "FactsRun":
        """This run with columns of its own (and its outline; its last offsets are computed again
        where needed rather than kept)."""
        return FactsRun(self.path, self.columns.copy(), self.magic, self.given, self.outline)

    def part(self, start: int, stop: int) -> "FactsRun":
        """Rows start..stop-1."""
        return FactsRun(self.path, self.columns[:, start:stop], self.magic,
                        {row - start: facts for row, facts in self.given.items() if start <= row < stop})

    @staticmethod
    def row_of(facts: BatchFacts):
        """A V2 batch's facts as a column of `COLUMNS` (those stage 2 reads), or None when its
        offsets are too far apart for a last offset delta."""
        import numpy as np

        delta = facts.last_offset - facts.base_offset
        if facts.magic < 2 or not -INT32_MAX - 1 <= delta <= INT32_MAX:
            return None
        column = np.zeros((len(bulk_scan.COLUMNS), 1), dtype=np.int64)
        column[[POSITION, SIZE, BASE_OFFSET, LAST_OFFSET_DELTA, LEADER_EPOCH, ATTRIBUTES, MAX_TIMESTAMP, PRODUCER_ID,
                PRODUCER_EPOCH, BASE_SEQUENCE, MARKER], 0] = (
            facts.position, facts.size, facts.base_offset, delta, facts.partition_leader_epoch,
            ATTR_TRANSACTIONAL * facts.is_transactional | ATTR_CONTROL * facts.is_control, facts.max_timestamp,
            facts.producer_id, facts.producer_epoch, facts.base_sequence, NOT_A_MARKER)
        return column

    def rows(self, which: list[int] | None = None) -> Iterator[BatchFacts]:
        """Each batch's facts, or those of the rows `which`."""
        path, magic, given = self.path, self.magic, self.given
        columns = self.columns[[POSITION, SIZE, BASE_OFFSET, LAST_OFFSET_DELTA, LEADER_EPOCH, ATTRIBUTES, MAX_TIMESTAMP,
                                PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE, MARKER]]
        last_sequences = bulk_scan.last_sequences(self.columns[BASE_SEQUENCE], self.columns[LAST_OFFSET_DELTA])
        if which is not None:
            columns, last_sequences = columns[:, which], last_sequences[which]
        last_sequences = last_sequences.tolist()
        for row, last_sequence, (position, size, base, delta, epoch, attributes, max_timestamp, producer_id,
                                 producer_epoch, base_sequence, marker) in zip(
                range(columns.shape[1]) if which is None else which, last_sequences, zip(*columns.tolist())):
            if row in given:
                yield given[row]
                continue
            records = None
            if marker != NOT_A_MARKER and producer_id >= 0:  # as `BatchFacts.of` reads it
                records = [bulk_scan.marker_record(position, base, int(self.columns[BASE_TIMESTAMP, row]),
                                                   base_sequence, marker, int(self.columns[COORDINATOR_EPOCH, row]))]
            yield BatchFacts(path, position, size, base, java_long(base + delta), magic, epoch, producer_id,
                             producer_epoch, base_sequence, last_sequence, bool(attributes & ATTR_TRANSACTIONAL),
                             bool(attributes & ATTR_CONTROL), max_timestamp, records)


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
    txn_entries: object = None
    txn_findings: list[Finding] = field(default_factory=list)
    """What the .txnindex says on its own: its entries (`TransactionIndex.columns`; None where absent
    or unreadable), which stage 2 compares with the ABORT markers, and its findings."""
    tail: RecoveryDrops | None = None
    """What recovery truncates from the end of an active segment read offline (its `truncated-tail`);
    stage 2 says which open transactions that touches."""
    version_signatures: frozenset[int] | None = None
    """An internal topic's, read deep by the kernel: the version signature of every record that
    `payloads.versions.newer_versions` would decode (`SigningTable.signatures`); else None."""


@dataclass
class RangeReport:
    """A byte range of a segment walked on its own (`check_range`), from a batch start to the first
    batch boundary at or past the next range's start. Its ordinals count from its own first batch."""

    segment: Segment
    start: int
    stop: int
    """Where the walk ended: that boundary, where it stopped short (before damage, ...), or the
    end of the file as the range's task mapped it."""
    live: bool
    counts: Summary
    """batches, records, intact_bytes."""
    log_findings: list[tuple[tuple[int, int, int], Finding]]
    batches: list[BatchFacts | FactsRun]
    table: "BatchTable"
    last_offset: int | None
    """Largest last offset of its batches."""
    offsets: tuple[int, int] | None
    """Its first batch's base offset and its last batch's last offset (None without batches)."""

    @property
    def log(self) -> str:
        return str(self.segment.log)


BatchConsumer = Callable[[BatchFacts | FactsRun], None]
"""Takes each intact batch's facts as stage 1 reads them; a `FactsRun` only for the call."""


def check_segment(segment: Segment, is_active: bool, deep: bool = True,
                  on_progress: ProgressCallback | None = None, on_batch: BatchConsumer | None = None,
                  live: bool = False, ranges: list[RangeReport] | None = None,
                  outlines: bool = False) -> SegmentReport:
    """Stage 1: everything a segment's own files say (batches, CRCs, records, damage, offset and
    time indexes). Needs nothing from other segments, so it runs wherever the files can be read.
    Each intact batch's facts go to `on_batch` as they are read, or without one into the report.
    `live`: a broker may be appending to the active segment (`broker.BrokerState.live`).
    `ranges`: the segment's byte ranges walked apart (`check_range`), put together as one walk
    reads the segment (`LogScan.walk_ranges`). `outlines`: `on_batch` takes stretches (`LogScan`)."""
    report = SegmentReport(str(segment.log), Summary(records=0 if deep else None))
    try:
        log = SegmentFile(segment.log)
    except InputError as exc:
        report.opened = False
        report.log_findings.append(((0, 0, 0), from_error(exc, "io-error", str(segment.log))))
        return report
    with log:
        report.counts.segments += 1
        report.counts.log_bytes += log.file_size
        # (live: a broker may append index entries after the scan has read the queries)
        scan = LogScan(log, segment, deep, report, on_progress, on_batch or functools.partial(_keep, report.batches),
                       every_row=live, outlines=outlines and on_batch is not None)
        scan.is_active, scan.live = is_active, live
        if ranges:
            scan.walk_ranges(ranges)
        else:
            # (live: the file may grow past what the scan read before the search reads it)
            signing = scan.sign_versions() if deep and not live and signs_versions(segment.log) else None
            scan.run()
            report.version_signatures = None if signing is None or not scan.vouches else signing.signatures()
        table = scan.table
        if table.lacks_rows:
            table.release()
            table = _every_batch(log, segment, deep, is_active, live)
        report.index_findings.extend(check_offset_index(segment, log, table, is_active))
        report.index_findings.extend(check_time_index(segment, log, table, is_active))
        table.release()
    report.txn_entries, report.txn_findings = read_txn_index(segment)
    return report


def check_range(segment: Segment, start: int, until: int | None, deep: bool = True,
                live: bool = False) -> RangeReport:
    """A byte range of a big segment, for `check_segment(ranges=...)` to put together: its batches
    from `start` (a batch start, as the offset index says) to the first boundary at or past `until`
    (None: the end), checked as in one walk; it stops short before anything that depends on the
    batches before it (see `LogScan.range_start`), which the walk putting the ranges together reads."""
    report = SegmentReport(str(segment.log), Summary(records=0 if deep else None))
    empty = RangeReport(segment, start, start, live, report.counts, [], [], BatchTable(), None, None)
    try:
        log = SegmentFile(segment.log)
    except InputError:
        return empty  # nothing read: `check_segment` says why
    with log:
        if start > log.end:
            return empty
        scan = LogScan(log, segment, deep, report, None, functools.partial(_keep, report.batches), every_row=live)
        scan.range_start = start
        # at the end of the file as mapped here: a file still being written may be longer where
        # the ranges are put together, which reads on from here
        stop = scan.walk(start, until)
        stop = scan.stopped_short if scan.stopped_short is not None else log.end if stop is None else stop
        scan.drop_bulk()
    last = report.batches[-1] if report.batches else None
    if type(last) is FactsRun:
        last = int((last.columns[BASE_OFFSET, -1:] + last.columns[LAST_OFFSET_DELTA, -1:])[0])  # (wraps as a run's do)
    elif last is not None:
        last = last.last_offset
    offsets = None if last is None else (scan.table.first_base_offset, last)
    return RangeReport(segment, start, stop, live, report.counts, report.log_findings, report.batches, scan.table,
                       scan.last_offset, offsets)


def _every_batch(log: SegmentFile, segment: Segment, deep: bool, is_active: bool, live: bool) -> BatchTable:
    """The segment's batch table with every row, read again: where offsets fall, the rows a first
    read kept for the index checks do not do (`BatchTable.lacks_rows`). Only damaged segments."""
    report = SegmentReport(str(segment.log), Summary(records=0 if deep else None))
    scan = LogScan(log, segment, deep, report, None, lambda facts: None, every_row=True)
    scan.is_active, scan.live = is_active, live
    scan.run()
    return scan.table


def _batches_like_the_first(log: SegmentFile) -> int:
    """How many batches the segment holds if all are the size its first says (0 below a header's)."""
    size = LOG_OVERHEAD + int.from_bytes(log.buffer[LOG_OVERHEAD - 4:LOG_OVERHEAD], "big", signed=True) \
        if log.end >= LOG_OVERHEAD else 0
    return log.end // size if size >= HEADER_SIZE else 0


def _keep(batches: list, facts: "BatchFacts | FactsRun") -> None:
    batches.append(facts.held() if type(facts) is FactsRun else facts)


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


class LogScan:
    """Walk a segment as Kafka's reader does, check every batch, and step over damage."""

    def __init__(self, log: SegmentFile, segment: Segment, deep: bool, report: SegmentReport,
                 on_progress: ProgressCallback | None, on_batch: BatchConsumer, every_row: bool = False,
                 outlines: bool = False):
        """`every_row`: the batch table keeps every batch's row (see `BatchTable`). `outlines`:
        `on_batch` takes runs that are stretches and reads their columns only where it must."""
        self.log = log
        self.on_batch = on_batch
        self.outlines = outlines
        self.segment = segment
        self.deep = deep
        self.report = report
        self.counts = report.counts
        self.on_progress = on_progress
        self.damage: list[_Damage] = []
        self.reported = 0
        self.last_offset: int | None = None
        """Largest last offset of this segment's intact batches so far."""
        self.is_active = False
        """The partition's last segment: a broker may be appending to it as we read."""
        self.live = False
        """A broker runs on the log dir (or --live): the active segment's end may be a write in progress."""
        self.until = log.end + 1
        """`walk` reads the batches that start before this."""
        self.range_start: int | None = None
        """A range of a split segment (`check_range`) walked from here, the batches before it unknown:
        the walk stops short, at `stopped_short`, before whatever depends on them - damage (where it
        resyncs, what it reports) and, unless the range starts the segment, a shallow check's
        compressed legacy wrapper (its base offset is `legacy_floor`)."""
        self.stopped_short: int | None = None
        self.bulk = BulkScan(self) if bulk_scan.wanted(log.buffer, log.end, deep, legacy=True) else None
        # only the index checks read the table's rows: without index files a count will do, and runs
        # of a big segment need only the rows its index entries reach
        keep_rows = segment.index is not None or segment.timeindex is not None
        queries = (IndexQueries.of(segment) if keep_rows and self.bulk is not None and not every_row
                   and _batches_like_the_first(log) >= SPARSE_TABLE_ROWS else None)
        self.table = BatchTable(keep_rows, log.end // HEADER_SIZE, queries)
        self.vouches = False
        """Whether the kernel, signing (`sign_versions`), read every entry the walk has read."""

    def sign_versions(self) -> SigningTable | None:
        """Have the kernel take the version signatures of the records it walks, where it reads the
        segment; the table they go to."""
        if self.bulk is None:
            return None
        signing = SigningTable()
        self.bulk.reader.signing = signing.signing
        self.vouches = True
        return signing

    def run(self) -> None:
        self.walk(0)
        self.finish()

    def walk(self, position: int | None, until: int | None = None) -> int | None:
        """Read batches from `position` up to the first batch boundary at or after `until` (a
        position where a resync lands counts); return it, or None at the end of the segment (or
        where a range stops short). Walks that pause and go on read as one walk does."""
        self.until = self.log.end + 1 if until is None else until
        while position is not None and position < self.until:
            position = self._walk_from(position)
        return position

    def drop_bulk(self) -> None:
        """Done with the bulk scan: its numpy view pins the map, its buffers serve the next segment."""
        if self.bulk is not None:
            self.bulk.close()
            self.bulk = None

    def finish(self) -> None:
        """After the last walk: the damage found, and the first batch's offset against the name."""
        self.drop_bulk()
        after = (RANK_AFTER, self.counts.batches)  # found after every batch, as one pass finds them
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
        """Read batches from `position`; return where to continue after damage or at `until`, or
        None at the end."""
        log, bulk, until = self.log, self.bulk, self.until
        short = self.range_start is not None
        floor_unknown = bool(self.range_start) and not self.deep
        while True:
            if bulk is not None:
                position = bulk.accept_from(position)
            taken = 0
            for entry in log.entries(position):
                if entry.position >= until:
                    return entry.position
                self.vouches = False
                if isinstance(entry, BadEntry) or not entry.crc_valid:
                    return self._stop_short(entry.position) if short else self._entry_damage(entry)
                if floor_unknown and entry.magic < 2 and entry.compression_id:
                    return self._stop_short(entry.position)
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
        if start >= until:
            return start
        if short:
            return self._stop_short(start)
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

    def walk_ranges(self, ranges: list[RangeReport]) -> None:
        """`run` over ranges walked apart: a range is taken where this walk reaches its start, up to
        where its own walk ended; from anywhere else (a range stopped short, or ended past the next
        one's start: damage, an index entry off a batch start) this walk reads on itself, to the
        next range start it lands on. What it takes is what one walk reads."""
        by_start = {part.start: part for part in ranges}
        starts = sorted(by_start)
        position: int | None = 0
        while position is not None:
            part = by_start.pop(position, None)
            if part is not None:
                self._adopt(part)
                position = part.stop
                continue
            later = bisect.bisect_right(starts, position)
            position = self.walk(position, starts[later] if later < len(starts) else None)
        self.finish()

    def _adopt(self, part: RangeReport) -> None:
        """A range's batches as if this walk had read them: its findings numbered on from here, and
        what follows the latest damage grown by them."""
        counts, shift = self.counts, self.counts.batches
        self.report.log_findings.extend(((position, ordinal + shift, rank), finding)
                                        for (position, ordinal, rank), finding in part.log_findings)
        for facts in part.batches:
            self.on_batch(facts)
        self.table.append(part.table)
        if part.last_offset is not None and (self.last_offset is None or part.last_offset > self.last_offset):
            self.last_offset = part.last_offset
        counts.batches += part.counts.batches
        counts.intact_bytes += part.counts.intact_bytes
        if self.deep:
            counts.records += part.counts.records
        if self.damage and part.offsets is not None:
            latest = self.damage[-1]
            latest.intact_bytes += part.counts.intact_bytes
            latest.intact_batches += part.counts.batches
            latest.offsets = [latest.offsets[0] if latest.offsets else part.offsets[0], part.offsets[1]]

    def _stop_short(self, position: int) -> None:
        self.stopped_short = position
        return None

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
        self.report.log_findings.append(((start, self.counts.batches, RANK_AFTER), Finding(
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
            unreadable = from_error(exc, "record-corrupt", batch.path)
            findings.append(((position_key(unreadable), ordinal, RANK_BASE_OFFSET), unreadable))
        segment_base = self.segment.base_offset
        if base < segment_base:
            findings.append(((batch.position, ordinal, RANK_BOUNDS), Finding(
                ERROR, "offset-below-segment-base", batch.path, batch.position,
                f"batch offset {base} is below the segment's base offset {segment_base}")))
        if not 0 <= last_offset - segment_base <= INT32_MAX:
            findings.append(((batch.position, ordinal, RANK_BOUNDS), Finding(
                ERROR, "offset-overflow", batch.path, batch.position,
                f"last offset {last_offset} is not within 2^31-1 of the base offset {segment_base} "
                f"(LogSegmentOffsetOverflowException)")))
        if self.deep:
            for finding in _record_findings(batch, base, counts):
                findings.append(((position_key(finding), ordinal, RANK_RECORDS), finding))
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

    def accept_clean(self, columns, magic: int = 2, outline: list[int] | None = None) -> None:
        """`_accept` for a run of batches the bulk scan vouched for, in which it would find nothing
        (`outline`: these very rows', from `kernels.rows_apart`)."""
        counts = self.counts
        positions, sizes, base = columns[POSITION], columns[SIZE], columns[BASE_OFFSET]
        last = base + columns[LAST_OFFSET_DELTA]
        if self.deep:
            counts.records += int(columns[RECORDS_COUNT].sum()) if outline is None else outline[RO_RECORDS]
        self.on_batch(FactsRun(self.log.path, columns, magic, outline=outline, last=last))
        self.table.extend(positions, sizes, base, last, columns[MAX_TIMESTAMP])
        self._count_intact(len(positions), int(sizes.sum()) if outline is None else outline[RO_BYTES], int(base[0]),
                           int(last[-1]), int(last.max()) if outline is None else outline[RO_LARGEST_LAST],
                           int(positions[-1] + sizes[-1]))

    def accept_stretch(self, said: list[int], rescan: Callable[[], object]) -> None:
        """`accept_clean` for a stretch `kernels.scan_outlined` folded (`said`: what it says of the
        call, indexed by `S_*`; `rescan`: its columns, read again)."""
        folded, size = said[S_FOLDED], said[S_BYTES]
        if self.deep:
            self.counts.records += said[S_RECORDS]
        stretch = Stretch(folded, said[S_FIRST_BASE], said[S_LAST_LAST], said[S_EPOCH])
        outline = [0] * len(OUTLINE_FIELDS)
        outline[RO_BYTES], outline[RO_RECORDS], outline[RO_LARGEST_LAST] = size, said[S_RECORDS], said[S_LAST_LAST]
        outline[RO_LARGEST_PRODUCER], outline[RO_ASCENDING], outline[RO_EPOCHS_RISE] = -1, 1, 1
        self.on_batch(FactsRun(self.log.path, None, 2, outline=outline, stretch=stretch, rescan=rescan))
        end = said[S_FIRST_POSITION] + size
        self.table.add_stretch(folded, said[S_KEPT], bool(said[S_IN_ORDER]), said[S_FIRST_BASE],
                               said[S_FIRST_POSITION], said[S_FIRST_LAST], end, said[S_LARGEST_TIMESTAMP])
        self._count_intact(folded, size, stretch.first_base_offset, stretch.last_offset, stretch.last_offset, end)

    def _count_intact(self, batches: int, size: int, first_base: int, last: int, largest: int, end: int) -> None:
        """What `accept_clean` and `accept_stretch` count of `batches` intact ones in a row: from
        `first_base` to the last one's `last` offset, the largest last offset among them, and where
        they end."""
        if self.last_offset is None or largest > self.last_offset:
            self.last_offset = largest
        self.counts.batches += batches
        self.counts.intact_bytes += size
        if self.damage:
            latest = self.damage[-1]
            latest.intact_bytes += size
            latest.intact_batches += batches
            latest.offsets = [latest.offsets[0] if latest.offsets else first_base, last]
        if self.on_progress is not None and end - self.reported >= PROGRESS_STEP:
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
            return [from_error(exc, "record-corrupt", batch.path)]
        except CorruptDataError:
            pass  # decoding reports it
    findings = []
    if skimmed is not None:
        count, largest = skimmed
    else:
        try:
            records = batch.records_reading_controls()
        except CorruptDataError as exc:
            return [from_error(exc, "record-corrupt", batch.path)]
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


_OFFSET_AND_SIZE = struct.Struct(">qi")
_MAGIC_CANDIDATE = re.compile(rb"[\x00-\x02]")
"""A batch's magic byte is 0, 1 or 2: in random bytes, 3 positions in 256 are worth a closer look."""

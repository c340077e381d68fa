"""What `kafkalog dump` reports, as a stream of typed items (no printing here).

Given paths - log dirs, partition dirs, or single files - `dump()` walks them in topic /
partition / offset order and yields, per file, a `FileStart` and then the file's content: batches
(with their records when deep iteration or a record filter asks for them), index entries,
aborted transactions, producer states, checkpoint entries; `Trailing` for bytes after the last
readable batch; `Problem` for anything that cannot be read, after which the walk goes on with
the next entry or file. The renderers in `output/` turn items into kafka-dump-log text, JSON
Lines or rich tables.
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from . import codecs
from .broker import BrokerState, BrokerStates
from .errors import CorruptDataError, InputError, KafkaLogError
from .formats import checkpoint, legacy, logdir, offset_index, producer_snapshot, properties, time_index, txn_index
from .formats.batch import Batch, Record, UnreadRecord
from .formats.record_batch import ATTR_CODEC, ATTR_CONTROL, HEADER_SIZE
from .formats.segment import MAGIC_OFFSET, BadEntry, SegmentFile, Stop, all_zero, offset_from_name
from .native import bulk_scan
from .native.columns import (ATTRIBUTES, B_ATTRIBUTES, B_COUNT, B_POSITION, BASE_OFFSET, BASE_SEQUENCE, BASE_TIMESTAMP,
                             CAPACITY, FIELD_AT, LAST_OFFSET_DELTA, LEADER_EPOCH, MARKER, MAX_TIMESTAMP, POSITION,
                             PRODUCER_EPOCH, PRODUCER_ID, R_OFFSET, RECORDS_COUNT, SIZE, spread)
from .payloads import DecodedPayload, PayloadDecoder, PayloadError, decoder_for_topic, decoders
from .payloads import quorum_state

# ---------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------


@dataclass
class Filters:
    from_offset: int | None = None
    to_offset: int | None = None
    """Inclusive."""
    from_time: int | None = None
    to_time: int | None = None
    """Inclusive, epoch milliseconds."""
    producer_id: int | None = None
    key: bytes | None = None
    key_regex: re.Pattern | None = None

    @property
    def any_set(self) -> bool:
        return any(getattr(self, f.name) is not None for f in dataclasses.fields(self))

    @property
    def on_records(self) -> bool:
        """Whether a batch can only be kept or dropped after looking at its records."""
        return any(v is not None for v in (self.from_time, self.to_time, self.key, self.key_regex))

    def batch_may_match(self, batch: Batch) -> bool:
        if self.from_offset is not None and batch.last_offset < self.from_offset:
            return False
        if self.to_offset is not None and batch.last_offset >= 0 and _first_offset_hint(batch) > self.to_offset:
            return False
        if self.producer_id is not None and batch.producer_id != self.producer_id:
            return False
        if self.from_time is not None and batch.max_timestamp < self.from_time:
            return False  # max_timestamp bounds every record's timestamp
        return True

    def record_matches(self, record: Record) -> bool:
        if self.from_offset is not None and record.offset < self.from_offset:
            return False
        if self.to_offset is not None and record.offset > self.to_offset:
            return False
        if self.from_time is not None and record.timestamp < self.from_time:
            return False
        if self.to_time is not None and record.timestamp > self.to_time:
            return False
        if self.key is not None and record.key != self.key:
            return False
        if self.key_regex is not None and (record.key is None or not self.key_regex.search(
                record.key.decode("utf-8", "replace"))):
            return False
        return True


def _first_offset_hint(batch: Batch) -> int:
    """The batch's first offset where known without decompressing (legacy wrappers: their last)."""
    return batch.base_offset if batch.magic >= 2 or batch.compression_id == 0 else batch.last_offset


@dataclass
class DumpOptions:
    deep: bool = False
    """Decode every record (kafka-dump-log --deep-iteration)."""
    print_data: bool = False
    """Show keys and values (kafka-dump-log --print-data-log); implies deep."""
    decoder: str | None = "auto"
    """'auto' (by topic directory name), a registered decoder name, or None for plain bytes."""
    filters: Filters = field(default_factory=Filters)
    max_bytes: int | None = None
    decompress_limit: int = codecs.DEFAULT_LIMIT
    read_as: str | None = None
    """"live" or "offline" for every log dir (--live/--offline); None: as its broker lock says."""
    batch_runs: bool = False
    """Runs of clean V2 batches or V0/V1 messages may come as `BatchRun` items, read in bulk by compiled
    code (`bulk_scan`), where no filter or payload decoder applies. The JSON Lines and text renderers
    read them."""

    @property
    def decode_records(self) -> bool:
        return self.deep or self.print_data or self.filters.on_records


# ---------------------------------------------------------------------------------------------
# Items
# ---------------------------------------------------------------------------------------------


@dataclass
class FileStart:
    path: str
    """As the user gave it, or joined from the directory they gave."""
    kind: str
    base_offset: int | None = None
    snapshot_id: tuple[int, int] | None = None
    """KRaft snapshot (end offset, epoch), from a `<offset>-<epoch>.checkpoint` name."""
    broker: BrokerState | None = None
    """A segment's: whether a broker runs on its log dir, and so how the end of the active segment reads."""


@dataclass
class BatchItem:
    batch: Batch
    records: list[Record] | None = None
    decoded: list[DecodedPayload | None] | None = None
    """Parallel to `records` when a payload decoder applies."""
    records_before_error: list[Record] | None = None
    """When the batch's records fail to decode: those Kafka's record iterator returns before the one
    that fails (kafka-dump-log prints them, then throws; the text format prints them too, with
    `decoded` parallel to them)."""
    records_unread: list[Record] = field(default_factory=list)
    """After `records_before_error`, from a V0/V1 message whose key or value cannot be read (an
    `UnreadRecord`, with only its size fields) on: the records kafka-dump-log prints a line for.
    It prints that message's line up to its size fields, then throws when it reads its data (with
    --print-data-log), or goes on to the next message (without); the text format does the same."""
    unread_decoded: list[DecodedPayload] | None = None
    """With a payload decoder whose parser catches what reading such a value throws: parallel to
    `records_unread` as far as kafka-dump-log gets (it prints the error and goes on)."""




@dataclass
class BatchRun:
    """Consecutive V2 batches (or V0/V1 messages of one magic) with valid CRCs, and (with deep
    iteration) their records exactly as `decode_records` (`LegacyBatch.records`) reads them, as
    columns: what a `BatchItem` each would hold, without the objects. Only with
    `DumpOptions.batch_runs`."""

    path: str
    batches: object
    """int64 numpy array [len(bulk_scan.RUN_BATCH_FIELDS), batches]."""
    records: object | None
    """int64 numpy array [len(bulk_scan.RECORD_COLUMNS), records], `count` rows a batch in order; None
    without deep iteration."""
    headers: object | None
    """int64 numpy array [len(bulk_scan.HEADER_COLUMNS), ...]: the rows the records name."""
    segment: object
    """The segment's bytes (`SegmentFile.buffer`): records of uncompressed batches are sliced from here..."""
    payloads: object
    """...and those of compressed batches from their decompressed payloads, laid end to end: bytes,
    or a uint8 numpy array where `kernels.gzip_each` inflated them all."""
    pin: object = field(default=None, repr=False)
    """A view of `segment`: a map cannot close while one is alive, so the run can still be rendered
    after the walk has moved on."""
    legacy: object | None = None
    """For V0/V1 messages with deep iteration: int64 numpy array [len(bulk_scan.LEGACY_RECORD_COLUMNS),
    records], beside `records`."""


@dataclass
class IndexEntryItem:
    path: str
    entry: offset_index.OffsetPosition


@dataclass
class TimeIndexEntryItem:
    path: str
    entry: time_index.TimestampOffset


@dataclass
class EmptyIndex:
    path: str


@dataclass
class AbortedTxnItem:
    path: str
    entry: txn_index.AbortedTxn


@dataclass
class ProducerStateItem:
    path: str
    entry: producer_snapshot.ProducerEntry


@dataclass
class CheckpointItem:
    path: str
    kind: str
    values: dict


@dataclass
class Trailing:
    path: str
    position: int
    size: int
    reason: str
    still_being_written: bool = False
    """A partial batch (or zeros) at the end of the active segment of a live broker: a write in
    progress, not corruption."""


@dataclass
class Problem:
    error: KafkaLogError
    severity: str = "error"


@dataclass
class UnknownFile:
    path: str
    reason: str


Item = (FileStart | BatchItem | BatchRun | IndexEntryItem | TimeIndexEntryItem | EmptyIndex | AbortedTxnItem
        | ProducerStateItem | CheckpointItem | Trailing | Problem | UnknownFile)

# ---------------------------------------------------------------------------------------------
# Walking
# ---------------------------------------------------------------------------------------------

SUFFIX_KINDS = {".log": "log", ".checkpoint": "checkpoint", ".index": "index", ".timeindex": "timeindex",
                ".txnindex": "txnindex", ".snapshot": "snapshot"}
TEXT_FILE_KINDS = {name: "offset-checkpoint" for name in checkpoint.OFFSET_CHECKPOINTS}
TEXT_FILE_KINDS.update({checkpoint.LEADER_EPOCH_CHECKPOINT: "leader-epoch-checkpoint",
                        "meta.properties": "meta.properties", "partition.metadata": "partition.metadata",
                        quorum_state.FILE_NAME: "quorum-state"})
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
"""KRaft's bootstrap snapshot at the metadata log dir root: metadata records, like `__cluster_metadata`."""
METADATA_TOPIC = "__cluster_metadata"


def dump(paths: list[str], options: DumpOptions) -> Iterator[Item]:
    brokers = BrokerStates(options.read_as)
    for given in paths:
        try:
            target = logdir.classify(given)
        except InputError as exc:
            yield Problem(exc)
            continue
        if isinstance(target, logdir.LogDir):
            yield from _dump_log_dir(target, given, options, brokers.of(target.path))
        elif isinstance(target, logdir.PartitionDir):
            yield from _dump_partition(target, given, options, brokers.of_partition(target.path))
        else:
            yield from dump_file(given, options, topic=_topic_of(given), broker=brokers.of_file(given))


def _join(given: str, path: Path, root: Path) -> str:
    return os.path.join(given, os.path.relpath(path, root))


def _dump_log_dir(target: logdir.LogDir, given: str, options: DumpOptions, broker: BrokerState) -> Iterator[Item]:
    for name in sorted(target.files):
        if name in TEXT_FILE_KINDS:
            yield from dump_file(_join(given, target.files[name], target.path), options)
        elif name == BOOTSTRAP_CHECKPOINT:
            yield from dump_file(_join(given, target.files[name], target.path), options, topic=METADATA_TOPIC)
    for partition in target.partitions:
        yield from _dump_partition(partition, _join(given, partition.path, target.path), options, broker)
    for path, reason in target.unknown:
        yield UnknownFile(_join(given, path, target.path), reason)


def _dump_partition(partition: logdir.PartitionDir, given: str, options: DumpOptions,
                    broker: BrokerState) -> Iterator[Item]:
    topic = partition.topic
    last = partition.segments[-1].base_offset if partition.segments else None
    for segment in partition.segments:
        for path in (segment.log, segment.index, segment.timeindex, segment.txnindex):
            if path is not None:
                yield from dump_file(_join(given, path, partition.path), options, topic=topic,
                                     active=segment.base_offset == last, broker=broker)
    for path in partition.snapshots + partition.kraft_snapshots:
        yield from dump_file(_join(given, path, partition.path), options, topic=topic)
    for name in sorted(partition.files):
        if name in TEXT_FILE_KINDS:
            yield from dump_file(_join(given, partition.files[name], partition.path), options)
    for path in partition.leftovers:
        yield UnknownFile(_join(given, path, partition.path),
                          "leftover of an interrupted delete, clean or swap; Kafka's loader handles it at startup")
    for path, reason in partition.unknown:
        yield UnknownFile(_join(given, path, partition.path), reason)


def _topic_of(file: str) -> str | None:
    """The topic of the partition directory a single file lies in, if its name says."""
    if os.path.basename(file) == BOOTSTRAP_CHECKPOINT:
        return METADATA_TOPIC
    parsed = logdir.parse_partition_dir_name(Path(os.path.abspath(file)).parent.name)
    return parsed[0] if parsed else None


def kind_of(path: str) -> str | None:
    name = os.path.basename(path)
    if name in TEXT_FILE_KINDS:
        return TEXT_FILE_KINDS[name]
    dot = name.rfind(".")
    return SUFFIX_KINDS.get(name[dot:]) if dot >= 0 else None


def dump_file(path: str, options: DumpOptions, topic: str | None = None,
              active: bool | None = None, broker: BrokerState | None = None) -> Iterator[Item]:
    """`active`: whether the file belongs to its partition's last segment (None: look at its directory);
    `broker`: of its log dir (None: probed, as `options.read_as` says)."""
    kind = kind_of(path)
    if kind is None:
        yield UnknownFile(path, "not a file kind kafkalog dumps")
        return
    try:
        if kind in ("log", "checkpoint"):
            if active is None:
                active = kind == "log" and _is_last_segment(path)
            if kind == "log" and broker is None:
                broker = BrokerStates(options.read_as).of_file(path)
            yield from _dump_log(path, kind, options, topic, active and kind == "log",
                                 broker if kind == "log" else None)
        elif kind == "index":
            yield from _dump_offset_index(path)
        elif kind == "timeindex":
            yield from _dump_time_index(path)
        elif kind == "txnindex":
            yield FileStart(path, kind)
            for entry in txn_index.TransactionIndex(path).entries():
                yield AbortedTxnItem(path, entry)
        elif kind == "snapshot":
            yield FileStart(path, kind)
            for entry in producer_snapshot.read(path).entries:
                yield ProducerStateItem(path, entry)
        else:
            yield FileStart(path, kind)
            yield from _dump_text_file(path, kind)
    except KafkaLogError as exc:
        yield Problem(exc.located(path))


def _dump_text_file(path: str, kind: str) -> Iterator[Item]:
    if kind == "offset-checkpoint":
        for (topic, partition), offset in checkpoint.read_offsets(path).items():
            yield CheckpointItem(path, kind, {"topic": topic, "partition": partition, "offset": offset})
    elif kind == "leader-epoch-checkpoint":
        for epoch, start_offset in checkpoint.read_leader_epochs(path):
            yield CheckpointItem(path, kind, {"epoch": epoch, "start_offset": start_offset})
    elif kind == "meta.properties":
        yield CheckpointItem(path, kind, properties.read_meta_properties(path))
    elif kind == "quorum-state":
        try:
            state = quorum_state.read_quorum_state(path)
        except PayloadError as exc:
            raise CorruptDataError(str(exc), path=path) from None
        except InputError:
            raise
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", path=path) from None
        values = {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
        yield CheckpointItem(path, kind, {name: list(value) if isinstance(value, tuple) else value
                                          for name, value in values.items() if value is not None})
    else:
        yield CheckpointItem(path, kind, properties.read_partition_metadata(path))


def _dump_offset_index(path: str) -> Iterator[Item]:
    index = offset_index.OffsetIndex(path)
    yield FileStart(path, "index", index.base_offset)
    if index.entry_count == 0:
        yield EmptyIndex(path)
    else:
        for entry in index.entries():
            yield IndexEntryItem(path, entry)
    yield from _partial_index_entry(path, index, "Index")


def _dump_time_index(path: str) -> Iterator[Item]:
    index = time_index.TimeIndex(path)
    yield FileStart(path, "timeindex", index.base_offset)
    for entry in index.entries():
        yield TimeIndexEntryItem(path, entry)
    yield from _partial_index_entry(path, index, "Time index")


def _partial_index_entry(path: str, index, what: str) -> Iterator[Item]:
    """Kafka reads floor(length / entry size) entries; its sanity check rejects the file."""
    if index.trailing_bytes:
        size = index.ENTRY.size
        yield Problem(CorruptDataError(
            f"{what} file is corrupt, found {len(index.data)} bytes which is neither positive nor a multiple of "
            f"{size}: the last {index.trailing_bytes} bytes are not an entry",
            path=path, position=index.entry_count * size, expected=f"a multiple of {size} bytes",
            actual=len(index.data)))


_KRAFT_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


def _is_last_segment(path: str) -> bool:
    """No segment with a larger base offset lies next to this one (read from the directory only)."""
    base = offset_from_name(path)
    directory = os.path.dirname(path) or "."
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    return base is not None and not any(
        (match := logdir.SEGMENT_FILE.match(name)) and match["suffix"] == ".log" and int(match["offset"]) > base
        for name in names)


def _dump_log(path: str, kind: str, options: DumpOptions, topic: str | None, active: bool,
              broker: BrokerState | None) -> Iterator[Item]:
    with SegmentFile(path, max_bytes=options.max_bytes, decompress_limit=options.decompress_limit) as segment:
        snapshot_id = None
        if kind == "checkpoint" and (match := _KRAFT_SNAPSHOT_NAME.match(os.path.basename(path))):
            snapshot_id = (int(match[1]), int(match[2]))
        yield FileStart(path, kind, segment.base_offset, snapshot_id, broker)
        decoder = _payload_decoder(options, topic)
        filters = options.filters
        # hoisted out of the per-batch loop: with one small record per batch these checks cost as much as the decode
        filtering, on_records, decode_records = filters.any_set, filters.on_records, options.decode_records
        bulk = _BulkDump(segment, decode_records) if (
            options.batch_runs and not filtering and decoder is None
            and bulk_scan.wanted(segment.buffer, segment.end, decode_records, bulk_scan.DUMP_COSTS, legacy=True)
        ) else None
        active = active and segment.end == segment.file_size  # --max-bytes cuts no write short
        live = active and broker is not None and broker.live
        position, budget = 0, None
        try:
            while True:
                if bulk is not None:
                    position = yield from bulk.runs_from(position)
                    budget = bulk.then_one_by_one
                for entry in segment.entries(position):
                    if budget is not None:  # the per-batch loop takes what the bulk path handed back, then returns it
                        if budget == 0:
                            position = entry.position
                            break
                        budget -= 1
                    if (type(entry) is BadEntry or not entry.crc_valid) and live and _written_into_zeros(segment, entry):
                        yield Trailing(path, entry.position, segment.end - entry.position,
                                       "a batch still being written into the zeros log.preallocate=true reserves ahead of "
                                       "the writes, at the end of the active segment of a live broker", True)
                        return
                    if type(entry) is BadEntry:
                        yield Problem(entry.error)
                        continue
                    if filtering and not filters.batch_may_match(entry):
                        continue
                    if entry.magic not in (0, 1, 2):
                        yield Problem(CorruptDataError(
                            f"unknown magic {entry.magic}: read as {'V2' if entry.magic > 2 else 'V0'}, as Kafka's reader "
                            "picks the format, but no Kafka version writes it", path=path,
                            position=entry.position + 16, expected="0, 1 or 2", actual=entry.magic))
                    item = BatchItem(entry)
                    if entry.compression_id not in codecs.NAMES:  # its records cannot be read either
                        yield item
                        yield Problem(_unknown_codec(path, entry))
                        continue
                    if decode_records:
                        try:
                            records = entry.records_reading_controls()
                        except CorruptDataError as exc:
                            readable = getattr(exc, "records_before", None)
                            unread = getattr(exc, "records_unread", None) or []
                            item.records_unread = ([r for r in unread if isinstance(r, UnreadRecord) or filters.record_matches(r)]
                                                   if filtering else unread)
                            if decoder is not None and not entry.is_control:
                                item.unread_decoded = _unread_decoded(decoder, item.records_unread)
                            if readable:
                                item.records_before_error = ([r for r in readable if filters.record_matches(r)]
                                                             if filtering else list(readable))
                                if decoder is not None and not entry.is_control:
                                    item.decoded = [_decode(decoder, r) for r in item.records_before_error]
                            yield item
                            yield from _decoder_failures(path, item)
                            yield Problem(exc)
                            continue
                        item.records = [r for r in records if filters.record_matches(r)] if filtering else list(records)
                        if on_records and not item.records:
                            continue
                        if decoder is not None and not entry.is_control:
                            item.decoded = [_decode(decoder, r) for r in item.records]
                    yield item
                    if item.decoded:
                        yield from _decoder_failures(path, item)
                else:
                    break
        finally:
            if bulk is not None:
                bulk.settle()  # its call ahead reads the map
        bulk = None  # its views pin the map
        start, end = segment.stop_position, segment.end
        zeros = live and all_zero(segment.buffer, start, end)
        if segment.stop is Stop.CORRUPT_SIZE and not zeros:
            yield Problem(segment.stop_error)
        elif start < end:
            reason = ("too few bytes for a batch header" if segment.stop is Stop.SHORT_TAIL
                      else "the last batch runs past the end of the file (truncated)")
            if zeros:  # preallocated space, or a batch's first bytes (its base offset's high bytes)
                reason = ("zeros at the end of the active segment of a live broker: the space log.preallocate=true "
                          "reserves ahead of the writes, or the first bytes of a batch being written")
            elif live:
                reason = "a batch still being written at the end of the active segment of a live broker"
            elif active:
                reason += (": cut by a crash, Kafka's recovery truncates these bytes (`kafkalog rebuild-index "
                           "--truncate` does the same offline, with a backup)")
            yield Trailing(path, start, end - start, reason, live)



def _unknown_codec(path: str, entry: Batch) -> CorruptDataError:
    """What kafka-dump-log throws on (CompressionType.forId), said of the attributes' codec bits."""
    at = entry.position + (FIELD_AT["attributes"] + 1 if entry.magic >= 2 else legacy.LOG_OVERHEAD + 5)
    return CorruptDataError(f"unknown compression codec id {entry.compression_id}: no Kafka version reads this "
                            "entry's records", path=path, position=at, expected="0-4", actual=entry.compression_id)


def _written_into_zeros(segment: SegmentFile, entry: Batch | BadEntry) -> bool:
    """A bad entry followed by nothing but zeros: a live write into preallocated space."""
    return entry.end < segment.end and all_zero(segment.buffer, entry.end, segment.end)


class _Buffers:
    """What a kernel call reads into and decodes with, reused call after call: `_BulkDump` has two
    sets, so that the next call can run while the runs of the one before are printed."""

    def __init__(self, columns, np):
        self.columns = columns
        self.first_record = np.empty(columns.shape[1], dtype=np.int64)
        """Per batch: its first record's row, or `bulk_scan.NOT_DECODED`."""
        self.frames_out = None
        """Where `_decode_frames` decodes lz4 and snappy payloads (copied into the chunk's `payloads`), made on
        first use."""


@dataclass(eq=False)
class _Chunk:
    """The batches one kernel call read, their payloads decompressed and records decoded. The
    arrays a run refers to (`batches`, `records`, `headers`, `legacy_records`, `payloads`) are made
    for the chunk; `buffers` go to the call after next."""

    buffers: _Buffers
    n: int = 0
    after: int = 0
    stopped: bool = False
    """Whether the kernel stopped before an entry it cannot vouch for."""
    magic: int = 2
    """The first entry's: V2 batches, or V0/V1 messages of this magic."""
    decompressed: tuple | None = None
    """(starts, ends, in_payloads): where each batch's records lie, for `_BulkDump._finish`, which
    decodes them."""
    decoded: bool = False
    """Whether the batches' records were decoded (`buffers.first_record` says which)."""
    batches: object = None
    """[len(bulk_scan.RUN_BATCH_FIELDS), n]."""
    records: object = None
    headers: object = None
    legacy_records: object = None
    payloads: object = b""


class _BulkDump:
    """`BatchRun`s of the batches the compiled kernel reads (`bulk_scan`), with their records
    decoded by `kernels.decode_each`, and of V0/V1 messages, read by `scan_legacy` with their
    wrappers' message sets decoded by `decode_legacy_each`. It hands back to the per-batch loop, in
    order, every batch it cannot print exactly as that loop would: anything the scans stop before
    (damage, a change of magic, the end), control batches but the transaction markers the kernel
    read (`columns.MARKER`: their one record decodes like any other), payloads that do not
    decompress, and records that `decode_records` or `LegacyBatch.records` would refuse or read
    differently. Those go through the per-batch loop, which owns every problem; batches read but not
    yet printed wait for it in the chunk.

    While the runs of one chunk are printed, the next is read and decoded on the scan thread (the
    kernels and codecs run without the GIL, and printing is a kernel too): decompressing and printing
    take about as long on production data, and this machine has two cores."""

    STEP = 2 << 20
    """Segment bytes a kernel call reads (also about what the decompressed payloads may hold at once)."""
    RECORDS = 1 << 14
    """Initial record and header rows (grown as needed)."""

    def __init__(self, segment: SegmentFile, decode_records: bool):
        import numpy as np

        self.np = np
        self.segment = segment
        self.decode_records = decode_records
        self.reader = bulk_scan.Reader(segment, self.STEP, CAPACITY)
        self.decode_each = bulk_scan.records_kernel()
        self.view = self.reader.view
        self.buffers = [_Buffers(self.reader.columns, np), None]
        self.chunk = _Chunk(self.buffers[0])
        self.row = 0
        """The current chunk's first batch not yet yielded or handed back."""
        self.ahead = None
        """(position, future of its `_Chunk`): the call after the current chunk, on the scan thread."""
        self.waiting = False
        """Whether this thread waits for the chunk made ahead: the scan thread then leaves its records
        to decode here (`_finish`) and goes on to the next, rather than keep both waiting."""
        self.inflate_states = []
        """ISA-L's working memory of each thread that inflates (`bulk_scan.inflate_gzip`)."""

    @property
    def then_one_by_one(self) -> int:
        return self.reader.then_one_by_one

    def runs_from(self, position: int) -> Iterator[BatchRun]:
        """Yield runs from `position`; return where the per-batch loop is to take over."""
        segment, np = self.segment, self.np
        while True:
            segment.release_before(position)  # what lies before was printed: the consumer asked for more
            chunk = self.chunk
            row = self.row + int(np.searchsorted(chunk.batches[B_POSITION, self.row:chunk.n], position)) if chunk.n else 0
            if row >= chunk.n or chunk.batches[B_POSITION, row] != position:
                if position >= segment.end:
                    break
                chunk = self._read(position)
                if chunk.n == 0:
                    self.reader.read_anything(False)
                    return position
                row = 0
            self.reader.read_anything(True)
            stop = chunk.n
            refused = chunk.batches[B_ATTRIBUTES, row:stop] & ATTR_CODEC > max(codecs.NAMES)
            if chunk.decoded:
                refused |= chunk.buffers.first_record[row:stop] == bulk_scan.NOT_DECODED
            refused = np.flatnonzero(refused)
            if len(refused):
                stop = row + int(refused[0])
            if stop > row:
                yield self._run(chunk, row, stop)
            if stop < chunk.n:
                self.row = stop + 1  # the per-batch loop prints that one
                position = int(chunk.batches[B_POSITION, stop])
                break
            self.row = chunk.n
            position = chunk.after
            if chunk.stopped:
                break
        segment.release_before(position)  # (`SegmentFile.entries` from there takes the pages before as released)
        return position

    def settle(self) -> None:
        """Wait for the call made ahead, if any (its chunk is dropped): its thread reads the map."""
        ahead, self.ahead = self.ahead, None
        if ahead is not None:
            import concurrent.futures

            concurrent.futures.wait([ahead[1]])

    def _run(self, chunk: _Chunk, row: int, stop: int) -> BatchRun:
        if not self.decode_records:
            return BatchRun(self.segment.path, chunk.batches[:, row:stop], None, None, self.segment.buffer,
                            chunk.payloads, self.view)
        first_record = chunk.buffers.first_record
        first = int(first_record[row])
        last = int(first_record[stop - 1] + chunk.batches[B_COUNT, stop - 1])
        return BatchRun(self.segment.path, chunk.batches[:, row:stop], chunk.records[:, first:last], chunk.headers,
                        self.segment.buffer, chunk.payloads, self.view,
                        None if chunk.legacy_records is None else chunk.legacy_records[:, first:last])

    def _read(self, position: int) -> _Chunk:
        """The chunk from `position`, made ahead or now, as the current one; the next is then made
        ahead unless the kernel stopped or the segment ends there."""
        ahead = self.ahead
        if ahead is not None and ahead[0] == position:
            self.ahead = None
            self.waiting = True
            try:
                chunk = ahead[1].result()
            finally:
                self.waiting = False
        else:
            self.settle()
            chunk = self._chunk(position, self._spare())
        self.chunk, self.row = chunk, 0
        if chunk.n and not chunk.stopped and chunk.after < self.segment.end:
            self.ahead = (chunk.after, bulk_scan.scan_thread().submit(self._chunk, chunk.after, self._spare(), True))
        if chunk.n and chunk.batches is None:  # left to this thread (`waiting`)
            self._finish(chunk)
        return chunk

    def _spare(self) -> _Buffers:
        """The buffer set the current chunk does not use."""
        if self.buffers[1] is None:
            self.buffers[1] = _Buffers(self.reader.kernel.columns(self.reader.columns.shape[1]), self.np)
        return self.buffers[1] if self.chunk.buffers is self.buffers[0] else self.buffers[0]

    def _chunk(self, position: int, buffers: _Buffers, ahead: bool = False) -> _Chunk:
        """Scan from `position` into `buffers` (V2 batches, or V0/V1 messages of one magic, as the
        first entry's magic says), decompress the payloads and (`_finish`) decode the records; made
        `ahead` on the scan thread, the records are left to the caller if it already waits (on
        compressed data the scan thread's is the longer part: decompressing)."""
        magic = int(self.view[position + MAGIC_OFFSET]) if position + MAGIC_OFFSET < self.segment.end else 2
        legacy_floor = 0 if magic < 2 else None  # (dump takes a wrapper's base offset from its records)
        chunk = _Chunk(buffers, magic=magic)
        chunk.n, chunk.after, chunk.stopped = self.reader.read(position, False, legacy_floor, buffers.columns)
        if chunk.n and legacy_floor is not None:
            chunk.decompressed = self._decompress_legacy(chunk)
        elif chunk.n and self.decode_records:
            chunk.decompressed = self._decompress_v2(chunk)
        if not (ahead and self.waiting):
            self._finish(chunk)
        return chunk

    def _finish(self, chunk: _Chunk) -> None:
        """Decode the chunk's records (as `decompressed` says where they lie) and make its `batches`."""
        np = self.np
        n = chunk.n
        if not n:
            return
        columns, buffers, magic = chunk.buffers.columns, chunk.buffers, chunk.magic
        legacy_floor = 0 if magic < 2 else None
        in_payloads = np.zeros(n, dtype=np.int64)
        if legacy_floor is not None:
            in_payloads = self._decode_legacy(chunk, *chunk.decompressed)
        elif self.decode_records:
            in_payloads = self._decode(chunk, *chunk.decompressed)
        positions = columns[POSITION, :n]
        base_offset, delta = columns[BASE_OFFSET, :n], columns[LAST_OFFSET_DELTA, :n]
        base_sequence = columns[BASE_SEQUENCE, :n]
        last_offset = base_offset + delta  # wraps as Java's long does (parse_batch's java_long)
        if legacy_floor is not None:  # a wrapper's base offset is its first record's (`LegacyBatch.base_offset`)
            first = buffers.first_record[:n]
            base_offset = np.where(first >= 0, chunk.records[R_OFFSET, np.maximum(first, 0)], last_offset)
        chunk.batches = np.stack((
            positions, columns[SIZE, :n], base_offset, last_offset, columns[RECORDS_COUNT, :n],
            bulk_scan.big_endian(self.view, positions + (legacy.LOG_OVERHEAD if legacy_floor is not None else FIELD_AT["crc"]),
                        4),  # the stored CRC (the kernel checked it)
            columns[ATTRIBUTES, :n], columns[MAX_TIMESTAMP, :n], columns[PRODUCER_ID, :n],
            columns[PRODUCER_EPOCH, :n], base_sequence, bulk_scan.last_sequences(base_sequence, delta),
            columns[LEADER_EPOCH, :n], columns[BASE_TIMESTAMP, :n], in_payloads,
            np.full(n, 2 if legacy_floor is None else magic)))

    def _decompress_v2(self, chunk: _Chunk) -> tuple:
        """Decompress the payloads; returns (starts, ends, in_payloads): where each batch's records
        lie (in_payloads 1: in `payloads`, else in the segment; start -1: left to the per-batch loop).
        May keep fewer batches (`chunk.n`), to bound the payloads."""
        np, columns, n = self.np, chunk.buffers.columns, chunk.n
        attributes = columns[ATTRIBUTES, :n]
        starts = columns[POSITION, :n] + HEADER_SIZE
        ends = columns[POSITION, :n] + columns[SIZE, :n]
        # per batch: control batches but the transaction markers the kernel read (their one record decodes
        # as `decode_records` reads it, and the renderers write its control type and coordinator epoch)
        starts[((attributes & ATTR_CONTROL != 0) & (columns[MARKER, :n] == bulk_scan.NOT_A_MARKER))
               | (columns[RECORDS_COUNT, :n] < 0)] = -1
        in_payloads = np.zeros(n, dtype=np.int64)
        compressed = (starts >= 0) & (attributes & ATTR_CODEC != 0)
        codec = attributes & ATTR_CODEC
        framed = np.flatnonzero(compressed & ((codec == codecs.IDS["lz4"]) | (codec == codecs.IDS["snappy"])))
        held, went = (self._decode_frames(chunk, framed, starts, ends, in_payloads, self.segment.decompress_limit)
                      if len(framed) else (0, 0))
        if went < len(framed):  # the kernel's output is full: the next kernel call reads on from that batch
            n = chunk.n = int(framed[went])
            chunk.after, chunk.stopped = int(columns[POSITION, n]), False
        self._decompress(chunk, np.flatnonzero(compressed[:n] & (in_payloads[:n] == 0)), 2, starts, ends, in_payloads,
                         memoryview(chunk.buffers.frames_out)[:held] if held else b"")
        return starts, ends, in_payloads

    def _decode(self, chunk: _Chunk, starts, ends, in_payloads):
        """Decode every V2 batch's records (`kernels.decode_each`); returns in_payloads."""
        np, columns, n = self.np, chunk.buffers.columns, chunk.n
        payload_view = np.frombuffer(chunk.payloads, dtype=np.uint8)
        records = np.empty((len(bulk_scan.RECORD_COLUMNS), spread(self.RECORDS)), dtype=np.int64)
        headers = np.empty((len(bulk_scan.HEADER_COLUMNS), spread(self.RECORDS)), dtype=np.int64)
        chunk.decoded = True
        row = records_used = headers_used = 0
        while True:
            row, records_used, headers_used = self.decode_each(
                self.view, payload_view, columns, row, n, starts, ends, in_payloads, chunk.buffers.first_record,
                records, records_used, headers, headers_used)
            if row == n:
                chunk.records, chunk.headers = records, headers
                return in_payloads[:n]
            needed = int(columns[RECORDS_COUNT, row])  # no room for this batch's records or headers: grow
            if records_used + needed > records.shape[1]:
                records = self._grown(records, records_used, records_used + needed)
            else:
                headers = self._grown(headers, headers_used, 2 * headers.shape[1])

    def _decode_frames(self, chunk: _Chunk, rows, starts, ends, in_payloads, limit: int) -> tuple[int, int]:
        """These lz4 and snappy batches' payloads decoded by `kernels.frames_each` into the buffers'
        `frames_out`, and their `starts`, `ends` and `in_payloads` set; those it refuses are left as
        they were. Returns (bytes held, batches it went through: fewer than all when the output is full)."""
        np, buffers = self.np, chunk.buffers
        if buffers.frames_out is None:
            buffers.frames_out = np.empty(4 * self.STEP, dtype=np.uint8)
        bounds, decoded = np.empty(len(rows) + 1, dtype=np.int64), np.empty(len(rows), dtype=np.int64)
        codec_ids = buffers.columns[ATTRIBUTES, rows] & ATTR_CODEC
        went = self.reader.kernel.frames_each(self.view, codec_ids, starts[rows], ends[rows], limit, buffers.frames_out,
                                              bounds, decoded)
        kept = rows[:went][decoded[:went] == 1]
        starts[kept], ends[kept] = bounds[:went][decoded[:went] == 1], bounds[1:went + 1][decoded[:went] == 1]
        in_payloads[kept] = 1
        return int(bounds[went]), went

    def _decompress_legacy(self, chunk: _Chunk) -> tuple:
        """`_decompress_v2` for V0/V1 messages: an uncompressed message is its own record, a
        wrapper's value decompresses into a message set of records."""
        np, columns, view, n, magic = self.np, chunk.buffers.columns, self.view, chunk.n, chunk.magic
        positions, codec = columns[POSITION, :n], columns[ATTRIBUTES, :n] & ATTR_CODEC
        starts, ends = positions.copy(), positions + columns[SIZE, :n]
        wrappers = np.flatnonzero(codec != 0)
        starts[wrappers], ends[wrappers] = bulk_scan.wrapper_values(view, positions[wrappers], codec[wrappers], magic)
        in_payloads = np.zeros(n, dtype=np.int64)
        self._decompress(chunk, wrappers[starts[wrappers] >= 0], magic, starts, ends, in_payloads)
        return starts, ends, in_payloads

    def _decode_legacy(self, chunk: _Chunk, starts, ends, in_payloads):
        """`_decode` for V0/V1 messages (`kernels.decode_legacy_each`)."""
        np, columns, view, n = self.np, chunk.buffers.columns, self.view, chunk.n
        payload_view = np.frombuffer(chunk.payloads, dtype=np.uint8)
        records = np.empty((len(bulk_scan.RECORD_COLUMNS), spread(self.RECORDS)), dtype=np.int64)
        legacy_records = np.empty((len(bulk_scan.LEGACY_RECORD_COLUMNS), spread(self.RECORDS)), dtype=np.int64)
        chunk.decoded = True
        row = used = 0
        while True:
            row, used = self.reader.kernel.decode_legacy_each(view, payload_view, columns, row, n, starts, ends,
                                                              in_payloads, chunk.buffers.first_record, records, used,
                                                              legacy_records)
            if row == n:
                chunk.records, chunk.legacy_records = records, legacy_records
                return in_payloads[:n]
            needed = used + int(ends[row] - starts[row]) // bulk_scan.SMALLEST_LEGACY_ENTRY + 1  # at most: grow
            records = self._grown(records, used, needed)
            legacy_records = self._grown(legacy_records, used, needed)

    def _decompress(self, chunk: _Chunk, rows, magic: int, starts, ends, in_payloads, decoded=b"") -> None:
        """Decompress the payloads segment[starts[row]:ends[row]] of `rows` (their codec in the
        attributes) into the chunk's `payloads`, end to end after those already `decoded` (by the
        kernel, in a buffer the call after next reuses: copied once, into what the chunk keeps), and
        point `starts` and `ends` there; a payload that does not decompress is left to
        the per-batch loop (start -1), which reports why. Keeps fewer batches than read (`chunk.n`)
        once the payloads hold enough for one call. gzip payloads as producers write them are
        inflated by `kernels.gzip_each` (`_inflate_gzip`), the others one by one."""
        columns, segment = chunk.buffers.columns, self.segment
        budget = 4 * self.STEP
        payloads, held = decoded, len(decoded)
        if len(rows) and bulk_scan.gzip_inflater():
            payloads, held, rows = self._inflate_gzip(chunk, rows, starts, ends, in_payloads, decoded, budget)
        rows = rows.tolist()
        if not rows:
            chunk.payloads = bytes(payloads) if payloads is decoded else payloads
            return
        attributes = columns[ATTRIBUTES, rows].tolist()
        ranges = [(codec & ATTR_CODEC, int(starts[row]), int(ends[row])) for codec, row in zip(attributes, rows)]
        results = codecs.decompress_ranges(segment.buffer, ranges, magic=magic, limit=segment.decompress_limit,
                                           budget=budget - held)
        chunk.payloads, spans = codecs.laid_end_to_end(results, payloads[:held])
        for row, span in zip(rows, spans):
            if span is None:
                starts[row] = -1
            else:
                (starts[row], ends[row]), in_payloads[row] = span, 1
        if len(results) < len(rows):  # the payloads hold enough for one call: the next reads on after the last
            row = rows[len(results) - 1]
            chunk.n = row + 1
            chunk.after, chunk.stopped = int(columns[POSITION, row] + columns[SIZE, row]), False

    def _inflate_gzip(self, chunk: _Chunk, rows, starts, ends, in_payloads, decoded, budget: int):
        """`_decompress`'s gzip payloads, those `bulk_scan.inflate_gzip` inflates, in one buffer after
        `decoded`; the chunk ends before the first that does not fit in `budget`. Returns (the
        buffer, the bytes it holds, the rows left to decompress one by one)."""
        np, columns = self.np, chunk.buffers.columns
        gzip = rows[columns[ATTRIBUTES, rows] & ATTR_CODEC == codecs.IDS["gzip"]]
        if not len(gzip):
            return decoded, len(decoded), rows
        out, at, inflated, taken = bulk_scan.inflate_gzip(self.view, starts[gzip], ends[gzip],
                                                          self.segment.decompress_limit, budget - len(decoded),
                                                          self.inflate_states, before=len(decoded))
        if taken < len(gzip):  # the next call reads on from the first that does not fit
            chunk.n = cut = int(gzip[taken])
            chunk.after, chunk.stopped = int(columns[POSITION, cut]), False
            gzip, rows = gzip[:taken], rows[rows < cut]
        out[:len(decoded)] = np.frombuffer(decoded, dtype=np.uint8)
        done = inflated == 1
        starts[gzip[done]], ends[gzip[done]], in_payloads[gzip[done]] = at[:-1][done], at[1:][done], 1
        return out, len(out), rows[~np.isin(rows, gzip[done])]

    def _grown(self, array, used: int, at_least: int):
        grown = self.np.empty((array.shape[0], spread(max(at_least, 2 * array.shape[1]))), dtype=array.dtype)
        grown[:, :used] = array[:, :used]
        return grown


def _payload_decoder(options: DumpOptions, topic: str | None) -> PayloadDecoder | None:
    if options.decoder is None:
        return None
    if options.decoder == "auto":
        return decoder_for_topic(topic) if topic else None
    return decoders()[options.decoder]


def _decode(decoder: PayloadDecoder, record: Record) -> DecodedPayload:
    try:
        return decoder.decode(record.key, record.value, offset=record.offset)
    except PayloadError as exc:
        if exc.kafka_throws:
            return DecodedPayload(None, None, None, None, warning=str(exc), kafka_throws=exc.kafka_throws)
        text = f"Error at offset {record.offset}, skipping. {exc.kafka_message or exc}"
        return DecodedPayload(None, None, text, None, warning=str(exc))


def _unread_decoded(decoder: PayloadDecoder, records: list[Record]) -> list[DecodedPayload]:
    """The payloads kafka-dump-log's parser gives `records_unread`, up to the first whose value
    its parser does not catch the failure of (the tool throws there)."""
    out = []
    for record in records:
        if not isinstance(record, UnreadRecord):
            out.append(_decode(decoder, record))
            continue
        message = legacy.value_overrun(record)
        caught = (None if message is None or decoder.value_unreadable is None
                  else decoder.value_unreadable(record.key_size >= 0, message, record.offset))
        if caught is None:
            break
        out.append(caught)
    return out


def _decoder_failures(path: str, item: BatchItem) -> Iterator[Problem]:
    """A problem for each record kafka-dump-log's decoder throws on (it stops there, we go on)."""
    records = item.records if item.records is not None else item.records_before_error
    for record, decoded in zip(records or (), item.decoded or ()):
        if decoded is not None and decoded.kafka_throws:
            yield Problem(CorruptDataError(f"offset {record.offset}: {decoded.kafka_throws}", path=path,
                                           position=record.position if record.position is not None
                                           else item.batch.position))

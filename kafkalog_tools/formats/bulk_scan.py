"""Runs of clean V2 record batches (and, for a shallow verify, of V0/V1 messages, wrappers not
opened), read in bulk by compiled code into columns.

On small batches the per-batch path (`SegmentFile.entries` + `parse_batch`) costs ~6 µs of
interpreter work per batch, whatever the batch holds; a C reader needs ~1.4 µs. Here one loop,
compiled (bulk_kernel.py, bulk_native.py), walks the batches of a byte range: it reads each 61-byte header, checks its
CRC-32C and, for a deep check, walks the records of an uncompressed batch as `skim_records` does.
The header fields land in one int64 column each (`COLUMNS`).

It only ever vouches for batches. It stops before the first entry it cannot vouch for (not magic
2, a size out of bounds, a CRC mismatch, the end of the range), and marks a batch whose records it
did not or could not walk. The per-batch path takes those over and owns every finding, so the two
paths cannot disagree on what is wrong: this one only says less, sooner.

The kernels are optional: without them (no numba to build them, no LLVM to load them, or
KAFKALOG_BULK=never) callers take the per-batch path. `bulk_native` loads them (~0.1 s, mostly
importing numpy), so `auto` uses them only where that pays. The field offsets come from `BATCH_HEADER`, the
schema in record_batch.py.
"""
from __future__ import annotations

import functools
import mmap
import os
import sys
import warnings
from typing import Iterator

from ..schema import struct_fields
from . import legacy
from .record_batch import BATCH_HEADER, HEADER_SIZE, LOG_OVERHEAD

MODE_VARIABLE = "KAFKALOG_BULK"
"""`auto` (default): the compiled scan where it pays (see `wanted`); `always`; `never`."""
CAPACITY = 1 << 14
"""Batches per call; the caller also bounds each call's byte range."""

COLUMNS = ("position", "size", "base_offset", "last_offset_delta", "partition_leader_epoch", "attributes",
           "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "records_count",
           "checked")
"""`checked` (deep scans): 1 when the records were walked and agree with the header (count, offset
deltas, max timestamp); 0 when the per-batch path must read them (compressed, control, or odd)."""
(POSITION, SIZE, BASE_OFFSET, LAST_OFFSET_DELTA, LEADER_EPOCH, ATTRIBUTES, BASE_TIMESTAMP, MAX_TIMESTAMP,
 PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE, RECORDS_COUNT, CHECKED) = range(len(COLUMNS))


def _field_offsets() -> dict[str, int]:
    """Where each header field starts, from the schema."""
    offsets, at = {}, 0
    for name, field in struct_fields(BATCH_HEADER):
        offsets[name] = at
        at += field.sizeof()
    return offsets


FIELD_AT = _field_offsets()
_MAGIC = FIELD_AT["magic"]


def mode() -> str:
    value = os.environ.get(MODE_VARIABLE, "auto").strip().lower()
    return value if value in ("auto", "always", "never") else "auto"


CHECK_COSTS = (6e-6, 1.5e-6)
"""Seconds the per-batch path of verify and rebuild-index spends per batch, and per record when it
reads them (bench/RESULTS.md, one-record and lz4 batches)."""
DUMP_COSTS = (12e-6, 4e-6)
"""The same for dump JSON Lines, which builds a line per batch and per record."""
LOAD_SECONDS = 0.1
"""Importing numpy and mapping the cached kernels: ~0.09 s and ~2 ms here."""
_avoided = 0.0
"""Estimated per-batch seconds `auto` chose so far in this process: once that would have paid for
the load, the kernel is loaded (a ski-rental rule: never worse than twice the better choice)."""


def wanted(buffer, end: int, records: bool, costs: tuple[float, float] = CHECK_COSTS, legacy: bool = False) -> bool:
    """Whether to scan this segment's bytes in bulk. `auto` estimates the per-batch path's cost
    (`costs`: per batch, per record when `records` are read) from the first batch's size and
    record count, and loads the kernel once that would have paid for it. A segment that starts
    with a legacy message only pays where the caller reads those in bulk too, as deep as `records`
    says (`legacy`); its first message counts as one record (a wrapper holds at least one)."""
    global _avoided
    chosen = mode()
    if chosen == "never" or end < HEADER_SIZE:
        return False
    if chosen == "auto":
        size = LOG_OVERHEAD + int.from_bytes(buffer[FIELD_AT["batch_length"]:FIELD_AT["batch_length"] + 4], "big")
        if buffer[FIELD_AT["magic"]] == 2:
            count = int.from_bytes(buffer[FIELD_AT["records_count"]:FIELD_AT["records_count"] + 4], "big", signed=True)
        elif buffer[FIELD_AT["magic"]] < 2 and legacy:
            count = 1
        else:
            return False
        batches = end / max(size, HEADER_SIZE)
        per_batch, per_record = costs
        seconds = batches * (per_batch + (max(count, 0) * per_record if records else 0.0))
        if kernel.cache_info().currsize == 0 and _avoided + seconds < LOAD_SECONDS:
            _avoided += seconds
            return False
    return kernel() is not None


@functools.cache
def kernel():
    """The compiled kernels (`bulk_native.NativeKernel`), or None where they cannot be had now: no
    numba to build them and none cached, no LLVM, no memory for it, or (unless KAFKALOG_BULK=always
    asks for them, built now if need be) none built yet: this run then reads batch by batch while a
    process of its own builds them in the background, and says so once. The per-batch path then
    does all the work."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba's, while it builds them
            from . import bulk_native

            if mode() == "always":
                return bulk_native.load()
            loaded = bulk_native.load(build=False)
            if loaded is None:
                _tell_building(bulk_native.build_in_background(), bulk_native)
            return loaded
    except Exception:  # noqa: BLE001 - whatever stops the kernels only costs speed
        return None


def _tell_building(outcome: str, bulk_native) -> None:
    if outcome == bulk_native.CANNOT:
        return
    doing = ("started building them in the background, at the lowest priority (~20 s of CPU, once)"
             if outcome == bulk_native.STARTED else "they are being built in the background")
    print(f"kafkalog: the compiled kernels are not built yet for this installation: this run reads batch by batch; "
          f"{doing}. `kafkalog build-kernels` builds them now.", file=sys.stderr, flush=True)


class Reader:
    """A segment read by the kernel a byte range at a time: what verify, rebuild-index and dump
    share. The caller takes the batches of each call, then lets the per-batch path take over where
    the kernel stopped; `then_one_by_one` says for how many entries before it tries again."""

    STEP = 8 << 20
    """Bytes per call, unless the caller says: the pages behind are then released, as
    `SegmentFile.entries` does."""

    def __init__(self, segment, step: int | None = None):
        self.segment = segment
        self.step = step or self.STEP
        self.kernel = kernel()
        self.view = self.kernel.view(segment.buffer)
        self.columns = self.kernel.columns()
        self.prefetch = self.kernel.prefetch(segment.buffer)
        self.then_one_by_one = 1
        """Doubles while the kernel reads nothing at all (a legacy segment), back to 1 once it does."""
        self.ahead = None
        """The call `runs` made on the scan thread, while its caller works on the one before."""
        self.other_columns = None
        """`runs`' second buffer, made on first use."""

    def read(self, position: int, deep: bool, legacy_floor: int | None = None) -> tuple[int, int, bool]:
        """One call from `position`: (batches now in `columns`, where the next entry starts, whether
        the kernel stopped before an entry it cannot vouch for rather than at the range's end).
        With a `legacy_floor`, V0 or V1 messages instead, wrappers not opened (`scan_legacy`)."""
        self.settle()
        return self._read(position, deep, legacy_floor, self.columns)

    def _read(self, position: int, deep: bool, legacy_floor: int | None, columns) -> tuple[int, int, bool]:
        end = self.segment.end
        limit = min(end, position + self.step)
        if self.prefetch is not None:
            self.prefetch.ahead(limit, min(end, limit + self.step))
        if legacy_floor is None:
            n, after = self.kernel.scan(self.view, position, limit, end, deep, columns)
        else:
            n, after = self.kernel.scan_legacy(self.view, position, limit, end, legacy_floor, columns)
        return n, after, after < limit and n < columns.shape[1]

    def runs(self, position: int, deep: bool) -> Iterator[tuple[object, int, int, bool]]:
        """`read` of V2 batches from `position` call after call, each yielded as (the columns it
        filled, batches, where the next entry starts, whether it stopped), until a call stops, the
        segment ends or the next entry is not magic 2. The next call runs on a thread of its own
        while the caller works on the columns yielded (the kernel runs without the GIL): on small
        batches the caller's Python costs about as much as the scan. Two buffers take turns, so
        yielded columns hold until the caller asks for the next."""
        self.settle()
        if self.other_columns is None:
            self.other_columns = self.kernel.columns(self.columns.shape[1])
        buffers = (self.columns, self.other_columns)
        end, buffer = self.segment.end, self.segment.buffer
        turn = 0
        self.ahead = _scan_thread().submit(self._read, position, deep, None, buffers[turn])
        try:
            while self.ahead is not None:
                n, after, stopped = self.ahead.result()
                columns = buffers[turn]
                self.ahead = None
                if not stopped and after + _MAGIC < end and buffer[after + _MAGIC] >= 2:
                    turn ^= 1
                    self.ahead = _scan_thread().submit(self._read, after, deep, None, buffers[turn])
                yield columns, n, after, stopped
        finally:
            self.settle()

    def settle(self) -> None:
        """Wait for the call `runs` made ahead, if any: nothing else may touch the buffers meanwhile."""
        if self.ahead is not None:
            import concurrent.futures

            concurrent.futures.wait([self.ahead])
            self.ahead = None

    def release_before(self, position: int) -> None:
        """As `SegmentFile.release_before`, on the prefetch thread where there is one."""
        segment = self.segment
        behind = position - position % mmap.PAGESIZE
        if behind > segment.released and self.prefetch is not None and self.prefetch.release(segment.released, behind):
            segment.released = behind
        else:
            segment.release_before(position)

    def read_anything(self, any_read: bool) -> None:
        """After a pass over the kernel: whether it read any batch."""
        self.then_one_by_one = 1 if any_read else min(self.then_one_by_one * 2, 4096)


@functools.cache
def _scan_thread():
    import concurrent.futures

    return concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kafkalog-scan")


def big_endian(view, at, width: int, signed: bool = False):
    """The big-endian integers of `width` bytes at each of the positions `at` of a uint8 array."""
    value = view[at].astype("int64")
    for i in range(1, width):
        value = (value << 8) | view[at + i]
    if signed:
        value -= (value >> (8 * width - 1)) << (8 * width)
    return value


def wrapper_values(view, positions, codec_ids, magic: int):
    """(starts, ends) of the values of V0/V1 wrappers at `positions` of `magic` (`scan_legacy`
    checked that key and value fit): their compressed message sets. Start -1 where
    `LegacyBatch.records` refuses the wrapper without decompressing it (a null value, a codec id
    above lz4's)."""
    import numpy as np

    key_at = positions + legacy.ENTRY_PREFIX.size + (legacy.TIMESTAMP.size if magic else 0)
    value_at = key_at + 4 + np.maximum(big_endian(view, key_at, 4, signed=True), 0)
    value_size = big_endian(view, value_at, 4, signed=True)
    starts, ends = value_at + 4, value_at + 4 + value_size
    starts[(value_size < 0) | (codec_ids > legacy.LAST_LEGACY_CODEC)] = -1
    return starts, ends


def last_sequences(base_sequence, delta):
    """parse_batch's last sequence (`batch.last_sequence`) on numpy int64 columns: -1 only for a
    base sequence of -1, else incremented with Java's int wrapping."""
    import numpy as np

    def java_int(values):
        return (values + (1 << 31)) % (1 << 32) - (1 << 31)

    wraps = base_sequence > java_int(0x7FFFFFFF - delta)
    return np.where(base_sequence == -1, -1, java_int(np.where(wraps, delta - (0x7FFFFFFF - base_sequence) - 1,
                                                                base_sequence + delta)))


# recovery_index's state (rebuild-index), an int64 array carried from call to call
(VALID_BYTES, LAST_INDEXED_POSITION, MAX_TIMESTAMP_SO_FAR, OFFSET_OF_MAX_TIMESTAMP, INDEX_INTERVAL, OFFSET_ENTRIES,
 TIME_ENTRIES, LAST_INDEXED_OFFSET, LAST_TIME_TIMESTAMP, LAST_TIME_OFFSET) = range(10)
RECOVERY_STATE = 10


# ---------------------------------------------------------------------------------------------
# dump: records decoded into columns (bulk_kernel.decode_each)
# ---------------------------------------------------------------------------------------------

RECORD_COLUMNS = ("offset", "timestamp", "sequence", "size", "key_start", "key_length", "value_start",
                  "value_length", "first_header", "header_count")
"""One record a column, as `decode_records` reads it: lengths are -1 for a null key or value; starts
index the bytes the batch's records were decoded from; headers are rows of `HEADER_COLUMNS`."""
(R_OFFSET, R_TIMESTAMP, R_SEQUENCE, R_SIZE, R_KEY_START, R_KEY_LENGTH, R_VALUE_START, R_VALUE_LENGTH,
 R_FIRST_HEADER, R_HEADER_COUNT) = range(len(RECORD_COLUMNS))
HEADER_COLUMNS = ("key_start", "key_length", "value_start", "value_length")
(H_KEY_START, H_KEY_LENGTH, H_VALUE_START, H_VALUE_LENGTH) = range(len(HEADER_COLUMNS))
NOT_DECODED = -1
"""`decode_each`'s first record row for a batch left to `decode_records` (the per-batch path)."""


LEGACY_RECORD_COLUMNS = ("crc", "attributes")
"""What a V0/V1 record line adds (its `legacy` object), one record a column beside `RECORD_COLUMNS`:
the message's stored CRC-32 (`decode_legacy_each` keeps only messages whose CRC matches) and its
attributes byte, signed."""
(L_CRC, L_ATTRIBUTES) = range(len(LEGACY_RECORD_COLUMNS))
SMALLEST_LEGACY_ENTRY = legacy.LOG_OVERHEAD + legacy.RECORD_OVERHEAD_V0
"""Bytes of the smallest log entry of a message set: a wrapper's holds at most its size / this."""


RUN_BATCH_FIELDS = ("position", "size", "base_offset", "last_offset", "count", "crc", "attributes", "max_timestamp",
                    "producer_id", "producer_epoch", "base_sequence", "last_sequence", "partition_leader_epoch",
                    "base_timestamp", "in_payloads", "magic")
"""The rows of `dump.BatchRun.batches`: the fields of each batch's `Batch` (a V2 batch, or a V0/V1
message, with a valid CRC; `attributes` is the low byte, as `Batch.attributes`, for a legacy message
only its codec and timestamp type bits), and whether its records lie in `payloads`. A legacy
message's `count` is its records' (the line says null, as `Batch.count`)."""
(B_POSITION, B_SIZE, B_BASE_OFFSET, B_LAST_OFFSET, B_COUNT, B_CRC, B_ATTRIBUTES, B_MAX_TIMESTAMP, B_PRODUCER_ID,
 B_PRODUCER_EPOCH, B_BASE_SEQUENCE, B_LAST_SEQUENCE, B_LEADER_EPOCH, B_BASE_TIMESTAMP, B_IN_PAYLOADS,
 B_MAGIC) = range(len(RUN_BATCH_FIELDS))


# ---------------------------------------------------------------------------------------------
# dump: JSON Lines written from those columns (bulk_kernel.render_each)
# ---------------------------------------------------------------------------------------------

TEXT_PIECES = (("batch", 20), ("record", 13), ("legacy", 17), ("codec", 8), ("timestamp_type", 3), ("header", 4),
               ("true", 1), ("false", 1), ("null", 1), ("utf8", 1), ("base64", 1))
"""The constant texts `render_each` writes lines with, in this order, each as so many pieces: the
UTF-8 of a file's batch, record and V0/V1 record line templates cut around their 19, 12 and 16
fields, the JSON of each codec's name (by id), of CreateTime, LogAppendTime and NoTimestampType,
a header object cut around its 3 fields, and true, false, null, "utf8" and "base64"."""
(T_BATCH, T_RECORD, T_LEGACY, T_CODEC, T_TIMESTAMP_TYPE, T_HEADER, T_TRUE, T_FALSE, T_NULL, T_UTF8,
 T_BASE64) = (sum(count for _, count in TEXT_PIECES[:i]) for i in range(len(TEXT_PIECES)))
TEXTS = sum(count for _, count in TEXT_PIECES)
(RENDER_BATCH, RENDER_RECORD, RENDER_WRITTEN, RENDER_REFUSED) = range(4)
"""`render_each`'s state: the next batch and record rows (in and out), the bytes it wrote, and 1
when it stopped before a batch it leaves to Python (a header key that is not UTF-8)."""
RENDER_STATE = 4

# ---------------------------------------------------------------------------------------------
# dump --format text: kafka-dump-log.sh's lines written from those columns (render_dumplog_each)
# ---------------------------------------------------------------------------------------------

DUMPLOG_PIECES = (("batch", 19), ("record", 8), ("legacy", 4), ("key", 2), ("payload", 1), ("codec", 8),
                  ("timestamp_type", 3), ("true", 1), ("false", 1), ("optional", 3))
"""The constant texts `render_dumplog_each` writes lines with (`dumplog_text._texts`), in this
order: a V2 batch line cut around its 18 fields, a record line's metadata cut around its 7, a V0/V1
batch line's start and a V0/V1 record's texts after its value size (isValid, crc, the stray `}`),
the key's lead-in after metadata and without it, the payload's, each codec's name (by id),
CreateTime, LogAppendTime and NoTimestampType, true, false, and OptionalLong's empty, opening and
closing texts. Its state is `render_each`'s (RENDER_*)."""
(D_BATCH, D_RECORD, D_LEGACY, D_KEY, D_PAYLOAD, D_CODEC, D_TIMESTAMP_TYPE, D_TRUE, D_FALSE,
 D_OPTIONAL) = (sum(count for _, count in DUMPLOG_PIECES[:i]) for i in range(len(DUMPLOG_PIECES)))
DUMPLOG_TEXTS = sum(count for _, count in DUMPLOG_PIECES)


def records_kernel():
    """`bulk_kernel.decode_each`, or None without the kernels."""
    loaded = kernel()
    return None if loaded is None else loaded.decode_each

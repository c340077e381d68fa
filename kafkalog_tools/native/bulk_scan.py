"""Runs of clean V2 record batches (and, for a shallow verify, of V0/V1 messages, wrappers not
opened), read in bulk by compiled code into columns.

On small batches the per-batch path (`SegmentFile.entries` + `parse_batch`) costs ~6 µs of
interpreter work per batch, whatever the batch holds; a C reader needs ~1.4 µs. Here one loop,
compiled (kernels.py, loaded by loader.py), walks the batches of a byte range: it reads each 61-byte header, checks its
CRC-32C and, for a deep check, walks the records of an uncompressed batch as `skim_records` does.
The header fields land in one int64 column each (`COLUMNS`).

It only ever vouches for batches. It stops before the first entry it cannot vouch for (not magic
2, a size out of bounds, a CRC mismatch, the end of the range), and marks a batch whose records it
did not or could not walk. The per-batch path takes those over and owns every finding, so the two
paths cannot disagree on what is wrong: this one only says less, sooner.

The kernels are optional: without them (no numba to build them, no LLVM to load them, or
KAFKALOG_BULK=never) callers take the per-batch path. `loader` loads them (~0.1 s, mostly
importing numpy), so `auto` uses them only where that pays. The columns' layout is columns.py's,
handed on from here.
"""
from __future__ import annotations

import functools
import mmap
import os
import sys
import warnings
from typing import Iterator

from ..formats import legacy
from ..formats.batch import ControlRecord, Record
from ..formats.control import CONTROL_TYPES
from ..formats.record_batch import HEADER_SIZE, LOG_OVERHEAD
from ..spares import Spares
from .columns import *  # noqa: F403 - the layout is part of the scan's interface: callers index columns through it
from .columns import FIELD_AT, spread

MODE_VARIABLE = "KAFKALOG_BULK"
"""`auto` (default): the compiled scan where it pays (see `wanted`); `always`; `never`."""
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
    """The compiled kernels (`loader.NativeKernel`), or None where they cannot be had now: no
    numba to build them and none cached, no LLVM, no memory for it, or (unless KAFKALOG_BULK=always
    asks for them, built now if need be) none built yet: this run then reads batch by batch while a
    process of its own builds them in the background, and says so once. The per-batch path then
    does all the work."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba's, while it builds them
            from . import cache

            code = cache.code(build=mode() == "always")
            if code is None:
                _tell_building(cache.build_in_background())
                return None
            from . import loader  # (numpy: not imported by a run that finds nothing cached)

            return loader.from_code(code)
    except Exception:  # noqa: BLE001 - whatever stops the kernels only costs speed
        return None


def loaded_kernel():
    """`kernel()` where this process has asked for it already, else None: for work that pays for
    the kernels only where they are loaded anyway."""
    return kernel() if kernel.cache_info().currsize else None


TELL_BUILDING = True
"""Whether this process says so when the kernels are being built (a worker process leaves it to the
process the user started)."""


SCANNING_PROCESSES = 1
"""How many of our processes scan segments at once (verify's worker pool sets it while it runs). The
pages of the next byte range are mapped ahead on a thread of their own (`loader.Prefetch`), and
`Reader.runs` scans the next range on the scan thread, only where a CPU is left for those threads:
with a process on every CPU they only add switches, TLB shootdowns and GIL handoffs (a 2 GiB log
dir of one-record batches on 2 CPUs, interleaved: 0.58-0.63 -> 0.55-0.57 s without the prefetch;
the `prod` log dir's `verify --shallow` 1.10 -> 1.04 s scanning in line)."""


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, as `taskset` or a container sets it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _tell_building(outcome: str) -> None:
    from . import cache

    if outcome == cache.CANNOT or not TELL_BUILDING:
        return
    doing = ("started building them in the background, at the lowest priority (~2 min of CPU, once)"
             if outcome == cache.STARTED else "they are being built in the background")
    print(f"kafkalog: the compiled kernels are not built yet for this installation: this run reads batch by batch; "
          f"{doing}. `kafkalog build-kernels` builds them now.", file=sys.stderr, flush=True)


class Reader:
    """A segment read by the kernel a byte range at a time: what verify, rebuild-index and dump
    share. The caller takes the batches of each call, then lets the per-batch path take over where
    the kernel stopped; `then_one_by_one` says for how many entries before it tries again."""

    STEP = 8 << 20
    """Bytes per call, unless the caller says: the pages behind are then released, as
    `SegmentFile.entries` does."""
    ROWS = 1 << 16
    """Batches per call at most, unless the caller says. Each call costs its caller a fixed ~1 ms
    (its Python, and passing the GIL to and from the scan thread): at 16,384 a call of a KRaft log's
    ~80-byte batches stopped after 1.3 MiB (205 calls for 256 MiB; verify --shallow's CPU 345 ->
    ~320 ms at 32,768). 65,536 (52 calls, 8 MB more) gained nothing while the columns' rows shared
    a cache set (`columns.spread`); since, the KRaft log dir's `verify --shallow` 1.21 -> 1.11 s."""

    CHUNK = 2048
    """Batches `outlined` has the kernel scan, and fold where it can, at a time: their columns
    (15 x 16 KiB) stay in the CPU's cache between the scan and the passes that fold them. (Tests
    make it small, so that stretches end and start often.)"""

    def __init__(self, segment, step: int | None = None, rows: int | None = None):
        self.segment = segment
        self.step = step or self.STEP
        self.kernel = kernel()
        self.view = self.kernel.view(segment.buffer)
        self.columns = self._spare_or_new_columns(rows or self.ROWS)
        self.prefetch = self.kernel.prefetch(segment.buffer, SCANNING_PROCESSES)
        self.on_thread = usable_cpus() > SCANNING_PROCESSES
        """Whether `runs` scans the next range on the scan thread (see SCANNING_PROCESSES)."""
        self.then_one_by_one = 1
        """Doubles while the kernel reads nothing at all (a legacy segment), back to 1 once it does."""
        self.ahead = None
        """The call `runs` made on the scan thread, while its caller works on the one before."""
        self.other_columns = None
        """`runs`' second buffer, made on first use."""
        self.until = sys.maxsize
        """Batches that start here or later are left unread (a walk that pauses there)."""
        self.signing = None
        """(table, state): deep scans of V2 batches also take their records' version signatures
        (`kernels.scan_signing`), where the caller wants them."""

    def read(self, position: int, deep: bool, legacy_floor: int | None = None,
             columns=None) -> tuple[int, int, bool]:
        """One call from `position`: (batches now in `columns` (by default the reader's), where the
        next entry starts, whether the kernel stopped before an entry it cannot vouch for rather than
        at the range's end). With a `legacy_floor`, V0 or V1 messages instead, wrappers not opened
        (`scan_legacy`)."""
        self.settle()
        return self._read(position, deep, legacy_floor, self.columns if columns is None else columns)

    def _read(self, position: int, deep: bool, legacy_floor: int | None, columns) -> tuple[int, int, bool]:
        end = self.segment.end
        limit = min(end, position + self.step, self.until)
        if self.prefetch is not None:
            self.prefetch.ahead(limit, min(end, limit + self.step))
        if legacy_floor is None:
            n, after = self.kernel.scan(self.view, position, limit, end, deep, columns, self.signing if deep else None)
        else:
            n, after = self.kernel.scan_legacy(self.view, position, limit, end, legacy_floor, columns)
        return n, after, after < limit and n < columns.shape[1]

    def outlined(self, position: int, deep: bool, lowest: int, highest: int, queries, largest: int, block,
                 at: int) -> tuple[int, list[int]]:
        """One call of `kernels.scan_outlined` from `position` (see `NativeKernel.scan_outlined`):
        the rows it left in the reader's columns, and what it says of the call."""
        self.settle()
        end = self.segment.end
        limit = min(end, position + self.step, self.until)
        if self.prefetch is not None:
            self.prefetch.ahead(limit, min(end, limit + self.step))
        return self.kernel.scan_outlined(self.view, position, limit, end, deep, lowest, highest, self.columns, queries,
                                         largest, block, at, self.CHUNK, self.signing if deep else None)

    def rescan(self, start: int, stop: int, rows: int, deep: bool):
        """The columns of the `rows` batches from `start` to `stop` read again, as `scan` read
        them the first time (a stretch folded by `outlined`, for a consumer that wants its rows)."""
        columns = self.kernel.columns(rows)
        n, after = self.kernel.scan(self.view, start, stop, self.segment.end, deep, columns)
        if (n, after) != (rows, stop):
            raise RuntimeError(f"bulk kernel: {n} batches to {after} read again where {rows} to {stop} were read")
        return columns[:, :n]

    def runs(self, position: int, deep: bool) -> Iterator[tuple[object, int, int, bool]]:
        """`read` of V2 batches from `position` call after call, each yielded as (the columns it
        filled, batches, where the next entry starts, whether it stopped), until a call stops, the
        segment ends or the next entry is not magic 2. The next call runs on a thread of its own
        while the caller works on the columns yielded (the kernel runs without the GIL): on small
        batches the caller's Python costs about as much as the scan. Two buffers take turns, so
        yielded columns hold until the caller asks for the next."""
        self.settle()
        if self.other_columns is None:
            self.other_columns = self._spare_or_new_columns(self.columns.shape[1])
        buffers = (self.columns, self.other_columns)
        end, buffer = self.segment.end, self.segment.buffer
        turn = 0
        self.ahead = self._ahead(position, deep, buffers[turn])
        try:
            while self.ahead is not None:
                n, after, stopped = self.ahead.result()
                columns = buffers[turn]
                self.ahead = None
                if not stopped and after + _MAGIC < end and after < self.until and buffer[after + _MAGIC] >= 2:
                    turn ^= 1
                    self.ahead = self._ahead(after, deep, buffers[turn])
                yield columns, n, after, stopped
        finally:
            self.settle()

    def _ahead(self, position: int, deep: bool, columns):
        """`_read` into `columns` on the scan thread, or here and now (`on_thread`): a future either way."""
        import concurrent.futures

        if self.on_thread:
            return scan_thread().submit(self._read, position, deep, None, columns)
        done = concurrent.futures.Future()
        try:
            done.set_result(self._read(position, deep, None, columns))
        except Exception as exc:  # noqa: BLE001 - raised where the thread's would be, at result()
            done.set_exception(exc)
        return done

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

    def close(self) -> None:
        """Done reading: the column buffers go to the next reader made in this process, unless
        something still holds them or a view of them (this reader reads no more)."""
        self.settle()
        columns, other = self.columns, self.other_columns
        self.columns = self.other_columns = None
        _SPARE_COLUMNS.give(columns)
        _SPARE_COLUMNS.give(other)

    def _spare_or_new_columns(self, rows: int):
        width = spread(rows)
        spare = _SPARE_COLUMNS.take(lambda columns: columns.shape[1] == width)
        return self.kernel.columns(rows) if spare is None else spare


_SPARE_COLUMNS = Spares(keep=2)
"""Column buffers of readers closed in this process (a reader's pair): a new one of 65,536 rows
costs ~4 ms of page zeroing before the scan writes a row, twice a segment."""


@functools.cache
def scan_thread():
    """One thread, on which kernel calls run ahead of their callers while those work on the call before."""
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


def little_endian(view, at, width: int):
    """The little-endian unsigned integers of `width` bytes at each of the positions `at` of a uint8 array."""
    value = view[at + width - 1].astype("int64")
    for i in range(width - 2, -1, -1):
        value = (value << 8) | view[at + i]
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

    def java_int(values):  # (the cast wraps, as Java's int does: a third of the modulo's time)
        return values.astype(np.int32).astype(np.int64)

    wraps = base_sequence > java_int(0x7FFFFFFF - delta)
    return np.where(base_sequence == -1, -1, java_int(np.where(wraps, delta - (0x7FFFFFFF - base_sequence) - 1,
                                                                base_sequence + delta)))


@functools.cache
def gzip_inflater() -> int:
    """The address of ISA-L's `isal_inflate_stateless`, in the library `gzip_codec` inflates with,
    for `kernels.gzip_each`; 0 where there are no kernels or no such function, or where a member
    does not inflate through it as `gzip_codec` inflates it (an ISA-L whose `struct inflate_state`
    begins otherwise): gzip payloads then take `codecs.decompress_ranges`."""
    import ctypes
    import gzip

    import numpy as np

    from ..codecs import gzip_codec

    loaded = kernel()
    try:
        address = ctypes.cast(ctypes.CDLL(gzip_codec.isal_zlib.__file__).isal_inflate_stateless, ctypes.c_void_p).value
    except (OSError, AttributeError):
        address = None
    if loaded is None or not address:
        return 0
    text = b"kafkalog-tools checks ISA-L's inflate " * 40
    member = np.frombuffer(gzip.compress(text, mtime=0), dtype=np.uint8)
    out, inflated = np.zeros(len(text), dtype=np.uint8), np.zeros(1, dtype=np.int64)
    loaded.gzip_each(member, np.array([0]), np.array([len(member)]), np.array([0, len(text)]), out, inflated,
                     address, np.zeros(INFLATE_STATE, dtype=np.uint8))  # noqa: F405 - columns'
    if inflated[0] != 1 or out.tobytes() != text:
        if os.environ.get("KAFKALOG_DEBUG"):
            print("kafkalog: ISA-L's isal_inflate_stateless does not inflate as expected here; gzip payloads "
                  "are inflated one by one", file=sys.stderr)
        return 0
    return address


def inflate_gzip(view, starts, ends, limit: int, budget: int, states: list, before: int = 0) -> tuple:
    """The gzip payloads view[starts[i]:ends[i]] that `kernels.gzip_member` vouches for (one member,
    as producers write them) inflated by `kernels.gzip_each` into one new buffer after `before`
    bytes left to the caller, each into as many bytes as its trailer says (none where that is above
    `limit`), as many as fit in `budget` bytes (at least one), on as many threads as
    `codecs.threads_for` gives them; `states` holds each thread's ISA-L working memory (zeroed once,
    grown as needed). Returns (buffer, at, inflated, taken): payload i < taken lies at
    buffer[at[i]:at[i + 1]] where inflated[i] is 1; the others are for their codec to decompress."""
    import numpy as np

    from .. import codecs

    sizes = little_endian(view, np.maximum(ends - 4, 0), 4)
    sizes[(ends - starts < 18) | (sizes > limit)] = 0  # (the kernel refuses these: not one plain member, or too large)
    at = np.empty(len(starts) + 1, dtype=np.int64)
    at[0] = before
    np.cumsum(sizes, out=at[1:])
    at[1:] += before
    taken = max(1, int(np.searchsorted(at[1:], before + budget, side="right")))
    at, starts, ends = at[:taken + 1], starts[:taken], ends[:taken]
    out, inflated = np.empty(int(at[-1]), dtype=np.uint8), np.zeros(taken, dtype=np.int64)
    threads = codecs.threads_for(int((ends - starts).sum()))
    pieces = min(taken, 4 * threads)  # (taken in turn: a thread slowed down takes fewer)
    bounds = np.linspace(0, taken, pieces + 1).astype(np.int64)
    while len(states) < threads:
        states.append(np.zeros(INFLATE_STATE, dtype=np.uint8))  # noqa: F405 - columns'
    loaded, inflater = kernel(), gzip_inflater()

    def inflate(piece: int, slot: int) -> None:
        low, high = int(bounds[piece]), int(bounds[piece + 1])
        loaded.gzip_each(view, starts[low:high], ends[low:high], at[low:high + 1], out, inflated[low:high], inflater,
                         states[slot])

    codecs.in_pieces(inflate, pieces, threads)
    return out, at, inflated, taken


def records_kernel():
    """`kernels.decode_each`, or None without the kernels."""
    loaded = kernel()
    return None if loaded is None else loaded.decode_each


def marker_record(position: int, base_offset: int, timestamp: int, base_sequence: int, control_type: int,
                  coordinator_epoch: int) -> Record:
    """The record of a transaction marker the kernel read (`columns.MARKER`: one of the one shape
    Kafka writes, `kernels.plain_marker`) as `decode_records` and `parse_control` build it from the
    batch at `position`: offset and timestamp the batch's base ones, its control key and value."""
    key = b"\0\0\0" + bytes((control_type,))
    value = b"\0\0" + coordinator_epoch.to_bytes(4, "big", signed=True)
    sequence = -1 if base_sequence < 0 else base_sequence
    record = Record(base_offset, timestamp, key, value, [], MARKER_RECORD_SIZE, sequence, 0, position + HEADER_SIZE)
    record.control = ControlRecord(control_type, CONTROL_TYPES[control_type], 0, coordinator_epoch)
    return record


MARKER_RECORD_SIZE = 17
"""A plain marker's record: its length varint and 16 bytes (`kernels._MARKER_RECORD`)."""

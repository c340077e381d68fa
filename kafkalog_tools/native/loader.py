"""The bulk kernels' machine code, mapped without LLVM.

Importing numba and loading its cached functions cost ~1 s of CPU per process, which on a 1 GiB
segment of large batches is more than the scan itself. So numba only compiles: `kernels.build`
turns the kernels into one relocatable object for this CPU (~10 s, once per source and CPU), which
`cache` keeps. Every later run reads that object from the cache and, on x86-64, lays it out itself
(`elf_object`: the object is position-independent, so that is a copy, ~200 PC-relative patches and
two addresses, <1 ms) into pages it then makes executable. Elsewhere LLVM's MCJIT maps it, which
costs importing llvmlite (~40 ms). The entry points are called through ctypes, which releases the GIL.
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import mmap
import os

import numpy as np

from . import cache, elf_object
from .columns import (ABORTED_FIELDS, B_MAGIC, CAPACITY, COLUMNS, DUMPLOG_TEXTS, HEADER_COLUMNS, INFLATE_STATE,
                      LEGACY_RECORD_COLUMNS, ONGOING_FIELDS, OUTLINE_FIELDS, PLAN_FIELDS, PRODUCER_FIELDS,
                      RECORD_COLUMNS, RECOVERY_STATE, RENDER_BATCH, RENDER_RECORD, RENDER_STATE, REPLAY_FIELDS,
                      REPLAY_ONGOING, REPLAY_STATE, RP_PRODUCER, RUN_BATCH_FIELDS, SIGNATURE_STATE, STRETCH_FIELDS,
                      TEXTS, spread)

_ENTRY_PREFIX = "kafkalog_"


def load(build: bool = True) -> NativeKernel | None:
    """The kernels from the cache; where none is cached, built now (`build`) or None (`cache.code`)."""
    code = cache.code(build)
    return None if code is None else from_code(code)


def from_code(code: bytes) -> NativeKernel:
    """The kernels of this object code, mapped."""
    _keep_freed_heap()
    try:
        return NativeKernel(*_mapped(code))
    except (elf_object.UnsupportedObject, OSError):  # not an object for this loader, or no executable pages
        return NativeKernel(*jitted(code))


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
"""mallopt's parameters (glibc's malloc.h)."""


@functools.cache
def _keep_freed_heap() -> None:
    """Where the kernels run, numpy works on a run's columns (65,536 rows: 512 KiB a column) with
    temporaries that glibc gives back to the kernel as soon as they are freed (the top of the heap
    past 1 MiB, or a mapping of its own), and the next run faults them in again, zeroed. Freed
    memory up to 256 MiB stays in the heap instead (peak memory barely moves: +5-11 MB on a dump).
    On a 2 GiB log dir of KRaft segments, 9 runs interleaved: `verify --shallow`'s system time
    0.39 -> 0.23 s (wall 0.94 -> 0.86 s). glibc only, and not where the user tuned malloc through
    the environment."""
    if any(name.startswith(("MALLOC_", "GLIBC_TUNABLES")) for name in os.environ):
        return
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return
    if not hasattr(libc, "gnu_get_libc_version"):  # not glibc (musl's mallopt does nothing)
        return
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 256 << 20)


def _mapped(code: bytes) -> tuple[dict[str, int], _ExecutablePages]:
    """The object laid out by `elf_object` in pages of its own: (entry addresses, the pages)."""
    image = elf_object.image(code, _ENTRY_PREFIX)
    pages = _ExecutablePages(image)
    return {name: pages.address + at for name, at in image.entries.items()}, pages


def jitted(code: bytes):
    """The object mapped by LLVM's MCJIT: (entry addresses, the engine that owns the code)."""
    from llvmlite import binding

    engine = binding.create_mcjit_compiler(binding.parse_assembly(""), cache.target_machine(binding))
    engine.add_object_file(binding.ObjectFileRef.from_data(code))
    engine.finalize_object()
    names = (_ENTRY_PREFIX + name for name in _SIGNATURES)
    return {name: engine.get_function_address(name) for name in names}, engine


class _ExecutablePages:
    """A private anonymous mapping holding an `elf_object.Image`, its absolute places written with
    the mapping's address, then made read-only and executable; unmapped when this is collected
    (the kernel that calls into it holds it)."""

    def __init__(self, image: elf_object.Image):
        code = image.code
        self.address = None
        libc = _libc()
        self.size = max(-(-len(code) // mmap.PAGESIZE) * mmap.PAGESIZE, mmap.PAGESIZE)
        address = libc.mmap(None, self.size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                            -1, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "bulk kernel: no pages for the machine code")
        self.address, self._munmap = address, libc.munmap  # kept: module globals may be gone when this is collected
        ctypes.memmove(address, code, len(code))
        for place, offset in image.absolute:
            ctypes.c_uint64.from_address(address + place).value = address + offset
        if libc.mprotect(address, self.size, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
            error = ctypes.get_errno()
            self.close()
            raise OSError(error, "bulk kernel: pages cannot be made executable")

    def close(self) -> None:
        if self.address is not None:
            self._munmap(self.address, self.size)
            self.address = None

    __del__ = close


@functools.cache
def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.mmap.restype = ctypes.c_void_p
    for call in (libc.mprotect, libc.madvise):
        call.argtypes, call.restype = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int), ctypes.c_int
    libc.munmap.argtypes, libc.munmap.restype = (ctypes.c_void_p, ctypes.c_size_t), ctypes.c_int
    return libc



_I64, _POINTER = ctypes.c_int64, ctypes.c_void_p
_SIGNATURES = {  # kernels.ENTRIES, in their argument order
    "scan": (_POINTER, _I64, _I64, _I64, _I64, _I64, _POINTER, _I64, _POINTER, _I64, _POINTER, _POINTER),
    "scan_outlined": (_POINTER, _I64, _I64, _I64, _I64, _I64, _I64, _I64, _I64, _POINTER, _I64, _POINTER, _I64,
                      _POINTER, _I64, _POINTER, _I64, _I64, _POINTER, _I64, _I64, _POINTER, _POINTER, _POINTER,
                      _POINTER, _POINTER, _POINTER, _I64, _POINTER),
    "scan_legacy": (_POINTER, _I64, _I64, _I64, _I64, _I64, _POINTER, _I64, _POINTER),
    "agree_each": (_POINTER, _I64, _POINTER, _POINTER, _I64, _POINTER, _I64),
    "rows_apart": (_POINTER, _I64, _I64, _I64, _I64, _I64, _POINTER, _POINTER),
    "search_ascending": (_POINTER, _I64, _POINTER, _I64, _I64, _POINTER),
    "keep_asked": (_POINTER, _POINTER, _POINTER, _POINTER, _I64, _POINTER, _I64, _POINTER, _I64, _POINTER, _I64, _I64,
                   _POINTER, _I64, _I64, _POINTER),
    "recovery_index": (_POINTER, _I64, _I64, _I64, _POINTER, _POINTER, _POINTER, _I64),
    "replay_transactional": (_POINTER, _I64, _I64, _POINTER, _I64, _POINTER, _I64, _POINTER, _POINTER, _POINTER),
    "producer_slots": (_POINTER, _I64, _POINTER, _I64, _POINTER, _POINTER, _POINTER),
    "plan_producers": (_POINTER, _I64, _POINTER, _I64, _POINTER, _POINTER, _POINTER, _I64),
    "decode_each": (_POINTER, _I64, _POINTER, _I64, _POINTER, _I64, _I64, _I64, _POINTER, _POINTER, _POINTER,
                    _POINTER, _I64, _POINTER, _I64, _I64, _POINTER, _I64, _I64, _POINTER),
    "decode_legacy_each": (_POINTER, _I64, _POINTER, _I64, _POINTER, _I64, _I64, _I64, _POINTER, _POINTER, _POINTER,
                           _POINTER, _I64, _POINTER, _I64, _I64, _POINTER, _POINTER),
    "frames_each": (_POINTER, _I64, _POINTER, _POINTER, _POINTER, _I64, _I64, _POINTER, _I64, _POINTER, _POINTER),
    "gzip_each": (_POINTER, _I64, _POINTER, _POINTER, _POINTER, _I64, _POINTER, _I64, _POINTER, _I64, _POINTER, _I64),
    "render_each": (_POINTER, _I64, _POINTER, _I64, _POINTER, _I64, _POINTER, _I64, _POINTER, _I64, _POINTER, _I64,
                    _I64, _POINTER, _I64, _POINTER, _I64, _POINTER, _I64, _POINTER),
    "render_dumplog_each": (_POINTER, _I64, _POINTER, _I64, _POINTER, _I64, _POINTER, _I64, _POINTER, _I64, _POINTER,
                            _I64, _I64, _I64, _I64, _POINTER, _I64, _POINTER, _POINTER, _I64, _POINTER),
    "version_signatures": (_POINTER, _I64, _I64, _I64, _I64, _POINTER, _I64, _POINTER),
}


def _run_arguments(name: str, segment, payloads, batches, records, headers, legacy, texts, bounds, pieces: int,
                   state) -> tuple:
    """A renderer's run, checked, as its entry takes it: segment, payloads, batch, record, header
    and legacy record rows (an empty array for None), each address followed by its size."""
    count = records.shape[1]
    if not (bounds.size == pieces + 1 and bounds[-1] <= texts.size and state.size == RENDER_STATE
            and 0 <= state[RENDER_BATCH] <= batches.shape[1] and 0 <= state[RENDER_RECORD] <= count
            and (legacy is None or legacy.shape[1] == count)):
        raise ValueError(f"bulk kernel: {name} over {batches.shape[1]} batches, {count} records")
    rows = legacy if legacy is not None else np.empty((len(LEGACY_RECORD_COLUMNS), 0), dtype=np.int64)
    return (_address(segment, np.uint8), segment.size, _address(payloads, np.uint8), payloads.size,
            _address(batches, np.int64, len(RUN_BATCH_FIELDS)), batches.shape[1],
            _address(records, np.int64, len(RECORD_COLUMNS)), count,
            _address(headers, np.int64, len(HEADER_COLUMNS)), headers.shape[1],
            _address(rows, np.int64, len(LEGACY_RECORD_COLUMNS)))


def _address(array: np.ndarray, dtype, rows: int | None = None, writable: bool = False) -> int:
    """Where a C-contiguous array of `dtype` starts. The kernels check no bounds, so every array's
    layout is checked here instead; a wrong one is a bug of ours, never something in a file."""
    if (array.dtype != dtype or not array.flags.c_contiguous or (writable and not array.flags.writeable)
            or array.ndim != (1 if rows is None else 2) or (rows is not None and array.shape[0] != rows)):
        raise ValueError(f"bulk kernel: an array of {array.dtype} {array.shape} where {dtype} "
                         f"{'(rows, n)' if rows else '(n,)'} was expected")
    return array.ctypes.data


class NativeKernel:
    """The loaded entry points, called with numpy arrays as the numba functions were."""

    def __init__(self, addresses: dict[str, int], owner):
        self._owner = owner  # the pages or the engine holding the code: alive as long as this is
        self._entries = {}
        for name, arguments in _SIGNATURES.items():
            address = addresses.get(_ENTRY_PREFIX + name)
            if not address:
                raise RuntimeError(f"bulk kernel: no {_ENTRY_PREFIX}{name} in the compiled object")
            self._entries[name] = ctypes.CFUNCTYPE(_I64, *arguments)(address)
        n, after = self.scan(self.view(bytes(64)), 0, 64, 64, True, self.columns(1))
        if (n, after) != (0, 0):  # 64 zero bytes: a batch too short to be one
            raise RuntimeError("bulk kernel: the compiled scan does not answer as expected")

    @staticmethod
    def columns(capacity: int = CAPACITY) -> np.ndarray:
        return np.empty((len(COLUMNS), spread(capacity)), dtype=np.int64)

    @staticmethod
    def view(buffer) -> np.ndarray:
        """The segment's bytes as a numpy array, without a copy."""
        return np.frombuffer(buffer, dtype=np.uint8)

    def prefetch(self, buffer, processes: int = 1) -> Prefetch | None:
        """For a mapped file on Linux, where this process may run on more CPUs than `processes` of
        ours are scanning on: a `Prefetch` over its view."""
        if (isinstance(buffer, mmap.mmap) and hasattr(os, "sched_getaffinity")
                and len(os.sched_getaffinity(0)) > processes):
            return Prefetch(self.view(buffer))
        return None

    def scan(self, view, start: int, limit: int, end: int, deep: bool, columns, signing=None) -> tuple[int, int]:
        """kernels.scan: (batches read into `columns`, where the next entry starts). With `signing`,
        a `(table, state)` pair as `version_signatures` takes them, kernels.scan_signing (deep)."""
        return self._scan("scan", view, start, limit, end, int(deep), columns, signing)

    def scan_outlined(self, view, start: int, limit: int, end: int, deep: bool, lowest: int, highest: int, columns,
                      queries, largest: int, block, at: int, chunk: int, signing=None) -> tuple[int, list[int]]:
        """kernels.scan_outlined, `chunk` batches at a time: (the rows it left in `columns`, what it
        says of the call: a list indexed by `S_*`). `block` needs room for a chunk at `at`, or it
        folds none. `signing`: as `scan`'s, the scan signing (deep)."""
        if not (0 <= start and end <= view.size and 0 <= at <= block.shape[1] and 1 <= chunk <= columns.shape[1]):
            raise ValueError(f"bulk kernel: scan_outlined of {start}..{end} in {view.size} bytes, rows at {at} of "
                             f"{block.shape}, chunks of {chunk} in {columns.shape[1]} columns")
        rows, lasts = np.empty(chunk, dtype=np.int64), np.empty(chunk, dtype=np.int64)
        outline, out = np.empty(len(OUTLINE_FIELDS), dtype=np.int64), np.empty(len(STRETCH_FIELDS), dtype=np.int64)
        kept_out = np.empty(2, dtype=np.int64)
        n = self._call("scan_outlined", _address(view, np.uint8), view.size, int(start), int(limit), int(end),
                       int(deep), int(lowest), int(highest), int(chunk),
                       _address(columns, np.int64, len(COLUMNS), True), columns.shape[1],
                       *(argument for asked in queries for argument in (_address(asked, np.int64), asked.size)),
                       int(largest), _address(block, np.int64, 4, True), block.shape[1], int(at), rows.ctypes.data,
                       lasts.ctypes.data, outline.ctypes.data, kept_out.ctypes.data, out.ctypes.data,
                       *self._signing(signing, deep))
        return n, out.tolist()

    def scan_legacy(self, view, start: int, limit: int, end: int, floor: int, columns) -> tuple[int, int]:
        """kernels.scan_legacy: (messages read into `columns`, where the next entry starts)."""
        return self._scan("scan_legacy", view, start, limit, end, floor, columns)

    def _scan(self, name: str, view, start: int, limit: int, end: int, argument: int, columns,
              signing=None) -> tuple[int, int]:
        if not (0 <= start and end <= view.size):
            raise ValueError(f"bulk kernel: scan of {start}..{end} in {view.size} bytes")
        out = np.empty(2, dtype=np.int64)
        signed = () if name == "scan_legacy" else self._signing(signing, argument)
        self._call(name, _address(view, np.uint8), view.size, int(start), int(limit), int(end), int(argument),
                   _address(columns, np.int64, len(COLUMNS), True), columns.shape[1], *signed, out.ctypes.data)
        return int(out[0]), int(out[1])

    @staticmethod
    def _signing(signing, deep) -> tuple[int, int, int]:
        """A scan's table, its size and its state (no table: 0, 0, 0)."""
        if signing is None:
            return 0, 0, 0
        table, state = signing
        size = table.size
        if not (deep and size and size & (size - 1) == 0 and state.size == SIGNATURE_STATE):
            raise ValueError(f"bulk kernel: a signing scan with a table of {size}, deep {bool(deep)}")
        return _address(table, np.int64, writable=True), size, _address(state, np.int64, writable=True)

    def agree_each(self, payloads, bounds, columns, rows) -> None:
        """kernels.agree_each: payload i, payloads[bounds[i]:bounds[i+1]], is batch rows[i]'s records."""
        if bounds.size != rows.size + 1:
            raise ValueError(f"bulk kernel: {bounds.size} bounds for {rows.size} payloads")
        self._call("agree_each", _address(payloads, np.uint8), payloads.size, _address(bounds, np.int64),
                   _address(rows, np.int64), rows.size, _address(columns, np.int64, len(COLUMNS), True),
                   columns.shape[1])

    def rows_apart(self, columns, n: int, lowest: int, highest: int, deep: bool) -> tuple[np.ndarray, list[int]]:
        """kernels.rows_apart over the first `n` rows: (those rows, the run's outline: a list
        indexed by `RO_*`, whose `RO_COMPRESSED` counts the compressed batches among them that wait
        to be walked)."""
        if not 0 <= n <= columns.shape[1]:
            raise ValueError(f"bulk kernel: rows_apart of {n} rows of {columns.shape[1]}")
        rows, out = np.empty(n, dtype=np.int64), np.empty(len(OUTLINE_FIELDS), dtype=np.int64)
        count = self._call("rows_apart", _address(columns, np.int64, len(COLUMNS)), columns.shape[1], int(n),
                           int(lowest), int(highest), int(deep), rows.ctypes.data, out.ctypes.data)
        return rows[:count], out.tolist()

    def search_ascending(self, haystack, needles, side: str = "left"):
        """kernels.search_ascending: `np.searchsorted(haystack, needles, side)` for an ascending
        `haystack` (the caller knows it is: the kernel does not check)."""
        out = np.empty(needles.size, dtype=np.int64)
        self._call("search_ascending", _address(haystack, np.int64), haystack.size, _address(needles, np.int64),
                   needles.size, side == "right", out.ctypes.data)
        return out

    def keep_asked(self, positions, bases, lasts, max_timestamps, queries, largest: int, block, at: int):
        """kernels.keep_asked over a run's columns (each of n int64s) into block[:, at:at + n]:
        (rows kept, whether the run is in order, the largest max timestamp after it)."""
        n = positions.size
        if not (n and bases.size == lasts.size == max_timestamps.size == n and 0 <= at and at + n <= block.shape[1]):
            raise ValueError(f"bulk kernel: keep_asked of {n} rows at {at} of a block of {block.shape}")
        out = np.empty(2, dtype=np.int64)
        kept = self._call("keep_asked", *(_address(column, np.int64) for column in (positions, bases, lasts,
                                                                                    max_timestamps)), n,
                          *(argument for asked in queries for argument in (_address(asked, np.int64), asked.size)),
                          int(largest), _address(block, np.int64, 4, True), block.shape[1], at, out.ctypes.data)
        return kept, bool(out[0]), int(out[1])

    def recovery_index(self, columns, start: int, stop: int, state, offset_entries, time_entries) -> int:
        """kernels.recovery_index: the row it stopped at."""
        width = offset_entries.shape[1]
        if not (0 <= start <= stop <= columns.shape[1] and stop - start <= width == time_entries.shape[1]
                and state.size == RECOVERY_STATE):
            raise ValueError(f"bulk kernel: recovery_index over rows {start}..{stop} of {columns.shape[1]}, "
                             f"{width} entries")
        return self._call("recovery_index", _address(columns, np.int64, len(COLUMNS)), columns.shape[1], int(start),
                          int(stop), _address(state, np.int64, writable=True),
                          _address(offset_entries, np.int64, 2, True), _address(time_entries, np.int64, 2, True),
                          width)

    def replay_transactional(self, batches, start: int, producers, ongoing, aborted, abort_markers, state) -> int:
        """kernels.replay_transactional: the batch it stopped before, or the batch count."""
        count = batches.shape[1]
        if not (batches.shape[0] == len(REPLAY_FIELDS) and 0 <= start <= count and producers.shape[0] == len(
                PRODUCER_FIELDS) and ongoing.shape[0] == len(ONGOING_FIELDS) and aborted.shape == (
                len(ABORTED_FIELDS), count) and abort_markers.size == count and state.size == REPLAY_STATE
                and 0 <= state[REPLAY_ONGOING] <= ongoing.shape[1] - count + start
                and batches[RP_PRODUCER, start:].min(initial=0) >= 0
                and batches[RP_PRODUCER, start:].max(initial=-1) < producers.shape[1]):
            raise ValueError(f"bulk kernel: replay_transactional of batches {start}..{count} with "
                             f"{producers.shape[1]} producers and room for {ongoing.shape[1]} transactions")
        return self._call("replay_transactional", _address(batches, np.int64, len(REPLAY_FIELDS)), count, int(start),
                          _address(producers, np.int64, len(PRODUCER_FIELDS), True), producers.shape[1],
                          _address(ongoing, np.int64, len(ONGOING_FIELDS), True), ongoing.shape[1],
                          _address(aborted, np.int64, len(ABORTED_FIELDS), True),
                          _address(abort_markers, np.int64, writable=True), _address(state, np.int64, writable=True))

    def producer_slots(self, plan, table, slots, ids, last_rows) -> int:
        """kernels.producer_slots: the producers numbered."""
        count = plan.shape[1]
        size = table.size
        if not (plan.shape[0] == len(PLAN_FIELDS) and size >= 2 * count and size & (size - 1) == 0
                and slots.size == ids.size == last_rows.size == count):
            raise ValueError(f"bulk kernel: producer_slots of {count} rows with a table of {size}")
        return self._call("producer_slots", _address(plan, np.int64, len(PLAN_FIELDS)), count,
                          _address(table, np.int64, writable=True), size, _address(slots, np.int64, writable=True),
                          _address(ids, np.int64, writable=True), _address(last_rows, np.int64, writable=True))

    def plan_producers(self, plan, slots, epochs, sequences, apart, anomalies: bool) -> None:
        """kernels.plan_producers: `apart`, `epochs` and `sequences` moved."""
        count, producers = plan.shape[1], apart.size
        if not (plan.shape[0] == len(PLAN_FIELDS) and slots.size == count and epochs.size == sequences.size == producers
                and slots.max(initial=-1) < producers):
            raise ValueError(f"bulk kernel: plan_producers of {count} rows for {producers} producers")
        self._call("plan_producers", _address(plan, np.int64, len(PLAN_FIELDS)), count, _address(slots, np.int64),
                   producers, _address(epochs, np.int64, writable=True), _address(sequences, np.int64, writable=True),
                   _address(apart, np.int64, writable=True), int(anomalies))

    def decode_each(self, segment, payloads, columns, row: int, stop: int, starts, ends, in_payloads, first_record,
                    records, n: int, headers, h: int) -> tuple[int, int, int]:
        """kernels.decode_each: (row, records, headers) after the last batch decoded."""
        batches = starts.size
        if not (0 <= row <= stop <= batches == ends.size == in_payloads.size and first_record.size >= stop
                and stop <= columns.shape[1] and 0 <= n <= records.shape[1] and 0 <= h <= headers.shape[1]):
            raise ValueError(f"bulk kernel: decode_each over rows {row}..{stop} of {batches}")
        out = np.empty(3, dtype=np.int64)
        self._call("decode_each", _address(segment, np.uint8), segment.size, _address(payloads, np.uint8),
                   payloads.size, _address(columns, np.int64, len(COLUMNS)), columns.shape[1], int(row), int(stop),
                   _address(starts, np.int64), _address(ends, np.int64), _address(in_payloads, np.int64),
                   _address(first_record, np.int64, writable=True), batches,
                   _address(records, np.int64, len(RECORD_COLUMNS), True), records.shape[1], int(n),
                   _address(headers, np.int64, len(HEADER_COLUMNS), True), headers.shape[1], int(h), out.ctypes.data)
        return int(out[0]), int(out[1]), int(out[2])

    def frames_each(self, segment, codec_ids, starts, ends, limit: int, out, bounds, decoded) -> int:
        """kernels.frames_each: how many of the lz4 and snappy payloads segment[starts[i]:ends[i]]
        (by `codec_ids[i]`) it went through."""
        count = starts.size
        if not (ends.size == count == codec_ids.size == decoded.size == bounds.size - 1 and limit >= 0
                and (count == 0 or (starts.min() >= 0 and (ends - starts).min() >= 0 and ends.max() <= segment.size))):
            raise ValueError(f"bulk kernel: frames_each over {count} payloads in {segment.size} bytes")
        return self._call("frames_each", _address(segment, np.uint8), segment.size, _address(codec_ids, np.int64),
                          _address(starts, np.int64), _address(ends, np.int64), count, int(limit),
                          _address(out, np.uint8, writable=True), out.size, _address(bounds, np.int64, writable=True),
                          _address(decoded, np.int64, writable=True))

    def gzip_each(self, segment, starts, ends, at, out, inflated, inflate: int, state) -> int:
        """kernels.gzip_each: how many of the payloads segment[starts[i]:ends[i]] it inflated, each
        into out[at[i]:at[i + 1]], with ISA-L's `isal_inflate_stateless` at address `inflate` and
        `state` (zeroed, at least `gzip_codec.INFLATE_STATE` bytes) its working memory."""
        count = starts.size
        if not (ends.size == count == inflated.size == at.size - 1 and inflate and state.size >= INFLATE_STATE
                and (count == 0 or (starts.min() >= 0 and (ends - starts).min() >= 0 and ends.max() <= segment.size
                                    and at[0] >= 0 and (np.diff(at) >= 0).all() and at[-1] <= out.size))):
            raise ValueError(f"bulk kernel: gzip_each over {count} payloads in {segment.size} bytes")
        return self._call("gzip_each", _address(segment, np.uint8), segment.size, _address(starts, np.int64),
                          _address(ends, np.int64), _address(at, np.int64), count,
                          _address(out, np.uint8, writable=True), out.size,
                          _address(inflated, np.int64, writable=True), int(inflate),
                          _address(state, np.uint8, writable=True), state.size)

    def decode_legacy_each(self, segment, payloads, columns, row: int, stop: int, starts, ends, in_payloads,
                           first_record, records, n: int, legacy_records) -> tuple[int, int]:
        """kernels.decode_legacy_each: (row, records) after the last message decoded."""
        batches = starts.size
        if not (0 <= row <= stop <= batches == ends.size == in_payloads.size and first_record.size >= stop
                and stop <= columns.shape[1] and 0 <= n <= records.shape[1] == legacy_records.shape[1]):
            raise ValueError(f"bulk kernel: decode_legacy_each over rows {row}..{stop} of {batches}")
        out = np.empty(2, dtype=np.int64)
        self._call("decode_legacy_each", _address(segment, np.uint8), segment.size, _address(payloads, np.uint8),
                   payloads.size, _address(columns, np.int64, len(COLUMNS), True), columns.shape[1], int(row),
                   int(stop), _address(starts, np.int64), _address(ends, np.int64), _address(in_payloads, np.int64),
                   _address(first_record, np.int64, writable=True), batches,
                   _address(records, np.int64, len(RECORD_COLUMNS), True), records.shape[1], int(n),
                   _address(legacy_records, np.int64, len(LEGACY_RECORD_COLUMNS), True), out.ctypes.data)
        return int(out[0]), int(out[1])

    def render_each(self, segment, payloads, batches, records, headers, legacy, deep: bool, texts, bounds,
                    base64_only: bool, out, state) -> None:
        """kernels.render_each: `state` says where it stopped and how much of `out` it wrote.
        `legacy` is None for V2 batches."""
        run = _run_arguments("render_each", segment, payloads, batches, records, headers, legacy, texts, bounds,
                             TEXTS, state)
        self._call("render_each", *run, int(deep), int(legacy is not None), _address(texts, np.uint8), texts.size,
                   _address(bounds, np.int64), int(base64_only), _address(out, np.uint8, writable=True), out.size,
                   _address(state, np.int64, writable=True))

    def render_dumplog_each(self, segment, payloads, batches, records, headers, legacy, deep: bool, print_data: bool,
                            skip_metadata: bool, texts, bounds, out, state) -> None:
        """kernels.render_dumplog_each: as `render_each`, for kafka-dump-log's text. `legacy`
        is None for V2 batches; the records of V0/V1 messages need it."""
        if legacy is None and deep and records.shape[1] and not (batches[B_MAGIC] == 2).all():
            raise ValueError("bulk kernel: render_dumplog_each of V0/V1 records without their rows")
        run = _run_arguments("render_dumplog_each", segment, payloads, batches, records, headers, legacy, texts,
                             bounds, DUMPLOG_TEXTS, state)
        self._call("render_dumplog_each", *run, 0 if legacy is None else legacy.shape[1], int(deep), int(print_data),
                   int(skip_metadata), _address(texts, np.uint8), texts.size, _address(bounds, np.int64),
                   _address(out, np.uint8, writable=True), out.size, _address(state, np.int64, writable=True))

    def version_signatures(self, view, start: int, limit: int, end: int, table, state) -> int:
        """kernels.version_signatures: where the next batch starts (`state` says whether it vouches)."""
        size = table.size
        if not (0 <= start and end <= view.size and size and size & (size - 1) == 0
                and state.size == SIGNATURE_STATE):
            raise ValueError(f"bulk kernel: version_signatures of {start}..{end} in {view.size} bytes, "
                             f"a table of {size}")
        return self._call("version_signatures", _address(view, np.uint8), view.size, int(start), int(limit), int(end),
                          _address(table, np.int64, writable=True), size, _address(state, np.int64, writable=True))

    def _call(self, name: str, *arguments) -> int:
        result = self._entries[name](*arguments)
        if result < 0:  # the kernel raised: it cannot, short of a bug of ours
            raise RuntimeError(f"bulk kernel: {name} failed")
        return result


_MADV_POPULATE_READ = 22
"""Linux 5.14+: map a range's pages now, as reading them would, without reading them."""


@functools.cache
def _madvise():
    """libc's madvise, called through ctypes so the GIL is released (mmap.madvise keeps it)."""
    return _libc().madvise, concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kafkalog-prefetch")


class Prefetch:
    """Maps the pages of the next byte range on a second thread while the kernel scans this one,
    and hands back those behind it there too. A page fault costs the scan ~0.1 s per GiB from the
    page cache, far more from a disk; releasing 1 GiB of pages costs ~20 ms; a second core is
    usually idle. Off where Linux has no MADV_POPULATE_READ."""

    def __init__(self, view: np.ndarray):
        self.view = view
        self.base = view.ctypes.data
        self.populating: concurrent.futures.Future | None = None
        self.working = view.size > 0

    def ahead(self, start: int, stop: int) -> None:
        if not self.working:
            return
        if self.populating is not None:
            self.working = self.populating.result() == 0  # done long ago: the scan of a range takes longer
        start -= start % mmap.PAGESIZE
        if self.working and stop > start:
            self.populating = self._advise(start, stop, _MADV_POPULATE_READ)

    def release(self, start: int, stop: int) -> bool:
        """Hand back the pages of [start, stop) (page-aligned) on the thread; False where it cannot."""
        if self.working and stop > start:
            self._advise(start, stop, mmap.MADV_DONTNEED)
        return self.working

    def _advise(self, start: int, stop: int, advice: int) -> concurrent.futures.Future:
        madvise, thread = _madvise()
        # the view goes with the call: while the call holds it, the file cannot be unmapped (mmap.close
        # refuses while a view is exported), so the advice never lands on whatever reuses the addresses
        return thread.submit(_advise_pages, madvise, self.view, self.base + start, stop - start, advice)


def _advise_pages(madvise, view: np.ndarray, address: int, length: int, advice: int) -> int:
    return madvise(address, length, advice)

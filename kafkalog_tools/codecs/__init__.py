"""Kafka's compression codecs, by attribute id (CompressionType: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).

Each codec is one module exposing `decompress(data, limit, magic) -> bytes` and, for building
fixtures, `compress(data, magic) -> bytes` in the form Java Kafka writes. Decompression is
bounded by `limit` bytes of output: a decompression bomb ends in a `DecompressionError`, not in an
out-of-memory kill.
"""
from __future__ import annotations

import functools
import importlib
import os
import threading
from types import ModuleType
from typing import Callable, Iterator, TypeVar

from ..errors import DecompressionError

NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
IDS = {name: codec_id for codec_id, name in NAMES.items()}

DEFAULT_LIMIT = 128 * 1024 * 1024
"""Largest decompressed batch we accept by default. Kafka's own limit is message.max.bytes of
*compressed* data (1 MiB by default), so real batches are far smaller than this."""

_modules: dict[int, ModuleType] = {}
T = TypeVar("T")


def name_of(codec_id: int) -> str:
    return NAMES.get(codec_id, f"unknown({codec_id})")


def _module(codec_id: int) -> ModuleType:
    module = _modules.get(codec_id)
    if module is None:
        if codec_id not in NAMES or codec_id == 0:
            raise DecompressionError(f"unknown compression type id {codec_id}", expected="0-4", actual=codec_id)
        module = importlib.import_module(f"{__name__}.{NAMES[codec_id]}_codec")
        _modules[codec_id] = module
    return module


def decompress(codec_id: int, data: bytes, *, magic: int = 2, limit: int = DEFAULT_LIMIT) -> bytes:
    if codec_id == 0:
        return bytes(data)
    try:
        return _module(codec_id).decompress(data, limit, magic)
    except (DecompressionError, MemoryError):  # a shortage of memory is the machine's, not the payload's
        raise
    except Exception as exc:  # each library has its own error types; all mean "corrupt payload"
        raise DecompressionError(f"{NAMES[codec_id]} payload does not decompress: {exc}") from None


def open_stream(codec_id: int, data: bytes, *, magic: int = 2) -> None:
    """What Kafka's decompressing stream reads when it is opened, before a record is asked for
    (DefaultRecordBatch opens it before it checks the record count): the stream's header only, and
    for zstd nothing. Raises DecompressionError where that read fails (a KafkaException in Kafka)."""
    if codec_id == 0:
        return
    try:
        _module(codec_id).check_stream_header(data, magic)
    except (DecompressionError, MemoryError):
        raise
    except Exception as exc:
        raise DecompressionError(f"{NAMES[codec_id]} payload does not decompress: {exc}") from None


PARALLEL_BYTES = 256 << 10
"""Compressed bytes below which `decompress_ranges` stays on the calling thread (a hand-off costs
~50 us, inflating 64 KiB of gzip ~100 us)."""
THREADS_MAX = 4
"""At most this many threads inflate at once: each may hold a payload of up to `limit` bytes."""
SHARED_PAYLOAD = 4 << 10
"""Average compressed payload below which `decompress_ranges` stays on the calling thread too: each
payload takes the GIL to start and to finish, and inflating 1 KiB takes about what passing the GIL
between threads costs. Measured on 256 MiB of 1 KiB batches (zstd, snappy, gzip): verify 2.28 s on
two threads (0.8 s of it in the kernel, passing the GIL), 1.73 s on one; on 6 KiB gzip wrappers two
threads still gain (3.10 -> 2.34 s)."""


def decompress_ranges(buffer, ranges: list[tuple[int, int, int]], *, magic: int = 2, limit: int = DEFAULT_LIMIT,
                      budget: int) -> list[bytes | DecompressionError]:
    """`decompress` of buffer[start:end] for each (codec id, start, end), in order, until the
    payloads hold `budget` bytes: returns the results of the ranges taken (at least one, when there
    are any), a payload that does not decompress giving its error instead.

    Every codec library inflates without the GIL, so large work is shared among threads (the
    caller's is one): each takes the next range in order until the payloads hold the budget, and
    finishes what it took. What is taken is therefore a prefix of `ranges`, as on one thread, and
    memory stays within the budget plus one payload per thread."""
    compressed = sum(end - start for _, start, end in ranges)
    threads = min(threads_for(compressed), len(ranges)) if compressed >= SHARED_PAYLOAD * len(ranges) else 1
    results: list = [None] * len(ranges)
    state = [0, 0]  # ranges taken, bytes held
    lock = threading.Lock()

    def take_and_decompress() -> None:
        while True:
            with lock:
                taken, held = state
                if taken == len(ranges) or (taken and held >= budget):
                    return
                state[0] = taken + 1
            codec_id, start, end = ranges[taken]
            try:
                payload = decompress(codec_id, buffer[start:end], magic=magic, limit=limit)
            except DecompressionError as exc:
                # kept without its traceback, whose frames hold what the codec inflated (a bomb's limit)
                results[taken] = exc.with_traceback(None)
                continue
            results[taken] = payload
            with lock:
                state[1] += len(payload)

    helpers = [_pool().submit(take_and_decompress) for _ in range(threads - 1)]
    take_and_decompress()
    for helper in helpers:
        helper.result()
    return results[:state[0]]


def decompress_in_rounds(buffer, ranges: list[tuple[int, int, int]], *, magic: int = 2, limit: int = DEFAULT_LIMIT,
                         budget: int) -> Iterator[tuple[int, list[bytes | DecompressionError]]]:
    """`decompress_ranges` over all of `ranges`, a budget at a time: yields (index of the round's
    first range, its results)."""
    first = 0
    while first < len(ranges):
        results = decompress_ranges(buffer, ranges[first:], magic=magic, limit=limit, budget=budget)
        yield first, results
        first += len(results)


def laid_end_to_end(results: list[bytes | DecompressionError], before: bytes = b"") -> tuple[bytes, list]:
    """The payloads among `results` joined after `before`, and where each result lies in them:
    (start, end), or None for an error."""
    parts, spans, held = [before], [], len(before)
    for payload in results:
        if isinstance(payload, DecompressionError):
            spans.append(None)
            continue
        parts.append(payload)
        spans.append((held, held + len(payload)))
        held += len(payload)
    return b"".join(parts), spans


def threads_for(compressed_bytes: int) -> int:
    """How many threads to share the inflating of this many compressed bytes (1: the caller's alone)."""
    return min(_cpus(), THREADS_MAX) if compressed_bytes >= PARALLEL_BYTES else 1


def in_pieces(work: Callable[[int, int], T], pieces: int, threads: int) -> list[T]:
    """[work(0, slot), ..., work(pieces - 1, slot)]: `threads` threads (the caller's is slot 0,
    the others from the pool) each take the next piece until none is left, so one slowed down
    (by a thread of the caller's own, say) takes fewer. For work that runs without the GIL, as the
    codecs and the bulk kernels do; `slot` names the thread, for buffers of its own."""
    import concurrent.futures

    results: list = [None] * pieces
    taken = iter(range(pieces))  # next() on a range iterator is atomic under the GIL

    def take(slot: int) -> None:
        for piece in taken:
            results[piece] = work(piece, slot)

    helpers = [_pool().submit(take, slot) for slot in range(1, min(threads, pieces))]
    try:
        take(0)
    finally:
        concurrent.futures.wait(helpers)  # none outlives the call, even when the caller's work raises
    for helper in helpers:
        helper.result()
    return results


@functools.cache
def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@functools.cache
def _pool():
    import concurrent.futures

    return concurrent.futures.ThreadPoolExecutor(max(1, min(_cpus(), THREADS_MAX) - 1),
                                                 thread_name_prefix="kafkalog-inflate")


def compress(codec_id: int, data: bytes, *, magic: int = 2) -> bytes:
    if codec_id == 0:
        return bytes(data)
    return _module(codec_id).compress(data, magic)


def too_large(codec: str, limit: int) -> DecompressionError:
    return DecompressionError(
        f"{codec} payload decompresses to more than the limit of {limit} bytes "
        "(a decompression bomb, or raise --max-decompressed)",
        expected=f"<= {limit} bytes",
        actual="more",
    )

"""Runs of batches (`dump.BatchRun`) written by a compiled renderer, call after call: what the JSON
Lines and kafka-dump-log text renderers share."""
from __future__ import annotations

from typing import Callable, NamedTuple

from .. import dump as d
from ..native import bulk_scan


class RunArrays(NamedTuple):
    """A run's columns as the renderers' entry points take them: contiguous, empty where absent."""

    segment: object
    payloads: object
    batches: object
    records: object
    headers: object
    legacy: object | None
    """None for V2 batches."""
    deep: bool


def arrays(run: d.BatchRun) -> RunArrays:
    import numpy as np

    contiguous, empty = np.ascontiguousarray, np.empty
    deep = run.records is not None
    return RunArrays(
        run.pin, np.frombuffer(run.payloads, dtype=np.uint8), contiguous(run.batches),
        contiguous(run.records) if deep else empty((len(bulk_scan.RECORD_COLUMNS), 0), dtype=np.int64),
        empty((len(bulk_scan.HEADER_COLUMNS), 0), dtype=np.int64) if run.headers is None else contiguous(run.headers),
        None if run.legacy is None else contiguous(run.legacy), deep)


def rendered(run: d.BatchRun, render: Callable, size: Callable[[RunArrays], int],
             hand_back: Callable[[int, int, int], bytes]) -> bytes | memoryview:
    """A run's lines, written by `render(arrays, out, state)` (a kernel writing whole batches from
    the rows in `state` until the next does not fit or is one it refuses) into a buffer of
    `size(arrays)` bytes, doubled while a batch does not fit; a refused batch b, whose `count`
    records start at row r, by `hand_back(b, r, count)`. Nearly always a view of the one buffer
    the kernel filled: copying it into bytes made a GiB of 16 KiB batches 4.2 s, not 2.6."""
    import numpy as np

    columns = arrays(run)
    batches = columns.batches
    state = np.zeros(bulk_scan.RENDER_STATE, dtype=np.int64)
    capacity = size(columns)
    parts, out = [], None
    while state[bulk_scan.RENDER_BATCH] < batches.shape[1]:
        if out is None:
            out = np.empty(capacity, dtype=np.uint8)
        render(columns, out, state)
        written, b = int(state[bulk_scan.RENDER_WRITTEN]), int(state[bulk_scan.RENDER_BATCH])
        if 4 * written >= capacity:  # a view, and the next call a new buffer: the view holds this one
            parts.append(memoryview(out)[:written])
            out = None
        elif written:  # a copy, so that a run of refused batches does not hold a buffer each
            parts.append(out[:written].tobytes())
        if state[bulk_scan.RENDER_REFUSED]:
            r = int(state[bulk_scan.RENDER_RECORD])
            count = max(int(batches[bulk_scan.B_COUNT, b]), 0) if columns.deep else 0
            parts.append(hand_back(b, r, count))
            state[bulk_scan.RENDER_BATCH], state[bulk_scan.RENDER_RECORD] = b + 1, r + count
        elif not written:  # a batch whose lines may not fit in the buffer
            capacity *= 2
            out = None
    return parts[0] if len(parts) == 1 else b"".join(parts)

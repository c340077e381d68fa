"""The compiled bulk scan (`native/bulk_scan.py`) against the per-batch path it stands in for.

The kernel only vouches for batches; the per-batch path owns every finding. So the test that
matters is the whole of verify run both ways (KAFKALOG_BULK=never and =always) over the corpus,
seeded damaged copies of it, and generated segments full of what a run must hand back batch by
batch: producer ids, control batches, falling leader epochs, offsets that go backwards or leave the
segment, records that lie about their count or timestamps under a valid CRC, every codec.
"""
from __future__ import annotations

import os
import random
import struct
import zlib
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kafkalog_tools import codecs
from kafkalog_tools.crc import crc32c
from kafkalog_tools.formats import legacy
from kafkalog_tools.native import bulk_scan, loader
from kafkalog_tools.native import cache as kernel_cache
from kafkalog_tools.formats.record_batch import ATTR_LOG_APPEND_TIME, build_batch, build_record, parse_batch, skim_records
from kafkalog_tools.formats.segment import MAGIC_OFFSET, BadEntry, SegmentFile
from kafkalog_tools.recovery import ProducerState, SegmentRecovery, recover_segment
from kafkalog_tools.verify import Verification
from tests.conftest import GOLDEN, REAL, ROOT, need
from tests.damage import corpus_paths, damaged_copies

pytest.importorskip("numba", reason="the bulk scan needs numba (an install requirement)")
KERNEL = bulk_scan.kernel()


def verify_both_ways(monkeypatch, paths: list[str], deep: bool) -> list[dict]:
    outcomes = []
    for mode in ("never", "always"):
        monkeypatch.setenv(bulk_scan.MODE_VARIABLE, mode)
        run = Verification(paths, deep=deep)
        outcomes.append(([f.to_json() for f in run], run.summary, run.target_summaries))
    assert outcomes[1][0] == outcomes[0][0]
    assert outcomes[1][1:] == outcomes[0][1:]
    return outcomes[0][0]


@pytest.mark.parametrize("deep", [True, False], ids=["deep", "shallow"])
def test_verify_in_bulk_equals_batch_by_batch_on_the_corpus(monkeypatch, deep):
    paths = corpus_paths() + [str(ROOT / "fixtures" / "example-logdir")]
    findings = verify_both_ways(monkeypatch, paths, deep)
    assert len(findings) > 100


@pytest.mark.parametrize("deep", [True, False], ids=["deep", "shallow"])
def test_verify_in_bulk_equals_batch_by_batch_on_damaged_copies(monkeypatch, tmp_path, deep):
    findings = verify_both_ways(monkeypatch, damaged_copies(tmp_path), deep=deep)
    assert {"crc-mismatch", "segment-overlap", "offset-not-increasing"} <= {f["code"] for f in findings}


# ---------------------------------------------------------------------------------------------
# Generated segments: everything a clean run must hand back to the per-batch path
# ---------------------------------------------------------------------------------------------


def _records(rng: random.Random, count: int, spread: bool) -> list[bytes]:
    records = []
    for i in range(count):
        headers = [(f"h{j}".encode(), rng.choice([None, b"", b"v" * rng.randrange(200)])) for j in range(rng.randrange(3))]
        key = rng.choice([None, b"", b"k" * rng.randrange(1, 300)])
        value = rng.choice([None, b"", b"x" * rng.randrange(1, 20000)])
        delta = i * (2 if spread else 1)
        records.append(build_record(delta, rng.randrange(-5, 5000) if rng.random() < 0.9 else -(1 << 40), key, value,
                                    headers))
    return records


def _control(kind: int) -> bytes:
    return build_record(0, 0, struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 7))


def _lie_in_records(batch: bytes, rng: random.Random) -> bytes:
    """Change one byte after the header and fix the CRC: the header is intact, the records are not."""
    if len(batch) <= 62:
        return batch
    data = bytearray(batch)
    at = rng.randrange(61, len(data))
    data[at] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, data[at] ^ 0x02])
    data[17:21] = crc32c(memoryview(data)[21:]).to_bytes(4, "big")
    return bytes(data)


def generated_segment(rng: random.Random, base: int) -> bytes:
    out = []
    offset, epoch = base, rng.randrange(3)
    producers = {pid: [0, 0] for pid in rng.choice([[], [1000], [1000, 1001, 1002]])}  # pid -> [epoch, sequence]
    for _ in range(rng.randrange(1, 60)):
        roll = rng.random()
        count = rng.randrange(0, 6)
        spread = rng.random() < 0.2
        last_delta = max(0, (count - 1) * (2 if spread else 1))
        attributes = ATTR_LOG_APPEND_TIME if rng.random() < 0.1 else 0
        codec = rng.choice(["none", "none", "none", "lz4", "gzip", "zstd", "snappy"])
        records = _records(rng, count, spread)
        max_ts = 1_700_000_000_000 + 4999 if rng.random() < 0.3 else -1
        kwargs = dict(base_timestamp=1_700_000_000_000, max_timestamp=max_ts, compression_id=codecs.IDS[codec],
                      attributes=attributes, partition_leader_epoch=epoch, last_offset_delta=last_delta)
        producer = rng.choice(sorted(producers)) if producers and rng.random() < 0.8 else -1
        if producer >= 0:
            state = producers[producer]
            trouble = rng.random()
            if trouble < 0.03:
                state[1] += 5  # a sequence gap
            elif trouble < 0.06:
                state[0], state[1] = state[0] + 1, 0  # a new producer epoch starts at sequence 0
            elif trouble < 0.08:
                state[0] += 1  # ... or does not
            elif trouble < 0.10:
                state[0] = max(0, state[0] - 1)  # an epoch going back
            kwargs.update(producer_id=producer, producer_epoch=state[0], base_sequence=state[1])
            if rng.random() < 0.05:
                kwargs["attributes"] |= 0x10  # transactional
            state[1] += last_delta + 1
        if roll < 0.05 and producers:  # a transaction marker
            marker_of = rng.choice(sorted(producers))
            records, kwargs["attributes"] = [_control(rng.randrange(2))], 0x30
            kwargs.update(compression_id=0, last_offset_delta=0, producer_id=marker_of,
                          producer_epoch=producers[marker_of][0], base_sequence=-1)
            last_delta = 0
        batch = build_batch(offset, records, **kwargs)
        if roll > 0.93:
            batch = _lie_in_records(batch, rng)
        out.append(batch)
        step = last_delta + 1
        if 0.05 < roll < 0.08:
            step = -rng.randrange(0, 3)  # offsets go back
        elif 0.08 < roll < 0.1:
            step += 1 << 32  # out of the segment's reach
        offset += step
        if rng.random() < 0.1:
            epoch += rng.choice([1, 1, -1])
    return b"".join(out)


def generated_partitions(root: Path, rng: random.Random, count: int, segment, spacing: int) -> list[str]:
    """`count` partitions of one to three segments each, `segment(rng, base)` their bytes."""
    paths = []
    for number in range(count):
        partition = root / f"gen-{number}"
        partition.mkdir()
        for base in range(0, spacing * rng.randrange(1, 4), spacing):
            (partition / f"{base:020d}.log").write_bytes(segment(rng, base))
        paths.append(str(partition))
    return paths


def test_verify_in_bulk_equals_batch_by_batch_on_generated_segments(monkeypatch, tmp_path):
    paths = generated_partitions(tmp_path, random.Random(11), 80, generated_segment, 200)
    findings = []
    for deep in (True, False):
        findings += verify_both_ways(monkeypatch, paths, deep)
    codes = {f["code"] for f in findings}
    assert {"record-corrupt", "offset-not-increasing", "offset-overflow", "leader-epoch-decreased",
            "max-timestamp-mismatch", "producer-sequence-gap", "producer-epoch-decreased"} <= codes, codes


# ---------------------------------------------------------------------------------------------
# The kernel itself
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["crc32c_hardware", "crc32c_software", "crc32_folding", "crc32_software"])
def test_crc_kernels_equal_crc32c_and_zlib(which):
    from kafkalog_tools.native import kernels

    if (which == "crc32c_hardware" and not kernels.HARDWARE_CRC) or \
            (which == "crc32_folding" and not kernels.CARRYLESS_MULTIPLY):
        pytest.skip("this CPU has no such instruction")
    function, reference = getattr(kernels, which), crc32c if which.startswith("crc32c") else zlib.crc32
    rng = random.Random(3)
    blocks = [3 * lane for lane in kernels._LANES]
    edges = {0, 8, 16, 64, *kernels._LANES, *blocks, sum(blocks), 2 * blocks[0], blocks[0] + blocks[-1]}
    lanes = [n + d for n in sorted(edges) for d in (-17, -16, -9, -1, 0, 1, 7, 8, 9, 16, 17)]  # lane, block edges
    data = rng.randbytes(max(20000, max(lanes)))
    view = KERNEL.view(data)
    for length in lanes + [rng.randrange(n) for n in (20, 200, 5000, 20000) for _ in range(75)]:
        if length >= 0:
            start = rng.randrange(len(data) - length + 1)
            assert function(view, start, start + length) == reference(data[start:start + length]), length


@pytest.mark.parametrize("side", ["left", "right"])
def test_search_ascending_equals_numpys_searchsorted(side):
    """The compiled search (index entries against a table's batches) against `np.searchsorted`:
    needles ascending (galloping), descending, random, repeated, outside the haystack; haystacks
    with runs of equal values, of one value, empty."""
    import numpy as np

    rng = np.random.default_rng(7)
    for size in (0, 1, 2, 3, 64, 1000, 100_000):
        for repeats in (False, True):
            steps = rng.integers(0 if repeats else 1, 90, size)
            haystack = np.cumsum(steps).astype(np.int64) - 50
            low, high = (-100, 100) if not size else (int(haystack[0]) - 3, int(haystack[-1]) + 3)
            for needles in (np.sort(rng.integers(low, high, 500)), np.sort(rng.integers(low, high, 500))[::-1],
                            rng.integers(low, high, 500), np.repeat(rng.integers(low, high, 5), 7),
                            haystack[::max(1, size // 300)], np.zeros(0, dtype=np.int64)):
                needles = np.ascontiguousarray(needles, dtype=np.int64)
                assert KERNEL.search_ascending(haystack, needles, side).tolist() == \
                    np.searchsorted(haystack, needles, side).tolist(), (size, repeats)



@pytest.mark.parametrize("deep", [False, True])
def test_rows_apart_equals_the_masks_it_replaces(deep):
    """The compiled choice of the batches verify takes one by one (`kernels.rows_apart`) against
    the same rule in numpy: offsets at and around the segment's bounds (and wrapping past
    Long.MAX), control batches with and without a plain marker, walked and unwalked batches of
    every codec, negative record counts. Its outline against the numpy passes it replaces."""
    import numpy as np

    from kafkalog_tools.formats.record_batch import ATTR_CODEC, ATTR_CONTROL
    from kafkalog_tools.native.columns import (ATTRIBUTES, BASE_OFFSET, CHECKED, LAST_OFFSET_DELTA, MARKER,
                                               NOT_A_MARKER, RECORDS_COUNT, RO_COMPRESSED)

    rng = np.random.default_rng(11)
    lowest, highest = 1000, 1000 + 0x7FFFFFFF
    for n in (0, 1, 7, 5000):
        columns = KERNEL.columns(max(n, 1))
        columns[BASE_OFFSET, :n] = rng.choice([lowest - 1, lowest, lowest + 5, highest - 3, highest, highest + 1,
                                               (1 << 63) - 2], n)
        columns[LAST_OFFSET_DELTA, :n] = rng.choice([-1, 0, 2, 3, 1 << 31], n)
        columns[ATTRIBUTES, :n] = rng.integers(0, 256, n)
        columns[MARKER, :n] = rng.choice([NOT_A_MARKER, 0, 1], n)
        columns[CHECKED, :n] = rng.integers(0, 2, n)
        columns[RECORDS_COUNT, :n] = rng.choice([-1, 0, 1, 300], n)
        rows, outline = KERNEL.rows_apart(columns, n, lowest, highest, deep)

        view = columns[:, :n]
        base = view[BASE_OFFSET]
        with np.errstate(over="ignore"):
            last = base + view[LAST_OFFSET_DELTA]
        control = (view[ATTRIBUTES] & ATTR_CONTROL != 0) & (view[MARKER] == NOT_A_MARKER)
        apart = (base < lowest) | (last < lowest) | (last > highest) | control
        unwalked = (view[CHECKED] == 0) & deep
        waiting = unwalked & ~apart & (view[ATTRIBUTES] & ATTR_CODEC != 0) & (view[RECORDS_COUNT] >= 0)
        assert rows.tolist() == np.flatnonzero(apart | unwalked).tolist(), n
        assert outline[RO_COMPRESSED] == int(waiting.sum()), n
        if n == 5000:
            assert 0 < len(rows) < n and (outline[RO_COMPRESSED] > 0) == deep  # (the draw covers both sides)


def _outline_in_numpy(view) -> dict:
    """What `rows_apart`'s outline stands for, as stage 2 computed it in numpy before."""
    import numpy as np

    from kafkalog_tools.native.columns import (BASE_OFFSET, LAST_OFFSET_DELTA, LEADER_EPOCH, PRODUCER_ID,
                                               RECORDS_COUNT, SIZE)

    base, deltas, epochs = view[BASE_OFFSET], view[LAST_OFFSET_DELTA], view[LEADER_EPOCH]
    with np.errstate(over="ignore"):
        last = base + deltas
    n = len(base)
    return {"bytes": int(view[SIZE].sum()), "records": int(view[RECORDS_COUNT].sum()),
            "largest_last": int(last.max()) if n else -(1 << 63),
            "largest_producer": int(view[PRODUCER_ID].max(initial=-1)),
            "ascending": int(bool((deltas >= 0).all() and (base[1:] > last[:-1]).all())),
            "epochs_rise": int(bool((epochs >= 0).all() and (epochs[1:] >= epochs[:-1]).all())),
            "epoch_changes": int((epochs[1:] != epochs[:-1]).sum())}


def test_rows_apart_outline_equals_numpy():
    """`rows_apart`'s outline (sums, largest values, whether offsets ascend and epochs rise, how
    many epochs start) against numpy, on runs as a scan gives them (ascending offsets, one epoch)
    and on the same runs disturbed one value at a time, at the first, a middle and the last row,
    wrapping past Long.MAX included."""
    import numpy as np

    from kafkalog_tools.native.columns import (BASE_OFFSET, LAST_OFFSET_DELTA, LEADER_EPOCH, OUTLINE_FIELDS,
                                               PRODUCER_ID, RECORDS_COUNT, SIZE)

    rng = np.random.default_rng(23)
    checked = 0
    for n in (1, 2, 9, 3000):
        columns = KERNEL.columns(n)
        deltas = rng.integers(0, 5, n)
        columns[LAST_OFFSET_DELTA, :n] = deltas
        columns[BASE_OFFSET, :n] = np.cumsum(deltas + 1) - deltas - 1 + 40
        columns[SIZE, :n] = rng.integers(61, 5000, n)
        columns[RECORDS_COUNT, :n] = deltas + 1
        columns[PRODUCER_ID, :n] = -1
        columns[LEADER_EPOCH, :n] = 3
        pristine = columns.copy()
        disturbances = [(None, None, None)] + [(field, row, value) for row in sorted({0, n // 2, n - 1})
                                               for field, value in ((BASE_OFFSET, 40), (BASE_OFFSET, (1 << 63) - 1),
                                                                    (LAST_OFFSET_DELTA, -1), (LEADER_EPOCH, -1),
                                                                    (LEADER_EPOCH, 2), (LEADER_EPOCH, 7),
                                                                    (PRODUCER_ID, 12), (RECORDS_COUNT, -1))]
        for field, row, value in disturbances:
            columns[:] = pristine
            if field is not None:
                columns[field, row] = value
            _, outline = KERNEL.rows_apart(columns, n, 0, 1 << 62, False)
            expected = _outline_in_numpy(columns[:, :n])
            assert {name: outline[OUTLINE_FIELDS.index(name)] for name in expected} == expected, (n, field, row)
            checked += 1
    assert checked == 9 + 17 + 25 + 25  # (runs of 1, 2, 9 and 3000 rows: each disturbance at 1, 2, 3 and 3 rows)

def golden_v2_logs() -> list[Path]:
    return sorted(p for p in need(GOLDEN / "logs").rglob("*.log") if p.stat().st_size)


def test_crc_pairs_equal_crc32c():
    """`crc32c_pair`, two ranges side by side (the scan's small batches), against the crc32c package:
    every length either side of a word, each range ending first, and empty ranges."""
    from kafkalog_tools.native import kernels

    rng = random.Random(5)
    data = rng.randbytes(4000)
    view = KERNEL.view(data)
    lengths = [n + d for n in (0, 8, 16, 64, kernels.PAIRED_MAX) for d in (-9, -8, -1, 0, 1, 7, 8, 9)]
    pairs = [(a, b) for a in lengths for b in lengths if a >= 0 and b >= 0]
    pairs += [(rng.randrange(kernels.PAIRED_MAX), rng.randrange(kernels.PAIRED_MAX)) for _ in range(300)]
    for a, b in pairs:
        x, y = rng.randrange(len(data) - a + 1), rng.randrange(len(data) - b + 1)
        assert kernels.crc32c_pair(view, x, x + a, y, y + b) == (crc32c(data[x:x + a]), crc32c(data[y:y + b])), (a, b)


def _clean_v2_prefix(path: Path, start: int) -> tuple[int, int]:
    """How many entries from `start` the scan must take (V2 batches with valid CRCs), and where the
    first one it must not take starts (or the reading stopped: the end, or a batch past it)."""
    with SegmentFile(path) as log:
        taken = 0
        for entry in log.entries(start):
            if isinstance(entry, BadEntry) or entry.magic != 2 or not entry.crc_valid:
                return taken, entry.position
            taken += 1
        return taken, log.stop_position


def test_scan_checks_small_batches_in_pairs_and_stops_at_the_first_bad_one(tmp_path):
    """The scan checks a small batch's CRC beside the next one's. A bad CRC, a size past the end or
    garbage in either batch of a pair stops it at that batch, having taken the one before; a pair
    started at any batch, cut by the range's limit or by the columns' capacity, reads as single ones."""
    from kafkalog_tools.native import kernels

    rng = random.Random(17)
    for case in range(120):
        batches = [build_batch(n, [build_record(0, 0, None, b"v" * rng.choice([0, 5, 60, 200, 330, 500]))
                                   for _ in range(rng.randrange(0, 3))]) for n in range(rng.randrange(2, 14))]
        assert any(len(b) - 12 <= kernels.PAIRED_MAX for b in batches)
        data = bytearray(b"".join(batches))
        starts = [sum(map(len, batches[:k])) for k in range(len(batches))]
        victim = rng.randrange(len(batches))
        damage = rng.choice(["crc", "byte", "cut", "size", "size", "none"])
        if damage == "crc":
            data[starts[victim] + 17] ^= 0x40
        elif damage == "byte":
            data[rng.randrange(starts[victim] + 21, starts[victim] + len(batches[victim]))] ^= 0x01
        elif damage == "cut":
            data = data[:rng.randrange(starts[victim] + 1, starts[victim] + len(batches[victim]))]
        elif damage == "size":
            size = rng.choice([-1, 0, 48, kernels.PAIRED_MAX + 1, len(data), 1 << 30])
            data[starts[victim] + 8:starts[victim] + 12] = struct.pack(">i", size)
        path = tmp_path / f"{case:020d}.log"
        path.write_bytes(bytes(data))
        view = KERNEL.view(bytes(data))
        for start in [s for s in starts if s < len(data)][:4]:
            taken, stop = _clean_v2_prefix(path, start)
            for limit, capacity in ((len(data), 64), (len(data), 1 + rng.randrange(3)), (start + 1 + rng.randrange(400), 64)):
                columns = np.empty((len(bulk_scan.COLUMNS), capacity), dtype=np.int64)
                n, at = KERNEL.scan(view, start, min(limit, len(data)), len(data), rng.random() < 0.5, columns)
                expected = [p for p in starts if p >= start][:taken]
                if limit < len(data):
                    expected = [p for p in expected if p < limit]
                expected = expected[:capacity]
                assert list(columns[bulk_scan.POSITION, :n]) == expected, (case, damage, victim, start, limit, capacity)
                if len(expected) == taken and limit >= len(data) and capacity > taken:
                    assert at == stop, (case, damage, victim, start)


def test_kernel_columns_are_what_parse_batch_reads():
    checked = markers = 0
    for path in golden_v2_logs():
        with SegmentFile(path) as log:
            columns = KERNEL.columns()
            n, stop = KERNEL.scan(KERNEL.view(log.buffer), 0, log.end, log.end, True, columns)
            batches = list(log.entries(0))
            assert n <= len(batches)
            for row, batch in zip(range(n), batches):
                assert batch.magic == 2 and batch.crc_valid
                assert (columns[bulk_scan.POSITION, row], columns[bulk_scan.SIZE, row]) == (batch.position, batch.size)
                assert columns[bulk_scan.BASE_OFFSET, row] + columns[bulk_scan.LAST_OFFSET_DELTA, row] == batch.last_offset
                assert [columns[bulk_scan.COLUMNS.index(name), row] for name in (
                    "base_offset", "partition_leader_epoch", "attributes", "max_timestamp", "producer_id",
                    "producer_epoch", "base_sequence", "records_count")] == [
                    batch.base_offset, batch.partition_leader_epoch, batch.attributes, batch.max_timestamp,
                    batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.count]
                marker = columns[bulk_scan.MARKER, row]
                if marker != bulk_scan.NOT_A_MARKER:  # a transaction marker Kafka wrote, read by the kernel
                    markers += 1
                    [record] = batch.records_reading_controls()
                    assert (marker, columns[bulk_scan.COORDINATOR_EPOCH, row]) == (
                        record.control.type_id, record.control.coordinator_epoch)
                    assert record == bulk_scan.marker_record(
                        batch.position, batch.base_offset, batch.base_timestamp, batch.base_sequence, marker,
                        record.control.coordinator_epoch)
                    assert columns[bulk_scan.CHECKED, row]
                elif columns[bulk_scan.CHECKED, row]:
                    checked += 1
                    assert skim_records(batch)[0] == batch.count
            assert n == len(batches) or stop == batches[n].position
    assert checked > 100  # every uncompressed batch that is not a control batch
    assert markers > 10  # every transaction marker (the golden partitions' are Kafka's own)


def test_legacy_columns_are_what_legacy_parse_batch_reads():
    read = 0
    for path in [GOLDEN / "logs" / "golden-v0-0", GOLDEN / "logs" / "golden-v1-0"]:
        for log_path in sorted(need(path).glob("*.log")):
            with SegmentFile(log_path) as log:
                columns = KERNEL.columns()
                n, stop = KERNEL.scan_legacy(KERNEL.view(log.buffer), 0, log.end, log.end, 0, columns)
                batches = list(log.entries(0))
                floor = 0
                for row, batch in zip(range(n), batches):
                    assert batch.magic < 2 and batch.crc_valid
                    assert (columns[bulk_scan.POSITION, row], columns[bulk_scan.SIZE, row]) == (batch.position, batch.size)
                    base = batch.last_offset if not batch.compression_id else min(floor, batch.last_offset)
                    assert columns[bulk_scan.BASE_OFFSET, row] == base
                    assert columns[bulk_scan.BASE_OFFSET, row] + columns[bulk_scan.LAST_OFFSET_DELTA, row] == batch.last_offset
                    assert [columns[bulk_scan.COLUMNS.index(name), row] for name in (
                        "partition_leader_epoch", "attributes", "max_timestamp", "producer_id")] == [
                        -1, batch.attributes & 0x0F, batch.max_timestamp, -1]
                    floor = max(floor, batch.last_offset + 1)
                assert n == len(batches) or stop == batches[n].position
                read += n
    assert read > 100


def _legacy_segment(rng: random.Random, base: int) -> bytes:
    """V0 and V1 messages and wrappers, with the damage a shallow check must hand back, and inside
    wrappers what a deep one must: inner offsets out of order, an inner CRC mismatch, a V1 inner
    timestamp above the wrapper's, a V0 wrapper offset that is not its last inner one, a V1 wrapper
    offset of 0."""
    out = []
    offset = base
    magic = rng.choice([0, 1])
    for _ in range(rng.randrange(1, 40)):
        if rng.random() < 0.1:
            magic = 1 - magic
        roll = rng.random()
        codec = rng.choice(["none", "none", "gzip", "snappy", "lz4"])
        timestamp = 1_700_000_000_000 + rng.randrange(-5, 5000)
        if codec == "none":
            entry = legacy.build_entry(offset, magic, rng.choice([None, b"k"]), rng.randbytes(rng.randrange(200)),
                                       timestamp=timestamp, attributes=rng.choice([0, 0, 0x08, 0x30]))
            count = 1
        else:
            count = rng.randrange(1, 6)
            inner_offsets = [i if magic else offset + i for i in range(count)]
            if 0.18 < roll < 0.21 and count > 1:
                inner_offsets[0], inner_offsets[1] = inner_offsets[1], inner_offsets[0]
            inner = [bytearray(legacy.build_entry(inner_offset, magic, None, rng.randbytes(50),
                                                  timestamp=timestamp + (7 if 0.23 < roll < 0.26 else 0)))
                     for inner_offset in inner_offsets]
            if 0.21 < roll < 0.23:
                inner[-1][-1] ^= 0x01  # an inner CRC mismatch
            wrapped = codecs.compress(codecs.IDS[codec], b"".join(inner), magic=magic)
            if roll < 0.05:
                wrapped = wrapped[:len(wrapped) // 2]  # will not decompress: a shallow check cannot tell
            wrapper_offset = offset + count - 1
            if 0.26 < roll < 0.28:
                wrapper_offset = wrapper_offset + 1 if magic == 0 else 0
            entry = legacy.build_entry(wrapper_offset, magic, None, wrapped, timestamp=timestamp,
                                       attributes=codecs.IDS[codec] | rng.choice([0, 0, 0, legacy.ATTR_LOG_APPEND_TIME]))
        data = bytearray(entry)
        if 0.05 < roll < 0.08:
            data[-1] ^= 0x40  # a CRC mismatch
        elif 0.08 < roll < 0.1:
            data[rng.randrange(18, len(data))] ^= 0x80  # sizes inside no longer add up, CRC fixed
            data[12:16] = zlib.crc32(data[16:]).to_bytes(4, "big")
        elif 0.1 < roll < 0.12:
            data[16] = 0xFF  # magic -1
            data[12:16] = zlib.crc32(data[16:]).to_bytes(4, "big")
        out.append(bytes(data))
        step = count
        if 0.12 < roll < 0.16:
            step = -rng.randrange(0, 8)  # offsets go back
        elif 0.16 < roll < 0.18:
            step += 1 << 32  # out of the segment's reach
        offset += step
    return b"".join(out)


def test_verify_in_bulk_equals_batch_by_batch_on_generated_legacy_segments(monkeypatch, tmp_path):
    paths = generated_partitions(tmp_path, random.Random(12), 60, _legacy_segment, 100)
    read = 0
    for log in Path(tmp_path).glob("*/*.log"):
        data = log.read_bytes()
        read += KERNEL.scan_legacy(KERNEL.view(data), 0, len(data), len(data), int(log.stem), KERNEL.columns())[0]
    findings = verify_both_ways(monkeypatch, paths, deep=False)
    codes = {f["code"] for f in findings}
    assert {"crc-mismatch", "offset-not-increasing", "offset-overflow"} <= codes, codes
    # a shallow check reads no key or value sizes and opens no wrappers, as Kafka's recovery does not
    assert "record-corrupt" not in codes and "corrupt-batch" not in codes
    assert read > 500
    deep = {f["code"] for f in verify_both_ways(monkeypatch, paths, deep=True)}
    assert {"record-corrupt", "record-offset-invalid", "inner-crc-mismatch", "max-timestamp-mismatch",
            "wrapper-offset-mismatch"} <= deep, deep


@pytest.mark.parametrize("magic", [0, 1])
def test_deep_verify_opens_clean_legacy_wrappers_in_bulk(monkeypatch, tmp_path, magic):
    """Clean wrappers of every legacy codec: in bulk, the per-batch reader decodes none of them,
    and the findings and record counts are the per-batch path's."""
    rng = random.Random(magic)
    entries, offset = [], 0
    for number in range(300):
        codec = ("gzip", "snappy", "lz4")[number % 3]
        count = rng.randrange(1, 8)
        inner = b"".join(legacy.build_entry(i if magic else offset + i, magic, None, rng.randbytes(60),
                                            timestamp=1_700_000_000_000 + number) for i in range(count))
        entries.append(legacy.build_entry(offset + count - 1, magic, b"k" if number % 5 == 0 else None,
                                          codecs.compress(codecs.IDS[codec], inner, magic=magic),
                                          timestamp=1_700_000_000_000 + number, attributes=codecs.IDS[codec]))
        offset += count
    partition = tmp_path / "legacy-0"
    partition.mkdir()
    (partition / f"{0:020d}.log").write_bytes(b"".join(entries))
    decoded = []
    per_batch = legacy.LegacyBatch._deep_records
    monkeypatch.setattr(legacy.LegacyBatch, "_deep_records", lambda batch: decoded.append(batch) or per_batch(batch))
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    in_bulk = Verification([str(partition)], deep=True)
    found = [f.to_json() for f in in_bulk]
    assert decoded == [] and {f["code"] for f in found} == {"index-missing", "timeindex-missing"}, found
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "never")
    one_by_one = Verification([str(partition)], deep=True)
    assert [f.to_json() for f in one_by_one] == found and len(decoded) == 300
    assert in_bulk.summary == one_by_one.summary and in_bulk.summary.records == offset


def _walked_and_agrees(batch: bytes) -> tuple[bool, bool]:
    """Whether the deep scan marks the batch `checked`, and whether the records skim and the
    header's max timestamp agree (what `checked` vouches for)."""
    columns = KERNEL.columns(1)
    n, _ = KERNEL.scan(KERNEL.view(batch), 0, len(batch), len(batch), True, columns)
    reference = parse_batch(batch, 0, "generated")
    skim = skim_records(reference)
    return bool(n and columns[bulk_scan.CHECKED, 0]), (skim is not None and (reference.count == 0
                                                                              or skim[1] == reference.max_timestamp))


def _small_records(rng: random.Random, count: int) -> list[bytes]:
    """Records as KRaft writes them (null key, a value of a few bytes, no header) and near misses:
    a key, a header, a value of 64 bytes or more (a two-byte size), a null or empty value."""
    records = []
    for i in range(count):
        roll = rng.random()
        key = b"k" * rng.randrange(3) if roll < 0.1 else None
        headers = [(b"h", b"v")] if 0.1 <= roll < 0.2 else []
        value = None if roll > 0.95 else b"v" * (rng.randrange(60, 70) if roll > 0.85 else rng.randrange(30))
        records.append(build_record(i, rng.choice([0, 1, 63, -64, 64, 5000]), key, value, headers))
    return records


@pytest.mark.parametrize("small", [False, True], ids=["any-records", "small-records"])
def test_checked_means_the_records_skim_and_agree_with_the_header(small):
    """Never a batch the skim refuses; and of small records (a null key and no header, as KRaft's:
    `records_agree` reads each from one word and its last byte) every clean batch is walked."""
    rng = random.Random(3 if small else 2)
    checked = refused = 0
    for _ in range(2000 if small else 400):
        count = rng.randrange(0, 4 if small else 5)
        records = _small_records(rng, count) if small else _records(rng, count, False)
        lie = rng.random() < (0.7 if small else 0.5)
        batch = build_batch(5, records, base_timestamp=100,
                            max_timestamp=rng.choice([100, 101, 163, 5100] if small else [99, 4999, 5099]),
                            last_offset_delta=max(0, count - 1) + (small and lie and rng.random() < 0.1))
        if lie:
            batch = _lie_in_records(batch, rng)
        walked, agrees = _walked_and_agrees(batch)
        if walked:
            checked += 1
            assert agrees
        else:
            refused += 1
            assert not (small and agrees and not lie), "a clean batch of small records was not walked"
    assert checked > (300 if small else 50) and refused > (300 if small else 50)


def _loaded(path: Path, mode: str = "auto", cache: Path | None = None) -> set[str]:
    """In a fresh process verifying `path`: which of the kernels, numba and llvmlite it loaded."""
    code = ("import sys; from kafkalog_tools.verify import Verification; list(Verification([sys.argv[1]])); "
            "from kafkalog_tools.native import bulk_scan; "
            "print(bulk_scan.kernel.cache_info().currsize and bulk_scan.kernel() is not None, "
            "'numba' in sys.modules, 'llvmlite' in sys.modules)")
    env = dict(os.environ, **{bulk_scan.MODE_VARIABLE: mode})
    if cache is not None:
        env[kernel_cache.CACHE_VARIABLE] = str(cache)
    result = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, check=True)
    return {name for name, loaded in zip(("kernels", "numba", "llvmlite"), result.stdout.split()) if loaded == "True"}


MAPPED = {"kernels"} if kernel_cache._X86_64 else {"kernels", "llvmlite"}
"""A run that finds the kernels cached: on x86-64 it maps them itself, elsewhere LLVM does."""
BUILT = {"kernels", "numba", "llvmlite"}


def _one_record_partition(directory: Path, batches: int) -> Path:
    directory.mkdir()
    one = build_batch(0, [build_record(0, 0, None, b"x" * 100)])
    (directory / f"{0:020d}.log").write_bytes(b"".join(one for _ in range(batches)))
    return directory


def test_auto_loads_the_kernel_only_where_it_pays(tmp_path):
    small = _one_record_partition(tmp_path / "small-0", 10)
    assert _loaded(small) == set()  # ~0.1 ms batch by batch: not worth ~0.1 s of loading
    assert _loaded(small, "always") == MAPPED  # from the cache KERNEL filled: no numba
    large = _one_record_partition(tmp_path / "large-0", 40_000)
    assert _loaded(large) == MAPPED  # ~0.25 s batch by batch


def test_the_kernels_are_built_once_then_loaded_without_numba(tmp_path):
    partition = _one_record_partition(tmp_path / "p-0", 10)
    cache = tmp_path / "cache"
    assert _loaded(partition, "always", cache) == BUILT  # nothing cached: numba builds them
    [cached] = cache.glob("*.o")  # beside it: the builders' lock file
    assert _loaded(partition, "always", cache) == MAPPED
    data = bytearray(cached.read_bytes())
    data[-100] ^= 0xFF  # a damaged cache file is never loaded: built again and replaced
    cached.write_bytes(bytes(data))
    assert _loaded(partition, "always", cache) == BUILT
    assert _loaded(partition, "always", cache) == MAPPED
    assert sorted(p.name for p in cache.iterdir()) == sorted([cached.name, cached.name[:-2] + ".lock"])


def test_a_build_the_compiler_refused_is_not_tried_again_for_the_same_key(monkeypatch, tmp_path):
    """A numba that no longer compiles the kernels would cost every run ~20 s and ~280 MB: the
    refusal is cached under the key (so runs take the per-batch path at once), while a shortage or
    a missing numba is tried again; another key (new sources, numba or CPU) builds again."""
    monkeypatch.setenv(kernel_cache.CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setattr(kernel_cache, "cache_key", lambda: "a" * 64)
    builds = []

    def refuse(error):
        def build():
            builds.append(error)
            raise error
        return build

    for error in (MemoryError(), ImportError("no numba")):  # not remembered
        monkeypatch.setattr(kernel_cache, "_build", refuse(error))
        for _ in range(2):
            with pytest.raises(type(error)):
                loader.load()
    assert len(builds) == 4
    monkeypatch.setattr(kernel_cache, "_build", refuse(RuntimeError("numba: cannot type this")))
    with pytest.raises(RuntimeError, match="cannot type this"):
        loader.load()
    with pytest.raises(RuntimeError, match="refused them before: RuntimeError: numba: cannot type this"):
        loader.load()
    assert len(builds) == 5
    monkeypatch.setattr(kernel_cache, "cache_key", lambda: "b" * 64)
    with pytest.raises(RuntimeError, match="cannot type this"):
        loader.load()
    assert len(builds) == 6


def test_the_kernels_work_where_nothing_can_be_cached(tmp_path):
    partition = _one_record_partition(tmp_path / "p-0", 10)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    assert _loaded(partition, "always", blocked) == BUILT  # built in the process, used, not kept


@pytest.mark.parametrize("wrong", ["dtype", "layout", "read-only", "rows"])
def test_the_native_entry_points_refuse_arrays_they_cannot_use(wrong):
    import numpy as np

    view, columns = KERNEL.view(bytes(64)), KERNEL.columns(4)
    if wrong == "dtype":
        columns = columns.astype(np.int32)
    elif wrong == "layout":
        columns = np.asfortranarray(columns)
    elif wrong == "read-only":
        columns.flags.writeable = False
    else:
        columns = columns[:5]
    with pytest.raises(ValueError, match="bulk kernel"):
        KERNEL.scan(view, 0, 64, 64, True, columns)


# ---------------------------------------------------------------------------------------------
# rebuild-index: the same recovery, batch by batch or in bulk
# ---------------------------------------------------------------------------------------------


def recover_both_ways(monkeypatch, log: Path, interval: int) -> SegmentRecovery:
    outcomes = []
    for mode in ("never", "always"):
        monkeypatch.setenv(bulk_scan.MODE_VARIABLE, mode)
        state = ProducerState()
        with SegmentFile(log) as segment:
            outcome = recover_segment(segment, state, interval)
        failure = outcome.failure
        outcome.failure = None if failure is None else (type(failure), str(failure))
        outcome.invalid = None if outcome.invalid is None else (type(outcome.invalid), str(outcome.invalid))
        outcomes.append((outcome, state.producers, state.ongoing))
    assert outcomes[1] == outcomes[0]
    return outcomes[0][0]


def test_recovery_in_bulk_equals_batch_by_batch(monkeypatch, tmp_path):
    rng = random.Random(17)
    logs = [Path(p) for p in (sorted(need(GOLDEN / "logs").rglob("*.log")) + sorted(need(REAL).rglob("*.log")))]
    for number in range(40):
        path = tmp_path / f"{number * 200:020d}.log"
        path.write_bytes(generated_segment(rng, number * 200))
        logs.append(path)
    for case in damaged_copies(tmp_path / "damaged"):
        logs += sorted(Path(case).rglob("*.log"))
    outcomes = [recover_both_ways(monkeypatch, log, interval) for log in logs for interval in (0, 4096)]
    assert sum(o.failure is not None for o in outcomes) > 5 and sum(o.invalid is not None for o in outcomes) > 5
    assert sum(len(o.offset_entries) for o in outcomes) > 5_000


def _mixed_segment(rng: random.Random, base: int) -> bytes:
    """V2 batches, lz4 ones, then V0/V1 messages, then V2 again: every way a run of calls ends."""
    from tests.test_bulk_lz4 import lz4_segment

    return b"".join((generated_segment(rng, base), lz4_segment(rng, base + 1000), _legacy_segment(rng, base + 2000),
                     generated_segment(rng, base + 3000)))


@pytest.mark.parametrize("on_thread", [True, False], ids=["scan-thread", "in-line"])
def test_runs_yield_what_calls_one_after_the_other_read(tmp_path, monkeypatch, on_thread):
    """`Reader.runs` scans the next range on its own thread while the caller holds the columns of
    this one (or, with a process of ours on every CPU, in line before yielding it): they must still
    be what a plain `read` gives when the caller looks at them."""
    monkeypatch.setattr(bulk_scan, "SCANNING_PROCESSES", 1 if on_thread else 1 << 20)
    monkeypatch.setattr(bulk_scan, "usable_cpus", lambda: 2)
    rng = random.Random(23)
    calls = 0
    for number in range(12):
        path = tmp_path / f"{number:020d}.log"
        path.write_bytes(_mixed_segment(rng, 0))
        with SegmentFile(path) as log:
            position = 0
            while position < log.end:
                one, ahead = bulk_scan.Reader(log, 2048), bulk_scan.Reader(log, 2048)
                expected, at = [], position
                while True:
                    n, after, stopped = one.read(at, True)
                    expected.append((one.columns[:, :n].copy(), after, stopped))
                    if stopped or after + MAGIC_OFFSET >= log.end or log.buffer[after + MAGIC_OFFSET] < 2:
                        break
                    at = after
                assert ahead.on_thread == on_thread
                got = []
                for columns, n, after, stopped in ahead.runs(position, True):
                    time.sleep(0.001)  # the next range is being scanned meanwhile
                    got.append((columns[:, :n].copy(), after, stopped))
                assert len(got) == len(expected)
                for (columns, after, stopped), (want, want_after, want_stopped) in zip(got, expected):
                    assert (columns == want).all() and (after, stopped) == (want_after, want_stopped)
                calls += len(got)
                position = max(after + 1, position + 1) if stopped or after >= log.end else after
                position = _next_v2(log, position)
    assert calls > 200


def test_a_closed_readers_buffers_serve_the_next_reader_unless_something_holds_them(tmp_path, monkeypatch):
    """`Reader.close` gives its two column buffers to the next reader made in this process (a new
    buffer's pages are zeroed as the scan first writes them, every segment); a buffer something still
    holds a view of is never handed out again, as the next reader would overwrite what it holds."""
    import weakref

    monkeypatch.setattr(bulk_scan, "_SPARE_COLUMNS", bulk_scan.Spares(keep=2))
    rng = random.Random(29)
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(b"".join(generated_segment(rng, 1000 * i) for i in range(6)))

    def runs_of(reader) -> list:
        return [(columns[:, :n].copy(), after) for columns, n, after, _ in reader.runs(0, True)]

    with SegmentFile(path) as log:
        first = bulk_scan.Reader(log, 2048, 64)
        expected = runs_of(first)
        assert len(expected) > 3
        buffers = [weakref.ref(first.columns), weakref.ref(first.other_columns)]
        first.close()
        second = bulk_scan.Reader(log, 2048, 64)
        got = runs_of(second)
        assert {id(second.columns), id(second.other_columns)} == {id(buffer()) for buffer in buffers}
        assert len(got) == len(expected) and all((a == b).all() and x == y for (a, x), (b, y) in zip(got, expected))
        held = second.columns[:, :5]  # a consumer that kept the run without `FactsRun.held`
        kept = held.copy()
        second.close()
        third = bulk_scan.Reader(log, 2048, 64)
        got = runs_of(third)
        assert held.base is not third.columns and held.base is not third.other_columns
        assert (held == kept).all()
        assert len(got) == len(expected) and all((a == b).all() and x == y for (a, x), (b, y) in zip(got, expected))
        third.close()
    spares = bulk_scan._SPARE_COLUMNS.arrays
    assert len(spares) == 2 and all(spare.base is None for spare in spares)


def _next_v2(log, position: int) -> int:
    """The next position from which a V2 scan reads something, or the end."""
    while position < log.end and not KERNEL.scan(KERNEL.view(log.buffer), position, log.end, log.end, False,
                                                  KERNEL.columns(1))[0]:
        position += 1
    return position


def test_verify_and_recovery_in_small_steps_and_many_threads_equal_batch_by_batch(monkeypatch, tmp_path):
    """Many calls per segment, each scanned ahead while the one before is accepted, and lz4 frames
    and other payloads shared among three threads: still the per-batch path's findings and indexes."""
    monkeypatch.setattr(bulk_scan.Reader, "STEP", 4096)
    monkeypatch.setattr(codecs, "_cpus", lambda: 3)
    monkeypatch.setattr(codecs, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(codecs, "SHARED_PAYLOAD", 0)
    paths = generated_partitions(tmp_path, random.Random(29), 12, _mixed_segment, 10_000)
    codes = {f["code"] for deep in (True, False) for f in verify_both_ways(monkeypatch, paths, deep)}
    assert {"record-corrupt", "crc-mismatch", "offset-not-increasing", "inner-crc-mismatch"} <= codes, codes
    outcomes = [recover_both_ways(monkeypatch, log, 4096) for log in sorted(tmp_path.glob("*/*.log"))]
    assert sum(len(o.offset_entries) for o in outcomes) > 100


def test_prefetch_maps_the_next_range_on_this_linux(tmp_path):
    """The prefetch is live here (MADV_POPULATE_READ exists), not a path that silently switched off."""
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(b"".join(build_batch(n, [build_record(0, 0, None, b"x" * 1000)]) for n in range(3000)))
    with SegmentFile(path) as log:
        prefetch = KERNEL.prefetch(log.buffer)
        if prefetch is None:
            pytest.skip("one CPU: no second core to prefetch on")
        for start in range(0, log.end, 1 << 20):
            prefetch.ahead(start, min(log.end, start + (1 << 20)))
        prefetch.ahead(log.end, log.end)  # waits for the last one
        assert prefetch.working
        assert KERNEL.prefetch(bytes(100)) is None


def test_scan_refuses_a_range_past_the_buffer():
    with pytest.raises(ValueError, match="bulk kernel"):
        KERNEL.scan(KERNEL.view(bytes(64)), 0, 128, 128, True, KERNEL.columns(1))
    with pytest.raises(ValueError, match="bulk kernel"):
        KERNEL.scan(KERNEL.view(bytes(64)), -1, 64, 64, True, KERNEL.columns(1))


@pytest.mark.parametrize("deep", [True, False], ids=["deep", "shallow"])
def test_a_report_keeps_runs_the_scan_has_since_moved_past(monkeypatch, tmp_path, deep):
    """A consumer sees a run's columns only for the call (the scan's buffers take turns); a report
    made without one keeps copies, so its runs still hold what each call saw."""
    from kafkalog_tools.formats.logdir import Segment
    from kafkalog_tools.verify import FactsRun, check_segment

    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    monkeypatch.setattr(bulk_scan.Reader, "STEP", 4096)
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(b"".join(build_batch(n, [build_record(0, 0, None, b"x" * 100)]) for n in range(3000)))
    seen = []
    check_segment(Segment(0, path), True, deep, on_batch=lambda facts: seen.extend(
        facts.rows() if type(facts) is FactsRun else [facts]))
    report = check_segment(Segment(0, path), True, deep)
    assert sum(type(facts) is FactsRun for facts in report.batches) > 10
    kept = [row for facts in report.batches for row in (facts.rows() if type(facts) is FactsRun else [facts])]
    assert kept == seen and [facts.base_offset for facts in kept] == list(range(3000))


def test_last_sequences_as_each_batch_computes_them():
    """`bulk_scan.last_sequences` (numpy, for runs) against `batch.last_sequence` (per batch, Java's
    int wrapping) on the edges of the int range, where a cast or a modulo that went wrong shows."""
    import numpy as np

    from kafkalog_tools.formats.batch import last_sequence

    edges = [-(1 << 31), -(1 << 31) + 1, -5, -1, 0, 1, 9, (1 << 31) - 10, (1 << 31) - 2, (1 << 31) - 1]
    pairs = [(base, delta) for base in edges for delta in edges]
    base, delta = (np.array(column, dtype=np.int64) for column in zip(*pairs))
    assert bulk_scan.last_sequences(base, delta).tolist() == [last_sequence(b, d) for b, d in pairs]


def test_the_build_drops_reference_counting_calls_and_nothing_else():
    from kafkalog_tools.native import kernels

    kept = ["define linkonce_odr void @NRT_incref(ptr captures(address_is_null) %.1) local_unnamed_addr #2 {",
            "  tail call void @NRT_MemInfo_call_dtor(ptr nonnull %.1)",
            "  %.5 = call i64 @other(ptr %arg.buf.0)"]
    dropped = ["  tail call void @NRT_incref(ptr %arg.buf.0), !noalias !222",
               "  call void @NRT_decref(ptr %.16)",
               "  tail call void @NRT_decref(ptr nonnull %.7)"]
    assert kernels._REFCOUNT_CALL.sub("", "\n".join(kept + dropped)).split("\n") == kept + ["", "", ""]

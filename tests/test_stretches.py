"""Verify's scan of a big segment folds plain batches into stretches (`kernels.scan_outlined`,
`FactsRun.stretch`) without keeping their columns: against the per-batch path, and against the
runs of columns it replaces, on the corpus, damaged copies and generated partitions whose plain
stretches are broken by everything that must not be folded (producer ids, control batches, leader
epochs that change or fall, offsets that go back or leave the segment, damage). Chunks of 3
batches make stretches start and end often; a table kept sparse at any size makes every segment
take that path, and calls of 600 bytes make many of them."""
from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.native import bulk_scan
from kafkalog_tools.native.columns import (BASE_OFFSET, LAST_OFFSET_DELTA, LEADER_EPOCH, POSITION, PRODUCER_ID,
                                           RECORDS_COUNT, S_AFTER, S_BYTES, S_EPOCH, S_FIRST_BASE, S_FIRST_LAST,
                                           S_FIRST_POSITION, S_FOLDED, S_KEPT, S_LAST_LAST, S_RECORDS, S_STOPPED, SIZE)
from kafkalog_tools.recovery import Rebuild, RebuildOptions
from kafkalog_tools.verify import Verification, segment
from kafkalog_tools.verify.bulk import BulkScan
from kafkalog_tools.verify.indexes import IndexQueries
from tests.damage import corpus_paths, damaged_copies
from tests.conftest import ROOT

pytest.importorskip("numba", reason="the bulk scan needs numba (an install requirement)")
KERNEL = bulk_scan.kernel()


def verify_three_ways(monkeypatch, paths: list[str], deep: bool) -> tuple[list[dict], dict]:
    """Findings and summaries batch by batch, then in bulk with sparse tables, without and with
    stretches; all three must be equal. Returns the findings and what the stretches did."""
    did = {"stretches": 0, "batches": 0, "read again": 0}
    accept_stretch, rescan, outlines = segment.LogScan.accept_stretch, bulk_scan.Reader.rescan, BulkScan.outlines

    def counted(scan, said, again):
        did["stretches"] += 1
        did["batches"] += said[S_FOLDED]
        return accept_stretch(scan, said, again)

    def counted_rescan(reader, *args):
        did["read again"] += 1
        return rescan(reader, *args)

    monkeypatch.setattr(segment.LogScan, "accept_stretch", counted)
    monkeypatch.setattr(bulk_scan.Reader, "rescan", counted_rescan)
    monkeypatch.setattr(bulk_scan.Reader, "CHUNK", 3)
    monkeypatch.setattr(bulk_scan.Reader, "STEP", 600)
    monkeypatch.setattr(segment, "SPARSE_TABLE_ROWS", 0)
    outcomes = []
    for mode, stretches in (("never", False), ("always", False), ("always", True)):
        monkeypatch.setenv(bulk_scan.MODE_VARIABLE, mode)
        monkeypatch.setattr(BulkScan, "outlines", property(lambda bulk, on=stretches: on and outlines.fget(bulk)))
        run = Verification(paths, deep=deep, max_findings_per_code=sys.maxsize)
        outcomes.append(([f.to_json() for f in run], run.summary, run.target_summaries))
    assert outcomes[1] == outcomes[0]
    assert outcomes[2] == outcomes[0]
    return outcomes[0][0], did


# ---------------------------------------------------------------------------------------------
# Generated partitions: long plain stretches, and what breaks them
# ---------------------------------------------------------------------------------------------


def _plain(offset: int, epoch: int, rng: random.Random) -> bytes:
    """A KRaft-like batch: one small record (now and then two), no producer id."""
    count = 1 if rng.random() < 0.9 else 2
    records = [build_record(i, i, None, b"r" * rng.randrange(4, 40)) for i in range(count)]
    return build_batch(offset, records, last_offset_delta=count - 1, base_timestamp=1_700_000_000_000 + offset,
                       max_timestamp=1_700_000_000_000 + offset + count - 1, partition_leader_epoch=epoch)


def stretchy_segment(rng: random.Random, base: int, damaged: bool = True) -> bytes:
    """Mostly plain batches; the same draws give the same batches undamaged (for its indexes)."""
    out, offset, epoch = [], base, rng.randrange(3)
    for _ in range(rng.randrange(20, 400)):
        roll = rng.random()
        if roll < 0.02:  # a control batch that is no transaction marker (KRaft's LeaderChange)
            record = build_record(0, 0, struct.pack(">hh", 0, 2), b"\0\0" * 4)
            batch = build_batch(offset, [record], attributes=0x20, partition_leader_epoch=epoch)
            step = 1
        elif roll < 0.04:  # an idempotent producer's batch
            batch = build_batch(offset, [build_record(0, 0, b"k", b"v")], producer_id=7, producer_epoch=0,
                                base_sequence=rng.randrange(100), partition_leader_epoch=epoch)
            step = 1
        else:
            batch = _plain(offset, epoch, rng)
            step = int.from_bytes(batch[23:27], "big") + 1
        if damaged and 0.04 < roll < 0.047:
            step = -rng.randrange(0, 3)  # offsets go back
        elif damaged and 0.047 < roll < 0.048:
            step += 1 << 32  # out of the segment's reach
        elif damaged and 0.049 < roll < 0.052:
            batch = batch[:30] + bytes([batch[30] ^ 1]) + batch[31:]  # a CRC that fails
        out.append(batch)
        offset += step
        if rng.random() < 0.02:
            epoch += 1 if rng.random() < 0.9 else -1
    return b"".join(out)


def stretchy_partitions(root: Path, rng: random.Random, count: int) -> list[str]:
    """Partitions of one to three such segments, indexed as rebuild-index indexes them undamaged."""
    paths = []
    for number in range(count):
        partition = root / f"kraft-{number}"
        partition.mkdir(parents=True)
        damaged = {}
        for base in range(0, 1000 * rng.randrange(1, 4), 1000):
            state = rng.getstate()
            (partition / f"{base:020d}.log").write_bytes(stretchy_segment(rng, base, damaged=False))
            rng.setstate(state)
            damaged[base] = stretchy_segment(rng, base)
        list(Rebuild([partition], RebuildOptions(backup=False, index_interval_bytes=rng.choice([0, 300, 4096]))))
        for base, data in damaged.items():
            (partition / f"{base:020d}.log").write_bytes(data)
        paths.append(str(partition))
    return paths


@pytest.mark.parametrize("deep", [True, False], ids=["deep", "shallow"])
def test_stretches_equal_batch_by_batch_on_generated_partitions(monkeypatch, tmp_path, deep):
    findings, did = verify_three_ways(monkeypatch, stretchy_partitions(tmp_path, random.Random(5), 24), deep)
    assert did["read again"] > 0 and did["stretches"] - did["read again"] > 500, did  # (both ways a stretch goes)
    assert {"offset-not-increasing", "offset-overflow", "leader-epoch-decreased", "crc-mismatch"} <= \
        {f["code"] for f in findings}


@pytest.mark.parametrize("deep", [True, False], ids=["deep", "shallow"])
def test_stretches_equal_batch_by_batch_on_the_corpus_and_damaged_copies(monkeypatch, tmp_path, deep):
    paths = corpus_paths() + [str(ROOT / "fixtures" / "example-logdir")] + damaged_copies(tmp_path)
    findings, did = verify_three_ways(monkeypatch, paths, deep)
    assert did["stretches"] > 20, did
    assert len(findings) > 100


# ---------------------------------------------------------------------------------------------
# The kernel against the scan it folds
# ---------------------------------------------------------------------------------------------


def test_scan_outlined_hands_on_every_batch_the_scan_reads(tmp_path):
    """Called as verify calls it, from where each call ended: the stretches' batches (read again)
    and the columns left, in order, are the batches `scan` reads; each stretch is what its
    summary says (counts, first and last offsets, one epoch, no producer id, offsets ascending)
    and keeps its first and last rows."""
    rng = random.Random(9)
    for case in range(40):
        data = stretchy_segment(rng, 0)
        path = tmp_path / f"{case}.log"
        path.write_bytes(data)
        view = KERNEL.view(data)
        expected = KERNEL.columns(len(data) // 61 + 1)
        n, _ = KERNEL.scan(view, 0, len(data), len(data), case % 2 == 0, expected)
        expected = expected[:, :n]
        queries = IndexQueries(*(np.sort(rng.sample(range(len(data)), 20)).astype(np.int64) for _ in range(3)))
        columns, block = KERNEL.columns(64), np.zeros((4, 4096), dtype=np.int64)
        got, at, position = [], 0, 0
        while True:
            left, said = KERNEL.scan_outlined(view, position, min(len(data), position + 700), len(data), case % 2 == 0,
                                              0, 1 << 31, columns, queries, -1, block, at, rng.choice([1, 3, 16]))
            if said[S_FOLDED]:
                stretch = KERNEL.columns(said[S_FOLDED])
                folded, after = KERNEL.scan(view, said[S_FIRST_POSITION], said[S_FIRST_POSITION] + said[S_BYTES],
                                            len(data), case % 2 == 0, stretch)
                stretch = stretch[:, :folded]
                assert folded == said[S_FOLDED] and after == said[S_FIRST_POSITION] + said[S_BYTES]
                last = stretch[BASE_OFFSET] + stretch[LAST_OFFSET_DELTA]
                assert (stretch[PRODUCER_ID] == -1).all() and (stretch[LEADER_EPOCH] == said[S_EPOCH]).all()
                assert (stretch[BASE_OFFSET, 1:] > last[:-1]).all() and (last >= stretch[BASE_OFFSET]).all()
                assert (said[S_FIRST_BASE], said[S_FIRST_LAST], said[S_LAST_LAST]) == (
                    stretch[BASE_OFFSET, 0], last[0], last[-1])
                assert said[S_RECORDS] == stretch[RECORDS_COUNT].sum() and said[S_BYTES] == stretch[SIZE].sum()
                kept = block[0, at:at + said[S_KEPT]]
                assert kept[0] == stretch[POSITION, 0] and kept[-1] == stretch[POSITION, -1]
                assert set(kept.tolist()) <= set(stretch[POSITION].tolist())
                at += said[S_KEPT]
                got.append(stretch)
            if left:
                got.append(columns[:, :left].copy())
            position = said[S_AFTER]
            if said[S_STOPPED] or position >= len(data) or data[position + 16] < 2:
                break
        rows = np.concatenate(got, axis=1) if got else expected[:, :0]
        assert rows.shape == expected.shape and (rows == expected).all(), case

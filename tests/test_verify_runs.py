"""The checks `verify` makes of a run of batches at once (`_offsets_before`, `_epoch_starts`), fast
path and general one, against a batch-by-batch reference on random runs: increasing or not, with and
without leader epochs, after a partition's earlier batches or at its start; both also with the
compiled `rows_apart`'s outline of the run, as verify's bulk scan hands it on."""
from __future__ import annotations

import random

import numpy as np
import pytest

from kafkalog_tools.native import bulk_scan
from kafkalog_tools.native.columns import BASE_OFFSET, LAST_OFFSET_DELTA, LEADER_EPOCH, PRODUCER_ID
from kafkalog_tools.verify.partition import _epoch_starts, _offsets_before

KERNEL = bulk_scan.kernel()


def outline_of(base, last, epochs):
    """`kernels.rows_apart`'s outline of a run with these columns."""
    columns = KERNEL.columns(len(base))
    columns[:] = 0
    columns[BASE_OFFSET, :len(base)], columns[LAST_OFFSET_DELTA, :len(base)] = base, last - base
    columns[LEADER_EPOCH, :len(base)], columns[PRODUCER_ID, :len(base)] = epochs, -1
    return KERNEL.rows_apart(columns, len(base), -(1 << 62), 1 << 62, False)[1]


def offsets_before_one_by_one(base, last, last_offset):
    before, running = [], last_offset
    for i, (b, l) in enumerate(zip(base, last)):
        if running is None:
            before.append(l)
            running = l
            continue
        if b <= running:
            return None
        before.append(running)
        running = max(running, l)
    return before


def epoch_starts_one_by_one(epochs, previous):
    rows, running = [], previous
    for row, epoch in enumerate(epochs):
        if epoch < 0:
            continue
        if epoch < running:
            return None
        if epoch > running:
            rows.append(row)
            running = epoch
    return rows


def _run(rng: random.Random, n: int, shape: str):
    base, last, epochs = [], [], []
    offset, epoch = rng.randrange(0, 1000), rng.choice((-1, 0, 3))
    for _ in range(n):
        offset += rng.choice((1, 1, 2)) if shape != "repeats" or rng.random() > 0.1 else -rng.randrange(0, 3)
        delta = rng.randrange(0, 4) if shape != "negative deltas" or rng.random() > 0.1 else -1
        base.append(offset)
        last.append(offset + delta)
        offset += max(delta, 0)
        if shape == "epochs decrease" and rng.random() < 0.05:
            epoch -= 1
        elif rng.random() < 0.05:
            epoch += 1
        epochs.append(-1 if shape == "some without an epoch" and rng.random() < 0.2 else epoch)
    return np.array(base, dtype=np.int64), np.array(last, dtype=np.int64), np.array(epochs, dtype=np.int64)


@pytest.mark.parametrize("shape", ["increasing", "repeats", "negative deltas", "epochs decrease",
                                   "some without an epoch"])
def test_run_checks_equal_batch_by_batch(shape):
    rng = random.Random(shape)
    fast = 0
    for case in range(400):
        base, last, epochs = _run(rng, rng.choice((1, 2, 5, 50)), shape)
        last_offset = rng.choice((None, int(base[0]) - 1, int(base[0]), int(last.max())))
        expected = offsets_before_one_by_one(base.tolist(), last.tolist(), last_offset)
        outline = outline_of(base, last, epochs)
        for found in (_offsets_before(base, last, last - base, last_offset),
                      _offsets_before(base, last, last - base, last_offset, outline)):
            assert (None if found is None else found.tolist()) == expected, (case, base, last, last_offset)
        previous = rng.choice((-1, 0, int(epochs.max()), int(epochs.max()) + 1))
        expected_starts = epoch_starts_one_by_one(epochs.tolist(), previous)
        assert _epoch_starts(epochs, previous) == expected_starts, (case, epochs)
        assert _epoch_starts(epochs, previous, outline) == expected_starts, (case, epochs)
        fast += bool((last >= base).all() and (base[1:] > last[:-1]).all())
    if shape == "increasing":
        assert fast == 400


def _partition_ending_below_its_largest(tmp_path):
    """Segment 0: batches at offsets 0-9, then one at 12 whose delta of -5 ends it at 7."""
    from kafkalog_tools.formats.record_batch import build_batch, build_record

    def batch(offset: int, delta: int | None = None) -> bytes:
        return build_batch(offset, [build_record(0, 0, b"k", b"v")], last_offset_delta=delta,
                           base_timestamp=1_700_000_000_000, max_timestamp=1_700_000_000_000)

    partition = tmp_path / "t-0"
    partition.mkdir()
    (partition / f"{0:020d}.log").write_bytes(b"".join([batch(i) for i in range(10)] + [batch(12, -5)]))
    return partition, batch


def test_a_run_ending_on_a_negative_delta_leaves_the_largest_last_offset(monkeypatch, tmp_path):
    """After a run whose last batch's delta is below 0 (its last offset below the one before it), the
    partition's last offset stays the largest, as `_replay` keeps it batch by batch: the next
    segment's batch at or below it is out of order. The run path took its last row's, so it saw no
    such batch (mutation fuzzer --differential, seed 3205, case 7318)."""
    from tests.test_bulk_scan import verify_both_ways

    partition, batch = _partition_ending_below_its_largest(tmp_path)
    (partition / f"{8:020d}.log").write_bytes(batch(9))
    findings = verify_both_ways(monkeypatch, [str(partition)], deep=False)
    assert [f["position"] for f in findings if f["code"] == "offset-not-increasing"] == [0]


def test_the_log_end_offset_is_after_the_last_batch_as_kafkas_loader_reads_it(monkeypatch, tmp_path):
    """Kafka's loader ends the log at the last segment's LogSegment.readNextOffset: its last batch's
    next offset. A last batch at 12 whose delta is -5 ends the log at 8, not after the largest
    offset, 10 (kafka-oracle `recover --mode loader` on these bytes: logEndOffset 8; seed 3205's
    case 7318: 72, where we said 73)."""
    from tests.test_bulk_scan import verify_both_ways

    partition, _ = _partition_ending_below_its_largest(tmp_path)
    (partition / "leader-epoch-checkpoint").write_text("0\n1\n0 9\n")
    findings = verify_both_ways(monkeypatch, [str(partition)], deep=False)
    assert any("past the log end offset 8:" in f["message"] for f in findings), findings

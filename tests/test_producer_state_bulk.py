"""The producer state moved a run at a time (`ProducerState.plan_run` / `commit_run`: transactional
producers replayed one batch at a time, the others put at their last batch) against the per-batch
reference path (`ProducerState.apply` on every batch, KAFKALOG_BULK=never).

The segments here are what production logs look like, and what goes wrong in them: dozens of
idempotent producers interleaved, a third of them transactional, COMMIT and ABORT markers, producer
epoch bumps with and without a sequence reset, epochs going back, sequence gaps, duplicates sent
again, markers with no transaction open or an older coordinator epoch, a producer writing outside
its open transaction (Kafka's recovery throws), markers Kafka cannot read, offsets going back,
batches without a producer id, every codec, and producer snapshots in the middle of the log.
"""
from __future__ import annotations

import dataclasses
import random
import shutil
import sys
from pathlib import Path

import pytest

from kafkalog_tools import codecs
from kafkalog_tools.formats import producer_snapshot, txn_index
from kafkalog_tools.formats.control import CONTROL_KEY, END_TXN_MARKER
from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, build_batch, build_record, parse_batch
from kafkalog_tools.native import bulk_scan
from kafkalog_tools.recovery import ProducerState, ProducerStatus, Rebuild, RebuildOptions
from kafkalog_tools.verify.partition import _SegmentReplay
from tests.test_bulk_scan import recover_both_ways, verify_both_ways

pytest.importorskip("numba", reason="the bulk scan needs numba (an install requirement)")

CODECS = ["none", "none", "lz4", "zstd", "snappy", "gzip"]


def _marker(kind: int, coordinator_epoch: int) -> bytes:
    return build_record(0, 0, CONTROL_KEY.build(dict(version=0, type=kind)),
                        END_TXN_MARKER.build(dict(version=0, coordinator_epoch=coordinator_epoch)))


def _odd_marker(rng: random.Random) -> bytes:
    """One Kafka cannot take as a transaction marker: no key, a KRaft control type, a short value, a
    record cut short (the first three make Kafka's recovery throw, the last cuts the log after it)."""
    return rng.choice([b"\x10\x00", b"\x10\x00", build_record(0, 0, None, b"\0\0\0\0\0\0"),
                       build_record(0, 0, CONTROL_KEY.build(dict(version=0, type=2)), b""),
                       build_record(0, 0, CONTROL_KEY.build(dict(version=0, type=0)), b"\0")])


def producer_segment(rng: random.Random, base: int, trouble: float) -> bytes:
    """Interleaved producers' batches from offset `base`; `trouble`: how often something is wrong."""
    ids = rng.sample(range(1000, 1200), rng.randrange(1, 40))
    producers = {pid: {"epoch": rng.randrange(2), "sequence": 0, "open": False, "coordinator": 3} for pid in ids}
    transactional = {pid for pid in ids if rng.random() < 0.35}
    out, offset, timestamp = [], base, 1_700_000_000_000
    for _ in range(rng.randrange(40, 300)):
        timestamp += rng.randrange(0, 50)
        pid = rng.choice(ids)
        state = producers[pid]
        ids_of = dict(producer_id=pid, producer_epoch=state["epoch"], partition_leader_epoch=0)
        if rng.random() < 0.04:  # a batch without a producer id (an old client, or acks=0 tooling)
            ids_of = dict(partition_leader_epoch=0)
            pid = -1
        elif (pid in transactional and state["open"] and rng.random() < 0.3) or rng.random() < trouble / 4:
            # its marker (or, with no transaction open, a stray one)
            coordinator = state["coordinator"] - (rng.random() < trouble)
            epoch = state["epoch"] + (rng.random() < trouble)  # the coordinator bumped the epoch to abort
            records = [_odd_marker(rng) if rng.random() < trouble else _marker(rng.randrange(2), coordinator)]
            out.append(build_batch(offset, records, base_timestamp=timestamp, max_timestamp=timestamp,
                                   attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, **dict(ids_of, producer_epoch=epoch)))
            state.update(open=False, coordinator=coordinator)
            if epoch != state["epoch"]:
                state.update(epoch=epoch, sequence=0)
            offset += 1
            continue
        count = rng.randrange(1, 5)
        roll = rng.random()
        if roll < trouble:
            state["sequence"] += rng.randrange(1, 4)  # a gap
        elif roll < 2 * trouble:
            state["sequence"] = max(0, state["sequence"] - count)  # a duplicate, sent again
        elif roll < 3 * trouble:
            state["epoch"] += 1  # a new epoch, at sequence 0 or not
            state["sequence"] = 0 if rng.random() < 0.7 else state["sequence"]
        elif roll < 3.5 * trouble:
            state["epoch"] = max(0, state["epoch"] - 1)  # an epoch going back
        in_txn = pid in transactional and not (state["open"] and rng.random() < trouble / 5)
        if pid >= 0:
            ids_of.update(producer_epoch=state["epoch"], base_sequence=state["sequence"])
            state["sequence"] += count
            state["open"] = state["open"] or in_txn
        records = [build_record(i, i, f"key-{pid}".encode(), b"v" * rng.randrange(0, 300)) for i in range(count)]
        out.append(build_batch(offset, records, base_timestamp=timestamp, max_timestamp=timestamp + count - 1,
                               compression_id=codecs.IDS[rng.choice(CODECS)],
                               attributes=ATTR_TRANSACTIONAL if in_txn and pid >= 0 else 0, **ids_of))
        offset += count
        if rng.random() < trouble / 3:
            offset -= rng.randrange(1, 8)  # offsets going back: Kafka's recovery throws at the index append
    return b"".join(out)


def producer_partitions(root: Path, rng: random.Random, count: int) -> list[Path]:
    """Partitions of one to three segments; some with a producer snapshot inside the log."""
    partitions = []
    for number in range(count):
        partition = root / f"producers-{number}"
        partition.mkdir()
        trouble = rng.choice([0.0, 0.0, 0.01, 0.05])
        for base in range(0, 2000 * rng.randrange(1, 4), 2000):
            (partition / f"{base:020d}.log").write_bytes(producer_segment(rng, base, trouble))
        if rng.random() < 0.3:
            at = rng.randrange(1, 1500)
            entries = [producer_snapshot.ProducerEntry(1000 + i, 0, 5, at - 1, 0, 1_700_000_000_000, 3, -1)
                       for i in range(rng.randrange(0, 4))]
            (partition / f"{at:020d}.snapshot").write_bytes(producer_snapshot.build(entries))
        partitions.append(partition)
    return partitions


@pytest.fixture(scope="module")
def partitions(tmp_path_factory) -> list[Path]:
    return producer_partitions(tmp_path_factory.mktemp("producers"), random.Random(2323), 40)


@pytest.fixture
def runs_planned(monkeypatch) -> list[tuple[int, int]]:
    """(rows kept apart, rows put at once) of each run `plan_run` planned."""
    planned = []
    plan_run = ProducerState.plan_run

    def watched(self, columns, last):
        plan = plan_run(self, columns, last)
        planned.append((len(plan.apart), len(plan.plain)))
        return plan

    monkeypatch.setattr(ProducerState, "plan_run", watched)
    return planned


@pytest.mark.parametrize("gather", [None, 7, "alone"], ids=["gathered", "seven-at-a-time", "runs-alone"])
@pytest.mark.parametrize("deep", [True, False], ids=["deep", "shallow"])
def test_verify_moves_producers_in_bulk_as_batch_by_batch(monkeypatch, partitions, runs_planned, deep, gather):
    if gather == "alone":  # every run of 3 batches or more replayed as it comes, not gathered
        monkeypatch.setattr(_SegmentReplay, "ALONE", 3)
        monkeypatch.setattr(_SegmentReplay, "ALONE_WITH_PRODUCERS", 3)
    elif gather is not None:  # what is gathered replayed every few batches: after a run, after a marker
        monkeypatch.setattr(_SegmentReplay, "GATHER", gather)
    findings = verify_both_ways(monkeypatch, [str(p) for p in partitions], deep)
    codes = {f["code"] for f in findings}
    assert {"producer-sequence-gap", "producer-epoch-decreased", "coordinator-epoch-decreased",
            "transaction-state-invalid", "txnindex-missing", "snapshot-disagrees"} <= codes, codes
    # the runs mixed both kinds of producer: the fast path was taken, not just the per-batch one
    assert sum(1 for apart, plain in runs_planned if apart and plain) > 20, runs_planned


def test_runs_replayed_without_the_kernels_move_producers_as_batch_by_batch(monkeypatch, partitions):
    """Stage 2 may replay runs where the kernels are not loaded (a Spark driver replaying what its
    executors read): every row kept apart then goes through `apply`, with the same findings."""
    from kafkalog_tools.native import bulk_scan

    replay_rows, replayed = ProducerState.replay_rows, []

    def without_kernels(self, *arguments):
        with monkeypatch.context() as patched:
            patched.setattr(bulk_scan, "kernel", lambda: None)
            replayed.append(len(arguments[2]))
            return replay_rows(self, *arguments)

    monkeypatch.setattr(ProducerState, "replay_rows", without_kernels)
    verify_both_ways(monkeypatch, [str(p) for p in partitions[:15]], True)
    assert sum(replayed) > 500, replayed


def test_recovery_moves_producers_in_bulk_as_batch_by_batch(monkeypatch, partitions, runs_planned):
    outcomes = [recover_both_ways(monkeypatch, log, interval)
                for partition in partitions for log in sorted(partition.glob("*.log")) for interval in (0, 4096)]
    assert sum(o.failure is not None for o in outcomes) > 3  # Kafka throws (a write outside its transaction...)
    assert sum(o.invalid is not None for o in outcomes) > 3  # ... or cuts the log (a marker it cannot read)
    assert sum(len(o.aborted_txns) for o in outcomes) > 100
    assert sum(1 for apart, plain in runs_planned if apart and plain) > 20, runs_planned


def _loader_rebuilds(partition: Path):
    """`rebuild_producer_state` as recovering a segment past the partition's last makes it: from the
    latest snapshot (else the log start) over every segment; what it raises, or the state it ends with."""
    from kafkalog_tools.errors import KafkaLogError
    from kafkalog_tools.formats.logdir import read_partition_dir
    from kafkalog_tools.producer_rebuild import LoadedSegment, Snapshots, rebuild_producer_state

    found = read_partition_dir(partition)
    segments = [LoadedSegment(s.base_offset, s.log, None, lambda target: 0) for s in found.segments]
    try:
        state, _ = rebuild_producer_state(segments, Snapshots(found.snapshots), 0, 10**6, clean_shutdown=False)
    except KafkaLogError as exc:
        return str(exc)
    return state.snapshot_entries(), state.ongoing, state.completed


def test_the_loader_rebuilds_producers_in_bulk_as_batch_by_batch(monkeypatch, partitions, runs_planned):
    """The producer state Kafka's loader rebuilds (`producer_rebuild`) in runs read by the compiled
    scan against batch by batch, on the same partitions: producers, open transactions and the
    transactions completed on the way (for the last stable offset); a partition where Kafka throws (a
    non-transactional batch in an open transaction, a marker it cannot read) throws the same."""
    outcomes = {}
    for mode in ("never", "always"):
        monkeypatch.setenv(bulk_scan.MODE_VARIABLE, mode)
        outcomes[mode] = [_loader_rebuilds(partition) for partition in partitions]
    assert outcomes["always"] == outcomes["never"]
    assert 5 < sum(isinstance(outcome, str) for outcome in outcomes["never"]) < len(partitions) - 5
    assert sum(len(outcome[2]) for outcome in outcomes["never"] if not isinstance(outcome, str)) > 50
    assert sum(1 for apart, plain in runs_planned if apart and plain) > 20, runs_planned


def test_the_compiled_plan_is_the_numpy_plan(partitions):
    """`plan_run` through the kernels (`producer_slots`, `plan_producers`) against `_plan_in_numpy`,
    run by run, with anomalies reported and not, the state moved batch by batch between runs."""
    from kafkalog_tools.errors import KafkaLogError
    from kafkalog_tools.formats.record_batch import parse_batch
    from kafkalog_tools.formats.segment import SegmentFile

    if bulk_scan.kernel() is None:
        pytest.skip("no compiled kernels here")
    compared, apart, plain = 0, 0, 0
    for partition in partitions:
        for on_anomaly in (None, lambda *anomaly: None):
            state = ProducerState(on_anomaly)
            for log in sorted(partition.glob("*.log")):
                with SegmentFile(log) as segment:
                    for columns, n, _, _ in bulk_scan.Reader(segment, rows=97).runs(0, False):
                        columns = columns[:, :n]
                        last = columns[bulk_scan.BASE_OFFSET] + columns[bulk_scan.LAST_OFFSET_DELTA]
                        ours, reference = state.plan_run(columns, last), state._plan_in_numpy(columns)
                        assert ours.apart == reference.apart
                        assert ours.plain.tolist() == reference.plain.tolist()
                        assert (sorted(ours.last_rows[~ours.slot_apart].tolist())
                                == sorted(reference.last_rows[~reference.slot_apart].tolist()))
                        compared, apart, plain = compared + 1, apart + len(ours.apart), plain + len(ours.plain)
                        for position in columns[bulk_scan.POSITION].tolist():
                            try:
                                state.apply(parse_batch(segment.buffer, position, segment.path))
                            except KafkaLogError:
                                pass
    assert compared > 100 and apart > 1000 and plain > 1000, (compared, apart, plain)


def test_a_producer_status_copy_is_equal_and_apart():
    fields = [field.name for field in dataclasses.fields(ProducerStatus)]
    status = ProducerStatus(*range(1, len(fields) + 1))
    copy = status.copy()
    assert copy == status and copy is not status
    assert all(getattr(copy, name) == getattr(status, name) for name in fields)


def test_the_producer_table_holds_statuses_as_they_were_put():
    """`ProducerTable`: statuses in and out unchanged (an open transaction and none), unknown
    producers read as a fresh `ProducerStatus`, producers added in any order kept sorted."""
    import numpy as np

    from kafkalog_tools.recovery import ProducerTable

    statuses = [ProducerStatus(9, 2, 5, 1_700, 40, 7, 41, 3), ProducerStatus(3, 0, -1, 1_600, None, 0, 12, 0)]
    table = ProducerTable.of(statuses)
    assert table.statuses() == {3: statuses[1], 9: statuses[0]}
    assert table.status(9) == statuses[0] and table.status(4) is None
    fresh = ProducerTable.of([ProducerStatus(4), ProducerStatus(1)])
    got = table.get(np.array([4, 9, 1], dtype=np.int64))
    assert ProducerTable(got).statuses() == {4: ProducerStatus(4), 9: statuses[0], 1: ProducerStatus(1)}
    table.put(fresh.fields)
    assert table.fields[bulk_scan.P_PRODUCER_ID].tolist() == [1, 3, 4, 9]
    assert ProducerTable.of([]).get(np.array([5], dtype=np.int64)).tolist() == ProducerTable.of(
        [ProducerStatus(5)]).fields.tolist()


def test_apply_over_the_bulk_table_and_saved_states_restore():
    """Batches `apply` replays after a bulk run read the producers from the run's table and move
    them over it; `saved` and `restore` take both; `producers` then shows every producer once."""
    from kafkalog_tools.formats.record_batch import parse_batch

    def batch(offset: int, producer_id: int, sequence: int):
        raw = build_batch(offset, [build_record(0, 0, None, b"v")], base_timestamp=offset, max_timestamp=offset,
                          producer_id=producer_id, producer_epoch=1, base_sequence=sequence, partition_leader_epoch=0)
        return parse_batch(raw, 0, "mem")

    state = ProducerState()
    state.apply(batch(0, 7, 0))
    state._bulk_table()  # as a bulk run leaves it
    saved = state.saved()
    state.apply(batch(1, 7, 1))
    state.apply(batch(2, 8, 0))
    assert state._table is not None and set(state._statuses) == {7, 8}
    assert {pid: (s.last_sequence, s.last_offset) for pid, s in state.producers.items()} == {7: (1, 1), 8: (0, 2)}
    assert state._table is None
    state.restore(saved)
    assert {pid: (s.last_sequence, s.last_offset) for pid, s in state.producers.items()} == {7: (0, 0)}
    state.restore(saved)
    state.apply(batch(3, 7, 1))
    state._bulk_table()  # folded into the restored table, in place
    assert state.producers[7].last_offset == 3
    state.restore(saved)  # a saved state restores again, unchanged by what moved after a restore
    assert {pid: (s.last_sequence, s.last_offset) for pid, s in state.producers.items()} == {7: (0, 0)}


def test_a_batch_whose_last_offset_wraps_leaves_kafkas_offset_delta(monkeypatch, tmp_path):
    """A base offset near Long.MAX whose last offset wraps (a flipped bit: the CRC does not cover the
    base offset): Kafka's producer state keeps `(int) (lastOffset - firstOffset)` as the offset delta.
    The per-batch path kept Python's unwrapped difference, which the bulk path's int64 producer table
    could not hold: verify crashed when a bulk run of producers followed (mutation fuzzer, seed 3202)."""
    def batch(offset: int, producer: int, sequence: int) -> bytes:
        return build_batch(offset, [build_record(i, i, b"k", b"v") for i in range(4)],
                           base_timestamp=1_700_000_000_000, max_timestamp=1_700_000_000_003, producer_id=producer,
                           producer_epoch=0, base_sequence=sequence, partition_leader_epoch=0)

    wrapping = batch((1 << 63) - 1, 8, 0)
    state = ProducerState()
    state.apply(parse_batch(wrapping, 0, "wrapping.log", 1 << 20))
    status = state.producers[8]
    assert (status.last_offset, status.offset_delta) == (-(1 << 63) + 2, 3)
    partition = tmp_path / "wrapping-0"
    partition.mkdir()
    later = [batch(4 * i, 7 + i % 2, 4 * (i // 2) + 4 * (i % 2)) for i in range(1, 400)]
    (partition / f"{0:020d}.log").write_bytes(b"".join([batch(0, 7, 0), wrapping, *later]))
    for deep in (True, False):
        findings = verify_both_ways(monkeypatch, [str(partition)], deep)
        assert "offset-overflow" in {finding["code"] for finding in findings}


def test_recovery_fails_at_the_abort_going_back_however_the_batches_come(monkeypatch, tmp_path):
    """Producer 7 aborts at offset 5, then producer 8's marker at offset 3 aborts its transaction:
    TransactionIndex.append throws at that marker, its bytes counted valid. The bulk path learnt
    of it after the whole run, so it said no position and counted the batches after the marker
    valid too (mutation fuzzer --differential, seed 3204, cases 1995 and 7265)."""
    def ids(producer: int) -> dict:
        return dict(producer_id=producer, producer_epoch=0, base_timestamp=1_700_000_000_000,
                    max_timestamp=1_700_000_000_000)

    def data(offset: int, producer: int) -> bytes:
        return build_batch(offset, [build_record(0, 0, b"k", b"v")], attributes=ATTR_TRANSACTIONAL, base_sequence=0,
                           **ids(producer))

    def abort(offset: int, producer: int) -> bytes:
        return build_batch(offset, [_marker(0, 1)], attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, **ids(producer))

    batches = [data(0, 7), data(1, 8), abort(5, 7), abort(3, 8)]
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(b"".join(batches + [data(6 + i, 9 + i) for i in range(40)]))
    recovered = recover_both_ways(monkeypatch, log, 4096)
    _, says = recovered.failure
    assert "must increase sequentially, but 3 is not greater than current last offset 5" in says
    assert (recovered.batches, recovered.valid_bytes) == (4, sum(map(len, batches)))


def test_the_bench_production_segment_verifies_clean_both_ways(monkeypatch, tmp_path):
    """bench/run.py's `prod` variant, small: the same recovery both ways, and with the indexes it
    writes (the transaction index among them), no finding on either path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_run", Path(__file__).parent.parent / "bench" / "run.py")
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)  # (its dataclasses look their module up)
    spec.loader.exec_module(bench)
    variant = next(v for v in bench.VARIANTS if v.name == "prod")
    partition = tmp_path / "prod-0"
    partition.mkdir()
    log = partition / "00000000000000000000.log"
    bench.write_segment(log, variant, 2 << 20)
    (partition / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    recovered = recover_both_ways(monkeypatch, log, 4096)
    assert recovered.failure is None and recovered.invalid is None and len(recovered.aborted_txns) > 10
    list(Rebuild([partition], RebuildOptions(backup=False)))
    assert verify_both_ways(monkeypatch, [str(partition)], deep=True) == []


# ---------------------------------------------------------------------------------------------
# Transaction markers the kernel reads (`kernels.plain_marker`) and those it leaves to the
# per-batch path
# ---------------------------------------------------------------------------------------------

def _key(version: int, kind: int) -> bytes:
    return CONTROL_KEY.build(dict(version=version, type=kind))


def _value(version: int, coordinator_epoch: int) -> bytes:
    return END_TXN_MARKER.build(dict(version=version, coordinator_epoch=coordinator_epoch))


MARKER_SHAPES = {
    # name: (records, timestamp delta of the batch's max timestamp, codec, read by the kernel)
    "abort": ([build_record(0, 0, _key(0, 0), _value(0, 5))], 0, "none", True),
    "commit": ([build_record(0, 0, _key(0, 1), _value(0, 5))], 0, "none", True),
    "negative-coordinator-epoch": ([build_record(0, 0, _key(0, 1), _value(0, -7))], 0, "none", True),
    "largest-coordinator-epoch": ([build_record(0, 0, _key(0, 0), _value(0, 2**31 - 1))], 0, "none", True),
    "key-version-1": ([build_record(0, 0, _key(1, 1), _value(0, 5))], 0, "none", False),
    "key-version-negative": ([build_record(0, 0, _key(-1, 1), _value(0, 5))], 0, "none", False),
    "leader-change-type": ([build_record(0, 0, _key(0, 2), _value(0, 5))], 0, "none", False),
    "type-256": ([build_record(0, 0, _key(0, 256), _value(0, 5))], 0, "none", False),
    "value-version-1": ([build_record(0, 0, _key(0, 0), _value(1, 5))], 0, "none", False),
    "value-version-negative": ([build_record(0, 0, _key(0, 0), _value(-1, 5))], 0, "none", False),
    "short-value": ([build_record(0, 0, _key(0, 1), b"\0\0\0\0\0")], 0, "none", False),
    "long-value": ([build_record(0, 0, _key(0, 1), _value(0, 5) + b"\0")], 0, "none", False),
    "null-key": ([build_record(0, 0, None, _value(0, 5))], 0, "none", False),
    "null-value": ([build_record(0, 0, _key(0, 1), None)], 0, "none", False),
    "short-key": ([build_record(0, 0, b"\0\0\0", _value(0, 5))], 0, "none", False),
    "a-header": ([build_record(0, 0, _key(0, 1), _value(0, 5), [(b"h", b"")])], 0, "none", False),
    "record-attributes": ([build_record(0, 0, _key(0, 1), _value(0, 5), attributes=1)], 0, "none", False),
    "timestamp-delta": ([build_record(0, 3, _key(0, 1), _value(0, 5))], 3, "none", False),
    "max-timestamp-off": ([build_record(0, 0, _key(0, 1), _value(0, 5))], 9, "none", False),
    "two-records": ([build_record(0, 0, _key(0, 0), _value(0, 5)), build_record(1, 0, _key(0, 1), _value(0, 5))], 0,
                    "none", False),
    "lz4": ([build_record(0, 0, _key(0, 1), _value(0, 5))], 0, "lz4", False),
    "gzip": ([build_record(0, 0, _key(0, 0), _value(0, 5))], 0, "gzip", False),
}


def _shape_batch(offset: int, shape: str, producer_id: int, timestamp: int, attributes: int = 0) -> bytes:
    records, max_delta, codec, _ = MARKER_SHAPES[shape]
    return build_batch(offset, records, last_offset_delta=len(records) - 1, base_timestamp=timestamp,
                       max_timestamp=timestamp + max_delta, compression_id=codecs.IDS[codec],
                       attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL | attributes, producer_id=producer_id,
                       producer_epoch=0, partition_leader_epoch=0)


def marker_partition(root: Path, rounds: int) -> Path:
    """Transactional producers, each a batch then a marker of one of `MARKER_SHAPES`, interleaved with
    idempotent ones; a stray marker (no transaction open) and a LogAppendTime one among them."""
    partition = root / "markers-0"
    partition.mkdir()
    out, offset, timestamp = [], 0, 1_700_000_000_000
    sequences = {}
    shapes = list(MARKER_SHAPES)
    for turn in range(rounds):
        for number, shape in enumerate(shapes):
            producer_id = 5000 + number
            timestamp += 1
            for pid, transactional in ((producer_id, True), (9000 + turn % 7, False)):
                records = [build_record(0, 0, b"k", b"v" * 20), build_record(1, 1, b"k", b"w")]
                out.append(build_batch(offset, records, base_timestamp=timestamp, max_timestamp=timestamp + 1,
                                       attributes=ATTR_TRANSACTIONAL if transactional else 0, producer_id=pid,
                                       producer_epoch=0, base_sequence=sequences.get(pid, 0), partition_leader_epoch=0))
                sequences[pid] = sequences.get(pid, 0) + 2
                offset += 2
            out.append(_shape_batch(offset, shape, producer_id, timestamp))
            offset += len(MARKER_SHAPES[shape][0])
        out.append(_shape_batch(offset, "commit", 4999, timestamp))  # stray: nothing open
        out.append(_shape_batch(offset + 1, "abort", 4998, timestamp, attributes=0x08))  # LogAppendTime
        out.append(_shape_batch(offset + 2, "abort", -1, timestamp))  # no producer id
        offset += 3
    (partition / f"{0:020d}.log").write_bytes(b"".join(out))
    return partition


def test_the_kernel_reads_only_markers_as_kafka_writes_them(tmp_path):
    from kafkalog_tools.formats.record_batch import parse_batch
    from kafkalog_tools.native import bulk_scan

    kernel = bulk_scan.kernel()
    for shape, (_, _, _, plain) in MARKER_SHAPES.items():
        data = _shape_batch(7, shape, 5000, 1_700_000_000_000)
        columns = kernel.columns()
        n, _ = kernel.scan(kernel.view(data), 0, len(data), len(data), False, columns)
        assert n == 1, shape
        marker = columns[bulk_scan.MARKER, 0]
        assert (marker != bulk_scan.NOT_A_MARKER) == plain, shape
        if plain:
            batch = parse_batch(data, 0, "x")
            [record] = batch.records_reading_controls()
            assert record == bulk_scan.marker_record(0, 7, batch.base_timestamp, batch.base_sequence, int(marker),
                                                     int(columns[bulk_scan.COORDINATOR_EPOCH, 0])), shape
            assert record.control.name == ("ABORT", "COMMIT")[int(marker)]
    data = build_batch(0, MARKER_SHAPES["commit"][0], producer_id=5000)  # a data batch with a marker's bytes
    columns = kernel.columns()
    kernel.scan(kernel.view(data), 0, len(data), len(data), False, columns)
    assert columns[bulk_scan.MARKER, 0] == bulk_scan.NOT_A_MARKER


@pytest.mark.parametrize("deep", [True, False], ids=["deep", "shallow"])
def test_markers_of_every_shape_verify_in_bulk_as_batch_by_batch(monkeypatch, tmp_path, deep):
    partition = marker_partition(tmp_path, 3)
    findings = verify_both_ways(monkeypatch, [str(partition)], deep)
    assert {"transaction-state-invalid"} <= {f["code"] for f in findings}  # the markers Kafka cannot read
    log = next(partition.glob("*.log"))
    for interval in (0, 100, 4096):
        recover_both_ways(monkeypatch, log, interval)


def test_markers_read_by_the_kernel_rebuild_the_same_indexes(monkeypatch, tmp_path):
    """Only markers Kafka can read, so that recovery goes to the end: the same .txnindex, snapshot
    and indexes from `rebuild-index` both ways."""
    partition = tmp_path / "in" / "plain-0"
    partition.mkdir(parents=True)
    out, offset, timestamp = [], 0, 1_700_000_000_000
    for turn in range(400):
        producer_id = 7000 + turn % 13
        out.append(build_batch(offset, [build_record(0, 0, b"k", b"v" * 40)], base_timestamp=timestamp + turn,
                               max_timestamp=timestamp + turn, attributes=ATTR_TRANSACTIONAL, producer_id=producer_id,
                               producer_epoch=0, base_sequence=turn // 13, partition_leader_epoch=0))
        out.append(_shape_batch(offset + 1, ("abort", "commit")[turn % 3 == 0], producer_id, timestamp + turn))
        offset += 2
    log = partition / f"{0:020d}.log"
    log.write_bytes(b"".join(out))
    outcome = recover_both_ways(monkeypatch, log, 256)
    assert len(outcome.aborted_txns) > 200 and outcome.failure is None and outcome.invalid is None
    written = []
    for mode in ("never", "always"):
        monkeypatch.setenv("KAFKALOG_BULK", mode)
        target = tmp_path / mode
        list(Rebuild([partition], RebuildOptions(index_interval_bytes=1024, output_dir=target)))
        written.append({p.name: p.read_bytes() for p in sorted(target.rglob("*")) if p.is_file()})
    assert written[0] == written[1] and any(name.endswith(".txnindex") for name in written[0])


def test_txn_indexes_compared_in_bulk_as_batch_by_batch(monkeypatch, partitions, tmp_path):
    """Each segment's .txnindex against the aborted transactions and ABORT markers the replay
    found, both ways: as rebuild-index writes them (where Kafka's recovery stops, the indexes after
    disagree), with entries changed, dropped or added; and in partitions whose first segment is gone
    (retention), where the producer state is not known and any ABORT marker of the segment explains
    an entry."""
    copies, changed = [_aborted_across_segments(tmp_path / "across-0")], 0
    for partition in partitions:
        shutil.copytree(partition, tmp_path / partition.name)
        copies.append(tmp_path / partition.name)
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "never")
    list(Rebuild([str(c) for c in copies], RebuildOptions(backup=False)))
    for copy in [c for c in copies if len(list(c.glob("*.log"))) > 1]:
        cut = shutil.copytree(copy, tmp_path / f"cut-{copy.name}")
        for path in [*cut.glob(f"{0:020d}.*"), *cut.glob("*.snapshot")]:
            path.unlink()
        copies.append(cut)
    written = sorted(tmp_path.glob("*/*.txnindex"))
    assert sum(path.stat().st_size for path in written) > 100 * txn_index.ENTRY.size
    rebuilt = verify_both_ways(monkeypatch, [str(c) for c in copies], deep=False)
    explained = [f for f in rebuilt if "cut-across-0" in f["file"]]
    assert explained and not [f for f in explained if f["code"].startswith("txnindex-")], explained
    for path in written[::3]:
        entries = txn_index.TransactionIndex(path).entries()
        if len(entries) < 3:
            continue
        changed += 1
        entries[0] = dataclasses.replace(entries[0], last_stable_offset=entries[0].last_stable_offset + 1)
        del entries[1]
        entries.append(dataclasses.replace(entries[-1], producer_id=424242, last_offset=entries[-1].last_offset + 1))
        path.write_bytes(txn_index.build(entries))
    assert changed > 3
    damaged = verify_both_ways(monkeypatch, [str(c) for c in copies], deep=False)
    codes = [[f["code"] for f in found if f["code"].startswith("txnindex-")] for found in (rebuilt, damaged)]
    assert len(codes[1]) > len(codes[0]) + 2 * changed
    assert {"txnindex-entry-mismatch", "txnindex-missing-abort", "txnindex-unknown-abort"} <= set(codes[1])


def _aborted_across_segments(partition: Path) -> Path:
    """A transaction of producer 7 whose one batch is in the first segment and whose ABORT marker
    opens the second, among other producers' batches: once the first segment is gone, the ABORT
    marker alone explains the .txnindex entry."""
    partition.mkdir()
    ids = dict(producer_epoch=0, partition_leader_epoch=0)
    (partition / f"{0:020d}.log").write_bytes(build_batch(0, [build_record(0, 0, b"k", b"v")], producer_id=7,
                                                          base_sequence=0, attributes=ATTR_TRANSACTIONAL, **ids))
    batches = [build_batch(1, [_marker(0, 3)], producer_id=7, attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, **ids)]
    batches += [build_batch(2 + n, [build_record(0, 0, b"k", b"v")], producer_id=8 + n % 3, base_sequence=n // 3,
                            **ids) for n in range(30)]
    (partition / f"{1:020d}.log").write_bytes(b"".join(batches))
    return partition

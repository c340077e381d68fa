"""Index rebuilds against what Kafka's LogSegment.recover wrote (golden `rebuilt/` and
`recovered/`), the producer state behind the transaction index, and the safety of the writes."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from construct import Int16sb, Int32sb, Struct

from kafkalog_tools import recovery
from kafkalog_tools.errors import InputError
from kafkalog_tools.formats import legacy, offset_index, producer_snapshot, time_index
from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, build_batch, build_record
from kafkalog_tools.formats.segment import SegmentFile
from kafkalog_tools.formats.txn_index import AbortedTxn
from kafkalog_tools.recovery import ProducerState, ProducerStateError, Rebuild, RebuildOptions
from tests.conftest import GOLDEN

INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def golden_partitions() -> list:
    if not GOLDEN.exists():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"shared corpus not found at {GOLDEN}"))]
    return sorted(p.name for p in (GOLDEN / "logs").iterdir())


def index_interval(partition: str) -> int:
    config = json.loads((GOLDEN / "manifests" / "corpus.json").read_text())
    return next(p["effectiveIndexIntervalBytes"] for p in config["partitions"] if p["topicPartition"] == partition)


def copy_without_indexes(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for path in target.iterdir():
        path.chmod(0o644)
        if path.suffix in INDEX_SUFFIXES:
            path.unlink()
    return target


def rebuild(paths, **options) -> list[recovery.SegmentRebuild]:
    return list(Rebuild([str(p) for p in paths], RebuildOptions(**options)))


# ---------------------------------------------------------------------------------------------
# Byte-identical to Kafka's own recovery
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("partition", golden_partitions())
def test_rebuilt_indexes_are_byte_identical_to_kafkas(partition, tmp_path):
    work = copy_without_indexes(GOLDEN / "logs" / partition, tmp_path / partition)
    results = rebuild([work], index_interval_bytes=index_interval(partition))
    expected_dir = GOLDEN / "rebuilt" / partition
    expected = sorted(p.name for p in expected_dir.iterdir() if p.suffix in INDEX_SUFFIXES)
    produced = sorted(p.name for p in work.iterdir() if p.suffix in INDEX_SUFFIXES)
    assert produced == expected
    for name in expected:
        assert (work / name).read_bytes() == (expected_dir / name).read_bytes(), name
    assert all(r.recovery.truncated_bytes == 0 and r.recovery.failure is None for r in results)


def test_truncate_recovers_the_damaged_copy_as_kafka_did(golden, tmp_path):
    damaged = golden / "damaged" / "truncated" / "golden-v2-mixed-0"
    recovered = golden / "recovered" / "truncated" / "golden-v2-mixed-0"
    damage = json.loads((golden / "manifests" / "damaged" / "golden-v2-mixed-0.damage.json").read_text())[0]
    work = tmp_path / "p"
    shutil.copytree(damaged, work)
    results = rebuild([work], truncate=True)
    for path in recovered.iterdir():
        if path.suffix in (".log",) + INDEX_SUFFIXES:
            assert (work / path.name).read_bytes() == path.read_bytes(), path.name
    cut = next(r for r in results if r.recovery.truncated_bytes)
    assert Path(cut.recovery.log_path).name == damage["file"]
    assert cut.recovery.valid_bytes == damage["cutBatchPosition"]
    assert cut.recovery.invalid.position == damage["cutBatchPosition"]
    backup = work / (damage["file"] + recovery.BACKUP_SUFFIX)
    assert backup.read_bytes() == (damaged / damage["file"]).read_bytes()


@pytest.mark.parametrize("partition", ["golden-v2-txn-0", "golden-v2-mixed-0"])
def test_one_segment_rebuilt_from_its_snapshot_equals_the_full_replay(partition, golden, tmp_path):
    work = tmp_path / partition
    shutil.copytree(golden / "rebuilt" / partition, work)
    for log in sorted(work.glob("*.log")):
        [result] = rebuild([log], index_interval_bytes=index_interval(partition), dry_run=True)
        assert [c.action for c in result.changes] == ["unchanged"] * len(result.changes), log.name
        if log.name != "00000000000000000000.log":
            assert result.notes[0].startswith("producer state loaded from")


def test_without_snapshots_a_later_segment_replays_the_earlier_ones(golden, tmp_path):
    work = tmp_path / "p"
    shutil.copytree(golden / "rebuilt" / "golden-v2-txn-0", work)
    for snapshot in work.glob("*.snapshot"):
        snapshot.unlink()
    last = sorted(work.glob("*.log"))[-1]
    expected = last.with_suffix(".txnindex").read_bytes()
    last.with_suffix(".txnindex").unlink()
    [result] = rebuild([last], index_interval_bytes=1024)
    assert result.notes[0] == "producer state replayed from offset 0"
    assert last.with_suffix(".txnindex").read_bytes() == expected


# ---------------------------------------------------------------------------------------------
# LogSegment.recover on segments built here
# ---------------------------------------------------------------------------------------------


def write_log(directory: Path, base_offset: int, chunks: list[bytes]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{base_offset:020d}.log"
    path.write_bytes(b"".join(chunks))
    return path


def recover(path: Path, interval: int, state: ProducerState | None = None) -> recovery.SegmentRecovery:
    with SegmentFile(path) as log:
        return recovery.recover_segment(log, state or ProducerState(), interval)


def test_each_uncompressed_legacy_message_is_its_own_batch(tmp_path):
    messages = [legacy.build_entry(offset, 1, None, b"x" * 40, timestamp=1000 + (offset * 7) % 5)
                for offset in range(12)]
    path = write_log(tmp_path / "t-0", 0, messages)
    result = recover(path, interval=100)
    positions = [sum(len(m) for m in messages[:i]) for i in range(len(messages))]
    expected_index, last_indexed, running_max, expected_time = [], 0, (-1, -1), []
    for offset, position in enumerate(positions):
        timestamp = 1000 + (offset * 7) % 5
        if timestamp > running_max[0]:
            running_max = (timestamp, offset)
        if position - last_indexed > 100:
            expected_index.append((offset, position))
            if running_max[0] > (expected_time[-1][0] if expected_time else -1):
                expected_time.append(running_max)
            last_indexed = position
    if running_max[0] > expected_time[-1][0]:
        expected_time.append(running_max)
    assert result.batches == 12
    assert result.offset_entries == expected_index and len(expected_index) > 3
    assert result.time_entries == expected_time


def test_v0_messages_give_an_empty_time_index(tmp_path):
    path = write_log(tmp_path / "t-0", 0, [legacy.build_entry(o, 0, b"k", b"v" * 30) for o in range(10)])
    result = recover(path, interval=50)
    assert result.offset_entries and result.time_entries == []
    assert result.timeindex_bytes() == b""


def test_recovery_stops_at_a_crc_failure_and_truncate_cuts_there(tmp_path):
    batches = [v2_batch(offset, 1000 + offset) for offset in range(0, 30, 3)]
    data = bytearray(b"".join(batches))
    bad_position = sum(len(b) for b in batches[:6])
    data[bad_position + 70] ^= 0xFF
    path = write_log(tmp_path / "t-0", 0, [bytes(data)])
    result = recover(path, interval=10)
    assert result.valid_bytes == bad_position and result.batches == 6
    assert result.invalid.position == bad_position
    assert all(position < bad_position for _, position in result.offset_entries)
    [rebuilt] = rebuild([path], index_interval_bytes=10, truncate=True, backup=False)
    assert path.read_bytes() == bytes(data[:bad_position])
    assert not rebuilt.tail_left_in_place
    assert not list(path.parent.glob("*.bak"))


def test_a_zero_filled_tail_is_invalid_and_cut(tmp_path):
    batches = [v2_batch(offset, 1000 + offset) for offset in range(0, 9, 3)]
    path = write_log(tmp_path / "t-0", 0, batches + [bytes(500)])
    result = recover(path, interval=4096)
    assert result.truncated_bytes == 500
    assert "minimum record overhead" in result.invalid.message


def test_offsets_that_do_not_increase_at_an_index_point_fail_recovery(tmp_path):
    batches = [v2_batch(0, 1000), v2_batch(10, 1001), v2_batch(5, 1002)]
    path = write_log(tmp_path / "t-0", 0, batches)
    result = recover(path, interval=0)
    assert result.failure is not None and "no larger than the last offset" in result.failure.message
    [rebuilt] = rebuild([path], index_interval_bytes=0)
    assert rebuilt.changes == [] and not path.with_suffix(".index").exists()


def test_offsets_out_of_the_segment_range_fail_recovery(tmp_path):
    path = write_log(tmp_path / "t-0", 100, [v2_batch(50, 1000)])
    result = recover(path, interval=4096)
    assert result.failure is not None and "offset overflow" in result.failure.message


# ---------------------------------------------------------------------------------------------
# Producer state and the transaction index
# ---------------------------------------------------------------------------------------------

CONTROL_KEY = Struct("version" / Int16sb, "type" / Int16sb)
MARKER = Struct("version" / Int16sb, "coordinator_epoch" / Int32sb)
ABORT, COMMIT = 0, 1


def v2_batch(base_offset: int, timestamp: int, count: int = 3, *, producer_id: int = -1, epoch: int = -1,
             sequence: int = -1, transactional: bool = False, leader_epoch: int = 0) -> bytes:
    records = [build_record(i, 0, None, b"value-%d" % i) for i in range(count)]
    return build_batch(base_offset, records, base_timestamp=timestamp, max_timestamp=timestamp,
                       producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                       attributes=ATTR_TRANSACTIONAL if transactional else 0, partition_leader_epoch=leader_epoch)


def marker(offset: int, producer_id: int, kind: int, *, epoch: int = 0, coordinator_epoch: int = 5,
           timestamp: int = 2000) -> bytes:
    record = build_record(0, 0, CONTROL_KEY.build(dict(version=0, type=kind)),
                          MARKER.build(dict(version=0, coordinator_epoch=coordinator_epoch)))
    return build_batch(offset, [record], base_timestamp=timestamp, max_timestamp=timestamp, producer_id=producer_id,
                       producer_epoch=epoch, attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL)


def batches_of(data: list[bytes], tmp_path: Path):
    path = write_log(tmp_path / "t-0", 0, data)
    return list(SegmentFile(path).batches())  # left open: the batches decode from its map


def test_an_abort_is_indexed_with_the_lso_of_the_other_open_transaction(tmp_path):
    batches = batches_of([
        v2_batch(0, 1000, producer_id=1, epoch=0, sequence=0, transactional=True),
        v2_batch(3, 1001, producer_id=2, epoch=0, sequence=0, transactional=True),
        marker(6, 1, ABORT),
        marker(7, 2, ABORT),
        v2_batch(8, 1002, producer_id=1, epoch=0, sequence=3, transactional=True),
        marker(11, 1, COMMIT),
    ], tmp_path)
    state = ProducerState()
    aborted = [state.apply(b) for b in batches]
    assert aborted[2] == AbortedTxn(0, 1, 0, 6, 3)  # producer 2's transaction from offset 3 is still open
    assert aborted[3] == AbortedTxn(0, 2, 3, 7, 8)  # nothing else open: the offset after the marker
    assert aborted[5] is None and state.ongoing == {}


def test_a_marker_without_data_indexes_nothing(tmp_path):
    [only] = batches_of([marker(0, 7, ABORT)], tmp_path)
    assert ProducerState().apply(only) is None


def test_a_fenced_abort_with_a_bumped_epoch_still_ends_the_transaction(tmp_path):
    batches = batches_of([v2_batch(0, 1000, producer_id=1, epoch=3, sequence=0, transactional=True),
                          marker(3, 1, ABORT, epoch=4)], tmp_path)
    state = ProducerState()
    assert [state.apply(b) for b in batches] == [None, AbortedTxn(0, 1, 0, 3, 4)]
    entry = state.snapshot_entries()[1]
    assert entry.epoch == 4 and entry.last_offset == -1  # a new epoch forgets the old batch metadata


def test_a_non_transactional_write_inside_a_transaction_is_an_error(tmp_path):
    batches = batches_of([v2_batch(0, 1000, producer_id=1, epoch=0, sequence=0, transactional=True),
                          v2_batch(3, 1001, producer_id=1, epoch=0, sequence=3)], tmp_path)
    state = ProducerState()
    state.apply(batches[0])
    with pytest.raises(ProducerStateError, match="Expected transactional write"):
        state.apply(batches[1])
    assert state.producers[1].last_offset == 2  # left as it was


def test_epoch_and_sequence_anomalies_are_reported_not_raised(tmp_path):
    batches = batches_of([v2_batch(0, 1000, producer_id=1, epoch=2, sequence=0),
                          v2_batch(3, 1001, producer_id=1, epoch=2, sequence=7),
                          v2_batch(6, 1002, producer_id=1, epoch=1, sequence=0)], tmp_path)
    seen = []
    state = ProducerState(on_anomaly=lambda kind, message, batch: seen.append((kind, batch.base_offset)))
    for batch in batches:
        state.apply(batch)
    assert seen == [(recovery.SEQUENCE_GAP, 3), (recovery.EPOCH_DECREASED, 6)]


def test_state_from_a_snapshot_carries_open_transactions():
    snapshot = producer_snapshot.parse(producer_snapshot.build([
        producer_snapshot.ProducerEntry(9, 1, 4, 20, 4, 1000, 3, 16)]), "00000000000000000021.snapshot")
    state = ProducerState.from_snapshot(snapshot)
    assert state.ongoing == {16: 9}
    assert state.snapshot_entries()[9] == snapshot.entries[0]


# ---------------------------------------------------------------------------------------------
# Writing: temp file + rename, backups, dry run, output dir
# ---------------------------------------------------------------------------------------------


def damaged_copy(golden: Path, tmp_path: Path) -> Path:
    work = tmp_path / "logs" / "golden-v2-mixed-0"  # its log dir, tmp_path/logs, is the input tree too
    shutil.copytree(golden / "damaged" / "truncated" / "golden-v2-mixed-0", work)
    return work


def test_output_dir_leaves_the_input_alone(golden, tmp_path):
    work = damaged_copy(golden, tmp_path)
    before = {p.name: p.read_bytes() for p in work.iterdir()}
    rebuild([work], truncate=True, output_dir=tmp_path / "out")
    assert {p.name: p.read_bytes() for p in work.iterdir()} == before
    out = tmp_path / "out" / "golden-v2-mixed-0"
    recovered = golden / "recovered" / "truncated" / "golden-v2-mixed-0"
    for name in ("00000000000000001839.log", "00000000000000001839.index", "00000000000000001839.timeindex"):
        assert (out / name).read_bytes() == (recovered / name).read_bytes()
    assert not list(out.glob("*.bak"))


def test_backups_never_overwrite_earlier_backups(tmp_path):
    path = write_log(tmp_path / "t-0", 0, [v2_batch(o, 1000 + o) for o in range(0, 30, 3)])
    index = path.with_suffix(".index")
    index.write_bytes(b"first")
    rebuild([path], index_interval_bytes=10)
    index.write_bytes(b"second")
    rebuild([path], index_interval_bytes=10)
    assert (tmp_path / "t-0" / (index.name + ".bak")).read_bytes() == b"first"
    assert (tmp_path / "t-0" / (index.name + ".bak.1")).read_bytes() == b"second"


def test_an_unchanged_file_is_not_rewritten(golden, tmp_path):
    work = tmp_path / "p"
    shutil.copytree(golden / "rebuilt" / "golden-v2-txn-0", work)
    stamps = {p.name: p.stat().st_mtime_ns for p in work.iterdir()}
    results = rebuild([work], index_interval_bytes=1024)
    assert {c.action for r in results for c in r.changes} == {"unchanged"}
    assert {p.name: p.stat().st_mtime_ns for p in work.iterdir()} == stamps


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    path = write_log(tmp_path / "t-0", 0, [v2_batch(o, 1000 + o) for o in range(0, 30, 3)])
    index = path.with_suffix(".index")
    index.write_bytes(b"old index")

    def crash(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(recovery.os, "replace", crash)
    with pytest.raises(InputError, match="No space left"):
        rebuild([path], index_interval_bytes=10, backup=False)
    assert index.read_bytes() == b"old index"
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, index.name])


def test_a_txnindex_without_aborts_is_emptied_not_deleted(tmp_path):
    path = write_log(tmp_path / "t-0", 0, [v2_batch(0, 1000)])
    txn = path.with_suffix(".txnindex")
    txn.write_bytes(b"\x00" * 34)
    [result] = rebuild([path])
    assert txn.read_bytes() == b"" and any(c.kind == "txnindex" and c.action == "replace" for c in result.changes)


def test_rebuilt_bytes_use_the_index_schemas(tmp_path):
    path = write_log(tmp_path / "t-0", 5, [v2_batch(o, 1000 + o) for o in range(5, 35, 3)])
    result = recover(path, interval=10)
    assert offset_index.build(result.offset_entries, 5) == result.index_bytes()
    assert time_index.build(result.time_entries, 5) == result.timeindex_bytes()
    assert os.path.getsize(path) == result.valid_bytes


def test_a_path_that_is_not_a_segment_is_an_input_error(tmp_path):
    other = tmp_path / "t-0" / "notes.txt"
    other.parent.mkdir()
    other.write_text("x")
    with pytest.raises(InputError, match="not a segment file"):
        Rebuild([other])


@pytest.mark.parametrize("count", [0, 5, 999, 1000, 5000], ids=lambda n: f"{n}-entries")
def test_entry_columns_pack_as_the_index_builders_do(count):
    """A few entries are packed with struct, many with numpy; both as offset_index/time_index.build."""
    offsets = [(1000 + i * 3, i * 4096) for i in range(count)]
    times = [(1_700_000_000_000 + i * 7, 1000 + i) for i in range(count)]
    assert recovery.EntryColumns(offsets).pack(offset_index.ENTRY_SCHEMA, ("relative_offset", 1000), "position") \
        == offset_index.build(offsets, 1000)
    assert recovery.EntryColumns(times).pack(time_index.ENTRY_SCHEMA, "timestamp", ("relative_offset", 1000)) \
        == time_index.build(times, 1000)

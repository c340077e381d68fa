"""verify: silent on everything Kafka wrote (golden and real broker dirs), exact about damage
(byte ranges, resynchronisation, intact data after it) and about indexes that mean something wrong."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kafkalog_tools import codecs
from kafkalog_tools.crc import crc32c
from kafkalog_tools.formats import legacy, offset_index, producer_snapshot, time_index
from kafkalog_tools.formats.offset_index import OffsetIndex
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.formats.time_index import TimeIndex
from kafkalog_tools.native.columns import BASE_OFFSET
from kafkalog_tools.verify import ERROR, INFO, WARNING, FactsRun, Verification
from tests.conftest import GOLDEN

MIXED = "golden-v2-mixed-0"


def verify(*paths, **options) -> tuple[list, Verification]:
    run = Verification([str(p) for p in paths], **options)
    return list(run), run


def codes(findings, severity=None) -> set[str]:
    return {f.code for f in findings if severity is None or f.severity == severity}


def golden_dirs(kind: str) -> list:
    if not GOLDEN.exists():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"shared corpus not found at {GOLDEN}"))]
    return sorted(str(p.relative_to(GOLDEN)) for p in (GOLDEN / kind).iterdir() if p.is_dir())


def batches_of(partition: str, base: int) -> list[dict]:
    manifest = GOLDEN / "manifests" / "logs" / partition / f"{base:020d}.json"
    return json.loads(manifest.read_text())["batches"]


@pytest.fixture
def mixed(golden, tmp_path) -> Path:
    work = tmp_path / MIXED
    shutil.copytree(golden / "logs" / MIXED, work)
    for path in work.iterdir():
        path.chmod(0o644)
    return work


# ---------------------------------------------------------------------------------------------
# What Kafka wrote is not an error
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("relative", golden_dirs("logs") + golden_dirs("rebuilt"))
def test_golden_partitions_have_no_findings(relative):
    findings, run = verify(GOLDEN / relative)
    assert findings == []
    assert run.summary.damaged_bytes == 0 and run.summary.records > 0


@pytest.mark.parametrize("broker", ["zk-broker-a", "zk-broker-b"])
def test_real_broker_dirs_have_no_errors_only_missing_indexes(real, broker):
    findings, run = verify(real / broker)
    assert run.summary.errors == 0
    assert codes(findings, WARNING) == {"index-missing", "timeindex-missing"}
    assert run.summary.partitions > 50 and run.summary.batches > 0


def test_the_truncated_copy_read_offline_is_what_recovery_truncates(golden):
    """No broker holds the dir (no .lock): the cut batch at the end of the active segment is what
    Kafka's recovery truncates after a crash - one error at the cut, with what it drops."""
    damage = json.loads((golden / "manifests" / "damaged" / f"{MIXED}.damage.json").read_text())[0]
    findings, run = verify(golden / damage["dir"])
    [error] = [f for f in findings if f.severity == ERROR]
    assert (Path(error.file).name, error.position, error.code) == (
        damage["file"], damage["cutBatchPosition"], "truncated-tail")
    first, last = map(int, damage["cutBatchOffsets"].split(".."))
    assert error.extra["recovery_drops"] == {
        "bytes": damage["truncatedTo"] - damage["cutBatchPosition"], "first_offset": first, "last_offset": last,
        "records": last - first + 1, "producer_ids": [2001], "open_transactions": []}
    assert run.summary.damaged_bytes == damage["truncatedTo"] - damage["cutBatchPosition"]
    assert [state["read_as"] for state in run.summary.log_dirs] == ["offline"]


def test_the_truncated_copy_read_live_is_a_batch_still_being_written(golden):
    """The copy was taken from a running broker (the manifest says so; rsync leaves no lock): with
    --live the cut batch ends the active segment as a write in progress."""
    damage = json.loads((golden / "manifests" / "damaged" / f"{MIXED}.damage.json").read_text())[0]
    findings, run = verify(golden / damage["dir"], read_as="live")
    assert run.summary.errors == 0
    [partial] = [f for f in findings if f.severity == WARNING]
    assert (Path(partial.file).name, partial.position, partial.code) == (
        damage["file"], damage["cutBatchPosition"], "still-being-written")
    assert partial.extra == {"length": damage["truncatedTo"] - damage["cutBatchPosition"],
                             "declared_size": damage["cutBatchSize"]}
    assert run.summary.damaged_bytes == 0
    # the active segment's indexes are preallocated
    assert codes(findings, INFO) == {"index-preallocated", "timeindex-preallocated", "timeindex-no-final-entry"}


def test_the_same_cut_before_a_later_segment_is_one_error_at_the_cut_batch(golden, tmp_path):
    damage = json.loads((golden / "manifests" / "damaged" / f"{MIXED}.damage.json").read_text())[0]
    work = tmp_path / MIXED
    shutil.copytree(golden / damage["dir"], work)
    later = build_batch(3000, [build_record(0, 0, b"k", b"v")])
    (work / "00000000000000003000.log").write_bytes(later)
    findings, run = verify(work)
    [error] = [f for f in findings if f.severity == ERROR and Path(f.file).name == damage["file"]]
    assert (Path(error.file).name, error.position, error.code) == (damage["file"], damage["cutBatchPosition"],
                                                                   "truncated-batch")
    assert error.extra["end"] == damage["truncatedTo"] and error.extra["resync_position"] is None
    assert run.summary.damaged_bytes == damage["truncatedTo"] - damage["cutBatchPosition"]


# ---------------------------------------------------------------------------------------------
# Damage: exact ranges, resynchronisation, what follows
# ---------------------------------------------------------------------------------------------

SEGMENT = 424


def damage_segment(work: Path, edit) -> tuple[list[dict], int]:
    log = work / f"{SEGMENT:020d}.log"
    data = bytearray(log.read_bytes())
    edit(data, batches_of(MIXED, SEGMENT))
    log.write_bytes(bytes(data))
    return batches_of(MIXED, SEGMENT), len(data)


def log_errors(findings) -> list:
    return [f for f in findings if f.severity == ERROR and f.file.endswith(".log")]


def test_a_crc_failure_is_one_batch_and_the_rest_is_intact(mixed):
    def flip(data, batches):
        data[batches[10]["position"] + 80] ^= 0x55

    batches, size = damage_segment(mixed, flip)
    [error] = log_errors(verify(mixed)[0])
    bad, after = batches[10], batches[11]
    assert (error.code, error.position, error.extra["end"]) == ("crc-mismatch", bad["position"], after["position"])
    assert error.extra["resync_position"] == after["position"]
    assert error.extra["intact_bytes_after"] == size - after["position"]
    assert error.extra["intact_batches_after"] == len(batches) - 11
    assert error.extra["intact_offsets_after"] == [after["baseOffset"], batches[-1]["lastOffset"]]


def test_a_zero_filled_region_is_located_and_skipped(mixed):
    def zero(data, batches):
        start, end = batches[5]["position"], batches[9]["position"]
        data[start:end] = bytes(end - start)

    batches, size = damage_segment(mixed, zero)
    [error] = log_errors(verify(mixed)[0])
    assert (error.code, error.position, error.extra["end"]) == ("zero-filled", batches[5]["position"],
                                                                batches[9]["position"])
    assert error.extra["intact_bytes_after"] == size - batches[9]["position"]


def test_a_corrupt_length_field_resynchronises_on_the_next_batch(mixed):
    def huge_length(data, batches):
        data[batches[20]["position"] + 8 : batches[20]["position"] + 12] = (0x7FFFFFF0).to_bytes(4, "big")

    batches, _ = damage_segment(mixed, huge_length)
    [error] = log_errors(verify(mixed)[0])
    assert (error.code, error.position, error.extra["resync_position"]) == (
        "corrupt-length", batches[20]["position"], batches[21]["position"])


def test_garbage_inside_a_batch_is_skipped_to_the_next_intact_one(mixed):
    def scribble(data, batches):
        start = batches[30]["position"] + 3
        data[start : start + 300] = bytes((i * 37 + 11) % 251 for i in range(300))

    batches, _ = damage_segment(mixed, scribble)
    [error] = log_errors(verify(mixed)[0])
    first_intact = next(b for b in batches if b["position"] >= batches[30]["position"] + 303)
    assert error.position == batches[30]["position"]
    assert error.extra["resync_position"] == first_intact["position"]


def test_damage_errors_are_counted_and_intact_bytes_kept(mixed):
    def flip(data, batches):
        data[batches[3]["position"] + 70] ^= 1

    batches, size = damage_segment(mixed, flip)
    _, run = verify(mixed)
    assert run.summary.damaged_bytes == batches[3]["sizeInBytes"]
    assert run.summary.log_bytes - run.summary.intact_bytes == batches[3]["sizeInBytes"]


# ---------------------------------------------------------------------------------------------
# Indexes by meaning
# ---------------------------------------------------------------------------------------------


def edit_offset_index(work: Path, base: int, change) -> Path:
    path = work / f"{base:020d}.index"
    entries = [(e.offset, e.position) for e in OffsetIndex(path).entries()]
    change(entries)
    path.write_bytes(offset_index.build(entries, base))
    return path


def edit_time_index(work: Path, base: int, change) -> Path:
    path = work / f"{base:020d}.timeindex"
    entries = [(e.timestamp, e.offset) for e in TimeIndex(path).entries()]
    change(entries)
    path.write_bytes(time_index.build(entries, base))
    return path


def index_findings(work: Path) -> list:
    return [f for f in verify(work)[0] if not f.file.endswith(".log")]


def test_entries_out_of_order(mixed):
    edit_offset_index(mixed, 0, lambda e: e.__setitem__(slice(2, 4), [e[3], e[2]]))
    [finding] = index_findings(mixed)
    assert (finding.code, finding.extra["slot"]) == ("index-entry-order", 3)


def test_a_position_off_a_batch_boundary(mixed):
    def shift(entries):
        entries[1] = (entries[1][0], entries[1][1] + 1)

    edit_offset_index(mixed, 0, shift)
    [finding] = index_findings(mixed)
    assert (finding.code, finding.position, finding.extra["slot"]) == ("index-position-not-batch-start", 8, 1)


def test_an_entry_past_the_batch_holding_its_offset(mixed):
    batches = batches_of(MIXED, 0)

    def skip(entries):
        offset, position = entries[0]
        holder = next(i for i, b in enumerate(batches) if b["position"] == position)
        entries[0] = (offset, batches[holder + 1]["position"])

    edit_offset_index(mixed, 0, skip)
    assert codes(index_findings(mixed)) == {"index-entry-skips-offset"}


def test_an_offset_past_the_segment(mixed):
    edit_offset_index(mixed, 0, lambda e: e.__setitem__(-1, (500, e[-1][1])))  # segment 0 ends at 423
    assert codes(index_findings(mixed)) == {"index-offset-beyond-log"}


def test_first_offset_indexes_of_old_brokers_are_valid(mixed):
    """<= 1.1 brokers indexed batch first offsets: different entries, same meaning."""
    batches = batches_of(MIXED, 0)
    first_of = {b["position"]: b["baseOffset"] for b in batches}
    edit_offset_index(mixed, 0, lambda e: e.__setitem__(slice(None), [(first_of[p], p) for _, p in e]))
    assert index_findings(mixed) == []


def test_a_zero_tail_is_an_error_on_a_closed_segment_and_normal_on_the_active_one(mixed):
    for base in (0, 1839):
        path = mixed / f"{base:020d}.index"
        path.write_bytes(path.read_bytes() + bytes(800))
    findings = index_findings(mixed)
    [closed] = [f for f in findings if f.file.endswith("00000000000000000000.index")]
    [active] = [f for f in findings if f.file.endswith("00000000000000001839.index")]
    assert (closed.severity, closed.code, closed.position) == (ERROR, "index-zero-tail", 104)
    assert (active.severity, active.code) == (INFO, "index-preallocated")


def test_an_index_size_that_is_not_a_multiple_of_the_entry(mixed):
    path = mixed / "00000000000000000424.index"
    path.write_bytes(path.read_bytes() + b"\x01\x02\x03")
    assert codes(index_findings(mixed), ERROR) == {"index-size"}


def test_a_missing_index_is_only_a_warning(mixed):
    (mixed / "00000000000000000838.index").unlink()
    findings, run = verify(mixed)
    assert [(f.severity, f.code) for f in findings] == [(WARNING, "index-missing")]


def test_a_closed_segment_without_its_final_time_entry(mixed):
    edit_time_index(mixed, 0, lambda e: e.pop())
    [finding] = index_findings(mixed)
    assert (finding.severity, finding.code) == (ERROR, "timeindex-final-entry-wrong")


def test_a_time_entry_claiming_a_timestamp_the_data_does_not_hold(mixed):
    def inflate(entries):
        timestamp, offset = entries[0]
        entries[0] = (timestamp + 5, offset)

    edit_time_index(mixed, 0, inflate)
    [finding] = index_findings(mixed)
    assert (finding.code, finding.extra["slot"]) == ("timeindex-timestamp-not-in-log", 0)


def test_time_entries_out_of_order(mixed):
    edit_time_index(mixed, 424, lambda e: e.__setitem__(slice(0, 2), [e[1], e[0]]))
    assert "timeindex-entry-order" in codes(index_findings(mixed), ERROR)


# ---------------------------------------------------------------------------------------------
# Transaction index, snapshots, leader epochs, log dir checkpoints
# ---------------------------------------------------------------------------------------------


def test_a_txnindex_missing_an_abort(mixed):
    path = mixed / "00000000000000001323.txnindex"
    path.write_bytes(path.read_bytes()[:-34])
    [finding] = index_findings(mixed)
    assert finding.code == "txnindex-missing-abort" and finding.extra["expected"]["last_offset"] == 1838


def test_a_txnindex_with_a_wrong_last_stable_offset(mixed):
    path = mixed / "00000000000000000424.txnindex"
    data = bytearray(path.read_bytes())
    data[26:34] = (12345).to_bytes(8, "big")
    path.write_bytes(bytes(data))
    [finding] = index_findings(mixed)
    assert (finding.code, finding.position) == ("txnindex-entry-mismatch", 0)


def test_aborts_without_a_txnindex(mixed):
    (mixed / "00000000000000000838.txnindex").unlink()
    [finding] = index_findings(mixed)
    assert (finding.code, len(finding.extra["aborted"])) == ("txnindex-missing", 3)


def test_a_corrupt_snapshot(mixed):
    path = mixed / "00000000000000000838.snapshot"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    [finding] = index_findings(mixed)
    assert (finding.code, finding.position) == ("snapshot-corrupt", 2)


def test_a_snapshot_that_disagrees_with_the_log(mixed):
    path = mixed / "00000000000000000838.snapshot"
    snapshot = producer_snapshot.read(path)
    first = snapshot.entries[0]
    changed = producer_snapshot.ProducerEntry(first.producer_id, first.epoch, first.last_sequence + 1,
                                              *list(vars_of(first))[3:])
    path.write_bytes(producer_snapshot.build([changed] + snapshot.entries[1:]))
    [finding] = index_findings(mixed)
    assert (finding.code, finding.extra["producer_id"]) == ("snapshot-disagrees", first.producer_id)


def vars_of(entry) -> list:
    return [getattr(entry, name) for name in producer_snapshot.ENTRY_FIELDS]


def test_a_leader_epoch_checkpoint_that_disagrees(mixed):
    (mixed / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n1 662\n4 1300\n")
    [finding] = index_findings(mixed)
    assert (finding.code, finding.extra["epoch"]) == ("leader-epoch-start-mismatch", 4)
    (mixed / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n4 1348\n")
    assert codes(index_findings(mixed)) == {"leader-epoch-not-in-checkpoint"}


def test_log_dir_checkpoints_against_the_logs(mixed, tmp_path):
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    mixed.rename(log_dir / MIXED)
    (log_dir / "meta.properties").write_text("#\nversion=0\nbroker.id=1\n")
    (log_dir / ".kafka_cleanshutdown").write_text("")
    (log_dir / "recovery-point-offset-checkpoint").write_text("0\n1\ngolden-v2-mixed 0 2025\n")
    (log_dir / "replication-offset-checkpoint").write_text("0\n2\ngolden-v2-mixed 0 2030\ngone 3 7\n")
    findings, run = verify(log_dir)
    assert [(f.severity, f.code) for f in findings] == [(ERROR, "high-watermark-beyond-log-end"),
                                                        (WARNING, "checkpoint-unknown-partition")]
    assert findings[0].extra["log_end_offset"] == 2025


# ---------------------------------------------------------------------------------------------
# Batches built here: offsets, epochs, records
# ---------------------------------------------------------------------------------------------


def batch(base_offset: int, *, count: int = 3, leader_epoch: int = 0, max_timestamp: int | None = None) -> bytes:
    records = [build_record(i, i, None, b"v%d" % i) for i in range(count)]
    return build_batch(base_offset, records, base_timestamp=1000, partition_leader_epoch=leader_epoch,
                       max_timestamp=1000 + count - 1 if max_timestamp is None else max_timestamp)


def segment_dir(tmp_path: Path, chunks: list[bytes]) -> Path:
    directory = tmp_path / "t-0"
    directory.mkdir()
    (directory / f"{0:020d}.log").write_bytes(b"".join(chunks))
    return directory


def log_codes(directory: Path) -> set[str]:
    return {f.code for f in verify(directory)[0] if f.file.endswith(".log")}


def test_offsets_going_backwards(tmp_path):
    assert log_codes(segment_dir(tmp_path, [batch(0), batch(10), batch(5)])) == {"offset-not-increasing"}


def test_a_leader_epoch_that_decreases(tmp_path):
    directory = segment_dir(tmp_path, [batch(0, leader_epoch=3), batch(3, leader_epoch=2)])
    assert log_codes(directory) == {"leader-epoch-decreased"}


def test_a_record_count_the_records_do_not_match(tmp_path):
    data = bytearray(batch(0, count=3))
    data[57:61] = (4).to_bytes(4, "big")
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")  # a valid CRC over a wrong count
    findings, _ = verify(segment_dir(tmp_path, [bytes(data)]))
    [finding] = [f for f in findings if f.code == "record-corrupt"]
    assert "premature EOF" in finding.message


def test_a_max_timestamp_that_is_not_the_records_max(tmp_path):
    findings, _ = verify(segment_dir(tmp_path, [batch(0, max_timestamp=5000)]))
    [finding] = [f for f in findings if f.code == "max-timestamp-mismatch"]
    assert finding.severity == WARNING and finding.extra["largest_record_timestamp"] == 1002


def test_shallow_verification_does_not_decode_records(tmp_path):
    data = bytearray(batch(0, count=3))
    data[57:61] = (4).to_bytes(4, "big")
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    directory = segment_dir(tmp_path, [bytes(data)])
    findings, run = verify(directory, deep=False)
    assert "record-corrupt" not in codes(findings) and run.summary.records is None


def test_shallow_verification_does_not_open_legacy_wrappers(tmp_path):
    inner = b"".join(legacy.build_entry(i, 1, None, b"v", timestamp=10 + i) for i in range(3))
    wrapped = codecs.compress(codecs.IDS["gzip"], inner, magic=1)
    directory = segment_dir(tmp_path, [
        legacy.build_entry(2, 1, None, wrapped, timestamp=12, attributes=codecs.IDS["gzip"]),
        legacy.build_entry(5, 1, None, wrapped[:-8], timestamp=15, attributes=codecs.IDS["gzip"])])  # cut short
    deep, _ = verify(directory)
    assert "record-corrupt" in codes(deep)
    shallow, run = verify(directory, deep=False)
    assert "record-corrupt" not in codes(shallow) and run.summary.errors == 0  # as Kafka's recovery sees it


def test_repeated_findings_are_capped_per_file_and_code(tmp_path):
    directory = segment_dir(tmp_path, [batch(0, max_timestamp=9999)] + [batch(o, max_timestamp=9999)
                                                                         for o in range(3, 60, 3)])
    findings, run = verify(directory, max_findings_per_code=5)
    assert sum(f.code == "max-timestamp-mismatch" for f in findings) == 5
    [note] = [f for f in findings if f.code == "findings-suppressed"]
    assert note.extra["suppressed"] == 15 and run.summary.suppressed == 15


def test_a_single_segment_file_is_verified_with_its_indexes(golden):
    findings, run = verify(golden / "logs" / MIXED / "00000000000000000838.timeindex")
    assert findings == [] and run.summary.segments == 1 and run.summary.partitions == 1


@pytest.mark.parametrize("bulk", ["never", "always"])
def test_a_watcher_sees_every_intact_batch_and_changes_nothing(mixed, golden, monkeypatch, bulk):
    """`watch` (what the incident report taps): each partition's intact batches, as facts one by
    one or in runs, handed over with the number of the path given; findings and totals as without."""
    monkeypatch.setenv("KAFKALOG_BULK", bulk)

    def flip(data, batches):
        data[batches[10]["position"] + 80] ^= 0x55

    damage_segment(mixed, flip)
    paths = [mixed, golden / "logs" / "golden-v1-0", mixed]
    seen: dict[tuple[int, str], list] = {}

    def watch(number, partition):
        offsets = seen.setdefault((number, partition.name), [])

        def consume(facts):
            if isinstance(facts, FactsRun):
                offsets.extend(facts.columns[BASE_OFFSET].tolist())
            else:
                offsets.append(facts.base_offset)
        return consume

    findings, watched = verify(*paths, watch=watch)
    plain, run = verify(*paths)
    assert [f.to_json() for f in findings] == [f.to_json() for f in plain] and watched.summary == run.summary
    assert list(seen) == [(0, MIXED), (1, "golden-v1-0"), (2, MIXED)]
    assert seen[(0, MIXED)] == seen[(2, MIXED)]
    assert sum(len(offsets) for offsets in seen.values()) == run.summary.batches
    for (_, name), offsets in seen.items():
        manifests = sorted((GOLDEN / "manifests" / "logs" / name).glob("0*.json"))  # (not partition.json)
        expected = [b["baseOffset"] for manifest in manifests for b in json.loads(manifest.read_text())["batches"]]
        if name == MIXED:
            expected.remove(batches_of(MIXED, SEGMENT)[10]["baseOffset"])  # the batch whose CRC fails
        assert offsets == expected

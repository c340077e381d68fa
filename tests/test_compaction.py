"""`kafkalog compaction`: the records one run of Kafka 3.8's log cleaner removes from a partition
with a known key history, the dirty ratio and uncleanable offset it computes, tombstone horizons
(KIP-534), aborted transactions, and --simulate's output re-read by our own reader."""
from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from kafkalog_tools import compaction as c
from kafkalog_tools.cli import cli
from kafkalog_tools.formats.logdir import read_partition_dir
from kafkalog_tools.formats.segment import SegmentFile
from tests.conftest import FIXTURES, GOLDEN, REAL, need

LOG_DIR = FIXTURES / "history" / "compaction-logdir"
ACCOUNTS = LOG_DIR / "accounts-0"
T0 = 1_700_000_000_000
NOW = T0 + 3_600_000
DAY = 86_400_000

REMOVED = {
    0: c.SUPERSEDED,  # a -> a3 at 14
    2: c.SUPERSEDED,  # c -> tombstone at 12
    3: c.TOMBSTONE_EXPIRED,  # its batch's delete horizon T0 - 1 has passed
    5: c.SUPERSEDED,  # d -> d3 at 18
    10: c.SUPERSEDED,
    11: c.NO_KEY,
    13: c.SUPERSEDED,
    15: c.ABORTED,
    16: c.ABORTED,
}


def run(*args):
    result = CliRunner().invoke(cli, ["compaction", "--format", "json", *map(str, args)], catch_exceptions=False)
    return result, [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture(scope="module")
def report():
    return c.analyze_partition(read_partition_dir(ACCOUNTS), c.CompactionSettings(now=NOW))


def test_sections_ratio_and_the_uncleanable_offset(report):
    # the open transaction at 25 holds the last stable offset back, so segment 20 cannot be cleaned
    assert (report.first_dirty_offset, report.last_stable_offset, report.first_uncleanable_offset) == (10, 25, 20)
    assert report.uncleanable_reason == "the last stable offset"
    assert [s.section for s in report.segments] == ["clean", "dirty", "uncleanable", "active"]
    assert (report.clean_bytes, report.cleanable_bytes) == (350, 372)
    assert report.dirty_ratio == pytest.approx(372 / 722) and report.would_clean
    assert report.end_offset == 20 and report.groups == [[0, 10]]


def test_the_exact_removed_set_and_why(report):
    fates = {f.offset: f.fate for plan in report.batches for f in plan.records if f.fate != c.KEPT}
    assert fates == REMOVED
    assert [s.removed for s in report.segments] == [[0, 2, 3, 5], [10, 11, 13, 15, 16], [], []]
    assert report.null_key_offsets == [11]


def test_batches_kept_rebuilt_emptied_or_dropped(report):
    outcomes = {plan.batch.base_offset: plan.outcome for plan in report.batches}
    assert outcomes == {0: c.REBUILT, 3: c.DROPPED, 4: c.ORIGINAL, 5: c.REBUILT, 10: c.REBUILT,
                        15: c.EMPTY_HEADER,  # the aborted batch is producer 7's last: kept as an empty header
                        17: c.ORIGINAL,  # its transaction's data was still there: the ABORT marker stays
                        18: c.ORIGINAL, 20: c.UNTOUCHED, 25: c.UNTOUCHED, 27: c.UNTOUCHED, 30: c.UNTOUCHED}


def test_tombstones_and_delete_horizons(report):
    assert [(t.offset, t.key, t.delete_horizon_ms, t.fate, t.new_delete_horizon_ms) for t in report.tombstones] == [
        (3, b"x", T0 - 1, c.TOMBSTONE_EXPIRED, None),
        (4, b"y", NOW + 3_600_000, c.KEPT, None),
        (12, b"c", None, c.KEPT, NOW + DAY),  # first cleaning: the horizon is set to now + delete.retention.ms
    ]


def test_keys_and_their_superseded_versions(report):
    a, d = report.keys[b"a"], report.keys[b"d"]
    assert (a.versions, a.removed, a.latest_offset) == (4, 2, 21)
    assert (d.versions, d.removed, d.latest_offset) == (3, 2, 18)


def test_later_the_tombstone_passes_its_horizon_and_goes(tmp_path):
    first = tmp_path / "first"
    result, _ = run("--now", NOW, "--simulate", "--output-dir", first, ACCOUNTS)
    assert result.exit_code == 0, result.stderr
    # the next run, after the horizon, on the cleaned output (its cleaner-offset-checkpoint says 20)
    _, objects = run("--now", NOW + DAY + 1, "--first-dirty-offset", 0, first / "accounts-0")
    tombstone = next(o for o in objects if o["type"] == "tombstone" and o["offset"] == 12)
    assert tombstone["delete_horizon_ms"] == NOW + DAY and tombstone["fate"] == c.TOMBSTONE_EXPIRED


def test_simulate_writes_exactly_the_surviving_records(tmp_path):
    out = tmp_path / "out"
    result, objects = run("--now", NOW, "--simulate", "--output-dir", out, ACCOUNTS)
    assert result.exit_code == 0, result.stderr
    written = out / "accounts-0"
    assert sorted(p.name for p in written.glob("*.log")) == [
        "00000000000000000000.log", "00000000000000000020.log", "00000000000000000030.log"]
    survivors, batches = [], []
    for log in sorted(written.glob("*.log")):
        with SegmentFile(log) as segment:
            for batch in segment.batches():
                assert batch.crc_valid
                batches.append(batch)
                survivors.extend((r.offset, r.key, r.value) for r in batch.records() if r.control is None)
    kept = [(offset, key, value) for offset, key, value in _all_records(ACCOUNTS) if offset not in REMOVED]
    assert survivors == kept
    by_base = {b.base_offset: b for b in batches}
    assert by_base[10].delete_horizon_ms == NOW + DAY and by_base[10].last_offset == 14
    empty = by_base[15]
    assert (empty.count, empty.last_offset, empty.producer_id, empty.is_transactional) == (0, 16, 7, True)
    assert by_base[4].delete_horizon_ms == NOW + 3_600_000
    assert (out / "cleaner-offset-checkpoint").read_text() == "0\n1\naccounts 0 20\n"
    verify = CliRunner().invoke(cli, ["verify", "--format", "json", str(written)])
    assert verify.exit_code == 0, verify.stdout


def test_a_delete_horizon_past_long_max_wraps_as_javas_does(tmp_path):
    """delete.retention.ms = Long.MAX_VALUE: Kafka's now + delete.retention.ms is a Java long sum,
    so the horizon it writes wraps negative (and the record deltas against it wrap too). --simulate
    raised a traceback building that batch; now it writes what Kafka would."""
    long_max = (1 << 63) - 1
    out = tmp_path / "out"
    result, objects = run("--now", NOW, "--delete-retention-ms", long_max, "--simulate", "--output-dir", out, ACCOUNTS)
    assert result.exit_code == 0, result.stderr
    wrapped = NOW + long_max - (1 << 64)
    tombstone = next(o for o in objects if o["type"] == "tombstone" and o["offset"] == 12)
    assert tombstone["new_delete_horizon_ms"] == wrapped
    with SegmentFile(out / "accounts-0" / "00000000000000000000.log") as segment:
        rebuilt = next(b for b in segment.batches() if b.base_offset == 10)
        assert rebuilt.crc_valid and rebuilt.delete_horizon_ms == wrapped
        written = {r.offset: r.timestamp for r in rebuilt.records()}
    with SegmentFile(ACCOUNTS / "00000000000000000010.log") as segment:
        original = {r.offset: r.timestamp for b in segment.batches() for r in b.records()}
    assert written and all(original[offset] == timestamp for offset, timestamp in written.items())


def _all_records(directory):
    out = []
    for log in sorted(directory.glob("*.log")):
        with SegmentFile(log) as segment:
            for batch in segment.batches():
                out.extend((r.offset, r.key, r.value) for r in batch.records() if r.control is None)
    return out


def test_simulate_refuses_the_input_tree_and_never_writes_there(tmp_path):
    copy = tmp_path / "logdir"
    shutil.copytree(LOG_DIR, copy)
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    for inside in (copy / "out", copy / "accounts-0" / "out", copy / "accounts-0"):
        result, _ = run("--simulate", "--output-dir", inside, copy / "accounts-0")
        assert result.exit_code == 2 and "inside the input tree" in result.stderr
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before
    result, _ = run("--simulate", copy / "accounts-0")
    assert result.exit_code == 2 and "--output-dir" in result.stderr


def test_golden_transactional_partition(tmp_path):
    """golden-v2-txn-0 never cleaned: the whole log up to the active segment is dirty; aborted data goes
    and the simulated output re-reads as the records the analysis keeps."""
    directory = need(GOLDEN / "logs" / "golden-v2-txn-0")
    report = c.analyze_partition(read_partition_dir(directory), c.CompactionSettings(now=T0 + DAY))
    assert (report.first_dirty_offset, report.first_uncleanable_offset, report.end_offset) == (0, 593, 593)
    assert report.dirty_ratio == 1.0
    kept = [(r.offset, r.key, r.value) for plan in report.batches for r in plan.kept if r.control is None]
    target = c.simulate(report, read_partition_dir(directory), tmp_path)
    assert _all_records(target) == kept
    assert any(f.fate == c.ABORTED for plan in report.batches for f in plan.records)


def test_real_consumer_offsets_are_analysed_without_problems():
    directory = need(REAL / "zk-broker-a" / "__consumer_offsets-18")
    result, objects = run("--now", T0, directory)
    assert result.exit_code == 0, result.stderr
    summary = objects[-1]
    assert summary["first_uncleanable_offset"] == 0  # one segment: the active one
    assert summary["would_clean"] is False


def _damaged_accounts(tmp_path, change, clean_shutdown: bool):
    """The accounts partition (segments 0, 10, 20 and the active 30) in a log dir of its own, segment
    10's first batch changed, with the clean shutdown marker or without."""
    copy = tmp_path / "logs" / "accounts-0"
    shutil.copytree(ACCOUNTS, copy)
    if clean_shutdown:
        (copy.parent / ".kafka_cleanshutdown").write_bytes(b"")
    log = copy / "00000000000000000010.log"
    data = bytearray(log.read_bytes())
    change(data)
    log.write_bytes(bytes(data))
    return copy


def _flip_max_timestamp(data):
    data[40] ^= 0x55  # in the header's max timestamp: the CRC alone is wrong


def _size_five(data):
    data[8:12] = (5).to_bytes(4, "big")


# Kafka 4.0's answers (kafka-oracle clean, with --unclean where there is no marker), checked live
@pytest.mark.parametrize("change, clean_shutdown, exit_code, log_end, cleaned_up_to, says", [
    # after an unclean shutdown the loader recovers: segment 10 cut to nothing, 20 and 30 deleted
    (_flip_max_timestamp, False, 0, 10, 10, "cuts it to 0 bytes"),
    (_size_five, False, 0, 10, 10, "cuts it to 0 bytes"),
    # after a clean shutdown nothing is recovered: the cleaner checks no CRC, but throws on a size below 14
    (_flip_max_timestamp, True, 0, 32, 30, None),
    (_size_five, True, 1, 32, 30, "Found record size 5 smaller than minimum record overhead (14)"),
])
def test_a_damaged_partition_is_loaded_then_cleaned_as_kafka_does(tmp_path, change, clean_shutdown, exit_code,
                                                                   log_end, cleaned_up_to, says):
    """We used to stop at the first bad CRC and call the partition uncleanable, without the loader's
    recovery (found by the differential run on damaged partitions)."""
    copy = _damaged_accounts(tmp_path, change, clean_shutdown)
    result, objects = run("--now", NOW, "--simulate", "--output-dir", tmp_path / "out", copy)
    summary = objects[-1]
    assert result.exit_code == exit_code, result.output
    if exit_code:
        assert summary["would_clean"] is False and summary["output_dir"] is None
        assert says in summary["problems"][0] and "00000000000000000010.log" in summary["problems"][0]
        assert not (tmp_path / "out").exists()
        return
    assert (summary["log_end_offset"], summary["cleaned_up_to"], summary["problems"]) == (log_end, cleaned_up_to, [])
    if says:
        assert any(says in note for note in summary["notes"])
        assert any("deletes the segments after the one it cut: base offsets 20, 30" in n for n in summary["notes"])
        written = tmp_path / "out" / "accounts-0"
        assert sorted(p.name for p in written.glob("*.log")) == ["00000000000000000000.log",
                                                                 "00000000000000000010.log"]
        assert (written / "00000000000000000010.log").stat().st_size == 0


@pytest.mark.parametrize("marker, shutdown, exit_code", [(False, "clean", 1), (True, "unclean", 0)])
def test_shutdown_overrides_the_marker(tmp_path, marker, shutdown, exit_code):
    """--shutdown says how the broker stopped where the marker cannot (a partition copied out of its
    log dir has none): the answers are those of the marker's case above."""
    copy = _damaged_accounts(tmp_path, _size_five, marker)
    result, objects = run("--now", NOW, "--shutdown", shutdown, copy)
    assert result.exit_code == exit_code, result.output
    notes = objects[-1]["notes"]
    if shutdown == "unclean":
        assert objects[-1]["log_end_offset"] == 10
        assert any(note.startswith("--shutdown unclean: Kafka's loader recovers the segments from offset 0")
                   for note in notes)
    else:
        assert "Found record size 5 smaller than minimum record overhead (14)" in objects[-1]["problems"][0]
        assert not any("recovers the segments" in note for note in notes)


@pytest.mark.parametrize("name", ["golden-v2-mixed-0", "golden-v2-txn-0"])
def test_simulated_output_of_golden_partitions_verifies_without_error(tmp_path, name):
    """The cleaner can remove an epoch's first batches while leader-epoch-checkpoint keeps its start
    offset: verify must take that for what Kafka takes it for, not a mismatch."""
    from kafkalog_tools.verify import ERROR, Verification

    directory = need(GOLDEN / "logs" / name)
    report = c.analyze_partition(read_partition_dir(directory), c.CompactionSettings(now=T0 + 30 * DAY))
    target = c.simulate(report, read_partition_dir(directory), tmp_path)
    errors = [finding for finding in Verification([str(target)]) if finding.severity == ERROR]
    assert errors == []

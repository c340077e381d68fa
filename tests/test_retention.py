"""`kafkalog retention`: the deletion set Kafka 3.8's retention rules give, on fixtures with known
timestamps and sizes and on the golden corpus; the loader's handling of leftovers; the generator
of fixtures/history reproduces its bytes."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil

import pytest
from click.testing import CliRunner

from kafkalog_tools import retention
from kafkalog_tools.cli import cli
from kafkalog_tools.formats.logdir import read_partition_dir
from tests.conftest import FIXTURES, GOLDEN, need

HISTORY = FIXTURES / "history"
EVENTS = HISTORY / "retention-logdir" / "events-0"
LEFTOVERS = HISTORY / "retention-logdir" / "leftovers-0"
T0 = 1_700_000_000_000
DAY = 86_400_000


def load_generator():
    spec = importlib.util.spec_from_file_location("make_history_examples", FIXTURES / "make_history_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_history_fixtures_are_reproduced_by_their_generator(tmp_path):
    load_generator().main(tmp_path / "history")
    expected = {p.relative_to(HISTORY): p.read_bytes() for p in HISTORY.rglob("*") if p.is_file()}
    generated = {p.relative_to(tmp_path / "history"): p.read_bytes()
                 for p in (tmp_path / "history").rglob("*") if p.is_file()}
    assert generated == expected


def run(*args):
    result = CliRunner().invoke(cli, ["retention", "--format", "json", *map(str, args)], catch_exceptions=False)
    return result, [json.loads(line) for line in result.stdout.splitlines()]


def verdicts(objects, partition="events-0"):
    return {o["base_offset"]: o["deleted_by"] for o in objects if o["type"] == "segment" and o["partition"] == partition}


def summary(objects, partition="events-0"):
    return next(o for o in objects if o["type"] == "retention_summary" and o["partition"] == partition)


def test_log_start_offset_then_time_and_the_first_kept_segment_stops_the_pass():
    # segment 0 goes by the log start offset checkpoint (10); segment 10 (T0+1d) is 8 days old; segment 20
    # holds a timestamp from the future, so the old segment 30 behind it stays
    result, objects = run("--now", T0 + 9 * DAY, EVENTS)
    assert result.exit_code == 0, result.stderr
    assert verdicts(objects) == {0: "log-start-offset", 10: "time", 20: None, 30: None, 40: None}
    s = summary(objects)
    assert (s["log_start_offset"], s["new_log_start_offset"], s["high_watermark"], s["log_end_offset"]) == (10, 20, 42, 45)
    assert s["log_start_offset_source"] == "log-start-offset-checkpoint"
    assert s["deleted_bytes"] == 393 + 412


def test_largest_timestamps_come_from_the_time_indexes():
    report = retention.analyze_partition(read_partition_dir(EVENTS), retention.RetentionSettings(now=T0))
    assert [(s.largest_timestamp, s.timestamp_source) for s in report.segments] == [
        (T0, "time index"), (T0 + DAY, "time index"), (T0 + 12 * DAY, "time index"), (T0 + DAY, "time index"),
        (T0 + 3 * DAY, "time index")]


def test_the_high_watermark_protects_the_active_segment_until_it_covers_the_log_end():
    _, objects = run("--now", T0 + 20 * DAY, EVENTS)
    assert verdicts(objects) == {0: "log-start-offset", 10: "time", 20: "time", 30: "time", 40: None}
    active = next(o for o in objects if o["type"] == "segment" and o["base_offset"] == 40)
    assert active["kept_because"] == ["time: its offsets reach the high watermark 42 (upper bound 45)"]
    _, objects = run("--now", T0 + 20 * DAY, "--high-watermark", 45, EVENTS)
    assert set(verdicts(objects).values()) == {"log-start-offset", "time"}
    s = summary(objects)
    assert s["rolls_new_segment"] and s["new_log_start_offset"] == 45


def test_size_retention_deletes_oldest_first_while_the_excess_covers_a_whole_segment():
    # 1831 bytes in all; the limit leaves an excess of 805 + 100: segments 0 (393) and 10 (412) go, 20 would
    # take the log below the limit
    _, objects = run("--now", T0, "--log-start-offset", 0, "--retention-bytes", 1831 - 905, EVENTS)
    assert verdicts(objects) == {0: "size", 10: "size", 20: None, 30: None, 40: None}
    assert summary(objects)["new_log_start_offset"] == 20


def test_compact_only_topics_lose_only_what_the_log_start_offset_passed():
    _, objects = run("--now", T0 + 20 * DAY, "--cleanup-policy", "compact", EVENTS)
    assert verdicts(objects) == {0: "log-start-offset", 10: None, 20: None, 30: None, 40: None}


def test_time_retention_off_and_now_as_iso_8601():
    _, objects = run("--now", "2023-12-01T00:00:00Z", "--retention-ms", -1, EVENTS)
    assert verdicts(objects) == {0: "log-start-offset", 10: None, 20: None, 30: None, 40: None}
    assert summary(objects)["now"] == 1_701_388_800_000


def test_leftovers_and_what_the_loader_does_with_them():
    _, objects = run("--now", T0, LEFTOVERS)
    actions = {os.path.basename(o["file"]): o["action"].split(":")[0].split(" (")[0]
               for o in objects if o["type"] == "leftover"}
    assert actions == {
        "00000000000000000003.log.deleted": "deleted at the next start",
        "00000000000000000020.log.cleaned": "deleted at the next start",
        "00000000000000000030.log.swap": "deleted at the next start",  # >= the smallest .cleaned offset
        "00000000000000000010.log.swap": "renamed to 00000000000000000010.log at the next start",
        # the swap covers offsets [10, 20): the segment it replaces goes
        "00000000000000000010.log": "deleted at the next start",
        "00000000000000000010.index": "deleted at the next start",
        "00000000000000000010.timeindex": "deleted at the next start",
    }


@pytest.mark.parametrize("name", ["golden-v2-mixed-0", "golden-v2-txn-0", "golden-v2-logappendtime-0",
                                  "golden-v2-broker-zstd-2", "golden-v1-0"])
def test_golden_largest_timestamps_equal_kafkas_time_indexes(name):
    """After a clean shutdown each segment's largest timestamp is the last entry of the time index
    Kafka 3.8 wrote (manifest); after an unclean one (the corpus's log dir has no marker) the loader
    recovers every segment, and the largest batch timestamp is the same."""
    directory = need(GOLDEN / "logs" / name)
    partition = read_partition_dir(directory)
    clean = retention.analyze_partition(partition, retention.RetentionSettings(now=T0, shutdown=retention.CLEAN))
    recovered = retention.analyze_partition(partition, retention.RetentionSettings(now=T0))
    for segment, after_a_crash in zip(clean.segments, recovered.segments, strict=True):
        manifest = json.loads((GOLDEN / "manifests" / "logs" / name / f"{segment.base_offset:020d}.json").read_text())
        entries = manifest["timeIndex"]["entryList"]
        if entries:
            assert (segment.largest_timestamp, segment.timestamp_source) == (entries[-1][0], "time index")
            assert entries[-1][0] == max(b["maxTimestamp"] for b in manifest["batches"])
            assert (after_a_crash.largest_timestamp, after_a_crash.timestamp_source) == (entries[-1][0],
                                                                                         "batches (recovered)")
        else:  # the empty active segment
            assert not manifest["batches"] and segment.timestamp_source == "file mtime (no timestamps)"
            assert after_a_crash.timestamp_source == "file mtime (no timestamps)"


def test_golden_retention_at_a_chosen_time():
    """golden-v2-mixed-0 at T0 + 7 days + 50 s: segments 0 (largest T0+25.2 s) and 424 (T0+40.0 s) are past
    retention, 838 (T0+54.6 s) is not, so 838, 1323 and 1839 stay."""
    directory = need(GOLDEN / "logs" / "golden-v2-mixed-0")
    _, objects = run("--now", T0 + 7 * DAY + 50_000, directory)
    assert verdicts(objects, "golden-v2-mixed-0") == {0: "time", 424: "time", 838: None, 1323: None, 1839: None}


def test_v0_segments_fall_back_to_the_file_mtime(tmp_path):
    source = need(GOLDEN / "logs" / "golden-v0-0")
    copy = tmp_path / "golden-v0-0"
    shutil.copytree(source, copy)
    for path in copy.iterdir():
        os.utime(path, ns=(0, T0 * 1_000_000))
    _, objects = run("--now", T0 + 8 * DAY, copy)
    kept = {base for base, by in verdicts(objects, "golden-v0-0").items() if by is None}
    assert kept == set()  # every segment is 8 days old by its mtime, and the high watermark is the log end


def test_damaged_input_is_a_located_problem_not_a_traceback(tmp_path):
    copy = tmp_path / "events-0"
    shutil.copytree(EVENTS, copy)
    last = copy / "00000000000000000040.log"
    size = last.stat().st_size
    with last.open("ab") as out:
        out.write(bytes(20))  # a zero-filled tail: the loader's readNextOffset throws on its size 0
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\nevents 0\n")  # malformed line
    (tmp_path / ".kafka_cleanshutdown").write_bytes(b"")
    result, objects = run("--now", T0 + 9 * DAY, copy)
    assert result.exit_code == 1
    problems = summary(objects)["problems"]
    assert any(f"00000000000000000040.log: byte {size}: Found record size 0" in p for p in problems)
    assert not [o for o in objects if o["type"] == "segment" and o["deleted"]]  # Kafka never gets to retention
    assert any("log-start-offset-checkpoint" in p and "Malformed line 3" in p for p in problems)
    # after a crash (no marker) the loader recovers the segment first and cuts the tail: retention runs
    (tmp_path / ".kafka_cleanshutdown").unlink()
    result, objects = run("--now", T0 + 9 * DAY, copy)
    assert result.exit_code == 1  # (the malformed checkpoint)
    assert not any("Found record size 0" in p for p in summary(objects)["problems"])
    assert f"{last}: Kafka's loader recovers the segment, cutting it to {size} bytes" in summary(objects)["notes"]
    assert [o for o in objects if o["type"] == "segment" and o["deleted"]]


def test_missing_path_is_a_usage_error(tmp_path):
    result, _ = run(tmp_path / "nope")
    assert result.exit_code == 2
    assert "nope" in result.stderr



"""`kafkalog diverge`: the divergence offset and truncated records Kafka 3.8's leader-epoch rules give
for replicas of one partition cut at different offsets with a forked epoch."""
from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from kafkalog_tools import diverge as dv
from kafkalog_tools.cli import cli
from tests.conftest import FIXTURES, REAL, need

BROKERS = FIXTURES / "history" / "diverge"
B1, B2, B3 = (BROKERS / f"broker-{n}" / "payments-0" for n in (1, 2, 3))


def run(*args):
    result = CliRunner().invoke(cli, ["diverge", "--format", "json", *map(str, args)], catch_exceptions=False)
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    return result, {o["replica"]: o for o in objects if o["type"] == "replica"}, objects


def test_default_leader_is_the_most_recent_one_and_followers_truncate_at_the_fork():
    result, replicas, objects = run(B1, B2, B3)
    assert result.exit_code == 0, result.stderr
    assert objects[-1]["leader"] == str(B2) and objects[-1]["new_leader_epoch"] == 3
    one, two, three = replicas[str(B1)], replicas[str(B2)], replicas[str(B3)]
    assert (one["log_end_offset"], one["last_epoch"], one["divergence_offset"]) == (20, 1, 15)
    assert one["at_risk"] == [{"epoch": 1, "first_offset": 15, "last_offset": 19, "records": 5}]
    assert (two["is_leader"], two["divergence_offset"], two["records_at_risk"]) == (True, None, 0)
    assert (three["log_end_offset"], three["divergence_offset"], three["records_at_risk"]) == (17, 15, 2)
    assert three["epoch_source"] == "derived from batches" and three["epochs"] == [[0, 0], [1, 10]]
    assert "truncate this replica to its high watermark (12)" in three["notes"][0]
    assert one["first_difference"] == three["first_difference"] == 15
    assert not one["committed_at_risk"]  # its high watermark is 15: nothing committed is lost


def test_failing_over_to_the_old_leader_truncates_the_newer_epoch():
    _, replicas, _ = run("--leader", B1, B1, B2, B3)
    two, three = replicas[str(B2)], replicas[str(B3)]
    assert two["divergence_offset"] == 15
    assert two["at_risk"] == [{"epoch": 2, "first_offset": 15, "last_offset": 21, "records": 7}]
    assert two["truncation_steps"] == ["asked for epoch 2: the leader's epoch 1 ends at 20; here epoch 1 ends at 15"]
    assert (three["divergence_offset"], three["records_at_risk"]) == (17, 0)  # it holds a prefix of broker-1


def test_end_offset_for_follows_leader_epoch_file_cache():
    epochs = [(0, 0), (1, 10), (3, 20)]
    assert dv.end_offset_for(epochs, 3, 25) == (3, 25)  # the latest epoch ends at the log end
    assert dv.end_offset_for(epochs, 2, 25) == (1, 20)  # unknown epoch: the one below, ending where 3 starts
    assert dv.end_offset_for(epochs, 1, 25) == (1, 20)
    assert dv.end_offset_for([(2, 5)], 1, 9) == (1, 5)  # below every epoch: the first epoch's start
    assert dv.end_offset_for(epochs, 4, 25) == (dv.UNDEFINED, dv.UNDEFINED)
    assert dv.end_offset_for(epochs, dv.UNDEFINED, 25) == (dv.UNDEFINED, dv.UNDEFINED)


def test_an_unknown_epoch_makes_the_follower_truncate_and_ask_again():
    follower = dv.Replica("f", "p-0", log_end_offset=30, high_watermark=5, epochs=[(0, 0), (2, 10), (4, 20)])
    offset, steps = dv.follower_truncation(follower, [(0, 0), (3, 12), (5, 18)], 18)
    # epoch 4 -> leader says epoch 3 ends at 18; 3 is unknown here, so truncate to the end of epoch 2 (20),
    # then ask for 2 -> leader says epoch 0 ends at 12; 0 is known here and ends at 10: truncate to 10
    assert offset == 10
    assert len(steps) == 3


def test_epoch_cache_load_truncations():
    assert dv.truncate_from_end([(0, 0), (1, 10), (2, 15)], 15) == [(0, 0), (1, 10)]
    assert dv.truncate_from_start([(0, 0), (1, 10), (2, 15)], 12) == [(1, 12), (2, 15)]
    assert dv.truncate_from_start([(0, 0), (1, 10)], 10) == [(1, 10)]


def test_replicas_of_a_real_broker_agree_with_themselves():
    directory = need(REAL / "zk-broker-a" / "first_topic-0")
    _, replicas, _ = run(directory, directory)
    assert all(r["divergence_offset"] in (None, r["log_end_offset"]) and r["records_at_risk"] == 0
               for r in replicas.values())


def test_unreadable_checkpoint_and_damaged_batch_are_located_problems(tmp_path):
    copy = tmp_path / "broker-1" / "payments-0"
    shutil.copytree(B1, copy)
    (copy / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n")
    log = copy / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[-30] ^= 0xFF  # inside the last batch (17..19)
    log.write_bytes(bytes(data))
    result, replicas, _ = run(copy, B2)
    assert result.exit_code == 1
    problems = replicas[str(copy)]["problems"]
    assert any("leader-epoch-checkpoint" in p for p in problems)
    assert any("00000000000000000000.log: byte" in p for p in problems)
    assert replicas[str(copy)]["log_end_offset"] == 17


@pytest.mark.parametrize("args", [[str(B1)], [str(B1), "/nonexistent/payments-0"], ["--leader", str(B3), str(B1), str(B2)]])
def test_usage_errors(args):
    result = CliRunner().invoke(cli, ["diverge", *args])
    assert result.exit_code == 2

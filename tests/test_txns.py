"""`kafkalog txns` against the golden transactional partitions (Kafka's own .txnindex files, its
producer snapshots and the broker's record of completed transactions), and the dump of a KRaft
log dir built from the schemas (metadata segment, snapshot, quorum-state, bootstrap.checkpoint)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from construct import Int16sb

from kafkalog_tools.cli import cli
from kafkalog_tools.formats import txn_index
from kafkalog_tools.formats.record_batch import ATTR_CONTROL, build_batch, build_record
from kafkalog_tools.payloads.cluster_metadata import FRAME_HEADER
from kafkalog_tools.payloads.kraft_control import SNAPSHOT_FOOTER_RECORD, SNAPSHOT_HEADER_RECORD
from kafkalog_tools.payloads.metadata_records import METADATA_RECORDS, TAGGED
from kafkalog_tools.protocol import uuid_to_text

PARTITIONS = ["golden-v2-txn-0", "golden-v2-mixed-0"]


def run(*args: str) -> tuple[int, list[dict]]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def by_type(lines: list[dict], kind: str) -> list[dict]:
    return [line for line in lines if line["type"] == kind]


# ---------------------------------------------------------------------------------------------
# Golden partitions
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PARTITIONS)
def test_aborted_transactions_are_those_the_txnindex_lists(golden, name):
    directory = golden / "logs" / name
    code, lines = run("txns", "--format", "json", str(directory))
    assert code == 0
    indexed = {(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
               for path in sorted(directory.glob("*.txnindex"))
               for e in txn_index.TransactionIndex(path).entries()}
    aborted = {(t["producer_id"], t["first_offset"], t["marker_offset"], t["last_stable_offset"])
               for t in by_type(lines, "transaction") if t["state"] == "aborted"}
    assert indexed and aborted == indexed
    assert by_type(lines, "finding") == []


@pytest.mark.parametrize("name", PARTITIONS)
def test_transactions_match_the_brokers_record(golden, name):
    manifest = json.loads((golden / "manifests" / "logs" / name / "partition.json").read_text())
    code, lines = run("txns", "--format", "json", str(golden / "logs" / name))
    transactions = by_type(lines, "transaction")
    completed = {(t["producerId"], t["firstOffset"], t["lastOffset"], "aborted" if t["isAborted"] else "committed")
                 for append in manifest["appends"] for t in append.get("completedTxns", [])}
    assert {(t["producer_id"], t["first_offset"], t["marker_offset"], t["state"])
            for t in transactions if t["state"] != "open"} == completed

    last_snapshot = manifest["producerSnapshots"][-1]["entries"]
    hanging = {(e["producerId"], e["currentTxnFirstOffset"]) for e in last_snapshot if "currentTxnFirstOffset" in e}
    assert {(t["producer_id"], t["first_offset"]) for t in transactions if t["state"] == "open"} == hanging

    (summary,) = by_type(lines, "partition_summary")
    assert summary["producers"] == sorted(e["producerId"] for e in last_snapshot)
    assert {t["producer_id"] for t in transactions} <= set(summary["producers"])
    assert summary["open"] == len(hanging)
    end = max(a["lastOffset"] for a in manifest["appends"]) + 1
    assert summary["log_end_offset"] == end
    assert summary["last_stable_offset"] == (min(first for _, first in hanging) if hanging else end)
    for t in transactions:
        assert t["records"] >= t["batches"] >= 1
        assert t["bytes"] > 0 and t["last_offset"] >= t["first_offset"]
        assert t["duration_ms"] == t["end_timestamp"] - t["start_timestamp"]
        assert (t["marker_offset"] is None) == (t["state"] == "open")


def test_txn_0_figures(golden):
    code, lines = run("txns", "--format", "json", str(golden / "logs" / "golden-v2-txn-0"))
    (summary,) = by_type(lines, "partition_summary")
    assert (summary["committed"], summary["aborted"], summary["open"]) == (13, 20, 1)
    assert summary["last_stable_offset"] == 673
    (hanging,) = [t for t in by_type(lines, "transaction") if t["state"] == "open"]
    assert (hanging["producer_id"], hanging["producer_epoch"], hanging["first_offset"], hanging["last_offset"],
            hanging["records"], hanging["batches"]) == (3002, 5, 673, 678, 6, 1)


def test_a_txnindex_that_disagrees_is_a_finding(golden, tmp_path):
    directory = tmp_path / "golden-v2-txn-0"
    shutil.copytree(golden / "logs" / "golden-v2-txn-0", directory)
    index = directory / "00000000000000000085.txnindex"
    entries = txn_index.TransactionIndex(index).entries()
    wrong = entries[0].__class__(0, entries[0].producer_id, entries[0].first_offset, entries[0].last_offset,
                                 entries[0].last_stable_offset + 1)
    index.write_bytes(txn_index.build([wrong, *entries[1:]]))
    removed = directory / "00000000000000000400.txnindex"
    missing = len(txn_index.TransactionIndex(removed).entries())
    removed.unlink()

    code, lines = run("txns", "--format", "json", str(directory))
    assert code == 1
    kinds = sorted(f["kind"] for f in by_type(lines, "finding"))
    assert kinds.count("txnindex-mismatch") == 1
    assert kinds.count("aborted-txn-not-indexed") == missing > 0
    assert all(f["severity"] == "error" for f in by_type(lines, "finding"))


def test_usage_errors(tmp_path, golden):
    assert CliRunner().invoke(cli, ["txns", str(tmp_path / "missing")]).exit_code == 2
    segment = golden / "logs" / "golden-v2-txn-0" / "00000000000000000000.log"
    assert CliRunner().invoke(cli, ["txns", str(segment)]).exit_code == 2


def test_table_output(golden):
    result = CliRunner().invoke(cli, ["txns", "--format", "table", str(golden / "logs" / "golden-v2-txn-0")])
    assert result.exit_code == 0
    assert "13 committed, 20 aborted, 1 open; last stable offset 673" in " ".join(result.stdout.split())


# ---------------------------------------------------------------------------------------------
# A KRaft metadata log dir, built from the schemas
# ---------------------------------------------------------------------------------------------

TOPIC_ID = uuid_to_text(bytes(range(1, 17)))


def metadata_value(api_key: int, version: int, fields: dict) -> bytes:
    body = METADATA_RECORDS[api_key].layouts[version].build({TAGGED: {}, **fields})
    return FRAME_HEADER.build({"frameVersion": 1, "apiKey": api_key, "version": version}) + body


METADATA_VALUES = [
    metadata_value(12, 0, {"name": "metadata.version", "featureLevel": 20}),
    metadata_value(2, 0, {"name": "orders", "topicId": TOPIC_ID}),
    metadata_value(3, 0, {"partitionId": 0, "topicId": TOPIC_ID, "replicas": [1], "isr": [1],
                          "removingReplicas": [], "addingReplicas": [], "leader": 1, "leaderEpoch": 0,
                          "partitionEpoch": 0}),
]


def metadata_batch(base_offset: int, values: list[bytes]) -> bytes:
    records = [build_record(i, 0, None, value) for i, value in enumerate(values)]
    return build_batch(base_offset, records, base_timestamp=1_700_000_000_000, max_timestamp=1_700_000_000_000,
                       partition_leader_epoch=1)


def control_batch(base_offset: int, control_type: int, value: bytes) -> bytes:
    key = Int16sb.build(0) + Int16sb.build(control_type)
    return build_batch(base_offset, [build_record(0, 0, key, value)], attributes=ATTR_CONTROL,
                       base_timestamp=1_700_000_000_000, max_timestamp=1_700_000_000_000, partition_leader_epoch=1)


def snapshot_bytes(end_offset: int) -> bytes:
    header = SNAPSHOT_HEADER_RECORD.layouts[0].build({TAGGED: {}, "version": 0,
                                                      "lastContainedLogTimestamp": 1_700_000_000_000})
    footer = SNAPSHOT_FOOTER_RECORD.layouts[0].build({TAGGED: {}, "version": 0})
    return (control_batch(0, 3, header) + metadata_batch(0, METADATA_VALUES)
            + control_batch(len(METADATA_VALUES), 4, footer))


@pytest.fixture
def kraft_log_dir(tmp_path: Path) -> Path:
    root = tmp_path / "metadata"
    partition = root / "__cluster_metadata-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(
        metadata_batch(0, METADATA_VALUES[:2]) + metadata_batch(2, METADATA_VALUES[2:]))
    (partition / "00000000000000000003-0000000001.checkpoint").write_bytes(snapshot_bytes(3))
    (partition / "quorum-state").write_text(
        '{"leaderId":1,"leaderEpoch":1,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA",'
        '"data_version":1}')
    (root / "bootstrap.checkpoint").write_bytes(snapshot_bytes(1))
    return root


def test_a_kraft_log_dir_dumps_cleanly(kraft_log_dir):
    result = CliRunner().invoke(cli, ["dump", "--format", "json", "--deep-iteration", str(kraft_log_dir)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    files = {Path(line["file"]).name: line["kind"] for line in by_type(lines, "file")}
    assert files == {"00000000000000000000.log": "log", "00000000000000000003-0000000001.checkpoint": "checkpoint",
                     "quorum-state": "quorum-state", "bootstrap.checkpoint": "checkpoint"}
    assert by_type(lines, "problem") == [] and by_type(lines, "unknown_file") == []

    records = by_type(lines, "record")
    data = [r for r in records if "control" not in r]
    assert len(data) == 3 + 3 + 3  # the log, the snapshot, the bootstrap snapshot
    assert all(r.get("value_decoded") is not None and "decode_warning" not in r for r in data)
    assert [r["value_decoded"]["type"] for r in data[:3]] == ["FEATURE_LEVEL_RECORD", "TOPIC_RECORD",
                                                              "PARTITION_RECORD"]
    controls = [r["control"]["type"] for r in records if "control" in r]
    assert controls == ["SNAPSHOT_HEADER", "SNAPSHOT_FOOTER"] * 2

    (quorum,) = by_type(lines, "checkpoint_entry")
    assert quorum["kind"] == "quorum-state"
    assert (quorum["data_version"], quorum["leader_id"], quorum["leader_epoch"], quorum["voted_id"]) == (1, 1, 1, -1)


def test_kraft_text_dump_names_the_bootstrap_snapshot(kraft_log_dir):
    result = CliRunner().invoke(cli, ["dump", "--format", "text", str(kraft_log_dir)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert "KRaft bootstrap snapshot" in result.stdout
    assert "Snapshot end offset: 3, epoch: 1" in result.stdout
    assert "leader_id: 1" in result.stdout


def test_a_bad_quorum_state_is_a_problem_not_a_crash(kraft_log_dir):
    (kraft_log_dir / "__cluster_metadata-0" / "quorum-state").write_text('{"leaderId":1}')
    result = CliRunner().invoke(cli, ["dump", "--format", "json", str(kraft_log_dir)], catch_exceptions=False)
    assert result.exit_code == 1
    problems = [json.loads(line) for line in result.stdout.splitlines() if '"type":"problem"' in line]
    assert len(problems) == 1 and "data_version" in problems[0]["message"]


def test_a_kraft_log_dir_verifies_cleanly(kraft_log_dir):
    result = CliRunner().invoke(cli, ["verify", "--format", "json", str(kraft_log_dir)], catch_exceptions=False)
    findings = [json.loads(line) for line in result.stdout.splitlines()]
    errors = [f for f in findings if f.get("severity") == "error"]
    assert result.exit_code == 0, errors
    assert findings[-1]["type"] == "summary"

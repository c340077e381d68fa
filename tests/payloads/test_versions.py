"""`verify` on internal-topic records a newer Kafka wrote: one info finding per kind and version."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kafkalog_tools.cli import cli
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.payloads import share_group_state as sgs
from kafkalog_tools.payloads.versions import newer_versions
from kafkalog_tools.protocol import uuid_to_text
from tests.conftest import CORPUS, need

KEY = b"\x00\x00" + sgs.SharePartitionKey.build({"groupId": "g", "topicId": uuid_to_text(bytes(16)), "partition": 0})
SNAPSHOT = sgs.ShareSnapshotValue.build({"snapshotEpoch": 1, "stateEpoch": 1, "leaderEpoch": 0, "startOffset": 0,
                                         "stateBatches": [], "_tagged": {}})


def _partition(root: Path, versions: list[int]) -> Path:
    partition = root / "__share_group_state-0"
    partition.mkdir()
    batches = [build_batch(offset, [build_record(0, 0, KEY, version.to_bytes(2, "big") + SNAPSHOT)], base_timestamp=1,
                           max_timestamp=1) for offset, version in enumerate(versions)]
    (partition / "00000000000000000000.log").write_bytes(b"".join(batches))
    return partition


def test_one_info_finding_per_kind_and_version(tmp_path):
    partition = _partition(tmp_path, [0, 2, 2, 0, 5, 2])
    result = CliRunner().invoke(cli, ["verify", "--format", "json", str(partition)])
    findings = [json.loads(line) for line in result.stdout.splitlines()]
    newer = [f for f in findings if f.get("code") == "newer-record-version"]
    assert [(f["severity"], f["kind"], f["version"], f["count"], f["offset"]) for f in newer] == [
        ("info", "share_snapshot", 2, 3, 1), ("info", "share_snapshot", 5, 1, 4)]
    assert newer[0]["position"] == len(build_batch(0, [build_record(0, 0, KEY, b"\x00\x00" + SNAPSHOT)],
                                                   base_timestamp=1, max_timestamp=1))
    assert not [f for f in findings if f.get("severity") == "error"]


def test_known_versions_give_no_finding(tmp_path):
    partition = _partition(tmp_path, [0, 0])
    assert newer_versions("__share_group_state", [partition / "00000000000000000000.log"]) == []
    assert newer_versions("not-internal", [partition / "00000000000000000000.log"]) == []


def test_kafka_4_golden_corpus_holds_no_newer_version():
    logs = sorted(need(CORPUS / "golden-4.0" / "logs").glob("*/*.log"))
    assert [entry for log in logs for entry in newer_versions(log.parent.name.rsplit("-", 1)[0], [log])] == []

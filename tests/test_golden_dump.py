"""`kafkalog dump` against Kafka 3.8.0's own output and parse of the golden corpus.

Text: every file under golden/dump/ is what kafka-dump-log.sh printed; ours must be identical.
JSON: every batch and record Kafka parsed (golden/manifests/logs) must come out field for field.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog_tools.cli import cli

from tests.conftest import GOLDEN

DUMPS = sorted(p for p in (GOLDEN / "dump").rglob("*.txt")) if GOLDEN.exists() else []
SEGMENT_MANIFESTS = sorted((GOLDEN / "manifests" / "logs").glob("*/0*.json")) if GOLDEN.exists() else []


def run_dump(*args: str) -> tuple[int, bytes, str]:
    result = CliRunner().invoke(cli, ["dump", *args], catch_exceptions=False)
    return result.exit_code, result.stdout_bytes, result.stderr


@pytest.mark.parametrize("expected", DUMPS, ids=lambda p: str(p.relative_to(GOLDEN / "dump")))
def test_text_dump_equals_kafka_dump_log(expected: Path, golden, monkeypatch):
    target = str(expected.relative_to(GOLDEN / "dump"))[: -len(".txt")]
    monkeypatch.chdir(golden)  # Kafka was run from the golden dir: "Dumping <relative path>"
    flags = ["-d", "-p"] if target.endswith(".log") else []
    _, out, _ = run_dump("--format", "text", *flags, target)
    assert out == expected.read_bytes()


def test_every_golden_file_has_a_kafka_dump(golden):
    assert len(DUMPS) >= 290, "golden dumps missing: the text test would prove little"


BATCH_FIELDS = {
    "position": "position", "sizeInBytes": "size", "baseOffset": "base_offset", "lastOffset": "last_offset",
    "magic": "magic", "isValid": "crc_valid", "crc": "crc", "compression": "compression",
    "timestampType": "timestamp_type", "maxTimestamp": "max_timestamp", "producerId": "producer_id",
    "producerEpoch": "producer_epoch", "baseSequence": "base_sequence", "lastSequence": "last_sequence",
    "isTransactional": "is_transactional", "isControl": "is_control",
    "partitionLeaderEpoch": "partition_leader_epoch", "count": "count",
}
RECORD_FIELDS = {"offset": "offset", "timestamp": "timestamp", "sequence": "sequence", "sizeInBytes": "size",
                 "keySize": "key_size", "valueSize": "value_size", "key": "key", "value": "value"}


@pytest.mark.parametrize("manifest", SEGMENT_MANIFESTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_json_dump_equals_kafka_parse(manifest: Path, golden):
    expected = json.loads(manifest.read_text())
    log = golden / "logs" / manifest.parent.name / expected["file"]
    code, out, err = run_dump("--format", "json", "--deep-iteration", "--bytes", "base64", str(log))
    assert code == 0, err
    objects = [json.loads(line) for line in out.splitlines()]
    batches = [o for o in objects if o["type"] == "batch"]
    records = [o for o in objects if o["type"] == "record"]
    assert len(batches) == len(expected["batches"])
    expected_records = [r for b in expected["batches"] for r in b["records"]]
    assert len(records) == len(expected_records)
    for ours, theirs in zip(batches, expected["batches"]):
        assert {k: ours[v] for k, v in BATCH_FIELDS.items()} == {k: theirs[k] for k in BATCH_FIELDS}
    for ours, theirs in zip(records, expected_records):
        assert {k: ours[v] for k, v in RECORD_FIELDS.items()} == {k: theirs[k] for k in RECORD_FIELDS}
        assert [(h["key"], h["value"]) for h in ours["headers"]] == [(h["key"], h["value"]) for h in theirs["headers"]]
        if "controlType" in theirs:
            assert ours["control"]["type"] == theirs["controlType"]
            assert ours["control"]["coordinator_epoch"] == theirs.get("coordinatorEpoch")
        if "legacyMagic" in theirs:
            assert ours["legacy"] == {"magic": theirs["legacyMagic"], "crc": theirs["legacyCrc"],
                                      "crc_valid": theirs["isValid"], "attributes": theirs["legacyAttributes"]}


def test_manifests_cover_every_golden_segment(golden):
    logs = sorted((golden / "logs").glob("*/*.log"))
    non_empty = [p for p in logs if p.stat().st_size]
    assert len(SEGMENT_MANIFESTS) >= len(non_empty) > 0

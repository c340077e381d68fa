"""`kafkalog dump` against Kafka 4.0's own output and parse of the golden-4.0 corpus.

Text: every file under golden-4.0/dump/ is what Kafka 4.0's kafka-dump-log printed with the flags
in dump/COMMANDS.txt (its decoder options included); ours, given the same flags, must be identical.
Internal topics: every key and value Kafka's generated JSON converters wrote into
golden-4.0/manifests must equal what our decoders give, field for field. Both through the
per-batch path and the compiled bulk path, which must agree byte for byte.
"""
from __future__ import annotations

import base64
import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog_tools.cli import cli
from kafkalog_tools.native import bulk_scan
from kafkalog_tools.payloads import DecodedPayload, decoder_for_topic
from kafkalog_tools.payloads.consumer_offsets import (CONSUMER_PROTOCOL_ASSIGNMENT,
                                                      CONSUMER_PROTOCOL_SUBSCRIPTION)
from tests.conftest import CORPUS

GOLDEN4 = CORPUS / "golden-4.0"


def _commands() -> list[tuple[str, list[str]]]:
    """(file, our dump flags) for every kafka-dump-log run in dump/COMMANDS.txt."""
    if not GOLDEN4.exists():
        return []
    commands = []
    for line in (GOLDEN4 / "dump" / "COMMANDS.txt").read_text().splitlines():
        if not line.startswith("kafka-dump-log "):
            continue
        args = [arg for arg in shlex.split(line)[1:] if arg != "--files"]
        commands.append((args[-1], args[:-1]))
    return commands


COMMANDS = _commands()
MANIFESTS = sorted((GOLDEN4 / "manifests" / "logs").glob("*/*.json")) if GOLDEN4.exists() else []


@pytest.fixture
def golden4() -> Path:
    if not GOLDEN4.exists():
        pytest.skip(f"golden-4.0 corpus not found at {GOLDEN4} (set KAFKALOG_CORPUS to its location)")
    return GOLDEN4


def run_dump(*args: str) -> tuple[int, bytes, str]:
    result = CliRunner().invoke(cli, ["dump", *args], catch_exceptions=False)
    return result.exit_code, result.stdout_bytes, result.stderr


@pytest.mark.parametrize("bulk", ["never", "always"])
@pytest.mark.parametrize("target, flags", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_text_dump_equals_kafka_4_dump_log(target, flags, bulk, golden4, monkeypatch):
    monkeypatch.chdir(golden4)  # Kafka was run from the corpus root: "Dumping logs/..."
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, bulk)
    code, out, err = run_dump("--format", "text", *flags, target)
    assert (code, err) == (0, "")
    assert out == (golden4 / "dump" / f"{target}.txt").read_bytes()


def test_every_golden4_file_has_a_kafka_dump(golden4):
    assert len(COMMANDS) == 65
    decoders = {flag for _, flags in COMMANDS for flag in flags if flag.endswith("-decoder")}
    assert decoders == {"--offsets-decoder", "--transaction-log-decoder", "--cluster-metadata-decoder",
                        "--share-group-state-decoder", "--remote-log-metadata-decoder"}


# ---------------------------------------------------------------------------------------------
# Keys and values against Kafka's JSON converters
# ---------------------------------------------------------------------------------------------


def _collapse_consumer_protocol(data: dict) -> dict:
    """Our GroupMetadataValue expands a consumer group's subscription and assignment bytes; Kafka's
    converter writes them as base64. Build ours back to bytes to compare."""
    for member in data.get("members", ()):
        for field, schemas in (("subscription", CONSUMER_PROTOCOL_SUBSCRIPTION),
                               ("assignment", CONSUMER_PROTOCOL_ASSIGNMENT)):
            expanded = member[field]
            if isinstance(expanded, dict):
                version = expanded["version"]
                fields = dict(expanded["data"], userData=_b(expanded["data"]["userData"]))
                body = schemas[min(version, max(schemas))].build(fields)
                member[field] = base64.b64encode(version.to_bytes(2, "big", signed=True) + body).decode()
    return data


def _ours(topic: str, decoded: DecodedPayload) -> dict:
    """Our decoded key and value in the shape of the manifest's `decoded`."""
    key, value = decoded.key, decoded.value
    if topic == "__remote_log_metadata":
        return {"valueType": value["type"], "apiKey": value["apiKey"], "valueVersion": value["version"],
                "value": value["data"], "toString": decoded.value_text}
    if topic == "__cluster_metadata":
        return {"type": value["type"], "version": value["version"], "data": value["data"]}
    out = {"keyVersion": key["version"], "key": key.get("data")}
    if value is None:
        out["value"] = None
    else:
        out["valueVersion"] = value["version"]
        out["value"] = _collapse_consumer_protocol(value["data"]) if "data" in value else value
    return out


def _theirs(topic: str, decoded: dict) -> dict:
    if topic == "__remote_log_metadata":  # the class name; ours is its MetadataRecordType constant
        return {**decoded, "valueType": re.sub(r"(?<=[a-z])(?=[A-Z])", "_", decoded["valueType"]).upper()}
    if topic == "__cluster_metadata":
        return decoded
    return {name: item for name, item in decoded.items() if name not in ("keyType", "valueType")}


def _b(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


PARTITIONS = sorted({m.parent.name for m in MANIFESTS})


@pytest.mark.parametrize("partition", PARTITIONS)
def test_internal_keys_and_values_equal_kafka_4_json_converters(partition, golden4):
    topic = partition.rsplit("-", 1)[0]
    decoder = decoder_for_topic(topic)
    assert (decoder is None) == (topic == "tv2-data")
    compared = 0
    differences = []
    for manifest in sorted((golden4 / "manifests" / "logs" / partition).glob("*.json")):
        expected = json.loads(manifest.read_text())
        for batch in expected.get("log", {}).get("batches", ()):
            for record in batch["records"]:
                if "decoded" not in record:
                    continue
                compared += 1
                ours = _ours(topic, decoder.decode(_b(record["key"]), _b(record["value"]), record["offset"]))
                if ours != _theirs(topic, record["decoded"]):
                    differences.append((manifest.name, record["offset"], ours, record["decoded"]))
    assert not differences, differences[:2]
    assert compared > 0 or decoder is None


@pytest.mark.parametrize("partition", PARTITIONS)
def test_control_records_equal_kafka_4_parse(partition, golden4):
    """Markers and KRaft control records (LeaderChange, KRaftVersion, KRaftVoters, snapshot header
    and footer) against Kafka's parse and its converters."""
    compared = 0
    for manifest in sorted((golden4 / "manifests" / "logs" / partition).glob("*.json")):
        expected = json.loads(manifest.read_text())
        if "log" not in expected:
            continue
        theirs = {r["offset"]: r["control"] for b in expected["log"]["batches"] for r in b["records"] if "control" in r}
        _, out, _ = run_dump("--format", "json", "-d", str(golden4 / "logs" / partition / expected["log"]["file"]))
        ours = {o["offset"]: o["control"] for o in map(json.loads, out.splitlines())
                if o["type"] == "record" and o.get("control")}
        assert ours.keys() == theirs.keys()
        for offset, control in theirs.items():
            mine = ours[offset]
            assert mine["type"] == control["controlType"]
            if "coordinatorEpoch" in control:
                assert mine["coordinator_epoch"] == control["coordinatorEpoch"]
            else:
                assert mine["data"] == control["data"]
            compared += 1
    assert compared > 0 or partition.startswith(("__remote", "__share", "__transaction"))


@pytest.mark.parametrize("flags", [["-d", "-p"], ["-d", "--bytes", "base64"], []], ids=["decoded", "base64", "shallow"])
def test_json_dump_in_bulk_equals_batch_by_batch(flags, golden4, monkeypatch):
    outcomes = []
    for mode in ("never", "always"):
        monkeypatch.setenv(bulk_scan.MODE_VARIABLE, mode)
        outcomes.append(run_dump("--format", "json", *flags, str(golden4 / "logs")))
    assert outcomes[0][0] == 0 and outcomes[0][1].count(b'"type":"record"') > (1000 if flags else -1)
    assert outcomes[1] == outcomes[0]

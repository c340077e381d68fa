"""`verify` on internal-topic records a newer Kafka wrote: one info finding per kind and version."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog_tools.cli import cli
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.payloads import PayloadError, decoder_for_topic
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
    batches = [build_batch(offset, [build_record(0, 0, KEY, version.to_bytes(2, "big", signed=True) + SNAPSHOT)], base_timestamp=1,
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


def _corpus_records(topic: str) -> list[tuple[bytes | None, bytes | None]]:
    from kafkalog_tools.formats.segment import SegmentFile

    records = []
    for log in sorted(need(CORPUS / "golden-4.0" / "logs").glob(f"{topic}-*/*.log")):
        with SegmentFile(log) as segment:
            records += [(r.key, r.value) for batch in segment.batches() if not batch.is_control
                        for r in batch.records()]
    return records


def _versions_rewritten(key: bytes | None, value: bytes | None):
    """The record, and copies with its key's record type, its value's int16 version and its
    value's frame bytes (frame version, apiKey, version) rewritten to known, newer, negative and
    multi-byte values."""
    yield key, value
    shorts = [-1, 0, 1, 2, 3, 4, 5, 9, 17, 20, 127, 128, 255, 0x7FFF]
    for number in shorts:
        if key is not None and len(key) >= 2:
            yield number.to_bytes(2, "big", signed=True) + key[2:], value
        if value is not None and len(value) >= 2:
            yield key, number.to_bytes(2, "big", signed=True) + value[2:]
    if value is not None and len(value) >= 3:
        for at in range(3):
            for byte in (0, 1, 2, 3, 20, 100, 0x7F, 0x80, 0x81, 0xFF):
                yield key, value[:at] + bytes([byte]) + value[at + 1:]
    yield key, None
    yield None, value
    yield key, b""


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__share_group_state", "__transaction_state",
                                   "__cluster_metadata", "__remote_log_metadata"])
def test_a_value_version_said_known_is_never_marked_newer(topic):
    """`value_version_known` lets verify's search skip a record's decoding: it must never say
    known where `decode` marks the value `read_as_version`, and must say known of the records
    Kafka wrote (or the search saves nothing)."""
    decoder = decoder_for_topic(topic)
    corpus = _corpus_records(topic)
    assert corpus and all(decoder.value_version_known(key, value) for key, value in corpus)
    marked = said_known = 0
    for key, value in {variant for record in corpus[:40] for variant in _versions_rewritten(*record)}:
        known = decoder.value_version_known(key, value)
        said_known += known
        try:
            decoded = decoder.decode(key, value, offset=0)
        except PayloadError:
            continue
        if isinstance(decoded.value, dict) and "read_as_version" in decoded.value:
            marked += 1
            assert not known, (key, value)
    assert marked > 5 and said_known > 20


def test_the_search_finds_what_decoding_every_record_finds(tmp_path):
    partition = _partition(tmp_path, [0, 2, 2, 0, 5, 2, 1, 0x7FFF, -1])
    log = partition / "00000000000000000000.log"
    every = newer_versions("__share_group_state", [log], every_record=True)
    assert newer_versions("__share_group_state", [log]) == every
    assert [(e.version, e.count) for e in every] == [(2, 3), (5, 1), (1, 1), (0x7FFF, 1), (-1, 1)]

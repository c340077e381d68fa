"""Internal-topic payloads printed by Kafka 4.0's own kafka-dump-log and by our `dump --format text`.

Segments are written here with records no corpus holds: transactions over many partitions of many
topics (Kafka prints them in its hash set's order), newer record versions (read with the newest
layout where Kafka's readers allow it, refused by nested structs where they do not), remote log
metadata that Kafka cannot build an object from, share group state of every type. Each partition is
dumped once by the oracle (`../shared/tools/kafka-oracle/bin/kafka-dump-log`) and once by us with
the same flags; the outputs must be identical. The seed is printed (KAFKALOG_KAFKA_SEED: conftest.chosen_seed).
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog_tools.cli import cli
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.payloads import consumer_offsets as co
from kafkalog_tools.payloads import remote_log_metadata as rl
from kafkalog_tools.payloads import share_group_state as sgs
from kafkalog_tools.payloads.cluster_metadata import FRAME_HEADER
from kafkalog_tools.payloads.metadata_records import METADATA_RECORDS
from kafkalog_tools.payloads.transaction_state import TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE
from kafkalog_tools.protocol import uuid_to_text
from tests.conftest import CORPUS, chosen_seed

KAFKA_DUMP_LOG = Path(os.environ.get("KAFKALOG_ORACLE", CORPUS.parent / "tools" / "kafka-oracle")) / "bin" / "kafka-dump-log"
SEED = chosen_seed(2026112901)
TOPIC_ID = uuid_to_text(bytes(range(16)))
SEGMENT_ID = uuid_to_text(bytes(range(16, 32)))


@pytest.fixture(scope="module")
def kafka_dump_log() -> Path:
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH: Kafka's kafka-dump-log cannot run")
    if not KAFKA_DUMP_LOG.exists():
        pytest.skip(f"the Kafka oracle is not at {KAFKA_DUMP_LOG.parent.parent} (set KAFKALOG_ORACLE)")
    return KAFKA_DUMP_LOG


def _segment(root: Path, partition: str, records: list[tuple[bytes | None, bytes | None]]) -> Path:
    directory = root / partition
    directory.mkdir()
    log = directory / "00000000000000000000.log"
    log.write_bytes(b"".join(build_batch(offset, [build_record(0, 0, key, value)], base_timestamp=1_700_000_000_000,
                                         max_timestamp=1_700_000_000_000)
                             for offset, (key, value) in enumerate(records)))
    return log


def _both(kafka_dump_log: Path, root: Path, log: Path, decoder_flag: str) -> tuple[str, str]:
    relative = str(log.relative_to(root))
    flags = ["--deep-iteration", "--print-data-log", decoder_flag]
    kafka = subprocess.run([str(kafka_dump_log), *flags, "--files", relative], cwd=root, capture_output=True,
                           text=True, timeout=120)
    assert kafka.returncode == 0 and kafka.stderr == "", kafka.stderr
    cwd = os.getcwd()
    os.chdir(root)
    try:
        ours = CliRunner().invoke(cli, ["dump", "--format", "text", *flags, relative], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    return kafka.stdout, ours.stdout


def _assert_same(kafka: str, ours: str) -> None:
    for number, (theirs, mine) in enumerate(zip(kafka.splitlines(), ours.splitlines()), 1):
        assert mine == theirs, f"seed {SEED}, line {number}"
    assert ours == kafka, f"seed {SEED}"


# ---------------------------------------------------------------------------------------------
# __transaction_state: the partitions' order
# ---------------------------------------------------------------------------------------------

TOPICS = ["orders", "payments", "tv2-data", "__consumer_offsets", "a", "caf\u00e9", "t\U0001F600", "x" * 40]


def _transaction_values(rng: random.Random, count: int) -> list[tuple[bytes, bytes | None]]:
    key = b"\x00\x00" + TRANSACTION_LOG_KEY[0].build({"transactionalId": "txn"})
    records = []
    for _ in range(count):
        groups = []
        for _ in range(rng.randrange(1, 7)):
            topic = rng.choice(TOPICS) if rng.random() < 0.7 else "".join(
                rng.choice("abcxyz-_.0123") for _ in range(rng.randrange(1, 12)))
            size = rng.choice([1, 2, 3, 4, 5, 6, 11, 12, 13, 20, 40])
            groups.append({"topic": topic, "partitionIds": [rng.randrange(rng.choice([10, 1000, 2**31 - 1]))
                                                            for _ in range(size)], "_tagged": {}})
        version = rng.choice([0, 1])
        value = {"producerId": 4000, "producerEpoch": 1, "transactionTimeoutMs": 60000,
                 "transactionStatus": rng.choice([1, 2, 3]), "transactionPartitions": groups,
                 "transactionLastUpdateTimestampMs": 5, "transactionStartTimestampMs": 4,
                 "_tagged": {"clientTransactionVersion": 2} if version else {}}
        records.append((key, version.to_bytes(2, "big") + TRANSACTION_LOG_VALUE[version].build(value)))
    return records + [(key, None)]


def test_transaction_partitions_in_kafkas_order(kafka_dump_log, tmp_path):
    print(f"seed {SEED}")
    log = _segment(tmp_path, "__transaction_state-3", _transaction_values(random.Random(SEED), 150))
    _assert_same(*_both(kafka_dump_log, tmp_path, log, "--transaction-log-decoder"))


# ---------------------------------------------------------------------------------------------
# __remote_log_metadata: objects Kafka builds and objects it refuses
# ---------------------------------------------------------------------------------------------

TOPIC_ID_PARTITION = {"name": "tiered", "id": TOPIC_ID, "partition": 4, "_tagged": {}}
SEGMENT = {"remoteLogSegmentId": {"topicIdPartition": TOPIC_ID_PARTITION, "id": SEGMENT_ID, "_tagged": {}},
           "startOffset": 0, "endOffset": 10, "brokerId": 1, "maxTimestampMs": 5, "eventTimestampMs": 6,
           "segmentLeaderEpochs": [{"leaderEpoch": 3, "offset": 7, "_tagged": {}},
                                   {"leaderEpoch": 1, "offset": 0, "_tagged": {}}],
           "segmentSizeInBytes": 100, "customMetadata": b"abc", "remoteLogSegmentState": 0,
           "_tagged": {"txnIndexEmpty": True}}
UPDATE = {"remoteLogSegmentId": SEGMENT["remoteLogSegmentId"], "brokerId": 2, "eventTimestampMs": 9,
          "customMetadata": None, "remoteLogSegmentState": 2, "_tagged": {}}
DELETE = {"topicIdPartition": TOPIC_ID_PARTITION, "brokerId": 2, "eventTimestampMs": 9,
          "remotePartitionDeleteState": 1, "_tagged": {}}
SNAPSHOT = {"segmentId": SEGMENT_ID, "startOffset": -5, "endOffset": -9, "brokerId": 1, "maxTimestampMs": 5,
            "eventTimestampMs": 6, "segmentLeaderEpochs": [{"leaderEpoch": 2, "offset": 7, "_tagged": {}}],
            "segmentSizeInBytes": 100, "customMetadata": None, "remoteLogSegmentState": 3, "_tagged": {}}


def _framed(schema, fields: dict, version: int = 0, frame_version: int = 1) -> bytes:
    header = FRAME_HEADER.build({"frameVersion": frame_version, "apiKey": schema.api_key, "version": version})
    return header + schema.layouts[0].build(fields)


def test_remote_log_metadata_as_kafka_prints_it(kafka_dump_log, tmp_path):
    segment, update = rl.REMOTE_LOG_SEGMENT_METADATA, rl.REMOTE_LOG_SEGMENT_METADATA_UPDATE
    delete, snapshot = rl.REMOTE_PARTITION_DELETE_METADATA, rl.REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT
    values = [
        _framed(segment, SEGMENT),
        _framed(segment, {**SEGMENT, "remoteLogSegmentState": 9}),
        _framed(segment, {**SEGMENT, "startOffset": -1}),
        _framed(segment, {**SEGMENT, "startOffset": 2, "endOffset": -3}),
        _framed(segment, {**SEGMENT, "segmentLeaderEpochs": []}),
        _framed(segment, {**SEGMENT, "startOffset": -1, "remoteLogSegmentState": 7, "segmentLeaderEpochs": []}),
        _framed(segment, SEGMENT, version=4),
        _framed(update, UPDATE),
        _framed(update, {**UPDATE, "remoteLogSegmentState": -1, "customMetadata": b""}),
        _framed(update, UPDATE, version=1),
        _framed(delete, DELETE),
        _framed(delete, {**DELETE, "remotePartitionDeleteState": 3}),
        _framed(delete, DELETE, version=2),
        _framed(snapshot, SNAPSHOT),
        _framed(snapshot, {**SNAPSHOT, "segmentLeaderEpochs": []}),
        _framed(snapshot, {**SNAPSHOT, "segmentLeaderEpochs": []}, version=3),
        _framed(snapshot, SNAPSHOT, version=3),
        _framed(snapshot, SNAPSHOT, frame_version=0),
        _framed(snapshot, SNAPSHOT, frame_version=2),
        b"\x01\x04\x00",
        _framed(delete, DELETE) + b"\x00",
        _framed(delete, DELETE)[:-3],
        b"",
        None,
    ]
    log = _segment(tmp_path, "__remote_log_metadata-0", [(None, value) for value in values])
    _assert_same(*_both(kafka_dump_log, tmp_path, log, "--remote-log-metadata-decoder"))


# ---------------------------------------------------------------------------------------------
# Coordinator records: share group state, share group and newer-version records in
# __consumer_offsets, and metadata records with nested structs at a newer version
# ---------------------------------------------------------------------------------------------

STATE_BATCHES = [{"firstOffset": 0, "lastOffset": 9, "deliveryState": 2, "deliveryCount": 1, "_tagged": {}}]


def test_share_group_state_as_kafka_prints_it(kafka_dump_log, tmp_path):
    partition_key = sgs.SharePartitionKey.build({"groupId": "sg", "topicId": TOPIC_ID, "partition": 1})
    snapshot = sgs.ShareSnapshotValue.build({"snapshotEpoch": 65535, "stateEpoch": 1, "leaderEpoch": 0,
                                             "startOffset": 0, "stateBatches": STATE_BATCHES, "_tagged": {}})
    update = sgs.ShareUpdateValue.build({"snapshotEpoch": 1, "leaderEpoch": 0, "startOffset": 0,
                                         "stateBatches": STATE_BATCHES, "_tagged": {}})
    records = [(b"\x00\x00" + partition_key, version.to_bytes(2, "big") + snapshot) for version in (0, 1, 3)]
    records += [(b"\x00\x01" + partition_key, version.to_bytes(2, "big") + update) for version in (0, 1, 2)]
    records += [(b"\x00\x00" + partition_key, None), (b"\x00\x05" + partition_key, b"\x00\x00")]
    log = _segment(tmp_path, "__share_group_state-0", records)
    _assert_same(*_both(kafka_dump_log, tmp_path, log, "--share-group-state-decoder"))


def test_consumer_offsets_share_groups_and_newer_versions_as_kafka_prints_them(kafka_dump_log, tmp_path):
    def group_key(record_type: int) -> bytes:
        return record_type.to_bytes(2, "big") + co.GroupIdKey.build({"groupId": "g"})

    def member_key(record_type: int) -> bytes:
        return record_type.to_bytes(2, "big") + co.GroupIdMemberIdKey.build({"groupId": "g", "memberId": "m"})

    topic_partitions = {"topicId": TOPIC_ID, "partitions": [1, 0], "_tagged": {}}
    topic = {"topicId": TOPIC_ID, "topicName": "x", "numPartitions": 1, "partitionMetadata": [], "_tagged": {}}
    classic = {"sessionTimeoutMs": 1, "supportedProtocols": [{"name": "range", "metadata": b"\x00", "_tagged": {}}],
               "_tagged": {}}

    def partition_metadata(topics):
        return co.ConsumerGroupPartitionMetadataValue.build({"topics": topics, "_tagged": {}})

    def member(classic_member):
        return co.ConsumerGroupMemberMetadataValue.build({
            "instanceId": None, "rackId": "r", "clientId": "c", "clientHost": "h", "subscribedTopicNames": ["x"],
            "subscribedTopicRegex": None, "rebalanceTimeoutMs": 1, "serverAssignor": None,
            "_tagged": {"classicMemberMetadata": classic_member}})

    assignment = co.ConsumerGroupTargetAssignmentMemberValue.build({"topicPartitions": [topic_partitions],
                                                                    "_tagged": {}})
    records = [
        (group_key(4), b"\x00\x01" + partition_metadata([topic])),
        (group_key(4), b"\x00\x01" + partition_metadata([])),
        (group_key(9), b"\x00\x00" + partition_metadata([topic])),
        (group_key(9), b"\x00\x02" + partition_metadata([topic])),
        (member_key(5), b"\x00\x00" + member(classic)),
        (member_key(5), b"\x00\x00" + member(None)),
        (member_key(5), b"\x00\x03" + member(classic)),
        (member_key(5), b"\x00\x03" + member(None)),
        (member_key(7), b"\x00\x01" + assignment),
        (member_key(13), b"\x00\x00" + assignment),
        (member_key(13), b"\x00\x01" + assignment),
        (member_key(10), b"\x00\x00" + co.ShareGroupMemberMetadataValue.build({
            "rackId": None, "clientId": "c", "clientHost": "h", "subscribedTopicNames": ["x"], "_tagged": {}})),
        (group_key(11), b"\x00\x04" + co.ConsumerGroupMetadataValue.build({"epoch": 3, "_tagged": {}})),
        (member_key(14), b"\x00\x01" + co.ShareGroupCurrentMemberAssignmentValue.build({
            "memberEpoch": 2, "previousMemberEpoch": 1, "state": 0, "assignedPartitions": [topic_partitions],
            "_tagged": {}})),
        (group_key(15), b"\x00\x01" + co.ShareGroupStatePartitionMetadataValue.build({
            "initializedTopics": [{"topicId": TOPIC_ID, "topicName": "x", "partitions": [1], "_tagged": {}}],
            "deletingTopics": [{"topicId": TOPIC_ID, "topicName": "y", "_tagged": {}}], "_tagged": {}})),
        (b"\x00\x10" + co.ConsumerGroupRegularExpressionKey.build({"groupId": "g", "regularExpression": "x.*"}),
         b"\x00\x00" + co.ConsumerGroupRegularExpressionValue.build({"topics": ["xa"], "version": 3, "timestamp": 4,
                                                                     "_tagged": {}})),
        (group_key(12), None),
        (group_key(17), b"\x00\x00"),
    ]
    log = _segment(tmp_path, "__consumer_offsets-0", records)
    _assert_same(*_both(kafka_dump_log, tmp_path, log, "--offsets-decoder"))


def test_newer_metadata_records_with_nested_structs_as_kafka_prints_them(kafka_dump_log, tmp_path):
    register_broker, client_quota = METADATA_RECORDS[0], METADATA_RECORDS[14]

    def broker(endpoints):
        return register_broker.layouts[3].build({
            "brokerId": 1, "isMigratingZkBroker": False, "incarnationId": TOPIC_ID, "brokerEpoch": 1,
            "endPoints": endpoints, "features": [], "rack": None, "fenced": True, "inControlledShutdown": False,
            "_tagged": {}})

    endpoint = {"name": "P", "host": "h", "port": 1, "securityProtocol": 0, "_tagged": {}}
    quota = client_quota.layouts[0].build({"entity": [{"entityType": "user", "entityName": None, "_tagged": {}}],
                                           "key": "k", "value": 1.0, "remove": False, "_tagged": {}})

    def header(api_key: int, version: int) -> bytes:
        return FRAME_HEADER.build({"frameVersion": 1, "apiKey": api_key, "version": version})

    records = [(None, header(0, 3) + broker([endpoint])), (None, header(0, 4) + broker([endpoint])),
               (None, header(0, 4) + broker([])), (None, header(14, 1) + quota)]
    log = _segment(tmp_path, "__cluster_metadata-0", records)
    _assert_same(*_both(kafka_dump_log, tmp_path, log, "--cluster-metadata-decoder"))

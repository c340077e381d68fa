"""The `__remote_log_metadata` decoder: every message round-trips, decodes to Kafka's converter
field names, prints as Kafka 4.0's `toString()`, and fails as Kafka's serde and constructors fail."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog_tools.payloads import decoder_for_topic
from kafkalog_tools.payloads import remote_log_metadata as rl
from kafkalog_tools.payloads.cluster_metadata import FRAME_HEADER
from kafkalog_tools.protocol import uuid_to_text
from tests.strategies import INT8, INT32, INT64

TOPIC_ID = uuid_to_text(bytes(range(16)))
SEGMENT_ID = uuid_to_text(bytes(range(16, 32)))
TOPIC_ID_PARTITION = {"name": "tiered", "id": TOPIC_ID, "partition": 4, "_tagged": {}}
SEGMENT_ID_ENTRY = {"topicIdPartition": TOPIC_ID_PARTITION, "id": SEGMENT_ID, "_tagged": {}}
EPOCHS = [{"leaderEpoch": 3, "offset": 70, "_tagged": {}}, {"leaderEpoch": 1, "offset": 0, "_tagged": {}}]
EXAMPLES = {
    0: {"remoteLogSegmentId": SEGMENT_ID_ENTRY, "startOffset": 0, "endOffset": 99, "brokerId": 1,
        "maxTimestampMs": 5, "eventTimestampMs": 6, "segmentLeaderEpochs": EPOCHS, "segmentSizeInBytes": 100,
        "customMetadata": b"abc", "remoteLogSegmentState": 0, "_tagged": {"txnIndexEmpty": True}},
    1: {"remoteLogSegmentId": SEGMENT_ID_ENTRY, "brokerId": 2, "eventTimestampMs": 9, "customMetadata": None,
        "remoteLogSegmentState": 3, "_tagged": {}},
    2: {"topicIdPartition": TOPIC_ID_PARTITION, "brokerId": 2, "eventTimestampMs": 9,
        "remotePartitionDeleteState": 2, "_tagged": {}},
    3: {"segmentId": SEGMENT_ID, "startOffset": 0, "endOffset": 99, "brokerId": 1, "maxTimestampMs": 5,
        "eventTimestampMs": 6, "segmentLeaderEpochs": EPOCHS, "segmentSizeInBytes": 100, "customMetadata": None,
        "remoteLogSegmentState": 1, "_tagged": {}},
}
TEXTS = {
    0: "RemoteLogSegmentMetadata{remoteLogSegmentId=RemoteLogSegmentId{topicIdPartition=AAECAwQFBgcICQoLDA0ODw:"
       "tiered-4, id=EBESExQVFhcYGRobHB0eHw}, startOffset=0, endOffset=99, brokerId=1, maxTimestampMs=5, "
       "eventTimestampMs=6, segmentLeaderEpochs={1=0, 3=70}, segmentSizeInBytes=100, "
       "customMetadata=Optional[CustomMetadata{3 bytes}], state=COPY_SEGMENT_STARTED, txnIdxEmpty=true}",
    1: "RemoteLogSegmentMetadataUpdate{remoteLogSegmentId=RemoteLogSegmentId{topicIdPartition="
       "AAECAwQFBgcICQoLDA0ODw:tiered-4, id=EBESExQVFhcYGRobHB0eHw}, customMetadata=Optional.empty, "
       "state=DELETE_SEGMENT_FINISHED, eventTimestampMs=9, brokerId=2}",
    2: "RemotePartitionDeleteMetadata{topicPartition=AAECAwQFBgcICQoLDA0ODw:tiered-4, "
       "state=DELETE_PARTITION_FINISHED, eventTimestampMs=9, brokerId=2}",
    3: "RemoteLogSegmentMetadataSnapshot{segmentId=EBESExQVFhcYGRobHB0eHw, startOffset=0, endOffset=99, "
       "maxTimestampMs=5, segmentLeaderEpochs={1=0, 3=70}, segmentSizeInBytes=100, customMetadata=Optional.empty, "
       "state=COPY_SEGMENT_FINISHED, txnIdxEmpty=false}",
}


def framed(api_key: int, fields: dict, version: int = 0) -> bytes:
    header = FRAME_HEADER.build({"frameVersion": 1, "apiKey": api_key, "version": version})
    return header + rl.REMOTE_LOG_METADATA_RECORDS[api_key].layouts[0].build(fields)


def test_the_decoder_is_picked_by_topic():
    assert decoder_for_topic("__remote_log_metadata").name == "remote-log-metadata"


def test_the_table_holds_the_four_messages_the_serde_reads():
    assert {key: (schema.name, schema.newest_version) for key, schema in rl.REMOTE_LOG_METADATA_RECORDS.items()} == {
        0: ("RemoteLogSegmentMetadataRecord", 0), 1: ("RemoteLogSegmentMetadataUpdateRecord", 0),
        2: ("RemotePartitionDeleteMetadataRecord", 0), 3: ("RemoteLogSegmentMetadataSnapshotRecord", 0)}


@pytest.mark.parametrize("api_key", EXAMPLES)
def test_round_trip_and_text(api_key):
    layout = rl.REMOTE_LOG_METADATA_RECORDS[api_key].layouts[0]
    body = layout.build(EXAMPLES[api_key])
    assert layout.build(layout.parse(body)) == body
    assert layout.compile().build(EXAMPLES[api_key]) == body
    decoded = rl.decode(None, framed(api_key, EXAMPLES[api_key]))
    assert decoded.warning is None and decoded.key is None and decoded.key_text is None
    assert decoded.value_text == TEXTS[api_key]
    assert decoded.value["apiKey"] == api_key and decoded.value["version"] == 0
    json.dumps(decoded.value)


def test_json_uses_the_converters_names_and_omits_a_tagged_field_at_its_default():
    data = rl.decode(None, framed(0, EXAMPLES[0])).value["data"]
    assert list(data) == ["remoteLogSegmentId", "startOffset", "endOffset", "brokerId", "maxTimestampMs",
                          "eventTimestampMs", "segmentLeaderEpochs", "segmentSizeInBytes", "customMetadata",
                          "remoteLogSegmentState", "txnIndexEmpty"]
    assert data["customMetadata"] == "YWJj"
    assert "txnIndexEmpty" not in rl.decode(None, framed(0, {**EXAMPLES[0], "_tagged": {}})).value["data"]


@given(st.fixed_dictionaries({
    "remoteLogSegmentId": st.just(SEGMENT_ID_ENTRY), "startOffset": INT64, "endOffset": INT64, "brokerId": INT32,
    "maxTimestampMs": INT64, "eventTimestampMs": INT64,
    "segmentLeaderEpochs": st.lists(st.fixed_dictionaries({"leaderEpoch": INT32, "offset": INT64,
                                                           "_tagged": st.just({})}), max_size=3),
    "segmentSizeInBytes": INT32, "customMetadata": st.none() | st.binary(max_size=8),
    "remoteLogSegmentState": INT8, "_tagged": st.just({})}))
def test_any_segment_metadata_decodes_or_names_kafkas_error(fields):
    decoded = rl.decode(None, framed(0, fields), offset=3)
    assert decoded.value["data"]["startOffset"] == fields["startOffset"]
    assert decoded.value_text.startswith(("RemoteLogSegmentMetadata{", "Error at offset 3, skipping. "))


@pytest.mark.parametrize("api_key, change, message", [
    (0, {"remoteLogSegmentState": 4}, "state can not be null"),
    (0, {"startOffset": -1, "remoteLogSegmentState": 4}, "Unexpected start offset = -1. StartOffset for a "
                                                         "remote segment cannot be negative"),
    (0, {"startOffset": 5, "endOffset": 4}, "Unexpected end offset = 4. EndOffset for a remote segment cannot be "
                                            "less than startOffset = 5"),
    (0, {"segmentLeaderEpochs": []}, "segmentLeaderEpochs can not be null or empty"),
    (1, {"remoteLogSegmentState": -1}, "state can not be null"),
    (2, {"remotePartitionDeleteState": 3}, "null"),
    (3, {"segmentLeaderEpochs": []}, "segmentLeaderEpochs can not be null or empty"),
])
def test_objects_kafka_cannot_build(api_key, change, message):
    decoded = rl.decode(None, framed(api_key, {**EXAMPLES[api_key], **change}), offset=8)
    assert decoded.value_text == f"Error at offset 8, skipping. {message}"
    assert decoded.value["data"]  # what was read is kept
    assert message in decoded.warning


def test_a_newer_version_is_kept_read_and_refused_as_kafka_refuses_it():
    decoded = rl.decode(None, framed(2, EXAMPLES[2], version=1), offset=1)
    assert decoded.value["read_as_version"] == 0 and decoded.value["data"]["brokerId"] == 2
    assert decoded.value_text == "Error at offset 1, skipping. Failed to deserialize record with type 2"
    assert "Can't read version 1 of TopicIdPartitionEntry" in decoded.warning
    no_struct_read = rl.decode(None, framed(3, {**EXAMPLES[3], "segmentLeaderEpochs": []}, version=1))
    assert no_struct_read.value_text.endswith("segmentLeaderEpochs can not be null or empty")


@pytest.mark.parametrize("value, text", [
    (None, 'Error, skipping. Cannot invoke "java.nio.ByteBuffer.remaining()" because the return value of '
           '"org.apache.kafka.common.record.Record.value()" is null'),
    (b"", "Error, skipping. Error while reading frame version"),
    (b"\x01\x04\x00", "Error, skipping. org.apache.kafka.common.errors.UnsupportedVersionException: Unknown "
                      "metadata id 4"),
    (framed(2, EXAMPLES[2]) + b"\x00", "Error, skipping. Found 1 byte(s) of garbage after 2"),
    (framed(2, EXAMPLES[2])[:-3], "Error, skipping. Failed to deserialize record with type 2"),
])
def test_values_the_serde_cannot_read(value, text):
    decoded = rl.decode(None, value)
    assert decoded.value_text == text
    assert decoded.warning
    json.dumps(decoded.value)


def test_a_key_is_kept_and_reported():
    decoded = rl.decode(b"k", framed(2, EXAMPLES[2]))
    assert decoded.key == {"raw": "aw=="} and decoded.value_text == TEXTS[2]
    assert "no key" in decoded.warning

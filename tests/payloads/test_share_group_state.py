"""The `__share_group_state` decoder: schema round-trips, Kafka 4.0's dump text and its quirks, bad
input, and newer versions."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog_tools.payloads import PayloadError, decoder_for_topic
from kafkalog_tools.payloads import share_group_state as sgs
from kafkalog_tools.payloads.consumer_offsets import parse_struct
from kafkalog_tools.protocol import uuid_to_text
from tests.strategies import INT8, INT16, INT32, INT64

TOPIC_ID = uuid_to_text(bytes(range(16)))


def framed(version: int, schema, obj) -> bytes:
    return version.to_bytes(2, "big", signed=True) + schema.build(obj)


KEY = {"groupId": "sg-1", "topicId": TOPIC_ID, "partition": 3}
BATCHES = [{"firstOffset": 0, "lastOffset": 9, "deliveryState": 2, "deliveryCount": 1, "_tagged": {}},
           {"firstOffset": 10, "lastOffset": 14, "deliveryState": 4, "deliveryCount": 3, "_tagged": {}}]
SNAPSHOT = {"snapshotEpoch": 65535, "stateEpoch": 1, "leaderEpoch": 0, "startOffset": 0, "stateBatches": BATCHES,
            "_tagged": {}}
UPDATE = {"snapshotEpoch": 1, "leaderEpoch": 5, "startOffset": 500, "stateBatches": BATCHES, "_tagged": {}}
EXAMPLES = {"ShareSnapshotKey": KEY, "ShareUpdateKey": KEY, "ShareSnapshotValue": SNAPSHOT, "ShareUpdateValue": UPDATE}
SCHEMAS = {
    **{f"{kind.key_class} (type {t})": kind.key for t, kind in sgs.RECORD_TYPES.items()},
    **{f"{kind.value_class} v{v}": schema for kind in sgs.RECORD_TYPES.values() for v, schema in kind.values.items()},
}


def test_the_decoder_is_picked_by_topic():
    assert decoder_for_topic("__share_group_state").name == "share-group-state"


@pytest.mark.parametrize("name", SCHEMAS)
def test_round_trip_example(name):
    schema = SCHEMAS[name]
    data = schema.build(EXAMPLES[name.split(" ")[0]])
    parsed, trailing = parse_struct(schema, data)
    assert trailing == b""
    assert schema.build(parsed) == data


state_batches = st.lists(st.fixed_dictionaries({
    "firstOffset": INT64, "lastOffset": INT64, "deliveryState": INT8, "deliveryCount": INT16,
    "_tagged": st.just({})}), max_size=4)


@given(st.fixed_dictionaries({"snapshotEpoch": st.integers(0, 65535), "stateEpoch": INT32, "leaderEpoch": INT32,
                              "startOffset": INT64, "stateBatches": state_batches, "_tagged": st.just({})}))
def test_snapshot_value_round_trips_over_java_ranges(value):
    data = sgs.ShareSnapshotValue.build(value)
    assert sgs.ShareSnapshotValue.build(sgs.ShareSnapshotValue.parse(data)) == data
    assert sgs.ShareSnapshotValue.compile().build(value) == data


def test_snapshot_text_as_kafka_4_prints_it():
    decoded = sgs.decode(framed(0, sgs.SharePartitionKey, KEY), framed(0, sgs.ShareSnapshotValue, SNAPSHOT))
    assert decoded.warning is None
    assert decoded.key_text == '{"type":"0","data":{"groupId":"sg-1","topicId":"AAECAwQFBgcICQoLDA0ODw","partition":3}}'
    assert decoded.value_text == (
        '{"type":"0","data":{"snapshotEpoch":65535,"stateEpoch":1,"leaderEpoch":0,"startOffset":0,"stateBatches":['
        '{"firstOffset":0,"lastOffset":9,"deliveryState":2,"deliveryCount":1},'
        '{"firstOffset":10,"lastOffset":14,"deliveryState":4,"deliveryCount":3}]}}')
    assert decoded.key == {"type": "share_snapshot", "version": 0, "data": KEY}
    json.dumps(decoded.value)


def test_share_update_value_version_1_is_the_v0_layout_printed_under_type():
    decoded = sgs.decode(framed(1, sgs.SharePartitionKey, KEY), framed(1, sgs.ShareUpdateValue, UPDATE))
    assert decoded.warning is None  # what Kafka 4.0 writes: not an unknown version
    assert decoded.value_text.startswith('{"type":"1","data":{"snapshotEpoch":1,"leaderEpoch":5,"startOffset":500,')
    assert decoded.value["version"] == 1 and "read_as_version" not in decoded.value


def test_tombstone():
    decoded = sgs.decode(framed(0, sgs.SharePartitionKey, KEY), None)
    assert decoded.value is None and decoded.value_text == "<DELETE>"


def test_newer_value_version_is_read_with_the_newest_layout_and_flagged():
    decoded = sgs.decode(framed(0, sgs.SharePartitionKey, KEY), framed(3, sgs.ShareSnapshotValue, SNAPSHOT))
    assert decoded.value["read_as_version"] == 0
    assert decoded.value["data"]["stateEpoch"] == 1
    assert "ShareSnapshotValue version 3 is unknown (newest known: 0)" in decoded.warning
    assert decoded.value_text.startswith('{"type":"3","data":{"snapshotEpoch":65535,')


def test_unknown_record_type_and_bad_keys():
    decoded = sgs.decode(b"\x00\x02\x00\x01g", b"\x00\x00", offset=4)
    assert decoded.key_text == "Unknown record type 2 at offset 4, skipping."
    assert decoded.value_text is None and "record type 2 is unknown" in decoded.warning
    with pytest.raises(PayloadError, match="__share_group_state record has no key"):
        sgs.decode(None, b"\x00\x00")
    with pytest.raises(PayloadError, match="ShareSnapshotKey"):
        sgs.decode(framed(0, sgs.SharePartitionKey, KEY)[:-1], None)


def test_truncated_values_never_raise():
    value = framed(0, sgs.ShareSnapshotValue, SNAPSHOT)
    for cut in range(len(value)):
        decoded = sgs.decode(framed(0, sgs.SharePartitionKey, KEY), value[:cut], offset=1)
        assert decoded.value_text is None
        assert decoded.key_text.startswith("Error at offset 1, skipping.")

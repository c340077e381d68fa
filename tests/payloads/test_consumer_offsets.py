"""The `__consumer_offsets` decoder: schema round-trips, Kafka 3.8's dump text, bad input, and
every record of the real brokers' `__consumer_offsets` segments."""
from __future__ import annotations

import base64
import json

import pytest
from construct import FocusedSeq, FormatField, Renamed, Struct
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog_tools.formats.segment import SegmentFile
from kafkalog_tools.payloads import PayloadError, decoder_for_topic
from kafkalog_tools.payloads import consumer_offsets as co
from kafkalog_tools.protocol import KafkaArray, SizePrefixed, TaggedFields, Uuid, uuid_to_text

TOPIC_ID = uuid_to_text(bytes(range(16)))  # "AAECAwQFBgcICQoLDA0ODw"


def framed(version: int, schema, obj) -> bytes:
    """Kafka's coordinator record framing: int16 version, then the struct."""
    return version.to_bytes(2, "big", signed=True) + schema.build(obj)


# ---------------------------------------------------------------------------------------------
# Every schema, by name
# ---------------------------------------------------------------------------------------------

SCHEMAS = {
    **{f"{kind.key_class} (type {t})": kind.key for t, kind in co.RECORD_TYPES.items()},
    **{f"{kind.value_class} v{v}": schema
       for kind in co.RECORD_TYPES.values() for v, schema in kind.values.items()},
    **{f"MemberMetadata v{v}": s for v, s in co.MEMBER_METADATA.items()},
    **{f"ConsumerProtocolSubscription v{v}": s
       for v, s in co.CONSUMER_PROTOCOL_SUBSCRIPTION.items()},
    **{f"ConsumerProtocolAssignment v{v}": s for v, s in co.CONSUMER_PROTOCOL_ASSIGNMENT.items()},
}


def test_every_version_kafka_defines_has_a_schema():
    assert {v for v in co.OFFSET_COMMIT_VALUE} == set(range(5))
    assert {v for v in co.GROUP_METADATA_VALUE} == set(range(5))
    assert set(co.CONSUMER_PROTOCOL_SUBSCRIPTION) == set(range(4))
    assert set(co.RECORD_TYPES) == set(range(17))


# ---------------------------------------------------------------------------------------------
# Round trips on hand-made objects: one superset object per family (a Struct takes the fields of
# its version and ignores the rest)
# ---------------------------------------------------------------------------------------------

SUBSCRIPTION = {
    "topics": ["orders", "payments"], "userData": b"\x00\x01",
    "ownedPartitions": [{"topic": "orders", "partitions": [0, 2]}],
    "generationId": 7, "rackId": "rack-a",
}
ASSIGNMENT = {"assignedPartitions": [{"topic": "orders", "partitions": [1]}], "userData": None}
MEMBER = {
    "memberId": "m-1", "groupInstanceId": "static-1", "clientId": "client",
    "clientHost": "/10.0.0.1",
    "rebalanceTimeout": 300000, "sessionTimeout": 45000, "subscription": b"\x00\x00sub",
    "assignment": b"", "_tagged": {},
}
TOPIC_PARTITIONS = {"topicId": TOPIC_ID, "partitions": [0, 1], "_tagged": {}}
CLASSIC_MEMBER = {
    "sessionTimeoutMs": 45000,
    "supportedProtocols": [{"name": "range", "metadata": b"\x00\x03", "_tagged": {}}],
    "_tagged": {},
}
EXAMPLES = {
    "OffsetCommitKey": {"group": "g", "topic": "orders", "partition": 3},
    "OffsetCommitValue": {"offset": 42, "leaderEpoch": 5, "metadata": "meta",
                          "commitTimestamp": 1700000000000, "expireTimestamp": 1700000600000,
                          "_tagged": {}},
    "GroupMetadataKey": {"group": "g"},
    "GroupMetadataValue": {"protocolType": "consumer", "generation": 3, "protocol": "range",
                           "leader": "m-1", "currentStateTimestamp": 1700000000000,
                           "members": [MEMBER, {**MEMBER, "groupInstanceId": None}],
                           "_tagged": {}},
    "MemberMetadata": MEMBER,
    "ConsumerProtocolSubscription": SUBSCRIPTION,
    "ConsumerProtocolAssignment": ASSIGNMENT,
    "ConsumerGroupMetadataKey": {"groupId": "g"},
    "ConsumerGroupPartitionMetadataKey": {"groupId": "g"},
    "ConsumerGroupTargetAssignmentMetadataKey": {"groupId": "g"},
    "ConsumerGroupMemberMetadataKey": {"groupId": "g", "memberId": "m-1"},
    "ConsumerGroupTargetAssignmentMemberKey": {"groupId": "g", "memberId": "m-1"},
    "ConsumerGroupCurrentMemberAssignmentKey": {"groupId": "g", "memberId": "m-1"},
    "ConsumerGroupMetadataValue": {"epoch": 12, "_tagged": {}},
    "ConsumerGroupRegularExpressionKey": {"groupId": "g", "regularExpression": "orders-.*"},
    "ConsumerGroupRegularExpressionValue": {"topics": ["orders-eu", "orders-us"], "version": 17,
                                            "timestamp": 1700000265000, "_tagged": {}},
    "ShareGroupPartitionMetadataKey": {"groupId": "g"},
    "ShareGroupMetadataKey": {"groupId": "g"},
    "ShareGroupTargetAssignmentMetadataKey": {"groupId": "g"},
    "ShareGroupStatePartitionMetadataKey": {"groupId": "g"},
    "ShareGroupMemberMetadataKey": {"groupId": "g", "memberId": "m-1"},
    "ShareGroupTargetAssignmentMemberKey": {"groupId": "g", "memberId": "m-1"},
    "ShareGroupCurrentMemberAssignmentKey": {"groupId": "g", "memberId": "m-1"},
    "ShareGroupMetadataValue": {"epoch": 2, "_tagged": {}},
    "ShareGroupMemberMetadataValue": {"rackId": None, "clientId": "share-client", "clientHost": "/10.2.0.1",
                                      "subscribedTopicNames": ["orders"], "_tagged": {}},
    "ShareGroupTargetAssignmentMetadataValue": {"assignmentEpoch": 2, "_tagged": {}},
    "ShareGroupTargetAssignmentMemberValue": {"topicPartitions": [TOPIC_PARTITIONS], "_tagged": {}},
    "ShareGroupCurrentMemberAssignmentValue": {"memberEpoch": 2, "previousMemberEpoch": 1, "state": 0,
                                               "assignedPartitions": [TOPIC_PARTITIONS], "_tagged": {}},
    "ShareGroupStatePartitionMetadataValue": {
        "initializedTopics": [{"topicId": TOPIC_ID, "topicName": "orders", "partitions": [0, 1, 2],
                               "_tagged": {}}],
        "deletingTopics": [{"topicId": TOPIC_ID, "topicName": "gone", "_tagged": {}}],
        "_tagged": {},
    },
    "ShareGroupPartitionMetadataValue": {"topics": [{
        "topicId": TOPIC_ID, "topicName": "orders", "numPartitions": 3, "_tagged": {},
        "partitionMetadata": [],
    }], "_tagged": {}},
    "ConsumerGroupPartitionMetadataValue": {"topics": [{
        "topicId": TOPIC_ID, "topicName": "orders", "numPartitions": 2, "_tagged": {},
        "partitionMetadata": [{"partition": 0, "racks": ["a", "b"], "_tagged": {}}],
    }], "_tagged": {}},
    "ConsumerGroupMemberMetadataValue": {
        "instanceId": None, "rackId": "rack-a", "clientId": "client", "clientHost": "/10.0.0.1",
        "subscribedTopicNames": ["orders"], "subscribedTopicRegex": None,
        "rebalanceTimeoutMs": 300000, "serverAssignor": "uniform",
        "_tagged": {"classicMemberMetadata": CLASSIC_MEMBER},
    },
    "ConsumerGroupTargetAssignmentMetadataValue": {"assignmentEpoch": 4, "_tagged": {}},
    "ConsumerGroupTargetAssignmentMemberValue": {"topicPartitions": [TOPIC_PARTITIONS],
                                                 "_tagged": {}},
    "ConsumerGroupCurrentMemberAssignmentValue": {
        "memberEpoch": 4, "previousMemberEpoch": 3, "state": 0,
        "assignedPartitions": [TOPIC_PARTITIONS], "partitionsPendingRevocation": [],
        "_tagged": {},
    },
}


def example_for(schema_name: str) -> dict:
    return EXAMPLES[schema_name.split(" ")[0]]


@pytest.mark.parametrize("name", SCHEMAS)
def test_round_trip_example(name):
    schema = SCHEMAS[name]
    data = schema.build(example_for(name))
    parsed, trailing = co.parse_struct(schema, data)
    assert trailing == b""
    assert schema.build(parsed) == data


def test_versions_add_fields_where_kafka_adds_them():
    sizes = {v: len(schema.build(EXAMPLES["OffsetCommitValue"]))
             for v, schema in co.OFFSET_COMMIT_VALUE.items()}
    # v0: offset 8 + metadata 2+4 + commitTimestamp 8; v1 adds expireTimestamp (8), v2 drops it
    # again, v3 adds leaderEpoch (4), v4 goes compact (a 1-byte string length instead of 2) and
    # appends an empty tagged-field count (1)
    assert sizes == {0: 22, 1: 30, 2: 22, 3: 26, 4: 26}
    subscription_sizes = [len(schema.build(SUBSCRIPTION))
                          for schema in co.CONSUMER_PROTOCOL_SUBSCRIPTION.values()]
    # v0: topics 4+8+10, userData 4+2; v1 adds ownedPartitions 4+8+12, v2 generationId 4,
    # v3 rackId 2+6
    assert subscription_sizes == [28, 52, 56, 64]


def test_tagged_nullable_struct_encoding():
    schema = co.TaggedNullableStruct(co.ClassicMemberMetadata)
    assert schema.build(None) == b"\x00"
    assert schema.parse(b"\x00") is None
    assert schema.build(CLASSIC_MEMBER)[:1] == b"\x01"


# ---------------------------------------------------------------------------------------------
# Property round trips: values drawn from the schemas themselves
# ---------------------------------------------------------------------------------------------

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)


def values_for(con):
    """A hypothesis strategy for objects `con` can build."""
    if isinstance(con, Renamed):
        return values_for(con.subcon)
    if isinstance(con, Struct):
        return st.fixed_dictionaries({sub.name: values_for(sub) for sub in con.subcons})
    if con is Uuid:
        return st.binary(min_size=16, max_size=16).map(uuid_to_text)
    if isinstance(con, FormatField):
        bits = 8 * con.length
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if isinstance(con, SizePrefixed):
        base = _TEXT if con.text else st.binary(max_size=6)
        return st.none() | base if con.nullable else base
    if isinstance(con, KafkaArray):
        base = st.lists(values_for(con.subcon), max_size=2)
        return st.none() | base if con.nullable else base
    if isinstance(con, TaggedFields):
        known = {name: values_for(sub) for name, sub in con.known.values()}
        unknown = st.lists(st.fixed_dictionaries({"tag": st.integers(100, 10_000),
                                                  "data": st.binary(max_size=4)}),
                           max_size=2, unique_by=lambda field: field["tag"])
        return st.fixed_dictionaries({}, optional={**known, "_unknown": unknown})
    if isinstance(con, FocusedSeq):  # TaggedNullableStruct: (presence varint, If(struct))
        return st.none() | values_for(con.subcons[1].subcon.thensubcon)
    raise TypeError(f"no strategy for {con!r}")


@pytest.mark.parametrize("name", SCHEMAS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip_property(name, data):
    schema = SCHEMAS[name]
    encoded = schema.build(data.draw(values_for(schema)))
    parsed, trailing = co.parse_struct(schema, encoded)
    assert trailing == b""
    assert schema.build(parsed) == encoded


# ---------------------------------------------------------------------------------------------
# decode(): the JSON-ready shape and Kafka 3.8.0's text
# ---------------------------------------------------------------------------------------------


def test_registered_for_the_topic():
    decoder = decoder_for_topic("__consumer_offsets")
    assert decoder is not None and decoder.name == "consumer-offsets"
    assert decoder.decode is co.decode


def test_offset_commit_v1_key_v3_value():
    key = framed(1, co.OffsetCommitKey, EXAMPLES["OffsetCommitKey"])
    value = framed(3, co.OFFSET_COMMIT_VALUE[3], EXAMPLES["OffsetCommitValue"])
    decoded = co.decode(key, value)
    assert decoded.key == {"type": "offset_commit", "version": 1,
                           "data": {"group": "g", "topic": "orders", "partition": 3}}
    assert decoded.value == {"version": 3, "data": {
        "offset": 42, "leaderEpoch": 5, "metadata": "meta", "commitTimestamp": 1700000000000}}
    assert decoded.key_text == '{"type":"1","data":{"group":"g","topic":"orders","partition":3}}'
    assert decoded.value_text == ('{"version":"3","data":{"offset":42,"leaderEpoch":5,'
                                  '"metadata":"meta","commitTimestamp":1700000000000}}')
    assert decoded.warning is None


@pytest.mark.parametrize("version, text", [
    (0, '{"offset":42,"metadata":"meta","commitTimestamp":1700000000000}'),
    (1, '{"offset":42,"metadata":"meta","commitTimestamp":1700000000000,'
        '"expireTimestamp":1700000600000}'),
    (2, '{"offset":42,"metadata":"meta","commitTimestamp":1700000000000}'),
    (4, '{"offset":42,"leaderEpoch":5,"metadata":"meta","commitTimestamp":1700000000000}'),
])
def test_offset_commit_value_fields_by_version(version, text):
    key = framed(0, co.OffsetCommitKey, EXAMPLES["OffsetCommitKey"])
    value = framed(version, co.OFFSET_COMMIT_VALUE[version], EXAMPLES["OffsetCommitValue"])
    decoded = co.decode(key, value)
    assert decoded.key_text.startswith('{"type":"0",')
    assert decoded.value_text == f'{{"version":"{version}","data":{text}}}'
    assert decoded.warning is None


def test_tombstone():
    decoded = co.decode(framed(2, co.GroupMetadataKey, {"group": "g"}), None)
    assert decoded.value is None
    assert decoded.value_text == "<DELETE>"
    assert decoded.key_text == '{"type":"2","data":{"group":"g"}}'


def consumer_group_value(version: int, subscription_version: int = 3, **changes) -> bytes:
    """A one-member consumer group; a subscription version above 3 gets the v3 layout."""
    subscription_layout = co.CONSUMER_PROTOCOL_SUBSCRIPTION[min(subscription_version, 3)]
    member = {**MEMBER,
              "subscription": framed(subscription_version, subscription_layout, SUBSCRIPTION),
              "assignment": framed(1, co.ConsumerProtocolAssignment, ASSIGNMENT), **changes}
    group = {**EXAMPLES["GroupMetadataValue"], "members": [member]}
    return framed(version, co.GROUP_METADATA_VALUE[version], group)


def test_group_metadata_v4_expands_consumer_protocol():
    decoded = co.decode(framed(2, co.GroupMetadataKey, {"group": "g"}), consumer_group_value(4))
    member = decoded.value["data"]["members"][0]
    assert member["subscription"] == {"version": 3, "data": {
        "topics": ["orders", "payments"], "userData": "AAE=",
        "ownedPartitions": [{"topic": "orders", "partitions": [0, 2]}],
        "generationId": 7, "rackId": "rack-a"}}
    assert member["assignment"] == {"version": 1, "data": {
        "assignedPartitions": [{"topic": "orders", "partitions": [1]}], "userData": None}}
    assert decoded.value_text == (
        '{"version":"4","data":{"protocolType":"consumer","generation":3,"protocol":"range",'
        '"leader":"m-1","currentStateTimestamp":1700000000000,"members":[{"memberId":"m-1",'
        '"groupInstanceId":"static-1","clientId":"client","clientHost":"/10.0.0.1",'
        '"rebalanceTimeout":300000,"sessionTimeout":45000,"subscription":{"topics":["orders",'
        '"payments"],"userData":"AAE=","ownedPartitions":[{"topic":"orders","partitions":[0,2]}],'
        '"generationId":7,"rackId":"rack-a"},"assignment":{"assignedPartitions":[{"topic":'
        '"orders","partitions":[1]}],"userData":null}}]}}')
    assert decoded.warning is None


def test_group_metadata_v0_and_a_future_subscription_version():
    # Kafka reads a subscription newer than v3 with the v3 layout (new versions only append)
    decoded = co.decode(framed(2, co.GroupMetadataKey, {"group": "g"}),
                        consumer_group_value(0, subscription_version=5))
    member = decoded.value["data"]["members"][0]
    assert set(member) == {"memberId", "clientId", "clientHost", "sessionTimeout",
                           "subscription", "assignment"}
    assert member["subscription"]["version"] == 5
    assert member["subscription"]["data"]["rackId"] == "rack-a"
    assert '"currentStateTimestamp"' not in decoded.value_text
    assert decoded.warning is None


def test_member_bytes_of_other_protocols_stay_base64():
    group = {**EXAMPLES["GroupMetadataValue"], "protocolType": "connect"}
    decoded = co.decode(framed(2, co.GroupMetadataKey, {"group": "g"}),
                        framed(3, co.GROUP_METADATA_VALUE[3], group))
    member = decoded.value["data"]["members"][0]
    assert member["subscription"] == base64.b64encode(MEMBER["subscription"]).decode()
    assert member["assignment"] == ""
    assert '"subscription":"AABzdWI=","assignment":""' in decoded.value_text
    assert decoded.warning is None


def test_unparseable_member_bytes_stay_base64_with_a_warning():
    decoded = co.decode(framed(2, co.GroupMetadataKey, {"group": "g"}),
                        consumer_group_value(3, subscription=b"\x00\x01\x00\x00\x00\x05ab",
                                             assignment=b""))
    member = decoded.value["data"]["members"][0]
    assert member["subscription"] == "AAEAAAAFYWI="
    assert member["assignment"] == ""  # empty mid-rebalance: normal, no warning for it
    assert '"subscription":"AAEAAAAFYWI=","assignment":""' in decoded.value_text
    assert decoded.warning.startswith("subscription of member 'm-1' does not parse")


KIP_848_TEXTS = {
    3: ('{"groupId":"g"}', '{"epoch":12}'),
    4: ('{"groupId":"g"}',
        '{"topics":[{"topicId":"AAECAwQFBgcICQoLDA0ODw","topicName":"orders","numPartitions":2,'
        '"partitionMetadata":[{"partition":0,"racks":["a","b"]}]}]}'),
    5: ('{"groupId":"g","memberId":"m-1"}',
        '{"instanceId":null,"rackId":"rack-a","clientId":"client","clientHost":"/10.0.0.1",'
        '"subscribedTopicNames":["orders"],"subscribedTopicRegex":null,'
        '"rebalanceTimeoutMs":300000,"serverAssignor":"uniform","classicMemberMetadata":'
        '{"sessionTimeoutMs":45000,"supportedProtocols":[{"name":"range","metadata":"AAM="}]}}'),
    6: ('{"groupId":"g"}', '{"assignmentEpoch":4}'),
    7: ('{"groupId":"g","memberId":"m-1"}',
        '{"topicPartitions":[{"topicId":"AAECAwQFBgcICQoLDA0ODw","partitions":[0,1]}]}'),
    8: ('{"groupId":"g","memberId":"m-1"}',
        '{"memberEpoch":4,"previousMemberEpoch":3,"state":0,"assignedPartitions":[{"topicId":'
        '"AAECAwQFBgcICQoLDA0ODw","partitions":[0,1]}],"partitionsPendingRevocation":[]}'),
}


@pytest.mark.parametrize("record_type", KIP_848_TEXTS)
def test_kip_848_records(record_type):
    kind = co.RECORD_TYPES[record_type]
    key = framed(record_type, kind.key, EXAMPLES[kind.key_class])
    value = framed(0, kind.values[0], EXAMPLES[kind.value_class])
    decoded = co.decode(key, value)
    key_text, value_text = KIP_848_TEXTS[record_type]
    assert decoded.key_text == f'{{"type":"{record_type}","data":{key_text}}}'
    assert decoded.value_text == f'{{"version":"0","data":{value_text}}}'
    assert decoded.key["type"] == kind.name
    assert decoded.value["data"] == json.loads(value_text)
    assert decoded.warning is None


def test_null_classic_member_metadata_is_printed_as_kafka_4_prints_it():
    kind = co.RECORD_TYPES[5]
    member = {**EXAMPLES["ConsumerGroupMemberMetadataValue"],
              "_tagged": {"classicMemberMetadata": None}}
    decoded = co.decode(framed(5, kind.key, EXAMPLES[kind.key_class]),
                        framed(0, kind.values[0], member))
    assert decoded.value["data"]["classicMemberMetadata"] is None
    assert decoded.value_text.endswith(',"serverAssignor":"uniform","classicMemberMetadata":null}}')


def test_strings_are_escaped_as_jackson_does():
    value = {**EXAMPLES["OffsetCommitValue"], "metadata": 'a"\\\n\x01\x1f\x7fé😀'}
    decoded = co.decode(framed(1, co.OffsetCommitKey, EXAMPLES["OffsetCommitKey"]),
                        framed(3, co.OFFSET_COMMIT_VALUE[3], value))
    assert '"metadata":"a\\"\\\\\\n\\u0001\\u001F\x7fé😀"' in decoded.value_text


# ---------------------------------------------------------------------------------------------
# Bad input: keys that cannot be read raise PayloadError; nothing past the key raises
# ---------------------------------------------------------------------------------------------

OFFSET_COMMIT_KEY = framed(1, co.OffsetCommitKey, EXAMPLES["OffsetCommitKey"])
OFFSET_COMMIT_VALUE_V3 = framed(3, co.OFFSET_COMMIT_VALUE[3], EXAMPLES["OffsetCommitValue"])


@pytest.mark.parametrize("key, expected", [
    (None, "has no key"),
    (b"", "0 byte(s); expected at least 2"),
    (b"\x00", "1 byte(s); expected at least 2"),
    (OFFSET_COMMIT_KEY[:-1], "OffsetCommitKey (record type 1) does not parse: stream read less "
                             "than specified amount, expected 4, found 3 (in partition)"),
])
def test_unreadable_key_raises_payload_error(key, expected):
    with pytest.raises(PayloadError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        co.decode(key, OFFSET_COMMIT_VALUE_V3)


@pytest.mark.parametrize("record_type, name", [(17, "unknown"), (99, "unknown")])
def test_unknown_record_types_are_kept_raw(record_type, name):
    key = record_type.to_bytes(2, "big") + b"\x00\x01g"
    decoded = co.decode(key, b"\x00\x00\x01", offset=7)
    assert decoded.key == {"type": name, "version": record_type, "raw": "AAFn"}
    assert decoded.value == {"version": 0, "raw": "AQ=="}
    assert decoded.key_text == f"Unknown record type {record_type} at offset 7, skipping."
    assert decoded.value_text is None
    assert f"record type {record_type}" in decoded.warning


def test_value_too_short_for_its_version():
    decoded = co.decode(OFFSET_COMMIT_KEY, b"\x00", offset=9)
    assert decoded.value == {"version": None, "raw": "AA=="}
    assert decoded.key_text == ("Error at offset 9, skipping. Could not read version from "
                                "value's buffer.")
    assert decoded.value_text is None
    assert "expected at least 2" in decoded.warning


def test_truncated_values_never_raise():
    for cut in range(2, len(OFFSET_COMMIT_VALUE_V3)):
        decoded = co.decode(OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE_V3[:cut], offset=1)
        assert decoded.value == {"version": 3,
                                 "raw": base64.b64encode(OFFSET_COMMIT_VALUE_V3[2:cut]).decode()}
        assert decoded.value_text is None
        assert decoded.key_text.startswith("Error at offset 1, skipping. Could not read record "
                                           "with version 3 from value's buffer due to: ")
        assert "OffsetCommitValue v3 does not parse" in decoded.warning


def test_unknown_value_version_is_read_with_the_newest_layout_and_flagged():
    value = framed(7, co.OFFSET_COMMIT_VALUE[4], EXAMPLES["OffsetCommitValue"])
    decoded = co.decode(OFFSET_COMMIT_KEY, value)
    assert decoded.value == {"version": 7, "read_as_version": 4, "data": {
        "offset": 42, "leaderEpoch": 5, "metadata": "meta", "commitTimestamp": 1700000000000}}
    assert decoded.value_text == ('{"version":"7","data":{"offset":42,"leaderEpoch":5,'
                                  '"metadata":"meta","commitTimestamp":1700000000000}}')
    assert "OffsetCommitValue version 7 is unknown" in decoded.warning


def test_trailing_bytes_are_kept_and_reported():
    decoded = co.decode(OFFSET_COMMIT_KEY + b"\xff", OFFSET_COMMIT_VALUE_V3 + b"\x01\x02")
    assert decoded.key["trailing"] == "/w=="
    assert decoded.value["trailing"] == "AQI="
    assert decoded.value_text == co.decode(OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE_V3).value_text
    assert "1 byte(s) after the OffsetCommitKey" in decoded.warning
    assert "2 byte(s) after the OffsetCommitValue" in decoded.warning


def test_unknown_tagged_fields_are_kept_and_reported():
    value = {**EXAMPLES["OffsetCommitValue"], "_tagged": {"_unknown": [{"tag": 3, "data": b"x"}]}}
    decoded = co.decode(OFFSET_COMMIT_KEY, framed(4, co.OFFSET_COMMIT_VALUE[4], value))
    assert decoded.value["data"]["_unknownTaggedFields"] == [{"tag": 3, "data": "eA=="}]
    assert "_unknownTaggedFields" not in decoded.value_text
    assert "unknown tagged field(s) 3" in decoded.warning


@settings(max_examples=300, deadline=None)
@given(key=st.binary(max_size=40), value=st.none() | st.binary(max_size=60))
def test_garbage_raises_nothing_but_payload_error(key, value):
    try:
        decoded = co.decode(key, value)
    except PayloadError:
        return
    assert decoded.key_text is not None


@settings(max_examples=300, deadline=None)
@given(record_type=st.integers(0, 8), value=st.binary(max_size=80))
def test_garbage_values_behind_a_good_key_never_raise(record_type, value):
    kind = co.RECORD_TYPES[record_type]
    key = framed(record_type, kind.key, EXAMPLES[kind.key_class])
    decoded = co.decode(key, value)
    assert decoded.key is not None
    if decoded.value_text is not None:
        json.loads(decoded.value_text)


# ---------------------------------------------------------------------------------------------
# Real brokers' __consumer_offsets segments
# ---------------------------------------------------------------------------------------------


def real_records(real):
    for log in sorted(real.glob("*/__consumer_offsets-*/*.log")):
        with SegmentFile(log) as segment:
            for batch in segment.batches():
                if batch.is_control:
                    continue
                for record in batch.records():
                    yield log, record


def test_every_real_record_decodes_without_warning(real):
    count = 0
    for log, record in real_records(real):
        decoded = co.decode(record.key, record.value, offset=record.offset)
        where = f"{log} offset {record.offset}"
        assert decoded.warning is None, where
        json.loads(decoded.key_text)
        if record.value is None:
            assert decoded.value_text == "<DELETE>", where
        else:
            assert json.loads(decoded.value_text)["version"] == str(decoded.value["version"])
        count += 1
    assert count == 1044


def test_a_real_group_metadata_record_prints_as_kafka_3_8(real):
    log = real / "zk-broker-b" / "__consumer_offsets-2" / "00000000000000000000.log"
    with SegmentFile(log) as segment:
        first = next(segment.batches()).records()[0]
    decoded = co.decode(first.key, first.value)
    assert decoded.key_text == '{"type":"2","data":{"group":"console-consumer-23934"}}'
    assert decoded.value_text == (
        '{"version":"1","data":{"protocolType":"consumer","generation":1,"protocol":"range",'
        '"leader":"consumer-1-c425dbc7-dfb2-4127-a8e2-66c6dd8c01cd","members":[{"memberId":'
        '"consumer-1-c425dbc7-dfb2-4127-a8e2-66c6dd8c01cd","clientId":"consumer-1",'
        '"clientHost":"/192.168.190.131","rebalanceTimeout":300000,"sessionTimeout":10000,'
        '"subscription":{"topics":["TestTopic"],"userData":""},"assignment":'
        '{"assignedPartitions":[{"topic":"TestTopic","partitions":[0]}],"userData":""}}]}}')

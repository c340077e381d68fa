"""KRaft metadata records: every record type and version round-trips, decodes, and prints as
Kafka 3.8.0's `kafka-dump-log.sh --cluster-metadata-decoder` prints it."""
from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog_tools.payloads import decoder_for_topic
from kafkalog_tools.payloads.cluster_metadata import FRAME_HEADER, decode, read_metadata_record
from kafkalog_tools.payloads.jackson import jackson_json, java_double_text
from kafkalog_tools.payloads.metadata_records import METADATA_RECORDS, TAGGED, Field
from kafkalog_tools.protocol import uuid_to_text

TOPIC_ID = uuid_to_text(bytes(range(16)))

# metadata/src/main/resources/common/metadata/*.json at Kafka 3.8.0 (the same in 3.9.0 and on
# trunk as of 2024-10-25): apiKey -> (record name, newest version)
KAFKA_METADATA_RECORDS = {
    0: ("RegisterBrokerRecord", 3), 1: ("UnregisterBrokerRecord", 0), 2: ("TopicRecord", 0),
    3: ("PartitionRecord", 2), 4: ("ConfigRecord", 0), 5: ("PartitionChangeRecord", 2),
    7: ("FenceBrokerRecord", 0), 8: ("UnfenceBrokerRecord", 0), 9: ("RemoveTopicRecord", 0),
    10: ("DelegationTokenRecord", 0), 11: ("UserScramCredentialRecord", 0),
    12: ("FeatureLevelRecord", 0), 14: ("ClientQuotaRecord", 0), 15: ("ProducerIdsRecord", 0),
    17: ("BrokerRegistrationChangeRecord", 2), 18: ("AccessControlEntryRecord", 0),
    19: ("RemoveAccessControlEntryRecord", 0), 20: ("NoOpRecord", 0),
    21: ("ZkMigrationStateRecord", 0), 22: ("RemoveUserScramCredentialRecord", 0),
    23: ("BeginTransactionRecord", 0), 24: ("EndTransactionRecord", 0),
    25: ("AbortTransactionRecord", 0), 26: ("RemoveDelegationTokenRecord", 0),
    27: ("RegisterControllerRecord", 0),
}

ALL_VERSIONS = [
    pytest.param(api_key, version, id=f"{schema.name}-v{version}")
    for api_key, schema in METADATA_RECORDS.items()
    for version in schema.layouts
]


# ---------------------------------------------------------------------------------------------
# Sample records built from the declarations: every field set, tagged fields off their default
# ---------------------------------------------------------------------------------------------

_SAMPLES = {
    "bool": True, "int8": -3, "int16": 300, "uint16": 65535, "int32": -70000,
    "int64": 1 << 40, "float64": 1048576.0, "uuid": TOPIC_ID, "string": "näme\t\"x\"",
    "bytes": b"\x00\xff\x10",
}


def _sample_value(field: Field, version: int) -> object:
    element_type = field.type[2:] if field.is_array else field.type
    element = (_sample_struct(field.fields, version) if field.fields
               else _SAMPLES[element_type])
    return [element, element] if field.is_array else element


def _sample_struct(fields: tuple[Field, ...], version: int) -> dict:
    struct = {TAGGED: {}}
    for field in fields:
        if field.exists_in(version):
            target = struct if field.tag is None else struct[TAGGED]
            target[field.json_name] = _sample_value(field, version)
    return struct


def _expected_json(fields: tuple[Field, ...], struct: dict) -> dict:
    """The JsonConverter output for a sample: declaration order, bytes as padded base64."""
    out = {}
    for field in fields:
        source = struct if field.tag is None else struct[TAGGED]
        if field.json_name in source:
            out[field.json_name] = _expected_value(field, source[field.json_name])
    return out


def _expected_value(field: Field, value: object) -> object:
    if field.fields:
        if field.is_array:
            return [_expected_json(field.fields, item) for item in value]
        return _expected_json(field.fields, value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    return FRAME_HEADER.build({"frameVersion": 1, "apiKey": api_key, "version": version}) + body


# ---------------------------------------------------------------------------------------------
# Every record type, every version
# ---------------------------------------------------------------------------------------------


def test_the_table_holds_every_record_type_of_kafkas_metadata_directory():
    assert {key: (schema.name, schema.newest_version)
            for key, schema in METADATA_RECORDS.items()} == KAFKA_METADATA_RECORDS
    assert all(min(schema.layouts) == 0 for schema in METADATA_RECORDS.values())


@pytest.mark.parametrize("api_key, version", ALL_VERSIONS)
def test_every_record_version_round_trips(api_key, version):
    schema = METADATA_RECORDS[api_key]
    layout = schema.layouts[version]
    body = layout.build(_sample_struct(schema.fields, version))
    assert layout.build(layout.parse(body)) == body

    value = _frame(api_key, version, body)
    record = read_metadata_record(value)
    assert (record.frame_version, record.api_key, record.version) == (1, api_key, version)
    assert _frame(api_key, version, layout.build(record.fields)) == value


@pytest.mark.parametrize("api_key, version", ALL_VERSIONS)
def test_every_record_version_decodes_to_kafkas_json(api_key, version):
    schema = METADATA_RECORDS[api_key]
    sample = _sample_struct(schema.fields, version)
    decoded = decode(None, _frame(api_key, version, schema.layouts[version].build(sample)))

    expected = _expected_json(schema.fields, sample)
    assert decoded.warning is None
    assert decoded.key is None and decoded.key_text is None
    assert decoded.value == {"type": schema.type_name, "apiKey": api_key, "version": version,
                             "frameVersion": 1, "data": expected}
    printed = json.loads(decoded.value_text)
    assert list(printed) == ["type", "version", "data"]
    assert printed == {"type": schema.type_name, "version": version, "data": expected}
    assert list(printed["data"]) == list(expected)  # field order is the declaration order


# ---------------------------------------------------------------------------------------------
# Bytes written by hand from the schemas, and the exact text Kafka prints
# ---------------------------------------------------------------------------------------------


def test_topic_record_bytes_and_text():
    value = bytes.fromhex("01 02 00" "04 666f6f") + bytes(range(16)) + b"\x00"
    decoded = decode(None, value)
    assert decoded.value["data"] == {"name": "foo", "topicId": "AAECAwQFBgcICQoLDA0ODw"}
    assert decoded.value_text == (
        '{"type":"TOPIC_RECORD","version":0,"data":'
        '{"name":"foo","topicId":"AAECAwQFBgcICQoLDA0ODw"}}'
    )


def test_tagged_fields_print_only_when_they_differ_from_their_default():
    # PartitionChangeRecord v0: partitionId 7, topicId, then tags 0 (isr [1,2]), 1 (leader -2,
    # which is the default "no change") and 5 (leaderRecoveryState 1)
    value = (bytes.fromhex("01 05 00" "00000007") + bytes(range(16))
             + bytes.fromhex("03" "00 09 03 00000001 00000002" "01 04 fffffffe" "05 01 01"))
    decoded = decode(None, value)
    assert decoded.warning is None
    assert decoded.value_text == (
        '{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":7,'
        '"topicId":"AAECAwQFBgcICQoLDA0ODw","isr":[1,2],"leaderRecoveryState":1}}'
    )


def test_register_broker_record_v3_text():
    schema = METADATA_RECORDS[0]
    body = schema.layouts[3].build({
        "brokerId": 1, "isMigratingZkBroker": False, "incarnationId": TOPIC_ID, "brokerEpoch": 9,
        "endPoints": [{"name": "PLAINTEXT", "host": "kafka-1", "port": 9092,
                       "securityProtocol": 0, TAGGED: {}}],
        "features": [{"name": "metadata.version", "minSupportedVersion": 1,
                      "maxSupportedVersion": 20, TAGGED: {}}],
        "rack": None, "fenced": True, "inControlledShutdown": False,
        TAGGED: {"logDirs": [TOPIC_ID]},
    })
    assert decode(None, _frame(0, 3, body)).value_text == (
        '{"type":"REGISTER_BROKER_RECORD","version":3,"data":{"brokerId":1,'
        '"isMigratingZkBroker":false,"incarnationId":"AAECAwQFBgcICQoLDA0ODw","brokerEpoch":9,'
        '"endPoints":[{"name":"PLAINTEXT","host":"kafka-1","port":9092,"securityProtocol":0}],'
        '"features":[{"name":"metadata.version","minSupportedVersion":1,"maxSupportedVersion":20}],'
        '"rack":null,"fenced":true,"inControlledShutdown":false,'
        '"logDirs":["AAECAwQFBgcICQoLDA0ODw"]}}'
    )


@pytest.mark.parametrize("quota, text", [
    (1048576.0, "1048576.0"), (1e7, "1.0E7"), (0.5, "0.5"), (1e-4, "1.0E-4"), (-0.0, "-0.0"),
    (float("nan"), '"NaN"'),
])
def test_client_quota_values_print_as_java_doubles(quota, text):
    body = METADATA_RECORDS[14].layouts[0].build({
        "entity": [{"entityType": "user", "entityName": None, TAGGED: {}}],
        "key": "producer_byte_rate", "value": quota, "remove": False, TAGGED: {},
    })
    decoded = decode(None, _frame(14, 0, body))
    assert decoded.warning is None
    assert decoded.value_text == (
        '{"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"user",'
        f'"entityName":null}}],"key":"producer_byte_rate","value":{text},"remove":false}}}}'
    )


@pytest.mark.parametrize("value, text", [
    (100.0, "100.0"), (0.001, "0.001"), (9999999.0, "9999999.0"), (123456789.0, "1.23456789E8"),
    (1e23, "1.0E23"), (5e-324, "4.9E-324"), (float("inf"), "Infinity"), (float("nan"), "NaN"),
])
def test_java_double_text(value, text):
    assert java_double_text(value) == text


def test_jackson_escapes_only_quotes_backslashes_and_c0_controls():
    assert jackson_json({"s": 'a"b\\c\n\x01\x7fé/€'}) == '{"s":"a\\"b\\\\c\\n\\u0001\x7fé/€"}'
    assert jackson_json([float("nan"), None, True]) == '["NaN",null,true]'


# ---------------------------------------------------------------------------------------------
# What Kafka cannot read: its message, and our raw copy
# ---------------------------------------------------------------------------------------------

TOPIC_RECORD = bytes.fromhex("01 02 00" "04 666f6f") + bytes(range(16)) + b"\x00"


@pytest.mark.parametrize("value, message", [
    (b"", "Error while reading frame version"),
    (b"\x00", "Could not deserialize metadata record with frame version 0. Note that upgrades "
              "from the preview release of KRaft in 2.8 to newer versions are not supported."),
    (b"\x02\x02\x00", "Could not deserialize metadata record due to unknown frame version 2"
                      "(only frame version 1 is supported)"),
    (b"\x01\x80\x80\x02", "Value for type was too large."),
    (b"\x01\x02", "Error while reading version"),
    (b"\x01\x06\x00", "org.apache.kafka.common.errors.UnsupportedVersionException: "
                      "Unknown metadata id 6"),
    (TOPIC_RECORD[:-5], "Failed to deserialize record with type 2"),
    (TOPIC_RECORD + b"\x00\x00", "Found 2 byte(s) of garbage after 2"),
])
def test_unreadable_values_print_kafkas_error(value, message):
    decoded = decode(None, value, offset=42)
    assert decoded.value_text == f"Error at 42, skipping. {message}"
    assert decoded.warning.startswith(message)
    assert decoded.value["raw"] == base64.b64encode(value).decode()
    assert decode(None, value).value_text == f"Error, skipping. {message}"


def test_a_tag_of_another_version_is_an_error_as_in_kafka():
    # PartitionChangeRecord v0 carrying tag 8 (Directories, v1+)
    value = bytes.fromhex("01 05 00" "00000001") + bytes(16) + bytes.fromhex("01 08 01 00")
    decoded = decode(None, value, offset=3)
    assert decoded.value_text == "Error at 3, skipping. Failed to deserialize record with type 5"
    assert "Tag 8 is not valid for version 0" in decoded.warning


def test_unknown_tagged_fields_are_kept_raw_and_not_printed():
    value = TOPIC_RECORD[:-1] + bytes.fromhex("01 09 02 abcd")
    decoded = decode(None, value)
    assert decoded.value["data"]["_unknownTaggedFields"] == [{"tag": 9, "data": "q80="}]
    assert "unknown tagged field(s) 9 in the TopicRecord" in decoded.warning
    assert decoded.value_text == decode(None, TOPIC_RECORD).value_text


def test_a_newer_version_is_read_as_kafka_reads_it_and_flagged():
    value = bytes.fromhex("01 02 05") + TOPIC_RECORD[3:]
    decoded = decode(None, value)
    assert decoded.value == {"type": "TOPIC_RECORD", "apiKey": 2, "version": 5, "frameVersion": 1,
                             "data": {"name": "foo", "topicId": "AAECAwQFBgcICQoLDA0ODw"},
                             "read_as_version": 0}
    assert "TopicRecord version 5 is unknown" in decoded.warning
    assert decoded.value_text == (
        '{"type":"TOPIC_RECORD","version":5,"data":'
        '{"name":"foo","topicId":"AAECAwQFBgcICQoLDA0ODw"}}'
    )


def test_null_values_and_keys():
    decoded = decode(None, None, offset=1)
    assert decoded.value is None
    assert decoded.value_text == "Error at 1, skipping. Error while reading frame version"
    keyed = decode(b"k", TOPIC_RECORD)
    assert keyed.key == {"raw": "aw=="} and keyed.key_text is None
    assert keyed.value_text == decode(None, TOPIC_RECORD).value_text
    assert "no key" in keyed.warning


@pytest.mark.parametrize("cut", range(len(TOPIC_RECORD)))
def test_every_truncation_warns(cut):
    decoded = decode(None, TOPIC_RECORD[:cut])
    assert decoded.warning
    assert decoded.value_text.startswith("Error, skipping. ")


@given(st.binary(max_size=80))
def test_garbage_never_raises(value):
    decoded = decode(None, value)
    assert decoded.value_text is not None
    json.dumps(decoded.value)  # JSON-ready whatever the bytes


@given(st.sampled_from([p.values for p in ALL_VERSIONS]), st.binary(max_size=40))
def test_garbage_bodies_never_raise(api_key_version, body):
    api_key, version = api_key_version
    decoded = decode(None, _frame(api_key, version, body))
    assert decoded.value_text is not None
    json.dumps(decoded.value)


def test_registered_for_the_metadata_topic():
    assert decoder_for_topic("__cluster_metadata").name == "cluster-metadata"

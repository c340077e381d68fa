"""KRaft control record values: round trips, JSON-ready data, and the text Kafka 3.8.0's
DumpLogSegments prints after a control record's metadata."""
from __future__ import annotations

import pytest
from construct import Int16sb
from hypothesis import given
from hypothesis import strategies as st

from kafkalog_tools.formats.control import parse_control
from kafkalog_tools.payloads import PayloadError
from kafkalog_tools.payloads.kraft_control import (
    CONTROL_TYPES,
    KRAFT_VERSION_RECORD,
    LEADER_CHANGE_MESSAGE,
    SNAPSHOT_FOOTER_RECORD,
    SNAPSHOT_HEADER_RECORD,
    VOTERS_RECORD,
    control_text,
    decode_control_value,
)
from kafkalog_tools.payloads.metadata_records import TAGGED
from kafkalog_tools.protocol import uuid_to_text

DIRECTORY_ID = uuid_to_text(bytes(range(16)))

SAMPLES = {
    (LEADER_CHANGE_MESSAGE, 0): {
        "version": 0, "leaderId": 1,
        "voters": [{"voterId": 1, TAGGED: {}}, {"voterId": 2, TAGGED: {}}],
        "grantingVoters": [{"voterId": 1, TAGGED: {}}], TAGGED: {},
    },
    (LEADER_CHANGE_MESSAGE, 1): {
        "version": 1, "leaderId": 1,
        "voters": [{"voterId": 1, "voterDirectoryId": DIRECTORY_ID, TAGGED: {}}],
        "grantingVoters": [], TAGGED: {},
    },
    (SNAPSHOT_HEADER_RECORD, 0): {"version": 0, "lastContainedLogTimestamp": 1234, TAGGED: {}},
    (SNAPSHOT_FOOTER_RECORD, 0): {"version": 0, TAGGED: {}},
    (KRAFT_VERSION_RECORD, 0): {"version": 0, "kRaftVersion": 1, TAGGED: {}},
    (VOTERS_RECORD, 0): {
        "version": 0,
        "voters": [{
            "voterId": 3000, "voterDirectoryId": DIRECTORY_ID,
            "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093, TAGGED: {}}],
            "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1,
                                    TAGGED: {}},
            TAGGED: {},
        }],
        TAGGED: {},
    },
}


def test_every_schema_version_has_a_sample():
    assert set(SAMPLES) == {(kind.schema, version) for kind in CONTROL_TYPES.values()
                            for version in kind.schema.layouts}


@pytest.mark.parametrize("schema, version", list(SAMPLES),
                         ids=[f"{s.name}-v{v}" for s, v in SAMPLES])
def test_every_schema_version_round_trips(schema, version):
    layout = schema.layouts[version]
    data = layout.build(SAMPLES[schema, version])
    assert layout.build(layout.parse(data)) == data


# Bytes written by hand from the schemas: int16 Version first, compact arrays (count + 1),
# a tagged-field count closing every struct.
SNAPSHOT_HEADER = bytes.fromhex("0000" "00000000000004d2" "00")
SNAPSHOT_FOOTER = bytes.fromhex("0000" "00")
KRAFT_VERSION = bytes.fromhex("0000" "0001" "00")
VOTERS = (bytes.fromhex("0000" "02" "00000bb8") + bytes(range(16))
          + bytes.fromhex("02" "0b") + b"CONTROLLER" + bytes.fromhex("0a") + b"localhost"
          + bytes.fromhex("2385" "00" "0000" "0001" "00" "00" "00"))
LEADER_CHANGE = bytes.fromhex("0000" "00000001" "03 00000001 00 00000002 00" "02 00000001 00" "00")


@pytest.mark.parametrize("control_type, value, text", [
    (3, SNAPSHOT_HEADER, ' SnapshotHeader {"version":0,"lastContainedLogTimestamp":1234}'),
    (4, SNAPSHOT_FOOTER, ' SnapshotFooter {"version":0}'),
    (5, KRAFT_VERSION, ' KRaftVersion {"version":0,"kRaftVersion":1}'),
    (6, VOTERS, ' KRaftVoters {"version":0,"voters":[{"voterId":3000,'
                '"voterDirectoryId":"AAECAwQFBgcICQoLDA0ODw","endpoints":[{"name":"CONTROLLER",'
                '"host":"localhost","port":9093}],"kRaftVersionFeature":{"minSupportedVersion":0,'
                '"maxSupportedVersion":1}}]}'),
    (2, LEADER_CHANGE, " controlType: LEADER_CHANGE(2)"),
])
def test_control_text(control_type, value, text):
    assert control_text(control_type, value) == text


def test_the_hand_written_bytes_are_what_the_schemas_build():
    for schema, value in ((SNAPSHOT_HEADER_RECORD, SNAPSHOT_HEADER),
                          (SNAPSHOT_FOOTER_RECORD, SNAPSHOT_FOOTER),
                          (KRAFT_VERSION_RECORD, KRAFT_VERSION), (VOTERS_RECORD, VOTERS),
                          (LEADER_CHANGE_MESSAGE, LEADER_CHANGE)):
        assert schema.layouts[0].build(schema.layouts[0].parse(value)) == value


def test_leader_change_and_unknown_types_print_without_reading_the_value():
    assert control_text(2, b"\xff") == " controlType: LEADER_CHANGE(2)"
    assert control_text(2, None) == " controlType: LEADER_CHANGE(2)"
    assert control_text(9, b"") == " controlType: UNKNOWN(9)"
    assert control_text(-1, None) == " controlType: UNKNOWN(-1)"


def test_decoded_values_use_the_json_converter_names():
    assert decode_control_value(2, LEADER_CHANGE) == {
        "version": 0, "leaderId": 1, "voters": [{"voterId": 1}, {"voterId": 2}],
        "grantingVoters": [{"voterId": 1}],
    }
    assert decode_control_value(3, SNAPSHOT_HEADER) == {"version": 0,
                                                        "lastContainedLogTimestamp": 1234}


def test_a_message_is_read_at_the_version_it_declares_when_known():
    v1 = LEADER_CHANGE_MESSAGE.layouts[1].build(SAMPLES[LEADER_CHANGE_MESSAGE, 1])
    assert decode_control_value(2, v1)["voters"] == [{"voterId": 1,
                                                      "voterDirectoryId": DIRECTORY_ID}]
    # an unknown Version is read at version 0, as ControlRecordUtils reads every version
    assert decode_control_value(3, b"\x00\x07" + SNAPSHOT_HEADER[2:]) == {
        "version": 7, "lastContainedLogTimestamp": 1234}
    assert control_text(3, b"\x00\x07" + SNAPSHOT_HEADER[2:]) == (
        ' SnapshotHeader {"version":7,"lastContainedLogTimestamp":1234}')


def test_leftovers_are_kept_raw_and_ignored_in_the_text_as_kafka_ignores_them():
    value = SNAPSHOT_FOOTER + b"\x01\x02"
    assert decode_control_value(4, value) == {"version": 0, "_trailing": "AQI="}
    assert control_text(4, value) == ' SnapshotFooter {"version":0}'
    tagged = SNAPSHOT_FOOTER[:-1] + bytes.fromhex("01 05 01 ff")
    assert decode_control_value(4, tagged) == {
        "version": 0, "_unknownTaggedFields": [{"tag": 5, "data": "/w=="}]}
    assert control_text(4, tagged) == ' SnapshotFooter {"version":0}'


@pytest.mark.parametrize("control_type, value", [
    (3, None), (3, b""), (3, b"\x00"), (3, SNAPSHOT_HEADER[:-1]), (6, VOTERS[:30]),
    (0, b"\x00\x00\x00\x00\x00\x01"), (1, b""), (7, b""),
])
def test_unreadable_values_raise_payload_error(control_type, value):
    with pytest.raises(PayloadError):
        decode_control_value(control_type, value)


@pytest.mark.parametrize("control_type", [3, 4, 5, 6])
@given(value=st.binary(max_size=60))
def test_garbage_raises_only_payload_error(control_type, value):
    try:
        decode_control_value(control_type, value)
        control_text(control_type, value)
    except PayloadError:
        pass


def test_control_batches_carry_the_decoded_value():
    key = Int16sb.build(0) + Int16sb.build(3)
    assert parse_control(key, SNAPSHOT_HEADER).data == {"version": 0,
                                                        "lastContainedLogTimestamp": 1234}
    assert parse_control(key, b"\x00").error is not None

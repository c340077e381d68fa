"""`__transaction_state` records: round trips, JSON-ready data, and the text Kafka 3.8.0's
`kafka-dump-log.sh --transaction-log-decoder` prints (TransactionLog.formatRecordKeyAndValue)."""
from __future__ import annotations

import json

import pytest
from construct import Int16sb
from hypothesis import given
from hypothesis import strategies as st

from kafkalog_tools.payloads import decoder_for_topic
from kafkalog_tools.payloads.transaction_state import (
    TAGGED,
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
    TransactionState,
    decode,
)

KEY = Int16sb.build(0) + TRANSACTION_LOG_KEY[0].build({"transactionalId": "my-txn"})

ONGOING = {
    "producerId": 4000, "producerEpoch": 2, "transactionTimeoutMs": 60000,
    "transactionStatus": 1,
    "transactionPartitions": [{"topic": "orders", "partitionIds": [0, 2]},
                              {"topic": "audit", "partitionIds": [1]}],
    "transactionLastUpdateTimestampMs": 1700000000123, "transactionStartTimestampMs": 1700000000000,
}


def _value(version: int, fields: dict) -> bytes:
    return Int16sb.build(version) + TRANSACTION_LOG_VALUE[version].build(fields)


def _flexible(fields: dict, tagged: dict | None = None) -> dict:
    partitions = fields["transactionPartitions"]
    if partitions is not None:
        partitions = [{**entry, TAGGED: {}} for entry in partitions]
    return {**fields, "transactionPartitions": partitions, TAGGED: tagged or {}}


V1_TAGS = {"previousProducerId": 3999, "nextProducerId": 4001, "clientTransactionVersion": 2}


@pytest.mark.parametrize("layout, fields", [
    (TRANSACTION_LOG_KEY[0], {"transactionalId": "my-txn"}),
    (TRANSACTION_LOG_VALUE[0], ONGOING),
    (TRANSACTION_LOG_VALUE[0], {**ONGOING, "transactionStatus": 0, "transactionPartitions": None}),
    (TRANSACTION_LOG_VALUE[1], _flexible(ONGOING, V1_TAGS)),
    (TRANSACTION_LOG_VALUE[1], _flexible({**ONGOING, "transactionPartitions": None})),
], ids=["key-v0", "value-v0", "value-v0-empty", "value-v1", "value-v1-no-tags"])
def test_every_schema_version_round_trips(layout, fields):
    data = layout.build(fields)
    assert layout.build(layout.parse(data)) == data


def test_value_v0_bytes_written_by_hand():
    value = bytes.fromhex(
        "0000" "0000000000000fa0" "0002" "0000ea60" "01"
        "00000002" "0006" "6f7264657273" "00000002" "00000000" "00000002"
        "0005" "6175646974" "00000001" "00000001"
        "0000018bcfe5687b" "0000018bcfe56800"
    )
    assert value == _value(0, ONGOING)


def test_decode_key_and_value():
    decoded = decode(KEY, _value(0, ONGOING))
    assert decoded.warning is None
    assert decoded.key == {"type": "transaction_metadata", "version": 0,
                           "data": {"transactionalId": "my-txn"}}
    assert decoded.value == {"version": 0, "data": ONGOING, "state": "Ongoing"}
    assert decoded.key_text == "transaction_metadata::transactionalId=my-txn"
    assert decoded.value_text == (
        # Kafka 4.0's TransactionLog.readTxnRecordValue iterates its hash set in this order
        "producerId:4000,producerEpoch:2,state=Ongoing,partitions=[audit-1,orders-0,orders-2],"
        "txnLastUpdateTimestamp=1700000000123,txnTimeoutMs=60000"
    )
    json.dumps(decoded.value)


def test_value_v1_tagged_fields_join_the_data():
    decoded = decode(KEY, _value(1, _flexible(ONGOING, V1_TAGS)))
    assert decoded.warning is None
    assert decoded.value == {"version": 1,
                             "data": {**ONGOING, **V1_TAGS}, "state": "Ongoing"}
    assert decoded.value_text == decode(KEY, _value(0, ONGOING)).value_text


@pytest.mark.parametrize("state", list(TransactionState))
def test_every_state_is_named(state):
    partitions = None if state is TransactionState.Empty else ONGOING["transactionPartitions"]
    fields = {**ONGOING, "transactionStatus": state.value, "transactionPartitions": partitions}
    decoded = decode(KEY, _value(0, fields))
    assert decoded.value["data"]["transactionStatus"] == state.value
    assert decoded.value["state"] == state.name
    assert f",state={state.name}," in decoded.value_text


def test_empty_transactions_print_no_partitions_and_repeats_print_once():
    empty = decode(KEY, _value(0, {**ONGOING, "transactionStatus": 0}))
    assert ",partitions=[]," in empty.value_text
    repeated = {**ONGOING, "transactionPartitions": [{"topic": "t", "partitionIds": [1, 1]},
                                                     {"topic": "t", "partitionIds": [1]}]}
    assert ",partitions=[t-1]," in decode(KEY, _value(0, repeated)).value_text


def test_tombstone():
    decoded = decode(KEY, None, offset=12)
    assert decoded.value is None
    assert decoded.value_text == "<DELETE>"
    assert decoded.warning is None


def test_unknown_key_version_prints_no_payload():
    decoded = decode(Int16sb.build(1) + b"\x00\x01x", _value(0, ONGOING))
    assert decoded.key_text == "unknown::version=1"
    assert decoded.key == {"type": "unknown", "version": 1, "raw": "AAF4"}
    assert decoded.value_text is None
    assert decoded.value["data"]["producerId"] == 4000
    assert decode(Int16sb.build(1), None).value_text is None


@pytest.mark.parametrize("value, warning", [
    (Int16sb.build(2) + b"\x00", "TransactionLogValue v2 does not parse with the v1 layout"),
    (_value(0, {**ONGOING, "transactionStatus": 9}), "Unknown transaction state id 9"),
    (_value(0, {**ONGOING, "transactionPartitions": None}), "null TransactionPartitions"),
    (b"\x00", "value is 1 byte(s)"),
])
def test_values_kafka_cannot_read_have_no_text(value, warning):
    decoded = decode(KEY, value)
    assert decoded.value_text is None
    assert warning in decoded.warning
    json.dumps(decoded.value)


def test_a_newer_value_version_is_read_with_the_newest_layout_and_flagged():
    newer = _value(1, _flexible(ONGOING, V1_TAGS))
    decoded = decode(KEY, Int16sb.build(7) + newer[2:])
    assert decoded.value == {"version": 7, "read_as_version": 1, "data": {**ONGOING, **V1_TAGS}}
    assert "Unknown version 7" in decoded.warning and "read with the v1 layout" in decoded.warning
    assert decoded.value_text is None  # Kafka 4.0 throws on it


def test_leftover_bytes_are_kept_raw():
    decoded = decode(KEY + b"\x01", _value(0, ONGOING) + b"\x02")
    assert decoded.key["trailing"] == "AQ==" and decoded.value["trailing"] == "Ag=="
    assert decoded.key_text == "transaction_metadata::transactionalId=my-txn"
    assert decoded.value_text.startswith("producerId:4000,")
    assert "after the TransactionLogKey" in decoded.warning


def test_unknown_tagged_fields_are_kept_raw():
    value = _value(1, _flexible(ONGOING, {"_unknown": [{"tag": 7, "data": b"\x01"}]}))
    decoded = decode(KEY, value)
    assert decoded.value["data"]["_unknownTaggedFields"] == [{"tag": 7, "data": "AQ=="}]
    assert "unknown tagged field(s) 7" in decoded.warning


@pytest.mark.parametrize("cut", range(2, len(_value(0, ONGOING))))
def test_every_truncated_value_warns(cut):
    decoded = decode(KEY, _value(0, ONGOING)[:cut])
    assert decoded.warning and decoded.value_text is None
    assert "raw" in decoded.value


@pytest.mark.parametrize("cut", range(len(KEY)))
def test_every_truncated_key_warns(cut):
    decoded = decode(KEY[:cut], None)
    assert decoded.warning and decoded.key_text is None


@given(st.one_of(st.none(), st.binary(max_size=40)), st.one_of(st.none(), st.binary(max_size=80)))
def test_garbage_never_raises(key, value):
    decoded = decode(key, value)
    json.dumps([decoded.key, decoded.value])


def test_registered_for_the_transaction_topic():
    assert decoder_for_topic("__transaction_state").name == "transaction-log"

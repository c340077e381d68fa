"""`__transaction_state`: the transaction coordinator's log (KIP-98).

Implements `TransactionLogKey.json` and `TransactionLogValue.json` (core/src/main/resources/
common/message in Kafka 3.8.0; transaction-coordinator/src/main/resources/common/message on trunk
as of 2024-10-25, where value v1 gained the tagged fields PreviousProducerId, NextProducerId and
ClientTransactionVersion), framed as `kafka.coordinator.transaction.TransactionLog` frames them:
key = int16 version + TransactionLogKey, value = int16 version + TransactionLogValue, and a null
value is a tombstone. Kafka 3.8 writes key v0 and value v0; value v1 is flexible (compact
encodings, tagged fields) and is written by brokers whose `transaction.version` is 1 or more.

The text is what `kafka-dump-log.sh --transaction-log-decoder` prints in Kafka 3.8.0
(`TransactionLog.formatRecordKeyAndValue`): key `transaction_metadata::transactionalId=<id>`
(`unknown::version=<n>` for another key version, and then no payload), payload
`producerId:P,producerEpoch:E,state=<State>,partitions=[t-0,...],txnLastUpdateTimestamp=T,
txnTimeoutMs=M` (one line), or `<DELETE>` for a tombstone.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from enum import IntEnum

from construct import (
    Construct,
    ConstructError,
    Int8sb,
    Int16sb,
    Int32sb,
    Int64sb,
    Struct,
)

from ..protocol import Array, CompactArray, CompactString, String, TaggedFields
from . import DecodedPayload, PayloadDecoder, register
from .jackson import b64

TAGGED = "_tagged"
"""Name of the tagged-field trailer that ends every struct of a flexible version."""
UNKNOWN_TAGGED_FIELDS = "_unknownTaggedFields"
"""Where JSON-ready data keeps tagged fields the schema does not know."""

# ---------------------------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------------------------

TRANSACTION_LOG_KEY = {
    0: Struct("transactionalId" / String),
}


VALUE_V1_TAGGED_FIELDS = {
    0: ("previousProducerId", Int64sb),  # default -1
    1: ("nextProducerId", Int64sb),  # default -1
    2: ("clientTransactionVersion", Int16sb),  # default 0
}


def _transaction_log_value(flexible: bool) -> Struct:
    """Value v0 (classic encodings) or v1 (compact encodings, and every struct ends with tagged
    fields)."""
    string, array = (CompactString, CompactArray) if flexible else (String, Array)

    def trailer(known: dict | None = None) -> tuple[Construct, ...]:
        return (TAGGED / TaggedFields(known),) if flexible else ()

    partitions = Struct(
        "topic" / string,
        "partitionIds" / array(Int32sb),
        *trailer(),
    )
    return Struct(
        "producerId" / Int64sb,
        "producerEpoch" / Int16sb,
        "transactionTimeoutMs" / Int32sb,
        "transactionStatus" / Int8sb,
        "transactionPartitions" / array(partitions, nullable=True),  # null when Empty
        "transactionLastUpdateTimestampMs" / Int64sb,
        "transactionStartTimestampMs" / Int64sb,
        *trailer(VALUE_V1_TAGGED_FIELDS),
    )


TRANSACTION_LOG_VALUE = {
    0: _transaction_log_value(flexible=False),
    1: _transaction_log_value(flexible=True),
}


class TransactionState(IntEnum):
    """TransactionStatus ids, named as kafka.coordinator.transaction.TransactionState names them."""

    Empty = 0
    Ongoing = 1
    PrepareCommit = 2
    PrepareAbort = 3
    CompleteCommit = 4
    CompleteAbort = 5
    Dead = 6
    PrepareEpochFence = 7


# ---------------------------------------------------------------------------------------------
# Typed record
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    """What TransactionLog.readTxnRecordValue loads from a value, as far as the dump prints it."""

    producer_id: int
    producer_epoch: int
    state: TransactionState
    partitions: tuple[str, ...]
    """"topic-partition" names, none for an Empty transaction (Kafka ignores them then)."""
    last_update_timestamp: int
    timeout_ms: int

    @classmethod
    def from_value(cls, parsed: dict, state: TransactionState) -> TransactionMetadata:
        partitions = () if state is TransactionState.Empty else scala_hash_set_order(
            [(entry.topic, entry.partitionIds) for entry in parsed.transactionPartitions])
        return cls(parsed.producerId, parsed.producerEpoch, state, partitions,
                   parsed.transactionLastUpdateTimestampMs, parsed.transactionTimeoutMs)

    def kafka_text(self) -> str:
        return (f"producerId:{self.producer_id},producerEpoch:{self.producer_epoch},"
                f"state={self.state.name},partitions=[{','.join(self.partitions)}],"
                f"txnLastUpdateTimestamp={self.last_update_timestamp},"
                f"txnTimeoutMs={self.timeout_ms}")


# ---------------------------------------------------------------------------------------------
# The order Kafka prints a transaction's partitions in
#
# TransactionLog.readTxnRecordValue (Kafka 4.0) starts from `mutable.Set.empty[TopicPartition]`,
# a Scala 2.13 `mutable.HashSet`, and adds each topic's partitions with `addPartitions(ids.map(new
# TopicPartition(topic, _)).toSet)`, i.e. `++=` of an immutable Set. The dump prints the set's
# iteration order: by bucket, then by hash within a bucket (HashSet.addElem keeps each bucket
# sorted by hash). Bucket = improved hash & (table length - 1), improved = h ^ (h >>> 16), h =
# TopicPartition.hashCode = 31 * (31 + partition) + topic.hashCode(). The table starts at 16 and
# doubles in `add` once size + 1 reaches 0.75 of it; `++=` first grows it to fit the added set
# alone (sizeHint), and adds an immutable.HashSet (more than 4 elements) with no growth check.
# ---------------------------------------------------------------------------------------------

_INITIAL_TABLE = 16
_LOAD_FACTOR = 0.75
_IMMUTABLE_SMALL_SET = 4
"""immutable.Set1..Set4 are added one by one through `add`; larger sets are immutable.HashSets."""


def _int32(value: int) -> int:
    return ((value & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000


def java_string_hash(text: str) -> int:
    """String.hashCode: over UTF-16 code units, in int arithmetic."""
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return _int32(h)


def topic_partition_hash(topic: str, partition: int) -> int:
    return _int32(31 * (31 + partition) + java_string_hash(topic))


def _improved_hash(h: int) -> int:
    return _int32(h ^ ((h & 0xFFFFFFFF) >> 16))


def _table_size_for(capacity: int) -> int:
    highest_one_bit = 1 << (max(capacity - 1, 4).bit_length() - 1)
    return min(highest_one_bit * 2, 1 << 30)


def scala_hash_set_order(topics: list[tuple[str, list[int]]]) -> tuple[str, ...]:
    """The "topic-partition" names of a value's partitions in the order Kafka 4.0 prints them."""
    table = _INITIAL_TABLE
    members: dict[tuple[str, int], int] = {}  # (topic, partition) -> improved hash
    for topic, partition_ids in topics:
        added = list(dict.fromkeys(partition_ids))  # .toSet
        hinted = _table_size_for(int((len(added) + 1) / _LOAD_FACTOR))
        table = max(table, hinted)
        for partition in added:
            if len(added) <= _IMMUTABLE_SMALL_SET and len(members) + 1 >= int(table * _LOAD_FACTOR):
                table *= 2
            members.setdefault((topic, partition), _improved_hash(topic_partition_hash(topic, partition)))
    ordered = sorted(members, key=lambda member: (members[member] & (table - 1), members[member]))
    return tuple(f"{topic}-{partition}" for topic, partition in ordered)


# ---------------------------------------------------------------------------------------------
# Decoding a record
# ---------------------------------------------------------------------------------------------


def decode(key: bytes | None, value: bytes | None, offset: int | None = None) -> DecodedPayload:
    """Decode one `__transaction_state` record; never raises for bad bytes.

    Where Kafka 3.8 would fail (no key, an unknown value version or state, ...) the text is None
    and `warning` says why; whatever could be read is still returned, the rest as base64.
    `offset` is part of the decoder interface only: this decoder's texts never name one.
    """
    warnings: list[str] = []
    key_json, key_text, transactional_id = _decode_key(key, warnings)
    if value is None:
        value_json, value_text = None, "<DELETE>"
    else:
        value_json, value_text = _decode_value(value, warnings)
    if transactional_id is None:  # Kafka reads no value without a key it understands
        value_text = None
    # TransactionLog.formatRecordKeyAndValue throws where it cannot read the key (but an unknown key
    # version, which it prints), or a value of a key it read; kafka-dump-log stops there
    throws = key_text is None or transactional_id is not None and value_text is None
    if key is None:
        reason = (f"Failed to decode message at offset {offset} using transaction log decoder (message had a "
                  "missing key)")
    else:
        reason = _join(warnings) or "the transaction log decoder fails on this record"
    return DecodedPayload(key_json, value_json, key_text, value_text, _join(warnings), reason if throws else None)


def _decode_key(key: bytes | None, warnings: list[str]):
    """(JSON-ready key, Kafka's key text, the transactional id when the key was read)."""
    if key is None:
        warnings.append("no key; every transaction log record has one")
        return None, None, None
    version, body = _split_version(key)
    if version is None:
        warnings.append(f"key is {len(key)} byte(s); it starts with an int16 version")
        return {"raw": b64(key)}, None, None
    schema = TRANSACTION_LOG_KEY.get(version)
    if schema is None:
        warnings.append(f"TransactionLogKey version {version} is unknown; kept raw")
        key_json = {"type": "unknown", "version": version, "raw": b64(body)}
        return key_json, f"unknown::version={version}", None
    try:
        parsed, trailing = _parse(schema, body)
    except ConstructError as exc:
        warnings.append(f"TransactionLogKey v{version} does not parse: {_describe(exc)}")
        return {"type": "transaction_metadata", "version": version, "raw": b64(body)}, None, None
    transactional_id = parsed.transactionalId
    key_json = {"type": "transaction_metadata", "version": version,
                "data": {"transactionalId": transactional_id}}
    if trailing:  # Kafka ignores them
        key_json["trailing"] = b64(trailing)
        warnings.append(f"{len(trailing)} byte(s) after the TransactionLogKey kept raw")
    return key_json, f"transaction_metadata::transactionalId={transactional_id}", transactional_id


def _decode_value(value: bytes, warnings: list[str]) -> tuple[dict, str | None]:
    version, body = _split_version(value)
    if version is None:
        warnings.append(f"value is {len(value)} byte(s); it starts with an int16 version")
        return {"version": None, "raw": b64(value)}, None
    raw = {"version": version, "raw": b64(body)}
    # A version Kafka does not know is one it refuses; its generated reader would take it with
    # the newest layout (fields by `_version >= n`), which is what a newer Kafka's record shares.
    read_version = min(max(version, 0), max(TRANSACTION_LOG_VALUE))
    known = version in TRANSACTION_LOG_VALUE
    try:
        parsed, trailing = _parse(TRANSACTION_LOG_VALUE[read_version], body)
    except ConstructError as exc:
        warnings.append(f"TransactionLogValue v{version} does not parse"
                        f"{'' if known else f' with the v{read_version} layout'}: "
                        f"{_describe(exc)}; kept raw")
        return raw, None

    unknown_tags: list[int] = []
    data = _plain(parsed, unknown_tags)
    if unknown_tags:
        warnings.append(f"unknown tagged field(s) {', '.join(map(str, unknown_tags))} in the "
                        f"TransactionLogValue kept raw under {UNKNOWN_TAGGED_FIELDS}")
    value_json = {"version": version, "data": data}
    if not known:
        value_json["read_as_version"] = read_version
        warnings.append(f"Unknown version {version} from the transaction log message value "
                        f"(newest known: {max(TRANSACTION_LOG_VALUE)}); read with the "
                        f"v{read_version} layout. Kafka fails on this record")
    if trailing:  # Kafka ignores them
        value_json["trailing"] = b64(trailing)
        warnings.append(f"{len(trailing)} byte(s) after the TransactionLogValue kept raw")

    if not known:
        return value_json, None
    status = parsed.transactionStatus
    if status not in TransactionState._value2member_map_:
        warnings.append(f"Unknown transaction state id {status} from the transaction status "
                        "message")
        return value_json, None
    state = TransactionState(status)
    value_json["state"] = state.name  # data keeps Kafka's JsonConverter view: the status id
    if parsed.transactionPartitions is None and state is not TransactionState.Empty:
        warnings.append(f"null TransactionPartitions in state {state.name}; Kafka 3.8 fails "
                        "on this record")
        return value_json, None
    return value_json, TransactionMetadata.from_value(parsed, state).kafka_text()


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def _split_version(data: bytes) -> tuple[int | None, bytes]:
    if len(data) < Int16sb.sizeof():
        return None, data
    return Int16sb.parse(data), data[Int16sb.sizeof():]


def _parse(schema: Construct, data: bytes) -> tuple[dict, bytes]:
    """Parse a struct from the front of `data`, and return what follows it too."""
    stream = io.BytesIO(data)
    parsed = schema.parse_stream(stream)
    return parsed, data[stream.tell():]


def _plain(obj: object, unknown_tags: list[int]) -> object:
    """A parsed struct as JSON-ready data: tagged fields join their struct, as they appear."""
    if isinstance(obj, dict):
        out = {}
        for name, item in obj.items():
            if name == TAGGED:
                out.update({tag_name: tagged for tag_name, tagged in item.items()
                            if tag_name != "_unknown"})
                for unknown in item.get("_unknown", ()):
                    unknown_tags.append(unknown["tag"])
                    out.setdefault(UNKNOWN_TAGGED_FIELDS, []).append(
                        {"tag": unknown["tag"], "data": b64(unknown["data"])})
            elif not name.startswith("_"):  # construct's own entries, such as "_io"
                out[name] = _plain(item, unknown_tags)
        return out
    if isinstance(obj, list):
        return [_plain(item, unknown_tags) for item in obj]
    return obj


def _describe(exc: ConstructError) -> str:
    message = str(exc).split("\n", 1)[-1]
    field = (exc.path or "").replace("(parsing)", "").replace(" -> ", ".").strip(".")
    return f"{message} (in {field})" if field else message


def _join(warnings: list[str]) -> str | None:
    return "; ".join(warnings) if warnings else None


register(PayloadDecoder(
    name="transaction-log",
    topics=("__transaction_state",),
    decode=decode,
    value_version_known=lambda key, value: (value is None or len(value) < 2
                                            or int.from_bytes(value[:2], "big", signed=True) in TRANSACTION_LOG_VALUE),
    description="transaction coordinator records: transactional ids, producer ids, states and "
                "partitions",
))

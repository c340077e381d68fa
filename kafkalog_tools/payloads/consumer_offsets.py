"""`__consumer_offsets`: the group coordinator's records.

Implements, as `construct` schemas built from `kafkalog_tools.protocol`:

- the framing of `org.apache.kafka.coordinator.group.CoordinatorRecordSerde` (Kafka 3.8): key =
  int16 record type (the key's version) + key struct; value = int16 value version + value struct;
  a null value is a tombstone;
- `OffsetCommitKey` v0-1, `OffsetCommitValue` v0-4, `GroupMetadataKey` v2, `GroupMetadataValue`
  v0-4 with its `MemberMetadata` (group-coordinator/src/main/resources/common/message/*.json);
- `ConsumerProtocolSubscription` v0-3 and `ConsumerProtocolAssignment` v0-3
  (clients/src/main/resources/common/message), the member metadata of groups whose protocol type
  is "consumer";
- the KIP-848 `ConsumerGroup*` records, key types 3-8, and `ConsumerGroupRegularExpression`
  (type 16, Kafka 4.0);
- the KIP-932 share group records, key types 9-15, as Kafka 4.0 (commit b0fb35c, the golden-4.0
  corpus's) declares them; Kafka 3.8 printed them as unknown record types.

The text is what `kafka-dump-log.sh --offsets-decoder` prints in Kafka 3.8.0 and 4.0
(`DumpLogSegments.OffsetsMessageParser`): the generated `*JsonConverter` output, serialized by
Jackson's `JsonNode.toString`. The same framing and text serve `__share_group_state`
(`share_group_state`), through `decode_coordinator_record`.
"""
from __future__ import annotations

import base64
import functools
import io
from dataclasses import dataclass
from typing import Iterator, Mapping

from construct import (
    Construct,
    ConstructError,
    FocusedSeq,
    If,
    Int8sb,
    Int16sb,
    Int32sb,
    Int64sb,
    Rebuild,
    StreamError,
    Struct,
    this,
)

from ..protocol import (
    Array,
    Bytes32,
    CompactArray,
    CompactBytes,
    CompactNullableString,
    CompactString,
    NullableBytes32,
    NullableString,
    ShortArrayError,
    String,
    TooManyElementsError,
    TaggedFields,
    UVarInt,
    Uuid,
)
from . import DecodedPayload, PayloadDecoder, PayloadError, register
from .jackson import b64, jackson_json

TAGGED = "_tagged"
"""Name of the tagged-field trailer every struct of a flexible version ends with."""


# ---------------------------------------------------------------------------------------------
# Encodings by version: flexible versions use compact strings, bytes and arrays, and end every
# struct with tagged fields (KIP-482)
# ---------------------------------------------------------------------------------------------


class _Encodings:
    def __init__(self, flexible: bool):
        self.flexible = flexible
        self.string = CompactString if flexible else String
        self.nullable_string = CompactNullableString if flexible else NullableString
        self.bytes = CompactBytes if flexible else Bytes32

    def array(self, element: Construct) -> Construct:
        return CompactArray(element) if self.flexible else Array(element)

    def struct(self, *fields: Construct, tagged: dict | None = None) -> Struct:
        if self.flexible:
            fields = (*fields, TAGGED / TaggedFields(tagged))
        return Struct(*fields)


CLASSIC = _Encodings(flexible=False)
FLEXIBLE = _Encodings(flexible=True)


def _encodings(version: int, first_flexible: int) -> _Encodings:
    return FLEXIBLE if version >= first_flexible else CLASSIC


def _when(present: bool, *fields: Construct) -> tuple[Construct, ...]:
    """Fields that exist only at some versions (`"versions": "3+"` in Kafka's JSON schemas)."""
    return fields if present else ()


def TaggedNullableStruct(struct: Construct) -> Construct:
    """A nullable struct carried in a tagged field: an unsigned varint (<= 0 for null, Kafka
    writes 1 otherwise), then the struct."""
    return FocusedSeq(
        "value",
        "present" / Rebuild(UVarInt, lambda ctx: 0 if ctx.value is None else 1),
        "value" / If(this.present > 0, struct),
    )


# ---------------------------------------------------------------------------------------------
# OffsetCommitKey v0-1 (record types 0 and 1; brokers write 1) and OffsetCommitValue v0-4
# ---------------------------------------------------------------------------------------------

OffsetCommitKey = Struct(
    "group" / String,
    "topic" / String,
    "partition" / Int32sb,
)


def _offset_commit_value(version: int) -> Struct:
    enc = _encodings(version, first_flexible=4)
    return enc.struct(
        "offset" / Int64sb,
        *_when(version >= 3, "leaderEpoch" / Int32sb),
        "metadata" / enc.string,
        "commitTimestamp" / Int64sb,
        *_when(version == 1, "expireTimestamp" / Int64sb),
    )


OFFSET_COMMIT_VALUE = {version: _offset_commit_value(version) for version in range(5)}


# ---------------------------------------------------------------------------------------------
# GroupMetadataKey v2 (record type 2) and GroupMetadataValue v0-4 with MemberMetadata
# ---------------------------------------------------------------------------------------------

GroupMetadataKey = Struct("group" / String)


def _member_metadata(version: int) -> Struct:
    enc = _encodings(version, first_flexible=4)
    return enc.struct(
        "memberId" / enc.string,
        *_when(version >= 3, "groupInstanceId" / enc.nullable_string),
        "clientId" / enc.string,
        "clientHost" / enc.string,
        *_when(version >= 1, "rebalanceTimeout" / Int32sb),
        "sessionTimeout" / Int32sb,
        "subscription" / enc.bytes,
        "assignment" / enc.bytes,
    )


MEMBER_METADATA = {version: _member_metadata(version) for version in range(5)}


def _group_metadata_value(version: int) -> Struct:
    enc = _encodings(version, first_flexible=4)
    return enc.struct(
        "protocolType" / enc.string,
        "generation" / Int32sb,
        "protocol" / enc.nullable_string,
        "leader" / enc.nullable_string,
        *_when(version >= 2, "currentStateTimestamp" / Int64sb),
        "members" / enc.array(MEMBER_METADATA[version]),
    )


GROUP_METADATA_VALUE = {version: _group_metadata_value(version) for version in range(5)}


# ---------------------------------------------------------------------------------------------
# ConsumerProtocolSubscription / ConsumerProtocolAssignment v0-3: a member's `subscription` and
# `assignment` bytes when the group's protocol type is "consumer" (int16 version + struct).
# Never flexible. Newer versions only append fields, so Kafka reads them with the newest layout.
# ---------------------------------------------------------------------------------------------

ConsumerProtocolTopicPartition = Struct(
    "topic" / String,
    "partitions" / Array(Int32sb),
)


def _consumer_protocol_subscription(version: int) -> Struct:
    return Struct(
        "topics" / Array(String),
        "userData" / NullableBytes32,
        *_when(version >= 1, "ownedPartitions" / Array(ConsumerProtocolTopicPartition)),
        *_when(version >= 2, "generationId" / Int32sb),
        *_when(version >= 3, "rackId" / NullableString),
    )


# v2 and v3 only announce fields added to the subscription; the assignment layout is unchanged.
ConsumerProtocolAssignment = Struct(
    "assignedPartitions" / Array(ConsumerProtocolTopicPartition),
    "userData" / NullableBytes32,
)

CONSUMER_PROTOCOL_SUBSCRIPTION = {v: _consumer_protocol_subscription(v) for v in range(4)}
CONSUMER_PROTOCOL_ASSIGNMENT = {v: ConsumerProtocolAssignment for v in range(4)}


# ---------------------------------------------------------------------------------------------
# KIP-848 consumer group records, key types 3-8. Keys are classic structs read at the version
# equal to their record type; values exist only at v0, which is flexible.
# ---------------------------------------------------------------------------------------------

GroupIdKey = Struct("groupId" / String)
"""ConsumerGroupMetadataKey, ConsumerGroupPartitionMetadataKey and
ConsumerGroupTargetAssignmentMetadataKey."""

GroupIdMemberIdKey = Struct("groupId" / String, "memberId" / String)
"""ConsumerGroupMemberMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
ConsumerGroupCurrentMemberAssignmentKey."""

ConsumerGroupMetadataValue = FLEXIBLE.struct("epoch" / Int32sb)

PartitionMetadata = FLEXIBLE.struct(
    "partition" / Int32sb,
    "racks" / CompactArray(CompactString),
)
TopicMetadata = FLEXIBLE.struct(
    "topicId" / Uuid,
    "topicName" / CompactString,
    "numPartitions" / Int32sb,
    "partitionMetadata" / CompactArray(PartitionMetadata),
)
ConsumerGroupPartitionMetadataValue = FLEXIBLE.struct("topics" / CompactArray(TopicMetadata))

ClassicProtocol = FLEXIBLE.struct(
    "name" / CompactString,
    "metadata" / CompactBytes,
)
ClassicMemberMetadata = FLEXIBLE.struct(
    "sessionTimeoutMs" / Int32sb,
    "supportedProtocols" / CompactArray(ClassicProtocol),
)
ConsumerGroupMemberMetadataValue = FLEXIBLE.struct(
    "instanceId" / CompactNullableString,
    "rackId" / CompactNullableString,
    "clientId" / CompactString,
    "clientHost" / CompactString,
    "subscribedTopicNames" / CompactArray(CompactString),
    "subscribedTopicRegex" / CompactNullableString,
    "rebalanceTimeoutMs" / Int32sb,
    "serverAssignor" / CompactNullableString,
    tagged={0: ("classicMemberMetadata", TaggedNullableStruct(ClassicMemberMetadata))},
)

ConsumerGroupTargetAssignmentMetadataValue = FLEXIBLE.struct("assignmentEpoch" / Int32sb)

TopicIdPartitions = FLEXIBLE.struct(
    "topicId" / Uuid,
    "partitions" / CompactArray(Int32sb),
)
"""ConsumerGroupTargetAssignmentMemberValue.TopicPartition and the common struct TopicPartitions
of ConsumerGroupCurrentMemberAssignmentValue: the same layout under two names."""

ConsumerGroupTargetAssignmentMemberValue = FLEXIBLE.struct(
    "topicPartitions" / CompactArray(TopicIdPartitions),
)
ConsumerGroupCurrentMemberAssignmentValue = FLEXIBLE.struct(
    "memberEpoch" / Int32sb,
    "previousMemberEpoch" / Int32sb,
    "state" / Int8sb,
    "assignedPartitions" / CompactArray(TopicIdPartitions),
    "partitionsPendingRevocation" / CompactArray(TopicIdPartitions),
)


ConsumerGroupRegularExpressionKey = Struct("groupId" / String, "regularExpression" / String)
ConsumerGroupRegularExpressionValue = FLEXIBLE.struct(
    "topics" / CompactArray(CompactString),
    "version" / Int64sb,  # the metadata image version the topics were resolved at
    "timestamp" / Int64sb,
)


# ---------------------------------------------------------------------------------------------
# KIP-932 share group records, key types 9-15 (Kafka 4.0): keys as for the KIP-848 records, values
# at v0, flexible. ShareGroupPartitionMetadataValue has ConsumerGroupPartitionMetadataValue's
# layout; the target and current assignments have no pending revocations.
# ---------------------------------------------------------------------------------------------

ShareGroupMemberMetadataValue = FLEXIBLE.struct(
    "rackId" / CompactNullableString,
    "clientId" / CompactString,
    "clientHost" / CompactString,
    "subscribedTopicNames" / CompactArray(CompactString),
)
ShareGroupCurrentMemberAssignmentValue = FLEXIBLE.struct(
    "memberEpoch" / Int32sb,
    "previousMemberEpoch" / Int32sb,
    "state" / Int8sb,
    "assignedPartitions" / CompactArray(TopicIdPartitions),
)
ShareGroupStatePartitionMetadataValue = FLEXIBLE.struct(
    "initializedTopics" / CompactArray(FLEXIBLE.struct(
        "topicId" / Uuid,
        "topicName" / CompactString,
        "partitions" / CompactArray(Int32sb),
    )),
    "deletingTopics" / CompactArray(FLEXIBLE.struct(
        "topicId" / Uuid,
        "topicName" / CompactString,
    )),
)


# ---------------------------------------------------------------------------------------------
# Record types (CoordinatorRecordSerde.apiMessageKeyFor / apiMessageValueFor)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordType:
    name: str
    """Our name for the record type, as `key["type"]`."""
    key_class: str
    key: Construct
    value_class: str
    values: Mapping[int, Construct]
    """Value schema by value version: contiguous from 0."""
    version_bounded: tuple[tuple[str, str], ...] = ()
    """(value field, Kafka struct class) in read order, for the nested structs whose generated
    readers refuse a version above the value's newest ("Can't read version V of TopicMetadata");
    which structs do is the generator's choice, read off Kafka 4.0's classes."""


OFFSET_COMMIT = RecordType("offset_commit", "OffsetCommitKey", OffsetCommitKey,
                           "OffsetCommitValue", OFFSET_COMMIT_VALUE)
GROUP_METADATA = RecordType("group_metadata", "GroupMetadataKey", GroupMetadataKey,
                            "GroupMetadataValue", GROUP_METADATA_VALUE)

RECORD_TYPES: dict[int, RecordType] = {
    0: OFFSET_COMMIT,
    1: OFFSET_COMMIT,
    2: GROUP_METADATA,
    3: RecordType("consumer_group_metadata", "ConsumerGroupMetadataKey", GroupIdKey,
                  "ConsumerGroupMetadataValue", {0: ConsumerGroupMetadataValue}),
    4: RecordType("consumer_group_partition_metadata", "ConsumerGroupPartitionMetadataKey",
                  GroupIdKey, "ConsumerGroupPartitionMetadataValue",
                  {0: ConsumerGroupPartitionMetadataValue}, (("topics", "TopicMetadata"),)),
    5: RecordType("consumer_group_member_metadata", "ConsumerGroupMemberMetadataKey",
                  GroupIdMemberIdKey, "ConsumerGroupMemberMetadataValue",
                  {0: ConsumerGroupMemberMetadataValue},
                  (("classicMemberMetadata", "ClassicMemberMetadata"),)),
    6: RecordType("consumer_group_target_assignment_metadata",
                  "ConsumerGroupTargetAssignmentMetadataKey", GroupIdKey,
                  "ConsumerGroupTargetAssignmentMetadataValue",
                  {0: ConsumerGroupTargetAssignmentMetadataValue}),
    7: RecordType("consumer_group_target_assignment_member",
                  "ConsumerGroupTargetAssignmentMemberKey", GroupIdMemberIdKey,
                  "ConsumerGroupTargetAssignmentMemberValue",
                  {0: ConsumerGroupTargetAssignmentMemberValue}, (("topicPartitions", "TopicPartition"),)),
    8: RecordType("consumer_group_current_member_assignment",
                  "ConsumerGroupCurrentMemberAssignmentKey", GroupIdMemberIdKey,
                  "ConsumerGroupCurrentMemberAssignmentValue",
                  {0: ConsumerGroupCurrentMemberAssignmentValue}),

    9: RecordType("share_group_partition_metadata", "ShareGroupPartitionMetadataKey", GroupIdKey,
                  "ShareGroupPartitionMetadataValue", {0: ConsumerGroupPartitionMetadataValue},
                  (("topics", "TopicMetadata"),)),
    10: RecordType("share_group_member_metadata", "ShareGroupMemberMetadataKey", GroupIdMemberIdKey,
                   "ShareGroupMemberMetadataValue", {0: ShareGroupMemberMetadataValue}),
    11: RecordType("share_group_metadata", "ShareGroupMetadataKey", GroupIdKey,
                   "ShareGroupMetadataValue", {0: ConsumerGroupMetadataValue}),
    12: RecordType("share_group_target_assignment_metadata",
                   "ShareGroupTargetAssignmentMetadataKey", GroupIdKey,
                   "ShareGroupTargetAssignmentMetadataValue",
                   {0: ConsumerGroupTargetAssignmentMetadataValue}),
    13: RecordType("share_group_target_assignment_member", "ShareGroupTargetAssignmentMemberKey",
                   GroupIdMemberIdKey, "ShareGroupTargetAssignmentMemberValue",
                   {0: ConsumerGroupTargetAssignmentMemberValue}, (("topicPartitions", "TopicPartition"),)),
    14: RecordType("share_group_current_member_assignment",
                   "ShareGroupCurrentMemberAssignmentKey", GroupIdMemberIdKey,
                   "ShareGroupCurrentMemberAssignmentValue",
                   {0: ShareGroupCurrentMemberAssignmentValue}),
    15: RecordType("share_group_state_partition_metadata", "ShareGroupStatePartitionMetadataKey",
                   GroupIdKey, "ShareGroupStatePartitionMetadataValue",
                   {0: ShareGroupStatePartitionMetadataValue}),
    16: RecordType("consumer_group_regular_expression", "ConsumerGroupRegularExpressionKey",
                   ConsumerGroupRegularExpressionKey, "ConsumerGroupRegularExpressionValue",
                   {0: ConsumerGroupRegularExpressionValue}),
}

CONSUMER_PROTOCOL_TYPE = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE


def kafka_read_version(version: int, schemas: Mapping[int, Construct]) -> int:
    """The layout Kafka's generated `read` applies to `version`.

    Generated readers check field presence with `_version >= n` tests and reject no version, so a
    version above the newest reads as the newest and a negative one as v0.
    """
    return min(max(version, 0), max(schemas))


# ---------------------------------------------------------------------------------------------
# JSON-ready values, and the text Kafka prints: JsonConverter field order and presence rules,
# serialized as Jackson's JsonNode.toString does (compact; bytes as padded standard base64)
# ---------------------------------------------------------------------------------------------

UNKNOWN_TAGGED_FIELDS = "_unknownTaggedFields"


def _plain(obj: object) -> object:
    """A parsed construct value as JSON-ready data; known tagged fields join their struct."""
    if isinstance(obj, dict):
        out = {}
        for name, item in obj.items():
            if name == TAGGED:
                out.update(_plain_tagged(item))
            elif not name.startswith("_"):  # construct's own entries, such as "_io"
                out[name] = _plain(item)
        return out
    if isinstance(obj, list):
        return [_plain(item) for item in obj]
    if isinstance(obj, bytes):
        return b64(obj)
    return obj


def _plain_tagged(tagged: dict) -> dict:
    out = {name: _plain(item) for name, item in tagged.items() if name != "_unknown"}
    if "_unknown" in tagged:
        out[UNKNOWN_TAGGED_FIELDS] = [
            {"tag": field["tag"], "data": b64(field["data"])} for field in tagged["_unknown"]
        ]
    return out


def _unknown_tags(obj: object) -> Iterator[int]:
    if isinstance(obj, dict):
        for name, item in obj.items():
            if name == UNKNOWN_TAGGED_FIELDS:
                yield from (field["tag"] for field in item)
            else:
                yield from _unknown_tags(item)
    elif isinstance(obj, list):
        for item in obj:
            yield from _unknown_tags(item)


def _kafka_view(obj: object) -> object:
    """What Kafka's JsonConverters write of JSON-ready data: no unknown tagged fields, consumer
    protocol expansions without their embedded version. (Kafka 4.0 writes the one tagged struct,
    classicMemberMetadata, even when null.)"""
    if isinstance(obj, dict):
        return {
            name: _kafka_view(item["data"] if _is_expansion(name, item) else item)
            for name, item in obj.items()
            if name != UNKNOWN_TAGGED_FIELDS
        }
    if isinstance(obj, list):
        return [_kafka_view(item) for item in obj]
    return obj


def _is_expansion(name: str, item: object) -> bool:
    return name in ("subscription", "assignment") and isinstance(item, dict)


# ---------------------------------------------------------------------------------------------
# Decoding a record
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoordinatorTopic:
    """What differs between the topics a coordinator runtime writes, as DumpLogSegments prints
    them: the record types, and the name its text gives the value version."""

    name: str
    record_types: Mapping[int, RecordType]
    value_version_label: str
    """"version" for the offsets decoder; the share-state decoder writes the value's version
    under "type" (DumpLogSegments.ShareGroupStateMessageParser.jsonString)."""
    decoder: str
    """What DumpLogSegments calls its decoder when it throws on a record without a key."""

    def key_text(self, record_type: int, key_data: dict) -> str:
        return '{"type":"%d","data":%s}' % (record_type, jackson_json(_kafka_view(key_data)))

    def value_text(self, version: int, value_data: dict) -> str:
        return '{"%s":"%d","data":%s}' % (self.value_version_label, version,
                                         jackson_json(_kafka_view(value_data)))


def _describe(exc: ConstructError) -> str:
    """construct's message, then the field it was reading."""
    message = str(exc).split("\n", 1)[-1]
    field = (exc.path or "").replace("(parsing)", "").replace(" -> ", ".").strip(".")
    return f"{message} (in {field})" if field else message


def _java_reason(exc: ConstructError) -> str:
    """The message of the exception Kafka's generated reader throws where construct failed: a
    read past the buffer's end is a BufferUnderflowException, whose message is null, but for the
    bytes of a string or byte array, which ByteBufferAccessor.readArray checks first."""
    if isinstance(exc, ShortArrayError):
        return f"Error reading byte array of {exc.length} byte(s): only {exc.available} byte(s) available"
    if isinstance(exc, StreamError) or "stream read less than specified amount" in str(exc):
        return "null"
    field = (exc.path or "").replace("(parsing)", "").split(" -> ")[-1].strip()
    if isinstance(exc, TooManyElementsError):
        return f"Tried to allocate a collection of size {exc.count}, but there are only {exc.remaining} bytes remaining."
    message = str(exc).rsplit("\n", 1)[-1]
    for ours, theirs in (("non-nullable field was serialized as null", f"non-nullable field {field} was serialized as null"),
                         ("non-nullable field element was serialized as null",
                          f"non-nullable field {field} element was serialized as null")):
        if message.endswith(ours):
            return theirs
    if message.startswith("string field had invalid length "):
        return f"string field {field} had invalid length {message.rsplit(' ', 1)[-1]}"
    return _describe(exc)


def parse_struct(schema: Construct, data: bytes) -> tuple[object, bytes]:
    """Parse a struct from the front of `data`, and return what follows (Kafka ignores it)."""
    stream = io.BytesIO(data)
    parsed = schema.parse_stream(stream)
    return parsed, data[stream.tell():]


def _split_version(data: bytes) -> tuple[int | None, bytes]:
    if len(data) < 2:
        return None, data
    return Int16sb.parse(data[:2]), data[2:]


def _at(offset: int | None) -> str:
    return "" if offset is None else f" at offset {offset}"


def coordinator_value_unreadable(has_key: bool, message: str, offset: int) -> DecodedPayload | None:
    """A coordinator record parser (offsets, share group state) checks the key is there, outside its
    try (Kafka throws), then reads key and value inside it: `key: Error at offset O, skipping. <message>`."""
    if not has_key:
        return None
    return DecodedPayload(None, None, f"Error at offset {offset}, skipping. {message}", None,
                          warning=f"the value cannot be read: {message}")


def decode_coordinator_record(topic: CoordinatorTopic, key: bytes | None, value: bytes | None,
                              offset: int | None = None) -> DecodedPayload:
    """Decode one record a coordinator runtime wrote (CoordinatorRecordSerde's framing).

    `offset` only completes the lines Kafka prints for records it skips ("Unknown record type 9
    at offset 5, skipping."); without it they read "Unknown record type 9, skipping.". When
    Kafka would print "Error at offset O, skipping. Could not read record ... due to: <reason>",
    the reason is construct's, not Java's exception message.

    Raises PayloadError when the key cannot be read; anything wrong past the key is reported in
    `warning`, with the unreadable part kept as base64. A value version newer than any known is
    read, as Kafka reads it, with the newest known layout, and flagged.
    """
    if key is None:
        raise PayloadError(f"{topic.name} record has no key; expected an int16 record type "
                           "and a key struct",
                           kafka_throws=f"Failed to decode message at offset {offset} using {topic.decoder} "
                                        "decoder (message had a missing key)")
    record_type, key_body = _split_version(key)
    if record_type is None:
        raise PayloadError(f"{topic.name} key is {len(key)} byte(s); expected at least 2 "
                           "for its int16 record type",
                           kafka_message="Could not read version from key's buffer.")  # CoordinatorRecordSerde
    kind = topic.record_types.get(record_type)
    if kind is None:
        return _unreadable_record_type(record_type, key_body, value, offset)

    try:
        key_struct, key_trailing = parse_struct(kind.key, key_body)
    except ConstructError as exc:
        raise PayloadError(f"{kind.key_class} (record type {record_type}) does not parse: "
                           f"{_describe(exc)}",
                           kafka_message=f"Could not read record with version {record_type} from key's buffer "
                                         f"due to: {_java_reason(exc)}.") from None
    warnings = []
    key_data = _plain(key_struct)
    key_json = {"type": kind.name, "version": record_type, "data": key_data}
    if key_trailing:
        key_json["trailing"] = b64(key_trailing)
        warnings.append(f"{len(key_trailing)} byte(s) after the {kind.key_class} kept raw")
    key_text = topic.key_text(record_type, key_data)

    if value is None:
        return DecodedPayload(key_json, None, key_text, "<DELETE>", _join(warnings))

    version, value_body = _split_version(value)
    if version is None:
        warnings.append(f"{kind.value_class} is {len(value)} byte(s); expected at least 2 for "
                        "its int16 version")
        return DecodedPayload(key_json, {"version": None, "raw": b64(value)},
                              f"Error{_at(offset)}, skipping. Could not read version from value's "
                              "buffer.", None, _join(warnings))

    value_json, value_text, error = _decode_value(topic, kind, version, value_body, warnings)
    if error is not None:
        key_text = (f"Error{_at(offset)}, skipping. Could not read record with version {version} "
                    f"from value's buffer due to: {error}.")
    return DecodedPayload(key_json, value_json, key_text, value_text, _join(warnings))


def _decode_value(topic: CoordinatorTopic, kind: RecordType, version: int, body: bytes,
                  warnings: list[str]):
    """(JSON-ready value, Kafka's payload text, Kafka's read error or None)."""
    raw = {"version": version, "raw": b64(body)}
    read_version = kafka_read_version(version, kind.values)
    known = version in kind.values
    try:
        struct, trailing = parse_struct(kind.values[read_version], body)
    except ConstructError as exc:
        warnings.append(f"{kind.value_class} v{version} does not parse"
                        f"{'' if known else f' with the v{read_version} layout'}: "
                        f"{_describe(exc)}; kept raw")
        return raw, None, _java_reason(exc)
    data = _value_data(kind, struct, warnings)
    value_json = {"version": version, "data": data}
    refused = None
    if not known:
        # Generated readers take any version, reading fields by `_version >= n`: the newest
        # known layout. Fields a newer version added can only be tagged, or trail.
        value_json["read_as_version"] = read_version
        refused = _struct_refusing(kind, data, version)
        warnings.append(f"{kind.value_class} version {version} is unknown (newest known: "
                        f"{max(kind.values)}); read with the v{read_version} layout"
                        + (f". Kafka fails on it: {refused}" if refused else ", as Kafka reads it"))
    if trailing:
        value_json["trailing"] = b64(trailing)
        warnings.append(f"{len(trailing)} byte(s) after the {kind.value_class} kept raw")
    tags = sorted(set(_unknown_tags(data)))
    if tags:
        warnings.append(f"unknown tagged field(s) {', '.join(map(str, tags))} in the "
                        f"{kind.value_class} kept raw")
    if refused:
        return value_json, None, refused
    return value_json, topic.value_text(version, data), None


def _struct_refusing(kind: RecordType, data: dict, version: int) -> str | None:
    """Kafka's error for a version above the newest when a nested struct refuses it, else None."""
    if version <= max(kind.values):
        return None
    for field, struct_class in kind.version_bounded:
        if data.get(field):  # null and [] read no struct
            return f"Can't read version {version} of {struct_class}"
    return None


def _value_data(kind: RecordType, struct: object, warnings: list[str]) -> dict:
    data = _plain(struct)
    if kind is GROUP_METADATA and data["protocolType"] == CONSUMER_PROTOCOL_TYPE:
        for member in data["members"]:
            for field, schemas in (("subscription", CONSUMER_PROTOCOL_SUBSCRIPTION),
                                   ("assignment", CONSUMER_PROTOCOL_ASSIGNMENT)):
                member[field] = _expand_consumer_protocol(member, field, schemas, warnings)
    return data


def _expand_consumer_protocol(member: dict, field: str, schemas: Mapping[int, Construct],
                              warnings: list[str]) -> object:
    """A member's subscription or assignment bytes as {"version", "data"}; bytes that do not
    parse stay base64, as in Kafka's dump (empty assignments are normal mid-rebalance)."""
    encoded = member[field]
    raw = base64.b64decode(encoded)
    version, body = _split_version(raw)
    if version is None:
        problem = f"{len(raw)} byte(s) cannot hold its int16 version"
    else:
        try:
            struct, trailing = parse_struct(schemas[kafka_read_version(version, schemas)], body)
            problem = None
        except ConstructError as exc:
            problem = _describe(exc)
    if problem is not None:
        if raw:
            warnings.append(f"{field} of member {member['memberId']!r} does not parse as a "
                            f"consumer protocol {field}: {problem}; kept raw")
        return encoded
    expanded = {"version": version, "data": _plain(struct)}
    if trailing:
        expanded["trailing"] = b64(trailing)
    return expanded


def _unreadable_record_type(record_type: int, key_body: bytes, value: bytes | None,
                            offset: int | None) -> DecodedPayload:
    key_json = {"type": "unknown", "version": record_type, "raw": b64(key_body)}
    value_json = None
    if value is not None:
        version, body = _split_version(value)
        value_json = {"version": version, "raw": b64(body)}
    return DecodedPayload(key_json, value_json,
                          f"Unknown record type {record_type}{_at(offset)}, skipping.", None,
                          f"record type {record_type} is unknown; key and value kept raw")


def _join(warnings: list[str]) -> str | None:
    return "; ".join(warnings) if warnings else None


def coordinator_value_version_known(topic: CoordinatorTopic, key: bytes | None, value: bytes | None) -> bool:
    """`PayloadDecoder.value_version_known` of `decode_coordinator_record`: it marks only a value
    of at least 2 bytes after a key of a known record type, whose int16 version that type lacks."""
    if key is None or value is None or len(key) < 2 or len(value) < 2:
        return True
    kind = topic.record_types.get(int.from_bytes(key[:2], "big", signed=True))
    return kind is None or int.from_bytes(value[:2], "big", signed=True) in kind.values


CONSUMER_OFFSETS = CoordinatorTopic("__consumer_offsets", RECORD_TYPES, "version", "offset topic")


def decode(key: bytes | None, value: bytes | None, offset: int | None = None) -> DecodedPayload:
    """Decode one `__consumer_offsets` record (see `decode_coordinator_record`)."""
    return decode_coordinator_record(CONSUMER_OFFSETS, key, value, offset)


register(PayloadDecoder(
    name="consumer-offsets",
    topics=("__consumer_offsets",),
    decode=decode,
    value_unreadable=coordinator_value_unreadable,
    value_version_known=functools.partial(coordinator_value_version_known, CONSUMER_OFFSETS),
    description="group coordinator records: offset commits, group metadata with consumer "
                "protocol subscriptions and assignments, KIP-848 consumer group and KIP-932 "
                "share group records",
))

"""`__remote_log_metadata`: tiered storage's metadata topic (KIP-405), as Kafka 4.0 writes it.

Implements the four messages of `storage/src/main/resources/message/` that
`org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde` reads
(Kafka 4.0, commit b0fb35c): RemoteLogSegmentMetadataRecord (apiKey 0),
RemoteLogSegmentMetadataUpdateRecord (1), RemotePartitionDeleteMetadataRecord (2) and
RemoteLogSegmentMetadataSnapshotRecord (3), each at version 0, flexible. The value framing is
`AbstractApiMessageSerde`'s, as in `__cluster_metadata` (unsigned varint frame version 1, apiKey,
version, the message, nothing after it); keys are null.

The text is what `kafka-dump-log.sh --remote-log-metadata-decoder` prints
(`DumpLogSegments.RemoteMetadataLogMessageParser`): no key, and as payload the `toString()` of the
object the serde's transform builds (`RemoteLogSegmentMetadata{...}`, ...), or, when the serde or
the object's constructor throws, `Error at offset O, skipping. <the exception's message>`.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from . import DecodedPayload, PayloadDecoder, register, value_error_payload
from .cluster_metadata import MetadataParseError, frame_version_known, read_metadata_record
from .jackson import b64
from .metadata_records import (
    UNKNOWN_TAGGED_FIELDS,
    Field,
    MessageSchema,
    struct_refusing_newer_version,
    unknown_tags,
)

# ---------------------------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------------------------


def _topic_id_partition() -> Field:
    return Field("TopicIdPartition", "TopicIdPartitionEntry", fields=(
        Field("Name", "string"),
        Field("Id", "uuid"),
        Field("Partition", "int32"),
    ))


def _segment_leader_epochs() -> Field:
    return Field("SegmentLeaderEpochs", "[]SegmentLeaderEpochEntry", fields=(
        Field("LeaderEpoch", "int32"),
        Field("Offset", "int64"),
    ))


REMOTE_LOG_SEGMENT_METADATA = MessageSchema("RemoteLogSegmentMetadataRecord", "0", (
    Field("RemoteLogSegmentId", "RemoteLogSegmentIdEntry", fields=(
        _topic_id_partition(),
        Field("Id", "uuid"),
    )),
    Field("StartOffset", "int64"),
    Field("EndOffset", "int64"),
    Field("BrokerId", "int32"),
    Field("MaxTimestampMs", "int64"),
    Field("EventTimestampMs", "int64"),
    _segment_leader_epochs(),
    Field("SegmentSizeInBytes", "int32"),
    Field("CustomMetadata", "bytes", nullable="0+"),
    Field("RemoteLogSegmentState", "int8"),
    Field("TxnIndexEmpty", "bool", tag=0, default=False),
), api_key=0)

REMOTE_LOG_SEGMENT_METADATA_UPDATE = MessageSchema("RemoteLogSegmentMetadataUpdateRecord", "0", (
    Field("RemoteLogSegmentId", "RemoteLogSegmentIdEntry", fields=(
        _topic_id_partition(),
        Field("Id", "uuid"),
    )),
    Field("BrokerId", "int32"),
    Field("EventTimestampMs", "int64"),
    Field("CustomMetadata", "bytes", nullable="0+"),
    Field("RemoteLogSegmentState", "int8"),
), api_key=1)

REMOTE_PARTITION_DELETE_METADATA = MessageSchema("RemotePartitionDeleteMetadataRecord", "0", (
    _topic_id_partition(),
    Field("BrokerId", "int32"),
    Field("EventTimestampMs", "int64"),
    Field("RemotePartitionDeleteState", "int8"),
), api_key=2)

REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT = MessageSchema("RemoteLogSegmentMetadataSnapshotRecord", "0", (
    Field("SegmentId", "uuid"),
    Field("StartOffset", "int64"),
    Field("EndOffset", "int64"),
    Field("BrokerId", "int32"),
    Field("MaxTimestampMs", "int64"),
    Field("EventTimestampMs", "int64"),
    _segment_leader_epochs(),
    Field("SegmentSizeInBytes", "int32"),
    Field("CustomMetadata", "bytes", nullable="0+"),
    Field("RemoteLogSegmentState", "int8"),
    Field("TxnIndexEmpty", "bool", tag=0, default=False),
), api_key=3)

VERSION_BOUNDED_STRUCTS = frozenset({"RemoteLogSegmentIdEntry", "TopicIdPartitionEntry",
                                     "SegmentLeaderEpochEntry"})
"""Every nested struct here refuses a version above 0 ("Can't read version V of ..."), so Kafka 4.0
reads no newer version of these records but a snapshot record without leader epochs."""

REMOTE_LOG_METADATA_RECORDS: dict[int, MessageSchema] = {schema.api_key: schema for schema in (
    REMOTE_LOG_SEGMENT_METADATA, REMOTE_LOG_SEGMENT_METADATA_UPDATE,
    REMOTE_PARTITION_DELETE_METADATA, REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT,
)}


class RemoteLogSegmentState(IntEnum):
    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


class RemotePartitionDeleteState(IntEnum):
    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2


# ---------------------------------------------------------------------------------------------
# The objects the serde's transforms build, as their toString() prints them
# ---------------------------------------------------------------------------------------------


class RemoteLogMetadataError(ValueError):
    """What the transform or the object's constructor throws; str() is Java's getMessage()."""


def _state(enum: type[IntEnum], state_id: int) -> IntEnum:
    """`RemoteLogSegmentState.forId`/`RemotePartitionDeleteState.forId` answer null for an unknown
    id, which the constructor's requireNonNull then rejects."""
    if state_id not in enum._value2member_map_:
        raise RemoteLogMetadataError("state can not be null")
    return enum(state_id)


def _topic_id_partition_text(entry: dict) -> str:
    return f"{entry['id']}:{entry['name']}-{entry['partition']}"  # TopicIdPartition.toString


def _leader_epochs_text(entries: list[dict]) -> str:
    """The NavigableMap of epoch -> start offset (a TreeMap: by epoch, the last entry wins)."""
    epochs = {}
    for entry in entries:
        epochs[entry["leaderEpoch"]] = entry["offset"]
    if not epochs:
        raise RemoteLogMetadataError("segmentLeaderEpochs can not be null or empty")
    return "{" + ", ".join(f"{epoch}={epochs[epoch]}" for epoch in sorted(epochs)) + "}"


def _custom_metadata_text(custom: bytes | None) -> str:
    return "Optional.empty" if custom is None else f"Optional[CustomMetadata{{{len(custom)} bytes}}]"


def _segment_metadata_text(data: dict) -> str:
    """The transform builds the metadata in state COPY_SEGMENT_STARTED, then applies the record's
    state as an update: the state is checked last."""
    segment_id = data["remoteLogSegmentId"]
    start, end = data["startOffset"], data["endOffset"]
    if start < 0:
        raise RemoteLogMetadataError(f"Unexpected start offset = {start}. StartOffset for a remote "
                                     "segment cannot be negative")
    if end < start:
        raise RemoteLogMetadataError(f"Unexpected end offset = {end}. EndOffset for a remote segment "
                                     f"cannot be less than startOffset = {start}")
    custom = _custom_metadata_text(data["customMetadata"])
    epochs = _leader_epochs_text(data["segmentLeaderEpochs"])
    state = _state(RemoteLogSegmentState, data["remoteLogSegmentState"])
    return ("RemoteLogSegmentMetadata{remoteLogSegmentId=RemoteLogSegmentId{topicIdPartition="
            f"{_topic_id_partition_text(segment_id['topicIdPartition'])}, id={segment_id['id']}}}, "
            f"startOffset={start}, endOffset={end}, brokerId={data['brokerId']}, "
            f"maxTimestampMs={data['maxTimestampMs']}, eventTimestampMs={data['eventTimestampMs']}, "
            f"segmentLeaderEpochs={epochs}, segmentSizeInBytes={data['segmentSizeInBytes']}, "
            f"customMetadata={custom}, state={state.name}, "
            f"txnIdxEmpty={str(data['txnIndexEmpty']).lower()}}}")


def _segment_update_text(data: dict) -> str:
    segment_id = data["remoteLogSegmentId"]
    custom = _custom_metadata_text(data["customMetadata"])
    state = _state(RemoteLogSegmentState, data["remoteLogSegmentState"])
    return ("RemoteLogSegmentMetadataUpdate{remoteLogSegmentId=RemoteLogSegmentId{topicIdPartition="
            f"{_topic_id_partition_text(segment_id['topicIdPartition'])}, id={segment_id['id']}}}, "
            f"customMetadata={custom}, state={state.name}, "
            f"eventTimestampMs={data['eventTimestampMs']}, brokerId={data['brokerId']}}}")


def _partition_delete_text(data: dict) -> str:
    if data["remotePartitionDeleteState"] not in RemotePartitionDeleteState._value2member_map_:
        raise RemoteLogMetadataError("null")  # a bare requireNonNull: no message
    state = RemotePartitionDeleteState(data["remotePartitionDeleteState"])
    return (f"RemotePartitionDeleteMetadata{{topicPartition="
            f"{_topic_id_partition_text(data['topicIdPartition'])}, state={state.name}, "
            f"eventTimestampMs={data['eventTimestampMs']}, brokerId={data['brokerId']}}}")


def _segment_snapshot_text(data: dict) -> str:
    state = _state(RemoteLogSegmentState, data["remoteLogSegmentState"])
    custom = _custom_metadata_text(data["customMetadata"])
    epochs = _leader_epochs_text(data["segmentLeaderEpochs"])
    return (f"RemoteLogSegmentMetadataSnapshot{{segmentId={data['segmentId']}, "
            f"startOffset={data['startOffset']}, endOffset={data['endOffset']}, "
            f"maxTimestampMs={data['maxTimestampMs']}, segmentLeaderEpochs={epochs}, "
            f"segmentSizeInBytes={data['segmentSizeInBytes']}, customMetadata={custom}, "
            f"state={state.name}, txnIdxEmpty={str(data['txnIndexEmpty']).lower()}}}")


_TEXTS = {0: _segment_metadata_text, 1: _segment_update_text, 2: _partition_delete_text,
          3: _segment_snapshot_text}


@dataclass(frozen=True, slots=True)
class RemoteLogMetadata:
    """One value read as RemoteLogMetadataSerde.deserialize reads it."""

    api_key: int
    version: int
    frame_version: int
    schema: MessageSchema
    fields: dict
    """The message as parsed (construct's view, tagged fields in their trailer)."""
    data: dict
    """Every field, bytes as they are (the transforms' view); tagged fields at their defaults."""

    def kafka_text(self) -> str:
        """The built object's toString(); RemoteLogMetadataError where its constructor throws."""
        return _TEXTS[self.api_key](self.data)


def read_remote_log_metadata(value: bytes) -> RemoteLogMetadata:
    """Raises MetadataParseError where the serde fails, as `read_metadata_record` does."""
    record = read_metadata_record(value, REMOTE_LOG_METADATA_RECORDS)
    data = _with_defaults(record.schema.fields, record.fields)
    return RemoteLogMetadata(record.api_key, record.version, record.frame_version, record.schema,
                             record.fields, data)


def _with_defaults(fields: tuple[Field, ...], parsed: dict) -> dict:
    """A parsed struct as the generated message holds it: tagged fields joined, at their default
    when absent."""
    tagged = parsed["_tagged"]
    out = {}
    for field in fields:
        value = tagged.get(field.json_name, field.default_value) if field.tag is not None \
            else parsed[field.json_name]
        if field.fields and value is not None:
            value = [_with_defaults(field.fields, v) for v in value] if field.is_array \
                else _with_defaults(field.fields, value)
        out[field.json_name] = value
    return out


# ---------------------------------------------------------------------------------------------
# Decoding a record
# ---------------------------------------------------------------------------------------------

NULL_VALUE_MESSAGE = ('Cannot invoke "java.nio.ByteBuffer.remaining()" because the return value of '
                      '"org.apache.kafka.common.record.Record.value()" is null')
"""Java 17's message for the NullPointerException the parser meets on a null value."""


def decode(key: bytes | None, value: bytes | None, offset: int | None = None) -> DecodedPayload:
    """Decode one `__remote_log_metadata` record; never raises for bad bytes.

    `offset` only completes Kafka's text for a record it cannot read ("Error at offset 5,
    skipping. ..."). A value the serde reads but whose object Kafka cannot build (an unknown
    state, a negative start offset, ...) keeps its decoded fields in JSON.
    """
    warnings = []
    key_json = None
    at = "" if offset is None else f" at offset {offset}"
    if key is not None:  # Kafka ignores keys here; keep an unexpected one for the record
        key_json = {"raw": b64(key)}
        warnings.append("remote log metadata records have no key; this one's is kept raw")
    if value is None:
        warnings.append("null value; every remote log metadata record has one")
        return DecodedPayload(key_json, None, None, f"Error{at}, skipping. {NULL_VALUE_MESSAGE}",
                              "; ".join(warnings))
    try:
        record = read_remote_log_metadata(value)
    except MetadataParseError as exc:
        warnings.append(str(exc) + (f" ({exc.detail})" if exc.detail else ""))
        value_json = {**exc.header, "raw": b64(value)}
        return DecodedPayload(key_json, value_json, None, f"Error{at}, skipping. {exc}",
                              "; ".join(warnings))
    schema = record.schema
    data = schema.to_json(record.fields, schema.read_version(record.version), keep_unknown_tags=True)
    value_json = {"type": schema.type_name, "apiKey": record.api_key, "version": record.version,
                  "frameVersion": record.frame_version, "data": data}
    tags = unknown_tags(data)
    if tags:
        warnings.append(f"unknown tagged field(s) {', '.join(map(str, tags))} in the "
                        f"{schema.name} kept raw under {UNKNOWN_TAGGED_FIELDS}")
    refused = None
    if record.version not in schema.layouts:
        read_version = schema.read_version(record.version)
        value_json["read_as_version"] = read_version
        refused = struct_refusing_newer_version(schema, record.fields, record.version,
                                                VERSION_BOUNDED_STRUCTS)
        warnings.append(f"{schema.name} version {record.version} is unknown (newest known: "
                        f"{schema.newest_version}); read with the v{read_version} layout"
                        + (f". Kafka fails on it: Can't read version {record.version} of {refused}"
                           if refused else ", as Kafka reads it"))
    if refused:
        value_text = f"Error{at}, skipping. Failed to deserialize record with type {record.api_key}"
    else:
        try:
            value_text = record.kafka_text()
        except RemoteLogMetadataError as exc:
            warnings.append(f"Kafka cannot build the {schema.name}'s object: {exc}")
            value_text = f"Error{at}, skipping. {exc}"
    return DecodedPayload(key_json, value_json, None, value_text, "; ".join(warnings) or None)


register(PayloadDecoder(
    name="remote-log-metadata",
    topics=("__remote_log_metadata",),
    decode=decode,
    value_unreadable=lambda has_key, message, offset: value_error_payload(
        f"Error at offset {offset}, skipping. {message}", message),
    value_version_known=lambda key, value: frame_version_known(value, REMOTE_LOG_METADATA_RECORDS),
    description="tiered storage metadata: remote segments copied and deleted, partition deletions",
))

"""`__cluster_metadata`: the KRaft metadata log's records (KIP-500, KIP-631).

Implements the value framing of `org.apache.kafka.server.common.serialization.
AbstractApiMessageSerde.read`, as `MetadataRecordSerde` uses it in Kafka 3.8.0: an unsigned varint
frame version (1; 0 was the 2.8 preview), an unsigned varint apiKey (`MetadataRecordType`), an
unsigned varint record version, the record itself (schemas in `metadata_records`), and nothing
after it. Keys are null. Snapshots (`.checkpoint` files) hold the same records; the control
records between them are decoded by `kraft_control`.

The text is what `kafka-dump-log.sh --cluster-metadata-decoder` prints in Kafka 3.8.0
(`DumpLogSegments.ClusterMetadataLogMessageParser`): no key, and as payload either
`{"type":"TOPIC_RECORD","version":0,"data":{...}}` — the generated JsonConverter output, written
by Jackson — or, when the serde fails, `Error at <offset>, skipping. <its message>`.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Mapping

from construct import Construct, ConstructError, Struct

from ..protocol import UVarInt
from . import DecodedPayload, PayloadDecoder, PayloadError, register, value_error_payload
from .metadata_records import (
    METADATA_RECORDS,
    UNKNOWN_TAGGED_FIELDS,
    MessageSchema,
    describe,
    struct_refusing_newer_version,
    unknown_tags,
)
from .jackson import b64, jackson_json

# ---------------------------------------------------------------------------------------------
# Frame
# ---------------------------------------------------------------------------------------------

FRAME_HEADER = Struct(
    "frameVersion" / UVarInt,
    "apiKey" / UVarInt,
    "version" / UVarInt,
)
"""What precedes every metadata record; the record follows and must end the value."""

FRAME_VERSION = 1  # AbstractApiMessageSerde.DEFAULT_FRAME_VERSION

VERSION_BOUNDED_STRUCTS = frozenset({"BrokerEndpoint", "BrokerFeature", "ControllerEndpoint",
                                     "ControllerFeature", "EntityData"})
"""Nested structs whose generated readers refuse a version above their record's newest (Kafka 4.0)."""


# ---------------------------------------------------------------------------------------------
# Typed record
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    frame_version: int
    api_key: int
    version: int
    schema: MessageSchema
    fields: dict
    """The record parsed with the layout of `read_version`."""

    @property
    def read_version(self) -> int:
        return self.schema.read_version(self.version)

    @property
    def is_known_version(self) -> bool:
        return self.version in self.schema.layouts


class MetadataParseError(PayloadError):
    """MetadataRecordSerde's failure; str() is the message of Kafka's MetadataParseException."""

    def __init__(self, message: str, header: dict, detail: str | None = None):
        super().__init__(message)
        self.header = dict(header)
        """The frame fields read before the failure."""
        self.detail = detail
        """What our parser found wrong, where Kafka's message does not say."""


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


def read_metadata_record(value: bytes,
                         records: Mapping[int, MessageSchema] = METADATA_RECORDS) -> MetadataRecord:
    """Read a record value as AbstractApiMessageSerde.read does, failing as it fails. `records`
    are the messages by apiKey: the metadata log's, or another serde's such as tiered storage's."""
    stream = io.BytesIO(value)
    header: dict = {}
    for field in FRAME_HEADER.subcons:  # one at a time: Kafka checks the frame version first
        header[field.name] = _read_short(stream, field.subcon, _KAFKA_NAMES[field.name], header)
        if field.name == "frameVersion":
            _check_frame_version(header)
    api_key, version = header["apiKey"], header["version"]
    schema = records.get(api_key)
    if schema is None:  # MetadataRecordType.fromId's exception, wrapped whole
        raise MetadataParseError("org.apache.kafka.common.errors.UnsupportedVersionException: "
                                 f"Unknown metadata id {api_key}", header)
    try:
        fields = schema.layouts[schema.read_version(version)].parse_stream(stream)
    except ConstructError as exc:
        raise MetadataParseError(f"Failed to deserialize record with type {api_key}", header,
                                 detail=describe(exc)) from None
    garbage = len(value) - stream.tell()
    if garbage:
        raise MetadataParseError(f"Found {garbage} byte(s) of garbage after {api_key}", header)
    return MetadataRecord(header["frameVersion"], api_key, version, schema, fields)


_KAFKA_NAMES = {"frameVersion": "frame version", "apiKey": "type", "version": "version"}
"""The frame fields as Kafka's error messages name them."""


def _read_short(stream: io.BytesIO, varint: Construct, entity: str, header: dict) -> int:
    """AbstractApiMessageSerde.unsignedIntToShort: an unsigned varint that must fit an int16."""
    try:
        value = varint.parse_stream(stream)
    except ConstructError:
        raise MetadataParseError(f"Error while reading {entity}", header) from None
    if value > 0x7FFF:
        raise MetadataParseError(f"Value for {entity} was too large.", header)
    return ((value & 0xFFFF) ^ 0x8000) - 0x8000  # Java's (short) cast of a negative int


def _check_frame_version(header: dict) -> None:
    frame_version = header["frameVersion"]
    if frame_version == 0:
        raise MetadataParseError(
            "Could not deserialize metadata record with frame version 0. Note that upgrades from "
            "the preview release of KRaft in 2.8 to newer versions are not supported.", header)
    if frame_version != FRAME_VERSION:
        raise MetadataParseError(
            "Could not deserialize metadata record due to unknown frame version "
            f"{frame_version}(only frame version {FRAME_VERSION} is supported)", header)


# ---------------------------------------------------------------------------------------------
# Decoding a record
# ---------------------------------------------------------------------------------------------


def decode(key: bytes | None, value: bytes | None, offset: int | None = None) -> DecodedPayload:
    """Decode one `__cluster_metadata` record; never raises for bad bytes.

    `offset` only completes Kafka's text for a record it cannot read ("Error at 5, skipping.
    ..."); without it that text reads "Error, skipping. ...".
    """
    warnings = []
    key_json = None
    if key is not None:  # Kafka ignores keys here; keep an unexpected one for the record
        key_json = {"raw": b64(key)}
        warnings.append("metadata records have no key; this one's is kept raw")
    if value is None:
        warnings.append("null value; every metadata record has one")
    try:
        record = read_metadata_record(value or b"")  # Kafka fails on null as on empty
    except MetadataParseError as exc:
        warnings.append(str(exc) + (f" ({exc.detail})" if exc.detail else ""))
        value_json = None if value is None else _raw_value(exc.header, value)
        at = "" if offset is None else f" at {offset}"
        return DecodedPayload(key_json, value_json, None, f"Error{at}, skipping. {exc}",
                              "; ".join(warnings))

    schema = record.schema
    kafka_data = schema.to_json(record.fields, record.read_version)
    value_text = jackson_json({"type": schema.type_name, "version": record.version,
                               "data": kafka_data})
    header = {"frameVersion": record.frame_version, "apiKey": record.api_key,
              "version": record.version}
    data = schema.to_json(record.fields, record.read_version, keep_unknown_tags=True)
    tags = unknown_tags(data)
    if tags:
        warnings.append(f"unknown tagged field(s) {', '.join(map(str, tags))} in the "
                        f"{schema.name} kept raw under {UNKNOWN_TAGGED_FIELDS}")
    value_json = {"type": schema.type_name, "apiKey": record.api_key, "version": record.version,
                  "frameVersion": record.frame_version, "data": data}
    if not record.is_known_version:  # a newer Kafka's record: read as far as the layout goes
        value_json["read_as_version"] = record.read_version
        refused = struct_refusing_newer_version(schema, record.fields, record.version,
                                                VERSION_BOUNDED_STRUCTS)
        if refused:
            warnings.append(f"{schema.name} version {record.version} is unknown (newest known: "
                            f"{schema.newest_version}); read with the v{record.read_version} "
                            f"layout. Kafka fails on it: Can't read version {record.version} of "
                            f"{refused}")
            at = "" if offset is None else f" at {offset}"
            value_text = f"Error{at}, skipping. Failed to deserialize record with type {record.api_key}"
        else:
            warnings.append(f"{schema.name} version {record.version} is unknown (newest known: "
                            f"{schema.newest_version}); read with the v{record.read_version} "
                            "layout, as Kafka reads it")
    return DecodedPayload(key_json, value_json, None, value_text, "; ".join(warnings) or None)


def _raw_value(header: dict, value: bytes) -> dict:
    """An unreadable value: the frame fields that were read, and all the bytes as base64."""
    schema = METADATA_RECORDS.get(header.get("apiKey"))
    named = {"type": schema.type_name} if schema else {}
    ordered = {name: header[name] for name in ("apiKey", "version", "frameVersion")
               if name in header}
    return {**named, **ordered, "raw": b64(value)}


def frame_version_known(value: bytes | None, records: Mapping[int, MessageSchema] = METADATA_RECORDS) -> bool:
    """`PayloadDecoder.value_version_known` of a value in `read_metadata_record`'s frame: True for a
    frame of one-byte varints naming a known record at a known version, or a value too short to
    hold a frame (none is marked); False for the rest, for `decode` to decide."""
    if value is None or len(value) < 3:
        return True
    frame_version, api_key, version = value[0], value[1], value[2]
    if frame_version >= 0x80 or api_key >= 0x80 or version >= 0x80 or frame_version != FRAME_VERSION:
        return False
    schema = records.get(api_key)
    return schema is not None and version in schema.layouts


register(PayloadDecoder(
    name="cluster-metadata",
    topics=("__cluster_metadata",),
    decode=decode,
    value_unreadable=lambda has_key, message, offset: value_error_payload(f"Error at {offset}, skipping. {message}",
                                                                          message),
    value_version_known=lambda key, value: frame_version_known(value),
    description="KRaft metadata records: topics, partitions, brokers, configs, ACLs, features",
))

"""KRaft metadata records, declared once the way Kafka declares them.

Implements the 25 message schemas of `metadata/src/main/resources/common/metadata/*.json` in
Kafka 3.8.0 (unchanged in 3.9.0 and on trunk as of 2024-10-25), together with what Kafka's
message generator makes of such a declaration: the reader of the generated `*Record` classes and
the writer of the generated `*RecordJsonConverter` classes. The KRaft control records
(`kraft_control`) are declared with the same machinery.

A message is a table of `Field`s: name, type, the versions the field exists in, the versions it
may be null in, and its tag when it is tagged. `MessageSchema.layouts[version]` is the `construct`
of one version, built from the primitives of `kafkalog_tools.protocol`. Every message here is
flexible from version 0 ("flexibleVersions": "0+"), so strings, bytes and arrays are always
compact and every struct ends with a tagged-field trailer; and every tagged field is tagged in
all the versions it exists in.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Collection

from construct import (
    Construct,
    ConstructError,
    Flag,
    Float64b,
    Int8sb,
    Int16sb,
    Int16ub,
    Int32sb,
    Int64sb,
    Struct,
)

from .jackson import b64
from ..protocol import (
    CompactArray,
    CompactBytes,
    CompactNullableBytes,
    CompactNullableString,
    CompactString,
    TaggedFields,
    Uuid,
    uuid_to_text,
)

TAGGED = "_tagged"
"""Name of the tagged-field trailer that ends every struct."""
UNKNOWN_TAGGED_FIELDS = "_unknownTaggedFields"
"""Where JSON-ready data keeps tagged fields the schema does not know (Kafka drops them)."""


# ---------------------------------------------------------------------------------------------
# Declarations: version ranges and fields
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Versions:
    """A version range as Kafka's message JSON writes it: "0", "0-2", "1+" or "none"."""

    lowest: int
    highest: int

    @classmethod
    @functools.cache
    def parse(cls, text: str) -> Versions:
        if text == "none":
            return cls(0, -1)
        if text.endswith("+"):
            return cls(int(text[:-1]), 0x7FFF)
        lowest, _, highest = text.partition("-")
        return cls(int(lowest), int(highest or lowest))

    def __contains__(self, version: int) -> bool:
        return self.lowest <= version <= self.highest


_FIXED_SIZE = {
    "bool": Flag,  # Kafka reads any non-zero byte as true
    "int8": Int8sb,
    "int16": Int16sb,
    "uint16": Int16ub,
    "int32": Int32sb,
    "int64": Int64sb,
    "float64": Float64b,
    "uuid": Uuid,
}
_NULLABLE = {"string": CompactNullableString, "bytes": CompactNullableBytes}
_NOT_NULLABLE = {"string": CompactString, "bytes": CompactBytes}

ZERO_UUID = uuid_to_text(bytes(16))
_TYPE_DEFAULTS = {"bool": False, "float64": 0.0, "uuid": ZERO_UUID, "string": "", "bytes": b""}
_NO_DEFAULT = object()


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message, as in Kafka's JSON: a struct field lists its own `fields`."""

    name: str
    """Kafka's name ("TopicId"); data, layouts and JSON use it with a lower-case first letter."""
    type: str
    """"int32", "string", "uuid", ...; "[]X" for an array of X; a struct's own name for a struct."""
    versions: str = "0+"
    nullable: str = "none"
    tag: int | None = None
    default: object = _NO_DEFAULT
    """Kafka's default; only JSON rendering of tagged fields needs it. Type default if unset."""
    fields: tuple[Field, ...] = ()

    @property
    def json_name(self) -> str:
        return self.name[0].lower() + self.name[1:]  # FieldSpec.camelCaseName

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def default_value(self) -> object:
        if self.default is not _NO_DEFAULT:
            return self.default
        return [] if self.is_array else _TYPE_DEFAULTS.get(self.type, 0)

    def exists_in(self, version: int) -> bool:
        return version in Versions.parse(self.versions)

    def layout(self, version: int) -> Construct:
        nullable = version in Versions.parse(self.nullable)
        if self.is_array:
            return CompactArray(self._element_layout(self.type[2:], version), nullable=nullable)
        if nullable:
            return _NULLABLE[self.type]
        return self._element_layout(self.type, version)

    def _element_layout(self, type_name: str, version: int) -> Construct:
        if self.fields:
            return struct_layout(self.fields, version)
        return _FIXED_SIZE.get(type_name) or _NOT_NULLABLE[type_name]


# ---------------------------------------------------------------------------------------------
# Layouts: a declaration at one version, as a construct
# ---------------------------------------------------------------------------------------------


class _TagNotInVersion(Construct):
    """A tag the message declares for other versions only: Kafka's reader rejects it."""

    def __init__(self, tag: int, version: int):
        super().__init__()
        self.message = f"Tag {tag} is not valid for version {version}"

    def _parse(self, stream, context, path):
        raise ConstructError(self.message, path=path)

    def _build(self, obj, stream, context, path):
        raise ConstructError(self.message, path=path)


def struct_layout(fields: tuple[Field, ...], version: int) -> Struct:
    """The layout of a struct at `version`: untagged fields in order, then the tagged fields."""
    untagged = [f.json_name / f.layout(version)
                for f in fields if f.tag is None and f.exists_in(version)]
    tagged = {
        f.tag: (f.json_name, f.layout(version) if f.exists_in(version)
                else _TagNotInVersion(f.tag, version))
        for f in fields if f.tag is not None
    }
    return Struct(*untagged, TAGGED / TaggedFields(tagged))


def describe(exc: ConstructError) -> str:
    """construct's message, then the field it was reading."""
    message = str(exc).split("\n", 1)[-1]
    field = (exc.path or "").replace("(parsing)", "").replace(" -> ", ".").strip(".")
    return f"{message} (in {field})" if field else message


# ---------------------------------------------------------------------------------------------
# Messages, and their data as the generated JsonConverter writes it
# ---------------------------------------------------------------------------------------------


class MessageSchema:
    """A Kafka message declaration and its layout at each valid version."""

    def __init__(self, name: str, valid_versions: str, fields: tuple[Field, ...],
                 api_key: int | None = None):
        self.name = name
        self.api_key = api_key
        self.fields = fields
        valid = Versions.parse(valid_versions)
        self.layouts = {v: struct_layout(fields, v) for v in range(valid.lowest, valid.highest + 1)}

    @property
    def type_name(self) -> str:
        """The MetadataRecordType constant: MessageGenerator.toSnakeCase, upper-cased."""
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", self.name).upper()

    @property
    def newest_version(self) -> int:
        return max(self.layouts)

    def read_version(self, version: int) -> int:
        """The layout Kafka's generated reader applies to `version`.

        Generated readers test field presence with `_version >= n` and reject no version, so a
        version above the newest reads as the newest (and a negative one as the oldest).
        """
        return min(max(version, min(self.layouts)), self.newest_version)

    def to_json(self, parsed: dict, version: int, keep_unknown_tags: bool = False) -> dict:
        """The parsed struct as the generated JsonConverter writes it at `version`.

        With `keep_unknown_tags`, tagged fields the schema does not know are kept as base64 under
        `_unknownTaggedFields` in their struct (Kafka drops them).
        """
        return _struct_json(self.fields, parsed, version, keep_unknown_tags)


def _struct_json(fields: tuple[Field, ...], parsed: dict, version: int, keep_unknown: bool) -> dict:
    tagged = parsed[TAGGED]
    out = {}
    for f in fields:
        if not f.exists_in(version):
            continue
        if f.tag is None:
            value = parsed[f.json_name]
        elif f.json_name in tagged and tagged[f.json_name] != f.default_value:
            value = tagged[f.json_name]
        else:  # a tagged field is written only when it differs from its default
            continue
        out[f.json_name] = _value_json(f, value, version, keep_unknown)
    if keep_unknown and "_unknown" in tagged:
        out[UNKNOWN_TAGGED_FIELDS] = [{"tag": u["tag"], "data": b64(u["data"])}
                                      for u in tagged["_unknown"]]
    return out


def _value_json(f: Field, value: object, version: int, keep_unknown: bool) -> object:
    if value is None:
        return None
    if f.fields and f.is_array:
        return [_struct_json(f.fields, item, version, keep_unknown) for item in value]
    if f.fields:
        return _struct_json(f.fields, value, version, keep_unknown)
    if f.type == "bytes":
        return b64(value)
    if f.is_array:
        return list(value)
    return value


def unknown_tags(data: object) -> list[int]:
    """The tags kept under `_unknownTaggedFields` anywhere in JSON-ready data."""
    if isinstance(data, dict):
        found = [u["tag"] for u in data.get(UNKNOWN_TAGGED_FIELDS, ())]
        return found + [tag for item in data.values() for tag in unknown_tags(item)]
    if isinstance(data, list):
        return [tag for item in data for tag in unknown_tags(item)]
    return []


# ---------------------------------------------------------------------------------------------
# The metadata records, by apiKey (MetadataRecordType). apiKeys 6 (AccessControlRecord), 13 and
# 16 (RemoveFeatureLevelRecord) belonged to pre-3.0 previews and are no longer defined.
# ---------------------------------------------------------------------------------------------


def _endpoint_fields() -> tuple[Field, ...]:
    return (
        Field("Name", "string"),
        Field("Host", "string"),
        Field("Port", "uint16"),
        Field("SecurityProtocol", "int16"),
    )


def _feature_fields() -> tuple[Field, ...]:
    return (
        Field("Name", "string"),
        Field("MinSupportedVersion", "int16"),
        Field("MaxSupportedVersion", "int16"),
    )


def _metadata(api_key: int, name: str, valid_versions: str, *fields: Field) -> MessageSchema:
    return MessageSchema(name, valid_versions, fields, api_key=api_key)


METADATA_RECORDS: dict[int, MessageSchema] = {schema.api_key: schema for schema in (
    _metadata(
        0, "RegisterBrokerRecord", "0-3",
        Field("BrokerId", "int32"),
        Field("IsMigratingZkBroker", "bool", versions="2+"),
        Field("IncarnationId", "uuid"),
        Field("BrokerEpoch", "int64"),
        Field("EndPoints", "[]BrokerEndpoint", fields=_endpoint_fields()),
        Field("Features", "[]BrokerFeature", fields=_feature_fields()),
        Field("Rack", "string", nullable="0+"),
        Field("Fenced", "bool"),
        Field("InControlledShutdown", "bool", versions="1+"),
        Field("LogDirs", "[]uuid", versions="3+", tag=0),
    ),
    _metadata(
        1, "UnregisterBrokerRecord", "0",
        Field("BrokerId", "int32"),
        Field("BrokerEpoch", "int64"),
    ),
    _metadata(
        2, "TopicRecord", "0",
        Field("Name", "string"),
        Field("TopicId", "uuid"),
    ),
    _metadata(
        3, "PartitionRecord", "0-2",
        Field("PartitionId", "int32"),
        Field("TopicId", "uuid"),
        Field("Replicas", "[]int32"),
        Field("Isr", "[]int32"),
        Field("RemovingReplicas", "[]int32"),
        Field("AddingReplicas", "[]int32"),
        Field("Leader", "int32"),
        Field("LeaderRecoveryState", "int8", tag=0, default=0),
        Field("LeaderEpoch", "int32"),
        Field("PartitionEpoch", "int32"),
        Field("Directories", "[]uuid", versions="1+"),
        Field("EligibleLeaderReplicas", "[]int32", versions="2+", nullable="2+", tag=1,
              default=None),
        Field("LastKnownElr", "[]int32", versions="2+", nullable="2+", tag=2, default=None),
    ),
    _metadata(
        4, "ConfigRecord", "0",
        Field("ResourceType", "int8"),
        Field("ResourceName", "string"),
        Field("Name", "string"),
        Field("Value", "string", nullable="0+"),
    ),
    _metadata(
        5, "PartitionChangeRecord", "0-2",
        Field("PartitionId", "int32"),
        Field("TopicId", "uuid"),
        Field("Isr", "[]int32", nullable="0+", tag=0, default=None),
        Field("Leader", "int32", tag=1, default=-2),
        Field("Replicas", "[]int32", nullable="0+", tag=2, default=None),
        Field("RemovingReplicas", "[]int32", nullable="0+", tag=3, default=None),
        Field("AddingReplicas", "[]int32", nullable="0+", tag=4, default=None),
        Field("LeaderRecoveryState", "int8", tag=5, default=-1),
        Field("Directories", "[]uuid", versions="1+", nullable="1+", tag=8, default=None),
        Field("EligibleLeaderReplicas", "[]int32", versions="2+", nullable="2+", tag=6,
              default=None),
        Field("LastKnownElr", "[]int32", versions="2+", nullable="2+", tag=7, default=None),
    ),
    _metadata(
        7, "FenceBrokerRecord", "0",
        Field("Id", "int32"),
        Field("Epoch", "int64"),
    ),
    _metadata(
        8, "UnfenceBrokerRecord", "0",
        Field("Id", "int32"),
        Field("Epoch", "int64"),
    ),
    _metadata(
        9, "RemoveTopicRecord", "0",
        Field("TopicId", "uuid"),
    ),
    _metadata(
        10, "DelegationTokenRecord", "0",
        Field("Owner", "string"),
        Field("Requester", "string"),
        Field("Renewers", "[]string"),
        Field("IssueTimestamp", "int64"),
        Field("MaxTimestamp", "int64"),
        Field("ExpirationTimestamp", "int64"),
        Field("TokenId", "string"),
    ),
    _metadata(
        11, "UserScramCredentialRecord", "0",
        Field("Name", "string"),
        Field("Mechanism", "int8"),
        Field("Salt", "bytes"),
        Field("StoredKey", "bytes"),
        Field("ServerKey", "bytes"),
        Field("Iterations", "int32"),
    ),
    _metadata(
        12, "FeatureLevelRecord", "0",
        Field("Name", "string"),
        Field("FeatureLevel", "int16"),
    ),
    _metadata(
        14, "ClientQuotaRecord", "0",
        Field("Entity", "[]EntityData", fields=(
            Field("EntityType", "string"),
            Field("EntityName", "string", nullable="0+"),
        )),
        Field("Key", "string"),
        Field("Value", "float64"),
        Field("Remove", "bool"),
    ),
    _metadata(
        15, "ProducerIdsRecord", "0",
        Field("BrokerId", "int32"),
        Field("BrokerEpoch", "int64"),
        Field("NextProducerId", "int64"),
    ),
    _metadata(
        17, "BrokerRegistrationChangeRecord", "0-2",
        Field("BrokerId", "int32"),
        Field("BrokerEpoch", "int64"),
        Field("Fenced", "int8", tag=0),
        Field("InControlledShutdown", "int8", versions="1+", tag=1),
        Field("LogDirs", "[]uuid", versions="2+", tag=2),
    ),
    _metadata(
        18, "AccessControlEntryRecord", "0",
        Field("Id", "uuid"),
        Field("ResourceType", "int8"),
        Field("ResourceName", "string"),
        Field("PatternType", "int8"),
        Field("Principal", "string"),
        Field("Host", "string"),
        Field("Operation", "int8"),
        Field("PermissionType", "int8"),
    ),
    _metadata(
        19, "RemoveAccessControlEntryRecord", "0",
        Field("Id", "uuid"),
    ),
    _metadata(20, "NoOpRecord", "0"),
    _metadata(
        21, "ZkMigrationStateRecord", "0",  # file ZkMigrationRecord.json
        Field("ZkMigrationState", "int8"),
    ),
    _metadata(
        22, "RemoveUserScramCredentialRecord", "0",
        Field("Name", "string"),
        Field("Mechanism", "int8"),
    ),
    _metadata(
        23, "BeginTransactionRecord", "0",
        Field("Name", "string", nullable="0+", tag=0, default=None),
    ),
    _metadata(24, "EndTransactionRecord", "0"),
    _metadata(
        25, "AbortTransactionRecord", "0",
        Field("Reason", "string", nullable="0+", tag=0, default=None),
    ),
    _metadata(
        26, "RemoveDelegationTokenRecord", "0",
        Field("TokenId", "string"),
    ),
    _metadata(
        27, "RegisterControllerRecord", "0",
        Field("ControllerId", "int32"),
        Field("IncarnationId", "uuid"),
        Field("ZkMigrationReady", "bool"),
        Field("EndPoints", "[]ControllerEndpoint", fields=_endpoint_fields()),
        Field("Features", "[]ControllerFeature", fields=_feature_fields()),
    ),
)}


def struct_refusing_newer_version(schema: MessageSchema, parsed: dict, version: int,
                                  bounded: Collection[str]) -> str | None:
    """The struct Kafka's reader fails on when it reads `version`, newer than the schema's newest.

    A generated message reads any version with its newest layout, but some of its nested struct
    classes (`bounded`, by Kafka's struct name; which ones is the generator's choice, read off the
    classes of Kafka 4.0) throw "Can't read version V of <Struct>" above the message's newest
    version. The first such struct the reader meets, if any is present, is the one named.
    """
    if version <= schema.newest_version:
        return None
    for f in schema.fields:
        struct_name = f.type[2:] if f.is_array else f.type
        if f.tag is not None or struct_name not in bounded or not f.exists_in(schema.newest_version):
            continue
        value = parsed[f.json_name]
        if value:  # a struct, or a non-empty array of them; null and [] read no struct
            return struct_name
    return None

"""KRaft control records: the values of control batches in `__cluster_metadata` and its snapshots.

Implements the value schemas of control record types 2-6 (`ControlRecordType`, Kafka 3.8.0):
`LeaderChangeMessage` (KIP-595), `SnapshotHeaderRecord` and `SnapshotFooterRecord` (KIP-630),
`KRaftVersionRecord` and `VotersRecord` (KIP-853), from
clients/src/main/resources/common/message/*.json; LeaderChangeMessage v1 (VoterDirectoryId) is
from 3.9.0. Each is a flexible message whose first field is its own Version, and the value holds
nothing else.

Kafka's `ControlRecordUtils` (3.8 and 3.9) reads every one of them at version 0, whatever that
field says, and ignores bytes left over. Here a message is read at the version it declares when
that version is known, otherwise at version 0: the same for everything Kafka writes.

The text is what `DumpLogSegments` (3.8.0) prints after a control record's metadata:
` SnapshotHeader {json}`, ` SnapshotFooter {json}`, ` KRaftVersion {json}`, ` KRaftVoters {json}`
(the generated JsonConverter output, written by Jackson), and for LEADER_CHANGE and unknown types
` controlType: LEADER_CHANGE(2)` / ` controlType: UNKNOWN(9)` without reading the value.
ABORT and COMMIT markers are decoded in `formats.control`.
"""
from __future__ import annotations

import io
from dataclasses import dataclass

from construct import ConstructError, Int16sb

from . import PayloadError
from .jackson import b64, jackson_json
from .metadata_records import Field, MessageSchema, describe

# ---------------------------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------------------------

_LEADER_CHANGE_VOTER = (
    Field("VoterId", "int32"),
    Field("VoterDirectoryId", "uuid", versions="1+"),
)

LEADER_CHANGE_MESSAGE = MessageSchema("LeaderChangeMessage", "0-1", (
    Field("Version", "int16"),
    Field("LeaderId", "int32"),
    Field("Voters", "[]Voter", fields=_LEADER_CHANGE_VOTER),
    Field("GrantingVoters", "[]Voter", fields=_LEADER_CHANGE_VOTER),
))

SNAPSHOT_HEADER_RECORD = MessageSchema("SnapshotHeaderRecord", "0", (
    Field("Version", "int16"),
    Field("LastContainedLogTimestamp", "int64"),
))

SNAPSHOT_FOOTER_RECORD = MessageSchema("SnapshotFooterRecord", "0", (
    Field("Version", "int16"),
))

KRAFT_VERSION_RECORD = MessageSchema("KRaftVersionRecord", "0", (
    Field("Version", "int16"),
    Field("KRaftVersion", "int16"),
))

VOTERS_RECORD = MessageSchema("VotersRecord", "0", (
    Field("Version", "int16"),
    Field("Voters", "[]Voter", fields=(
        Field("VoterId", "int32"),
        Field("VoterDirectoryId", "uuid"),
        Field("Endpoints", "[]Endpoint", fields=(
            Field("Name", "string"),
            Field("Host", "string"),
            Field("Port", "uint16"),
        )),
        Field("KRaftVersionFeature", "KRaftVersionFeature", fields=(
            Field("MinSupportedVersion", "int16"),
            Field("MaxSupportedVersion", "int16"),
        )),
    )),
))


@dataclass(frozen=True, slots=True)
class ControlType:
    name: str
    """The ControlRecordType constant."""
    schema: MessageSchema
    label: str | None
    """What DumpLogSegments prints before the value's JSON; None when it prints only the type."""


CONTROL_TYPES = {
    2: ControlType("LEADER_CHANGE", LEADER_CHANGE_MESSAGE, None),
    3: ControlType("SNAPSHOT_HEADER", SNAPSHOT_HEADER_RECORD, "SnapshotHeader"),
    4: ControlType("SNAPSHOT_FOOTER", SNAPSHOT_FOOTER_RECORD, "SnapshotFooter"),
    5: ControlType("KRAFT_VERSION", KRAFT_VERSION_RECORD, "KRaftVersion"),
    6: ControlType("KRAFT_VOTERS", VOTERS_RECORD, "KRaftVoters"),
}
TRANSACTION_MARKERS = {0: "ABORT", 1: "COMMIT"}
"""Control types that are not KRaft messages (EndTransactionMarker values)."""


# ---------------------------------------------------------------------------------------------
# Typed record
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControlValue:
    kind: ControlType
    read_version: int
    fields: dict
    trailing: bytes
    """Bytes after the message, which Kafka ignores."""


# ---------------------------------------------------------------------------------------------
# Reading and rendering
# ---------------------------------------------------------------------------------------------


def read_control_value(control_type: int, value: bytes | None) -> ControlValue:
    """Read the value of a KRaft control record; PayloadError when it cannot be read."""
    kind = _kraft_type(control_type)
    if value is None:
        raise PayloadError(f"{kind.name} control record has no value")
    if len(value) < Int16sb.sizeof():
        raise PayloadError(f"{kind.schema.name} is {len(value)} byte(s); it starts with an "
                           "int16 Version")
    declared = Int16sb.parse(value)
    read_version = declared if declared in kind.schema.layouts else 0
    stream = io.BytesIO(value)
    try:
        fields = kind.schema.layouts[read_version].parse_stream(stream)
    except ConstructError as exc:
        raise PayloadError(f"{kind.schema.name} v{read_version} does not parse: "
                           f"{describe(exc)}") from None
    return ControlValue(kind, read_version, fields, value[stream.tell():])


def decode_control_value(control_type: int, value: bytes | None) -> dict:
    """The message as JSON-ready data, with the JsonConverter's names and presence rules.

    Tagged fields the schema does not know are kept under `_unknownTaggedFields`, and bytes after
    the message under `_trailing`, both as base64.
    """
    control = read_control_value(control_type, value)
    data = control.kind.schema.to_json(control.fields, control.read_version,
                                       keep_unknown_tags=True)
    if control.trailing:
        data["_trailing"] = b64(control.trailing)
    return data


def control_text(control_type: int, value: bytes | None) -> str:
    """What DumpLogSegments prints for a KRaft control record after its metadata."""
    if control_type not in CONTROL_TYPES and control_type not in TRANSACTION_MARKERS:
        return f" controlType: UNKNOWN({control_type})"  # ControlRecordType.fromTypeId's default
    kind = _kraft_type(control_type)
    if kind.label is None:
        return f" controlType: {kind.name}({control_type})"
    control = read_control_value(control_type, value)
    data = kind.schema.to_json(control.fields, control.read_version)
    return f" {kind.label} {jackson_json(data)}"


def _kraft_type(control_type: int) -> ControlType:
    if control_type in TRANSACTION_MARKERS:
        raise PayloadError(f"{TRANSACTION_MARKERS[control_type]} is a transaction marker, not a "
                           "KRaft control record")
    if control_type not in CONTROL_TYPES:
        raise PayloadError(f"control record type {control_type} is unknown (KRaft types: 2-6)")
    return CONTROL_TYPES[control_type]

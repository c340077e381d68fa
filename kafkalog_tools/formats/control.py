"""Control records (KIP-98 transaction markers, KIP-595/853 KRaft control records).

Source: clients/.../record/ControlRecordType.java, EndTransactionMarker.java, ControlRecordUtils.java.
A control batch's records carry a key of `version:int16, type:int16`. ABORT (0) and COMMIT (1)
values are an EndTransactionMarker: `version:int16, coordinatorEpoch:int32`. The KRaft types
(2-6) carry flexible messages, decoded by `payloads.kraft_control` when it is available.
"""
from __future__ import annotations

from construct import ConstructError, Int16sb, Int32sb, Struct, StreamError

from ..errors import CorruptDataError
from ..schema import derive_struct
from .batch import ControlRecord

# ---------------------------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------------------------

CONTROL_KEY = Struct("version" / Int16sb, "type" / Int16sb)
END_TXN_MARKER = Struct("version" / Int16sb, "coordinator_epoch" / Int32sb)
_CONTROL_KEY = derive_struct(CONTROL_KEY)
_END_TXN_MARKER = derive_struct(END_TXN_MARKER)
"""The two as `struct` layouts: every transaction marker is read, and construct takes ~50 times as long."""

CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}


class ControlRecordError(CorruptDataError, ValueError):
    """A control record's key or value that does not parse."""


class MissingControlKeyError(ControlRecordError):
    """A control record with a null key: where Kafka reads it as a transaction marker
    (ControlRecordType.parse), a NullPointerException, which nothing catches."""


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------


def parse_control(key: bytes | None, value: bytes | None) -> ControlRecord:
    """Decode a control record as ControlRecordType.parse and EndTransactionMarker.deserialize do."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise (ControlRecordError if key is not None else MissingControlKeyError)(
            f"control record key is {0 if key is None else len(key)} bytes; a control key needs 4"
        )
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise ControlRecordError(f"Invalid version found for control record: {version}")
    record = ControlRecord(type_id=type_id, name=CONTROL_TYPES.get(type_id, "UNKNOWN"), version=version)
    if type_id in (0, 1):
        if value is None or len(value) < _END_TXN_MARKER.size:
            raise ControlRecordError(
                f"transaction marker value is {0 if value is None else len(value)} bytes; it needs 6"
            )
        record.coordinator_epoch = _END_TXN_MARKER.unpack_from(value)[1]
    elif 2 <= type_id <= 6:
        _decode_kraft_value(record, value)
    return record


def _decode_kraft_value(record: ControlRecord, value: bytes | None) -> None:
    try:
        from ..payloads.kraft_control import decode_control_value
    except ImportError:
        return
    try:
        record.data = decode_control_value(record.type_id, value)
    except (ValueError, ConstructError, StreamError) as exc:
        record.error = str(exc)

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


class NullControlFieldError(ControlRecordError):
    """A control record with a null key, or a transaction marker with a null value: where Kafka
    reads it (ControlRecordType.parse, EndTransactionMarker.deserialize), a NullPointerException,
    which nothing catches."""


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------


def parse_control(key: bytes | None, value: bytes | None) -> ControlRecord:
    """Decode a control record as ControlRecordType.parse and EndTransactionMarker.deserialize do,
    raising their complaints in their words. A marker whose value cannot be read raises with the
    record it has so far (`error.control`): its type is known, as Kafka's is."""
    if key is None:
        raise NullControlFieldError("control record key is null (a NullPointerException in Kafka)")
    if len(key) < _CONTROL_KEY.size:
        raise ControlRecordError("Invalid value size found for end control record key. Must have at least "
                                 f"{_CONTROL_KEY.size} bytes, but found only {len(key)}")
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise ControlRecordError(f"Invalid version found for control record: {version}. May indicate data corruption")
    record = ControlRecord(type_id=type_id, name=CONTROL_TYPES.get(type_id, "UNKNOWN"), version=version)
    if type_id in (0, 1):
        _decode_marker_value(record, value)
    elif 2 <= type_id <= 6:
        _decode_kraft_value(record, value)
    return record


def _decode_marker_value(record: ControlRecord, value: bytes | None) -> None:
    if value is None:
        error = NullControlFieldError("transaction marker value is null (a NullPointerException in Kafka)")
    elif len(value) < _END_TXN_MARKER.size:
        error = ControlRecordError("Invalid value size found for end transaction marker. Must have at least "
                                   f"{_END_TXN_MARKER.size} bytes, but found only {len(value)}")
    elif (marker := _END_TXN_MARKER.unpack_from(value))[0] < 0:
        error = ControlRecordError(f"Invalid version found for end transaction marker: {marker[0]}. "
                                   "May indicate data corruption")
    else:
        record.coordinator_epoch = marker[1]
        return
    record.error = error.message
    error.control = record
    raise error


def _decode_kraft_value(record: ControlRecord, value: bytes | None) -> None:
    try:
        from ..payloads.kraft_control import decode_control_value
    except ImportError:
        return
    try:
        record.data = decode_control_value(record.type_id, value)
    except (ValueError, ConstructError, StreamError) as exc:
        record.error = str(exc)

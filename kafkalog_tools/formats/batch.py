"""The typed records every log format decodes into: a `Batch` (one shallow entry of a segment) and
its `Record`s.

A V2 record batch and a legacy V0/V1 message (or compressed wrapper) both become a `Batch`, with
the accessors Kafka's `RecordBatch` interface gives them (legacy entries report -1 for producer
fields, as `AbstractLegacyRecordBatch` does). Records are decoded only when asked for.
"""
from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

from ..codecs import name_of
from ..errors import CorruptDataError

NO_TIMESTAMP = -1
TIMESTAMP_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}
INT32_MAX = 0x7FFFFFFF


def java_long(value: int) -> int:
    """`value` as Java's long arithmetic leaves it: wrapped into [-2^63, 2^63) (a hostile base offset
    near Long.MAX plus a delta overflows in Kafka too)."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def java_int(value: int) -> int:
    """`value` wrapped into [-2^31, 2^31), as Java's int arithmetic leaves it."""
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def increment_sequence(sequence: int, increment: int) -> int:
    """DefaultRecordBatch.incrementSequence: sequences wrap past Int.MAX to 0. In Java's int
    arithmetic: with a negative increment (a hostile last offset delta) `Int.MAX - increment`
    overflows, and Kafka then takes the wrapping branch (found by the differential run against Kafka)."""
    if sequence > java_int(INT32_MAX - increment):
        return java_int(increment - (INT32_MAX - sequence) - 1)
    return java_int(sequence + increment)


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """DefaultRecordBatch.lastSequence: no sequence only when the base sequence is exactly -1 (any
    other negative base sequence is incremented like the rest)."""
    return -1 if base_sequence == -1 else increment_sequence(base_sequence, last_offset_delta)


@dataclass(slots=True)
class ControlRecord:
    """The key (and, where understood, the value) of a record in a control batch."""

    type_id: int
    name: str
    version: int
    coordinator_epoch: int | None = None
    """ABORT/COMMIT markers only (EndTransactionMarker)."""
    data: dict | None = None
    """KRaft control values (LEADER_CHANGE, SNAPSHOT_HEADER, ...), decoded."""
    error: str | None = None
    """Set when the value could not be decoded; the record itself is still reported."""


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[bytes, bytes | None]]
    size: int
    """Bytes the record occupies: for V2 the length varint and the record; for legacy messages
    the 12-byte log overhead and the message (Kafka's Record.sizeInBytes)."""
    sequence: int = -1
    attributes: int = 0
    position: int | None = None
    """File position of the record, when it is not inside a compressed payload."""
    legacy_magic: int | None = None
    legacy_crc: int | None = None
    legacy_crc_valid: bool | None = None
    legacy_attributes: int | None = None
    legacy_null_sizes: tuple[int, int] | None = None
    """A V0/V1 message's key and value size fields when one is below -1 (both are null then as at
    -1, but Kafka reports the field as it is), or when the key or value cannot be read
    (an `UnreadRecord`)."""
    control: ControlRecord | None = None
    control_error: CorruptDataError | None = field(default=None, compare=False)
    """A record of a control batch whose key or marker value cannot be read: `control` is None.
    Kafka's iterator returns such a record; what reads its control key throws (see
    `Batch.records_reading_controls`)."""

    @property
    def key_size(self) -> int:
        if self.key is not None:
            return len(self.key)
        return -1 if self.legacy_null_sizes is None else self.legacy_null_sizes[0]

    @property
    def value_size(self) -> int:
        if self.value is not None:
            return len(self.value)
        return -1 if self.legacy_null_sizes is None else self.legacy_null_sizes[1]


@dataclass(slots=True)
class UnreadRecord(Record):
    """A V0/V1 message whose key or value cannot be read, with only its size fields
    (`legacy_null_sizes`, read by position as LegacyRecord.keySize() and valueSize() do; None when
    they cannot be read either, or the timestamp): Kafka's iterator returns it, kafka-dump-log
    prints its record line up to them, and what reads its key or value throws."""


@dataclass(slots=True, eq=False)
class Batch(ABC):
    """One shallow entry of a segment: a V2 record batch or a legacy message / wrapper."""

    path: str
    position: int
    size: int
    """sizeInBytes: the 12-byte offset+length prefix included."""
    last_offset: int
    magic: int
    crc: int
    crc_valid: bool
    compression_id: int
    timestamp_type: str
    max_timestamp: int
    attributes: int
    count: int | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    last_sequence: int = -1
    is_transactional: bool = False
    is_control: bool = False
    partition_leader_epoch: int = -1
    delete_horizon_ms: int | None = None
    base_timestamp: int = NO_TIMESTAMP
    _records: list[Record] | None = field(default=None, repr=False)
    _records_error: CorruptDataError | None = field(default=None, repr=False)
    """Why decoding failed, kept so a second caller does not decompress a bomb again."""

    @property
    @abstractmethod
    def base_offset(self) -> int:
        """First offset: a V2 header field; for a legacy wrapper, its first inner message."""

    @property
    def compression(self) -> str:
        return name_of(self.compression_id)

    @property
    def end(self) -> int:
        """File position just past this batch."""
        return self.position + self.size

    @abstractmethod
    def records(self) -> list[Record]:
        """Decode (and decompress) the batch's records; raises CorruptDataError."""

    def records_reading_controls(self) -> list[Record]:
        """The records as Kafka's readers of control keys see them (kafka-dump-log, the loader's
        ProducerAppendInfo, the cleaner): they throw at the first control record whose key or marker
        cannot be read (ControlRecordType.parse, EndTransactionMarker.deserialize), having read
        the records before it. So the records, or that record's error, carrying those records."""
        if not self.is_control:
            return self.records()
        try:
            records = self.records()
        except CorruptDataError as exc:  # a later record cannot be read: Kafka's reader stops earlier
            records = getattr(exc, "records_before", None) or []
            if not any(r.control_error is not None for r in records):
                raise
        unreadable = next((r.control_error for r in records if r.control_error is not None), None)
        if unreadable is not None:
            raise copy.copy(unreadable)  # a copy: the kept error stays free of this traceback
        return records

    def _decoded_once(self, decode: Callable[[], list[Record]]) -> list[Record]:
        """The records, decoded on the first call; a failure is remembered and raised again."""
        if self._records is None:
            if self._records_error is not None:
                raise self._records_error
            try:
                self._records = decode()
            except CorruptDataError as exc:
                # a copy: the raised error's traceback holds the decoder's frames (a bomb's output)
                self._records_error = copy.copy(exc)
                raise
        return self._records

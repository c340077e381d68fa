"""Legacy message sets V0 and V1 (magic 0 and 1, Kafka < 0.11 formats).

Source: clients/.../record/LegacyRecord.java, AbstractLegacyRecordBatch.java (DeepRecordsIterator).
Each log entry is `offset:int64, message_size:int32` and a message: `crc:uint32` (CRC-32 of
magic..end), `magic:int8`, `attributes:int8`, `timestamp:int64` (V1 only), then int32-sized key
and value (negative = null). A compressed message (codec bits != 0) is a wrapper whose value is a
compressed message set of inner entries. The wrapper's offset is that of its LAST inner message;
V1 inner offsets are relative (absolute = wrapper offset - last inner offset + inner offset, with
the librdkafka quirk that a wrapper offset of 0 means base 0); V0 inner offsets are absolute.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

from construct import Bytes, If, Int8sb, Int32sb, Int32ub, Int64sb, Prefixed, Struct, Terminated, this

from .. import codecs
from ..errors import CorruptDataError, DecompressionError
from ..protocol import NullableBytes32
from ..schema import derive_struct
from .batch import NO_TIMESTAMP, TIMESTAMP_TYPES, Batch, Record, UnreadRecord, java_long

# ---------------------------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------------------------

LOG_ENTRY_HEADER = Struct("offset" / Int64sb, "message_size" / Int32sb)

MESSAGE_PREFIX = Struct(
    "crc" / Int32ub,  # CRC-32 (zlib) of bytes [magic, end of value)
    "magic" / Int8sb,
    "attributes" / Int8sb,  # bits 0-2 codec, bit 3 (V1) LogAppendTime
)

MESSAGE = Struct(
    *MESSAGE_PREFIX.subcons,
    "timestamp" / If(this.magic != 0, Int64sb),  # LegacyRecord: every magic but 0 has V1's layout
    "key" / NullableBytes32,
    "value" / NullableBytes32,
    Terminated,
)

LOG_ENTRY = Struct("offset" / Int64sb, "message" / Prefixed(Int32sb, MESSAGE))

SIZE_FIELDS = Struct(  # MESSAGE's key and value size fields as they are (the schema reads any negative as a null)
    *MESSAGE_PREFIX.subcons,
    "timestamp" / If(this.magic != 0, Int64sb),
    "key_size" / Int32sb,
    "key" / If(this.key_size > 0, Bytes(this.key_size)),
    "value_size" / Int32sb,
)

ENTRY_PREFIX = derive_struct(Struct(*LOG_ENTRY_HEADER.subcons, *MESSAGE_PREFIX.subcons))
TIMESTAMP = derive_struct(Struct("timestamp" / Int64sb))
SIZE = derive_struct(Struct("size" / Int32sb))

LOG_OVERHEAD = 12
RECORD_OVERHEAD_V0 = 14
CRC_START = 16  # file-relative start of the CRC-covered bytes (the magic byte)
ATTR_CODEC = 0x07
ATTR_LOG_APPEND_TIME = 0x08
LAST_LEGACY_CODEC = 3
"""lz4: V0/V1 wrappers know no later codec (zstd came with V2)."""


# ---------------------------------------------------------------------------------------------
# One message, as the fast path reads it
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Message:
    offset: int
    size: int  # 12 + message_size
    crc: int
    crc_valid: bool
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    error: str | None = None
    """Why the key or value cannot be read (`lenient` reads only): Kafka reads them on demand."""
    null_sizes: tuple[int, int] | None = None
    """The key and value size fields when one of them is below -1 (a null, for Kafka too, but
    LegacyRecord.keySize() and valueSize() report the field as it is); None otherwise."""
    size_fields: tuple[int, int] | None = None
    """With `error`: the key and value size fields as LegacyRecord.keySize() and valueSize() read
    them, by position (the value's after max(0, key size) bytes), when both lie in the message -
    kafka-dump-log prints them before it reads the key; None otherwise."""


def read_message(buf, pos: int, end: int, lenient: bool = False) -> Message:
    """The message whose log entry starts at `pos`; its 12+size bytes must lie before `end`.

    Raises ValueError naming what is wrong; callers add the file and position. `lenient`: a key
    or value size that runs past the message is kept as the message's `error` instead, as Kafka's
    LegacyRecord reads its header fields (offset, size, CRC, magic, attributes, timestamp) without
    touching the key and value - its recovery and kafka-dump-log's batch line accept such a message.
    """
    offset, message_size, crc, magic, attributes = ENTRY_PREFIX.unpack_from(buf, pos)
    if message_size < RECORD_OVERHEAD_V0:
        raise ValueError(f"Record size is less than the minimum record overhead ({RECORD_OVERHEAD_V0}): {message_size}")
    message_end = pos + LOG_OVERHEAD + message_size
    if message_end > end:
        raise ValueError(f"message of {message_size} bytes runs past the end of its message set")
    cursor = pos + ENTRY_PREFIX.size
    if magic != 0:  # LegacyRecord reads every magic but 0 (a hostile -1, say) with V1's layout
        if cursor + 8 > message_end:
            raise ValueError(f"V1 message of {message_size} bytes is too small for its timestamp")
        (timestamp,) = TIMESTAMP.unpack_from(buf, cursor)
        cursor += 8
    else:
        timestamp = NO_TIMESTAMP
    key = value = error = size_fields = None
    key_size = value_size = -1
    sizes_at = cursor
    try:
        key, key_size, cursor = _sized(buf, cursor, message_end, "key")
        # Bytes after the value are not an error to Kafka (LegacyRecord reads fields by position);
        # they are covered by the CRC like the rest.
        value, value_size, _ = _sized(buf, cursor, message_end, "value")
    except ValueError as exc:
        if not lenient:
            raise
        error = str(exc)
        size_fields = _positional_sizes(buf, sizes_at, message_end)
    computed = zlib.crc32(memoryview(buf)[pos + CRC_START : message_end])
    null_sizes = (key_size, value_size) if min(key_size, value_size) < -1 else None
    return Message(offset, LOG_OVERHEAD + message_size, crc, computed == crc, magic, attributes,
                   timestamp, key, value, error, null_sizes, size_fields)


def value_overrun(record) -> str | None:
    """What LegacyRecord.value() throws with on a message Kafka's iterator returned (an
    `UnreadRecord`) whose size fields lie in it but whose value runs past it: ByteBuffer.limit's
    IllegalArgumentException, its capacity the bytes after the value size field. None otherwise (a
    size field it cannot read throws before kafka-dump-log prints the record's line)."""
    if record.legacy_null_sizes is None:
        return None
    key_size, value_size = record.legacy_null_sizes
    value_at = ENTRY_PREFIX.size + (0 if record.legacy_magic == 0 else TIMESTAMP.size) + 4 + max(0, key_size)
    room = record.size - value_at - 4
    return f"newLimit > capacity: ({value_size} > {room})" if value_size > room else None


def _positional_sizes(buf, at: int, end: int) -> tuple[int, int] | None:
    if at + 4 > end:
        return None
    (key_size,) = SIZE.unpack_from(buf, at)
    value_at = at + 4 + max(0, key_size)
    if value_at + 4 > end:  # Java: an IndexOutOfBoundsException
        return None
    return key_size, SIZE.unpack_from(buf, value_at)[0]


def _sized(buf, cursor: int, end: int, what: str) -> tuple[bytes | None, int, int]:
    """(the bytes or None, the size field, the cursor after them)."""
    if cursor + 4 > end:
        raise ValueError(f"message ends before its {what} size")
    (size,) = SIZE.unpack_from(buf, cursor)
    cursor += 4
    if size < 0:
        return None, size, cursor
    if cursor + size > end:
        raise ValueError(f"{what} of {size} bytes runs past the end of the message")
    return bytes(buf[cursor : cursor + size]), size, cursor + size


def _header_only(buf, pos: int, error: str) -> Message:
    """A message known by its entry header, CRC, magic and attributes alone."""
    offset, message_size, crc, magic, attributes = ENTRY_PREFIX.unpack_from(buf, pos)
    message_end = pos + LOG_OVERHEAD + message_size
    computed = zlib.crc32(memoryview(buf)[pos + CRC_START : message_end])
    return Message(offset, LOG_OVERHEAD + message_size, crc, computed == crc, magic, attributes, NO_TIMESTAMP,
                   None, None, error)


# ---------------------------------------------------------------------------------------------
# Typed batch: one shallow entry
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class LegacyBatch(Batch):
    message: Message | None = None
    decompress_limit: int = codecs.DEFAULT_LIMIT

    @property
    def base_offset(self) -> int:
        if self.compression_id == 0:
            return self.last_offset
        try:
            return self.records()[0].offset
        except CorruptDataError as exc:
            # AbstractLegacyRecordBatch.baseOffset reads the first inner record's offset only
            first_offset = getattr(exc, "first_offset", None)
            if first_offset is None:
                raise
            return first_offset

    def records(self) -> list[Record]:
        """The records; a message whose key or value cannot be read raises CorruptDataError with
        the records Kafka's iterator returns before it (`records_before`) and, from it on, those
        kafka-dump-log prints a line for (`records_unread`: see `_printed_from`)."""
        if self._records is not None:
            return self._records
        return self._decoded_once(
            lambda: self._deep_records() if self.compression_id else [self._as_record(self._readable(), self.position)])

    def _readable(self) -> Message:
        """The uncompressed message, once its key and value are known to be readable."""
        message = self.message
        if message.error is not None:
            error = CorruptDataError(f"Record is corrupt: {message.error}", path=self.path, position=self.position)
            error.records_unread = [self._unread_record(message, self.position, message.offset)]
            raise error
        return message

    def _as_record(self, message: Message, position: int | None, offset: int | None = None) -> Record:
        return Record(
            offset=message.offset if offset is None else offset,
            timestamp=self._timestamp_of(message),
            key=message.key,
            value=message.value,
            headers=[],
            size=message.size,
            attributes=message.attributes,
            position=position,
            legacy_magic=message.magic,
            legacy_crc=message.crc,
            legacy_crc_valid=message.crc_valid,
            legacy_attributes=message.attributes,
            legacy_null_sizes=message.null_sizes,
        )

    def _unread_record(self, message: Message, position: int | None, offset: int) -> UnreadRecord:
        return UnreadRecord(offset, self._timestamp_of(message), None, None, [], message.size, attributes=message.attributes,
                            position=position, legacy_magic=message.magic, legacy_crc=message.crc,
                            legacy_crc_valid=message.crc_valid, legacy_attributes=message.attributes,
                            legacy_null_sizes=message.size_fields)

    def _timestamp_of(self, message: Message) -> int:
        """LegacyRecord.timestamp(): V0 has none; a LogAppendTime wrapper overrides inner ones."""
        if message.magic == 0:
            return NO_TIMESTAMP
        if self.timestamp_type == "LogAppendTime":
            return self.max_timestamp
        return message.timestamp

    def _deep_records(self) -> list[Record]:
        """DeepRecordsIterator: the inner set is read by message sizes alone, all of it up front;
        each message is checked as the iterator reaches it, and its key and value read only when
        asked for."""
        inner, starts = self._inner_messages()
        base = self._absolute_base(inner[-1].offset)
        offsets = [m.offset if base is None else java_long(base + m.offset) for m in inner]
        records = []
        for k, message in enumerate(inner):
            if message.attributes & ATTR_CODEC:
                error = self._error("Inner messages must not be compressed", detail=f"inner message at byte "
                                    f"{starts[k]} of the decompressed set")
                raise self._carrying(error, records, [], offsets[0] if k else None)
            if message.error is not None:
                error = self._error(message.error, detail=f"inner message at byte {starts[k]} of the decompressed set")
                raise self._carrying(error, records, self._printed_from(inner[k:], offsets[k:]), offsets[0])
            records.append(self._as_record(message, None, offsets[k]))
        return records

    def _inner_messages(self) -> tuple[list[Message], list[int]]:
        """The wrapper's inner messages (key and value read leniently) and where each starts in the
        decompressed set; raises what the iterator's constructor throws."""
        wrapper = self._wrapper()
        try:
            data = codecs.decompress(self.compression_id, wrapper.value, magic=self.magic, limit=self.decompress_limit)
        except DecompressionError as exc:
            raise exc.located(self.path, self.position)
        inner, starts = [], []
        pos = 0
        while len(data) - pos >= LOG_OVERHEAD:
            (size,) = SIZE.unpack_from(data, pos + 8)
            if size < RECORD_OVERHEAD_V0:
                raise self._error(f"Record size is less than the minimum record overhead ({RECORD_OVERHEAD_V0})",
                                  detail=f"inner message at byte {pos} of the decompressed set")
            if pos + LOG_OVERHEAD + size > len(data):
                break  # DataLogInputStream: a truncated inner entry ends the set
            try:
                message = read_message(data, pos, len(data), lenient=True)
            except ValueError as exc:  # a V1 message too short for its timestamp: read as far as its attributes
                message = _header_only(data, pos, str(exc))
            inner.append(message)
            starts.append(pos)
            pos += message.size
        if not inner:
            raise self._error("Found invalid compressed record set with no inner records")
        return inner, starts

    def _wrapper(self) -> Message:
        message = self.message
        if message.error is not None:
            raise CorruptDataError(f"Record is corrupt: {message.error}", path=self.path, position=self.position)
        if self.magic not in (0, 1):
            raise self._error(f"Invalid wrapper magic found in legacy deep record iterator {self.magic}")
        if message.value is None:
            raise self._error(f"Found invalid compressed record set with null value (magic = {self.magic})")
        if self.compression_id > LAST_LEGACY_CODEC:
            raise self._error(f"Invalid wrapper compressionType found in legacy deep record iterator: {self.compression}")
        return message

    def _printed_from(self, inner: list[Message], offsets: list[int]) -> list[Record]:
        """From an unreadable inner message on, the records Kafka's iterator returns: each unreadable
        one as an `UnreadRecord`, up to a compressed one (the iterator throws there). What of them
        kafka-dump-log prints depends on what it reads (`dumplog_text.lines`)."""
        printed = []
        for message, offset in zip(inner, offsets):
            if message.attributes & ATTR_CODEC:
                break
            printed.append(self._as_record(message, None, offset) if message.error is None
                           else self._unread_record(message, None, offset))
        return printed

    @staticmethod
    def _carrying(error: CorruptDataError, before: list[Record], unread: list[Record],
                  first_offset: int | None) -> CorruptDataError:
        error.records_before = before
        error.records_unread = unread
        error.first_offset = first_offset
        return error

    def _absolute_base(self, last_inner_offset: int) -> int | None:
        if self.magic == 0:
            return None  # V0 inner offsets are absolute
        wrapper_offset = self.last_offset
        if wrapper_offset == 0:
            return 0  # "produce data from certain versions of librdkafka"
        if wrapper_offset < last_inner_offset:
            raise self._error(
                f"Found invalid wrapper offset in compressed v1 message set, wrapper offset '{wrapper_offset}' "
                f"is less than the last inner message offset '{last_inner_offset}' and it is not zero."
            )
        return java_long(wrapper_offset - last_inner_offset)

    def _error(self, message: str, detail: str | None = None) -> CorruptDataError:
        text = f"compressed message at {self.position}: {message}"
        if detail:
            text += f" ({detail})"
        return CorruptDataError(text, path=self.path, position=self.position)


def parse_batch(source, position: int, end: int, path: str, decompress_limit: int = codecs.DEFAULT_LIMIT) -> LegacyBatch:
    try:
        message = read_message(source, position, end, lenient=True)
    except ValueError as exc:
        raise CorruptDataError(f"Record is corrupt: {exc}", path=path, position=position) from None
    if message.magic == 0:
        timestamp_type = TIMESTAMP_TYPES[-1]
    else:
        timestamp_type = TIMESTAMP_TYPES[1 if message.attributes & ATTR_LOG_APPEND_TIME else 0]
    return LegacyBatch(
        path=path,
        position=position,
        size=message.size,
        last_offset=message.offset,
        magic=message.magic,
        crc=message.crc,
        crc_valid=message.crc_valid,
        compression_id=message.attributes & ATTR_CODEC,
        timestamp_type=timestamp_type,
        max_timestamp=message.timestamp,
        attributes=message.attributes,
        count=None,
        message=message,
        decompress_limit=decompress_limit,
    )


def build_entry(offset: int, magic: int, key: bytes | None, value: bytes | None, *,
                timestamp: int = NO_TIMESTAMP, attributes: int = 0) -> bytes:
    """One log entry with a correct CRC, built by the schema (for fixtures and tests)."""
    body = MESSAGE.build(dict(crc=0, magic=magic, attributes=attributes,
                              timestamp=timestamp if magic >= 1 else None, key=key, value=value))
    crc = zlib.crc32(body[4:])
    body = Int32ub.build(crc) + body[4:]
    return LOG_ENTRY_HEADER.build(dict(offset=offset, message_size=len(body))) + body

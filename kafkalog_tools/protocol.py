"""Kafka's wire primitives as `construct` declarations.

Implements the primitive encodings of `org.apache.kafka.common.protocol.types` and
`org.apache.kafka.common.utils.ByteUtils`: zigzag varints bounded as Kafka bounds them, classic
(int16/int32-prefixed) and compact (unsigned-varint, length+1) strings, bytes and arrays, UUIDs,
and the tagged-field trailer of flexible message versions (KIP-482).

Every schema in this package that holds one of these encodings is built from the constructs here.
"""
from __future__ import annotations

import base64
import uuid as _uuid

from construct import (
    Adapter,
    Bytes,
    Construct,
    ConstructError,
    Int8ub,
    Int16sb,
    Int32sb,
    SizeofError,
    StreamError,
    integertypes,
    stream_read,
    stream_write,
)

# ---------------------------------------------------------------------------------------------
# Varints (ByteUtils.readVarint / readVarlong / readUnsignedVarint)
# ---------------------------------------------------------------------------------------------


class _KafkaVarint(Construct):
    """Base-128, least significant group first; Kafka rejects a varint longer than its width.

    `max_bytes` is 5 for int32 varints and 10 for int64 varlongs. Bits beyond the width in the last
    byte overflow silently, as in Java; the result is masked to the width.
    """

    def __init__(self, max_bytes: int, bits: int, zigzag: bool):
        super().__init__()
        self.max_bytes = max_bytes
        self.bits = bits
        self.zigzag = zigzag

    def _parse(self, stream, context, path):
        value = 0
        shift = 0
        for _ in range(self.max_bytes):
            byte = stream_read(stream, 1, path)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                value &= (1 << self.bits) - 1
                if self.zigzag:
                    return (value >> 1) ^ -(value & 1)
                if value >= 1 << (self.bits - 1):  # unsigned varints are Java ints too
                    value -= 1 << self.bits
                return value
            shift += 7
        raise ConstructError(f"varint is longer than {self.max_bytes} bytes", path=path)

    def _build(self, obj, stream, context, path):
        if not isinstance(obj, integertypes):
            raise ConstructError(f"value {obj!r} is not an integer", path=path)
        mask = (1 << self.bits) - 1
        value = ((obj << 1) ^ (obj >> (self.bits - 1))) & mask if self.zigzag else obj & mask
        out = bytearray()
        while value > 0x7F:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        stream_write(stream, bytes(out), len(out), path)
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("varints have no fixed size", path=path)


VarInt = _KafkaVarint(5, 32, zigzag=True)
"""Signed zigzag varint, int32 (ByteUtils.readVarint)."""
VarLong = _KafkaVarint(10, 64, zigzag=True)
"""Signed zigzag varlong, int64 (ByteUtils.readVarlong)."""
UVarInt = _KafkaVarint(5, 32, zigzag=False)
"""Unsigned varint (ByteUtils.readUnsignedVarint): compact lengths, tags, frame headers."""


# ---------------------------------------------------------------------------------------------
# Length-prefixed strings and bytes
# ---------------------------------------------------------------------------------------------


STRING_MAX = 0x7FFF
"""The longest string Kafka's generated readers accept."""


class TooManyElementsError(ConstructError):
    """An array count above the bytes left: the generated readers refuse it before reading any
    element ("Tried to allocate a collection of size N, but there are only M bytes remaining.")."""

    def __init__(self, count: int, remaining: int, path):
        super().__init__(f"array of {count} elements with {remaining} bytes left", path=path)
        self.count, self.remaining = count, remaining


class ShortArrayError(StreamError):
    """A string's or bytes' length runs past the data: construct's message, and the two numbers
    Kafka's ByteBufferAccessor.readArray names ("Error reading byte array of N byte(s): only M
    byte(s) available")."""

    def __init__(self, length: int, available: int, path):
        super().__init__(f"stream read less than specified amount, expected {length}, found {available}", path=path)
        self.length, self.available = length, available


class SizePrefixed(Construct):
    """Bytes or text behind a length prefix, with Kafka's null conventions.

    Classic encodings store the length itself (negative = null); compact encodings store length+1
    (0 = null). Text is decoded as Java's `new String(bytes, UTF_8)` does: malformed sequences
    become U+FFFD rather than failing.
    """

    def __init__(self, lengthfield: Construct, compact: bool, nullable: bool, text: bool):
        super().__init__()
        self.lengthfield = lengthfield
        self.compact = compact
        self.nullable = nullable
        self.text = text

    def _parse(self, stream, context, path):
        length = self.lengthfield._parsereport(stream, context, path)
        if self.compact:
            length -= 1
        if length < 0:
            if not self.nullable:
                raise ConstructError("non-nullable field was serialized as null", path=path)
            return None
        if self.text and length > STRING_MAX:  # the generated readers' check, before any byte is read
            raise ConstructError(f"string field had invalid length {length}", path=path)
        data = stream.read(length)
        if len(data) != length:
            raise ShortArrayError(length, len(data), path)
        return data.decode("utf-8", "replace") if self.text else data

    def _build(self, obj, stream, context, path):
        if obj is None:
            if not self.nullable:
                raise ConstructError("non-nullable field given None", path=path)
            self.lengthfield._build(0 if self.compact else -1, stream, context, path)
            return obj
        data = obj.encode("utf-8") if self.text else bytes(obj)
        self.lengthfield._build(len(data) + (1 if self.compact else 0), stream, context, path)
        stream_write(stream, data, len(data), path)
        return obj


String = SizePrefixed(Int16sb, compact=False, nullable=False, text=True)
NullableString = SizePrefixed(Int16sb, compact=False, nullable=True, text=True)
CompactString = SizePrefixed(UVarInt, compact=True, nullable=False, text=True)
CompactNullableString = SizePrefixed(UVarInt, compact=True, nullable=True, text=True)
Bytes32 = SizePrefixed(Int32sb, compact=False, nullable=False, text=False)
NullableBytes32 = SizePrefixed(Int32sb, compact=False, nullable=True, text=False)
CompactBytes = SizePrefixed(UVarInt, compact=True, nullable=False, text=False)
CompactNullableBytes = SizePrefixed(UVarInt, compact=True, nullable=True, text=False)


# ---------------------------------------------------------------------------------------------
# Arrays
# ---------------------------------------------------------------------------------------------


class KafkaArray(Construct):
    """An array behind an int32 count (classic) or an unsigned varint count+1 (compact).

    `countfield` overrides the count's encoding (record headers count with a zigzag varint).
    """

    def __init__(self, subcon: Construct, compact: bool, nullable: bool = False,
                 countfield: Construct | None = None):
        super().__init__()
        self.subcon = subcon
        self.compact = compact
        self.nullable = nullable
        self.countfield = countfield or (UVarInt if compact else Int32sb)

    def _parse(self, stream, context, path):
        count = self.countfield._parsereport(stream, context, path)
        if self.compact:
            count -= 1
        if count < 0:
            if not self.nullable:
                raise ConstructError("non-nullable field was serialized as null", path=path)
            return None
        if self.countfield in (Int32sb, UVarInt):  # a message's array (not a record's headers)
            position = stream.tell()
            remaining = stream.seek(0, 2) - position
            stream.seek(position)
            if count > remaining:
                raise TooManyElementsError(count, remaining, path)
        items = []
        for _ in range(count):
            try:
                items.append(self.subcon._parsereport(stream, context, path))
            except ConstructError as exc:
                if exc.path == path and str(exc).endswith("non-nullable field was serialized as null"):
                    raise ConstructError("non-nullable field element was serialized as null", path=path) from None
                raise
        return items

    def _build(self, obj, stream, context, path):
        if obj is None:
            if not self.nullable:
                raise ConstructError("non-nullable array given None", path=path)
            self.countfield._build(0 if self.compact else -1, stream, context, path)
            return obj
        self.countfield._build(len(obj) + (1 if self.compact else 0), stream, context, path)
        for item in obj:
            self.subcon._build(item, stream, context, path)
        return obj


def Array(subcon: Construct, nullable: bool = False) -> KafkaArray:
    return KafkaArray(subcon, compact=False, nullable=nullable)


def CompactArray(subcon: Construct, nullable: bool = False) -> KafkaArray:
    return KafkaArray(subcon, compact=True, nullable=nullable)


# ---------------------------------------------------------------------------------------------
# UUIDs (org.apache.kafka.common.Uuid): 16 raw bytes, shown as URL-safe base64 without padding
# ---------------------------------------------------------------------------------------------


def uuid_to_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_from_text(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"a Kafka Uuid is 16 bytes, {text!r} decodes to {len(raw)}")
    return raw


class _UuidAdapter(Adapter):
    def _decode(self, obj, context, path):
        return uuid_to_text(obj)

    def _encode(self, obj, context, path):
        return uuid_from_text(obj)


Uuid = _UuidAdapter(Bytes(16))
"""Kafka Uuid as its canonical text form (22 characters of URL-safe base64)."""


def uuid_to_standard(text: str) -> str:
    """The 8-4-4-4-12 hex form some operators know a topic id by."""
    return str(_uuid.UUID(bytes=uuid_from_text(text)))


# ---------------------------------------------------------------------------------------------
# Tagged fields (KIP-482): uvarint count, then (uvarint tag, uvarint size, data) per field
# ---------------------------------------------------------------------------------------------


class TaggedFields(Construct):
    """The tagged-field trailer of a flexible struct.

    `known` maps a tag to (name, construct). Known tags parse into their names; unknown tags are
    kept as {"tag": n, "data": bytes} under "_unknown" so that building gives back the same bytes.
    Tags are written in increasing order, as Kafka writes them.
    """

    def __init__(self, known: dict[int, tuple[str, Construct]] | None = None):
        super().__init__()
        self.known = dict(known or {})
        self.by_name = {name: (tag, con) for tag, (name, con) in self.known.items()}

    def _parse(self, stream, context, path):
        count = UVarInt._parsereport(stream, context, path)
        if count < 0:
            raise ConstructError(f"negative tagged field count {count}", path=path)
        fields: dict = {}
        unknown = []
        for _ in range(count):
            tag = UVarInt._parsereport(stream, context, path)
            size = UVarInt._parsereport(stream, context, path)
            if size < 0:
                raise ConstructError(f"negative tagged field size {size}", path=path)
            data = stream.read(size)
            if len(data) != size:  # Readable.readUnknownTaggedField reads it with readArray's check
                raise ShortArrayError(size, len(data), path)
            if tag in self.known:
                name, con = self.known[tag]
                fields[name] = con.parse(data)
            else:
                unknown.append({"tag": tag, "data": data})
        if unknown:
            fields["_unknown"] = unknown
        return fields

    def _build(self, obj, stream, context, path):
        obj = obj or {}
        entries = []
        for name, value in obj.items():
            if name == "_unknown":
                entries.extend((u["tag"], bytes(u["data"])) for u in value)
            elif name in self.by_name:
                tag, con = self.by_name[name]
                entries.append((tag, con.build(value)))
            else:
                raise ConstructError(f"unknown tagged field {name!r}", path=path)
        entries.sort(key=lambda e: e[0])
        UVarInt._build(len(entries), stream, context, path)
        for tag, data in entries:
            UVarInt._build(tag, stream, context, path)
            UVarInt._build(len(data), stream, context, path)
            stream_write(stream, data, len(data), path)
        return obj


NoTaggedFields = TaggedFields()

__all__ = [
    "VarInt", "VarLong", "UVarInt", "SizePrefixed", "String", "NullableString", "CompactString",
    "CompactNullableString", "Bytes32", "NullableBytes32", "CompactBytes", "CompactNullableBytes",
    "KafkaArray", "Array", "CompactArray", "Uuid", "uuid_to_text", "uuid_from_text",
    "uuid_to_standard", "TaggedFields", "NoTaggedFields", "Int8ub", "StreamError",
]

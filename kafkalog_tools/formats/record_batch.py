"""Record batch V2 (magic 2, KIP-98, Kafka >= 0.11).

Source: clients/.../record/DefaultRecordBatch.java, DefaultRecord.java; docs/implementation.html
section 5.3. A 61-byte big-endian header; CRC-32C over attributes..end (the partition leader epoch
is outside it, because the broker rewrites it); then `recordsCount` records, compressed as one
stream when the codec is not none. Records are zigzag-varint encoded.

The `construct` schemas below are the declaration of the layout. Scanning uses a `struct.Struct`
derived from `BATCH_HEADER`, and record decoding a hand-inlined varint reader checked against
`RECORD` by the test suite (decode_records_reference is the slow reference path).
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from construct import (
    ConstructError,
    Int8sb,
    Int16sb,
    Int32sb,
    Int32ub,
    Int64sb,
    Prefixed,
    StreamError,
    Struct,
    Terminated,
    this,
    Bytes,
)

from .. import codecs
from ..crc import crc32c
from ..errors import CorruptDataError, DecompressionError, TruncatedError
from ..protocol import KafkaArray, SizePrefixed, VarInt, VarLong
from ..schema import derive_struct
from .batch import INT32_MAX, NO_TIMESTAMP, TIMESTAMP_TYPES, Batch, Record, increment_sequence, java_long
from .batch import last_sequence as batch_last_sequence
from .control import ControlRecordError, parse_control

# ---------------------------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------------------------

BATCH_HEADER = Struct(
    "base_offset" / Int64sb,
    "batch_length" / Int32sb,  # bytes after this field
    "partition_leader_epoch" / Int32sb,
    "magic" / Int8sb,
    "crc" / Int32ub,  # CRC-32C of bytes [21, 12 + batch_length)
    "attributes" / Int16sb,  # only the low byte is used
    "last_offset_delta" / Int32sb,
    "base_timestamp" / Int64sb,
    "max_timestamp" / Int64sb,
    "producer_id" / Int64sb,
    "producer_epoch" / Int16sb,
    "base_sequence" / Int32sb,
    "records_count" / Int32sb,
)

NullableVarBytes = SizePrefixed(VarInt, compact=False, nullable=True, text=False)

RECORD_HEADER = Struct(
    # A negative key size is an error (InvalidRecordException "Invalid negative header key size")
    "key" / SizePrefixed(VarInt, compact=False, nullable=False, text=False),
    "value" / NullableVarBytes,
)

RECORD = Prefixed(
    VarInt,  # length of the rest of the record; all of it must be consumed
    Struct(
        "attributes" / Int8sb,
        "timestamp_delta" / VarLong,
        "offset_delta" / VarInt,
        "key" / NullableVarBytes,
        "value" / NullableVarBytes,
        "headers" / KafkaArray(RECORD_HEADER, compact=False, countfield=VarInt),
        Terminated,
    ),
)

RECORD_BATCH = Struct(
    "header" / BATCH_HEADER,
    "records" / Bytes(this.header.batch_length - (BATCH_HEADER.sizeof() - 12)),
)

HEADER = derive_struct(BATCH_HEADER)
HEADER_SIZE = HEADER.size  # RECORD_BATCH_OVERHEAD = 61
CRC_START = 21
LOG_OVERHEAD = 12

ATTR_CODEC = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


# ---------------------------------------------------------------------------------------------
# Typed batch
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class RecordBatchV2(Batch):
    first_offset: int = 0
    source: object = None
    """The buffer (mmap or bytes) the batch lies in; records are sliced out of it on demand."""
    decompress_limit: int = codecs.DEFAULT_LIMIT

    @property
    def base_offset(self) -> int:
        return self.first_offset

    def payload(self) -> bytes:
        """The records section, decompressed."""
        raw = self.source[self.position + HEADER_SIZE : self.end]
        if self.compression_id == 0:
            return bytes(raw)
        try:
            return codecs.decompress(self.compression_id, raw, magic=2, limit=self.decompress_limit)
        except DecompressionError as exc:
            raise exc.located(self.path, self.position + HEADER_SIZE)

    def records(self) -> list[Record]:
        return self._records if self._records is not None else self._decoded_once(lambda: decode_records(self))


def parse_batch(source, position: int, path: str, decompress_limit: int = codecs.DEFAULT_LIMIT) -> RecordBatchV2:
    """Read the V2 batch header at `position` of `source` (whose 12+batch_length bytes are present)."""
    try:
        (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta,
         base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
         records_count) = HEADER.unpack_from(source, position)
    except struct.error:  # the source ends within 61 bytes: the entry, being there whole, is smaller
        batch_length = int.from_bytes(source[position + 8 : position + 12], "big", signed=True)
        raise _smaller_than_a_header(LOG_OVERHEAD + batch_length, path, position) from None
    size = LOG_OVERHEAD + batch_length
    if size < HEADER_SIZE:
        raise _smaller_than_a_header(size, path, position)
    attributes &= 0xFF  # (byte) getShort(21): the high byte is ignored
    computed = crc32c(memoryview(source)[position + CRC_START : position + size])
    last_offset = base_offset + last_offset_delta
    if not _LONG_MIN <= last_offset <= _LONG_MAX:
        last_offset = java_long(last_offset)
    if base_sequence < 0 or last_offset_delta < 0 or base_sequence > INT32_MAX - last_offset_delta:
        last_sequence = batch_last_sequence(base_sequence, last_offset_delta)  # -1, or Java's int wrapping
    else:
        last_sequence = base_sequence + last_offset_delta
    # positional, in Batch's field order (keywords cost more than the rest of this function; the
    # header tests against Kafka's parse pin every field)
    return RecordBatchV2(
        path, position, size, last_offset, magic, crc, computed == crc, attributes & ATTR_CODEC,
        TIMESTAMP_TYPES[1 if attributes & ATTR_LOG_APPEND_TIME else 0], max_timestamp, attributes, records_count,
        producer_id, producer_epoch, base_sequence, last_sequence, bool(attributes & ATTR_TRANSACTIONAL),
        bool(attributes & ATTR_CONTROL), leader_epoch, base_timestamp if attributes & ATTR_DELETE_HORIZON else None,
        base_timestamp, None, None, base_offset, source, decompress_limit,
    )


def _smaller_than_a_header(size: int, path: str, position: int) -> CorruptDataError:
    return CorruptDataError(
        f"Record batch is corrupt (the size {size} is smaller than the minimum allowed overhead {HEADER_SIZE})",
        path=path, position=position, expected=f">= {HEADER_SIZE} bytes", actual=size,
    )


# ---------------------------------------------------------------------------------------------
# Records: the fast path
# ---------------------------------------------------------------------------------------------


class _Overrun(Exception):
    """A varint or a length ran past the end of the records section."""


class _LengthVarintTooLong(ValueError):
    pass


class VarintTooLongError(CorruptDataError):
    """A record whose length varint is longer than 5 bytes: ByteUtils throws an
    IllegalArgumentException that DefaultRecord.readFrom, unlike for the record's other varints,
    does not turn into an InvalidRecordException (so LogSegment.recover, reading a marker, fails
    instead of truncating)."""


_ONE_BYTE_ZIGZAG = [(b >> 1) ^ -(b & 1) for b in range(0x80)]
_TWO_BYTE_ZIGZAG = [(v >> 1) ^ -(v & 1) for v in range(0x4000)]
"""Zigzag values of two-byte varints, by their 14 payload bits (lengths of 64 B..8 KiB, deltas >= 64)."""


def _varint(buf: bytes, pos: int, end: int, max_bytes: int, bits: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise _Overrun
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            value &= (1 << bits) - 1
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
    raise ValueError(f"Varint is too long, the most significant bit in the {max_bytes}th byte is set")


def decode_records(batch: RecordBatchV2) -> list[Record]:
    """DefaultRecord.readFrom for each of the batch's records, with Kafka's checks and messages."""
    count = batch.count
    if count == 0:  # DefaultRecordBatch.iterator: an empty iterator, whatever the records section holds
        return []
    if count < 0:
        raise CorruptDataError("Found invalid record count", path=batch.path, position=batch.position + 57,
                               expected=">= 0", actual=count)
    data = batch.payload()
    compressed = batch.compression_id != 0
    base_file_pos = batch.position + HEADER_SIZE
    log_append = batch.timestamp_type == "LogAppendTime"
    base_offset, base_ts, base_seq = batch.first_offset, batch.base_timestamp, batch.base_sequence
    max_timestamp, is_control = batch.max_timestamp, batch.is_control
    one_byte, two_byte = _ONE_BYTE_ZIGZAG, _TWO_BYTE_ZIGZAG
    end = len(data)
    pos = 0
    records = []
    for index in range(count):
        start = pos
        try:
            if pos >= end:
                raise _Overrun
            if (byte := data[pos]) < 0x80:
                length = one_byte[byte]
                pos += 1
            elif pos + 1 < end and data[pos + 1] < 0x80:
                length = two_byte[byte & 0x7F | data[pos + 1] << 7]
                pos += 2
            else:
                try:
                    length, pos = _varint(data, pos, end, 5, 32)
                except ValueError as exc:  # read before DefaultRecord.readFrom's try: not an InvalidRecordException
                    raise _LengthVarintTooLong(str(exc)) from None
            body = pos
            if length < 0 or body + length > end:
                raise _Overrun
            record_end = body + length
            attributes = data[pos]
            if attributes > 127:  # a Java byte, as the schema's Int8sb reads it
                attributes -= 256
            pos += 1
            if pos < record_end and (byte := data[pos]) < 0x80:  # one- and two-byte varints: the common case
                ts_delta = one_byte[byte]
                pos += 1
            elif pos + 1 < record_end and data[pos + 1] < 0x80:
                ts_delta = two_byte[byte & 0x7F | data[pos + 1] << 7]
                pos += 2
            else:
                ts_delta, pos = _varint(data, pos, record_end, 10, 64)
            if pos < record_end and (byte := data[pos]) < 0x80:  # one- and two-byte varints: the common case
                offset_delta = one_byte[byte]
                pos += 1
            elif pos + 1 < record_end and data[pos + 1] < 0x80:
                offset_delta = two_byte[byte & 0x7F | data[pos + 1] << 7]
                pos += 2
            else:
                offset_delta, pos = _varint(data, pos, record_end, 5, 32)
            if pos < record_end and (byte := data[pos]) < 0x80:  # one- and two-byte varints: the common case
                key_len = one_byte[byte]
                pos += 1
            elif pos + 1 < record_end and data[pos + 1] < 0x80:
                key_len = two_byte[byte & 0x7F | data[pos + 1] << 7]
                pos += 2
            else:
                key_len, pos = _varint(data, pos, record_end, 5, 32)
            if key_len < 0:
                key = None
            else:
                if pos + key_len > record_end:
                    raise _Overrun
                key = data[pos : pos + key_len]
                pos += key_len
            if pos < record_end and (byte := data[pos]) < 0x80:  # one- and two-byte varints: the common case
                value_len = one_byte[byte]
                pos += 1
            elif pos + 1 < record_end and data[pos + 1] < 0x80:
                value_len = two_byte[byte & 0x7F | data[pos + 1] << 7]
                pos += 2
            else:
                value_len, pos = _varint(data, pos, record_end, 5, 32)
            if value_len < 0:
                value = None
            else:
                if pos + value_len > record_end:
                    raise _Overrun
                value = data[pos : pos + value_len]
                pos += value_len
            if pos < record_end and (byte := data[pos]) < 0x80:  # one- and two-byte varints: the common case
                header_count = one_byte[byte]
                pos += 1
            elif pos + 1 < record_end and data[pos + 1] < 0x80:
                header_count = two_byte[byte & 0x7F | data[pos + 1] << 7]
                pos += 2
            else:
                header_count, pos = _varint(data, pos, record_end, 5, 32)
            if header_count < 0:
                raise ValueError("Found invalid number of record headers")
            if header_count > record_end - pos:
                raise ValueError(f"Found invalid number of record headers {header_count}")
            headers = []
            for _ in range(header_count):
                if pos < record_end and (byte := data[pos]) < 0x80:  # one- and two-byte varints: the common case
                    hk_len = one_byte[byte]
                    pos += 1
                elif pos + 1 < record_end and data[pos + 1] < 0x80:
                    hk_len = two_byte[byte & 0x7F | data[pos + 1] << 7]
                    pos += 2
                else:
                    hk_len, pos = _varint(data, pos, record_end, 5, 32)
                if hk_len < 0:
                    raise ValueError(f"Invalid negative header key size {hk_len}")
                if pos + hk_len > record_end:
                    raise _Overrun
                header_key = data[pos : pos + hk_len]
                pos += hk_len
                if pos < record_end and (byte := data[pos]) < 0x80:  # one- and two-byte varints: the common case
                    hv_len = one_byte[byte]
                    pos += 1
                elif pos + 1 < record_end and data[pos + 1] < 0x80:
                    hv_len = two_byte[byte & 0x7F | data[pos + 1] << 7]
                    pos += 2
                else:
                    hv_len, pos = _varint(data, pos, record_end, 5, 32)
                if hv_len < 0:
                    header_value = None
                else:
                    if pos + hv_len > record_end:
                        raise _Overrun
                    header_value = data[pos : pos + hv_len]
                    pos += hv_len
                headers.append((header_key, header_value))
            if pos != record_end:
                raise ValueError(
                    f"Invalid record size: expected to read {length} bytes in record payload, "
                    f"but instead read {pos - body}"
                )
        except _Overrun:
            raise _record_error(batch, index, start, compressed,
                                "Incorrect declared batch size, premature EOF reached", TruncatedError, records) from None
        except ValueError as exc:
            raise _record_error(batch, index, start, compressed, str(exc),
                                VarintTooLongError if isinstance(exc, _LengthVarintTooLong) else CorruptDataError,
                                records) from None
        # positional (Record's field order): keyword construction costs three times as much
        record = Record(_java_long_sum(base_offset, offset_delta),
                        max_timestamp if log_append else _java_long_sum(base_ts, ts_delta), key, value,
                        headers, pos - start, -1 if base_seq < 0 else increment_sequence(base_seq, offset_delta),
                        attributes, None if compressed else base_file_pos + start)
        if is_control:
            _attach_control(batch, record, index, start, compressed, records)
        records.append(record)
    if pos != end:
        raise _record_error(batch, count, pos, compressed,
                            "Incorrect declared batch size, records still remaining in file", CorruptDataError, records)
    return records


def skim_records(batch: RecordBatchV2) -> tuple[int, int] | None:
    """(record count, largest record timestamp) when `decode_records` would read the batch without
    error and its offset deltas increase within 0..last offset delta; otherwise None, and
    `decode_records` says what is wrong. Every length and varint is walked as `decode_records`
    walks it, but no key, value, header or Record is built: a deep check at a fraction of the cost.
    Control batches are not skimmed (their keys and values are parsed)."""
    count = batch.count
    if count == 0:  # as decode_records: nothing read, nothing decompressed
        return 0, batch.max_timestamp
    if count < 0 or batch.is_control:
        return None
    data = batch.payload()
    one_byte, two_byte = _ONE_BYTE_ZIGZAG, _TWO_BYTE_ZIGZAG
    last_delta = batch.last_offset - batch.first_offset
    end = len(data)
    pos = 0
    previous_delta = -1
    largest_delta = None
    try:
        for _ in range(count):
            if pos < end and (byte := data[pos]) < 0x80:
                length = one_byte[byte]
                pos += 1
            elif pos + 1 < end and data[pos + 1] < 0x80:
                length = two_byte[byte & 0x7F | data[pos + 1] << 7]
                pos += 2
            else:
                length, pos = _varint(data, pos, end, 5, 32)
            record_end = pos + length
            if length < 1 or record_end > end:
                return None
            pos += 1  # attributes
            if pos < record_end and (byte := data[pos]) < 0x80:
                ts_delta = one_byte[byte]
                pos += 1
            elif pos + 1 < record_end and data[pos + 1] < 0x80:
                ts_delta = two_byte[byte & 0x7F | data[pos + 1] << 7]
                pos += 2
            else:
                ts_delta, pos = _varint(data, pos, record_end, 10, 64)
            if pos < record_end and (byte := data[pos]) < 0x80:
                offset_delta = one_byte[byte]
                pos += 1
            elif pos + 1 < record_end and data[pos + 1] < 0x80:
                offset_delta = two_byte[byte & 0x7F | data[pos + 1] << 7]
                pos += 2
            else:
                offset_delta, pos = _varint(data, pos, record_end, 5, 32)
            if not previous_delta < offset_delta <= last_delta:
                return None
            previous_delta = offset_delta
            if largest_delta is None or ts_delta > largest_delta:
                largest_delta = ts_delta
            for _ in range(2):  # key, value: nullable bytes
                if pos < record_end and (byte := data[pos]) < 0x80:
                    size = one_byte[byte]
                    pos += 1
                elif pos + 1 < record_end and data[pos + 1] < 0x80:
                    size = two_byte[byte & 0x7F | data[pos + 1] << 7]
                    pos += 2
                else:
                    size, pos = _varint(data, pos, record_end, 5, 32)
                if size > 0:
                    pos += size
            if pos < record_end and data[pos] == 0:  # no headers: the common case
                pos += 1
            else:
                header_count, pos = _varint(data, pos, record_end, 5, 32)
                if not 0 <= header_count <= record_end - pos:
                    return None
                for _ in range(header_count):
                    key_size, pos = _varint(data, pos, record_end, 5, 32)
                    if key_size < 0:
                        return None
                    pos += key_size
                    value_size, pos = _varint(data, pos, record_end, 5, 32)
                    if value_size > 0:
                        pos += value_size
            if pos != record_end:  # a field ran past the record, or left bytes in it
                return None
    except (_Overrun, ValueError):
        return None
    if pos != end:
        return None
    if count == 0 or batch.timestamp_type == "LogAppendTime":
        return count, batch.max_timestamp
    return count, batch.base_timestamp + largest_delta


def _attach_control(batch: RecordBatchV2, record: Record, index: int, start: int, compressed: bool,
                    records_before: list[Record]) -> None:
    try:
        record.control = parse_control(record.key, record.value)
    except ControlRecordError as exc:  # Kafka's iterator returns the record; its readers throw
        record.control = getattr(exc, "control", None)  # a marker's type, when only its value is unreadable
        record.control_error = _record_error(batch, index, start, compressed, exc.message, type(exc),
                                             list(records_before))


def _java_long_sum(base: int, delta: int) -> int:
    """base + delta as Java's long addition leaves it (wrapping past Long.MAX, as Kafka's record
    offsets and timestamps do: found by the differential run against Kafka)."""
    total = base + delta
    return total if _LONG_MIN <= total <= _LONG_MAX else java_long(total)


def _record_error(batch: RecordBatchV2, index: int, start: int, compressed: bool, message: str, kind,
                  records_before: list[Record]):
    """The error, carrying the records read before it (`records_before`): Kafka's record iterator
    returns those before it throws, and kafka-dump-log prints them."""
    if compressed:
        error = kind(f"record {index} of the batch (byte {start} of its decompressed records): {message}",
                     path=batch.path, position=batch.position)
    else:
        error = kind(f"record {index} of the batch at {batch.position}: {message}",
                     path=batch.path, position=batch.position + HEADER_SIZE + start)
    error.records_before = records_before
    return error


# ---------------------------------------------------------------------------------------------
# Records: the reference path, straight from the construct schema
# ---------------------------------------------------------------------------------------------


def decode_records_reference(batch: RecordBatchV2) -> list[Record]:
    """The records as `RECORD` parses them: slow, and the yardstick for `decode_records`."""
    if batch.count == 0:  # as decode_records: DefaultRecordBatch.iterator reads nothing
        return []
    if batch.count < 0:  # Kafka's "Found invalid record count", as decode_records says it
        raise CorruptDataError("Found invalid record count", path=batch.path, position=batch.position + 57,
                               expected=">= 0", actual=batch.count)
    data = batch.payload()
    stream = io.BytesIO(data)
    records = []
    pos = 0
    for index in range(batch.count):
        try:
            parsed = RECORD.parse_stream(stream)
        except (ConstructError, StreamError) as exc:
            raise CorruptDataError(f"record does not parse: {exc}", path=batch.path, position=batch.position) from None
        size = stream.tell() - pos  # bytes consumed: a non-canonical varint rebuilds shorter
        record = Record(
            offset=java_long(batch.first_offset + parsed.offset_delta),
            timestamp=batch.max_timestamp if batch.timestamp_type == "LogAppendTime"
            else java_long(batch.base_timestamp + parsed.timestamp_delta),
            key=parsed.key,
            value=parsed.value,
            headers=[(h.key, h.value) for h in parsed.headers],
            size=size,
            sequence=-1 if batch.base_sequence < 0 else increment_sequence(batch.base_sequence, parsed.offset_delta),
            attributes=parsed.attributes,
            position=None if batch.compression_id else batch.position + HEADER_SIZE + pos,
        )
        if batch.is_control:
            _attach_control(batch, record, index, pos, bool(batch.compression_id), records)
        records.append(record)
        pos += size
    if pos != len(data):
        raise CorruptDataError("Incorrect declared batch size, records still remaining in file",
                               path=batch.path, position=batch.position)
    return records


def build_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                 headers: list[tuple[bytes, bytes | None]] = (), attributes: int = 0) -> bytes:
    return RECORD.build(dict(
        attributes=attributes, timestamp_delta=timestamp_delta, offset_delta=offset_delta,
        key=key, value=value, headers=[dict(key=k, value=v) for k, v in headers],
    ))


__all__ = ["BATCH_HEADER", "RECORD", "RECORD_HEADER", "RECORD_BATCH", "HEADER", "HEADER_SIZE",
           "RecordBatchV2", "parse_batch", "decode_records", "skim_records", "decode_records_reference",
           "build_record", "build_batch", "NO_TIMESTAMP"]


def build_batch(base_offset: int, records: list[bytes], *, last_offset_delta: int | None = None,
                base_timestamp: int = NO_TIMESTAMP, max_timestamp: int = NO_TIMESTAMP, compression_id: int = 0,
                attributes: int = 0, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                partition_leader_epoch: int = -1) -> bytes:
    """A complete V2 batch with a correct CRC, built by the schema (for fixtures and tests).

    `records` are encoded records (see `build_record`); `attributes` adds flag bits to the codec.
    """
    payload = codecs.compress(compression_id, b"".join(records), magic=2)
    header = dict(
        base_offset=base_offset,
        batch_length=HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch=partition_leader_epoch,
        magic=2,
        crc=0,
        attributes=attributes | compression_id,
        last_offset_delta=len(records) - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
    )
    unsigned = BATCH_HEADER.build(header) + payload
    header["crc"] = crc32c(unsigned[CRC_START:])
    return BATCH_HEADER.build(header) + payload

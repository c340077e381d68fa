"""Peer of `kafkalog dump --format json --deep-iteration`: aiokafka's C reader decodes the records,
orjson writes the same JSON Lines as kafkalog (the bench compares the two outputs' digests).

aiokafka exposes neither a batch's position, size, leader epoch or record count nor a record's
size in bytes, so this script reads the batch header itself and recomputes record sizes from the
varint lengths (exact for CreateTime batches, which the bench generates). Legacy inner messages
are taken as CRC-valid: aiokafka checks only the wrapper's CRC.
"""
from __future__ import annotations

import base64
import struct
import sys

import orjson
from aiokafka.record.memory_records import MemoryRecords

from common import chunks

V2_HEADER = struct.Struct(">qiibIhiqqqhii")
LEGACY_HEADER = struct.Struct(">qiIbb")
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
INT32_MAX = 0x7FFFFFFF


def varint_size(value: int) -> int:
    zigzag = (value << 1) ^ (value >> 63)
    size = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        size += 1
    return size


def text(data: bytes | None) -> tuple[str | None, str | None]:
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), "utf8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


MARKERS = {0: "ABORT", 1: "COMMIT"}


def marker(record) -> dict:
    """A transaction marker's key (version, type) and value (version, coordinator epoch), as
    kafkalog's "control" object shows them (the bench writes only well-formed ones)."""
    version, type_id = struct.unpack_from(">hh", record.key)
    _, coordinator_epoch = struct.unpack_from(">hi", record.value)
    return {"type": MARKERS[type_id], "type_id": type_id, "version": version, "coordinator_epoch": coordinator_epoch}


def record_line(path, position, record, sequence, size, legacy=None, control=False) -> bytes:
    key, value = record.key, record.value
    key_text, key_encoding = text(key)
    value_text, value_encoding = text(value)
    obj = {"type": "record", "file": path, "batch_position": position, "offset": record.offset,
           "timestamp": record.timestamp, "sequence": sequence, "size": size,
           "key_size": -1 if key is None else len(key), "value_size": -1 if value is None else len(value),
           "key": key_text, "key_encoding": key_encoding, "value": value_text, "value_encoding": value_encoding,
           "headers": [{"key": k, "value": v, "value_encoding": e} for k, (v, e) in
                       ((k, text(v)) for k, v in record.headers)]}
    if legacy is not None:
        obj["legacy"] = legacy
    if control:
        obj["control"] = marker(record)
    return orjson.dumps(obj)


def v2_lines(path, position, data, at, batch) -> list[bytes]:
    (base_offset, length, epoch, magic, crc, attributes, last_delta, first_ts, max_ts, producer_id, producer_epoch,
     base_sequence, count) = V2_HEADER.unpack_from(data, at)
    attributes &= 0xFF
    crc_valid = batch.validate_crc()  # before iterating, as aiokafka requires
    lines = [None]
    for record in batch:
        delta = record.offset - base_offset
        body = (1 + varint_size(record.timestamp - first_ts) + varint_size(delta)
                + (1 if record.key is None else varint_size(len(record.key)) + len(record.key))
                + (1 if record.value is None else varint_size(len(record.value)) + len(record.value))
                + varint_size(len(record.headers))
                + sum(varint_size(len(k.encode())) + len(k.encode())
                      + (1 if v is None else varint_size(len(v)) + len(v)) for k, v in record.headers))
        sequence = -1 if base_sequence < 0 else base_sequence + delta - (INT32_MAX + 1 if base_sequence + delta > INT32_MAX else 0)
        lines.append(record_line(path, position, record, sequence, varint_size(body) + body,
                                 control=bool(attributes & 0x20)))
    last_sequence = -1 if base_sequence < 0 else base_sequence + last_delta - (
        INT32_MAX + 1 if base_sequence + last_delta > INT32_MAX else 0)
    lines[0] = orjson.dumps({
        "type": "batch", "file": path, "position": position, "size": 12 + length, "base_offset": base_offset,
        "last_offset": base_offset + last_delta, "count": count, "magic": magic, "crc": crc,
        "crc_valid": crc_valid, "compression": CODECS[attributes & 7],
        "timestamp_type": "LogAppendTime" if attributes & 8 else "CreateTime", "max_timestamp": max_ts,
        "producer_id": producer_id, "producer_epoch": producer_epoch, "base_sequence": base_sequence,
        "last_sequence": last_sequence, "is_transactional": bool(attributes & 0x10),
        "is_control": bool(attributes & 0x20), "partition_leader_epoch": epoch,
        "delete_horizon_ms": first_ts if attributes & 0x40 else None})
    return lines


def legacy_lines(path, position, data, at, batch) -> list[bytes]:
    offset, length, crc, magic, attributes = LEGACY_HEADER.unpack_from(data, at)
    timestamp = struct.unpack_from(">q", data, at + 18)[0] if magic == 1 else -1
    overhead = 26 if magic == 0 else 34
    crc_valid = batch.validate_crc()
    lines = [None]
    first = None
    for record in batch:
        first = record.offset if first is None else first
        size = overhead + len(record.key or b"") + len(record.value or b"")
        lines.append(record_line(path, position, record, -1, size,
                                 {"magic": magic, "crc": record.checksum, "crc_valid": True, "attributes": 0}))
    lines[0] = orjson.dumps({
        "type": "batch", "file": path, "position": position, "size": 12 + length,
        "base_offset": offset if first is None else first, "last_offset": offset, "count": None, "magic": magic,
        "crc": crc, "crc_valid": crc_valid, "compression": CODECS[attributes & 7],
        "timestamp_type": "NoTimestampType" if magic == 0 else "LogAppendTime" if attributes & 8 else "CreateTime",
        "max_timestamp": timestamp, "producer_id": -1, "producer_epoch": -1, "base_sequence": -1,
        "last_sequence": -1, "is_transactional": False, "is_control": False, "partition_leader_epoch": -1,
        "delete_horizon_ms": None})
    return lines


def main(path: str) -> None:
    out = sys.stdout.buffer
    base = int(path.rsplit("/", 1)[-1].split(".")[0])
    # kafkalog says whether a broker holds the log dir's lock; the bench's dirs never have a .lock
    out.write(orjson.dumps({"type": "file", "file": path, "kind": "log", "base_offset": base, "broker": "unknown",
                            "read_as": "offline"}) + b"\n")
    for start, data in chunks(path):
        records = MemoryRecords(data)
        at = 0
        while (batch := records.next_batch()) is not None:
            lines = (v2_lines if data[at + 16] >= 2 else legacy_lines)(path, start + at, data, at, batch)
            out.write(b"\n".join(lines) + b"\n")
            at += 12 + struct.unpack_from(">i", data, at + 8)[0]


if __name__ == "__main__":
    main(sys.argv[1])

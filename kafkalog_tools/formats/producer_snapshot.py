"""Producer state snapshot (`<offset>.snapshot`).

Source: storage/.../log/ProducerStateManager.java (readSnapshot/writeSnapshot) and
storage/src/main/resources/message/ProducerSnapshot.json. `version:int16` (only 1 exists),
`crc:uint32` = CRC-32C of every byte after it, then an int32-counted array of 46-byte producer
entries. The file name's offset is the exclusive end of the state it captures.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from construct import Int16sb, Int32sb, Int32ub, Int64sb, Struct

from ..crc import crc32c
from ..errors import CorruptDataError
from ..protocol import Array
from ..schema import derive_struct
from .batch import INT32_MAX
from .index_file import read_index_bytes
from .segment import offset_from_name

ENTRY_SCHEMA = Struct(
    "producer_id" / Int64sb,
    "epoch" / Int16sb,
    "last_sequence" / Int32sb,
    "last_offset" / Int64sb,
    "offset_delta" / Int32sb,
    "timestamp" / Int64sb,
    "coordinator_epoch" / Int32sb,
    "current_txn_first_offset" / Int64sb,
)
HEADER_SCHEMA = Struct("version" / Int16sb, "crc" / Int32ub)
SNAPSHOT = Struct(*HEADER_SCHEMA.subcons, "entries" / Array(ENTRY_SCHEMA))

HEADER = derive_struct(HEADER_SCHEMA)
ENTRY = derive_struct(ENTRY_SCHEMA)
COUNT = derive_struct(Struct("count" / Int32sb))
VERSION = 1
CRC_START = HEADER.size


def decrement_sequence(sequence: int, decrement: int) -> int:
    """DefaultRecordBatch.decrementSequence: the inverse of the wrap past Int.MAX."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int

    @property
    def has_batch_metadata(self) -> bool:
        return self.last_offset >= 0

    @property
    def first_sequence(self) -> int:
        return decrement_sequence(self.last_sequence, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class ProducerSnapshot:
    path: str
    offset: int | None
    version: int
    crc: int
    entries: list[ProducerEntry]


def parse(data: bytes, path: str = "<bytes>") -> ProducerSnapshot:
    """ProducerStateManager.readSnapshot, with its checks and messages."""
    if len(data) < HEADER.size + COUNT.size:
        raise CorruptDataError(f"Snapshot failed schema validation: file of {len(data)} bytes is shorter "
                               f"than its {HEADER.size + COUNT.size}-byte header", path=path, position=0)
    version, stored = HEADER.unpack_from(data, 0)
    if version != VERSION:
        raise CorruptDataError(f"Snapshot contained an unknown file version {version}", path=path, position=0,
                               expected=VERSION, actual=version)
    computed = crc32c(memoryview(data)[CRC_START:])
    if computed != stored:
        raise CorruptDataError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. Computed crc: {computed}",
            path=path, position=2, expected=computed, actual=stored)
    (count,) = COUNT.unpack_from(data, HEADER.size)
    start = HEADER.size + COUNT.size
    if count < 0 or start + count * ENTRY.size > len(data):
        raise CorruptDataError(f"Snapshot failed schema validation: {count} entries do not fit in "
                               f"{len(data) - start} bytes", path=path, position=HEADER.size)
    entries = [ProducerEntry(*ENTRY.unpack_from(data, start + i * ENTRY.size)) for i in range(count)]
    return ProducerSnapshot(path, offset_from_name(path), version, stored, entries)


def read(path: str | os.PathLike) -> ProducerSnapshot:
    path = os.fspath(path)
    return parse(read_index_bytes(path), path)


def build(entries: list[ProducerEntry]) -> bytes:
    body = COUNT.pack(len(entries)) + b"".join(ENTRY.pack(*(getattr(e, f) for f in ENTRY_FIELDS)) for e in entries)
    return HEADER.pack(VERSION, crc32c(body)) + body


ENTRY_FIELDS = tuple(ProducerEntry.__dataclass_fields__)

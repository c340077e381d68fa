"""Transaction index (`.txnindex`): the aborted transactions whose ABORT marker is in the segment.

Source: storage/.../log/TransactionIndex.java, AbortedTxn.java. 34-byte entries
`version:int16, producerId:int64, firstOffset:int64, lastOffset:int64, lastStableOffset:int64`,
where lastOffset is the offset of the ABORT marker. Not preallocated; a trailing partial entry is
ignored. Quirk kept: Kafka reads the version from the first byte only.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from construct import Int16sb, Int64sb, Struct

from ..errors import CorruptDataError
from ..schema import derive_struct
from .index_file import read_index_bytes
from .segment import offset_from_name

ENTRY_SCHEMA = Struct(
    "version" / Int16sb,
    "producer_id" / Int64sb,
    "first_offset" / Int64sb,
    "last_offset" / Int64sb,
    "last_stable_offset" / Int64sb,
)
ENTRY = derive_struct(ENTRY_SCHEMA)
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    position: int = 0


class TransactionIndex:
    def __init__(self, path: str | os.PathLike, data: bytes | None = None):
        self.path = os.fspath(path)
        self.base_offset = offset_from_name(self.path)
        self.data = read_index_bytes(self.path) if data is None else data
        self.entry_count = len(self.data) // ENTRY.size
        self.trailing_bytes = len(self.data) % ENTRY.size

    def entries(self) -> list[AbortedTxn]:
        """All aborted transactions; an unknown version is an error, as in Kafka."""
        result = []
        for slot in range(self.entry_count):
            position = slot * ENTRY.size
            _, producer_id, first, last, lso = ENTRY.unpack_from(self.data, position)
            version = self.data[position]  # AbortedTxn.version() reads buffer.get(0)
            if version > CURRENT_VERSION:
                raise CorruptDataError(
                    f"Unexpected aborted transaction version {version} in transaction index {self.path}, "
                    f"current version is {CURRENT_VERSION}",
                    path=self.path, position=position, expected=CURRENT_VERSION, actual=version,
                )
            result.append(AbortedTxn(version, producer_id, first, last, lso, position))
        return result


def build(entries: list[AbortedTxn]) -> bytes:
    return b"".join(ENTRY.pack(e.version, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
                    for e in entries)

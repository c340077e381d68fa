"""Offset index (`.index`): sparse map from offset to the byte position of a batch in the `.log`.

Source: storage/.../log/OffsetIndex.java. Entries are `relativeOffset:int32, position:int32`
(absolute offset = base offset + relative). Since Kafka 2.0 an entry (O, P) means a batch whose
last offset is O starts at or after position P. `lookup` is OffsetIndex.lookup: the last entry with
offset <= target, or (base offset, 0) when there is none.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from construct import Int32sb, Struct

from ..schema import derive_struct
from .index_file import IndexFile

ENTRY_SCHEMA = Struct("relative_offset" / Int32sb, "position" / Int32sb)
ENTRY = derive_struct(ENTRY_SCHEMA)


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    offset: int
    position: int
    slot: int = -1  # -1: not an entry, the "no entry" answer of lookup


class OffsetIndex(IndexFile):
    SCHEMA = ENTRY_SCHEMA
    ENTRY = ENTRY
    RELATIVE_OFFSET_FIELD = 0

    def entry(self, slot: int) -> OffsetPosition:
        relative, position = self.raw(slot)
        return OffsetPosition(self.base_offset + relative, position, slot)

    def entries(self, *, all_slots: bool = False) -> list[OffsetPosition]:
        count = self.entry_count if all_slots else self.valid_count()
        return [self.entry(slot) for slot in range(count)]

    def lookup(self, target: int, entries: list[OffsetPosition] | None = None) -> OffsetPosition:
        entries = self.entries() if entries is None else entries
        index = bisect.bisect_right([e.offset for e in entries], target) - 1
        return entries[index] if index >= 0 else OffsetPosition(self.base_offset, 0)


def build(entries: list[tuple[int, int]], base_offset: int) -> bytes:
    """Index bytes for absolute (offset, position) entries."""
    return b"".join(ENTRY.pack(offset - base_offset, position) for offset, position in entries)

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
WARM_ENTRIES = 8192 // ENTRY.size
"""AbstractIndex.warmEntries: the slots at the end that a lookup searches first."""


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
        if entries is None:  # only the slots the bisection visits are read
            slot = bisect.bisect_right(_Offsets(self, self.valid_count()), target) - 1
            return self.entry(slot) if slot >= 0 else OffsetPosition(self.base_offset, 0)
        index = bisect.bisect_right([e.offset for e in entries], target) - 1
        return entries[index] if index >= 0 else OffsetPosition(self.base_offset, 0)

    def last_offset(self) -> int:
        """OffsetIndex.lastOffset: the offset of the file's last slot (every whole 8 bytes is one, a
        zero-filled tail's too), or the base offset when there is none."""
        return self.entry(self.entry_count - 1).offset if self.entry_count else self.base_offset

    def search(self, target: int) -> OffsetPosition:
        """OffsetIndex.lookup as Kafka runs it over every slot (AbstractIndex.indexSlotRangeFor, largest
        lower bound): a binary search of the last WARM_ENTRIES slots when the first of them is below the
        target, else of the slots before. Where the offsets increase this is `lookup`; on a damaged
        index it finds the slot Kafka finds."""
        count = self.entry_count
        if count == 0:
            return OffsetPosition(self.base_offset, 0)
        first_hot = max(0, count - 1 - WARM_ENTRIES)
        if self.entry(first_hot).offset < target:
            low, high = first_hot, count - 1
        elif self.entry(0).offset > target:
            return OffsetPosition(self.base_offset, 0)
        else:
            low, high = 0, first_hot
        while low < high:
            middle = (low + high + 1) >> 1
            found = self.entry(middle)
            if found.offset > target:
                high = middle - 1
            elif found.offset < target:
                low = middle
            else:
                return found
        return self.entry(low)


class _Offsets:
    """The absolute offsets of an index's first `count` slots, as a sequence read slot by slot."""

    def __init__(self, index: OffsetIndex, count: int):
        self.index, self.count = index, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, slot: int) -> int:
        return self.index.base_offset + self.index.raw(slot)[0]


def build(entries: list[tuple[int, int]], base_offset: int) -> bytes:
    """Index bytes for absolute (offset, position) entries."""
    return b"".join(ENTRY.pack(offset - base_offset, position) for offset, position in entries)

"""Time index (`.timeindex`): sparse map from a running maximum timestamp to an offset.

Source: storage/.../log/TimeIndex.java. Entries are `timestamp:int64, relativeOffset:int32`;
an entry (T, O) says the largest timestamp among offsets <= O is T. Kafka appends only when T
strictly grows, so timestamps are strictly increasing. `lookup` is TimeIndex.lookup: the last
entry with timestamp <= target, or (-1, base offset).
"""
from __future__ import annotations

from dataclasses import dataclass

from construct import Int32sb, Int64sb, Struct

from ..schema import derive_struct
from .index_file import IndexFile

ENTRY_SCHEMA = Struct("timestamp" / Int64sb, "relative_offset" / Int32sb)
ENTRY = derive_struct(ENTRY_SCHEMA)


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    timestamp: int
    offset: int
    slot: int = -1


class TimeIndex(IndexFile):
    SCHEMA = ENTRY_SCHEMA
    ENTRY = ENTRY
    RELATIVE_OFFSET_FIELD = 1

    def entry(self, slot: int) -> TimestampOffset:
        timestamp, relative = self.raw(slot)
        return TimestampOffset(timestamp, self.base_offset + relative, slot)

    def entries(self, *, all_slots: bool = False) -> list[TimestampOffset]:
        count = self.entry_count if all_slots else self.valid_count()
        return [self.entry(slot) for slot in range(count)]

    def lookup(self, target: int, entries: list[TimestampOffset] | None = None) -> TimestampOffset:
        entries = self.entries() if entries is None else entries
        found = TimestampOffset(-1, self.base_offset)
        low, high = 0, len(entries) - 1
        while low <= high:  # entries are sorted by timestamp when the index is sound
            middle = (low + high) // 2
            if entries[middle].timestamp <= target:
                found = entries[middle]
                low = middle + 1
            else:
                high = middle - 1
        return found


def build(entries: list[tuple[int, int]], base_offset: int) -> bytes:
    """Index bytes for (timestamp, absolute offset) entries."""
    return b"".join(ENTRY.pack(timestamp, offset - base_offset) for timestamp, offset in entries)

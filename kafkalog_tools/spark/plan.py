"""The driver's side: which segments there are, and how to spread them over executors by bytes."""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from ..formats.logdir import Segment

TASKS_PER_CORE = 4
"""More tasks than cores, heaviest first: Spark hands the next one to whichever core is free, which
evens out segments that cost more per byte (compression, damage)."""


@dataclass(frozen=True)
class SegmentUnit:
    key: tuple[int, int]
    """(number of the path given, number of the partition in it)."""
    segment: Segment
    is_active: bool
    size: int


def segment_units(targets) -> list[SegmentUnit]:
    """Every segment with a .log of every partition of every target (verify's `_Target`s)."""
    units = []
    for number, target in enumerate(targets):
        for index, (partition, named) in enumerate(target.partitions):
            last_base = partition.segments[-1].base_offset if partition.segments else None
            for segment in named if named is not None else partition.segments:
                if segment.log is not None:
                    units.append(SegmentUnit((number, index), segment, segment.base_offset == last_base,
                                             _size(segment)))
    return units


def balance(units: list, cores: int) -> list[list]:
    """Units (anything with a `size`) in at most `TASKS_PER_CORE * cores` groups of nearly equal
    bytes: largest first into the lightest group; the heaviest group first."""
    count = max(1, min(len(units), TASKS_PER_CORE * max(1, cores)))
    heap = [(0, number, []) for number in range(count)]
    for unit in sorted(units, key=lambda u: -u.size):
        total, number, group = heapq.heappop(heap)
        group.append(unit)
        heapq.heappush(heap, (total + unit.size, number, group))
    return [group for total, _, group in sorted(heap, key=lambda item: -item[0]) if group]


def _size(segment: Segment) -> int:
    try:
        return segment.log.stat().st_size
    except OSError:
        return 0  # reported by the executor that tries to open it

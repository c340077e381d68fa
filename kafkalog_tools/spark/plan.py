"""The driver's side: which segments there are, and how to spread them over executors by bytes."""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from pathlib import Path

from ..formats.logdir import PartitionDir, Segment
from .remote import HadoopLayout, RemoteFile

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
    remote: tuple[RemoteFile, ...] = ()
    """Its files behind a URI, staged where the unit runs."""
    live: bool = False
    """A broker runs on its log dir (or --live): the end of an active segment may be a write in progress."""


def segment_units(targets, layout: HadoopLayout) -> list[SegmentUnit]:
    """Every segment with a .log of every partition of every target (verify's `_Target`s)."""
    units = []
    for number, target in enumerate(targets):
        for index, (partition, named) in enumerate(target.partitions):
            last_base = partition.segments[-1].base_offset if partition.segments else None
            for segment in named if named is not None else partition.segments:
                if segment.log is not None:
                    files = (segment.log, segment.index, segment.timeindex, segment.txnindex)
                    units.append(SegmentUnit((number, index), segment, segment.base_offset == last_base,
                                             layout.size(segment.log), layout.remote_files(files), target.live))
    return units


def stage_2_inputs(partition: PartitionDir, named: list[Segment] | None) -> list[Path]:
    """The files `verify.check_partition` reads: producer snapshots and the partition's own files,
    and for segments given on their own the earlier .logs that its producer state may replay."""
    paths = partition.snapshots + list(partition.files.values())
    if named:
        first = min(segment.base_offset for segment in named)
        paths += [s.log for s in partition.segments if s.log is not None and s.base_offset < first]
    return paths


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


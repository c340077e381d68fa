"""The driver's side: which segments there are, and how to spread them over executors by bytes."""
from __future__ import annotations

import heapq
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import InputError, KafkaLogError
from ..formats.logdir import PartitionDir, Segment
from ..formats.offset_index import OffsetIndex
from .remote import HadoopLayout, RemoteFile

TASKS_PER_CORE = 4
"""More tasks than cores, heaviest first: Spark hands the next one to whichever core is free, which
evens out segments that cost more per byte (compression, damage)."""


RANGE_BYTES_CONF = "spark.kafkalog.rangeBytes"
"""Bytes of .log per task for a segment cut into byte ranges (0: never cut one). Default: the
.log bytes over `TASKS_PER_CORE` tasks per core, at least `RANGE_MIN_BYTES`."""
RANGE_MIN_BYTES = 32 << 20
"""No range is smaller by default: a task costs ~10 ms, and a range's merge may read ahead of it."""


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
    part: tuple[int, int | None] | None = None
    """(start, until) of one of the byte ranges a big segment is cut into (`split`), or None: all of it."""


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


def range_bytes_setting(spark) -> int | None:
    """`RANGE_BYTES_CONF` as the session has it (None: not set)."""
    value = spark.conf.get(RANGE_BYTES_CONF, None)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise InputError(f"{RANGE_BYTES_CONF}={value}: give a whole number of bytes (0: never cut a segment)")
    return number


def split(units: list[SegmentUnit], cores: int, range_bytes: int | None = None) -> list[SegmentUnit]:
    """The units with each segment of at least two ranges' bytes cut into byte ranges, so that a
    few big segments keep every core busy. A range starts where an entry of the segment's offset
    index says a batch starts (`range_starts`); a segment without one, or staged from a URI (each
    range's task would copy all of it), stays whole. Where a range's walk cannot tell what one walk
    would find, stage 2 reads on from there (`verify.check_segment(ranges=...)`)."""
    if range_bytes is None:
        range_bytes = max(RANGE_MIN_BYTES, -(-sum(unit.size for unit in units) // (TASKS_PER_CORE * max(1, cores))))
    if range_bytes <= 0:
        return units
    cut = []
    for unit in units:
        starts = []
        if unit.size >= 2 * range_bytes and not unit.remote and unit.segment.index is not None:
            starts = range_starts(unit.segment.index, unit.segment.base_offset, unit.size, unit.size // range_bytes)
        if not starts:
            cut.append(unit)
            continue
        bounds = [0, *starts, unit.size]
        cut.extend(replace(unit, size=end - start, part=(start, end if end < unit.size else None))
                   for start, end in zip(bounds, bounds[1:]))
    return cut


def range_starts(index: Path, base_offset: int, size: int, count: int) -> list[int]:
    """Up to `count` - 1 positions in (0, size) where the offset index has an entry, each the first
    at or after an equal share of `size`. An entry whose position does not exceed every one before
    it (a preallocated or damaged index) is passed over; one off a batch start costs a read-ahead
    where the ranges are put together, never a wrong answer."""
    import numpy as np

    try:
        entries = OffsetIndex(index, base_offset)
        positions = entries.columns(entries.entry_count)["position"].astype(np.int64)
    except (OSError, KafkaLogError):
        return []
    before = np.zeros_like(positions)
    if len(positions) > 1:
        before[1:] = np.maximum.accumulate(positions)[:-1]
    ascending = positions[(positions > before) & (positions < size)]
    shares = np.array([size * number // count for number in range(1, count)], dtype=np.int64)
    chosen = np.searchsorted(ascending, shares)
    return sorted({int(ascending[at]) for at in chosen[chosen < len(ascending)].tolist()})


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


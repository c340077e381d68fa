"""What executors run: the library's own functions, on units the driver planned."""
from __future__ import annotations

from dataclasses import dataclass

from .. import dump as d
from ..broker import BrokerState
from .. import verify
from ..output import jsonl
from . import schemas
from .remote import RemoteFile, prune_dirs, staged


def check_segments(units, deep: bool):
    """Verify's stage 1 for each segment (or byte range of one) of a group: (partition key, report)."""
    try:
        for unit in units:
            with staged(unit.remote, prune=False):
                if unit.part is None:
                    report = verify.check_segment(unit.segment, unit.is_active, deep, live=unit.live)
                else:
                    report = verify.check_range(unit.segment, *unit.part, deep, live=unit.live)
            yield unit.key, report
    finally:
        prune_dirs(file for unit in units for file in unit.remote)


def check_partition(item, deep: bool):
    """Verify's stage 2 for one partition, over its segments' reports."""
    key, (partitions, reports) = item
    [(partition, named, remote)] = list(partitions)
    with staged(remote):
        return key, verify.check_partition(partition, named, deep, reports)


@dataclass(frozen=True)
class DumpUnit:
    path: str
    """A .log segment or a KRaft snapshot (.checkpoint)."""
    topic: str | None
    partition: int | None
    size: int
    active: bool | None = None
    """Whether it is its partition's last segment, whose end may be a write in progress (None: as
    `dump.dump_file` finds it in the file's directory)."""
    remote: tuple[RemoteFile, ...] = ()
    """The file behind a URI, staged at `path` while it is read."""
    broker: BrokerState | None = None
    """Of its log dir, as the driver probed it (None: probed where the unit runs)."""


def dump_rows(units, options: d.DumpOptions, bytes_mode: str, max_bytes_given: bool):
    """("batch" | "record" | "problem", row) for every batch, record and problem of each unit,
    from `dump.dump_file` as the single-process dump reads them."""
    try:
        for unit in units:
            with staged(unit.remote, prune=False):
                yield from _unit_rows(unit, options, bytes_mode, max_bytes_given)
    finally:
        prune_dirs(file for unit in units for file in unit.remote)


def _unit_rows(unit: DumpUnit, options: d.DumpOptions, bytes_mode: str, max_bytes_given: bool):
    where = (unit.topic, unit.partition)
    shown = unit.remote[0].uri if unit.remote else None  # named instead of the staged copy (`file` comes first)
    for item in d.dump_file(unit.path, options, topic=unit.topic, active=unit.active, broker=unit.broker):
        if isinstance(item, d.BatchItem):
            row = schemas.batch_row(item.batch, *where)
            yield "batch", (shown,) + row[1:] if shown else row
            if not item.batch.crc_valid:  # a problem for the exit code, as in one process
                problem = {"type": "crc_mismatch", "severity": "error", "file": item.batch.path,
                           "position": item.batch.position,
                           "message": f"the batch fails its CRC (stored {item.batch.crc})"}
                yield "problem", schemas.problem_row(_naming(problem, unit.path, shown), *where)
            decoded = item.decoded or [None] * len(item.records or ())
            for record, payload in zip(item.records or (), decoded):
                row = schemas.record_row(item.batch, record, payload, bytes_mode, *where)
                yield "record", (shown,) + row[1:] if shown else row
        elif isinstance(item, d.Problem):
            yield "problem", schemas.problem_row(_naming(jsonl.problem_object(item), unit.path, shown), *where)
        elif isinstance(item, d.Trailing) and not max_bytes_given:
            problem = {"type": "trailing_bytes", "severity": "info" if item.still_being_written else "error",
                       "file": item.path, "position": item.position,
                       "message": f"{item.size} bytes after the last complete batch: {item.reason}"}
            yield "problem", schemas.problem_row(_naming(problem, unit.path, shown), *where)


def _naming(problem: dict, path: str, shown: str | None) -> dict:
    if shown:
        problem.update((name, problem[name].replace(path, shown)) for name in ("file", "message") if problem[name])
    return problem

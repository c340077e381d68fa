"""What executors run: the library's own functions, on units the driver planned."""
from __future__ import annotations

from dataclasses import dataclass

from .. import dump as d
from .. import verify
from ..output import jsonl
from . import schemas


def check_segments(units, deep: bool):
    """Verify's stage 1 for each segment of a group: (partition key, report)."""
    for unit in units:
        yield unit.key, verify.check_segment(unit.segment, unit.is_active, deep)


def check_partition(item, deep: bool):
    """Verify's stage 2 for one partition, over its segments' reports."""
    key, (partitions, reports) = item
    [(partition, named)] = list(partitions)
    return key, verify.check_partition(partition, named, deep, {report.log: report for report in reports})


@dataclass(frozen=True)
class DumpUnit:
    path: str
    """A .log segment or a KRaft snapshot (.checkpoint)."""
    topic: str | None
    partition: int | None
    size: int


def dump_rows(units, options: d.DumpOptions, bytes_mode: str, max_bytes_given: bool):
    """("batch" | "record" | "problem", row) for every batch, record and problem of each unit,
    from `dump.dump_file` as the single-process dump reads them."""
    for unit in units:
        where = (unit.topic, unit.partition)
        for item in d.dump_file(unit.path, options, topic=unit.topic):
            if isinstance(item, d.BatchItem):
                yield "batch", schemas.batch_row(item.batch, *where)
                decoded = item.decoded or [None] * len(item.records or ())
                for record, payload in zip(item.records or (), decoded):
                    yield "record", schemas.record_row(item.batch, record, payload, bytes_mode, *where)
            elif isinstance(item, d.Problem):
                yield "problem", schemas.problem_row(jsonl.problem_object(item), *where)
            elif isinstance(item, d.Trailing) and not max_bytes_given:
                problem = {"type": "trailing_bytes", "severity": "error", "file": item.path,
                           "position": item.position,
                           "message": f"{item.size} bytes after the last complete batch: {item.reason}"}
                yield "problem", schemas.problem_row(problem, *where)

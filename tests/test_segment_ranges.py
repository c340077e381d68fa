"""Stage 1 of a segment by byte ranges (`check_range`, put together by `check_segment(ranges=...)`),
against the segment read whole, on every segment of the corpus: ranges cut at every offset index
entry, and at random positions - most of them off any batch start, as a damaged index's would be -,
deep and shallow (the V0/V1 segments' shallow wrapper base offsets depend on the batches before),
read offline and live; through the compiled bulk path and the per-batch path. The report must be
the same, field by field, findings in the same order with the same keys."""
from __future__ import annotations

import random

import pytest

from kafkalog_tools.formats.logdir import read_partition_dir
from kafkalog_tools.formats.offset_index import OffsetIndex
from kafkalog_tools.verify import FactsRun, check_range, check_segment
from kafkalog_tools.verify import segment as segment_check
from tests.conftest import GOLDEN, REAL, need


def _segments():
    need(GOLDEN)
    need(REAL)
    roots = [GOLDEN / "logs", GOLDEN / "damaged", GOLDEN / "rebuilt", REAL]
    for directory in sorted({log.parent for root in roots for log in root.rglob("*.log")}):
        partition = read_partition_dir(directory)
        last = partition.segments[-1].base_offset
        for segment in partition.segments:
            if segment.log is not None and segment.log.stat().st_size > 100:
                yield segment, segment.base_offset == last


def _index_positions(segment) -> list[int]:
    if segment.index is None:
        return []
    index = OffsetIndex(segment.index, segment.base_offset)
    return [index.entry(slot).position for slot in range(index.entry_count)]


def _facts(report) -> list:
    return [row for facts in report.batches
            for row in (facts.rows() if type(facts) is FactsRun else [facts])]


def _as_compared(report) -> tuple:
    return (report.counts, [(key, f.to_json()) for key, f in report.log_findings],
            [f.to_json() for f in report.index_findings], _facts(report),
            report.tail and report.tail.to_json(), None if report.txn_entries is None else report.txn_entries.tolist(),
            [f.to_json() for f in report.txn_findings])


@pytest.mark.parametrize("bulk", ["always", "never", "always-sparse"])
@pytest.mark.parametrize("deep, live", [(True, False), (False, False), (True, True)],
                         ids=["deep", "shallow", "deep-live"])
def test_ranges_put_together_read_as_the_whole_segment(monkeypatch, bulk, deep, live):
    """`always-sparse`: every batch table keeps only the rows its index entries reach
    (`segment.SPARSE_TABLE_ROWS`), those of the ranges too."""
    monkeypatch.setenv("KAFKALOG_BULK", bulk.split("-")[0])
    if bulk == "always-sparse":
        monkeypatch.setattr(segment_check, "SPARSE_TABLE_ROWS", 0)
    rng = random.Random(24)
    compared = off_batch = 0
    for segment, is_active in _segments():
        size = segment.log.stat().st_size
        whole = _as_compared(check_segment(segment, is_active, deep, live=live))
        at_entries = sorted({p for p in _index_positions(segment) if 0 < p < size})
        anywhere = sorted(set(rng.sample(at_entries + [rng.randrange(1, size) for _ in range(5)], 4)))
        for cuts in (at_entries, anywhere):
            if not cuts:
                continue
            bounds = [0, *cuts, None]
            parts = [check_range(segment, start, until, deep, live=live) for start, until in zip(bounds, bounds[1:])]
            assert _as_compared(check_segment(segment, is_active, deep, live=live, ranges=parts)) == whole, \
                (segment.log, cuts)
            compared += 1
            off_batch += sum(part.stop == part.start for part in parts[1:])
    assert compared > 100 and off_batch > 50  # many ranges began off a batch start and were read on

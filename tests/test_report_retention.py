"""The report's retention section equals `kafkalog retention`'s answer (`retention.analyze_partition`),
on the golden corpus and on damaged copies, whether verify's scan went batch by batch or in the
compiled scan's runs; and a segment Kafka's loader opens without recovering it (after a clean
shutdown: `--shutdown clean`, as here) gets Kafka's largest timestamp: its time index's last slot as
the file holds it, else the .log mtime, whatever the batches after that entry say. Kafka's retain
answered so on these shapes (checked live); until session 24 we read the batches after the entry."""
from __future__ import annotations

import dataclasses
import os
import random
import shutil
from pathlib import Path

import pytest

from kafkalog_tools import retention
from kafkalog_tools.formats.logdir import read_partition_dir
from kafkalog_tools.formats.segment import SegmentFile
from kafkalog_tools.report import collect, verification

MIXED = "golden-v2-mixed-0"
NOW = 1_800_000_000_000
SEGMENT = "00000000000000000424"
"""golden-v2-mixed-0's second segment: 70 batches, timestamps growing."""


@pytest.fixture(params=["never", "always"])
def bulk(request, monkeypatch):
    """The scan's facts batch by batch (`BatchFacts`), or in the compiled scan's runs (`FactsRun`)."""
    monkeypatch.setenv("KAFKALOG_BULK", request.param)
    return request.param


def both_answers(path: Path, partition: Path | None = None, shutdown: str = retention.CLEAN):
    """(the report's retention, `kafkalog retention`'s). `path`: what the report is given (a
    partition dir or one segment)."""
    settings = retention.RetentionSettings(now=NOW, shutdown=shutdown)
    view = collect(verification([str(path)]), [str(path)], settings).partitions[0]
    return view.retention, retention.analyze_partition(read_partition_dir(partition or path), settings)


def assert_same(report: retention.RetentionReport, alone: retention.RetentionReport) -> None:
    assert dataclasses.asdict(report) == dataclasses.asdict(alone)


def verdict(report: retention.RetentionReport) -> tuple[int, str]:
    found = next(s for s in report.segments if s.base_offset == 424)
    return found.largest_timestamp, found.timestamp_source


def batch_timestamps(log: Path) -> list[tuple[int, int]]:
    """(position, max timestamp) of each batch."""
    with SegmentFile(log) as segment:
        return [(e.position, e.max_timestamp) for e in segment.entries()]


def keep_first_time_index_entry(partition: Path) -> int:
    """A time index without every entry after its first (copied while the broker wrote it); returns
    that entry's timestamp."""
    timeindex = partition / f"{SEGMENT}.timeindex"
    timeindex.write_bytes(timeindex.read_bytes()[:12])
    return int.from_bytes(timeindex.read_bytes()[:8], "big")


@pytest.fixture
def mixed(golden, tmp_path) -> Path:
    copy = tmp_path / MIXED
    shutil.copytree(golden / "logs" / MIXED, copy)
    return copy


@pytest.mark.parametrize("partition", ["golden-v0-0", "golden-v1-0", "golden-v2-broker-zstd-2",
                                       "golden-v2-logappendtime-0", MIXED, "golden-v2-txn-0"])
def test_golden_partitions(golden, bulk, partition):
    report, alone = both_answers(golden / "logs" / partition)
    assert_same(report, alone)
    assert report.segments


def test_golden_damaged_copy(golden, bulk):
    """golden/damaged/truncated: the active segment cut mid-batch."""
    assert_same(*both_answers(golden / "damaged" / "truncated" / MIXED))


def test_a_time_index_without_its_final_entries_is_judged_by_the_entry_it_has(mixed, bulk):
    """TimeIndex.lastEntry: the first entry, though later batches are newer (Kafka's retain:
    1700000000005 on 40 batches of timestamps 1700000000000-039 whose time index kept its first)."""
    first = keep_first_time_index_entry(mixed)
    assert first < max(timestamp for _, timestamp in batch_timestamps(mixed / f"{SEGMENT}.log"))
    report, alone = both_answers(mixed)
    assert_same(report, alone)
    assert verdict(report) == (first, "time index")


def test_damage_after_the_last_time_index_entry_is_not_read(mixed, bulk):
    first = keep_first_time_index_entry(mixed)
    log = mixed / f"{SEGMENT}.log"
    data = bytearray(log.read_bytes())
    middle = batch_timestamps(log)[35][0]
    data[middle + 8: middle + 308] = random.Random(25).randbytes(300)
    log.write_bytes(bytes(data))
    report, alone = both_answers(mixed)
    assert_same(report, alone)
    assert verdict(report) == (first, "time index")


def test_a_zero_filled_time_index_slot_is_a_timestamp_of_0(mixed, bulk):
    """A time index with zero-filled slots after its entries (and two stray bytes): Kafka reads its
    last whole slot, timestamp 0 (Kafka's retain: largestTimestamp 0), so time retention deletes it."""
    timeindex = mixed / f"{SEGMENT}.timeindex"
    timeindex.write_bytes(timeindex.read_bytes() + bytes(24) + b"\x01\x02")
    report, alone = both_answers(mixed)
    assert_same(report, alone)
    assert verdict(report) == (0, "time index")
    assert next(s for s in report.segments if s.base_offset == 424).deleted_by == "time"


@pytest.mark.parametrize("content", [b"", b"\xff" * 12])
def test_a_time_index_without_a_timestamp_gives_the_logs_mtime(mixed, content):
    """An empty time index (Kafka's retain on the differential run's generated partitions: the .log
    mtime), or one whose last entry's timestamp is negative (maxTimestampSoFar < 0)."""
    (mixed / f"{SEGMENT}.timeindex").write_bytes(content)
    os.utime(mixed / f"{SEGMENT}.log", ns=(NOW * 1_000_000 - 5, NOW * 1_000_000 - 5))
    report, alone = both_answers(mixed)
    assert_same(report, alone)
    assert verdict(report) == (NOW - 1, "file mtime (no timestamps)")


def test_missing_timeindex(mixed, bulk):
    """Kafka's loader starts an empty time index: the .log mtime."""
    (mixed / f"{SEGMENT}.timeindex").unlink()
    report, alone = both_answers(mixed)
    assert_same(report, alone)
    assert verdict(report)[1] == "file mtime (no .timeindex: Kafka's loader starts an empty one)"


def test_a_report_on_one_segment_file_judges_the_whole_partition(mixed, bulk):
    first = keep_first_time_index_entry(mixed)
    report, alone = both_answers(mixed / f"{SEGMENT}.log", partition=mixed)
    assert_same(report, alone)
    assert verdict(report) == (first, "time index") and len(report.segments) > 1


def test_after_an_unclean_shutdown_both_recover_the_log(mixed, bulk):
    """Without the clean shutdown marker Kafka's loader recovers every segment before retention: the
    report's answer is `kafkalog retention`'s: segment 424 cut at the damage, its largest timestamp
    the recovered batches' (the tail after the damage is gone, not skipped)."""
    keep_first_time_index_entry(mixed)
    log = mixed / f"{SEGMENT}.log"
    batches = batch_timestamps(log)
    data = bytearray(log.read_bytes())
    data[batches[35][0] + 8: batches[35][0] + 308] = random.Random(25).randbytes(300)
    log.write_bytes(bytes(data))
    report, alone = both_answers(mixed, shutdown=retention.AUTO)
    assert_same(report, alone)
    assert any("no clean shutdown marker in the log dir: Kafka's loader recovers the segments from offset 0" in note
               for note in report.notes)
    assert verdict(report) == (max(timestamp for _, timestamp in batches[:35]), "batches (recovered)")
    assert any(f"{SEGMENT}.log: Kafka's loader recovers the segment, cutting it to" in note for note in report.notes)

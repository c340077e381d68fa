"""The report's retention section, whose largest timestamps take the batches after each time
index's last entry from verify's scan (`collect.RetentionTails`) instead of reading them again,
equals `kafkalog retention`'s answer (`retention.analyze_partition`, which reads them): on the
golden corpus and on damaged copies, from the per-batch path's facts and the compiled scan's runs
alike. Each case also says which segments the scan answered for and which were read again, so a
report that silently read everything again would fail too. The tails matter after a clean shutdown,
where Kafka's loader reads the indexes as they are (`--shutdown clean`, as here); after an unclean
one it recovers the segments, which both read alike (the last test)."""
from __future__ import annotations

import dataclasses
import random
import shutil
from pathlib import Path

import pytest

from kafkalog_tools import retention
from kafkalog_tools.formats.logdir import read_partition_dir
from kafkalog_tools.formats.offset_index import OffsetIndex
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.formats.segment import SegmentFile
from kafkalog_tools.recovery import Rebuild, RebuildOptions
from kafkalog_tools.report import collect, verification

MIXED = "golden-v2-mixed-0"
NOW = 1_800_000_000_000
T0 = 1_700_000_000_000
SEGMENT = "00000000000000000424"
"""golden-v2-mixed-0's second segment: 70 batches, timestamps growing."""


@pytest.fixture(params=["never", "always"])
def bulk(request, monkeypatch):
    """The scan's facts batch by batch (`BatchFacts`), or in the compiled scan's runs (`FactsRun`)."""
    monkeypatch.setenv("KAFKALOG_BULK", request.param)
    return request.param


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The .log paths whose batches after the time index's last entry retention read itself."""
    read: list[str] = []
    original = retention._largest_batch_timestamp

    def recorded(log, start):
        read.append(log.path)
        return original(log, start)
    monkeypatch.setattr(retention, "_largest_batch_timestamp", recorded)
    return read


def both_answers(path: Path, reads: list[str], partition: Path | None = None, shutdown: str = retention.CLEAN):
    """(the report's view of the partition, its retention, `kafkalog retention`'s, the segments the
    report read again). `path`: what the report is given (a partition dir or one segment)."""
    settings = retention.RetentionSettings(now=NOW, shutdown=shutdown)
    run = verification([str(path)])
    view = collect(run, [str(path)], settings).partitions[0]
    read_again = list(reads)
    alone = retention.analyze_partition(read_partition_dir(partition or path), settings)
    return view, view.retention, alone, read_again


def assert_same(report: retention.RetentionReport, alone: retention.RetentionReport) -> None:
    assert dataclasses.asdict(report) == dataclasses.asdict(alone)


def positions(log: Path) -> list[tuple[int, int, int]]:
    """(position, size, max timestamp) of each batch `SegmentFile.entries` reads from 0."""
    with SegmentFile(log) as segment:
        return [(e.position, e.size, e.max_timestamp) for e in segment.entries()]


def keep_first_time_index_entry(partition: Path, stem: str = SEGMENT) -> int:
    """A time index copied while the broker wrote it, without every entry after its first: the batches
    after that entry (most of the segment) decide. Returns where retention reads them from."""
    timeindex = partition / f"{stem}.timeindex"
    timeindex.write_bytes(timeindex.read_bytes()[:12])
    segment = next(s for s in read_partition_dir(partition).segments if s.log.name == f"{stem}.log")
    return retention.time_index_tail(segment, segment.log.stat().st_size)[1]


@pytest.fixture
def mixed(golden, tmp_path) -> Path:
    copy = tmp_path / MIXED
    shutil.copytree(golden / "logs" / MIXED, copy)
    return copy


# ---------------------------------------------------------------------------------------------
# As they are
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("partition", ["golden-v0-0", "golden-v1-0", "golden-v2-broker-zstd-2",
                                       "golden-v2-logappendtime-0", MIXED, "golden-v2-txn-0"])
def test_golden_partitions(golden, bulk, reads, partition):
    """Every non-empty segment's tail comes from the scan: nothing is read again."""
    path = golden / "logs" / partition
    view, report, alone, read_again = both_answers(path, reads)
    assert_same(report, alone)
    non_empty = {str(s.log) for s in read_partition_dir(path).segments if s.log.stat().st_size}
    assert set(view.scanned_tails) == non_empty
    assert set(read_again) <= {str(s.log) for s in read_partition_dir(path).segments} - non_empty


def test_golden_damaged_copy(golden, bulk, reads):
    """golden/damaged/truncated: the active segment cut mid-batch."""
    path = golden / "damaged" / "truncated" / MIXED
    view, report, alone, read_again = both_answers(path, reads)
    assert_same(report, alone)
    assert not read_again and len(view.scanned_tails) == len(report.segments)


# ---------------------------------------------------------------------------------------------
# Damage after the time index's last entry: the read stops at the first unreadable batch
# ---------------------------------------------------------------------------------------------


def damage(mixed: Path, how: str) -> int:
    """Damage segment 424 after its (early) time index entry, halfway through the batches retention
    reads; returns the largest timestamp of the batches before the damage."""
    start = keep_first_time_index_entry(mixed)
    log = mixed / f"{SEGMENT}.log"
    batches = [b for b in positions(log) if b[0] >= start]
    hit = len(batches) // 2
    position, size, _ = batches[hit]
    data = bytearray(log.read_bytes())
    if how == "bad-crc":  # a byte of the last record: its CRC fails, its length still holds
        data[position + size - 1] ^= 0x55
    elif how == "garbage":  # random bytes over the header too: the scan resyncs further on
        data[position + 8 : position + 8 + 300] = random.Random(25).randbytes(300)
    elif how == "cut-tail":
        del data[position + size // 2 :]
    log.write_bytes(bytes(data))
    before = max(t for _, _, t in batches[:hit])
    assert before < max(t for _, _, t in batches)  # the batches after the damage would say more
    return before


@pytest.mark.parametrize("how", ["bad-crc", "garbage", "cut-tail"])
def test_damage_after_the_last_time_index_entry(mixed, bulk, reads, how):
    before = damage(mixed, how)
    view, report, alone, read_again = both_answers(mixed, reads)
    assert_same(report, alone)
    verdict = next(s for s in report.segments if s.base_offset == 424)
    assert (verdict.largest_timestamp, verdict.timestamp_source) == (before, "batches (time index incomplete)")
    assert not read_again and str(mixed / f"{SEGMENT}.log") in view.scanned_tails


def test_time_index_missing_its_final_entries(mixed, bulk, reads):
    keep_first_time_index_entry(mixed)
    view, report, alone, read_again = both_answers(mixed, reads)
    assert_same(report, alone)
    verdict = next(s for s in report.segments if s.base_offset == 424)
    batches = positions(mixed / f"{SEGMENT}.log")
    assert (verdict.largest_timestamp, verdict.timestamp_source) == (max(t for _, _, t in batches),
                                                                     "batches (time index incomplete)")
    assert not read_again


def test_missing_timeindex(mixed, bulk, reads):
    """Kafka's loader starts an empty time index: the .log mtime, nothing read."""
    (mixed / f"{SEGMENT}.timeindex").unlink()
    view, report, alone, read_again = both_answers(mixed, reads)
    assert_same(report, alone)
    assert next(s for s in report.segments if s.base_offset == 424).timestamp_source.startswith("file mtime")
    assert str(mixed / f"{SEGMENT}.log") not in view.scanned_tails and not read_again


# ---------------------------------------------------------------------------------------------
# Where the scan cannot say: retention reads the batches itself
# ---------------------------------------------------------------------------------------------


def test_offset_index_pointing_inside_a_batch(mixed, bulk, reads):
    """No batch the scan read begins where retention reads from."""
    start = keep_first_time_index_entry(mixed)
    index = mixed / f"{SEGMENT}.index"
    entry = OffsetIndex(index, 424).lookup(424 + int.from_bytes((mixed / f"{SEGMENT}.timeindex").read_bytes()[8:12],
                                                                "big"))
    assert entry.position == start
    data = bytearray(index.read_bytes())
    data[entry.slot * 8 + 4 : entry.slot * 8 + 8] = (start + 5).to_bytes(4, "big")
    index.write_bytes(bytes(data))
    log = str(mixed / f"{SEGMENT}.log")
    view, report, alone, read_again = both_answers(mixed, reads)
    assert_same(report, alone)
    assert log not in view.scanned_tails and read_again == [log]


def test_the_batch_retention_starts_at_is_damaged(mixed, bulk, reads):
    start = keep_first_time_index_entry(mixed)
    log = mixed / f"{SEGMENT}.log"
    size = next(s for p, s, _ in positions(log) if p == start)
    data = bytearray(log.read_bytes())
    data[start + size - 1] ^= 0x55
    log.write_bytes(bytes(data))
    view, report, alone, read_again = both_answers(mixed, reads)
    assert_same(report, alone)
    assert str(log) not in view.scanned_tails and read_again == [str(log)]


def test_segments_the_scan_did_not_read(mixed, bulk, reads):
    """A report on one segment file: retention covers the partition, the other segments read again."""
    keep_first_time_index_entry(mixed)
    log = mixed / f"{SEGMENT}.log"
    view, report, alone, read_again = both_answers(log, reads, partition=mixed)
    assert_same(report, alone)
    assert set(view.scanned_tails) == {str(log)}
    others = {str(s.log) for s in read_partition_dir(mixed).segments} - {str(log)}
    assert set(read_again) == others


def test_a_start_that_does_not_match_is_not_used(mixed):
    """What a scan saw from another position than retention reads from is ignored."""
    start = keep_first_time_index_entry(mixed)
    log = str(mixed / f"{SEGMENT}.log")
    settings = retention.RetentionSettings(now=NOW, shutdown=retention.CLEAN)
    partition = read_partition_dir(mixed)
    alone = retention.analyze_partition(partition, settings)
    assert_same(retention.analyze_partition(partition, settings, {log: (start + 1, NOW)}), alone)
    used = retention.analyze_partition(partition, settings, {log: (start, NOW)})
    assert next(s for s in used.segments if s.base_offset == 424).largest_timestamp == NOW


# ---------------------------------------------------------------------------------------------
# Legacy messages, repeating timestamps
# ---------------------------------------------------------------------------------------------


def test_legacy_v1_messages_after_the_entry(golden, tmp_path, bulk, reads):
    copy = tmp_path / "golden-v1-0"
    shutil.copytree(golden / "logs" / "golden-v1-0", copy)
    keep_first_time_index_entry(copy, "00000000000000000334")
    view, report, alone, read_again = both_answers(copy, reads)
    assert_same(report, alone)
    assert next(s for s in report.segments if s.base_offset == 334).timestamp_source == \
        "batches (time index incomplete)"
    assert not read_again


def test_repeating_timestamps(tmp_path, bulk, reads):
    """Timestamps that repeat batch after batch (as bench/run.py writes them): the time index's last
    entry lies near the start, and what follows it is most of the segment."""
    partition = tmp_path / "logs" / "repeating-0"
    partition.mkdir(parents=True)
    value = b"v" * 900
    (partition / f"{0:020d}.log").write_bytes(b"".join(
        build_batch(n * 4, [build_record(i, i, b"k", value) for i in range(4)], base_timestamp=T0 + n % 16,
                    max_timestamp=T0 + n % 16) for n in range(600)))
    list(Rebuild([partition], RebuildOptions(backup=False)))
    log = str(partition / f"{0:020d}.log")
    view, report, alone, read_again = both_answers(partition, reads)
    assert_same(report, alone)
    start = view.scanned_tails[log][0]
    assert 0 < start < Path(log).stat().st_size // 10 and not read_again
    assert (report.segments[0].largest_timestamp, report.segments[0].timestamp_source) == (T0 + 15, "time index")


def test_the_batch_at_the_start_holds_the_largest_timestamp(tmp_path, bulk, reads):
    """The first batch retention reads (the one the offset index points to) counts as the rest do."""
    partition = tmp_path / "logs" / "first-0"
    partition.mkdir(parents=True)

    def batch(n: int, timestamp: int) -> bytes:
        return build_batch(n, [build_record(0, 0, b"k", b"v" * 900)], base_timestamp=timestamp,
                           max_timestamp=timestamp)
    log = partition / f"{0:020d}.log"
    log.write_bytes(b"".join(batch(n, T0 + n) for n in range(300)))
    list(Rebuild([partition], RebuildOptions(backup=False)))
    start = keep_first_time_index_entry(partition, f"{0:020d}")
    first = next(n for n, (position, _, _) in enumerate(positions(log)) if position == start)
    data = bytearray(log.read_bytes())
    data[start : start + len(batch(first, 0))] = batch(first, T0 + 10_000)
    log.write_bytes(bytes(data))
    view, report, alone, read_again = both_answers(partition, reads)
    assert_same(report, alone)
    assert (report.segments[0].largest_timestamp, report.segments[0].timestamp_source) == \
        (T0 + 10_000, "batches (time index incomplete)")
    assert 0 < first and view.scanned_tails[str(log)] == (start, T0 + 10_000) and not read_again


def test_damage_before_the_start(mixed, bulk, reads):
    """The scan resyncs after damage early in the segment: its batches from the start on are still
    the ones retention's read takes."""
    start = keep_first_time_index_entry(mixed)
    log = mixed / f"{SEGMENT}.log"
    data = bytearray(log.read_bytes())
    data[100:400] = random.Random(26).randbytes(300)
    log.write_bytes(bytes(data))
    assert 400 < start
    view, report, alone, read_again = both_answers(mixed, reads)
    assert_same(report, alone)
    assert view.scanned_tails[str(log)][0] == start and not read_again
    assert any(f.file == str(log) and f.severity == "error" and f.position < start for f in view.findings)


def test_after_an_unclean_shutdown_both_recover_the_log(mixed, bulk, reads):
    """Without the clean shutdown marker Kafka's loader recovers every segment before retention: the
    report's answer is `kafkalog retention`'s: segment 424 cut at the damage, its largest timestamp
    the recovered batches' (the tail after the damage is gone, not skipped)."""
    before = damage(mixed, "garbage")
    view, report, alone, _ = both_answers(mixed, reads, shutdown=retention.AUTO)
    assert_same(report, alone)
    assert any("no clean shutdown marker in the log dir: Kafka's loader recovers the segments from offset 0" in note
               for note in report.notes)
    verdict = next(s for s in report.segments if s.base_offset == 424)
    assert (verdict.largest_timestamp, verdict.timestamp_source) == (before, "batches (recovered)")
    assert any(f"{SEGMENT}.log: Kafka's loader recovers the segment, cutting it to" in note for note in report.notes)

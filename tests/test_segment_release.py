"""The segment scan hands the pages behind it back to the kernel (RSS flat in the file's size),
and what it yielded before stays readable: a released page faults back in from the page cache."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kafkalog_tools.formats import segment as segment_module
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.formats.segment import SegmentFile

STEP = 1 << 20


def _write_segment(path: Path, batches: int) -> list[bytes]:
    values = [bytes([i % 251]) * 60_000 + i.to_bytes(4, "big") for i in range(batches)]
    with open(path, "wb") as out:
        for i, value in enumerate(values):
            out.write(build_batch(i, [build_record(0, 0, b"k%d" % i, value)], base_timestamp=i, max_timestamp=i))
    return values


def _mapped_rss_kib(path: Path) -> int | None:
    """Resident KiB of this process's mappings of `path`, from /proc/self/smaps."""
    try:
        text = Path("/proc/self/smaps").read_text()
    except OSError:
        return None
    total, inside = 0, False
    for line in text.splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            inside = line.endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def test_records_stay_readable_after_their_pages_are_released(tmp_path, monkeypatch):
    monkeypatch.setattr(segment_module, "RELEASE_STEP", STEP)
    path = tmp_path / "00000000000000000000.log"
    values = _write_segment(path, 200)  # ~12 MiB: a dozen releases
    with SegmentFile(path) as log:
        kept = [batch for batch in log.entries()]
        assert len(kept) == 200
        resident = _mapped_rss_kib(path)
        if resident is not None:
            # only the stretch after the last release is still mapped in, not the 12 MiB read
            assert resident <= 2 * STEP // 1024, resident
        # the first batches' pages were released long ago: reading them faults them back in
        for batch in (kept[0], kept[1], kept[100], kept[-1]):
            (record,) = batch.records()
            assert bytes(record.value) == values[batch.base_offset]
            assert batch.crc_valid


def test_a_scan_from_the_middle_releases_only_what_it_read(tmp_path, monkeypatch):
    monkeypatch.setattr(segment_module, "RELEASE_STEP", STEP)
    path = tmp_path / "00000000000000000000.log"
    values = _write_segment(path, 100)
    with SegmentFile(path) as log:
        batches = list(log.entries())
        middle = batches[50].position  # not page-aligned
        again = list(log.entries(middle))
        assert [b.base_offset for b in again] == list(range(50, 100))
        assert bytes(again[0].records()[0].value) == values[50]
        assert bytes(batches[10].records()[0].value) == values[10]


@pytest.mark.parametrize("step", [STEP, 1 << 40])
def test_release_changes_no_answer(tmp_path, monkeypatch, step):
    monkeypatch.setattr(segment_module, "RELEASE_STEP", step)
    path = tmp_path / "00000000000000000000.log"
    values = _write_segment(path, 60)
    with SegmentFile(path) as log:
        read = [bytes(b.records()[0].value) for b in log.entries()]
        assert log.stop is segment_module.Stop.END
    assert read == values

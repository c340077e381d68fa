"""lookup against the manifests (every batch and record Kafka parsed): every offset and timestamp of
every golden partition, through the indexes and by scanning; broken indexes fall back to a scan and
still give the right answer."""
from __future__ import annotations

import bisect
import json
import math
import shutil
from pathlib import Path

import struct

import pytest

from kafkalog_tools.formats import offset_index
from kafkalog_tools.formats.offset_index import OffsetIndex
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.lookup import OFFSET, TIMESTAMP, PartitionReader, Query, parse_timestamp
from tests.conftest import GOLDEN


def golden_partitions() -> list:
    if not GOLDEN.exists():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"shared corpus not found at {GOLDEN}"))]
    return sorted(p.name for p in (GOLDEN / "logs").iterdir())


class Expected:
    """Kafka's read path computed from the manifests: what every batch and record is."""

    def __init__(self, partition: str, log_dir: Path):
        folder = GOLDEN / "manifests" / "logs" / partition
        self.segments = [json.loads(p.read_text()) for p in sorted(folder.glob("0*.json"))]
        self.log_dir = log_dir
        self.answers = [(s["file"], b["position"], r["offset"], r["timestamp"])
                        for s in self.segments for b in s["batches"] for r in b["records"]]
        self.offsets = [answer[2] for answer in self.answers]
        self.by_segment = []
        """Per segment: its largest timestamp (or mtime), its answers, and the running max of
        their timestamps (the first record with timestamp >= T is where that max reaches T)."""
        for segment in self.segments:
            answers = [a for a in self.answers if a[0] == segment["file"]]
            running, top = [], -1
            for answer in answers:
                top = max(top, answer[3])
                running.append(top)
            largest = max((b["maxTimestamp"] for b in segment["batches"]), default=-1)
            if largest < 0:  # no timestamps: Kafka compares the file's mtime
                largest = (self.log_dir / segment["file"]).stat().st_mtime_ns // 1_000_000
            self.by_segment.append((largest, answers, running))

    def by_offset(self, target: int):
        if target < self.segments[0]["baseOffset"]:
            return None
        index = bisect.bisect_left(self.offsets, target)
        return self.answers[index] if index < len(self.answers) else None

    def by_timestamp(self, target: int):
        for largest, answers, running in self.by_segment:
            if largest >= target:
                index = bisect.bisect_left(running, target)
                return answers[index] if index < len(answers) else None
        return None

    def offsets_to_ask(self) -> list[int]:
        return list(range(-1, self.offsets[-1] + 3))

    def timestamps_to_ask(self) -> list[int]:
        stamps = {a[3] for a in self.answers if a[3] >= 0}
        return sorted({t + d for t in stamps for d in (0, 1)} | {0, 10 ** 13})


def answered(answer):
    return (Path(answer.segment).name, answer.batch_position, answer.offset, answer.timestamp) if answer.found else None


def check_all(directory: Path, expected: Expected, **options) -> list:
    """Every offset and timestamp; returns the answers (for their warnings)."""
    answers = []
    with PartitionReader(directory, **options) as reader:
        for target in expected.offsets_to_ask():
            answer = reader.lookup(Query(OFFSET, target))
            assert answered(answer) == expected.by_offset(target), f"offset {target}: {answer.reason}"
            answers.append(answer)
        for target in expected.timestamps_to_ask():
            answer = reader.lookup(Query(TIMESTAMP, target))
            assert answered(answer) == expected.by_timestamp(target), f"timestamp {target}: {answer.reason}"
            answers.append(answer)
    return answers


# ---------------------------------------------------------------------------------------------
# Every golden partition, through the indexes and by scanning
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("partition", golden_partitions())
@pytest.mark.parametrize("use_indexes", [True, False], ids=["indexes", "scan"])
def test_answers_equal_kafkas_read_path(partition, use_indexes):
    directory = GOLDEN / "logs" / partition
    answers = check_all(directory, Expected(partition, directory), use_indexes=use_indexes)
    assert not any(a.warnings for a in answers)


def test_the_index_saves_scanning(golden):
    directory = golden / "logs" / "golden-v2-mixed-0"
    with PartitionReader(directory) as indexed, PartitionReader(directory, use_indexes=False) as scanning:
        fast = indexed.lookup(Query(OFFSET, 1300))
        slow = scanning.lookup(Query(OFFSET, 1300))
    assert answered(fast) == answered(slow)
    assert fast.offset_index_entry["position"] == fast.scan_start > 0
    assert fast.bytes_scanned < 5000 < slow.bytes_scanned
    assert any("offset index entry" in step for step in fast.explanation)


def test_a_timestamp_answer_says_which_entries_it_used(golden):
    with PartitionReader(golden / "logs" / "golden-v2-mixed-0") as reader:
        answer = reader.lookup(Query(TIMESTAMP, 1700000030000))
    assert answer.time_index_entry == {"segment": "00000000000000000424.log", "slot": 2,
                                       "timestamp": 1700000029719, "offset": 543}
    assert answer.offset_index_entry["offset"] == 543
    assert answer.explanation[0].startswith("segment 00000000000000000424.log: the first whose largest timestamp")


def test_offsets_outside_the_log(golden):
    with PartitionReader(golden / "logs" / "golden-v2-mixed-0") as reader:
        below, at_end, beyond = (reader.lookup(Query(OFFSET, o)) for o in (-5, 2025, 9999))
    assert "below the log start offset 0" in below.reason
    assert at_end.reason.endswith("(nothing there yet)") and "log end offset 2025" in beyond.reason
    assert not (below.found or at_end.found or beyond.found or beyond.damaged)


# ---------------------------------------------------------------------------------------------
# Missing or broken indexes: a scan, a warning, the right answer
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def mixed(golden, tmp_path) -> Path:
    work = tmp_path / "golden-v2-mixed-0"
    shutil.copytree(golden / "logs" / "golden-v2-mixed-0", work)
    for path in work.iterdir():
        path.chmod(0o644)
    return work


def rewrite_offset_index(work: Path, base: int, change) -> None:
    path = work / f"{base:020d}.index"
    entries = [(e.offset, e.position) for e in OffsetIndex(path).entries()]
    change(entries)
    path.write_bytes(offset_index.build(entries, base))


def warned(answers, text: str) -> bool:
    return any(text in w for a in answers for w in a.warnings)


def test_missing_indexes(mixed):
    for path in mixed.glob("00000000000000000424.*index"):
        path.unlink()
    answers = check_all(mixed, Expected("golden-v2-mixed-0", mixed))
    assert warned(answers, "00000000000000000424.index is missing")
    assert warned(answers, "00000000000000000424.timeindex is missing")


def test_an_index_that_is_not_whole_entries(mixed):
    path = mixed / "00000000000000000838.index"
    path.write_bytes(path.read_bytes()[:-3])
    assert warned(check_all(mixed, Expected("golden-v2-mixed-0", mixed)), "not a whole number of entries")


def test_entries_off_batch_boundaries(mixed):
    rewrite_offset_index(mixed, 424, lambda e: e.__setitem__(slice(None), [(o, p + 1) for o, p in e]))
    assert warned(check_all(mixed, Expected("golden-v2-mixed-0", mixed)), "where no valid batch starts")


def test_a_structurally_sound_entry_that_skips_its_offset(mixed):
    """Entry (O, P) where P is after the batch holding O: a lookup starting at P would miss it."""
    batches = json.loads((GOLDEN / "manifests/logs/golden-v2-mixed-0/00000000000000000424.json").read_text())["batches"]
    after = {b["position"]: batches[i + 1]["position"] for i, b in enumerate(batches[:-1])}

    def skip(entries):
        offset, position = entries[3]
        entries[3] = (offset, after[position])

    rewrite_offset_index(mixed, 424, skip)
    assert warned(check_all(mixed, Expected("golden-v2-mixed-0", mixed)), "skips batches holding offset")


def test_an_offset_index_out_of_order_is_caught_by_the_binary_search(mixed):
    """The search reads only O(log n) entries, but one that contradicts those read before it sends
    the lookup to the whole index, which says what is wrong; every answer stays right."""
    rewrite_offset_index(mixed, 424, lambda e: e.__setitem__(slice(2, 4), [e[3], e[2]]))
    expected = Expected("golden-v2-mixed-0", mixed)
    answers = []
    with PartitionReader(mixed) as reader:  # offsets only: a time index search may pass over the pair
        for target in expected.offsets_to_ask():
            answers.append(reader.lookup(Query(OFFSET, target)))
            assert answered(answers[-1]) == expected.by_offset(target)
    assert warned(answers, "00000000000000000424.index is broken")


@pytest.mark.parametrize("keep, slot", [(None, 0), (None, 3), (1, 0)], ids=["first-entry", "middle-entry", "only-entry"])
def test_an_offset_index_entry_before_the_start_of_the_log(mixed, keep, slot):
    """A position read as a negative int32 (a flipped top bit): Kafka's read would fail on it. A
    lookup distrusts the index and scans, by offset (binary search) and by timestamp (the tail after
    the last offset index entry is scanned: from a negative one, a traceback before), and every
    answer stays right."""

    def negative(entries):
        del entries[keep or len(entries):]
        entries[slot] = (entries[slot][0], entries[slot][1] - (1 << 31))

    rewrite_offset_index(mixed, 424, negative)
    answers = check_all(mixed, Expected("golden-v2-mixed-0", mixed))
    assert warned(answers, f"00000000000000000424.index is broken (entry {slot} points at byte -")


def test_a_timestamp_lookup_past_an_active_index_entry_before_the_start_of_the_log(mixed):
    """The active segment's largest timestamp scans the batches after its offset index's last entry,
    which a lookup by timestamp alone reads through a probe of the index (not the whole index): a
    negative position there (a flipped top bit) was read from, a traceback (mutation fuzzer, seed
    3202). The probe's entry is not where a batch starts: the scan starts where the table says."""
    rewrite_offset_index(mixed, 1839, lambda e: e.__setitem__(-1, (e[-1][0], e[-1][1] - (1 << 31))))
    expected = Expected("golden-v2-mixed-0", mixed)
    for target in expected.timestamps_to_ask():
        with PartitionReader(mixed) as reader:
            answer = reader.lookup(Query(TIMESTAMP, target))
        assert answered(answer) == expected.by_timestamp(target), f"timestamp {target}: {answer.reason}"


def test_a_time_index_out_of_order_and_one_with_a_zero_tail(mixed):
    path = mixed / "00000000000000001323.timeindex"
    data = path.read_bytes()
    path.write_bytes(data[12:24] + data[:12] + data[24:])
    zero_tailed = mixed / "00000000000000000000.timeindex"
    zero_tailed.write_bytes(zero_tailed.read_bytes() + bytes(120))
    answers = check_all(mixed, Expected("golden-v2-mixed-0", mixed))
    assert warned(answers, "00000000000000001323.timeindex is broken")
    assert warned(answers, "zero-filled tail after 14 entries on a closed segment")


def test_a_closed_segment_without_its_final_time_entry_is_judged_by_the_last_entry_it_has(mixed):
    """Kafka takes a segment's largest timestamp from its time index's last entry (closing a segment
    appends the max there; LogSegment.readMaxTimestampAndOffsetSoFar): a closed segment that lacks it
    is judged by the entry it has, as by a broker that loaded it, and its unindexed batches are not
    read (12 bytes per segment passed over)."""
    path = mixed / "00000000000000000424.timeindex"
    kept = path.read_bytes()[:-12]
    path.write_bytes(kept)
    expected = Expected("golden-v2-mixed-0", mixed)
    number = [s["file"] for s in expected.segments].index("00000000000000000424.log")
    true_largest, answers, running = expected.by_segment[number]
    last_entry = struct.unpack(">q", kept[-12:-4])[0]
    assert last_entry < true_largest
    expected.by_segment[number] = (last_entry, answers, running)
    check_all(mixed, expected)


# ---------------------------------------------------------------------------------------------
# Segments built here: gaps, damage, the log start offset
# ---------------------------------------------------------------------------------------------


def batch(base_offset: int, offsets: list[int], timestamp: int, last_offset_delta: int | None = None) -> bytes:
    records = [build_record(o - base_offset, 0, None, b"v") for o in offsets]
    return build_batch(base_offset, records, base_timestamp=timestamp, max_timestamp=timestamp,
                       last_offset_delta=last_offset_delta)


def partition(tmp_path: Path, chunks: list[bytes], base: int = 0) -> Path:
    directory = tmp_path / "logs" / "t-0"
    directory.mkdir(parents=True)
    (directory / f"{base:020d}.log").write_bytes(b"".join(chunks))
    return directory


def test_an_offset_in_a_compaction_gap_answers_the_next_record(tmp_path):
    # the second batch kept its last offset delta (5) though its records 11..15 were compacted away
    directory = partition(tmp_path, [batch(0, [0, 1, 2], 1000), batch(10, [10], 1001, last_offset_delta=5),
                                     batch(20, [20, 21], 1002)])
    with PartitionReader(directory) as reader:
        in_gap, inside_emptied, exact = (reader.lookup(Query(OFFSET, o)) for o in (5, 12, 21))
    assert (in_gap.offset, in_gap.batch_base_offset) == (10, 10)
    assert (inside_emptied.offset, inside_emptied.batch_base_offset) == (20, 20)
    assert exact.offset == 21 and "compaction leaves gaps" in inside_emptied.explanation[-1]


def test_the_log_start_offset_checkpoint_bounds_lookups(tmp_path):
    directory = partition(tmp_path, [batch(0, [0, 1, 2], 1000), batch(3, [3, 4, 5], 1005)])
    (directory.parent / "log-start-offset-checkpoint").write_text("0\n1\nt 0 4\n")
    with PartitionReader(directory) as reader:
        below, start = reader.lookup(Query(OFFSET, 3)), reader.lookup(Query(OFFSET, 4))
        by_time = reader.lookup(Query(TIMESTAMP, 0))
    assert not below.found and "log start offset 4" in below.reason
    assert start.offset == 4 and by_time.offset == 4


def test_zeros_in_the_way_are_damage_not_a_wrong_answer(tmp_path):
    directory = partition(tmp_path, [batch(0, [0, 1, 2], 1000), bytes(200), batch(3, [3], 1001)])
    with PartitionReader(directory) as reader:
        answer = reader.lookup(Query(OFFSET, 3))
        early = reader.lookup(Query(OFFSET, 1))
    assert not answer.found and answer.damaged and "minimum record overhead" in answer.reason
    assert early.found and early.offset == 1


def test_a_crc_failure_is_read_as_kafka_reads_it_with_a_warning(tmp_path):
    data = bytearray(batch(0, [0, 1, 2], 1000))
    data[21] ^= 0xFF  # the attributes' high byte: covered by the CRC, ignored by readers
    directory = partition(tmp_path, [bytes(data)])
    with PartitionReader(directory) as reader:
        answer = reader.lookup(Query(OFFSET, 1))
    assert answer.found and any("fails its CRC" in w for w in answer.warnings)


def test_a_directory_without_segments_is_an_input_error(tmp_path):
    from kafkalog_tools.errors import InputError

    (tmp_path / "t-0").mkdir()
    with pytest.raises(InputError, match="no .log segments"):
        PartitionReader(tmp_path / "t-0")


@pytest.mark.parametrize("text, millis", [
    ("1700000000000", 1700000000000),
    ("2023-11-14T22:13:20Z", 1700000000000),
    ("2023-11-14T22:13:20.250+00:00", 1700000000250),
    ("2023-11-14T23:13:20+01:00", 1700000000000),
    ("2023-11-14T22:13:20", 1700000000000),  # no zone: UTC
])
def test_timestamps_in_milliseconds_or_iso_8601(text, millis):
    assert parse_timestamp(text) == millis


@pytest.mark.parametrize("text", ["yesterday", "-5", "1.5", ""])
def test_what_is_not_a_timestamp(text):
    with pytest.raises(ValueError):
        parse_timestamp(text)


# ---------------------------------------------------------------------------------------------
# What a lookup reads: counted, not timed
# ---------------------------------------------------------------------------------------------


def test_an_offset_lookup_reads_log_n_index_entries_and_at_most_one_index_interval_of_log(tmp_path):
    """Many segments: the segment comes from the file names (no bytes read), then a binary search
    reads O(log n) entries of one .index, and the scan from the entry found covers at most one index
    interval of batches besides the batch the entry points at and the batch holding the answer."""
    from kafkalog_tools.recovery import DEFAULT_INDEX_INTERVAL_BYTES, Rebuild, RebuildOptions

    partition = tmp_path / "many-0"
    partition.mkdir()
    offset, batch_sizes = 0, set()
    for _ in range(40):  # segments
        with open(partition / f"{offset:020d}.log", "wb") as log:
            for count in (3, 1, 7, 2, 5) * 16:  # batches of uneven sizes
                batch = build_batch(offset, [build_record(i, i, b"k", bytes(300 * (i + 1))) for i in range(count)],
                                    base_timestamp=offset, max_timestamp=offset + count - 1)
                batch_sizes.add(len(batch))
                log.write(batch)
                offset += count
    list(Rebuild([partition], RebuildOptions(backup=False)))
    index_sizes = {p.name[:-6]: p.stat().st_size for p in partition.glob("*.index")}
    assert len(index_sizes) == 40 and min(index_sizes.values()) > 8
    for target in range(0, offset, 7):
        with PartitionReader(partition) as reader:  # nothing cached from an earlier query
            answer = reader.lookup(Query(OFFSET, target))
        assert answer.found and answer.offset == target
        entries = index_sizes[Path(answer.segment).name[:-4]] // 8
        # entry 0, the last entry (is there a zero tail?), a binary search, the entry before the answer's
        assert answer.index_entries_read <= 3 + math.ceil(math.log2(entries + 1)) < entries
        assert answer.index_bytes_read == 8 * answer.index_entries_read
        assert answer.bytes_scanned <= DEFAULT_INDEX_INTERVAL_BYTES + 2 * max(batch_sizes)


def test_a_timestamp_lookup_reads_12_bytes_per_segment_passed_and_a_binary_search(tmp_path):
    """Many segments: each segment passed over costs the last entry of its time index (12 bytes,
    Kafka's largest timestamp); in the chosen one, binary searches of its .timeindex and .index;
    the .log bytes scanned (counted, tail scans included) stay within one index interval besides
    the batches at either end. Answers equal a scan of every segment."""
    from kafkalog_tools.recovery import DEFAULT_INDEX_INTERVAL_BYTES, Rebuild, RebuildOptions

    partition = tmp_path / "many-0"
    partition.mkdir()
    offset, batch_sizes, bases = 0, set(), []
    for _ in range(60):  # segments
        bases.append(offset)
        with open(partition / f"{offset:020d}.log", "wb") as log:
            for count in (3, 1, 7, 2, 5) * 16:  # batches of uneven sizes, timestamps 10 x offset
                batch = build_batch(offset, [build_record(i, 10 * i, b"k", bytes(300 * (i + 1))) for i in range(count)],
                                    base_timestamp=10 * offset, max_timestamp=10 * (offset + count - 1))
                batch_sizes.add(len(batch))
                log.write(batch)
                offset += count
    list(Rebuild([partition], RebuildOptions(backup=False)))
    entries = max(p.stat().st_size for p in partition.glob("*.timeindex")) // 12
    search = math.ceil(math.log2(entries + 1)) + 1
    with PartitionReader(partition, use_indexes=False) as scanning:
        for target in range(-5, 10 * offset + 20, 10 * offset // 97):
            with PartitionReader(partition) as reader:  # nothing cached from an earlier query
                answer = reader.lookup(Query(TIMESTAMP, target))
            assert answered(answer) == answered(scanning.lookup(Query(TIMESTAMP, target))), target
            if not answer.found:
                continue
            passed = bases.index(int(Path(answer.segment).name[:-4]))
            assert answer.index_bytes_read <= 12 * (passed + search) + 8 * (search + 3), target
            assert answer.bytes_scanned <= DEFAULT_INDEX_INTERVAL_BYTES + 2 * max(batch_sizes), target
            assert answer.warnings == []

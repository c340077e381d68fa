"""--spark on segments bigger than a task: a segment is cut into byte ranges at the batch starts its
offset index gives, each range is read by a task of its own, and stage 2 puts them together as one
walk reads the segment. A real local Spark session (local[2]); splitting forced with a small
`spark.kafkalog.rangeBytes`. The findings and summary equal one process's: on a generated
partition of two big segments (idempotent and transactional producers, every codec, leader epoch
changes) clean, and copies of it damaged inside a range, at a range start, across one, with an
offset index entry off a batch start, and with the active segment's end cut or zero-filled; and on
the corpus."""
from __future__ import annotations

import bisect
import random
import shutil
import struct
from pathlib import Path

import pytest

from kafkalog_tools.errors import InputError
from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, build_batch, build_record
from kafkalog_tools.spark import plan
from kafkalog_tools.verify import Verification
from tests.damage import corpus_paths

T0 = 1_700_000_000_000
RANGE_BYTES = 192 << 10
"""Forced range size: the generated segments are 3 MiB and 2 MiB, ~16 and ~10 ranges."""
SEGMENT_BYTES = (3 << 20, 2 << 20)
INDEX_INTERVAL = 4096


@pytest.fixture(scope="module")
def spark():
    from kafkalog_tools.spark.session import start_session

    session = start_session("local[2]", {"spark.ui.showConsoleProgress": "false"})
    yield session
    session.stop()


@pytest.fixture
def split_at(spark):
    """Sets `spark.kafkalog.rangeBytes` for a test, unset afterwards."""
    def setting(value: int) -> None:
        spark.conf.set(plan.RANGE_BYTES_CONF, str(value))
    yield setting
    spark.conf.unset(plan.RANGE_BYTES_CONF)


# ---------------------------------------------------------------------------------------------
# A generated partition of two big segments, and damaged copies of it
# ---------------------------------------------------------------------------------------------


def write_partition(directory: Path, seed: int = 24) -> list[list[int]]:
    """Two segments (the second active) of V2 batches as a broker appends them, with offset and
    time indexes every INDEX_INTERVAL bytes and the leader-epoch-checkpoint; returns each
    segment's batch positions."""
    rng = random.Random(seed)
    directory.mkdir(parents=True)
    sequences = {1000: 0, 1001: 0, 1002: 0, 2000: 0}
    offset, epoch, epochs, positions = 0, 0, [(0, 0)], []
    for budget in SEGMENT_BYTES:
        base, log, index, timeindex, since_index, starts = offset, bytearray(), bytearray(), bytearray(), 0, []
        while len(log) < budget:
            if rng.random() < 0.005:
                epoch += 1
                epochs.append((epoch, offset))
            transactional = rng.random() < 0.1
            producer = 2000 if transactional else rng.choice([1000, 1001, 1002])
            count = rng.randrange(1, 12)
            records = [build_record(i, 10 * i, rng.choice([None, f"key-{rng.randrange(50)}".encode()]),
                                    rng.randbytes(rng.randrange(0, 300)) * rng.randrange(1, 8)) for i in range(count)]
            batches = [(build_batch(offset, records, base_timestamp=T0 + 10 * offset,
                                    max_timestamp=T0 + 10 * (offset + count - 1), compression_id=rng.randrange(5),
                                    attributes=ATTR_TRANSACTIONAL if transactional else 0, producer_id=producer,
                                    producer_epoch=0, base_sequence=sequences[producer],
                                    partition_leader_epoch=epoch), count)]
            sequences[producer] += count
            if transactional:  # and its COMMIT marker
                marker = build_record(0, 0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 3))
                at = offset + count
                batches.append((build_batch(at, [marker], base_timestamp=T0 + 10 * at, max_timestamp=T0 + 10 * at,
                                            attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, producer_id=producer,
                                            producer_epoch=0, partition_leader_epoch=epoch), 1))
            for batch, taken in batches:
                last = offset + taken - 1
                if since_index > INDEX_INTERVAL:  # LogSegment.append: an entry at the start of the batch
                    index += struct.pack(">ii", last - base, len(log))
                    timeindex += struct.pack(">qi", T0 + 10 * last, last - base)
                    since_index = 0
                since_index += len(batch)
                starts.append(len(log))
                log += batch
                offset = last + 1
        if struct.unpack_from(">q", timeindex, len(timeindex) - 12)[0] < T0 + 10 * (offset - 1):
            timeindex += struct.pack(">qi", T0 + 10 * (offset - 1), offset - 1 - base)  # written on roll
        name = directory / f"{base:020d}"
        name.with_suffix(".log").write_bytes(log)
        name.with_suffix(".index").write_bytes(index)
        name.with_suffix(".timeindex").write_bytes(timeindex)
        positions.append(starts)
    (directory / "leader-epoch-checkpoint").write_text(
        f"0\n{len(epochs)}\n" + "".join(f"{e} {start}\n" for e, start in epochs))
    return positions


def cuts(log: Path) -> list[int]:
    """Where the split starts the ranges of this segment (after the first)."""
    size = log.stat().st_size
    return plan.range_starts(log.with_suffix(".index"), int(log.name[:20]), size, size // RANGE_BYTES)


def _flip(log: Path, at: int) -> None:
    data = bytearray(log.read_bytes())
    data[at] ^= 0x40
    log.write_bytes(bytes(data))


def _containing(starts: list[int], position: int) -> int:
    return starts[bisect.bisect_right(starts, position) - 1]


@pytest.fixture(scope="module")
def damaged_partitions(tmp_path_factory) -> Path:
    """A log dir of the generated partition (big-0) and damaged copies of it (big-1..big-7)."""
    root = tmp_path_factory.mktemp("split") / "kafka-logs"
    root.mkdir()
    (root / "meta.properties").write_text("version=0\nbroker.id=1\n")
    starts = write_partition(root / "big-0")
    for number in range(1, 8):
        shutil.copytree(root / "big-0", root / f"big-{number}")
    def seg0(number: int) -> Path:
        return sorted((root / f"big-{number}").glob("*.log"))[0]

    def seg1(number: int) -> Path:
        return sorted((root / f"big-{number}").glob("*.log"))[1]

    c0, c1 = cuts(seg0(0)), cuts(seg1(0))
    assert len(c0) >= 12 and len(c1) >= 8, (c0, c1)
    # 1: a CRC mismatch inside a range
    inside = _containing(starts[0], (c0[1] + c0[2]) // 2)
    assert c0[1] < inside < c0[2]
    _flip(seg0(1), inside + 100)
    # 2: at a range start, a CRC mismatch; at another, a length field running past the end
    _flip(seg0(2), c0[3] + 30)
    data = bytearray(seg0(2).read_bytes())
    data[c0[5] + 8: c0[5] + 12] = (0x7FFF0000).to_bytes(4, "big")
    seg0(2).write_bytes(bytes(data))
    # 3: zeros across a range start: the resync lands in the next range
    data = bytearray(seg0(3).read_bytes())
    data[c0[2] - 2500: c0[2] + 2500] = bytes(5000)
    seg0(3).write_bytes(bytes(data))
    # 4: offset index entries off a batch start, where ranges start
    index = seg0(4).with_suffix(".index")
    entries = bytearray(index.read_bytes())
    for cut, off in ((c0[2], 5), (c0[6], 700)):
        slot = next(s for s in range(len(entries) // 8) if struct.unpack_from(">i", entries, 8 * s + 4)[0] == cut)
        struct.pack_into(">i", entries, 8 * slot + 4, cut + off)
    index.write_bytes(bytes(entries))
    assert {c0[2] + 5, c0[6] + 700} <= set(cuts(seg0(4)))
    # 5: the active segment's last batch cut short
    data = seg1(5).read_bytes()
    seg1(5).write_bytes(data[:-100])
    # 6: damage in the middle of the active segment, and zeros after its last batch
    _flip(seg1(6), _containing(starts[1], c1[len(c1) // 2] + 1000) + 80)
    seg1(6).write_bytes(seg1(6).read_bytes() + bytes(10000))
    # 7: a batch deep in the active segment whose base offset (outside the CRC) is below the segment's:
    # one pass orders stage 2's offset-not-increasing before stage 1's offset-below-segment-base
    data = bytearray(seg1(7).read_bytes())
    struct.pack_into(">q", data, _containing(starts[1], c1[len(c1) // 2] + 1000), 5)
    seg1(7).write_bytes(bytes(data))
    return root


# ---------------------------------------------------------------------------------------------
# Equal to one process
# ---------------------------------------------------------------------------------------------


def assert_split_same_as_one_process(spark, paths: list[str], deep: bool, stage_2_on: str | None = None,
                                     read_as: str | None = None):
    from kafkalog_tools.spark.verify import SparkVerification

    local = Verification(paths, deep=deep, read_as=read_as)
    expected = [f.to_json() for f in local]
    on_spark = SparkVerification(spark, paths, deep=deep, stage_2_on=stage_2_on, read_as=read_as)
    assert [f.to_json() for f in on_spark] == expected
    assert on_spark.summary == local.summary
    assert on_spark.target_summaries == local.target_summaries
    return expected, on_spark


@pytest.mark.parametrize("deep, stage_2_on, read_as", [
    (True, "driver", "offline"), (False, "driver", "offline"), (True, "executors", "offline"),
    (False, "executors", "offline"), (True, "driver", "live")], ids=lambda value: str(value))
def test_split_segments_give_one_process_findings(spark, split_at, damaged_partitions, deep, stage_2_on, read_as):
    split_at(RANGE_BYTES)
    findings, run = assert_split_same_as_one_process(spark, [str(damaged_partitions)], deep, stage_2_on, read_as)
    ranges = [unit for unit in run.units if unit.part is not None]
    assert len(ranges) >= 8 * 20 and all(unit.size < 2 * RANGE_BYTES for unit in run.units)
    codes: dict[str, set[str]] = {f"big-{number}": set() for number in range(8)}
    for finding in findings:
        if finding["severity"] != "info":
            codes[Path(finding["file"]).parent.name].add(finding["code"])
    assert codes["big-0"] == set()
    assert {"crc-mismatch"} <= codes["big-1"]
    assert {"crc-mismatch", "corrupt-length"} <= codes["big-2"]
    assert {"crc-mismatch", "index-position-not-batch-start"} <= codes["big-3"]  # the range's start is zeros
    assert {"index-position-not-batch-start"} <= codes["big-4"]
    tail = "still-being-written" if read_as == "live" else "truncated-tail"
    assert tail in codes["big-5"] and tail in codes["big-6"] and "crc-mismatch" in codes["big-6"]
    assert {"offset-below-segment-base", "offset-not-increasing"} <= codes["big-7"]


def test_a_split_golden_corpus_gives_one_process_findings(spark, split_at):
    split_at(4096)  # every segment of two index intervals or more
    for deep in (True, False):
        _, run = assert_split_same_as_one_process(spark, corpus_paths(), deep)
        split = {unit.segment.log for unit in run.units if unit.part is not None}
        assert len(split) > 50, len(split)


def test_ranges_start_where_the_offset_index_says_and_only_big_local_indexed_segments_are_cut(tmp_path, spark):
    write_partition(tmp_path / "t-0")
    logs = sorted((tmp_path / "t-0").glob("*.log"))
    size = logs[0].stat().st_size
    starts = cuts(logs[0])
    index = logs[0].with_suffix(".index").read_bytes()
    positions = [struct.unpack_from(">i", index, 8 * slot + 4)[0] for slot in range(len(index) // 8)]
    assert set(starts) <= set(positions) and starts == sorted(starts) and 0 < starts[0] and starts[-1] < size
    for number, start in enumerate(starts, 1):  # each the first entry at or after its share
        assert positions[bisect.bisect_left(positions, size * number // (size // RANGE_BYTES))] == start
    # a preallocated (zero-filled) tail adds no range start
    logs[1].with_suffix(".index").write_bytes(logs[1].with_suffix(".index").read_bytes() + bytes(8000))
    assert cuts(logs[1]) == plan.range_starts(logs[1].with_suffix(".index"), int(logs[1].name[:20]),
                                              logs[1].stat().st_size, logs[1].stat().st_size // RANGE_BYTES) != []
    from kafkalog_tools.spark.verify import SparkVerification

    run = SparkVerification(spark, [str(tmp_path / "t-0")])
    units = plan.segment_units(run.targets, run.layout)
    run.layout.close()
    whole = plan.split(units, cores=2, range_bytes=0)
    assert whole == units
    cut = plan.split(units, cores=2, range_bytes=RANGE_BYTES)
    assert [unit.part for unit in cut if unit.segment.log == logs[0]] == list(zip([0, *starts], [*starts, None]))
    assert sum(unit.size for unit in cut) == sum(unit.size for unit in units)
    # by default a range is at least RANGE_MIN_BYTES: these segments stay whole
    assert plan.split(units, cores=2) == units
    logs[0].with_suffix(".index").unlink()
    units = plan.segment_units(SparkVerification(spark, [str(tmp_path / "t-0")]).targets, run.layout)
    assert [unit.part for unit in plan.split(units, cores=2, range_bytes=RANGE_BYTES)
            if unit.segment.log == logs[0]] == [None]


def test_a_range_size_that_is_not_a_number_of_bytes_is_one_message(spark, split_at, tmp_path):
    from kafkalog_tools.spark.verify import SparkVerification

    spark.conf.set(plan.RANGE_BYTES_CONF, "64MiB")
    write_partition(tmp_path / "t-0")
    with pytest.raises(InputError, match=r"spark.kafkalog.rangeBytes=64MiB: give a whole number of bytes"):
        list(SparkVerification(spark, [str(tmp_path / "t-0")]))

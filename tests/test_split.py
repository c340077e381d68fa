"""The loader's split of a segment whose offsets overflow it (KAFKA-6264, `kafkalog_tools.split`).

The expected values are Kafka 4.0's answers on these bytes (kafka-oracle `retain`, and `recover --mode
loader` for the pieces' files), checked live; `test_against_kafka.py` compares random ones live."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from kafkalog_tools.cli import cli
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.formats.segment import SegmentFile
from kafkalog_tools.split import CHUNK_CAPACITY, has_overflow, split_segment, write_pieces

T0 = 1_700_000_000_000


def _batch(offset: int, value: bytes = b"v", timestamp: int = T0) -> bytes:
    return build_batch(offset, [build_record(0, 0, b"k", value)], base_timestamp=timestamp, max_timestamp=timestamp)


def _segment(partition, base: int, data: bytes, indexed: bool = False):
    partition.mkdir(parents=True, exist_ok=True)
    log = partition / f"{base:020d}.log"
    log.write_bytes(data)
    if indexed:
        for suffix in (".index", ".timeindex"):
            log.with_suffix(suffix).write_bytes(b"")
    for path in partition.iterdir():
        os.utime(path, ns=(T0 * 1_000_000, T0 * 1_000_000))
    return log


def _retention(partition, *options):
    """`kafkalog retention` after a clean shutdown (Kafka's retain without --unclean)."""
    (partition.parent / ".kafka_cleanshutdown").write_bytes(b"")
    result = CliRunner().invoke(cli, ["retention", "--format", "json", "--now", str(T0 + 10**6), "--retention-ms", "-1",
                                      *options, str(partition)])
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    return result.exit_code, objects[-1], [o for o in objects if o["type"] == "segment"]


def test_offsets_that_jump_past_int_max_split_the_segment_and_retention_judges_the_pieces(tmp_path):
    """Segment 0 (no .index: the loader recovers it) holds offsets 0-4, then 3,000,000,000-002, then
    7,000,000,000 with a smaller timestamp. Kafka's retain (retention.bytes 150): the pieces 0 (350
    bytes), 3000000000 (210) and 7000000000 (70) in its place, segment 0 deleted by size, the log start
    offset 3000000000, the log end 7000000002. We said the loader cannot open the log."""
    partition = tmp_path / "logs" / "t-0"
    _segment(partition, 0, b"".join(_batch(n, timestamp=T0 + n) for n in range(5))
             + b"".join(_batch(3_000_000_000 + n, timestamp=T0 + 10 + n) for n in range(3))
             + _batch(7_000_000_000, timestamp=T0 + 5))
    _segment(partition, 7_000_000_001, _batch(7_000_000_001, timestamp=T0 + 20))
    code, summary, segments = _retention(partition, "--retention-bytes", "150")
    assert (code, summary["log_end_offset"], summary["new_log_start_offset"]) == (0, 7_000_000_002, 3_000_000_000)
    assert [(s["base_offset"], s["size"], s["largest_timestamp"], s["deleted_by"]) for s in segments] == [
        (0, 350, T0 + 4, "size"), (3_000_000_000, 210, T0 + 12, None), (7_000_000_000, 70, T0 + 5, None),
        (7_000_000_001, 70, T0 + 20, None)]
    assert segments[1]["file"] == str(partition / "00000000003000000000.log")  # named as Kafka names the piece
    assert any("splits the segment (KAFKA-6264) into segments at base offsets 0, 3000000000, 7000000000" in note
               for note in summary["notes"])
    assert not (partition / "00000000003000000000.log").exists()  # nothing written


@pytest.mark.parametrize("data, kafka_says", [
    # the overflow mid-segment, the last batch back in range: require(hasOverflow) fails
    (_batch(0) + _batch(3_000_000_000) + _batch(1), "split refuses the segment (IllegalArgumentException)"),
    # bytes after the last batch: no batch to start the next piece at (NoSuchElementException)
    (_batch(0) + _batch(3_000_000_000) + bytes(3), "no batch can be read at 140 (NoSuchElementException)"),
    # a piece at 0 again: creating it deletes the first piece's files, whose swap then fails
    (_batch(0) + _batch(3_000_000_000) + _batch(0) + _batch(3_000_000_001),
     "two pieces would start at the same offset"),
])
def test_where_kafkas_split_throws_the_loader_cannot_open_the_log(tmp_path, data, kafka_says):
    """Kafka's retain: IllegalArgumentException ('Split operation is only permitted for segments with
    overflow'), NoSuchElementException, NoSuchFileException (...0.log.cleaned), stage open."""
    partition = tmp_path / "logs" / "t-0"
    _segment(partition, 0, data)
    code, summary, _ = _retention(partition)
    assert code == 1 and summary["log_end_offset"] is None
    assert "Kafka's loader cannot open the log" in summary["problems"][0] and kafka_says in summary["problems"][0]


def test_the_pieces_are_appended_in_chunks_of_one_mebibyte_as_kafkas(tmp_path):
    """LogSegment.appendFromFile: 50 batches of 70 KB then, past the overflow, one of 1.5 MB (a chunk of
    its own, which grows the buffer) and 30 of 90 KB. Kafka's loader (`recover --mode loader`, the pieces
    followed by an indexed segment so that none is recovered again) writes these index entries, and the
    same bytes as `write_pieces` (checked live)."""
    partition = tmp_path / "logs" / "t-0"
    log = _segment(partition, 0, b"".join(_batch(n, b"x" * 70_000, T0 + n * 37 % 100) for n in range(50))
                   + _batch(5_000_000_000, b"y" * 1_500_000, T0 + 7)
                   + b"".join(_batch(5_000_000_001 + n, b"z" * 90_000, T0 + n * 53 % 200) for n in range(30)))
    with SegmentFile(log) as segment:
        pieces = split_segment(segment, 4096)
        files = write_pieces(pieces, segment, tmp_path)
    assert [(p.base_offset, p.start, p.end, list(p.offset_entries), list(p.time_entries)) for p in pieces] == [
        (0, 0, 3_503_650, [(27, 981_022), (41, 1_962_044), (49, 2_943_066)], [(T0 + 99, 27)]),
        (5_000_000_000, 3_503_650, 7_705_915, [(5_000_000_016, 1_500_075), (5_000_000_030, 2_941_243)],
         [(T0 + 195, 5_000_000_016)])]
    assert [os.path.basename(f.log) for f in files] == ["00000000000000000000.log", "00000000005000000000.log"]
    assert [f.index.stat().st_size for f in files] == [24, 16]
    assert [f.timeindex.stat().st_size for f in files] == [12, 12]
    assert all(f.log.stat().st_mtime_ns == T0 * 1_000_000 for f in files)
    assert 14 * 70_073 < CHUNK_CAPACITY <= 15 * 70_073  # a chunk stays below the buffer: 14 batches, not 15


def test_has_overflow_is_about_the_last_offset():
    """LogSegment.hasOverflow: the last batch's last offset (next offset - 1) is past base + Int.MaxValue;
    a next offset at or below the base (an empty segment) is none."""
    assert has_overflow(0, 2**31 + 1) and not has_overflow(0, 2**31)
    assert not has_overflow(10, 10) and not has_overflow(10, 5)


def test_a_split_can_move_the_first_segment_and_the_log_start_offset(tmp_path):
    """Segment 0's offsets all moved up by 2^31 (2147483648-650), segment 3 after it, no clean shutdown
    marker: the loader recovers segment 0, splits it into one piece at 2147483648, which sorts after
    segment 3, and sets the log start offset to the first segment's base, 3. Kafka's retain --unclean
    (retention.bytes 100): log start 3 before, segment 3 deleted by size, 2147483648 after, log end
    2147483651 (found by CI's differential run, seed 491868146: our cleaner started its dirty range
    at 0)."""
    partition = tmp_path / "logs" / "t-0"
    _segment(partition, 0, b"".join(_batch(2**31 + n, timestamp=T0 + n) for n in range(3)), indexed=True)
    _segment(partition, 3, b"".join(_batch(3 + n, timestamp=T0 + 10 + n) for n in range(3)), indexed=True)
    result = CliRunner().invoke(cli, ["retention", "--format", "json", "--now", str(T0 + 10**6), "--retention-ms", "-1",
                                      "--retention-bytes", "100", str(partition)])
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    summary = objects[-1]
    assert (result.exit_code, summary["log_start_offset"], summary["new_log_start_offset"], summary["log_end_offset"]) \
        == (0, 3, 2**31, 2**31 + 3)
    assert summary["log_start_offset_source"] == "first segment's base offset, as the loader's split leaves it"
    assert [(o["base_offset"], o["size"], o["largest_timestamp"], o["deleted_by"]) for o in objects[:-1]] == [
        (3, 210, T0 + 12, "size"), (2**31, 210, T0 + 2, None)]
    result = CliRunner().invoke(cli, ["compaction", "--format", "json", "--now", str(T0 + 10**6), str(partition)])
    assert json.loads(result.stdout.splitlines()[-1])["first_dirty_offset"] == 3



@pytest.mark.parametrize("clean", [True, False])
def test_a_piece_on_a_later_segments_base_offset_takes_its_place(tmp_path, clean):
    """Segment 0 holds offsets 0-2, then 3,000,000,000 and 3,000,000,001; segment 3,000,000,000 holds
    3,000,000,002. The split's piece at 3,000,000,000 is renamed onto that segment's files, which are
    gone with their batch. Kafka's retain (retention.bytes 100), after a clean shutdown and after
    an unclean one: segments 0 (210 bytes) and 3000000000 (140: the piece), segment 0 deleted by size,
    the log start offset 3000000000, the log end 3000000002."""
    partition = tmp_path / "logs" / "t-0"
    _segment(partition, 0, b"".join(_batch(n, timestamp=T0 + n) for n in range(3))
             + _batch(3_000_000_000, timestamp=T0 + 9) + _batch(3_000_000_001, timestamp=T0 + 10))
    _segment(partition, 3_000_000_000, _batch(3_000_000_002, timestamp=T0 + 20))
    code, summary, segments = (_retention(partition, "--retention-bytes", "100") if clean else
                               _retention(partition, "--retention-bytes", "100", "--shutdown", "unclean"))
    assert (code, summary["new_log_start_offset"], summary["log_end_offset"]) == (0, 3_000_000_000, 3_000_000_002)
    assert [(s["base_offset"], s["size"], s["deleted_by"]) for s in segments] == [
        (0, 210, "size"), (3_000_000_000, 140, None)]


@pytest.mark.parametrize("first, clean, kafka_says", [
    # after a clean shutdown the split comes from loadSegmentFiles' recovery of segment 0 (no .index),
    # before segment 0 is in the segment map: replaceSegments leaves its files, and the next pass
    # loads it with the indexes the failed recovery left
    (2, True, ([(0, 140, "size"), (2, 70, None), (3_000_000_000, 70, None)], 2)),
    # after an unclean one, recoverLog recovers segment 0 again, from the map: split, it goes
    (2, False, ([(2, 70, None), (3_000_000_000, 70, None)], 2)),
    # a piece at a negative base offset, named -00000000000000000005.log; segment 0 kept, its time
    # index's zero-filled last slot a timestamp of 0: deleted by time
    (-5, True, ([(-5, 70, "log-start-offset"), (0, 140, "time"), (3_000_000_000, 70, None)], 3_000_000_000)),
    (-5, False, ([(-5, 70, None), (3_000_000_000, 70, None)], 0)),
])
def test_a_split_segment_whose_first_batch_is_elsewhere(tmp_path, first, clean, kafka_says):
    """Segment 0 (no .index) holds a batch at `first` (not 0), then 3,000,000,000: the pieces start
    at `first` and 3000000000, none at 0. Kafka's retain (retention.bytes 100, retention.ms 7 days),
    checked live: the segments it judges, how, and the new log start offset; the log end is
    3000000001 throughout. We had dropped segment 0 after a clean shutdown too, and could not name a
    piece at a negative offset ('segment file name does not start with a base offset')."""
    partition = tmp_path / "logs" / "t-0"
    _segment(partition, 0, _batch(first) + _batch(3_000_000_000, timestamp=T0 + 9))
    result = CliRunner().invoke(cli, ["retention", "--format", "json", "--now", str(T0 + 10**6), "--retention-bytes",
                                      "100", "--shutdown", "clean" if clean else "unclean", str(partition)])
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    segments, summary = objects[:-1], objects[-1]
    assert (result.exit_code, summary["log_end_offset"]) == (0, 3_000_000_001), summary
    assert ([(o["base_offset"], o["size"], o["deleted_by"]) for o in segments], summary["new_log_start_offset"]) \
        == kafka_says
    assert sorted(p.name for p in partition.iterdir()) == ["00000000000000000000.log"]  # nothing written


def test_the_piece_at_the_split_segments_base_offset_keeps_the_txnindex_its_failed_recovery_wrote(tmp_path):
    """Segment 0 (no .index, no .txnindex) holds producer 2's transaction at 0-1, its ABORT at 2, k at
    3 and 4, then 3,000,000,000. After a clean shutdown loadSegmentFiles recovers segment 0: the
    recovery writes the aborted transaction to 0.txnindex before it meets the overflow, and the piece
    at 0 is renamed onto segment 0's files, that .txnindex among them. Kafka's clean (checked live):
    the cleaned segment 0 is 148 bytes, the aborted batches gone, its .txnindex that transaction
    (producer 2, 0-2, last stable offset 3). We kept the aborted batches (291 bytes) and no .txnindex
    (differential run, seed 24119, compaction cases 52, 259 and 284)."""
    from kafkalog_tools.formats.record_batch import ATTR_TRANSACTIONAL
    from tests.batches import transaction_marker

    def batch(offset: int, key: bytes, **fields) -> bytes:
        timestamp = T0 + offset % 1000
        return build_batch(offset, [build_record(0, 0, key, b"v")], base_timestamp=timestamp, max_timestamp=timestamp,
                           **fields)

    transactional = dict(attributes=ATTR_TRANSACTIONAL, producer_id=2, producer_epoch=0)
    abort = transaction_marker(2, 0, producer_id=2, producer_epoch=0, timestamp=T0 + 2)
    partition = tmp_path / "logs" / "t-0"
    _segment(partition, 3_000_000_001, batch(3_000_000_001, b"q"), indexed=True)
    _segment(partition, 0, batch(0, b"a", base_sequence=0, **transactional)
             + batch(1, b"b", base_sequence=1, **transactional) + abort + batch(3, b"k") + batch(4, b"k")
             + batch(3_000_000_000, b"z"))
    (partition.parent / ".kafka_cleanshutdown").write_bytes(b"")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["compaction", "--simulate", "--output-dir", str(out), "--now", str(T0 + 10**6),
                                      "--min-cleanable-ratio", "0.01", "--format", "json", str(partition)])
    assert result.exit_code == 0, result.output
    cleaned = out / "t-0" / "00000000000000000000.log"
    assert cleaned.stat().st_size == 148
    assert cleaned.with_suffix(".txnindex").read_bytes().hex() == \
        "0000" + "0000000000000002" + "0000000000000000" + "0000000000000002" + "0000000000000003"  # (Kafka's file)


@pytest.mark.parametrize("epoch", [-1, 0])
def test_a_later_piece_at_the_split_segments_base_offset_is_left_out_of_the_segment_map(tmp_path, epoch):
    """Segment 0 (indexed: recoverLog meets the overflow, after an unclean shutdown) holds 0-2, then
    -5, then 3,000,000,000: pieces 0, -5 and 3000000000. replaceSegments adds them to the segment map,
    then removes the split segment's base offset, 0, since the lowest piece does not start there: the
    piece at 0 is gone from the log. Kafka's retain (retention.bytes 100), checked live: segments -5
    and 3000000000 (70 bytes each), none deleted, log start 0, log end 3000000001 (differential
    run, seed 24120, retention case 186: we kept the piece at 0 and deleted it by size). With leader
    epoch 0 on every batch, the log's one leader epoch cache has epoch 0 from the failed recovery of
    segment 0, so recovering the piece at -5 assigns nothing (a cache of each segment's own threw:
    "Received invalid partition leader epoch entry")."""
    def batch(offset: int, timestamp: int) -> bytes:
        return build_batch(offset, [build_record(0, 0, b"k", b"v")], base_timestamp=timestamp,
                           max_timestamp=timestamp, partition_leader_epoch=epoch)

    partition = tmp_path / "logs" / "t-0"
    _segment(partition, 0, b"".join(batch(n, T0 + n) for n in range(3)) + batch(-5, T0 + 5)
             + batch(3_000_000_000, T0 + 9), indexed=True)
    code, summary, segments = _retention(partition, "--retention-bytes", "100", "--shutdown", "unclean")
    assert (code, summary["new_log_start_offset"], summary["log_end_offset"]) == (0, 0, 3_000_000_001)
    assert [(s["base_offset"], s["size"], s["deleted_by"]) for s in segments] == [(-5, 70, None),
                                                                                  (3_000_000_000, 70, None)]
    assert any("the piece at 0 is left out of the loader's segment map" in note for note in summary["notes"])

def test_compaction_simulate_writes_the_pieces_as_the_split_leaves_them(tmp_path):
    """With nothing to clean (the cleaner checkpoint at the active segment), --simulate copies each
    segment as the loader leaves it: the pieces of the split segment 0 are its bytes 0-350, 350-560 and 560-630,
    under their own names; segment 0's files are not in the output, and the input is untouched."""
    partition = tmp_path / "logs" / "t-0"
    original = (b"".join(_batch(n, timestamp=T0 + n) for n in range(5))
                + b"".join(_batch(3_000_000_000 + n, timestamp=T0 + 10 + n) for n in range(3))
                + _batch(7_000_000_000, timestamp=T0 + 5))
    _segment(partition, 0, original)
    _segment(partition, 7_000_000_001, _batch(7_000_000_001, timestamp=T0 + 20))
    (partition.parent / ".kafka_cleanshutdown").write_bytes(b"")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["compaction", "--simulate", "--output-dir", str(out), "--now", str(T0 + 10**6),
                                      "--first-dirty-offset", str(7_000_000_001), "--format", "json", str(partition)])
    assert result.exit_code == 0, result.output
    written = {path.name: path.read_bytes() for path in (out / "t-0").glob("*.log")}
    assert written == {"00000000000000000000.log": original[:350], "00000000003000000000.log": original[350:560],
                       "00000000007000000000.log": original[560:630],
                       "00000000007000000001.log": _batch(7_000_000_001, timestamp=T0 + 20)}
    assert (partition / "00000000000000000000.log").read_bytes() == original


def test_what_the_cleaner_meets_in_a_piece_names_the_piece_where_kafka_puts_it(tmp_path):
    """A batch of the piece at 3,000,000,000 whose records' offsets fall (deltas 2, 1, 0), its last
    record's key written again later: Kafka's cleaner throws rebuilding it of the two it keeps. The
    message named the piece's copy in our scratch directory, a path that differs from run to run
    (mutation fuzzer --differential, seed 3205, case 8482); it names the piece as the loader leaves
    it, in the partition's directory."""
    partition = tmp_path / "logs" / "t-0"
    records = [build_record(2 - n, 0, key, b"v") for n, key in enumerate((b"a", b"b", b"c"))]
    falling = build_batch(3_000_000_001, records, last_offset_delta=2, base_timestamp=T0 + 11, max_timestamp=T0 + 11)
    again = build_batch(3_000_000_004, [build_record(0, 0, b"c", b"v")], base_timestamp=T0 + 11, max_timestamp=T0 + 11)
    _segment(partition, 0, b"".join(_batch(n, timestamp=T0 + n) for n in range(5))
             + _batch(3_000_000_000, timestamp=T0 + 10) + falling + again + _batch(7_000_000_000, timestamp=T0 + 12))
    _segment(partition, 7_000_000_001, _batch(7_000_000_001, timestamp=T0 + 20))
    result = CliRunner().invoke(cli, ["compaction", "--format", "json", "--now", str(T0 + 10**6),
                                      "--min-cleanable-ratio", "0", str(partition)])
    summary = next(line for line in map(json.loads, result.stdout.splitlines()) if line["type"] == "compaction_summary")
    assert summary["would_clean_because"].startswith(f"{partition / '00000000003000000000.log'}: byte 70: "
                                                     "IllegalArgumentException rebuilding the batch"), summary


def test_a_piece_the_loader_cuts_is_named_where_kafka_puts_it(tmp_path):
    """After an unclean shutdown the loader recovers the pieces of a split: the one at 3,000,000,000
    is cut after its first batch (the next one's CRC is wrong). Compaction's note named our scratch
    copy of the piece; retention's named it as the loader leaves it, and now both do."""
    partition = tmp_path / "logs" / "t-0"
    corrupt = bytearray(_batch(3_000_000_001))
    corrupt[-1] ^= 1
    _segment(partition, 0, _batch(0) + _batch(3_000_000_000) + bytes(corrupt) + _batch(7_000_000_000))
    _segment(partition, 7_000_000_001, _batch(7_000_000_001, timestamp=T0 + 20))
    for command in ("compaction", "retention"):
        result = CliRunner().invoke(cli, [command, "--format", "json", "--now", str(T0 + 10**6), "--shutdown", "unclean",
                                          str(partition)])
        summary = next(line for line in map(json.loads, result.stdout.splitlines()) if line["type"].endswith("summary"))
        cut = [note for note in summary["notes"] if "cut" in note and "Kafka's loader recovers" in note]
        assert len(cut) == 1 and cut[0].startswith(f"{partition / '00000000003000000000.log'}: "), (command, summary)

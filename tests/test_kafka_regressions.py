"""Differences from Kafka found by the differential run against Kafka's own code (`test_against_kafka.py`,
`python -m kafkalog_tools.fuzz --against-kafka`), each pinned here with Kafka's answer, so that they stay
fixed where no JVM runs. The expected values are what Kafka 4.0 (the oracle) answered on these bytes."""
from __future__ import annotations

import struct
import zlib

import pytest

from click.testing import CliRunner

from kafkalog_tools.cli import cli
from kafkalog_tools.errors import CorruptDataError
from kafkalog_tools.formats import legacy
from kafkalog_tools.formats.batch import increment_sequence, last_sequence
from kafkalog_tools.formats.record_batch import build_batch, build_record, decode_records_reference, skim_records
from kafkalog_tools.formats.segment import BadEntry, SegmentFile
from tests.test_hostile_dump import FIRST, raw_batch

T0 = 1_700_000_000_000


def _kafkas_recovery_fails(partition, log, says: str, *options: str) -> None:
    """rebuild-index --truncate where Kafka's recovery throws: exit 1, saying why, nothing written."""
    before = log.read_bytes()
    result = CliRunner().invoke(cli, ["rebuild-index", "--truncate", "--no-backup", *options, "--format", "json",
                                      str(partition)])
    assert result.exit_code == 1, result.output
    assert says in result.output
    assert log.read_bytes() == before


def test_a_batch_of_count_zero_has_no_records_whatever_its_records_section_holds(tmp_path):
    """DefaultRecordBatch.iterator: count 0 is an empty iterator (nothing read, nothing decompressed);
    we used to say 'records still remaining'."""
    records = b"".join(build_record(i, i, b"k", b"v") for i in range(3))
    for codec, payload in ((0, records), (1, b"not gzip at all")):
        path = tmp_path / f"{codec:020d}.log"
        path.write_bytes(FIRST + raw_batch(payload, codec=codec, count=0))
        with SegmentFile(path) as segment:
            batch = list(segment.entries())[1]
            assert batch.count == 0 and batch.records() == [] and decode_records_reference(batch) == []
            assert skim_records(batch) == (0, batch.max_timestamp)


def test_last_sequence_in_javas_int_arithmetic():
    """Kafka: incrementSequence overflows `Int.MAX - increment` for a negative increment, and only a
    base sequence of exactly -1 means 'none' (answers of Kafka's RecordBatch.lastSequence)."""
    assert increment_sequence(67, -2) == -2147483583
    assert last_sequence(67, -2) == -2147483583
    assert last_sequence(-1377697793, -773603752 - 723) == 2143665028
    assert last_sequence(-1, 5) == -1 and last_sequence(2147483647, 1) == 0 and last_sequence(5, 3) == 8
    batch = bytearray(build_batch(336, [build_record(0, 0, b"k", b"v")], base_sequence=67, producer_id=1,
                                  producer_epoch=0, base_timestamp=T0, max_timestamp=T0))
    struct.pack_into(">i", batch, 23, -2)  # lastOffsetDelta
    from kafkalog_tools.formats.record_batch import parse_batch

    assert parse_batch(bytes(batch), 0, "x").last_sequence == -2147483583


def _legacy_with_value_size(offset: int, size: int) -> bytes:
    entry = bytearray(legacy.build_entry(offset, 0, b"", b"value"))
    struct.pack_into(">i", entry, 22, size)  # V0: offset, size, crc, magic, attributes, key size (4), key, value size
    struct.pack_into(">I", entry, 12, zlib.crc32(entry[16:]))
    return bytes(entry)


def test_a_legacy_message_whose_value_size_overruns_is_read_as_kafka_reads_it(tmp_path):
    """LegacyRecord reads its header without the key and value: the message is a batch (printed,
    kept by recovery); only its records fail. We used to make it an unreadable entry, and
    rebuild-index --truncate cut it and everything after it where Kafka's recovery keeps it."""
    partition = tmp_path / "t-0"
    partition.mkdir()
    bad = _legacy_with_value_size(100, 6684672)
    good = legacy.build_entry(101, 0, b"k", b"v")
    log = partition / "00000000000000000100.log"
    log.write_bytes(bad + good + b"\xff" * 20)
    with SegmentFile(log) as segment:
        entries = list(segment.entries())
        assert [type(e) is BadEntry for e in entries] == [False, False]
        assert entries[0].crc_valid and entries[0].last_offset == 100
    result = CliRunner().invoke(cli, ["rebuild-index", "--truncate", "--no-backup", "--format", "json", str(partition)])
    assert result.exit_code == 0, result.output
    assert log.read_bytes() == bad + good  # Kafka's recovery: both messages valid, the garbage tail cut
    dump = CliRunner().invoke(cli, ["dump", "--format", "text", "--deep-iteration", str(log)])
    assert "offset: 100 position: 0 NoTimestampType: -1 size: 31 magic: 0" in dump.output


def test_text_dump_prints_the_records_before_the_one_that_fails(tmp_path):
    """kafka-dump-log prints the records Kafka's iterator returns before it throws; so do we."""
    records = [build_record(0, 0, b"k0", b"v0"), build_record(1, 1, b"k1", b"v1")]
    payload = b"".join(records) + b"\x01"  # a third record of length -1
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(raw_batch(payload, count=3))
    result = CliRunner().invoke(cli, ["dump", "--format", "text", "--deep-iteration", str(log)])
    lines = result.output.splitlines()
    assert result.exit_code == 1
    assert [line.split(" CreateTime")[0] for line in lines if line.startswith("| offset")] == ["| offset: 1",
                                                                                              "| offset: 2"]


def test_a_transaction_marker_that_cannot_be_read_is_kept_by_recovery_and_ends_it(tmp_path):
    """LogSegment.recover counts a batch's bytes as valid before it updates the producer state; an
    unreadable marker record (an InvalidRecordException there) cuts the log after the marker, not
    before it (Kafka kept 11799 bytes where we cut 78 more)."""
    from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL

    partition = tmp_path / "t-0"
    partition.mkdir()
    data = build_batch(0, [build_record(0, 0, b"k", b"v")], attributes=ATTR_TRANSACTIONAL, producer_id=1,
                       producer_epoch=0, base_sequence=0, base_timestamp=T0, max_timestamp=T0)
    marker = bytearray(build_record(0, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x03"))
    marker[-1] = 0x40  # header count 32, more than the record holds
    data += build_batch(1, [bytes(marker)], attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, producer_id=1,
                        producer_epoch=0, base_timestamp=T0, max_timestamp=T0)
    later = build_batch(2, [build_record(0, 0, b"k", b"v")], base_timestamp=T0, max_timestamp=T0)
    log = partition / "00000000000000000000.log"
    log.write_bytes(data + later)
    result = CliRunner().invoke(cli, ["rebuild-index", "--truncate", "--no-backup", "--format", "json", str(partition)])
    assert result.exit_code == 0, result.output
    assert log.read_bytes() == data


def test_every_legacy_magic_but_0_has_v1s_layout_and_no_deep_records(tmp_path):
    """LegacyRecord reads a timestamp for any magic but 0 (a hostile -1 too), and its deep iterator
    refuses a wrapper of any magic but 0 and 1 (Kafka: 'Invalid wrapper magic found in legacy deep
    record iterator -1')."""
    entry = bytearray(legacy.build_entry(5, 1, None, b"not really gzip", timestamp=T0, attributes=1))
    entry[16] = 0xFF  # magic -1
    struct.pack_into(">I", entry, 12, zlib.crc32(entry[16:]))
    log = tmp_path / "00000000000000000005.log"
    log.write_bytes(bytes(entry))
    with SegmentFile(log) as segment:
        (batch,) = segment.entries()
        assert batch.magic == -1 and batch.max_timestamp == T0 and batch.crc_valid
        try:
            batch.records()
        except Exception as exc:  # noqa: BLE001 - the message is the point
            assert "Invalid wrapper magic found in legacy deep record iterator -1" in str(exc)
        else:
            raise AssertionError("a wrapper of magic -1 has no records")


def test_record_timestamps_and_offsets_wrap_as_javas_longs():
    """DefaultRecord: baseTimestamp + timestampDelta in a long (Kafka: 9223372036854772850 where we
    said -9223372036854778766)."""
    from kafkalog_tools.formats.record_batch import decode_records, parse_batch

    long_max = (1 << 63) - 1
    batch = build_batch(long_max - 1, [build_record(3, 5, b"k", b"v")], base_timestamp=long_max - 2,
                        max_timestamp=long_max)
    parsed = parse_batch(batch, 0, "x")
    for records in (decode_records(parsed), decode_records_reference(parsed)):
        assert records[0].timestamp == -(1 << 63) + 2 and records[0].offset == -(1 << 63) + 1


def test_a_transaction_marker_of_an_unknown_codec_fails_kafkas_recovery(tmp_path):
    """DefaultRecordBatch.iterator asks CompressionType.forId for the codec before it reads a record;
    its IllegalArgumentException ('Unknown compression type id: 7') is not caught by
    LogSegment.recover, so Kafka's recovery fails: nothing is cut, nothing written (we cut the
    marker off and exited 0)."""
    from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
    from tests.test_hostile_dump import with_crc

    partition = tmp_path / "t-0"
    partition.mkdir()
    data = build_batch(0, [build_record(0, 0, b"k", b"v")], attributes=ATTR_TRANSACTIONAL, producer_id=1,
                       producer_epoch=0, base_sequence=0, base_timestamp=T0, max_timestamp=T0)
    marker = bytearray(build_batch(1, [build_record(0, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x03")],
                                   attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, producer_id=1, producer_epoch=0,
                                   base_timestamp=T0, max_timestamp=T0))
    struct.pack_into(">h", marker, 21, struct.unpack_from(">h", marker, 21)[0] | 7)
    log = partition / "00000000000000000000.log"
    log.write_bytes(data + with_crc(bytes(marker)))
    _kafkas_recovery_fails(partition, log, "Unknown compression type id: 7")


@pytest.mark.parametrize("bulk", ["never", "always"])
def test_dump_says_an_unknown_codec_is_an_error_where_kafka_dump_log_throws(tmp_path, monkeypatch, bulk):
    """kafka-dump-log asks CompressionType.forId for the codec of every entry it prints and throws
    'Unknown compression type id: 7' (seed 1234884576, case 54); we print the entry's line, as far as
    Kafka got, say on stderr where the codec bits are, go on, and exit 1 (we exited 0, silent)."""
    monkeypatch.setenv("KAFKALOG_BULK", bulk)
    v1 = tmp_path / "00000000000000000000.log"
    v1.write_bytes(b"".join(legacy.build_entry(n, 1, b"k", b"v", timestamp=T0, attributes=7 if n == 1 else 0)
                            for n in range(3)))
    v2 = tmp_path / "00000000000000000100.log"
    v2.write_bytes(FIRST + raw_batch(build_record(0, 0, b"k", b"v"), codec=6) + FIRST)
    empty = tmp_path / "00000000000000000200.log"  # count 0: no record to fail on (seed 4242, case 57)
    empty.write_bytes(FIRST + raw_batch(b"", codec=5, count=0) + FIRST)
    for path, line, byte in ((v1, "offset: 1 position: 36 CreateTime: 1700000000000 size: 36 magic: 1 "
                                  "compresscodec: unknown(7)", 36 + 17),
                             (v2, "position: 72 CreateTime: -1 size: 70 magic: 2 compresscodec: unknown(6)",
                              72 + 22),
                             (empty, "position: 72 CreateTime: -1 size: 61 magic: 2 compresscodec: unknown(5)",
                              72 + 22)):
        for flags in ([], ["--deep-iteration"]):
            result = CliRunner().invoke(cli, ["dump", "--format", "text", *flags, str(path)])
            assert result.exit_code == 1, result.output
            assert line in result.stdout
            assert f"{path}: byte {byte}: unknown compression codec id" in result.stderr
            assert result.stdout.count("position: ") == 3  # and the entry after it


def test_internal_topic_keys_kafkas_decoders_cannot_read_print_or_fail_as_kafka_dump_log_does(tmp_path):
    """Kafka 4.0's CoordinatorRecordSerde says 'Could not read version from key's buffer.' for a key
    shorter than its int16 type, and a key struct cut short is a BufferUnderflowException ('due to:
    null.'); DumpLogSegments throws on a record without a key, and TransactionLog on a key it cannot
    read: kafka-dump-log stops there, we report an error (exit 1) and go on (seed 20261124, case
    392; we printed construct's messages, and nothing at all for the transaction log)."""
    def dump(topic: str, key: bytes | None, flag: str):
        partition = tmp_path / f"{topic}-0"
        partition.mkdir(exist_ok=True)
        log = partition / "00000000000000000000.log"
        log.write_bytes(build_batch(0, [build_record(0, 0, key, b"\x00\x01")], base_timestamp=T0, max_timestamp=T0))
        result = CliRunner().invoke(cli, ["dump", "--format", "text", "--deep-iteration", flag, str(log)])
        line = result.stdout.splitlines()[3]
        assert line.startswith("| offset: 0 CreateTime: 1700000000000 keySize: "), result.output
        return result, line[line.index("headerKeys: []") + len("headerKeys: []"):]

    for topic, flag in (("__consumer_offsets", "--offsets-decoder"), ("__share_group_state", "--share-group-state-decoder")):
        result, text = dump(topic, b"", flag)
        assert (result.exit_code, text) == (0, " key: Error at offset 0, skipping. Could not read version from key's buffer.")
        result, text = dump(topic, b"\x00\x01\x00", flag)
        assert (result.exit_code, text) == (0, " key: Error at offset 0, skipping. Could not read record with version 1 "
                                               "from key's buffer due to: null.")
        result, text = dump(topic, b"\x00\x01\x10\x14" + b"g" * 37, flag)  # seed 20261124, case 613
        assert (result.exit_code, text) == (0, " key: Error at offset 0, skipping. Could not read record with version 1 "
                                               "from key's buffer due to: Error reading byte array of 4116 byte(s): "
                                               "only 37 byte(s) available.")
        result, text = dump(topic, None, flag)
        decoder = "offset topic" if topic == "__consumer_offsets" else "share group state topic"
        assert (result.exit_code, text) == (1, "")
        assert f"Failed to decode message at offset 0 using {decoder} decoder (message had a missing key)" in result.stderr
    for key in (b"", b"\x00", None):
        result, text = dump("__transaction_state", key, "--transaction-log-decoder")
        assert (result.exit_code, text) == (1, ""), result.output
        assert "error" in result.stderr


def _marker_partition(tmp_path, marker_record: bytes):
    from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
    from tests.test_hostile_dump import with_crc

    partition = tmp_path / "t-0"
    partition.mkdir()
    data = build_batch(0, [build_record(0, 0, b"k", b"v")], attributes=ATTR_TRANSACTIONAL, producer_id=1,
                       producer_epoch=0, base_sequence=0, base_timestamp=T0, max_timestamp=T0)
    marker = build_batch(1, [marker_record], attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, producer_id=1,
                         producer_epoch=0, base_timestamp=T0, max_timestamp=T0)
    log = partition / "00000000000000000000.log"
    log.write_bytes(data + with_crc(marker) + build_batch(2, [build_record(0, 0, b"k", b"v")], base_timestamp=T0,
                                                          max_timestamp=T0))
    return partition, log


@pytest.mark.parametrize("record, kafka_throws", [
    (build_record(0, 0, None, b"\x00\x00\x00\x00\x00\x03"), "NullPointerException"),
    (b"\xff" * 5 + build_record(0, 0, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x03")[1:], "IllegalArgumentException"),
])
def test_a_marker_kafkas_recovery_throws_on_fails_rebuild_index(tmp_path, record, kafka_throws):
    """A marker without a key (ControlRecordType.parse: NullPointerException) or whose record length
    varint runs past 5 bytes (read before DefaultRecord.readFrom's try: IllegalArgumentException):
    LogSegment.recover does not catch either, so Kafka's recovery fails, nothing cut (we cut the marker
    off). A longer varint elsewhere in the record is an InvalidRecordException: recovery cuts there."""
    partition, log = _marker_partition(tmp_path, record)
    _kafkas_recovery_fails(partition, log, kafka_throws)


def test_a_marker_with_a_long_timestamp_varint_is_cut_by_recovery(tmp_path):
    record = build_record(0, 0, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x03")
    record = record[1:2] + b"\xff" * 10 + b"\x01" + record[3:]  # attributes, then an 11-byte timestamp delta
    partition, log = _marker_partition(tmp_path, bytes([(len(record)) << 1]) + record)
    result = CliRunner().invoke(cli, ["rebuild-index", "--truncate", "--no-backup", "--format", "json", str(partition)])
    assert result.exit_code == 0, result.output
    assert log.stat().st_size == 70 + len(record) + 1 + 61  # the data batch and the marker: what comes after, cut


def test_a_log_start_offset_past_the_log_end_deletes_every_segment(tmp_path):
    """LogLoader.deleteSegmentsIfLogStartGreaterThanLogEnd: Kafka's retain answered every segment
    gone and one empty segment at the log start offset (we kept the last segment)."""
    import json

    partition = tmp_path / "t-0"
    partition.mkdir()
    for base in (0, 3):
        (partition / f"{base:020d}.log").write_bytes(b"".join(
            build_batch(base + n, [build_record(0, 0, b"k", b"v")], base_timestamp=T0, max_timestamp=T0)
            for n in range(3)))
    result = CliRunner().invoke(cli, ["retention", "--format", "json", "--now", str(T0), "--log-start-offset", "50",
                                      str(partition)])
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(o["base_offset"], o["deleted_by"]) for o in objects if o["type"] == "segment"] == [
        (0, "log-start-offset"), (3, "log-start-offset")]
    summary = objects[-1]
    assert (summary["new_log_start_offset"], summary["rolls_new_segment"], summary["new_segment_base_offset"]) == (
        50, True, 50)


def test_recovery_reads_a_marker_batchs_first_record_only(tmp_path):
    """ProducerAppendInfo takes the marker from the batch's first record and reads no further: a
    marker batch whose count says 13 is recovered whole by Kafka (seed 777001, case 76; we cut it)."""
    from tests.test_hostile_dump import with_crc

    partition, log = _marker_partition(tmp_path, build_record(0, 0, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x03"))
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, 70 + 57, 13)  # the marker's record count
    data[70:70 + 78] = with_crc(bytes(data[70:70 + 78]))
    log.write_bytes(bytes(data))
    result = CliRunner().invoke(cli, ["rebuild-index", "--truncate", "--no-backup", "--format", "json", str(partition)])
    assert result.exit_code == 0, result.output
    assert log.read_bytes() == bytes(data)


def test_the_closing_time_index_entry_checks_its_offset_first(tmp_path):
    """LogSegment.recover ends with TimeIndex.maybeAppend(max timestamp, its offset): an offset below the
    last entry's throws (InvalidOffsetException), whatever the timestamp, and Kafka's loader cuts the
    segment to its base offset; we report the failure and write nothing (seed 777001, case 386: we
    appended nothing and recovered)."""
    partition = tmp_path / "t-0"
    partition.mkdir()
    batches = [build_batch(0, [build_record(0, 0, b"k", b"v" * 200)], base_timestamp=T0, max_timestamp=T0),
               build_batch(1_000_000, [build_record(0, 0, b"k", b"v")], base_timestamp=T0 + 1, max_timestamp=T0 + 1),
               build_batch(2, [build_record(0, 0, b"k", b"v")], base_timestamp=T0 + 2, max_timestamp=T0 + 2)]
    log = partition / "00000000000000000000.log"
    log.write_bytes(b"".join(batches))
    _kafkas_recovery_fails(partition, log, "Attempt to append an offset (2) to slot 1 no larger than the last offset "
                           "appended (1000000)", "--index-interval-bytes", "100")


def test_the_cleaner_keeps_the_batch_that_ends_the_cleaning_round(tmp_path):
    """Kafka 4.0's cleaner keeps the batch whose next offset is the round's first uncleanable offset,
    as an empty header when none of its records stay (seed 777001, compaction case 60: a record
    without a key last before the active segment; we dropped the batch)."""
    partition = tmp_path / "logs" / "t-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(
        build_batch(0, [build_record(0, 0, b"k", b"v")], base_timestamp=T0, max_timestamp=T0)
        + build_batch(1, [build_record(0, 0, None, b"no key")], base_timestamp=T0, max_timestamp=T0))
    (partition / "00000000000000000002.log").write_bytes(
        build_batch(2, [build_record(0, 0, b"k", b"v2")], base_timestamp=T0, max_timestamp=T0))
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["compaction", "--simulate", "--output-dir", str(out), "--now", str(T0 + 1),
                                      "--format", "json", str(partition)])
    assert result.exit_code == 0, result.output
    with SegmentFile(out / "t-0" / "00000000000000000000.log") as segment:
        batches = list(segment.entries())
    assert [(b.base_offset, b.last_offset, b.count, b.size) for b in batches] == [(0, 0, 1, 70), (1, 1, 0, 61)]


@pytest.mark.parametrize("interval, fails", [(1, True), (4096, False)])
def test_reading_a_recovered_segments_next_offset_reads_a_wrapper_it_lands_on(tmp_path, interval, fails):
    """LogSegment.readNextOffset, after recovery, asks the baseOffset of the batch at the offset index's
    last entry, which for a V0/V1 wrapper is its first inner record's: an empty snappy wrapper there
    fails Kafka's recovery ('[EMPTY_INPUT] Cannot decompress empty stream'); with no index entry it is
    not read (seed 777001, recover case 439, and 11 cases of the same kind; we recovered)."""
    partition = tmp_path / "t-0"
    partition.mkdir()
    log = partition / "00000000000000000000.log"
    log.write_bytes(b"".join(legacy.build_entry(n, 1, b"k", b"v", timestamp=T0) for n in range(3))
                    + legacy.build_entry(3, 1, None, b"", timestamp=T0, attributes=2))
    result = CliRunner().invoke(cli, ["rebuild-index", "--truncate", "--no-backup", "--index-interval-bytes",
                                      str(interval), "--format", "json", str(partition)])
    assert result.exit_code == (1 if fails else 0), result.output
    assert ("reading the segment's next offset, the first offset of the V1 wrapper at 108" in result.output) == fails


@pytest.mark.parametrize("bulk", ["never", "always"])
def test_a_legacy_null_keeps_its_size_field(tmp_path, monkeypatch, bulk):
    """LegacyRecord.keySize()/valueSize() report the int32 field as it is: -5 is a null key, as -1 is,
    and kafka-dump-log prints 'keySize: -5' (seed 777001, case 69, and 8 more; we printed -1)."""
    monkeypatch.setenv("KAFKALOG_BULK", bulk)
    entry = bytearray(legacy.build_entry(0, 1, None, None, timestamp=T0))
    struct.pack_into(">ii", entry, 26, -5, -2147483648)  # V1: offset, size, crc, magic, attributes, timestamp, sizes
    struct.pack_into(">I", entry, 12, zlib.crc32(entry[16:]))
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(entry) + legacy.build_entry(1, 1, b"k", b"v", timestamp=T0))
    text = CliRunner().invoke(cli, ["dump", "--format", "text", "--deep-iteration", str(log)])
    assert "| offset: 0 CreateTime: 1700000000000 keySize: -5 valueSize: -2147483648 isValid: true" in text.stdout
    import json

    rows = [json.loads(line) for line in CliRunner().invoke(cli, ["dump", "--format", "json", "-d", str(log)]).stdout.splitlines()]
    assert [(r["key_size"], r["value_size"], r["key"]) for r in rows if r["type"] == "record"] == [
        (-5, -2147483648, None), (1, 1, "k")]


def test_generated_reader_errors_read_as_kafkas(tmp_path):
    """What Kafka 4.0's generated readers throw, as kafka-dump-log prints it (seed 31337, case 251:
    we printed construct's words): a null array, a null element, a count above the bytes left, a
    string longer than 32767 (the oracle's own output on these bytes, pinned)."""
    from kafkalog_tools.protocol import UVarInt

    def classic(text: bytes) -> bytes:
        return struct.pack(">h", len(text)) + text

    def compact(text: bytes) -> bytes:
        return UVarInt.build(len(text) + 1) + text

    key = struct.pack(">h", 5) + classic(b"g") + classic(b"m")  # ConsumerGroupMemberMetadataKey
    start = struct.pack(">h", 0) + b"\x00\x00" + compact(b"c") + compact(b"h")  # ...MetadataValue v0
    values = [start + UVarInt.build(0), start + UVarInt.build(1001) + b"\x02a", start + UVarInt.build(2) + b"\x00",
              struct.pack(">h", 0) + b"\x00\x00" + UVarInt.build(40000) + b"x" * 10]
    partition = tmp_path / "__consumer_offsets-0"
    partition.mkdir()
    log = partition / "00000000000000000000.log"
    log.write_bytes(build_batch(0, [build_record(i, 0, key, v) for i, v in enumerate(values)],
                                base_timestamp=T0, max_timestamp=T0))
    result = CliRunner().invoke(cli, ["dump", "--format", "text", "--deep-iteration", "--offsets-decoder", str(log)])
    reasons = [line.split("due to: ", 1)[1] for line in result.stdout.splitlines() if "due to: " in line]
    assert reasons == [
        "non-nullable field subscribedTopicNames was serialized as null.",
        "Tried to allocate a collection of size 1000, but there are only 2 bytes remaining..",
        "non-nullable field subscribedTopicNames element was serialized as null.",
        "string field clientId had invalid length 39999.",
    ]


@pytest.mark.parametrize("count", [1, -1028632517])
def test_a_marker_that_does_not_decompress_fails_kafkas_recovery(tmp_path, count):
    """ProducerAppendInfo reads the marker through the batch's record iterator, which opens the
    decompressing stream (before it checks the count) and turns a failure into a KafkaException that
    LogSegment.recover does not catch: Kafka's recovery fails (seed 31337, recover case 1147: a gzip
    marker that is not gzip, of a negative count; we cut it off)."""
    from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
    from tests.test_hostile_dump import with_crc

    partition = tmp_path / "t-0"
    partition.mkdir()
    data = build_batch(0, [build_record(0, 0, b"k", b"v")], attributes=ATTR_TRANSACTIONAL, producer_id=1,
                       producer_epoch=0, base_sequence=0, base_timestamp=T0, max_timestamp=T0)
    marker = bytearray(build_batch(1, [], attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL | 1, producer_id=1,
                                   producer_epoch=0, base_timestamp=T0, max_timestamp=T0)[:61] + b"not gzip at all")
    struct.pack_into(">i", marker, 8, len(marker) - 12)
    struct.pack_into(">i", marker, 57, count)
    log = partition / "00000000000000000000.log"
    log.write_bytes(data + with_crc(bytes(marker)))
    _kafkas_recovery_fails(partition, log, "KafkaException reading the marker: gzip payload does not decompress")


def test_a_legacy_record_line_up_to_the_size_fields_of_an_unreadable_key(tmp_path):
    """kafka-dump-log --deep-iteration prints a V0/V1 message's record line from its size fields,
    read by position, before it reads the key: a key size of 3 over a 2-byte key reads the value
    size from the value's bytes (886), and nothing throws until --print-data-log reads the key. We
    printed no line (an open difference until session 13); the lines are Kafka 4.0's on these bytes."""
    entry = bytearray(legacy.build_entry(0, 1, b"kk", b"vvv", timestamp=T0))
    struct.pack_into(">i", entry, 26, 3)  # the key size
    struct.pack_into(">I", entry, 12, zlib.crc32(entry[16:]))
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(entry) + legacy.build_entry(1, 1, b"k", b"v", timestamp=T0))
    result = CliRunner().invoke(cli, ["dump", "--format", "text", "--deep-iteration", str(log)])
    assert result.stdout.splitlines()[2:] == [
        "offset: 0 position: 0 CreateTime: 1700000000000 size: 39 magic: 1 compresscodec: none crc: 3839744781 "
        "isvalid: true",
        "| offset: 0 CreateTime: 1700000000000 keySize: 3 valueSize: 886 isValid: true crc: 3839744781}",
        "offset: 1 position: 39 CreateTime: 1700000000000 size: 36 magic: 1 compresscodec: none crc: 958827571 "
        "isvalid: true",
        "| offset: 1 CreateTime: 1700000000000 keySize: 1 valueSize: 1 isValid: true crc: 958827571}"]
    assert result.exit_code == 1 and "value of 886 bytes runs past the end of the message" in result.stderr


def test_an_unknown_tagged_field_cut_short_reads_as_kafkas_read_array(tmp_path):
    """Readable.readUnknownTaggedField reads a tag's bytes with readArray's check (seed 424242, case
    1146: a ShareUpdateValue whose state batch declares a tag of 87 bytes with none left; we said
    'null'). The record's bytes are the case's; the reason is what Kafka 4.0 printed for them."""
    key = bytes.fromhex("0001000c73672d616e616c79746963732d16d60f70773a69ba3f12d52f70749200000001")
    value = bytes.fromhex("000100000000000200000000000000c80400000000000000c800000000000000d102000000000000000000"
                          "00000000010000000000000000d200000000000000d60400030000000000000000d700")
    partition = tmp_path / "__share_group_state-0"
    partition.mkdir()
    log = partition / "00000000000000000000.log"
    log.write_bytes(build_batch(0, [build_record(0, 0, key, value)], base_timestamp=T0, max_timestamp=T0))
    result = CliRunner().invoke(cli, ["dump", "--format", "text", "-d", "--share-group-state-decoder", str(log)])
    assert result.stdout.splitlines()[3].endswith(
        "Could not read record with version 1 from value's buffer due to: Error reading byte array of 87 byte(s): "
        "only 0 byte(s) available."), result.output


# Control records Kafka's iterator returns but its readers cannot read (seed 4242, cases 331 and 741;
# seeds 1263435222 and 837822391). The messages are Kafka's (InvalidRecordException's words).
_COMMIT_KEY, _MARKER = b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05"
_KEY_SHORT = ("Invalid value size found for end control record key. Must have at least 4 bytes, but found only 1")
_KEY_VERSION = "Invalid version found for control record: -1. May indicate data corruption"
_VALUE_VERSION = "Invalid version found for end transaction marker: -3. May indicate data corruption"
_VALUE_SHORT = "Invalid value size found for end transaction marker. Must have at least 6 bytes, but found only 2"
UNREADABLE_CONTROLS = [  # (key, value, Kafka's decodeError, the type Kafka still read)
    (b"\x00", _MARKER, _KEY_SHORT, None),
    (b"\xff\xff\x00\x01", _MARKER, _KEY_VERSION, None),
    (None, _MARKER, "control record key is null", None),
    (_COMMIT_KEY, b"\xff\xfd\x00\x00\x00\x05", _VALUE_VERSION, "COMMIT"),
    (_COMMIT_KEY, b"\x00\x00", _VALUE_SHORT, "COMMIT"),
    (_COMMIT_KEY, None, "transaction marker value is null", "COMMIT"),
]


def _control_partition(tmp_path, key, value, where: int, codec: int = 0):
    """A transaction's data batch, its two-record marker batch with record `where` unreadable, and a
    later data batch (the probe run against Kafka's parse, dump, recover and clean)."""
    from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL

    partition = tmp_path / "logs" / "t-0"
    partition.mkdir(parents=True)
    data = build_batch(0, [build_record(0, 0, b"a", b"1"), build_record(1, 0, b"b", b"2")], producer_id=7,
                       producer_epoch=0, base_sequence=0, attributes=ATTR_TRANSACTIONAL, base_timestamp=T0,
                       max_timestamp=T0)
    records = [build_record(i, 0, key, value) if i == where else build_record(i, 0, _COMMIT_KEY, _MARKER)
               for i in range(2)]
    marker = build_batch(2, records, producer_id=7, producer_epoch=0, attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL,
                         base_timestamp=T0, max_timestamp=T0, compression_id=codec)
    later = build_batch(4, [build_record(0, 0, b"a", b"3"), build_record(1, 0, None, None)], base_timestamp=T0 + 5,
                        max_timestamp=T0 + 5)
    log = partition / "00000000000000000000.log"
    log.write_bytes(data + marker + later)
    return partition, log, len(data), len(data) + len(marker)


@pytest.mark.parametrize("codec", [0, 1])
@pytest.mark.parametrize("key, value, kafka_says, kafka_type", UNREADABLE_CONTROLS)
def test_a_control_record_kafka_cannot_read_is_returned_with_why(tmp_path, key, value, kafka_says, kafka_type, codec):
    """Kafka's iterator returns the record (the oracle's parse: `control: {decodeError}`, with the
    controlType where only the marker value fails); only what reads its control key or marker throws.
    We used to fail the whole batch's records."""
    _, log, marker_at, _ = _control_partition(tmp_path, key, value, where=1, codec=codec)
    with SegmentFile(log) as segment:
        batch = next(e for e in segment.entries() if e.position == marker_at)
        for records in (batch.records(), decode_records_reference(batch)):
            assert [r.offset for r in records] == [2, 3]
            assert records[0].control.name == "COMMIT" and records[0].control_error is None
            unreadable = records[1]
            assert kafka_says in unreadable.control_error.message
            assert (unreadable.control and unreadable.control.name) == kafka_type
        with pytest.raises(CorruptDataError) as failed:  # kafka-dump-log, the loader: they throw there
            batch.records_reading_controls()
        assert kafka_says in failed.value.message
        assert [r.offset for r in failed.value.records_before] == [2]


@pytest.mark.parametrize("key, value, kafka_says, kafka_type", UNREADABLE_CONTROLS)
def test_a_marker_kafka_cannot_read_fails_dump_and_recovery_and_cleaning_as_kafkas(tmp_path, key, value, kafka_says,
                                                                                    kafka_type):
    """As the first record of its batch: kafka-dump-log throws after the record before; Kafka's
    recovery throws on a null (a NullPointerException, nothing cut) and otherwise keeps the marker and
    cuts what follows it; loading the log for the cleaner throws. As the second record: the loader
    and the cleaner read the first only, and clean (we used to fail the cleaning)."""
    import json

    partition, log, _, marker_end = _control_partition(tmp_path / "first", key, value, where=0)
    dumped = CliRunner().invoke(cli, ["dump", "--format", "text", "--deep-iteration", str(log)])
    assert dumped.exit_code == 1 and kafka_says in dumped.stderr
    assert "| offset: 2" not in dumped.stdout and "| offset: 1 " in dumped.stdout
    if key is None or value is None:
        _kafkas_recovery_fails(partition, log, "NullPointerException")
    else:
        result = CliRunner().invoke(cli, ["rebuild-index", "--truncate", "--no-backup", "--format", "json",
                                          str(partition)])
        assert result.exit_code == 0, result.output
        assert log.stat().st_size == marker_end
    for where, cleans in ((0, False), (1, True)):
        partition, *_ = _control_partition(tmp_path / f"clean-{where}", key, value, where=where)
        result = CliRunner().invoke(cli, ["compaction", "--simulate", "--output-dir", str(tmp_path / f"out-{where}"),
                                          "--now", str(T0 + 10**9), "--min-cleanable-ratio", "0.01",
                                          "--delete-retention-ms", "0", "--format", "json", str(partition)])
        summary = next(json.loads(line) for line in result.stdout.splitlines() if '"compaction_summary"' in line)
        if cleans:
            assert (result.exit_code, summary["problems"]) == (0, []), result.output
        else:
            assert (result.exit_code, summary["would_clean"]) == (1, False), result.output
            assert kafka_says in summary["problems"][0]

def _indexed_partition(tmp_path, segments: list[tuple[int, int]]):
    """A partition of one-record batches of 100 bytes (segment base offset, batches), every batch
    indexed (index.interval.bytes 1), all files' mtimes T0."""
    import os

    partition = tmp_path / "t-0"
    partition.mkdir()
    for base, count in segments:
        (partition / f"{base:020d}.log").write_bytes(b"".join(
            build_batch(base + n, [build_record(0, 0, b"k%d" % n, b"v" * 30)], base_timestamp=T0 + base + n,
                        max_timestamp=T0 + base + n) for n in range(count)))
    result = CliRunner().invoke(cli, ["rebuild-index", "--no-backup", "--index-interval-bytes", "1", "--format", "json",
                                      str(partition)])
    assert result.exit_code == 0, result.output
    for path in partition.iterdir():
        os.utime(path, ns=(T0 * 1_000_000, T0 * 1_000_000))
    return partition


def _damage(log, change) -> None:
    import os

    data = bytearray(log.read_bytes())
    change(data)
    log.write_bytes(bytes(data))
    os.utime(log, ns=(T0 * 1_000_000, T0 * 1_000_000))


def _retention(partition, *options, shutdown: str = "clean"):
    """`kafkalog retention` on the log as Kafka's loader opens it after a clean shutdown (as Kafka's
    retain does without --unclean), unless `shutdown` says otherwise."""
    import json

    result = CliRunner().invoke(cli, ["retention", "--format", "json", "--now", str(T0 + 100), "--shutdown", shutdown,
                                      *options, str(partition)])
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    return result.exit_code, objects[-1], [o for o in objects if o["type"] == "segment"]


def test_after_a_crash_retention_runs_on_the_log_the_loader_recovered(tmp_path):
    """Zeros over a batch of segment 3 of 3. After a clean shutdown Kafka's retain (retention.bytes
    150) deletes segments 0 and 3 by size, the log end 9. Without the clean shutdown marker (a broker
    that died) Kafka's retain --unclean first recovers: segment 3 cut to 100 bytes, segment 6
    deleted, the log end 4; then nothing is deleted (checked live). We judged every log as after a
    clean shutdown (differential run: 20 of 100 unclean cases differed)."""
    partition = _indexed_partition(tmp_path, [(0, 3), (3, 3), (6, 3)])
    _damage(partition / "00000000000000000003.log", lambda data: data.__setitem__(slice(150, 160), bytes(10)))
    code, summary, segments = _retention(partition, "--retention-bytes", "150")
    assert (code, summary["log_end_offset"], summary["new_log_start_offset"]) == (0, 9, 6)
    assert [(s["base_offset"], s["size"], s["deleted_by"]) for s in segments] == [(0, 300, "size"), (3, 300, "size"),
                                                                                   (6, 300, None)]
    for shutdown in ("auto", "unclean"):  # no marker beside the partition: auto is unclean
        code, summary, segments = _retention(partition, "--retention-bytes", "150", shutdown=shutdown)
        assert (code, summary["log_end_offset"], summary["new_log_start_offset"]) == (0, 4, 0)
        assert [(s["base_offset"], s["size"], s["largest_timestamp"], s["deleted_by"]) for s in segments] == [
            (0, 300, T0 + 2, None), (3, 100, T0 + 3, None)]
        assert "Kafka's loader deletes the segments after the one it cut, before any retention pass: base offsets 6" \
            in summary["notes"]
    (tmp_path / ".kafka_cleanshutdown").write_bytes(b"")  # the marker: auto is clean
    assert _retention(partition, "--retention-bytes", "150", shutdown="auto")[1]["log_end_offset"] == 9


def test_the_log_end_offset_is_read_from_the_offset_indexs_last_entry(tmp_path):
    """LogSegment.readNextOffset reads from the position of the offset index's last entry: zeros over
    batch 1 of 5, before that entry, are never read. Kafka's retain: log end offset 5, loaded fine (we
    scanned from byte 0, stopped at the zeros: log end offset 1 and a problem)."""
    partition = _indexed_partition(tmp_path, [(0, 5)])
    _damage(partition / "00000000000000000000.log", lambda data: data.__setitem__(slice(100, 120), bytes(20)))
    code, summary, _ = _retention(partition)
    assert (code, summary["log_end_offset"], summary["problems"]) == (0, 5, [])


def test_the_log_end_offset_counts_a_batch_whose_crc_is_wrong(tmp_path):
    """readNextOffset checks no CRC: the last batch, one value byte flipped, still ends the log
    (Kafka's retain: 3). Without the segment's .index the loader recovers it first, which cuts that
    batch: log end offset 2, the segment 200 bytes."""
    partition = _indexed_partition(tmp_path, [(0, 3)])
    _damage(partition / "00000000000000000000.log", lambda data: data.__setitem__(-3, data[-3] ^ 0xFF))
    code, summary, segments = _retention(partition)
    assert (code, summary["log_end_offset"], segments[0]["size"]) == (0, 3, 300)
    (partition / "00000000000000000000.index").unlink()
    code, summary, segments = _retention(partition)
    assert (code, summary["log_end_offset"], segments[0]["size"]) == (0, 2, 200)
    assert "no .index: Kafka's loader recovers the segment, cutting it to 200 bytes" in summary["notes"][0]


def test_an_index_entry_past_the_end_of_the_log_makes_the_log_end_the_base_offset(tmp_path):
    """The active log cut before its index's last entry: no batch from that position, readNextOffset
    answers the segment's base offset (Kafka's retain: log end offset 3 with 110 bytes in segment 3).
    With retention.bytes 0 every segment would go, but rolling a new segment at 3 throws ('Trying to
    roll a new log segment ... while it already exists'): nothing is deleted (seed 1, retention case 1)."""
    partition = _indexed_partition(tmp_path, [(0, 3), (3, 3)])
    _damage(partition / "00000000000000000003.log", lambda data: data.__delitem__(slice(110, None)))
    code, summary, _ = _retention(partition)
    assert (code, summary["log_end_offset"], summary["problems"]) == (0, 3, [])
    code, summary, segments = _retention(partition, "--retention-bytes", "0")
    assert code == 1 and not [s for s in segments if s["deleted"]]
    assert summary["problems"] == ["Kafka's retention throws: every segment would go, and rolling a new segment at the "
                                   "log end offset 3 fails because segment 3 already exists"]


def test_a_zero_filled_tail_after_the_last_index_entry_fails_kafkas_loader(tmp_path):
    """readNextOffset reads the zeros as an entry of size 0: CorruptRecordException ('Found record size 0
    smaller than minimum record overhead (14)'), Kafka's retain fails opening the log."""
    partition = _indexed_partition(tmp_path, [(0, 3)])
    _damage(partition / "00000000000000000000.log", lambda data: data.extend(bytes(30)))
    code, summary, segments = _retention(partition, "--retention-bytes", "0")
    assert code == 1 and not [s for s in segments if s["deleted"]]
    assert "Kafka's loader cannot open the log" in summary["problems"][0]
    assert "byte 300: Found record size 0 smaller than minimum record overhead (14)" in summary["problems"][0]


def test_the_index_lookup_is_kafkas_binary_search_even_where_the_offsets_do_not_increase(tmp_path):
    """OffsetIndex.lookup of the last offset (5) on entries (5, 9999), (1, 100), (5, 500): Kafka's
    search of slots [0, 0] stops at slot 0, whose position lies past the log's end, so readNextOffset
    answers the base offset (Kafka's retain: log end offset 0); the last entry's own position would
    give 6."""
    from kafkalog_tools.formats import offset_index

    partition = _indexed_partition(tmp_path, [(0, 6)])
    (partition / "00000000000000000000.index").write_bytes(offset_index.build([(5, 9999), (1, 100), (5, 500)], 0))
    code, summary, _ = _retention(partition)
    assert (code, summary["log_end_offset"]) == (0, 0)


def test_a_segment_without_its_time_index_is_as_old_as_its_log_file(tmp_path):
    """LogSegment.sanityCheck after a clean shutdown: an offset index without its time index gets an
    empty one, and no recovery, so largestTimestamp is the .log mtime (Kafka's retain: 1700000000000
    on seed 77's cases; we took the batches' maximum). After an unclean one the loader recovers the
    segment, which rebuilds its time index: the batches' maximum (Kafka's retain --unclean)."""
    import json
    import os

    partition = tmp_path / "t-0"
    partition.mkdir()
    for base in (0, 3):
        (partition / f"{base:020d}.log").write_bytes(b"".join(
            build_batch(base + n, [build_record(0, 0, b"k", b"v")], base_timestamp=T0 + 5000 + base + n,
                        max_timestamp=T0 + 5000 + base + n) for n in range(3)))
    assert CliRunner().invoke(cli, ["rebuild-index", "--no-backup", str(partition)]).exit_code == 0
    (partition / f"{0:020d}.timeindex").unlink()
    os.utime(partition / f"{0:020d}.log", ns=(T0 * 1_000_000, T0 * 1_000_000))
    for shutdown, first in (("clean", T0), ("unclean", T0 + 5002)):
        result = CliRunner().invoke(cli, ["retention", "--format", "json", "--now", str(T0 + 10_000), "--shutdown",
                                          shutdown, str(partition)])
        segments = [o for o in map(json.loads, result.stdout.splitlines()) if o["type"] == "segment"]
        assert [(s["base_offset"], s["largest_timestamp"]) for s in segments] == [(0, first), (3, T0 + 5005)]
        assert ("mtime" if shutdown == "clean" else "recovered") in segments[0]["timestamp_source"]


def _marker_of_count_minus_5(tmp_path, codec: int, payload: bytes):
    from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
    from tests.test_hostile_dump import with_crc

    partition = tmp_path / "t-0"
    partition.mkdir()
    data = build_batch(0, [build_record(0, 0, b"k", b"v")], attributes=ATTR_TRANSACTIONAL, producer_id=1,
                       producer_epoch=0, base_sequence=0, base_timestamp=T0, max_timestamp=T0)
    header = bytearray(build_batch(1, [b""], attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, producer_id=1,
                                   producer_epoch=0, base_timestamp=T0, max_timestamp=T0)[:61])
    struct.pack_into(">i", header, 8, 49 + len(payload))
    struct.pack_into(">h", header, 21, ATTR_TRANSACTIONAL | ATTR_CONTROL | codec)
    struct.pack_into(">i", header, 57, -5)
    kept = data + with_crc(bytes(header) + payload)
    log = partition / "00000000000000000000.log"
    log.write_bytes(kept + build_batch(2, [build_record(0, 0, b"k", b"v")], base_timestamp=T0, max_timestamp=T0))
    return partition, log, kept


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_a_marker_of_negative_count_reads_only_its_streams_header(tmp_path, codec):
    """DefaultRecordBatch opens the decompressing stream before it checks the count, and opening
    reads the stream's header only (gzip, xerial snappy, lz4 frame; zstd nothing): a good header
    over a corrupt body is "Found invalid record count", which recovery cuts after the marker (Kafka
    kept 167-174 bytes, cut 70; we failed the recovery: seed 1125, case 1271)."""
    from kafkalog_tools import codecs

    payload = bytearray(codecs.compress(codec, build_record(0, 0, b"\x00\x00\x00\x01", b"\x00" * 6) * 3, magic=2))
    for at in range({1: 10, 2: 16, 3: 7, 4: 0}[codec] + 4, len(payload) - 2):
        payload[at] ^= 0x5A
    partition, log, kept = _marker_of_count_minus_5(tmp_path, codec, bytes(payload))
    result = CliRunner().invoke(cli, ["rebuild-index", "--truncate", "--no-backup", "--format", "json", str(partition)])
    assert result.exit_code == 0, result.output
    assert log.read_bytes() == kept


@pytest.mark.parametrize("codec, kafka_throws", [(1, "gzip"), (2, "snappy"), (3, "lz4"), (4, None)])
def test_a_marker_of_negative_count_with_a_garbage_header(tmp_path, codec, kafka_throws):
    """Garbage where the stream's header goes: opening the gzip, snappy or lz4 stream throws (a
    KafkaException: Kafka's recovery fails); opening zstd's reads nothing, so the count is what
    fails, and recovery cuts after the marker."""
    partition, log, kept = _marker_of_count_minus_5(tmp_path, codec, b"\x13\x37" * 20)
    if kafka_throws:
        _kafkas_recovery_fails(partition, log, kafka_throws)
    else:
        result = CliRunner().invoke(cli, ["rebuild-index", "--truncate", "--no-backup", "--format", "json",
                                          str(partition)])
        assert result.exit_code == 0, result.output
        assert log.read_bytes() == kept


def _txn_partition_with_an_abort_going_back(tmp_path):
    """Producer 1 aborts a transaction at offset 5, opens another at 6, then a marker at offset 3
    (a batch repeated later in the log) aborts that one: an aborted transaction ending before the last."""
    from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL

    partition = tmp_path / "t-0"
    partition.mkdir()

    def data(offset: int, sequence: int) -> bytes:
        return build_batch(offset, [build_record(0, 0, b"k", b"v")], attributes=ATTR_TRANSACTIONAL, producer_id=1,
                           producer_epoch=0, base_sequence=sequence, base_timestamp=T0, max_timestamp=T0)

    def abort(offset: int) -> bytes:
        return build_batch(offset, [build_record(0, 0, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x05")],
                           attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, producer_id=1, producer_epoch=0,
                           base_timestamp=T0, max_timestamp=T0)

    log = partition / "00000000000000000000.log"
    log.write_bytes(data(0, 0) + abort(5) + data(6, 1) + abort(3))
    return partition, log


def test_an_aborted_transaction_ending_before_the_last_fails_kafkas_recovery(tmp_path):
    """TransactionIndex.append: "The last offset of appended transactions must increase
    sequentially" - an IllegalArgumentException LogSegment.recover does not catch, so Kafka's
    recovery fails (seed 1648123951, case 11: 625 after 647; we wrote the index)."""
    partition, log = _txn_partition_with_an_abort_going_back(tmp_path)
    _kafkas_recovery_fails(partition, log, "must increase sequentially")


def test_a_marker_batch_of_one_record_with_bytes_after_it_cuts_recovery_after_it(tmp_path):
    """ProducerAppendInfo reads only a marker batch's first record, but where the count says 1 the
    iterator checks on reading it that nothing follows: 4 bytes after the marker record are an
    InvalidRecordException there. Kafka keeps the marker's batch (its bytes are counted before the
    producer state is updated), cuts the log after it, and ends no transaction: no .txnindex entry
    (seed 19019, case 387: we wrote the aborted transaction). With a count of 2 nothing after the first
    record is read: the batch and the rest of the log are kept, the transaction aborted."""
    from kafkalog_tools.formats.control import CONTROL_KEY, END_TXN_MARKER
    from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL

    ids = dict(producer_id=8, producer_epoch=0, base_timestamp=T0, max_timestamp=T0)
    marker = build_record(0, 0, CONTROL_KEY.build(dict(version=0, type=0)),
                          END_TXN_MARKER.build(dict(version=0, coordinator_epoch=3)))
    for records, kept, entries in (([marker + b"\0\0\0\0"], 152, 0), ([marker, b"\0\0\0\0"], 222, 1)):
        partition = tmp_path / f"t-{len(records)}"
        partition.mkdir()
        data = build_batch(0, [build_record(0, 0, b"k", b"v")], attributes=ATTR_TRANSACTIONAL, base_sequence=0,
                           **ids)
        data += build_batch(1, records, attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, **ids)
        log = partition / "00000000000000000000.log"
        log.write_bytes(data + build_batch(len(records) + 1, [build_record(0, 0, b"k", b"v")], base_timestamp=T0,
                                           max_timestamp=T0))
        result = CliRunner().invoke(cli, ["rebuild-index", "--truncate", "--no-backup", "--format", "json",
                                          str(partition)])
        assert result.exit_code == 0, result.output
        assert len(log.read_bytes()) == kept
        txnindex = partition / "00000000000000000000.txnindex"
        assert (txnindex.stat().st_size // 34 if txnindex.exists() else 0) == entries


@pytest.mark.parametrize("bulk", ["always", "never"])
def test_a_new_leader_epoch_from_a_negative_base_offset_fails_kafkas_recovery(tmp_path, monkeypatch, bulk):
    """LogSegment.recover assigns a V2 batch's partition leader epoch above the cache's latest from
    the batch's base offset, and LeaderEpochFileCache.assign throws an IllegalArgumentException for a
    negative one, which recovery does not catch (seed 19020, case 1011: we recovered the segment).
    Where the leader-epoch-checkpoint already holds that epoch, nothing is assigned and Kafka
    recovers the segment whole."""
    monkeypatch.setenv("KAFKALOG_BULK", bulk)
    for checkpoint in (None, "0\n1\n1 0\n"):
        partition = tmp_path / f"epochs-{checkpoint is None}-0"
        partition.mkdir()
        log = partition / "00000000000000000000.log"
        log.write_bytes(build_batch(-1, [build_record(i, i, b"k", b"v") for i in range(4)], partition_leader_epoch=1,
                                    base_timestamp=T0, max_timestamp=T0 + 3)
                        + build_batch(3, [build_record(0, 0, b"k", b"v")], partition_leader_epoch=1, base_timestamp=T0,
                                      max_timestamp=T0))
        if checkpoint is None:
            _kafkas_recovery_fails(partition, log, "Received invalid partition leader epoch entry EpochEntry(epoch=1, "
                                                   "startOffset=-1)")
            continue
        (partition / "leader-epoch-checkpoint").write_text(checkpoint)
        result = CliRunner().invoke(cli, ["rebuild-index", "--truncate", "--no-backup", "--format", "json",
                                          str(partition)])
        assert result.exit_code == 0, result.output
        assert (partition / "00000000000000000000.timeindex").stat().st_size == 12


@pytest.mark.parametrize("bulk", ["always", "never"])
def test_a_leader_epoch_already_assigned_by_earlier_batches_is_not_assigned_again(tmp_path, monkeypatch, bulk):
    """40 batches of epoch 2 (read in bulk, where bulk is wanted), then one of epoch 2 from base
    offset -1: the epoch is the cache's latest already, nothing is assigned, and Kafka recovers the
    segment whole."""
    monkeypatch.setenv("KAFKALOG_BULK", bulk)
    partition = tmp_path / "later-0"
    partition.mkdir()
    log = partition / "00000000000000000000.log"
    log.write_bytes(b"".join(build_batch(n, [build_record(0, 0, b"k", b"v")], partition_leader_epoch=2,
                                         base_timestamp=T0, max_timestamp=T0) for n in range(40))
                    + build_batch(-1, [build_record(i, i, b"k", b"v") for i in range(4)], partition_leader_epoch=2,
                                  base_timestamp=T0, max_timestamp=T0 + 3))
    result = CliRunner().invoke(cli, ["rebuild-index", "--truncate", "--no-backup", "--format", "json", str(partition)])
    assert result.exit_code == 0, result.output
    assert '"truncated_bytes":0' in result.output.replace(" ", "")


@pytest.mark.parametrize("bulk", ["always", "never"])
def test_an_lz4_end_mark_with_its_stored_bit_set_ends_the_frame(tmp_path, monkeypatch, bulk):
    """KafkaLZ4BlockInputStream masks the "stored" bit off a block size before it checks for the
    end mark, so 0x80000000 ends the frame as 0 does (seed 19022, case 537: a V0 wrapper whose end
    mark had that bit flipped; Kafka read its 7 records, we said 'Stream ended prematurely'). The
    codec and the compiled frame decoder (KAFKALOG_BULK=always) both; Kafka's kafka-dump-log prints
    the three records of this batch."""
    from kafkalog_tools import codecs
    from kafkalog_tools.crc import crc32c
    from kafkalog_tools.formats.record_batch import HEADER_SIZE

    monkeypatch.setenv("KAFKALOG_BULK", bulk)
    batch = bytearray(build_batch(0, [build_record(i, i, b"k", b"value") for i in range(3)],
                                  compression_id=codecs.IDS["lz4"]))
    assert batch[-4:] == b"\0\0\0\0" and not batch[HEADER_SIZE + 4] & 0x04  # the end mark, no content checksum
    batch[-1] = 0x80
    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(batch))
    result = CliRunner().invoke(cli, ["dump", "--format", "text", "-d", str(log)])
    assert result.exit_code == 0, result.output
    assert [line.split(" keySize")[0] for line in result.output.splitlines() if line.startswith("| offset")] == [
        "| offset: 0 CreateTime: -1", "| offset: 1 CreateTime: 0", "| offset: 2 CreateTime: 1"]


@pytest.mark.parametrize("bulk", ["always", "never"])
def test_an_lz4_content_checksum_cut_short_is_kafkas_buffer_underflow(tmp_path, monkeypatch, bulk):
    """A frame that flags a content checksum: KafkaLZ4BlockInputStream reads it after the end mark
    with ByteBuffer.getInt, which throws BufferUnderflowException where fewer than 4 bytes are left
    (kafka-dump-log dies on the batch before printing a record), and skips it unverified where they
    are there (the three records print)."""
    from kafkalog_tools import codecs
    from kafkalog_tools.codecs import lz4_codec
    from kafkalog_tools.crc import crc32c
    from kafkalog_tools.formats.record_batch import HEADER_SIZE

    monkeypatch.setenv("KAFKALOG_BULK", bulk)
    batch = bytearray(build_batch(0, [build_record(i, i, b"k", b"value") for i in range(3)],
                                  compression_id=codecs.IDS["lz4"]))
    batch[HEADER_SIZE + 4] |= 0x04  # FLG: a content checksum follows the end mark
    batch[HEADER_SIZE + 6] = lz4_codec.header_checksum(bytes(batch[HEADER_SIZE:]), 6, 2)
    for after, printed in ((b"", 0), (b"\1\2", 0), (b"\1\2\3\4", 3)):
        data = bytearray(batch + after)
        data[8:12] = (len(data) - 12).to_bytes(4, "big")
        data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
        log = tmp_path / f"{len(after):020d}.log"
        log.write_bytes(bytes(data))
        result = CliRunner().invoke(cli, ["dump", "--format", "text", "-d", str(log)])
        assert sum(line.startswith("| offset") for line in result.output.splitlines()) == printed, result.output
        assert (result.exit_code, "BufferUnderflowException" in result.output) == (
            (1, True) if not printed else (0, False))


def _producer_partition(tmp_path):
    """Segments 0 (producer 7's sequences 0-2), 3 (producer 8's transaction: a batch and its COMMIT
    marker) and 5 (producer 7's sequence 3), every batch indexed; returns it and where the marker is."""
    from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL

    def data(offset, producer, sequence, transactional=False):
        return build_batch(offset, [build_record(0, 0, b"k", b"v" * 30)], producer_id=producer, producer_epoch=0,
                           base_sequence=sequence, attributes=ATTR_TRANSACTIONAL if transactional else 0,
                           base_timestamp=T0 + offset, max_timestamp=T0 + offset)

    partition = tmp_path / "t-0"
    partition.mkdir()
    marker = build_batch(4, [build_record(0, 0, _COMMIT_KEY, _MARKER)], producer_id=8, producer_epoch=0,
                         attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, base_timestamp=T0 + 4, max_timestamp=T0 + 4)
    (partition / "00000000000000000000.log").write_bytes(data(0, 7, 0) + data(1, 7, 1) + data(2, 7, 2))
    (partition / "00000000000000000003.log").write_bytes(data(3, 8, 0, transactional=True) + marker)
    (partition / "00000000000000000005.log").write_bytes(data(5, 7, 3))
    result = CliRunner().invoke(cli, ["rebuild-index", "--no-backup", "--index-interval-bytes", "1", "--format", "json",
                                      str(partition)])
    assert result.exit_code == 0, result.output
    return partition, len(data(3, 8, 0, transactional=True))


@pytest.mark.parametrize("damage, without_index_0, snapshots, kafka_throws", [
    (None, False, (), None),
    ("marker", False, (), None),
    ("marker", True, (), "Invalid record size"),
    ("marker", False, (3,), "Invalid record size"),
    ("marker", False, (5,), None),
    ("marker", False, (2,), None),
    ("size", False, (3,), "Found record size 5 smaller than minimum record overhead (14)"),
    ("size", True, (), "Found record size 5 smaller than minimum record overhead (14)"),
    ("open transaction", False, (5,), "Expected transactional write from producer 7 at offset"),
    ("open transaction", False, (3,), "Expected transactional write from producer 7 at offset"),
])
@pytest.mark.parametrize("bulk", ["never", "always"])
def test_the_loader_rebuilds_the_producer_state_from_its_latest_snapshot_to_the_log_end(
        tmp_path, monkeypatch, bulk, damage, without_index_0, snapshots, kafka_throws):
    """After loading the segments, even after a clean shutdown, Kafka's loader rebuilds the producer
    state from the latest snapshot to the log end (UnifiedLog.rebuildProducerState), reading every
    batch with a producer id, CRCs unchecked, and throws on what ProducerAppendInfo or the batch
    iterator throws on: here a COMMIT marker whose record length overruns it, an entry size of 5 (in
    segment 3) and a non-transactional batch (at 5) of a producer whose snapshot has a transaction
    open. Without a snapshot it reads nothing; recovering a segment without its .index writes one
    (at 3, after segment 0); a stray snapshot below the last segment's base offset (2) is deleted;
    one at 5 leaves segment 3 unread. Kafka's retain, case by case, agrees (differential run, seed
    20024, retention cases 532 and 930: we did not model this rebuild, and said the log opens)."""
    from kafkalog_tools.formats import producer_snapshot

    monkeypatch.setenv("KAFKALOG_BULK", bulk)
    partition, marker_at = _producer_partition(tmp_path)
    segment_3 = partition / "00000000000000000003.log"
    if damage == "marker":
        _damage(segment_3, lambda data: data.__setitem__(marker_at + 61, data[marker_at + 61] + 10))  # length + 5
    elif damage == "size":
        _damage(segment_3, lambda data: data.__setitem__(slice(marker_at + 8, marker_at + 12), (5).to_bytes(4, "big")))
    if without_index_0:
        (partition / "00000000000000000000.index").unlink()
    entries = [producer_snapshot.ProducerEntry(7, 0, 2, 2, 0, T0, -1, 3)] if damage == "open transaction" else []
    for offset in snapshots:
        (partition / f"{offset:020d}.snapshot").write_bytes(producer_snapshot.build(entries))
    code, summary, _ = _retention(partition)
    if kafka_throws is None:
        assert (code, summary["problems"]) == (0, [])
    else:
        assert code == 1 and summary["problems"][0].startswith("Kafka's loader cannot open the log")
        if damage != "marker":  # (our reader words the overrun its own way)
            assert kafka_throws in summary["problems"][0]


def _value_overrun(offset: int, magic: int, key: bytes | None) -> bytes:
    """A V0/V1 message whose value size field says 50 where 2 bytes follow it."""
    entry = bytearray(legacy.build_entry(offset, magic, key, b"vv", timestamp=5 if magic else None))
    value_size_at = legacy.ENTRY_PREFIX.size + (8 if magic else 0) + 4 + (len(key) if key is not None else 0)
    entry[value_size_at:value_size_at + 4] = struct.pack(">i", 50)
    return bytes(entry)


CAUGHT = {"--offsets-decoder": " key: Error at offset {o}, skipping. newLimit > capacity: (50 > 2)",
          "--share-group-state-decoder": " key: Error at offset {o}, skipping. newLimit > capacity: (50 > 2)",
          "--cluster-metadata-decoder": " payload: Error at {o}, skipping. newLimit > capacity: (50 > 2)",
          "--remote-log-metadata-decoder": " payload: Error at offset {o}, skipping. newLimit > capacity: (50 > 2)",
          "--transaction-log-decoder": None}


@pytest.mark.parametrize("flag", list(CAUGHT))
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("shape", ["message", "null key", "in a wrapper"])
def test_a_decoder_that_catches_an_unreadable_value_prints_why_and_goes_on(tmp_path, flag, magic, shape):
    """A V0/V1 value running past its message: LegacyRecord.value() throws ByteBuffer.limit's
    IllegalArgumentException. kafka-dump-log's parsers for offsets, share group state, cluster
    metadata and remote log metadata catch it ("Error at offset O, skipping. newLimit > capacity:
    (50 > 2)", after `key:` where the parser reads the key too, `payload:` where only the value) and
    go on to the next record; the offsets and share group parsers check first, outside their try,
    that the key is there (a null key throws), and the transaction log parser catches nothing.
    Kafka's tool, case by case (differential run, seed 20025, dump case 412): we printed the record
    line alone, and stopped there."""
    from kafkalog_tools import codecs

    timestamp = 5 if magic else None
    good = [legacy.build_entry(offset, magic, b"\x00\x01k", b"x", timestamp=timestamp) for offset in range(4)]
    bad = _value_overrun(1 if shape == "in a wrapper" else 0, magic, None if shape == "null key" else b"k")
    if shape == "in a wrapper":
        inner = good[0] + bad + good[2]
        data = legacy.build_entry(2, magic, None, codecs.compress(1, inner, magic=magic), timestamp=timestamp,
                                  attributes=1) + good[3]
    else:
        data = bad + good[1]
    log = tmp_path / "__consumer_offsets-4" / "00000000000000000000.log"
    log.parent.mkdir()
    log.write_bytes(data)
    result = CliRunner().invoke(cli, ["dump", "--format", "text", "--deep-iteration", flag, str(log)])
    assert result.exit_code == 1  # (the value is corrupt: we say so on stderr)
    lines = result.stdout.splitlines()
    bad_line = next(number for number, line in enumerate(lines) if "valueSize: 50 " in line)
    offset = 1 if shape == "in a wrapper" else 0
    caught = CAUGHT[flag]
    if shape == "null key" and flag in ("--offsets-decoder", "--share-group-state-decoder"):
        caught = None  # "message had a missing key", thrown before the try
    if caught is None:
        assert lines[bad_line].endswith("crc: %d}" % legacy.read_message(bad, 0, len(bad), lenient=True).crc)
        # Kafka's tool throws there; we go on with the next batch, as where it throws elsewhere
        assert lines[bad_line + 1].startswith(f"offset: {3 if shape == 'in a wrapper' else 1} position:")
    else:
        assert lines[bad_line].endswith("}" + caught.format(o=offset))
        assert len(lines) > bad_line + 1 and f"offset: {offset + 1} " in lines[bad_line + 1]


@pytest.mark.parametrize("without_index, kept", [
    (True, [(1, 2, 0), (2, -1, 1)]),  # producer 2's last batch, read after the loader's snapshot, as an empty header
    (False, [(2, -1, 1)]),  # a clean shutdown without snapshots: no producer at all
])
def test_the_cleaner_keeps_the_last_batch_of_the_producers_the_loader_holds(tmp_path, without_index, kept):
    """Kafka's loader drops the producers it finds expired when it loads a snapshot, not those it
    reads from the log after it; the cleaner keeps the last batch of every producer it holds. Here
    segment 0 (producer 1, two days old) has no .index: its recovery snapshots the state at offset
    1, the final rebuild loads that snapshot (producer 1 expired) and reads producer 2's batch from
    segment 1. Kafka's cleaner (kafka-oracle clean, checked live) keeps it as an empty header; we
    expired every producer by its age and dropped it (differential run on damaged partitions)."""
    import json

    day = 86_400_000
    partition = tmp_path / "logs" / "t-0"
    partition.mkdir(parents=True)
    batches = [build_batch(0, [build_record(0, 0, b"k", b"v")], producer_id=1, producer_epoch=0, base_sequence=0,
                           base_timestamp=T0, max_timestamp=T0),
               build_batch(1, [build_record(0, 0, b"k", b"v")], producer_id=2, producer_epoch=0, base_sequence=0,
                           base_timestamp=T0 + 1, max_timestamp=T0 + 1)]
    batches += [build_batch(offset, [build_record(0, 0, b"k", b"w")], base_timestamp=T0 + offset,
                            max_timestamp=T0 + offset) for offset in (2, 3)]
    for offset, batch in enumerate(batches):
        (partition / f"{offset:020d}.log").write_bytes(batch)
    assert CliRunner().invoke(cli, ["rebuild-index", "--no-backup", "--format", "json", str(partition)]).exit_code == 0
    if without_index:
        (partition / "00000000000000000000.index").unlink()
    (partition.parent / ".kafka_cleanshutdown").write_bytes(b"")
    result = CliRunner().invoke(cli, ["compaction", "--simulate", "--output-dir", str(tmp_path / "out"), "--now",
                                      str(T0 + 2 * day), "--delete-retention-ms", "0", "--format", "json",
                                      str(partition)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["cleaned_up_to"] == 3
    with SegmentFile(tmp_path / "out" / "t-0" / "00000000000000000000.log") as cleaned:
        assert [(b.base_offset, b.producer_id, b.count) for b in cleaned.entries()] == kept


def _batch(offset: int, key: bytes, **fields) -> bytes:
    return build_batch(offset, [build_record(0, 0, key, b"v")], base_timestamp=T0 + offset, max_timestamp=T0 + offset,
                       **fields)


def _marker(offset: int, producer_id: int, abort: bool) -> bytes:
    from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL

    key = b"\x00\x00\x00\x00" if abort else _COMMIT_KEY
    return build_batch(offset, [build_record(0, 0, key, _MARKER)], producer_id=producer_id, producer_epoch=0,
                       attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, base_timestamp=T0 + offset,
                       max_timestamp=T0 + offset)


def _transactional(offset: int, key: bytes, producer_id: int, sequence: int) -> bytes:
    from kafkalog_tools.formats.record_batch import ATTR_TRANSACTIONAL

    return _batch(offset, key, producer_id=producer_id, producer_epoch=0, base_sequence=sequence,
                  attributes=ATTR_TRANSACTIONAL)


CLEANER_SHAPES = {
    # segment 0 ends with a batch at offset 25, as if a bit flip had moved it past the transaction that
    # segment 21 aborts: Kafka's cleaner adds a segment's aborted transactions when it comes to that
    # segment, so producer 3's committed batch at 12 stays (we took it for aborted)
    "late aborted transaction": [(0, [_batch(0, b"a"), _batch(25, b"b", producer_id=9, producer_epoch=0,
                                                                base_sequence=0)]),
                                 (8, [_transactional(12, b"c", 3, 0), _marker(13, 3, abort=False), _batch(14, b"a")]),
                                 (21, [_transactional(21, b"e", 3, 1), _marker(22, 3, abort=True), _batch(23, b"f")]),
                                 (24, [_batch(24, b"z")])],
    # a producer id with no epoch: rebuilding the batch (one of its records goes) is refused
    "no producer epoch": [(0, [build_batch(0, [build_record(0, 0, b"a", b"1"), build_record(1, 0, b"b", b"2")],
                                           producer_id=5, producer_epoch=-1, base_sequence=0, base_timestamp=T0,
                                           max_timestamp=T0), _batch(2, b"a")]),
                          (3, [_batch(3, b"z")])],
    # an offset 2^31 past the segment's base: appending it to the cleaned segment overflows
    "offset overflow": [(0, [_batch(0, b"a"), _batch(2**31 + 10, b"b")]), (8, [_batch(8, b"a")]), (9, [_batch(9, b"z")])],
    # producer 1's transaction at 0 aborted by the marker at 1, whose producer id a bit flip changes once
    # the .txnindex is written (`_flip_marker_producer`): Kafka's cleaner takes the aborted transactions
    # from the .txnindex, and drops 0 (we replayed the markers, found none, and kept it)
    "marker of another producer": [(0, [_transactional(0, b"a", 1, 0), _marker(1, 1, abort=True), _batch(2, b"b")]),
                                   (3, [_batch(3, b"z")])],
    # a bit flip made the second record's offset delta 0, below the first's 1 (CRCs are not checked after
    # a clean shutdown): rebuilding the batch to set the tombstone's delete horizon, MemoryRecordsBuilder
    # refuses an offset that does not increase
    "offsets out of order": [(0, [build_batch(0, [build_record(1, 0, b"a", None), build_record(0, 0, b"b", b"2")],
                                              last_offset_delta=1, base_timestamp=T0, max_timestamp=T0),
                                  _batch(2, b"c")]),
                             (3, [_batch(3, b"z")])],
    # a record timestamp below zero (and not -1), kept while the record after it in its batch goes: the
    # builder refuses the timestamp
    "negative timestamp": [(0, [build_batch(0, [build_record(0, -T0 - 5, b"a", b"1"), build_record(1, 0, b"b", b"2")],
                                            base_timestamp=T0, max_timestamp=T0),
                                _batch(2, b"b")]),
                           (3, [_batch(3, b"z")])],
    # garbage made a last offset delta -2^31, so the batch's last offset is negative (CRCs are not
    # checked after a clean shutdown): the cleaner keeps the batch as it is (its record's key is the
    # latest) and refuses a max timestamp reported at a negative offset
    "negative last offset": [(0, [_batch(0, b"a"), build_batch(1, [build_record(0, 0, b"b", b"2")],
                                                               last_offset_delta=-(2**31), base_timestamp=T0,
                                                               max_timestamp=T0), _batch(2, b"a")]),
                             (3, [_batch(3, b"z")])],
    # garbage in segment 0's .txnindex made its entry's last stable offset 10^6 (`TXN_INDEX_DAMAGE`):
    # collectAbortedTransactions stops there, so the offset map never learns that producer 2's transaction
    # at 4 was aborted: key k's latest is 4, the record at 3 goes, and so does the aborted one (we kept 3)
    "last stable offset past the range": [(0, [_batch(0, b"x"), _transactional(1, b"t", 1, 0), _marker(2, 1, abort=True)]),
                                          (3, [_batch(3, b"k"), _transactional(4, b"k", 2, 0),
                                               _marker(5, 2, abort=True)]),
                                          (6, [_batch(6, b"z")])],
    # garbage made the first entry's last offset 1000: both ABORT markers stay (their data goes), and the
    # cleaned segment's transaction index refuses the second's last offset 3 after 1000
    "aborted transactions out of order": [(0, [_transactional(0, b"a", 1, 0), _marker(1, 1, abort=True),
                                               _transactional(2, b"b", 2, 0), _marker(3, 2, abort=True),
                                               _batch(4, b"c")]),
                                          (5, [_batch(5, b"z")])],
    # a magic of 85: the cleaner's reader refuses it (Kafka's file reader does not)
    "invalid magic": [(0, [_batch(0, b"a"), _batch(1, b"b")[:16] + b"\x55" + _batch(1, b"b")[17:], _batch(2, b"a")]),
                      (3, [_batch(3, b"z")])],
}


TXN_INDEX_DAMAGE = {"last stable offset past the range": (26, 10**6), "aborted transactions out of order": (18, 1000)}
"""A shape's .txnindex damage: (byte of the first entry, the 8-byte value written there)."""


def cleaner_shape(root, name: str):
    """A partition of `CLEANER_SHAPES[name]` after a clean shutdown, indexed by our rebuild-index; and
    the time to clean it at."""
    partition = root / "logs" / "t-0"
    partition.mkdir(parents=True)
    for base, batches in CLEANER_SHAPES[name]:
        (partition / f"{base:020d}.log").write_bytes(b"".join(batches))
    CliRunner().invoke(cli, ["rebuild-index", "--no-backup", "--format", "json", str(partition)])
    if name == "marker of another producer":
        log = partition / "00000000000000000000.log"
        data = bytearray(log.read_bytes())
        marker = len(_transactional(0, b"a", 1, 0))
        data[marker + 43] ^= 0x04  # the marker's producer id, 1 -> 1125899906842625 (not under the CRC's check here)
        log.write_bytes(bytes(data))
    if name in TXN_INDEX_DAMAGE:
        field, value = TXN_INDEX_DAMAGE[name]
        index = partition / "00000000000000000000.txnindex"
        data = bytearray(index.read_bytes())
        data[field:field + 8] = value.to_bytes(8, "big")  # (of the first entry)
        index.write_bytes(bytes(data))
    for log in partition.glob("*.log"):  # (where recovery refuses an offset: empty indexes, which Kafka takes)
        for suffix in (".index", ".timeindex"):
            log.with_suffix(suffix).touch()
    (partition.parent / ".kafka_cleanshutdown").write_bytes(b"")
    return partition, T0 + 10**6


@pytest.mark.parametrize("name, kafka_says", [
    ("late aborted transaction", None),
    ("marker of another producer", None),
    ("no producer epoch", "Invalid negative producer epoch"),
    ("offset overflow", "Detected offset overflow at offset 2147483658"),
    ("invalid magic", "Invalid magic found in record: 85"),
    ("offsets out of order", "Illegal offset 0 following previous offset 1 (Offsets must increase monotonically)."),
    ("negative timestamp", "Invalid negative timestamp -5"),
    ("negative last offset", f"shallowOffset undefined for maximum timestamp {T0}"),
    ("last stable offset past the range", None),
    ("aborted transactions out of order", "The last offset of appended transactions must increase sequentially, "
                                          "but 3 is not greater than current last offset 1000"),
])
def test_the_cleaner_on_a_damaged_closed_segment_does_what_kafkas_does(tmp_path, name, kafka_says):
    """Kafka's cleaner (kafka-oracle clean after a clean shutdown, checked live) on `CLEANER_SHAPES`:
    where it throws (rebuilding a batch MemoryRecordsBuilder refuses, an offset the cleaned segment
    cannot hold, a magic its reader refuses) we must say so, clean nothing and exit 1; where it cleans,
    alike (found by damaging closed segments in the differential run)."""
    import json

    partition, now = cleaner_shape(tmp_path, name)
    result = CliRunner().invoke(cli, ["compaction", "--simulate", "--output-dir", str(tmp_path / "out"), "--now", str(now),
                                      "--format", "json", str(partition)])
    summary = json.loads(result.stdout.splitlines()[-1])
    if kafka_says:
        assert (result.exit_code, summary["would_clean"], summary["output_dir"]) == (1, False, None), result.output
        assert kafka_says in summary["problems"][0]
        return
    with SegmentFile(tmp_path / "out" / "t-0" / "00000000000000000000.log") as cleaned:
        kept = {record.offset for batch in cleaned.entries() for record in batch.records()}
    if name == "late aborted transaction":
        assert result.exit_code == 0 and summary["cleaned_up_to"] == 24, result.output
        assert 12 in kept and 21 not in kept  # the committed batch stays, the aborted one goes
    elif name == "last stable offset past the range":
        assert result.exit_code == 0 and summary["cleaned_up_to"] == 6, result.output
        with SegmentFile(tmp_path / "out" / "t-0" / "00000000000000000000.log") as cleaned:
            keys = {record.key for batch in cleaned.entries() for record in batch.records() if not batch.is_control}
        assert b"k" not in keys and b"x" in keys
    else:
        assert result.exit_code == 0 and summary["cleaned_up_to"] == 3, result.output
        assert kept == {1, 2}  # the aborted record goes; the marker stays until its delete horizon


def test_a_txnindex_version_is_its_first_byte_signed(tmp_path):
    """AbortedTxn.version() reads one byte, signed: a first byte of 0x80 is version -128, which Kafka
    accepts (kafka-dump-log prints it, checked live); we read it unsigned and refused the index."""
    entry = struct.pack(">hqqqq", 0, 5, 10, 12, 10)
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(entry + b"\x80" + entry[1:])
    result = CliRunner().invoke(cli, ["dump", "--format", "text", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1:] == [
        "version: 0 producerId: 5 firstOffset: 10 lastOffset: 12 lastStableOffset: 10",
        "version: -128 producerId: 5 firstOffset: 10 lastOffset: 12 lastStableOffset: 10"]


@pytest.mark.parametrize("version, last_offset, kafka_says", [
    (0, 2, None),  # ends below base offset 3: sanityCheck's CorruptIndexException, the segment recovered
    (1, 4, "Unexpected aborted transaction version 1 in transaction index"),  # a KafkaException: not caught
])
def test_the_loader_checks_each_txnindex(tmp_path, version, last_offset, kafka_says):
    """LogSegment.sanityCheck runs TransactionIndex.sanityCheck on every segment with an offset index,
    even after a clean shutdown. Segment 3's .txnindex gets one entry and zeros end its last batch:
    where the entry ends below the base offset Kafka recovers the segment, cut to 200 bytes (the log
    still ends at 9); where its version is 1 the loader throws (Kafka's retain, checked live). We did
    not read the .txnindex files when loading (found by damaging them in the differential run)."""
    import os

    partition = _indexed_partition(tmp_path, [(0, 3), (3, 3), (6, 3)])
    (tmp_path / ".kafka_cleanshutdown").write_bytes(b"")
    _damage(partition / "00000000000000000003.log", lambda data: data.__setitem__(slice(250, 260), bytes(10)))
    os.utime(partition / "00000000000000000003.log", ns=(T0 * 1_000_000, T0 * 1_000_000))
    (partition / "00000000000000000003.txnindex").write_bytes(struct.pack(">bbqqqq", version, 0, 9, 2, last_offset, 2))
    code, summary, segments = _retention(partition, shutdown="auto")
    if kafka_says:
        assert code == 1 and kafka_says in summary["problems"][0]
        assert summary["problems"][0].startswith("Kafka's loader cannot open the log")
        return
    assert (code, summary["log_end_offset"]) == (0, 9)
    assert [(s["base_offset"], s["size"], s["largest_timestamp"]) for s in segments] == [
        (0, 300, T0 + 2), (3, 200, T0 + 4), (6, 300, T0 + 8)]
    assert (f"{partition / '00000000000000000003.log'}: a .txnindex entry ends below its base offset: Kafka's loader "
            f"recovers the segment, cutting it to 200 bytes") in summary["notes"]


@pytest.mark.parametrize("name", ["golden-v2-txn-0", "golden-v2-mixed-0"])
def test_a_cleaned_transactional_log_keeps_the_cleaners_txnindex_and_verifies(tmp_path, name):
    """Kafka's cleaner appends each ABORT marker it keeps (its transaction's batches removed) to the
    cleaned segment's .txnindex, the entry as it was read: its first offset and LSO from before the
    cleaning. `compaction --simulate` wrote the index recovery's rules rebuild (empty here: the
    transactions left have no batches), and `verify` called Kafka's own cleaned log wrong (20 and 14
    errors: entries of markers that end no transaction left, first offsets below the batches left).
    Now our .txnindex files are Kafka's bytes (kafka-oracle clean, live) and both outputs verify."""
    import os
    import subprocess

    from kafkalog_tools import compaction
    from kafkalog_tools.formats.logdir import read_partition_dir
    from kafkalog_tools.fuzz import oracle
    from kafkalog_tools.verify import ERROR, Verification
    from tests.conftest import GOLDEN, need

    if oracle.unavailable():
        pytest.skip(oracle.unavailable())
    source = need(GOLDEN / "logs" / name)
    now = T0 + 30 * 86_400_000
    kafka_out = tmp_path / "kafka" / "logs" / name
    done = subprocess.run([str(oracle.home() / "bin" / "kafka-oracle"), "clean", str(source), str(kafka_out), "--now",
                           str(now), "--unclean"], capture_output=True, text=True,
                          env={"KAFKA_ORACLE_HEAP_OPTS": oracle.HEAP, **os.environ})
    assert done.returncode == 0, done.stderr[-500:]
    report = compaction.analyze_partition(read_partition_dir(source), compaction.CompactionSettings(now=now))
    ours = compaction.simulate(report, read_partition_dir(source), tmp_path / "ours")
    kafka_indexes = {p.name: p.read_bytes() for p in kafka_out.glob("*.txnindex") if p.stat().st_size}
    assert kafka_indexes  # (the cleaner kept entries)
    assert {p.name: p.read_bytes() for p in ours.glob("*.txnindex")} == kafka_indexes
    for directory in (kafka_out, ours):
        assert [f for f in Verification([str(directory)]) if f.severity == ERROR] == []


def test_the_cleaners_groups_keep_their_offsets_within_int_max_of_their_first_segment(tmp_path):
    """Cleaner.groupSegmentsBySize checks the next segment's offsets (up to the base offset after it,
    here the active segment's 2147483698) against the group's first base offset, 0: segment 200 starts
    a group of its own. Kafka's clean: segments 0 (emptied) and 200 (213 bytes) then the active one (we
    measured from the group's last segment, 100, and merged 200 into 0; differential run, seed 24102,
    compaction case 450)."""
    import json
    import os

    partition = tmp_path / "logs" / "t-0"
    partition.mkdir(parents=True)

    def segment(base: int, keys: list[bytes]) -> None:
        (partition / f"{base:020d}.log").write_bytes(b"".join(
            build_batch(base + n, [build_record(0, 0, key, b"v")], base_timestamp=T0 + base + n,
                        max_timestamp=T0 + base + n) for n, key in enumerate(keys)))
    for base in (0, 100, 200):
        segment(base, [b"k0", b"k1", b"k2"])
    segment(2**31 + 50, [b"k0"])
    assert CliRunner().invoke(cli, ["rebuild-index", "--no-backup", str(partition)]).exit_code == 0
    for path in partition.iterdir():
        os.utime(path, ns=(T0 * 1_000_000, T0 * 1_000_000))
    (partition.parent / ".kafka_cleanshutdown").write_bytes(b"")
    result = CliRunner().invoke(cli, ["compaction", "--simulate", "--output-dir", str(tmp_path / "out"), "--now",
                                      str(T0 + 10**6), "--min-cleanable-ratio", "0.01", "--format", "json",
                                      str(partition)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[-1])["groups"] == [[0, 100], [200]]
    sizes = {path.name: path.stat().st_size for path in (tmp_path / "out" / "t-0").glob("*.log")}
    assert sizes == {"00000000000000000000.log": 0, "00000000000000000200.log": 213,
                     "00000000002147483698.log": sizes["00000000002147483698.log"]}


def test_a_first_dirty_offset_inside_the_first_uncleanable_segment_makes_the_cleaner_throw(tmp_path):
    """One segment of ten batches (the active one, so the first uncleanable offset is its base, 0) and
    a cleaner checkpoint at 6: Kafka's clean throws IllegalArgumentException ('Invalid log segment
    range: requested segments in t-0 from offset 6 which is greater than limit offset 0', checked live;
    differential run with --first-dirty-offset, seed 24105: we cleaned nothing and exited 0). Kafka's
    config also refuses max.compaction.lag.ms 0, and so do we."""
    import json

    partition = _indexed_partition(tmp_path, [(0, 10)])
    (tmp_path / ".kafka_cleanshutdown").write_bytes(b"")
    result = CliRunner().invoke(cli, ["compaction", "--format", "json", "--now", str(T0 + 10**6),
                                      "--first-dirty-offset", "6", str(partition)])
    summary = json.loads(result.stdout.splitlines()[-1])
    assert (result.exit_code, summary["would_clean"]) == (1, False)
    assert summary["problems"] == ["Invalid log segment range: requested segments in t-0 from offset 6 which is greater "
                                   "than limit offset 0; Kafka's cleaner throws here and marks the partition uncleanable"]
    result = CliRunner().invoke(cli, ["compaction", "--now", str(T0), "--max-compaction-lag-ms", "0", str(partition)])
    assert result.exit_code == 2


@pytest.mark.parametrize("high_watermark, last_stable_offset", [(7, 5), (8, 8)])
def test_a_transaction_the_loader_saw_end_at_or_past_the_high_watermark_holds_the_last_stable_offset(
        tmp_path, high_watermark, last_stable_offset):
    """Producer 1's transaction 5-6, committed by the marker at 7; after a clean shutdown the loader
    replays from the snapshot at 5. The transaction it saw complete stays unstable until the high
    watermark passes its marker (ProducerStateManager.unreplicatedTxns): Kafka's clean with
    --high-watermark 7 has last stable offset 5, with 8 has 8 (checked live; differential run, seed
    24106, compaction case 127: we counted only the open transactions)."""
    import json
    import os

    from kafkalog_tools.formats import producer_snapshot
    from kafkalog_tools.formats.record_batch import ATTR_TRANSACTIONAL
    from tests.batches import transaction_marker

    def batch(offset: int, **fields) -> bytes:
        return build_batch(offset, [build_record(0, 0, b"k%d" % offset, b"v")], base_timestamp=T0 + offset,
                           max_timestamp=T0 + offset, **fields)
    transactional = dict(attributes=ATTR_TRANSACTIONAL, producer_id=1, producer_epoch=0)
    marker = transaction_marker(7, 1, producer_id=1, producer_epoch=0, timestamp=T0 + 7)
    partition = tmp_path / "logs" / "t-0"
    partition.mkdir(parents=True)
    (partition / f"{0:020d}.log").write_bytes(b"".join(batch(n) for n in range(5)))
    (partition / f"{5:020d}.log").write_bytes(batch(5, base_sequence=0, **transactional)
                                               + batch(6, base_sequence=1, **transactional) + marker + batch(8) + batch(9))
    assert CliRunner().invoke(cli, ["rebuild-index", "--no-backup", str(partition)]).exit_code == 0
    (partition / f"{5:020d}.snapshot").write_bytes(producer_snapshot.build([]))
    for path in partition.iterdir():
        os.utime(path, ns=(T0 * 1_000_000, T0 * 1_000_000))
    (partition.parent / ".kafka_cleanshutdown").write_bytes(b"")
    result = CliRunner().invoke(cli, ["compaction", "--format", "json", "--now", str(T0 + 10**6), "--high-watermark",
                                      str(high_watermark), str(partition)])
    summary = json.loads(result.stdout.splitlines()[-1])
    assert (summary["last_stable_offset"], summary["first_uncleanable_offset"]) == (last_stable_offset, 5)


@pytest.mark.parametrize("first_dirty, kept", [(0, [11]), (6, [10, 11])])
def test_the_offset_map_misses_the_abort_marker_before_where_it_starts_reading(tmp_path, first_dirty, kept):
    """Producer 1's transaction at 0 aborted by the marker at 1; x=v1 at 10; producer 1's transaction
    x=v2 at 11 committed at 12 (segment 11). From a cleaner checkpoint at 6, Kafka collects the aborted
    transactions that end at or after the log start offset (0), not the checkpoint, and reads segment 0
    from where its index puts 6, past the marker: producer 1 stays aborted, 11 is kept out of the offset
    map, and x=v1 at 10 survives the cleaning. From 0 the marker is read and 10 goes. Kafka's clean,
    checked live (differential run, seed 24106, compaction cases 102 and 346)."""
    import json
    import os

    from kafkalog_tools.formats.control import CONTROL_KEY, END_TXN_MARKER
    from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL

    def batch(offset: int, key: bytes, value: bytes = b"v", **fields) -> bytes:
        return build_batch(offset, [build_record(0, 0, key, value)], base_timestamp=T0 + offset,
                           max_timestamp=T0 + offset, **fields)

    def marker(offset: int, abort: bool) -> bytes:
        return build_batch(offset, [build_record(0, 0, CONTROL_KEY.build(dict(version=0, type=0 if abort else 1)),
                                                 END_TXN_MARKER.build(dict(version=0, coordinator_epoch=0)))],
                           attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, producer_id=1, producer_epoch=0,
                           base_timestamp=T0 + offset, max_timestamp=T0 + offset)
    transactional = dict(attributes=ATTR_TRANSACTIONAL, producer_id=1, producer_epoch=0)
    partition = tmp_path / "logs" / "t-0"
    partition.mkdir(parents=True)
    (partition / f"{0:020d}.log").write_bytes(batch(0, b"a", base_sequence=0, **transactional) + marker(1, True)
                                              + b"".join(batch(n, b"k%d" % n) for n in range(2, 10)) + batch(10, b"x", b"v1"))
    (partition / f"{11:020d}.log").write_bytes(batch(11, b"x", b"v2", base_sequence=1, **transactional)
                                               + marker(12, False) + batch(13, b"z"))
    (partition / f"{14:020d}.log").write_bytes(batch(14, b"q"))
    assert CliRunner().invoke(cli, ["rebuild-index", "--no-backup", "--index-interval-bytes", "1",
                                    str(partition)]).exit_code == 0
    for path in partition.iterdir():
        os.utime(path, ns=(T0 * 1_000_000, T0 * 1_000_000))
    (partition.parent / ".kafka_cleanshutdown").write_bytes(b"")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["compaction", "--simulate", "--output-dir", str(out), "--now", str(T0 + 10**6),
                                      "--first-dirty-offset", str(first_dirty), "--min-cleanable-ratio", "0.01",
                                      "--format", "json", str(partition)])
    assert result.exit_code == 0, result.output
    offsets = []
    for log in sorted((out / "t-0").glob("*.log")):
        with SegmentFile(log) as segment:
            offsets += [r.offset for b in segment.entries() if not b.is_control for r in b.records() if r.key == b"x"]
    assert offsets == kept
    assert json.loads(result.stdout.splitlines()[-1])["first_dirty_offset"] == first_dirty


def test_looking_up_the_first_unstable_offset_reads_the_damage_before_it(tmp_path):
    """After a clean shutdown the loader reads nothing of segment 0, but the snapshot at 6 holds producer
    1's open transaction from 3, and the log looks that offset up (maybeIncrementFirstUnstableOffset):
    from segment 0's start (its index is empty) it meets batch 1's size field of 5. Kafka's retain throws
    CorruptRecordException opening the log (checked live; differential run, seed 24108, retention case
    536: we read nothing and deleted by size)."""
    import json
    import os
    import struct

    from kafkalog_tools.formats import producer_snapshot
    from kafkalog_tools.formats.record_batch import ATTR_TRANSACTIONAL

    def batch(offset: int, **fields) -> bytes:
        return build_batch(offset, [build_record(0, 0, b"k", b"v")], base_timestamp=T0 + offset,
                           max_timestamp=T0 + offset, **fields)
    partition = tmp_path / "logs" / "t-0"
    partition.mkdir(parents=True)
    first = bytearray(batch(0) + batch(1) + batch(2) + batch(3, attributes=ATTR_TRANSACTIONAL, producer_id=1,
                                                             producer_epoch=0, base_sequence=0) + batch(4))
    struct.pack_into(">i", first, len(batch(0)) + 8, 5)
    (partition / f"{0:020d}.log").write_bytes(bytes(first))
    (partition / f"{5:020d}.log").write_bytes(batch(5))
    for base in (0, 5):
        for suffix in (".index", ".timeindex"):
            (partition / f"{base:020d}{suffix}").write_bytes(b"")
    (partition / f"{6:020d}.snapshot").write_bytes(producer_snapshot.build(
        [producer_snapshot.ProducerEntry(1, 0, 0, 3, 0, T0 + 3, -1, 3)]))
    for path in partition.iterdir():
        os.utime(path, ns=(T0 * 1_000_000, T0 * 1_000_000))
    (partition.parent / ".kafka_cleanshutdown").write_bytes(b"")
    result = CliRunner().invoke(cli, ["retention", "--format", "json", "--now", str(T0 + 10**6), "--retention-bytes", "0",
                                      str(partition)])
    summary = json.loads(result.stdout.splitlines()[-1])
    assert result.exit_code == 1 and summary["deleted_segments"] == 0
    assert summary["problems"][0].startswith("Kafka's loader cannot open the log: ")
    assert summary["problems"][0].endswith("byte 70: Found record size 5 smaller than minimum record overhead (14) "
                                           "(expected >= 14, found 5)")


def test_the_first_unstable_offset_is_the_base_offset_of_the_batch_its_lookup_finds(tmp_path):
    """Producer 1's open transaction starts at 3 (the snapshot at 5 says so), but a bit flip made batch
    3's base offset -6890104423889241787: looking 3 up (LogSegment.read) finds batch 4, and the first
    unstable offset becomes that batch's base offset. Kafka's clean: last stable offset 4 (checked live;
    differential run, seed 24111, compaction case 524: we said 3)."""
    import json
    import os
    import struct

    from kafkalog_tools.formats import producer_snapshot
    from kafkalog_tools.formats.record_batch import ATTR_TRANSACTIONAL

    def batch(offset: int, **fields) -> bytes:
        return build_batch(offset, [build_record(0, 0, b"k%d" % offset, b"v")], base_timestamp=T0 + offset,
                           max_timestamp=T0 + offset, **fields)
    partition = tmp_path / "logs" / "t-0"
    partition.mkdir(parents=True)
    (partition / f"{0:020d}.log").write_bytes(batch(0) + batch(1))
    active = partition / f"{2:020d}.log"
    active.write_bytes(batch(2) + batch(3, attributes=ATTR_TRANSACTIONAL, producer_id=1, producer_epoch=0,
                                         base_sequence=0) + batch(4))
    assert CliRunner().invoke(cli, ["rebuild-index", "--no-backup", "--index-interval-bytes", "1",
                                    str(partition)]).exit_code == 0
    data = bytearray(active.read_bytes())
    struct.pack_into(">q", data, len(batch(2)), -6890104423889241787)
    active.write_bytes(bytes(data))
    (partition / f"{5:020d}.snapshot").write_bytes(producer_snapshot.build(
        [producer_snapshot.ProducerEntry(1, 0, 0, 3, 0, T0 + 3, -1, 3)]))
    for path in partition.iterdir():
        os.utime(path, ns=(T0 * 1_000_000, T0 * 1_000_000))
    (partition.parent / ".kafka_cleanshutdown").write_bytes(b"")
    result = CliRunner().invoke(cli, ["compaction", "--format", "json", "--now", str(T0 + 10**6), str(partition)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[-1])["last_stable_offset"] == 4


def test_where_the_loader_empties_the_log_the_simulated_cleaning_leaves_its_new_empty_segment(tmp_path):
    """Segment 0 holds 0-2 and the log-start-offset checkpoint says 10: after a clean shutdown Kafka's
    loader deletes every segment and starts the log again at 10. Kafka's clean (checked live) leaves
    one empty segment, 00000000000000000010.log; our --simulate wrote none (differential run, seed
    24122, compaction case 251, where a damaged last batch put the log end below the log start)."""
    partition = tmp_path / "logs" / "t-0"
    partition.mkdir(parents=True)
    (partition / f"{0:020d}.log").write_bytes(b"".join(build_batch(n, [build_record(0, 0, b"k", b"v")],
                                                               base_timestamp=T0 + n, max_timestamp=T0 + n)
                                                   for n in range(3)))
    for suffix in (".index", ".timeindex"):
        (partition / f"{0:020d}{suffix}").write_bytes(b"")
    (partition.parent / ".kafka_cleanshutdown").write_bytes(b"")
    (partition.parent / "log-start-offset-checkpoint").write_text("0\n1\nt 0 10\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["compaction", "--simulate", "--output-dir", str(out), "--now", str(T0 + 10**6),
                                      "--format", "json", str(partition)])
    assert result.exit_code == 0, result.output
    assert [(p.name, p.stat().st_size) for p in sorted((out / "t-0").glob("*.log"))] == \
        [("00000000000000000010.log", 0)]

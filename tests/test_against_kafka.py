"""Differential tests against Kafka's own code (Kafka 4.0 built from source: ../shared/tools/kafka-oracle).

Each run compares the cases of one seed (printed; KAFKALOG_KAFKA_SEED=N runs another, `random` a new
one each run; CI runs the default), a fixed budget of cases: mutated segments of every magic, codec, control batches and internal topics (the
fuzzer's own cases) parsed by Kafka and by us, dumped by kafka-dump-log and by `dump --format text`,
recovered by Kafka and by `rebuild-index [--truncate]`; and generated keyed partitions (tombstones,
transactions, varied configs) judged by Kafka's retention and by `retention`, and cleaned by Kafka's
log cleaner and by `compaction --simulate`. A differing case is
saved as a directory (inputs and case.json); the failure message names it and the command that
replays it. The longer run: `python -m kafkalog_tools.fuzz --against-kafka --minutes N`.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from kafkalog_tools.fuzz import against_kafka, oracle
from tests.conftest import CORPUS, SEED_VARIABLE, chosen_seed
SEGMENT_CASES = 60
"""Segment cases per run (each: a parse, a recovery and a dump compared), with a retention case and a
compaction case per `against_kafka.RETENTION_EVERY` of them: about a minute on an idle 2-core machine."""


@pytest.fixture(scope="session")
def kafka():
    """One oracle JVM for the session, stopped at its end whatever happened."""
    reason = oracle.unavailable()
    if reason:
        pytest.skip(reason)
    kafka = oracle.Oracle()
    try:
        yield kafka
    finally:
        kafka.close()


def test_kafka_and_we_read_recover_dump_retain_and_clean_alike(kafka, tmp_path):
    seed = chosen_seed(24063)
    corpus = [CORPUS / name for name in ("golden", "golden-4.0", "real") if (CORPUS / name).exists()]
    print(f"seed {seed} ({SEED_VARIABLE}={seed} reproduces this run); corpus seeds from {[c.name for c in corpus]}")
    report = against_kafka.run(seed, corpus=corpus, work_dir=tmp_path, orc=kafka, segment_cases=SEGMENT_CASES)
    print(report.summary())
    for difference in report.open:
        print(f"open (known, README): {difference}")
    compared = SEGMENT_CASES - report.details.get(against_kafka.LZ4_LEFTOVERS, 0)  # Kafka's answer is not the file's
    assert report.compared == {"parse": compared, "recover": compared, "dump": compared,
                               "retention": SEGMENT_CASES // against_kafka.RETENTION_EVERY,
                               "compaction": SEGMENT_CASES // against_kafka.RETENTION_EVERY}
    assert compared >= SEGMENT_CASES - 3
    assert report.details["batches"] > 100 and report.details["segments judged"] > 10
    assert report.details["segments cleaned"] > 10
    assert not report.differences, (
        f"{len(report.differences)} differences from Kafka (seed {seed}; rerun the suite with "
        f"{SEED_VARIABLE}={seed}):\n" + "\n".join(str(d) for d in report.differences[:10]))


def test_a_difference_is_caught_saved_and_replayed(kafka, tmp_path, monkeypatch):
    """A reader that gets one field wrong (every V2 batch's max timestamp one too high) must differ
    from Kafka, and the saved case must reproduce the difference, then not once the bug is gone."""
    from kafkalog_tools.formats import record_batch

    parse = record_batch.parse_batch

    def off_by_one(*args, **kwargs):
        batch = parse(*args, **kwargs)
        batch.max_timestamp += 1
        return batch

    monkeypatch.setattr("kafkalog_tools.formats.segment.record_batch.parse_batch", off_by_one)
    save_dir = tmp_path / "saved"
    report = against_kafka.run(7, corpus=[], work_dir=tmp_path / "work", orc=kafka, segment_cases=4, save_dir=save_dir)
    parse_differences = [d for d in report.differences if d.kind == "parse"]
    assert parse_differences and all("maxTimestamp" in d.what for d in parse_differences)
    saved = parse_differences[0].saved
    assert saved.parent == save_dir and (saved / "case.json").exists()
    assert f"--replay {saved}" in str(parse_differences[0])
    assert any("maxTimestamp" in line for line in against_kafka.replay(saved, kafka, tmp_path / "replay"))
    monkeypatch.setattr("kafkalog_tools.formats.segment.record_batch.parse_batch", parse)
    assert against_kafka.replay(saved, kafka, tmp_path / "replay") == []
    shutil.rmtree(save_dir)


def test_kafka_dump_logs_v1_index_mismatches_are_kafkas_mistake(kafka, tmp_path):
    """On this V1 segment's .index, kafka-dump-log prints the entries as we do and then reports on
    stderr "Mismatches ... Index offset: 217, log offset: 211", which is wrong: a V0/V1 broker
    appends a produce request's message set at once and indexes it as (largest offset of the set,
    position of its first message) - every message is its own batch, so the first "batch" at the
    position is the set's first message (211), not the indexed one (217). The entry is right (a
    lookup of any offset up to 217 may start scanning there), as our verify says. We print no such
    report (README: dump)."""
    source = CORPUS / "golden" / "logs" / "golden-v1-0"
    if not source.exists():
        pytest.skip(f"shared corpus not found at {source}")
    target = tmp_path / source.name
    target.mkdir()
    for name in ("00000000000000000095.index", "00000000000000000095.log"):
        shutil.copy2(source / name, target / name)
    path = target / "00000000000000000095.index"
    done = subprocess.run([os.fspath(kafka.home / "bin" / "kafka-dump-log"), "--files", os.fspath(path)],
                          capture_output=True, text=True)
    from kafkalog_tools.fuzz.runner import run_in_process

    result, ours, errors = run_in_process(["dump", "--format", "text", os.fspath(path)], 60)
    assert result.code == 0 and ours == done.stdout
    assert done.stderr.splitlines() == [f"Mismatches in :{path}", "  Index offset: 217, log offset: 211"]
    assert "Mismatch" not in errors
    # what lies at the entry's position: messages 211..217, one request's set (one timestamp)
    from kafkalog_tools.formats.segment import SegmentFile

    with SegmentFile(target / "00000000000000000095.log") as segment:
        at = {b.position: b.last_offset for b in segment.batches()}
    assert at[13514] == 211 and 217 in at.values() and min(p for p, o in at.items() if o == 217) > 13514
    verify, out, _ = run_in_process(["verify", "--format", "json", os.fspath(target)], 60)
    assert "index" not in "".join(line for line in out.splitlines() if '"severity":"error"' in line)


@pytest.mark.parametrize("damage", [0, 2, 5], ids=["key-short", "key-null", "value-null"])
@pytest.mark.parametrize("where", [0, 1])
def test_unreadable_control_records_read_dumped_recovered_and_cleaned_as_kafkas(kafka, tmp_path, damage, where):
    """A marker batch with one record Kafka cannot read, first or second: Kafka's parse, dump,
    recovery and cleaner (which throws when loading the log reads the first) against ours, live."""
    from tests.test_kafka_regressions import T0, UNREADABLE_CONTROLS, _control_partition

    key, value, _, _ = UNREADABLE_CONTROLS[damage]
    partition, log, _, _ = _control_partition(tmp_path / "case", key, value, where)
    report = against_kafka.Report(run_seed=0)
    code, objects = kafka("parse", log)
    assert code == 0
    found = against_kafka.compare_parse(log, objects[0], report, None)
    text, threw = kafka.dump_log([log], ["--deep-iteration"])[os.fspath(log)]
    found += against_kafka.compare_dump(log, ["--deep-iteration"], text, threw, report)
    for truncate in (False, True):
        found += against_kafka.compare_recover(partition, tmp_path / "recover", truncate, 1, kafka, report)
    options = dict(now=T0 + 10**9, delete_retention_ms=0, min_compaction_lag_ms=0, min_cleanable_ratio=0.01,
                   segment_bytes=1 << 30)
    found += against_kafka.compare_compaction(partition, options, kafka, report, tmp_path / "clean")
    assert found == []
    assert threw and report.details.get("cleanings Kafka failed", 0) == (1 if where == 0 else 0)


@pytest.mark.parametrize("mode", ["never", "always"])
def test_binary_keys_values_and_header_keys_dumped_as_kafka_dump_log_prints_them(kafka, tmp_path, monkeypatch, mode):
    """Keys, values and header keys that are not UTF-8 (every malformed class Java's decoder
    replaces by its own rules, random binary strings) in V2 batches and V0/V1 messages: our text
    dump, batch by batch and by the compiled renderer, against kafka-dump-log's -d -p."""
    from kafkalog_tools.native import bulk_scan
    from tests.test_codecs import java_utf8_texts, write_binary_texts

    texts = java_utf8_texts(random.Random(61))[::3]
    paths = [tmp_path / "binary-0" / "00000000000000000000.log", tmp_path / "legacy-0" / "00000000000000000000.log"]
    write_binary_texts(paths[0].parent, paths[1].parent, texts, random.Random(67), 200)
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, mode)
    rendered = []
    if mode == "always":
        kernel = bulk_scan.kernel()
        monkeypatch.setattr(kernel, "render_dumplog_each", lambda *arguments: rendered.append(1) or type(
            kernel).render_dumplog_each(kernel, *arguments))
    flags = ["--deep-iteration", "--print-data-log"]
    report = against_kafka.Report(run_seed=0)
    found = []
    for path, (text, threw) in kafka.dump_log(paths, flags).items():
        assert not threw and text.count("payload: ") > 100 and "\ufffd" in text
        found += against_kafka.compare_dump(Path(path), flags, text, threw, report)
    assert found == [] and bool(rendered) == (mode == "always")


@pytest.mark.parametrize("offset, kafka_reads_leftovers", [(b"\x01\x00", False), (b"\x00\x00", True)])
def test_an_lz4_match_at_offset_0_is_not_compared(tmp_path, offset, kafka_reads_leftovers):
    """Invalid LZ4 that lz4-java copies from its reused buffer (seed 1125, case 115): such a case is
    counted, not compared; a valid match is compared as ever."""
    import struct

    from kafkalog_tools.codecs import lz4_codec
    from tests.test_hostile_dump import FIRST, raw_batch

    block = b"\x14a" + offset + b"\x50bcdef"  # literal a, a match of 8, literals bcdef
    frame = bytearray(struct.pack("<IBB", lz4_codec.FRAME_MAGIC, 0x60, 0x40))
    frame.append(lz4_codec.header_checksum(bytes(frame), 6, 2))
    frame += struct.pack("<I", len(block)) + block + bytes(4)
    partition = tmp_path / "t-0"
    partition.mkdir()
    (partition / "00000000000000000000.log").write_bytes(FIRST + raw_batch(bytes(frame), codec=3))
    assert against_kafka.lz4_reads_leftovers(partition) is kafka_reads_leftovers


def test_oracle_absent_is_a_clear_reason(monkeypatch, tmp_path):
    monkeypatch.setenv(oracle.HOME_VARIABLE, os.fspath(tmp_path / "nowhere"))
    reason = oracle.unavailable()
    assert reason is not None and "nowhere" in reason or "java" in reason


INNER_DAMAGE = ("value-past", "key-past", "compressed", "short-v1")
"""What is wrong with one inner message of a V0/V1 wrapper, its sizes saying nothing wrong."""


def _damaged_inner(offset: int, magic: int, damage: str) -> bytes:
    import struct
    import zlib

    from kafkalog_tools.formats import legacy

    entry = bytearray(legacy.build_entry(offset, magic, b"kk", b"vvv", timestamp=1_700_000_000_000,
                                         attributes=1 if damage == "compressed" else 0))
    key_size_at = 12 + 6 + (8 if magic else 0)
    if damage == "value-past":
        struct.pack_into(">i", entry, key_size_at + 6, 40)
    elif damage == "key-past":
        struct.pack_into(">i", entry, key_size_at, 30)
    elif damage == "short-v1":  # 16 bytes: the timestamp's first half only
        entry = entry[:28]
        struct.pack_into(">i", entry, 8, 16)
    struct.pack_into(">I", entry, 12, zlib.crc32(entry[16:]))
    return bytes(entry)


@pytest.mark.parametrize("damage", INNER_DAMAGE)
def test_wrappers_with_an_unreadable_inner_message_read_dumped_and_recovered_as_kafkas(kafka, tmp_path, damage):
    """A V0/V1 wrapper whose first, middle or last of 3 inner messages Kafka's deep
    iterator returns but cannot read (or refuses as compressed, as it reaches it): Kafka's parse,
    kafka-dump-log with and without data and metadata, and recovery, against ours, live. We refused
    the whole wrapper (seed 2019519085, dump case 53: an open difference until session 17)."""
    from kafkalog_tools.formats import legacy
    from kafkalog_tools.fuzz.mutate import legacy_wrapper

    logs, partitions = [], []
    for magic in (0, 1):
        if damage == "short-v1" and magic == 0:
            continue
        for bad, codec in enumerate((1, 2, 3)):  # the first, middle or last inner message; gzip, snappy, lz4
            inner = b"".join(_damaged_inner(n, magic, damage) if n == bad else
                             legacy.build_entry(n, magic, b"k%d" % n, b"v%d" % n, timestamp=1_700_000_000_000)
                             for n in range(3))
            partition = tmp_path / f"m{magic}-c{codec}-{bad}-0"
            partition.mkdir()
            log = partition / "00000000000000000000.log"
            log.write_bytes(legacy.build_entry(0, magic, b"a", b"b", timestamp=1_700_000_000_000)
                            + legacy_wrapper(inner, 3, magic, codec))
            logs.append(log)
            partitions.append(partition)
    report = against_kafka.Report(run_seed=0)
    found = []
    for log in logs:
        code, objects = kafka("parse", log)
        assert code == 0
        found += against_kafka.compare_parse(log, objects[0], report, None)
    threw_somewhere = False
    for flags in (["--deep-iteration"], ["--deep-iteration", "--print-data-log"],
                  ["--deep-iteration", "--skip-record-metadata"],
                  ["--deep-iteration", "--skip-record-metadata", "--print-data-log"]):
        for path, (text, threw) in kafka.dump_log(logs, flags).items():
            threw_somewhere |= threw
            found += against_kafka.compare_dump(Path(path), flags, text, threw, report)
    for partition in partitions:
        found += against_kafka.compare_recover(partition, tmp_path / "recover", False, 1, kafka, report)
    assert found == []
    assert threw_somewhere


def _gzip_member(data: bytes, flags: int = 0, *, header_crc: str = "right", trailer: str = "right",
                 level: int = 6) -> bytes:
    """A gzip member as any writer may lay it out: FLG as given (reserved bits too), the optional
    fields its bits announce, a header CRC right or wrong, and a trailer right or wrong."""
    import struct
    import zlib

    header = bytearray(b"\x1f\x8b\x08" + bytes([flags]) + bytes(5) + b"\xff")
    if flags & 0x04:
        header += struct.pack("<H", 3) + b"xyz"
    if flags & 0x08:
        header += b"name\x00"
    if flags & 0x10:
        header += b"comment\x00"
    if flags & 0x02:
        header += struct.pack("<H", (zlib.crc32(header) & 0xFFFF) ^ (header_crc == "wrong"))
    deflater = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = deflater.compress(data) + deflater.flush()
    crc, size = zlib.crc32(data), len(data)
    if trailer == "crc":
        crc ^= 1
    elif trailer == "size":
        size += 1
    return bytes(header) + body + struct.pack("<II", crc, size)


def gzip_variants(records: bytes) -> dict[str, bytes]:
    """gzip payloads of `records` whose headers, trailers and tails GZIPInputStream and zlib may read
    differently."""
    variants = {f"flags-{flags:02x}-crc-{right}": _gzip_member(records, flags, header_crc=right)
                for flags in (0x00, 0x02, 0x1E, 0x20, 0xE0, 0xE2, 0xFE, 0x22) for right in ("right", "wrong")
                if flags & 0x02 or right == "right"}
    variants.update({f"trailer-{kind}": _gzip_member(records, trailer=kind) for kind in ("crc", "size")})
    member = _gzip_member(records)
    empty = _gzip_member(b"")
    tails = {"magic-only": b"\x1f\x8b", "header-only": empty[:10], "garbage-18": b"\x1f\x8b" + bytes(16),
             "garbage-40": b"\x1f\x8b" + bytes(38), "not-gzip": b"trailing bytes that are not a member",
             "empty-member": empty, "bad-method": b"\x1f\x8b\x07" + empty[3:], "cut-member": member[:-3],
             "reserved-member": _gzip_member(b"", 0xE0)}
    variants.update({f"then-{name}": member + tail for name, tail in tails.items()})
    return variants


def _stored_member_ending_at(end: int) -> bytes:
    """A member of two records whose deflate data (stored blocks: their size is exact) end at byte
    `end` of it."""
    from kafkalog_tools.formats.record_batch import build_record

    value = random.Random(end).randbytes(end)
    for size in range(end, 0, -1):
        records = build_record(0, 0, b"k", value[:size]) + build_record(1, 1, None, b"w")
        member = _gzip_member(records, level=0)
        if len(member) - 8 == end:
            return member
    raise AssertionError(f"no member ends at {end}")


def gzip_tails_at_buffer_ends() -> dict[str, bytes]:
    """Members whose deflate data end just before, at and after GZIPInputStream's 8 KiB buffer (its
    blocks stored, so their size is exact), each followed by bytes it may or may not try as a member."""
    java_buffer = 8 << 10  # Kafka's GzipCompression.wrapForInput
    empty = _gzip_member(b"")  # 20 bytes
    # tried as a member, each fails; left alone, each is ignored (as a malformed header is either way)
    tails = {"cut-18": empty[:18], "cut-19": empty[:19], "junk-after-header": empty[:10] + b"\xff" * 20,
             "bad-header": b"\x1f\x8b" + bytes(17), "empty-member": empty}
    variants = {}
    for shift in (-40, -27, -26, -25, -19, -18, -9, -8, -1, 0, 1, 8, 30):
        # (the first header is read before the buffer is: the buffer starts at byte 10)
        member = _stored_member_ending_at(10 + java_buffer + shift)
        variants.update({f"end-{shift:+d}-then-{name}": member + tail for name, tail in tails.items()})
    return variants


def test_gzip_headers_trailers_and_tails_read_as_kafkas(kafka, tmp_path):
    """V2 batches whose gzip payloads carry every header flag (reserved bits with and without a
    header CRC, which zlib refuses and Java reads), wrong trailers, and bytes after the member that
    GZIPInputStream tries as another member or ignores (by what is left in its buffer), each parsed
    by Kafka and by us, live."""
    from kafkalog_tools.formats.record_batch import build_record
    from tests.test_hostile_dump import FIRST, raw_batch

    records = build_record(0, 0, b"k", b"v" * 50) + build_record(1, 1, None, b"w")
    cases = {**gzip_variants(records), **gzip_tails_at_buffer_ends()}
    report = against_kafka.Report(run_seed=0)
    found = {}
    for name, payload in cases.items():
        partition = tmp_path / f"{name}-0"
        partition.mkdir()
        log = partition / "00000000000000000000.log"
        log.write_bytes(FIRST + raw_batch(payload, codec=1, count=2))
        code, objects = kafka("parse", log)
        assert code == 0
        differences = against_kafka.compare_parse(log, objects[0], report, None)
        if differences:
            found[name] = differences
    assert found == {}
    assert 5 < report.details.get("undecodable batches", 0) < len(cases) - 10  # Kafka reads some, refuses others


def test_an_out_of_memory_answer_is_asked_again_of_a_fresh_jvm(tmp_path, monkeypatch):
    """An OutOfMemoryError says what a JVM's heap held, not what Kafka reads: the oracle asks a fresh
    JVM once (a long-lived one's heap may not fit an array of an inner message's declared size where
    a fresh one does: seed 22036, parse case 1253), and a fresh JVM's answer stands. Here a 64 MiB
    heap and a V0 gzip wrapper whose inner message declares 200 MB: every JVM runs out, so the call is
    asked twice and Kafka's answer still holds the OutOfMemoryError; a readable file is asked once."""
    from kafkalog_tools import codecs
    from kafkalog_tools.formats import legacy

    if oracle.unavailable():
        pytest.skip(oracle.unavailable())
    inner = (0).to_bytes(8, "big") + (200_000_000).to_bytes(4, "big") + bytes(40)
    wrapper = legacy.build_entry(0, 0, None, codecs.compress(codecs.IDS["gzip"], inner, magic=0),
                                 attributes=codecs.IDS["gzip"])
    partition = tmp_path / "t-0"
    partition.mkdir()
    (partition / "00000000000000000000.log").write_bytes(wrapper)
    (partition / "00000000000000000001.log").write_bytes(legacy.build_entry(1, 0, b"k", b"v"))
    monkeypatch.setenv("KAFKA_ORACLE_HEAP_OPTS", "-Xmx64m")
    with oracle.Oracle() as kafka:
        _, objects = kafka("parse", partition / "00000000000000000001.log")
        assert kafka.restarts == 0 and objects[0]["batches"]
        _, objects = kafka("parse", partition / "00000000000000000000.log")
        assert kafka.restarts == 1 and "java.lang.OutOfMemoryError" in str(objects)
        _, objects = kafka("parse", partition / "00000000000000000001.log")  # (the fresh JVM serves on)
        assert kafka.restarts == 1 and objects[0]["batches"]
        # a command that writes its OUT_DIR before it runs out is asked again with that OUT_DIR emptied,
        # not refused for it (seed 24055, recover case 75)
        out = tmp_path / "recovered"
        code, objects = kafka("recover", partition, out, "--keep-later-segments", out_dir=out)
        assert kafka.restarts == 2 and "java.lang.OutOfMemoryError" in str(objects), objects
        assert "not empty" not in str(objects) and code == 0 and objects[-1]["type"] == "recover"


@pytest.mark.parametrize("case", range(3))
def test_segments_whose_offsets_overflow_are_split_retained_and_cleaned_as_kafkas(kafka, tmp_path, case):
    """KAFKA-6264: generated partitions whose first segment's offsets jump past Int.MaxValue, from batches
    of 10 bytes to 2 MiB (the split's 1 MiB chunks, and the buffer a larger batch grows).
    - Kafka's loader (`recover --mode loader` without the segment's .index, from a recovery point past the
      log end) leaves the pieces as `split` writes them, byte for byte.
    - Kafka's retention and cleaner (`retain`, `clean`) judge the log with the pieces as ours do, after a
      clean shutdown and after an unclean one."""
    from kafkalog_tools.formats.segment import SegmentFile
    from kafkalog_tools.split import split_segment, write_pieces

    seed = chosen_seed(947893520)
    print(f"seed {seed} ({SEED_VARIABLE}={seed} reproduces this run)")
    rng = random.Random(f"{seed}:overflow:{case}")
    partition = tmp_path / "loader" / "logs" / "t-0"
    generated = against_kafka.overflowing_partition(rng, partition, largest=2_000_000, indexed=False)
    code, objects = kafka("recover", str(partition), str(tmp_path / "kafka"), "--mode", "loader", "--recovery-point",
                          str(1 << 62), "--now", str(generated["last_timestamp"]))
    assert code == 0 and objects[-1]["outcome"] == "ok", objects[-1]
    (tmp_path / "ours").mkdir()
    with SegmentFile(partition / "00000000000000000000.log") as log:
        pieces = write_pieces(split_segment(log, 4096), log, tmp_path / "ours")
    assert len(pieces) >= 2
    for piece in pieces:
        for ours in (piece.log, piece.index, piece.timeindex):
            assert (tmp_path / "kafka" / ours.name).read_bytes() == ours.read_bytes(), ours.name
    report = against_kafka.Report(seed)
    for clean in (True, False):
        root = tmp_path / f"{'clean' if clean else 'unclean'}"
        generated = against_kafka.overflowing_partition(rng, root / "logs" / "t-0", indexed=rng.random() < 0.5)
        if clean:
            (root / "logs" / ".kafka_cleanshutdown").write_bytes(b"")
        options = against_kafka.retention_options(rng, generated)
        assert against_kafka.compare_retention(root / "logs" / "t-0", options, kafka, report) == [], (clean, options)
        options = against_kafka.compaction_options(rng, generated)
        assert against_kafka.compare_compaction(root / "logs" / "t-0", options, kafka, report, root / "out") == [], \
            (clean, options)


def _split_piece_partition(root: Path, indexed: bool) -> dict:
    """A first segment whose offsets jump past Int.MaxValue after two batches, days apart, then a
    one-batch active segment. The first piece of its split is one chunk: its first append's largest
    timestamp is the second batch's, a day and a half after its first batch's."""
    from kafkalog_tools.fuzz import cases
    from kafkalog_tools.formats.record_batch import build_batch, build_record

    directory = root / "logs" / "t-0"
    directory.mkdir(parents=True)
    day, t0 = against_kafka.DAY, cases.T0
    batches = [(0, t0, b"a"), (1, t0 + 3 * day // 2, b"b"), (1 << 31 | 5, t0 + 2 * day, b"a")]
    first = b"".join(build_batch(offset, [build_record(0, 0, key, b"v")], base_timestamp=at, max_timestamp=at)
                     for offset, at, key in batches)
    last_offset, last_at = (1 << 31) + 6, t0 + 2 * day + 1000
    (directory / f"{0:020d}.log").write_bytes(first)
    (directory / f"{last_offset:020d}.log").write_bytes(
        build_batch(last_offset, [build_record(0, 0, b"b", b"w")], base_timestamp=last_at, max_timestamp=last_at))
    for base in [0] * indexed + [last_offset]:
        for suffix in (".index", ".timeindex"):
            (directory / f"{base:020d}{suffix}").write_bytes(b"")
    if not indexed:
        (root / "logs" / against_kafka.CLEAN_SHUTDOWN).write_bytes(b"")
    for path in directory.iterdir():
        os.utime(path, ns=(last_at * 1_000_000,) * 2)
    return {"now": last_at, "delete_retention_ms": against_kafka.DAY, "min_compaction_lag_ms": 0,
            "min_cleanable_ratio": 0.99, "segment_bytes": 1 << 30, "max_compaction_lag_ms": day,
            "first_dirty_offset": 1}


@pytest.mark.parametrize("indexed, overdue", [(True, False), (False, True)])
def test_a_split_piece_is_as_old_as_its_first_chunk_while_the_loader_holds_it(kafka, tmp_path, indexed, overdue):
    """max.compaction.lag.ms reads each dirty segment's LogSegment.getFirstBatchTimestamp: the
    rollingBasedTimestamp its first append set, else its first batch's. recoverLog's split (after an
    unclean shutdown) keeps the pieces it appended to: the first piece is as old as its first chunk's
    largest timestamp, and not overdue. loadSegmentFiles' split (no .index) opens them from their files
    again: the first batch's timestamp, overdue. Found by CI's random seed 947893520."""
    from click.testing import CliRunner

    from kafkalog_tools.cli import cli

    options = _split_piece_partition(tmp_path, indexed)
    partition = tmp_path / "logs" / "t-0"
    assert against_kafka.compare_compaction(partition, options, kafka, against_kafka.Report(0), tmp_path / "out") == []
    argv = ["compaction", "--format", "json", "--now", options["now"], "--delete-retention-ms",
            options["delete_retention_ms"], "--min-cleanable-ratio", options["min_cleanable_ratio"],
            "--max-compaction-lag-ms", options["max_compaction_lag_ms"], "--first-dirty-offset", 1, partition]
    result = CliRunner().invoke(cli, list(map(str, argv)), catch_exceptions=False)
    summary = next(json.loads(line) for line in result.stdout.splitlines() if "compaction_summary" in line)
    assert summary["would_clean"] is overdue, summary["would_clean_because"]

"""`kafkalog dump` on hostile input: never a traceback, always the file and the byte, and the
documented exit code (0 clean; 1 problems in the data; 2 a path that cannot be read, or usage).

Each case runs the real command in a subprocess (`python -m kafkalog_tools dump`), so exit codes,
stderr and the encoding of stdout are what a user sees. Hostile segments are built with the
library's own build side (`build_batch`, `build_record`, `legacy.build_entry`, the index and
snapshot builders) and then mutated byte by byte. Every run also checks that dump wrote nothing:
a forensic tool must leave its evidence as it found it.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkalog_tools.crc import crc32c
from kafkalog_tools.formats import legacy, producer_snapshot, time_index, txn_index
from kafkalog_tools.formats import offset_index
from kafkalog_tools.errors import CorruptDataError
from kafkalog_tools.formats.record_batch import build_batch, build_record, parse_batch
from kafkalog_tools.fuzz.runner import listing
from tests.conftest import GOLDEN, REAL, ROOT

T0 = 1_700_000_000_000
SEGMENT = "00000000000000000000.log"
LATER = "00000000000000000999.log"

# ---------------------------------------------------------------------------------------------
# Running the command
# ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    code: int
    out: str
    err: str

    def lines(self) -> list[str]:
        return self.out.splitlines()

    def json(self) -> list[dict]:
        return [json.loads(line) for line in self.out.splitlines()]


def dump(*args, cwd: Path, env: dict | None = None) -> Run:
    """`kafkalog dump ARGS` in `cwd`; asserts it ended without a traceback and wrote nothing there."""
    before = listing(cwd)
    environment = {k: v for k, v in os.environ.items() if k != "KAFKALOG_DEBUG"}
    environment["PYTHONPATH"] = str(ROOT)
    environment.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "kafkalog_tools", "dump", *args], cwd=cwd, env=environment,
                          capture_output=True, timeout=120)
    run = Run(proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"))  # strict: UTF-8 out
    assert "Traceback" not in run.err and "Traceback" not in run.out, run.err
    assert "internal error" not in run.err, run.err
    assert listing(cwd) == before, "dump changed, created or deleted a file"
    return run


# ---------------------------------------------------------------------------------------------
# Building hostile segments
# ---------------------------------------------------------------------------------------------

FIRST = build_batch(0, [build_record(0, 0, b"k0", b"v0")], base_timestamp=T0, max_timestamp=T0)
SECOND = build_batch(1, [build_record(0, 0, b"k1", b"v1"), build_record(1, 1, None, b"v2")],
                     base_timestamp=T0, max_timestamp=T0 + 1)
AT = len(FIRST)  # where the second (hostile) batch starts: 70


def with_crc(batch: bytes | bytearray) -> bytes:
    """The batch with its CRC-32C recomputed, so that only the intended damage remains."""
    batch = bytearray(batch)
    batch[17:21] = struct.pack(">I", crc32c(bytes(batch[21:])))
    return bytes(batch)


def patched(batch: bytes, offset: int, fmt: str, value: int, *, fix_crc: bool) -> bytes:
    batch = bytearray(batch)
    struct.pack_into(fmt, batch, offset, value)
    return with_crc(batch) if fix_crc else bytes(batch)


def raw_batch(payload: bytes, *, codec: int = 0, count: int = 1) -> bytes:
    """A V2 batch around an arbitrary records section (built by the schema, then given `payload`)."""
    header = bytearray(build_batch(1, [b""], compression_id=0)[:61])
    struct.pack_into(">i", header, 8, 49 + len(payload))
    struct.pack_into(">h", header, 21, codec)
    struct.pack_into(">i", header, 57, count)
    return with_crc(bytes(header) + payload)


@pytest.fixture
def partition(tmp_path) -> Path:
    directory = tmp_path / "hostile-0"
    directory.mkdir()
    return directory


def write(directory: Path, name: str, data: bytes) -> Path:
    path = directory / name
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------------------------------------
# Segments
# ---------------------------------------------------------------------------------------------


def test_empty_log_is_clean(partition):
    write(partition, SEGMENT, b"")
    run = dump("--format", "text", f"hostile-0/{SEGMENT}", cwd=partition.parent)
    assert (run.code, run.lines(), run.err) == (0, [f"Dumping hostile-0/{SEGMENT}", "Log starting offset: 0"], "")


def test_a_clean_segment_is_clean(partition):
    """The baseline the hostile cases below are measured against."""
    write(partition, SEGMENT, FIRST + SECOND)
    run = dump("--format", "text", "-d", f"hostile-0/{SEGMENT}", cwd=partition.parent)
    assert run.code == 0 and run.err == ""
    assert [line.split(" position: ")[1].split()[0] for line in run.lines() if line.startswith("baseOffset")] == [
        "0", str(AT)]


@dataclass(frozen=True)
class Case:
    name: str
    data: bytes
    code: int
    stderr: list[str]
    """Fragments expected in stderr, in order; {f} is the file as given."""
    stdout: list[str] = ()
    flags: tuple[str, ...] = ()


CASES = [
    Case("zero-filled", bytes(4096), 1,
         ["kafkalog: error: {f}: byte 0: Found record size 0 smaller than minimum record overhead (14)"]),
    Case("truncated-mid-batch", FIRST + SECOND[:40], 1, [],
         ["position: 0 ", f"Found 40 invalid bytes at the end of {SEGMENT}"]),
    Case("truncated-in-header", FIRST + SECOND[:10], 1, [], [f"Found 10 invalid bytes at the end of {SEGMENT}"]),
    Case("corrupt-crc", FIRST + patched(SECOND, 66, ">B", 0x7F, fix_crc=False), 1, [],
         [f"position: {AT} ", "isvalid: false"], ("-d",)),
    Case("garbage-negative-size", b"\xde\xad\xbe\xef" * 750, 1,
         ["{f}: byte 0: Found record size -559038737 smaller than minimum record overhead (14)"]),
    Case("garbage-huge-size", b"garbage!" * 100, 1, [], [f"Found 800 invalid bytes at the end of {SEGMENT}"]),
    Case("size-int-max", FIRST + patched(SECOND, 8, ">i", 0x7FFFFFFF, fix_crc=False), 1, [],
         [f"Found {len(SECOND)} invalid bytes at the end of {SEGMENT}"]),
    Case("size-negative", FIRST + patched(SECOND, 8, ">i", -1, fix_crc=False), 1,
         [f"{{f}}: byte {AT}: Found record size -1 smaller than minimum record overhead (14)"]),
    Case("size-below-overhead", FIRST + patched(SECOND, 8, ">i", 13, fix_crc=False), 1,
         [f"{{f}}: byte {AT}: Found record size 13 smaller than minimum record overhead (14)"]),
    Case("magic-3", FIRST + patched(SECOND, 16, ">b", 3, fix_crc=True), 1,
         [f"{{f}}: byte {AT + 16}: unknown magic 3"], ["magic: 3 "]),
    # magic < 2 is read as a legacy message, whose fields then fall on the V2 header's bytes: its
    # header is printed as Kafka prints it (its key size, absurd here, is only read with the records)
    Case("magic-minus-1", FIRST + patched(SECOND, 16, ">b", -1, fix_crc=True), 1,
         [f"{{f}}: byte {AT + 16}: unknown magic -1"], [f"position: {AT} ", "magic: -1 "]),
    Case("magic-minus-1-deep", FIRST + patched(SECOND, 16, ">b", -1, fix_crc=True), 1,
         [f"{{f}}: byte {AT + 16}: unknown magic -1", f"{{f}}: byte {AT}: Record is corrupt: key of "],
         [f"position: {AT} ", "magic: -1 "], ("-d",)),
    Case("magic-minus-1-legacy", FIRST + patched(legacy.build_entry(1, 1, b"k", b"v"), 16, ">b", -1, fix_crc=False),
         1, [f"{{f}}: byte {AT + 16}: unknown magic -1"], [f"offset: 1 position: {AT} ", "magic: -1 ",
                                                            "isvalid: false"]),
    Case("count-negative", FIRST + patched(SECOND, 57, ">i", -1, fix_crc=True), 1,
         [f"{{f}}: byte {AT + 57}: Found invalid record count (expected >= 0, found -1)"],
         ["count: -1 ", "isvalid: true"], ("-d",)),
    Case("count-absurd", FIRST + patched(SECOND, 57, ">i", 0x7FFFFFFF, fix_crc=True), 1,
         [f"record 2 of the batch at {AT}: Incorrect declared batch size, premature EOF reached"],
         ["count: 2147483647 "], ("-d",)),
    Case("count-too-small", FIRST + patched(SECOND, 57, ">i", 1, fix_crc=True), 1,
         ["Incorrect declared batch size, records still remaining in file"], [], ("-d",)),
    Case("varint-too-long", FIRST + raw_batch(bytes.fromhex("808080808000") + bytes(10)), 1,
         [f"{{f}}: byte {AT + 61}: record 0 of the batch at {AT}: Varint is too long"], [], ("-d",)),
    Case("varlong-too-long", FIRST + raw_batch(bytes.fromhex("1c00") + b"\xff" * 10 + bytes(4)), 1,
         [f"{{f}}: byte {AT + 61}: record 0 of the batch at {AT}: Varint is too long"], [], ("-d",)),
    Case("negative-header-key", FIRST + raw_batch(bytes.fromhex("10000000010102010000")[:9]), 1,
         [f"byte {AT + 61}: record 0 of the batch at {AT}: Invalid negative header key size -1"], [], ("-d",)),
    Case("gzip-garbage", FIRST + raw_batch(b"\x1f\x8b" + b"not deflate" * 5, codec=1), 1,
         [f"{{f}}: byte {AT + 61}: gzip payload does not decompress"], ["compresscodec: gzip "], ("-d",)),
    Case("snappy-garbage", FIRST + raw_batch(b"\xff" * 40, codec=2), 1,
         [f"{{f}}: byte {AT + 61}: snappy payload does not decompress"], [], ("-d",)),
    Case("lz4-garbage", FIRST + raw_batch(b"\x04\x22\x4d\x18" + b"\x00" * 20, codec=3), 1,
         [f"{{f}}: byte {AT + 61}: lz4 payload does not decompress"], [], ("-d",)),
    Case("zstd-garbage", FIRST + raw_batch(b"\x28\xb5\x2f\xfd" + b"\xff" * 20, codec=4), 1,
         [f"{{f}}: byte {AT + 61}: zstd payload does not decompress"], [], ("-d",)),
    Case("codec-7", FIRST + raw_batch(b"x" * 20, codec=7), 1,
         [f"{{f}}: byte {AT + 22}: unknown compression codec id 7"], ["compresscodec: unknown(7) "], ("-d",)),
    Case("legacy-v0-bad-crc", FIRST + patched(legacy.build_entry(1, 0, b"k", b"v"), 12, ">I", 1, fix_crc=False), 1,
         [], [f"offset: 1 position: {AT} ", "magic: 0 ", "isvalid: false"], ("-d",)),
    Case("legacy-v1-value-overruns", FIRST + patched(legacy.build_entry(1, 1, b"k", b"v"), 31, ">i", 1000,
                                                     fix_crc=False), 1,
         [f"{{f}}: byte {AT}: Record is corrupt: value of 1000 bytes runs past the end of the message"], [], ("-d",)),
    # Kafka reads a legacy message's key and value only with its records: its line is printed as
    # kafka-dump-log prints it (and recovery keeps it: found by the differential run against Kafka)
    Case("legacy-v1-value-overruns-shallow", FIRST + patched(legacy.build_entry(1, 1, b"k", b"v"), 31, ">i", 1000,
                                                             fix_crc=False), 1,
         [], [f"offset: 1 position: {AT} CreateTime: -1 size: 36 magic: 1 compresscodec: none", "isvalid: false"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_segment(partition, case: Case):
    write(partition, SEGMENT, case.data)
    write(partition, LATER, b"")  # not the active segment: a partial last batch is damage, not a write in progress
    given = f"hostile-0/{SEGMENT}"
    run = dump("--format", "text", *case.flags, given, cwd=partition.parent)
    assert run.code == case.code, run.err
    position = 0
    for fragment in case.stderr:
        found = run.err.find(fragment.format(f=given), position)
        assert found >= 0, f"{fragment!r} not in stderr:\n{run.err}"
        position = found
    for fragment in case.stdout:
        assert fragment in run.out, f"{fragment!r} not in stdout:\n{run.out}"
    for line in run.err.splitlines():
        assert line.startswith("kafkalog: error: " + given + ": byte "), f"unlocated message: {line}"
    if case.code and not case.stderr:  # reported on stdout, as kafka-dump-log does
        assert "isvalid: false" in run.out or "invalid bytes at the end" in run.out
    if case.data.startswith(FIRST):  # a bad entry never hides the good one before it
        assert run.lines()[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 ")
        assert run.lines()[2].endswith(f"crc: {struct.unpack_from('>I', FIRST, 17)[0]} isvalid: true")


def test_truncation_is_reported_at_the_batch_start_in_json(partition):
    write(partition, SEGMENT, FIRST + SECOND[:40])
    write(partition, LATER, b"")
    run = dump("--format", "json", f"hostile-0/{SEGMENT}", cwd=partition.parent)
    trailing = [o for o in run.json() if o["type"] == "trailing_bytes"]
    assert trailing == [{"type": "trailing_bytes", "file": f"hostile-0/{SEGMENT}", "position": AT, "size": 40,
                         "reason": "the last batch runs past the end of the file (truncated)",
                         "still_being_written": False}]
    assert run.code == 1


@pytest.mark.parametrize("tail", [0, 100], ids=["at-the-end", "followed-by-bytes"])
def test_a_v2_entry_smaller_than_a_batch_header(partition, tail):
    """Magic 2 and a length of 16: a whole entry by its length, but 28 bytes where a batch header
    takes 61. At the end of the file the header read ran out of bytes (a traceback, found by the
    fuzzer); Kafka says the batch is smaller than its minimum overhead, wherever it is."""
    small = struct.pack(">qi", 1, 16) + b"\x00" * 4 + b"\x02" + b"\x00" * 11
    write(partition, SEGMENT, FIRST + small + b"\xee" * tail)
    given = f"hostile-0/{SEGMENT}"
    run = dump("--format", "text", given, cwd=partition.parent)
    assert run.code == 1
    assert (f"kafkalog: error: {given}: byte {AT}: Record batch is corrupt (the size 28 is smaller than the "
            f"minimum allowed overhead 61)") in run.err
    with pytest.raises(CorruptDataError, match="the size 28 is smaller than the minimum allowed overhead 61"):
        parse_batch(small, 0, given)


def test_a_gzip_bomb_stops_at_max_decompressed(partition):
    bomb = gzip.compress(bytes(64 << 20), compresslevel=1)  # 64 MiB of zeros in ~300 KiB
    write(partition, SEGMENT, FIRST + raw_batch(bomb, codec=1, count=1000))
    given = f"hostile-0/{SEGMENT}"
    run = dump("--format", "text", "-d", "--max-decompressed", str(1 << 20), given, cwd=partition.parent)
    assert run.code == 1
    assert (f"kafkalog: error: {given}: byte {AT + 61}: gzip payload decompresses to more than the limit of "
            f"1048576 bytes (a decompression bomb, or raise --max-decompressed)") in run.err
    assert f"position: {AT} " in run.out and "compresscodec: gzip" in run.out


# ---------------------------------------------------------------------------------------------
# Indexes and snapshots
# ---------------------------------------------------------------------------------------------


def test_an_index_of_7_bytes(partition):
    write(partition, "00000000000000000000.index", b"\x00" * 7)
    given = "hostile-0/00000000000000000000.index"
    run = dump("--format", "text", given, cwd=partition.parent)
    assert run.code == 1
    assert run.lines() == [f"Dumping {given}", f"{given} is empty."]  # as kafka-dump-log prints it
    assert run.err == (f"kafkalog: error: {given}: byte 0: Index file is corrupt, found 7 bytes which is neither "
                       f"positive nor a multiple of 8: the last 7 bytes are not an entry "
                       f"(expected a multiple of 8 bytes, found 7)\n")


def test_an_index_with_a_partial_last_entry(partition):
    write(partition, "00000000000000000100.index", offset_index.build([(105, 0), (110, 4096)], 100) + b"\x01\x02\x03")
    run = dump("--format", "text", "hostile-0/00000000000000000100.index", cwd=partition.parent)
    assert run.code == 1
    assert run.lines()[1:] == ["offset: 105 position: 0", "offset: 110 position: 4096"]
    assert "byte 16: Index file is corrupt, found 19 bytes" in run.err


def test_a_timeindex_with_a_zero_tail(partition):
    """The preallocated tail of an active segment's time index: Kafka's dump stops at it, silently."""
    entries = [(T0 + 5, 3), (T0 + 9, 7)]
    write(partition, "00000000000000000000.timeindex", time_index.build(entries, 0) + bytes(12 * 10))
    run = dump("--format", "text", "hostile-0/00000000000000000000.timeindex", cwd=partition.parent)
    assert (run.code, run.err) == (0, "")
    assert run.lines()[1:] == [f"timestamp: {T0 + 5} offset: 3", f"timestamp: {T0 + 9} offset: 7"]


def test_a_timeindex_with_a_partial_entry(partition):
    write(partition, "00000000000000000000.timeindex", time_index.build([(T0, 1)], 0) + b"\x00" * 5)
    run = dump("--format", "text", "hostile-0/00000000000000000000.timeindex", cwd=partition.parent)
    assert run.code == 1
    assert "byte 12: Time index file is corrupt, found 17 bytes which is neither positive nor a multiple of 12" in run.err


def _txn(version_byte: int | None = None, version: int = 0) -> bytes:
    entry = txn_index.ENTRY.pack(version, 7, 10, 20, 21)
    return entry if version_byte is None else bytes([version_byte]) + entry[1:]


def test_a_txnindex_with_version_1(partition):
    write(partition, "00000000000000000000.txnindex", _txn() + _txn(version_byte=1))
    given = "hostile-0/00000000000000000000.txnindex"
    run = dump("--format", "text", given, cwd=partition.parent)
    assert run.code == 1
    assert run.lines() == [f"Dumping {given}"]  # as kafka-dump-log: allAbortedTxns fails before any is printed
    assert (f"kafkalog: error: {given}: byte 34: Unexpected aborted transaction version 1 in transaction index "
            f"{given}, current version is 0") in run.err


def test_a_txnindex_version_is_read_from_its_first_byte_only(partition):
    """AbortedTxn.version() is buffer.get(0): an int16 version 1 (bytes 00 01) reads as version 0."""
    write(partition, "00000000000000000000.txnindex", _txn(version=1))
    run = dump("--format", "text", "hostile-0/00000000000000000000.txnindex", cwd=partition.parent)
    assert (run.code, run.err) == (0, "")
    assert run.lines()[1].startswith("version: 0 producerId: 7 ")


def test_a_snapshot_with_a_bad_crc(partition):
    entry = producer_snapshot.ProducerEntry(7, 1, 9, 20, 2, T0, -1, -1)
    data = bytearray(producer_snapshot.build([entry]))
    data[-1] ^= 0x01
    write(partition, "00000000000000000021.snapshot", bytes(data))
    given = "hostile-0/00000000000000000021.snapshot"
    run = dump("--format", "text", given, cwd=partition.parent)
    assert run.code == 1
    assert f"kafkalog: error: {given}: byte 2: Snapshot is corrupt (CRC is no longer valid)" in run.err
    assert run.lines() == [f"Dumping {given}"]


def test_a_snapshot_too_short_for_its_header(partition):
    write(partition, "00000000000000000021.snapshot", b"\x00\x01\x00")
    run = dump("--format", "text", "hostile-0/00000000000000000021.snapshot", cwd=partition.parent)
    assert run.code == 1 and "byte 0: Snapshot failed schema validation" in run.err


# ---------------------------------------------------------------------------------------------
# Paths: missing, junk, loops, names, permissions
# ---------------------------------------------------------------------------------------------


def test_a_missing_path_is_an_io_error(tmp_path):
    run = dump("--format", "text", "no-such-dir/00000000000000000000.log", cwd=tmp_path)
    assert run.code == 2
    assert run.err == "kafkalog: error: no-such-dir/00000000000000000000.log: cannot read: No such file or directory\n"
    assert run.out == ""


def test_a_missing_path_among_good_ones_still_dumps_the_good_ones(partition):
    write(partition, SEGMENT, FIRST)
    run = dump("--format", "text", "missing.log", f"hostile-0/{SEGMENT}", cwd=partition.parent)
    assert run.code == 2
    assert f"Dumping hostile-0/{SEGMENT}" in run.out and "missing.log: cannot read" in run.err


def test_no_path_at_all_is_a_usage_error(tmp_path):
    run = dump(cwd=tmp_path)
    assert run.code == 2 and "Missing argument" in run.err


def test_a_directory_of_junk(tmp_path):
    junk = tmp_path / "junk"
    (junk / "stuff").mkdir(parents=True)
    (junk / "notes.txt").write_text("not kafka")
    (junk / "random.bin").write_bytes(bytes(range(256)) * 8)
    run = dump("--format", "text", "junk", cwd=tmp_path)
    assert (run.code, run.out) == (0, "")  # files Kafka does not keep are listed, never fatal
    assert run.err.splitlines() == [
        "Ignoring unknown file junk/notes.txt (not a file Kafka keeps in a log directory)",
        "Ignoring unknown file junk/random.bin (not a file Kafka keeps in a log directory)",
        "Ignoring unknown file junk/stuff (directory that is not a partition directory)",
    ]


def test_a_partition_directory_with_junk_and_a_garbage_segment(partition):
    write(partition, SEGMENT, b"\xde\xad\xbe\xef" * 10)
    write(partition, "core", b"\x7fELF")
    run = dump("--format", "text", "hostile-0", cwd=partition.parent)
    assert run.code == 1
    assert f"hostile-0/{SEGMENT}: byte 0: Found record size" in run.err
    assert "Ignoring unknown file hostile-0/core (not a file Kafka keeps in a partition directory)" in run.err


def test_symlink_loops_in_a_log_dir_are_listed_not_followed(tmp_path):
    log_dir = tmp_path / "logdir"
    partition = log_dir / "topic-0"
    partition.mkdir(parents=True)
    write(partition, SEGMENT, FIRST)
    os.symlink("b", partition / "a")
    os.symlink("a", partition / "b")
    os.symlink(".", partition / "self")
    os.symlink("../topic-0", partition / "up")
    os.symlink("topic-0", log_dir / "topic-1")
    run = dump("--format", "text", "logdir", cwd=tmp_path)
    assert run.code == 0
    assert run.out.count("baseOffset: 0 ") == 1  # the segment once, not once per loop
    for link in ("logdir/topic-0/a", "logdir/topic-0/b", "logdir/topic-0/self", "logdir/topic-0/up", "logdir/topic-1"):
        assert f"Ignoring unknown file {link} (symbolic link, not followed)" in run.err


def test_a_symlink_loop_given_as_a_segment(tmp_path):
    os.symlink(SEGMENT, tmp_path / SEGMENT)
    run = dump("--format", "text", SEGMENT, cwd=tmp_path)
    assert run.code == 2
    assert run.err == f"kafkalog: error: {SEGMENT}: cannot open: Too many levels of symbolic links\n"


def test_a_file_name_that_is_not_utf8(tmp_path):
    name = b"\xff\xfe" + SEGMENT.encode()
    (Path(os.fsdecode(tmp_path)) / os.fsdecode(name)).write_bytes(FIRST)
    for env in ({}, {"PYTHONIOENCODING": "utf-8:strict"}, {"LC_ALL": "C"}):
        run = dump("--format", "text", os.fsdecode(name), cwd=tmp_path, env=env)
        assert run.code == 0, (env, run.err)
        assert run.lines()[0] == "Dumping \\udcff\\udcfe" + SEGMENT  # the undecodable bytes, escaped
        assert "baseOffset: 0 " in run.out
        objects = dump("--format", "json", os.fsdecode(name), cwd=tmp_path, env=env).json()
        assert os.fsencode(objects[0]["file"]) == name  # JSON's \udcff escapes give the name back


def test_a_partition_directory_whose_name_is_not_utf8(tmp_path):
    directory = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"t\xe9-0")))
    directory.mkdir()
    write(directory, SEGMENT, FIRST)
    write(directory, os.fsdecode(b"\xff.log"), FIRST)
    run = dump("--format", "text", os.fsdecode(b"t\xe9-0"), cwd=tmp_path)
    assert run.code == 0
    assert f"Dumping t\\udce9-0/{SEGMENT}" in run.out
    assert "Ignoring unknown file t\\udce9-0/\\udcff.log (not a file Kafka keeps in a partition directory)" in run.err


def test_a_file_without_read_permission(partition):
    path = write(partition, SEGMENT, FIRST)
    path.chmod(0)
    try:
        try:
            path.open("rb").close()
            pytest.skip("running as root (or with CAP_DAC_OVERRIDE): mode 000 does not stop reading")
        except PermissionError:
            pass
        run = dump("--format", "text", f"hostile-0/{SEGMENT}", cwd=partition.parent)
        assert run.code == 2
        assert run.err == f"kafkalog: error: hostile-0/{SEGMENT}: cannot open: Permission denied\n"
    finally:
        path.chmod(0o644)


def test_a_directory_given_where_a_segment_is_expected(tmp_path):
    (tmp_path / SEGMENT).mkdir()
    run = dump("--format", "text", SEGMENT, cwd=tmp_path)
    assert run.code == 0 and "Traceback" not in run.err


# ---------------------------------------------------------------------------------------------
# JSON mode: problems are objects on stdout
# ---------------------------------------------------------------------------------------------


def test_problems_are_json_objects_in_json_mode(partition):
    write(partition, "00000000000000000000.log", bytes(64))
    write(partition, "00000000000000000100.log", FIRST + patched(SECOND, 8, ">i", -1, fix_crc=False))
    write(partition, "00000000000000000200.log", FIRST + raw_batch(b"\x1f\x8b junk", codec=1))
    write(partition, "00000000000000000000.index", b"\x00" * 7)
    write(partition, "00000000000000000000.txnindex", _txn(version_byte=1))
    run = dump("--format", "json", "-d", "hostile-0", "missing-0", cwd=partition.parent)
    assert run.code == 2  # the missing path decides; the data problems are reported too
    assert run.err == ""  # everything, problems included, is on stdout as JSON Lines
    problems = [(o["file"], o["position"], o["message"].split(":")[0]) for o in run.json() if o["type"] == "problem"]
    assert problems == [
        ("hostile-0/00000000000000000000.log", 0, "Found record size 0 smaller than minimum record overhead (14)"),
        ("hostile-0/00000000000000000000.index", 0, "Index file is corrupt, found 7 bytes which is neither "
                                                    "positive nor a multiple of 8"),
        ("hostile-0/00000000000000000000.txnindex", 0, "Unexpected aborted transaction version 1 in transaction "
                                                       "index hostile-0/00000000000000000000.txnindex, current "
                                                       "version is 0"),
        ("hostile-0/00000000000000000100.log", AT, "Found record size -1 smaller than minimum record overhead (14)"),
        ("hostile-0/00000000000000000200.log", AT + 61, "gzip payload does not decompress"),
        ("missing-0", None, "cannot read"),
    ]
    every = {o["type"] for o in run.json()}
    assert every == {"file", "batch", "record", "problem"}
    assert all(set(o) >= {"type", "severity", "file", "position", "message", "expected", "actual"}
               for o in run.json() if o["type"] == "problem")


# ---------------------------------------------------------------------------------------------
# Evidence safety: dump reads, and only reads
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def evidence(tmp_path_factory) -> Path:
    if not GOLDEN.exists() or not REAL.exists():
        pytest.skip(f"shared corpus not found at {GOLDEN.parent}")
    root = tmp_path_factory.mktemp("evidence")
    shutil.copytree(GOLDEN / "logs", root / "golden", symlinks=True)  # copy2: mtimes kept
    shutil.copytree(GOLDEN / "damaged" / "truncated", root / "damaged", symlinks=True)
    shutil.copytree(REAL / "zk-broker-a", root / "zk-broker-a", symlinks=True)
    for path in root.rglob("*"):  # the corpus is read-only; the copy must be writable to be at risk
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


@pytest.mark.parametrize("args", [
    ("--format", "text", "-d", "-p"),
    ("--format", "json", "-d", "--bytes", "base64"),
    ("--format", "text", "--max-bytes", "1000"),
], ids=["text-deep-data", "json-deep", "max-bytes"])
def test_dumping_evidence_changes_nothing(evidence, args):
    targets = sorted(str(p.relative_to(evidence)) for p in (evidence / "golden").iterdir())
    targets += ["damaged", "zk-broker-a"]
    run = dump(*args, *targets, cwd=evidence)  # dump() compares a full listing before and after
    assert run.code in (0, 1)
    assert run.out.count("Dumping ") > 100 or run.out.count('"type":"file"') > 100
    if "--max-bytes" not in args:
        assert run.code == 1  # the damaged copy was cut at the end of its active segment, no broker holds it
        assert "invalid bytes at the end of" in run.out or '"still_being_written":false' in run.out


def test_the_evidence_copy_is_a_faithful_copy(evidence):
    for source, copy in ((GOLDEN / "logs", evidence / "golden"), (REAL / "zk-broker-a", evidence / "zk-broker-a")):
        originals = sorted(p.relative_to(source) for p in source.rglob("*") if p.is_file())
        assert originals == sorted(p.relative_to(copy) for p in copy.rglob("*") if p.is_file())
        for relative in originals:
            assert (copy / relative).stat().st_mtime_ns == (source / relative).stat().st_mtime_ns

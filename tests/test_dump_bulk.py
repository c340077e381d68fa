"""`dump --format json` through the compiled bulk path (`BatchRun` items) against the per-batch path.

The bulk path hands every batch it cannot print exactly back to the per-batch loop, so the test that
matters is the whole command run both ways (KAFKALOG_BULK=never and =always): byte-identical
output, stderr and exit code over the corpus, damaged copies of it, and generated segments full of
what must go back batch by batch (control batches, records that lie under a valid CRC, offsets and
timestamps past a long) or must come out exactly (invalid UTF-8, escapes, headers, wrapping
sequences, non-canonical varints, every codec), in both --bytes modes, with and without -d.
"""
from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog_tools import codecs
from kafkalog_tools import dump as d
from kafkalog_tools.cli import cli
from kafkalog_tools.errors import CorruptDataError, DecompressionError
from kafkalog_tools.formats import legacy
from kafkalog_tools.native import bulk_scan
from kafkalog_tools.output import LineWriter, jsonl
from kafkalog_tools.formats.record_batch import (ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_LOG_APPEND_TIME,
                                                 ATTR_TRANSACTIONAL, build_batch, build_record, decode_records,
                                                 parse_batch)
from kafkalog_tools.formats.segment import SegmentFile
from tests.conftest import GOLDEN, ROOT, need
from tests.damage import corpus_paths, damaged_copies
from tests.test_bulk_scan import _legacy_segment, _lie_in_records, generated_partitions, generated_segment
from tests.test_codecs import java_utf8_texts, write_binary_texts

np = pytest.importorskip("numpy")
pytest.importorskip("numba", reason="the bulk path needs numba (an install requirement)")
KERNEL = bulk_scan.kernel()
MODES = [(flags, bytes_mode) for flags in (["-d"], []) for bytes_mode in ("auto", "base64")]
MODE_IDS = [f"{'deep' if flags else 'shallow'}-{bytes_mode}" for flags, bytes_mode in MODES]


def dump_both_ways(monkeypatch, paths: list[str], *args: str, output_format: str = "json") -> bytes:
    outcomes = []
    for mode in ("never", "always"):
        monkeypatch.setenv(bulk_scan.MODE_VARIABLE, mode)
        result = CliRunner().invoke(cli, ["dump", "--format", output_format, *args, *paths], catch_exceptions=False)
        outcomes.append((result.exit_code, result.stdout_bytes, result.stderr))
    assert outcomes[1][1] == outcomes[0][1]
    assert outcomes[1] == outcomes[0]
    return outcomes[0][1]


def batches_in_runs(monkeypatch, paths: list[str], deep: bool) -> tuple[int, int]:
    """(batches that came in runs, batches one by one): proof the bulk path was taken at all."""
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    in_runs = one_by_one = 0
    for item in d.dump(paths, d.DumpOptions(deep=deep, batch_runs=True)):
        if type(item) is d.BatchRun:
            in_runs += item.batches.shape[1]
        elif type(item) is d.BatchItem:
            one_by_one += 1
    return in_runs, one_by_one


@pytest.mark.parametrize("flags, bytes_mode", MODES, ids=MODE_IDS)
def test_json_dump_in_bulk_equals_batch_by_batch_on_the_corpus(monkeypatch, flags, bytes_mode):
    paths = corpus_paths() + [str(ROOT / "fixtures" / "example-logdir")]
    out = dump_both_ways(monkeypatch, paths, *flags, "--bytes", bytes_mode)
    assert out.count(b'"type":"record"') > (1000 if flags else -1)
    in_runs, one_by_one = batches_in_runs(monkeypatch, paths, deep=bool(flags))
    assert in_runs > 1000 and one_by_one > 100, (in_runs, one_by_one)


@pytest.mark.parametrize("bytes_mode", ["auto", "base64"])
def test_json_dump_in_bulk_equals_batch_by_batch_on_damaged_copies(monkeypatch, tmp_path, bytes_mode):
    out = dump_both_ways(monkeypatch, damaged_copies(tmp_path), "-d", "--bytes", bytes_mode)
    assert b'"type":"problem"' in out and b'"type":"trailing_bytes"' in out


# ---------------------------------------------------------------------------------------------
# Generated segments
# ---------------------------------------------------------------------------------------------

TEXTS = [None, b"", b"plain", "h\u00e9llo \"quoted\" \\ \t\n\u2028 \U0001F600".encode(), b"\x00\x1f\x7f",
         b"\xff\xfe not utf-8", b"\xed\xa0\x80", "caf\u00e9".encode()[:-1], b"%d %s %%"]


def _odd_records(rng: random.Random, count: int) -> list[bytes]:
    records = []
    for delta in range(count):
        headers = [(rng.choice([b"h", b"\xff\xfebad", "k\u00e9".encode(), b""]), rng.choice(TEXTS))
                   for _ in range(rng.choice([0, 0, 1, 3]))]
        record = build_record(delta, rng.choice([0, 7, -3, 1 << 40]), rng.choice(TEXTS), rng.choice(TEXTS), headers)
        if rng.random() < 0.1:  # a non-canonical length varint: 0x80|low, 0x00 reads the same value
            first = record[0]
            record = bytes([0x80 | first, 0x00]) + record[1:] if first < 0x80 else record
        records.append(record)
    return records


def odd_segment(rng: random.Random, base: int) -> bytes:
    """Batches whose records must come out exactly, or (past a long) go back batch by batch."""
    out = []
    offset = base
    for _ in range(rng.randrange(1, 30)):
        count = rng.randrange(0, 5)
        base_offset = offset if rng.random() < 0.9 else rng.choice([(1 << 63) - 2, -(1 << 63)])
        base_timestamp = rng.choice([1_700_000_000_000, (1 << 63) - 3, -(1 << 63) + 1, -1])
        base_sequence = rng.choice([-1, 0, 0x7FFFFFFF - 1, 0x7FFFFFFF])
        attributes = rng.choice([0, 0, ATTR_LOG_APPEND_TIME, ATTR_DELETE_HORIZON, 0x10])
        batch = build_batch(base_offset, _odd_records(rng, count), base_timestamp=base_timestamp,
                            max_timestamp=rng.choice([-1, base_timestamp]), attributes=attributes,
                            compression_id=codecs.IDS[rng.choice(["none", "none", "gzip", "lz4", "zstd", "snappy"])],
                            producer_id=rng.choice([-1, 7]), producer_epoch=rng.choice([-1, 3]),
                            base_sequence=base_sequence, partition_leader_epoch=rng.choice([-1, 0, 5]))
        if rng.random() < 0.05:
            batch = _lie_in_records(batch, rng)
        out.append(batch)
        offset += max(count, 1)
    return b"".join(out)


def write_partitions(root: Path, rng: random.Random, number: int) -> list[str]:
    paths = []
    for n in range(number):
        partition = root / f"gen-{n}"
        partition.mkdir()
        base = 0
        for _ in range(rng.randrange(1, 4)):
            data = (generated_segment if rng.random() < 0.5 else odd_segment)(rng, base)
            if rng.random() < 0.2:  # a tail: cut, zeros or garbage
                data += rng.choice([data[:rng.randrange(1, 200)], bytes(rng.randrange(1, 100)), b"\x01" * 30])
            (partition / f"{base:020d}.log").write_bytes(data)
            base += 200
        paths.append(str(partition))
    return paths


@pytest.mark.parametrize("flags, bytes_mode", MODES, ids=MODE_IDS)
def test_json_dump_in_bulk_equals_batch_by_batch_on_generated_segments(monkeypatch, tmp_path, flags, bytes_mode):
    paths = write_partitions(tmp_path, random.Random(23), 40)
    out = dump_both_ways(monkeypatch, paths, *flags, "--bytes", bytes_mode)
    assert b'"type":"problem"' in out and b'"type":"trailing_bytes"' in out
    if flags:
        assert b'"value_encoding":"base64"' in out and b'"headers":[{' in out
        if bytes_mode == "auto":
            assert b'"value_encoding":"utf8"' in out
    in_runs, one_by_one = batches_in_runs(monkeypatch, paths, deep=bool(flags))
    assert in_runs > 500 and one_by_one > (50 if flags else -1), (in_runs, one_by_one)


def test_json_dump_in_bulk_with_max_bytes(monkeypatch, tmp_path):
    paths = write_partitions(tmp_path, random.Random(29), 10)
    for max_bytes in ("100", "5000", "20000"):
        dump_both_ways(monkeypatch, paths, "-d", "--max-bytes", max_bytes)


def test_json_dump_in_bulk_over_many_kernel_calls(monkeypatch, tmp_path):
    """More records, headers and bytes than one call's columns and arrays hold, with batches to
    hand back in between."""
    rng = random.Random(31)
    header = [(b"h", b"v")] * 3
    batches, offset = [], 0
    while sum(map(len, batches)) < 3 * d._BulkDump.STEP:
        count = rng.choice([1, 1, 50, 400])
        records = [build_record(i, i, b"k%d" % i, b"v" * rng.randrange(0, 2000), header) for i in range(count)]
        batch = build_batch(offset, records, base_timestamp=1, max_timestamp=count,
                            compression_id=codecs.IDS[rng.choice(["none", "lz4"])],
                            attributes=0x20 if rng.random() < 0.01 else 0)
        batches.append(batch)
        offset += count
    partition = tmp_path / "big-0"
    partition.mkdir()
    (partition / f"{0:020d}.log").write_bytes(b"".join(batches))
    out = dump_both_ways(monkeypatch, [str(partition)], "-d")
    assert out.count(b'"type":"record"') == offset


@pytest.mark.parametrize("unbuffered", ["", "1"], ids=["buffered", "unbuffered"])
def test_runs_written_as_bytes_to_a_real_stdout_keep_order_and_name_escapes(tmp_path, unbuffered):
    """In a subprocess, so stdout is a real pipe (a raw file when unbuffered): a partition whose
    name is not UTF-8, with an index file, gives the same bytes both ways (runs rendered to bytes,
    or batch by batch to text and encoded), and the name's \\udcXX escapes give it back."""
    name = os.fsdecode(b"bad\xff-0")
    partition = Path(os.fsdecode(tmp_path)) / name
    partition.mkdir()
    batches = [build_batch(offset, [build_record(0, 0, b"k", b"v" * 300)]) for offset in range(200)]
    (partition / f"{0:020d}.log").write_bytes(b"".join(batches))
    (partition / f"{0:020d}.index").write_bytes(b"\x00" * 16)
    outputs = []
    for mode in ("never", "always"):
        environment = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED=unbuffered)
        environment[bulk_scan.MODE_VARIABLE] = mode
        proc = subprocess.run([sys.executable, "-m", "kafkalog_tools", "dump", "--format", "json", "-d", name],
                              cwd=tmp_path, env=environment, capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
    objects = [json.loads(line) for line in outputs[1].decode("utf-8").splitlines()]  # strict: UTF-8 out
    assert [o["type"] for o in objects].count("record") == 200
    assert {os.fsencode(o["file"]).split(b"/")[0] for o in objects} == {b"bad\xff-0"}


def test_line_writer_puts_bytes_after_the_text_before_them(tmp_path):
    """Text lines, then lines as bytes beneath the text layer, then text: in that order, on a
    buffered stream, on an unbuffered one (a raw file beneath, as python -u has) and on one without
    bytes beneath; on a line-buffered one (a terminal) bytes go out at once."""
    def write(writer: LineWriter) -> None:
        writer.write_lines(["a", "\u00e9"])
        writer.write_block("\u00fc\n".encode())
        writer.write_block(b"")
        writer.write_lines(["z"])
        writer.stream.flush()

    expected = "a\n\u00e9\n\u00fc\nz\n"
    buffered = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    write(LineWriter(buffered))
    assert buffered.buffer.getvalue().decode() == expected
    with io.TextIOWrapper(io.FileIO(tmp_path / "raw", "w"), encoding="utf-8", write_through=True) as raw:
        write(LineWriter(raw))
    assert (tmp_path / "raw").read_text(encoding="utf-8") == expected
    text_only = io.StringIO()
    write(LineWriter(text_only))
    assert text_only.getvalue() == expected
    raw = io.BytesIO()
    terminal = io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", line_buffering=True)
    LineWriter(terminal).write_block(b"now\n")
    assert raw.getvalue() == b"now\n"  # line-buffered, as text lines are: shown without a flush


def _hard_texts(rng: random.Random) -> list[bytes]:
    """What JSON strings and UTF-8 make hard: every byte alone, every lead byte with the edges of its
    continuation range, characters of each length, plain runs of each length up to 17 (the kernel
    copies 8 plain bytes at a time) with an escape or a non-ASCII byte at each place after them."""
    edges = [0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF]
    texts = [bytes([byte]) for byte in range(256)]
    texts += [bytes([lead, second]) + tail for lead in range(0xC0, 0x100) for second in edges
              for tail in (b"", b"\x80", b"\x80\x80", b"\xbf\xbf")]
    texts += [c.encode() for c in ("\u00e9", "\u20ac", "\U0001D11E", "\u2028", "\ud7ff", "\ue000", "\U0010FFFF")]
    texts += [b"p" * run + odd + b"q" * after for run in range(18) for odd in (b'"', b"\\", b"\x01", b"\xc3\xa9", b"\xff")
              for after in (0, 1, 8)]
    texts += [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(300)]
    return texts


def test_render_kernel_writes_what_python_writes(monkeypatch, tmp_path):
    """`run_block` (the compiled renderer) against `python_run_block` on runs whose keys, values and
    header values are `_hard_texts`, in both --bytes modes, with a buffer so small that nearly every
    call stops early or must grow it; a batch with a header key that is not UTF-8 goes to Python,
    and only such a batch."""
    rng = random.Random(43)
    texts = _hard_texts(rng)
    partition = tmp_path / "hard-0"
    partition.mkdir()
    batches, offset, bad_keys = [], 0, 0
    for start in range(0, len(texts), 7):
        chunk = texts[start:start + 7]
        bad = rng.random() < 0.05
        bad_keys += bad
        records = [build_record(i, i, text, chunk[-1 - i], [(b"\xff" if bad else b"k\"", text)] if i % 2 else [])
                   for i, text in enumerate(chunk)]
        batches.append(build_batch(offset, records, base_timestamp=1, max_timestamp=len(chunk),
                                   compression_id=codecs.IDS[rng.choice(["none", "lz4"])]))
        offset += len(chunk)
    (partition / f"{0:020d}.log").write_bytes(b"".join(batches))
    legacy_partition = tmp_path / "legacy-0"
    legacy_partition.mkdir()
    (legacy_partition / f"{0:020d}.log").write_bytes(b"".join(
        legacy.build_entry(i, 1, text, texts[-1 - i], timestamp=i) for i, text in enumerate(texts)))
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    runs = [item for item in d.dump([str(partition), str(legacy_partition)], d.DumpOptions(deep=True, batch_runs=True))
            if type(item) is d.BatchRun]
    assert sum(run.batches.shape[1] for run in runs) == len(batches) + len(texts) and bad_keys > 3
    python_run_block, handed_back = jsonl.python_run_block, []
    monkeypatch.setattr(jsonl, "python_run_block", lambda run, mode: handed_back.append(run) or python_run_block(run, mode))
    render_size, kernel, calls = jsonl._render_size, bulk_scan.kernel(), []
    monkeypatch.setattr(kernel, "render_each", lambda *arguments: calls.append(1) or type(kernel).render_each(
        kernel, *arguments))
    for small in (False, True):
        monkeypatch.setattr(jsonl, "_render_size", (lambda *_: 64) if small else render_size)
        for mode in ("auto", "base64"):
            handed_back.clear()
            calls.clear()
            for run in runs:
                assert jsonl.run_block(run, mode) == python_run_block(run, mode)
            assert len(handed_back) == bad_keys and all(run.batches.shape[1] == 1 for run in handed_back)
            assert len(calls) > len(batches) if small else len(calls) >= len(runs)  # (the small one grows)


def _chunks_by_thread(monkeypatch) -> list[str]:
    """Names of the threads `_BulkDump._chunk` runs on, call after call."""
    threads, chunk = [], d._BulkDump._chunk
    monkeypatch.setattr(d._BulkDump, "_chunk", lambda self, *a: threads.append(threading.current_thread().name)
                        or chunk(self, *a))
    return threads


@pytest.mark.parametrize("records_decoded_by", ["scan thread", "caller"])
@pytest.mark.parametrize("output_format", ["json", "text"])
def test_chunks_read_ahead_while_runs_print_equal_batch_by_batch(monkeypatch, tmp_path, output_format,
                                                                 records_decoded_by):
    """Small kernel calls, each made on the scan thread while the runs of the one before print, and
    batches handed back in between (a call made ahead is then dropped): still the per-batch output,
    whether the scan thread decodes a call's records or, the caller already waiting for it, leaves
    them to the caller (`_BulkDump.waiting`, here fixed either way)."""
    monkeypatch.setattr(d._BulkDump, "STEP", 1 << 12)
    caller_waits = records_decoded_by == "caller"
    monkeypatch.setattr(d._BulkDump, "waiting", property(lambda self: caller_waits, lambda self, value: None),
                        raising=False)
    finished, finish = [], d._BulkDump._finish  # (thread, chunk)
    monkeypatch.setattr(d._BulkDump, "_finish", lambda self, chunk: finished.append(
        (threading.current_thread().name, chunk)) or finish(self, chunk))
    paths = write_partitions(tmp_path, random.Random(43), 12) + generated_partitions_legacy(
        tmp_path / "legacy", random.Random(44), 4)
    rng, batches, offset = random.Random(45), [], 0
    while offset < 20_000:  # counts that vary, so that one call's rows are not another's; control batches go back
        count = rng.randrange(0, 12)
        batches.append(build_batch(offset, [build_record(i, i, b"k", b"v" * rng.randrange(50)) for i in range(count)],
                                   compression_id=codecs.IDS[rng.choice(["none", "gzip"])],
                                   attributes=ATTR_CONTROL if rng.random() < 0.05 else 0))
        offset += count
    (tmp_path / "varied-0").mkdir()
    (tmp_path / "varied-0" / f"{0:020d}.log").write_bytes(b"".join(batches))
    paths.append(str(tmp_path / "varied-0"))
    threads = _chunks_by_thread(monkeypatch)
    for flags in (["-d"], []):
        dump_both_ways(monkeypatch, paths, *flags, "-p" if output_format == "text" else "-d",
                       output_format=output_format)
    ahead = sum(name.startswith("kafkalog-scan") for name in threads)
    assert ahead > 50 and len(threads) - ahead > 20, (ahead, len(threads))
    assert len({id(chunk) for _, chunk in finished}) == len(finished)  # no call's records decoded twice
    finished_ahead = sum(name.startswith("kafkalog-scan") for name, _ in finished)
    assert finished_ahead == (0 if caller_waits else ahead) and len(finished) > 50, (finished_ahead, ahead)


def test_a_dump_stopped_early_waits_for_its_call_ahead(monkeypatch, tmp_path):
    """The walk's consumer stops (--strict, a closed pipe) while a call runs ahead on the map: the
    segment closes only once it is done."""
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    monkeypatch.setattr(d._BulkDump, "STEP", 1 << 12)
    paths = write_partitions(tmp_path, random.Random(47), 1)
    calls, chunk = [], d._BulkDump._chunk

    def slow_chunk(self, *args):
        time.sleep(0.2)
        calls.append("started")
        result = chunk(self, *args)
        calls.append("done")
        return result

    monkeypatch.setattr(d._BulkDump, "_chunk", slow_chunk)
    walk = d.dump(paths, d.DumpOptions(deep=True, batch_runs=True))
    assert type(next(item for item in walk if type(item) is d.BatchRun)) is d.BatchRun
    assert calls[-1] == "done"  # the first call; the next runs ahead
    walk.close()
    assert len(calls) >= 4 and calls[-1] == "done", calls


def test_runs_stay_renderable_after_the_walk_moves_on(monkeypatch, tmp_path):
    """Items collected first and rendered afterwards (the segment closed, later kernel calls made)
    give the lines they give when rendered as they come."""
    paths = write_partitions(tmp_path, random.Random(41), 5)
    big = tmp_path / "big-0"
    big.mkdir()
    batch = build_batch(0, [build_record(0, 0, b"k", b"v" * 500)])
    (big / f"{0:020d}.log").write_bytes(b"".join(
        (offset).to_bytes(8, "big") + batch[8:] for offset in range(3 * d._BulkDump.STEP // len(batch))))
    paths.append(str(big))
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    items = list(d.dump(paths, d.DumpOptions(deep=True, batch_runs=True)))
    assert sum(type(item) is d.BatchRun for item in items) > 3
    rendered = "".join(line + "\n" for item in items for line in jsonl.lines(item)).encode()
    assert rendered == dump_both_ways(monkeypatch, paths, "-d")


# ---------------------------------------------------------------------------------------------
# The records kernel against decode_records
# ---------------------------------------------------------------------------------------------


def kernel_records(batch: bytes) -> list[tuple] | None:
    """decode_each's reading of the batch's records (as decode_records' fields), or None if refused."""
    view = KERNEL.view(batch)
    columns = KERNEL.columns(1)
    n, _ = KERNEL.scan(view, 0, len(batch), len(batch), False, columns)
    assert n == 1
    payload = parse_batch(batch, 0, "generated").payload()
    records = np.empty((len(bulk_scan.RECORD_COLUMNS), 64), dtype=np.int64)
    headers = np.empty((len(bulk_scan.HEADER_COLUMNS), 4), dtype=np.int64)  # small: the kernel asks for room
    first = np.empty(1, dtype=np.int64)
    starts, ends = np.array([0]), np.array([len(payload)])
    row = used = used_headers = 0
    while row == 0:
        row, used, used_headers = bulk_scan.records_kernel()(
            view, np.frombuffer(payload, dtype=np.uint8), columns, 0, 1, starts, ends, np.array([1]), first,
            records, 0, headers, 0)
        if row == 0:
            headers = np.empty((headers.shape[0], 2 * headers.shape[1]), dtype=np.int64)
    if first[0] == bulk_scan.NOT_DECODED:
        return None

    def part(start, length):
        return None if length < 0 else payload[start:start + length]

    out = []
    for r in range(first[0], used):
        (offset, timestamp, sequence, size, key_start, key_length, value_start, value_length, first_header,
         header_count) = records[:, r].tolist()
        record_headers = [(part(*headers[0:2, h].tolist()), part(*headers[2:4, h].tolist()))
                          for h in range(first_header, first_header + header_count)]
        out.append((offset, timestamp, sequence, size, part(key_start, key_length), part(value_start, value_length),
                    record_headers))
    return out


def test_records_kernel_reads_what_decode_records_reads():
    rng = random.Random(37)
    decoded = refused = 0
    for _ in range(1500):
        segment = odd_segment(rng, 0)
        position = 0
        while position < len(segment):
            batch = parse_batch(segment, position, "generated")
            data = segment[position:batch.end]
            position = batch.end
            if batch.is_control:
                continue
            try:
                batch.payload()
            except DecompressionError:
                continue  # the bulk path does not decompress it either
            try:
                expected = [(r.offset, r.timestamp, r.sequence, r.size, r.key, r.value, r.headers)
                            for r in decode_records(batch)]
            except Exception:
                expected = None
            got = kernel_records(data)
            if got is None:
                refused += 1
            else:
                decoded += 1
                assert got == expected
    assert decoded > 5000 and refused > 200, (decoded, refused)


# ---------------------------------------------------------------------------------------------
# V0/V1 messages: scan_legacy, wrappers decompressed, decode_legacy_each against LegacyBatch.records
# ---------------------------------------------------------------------------------------------


def test_json_dump_in_bulk_equals_batch_by_batch_on_the_legacy_corpus(monkeypatch):
    paths = [str(need(GOLDEN / kind / name)) for kind in ("logs", "rebuilt") for name in ("golden-v0-0", "golden-v1-0")]
    for flags, bytes_mode in MODES:
        out = dump_both_ways(monkeypatch, paths, *flags, "--bytes", bytes_mode)
        assert out.count(b'"magic":0') > 100 and out.count(b'"magic":1') > 100
        assert out.count(b'"legacy":{') > (1000 if flags else -1)
    in_runs, one_by_one = batches_in_runs(monkeypatch, paths, deep=True)
    assert in_runs == out.count(b'"type":"batch"') and one_by_one == 0  # clean: every message in bulk


def _legacy_message(offset: int, magic: int, key, value, timestamp: int, attributes: int, rng: random.Random) -> bytes:
    """A log entry, now and then with bytes after its value (under its CRC: Kafka reads by position)."""
    entry = legacy.build_entry(offset, magic, key, value, timestamp=timestamp, attributes=attributes)
    if rng.random() < 0.05:
        extra = rng.randbytes(rng.randrange(1, 5))
        entry = entry[:8] + (len(entry) - 12 + len(extra)).to_bytes(4, "big") + entry[12:] + extra
        entry = entry[:12] + zlib.crc32(entry[16:]).to_bytes(4, "big") + entry[16:]
    return entry


def odd_legacy_segment(rng: random.Random, base: int) -> bytes:
    """V0 and V1 messages and wrappers whose records must come out exactly (odd text, null keys and
    values, LogAppendTime, odd attribute bits, relative and librdkafka wrapper offsets, set tails
    Kafka ignores), or go back message by message (inner CRC mismatches, inner magic or compression,
    empty or null sets, wrapper offsets below their inner ones, zstd wrappers, offsets past a long)."""
    out = []
    offset = base
    magic = rng.choice([0, 1])
    for _ in range(rng.randrange(1, 30)):
        if rng.random() < 0.15:
            magic = 1 - magic
        codec = rng.choice(["none", "none", "gzip", "gzip", "snappy", "lz4"])
        timestamp = rng.choice([1_700_000_000_000, -1, (1 << 63) - 1])
        attributes = rng.choice([0, 0, 0x08, -0x78, 0x40])  # LogAppendTime, bits no codec reads (signed)
        if codec == "none":
            out.append(_legacy_message(offset, magic, rng.choice(TEXTS), rng.choice(TEXTS), timestamp, attributes, rng))
            offset += 1
            continue
        count = rng.randrange(1, 6)
        first_inner = rng.choice([0, 0, 0, 7]) if magic else offset  # V1: relative; V0: absolute
        if rng.random() < 0.03:
            first_inner = -(1 << 63)  # the base would wrap past a long
        inner = []
        for i in range(count):
            roll = rng.random()
            entry = _legacy_message(first_inner + i, magic if roll > 0.03 else 1 - magic, rng.choice(TEXTS),
                                    rng.choice(TEXTS), timestamp - i, rng.choice([0, 0, 0x08, -0x80]) if roll > 0.06
                                    else codecs.IDS["gzip"], rng)
            if 0.06 < roll < 0.09:
                entry = entry[:-1] + bytes([entry[-1] ^ 1])  # an inner CRC mismatch
            inner.append(entry)
        data = b"".join(inner)
        tail = rng.random()
        if tail < 0.05:
            data += bytes(rng.randrange(1, 12))  # too short for an entry: ignored
        elif tail < 0.1:
            data += inner[0][:rng.randrange(12, len(inner[0]))]  # a truncated entry ends the set
        elif tail < 0.12:
            data = b""  # no inner records
        elif tail < 0.14:
            data += (0).to_bytes(8, "big") + (5).to_bytes(4, "big")  # an entry smaller than a message
        wrapped = codecs.compress(codecs.IDS[codec], data, magic=magic)
        codec_id = codecs.IDS[codec] if rng.random() > 0.03 else codecs.IDS["zstd"]
        wrapper_offset = offset + count - 1
        roll = rng.random()
        if magic and roll < 0.08:
            wrapper_offset = 0 if roll < 0.05 else first_inner + count - 2  # librdkafka's; below the last inner
        out.append(_legacy_message(wrapper_offset, magic, rng.choice([None, b"k"]), None if roll > 0.97 else wrapped,
                                   timestamp, codec_id | attributes, rng))
        offset += count
    return b"".join(out)


def legacy_partition_segment(rng: random.Random, base: int) -> bytes:
    roll = rng.random()
    if roll < 0.3:
        return _legacy_segment(rng, base)  # with damage a shallow check sees
    if roll < 0.8:
        return odd_legacy_segment(rng, base)
    return odd_legacy_segment(rng, base) + odd_segment(rng, base + 1000)  # V2 after an upgrade


@pytest.mark.parametrize("flags, bytes_mode", MODES, ids=MODE_IDS)
def test_json_dump_in_bulk_equals_batch_by_batch_on_generated_legacy_segments(monkeypatch, tmp_path, flags,
                                                                              bytes_mode):
    paths = generated_partitions(tmp_path, random.Random(43), 50, legacy_partition_segment, 2000)
    out = dump_both_ways(monkeypatch, paths, *flags, "--bytes", bytes_mode)
    assert b'"type":"problem"' in out and b'"timestamp_type":"LogAppendTime"' in out
    assert b'"base_offset":null' in out  # a wrapper that does not decompress: the dump goes on
    assert b'"magic":0' in out and b'"magic":1' in out and b'"magic":2' in out
    if flags:
        assert b'"crc_valid":false' in out and b'"value_encoding":"base64"' in out
    in_runs, one_by_one = batches_in_runs(monkeypatch, paths, deep=bool(flags))
    assert in_runs > 1000 and one_by_one > 100, (in_runs, one_by_one)


def kernel_legacy_records(log: SegmentFile) -> dict[int, tuple | None]:
    """decode_legacy_each's reading of each message of a segment, by position (its base offset and
    its records, as LegacyBatch's fields), None where it refused; the wrappers decompressed by
    _BulkDump, calls of one magic each."""
    bulk = d._BulkDump(log, True)
    bulk.RECORDS = 2  # small: the kernel asks for room
    out = {}
    position = 0
    while position < log.end:
        chunk = bulk._read(position)
        assert chunk.n
        batches = dict(zip(bulk_scan.RUN_BATCH_FIELDS, chunk.batches.tolist()))
        payloads = bytes(chunk.payloads)  # (a numpy array where the kernel inflated every wrapper)
        for row in range(chunk.n):
            first = int(chunk.buffers.first_record[row])
            if first == bulk_scan.NOT_DECODED:
                out[batches["position"][row]] = None
                continue
            data = payloads if batches["in_payloads"][row] else log.buffer
            records = []
            for r in range(first, first + batches["count"][row]):
                (offset, timestamp, sequence, size, key_start, key_length, value_start, value_length, _,
                 header_count) = chunk.records[:, r].tolist()
                assert (sequence, header_count) == (-1, 0)
                crc, attributes = chunk.legacy_records[:, r].tolist()
                records.append((offset, timestamp, size,
                                None if key_length < 0 else data[key_start:key_start + key_length],
                                None if value_length < 0 else data[value_start:value_start + value_length], crc,
                                attributes))
            out[batches["position"][row]] = (batches["base_offset"][row], records)
        position = chunk.after
    bulk.settle()
    return out


def test_legacy_records_kernel_reads_what_legacy_records_reads(tmp_path):
    rng = random.Random(47)
    decoded = refused = 0
    path = tmp_path / f"{0:020d}.log"
    for _ in range(600):
        path.write_bytes(odd_legacy_segment(rng, 0))
        with SegmentFile(path) as log:
            got = kernel_legacy_records(log)
            entries = list(log.entries(0))
            assert sorted(got) == [entry.position for entry in entries]
            for batch in entries:
                try:
                    records = batch.records()
                    expected = (batch.base_offset, [(r.offset, r.timestamp, r.size, r.key, r.value, r.legacy_crc,
                                                     r.legacy_attributes) for r in records])
                    clean = all(r.legacy_crc_valid and r.legacy_magic == batch.magic for r in records)
                except CorruptDataError:
                    expected, clean = None, False
                if got[batch.position] is None:
                    refused += 1
                else:
                    decoded += 1
                    assert clean and got[batch.position] == expected
    assert decoded > 3000 and refused > 200, (decoded, refused)


@pytest.mark.parametrize("buffered", [False, True], ids=["raw", "buffered"])
def test_line_writer_waits_on_a_full_non_blocking_pipe(buffered):
    """A stdout left non-blocking by whatever started us: writes that take nothing (a raw file
    returns None; a buffered one raises, saying how much it took) wait for room; all of it arrives."""
    import fcntl
    import threading

    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETFL, fcntl.fcntl(write_end, fcntl.F_GETFL) | os.O_NONBLOCK)
    raw = io.FileIO(write_end, "w")
    stream = io.TextIOWrapper(io.BufferedWriter(raw) if buffered else raw, encoding="utf-8", write_through=True)
    data = b"".join(b"%08d\n" % n for n in range(200_000))  # ~1.8 MB: a pipe holds 64 KiB
    received = bytearray()

    def drain():
        while chunk := os.read(read_end, 1 << 16):
            received.extend(chunk)
            time.sleep(0.001)  # slower than the writer, so that the pipe fills

    reader = threading.Thread(target=drain)
    reader.start()
    writer = LineWriter(stream)
    for start in range(0, len(data), 450_000):
        writer.write_block(memoryview(data)[start:start + 450_000])
    stream.close()
    reader.join(timeout=60)
    os.close(read_end)
    assert bytes(received) == data


# ---------------------------------------------------------------------------------------------
# kafka-dump-log's text, written by the compiled renderer
# ---------------------------------------------------------------------------------------------

TEXT_FLAGS = [["-d", "-p"], ["-d"], [], ["-d", "-p", "--skip-record-metadata"], ["-d", "--skip-record-metadata"]]


def text_both_ways(monkeypatch, paths: list[str], *args: str) -> tuple[bytes, int]:
    """The text dump per batch and in bulk (CliRunner's stdout is UTF-8 over bytes, as a pipe's is):
    (what both print, how many times the compiled text renderer ran)."""
    calls = []
    monkeypatch.setattr(KERNEL, "render_dumplog_each", lambda *arguments: calls.append(1) or type(
        KERNEL).render_dumplog_each(KERNEL, *arguments))
    return dump_both_ways(monkeypatch, paths, *args, output_format="text"), len(calls)


@pytest.mark.parametrize("flags", TEXT_FLAGS, ids=" ".join)
def test_text_dump_in_bulk_equals_batch_by_batch_on_the_corpus(monkeypatch, flags):
    paths = corpus_paths() + [str(ROOT / "fixtures" / "example-logdir")]
    out, calls = text_both_ways(monkeypatch, paths, *flags)
    metadata = "-d" in flags and "--skip-record-metadata" not in flags
    assert out.count(b"\n| offset: ") > (1000 if metadata else -1) and calls > 50


@pytest.mark.parametrize("flags", TEXT_FLAGS, ids=" ".join)
def test_text_dump_in_bulk_equals_batch_by_batch_on_generated_and_damaged_segments(monkeypatch, tmp_path, flags):
    (tmp_path / "odd").mkdir()
    paths = write_partitions(tmp_path / "odd", random.Random(31), 30)
    paths += damaged_copies(tmp_path / "damaged")
    paths += generated_partitions_legacy(tmp_path / "legacy", random.Random(37), 8)
    out, calls = text_both_ways(monkeypatch, paths, *flags)
    assert b"isvalid: true" in out and calls > 50


def generated_partitions_legacy(root: Path, rng: random.Random, number: int) -> list[str]:
    root.mkdir()
    paths = []
    for n in range(number):
        partition = root / f"legacy-{n}"
        partition.mkdir()
        data = odd_legacy_segment(rng, 0) + (odd_segment(rng, 10_000) if n % 2 else b"")  # V0/V1, then V2
        (partition / f"{0:020d}.log").write_bytes(data)
        paths.append(str(partition))
    return paths


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _text_handed_back(monkeypatch) -> list[int]:
    """The batches `render_dumplog_each` refuses from now on, as `_one_by_one` is called for them."""
    from kafkalog_tools.output import dumplog_text

    one_by_one, handed_back = dumplog_text._one_by_one, []
    monkeypatch.setattr(dumplog_text, "_one_by_one", lambda run, b, *rest: handed_back.append(b) or one_by_one(
        run, b, *rest))
    return handed_back


def test_text_render_kernel_writes_what_the_per_batch_path_writes(monkeypatch, tmp_path):
    """Keys, values and header keys that are `_hard_texts`, with a buffer so small that nearly every
    call stops early or must grow it: what is not UTF-8 as Python's strict decoder reads it is
    written with Java's replacements by the kernel too, so no batch goes back to the per-batch path."""
    from kafkalog_tools.output import dumplog_text

    rng = random.Random(47)
    texts = _hard_texts(rng)
    partition = tmp_path / "hard-0"
    partition.mkdir()
    batches, offset, malformed = [], 0, 0
    for start in range(0, len(texts), 5):
        chunk = texts[start:start + 5]
        header_key = b"\xff" if rng.random() < 0.05 else "k\u00e9".encode()
        records = [build_record(i, i, text, chunk[-1 - i], [(header_key, text)] if i % 2 else [])
                   for i, text in enumerate(chunk)]
        malformed += not all(_utf8(text) for text in chunk) or (len(chunk) > 1 and not _utf8(header_key))
        batches.append(build_batch(offset, records, base_timestamp=1, max_timestamp=len(chunk),
                                   compression_id=codecs.IDS[rng.choice(["none", "lz4"])]))
        offset += len(chunk)
    (partition / f"{0:020d}.log").write_bytes(b"".join(batches))
    handed_back = _text_handed_back(monkeypatch)
    run_size = dumplog_text._run_size
    for small in (False, True):
        monkeypatch.setattr(dumplog_text, "_run_size", (lambda *_: 64) if small else run_size)
        handed_back.clear()
        out, calls = text_both_ways(monkeypatch, [str(partition)], "-d", "-p")
        assert out.count(b"\n| offset: ") == len(texts) and not handed_back and malformed > 10
        # a call per run; a small buffer grows, call after call, first
        assert calls >= 6 if small else calls <= 5


@pytest.mark.parametrize("flags", [["-d", "-p"], ["-d", "-p", "--skip-record-metadata"]], ids=" ".join)
def test_text_render_kernel_replaces_malformed_utf8_as_the_per_batch_path(monkeypatch, tmp_path, flags):
    """Binary keys, values and header keys (`java_utf8_texts`) in V2 batches uncompressed, lz4 (the
    kernel decompresses) and gzip (Python does) and in V0/V1 messages: the kernel writes each as
    `java_text.decode_utf8` reads it, byte for byte what the per-batch path prints, with room for
    three bytes each (a small buffer grows), and hands no batch back."""
    from kafkalog_tools.output import dumplog_text
    from kafkalog_tools.output.java_text import decode_utf8

    texts = java_utf8_texts(random.Random(53))
    replaced = [text for text in texts if decode_utf8(text).encode() != text]
    differs_from_python = [text for text in texts if decode_utf8(text) != text.decode("utf-8", "replace")]
    assert len(replaced) > 0.9 * len(texts) and len(differs_from_python) > 100
    partition, legacy_partition = tmp_path / "binary-0", tmp_path / "binary-legacy-0"
    batches = write_binary_texts(partition, legacy_partition, texts, random.Random(59), 800)
    paths = [str(partition), str(legacy_partition)]
    handed_back = _text_handed_back(monkeypatch)
    run_size = dumplog_text._run_size
    for small in (False, True):
        monkeypatch.setattr(dumplog_text, "_run_size", (lambda *_: 64) if small else run_size)
        out, calls = text_both_ways(monkeypatch, paths, *flags)
        assert out.count(b"payload: ") == len(texts) + 800 and calls > 0 and not handed_back
    assert "\ufffd".encode() in out and decode_utf8(bytes.fromhex("41 ed a0 80 42")).encode() in out
    # all in runs but the first V0 message after the V1 ones (a change of magic ends a run)
    assert batches_in_runs(monkeypatch, paths, deep=True) == (batches + 799, 1)


def test_text_dump_to_a_stdout_that_is_not_utf8_is_encoded_as_text_is(tmp_path):
    """The compiled renderer writes UTF-8 beneath the text layer: only where that is stdout's
    encoding. Elsewhere text goes through the layer (here Latin-1, with backslash escapes)."""
    partition = GOLDEN / "logs" / "golden-v2-mixed-0"
    outcomes = []
    for mode in ("never", "always"):
        environment = {**os.environ, "PYTHONIOENCODING": "latin-1", bulk_scan.MODE_VARIABLE: mode}
        proc = subprocess.run([sys.executable, "-m", "kafkalog_tools", "dump", "--format", "text", "-d", "-p",
                               str(partition)], capture_output=True, env=environment, timeout=300)
        outcomes.append((proc.returncode, proc.stdout))
    assert outcomes[0] == outcomes[1] and outcomes[0][0] == 0
    assert b"\xe9\\u4e2d\\u20ac" in outcomes[0][1]  # "é中€": é in Latin-1, the others escaped


def test_text_of_legacy_runs_is_the_per_batch_text(monkeypatch):
    """Runs of V0/V1 messages, rendered one run at a time by a library caller: what the per-batch
    path prints (V0's NoTimestampType, the `isValid` and `crc` of each record, Kafka's stray `}`)."""
    from kafkalog_tools.output import dumplog_text

    paths = [str(GOLDEN / "logs" / name) for name in ("golden-v0-0", "golden-v1-0")]
    rendered = {}
    for mode in ("never", "always"):
        monkeypatch.setenv(bulk_scan.MODE_VARIABLE, mode)
        rendered[mode] = b"".join(
            dumplog_text.run_block(item, print_data=True, skip_metadata=False, decompress_limit=codecs.DEFAULT_LIMIT)
            if type(item) is d.BatchRun else
            "".join(line + "\n" for line in dumplog_text.lines(item, print_data=True, max_bytes_given=False)).encode()
            for item in d.dump(paths, d.DumpOptions(deep=True, print_data=True, batch_runs=True)))
    assert rendered["always"] == rendered["never"] and rendered["never"].count(b"\n| offset: ") > 100
    assert batches_in_runs(monkeypatch, paths, deep=True)[0] > 100


def test_text_renderer_refuses_records_of_v0_v1_messages_without_their_rows(monkeypatch):
    """The kernel reads each V0/V1 record's CRC from the rows beside it, unchecked: without them
    the call is refused before it runs."""
    import numpy as np

    from kafkalog_tools.output import dumplog_text

    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    [run, *_] = [item for item in d.dump([str(GOLDEN / "logs" / "golden-v1-0")], d.DumpOptions(deep=True,
                                                                                                 batch_runs=True))
                 if type(item) is d.BatchRun]
    texts, bounds = dumplog_text._texts()
    arguments = (run.pin, np.frombuffer(run.payloads, dtype=np.uint8), np.ascontiguousarray(run.batches),
                 np.ascontiguousarray(run.records), np.empty((len(bulk_scan.HEADER_COLUMNS), 0), dtype=np.int64))
    state, out = np.zeros(bulk_scan.RENDER_STATE, dtype=np.int64), np.empty(1 << 20, dtype=np.uint8)
    with pytest.raises(ValueError, match="bulk kernel"):
        KERNEL.render_dumplog_each(*arguments, None, True, True, False, texts, bounds, out, state)
    KERNEL.render_dumplog_each(*arguments, np.ascontiguousarray(run.legacy), True, True, False, texts, bounds, out,
                               state)
    assert state[bulk_scan.RENDER_BATCH] > 0 and state[bulk_scan.RENDER_WRITTEN] > 0  # (up to a value not UTF-8)


def test_a_run_of_batches_handed_back_holds_no_buffer_each(tmp_path, monkeypatch):
    """Every batch of a log whose every record has a header key that is not UTF-8 goes back to Python
    from the JSON renderer (as transaction markers did from the text renderer, and a KRaft metadata
    log's binary values, before the kernels wrote them): each return used to leave a view of a fresh
    run-sized buffer in the output, ~1 MiB a batch (8.3 GB for a 128 MiB metadata log). The output is
    the same both ways; what is held is near its size."""
    import tracemalloc

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(build_batch(n, [build_record(0, 0, b"k", b"v", [(b"\xff", b"v")])], base_timestamp=0,
                                          max_timestamp=0) for n in range(400)))
    python_run_block, handed_back = jsonl.python_run_block, []
    monkeypatch.setattr(jsonl, "python_run_block", lambda run, mode: handed_back.append(run) or python_run_block(run, mode))
    text = dump_both_ways(monkeypatch, [str(path)], "-d")
    assert text.count(b'"type":"record"') == 400 and len(handed_back) == 400
    tracemalloc.start()
    try:
        result = CliRunner().invoke(cli, ["dump", "--format", "json", "-d", str(path)], catch_exceptions=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.stdout_bytes == text
    assert peak < 16 * len(text) + 2 * jsonl._RENDER_BUFFER + (8 << 20)


def _marker_mix(root: Path) -> tuple[Path, int, int]:
    """`marker_partition` (markers of every shape between data batches, stray, LogAppendTime and
    producer-less ones) and a second segment of plain markers with a sequence and without the
    transactional bit between data batches. Returns it, with its plain markers and other control
    batches counted."""
    from tests.test_producer_state_bulk import MARKER_SHAPES, marker_partition

    rounds = 3
    partition = marker_partition(root, rounds)
    plain_shapes = sum(plain for *_, plain in MARKER_SHAPES.values())
    plain, other = rounds * (plain_shapes + 3), rounds * (len(MARKER_SHAPES) - plain_shapes)
    marker = MARKER_SHAPES["commit"][0]
    data = [build_record(0, 0, b"k", b"v\xff\x00w"), build_record(1, 1, None, b"x", [(b"h", b"y")])]
    (partition / f"{100_000:020d}.log").write_bytes(b"".join((
        build_batch(100_000, data, base_timestamp=5, max_timestamp=6, producer_id=77, producer_epoch=2,
                    base_sequence=0),
        build_batch(100_002, marker, base_timestamp=7, max_timestamp=7, attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL,
                    producer_id=77, producer_epoch=2, base_sequence=41),
        build_batch(100_003, marker, base_timestamp=8, max_timestamp=8, attributes=ATTR_CONTROL, producer_id=78),
        build_batch(100_004, data, base_timestamp=9, max_timestamp=10))))
    return partition, plain + 2, other


MARKER_FLAGS = [("text", []), ("text", ["-d"]), ("text", ["-p"]), ("text", ["-d", "-p"]),
                ("text", ["-d", "--skip-record-metadata"]), ("text", ["-d", "-p", "--skip-record-metadata"]),
                ("json", []), ("json", ["-d"]), ("json", ["-d", "--bytes", "base64"])]


@pytest.mark.parametrize("output_format, flags", MARKER_FLAGS, ids=[f"{f}{''.join(a)}" for f, a in MARKER_FLAGS])
def test_markers_print_in_runs_as_batch_by_batch(monkeypatch, tmp_path, output_format, flags):
    """Transaction markers the kernel read stay in their run and are written by the compiled
    renderers, byte for byte as the per-batch path prints them (`control_text`, `control_object`);
    every other control batch goes back to the per-batch path, as before."""
    partition, plain, other = _marker_mix(tmp_path)
    out = dump_both_ways(monkeypatch, [str(partition)], *flags, output_format=output_format)
    deep = bool(flags) and flags != ["--bytes", "base64"]
    if output_format == "text":
        assert out.count(b"isControl: true") == plain + other
        if deep and "--skip-record-metadata" not in flags:
            assert out.count(b"endTxnMarker: ABORT coordinatorEpoch: ") >= plain // 2
            assert b"endTxnMarker: COMMIT coordinatorEpoch: -7\n" in out
            assert b"sequence: 41 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 5\n" in out
    else:
        assert out.count(b'"is_control":true') == plain + other
        assert out.count(b'"control":{"type":"COMMIT","type_id":1,"version":0,"coordinator_epoch":5}}') >= (
            3 if deep else 0)


def test_markers_kafka_writes_do_not_end_a_run(monkeypatch, tmp_path):
    """With deep iteration a marker the kernel read (`columns.MARKER`) is a batch of its run, its
    record decoded; only the other control batches come one by one, so each segment's runs are at
    most one more than those. Its lines are the kernel's: one render call a run, none handed back;
    the JSON kernel's are `python_run_block`'s."""
    from kafkalog_tools.output import dumplog_text

    partition, plain, other = _marker_mix(tmp_path)
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    items = list(d.dump([str(partition)], d.DumpOptions(deep=True, print_data=True, batch_runs=True)))
    runs = [item for item in items if type(item) is d.BatchRun]
    one_by_one = [item.batch for item in items if type(item) is d.BatchItem]
    assert len(one_by_one) == other and all(batch.is_control for batch in one_by_one)
    assert sum(int((run.batches[bulk_scan.B_ATTRIBUTES] & ATTR_CONTROL != 0).sum()) for run in runs) == plain
    assert len(runs) <= other + 2
    handed_back = _text_handed_back(monkeypatch)
    kernel, calls = bulk_scan.kernel(), []
    monkeypatch.setattr(kernel, "render_dumplog_each", lambda *arguments: calls.append(1) or type(
        kernel).render_dumplog_each(kernel, *arguments))
    for run in runs:
        dumplog_text.run_block(run, print_data=True, skip_metadata=False, decompress_limit=codecs.DEFAULT_LIMIT)
    assert handed_back == [] and len(calls) == len(runs)
    for run in runs:
        for mode in ("auto", "base64"):
            assert jsonl.run_block(run, mode) == jsonl.python_run_block(run, mode)

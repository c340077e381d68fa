"""Decode speed of `kafkalog dump` on a generated segment (not a test: a measurement).

Generates a V2 segment (default 256 MiB: 1 KiB values, 100 records per batch; `--codec lz4` for
the compressed variant) under a temp dir and times, in one run: the batch-header scan with CRC
checks, full record decoding, and `dump --format json --deep-iteration` writing to /dev/null.
Prints MB/s and records/s; ratios against a bare read+CRC32C loop over the same file, measured in
the same run, put the figures in context. Usage: python bench/decode_speed.py [--mib N] [--codec lz4]
"""
from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import time
from pathlib import Path

from kafkalog_tools import codecs, dump
from kafkalog_tools.crc import crc32c
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.formats.segment import SegmentFile
from kafkalog_tools.output import LineWriter, jsonl


def generate(path: Path, mib: int, codec: str) -> int:
    value = (b"abcdefghij" * 103)[:1024]
    offset = 0
    written = 0
    with open(path, "wb") as out:
        while written < mib << 20:
            records = [build_record(i, i, f"key-{offset + i}".encode(), value) for i in range(100)]
            batch = build_batch(offset, records, base_timestamp=1_700_000_000_000, max_timestamp=1_700_000_000_099,
                                compression_id=codecs.IDS[codec])
            out.write(batch)
            written += len(batch)
            offset += 100
    return offset


def timed(label: str, size: int, records: int, fn) -> float:
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    print(f"{label:<44} {seconds:7.2f} s  {size / seconds / 1e6:8.1f} MB/s  {records / seconds / 1e6:6.2f} M records/s")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--codec", default="none", choices=sorted(codecs.IDS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "00000000000000000000.log"
        records = generate(path, args.mib, args.codec)
        size = path.stat().st_size
        print(f"segment: {size / 2**20:.0f} MiB, {records} records, codec {args.codec}")

        def read_crc():
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                view = memoryview(m)
                for start in range(0, size, 1 << 20):
                    crc32c(view[start : start + (1 << 20)])
                view.release()

        def scan():
            with SegmentFile(path) as segment:
                assert all(b.crc_valid for b in segment.batches())

        def decode():
            with SegmentFile(path) as segment:
                assert sum(len(b.records()) for b in segment.batches()) == records

        def dump_json():
            with open(os.devnull, "w") as sink:
                writer = LineWriter(sink)
                for item in dump.dump([str(path)], dump.DumpOptions(deep=True)):
                    writer.write_json(jsonl.objects(item))

        limit = timed("limit: read + CRC32C (1 MiB chunks)", size, records, read_crc)
        scan_s = timed("batch headers + CRC (verify's core)", size, records, scan)
        decode_s = timed("all records decoded", size, records, decode)
        dump_s = timed("dump --format json --deep-iteration", size, records, dump_json)
        print(f"ratios vs the read+CRC limit: scan {limit / scan_s:.2f}x, decode {limit / decode_s:.3f}x, "
              f"dump json {limit / dump_s:.3f}x")


if __name__ == "__main__":
    main()

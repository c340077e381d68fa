"""verify on Spark (`--master local[2]` by default) against one process, on generated segments;
and listing at fleet scale.

    python bench/spark_speedup.py --size 2GiB           # the issue's measurement
    python bench/spark_speedup.py --size 256MiB         # a quick smoke run
    python bench/spark_speedup.py --parts fleet,listing # listing only (below)
    python bench/spark_speedup.py --parts segment --size 2GiB  # one big segment (below)

`segment`: one partition of a single `--size` segment, verified in one process and with --spark
as one task (`spark.kafkalog.rangeBytes=0`, as before segments were split) and cut into byte ranges
(the default: the .log bytes over 4 tasks a core, at least 32 MiB), alternately in one session,
after a small job that starts every core's Python worker; medians of `--repeat`. `--variant prod`
(default) is bench/run.py's production-like segment, indexed by `kafkalog rebuild-index`.

`fleet`: a log dir of `--fleet-partitions` partitions of one small segment each (.log, .index,
.timeindex: 15,000 files for 5,000), verified with --spark as a local path, as a file:// URI (read in
place) and as a file:// URI listed by Spark's JVM and staged by the executors, as hdfs:// is
(spark.kafkalog.stageFileUris=true); the ratios URI / path (goal: <= 1.3).
`listing`: a tree of `--listing-files` files (placeholders: only listed), listed as a file:// URI
the way `verify --spark` lists hdfs:// (`HadoopLayout`: the URI resolved by the JVM, the log dir
listed by the driver, its partition dirs by the executors): microseconds per entry (goal: <= 50),
next to a walk of the same tree with os.scandir in this process.

Generates a log dir of `--partitions` partitions (V2 batches of an idempotent producer per
partition, built with the library's `build_batch`; offset and time indexes as Kafka's append path
writes them; leader-epoch checkpoints; meta.properties) in a temp dir, verifies it with
`Verification` in this process and with `SparkVerification`, checks that both give the same
findings and summary, and prints a markdown table. The session start (JVM, context, package
shipping) is timed apart from the verify jobs; the first job also starts the Python workers and
imports the package there, so it is shown apart from the later ones (median of `--repeat` - 1).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkalog_tools.formats.record_batch import build_batch, build_record  # noqa: E402
from kafkalog_tools.verify import Verification  # noqa: E402

T0 = 1_700_000_000_000
INDEX_INTERVAL = 4096
RECORDS_PER_BATCH = 40


def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMG]i?B?)?", text.strip(), re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text}")
    unit = (match.group(2) or "B")[0].upper()
    return int(float(match.group(1)) * {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[unit])


def generate(root: Path, total: int, partitions: int, segment_bytes: int,
             records_per_batch: int = RECORDS_PER_BATCH) -> tuple[int, int]:
    """Write the log dir; return (bytes of .log written, segments)."""
    (root / "meta.properties").write_text("version=0\nbroker.id=1\n")
    (root / ".kafka_cleanshutdown").write_text("")
    records = [build_record(i, i, f"key-{i}".encode(), (f"value-{i}-".encode() * 40)[:480])
               for i in range(records_per_batch)]
    per_partition = total // partitions
    written = segments = 0
    for number in range(partitions):
        directory = root / f"bench-{number}"
        directory.mkdir()
        (directory / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
        offset, sequence, left = 0, 0, per_partition
        while left > 0:
            size = _write_segment(directory, offset, sequence, min(left, segment_bytes), records, 1000 + number)
            batches = _batches_in(directory / f"{offset:020d}.log")
            offset += batches * len(records)
            sequence += batches * len(records)
            left -= size
            written += size
            segments += 1
    return written, segments


def _write_segment(directory: Path, base: int, sequence: int, budget: int, records: list[bytes],
                   producer_id: int) -> int:
    log, index, timeindex = bytearray(), bytearray(), bytearray()
    offset, since_index = base, 0
    while len(log) < budget:
        timestamp = T0 + offset
        last = offset + len(records) - 1
        batch = build_batch(offset, records, base_timestamp=timestamp, max_timestamp=T0 + last,
                            producer_id=producer_id, producer_epoch=0, base_sequence=sequence + offset - base,
                            partition_leader_epoch=0)
        if since_index > INDEX_INTERVAL:  # LogSegment.append: an entry at the start of the batch
            index += struct.pack(">ii", last - base, len(log))
            timeindex += struct.pack(">qi", T0 + last, last - base)
            since_index = 0
        since_index += len(batch)
        log += batch
        offset = last + 1
    if not timeindex or struct.unpack_from(">q", timeindex, len(timeindex) - 12)[0] < T0 + offset - 1:
        timeindex += struct.pack(">qi", T0 + offset - 1, offset - 1 - base)  # the entry written on roll
    name = f"{base:020d}"
    (directory / f"{name}.log").write_bytes(log)
    (directory / f"{name}.index").write_bytes(index)
    (directory / f"{name}.timeindex").write_bytes(timeindex)
    return len(log)


def _batches_in(log: Path) -> int:
    from kafkalog_tools.formats.segment import SegmentFile

    with SegmentFile(log) as segment:
        return sum(1 for _ in segment.entries())


def generate_placeholders(root: Path, files: int) -> int:
    """A log dir of `files` empty files, three per partition dir; return the entries (files and
    directories) below `root`."""
    partitions = -(-files // 3)
    for number in range(partitions):
        directory = root / f"fleet-{number}"
        directory.mkdir()
        for suffix in (".log", ".index", ".timeindex")[:min(3, files - 3 * number)]:
            (directory / f"{0:020d}{suffix}").touch()
    return partitions + files


def _walk(root: Path) -> int:
    count = 0
    with os.scandir(root) as entries:
        for entry in entries:
            count += 1
            if entry.is_dir(follow_symlinks=False):
                count += _walk(Path(entry.path))
    return count


def speedup(args, root: Path) -> None:
    started = time.perf_counter()
    written, segments = generate(root, args.size, args.partitions, args.segment_size)
    print(f"generated {written / 2**20:,.0f} MiB in {segments} segments of {args.partitions} partitions "
          f"in {time.perf_counter() - started:.1f} s under {root}", file=sys.stderr)

    from kafkalog_tools.spark.session import start_session
    from kafkalog_tools.spark.verify import SparkVerification

    single_times, spark_times = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        single = Verification([str(root)])
        expected = [f.to_json() for f in single]
        single_times.append(time.perf_counter() - started)
    started = time.perf_counter()
    spark = start_session(args.master, {"spark.ui.showConsoleProgress": "false"})
    session_start = time.perf_counter() - started
    cores = spark.sparkContext.defaultParallelism
    try:
        for _ in range(args.repeat):
            started = time.perf_counter()
            on_spark = SparkVerification(spark, [str(root)])
            found = [f.to_json() for f in on_spark]
            spark_times.append(time.perf_counter() - started)
            if found != expected or on_spark.summary != single.summary:
                sys.exit("the Spark findings differ from the single-process findings")
    finally:
        spark.stop()
    one = statistics.median(single_times)
    first, warm = spark_times[0], statistics.median(spark_times[1:] or spark_times)
    print(f"| .log bytes | partitions | segments | findings (errors) | one process | {args.master} ({cores} cores): "
          f"first job / later jobs | session start | speedup (later jobs) | speedup incl. session + first job |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print(f"| {written / 2**20:,.0f} MiB | {args.partitions} | {segments} | {len(expected)} "
          f"({single.summary.errors}) | {one:.1f} s | {first:.1f} s / {warm:.1f} s | {session_start:.1f} s | "
          f"{one / warm:.2f}x | {one / (first + session_start):.2f}x |")


def generate_production_segment(root: Path, size: int) -> int:
    """bench/run.py's `prod` variant (300 idempotent producers interleaved, transactions, five codecs)
    as one segment, indexed by `kafkalog rebuild-index` as Kafka's recovery indexes it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_run", Path(__file__).with_name("run.py"))
    bench_run = sys.modules["bench_run"] = importlib.util.module_from_spec(spec)  # (its dataclasses look it up)
    spec.loader.exec_module(bench_run)
    (root / "meta.properties").write_text("version=0\nbroker.id=1\n")
    partition = root / "bench-prod-0"
    partition.mkdir()
    (partition / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    log = partition / f"{0:020d}.log"
    bench_run.write_segment(log, next(v for v in bench_run.VARIANTS if v.name == "prod"), size)
    import subprocess

    subprocess.run([sys.executable, "-m", "kafkalog_tools", "rebuild-index", "--no-backup", "--format", "json",
                    str(partition)], check=True, stdout=subprocess.DEVNULL, cwd=Path(__file__).resolve().parent.parent)
    return log.stat().st_size


def big_segment(args, root: Path) -> None:
    """verify --spark on one segment of --size bytes: one task for it, then byte ranges."""
    started = time.perf_counter()
    if args.variant == "prod":
        written = generate_production_segment(root, args.size)
    else:
        written, segments = generate(root, args.size, 1, args.size)
        assert segments == 1
    print(f"generated one {args.variant} segment of {written / 2**20:,.0f} MiB in {time.perf_counter() - started:.1f} s "
          f"under {root}", file=sys.stderr)
    warm_up = root.parent / "warm-up"
    warm_up.mkdir()
    generate(warm_up, 8 << 20, 1, 8 << 20)
    from kafkalog_tools.spark.plan import RANGE_BYTES_CONF
    from kafkalog_tools.spark.session import start_session
    from kafkalog_tools.spark.verify import SparkVerification

    single_times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        single = Verification([str(root)])
        expected = [f.to_json() for f in single]
        single_times.append(time.perf_counter() - started)
    # a 2 GiB segment's facts in one task's result (~230 MB pickled) stalled a job with the default 1g
    spark = start_session(args.master, {"spark.ui.showConsoleProgress": "false", "spark.driver.memory": "4g"})
    cores = spark.sparkContext.defaultParallelism
    kinds = (("one task", "0"), ("byte ranges", None))
    times: dict[str, list[float]] = {kind: [] for kind, _ in kinds}
    tasks = {}
    try:
        spark.conf.set(RANGE_BYTES_CONF, str(1 << 20))  # 8 tasks: every core starts its Python worker
        list(SparkVerification(spark, [str(warm_up)]))
        for _ in range(args.repeat):
            for kind, range_bytes in kinds:
                if range_bytes is None:
                    spark.conf.unset(RANGE_BYTES_CONF)
                else:
                    spark.conf.set(RANGE_BYTES_CONF, range_bytes)
                started = time.perf_counter()
                run = SparkVerification(spark, [str(root)])
                found = [f.to_json() for f in run]
                times[kind].append(time.perf_counter() - started)
                tasks[kind] = len(run.units)
                if found != expected or run.summary != single.summary:
                    sys.exit(f"the Spark findings ({kind}) differ from the single-process findings")
    finally:
        spark.stop()
    one = statistics.median(single_times)
    whole, split = (statistics.median(times[kind]) for kind, _ in kinds)
    print(f"| one {args.variant} segment | one process | {args.master} ({cores} cores), one task | speedup | same, "
          f"{tasks['byte ranges']} byte ranges | speedup | ranges / one task |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(f"| {written / 2**20:,.0f} MiB | {one:.1f} s | {whole:.1f} s | {one / whole:.2f}x | {split:.1f} s "
          f"| {one / split:.2f}x | {whole / split:.2f}x |")


def fleet(args, root: Path) -> None:
    """verify --spark over a local path and over its file:// URI, alternately, same session."""
    started = time.perf_counter()
    _, segments = generate(root, args.fleet_partitions, args.fleet_partitions, args.segment_size, records_per_batch=1)
    files = sum(1 for _ in root.rglob("*"))
    print(f"generated {args.fleet_partitions} partitions, {files:,} entries in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    from kafkalog_tools.spark.session import start_session
    from kafkalog_tools.spark.verify import SparkVerification

    from kafkalog_tools.spark.remote import STAGE_FILE_URIS_CONF

    spark = start_session(args.master)
    kinds = (("path", str(root), "false"), ("file:// URI", f"file://{root}", "false"),
             ("file:// URI, staged", f"file://{root}", "true"))  # listed and copied, as hdfs:// is
    times: dict[str, list[float]] = {kind: [] for kind, _, _ in kinds}
    try:
        expected = None
        for _ in range(args.repeat):
            for kind, given, staged in kinds:
                spark.conf.set(STAGE_FILE_URIS_CONF, staged)
                started = time.perf_counter()
                run = SparkVerification(spark, [given])
                found = [f.to_json()["code"] for f in run]
                times[kind].append(time.perf_counter() - started)
                summary = run.summary  # (a new one, added up, each time)
                summary.log_dirs = []  # named by path or by URI, and a lock behind a URI is not probed
                if expected is None:
                    expected = (found, summary)
                elif (found, summary) != expected:
                    sys.exit(f"verify --spark over the {kind} differs")
    finally:
        spark.stop()
    path, uri, staged = (statistics.median(times[kind]) for kind, _, _ in kinds)
    print("| partitions | files | segments | verify --spark, local path | same, file:// URI | ratio (goal <= 1.3) "
          "| file:// URI listed and staged (as hdfs://) | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print(f"| {args.fleet_partitions:,} | {files:,} | {segments:,} | {path:.1f} s | {uri:.1f} s | {uri / path:.2f} "
          f"| {staged:.1f} s | {staged / path:.2f} |")


def listing(args, root: Path) -> None:
    started = time.perf_counter()
    entries = generate_placeholders(root, args.listing_files)
    print(f"generated {entries:,} entries in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    from kafkalog_tools.spark.remote import HadoopLayout
    from kafkalog_tools.spark.session import start_session

    from kafkalog_tools.spark.remote import STAGE_FILE_URIS_CONF

    spark = start_session(args.master, {STAGE_FILE_URIS_CONF: "true"})  # listed through the JVM, as hdfs:// is
    listed, walked = [], []
    try:
        for _ in range(args.repeat):
            started = time.perf_counter()
            layout = HadoopLayout(spark, [f"file://{root}"])
            listed.append(time.perf_counter() - started)
            found = len(layout._dirs) - 1 + len(layout._files)  # every directory but the root, every file
            layout.close()
            if found != entries:
                sys.exit(f"listed {found:,} entries of {entries:,}")
            started = time.perf_counter()
            _walk(root)
            walked.append(time.perf_counter() - started)
    finally:
        spark.stop()
    jvm, local = statistics.median(listed), statistics.median(walked)
    print(f"| entries | listed as a file:// URI ({args.master}) | per entry (goal <= 50 us) | os.scandir walk "
          f"| per entry |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| {entries:,} | {jvm:.2f} s | {jvm / entries * 1e6:.1f} us | {local:.2f} s | {local / entries * 1e6:.1f} us |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="speedup,segment,fleet,listing",
                        help="which measurements, comma-separated")
    parser.add_argument("--size", type=parse_size, default=parse_size("2GiB"), help="bytes of .log (e.g. 256MiB, 2GiB)")
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--segment-size", type=parse_size, default=parse_size("64MiB"))
    parser.add_argument("--variant", choices=("simple", "prod"), default="prod",
                        help="for `segment`: the generated partition's batches (simple: one producer, 40 records "
                             "of 500 B a batch, no codec) or bench/run.py's production-like `prod`")
    parser.add_argument("--fleet-partitions", type=int, default=5000)
    parser.add_argument("--listing-files", type=int, default=100_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", help="generate here (default: a temp dir, removed afterwards)")
    args = parser.parse_args()

    base = Path(args.dir or tempfile.mkdtemp(prefix="kafkalog-spark-bench-"))
    try:
        for part in args.parts.split(","):
            root = base / part / "kafka-logs"
            root.mkdir(parents=True)
            {"speedup": speedup, "segment": big_segment, "fleet": fleet, "listing": listing}[part](args, root)
            shutil.rmtree(base / part, ignore_errors=True)
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

"""verify on Spark (`--master local[2]` by default) against one process, on generated segments;
and listing at fleet scale.

    python bench/spark_speedup.py --size 2GiB           # the issue's measurement
    python bench/spark_speedup.py --size 256MiB         # a quick smoke run
    python bench/spark_speedup.py --parts fleet,listing # listing only (below)
    python bench/spark_speedup.py --parts segment --size 2GiB  # one big segment (below)
    python bench/spark_speedup.py --parts segment --master local[2],standalone  # and on a cluster

`--master` takes masters separated by commas, measured one after the other in the same run, a row
each; `standalone` is a standalone cluster started for the run (bench/spark_cluster.py: a master
and two workers of 1 core and `--worker-memory` each, separate JVMs on 127.0.0.1 with ephemeral
ports, executors of `spark.executor.memory` = the same, running this Python) and stopped at its
end, also on an error or Ctrl-C. The load average (1 minute) at the start and end of each
measurement is printed beside it: the machine may be shared. Executors get a copy of this
installation's compiled kernels (`_kernels_for_executors`), and each session is checked to have
loaded them.

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
import signal
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkalog_tools.formats.record_batch import build_batch, build_record  # noqa: E402
from kafkalog_tools.native.loader import CACHE_VARIABLE  # noqa: E402
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


STANDALONE = "standalone"
SESSION_CONF = {
    "spark.ui.showConsoleProgress": "false",
    # a 2 GiB segment's facts in one task's result (~230 MB pickled) stalled a job with the default
    # 1g; the driver's JVM starts once per process, with the first session's setting
    "spark.driver.memory": "4g",
}


class Masters:
    """The masters of `--master`, a session on each in turn; `standalone` starts the cluster at its
    first use and `close` stops it."""

    def __init__(self, names: str, base: Path, worker_memory: str):
        self.names = [name.strip() for name in names.split(",") if name.strip()]
        self.root = base / "cluster"
        self.kernels = _kernels_for_executors(base / "kernels")
        self.worker_memory = worker_memory
        self.cluster = None
        self.session_start = 0.0
        """Seconds the last session took to start (the cluster's own start not included)."""

    def sessions(self, conf: dict[str, str] | None = None):
        """(name, session) for each master, the session stopped before the next starts."""
        from kafkalog_tools.spark.session import start_session

        for name in self.names:
            settings = {**SESSION_CONF, **(conf or {})}
            if self.kernels:
                settings[f"spark.executorEnv.{CACHE_VARIABLE}"] = str(self.kernels)
            url = name
            if name == STANDALONE:
                url = self._cluster().url
                settings.update({"spark.pyspark.python": sys.executable,  # executors run this Python
                                 "spark.executor.memory": self.worker_memory})
            started = time.perf_counter()
            spark = start_session(url, settings)
            self.session_start = time.perf_counter() - started
            try:
                yield name, spark
                if self.kernels and not executors_have_kernels(spark):  # checked after, not to warm them up
                    sys.exit(f"the executors on {name} had no compiled kernels")
            finally:
                spark.stop()

    def _cluster(self):
        if self.cluster is None:
            from bench.spark_cluster import StandaloneCluster

            self.cluster = StandaloneCluster(self.root, worker_memory=self.worker_memory)
            started = time.perf_counter()
            self.cluster.start()
            print(f"started a standalone cluster at {self.cluster.url} (2 workers, 1 core and {self.worker_memory} "
                  f"each) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        return self.cluster

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
            left = self.cluster.leftovers()
            if left:
                print(f"processes of the standalone cluster still running: {left}", file=sys.stderr)
            shutil.rmtree(self.root, ignore_errors=True)


def _kernels_for_executors(directory: Path) -> Path | None:
    """A kernel cache for the executors, with this installation's compiled kernels (built now if
    need be). Executors import the package from the zip the session ships, so they look for the
    kernels in the user's cache only (`loader.cache_dirs`), where a node has them once a run has
    built them in the background; the bench measures that steady state, without touching the
    user's cache (other runs on the machine use it)."""
    from kafkalog_tools.native import loader

    try:
        loader.load()  # (cached: read; else built, ~20 s of CPU)
    except Exception as exc:  # noqa: BLE001 - then every run reads batch by batch, as it would anyway
        print(f"no compiled kernels ({exc}): every run reads batch by batch", file=sys.stderr)
        return None
    directory.mkdir(mode=0o700, parents=True)
    shutil.copy2(loader.cached_path(), directory)
    return directory


def executors_have_kernels(spark) -> bool:
    def probe(_):
        from kafkalog_tools.native import bulk_scan

        return bulk_scan.kernel() is not None

    cores = spark.sparkContext.defaultParallelism
    return all(spark.sparkContext.parallelize(range(4 * cores), 4 * cores).map(probe).collect())


def label(name: str, spark) -> str:
    cores = spark.sparkContext.defaultParallelism
    return f"{name}, 2 workers × 1 core" if name == STANDALONE else f"{name} ({cores} cores)"


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


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


def speedup(args, root: Path, masters: Masters) -> None:
    started = time.perf_counter()
    written, segments = generate(root, args.size, args.partitions, args.segment_size)
    print(f"generated {written / 2**20:,.0f} MiB in {segments} segments of {args.partitions} partitions "
          f"in {time.perf_counter() - started:.1f} s under {root}", file=sys.stderr)

    from kafkalog_tools.spark.verify import SparkVerification

    single_times = []
    single_load = load()
    for _ in range(args.repeat):
        started = time.perf_counter()
        single = Verification([str(root)])
        expected = [f.to_json() for f in single]
        single_times.append(time.perf_counter() - started)
    one = statistics.median(single_times)
    single_load += f" -> {load()}"
    rows = []
    for name, spark in masters.sessions():
        session_start = masters.session_start
        spark_times = []
        spark_load = load()
        for _ in range(args.repeat):
            started = time.perf_counter()
            on_spark = SparkVerification(spark, [str(root)])
            found = [f.to_json() for f in on_spark]
            spark_times.append(time.perf_counter() - started)
            if found != expected or on_spark.summary != single.summary:
                sys.exit(f"the Spark findings ({name}) differ from the single-process findings")
        first, warm = spark_times[0], statistics.median(spark_times[1:] or spark_times)
        rows.append(f"| {label(name, spark)} | {spark_load} -> {load()} | {first:.1f} s / {warm:.1f} s "
                    f"| {session_start:.1f} s | {one / warm:.2f}x | {one / (first + session_start):.2f}x |")
    print(f"{written / 2**20:,.0f} MiB of .log, {args.partitions} partitions, {segments} segments, {len(expected)} "
          f"findings ({single.summary.errors} errors); one process {one:.1f} s (load {single_load})")
    print("| master | load average | first job / later jobs | session start | speedup (later jobs) "
          "| speedup incl. session + first job |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


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


def big_segment(args, root: Path, masters: Masters) -> None:
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
    from kafkalog_tools.spark.verify import SparkVerification

    single_times = []
    single_load = load()
    for _ in range(args.repeat):
        started = time.perf_counter()
        single = Verification([str(root)])
        expected = [f.to_json() for f in single]
        single_times.append(time.perf_counter() - started)
    one = statistics.median(single_times)
    rows = [f"| one process | {single_load} -> {load()} | {one:.1f} s | | |"]
    kinds = (("one task", "0"), ("byte ranges", None))
    for name, spark in masters.sessions():
        times: dict[str, list[float]] = {kind: [] for kind, _ in kinds}
        tasks = {}
        spark.conf.set(RANGE_BYTES_CONF, str(1 << 20))  # 8 tasks: every core starts its Python worker
        list(SparkVerification(spark, [str(warm_up)]))
        spark_load = load()
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
                    sys.exit(f"the Spark findings ({name}, {kind}) differ from the single-process findings")
        whole, split = (statistics.median(times[kind]) for kind, _ in kinds)
        loads = f"{spark_load} -> {load()}"
        rows.append(f"| {label(name, spark)}, one task | {loads} | {whole:.1f} s | {one / whole:.2f}x | |")
        rows.append(f"| {label(name, spark)}, {tasks['byte ranges']} byte ranges | {loads} | {split:.1f} s "
                    f"| {one / split:.2f}x | {whole / split:.2f}x |")
    print(f"one {args.variant} segment of {written / 2**20:,.0f} MiB, {len(expected)} findings "
          f"({single.summary.errors} errors), the same in every run; medians of {args.repeat}")
    print("| verify | load average | time | speedup over one process | byte ranges / one task |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(rows))


def fleet(args, root: Path, masters: Masters) -> None:
    """verify --spark over a local path and over its file:// URI, alternately, same session."""
    started = time.perf_counter()
    _, segments = generate(root, args.fleet_partitions, args.fleet_partitions, args.segment_size, records_per_batch=1)
    files = sum(1 for _ in root.rglob("*"))
    print(f"generated {args.fleet_partitions} partitions, {files:,} entries in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    from kafkalog_tools.spark.remote import STAGE_FILE_URIS_CONF
    from kafkalog_tools.spark.verify import SparkVerification

    kinds = (("path", str(root), "false"), ("file:// URI", f"file://{root}", "false"),
             ("file:// URI, staged", f"file://{root}", "true"))  # listed and copied, as hdfs:// is
    rows = []
    expected = None
    for name, spark in masters.sessions():
        times: dict[str, list[float]] = {kind: [] for kind, _, _ in kinds}
        spark_load = load()
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
                    sys.exit(f"verify --spark over the {kind} ({name}) differs")
        path, uri, staged = (statistics.median(times[kind]) for kind, _, _ in kinds)
        rows.append(f"| {label(name, spark)} | {spark_load} -> {load()} | {path:.1f} s | {uri:.1f} s "
                    f"| {uri / path:.2f} | {staged:.1f} s | {staged / path:.2f} |")
    print(f"{args.fleet_partitions:,} partitions, {files:,} files, {segments:,} segments")
    print("| master | load average | verify --spark, local path | same, file:// URI | ratio (goal <= 1.3) "
          "| file:// URI listed and staged (as hdfs://) | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


def listing(args, root: Path, masters: Masters) -> None:
    started = time.perf_counter()
    entries = generate_placeholders(root, args.listing_files)
    print(f"generated {entries:,} entries in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    from kafkalog_tools.spark.remote import STAGE_FILE_URIS_CONF, HadoopLayout

    rows = []
    for name, spark in masters.sessions({STAGE_FILE_URIS_CONF: "true"}):  # listed through the JVM, as hdfs:// is
        listed, walked = [], []
        spark_load = load()
        for _ in range(args.repeat):
            started = time.perf_counter()
            layout = HadoopLayout(spark, [f"file://{root}"])
            listed.append(time.perf_counter() - started)
            found = len(layout._dirs) - 1 + len(layout._files)  # every directory but the root, every file
            layout.close()
            if found != entries:
                sys.exit(f"listed {found:,} entries of {entries:,} ({name})")
            started = time.perf_counter()
            _walk(root)
            walked.append(time.perf_counter() - started)
        jvm, local = statistics.median(listed), statistics.median(walked)
        rows.append(f"| {entries:,} | {label(name, spark)} | {spark_load} -> {load()} | {jvm:.2f} s "
                    f"| {jvm / entries * 1e6:.1f} us | {local:.2f} s | {local / entries * 1e6:.1f} us |")
    print("| entries | listed as a file:// URI on | load average | listed | per entry (goal <= 50 us) "
          "| os.scandir walk, same run | per entry |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


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
    parser.add_argument("--master", default="local[2]",
                        help="Spark masters separated by commas, each measured in turn; `standalone`: a cluster of "
                             "two 1-core workers started here for the run")
    parser.add_argument("--worker-memory", default="2g",
                        help="for `standalone`: each worker's memory, all of it its executor's")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", help="generate here (default: a temp dir, removed afterwards)")
    args = parser.parse_args()

    # absolute: executors (on a cluster, in their workers' dirs) read the paths the driver names
    base = Path(args.dir or tempfile.mkdtemp(prefix="kafkalog-spark-bench-")).resolve()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver, as the cluster's JVMs, on 127.0.0.1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped (SIGTERM)"))  # so that the cluster stops too
    masters = Masters(args.master, base, args.worker_memory)
    try:
        for part in args.parts.split(","):
            root = base / part / "kafka-logs"
            root.mkdir(parents=True)
            {"speedup": speedup, "segment": big_segment, "fleet": fleet, "listing": listing}[part](args, root, masters)
            shutil.rmtree(base / part, ignore_errors=True)
    finally:
        masters.close()
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

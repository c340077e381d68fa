"""What `kafkalog report` costs beyond the scan, on a generated log dir of many partitions.

    python bench/report_overhead.py --partitions 100 --segment-size 20MiB --runs 3

Generates, in a temp dir, a log dir of N partitions, each one active segment of 16 KiB
uncompressed batches (bench/run.py's `16k` variant, timestamps growing batch by batch) with the
indexes Kafka's recovery writes (or, with --without-indexes, none), then times, as subprocesses
(medians of --runs runs after one warm-up; wall-clock and CPU seconds): `kafkalog verify` (the
scan the report is built on), `kafkalog report`, and `kafkalog retention` over the whole log dir
(the analysis that read every active segment again from byte 0 before issue 25's change). "Beyond
the scan" is report minus verify, measured in the same run. To compare two versions, run this with
each one's own installation (e.g. a venv with a `pip install` of a `git archive` of the older
commit: an editable install ignores PYTHONPATH). Not a test: nothing here asserts a timing.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run import POOL, VARIANTS, _batch, _timestamped, lookup_timestamp, parse_size, write_segment  # noqa: E402  (bench/run.py)

from kafkalog_tools.recovery import Rebuild, RebuildOptions  # noqa: E402

KAFKALOG = [sys.executable, "-m", "kafkalog_tools"]


def write_log_dir(directory: Path, partitions: int, segment_size: int, indexes: bool, growing: bool) -> int:
    """`partitions` partitions of one active segment each, indexed or not, its timestamps growing
    batch by batch as a producer's do (so the time index has entries up to the end), or with
    bench/run.py's repeating ones (its time index ends within the first MiB); returns the bytes
    written."""
    variant = next(v for v in VARIANTS if v.name == "16k")
    pool = [_batch(variant, seed) for seed in range(POOL)]
    total = 0
    for number in range(partitions):
        partition = directory / f"bench-{number}"
        partition.mkdir(parents=True)
        if not growing:
            write_segment(partition / f"{0:020d}.log", variant, segment_size)
            total += (partition / f"{0:020d}.log").stat().st_size
            continue
        offset = written = 0
        with open(partition / f"{0:020d}.log", "wb") as out:
            while written < segment_size:
                batch = pool[(offset // variant.records_per_batch) % POOL]
                out.write(offset.to_bytes(8, "big") + _timestamped(batch, lookup_timestamp(offset)))
                written += len(batch)
                offset += variant.records_per_batch
        total += written
    if indexes:
        list(Rebuild([directory], RebuildOptions(backup=False)))
    return total


def seconds(argv: list[str], runs: int) -> tuple[float, float]:
    """Medians of wall-clock and CPU (user + system) seconds of `runs` runs, after one warm-up run
    (page cache, kernel cache). CPU time is what to compare on a shared machine: it hardly moves
    with the load; wall time does."""
    walls, cpus = [], []
    for run in range(runs + 1):
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):
            raise SystemExit(f"{' '.join(argv)}: exit {code}")
        if run:
            walls.append(elapsed)
            cpus.append(usage.ru_utime + usage.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--segment-size", type=parse_size, default=parse_size("20MiB"))
    parser.add_argument("--runs", type=int, default=3, help="runs per command; the median is reported")
    parser.add_argument("--without-indexes", action="store_true",
                        help="Only .log files (Kafka's loader recovers each segment before it reads its end).")
    parser.add_argument("--repeating-timestamps", action="store_true",
                        help="bench/run.py's segment as it is: its 64 batches' timestamps repeat, so the time "
                             "index's last entry lies near the start.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafkalog-report-bench-") as work:
        log_dir = Path(work) / "logs"
        total = write_log_dir(log_dir, args.partitions, args.segment_size, not args.without_indexes,
                              not args.repeating_timestamps)
        now = ["--now", "1800000000000"]
        verify = seconds([*KAFKALOG, "verify", "--format", "json", str(log_dir)], args.runs)
        report = seconds([*KAFKALOG, "report", *now, "--output", str(Path(work) / "report.html"), str(log_dir)],
                         args.runs)
        retention = seconds([*KAFKALOG, "retention", "--format", "json", *now, str(log_dir)], args.runs)
        page = (Path(work) / "report.html").stat().st_size
    print(f"{args.partitions} partitions x {args.segment_size / 2**20:g} MiB ({total / 2**30:.2f} GiB, "
          f"{'no index files' if args.without_indexes else 'indexed'}"
          f"{', repeating timestamps' if args.repeating_timestamps else ''}), medians of {args.runs}, wall / CPU seconds: "
          f"verify {verify[0]:.2f} / {verify[1]:.2f}, report {report[0]:.2f} / {report[1]:.2f} (beyond the scan "
          f"{report[0] - verify[0]:.2f} / {report[1] - verify[1]:.2f}), retention {retention[0]:.2f} / "
          f"{retention[1]:.2f}; the page {page:,} bytes")


if __name__ == "__main__":
    main()

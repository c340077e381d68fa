"""verify's worker processes (`verify.parallel`): the same findings, in the same order, and the same
summary as one process, whoever checks which partition - and nothing lost when a worker dies."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kafkalog_tools.formats.logdir import read_log_dir, read_partition_dir
from kafkalog_tools.verify import Verification
from kafkalog_tools.verify.parallel import PartitionJob, PartitionPool, _start_method
from kafkalog_tools.verify.partition import partition_outcome
from kafkalog_tools.verify.segment import check_segment
from kafkalog_tools.formats.record_batch import build_batch, build_record
from tests.conftest import ROOT
from tests.damage import corpus_paths, damaged_copies


def cli(*args, debug: bool = False) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "KAFKALOG_DEBUG"}  # the fuzzer's tests set it
    if debug:
        environment["KAFKALOG_DEBUG"] = "1"
    return subprocess.run([sys.executable, "-m", "kafkalog_tools", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=environment)


def findings(paths, deep=True, jobs=1, max_findings=100) -> tuple[list[dict], dict]:
    run = Verification([str(p) for p in paths], deep=deep, jobs=jobs, max_findings_per_code=max_findings)
    return [finding.to_json() for finding in run], run.summary.to_json()


@pytest.mark.parametrize("deep", [True, False], ids=["deep", "shallow"])
def test_workers_give_one_process_findings_on_the_corpus_and_damaged_copies(tmp_path, deep):
    paths = corpus_paths() + damaged_copies(tmp_path) + [str(ROOT / "fixtures" / "example-logdir")]
    alone = findings(paths, deep, jobs=1, max_findings=2)  # few per code: suppression counts cross partitions
    assert alone[1]["errors"] and alone[1]["suppressed"]  # the comparison covers errors and suppressed findings
    for jobs in (2, 3):
        assert findings(paths, deep, jobs=jobs, max_findings=2) == alone


def test_the_command_line_gives_the_same_bytes_and_exit_code_with_workers(tmp_path):
    paths = damaged_copies(tmp_path)
    alone = cli("verify", "--format", "json", "--jobs", "1", *paths)
    together = cli("verify", "--format", "json", "--jobs", "2", *paths)
    assert alone.returncode == together.returncode == 1
    assert together.stdout == alone.stdout and together.stderr == alone.stderr == ""
    text = cli("verify", "--format", "text", "--jobs", "2", *paths)
    assert text.stdout == cli("verify", "--format", "text", "--jobs", "1", *paths).stdout


def test_jobs_is_checked_and_not_for_spark():
    assert cli("verify", "--jobs", "0", ROOT / "fixtures" / "example-logdir").returncode == 2
    used = cli("verify", "--spark", "--jobs", "2", ROOT / "fixtures" / "example-logdir")
    assert used.returncode == 2 and "--jobs is for checking here" in used.stderr


# A pool driven directly: which process checks what is then known.


def write_partition(directory: Path, batches: int) -> Path:
    directory.mkdir(parents=True)
    with open(directory / "00000000000000000000.log", "wb") as log:
        for offset in range(batches):
            timestamp = 1_700_000_000_000 + offset
            log.write(build_batch(offset, [build_record(0, 0, b"k%d" % offset, b"v" * 100)],
                                  base_timestamp=timestamp, max_timestamp=timestamp))
    return directory


def jobs_of(log_dir: Path) -> list[PartitionJob]:
    return [PartitionJob(p, None, False, sum(s.log.stat().st_size for s in p.segments))
            for p in read_log_dir(log_dir).partitions]


def outcome_here(job: PartitionJob):
    return partition_outcome(job.partition, job.named, True,
                             lambda segment, active, on_batch: check_segment(segment, active, True, None, on_batch))


def plain(outcome) -> tuple:
    return [f.to_json() for f in outcome.findings], outcome.facts, outcome.summary.to_json()


@pytest.fixture
def log_dir(tmp_path) -> Path:
    for number, batches in enumerate([300, 20, 500, 40, 3000]):
        write_partition(tmp_path / "logs" / f"t-{number}", batches)
    return tmp_path / "logs"


def test_a_fresh_process_forks_its_workers_and_they_take_partitions(log_dir, monkeypatch):
    monkeypatch.setenv("KAFKALOG_BULK", "never")  # ours, the first (3,000 batches), outlasts a fork
    first = log_dir / "t-0"
    (first / "00000000000000000000.log").write_bytes((log_dir / "t-4" / "00000000000000000000.log").read_bytes())
    alone = cli("verify", "--format", "json", "--jobs", "1", log_dir)
    together = cli("verify", "--format", "json", "--jobs", "2", log_dir, debug=True)
    assert together.stdout == alone.stdout and together.returncode == alone.returncode
    said = re.search(r"verify: (\d+) of 5 partitions checked by 1 worker process\(es\) \((\w+)\)", together.stderr)
    assert said and int(said[1]) >= 1 and said[2] == "fork", together.stderr


def test_a_process_running_threads_spawns_its_workers():
    started = threading.Event()
    thread = threading.Thread(target=started.wait)
    thread.start()
    try:
        assert _start_method() == "spawn"
    finally:
        started.set()
        thread.join()


def test_while_a_pool_runs_no_process_of_it_maps_pages_ahead_where_it_leaves_no_cpu(log_dir, monkeypatch):
    """A prefetch thread per process, and a scan thread, only add switches where every CPU runs a
    process of ours: the pool says how many scan (to its workers too), and says it no more once closed."""
    from multiprocessing import Array, Pipe

    from kafkalog_tools.formats.segment import SegmentFile
    from kafkalog_tools.native import bulk_scan
    from kafkalog_tools.verify import parallel

    if bulk_scan.kernel() is None:
        pytest.skip("no compiled kernels")
    monkeypatch.setattr(bulk_scan, "SCANNING_PROCESSES", 1)
    cpus = parallel.usable_cpus()
    if cpus < 2:
        pytest.skip("one CPU: nothing to prefetch on")
    log = log_dir / "t-4" / "00000000000000000000.log"
    jobs = jobs_of(log_dir)
    with SegmentFile(log) as segment:
        assert bulk_scan.Reader(segment).prefetch is not None
        pool = PartitionPool(jobs, cpus - 1, deep=True, start_method="spawn")
        try:
            reader = bulk_scan.Reader(segment)
            assert bulk_scan.SCANNING_PROCESSES == cpus and reader.prefetch is None and not reader.on_thread
        finally:
            pool.close()
        reader = bulk_scan.Reader(segment)
        assert bulk_scan.SCANNING_PROCESSES == 1 and reader.prefetch is not None and reader.on_thread
    receiving, sending = Pipe(duplex=False)
    parallel._work(jobs[:1], True, Array("q", [1, 0]), Array("i", 1), 1, sending, cpus)  # (nothing left to take)
    assert bulk_scan.SCANNING_PROCESSES == cpus


# Forked from this test process, whose earlier tests leave thread pools behind, a worker would
# inherit pools without their threads: verify only forks where no thread runs (above), so these spawn.


def test_a_worker_takes_partitions_from_the_back_and_its_outcomes_equal_ours(log_dir):
    jobs = jobs_of(log_dir)
    pool = PartitionPool(jobs, 1, deep=True, start_method="spawn")
    try:
        got = [pool.outcome(index) for index in range(len(jobs))]  # the caller takes none: all the worker's
    finally:
        pool.close()
    assert [plain(outcome) for outcome in got] == [plain(outcome_here(job)) for job in jobs]
    assert list(pool.owners) == [1] * len(jobs)


def test_a_worker_killed_mid_partition_loses_nothing(log_dir, monkeypatch):
    monkeypatch.setenv("KAFKALOG_BULK", "never")  # the worker's 3,000 batches take long enough to stop it inside
    jobs = jobs_of(log_dir)
    pool = PartitionPool(jobs, 1, deep=True, start_method="spawn")
    try:
        deadline = time.monotonic() + 60
        while pool.owners[len(jobs) - 1] != 1 and time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(pool.processes[0].pid, signal.SIGSTOP)
        pool.receive()
        assert len(jobs) - 1 not in pool.outcomes, "the worker finished before it could be stopped"
        os.kill(pool.processes[0].pid, signal.SIGKILL)
        mine = [index for index in range(len(jobs)) if pool.take(index)]
        assert mine == list(range(len(jobs) - 1))
        assert pool.outcome(len(jobs) - 1) is None  # its worker died: the caller checks it
    finally:
        pool.close()


def test_a_worker_killed_mid_run_gives_one_process_findings(log_dir, monkeypatch):
    monkeypatch.setenv("KAFKALOG_BULK", "never")
    alone = findings([log_dir], jobs=1)  # leaves thread pools running: the workers are spawned
    run = Verification([str(log_dir)], jobs=2)
    iterator = iter(run)
    got = [next(iterator).to_json()]  # the log dir's own findings come first; the worker has started
    deadline = time.monotonic() + 60
    while run.pool.owners[len(run.pool.jobs) - 1] != 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    run.pool.processes[0].kill()
    got += [finding.to_json() for finding in iterator]
    assert (got, run.summary.to_json()) == alone


def test_an_exception_in_a_worker_is_raised_where_its_partition_comes(log_dir):
    jobs = jobs_of(log_dir)
    broken = PartitionJob(read_partition_dir(log_dir / "t-0"), None, False, 0)
    object.__setattr__(broken, "partition", None)  # a bug's shape: checking it raises AttributeError
    pool = PartitionPool([jobs[0], broken], 1, deep=True, start_method="spawn")
    try:
        assert pool.take(0)
        with pytest.raises(AttributeError):
            pool.outcome(1)
    finally:
        pool.close()

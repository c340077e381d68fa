"""The mutation fuzzer's short run: a fixed seed, every subcommand, zero failures.

`python -m kafkalog_tools.fuzz` runs the same thing for longer (see its --help). Each case mutates
one seed file of the golden and real corpora (or a synthesized one), lays it out in a hostile log
dir and runs every subcommand on it; a traceback, an exit code other than 0/1/2, a hang, memory
exhaustion, a read-only command writing, or output from beyond a symbolic link fails the run; in a
differential run, also the bulk path (KAFKALOG_BULK=always) differing from the per-batch path (=never).
"""
from __future__ import annotations

import os

import pytest

from kafkalog_tools.native import bulk_scan
from kafkalog_tools.fuzz import runner
from tests.conftest import GOLDEN, REAL

SEED = 20_250_601
CASES = 400


@pytest.mark.parametrize("differential", [False, True], ids=["auto", "differential"])
def test_the_short_fuzz_run_finds_nothing(monkeypatch, differential):
    """The differential run sends the hostile segments through the compiled bulk scan as well as the
    per-batch path, and fails where the two say or write anything different."""
    monkeypatch.delenv(bulk_scan.MODE_VARIABLE, raising=False)
    corpus = [root for root in (GOLDEN, REAL) if root.exists()]  # without it: synthesized seeds only
    report = runner.run(SEED + differential, cases=CASES, corpus=corpus, workers=2, differential=differential)
    print(f"{report.cases} cases, {report.runs} command runs in {report.seconds} s; exit codes {report.exit_codes}; "
          f"peak worker RSS {report.max_rss_mib} MiB; slowest run {report.slowest[0]} s")
    assert report.cases == CASES and report.runs >= 8 * CASES
    assert set(report.runs_per_command) == set(report.commands)  # every subcommand ran
    assert {"0", "1", "2"} <= set(report.exit_codes)  # clean, damaged and unusable inputs all occurred
    assert report.failures == [], "\n".join(
        f"case {f['case']}: {f['failure']}: kafkalog {' '.join(f['argv'])}\n{f.get('detail', '')}"
        for f in report.failures[:5])


def test_a_differential_run_catches_a_bulk_path_that_says_something_else(monkeypatch, tmp_path):
    """A kernel whose every call reports its first batch's max timestamp one higher: the runs that
    reach it with KAFKALOG_BULK=always must fail as `bulk-differs`, saying where they part."""
    if bulk_scan.kernel() is None:
        pytest.skip("no compiled kernels here (no numba to build them): no bulk path to compare")
    read = bulk_scan.Reader._read

    def off_by_one(self, position, deep, legacy_floor, columns):
        n, after, stopped = read(self, position, deep, legacy_floor, columns)
        if n:
            columns[bulk_scan.MAX_TIMESTAMP, 0] += 1
        return n, after, stopped

    monkeypatch.setattr(bulk_scan.Reader, "_read", off_by_one)
    worker = runner.Worker(SEED, [], tmp_path, runner.DEFAULT_TIME_LIMIT, differential=True)

    def timeindex_differs(run) -> bool:  # the time index rebuild-index writes is made of batches' max timestamps
        return run["argv"][0] == "rebuild-index" and "files written differ" in run["detail"] \
            and ".timeindex" in run["detail"]

    failures = []
    for number in range(40):  # until a case draws a rebuild-index that reaches the kernel (case 13 at this seed)
        failures += [run for run in worker.run_case(number)["runs"] if run["failure"]]
        if any(map(timeindex_differs, failures)):
            break
    assert failures and {run["failure"] for run in failures} == {"bulk-differs"}
    assert any(map(timeindex_differs, failures)), failures
    assert all("KAFKALOG_BULK=never and =always differ" in run["detail"] for run in failures)


def test_a_differential_pair_starts_from_the_same_files(tmp_path, monkeypatch):
    """Both runs of a pair see the case as the earlier runs left it, writers included: a clean
    differential run over cases with rebuild-index and simulated compaction finds nothing."""
    monkeypatch.delenv("KAFKALOG_DEBUG", raising=False)
    worker = runner.Worker(SEED, [], tmp_path, runner.DEFAULT_TIME_LIMIT, differential=True)
    results = [worker.run_case(number) for number in range(8)]
    assert "KAFKALOG_DEBUG" not in os.environ  # set while each case ran, for this process's later tests unset again
    runs = [run for result in results for run in result["runs"]]
    assert {run["argv"][0] for run in runs} >= {"rebuild-index", "compaction", "retention", "dump", "verify"}
    assert [run for run in runs if run["failure"]] == []


def test_a_differential_pair_is_compared_without_debug_lines():
    """The differential run sets KAFKALOG_DEBUG (an internal error then escapes as itself), and verify's
    debug line says how many partitions its worker processes took: the first free process takes the
    next, so two runs of a pair may split them differently (a CI rehearsal failed on it). A pair is
    compared on what a user sees; anything else on stderr still counts."""
    from kafkalog_tools.fuzz import runner

    def outcome(stderr: str):
        return runner.Outcome(1, "", runner._without_debug(stderr), {})

    split = "kafkalog: debug: verify: {} of 2 partitions checked by 1 worker process(es) (fork)\nkafkalog: error: x\n"
    assert runner.first_difference(outcome(split.format(0)), outcome(split.format(1))) is None
    assert runner.first_difference(outcome(split.format(0)), outcome("kafkalog: error: y\n")) is not None

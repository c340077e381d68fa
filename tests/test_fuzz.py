"""The mutation fuzzer's short run: a fixed seed, every subcommand, zero failures.

`python -m kafkalog_tools.fuzz` runs the same thing for longer (see its --help). Each case mutates
one seed file of the golden and real corpora (or a synthesized one), lays it out in a hostile log
dir and runs every subcommand on it; a traceback, an exit code other than 0/1/2, a hang, memory
exhaustion, a read-only command writing, or output from beyond a symbolic link fails the run.
"""
from __future__ import annotations

import pytest

from kafkalog_tools.formats import bulk_scan
from kafkalog_tools.fuzz import runner
from tests.conftest import GOLDEN, REAL

SEED = 20_250_601
CASES = 400


@pytest.mark.parametrize("bulk", ["auto", "always"], ids=["auto", "bulk-scan-always"])
def test_the_short_fuzz_run_finds_nothing(monkeypatch, bulk):
    """`always` sends the hostile segments through the compiled bulk scan too (workers inherit it)."""
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, bulk)
    corpus = [root for root in (GOLDEN, REAL) if root.exists()]  # without it: synthesized seeds only
    report = runner.run(SEED + (bulk == "always"), cases=CASES, corpus=corpus, workers=2)
    print(f"{report.cases} cases, {report.runs} command runs in {report.seconds} s; exit codes {report.exit_codes}; "
          f"peak worker RSS {report.max_rss_mib} MiB; slowest run {report.slowest[0]} s")
    assert report.cases == CASES and report.runs >= 8 * CASES
    assert set(report.runs_per_command) == set(report.commands)  # every subcommand ran
    assert {"0", "1", "2"} <= set(report.exit_codes)  # clean, damaged and unusable inputs all occurred
    assert report.failures == [], "\n".join(
        f"case {f['case']}: {f['failure']}: kafkalog {' '.join(f['argv'])}\n{f.get('detail', '')}"
        for f in report.failures[:5])

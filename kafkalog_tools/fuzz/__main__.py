"""`python -m kafkalog_tools.fuzz`: the fuzzer's command line."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import click

from . import runner


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--seed", "run_seed", type=int, default=0, show_default=True,
              help="Run seed: the same seed, case numbers and corpus give the same cases.")
@click.option("--minutes", type=click.FloatRange(min=0), help="Run for this long (default: 1 minute unless --cases).")
@click.option("--cases", type=click.IntRange(min=1), help="Run this many cases (with --minutes: whichever ends first).")
@click.option("--first-case", type=click.IntRange(min=0), default=0, show_default=True,
              help="Number of the first case (to continue an earlier run).")
@click.option("--case", "single_case", type=click.IntRange(min=0),
              help="Rebuild and run only this case here, print its command lines and results (with --keep: "
                   "leave its files in DIR/case-N to reproduce by hand).")
@click.option("--keep", type=click.Path(file_okay=False, path_type=Path), help="With --case: where to leave its files.")
@click.option("--corpus", type=click.Path(exists=True, file_okay=False, path_type=Path), multiple=True,
              help="A directory of Kafka files to take seeds from, read in place (repeatable); e.g. the "
                   "golden and real corpora. Without it only synthesized seeds are used.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes running cases in parallel.")
@click.option("--time-limit", type=click.FloatRange(min=0.1), default=runner.DEFAULT_TIME_LIMIT, show_default=True,
              help="Seconds one command run may take before it counts as a hang.")
@click.option("--memory-limit", type=click.IntRange(min=0), default=runner.DEFAULT_MEMORY_LIMIT, show_default=True,
              help="Address-space limit of a worker in bytes (0: none); exceeding it is a failure.")
@click.option("--differential", is_flag=True,
              help="Run every command line twice, with KAFKALOG_BULK=never and =always (the per-batch path, "
                   "then the compiled kernels wherever they take over), and fail where exit code, output or "
                   "files written differ. Twice the runs; commands that read the clock get --now.")
@click.option("--against-kafka", is_flag=True,
              help="Compare with Kafka's own code instead (the Kafka 4.0 oracle, ../shared/tools/kafka-oracle or "
                   "$KAFKALOG_KAFKA_ORACLE; needs java): mutated segments parsed, dumped (kafka-dump-log) and "
                   "recovered (rebuild-index) by both. Differing cases are saved to --save-dir.")
@click.option("--replay", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="With --against-kafka: run the comparison a saved case records again.")
@click.option("--save-dir", type=click.Path(file_okay=False, path_type=Path),
              help="With --against-kafka: where differing cases are saved (default: $KAFKALOG_KAFKA_DIFF_DIR, else "
                   "kafkalog-kafka-diff in the temp dir).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--worker", is_flag=True, hidden=True)
def command(run_seed, minutes, cases, first_case, single_case, keep, corpus, workers, time_limit, memory_limit,
            differential, against_kafka, replay, save_dir, as_json, worker):
    """Fuzz every kafkalog subcommand with mutated Kafka files.

    Each case takes one seed file (from --corpus, or synthesized: every codec, transactions,
    nested legacy wrappers, decompression bombs), mutates it at its structural boundaries (bit
    flips, truncation at every batch, record and header field, zeroed ranges, inserted garbage,
    absurd lengths and counts, repeated batches, recomputed CRCs), places it in a fresh log dir,
    sometimes with filesystem hazards (empty files, directories and FIFOs named like segments,
    unreadable files, symbolic-link loops, links to devices and out of the tree, names that are not
    UTF-8), and runs every subcommand on it with options drawn from the CLI's own definitions
    (rebuild-index on a copy). A run fails on a traceback, an exit code other than 0/1/2, a hang,
    exhausted memory, a read-only command writing, or output from beyond a symbolic link; with
    --differential also the compiled bulk path saying or writing anything else than the per-batch path.

    Long run, e.g.: python -m kafkalog_tools.fuzz --seed 7 --minutes 60 --workers 2
    --corpus ../shared/corpus/golden --corpus ../shared/corpus/real

    Against Kafka's own code, e.g.: python -m kafkalog_tools.fuzz --against-kafka --seed 7 --minutes 30
    --corpus ../shared/corpus/golden --corpus ../shared/corpus/golden-4.0 --corpus ../shared/corpus/real
    (a difference names the saved case: --against-kafka --replay DIR runs it again).

    Exit codes: 0 no failure; 1 failures (listed, each with its case number to reproduce with
    --case N) or differences from Kafka; 2 usage error, or no java / oracle for --against-kafka.
    """
    if against_kafka:
        sys.exit(_against_kafka(run_seed, minutes, cases, first_case, list(corpus), replay, save_dir, as_json))
    if worker:
        runner.worker_main(run_seed, list(corpus), time_limit, memory_limit, differential)
        return
    if single_case is not None:
        sys.exit(_one_case(run_seed, single_case, list(corpus), time_limit, keep, differential))
    if minutes is None and cases is None:
        minutes = 1.0
    report = runner.run(run_seed, cases=cases, minutes=minutes, corpus=list(corpus), workers=workers,
                        time_limit=time_limit, memory_limit=memory_limit, first_case=first_case,
                        differential=differential)
    if as_json:
        click.echo(json.dumps(report.to_json()))
    else:
        _print_report(report, corpus)
    sys.exit(1 if report.failures else 0)


def _against_kafka(run_seed, minutes, cases, first_case, corpus, replay, save_dir, as_json) -> int:
    from . import against_kafka, oracle

    reason = oracle.unavailable()
    if reason:
        click.echo(f"kafkalog fuzz: {reason}", err=True)
        return 2
    with oracle.Oracle() as kafka, tempfile.TemporaryDirectory(prefix="kafkalog-kafka-") as work:
        if replay is not None:
            found = against_kafka.replay(replay, kafka, Path(work))
            click.echo("\n".join(found) if found else "no difference (any more)")
            return 1 if found else 0
        if minutes is None and cases is None:
            minutes = 1.0
        click.echo(f"seed {run_seed}; differing cases are saved in {save_dir or against_kafka.reproduction_dir()}",
                   err=True)
        report = against_kafka.run(run_seed, corpus=corpus, work_dir=Path(work), orc=kafka, segment_cases=cases,
                                   minutes=minutes, first_case=first_case, save_dir=save_dir,
                                   on_difference=lambda d: click.echo(f"DIFFERENCE {d}", err=True))
    if as_json:
        click.echo(json.dumps({"seed": report.run_seed, "seconds": report.seconds, "compared": report.compared,
                               "details": report.details, "differences": [str(d) for d in report.differences],
                               "open": [str(d) for d in report.open]}))
    else:
        click.echo(report.summary())
    return 1 if report.differences else 0


def _one_case(run_seed: int, number: int, corpus: list[Path], time_limit: float, keep: Path | None,
              differential: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="kafkalog-fuzz-") as work:
        worker = runner.Worker(run_seed, corpus, Path(work), time_limit, differential)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
        result = worker.run_case(number, keep=keep)
    click.echo("\n".join(result["description"]))
    for run in result["runs"]:
        click.echo(f"kafkalog {' '.join(run['argv'])}  -> exit {run['code']} in {run['seconds']} s")
        if run["failure"]:
            click.echo(f"  FAILURE {run['failure']}: {run['detail']}")
    return 1 if any(run["failure"] for run in result["runs"]) else 0


def _print_report(report: runner.Report, corpus) -> None:
    click.echo(f"seed {report.run_seed}: {report.cases} cases, {report.runs} command runs in {report.seconds} s "
               f"({report.seeds} corpus seed files; commands: {', '.join(report.commands)})")
    click.echo(f"runs per command: {report.runs_per_command}; exit codes: {report.exit_codes}")
    click.echo(f"peak worker RSS {report.max_rss_mib} MiB; slowest run {report.slowest[0]} s: "
               f"kafkalog {' '.join(report.slowest[1])}")
    corpus_args = "".join(f" --corpus {c}" for c in corpus) + " --differential" * report.differential
    for failure in report.failures:
        click.echo(f"FAILURE {failure['failure']} in case {failure['case']}: kafkalog {' '.join(failure['argv'])}")
        click.echo(f"  {failure.get('detail', '')}".rstrip())
        click.echo(f"  reproduce: python -m kafkalog_tools.fuzz --seed {report.run_seed} --case {failure['case']}"
                   f"{corpus_args} --keep /tmp/fuzz-case")
    if not report.failures:
        click.echo("no failures")


if __name__ == "__main__":
    command(prog_name="python -m kafkalog_tools.fuzz")

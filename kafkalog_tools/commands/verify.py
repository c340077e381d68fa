"""`kafkalog verify`: the CLI over `kafkalog_tools.verify`."""
from __future__ import annotations

import os
import sys
from contextlib import nullcontext

import click

from .. import verify as v
from ..output.progress import byte_progress
from ..spark.options import PathOrUri, check_spark_usage, spark_options
from . import all_option, format_option, read_as_options, stop_strictly, strict_option
from ..output import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, LineWriter, choose_format, grouped
from ..output.grouped import TextOut


@click.command("verify")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...",
                type=PathOrUri(exists=True, file_okay=True, dir_okay=True))
@format_option(table=False)
@all_option()
@click.option("--shallow", is_flag=True, help="Check batch headers and CRCs only, as Kafka's recovery does; "
                                             "do not decode records or open V0/V1 wrappers.")
@click.option("--max-findings", type=click.IntRange(min=1), default=v.MAX_FINDINGS_PER_CODE, show_default=True,
              help="Findings shown per file and kind; the rest are counted.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Processes checking partitions at once, at most the CPUs this process may use (default: all "
                   "of them, once the logs to check reach 64 MiB; 1: this process only). The findings are the same "
                   "either way.")
@read_as_options
@strict_option("error")
@spark_options("With --spark: also write the findings as Parquet to DIR/findings.")
def command(paths, output_format, every, shallow, max_findings, jobs, read_as, strict, use_spark, master, spark_conf,
            verbose, output):
    """Check segments, partitions or whole log dirs for everything Kafka's own loading would trip
    over - and nothing that Kafka itself wrote and considers valid.

    PATH is a segment file (.log, .index, .timeindex, .txnindex), a partition directory or a log
    directory. Batches (CRC, structure, offsets, epochs, producer state), indexes (by meaning, not
    by byte equality), transaction indexes, snapshots and checkpoints are checked; damage is located
    to the byte and the scan resynchronises past it. Nothing is written.

    The end of each partition's active segment is read as the broker's state says: while a broker
    holds the lock on <log dir>/.lock (probed read-only), a partial or zero-filled end is a write in
    progress (a warning); otherwise it is what Kafka's recovery truncates after a crash (an error,
    truncated-tail, with what it loses). --live / --offline say which instead.

    With --spark the same findings and summary come from Spark executors (segments balanced by
    bytes), followed by a summary per path given; paths are reported absolute. With --spark, PATH
    may also be a Hadoop URI (hdfs://, s3a://, gs://, file://): Spark lists it, executors copy
    each segment's files to local disk while they check them (see the README for what each needs).

    Exit codes: 0 no errors (warnings allowed); 1 errors found; 2 usage error, I/O error or out of memory.
    """
    output_format = choose_format(output_format, tty_default="text")
    if use_spark and jobs is not None:
        raise click.UsageError("--jobs is for checking here; with --spark the cluster's cores share the work")
    conf = check_spark_usage(use_spark, master, spark_conf, output, paths, strict, verbose=verbose)
    spark = None
    if use_spark:
        from ..spark.uri import is_uri
        from ..spark.session import start_session
        from ..spark.verify import SparkVerification

        spark = start_session(master, conf, verbose=verbose)
        run = SparkVerification(spark, [p if is_uri(p) else os.path.abspath(p) for p in paths], deep=not shallow,
                                max_findings_per_code=max_findings, read_as=read_as)
    else:
        run = v.Verification(paths, deep=not shallow, max_findings_per_code=max_findings, read_as=read_as, jobs=jobs)
    shown = []  # (path given, finding) for --output
    try:
        if output_format == "json":
            writer = LineWriter()
            with nullcontext() if spark else byte_progress(None, run, "verifying"):
                for finding in _until_first_error(run) if strict else run:
                    writer.write_json([finding.to_json()])
                    if output:
                        shown.append((run.current_path, finding))
            if spark:
                writer.write_json([{**s.to_json(), "type": "path_summary", "path": path}
                                   for path, s in zip(run.paths, run.target_summaries)])
            writer.write_json([run.summary.to_json()])
        else:
            out = TextOut()
            items = []
            with nullcontext() if spark else byte_progress(out.console, run, "verifying"):
                for finding in _until_first_error(run) if strict else run:
                    if every:
                        out.lines(grouped.item_lines([grouped.verify_item(finding)]))
                    else:
                        items.append(grouped.verify_item(finding))
                    if output:
                        shown.append((run.current_path, finding))
            out.lines(grouped.report_lines(items))
            if spark:
                _print_path_summaries(out, run.paths, run.target_summaries)
            _print_summary(out, run.summary)
        sys.stdout.flush()
        if output:
            from ..spark.schemas import finding_row
            from ..spark.verify import write_findings

            write_findings(spark, [finding_row(path, finding) for path, finding in shown], output)
    finally:
        if spark is not None:
            spark.stop()
    summary = run.summary
    sys.exit(EXIT_USAGE if summary.io_errors else EXIT_PROBLEMS if summary.errors else EXIT_OK)


def _until_first_error(findings):
    for finding in findings:
        yield finding
        if finding.severity == v.ERROR:
            stop_strictly(f"{finding.file}: " + ("" if finding.position is None else f"byte {finding.position}: ")
                          + finding.message)
            return


def _print_path_summaries(out: TextOut, paths: list[str], summaries: list[v.Summary]) -> None:
    out.line("")
    out.line("per path", "bold")
    for path, s in zip(paths, summaries):
        out.line(f"  {path}: {s.partitions:,} partitions, {s.segments:,} segments, {s.batches:,} batches, "
                 f"{s.log_bytes:,} log bytes, {s.damaged_bytes:,} damaged bytes, {s.errors} errors, "
                 f"{s.warnings} warnings", "bold red" if s.errors else None)


def _print_summary(out: TextOut, summary: v.Summary) -> None:
    records = "not decoded (--shallow)" if summary.records is None else f"{summary.records:,}"
    rows = [
        ("partitions", f"{summary.partitions:,}"), ("segments", f"{summary.segments:,}"),
        ("batches", f"{summary.batches:,}"), ("records", records),
        ("log bytes", f"{summary.log_bytes:,}"), ("intact bytes", f"{summary.intact_bytes:,}"),
        ("damaged bytes", f"{summary.damaged_bytes:,}"),
        ("errors", f"{summary.errors:,}"), ("warnings", f"{summary.warnings:,}"), ("infos", f"{summary.infos:,}"),
    ]
    if summary.suppressed:
        rows.append(("not shown", f"{summary.suppressed:,}"))
    for state in summary.log_dirs:
        rows.append(("broker", f"{state['broker']}, read {state['read_as']}: {state['log_dir']} ({state['reason']})"))
    width = max(len(name) for name, _ in rows)
    out.line("")
    out.line("verify", "bold")
    out.lines((f"  {name:{width}}  {value}", "bold red" if name == "errors" and summary.errors else None)
              for name, value in rows)

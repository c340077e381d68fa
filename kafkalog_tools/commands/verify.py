"""`kafkalog verify`: the CLI over `kafkalog_tools.verify`."""
from __future__ import annotations

import sys

import click

from .. import verify as v
from ..output.progress import byte_progress
from ..output import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, LineWriter, choose_format

SEVERITY_STYLE = {v.ERROR: "bold red", v.WARNING: "yellow", v.INFO: "dim"}


@click.command("verify")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...",
                type=click.Path(exists=True, file_okay=True, dir_okay=True))
@click.option("--format", "output_format", type=click.Choice(("text", "json")),
              help="text: findings and a summary for people; json: JSON Lines of findings and a final summary. "
                   "Default: text on a terminal, json on a pipe.")
@click.option("--shallow", is_flag=True, help="Check batch headers and CRCs only; do not decode records.")
@click.option("--max-findings", type=click.IntRange(min=1), default=v.MAX_FINDINGS_PER_CODE, show_default=True,
              help="Findings shown per file and kind; the rest are counted.")
def command(paths, output_format, shallow, max_findings):
    """Check segments, partitions or whole log dirs for everything Kafka's own loading would trip
    over - and nothing that Kafka itself wrote and considers valid.

    PATH is a segment file (.log, .index, .timeindex, .txnindex), a partition directory or a log
    directory. Batches (CRC, structure, offsets, epochs, producer state), indexes (by meaning, not
    by byte equality), transaction indexes, snapshots and checkpoints are checked; damage is located
    to the byte and the scan resynchronises past it. Nothing is written.

    Exit codes: 0 no errors (warnings allowed); 1 errors found; 2 usage or I/O error.
    """
    output_format = choose_format(output_format, tty_default="text")
    run = v.Verification(paths, deep=not shallow, max_findings_per_code=max_findings)
    if output_format == "json":
        writer = LineWriter()
        with byte_progress(None, run, "verifying"):
            for finding in run:
                writer.write_json([finding.to_json()])
        writer.write_json([run.summary.to_json()])
    else:
        from rich.console import Console

        console = Console(highlight=False)
        with byte_progress(console, run, "verifying"):
            for finding in run:
                _print_finding(console, finding)
        _print_summary(console, run.summary)
    sys.stdout.flush()
    summary = run.summary
    sys.exit(EXIT_USAGE if summary.io_errors else EXIT_PROBLEMS if summary.errors else EXIT_OK)


def _print_finding(console, finding: v.Finding) -> None:
    from rich.text import Text

    where = finding.file if finding.position is None else f"{finding.file} @ {finding.position}"
    line = Text()
    line.append(f"{finding.severity:7} ", style=SEVERITY_STYLE[finding.severity])
    line.append(f"{finding.code} ", style="bold")
    line.append(where, style="cyan")
    console.print(line)
    console.print(f"        {finding.message}", style=None if finding.severity != v.INFO else "dim",
                  markup=False)


def _print_summary(console, summary: v.Summary) -> None:
    from rich.table import Table

    table = Table(title="verify", show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(justify="right")
    records = "not decoded (--shallow)" if summary.records is None else f"{summary.records:,}"
    rows = [
        ("partitions", f"{summary.partitions:,}"), ("segments", f"{summary.segments:,}"),
        ("batches", f"{summary.batches:,}"), ("records", records),
        ("log bytes", f"{summary.log_bytes:,}"), ("intact bytes", f"{summary.intact_bytes:,}"),
        ("damaged bytes", f"{summary.damaged_bytes:,}"),
        ("errors", f"[bold red]{summary.errors}[/]" if summary.errors else "0"),
        ("warnings", f"[yellow]{summary.warnings}[/]" if summary.warnings else "0"),
        ("infos", str(summary.infos)),
    ]
    if summary.suppressed:
        rows.append(("not shown", f"{summary.suppressed:,}"))
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)



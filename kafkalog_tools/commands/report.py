"""`kafkalog report`: the CLI over `kafkalog_tools.report`."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import retention
from .. import verify as v
from ..output import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, escape_undecodable
from ..output.progress import byte_progress
from .retention import retention_options


@click.command("report")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...",
                type=click.Path(exists=True, file_okay=True, dir_okay=True))
@click.option("--output", "-o", type=click.Path(dir_okay=False, allow_dash=True), metavar="FILE",
              help="The HTML file to write (replaced whole: written to a temp file, then renamed into place). "
                   "- or none: stdout, unless that is a terminal.")
@retention_options
@click.option("--shallow", is_flag=True, help="Check batch headers and CRCs only (verify --shallow).")
@click.option("--max-findings", type=click.IntRange(min=1), default=v.MAX_FINDINGS_PER_CODE, show_default=True,
              help="Findings kept per file and kind; the rest are counted.")
def command(paths, output, now, retention_ms, retention_bytes, shutdown, shallow, max_findings):
    """Write one self-contained HTML page about the log: verify's summary and findings grouped by
    kind (each linking to its partition), and per partition a segment map (segments to scale by
    bytes, damaged byte ranges, the active segment, indexes present or missing), offsets over time
    (batch timestamps, gaps, timestamps stepping back, leader epochs), producers and transactions,
    and which segments retention deletes next and why (at --now). When several PATHs hold copies of
    one partition (replica dirs from several brokers), where the copies diverge.

    PATH is a segment file, a partition directory or a log directory, as for verify. The page needs
    no network to open: no script, no font, no external URL; pictures are inline SVG. The input is
    never written.

    Exit codes: 0 no errors (warnings allowed); 1 errors found; 2 usage error, I/O error or out of memory.
    """
    from ..report import collect, render, verification, write

    output = output or "-"
    if output == "-" and sys.stdout.isatty():
        raise click.UsageError("the report is a page for a browser: give --output FILE, or redirect stdout")
    if output != "-":
        _check_output(Path(output), paths)
    settings = retention.RetentionSettings(now, retention_ms, retention_bytes, shutdown=shutdown)
    run = verification(list(paths), deep=not shallow, max_findings_per_code=max_findings)
    with byte_progress(None, run, "scanning"):
        result = collect(run, list(paths), settings)
    page = render(result)
    summary = result.summary
    if output == "-":
        escape_undecodable(sys.stdout)
        sys.stdout.write(page)
        sys.stdout.flush()
    else:
        size = write(Path(output), page)
        click.echo(f"kafkalog: wrote {output} ({size:,} bytes): {summary.partitions:,} partitions, "
                   f"{summary.errors:,} errors, {summary.warnings:,} warnings", err=True)
    sys.exit(EXIT_USAGE if summary.io_errors else EXIT_PROBLEMS if summary.errors else EXIT_OK)


def _check_output(target: Path, paths) -> None:
    """The page goes beside the evidence, never into it, and into a directory that exists."""
    parent = target.resolve().parent
    if not parent.is_dir():
        raise click.UsageError(f"--output: the directory {target.parent} does not exist")
    for path in paths:
        source = Path(path).resolve()
        if source.is_dir() and (parent == source or source in parent.parents):
            raise click.UsageError(f"--output {target} is inside the input {path}: write the report elsewhere")

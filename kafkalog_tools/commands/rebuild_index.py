"""`kafkalog rebuild-index`: the CLI over `kafkalog_tools.recovery`."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import recovery
from ..output.progress import byte_progress
from ..output import EXIT_OK, EXIT_PROBLEMS, LineWriter, choose_format
from . import stop_strictly, strict_option


@click.command("rebuild-index")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...",
                type=click.Path(exists=True, file_okay=True, dir_okay=True))
@click.option("--index-interval-bytes", type=click.IntRange(min=0), default=recovery.DEFAULT_INDEX_INTERVAL_BYTES,
              show_default=True, help="The topic's index.interval.bytes (Kafka does not store it on disk).")
@click.option("--truncate", is_flag=True,
              help="Also cut the invalid tail off each .log, as Kafka's recovery does (the old .log is kept as "
                   "a backup unless --no-backup).")
@click.option("--no-backup", is_flag=True, help="Do not keep replaced files as <name>.bak.")
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@click.option("--output-dir", type=click.Path(file_okay=False, writable=True, path_type=Path),
              help="Write the rebuilt files to DIR/<partition dir name>/ and leave the input alone. DIR may not "
                   "lie inside the log dir being read, nor contain it.")
@click.option("--format", "output_format", type=click.Choice(("text", "json")),
              help="text: a human summary; json: JSON Lines. Default: text on a terminal, json on a pipe.")
@strict_option("segment recovery would fail on or cut (without --truncate); nothing is written for it")
def command(paths, index_interval_bytes, truncate, no_backup, dry_run, output_dir, output_format, strict):
    """Regenerate .index, .timeindex and .txnindex from the .log files, byte for byte as Kafka's
    LogSegment.recover writes them.

    PATH is a segment file, a partition directory or a log directory. The transaction index needs
    the producer state before the segment: it is replayed from the partition's first segment, or
    loaded from the latest .snapshot at or before it. Each file is written to a temp file, synced and
    renamed into place, so a crash leaves the old file or the new one; an unchanged file is not
    rewritten.

    Exit codes: 0 done; 1 a .log holds bytes recovery would cut (without --truncate) or recovery
    would fail; 2 usage error, I/O error or out of memory.
    """
    options = recovery.RebuildOptions(index_interval_bytes=index_interval_bytes, truncate=truncate,
                                      backup=not no_backup, dry_run=dry_run, output_dir=output_dir, strict=strict)
    output_format = choose_format(output_format, tty_default="text")
    run = recovery.Rebuild(paths, options)
    console = None
    if output_format == "text":
        from rich.console import Console

        console = Console(highlight=False)
    problems = 0
    totals = {"segments": 0, "written": 0, "unchanged": 0, "truncated_bytes": 0}
    with byte_progress(console, run, "rebuilding"):
        for result in run:
            problems += result.recovery.failure is not None or result.tail_left_in_place
            _count(totals, result)
            if console is None:
                LineWriter().write_json([_segment_json(result)])
            else:
                _print_segment(console, result)
    if run.stopped is not None:
        rec = run.stopped.recovery
        stop_strictly(str(rec.failure if rec.failure is not None else rec.invalid))
    summary = {"type": "summary", "dry_run": dry_run, "problems": problems, **totals}
    if console is None:
        LineWriter().write_json([summary])
    else:
        _print_summary(console, summary)
    sys.stdout.flush()
    sys.exit(EXIT_PROBLEMS if problems else EXIT_OK)


def _count(totals: dict, result: recovery.SegmentRebuild) -> None:
    totals["segments"] += 1
    totals["truncated_bytes"] += result.recovery.truncated_bytes
    for change in result.changes:
        totals["unchanged" if change.action == "unchanged" else "written"] += 1


def _segment_json(result: recovery.SegmentRebuild) -> dict:
    rec = result.recovery
    return {
        "type": "segment",
        "partition": result.partition,
        "segment": rec.log_path,
        "base_offset": rec.base_offset,
        "batches": rec.batches,
        "valid_bytes": rec.valid_bytes,
        "truncated_bytes": rec.truncated_bytes,
        "invalid": _error_json(rec.invalid),
        "failure": _error_json(rec.failure),
        "offset_index_entries": len(rec.offset_entries),
        "time_index_entries": len(rec.time_entries),
        "aborted_transactions": len(rec.aborted_txns),
        "files": [vars(change) for change in result.changes],
        "notes": result.notes,
        "dry_run": result.dry_run,
    }


def _error_json(error) -> dict | None:
    if error is None:
        return None
    return {"position": error.position, "message": error.message, "expected": _plain(error.expected),
            "actual": _plain(error.actual)}


def _plain(value):
    return value if value is None or isinstance(value, (int, float, str, bool)) else str(value)


def _print_segment(console, result: recovery.SegmentRebuild) -> None:
    rec = result.recovery
    name = Path(rec.log_path)
    console.print(f"{name.parent.name}/{name.name}: {rec.batches} batches, {rec.valid_bytes} valid bytes, "
                  f"{len(rec.offset_entries)} offset / {len(rec.time_entries)} time / "
                  f"{len(rec.aborted_txns)} aborted-txn entries", markup=False)
    if rec.failure is not None:
        console.print(f"  recovery would fail, nothing written: {rec.failure}", style="bold red", markup=False)
    if rec.invalid is not None:
        cut = "cut" if not result.tail_left_in_place else "would be cut by Kafka (use --truncate)"
        console.print(f"  {rec.truncated_bytes} invalid bytes from {rec.valid_bytes} {cut}: {rec.invalid.message}",
                      style="yellow", markup=False)
    verb = {"unchanged": "unchanged", "create": "created", "replace": "replaced"}
    dry_verb = {"unchanged": "unchanged", "create": "would be created", "replace": "would be replaced"}
    for change in result.changes:
        text = (dry_verb if result.dry_run else verb)[change.action]
        sizes = (f"{change.old_size} -> {change.new_size} bytes"
                 if change.old_size not in (None, change.new_size) else f"{change.new_size} bytes")
        backup = f", backup {Path(change.backup).name}" if change.backup else ""
        console.print(f"  {Path(change.path).name}: {text} ({sizes}{backup})", markup=False)
    for note in result.notes[1:]:
        console.print(f"  note: {note}", markup=False)


def _print_summary(console, summary: dict) -> None:
    prefix = "dry run: " if summary["dry_run"] else ""
    console.print(f"{prefix}{summary['segments']} segments, {summary['written']} files "
                  f"{'to write' if summary['dry_run'] else 'written'}, {summary['unchanged']} unchanged, "
                  f"{summary['truncated_bytes']} invalid bytes", markup=False)



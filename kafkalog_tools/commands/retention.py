"""`kafkalog retention`: the CLI over `kafkalog_tools.retention`."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import retention
from ..output import LineWriter, choose_format
from ..output.grouped import Item, TextOut
from . import PartitionWalk, all_option, format_option
from .dump import parse_time


def time_option(ctx, param, value):
    """--now: epoch ms or ISO-8601, parsed as every command parses times."""
    return parse_time(value)


def shutdown_option(command):
    """--shutdown: how the broker stopped, which decides how its loader opens the log (retention,
    compaction, report)."""
    return click.option(
        "--shutdown", type=click.Choice((retention.AUTO, retention.CLEAN, retention.UNCLEAN)), default=retention.AUTO,
        show_default=True,
        help="How the broker stopped, which decides how Kafka's loader opens the log at its next start: auto takes "
             "the log dir's .kafka_cleanshutdown marker (a partition copied out of its log dir has none, so it "
             "counts as unclean); unclean recovers every segment from the recovery point first, as after a crash; "
             "clean opens the log as it is.")(command)


def retention_options(command):
    """--now, --retention-ms, --retention-bytes and --shutdown: what retention is judged by (retention, report)."""
    command = shutdown_option(command)
    for option in reversed((
        click.option("--now", callback=time_option, metavar="TIME",
                     help="Evaluate retention at this time (epoch ms or ISO-8601; a time without zone is UTC). "
                          "Default: the current time."),
        click.option("--retention-ms", type=int, default=retention.DEFAULT_RETENTION_MS, show_default=True,
                     help="The topics' retention.ms; -1 switches time retention off."),
        click.option("--retention-bytes", type=int, default=retention.UNLIMITED, show_default=True,
                     help="The topics' retention.bytes per partition; -1 is unlimited."),
    )):
        command = option(command)
    return command


@click.command("retention")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@retention_options
@click.option("--log-start-offset", type=click.IntRange(min=0),
              help="The log start offset. Default: the log dir's log-start-offset-checkpoint entry, never below "
                   "the first segment's base offset.")
@click.option("--high-watermark", type=click.IntRange(min=0),
              help="The high watermark. Default: the log dir's replication-offset-checkpoint entry; without one, "
                   "the log end offset.")
@click.option("--cleanup-policy", type=click.Choice(("delete", "compact", "compact,delete")), default="delete",
              show_default=True, help="The topic's cleanup.policy: without delete only the log start offset applies.")
@format_option()
@all_option()
def command(paths, now, retention_ms, retention_bytes, shutdown, log_start_offset, high_watermark, cleanup_policy,
            output_format, every):
    """Say which segments Kafka's retention would delete now (or at --now), and why: by log start
    offset (the next segment starts at or below it), by size (oldest first while the log exceeds
    retention.bytes by at least the whole segment), by time (now minus the segment's largest
    timestamp exceeds retention.ms). Kafka's rules as of 3.8: the passes run in that order and each
    stops at the first segment it keeps; no segment whose offsets reach the high watermark is
    deleted, nor an empty last segment; a segment's largest timestamp is its time index's last
    entry, else the .log file's modification time (a copy that did not keep mtimes changes it).

    Also lists the .deleted, .cleaned and .swap leftovers of interrupted operations and what Kafka's
    loader does with them at the next start.

    PATH is a partition directory or a log directory (each of its partitions). Nothing is written.

    The log is judged as Kafka's loader opens it at the broker's next start. After a clean shutdown
    (.kafka_cleanshutdown in the log dir, or --shutdown clean) the log end offset is read from the
    active segment's offset index's last entry to the end (damage before it is not read), and a
    segment without .index is recovered first. Without the marker (a broker that died, or a partition
    copied out of its log dir; --shutdown unclean) every segment from the recovery point
    (recovery-point-offset-checkpoint) on is recovered first: a damaged tail is cut, and the
    segments after the first one cut are deleted before any retention pass. A segment whose offsets
    overflow it (KAFKA-6264: more than Int.MaxValue past its base), met by such a recovery, is split
    into pieces as Kafka's loader splits it, and the pieces are judged (copies of them are written to
    a temporary directory while the command runs). Where Kafka's loader or retention pass would throw,
    that is said and nothing is deleted.

    Exit codes: 0 analysed; 1 a checkpoint or segment could not be read, or Kafka would throw; 2 usage error, I/O
    error or out of memory.
    """
    output_format = choose_format(output_format, tty_default="text")
    settings = retention.RetentionSettings(now, retention_ms, retention_bytes, log_start_offset, high_watermark,
                                           tuple(cleanup_policy.split(",")), shutdown)
    walk = PartitionWalk(paths)
    writer = LineWriter() if output_format == "json" else None
    out = TextOut() if output_format == "text" else None
    items: list[Item] = []
    for report in walk.reports(lambda partition: retention.analyze_partition(partition, settings)):
        walk.problems |= bool(report.problems)
        if output_format == "json":
            writer.write_json(report_objects(report))
        elif output_format == "table":
            _print_table(report)
        else:
            out.lines(_partition_lines(report))
            items.extend(_items(report))
    if out is not None:
        out.findings(items, every)
    sys.stdout.flush()
    sys.exit(walk.exit_code)


def report_objects(report: retention.RetentionReport) -> list[dict]:
    out = [{"type": "segment", "partition": report.name, "file": s.file, "base_offset": s.base_offset,
            "upper_bound_offset": s.upper_bound_offset, "size": s.size, "largest_timestamp": s.largest_timestamp,
            "timestamp_source": s.timestamp_source, "deleted": s.deleted, "deleted_by": s.deleted_by,
            "reason": s.reason or None, "kept_because": s.kept_because, "snapshot_deleted": s.snapshot if s.deleted else None}
           for s in report.segments]
    out.extend({"type": "leftover", "partition": report.name, "file": leftover.file, "kind": leftover.kind,
                "action": leftover.action} for leftover in report.leftovers)
    settings = report.settings
    out.append({
        "type": "retention_summary", "partition": report.name, "path": report.path, "now": report.now,
        "retention_ms": settings.retention_ms, "retention_bytes": settings.retention_bytes,
        "cleanup_policy": ",".join(settings.cleanup_policy), "log_start_offset": report.log_start_offset,
        "log_start_offset_source": report.log_start_source, "high_watermark": report.high_watermark,
        "high_watermark_source": report.high_watermark_source, "log_end_offset": report.log_end_offset,
        "size": report.size, "segments": len(report.segments), "deleted_segments": len(report.deleted),
        "deleted_bytes": sum(s.size for s in report.deleted), "new_log_start_offset": report.new_log_start_offset,
        "rolls_new_segment": report.rolled_empty_segment, "new_segment_base_offset": report.rolled_at,
        "notes": report.notes,
        "problems": report.problems,
    })
    return out


def _summary_text(report: retention.RetentionReport) -> str:
    if report.load_failure is not None:
        return (f"{report.name}: Kafka's loader cannot open the log, no retention pass runs; "
                f"{len(report.segments)} segments ({report.size} bytes) kept")
    return (f"{report.name}: {len(report.deleted)} of {len(report.segments)} segments deleted "
            f"({sum(s.size for s in report.deleted)} of {report.size} bytes); log start offset "
            f"{report.log_start_offset} ({report.log_start_source}) -> {report.new_log_start_offset}; "
            f"high watermark {report.high_watermark} ({report.high_watermark_source}); log end offset "
            f"{report.log_end_offset}")


def _partition_lines(report: retention.RetentionReport) -> list[tuple[str, str | None]]:
    lines = [(_summary_text(report), None)]
    lines.extend((f"  delete {Path(s.file).name} ({s.deleted_by}): {s.reason}", "red") for s in report.deleted)
    if report.rolled_empty_segment:
        lines.append((f"  every segment goes: Kafka first rolls a new empty segment at offset {report.rolled_at}", None))
    return lines


def _items(report: retention.RetentionReport) -> list[Item]:
    """Leftovers, notes and problems as grouped findings (notes group by their words)."""
    return ([Item("warning", "leftover", report.name, leftover.file, leftover.action, coded=False)
             for leftover in report.leftovers]
            + [Item("info", "note", report.name, None, note, coded=False) for note in report.notes]
            + [Item("error", "problem", report.name, None, problem, coded=False) for problem in report.problems])


def _print_table(report: retention.RetentionReport) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    table = Table(title=f"{report.path}: retention at {report.now}", title_justify="left")
    for column in ("segment", "bytes", "largest timestamp", "verdict", "why"):
        table.add_column(column, overflow="fold")
    for s in report.segments:
        verdict = Text(f"delete ({s.deleted_by})", style="bold red") if s.deleted else Text("keep", style="green")
        why = s.reason if s.deleted else "; ".join(s.kept_because)
        table.add_row(str(s.base_offset), str(s.size), f"{s.largest_timestamp} ({s.timestamp_source})", verdict, why)
    if table.row_count:
        console.print(table)
    console.print(_summary_text(report), markup=False)
    if report.rolled_empty_segment:
        console.print(f"every segment goes: Kafka first rolls a new empty segment at offset {report.rolled_at}",
                      markup=False)
    for leftover in report.leftovers:
        console.print(Text(f"leftover {leftover.file}: {leftover.action}", style="yellow"))
    for note in report.notes:
        console.print(Text(f"note: {note}", style="yellow"))
    for problem in report.problems:
        console.print(Text(f"problem: {problem}", style="bold red"))

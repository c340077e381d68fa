"""`kafkalog compaction`: the CLI over `kafkalog_tools.compaction`."""
from __future__ import annotations

import sys

import click

from .. import compaction as c
from ..output import LineWriter, choose_format
from ..output.grouped import Item, TextOut
from ..output.jsonl import encode_bytes
from . import PartitionWalk, all_option, format_option
from .retention import shutdown_option, time_option

TOP_KEYS = 20


@click.command("compaction")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--now", callback=time_option, metavar="TIME",
              help="Clean as if at this time (epoch ms or ISO-8601; a time without zone is UTC). Default: now.")
@click.option("--delete-retention-ms", type=click.IntRange(min=0), default=c.DEFAULT_DELETE_RETENTION_MS, show_default=True,
              help="The topic's delete.retention.ms: how long tombstones and markers outlive their first cleaning.")
@click.option("--min-compaction-lag-ms", type=click.IntRange(min=0), default=0, show_default=True,
              help="The topic's min.compaction.lag.ms (Kafka's config refuses a negative one, as this does).")
@click.option("--max-compaction-lag-ms", type=click.IntRange(min=1), default=c.LONG_MAX, show_default=True,
              help="The topic's max.compaction.lag.ms (at least 1, as Kafka's config requires).")
@click.option("--min-cleanable-ratio", type=click.FloatRange(0, 1), default=c.DEFAULT_MIN_CLEANABLE_RATIO, show_default=True,
              help="The topic's min.cleanable.dirty.ratio.")
@click.option("--segment-bytes", type=click.IntRange(min=1), default=c.DEFAULT_SEGMENT_BYTES, show_default=True,
              help="The topic's segment.bytes (how many segments one cleaned segment may merge).")
@click.option("--first-dirty-offset", type=click.IntRange(min=0),
              help="Override the cleaner-offset-checkpoint entry.")
@click.option("--high-watermark", type=click.IntRange(min=0),
              help="The high watermark. Default: the replication-offset-checkpoint entry, else the log end offset.")
@click.option("--offsets", "list_offsets", is_flag=True,
              help="Table output: list every removed offset per segment (JSON always lists them as ranges).")
@click.option("--simulate", is_flag=True, help="Write the partition as this cleaning leaves it to --output-dir.")
@click.option("--output-dir", type=click.Path(file_okay=False), metavar="DIR",
              help="With --simulate: where to write <DIR>/<partition>/ and DIR's cleaner-offset-checkpoint. Must be "
                   "outside the input tree; never written in place.")
@shutdown_option
@format_option()
@all_option()
def command(paths, now, delete_retention_ms, min_compaction_lag_ms, max_compaction_lag_ms, min_cleanable_ratio,
            segment_bytes, first_dirty_offset, high_watermark, list_offsets, simulate, output_dir, shutdown,
            output_format, every):
    """Say what the next run of Kafka's log cleaner would do to a compacted partition (Kafka 3.8's
    rules): the clean and dirty sections (cleaner-offset-checkpoint), the first uncleanable offset
    (last stable offset, active segment, min.compaction.lag.ms), the dirty ratio and whether the
    cleaner would pick the log, each key's versions and how many go, tombstones and their delete
    horizons, null-key records, and the records removed per segment.

    The cleaner works on the log as Kafka's loader opens it: without .kafka_cleanshutdown in the log
    dir (or with --shutdown unclean), recovered from the recovery point (the first segment cut short
    ends the log, the later ones deleted); after a clean shutdown as it is, but for segments without
    their .index; a segment whose offsets overflow it (KAFKA-6264), met by a recovery, split into
    pieces as the loader splits it. Where the loader or the cleaner would throw (the cleaner checks
    no CRC, but reads every batch of the segments it cleans), nothing is cleaned and the run says
    where.

    With --simulate, writes the cleaned partition to --output-dir (batches rebuilt by this
    project's writer, offset and time indexes rebuilt by recovery's rules, each .txnindex as Kafka's
    cleaner leaves it: the entries of the ABORT markers it kept, as they were), plus a
    cleaner-offset-checkpoint there, so the run after it can be simulated on the output with a later
    --now.

    PATH is a partition directory or a log directory (each of its partitions). The input is never
    written.

    Exit codes: 0 analysed; 1 damaged data (Kafka's cleaner would fail on it too); 2 usage error,
    I/O error or out of memory.
    """
    if simulate and not output_dir:
        raise click.UsageError("--simulate needs --output-dir")
    if output_dir and not simulate:
        raise click.UsageError("--output-dir is only used with --simulate")
    output_format = choose_format(output_format, tty_default="text")
    settings = c.CompactionSettings(now, delete_retention_ms, min_compaction_lag_ms, max_compaction_lag_ms,
                                    min_cleanable_ratio, segment_bytes, first_dirty_offset=first_dirty_offset,
                                    high_watermark=high_watermark, shutdown=shutdown)
    def analyze(partition):
        report = c.analyze_partition(partition, settings)
        return report, c.simulate(report, partition, output_dir) if simulate and report.failure is None else None

    walk = PartitionWalk(paths)
    writer = LineWriter() if output_format == "json" else None
    out = TextOut() if output_format == "text" else None
    items: list[Item] = []
    for report, written in walk.reports(analyze):
        walk.problems |= bool(report.problems)
        if output_format == "json":
            writer.write_json(report_objects(report, written))
        elif output_format == "table":
            _print_table(report, written, list_offsets)
        else:
            out.line(_summary_text(report))
            if written:
                out.line(f"  simulated result written to {written}")
            items.extend(_items(report))
    if out is not None:
        out.findings(items, every)
    sys.stdout.flush()
    sys.exit(walk.exit_code)


def _ranges_text(offsets: list[int]) -> str:
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in c.offset_ranges(offsets))


def _key(key: bytes) -> dict:
    text, encoding = encode_bytes(key, "auto")
    return {"key": text, "key_encoding": encoding}


def report_objects(report: c.CompactionReport, written=None) -> list[dict]:
    name = report.name
    out = [{"type": "segment", "partition": name, "file": s.file, "base_offset": s.base_offset, "size": s.size,
            "section": s.section, "records": s.records, "removed": len(s.removed),
            "removed_offsets": c.offset_ranges(s.removed), "cleaned_into": s.group} for s in report.segments]
    out.extend({"type": "key", "partition": name, **_key(k.key), "versions": k.versions,
                "latest_offset": k.latest_offset, "latest_is_tombstone": k.latest_is_tombstone,
                "removed": k.removed} for k in report.keys.values())
    out.extend({"type": "tombstone", "partition": name, "offset": t.offset, **_key(t.key),
                "delete_horizon_ms": t.delete_horizon_ms, "fate": t.fate,
                "new_delete_horizon_ms": t.new_delete_horizon_ms} for t in report.tombstones)
    out.append({
        "type": "compaction_summary", "partition": name, "path": report.path, "now": report.now,
        "log_start_offset": report.log_start_offset, "log_end_offset": report.log_end_offset,
        "high_watermark": report.high_watermark, "high_watermark_source": report.high_watermark_source,
        "last_stable_offset": report.last_stable_offset, "first_dirty_offset": report.first_dirty_offset,
        "first_dirty_offset_source": report.first_dirty_source,
        "first_uncleanable_offset": report.first_uncleanable_offset, "uncleanable_because": report.uncleanable_reason,
        "clean_bytes": report.clean_bytes, "cleanable_bytes": report.cleanable_bytes,
        "dirty_ratio": round(report.dirty_ratio, 6), "would_clean": report.would_clean,
        "would_clean_because": report.clean_reason, "cleaned_up_to": report.end_offset,
        "groups": report.groups, "records_removed": len(report.removed_offsets),
        "null_key_offsets": c.offset_ranges(report.null_key_offsets), "output_dir": str(written) if written else None,
        "notes": report.notes, "problems": report.problems,
    })
    return out


def _summary_text(report: c.CompactionReport) -> str:
    return (f"{report.name}: dirty [{report.first_dirty_offset}, {report.first_uncleanable_offset}) "
            f"({report.first_dirty_source}; uncleanable from {report.first_uncleanable_offset}: "
            f"{report.uncleanable_reason}); clean {report.clean_bytes} B, cleanable {report.cleanable_bytes} B, "
            f"dirty ratio {report.dirty_ratio:.4f}; "
            f"{'the cleaner would run' if report.would_clean else 'the cleaner would not run yet'} "
            f"({report.clean_reason}); {len(report.removed_offsets)} records removed, cleaned up to "
            f"{report.end_offset}; null-key records: {_ranges_text(report.null_key_offsets) or 'none'}")


def _items(report: c.CompactionReport) -> list[Item]:
    """Notes and problems as grouped findings (grouped by their words)."""
    return ([Item("info", "note", report.name, None, note, coded=False) for note in report.notes]
            + [Item("error", "problem", report.name, None, problem, coded=False) for problem in report.problems])


def _print_table(report: c.CompactionReport, written, list_offsets: bool) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    table = Table(title=f"{report.path}: compaction at {report.now}", title_justify="left")
    for column in ("segment", "bytes", "section", "records", "removed", "offsets removed"):
        table.add_column(column, overflow="fold")
    for s in report.segments:
        shown = _ranges_text(s.removed)
        if not list_offsets and len(shown) > 60:
            shown = shown[:57] + "..."
        table.add_row(str(s.base_offset), str(s.size), s.section, str(s.records), str(len(s.removed)), shown)
    console.print(table)
    keys = sorted(report.keys.values(), key=lambda k: (-k.removed, k.latest_offset))[:TOP_KEYS]
    if keys and keys[0].removed:
        key_table = Table(title=f"keys with superseded versions (top {TOP_KEYS})", title_justify="left")
        for column in ("key", "versions", "removed", "latest offset", "latest is tombstone"):
            key_table.add_column(column, overflow="fold")
        for k in keys:
            if k.removed:
                key_table.add_row(_key(k.key)["key"], str(k.versions), str(k.removed), str(k.latest_offset),
                                  "yes" if k.latest_is_tombstone else "")
        console.print(key_table)
    for t in report.tombstones:
        horizon = "none yet" if t.delete_horizon_ms is None else str(t.delete_horizon_ms)
        extra = f", horizon set to {t.new_delete_horizon_ms}" if t.new_delete_horizon_ms is not None else ""
        console.print(f"tombstone at {t.offset} (key {_key(t.key)['key']!r}): delete horizon {horizon}: {t.fate}{extra}",
                      markup=False)
    console.print(_summary_text(report), markup=False)
    if written:
        console.print(f"simulated result written to {written}", markup=False)
    for note in report.notes:
        console.print(Text(f"note: {note}", style="yellow"))
    for problem in report.problems:
        console.print(Text(f"problem: {problem}", style="bold red"))

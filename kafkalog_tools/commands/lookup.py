"""`kafkalog lookup`: the CLI over `kafkalog_tools.lookup`."""
from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

import click

from .. import lookup as lk
from ..output import EXIT_OK, EXIT_PROBLEMS, LineWriter, choose_format
from . import stop_strictly, strict_option

_QUERY_ORDER = "lookup.query_order"


class _QueriesInOrder(click.Command):
    """Remembers the order of --offset and --timestamp on the command line (click groups the
    values of each option), so answers come back in the order asked."""

    def parse_args(self, ctx, args):
        _, _, order = self.make_parser(ctx).parse_args(args=list(args))
        ctx.meta[_QUERY_ORDER] = [param.name for param in order if param.name in ("offsets", "timestamps")]
        return super().parse_args(ctx, args)


def _timestamps(ctx, param, values):
    try:
        return [lk.parse_timestamp(value) for value in values]
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("lookup", cls=_QueriesInOrder)
@click.argument("partition_dir", metavar="PARTITION_DIR", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--offset", "offsets", type=int, multiple=True, help="Find this offset (repeatable).")
@click.option("-t", "--timestamp", "timestamps", multiple=True, callback=_timestamps,
              help="Find the first record at or after this time: epoch milliseconds or ISO-8601 (UTC when no "
                   "zone is given). Repeatable.")
@click.option("--explain", is_flag=True, help="Say how each answer was found: segment, index entries, bytes scanned.")
@click.option("--scan", is_flag=True, help="Do not use the indexes: scan the segments (a cross-check).")
@click.option("--format", "output_format", type=click.Choice(("text", "json")),
              help="text for people, json for JSON Lines. Default: text on a terminal, json on a pipe.")
@strict_option("problem: damaged data in the way, or a broken index that would make it scan instead")
def command(partition_dir, offsets, timestamps, explain, scan, output_format, strict):
    """Find records by offset or timestamp the way Kafka's read path does, offline.

    By offset: the segment with the largest base offset <= N, its offset index, a scan to the first
    batch whose last offset >= N, then the record. By timestamp: the first segment whose largest
    timestamp >= T, its time index, its offset index, a scan to the first record (in offset order)
    with a timestamp >= T. One answer per query, in the order given. Missing or broken indexes make
    it scan instead, with a warning. Nothing is written.

    Exit codes: 0 every query answered (found or not); 1 damaged data stood in the way; 2 usage or
    I/O error.
    """
    order = click.get_current_context().meta.get(_QUERY_ORDER, [])
    if not order:
        raise click.UsageError("give at least one --offset or --timestamp")
    values = {"offsets": iter(offsets), "timestamps": iter(timestamps)}
    queries = [lk.Query(lk.OFFSET if name == "offsets" else lk.TIMESTAMP, next(values[name])) for name in order]
    output_format = choose_format(output_format, tty_default="text")
    damaged = False
    writer = LineWriter()
    with lk.PartitionReader(partition_dir, use_indexes=not scan) as reader:
        for query in queries:
            answer = reader.lookup(query)
            damaged |= answer.damaged
            if output_format == "json":
                writer.write_json([answer.to_json(explain)])
            else:
                _print_answer(answer, explain)
            if strict and (answer.damaged or answer.warnings):
                sys.stdout.flush()
                stop_strictly(answer.reason if answer.damaged else answer.warnings[0])
                damaged = True
                break
    sys.stdout.flush()
    sys.exit(EXIT_PROBLEMS if damaged else EXIT_OK)


def _print_answer(answer: lk.Answer, explain: bool) -> None:
    asked = f"{answer.query.kind} {answer.query.value}"
    if answer.query.kind == lk.TIMESTAMP:
        asked += f" ({_iso(answer.query.value)})"
    if answer.found:
        control = f", {answer.control} marker" if answer.control else ""
        click.echo(f"{asked}: offset {answer.offset}, {answer.timestamp_type} {answer.timestamp} "
                   f"({_iso(answer.timestamp)}){control}")
        epoch = "" if answer.leader_epoch is None else f", leader epoch {answer.leader_epoch}"
        click.echo(f"  {Path(answer.segment).name} byte {answer.batch_position}: batch "
                   f"{answer.batch_base_offset}..{answer.batch_last_offset} ({answer.batch_size} bytes){epoch}")
    else:
        click.secho(f"{asked}: not found: {answer.reason}", fg="red" if answer.damaged else None)
    for warning in answer.warnings:
        click.secho(f"  warning: {warning}", fg="yellow")
    if explain:
        for step in answer.explanation:
            click.echo(f"  - {step}")


def _iso(millis: int | None) -> str:
    if millis is None or millis < 0:
        return "no timestamp"
    try:
        moment = datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
    except (ValueError, OverflowError, OSError):  # a damaged timestamp beyond year 9999
        return "not a date"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

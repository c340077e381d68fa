"""`kafkalog txns`: the CLI over `kafkalog_tools.txns`."""
from __future__ import annotations

import sys

import click

from .. import txns
from ..output import LineWriter, choose_format
from ..output.grouped import Item, TextOut, short_place
from . import PartitionWalk, all_option, format_option


@click.command("txns")
@click.argument("paths", nargs=-1, required=True, metavar="PARTITION_DIR...")
@format_option()
@all_option()
def command(paths, output_format, every):
    """List, per producer, the transactions of each partition: committed, aborted, and open at the
    end of the log (hanging), with their offsets, sizes and durations, and the partition's last
    stable offset.

    PARTITION_DIR is a partition directory (a log directory stands for all of its partitions). The
    producer state is replayed from the first segment, or loaded from a .snapshot at its base offset,
    as Kafka's loader does. Every aborted transaction is checked against the .txnindex of the segment
    holding its ABORT marker (first offset and last stable offset); differences are findings.

    Exit codes: 0 clean; 1 findings of severity error; 2 usage error, I/O error or out of memory.
    """
    output_format = choose_format(output_format, tty_default="text")
    walk = PartitionWalk(paths)
    writer = LineWriter() if output_format == "json" else None
    out = TextOut() if output_format == "text" else None
    items: list[Item] = []
    for result in walk.reports(txns.analyze_partition):
        walk.problems |= result.has_errors
        if output_format == "json":
            writer.write_json(partition_objects(result))
        elif output_format == "table":
            _print_table(result)
        else:
            out.lines(_partition_lines(result))
            items.extend(_items(result))
    if out is not None:
        out.findings(items, every)
    sys.stdout.flush()
    sys.exit(walk.exit_code)


# ---------------------------------------------------------------------------------------------
# JSON Lines
# ---------------------------------------------------------------------------------------------


def transaction_object(partition: str, txn: txns.Transaction) -> dict:
    return {
        "type": "transaction", "partition": partition, "producer_id": txn.producer_id,
        "producer_epoch": txn.producer_epoch, "state": txn.state, "first_offset": txn.first_offset,
        "last_offset": txn.last_offset if txn.last_offset >= 0 else None, "marker_offset": txn.marker_offset,
        "marker_epoch": txn.marker_epoch, "coordinator_epoch": txn.coordinator_epoch,
        "records": txn.records, "batches": txn.batches, "bytes": txn.bytes,
        "start_timestamp": txn.start_timestamp, "end_timestamp": txn.end_timestamp,
        "duration_ms": txn.duration_ms, "last_stable_offset": txn.last_stable_offset, "complete": txn.complete,
    }


def partition_objects(result: txns.PartitionTransactions) -> list[dict]:
    out = [transaction_object(result.name, t) for t in result.transactions]
    out.append({
        "type": "partition_summary", "partition": result.name, "path": result.path,
        "log_start_offset": result.log_start_offset, "log_end_offset": result.log_end_offset,
        "last_stable_offset": result.last_stable_offset, "committed": result.count(txns.COMMITTED),
        "aborted": result.count(txns.ABORTED), "open": result.count(txns.OPEN), "producers": result.producers,
        "producer_state_origin": result.origin, "exact": result.exact, "findings": len(result.findings),
    })
    out.extend({"type": "finding", "partition": result.name, "severity": f.severity, "kind": f.kind,
                "message": f.message, "file": f.path, "position": f.position, "producer_id": f.producer_id,
                "offset": f.offset} for f in result.findings)
    return out


# ---------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------


def _summary_text(result: txns.PartitionTransactions) -> str:
    return (f"{result.name}: {result.count(txns.COMMITTED)} committed, {result.count(txns.ABORTED)} aborted, "
            f"{result.count(txns.OPEN)} open; last stable offset {_text(result.last_stable_offset)}, "
            f"log end offset {_text(result.log_end_offset)} ({result.origin})")


def _partition_lines(result: txns.PartitionTransactions) -> list[tuple[str, str | None]]:
    lines = [(_summary_text(result), None)]
    lines.extend((f"  open: producer {t.producer_id} epoch {t.producer_epoch} from offset {t.first_offset} "
                  f"({t.records} records)", "bold red") for t in result.transactions if t.state == txns.OPEN)
    return lines


def _items(result: txns.PartitionTransactions) -> list[Item]:
    return [Item(f.severity, f.kind, result.name,
                 short_place(f.path, f.position) if f.path else None if f.offset is None else f"offset {f.offset}",
                 f.message) for f in result.findings]


# ---------------------------------------------------------------------------------------------
# Table
# ---------------------------------------------------------------------------------------------

_STATE_STYLE = {txns.COMMITTED: "green", txns.ABORTED: "yellow", txns.OPEN: "bold red"}


def _text(value) -> str:
    return "-" if value is None else str(value)


def _print_table(result: txns.PartitionTransactions) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    table = Table(title=f"{result.path}: transactions", title_justify="left")
    for column in ("producer", "epoch", "state", "first", "last", "marker", "records", "batches", "bytes",
                   "duration ms", "LSO at abort"):
        table.add_column(column, overflow="fold")
    for t in result.transactions:
        epoch = str(t.producer_epoch) if t.marker_epoch in (None, t.producer_epoch) else \
            f"{t.producer_epoch}->{t.marker_epoch}"
        table.add_row(str(t.producer_id), epoch, Text(t.state, style=_STATE_STYLE[t.state]), str(t.first_offset),
                      _text(t.last_offset if t.last_offset >= 0 else None), _text(t.marker_offset), str(t.records),
                      str(t.batches), str(t.bytes), _text(t.duration_ms), _text(t.last_stable_offset))
    if table.row_count:
        console.print(table)
    console.print(_summary_text(result), highlight=False)
    for f in result.findings:
        where = f" {f.path}" + (f" byte {f.position}" if f.position is not None else "") if f.path else ""
        style = "red" if f.severity == txns.ERROR else "yellow"
        console.print(Text(f"{f.severity}: {f.kind}:{where}: {f.message}", style=style))

"""`kafkalog diverge`: the CLI over `kafkalog_tools.diverge`."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import diverge as dv
from ..errors import InputError, KafkaLogError
from ..output import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, LineWriter, choose_format
from ..output.grouped import Item, TextOut
from . import all_option, format_option


@click.command("diverge")
@click.argument("paths", nargs=-1, required=True, metavar="REPLICA_DIR REPLICA_DIR...")
@click.option("--leader", metavar="REPLICA_DIR",
              help="The replica that is or becomes the leader. Default: the one with the highest leader epoch, "
                   "then the longest log.")
@format_option()
@all_option()
def command(paths, leader, output_format, every):
    """Compare copies of one partition taken from several brokers: per replica its log end offset,
    last leader epoch, which offsets each epoch holds, where it diverges from the leader, and the
    records a follower truncation would remove when that leader leads (Kafka 3.8's leader-epoch
    rules, KIP-101/279: OffsetsForLeaderEpoch end offsets; a replica without epochs truncates to its
    high watermark; a truncation removes the whole batch holding the truncation offset).

    Each REPLICA_DIR is a partition directory; the leader-epoch-checkpoint gives its epochs (when it
    is missing they are derived from the batches, and the output says so), the log dir's
    replication-offset-checkpoint its high watermark. Nothing is written.

    Exit codes: 0 analysed; 1 damaged data in a replica; 2 usage error, I/O error or out of memory.
    """
    if len(paths) < 2:
        raise click.UsageError("diverge needs at least two replica directories")
    output_format = choose_format(output_format, tty_default="text")
    try:
        result = dv.analyze(list(paths), leader)
    except InputError as exc:
        click.echo(f"kafkalog: error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except KafkaLogError as exc:
        click.echo(f"kafkalog: error: {exc}", err=True)
        sys.exit(EXIT_PROBLEMS)
    if output_format == "json":
        LineWriter().write_json(result_objects(result))
    elif output_format == "table":
        _print_table(result)
    else:
        _print_text(result, every)
    sys.stdout.flush()
    sys.exit(EXIT_PROBLEMS if result.has_problems else EXIT_OK)


def result_objects(result: dv.Divergence) -> list[dict]:
    out = []
    for r in result.replicas:
        out.extend({"type": "epoch_range", "replica": r.path, "epoch": epoch, "start_offset": start,
                    "end_offset": end} for epoch, start, end in r.epoch_ranges())
        out.append({
            "type": "replica", "replica": r.path, "partition": r.name, "is_leader": r.is_leader,
            "log_start_offset": r.log_start_offset, "log_end_offset": r.log_end_offset,
            "high_watermark": r.high_watermark, "last_epoch": r.last_epoch, "epoch_source": r.epoch_source,
            "epochs": [list(e) for e in r.epochs], "divergence_offset": r.truncation_offset,
            "first_difference": r.first_difference, "truncation_steps": r.truncation_steps,
            "records_at_risk": r.records_at_risk,
            "at_risk": [{"epoch": e, "first_offset": a, "last_offset": b, "records": n}
                        for e, a, b, n in r.at_risk_by_epoch()],
            "committed_at_risk": (r.truncation_offset is not None and r.high_watermark is not None
                                  and r.truncation_offset < r.high_watermark),
            "notes": r.notes, "problems": r.problems,
        })
    out.append({"type": "diverge_summary", "leader": result.leader.path, "leader_because": result.leader_reason,
                "new_leader_epoch": result.new_epoch, "replicas": len(result.replicas),
                "records_at_risk": sum(r.records_at_risk for r in result.replicas), "notes": result.notes})
    return out


def _text(value) -> str:
    return "-" if value is None else str(value)


def _label(path: str) -> str:
    """The broker's log dir and the partition dir: what tells copies of one partition apart."""
    return "/".join(Path(path).parts[-2:])


def _print_text(result: dv.Divergence, every: bool) -> None:
    out = TextOut()
    out.line(f"leader: {_label(result.leader.path)} ({result.leader_reason})", "bold")
    items: list[Item] = []
    for r in result.replicas:
        at_risk = "; ".join(f"epoch {e}: {a}-{b} ({n})" for e, a, b, n in r.at_risk_by_epoch())
        out.line(f"{_label(r.path)}{' (leader)' if r.is_leader else ''}: log end {r.log_end_offset}, "
                 f"HW {_text(r.high_watermark)}, last epoch {_text(r.last_epoch)} ({r.epoch_source}), diverges at "
                 f"{_text(r.truncation_offset)}, records at risk: {at_risk or 'none'}",
                 "bold red" if at_risk else None)
        out.lines((f"  {step}", None) for step in r.truncation_steps)
        if r.first_difference is not None:
            out.line(f"  batches first differ from the leader's at offset {r.first_difference}")
        if r.truncation_offset is not None and r.high_watermark is not None and r.truncation_offset < r.high_watermark:
            items.append(Item("error", "committed-at-risk", _label(r.path), f"offset {r.truncation_offset}",
                              f"truncation below its high watermark {r.high_watermark}: committed records would be "
                              f"lost (only an unclean election allows this)"))
        items += [Item("info", "note", _label(r.path), None, note, coded=False) for note in r.notes]
        items += [Item("error", "problem", _label(r.path), None, problem, coded=False) for problem in r.problems]
    items += [Item("info", "note", None, None, note, coded=False) for note in result.notes]
    out.findings(items, every)


def _print_table(result: dv.Divergence) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    table = Table(title=f"replicas (leader: {_label(result.leader.path)}, {result.leader_reason})",
                  title_justify="left")
    for column in ("replica", "log end", "HW", "last epoch", "epochs (start..end)", "diverges at", "records at risk"):
        table.add_column(column, overflow="fold")
    for r in result.replicas:
        epochs = ", ".join(f"{e}:{a}..{b}" for e, a, b in r.epoch_ranges())
        at_risk = "; ".join(f"epoch {e}: {a}-{b} ({n})" for e, a, b, n in r.at_risk_by_epoch())
        name = Text(_label(r.path) + (" (leader)" if r.is_leader else ""), style="bold" if r.is_leader else "")
        risk = Text(at_risk or "none", style="bold red" if at_risk else "green")
        table.add_row(name, str(r.log_end_offset), _text(r.high_watermark), _text(r.last_epoch),
                      f"{epochs} ({r.epoch_source})", _text(r.truncation_offset), risk)
    console.print(table)
    for r in result.replicas:
        for step in r.truncation_steps:
            console.print(f"{_label(r.path)}: {step}", markup=False)
        if r.first_difference is not None:
            console.print(f"{_label(r.path)}: batches first differ from the leader's at offset {r.first_difference}",
                          markup=False)
        if r.truncation_offset is not None and r.high_watermark is not None and r.truncation_offset < r.high_watermark:
            console.print(Text(f"{_label(r.path)}: truncation below its high watermark {r.high_watermark}: committed records "
                               f"would be lost (only an unclean election allows this)", style="bold red"))
        for note in r.notes:
            console.print(Text(f"{_label(r.path)}: note: {note}", style="yellow"))
        for problem in r.problems:
            console.print(Text(f"{_label(r.path)}: problem: {problem}", style="bold red"))
    for note in result.notes:
        console.print(Text(f"note: {note}", style="yellow"))

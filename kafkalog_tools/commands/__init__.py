"""The subcommands, one thin module each (see cli.py), and the options several of them share."""
from __future__ import annotations

from typing import Callable, Iterable, Iterator, TypeVar

import click

from ..errors import InputError, KafkaLogError
from ..output import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE

Report = TypeVar("Report")


def strict_option(what: str):
    """--strict: stop at the first problem (exit 1) instead of reporting every one and going on."""
    return click.option("--strict", is_flag=True,
                        help=f"Stop at the first {what}, with its message and exit 1. Default: report every "
                             "problem and go on.")


def read_as_options(function):
    """--live / --offline: how to read the end of each partition's active segment, whatever the
    broker lock of its log dir says (default: live while a broker holds `<log dir>/.lock`)."""
    function = click.option("--offline", "read_as", flag_value="offline",
                            help="Read every log dir as a stopped broker's: a partial or zero-filled end of an "
                                 "active segment is what Kafka's recovery truncates (an error, truncated-tail).")(function)
    return click.option("--live", "read_as", flag_value="live",
                        help="Read every log dir as a running broker's (e.g. a copy of one): a partial or zero-filled "
                             "end of an active segment is a write in progress (a warning). Default: live only while "
                             "a broker holds the lock on <log dir>/.lock.")(function)


def stop_strictly(message: str) -> None:
    click.echo(f"kafkalog: stopped at the first problem (--strict): {message}", err=True)


class PartitionWalk:
    """The loop of the per-partition commands (txns, retention, compaction): every partition named
    by PATH... analysed in turn. A path or partition that cannot be read is a one-line error and the
    walk goes on; `exit_code` folds what happened into the documented codes."""

    def __init__(self, paths: Iterable[str]):
        self.paths = paths
        self.usage = self.problems = False

    def reports(self, analyze: Callable[..., Report]) -> Iterator[Report]:
        from ..txns import partitions_of

        for path in self.paths:
            try:
                partitions = list(partitions_of([path]))
            except InputError as exc:
                self._error(exc, usage=True)
                continue
            for partition in partitions:
                try:
                    yield analyze(partition)
                except InputError as exc:
                    self._error(exc, usage=True)
                except KafkaLogError as exc:
                    self._error(exc, usage=False)

    def _error(self, exc: KafkaLogError, usage: bool) -> None:
        click.echo(f"kafkalog: error: {exc}", err=True)
        if usage:
            self.usage = True
        else:
            self.problems = True

    @property
    def exit_code(self) -> int:
        return EXIT_USAGE if self.usage else EXIT_PROBLEMS if self.problems else EXIT_OK


def format_option(table: bool = True):
    """--format, the one vocabulary: text for people, json for scripts, table where the output is one."""
    choices = ("text", "json", "table") if table else ("text", "json")
    return click.option("--format", "output_format", type=click.Choice(choices),
                        help="text: for people (findings grouped by kind); json: JSON Lines"
                             + ("; table: rich tables" if table else "")
                             + ". Default: text on a terminal, json on a pipe.")


def all_option():
    """--all: the text output lists every finding instead of grouping them by kind."""
    return click.option("--all", "every", is_flag=True,
                        help="text: list every finding, note and problem in full instead of grouped by kind.")

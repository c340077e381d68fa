"""Findings for people: grouped by kind first (the shape of the problem), then the errors in full.

A hundred partitions missing the same index make one group of one line - severity, code, how many, in
how many partitions, the first few places and one explanation - not a hundred. Every command that
reports findings, notes or problems (verify, txns, retention, compaction, diverge) hands them here as
`Item`s. `TextOut` writes the lines: on a terminal styled and wrapped to its width, elsewhere (a file,
a pipe) as plain full lines that never wrap.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import PurePath
from typing import IO, Iterable

from . import LineWriter

SEVERITY_ORDER = ("error", "warning", "info")
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}
FIRST_PLACES = 3
"""Places shown per group; the rest are counted."""

_PARTITION_DIR = re.compile(r".+-\d+(\.[0-9a-f]+-(delete|future|stray))?$")
_NUMBER = re.compile(r"\d+")


@dataclass
class Item:
    """One finding, note or problem, as the grouped text shows it."""

    severity: str
    code: str
    partition: str | None
    """The partition it concerns (None: a log dir's own file, or a whole run)."""
    place: str | None
    """Where: a file, `file @ byte`, an offset; None when the partition is the place."""
    message: str
    coded: bool = True
    """False for free-text notes: those group by the message's shape (its words without numbers)."""

    @property
    def group_key(self) -> tuple:
        return (self.severity, self.code) if self.coded else (self.severity, self.code, _NUMBER.sub("#", self.message))


def partition_of(path: str) -> str | None:
    """The partition directory a file or directory path lies in, by Kafka's naming (topic-N)."""
    pure = PurePath(path)
    for part in (pure.name, pure.parent.name):
        if _PARTITION_DIR.match(part):
            return part
    return None


def short_place(path: str, position: int | None = None) -> str:
    """`partition/file @ byte`: the two last parts tell places apart without the whole path."""
    pure = PurePath(path)
    shown = str(PurePath(pure.parent.name, pure.name)) if pure.parent.name else pure.name
    return shown if position is None else f"{shown} @ {position}"


@dataclass
class Group:
    items: list[Item]

    @property
    def first(self) -> Item:
        return self.items[0]

    @property
    def partitions(self) -> int:
        return len({item.partition for item in self.items if item.partition is not None})


def groups(items: Iterable[Item]) -> list[Group]:
    """Items by kind: errors first, then warnings, then infos; the largest group first within each."""
    by_key: dict[tuple, Group] = {}
    for item in items:
        by_key.setdefault(item.group_key, Group([])).items.append(item)
    rank = {severity: n for n, severity in enumerate(SEVERITY_ORDER)}
    return sorted(by_key.values(), key=lambda g: (rank.get(g.first.severity, len(rank)), -len(g.items), g.first.code))


def group_lines(items: list[Item], first_places: int = FIRST_PLACES) -> list[tuple[str, str | None]]:
    """(line, style) per line: each group's header, its first places, one explanation."""
    lines: list[tuple[str, str | None]] = []
    for group in groups(items):
        head = group.first
        count = len(group.items)
        where = f" in {group.partitions} partition{'s' if group.partitions != 1 else ''}" if group.partitions else ""
        lines.append((f"{head.severity:7} {head.code}: {count}{where}", SEVERITY_STYLE.get(head.severity)))
        places = [item.place or item.partition for item in group.items if item.place or item.partition]
        if places:
            more = f" (+{len(places) - first_places} more)" if len(places) > first_places else ""
            lines.append(("        at " + ", ".join(places[:first_places]) + more, "cyan"))
        lines.append((f"        {head.message}", None))
    return lines


def item_lines(items: Iterable[Item]) -> list[tuple[str, str | None]]:
    """Every item in full: severity, code and where on one line, the message on the next."""
    lines: list[tuple[str, str | None]] = []
    for item in items:
        where = item.place or item.partition or ""
        lines.append((f"{item.severity:7} {item.code} {where}".rstrip(), SEVERITY_STYLE.get(item.severity)))
        lines.append((f"        {item.message}", "dim" if item.severity == "info" else None))
    return lines


def report_lines(items: list[Item], every: bool = False, heading: str = "findings by kind") -> list[tuple[str, str | None]]:
    """The grouped view then the errors in full, or with `every` each item as it came."""
    if not items:
        return []
    if every:
        return item_lines(items)
    lines = [(heading, "bold"), *group_lines(items)]
    errors = [item for item in items if item.severity == "error"]
    if errors:
        lines += [("", None), (f"errors in full ({len(errors)})", "bold red"), *item_lines(errors)]
    return lines


class TextOut:
    """Lines for people. On a terminal through rich: styled, wrapped at the terminal's width. Off a
    terminal plain text, each line whole (a path split at column 80 cannot be searched for)."""

    def __init__(self, stream: IO | None = None):
        self.stream = stream or sys.stdout
        self.console = None
        if getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console

            self.console = Console(file=self.stream, highlight=False)
        else:
            self.writer = LineWriter(self.stream)

    def lines(self, lines: Iterable[tuple[str, str | None]]) -> None:
        if self.console is None:
            self.writer.write_lines([text for text, _ in lines])
            return
        from rich.text import Text

        for text, style in lines:
            self.console.print(Text(text, style=style or ""))  # Text: a file name may hold [markup]

    def findings(self, items: list[Item], every: bool = False) -> None:
        """After what came before: the items grouped (or every one), when there are any."""
        if items:
            self.lines([("", None), *report_lines(items, every)])

    def line(self, text: str = "", style: str | None = None) -> None:
        self.lines([(text, style)])

    def flush(self) -> None:
        self.stream.flush()


def verify_item(finding) -> Item:
    """A `verify.Finding` as an item (txns' findings have the same fields under other names)."""
    return Item(finding.severity, finding.code, partition_of(finding.file),
                short_place(finding.file, finding.position), finding.message)

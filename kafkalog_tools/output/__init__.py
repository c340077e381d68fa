"""Output by context: a rich table or summary on a terminal, JSON Lines on a pipe or on request.

Decoding never prints and printing never decodes: commands hand plain dicts (JSON Lines) or
pre-rendered lines (kafka-dump-log text) to the writers here.
"""
from __future__ import annotations

import codecs
import json
import select
import sys
from itertools import chain
from typing import IO, Iterable

EXIT_OK = 0
EXIT_PROBLEMS = 1
"""Problems were found in the data (corrupt batches, bad indexes, ...)."""
EXIT_USAGE = 2
"""Bad arguments, or input that cannot be read at all."""

FORMATS = ("text", "json", "table")


def choose_format(requested: str | None, stream: IO | None = None, tty_default: str = "table") -> str:
    """The user's choice, else `tty_default` on a terminal and JSON Lines on a pipe."""
    if requested:
        return requested
    stream = stream or sys.stdout
    return tty_default if getattr(stream, "isatty", lambda: False)() else "json"


def json_line(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def escape_undecodable(stream: IO) -> None:
    """File names that are not UTF-8 arrive as surrogate escapes: write them as \\udcXX, whatever the
    locale (strict would crash, surrogateescape would emit bytes that are not UTF-8 in JSON)."""
    if callable(getattr(stream, "reconfigure", None)):
        stream.reconfigure(errors="backslashreplace")


class LineWriter:
    """Writes lines to a text stream as UTF-8, replacing what UTF-8 cannot carry; or lines already
    encoded to the bytes beneath it."""

    def __init__(self, stream: IO | None = None):
        self.stream = stream or sys.stdout
        escape_undecodable(self.stream)
        self.binary = getattr(self.stream, "buffer", None)
        self.text_written = False
        """Since the text layer was last flushed: it must be before bytes go beneath it."""

    @property
    def utf8(self) -> bool:
        """Whether UTF-8 bytes written beneath the text layer (`write_block`) are what it would write."""
        encoding = getattr(self.stream, "encoding", None)
        return self.binary is not None and encoding is not None and codecs.lookup(encoding).name == "utf-8"

    def write_lines(self, lines: Iterable[str]) -> None:
        lines = lines if isinstance(lines, list) else list(lines)
        if lines:  # one write per call: each write is a system call on an unbuffered stdout (python -u)
            self.stream.write("\n".join(chain(lines, ("",))))  # ending in "\n" without a copy of it all
            self.text_written = True

    def write_block(self, data: bytes | memoryview) -> None:
        """Lines as UTF-8, each ending in a newline (`jsonl.block`), without decoding and encoding them
        again in the text layer."""
        if not data:
            return
        if self.binary is None:
            self.write_lines([bytes(data[:-1]).decode()])
            return
        if self.text_written:
            self.stream.flush()
            self.text_written = False
        view = memoryview(data)
        while view:  # an unbuffered stdout (python -u) is a raw file, whose writes may be partial
            try:
                written = self.binary.write(view)
            except BlockingIOError as exc:  # a buffered one, non-blocking and full: part may be taken
                written = exc.characters_written
            if not written:  # a non-blocking one that is full (a raw one says None): wait, not spin
                select.select([], [self.binary], [])
                continue
            view = view[written:]
        if getattr(self.stream, "line_buffering", False):  # a terminal: lines show as they come, as text does
            self.binary.flush()

    def write_json(self, objects: Iterable[dict]) -> None:
        self.write_lines(json_line(obj) for obj in objects)

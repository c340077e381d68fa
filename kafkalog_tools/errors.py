"""Errors that carry their context: which file, which byte, what was expected, what was found.

Every problem the library detects in data is a `KafkaLogError`; the CLI turns them into messages
and exit codes and never into tracebacks. Problems with the data itself are `CorruptDataError`
(exit 1); problems reaching the data (missing files, permissions, bad arguments) are
`InputError`, which is also an `OSError` so callers may catch either (exit 2).
"""
from __future__ import annotations

import os


class KafkaLogError(Exception):
    """A problem with a Kafka log file, located as precisely as we can."""

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike | None = None,
        position: int | None = None,
        expected: object = None,
        actual: object = None,
    ):
        super().__init__(message)
        self.message = message
        self.path = os.fspath(path) if path is not None else None
        self.position = position
        self.expected = expected
        self.actual = actual

    def located(self, path: str | os.PathLike | None = None, position: int | None = None):
        """Fill in a location the raiser could not know (e.g. a file-relative position)."""
        if self.path is None and path is not None:
            self.path = os.fspath(path)
        if self.position is None and position is not None:
            self.position = position
        return self

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path)
        if self.position is not None:
            where.append(f"byte {self.position}")
        text = ": ".join(where + [self.message]) if where else self.message
        if self.expected is not None or self.actual is not None:
            text += f" (expected {self.expected}, found {self.actual})"
        return text


class CorruptDataError(KafkaLogError):
    """The bytes are not what Kafka would have written or could read."""


class TruncatedError(CorruptDataError):
    """The data ends before a structure it starts is complete."""


class DecompressionError(CorruptDataError):
    """A compressed payload cannot be decompressed, or would decompress beyond the limit."""


class InputError(KafkaLogError, OSError):
    """The input cannot be read at all: missing, unreadable, or not what the user said it is."""

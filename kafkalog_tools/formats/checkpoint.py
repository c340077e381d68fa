"""Text checkpoint files: `recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
`log-start-offset-checkpoint`, `cleaner-offset-checkpoint` (entries `topic partition offset`) in a
log dir, and `leader-epoch-checkpoint` (entries `epoch startOffset`) in a partition dir.

Source: server-common/.../CheckpointFile.java, OffsetCheckpointFile, LeaderEpochCheckpointFile.
Line 1 is the version (0), line 2 the entry count, then one entry per line. An empty file, or one
holding only a version line, has no entries.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..errors import CorruptDataError
from .index_file import read_index_bytes

OFFSET_CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
)
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
VERSION = 0
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    path: str
    version: int | None
    entries: list[tuple]


def parse(text: str, fields: int, path: str) -> Checkpoint:
    """Entries as tuples of `fields` values (the last ones integers), with Kafka's checks."""
    lines = text.splitlines()
    if not lines or (len(lines) == 1 and not lines[0].strip()):
        return Checkpoint(path, None, [])
    try:
        version = int(lines[0].strip())
    except ValueError:
        raise CorruptDataError(f"Malformed version line {lines[0]!r}", path=path, position=0) from None
    if version != VERSION:
        raise CorruptDataError(f"Unrecognised version:{version}", path=path, position=0, expected=VERSION, actual=version)
    if len(lines) == 1:
        return Checkpoint(path, version, [])
    try:
        expected = int(lines[1].strip())
    except ValueError:
        raise CorruptDataError(f"Malformed entry count line {lines[1]!r}", path=path) from None
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        parts = _WHITESPACE.split(line.strip())
        if len(parts) != fields:
            raise CorruptDataError(f"Malformed line {number} in checkpoint file: {line!r}", path=path,
                                   expected=f"{fields} fields", actual=len(parts))
        try:
            entries.append(tuple(parts[:-2]) + tuple(int(p) for p in parts[-2:]))
        except ValueError:
            raise CorruptDataError(f"Malformed line {number} in checkpoint file: {line!r}", path=path) from None
    if len(entries) != expected:
        raise CorruptDataError(f"Expected [{expected}] entries in checkpoint file [{path}], but found only [{len(entries)}]",
                               path=path, expected=expected, actual=len(entries))
    return Checkpoint(path, version, entries)


def _read_text(path: str) -> str:
    return read_index_bytes(path).decode("utf-8", "replace")


def read_offsets(path: str | os.PathLike) -> dict[tuple[str, int], int]:
    """An offset checkpoint as {(topic, partition): offset}."""
    path = os.fspath(path)
    return {(topic, partition): offset for topic, partition, offset in parse(_read_text(path), 3, path).entries}


def partition_offset(partition_path: str | os.PathLike, topic_partition: tuple[str, int], name: str) -> int | None:
    """A partition's entry in the offset checkpoint `name` of its log dir (the partition dir's
    parent); None when the file or the entry is absent. A malformed file raises CorruptDataError."""
    path = os.path.join(os.path.dirname(os.path.abspath(os.fspath(partition_path))), name)
    if not os.path.isfile(path):
        return None
    return read_offsets(path).get(topic_partition)


def read_leader_epochs(path: str | os.PathLike) -> list[tuple[int, int]]:
    """A leader-epoch checkpoint as [(epoch, start offset)] in file order."""
    path = os.fspath(path)
    return [tuple(e) for e in parse(_read_text(path), 2, path).entries]


def format_offsets(entries: dict[tuple[str, int], int]) -> str:
    body = "".join(f"{topic} {partition} {offset}\n" for (topic, partition), offset in entries.items())
    return f"{VERSION}\n{len(entries)}\n{body}"


def format_leader_epochs(entries: list[tuple[int, int]]) -> str:
    return f"{VERSION}\n{len(entries)}\n" + "".join(f"{epoch} {offset}\n" for epoch, offset in entries)

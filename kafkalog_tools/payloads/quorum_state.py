"""The KRaft `quorum-state` file: a replica's election state for `__cluster_metadata`.

Implements `org.apache.kafka.raft.FileQuorumStateStore` (Kafka 3.8.0) reading
`raft/src/main/resources/common/message/QuorumStateData.json`: the file's first line is one JSON
object, the generated `QuorumStateDataJsonConverter` output plus a `"data_version"` field.

- v0 (kraft.version 0): clusterId, leaderId, leaderEpoch, votedId, appliedOffset, currentVoters
  (a nullable list of {"voterId"}). Kafka writes clusterId "" and appliedOffset 0.
- v1 (kraft.version 1, KIP-853): leaderId, leaderEpoch, votedId, votedDirectoryId (a Uuid;
  AAAAAAAAAAAAAAAAAAAAAA when the vote carries no directory).

Every field of the file's version is mandatory, as in Kafka; fields of the other version are
ignored. Numbers must be JSON integers in the field's range.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from ..formats.segment import open_readonly
from . import PayloadError

# ---------------------------------------------------------------------------------------------
# Schema: field, type, versions it exists in
# ---------------------------------------------------------------------------------------------

FILE_NAME = "quorum-state"  # FileQuorumStateStore.DEFAULT_FILE_NAME
MAX_LINE = 1 << 20
"""Bytes read for the first line: a real one is under 1 KiB; a huge file without newlines stays cheap."""
DATA_VERSION = "data_version"

QUORUM_STATE_FIELDS = (
    ("clusterId", "string", (0,)),
    ("leaderId", "int32", (0, 1)),
    ("leaderEpoch", "int32", (0, 1)),
    ("votedId", "int32", (0, 1)),
    ("votedDirectoryId", "uuid", (1,)),
    ("appliedOffset", "int64", (0,)),
    ("currentVoters", "[]Voter", (0,)),
)
_INT_RANGES = {"int16": 16, "int32": 32, "int64": 64}
_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}(==)?")  # java.util.Base64 URL alphabet, 16 bytes


# ---------------------------------------------------------------------------------------------
# Typed record
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QuorumState:
    data_version: int
    leader_id: int
    """-1 when no leader is known."""
    leader_epoch: int
    voted_id: int
    """-1 when the replica has not voted in this epoch."""
    cluster_id: str | None = None
    """v0 only."""
    applied_offset: int | None = None
    """v0 only."""
    current_voters: tuple[int, ...] | None = None
    """v0 only; None when the file stores null."""
    voted_directory_id: str | None = None
    """v1 only: the voted replica's directory Uuid."""


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------


def read_quorum_state(path: str | os.PathLike) -> QuorumState:
    """Read a `quorum-state` file; PayloadError, naming the file, when it is malformed."""
    fd, _ = open_readonly(path)  # an InputError for a FIFO, directory or missing file
    with os.fdopen(fd, "rb") as file:
        first_line = file.readline(MAX_LINE)
    try:
        return parse_quorum_state(first_line.decode("utf-8"))
    except UnicodeDecodeError as exc:  # Kafka's reader rejects malformed UTF-8 too
        raise PayloadError(f"{os.fspath(path)}: quorum-state is not UTF-8: {exc}") from None
    except PayloadError as exc:
        raise PayloadError(f"{os.fspath(path)}: {exc}") from None


def parse_quorum_state(text: str) -> QuorumState:
    """Parse the JSON object a `quorum-state` file holds on its first line."""
    first_line = text.splitlines()[0] if text else ""
    if not first_line:
        raise PayloadError("quorum-state is empty (File ended prematurely.)")
    try:
        node = json.loads(first_line)
    except ValueError as exc:
        raise PayloadError(f"quorum-state is not JSON: {exc}") from None
    if not isinstance(node, dict):
        raise PayloadError(f"quorum-state holds {type(node).__name__} {first_line!r}, not an "
                           "object")
    if DATA_VERSION not in node:
        raise PayloadError(f"quorum-state has no {DATA_VERSION} field")
    version = _integer(node[DATA_VERSION], DATA_VERSION, "int16")
    if version not in (0, 1):
        raise PayloadError(f"quorum-state {DATA_VERSION} {version} is not 0 or 1")

    values = {}
    for name, kind, versions in QUORUM_STATE_FIELDS:
        if version not in versions:
            continue
        if name not in node:
            raise PayloadError(f"quorum-state v{version} has no {name!r} field, which is "
                               "mandatory in that version")
        values[name] = _field(node[name], name, kind)
    return QuorumState(
        data_version=version,
        leader_id=values["leaderId"],
        leader_epoch=values["leaderEpoch"],
        voted_id=values["votedId"],
        cluster_id=values.get("clusterId"),
        applied_offset=values.get("appliedOffset"),
        current_voters=values.get("currentVoters"),
        voted_directory_id=values.get("votedDirectoryId"),
    )


def _field(node: object, name: str, kind: str) -> object:
    if kind in _INT_RANGES:
        return _integer(node, name, kind)
    if kind == "string":
        if not isinstance(node, str):
            raise PayloadError(f"quorum-state {name} must be a string, found {node!r}")
        return node
    if kind == "uuid":
        if not isinstance(node, str) or not _UUID_TEXT.fullmatch(node):
            raise PayloadError(f"quorum-state {name} must be a Kafka Uuid (22 characters of "
                               f"URL-safe base64), found {node!r}")
        return node[:22]
    return _voters(node, name)


def _voters(node: object, name: str) -> tuple[int, ...] | None:
    if node is None:  # currentVoters is nullable
        return None
    if not isinstance(node, list) or not all(isinstance(voter, dict) and "voterId" in voter
                                             for voter in node):
        raise PayloadError(f"quorum-state {name} must be a list of {{\"voterId\": n}} objects, "
                           f"found {node!r}")
    return tuple(_integer(voter["voterId"], f"{name}.voterId", "int32") for voter in node)


def _integer(node: object, name: str, kind: str) -> int:
    bits = _INT_RANGES[kind]
    if isinstance(node, bool) or not isinstance(node, int):
        raise PayloadError(f"quorum-state {name} must be an integer, found {node!r}")
    if not -(1 << (bits - 1)) <= node < 1 << (bits - 1):
        raise PayloadError(f"quorum-state {name} {node} does not fit a {bits}-bit integer")
    return node

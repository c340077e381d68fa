"""`meta.properties` (log dir root) and `partition.metadata` (partition dir).

Sources: metadata/.../properties/MetaProperties.java (a Java Properties file: V0 ZooKeeper mode
with broker.id and optional cluster.id; V1 KRaft with node.id and cluster.id; directory.id since
3.7) and storage/.../PartitionMetadataFile.java (`version: 0` and `topic_id: <Uuid>` lines).
"""
from __future__ import annotations

import os
import re

from ..errors import CorruptDataError
from ..protocol import uuid_from_text
from .index_file import read_index_bytes

_PARTITION_METADATA_LINE = re.compile(r":\s+")
_PROPERTY_SEPARATOR = re.compile(r"\s*[=:]\s*|\s+")
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def parse_properties(text: str) -> dict[str, str]:
    """The subset of java.util.Properties syntax that Properties.store writes."""
    props = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        separator = _PROPERTY_SEPARATOR.search(stripped)
        if separator:
            props[stripped[: separator.start()]] = stripped[separator.end() :]
        else:
            props[stripped] = ""
    return props


def read_meta_properties(path: str | os.PathLike) -> dict[str, str]:
    path = os.fspath(path)
    props = parse_properties(read_index_bytes(path).decode("latin-1"))
    if "version" not in props:
        raise CorruptDataError("meta.properties has no version", path=path, expected="version=0 or 1", actual=None)
    return props


def read_partition_metadata(path: str | os.PathLike) -> dict[str, str]:
    """{'version': '0', 'topic_id': '<Uuid>'}, checked as PartitionMetadataReadBuffer does."""
    path = os.fspath(path)
    values = {}
    for number, line in enumerate(read_index_bytes(path).decode("utf-8", "replace").splitlines(), start=1):
        parts = _PARTITION_METADATA_LINE.split(line.strip(), maxsplit=1)
        if len(parts) != 2:
            raise CorruptDataError(f"Malformed line {number}: {line!r}", path=path, expected="'name: value'")
        values[parts[0]] = parts[1]
    if values.get("version") != "0":
        raise CorruptDataError("Unrecognized version of partition metadata file", path=path,
                               expected="version: 0", actual=values.get("version"))
    topic_id = values.get("topic_id")
    try:
        uuid_from_text(topic_id or "")
    except ValueError:
        raise CorruptDataError("topic_id is not a Kafka Uuid", path=path, expected="22 base64 characters",
                               actual=topic_id) from None
    if topic_id == ZERO_UUID:
        raise CorruptDataError("topic_id is the zero Uuid", path=path, actual=topic_id)
    return values

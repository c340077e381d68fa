"""Internal-topic records written by a newer Kafka: values whose version no decoder here knows.

Such a value is read with the newest layout we know, as Kafka's generated readers read it, and its
decoder marks it with `read_as_version`. This collects them per kind and version over a
partition's segments, for `verify` to report once each rather than once a record.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..errors import KafkaLogError
from ..formats.segment import SegmentFile
from . import PayloadError, decoder_for_topic


@dataclass
class NewerVersion:
    kind: str
    """The record type as the decoder names it ("share_update", "TOPIC_RECORD", ...)."""
    version: int
    read_as: int
    """The layout it was read with: the newest known."""
    count: int
    file: str
    """Where the first one is: its segment, batch position and offset."""
    position: int
    offset: int


def newer_versions(topic: str, logs: Iterable[Path], every_record: bool = False) -> list[NewerVersion]:
    """Records of `topic` (by its decoder) whose value version is newer than any known, by kind
    and version. Batches that cannot be read are skipped: reporting them is verify's other work.
    Only the records whose version fields the decoder does not know are decoded, unless
    `every_record` (the reference the tests hold that to)."""
    decoder = decoder_for_topic(topic)
    if decoder is None:
        return []
    found: dict[tuple[str, int], NewerVersion] = {}
    known = None if every_record else decoder.value_version_known
    for log in logs:
        with SegmentFile(log) as segment:
            for batch in segment.batches():
                if batch.is_control:
                    continue
                try:
                    records = batch.records()
                except KafkaLogError:
                    continue
                for record in records:
                    if known is not None and known(record.key, record.value):
                        continue
                    try:
                        decoded = decoder.decode(record.key, record.value, offset=record.offset)
                    except PayloadError:
                        continue
                    value = decoded.value
                    if not isinstance(value, dict) or "read_as_version" not in value:
                        continue
                    key = decoded.key if isinstance(decoded.key, dict) else {}
                    kind = str(value.get("type") or key.get("type") or topic)
                    entry = found.get((kind, value["version"]))
                    if entry is None:
                        found[kind, value["version"]] = NewerVersion(kind, value["version"], value["read_as_version"],
                                                                     1, str(log), batch.position, record.offset)
                    else:
                        entry.count += 1
    return list(found.values())

"""Batches tests build again and again, from the formats' own build side."""
from __future__ import annotations

from pathlib import Path

from kafkalog_tools.formats.batch import Batch
from kafkalog_tools.formats.control import CONTROL_KEY, END_TXN_MARKER
from kafkalog_tools.formats.record_batch import (ATTR_CODEC, ATTR_CONTROL, ATTR_TRANSACTIONAL, HEADER_SIZE, build_batch,
                                                 build_record)
from kafkalog_tools.formats.segment import SegmentFile


def transaction_marker(offset: int, control_type: int, producer_id: int, producer_epoch: int, timestamp: int,
                       coordinator_epoch: int = 0) -> bytes:
    """A transaction marker batch as Kafka writes it (`control_type` 0 ABORT, 1 COMMIT)."""
    record = build_record(0, 0, CONTROL_KEY.build(dict(version=0, type=control_type)),
                          END_TXN_MARKER.build(dict(version=0, coordinator_epoch=coordinator_epoch)))
    return build_batch(offset, [record], attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_timestamp=timestamp, max_timestamp=timestamp)


def corpus_payloads(root: Path, codec_id: int) -> list[bytes]:
    """The compressed payloads of the V2 batches of `codec_id` in the segments under `root`."""
    payloads = []
    for path in sorted(root.rglob("*.log")):
        with SegmentFile(path) as segment:
            for entry in segment.entries():
                if isinstance(entry, Batch) and entry.magic == 2 and entry.attributes & ATTR_CODEC == codec_id:
                    payloads.append(bytes(segment.buffer[entry.position + HEADER_SIZE:entry.position + entry.size]))
    return payloads

"""`kafka-dump-log.sh` text, line for line as Kafka 3.8's DumpLogSegments prints it.

Source: core/src/main/scala/kafka/tools/DumpLogSegments.scala (3.8.0): dumpLog / printBatchLevel,
dumpIndex, dumpTimeIndex, dumpTxnIndex, dumpProducerIdSnapshot. Java's formatting is kept where it
shows: lowercase booleans, `OptionalLong[n]` / `OptionalLong.empty`, the stray `}` after a legacy
record's crc, a trailing space after a producer state without batch metadata, keys and values
decoded as UTF-8 with U+FFFD for malformed bytes (Java's `new String(bytes, UTF_8)`).
Only stdout lines are produced here; problems are rendered by the command on stderr.
"""
from __future__ import annotations

import functools
import os

from .. import codecs
from .. import dump as d
from ..formats import legacy, record_batch
from ..native import bulk_scan
from ..formats.batch import TIMESTAMP_TYPES, Batch, Record, UnreadRecord
from ..formats.control import CONTROL_TYPES
from . import runs
from .java_text import decode_utf8

RECORD_INDENT = "|"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _text(data: bytes) -> str:
    return decode_utf8(data)


def batch_line(batch: Batch) -> str:
    if batch.magic >= 2:
        head = (f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.count} "
                f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
                f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
                f"isTransactional: {_bool(batch.is_transactional)} isControl: {_bool(batch.is_control)} "
                f"deleteHorizonMs: {_optional_long(batch.delete_horizon_ms)}")
    else:
        head = f"offset: {batch.last_offset}"
    return (f"{head} position: {batch.position} {batch.timestamp_type}: {batch.max_timestamp} "
            f"size: {batch.size} magic: {batch.magic} compresscodec: {batch.compression} "
            f"crc: {batch.crc} isvalid: {_bool(batch.crc_valid)}")


def record_line(batch: Batch, record: Record, decoded, print_data: bool, skip_metadata: bool = False) -> str:
    parts = []
    prefix = RECORD_INDENT + " "
    if not skip_metadata:
        parts.append(f"{prefix}offset: {record.offset} {batch.timestamp_type}: {record.timestamp} "
                     f"keySize: {record.key_size} valueSize: {record.value_size}")
        prefix = " "
        if batch.magic >= 2:
            keys = ",".join(_text(key) for key, _ in record.headers)
            parts.append(f" sequence: {record.sequence} headerKeys: [{keys}]")
        else:
            parts.append(f" isValid: {_bool(record.legacy_crc_valid)} crc: {record.legacy_crc}}}")
        if batch.is_control and record.control is not None:
            parts.append(control_text(record))
    if print_data and not batch.is_control:
        if decoded is not None:
            key_text, value_text = decoded.key_text, decoded.value_text
        else:
            key_text = None if record.key is None else _text(record.key)
            value_text = None if record.value is None else _text(record.value)
        if key_text is not None:
            parts.append(f"{prefix}key: {key_text}")
            prefix = " "
        if value_text is not None:
            parts.append(f" payload: {value_text}")
    return "".join(parts)


def control_text(record: Record) -> str:
    control = record.control
    if control.type_id in (0, 1):
        return f" endTxnMarker: {control.name} coordinatorEpoch: {control.coordinator_epoch}"
    if 3 <= control.type_id <= 6 and control.error is None:
        try:
            from ..payloads.kraft_control import control_text as kraft_text
        except ImportError:
            pass
        else:
            return kraft_text(control.type_id, record.value)
    return f" controlType: {control.name}({control.type_id})"


def lines(item, *, print_data: bool, max_bytes_given: bool, skip_metadata: bool = False) -> list[str]:
    """The stdout lines for one dump item."""
    if isinstance(item, d.FileStart):
        out = [f"Dumping {item.path}"]
        if item.kind == "log":
            out.append(f"Log starting offset: {item.base_offset}")
        elif item.kind == "checkpoint":
            if os.path.basename(item.path) == "bootstrap.checkpoint":
                out.append("KRaft bootstrap snapshot")
            elif item.snapshot_id is not None:
                out.append(f"Snapshot end offset: {item.snapshot_id[0]}, epoch: {item.snapshot_id[1]}")
        return out
    if isinstance(item, d.BatchItem):
        out = [batch_line(item.batch)]
        records = item.records if item.records is not None else item.records_before_error
        if records is not None:
            decoded = item.decoded or [None] * len(records)
            out.extend(record_line(item.batch, r, p, print_data, skip_metadata) for r, p in zip(records, decoded))
        caught = item.unread_decoded or []
        for number, record in enumerate(item.records_unread):  # as far as kafka-dump-log gets before what it reads throws
            if number < len(caught):  # its decoder caught what reading the value threw, and went on
                out.append(record_line(item.batch, record, caught[number], print_data, skip_metadata))
                continue
            unread = isinstance(record, UnreadRecord)
            if unread and print_data and skip_metadata:
                break  # it reads the data before it prints any part of the line
            if unread and record.legacy_null_sizes is None and not skip_metadata:
                break  # it reads the line's fields before it prints them
            out.append(record_line(item.batch, record, None, False, skip_metadata))
            if unread and print_data:
                break  # it prints the metadata, then reads the data
        return out
    if isinstance(item, d.IndexEntryItem):
        return [f"offset: {item.entry.offset} position: {item.entry.position}"]
    if isinstance(item, d.TimeIndexEntryItem):
        return [f"timestamp: {item.entry.timestamp} offset: {item.entry.offset}"]
    if isinstance(item, d.EmptyIndex):
        return [f"{item.path} is empty."]
    if isinstance(item, d.AbortedTxnItem):
        e = item.entry
        return [f"version: {e.version} producerId: {e.producer_id} firstOffset: {e.first_offset} "
                f"lastOffset: {e.last_offset} lastStableOffset: {e.last_stable_offset}"]
    if isinstance(item, d.ProducerStateItem):
        e = item.entry
        txn_first = e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None
        line = (f"producerId: {e.producer_id} producerEpoch: {e.epoch} coordinatorEpoch: {e.coordinator_epoch} "
                f"currentTxnFirstOffset: {_optional_long(txn_first)} lastTimestamp: {e.timestamp} ")
        if e.has_batch_metadata:
            line += (f"firstSequence: {e.first_sequence} lastSequence: {e.last_sequence} lastOffset: {e.last_offset} "
                     f"offsetDelta: {e.offset_delta} timestamp: {e.timestamp}")
        return [line]
    if isinstance(item, d.CheckpointItem):
        return [" ".join(f"{k}: {v}" for k, v in item.values.items())] if item.kind != "meta.properties" else [
            f"{k}={v}" for k, v in item.values.items()]
    if isinstance(item, d.Trailing):
        return [] if max_bytes_given else [f"Found {item.size} invalid bytes at the end of {os.path.basename(item.path)}"]
    return []


# ---------------------------------------------------------------------------------------------
# Runs of batches (`dump.BatchRun`), written by compiled code
# ---------------------------------------------------------------------------------------------

_RUN_BUFFER = 1 << 20


def run_block(run: d.BatchRun, *, print_data: bool, skip_metadata: bool, decompress_limit: int) -> bytes | memoryview:
    """`lines` of each batch of a run and (with deep iteration) its records, as UTF-8 with a newline
    after each line: written by the compiled `render_dumplog_each` from `_texts`, keys, values and
    header keys that are not UTF-8 with `decode_utf8`'s replacements, transaction markers as
    `control_text` writes them. A batch it leaves (a control batch that is not a marker in Kafka's
    shape, a null header key) is read again and printed by `lines`, as the per-batch path prints it."""
    kernel = bulk_scan.kernel()
    texts, bounds = _texts()

    def render(a: runs.RunArrays, out, state) -> None:
        kernel.render_dumplog_each(a.segment, a.payloads, a.batches, a.records, a.headers, a.legacy, a.deep,
                                   print_data, skip_metadata, texts, bounds, out, state)

    return runs.rendered(run, render, lambda a: _run_size(a.batches, a.records, a.payloads),
                         lambda b, r, count: _one_by_one(run, b, print_data, skip_metadata, decompress_limit))


def _run_size(batches, records, payloads) -> int:
    """A buffer for a run's lines that one call nearly always fills: the bytes they come from and
    room for each line's names and numbers."""
    return max(_RUN_BUFFER, int(batches[bulk_scan.B_SIZE].sum()) + payloads.size
               + 512 * (batches.shape[1] + records.shape[1]))


def _one_by_one(run: d.BatchRun, b: int, print_data: bool, skip_metadata: bool, decompress_limit: int) -> bytes:
    """Batch b of a run as the per-batch path prints it: read again from the segment."""
    position, size = int(run.batches[bulk_scan.B_POSITION, b]), int(run.batches[bulk_scan.B_SIZE, b])
    if run.batches[bulk_scan.B_MAGIC, b] == 2:
        batch = record_batch.parse_batch(run.segment, position, run.path, decompress_limit)
    else:
        batch = legacy.parse_batch(run.segment, position, position + size, run.path, decompress_limit)
    item = d.BatchItem(batch, list(batch.records_reading_controls()) if run.records is not None else None)
    text = lines(item, print_data=print_data, max_bytes_given=False, skip_metadata=skip_metadata)
    return "".join(line + "\n" for line in text).encode("utf-8", "backslashreplace")


@functools.cache
def _texts():
    """`bulk_scan.DUMPLOG_PIECES`: (texts, bounds) as numpy arrays."""
    import numpy as np

    pieces = ["baseOffset: ", " lastOffset: ", " count: ", " baseSequence: ", " lastSequence: ", " producerId: ",
              " producerEpoch: ", " partitionLeaderEpoch: ", " isTransactional: ", " isControl: ",
              " deleteHorizonMs: ", " position: ", " ", ": ", " size: ", " magic: ", " compresscodec: ", " crc: ",
              " isvalid: true",
              f"{RECORD_INDENT} offset: ", " ", ": ", " keySize: ", " valueSize: ", " sequence: ", " headerKeys: [", "]",
              "offset: ", " isValid: ", " crc: ", "}",
              " key: ", f"{RECORD_INDENT} key: ", " payload: ",
              *(codecs.name_of(codec_id) for codec_id in range(8)),
              *(TIMESTAMP_TYPES[code] for code in (0, 1, -1)),
              _bool(True), _bool(False), _optional_long(None), "OptionalLong[", "]",
              " endTxnMarker: ", " coordinatorEpoch: ", CONTROL_TYPES[0], CONTROL_TYPES[1]]
    if len(pieces) != bulk_scan.DUMPLOG_TEXTS:
        raise AssertionError(f"{len(pieces)} texts for render_dumplog_each, not {bulk_scan.DUMPLOG_TEXTS}")
    encoded = [piece.encode() for piece in pieces]
    return (np.frombuffer(b"".join(encoded) + bytes(16), dtype=np.uint8),  # (copied 16 bytes at a time)
            np.cumsum([0, *map(len, encoded)], dtype=np.int64))

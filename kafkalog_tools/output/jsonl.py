"""JSON Lines for `dump`: one object per batch, record, index entry, problem. The schema is
documented in the README ("JSON Lines schema") and kept stable; fields are only ever added.

Bytes are UTF-8 text when they decode as such, otherwise base64; `*_encoding` says which
("utf8" / "base64"), and null stays null. `bytes_mode="base64"` forces base64 for every key and
value. Header keys are Strings in Kafka, so they are always text.
"""
from __future__ import annotations

import base64

from .. import dump as d
from ..formats.batch import Batch, Record


def encode_bytes(data: bytes | None, bytes_mode: str) -> tuple[str | None, str | None]:
    if data is None:
        return None, None
    if bytes_mode != "base64":
        try:
            return data.decode("utf-8"), "utf8"
        except UnicodeDecodeError:
            pass
    return base64.b64encode(data).decode("ascii"), "base64"


def batch_object(batch: Batch) -> dict:
    return {
        "type": "batch",
        "file": batch.path,
        "position": batch.position,
        "size": batch.size,
        "base_offset": batch.base_offset,
        "last_offset": batch.last_offset,
        "count": batch.count,
        "magic": batch.magic,
        "crc": batch.crc,
        "crc_valid": batch.crc_valid,
        "compression": batch.compression,
        "timestamp_type": batch.timestamp_type,
        "max_timestamp": batch.max_timestamp,
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "base_sequence": batch.base_sequence,
        "last_sequence": batch.last_sequence,
        "is_transactional": batch.is_transactional,
        "is_control": batch.is_control,
        "partition_leader_epoch": batch.partition_leader_epoch,
        "delete_horizon_ms": batch.delete_horizon_ms,
    }


def record_object(batch: Batch, record: Record, decoded, bytes_mode: str) -> dict:
    key, key_encoding = encode_bytes(record.key, bytes_mode)
    value, value_encoding = encode_bytes(record.value, bytes_mode)
    headers = []
    for header_key, header_value in record.headers:
        text, encoding = encode_bytes(header_value, bytes_mode)
        headers.append({"key": header_key.decode("utf-8", "replace"), "value": text, "value_encoding": encoding})
    obj = {
        "type": "record",
        "file": batch.path,
        "batch_position": batch.position,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "sequence": record.sequence,
        "size": record.size,
        "key_size": record.key_size,
        "value_size": record.value_size,
        "key": key,
        "key_encoding": key_encoding,
        "value": value,
        "value_encoding": value_encoding,
        "headers": headers,
    }
    if record.legacy_magic is not None:
        obj["legacy"] = {"magic": record.legacy_magic, "crc": record.legacy_crc,
                         "crc_valid": record.legacy_crc_valid, "attributes": record.legacy_attributes}
    if record.control is not None:
        control = record.control
        obj["control"] = {"type": control.name, "type_id": control.type_id, "version": control.version,
                          "coordinator_epoch": control.coordinator_epoch}
        if control.data is not None:
            obj["control"]["data"] = control.data
        if control.error is not None:
            obj["control"]["error"] = control.error
    if decoded is not None:
        obj["key_decoded"] = decoded.key
        obj["value_decoded"] = decoded.value
        if decoded.warning:
            obj["decode_warning"] = decoded.warning
    return obj


def problem_object(problem: d.Problem) -> dict:
    error = problem.error
    return {"type": "problem", "severity": problem.severity, "file": error.path, "position": error.position,
            "message": error.message, "expected": _plain(error.expected), "actual": _plain(error.actual)}


def _plain(value):
    return value if value is None or isinstance(value, (int, float, str, bool)) else str(value)


def objects(item, bytes_mode: str = "auto") -> list[dict]:
    """The JSON objects for one dump item."""
    if isinstance(item, d.FileStart):
        obj = {"type": "file", "file": item.path, "kind": item.kind, "base_offset": item.base_offset}
        if item.snapshot_id is not None:
            obj["snapshot_end_offset"], obj["snapshot_epoch"] = item.snapshot_id
        return [obj]
    if isinstance(item, d.BatchItem):
        out = [batch_object(item.batch)]
        if item.records is not None:
            decoded = item.decoded or [None] * len(item.records)
            out.extend(record_object(item.batch, r, p, bytes_mode) for r, p in zip(item.records, decoded))
        return out
    if isinstance(item, d.IndexEntryItem):
        e = item.entry
        return [{"type": "index_entry", "file": item.path, "slot": e.slot, "offset": e.offset, "position": e.position}]
    if isinstance(item, d.TimeIndexEntryItem):
        e = item.entry
        return [{"type": "time_index_entry", "file": item.path, "slot": e.slot, "timestamp": e.timestamp,
                 "offset": e.offset}]
    if isinstance(item, d.AbortedTxnItem):
        e = item.entry
        return [{"type": "aborted_txn", "file": item.path, "version": e.version, "producer_id": e.producer_id,
                 "first_offset": e.first_offset, "last_offset": e.last_offset,
                 "last_stable_offset": e.last_stable_offset}]
    if isinstance(item, d.ProducerStateItem):
        e = item.entry
        obj = {"type": "producer_state", "file": item.path, "producer_id": e.producer_id, "producer_epoch": e.epoch,
               "coordinator_epoch": e.coordinator_epoch,
               "current_txn_first_offset": e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None,
               "last_timestamp": e.timestamp}
        if e.has_batch_metadata:
            obj.update(first_sequence=e.first_sequence, last_sequence=e.last_sequence, first_offset=e.first_offset,
                       last_offset=e.last_offset, offset_delta=e.offset_delta)
        return [obj]
    if isinstance(item, d.CheckpointItem):
        return [{"type": "checkpoint_entry", "file": item.path, "kind": item.kind, **item.values}]
    if isinstance(item, d.Trailing):
        return [{"type": "trailing_bytes", "file": item.path, "position": item.position, "size": item.size,
                 "reason": item.reason}]
    if isinstance(item, d.Problem):
        return [problem_object(item)]
    if isinstance(item, d.UnknownFile):
        return [{"type": "unknown_file", "file": item.path, "reason": item.reason}]
    return []

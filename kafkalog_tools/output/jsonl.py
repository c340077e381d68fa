"""JSON Lines for `dump`: one object per batch, record, index entry, problem. The schema is
documented in the README ("JSON Lines schema") and kept stable; fields are only ever added.

Bytes are UTF-8 text when they decode as such, otherwise base64; `*_encoding` says which
("utf8" / "base64"), and null stays null. `bytes_mode="base64"` forces base64 for every key and
value. Header keys are Strings in Kafka, so they are always text.

`lines` renders items the way `json_line(obj)` does for each of `objects(item)`, byte for byte, but
batches and their records take a fast path: orjson for every string (its escaping equals
json.dumps(ensure_ascii=False) for every code point, and is ~25x faster on a 1 KiB value), and batch
and record lines filled into per-file %-templates without an intermediate dict (ints print as
json.dumps prints them, at any size). `block` gives the same lines as UTF-8, which `dump` writes
beneath the text layer. A run of batches read in bulk (`BatchRun`) is written by the compiled
`kernels.render_each` from the same templates, cut into pieces (`run_block`), and
`python_run_block` is its reference and its fallback.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import re
from itertools import islice

import orjson

from .. import dump as d
from ..codecs import name_of
from ..errors import CorruptDataError
from ..native import bulk_scan
from ..formats.batch import TIMESTAMP_TYPES, Batch, ControlRecord, Record
from ..formats.control import CONTROL_TYPES, parse_control
from ..formats.record_batch import (ATTR_CODEC, ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_LOG_APPEND_TIME,
                                    ATTR_TRANSACTIONAL)
from . import json_line, runs


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
        "base_offset": known_base_offset(batch),
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


def known_base_offset(batch: Batch) -> int | None:
    """`batch.base_offset`, or None for a V0/V1 wrapper whose message set cannot be read (its first
    inner message says it; with deep iteration, the problem line after the batch's says why)."""
    try:
        return batch.base_offset
    except CorruptDataError:
        return None


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
        obj["control"] = control_object(record.control)
    if decoded is not None:
        obj["key_decoded"] = decoded.key
        obj["value_decoded"] = decoded.value
        if decoded.warning:
            obj["decode_warning"] = decoded.warning
    return obj


def control_object(control: ControlRecord) -> dict:
    obj = {"type": control.name, "type_id": control.type_id, "version": control.version,
           "coordinator_epoch": control.coordinator_epoch}
    if control.data is not None:
        obj["data"] = control.data
    if control.error is not None:
        obj["error"] = control.error
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
        if item.broker is not None:
            obj["broker"], obj["read_as"] = item.broker.broker, item.broker.read_as
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
                 "reason": item.reason, "still_being_written": item.still_being_written}]
    if isinstance(item, d.Problem):
        return [problem_object(item)]
    if isinstance(item, d.UnknownFile):
        return [{"type": "unknown_file", "file": item.path, "reason": item.reason}]
    return []


# ---------------------------------------------------------------------------------------------
# The fast path: the same lines as json_line(obj) for each of objects(item)
# ---------------------------------------------------------------------------------------------


def json_text(text: str) -> str:
    """A JSON string, as json.dumps(text, ensure_ascii=False) writes it."""
    try:
        return orjson.dumps(text).decode()
    except TypeError:
        return json_line(text)


def _json_bytes(data: bytes | None, base64_only: bool) -> tuple[str, str]:
    """encode_bytes, as JSON text: (value, encoding)."""
    text, encoding = _json_utf8(data, base64_only)
    return text.decode(), encoding.decode()


def _json_utf8(data: bytes | None, base64_only: bool) -> tuple[bytes, bytes]:
    """`_json_bytes` as UTF-8. Text decoded from UTF-8 holds no surrogates, so orjson takes all of it."""
    if data is None:
        return b"null", b"null"
    if not base64_only:
        try:
            return orjson.dumps(data.decode("utf-8")), b'"utf8"'
        except UnicodeDecodeError:
            pass
    return b'"' + binascii.b2a_base64(data, newline=False) + b'"', b'"base64"'


_BATCH_FIELDS = ('"position":%d,"size":%d,"base_offset":%s,"last_offset":%d,"count":%s,"magic":%d,"crc":%d,'
                 '"crc_valid":%s,"compression":%s,"timestamp_type":%s,"max_timestamp":%d,"producer_id":%d,'
                 '"producer_epoch":%d,"base_sequence":%d,"last_sequence":%d,"is_transactional":%s,"is_control":%s,'
                 '"partition_leader_epoch":%d,"delete_horizon_ms":%s}')
_RECORD_FIELDS = ('"batch_position":%d,"offset":%d,"timestamp":%d,"sequence":%d,"size":%d,"key_size":%d,'
                  '"value_size":%d,"key":%s,"key_encoding":%s,"value":%s,"value_encoding":%s,"headers":[%s]}')
_HEADER = '{"key":%s,"value":%s,"value_encoding":%s}'
_LEGACY = ',"legacy":{"magic":%d,"crc":%d,"crc_valid":%s,"attributes":%d}}'
"""What a V0/V1 record line ends with, after its headers."""
_JSON_BOOL = {True: "true", False: "false", None: "null"}


@functools.lru_cache(maxsize=16)
def _templates(path: str) -> tuple[str, str, str]:
    """The batch, record and V0/V1 record line templates of one file: its name is encoded once, not
    per batch."""
    file = json_text(path).replace("%", "%%")  # a file name may hold a '%'
    record = '{"type":"record","file":' + file + "," + _RECORD_FIELDS
    return '{"type":"batch","file":' + file + "," + _BATCH_FIELDS, record, record[:-1] + _LEGACY


@functools.lru_cache(maxsize=16)
def _utf8_templates(path: str) -> tuple[bytes, bytes, bytes]:
    """`_templates` as UTF-8, for `run_block`. A name that is not UTF-8 (surrogate escapes) gets the
    \\udcXX escapes that `LineWriter`'s stream writes for it."""
    return tuple(template.encode("utf-8", "backslashreplace") for template in _templates(path))


_COMPRESSION_JSON = {codec_id: json_text(name_of(codec_id)) for codec_id in range(8)}  # every 3-bit codec field
_TIMESTAMP_TYPE_JSON = {name: json_text(name) for name in TIMESTAMP_TYPES.values()}
_NO_TIMESTAMP_TYPE_JSON = _TIMESTAMP_TYPE_JSON[TIMESTAMP_TYPES[-1]]
"""A V0 message's: it has no timestamp, whatever its attributes say."""


def batch_lines(batch: Batch, records: list[Record] | None, bytes_mode: str) -> list[str]:
    """json_line(batch_object(batch)), then json_line(record_object(batch, r, None, bytes_mode)) for
    each record, from the file's templates."""
    batch_template, template, legacy_template = _templates(batch.path)
    count, horizon, base = batch.count, batch.delete_horizon_ms, known_base_offset(batch)
    lines = [batch_template % (
        batch.position, batch.size, "null" if base is None else base, batch.last_offset,
        "null" if count is None else count, batch.magic, batch.crc, _JSON_BOOL[batch.crc_valid],
        _COMPRESSION_JSON.get(batch.compression_id) or json_text(batch.compression),
        _TIMESTAMP_TYPE_JSON.get(batch.timestamp_type) or json_text(batch.timestamp_type), batch.max_timestamp,
        batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_sequence,
        _JSON_BOOL[batch.is_transactional], _JSON_BOOL[batch.is_control], batch.partition_leader_epoch,
        "null" if horizon is None else horizon)]
    if not records:
        return lines
    position = batch.position
    base64_only = bytes_mode == "base64"
    dumps, json_bytes = orjson.dumps, _json_bytes
    append = lines.append
    for record in records:
        if record.control is not None:
            append(json_line(record_object(batch, record, None, bytes_mode)))
            continue
        key, value, headers = record.key, record.value, record.headers
        if value is None or base64_only:
            value_text, value_encoding = json_bytes(value, base64_only)
        else:  # inlined json_bytes: the common case
            try:
                value_text, value_encoding = dumps(value.decode("utf-8")).decode(), '"utf8"'
            except UnicodeDecodeError:
                value_text, value_encoding = json_bytes(value, True)
        if key is None or base64_only:
            key_text, key_encoding = json_bytes(key, base64_only)
        else:  # inlined too
            try:
                key_text, key_encoding = dumps(key.decode("utf-8")).decode(), '"utf8"'
            except UnicodeDecodeError:
                key_text, key_encoding = json_bytes(key, True)
        header_text = ",".join(_HEADER % (dumps(k.decode("utf-8", "replace")).decode(), *json_bytes(v, base64_only))
                               for k, v in headers) if headers else ""
        fields = (position, record.offset, record.timestamp, record.sequence, record.size,
                  record.key_size if key is None else len(key), record.value_size if value is None else len(value),
                  key_text, key_encoding, value_text, value_encoding, header_text)
        if record.legacy_magic is None:
            append(template % fields)
        else:
            append(legacy_template % (*fields, record.legacy_magic, record.legacy_crc,
                                      _JSON_BOOL[record.legacy_crc_valid], record.legacy_attributes))
    return lines


_ATTRIBUTE_JSON = tuple(
    tuple(text.encode() for text in (
        _COMPRESSION_JSON[attributes & ATTR_CODEC],
        _TIMESTAMP_TYPE_JSON[TIMESTAMP_TYPES[1 if attributes & ATTR_LOG_APPEND_TIME else 0]],
        _JSON_BOOL[bool(attributes & ATTR_TRANSACTIONAL)], _JSON_BOOL[bool(attributes & ATTR_CONTROL)]))
    for attributes in range(256))
"""A batch line's compression, timestamp_type, is_transactional and is_control, by attributes byte
(UTF-8)."""
_NO_TIMESTAMP_TYPE_UTF8 = _NO_TIMESTAMP_TYPE_JSON.encode()
_HEADER_UTF8 = _HEADER.encode()
_CONTROL_END = b'],"control":{"type":%s,"type_id":%d,"version":%d,"coordinator_epoch":%d}}'
"""How a transaction marker's record line ends (`control_object` of an ABORT or COMMIT), from its
headers' `]`: `render_each` writes it from these pieces."""


_RENDER_BUFFER = 4 << 20
"""Bytes `render_each` is given at least (`_render_size`)."""


def run_block(run: d.BatchRun, bytes_mode: str) -> bytes | memoryview:
    """`batch_lines` for each batch of a run and its records (with deep iteration), as UTF-8 with a
    newline after each line, written by the compiled `render_each` from the same templates; a batch
    it leaves (a header key that is not UTF-8) by `python_run_block`."""
    kernel = bulk_scan.kernel()
    texts, bounds = _render_texts(run.path)

    def render(a: runs.RunArrays, out, state) -> None:
        kernel.render_each(a.segment, a.payloads, a.batches, a.records, a.headers, a.legacy, a.deep, texts, bounds,
                           bytes_mode == "base64", out, state)

    def hand_back(b: int, r: int, count: int) -> bytes:
        return python_run_block(dataclasses.replace(
            run, batches=run.batches[:, b:b + 1], records=None if run.records is None else run.records[:, r:r + count],
            legacy=None if run.legacy is None else run.legacy[:, r:r + count]), bytes_mode)

    return runs.rendered(run, render, lambda a: _render_size(a.batches, a.records, a.headers, a.payloads), hand_back)


def _render_size(batches, records, headers, payloads) -> int:
    """A buffer for a run's lines that one call nearly always fills: twice the bytes they come from
    and room for each line's names (its pages are touched only as far as it is written)."""
    return max(_RENDER_BUFFER, 2 * (int(batches[bulk_scan.B_SIZE].sum()) + payloads.size)
               + 512 * (batches.shape[1] + records.shape[1] + headers.shape[1]))


@functools.lru_cache(maxsize=16)
def _render_texts(path: str):
    """`bulk_scan.TEXT_PIECES` for a file's runs: (texts, bounds) as numpy arrays."""
    import numpy as np

    batch_template, template, legacy_template = _utf8_templates(path)
    pieces = [*_cut(batch_template), *_cut(template), *_cut(legacy_template),
              *(_COMPRESSION_JSON[codec_id].encode() for codec_id in range(8)),
              *(_TIMESTAMP_TYPE_JSON[TIMESTAMP_TYPES[code]].encode() for code in (0, 1, -1)),
              *_cut(_HEADER_UTF8), b"true", b"false", b"null", b'"utf8"', b'"base64"',
              *_cut(_CONTROL_END), *(json_text(CONTROL_TYPES[type_id]).encode() for type_id in (0, 1))]
    if len(pieces) != bulk_scan.TEXTS:
        raise AssertionError(f"{len(pieces)} texts for render_each, not {bulk_scan.TEXTS}")
    return (np.frombuffer(b"".join(pieces) + bytes(16), dtype=np.uint8),  # (copied 16 bytes at a time)
            np.cumsum([0, *map(len, pieces)], dtype=np.int64))


def _cut(template: bytes) -> list[bytes]:
    """A %-template's literal pieces around its %d and %s fields (its %% a %)."""
    pieces, piece = [], b""
    for token in re.split(rb"(%%|%[ds])", template):
        if token in (b"%d", b"%s"):
            pieces.append(piece)
            piece = b""
        else:
            piece += b"%" if token == b"%%" else token
    return [*pieces, piece]


def python_run_block(run: d.BatchRun, bytes_mode: str) -> bytes:
    """What `run_block` writes, in Python (its reference, and the writer of the batches it leaves):
    keys, values and headers are sliced out of the run's bytes and orjson's UTF-8 goes into the line
    as it is."""
    batch_template, template, legacy_template = _utf8_templates(run.path)
    lines = []
    append = lines.append
    base64_only = bytes_mode == "base64"
    dumps, json_utf8, attribute_json = orjson.dumps, _json_utf8, _ATTRIBUTE_JSON
    records = None if run.records is None else zip(*run.records.tolist())
    legacy = None if run.legacy is None else zip(*run.legacy.tolist())
    segment, payloads, headers = run.segment, run.payloads, run.headers
    if not isinstance(payloads, bytes):  # (sliced below as bytes are)
        payloads = bytes(payloads)
    for (position, size, base_offset, last_offset, count, crc, attributes, max_timestamp, producer_id,
         producer_epoch, base_sequence, last_sequence, leader_epoch, base_timestamp, in_payloads,
         magic) in zip(*run.batches.tolist()):
        compression, timestamp_type, transactional, control = attribute_json[attributes]
        append(batch_template % (
            position, size, b"%d" % base_offset, last_offset, b"%d" % count if magic == 2 else b"null", magic, crc,
            b"true", compression, _NO_TIMESTAMP_TYPE_UTF8 if magic == 0 else timestamp_type, max_timestamp,
            producer_id, producer_epoch, base_sequence, last_sequence, transactional, control, leader_epoch,
            b"%d" % base_timestamp if attributes & ATTR_DELETE_HORIZON else b"null"))
        if records is None or not count:
            continue
        data = payloads if in_payloads else segment
        for (offset, timestamp, sequence, record_size, key_start, key_length, value_start, value_length,
             first_header, header_count) in islice(records, count):
            key_text, key_encoding = json_utf8(
                None if key_length < 0 else data[key_start:key_start + key_length], base64_only)
            value_text, value_encoding = json_utf8(
                None if value_length < 0 else data[value_start:value_start + value_length], base64_only)
            header_text = b",".join(
                _HEADER_UTF8 % (dumps(data[k:k + k_length].decode("utf-8", "replace")),
                                *json_utf8(None if v_length < 0 else data[v:v + v_length], base64_only))
                for k, k_length, v, v_length in zip(*headers[:, first_header:first_header + header_count].tolist())
            ) if header_count else b""
            fields = (position, offset, timestamp, sequence, record_size, key_length, value_length, key_text,
                      key_encoding, value_text, value_encoding, header_text)
            if attributes & ATTR_CONTROL:  # a transaction marker (the only control records a run holds)
                control = parse_control(data[key_start:key_start + key_length],
                                        data[value_start:value_start + value_length])
                append(template[:-1] % fields + b',"control":' + orjson.dumps(control_object(control)) + b"}")
            elif legacy is None:
                append(template % fields)
            else:  # the kernel kept only messages whose CRC matches
                legacy_crc, legacy_attributes = next(legacy)
                append(legacy_template % (*fields, magic, legacy_crc, b"true", legacy_attributes))
    append(b"")
    return b"\n".join(lines)


def lines(item, bytes_mode: str = "auto") -> list[str]:
    """The JSON lines for one dump item (json_line of each of `objects(item, bytes_mode)`)."""
    if type(item) is d.BatchItem and item.decoded is None:
        return batch_lines(item.batch, item.records, bytes_mode)
    if type(item) is d.BatchRun:
        return bytes(run_block(item, bytes_mode)).decode().split("\n")[:-1]  # (JSON escapes every newline)
    return [json_line(obj) for obj in objects(item, bytes_mode)]


def block(item, bytes_mode: str = "auto") -> bytes | memoryview:
    """`lines(item)` as `LineWriter` writes them: UTF-8, a newline after each."""
    if type(item) is d.BatchRun:
        return run_block(item, bytes_mode)
    return "".join(line + "\n" for line in lines(item, bytes_mode)).encode("utf-8", "backslashreplace")

"""Explicit Spark schemas of the Parquet datasets, with the field names of the JSON Lines schema
(README, "JSON Lines schema"; `output/jsonl.py` builds the objects), plus `topic` and `partition`.

Rows are built from `jsonl.batch_object` / `jsonl.record_object`, so the two outputs cannot drift
apart. Values of no fixed shape (decoded payloads, KRaft control data, a finding's extra fields)
are JSON text.
"""
from __future__ import annotations

import json

from ..output import jsonl

BATCH_FIELDS = [
    ("file", "string"), ("position", "long"), ("size", "long"), ("base_offset", "long"), ("last_offset", "long"),
    ("count", "integer"), ("magic", "integer"), ("crc", "long"), ("crc_valid", "boolean"),
    ("compression", "string"), ("timestamp_type", "string"), ("max_timestamp", "long"), ("producer_id", "long"),
    ("producer_epoch", "integer"), ("base_sequence", "integer"), ("last_sequence", "integer"),
    ("is_transactional", "boolean"), ("is_control", "boolean"), ("partition_leader_epoch", "integer"),
    ("delete_horizon_ms", "long"),
]
RECORD_FIELDS = [
    ("file", "string"), ("batch_position", "long"), ("offset", "long"), ("timestamp", "long"),
    ("sequence", "integer"), ("size", "integer"), ("key_size", "integer"), ("value_size", "integer"),
    ("key", "string"), ("key_encoding", "string"), ("value", "string"), ("value_encoding", "string"),
]
HEADER_FIELDS = [("key", "string"), ("value", "string"), ("value_encoding", "string")]
LEGACY_FIELDS = [("magic", "integer"), ("crc", "long"), ("crc_valid", "boolean"), ("attributes", "integer")]
CONTROL_FIELDS = [("type", "string"), ("type_id", "integer"), ("version", "integer"),
                  ("coordinator_epoch", "integer"), ("data", "string"), ("error", "string")]
DECODED_FIELDS = [("key_decoded", "string"), ("value_decoded", "string"), ("decode_warning", "string")]
PROBLEM_FIELDS = [("type", "string"), ("severity", "string"), ("file", "string"), ("position", "long"),
                  ("message", "string"), ("expected", "string"), ("actual", "string")]
FINDING_FIELDS = [("path", "string"), ("severity", "string"), ("code", "string"), ("file", "string"),
                  ("position", "long"), ("message", "string"), ("extra", "string")]
"""`path`: the log dir (or other path) given; `extra`: the finding's other fields as JSON."""
WHERE_FIELDS = [("topic", "string"), ("partition", "integer")]


def _struct(fields):
    from pyspark.sql import types as t

    simple = {"string": t.StringType(), "long": t.LongType(), "integer": t.IntegerType(),
              "boolean": t.BooleanType()}
    return t.StructType([t.StructField(name, simple[kind] if isinstance(kind, str) else kind, True)
                         for name, kind in fields])


def batch_schema():
    return _struct(BATCH_FIELDS + WHERE_FIELDS)


def record_schema():
    from pyspark.sql import types as t

    nested = [("headers", t.ArrayType(_struct(HEADER_FIELDS))), ("legacy", _struct(LEGACY_FIELDS)),
              ("control", _struct(CONTROL_FIELDS))]
    return _struct(RECORD_FIELDS + nested + DECODED_FIELDS + WHERE_FIELDS)


def problem_schema():
    return _struct(PROBLEM_FIELDS + WHERE_FIELDS)


def finding_schema():
    return _struct(FINDING_FIELDS)


# -- rows (plain tuples in schema order: they are built on executors, by the million) ----------


def batch_row(batch, topic: str | None, partition: int | None) -> tuple:
    obj = jsonl.batch_object(batch)
    return tuple(obj[name] for name, _ in BATCH_FIELDS) + (topic, partition)


def record_row(batch, record, decoded, bytes_mode: str, topic: str | None, partition: int | None) -> tuple:
    obj = jsonl.record_object(batch, record, decoded, bytes_mode)
    headers = [tuple(h[name] for name, _ in HEADER_FIELDS) for h in obj["headers"]]
    legacy = obj.get("legacy")
    control = obj.get("control")
    if control is not None:
        control = dict(control, data=_json(control.get("data")))
    return (tuple(obj[name] for name, _ in RECORD_FIELDS)
            + (headers, _nested(legacy, LEGACY_FIELDS), _nested(control, CONTROL_FIELDS),
               _json(obj.get("key_decoded")), _json(obj.get("value_decoded")), obj.get("decode_warning"),
               topic, partition))


def problem_row(obj: dict, topic: str | None, partition: int | None) -> tuple:
    return tuple(_text(obj.get(name)) if kind == "string" else obj.get(name) for name, kind in PROBLEM_FIELDS) \
        + (topic, partition)


def finding_row(path: str, finding) -> tuple:
    return (path, finding.severity, finding.code, finding.file, finding.position, finding.message,
            _json(finding.extra) if finding.extra else None)


def _nested(obj: dict | None, fields) -> tuple | None:
    return None if obj is None else tuple(obj.get(name) for name, _ in fields)


def _json(value) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _text(value) -> str | None:
    return None if value is None else str(value)

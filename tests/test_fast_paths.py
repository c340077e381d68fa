"""Every fast path against its reference, on the same bytes.

The library reads hot structures twice over: a `struct.Struct` derived from each construct schema
(`derive_struct`) and a hand-inlined varint reader (`decode_records`, `legacy.read_message`) for
speed, and the construct schemas themselves as the reference. As dissect.cstruct runs every parser
test compiled and interpreted through one parametrised fixture, every test here runs through
`decode_path` twice - once per path - and checks the answer against ground truth: what Kafka 3.8.0
itself parsed from the golden corpus (golden/manifests), or the values hypothesis built a batch
from. Two tests at the end compare the paths directly on corrupted bytes, where no ground truth
exists but the paths must still agree.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import os
import struct
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from construct import Struct
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kafkalog_tools import codecs, dump
from kafkalog_tools.errors import CorruptDataError
from kafkalog_tools.formats import control, legacy, offset_index, producer_snapshot, time_index, txn_index
from kafkalog_tools.formats import record_batch as rb
from kafkalog_tools.formats.batch import ControlRecord, Record
from kafkalog_tools.output import json_line, jsonl
from kafkalog_tools.schema import derive_struct, field_names
from tests.conftest import GOLDEN, REAL
from tests.strategies import (
    GOLDEN_LEGACY_LOGS,
    GOLDEN_OFFSET_INDEXES,
    GOLDEN_SNAPSHOTS,
    GOLDEN_TIME_INDEXES,
    GOLDEN_TXN_INDEXES,
    GOLDEN_V2_LOGS,
    INT32_MAX,
    BatchSpec,
    LegacySpec,
    RecordSpec,
    batch_specs,
    legacy_specs,
    log_entries,
    manifest_for,
)

# ---------------------------------------------------------------------------------------------
# The two paths
# ---------------------------------------------------------------------------------------------


def _plain(container) -> dict:
    return {k: v for k, v in container.items() if not k.startswith("_")}


@dataclass(frozen=True)
class DecodePath:
    """One way of reading each hot structure; results in plain Python values both paths share."""

    name: str
    batch_header: Callable[[bytes, int], dict]
    """The BATCH_HEADER fields of the V2 batch at a position."""
    index_entries: Callable[[Struct, bytes], list[tuple]]
    """Every whole entry of an index file, as tuples in schema field order."""
    records: Callable[[rb.RecordBatchV2], list[Record]]
    legacy_message: Callable[[bytes, int, int], dict]
    """The legacy message whose entry spans [pos, end)."""
    snapshot_entries: Callable[[bytes], list[tuple]]


def _fast_legacy(buf: bytes, pos: int, end: int) -> dict:
    fields = dataclasses.asdict(legacy.read_message(buf, pos, end))
    assert fields.pop("error") is None and fields.pop("size_fields") is None  # a strict read raises instead
    return fields


def _reference_legacy(buf: bytes, pos: int, end: int) -> dict:
    parsed = legacy.LOG_ENTRY.parse(buf[pos:end])
    message = parsed.message
    sizes = legacy.SIZE_FIELDS.parse(buf[pos + 12 : end])
    return dict(offset=parsed.offset, size=end - pos, crc=message.crc,
                crc_valid=zlib.crc32(buf[pos + 16 : end]) == message.crc,
                magic=message.magic, attributes=message.attributes,
                timestamp=-1 if message.timestamp is None else message.timestamp,
                key=message.key, value=message.value,
                null_sizes=(sizes.key_size, sizes.value_size) if min(sizes.key_size, sizes.value_size) < -1 else None)


def _fast_index(schema: Struct, data: bytes) -> list[tuple]:
    entry = derive_struct(schema)
    return list(entry.iter_unpack(data[: len(data) - len(data) % entry.size]))


def _reference_index(schema: Struct, data: bytes) -> list[tuple]:
    size = schema.sizeof()
    return [tuple(_plain(schema.parse(data[i : i + size])).values()) for i in range(0, len(data) - size + 1, size)]


FAST = DecodePath(
    name="fast",
    batch_header=lambda buf, pos: dict(zip(field_names(rb.BATCH_HEADER), rb.HEADER.unpack_from(buf, pos))),
    index_entries=_fast_index,
    records=rb.decode_records,
    legacy_message=_fast_legacy,
    snapshot_entries=lambda data: [dataclasses.astuple(e) for e in producer_snapshot.parse(data).entries],
)
REFERENCE = DecodePath(
    name="reference",
    batch_header=lambda buf, pos: _plain(rb.BATCH_HEADER.parse(buf[pos : pos + 61])),
    index_entries=_reference_index,
    records=rb.decode_records_reference,
    legacy_message=_reference_legacy,
    snapshot_entries=lambda data: [tuple(_plain(e).values()) for e in producer_snapshot.SNAPSHOT.parse(data).entries],
)


@pytest.fixture(params=[FAST, REFERENCE], ids=lambda path: path.name, scope="module")
def decode_path(request) -> DecodePath:
    """The fast path and the construct reference: every test below runs once with each."""
    return request.param


EXAMPLES = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------------------------------------
# Golden corpus: batch headers and records against Kafka's own parse
# ---------------------------------------------------------------------------------------------

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _kafka_view_of_header(header: dict) -> dict:
    """A BATCH_HEADER's fields as Kafka's RecordBatch accessors (the manifest's names) show them."""
    attributes = header["attributes"] & 0xFF
    return {
        "sizeInBytes": 12 + header["batch_length"], "baseOffset": header["base_offset"],
        "lastOffset": header["base_offset"] + header["last_offset_delta"], "magic": header["magic"],
        "crc": header["crc"], "compression": CODEC_NAMES[attributes & 7],
        "timestampType": "LogAppendTime" if attributes & 0x08 else "CreateTime",
        "maxTimestamp": header["max_timestamp"], "producerId": header["producer_id"],
        "producerEpoch": header["producer_epoch"], "baseSequence": header["base_sequence"],
        "isTransactional": bool(attributes & 0x10), "isControl": bool(attributes & 0x20),
        "partitionLeaderEpoch": header["partition_leader_epoch"], "count": header["records_count"],
    }


def _kafka_view_of_record(record: Record) -> dict:
    view = {"offset": record.offset, "timestamp": record.timestamp, "sequence": record.sequence,
            "sizeInBytes": record.size, "keySize": record.key_size, "valueSize": record.value_size,
            "key": _b64(record.key), "value": _b64(record.value),
            "headers": [{"key": k.decode("utf-8"), "value": _b64(v)} for k, v in record.headers]}
    if record.control is not None:
        view["controlType"] = record.control.name
        view["coordinatorEpoch"] = record.control.coordinator_epoch
    return view


def _golden(log: Path) -> tuple[bytes, dict]:
    manifest = manifest_for(log)
    if manifest is None:
        pytest.skip(f"no Kafka manifest for {log}")
    data = log.read_bytes()
    assert len(data) == manifest["fileSize"]
    return data, manifest


@pytest.mark.parametrize("log", GOLDEN_V2_LOGS)
def test_batch_headers_match_kafkas_parse(decode_path, log: Path):
    data, manifest = _golden(log)
    entries = log_entries(data)
    assert [p for p, _ in entries] == [b["position"] for b in manifest["batches"]]
    compared = 0
    for (position, _), expected in zip(entries, manifest["batches"]):
        if expected["magic"] < 2:
            continue
        view = _kafka_view_of_header(decode_path.batch_header(data, position))
        assert view == {k: expected[k] for k in view}, f"{log.name} batch at {position}"
        compared += 1
    assert compared


@pytest.mark.parametrize("log", GOLDEN_V2_LOGS)
def test_records_match_kafkas_parse(decode_path, log: Path):
    data, manifest = _golden(log)
    for expected in manifest["batches"]:
        if expected["magic"] < 2:
            continue
        batch = rb.parse_batch(data, expected["position"], str(log))
        records = [_kafka_view_of_record(r) for r in decode_path.records(batch)]
        wanted = [{k: r[k] for k in records[0]} for r in expected["records"]] if records else []
        assert len(records) == len(expected["records"]) == expected["count"]
        assert records == wanted, f"{log.name} batch at {expected['position']}"


@pytest.mark.parametrize("log", GOLDEN_LEGACY_LOGS)
def test_legacy_messages_match_kafkas_parse(decode_path, log: Path):
    data, manifest = _golden(log)
    legacy_batches = [b for b in manifest["batches"] if b["magic"] < 2]
    assert legacy_batches
    inner_count = 0
    for expected in legacy_batches:
        start, end = expected["position"], expected["position"] + expected["sizeInBytes"]
        message = decode_path.legacy_message(data, start, end)
        assert (message["offset"], message["magic"], message["crc"], message["crc_valid"], message["size"]) == (
            expected["lastOffset"], expected["magic"], expected["crc"], expected["isValid"], expected["sizeInBytes"])
        assert CODEC_NAMES[message["attributes"] & 7] == expected["compression"]
        if expected["compression"] == "none":
            (record,) = expected["records"]
            assert (_b64(message["key"]), _b64(message["value"]), message["timestamp"]) == (
                record["key"], record["value"], record["timestamp"])
            continue
        inner_data = codecs.decompress(message["attributes"] & 7, message["value"], magic=message["magic"])
        inner = [decode_path.legacy_message(inner_data, p, p + len(e)) for p, e in log_entries(inner_data)]
        assert len(inner) == len(expected["records"])
        # V1 inner offsets are relative to the wrapper, whose offset is the last inner message's
        base = 0 if message["magic"] == 0 or message["offset"] == 0 else message["offset"] - inner[-1]["offset"]
        for got, want in zip(inner, expected["records"]):
            assert (base + got["offset"], got["magic"], got["crc"], got["crc_valid"], got["size"]) == (
                want["offset"], want["legacyMagic"], want["legacyCrc"], want["isValid"], want["sizeInBytes"])
            assert (_b64(got["key"]), _b64(got["value"])) == (want["key"], want["value"])
            if got["magic"] == 1 and not message["attributes"] & 0x08:  # CreateTime: the inner timestamp
                assert got["timestamp"] == want["timestamp"]
            inner_count += 1
    if any(b["compression"] != "none" for b in legacy_batches):
        assert inner_count


# ---------------------------------------------------------------------------------------------
# Golden corpus: index entries and producer snapshots against Kafka's own parse
# ---------------------------------------------------------------------------------------------


def _index_manifest(path: Path, key: str):
    manifest = manifest_for(path.with_suffix(".log"))
    if manifest is None or not manifest.get(key):
        pytest.skip(f"no Kafka manifest entry {key} for {path.name}")
    return manifest[key]


@pytest.mark.parametrize("path", GOLDEN_OFFSET_INDEXES)
def test_offset_index_entries_match_kafkas_parse(decode_path, path: Path):
    base = int(path.stem)
    expected = [(offset - base, position) for offset, position in _index_manifest(path, "offsetIndex")["entryList"]]
    assert decode_path.index_entries(offset_index.ENTRY_SCHEMA, path.read_bytes()) == expected


@pytest.mark.parametrize("path", GOLDEN_TIME_INDEXES)
def test_time_index_entries_match_kafkas_parse(decode_path, path: Path):
    data = path.read_bytes()
    if not data:
        assert decode_path.index_entries(time_index.ENTRY_SCHEMA, data) == []
        return
    base = int(path.stem)
    expected = [(ts, offset - base) for ts, offset in _index_manifest(path, "timeIndex")["entryList"]]
    assert decode_path.index_entries(time_index.ENTRY_SCHEMA, data) == expected


@pytest.mark.parametrize("path", GOLDEN_TXN_INDEXES)
def test_txn_index_entries_match_kafkas_parse(decode_path, path: Path):
    data = path.read_bytes()
    if not data:
        assert decode_path.index_entries(txn_index.ENTRY_SCHEMA, data) == []
        return
    expected = [(t["version"], t["producerId"], t["firstOffset"], t["lastOffset"], t["lastStableOffset"])
                for t in _index_manifest(path, "txnIndex")["abortedTxns"]]
    assert decode_path.index_entries(txn_index.ENTRY_SCHEMA, data) == expected


def _snapshot_manifest(path: Path) -> list[dict]:
    import json

    partition = GOLDEN / "manifests" / "logs" / path.parent.name / "partition.json"
    snapshots = {s["file"]: s["entries"] for s in json.loads(partition.read_text())["producerSnapshots"]}
    if path.name not in snapshots:
        pytest.skip(f"no Kafka manifest for {path.name}")
    return snapshots[path.name]


@pytest.mark.parametrize("path", GOLDEN_SNAPSHOTS)
def test_snapshot_entries_match_kafkas_parse(decode_path, path: Path):
    expected = [(e["producerId"], e["producerEpoch"], e["lastSeq"], e["lastDataOffset"], e["lastOffsetDelta"],
                 e["lastTimestamp"], e["coordinatorEpoch"], e.get("currentTxnFirstOffset", -1))
                for e in _snapshot_manifest(path)]
    assert decode_path.snapshot_entries(path.read_bytes()) == expected


def test_the_golden_indexes_are_not_all_empty(golden):
    assert sum(p.stat().st_size for p in (golden / "logs").glob("*/*.index")) > 1000
    assert sum(p.stat().st_size for p in (golden / "logs").glob("*/*.txnindex")) >= 34 * 5
    assert sum(p.stat().st_size > 10 for p in (golden / "logs").glob("*/*.snapshot")) >= 5


# ---------------------------------------------------------------------------------------------
# Generated batches: every codec, both timestamp types, control markers, sequence wrap-around
# ---------------------------------------------------------------------------------------------

producer_records = st.builds(  # what a producer writes: offset deltas from 0, any timestamps
    RecordSpec,
    offset_delta=st.integers(0, INT32_MAX),
    timestamp_delta=st.integers(-(1 << 60), 1 << 60),
    key=st.none() | st.binary(max_size=300),
    value=st.none() | st.binary(max_size=300),
    headers=st.lists(st.tuples(st.binary(max_size=8), st.none() | st.binary(max_size=8)), max_size=3).map(tuple),
    attributes=st.integers(-128, 127),
)
generated_batches = st.builds(
    lambda spec, records: dataclasses.replace(spec, records=tuple(records)),
    batch_specs, st.lists(producer_records, max_size=8))

control_records = st.builds(
    lambda type_id, version, epoch, delta: (type_id, version, epoch, delta),
    st.one_of(st.sampled_from([0, 1]), st.integers(7, 1000)), st.integers(0, 5), st.integers(-1, 1 << 20),
    st.integers(0, 3))


def build_spec(spec: BatchSpec, *, control_batch: bool = False) -> bytes:
    attributes = (0x08 if spec.log_append_time else 0) | (0x10 if spec.transactional or control_batch else 0)
    attributes |= 0x20 if control_batch else 0
    return rb.build_batch(
        spec.base_offset,
        [rb.build_record(r.offset_delta, r.timestamp_delta, r.key, r.value, list(r.headers), r.attributes)
         for r in spec.records],
        base_timestamp=spec.base_timestamp, max_timestamp=spec.max_timestamp, compression_id=spec.compression_id,
        attributes=attributes, producer_id=spec.producer_id, producer_epoch=spec.producer_epoch,
        base_sequence=spec.base_sequence, partition_leader_epoch=spec.partition_leader_epoch)


def kafka_sequence(base_sequence: int, offset_delta: int) -> int:
    """DefaultRecordBatch.incrementSequence, for non-negative deltas: wraps past Int.MAX to 0."""
    if base_sequence < 0:
        return -1
    total = base_sequence + offset_delta
    return total if total <= INT32_MAX else total - INT32_MAX - 1


def expected_records(spec: BatchSpec, file_position: int) -> list[Record]:
    """What DefaultRecord.readFrom yields for the records `spec` was built from."""
    out = []
    position = file_position + 61
    for r in spec.records:
        size = len(rb.build_record(r.offset_delta, r.timestamp_delta, r.key, r.value, list(r.headers), r.attributes))
        out.append(Record(
            offset=spec.base_offset + r.offset_delta,
            timestamp=spec.max_timestamp if spec.log_append_time else spec.base_timestamp + r.timestamp_delta,
            key=r.key, value=r.value, headers=list(r.headers), size=size,
            sequence=kafka_sequence(spec.base_sequence, r.offset_delta), attributes=r.attributes,
            position=None if spec.compression_id else position,
        ))
        position += size
    return out


@EXAMPLES
@given(spec=generated_batches, padding=st.integers(0, 100))
def test_generated_batches_decode_to_what_they_were_built_from(decode_path, spec: BatchSpec, padding: int):
    raw = build_spec(spec)
    buf = b"\x00" * padding + raw + b"\xff" * 3  # the batch mid-file, as in a segment
    batch = rb.parse_batch(buf, padding, "generated.log")
    assert batch.crc_valid and batch.size == len(raw) and batch.compression_id == spec.compression_id
    assert decode_path.batch_header(buf, padding)["records_count"] == len(spec.records)
    assert decode_path.records(batch) == expected_records(spec, padding)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=CODEC_NAMES.get)
def test_a_large_batch_decodes_with_every_codec(decode_path, codec):
    """Multi-block payloads: > 64 KiB (lz4 blocks) and > 32 KiB (xerial snappy chunks)."""
    records = tuple(RecordSpec(i, i * 7, f"key-{i}".encode(), bytes([i % 251]) * 3000, ((b"h", b"v"),))
                    for i in range(60))
    spec = BatchSpec(1000, records, codec, False, 1_700_000_000_000, 1_700_000_000_413, 7, 1, INT32_MAX - 20, 3)
    raw = build_spec(spec)
    assert codec == 0 or len(raw) < 60 * 3000  # it really is compressed
    batch = rb.parse_batch(raw, 0, "large.log")
    assert decode_path.records(batch) == expected_records(spec, 0)


@EXAMPLES
@given(markers=st.lists(control_records, min_size=1, max_size=3), base_offset=st.integers(0, 1 << 40))
def test_generated_control_batches_decode_their_markers(decode_path, markers, base_offset):
    records = [rb.build_record(i, delta, control.CONTROL_KEY.build(dict(version=version, type=type_id)),
                               control.END_TXN_MARKER.build(dict(version=0, coordinator_epoch=epoch)))
               for i, (type_id, version, epoch, delta) in enumerate(markers)]
    raw = rb.build_batch(base_offset, records, base_timestamp=5, max_timestamp=9, attributes=0x30,
                         producer_id=42, producer_epoch=1)
    decoded = decode_path.records(rb.parse_batch(raw, 0, "control.log"))
    expected = [ControlRecord(type_id=t, name=control.CONTROL_TYPES.get(t, "UNKNOWN"), version=v,
                              coordinator_epoch=e if t in (0, 1) else None) for t, v, e, _ in markers]
    assert [r.control for r in decoded] == expected
    assert [r.offset for r in decoded] == [base_offset + i for i in range(len(markers))]
    assert [r.timestamp for r in decoded] == [5 + d for *_, d in markers]


@EXAMPLES
@given(spec=legacy_specs, padding=st.integers(0, 40))
def test_generated_legacy_messages_read_back(decode_path, spec: LegacySpec, padding: int):
    raw = legacy.build_entry(spec.offset, spec.magic, spec.key, spec.value, timestamp=spec.timestamp,
                             attributes=spec.attributes)
    buf = b"\x07" * padding + raw + b"\x07" * 5
    message = decode_path.legacy_message(buf, padding, padding + len(raw))
    assert message == dict(offset=spec.offset, size=len(raw), crc=zlib.crc32(raw[16:]), crc_valid=True,
                           magic=spec.magic, attributes=spec.attributes,
                           timestamp=spec.timestamp if spec.magic == 1 else -1, key=spec.key, value=spec.value, null_sizes=None)


@EXAMPLES
@given(entries=st.lists(st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-(1 << 31), (1 << 31) - 1)),
                        max_size=20), tail=st.integers(0, 7))
def test_generated_index_entries_read_back(decode_path, entries, tail):
    data = b"".join(struct.pack(">ii", *e) for e in entries) + b"\x01" * tail
    assert decode_path.index_entries(offset_index.ENTRY_SCHEMA, data) == entries  # a partial entry is not one


# ---------------------------------------------------------------------------------------------
# Corrupted bytes: no ground truth, but both paths must agree
# ---------------------------------------------------------------------------------------------


def _outcome(decode: Callable, batch) -> tuple:
    try:
        records = decode(batch)
        return ("ok", records, [str(r.control_error) for r in records if r.control_error is not None])
    except CorruptDataError:
        return ("corrupt",)


uncompressed_batches = st.builds(
    lambda spec, records: dataclasses.replace(spec, records=tuple(records), compression_id=0),
    batch_specs, st.lists(producer_records, min_size=1, max_size=4))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=uncompressed_batches, data=st.data())
def test_fast_and_reference_records_agree_on_corrupted_batches(spec: BatchSpec, data):
    raw = bytearray(build_spec(spec))
    # corrupt the records section (byte values or the records count); the batch size stays, so the
    # segment walk is unaffected and only record decoding sees the damage
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        if data.draw(st.booleans(), label="mutate count"):
            raw[57:61] = struct.pack(">i", data.draw(st.integers(-2, len(spec.records) + 2), label="count"))
        else:
            at = data.draw(st.integers(61, len(raw) - 1), label="position")
            raw[at] = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, raw[at] ^ 0x01]), label="byte")
    batch = rb.parse_batch(bytes(raw), 0, "corrupted.log")
    fast, reference = _outcome(rb.decode_records, batch), _outcome(rb.decode_records_reference, batch)
    assert fast == reference


@settings(max_examples=200, deadline=None)
@given(spec=legacy_specs, data=st.data())
def test_fast_legacy_read_accepts_everything_the_schema_accepts(spec: LegacySpec, data):
    """The schema is stricter than Kafka (it rejects bytes after the value, which LegacyRecord
    ignores), so agreement is one-way: whatever LOG_ENTRY parses, read_message reads the same."""
    raw = bytearray(legacy.build_entry(spec.offset, spec.magic, spec.key, spec.value, timestamp=spec.timestamp))
    at = data.draw(st.integers(16, len(raw) - 1), label="position")
    raw[at] = data.draw(st.integers(0, 255), label="byte")
    raw = bytes(raw)
    try:
        expected = REFERENCE.legacy_message(raw, 0, len(raw))
    except Exception:
        assume(False)
    assert FAST.legacy_message(raw, 0, len(raw)) == expected


def test_trailing_bytes_after_a_legacy_value_divide_the_paths_as_documented():
    raw = legacy.build_entry(3, 1, b"k", b"v", timestamp=7)
    padded = bytearray(raw[:8] + struct.pack(">i", len(raw) - 12 + 2) + raw[12:] + b"\x00\x00")
    padded[12:16] = struct.pack(">I", zlib.crc32(bytes(padded[16:])))
    message = FAST.legacy_message(bytes(padded), 0, len(padded))
    assert (message["key"], message["value"], message["crc_valid"]) == (b"k", b"v", True)
    with pytest.raises(Exception):
        REFERENCE.legacy_message(bytes(padded), 0, len(padded))


# ---------------------------------------------------------------------------------------------
# JSON Lines: the fast renderer (orjson, per-batch templates) against json.dumps of each object
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JsonPath:
    name: str
    lines: Callable  # (dump item, bytes mode) -> list of lines


FAST_JSON = JsonPath("fast", jsonl.lines)
REFERENCE_JSON = JsonPath("reference", lambda item, mode: [json_line(o) for o in jsonl.objects(item, mode)])


@pytest.fixture(params=[FAST_JSON, REFERENCE_JSON], ids=lambda path: path.name, scope="module")
def json_path(request) -> JsonPath:
    """The fast JSON renderer and the json.dumps reference: each test below runs once with each."""
    return request.param


def _as_json_bytes(data: bytes | None, mode: str) -> tuple[str | None, str | None]:
    if data is None:
        return None, None
    if mode == "auto":
        try:
            return data.decode("utf-8"), "utf8"
        except UnicodeDecodeError:
            pass
    return base64.b64encode(data).decode("ascii"), "base64"


def _dump_lines(json_path: JsonPath, paths: list[str], mode: str) -> list[str]:
    return [line for item in dump.dump(paths, dump.DumpOptions(deep=True)) for line in json_path.lines(item, mode)]


@EXAMPLES
@given(spec=generated_batches, mode=st.sampled_from(["auto", "base64"]),
       text_values=st.lists(st.text(max_size=40), max_size=3))
def test_generated_records_render_as_what_they_were_built_from(json_path, spec: BatchSpec, mode: str, text_values):
    texts = [RecordSpec(i, i, t.encode(), ("\x00\"\\\n%" + t).encode(), ((b"h\xff", t.encode()),))
             for i, t in enumerate(text_values)]  # valid UTF-8 with characters JSON must escape
    spec = dataclasses.replace(spec, records=spec.records + tuple(texts))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "100%d-0", "00000000000000000000.log")  # '%' in the file name
        os.mkdir(os.path.dirname(path))
        Path(path).write_bytes(build_spec(spec))
        lines = _dump_lines(json_path, [path], mode)
    records = [json.loads(line) for line in lines if line.startswith('{"type":"record"')]
    expected = expected_records(spec, 0)
    assert len(records) == len(expected)
    for ours, want in zip(records, expected):
        key, key_encoding = _as_json_bytes(want.key, mode)
        value, value_encoding = _as_json_bytes(want.value, mode)
        headers = [dict(zip(("value", "value_encoding"), _as_json_bytes(v, mode)), key=k.decode("utf-8", "replace"))
                   for k, v in want.headers]
        assert ours == {"type": "record", "file": path, "batch_position": 0, "offset": want.offset,
                        "timestamp": want.timestamp, "sequence": want.sequence, "size": want.size,
                        "key_size": want.key_size, "value_size": want.value_size, "key": key,
                        "key_encoding": key_encoding, "value": value, "value_encoding": value_encoding,
                        "headers": headers}


@pytest.mark.parametrize("mode", ["auto", "base64"])
def test_fast_json_lines_equal_the_reference_on_the_corpus(mode):
    """Byte for byte over every golden and real log dir: legacy, control, compressed, damaged data."""
    roots = [str(p) for p in [GOLDEN / "logs", *sorted((GOLDEN / "damaged").glob("*")), *sorted(REAL.glob("*"))]
             if p.exists()]
    if not roots:
        pytest.skip("shared corpus not found")
    fast = _dump_lines(FAST_JSON, roots, mode)
    assert sum(line.startswith('{"type":"record"') for line in fast) > 5_000
    assert fast == _dump_lines(REFERENCE_JSON, roots, mode)


@pytest.mark.parametrize("codec_bits", [0, 6])  # 6: no codec, "unknown(6)" (the batch line only needs its name)
def test_the_batch_template_equals_the_reference_on_header_values_the_corpus_lacks(tmp_path, codec_bits):
    """A delete horizon, every flag, Long.MAX offsets and producer id, wrapping sequences, '%' in the name."""
    raw = bytearray(rb.build_batch((1 << 63) - 1, [rb.build_record(0, 0, b"k", b"v")], base_timestamp=123,
                                   attributes=0x78, producer_id=(1 << 63) - 1, base_sequence=0x7FFFFFFF))
    raw[22] |= codec_bits  # the low attribute byte; the CRC no longer matches: crc_valid false
    name = os.path.join(tmp_path, "t%d-0", "00000000000000000000.log")
    os.mkdir(os.path.dirname(name))
    Path(name).write_bytes(bytes(raw))
    fast = _dump_lines(FAST_JSON, [name], "auto")
    assert fast == _dump_lines(REFERENCE_JSON, [name], "auto")
    assert '"delete_horizon_ms":123' in fast[1] and '"file":"' + name.replace("\\", "\\\\") + '"' in fast[1]


def test_a_file_name_orjson_refuses_falls_back_to_json(tmp_path):
    """Non-UTF-8 file names arrive as surrogate escapes, which orjson rejects; json writes them."""
    name = os.path.join(os.fsdecode(tmp_path), "bad\udcff", "00000000000000000000.log")
    os.mkdir(os.path.dirname(name))
    Path(name).write_bytes(rb.build_batch(0, [rb.build_record(0, 0, b"k", b"v")], base_timestamp=1, max_timestamp=1))
    fast = _dump_lines(FAST_JSON, [name], "auto")
    assert fast == _dump_lines(REFERENCE_JSON, [name], "auto") and "\udcff" in fast[-1]


# ---------------------------------------------------------------------------------------------
# verify's record skim against decoding by the schema
# ---------------------------------------------------------------------------------------------


def _skim_by_reference(batch: rb.RecordBatchV2) -> tuple[int, int] | None:
    """What skim_records must answer, from the construct reference decode."""
    if batch.is_control:
        return None
    try:
        records = rb.decode_records_reference(batch)
    except CorruptDataError:
        return None
    deltas = [r.offset - batch.first_offset for r in records]
    if any(not a < b for a, b in zip([-1] + deltas, deltas)) or any(d > batch.last_offset - batch.first_offset
                                                                  for d in deltas):
        return None
    if not records or batch.timestamp_type == "LogAppendTime":
        return len(records), batch.max_timestamp
    return len(records), max(r.timestamp for r in records)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=generated_batches | uncompressed_batches, data=st.data())
def test_skim_agrees_with_the_reference_decode(spec: BatchSpec, data):
    raw = bytearray(build_spec(spec))
    if spec.compression_id == 0 and data.draw(st.booleans(), label="corrupt"):
        for _ in range(data.draw(st.integers(1, 3), label="mutations")):
            at = data.draw(st.integers(57, len(raw) - 1), label="position")  # records count, then records
            raw[at] = data.draw(st.sampled_from([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, raw[at] ^ 0x01]), label="byte")
    if data.draw(st.booleans(), label="shrink last offset delta"):
        raw[23:27] = struct.pack(">i", data.draw(st.integers(-1, max(0, len(spec.records) - 2)), label="delta"))
    batch = rb.parse_batch(bytes(raw), 0, "skimmed.log")
    assert rb.skim_records(batch) == _skim_by_reference(batch)


def test_skim_sees_a_record_that_leaves_bytes_unread():
    record = rb.build_record(0, 0, b"k", b"v")
    padded = bytes([record[0] + 2]) + record[1:] + b"\x00"  # length says one byte more than the fields use
    batch = rb.parse_batch(rb.build_batch(0, [padded], base_timestamp=1, max_timestamp=1), 0, "padded.log")
    assert rb.skim_records(batch) is None and _skim_by_reference(batch) is None

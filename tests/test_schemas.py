"""Every construct schema round-trips: parse then build gives back the same bytes.

As construct's own gallery tests do (`tests/declarativeunittest.py`), each schema is exercised
twice through one parametrised fixture, `form`: as declared (interpreted) and through
`.compile()`. Values come from hypothesis over each field's full Java range, and bytes come from
the golden corpus - segments, indexes and snapshots written by Kafka 3.8.0's own classes - so a
schema that drifted from Kafka's layout fails on real data, not only on data it built itself.
"""
from __future__ import annotations

import functools
import struct
import zlib
from pathlib import Path

import pytest
from construct import ConstructError, Int16sb, Int32sb, SizeofError, StreamError, Struct
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog_tools import codecs
from kafkalog_tools import protocol as p
from kafkalog_tools.formats import (checkpoint, control, legacy, offset_index, producer_snapshot, time_index,
                                    txn_index)
from kafkalog_tools.formats import record_batch as rb
from kafkalog_tools.native import elf_object
from kafkalog_tools.schema import derive_struct
from tests.strategies import (
    GOLDEN_EPOCH_CHECKPOINTS,
    GOLDEN_LOGS,
    GOLDEN_OFFSET_INDEXES,
    GOLDEN_SNAPSHOTS,
    GOLDEN_TIME_INDEXES,
    GOLDEN_TXN_INDEXES,
    INT16,
    INT32,
    INT64,
    NULLABLE_BYTES,
    REAL_EPOCH_CHECKPOINTS,
    REAL_OFFSET_CHECKPOINTS,
    legacy_specs,
    log_entries,
    record_specs,
)

EXAMPLES = settings(max_examples=60, deadline=None)

# ---------------------------------------------------------------------------------------------
# The interpreted/compiled pair
# ---------------------------------------------------------------------------------------------


@functools.cache
def _compiled(schema):
    return schema.compile()


@pytest.fixture(params=["interpreted", "compiled"], scope="module")
def form(request):
    """The schema as declared, or as `.compile()` makes it: every test below runs with both."""
    return (lambda schema: schema) if request.param == "interpreted" else _compiled


def round_trip(schema, data: bytes):
    """Parse `data`, build the result, and require the very same bytes back; returns the parse."""
    parsed = schema.parse(data)
    assert schema.build(parsed) == data
    return parsed


def plain(container) -> dict:
    return {k: v for k, v in container.items() if not k.startswith("_")}


# ---------------------------------------------------------------------------------------------
# Fixed-size schemas: any bytes of the right length round-trip
# ---------------------------------------------------------------------------------------------

FIXED = [
    ("BATCH_HEADER", rb.BATCH_HEADER, 61),
    ("LOG_ENTRY_HEADER", legacy.LOG_ENTRY_HEADER, 12),
    ("MESSAGE_PREFIX", legacy.MESSAGE_PREFIX, 6),
    ("CONTROL_KEY", control.CONTROL_KEY, 4),
    ("END_TXN_MARKER", control.END_TXN_MARKER, 6),
    ("offset index ENTRY_SCHEMA", offset_index.ENTRY_SCHEMA, 8),
    ("time index ENTRY_SCHEMA", time_index.ENTRY_SCHEMA, 12),
    ("txn index ENTRY_SCHEMA", txn_index.ENTRY_SCHEMA, 34),
    ("snapshot HEADER_SCHEMA", producer_snapshot.HEADER_SCHEMA, 6),
    ("snapshot ENTRY_SCHEMA", producer_snapshot.ENTRY_SCHEMA, 46),
    ("ELF_HEADER", elf_object.ELF_HEADER, 64),  # the kernels' machine code (System V ABI sizes)
    ("ELF SECTION_HEADER", elf_object.SECTION_HEADER, 64),
    ("ELF SYMBOL", elf_object.SYMBOL, 24),
    ("ELF RELOCATION", elf_object.RELOCATION, 24),
]


@pytest.mark.parametrize("name, schema, size", FIXED, ids=[f[0] for f in FIXED])
def test_fixed_size_schema_has_kafkas_size(form, name, schema, size):
    assert form(schema).sizeof() == size
    assert derive_struct(schema).size == size


@pytest.mark.parametrize("name, schema, size", FIXED, ids=[f[0] for f in FIXED])
@EXAMPLES
@given(data=st.data())
def test_fixed_size_schema_round_trips_any_bytes(form, name, schema, size, data):
    raw = data.draw(st.binary(min_size=size, max_size=size))
    parsed = round_trip(form(schema), raw)
    # and with trailing bytes present, parse reads exactly its own size
    assert plain(form(schema).parse(raw + b"\xff" * 3)) == plain(parsed)


def test_batch_header_field_layout_is_kafkas():
    """Offsets of DefaultRecordBatch: magic at 16, crc at 17, attributes at 21, count at 57."""
    raw = rb.BATCH_HEADER.build(dict(
        base_offset=0x0102030405060708, batch_length=0x11121314, partition_leader_epoch=-2, magic=2,
        crc=0xDEADBEEF, attributes=0x0013, last_offset_delta=7, base_timestamp=-1, max_timestamp=1 << 40,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, records_count=8))
    assert raw[0:8] == bytes.fromhex("0102030405060708")
    assert raw[8:12] == bytes.fromhex("11121314")
    assert raw[12:16] == b"\xff\xff\xff\xfe"
    assert raw[16] == 2
    assert raw[17:21] == bytes.fromhex("deadbeef")
    assert raw[21:23] == b"\x00\x13"
    assert raw[57:61] == b"\x00\x00\x00\x08"
    assert rb.HEADER_SIZE == 61  # RECORD_BATCH_OVERHEAD


# ---------------------------------------------------------------------------------------------
# V2 records
# ---------------------------------------------------------------------------------------------


def record_dict(spec) -> dict:
    return dict(attributes=spec.attributes, timestamp_delta=spec.timestamp_delta, offset_delta=spec.offset_delta,
                key=spec.key, value=spec.value, headers=[dict(key=k, value=v) for k, v in spec.headers])


def test_record_has_no_fixed_size(form):
    with pytest.raises(SizeofError):
        form(rb.RECORD).sizeof()


@EXAMPLES
@given(spec=record_specs)
def test_record_round_trips(form, spec):
    raw = rb.build_record(spec.offset_delta, spec.timestamp_delta, spec.key, spec.value,
                          list(spec.headers), spec.attributes)
    assert form(rb.RECORD).build(record_dict(spec)) == raw
    parsed = round_trip(form(rb.RECORD), raw)
    assert parsed.offset_delta == spec.offset_delta
    assert parsed.timestamp_delta == spec.timestamp_delta
    assert (parsed.key, parsed.value) == (spec.key, spec.value)
    assert [(h.key, h.value) for h in parsed.headers] == list(spec.headers)


@pytest.mark.parametrize("spec, expected", [
    # length 6 (zigzag 0x0c), attributes 0, ts delta 0, offset delta 0, key -1, value -1, 0 headers
    (dict(offset_delta=0, timestamp_delta=0, key=None, value=None), "0c 00 00 00 01 01 00"),
    # negative deltas zigzag to odd numbers: -1 -> 01, -64 -> 7f, -65 -> 81 01
    (dict(offset_delta=-1, timestamp_delta=-65, key=b"", value=b"v"), "10 00 8101 01 00 02 76 00"),
    (dict(offset_delta=63, timestamp_delta=-64, key=b"k", value=None, headers=[(b"h", None)]),
     "14 00 7f 7e 02 6b 01 02 02 68 01"),
    (dict(offset_delta=64, timestamp_delta=1 << 40, key=None, value=b"", headers=[(b"", b"")]),
     "1c 00 8080808080 40 8001 01 00 02 00 00"),
], ids=["all-null", "negative-deltas", "header-null-value", "wide-varints"])
def test_record_bytes_are_kafkas(form, spec, expected):
    spec = dict(spec)
    headers = spec.pop("headers", [])
    raw = bytes.fromhex(expected.replace(" ", ""))
    assert rb.build_record(headers=headers, **spec) == raw
    parsed = round_trip(form(rb.RECORD), raw)
    assert (parsed.key, parsed.value) == (spec["key"], spec["value"])
    assert parsed.offset_delta == spec["offset_delta"] and parsed.timestamp_delta == spec["timestamp_delta"]


@pytest.mark.parametrize("raw, why", [
    ("0e 00 00 00 01 01 00 ff", "a byte left inside the record's declared length"),
    ("10 00 00 00 01 01 02 01 00", "a negative header key size"),
    ("0c 00 00 00 01 01", "the record ends before its declared length"),
], ids=["unconsumed", "negative-header-key", "short"])
def test_record_rejects_what_kafka_rejects(form, raw, why):
    with pytest.raises((ConstructError, StreamError)):
        form(rb.RECORD).parse(bytes.fromhex(raw.replace(" ", "")))


# ---------------------------------------------------------------------------------------------
# Legacy V0/V1 messages
# ---------------------------------------------------------------------------------------------


@EXAMPLES
@given(spec=legacy_specs)
def test_legacy_log_entry_round_trips(form, spec):
    raw = legacy.build_entry(spec.offset, spec.magic, spec.key, spec.value, timestamp=spec.timestamp,
                             attributes=spec.attributes)
    parsed = round_trip(form(legacy.LOG_ENTRY), raw)
    message = parsed.message
    assert parsed.offset == spec.offset
    assert (message.magic, message.attributes, message.key, message.value) == (
        spec.magic, spec.attributes, spec.key, spec.value)
    assert message.timestamp == (spec.timestamp if spec.magic == 1 else None)
    assert message.crc == zlib.crc32(raw[16:])
    # the message alone, after the 12-byte log overhead
    assert plain(round_trip(form(legacy.MESSAGE), raw[12:])) == plain(message)


@pytest.mark.parametrize("magic, overhead", [(0, 14), (1, 22)])
def test_legacy_message_overheads(form, magic, overhead):
    """RECORD_OVERHEAD_V0 = 14, RECORD_OVERHEAD_V1 = 22: a message with null key and value."""
    raw = legacy.build_entry(5, magic, None, None, timestamp=-1)
    assert len(raw) == 12 + overhead
    assert struct.unpack_from(">i", raw, 8)[0] == overhead
    assert raw[-8:] == b"\xff" * 8  # key -1, value -1
    assert round_trip(form(legacy.LOG_ENTRY), raw).message.key is None


def test_legacy_message_schema_rejects_bytes_after_the_value(form):
    """Stricter than Kafka, whose LegacyRecord reads fields by position and ignores such bytes
    (as `read_message` does; see test_fast_paths): building must give back the parsed bytes."""
    raw = legacy.build_entry(0, 1, b"k", b"v")
    padded = raw[:8] + struct.pack(">i", len(raw) - 12 + 1) + raw[12:] + b"\x00"
    with pytest.raises(ConstructError):
        form(legacy.LOG_ENTRY).parse(padded)


# ---------------------------------------------------------------------------------------------
# Control records
# ---------------------------------------------------------------------------------------------


@EXAMPLES
@given(version=INT16, type_id=INT16, marker_version=INT16, coordinator_epoch=INT32)
def test_control_key_and_marker_round_trip(form, version, type_id, marker_version, coordinator_epoch):
    key = form(control.CONTROL_KEY).build(dict(version=version, type=type_id))
    assert key == struct.pack(">hh", version, type_id)
    assert plain(round_trip(form(control.CONTROL_KEY), key)) == dict(version=version, type=type_id)
    value = form(control.END_TXN_MARKER).build(dict(version=marker_version, coordinator_epoch=coordinator_epoch))
    assert value == struct.pack(">hi", marker_version, coordinator_epoch)
    assert round_trip(form(control.END_TXN_MARKER), value).coordinator_epoch == coordinator_epoch


# ---------------------------------------------------------------------------------------------
# Golden corpus: every batch header, record, legacy message and control record
# ---------------------------------------------------------------------------------------------


def v2_records(entry: bytes) -> list[bytes]:
    """The encoded records of a V2 batch (decompressed), split with RECORD's own length prefix."""
    header = rb.BATCH_HEADER.parse(entry)
    payload = codecs.decompress(header.attributes & 0x07, entry[61:], magic=2)
    records, pos = [], 0
    for _ in range(header.records_count):
        length, body = _varint_length(payload, pos)
        records.append(payload[pos : body + length])
        pos = body + length
    assert pos == len(payload), "records do not fill the batch"
    return records


def _varint_length(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


@pytest.mark.parametrize("log", GOLDEN_LOGS)
def test_every_golden_entry_round_trips(form, log: Path):
    """Batch headers, whole batches, every record (decompressed), control keys and values, and
    legacy messages including the inner messages of compressed wrappers."""
    counts = dict(batches=0, records=0, controls=0, legacy=0, inner=0)
    for position, entry in log_entries(log.read_bytes()):
        where = f"{log.name} at byte {position}"
        if entry[16] >= 2:
            header = round_trip(form(rb.BATCH_HEADER), entry[:61])
            assert header.batch_length == len(entry) - 12, where
            batch = round_trip(form(rb.RECORD_BATCH), entry)
            assert batch.header == header, where
            counts["batches"] += 1
            for raw in v2_records(entry):
                record = round_trip(form(rb.RECORD), raw)
                counts["records"] += 1
                if header.attributes & 0x20:  # control batch: key and value have their own schemas
                    key = round_trip(form(control.CONTROL_KEY), record.key)
                    if key.type in (0, 1):
                        round_trip(form(control.END_TXN_MARKER), record.value)
                    counts["controls"] += 1
        else:
            parsed = round_trip(form(legacy.LOG_ENTRY), entry)
            assert parsed.message.magic == entry[16], where
            counts["legacy"] += 1
            codec = parsed.message.attributes & 0x07
            if codec:
                inner = codecs.decompress(codec, parsed.message.value, magic=parsed.message.magic)
                for _, inner_entry in log_entries(inner):
                    round_trip(form(legacy.LOG_ENTRY), inner_entry)
                    counts["inner"] += 1
    assert counts["batches"] + counts["legacy"] > 0
    if counts["batches"]:
        assert counts["records"] >= counts["batches"] - counts["controls"]


def test_golden_corpus_covers_the_interesting_cases(golden):
    """The round trip above means something only if the corpus holds these."""
    seen = dict(codecs=set(), control=0, legacy_magics=set(), wrappers=0, headers=0)
    for log in sorted((golden / "logs").glob("*/*.log")):
        for _, entry in log_entries(log.read_bytes()):
            if entry[16] >= 2:
                header = rb.BATCH_HEADER.parse(entry)
                seen["codecs"].add(header.attributes & 0x07)
                seen["control"] += bool(header.attributes & 0x20)
                seen["headers"] += sum(rb.RECORD.parse(r).headers != [] for r in v2_records(entry))
            else:
                seen["legacy_magics"].add(entry[16])
                seen["wrappers"] += bool(entry[17] & 0x07)
    assert seen["codecs"] == {0, 1, 2, 3, 4}
    assert seen["control"] and seen["wrappers"] and seen["headers"]
    assert seen["legacy_magics"] == {0, 1}


# ---------------------------------------------------------------------------------------------
# Golden corpus: indexes and producer snapshots
# ---------------------------------------------------------------------------------------------

INDEX_FILES = ([pytest.param(p.values[0], offset_index.ENTRY_SCHEMA, id=p.id, marks=p.marks)
                for p in GOLDEN_OFFSET_INDEXES]
               + [pytest.param(p.values[0], time_index.ENTRY_SCHEMA, id=p.id, marks=p.marks)
                  for p in GOLDEN_TIME_INDEXES]
               + [pytest.param(p.values[0], txn_index.ENTRY_SCHEMA, id=p.id, marks=p.marks)
                  for p in GOLDEN_TXN_INDEXES])


@pytest.mark.parametrize("path, schema", INDEX_FILES)
def test_every_golden_index_entry_round_trips(form, path: Path, schema: Struct):
    data = path.read_bytes()
    size = schema.sizeof()
    assert len(data) % size == 0, f"{path.name}: a clean-shutdown index holds whole entries"
    entries = [round_trip(form(schema), data[i : i + size]) for i in range(0, len(data), size)]
    assert b"".join(form(schema).build(e) for e in entries) == data


@pytest.mark.parametrize("path", GOLDEN_SNAPSHOTS)
def test_every_golden_snapshot_round_trips(form, path: Path):
    data = path.read_bytes()
    parsed = round_trip(form(producer_snapshot.SNAPSHOT), data)
    assert parsed.version == 1
    assert parsed.crc == producer_snapshot.crc32c(data[6:]), "Kafka's CRC-32C covers every byte after it"
    # the library's writer (recomputing the CRC) produces Kafka's bytes too
    entries = [producer_snapshot.ProducerEntry(**plain(e)) for e in parsed.entries]
    assert producer_snapshot.build(entries) == data


@EXAMPLES
@given(entries=st.lists(st.tuples(INT64, INT16, INT32, INT64, INT32, INT64, INT32, INT64), max_size=4))
def test_snapshot_round_trips(form, entries):
    objects = [producer_snapshot.ProducerEntry(*e) for e in entries]
    data = producer_snapshot.build(objects)
    parsed = round_trip(form(producer_snapshot.SNAPSHOT), data)
    assert [tuple(plain(e).values()) for e in parsed.entries] == entries
    assert len(data) == 6 + 4 + 46 * len(entries)


# ---------------------------------------------------------------------------------------------
# Protocol primitives: varints
# ---------------------------------------------------------------------------------------------

VARINT_VECTORS = [  # ByteUtils.writeVarint: zigzag, then base-128 least significant group first
    (0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (-65, "8101"),
    (300, "d804"), (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f"),
]
VARLONG_VECTORS = [(0, "00"), (-1, "01"), (2**63 - 1, "feffffffffffffffff01"), (-(2**63), "ffffffffffffffffff01")]
UVARINT_VECTORS = [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (2**31 - 1, "ffffffff07"), (-1, "ffffffff0f")]


@pytest.mark.parametrize("construct, value, hexbytes",
                         [(p.VarInt, v, h) for v, h in VARINT_VECTORS]
                         + [(p.VarLong, v, h) for v, h in VARLONG_VECTORS]
                         + [(p.UVarInt, v, h) for v, h in UVARINT_VECTORS],
                         ids=[f"varint{v}" for v, _ in VARINT_VECTORS] + [f"varlong{v}" for v, _ in VARLONG_VECTORS]
                         + [f"uvarint{v}" for v, _ in UVARINT_VECTORS])
def test_varint_vectors(form, construct, value, hexbytes):
    raw = bytes.fromhex(hexbytes)
    assert form(construct).build(value) == raw
    assert form(construct).parse(raw) == value


@EXAMPLES
@given(value=INT32, big=INT64)
def test_varints_round_trip_their_whole_range(form, value, big):
    for construct, v, width in ((p.VarInt, value, 5), (p.VarLong, big, 10), (p.UVarInt, value, 5)):
        raw = form(construct).build(v)
        assert 1 <= len(raw) <= width
        assert form(construct).parse(raw) == v
        assert all(b & 0x80 for b in raw[:-1]) and not raw[-1] & 0x80


@pytest.mark.parametrize("construct, raw", [
    (p.VarInt, "808080808000"), (p.UVarInt, "ffffffffff01"), (p.VarLong, "ffffffffffffffffff8001"),
], ids=["varint-6-bytes", "uvarint-6-bytes", "varlong-11-bytes"])
def test_a_varint_longer_than_its_width_is_rejected(form, construct, raw):
    """ByteUtils: "Varint is too long, the most significant bit in the 5th byte is set"."""
    with pytest.raises(ConstructError, match="longer than"):
        form(construct).parse(bytes.fromhex(raw))


@pytest.mark.parametrize("raw, value", [
    ("ffffffff0f", -(2**31)),  # the canonical encoding of Int.MIN
    ("ffffffff7f", -(2**31)),  # 5th byte 0x7f: bits beyond 32 overflow silently, as in Java
    ("8080808010", 0),  # only bit 32 set: masked away entirely
    ("8080808070", 0),
], ids=["canonical-min", "overflow-7f", "overflow-bit32", "overflow-high-bits"])
def test_a_varints_fifth_byte_overflows_silently(form, raw, value):
    assert form(p.VarInt).parse(bytes.fromhex(raw)) == value


def test_a_varint_cut_short_is_a_stream_error(form):
    with pytest.raises(StreamError):
        form(p.VarInt).parse(b"\x80\x80")


# ---------------------------------------------------------------------------------------------
# Protocol primitives: length-prefixed bytes and strings
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("construct, raw, value", [
    (p.NullableString, "ffff", None),
    (p.NullableString, "fffe", None),  # any negative length is null
    (p.NullableString, "0000", ""),
    (p.String, "00026869", "hi"),
    (p.CompactNullableString, "00", None),
    (p.CompactNullableString, "01", ""),
    (p.CompactString, "036869", "hi"),
    (p.NullableBytes32, "ffffffff", None),
    (p.Bytes32, "00000000", b""),
    (p.CompactNullableBytes, "00", None),
    (p.CompactBytes, "0200", b"\x00"),
], ids=lambda x: x if isinstance(x, str) else None)
def test_size_prefixed_null_conventions(form, construct, raw, value):
    assert form(construct).parse(bytes.fromhex(raw)) == value
    canonical = {"fffe": "ffff"}.get(raw, raw)  # null is written as -1
    assert form(construct).build(value) == bytes.fromhex(canonical)


@pytest.mark.parametrize("construct, raw", [(p.String, "ffff"), (p.CompactString, "00"), (p.Bytes32, "ffffffff")])
def test_non_nullable_fields_reject_null(form, construct, raw):
    with pytest.raises(ConstructError, match="null"):
        form(construct).parse(bytes.fromhex(raw))
    with pytest.raises(ConstructError, match="None"):
        form(construct).build(None)


@EXAMPLES
@given(text=st.none() | st.text(max_size=40), data=NULLABLE_BYTES)
def test_size_prefixed_round_trips(form, text, data):
    for construct in (p.NullableString, p.CompactNullableString):
        raw = form(construct).build(text)
        assert round_trip(form(construct), raw) == text
    for construct in (p.NullableBytes32, p.CompactNullableBytes):
        raw = form(construct).build(data)
        assert round_trip(form(construct), raw) == data
    if text is not None:
        encoded = text.encode("utf-8")
        assert form(p.String).build(text) == struct.pack(">h", len(encoded)) + encoded
        assert form(p.CompactString).build(text) == p.UVarInt.build(len(encoded) + 1) + encoded


def test_malformed_utf8_text_is_replaced_not_rejected(form):
    assert form(p.String).parse(b"\x00\x02\xff\x41") == "\ufffdA"


# ---------------------------------------------------------------------------------------------
# Protocol primitives: arrays, tagged fields, UUIDs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("construct, raw, value", [
    (p.Array(Int16sb), "00000000", []),
    (p.Array(Int16sb), "000000020001fffe", [1, -2]),
    (p.Array(Int16sb, nullable=True), "ffffffff", None),
    (p.CompactArray(Int16sb), "01", []),
    (p.CompactArray(Int16sb), "030001fffe", [1, -2]),
    (p.CompactArray(Int16sb, nullable=True), "00", None),
    (p.KafkaArray(Int16sb, compact=False, countfield=p.VarInt), "040001fffe", [1, -2]),  # record headers
], ids=["classic-empty", "classic", "classic-null", "compact-empty", "compact", "compact-null", "varint-count"])
def test_kafka_arrays(form, construct, raw, value):
    assert round_trip(form(construct), bytes.fromhex(raw)) == value


def test_non_nullable_array_rejects_null(form):
    with pytest.raises(ConstructError, match="null"):
        form(p.Array(Int16sb)).parse(b"\xff\xff\xff\xff")
    with pytest.raises(ConstructError, match="None"):
        form(p.CompactArray(Int16sb)).build(None)


TAGGED = p.TaggedFields({0: ("name", p.CompactString), 3: ("epoch", Int32sb)})


def test_tagged_fields_known_and_unknown(form):
    # 3 fields: tag 0 (size 3: compact "ab"), tag 3 (size 4: int32 7), tag 9 (size 2: unknown bytes)
    raw = bytes.fromhex("03" "00 03 03 6162" "03 04 00000007" "09 02 beef".replace(" ", ""))
    parsed = round_trip(form(TAGGED), raw)
    assert parsed == {"name": "ab", "epoch": 7, "_unknown": [{"tag": 9, "data": b"\xbe\xef"}]}


def test_tagged_fields_are_written_in_tag_order(form):
    built = form(TAGGED).build({"_unknown": [{"tag": 1, "data": b"x"}], "epoch": -1, "name": ""})
    assert built == bytes.fromhex("03" "00 01 01" "01 01 78" "03 04 ffffffff".replace(" ", ""))
    assert form(p.NoTaggedFields).build({}) == b"\x00"
    assert form(p.NoTaggedFields).parse(b"\x00") == {}
    with pytest.raises(ConstructError, match="unknown tagged field"):
        form(TAGGED).build({"nope": 1})


@EXAMPLES
@given(tags=st.dictionaries(st.integers(0, 20_000), st.binary(max_size=10), max_size=4))
def test_unknown_tagged_fields_round_trip(form, tags):
    fields = {"_unknown": [{"tag": t, "data": d} for t, d in sorted(tags.items())]} if tags else {}
    raw = form(p.NoTaggedFields).build(fields)
    assert round_trip(form(p.NoTaggedFields), raw) == fields


def test_uuid_text_form(form):
    raw = bytes(range(16))
    assert form(p.Uuid).parse(raw) == "AAECAwQFBgcICQoLDA0ODw"
    assert form(p.Uuid).build("AAECAwQFBgcICQoLDA0ODw") == raw
    assert p.uuid_to_text(bytes(16)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert p.uuid_to_text(b"\xfb" * 16) == "-_v7-_v7-_v7-_v7-_v7-w"  # URL-safe alphabet, no padding
    assert p.uuid_to_standard("AAECAwQFBgcICQoLDA0ODw") == "00010203-0405-0607-0809-0a0b0c0d0e0f"
    with pytest.raises(ValueError, match="16 bytes"):
        p.uuid_from_text("AAEC")


@EXAMPLES
@given(raw=st.binary(min_size=16, max_size=16))
def test_uuid_round_trips(form, raw):
    text = round_trip(form(p.Uuid), raw)
    assert len(text) == 22 and "=" not in text
    assert p.uuid_from_text(text) == raw


# ---------------------------------------------------------------------------------------------
# Checkpoint text files
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", GOLDEN_EPOCH_CHECKPOINTS + REAL_EPOCH_CHECKPOINTS)
def test_leader_epoch_checkpoint_text_round_trips(path: Path):
    entries = checkpoint.read_leader_epochs(path)
    text = path.read_text()
    if not text:  # created empty with the partition; Kafka has not written it yet
        assert entries == []
        return
    assert checkpoint.format_leader_epochs(entries) == text


@pytest.mark.parametrize("path", REAL_OFFSET_CHECKPOINTS)
def test_offset_checkpoint_text_round_trips(path: Path):
    entries = checkpoint.read_offsets(path)
    text = path.read_text()
    if not text:  # a checkpoint Kafka has created but not yet written
        assert entries == {}
        return
    assert checkpoint.format_offsets(entries) == text


def test_checkpoint_corpus_is_not_trivial(golden, real):
    epochs = checkpoint.read_leader_epochs(golden / "logs" / "golden-v2-mixed-0" / "leader-epoch-checkpoint")
    assert epochs == [(0, 0), (1, 662), (4, 1348)]
    offsets = checkpoint.read_offsets(real / "zk-broker-a" / "recovery-point-offset-checkpoint")
    assert len(offsets) == 54 and ("__consumer_offsets", 22) in offsets


@EXAMPLES
@given(epochs=st.lists(st.tuples(INT32, INT64), max_size=5),
       offsets=st.dictionaries(st.tuples(st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True),
                                         st.integers(0, 10_000)), INT64, max_size=5))
def test_checkpoint_text_round_trips(epochs, offsets):
    assert checkpoint.parse(checkpoint.format_leader_epochs(epochs), 2, "x").entries == epochs
    text = checkpoint.format_offsets(offsets)
    assert {(t, int(n)): o for t, n, o in checkpoint.parse(text, 3, "x").entries} == offsets


@EXAMPLES
@given(entries=st.lists(st.tuples(st.integers(0, 255) | INT16, INT64, INT64, INT64, INT64), max_size=6),
       tail=st.binary(max_size=33))
def test_txn_index_columns_read_as_the_schema_and_kafka(entries, tail):
    """The `.txnindex` read as columns (numpy, for verify) against the schema's parse: the same
    fields, and Kafka's version check on each entry's first byte, signed (the second is ignored; a
    first byte of 0x80-0xFF is a negative version, which Kafka accepts)."""
    from kafkalog_tools.errors import CorruptDataError

    data = b"".join(txn_index.ENTRY_SCHEMA.build(dict(zip(("version",) + txn_index.COLUMNS, entry)))
                    for entry in entries)
    index = txn_index.TransactionIndex("/x/00000000000000000042.txnindex", data + tail)
    parsed = [txn_index.ENTRY_SCHEMA.parse(data[i:i + 34]) for i in range(0, len(data), 34)]
    unknown = [slot for slot, entry in enumerate(parsed) if entry.version >> 8 > 0]  # (an int16: the high byte, signed)
    if unknown:
        with pytest.raises(CorruptDataError) as raised:
            index.columns()
        assert raised.value.position == unknown[0] * 34
        assert f"version {parsed[unknown[0]].version >> 8} " in str(raised.value)
        return
    columns = index.columns()
    for name in ("version",) + txn_index.COLUMNS:
        assert columns[name].tolist() == [entry[name] for entry in parsed]
    assert index.entries() == [txn_index.AbortedTxn(e.version >> 8, e.producer_id, e.first_offset, e.last_offset,
                                                    e.last_stable_offset, slot * 34) for slot, e in enumerate(parsed)]


def test_aborted_txns_keep_their_order_as_objects_and_as_columns():
    import numpy as np

    one = txn_index.AbortedTxn(0, 7, 10, 20, 5)
    found = txn_index.AbortedTxns()
    found.extend_columns(np.array([[1, 2], [100, 200], [110, 210], [90, 190]], dtype=np.int64))
    found.append(one)
    more = txn_index.AbortedTxns()
    more.extend_columns(np.empty((4, 0), dtype=np.int64))
    more.extend([txn_index.AbortedTxn(0, 3, 300, 310, 290)])
    more.extend_columns(np.array([[4], [400], [410], [390]], dtype=np.int64))
    found.extend(more)
    expected = [txn_index.AbortedTxn(0, 1, 100, 110, 90), txn_index.AbortedTxn(0, 2, 200, 210, 190), one,
                txn_index.AbortedTxn(0, 3, 300, 310, 290), txn_index.AbortedTxn(0, 4, 400, 410, 390)]
    assert len(found) == 5 and list(found) == expected
    assert found.columns().tolist() == [[getattr(t, name) for t in expected] for name in txn_index.COLUMNS]
    assert txn_index.AbortedTxns().columns().shape == (4, 0) and not txn_index.AbortedTxns()

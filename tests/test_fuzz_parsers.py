"""Every parser entry point of the library, fed arbitrary bytes: it returns, or it raises a
KafkaLogError (the library's one family of errors on bad data) - never anything else.

test_schemas.py checks that well-formed values round-trip; these properties cover the other side:
random bytes, and valid structures with random damage (hypothesis shrinks any failure to a small
reproducer). The CLI-level counterpart is the mutation fuzzer (test_fuzz.py).
"""
from __future__ import annotations

import struct
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog_tools import codecs
from kafkalog_tools.crc import crc32c
from kafkalog_tools.errors import KafkaLogError
from kafkalog_tools.formats import checkpoint, legacy, producer_snapshot, properties
from kafkalog_tools.formats import record_batch as rb
from kafkalog_tools.formats.offset_index import OffsetIndex
from kafkalog_tools.formats.segment import BadEntry, SegmentFile
from kafkalog_tools.formats.time_index import TimeIndex
from kafkalog_tools.formats.txn_index import TransactionIndex
from kafkalog_tools.payloads import decoders, quorum_state
from kafkalog_tools.payloads.kraft_control import decode_control_value
from tests.strategies import batch_specs, legacy_specs

EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMIT = 1 << 20

damage = st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=6)


def damaged(data: bytes, edits, fix_crc: bool) -> bytes:
    """`data` with bytes overwritten at (position mod length); the V2 CRC recomputed if asked, so
    the damage reaches the record decoder."""
    out = bytearray(data)
    for position, value in edits:
        if out:
            out[position % len(out)] = value
    if fix_crc and len(out) >= 21:
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def only_kafkalog_errors(call, *args, **kwargs):
    try:
        return call(*args, **kwargs)
    except KafkaLogError:
        return None


def v2_bytes(spec) -> bytes:
    records = [rb.build_record(r.offset_delta, r.timestamp_delta, r.key, r.value, list(r.headers), r.attributes)
               for r in spec.records]
    return rb.build_batch(spec.base_offset, records, compression_id=spec.compression_id,
                          base_timestamp=spec.base_timestamp, max_timestamp=spec.max_timestamp,
                          producer_id=spec.producer_id, producer_epoch=spec.producer_epoch,
                          base_sequence=spec.base_sequence, partition_leader_epoch=spec.partition_leader_epoch,
                          attributes=rb.ATTR_TRANSACTIONAL if spec.transactional else 0)


# ---------------------------------------------------------------------------------------------
# Batches and segments
# ---------------------------------------------------------------------------------------------


def read_everything(batch) -> None:
    """What the commands ask of a batch: its offsets and records, by the fast and the reference path."""
    only_kafkalog_errors(lambda: (batch.base_offset, batch.last_offset, batch.compression, batch.last_sequence))
    only_kafkalog_errors(batch.records)
    if isinstance(batch, rb.RecordBatchV2):
        only_kafkalog_errors(rb.decode_records_reference, batch)


@EXAMPLES
@given(spec=batch_specs, edits=damage, fix_crc=st.booleans())
def test_a_damaged_v2_batch_raises_only_kafkalog_errors(spec, edits, fix_crc):
    data = damaged(v2_bytes(spec), edits, fix_crc)
    batch = only_kafkalog_errors(rb.parse_batch, data, 0, "<fuzz>", LIMIT)
    if batch is not None:
        read_everything(batch)


@EXAMPLES
@given(spec=legacy_specs, codec=st.sampled_from([0, 1, 2, 3]), edits=damage)
def test_a_damaged_legacy_entry_raises_only_kafkalog_errors(spec, codec, edits):
    entry = legacy.build_entry(spec.offset, spec.magic, spec.key, spec.value, timestamp=spec.timestamp)
    if codec:
        payload = codecs.compress(codec, entry, magic=spec.magic)
        entry = legacy.build_entry(spec.offset, spec.magic, None, payload, attributes=codec)
    data = damaged(entry, edits, False)
    batch = only_kafkalog_errors(legacy.parse_batch, data, 0, len(data), "<fuzz>", LIMIT)
    if batch is not None:
        read_everything(batch)


@EXAMPLES
@given(data=st.binary(max_size=600), prefix=st.sampled_from([b"", rb.build_batch(0, [rb.build_record(0, 0, b"k", b"v")])]))
def test_a_segment_of_arbitrary_bytes_is_walked_without_surprises(data, prefix):
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, "00000000000000000000.log")
        path.write_bytes(prefix + data)
        with SegmentFile(path, decompress_limit=LIMIT) as segment:
            for entry in segment.entries():
                if not isinstance(entry, BadEntry):
                    read_everything(entry)
            assert segment.stop is not None and segment.stop_position <= segment.end


@EXAMPLES
@given(codec=st.integers(-1, 6), magic=st.integers(0, 2), data=st.binary(max_size=300))
def test_every_codec_on_arbitrary_bytes(codec, magic, data):
    only_kafkalog_errors(codecs.decompress, codec, data, magic=magic, limit=LIMIT)


# ---------------------------------------------------------------------------------------------
# Indexes, snapshots, checkpoints, properties
# ---------------------------------------------------------------------------------------------


@EXAMPLES
@given(data=st.binary(max_size=200), target=st.integers(-(1 << 63), (1 << 63) - 1))
def test_indexes_of_arbitrary_bytes(data, target):
    for kind in (OffsetIndex, TimeIndex):
        index = kind("00000000000000000000.index", data=data)
        index.entries(all_slots=True)
        index.valid_count()
        index.zero_tail()
        if index.entry_count:
            index.lookup(target)
    only_kafkalog_errors(TransactionIndex("00000000000000000000.txnindex", data=data).entries)


@EXAMPLES
@given(data=st.binary(max_size=300))
def test_a_snapshot_of_arbitrary_bytes(data):
    only_kafkalog_errors(producer_snapshot.parse, data, "00000000000000000000.snapshot")


@EXAMPLES
@given(valid=st.lists(st.tuples(st.integers(0, 5), st.integers(-5, 5)), max_size=3), edits=damage)
def test_a_damaged_snapshot(valid, edits):
    entries = [producer_snapshot.ProducerEntry(pid, epoch, 0, 0, 0, 0, 0, -1) for pid, epoch in valid]
    only_kafkalog_errors(producer_snapshot.parse, damaged(producer_snapshot.build(entries), edits, False))


text = st.text(alphabet=st.sampled_from("0123456789 -\n\r\tab=:_\\#!\x00\u00e9"), max_size=80)


@EXAMPLES
@given(content=text, fields=st.sampled_from([2, 3]))
def test_checkpoints_and_properties_of_arbitrary_text(content, fields):
    only_kafkalog_errors(checkpoint.parse, content, fields, "checkpoint")
    properties.parse_properties(content)


@EXAMPLES
@given(content=st.text(max_size=120) | st.sampled_from([
    '{"data_version":0}', '{"leaderId":1,"leaderEpoch":"x","data_version":1}', "[]", "null", '{"data_version":9}']))
def test_quorum_state_of_arbitrary_text(content):
    only_kafkalog_errors(quorum_state.parse_quorum_state, content)


# ---------------------------------------------------------------------------------------------
# Internal-topic payloads and KRaft control records
# ---------------------------------------------------------------------------------------------

payload = st.none() | st.binary(max_size=80) | st.sampled_from([b"\x00\x00", b"\x00\x01", b"\x00\x02", b"\x00\x03",
                                                                 b"\x00\x00\x00\x00", b"\x01\x00", b"\xff\xff"])


@EXAMPLES
@given(key=payload, value=payload, tail=st.binary(max_size=40))
def test_every_payload_decoder_on_arbitrary_keys_and_values(key, value, tail):
    for decoder in decoders().values():
        only_kafkalog_errors(decoder.decode, key if key is None else key + tail, value, offset=0)


@EXAMPLES
@given(control_type=st.integers(-2, 8), value=payload)
def test_kraft_control_values_of_arbitrary_bytes(control_type, value):
    only_kafkalog_errors(decode_control_value, control_type, value)

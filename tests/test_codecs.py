"""Kafka's compression codecs and Java's UTF-8 decoding, in the forms Java Kafka writes and reads.

Round trips for every codec and message format; the Kafka-specific encodings (lz4 frames with the
magic-0 "broken" header checksum, xerial-framed and raw snappy, concatenated gzip members, zstd
frames without a content size); decompression bombs and garbage, which must end in a
DecompressionError quickly and in little memory; xxHash32; and `java_text.decode_utf8`, which must
replace malformed UTF-8 as JDK 17's `new String(bytes, UTF_8)` does.
"""
from __future__ import annotations

import gzip
import io
import itertools
import random
import struct
import threading
import time
import tracemalloc
import zlib
from pathlib import Path

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from isal import isal_zlib

from kafkalog_tools import codecs
from kafkalog_tools.codecs import gzip_codec, lz4_codec, snappy_codec
from kafkalog_tools.errors import CorruptDataError, DecompressionError
from kafkalog_tools.fuzz.bombs import (CRC32_OF_1_GIB_OF_ZEROS, GIB, MIB, gzip_zeros, lz4_zeros, raw_snappy_zeros,
                                     xerial_zeros, zstd_zeros)
from kafkalog_tools.formats.segment import SegmentFile
from kafkalog_tools.output.java_text import decode_utf8
from tests.strategies import GOLDEN_LOGS

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# zstd exists only for V2 (magic 2); the legacy formats carry gzip, snappy and lz4
CODEC_MAGICS = [(c, m) for c in (GZIP, SNAPPY, LZ4) for m in (0, 1, 2)] + [(ZSTD, 2)]
CODEC_MAGIC_IDS = [f"{NAMES[c]}-v{m}" for c, m in CODEC_MAGICS]
EXAMPLES = settings(max_examples=40, deadline=None)

# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec, magic", CODEC_MAGICS, ids=CODEC_MAGIC_IDS)
@EXAMPLES
@given(data=st.binary(max_size=3000) | st.text(max_size=2000).map(str.encode))
def test_every_codec_round_trips(codec, magic, data):
    payload = codecs.compress(codec, data, magic=magic)
    assert codecs.decompress(codec, payload, magic=magic) == data


@pytest.mark.parametrize("codec, magic", CODEC_MAGICS, ids=CODEC_MAGIC_IDS)
@pytest.mark.parametrize("size", [0, 1, 32 * 1024, 32 * 1024 + 1, 64 * 1024, 64 * 1024 + 1, 200_003])
def test_round_trips_across_block_and_chunk_boundaries(codec, magic, size):
    """xerial snappy chunks hold 32 KiB, Kafka's lz4 blocks 64 KiB: sizes on and past the edges."""
    data = (bytes(range(256)) * (size // 256 + 1))[:size]
    data = bytes(b ^ (i * 7 >> 9 & 0xFF) for i, b in enumerate(data))  # some entropy, some repetition
    payload = codecs.compress(codec, data, magic=magic)
    assert codecs.decompress(codec, payload, magic=magic, limit=max(size, 1)) == data


def test_none_is_the_identity():
    assert codecs.compress(0, b"abc") == b"abc"
    assert codecs.decompress(0, memoryview(b"abc")) == b"abc"


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_ids_are_decompression_errors(codec_id):
    with pytest.raises(DecompressionError, match=f"unknown compression type id {codec_id}"):
        codecs.decompress(codec_id, b"\x00" * 10)
    assert codecs.name_of(codec_id) == f"unknown({codec_id})"


# ---------------------------------------------------------------------------------------------
# lz4: Kafka's frame, the magic-0 header checksum, and standard frames
# ---------------------------------------------------------------------------------------------


def test_lz4_frames_are_written_as_kafka_writes_them():
    """Lz4BlockOutputStream: FLG 0x60, BD 0x40 (64 KiB blocks), HC, blocks, zero end mark."""
    for magic in (0, 1, 2):
        frame = codecs.compress(LZ4, b"kafka" * 100, magic=magic)
        assert frame[:6] == bytes.fromhex("04224d186040")
        assert frame[-4:] == b"\x00\x00\x00\x00"
    # the spec hashes FLG..BD; Kafka's magic-0 writer hashed the frame magic too
    assert codecs.compress(LZ4, b"x", magic=1)[6] == (lz4_codec.xxh32(bytes.fromhex("6040")) >> 8) & 0xFF == 0x82
    assert codecs.compress(LZ4, b"x", magic=0)[6] == (lz4_codec.xxh32(bytes.fromhex("04224d186040")) >> 8) & 0xFF


def test_lz4_magic_0_frame_with_the_broken_header_checksum():
    data = b"legacy v0 lz4 " * 50
    frame = codecs.compress(LZ4, data, magic=0)
    assert codecs.decompress(LZ4, frame, magic=0) == data  # Kafka's reader skips HC for magic 0
    with pytest.raises(RuntimeError):  # which is why the lz4 library alone cannot read it
        lz4.frame.decompress(frame)
    for magic in (1, 2):
        with pytest.raises(DecompressionError, match="Stream frame descriptor corrupted"):
            codecs.decompress(LZ4, frame, magic=magic)


def test_lz4_magic_1_frames_are_standard():
    data = b"standard " * 300
    frame = codecs.compress(LZ4, data, magic=1)
    assert lz4.frame.decompress(frame) == data
    corrupted = frame[:6] + bytes([frame[6] ^ 0xFF]) + frame[7:]
    with pytest.raises(DecompressionError, match="Stream frame descriptor corrupted"):
        codecs.decompress(LZ4, corrupted, magic=1)
    assert codecs.decompress(LZ4, corrupted, magic=0) == data  # not checked for magic 0


@pytest.mark.parametrize("block_size", [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB,
                                        lz4.frame.BLOCKSIZE_MAX1MB, lz4.frame.BLOCKSIZE_MAX4MB])
@pytest.mark.parametrize("magic", [1, 2])
def test_lz4_standard_frames_with_checksums_and_content_size(block_size, magic):
    """What other clients (librdkafka) write: any BD id 4-7, block checksums, content size and checksum."""
    data = bytes(range(256)) * 1500 + b"tail"
    frame = lz4.frame.compress(data, block_size=block_size, block_linked=False, block_checksum=True,
                               content_checksum=True, store_size=True)
    assert frame[4] & 0x18 == 0x18  # content size and block checksum flags
    assert codecs.decompress(LZ4, frame, magic=magic) == data


def test_lz4_block_checksums_are_verified_and_the_content_checksum_is_not():
    data = bytes(range(200)) * 100
    frame = bytearray(lz4.frame.compress(data, block_linked=False, block_checksum=True, content_checksum=True))
    frame[-1] ^= 0xFF  # the content checksum: Kafka skips it unverified
    assert codecs.decompress(LZ4, bytes(frame), magic=2) == data
    frame[-1] ^= 0xFF
    frame[-9] ^= 0xFF  # the last block's checksum (before the end mark and content checksum)
    with pytest.raises(DecompressionError, match="Block checksum mismatch"):
        codecs.decompress(LZ4, bytes(frame), magic=2)


def test_lz4_dependent_blocks_are_rejected():
    frame = lz4.frame.compress(b"abc" * 100_000, block_linked=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    with pytest.raises(DecompressionError, match="independent blocks"):
        codecs.decompress(LZ4, frame, magic=2)


@pytest.mark.parametrize("payload, message", [
    (b"\x04\x22\x4d", "Stream ended prematurely"),
    (bytes.fromhex("05224d18604082") + b"\x00" * 4, "invalid magic bytes"),
    (bytes.fromhex("04224d18604082") + struct.pack("<I", 70_000) + b"\x00" * 10, "Block size 70000 exceeded max: 65536"),
    (bytes.fromhex("04224d18604082") + struct.pack("<I", 100) + b"\x00" * 10, "Stream ended prematurely"),
    (bytes.fromhex("04224d18604082") + struct.pack("<I", 0x80000003) + b"abc", "Stream ended prematurely"),
    (bytes.fromhex("04224d18604882"), "block descriptor"),
], ids=["short", "bad-magic", "block-too-big", "block-cut", "no-end-mark", "reserved-bd-bit"])
def test_lz4_malformed_frames(payload, message):
    with pytest.raises(DecompressionError, match=message):
        codecs.decompress(LZ4, payload, magic=2)


def test_lz4_stored_blocks_are_copied():
    frame = bytes.fromhex("04224d18604082") + struct.pack("<I", 0x80000005) + b"hello" + b"\x00" * 4
    assert codecs.decompress(LZ4, frame, magic=2) == b"hello"


# ---------------------------------------------------------------------------------------------
# xxHash32
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("data, seed, expected", [
    (b"", 0, 0x02CC5D05),
    (b"a", 0, 0x550D7456),
    (b"abc", 0, 0x32D153FF),
    (b"Nobody inspects the spammish repetition", 0, 0xE2293B2F),
])
def test_xxh32_known_vectors(data, seed, expected):
    assert lz4_codec.xxh32(data, seed) == expected


@EXAMPLES
@given(data=st.binary(max_size=200))
def test_xxh32_equals_the_content_checksum_lz4_frame_writes(data):
    """lz4.frame's content checksum is xxh32(content, seed 0), little-endian, after the end mark."""
    frame = lz4.frame.compress(data, content_checksum=True)
    assert lz4_codec.xxh32(data) == struct.unpack("<I", frame[-4:])[0]


@pytest.mark.parametrize("store_size", [False, True])
def test_header_checksum_equals_the_hc_byte_lz4_frame_writes(store_size):
    frame = lz4.frame.compress(b"x" * 1000, block_linked=False, store_size=store_size)
    end = 6 + (8 if store_size else 0)
    assert lz4_codec.header_checksum(frame, end, magic=2) == frame[end]
    assert lz4_codec.header_checksum(frame, end, magic=1) == frame[end]


# ---------------------------------------------------------------------------------------------
# snappy: xerial framing and raw blocks
# ---------------------------------------------------------------------------------------------


def test_snappy_is_written_with_xerial_framing():
    data = b"x" * 100_000
    payload = codecs.compress(SNAPPY, data)
    assert payload[:16] == bytes.fromhex("82534e41505059000000000100000001")
    chunks, pos = [], 16
    while pos < len(payload):
        (length,) = struct.unpack_from(">i", payload, pos)
        chunks.append(snappy.uncompress(payload[pos + 4 : pos + 4 + length]))
        pos += 4 + length
    assert [len(c) for c in chunks] == [32768, 32768, 32768, 1696]
    assert b"".join(chunks) == data


@EXAMPLES
@given(parts=st.lists(st.binary(max_size=40_000), min_size=1, max_size=3))
def test_concatenated_xerial_streams_are_read_across(parts):
    """SnappyInputStream: a chunk length equal to the magic's first 4 bytes starts a new stream."""
    payload = b"".join(codecs.compress(SNAPPY, p) for p in parts)
    assert codecs.decompress(SNAPPY, payload) == b"".join(parts)


@pytest.mark.parametrize("data", [b"", b"short", b"raw snappy, as some clients write it" * 40])
def test_raw_snappy_blocks_are_accepted(data):
    assert codecs.decompress(SNAPPY, snappy.compress(data)) == data


def test_an_empty_xerial_stream_is_empty():
    assert codecs.decompress(SNAPPY, snappy_codec.XERIAL_HEADER) == b""


def test_a_xerial_stream_ends_where_fewer_than_4_bytes_are_left():
    """SnappyInputStream.hasNextChunk reads 3 bytes of a chunk length as the end of the stream, and
    Kafka's record iterator reads the records before them (seed 777001, case 749: we failed them)."""
    payload = codecs.compress(SNAPPY, b"records") + b"\x00\x00\x01"
    assert codecs.decompress(SNAPPY, payload) == b"records"


@pytest.mark.parametrize("payload, message", [
    (snappy_codec.XERIAL_HEADER + struct.pack(">i", 100) + b"abc", "overruns"),
    (snappy_codec.XERIAL_HEADER + struct.pack(">i", -5) + b"abc", "overruns"),
    (b"\xff\xff\xff\xff\xff\xff", "snappy"),
], ids=["chunk-overruns", "negative-chunk", "bad-raw-length"])
def test_malformed_snappy(payload, message):
    with pytest.raises(DecompressionError, match=message):
        codecs.decompress(SNAPPY, payload)


# ---------------------------------------------------------------------------------------------
# gzip and zstd
# ---------------------------------------------------------------------------------------------


def test_gzip_reserved_header_flags_are_ignored_as_java_does():
    """GZIPInputStream.readHeader skips the reserved FLG bits that zlib refuses ('unknown header flags
    set'): Kafka reads such a batch (seed 20261124, case 1376)."""
    payload = bytearray(gzip.compress(b"records", mtime=0))
    payload[3] |= 0xE0
    assert codecs.decompress(GZIP, bytes(payload)) == b"records"


class _ZlibReadingHeadersAsJava:
    """zlib's decompressobj for one gzip member, its header first rewritten as GZIPInputStream.readHeader
    reads it (reserved FLG bits ignored, a header CRC checked over the bytes as they are), which zlib
    refuses: the reference the ISA-L inflater is compared with."""

    def __init__(self, wbits: int):
        self.inflater = zlib.decompressobj(wbits)
        self.started = False

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if not self.started and len(data) >= 10 and data[3] & 0xE0:
            header = bytearray(data)
            header[3] &= 0x1F
            if data[3] & 0x02:
                length = gzip_codec._header_length(data, 0)  # (valid: the codec read it first)
                header[length - 2:length] = (zlib.crc32(header[:length - 2]) & 0xFFFF).to_bytes(2, "little")
            data = bytes(header)
        self.started = True
        return self.inflater.decompress(data, max_length)

    def __getattr__(self, name: str):
        return getattr(self.inflater, name)


@pytest.mark.parametrize("seed", range(4))
def test_gzip_inflated_by_isal_equals_zlib(seed, monkeypatch):
    """The ISA-L inflater against zlib on damaged streams: bit flips (header flags among them), cuts,
    bytes after a member, one to three members, limits below and above the data, and output in
    steps of 97 bytes: the same bytes, or an error from both."""
    monkeypatch.setattr(gzip_codec, "STEP", 97)
    rng = random.Random(seed)
    errors = 0
    for _ in range(1500):
        members = [rng.randbytes(rng.randrange(2000)) if rng.random() < 0.5 else bytes(rng.randrange(20_000))
                   for _ in range(rng.randint(1, 3))]
        payload = bytearray(b"".join(gzip.compress(m, mtime=0, compresslevel=rng.choice((1, 6, 9))) for m in members))
        if rng.random() < 0.2:
            payload[3] |= rng.choice((0x20, 0xE0, 0xE2, 0x42))
            if payload[3] & 0x02:  # a header CRC, right for the header as it now is
                payload[10:10] = (zlib.crc32(bytes(payload[:10])) & 0xFFFF).to_bytes(2, "little")
        for _ in range(rng.randint(0, 2)):
            damage = rng.randrange(4)
            if damage == 0 and payload:
                payload[rng.randrange(len(payload))] ^= 1 << rng.randrange(8)
            elif damage == 1:
                payload[3:4] = bytes([payload[3] ^ (1 << rng.randrange(8))]) if len(payload) > 3 else b""
            elif damage == 2:
                del payload[rng.randrange(len(payload) + 1):]
            else:
                payload += rng.choice((rng.randbytes(rng.randint(1, 30)), gzip.compress(b"", mtime=0)[:10]))
        limit = rng.choice((MIB, sum(map(len, members)), max(0, sum(map(len, members)) - 1)))
        outcomes = []
        for inflater in (isal_zlib.decompressobj, _ZlibReadingHeadersAsJava):
            monkeypatch.setattr(gzip_codec, "INFLATER", inflater)
            try:
                outcomes.append(codecs.decompress(GZIP, bytes(payload), limit=limit))
            except DecompressionError:
                outcomes.append(None)
        assert outcomes[0] == outcomes[1], f"payload {bytes(payload).hex()} limit {limit}"
        errors += outcomes[0] is None
    assert 200 < errors < 1300  # both outcomes are exercised


@EXAMPLES
@given(parts=st.lists(st.binary(max_size=5000), min_size=1, max_size=4))
def test_concatenated_gzip_members_are_read_across(parts):
    payload = b"".join(gzip.compress(p) for p in parts)
    assert codecs.decompress(GZIP, payload) == b"".join(parts)


def test_gzip_bytes_after_the_last_member_are_ignored_as_java_does():
    assert codecs.decompress(GZIP, gzip.compress(b"data") + b"not a gzip member") == b"data"


def test_gzip_cut_short_is_a_decompression_error():
    with pytest.raises(DecompressionError, match="end-of-stream"):
        codecs.decompress(GZIP, gzip.compress(b"data" * 100)[:-12])


@pytest.mark.parametrize("sizes", [[1000], [999, 1001], [2000, 0, 3000], [1, 5000]], ids=str)
def test_gzip_read_in_steps_reads_what_one_call_reads(monkeypatch, sizes):
    """Output in steps of 1,000 bytes: member and step boundaries in every combination, and the
    limit exactly at the data's length (read) or one below (refused)."""
    monkeypatch.setattr(gzip_codec, "STEP", 1000)
    parts = [random.Random(size).randbytes(size // 2) + bytes(size - size // 2) for size in sizes]
    payload, data = b"".join(gzip.compress(part) for part in parts), b"".join(parts)
    assert codecs.decompress(GZIP, payload, limit=len(data)) == data
    if data:
        with pytest.raises(DecompressionError, match=f"limit of {len(data) - 1} bytes"):
            codecs.decompress(GZIP, payload, limit=len(data) - 1)
    with pytest.raises(DecompressionError, match="end-of-stream"):
        codecs.decompress(GZIP, payload[:-12])


def test_a_gzip_bomb_costs_about_the_limit_not_twice_it(monkeypatch):
    """zlib builds one call's output in pieces, then copies them into one: a single call up to the
    limit held twice the limit (256 MiB for a bomb at the default). In steps, about the limit."""
    monkeypatch.setattr(gzip_codec, "STEP", 256 * 1024)
    limit, bomb = 8 * MIB, gzip_zeros(64)
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionError, match=f"more than the limit of {limit} bytes"):
            codecs.decompress(GZIP, bomb, limit=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.25 * limit, f"{peak / MIB:.1f} MiB allocated for a {limit / MIB:.0f} MiB limit"


def test_zstd_frames_without_a_content_size_and_concatenated_frames():
    streamed = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(streamed, closefd=False) as writer:  # as zstd-jni streams
        writer.write(b"first frame " * 1000)
    assert zstandard.frame_content_size(streamed.getvalue()) == -1  # no content size in the header
    second = zstandard.ZstdCompressor(write_content_size=True).compress(b"second frame")
    assert zstandard.frame_content_size(second) == len(b"second frame")
    payload = streamed.getvalue() + second + codecs.compress(ZSTD, b"third")
    assert codecs.decompress(ZSTD, payload) == b"first frame " * 1000 + b"second frame" + b"third"


def test_zstd_cut_short_is_a_decompression_error():
    with pytest.raises(DecompressionError, match="zstd"):
        codecs.decompress(ZSTD, codecs.compress(ZSTD, bytes(range(256)) * 100)[:-10])


# ---------------------------------------------------------------------------------------------
# Decompression bombs: 1 GiB of zeros, a 1 MiB limit
# ---------------------------------------------------------------------------------------------

BOMBS = {
    "gzip": (GZIP, lambda: gzip_zeros(GIB // MIB, CRC32_OF_1_GIB_OF_ZEROS)),
    "snappy-xerial": (SNAPPY, lambda: xerial_zeros(GIB // (32 * 1024))),
    "snappy-raw": (SNAPPY, lambda: raw_snappy_zeros(GIB)),
    "lz4": (LZ4, lambda: lz4_zeros(GIB // (64 * 1024))),
    "zstd": (ZSTD, lambda: zstd_zeros(GIB // MIB)),
}


def test_the_bomb_builders_build_what_they_claim():
    """Each builder, at a size cheap to check with the compression libraries themselves."""
    assert gzip.decompress(gzip_zeros(8)) == bytes(8 * MIB)
    assert lz4.frame.decompress(lz4_zeros(5)) == bytes(5 * 64 * 1024)
    assert snappy.uncompress(raw_snappy_zeros(3 * MIB + 5)) == bytes(3 * MIB + 5)
    assert snappy.uncompress(xerial_zeros(3)[20:][: struct.unpack_from(">i", xerial_zeros(3), 16)[0]]) == bytes(32768)
    zstd_frame = zstd_zeros(3)
    assert zstandard.frame_content_size(zstd_frame) == -1
    assert zstandard.ZstdDecompressor().decompressobj().decompress(zstd_frame) == bytes(3 * MIB)


@pytest.mark.parametrize("name", list(BOMBS))
def test_decompression_bombs_stop_at_the_limit_quickly_and_in_little_memory(name):
    codec, build = BOMBS[name]
    bomb = build()
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(DecompressionError, match=f"more than the limit of {MIB} bytes"):
            codecs.decompress(codec, bomb, magic=2, limit=MIB)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 2.0, f"{name}: {elapsed:.2f}s to refuse a bomb"
    assert peak < 16 * MIB, f"{name}: {peak / MIB:.1f} MiB allocated for a 1 MiB limit"


@pytest.mark.parametrize("codec, magic", CODEC_MAGICS, ids=CODEC_MAGIC_IDS)
@pytest.mark.parametrize("limit", [100_000, 65_536, 65_535])
def test_a_limit_between_blocks_is_still_reported_as_the_limit(codec, magic, limit):
    data = bytes(range(256)) * 1000
    with pytest.raises(DecompressionError, match=f"limit of {limit} bytes"):
        codecs.decompress(codec, codecs.compress(codec, data, magic=magic), magic=magic, limit=limit)
    assert codecs.decompress(codec, codecs.compress(codec, data, magic=magic), magic=magic, limit=len(data)) == data


# ---------------------------------------------------------------------------------------------
# Garbage: a DecompressionError, never another exception
# ---------------------------------------------------------------------------------------------

PREFIXES = [b"", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", snappy_codec.XERIAL_HEADER,
            bytes.fromhex("04224d18604082"), bytes.fromhex("04224d1860401a"), bytes.fromhex("28b52ffd")]


@pytest.mark.parametrize("codec, magic", CODEC_MAGICS, ids=CODEC_MAGIC_IDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prefix=st.sampled_from(PREFIXES), garbage=st.binary(max_size=300))
def test_garbage_payloads_are_decompression_errors(codec, magic, prefix, garbage):
    try:
        out = codecs.decompress(codec, prefix + garbage, magic=magic, limit=MIB)
    except DecompressionError as exc:
        assert isinstance(exc, CorruptDataError) and str(exc)
    else:
        assert isinstance(out, bytes) and len(out) <= MIB  # some garbage is a valid stream


@pytest.mark.parametrize("codec, magic", CODEC_MAGICS, ids=CODEC_MAGIC_IDS)
def test_a_corrupted_real_payload_is_a_decompression_error(codec, magic):
    payload = bytearray(codecs.compress(codec, bytes(range(256)) * 400, magic=magic))
    for at in range(len(payload) // 3, len(payload), max(1, len(payload) // 7)):
        payload[at] ^= 0x5A
    try:
        out = codecs.decompress(codec, bytes(payload), magic=magic, limit=MIB)
    except DecompressionError:
        return
    assert out != bytes(range(256)) * 400  # a codec without checksums may decode garbage to garbage


# ---------------------------------------------------------------------------------------------
# Many payloads at once, on several threads
# ---------------------------------------------------------------------------------------------


def _payloads_in_one_buffer(seed: int, count: int, magic: int):
    """A buffer of `count` payloads of every codec end to end (some corrupt), their ranges, and
    what `decompress` makes of each."""
    rng = random.Random(seed)
    codec_ids = [c for c, m in CODEC_MAGICS if m == magic]
    buffer, ranges, expected = bytearray(), [], []
    for i in range(count):
        codec = rng.choice(codec_ids)
        data = bytes(rng.randrange(40) for _ in range(rng.choice((0, 100, 5000, 70_000))))
        payload = bytearray(codecs.compress(codec, data, magic=magic))
        if payload and rng.random() < 0.15:
            payload[rng.randrange(len(payload))] ^= 0x5A
        try:
            expected.append(codecs.decompress(codec, bytes(payload), magic=magic, limit=MIB))
        except DecompressionError as exc:
            expected.append(str(exc))
        ranges.append((codec, len(buffer), len(buffer) + len(payload)))
        buffer += payload
    return bytes(buffer), ranges, expected


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("magic", [1, 2])
def test_decompress_ranges_is_decompress_of_each_in_order(monkeypatch, threads, magic):
    """Shared among threads or not, the results are `decompress`'s, in order, errors in place; with
    a budget, a prefix of them that holds it."""
    monkeypatch.setattr(codecs, "_cpus", lambda: threads)
    monkeypatch.setattr(codecs, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(codecs, "SHARED_PAYLOAD", 0)
    buffer, ranges, expected = _payloads_in_one_buffer(threads * 10 + magic, 120, magic)
    as_text = [r if isinstance(r, bytes) else str(r) for r in
               codecs.decompress_ranges(buffer, ranges, magic=magic, limit=MIB, budget=1 << 40)]
    assert as_text == expected
    assert any(not isinstance(e, bytes) for e in expected) and sum(map(len, expected)) > MIB
    for budget in (0, 1, 100_000, 1_000_000):
        taken = codecs.decompress_ranges(buffer, ranges, magic=magic, limit=MIB, budget=budget)
        assert 1 <= len(taken) <= len(ranges)
        assert [r if isinstance(r, bytes) else str(r) for r in taken] == expected[:len(taken)]
        if len(taken) < len(ranges):  # stopped once the payloads held the budget, not before
            assert sum(len(r) for r in taken if isinstance(r, bytes)) >= budget
    assert codecs.decompress_ranges(buffer, [], magic=magic, budget=0) == []
    rounds = list(codecs.decompress_in_rounds(buffer, ranges, magic=magic, limit=MIB, budget=100_000))
    assert len(rounds) > 1 and [first for first, _ in rounds] == [0] + list(
        itertools.accumulate(len(results) for _, results in rounds[:-1]))
    joined, spans = codecs.laid_end_to_end([r for _, results in rounds for r in results], b"before")
    assert [None if span is None else joined[span[0]:span[1]] for span in spans] == \
        [r if isinstance(r, bytes) else None for r in expected]


def test_decompress_ranges_shares_the_work_with_other_threads(monkeypatch):
    if codecs._cpus() < 2:
        pytest.skip("one CPU: decompress_ranges stays on the calling thread")
    threads, decompress = set(), codecs.decompress
    monkeypatch.setattr(codecs, "decompress", lambda *a, **k: threads.add(threading.get_ident()) or decompress(*a, **k))
    rng = random.Random(5)
    data = bytes(rng.randrange(64) for _ in range(400_000))  # compresses to ~300 KB
    payload = codecs.compress(GZIP, data, magic=2)
    ranges = [(GZIP, i * len(payload), (i + 1) * len(payload)) for i in range(40)]
    assert codecs.decompress_ranges(payload * 40, ranges, budget=1 << 40) == [data] * 40
    assert threading.get_ident() in threads and len(threads) > 1


def test_decompress_ranges_keeps_small_payloads_on_the_calling_thread(monkeypatch):
    """Payloads this small would only pass the GIL back and forth between threads."""
    if codecs._cpus() < 2:
        pytest.skip("one CPU: decompress_ranges stays on the calling thread")
    threads, decompress = set(), codecs.decompress
    monkeypatch.setattr(codecs, "decompress", lambda *a, **k: threads.add(threading.get_ident()) or decompress(*a, **k))
    rng = random.Random(6)
    data = [bytes(rng.randrange(64) for _ in range(3000)) for _ in range(400)]
    payloads = [codecs.compress(GZIP, d, magic=2) for d in data]
    assert sum(map(len, payloads)) >= codecs.PARALLEL_BYTES and max(map(len, payloads)) < codecs.SHARED_PAYLOAD
    ends = list(itertools.accumulate(map(len, payloads)))
    ranges = [(GZIP, end - len(p), end) for p, end in zip(payloads, ends)]
    assert codecs.decompress_ranges(b"".join(payloads), ranges, budget=1 << 40) == data
    assert threads == {threading.get_ident()}


@pytest.mark.parametrize("threads", [1, 2])
def test_errors_decompress_ranges_keeps_do_not_keep_what_was_inflated(monkeypatch, threads):
    """A bomb's error is kept in the results until the caller reports it. With its traceback, the
    codec's frame and what it inflated (up to the limit) were kept too: 128 MiB a bomb at the
    default limit, found by the differential fuzzer as a worker running out of address space."""
    monkeypatch.setattr(codecs, "_cpus", lambda: threads)
    monkeypatch.setattr(codecs, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(codecs, "SHARED_PAYLOAD", 0)
    bombs = [(GZIP, gzip_zeros(16)), (ZSTD, zstd_zeros(16)), (LZ4, lz4_zeros(256)), (SNAPPY, xerial_zeros(512))]
    buffer = b"".join(bomb for _, bomb in bombs)
    ends = list(itertools.accumulate(len(bomb) for _, bomb in bombs))
    ranges = [(codec, end - len(bomb), end) for (codec, bomb), end in zip(bombs, ends)]
    tracemalloc.start()
    try:
        results = codecs.decompress_ranges(buffer, ranges, limit=4 * MIB, budget=1 << 40)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [str(r).split(" payload")[0] for r in results] == ["gzip", "zstd", "lz4", "snappy"]
    assert all(isinstance(r, DecompressionError) and "more than the limit" in str(r) for r in results)
    assert held < MIB, f"{held / MIB:.1f} MiB still held by 4 errors"


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_in_pieces_does_every_piece_once_and_keeps_their_order(threads):
    done = []
    results = codecs.in_pieces(lambda piece, slot: done.append((piece, slot)) or piece * piece, 10, threads)
    assert results == [piece * piece for piece in range(10)]
    assert sorted(piece for piece, _ in done) == list(range(10))
    assert {slot for _, slot in done} <= set(range(threads))  # a buffer per slot is enough
    assert codecs.in_pieces(lambda piece, slot: piece, 0, threads) == []


@pytest.mark.parametrize("failing", [0, 5])
def test_in_pieces_raises_a_pieces_error_once_no_thread_works_any_more(failing):
    """Whether the caller's thread or a helper meets the error, no piece runs after the call ends
    (a piece may write into buffers the caller reuses next)."""
    running, lock = [0], threading.Lock()

    def work(piece: int, slot: int) -> int:
        with lock:
            running[0] += 1
        try:
            time.sleep(0.002)  # (the GIL released: the helpers take pieces too)
            if piece == failing:
                raise ValueError(f"piece {piece}")
            return piece
        finally:
            with lock:
                running[0] -= 1

    with pytest.raises(ValueError, match=f"piece {failing}"):
        codecs.in_pieces(work, 20, 3)
    assert running[0] == 0


def test_in_pieces_shares_the_work_with_other_threads():
    threads = set()
    codecs.in_pieces(lambda piece, slot: time.sleep(0.005) or threads.add(threading.get_ident()), 12, 2)
    assert threading.get_ident() in threads and len(threads) == 2


# ---------------------------------------------------------------------------------------------
# Java's UTF-8 decoding (JDK 17 String.decodeUTF8_UTF16 with replacement)
# ---------------------------------------------------------------------------------------------
#
# Expected strings follow JDK 17's String.decodeUTF8_UTF16, read and traced by hand:
#  - a 3-byte sequence whose two continuation bytes are present and well formed is decoded first
#    and only then checked for being a surrogate: ED A0 80 (U+D800) is ONE U+FFFD, where Python,
#    following the Unicode "maximal subpart" rule, emits three;
#  - a malformed 3- or 4-byte sequence is replaced by one U+FFFD for as many bytes as its lead
#    byte and the next ones could still begin (malformed3 / malformed4: 1, 2 or 3), so ED AF 41
#    is U+FFFD 'A' (Python: U+FFFD U+FFFD 'A', since it rejects ED AF at the second byte);
#  - at the end of input a truncated 2-, 3- or 4-byte sequence is one U+FFFD and decoding stops
#    (the `break` after the underflow): ED AF at the end is one U+FFFD (Python: two);
#  - overlong forms (C0 80, E0 80 80, F0 80 80 80), leads F5..FF and lone continuation bytes are
#    one U+FFFD per byte, as in Python.
# The golden dumps confirm these rules: kafka-dump-log printed 57 binary keys and values of the
# golden corpus that Java and Python decode differently, and the golden text test passes only with
# decode_utf8 (test_golden_dumps_print_binary_bytes_as_java_does below checks each of them).

R = "\ufffd"
JAVA_UTF8_CASES = [
    # surrogates encoded in UTF-8 (CESU-style): decoded, then replaced as one character
    ("ed a0 80", R),
    ("ed bf bf", R),
    ("41 ed b2 80 42", f"A{R}B"),
    # a surrogate's first two bytes, then ASCII
    ("ed af 41", f"{R}A"),
    ("ed a0 41 42", f"{R}AB"),
    # truncated at the end of input
    ("ed af", R),
    ("ed a0", R),
    ("41 c3", f"A{R}"),
    ("41 e2", f"A{R}"),
    ("41 e2 82", f"A{R}"),
    ("41 f0", f"A{R}"),
    ("41 f0 9f", f"A{R}"),
    ("41 f0 9f 98", f"A{R}"),
    ("f0 90 80", R),
    # truncated, then more input
    ("c3 41", f"{R}A"),
    ("e2 41", f"{R}A"),
    ("e2 82 41", f"{R}A"),
    ("f0 9f 41", f"{R}A"),
    ("f0 9f 98 41", f"{R}A"),
    ("f1 80 41 42", f"{R}AB"),
    # overlong encodings
    ("c0 80", R * 2),
    ("c1 bf", R * 2),
    ("e0 80 80", R * 3),
    ("e0 9f bf", R * 3),
    ("f0 80 80 80", R * 4),
    ("f0 8f bf bf", R * 4),
    ("f0 80", R * 2),
    # beyond U+10FFFF and bytes that never occur in UTF-8
    ("f4 90 80 80", R * 4),
    ("f4 90", R * 2),
    ("f5 80 80 80", R * 4),
    ("f5", R),
    ("f5 41", f"{R}A"),
    ("f5 80 80", R * 3),
    ("f8 88 80 80 80", R * 5),
    ("fe ff", R * 2),
    ("ff", R),
    # lone continuation bytes
    ("80", R),
    ("41 80 42", f"A{R}B"),
    ("bf bf", R * 2),
    # valid input, for contrast: the boundaries around the surrogate block and the top of Unicode
    ("41 c3 a9 e2 82 ac f0 9f 98 80", "A\u00e9\u20ac\U0001F600"),
    ("ed 9f bf ee 80 80", "\ud7ff\ue000"),
    ("f4 8f bf bf", "\U0010FFFF"),
    ("", ""),
]


def java_utf8_texts(rng: random.Random) -> list[bytes]:
    """Every malformed class of `JAVA_UTF8_CASES` (surrogates, overlongs, sequences cut
    short mid-text and at the end, past U+10FFFF, bytes UTF-8 never holds, lone continuations) alone,
    after plain runs of 0 to 9 bytes (the kernel reads 8 plain bytes at a time), before ASCII and
    valid characters and after them, two at a time; and random strings of the bytes that
    matter to a decoder (lead bytes, the edges of continuation ranges, ASCII)."""
    cases = [bytes.fromhex(hexbytes) for hexbytes, _ in JAVA_UTF8_CASES]
    valid = "A\u00e9\u20ac\U0001F600\U0010FFFF".encode()
    texts = [b"p" * run + case for case in cases for run in range(10)]
    texts += [case + tail for case in cases for tail in (b"A", valid, b"\x80", b"\xbf" * 3)]
    texts += [valid + case for case in cases]
    texts += [first + second for first in cases for second in cases]
    alphabet = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xC3, 0xDF, 0xE0, 0xE1,
                0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF]
    texts += [bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 14))) for _ in range(1500)]
    texts += [bytes(rng.randrange(256) for _ in range(rng.randrange(60))) for _ in range(300)]
    return texts


def write_binary_texts(partition: Path, legacy_partition: Path, texts: list[bytes], rng: random.Random,
                       legacy_count: int) -> int:
    """`texts` as keys, values and header keys of V2 batches of four records (uncompressed, lz4 or
    gzip) in `partition`, and the first `legacy_count` as keys and values of V1, then V0, messages
    in `legacy_partition`; returns the V2 batches written."""
    from kafkalog_tools.formats import legacy
    from kafkalog_tools.formats.record_batch import build_batch, build_record

    batches, offset = [], 0
    for start in range(0, len(texts), 4):
        chunk = texts[start:start + 4]
        records = [build_record(i, i, text if i % 3 else None, chunk[-1 - i], [(text, b"v"), (b"h", text)][:i % 3])
                   for i, text in enumerate(chunk)]
        batches.append(build_batch(offset, records, base_timestamp=1, max_timestamp=len(chunk),
                                   compression_id=rng.choice([0, 0, LZ4, GZIP])))
        offset += len(chunk)
    for directory in (partition, legacy_partition):
        directory.mkdir()
    (partition / f"{0:020d}.log").write_bytes(b"".join(batches))
    (legacy_partition / f"{0:020d}.log").write_bytes(b"".join(
        legacy.build_entry(i, 1 if i < legacy_count // 2 else 0, text, texts[-1 - i], timestamp=i)
        for i, text in enumerate(texts[:legacy_count])))
    return len(batches)


@pytest.mark.parametrize("hexbytes, expected", JAVA_UTF8_CASES, ids=[c[0] or "empty" for c in JAVA_UTF8_CASES])
def test_decode_utf8_replaces_as_java_does(hexbytes, expected):
    assert decode_utf8(bytes.fromhex(hexbytes)) == expected


def test_java_and_python_differ_where_the_module_says():
    for hexbytes in ("ed a0 80", "ed af 41", "ed af"):
        raw = bytes.fromhex(hexbytes)
        assert decode_utf8(raw) != raw.decode("utf-8", "replace")


@EXAMPLES
@given(text=st.text(max_size=100))
def test_decode_utf8_of_valid_utf8_is_plain_decoding(text):
    assert decode_utf8(text.encode("utf-8")) == text


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=40))
def test_decode_utf8_of_any_bytes_is_a_valid_string_no_longer_than_its_input(raw):
    text = decode_utf8(raw)
    text.encode("utf-8")  # no lone surrogates
    assert len(text) <= len(raw)
    # ASCII is never swallowed by a malformed sequence before it: Java skips only continuation bytes
    assert text.count("A") == raw.count(b"A")


@pytest.mark.parametrize("log", GOLDEN_LOGS)
def test_golden_dumps_print_binary_bytes_as_java_does(log: Path):
    dump = log.parents[2] / "dump" / "logs" / log.parent.name / (log.name + ".txt")
    if not dump.exists():
        pytest.skip(f"no kafka-dump-log output for {log.name}")
    text = dump.read_bytes().decode("utf-8")  # not read_text: binary values hold bare CRs
    malformed = differing = 0
    with SegmentFile(log) as segment:
        for batch in segment.batches():
            for record in batch.records():
                for data in (record.key, record.value):
                    if data is None:
                        continue
                    try:
                        data.decode("utf-8")
                        continue
                    except UnicodeDecodeError:
                        malformed += 1
                    java = decode_utf8(data)
                    assert java in text, f"{log.name} offset {record.offset}: Java's rendering not in the dump"
                    python = data.decode("utf-8", "replace")
                    if python != java:
                        differing += 1
                        assert python not in text, f"{log.name} offset {record.offset}: Python's rendering"


def test_the_golden_corpus_holds_bytes_java_and_python_decode_differently(golden):
    differing = 0
    for log in sorted((golden / "logs").glob("*/*.log")):
        with SegmentFile(log) as segment:
            for batch in segment.batches():
                for record in batch.records():
                    for data in (record.key, record.value):
                        if data is not None and decode_utf8(data) != data.decode("utf-8", "replace"):
                            differing += 1
    assert differing >= 50  # 57 at the time of writing

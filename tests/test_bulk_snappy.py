"""The bulk kernel's snappy payloads (kernels.frames_each: snappy-java's xerial framing around raw
snappy blocks) against the reference, codecs.decompress: whatever the kernel decodes, the reference
decodes to the same bytes, and the kernel decodes every payload as Kafka's producers write it (ours,
Java Kafka's in the golden corpus). Hand-made blocks of every tag kind, some breaking a rule, and
damaged payloads; segments of them are verified and dumped in tests/test_bulk_lz4.py."""
from __future__ import annotations

import random
import struct

import pytest

from kafkalog_tools import codecs
from kafkalog_tools.codecs import snappy_codec
from tests.batches import corpus_payloads
from tests.conftest import GOLDEN, need
from tests.damage import insert_or_remove
from tests.test_bulk_lz4 import KERNEL, assert_agree, kernel_decodes, reference

np = pytest.importorskip("numpy")
SNAPPY = codecs.IDS["snappy"]


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _block(rng: random.Random) -> bytes:
    """A raw snappy block written by hand: literals (their length in the tag or in 1-3 bytes after
    it) and copies with 1, 2 and 4 bytes of offset, mostly valid, sometimes breaking a rule (an
    offset of 0 or before the block's start, a declared length the tags do not produce)."""
    tags, produced = bytearray(), 0
    for _ in range(rng.randrange(0, 8)):
        if produced == 0 or rng.random() < 0.4:
            size = rng.choice([1, 2, 59, 60, 61, 255, 256, 257, 300, 70_000, rng.randrange(1, 100)])
            if size - 1 < 60:
                tags.append((size - 1) << 2)
            else:
                extra = ((size - 1).bit_length() + 7) // 8
                tags += bytes([(59 + extra) << 2]) + (size - 1).to_bytes(extra, "little")
            tags += rng.randbytes(size)
        else:
            offset = rng.choice([1, 2, 7, 16, produced, rng.randrange(1, produced + 1)])
            if rng.random() < 0.03:
                offset = rng.choice([0, produced + 1])
            kind = rng.choice([1, 2, 3])
            if kind == 1 and offset < 2048:
                size = rng.randrange(4, 12)
                tags += bytes([1 | (size - 4) << 2 | (offset >> 8) << 5, offset & 0xFF])
            elif kind < 3 and offset < 65536:
                size = rng.randrange(1, 65)
                tags += bytes([2 | (size - 1) << 2]) + offset.to_bytes(2, "little")
            else:
                size = rng.randrange(1, 65)
                tags += bytes([3 | (size - 1) << 2]) + offset.to_bytes(4, "little")
        produced += size
    declared = produced if rng.random() < 0.9 else max(0, produced + rng.choice([-1, 1, 100]))
    return _varint(declared) + bytes(tags)


def xerial(blocks: list[bytes]) -> bytes:
    return snappy_codec.XERIAL_HEADER + b"".join(struct.pack(">i", len(block)) + block for block in blocks)


def _data(rng: random.Random) -> bytes:
    size = rng.choice([0, 1, 100, 5000, 32_768, 32_769, 70_000, rng.randrange(200_000)])
    if rng.random() < 0.5:
        return rng.randbytes(size)
    return (rng.randbytes(rng.randrange(1, 40)) * (size + 1))[:size]


def test_the_kernel_decodes_payloads_as_producers_write_them():
    payloads = [snappy_codec.compress(_data(random.Random(seed)), 2) for seed in range(200)]
    assert assert_agree(payloads, codec=SNAPPY) == (len(payloads), len(payloads))


def test_the_kernel_decodes_java_kafkas_snappy_payloads():
    """The golden corpus: snappy batches written by Kafka's own snappy-java SnappyOutputStream."""
    payloads = corpus_payloads(need(GOLDEN / "logs"), SNAPPY)
    assert len(payloads) > 20
    assert assert_agree(payloads, codec=SNAPPY) == (len(payloads), len(payloads))


def test_hand_made_blocks_decode_as_the_reference_decodes_them():
    rng = random.Random(3)
    payloads = [xerial([_block(rng) for _ in range(rng.randrange(1, 4))]) for _ in range(2000)]
    ours, theirs = assert_agree(payloads, codec=SNAPPY)
    assert 200 < theirs < len(payloads) - 200  # both outcomes are well exercised
    assert ours == theirs  # (a block the reference decodes keeps every rule the kernel checks)


def _damaged(rng: random.Random, payload: bytes) -> bytes:
    data = bytearray(payload)
    roll = rng.random()
    if roll < 0.35:  # bits flipped anywhere: header, chunk lengths, tags, literals
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif roll < 0.5:  # cut short
        del data[rng.randrange(len(data) + 1):]
    elif roll < 0.65:  # after the last chunk: 1-3 bytes (ignored), a second stream, garbage
        data += rng.choice((rng.randbytes(rng.randrange(1, 4)), payload, rng.randbytes(rng.randrange(4, 40))))
    elif roll < 0.75:  # a raw block without the framing (SnappyInputStream reads it whole)
        data = bytearray(payload[len(snappy_codec.XERIAL_HEADER) + 4:])
    else:
        insert_or_remove(rng, data)
    return bytes(data)


def test_the_kernel_refuses_what_the_reference_refuses_in_damaged_payloads():
    rng = random.Random(4)
    originals = [snappy_codec.compress(_data(rng)[:40_000], 2) for _ in range(40)]
    payloads = [_damaged(rng, rng.choice(originals)) for _ in range(3000)]
    ours, theirs = assert_agree(payloads, codec=SNAPPY)
    assert 500 < theirs < len(payloads) - 500
    assert 0.7 * theirs < ours < theirs  # (raw blocks and second streams: the reference's alone)


def test_the_decompression_limit_holds_per_payload():
    data = bytes(range(256)) * 300
    payload = snappy_codec.compress(data, 2)
    assert kernel_decodes([payload], limit=len(data), codec=SNAPPY) == [data] == [reference(payload, len(data), SNAPPY)]
    assert kernel_decodes([payload], limit=len(data) - 1, codec=SNAPPY) == [None]
    assert reference(payload, len(data) - 1, SNAPPY) is None


def test_a_full_output_stops_the_call_and_a_payload_too_large_for_it_is_refused():
    payloads = [snappy_codec.compress(bytes([n]) * 1000, 2) for n in range(3)]
    segment = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    ends = np.cumsum([len(p) for p in payloads], dtype=np.int64)
    starts = ends - np.array([len(p) for p in payloads], dtype=np.int64)
    codec_ids, out = np.full(3, SNAPPY, np.int64), np.empty(2500, np.uint8)
    bounds, decoded = np.empty(4, np.int64), np.empty(3, np.int64)
    assert KERNEL.frames_each(segment, codec_ids, starts, ends, 1 << 20, out, bounds, decoded) == 2
    assert bounds[:3].tolist() == [0, 1000, 2000] and decoded[:2].tolist() == [1, 1]
    assert KERNEL.frames_each(segment, codec_ids[2:], starts[2:], ends[2:], 1 << 20, out[:999], bounds[:2],
                              decoded[:1]) == 1
    assert decoded[0] == 0  # alone and still too large: refused, for the codec to decompress


def test_other_codecs_are_refused():
    payload = snappy_codec.compress(b"kafka" * 100, 2)
    segment = np.frombuffer(payload, dtype=np.uint8)
    for codec in (0, codecs.IDS["gzip"], codecs.IDS["zstd"], 7):
        decoded = np.empty(1, np.int64)
        KERNEL.frames_each(segment, np.array([codec], np.int64), np.array([0], np.int64),
                           np.array([len(payload)], np.int64), 1 << 20, np.empty(1000, np.uint8), np.empty(2, np.int64),
                           decoded)
        assert decoded[0] == 0

"""The bulk kernel's LZ4 frames (kernels.frames_each) against the reference, codecs.decompress:
whatever the kernel decodes, the reference decodes to the same bytes; whatever the reference
refuses, the kernel refuses. Frames from our compressor, lz4.frame's, Java Kafka's (the golden
corpus), hand-made LZ4 sequences, and thousands of damaged copies of all of them."""
from __future__ import annotations

import random
import struct

import pytest

from kafkalog_tools import codecs
from kafkalog_tools import dump as d
from kafkalog_tools.codecs import lz4_codec
from kafkalog_tools.crc import crc32c
from kafkalog_tools.errors import KafkaLogError
from kafkalog_tools.native import bulk_scan
from kafkalog_tools.formats.record_batch import HEADER_SIZE, build_batch, build_record
from tests.batches import corpus_payloads
from tests.conftest import GOLDEN, need
from tests.damage import insert_or_remove

np = pytest.importorskip("numpy")
pytest.importorskip("numba", reason="the bulk scan needs numba (an install requirement)")
lz4_frame = pytest.importorskip("lz4.frame")
KERNEL = bulk_scan.kernel()
LZ4 = codecs.IDS["lz4"]


def lz4_each(segment, starts, ends, limit: int, out, bounds, decoded, codec: int = LZ4) -> int:
    """`frames_each` of lz4 frames (or of another codec's payloads)."""
    return KERNEL.frames_each(segment, np.full(len(starts), codec, np.int64), starts, ends, limit, out, bounds, decoded)


def kernel_decodes(frames: list[bytes], limit: int = codecs.DEFAULT_LIMIT, room: int = 1 << 24, codec: int = LZ4):
    """Each frame's payload as the kernel decodes it, None where it refuses; frames that did not
    fit in the output after others are decoded by a further call, as verify does."""
    segment = np.frombuffer(b"".join(frames) or b"\0", dtype=np.uint8)
    ends = np.cumsum([len(f) for f in frames], dtype=np.int64)
    starts = ends - np.array([len(f) for f in frames], dtype=np.int64)
    out = np.empty(room, dtype=np.uint8)
    results, done = [], 0
    while done < len(frames):
        bounds, decoded = np.empty(len(frames) - done + 1, np.int64), np.empty(len(frames) - done, np.int64)
        went = lz4_each(segment, starts[done:], ends[done:], limit, out, bounds, decoded, codec)
        assert went > 0
        results += [bytes(out[bounds[i]:bounds[i + 1]]) if decoded[i] else None for i in range(went)]
        done += went
    return results


def reference(frame: bytes, limit: int = codecs.DEFAULT_LIMIT, codec: int = LZ4) -> bytes | None:
    try:
        return codecs.decompress(codec, frame, magic=2, limit=limit)
    except KafkaLogError:
        return None


def assert_agree(frames: list[bytes], limit: int = codecs.DEFAULT_LIMIT, codec: int = LZ4) -> tuple[int, int]:
    """(frames the kernel decoded, frames the reference decoded), after checking the kernel never
    decodes what the reference refuses, nor differently."""
    decoded = kernel_decodes(frames, limit, codec=codec)
    ours = theirs = 0
    for frame, got in zip(frames, decoded):
        expected = reference(frame, limit, codec)
        if got is not None:
            assert expected is not None, f"the kernel decoded a frame the reference refuses: {frame[:64].hex()}"
            assert got == expected, f"the kernel decoded differently: {frame[:64].hex()}"
            ours += 1
        theirs += expected is not None
    return ours, theirs


def _data(rng: random.Random, size: int, kinds=("random", "repeat", "text", "mixed")) -> bytes:
    kind = rng.choice(kinds)
    if kind == "random":
        return rng.randbytes(size)
    if kind == "repeat":
        return (rng.randbytes(rng.randrange(1, 40)) * (size + 1))[:size]
    if kind == "text":
        words = [rng.randbytes(rng.randrange(1, 9)) for _ in range(50)]
        return b" ".join(rng.choice(words) for _ in range(size))[:size]
    return b"".join(_data(rng, size // 4, kinds[:3]) for _ in range(4))


SIZES = [0, 1, 4, 5, 11, 12, 13, 15, 16, 19, 20, 64, 255, 256, 270, 1000, 4096, 65535, 65536, 65537, 200_000]


def valid_frames(rng: random.Random) -> list[bytes]:
    """Frames the reference decodes: Kafka's as our compressor writes them, and lz4.frame's with
    the options Kafka's reader takes (larger blocks, checksums, content size; independent blocks)."""
    frames = []
    for size in SIZES:
        for _ in range(3):
            data = _data(rng, size)
            frames.append(codecs.compress(LZ4, data))
            frames.append(lz4_frame.compress(
                data, block_size=rng.choice([lz4_frame.BLOCKSIZE_MAX64KB, lz4_frame.BLOCKSIZE_MAX256KB,
                                             lz4_frame.BLOCKSIZE_MAX1MB, lz4_frame.BLOCKSIZE_MAX4MB]),
                block_linked=False, content_checksum=rng.random() < 0.5, block_checksum=rng.random() < 0.5,
                store_size=rng.random() < 0.5, compression_level=rng.choice([0, 3, 9])))
    return frames


def test_the_kernel_decodes_valid_frames_as_the_reference_does():
    frames = valid_frames(random.Random(1))
    ours, theirs = assert_agree(frames)
    assert theirs == len(frames)
    block_checksums = sum(1 for f in frames if f[4] & 0x10)
    assert block_checksums > 20
    assert ours == len(frames)  # stored and compressed blocks, every block size, checksums verified


def test_the_kernel_decodes_java_kafkas_frames():
    """The golden corpus: lz4 batches written by Kafka's own Lz4BlockOutputStream."""
    frames = corpus_payloads(need(GOLDEN / "logs"), LZ4)
    assert len(frames) > 50
    assert assert_agree(frames) == (len(frames), len(frames))


def _mutated(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    roll = rng.random()
    if roll < 0.35 and data:  # a few bytes changed anywhere
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif roll < 0.55 and len(data) > 7:  # ... in the header or the first block's size and first tokens
        at = rng.randrange(4, min(len(data), 20))
        data[at] = rng.choice([0x00, 0xFF, 0x80, 0x7F, data[at] ^ (1 << rng.randrange(8))])
    elif roll < 0.7:  # cut short
        del data[rng.randrange(len(data) + 1):]
    elif roll < 0.85 and len(data) >= 11:  # a hostile block size
        data[7:11] = struct.pack("<I", rng.choice([0xFFFFFFFF, 0x7FFFFFFF, 0x80000000 | rng.randrange(1 << 23),
                                                  rng.randrange(1 << 23), len(data), len(data) - 11]))
    elif data:  # bytes inserted or removed inside
        insert_or_remove(rng, data)
    return bytes(data)


def test_the_kernel_refuses_what_the_reference_refuses_in_damaged_frames():
    rng = random.Random(2)
    originals = [f for f in valid_frames(rng) if len(f) < 70_000]
    frames = [_mutated(rng, rng.choice(originals)) for _ in range(6000)]
    ours, theirs = assert_agree(frames)
    assert 1000 < theirs < len(frames) - 1000  # both outcomes are well exercised
    assert ours > 0.9 * theirs


def _sequences(rng: random.Random) -> bytes:
    """An LZ4 block written by hand from random sequences: mostly valid, sometimes breaking a rule
    (offset 0 or before the start, a match at the very end, too few final literals)."""
    block, produced = bytearray(), 0

    def length_field(value: int) -> tuple[int, bytes]:
        if value < 15:
            return value, b""
        value -= 15
        return 15, b"\xff" * (value // 255) + bytes([value % 255])

    for _ in range(rng.randrange(0, 6)):
        literals = rng.choice([0, 1, 3, 14, 15, 16, 270, rng.randrange(40)])
        match = rng.choice([4, 5, 18, 19, 20, 300, rng.randrange(4, 60)])
        if produced + literals == 0:
            literals = rng.randrange(1, 20)
        offset = rng.choice([1, 2, 7, 8, 16, produced + literals, rng.randrange(1, produced + literals + 1)])
        if rng.random() < 0.03:
            offset = rng.choice([0, produced + literals + 1])
        lit_field, lit_extra = length_field(literals)
        match_field, match_extra = length_field(match - 4)
        block += bytes([lit_field << 4 | match_field]) + lit_extra + rng.randbytes(literals)
        block += struct.pack("<H", offset) + match_extra
        produced += literals + match
    if rng.random() < 0.97:  # the last sequence: literals only
        literals = rng.choice([0, 1, 4, 5, 6, 11, 12, 13, 15, rng.randrange(40)])
        lit_field, lit_extra = length_field(literals)
        block += bytes([lit_field << 4 | rng.randrange(16)]) + lit_extra + rng.randbytes(literals)
    return bytes(block)


def _framed(blocks: list[bytes]) -> bytes:
    frame = bytearray(struct.pack("<IBB", lz4_codec.FRAME_MAGIC, 0x60, 0x40))
    frame.append(lz4_codec.header_checksum(bytes(frame), 6, 2))
    for block in blocks:
        frame += struct.pack("<I", len(block)) + block
    return bytes(frame + b"\0\0\0\0")


def test_hand_made_sequences_decode_as_liblz4_does():
    """The end-of-block rules, offsets and lengths at their edges; small limits make the decoder's
    capacity (min(block size, what is left of the limit)) the tight bound."""
    rng = random.Random(3)
    frames = [_framed([_sequences(rng) for _ in range(rng.choice([1, 1, 2]))]) for _ in range(4000)]
    ours, theirs = assert_agree(frames)
    assert 1000 < theirs < len(frames) - 100
    assert ours > 0.8 * theirs
    for limit in (0, 1, 13, 40, 100, 400):
        assert_agree(frames[:1000], limit)


def test_an_output_just_large_enough_holds_the_payload():
    """Copies end byte by byte where 16 bytes at a time would pass the output's end."""
    rng = random.Random(6)
    frames = [_framed([_sequences(rng)]) for _ in range(1500)] + valid_frames(rng)[:60]
    decoded = kernel_decodes(frames)
    exact = 0
    for frame, payload in zip(frames, decoded):
        if payload is not None:
            segment = frame + rng.randbytes(rng.randrange(3))  # the frame at or near the segment's end
            assert kernel_decodes([segment], room=max(len(payload), 1)) == [payload]
            exact += 1
    assert exact > 500


def test_the_decompression_limit_holds_per_frame():
    rng = random.Random(4)
    data = _data(rng, 100_000)
    frames = [codecs.compress(LZ4, data), lz4_frame.compress(data, block_linked=False)]
    for limit in (0, 1, 65535, 65536, 65537, 99_999, 100_000):
        ours, theirs = assert_agree(frames, limit)
        assert ours == theirs == (2 if limit >= 100_000 else 0)


def test_a_full_output_stops_the_call_and_a_frame_too_large_for_it_is_refused():
    frames = [codecs.compress(LZ4, bytes([n]) * size) for n, size in enumerate([300, 300, 5000, 300])]
    segment = np.frombuffer(b"".join(frames), dtype=np.uint8)
    ends = np.cumsum([len(f) for f in frames], dtype=np.int64)
    starts = ends - [len(f) for f in frames]
    out, bounds, decoded = np.empty(1000, np.uint8), np.empty(5, np.int64), np.empty(4, np.int64)
    assert lz4_each(segment, starts, ends, 1 << 20, out, bounds, decoded) == 2  # the third does not fit
    assert list(bounds[:3]) == [0, 300, 600] and list(decoded[:2]) == [1, 1]
    assert lz4_each(segment, starts[2:], ends[2:], 1 << 20, out, bounds[:3], decoded[:2]) == 2
    assert list(decoded[:2]) == [0, 1] and list(bounds[:3]) == [0, 0, 300]  # alone, still too large: refused
    assert bytes(out[:300]) == bytes([3]) * 300


def test_xxh32_kernel_equals_the_codecs():
    from kafkalog_tools.native import kernels

    rng = random.Random(5)
    for size in list(range(40)) + [63, 64, 65, 1000, 4099]:
        data = rng.randbytes(size + 3)
        assert kernels.xxh32(np.frombuffer(data, np.uint8), 3, 3 + size) == lz4_codec.xxh32(data[3:])


def test_frames_each_refuses_frames_outside_the_segment():
    segment = np.zeros(16, np.uint8)
    out, bounds, decoded = np.empty(16, np.uint8), np.empty(2, np.int64), np.empty(1, np.int64)
    for start, end in ((0, 17), (-1, 4), (5, 4)):
        with pytest.raises(ValueError, match="bulk kernel"):
            lz4_each(segment, np.array([start], np.int64), np.array([end], np.int64), 100, out, bounds, decoded)


# ---------------------------------------------------------------------------------------------
# verify and dump over lz4 segments: the same output with the kernel's frames and without
# ---------------------------------------------------------------------------------------------


def lz4_segment(rng: random.Random, base: int, codec: int = LZ4) -> bytes:
    """lz4 batches (or another codec's), a few larger than one block, some of whose payloads are damaged under
    a valid CRC (the reference refuses them, or decodes records that disagree with the header)."""
    out, offset = [], base
    for _ in range(rng.randrange(1, 40)):
        count = rng.choice([0, 1, 3, 20, rng.randrange(8)])
        deltas = [rng.randrange(1000) for _ in range(count)]
        records = [build_record(i, delta, rng.choice([None, b"", _data(rng, rng.randrange(40))]),
                                _data(rng, rng.choice([0, 200, 5000, rng.randrange(20_000)])),
                                [(b"h", _data(rng, rng.randrange(30)))] * rng.randrange(3))
                   for i, delta in enumerate(deltas)]
        batch = bytearray(build_batch(offset, records, base_timestamp=1_700_000_000_000, compression_id=codec,
                                      max_timestamp=1_700_000_000_000 + max(deltas, default=-1)))
        if rng.random() < 0.3:
            batch[HEADER_SIZE:] = _mutated(rng, bytes(batch[HEADER_SIZE:]))
            batch[8:12] = (len(batch) - 12).to_bytes(4, "big")
            batch[17:21] = crc32c(memoryview(batch)[21:]).to_bytes(4, "big")
        out.append(bytes(batch))
        offset += max(1, count)
    return b"".join(out)


@pytest.mark.parametrize("codec", ["lz4", "snappy"])
def test_verify_and_dump_of_lz4_and_snappy_segments_in_bulk_equal_batch_by_batch(monkeypatch, tmp_path, codec):
    from tests.test_bulk_scan import generated_partitions, verify_both_ways
    from tests.test_dump_bulk import dump_both_ways

    paths = generated_partitions(tmp_path, random.Random(7), 30,
                                 lambda rng, base: lz4_segment(rng, base, codecs.IDS[codec]), 500)
    findings = verify_both_ways(monkeypatch, paths, deep=True)
    assert {"record-corrupt"} <= {f["code"] for f in findings}
    dumped = dump_both_ways(monkeypatch, paths, "-d")
    assert dumped.count(b'"offset"') > 1000
    monkeypatch.setattr(d._BulkDump, "STEP", 1 << 14)  # the kernel's output full, again and again
    assert dump_both_ways(monkeypatch, paths, "-d") == dumped


def test_an_end_mark_with_its_stored_bit_set_ends_the_frame_in_the_kernel_too():
    """0x80000000 is an end mark for Kafka (the "stored" bit is masked off first): the kernel decodes
    such a frame as the reference does, instead of refusing it (tests/test_kafka_regressions.py pins
    Kafka's answer)."""
    frame = bytearray(lz4_codec.compress(b"records " * 100, magic=2))
    assert frame[-4:] == b"\0\0\0\0" and not frame[4] & 0x04  # the end mark, no content checksum after it
    frame[-1] = 0x80
    assert kernel_decodes([bytes(frame)]) == [codecs.decompress(LZ4, bytes(frame), magic=2)] == [b"records " * 100]


def test_a_content_checksum_cut_short_is_refused_by_the_kernel_as_by_the_codec():
    """A frame that flags a content checksum and has fewer than its 4 bytes after the end mark
    (Kafka's BufferUnderflowException: tests/test_kafka_regressions.py): the kernel refuses it and the
    codec says why; with the 4 bytes there both decode it."""
    frame = bytearray(lz4_codec.compress(b"records " * 100, magic=2))
    frame[4] |= 0x04
    frame[6] = lz4_codec.header_checksum(bytes(frame), 6, 2)
    cut, whole = bytes(frame), bytes(frame) + b"\1\2\3\4"
    assert kernel_decodes([cut, whole]) == [None, b"records " * 100]
    with pytest.raises(KafkaLogError, match="BufferUnderflowException"):
        codecs.decompress(LZ4, cut, magic=2)
    assert codecs.decompress(LZ4, whole, magic=2) == b"records " * 100

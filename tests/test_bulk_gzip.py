"""The bulk kernel's gzip members (kernels.gzip_each, ISA-L's stateless inflate called from compiled
code, for dump and deep verify) against the reference, codecs.decompress: whatever the kernel inflates, the reference
inflates to the same bytes, and it inflates every member as producers write them (Python's gzip,
Java Kafka's in the golden corpus). Damaged members, several members, bytes after a member and
trailers that lie go to the reference; so does a member whose room is not its trailer's size."""
from __future__ import annotations

import gzip
import random

import pytest

from kafkalog_tools import codecs
from kafkalog_tools import dump as d
from kafkalog_tools.crc import crc32c
from kafkalog_tools.errors import KafkaLogError
from kafkalog_tools.formats import legacy
from kafkalog_tools.formats.record_batch import HEADER_SIZE, build_batch, build_record
from kafkalog_tools.native import bulk_scan
from tests.batches import corpus_payloads
from tests.conftest import GOLDEN, need
from tests.damage import insert_or_remove

np = pytest.importorskip("numpy")
pytest.importorskip("numba", reason="the bulk scan needs numba (an install requirement)")
KERNEL = bulk_scan.kernel()
GZIP = codecs.IDS["gzip"]


def trailer_size(payload: bytes) -> int:
    return int.from_bytes(payload[-4:], "little") if len(payload) >= 4 else 0


def kernel_inflates(payloads: list[bytes], sizes: list[int] | None = None) -> list[bytes | None]:
    """Each payload as the kernel inflates it into room of `sizes` (its trailer's by default, none
    above 1 MiB, as dump gives none above the decompression limit), None where it refuses."""
    sizes = [min(trailer_size(p), 1 << 20) for p in payloads] if sizes is None else sizes
    segment = np.frombuffer(b"".join(payloads) or b"\0", dtype=np.uint8)
    ends = np.cumsum([len(p) for p in payloads], dtype=np.int64)
    starts = ends - np.array([len(p) for p in payloads], dtype=np.int64)
    at = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    out, inflated = np.empty(int(at[-1]), dtype=np.uint8), np.zeros(len(payloads), dtype=np.int64)
    state = np.zeros(bulk_scan.INFLATE_STATE, dtype=np.uint8)
    done = KERNEL.gzip_each(segment, starts, ends, at, out, inflated, bulk_scan.gzip_inflater(), state)
    assert done == inflated.sum()
    return [bytes(out[at[i]:at[i + 1]]) if inflated[i] else None for i in range(len(payloads))]


def reference(payload: bytes) -> bytes | None:
    try:
        return codecs.decompress(GZIP, payload, magic=1)
    except KafkaLogError:
        return None


def assert_agree(payloads: list[bytes]) -> tuple[int, int]:
    """(payloads the kernel inflated, payloads the reference inflated), after checking the kernel
    never inflates what the reference refuses, nor differently."""
    ours = theirs = 0
    for payload, got in zip(payloads, kernel_inflates(payloads)):
        expected = reference(payload)
        if got is not None:
            assert expected is not None, f"the kernel inflated a payload the reference refuses: {payload[:64].hex()}"
            assert got == expected, f"the kernel inflated differently: {payload[:64].hex()}"
            ours += 1
        theirs += expected is not None
    return ours, theirs


def _data(rng: random.Random) -> bytes:
    size = rng.choice([0, 1, 100, 5000, 70_000, rng.randrange(300_000)])
    kind = rng.randrange(3)
    if kind == 0:
        return rng.randbytes(size)
    if kind == 1:
        return (rng.randbytes(rng.randrange(1, 40)) * (size + 1))[:size]
    words = [rng.randbytes(rng.randrange(1, 9)) for _ in range(50)]
    return b" ".join(rng.choice(words) for _ in range(size // 5))


def members(rng: random.Random, count: int) -> list[bytes]:
    return [gzip.compress(_data(rng), mtime=0, compresslevel=rng.choice((0, 1, 6, 9))) for _ in range(count)]


@pytest.fixture(autouse=True)
def _inflater():
    if not bulk_scan.gzip_inflater():
        pytest.fail("ISA-L's isal_inflate_stateless does not inflate through the kernel here")


def test_the_kernel_inflates_members_as_producers_write_them():
    payloads = members(random.Random(1), 300)
    assert assert_agree(payloads) == (len(payloads), len(payloads))  # stored, fixed and dynamic blocks


def test_the_kernel_inflates_java_kafkas_members():
    """The golden corpus: gzip batches written by Kafka's own GZIPOutputStream."""
    payloads = corpus_payloads(need(GOLDEN / "logs"), GZIP)
    assert len(payloads) > 20
    assert assert_agree(payloads) == (len(payloads), len(payloads))


def _damaged(rng: random.Random, payload: bytes) -> bytes:
    data = bytearray(payload)
    roll = rng.random()
    if roll < 0.3 and data:  # bits flipped anywhere: the deflate stream, the trailer
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif roll < 0.45:  # header flags: optional fields, reserved bits
        data[3] = rng.choice((0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0xE0))
    elif roll < 0.6:  # cut short
        del data[rng.randrange(len(data) + 1):]
    elif roll < 0.75:  # bytes after the member: another member, garbage, zeros
        data += rng.choice((payload, rng.randbytes(rng.randrange(1, 40)), bytes(rng.randrange(1, 30))))
    elif roll < 0.85:  # a trailer that lies about the size or the CRC
        at = len(data) - rng.choice((4, 8))
        data[at:at + 4] = rng.randrange(1 << 32).to_bytes(4, "little")
    else:  # bytes inserted or removed inside
        insert_or_remove(rng, data)
    return bytes(data)


def test_the_kernel_leaves_to_the_reference_what_it_does_not_vouch_for_in_damaged_members():
    rng = random.Random(2)
    originals = members(rng, 60)
    payloads = [_damaged(rng, rng.choice(originals)) for _ in range(3000)]
    ours, theirs = assert_agree(payloads)
    assert 500 < theirs < len(payloads) - 500  # both outcomes are well exercised
    assert 20 < ours < theirs  # (header flags, several members, bytes after one: the reference's alone)


def test_a_member_whose_room_is_not_its_trailers_size_is_refused():
    payloads = [p for p in members(random.Random(3), 30) if trailer_size(p)][:20]
    sizes = [trailer_size(p) for p in payloads]
    assert None not in kernel_inflates(payloads, sizes)
    for change in (-1, 1, 1 << 20):
        assert kernel_inflates(payloads, [s + change for s in sizes]) == [None] * len(payloads)


def test_gzip_each_refuses_payloads_outside_the_segment_and_rooms_outside_the_output():
    segment, out, inflated = np.zeros(32, np.uint8), np.empty(16, np.uint8), np.empty(1, np.int64)
    state = np.zeros(bulk_scan.INFLATE_STATE, np.uint8)
    for start, end, at in ((0, 33, (0, 4)), (-1, 4, (0, 4)), (5, 4, (0, 4)), (0, 20, (0, 17)), (0, 20, (8, 4))):
        with pytest.raises(ValueError, match="bulk kernel"):
            KERNEL.gzip_each(segment, np.array([start], np.int64), np.array([end], np.int64), np.array(at, np.int64),
                             out, inflated, bulk_scan.gzip_inflater(), state)
    with pytest.raises(ValueError, match="bulk kernel"):
        KERNEL.gzip_each(segment, np.array([0], np.int64), np.array([20], np.int64), np.array((0, 4), np.int64),
                         out, inflated, bulk_scan.gzip_inflater(), state[:1024])


# ---------------------------------------------------------------------------------------------
# dump over gzip segments: the same output with the kernel's members and without
# ---------------------------------------------------------------------------------------------


def gzip_segment(rng: random.Random, base: int) -> bytes:
    """gzip V2 batches and V1 wrappers (a partition changes magic between segments, not inside one
    here), some of whose payloads are damaged or lie under a valid CRC (the reference refuses them,
    reads several members, or decodes records that disagree with the header)."""
    out, offset = [], base
    magic = rng.choice((1, 2))
    for _ in range(rng.randrange(1, 30)):
        count = rng.choice([1, 3, 20, rng.randrange(1, 8)])
        values = [rng.choice([None, b"", _data(rng)[:rng.randrange(3000)]]) for _ in range(count)]
        if magic == 2:
            records = [build_record(i, i, b"k%d" % i, value) for i, value in enumerate(values)]
            batch = bytearray(build_batch(offset, records, base_timestamp=1_700_000_000_000, compression_id=GZIP,
                                          max_timestamp=1_700_000_000_000 + count - 1))
            if rng.random() < 0.3:
                batch[HEADER_SIZE:] = _damaged(rng, bytes(batch[HEADER_SIZE:]))
                batch[8:12] = (len(batch) - 12).to_bytes(4, "big")
                batch[17:21] = crc32c(memoryview(batch)[21:]).to_bytes(4, "big")
            out.append(bytes(batch))
        else:
            inner = b"".join(legacy.build_entry(i, 1, b"k%d" % i, value, timestamp=1_700_000_000_000 + i)
                             for i, value in enumerate(values))
            wrapped = codecs.compress(GZIP, inner, magic=1)
            if rng.random() < 0.3:
                wrapped = _damaged(rng, wrapped)
            out.append(legacy.build_entry(offset + count - 1, 1, None, wrapped, timestamp=1_700_000_000_000,
                                          attributes=GZIP))
        offset += count
    return b"".join(out)


def test_verify_and_dump_of_gzip_segments_in_bulk_equal_batch_by_batch(monkeypatch, tmp_path):
    from tests.test_bulk_scan import generated_partitions, verify_both_ways
    from tests.test_dump_bulk import dump_both_ways

    paths = generated_partitions(tmp_path, random.Random(7), 30, gzip_segment, 500)
    findings = verify_both_ways(monkeypatch, paths, deep=True)
    assert {"record-corrupt"} <= {f["code"] for f in findings}
    dumped = dump_both_ways(monkeypatch, paths, "-d")
    assert dumped.count(b'"offset"') > 1000
    text = dump_both_ways(monkeypatch, paths, "-d", "-p", output_format="text")
    monkeypatch.setattr(d._BulkDump, "STEP", 1 << 12)  # the chunk's payloads full, again and again
    assert dump_both_ways(monkeypatch, paths, "-d") == dumped
    assert dump_both_ways(monkeypatch, paths, "-d", "-p", output_format="text") == text
    monkeypatch.setattr(bulk_scan, "gzip_inflater", lambda: 0)  # every member one by one, as before the kernel
    assert dump_both_ways(monkeypatch, paths, "-d", "-p", output_format="text") == text
    assert verify_both_ways(monkeypatch, paths, deep=True) == findings


def test_members_the_kernel_inflates_are_printed_from_its_buffer(monkeypatch, tmp_path):
    """Proof the kernel's path is taken: a run's payloads are its buffer, not bytes joined."""
    from tests.test_bulk_scan import generated_partitions

    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    paths = generated_partitions(tmp_path, random.Random(8), 5, gzip_segment, 500)
    kinds = {type(item.payloads).__name__ for item in d.dump(paths, d.DumpOptions(deep=True, batch_runs=True))
             if type(item) is d.BatchRun}
    assert "ndarray" in kinds


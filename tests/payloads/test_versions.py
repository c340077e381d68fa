"""`verify` on internal-topic records a newer Kafka wrote: one info finding per kind and version."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog_tools.cli import cli
from kafkalog_tools.crc import crc32c
from kafkalog_tools.formats import legacy
from kafkalog_tools.formats.logdir import Segment
from kafkalog_tools.formats.record_batch import HEADER_SIZE, build_batch, build_record
from kafkalog_tools.native import bulk_scan
from kafkalog_tools.native.columns import SIGNATURE_KEY_BYTES, SIGNATURE_VALUE_BYTES
from kafkalog_tools.payloads import PayloadError, decoder_for_topic, versions
from kafkalog_tools.payloads import share_group_state as sgs
from kafkalog_tools.payloads.versions import newer_versions
from kafkalog_tools.protocol import uuid_to_text
from kafkalog_tools.verify import check_segment
from kafkalog_tools.verify import segment as segment_check
from tests.batches import transaction_marker
from tests.conftest import CORPUS, need

KEY = b"\x00\x00" + sgs.SharePartitionKey.build({"groupId": "g", "topicId": uuid_to_text(bytes(16)), "partition": 0})
SNAPSHOT = sgs.ShareSnapshotValue.build({"snapshotEpoch": 1, "stateEpoch": 1, "leaderEpoch": 0, "startOffset": 0,
                                         "stateBatches": [], "_tagged": {}})


def _partition(root: Path, versions: list[int], codecs: tuple[int, ...] = (0,)) -> Path:
    """A share-state partition of records of these value versions, a batch each, in one segment per
    codec (the versions dealt out in turn; a codec dealt none makes no segment)."""
    partition = root / "__share_group_state-0"
    partition.mkdir()
    segments = [[] for _ in codecs]
    for offset, version in enumerate(versions):
        segments[offset % len(codecs)].append((offset, version))
    for codec, batches in zip(codecs, segments):
        if not batches:
            continue
        (partition / f"{batches[0][0]:020}.log").write_bytes(b"".join(
            build_batch(offset, [build_record(0, 0, KEY, version.to_bytes(2, "big", signed=True) + SNAPSHOT)],
                        base_timestamp=1, max_timestamp=1, compression_id=codec) for offset, version in batches))
    return partition


def test_one_info_finding_per_kind_and_version(tmp_path):
    partition = _partition(tmp_path, [0, 2, 2, 0, 5, 2])
    result = CliRunner().invoke(cli, ["verify", "--format", "json", str(partition)])
    findings = [json.loads(line) for line in result.stdout.splitlines()]
    newer = [f for f in findings if f.get("code") == "newer-record-version"]
    assert [(f["severity"], f["kind"], f["version"], f["count"], f["offset"]) for f in newer] == [
        ("info", "share_snapshot", 2, 3, 1), ("info", "share_snapshot", 5, 1, 4)]
    assert newer[0]["position"] == len(build_batch(0, [build_record(0, 0, KEY, b"\x00\x00" + SNAPSHOT)],
                                                   base_timestamp=1, max_timestamp=1))
    assert not [f for f in findings if f.get("severity") == "error"]


def test_known_versions_give_no_finding(tmp_path):
    partition = _partition(tmp_path, [0, 0])
    assert newer_versions("__share_group_state", [partition / "00000000000000000000.log"]) == []
    assert newer_versions("not-internal", [partition / "00000000000000000000.log"]) == []


def test_kafka_4_golden_corpus_holds_no_newer_version():
    logs = sorted(need(CORPUS / "golden-4.0" / "logs").glob("*/*.log"))
    assert [entry for log in logs for entry in newer_versions(log.parent.name.rsplit("-", 1)[0], [log])] == []


def _corpus_records(topic: str) -> list[tuple[bytes | None, bytes | None]]:
    from kafkalog_tools.formats.segment import SegmentFile

    records = []
    for log in sorted(need(CORPUS / "golden-4.0" / "logs").glob(f"{topic}-*/*.log")):
        with SegmentFile(log) as segment:
            records += [(r.key, r.value) for batch in segment.batches() if not batch.is_control
                        for r in batch.records()]
    return records


def _versions_rewritten(key: bytes | None, value: bytes | None):
    """The record, and copies with its key's record type, its value's int16 version and its
    value's frame bytes (frame version, apiKey, version) rewritten to known, newer, negative and
    multi-byte values."""
    yield key, value
    shorts = [-1, 0, 1, 2, 3, 4, 5, 9, 17, 20, 127, 128, 255, 0x7FFF]
    for number in shorts:
        if key is not None and len(key) >= 2:
            yield number.to_bytes(2, "big", signed=True) + key[2:], value
        if value is not None and len(value) >= 2:
            yield key, number.to_bytes(2, "big", signed=True) + value[2:]
    if value is not None and len(value) >= 3:
        for at in range(3):
            for byte in (0, 1, 2, 3, 20, 100, 0x7F, 0x80, 0x81, 0xFF):
                yield key, value[:at] + bytes([byte]) + value[at + 1:]
    yield key, None
    yield None, value
    yield key, b""


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__share_group_state", "__transaction_state",
                                   "__cluster_metadata", "__remote_log_metadata"])
def test_a_value_version_said_known_is_never_marked_newer(topic):
    """`value_version_known` lets verify's search skip a record's decoding: it must never say
    known where `decode` marks the value `read_as_version`, and must say known of the records
    Kafka wrote (or the search saves nothing)."""
    decoder = decoder_for_topic(topic)
    corpus = _corpus_records(topic)
    assert corpus and all(decoder.value_version_known(key, value) for key, value in corpus)
    marked = said_known = 0
    for key, value in {variant for record in corpus[:40] for variant in _versions_rewritten(*record)}:
        known = decoder.value_version_known(key, value)
        said_known += known
        try:
            decoded = decoder.decode(key, value, offset=0)
        except PayloadError:
            continue
        if isinstance(decoded.value, dict) and "read_as_version" in decoded.value:
            marked += 1
            assert not known, (key, value)
    assert marked > 5 and said_known > 20


def test_the_search_finds_what_decoding_every_record_finds(tmp_path):
    partition = _partition(tmp_path, [0, 2, 2, 0, 5, 2, 1, 0x7FFF, -1])
    log = partition / "00000000000000000000.log"
    every = newer_versions("__share_group_state", [log], every_record=True)
    assert newer_versions("__share_group_state", [log]) == every
    assert [(e.version, e.count) for e in every] == [(2, 3), (5, 1), (1, 1), (0x7FFF, 1), (-1, 1)]


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__share_group_state", "__transaction_state",
                                   "__cluster_metadata", "__remote_log_metadata"])
def test_a_value_version_known_reads_only_the_signature(topic):
    """The bulk search asks `value_version_known` with a record's key and value cut to their first
    2 and 3 bytes: it must answer as it does for the whole record."""
    decoder = decoder_for_topic(topic)
    variants = {variant for record in _corpus_records(topic)[:40] for variant in _versions_rewritten(*record)}
    variants |= {(key, value) for key in (None, b"", b"\x00", b"\x00\x01", b"\x00\x02\x05")
                 for value in (None, b"", b"\x01", b"\x00\x03", b"\x01\x05\x00", b"\x01\x05\x00\x07")}
    for key, value in variants:
        cut = (None if key is None else key[:SIGNATURE_KEY_BYTES],
               None if value is None else value[:SIGNATURE_VALUE_BYTES])
        assert decoder.value_version_known(*cut) == decoder.value_version_known(key, value), (key, value)


# -- the compiled walk (`bulk_signatures`) against the records `Batch.records` gives ---------------

def _kernel():
    pytest.importorskip("numba", reason="the bulk search needs numba (an install requirement)")
    kernel = bulk_scan.kernel()
    assert kernel is not None
    return kernel


def _signatures_one_by_one(logs: list[Path]) -> set:
    from kafkalog_tools.formats.segment import SegmentFile

    found = set()
    for log in logs:
        with SegmentFile(log) as segment:
            for batch in segment.batches():
                if not batch.is_control:
                    found |= {(None if r.key is None else bytes(r.key[:SIGNATURE_KEY_BYTES]),
                               None if r.value is None else bytes(r.value[:SIGNATURE_VALUE_BYTES]))
                              for r in batch.records()}
    return found


def _records_of_every_shape(rng: random.Random, count: int) -> tuple[list[bytes], int]:
    """Records whose keys and values are null, empty, shorter and longer than a signature keeps,
    with one- and multi-byte varints and headers; and their largest timestamp delta."""
    sizes = [-1, 0, 1, 2, 3, 4, 63, 64, 200, 9000]
    records, deltas = [], []
    for delta in range(count):
        key, value = (None if size < 0 else rng.randbytes(size) for size in (rng.choice(sizes), rng.choice(sizes)))
        headers = [(b"h", rng.choice([None, b"x" * rng.randrange(300)]))] * rng.randrange(3)
        deltas.append(rng.randrange(-200, 200))
        records.append(build_record(delta, deltas[-1], key, value, headers))
    return records, max(deltas)


def _segment_of_every_shape(rng: random.Random, base_offset: int = 0, timestamps_agree: bool = False) -> bytes:
    """`timestamps_agree`: each batch's max timestamp is its records' largest (else 1, the base)."""
    batches, offset = [], base_offset
    for _ in range(60):
        records, largest = _records_of_every_shape(rng, rng.choice([1, 1, 2, 7]))
        batches.append(build_batch(offset, records, base_timestamp=1,
                                   max_timestamp=1 + largest if timestamps_agree else 1))
        offset += len(records)
        if rng.random() < 0.1:
            batches.append(transaction_marker(offset, 1, 7, 0, 1))
            offset += 1
    return b"".join(batches)


@pytest.mark.parametrize("step", [16 << 20, 4096])
def test_the_kernel_reads_the_signature_of_every_record(tmp_path, monkeypatch, step):
    monkeypatch.setattr(versions, "BULK_STEP", step)
    kernel, rng = _kernel(), random.Random(11)
    logs = []
    for number in range(3):
        logs.append(tmp_path / f"{number:020}.log")
        logs[-1].write_bytes(_segment_of_every_shape(rng) + b"\x00\x00\x00" * number)  # and tails no batch holds
    (tmp_path / "empty.log").write_bytes(b"")
    logs.append(tmp_path / "empty.log")
    got, unvouched = versions.bulk_signatures(logs, kernel)
    assert got == _signatures_one_by_one(logs) and unvouched == []
    assert len(got) > 100 and (None, None) in got and (b"", b"") in got


def test_the_kernel_reads_kafka_4s_internal_topics():
    kernel = _kernel()
    for partition in sorted(need(CORPUS / "golden-4.0" / "logs").glob("__*")):
        logs = sorted(partition.glob("*.log"))
        got, unvouched = versions.bulk_signatures(logs, kernel)
        vouched = [log for log in logs if log not in unvouched]
        assert got >= _signatures_one_by_one(vouched), partition
        if not unvouched:
            assert got == _signatures_one_by_one(logs), partition
    metadata = sorted((CORPUS / "golden-4.0" / "logs" / "__cluster_metadata-0").glob("*.log"))
    assert versions.bulk_signatures(metadata, kernel)[1] == []


PLAIN = build_batch(0, [build_record(0, 0, None, b"\x01\x02\x00")], base_timestamp=1, max_timestamp=1)
"""A batch both of the kernels' walks read whole."""
AFTER_PLAIN = {"compressed": build_batch(1, [build_record(0, 0, None, b"\x01\x02\x00")], compression_id=1),
               "legacy": legacy.build_entry(1, 1, None, b"\x01\x02\x00", timestamp=1)}
"""What neither walk reads the records of, after PLAIN."""


@pytest.mark.parametrize("case", ["compressed", "legacy", "record-past-its-batch", "too-many-signatures"])
def test_the_kernel_does_not_vouch_for_what_it_cannot_read(tmp_path, case):
    kernel, log, plain_log = _kernel(), tmp_path / "00000000000000000000.log", tmp_path / "00000000000000000009.log"
    plain_log.write_bytes(build_batch(9, [build_record(0, 0, None, b"\x01\x14\x00")]))
    if case in AFTER_PLAIN:
        data = PLAIN + AFTER_PLAIN[case]
    elif case == "record-past-its-batch":
        data = bytearray(PLAIN)
        data[HEADER_SIZE] += 2  # (the record's length varint: its zigzag value one more)
        data = bytes(data)
    else:
        data = build_batch(0, [build_record(n, 0, None, n.to_bytes(3, "big")) for n in range(versions.SIGNATURE_TABLE)])
    log.write_bytes(data)
    walked = versions.bulk_signatures([log, plain_log], kernel)
    if case == "too-many-signatures":
        assert walked is None
    else:
        assert walked[1] == [log] and (None, b"\x01\x14\x00") in walked[0]


def _crcs_made_good(data: bytearray) -> None:
    """Each V2 batch's CRC rewritten to match its bytes: damage a batch's CRC would not show."""
    position = 0
    while position + HEADER_SIZE <= len(data):
        size = int.from_bytes(data[position + 8:position + 12], "big", signed=True)
        if size < HEADER_SIZE - 12 or position + 12 + size > len(data):
            return
        if data[position + 16] == 2:
            crc = crc32c(bytes(data[position + 21:position + 12 + size]))
            data[position + 17:position + 21] = crc.to_bytes(4, "big")
        position += 12 + size


def test_the_search_with_the_kernel_equals_decoding_every_record_on_damaged_segments(tmp_path, monkeypatch):
    """Seeded damage (under good and bad CRCs) to partitions of share-state records in one to three
    segments, some compressed, some of versions newer than known: the search finds what decoding
    every record finds, whether the kernel's walk (or verify's deep scan, its signatures handed in)
    vouches for every segment, some or none, and whether it proves every signature known or hands
    over."""
    _kernel()
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    rng = random.Random(23)
    outcomes = set()
    for case in range(150):
        versions_written = [rng.choice([0, 0, 0, 0, 1, 2, 7]) for _ in range(rng.randrange(1, 12))]
        (tmp_path / str(case)).mkdir()
        codecs = tuple(rng.choice([0, 0, 0, 1, 3]) for _ in range(rng.randrange(1, 4)))
        logs = sorted(_partition(tmp_path / str(case), versions_written, codecs).glob("*.log"))
        log = rng.choice(logs)
        data = bytearray(log.read_bytes())
        for _ in range(rng.randrange(4)):
            at = rng.randrange(len(data))
            kind = rng.choice(["flip", "cut", "zero", "byte"])
            if kind == "flip":
                data[at] ^= 1 << rng.randrange(8)
            elif kind == "cut":
                del data[at:]
            elif kind == "zero":
                length = len(data[at:at + rng.randrange(1, 80)])
                data[at:at + length] = bytes(length)
            else:
                data[at] = rng.randrange(256)
        if rng.random() < 0.7:
            _crcs_made_good(data)
        log.write_bytes(bytes(data))
        every = newer_versions("__share_group_state", logs, every_record=True)
        assert newer_versions("__share_group_state", logs) == every, case
        signatures, unvouched = versions.bulk_signatures(logs, bulk_scan.kernel())
        outcomes.add(("walk", _how_many(len(logs) - len(unvouched), len(logs)), bool(every)))
        signed = {log: report.version_signatures for log in logs
                  if (report := check_segment(Segment(int(log.stem), log), True, deep=True)).version_signatures
                  is not None}
        assert newer_versions("__share_group_state", logs, signed=signed) == every, case
        outcomes.add(("scan", _how_many(len(signed), len(logs)), bool(every)))
    assert outcomes == {(by, vouched, found) for by in ("walk", "scan") for vouched in ("all", "some", "none")
                        for found in (False, True)}


def _how_many(vouched: int, logs: int) -> str:
    return "all" if vouched == logs else "none" if vouched == 0 else "some"


# ---------------------------------------------------------------------------------------------
# Verify's deep scan takes the signatures as it walks (kernels.scan_signing)
# ---------------------------------------------------------------------------------------------


def _scan_signatures(log: Path, outlined: bool = False) -> set | None:
    """The signatures deep verify's scan of `log` took, unpacked, or None where it does not vouch.
    `outlined`: as verify reads a big segment with an index (`kernels.scan_outlined`, signing)."""
    base = int(log.stem) if log.stem.isdigit() else 0
    if outlined:
        index = log.with_suffix(".index")
        index.write_bytes(b"")
        report = check_segment(Segment(base, log, index=index), True, deep=True, on_batch=lambda facts: None,
                               outlines=True)
    else:
        report = check_segment(Segment(base, log), True, deep=True)
    signed = report.version_signatures
    return None if signed is None else {versions._prefixes(signature) for signature in signed}


def test_verify_s_scan_signs_every_record_it_reads(tmp_path, monkeypatch):
    """Segments of records of every shape (the kernel's one-word path and its field by field one),
    in a partition of an internal topic, read by the scan in steps of 4 KiB too."""
    _kernel()
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    partition = tmp_path / "__share_group_state-0"
    partition.mkdir()
    rng = random.Random(31)
    for number in range(3):
        log = partition / f"{number * 1000:020}.log"
        log.write_bytes(_segment_of_every_shape(rng, number * 1000, timestamps_agree=True) + bytes(5 * number))
        expected = _signatures_one_by_one([log])
        assert _scan_signatures(log) == expected and len(expected) > 50, log
        with monkeypatch.context() as patch:
            patch.setattr(bulk_scan.Reader, "STEP", 4096)
            assert _scan_signatures(log) == expected, log
            patch.setattr(bulk_scan.Reader, "CHUNK", 7)
            patch.setattr(segment_check, "SPARSE_TABLE_ROWS", 0)
            assert _scan_signatures(log, outlined=True) == expected, log


def _segment_of_runs(rng: random.Random, base_offset: int) -> bytes:
    """Records in runs alike, as a KRaft log's NoOpRecords are (the walks skip the probe for a
    signature like the one before): six signatures, one-word records and longer ones, a run
    going on across batches and steps, and one back after another's run."""
    values = [None, b"", b"\x01\x0c\x00", b"\x01\x0c\x01", b"\x01\x0c\x02" + bytes(300), b"\x00\x01\x00\x00"]
    batches, offset, value = [], base_offset, values[2]
    for _ in range(400):
        count = rng.choice([1, 1, 1, 3])
        records = []
        for delta in range(count):
            if rng.random() < 0.15:
                value = rng.choice(values)
            records.append(build_record(delta, 0, None, value))
        batches.append(build_batch(offset, records, base_timestamp=1, max_timestamp=1))
        offset += count
    return b"".join(batches)


def test_records_in_runs_alike_are_each_signed(tmp_path, monkeypatch):
    kernel, rng = _kernel(), random.Random(41)
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    partition = tmp_path / "__cluster_metadata-0"
    partition.mkdir()
    logs = []
    for number in range(3):
        logs.append(partition / f"{number * 2000:020}.log")
        logs[-1].write_bytes(_segment_of_runs(rng, number * 2000))
    expected = _signatures_one_by_one(logs)
    assert len(expected) == 6
    monkeypatch.setattr(versions, "BULK_STEP", 4096)
    assert versions.bulk_signatures(logs, kernel) == (expected, [])
    monkeypatch.setattr(bulk_scan.Reader, "STEP", 4096)
    monkeypatch.setattr(bulk_scan.Reader, "CHUNK", 7)
    monkeypatch.setattr(segment_check, "SPARSE_TABLE_ROWS", 0)
    for log in logs:
        alone = _signatures_one_by_one([log])
        assert _scan_signatures(log) == alone and _scan_signatures(log, outlined=True) == alone, log


def test_verify_s_scan_signs_kafka_4s_internal_topics(monkeypatch):
    _kernel()
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    vouched = []
    for partition in sorted(need(CORPUS / "golden-4.0" / "logs").glob("__*")):
        for log in sorted(partition.glob("*.log")):
            got = _scan_signatures(log)
            if got is not None:
                assert got == _signatures_one_by_one([log]), log
                vouched.append(partition.name)
    assert {"__cluster_metadata-0", "__transaction_state-1", "__remote_log_metadata-0"} <= set(vouched)


@pytest.mark.parametrize("case", ["compressed", "legacy", "legacy-only", "bad-crc", "timestamps-disagree",
                                  "not-internal", "never"])
def test_verify_s_scan_does_not_vouch_for_what_it_did_not_walk(tmp_path, monkeypatch, case):
    _kernel()
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "never" if case == "never" else "always")
    partition = tmp_path / ("bench-0" if case == "not-internal" else "__cluster_metadata-0")
    partition.mkdir()
    log = partition / "00000000000000000000.log"
    if case in AFTER_PLAIN:
        data = PLAIN + AFTER_PLAIN[case]
    elif case == "legacy-only":
        data = b"".join(legacy.build_entry(offset, 1, None, b"\x01\x02\x00", timestamp=1) for offset in range(9))
    elif case == "bad-crc":
        data = bytearray(PLAIN * 2)
        data[-1] ^= 1
    elif case == "timestamps-disagree":
        data = PLAIN + build_batch(1, [build_record(0, 5, None, b"\x01\x02\x00")], base_timestamp=1, max_timestamp=1)
    else:
        data = PLAIN
    log.write_bytes(bytes(data))
    assert _scan_signatures(log) is None
    if case == "bad-crc":  # (the same bytes, whole: vouched)
        log.write_bytes(PLAIN * 2)
        assert _scan_signatures(log) == {(None, b"\x01\x02\x00")}


def test_the_signing_scan_reads_as_the_scan_reads():
    """kernels.scan_signing's columns and stops are kernels.scan's, over the corpus's segments."""
    import numpy as np

    from kafkalog_tools.formats.segment import SegmentFile

    kernel = _kernel()
    logs = sorted(need(CORPUS / "golden-4.0" / "logs").rglob("*.log")) + sorted(need(CORPUS / "golden").rglob("*.log"))
    for log in logs:
        with SegmentFile(log) as segment:
            if not segment.end:
                continue
            view = kernel.view(segment.buffer)
            plain, signed = kernel.columns(4096), kernel.columns(4096)
            n, after = kernel.scan(view, 0, segment.end, segment.end, True, plain)
            assert kernel.scan(view, 0, segment.end, segment.end, True, signed,
                               versions.SigningTable().signing) == (n, after), log
            assert np.array_equal(plain[:, :n], signed[:, :n]), log
            del view

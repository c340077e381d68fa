"""Shared test inputs: hypothesis strategies for Kafka's fields, and the golden corpus's files.

Strategies draw values across each field's whole Java range (not only what a producer writes), so
round trips and fast-path/reference comparisons see negative deltas, null keys, sequence wrap-around
and the like. Corpus lists are computed at collection time; when the corpus is absent they hold one
placeholder that skips with the reason, so a parametrised test reports a skip rather than vanishing.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import strategies as st

from tests.conftest import GOLDEN, REAL

# ---------------------------------------------------------------------------------------------
# Java integer ranges
# ---------------------------------------------------------------------------------------------

INT8 = st.integers(-(1 << 7), (1 << 7) - 1)
INT16 = st.integers(-(1 << 15), (1 << 15) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
UINT32 = st.integers(0, (1 << 32) - 1)
INT32_MAX = (1 << 31) - 1

SMALL_BYTES = st.binary(max_size=48)
NULLABLE_BYTES = st.none() | SMALL_BYTES

# ---------------------------------------------------------------------------------------------
# V2 records and batches
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordSpec:
    """One V2 record's fields, as `record_batch.build_record` takes them."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[bytes, bytes | None], ...] = ()
    attributes: int = 0


record_specs = st.builds(
    RecordSpec,
    offset_delta=INT32,
    timestamp_delta=INT64,
    key=NULLABLE_BYTES,
    value=NULLABLE_BYTES,
    headers=st.lists(st.tuples(st.binary(max_size=12), NULLABLE_BYTES), max_size=3).map(tuple),
    attributes=INT8,
)


@dataclass(frozen=True)
class BatchSpec:
    """A V2 batch's header fields and records, as `record_batch.build_batch` takes them."""

    base_offset: int
    records: tuple[RecordSpec, ...]
    compression_id: int
    log_append_time: bool
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    partition_leader_epoch: int
    transactional: bool = False


batch_specs = st.builds(
    BatchSpec,
    base_offset=st.integers(0, (1 << 62)),
    records=st.lists(record_specs, max_size=6).map(tuple),
    compression_id=st.sampled_from([0, 1, 2, 3, 4]),
    log_append_time=st.booleans(),
    base_timestamp=st.integers(-1, 1 << 45),
    max_timestamp=st.integers(-1, 1 << 45),
    producer_id=st.integers(-1, 1 << 40),
    producer_epoch=INT16,
    # around Int.MAX too, where sequences wrap to 0
    base_sequence=st.one_of(st.just(-1), st.integers(0, 1000), st.integers(INT32_MAX - 10, INT32_MAX)),
    partition_leader_epoch=INT32,
    transactional=st.booleans(),
)


# ---------------------------------------------------------------------------------------------
# Legacy V0/V1 messages
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LegacySpec:
    offset: int
    magic: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    attributes: int


legacy_specs = st.builds(
    LegacySpec,
    offset=INT64,
    magic=st.sampled_from([0, 1]),
    key=NULLABLE_BYTES,
    value=NULLABLE_BYTES,
    timestamp=INT64,
    attributes=st.integers(-16, 15).map(lambda a: a << 3),  # any flag bits, codec bits 0 (uncompressed)
)

# ---------------------------------------------------------------------------------------------
# The golden and real corpora
# ---------------------------------------------------------------------------------------------


def corpus_params(root: Path, pattern: str, *, nonempty: bool = False) -> list:
    """pytest params for every file under `root` matching `pattern`, id'd by their relative path."""
    if not root.exists():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"shared corpus not found at {root}"),
                             id="corpus-absent")]
    files = sorted(p for p in root.glob(pattern) if p.is_file() and (p.stat().st_size or not nonempty))
    return [pytest.param(p, id=str(p.relative_to(root))) for p in files]


GOLDEN_LOGS = corpus_params(GOLDEN / "logs", "*/*.log", nonempty=True)


def _first_magic(param) -> int | None:
    path = param.values[0]
    if path is None:
        return None
    with open(path, "rb") as handle:
        return handle.read(17)[16]


GOLDEN_V2_LOGS = [p for p in GOLDEN_LOGS if _first_magic(p) in (None, 2)]
GOLDEN_LEGACY_LOGS = [p for p in GOLDEN_LOGS if _first_magic(p) in (None, 0, 1)]
GOLDEN_OFFSET_INDEXES = corpus_params(GOLDEN / "logs", "*/*.index")
GOLDEN_TIME_INDEXES = corpus_params(GOLDEN / "logs", "*/*.timeindex")
GOLDEN_TXN_INDEXES = corpus_params(GOLDEN / "logs", "*/*.txnindex")
GOLDEN_SNAPSHOTS = corpus_params(GOLDEN / "logs", "*/*.snapshot")
GOLDEN_EPOCH_CHECKPOINTS = corpus_params(GOLDEN, "**/leader-epoch-checkpoint")
REAL_EPOCH_CHECKPOINTS = corpus_params(REAL, "*/*/leader-epoch-checkpoint")
REAL_OFFSET_CHECKPOINTS = corpus_params(REAL, "*/*-offset-checkpoint")

_ENTRY_HEADER = struct.Struct(">qi")


def log_entries(data: bytes) -> list[tuple[int, bytes]]:
    """(position, bytes) of each shallow entry of a well-formed segment, walked independently of
    the library: int64 offset, int32 size, then `size` bytes."""
    entries = []
    position = 0
    while position < len(data):
        _, size = _ENTRY_HEADER.unpack_from(data, position)
        end = position + 12 + size
        assert size >= 14 and end <= len(data), f"golden segment is not well formed at byte {position}"
        entries.append((position, data[position:end]))
        position = end
    return entries


def manifest_for(log: Path) -> dict | None:
    """What Kafka itself parsed from a golden segment (golden/manifests/logs/<partition>/<base>.json)."""
    import json

    path = GOLDEN / "manifests" / "logs" / log.parent.name / (log.stem + ".json")
    return json.loads(path.read_text()) if path.exists() else None

"""Internal-topic records written by a newer Kafka: values whose version no decoder here knows.

Such a value is read with the newest layout we know, as Kafka's generated readers read it, and its
decoder marks it with `read_as_version`. This collects them per kind and version over a
partition's segments, for `verify` to report once each rather than once a record.

Most records need no decoding: their decoder's `value_version_known` answers from their version
fields alone. Where the compiled kernels are loaded, they read each record's version signature and
the predicate is asked once per distinct one; only where one is not known are the records read here
one by one, or, where all are known, those of the segments the kernels cannot vouch for. Verify's
deep scan takes the signatures as it walks the records (`SigningTable`); the segments it could not
vouch for are walked here (`bulk_signatures`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..errors import KafkaLogError
from ..formats.logdir import parse_partition_dir_name
from ..formats.segment import SegmentFile
from ..native import bulk_scan
from . import PayloadError, decoder_for_topic


@dataclass
class NewerVersion:
    kind: str
    """The record type as the decoder names it ("share_update", "TOPIC_RECORD", ...)."""
    version: int
    read_as: int
    """The layout it was read with: the newest known."""
    count: int
    file: str
    """Where the first one is: its segment, batch position and offset."""
    position: int
    offset: int


def newer_versions(topic: str, logs: Iterable[Path], every_record: bool = False,
                   signed: dict[Path, frozenset[int]] | None = None) -> list[NewerVersion]:
    """Records of `topic` (by its decoder) whose value version is newer than any known, by kind
    and version. Batches that cannot be read are skipped: reporting them is verify's other work.
    Only the records whose version fields the decoder does not know are decoded, unless
    `every_record` (the reference the tests hold that to). `signed`: the signatures a scan took of
    every record of those logs it vouches for (`SigningTable.signatures`), as the kernels pack them."""
    decoder = decoder_for_topic(topic)
    if decoder is None:
        return []
    found: dict[tuple[str, int], NewerVersion] = {}
    known = None if every_record else decoder.value_version_known
    logs = list(logs)
    kernel = bulk_scan.loaded_kernel()
    signed = signed or {}
    if known is not None and kernel is not None:
        walked = bulk_signatures([log for log in logs if log not in signed], kernel)
        if walked is not None:
            signatures = walked[0] | {_prefixes(signature) for log in logs for signature in signed.get(log, ())}
            if all(known(key, value) for key, value in signatures):
                # the vouched segments hold no record to decode, and none of them raises (the walk read them)
                logs = walked[1]
    for log in logs:
        with SegmentFile(log) as segment:
            for batch in segment.batches():
                if batch.is_control:
                    continue
                try:
                    records = batch.records()
                except KafkaLogError:
                    continue
                for record in records:
                    if known is not None and known(record.key, record.value):
                        continue
                    try:
                        decoded = decoder.decode(record.key, record.value, offset=record.offset)
                    except PayloadError:
                        continue
                    value = decoded.value
                    if not isinstance(value, dict) or "read_as_version" not in value:
                        continue
                    key = decoded.key if isinstance(decoded.key, dict) else {}
                    kind = str(value.get("type") or key.get("type") or topic)
                    entry = found.get((kind, value["version"]))
                    if entry is None:
                        found[kind, value["version"]] = NewerVersion(kind, value["version"], value["read_as_version"],
                                                                     1, str(log), batch.position, record.offset)
                    else:
                        entry.count += 1
    return list(found.values())


BULK_STEP = 16 << 20
"""Segment bytes a kernel call walks before the pages behind it are handed back
(`SegmentFile.release_before`): a big segment is walked without holding it all."""
SIGNATURE_TABLE = 1 << 14
"""Slots of the kernel's table of distinct signatures; past half of them, every record is read here."""


def bulk_signatures(logs: list[Path], kernel) -> tuple[set[tuple[bytes | None, bytes | None]], list[Path]] | None:
    """The distinct version signatures of the records `newer_versions` would decode in `logs`, read
    by the compiled kernel (`kernels.version_signatures`): (key, value), each None where null, else
    its first SIGNATURE_KEY_BYTES and SIGNATURE_VALUE_BYTES bytes (fewer where shorter); and the
    logs it cannot vouch that it saw every such record of: a V0/V1 entry, a compressed batch, a
    record it cannot read (their signatures up to there are in). None where the table fills. May
    hold more: those of batches `Batch.records` would refuse (their records are read anyway, and a
    signature said known changes nothing)."""
    import numpy as np

    table = np.zeros(SIGNATURE_TABLE, dtype=np.int64)
    state = np.zeros(bulk_scan.SIGNATURE_STATE, dtype=np.int64)
    unvouched = []
    for log in logs:
        with SegmentFile(log) as segment:
            if not segment.end:
                continue
            view = kernel.view(segment.buffer)
            position = 0
            while True:
                limit = position + BULK_STEP
                position = kernel.version_signatures(view, position, limit, segment.end, table, state)
                if state[bulk_scan.SIG_UNSURE] == bulk_scan.UNSURE_TABLE_FULL:
                    return None  # (the signatures of the logs before are not all in)
                if state[bulk_scan.SIG_UNSURE]:
                    state[bulk_scan.SIG_UNSURE] = 0
                    unvouched.append(log)
                    break
                segment.release_before(position)
                if position < limit:
                    break
            del view  # (the map closes only once no view of it is left)
    return {_prefixes(signature) for signature in (table[table != 0] - 1).tolist()}, unvouched


class SigningTable:
    """Where a deep scan of a segment (`bulk_scan.Reader.signing`) puts the version signatures of
    the records it walks, as `bulk_signatures` takes them, and says whether it vouches for them all."""

    def __init__(self):
        import numpy as np

        self.table = np.zeros(SIGNATURE_TABLE, dtype=np.int64)
        self.state = np.zeros(bulk_scan.SIGNATURE_STATE, dtype=np.int64)

    @property
    def signing(self) -> tuple:
        """What `bulk_scan.Reader.signing` takes."""
        return self.table, self.state

    def signatures(self) -> frozenset[int] | None:
        """The signatures, packed, of the records the kernel walked (after the scan), or None where
        it cannot vouch that it walked every record of every data batch it read, or the table filled."""
        if self.state[bulk_scan.SIG_UNSURE]:
            return None
        return frozenset((self.table[self.table != 0] - 1).tolist())


def signs_versions(log: Path) -> bool:
    """Whether a deep scan of the segment `log` should take its records' version signatures: one of
    an internal topic whose decoder knows its versions (by its partition directory's name)."""
    parsed = parse_partition_dir_name(log.parent.name)
    if parsed is None or not parsed[0].startswith("__"):  # (only internal topics have decoders: none imported)
        return False
    decoder = decoder_for_topic(parsed[0])
    return decoder is not None and decoder.value_version_known is not None


def _prefixes(signature: int) -> tuple[bytes | None, bytes | None]:
    """A signature as `kernels.version_signatures` packs it: key tag (0 null, else 1 + the bytes
    kept), key bytes, value tag, value bytes, the bytes left-aligned."""
    value_bytes, value_tag = signature & 0xFFFFFF, signature >> 24 & 7
    key_bytes, key_tag = signature >> 27 & 0xFFFF, signature >> 43 & 7
    return (None if key_tag == 0 else key_bytes.to_bytes(bulk_scan.SIGNATURE_KEY_BYTES, "big")[:key_tag - 1],
            None if value_tag == 0 else value_bytes.to_bytes(bulk_scan.SIGNATURE_VALUE_BYTES, "big")[:value_tag - 1])

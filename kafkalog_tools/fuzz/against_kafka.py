"""Differential runs against Kafka's own code (the oracle, `oracle.py`): the same random and mutated
inputs read, recovered, dumped, retained and cleaned by Kafka 4.0 and by us; any difference fails.

Cases come from the fuzzer's own generator (`cases.py`: seeds from the corpora given and synthesized
ones - every magic, codec, control batches, internal topics - mutated by `mutate.py`) without its
filesystem hazards; keyed partitions for retention and compaction from `keyed_partition`. A case is
fully determined by (run seed, kind, case number, seed files). Kinds:

- `parse`: one segment read by Kafka (`kafka-oracle parse`, FileRecords as kafka-dump-log reads
  it) and by us (SegmentFile): the same entries at the same positions with the same header
  fields, the same records (or both failing to decode them), the same place where reading stops
  and why; internal-topic payloads decoded alike where our decoder knows the type (`PAYLOADS`).
- `dump`: `kafkalog dump --format text` against `kafka-dump-log` with the same flags: the same
  text (see KNOWN_DUMP_DIFFERENCES for where Kafka's tool is the one that is wrong).
- `recover`: `kafkalog rebuild-index [--truncate]` on a copy against Kafka's `LogSegment.recover`
  (`kafka-oracle recover`): the same bytes in every .log, .index, .timeindex and .txnindex.
- `retention`: `kafkalog retention` against `UnifiedLog.deleteOldSegments` (`kafka-oracle retain`):
  the same segments deleted for the same reasons, the same new log start offset, the same segments
  as loaded and log end offset; half the partitions damaged first (`damage_partition`), and where
  Kafka's loader or retention pass throws, ours says which.
- `compaction`: `kafkalog compaction --simulate` against one pass of Kafka's cleaner (`kafka-oracle
  clean`): the same cleanable range and decision, the same segments after with the same batches and
  records, the same bytes where nothing is compressed; half the partitions damaged first, after a
  clean shutdown or not (then Kafka's loader recovers the log before the cleaner reads it).

A case that differs is saved as a directory (its inputs and `case.json`, which names the kind,
the seed, the number, the difference and the command lines of both sides) so that it reproduces
without the generator: `python -m kafkalog_tools.fuzz --against-kafka --replay DIR`.
"""
from __future__ import annotations

import base64
import json
import os
import random
import re
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..codecs.lz4_codec import FRAME_MAGIC
from ..errors import DecompressionError, KafkaLogError
from ..formats.logdir import CLEAN_SHUTDOWN
from ..formats.segment import BadEntry, SegmentFile, Stop
from ..payloads.transaction_state import TransactionState
from ..retention import TRUNCATED_MTIME
from . import cases, oracle
from .runner import _on_alarm, run_in_process

KINDS = ("parse", "dump", "recover", "retention", "compaction")
RETENTION_EVERY = 2
"""One retention case and one compaction case per this many segment cases."""
TIME_LIMIT = 600.0
"""Seconds one of our command runs may take (generous: the first run of a compiled kernel compiles it)."""
REPRODUCE_VARIABLE = "KAFKALOG_KAFKA_DIFF_DIR"
"""Where differing cases are saved (default: kafkalog-kafka-diff/ in the system's temp dir)."""
BOMBS = "00000000000000000200.log"
"""The synthesized decompression bombs: Kafka inflates all 160 MiB; we stop at --max-decompressed
by design. Not a question for Kafka."""


def reproduction_dir() -> Path:
    import tempfile

    return Path(os.environ.get(REPRODUCE_VARIABLE) or Path(tempfile.gettempdir()) / "kafkalog-kafka-diff")


@dataclass
class Difference:
    kind: str
    case: int
    what: str
    saved: Path | None = None

    def __str__(self) -> str:
        where = f"; reproduce: python -m kafkalog_tools.fuzz --against-kafka --replay {self.saved}" if self.saved else ""
        return f"{self.kind} case {self.case}: {self.what}{where}"


@dataclass
class Report:
    run_seed: int
    compared: dict[str, int] = field(default_factory=dict)
    """Cases compared per kind."""
    details: dict[str, int] = field(default_factory=dict)
    """What those cases compared (batches, records, files, segments, ...)."""
    differences: list[Difference] = field(default_factory=list)
    open: list[Difference] = field(default_factory=list)
    """Differences of a kind listed in OPEN_DIFFERENCES: saved and counted, not failed on."""
    seconds: float = 0.0
    last_clean_end: int | None = None
    """Where Kafka's last cleaning compared ended (its cleaner checkpoint), when it cleaned."""

    def count(self, name: str, n: int = 1) -> None:
        self.details[name] = self.details.get(name, 0) + n

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in self.compared.items())
        details = ", ".join(f"{k} {n}" for k, n in sorted(self.details.items()))
        return (f"seed {self.run_seed}: compared with Kafka in {self.seconds} s: {kinds} ({details}); "
                f"{len(self.differences)} differences, {len(self.open)} open ones")


OPEN_DIFFERENCES: tuple[tuple[str, str, str], ...] = ()  # (kind, pattern of the difference, what it is)
"""Each is in the README's list of open differences; a case of one is saved as open-<kind>-..."""


def open_difference(kind: str, found: list[str]) -> str | None:
    """The OPEN_DIFFERENCES entry every one of `found` is an instance of, or None."""
    for open_kind, pattern, what in OPEN_DIFFERENCES:
        if open_kind == kind and all(re.search(pattern, line) for line in found):
            return what
    return None


# ---------------------------------------------------------------------------------------------
# parse: a segment as Kafka reads it and as we do
# ---------------------------------------------------------------------------------------------

BATCH_FIELDS = (  # (Kafka's name, ours)
    ("sizeInBytes", lambda b: b.size), ("baseOffset", lambda b: b.base_offset), ("lastOffset", lambda b: b.last_offset),
    ("count", lambda b: b.count), ("magic", lambda b: b.magic), ("crc", lambda b: b.crc),
    ("isValid", lambda b: b.crc_valid), ("compressionId", lambda b: b.compression_id),
    ("timestampType", lambda b: b.timestamp_type), ("maxTimestamp", lambda b: b.max_timestamp),
    ("producerId", lambda b: b.producer_id), ("producerEpoch", lambda b: b.producer_epoch),
    ("baseSequence", lambda b: b.base_sequence), ("lastSequence", lambda b: b.last_sequence),
    ("isTransactional", lambda b: b.is_transactional), ("isControl", lambda b: b.is_control),
    ("partitionLeaderEpoch", lambda b: b.partition_leader_epoch),
    ("deleteHorizonMs", lambda b: -1 if b.delete_horizon_ms is None else b.delete_horizon_ms),
)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(bytes(data)).decode()


def _record_view(record, magic: int) -> dict:
    view = {"offset": record.offset, "timestamp": record.timestamp, "sequence": record.sequence,
            "sizeInBytes": record.size, "keySize": record.key_size, "valueSize": record.value_size,
            "key": _b64(record.key), "value": _b64(record.value),
            "headers": [{"key": base64.b64decode(_b64(k)).decode("utf-8", "replace"), "value": _b64(v)}
                        for k, v in record.headers]}
    if magic < 2:
        view["crc"], view["isValid"] = record.legacy_crc, record.legacy_crc_valid
    if record.control is not None:
        view["controlType"] = record.control.name
        if record.control.coordinator_epoch is not None:
            view["coordinatorEpoch"] = record.control.coordinator_epoch
    return view


def _kafka_record_view(record: dict) -> dict:
    view = {k: record.get(k) for k in ("offset", "timestamp", "sequence", "sizeInBytes", "keySize", "valueSize",
                                       "key", "value", "headers")}
    if "crc" in record:
        view["crc"], view["isValid"] = record["crc"], record["isValid"]
    control = record.get("control")
    if control:
        view["controlType"] = control.get("controlType")
        if "coordinatorEpoch" in control:
            view["coordinatorEpoch"] = control["coordinatorEpoch"]
    return view


def _first_mismatch(ours, theirs, path: str = "") -> str | None:
    """The first place (a dotted path) where two JSON-like values differ, or None."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in list(theirs) + [k for k in ours if k not in theirs]:
            found = _first_mismatch(ours.get(key), theirs.get(key), f"{path}.{key}" if path else str(key))
            if found:
                return found
        return None
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for n, (a, b) in enumerate(zip(ours, theirs)):
            found = _first_mismatch(a, b, f"{path}[{n}]")
            if found:
                return found
        return None
    if ours != theirs or type(ours) is not type(theirs) and not (isinstance(ours, int) and isinstance(theirs, int)):
        return f"{path}: ours {str(ours)[:160]} vs Kafka {str(theirs)[:160]}"
    return None


STOPS = {  # how Kafka's iterator ended -> ours
    "end": (Stop.END, Stop.SHORT_TAIL, Stop.PARTIAL_ENTRY),
    "exception": (Stop.CORRUPT_SIZE,),
}


def compare_parse(path: Path, kafka: dict, report: Report, decode: str | None = None) -> list[str]:
    """Where our reading of the segment at `path` differs from Kafka's `parse` object for it."""
    found = []
    with SegmentFile(path) as segment:
        entries = list(segment.entries())
        stop, stop_position = segment.stop, segment.stop_position
        theirs = kafka.get("batches", [])
        report.count("batches", len(theirs))
        if [e.position for e in entries] != [b["position"] for b in theirs]:
            return [f"entries at positions {[e.position for e in entries][:20]} vs Kafka "
                    f"{[b['position'] for b in theirs][:20]}"]
        for entry, batch in zip(entries, theirs):
            found += _compare_entry(path, entry, batch, report, decode)
            if len(found) > 5:
                break
    iteration = kafka["iteration"]
    if stop not in STOPS[iteration["stoppedBy"]] or stop_position != iteration["position"]:
        found.append(f"reading stops: ours {stop.value} at {stop_position} vs Kafka {iteration['stoppedBy']} "
                     f"at {iteration['position']} ({(iteration.get('exception') or {}).get('message', '')})")
    return found


PAYLOAD_FIELDS = ("control", "decoded")
"""Record errors of Kafka's payload decoding: compared as such, not as an unreadable record."""


def _compare_entry(path: Path, entry, batch: dict, report: Report, decode: str | None) -> list[str]:
    at = f"batch at {batch['position']}"
    header_errors = [e for e in batch.get("errors") or [] if e.get("field") != "records"]
    kafka_errors = list(batch.get("errors") or []) + [
        e for record in batch.get("records") or [] for e in record.get("errors") or []
        if e.get("field") not in PAYLOAD_FIELDS]
    if isinstance(entry, BadEntry):
        if not kafka_errors:
            return [f"{at}: ours unreadable ({entry.error}) vs Kafka read it whole"]
        report.count("unreadable batches")
        return []
    found = []
    for name, ours in BATCH_FIELDS:
        if batch.get(name) is None and any(e.get("field") == name for e in header_errors):
            continue
        try:
            value = ours(entry)
        except KafkaLogError as exc:  # a wrapper's base offset is its first record's: its records fail
            if not kafka_errors:
                found.append(f"{at}: {name}: ours fails ({exc}) vs Kafka {batch.get(name)}")
            continue
        if value != batch.get(name):
            found.append(f"{at}: {name} ours {value} vs Kafka {batch.get(name)}")
    # the records against Kafka's iteration alone: a header accessor that throws (compressionType of
    # an unknown codec id) does not stop an iterator that reads nothing (count 0)
    iteration_errors = [e for e in kafka_errors if e not in header_errors]
    try:
        records = entry.records()
    except KafkaLogError as exc:
        if not iteration_errors:
            found.append(f"{at}: ours records fail ({exc}) vs Kafka read {len(batch.get('records', []))}")
        else:
            report.count("undecodable batches")
        return found
    if iteration_errors:
        found.append(f"{at}: Kafka fails ({iteration_errors[0].get('field')}: {iteration_errors[0].get('class')}: "
                     f"{iteration_errors[0].get('message')}) vs ours read {len(records)} records")
        return found
    theirs = batch.get("records", [])
    report.count("records", len(theirs))
    if len(records) != len(theirs):
        return found + [f"{at}: {len(records)} records vs Kafka {len(theirs)}"]
    for record, kafka_record in zip(records, theirs):
        mismatch = _compare_record(record, kafka_record, entry.magic, decode, report)
        if mismatch:
            found.append(f"{at} record {kafka_record.get('offset')}: {mismatch}")
            break
    return found


def _compare_record(record, kafka_record: dict, magic: int, decode: str | None, report: Report) -> str | None:
    control_error = _kafka_control_error(kafka_record)
    our_error = record.control_error or (record.control.error if record.control is not None else None)
    if control_error is not None or our_error is not None:
        if control_error is None or our_error is None:
            return (f"control record: ours {our_error or (record.control and record.control.name)} "
                    f"vs Kafka {control_error or kafka_record.get('control')}")
        kafka_record = {k: v for k, v in kafka_record.items() if k != "control"}
        record_view = _record_view(record, magic)
        record_view.pop("controlType", None)
        record_view.pop("coordinatorEpoch", None)
        return _first_mismatch(record_view, _kafka_record_view(kafka_record))
    mismatch = _first_mismatch(_record_view(record, magic), _kafka_record_view(kafka_record))
    if mismatch is None and decode is not None and "decoded" in kafka_record:
        mismatch = compare_payload(decode, record, kafka_record["decoded"], report)
    return mismatch


LZ4_LEFTOVERS = "cases with an lz4 match at offset 0 (Kafka reads its buffer's leftovers), not compared"


def lz4_reads_leftovers(partition: Path) -> bool:
    """Whether a segment of `partition` holds an lz4 payload that decompresses (for us) though a
    block has a match at offset 0. That is invalid LZ4, which neither decompressor rejects: lz4-java
    copies the bytes its decompression buffer held there, a buffer Kafka reuses from batch to batch,
    so what Kafka reads is not a function of the file (we read zeros). Found by the differential run
    (seed 1125, case 115). A payload that fails for us anyway is compared as ever."""
    for log in partition.glob("*.log"):
        with SegmentFile(log) as segment:
            for entry in segment.entries():
                if isinstance(entry, BadEntry) or entry.compression_id != 3:
                    continue
                raw = bytes(segment.buffer[entry.position:entry.end])
                frame = raw.find(FRAME_MAGIC.to_bytes(4, "little"))
                if frame >= 0 and _zero_offset_match(raw, frame) and _decompresses(entry):
                    return True
    return False


def _decompresses(entry) -> bool:
    try:
        entry.records()
    except DecompressionError:
        return False
    except KafkaLogError:  # the records, not the payload
        pass
    return True


def _zero_offset_match(data: bytes, frame: int) -> bool:
    """Whether the LZ4 frame at `frame` has a block with a match at offset 0; a walk that stops
    quietly where the frame is malformed (our decompressor reports that)."""
    try:
        flags = data[frame + 4]
        pos = frame + 7 + (8 if flags & 0x08 else 0)
        while pos + 4 <= len(data) and (word := int.from_bytes(data[pos:pos + 4], "little")):
            size = word & 0x7FFFFFFF
            block = data[pos + 4:pos + 4 + size]
            pos += 4 + size + (4 if flags & 0x10 else 0)
            if not word & 0x80000000 and _block_has_zero_offset(block):
                return True
    except IndexError:
        pass
    return False


def _block_has_zero_offset(block: bytes) -> bool:
    i = 0
    while i < len(block):
        token = block[i]
        literals, i = token >> 4, i + 1
        if literals == 15:
            while block[i] == 255:
                literals, i = literals + 255, i + 1
            literals, i = literals + block[i], i + 1
        i += literals
        if i + 2 > len(block):
            return False  # the last sequence: literals only
        if block[i] == block[i + 1] == 0:
            return True
        i += 2
        if token & 0x0F == 15:
            while block[i] == 255:
                i += 1
            i += 1
    return False


def _kafka_control_error(kafka_record: dict) -> str | None:
    """Why Kafka could not read a control record's key or value: the oracle's `control.decodeError`
    (ControlRecordType.parse, EndTransactionMarker.deserialize) or an accessor's error."""
    decode_error = (kafka_record.get("control") or {}).get("decodeError")
    if decode_error is not None:
        return decode_error
    error = next((e for e in kafka_record.get("errors") or [] if e.get("field") == "control"), None)
    return None if error is None else error.get("message") or error.get("class") or "an error"


# ---------------------------------------------------------------------------------------------
# Payloads of internal topics
# ---------------------------------------------------------------------------------------------

PAYLOADS = {  # topic -> (kafka-oracle --decode kind, our decoder's name)
    "__consumer_offsets": ("consumer-offsets", "consumer-offsets"),
    "__transaction_state": ("transaction-log", "transaction-log"),
    "__share_group_state": ("share-group-state", "share-group-state"),
    "__remote_log_metadata": ("remote-log-metadata", "remote-log-metadata"),
}
"""Internal topics whose payloads are compared with Kafka's JSON converters. A new decoder is
compared by adding its topic here (and, where its JSON differs in shape, a case in `compare_payload`)."""


def compare_payload(decoder_name: str, record, kafka: dict, report: Report) -> str | None:
    """Our decoder's key and value against Kafka's converters; only where ours decoded the record
    fully (a type or version we keep raw is flagged by a warning and not compared)."""
    from ..payloads import PayloadError, decoders

    if "decodeError" in kafka:
        return None  # compared only where Kafka decodes
    try:
        ours = decoders()[decoder_name].decode(record.key, record.value, record.offset)
    except PayloadError as exc:
        return f"our decoder fails ({exc}) where Kafka's decodes"
    if ours.warning is not None:
        report.count("payloads not compared (kept raw)")
        return None
    report.count("payloads")
    if decoder_name == "remote-log-metadata":  # no key; Kafka's object's toString is what its tool prints
        theirs = {k: kafka.get(k) for k in ("apiKey", "valueVersion", "value", "toString")}
        value = _plain(ours.value) or {}
        mine = {"apiKey": value.get("apiKey"), "valueVersion": value.get("version"), "value": value.get("data"),
                "toString": ours.value_text}
        mismatch = _first_mismatch(mine, theirs)
        return None if mismatch is None else f"decoded {mismatch}"
    theirs = {k: kafka.get(k) for k in ("keyVersion", "key", "valueVersion", "value")}
    theirs["value"] = _as_converters_write(theirs["value"])
    mismatch = _first_mismatch(_our_payload(ours), theirs)
    return None if mismatch is None else f"decoded {mismatch}"


def _our_payload(decoded) -> dict:
    key, value = _plain(decoded.key), _plain(decoded.value)
    return {"keyVersion": key["version"], "key": key["data"],
            "valueVersion": None if value is None else value["version"],
            "value": None if value is None else _as_converters_write(value["data"])}


EMBEDDED_BYTES = ("subscription", "assignment")
"""Group members' consumer-protocol bytes: Kafka's converters print them in base64, we decode
them (compared by the consumer-offsets decoder's own tests, not here)."""


def _as_converters_write(obj):
    """Our JSON said as Kafka's JSON converters say it where we deliberately say more: a
    transaction status by its id (we name it); the embedded bytes of EMBEDDED_BYTES left out."""
    if isinstance(obj, list):
        return [_as_converters_write(item) for item in obj]
    if not isinstance(obj, dict):
        return obj
    view = {}
    for name, item in obj.items():
        if name == "transactionStatus" and isinstance(item, str) and item in TransactionState.__members__:
            item = TransactionState[item].value
        if name not in EMBEDDED_BYTES:
            view[name] = _as_converters_write(item)
    return view


def _plain(obj):
    return json.loads(json.dumps(obj, default=str))


# ---------------------------------------------------------------------------------------------
# dump --format text against kafka-dump-log
# ---------------------------------------------------------------------------------------------


def dump_flags(rng: random.Random, topic: str) -> list[str]:
    """kafka-dump-log's flags for one comparison (ours takes the same ones). Few sets, since each set
    costs a JVM start: shallow, deep, deep with data (and the topic's decoder for internal topics)."""
    flags = rng.choice(([], ["--deep-iteration"], ["--deep-iteration", "--print-data-log"],
                        ["--deep-iteration", "--print-data-log"]))
    if topic in DUMP_DECODERS and flags:
        flags = flags + [DUMP_DECODERS[topic]]
    return flags


DUMP_DECODERS = {"__consumer_offsets": "--offsets-decoder", "__transaction_state": "--transaction-log-decoder",
                 "__cluster_metadata": "--cluster-metadata-decoder", "__share_group_state": "--share-group-state-decoder",
                 "__remote_log_metadata": "--remote-log-metadata-decoder"}


SHORT_V2_ENTRY = re.compile(r"^baseOffset: .* position: (\d+) \w+: -?\d+ size: (1[4-9]|[2-5]\d|60) "
                            r"magic: ([2-9]|\d\d\d?) .*\n", re.MULTILINE)
"""kafka-dump-log's line for a V2 entry of 14-60 bytes, smaller than a batch header: Kafka's
DefaultFileChannelRecordBatch loads 61 header bytes wherever the entry ends, so the line shows the
fields of the bytes after it - Kafka's tool is wrong there; ours reports the entry as an error."""


def _without_short_v2_entries(kafka_text: str, err: str, report: Report) -> tuple[str, list[str]]:
    """Kafka's text without its lines for V2 entries smaller than a batch header, each of which ours
    must report as an error at that position."""
    found = []
    for match in SHORT_V2_ENTRY.finditer(kafka_text):
        report.count("V2 entries smaller than a header, whose header kafka-dump-log reads from the bytes after them")
        if f": byte {match[1]}: Record batch is corrupt (the size" not in err:
            found.append(f"kafka-dump-log prints the header of a {match[2]}-byte V2 entry at {match[1]} from the "
                         "bytes after it; ours reports no error there")
    return SHORT_V2_ENTRY.sub("", kafka_text), found


def compare_dump(path: Path, flags: list[str], kafka_text: str, kafka_threw: bool, report: Report) -> list[str]:
    """Our text against kafka-dump-log's. Where Kafka's tool throws (a stack trace, the rest of the
    file unread), ours says the same up to there, then reports the problem on stderr, exits 1 and
    goes on: Kafka's output up to its last whole line is a prefix of ours (the line it was printing
    when it threw is not: ours prints no part of an entry it cannot read)."""
    result, out, err = run_in_process(["dump", "--format", "text", *flags, os.fspath(path)], TIME_LIMIT)
    if result.failure:
        return [f"our dump failed: {result.failure}: {result.detail[-800:]}"]
    report.count("dump lines", kafka_text.count("\n"))
    kafka_text, found = _without_short_v2_entries(kafka_text, err, report)
    if found:
        return found
    if kafka_threw:
        report.count("dumps Kafka's tool threw on")
        kafka_text = kafka_text[: kafka_text.rfind("\n") + 1]
        if out.startswith(kafka_text) and result.code == 1 and "error" in err:
            return []
        if out.startswith(kafka_text):
            return [f"dump {' '.join(flags)}: Kafka's tool throws, ours exit {result.code} and says {err[-300:]!r}"]
    elif out == kafka_text:
        return []
    ours, theirs = out.split("\n"), kafka_text.split("\n")
    n = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    shown = [lines[n][:400] if n < len(lines) else "(no line)" for lines in (ours, theirs)]
    return [f"dump {' '.join(flags)}: line {n + 1}: ours {shown[0]!r} vs Kafka {shown[1]!r}"
            + (" (Kafka's tool threw after its last line)" if kafka_threw else "")]


# ---------------------------------------------------------------------------------------------
# rebuild-index against Kafka's LogSegment.recover
# ---------------------------------------------------------------------------------------------

RECOVERED = (".log", ".index", ".timeindex", ".txnindex")


def compare_recover(partition: Path, work: Path, truncate: bool, interval: int, orc: oracle.Oracle,
                    report: Report) -> list[str]:
    """`rebuild-index [--truncate]` on a copy of `partition` against Kafka's recovery of another copy
    (later segments kept, as ours keeps them): the same bytes in every file; without --truncate the
    same indexes with the .log files untouched, and exit 1 exactly when Kafka would cut bytes.
    Where Kafka's recovery throws on a segment (and so cuts it to its base offset), ours must
    report the failure and leave that segment's files as they were.

    Both start from empty producer state at the first segment: the copies hold no producer
    snapshots (Kafka's segment recovery reads none; ours would load one)."""
    source, ours_dir, kafka_dir = work / "input" / partition.name, work / "ours" / partition.name, work / "kafka"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(partition, source, ignore=shutil.ignore_patterns("*.snapshot"))
    shutil.copytree(source, ours_dir)
    code, objects = orc("recover", source, kafka_dir, "--index-interval-bytes", str(interval), "--keep-later-segments",
                        out_dir=kafka_dir)
    summary = objects[-1] if objects else {}
    if code != 0 or summary.get("type") != "recover":
        return [f"the oracle failed: {objects[-1:]}"]
    argv = ["rebuild-index", "--no-backup", "--format", "json", "--index-interval-bytes", str(interval),
            *(["--truncate"] if truncate else []), os.fspath(ours_dir)]
    result, out, err = run_in_process(argv, TIME_LIMIT)
    if result.failure:
        return [f"our rebuild-index failed: {result.failure}: {result.detail[-800:]}"]
    ours_segments = {o["base_offset"]: o for o in map(json.loads, out.splitlines()) if o.get("type") == "segment"}
    segments = [o for o in objects if o["type"] == "segment"]
    if summary.get("outcome") != "ok":
        report.count("recoveries Kafka failed")
        thrown = summary.get("exception") or next((s.get("exception") for s in segments if s.get("exception")), None)
        return [] if result.code == 1 else [f"Kafka's recovery threw ({thrown}) but ours exit "
                                            f"{result.code}: {out[-300:]}"]
    found = []
    failed = {s["baseOffset"] for s in segments if s["status"] != "recovered"}
    cut = failed or any(s.get("truncatedBytes") for s in segments)
    if (result.code == 1) != bool(cut if not truncate else failed):
        found.append(f"exit {result.code} {'with' if truncate else 'without'} --truncate, but Kafka "
                     f"{[(s['baseOffset'], s['status'], s.get('truncatedBytes')) for s in segments]}")
    for segment in segments:
        base = segment["baseOffset"]
        ours_failure = (ours_segments.get(base) or {}).get("failure")
        if base in failed:
            report.count("segments Kafka's recovery failed on")
            if ours_failure is None:
                found.append(f"segment {base}: Kafka's recovery throws ({segment.get('exception')}) and cuts it to "
                             f"its base offset; ours reports no failure")
        elif ours_failure is not None:
            found.append(f"segment {base}: ours fails ({ours_failure}) where Kafka's recovery succeeds")
        for suffix in RECOVERED:
            kafka_file = segment.get(suffix.lstrip("."))
            name = f"{base:020d}{suffix}"
            keep_input = base in failed or (suffix == ".log" and not truncate)
            theirs_path = (source if keep_input else kafka_dir) / name
            theirs = theirs_path.read_bytes() if (keep_input or kafka_file) and theirs_path.exists() else None
            ours = (ours_dir / name).read_bytes() if (ours_dir / name).exists() else None
            if suffix == ".txnindex" and not ours and not theirs:
                continue  # an empty transaction index and none at all say the same
            report.count("recovered files")
            if ours != theirs:
                found.append(f"{name} ({'--truncate' if truncate else 'no --truncate'}, index.interval.bytes "
                             f"{interval}): ours {_describe_bytes(ours)} vs "
                             f"{'the input' if keep_input else 'Kafka'} {_describe_bytes(theirs)} "
                             f"(Kafka: {segment['status']}, cut {segment.get('truncatedBytes')})")
    return found


def _describe_bytes(data: bytes | None) -> str:
    import hashlib

    return "absent" if data is None else f"{len(data)} bytes sha256 {hashlib.sha256(data).hexdigest()[:12]}"


# ---------------------------------------------------------------------------------------------
# Segment cases: parse, dump and recover on one mutated segment
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Keyed partitions: retention and compaction
# ---------------------------------------------------------------------------------------------

DAY = 86_400_000


def keyed_partition(rng: random.Random, directory: Path, codecs_allowed: tuple[int, ...] = (0, 1, 2, 3, 4),
                    index_interval_bytes: int = 4096) -> dict:
    """A partition of 1-6 V2 segments with keys from a small key space, tombstones, transactions
    (committed and aborted by their markers, most at once, some after other batches or in a later
    segment, some left open at the end; markers that bump the producer's epoch, as transactions V2
    write them, and producers restarted with a new epoch) and timestamps spread over days (file modification times set
    to each segment's last timestamp); indexes written by our rebuild-index every
    `index_interval_bytes` (both sides read the same ones); most of the time the producer snapshots
    a broker leaves. Returns what was generated: segment base offsets and the time span."""
    from ..formats.control import CONTROL_KEY, END_TXN_MARKER
    from ..formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, build_batch, build_record

    directory.mkdir(parents=True)
    keys = [f"key-{n}".encode() for n in range(rng.choice((3, 10, 40)))]
    offset, timestamp = 0, cases.T0 + rng.randrange(0, 30 * DAY)
    bases = []
    sequences: dict[int, int] = {}
    epochs: dict[int, int] = {}
    open_transactions: set[int] = set()
    for _ in range(rng.randrange(1, 7)):
        bases.append(offset)
        data = bytearray()
        for _ in range(rng.randrange(1, 12)):
            timestamp += rng.choice((1, 1000, 60_000, DAY // 4, DAY))
            producer_id = rng.randrange(1, 4)
            if producer_id not in open_transactions and rng.random() < 0.05:  # a producer restarted: a new epoch
                epochs[producer_id], sequences[producer_id] = epochs.get(producer_id, 0) + 1, 0
            producer = (producer_id, epochs.get(producer_id, 0))
            transactional = producer[0] in open_transactions or rng.random() < 0.2
            records = []
            for n in range(rng.randrange(1, 6)):
                key = None if rng.random() < 0.05 else rng.choice(keys)
                value = None if rng.random() < 0.15 else rng.randbytes(rng.randrange(0, 60))
                records.append(build_record(n, rng.randrange(0, 50), key, value))
            idempotent = transactional or rng.random() < 0.5
            sequence = sequences.get(producer[0], 0) if idempotent else -1
            if idempotent:
                sequences[producer[0]] = sequence + len(records)
            data += build_batch(offset, records, base_timestamp=timestamp, max_timestamp=timestamp + 49,
                                compression_id=rng.choice(codecs_allowed),
                                attributes=ATTR_TRANSACTIONAL if transactional else 0,
                                producer_id=producer[0] if idempotent else -1,
                                producer_epoch=producer[1] if idempotent else -1, base_sequence=sequence,
                                partition_leader_epoch=0)
            offset += len(records)
            if transactional:
                open_transactions.add(producer[0])
            for producer_id in sorted(open_transactions):  # this batch's at once, mostly; others later, maybe never
                if rng.random() < (0.7 if producer_id == producer[0] else 0.3):
                    open_transactions.discard(producer_id)
                    # transactions V2 (Kafka 4.0, KIP-890): the marker carries the next epoch, which the
                    # producer goes on with from sequence 0; the coordinator's epoch may move too
                    bump = rng.random() < 0.4
                    epoch = epochs.get(producer_id, 0) + bump
                    if bump:
                        epochs[producer_id], sequences[producer_id] = epoch, 0
                    marker = build_record(0, 0, CONTROL_KEY.build(dict(version=0, type=rng.choice((0, 1)))),
                                          END_TXN_MARKER.build(dict(version=0, coordinator_epoch=rng.choice((0, 0, 1)))))
                    data += build_batch(offset, [marker], attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL,
                                        producer_id=producer_id, producer_epoch=epoch, base_timestamp=timestamp,
                                        max_timestamp=timestamp, partition_leader_epoch=0)
                    offset += 1
        _write_segment(directory, bases[-1], data, timestamp)
    _index_generated(directory, index_interval_bytes)
    if rng.random() < 0.7:
        _producer_snapshots(directory, bases, offset, at_log_end=rng.random() < 0.5)
    return {"bases": bases, "log_end_offset": offset, "last_timestamp": timestamp}


def legacy_partition(rng: random.Random, directory: Path, index_interval_bytes: int = 4096) -> dict:
    """A partition of 1-5 segments of uncompressed V0 or V1 messages (as brokers before 0.11 wrote
    them, and as Kafka 4.0 still reads them): keys from a small key space, offsets with gaps (a
    cleaner ran), V1 timestamps over days, mtimes at each segment's last; indexes by our
    rebuild-index. Returns what was generated, as `keyed_partition` does."""
    from ..formats import legacy

    directory.mkdir(parents=True)
    magic = rng.choice((0, 1))
    offset, timestamp, bases = 0, cases.T0 + rng.randrange(0, 30 * DAY), []
    for _ in range(rng.randrange(1, 6)):
        bases.append(offset)
        data = bytearray()
        for _ in range(rng.randrange(1, 15)):
            timestamp += rng.choice((1, 1000, DAY // 4, DAY))
            data += legacy.build_entry(offset, magic, rng.choice((b"a", b"b", b"c")), rng.randbytes(rng.randrange(40)),
                                       timestamp=timestamp)
            offset += rng.choice((1, 1, 2))
        _write_segment(directory, bases[-1], data, timestamp)
    _index_generated(directory, index_interval_bytes)
    return {"bases": bases, "log_end_offset": offset, "last_timestamp": timestamp}


def _write_segment(directory: Path, base: int, data: bytes, timestamp: int) -> None:
    """A generated segment's .log, its mtime at its last timestamp."""
    log = directory / f"{base:020d}.log"
    log.write_bytes(bytes(data))
    os.utime(log, ns=(timestamp * 1_000_000, timestamp * 1_000_000))


def _index_generated(directory: Path, index_interval_bytes: int) -> None:
    """Indexes for a generated partition by our rebuild-index (both sides read the same ones), each
    with its segment's mtime, as a broker leaves them."""
    result, _, err = run_in_process(["rebuild-index", "--no-backup", "--format", "json", "--index-interval-bytes",
                                     str(index_interval_bytes), os.fspath(directory)], TIME_LIMIT)
    if result.code != 0:
        raise RuntimeError(f"rebuild-index of a generated partition: exit {result.code}: {err[-500:]}")
    for log in directory.glob("*.log"):
        stamp = log.stat().st_mtime_ns
        for index in directory.glob(log.stem + ".*"):
            os.utime(index, ns=(stamp, stamp))


def _producer_snapshots(directory: Path, bases: list[int], log_end: int, at_log_end: bool) -> None:
    """The producer snapshots a broker leaves: at each rolled segment's base offset the state of the
    segments before it, and `at_log_end` the state at the log end offset (a clean shutdown's)."""
    from ..formats import producer_snapshot
    from ..recovery import ProducerState, replay

    state = ProducerState()
    for base, end in zip(bases, bases[1:] + [log_end]):
        with SegmentFile(directory / f"{base:020d}.log") as log:
            replay(log, state)
        if end != log_end or at_log_end:
            (directory / f"{end:020d}.snapshot").write_bytes(
                producer_snapshot.build(list(state.snapshot_entries().values())))


def overflowing_partition(rng: random.Random, directory: Path, largest: int = 200_000,
                          indexed: bool = True) -> dict:
    """A partition as KAFKA-6264 left old ones: a first segment of 2-4 runs of keyed batches (V2
    batches and V1 messages of up to `largest` bytes, timestamps over days), each run's offsets more
    than Int.MaxValue past the run before, then a small segment after them. `indexed`: the first
    segment has an (empty) .index, so that only a recovery after an unclean shutdown meets its
    overflow; else the loader recovers it whatever the shutdown. Returns what was generated, as
    `keyed_partition` does."""
    from ..formats import legacy
    from ..formats.record_batch import build_batch, build_record

    directory.mkdir(parents=True)
    keys = [f"key-{n}".encode() for n in range(rng.choice((3, 10)))]
    offset, timestamp, data = 0, cases.T0 + rng.randrange(0, 30 * DAY), bytearray()
    for run in range(rng.randrange(2, 5)):
        if run:
            offset += (1 << 31) + rng.choice((0, 1, rng.randrange(1 << 40)))
        for _ in range(rng.randrange(1, 25)):
            timestamp += rng.choice((1, 1000, 60_000, DAY // 4))
            value = rng.randbytes(rng.choice((10, 100, 5000, 70_000, largest)))
            key = rng.choice(keys)
            if rng.random() < 0.2:
                data += legacy.build_entry(offset, 1, key, value, timestamp=timestamp)
                offset += 1
                continue
            count = rng.randrange(1, 4)
            data += build_batch(offset, [build_record(n, n, key, value[:len(value) // count]) for n in range(count)],
                                base_timestamp=timestamp, max_timestamp=timestamp + count - 1)
            offset += count
    first = directory / f"{0:020d}.log"
    first.write_bytes(bytes(data))
    timestamp += 1000
    last = directory / f"{offset:020d}.log"
    last.write_bytes(build_batch(offset, [build_record(0, 0, rng.choice(keys), b"last")], base_timestamp=timestamp,
                                 max_timestamp=timestamp))
    for log in [first] * indexed + [last]:
        for suffix in (".index", ".timeindex"):
            log.with_suffix(suffix).write_bytes(b"")
    for path in directory.iterdir():
        os.utime(path, ns=(timestamp * 1_000_000, timestamp * 1_000_000))
    return {"bases": [0, offset], "log_end_offset": offset + 1, "last_timestamp": timestamp}


DAMAGES = ("none", "none", "none", "cut tail", "garbage tail", "zero tail", "bit flip",
           "garbage before the last index entry", "index past the log", "index behind the log", "garbage in the index",
           "index zero-filled tail", "no active .index", "no .index", "no .timeindex",
           "bit flip in a closed segment", "garbage in a closed segment", "a batch size in a closed segment",
           "garbage in a .txnindex", "offsets that overflow their segment", "a time index cut short",
           "a time index's zero-filled tail", "a producer snapshot deleted", "garbage in a producer snapshot",
           "a stray producer snapshot")


def _damage_txn_index(rng: random.Random, kind: str, directory: Path) -> tuple[str, str]:
    """Garbage over the bytes of one of the partition's non-empty .txnindex files: a version Kafka's
    loader refuses, a transaction ending below the segment (its sanity check then recovers the
    segment), or another aborted range for the cleaner."""
    victims = [path for path in sorted(directory.glob("*.txnindex")) if path.stat().st_size]
    if not victims:
        return "none", "none"
    victim = rng.choice(victims)
    stamp = victim.stat().st_mtime_ns
    data = bytearray(victim.read_bytes())
    at, length = rng.randrange(len(data)), rng.randrange(1, 12)
    data[at:at + length] = rng.randbytes(length)[:len(data) - at]
    victim.write_bytes(bytes(data))
    os.utime(victim, ns=(stamp, stamp))
    return kind, f"{kind}: {length} bytes at {at} of {victim.name}"


def _overflow_offsets(rng: random.Random, kind: str, logs: list[Path]) -> tuple[str, str]:
    """A segment as KAFKA-6264 left old ones: from a batch on, its offsets jump by more than Int.MaxValue
    past its base offset, for the rest of the segment or for that batch only (a V2 batch's CRC does
    not cover its base offset), or below it. Kafka's loader splits such a segment where a recovery
    meets it; with its .index gone (a third of the time) that is loadSegmentFiles' recovery, whatever
    the shutdown, which leaves the split segment's files beside the pieces."""
    picked = _pick_non_empty(rng, logs)
    if picked is None:
        return "none", "none"
    victim, stamp, data = picked
    starts = _entry_starts(data)
    first = rng.randrange(len(starts))
    jump = rng.choice((1 << 31, (1 << 32) + rng.randrange(100), 1 << 45, -(1 << 31) - rng.randrange(100)))
    jumped = starts[first:] if rng.random() < 0.7 else starts[first:first + 1]
    for at in jumped:
        data[at:at + 8] = (int.from_bytes(data[at:at + 8], "big", signed=True) + jump).to_bytes(8, "big", signed=True)
    victim.write_bytes(bytes(data))
    os.utime(victim, ns=(stamp, stamp))
    unindexed = rng.random() < 1 / 3 and victim.with_suffix(".index").exists()
    if unindexed:
        victim.with_suffix(".index").unlink()
    return kind, (f"{kind}: {len(jumped)} batches from byte {starts[first]} of {victim.name} moved by {jump}"
                  + (", its .index deleted" if unindexed else ""))


def _damage_snapshot(rng: random.Random, kind: str, directory: Path) -> tuple[str, str]:
    """One of the partition's producer snapshots deleted, garbled, or copied to another offset (one
    inside a segment, or past the log end): the loader then rebuilds the producer state from an
    older snapshot, or from one that does not match the log."""
    snapshots = sorted(directory.glob("*.snapshot"))
    if not snapshots:
        return "none", "none"
    victim = rng.choice(snapshots)
    if kind.endswith("deleted"):
        victim.unlink()
        return kind, f"{kind}: {victim.name}"
    data = bytearray(victim.read_bytes())
    if kind.startswith("garbage"):
        at, length = rng.randrange(len(data)), rng.randrange(1, 12)
        data[at:at + length] = rng.randbytes(length)[:len(data) - at]
        victim.write_bytes(bytes(data))
        return kind, f"{kind}: {length} bytes at {at} of {victim.name}"
    last = max(int(path.stem) for path in directory.glob("*.log"))
    stray = directory / f"{rng.randrange(1, last + 20):020d}.snapshot"
    stray.write_bytes(bytes(data))
    return kind, f"{kind}: {victim.name} copied to {stray.name}"


def _pick_non_empty(rng: random.Random, paths: list[Path]) -> tuple[Path, int, bytearray] | None:
    """One of the non-empty `paths`, its mtime (ns) and its bytes; None without one."""
    victims = [path for path in paths if path.stat().st_size]
    if not victims:
        return None
    victim = rng.choice(victims)
    return victim, victim.stat().st_mtime_ns, bytearray(victim.read_bytes())


def _entry_starts(data: bytearray) -> list[int]:
    """Where each entry of a segment's bytes starts, by their size fields."""
    starts, position = [], 0
    while position + 12 <= len(data):
        starts.append(position)
        position += 12 + int.from_bytes(data[position + 8:position + 12], "big")
    return starts


def _damage_closed_segment(rng: random.Random, kind: str, closed: list[Path]) -> tuple[str, str]:
    """One of `damage_partition`'s kinds in a segment before the active one (which Kafka's cleaner
    reads and its loader, after a clean shutdown, does not)."""
    picked = _pick_non_empty(rng, closed)
    if picked is None:
        return "none", "none"
    victim, stamp, data = picked
    if kind.startswith("bit flip"):
        bit = rng.randrange(len(data) * 8)
        data[bit // 8] ^= 1 << (bit % 8)
        what = f"{kind}: byte {bit // 8} of {victim.name}"
    elif kind.startswith("garbage"):
        at, length = rng.randrange(len(data)), rng.randrange(1, 30)
        data[at:at + length] = rng.randbytes(length)[:len(data) - at]
        what = f"{kind}: {length} bytes at {at} of {victim.name}"
    else:
        starts = _entry_starts(data)
        if not starts:
            return "none", "none"
        at = rng.choice(starts)
        size = rng.choice((0, 5, 13, 40, 100_000))
        data[at + 8:at + 12] = size.to_bytes(4, "big")
        what = f"{kind}: {size} at byte {at} of {victim.name}"
    victim.write_bytes(bytes(data))
    os.utime(victim, ns=(stamp, stamp))
    return kind, what


def damage_partition(rng: random.Random, directory: Path) -> tuple[str, str]:
    """Damage a generated partition as a crash, a disk or a copy taken while the broker ran does: the
    active segment's tail cut, garbage or zeros after it, a flipped bit, garbage before its offset
    index's last entry, an index that points past the log or stops short of it, garbage in the
    index, a preallocated index's zero tail, a missing .index (the active one or another) or
    .timeindex, a time index cut short or given a zero-filled tail; or a flipped bit, garbage or a
    batch's size changed in an earlier segment; or garbage in a .txnindex; or offsets that overflow
    their segment.
    Modification times are kept.
    Returns the kind of damage ("none" when the drawn kind did not apply) and what was done."""
    logs = sorted(directory.glob("*.log"))
    active = logs[-1]
    kind = rng.choice(DAMAGES)
    if kind.endswith("in a closed segment"):
        return _damage_closed_segment(rng, kind, logs[:-1])
    if kind == "garbage in a .txnindex":
        return _damage_txn_index(rng, kind, directory)
    if kind == "offsets that overflow their segment":
        return _overflow_offsets(rng, kind, logs)
    if "producer snapshot" in kind:
        return _damage_snapshot(rng, kind, directory)
    stamp = active.stat().st_mtime_ns
    data = bytearray(active.read_bytes())
    index = active.with_suffix(".index")
    entries = index.read_bytes() if index.exists() else b""
    last_position = int.from_bytes(entries[-4:], "big") if entries else 0
    what = kind
    if kind == "cut tail" and data:
        cut = rng.randrange(max(0, len(data) - 200), len(data))
        del data[cut:]
        what = f"{kind} at {cut}"
    elif kind in ("garbage tail", "zero tail"):
        extra = rng.randbytes(rng.randrange(1, 120)) if kind == "garbage tail" else bytes(rng.randrange(1, 80))
        data += extra
        what = f"{kind} of {len(extra)} bytes"
    elif kind == "bit flip" and data:
        bit = rng.randrange(len(data) * 8)
        data[bit // 8] ^= 1 << (bit % 8)
        what = f"{kind} at byte {bit // 8}"
    elif kind == "garbage before the last index entry" and last_position > 0:
        start = rng.randrange(last_position)
        length = min(rng.randrange(1, 40), last_position - start)
        data[start:start + length] = rng.randbytes(length)
        what = f"{kind} ({last_position}): {length} bytes at {start}"
    elif kind == "index past the log" and last_position > 0:
        cut = rng.randrange(last_position)
        del data[cut:]
        what = f"{kind}: the log cut at {cut}, the index's last entry at {last_position}"
    elif kind == "index behind the log" and len(entries) >= 8:
        index.write_bytes(entries[:rng.randrange(0, len(entries) // 8) * 8])
        what = f"{kind}: {len(entries) // 8} entries cut to {index.stat().st_size // 8}"
    elif kind == "garbage in the index" and entries:
        garbled = bytearray(entries)
        start = rng.randrange(len(garbled))
        length = min(rng.randrange(1, 24), len(garbled) - start)
        garbled[start:start + length] = rng.randbytes(length)
        index.write_bytes(bytes(garbled))
        what = f"{kind}: {length} bytes at {start} of {len(entries)}"
    elif kind == "index zero-filled tail":
        index.write_bytes(entries + bytes(8 * rng.randrange(1, 64)))
    elif kind == "no active .index":
        index.unlink(missing_ok=True)
    elif kind in ("no .index", "no .timeindex"):
        victim = rng.choice(logs).with_suffix(kind[3:])
        victim.unlink(missing_ok=True)
        what = f"{kind}: {victim.name}"
    elif kind in ("a time index cut short", "a time index's zero-filled tail"):
        # a largest timestamp from a last slot that is not the segment's largest (LogSegment.largestTimestamp)
        victim = rng.choice(logs).with_suffix(".timeindex")
        slots = victim.read_bytes() if victim.exists() else b""
        if kind.endswith("short") and len(slots) >= 12:
            changed = slots[:12 * rng.randrange(len(slots) // 12)]
        elif kind.endswith("tail"):
            changed = slots + bytes(12 * rng.randrange(1, 4)) + rng.choice((b"", b"\x01\x02"))
        else:
            return "none", "none"
        victim_stamp = victim.stat().st_mtime_ns if victim.exists() else stamp
        victim.write_bytes(changed)
        os.utime(victim, ns=(victim_stamp, victim_stamp))
        what = f"{kind}: {victim.name}, {len(slots)} bytes to {len(changed)}"
    else:
        return "none", "none"
    active.write_bytes(bytes(data))
    for path in directory.glob(active.stem + ".*"):
        os.utime(path, ns=(stamp, stamp))
    return kind, what


KAFKA_REASONS = {"start-offset": "log-start-offset", "size": "size", "time": "time"}


def compare_retention(partition: Path, options: dict, orc: oracle.Oracle, report: Report) -> list[str]:
    """`kafkalog retention` against Kafka's `UnifiedLog.deleteOldSegments`: the same segments deleted,
    for the same reasons, and the same log start offset after; without the clean shutdown marker
    beside the partition, on the log as Kafka's loader recovered it."""
    argv = ["--now", str(options["now"]), "--retention-ms", str(options["retention_ms"]),
            "--retention-bytes", str(options["retention_bytes"]), "--log-start-offset", str(options["log_start_offset"]),
            *_optional(options, "high_watermark")]
    clean_stop = (partition.parent / CLEAN_SHUTDOWN).exists()
    code, objects = orc("retain", partition, *argv, "--config", f"cleanup.policy={options['cleanup_policy']}",
                        *([] if clean_stop else ["--unclean"]))
    summary = objects[-1] if objects else {}
    if code != 0 or summary.get("type") != "retain":
        return [f"the oracle failed: {summary}"]
    result, out, err = run_in_process(["retention", "--format", "json", "--cleanup-policy", options["cleanup_policy"],
                                       *argv, os.fspath(partition)], TIME_LIMIT)
    ours = [json.loads(line) for line in out.splitlines()] if not result.failure else []
    ours_summary = next((o for o in ours if o["type"] == "retention_summary"), None)
    if summary.get("outcome") != "ok":
        # Kafka's loader throws (stage "open": the broker cannot open the log) or its retention pass does
        # (stage "deleteOldSegments": rolling the new segment fails); ours must say which (exit 1)
        exception, stage = summary.get("exception", {}), summary.get("stage")
        report.count(f"retentions where Kafka throws in {stage}")
        said = {"open": "Kafka's loader cannot open", "deleteOldSegments": "Kafka's retention throws"}.get(stage)
        failure = said and ours_summary and next((p for p in ours_summary["problems"] if said in p), None)
        if result.code != 1 or not failure:
            return [f"Kafka throws ({stage}: {exception.get('class')}: {exception.get('message')}); ours: exit "
                    f"{result.code}, {failure or 'no such failure'} {err[-300:]} ({options})"]
        return []
    if result.failure or result.code != 0 or ours_summary is None:
        return [f"our retention failed: exit {result.code} {result.failure or ''} {err[-500:]} "
                f"{ours_summary and ours_summary['problems']}"]
    ours_deleted = [(o["base_offset"], o["deleted_by"]) for o in ours if o["type"] == "segment" and o["deleted"]]
    theirs_deleted = [(o["baseOffset"], KAFKA_REASONS.get(o["reason"], o["reason"]))
                      for o in objects if o["type"] == "deleted-segment"]
    report.count("segments judged", len(summary.get("segmentsBefore", [])))
    report.count("segments deleted", len(theirs_deleted))
    found = []
    loader_deleted_all = any("Deleting all segments because logEndOffset" in (line.get("message") or "")
                             for line in summary.get("kafkaLog", []))
    if loader_deleted_all:
        # the log start offset lies past the log's end: Kafka's loader deletes every segment before the
        # retention pass runs, and starts an empty one; ours says the log start offset deletes them
        theirs_deleted = [(o["base_offset"], "log-start-offset") for o in ours if o["type"] == "segment"]
        report.count("retentions where Kafka's loader deleted every segment")
        if ours_deleted != theirs_deleted:
            found.append(f"log start offset past the log end, Kafka's loader deletes every segment: ours deletes "
                         f"{ours_deleted} of {theirs_deleted} ({options})")
        kafka_new = [segment["baseOffset"] for segment in summary.get("segmentsBefore", [])]
        if [ours_summary.get("new_segment_base_offset")] != kafka_new:
            found.append(f"the loader's new segment: ours at {ours_summary.get('new_segment_base_offset')} vs Kafka "
                         f"{kafka_new} ({options})")
    elif ours_deleted != theirs_deleted:
        found.append(f"deleted (segment, reason): ours {ours_deleted} vs Kafka {theirs_deleted} ({options})")
    if ours_summary["new_log_start_offset"] != summary["logStartOffset"]:
        found.append(f"log start offset after: ours {ours_summary['new_log_start_offset']} vs Kafka "
                     f"{summary['logStartOffset']} ({options})")
    if loader_deleted_all:
        return found  # the segments before are the loader's new one, and the log end is the log start
    # a file recovery cut has the wall clock's mtime in Kafka's run: its timestamp is not compared
    cut = {o["base_offset"] for o in ours if o["type"] == "segment" and o["timestamp_source"] == TRUNCATED_MTIME}
    loaded = [(s["baseOffset"], s["size"], None if s["baseOffset"] in cut else s["largestTimestamp"])
              for s in summary.get("segmentsBefore", [])]
    ours_loaded = [(o["base_offset"], o["size"], None if o["base_offset"] in cut else o["largest_timestamp"])
                   for o in ours if o["type"] == "segment"]
    if loaded != ours_loaded:
        found.append(f"segments as loaded (base, size, largest timestamp): ours {ours_loaded} vs Kafka {loaded}")
    if ours_summary["log_end_offset"] != summary["logEndOffset"]:
        found.append(f"log end offset: ours {ours_summary['log_end_offset']} vs Kafka {summary['logEndOffset']} "
                     f"({options})")
    return found


def _optional(options: dict, *names: str) -> list[str]:
    """The options among `names` that a case sets (older saved cases set none), as both sides spell them."""
    return [argument for name in names if options.get(name) is not None
            for argument in ("--" + name.replace("_", "-"), str(options[name]))]


def retention_options(rng: random.Random, generated: dict) -> dict:
    span = generated["last_timestamp"] - cases.T0
    return {"now": generated["last_timestamp"] + rng.choice((0, 1, DAY, 7 * DAY, 30 * DAY)),
            "retention_ms": rng.choice((-1, 1, DAY, 7 * DAY, 604800000, max(1, span // 2), max(1, rng.randrange(span + 1)))),
            "retention_bytes": rng.choice((-1, -1, 0, 100, 1000, 5000, rng.randrange(0, 20000))),
            "log_start_offset": rng.choice((0, 0, 0, rng.randrange(0, generated["log_end_offset"] + 2))),
            "cleanup_policy": rng.choice(("delete", "delete", "compact", "compact,delete")),
            "high_watermark": rng.choice((None, None, None, rng.randrange(0, generated["log_end_offset"] + 2)))}


# ---------------------------------------------------------------------------------------------
# compaction --simulate against Kafka's cleaner
# ---------------------------------------------------------------------------------------------

CLEANABLE_FIELDS = (  # (Kafka's `cleanable` field, ours in compaction_summary)
    ("firstDirtyOffset", "first_dirty_offset"), ("firstUncleanableOffset", "first_uncleanable_offset"),
    ("cleanBytes", "clean_bytes"), ("cleanableBytes", "cleanable_bytes"), ("lastStableOffset", "last_stable_offset"),
    ("selectedByCleanerManager", "would_clean"),
)


def _segment_content(path: Path) -> list[tuple]:
    """A cleaned segment as what it holds: each batch's header fields but the ones a codec's own
    bytes decide (size, CRC), and its records; for an uncompressed batch its size and CRC too."""
    content = []
    with SegmentFile(path) as segment:
        for entry in segment.entries():
            if isinstance(entry, BadEntry):
                content.append(("unreadable", entry.position, str(entry.error)))
                break
            header = tuple(getter(entry) for name, getter in BATCH_FIELDS
                           if name not in ("sizeInBytes", "crc") or entry.compression_id == 0)
            try:
                records = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in entry.records()]
            except KafkaLogError as exc:
                records = [("records fail", exc.message)]
            content.append((header, records))
    return content


def compare_compaction(partition: Path, options: dict, orc: oracle.Oracle, report: Report, work: Path) -> list[str]:
    """`kafkalog compaction --simulate` against one pass of Kafka's cleaner (`kafka-oracle clean`):
    the same cleanable range and decision, the same segments after, holding the same batches and
    records (and the same bytes where nothing is compressed: a codec's output is its own)."""
    argv = ["--now", str(options["now"]), "--delete-retention-ms", str(options["delete_retention_ms"]),
            "--min-compaction-lag-ms", str(options["min_compaction_lag_ms"]),
            "--min-cleanable-ratio", str(options["min_cleanable_ratio"]), "--segment-bytes", str(options["segment_bytes"]),
            *_optional(options, "max_compaction_lag_ms", "first_dirty_offset", "high_watermark")]
    kafka_out, ours_out = work / "kafka-cleaned", work / "ours-cleaned"
    for directory in (kafka_out, ours_out):
        shutil.rmtree(directory, ignore_errors=True)
    # Kafka's loader as the broker's last stop left the log dir: clean (a marker) or not (recovery first)
    clean_stop = (partition.parent / CLEAN_SHUTDOWN).exists()
    code, objects = orc("clean", partition, kafka_out, *argv, *([] if clean_stop else ["--unclean"]), out_dir=kafka_out)
    clean = objects[-1] if objects else {}
    kafka_threw = code == 0 and clean.get("type") == "clean" and clean.get("outcome") == "exception"
    if not kafka_threw and (code != 0 or clean.get("type") != "clean" or clean.get("outcome") != "ok"):
        return [f"Kafka's cleaner failed: {str(clean)[:800]}"]
    result, out, err = run_in_process(["compaction", "--simulate", "--output-dir", os.fspath(ours_out), "--format",
                                       "json", *argv, os.fspath(partition)], TIME_LIMIT)
    if kafka_threw:  # loading or cleaning the log threw: ours must say it cannot clean, and fail
        report.count("cleanings Kafka failed")
        ours_summary = next((json.loads(line) for line in out.splitlines() if '"compaction_summary"' in line), {})
        if result.failure or result.code != 1 or ours_summary.get("would_clean") is not False:
            return [f"Kafka's cleaner threw ({clean.get('stage')}: {clean.get('exception')}) but ours exit "
                    f"{result.code} {result.failure or ''}, would_clean {ours_summary.get('would_clean')}"]
        return []
    ours = next((json.loads(line) for line in out.splitlines() if '"compaction_summary"' in line), None)
    if result.failure or result.code != 0:
        return [f"our compaction failed: exit {result.code} {result.failure or ''} {err[-500:]} "
                f"{ours and ours['problems']}"]
    cleanable = next(o for o in objects if o["type"] == "cleanable")
    report.last_clean_end = clean["endOffset"] if clean.get("cleaned") else None
    found = [f"{theirs}: ours {ours[mine]} vs Kafka {cleanable[theirs]} ({options})"
             for theirs, mine in CLEANABLE_FIELDS if ours[mine] != cleanable[theirs]]
    if ours["cleaned_up_to"] != clean["endOffset"]:
        found.append(f"cleaned up to: ours {ours['cleaned_up_to']} vs Kafka {clean['endOffset']} ({options})")
    kafka_logs = sorted(p.name for p in kafka_out.glob("*.log"))
    ours_logs = sorted(p.name for p in (ours_out / partition.name).glob("*.log"))
    report.count("segments cleaned", len(kafka_logs))
    if kafka_logs != ours_logs:
        return found + [f"segments after: ours {ours_logs} vs Kafka {kafka_logs} ({options})"]
    for name in kafka_logs:
        theirs_path, ours_path = kafka_out / name, ours_out / partition.name / name
        theirs_txns, ours_txns = (_bytes_or_empty(path.with_suffix(".txnindex")) for path in (theirs_path, ours_path))
        if theirs_txns != ours_txns:
            found.append(f"{name}: the cleaned .txnindex: ours {ours_txns.hex()} vs Kafka {theirs_txns.hex()} "
                         f"({options})")
        if theirs_path.read_bytes() == ours_path.read_bytes():
            report.count("cleaned segments byte for byte")
            continue
        theirs, mine = _segment_content(theirs_path), _segment_content(ours_path)
        if theirs != mine:
            n = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            found.append(f"{name}, batch {n}: ours {str(mine[n:n + 1])[:400]} vs Kafka {str(theirs[n:n + 1])[:400]} "
                         f"({options})")
    return found


def _bytes_or_empty(path: Path) -> bytes:
    """A file's bytes; a missing file reads as an empty one (an empty .txnindex is never written)."""
    return path.read_bytes() if path.exists() else b""


def compaction_options(rng: random.Random, generated: dict) -> dict:
    return {"now": generated["last_timestamp"] + rng.choice((0, 1, 60_000, DAY, 7 * DAY)),
            "delete_retention_ms": rng.choice((0, 1, 60_000, DAY, 86400000)),
            "min_compaction_lag_ms": rng.choice((0, 0, 0, 60_000, DAY)),
            "min_cleanable_ratio": rng.choice((0.5, 0.5, 0.01, 0.99)),
            "segment_bytes": rng.choice((1073741824, 1073741824, 2048, 8192)),
            "max_compaction_lag_ms": rng.choice((None, None, None, 1, 60_000, DAY)),
            "first_dirty_offset": rng.choice((None, None, None, rng.randrange(0, generated["log_end_offset"] + 2))),
            "high_watermark": rng.choice((None, None, None, rng.randrange(0, generated["log_end_offset"] + 2)))}


class Runner:
    """Builds cases by number and compares them with Kafka's answers (one oracle JVM)."""

    def __init__(self, run_seed: int, corpus: list[Path], work_dir: Path, orc: oracle.Oracle,
                 save_dir: Path | None = None):
        self.run_seed = run_seed
        self.work_dir = work_dir
        self.oracle = orc
        self.save_dir = save_dir or reproduction_dir()
        self.seeds = [s for s in cases.collect_seeds(corpus) if s.kind == "log" and s.partition]
        self.synthesized = [s for s in cases.synthesize(work_dir / "synthesized")
                            if s.kind == "log" and s.path.name != BOMBS]
        self.report = Report(run_seed)
        self.pending_dumps: list[tuple[int, Path, list[str]]] = []
        signal.signal(signal.SIGALRM, _on_alarm)  # run_in_process's time limit

    def segment_case(self, number: int) -> list[Difference]:
        """Case `number`: one mutated segment read by both (parse), its partition recovered by both
        (recover); its dump is compared later, many files to one kafka-dump-log (`flush_dumps`)."""
        rng = random.Random(f"{self.run_seed}:kafka:{number}")
        root = self.work_dir / f"case-{number}"
        shutil.rmtree(root, ignore_errors=True)
        case = cases.build_case(rng, number, self.seeds, self.synthesized, root, hazards=False)
        topic = case.partition.name.rsplit("-", 1)[0]
        params = {"file": os.fspath(case.file.relative_to(root)), "description": case.description,
                  "decode": topic in PAYLOADS, "dump_flags": dump_flags(rng, topic),
                  "truncate": rng.random() < 0.5, "interval": rng.choice((1, 100, 1024, 4096, 4096))}
        differences = self._check_segment(root, params, number)
        self.pending_dumps.append((number, root, params))
        return differences

    def _check_segment(self, root: Path, params: dict, number: int) -> list[Difference]:
        path = root / params["file"]
        topic = path.parent.name.rsplit("-", 1)[0]
        decode = PAYLOADS.get(topic) if params["decode"] else None
        differences = []
        if lz4_reads_leftovers(path.parent):
            self.report.count(LZ4_LEFTOVERS)
            params["dump_flags"] = None
            return differences
        code, objects = self.oracle("parse", *(["--decode", decode[0]] if decode else []), path)
        if code != 0 or not objects or objects[0].get("type") != "log":
            found = [f"the oracle could not parse it: {objects[:1]}"]
        else:
            found = compare_parse(path, objects[0], self.report, decode[1] if decode else None)
        self._tally("parse")
        differences += self._differences("parse", number, found, root, params)
        found = compare_recover(path.parent, self.work_dir / "recover", params["truncate"], params["interval"],
                                self.oracle, self.report)
        self._tally("recover")
        differences += self._differences("recover", number, found, root, params)
        return differences

    def retention_case(self, number: int) -> list[Difference]:
        """Case `number`: a generated keyed partition (a fifth of them of V0/V1 messages), half of them
        damaged, retention decided by both after a clean shutdown or not (Kafka's loader recovers the
        log first)."""
        rng = random.Random(f"{self.run_seed}:kafka-retention:{number}")
        root = self.work_dir / f"retention-{number}"
        shutil.rmtree(root, ignore_errors=True)
        damaged = rng.random() < 0.5
        generate = legacy_partition if rng.random() < 0.2 else keyed_partition
        generated = generate(rng, root / "logs" / "keyed-0",
                             index_interval_bytes=rng.choice((1, 100, 1024)) if damaged else 4096)
        damages = [damage_partition(rng, root / "logs" / "keyed-0") for _ in range(damaged + (rng.random() < 0.4))]
        damages = [(kind, what) for kind, what in damages if kind != "none"]
        damage = "; ".join(what for _, what in damages) or "none"
        params = {"file": "logs/keyed-0", "damage": damage, **retention_options(rng, generated)}
        clean_stop = rng.random() < 0.5
        if clean_stop:
            (root / "logs" / CLEAN_SHUTDOWN).write_bytes(b"")
        for kind, _ in damages:
            self.report.count(f"retentions on a damaged partition, {'clean' if clean_stop else 'unclean'} "
                              f"shutdown: {kind}")
        found = compare_retention(root / params["file"], params, self.oracle, self.report)
        self._tally("retention")
        differences = self._differences("retention", number, found, root, params)
        shutil.rmtree(root, ignore_errors=True)
        return differences

    def compaction_case(self, number: int) -> list[Difference]:
        """Case `number`: a generated keyed partition, half of them damaged, cleaned once by both
        after a clean shutdown or not (Kafka's loader recovers the log first)."""
        rng = random.Random(f"{self.run_seed}:kafka-compaction:{number}")
        root = self.work_dir / f"compaction-{number}"
        shutil.rmtree(root, ignore_errors=True)
        damaged = rng.random() < 0.5
        generated = keyed_partition(rng, root / "logs" / "keyed-0",
                                    index_interval_bytes=rng.choice((1, 100, 1024)) if damaged else 4096)
        kind, damage = damage_partition(rng, root / "logs" / "keyed-0") if damaged else ("none", "none")
        clean_stop = rng.random() < 0.5
        if clean_stop:
            (root / "logs" / CLEAN_SHUTDOWN).write_bytes(b"")
        if kind != "none":
            self.report.count(f"compactions on a damaged partition, {'clean' if clean_stop else 'unclean'} "
                              f"shutdown: {kind}")
        params = {"file": "logs/keyed-0", "damage": damage, **compaction_options(rng, generated)}
        self.report.last_clean_end = None
        found = compare_compaction(root / params["file"], params, self.oracle, self.report, root / "out")
        self._tally("compaction")
        if not found and self.report.last_clean_end is not None and rng.random() < 0.5:
            root, params = self._clean_again(rng, root, params, clean_stop)
            found = compare_compaction(root / params["file"], params, self.oracle, self.report, root / "out")
            self.report.count("compactions of Kafka's cleaned partition, cleaned again")
        shutil.rmtree(root / "out", ignore_errors=True)
        differences = self._differences("compaction", number, found, root, params)
        shutil.rmtree(root, ignore_errors=True)
        return differences

    def _clean_again(self, rng: random.Random, root: Path, params: dict, clean_stop: bool) -> tuple[Path, dict]:
        """The partition Kafka's cleaning left (its cleaner checkpoint at where it ended), cleaned again
        later: tombstones and markers past their delete horizon, batches emptied before, a log that
        is clean up to a point. Returns the new case's directory and options."""
        again = root.with_name(root.name + "-again")
        shutil.rmtree(again, ignore_errors=True)
        shutil.copytree(root / "out" / "kafka-cleaned", again / params["file"])
        shutil.rmtree(root, ignore_errors=True)
        if clean_stop:
            (again / "logs" / CLEAN_SHUTDOWN).write_bytes(b"")
        later = params["now"] + rng.choice((0, 1, params["delete_retention_ms"] + 1, DAY, 7 * DAY))
        return again, {**params, "now": later, "first_dirty_offset": self.report.last_clean_end,
                       "high_watermark": None, "damage": f"{params['damage']}; cleaned by Kafka, then again"}

    def flush_dumps(self) -> list[Difference]:
        """The pending dump comparisons: one kafka-dump-log run per set of flags."""
        differences = []
        by_flags: dict[tuple, list] = {}
        for number, root, params in self.pending_dumps:
            if params["dump_flags"] is None:  # not compared (`lz4_reads_leftovers`)
                continue
            by_flags.setdefault(tuple(params["dump_flags"]), []).append((number, root, params))
        for flags, group in by_flags.items():
            outputs = self.oracle.dump_log([root / params["file"] for _, root, params in group], list(flags))
            for number, root, params in group:
                text, threw = outputs[os.fspath(root / params["file"])]
                found = compare_dump(root / params["file"], list(flags), text, threw, self.report)
                self._tally("dump")
                differences += self._differences("dump", number, found, root, params)
        for _, root, _ in self.pending_dumps:
            shutil.rmtree(root, ignore_errors=True)
        self.pending_dumps.clear()
        return differences

    def _tally(self, kind: str) -> None:
        self.report.compared[kind] = self.report.compared.get(kind, 0) + 1

    def _differences(self, kind: str, number: int, found: list[str], root: Path, params: dict) -> list[Difference]:
        if not found:
            return []
        known = open_difference(kind, found)
        saved = self.save_dir / f"{'open-' if known else ''}{kind}-seed{self.run_seed}-case{number}"
        shutil.rmtree(saved, ignore_errors=True)
        shutil.copytree(root, saved / "inputs", symlinks=True)
        what = "; ".join(found[:3])
        (saved / "case.json").write_text(json.dumps({"kind": kind, "seed": self.run_seed, "case": number,
                                                     "difference": what, **params}, indent=1) + "\n")
        difference = Difference(kind, number, what, saved)
        if known:
            self.report.count(f"open differences: {known}")
            self.report.open.append(difference)
            return []
        self.report.differences.append(difference)
        return [difference]


def replay(saved: Path, orc: oracle.Oracle, work_dir: Path) -> list[str]:
    """The comparison a saved case records, run again on its saved inputs."""
    params = json.loads((saved / "case.json").read_text())
    root = work_dir / "replay"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(saved / "inputs", root, symlinks=True)
    report = Report(params["seed"])
    signal.signal(signal.SIGALRM, _on_alarm)
    path = root / params["file"]
    kind = params["kind"]
    if kind == "parse":
        topic = path.parent.name.rsplit("-", 1)[0]
        decode = PAYLOADS.get(topic) if params["decode"] else None
        code, objects = orc("parse", *(["--decode", decode[0]] if decode else []), path)
        return compare_parse(path, objects[0], report, decode[1] if decode else None)
    if kind == "recover":
        return compare_recover(path.parent, work_dir / "recover", params["truncate"], params["interval"], orc, report)
    if kind == "retention":
        return compare_retention(path, params, orc, report)
    if kind == "compaction":
        return compare_compaction(path, params, orc, report, work_dir / "compaction")
    if kind == "dump":
        text, threw = orc.dump_log([path], params["dump_flags"])[os.fspath(path)]
        return compare_dump(path, params["dump_flags"], text, threw, report)
    raise ValueError(f"unknown kind {kind!r} in {saved / 'case.json'}")


def run(run_seed: int, *, corpus: list[Path], work_dir: Path, orc: oracle.Oracle, segment_cases: int | None = None,
        minutes: float | None = None, first_case: int = 0, save_dir: Path | None = None, on_difference=None) -> Report:
    """Segment cases `first_case`, ... until `segment_cases` are done or `minutes` have passed."""
    started = time.monotonic()
    deadline = None if minutes is None else started + 60 * minutes
    runner = Runner(run_seed, corpus, work_dir, orc, save_dir)
    number = first_case
    end = None if segment_cases is None else first_case + segment_cases
    while (end is None or number < end) and (deadline is None or time.monotonic() < deadline):
        for difference in runner.segment_case(number):
            if on_difference:
                on_difference(difference)
        if number % RETENTION_EVERY == 0:
            for difference in [*runner.retention_case(number // RETENTION_EVERY),
                               *runner.compaction_case(number // RETENTION_EVERY)]:
                if on_difference:
                    on_difference(difference)
        number += 1
        if len(runner.pending_dumps) >= 200:
            for difference in runner.flush_dumps():
                if on_difference:
                    on_difference(difference)
    for difference in runner.flush_dumps():
        if on_difference:
            on_difference(difference)
    runner.report.seconds = round(time.monotonic() - started, 1)
    return runner.report

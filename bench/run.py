"""The benchmark suite: kafkalog against its peers and the machine's limits, measured in one run.

    pip install -e '.[bench]'            # aiokafka (the peer reader), py-spy (profiles)
    python bench/run.py --size 1GiB      # writes bench/RESULTS.md

Generates, in a temp dir, one segment per variant with the library's own build functions (16 KiB
uncompressed batches; small lz4 batches; one record per batch; V1 gzip wrappers; 300 idempotent
and transactional producers interleaved; a KRaft metadata log), per variant a log dir of copies of
its partition (--log-dir-size, 2 GiB: the whole-log-dir rows), and a partition of 1,000 segments
for lookups. Every command runs as a subprocess (medians of --runs runs; peak
RSS from os.wait4); ratios against the peers and the read+CRC32C limit come from the same run.
The peers live in bench/peers/. `--profile` adds py-spy's view of where the time goes.
Not a test: nothing here asserts a timing.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection

from kafkalog_tools import codecs
from kafkalog_tools.crc import crc32c
from kafkalog_tools.formats import legacy
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.recovery import Rebuild, RebuildOptions

BENCH = Path(__file__).resolve().parent
PEERS = BENCH / "peers"
PYTHON = sys.executable
"""Runs the peers and kafkalog: replaced in `main` by the scratch install's (`install_as_users_do`)."""
KAFKALOG = [PYTHON, "-m", "kafkalog_tools"]
"""Likewise: the scratch install's `kafkalog`."""
LOOKUP_SEGMENTS = 1000
LOOKUP_QUERIES = 25


# ---------------------------------------------------------------------------------------------
# Inputs, built by the library
# ---------------------------------------------------------------------------------------------


@dataclass
class Variant:
    name: str
    what: str
    records_per_batch: int
    value_size: int
    codec: str = "none"
    magic: int = 2
    producers: int = 0
    """Idempotent producers interleaved batch by batch (0: none, the batches carry no producer id)."""
    metadata: bool = False
    """KRaft metadata records (`__cluster_metadata`'s framing) rather than generated key/values."""

    @property
    def log_dir_topic(self) -> str:
        """The topic the log dir's partitions are named for: a KRaft metadata log's own, so that
        verify pays what it pays on one (the search for newer record versions); the single
        partition keeps the bench's name, as dump decodes `__cluster_metadata` payloads by default
        and kafka-dump-log does not."""
        return "__cluster_metadata" if self.metadata else f"bench-{self.name}"


VARIANTS = [
    Variant("16k", "16 KiB uncompressed batches, 15 records of 1 KiB", 15, 1024),
    Variant("lz4", "small lz4 batches, 20 records of 200 B", 20, 200, "lz4"),
    Variant("one", "one 512 B record per batch", 1, 512),
    Variant("v1gzip", "V1 gzip wrappers, 20 messages of 500 B", 20, 500, "gzip", magic=1),
    Variant("prod", "as producers write since Kafka 3.0: 300 idempotent producers interleaved, each its own "
            "sequence; every 10th transactional (a commit or abort marker after 3 batches); records of 200 B with "
            "2 headers; lz4, zstd, snappy, gzip and none mixed", 5, 200, "mixed", producers=300),
    Variant("kraft", "as a KRaft metadata log (__cluster_metadata): one framed metadata record per uncompressed "
            "batch, no producer id; NoOpRecord mostly, partition and broker registration changes", 1, 0,
            metadata=True),
]
PRODUCTION_CODECS = ("lz4", "zstd", "snappy", "gzip", "none")
TRANSACTIONAL_EVERY = 10
BATCHES_PER_TRANSACTION = 3
POOL = 64
"""Distinct batches built per variant; the segment repeats them with each one's offset patched
(the offset lies outside the CRC in every format)."""


def _value(size: int, seed: int) -> bytes:
    """Text that compresses about as well as typical payloads do (hex digits: ~2x)."""
    digits = hashlib.shake_128(seed.to_bytes(8, "big")).hexdigest((size + 1) // 2)
    return f"{{\"id\":{seed},\"data\":\"{digits}\"}}"[:size].encode()


def _metadata_batch(seed: int) -> bytes:
    """A batch as the KRaft controller appends one: a record of `MetadataRecordSerde`'s framing
    (null key), no producer id, the raft epoch as leader epoch. An idle cluster writes a NoOpRecord
    every 500 ms (metadata.max.idle.interval.ms); the others here are ISR and broker changes."""
    from kafkalog_tools.payloads.cluster_metadata import FRAME_HEADER
    from kafkalog_tools.payloads.metadata_records import METADATA_RECORDS, uuid_to_text

    no_op, partition_change, broker_change = 20, 5, 17
    kind = seed % 10
    if kind < 7:
        api_key, fields = no_op, {"_tagged": {}}
    elif kind < 9:
        topic_id = uuid_to_text(hashlib.shake_128(seed.to_bytes(8, "big")).digest(16))
        api_key, fields = partition_change, {"partitionId": seed % 50, "topicId": topic_id,
                                             "_tagged": {"isr": [1, 2, 3][:1 + seed % 3], "leader": 1 + seed % 3}}
    else:
        api_key, fields = broker_change, {"brokerId": 1 + seed % 3, "brokerEpoch": seed, "_tagged": {}}
    value = FRAME_HEADER.build(dict(frameVersion=1, apiKey=api_key, version=0)) + \
        METADATA_RECORDS[api_key].layouts[0].build(fields)
    timestamp = 1_700_000_000_000 + seed * 500
    return build_batch(0, [build_record(0, 0, None, value)], base_timestamp=timestamp, max_timestamp=timestamp,
                       partition_leader_epoch=0)


def _batch(variant: Variant, seed: int) -> bytes:
    if variant.metadata:
        return _metadata_batch(seed)
    n = variant.records_per_batch
    base_ts = 1_700_000_000_000 + seed * n
    if variant.magic == 2:
        records = [build_record(i, i, f"key-{seed}-{i}".encode(), _value(variant.value_size, seed * n + i))
                   for i in range(n)]
        return build_batch(0, records, base_timestamp=base_ts, max_timestamp=base_ts + n - 1,
                           compression_id=codecs.IDS[variant.codec])
    inner = b"".join(legacy.build_entry(i, 1, f"key-{seed}-{i}".encode(), _value(variant.value_size, seed * n + i),
                                        timestamp=base_ts + i) for i in range(n))
    wrapped = codecs.compress(codecs.IDS[variant.codec], inner, magic=1)
    return legacy.build_entry(n - 1, 1, None, wrapped, timestamp=base_ts + n - 1,
                              attributes=codecs.IDS[variant.codec])


def _producer_batches(variant: Variant, producer: int) -> tuple[bytes, bytes | None]:
    """A producer's data batch (sequence 0, offset 0) and, when it is transactional, its marker."""
    from kafkalog_tools.formats.control import CONTROL_KEY, END_TXN_MARKER
    from kafkalog_tools.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL

    n, base_ts = variant.records_per_batch, 1_700_000_000_000 + producer
    records = [build_record(i, i, f"order-{producer}-{i}".encode(), _value(variant.value_size, producer * n + i),
                            [(b"trace-id", f"{producer:08x}{i:08x}".encode()), (b"content-type", b"json")])
               for i in range(n)]
    transactional = producer % TRANSACTIONAL_EVERY == 0
    ids = dict(producer_id=1000 + producer, producer_epoch=0, partition_leader_epoch=0)
    data = build_batch(0, records, base_timestamp=base_ts, max_timestamp=base_ts + n - 1, base_sequence=0,
                       compression_id=codecs.IDS[PRODUCTION_CODECS[producer % len(PRODUCTION_CODECS)]],
                       attributes=ATTR_TRANSACTIONAL if transactional else 0, **ids)
    if not transactional:
        return data, None
    marker = build_record(0, 0, CONTROL_KEY.build(dict(version=0, type=producer // TRANSACTIONAL_EVERY % 2)),
                          END_TXN_MARKER.build(dict(version=0, coordinator_epoch=0)))
    return data, build_batch(0, [marker], base_timestamp=base_ts + n, max_timestamp=base_ts + n,
                             attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, **ids)


def _write_production_segment(path: Path, variant: Variant, size: int) -> int:
    """Producers take turns; each batch gets its producer's next sequence (inside the CRC, so the
    CRC-32C is computed again), each transaction its marker after BATCHES_PER_TRANSACTION batches."""
    pool = [_producer_batches(variant, producer) for producer in range(variant.producers)]
    sequences, open_batches = [0] * variant.producers, [0] * variant.producers
    n = variant.records_per_batch
    written = offset = turn = 0
    with open(path, "wb") as out:
        while written < size:
            producer = turn % variant.producers
            data, marker = pool[producer]
            body = data[21:53] + sequences[producer].to_bytes(4, "big") + data[57:]
            out.write(offset.to_bytes(8, "big") + data[8:17] + crc32c(body).to_bytes(4, "big") + body)
            written, offset, turn = written + len(data), offset + n, turn + 1
            sequences[producer] += n
            if marker is not None:
                open_batches[producer] += 1
                if open_batches[producer] == BATCHES_PER_TRANSACTION:
                    out.write(offset.to_bytes(8, "big") + marker[8:])
                    written, offset, open_batches[producer] = written + len(marker), offset + 1, 0
    return offset


def write_segment(path: Path, variant: Variant, size: int) -> int:
    """A segment of about `size` bytes; returns its record count."""
    if variant.producers:
        return _write_production_segment(path, variant, size)
    pool = [_batch(variant, seed) for seed in range(POOL)]
    n = variant.records_per_batch
    first = 0 if variant.magic == 2 else n - 1  # a V1 wrapper carries its last offset
    written = offset = 0
    with open(path, "wb") as out:
        while written < size:
            batch = pool[(offset // n) % POOL]
            out.write((offset + first).to_bytes(8, "big") + batch[8:])
            written += len(batch)
            offset += n
    return offset


def write_lookup_partition(directory: Path, size: int) -> int:
    """LOOKUP_SEGMENTS segments of 16 KiB-batch data with the indexes Kafka's recovery writes."""
    directory.mkdir()
    variant = VARIANTS[0]
    pool = [_batch(variant, seed) for seed in range(POOL)]
    per_segment = max(len(pool[0]), size // LOOKUP_SEGMENTS)
    offset = 0
    for _ in range(LOOKUP_SEGMENTS):
        with open(directory / f"{offset:020d}.log", "wb") as out:
            written = 0
            while written < per_segment:
                batch = pool[(offset // variant.records_per_batch) % POOL]
                out.write(offset.to_bytes(8, "big") + _timestamped(batch, lookup_timestamp(offset)))
                written += len(batch)
                offset += variant.records_per_batch
    list(Rebuild([directory], RebuildOptions(backup=False)))
    return offset


LOOKUP_T0 = 1_800_000_000_000


def lookup_timestamp(offset: int) -> int:
    """The lookup partition's timestamps grow with the offsets, across segments: a batch at base
    offset B has records stamped B*10 + i after LOOKUP_T0, so the record at offset O is the first
    with timestamp >= `lookup_timestamp(O - i) + i`."""
    return LOOKUP_T0 + 10 * offset


def _timestamped(batch: bytes, base_timestamp: int) -> bytes:
    """A V2 batch (from its length field on) with its timestamps moved to start at `base_timestamp`
    (records keep their deltas), its CRC-32C computed again."""
    old_base = int.from_bytes(batch[27:35], "big")
    spread = int.from_bytes(batch[35:43], "big") - old_base
    body = (batch[21:27] + base_timestamp.to_bytes(8, "big") + (base_timestamp + spread).to_bytes(8, "big")
            + batch[43:])
    return batch[8:17] + crc32c(body).to_bytes(4, "big") + body


# ---------------------------------------------------------------------------------------------
# Running commands
# ---------------------------------------------------------------------------------------------


@dataclass
class Timing:
    seconds: float
    """Median wall time."""
    rss_mb: float
    """Largest peak RSS over the runs (ru_maxrss: mapped file pages included)."""
    anon_mb: float = 0.0
    """Largest anonymous RSS seen over the runs (sampled every 10 ms): the process's own memory,
    without the page-cache pages of the mmap'd segment, which the kernel can drop at will."""
    runs: list[float] = field(default_factory=list)


def _sample_anon_rss(pid: int, peak: list[int], done: threading.Event) -> None:
    while not done.wait(0.01):
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("RssAnon:"):
                        peak[0] = max(peak[0], int(line.split()[1]))
        except OSError:
            return


def run_once(cmd: list[str], stdout=subprocess.DEVNULL) -> tuple[float, float, float, int]:
    start = time.perf_counter()
    process = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.DEVNULL, cwd=BENCH.parent)
    peak, done = [0], threading.Event()
    sampler = threading.Thread(target=_sample_anon_rss, args=(process.pid, peak, done))
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_maxrss / 1024, peak[0] / 1024, process.returncode


def measure(cmd: list[str], runs: int, ok=(0,)) -> Timing:
    return measure_rounds({"": (cmd, ok)}, runs)[""]


def measure_rounds(commands: dict[str, tuple[list[str], tuple[int, ...]]], runs: int,
                   warmed: Collection[str] = ()) -> dict[str, Timing]:
    """Each command (name: (argv, the exit codes that pass)) run `runs` times, one round of all of
    them after another, so that a command and the peer it is compared with meet the machine in the
    same state: this machine's speed drifts by 20-30% over minutes, which timing each command's runs
    back to back turned into their ratio. A command named in `warmed` runs once untimed before each
    timed run: the first short command after another program takes ~0.03 s more (a KRaft
    rebuild-index right after aiokafka: 0.30 s, against 0.26 s after verify), which back to back
    only the first of three runs paid."""
    times = {name: [] for name in commands}
    peak, anon = dict.fromkeys(commands, 0.0), dict.fromkeys(commands, 0.0)
    for _ in range(runs):
        for name, (cmd, ok) in commands.items():
            if name in warmed:
                run_once(cmd)
            seconds, rss, anon_rss, code = run_once(cmd)
            if code not in ok:
                raise SystemExit(f"{' '.join(cmd)} exited {code}")
            times[name].append(seconds)
            peak[name], anon[name] = max(peak[name], rss), max(anon[name], anon_rss)
    return {name: Timing(statistics.median(times[name]), peak[name], anon[name], times[name]) for name in commands}


def digest(cmd: list[str]) -> str:
    """SHA-256 of a command's stdout, read as it streams."""
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=BENCH.parent)
    sha = hashlib.sha256()
    while chunk := process.stdout.read(1 << 20):
        sha.update(chunk)
    process.wait()
    return sha.hexdigest()


# ---------------------------------------------------------------------------------------------
# The measurements
# ---------------------------------------------------------------------------------------------


PEER_COMMANDS = ("read+crc32c", "aiokafka batches+crc", "aiokafka records+crc", "aiokafka+orjson json",
                 "kafka-dump-log -d -p")
SHORT_COMMANDS = ("read+crc32c", "rebuild-index", "verify", "verify --shallow", "dump json -d", "dump text -d -p")
"""The commands that take well under a few seconds, which a warm-up run before each timed one
spares the first-after-another-program cost (`measure_rounds`); the others take seconds."""
KAFKA_DUMP_LOG = BENCH.parent.parent / "shared" / "tools" / "kafka-oracle" / "bin" / "kafka-dump-log"
"""Kafka 4.0's own kafka-dump-log.sh (kafka.tools.DumpLogSegments), a JVM started per call as users do."""


def kafka_dump_log_missing() -> str | None:
    """Why Kafka's own tool cannot run here, or None."""
    if not KAFKA_DUMP_LOG.exists():
        return f"{KAFKA_DUMP_LOG} not found"
    if shutil.which("java") is None:
        return "java not found on PATH"
    return None


def bench_variant(variant: Variant, work: Path, size: int, runs: int, only: set[str] | None = None,
                  log_dir_size: int = 0) -> dict:
    partition = work / f"bench-{variant.name}-0"
    partition.mkdir()
    log = partition / "00000000000000000000.log"
    records = write_segment(log, variant, size)
    if variant.producers or variant.metadata:  # its batches carry leader epoch 0, as a broker's do
        (partition / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    bytes_ = log.stat().st_size
    file = str(log)
    os.sync()  # (its writeback would run beside the first measurements)
    print(f"[{variant.name}] {bytes_ / 2**20:.0f} MiB, {records:,} records", flush=True)
    commands = {
        "read+crc32c": [PYTHON, str(PEERS / "read_crc32c.py"), file],
        "aiokafka batches+crc": [PYTHON, str(PEERS / "aiokafka_batches.py"), file],
        "aiokafka records+crc": [PYTHON, str(PEERS / "aiokafka_records.py"), file],
        "rebuild-index": [*KAFKALOG, "rebuild-index", "--format", "json", "--no-backup", str(partition)],
        "verify": [*KAFKALOG, "verify", "--format", "json", str(partition)],
        "verify --shallow": [*KAFKALOG, "verify", "--shallow", "--format", "json", str(partition)],
        "verify, per-batch path": ["env", "KAFKALOG_BULK=never", *KAFKALOG, "verify", "--format", "json", str(partition)],
        "aiokafka+orjson json": [PYTHON, str(PEERS / "aiokafka_json.py"), file],
        "dump json -d": [*KAFKALOG, "dump", "--format", "json", "-d", file],
        "dump text -d -p": [*KAFKALOG, "dump", "--format", "text", "-d", "-p", file],
        "kafka-dump-log -d -p": [str(KAFKA_DUMP_LOG), "--deep-iteration", "--print-data-log", "--files", file],
    }
    if kafka_dump_log_missing():
        del commands["kafka-dump-log -d -p"]
    if only is not None and "rebuild-index" not in only:  # verify always sees the indexes Kafka would have
        subprocess.run(commands["rebuild-index"], stdout=subprocess.DEVNULL, check=True)
    # verify exits 1 on errors (none expected here); a peer must succeed (a missing extra fails it at once)
    timings = measure_rounds({name: (cmd, (0,) if name in PEER_COMMANDS else (0, 1)) for name, cmd in commands.items()
                              if only is None or name in only or name in PEER_COMMANDS}, runs, warmed=SHORT_COMMANDS)
    for name, timing in timings.items():
        print(f"  {name:<24} {timing.seconds:7.2f} s  {timing.rss_mb:6.0f} MB ({timing.anon_mb:.0f} MB anonymous)",
              flush=True)
    if log_dir_size:
        log_dir = bench_log_dir(partition, variant.log_dir_topic, log_dir_size, runs, only)
    same = "dump json -d" in timings and digest(commands["dump json -d"]) == digest(commands["aiokafka+orjson json"])
    text_same = ("dump text -d -p" in timings and "kafka-dump-log -d -p" in timings
                 and digest(commands["dump text -d -p"]) == digest(commands["kafka-dump-log -d -p"]))
    return {"variant": variant, "bytes": bytes_, "records": records, "timings": timings, "json_identical": same,
            "text_identical": text_same, "log_dir": log_dir if log_dir_size else None}


def bench_log_dir(partition: Path, topic: str, size: int, runs: int, only: set[str] | None) -> dict:
    """A log dir of copies of the variant's partition (indexes included) up to `size`, partitions of
    `topic`, as an audit reads one: the read+CRC32C limit over all its .log files in one process,
    against `verify` with its workers (every CPU) and with one process."""
    root = partition.parent / f"logdir-of-{partition.name}-copies"  # not a partition dir's name
    copies = -(-size // partition.joinpath("00000000000000000000.log").stat().st_size)
    for number in range(copies):
        shutil.copytree(partition, root / f"{topic}-{number}")
    logs = sorted(str(p) for p in root.glob("*/*.log"))
    bytes_ = sum(os.path.getsize(p) for p in logs)
    os.sync()  # else the copies' writeback (2 GiB) runs beside the measurements, on a core verify's workers use
    commands = {
        "log dir: read+crc32c": [PYTHON, str(PEERS / "read_crc32c.py"), *logs],
        "log dir: verify": [*KAFKALOG, "verify", "--format", "json", str(root)],
        "log dir: verify --shallow": [*KAFKALOG, "verify", "--shallow", "--format", "json", str(root)],
        "log dir: verify --jobs 1": [*KAFKALOG, "verify", "--jobs", "1", "--format", "json", str(root)],
        "log dir: verify --shallow --jobs 1": [*KAFKALOG, "verify", "--shallow", "--jobs", "1", "--format", "json",
                                               str(root)],
    }
    print(f"  log dir: {copies} partitions, {bytes_ / 2**30:.2f} GiB", flush=True)
    timings = measure_rounds({name: (cmd, (0, 1)) for name, cmd in commands.items()
                              if only is None or name in only or name == "log dir: read+crc32c"}, runs, warmed=commands)
    for name, timing in timings.items():
        print(f"  {name:<34} {timing.seconds:7.2f} s  {timing.rss_mb:6.0f} MB", flush=True)
    shutil.rmtree(root)
    return {"partitions": copies, "bytes": bytes_, "timings": timings}


def bench_lookup(work: Path, size: int, runs: int) -> dict:
    directory = work / "lookup-0"
    records = write_lookup_partition(directory, size)
    step = records // LOOKUP_QUERIES
    per_batch = VARIANTS[0].records_per_batch
    targets = [(i * step + (i * 7919) % step) // per_batch * per_batch for i in range(LOOKUP_QUERIES)]
    cli = measure([*KAFKALOG, "lookup", "--format", "json", "-o", str(targets[0]), str(directory)], runs)
    startup = measure([*KAFKALOG, "--help"], runs)
    stage = subprocess.run([PYTHON, __file__, "--lookup-stage", str(directory), *map(str, targets)],
                           capture_output=True, text=True, check=True, cwd=BENCH.parent)
    result = json.loads(stage.stdout)
    result.update(records=records, bytes=sum(p.stat().st_size for p in directory.glob("*.log")), cli=cli,
                  startup=startup)
    return result


def lookup_stage(directory: str, targets: list[int]) -> None:
    """In a subprocess: per-query latency and what each answer read, with a fresh reader per query
    (nothing cached from an earlier one, as for a one-shot CLI call)."""
    from kafkalog_tools.lookup import OFFSET, TIMESTAMP, PartitionReader, Query

    result = {}
    for kind in (OFFSET, TIMESTAMP):
        seconds, index_bytes, log_bytes, entries, segments = [], [], [], [], []
        for target in targets:
            value = target if kind == OFFSET else lookup_timestamp(target)  # a batch's first record
            start = time.perf_counter()
            with PartitionReader(directory) as reader:
                answer = reader.lookup(Query(kind, value))
                number = [v.log_path for v in reader.views].index(answer.segment)
            seconds.append(time.perf_counter() - start)
            assert answer.found and answer.offset == target, (kind, target, answer.reason, answer.offset)
            index_bytes.append(answer.index_bytes_read)
            entries.append(answer.index_entries_read)
            log_bytes.append(answer.bytes_scanned)
            segments.append(number)
        worst = max(range(len(targets)), key=lambda i: index_bytes[i] - 12 * segments[i])
        result[kind] = {"latency_ms": statistics.median(seconds) * 1e3, "index_bytes": max(index_bytes),
                        "index_entries": max(entries), "log_bytes_median": statistics.median(log_bytes),
                        "log_bytes_max": max(log_bytes), "beyond_12_per_segment": index_bytes[worst] - 12 * segments[worst]}
    print(json.dumps(result))


FIRST_RUN_SIZE = 128 << 20


def bench_first_run(work: Path, runs: int) -> dict:
    """The first `verify` after an install that skipped `kafkalog build-kernels`: an empty kernel
    cache (KAFKALOG_KERNEL_CACHE, a fresh directory per run), against the per-batch path
    (KAFKALOG_BULK=never) on the same 128 MiB segment of each of two variants. Each first run starts
    a background build; the next run waits for it (or stops it, `_background_build_seconds`), so
    builds never overlap a measurement.

    Each first run is paired with a per-batch run just before it, after one untimed per-batch run:
    both then find the segment and the installation in the page cache. Waiting minutes for a build
    would otherwise leave the first run a colder cache than the per-batch runs (this machine's DAMON
    pages out file pages left unread for a minute)."""
    out = {}
    for variant in (VARIANTS[0], VARIANTS[2]):
        partition = work / f"first-{variant.name}-0"
        partition.mkdir()
        write_segment(partition / "00000000000000000000.log", variant, FIRST_RUN_SIZE)
        verify = [*KAFKALOG, "verify", "--format", "json", str(partition)]
        never_cmd = ["env", "KAFKALOG_BULK=never", *verify]
        nevers, firsts, builds = [], [], []
        for i in range(runs):
            measure(never_cmd, 1, ok=(0, 1))  # warms the page cache
            nevers.append(measure(never_cmd, 1, ok=(0, 1)))
            cache = work / f"kernel-cache-{variant.name}-{i}"
            cache.mkdir(mode=0o700)
            seconds, _, _, code = run_once(["env", f"KAFKALOG_KERNEL_CACHE={cache}", *verify])
            if code not in (0, 1):
                raise SystemExit(f"first verify exited {code}")
            firsts.append(seconds)
            builds.append(_background_build_seconds(cache))
        never = Timing(statistics.median(t.seconds for t in nevers), max(t.rss_mb for t in nevers),
                       max(t.anon_mb for t in nevers), [t.seconds for t in nevers])
        done = [b for b in builds if b is not None]
        out[variant.name] = {"never": never, "first": statistics.median(firsts), "firsts": firsts,
                             "build": statistics.median(done) if done else None}
        print(f"  first run [{variant.name}]: {out[variant.name]['first']:.2f} s, per-batch path "
              f"{never.seconds:.2f} s, background builds {builds}", flush=True)
        shutil.rmtree(partition)
    return out


def _background_build_seconds(cache: Path, limit: float = 300) -> float | None:
    """Waits for the builder a first run started: the build's own time, from its log. It runs at
    nice 19, so on a busy machine it may take far longer than its ~2 min of CPU: after `limit`
    seconds it is stopped (None), so that it overlaps no later measurement."""
    deadline = time.monotonic() + limit
    text = ""
    while time.monotonic() < deadline:
        text = "".join(log.read_text() for log in cache.glob("*.build.log"))
        if found := re.search(r" built in ([\d.]+) s", text):
            return float(found[1])
        time.sleep(0.5)
    for pid in _builders_into(cache):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return None


def _builders_into(cache: Path) -> list[int]:
    """The background builders (started by our first runs) that build into `cache`, from /proc."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if (b"build_as_builder" in (proc / "cmdline").read_bytes()
                    and f"KAFKALOG_KERNEL_CACHE={cache}".encode() in (proc / "environ").read_bytes().split(b"\0")):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def bench_startup(runs: int) -> dict:
    return {"help": measure([str(Path(PYTHON).parent / "kafkalog"), "--help"], runs),
            "import": measure([PYTHON, "-c", "import click, rich.console"], runs)}


def profile(variant: Variant, work: Path, size: int) -> dict[str, list[tuple[str, float]]]:
    """py-spy's samples, by the function they were in (self time), for dump json and verify."""
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if py_spy is None:
        return {}
    partition = work / f"profile-{variant.name}-0"
    partition.mkdir()
    log = partition / "00000000000000000000.log"
    write_segment(log, variant, size)
    out = {}
    for name, args in (("dump json -d", ["dump", "--format", "json", "-d", str(log)]),
                       ("verify", ["verify", "--format", "json", str(partition)])):
        raw = work / "profile.txt"
        subprocess.run([py_spy, "record", "--format", "raw", "--rate", "250", "--output", str(raw), "--",
                        *KAFKALOG, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=BENCH.parent)
        by_function: collections.Counter = collections.Counter()
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            leaf = stack.rsplit(";", 1)[-1]  # "function (path:line)"
            by_function[re.sub(r" \((?:[^)]*/)?([^/):]+)(?::\d+)?\)", r" (\1)", leaf) or "(not in Python)"] += int(count)
        total = sum(by_function.values()) or 1
        out[name] = [(function, count / total) for function, count in by_function.most_common(8)]
    return out


# ---------------------------------------------------------------------------------------------
# RESULTS.md
# ---------------------------------------------------------------------------------------------


def machine() -> str:
    cpu = "unknown CPU"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    versions = []
    for package in ("aiokafka", "orjson", "crc32c", "lz4"):
        try:
            from importlib.metadata import version

            versions.append(f"{package} {version(package)}")
        except Exception:
            versions.append(f"{package} (absent)")
    from kafkalog_tools.crc import CRC32C_IMPLEMENTATION

    return (f"{cpu}, {os.cpu_count()} cores, {memory:.0f} GiB; {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}; {', '.join(versions)}; CRC-32C: {CRC32C_IMPLEMENTATION}")


def _rate(bytes_: int, seconds: float) -> str:
    return f"{bytes_ / seconds / 1e9:.2f} GB/s" if bytes_ / seconds >= 1e9 else f"{bytes_ / seconds / 1e6:.0f} MB/s"


def _ok(met: bool) -> str:
    return "yes" if met else "**no**"


def report(args, results: list[dict], lookup: dict | None, startup: dict, profiles: dict, elapsed: float,
           first_run: dict | None = None) -> str:
    lines = ["# Benchmark results", ""]
    if args.note:
        lines += [f"> {args.note}", ""]
    lines += [f"`python bench/run.py --size {args.size} --runs {args.runs}` on {time.strftime('%Y-%m-%d')}, "
              f"{elapsed / 60:.0f} min. Machine: {machine()}.", "",
              "Times are medians of the runs, each command a fresh process (start-up included; kafkalog "
              "installed from a wheel into a scratch venv, as the README's first command installs it); ratios "
              "compare throughputs measured in this same run (> 1 means kafkalog is faster).", "",
              "## Ratios against the goals", "",
              "| goal | " + " | ".join(r["variant"].name for r in results) + " |",
              "| --- |" + " --- |" * len(results)]

    def row(label, values):
        lines.append(f"| {label} | " + " | ".join(values) + " |")

    t = [r["timings"] for r in results]

    def ratio(x, peer, ours, goal=None):
        """peer time / our time ("—" when not timed), and whether it meets `goal`."""
        if ours not in x or peer not in x:
            return "—"
        value = x[peer].seconds / x[ours].seconds
        return f"{value:.2f}×" + ("" if goal is None else f" {_ok(value >= goal)}")

    row("verify ≥ 2× aiokafka-C batches+CRC", [ratio(x, "aiokafka batches+crc", "verify", 2) for x in t])
    row("verify ≥ 0.5× read+CRC32C", [ratio(x, "read+crc32c", "verify", 0.5) for x in t])
    row("(verify vs aiokafka-C batches+CRC+all records decoded: like for like, as deep reads every record)",
        [ratio(x, "aiokafka records+crc", "verify") for x in t])
    row("(verify --shallow vs aiokafka-C batches+CRC: like for like, as Kafka's recovery reads no record)", [ratio(x, "aiokafka batches+crc", "verify --shallow") for x in t])
    row("(verify --shallow vs read+CRC32C)", [ratio(x, "read+crc32c", "verify --shallow") for x in t])
    row("(verify, per-batch path KAFKALOG_BULK=never, vs aiokafka-C batches+CRC)",
        [ratio(x, "aiokafka batches+crc", "verify, per-batch path") for x in t])
    row("dump JSON ≥ 1× aiokafka-C + orjson", [ratio(x, "aiokafka+orjson json", "dump json -d", 1) for x in t])
    row("(same JSON Lines, byte for byte)", ["yes" if r["json_identical"] else
                                           ("—" if "dump json -d" not in r["timings"] else "**no**") for r in results])
    missing = kafka_dump_log_missing()
    if missing:
        row("dump text -d -p ≥ 5× Kafka's kafka-dump-log -d -p", [f"skipped: {missing}"] * len(results))
    else:
        row("dump text -d -p ≥ 5× Kafka's kafka-dump-log -d -p (JVM start-up included, as users pay it)",
            [ratio(x, "kafka-dump-log -d -p", "dump text -d -p", 5) for x in t])
        row("(same text, byte for byte)", ["yes" if r["text_identical"] else
                                          ("—" if "dump text -d -p" not in r["timings"] else "**no**") for r in results])
    row("rebuild-index time ≤ verify's", [
        f"{x['rebuild-index'].seconds / x['verify'].seconds:.2f} {_ok(x['rebuild-index'].seconds <= x['verify'].seconds)}"
        if "rebuild-index" in x and "verify" in x else "—" for x in t])
    ours = [[c for c in x if c not in PEER_COMMANDS] for x in t]
    row(f"peak RSS ≤ 200 MB ({args.size} segment), all of it", [
        f"{max(x[c].rss_mb for c in mine):.0f} MB {_ok(max(x[c].rss_mb for c in mine) <= 200)}" if mine else "—"
        for x, mine in zip(t, ours)])
    row("(peak anonymous RSS: without the mmap'd segment's page cache)",
        [f"{max(x[c].anon_mb for c in mine):.0f} MB" if mine else "—" for x, mine in zip(t, ours)])
    log_dirs = [r["log_dir"] for r in results]
    if any(log_dirs):
        lines += ["", "A whole log dir, as an audit reads one: copies of each variant's partition (indexes included), "
                      "`verify` with its workers (every CPU, `--jobs` unset) against the read+CRC32C limit (one process "
                      "reading every .log file from page cache), goal ≥ 0.5×; and the workers' gain over `--jobs 1`:",
                  "", "| variant | log dir | verify vs limit | --shallow vs limit | verify: workers' gain | "
                      "--shallow: workers' gain |", "| --- | --- | --- | --- | --- | --- |"]
        for r, x in zip(results, log_dirs):
            if not x:
                continue
            d = x["timings"]
            lines.append(f"| {r['variant'].name} | {x['partitions']} × {r['bytes'] / 2**20:.0f} MiB = "
                         f"{x['bytes'] / 2**30:.2f} GiB | "
                         f"{ratio(d, 'log dir: read+crc32c', 'log dir: verify', 0.5)} | "
                         f"{ratio(d, 'log dir: read+crc32c', 'log dir: verify --shallow', 0.5)} | "
                         f"{ratio(d, 'log dir: verify --jobs 1', 'log dir: verify')} | "
                         f"{ratio(d, 'log dir: verify --shallow --jobs 1', 'log dir: verify --shallow')} |")
    if first_run:
        lines += ["", "First `verify` of a 128 MiB segment with an empty kernel cache (an install that skipped "
                      "`kafkalog build-kernels`: the run reads batch by batch and starts the build in the background) "
                      "against the per-batch path (`KAFKALOG_BULK=never`), goal ≤ 1.5×:", "",
                  "| variant | first run | per-batch path | ratio | background build (nice 19) |",
                  "| --- | --- | --- | --- | --- |"]
        for name, x in first_run.items():
            value = x["first"] / x["never"].seconds
            build = "stopped after 300 s (a busy machine)" if x["build"] is None else f"{x['build']:.0f} s"
            lines.append(f"| {name} | {x['first']:.2f} s | {x['never'].seconds:.2f} s | {value:.2f}× "
                         f"{_ok(value <= 1.5)} | {build} |")
    help_ratio = startup["help"].seconds / startup["import"].seconds
    lines += ["", f"`kafkalog --help` ≤ 2× `python -c \"import click, rich.console\"`: "
                  f"{help_ratio:.2f}× {_ok(help_ratio <= 2)} ({startup['help'].seconds * 1e3:.0f} ms vs "
                  f"{startup['import'].seconds * 1e3:.0f} ms)."]
    if lookup:
        by_offset, by_time = lookup["offset"], lookup["timestamp"]
        lines += ["", f"Lookups on a partition of {LOOKUP_SEGMENTS} segments "
                      f"({lookup['bytes'] / 2**20:.0f} MiB, {lookup['records']:,} records, indexes by rebuild-index "
                      f"at index.interval.bytes 4096, timestamps growing with offsets), {LOOKUP_QUERIES} batches "
                      f"spread over it, a fresh reader each:",
                  "",
                  f"- latency in the library: {by_offset['latency_ms']:.1f} ms per offset lookup, "
                  f"{by_time['latency_ms']:.1f} ms per timestamp lookup (medians); one CLI call "
                  f"`kafkalog lookup -o N`: {lookup['cli'].seconds * 1e3:.0f} ms, of which start-up "
                  f"(`kafkalog --help`) {lookup['startup'].seconds * 1e3:.0f} ms; peak RSS {lookup['cli'].rss_mb:.0f} MB.",
                  f"- by offset: index bytes read {by_offset['index_bytes']:,} at most ({by_offset['index_entries']} "
                  f"entries of one segment's .index, by binary search; the segment is chosen by file name); .log bytes "
                  f"scanned: median {by_offset['log_bytes_median']:,.0f}, at most {by_offset['log_bytes_max']:,}.",
                  f"- by timestamp: index bytes read {by_time['index_bytes']:,} at most: 12 per segment passed over (its "
                  f".timeindex's last entry) plus at most {by_time['beyond_12_per_segment']:,} (binary searches of one "
                  f".timeindex and one .index); .log bytes scanned: median {by_time['log_bytes_median']:,.0f}, at most "
                  f"{by_time['log_bytes_max']:,} (goal: one index interval plus the batches at either end)."]
    lines += ["", "## Absolute figures", "",
              "| variant | command | median s | throughput | M records/s | peak RSS (anonymous) |",
              "| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        v = r["variant"]
        for name, timing in r["timings"].items():
            lines.append(f"| {v.name}: {v.what}, {r['bytes'] / 2**20:.0f} MiB, {r['records']:,} records | {name} | "
                         f"{timing.seconds:.2f} | {_rate(r['bytes'], timing.seconds)} | "
                         f"{r['records'] / timing.seconds / 1e6:.2f} | {timing.rss_mb:.0f} MB ({timing.anon_mb:.0f}) |")
        if r["log_dir"]:
            x = r["log_dir"]
            for name, timing in x["timings"].items():
                lines.append(f"| {v.name}: {x['partitions']} partitions, {x['bytes'] / 2**20:.0f} MiB | {name} | "
                             f"{timing.seconds:.2f} | {_rate(x['bytes'], timing.seconds)} | "
                             f"{x['partitions'] * r['records'] / timing.seconds / 1e6:.2f} | "
                             f"{timing.rss_mb:.0f} MB ({timing.anon_mb:.0f}) |")
    if profiles:
        lines += ["", "## Where the time goes (py-spy, self time by function, variant 16k)", ""]
        for name, rows in profiles.items():
            lines += [f"`{name}`:", "", "| function | share of samples |", "| --- | --- |"]
            lines += [f"| `{function}` | {share:.0%} |" for function, share in rows] + [""]
    return "\n".join(lines).rstrip() + "\n"


def install_as_users_do(work: Path) -> Path:
    """A scratch venv where kafkalog is installed as the README's first command installs it: from a
    wheel, its modules byte-compiled by pip, then its kernels built by `kafkalog build-kernels`. Its dependencies
    (and the peers') come from this environment's site-packages, named by a plain path line so that
    this environment's start-up hooks do not run: an editable install's finder costs every command
    ~25 ms that users never pay, and without byte-compiled modules (PYTHONDONTWRITEBYTECODE, set on
    the machine this was written on) every run would recompile 15,000 lines (~70 ms).
    Returns the venv's bin directory: its `python` also runs the peers. Commands run through its
    `kafkalog` script, as users do (`python -m` would import the source tree from the cwd)."""
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(BENCH.parent)], check=True,
                   stdout=subprocess.DEVNULL)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(site, "kafkalog-bench-dependencies.pth").write_text(ours + "\n")
    subprocess.run([str(venv / "bin" / "kafkalog"), "build-kernels"], check=True)
    return venv / "bin"


def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+)\s*([KMG]i?B)?", text.strip(), re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text} (e.g. 256MiB, 1GiB)")
    unit = (match[2] or "B").upper().replace("I", "")
    return int(match[1]) << {"B": 0, "KB": 10, "MB": 20, "GB": 30}[unit]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--lookup-stage":
        lookup_stage(sys.argv[2], [int(t) for t in sys.argv[3:]])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="1GiB", help="segment size per variant (default 1GiB)")
    parser.add_argument("--runs", type=int, default=3, help="runs per command; the median is reported")
    parser.add_argument("--variants", default=",".join(v.name for v in VARIANTS),
                        help="comma-separated subset of: " + ", ".join(v.name for v in VARIANTS))
    parser.add_argument("--no-lookup", action="store_true", help="skip the 1,000-segment lookup partition")
    parser.add_argument("--no-first-run", action="store_true",
                        help="skip the first run with an empty kernel cache (each waits for a ~2 min background build)")
    parser.add_argument("--profile", action="store_true", help="add py-spy profiles of dump json and verify")
    parser.add_argument("--commands", help="comma-separated subset of kafkalog's commands to time (e.g. "
                        "'verify,verify --shallow'); the peers always run")
    parser.add_argument("--log-dir-size", default="2GiB",
                        help="per variant, a log dir of copies of its partition this big for the whole-log-dir rows "
                             "(0: none)")
    parser.add_argument("--note", help="a line to put at the top of RESULTS.md (e.g. 'development run')")
    parser.add_argument("--out", type=Path, default=BENCH / "RESULTS.md")
    args = parser.parse_args()
    size = parse_size(args.size)
    chosen = [v for v in VARIANTS if v.name in args.variants.split(",")]
    started = time.perf_counter()
    global PYTHON, KAFKALOG
    with tempfile.TemporaryDirectory(prefix="kafkalog-bench-") as tmp:
        work = Path(tmp)
        scripts = install_as_users_do(work)
        PYTHON, KAFKALOG = str(scripts / "python"), [str(scripts / "kafkalog")]
        only = set(args.commands.split(",")) if args.commands else None
        log_dir_size = 0 if args.log_dir_size in ("0", "") else parse_size(args.log_dir_size)
        results = [bench_variant(v, work, size, args.runs, only, log_dir_size) for v in chosen]
        for r in results:  # one variant's files at a time would do; the disk holds them all
            shutil.rmtree(work / f"bench-{r['variant'].name}-0")
        lookup = None if args.no_lookup else bench_lookup(work, size, args.runs)
        first_run = None if args.no_first_run else bench_first_run(work, args.runs)
        startup = bench_startup(max(5, args.runs))
        profiles = profile(VARIANTS[0], work, min(size, 128 << 20)) if args.profile else {}
    text = report(args, results, lookup, startup, profiles, time.perf_counter() - started, first_run)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

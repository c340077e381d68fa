"""Evidence safety and hostile conditions around the commands rather than inside the bytes:

- read-only commands leave every byte, size, mode and mtime of their inputs unchanged and create
  nothing, for every subcommand the CLI lists;
- rebuild-index killed with SIGKILL in the middle of writing leaves each target as the old file or
  the new one, never half of one, and the backups intact;
- --output-dir refuses a directory inside the log dir being read, or one that contains it;
- walking a log dir never follows a symbolic link (out of the tree, or in a loop);
- a segment a live broker is appending to reads as a consistent prefix: while another process holds
  the broker lock on .lock, a partial or zero-filled end of the active segment is "still being
  written"; unlocked, it is what Kafka's recovery truncates (truncated-tail, with what it drops);
  the same cut elsewhere is damage either way;
- --strict stops at the first problem with exit 1 and its message.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import click
import pytest

from kafkalog_tools.cli import cli, main
from kafkalog_tools.crc import crc32c
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.formats.segment import SegmentFile
from kafkalog_tools.recovery import BACKUP_SUFFIX, TEMP_SUFFIX, ProducerState, recover_segment
from tests.conftest import GOLDEN, REAL, ROOT

T0 = 1_700_000_000_000
MIXED = "golden-v2-mixed-0"


def kafkalog(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def tree_state(root: Path) -> dict:
    """Every entry under `root`, links not followed: kind, size, mode, mtime and content hash."""
    state = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISREG(info.st_mode):
            state[str(path.relative_to(root))] = (info.st_size, info.st_mode, info.st_mtime_ns,
                                                  hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            state[str(path.relative_to(root))] = (stat.S_IFMT(info.st_mode), info.st_mtime_ns)
    return state


def batch(offset: int, count: int = 2, value: bytes = b"v") -> bytes:
    records = [build_record(i, i, b"k%d" % (offset + i), value) for i in range(count)]
    return build_batch(offset, records, base_timestamp=T0 + offset, max_timestamp=T0 + offset + count - 1)


# ---------------------------------------------------------------------------------------------
# Read-only commands change nothing
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def evidence(tmp_path_factory) -> Path:
    if not GOLDEN.exists() or not REAL.exists():
        pytest.skip(f"shared corpus not found at {GOLDEN.parent}")
    root = tmp_path_factory.mktemp("evidence")
    shutil.copytree(GOLDEN / "damaged" / "truncated", root / "damaged")  # copy2: mtimes kept
    shutil.copytree(GOLDEN / "logs" / "golden-v2-txn-0", root / "logs" / "golden-v2-txn-0")
    shutil.copytree(REAL / "zk-broker-a", root / "zk-broker-a")
    for path in root.rglob("*"):  # writable, so that a stray write would succeed and be seen
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def read_only_command_lines(root: Path) -> list[list[str]]:
    """Representative command lines for every subcommand the CLI lists (a writer only in its
    read-only form); a subcommand this list does not know fails the test until it is added."""
    partition = root / "damaged" / MIXED
    txn = root / "logs" / "golden-v2-txn-0"
    known = {
        "dump": [["dump", "--format", "json", "-d", "-p", root / "damaged", root / "zk-broker-a", txn]],
        "verify": [["verify", "--format", "json", root / "damaged", root / "zk-broker-a", txn]],
        "lookup": [["lookup", "--format", "json", "-o", "0", "-o", "2020", "-t", str(T0), partition]],
        "rebuild-index": [["rebuild-index", "--dry-run", "--truncate", "--format", "json", root / "damaged", txn]],
        "txns": [["txns", "--format", "json", txn, root / "zk-broker-a"]],
        "retention": [["retention", "--format", "json", partition, txn]],
        "compaction": [["compaction", "--format", "json", txn]],
        "diverge": [["diverge", "--format", "json", partition, txn]],
        "report": [["report", "--output", "-", "--now", str(T0), root / "damaged", txn, partition]],
        "build-kernels": [],  # reads no input: it writes the kernel cache (tests/test_kernel_cache.py)
    }
    context = click.Context(cli)
    listed = cli.list_commands(context)
    assert set(listed) <= set(known), f"add read-only command lines for {set(listed) - set(known)}"
    return [[str(a) for a in line] for name in listed for line in known[name]]


def test_read_only_commands_change_nothing_and_create_nothing(capsys, evidence):
    """Also `.lock`: its broker lock is probed (read-only, F_GETLK), never taken or created - with no
    .lock (damaged), an unlocked one (a stopped broker) and one another process holds (a running one)."""
    assert (evidence / "zk-broker-a" / ".lock").exists() and not (evidence / "damaged" / ".lock").exists()
    before = tree_state(evidence)
    for line in read_only_command_lines(evidence):
        code, out, err = kafkalog(capsys, *line)
        assert code in (0, 1), (line, err)
        assert out, line
        assert tree_state(evidence) == before, f"{line[0]} changed the evidence"
    with broker_lock(evidence / "zk-broker-a"):
        for line in read_only_command_lines(evidence):
            if line[0] in ("dump", "verify"):
                code, out, err = kafkalog(capsys, *line)
                assert code == 1, (line, err)  # the damaged dir, read offline
                assert tree_state(evidence) == before, f"{line[0]} changed the evidence"
        assert {(state["log_dir"], state["broker"]) for state in json.loads(out.splitlines()[-1])["log_dirs"]} >= {
            (str(evidence / "zk-broker-a"), "running"), (str(evidence / "damaged"), "unknown")}


# ---------------------------------------------------------------------------------------------
# rebuild-index killed mid-write
# ---------------------------------------------------------------------------------------------

BATCHES = 60_000


def big_partition(directory: Path) -> Path:
    """A segment of many small batches: with --index-interval-bytes 0 every batch is indexed, so
    the index files are megabytes and take a while to write and sync."""
    directory.mkdir(parents=True)
    template = bytearray(batch(0, 1))
    out = bytearray()
    for offset in range(BATCHES):
        struct.pack_into(">q", template, 0, offset)
        struct.pack_into(">q", template, 27, T0 + offset)  # base timestamp
        struct.pack_into(">q", template, 35, T0 + offset)  # max timestamp
        struct.pack_into(">I", template, 17, crc32c(bytes(template[21:])))
        out += template
    log = directory / "00000000000000000000.log"
    log.write_bytes(bytes(out))
    return log


def test_rebuild_index_killed_mid_write_leaves_old_or_new_files(tmp_path):
    partition = tmp_path / "logs" / "big-0"
    log = big_partition(partition)
    stem = partition / "00000000000000000000"
    targets = [Path(f"{stem}.index"), Path(f"{stem}.timeindex")]
    old = {t: f"old {t.suffix}".encode() * 3 for t in targets}
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "kafkalog_tools", "rebuild-index", "--index-interval-bytes", "0",
               "--format", "json", str(partition)]
    new = {}
    reference = tmp_path / "reference" / "big-0"  # the new files, written by an uninterrupted run
    shutil.copytree(partition, reference)
    subprocess.run(command[:-1] + [str(reference)], env=environment, check=True, capture_output=True)
    new = {t: (reference / t.name).read_bytes() for t in targets}
    assert all(len(data) > 100_000 for data in new.values())

    kills_mid_write = 0
    for attempt in range(12):
        for path in partition.iterdir():
            if path != log:
                path.unlink()
        for target, data in old.items():
            target.write_bytes(data)
        proc = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # the kill lands while a temp file exists (the write is under way), or at a growing delay
        deadline = time.monotonic() + 0.005 * attempt if attempt % 2 else time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if any(p.name.endswith(TEMP_SUFFIX) for p in partition.iterdir()):
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        mid_write = any(p.name.endswith(TEMP_SUFFIX) for p in partition.iterdir())
        kills_mid_write += mid_write
        for target in targets:
            assert target.read_bytes() in (old[target], new[target]), f"attempt {attempt}: {target.name} is half written"
            backup = target.with_name(target.name + BACKUP_SUFFIX)
            if backup.exists():
                assert backup.read_bytes() == old[target], "the backup is not the old file"
            if target.read_bytes() == new[target]:
                assert backup.read_bytes() == old[target], "replaced without a backup"
        assert log.stat().st_size == BATCHES * len(batch(0, 1)), "the .log was touched"
    assert kills_mid_write, "no kill landed during a write: the test did not test anything"
    # a later run finishes the job over whatever the kill left
    subprocess.run(command, env=environment, check=True, capture_output=True)
    assert all(t.read_bytes() == new[t] for t in targets)


# ---------------------------------------------------------------------------------------------
# --output-dir and the input tree
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["logs/p-0/out", "logs/out", "logs", "."], ids=["in-partition", "in-log-dir",
                                                                                   "the-log-dir", "above-it"])
def test_output_dir_refuses_the_input_tree(capsys, tmp_path, where):
    partition = tmp_path / "logs" / "p-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(batch(0) + batch(2))
    before = tree_state(tmp_path)
    code, out, err = kafkalog(capsys, "rebuild-index", "--output-dir", tmp_path / where, partition)
    assert code == 2 and "input tree" in err, err
    assert tree_state(tmp_path) == before


def test_output_dir_elsewhere_is_written(capsys, tmp_path):
    partition = tmp_path / "logs" / "p-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(batch(0) + batch(2))
    code, _, err = kafkalog(capsys, "rebuild-index", "--output-dir", tmp_path / "out", partition)
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out" / "p-0").iterdir()) == [
        "00000000000000000000.index", "00000000000000000000.timeindex"]
    assert sorted(p.name for p in partition.iterdir()) == ["00000000000000000000.log"]


# ---------------------------------------------------------------------------------------------
# Walking never follows symbolic links
# ---------------------------------------------------------------------------------------------


def test_symbolic_links_are_listed_not_followed(capsys, tmp_path):
    outside = tmp_path / "outside" / "secret-0"
    outside.mkdir(parents=True)
    (outside / "00000000000000000000.log").write_bytes(batch(0, value=b"OUTSIDE-VALUE"))
    logs = tmp_path / "logs"
    partition = logs / "t-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(batch(0, value=b"inside"))
    os.symlink(outside, logs / "secret-0")  # a partition dir out of the tree
    os.symlink(outside / "00000000000000000000.log", partition / "00000000000000000010.log")  # a segment
    os.symlink(logs, partition / "loop-0")  # a loop back up
    os.symlink("self.log", partition / "self.log")  # a loop on itself
    os.symlink(tmp_path / "outside", logs / "outside-dir")
    for line in (["dump", "--format", "json", "-p", logs], ["verify", "--format", "json", logs],
                 ["txns", "--format", "json", logs], ["rebuild-index", "--dry-run", "--format", "json", logs]):
        code, out, err = kafkalog(capsys, *line)
        assert code == 0, (line, err)
        assert "OUTSIDE" not in out and "secret-0/0000" not in out and "outside/" not in out, line
    code, out, _ = kafkalog(capsys, "dump", "--format", "json", logs)
    unknown = {Path(o["file"]).name: o["reason"] for o in map(json.loads, out.splitlines())
               if o["type"] == "unknown_file"}
    assert unknown == {name: "symbolic link, not followed" for name in
                       ("secret-0", "outside-dir", "00000000000000000010.log", "loop-0", "self.log")}


# ---------------------------------------------------------------------------------------------
# Live brokers: the active segment grows while we read; after a crash recovery cuts its end
# ---------------------------------------------------------------------------------------------

HOLD_LOCK = """import fcntl, sys
lock = open(sys.argv[1], "r+")
fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def broker_lock(log_dir: Path):
    """What a running broker holds for as long as it runs: an exclusive fcntl lock on <log dir>/.lock
    (Kafka's FileChannel.tryLock), taken by another process - a POSIX lock belongs to its process,
    and this one must not close a descriptor of a file it holds a lock on."""
    lock = log_dir / ".lock"
    assert lock.exists(), "the broker creates .lock; the test creates it before it records the tree"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(lock)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        yield
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


def cut_partition(tmp_path: Path, *, later_segment: bool, tail: bytes | None = None) -> Path:
    partition = tmp_path / "logs" / "live-0"
    partition.mkdir(parents=True)
    (tmp_path / "logs" / ".lock").touch()
    third = batch(4, 3, b"x" * 100)
    (partition / "00000000000000000000.log").write_bytes(batch(0) + batch(2) + (third[: len(third) // 2]
                                                                                if tail is None else tail))
    if later_segment:
        (partition / "00000000000000000007.log").write_bytes(batch(7))
    return partition


def file_items(out: str, kind: str) -> list[dict]:
    return [o for o in map(json.loads, out.splitlines()) if o["type"] == kind]


THIRD = batch(4, 3, b"x" * 100)
TAILS = {  # what the reader finds after batches 0..3: (bytes, what recovery drops of them as far as they can be read)
    "half-a-batch": (THIRD[: len(THIRD) // 2], {"first_offset": 4, "last_offset": 6, "records": 3}),
    "a-batch-header-cut-short": (THIRD[:40], {"first_offset": 4, "last_offset": None, "records": None}),
    # a write split at a page boundary: its first bytes, the high bytes of the base offset, are zeros
    "the-first-zero-bytes-of-a-batch": (THIRD[:7], {"first_offset": None, "last_offset": None, "records": 0}),
    "log.preallocate-zeros": (bytes(4096), {"first_offset": None, "last_offset": None, "records": 0}),
    "a-batch-written-into-preallocated-zeros": (THIRD[: len(THIRD) // 2] + bytes(4096 + len(THIRD) // 2),
                                                {"first_offset": 4, "last_offset": 6, "records": 3}),
}


@pytest.mark.parametrize("tail", list(TAILS))
def test_the_end_of_the_active_segment_reads_as_the_broker_lock_says(capsys, tmp_path, tail):
    """Locked by another process (a running broker): a write in progress, exit 0. The same dir
    unlocked (a stopped broker): what Kafka's recovery truncates, an error at the cut with what it
    drops, exit 1. --live / --offline turn either around. No run creates or changes a file."""
    data, expected_drops = TAILS[tail]
    partition = cut_partition(tmp_path, later_segment=False, tail=data)
    segment = partition / "00000000000000000000.log"
    cut = 4 * len(batch(0)) // 2
    before = tree_state(tmp_path)

    def read(*options) -> tuple[int, list[dict], int, str]:
        code, out, _ = kafkalog(capsys, "verify", "--format", "json", *options, partition)
        findings = [json.loads(line) for line in out.splitlines()]
        dump_code, dump_out, _ = kafkalog(capsys, "dump", "--format", "json", *options, segment)
        return code, findings, dump_code, dump_out

    def tail_findings(findings):
        return [(f["severity"], f["code"], f["position"]) for f in findings
                if f["type"] == "finding" and f["file"] == str(segment)]

    with broker_lock(tmp_path / "logs"):
        for options in ((), ("--live",)):
            code, findings, dump_code, dumped = read(*options)
            assert (code, dump_code) == (0, 0), findings
            assert tail_findings(findings) == [("warning", "still-being-written", cut)]
            assert findings[-1]["log_dirs"][0]["broker"] == "running" and findings[-1]["damaged_bytes"] == 0
            [file] = file_items(dumped, "file")
            assert (file["broker"], file["read_as"]) == ("running", "live")
            assert [(t["position"], t["still_being_written"]) for t in file_items(dumped, "trailing_bytes")] == [
                (cut, True)]
        code, findings, dump_code, _ = read("--offline")
        assert (code, dump_code) == (1, 1) and tail_findings(findings) == [("error", "truncated-tail", cut)]
    for options in ((), ("--offline",)):
        code, findings, dump_code, dumped = read(*options)
        assert (code, dump_code) == (1, 1)
        [finding] = [f for f in findings if f.get("code") == "truncated-tail"]
        assert (finding["severity"], finding["position"], finding["length"]) == ("error", cut, len(data))
        assert finding["recovery_drops"] == {"bytes": len(data), **expected_drops, "producer_ids": [],
                                             "open_transactions": []}
        assert "rebuild-index --truncate" in finding["message"]
        assert ("log.preallocate" in finding["message"]) == (expected_drops["records"] == 0)
        assert findings[-1]["log_dirs"][0]["broker"] == "stopped" and findings[-1]["damaged_bytes"] == len(data)
        [file] = file_items(dumped, "file")
        assert (file["broker"], file["read_as"]) == ("stopped", "offline")
        assert not any(t["still_being_written"] for t in file_items(dumped, "trailing_bytes"))
    code, findings, dump_code, _ = read("--live")
    assert (code, dump_code) == (0, 0) and tail_findings(findings) == [("warning", "still-being-written", cut)]
    assert tree_state(tmp_path) == before, "reading changed or created a file"
    with SegmentFile(segment) as log:  # where rebuild-index --truncate (LogSegment.recover's rules) cuts
        assert recover_segment(log, ProducerState()).valid_bytes == cut


def test_a_cut_after_earlier_damage_in_the_active_segment_says_recovery_cuts_at_the_first(capsys, tmp_path):
    partition = tmp_path / "logs" / "live-0"
    partition.mkdir(parents=True)
    bad = bytearray(batch(2))
    bad[-1] ^= 0xFF  # CRC mismatch; intact batches follow it
    (partition / "00000000000000000000.log").write_bytes(batch(0) + bytes(bad) + batch(4) + THIRD[:50])
    code, out, _ = kafkalog(capsys, "verify", "--format", "json", partition)
    errors = {f["code"]: f for f in map(json.loads, out.splitlines()) if f.get("severity") == "error"}
    assert code == 1 and set(errors) == {"crc-mismatch", "truncated-tail"}
    assert f"recovery cuts earlier still, at byte {len(batch(0))}" in errors["truncated-tail"]["message"]


@pytest.mark.parametrize("tail", list(TAILS))
def test_the_compiled_bulk_path_reads_the_end_as_the_per_batch_path_does(capsys, monkeypatch, tmp_path, tail):
    """KAFKALOG_BULK=always (the compiled scan takes the batches before the end) and =never give the
    same verify and dump output and exit codes, live and offline."""
    pytest.importorskip("numba", reason="the bulk path needs numba (an install requirement)")
    from kafkalog_tools import dump as d
    from kafkalog_tools.native import bulk_scan

    partition = tmp_path / "logs" / "live-0"
    partition.mkdir(parents=True)
    (tmp_path / "logs" / ".lock").touch()
    segment = partition / "00000000000000000000.log"
    segment.write_bytes(b"".join(batch(offset, 2, b"v" * 50) for offset in range(0, 400, 2)) + TAILS[tail][0])
    outcomes = {}
    for locked in (True, False):
        with broker_lock(tmp_path / "logs") if locked else contextlib.nullcontext():
            for mode in ("never", "always"):
                monkeypatch.setenv(bulk_scan.MODE_VARIABLE, mode)
                outcomes[locked, mode] = [kafkalog(capsys, "verify", "--format", "json", partition),
                                          kafkalog(capsys, "dump", "--format", "json", "-d", segment)]
            if locked:
                runs = [item for item in d.dump([str(segment)], d.DumpOptions(deep=True, batch_runs=True))
                        if type(item) is d.BatchRun]
                assert sum(run.batches.shape[1] for run in runs) > 100, "the bulk path was not taken"
    for locked in (True, False):
        assert outcomes[locked, "always"] == outcomes[locked, "never"]
        assert [code for code, _, _ in outcomes[locked, "never"]] == ([0, 0] if locked else [1, 1])


def test_a_lock_that_cannot_be_probed_is_unknown_and_stays_as_it_is(tmp_path):
    """No .lock, a FIFO, a directory or a symbolic link named .lock: `unknown`, read offline; never
    followed, waited on, created or changed."""
    from kafkalog_tools.broker import BrokerStates, probe_lock

    hazards = {"missing": lambda lock: None, "fifo": os.mkfifo, "directory": os.mkdir,
               "link": lambda lock: os.symlink(tmp_path / "elsewhere", lock)}
    (tmp_path / "elsewhere").touch()
    for name, make in hazards.items():
        log_dir = tmp_path / name
        log_dir.mkdir()
        make(log_dir / ".lock")
        before = tree_state(tmp_path)
        broker, reason = probe_lock(log_dir)
        assert broker == "unknown" and ".lock" in reason, (name, reason)
        assert BrokerStates().of(log_dir).read_as == "offline"
        assert BrokerStates("live").of(log_dir).read_as == "live"
        assert tree_state(tmp_path) == before, name
    (tmp_path / "stopped").mkdir()
    (tmp_path / "stopped" / ".lock").touch()
    assert probe_lock(tmp_path / "stopped")[0] == "stopped"
    with broker_lock(tmp_path / "stopped"):
        broker, reason = probe_lock(tmp_path / "stopped")
    assert broker == "running" and reason.startswith("process ") and reason.endswith(" holds the lock on .lock")


def test_the_same_cut_in_an_earlier_segment_is_damage_even_on_a_live_broker(capsys, tmp_path):
    partition = cut_partition(tmp_path, later_segment=True)
    with broker_lock(tmp_path / "logs"):
        code, out, _ = kafkalog(capsys, "verify", "--format", "json", partition)
        errors = [f["code"] for f in map(json.loads, out.splitlines()) if f.get("severity") == "error"]
        assert code == 1 and errors == ["truncated-batch"]
        code, out, _ = kafkalog(capsys, "dump", "--format", "json", partition / "00000000000000000000.log")
        [trailing] = file_items(out, "trailing_bytes")
        assert code == 1 and trailing["still_being_written"] is False


def test_a_crash_cut_in_the_golden_corpus_is_what_kafkas_recovery_truncates(capsys):
    """golden/damaged/truncated: the active segment 1839 ends inside a batch and no broker holds the
    dir (no .lock). Kafka's LogSegment.recover (the oracle) truncates it to 34819 bytes, next offset
    2018: exactly the cut and the offsets the finding reports."""
    logs = GOLDEN / "damaged" / "truncated"
    if not logs.exists():
        pytest.skip(f"shared corpus not found at {GOLDEN.parent}")
    code, out, _ = kafkalog(capsys, "verify", "--format", "json", logs)
    findings = [json.loads(line) for line in out.splitlines()]
    [tail] = [f for f in findings if f.get("code") == "truncated-tail"]
    assert code == 1 and Path(tail["file"]).name == "00000000000000001839.log" and tail["position"] == 34819
    assert tail["recovery_drops"] == {"bytes": 302, "first_offset": 2018, "last_offset": 2023, "records": 6,
                                      "producer_ids": [2001], "open_transactions": []}
    assert "offsets 2018..2023 (6 records) are lost" in tail["message"]
    assert findings[-1]["log_dirs"] == [{"log_dir": str(logs.resolve()), "broker": "unknown", "read_as": "offline",
                                         "reason": "no .lock: no broker has run on this directory, or it is a copy"}]
    oracle = ROOT.parent / "shared" / "tools" / "kafka-oracle" / "bin" / "kafka-oracle"
    if not oracle.exists() or shutil.which("java") is None:
        return  # the numbers above are the oracle's, checked where it runs
    with tempfile.TemporaryDirectory() as out_dir:
        result = subprocess.run([str(oracle), "recover", str(logs / MIXED), out_dir + "/out",
                                 "--config", "segment.index.bytes=32768"], capture_output=True, text=True, check=True)
    recovered = {o["baseOffset"]: o for o in map(json.loads, result.stdout.splitlines()) if o["type"] == "segment"}
    last = recovered[1839]
    assert (last["truncatedBytes"], last["log"]["size"], last["nextOffset"]) == (302, 34819, 2018)
    assert all(s["truncatedBytes"] == 0 for base, s in recovered.items() if base != 1839)


def test_reading_a_segment_a_writer_is_appending_to(capsys, tmp_path):
    """A live broker (another process holds the lock on .lock) while a thread appends batches in
    three writes - the zero bytes that begin one (the high bytes of its base offset: what a reader
    sees when a write is split at a page boundary), half of it, the rest - and dump and verify read
    the partition over and over: never a false corruption, never a crash, a consistent prefix."""
    partition = tmp_path / "logs" / "live-0"
    partition.mkdir(parents=True)
    (tmp_path / "logs" / ".lock").touch()
    segment = partition / "00000000000000000000.log"
    segment.write_bytes(batch(0))
    stop = threading.Event()

    def append() -> None:
        offset = 2
        with open(segment, "ab", buffering=0) as out:
            while not stop.is_set() and offset < 20_000:
                data = batch(offset, 2, b"v" * (offset % 300))
                zeros = len(data) - len(data.lstrip(b"\0"))
                for piece in (data[:zeros], data[zeros : len(data) // 2], data[len(data) // 2 :]):
                    out.write(piece)
                    time.sleep(0.0003)
                offset += 2

    writer = threading.Thread(target=append)
    sizes = set()
    with broker_lock(tmp_path / "logs"):
        writer.start()
        try:
            for round_number in range(30):
                code, out, err = kafkalog(capsys, "verify", "--format", "json", "--shallow", partition)
                lines = [json.loads(line) for line in out.splitlines()]
                assert code == 0, [f for f in lines if f.get("severity") == "error"]
                sizes.add(lines[-1]["log_bytes"])
                code, out, err = kafkalog(capsys, "dump", "--format", "json", segment)
                assert code == 0, err
                objects = [json.loads(line) for line in out.splitlines()]
                offsets = [o["base_offset"] for o in objects if o["type"] == "batch"]
                assert offsets == list(range(0, 2 * len(offsets), 2))  # a consistent prefix
                assert all(o["crc_valid"] for o in objects if o["type"] == "batch")
        finally:
            stop.set()
            writer.join()
    assert len(sizes) > 5, "the segment did not grow while it was read"


# ---------------------------------------------------------------------------------------------
# --strict
# ---------------------------------------------------------------------------------------------


def damaged_partition(tmp_path: Path) -> Path:
    partition = tmp_path / "logs" / "d-0"
    partition.mkdir(parents=True)
    bad = bytearray(batch(2))
    bad[-1] ^= 0xFF  # CRC mismatch
    (partition / "00000000000000000000.log").write_bytes(batch(0) + bytes(bad) + batch(4))
    later = bytearray(batch(10))
    later[-1] ^= 0xFF
    (partition / "00000000000000000010.log").write_bytes(bytes(later) + batch(12))
    return partition


def test_strict_dump_stops_at_the_first_problem(capsys, tmp_path):
    partition = damaged_partition(tmp_path)
    code, lenient, _ = kafkalog(capsys, "dump", "--format", "json", partition)
    assert code == 1 and sum('"crc_valid":false' in line for line in lenient.splitlines()) == 2
    code, strict, err = kafkalog(capsys, "dump", "--format", "json", "--strict", partition)
    batches = [json.loads(line) for line in strict.splitlines() if '"type":"batch"' in line]
    assert code == 1 and [b["base_offset"] for b in batches] == [0, 2]
    assert err.startswith("kafkalog: stopped at the first problem (--strict): ") and f"byte {len(batch(0))}" in err


def test_strict_verify_stops_at_the_first_error(capsys, tmp_path):
    partition = damaged_partition(tmp_path)
    code, lenient, _ = kafkalog(capsys, "verify", "--format", "json", partition)
    assert code == 1 and json.loads(lenient.splitlines()[-1])["errors"] == 2
    code, strict, err = kafkalog(capsys, "verify", "--format", "json", "--strict", partition)
    summary = json.loads(strict.splitlines()[-1])
    assert code == 1 and summary["errors"] == 1 and "--strict" in err and "crc" in err.lower()


def test_strict_rebuild_index_writes_nothing_for_the_segment_it_stops_at(capsys, tmp_path):
    partition = damaged_partition(tmp_path)
    code, _, err = kafkalog(capsys, "rebuild-index", "--strict", "--format", "json", partition)
    assert code == 1 and "--strict" in err
    assert sorted(p.name for p in partition.iterdir()) == ["00000000000000000000.log", "00000000000000000010.log"]


def test_strict_lookup_stops_at_damage(capsys, tmp_path):
    partition = damaged_partition(tmp_path)
    code, out, err = kafkalog(capsys, "lookup", "--format", "json", "--strict", "-o", "2", "-o", "4", partition)
    assert code == 1 and len(out.splitlines()) == 1 and "--strict" in err

"""Evidence safety and hostile conditions around the commands rather than inside the bytes:

- read-only commands leave every byte, size, mode and mtime of their inputs unchanged and create
  nothing, for every subcommand the CLI lists;
- rebuild-index killed with SIGKILL in the middle of writing leaves each target as the old file or
  the new one, never half of one, and the backups intact;
- --output-dir refuses a directory inside the log dir being read, or one that contains it;
- walking a log dir never follows a symbolic link (out of the tree, or in a loop);
- a segment a live broker is appending to reads as a consistent prefix: a partial last batch of
  the active segment is "still being written", not corruption; the same cut elsewhere is damage;
- --strict stops at the first problem with exit 1 and its message.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import click
import pytest

from kafkalog_tools.cli import cli, main
from kafkalog_tools.crc import crc32c
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.recovery import BACKUP_SUFFIX, TEMP_SUFFIX
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
    }
    context = click.Context(cli)
    listed = cli.list_commands(context)
    assert set(listed) <= set(known), f"add read-only command lines for {set(listed) - set(known)}"
    return [[str(a) for a in line] for name in listed for line in known[name]]


def test_read_only_commands_change_nothing_and_create_nothing(capsys, evidence):
    before = tree_state(evidence)
    for line in read_only_command_lines(evidence):
        code, out, err = kafkalog(capsys, *line)
        assert code in (0, 1), (line, err)
        assert out, line
        assert tree_state(evidence) == before, f"{line[0]} changed the evidence"


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
# Live brokers: the active segment grows while we read
# ---------------------------------------------------------------------------------------------


def cut_partition(tmp_path: Path, *, later_segment: bool) -> Path:
    partition = tmp_path / "logs" / "live-0"
    partition.mkdir(parents=True)
    third = batch(4, 3, b"x" * 100)
    (partition / "00000000000000000000.log").write_bytes(batch(0) + batch(2) + third[: len(third) // 2])
    if later_segment:
        (partition / "00000000000000000007.log").write_bytes(batch(7))
    return partition


def test_a_partial_batch_at_the_end_of_the_active_segment_is_still_being_written(capsys, tmp_path):
    partition = cut_partition(tmp_path, later_segment=False)
    segment = partition / "00000000000000000000.log"
    code, out, err = kafkalog(capsys, "verify", "--format", "json", partition)
    findings = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [(f["severity"], f["code"], f["position"]) for f in findings if f["type"] == "finding"
            and f["file"] == str(segment)] == [("warning", "still-being-written", 2 * len(batch(0)))]
    code, out, err = kafkalog(capsys, "dump", "--format", "text", segment)
    assert code == 0 and "still being written" in err
    code, out, _ = kafkalog(capsys, "dump", "--format", "json", partition)
    [trailing] = [o for o in map(json.loads, out.splitlines()) if o["type"] == "trailing_bytes"]
    assert code == 0 and trailing["still_being_written"] is True


def test_the_same_cut_in_an_earlier_segment_is_damage(capsys, tmp_path):
    partition = cut_partition(tmp_path, later_segment=True)
    code, out, _ = kafkalog(capsys, "verify", "--format", "json", partition)
    errors = [f["code"] for f in map(json.loads, out.splitlines()) if f.get("severity") == "error"]
    assert code == 1 and errors == ["truncated-batch"]
    code, out, _ = kafkalog(capsys, "dump", "--format", "json", partition / "00000000000000000000.log")
    [trailing] = [o for o in map(json.loads, out.splitlines()) if o["type"] == "trailing_bytes"]
    assert code == 1 and trailing["still_being_written"] is False


def test_reading_a_segment_a_writer_is_appending_to(capsys, tmp_path):
    """A thread appends batches in two halves (a reader sees the file between them) while dump and
    verify read the same partition over and over: never a false corruption, never a crash."""
    partition = tmp_path / "logs" / "live-0"
    partition.mkdir(parents=True)
    segment = partition / "00000000000000000000.log"
    segment.write_bytes(batch(0))
    stop = threading.Event()

    def append() -> None:
        offset = 2
        with open(segment, "ab", buffering=0) as out:
            while not stop.is_set() and offset < 20_000:
                data = batch(offset, 2, b"v" * (offset % 300))
                out.write(data[: len(data) // 2])
                time.sleep(0.0005)
                out.write(data[len(data) // 2 :])
                offset += 2

    writer = threading.Thread(target=append)
    writer.start()
    sizes = set()
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

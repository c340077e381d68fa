"""The verify, rebuild-index and lookup commands: exit codes, JSON Lines shapes, messages instead of
tracebacks, and nothing written by verify, lookup or rebuild-index --dry-run."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from kafkalog_tools.cli import main, out_of_memory

MIXED = "golden-v2-mixed-0"


def kafkalog(capsys, *args: str) -> tuple[int, str, str]:
    """Run the real entry point (its error handling included); return (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exited:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def tree_state(root: Path) -> dict:
    """Every file under `root`: content hash, size and modification time."""
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_size,
                                       p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def damaged(golden, tmp_path) -> Path:
    work = tmp_path / "logs" / MIXED  # in a log dir of its own: --output-dir tmp_path/out is outside it
    shutil.copytree(golden / "damaged" / "truncated" / MIXED, work)
    for path in work.iterdir():
        path.chmod(0o644)  # writable, so that a stray write would succeed and be seen
    return work


# ---------------------------------------------------------------------------------------------
# Nothing is written
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ("verify", "{dir}"),
    ("verify", "--shallow", "--format", "text", "{dir}"),
    ("lookup", "-o", "0", "-o", "2020", "-t", "1700000050000", "-t", "9999999999999", "--explain", "{dir}"),
    ("lookup", "--scan", "-o", "1900", "{dir}"),
    ("rebuild-index", "--dry-run", "--truncate", "{dir}"),
    ("rebuild-index", "--dry-run", "--format", "text", "{dir}/00000000000000001839.log"),
], ids=["verify", "verify-text", "lookup", "lookup-scan", "rebuild-dry-run", "rebuild-dry-run-text"])
def test_nothing_is_written(capsys, damaged, args):
    before = tree_state(damaged.parent)
    code, out, err = kafkalog(capsys, *(a.replace("{dir}", str(damaged)) for a in args))
    assert code in (0, 1), err
    assert tree_state(damaged.parent) == before


# ---------------------------------------------------------------------------------------------
# verify
# ---------------------------------------------------------------------------------------------


def test_verify_json_lines(capsys, golden):
    damage = json.loads((golden / "manifests" / "damaged" / f"{MIXED}.damage.json").read_text())[0]
    for options, code_expected, expected in (((), 1, ("error", "truncated-tail")),  # no broker holds the dir
                                             (("--live",), 0, ("warning", "still-being-written"))):
        code, out, _ = kafkalog(capsys, "verify", "--format", "json", *options, golden / damage["dir"])
        lines = json_lines(out)
        assert code == code_expected
        assert [line["type"] for line in lines] == ["finding"] * (len(lines) - 1) + ["summary"]
        for finding in lines[:-1]:
            assert {"type", "severity", "code", "file", "position", "message"} <= finding.keys()
        at_the_cut = [f for f in lines if f.get("position") == damage["cutBatchPosition"]]
        assert [(Path(f["file"]).name, f["severity"], f["code"]) for f in at_the_cut] == [(damage["file"], *expected)]
        assert lines[-1]["errors"] == code_expected and lines[-1]["warnings"] == 1 - code_expected


def test_verify_exits_0_on_golden_and_real_dirs(capsys, golden, real):
    paths = [golden / "logs" / p for p in sorted(os.listdir(golden / "logs"))]
    paths += [real / "zk-broker-a", real / "zk-broker-b"]
    code, out, _ = kafkalog(capsys, "verify", *paths)
    summary = json_lines(out)[-1]
    assert code == 0 and summary["errors"] == 0 and summary["paths"] == 8


def test_verify_text_summary(capsys, golden):
    code, out, _ = kafkalog(capsys, "verify", "--format", "text", golden / "logs" / "golden-v0-0")
    assert code == 0 and "partitions" in out and "damaged bytes" in out


def test_verify_unreadable_file_is_an_io_error(capsys, damaged, monkeypatch):
    from kafkalog_tools.errors import InputError
    from kafkalog_tools.verify import segment as verify_segment

    unreadable = damaged / "00000000000000000424.log"

    def segment_file(path, *args, **kwargs):
        if Path(path) == unreadable:
            raise InputError("cannot open: Permission denied", path=path)
        return original(path, *args, **kwargs)

    original = verify_segment.SegmentFile
    monkeypatch.setattr(verify_segment, "SegmentFile", segment_file)
    code, out, _ = kafkalog(capsys, "verify", damaged)
    [io] = [f for f in json_lines(out) if f.get("code") == "io-error"]
    assert code == 2 and io["file"] == str(unreadable) and "Permission denied" in io["message"]
    assert json_lines(out)[-1]["segments"] == 4  # the others were still verified


# ---------------------------------------------------------------------------------------------
# rebuild-index
# ---------------------------------------------------------------------------------------------


def test_rebuild_index_of_legacy_partitions_matches_kafkas_recovery(capsys, golden, tmp_path):
    for name in ("golden-v0-0", "golden-v1-0"):
        work = tmp_path / name
        shutil.copytree(golden / "logs" / name, work)
        for path in list(work.iterdir()):
            path.chmod(0o644)
            if path.suffix in (".index", ".timeindex"):
                path.unlink()
        code, out, err = kafkalog(capsys, "rebuild-index", "--index-interval-bytes", "1024", "--format", "json", work)
        assert code == 0, err
        assert json_lines(out)[-1]["written"] == 2 * len(list(work.glob("*.log")))
        for expected in (golden / "rebuilt" / name).glob("*index"):
            assert (work / expected.name).read_bytes() == expected.read_bytes()


def test_rebuild_index_truncate(capsys, golden, damaged):
    code, out, _ = kafkalog(capsys, "rebuild-index", "--format", "json", "--no-backup", damaged)
    cut = [line for line in json_lines(out) if line["type"] == "segment" and line["truncated_bytes"]]
    assert code == 1 and cut[0]["invalid"]["position"] == 34819  # tail left in place: Kafka would cut it
    assert (damaged / "00000000000000001839.log").stat().st_size == 35121
    code, out, _ = kafkalog(capsys, "rebuild-index", "--truncate", "--no-backup", damaged)
    assert code == 0 and not list(damaged.glob("*.bak"))
    recovered = golden / "recovered" / "truncated" / MIXED
    for path in recovered.glob("00000000000000001839.*"):
        assert (damaged / path.name).read_bytes() == path.read_bytes()


def test_rebuild_index_output_dir_text(capsys, damaged, tmp_path):
    code, out, _ = kafkalog(capsys, "rebuild-index", "--truncate", "--output-dir", tmp_path / "out",
                            "--format", "text", damaged / "00000000000000001839.index")
    assert code == 0 and "00000000000000001839.log: created (34819 bytes)" in out
    assert sorted(p.name for p in (tmp_path / "out" / MIXED).iterdir()) == [
        "00000000000000001839.index", "00000000000000001839.log", "00000000000000001839.timeindex",
        "00000000000000001839.txnindex"]


# ---------------------------------------------------------------------------------------------
# lookup
# ---------------------------------------------------------------------------------------------


def test_lookup_answers_in_the_order_asked(capsys, golden):
    code, out, _ = kafkalog(capsys, "lookup", "-t", "2023-11-14T22:13:50Z", "-o", "500",
                            "--timestamp", "1700000030000", "--offset", "99999", "--explain",
                            golden / "logs" / MIXED)
    answers = json_lines(out)
    assert code == 0
    assert [a["query"] for a in answers] == [{"timestamp": 1700000030000}, {"offset": 500},
                                              {"timestamp": 1700000030000}, {"offset": 99999}]
    first = answers[0]
    assert {"found", "offset", "timestamp", "segment", "batch_position", "batch_base_offset",
            "batch_last_offset", "explanation"} <= first.keys()
    assert (first["offset"], first["batch_position"]) == (544, 14459)
    assert answers[3]["found"] is False and "log end offset 2025" in answers[3]["reason"]


def test_lookup_text(capsys, golden):
    code, out, _ = kafkalog(capsys, "lookup", "--format", "text", "-o", "17", golden / "logs" / MIXED)
    assert code == 0 and out.startswith("offset 17: offset 17, CreateTime")


def test_lookup_damage_exits_1(capsys, tmp_path, golden):
    work = tmp_path / MIXED
    shutil.copytree(golden / "logs" / MIXED, work)
    log = work / "00000000000000000838.log"
    log.chmod(0o644)
    data = bytearray(log.read_bytes())
    data[30000:31000] = bytes(1000)
    log.write_bytes(bytes(data))
    code, out, _ = kafkalog(capsys, "lookup", "--scan", "-o", "1300", work)
    [answer] = json_lines(out)
    assert code == 1 and answer["damaged"] and "00000000000000000838.log" in answer["reason"]


# ---------------------------------------------------------------------------------------------
# Bad input: a message with the file, never a traceback; exit 2
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args, expected", [
    (("verify", "{golden}/logs/golden-v0-0/partition.metadata"), "not a segment file"),
    (("rebuild-index", "{golden}/manifests/corpus.json"), "not a segment file"),
    (("lookup", "-o", "1", "{empty}"), "no .log segments"),
    (("lookup", "{golden}/logs/golden-v0-0"), "give at least one --offset or --timestamp"),
    (("lookup", "-t", "tomorrow", "{golden}/logs/golden-v0-0"), "neither epoch milliseconds nor"),
    (("verify", "{empty}/missing"), "does not exist"),
    (("rebuild-index", "--index-interval-bytes", "-1", "{empty}"), "-1"),
])
def test_bad_input_is_a_message_and_exit_2(capsys, golden, tmp_path, args, expected):
    empty = tmp_path / "t-0"
    empty.mkdir()
    code, out, err = kafkalog(capsys, *(a.format(golden=golden, empty=empty) for a in args))
    assert code == 2 and expected in err and "Traceback" not in err


def test_a_failed_write_is_an_io_error_message(capsys, damaged, monkeypatch):
    from kafkalog_tools import recovery

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(recovery.os, "replace", full_disk)
    code, _, err = kafkalog(capsys, "rebuild-index", "--truncate", damaged / "00000000000000001839.log")
    assert code == 2 and "No space left on device" in err and "00000000000000001839" in err
    assert "Traceback" not in err


# ---------------------------------------------------------------------------------------------
# The console script leaves at once, but only after what teardown was for
# ---------------------------------------------------------------------------------------------

LEAVE_THROUGH_RUN = """
import atexit, sys
from kafkalog_tools.cli import run
atexit.register(lambda: sys.stdout.write("exit handler ran\\n"))  # written, left in the buffer
sys.argv = ["kafkalog", *sys.argv[1:]]
run()
"""


@pytest.mark.parametrize("args", [
    ("dump", "--format", "json", "-d", "{golden}/logs/" + MIXED),
    ("dump", "--format", "text", "-d", "-p", "{golden}/logs/" + MIXED),
    ("verify", "--format", "json", "{corrupt}"),
    ("lookup", "-o", "1", "{golden}/logs/golden-v0-0/partition.metadata"),
], ids=["dump-json", "dump-text", "verify-corrupt", "bad-input"])
def test_the_console_script_flushes_and_runs_exit_handlers_before_it_leaves(capsys, golden, tmp_path, args):
    """`run` skips Python's teardown: exit handlers must still run, what they leave in a buffered
    pipe must still come out, and the exit code must be `main`'s."""
    import subprocess
    import sys

    corrupt = tmp_path / MIXED
    shutil.copytree(golden / "logs" / MIXED, corrupt)
    log = corrupt / "00000000000000000838.log"
    log.chmod(0o644)
    log.write_bytes(log.read_bytes()[:30000] + bytes(1000) + log.read_bytes()[31000:])
    args = [a.format(golden=golden, corrupt=corrupt) for a in args]
    code, out, err = kafkalog(capsys, *args)
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a block-buffered pipe
    proc = subprocess.run([sys.executable, "-c", LEAVE_THROUGH_RUN, *args], capture_output=True, env=environment,
                          timeout=300)
    assert len(out) > 8192 or code != 0  # more than one buffer's worth, or an exit code to keep
    assert (proc.returncode, proc.stdout.decode(), proc.stderr.decode()) == (code, out + "exit handler ran\n", err)


COUNT_THREADS_AFTER_NUMPY = """
import os, sys
sys.argv = ["kafkalog", "--version"]
from kafkalog_tools import cli
import numpy
numpy.ones((64, 64)) @ numpy.ones((64, 64))  # BLAS work, where its threads would take part
print(len(os.listdir("/proc/self/task")))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/task") or (os.cpu_count() or 1) < 2,
                    reason="counts this process's threads in Linux's /proc; OpenBLAS starts none on one CPU")
@pytest.mark.parametrize("quiet", [True, False])
def test_the_console_script_starts_no_blas_threads(quiet):
    import subprocess
    import sys

    script = COUNT_THREADS_AFTER_NUMPY.replace("import numpy", "cli.without_blas_threads()\nimport numpy" if quiet
                                              else "import numpy")
    environment = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    threads = int(subprocess.run([sys.executable, "-c", script], capture_output=True, env=environment, check=True,
                                 timeout=120).stdout)
    if not quiet and threads == 1:
        pytest.skip("this numpy's BLAS starts no threads of its own: nothing to keep quiet")
    assert threads == 1 if quiet else threads > 1  # (the second shows the first can fail)


FULL_DISK = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux) under stdout")


def _to_full_disk(script: str, args, unbuffered: bool) -> tuple[int, str]:
    import subprocess
    import sys

    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        environment["PYTHONUNBUFFERED"] = "1"
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-c", f"import sys; sys.argv = ['kafkalog', *sys.argv[1:]]; {script}",
                               *map(str, args)], stdout=full, stderr=subprocess.PIPE, env=environment, timeout=300)
    return proc.returncode, proc.stderr.decode()


@FULL_DISK
@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
@pytest.mark.parametrize("command", [("verify",), ("dump", "-d"), ("lookup", "-o", "5")], ids=lambda c: c[0])
def test_a_full_disk_under_stdout_is_an_io_error_told_once(golden, command, unbuffered):
    code, err = _to_full_disk("from kafkalog_tools.cli import run; run()",
                              [*command, golden / "logs" / "golden-v0-0"], unbuffered)
    assert code == 2 and err == "kafkalog: error: [Errno 28] No space left on device\n"


@FULL_DISK
def test_output_only_run_flushes_is_an_io_error_too():
    """What is still buffered when `main` returns clean, and cannot be written, is told and exits 2
    (Python's own teardown would say "Exception ignored" and exit 120)."""
    code, err = _to_full_disk("import sys, kafkalog_tools.cli as cli; cli.main = lambda: sys.stdout.write('x'); "
                              "cli.run()", [], unbuffered=False)
    assert code == 2 and err == "kafkalog: error: cannot write the output: [Errno 28] No space left on device\n"


UNDER_A_MEMORY_LIMIT = """
import os, resource, sys
limit = int(sys.argv.pop(1))
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.argv[0] = 'kafkalog'
try:
    from kafkalog_tools.cli import main
    main()
finally:
    with open('/proc/self/status') as status:  # the address space it took, for the next run's limit
        peak = next(line.split()[1] for line in status if line.startswith('VmPeak:'))
    os.write(2, f'VmPeak {peak}\\n'.encode())
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc (Linux) to size the limit")
@pytest.mark.parametrize("command", [("verify",), ("dump", "-d", "--format", "json")], ids=lambda c: c[0])
def test_out_of_memory_is_told_as_such_not_as_corrupt_data(tmp_path, command):
    """A gzip batch of 256 MiB of zeros, read where the address space leaves 64 MiB beyond what a
    run on the same partition without it took: zlib cannot allocate, and that is the machine's
    shortage (exit 2, said so), not a payload that "does not decompress" (exit 1, data blamed)."""
    import subprocess
    import sys

    from kafkalog_tools.crc import crc32c
    from kafkalog_tools.formats.record_batch import HEADER_SIZE, build_batch, build_record
    from kafkalog_tools.fuzz.bombs import gzip_zeros

    partition = tmp_path / "bombs-0"
    partition.mkdir()
    segment = partition / "00000000000000000000.log"
    segment.write_bytes(build_batch(0, [build_record(0, 0, b"k", b"v")]))
    environment = {k: v for k, v in os.environ.items() if k != "KAFKALOG_DEBUG"} | {"KAFKALOG_BULK": "never"}

    def run(limit: int) -> tuple[int, str, int]:
        proc = subprocess.run([sys.executable, "-c", UNDER_A_MEMORY_LIMIT, str(limit), *command, str(partition)],
                              capture_output=True, env=environment, timeout=300)
        err, _, peak = proc.stderr.decode().rpartition("VmPeak ")
        return proc.returncode, err, int(peak.split()[0]) * 1024

    code, err, clean_peak = run(0)
    assert (code, err) == (0, "")
    header = bytearray(build_batch(1, [b""])[:HEADER_SIZE])  # a batch of gzip zeros: records never reached
    payload = gzip_zeros(256)
    header[8:12] = (HEADER_SIZE - 12 + len(payload)).to_bytes(4, "big")
    header[21:23] = (1).to_bytes(2, "big")
    header[17:21] = crc32c(bytes(header[21:]) + payload).to_bytes(4, "big")
    segment.write_bytes(segment.read_bytes() + header + payload)
    code, err, _ = run(clean_peak + (64 << 20))
    assert (code, err) == (2, out_of_memory() + "\n")

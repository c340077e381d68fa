"""The compiled kernels' cache: a run never waits for a build it did not ask for, concurrent first
runs build once (in the background, under a lock), and the cache is loaded only from a directory
and file that may be trusted with code. Real processes, a real build, real files."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkalog_tools.native import bulk_scan
from kafkalog_tools.native import cache as kernel_cache
from kafkalog_tools.formats.record_batch import build_batch, build_record

pytest.importorskip("numba", reason="the kernels are built by numba (an install requirement)")

NOTICE = "the compiled kernels are not built yet"
PROBE = """
import json, sys
from kafkalog_tools.verify import Verification
from kafkalog_tools.native import bulk_scan
run = Verification([sys.argv[1]])
findings = [f.to_json() for f in run]
print(json.dumps({"findings": findings, "summary": run.summary.to_json(), "numba": "numba" in sys.modules,
                  "numpy": "numpy" in sys.modules, "kernels": bool(bulk_scan.kernel.cache_info().currsize) and bulk_scan.kernel() is not None}))
"""
"""A verify in a fresh process: what it found, and whether it loaded the kernels, numba or numpy."""


def _partition(directory: Path, batches: int = 40_000) -> Path:
    """Enough one-record batches that `auto` wants the kernels (~0.25 s batch by batch)."""
    directory.mkdir()
    one = build_batch(0, [build_record(0, 0, None, b"x" * 100)])
    (directory / f"{0:020d}.log").write_bytes(one * batches)
    return directory


def _environment(cache: Path, **more: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("KAFKALOG_DEBUG", bulk_scan.MODE_VARIABLE)}
    return environment | {kernel_cache.CACHE_VARIABLE: str(cache)} | more


def _probe(partition: Path, environment: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PROBE, str(partition)], env=environment, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finished(process: subprocess.Popen) -> tuple[dict, str]:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    return json.loads(out), err


def _wait_for_the_build(cache: Path, seconds: float = 900) -> str:
    """The build log once it says the build ended."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        logs = list(cache.glob("*.build.log"))
        text = logs[0].read_text() if logs else ""
        if " built in " in text or "Error" in text:
            return text
        time.sleep(1)
    pytest.fail(f"the background build did not end within {seconds} s: {text!r}")


def test_two_first_runs_at_once_read_batch_by_batch_while_one_background_build_runs(tmp_path):
    partition = _partition(tmp_path / "p-0")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    environment = _environment(cache, **{kernel_cache.NICE_VARIABLE: "0"})  # nice 19 starves it on a busy machine
    reference, _ = _finished(_probe(partition, environment | {bulk_scan.MODE_VARIABLE: "never"}))
    first = [_probe(partition, environment) for _ in range(2)]
    for process in first:
        result, err = _finished(process)
        assert not result["kernels"] and not result["numba"]  # it did not build them, nor wait for a build
        assert not result["numpy"]  # nor pay for importing numpy (~0.1 s) to find that nothing is cached
        assert result["findings"] == reference["findings"] and result["summary"] == reference["summary"]
        assert err.count(NOTICE) == 1 and "build-kernels" in err
    # a foreground load meanwhile (what `kafkalog build-kernels` does) waits for the builder's lock
    waiting = subprocess.run([sys.executable, "-c", "import sys; from kafkalog_tools.native import loader; "
                              "loader.load(); print('numba' in sys.modules)"],
                             env=environment, capture_output=True, text=True, timeout=900, check=True)
    log = _wait_for_the_build(cache)
    assert waiting.stdout.split() == ["False"]  # it found them built, never built them itself
    assert log.count("building the bulk kernels") == 1 and log.count(" built in ") == 1, log
    assert len(list(cache.glob("*.o"))) == 1 and not list(cache.glob(".bulk_kernel.*.tmp"))
    after, err = _finished(_probe(partition, environment))
    assert after["kernels"] and not after["numba"] and NOTICE not in err
    assert after["findings"] == reference["findings"] and after["summary"] == reference["summary"]
    command = subprocess.run([sys.executable, "-m", "kafkalog_tools", "build-kernels"], env=environment,
                             capture_output=True, text=True, timeout=600)
    assert command.returncode == 0 and "bulk kernels ready" in command.stderr and str(cache) in command.stderr


def test_always_asks_for_the_kernels_so_builds_them_in_the_foreground(tmp_path):
    """KAFKALOG_BULK=always (the bulk path's tests and the differential fuzzer use it) waits for a build."""
    partition = _partition(tmp_path / "p-0", 10)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    result, err = _finished(_probe(partition, _environment(cache, **{bulk_scan.MODE_VARIABLE: "always"})))
    assert result["kernels"] and result["numba"] and NOTICE not in err
    assert len(list(cache.glob("*.o"))) == 1 and not list(cache.glob("*.build.log"))


@pytest.fixture
def cached_copy(tmp_path, monkeypatch) -> Path:
    """The suite's built kernels (tests/conftest.py) copied into a cache directory of the test's own."""
    source = kernel_cache.cached_path()
    assert source is not None, "tests/conftest.py builds the kernels up front"
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    shutil.copy(source, cache / source.name)
    os.chmod(cache / source.name, 0o600)
    monkeypatch.setenv(kernel_cache.CACHE_VARIABLE, str(cache))
    monkeypatch.setenv("KAFKALOG_DEBUG", "1")
    return cache / source.name


def _loads(capsys) -> tuple[bool, str]:
    found = kernel_cache._cached(kernel_cache.cache_key()) is not None
    return found, capsys.readouterr().err


def test_a_cache_directory_writable_by_others_is_refused(cached_copy, capsys):
    assert _loads(capsys) == (True, "")
    for mode in (0o770, 0o707, 0o777):
        os.chmod(cached_copy.parent, mode)
        found, err = _loads(capsys)
        assert not found and f"not loading the kernel cache {cached_copy}: its directory is writable by others" in err
    os.chmod(cached_copy.parent, 0o755)
    assert _loads(capsys) == (True, "")


def test_a_cache_file_writable_by_others_owned_by_another_user_or_a_symlink_is_refused(cached_copy, capsys):
    os.chmod(cached_copy, 0o620)
    found, err = _loads(capsys)
    assert not found and "the file is writable by others (mode 620)" in err
    os.chmod(cached_copy, 0o644)
    assert _loads(capsys) == (True, "")
    if os.geteuid() == 0:  # only root can give a file away
        os.chown(cached_copy, 65534, 65534)
        found, err = _loads(capsys)
        assert not found and "the file is owned by uid 65534" in err
        os.chown(cached_copy, 0, 0)
    elsewhere = cached_copy.parent.parent / "elsewhere.o"
    cached_copy.rename(elsewhere)
    cached_copy.symlink_to(elsewhere)
    assert _loads(capsys)[0] is False  # a link may point anywhere: never followed


def test_a_half_written_cache_file_is_never_loaded(cached_copy, capsys):
    whole = cached_copy.read_bytes()
    cached_copy.write_bytes(whole[:len(whole) // 2])  # what a reader would see mid-write without the rename
    assert _loads(capsys)[0] is False
    cached_copy.write_bytes(whole)
    assert _loads(capsys)[0] is True


def test_a_run_beside_an_untrusted_cache_neither_loads_it_nor_starts_a_build(cached_copy, tmp_path):
    """Nowhere trusted to keep kernels in: the run reads batch by batch, says why with KAFKALOG_DEBUG,
    and starts no builder whose work no run could load."""
    os.chmod(cached_copy.parent, 0o775)
    partition = _partition(tmp_path / "p-0")
    result, err = _finished(_probe(partition, _environment(cached_copy.parent, KAFKALOG_DEBUG="1")))
    assert not result["kernels"] and "its directory is writable by others" in err and NOTICE not in err
    assert not list(cached_copy.parent.glob("*.build.log")) and not list(cached_copy.parent.glob("*.lock"))


@pytest.mark.parametrize("entry", ["./kafkalog_tools.zip", "{zip}"])
def test_the_cache_key_is_the_same_when_the_package_is_imported_from_a_zip(tmp_path, entry):
    """Spark ships the package as a zip (`session.ship_package`); a standalone cluster's executors
    import it as "./kafkalog_tools.zip", relative to their work dir. The key (and so the kernels
    they may load) is the installed package's, however the zip is named on the path."""
    import zipfile

    package = Path(kernel_cache.__file__).resolve().parents[1]
    archive = tmp_path / "kafkalog_tools.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(package.rglob("*.py")):
            out.write(path, path.relative_to(package.parent).as_posix())
    probe = (f"import sys; sys.path.insert(0, {entry.format(zip=archive)!r})\n"
             "from kafkalog_tools.native import cache\nprint(cache.__file__); print(cache.cache_key())")
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    imported_from, key = result.stdout.split()
    assert imported_from == f"{entry.format(zip=archive)}/kafkalog_tools/native/cache.py"
    assert key == kernel_cache.cache_key()

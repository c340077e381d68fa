"""Kafka's own code as a test oracle: `kafka-oracle` (Kafka 4.0's classes behind a small command
line, `../shared/tools/kafka-oracle`) and Kafka's `kafka-dump-log`.

`Oracle` keeps one JVM (`kafka-oracle serve`) for many commands: it starts in about 0.4 s, then a
`parse` takes milliseconds. `unavailable()` says why the oracle cannot run here (no `java`, no
oracle), for a test to skip with that reason.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

HOME_VARIABLE = "KAFKALOG_KAFKA_ORACLE"
"""Where the oracle lies, if not at `../shared/tools/kafka-oracle` beside the project."""
PROJECT_ROOT = Path(__file__).resolve().parents[2]
HEAP = "-Xmx3g"
"""The oracle's and kafka-dump-log's JVM heap (unless KAFKA_ORACLE_HEAP_OPTS, KAFKA_HEAP_OPTS say
otherwise; their defaults are 512 MiB and 256 MiB). Kafka's legacy deep iterator
allocates an inner message's declared size (up to 2 GiB) before it finds the bytes missing and ends
the message set there: with the oracle's default 512 MiB, Kafka's answer on such a wrapper was an
OutOfMemoryError, which says what the JVM had, not what Kafka reads (seed 20261124, case 84). The
heap is committed only as it is used."""


def home() -> Path:
    return Path(os.environ.get(HOME_VARIABLE) or PROJECT_ROOT.parent / "shared" / "tools" / "kafka-oracle")


def unavailable() -> str | None:
    """Why Kafka's code cannot run here, or None when it can."""
    if shutil.which("java") is None:
        return "no `java` on PATH: Kafka's own code (the oracle) cannot run"
    script = home() / "bin" / "kafka-oracle"
    if not os.access(script, os.X_OK):
        return f"Kafka oracle not found at {home()} (set {HOME_VARIABLE} to its location)"
    return None


class OracleError(RuntimeError):
    """The oracle itself failed (not Kafka throwing on an input: that is an answer)."""


class Oracle:
    """One `kafka-oracle serve` JVM: `oracle("parse", path)` -> (exit code, JSON objects)."""

    def __init__(self, location: Path | None = None):
        self.home = location or home()
        self.process = self._start()
        self.calls = 0
        self.restarts = 0
        """JVMs started afresh to ask again after an OutOfMemoryError."""

    def _start(self) -> subprocess.Popen:
        return subprocess.Popen([os.fspath(self.home / "bin" / "kafka-oracle"), "serve"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, bufsize=1, env={"KAFKA_ORACLE_HEAP_OPTS": HEAP, **os.environ})

    def __enter__(self) -> "Oracle":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __call__(self, *argv: str, out_dir: Path | None = None) -> tuple[int, list[dict]]:
        """Kafka's answer. One that holds an OutOfMemoryError is asked again of a fresh JVM: a long-lived
        one's heap holds what earlier calls left, and an array of an inner message's declared size (up
        to 2 GiB, `HEAP`) then may not fit where it fits in a fresh one (seed 22036, parse case 1253).
        A fresh JVM's OutOfMemoryError stands. `out_dir`: the command's OUT_DIR, which must be empty,
        emptied of what the first answer wrote before asking again (else the second answer was "OUT_DIR
        is not empty": seed 24055, recover case 75)."""
        code, objects, out_of_memory = self._ask(argv)
        if out_of_memory:
            self.close()
            self.process = self._start()
            self.restarts += 1
            if out_dir is not None:
                shutil.rmtree(out_dir, ignore_errors=True)
            code, objects, _ = self._ask(argv)
        return code, objects

    def _ask(self, argv) -> tuple[int, list[dict], bool]:
        if self.process.poll() is not None:
            raise OracleError(f"the oracle JVM has ended (status {self.process.returncode})")
        self.process.stdin.write(json.dumps([os.fspath(a) for a in argv]) + "\n")
        self.process.stdin.flush()
        self.calls += 1
        objects = []
        out_of_memory = False
        for line in self.process.stdout:
            answer = json.loads(line)
            if answer.get("type") == "done":
                return answer["exitCode"], objects, out_of_memory
            out_of_memory |= "java.lang.OutOfMemoryError" in line
            objects.append(answer)
        raise OracleError(f"the oracle JVM ended during {argv[0]} (status {self.process.wait()})")

    def close(self) -> None:
        """Stop the JVM: `quit`, then a kill if it does not end within 10 s."""
        if self.process.poll() is None:
            try:
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()

    def dump_log(self, files: list[Path], flags: list[str]) -> dict[str, tuple[str, bool]]:
        """Kafka's `kafka-dump-log FLAGS --files F1,F2,...` (one JVM for many files): per file its
        output and whether Kafka's tool threw on it (it stops there; the files after it run again)."""
        results: dict[str, tuple[str, bool]] = {}
        pending = [os.fspath(f) for f in files]
        while pending:
            done = subprocess.run([os.fspath(self.home / "bin" / "kafka-dump-log"), *flags, "--files", ",".join(pending)],
                                  capture_output=True, env={"KAFKA_HEAP_OPTS": HEAP, **os.environ})
            # decoded without newline translation: a payload's "\r" is part of its line
            chunks = _split_by_file(done.stdout.decode("utf-8", "replace"), pending)
            for name, text in chunks.items():
                results[name] = (text, False)
            if done.returncode == 0:
                missing = [f for f in pending if f not in chunks]
                if missing:
                    raise OracleError(f"kafka-dump-log printed nothing for {missing[0]}")
                break
            if not chunks:
                raise OracleError(f"kafka-dump-log failed before its first file: {done.stderr[-500:].decode(errors='replace')}")
            last = list(chunks)[-1]
            results[last] = (chunks[last], True)
            pending = pending[pending.index(last) + 1:]
        return results


def _split_by_file(stdout: str, files: list[str]) -> dict[str, str]:
    """kafka-dump-log's output cut at its `Dumping FILE` lines, in the order of `files`."""
    chunks: dict[str, str] = {}
    order = iter(files)
    current = None
    lines = stdout.split("\n")
    for n, line in enumerate(lines):
        line += "\n" if n + 1 < len(lines) else ""  # the last one as printed (a line Kafka was printing when it threw)
        if line.startswith("Dumping "):
            expected = next(order, None)
            if line.rstrip("\n") == f"Dumping {expected}":
                current = expected
                chunks[current] = ""
        if current is not None:
            chunks[current] += line
    return chunks

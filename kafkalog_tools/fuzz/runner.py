"""Running fuzz cases: worker processes, in-process command runs, and what counts as a failure.

Cases run in worker subprocesses (`python -m kafkalog_tools.fuzz --worker`) whose address space is
capped (RLIMIT_AS), so a runaway allocation is a MemoryError we see, not a machine that swaps.
Inside a worker every command line runs in-process through `cli.main` - no interpreter start per
run - with KAFKALOG_DEBUG set, so an internal error escapes as the exception it is rather than as
the CLI's one-line "internal error" message. A run fails when:

- anything but SystemExit escapes (a traceback), or the exit code is not 0, 1 or 2;
- it runs longer than the time limit (an interval timer interrupts it in the worker; a worker
  that stops answering is killed by the parent and the case counts as a hang);
- a read-only command changed, created or removed anything in the case's tree;
- output mentions a file that is reachable only through a symbolic link out of the tree;
- (differential runs) the compiled bulk path and the per-batch path disagree: every command line
  runs twice, with KAFKALOG_BULK=never and =always, from the same files, and the exit code,
  stdout, stderr and the files written must be the same. In odd-numbered cases the compiled path
  also reads every segment as it reads a big one (`_as_if_big`).

The parent hands out case numbers, collects one JSON line per run and per case, and keeps going
after a failure (a killed worker is replaced).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import queue
import random
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

OK_EXIT_CODES = (0, 1, 2)
DEFAULT_TIME_LIMIT = 20.0
DEFAULT_MEMORY_LIMIT = 3 << 29  # 1.5 GiB: a bomb costs about --max-decompressed (128 MiB) per inflating thread
WATCHDOG_GRACE = 10.0


class Hang(BaseException):
    """Raised by the interval timer inside a run that took too long (not an Exception, so that no
    `except Exception` in the code under test swallows it)."""


# ---------------------------------------------------------------------------------------------
# Inside a worker
# ---------------------------------------------------------------------------------------------


def listing(root: Path) -> dict[bytes, tuple]:
    """`root` and every entry under it (links not followed, FIFOs not opened): kind, size, mtime,
    mode and content hash, to show that a read-only command changed and created nothing."""
    found = {os.fsencode(root): ("dir", os.stat(root).st_mtime_ns)}
    for directory, dirnames, filenames in os.walk(os.fsencode(root)):
        for name in dirnames + filenames:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[path] = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                try:
                    with open(path, "rb") as handle:
                        digest = hashlib.sha256(handle.read()).hexdigest()
                except PermissionError:  # a mode-000 case file when not running as root
                    digest = "unreadable"
                found[path] = ("file", info.st_size, info.st_mtime_ns, stat.S_IMODE(info.st_mode), digest)
            else:
                found[path] = (stat.S_IFMT(info.st_mode), info.st_mtime_ns)
    return found


def copy_tree(source: Path, target: Path) -> None:
    """A copy of a case tree as it is: links as links, FIFOs as FIFOs, modes kept."""
    source, target = os.fsencode(source), os.fsencode(target)
    os.mkdir(target)
    for directory, dirnames, filenames in os.walk(source):
        into = os.path.join(target, os.path.relpath(directory, source))
        for name in dirnames + filenames:
            path, copy = os.path.join(directory, name), os.path.join(into, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(path), copy)
            elif stat.S_ISDIR(info.st_mode):
                os.mkdir(copy)
            elif stat.S_ISFIFO(info.st_mode):
                os.mkfifo(copy)
            else:
                shutil.copyfile(path, copy)
                os.chmod(copy, stat.S_IMODE(info.st_mode))


@dataclass
class RunResult:
    argv: list[str]
    code: int | None
    seconds: float
    failure: str | None = None
    detail: str = ""

    def to_json(self) -> dict:
        return vars(self)


def run_in_process(argv: list[str], time_limit: float) -> tuple[RunResult, str, str]:
    """`kafkalog ARGV` through the real entry point; (result, stdout, stderr)."""
    from ..cli import main

    out, err = io.BytesIO(), io.BytesIO()
    # as under a UTF-8 locale: stdout strict, stderr backslashreplace
    stdout = io.TextIOWrapper(out, encoding="utf-8", errors="strict", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = stdout, stderr
    code, failure, detail = 0, None, ""
    started = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, time_limit)
    try:
        main(argv)
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code
    except Hang:
        code, failure, detail = None, "hang", f"still running after {time_limit} s"
    except MemoryError:
        code, failure, detail = None, "memory", traceback.format_exc(limit=-8)
    except BaseException:  # noqa: B036 - anything at all escaping the CLI is the bug we look for
        code, failure, detail = None, "traceback", traceback.format_exc(limit=-12)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout, sys.stderr = saved
    seconds = time.perf_counter() - started
    text_out = out.getvalue().decode("utf-8", "replace")
    text_err = err.getvalue().decode("utf-8", "replace")
    if failure is None and code not in OK_EXIT_CODES:
        failure, detail = "exit-code", f"exit code {code!r}: {text_err[-500:]}"
    if failure is None and ("Traceback (most recent call last)" in text_out + text_err):
        failure, detail = "traceback", text_err[-2000:] or text_out[-2000:]
    return RunResult(argv, code, round(seconds, 4), failure, detail), text_out, text_err


def _on_alarm(signum, frame):
    raise Hang()


@contextlib.contextmanager
def _debugging():
    """KAFKALOG_DEBUG set while a case runs (an internal error then escapes as the exception it is),
    as it was before once it has run: a worker in a test's own process leaves later tests as it found them."""
    before = os.environ.get("KAFKALOG_DEBUG")
    os.environ["KAFKALOG_DEBUG"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("KAFKALOG_DEBUG", None)
        else:
            os.environ["KAFKALOG_DEBUG"] = before


class Worker:
    """Builds and runs cases by number; the same (seed, number, seed files) always give the same case."""

    def __init__(self, run_seed: int, corpus: list[Path], work_dir: Path, time_limit: float,
                 differential: bool = False):
        from ..cli import cli
        from . import cases

        self.run_seed = run_seed
        self.time_limit = time_limit
        self.differential = differential
        self.work_dir = work_dir
        self.seeds = cases.collect_seeds(corpus)
        self.synthesized = cases.synthesize(work_dir / "synthesized")
        context = click_context(cli)
        # the subcommands that read a PATH: build-kernels has no input to fuzz, and its output says how
        # long it took, which differs between two runs of a differential pair
        commands = {name: cli.get_command(context, name) for name in cli.list_commands(context)}
        self.commands = {name: command for name, command in commands.items()
                         if any(param.param_type_name == "argument" for param in command.params)}
        signal.signal(signal.SIGALRM, _on_alarm)

    def run_case(self, number: int, on_start=None, keep: Path | None = None) -> dict:
        from . import cases

        rng = random.Random(f"{self.run_seed}:{number}")
        self.as_if_big = number % 2 == 1
        root = self.work_dir / f"case-{number}"
        case = cases.build_case(rng, number, self.seeds, self.synthesized, root)
        runs = []
        try:
            with _debugging():
                for k, invocation in enumerate(cases.invocations(rng, case, self.commands)):
                    if on_start is not None:
                        on_start(invocation.argv)
                    runs.append(self._run(invocation, case, k))
        finally:
            cases.make_readable(root)
            if keep is not None:
                shutil.copytree(root, keep / root.name, symlinks=True, dirs_exist_ok=True)
            shutil.rmtree(root, ignore_errors=True)
        return {"case": number, "description": case.description, "runs": [run.to_json() for run in runs],
                "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}

    def _run(self, invocation, case, k: int) -> RunResult:
        if not self.differential:
            return self._run_once(invocation, case, k)[0]
        argv = self._with_clock(invocation.argv)
        out_dir = case.root / "out"
        earlier = case.root / f"out-before-{k}"  # what earlier runs wrote there: both runs start from it
        if out_dir.exists():
            copy_tree(out_dir, earlier)
        seen = {}
        for mode in BULK_MODES:
            if mode != BULK_MODES[0]:
                shutil.rmtree(out_dir, ignore_errors=True)
                if earlier.exists():
                    copy_tree(earlier, out_dir)
            big = self.as_if_big and mode != BULK_MODES[0]
            with _bulk_mode(mode), (_as_if_big() if big else contextlib.nullcontext()):
                result, seen[mode] = self._run_once(invocation, case, k, argv)
            if result.failure is not None:
                result.detail = f"with {_bulk_variable()}={mode}{AS_IF_BIG * big}: {result.detail}"
                return result
        shutil.rmtree(earlier, ignore_errors=True)
        difference = first_difference(*(seen[mode] for mode in BULK_MODES))
        if difference is not None:
            result.failure = "bulk-differs"
            result.detail = (f"{_bulk_variable()}={BULK_MODES[0]} and ={BULK_MODES[1]}{AS_IF_BIG * self.as_if_big} "
                             f"differ: {difference}")
        return result

    def _with_clock(self, argv: list[str]) -> list[str]:
        """A command that reads the clock gets --now where the case drew none: the two runs of a
        differential pair would otherwise see different times and say so."""
        from . import cases

        takes_now = any(param.name == "now" for param in self.commands[argv[0]].params)
        return argv[:1] + ["--now", str(cases.T0)] + argv[1:] if takes_now and "--now" not in argv else argv

    def _run_once(self, invocation, case, k: int, argv: list[str] | None = None) -> tuple[RunResult, Outcome]:
        from . import cases

        argv = invocation.argv if argv is None else argv
        if invocation.writes:  # a writer gets its own copy of the tree
            copy = case.root / f"copy-{k}"
            shutil.rmtree(copy, ignore_errors=True)
            copy_tree(case.log_dir, copy)
            argv = [a.replace(os.fspath(case.log_dir), os.fspath(copy)) for a in argv]
        before = None if invocation.writes else listing(case.log_dir)
        result, out, err = run_in_process(argv, self.time_limit)
        if result.failure is None and before is not None:
            after = listing(case.log_dir)
            if after != before:
                result.failure, result.detail = "wrote", f"a read-only command changed: {changed(before, after)[:5]}"
        if result.failure is None and cases.OUTSIDE in out + err and not any(cases.OUTSIDE in a for a in argv):
            result.failure, result.detail = "followed-link", "output names a file outside the tree"
        written = {}
        if self.differential:  # (a read-only command's tree is unchanged: checked above)
            for root in [case.root / f"copy-{k}"] * invocation.writes + [case.root / "out"]:
                written.update(contents(root))
        return result, Outcome(result.code, out, _without_debug(err), written)


def _without_debug(stderr: str) -> str:
    """What a user sees on stderr: KAFKALOG_DEBUG's lines (set only so that an internal error escapes)
    say how a run went, which differs between the two of a pair by design: which path read what, how
    the partitions fell to verify's worker processes (the first free takes the next)."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("kafkalog: debug: "))


BULK_MODES = ("never", "always")
"""A differential pair: the per-batch path alone (the reference), then the compiled kernels wherever
they can take over (KAFKALOG_BULK)."""


@dataclass
class Outcome:
    """What a run left for a differential comparison."""
    code: int | None
    stdout: str
    stderr: str
    files: dict[bytes, tuple]


def contents(root: Path) -> dict[bytes, tuple]:
    """`listing` without modification times: what two runs that wrote the same files share."""
    if not os.path.lexists(root):
        return {}
    return {path: _timeless(entry) for path, entry in listing(root).items()}


def _timeless(entry: tuple) -> tuple:
    kind = entry[0]
    if kind == "file":
        return (kind, entry[1], *entry[3:])  # size, mode, digest
    return entry if kind == "link" else (kind,)


def first_difference(reference: Outcome, other: Outcome) -> str | None:
    """Where two outcomes first part, said in a line; None when they are the same."""
    if reference.code != other.code:
        return f"exit code {reference.code} vs {other.code}"
    for stream in ("stdout", "stderr"):
        ours, theirs = getattr(reference, stream), getattr(other, stream)
        if ours != theirs:
            ours, theirs = ours.splitlines(keepends=True), theirs.splitlines(keepends=True)
            line = next((n for n, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
            shown = [lines[line][:300] if line < len(lines) else "(no line)" for lines in (ours, theirs)]
            return f"{stream} line {line + 1}: {shown[0]!r} vs {shown[1]!r}"
    if reference.files != other.files:
        return f"files written differ: {changed(reference.files, other.files)[:5]}"
    return None


def changed(before: dict[bytes, tuple], after: dict[bytes, tuple]) -> list[str]:
    """The paths of two listings that one lacks or that differ, sorted."""
    return sorted(os.fsdecode(path) for path in before.keys() | after.keys() if before.get(path) != after.get(path))


def _bulk_variable() -> str:
    from ..native.bulk_scan import MODE_VARIABLE

    return MODE_VARIABLE


AS_IF_BIG = " (every segment read as a big one)"


@contextlib.contextmanager
def _as_if_big():
    """The compiled path as it reads a big segment, at any size: batch tables that keep only the
    rows the index checks reach, and verify's plain batches folded into stretches, three at a time,
    in calls of 600 bytes (so that stretches start and end often)."""
    from ..native import bulk_scan
    from ..verify import segment

    saved = segment.SPARSE_TABLE_ROWS, bulk_scan.Reader.CHUNK, bulk_scan.Reader.STEP
    segment.SPARSE_TABLE_ROWS, bulk_scan.Reader.CHUNK, bulk_scan.Reader.STEP = 0, 3, 600
    try:
        yield
    finally:
        segment.SPARSE_TABLE_ROWS, bulk_scan.Reader.CHUNK, bulk_scan.Reader.STEP = saved


@contextlib.contextmanager
def _bulk_mode(mode: str):
    """KAFKALOG_BULK set for one run, then put back."""
    saved = os.environ.get(_bulk_variable())
    os.environ[_bulk_variable()] = mode
    try:
        yield
    finally:
        if saved is None:
            del os.environ[_bulk_variable()]
        else:
            os.environ[_bulk_variable()] = saved


def click_context(group):
    import click

    return click.Context(group, info_name="kafkalog")


def worker_main(run_seed: int, corpus: list[Path], time_limit: float, memory_limit: int,
                differential: bool = False) -> None:
    """The worker loop: a case number per stdin line; JSON lines out ("start" per run, then the case)."""
    if memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nothing but our own lines reaches the parent's pipe
    with tempfile.TemporaryDirectory(prefix="kafkalog-fuzz-") as work:
        worker = Worker(run_seed, corpus, Path(work), time_limit, differential)
        channel.write(json.dumps({"ready": True, "seeds": len(worker.seeds),
                                  "commands": list(worker.commands)}) + "\n")
        for line in sys.stdin:
            number = int(line)
            result = worker.run_case(number, on_start=lambda argv: channel.write(
                json.dumps({"start": argv}) + "\n"))
            channel.write(json.dumps(result) + "\n")


# ---------------------------------------------------------------------------------------------
# The parent
# ---------------------------------------------------------------------------------------------


@dataclass
class Report:
    run_seed: int
    differential: bool = False
    cases: int = 0
    runs: int = 0
    seconds: float = 0.0
    seeds: int = 0
    commands: list[str] = field(default_factory=list)
    runs_per_command: dict[str, int] = field(default_factory=dict)
    exit_codes: dict[str, int] = field(default_factory=dict)
    failures: list[dict] = field(default_factory=list)
    max_rss_mib: float = 0.0
    slowest: tuple[float, list[str]] = (0.0, [])

    def to_json(self) -> dict:
        return vars(self)


class _WorkerProcess:
    def __init__(self, index: int, argv: list[str], lines: queue.Queue):
        self.index = index
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True, bufsize=1)
        self.case: int | None = None
        self.argv: list[str] = []
        self.last_beat = time.monotonic()
        self.ready = False
        threading.Thread(target=self._read, args=(lines,), daemon=True).start()

    def _read(self, lines: queue.Queue) -> None:
        for line in self.proc.stdout:
            lines.put((self, line))
        lines.put((self, None))

    def send(self, number: int) -> None:
        self.case, self.argv, self.last_beat = number, [], time.monotonic()
        self.proc.stdin.write(f"{number}\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()[-3000:].decode("utf-8", "replace")


def run(run_seed: int, *, cases: int | None = None, minutes: float | None = None, corpus: list[Path] = (),
        workers: int = 1, time_limit: float = DEFAULT_TIME_LIMIT, memory_limit: int = DEFAULT_MEMORY_LIMIT,
        first_case: int = 0, on_case=None, differential: bool = False) -> Report:
    """Run cases `first_case`, `first_case + 1`, ... until `cases` are done or `minutes` have passed
    (`differential`: each command line twice, per-batch and bulk, compared; see the module's doc)."""
    if cases is None and minutes is None:
        raise ValueError("give cases or minutes")
    started = time.monotonic()
    deadline = None if minutes is None else started + minutes * 60
    report = Report(run_seed, differential)
    lines: queue.Queue = queue.Queue()
    argv = [sys.executable, "-m", "kafkalog_tools.fuzz", "--worker", "--seed", str(run_seed),
            "--time-limit", str(time_limit), "--memory-limit", str(memory_limit)] + ["--differential"] * differential
    for root in corpus:
        argv += ["--corpus", os.fspath(root)]
    pool = [_WorkerProcess(i, argv, lines) for i in range(workers)]
    next_case = first_case
    end_case = None if cases is None else first_case + cases

    def more() -> bool:
        return (end_case is None or next_case < end_case) and (deadline is None or time.monotonic() < deadline)

    def dispatch(worker: _WorkerProcess) -> None:
        nonlocal next_case
        if more():
            worker.send(next_case)
            next_case += 1
        else:
            worker.case = None

    try:
        while any(w.case is not None or not w.ready for w in pool):
            try:
                worker, line = lines.get(timeout=0.5)
            except queue.Empty:
                worker, line = None, None
            if worker is not None and line is not None:
                message = json.loads(line)
                worker.last_beat = time.monotonic()
                if message.get("ready"):
                    worker.ready = True
                    report.seeds, report.commands = message["seeds"], message["commands"]
                    dispatch(worker)
                elif "start" in message:
                    worker.argv = message["start"]
                else:
                    _record(report, message)
                    if on_case is not None:
                        on_case(report, message)
                    dispatch(worker)
            for index, w in enumerate(pool):
                dead = worker is w and line is None
                stuck = w.case is not None and time.monotonic() - w.last_beat > time_limit + WATCHDOG_GRACE
                if not (dead or stuck) or (dead and w.case is None and w.ready):
                    continue
                failure = "hang" if stuck else "worker-died"
                w.kill()
                detail = (f"no answer for {time_limit + WATCHDOG_GRACE:.0f} s" if stuck
                          else f"worker ended with status {w.proc.returncode}: {w.stderr_tail()}")
                if w.case is not None:
                    report.cases += 1
                    report.runs += 1
                    report.failures.append({"case": w.case, "argv": w.argv, "failure": failure, "detail": detail})
                replacement = _WorkerProcess(index, argv, lines)
                pool[index] = replacement
                if not w.ready:
                    raise RuntimeError(f"a fuzz worker could not start ({detail})")
    finally:
        for w in pool:
            if w.proc.poll() is None:
                w.proc.stdin.close()
                try:
                    w.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    w.kill()
    report.seconds = round(time.monotonic() - started, 1)
    return report


def _record(report: Report, message: dict) -> None:
    report.cases += 1
    report.max_rss_mib = max(report.max_rss_mib, round(message["maxrss_kib"] / 1024, 1))
    for run_result in message["runs"]:
        report.runs += 1
        command = run_result["argv"][0]
        report.runs_per_command[command] = report.runs_per_command.get(command, 0) + 1
        code = str(run_result["code"])
        report.exit_codes[code] = report.exit_codes.get(code, 0) + 1
        if run_result["seconds"] > report.slowest[0]:
            report.slowest = (run_result["seconds"], run_result["argv"])
        if run_result["failure"]:
            report.failures.append({"case": message["case"], "description": message["description"], **run_result})

"""The bulk kernels' object code: built once by numba (`kernels.build`), kept on disk, found again
without importing numpy, numba or LLVM (`loader` maps it).

The cache sits beside the package (`__pycache__`, as numba's own did), else in the user's cache
directory, or where KAFKALOG_KERNEL_CACHE points. Its key covers the kernel sources, where and when
llvmlite and numba were installed, and the CPU (from /proc/cpuinfo where there is one, so that a
run never imports llvmlite); a file whose digest does not match is ignored, never loaded. The cache
is code that gets executed: a directory or file owned by another user (root aside) or writable by
others is never loaded from (KAFKALOG_DEBUG says so).

A build costs ~2 min of CPU, which no run should wait for unasked: `kafkalog build-kernels` (and
KAFKALOG_BULK=always) builds in the foreground; otherwise a run that finds nothing cached reads
batch by batch and `build_in_background` leaves the build to a detached process at the lowest
priority. Such a run never imports numpy (~0.1 s): this module finds out that nothing is cached.
A lock file beside the cache makes concurrent builders build once; entries are renamed into place
whole.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import platform
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

CACHE_VARIABLE = "KAFKALOG_KERNEL_CACHE"
"""A directory for the compiled kernels, instead of `__pycache__` or ~/.cache/kafkalog-tools."""
_SOURCES = ("kernels.py", "columns.py", "loader.py", "cache.py", "elf_object.py", os.path.join("..", "formats", "record_batch.py"),
            os.path.join("..", "formats", "legacy.py"), os.path.join("..", "codecs", "lz4_codec.py"))
"""What the machine code depends on: the kernels, their column layout, this ABI and loader, the
batch and legacy message schemas, the LZ4 frame constants."""
_MAGIC = b"kafkalog-tools bulk kernels 1\n"
_X86_64 = platform.machine().lower() in ("x86_64", "amd64")
"""Where the object is built position-independent, for `elf_object` to lay out."""


def code(build: bool = True) -> bytes | None:
    """The kernels' object code from the cache; where none is cached, built now (`build`: importing
    numba, ~2 min) or None. A build takes the cache's lock first, so one already under way in
    another process is waited for, not repeated. A build the compiler refused is remembered under
    the same key, so that each later run does not spend ~20 s and ~280 MB finding that out again (a
    numba that no longer compiles these sources): the key moves, and the build is tried again, when
    the sources, numba, llvmlite or the CPU change."""
    key = cache_key()
    found = _cached(key)
    if found is None:
        if not build:
            return None
        with _build_lock(key, wait=True):
            found = _cached(key) or _build_and_store(key)  # another process may have built it meanwhile
    return found


def _build_and_store(key: str) -> bytes:
    refused = _cached(key, _REFUSED)
    if refused is not None:
        raise RuntimeError(f"bulk kernels: the compiler refused them before: {refused.decode(errors='replace')}")
    try:
        code = _build()
    except (ImportError, MemoryError, OSError):
        raise  # no numba, or short of something: worth another try next time
    except Exception as exc:  # the compiler's answer for this key: the same next time
        _store(key, f"{type(exc).__name__}: {exc}"[:_REFUSAL_TEXT].encode(), _REFUSED)
        raise
    _store(key, code)
    return code


# ---------------------------------------------------------------------------------------------
# Building where it costs no one: in the background, one process at a time
# ---------------------------------------------------------------------------------------------

STARTED, UNDER_WAY, CANNOT = "started", "under way", "cannot"
"""What `build_in_background` did: started a builder, found one at work, or cannot build here
(no numba, a refusal cached, no directory to keep the kernels in that runs may load from)."""
_builder = None
"""The builder this process started: held so that it is never collected (and warned of) while it runs."""


def build_in_background() -> str:
    """Start a detached, low-priority process that builds the kernels into the cache and outlives
    this one, unless one is at work already (it holds the lock) or it could not help."""
    global _builder
    key = cache_key()
    if importlib.util.find_spec("numba") is None or _cached(key, _REFUSED) is not None:
        return CANNOT
    with _build_lock(key, wait=False) as held:
        if held is None:
            return CANNOT
        if not held:
            return UNDER_WAY
    root = str(Path(__file__).resolve().parents[2])  # the package's parent: a directory, or a zip (Spark's)
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))))
    log = _log_path(key)
    with open(log, "ab") as output:
        _builder = subprocess.Popen([sys.executable, "-c", _BUILDER], env=environment, cwd="/", stdin=subprocess.DEVNULL,
                                    stdout=output, stderr=output, start_new_session=True)
    return STARTED


NICE_VARIABLE = "KAFKALOG_BUILD_NICE"
"""The background build's nice value, 0-19 (default 19: the lowest priority). At 19 it runs only
when the machine has CPU to spare: on a busy machine it may take many minutes."""
_BUILDER = """
import os
try:
    nice = min(max(int(os.environ.get("%s", "19")), 0), 19)
except ValueError:
    nice = 19
try:  # Linux: the scheduler weighs sessions (autogroups) against each other; a nice value counts only inside one
    with open("/proc/self/autogroup", "w") as autogroup:
        autogroup.write(str(nice))
except OSError:
    pass
os.nice(nice)  # before any import: those cost CPU too
from kafkalog_tools.native import cache
cache.build_as_builder()
""" % NICE_VARIABLE
"""The builder's program: a low priority for its session and itself, then the build."""


def build_as_builder() -> None:
    """The background builder's work (`_BUILDER` set the lowest priority): under the lock (another
    builder at work: nothing to do), unless the kernels were cached meanwhile. Its output goes to
    the build log beside the cache."""
    key = cache_key()
    with _build_lock(key, wait=False) as held:
        if not held or _cached(key) is not None:
            return
        started = time.monotonic()
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid {os.getpid()}: building the bulk kernels", flush=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba's
            _build_and_store(key)
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid {os.getpid()}: built in {time.monotonic() - started:.1f} s",
              flush=True)


@contextlib.contextmanager
def _build_lock(key: str, wait: bool):
    """An exclusive lock on the cache's lock file for `key`: yields True when held, False when
    another process holds it (not `wait`ing), None where there is no directory to keep kernels in
    (then no build could be kept either)."""
    directory = _store_dir()
    if directory is None:
        yield None
        return
    handle = os.open(directory / _file_name(key, ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(handle)  # (releases the lock)


def _log_path(key: str) -> Path:
    return _store_dir() / _file_name(key, ".build.log")


def _build() -> bytes:
    from llvmlite import binding

    from . import kernels

    return kernels.build(target_machine(binding))


def target_machine(binding):
    """This CPU's, optimising fully; on x86-64 for position-independent code in the small code
    model, which `elf_object` lays out and MCJIT maps alike."""
    binding.initialize_native_target()
    binding.initialize_native_asmprinter()
    model = {"reloc": "pic", "codemodel": "small"} if _X86_64 else {"codemodel": "jitdefault"}
    return binding.Target.from_triple(binding.get_process_triple()).create_target_machine(
        cpu=binding.get_host_cpu_name(), features=binding.get_host_cpu_features().flatten(), opt=3, **model)


def cache_key() -> str:
    digest = hashlib.sha256(_MAGIC)
    for part in (_installed("numba"), _installed("llvmlite"), sys.platform, platform.machine(), _cpu()):
        digest.update(repr(part).encode() + b"\0")
    for name in _SOURCES:  # through the loader: inside a zip (Spark's addPyFile) there is no file to open
        digest.update(__loader__.get_data(_source_path(name)))
    return digest.hexdigest()


def _source_path(name: str) -> str:
    """`name`, relative to this module, as its loader finds it. Inside a zip only the member's name
    is normalised: a standalone cluster's executors import the zip as "./kafkalog_tools.zip", which
    the zip's loader must be given back as it is (normalised, "kafkalog_tools.zip/..." is no member)."""
    path = os.path.join(os.path.dirname(__file__), name)
    archive = getattr(__loader__, "archive", None)
    if archive and path.startswith(archive + os.sep):
        return os.path.join(archive, os.path.normpath(path[len(archive) + 1:]))
    return os.path.normpath(path)


def _installed(package: str):
    """Where and when `package` was installed, without importing it."""
    spec = importlib.util.find_spec(package)
    return (spec.origin, os.stat(spec.origin).st_mtime_ns) if spec and spec.origin else None


_CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags",  # x86
               "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "Features")  # arm
"""What /proc/cpuinfo says of the first CPU that decides which instructions the code may use."""


def _cpu() -> tuple:
    """The CPU the code is built for: from Linux's /proc/cpuinfo (~0.2 ms), else from LLVM."""
    fields = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if not line.strip():
                    break  # the end of the first CPU's block
                key, _, value = line.partition(":")
                if key.strip() in _CPU_FIELDS:
                    fields.append((key.strip(), value.strip()))
    except OSError:
        pass
    if fields:
        return tuple(sorted(fields))
    from llvmlite import binding

    return binding.get_host_cpu_name(), binding.get_host_cpu_features().flatten()


def cache_dirs() -> list[Path]:
    chosen = os.environ.get(CACHE_VARIABLE)
    if chosen:
        return [Path(chosen)]
    here = Path(__file__).parent
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kafkalog-tools"
    return [here / "__pycache__", user] if here.is_dir() else [user]


_REFUSED, _REFUSAL_TEXT = ".refused", 2000
"""The cache entry of a build the compiler refused (what it said, cut to so many characters)."""


def _file_name(key: str, suffix: str = ".o") -> str:
    return f"bulk_kernel.{key[:32]}{suffix}"


def _cached(key: str, suffix: str = ".o") -> bytes | None:
    """The entry for `key`, from the first directory that has one whole (its digest checked) and
    that may be trusted with code (`_untrusted`); a refusal is told with KAFKALOG_DEBUG."""
    header = _MAGIC + key.encode() + b"\n"
    for directory in cache_dirs():
        path = directory / _file_name(key, suffix)
        try:
            handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        with os.fdopen(handle, "rb") as cached:
            reason = _untrusted(os.stat(directory), "its directory") or _untrusted(os.fstat(handle), "the file")
            if reason:
                _debug(f"not loading the kernel cache {path}: {reason}")
                continue
            data = cached.read()
        digest, code = data[len(header):len(header) + 32], data[len(header) + 32:]
        if data.startswith(header) and hashlib.sha256(code).digest() == digest:
            return code
    return None


def cached_path() -> Path | None:
    """Where the kernels for this installation are cached, if they are."""
    key = cache_key()
    return next((path for path in (d / _file_name(key) for d in cache_dirs()) if path.is_file()), None)


def _untrusted(status: os.stat_result, what: str) -> str | None:
    """Why a cache file or directory may not be trusted with code that gets executed, as ssh
    refuses a loose key file: owned by someone other than this user or root, or writable by others
    (group or world). None when it may."""
    user = os.geteuid() if hasattr(os, "geteuid") else status.st_uid
    if status.st_uid not in (user, 0):
        return f"{what} is owned by uid {status.st_uid}, not by this user ({user}) or root"
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{what} is writable by others (mode {stat.S_IMODE(status.st_mode):o})"
    return None


def _debug(message: str) -> None:
    if os.environ.get("KAFKALOG_DEBUG"):
        print(f"kafkalog: debug: {message}", file=sys.stderr, flush=True)


def _store_dir() -> Path | None:
    """The first cache directory that exists or can be made, is writable, and may be trusted."""
    for directory in cache_dirs():
        try:
            directory.mkdir(mode=0o755, parents=True, exist_ok=True)
            reason = _untrusted(os.stat(directory), "it")
        except OSError:
            continue
        if reason:
            _debug(f"not keeping kernels in {directory}: {reason}")
        elif os.access(directory, os.W_OK):
            return directory
    return None


def _store(key: str, code: bytes, suffix: str = ".o") -> None:
    """Write to a temp file (mode 600) and rename it into place, so that no run reads it half
    written; where there is no directory for it, built again next time."""
    data = _MAGIC + key.encode() + b"\n" + hashlib.sha256(code).digest() + code
    directory = _store_dir()
    if directory is None:
        return
    try:
        handle, temp = tempfile.mkstemp(dir=directory, prefix=".bulk_kernel.", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temp, directory / _file_name(key, suffix))
        except BaseException:
            os.unlink(temp)
            raise
    except OSError:
        pass  # full: built again next time

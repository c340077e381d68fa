"""Is a broker running on a log dir? The answer decides how the end of an active segment reads.

Source: core/.../log/LogManager.scala (lockLogDirs) and server-common/.../util/FileLock.java: a
broker creates `<log.dir>/.lock` and holds `FileChannel.tryLock()` on it - an exclusive POSIX
record lock (fcntl) on Linux - for as long as it runs; the kernel drops the lock when the process
ends, however it ends. `.kafka_cleanshutdown` only says how the last run ended.

We ask the kernel whether any process holds a lock on `.lock`: F_OFD_GETLK (or F_GETLK where the
kernel has no open-file-description locks) on a descriptor opened read-only. The query takes no
lock and the file is never created. `running`: a lock is held; `stopped`: `.lock` exists and
nobody holds it; `unknown`: there is no `.lock` (no broker ever ran here, or this is a copy) or it
cannot be probed. A log dir is read as `live` when it is running, `offline` otherwise;
`--live`/`--offline` say so instead (an rsync copy of a running broker's dir is not locked).

POSIX record locks belong to a process, and closing any descriptor of the file drops the locks its
process holds on it: a process holding the lock itself (a test) must not probe its own `.lock`.
"""
from __future__ import annotations

import fcntl
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

RUNNING, STOPPED, UNKNOWN = "running", "stopped", "unknown"
LIVE, OFFLINE = "live", "offline"
LOCK_FILE = ".lock"

_FLOCK = struct.Struct("hhqqi4x")
"""struct flock: l_type, l_whence, l_start, l_len, l_pid (and the tail padding of its alignment)."""
_GET_LOCK = getattr(fcntl, "F_OFD_GETLK", fcntl.F_GETLK)
"""F_OFD_GETLK also reports a lock this very process holds through another descriptor."""


@dataclass(frozen=True)
class BrokerState:
    log_dir: str
    broker: str
    """running, stopped or unknown: what the lock says."""
    reason: str
    read_as: str
    """live or offline: `broker`, unless --live/--offline said otherwise."""

    @property
    def live(self) -> bool:
        return self.read_as == LIVE

    def to_json(self) -> dict:
        return {"log_dir": self.log_dir, "broker": self.broker, "read_as": self.read_as, "reason": self.reason}

    def describe(self) -> str:
        forced = "" if (self.broker == RUNNING) == self.live else f", read as {self.read_as}"
        return f"broker {self.broker} ({self.reason}){forced}"


def probe_lock(log_dir: str | os.PathLike) -> tuple[str, str]:
    """(running | stopped | unknown, why) for the broker lock of `log_dir`."""
    path = os.path.join(log_dir, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return UNKNOWN, "no .lock: no broker has run on this directory, or it is a copy"
    except OSError as exc:
        return UNKNOWN, f".lock cannot be opened to probe its lock: {exc.strerror}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return UNKNOWN, ".lock is not a regular file"
        query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)  # any lock on any byte conflicts with this
        try:
            answer = fcntl.fcntl(fd, _GET_LOCK, query)
        except OSError as exc:
            return UNKNOWN, f"the lock on .lock cannot be probed: {exc.strerror}"
        lock_type, _, _, _, pid = _FLOCK.unpack(answer)
        if lock_type == fcntl.F_UNLCK:
            return STOPPED, "nobody holds the lock on .lock"
        holder = f"process {pid}" if pid > 0 else "a process"
        return RUNNING, f"{holder} holds the lock on .lock"
    finally:
        os.close(fd)


class BrokerStates:
    """The state of each log dir, probed once per run; `override` is --live/--offline (or None)."""

    def __init__(self, override: str | None = None, probe=probe_lock):
        self.override = override
        self.probe = probe
        self.known: dict[str, BrokerState] = {}

    def of(self, log_dir: str | os.PathLike) -> BrokerState:
        key = os.path.abspath(log_dir)
        state = self.known.get(key)
        if state is None:
            broker, reason = self.probe(key)
            read_as = self.override or (LIVE if broker == RUNNING else OFFLINE)
            state = self.known[key] = BrokerState(key, broker, reason, read_as)
        return state

    def of_partition(self, partition_dir: str | os.PathLike) -> BrokerState:
        return self.of(Path(os.path.abspath(partition_dir)).parent)

    def of_file(self, path: str | os.PathLike) -> BrokerState:
        """A file in a partition dir (a segment given on its own)."""
        return self.of_partition(os.path.dirname(os.path.abspath(path)))

"""Partitions checked by worker processes alongside this one. A log dir's partitions are independent
work (stage 1 and stage 2 alike), so each worker takes partitions from the end of the list while
this process takes them from the front and streams their findings as it goes; a worker's partition
comes back as a `PartitionOutcome` and is replayed in its place, so the findings come in exactly the
order one process gives them.

A worker that dies (killed, out of memory) loses nothing: the partitions it had taken and not
reported are checked here. An exception a worker meets is raised here when its partition's turn
comes, as one process would raise it there.
"""
from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from ..formats.logdir import PartitionDir, Segment
from ..native import bulk_scan
from ..native.bulk_scan import usable_cpus  # noqa: F401 - verify's worker count reads it here
from .partition import PartitionOutcome, partition_outcome
from .segment import check_segment

PARALLEL_MIN_BYTES = 64 << 20
"""Unless --jobs says otherwise, smaller scans stay in one process: starting a worker (~0.3 s of
CPU: an interpreter and the imports) costs more than it saves."""


@dataclass(frozen=True)
class PartitionJob:
    partition: PartitionDir
    named: list[Segment] | None
    """The segments named, or None for all of them."""
    live: bool
    """A broker may be appending to its active segment (`broker.BrokerState.live`)."""
    log_bytes: int


class PartitionPool:
    """`workers` processes checking `jobs` from the back while the caller checks them from the front:
    `take(i)` says whether the caller checks job i itself, `outcome(i)` waits for a worker's."""

    def __init__(self, jobs: list[PartitionJob], workers: int, deep: bool, on_progress=None,
                 start_method: str | None = None):
        """`start_method`: multiprocessing's, or None to choose (`_start_method`)."""
        self.start_method = start_method or _start_method()
        context = multiprocessing.get_context(self.start_method)
        self.jobs = jobs
        self.on_progress = on_progress
        self.claims = context.Array("q", [0, len(jobs) - 1])
        """[front, back]: the next job the caller takes, the next one a worker takes."""
        self.owners = context.Array("i", len(jobs), lock=False)
        """Which worker (1-based) took each job; guarded by `claims`' lock."""
        self.outcomes: dict[int, PartitionOutcome | BaseException | None] = {}
        self.received = 0
        self.processes, self.connections = [], {}
        self.finished: set[int] = set()
        """Workers whose pipe has closed: every outcome they sent has been received."""
        bulk_scan.SCANNING_PROCESSES = workers + 1  # this one too
        for number in range(1, workers + 1):
            receiving, sending = context.Pipe(duplex=False)
            process = context.Process(target=_work, args=(jobs, deep, self.claims, self.owners, number, sending,
                                                          workers + 1),
                                      daemon=True, name=f"kafkalog-verify-{number}")
            process.start()
            sending.close()  # the worker's end: once it exits, reading ours ends
            self.processes.append(process)
            self.connections[receiving] = number

    def take(self, index: int) -> bool:
        """Job `index` (the caller goes through them in order) for the caller, unless a worker has it."""
        with self.claims.get_lock():
            if index > self.claims[1]:
                return False
            self.claims[0] = index + 1
            return True

    def outcome(self, index: int) -> PartitionOutcome | None:
        """A worker's outcome of job `index`, waiting for it; None when that worker died first or
        could not send it (the caller then checks the partition itself)."""
        while index not in self.outcomes:
            if self.owners[index] in self.finished:
                return None
            self.receive(timeout=None)
        found = self.outcomes.pop(index)
        if isinstance(found, BaseException):
            raise found
        return found  # None: its outcome could not be sent

    def receive(self, timeout: float | None = 0) -> None:
        """Take in whatever outcomes the workers have sent (waiting up to `timeout` for one)."""
        for connection in wait(list(self.connections), timeout):
            try:
                index, found = connection.recv()
            except (EOFError, OSError):
                self.finished.add(self.connections.pop(connection))
                connection.close()
                continue
            self.outcomes[index] = found
            self.received += found is not None
            if self.on_progress is not None and isinstance(found, PartitionOutcome):
                self.on_progress(self.jobs[index].log_bytes)

    def close(self) -> None:
        if os.environ.get("KAFKALOG_DEBUG"):
            print(f"kafkalog: debug: verify: {self.received} of {len(self.jobs)} partitions checked by "
                  f"{len(self.processes)} worker process(es) ({self.start_method})", file=sys.stderr, flush=True)
        for process in self.processes:
            if process.is_alive():
                process.terminate()
            process.join()
        for connection in self.connections:
            connection.close()
        self.connections.clear()
        bulk_scan.SCANNING_PROCESSES = 1


def _start_method() -> str:
    """fork where this process runs no other thread (a worker is then ready in milliseconds, where
    spawn's fresh interpreter and imports take ~0.3 s of CPU); else spawn, as a thread (a progress
    bar's, a decompression pool's) may hold a lock that fork would copy held."""
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


def _work(jobs: list[PartitionJob], deep: bool, claims, owners, number: int, results: Connection,
          processes: int) -> None:
    """A worker: take jobs from the back until the ends meet, sending each one's outcome."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle; it stops us
    bulk_scan.TELL_BUILDING = False  # the process the user started says it
    bulk_scan.SCANNING_PROCESSES = processes  # (a spawned worker starts with the module's own)
    while True:
        with claims.get_lock():
            front, back = claims[0], claims[1]
            if front > back:
                break
            claims[1] = back - 1
            owners[back] = number
        job = jobs[back]
        try:
            found = partition_outcome(job.partition, job.named, deep,
                                      functools.partial(_check_segment, deep=deep, live=job.live))
        except BaseException as exc:  # noqa: BLE001 - raised where one process would raise it
            found = _sendable(exc)
        try:
            results.send((back, found))
        except OSError:  # the caller is gone
            return
        except Exception:  # noqa: BLE001 - an outcome that does not pickle: the caller checks it itself
            results.send((back, None))
        if isinstance(found, BaseException):
            break
    results.close()


def _check_segment(segment: Segment, is_active: bool, on_batch, deep: bool, live: bool):
    return check_segment(segment, is_active, deep, None, on_batch, live, outlines=True)


def _sendable(exc: BaseException) -> BaseException:
    """The exception itself when it survives pickling, else a RuntimeError with its traceback."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc.with_traceback(None)
    except Exception:  # noqa: BLE001 - any pickling failure
        return RuntimeError("".join(traceback.format_exception(exc)))

"""The layout of a log directory (`log.dirs` entry) and its partition directories.

Source: storage/.../log/LogFileUtils.java, core/.../log/LocalLog.scala, LogManager.scala. A log dir
holds `meta.properties`, the offset checkpoint files, `.kafka_cleanshutdown`, `.lock` and one
directory per partition: `topic-partition`, or `topic-partition.<uuid>-delete|-future|-stray`.
A partition dir holds segments `<20-digit base offset>.log|.index|.timeindex|.txnindex`, producer
snapshots `<offset>.snapshot`, `leader-epoch-checkpoint`, `partition.metadata`, and leftovers
(`.deleted`, `.cleaned`, `.swap`) of operations a crash interrupted. KRaft's metadata partition also
holds `<offset>-<epoch>.checkpoint` snapshots and `quorum-state`.

Walking never follows a symbolic link out of the given tree: links are listed, not entered.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..broker import probe_lock
from ..errors import InputError

PARTITION_DIR = re.compile(
    r"^(?P<topic>.+)-(?P<partition>\d+)(?:\.(?P<unique_id>[0-9a-fA-F]{32})-(?P<suffix>delete|future|stray))?$"
)
SEGMENT_FILE = re.compile(r"^(?P<offset>-?\d{20})(?P<suffix>\.log|\.index|\.timeindex|\.txnindex)$")
SNAPSHOT_FILE = re.compile(r"^(?P<offset>-?\d{20})\.snapshot$")
KRAFT_SNAPSHOT_FILE = re.compile(r"^(?P<offset>\d{20})-(?P<epoch>\d{10})\.checkpoint$")
LEFTOVER_SUFFIXES = (".deleted", ".cleaned", ".swap")
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
"""Written by a broker that stopped cleanly (its loader then trusts the logs it finds)."""
PARTITION_KNOWN_FILES = ("leader-epoch-checkpoint", "partition.metadata", "quorum-state")
LOGDIR_KNOWN_FILES = (
    "meta.properties",
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
    CLEAN_SHUTDOWN,
    ".lock",
    "bootstrap.checkpoint",
)


@dataclass
class Segment:
    base_offset: int
    log: Path | None = None
    index: Path | None = None
    timeindex: Path | None = None
    txnindex: Path | None = None


@dataclass
class PartitionDir:
    path: Path
    topic: str
    partition: int
    suffix: str | None = None
    segments: list[Segment] = field(default_factory=list)
    snapshots: list[Path] = field(default_factory=list)
    kraft_snapshots: list[Path] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    """leader-epoch-checkpoint, partition.metadata, quorum-state, when present."""
    leftovers: list[Path] = field(default_factory=list)
    unknown: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def topic_partition(self) -> tuple[str, int]:
        return self.topic, self.partition


@dataclass
class LogDir:
    path: Path
    partitions: list[PartitionDir] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    unknown: list[tuple[Path, str]] = field(default_factory=list)


def parse_partition_dir_name(name: str) -> tuple[str, int, str | None] | None:
    match = PARTITION_DIR.match(name)
    if not match:
        return None
    return match["topic"], int(match["partition"]), match["suffix"]


class LocalFiles:
    """How a layout is read: from the local filesystem. (`--spark` reads Hadoop URIs through Spark's
    JVM with a subclass: `kafkalog_tools.spark.remote.HadoopLayout`.)"""

    def scandir(self, path: Path) -> list:
        """The entries of a directory, sorted by name, as `os.DirEntry`s (name, is_symlink(),
        is_dir(follow_symlinks=False), is_file(follow_symlinks=False))."""
        try:
            with os.scandir(path) as entries:
                return sorted(entries, key=lambda e: e.name)
        except OSError as exc:
            raise InputError(f"cannot list directory: {exc.strerror}", path=path) from None

    def is_dir(self, path: Path) -> bool:
        """Whether a path given is a directory (a link to one counts); InputError if it cannot be read."""
        try:
            path.lstat()
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", path=path) from None
        return path.is_dir()

    def size(self, path: Path) -> int:
        """A file's size; 0 when it cannot be read (whoever opens it reports why)."""
        try:
            return os.stat(path).st_size
        except OSError:
            return 0

    def broker_lock(self, log_dir: Path) -> tuple[str, str]:
        """Whether a broker holds the lock of `log_dir` (`broker.probe_lock`)."""
        return probe_lock(log_dir)


LOCAL = LocalFiles()


def read_partition_dir(path: Path, files: LocalFiles = LOCAL) -> PartitionDir:
    path = Path(path)
    parsed = parse_partition_dir_name(path.name)
    topic, partition, suffix = parsed if parsed else (path.name, -1, None)
    result = PartitionDir(path, topic, partition, suffix)
    segments: dict[int, Segment] = {}
    for entry in files.scandir(path):
        file = path / entry.name
        if entry.is_symlink():
            result.unknown.append((file, "symbolic link, not followed"))
            continue
        if entry.is_dir(follow_symlinks=False):
            result.unknown.append((file, "directory inside a partition directory"))
            continue
        if not entry.is_file(follow_symlinks=False):
            result.unknown.append((file, "not a regular file (a FIFO, socket or device)"))
            continue
        if match := SEGMENT_FILE.match(entry.name):
            segment = segments.setdefault(int(match["offset"]), Segment(int(match["offset"])))
            setattr(segment, match["suffix"][1:], file)
        elif SNAPSHOT_FILE.match(entry.name):
            result.snapshots.append(file)
        elif KRAFT_SNAPSHOT_FILE.match(entry.name):
            result.kraft_snapshots.append(file)
        elif entry.name in PARTITION_KNOWN_FILES:
            result.files[entry.name] = file
        elif entry.name.endswith(LEFTOVER_SUFFIXES) or entry.name.endswith(".checkpoint.part"):
            result.leftovers.append(file)
        else:
            result.unknown.append((file, "not a file Kafka keeps in a partition directory"))
    result.segments = [segments[offset] for offset in sorted(segments)]
    return result


def looks_like_partition_dir(path: Path, files: LocalFiles = LOCAL) -> bool:
    if parse_partition_dir_name(path.name):
        return True
    try:
        return any(SEGMENT_FILE.match(e.name) for e in files.scandir(path))
    except InputError:
        return False


def read_log_dir(path: Path, files: LocalFiles = LOCAL) -> LogDir:
    path = Path(path)
    result = LogDir(path)
    for entry in files.scandir(path):
        item = path / entry.name
        if entry.is_symlink():
            result.unknown.append((item, "symbolic link, not followed"))
        elif entry.is_dir(follow_symlinks=False):
            if parse_partition_dir_name(entry.name) or looks_like_partition_dir(item, files):
                result.partitions.append(read_partition_dir(item, files))
            else:
                result.unknown.append((item, "directory that is not a partition directory"))
        elif not entry.is_file(follow_symlinks=False):
            result.unknown.append((item, "not a regular file (a FIFO, socket or device)"))
        elif entry.name in LOGDIR_KNOWN_FILES:
            result.files[entry.name] = item
        else:
            result.unknown.append((item, "not a file Kafka keeps in a log directory"))
    result.partitions.sort(key=lambda p: (p.topic, p.partition, p.suffix or ""))
    return result


def classify(path: str | os.PathLike, files: LocalFiles = LOCAL) -> LogDir | PartitionDir | Path:
    """A user-given path as a log dir, a partition dir, or a single file."""
    path = Path(path)
    if files.is_dir(path):
        if looks_like_partition_dir(path, files):
            return read_partition_dir(path, files)
        return read_log_dir(path, files)
    return path

"""Hadoop URIs (`hdfs://`, `s3a://`, `gs://`, `file://`) with `--spark`.

A file:// URI names the same path on every node: it is read in place, as that path, and only
reported by its URI (`spark.kafkalog.stageFileUris=true` takes it down the way of the others).
The driver resolves any other URI through Spark's own Hadoop FileSystem (the JVM's, with the
cluster's configuration: one call, is it there, a directory?) and lists it through `pyarrow.fs`;
the directories in it - a log dir's partitions - are listed by the executors, through the pyarrow
filesystem they read with; the driver classifies what is listed with `formats.logdir`, exactly as a
local path. Every file listed gets a local path under a staging root, the same path on the driver and on every
executor. Whoever reads a file - an executor its segment's files, the driver the checkpoints -
first copies it there from its URI in bounded chunks through `pyarrow.fs`, runs the library on the
copy (mmap, as for any local file), then deletes the copy: a segment is never held in memory, and a
task's disk holds one segment's files at a time. Findings and rows name the URIs.
"""
from __future__ import annotations

import os
import random
import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple
from urllib.parse import unquote, urlsplit

from ..broker import UNKNOWN
from ..errors import InputError
from ..formats.logdir import LocalFiles
from . import INSTALL_HINT
from .session import task_errors
from .uri import is_uri

COPY_CHUNK = 8 << 20
STAGING_ATTEMPTS = 200
"""Tries to create a staged copy's directory while other tasks on the node remove emptied ones: on
thousands of small segments two tasks can collide many times in a row (8 tries were seen to fail)."""
STAGING_DIR_CONF = "spark.kafkalog.stagingDir"
"""Where staged copies go, on the driver and on every executor (default: the driver's temp dir)."""
STAGE_FILE_URIS_CONF = "spark.kafkalog.stageFileUris"
"""`true`: list and stage file:// URIs as any other URI. By default a file:// URI is read in place -
it names the same path on every node, so a copy is a waste - and only its name is kept."""
LISTING_JOB_MIN_DIRS = 32
"""From this many directories in a listed tree (its partition dirs), executors list them in a Spark
job; fewer, the driver lists them itself, with the same function (a job costs ~1 s). Spark's own
parallel partition discovery starts at the same number."""
LISTING_TASKS_PER_CORE = 4

_HDFS = ("pyarrow's HadoopFileSystem, which loads libhdfs through JNI: a Hadoop install on every node with "
         "JAVA_HOME, HADOOP_HOME (or ARROW_LIBHDFS_DIR) and CLASSPATH=$(hadoop classpath --glob)",
         "nothing more: Spark's Hadoop client reads hdfs://")
SCHEMES = {
    "file": ("file", "pyarrow", "nothing"),
    "hdfs": ("hdfs", *_HDFS),
    "viewfs": ("viewfs", *_HDFS),
    "s3a": ("s3", "pyarrow's S3FileSystem with AWS credentials on every node (environment variables - "
                  "spark.executorEnv.AWS_ACCESS_KEY_ID etc. -, ~/.aws or an instance role; AWS_ENDPOINT_URL "
                  "for another S3 store)",
            "hadoop-aws on Spark's classpath: --spark-conf "
            "spark.jars.packages=org.apache.hadoop:hadoop-aws:<the Hadoop version of Spark's jars>"),
    "gs": ("gs", "pyarrow's GcsFileSystem with Google credentials on every node "
                 "(GOOGLE_APPLICATION_CREDENTIALS or the instance's service account)",
           "Google's gcs-connector (hadoop3) jar on Spark's classpath (spark.jars)"),
}
"""Hadoop scheme: (pyarrow's scheme, what Python on the nodes needs to read it, what Spark's JVM
needs to resolve it)."""


class RemoteFile(NamedTuple):  # a tuple: a listing makes one per file, ~10x faster than a frozen dataclass
    local: str
    """Where the copy goes: the same path on the driver and on every executor."""
    uri: str
    mtime_ms: int
    root: str
    """The staging root (emptied directories are removed up to and including it)."""


class _Entry(NamedTuple):
    """A listed name, as `logdir` reads an `os.DirEntry`."""

    name: str
    directory: bool
    regular: bool

    def is_symlink(self) -> bool:
        return False  # followed by the listing, as Hadoop's FileSystems follow them

    def is_dir(self, follow_symlinks: bool = True) -> bool:
        return self.directory

    def is_file(self, follow_symlinks: bool = True) -> bool:
        return self.regular


class HadoopLayout(LocalFiles):
    """The paths given, with each URI listed (two levels: a log dir through Spark's Hadoop
    FileSystem, its partition dirs through pyarrow) and standing in as a local path under the staging root;
    other paths are read locally, as `LocalFiles` does."""

    def __init__(self, spark, paths: Iterable[str]):
        self.spark = spark
        self.paths = list(paths)
        self.root: str | None = None
        self.roots: list[tuple[str, str]] = []
        """(local path, URI) of each listed directory given (or a file's parent)."""
        self._dirs: dict[str, list[_Entry] | InputError] = {}
        self._files: dict[str, tuple[int, RemoteFile]] = {}
        self._missing: dict[str, InputError] = {}
        self._roots_pattern = None
        """(roots it covers, the pattern `to_uri` replaces them with, local -> URI)."""
        self.in_place: list[str] = []
        """The local paths of file:// URIs read in place."""
        staging_files = str(spark.conf.get(STAGE_FILE_URIS_CONF, "false")).lower() == "true"
        self.local_paths = [path if not is_uri(path)
                            else self._in_place(path) if _scheme(path) == "file" and not staging_files
                            else self._list(number, path) for number, path in enumerate(self.paths)]
        """The paths given, with a local stand-in for each URI: hand these to the library."""

    # -- logdir's view ------------------------------------------------------------------------

    def scandir(self, path: Path) -> list:
        listed = self._dirs.get(str(path))
        if listed is None:
            return super().scandir(path)
        if isinstance(listed, InputError):
            raise listed
        return listed

    def is_dir(self, path: Path) -> bool:
        key = str(path)
        if key in self._missing:
            raise self._missing[key]
        if key in self._dirs:
            return True
        return False if key in self._files else super().is_dir(path)

    def size(self, path: Path) -> int:
        known = self._files.get(str(path))
        return known[0] if known else super().size(path)

    def broker_lock(self, log_dir: Path) -> tuple[str, str]:
        behind = [self.root] if self.root is not None else []
        if any(os.path.commonpath([root, os.path.abspath(log_dir)]) == root for root in behind + self.in_place):
            return UNKNOWN, "behind a URI: its lock cannot be probed from here"
        return super().broker_lock(log_dir)

    def dir_uri(self, path: str) -> str:
        """`to_uri` for a directory, also the parent of a directory given as a URI."""
        for local, uri in self.roots:
            if path == os.path.dirname(local):
                return uri.rstrip("/").rsplit("/", 1)[0]
        return self.to_uri(path)

    # -- staging and naming ---------------------------------------------------------------------

    def remote_files(self, paths: Iterable[Path | str | None]) -> tuple[RemoteFile, ...]:
        """The listed files among `paths` (local paths need no staging)."""
        return tuple(self._files[str(p)][1] for p in paths if p is not None and str(p) in self._files)

    def to_uri(self, text: str | None) -> str | None:
        """`text` with every staged or in-place path named by its URI (in one pass, the longest
        root first: one root may lie inside another)."""
        if text is None or not self.roots:
            return text
        if self._roots_pattern is None or self._roots_pattern[0] != len(self.roots):
            by_local = dict(self.roots)
            pattern = re.compile(r"(?<![\w/:.%~-])(" + "|".join(
                re.escape(local) for local in sorted(by_local, key=len, reverse=True)) + ")")
            self._roots_pattern = (len(self.roots), pattern, by_local)
        _, pattern, by_local = self._roots_pattern
        return pattern.sub(lambda match: by_local[match.group(1)], text)

    def close(self) -> None:
        """Remove the driver's staging root (executors remove their copies as they go)."""
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- listing through the JVM ----------------------------------------------------------------

    def _in_place(self, uri: str) -> str:
        """A file:// URI's own path, named by the URI in what is reported."""
        uri = uri.rstrip("/") or uri
        local = unquote(urlsplit(uri).path).rstrip("/") or "/"
        is_dir = os.path.isdir(local)
        self.roots.append((local, uri) if is_dir else (os.path.dirname(local), uri.rsplit("/", 1)[0]))
        self.in_place.append(local if is_dir else os.path.dirname(local))
        return local

    def _list(self, number: int, uri: str) -> str:
        scheme = _scheme(uri)
        if scheme not in SCHEMES:
            raise InputError(f"{scheme}:// is not readable with --spark; readable: "
                             f"{', '.join(s + '://' for s in SCHEMES)} (or mount the data and give a local path)",
                             path=uri)
        filesystem(uri)  # what the executors will need, checked here once
        if self.root is None:
            conf = self.spark.sparkContext.getConf()
            self.root = tempfile.mkdtemp(prefix="kafkalog-stage-", dir=conf.get(STAGING_DIR_CONF, None))
        uri = uri.rstrip("/") or uri
        jvm = self.spark._jvm
        hadoop_path = jvm.org.apache.hadoop.fs.Path(uri)
        name = hadoop_path.getName() or "root"
        try:
            fs = hadoop_path.getFileSystem(self.spark._jsc.hadoopConfiguration())
            status = fs.getFileStatus(hadoop_path)
        except Exception as exc:  # py4j's Py4JJavaError: missing, no FileSystem for the scheme, denied
            local = f"{self.root}/{number}/{name}"
            needs = SCHEMES[scheme][2]
            hint = "" if needs == "nothing" or "ClassNotFound" not in str(exc) else f"; resolving it needs {needs}"
            self._missing[local] = InputError(
                f"cannot read through Spark's Hadoop FileSystem: {_java_message(exc)}{hint}", path=uri)
            return local
        if status.isDirectory():
            local = f"{self.root}/{number}/{name}"
            self.roots.append((local, uri))
            self._list_dir(local, uri, depth=2)
            return local
        parent = hadoop_path.getParent()
        local_parent = f"{self.root}/{number}/{parent.getName() or 'root'}"
        self.roots.append((local_parent, uri.rsplit("/", 1)[0]))
        self._list_dir(local_parent, uri.rsplit("/", 1)[0], depth=1)
        return f"{local_parent}/{name}"

    def _list_dir(self, local: str, uri: str, depth: int) -> None:
        """`uri`, listed here, and at depth 2 every directory in it (`_list_below`), through pyarrow:
        the JVM only resolved the URI given (Hadoop's local listing costs ~40 us of CPU per entry, its
        Py4J hand-over as much again; pyarrow's a few)."""
        [(_, listed)] = list_dirs([uri])
        if isinstance(listed, str):
            self._dirs[local] = InputError(f"cannot list directory: {listed}", path=uri)
            return
        subdirs = self._add(local, uri, listed)
        if depth < 2 or not subdirs:
            return
        by_uri = {f"{uri}/{name}": f"{local}/{name}" for name in subdirs}
        for child_uri, child_listed in self._list_below(list(by_uri)):
            if isinstance(child_listed, str):
                self._dirs[by_uri[child_uri]] = InputError(f"cannot list directory: {child_listed}", path=child_uri)
            else:
                self._add(by_uri[child_uri], child_uri, child_listed)

    def _list_below(self, uris: list[str]) -> list[tuple[str, list[tuple] | str]]:
        """`list_dirs` of the directories in a listed tree (a log dir's partitions): by the driver
        for a few, else by the executors, a share each (on HDFS a call per directory to the
        NameNode, made from every executor at once)."""
        if len(uris) < LISTING_JOB_MIN_DIRS:
            return list_dirs(uris)
        sc = self.spark.sparkContext
        with task_errors():
            return sc.parallelize(uris, min(len(uris), LISTING_TASKS_PER_CORE * sc.defaultParallelism)) \
                .mapPartitions(list_dirs).collect()

    def _add(self, local: str, uri: str, listed: list[tuple]) -> list[str]:
        """Record one directory's listing; the names of its subdirectories."""
        entries, subdirs = [], []
        for name, directory, regular, length, mtime_ms in listed:
            entries.append(_Entry(name, directory, regular))
            child_local = f"{local}/{name}"
            if regular:
                self._files[child_local] = (length, RemoteFile(child_local, f"{uri}/{name}", mtime_ms, self.root))
            elif directory:
                subdirs.append(name)
        self._dirs[local] = sorted(entries)  # by name: names are unique
        return subdirs

    def map_finding(self, finding):
        """A verify `Finding` naming URIs instead of staged paths."""
        if not self.roots:
            return finding
        extra = {key: self.to_uri(value) if isinstance(value, str) else value for key, value in finding.extra.items()}
        return replace(finding, file=self.to_uri(finding.file), message=self.to_uri(finding.message), extra=extra)


def _scheme(uri: str) -> str:
    return uri.split(":", 1)[0].lower()


def _java_message(exc: Exception) -> str:
    java = getattr(exc, "java_exception", None)
    return str(java.toString()) if java is not None else _first_line(exc)


def _first_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


# ---------------------------------------------------------------------------------------------
# Reading a URI from Python (driver and executors)
# ---------------------------------------------------------------------------------------------

_FILESYSTEMS: dict[tuple[str, str], object] = {}


def filesystem(uri: str):
    """(pyarrow filesystem, path in it) for a URI; InputError saying what is missing otherwise."""
    scheme, _, rest = uri.partition("://")
    target, needs, _ = SCHEMES[scheme.lower()]
    try:
        from pyarrow import fs
    except ImportError:
        raise InputError(f"reading {scheme}:// needs pyarrow on the driver and every executor: {INSTALL_HINT}",
                         path=uri) from None
    parts = urlsplit(f"{target}://{rest}")
    key = (target, parts.netloc)
    if key not in _FILESYSTEMS:
        try:
            _FILESYSTEMS[key] = fs.FileSystem.from_uri(f"{target}://{parts.netloc}/")[0]
        except Exception as exc:  # pyarrow's ArrowInvalid / OSError: libhdfs, credentials, endpoint
            raise InputError(f"cannot open {scheme}:// from Python ({_first_line(exc)}); it needs {needs}",
                             path=uri) from None
    path = unquote(parts.path)
    return _FILESYSTEMS[key], (f"{parts.netloc}{path}" if target in ("s3", "gs") else path)


def list_dirs(uris: Iterable[str]) -> list[tuple[str, list[tuple] | str]]:
    """Each directory URI with its entries as `HadoopLayout._add` takes them (name, directory,
    regular, length, mtime ms), or why it cannot be listed. Run by executors through the pyarrow
    filesystem they stage with, as Hadoop's local listing sees entries: symlinks followed, a broken
    one left out; an entry neither file nor directory (a fifo) is neither, as os.scandir says."""
    from pyarrow import fs

    directory, regular, missing = fs.FileType.Directory, fs.FileType.File, fs.FileType.NotFound
    listed = []
    parent = source_fs = base = None
    for uri in uris:
        uri_parent, _, name = uri.rpartition("/")
        try:
            if uri_parent != parent:  # siblings, as listed trees give them: one filesystem lookup
                source_fs, base = filesystem(uri_parent)
                parent = uri_parent
            infos = source_fs.get_file_info(fs.FileSelector(f"{base.rstrip('/')}/{unquote(name)}"))
        except Exception as exc:  # InputError, pyarrow's OSError: gone, denied
            listed.append((uri, _first_line(exc)))
            continue
        entries = []
        for info in infos:
            kind = info.type
            if kind is not missing:
                entries.append((info.base_name, kind is directory, kind is regular, info.size or 0,
                                (info.mtime_ns or 0) // 1_000_000))
        listed.append((uri, entries))
    return listed


@contextmanager
def staged(files: Iterable[RemoteFile], prune: bool = True) -> Iterator[None]:
    """Local copies of `files` while the block runs, deleted after; with `prune`, the directories
    they emptied too (without, the caller prunes once for many units: `prune_dirs`, or the driver's
    `close` - each mkdir and rmdir costs milliseconds on a busy disk)."""
    made = []
    try:
        for file in files:
            made.append(file)
            _copy(file)
        yield
    finally:
        for file in made:
            try:
                os.unlink(file.local)
            except OSError:
                pass
        if prune:
            prune_dirs(made)


def prune_dirs(files: Iterable[RemoteFile]) -> None:
    """Remove the staged copies' directories that are empty now, and their emptied parents up to and
    including the staging root (not empty: another unit's copies are in it)."""
    for directory, root in sorted({(os.path.dirname(file.local), file.root) for file in files}, reverse=True):
        while directory.startswith(root):
            try:
                os.rmdir(directory)
            except OSError:
                break
            directory = os.path.dirname(directory)


def _copy(file: RemoteFile) -> None:
    source_fs, source = filesystem(file.uri)
    part = f"{file.local}.part-{os.getpid()}"
    try:
        for attempt in range(STAGING_ATTEMPTS):  # a task on this node may remove an emptied directory meanwhile
            try:
                os.makedirs(os.path.dirname(file.local), exist_ok=True)
                sink = open(part, "wb")
                break
            except FileNotFoundError:
                if attempt == STAGING_ATTEMPTS - 1:
                    raise
                time.sleep(random.random() * 0.001 * min(attempt, 10))  # out of step with the other task
        with sink, source_fs.open_input_stream(source) as stream:
            while chunk := stream.read(COPY_CHUNK):
                sink.write(chunk)
        os.utime(part, ns=(file.mtime_ms * 1_000_000,) * 2)
        os.replace(part, file.local)  # a reader's mmap of an earlier copy keeps its own inode
    except Exception as exc:  # pyarrow's errors are OSErrors or ArrowExceptions
        try:
            os.unlink(part)
        except OSError:
            pass
        raise InputError(f"cannot copy to {file.local} for reading: {_first_line(exc)}", path=file.uri) from None

"""Fuzz cases: a hostile log dir built from one seed file, and the command lines to run on it.

Seeds are the files of the corpora given (read in place, never written), plus segments this
module synthesizes with the library's own builders - every codec, transactions and markers,
legacy wrappers nested inside wrappers, and decompression bombs - so a run without a corpus still
reaches every decoder. A case is fully determined by (run seed, case number, seed list): it
mutates one seed file (mutate.py), places it in a fresh log dir with its unmutated siblings, and
sometimes adds filesystem hazards: empty files, directories and FIFOs named like segments,
unreadable files, symbolic links (loops, dangling, to /dev/zero, out of the tree), names that are
not UTF-8.

Command lines are derived from the CLI itself: every subcommand `kafkalog --help` lists, with its
options drawn from their click types, so a subcommand added later is fuzzed with no change here.
"""
from __future__ import annotations

import os
import random
import shutil
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path

import click

from .. import codecs
from ..dump import kind_of
from ..formats import checkpoint, legacy, offset_index, producer_snapshot, time_index, txn_index
from ..formats.control import CONTROL_KEY, END_TXN_MARKER
from ..formats.logdir import parse_partition_dir_name
from ..formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, build_batch, build_record
from ..formats.segment import SegmentFile
from . import bombs
from .mutate import layout_of, legacy_wrapper, mutate

MAX_SEED_BYTES = 1 << 20
TRIM_LOG_BYTES = 12 * 1024
"""Segments are cut to their first whole batches within this size: a case stays fast."""
OUTSIDE = "OUTSIDE-THE-TREE"
"""A directory next to the log dir that links point into: no command may read it through them."""
SEGMENT_NAME = "00000000000000000000"
T0 = 1_700_000_000_000

# ---------------------------------------------------------------------------------------------
# Seeds
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seed:
    path: Path
    kind: str
    partition: str | None
    """The partition dir name the file lies in (its topic picks payload decoders), or None for
    a log-dir-level file (meta.properties, offset checkpoints)."""
    trim: bool = True
    """Cut a large segment to its first batches (not the synthesized ones: their bombs are big)."""


def collect_seeds(roots: list[Path]) -> list[Seed]:
    """Every file under `roots` that a command reads, up to 1 MiB, in a stable order."""
    seeds = []
    for root in roots:
        for directory, dirnames, filenames in os.walk(root):  # never follows symbolic links
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(directory, name)
                kind = kind_of(str(path))
                if kind is None or path.is_symlink() or path.stat().st_size > MAX_SEED_BYTES:
                    continue
                parent = path.parent.name
                seeds.append(Seed(path, kind, parent if parse_partition_dir_name(parent) else None))
    return seeds


def synthesize(directory: Path) -> list[Seed]:
    """Segments and files built by our own builders: every codec, transactions, legacy wrappers
    (nested too), bombs over the decompression limit, and each index kind."""
    partition = directory / "synth-0"
    partition.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {}
    records = [build_record(i, i, f"k{i}".encode(), b"v" * i, [(b"h", b"x")]) for i in range(4)]
    v2 = b"".join(build_batch(4 * n, records, base_timestamp=T0, max_timestamp=T0 + 3, compression_id=n % 5,
                              producer_id=7, producer_epoch=0, base_sequence=4 * n, partition_leader_epoch=1)
                  for n in range(5))
    txn = build_batch(20, records, attributes=ATTR_TRANSACTIONAL, producer_id=8, producer_epoch=0,
                      base_timestamp=T0, max_timestamp=T0 + 3)
    for n, marker_type in enumerate((0, 1)):
        marker = build_record(0, 0, CONTROL_KEY.build(dict(version=0, type=marker_type)),
                              END_TXN_MARKER.build(dict(version=0, coordinator_epoch=3)))
        txn += build_batch(24 + n, [marker], attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, producer_id=8,
                           producer_epoch=0, base_timestamp=T0, max_timestamp=T0)
    files[f"{SEGMENT_NAME}.log"] = v2 + txn
    inner = b"".join(legacy.build_entry(i, 1, b"k", b"v", timestamp=T0) for i in range(3))
    nested = legacy_wrapper(legacy_wrapper(inner, 2, 1, 1), 2, 1, 1)  # gzip inside gzip
    files["00000000000000000100.log"] = b"".join(
        [legacy.build_entry(100, 0, b"k", b"v")] + [legacy_wrapper(inner, 102 + 3 * n, 1, codec)
                                                    for n, codec in enumerate((1, 2, 3))] + [nested])
    bomb_payloads = ((1, bombs.gzip_zeros(160)), (3, bombs.lz4_zeros(2600)), (4, bombs.zstd_zeros(160)),
                     (2, bombs.raw_snappy_zeros(4 * bombs.MIB)))
    files["00000000000000000200.log"] = b"".join(_raw_v2(200 + n, payload, codec)
                                                 for n, (codec, payload) in enumerate(bomb_payloads))
    files[f"{SEGMENT_NAME}.index"] = offset_index.build([(4, 100), (20, 300)], 0)
    files[f"{SEGMENT_NAME}.timeindex"] = time_index.build([(T0, 3), (T0 + 3, 25)], 0)
    files[f"{SEGMENT_NAME}.txnindex"] = txn_index.build([txn_index.AbortedTxn(0, 8, 20, 24, 20)])
    files["00000000000000000100.snapshot"] = producer_snapshot.build(
        [producer_snapshot.ProducerEntry(7, 0, 19, 19, 3, T0, -1, -1), producer_snapshot.ProducerEntry(8, 0, 3, 23, 3,
                                                                                                       T0, 3, 20)])
    files["leader-epoch-checkpoint"] = checkpoint.format_leader_epochs([(1, 0), (2, 100)]).encode()
    files["partition.metadata"] = b"version: 0\ntopic_id: Gr6a7v3ZRdSLNvcFwfTb1w\n"
    for name, data in files.items():
        (partition / name).write_bytes(data)
    (directory / "meta.properties").write_bytes(b"version=1\ncluster.id=abc\nnode.id=1\n")
    (directory / "recovery-point-offset-checkpoint").write_bytes(
        checkpoint.format_offsets({("synth", 0): 26}).encode())
    seeds = [Seed(partition / name, kind_of(name), partition.name, trim=False) for name in sorted(files)]
    seeds += [Seed(directory / name, kind_of(name), None) for name in ("meta.properties",
                                                                         "recovery-point-offset-checkpoint")]
    return seeds


def _raw_v2(offset: int, payload: bytes, codec: int) -> bytes:
    """A V2 batch whose records section is `payload` as given (a bomb), with a correct CRC."""
    from ..crc import crc32c

    header = bytearray(build_batch(offset, [b""], compression_id=0)[:61])
    struct.pack_into(">i", header, 8, 49 + len(payload))
    struct.pack_into(">h", header, 21, codec)
    batch = bytearray(bytes(header) + payload)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


# ---------------------------------------------------------------------------------------------
# Building one case
# ---------------------------------------------------------------------------------------------


@dataclass
class Case:
    number: int
    root: Path
    log_dir: Path
    partition: Path | None
    file: Path
    description: list[str] = field(default_factory=list)
    extra_targets: list[Path] = field(default_factory=list)
    """Hazards worth naming on the command line too (a FIFO, a link to /dev/zero, ...)."""


SYNTHESIZED_SHARE = 0.15


def build_case(rng: random.Random, number: int, seeds: list[Seed], synthesized: list[Seed], root: Path,
               hazards: bool = True) -> Case:
    """`hazards=False`: only the mutated file and its siblings (what Kafka's own code can be asked about)."""
    seed = rng.choice(synthesized if not seeds or rng.random() < SYNTHESIZED_SHARE else seeds)
    log_dir = root / "logs"
    log_dir.mkdir(parents=True)
    data = _trimmed(seed)
    partition = log_dir / seed.partition if seed.partition else None
    home = partition or log_dir
    home.mkdir(exist_ok=True)
    target = home / seed.path.name
    description = [f"seed {seed.path}"]
    if rng.random() < 0.9:
        layout = layout_of(seed.kind, str(seed.path), data)
        data, what = mutate(rng, seed.kind, data, layout)
        description.append(what)
    target.write_bytes(data)
    if partition is not None:
        _add_siblings(rng, seed, partition, description)
    case = Case(number, root, log_dir, partition, target, description)
    if hazards and rng.random() < 0.3:
        for _ in range(rng.choice((1, 1, 2, 4))):
            rng.choice(HAZARDS)(rng, case)
    return case


def _trimmed(seed: Seed) -> bytes:
    data = seed.path.read_bytes()
    if seed.kind != "log" or not seed.trim or len(data) <= TRIM_LOG_BYTES:
        return data
    end = 0
    with SegmentFile(seed.path) as segment:
        for entry in segment.entries():
            if entry.end > TRIM_LOG_BYTES and end:
                break
            end = entry.end
    return data[: end or TRIM_LOG_BYTES]


def _add_siblings(rng: random.Random, seed: Seed, partition: Path, description: list[str]) -> None:
    """The seed's unmutated neighbours: its segment's other files, sometimes the next segment (so
    the mutant is not the active segment), the partition's checkpoint files."""
    source = seed.path.parent
    stem = seed.path.name.split(".", 1)[0]
    names = sorted(p.name for p in source.iterdir() if p.is_file() and not p.is_symlink())
    wanted = [n for n in names if n.split(".", 1)[0] == stem and n != seed.path.name]
    wanted += [n for n in ("leader-epoch-checkpoint", "partition.metadata") if n in names and rng.random() < 0.7]
    later = sorted(n for n in names if n.endswith(".log") and n > f"{stem}.log")
    if later and rng.random() < 0.4:
        wanted.append(later[0])
        description.append(f"with the next segment {later[0]}")
    for name in wanted:
        sibling = Seed(source / name, kind_of(name), seed.partition, seed.trim)
        if (source / name).stat().st_size <= MAX_SEED_BYTES:
            (partition / name).write_bytes(_trimmed(sibling))


# ---------------------------------------------------------------------------------------------
# Filesystem hazards
# ---------------------------------------------------------------------------------------------

KAFKA_NAMES = (f"{SEGMENT_NAME}.log", f"{SEGMENT_NAME}.index", f"{SEGMENT_NAME}.timeindex",
               f"{SEGMENT_NAME}.txnindex", "00000000000000000005.snapshot", "leader-epoch-checkpoint",
               "partition.metadata", "quorum-state", "00000000000000000009-0000000001.checkpoint")
LOG_DIR_NAMES = ("meta.properties", "recovery-point-offset-checkpoint", "bootstrap.checkpoint")


def _spot(rng: random.Random, case: Case) -> Path:
    """A path named like a Kafka file, in the partition dir or (for log-dir files) the log dir."""
    if case.partition is not None and rng.random() < 0.75:
        return case.partition / f"{rng.randrange(1, 10**6):020d}{rng.choice(('.log', '.index', '.snapshot'))}" \
            if rng.random() < 0.3 else case.partition / rng.choice(KAFKA_NAMES)
    return case.log_dir / rng.choice(LOG_DIR_NAMES + ("hazard-0",))


def _free(path: Path) -> bool:
    return not os.path.lexists(path)


def empty_file(rng, case: Case) -> None:
    path = _spot(rng, case)
    if path.is_dir() and not path.is_symlink():
        return
    if os.path.lexists(path):
        path.unlink()
    path.write_bytes(b"")
    case.description.append(f"empty file {path.name}")


def directory_named_like_a_file(rng, case: Case) -> None:
    path = _spot(rng, case)
    if _free(path):
        (path / SEGMENT_NAME).mkdir(parents=True)
        case.description.append(f"directory {path.name}")
        case.extra_targets.append(path)


def fifo(rng, case: Case) -> None:
    path = _spot(rng, case)
    if _free(path):
        os.mkfifo(path)
        case.description.append(f"FIFO {path.name}")
        case.extra_targets.append(path)


def unreadable(rng, case: Case) -> None:
    case.file.chmod(0)
    case.description.append(f"{case.file.name} mode 000")


def symlink_loop(rng, case: Case) -> None:
    path = _spot(rng, case)
    if _free(path):
        if rng.random() < 0.5:
            os.symlink(path.name, path)
        else:
            other = path.with_name(path.name + ".loop")
            os.symlink(other.name, path)
            os.symlink(path.name, other)
        case.description.append(f"symlink loop {path.name}")
        case.extra_targets.append(path)


def symlink_out_of_the_tree(rng, case: Case) -> None:
    """Links from inside the tree to a partition dir and a segment outside it."""
    outside = case.root / OUTSIDE / "outside-0"
    if not outside.exists():
        outside.mkdir(parents=True)
        if case.file.is_file():
            shutil.copyfile(case.file, outside / f"{SEGMENT_NAME}.log")
    link_dir = case.log_dir / "linked-0"
    if _free(link_dir):
        os.symlink(outside, link_dir)
    path = _spot(rng, case)
    if _free(path) and (outside / f"{SEGMENT_NAME}.log").exists():
        os.symlink(outside / f"{SEGMENT_NAME}.log", path)
    case.description.append("symlinks out of the tree")


def symlink_to_a_device(rng, case: Case) -> None:
    path = _spot(rng, case)
    if _free(path):
        os.symlink(rng.choice(("/dev/zero", "/dev/null", "/dev/urandom", "/proc/self/mem", "/nonexistent")), path)
        case.description.append(f"symlink {path.name} -> device or nowhere")
        case.extra_targets.append(path)


def awkward_names(rng, case: Case) -> None:
    """Names that are not UTF-8, or that look like rich markup, for files and partition dirs."""
    parent = os.fsencode(case.partition or case.log_dir)
    data = case.file.read_bytes() if stat.S_ISREG(os.lstat(case.file).st_mode) else b""
    name = rng.choice((b"\xff\xfe.log", b"0000000000000000000\xff.log", b"\xed\xa0\x80.index", b"caf\xe9.snapshot",
                       b"[bold red]x.log", b"x[red].index"))
    with open(os.path.join(parent, name), "wb") as handle:
        handle.write(data)
    bad_partition = os.path.join(os.fsencode(case.log_dir), rng.choice((b"t\xff\xfeopic-0", b"[bold]-0", b"t[red]-1")))
    if not os.path.lexists(bad_partition):
        os.mkdir(bad_partition)
        with open(os.path.join(bad_partition, os.fsencode(f"{SEGMENT_NAME}.log")), "wb") as handle:
            handle.write(data)
        case.extra_targets.append(Path(os.fsdecode(bad_partition)))
    case.description.append("names that are not UTF-8 or look like markup")


def deep_directories(rng, case: Case) -> None:
    path = (case.partition or case.log_dir) / "d-0"
    if _free(path):
        deep = path
        for level in range(30):
            deep = deep / f"{level:020d}.log"
        deep.mkdir(parents=True)
        case.description.append("deep directories named like segments")


HAZARDS = (empty_file, directory_named_like_a_file, fifo, unreadable, symlink_loop, symlink_out_of_the_tree,
           symlink_to_a_device, awkward_names, deep_directories)


def make_readable(root: Path) -> None:
    """Undo `unreadable` so that the case directory can be listed and removed."""
    for directory, dirnames, filenames in os.walk(root):
        for name in filenames:
            path = os.path.join(directory, name)
            if not os.path.islink(path) and stat.S_ISREG(os.lstat(path).st_mode):
                os.chmod(path, 0o644)


# ---------------------------------------------------------------------------------------------
# Command lines, derived from the CLI
# ---------------------------------------------------------------------------------------------

WRITERS = {"rebuild-index"}
"""Subcommands that write unless given --dry-run: run on a copy of the case."""
SKIPPED_OPTIONS = {"help", "version", "spark", "master", "spark_conf", "output"}
"""Options that start other systems (Spark) or name an output file: not fuzzed here."""
INTS = (0, 1, 5, 100, 4096, -1, -(1 << 31), (1 << 31) - 1, (1 << 63) - 1, -(1 << 63))
TIMES = ("0", str(T0), str(T0 + 3), str(T0 + 10**9), "2023-11-14T22:13:20Z", "2023-11-14", "not-a-time")


@dataclass
class Invocation:
    command: str
    argv: list[str]
    writes: bool


def invocations(rng: random.Random, case: Case, commands: dict[str, click.Command]) -> list[Invocation]:
    """One command line per subcommand (two for dump and verify), options drawn at random."""
    result = []
    for name, command in commands.items():
        for _ in range(2 if name in ("dump", "verify") else 1):
            argv = [name] + _options(rng, command, case) + _arguments(rng, command, case)
            result.append(Invocation(name, argv, name in WRITERS and "--dry-run" not in argv))
    return result


def _targets(rng: random.Random, case: Case, dirs_only: bool) -> list[str]:
    choices = [case.partition or case.log_dir] * 4 + [case.log_dir] * 2
    if not dirs_only:
        choices += [case.file] * 2
    choices += case.extra_targets
    return [os.fspath(rng.choice(choices))]


def _arguments(rng: random.Random, command: click.Command, case: Case) -> list[str]:
    argv = []
    for param in command.params:
        if not isinstance(param, click.Argument):
            continue
        dirs_only = isinstance(param.type, click.Path) and not param.type.file_okay
        count = 1 if param.nargs == 1 else rng.choice((1, 2, 2, 3))
        for _ in range(count):
            argv += _targets(rng, case, dirs_only)
    return argv


def _options(rng: random.Random, command: click.Command, case: Case) -> list[str]:
    argv = []
    for param in command.params:
        if not isinstance(param, click.Option) or param.name in SKIPPED_OPTIONS or "spark" in param.name:
            continue
        flag = max(param.opts, key=len)
        if param.is_flag:
            if rng.random() < 0.25:
                argv.append(flag)
            continue
        wanted = param.required or param.multiple and param.name in ("offsets", "timestamps") or rng.random() < 0.4
        if not wanted:
            continue
        for _ in range(rng.choice((1, 1, 2, 3)) if param.multiple else 1):
            argv += [flag, _value(rng, param, case)]
    return argv


def _value(rng: random.Random, param: click.Option, case: Case) -> str:
    kind = param.type
    name = param.name
    if isinstance(kind, click.Choice):
        return rng.choice(list(kind.choices))
    if isinstance(kind, click.Path):
        if "output" in name:  # outside the input tree, or (refused) inside it
            inside = rng.random() < 0.2
            return os.fspath((case.partition or case.log_dir) / "out" if inside else case.root / "out")
        return os.fspath(case.file)
    if name == "max_decompressed":
        return str(rng.choice((1, 65536, 1 << 20, codecs.DEFAULT_LIMIT)))
    if "time" in name or name == "now":
        return rng.choice(TIMES)
    if isinstance(kind, (click.FloatRange, type(click.FLOAT))):
        return str(_within(kind, rng.choice((0.0, 0.5, 1.0, -1.0, 1e300, 1e-300))))
    if isinstance(kind, (click.IntRange, type(click.INT))):
        return str(_within(kind, rng.choice(INTS + (rng.randrange(-10, 3000),))))
    if "regex" in name:
        return rng.choice((".", "^k", "0$", "("))
    return rng.choice(("k0", "k1", "", "\udcff", "0"))


def _within(kind: click.ParamType, value):
    """Mostly a value the option's range accepts (a usage error tests little); sometimes any."""
    if isinstance(kind, click.types._NumberRangeBase) and random.Random(value).random() < 0.9:
        if kind.min is not None:
            value = max(value, kind.min)
        if kind.max is not None:
            value = min(value, kind.max)
    return value

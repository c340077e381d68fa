"""The `kafkalog` command: a thin layer over the library.

Subcommands live in `commands/`, one module each, imported only when invoked so that
`kafkalog --help` stays fast. Every library error becomes a one-line message and a documented
exit code: 0 clean, 1 problems found in the data, 2 usage error, I/O error or out of memory. Never a traceback.
"""
from __future__ import annotations

import atexit
import importlib
import importlib.util
import os
import signal
import sys

import click

from .errors import CorruptDataError, InputError, KafkaLogError
from .output import EXIT_PROBLEMS, EXIT_USAGE, escape_undecodable

SUBCOMMANDS = {
    "dump": ("dump", "Print batches, records and index entries, as kafka-dump-log.sh does or as JSON Lines."),
    "verify": ("verify", "Check segments, indexes and checkpoints as Kafka's loader would."),
    "rebuild-index": ("rebuild_index", "Rebuild .index/.timeindex/.txnindex exactly as Kafka's recovery does."),
    "lookup": ("lookup", "Find a record by offset or timestamp through the sparse indexes, as Kafka does."),
    "txns": ("txns", "List each producer's transactions (committed, aborted, open) and the last stable offset."),
    "retention": ("retention", "Which segments Kafka's retention would delete now or at a given time, and why."),
    "compaction": ("compaction", "What Kafka's log cleaner would remove from a compacted partition, and why."),
    "diverge": ("diverge", "Where copies of one partition from several brokers diverge, and what a failover would truncate."),
    "report": ("report", "Write one self-contained HTML incident report: findings, segment maps, timelines, retention."),
    "build-kernels": ("build_kernels", "Build and cache the compiled kernels of the bulk scan now (for images and CI)."),
}

def out_of_memory() -> str:
    from .codecs import DEFAULT_LIMIT, THREADS_MAX  # (not on --help's path)

    return (f"kafkalog: error: out of memory: each thread that decompresses (up to {THREADS_MAX}) may hold a batch "
            f"inflated to {DEFAULT_LIMIT >> 20} MiB (dump's --max-decompressed); give the process more memory")


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return [name for name, (module, _) in SUBCOMMANDS.items() if _available(module)]

    def get_command(self, ctx, name):
        if name not in SUBCOMMANDS or not _available(SUBCOMMANDS[name][0]):
            return None
        module = importlib.import_module(f"{__package__}.commands.{SUBCOMMANDS[name][0]}")
        return module.command

    def format_commands(self, ctx, formatter):
        rows = [(name, help_text) for name, (module, help_text) in SUBCOMMANDS.items() if _available(module)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _available(module: str) -> bool:
    return importlib.util.find_spec(f"{__package__}.commands.{module}") is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="kafkalog-tools", prog_name="kafkalog")
def cli():
    """Offline forensics for Apache Kafka's on-disk logs.

    Reads log directories, partition directories and single files (.log, .index, .timeindex,
    .txnindex, .snapshot, checkpoints) with no broker running. Inputs are only ever read, except by
    rebuild-index, which writes through temp files and keeps backups.

    Exit codes: 0 clean; 1 problems found in the data; 2 usage error, I/O error or out of memory.
    """


def main(argv: list[str] | None = None) -> None:
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `kafkalog dump ... | head` ends quietly
    for stream in (sys.stdout, sys.stderr):  # rich tables and messages print file names too
        escape_undecodable(stream)
    try:
        cli.main(args=argv, prog_name="kafkalog", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE if exc.exit_code == 2 else exc.exit_code)
    except InputError as exc:
        click.echo(f"kafkalog: error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except (CorruptDataError, KafkaLogError) as exc:
        click.echo(f"kafkalog: error: {exc}", err=True)
        sys.exit(EXIT_PROBLEMS)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except OSError as exc:  # the machine's, not a bug: no space left where stdout goes, a device error
        click.echo(f"kafkalog: error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except MemoryError:  # the machine's too, unless we asked for far too much (KAFKALOG_DEBUG shows where)
        if os.environ.get("KAFKALOG_DEBUG"):
            raise
        click.echo(out_of_memory(), err=True)
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # a bug of ours: still no traceback unless asked for
        if os.environ.get("KAFKALOG_DEBUG"):
            raise
        click.echo(f"kafkalog: internal error: {type(exc).__name__}: {exc} "
                   "(set KAFKALOG_DEBUG=1 for the traceback, and please report it)", err=True)
        sys.exit(EXIT_USAGE)


def run() -> None:
    """The console script: `main`, then out of the process at once. Python's own teardown frees
    every module's objects one by one (numpy's among them): 50-100 ms here, a tenth of verifying a
    GiB. What that teardown is for still happens first: `atexit` handlers run and our output is
    flushed. Output that cannot be flushed (a full disk) is an I/O error, exit 2, without Python's
    "Exception ignored" after it. A run that started Spark exits the normal way (py4j's and Spark's
    shutdown)."""
    without_blas_threads()
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    if not isinstance(code, int) or "pyspark" in sys.modules or not hasattr(atexit, "_run_exitfuncs"):
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError as exc:  # where the output goes is full or gone: an I/O error, as documented
        if code != EXIT_USAGE:  # (`main` has told already what it caught)
            _tell(f"kafkalog: error: cannot write the output: {exc}\n")
        code = EXIT_USAGE
    os._exit(code)


def without_blas_threads() -> None:
    """numpy's OpenBLAS starts a thread per CPU when numpy is imported, and they spin: ~0.06 s of
    CPU per process, taken from our own threads on a small machine. kafkalog does no linear algebra.
    (Set before numpy is imported, and only where the user has not set it.)"""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _tell(message: str) -> None:
    """To stderr's file beneath any buffer (which may be what failed)."""
    try:
        os.write(2, message.encode("utf-8", "backslashreplace"))
    except OSError:
        pass

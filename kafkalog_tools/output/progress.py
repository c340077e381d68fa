"""A transient progress bar over the bytes a long scan reads - on a terminal only."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager


@contextmanager
def byte_progress(console, run, label: str):
    """Show `run`'s progress (it has `total_bytes` and calls `on_progress(n)`) while inside.

    The bar goes to the text console when that is a terminal, else to stderr when that is one,
    else nowhere: piped and redirected output never gets progress noise.
    """
    if (console is None or not console.is_terminal) and not _stderr_may_be_terminal():
        yield  # rich's import (~20 ms) would only say the same
        return
    from rich.console import Console

    bar_console = console if console is not None and console.is_terminal else Console(stderr=True)
    if not bar_console.is_terminal:
        yield
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    with Progress(label, BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                  console=bar_console, transient=True) as progress:
        task = progress.add_task(label, total=run.total_bytes)
        run.on_progress = lambda n: progress.advance(task, n)
        yield


def _stderr_may_be_terminal() -> bool:
    """False only where rich's Console(stderr=True) surely is no terminal: stderr is not a tty and
    no variable rich reads makes it pretend otherwise."""
    return sys.stderr.isatty() or "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ

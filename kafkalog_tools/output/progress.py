"""A transient progress bar over the bytes a long scan reads - on a terminal only."""
from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def byte_progress(console, run, label: str):
    """Show `run`'s progress (it has `total_bytes` and calls `on_progress(n)`) while inside.

    The bar goes to the text console when that is a terminal, else to stderr when that is one,
    else nowhere: piped and redirected output never gets progress noise.
    """
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

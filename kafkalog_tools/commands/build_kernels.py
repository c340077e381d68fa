"""`kafkalog build-kernels`: the compiled bulk kernels built now, where it costs no one."""
from __future__ import annotations

import time
import warnings

import click

from ..errors import InputError


@click.command("build-kernels")
def command():
    """Build the compiled kernels of the bulk scan for this installation and CPU now, and cache
    them (~2 min of CPU, once per version and CPU). Without them a run reads batch by batch while a
    background process builds them; put this step in container images and CI after installing.

    The cache is beside the package (__pycache__) where that is writable, else in the user's cache
    directory, or where KAFKALOG_KERNEL_CACHE points. A build already under way in another process
    is waited for, not repeated. Exit 0 when the kernels are cached and load, 2 when they cannot
    be built here (said why)."""
    from ..native import cache, loader

    started = time.monotonic()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba's
            loader.load()
    except Exception as exc:  # noqa: BLE001 - told, as the exit code says
        raise InputError(f"the bulk kernels cannot be built here: {type(exc).__name__}: {exc}") from None
    where = cache.cached_path()
    click.echo(f"kafkalog: bulk kernels ready ({time.monotonic() - started:.1f} s): "
               f"{where or 'built, but no directory keeps them (see KAFKALOG_KERNEL_CACHE)'}", err=True)

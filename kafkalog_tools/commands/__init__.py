"""The subcommands, one thin module each (see cli.py), and the options several of them share."""
from __future__ import annotations

import click


def strict_option(what: str):
    """--strict: stop at the first problem (exit 1) instead of reporting every one and going on."""
    return click.option("--strict", is_flag=True,
                        help=f"Stop at the first {what}, with its message and exit 1. Default: report every "
                             "problem and go on.")


def stop_strictly(message: str) -> None:
    click.echo(f"kafkalog: stopped at the first problem (--strict): {message}", err=True)

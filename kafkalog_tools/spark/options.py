"""The `--spark` options shared by `verify` and `dump` (click only: importing this never imports
pyspark)."""
from __future__ import annotations

import os

import click

from . import INSTALL_HINT
from .uri import is_uri


class PathOrUri(click.Path):
    """An existing local path, or a Hadoop URI (checked when Spark lists it)."""

    def convert(self, value, param, ctx):
        return value if is_uri(value) else super().convert(value, param, ctx)


def spark_options(output_help: str):
    """--spark, --master, --spark-conf, --verbose and --output, in that order."""
    def decorate(command):
        for option in reversed((
            click.option("--spark", "use_spark", is_flag=True,
                         help=f"Run on Spark: segments are read on executors, balanced by bytes. Needs pyspark "
                              f"({INSTALL_HINT}); under spark-submit it uses that session's master."),
            click.option("--master", metavar="URL",
                         help="Spark master with --spark: local[N], spark://host:7077, yarn, k8s://... "
                              "Default: what spark-submit set, else local[*]."),
            click.option("--spark-conf", multiple=True, metavar="KEY=VALUE",
                         help="A Spark setting with --spark (repeatable), e.g. spark.executor.memory=4g."),
            click.option("--verbose", is_flag=True,
                         help="With --spark: show Spark's own log lines and progress bar on stderr (without it "
                              "they are kept from the terminal unless --spark-conf spark.log.level=... is given)."),
            click.option("--output", metavar="DIR", help=output_help),
        )):
            command = option(command)
        return command
    return decorate


def check_spark_usage(use_spark: bool, master, spark_conf, output, paths=(), strict: bool = False,
                      output_needed: bool = False, verbose: bool = False) -> dict[str, str]:
    """Usage errors (exit 2) for Spark options given without --spark or with bad values, for Hadoop
    URIs without --spark and for --strict with it; the --spark-conf pairs as a dict."""
    if not use_spark:
        for path in paths:
            if is_uri(path) and not os.path.exists(path):
                raise click.UsageError(f"{path}: a Hadoop URI is read only with --spark, through Spark's file access")
        given = [name for name, value in (("--master", master), ("--spark-conf", spark_conf), ("--verbose", verbose),
                                          ("--output", output)) if value]
        if given:
            raise click.UsageError(f"{', '.join(given)} only applies with --spark")
        return {}
    if strict:  # stopping at the first problem means reading in order; executors read everything at once
        raise click.UsageError("--strict does not apply with --spark: run without --spark to stop at the first "
                               "problem")
    if output_needed and not output:
        raise click.UsageError("--spark writes Parquet: give --output DIR")
    if output and os.path.exists(output) and (not os.path.isdir(output) or os.listdir(output)):
        raise click.UsageError(f"--output {output} exists and is not an empty directory: nothing is overwritten")
    from .session import parse_conf  # (tempfile, zipfile: not for a run without --spark)

    try:
        return parse_conf(spark_conf)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None

"""The SparkSession behind `--spark`, and this package shipped to its executors."""
from __future__ import annotations

import os
import re
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

from ..errors import InputError
from . import INSTALL_HINT

LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    # Python workers talk to their JVM over a Unix socket: per-task overhead 25 ms -> 9 ms here
    "spark.python.unix.domain.socket.enabled": "true",
}
"""Defaults for local masters; `--spark-conf` overrides them."""
QUIET_DEFAULTS = {"spark.ui.showConsoleProgress": "false"}
"""Without --verbose (and without a `spark.log.level` of the user's): no progress bar either."""
PYTHON_CONF = "spark.pyspark.python"
"""The Python executors run (spark-submit reads it; a driver started directly reads PYSPARK_PYTHON)."""


def require_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise InputError(f"--spark needs pyspark, which is not installed: {INSTALL_HINT}") from None


def parse_conf(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`--spark-conf key=value` options as a dict; a pair without '=' is a usage error."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--spark-conf takes key=value, got {pair!r}")
        conf[key.strip()] = value
    return conf


def start_session(master: str | None = None, conf: dict[str, str] | None = None, app_name: str = "kafkalog",
                  verbose: bool = False):
    """A SparkSession with this package on every executor's path.

    `master` None means what spark-submit configured, or `local[*]` when run directly. Unless
    `verbose` (or the user set `spark.log.level`), what the driver's JVM prints - log4j's lines,
    the JVM's own warnings, the progress bar - goes to a file that is shown only if the JVM fails
    to start (under spark-submit the JVM is spark-submit's, and so is its logging).
    """
    require_pyspark()
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started this driver
    if master is None and not under_submit:
        master = "local[*]"
    conf = dict(conf or {})
    settings = {"spark.app.name": app_name}
    if master is not None:
        settings["spark.master"] = master
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no hostname lookup, no warning
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers import what this Python has
            settings.update(LOCAL_DEFAULTS)
    quiet = not verbose and "spark.log.level" not in conf
    if quiet:
        settings.update(QUIET_DEFAULTS)
    settings.update(conf)
    if PYTHON_CONF in conf and not under_submit:
        os.environ["PYSPARK_PYTHON"] = conf[PYTHON_CONF]  # what pyspark's driver hands to executors
    spark_conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    if SparkContext._gateway is None and not under_submit:  # the first session of this process
        SparkContext(conf=spark_conf, gateway=_launch_gateway(spark_conf, quiet))
    else:
        SparkContext.getOrCreate(spark_conf)
    spark = SparkSession.builder.getOrCreate()
    ship_package(spark.sparkContext)
    return spark


def _launch_gateway(spark_conf, quiet: bool):
    """Start the driver's JVM; when `quiet`, with its stderr in an unlinked temp file (read only
    to say why the JVM did not start)."""
    from pyspark.java_gateway import launch_gateway

    log = tempfile.TemporaryFile(prefix="kafkalog-spark-driver-") if quiet else None
    try:
        return launch_gateway(spark_conf, {"stderr": log} if log else None)
    except Exception as exc:  # pyspark's JAVA_GATEWAY_EXITED: no Java, a bad --spark-conf, ...
        said = ""
        if log is not None:
            log.seek(0)
            lines = [line for line in log.read().decode("utf-8", "replace").splitlines() if line.strip()]
            said = ": " + " | ".join(lines[-5:]) if lines else ""
        raise InputError(f"Spark's driver JVM did not start ({_first_line(exc)}){said}") from None
    finally:
        if log is not None:
            log.close()  # the JVM keeps its own descriptor


def _first_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def ship_package(sc) -> None:
    """Zip `kafkalog_tools` as it is on the driver and add it to every executor's Python path, so
    executors run exactly the driver's code (third-party dependencies must be on the nodes)."""
    if getattr(sc, "_kafkalog_shipped", False):
        return
    package = Path(__file__).resolve().parent.parent
    archive = Path(tempfile.mkdtemp(prefix="kafkalog-spark-")) / "kafkalog_tools.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for path in sorted(package.rglob("*.py")):
            out.write(path, path.relative_to(package.parent).as_posix())
    sc.addPyFile(str(archive))
    sc._kafkalog_shipped = True


@contextmanager
def task_errors():
    """A Spark job that failed on every attempt as one line (an InputError: exit 2), not Spark's
    stack trace: the InputError a task raised (a file behind a URI that cannot be copied), else the
    first line of what failed."""
    try:
        yield
    except Exception as exc:
        if type(exc).__module__.split(".")[0] not in ("py4j", "pyspark"):
            raise
        text = str(exc)
        ours = re.findall(r"kafkalog_tools\.errors\.InputError: (.+)", text)
        if ours:
            raise InputError(ours[-1]) from None
        missing = re.findall(r"ModuleNotFoundError: No module named '([^']+)'", text)
        if missing:
            raise InputError(f"a Spark job failed: the executors' Python cannot import {missing[-1]}: give "
                             f"--spark-conf {PYTHON_CONF}=PYTHON, a Python with kafkalog-tools' dependencies at "
                             f"that path on every node") from None
        raise InputError(f"a Spark job failed: {text.strip().splitlines()[0]}") from None

"""--spark on a real standalone cluster: a master and two workers (one core, 1 GiB each), separate
JVMs started from pyspark's `bin/spark-class` (bench/spark_cluster.py), with executors in JVMs of
their own running the venv's Python. The CLI and the library give one process's answers there;
Spark's log lines stay off the terminal unless --verbose; and when the session ends the cluster is
stopped and the process list shows nothing of it left."""
from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys

import pytest

from kafkalog_tools.spark.remote import STAGE_FILE_URIS_CONF
from kafkalog_tools.spark.schemas import BATCH_FIELDS, RECORD_FIELDS
from kafkalog_tools.verify import Verification
from tests.conftest import GOLDEN, REAL, ROOT, need
from tests.damage import corpus_paths, damaged_copies
from bench.spark_cluster import StandaloneCluster

pytest.importorskip("pyspark", reason="--spark needs pyspark (the 'spark' extra)")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java: Spark's JVMs cannot start", allow_module_level=True)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    atexit.register(cluster.stop)  # should pytest itself be cut short
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        atexit.unregister(cluster.stop)
        left = cluster.leftovers()
        assert not left, f"processes of the Spark cluster left running: {left}"


def cluster_args(cluster) -> tuple[str, ...]:
    """What a user gives for an existing cluster: its master, and the Python the executors run."""
    return ("--spark", "--master", cluster.url, "--spark-conf", f"spark.pyspark.python={sys.executable}",
            "--spark-conf", "spark.executor.memory=512m")


def kafkalog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalog_tools", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})


SPARK_LOG_LINE = "log4j"
"""In what Spark's JVM prints when it starts ("Using Spark's default log4j profile")."""


def test_verify_cli_on_the_cluster_prints_what_one_process_prints_and_nothing_of_spark(cluster):
    paths = corpus_paths()
    single = kafkalog("verify", "--format", "json", *paths)
    on_cluster = kafkalog("verify", "--format", "json", *cluster_args(cluster), *paths)
    assert on_cluster.returncode == single.returncode, on_cluster.stderr[-3000:]
    lines = [json.loads(line) for line in on_cluster.stdout.splitlines()]
    assert [line for line in lines if line["type"] != "path_summary"] == \
        [json.loads(line) for line in single.stdout.splitlines()]
    assert lines[-1]["partitions"] > 100 and lines[-1]["warnings"] > 100
    assert on_cluster.stderr == ""  # quiet by default: no log4j line, no JVM warning, no progress bar
    finished = [app for app in cluster.state()["completedapps"] if app["name"] == "kafkalog"]
    assert finished and all(app["cores"] == 2 for app in finished)  # both workers' executors took part


def test_dump_cli_on_the_cluster_writes_what_one_process_dumps_and_verbose_shows_spark(cluster, tmp_path):
    import pyarrow.dataset as ds

    logs = str(need(GOLDEN) / "logs")
    single = kafkalog("dump", "--format", "json", "--deep-iteration", logs)
    on_cluster = kafkalog("dump", *cluster_args(cluster), "--verbose", "--output", str(tmp_path / "out"), logs)
    assert on_cluster.returncode == single.returncode == 0, on_cluster.stderr[-3000:]
    assert SPARK_LOG_LINE in on_cluster.stderr  # --verbose: Spark's own lines reach stderr
    objects = [json.loads(line) for line in single.stdout.splitlines()]

    def table(dataset: str, fields) -> list[tuple]:
        rows = ds.dataset(tmp_path / "out" / dataset, format="parquet", partitioning="hive").to_table().to_pylist()
        return sorted(tuple(row[name] for name, _ in fields) for row in rows)

    expected_batches = sorted(tuple(o[name] for name, _ in BATCH_FIELDS) for o in objects if o["type"] == "batch")
    expected_records = sorted(tuple(o[name] for name, _ in RECORD_FIELDS) for o in objects if o["type"] == "record")
    assert table("batches", BATCH_FIELDS) == expected_batches and len(expected_batches) > 1000
    assert table("records", RECORD_FIELDS) == expected_records and len(expected_records) > 5000


def test_the_library_on_the_cluster_equals_one_process_on_damage_and_file_uris(cluster, tmp_path):
    """In this process: executors in their own JVMs, running this venv's Python, check damaged
    copies (local paths) and the real corpus as file:// URIs (listed by the JVM, staged by the
    executors) and give one process's findings."""
    from kafkalog_tools.spark.session import start_session
    from kafkalog_tools.spark.verify import SparkVerification

    need(REAL)
    damaged = damaged_copies(tmp_path)
    spark = start_session(cluster.url, {"spark.pyspark.python": sys.executable, "spark.executor.memory": "512m"})
    try:
        executors = spark.sparkContext.parallelize(range(8), 8).map(
            lambda _: (os.getpid(), sys.executable, os.getcwd())).collect()
        assert {python for _, python, _ in executors} == {sys.executable}
        assert os.getpid() not in {pid for pid, _, _ in executors}
        assert {cwd.split("/worker-")[1][0] for _, _, cwd in executors} == {"0", "1"}  # both workers' dirs

        local = Verification(damaged)
        on_cluster = SparkVerification(spark, damaged, stage_2_on="executors")
        assert [f.to_json() for f in on_cluster] == [f.to_json() for f in local]
        assert on_cluster.summary == local.summary and local.summary.errors > 0

        real = [str(REAL / "zk-broker-a"), str(REAL / "zk-broker-b")]
        local = Verification(real)
        spark.conf.set(STAGE_FILE_URIS_CONF, "true")  # the way of hdfs:// and the others
        on_cluster = SparkVerification(spark, [f"file://{path}" for path in real])
        found = [json.loads(json.dumps(f.to_json()).replace('"file:///', '"/').replace(" file:///", " /"))
                 for f in on_cluster]
        assert found == [f.to_json() for f in local]
        # a lock behind a URI cannot be probed (unknown, read offline); the real dirs' .lock is unlocked
        assert [(s["broker"], s["read_as"]) for s in on_cluster.summary.log_dirs] == [("unknown", "offline")] * 2
        assert [(s["broker"], s["read_as"]) for s in local.summary.log_dirs] == [("stopped", "offline")] * 2
        for summary in [*on_cluster.target_summaries, *local.target_summaries]:  # `summary` adds these up
            summary.log_dirs = []
        assert on_cluster.summary == local.summary
    finally:
        spark.stop()

"""--spark: a real local Spark session (local[2], started once for the module) runs the library's
own stages on executors. verify gives exactly the single-process findings and summaries (golden,
damaged, rebuilt, real broker dirs, and damaged copies that exercise every cross-segment check);
dump writes every golden batch and record to Parquet as Kafka parsed them; the README's Spark SQL
queries answer what the manifests say."""
from __future__ import annotations

import base64
import collections
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog_tools.spark import plan
from kafkalog_tools.spark.remote import STAGE_FILE_URIS_CONF
from kafkalog_tools.verify import Verification
from tests.conftest import GOLDEN, REAL, ROOT, need
from tests.damage import corpus_paths, damaged_copies

KEY = "user-53"
"""A key written to every golden partition."""
README_KEY_QUERY = """
SELECT topic, partition, offset, timestamp, value
FROM records
WHERE key = 'user-53' AND key_encoding = 'utf8'
ORDER BY topic, partition, offset
"""
README_ABORT_QUERY = """
SELECT b.topic, b.producer_id, count(*) AS aborted_transactions
FROM records r JOIN batches b ON r.file = b.file AND r.batch_position = b.position
WHERE r.control.type = 'ABORT'
GROUP BY b.topic, b.producer_id
ORDER BY b.topic, aborted_transactions DESC
"""


@pytest.fixture(scope="module")
def spark():
    from kafkalog_tools.spark.session import start_session

    session = start_session("local[2]", {"spark.ui.showConsoleProgress": "false"})
    # file:// URIs take the listing and staging path of hdfs:// and the others, which only they can
    # exercise here; test_file_uris_are_read_in_place turns it off
    session.conf.set(STAGE_FILE_URIS_CONF, "true")
    yield session
    session.stop()


def assert_same_as_one_process(spark, paths: list[str], deep: bool = True, stage_2_on: str | None = None):
    from kafkalog_tools.spark.verify import SparkVerification

    local = Verification(paths, deep=deep)
    expected = [f.to_json() for f in local]
    on_spark = SparkVerification(spark, paths, deep=deep, stage_2_on=stage_2_on)
    assert [f.to_json() for f in on_spark] == expected
    assert on_spark.summary == local.summary
    assert on_spark.target_summaries == local.target_summaries
    return expected, on_spark


@pytest.mark.parametrize("deep", [True, False], ids=["deep", "shallow"])
def test_verify_on_spark_equals_one_process_on_the_corpus(spark, deep):
    findings, run = assert_same_as_one_process(spark, corpus_paths(), deep)
    assert run.summary.partitions > 100 and run.summary.segments > 100
    assert {f["code"] for f in findings} >= {"index-missing", "timeindex-preallocated"}


@pytest.mark.parametrize("stage_2_on", ["driver", "executors"])
def test_verify_on_spark_equals_one_process_on_damaged_copies(spark, tmp_path, stage_2_on):
    need(GOLDEN)
    need(REAL)
    findings, _ = assert_same_as_one_process(spark, damaged_copies(tmp_path), stage_2_on=stage_2_on)
    codes = collections.Counter(f["code"] for f in findings)
    # damage located inside segments, and every kind of state carried across segments
    assert set(codes) >= {"crc-mismatch", "offset-not-increasing", "segment-overlap", "leader-epoch-decreased",
                          "producer-sequence-gap", "snapshot-disagrees", "txnindex-unknown-abort",
                          "recovery-point-beyond-log-end"}, codes


def test_units_are_balanced_by_bytes_heaviest_first():
    Unit = collections.namedtuple("Unit", "size")
    sizes = [1000, 900, 800, 10, 10, 10, 10, 10, 300, 300, 300, 300]
    groups = plan.balance([Unit(s) for s in sizes], cores=1)
    totals = [sum(u.size for u in group) for group in groups]
    assert sorted(u.size for g in groups for u in g) == sorted(sizes)
    assert len(groups) == plan.TASKS_PER_CORE and totals == sorted(totals, reverse=True)
    assert max(totals) - min(totals) <= 300  # 3,960 bytes in four groups of ~990
    assert plan.balance([Unit(5)], cores=8) == [[Unit(5)]] and plan.balance([], cores=2) == []


# ---------------------------------------------------------------------------------------------
# The CLI, in a process of its own (it starts and stops its own session)
# ---------------------------------------------------------------------------------------------


def kafkalog(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalog_tools", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})})


SPARK_ARGS = ("--spark", "--master", "local[2]", "--spark-conf", "spark.ui.showConsoleProgress=false")


def test_verify_cli_on_spark_prints_what_one_process_prints_and_writes_parquet(spark, tmp_path):
    paths = [str(GOLDEN / "damaged" / "truncated" / "golden-v2-mixed-0"), str(need(REAL) / "zk-broker-b")]
    single = kafkalog("verify", "--format", "json", *paths)
    on_spark = kafkalog("verify", "--format", "json", *SPARK_ARGS, "--output", str(tmp_path / "out"), *paths)
    assert on_spark.returncode == single.returncode, on_spark.stderr[-2000:]
    lines = [json.loads(line) for line in on_spark.stdout.splitlines()]
    assert [line for line in lines if line["type"] != "path_summary"] == \
        [json.loads(line) for line in single.stdout.splitlines()]
    per_path = {line["path"]: line for line in lines if line["type"] == "path_summary"}
    assert list(per_path) == paths and per_path[paths[0]]["segments"] == 5 and per_path[paths[1]]["partitions"] > 50
    assert sum(s["warnings"] for s in per_path.values()) == lines[-1]["warnings"] > 0
    written = spark.read.parquet(str(tmp_path / "out" / "findings")).collect()
    findings = [line for line in lines if line["type"] == "finding"]
    assert sorted((r.path, r.code, r.file, r.position) for r in written) == \
        sorted((p, f["code"], f["file"], f["position"]) for f in findings for p in paths if f["file"].startswith(p))
    [tail] = [row for row in written if row.code == "truncated-tail"]  # no broker holds the copy: read offline
    assert json.loads(tail.extra)["recovery_drops"] == {"bytes": 302, "first_offset": 2018, "last_offset": 2023,
                                                        "records": 6, "producer_ids": [2001], "open_transactions": []}


@pytest.fixture(scope="module")
def golden_parquet(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dump") / "out"
    result = kafkalog("dump", *SPARK_ARGS, "--output", str(out), str(need(GOLDEN) / "logs"))
    assert result.returncode == 0, result.stderr[-2000:]
    return out


def _bytes(text, encoding):
    if text is None:
        return None
    return base64.b64encode(text.encode("utf-8") if encoding == "utf8" else base64.b64decode(text)).decode()


def test_dump_on_spark_writes_every_golden_batch_and_record_as_kafka_parsed_them(spark, golden_parquet):
    batches = spark.read.parquet(str(golden_parquet / "batches"))
    records = spark.read.parquet(str(golden_parquet / "records"))
    assert spark.read.parquet(str(golden_parquet / "problems")).count() == 0
    ours_batches = {(b.file, b.position): b for b in batches.collect()}
    ours_records = {(r.file, r.offset): r for r in records.collect()}
    expected_batches = expected_records = 0
    for manifest in sorted((GOLDEN / "manifests" / "logs").glob("*/0*.json")):
        segment = json.loads(manifest.read_text())
        partition_dir = manifest.parent.name
        file = str(GOLDEN / "logs" / partition_dir / segment["file"])
        topic, _, partition = partition_dir.rpartition("-")
        for theirs in segment["batches"]:
            expected_batches += 1
            ours = ours_batches[(file, theirs["position"])]
            assert (ours.topic, ours.partition) == (topic, int(partition))
            assert (ours.base_offset, ours.last_offset, ours.size, ours.crc, ours.crc_valid, ours.compression,
                    ours.timestamp_type, ours.max_timestamp, ours.producer_id, ours.producer_epoch,
                    ours.base_sequence, ours.is_transactional, ours.is_control, ours.partition_leader_epoch,
                    ours["count"]) == \
                (theirs["baseOffset"], theirs["lastOffset"], theirs["sizeInBytes"], theirs["crc"], theirs["isValid"],
                 theirs["compression"], theirs["timestampType"], theirs["maxTimestamp"], theirs["producerId"],
                 theirs["producerEpoch"], theirs["baseSequence"], theirs["isTransactional"], theirs["isControl"],
                 theirs["partitionLeaderEpoch"], theirs["count"])
            for record in theirs["records"]:
                expected_records += 1
                ours = ours_records[(file, record["offset"])]
                assert (ours.batch_position, ours.timestamp, ours.sequence, ours.size, ours.key_size,
                        ours.value_size, _bytes(ours.key, ours.key_encoding), _bytes(ours.value, ours.value_encoding),
                        [(h.key, _bytes(h.value, h.value_encoding)) for h in ours.headers]) == \
                    (theirs["position"], record["timestamp"], record["sequence"], record["sizeInBytes"],
                     record["keySize"], record["valueSize"], record["key"], record["value"],
                     [(h["key"], h["value"]) for h in record["headers"]])
                if "controlType" in record:
                    assert (ours.control.type, ours.control.coordinator_epoch) == \
                        (record["controlType"], record.get("coordinatorEpoch"))
    assert (batches.count(), records.count()) == (expected_batches, expected_records)
    assert expected_records > 5000


def test_readme_queries_answer_what_the_manifests_say(spark, golden_parquet):
    readme = (ROOT / "README.md").read_text()
    assert README_KEY_QUERY.strip() in readme and README_ABORT_QUERY.strip() in readme
    spark.read.parquet(str(golden_parquet / "batches")).createOrReplaceTempView("batches")
    spark.read.parquet(str(golden_parquet / "records")).createOrReplaceTempView("records")
    with_key, aborts = [], collections.Counter()
    for manifest in sorted((GOLDEN / "manifests" / "logs").glob("*/0*.json")):
        topic, _, partition = manifest.parent.name.rpartition("-")
        for batch in json.loads(manifest.read_text())["batches"]:
            for record in batch["records"]:
                if record.get("controlType") == "ABORT":
                    aborts[(topic, batch["producerId"])] += 1
                elif not batch["isControl"] and record["key"] == base64.b64encode(KEY.encode()).decode():
                    with_key.append((topic, int(partition), record["offset"], record["timestamp"]))
    found = [(r.topic, r.partition, r.offset, r.timestamp) for r in spark.sql(README_KEY_QUERY).collect()]
    assert found == sorted(with_key) and len({(t, p) for t, p, *_ in found}) == 6
    answer = {(r.topic, r.producer_id): r.aborted_transactions for r in spark.sql(README_ABORT_QUERY).collect()}
    assert answer == dict(aborts) and len(answer) == 4


def test_spark_without_pyspark_says_how_to_install_it(tmp_path):
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text("import sys\nsys.modules['pyspark'] = None\n")
    result = kafkalog("verify", "--spark", str(ROOT / "fixtures"), env={"PYTHONPATH": f"{tmp_path}:{ROOT}"})
    assert result.returncode == 2
    assert "pip install 'kafkalog-tools[spark]'" in result.stderr and "Traceback" not in result.stderr


def test_importing_the_cli_never_imports_pyspark():
    code = ("import sys, kafkalog_tools.cli, kafkalog_tools.commands.verify, kafkalog_tools.commands.dump\n"
            "assert 'pyspark' not in sys.modules, 'pyspark imported'")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


@pytest.mark.parametrize("args, message", [
    (("verify", "--output", "x", "fixtures"), "only applies with --spark"),
    (("dump", "--master", "local[1]", "fixtures"), "only applies with --spark"),
    (("verify", "--verbose", "fixtures"), "--verbose only applies with --spark"),
    (("dump", "--spark", "fixtures"), "give --output DIR"),
    (("dump", "--spark", "--output", "fixtures", "fixtures"), "nothing is overwritten"),
    (("verify", "--spark", "--spark-conf", "nonsense", "fixtures"), "key=value"),
    (("dump", "--spark", "--strict", "--output", "x", "fixtures"), "--strict does not apply with --spark"),
    (("verify", "--spark", "--strict", "fixtures"), "--strict does not apply with --spark"),
    (("verify", "hdfs://namenode:8020/kafka-logs"), "a Hadoop URI is read only with --spark"),
    (("dump", "s3a://bucket/kafka-logs"), "a Hadoop URI is read only with --spark"),
])
def test_spark_usage_errors_exit_2_before_any_session(args, message):
    result = kafkalog(*args)
    assert result.returncode == 2 and message in result.stderr


# ---------------------------------------------------------------------------------------------
# Hadoop URIs: listed through Spark's JVM, staged on executors through pyarrow.fs. Only file://
# can run here (no HDFS, S3 or GCS); it takes the very same listing and staging path.
# ---------------------------------------------------------------------------------------------


def _uri(path) -> str:
    return f"file://{path}"


def _local(obj):
    """A finding or row as the single process names it (file:// URIs back to paths)."""
    return json.loads(json.dumps(obj).replace('"file:///', '"/').replace(" file:///", " /"))


def _no_staging_left(before: set) -> bool:
    return set(Path(os.environ.get("TMPDIR", "/tmp")).glob("kafkalog-stage-*")) <= before


@pytest.mark.parametrize("stage_2_on", ["driver", "executors"])
def test_verify_on_spark_reads_file_uris_as_one_process_reads_the_paths(spark, tmp_path, stage_2_on):
    need(GOLDEN)
    need(REAL)
    partition = sorted((GOLDEN / "logs").iterdir())[0]
    segment = sorted(partition.glob("*.log"))[1]  # on its own: stage 2 replays the .log before it
    paths = damaged_copies(tmp_path) + [str(REAL / "zk-broker-a"), str(segment)]
    before = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("kafkalog-stage-*"))
    from kafkalog_tools.formats.logdir import looks_like_partition_dir
    from kafkalog_tools.spark.verify import SparkVerification

    local = Verification(paths)
    expected = [f.to_json() for f in local]
    # one path stays local: a run may mix both
    on_spark = SparkVerification(spark, [_uri(p) for p in paths[:-2]] + [paths[-2], _uri(paths[-1])],
                                 stage_2_on=stage_2_on)
    found = [f.to_json() for f in on_spark]
    assert [_local(f) for f in found] == expected
    assert all(f["file"].startswith("file:///") for f in found if not f["file"].startswith(paths[-2]))
    # a lock behind a URI cannot be probed: unknown, read offline, as none of these copies is locked
    assert [state for summary in on_spark.target_summaries for state in summary.log_dirs
            if state["log_dir"].startswith("file://")] == [
        {"log_dir": _uri(log_dir), "broker": "unknown", "read_as": "offline",
         "reason": "behind a URI: its lock cannot be probed from here"}
        for log_dir in [Path(path).parent if looks_like_partition_dir(Path(path)) else path for path in paths[:-2]]
        + [Path(paths[-1]).parent.parent]]
    assert [state["read_as"] for summary in local.target_summaries for state in summary.log_dirs] == \
        ["offline"] * len(paths)
    for summary in [on_spark.summary, local.summary, *on_spark.target_summaries, *local.target_summaries]:
        summary.log_dirs = []
    assert on_spark.summary == local.summary and on_spark.target_summaries == local.target_summaries
    assert on_spark.paths[0].startswith("file:///") and local.summary.errors > 0
    assert _no_staging_left(before)


def test_file_uris_are_read_in_place(spark, tmp_path, monkeypatch):
    """By default a file:// URI is its own path on every node: nothing is listed through the JVM or
    copied, and the findings are those of the staged run, naming the URIs (roots nested in one
    another included)."""
    need(REAL)
    from kafkalog_tools.spark import remote
    from kafkalog_tools.spark.verify import SparkVerification

    paths = damaged_copies(tmp_path) + [str(REAL / "zk-broker-a")]
    paths.append(str(min(p for p in Path(paths[-1]).iterdir() if p.is_dir())))  # inside a log dir also given
    expected = [f.to_json() for f in SparkVerification(spark, [_uri(p) for p in paths])]  # staged
    before = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("kafkalog-stage-*"))
    spark.conf.set(STAGE_FILE_URIS_CONF, "false")
    try:
        monkeypatch.setattr(remote, "_copy", lambda file: pytest.fail(f"{file.uri} was copied"))
        in_place = SparkVerification(spark, [_uri(p) for p in paths])
        assert [f.to_json() for f in in_place] == expected and expected
        assert set(Path(os.environ.get("TMPDIR", "/tmp")).glob("kafkalog-stage-*")) == before
        assert all(f["file"].startswith("file:///") for f in expected)
    finally:
        spark.conf.set(STAGE_FILE_URIS_CONF, "true")


def test_a_uri_tree_is_listed_in_as_many_jvm_calls_whatever_its_size(spark, tmp_path):
    """Listing is bulk: a log dir of 400 partitions takes the Py4J round trips one of 40 takes (its
    partition dirs listed by executors), one of 4 fewer (listed by the driver, no job), and every
    way lists every entry as os.scandir sees it (sizes and mtimes too)."""
    from kafkalog_tools.spark.remote import LISTING_JOB_MIN_DIRS, HadoopLayout

    client = spark.sparkContext._gateway._gateway_client
    counted = []
    sizes = {}
    for partitions in (4, 40, 400):
        root = tmp_path / f"logs-{partitions}"
        for number in range(partitions):
            directory = root / f"topic-{number}"
            directory.mkdir(parents=True)
            for suffix, size in ((".log", number), (".index", 8), (".timeindex", 12)):
                (directory / f"{0:020d}{suffix}").write_bytes(b"x" * size)
        (directory / "nested").mkdir()  # a directory inside a partition dir: listed, not descended into
        (directory / "nested" / "ignored").touch()
        (directory / "to-log").symlink_to(f"{0:020d}.log")  # followed, as Hadoop's listing follows it
        (directory / "dangling").symlink_to("nowhere")  # left out, as Hadoop's listing leaves it
        os.mkfifo(directory / "pipe")  # neither a file nor a directory, as os.scandir says
        (root / "meta.properties").write_text("version=0\n")
        send = client.send_command
        calls = []
        # (py4j's "m" commands free proxies that Python's garbage collector let go, whenever it runs)
        client.send_command = lambda command, *args, **kwargs: (
            calls.append(1) if not command.startswith("m\n") else None, send(command, *args, **kwargs))[1]
        try:
            layout = HadoopLayout(spark, [_uri(root)])
        finally:
            del client.send_command
        counted.append(len(calls))
        local = layout.local_paths[0]
        for path in root.rglob("*"):
            staged = f"{local}/{path.relative_to(root)}"
            if path.name in ("ignored", "dangling", "pipe"):  # not listed, or not a file to copy
                assert not layout.remote_files([staged])
            elif path.name == "nested":
                assert [e.is_dir() for e in layout.scandir(Path(staged).parent) if e.name == "nested"] == [True]
            elif path.is_dir():
                assert [(e.name, e.is_dir(), e.is_file(), e.is_symlink()) for e in layout.scandir(Path(staged))] == \
                    sorted((e.name, e.is_dir(), e.is_file(), False) for e in os.scandir(path) if e.name != "dangling")
                assert layout.is_dir(Path(staged))
            else:
                sizes[str(path)] = (layout.size(Path(staged)), layout.remote_files([staged])[0].mtime_ms)
                assert sizes[str(path)] == (path.stat().st_size, path.stat().st_mtime_ns // 1_000_000)
        layout.close()
    assert 4 < LISTING_JOB_MIN_DIRS <= 40
    assert counted[0] < counted[1] == counted[2], counted
    assert len(sizes) == (4 + 40 + 400) * 3 + 3 * 2


def test_dump_on_spark_writes_file_uris_as_it_writes_the_paths(spark, tmp_path, golden_parquet):
    from kafkalog_tools import dump as d
    from kafkalog_tools.spark.dump import write_parquet

    result = write_parquet(spark, [_uri(GOLDEN / "logs")], str(tmp_path / "out"), d.DumpOptions(deep=True))
    assert (result.problems, result.unreadable) == ([], [])
    for dataset in ("batches", "records"):
        ours = spark.read.parquet(str(tmp_path / "out" / dataset)).collect()
        theirs = spark.read.parquet(str(golden_parquet / dataset)).collect()
        assert all(row.file.startswith("file:///") for row in ours)
        assert sorted(json.dumps(_local(row.asDict(recursive=True)), sort_keys=True) for row in ours) == \
            sorted(json.dumps(row.asDict(recursive=True), sort_keys=True) for row in theirs)
    assert result.records == len(theirs) > 5000


def test_a_uri_that_cannot_be_read_is_one_message(spark, tmp_path):
    from kafkalog_tools.errors import InputError
    from kafkalog_tools.spark.verify import SparkVerification

    with pytest.raises(InputError, match=r"^abfs://acct/x: abfs:// is not readable with --spark; readable: file://"):
        SparkVerification(spark, ["abfs://acct/x"])
    with pytest.raises(InputError, match=r"hdfs://namenode:8020/logs: cannot open hdfs:// from Python .*libhdfs"):
        SparkVerification(spark, ["hdfs://namenode:8020/logs"])  # no Hadoop install here: pyarrow cannot load it
    with pytest.raises(InputError, match=r"file:///nowhere/logs: cannot read through Spark's Hadoop FileSystem: "
                                         r"java.io.FileNotFoundException"):
        SparkVerification(spark, ["file:///nowhere/logs"])
    # a file gone between the listing and its copy on an executor: Spark's task error, as one line
    partition = tmp_path / "golden-v2-mixed-0"
    shutil.copytree(need(GOLDEN) / "logs" / "golden-v2-mixed-0", partition)
    run = SparkVerification(spark, [_uri(partition)])
    gone = sorted(partition.glob("*.log"))[0]
    gone.unlink()
    with pytest.raises(InputError, match=rf"^{_uri(gone)}: cannot copy to .* for reading: .*"):
        list(run)



def test_dump_on_spark_counts_a_crc_mismatch_as_one_process_does(spark, tmp_path):
    """A batch whose bytes changed after it was written is a row with crc_valid false AND a problem
    (exit 1), with or without --spark."""
    from kafkalog_tools import dump as d
    from kafkalog_tools.formats.segment import SegmentFile
    from kafkalog_tools.spark.dump import write_parquet

    work = tmp_path / "golden-v2-mixed-0"
    shutil.copytree(need(GOLDEN / "logs" / "golden-v2-mixed-0"), work)
    log = sorted(work.glob("*.log"))[0]
    with SegmentFile(log) as segment:
        batch = next(b for b in segment.batches() if b.size > 200)
        position = batch.position
    data = bytearray(log.read_bytes())
    data[position + 150] ^= 0x01
    log.chmod(0o644)
    log.write_bytes(bytes(data))

    result = write_parquet(spark, [str(work)], str(tmp_path / "out"), d.DumpOptions(deep=True))
    errors = [row for row in result.problems if row[1] == "error"]
    assert [(row[0], row[2], row[3]) for row in errors] == [("crc_mismatch", str(log), position)]
    assert kafkalog("dump", "--format", "json", str(work)).returncode == 1


def test_verify_on_spark_reads_the_end_of_an_active_segment_as_the_broker_lock_says(spark, tmp_path):
    """The driver probes the log dir's lock; executors read the active segment's end accordingly:
    unlocked, the truncated-tail error with what recovery drops (also behind a file:// URI, whose
    lock cannot be probed); locked by another process, the write in progress - as one process."""
    from kafkalog_tools.spark.verify import SparkVerification
    from tests.test_evidence_safety import broker_lock

    logs = tmp_path / "logs"
    shutil.copytree(need(GOLDEN) / "damaged" / "truncated", logs)
    for path in logs.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    (logs / ".lock").touch()
    drops = {"bytes": 302, "first_offset": 2018, "last_offset": 2023, "records": 6, "producer_ids": [2001],
             "open_transactions": []}
    findings, run = assert_same_as_one_process(spark, [str(logs)])
    [tail] = [f for f in findings if f["code"] == "truncated-tail"]
    assert (tail["position"], tail["recovery_drops"]) == (34819, drops)
    assert [state["broker"] for state in run.summary.log_dirs] == ["stopped"]
    behind_uri = [f.to_json() for f in SparkVerification(spark, [_uri(logs)])]
    assert [_local(f) for f in behind_uri if f["code"] == "truncated-tail"] == [tail]
    with broker_lock(logs):
        findings, run = assert_same_as_one_process(spark, [str(logs)])
    assert [(f["severity"], f["position"]) for f in findings if f["code"] in ("truncated-tail", "still-being-written")
            ] == [("warning", 34819)]
    assert [state["broker"] for state in run.summary.log_dirs] == ["running"] and run.summary.errors == 0

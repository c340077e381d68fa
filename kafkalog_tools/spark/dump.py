"""`dump --spark --output DIR`: batches and records as Parquet datasets partitioned by topic and
partition, read on executors by `dump.dump_file` - the single-process dump's own reader."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from .. import dump as d
from ..broker import BrokerStates
from ..errors import InputError
from ..formats import logdir
from . import jobs, plan, schemas
from .remote import HadoopLayout
from .session import task_errors

DATASETS = ("batches", "records", "problems")


@dataclass
class DumpResult:
    batches: int = 0
    records: int = 0
    problems: list[tuple] = field(default_factory=list)
    """Problem rows (schemas.PROBLEM_FIELDS + topic, partition), also written to `problems/`."""
    unreadable: list[str] = field(default_factory=list)
    """Why each path given that could not be read at all could not be."""


def dump_units(paths: list[str], layout: HadoopLayout, read_as: str | None = None
               ) -> tuple[list[jobs.DumpUnit], list[InputError]]:
    """Every .log (and KRaft snapshot) under the paths given (`layout.local_paths`), with its topic,
    partition and the broker state of its log dir (probed here, on the driver)."""
    units, unreadable = [], []
    brokers = BrokerStates(read_as, layout.broker_lock)
    for given in paths:
        try:
            found = logdir.classify(given, layout)
        except InputError as exc:
            unreadable.append(exc)
            continue
        if isinstance(found, logdir.LogDir):
            partitions = found.partitions
        elif isinstance(found, logdir.PartitionDir):
            partitions = [found]
        else:
            parsed = logdir.parse_partition_dir_name(os.path.basename(os.path.dirname(os.path.abspath(given))))
            remote = layout.remote_files([given])
            if d.kind_of(given) in ("log", "checkpoint"):
                units.append(jobs.DumpUnit(os.path.abspath(given), parsed[0] if parsed else None,
                                           parsed[1] if parsed else None, layout.size(given),
                                           _is_last_segment(given, layout) if remote else None, remote,
                                           brokers.of_file(given)))
            continue
        for partition in partitions:
            broker = brokers.of_partition(partition.path)
            last = partition.segments[-1].base_offset if partition.segments else None
            files = [(s.log, s.base_offset == last) for s in partition.segments if s.log is not None]
            files += [(path, False) for path in partition.kraft_snapshots]
            units.extend(jobs.DumpUnit(str(path), partition.topic, partition.partition, layout.size(path), active,
                                       layout.remote_files([path]), broker)
                         for path, active in files)
    return units, unreadable


def write_parquet(spark, paths: list[str], output: str, options: d.DumpOptions, bytes_mode: str = "auto") -> DumpResult:
    """Dump every batch and record under `paths` (local paths or Hadoop URIs) to
    `output`/{batches,records,problems}."""
    layout = HadoopLayout(spark, paths)
    try:
        with task_errors():
            return _write_parquet(spark, layout, output, options, bytes_mode)
    finally:
        layout.close()


def _write_parquet(spark, layout: HadoopLayout, output: str, options: d.DumpOptions, bytes_mode: str) -> DumpResult:
    from pyspark import StorageLevel

    units, unreadable = dump_units(layout.local_paths, layout, options.read_as)
    result = DumpResult(unreadable=[layout.to_uri(str(error)) for error in unreadable])
    sc = spark.sparkContext
    groups = plan.balance(units, sc.defaultParallelism)
    rows = sc.parallelize(groups, max(1, len(groups))).flatMap(
        partial(jobs.dump_rows, options=options, bytes_mode=bytes_mode,
                max_bytes_given=options.max_bytes is not None))
    rows.persist(StorageLevel.MEMORY_AND_DISK)  # one read of the segments for the three datasets
    try:
        for kind, dataset, schema in (("batch", "batches", schemas.batch_schema()),
                                      ("record", "records", schemas.record_schema())):
            frame = spark.createDataFrame(rows.filter(lambda row, kind=kind: row[0] == kind).map(lambda row: row[1]),
                                          schema)
            frame.write.partitionBy("topic", "partition").parquet(f"{output}/{dataset}")
        result.problems = rows.filter(lambda row: row[0] == "problem").map(lambda row: row[1]).collect()
    finally:
        rows.unpersist()
    spark.createDataFrame(result.problems, schemas.problem_schema()).coalesce(1).write.parquet(f"{output}/problems")
    result.batches = spark.read.schema(schemas.batch_schema()).parquet(f"{output}/batches").count()
    result.records = spark.read.schema(schemas.record_schema()).parquet(f"{output}/records").count()
    return result


def _is_last_segment(path: str, layout: HadoopLayout) -> bool:
    """Whether a file given on its own is its partition's last .log (its staged copy's directory
    cannot tell)."""
    partition = logdir.read_partition_dir(Path(path).parent, layout)
    logs = [segment for segment in partition.segments if segment.log is not None]
    return bool(logs) and str(logs[-1].log) == path

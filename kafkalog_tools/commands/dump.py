"""`kafkalog dump`: the CLI over `kafkalog_tools.dump`."""
from __future__ import annotations

import dataclasses
import os
import re
import sys

import click

from .. import codecs
from .. import dump as d
from ..errors import InputError
from ..timestamps import parse_timestamp
from ..output import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, FORMATS, LineWriter, choose_format
from ..output import dumplog_text, jsonl
from ..spark.options import check_spark_usage, spark_options
from . import read_as_options, stop_strictly, strict_option

DECODER_CHOICES = ("auto", "none", "consumer-offsets", "transaction-log", "cluster-metadata", "share-group-state",
                   "remote-log-metadata")
KAFKA_DECODER_FLAGS = {"offsets_decoder": "consumer-offsets", "transaction_log_decoder": "transaction-log",
                       "cluster_metadata_decoder": "cluster-metadata", "share_group_state_decoder": "share-group-state",
                       "remote_log_metadata_decoder": "remote-log-metadata"}
"""kafka-dump-log's decoder options (each implies --print-data-log) and the decoder each names."""


def parse_time(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _regex(ctx, param, value):
    if value is None:
        return None
    try:
        return re.compile(value)
    except re.error as exc:
        raise click.BadParameter(f"not a regular expression: {exc}") from None


@click.command("dump")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--format", "output_format", type=click.Choice(FORMATS),
              help="text: kafka-dump-log.sh's output; json: JSON Lines; table: rich tables. "
                   "Default: table on a terminal, json on a pipe.")
@click.option("-d", "--deep-iteration", is_flag=True, help="Decode every record of every batch.")
@click.option("-p", "--print-data-log", is_flag=True, help="Show keys and values (implies --deep-iteration).")
@click.option("--skip-record-metadata", is_flag=True, help="Text format: print only keys and values of records.")
@click.option("--bytes", "bytes_mode", type=click.Choice(("auto", "base64")), default="auto", show_default=True,
              help="JSON: keys and values as UTF-8 text when valid (auto) or always base64.")
@click.option("--decoder", type=click.Choice(DECODER_CHOICES), default="auto", show_default=True,
              help="Payload decoder; auto picks one by topic directory name (__consumer_offsets, "
                   "__transaction_state, __cluster_metadata, __share_group_state, __remote_log_metadata).")
@click.option("--offsets-decoder", is_flag=True, help="As kafka-dump-log: --decoder consumer-offsets -p.")
@click.option("--transaction-log-decoder", is_flag=True, help="As kafka-dump-log: --decoder transaction-log -p.")
@click.option("--cluster-metadata-decoder", is_flag=True, help="As kafka-dump-log: --decoder cluster-metadata -p.")
@click.option("--share-group-state-decoder", is_flag=True, help="As kafka-dump-log: --decoder share-group-state -p.")
@click.option("--remote-log-metadata-decoder", is_flag=True,
              help="As kafka-dump-log: --decoder remote-log-metadata -p.")
@click.option("--from-offset", type=int, help="Only batches/records with offsets >= this.")
@click.option("--to-offset", type=int, help="Only batches/records with offsets <= this.")
@click.option("--from-time", help="Only records with timestamps >= this (epoch ms or ISO-8601).")
@click.option("--to-time", help="Only records with timestamps <= this (epoch ms or ISO-8601).")
@click.option("--producer-id", type=int, help="Only batches of this producer id.")
@click.option("--key", help="Only records whose key is exactly this (UTF-8).")
@click.option("--key-regex", callback=_regex, help="Only records whose key (as UTF-8) matches this regex.")
@click.option("--max-bytes", type=click.IntRange(min=0),
              help="Read only the first N bytes of each .log (KIP-824); no trailing-bytes report.")
@click.option("--max-decompressed", type=click.IntRange(min=1), default=codecs.DEFAULT_LIMIT, show_default=True,
              help="Largest decompressed batch accepted; larger is reported as a decompression bomb.")
@read_as_options
@strict_option("problem (a corrupt or truncated batch, a bad CRC, an unreadable file)")
@spark_options("With --spark (required then): write DIR/batches and DIR/records, Parquet datasets partitioned "
               "by topic and partition with the JSON Lines field names, and DIR/problems.")
def command(paths, output_format, deep_iteration, print_data_log, skip_record_metadata, bytes_mode, decoder,
            from_offset, to_offset, from_time, to_time, producer_id, key, key_regex, max_bytes, max_decompressed,
            read_as, strict, use_spark, master, spark_conf, verbose, output, **kafka_decoder_flags):
    """Print the batches, records and index entries of segments, partitions or whole log dirs.

    PATH is a .log, .index, .timeindex, .txnindex, .snapshot or checkpoint file, a partition
    directory, or a log directory (walked in topic, partition and offset order). Files Kafka does
    not keep are listed, never fatal. Nothing is written or created.

    A partial or zero-filled end of a partition's active segment is a write in progress (a note) while
    a broker holds the lock on <log dir>/.lock, and otherwise what Kafka's recovery truncates after a
    crash (a problem); --live / --offline say which instead.

    With --spark --output DIR, every batch and record of the .log segments (and KRaft snapshots)
    under PATH is written as Parquet instead, read on Spark executors; filters apply. PATH may then
    also be a Hadoop URI (hdfs://, s3a://, gs://, file://).

    Exit codes: 0 clean; 1 problems in the data (corrupt or truncated batches, bad CRCs,
    unreadable structures); 2 usage error, or a path that cannot be read at all.
    """
    for flag, name in KAFKA_DECODER_FLAGS.items():
        if kafka_decoder_flags[flag]:
            decoder, print_data_log = name, True
    options = d.DumpOptions(
        deep=deep_iteration or print_data_log,
        print_data=print_data_log,
        decoder=None if decoder == "none" else decoder,
        filters=d.Filters(from_offset=from_offset, to_offset=to_offset, from_time=parse_time(from_time),
                          to_time=parse_time(to_time), producer_id=producer_id,
                          key=None if key is None else key.encode("utf-8", "surrogateescape"),  # argv's own bytes
                          key_regex=key_regex),
        max_bytes=max_bytes,
        decompress_limit=max_decompressed,
        read_as=read_as,
    )
    conf = check_spark_usage(use_spark, master, spark_conf, output, paths, strict, output_needed=True,
                             verbose=verbose)
    if use_spark:
        from ..spark.uri import is_uri

        sys.exit(_dump_on_spark([p if is_uri(p) else os.path.abspath(p) for p in paths],
                                dataclasses.replace(options, deep=True),
                                bytes_mode, master, conf, output, verbose))
    output_format = choose_format(output_format)
    writer = LineWriter()
    # JSON Lines renders BatchRun items, and text where its bytes are UTF-8 (as they are written beneath)
    options.batch_runs = output_format == "json" or (output_format == "text" and writer.utf8)
    problems = 0
    unreadable = 0  # paths that cannot be read at all: an I/O error (exit 2), as InputError is everywhere
    table = None
    if output_format == "table":
        from ..output.table import TableRenderer

        table = TableRenderer()
    json_output, write_lines, write_block, batch_item = (output_format == "json", writer.write_lines,
                                                         writer.write_block, d.BatchItem)
    for item in d.dump(list(paths), options):
        if type(item) is batch_item:  # nearly every item: _is_problem's answer for a batch, inline
            problem = not item.batch.crc_valid
        else:
            problem = _is_problem(item, max_bytes is not None)
            unreadable += isinstance(item, d.Problem) and isinstance(item.error, InputError)
        problems += problem
        if json_output:
            write_block(jsonl.block(item, bytes_mode))
        elif type(item) is d.BatchRun:
            write_block(dumplog_text.run_block(item, print_data=options.print_data, skip_metadata=skip_record_metadata,
                                               decompress_limit=max_decompressed))
        elif isinstance(item, d.Problem):
            if table:
                table.flush()
            click.echo(f"kafkalog: {item.severity}: {item.error}", err=True)
        elif isinstance(item, d.UnknownFile):
            click.echo(f"Ignoring unknown file {item.path} ({item.reason})", err=True)
        elif table:
            table.add(item)
        else:
            write_lines(dumplog_text.lines(item, print_data=options.print_data, max_bytes_given=max_bytes is not None,
                                           skip_metadata=skip_record_metadata))
        if not json_output and isinstance(item, d.Trailing) and item.still_being_written:
            click.echo(f"kafkalog: note: {item.path}: byte {item.position}: {item.size} bytes: {item.reason}", err=True)
        if problem and strict:
            sys.stdout.flush()
            stop_strictly(_problem_text(item))
            break
    if table:
        table.flush()
    sys.stdout.flush()
    sys.exit(EXIT_USAGE if unreadable else EXIT_PROBLEMS if problems else EXIT_OK)


def _dump_on_spark(paths, options, bytes_mode, master, conf, output, verbose: bool) -> int:
    from ..spark.dump import write_parquet
    from ..spark.session import start_session

    spark = start_session(master, conf, verbose=verbose)
    try:
        result = write_parquet(spark, paths, output, options, bytes_mode)
    finally:
        spark.stop()
    for error in result.unreadable:
        click.echo(f"kafkalog: error: {error}", err=True)
    for problem in result.problems:
        row = dict(zip(("type", "severity", "file", "position", "message"), problem))
        where = row["file"] if row["position"] is None else f"{row['file']}: byte {row['position']}"
        severity = "note" if row["severity"] == "info" else row["severity"]  # a write still in progress
        click.echo(f"kafkalog: {severity}: {where}: {row['message']}", err=True)
    click.echo(f"{result.batches:,} batches and {result.records:,} records written to {output} "
               f"(batches/, records/, problems/: {len(result.problems):,})", err=True)
    problems = [problem for problem in result.problems if problem[1] != "info"]
    return EXIT_USAGE if result.unreadable else EXIT_PROBLEMS if problems else EXIT_OK


def _is_problem(item, max_bytes_given: bool) -> bool:
    if isinstance(item, d.Problem):
        return True
    if isinstance(item, d.BatchItem):
        return not item.batch.crc_valid
    if isinstance(item, d.Trailing):
        return not max_bytes_given and not item.still_being_written
    return False


def _problem_text(item) -> str:
    if isinstance(item, d.Problem):
        return str(item.error)
    if isinstance(item, d.BatchItem):
        return f"{item.batch.path}: byte {item.batch.position}: the batch fails its CRC (stored {item.batch.crc})"
    return f"{item.path}: byte {item.position}: {item.size} bytes after the last batch: {item.reason}"

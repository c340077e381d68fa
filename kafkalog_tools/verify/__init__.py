"""Verification of log directories, partitions and segments: everything Kafka's own loading would
trip over, and nothing that Kafka itself wrote and considers valid.

Sources: FORMAT.md section 2.7 (segment iteration), 3 (indexes and their sanity checks), 4.3 (what
an index entry means, by version and write path), 4.4 (loading), 6 (snapshots, checkpoints).

Indexes are checked by meaning, never by byte equality with a rebuild: live appends, follower
appends, restarts and old brokers all write entries that differ from recovery's and are valid.
What is really wrong is reported: entries out of order, positions off batch boundaries, offsets
that do not exist, a lookup that would start after its target, time entries claiming timestamps
the data does not hold, a missing final time entry or a preallocated tail on a closed segment.

Damage (a truncated tail, a corrupt batch, a zero-filled region) is reported with its exact byte
range; the scan then resynchronises - the next position where a plausible header with a valid CRC
starts - and says how much intact data follows.

`Verification` streams `Finding`s and totals them in `summary`. Nothing is ever written.

Where things are, each module importing only those before it:
- findings.py: `Finding`, `Summary`, severities; the order of findings at one position.
- indexes.py: the offset and time indexes against a segment's batches, the .txnindex on its own.
- bulk.py: stage 1 over runs of batches the compiled scan (`native`) read.
- segment.py: stage 1, one segment's own files (`check_segment`), and the facts it hands on; a big
  segment's byte ranges walked apart (`check_range`) and put together as one walk reads them.
- partition.py: stage 2, a partition over those facts (`check_partition`): offset order, leader
  epochs, producer state and snapshots, transaction indexes.
- verification.py: `Verification` over the paths given, and a log dir's own files.
"""
from .findings import ERROR, INFO, MAX_FINDINGS_PER_CODE, WARNING, Finding, ProgressCallback, Summary
from .partition import PartitionOutcome, check_partition
from .segment import BatchConsumer, BatchFacts, FactsRun, RangeReport, SegmentReport, check_range, check_segment
from .verification import BatchWatcher, Verification

__all__ = ["ERROR", "INFO", "MAX_FINDINGS_PER_CODE", "WARNING", "BatchConsumer", "BatchFacts", "BatchWatcher", "FactsRun",
           "Finding", "PartitionOutcome", "ProgressCallback", "RangeReport", "SegmentReport", "Summary",
           "Verification", "check_partition", "check_range", "check_segment"]

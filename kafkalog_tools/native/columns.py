"""The column layout the compiled kernels and their callers share: int64 arrays, one row a field
(a column a batch or a record), and the rows' indices. The bottom of `native`: it imports only the
formats it lays out, so the kernels, their loader and the scan all build on it.

- `COLUMNS`: a V2 batch header's fields, as `bulk_scan` reads them (verify, rebuild-index, dump).
- `RECOVERY_STATE`: rebuild-index's state carried from call to call (`recovery_index`).
- `STRETCH_FIELDS`: what verify's scan of a big segment says of the batches it folded (`scan_outlined`).
- `RECORD_COLUMNS`, `HEADER_COLUMNS`, `LEGACY_RECORD_COLUMNS`, `RUN_BATCH_FIELDS`: dump's records,
  headers and batches decoded into columns (`decode_each`, `decode_legacy_each`).
- `TEXT_PIECES`, `DUMPLOG_PIECES`: the constant texts the two renderers write lines with.

The field offsets come from `BATCH_HEADER`, the schema in formats/record_batch.py.
"""
from __future__ import annotations

from ..formats import legacy, record_batch, txn_index
from ..schema import struct_fields

CAPACITY = 1 << 14
"""Batches per call, unless the caller says (`bulk_scan.Reader.ROWS`); it also bounds each call's bytes."""


def spread(capacity: int) -> int:
    """The row length to give a [fields, capacity] int64 array the kernels fill a column at a time:
    `capacity` or a little more, an odd number of 64-byte cache lines, so that its rows start in
    different cache sets. With a power of two every row began at the same address modulo 4 KiB,
    the scan's 15 stores per batch all fell in one 8-way L1 set and evicted each other: the scan of
    a 256 MiB KRaft segment took 0.136 s, with rows one line apart 0.073 s."""
    lines = -(-capacity // 8)
    return 8 * (lines | 1)

COLUMNS = ("position", "size", "base_offset", "last_offset_delta", "partition_leader_epoch", "attributes",
           "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "records_count",
           "checked", "marker", "coordinator_epoch")
"""`checked` (deep scans): 1 when the records were walked and agree with the header (count, offset
deltas, max timestamp); 0 when the per-batch path must read them (compressed, control, or odd).
`marker`: for a transaction marker in the one shape Kafka writes (`kernels.plain_marker`), its
control type (0 ABORT, 1 COMMIT) and `coordinator_epoch` its EndTransactionMarker's; -1 and 0 for
any other batch, whose control records, if any, only the per-batch path reads."""
(POSITION, SIZE, BASE_OFFSET, LAST_OFFSET_DELTA, LEADER_EPOCH, ATTRIBUTES, BASE_TIMESTAMP, MAX_TIMESTAMP,
 PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE, RECORDS_COUNT, CHECKED, MARKER, COORDINATOR_EPOCH) = range(len(COLUMNS))
NOT_A_MARKER = -1
"""`marker` of every batch but a transaction marker the kernel read."""


OUTLINE_FIELDS = ("compressed", "bytes", "records", "largest_last", "largest_producer", "ascending", "epochs_rise",
                  "epoch_changes")
"""What `kernels.rows_apart` learns of a run in its pass, so that stage 2 need not pass over it again
in numpy: how many compressed batches wait to be walked; the sums of `size` and `records_count`;
the largest last offset (base + delta, wrapping as numpy's int64 does) and producer id (-1: none);
1 when every delta is >= 0 and every base offset above the last offset before it; 1 when every
leader epoch is >= 0 and none falls, and how many rows start another one."""
(RO_COMPRESSED, RO_BYTES, RO_RECORDS, RO_LARGEST_LAST, RO_LARGEST_PRODUCER, RO_ASCENDING, RO_EPOCHS_RISE,
 RO_EPOCH_CHANGES) = range(len(OUTLINE_FIELDS))


STRETCH_FIELDS = ("folded", "kept", "in_order", "largest_timestamp", "first_base", "first_position", "first_last",
                  "epoch", "last_last", "records", "bytes", "after", "stopped")
"""What `kernels.scan_outlined` says of a call: how many batches it folded into a stretch without
keeping their columns, and the rows of them it kept for the index checks; whether those were in
order (`keep_asked`) and the largest max timestamp after them; the stretch's first base offset,
position and last offset, its one leader epoch, its last last offset, records and bytes; where the
next entry starts, and 1 where the call stopped before an entry it cannot vouch for."""
(S_FOLDED, S_KEPT, S_IN_ORDER, S_LARGEST_TIMESTAMP, S_FIRST_BASE, S_FIRST_POSITION, S_FIRST_LAST, S_EPOCH, S_LAST_LAST,
 S_RECORDS, S_BYTES, S_AFTER, S_STOPPED) = range(len(STRETCH_FIELDS))


def _field_offsets() -> dict[str, int]:
    """Where each header field starts, from the schema."""
    offsets, at = {}, 0
    for name, field in struct_fields(record_batch.BATCH_HEADER):
        offsets[name] = at
        at += field.sizeof()
    return offsets


FIELD_AT = _field_offsets()


# recovery_index's state (rebuild-index), an int64 array carried from call to call
(VALID_BYTES, LAST_INDEXED_POSITION, MAX_TIMESTAMP_SO_FAR, OFFSET_OF_MAX_TIMESTAMP, INDEX_INTERVAL, OFFSET_ENTRIES,
 TIME_ENTRIES, LAST_INDEXED_OFFSET, LAST_TIME_TIMESTAMP, LAST_TIME_OFFSET) = range(10)
RECOVERY_STATE = 10


# replay_transactional (`recovery.ProducerState.replay_rows`): the batches replayed, the producers
# they move and the open transactions, a column each; and the state carried from call to call
REPLAY_FIELDS = ("base_offset", "last_offset", "epoch", "base_sequence", "last_sequence", "attributes",
                 "max_timestamp", "base_timestamp", "marker", "coordinator_epoch", "producer")
"""A batch replayed, as `apply` reads it: `marker` and `coordinator_epoch` as the scan read them
(`COLUMNS`), `producer` its producer's column in the producers' array."""
(RP_BASE_OFFSET, RP_LAST_OFFSET, RP_EPOCH, RP_BASE_SEQUENCE, RP_LAST_SEQUENCE, RP_ATTRIBUTES, RP_MAX_TIMESTAMP,
 RP_BASE_TIMESTAMP, RP_MARKER, RP_COORDINATOR_EPOCH, RP_PRODUCER) = range(len(REPLAY_FIELDS))
PRODUCER_FIELDS = ("producer_id", "epoch", "coordinator_epoch", "last_timestamp", "in_transaction",
                   "transaction_first_offset", "last_sequence", "last_offset", "offset_delta", "replayed")
"""A `recovery.ProducerStatus`: `in_transaction` 1 where its current_txn_first_offset is set (then
`transaction_first_offset`); `replayed` 1 once a batch of the call has moved it."""
(P_PRODUCER_ID, P_EPOCH, P_COORDINATOR_EPOCH, P_LAST_TIMESTAMP, P_IN_TRANSACTION, P_TRANSACTION_FIRST_OFFSET,
 P_LAST_SEQUENCE, P_LAST_OFFSET, P_OFFSET_DELTA, P_REPLAYED) = range(len(PRODUCER_FIELDS))
ONGOING_FIELDS = ("first_offset", "producer_id", "open", "closed_at")
"""`ProducerState.ongoing`'s entries in its order, then those the call opens; `open` 0 once closed,
`closed_at` then the offset of the marker that closed it (`ProducerState.completed`)."""
(O_FIRST_OFFSET, O_PRODUCER_ID, O_OPEN, O_CLOSED_AT) = range(len(ONGOING_FIELDS))
ABORTED_FIELDS = txn_index.COLUMNS
"""An aborted transaction, as the `.txnindex` entry `AbortedTxn` holds it (`txn_index.AbortedTxns`)."""
(A_PRODUCER_ID, A_FIRST_OFFSET, A_LAST_OFFSET, A_LAST_STABLE_OFFSET) = range(len(ABORTED_FIELDS))
PLAN_FIELDS = ("producer_id", "attributes", "producer_epoch", "base_sequence", "last_offset_delta")
"""A run's batches as `ProducerState.plan_run` reads them (`producer_slots`, `plan_producers`)."""
(PL_PRODUCER_ID, PL_ATTRIBUTES, PL_EPOCH, PL_BASE_SEQUENCE, PL_LAST_OFFSET_DELTA) = range(len(PLAN_FIELDS))
(REPLAY_ONGOING, REPLAY_ABORTED, REPLAY_ABORT_MARKERS) = range(3)
"""replay_transactional's state: open transaction columns in use, aborted transactions written, and
ABORT markers replayed (their batches written to `abort_markers`)."""
REPLAY_STATE = 3


# ---------------------------------------------------------------------------------------------
# dump: records decoded into columns (kernels.decode_each)
# ---------------------------------------------------------------------------------------------

RECORD_COLUMNS = ("offset", "timestamp", "sequence", "size", "key_start", "key_length", "value_start",
                  "value_length", "first_header", "header_count")
"""One record a column, as `decode_records` reads it: lengths are -1 for a null key or value; starts
index the bytes the batch's records were decoded from; headers are rows of `HEADER_COLUMNS`."""
(R_OFFSET, R_TIMESTAMP, R_SEQUENCE, R_SIZE, R_KEY_START, R_KEY_LENGTH, R_VALUE_START, R_VALUE_LENGTH,
 R_FIRST_HEADER, R_HEADER_COUNT) = range(len(RECORD_COLUMNS))
HEADER_COLUMNS = ("key_start", "key_length", "value_start", "value_length")
(H_KEY_START, H_KEY_LENGTH, H_VALUE_START, H_VALUE_LENGTH) = range(len(HEADER_COLUMNS))
NOT_DECODED = -1
"""`decode_each`'s first record row for a batch left to `decode_records` (the per-batch path)."""


LEGACY_RECORD_COLUMNS = ("crc", "attributes")
"""What a V0/V1 record line adds (its `legacy` object), one record a column beside `RECORD_COLUMNS`:
the message's stored CRC-32 (`decode_legacy_each` keeps only messages whose CRC matches) and its
attributes byte, signed."""
(L_CRC, L_ATTRIBUTES) = range(len(LEGACY_RECORD_COLUMNS))
SMALLEST_LEGACY_ENTRY = legacy.LOG_OVERHEAD + legacy.RECORD_OVERHEAD_V0
"""Bytes of the smallest log entry of a message set: a wrapper's holds at most its size / this."""


RUN_BATCH_FIELDS = ("position", "size", "base_offset", "last_offset", "count", "crc", "attributes", "max_timestamp",
                    "producer_id", "producer_epoch", "base_sequence", "last_sequence", "partition_leader_epoch",
                    "base_timestamp", "in_payloads", "magic")
"""The rows of `dump.BatchRun.batches`: the fields of each batch's `Batch` (a V2 batch, or a V0/V1
message, with a valid CRC; `attributes` is the low byte, as `Batch.attributes`, for a legacy message
only its codec and timestamp type bits), and whether its records lie in `payloads`. A legacy
message's `count` is its records' (the line says null, as `Batch.count`)."""
(B_POSITION, B_SIZE, B_BASE_OFFSET, B_LAST_OFFSET, B_COUNT, B_CRC, B_ATTRIBUTES, B_MAX_TIMESTAMP, B_PRODUCER_ID,
 B_PRODUCER_EPOCH, B_BASE_SEQUENCE, B_LAST_SEQUENCE, B_LEADER_EPOCH, B_BASE_TIMESTAMP, B_IN_PAYLOADS,
 B_MAGIC) = range(len(RUN_BATCH_FIELDS))


# ---------------------------------------------------------------------------------------------
# dump: JSON Lines written from those columns (kernels.render_each)
# ---------------------------------------------------------------------------------------------

TEXT_PIECES = (("batch", 20), ("record", 13), ("legacy", 17), ("codec", 8), ("timestamp_type", 3), ("header", 4),
               ("true", 1), ("false", 1), ("null", 1), ("utf8", 1), ("base64", 1), ("control", 5),
               ("control_type", 2))
"""The constant texts `render_each` writes lines with, in this order, each as so many pieces: the
UTF-8 of a file's batch, record and V0/V1 record line templates cut around their 19, 12 and 16
fields, the JSON of each codec's name (by id), of CreateTime, LogAppendTime and NoTimestampType,
a header object cut around its 3 fields, true, false, null, "utf8" and "base64", the end of a
transaction marker's record line (its headers' `]`, its `control` object) cut around its 4 fields,
and the JSON of ABORT and COMMIT."""
(T_BATCH, T_RECORD, T_LEGACY, T_CODEC, T_TIMESTAMP_TYPE, T_HEADER, T_TRUE, T_FALSE, T_NULL, T_UTF8,
 T_BASE64, T_CONTROL, T_CONTROL_TYPE) = (sum(count for _, count in TEXT_PIECES[:i]) for i in range(len(TEXT_PIECES)))
TEXTS = sum(count for _, count in TEXT_PIECES)
(RENDER_BATCH, RENDER_RECORD, RENDER_WRITTEN, RENDER_REFUSED) = range(4)
"""`render_each`'s state: the next batch and record rows (in and out), the bytes it wrote, and 1
when it stopped before a batch it leaves to Python (a header key that is not UTF-8, a control batch
whose records are not a transaction marker's as Kafka writes it)."""
RENDER_STATE = 4

# ---------------------------------------------------------------------------------------------
# dump --format text: kafka-dump-log.sh's lines written from those columns (render_dumplog_each)
# ---------------------------------------------------------------------------------------------

DUMPLOG_PIECES = (("batch", 19), ("record", 8), ("legacy", 4), ("key", 2), ("payload", 1), ("codec", 8),
                  ("timestamp_type", 3), ("true", 1), ("false", 1), ("optional", 3), ("marker", 2),
                  ("control_type", 2))
"""The constant texts `render_dumplog_each` writes lines with (`dumplog_text._texts`), in this
order: a V2 batch line cut around its 18 fields, a record line's metadata cut around its 7, a V0/V1
batch line's start and a V0/V1 record's texts after its value size (isValid, crc, the stray `}`),
the key's lead-in after metadata and without it, the payload's, each codec's name (by id),
CreateTime, LogAppendTime and NoTimestampType, true, false, OptionalLong's empty, opening and
closing texts, a transaction marker's lead-ins to its type and coordinator epoch, and ABORT and
COMMIT. Its state is `render_each`'s (RENDER_*)."""
(D_BATCH, D_RECORD, D_LEGACY, D_KEY, D_PAYLOAD, D_CODEC, D_TIMESTAMP_TYPE, D_TRUE, D_FALSE, D_OPTIONAL, D_MARKER,
 D_CONTROL_TYPE) = (sum(count for _, count in DUMPLOG_PIECES[:i]) for i in range(len(DUMPLOG_PIECES)))
DUMPLOG_TEXTS = sum(count for _, count in DUMPLOG_PIECES)

# version_signatures (`payloads.versions`): a record's version signature is whether its key and value
# are null and their first bytes (fewer where shorter), what `PayloadDecoder.value_version_known`
# reads; its state is carried from call to call
SIGNATURE_KEY_BYTES, SIGNATURE_VALUE_BYTES = 2, 3
(SIG_USED, SIG_UNSURE, SIG_LAST) = range(3)
"""Distinct signatures in the table; why the walk stopped short, where it did:"""
UNSURE_SEGMENT, UNSURE_TABLE_FULL = 1, 2
"""it cannot vouch that it saw every record of the segment; the table is half full;"""
SIGNATURE_STATE = 3
"""and the last signature noted (0: none yet), in the table: a run of records alike skips the probe."""


# ---------------------------------------------------------------------------------------------
# gzip payloads inflated by ISA-L from compiled code (gzip_each)
# ---------------------------------------------------------------------------------------------

INFLATE_STATE = 256 << 10
"""Bytes of working memory given to ISA-L as its `struct inflate_state` (87 KB in ISA-L 2.31), with room to spare."""

__all__ = [name for name in dir() if name.isupper()]
"""The layout's names (`bulk_scan` hands them on, so that its callers index columns through it)."""

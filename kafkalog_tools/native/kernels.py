"""The compiled half of `bulk_scan`: loops written in Python and compiled by numba into one
object file of machine code (`build`). `loader` caches that object and maps it without numba
(and on x86-64 without llvmlite), so a run imports numba only when there is no object for this source and CPU yet (~0.5 s
of import and ~2 min of compiling, once).

The entry points (`ENTRIES`) take C pointers and int64s and return an int64, and nothing in them
may raise: the object must not need numba's runtime. `build` refuses an object that would.

CRC-32C uses the CPU's instruction (SSE4.2) where there is one, three lanes at a time as the
`crc32c` package does, and slicing-by-8 tables elsewhere; legacy messages' CRC-32 folds with
carry-less multiplies (PCLMULQDQ), else tables. Tests check each against `crc32c` and zlib.
"""
from __future__ import annotations

import re

import numpy as np
from llvmlite import binding, ir
from numba import carray, njit, types
from numba.core import cgutils
from numba.core.compiler_lock import global_compiler_lock
from numba.extending import intrinsic

from .columns import (ATTRIBUTES, BASE_OFFSET, BASE_SEQUENCE, BASE_TIMESTAMP, CHECKED, COLUMNS, COORDINATOR_EPOCH,
                      FIELD_AT, HEADER_COLUMNS, MARKER, NOT_A_MARKER,
                      H_KEY_LENGTH, H_KEY_START, H_VALUE_LENGTH, H_VALUE_START, INDEX_INTERVAL, LAST_INDEXED_OFFSET,
                      LAST_INDEXED_POSITION, LAST_OFFSET_DELTA, LAST_TIME_OFFSET, LAST_TIME_TIMESTAMP, LEADER_EPOCH,
                      LEGACY_RECORD_COLUMNS, L_ATTRIBUTES, L_CRC, MAX_TIMESTAMP, MAX_TIMESTAMP_SO_FAR, NOT_DECODED,
                      OFFSET_ENTRIES, OFFSET_OF_MAX_TIMESTAMP, POSITION, PRODUCER_EPOCH, PRODUCER_ID, RECORDS_COUNT,
                      RECORD_COLUMNS, RECOVERY_STATE, R_FIRST_HEADER, R_HEADER_COUNT, R_KEY_LENGTH, R_KEY_START,
                      R_OFFSET, R_SEQUENCE, R_SIZE, R_TIMESTAMP, R_VALUE_LENGTH, R_VALUE_START, SIZE,
                      SMALLEST_LEGACY_ENTRY, TIME_ENTRIES, VALID_BYTES)
from .columns import (ABORTED_FIELDS, A_FIRST_OFFSET, A_LAST_OFFSET, A_LAST_STABLE_OFFSET, A_PRODUCER_ID,
                      ONGOING_FIELDS, O_CLOSED_AT, O_FIRST_OFFSET, O_OPEN, O_PRODUCER_ID, PRODUCER_FIELDS,
                      P_COORDINATOR_EPOCH, P_EPOCH, P_IN_TRANSACTION, P_LAST_OFFSET, P_LAST_SEQUENCE, P_LAST_TIMESTAMP, P_OFFSET_DELTA,
                      P_PRODUCER_ID, P_REPLAYED, P_TRANSACTION_FIRST_OFFSET, REPLAY_ABORTED, REPLAY_ABORT_MARKERS,
                      REPLAY_FIELDS, REPLAY_ONGOING, REPLAY_STATE, RP_ATTRIBUTES, RP_BASE_OFFSET, RP_BASE_SEQUENCE,
                      RP_BASE_TIMESTAMP, RP_COORDINATOR_EPOCH, RP_EPOCH, RP_LAST_OFFSET, RP_LAST_SEQUENCE,
                      RP_MARKER, RP_MAX_TIMESTAMP, RP_PRODUCER)
from .columns import (PLAN_FIELDS, PL_ATTRIBUTES, PL_BASE_SEQUENCE, PL_EPOCH, PL_LAST_OFFSET_DELTA, PL_PRODUCER_ID)
from .columns import (SIGNATURE_KEY_BYTES, SIGNATURE_STATE, SIGNATURE_VALUE_BYTES, SIG_LAST, SIG_UNSURE, SIG_USED,
                      UNSURE_SEGMENT, UNSURE_TABLE_FULL)
from .columns import (S_AFTER, S_BYTES, S_EPOCH, S_FIRST_BASE, S_FIRST_LAST, S_FIRST_POSITION, S_FOLDED, S_IN_ORDER,
                      S_KEPT, S_LARGEST_TIMESTAMP, S_LAST_LAST, S_RECORDS, S_STOPPED, STRETCH_FIELDS)
from .columns import (OUTLINE_FIELDS, RO_ASCENDING, RO_BYTES, RO_COMPRESSED, RO_EPOCH_CHANGES, RO_EPOCHS_RISE,
                      RO_LARGEST_LAST, RO_LARGEST_PRODUCER, RO_RECORDS)
from .columns import (B_ATTRIBUTES, B_BASE_TIMESTAMP, B_COUNT, B_IN_PAYLOADS, B_LAST_OFFSET, B_MAGIC, B_POSITION,
                      DUMPLOG_TEXTS, D_BATCH, D_CODEC, D_CONTROL_TYPE, D_FALSE, D_KEY, D_LEGACY, D_MARKER,
                      D_OPTIONAL, D_PAYLOAD, D_RECORD, D_TIMESTAMP_TYPE, D_TRUE, RENDER_BATCH, RENDER_RECORD,
                      RENDER_REFUSED, RENDER_STATE, RENDER_WRITTEN, RUN_BATCH_FIELDS, TEXTS, T_BASE64, T_BATCH,
                      T_CODEC, T_CONTROL, T_CONTROL_TYPE, T_FALSE, T_HEADER, T_LEGACY, T_NULL, T_RECORD,
                      T_TIMESTAMP_TYPE, T_TRUE, T_UTF8)
from ..codecs import IDS as CODEC_IDS, lz4_codec, snappy_codec
from ..formats import legacy
from ..formats.record_batch import (ATTR_CODEC, ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_LOG_APPEND_TIME,
                                    ATTR_TRANSACTIONAL, HEADER_SIZE)

_X86 = binding.get_process_triple().startswith("x86_64")
HARDWARE_CRC = _X86 and bool(binding.get_host_cpu_features().get("sse4.2", False))
CARRYLESS_MULTIPLY = _X86 and bool(binding.get_host_cpu_features().get("pclmul", False))

_jit = njit(nogil=True)
_inline = njit(nogil=True, inline="always")
"""For helpers called per batch, record or lz4 sequence: numba inlines them into each caller. A
call passes each array as seven values, and LLVM left such calls alone: the caller's registers
spilled around them (inlined, with `plain_marker` called only for control batches: a KRaft log
dir's verify 2.06 -> 1.79 s; the dumps' gains are in the README. The build takes ~2 min, not ~1)."""


@intrinsic
def _crc_u64(typingctx, crc, word):
    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(64), [ir.IntType(64)] * 2), "llvm.x86.sse42.crc32.64.64")
        return builder.call(fn, args)
    return types.uint64(types.uint64, types.uint64), codegen


def _crc_at(bits: int):
    """An intrinsic: a raw CRC-32C state fed the `bits`/8 bytes of a uint8 array at `at` (one
    unaligned load and one crc32 instruction, unchecked)."""
    @intrinsic
    def crc_at(typingctx, crc, buf, at):
        def codegen(context, builder, signature, args):
            data = context.make_array(signature.args[1])(context, builder, args[1]).data
            value = builder.load(builder.bitcast(builder.gep(data, [args[2]]), ir.IntType(bits).as_pointer()), align=1)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
                ir.IntType(32), [ir.IntType(32), ir.IntType(bits)]), f"llvm.x86.sse42.crc32.32.{bits}")
            return builder.call(fn, [args[0], value])
        return types.uint32(types.uint32, buf, at), codegen
    return crc_at


_crc_u32_at, _crc_u16_at, _crc_u8_at = _crc_at(32), _crc_at(16), _crc_at(8)


@intrinsic
def _clmul(typingctx, a, b):
    """The 128-bit carry-less product of two uint64s (PCLMULQDQ), as (low, high) words."""
    def codegen(context, builder, signature, args):
        vector = ir.VectorType(ir.IntType(64), 2)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vector, [vector, vector, ir.IntType(8)]), "llvm.x86.pclmulqdq")
        zero = ir.Constant(ir.IntType(32), 0)
        operands = [builder.insert_element(ir.Constant(vector, None), value, zero) for value in args]
        product = builder.call(fn, [*operands, ir.Constant(ir.IntType(8), 0)])
        words = [builder.extract_element(product, ir.Constant(ir.IntType(32), i)) for i in range(2)]
        return context.make_tuple(builder, signature.return_type, words)
    return types.UniTuple(types.uint64, 2)(types.uint64, types.uint64), codegen


@intrinsic
def _word_at(typingctx, buf, at):
    """The 8 bytes of a uint8 array at `at` as one little-endian word, unaligned, unchecked (an
    array view would need numba's runtime)."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        word = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(word, align=1)
    return types.uint64(buf, at), codegen


@intrinsic
def _prefetch(typingctx, buf, at):
    """Ask the CPU to bring the cache line at buf[at] in (a hint: never faults, unchecked)."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        address = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
        prefetch = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
            ir.VoidType(), [ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(32), ir.IntType(32)]),
            "llvm.prefetch.p0")
        builder.call(prefetch, [address, ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 3),
                                ir.Constant(ir.IntType(32), 1)])
        return context.get_dummy_value()
    return types.none(buf, at), codegen


@intrinsic
def _byte_at(typingctx, buf, at):
    """buf[at] of a uint8 array at an index known to be >= 0, as an int64: one load, where indexing
    also adds the length to a negative index (three more instructions in each varint's chain)."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.zext(builder.load(builder.gep(data, [args[1]])), ir.IntType(64))
    return types.int64(buf, at), codegen


def _big_endian_load(bits: int):
    """An intrinsic: the `bits`/8 bytes of a uint8 array at `at`, big-endian, unsigned (64 bits wrap
    into the sign as Java's long does), as an int64: one unaligned load and a byte swap, unchecked."""
    @intrinsic
    def load(typingctx, buf, at):
        def codegen(context, builder, signature, args):
            data = context.make_array(signature.args[0])(context, builder, args[0]).data
            word = builder.load(builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(bits).as_pointer()), align=1)
            swap = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.IntType(bits), [ir.IntType(bits)]), f"llvm.bswap.i{bits}")
            value = builder.call(swap, [word])
            return value if bits == 64 else builder.zext(value, ir.IntType(64))
        return types.int64(buf, at), codegen
    return load


_be64, _be32, _be16 = _big_endian_load(64), _big_endian_load(32), _big_endian_load(16)


def _slicing_tables(polynomial: int) -> np.ndarray:
    """Slicing-by-8 tables of a reflected CRC-32 polynomial."""
    table = np.zeros((8, 256), dtype=np.uint32)
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ (polynomial if c & 1 else 0)
        table[0, n] = c
    for k in range(1, 8):
        for n in range(256):
            table[k, n] = (table[k - 1, n] >> 8) ^ table[0, table[k - 1, n] & 0xFF]
    return table


_POLY = 0x82F63B78
"""CRC-32C's, reflected."""
_TABLES = _slicing_tables(_POLY)
_IEEE_TABLES = _slicing_tables(0xEDB88320)
"""CRC-32's (zlib's), for legacy messages."""


def _shift_tables(length: int) -> np.ndarray:
    """Four byte tables of the linear map "feed `length` zero bytes to a raw CRC-32C state" (no
    inversions): shifting state s is T[0][s & 0xFF] ^ T[1][s >> 8 & 0xFF] ^ T[2][...] ^ T[3][s >> 24]."""
    basis = []
    for bit in range(32):
        state = 1 << bit
        for _ in range(8 * length):
            state = (state >> 1) ^ (_POLY if state & 1 else 0)
        basis.append(state)
    tables = np.zeros((4, 256), dtype=np.uint64)
    for k in range(4):
        for byte in range(256):
            value = 0
            for bit in range(8):
                if byte >> bit & 1:
                    value ^= basis[8 * k + bit]
            tables[k, byte] = value
    return tables


_LANES = (4096, 1024, 128)
"""Bytes per lane of the three-lane loops, longest first: one lane's crc32 instructions wait on
each other (3 cycles), three independent lanes keep the unit busy. Lanes of a whole page each
stream from memory ~1.5x faster than lanes sharing a page (measured on 16 KiB batches read from
the page cache: 0.15 s per GiB against 0.23 s with 1 KiB lanes)."""
_LANE_SIZES = np.array(_LANES, dtype=np.int64)
_SHIFTS = np.stack([_shift_tables(lane) for lane in _LANES])


@_jit
def _shifted(tables, state):
    return (tables[0, state & 0xFF] ^ tables[1, (state >> 8) & 0xFF] ^ tables[2, (state >> 16) & 0xFF]
            ^ tables[3, (state >> 24) & 0xFF])


@_jit
def _three_lanes(buf, i, end, state, lane, tables):
    """Raw CRC-32C state after whole blocks of three lanes from `i`: each lane's CRC on its own,
    joined by shifting (crc(A + B) = shift(crc(A), len(B)) ^ crc(B) from state 0)."""
    while end - i >= 3 * lane:
        a, b, c = state, np.uint64(0), np.uint64(0)
        stop = i + lane
        while i < stop:
            a = _crc_u64(a, _word_at(buf, i))
            b = _crc_u64(b, _word_at(buf, i + lane))
            c = _crc_u64(c, _word_at(buf, i + 2 * lane))
            i += 8
        state = _shifted(tables, _shifted(tables, a) ^ b) ^ c
        i += 2 * lane
    return state, i


@_jit
def crc32c_hardware(buf, start, end):
    crc, i = np.uint64(0xFFFFFFFF), start
    for k in range(len(_LANE_SIZES)):
        crc, i = _three_lanes(buf, i, end, crc, _LANE_SIZES[k], _SHIFTS[k])
    return _chain_tail(buf, crc, i, end)


@_inline
def _chain_tail(buf, crc, i, end):
    """The finished CRC-32C of a raw state `crc` fed buf[i:end] on one chain: eight bytes at a
    time, then four, two and one as they remain."""
    while i + 8 <= end:
        crc = _crc_u64(crc, _word_at(buf, i))
        i += 8
    small = np.uint32(crc)
    if end - i >= 4:  # (the last 0-7 bytes in at most three instructions, not one per byte)
        small = _crc_u32_at(small, buf, i)
        i += 4
    if end - i >= 2:
        small = _crc_u16_at(small, buf, i)
        i += 2
    if end - i >= 1:
        small = _crc_u8_at(small, buf, i)
    return small ^ np.uint32(0xFFFFFFFF)


@_inline
def _crc32c_pair_hardware(buf, a, a_end, b, b_end):
    """crc32c_hardware of two ranges at once, each too short for the three-lane loops: a range's
    crc32 instructions wait on each other, two chains side by side keep the unit busy."""
    x, y = np.uint64(0xFFFFFFFF), np.uint64(0xFFFFFFFF)
    while a + 8 <= a_end and b + 8 <= b_end:
        x = _crc_u64(x, _word_at(buf, a))
        y = _crc_u64(y, _word_at(buf, b))
        a += 8
        b += 8
    return _chain_tail(buf, x, a, a_end), _chain_tail(buf, y, b, b_end)


PREFETCH_AHEAD = 2048
"""How far ahead of a small batch (at most PAIRED_MAX bytes) `scan` asks the CPU for the bytes.
On a freshly mapped KRaft segment (80-byte batches) each new cache line was a stall: its shallow
scan 0.066-0.070 -> 0.053-0.057 s (best 8 of 16 fresh maps, compiled object); on 600-byte batches
a prefetch per batch made it slower (0.035 -> 0.049 s), so larger batches are left to the CPU's
own prefetcher."""
PAIRED_MAX = 3 * _LANES[-1]
"""`scan` checks two batches' CRCs at once where both size fields are at most this, below which
crc32c_hardware runs one chain (a 256 MiB KRaft segment, 80-byte batches: 0.08-0.12 -> 0.07-0.11 s
shallow, best of 8 in alternation)."""


@_jit
def _sliced(table, buf, start, end):
    crc = np.uint32(0xFFFFFFFF)
    i = start
    while i + 8 <= end:
        low = crc ^ (np.uint32(buf[i]) | np.uint32(buf[i + 1]) << 8 | np.uint32(buf[i + 2]) << 16
                     | np.uint32(buf[i + 3]) << 24)
        crc = (table[7, low & 0xFF] ^ table[6, (low >> 8) & 0xFF] ^ table[5, (low >> 16) & 0xFF]
               ^ table[4, low >> 24] ^ table[3, buf[i + 4]] ^ table[2, buf[i + 5]]
               ^ table[1, buf[i + 6]] ^ table[0, buf[i + 7]])
        i += 8
    while i < end:
        crc = table[0, (crc ^ buf[i]) & 0xFF] ^ (crc >> 8)
        i += 1
    return crc ^ np.uint32(0xFFFFFFFF)


@_jit
def crc32c_software(buf, start, end):
    return _sliced(_TABLES, buf, start, end)


@_jit
def crc32_software(buf, start, end):
    """zlib's CRC-32, by tables."""
    return _sliced(_IEEE_TABLES, buf, start, end)


# Folding constants of CRC-32's polynomial for 128-bit lanes (Intel, "Fast CRC Computation for
# Generic Polynomials Using PCLMULQDQ", 2009): x^(4*128+32), x^(4*128-32) mod P, then x^(128+32),
# x^(128-32) mod P, bit-reflected; zlib-ng and Linux use the same.
_FOLD_4_LOW, _FOLD_4_HIGH = np.uint64(0x154442BD4), np.uint64(0x1C6E41596)
_FOLD_1_LOW, _FOLD_1_HIGH = np.uint64(0x1751997D0), np.uint64(0x0CCAA009E)


@_jit
def _fold(low, high, k_low, k_high, next_low, next_high):
    """A 128-bit lane moved forward by the constants' distance, xor the lane found there."""
    a_low, a_high = _clmul(low, k_low)
    b_low, b_high = _clmul(high, k_high)
    return a_low ^ b_low ^ next_low, a_high ^ b_high ^ next_high


@_jit
def _raw_bytes(table, crc, word):
    """The table CRC of a word's eight bytes, little-endian, from state `crc`, no inversions."""
    for _ in range(8):
        crc = table[0, (crc ^ np.uint32(word & np.uint64(0xFF))) & 0xFF] ^ (crc >> 8)
        word >>= np.uint64(8)
    return crc


@_jit
def crc32_folding(buf, start, end):
    """zlib's CRC-32 with carry-less multiplies: four 16-byte lanes folded 64 bytes at a time, then
    into one, then by 16 bytes. What is left (one lane and < 16 bytes) has the same raw CRC as the
    message, so tables finish it."""
    if end - start < 64:
        return crc32_software(buf, start, end)
    table = _IEEE_TABLES
    i = start
    l0, h0 = _word_at(buf, i) ^ np.uint64(0xFFFFFFFF), _word_at(buf, i + 8)  # the initial value, xor'd in
    l1, h1 = _word_at(buf, i + 16), _word_at(buf, i + 24)
    l2, h2 = _word_at(buf, i + 32), _word_at(buf, i + 40)
    l3, h3 = _word_at(buf, i + 48), _word_at(buf, i + 56)
    i += 64
    while end - i >= 64:
        l0, h0 = _fold(l0, h0, _FOLD_4_LOW, _FOLD_4_HIGH, _word_at(buf, i), _word_at(buf, i + 8))
        l1, h1 = _fold(l1, h1, _FOLD_4_LOW, _FOLD_4_HIGH, _word_at(buf, i + 16), _word_at(buf, i + 24))
        l2, h2 = _fold(l2, h2, _FOLD_4_LOW, _FOLD_4_HIGH, _word_at(buf, i + 32), _word_at(buf, i + 40))
        l3, h3 = _fold(l3, h3, _FOLD_4_LOW, _FOLD_4_HIGH, _word_at(buf, i + 48), _word_at(buf, i + 56))
        i += 64
    low, high = _fold(l0, h0, _FOLD_1_LOW, _FOLD_1_HIGH, l1, h1)
    low, high = _fold(low, high, _FOLD_1_LOW, _FOLD_1_HIGH, l2, h2)
    low, high = _fold(low, high, _FOLD_1_LOW, _FOLD_1_HIGH, l3, h3)
    while end - i >= 16:
        low, high = _fold(low, high, _FOLD_1_LOW, _FOLD_1_HIGH, _word_at(buf, i), _word_at(buf, i + 8))
        i += 16
    crc = _raw_bytes(table, _raw_bytes(table, np.uint32(0), low), high)
    while i < end:
        crc = table[0, (crc ^ buf[i]) & 0xFF] ^ (crc >> 8)
        i += 1
    return crc ^ np.uint32(0xFFFFFFFF)


crc32 = crc32_folding if CARRYLESS_MULTIPLY else crc32_software


crc32c = crc32c_hardware if HARDWARE_CRC else crc32c_software


@_inline
def _crc32c_pair_software(buf, a, a_end, b, b_end):
    return crc32c_software(buf, a, a_end), crc32c_software(buf, b, b_end)


crc32c_pair = _crc32c_pair_hardware if HARDWARE_CRC else _crc32c_pair_software


@_jit
def _be(buf, at, width):
    """Big-endian unsigned; eight bytes wrap into an int64's sign by themselves, as Java's long.
    The widths of header fields in one load each (byte by byte, a one-record batch's header cost
    ~60 ns)."""
    if width == 8:
        return _be64(buf, at)
    if width == 4:
        return _be32(buf, at)
    if width == 2:
        return _be16(buf, at)
    value = np.int64(0)
    for i in range(width):
        value = (value << 8) | np.int64(buf[at + i])
    return value


@_jit
def _signed(value, bits):
    return value - (np.int64(1) << bits) if value >= (np.int64(1) << (bits - 1)) else value


@_inline
def _varint(buf, pos, end, max_bytes):
    """(zigzag value, next position), the position -1 when the varint runs past `end` or is longer
    than `max_bytes`. Five bytes keep 32 bits, as `record_batch._varint(bits=32)` does; longs stop
    at nine bytes (63 bits fit an int64) and longer ones go to the per-batch path."""
    value = np.int64(0)
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            return np.int64(0), -1
        byte = np.int64(buf[pos])
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if max_bytes == 5:
                value &= 0xFFFFFFFF
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
    return np.int64(0), -1


_LONG_MAX = np.int64(0x7FFFFFFFFFFFFFFF)
_LONG_MIN = -_LONG_MAX - 1


@_jit
def _zigzag(byte):
    """A one-byte varint's value."""
    value = np.int64(byte)
    return (value >> 1) ^ -(value & 1)


_SMALL_RECORD_MASK = np.uint64(0x80_FF_80_80_00_80)
_SMALL_RECORD_BITS = np.uint64(0x00_01_00_00_00_00)
"""A record's first 6 bytes in a little-endian word, masked: length, timestamp delta, offset delta
and value size one-byte varints (bit 7 clear), the key null (zigzag -1 is 0x01); the attributes
(byte 1) are not read. A KRaft metadata record is such a record."""


@_inline
def records_agree(buf, start, end, count, last_delta, base_timestamp, max_timestamp, log_append_time, sign, table,
                  state):
    """`skim_records` over an uncompressed records section, then `_record_findings`' max-timestamp
    check: True only when both would pass. Stricter where convenient; never laxer. `sign` (a
    constant where it is inlined): each record's version signature goes into `table` and `state`
    as `version_signatures` puts it there (every record's, where it returns True). A varint of one
    byte (most of a small record's) is read here rather than by `_varint`: on a KRaft log's
    one-record batches the calls were a third of the deep scan's time. A small record with a null
    key and no header is read from one word and its last byte: walked field by field, each size
    waited for the load before it (a sixth of the deep KRaft scan's samples)."""
    pos = start
    previous_delta = -1
    largest = _LONG_MIN
    for _ in range(count):
        if pos <= end - 8:
            word = _word_at(buf, pos)
            if word & _SMALL_RECORD_MASK == _SMALL_RECORD_BITS:
                length = _zigzag(word & 0xFF)
                value_size = _zigzag((word >> 40) & 0xFF)
                record_end = pos + 1 + length
                offset_delta = _zigzag((word >> 24) & 0xFF)
                if (record_end <= end and value_size >= -1 and length == 6 + max(value_size, 0)
                        and _byte_at(buf, record_end - 1) == 0 and previous_delta < offset_delta <= last_delta):
                    if sign:
                        value_tag, value_bytes = _prefix(buf, pos + 6, value_size, SIGNATURE_VALUE_BYTES)
                        _note_signature(table, state, _signature(np.int64(0), np.int64(0), value_tag, value_bytes))
                    previous_delta = offset_delta
                    timestamp_delta = _zigzag((word >> 16) & 0xFF)
                    if timestamp_delta > largest:
                        largest = timestamp_delta
                    pos = record_end
                    continue
        byte = _byte_at(buf, pos) if pos < end else 0x80
        if byte < 0x80:
            length, pos = _zigzag(byte), pos + 1
        else:
            length, pos = _varint(buf, pos, end, 5)
        if pos < 0 or length < 1 or pos + length > end:
            return False
        record_end = pos + length
        pos += 1  # attributes
        byte = _byte_at(buf, pos) if pos < record_end else 0x80
        if byte < 0x80:
            timestamp_delta, pos = _zigzag(byte), pos + 1
        else:
            timestamp_delta, pos = _varint(buf, pos, record_end, 9)
            if pos < 0:
                return False
        byte = _byte_at(buf, pos) if pos < record_end else 0x80
        if byte < 0x80:
            offset_delta, pos = _zigzag(byte), pos + 1
        else:
            offset_delta, pos = _varint(buf, pos, record_end, 5)
            if pos < 0:
                return False
        if not previous_delta < offset_delta <= last_delta:
            return False
        previous_delta = offset_delta
        if timestamp_delta > largest:
            largest = timestamp_delta
        key_tag, key_bytes = np.int64(0), np.int64(0)
        for field in range(2):  # key, value
            byte = _byte_at(buf, pos) if pos < record_end else 0x80
            if byte < 0x80:
                size, pos = _zigzag(byte), pos + 1
            else:
                size, pos = _varint(buf, pos, record_end, 5)
                if pos < 0:
                    return False
            if size < -1:
                return False
            if sign:  # (its bytes read no further than the section's end: the size is checked below)
                tag, prefix = _prefix(buf, pos, min(size, end - pos),
                                      SIGNATURE_KEY_BYTES if field == 0 else SIGNATURE_VALUE_BYTES)
                if field == 0:
                    key_tag, key_bytes = tag, prefix
                else:
                    _note_signature(table, state, _signature(key_tag, key_bytes, tag, prefix))
            if size > 0:
                pos += size
        byte = _byte_at(buf, pos) if pos < record_end else 0x80
        if byte < 0x80:
            headers, pos = _zigzag(byte), pos + 1
        else:
            headers, pos = _varint(buf, pos, record_end, 5)
        if pos < 0 or not 0 <= headers <= record_end - pos:
            return False
        for _ in range(headers):
            size, pos = _varint(buf, pos, record_end, 5)
            if pos < 0 or size < 0:
                return False
            pos += size
            size, pos = _varint(buf, pos, record_end, 5)
            if pos < 0 or size < -1:
                return False
            if size > 0:
                pos += size
        if pos != record_end:
            return False
    if pos != end:
        return False
    if count == 0 or log_append_time:
        return True
    # past Long.MAX the sum wraps here but not in Python: leave such a batch to the per-batch path
    return _add_fits(base_timestamp, largest) and base_timestamp + largest == max_timestamp


_LENGTH_AT = FIELD_AT["batch_length"]
_EPOCH_AT = FIELD_AT["partition_leader_epoch"]
_MAGIC_AT = FIELD_AT["magic"]
_CRC_AT = FIELD_AT["crc"]
_ATTRIBUTES_AT = FIELD_AT["attributes"]
_DELTA_AT = FIELD_AT["last_offset_delta"]
_BASE_TS_AT = FIELD_AT["base_timestamp"]
_MAX_TS_AT = FIELD_AT["max_timestamp"]
_PID_AT = FIELD_AT["producer_id"]
_PEPOCH_AT = FIELD_AT["producer_epoch"]
_SEQ_AT = FIELD_AT["base_sequence"]
_COUNT_AT = FIELD_AT["records_count"]
_OVERHEAD = FIELD_AT["partition_leader_epoch"]  # offset and length: LOG_OVERHEAD
_HEADER_SIZE = HEADER_SIZE


_MARKER_RECORD = np.frombuffer(bytes([32, 0, 0, 0, 8, 0, 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0]), dtype=np.uint8)
"""The one record of a transaction marker as Kafka writes it (MemoryRecords.withEndTransactionMarker):
length 16, attributes 0, timestamp and offset deltas 0, a 4-byte key (version 0, type), a 6-byte
value (version 0, coordinator epoch), no header. Bytes 8 (the type's low byte) and 12-15 (the
coordinator epoch) vary: `plain_marker` reads them."""
_MARKER_TYPE_AT, _MARKER_EPOCH_AT = 8, 12


@_jit
def plain_marker(buf, pos, batch_end, attributes, count, last_delta, base_timestamp, max_timestamp):
    """The control type (0 ABORT, 1 COMMIT) of a transaction marker whose every byte is as Kafka
    writes it - uncompressed, one record of `_MARKER_RECORD`'s shape at offset and timestamp delta 0,
    the batch's max timestamp its base timestamp - else NOT_A_MARKER. Such a marker is what the
    per-batch path reads without a finding, its type and coordinator epoch (`parse_control`) and its
    record's timestamp (the base timestamp) known; any other control batch is left to that path."""
    start = pos + _HEADER_SIZE
    if (attributes & ATTR_CONTROL == 0 or attributes & ATTR_CODEC != 0 or count != 1 or last_delta != 0
            or base_timestamp != max_timestamp or batch_end - start != len(_MARKER_RECORD)):
        return NOT_A_MARKER
    for i in range(len(_MARKER_RECORD)):
        varies = i == _MARKER_TYPE_AT or _MARKER_EPOCH_AT <= i < _MARKER_EPOCH_AT + 4
        if not varies and buf[start + i] != _MARKER_RECORD[i]:
            return NOT_A_MARKER
    control_type = np.int64(buf[start + _MARKER_TYPE_AT])
    return control_type if control_type <= 1 else NOT_A_MARKER


@_inline
def _pairable_size(buf, at, end):
    """The size field of the batch at `at`, where `scan` may check its CRC beside the previous
    batch's: the batch lies whole before `end` and is at most PAIRED_MAX; else 0. (Its magic and
    the rest of its header are checked in its own turn, before its CRC is used.)"""
    if at >= end - 17:
        return 0
    size = _signed(_be(buf, at + _LENGTH_AT, 4), 32)
    return size if _HEADER_SIZE - _OVERHEAD <= size <= min(PAIRED_MAX, end - _OVERHEAD - at) else 0


@_jit
def scan(buf, start, limit, end, deep, columns):
    """Clean V2 batches from `start`, while they start before `limit` and fit before `end`, into
    `columns` [len(COLUMNS), capacity]. Returns (batches read, where the next entry starts).
    Stops before anything `SegmentFile.entries` would not yield as a V2 batch with a valid CRC."""
    return _rows(buf, start, limit, end, deep, columns, 0, columns.shape[1])


@_jit
def scan_signing(buf, start, limit, end, columns, table, state):
    """`scan`, deep, that also puts the version signature of each record it walks into `table` and
    `state` as `version_signatures` does, and sets `state[SIG_UNSURE]` to UNSURE_SEGMENT where a data
    batch's records are not all walked (compressed, or not as `records_agree` wants them): verify's
    walk of an internal topic, so that `payloads.versions` need not walk the segment again."""
    return _rows_signing(buf, start, limit, end, columns, 0, columns.shape[1], table, state)


@_jit
def _rows(buf, start, limit, end, deep, columns, first, capacity):
    """`scan` into the rows first..capacity-1 of `columns`: (the row after the last written, where
    the next entry starts)."""
    return _scan_rows(buf, start, limit, end, deep, columns, first, capacity, False, columns[0], columns[0])


@_jit
def _rows_signing(buf, start, limit, end, columns, first, capacity, table, state):
    """`_rows`, as `scan_signing` scans."""
    return _scan_rows(buf, start, limit, end, True, columns, first, capacity, True, table, state)


@_inline
def _scan_rows(buf, start, limit, end, deep, columns, first, capacity, sign, table, state):
    """`_rows` (`sign` False) and `_rows_signing` (True): two functions, each its own machine code,
    so that `_rows` has none of the signing. (Called once per chunk of batches, they need not be
    inlined into their callers: inlined into each, the build took 327 s rather than 149 s.)"""
    pos = start
    n = first
    paired_at, paired_crc = np.int64(-1), np.uint32(0)  # the next batch's CRC, computed beside this one's
    while pos < limit and n < capacity and pos < end - 17:
        size = _signed(_be(buf, pos + _LENGTH_AT, 4), 32)
        if size < _HEADER_SIZE - _OVERHEAD or pos > end - _OVERHEAD - size or buf[pos + _MAGIC_AT] != 2:
            break
        if size <= PAIRED_MAX:
            _prefetch(buf, pos + PREFETCH_AHEAD)
        batch_end = pos + _OVERHEAD + size
        if pos == paired_at:
            crc = paired_crc
        else:
            next_size = _pairable_size(buf, batch_end, end) if size <= PAIRED_MAX else 0
            if next_size:
                crc, paired_crc = crc32c_pair(buf, pos + _ATTRIBUTES_AT, batch_end, batch_end + _ATTRIBUTES_AT,
                                              batch_end + _OVERHEAD + next_size)
                paired_at = batch_end
            else:
                crc = crc32c(buf, pos + _ATTRIBUTES_AT, batch_end)
        if np.int64(crc) != _be(buf, pos + _CRC_AT, 4):  # (as int64s: uint64 against int64 compared as doubles)
            break
        attributes = np.int64(buf[pos + _ATTRIBUTES_AT + 1])  # (byte) of the int16, as Kafka reads it
        last_delta = _signed(_be(buf, pos + _DELTA_AT, 4), 32)
        count = _signed(_be(buf, pos + _COUNT_AT, 4), 32)
        base_timestamp = _be(buf, pos + _BASE_TS_AT, 8)
        max_timestamp = _be(buf, pos + _MAX_TS_AT, 8)
        checked = 0
        marker = NOT_A_MARKER
        if attributes & ATTR_CONTROL != 0:  # (made for every batch, the call was 17% of a KRaft shallow scan)
            marker = plain_marker(buf, pos, batch_end, attributes, count, last_delta, base_timestamp, max_timestamp)
        if marker != NOT_A_MARKER:
            checked = 1  # its one record read, and as `_record_findings` wants it
        elif deep and attributes & ATTR_CODEC == 0 and attributes & ATTR_CONTROL == 0 and count >= 0:
            if records_agree(buf, pos + _HEADER_SIZE, batch_end, count, last_delta, base_timestamp,
                             max_timestamp, attributes & ATTR_LOG_APPEND_TIME != 0, sign, table, state):
                checked = 1
        if sign and checked == 0 and attributes & ATTR_CONTROL == 0 and count != 0:
            state[SIG_UNSURE] = max(state[SIG_UNSURE], UNSURE_SEGMENT)
        columns[MARKER, n] = marker
        columns[COORDINATOR_EPOCH, n] = (0 if marker == NOT_A_MARKER else
                                         _signed(_be(buf, pos + _HEADER_SIZE + _MARKER_EPOCH_AT, 4), 32))
        columns[POSITION, n] = pos
        columns[SIZE, n] = _OVERHEAD + size
        columns[BASE_OFFSET, n] = _be(buf, pos, 8)
        columns[LAST_OFFSET_DELTA, n] = last_delta
        columns[LEADER_EPOCH, n] = _signed(_be(buf, pos + _EPOCH_AT, 4), 32)
        columns[ATTRIBUTES, n] = attributes
        columns[BASE_TIMESTAMP, n] = base_timestamp
        columns[MAX_TIMESTAMP, n] = max_timestamp
        columns[PRODUCER_ID, n] = _be(buf, pos + _PID_AT, 8)
        columns[PRODUCER_EPOCH, n] = _signed(_be(buf, pos + _PEPOCH_AT, 2), 16)
        columns[BASE_SEQUENCE, n] = _signed(_be(buf, pos + _SEQ_AT, 4), 32)
        columns[RECORDS_COUNT, n] = count
        columns[CHECKED, n] = checked
        n += 1
        pos = batch_end
    return n, pos


@_inline
def _rows_as_asked(buf, start, limit, end, deep, columns, first, capacity, sign, table, state):
    """`_rows_signing` where `sign` (deep), else `_rows`."""
    if sign:
        return _rows_signing(buf, start, limit, end, columns, first, capacity, table, state)
    return _rows(buf, start, limit, end, deep, columns, first, capacity)


@_jit
def scan_outlined(buf, start, limit, end, deep, lowest, highest, chunk, columns, asked_positions, asked_holding,
                  asked_after, largest, block, at, rows, lasts, outline, kept_out, out, sign, table, state):
    """`scan`, `rows_apart` and `keep_asked` in one pass, for a big segment whose batch table
    keeps only the rows its index checks reach: batches are scanned `chunk` at a time into the
    first columns of `columns`, and while a chunk is plain (nothing apart, no producer id, offsets
    ascending past the chunk before, one leader epoch >= 0 throughout) it is only folded into a
    stretch: its kept rows go to block[:, at...] and its sums to `out` (`STRETCH_FIELDS`), and the
    next chunk overwrites it. The first chunk that is not plain stays, and the rest of the call
    fills `columns` after it as `scan` does. Stops, as `scan` does, at `limit` or before an entry
    it cannot vouch for, and ends the stretch where `block` has no room for another chunk. Returns
    the rows left in `columns`, after the stretch. (`rows`, `lasts`, `outline`, `kept_out`: room to
    work in.) `sign`: as `scan_signing` scans (deep), into `table` and `state`; else they are not read."""
    capacity = columns.shape[1]
    pos = start
    folded, kept, records, total_bytes = 0, 0, np.int64(0), np.int64(0)
    first_base, first_position, first_last, epoch = np.int64(0), np.int64(0), np.int64(0), np.int64(0)
    last_last = np.int64(0)
    in_order = True
    n, stopped = 0, False
    while pos < limit and at + kept + chunk <= block.shape[1]:
        n, after = _rows_as_asked(buf, pos, limit, end, deep, columns, 0, chunk, sign, table, state)
        if n == 0:
            stopped = True
            break
        apart = rows_apart(columns, n, lowest, highest, deep, rows, outline)
        plain = (apart == 0 and outline[RO_LARGEST_PRODUCER] < 0 and outline[RO_ASCENDING] != 0
                 and outline[RO_EPOCHS_RISE] != 0 and outline[RO_EPOCH_CHANGES] == 0)
        if plain and folded:
            plain = columns[BASE_OFFSET, 0] > last_last and columns[LEADER_EPOCH, 0] == epoch
        if not plain:
            n, after = _rows_as_asked(buf, after, limit, end, deep, columns, n, capacity, sign, table, state)
            stopped = after < limit and n < capacity
            pos = after
            break
        for row in range(n):
            lasts[row] = columns[BASE_OFFSET, row] + columns[LAST_OFFSET_DELTA, row]
        kept += keep_asked(columns[POSITION, :n], columns[BASE_OFFSET, :n], lasts[:n], columns[MAX_TIMESTAMP, :n],
                           asked_positions, asked_holding, asked_after, largest, block, at + kept, kept_out)
        in_order &= kept_out[0] != 0
        largest = kept_out[1]
        if not folded:
            first_base, first_position, first_last = columns[BASE_OFFSET, 0], columns[POSITION, 0], lasts[0]
            epoch = columns[LEADER_EPOCH, 0]
        folded += n
        last_last = outline[RO_LARGEST_LAST]
        records += outline[RO_RECORDS]
        total_bytes += outline[RO_BYTES]
        pos = after
        got, n = n, 0
        if after < limit and got < chunk:  # scan stopped before an entry, not at the chunk's end
            stopped = True
            break
    out[S_FOLDED], out[S_KEPT], out[S_IN_ORDER], out[S_LARGEST_TIMESTAMP] = folded, kept, in_order, largest
    out[S_FIRST_BASE], out[S_FIRST_POSITION], out[S_FIRST_LAST], out[S_EPOCH] = (first_base, first_position,
                                                                                   first_last, epoch)
    out[S_LAST_LAST], out[S_RECORDS], out[S_BYTES] = last_last, records, total_bytes
    out[S_AFTER], out[S_STOPPED] = pos, stopped
    return n


@_jit
def search_ascending(haystack, needles, right, out):
    """`np.searchsorted(haystack, needles, "right" if right else "left")` into `out`, for an
    ascending `haystack`. A needle at or above the one before gallops on from that one's answer (an
    index's entries against its segment's batches: a few probes each, close together, where
    bisecting 3.35 M batches from scratch missed the cache); any other bisects from the start."""
    n = len(haystack)
    lo = 0
    for i in range(len(needles)):
        x = needles[i]
        if i == 0 or x < needles[i - 1]:
            lo = 0
        # every row below `lo` is below x (right: at or below); find the first that is not
        probe, bound = lo, 1
        while probe < n and (haystack[probe] <= x if right else haystack[probe] < x):
            lo = probe + 1
            probe = lo + bound
            bound *= 2
        hi = min(probe, n)
        while lo < hi:
            middle = (lo + hi) >> 1
            if haystack[middle] <= x if right else haystack[middle] < x:
                lo = middle + 1
            else:
                hi = middle
        out[i] = lo
    return 0


_LEGACY_CRC_AT, _LEGACY_MAGIC_AT = legacy.LOG_ENTRY_HEADER.sizeof(), legacy.CRC_START
_LEGACY_OVERHEAD_V0 = legacy.RECORD_OVERHEAD_V0
_LEGACY_ATTRIBUTES = legacy.ATTR_CODEC | legacy.ATTR_LOG_APPEND_TIME
"""The bits a legacy message has; the V2-only ones never reach the columns."""


@_jit
def _legacy_sized_end(buf, cursor, message_end):
    """Where a key or value whose int32 size is at `cursor` ends; -1 past `message_end`."""
    if cursor + 4 > message_end:
        return -1
    size = _signed(_be(buf, cursor, 4), 32)
    cursor += 4
    if size < 0:
        return cursor
    return cursor + size if cursor + size <= message_end else -1


@_jit
def scan_legacy(buf, start, limit, end, floor, columns):
    """Clean V0 or V1 messages (shallow: a compressed wrapper is not opened) from `start`, as `scan`
    does for V2, all of the first one's magic. A wrapper's base offset is verify's stand-in for the
    one only its inner messages know: the lowest it can be, `floor` (the segment's base offset, or
    past every last offset before it), capped at its own last offset. Returns (read, next entry)."""
    capacity = columns.shape[1]
    pos = start
    n = 0
    magic = -1
    while pos < limit and n < capacity and pos < end - 17:
        size = _signed(_be(buf, pos + _LENGTH_AT, 4), 32)
        if size < _LEGACY_OVERHEAD_V0 or pos > end - _OVERHEAD - size:
            break
        this_magic = np.int64(buf[pos + _LEGACY_MAGIC_AT])
        if this_magic > 1 or (magic >= 0 and this_magic != magic):
            break
        magic = this_magic
        message_end = pos + _OVERHEAD + size
        cursor = pos + _LEGACY_MAGIC_AT + 2
        timestamp = np.int64(-1)
        if magic == 1:
            if cursor + 8 > message_end:
                break
            timestamp = _be(buf, cursor, 8)
            cursor += 8
        cursor = _legacy_sized_end(buf, cursor, message_end)
        if cursor < 0 or _legacy_sized_end(buf, cursor, message_end) < 0:
            break
        if crc32(buf, pos + _LEGACY_MAGIC_AT, message_end) != _be(buf, pos + _LEGACY_CRC_AT, 4):
            break
        attributes = np.int64(buf[pos + _LEGACY_MAGIC_AT + 1]) & _LEGACY_ATTRIBUTES
        last = _be(buf, pos, 8)
        base = last
        if attributes & ATTR_CODEC != 0 and floor < last:
            base = floor
        if last >= floor:
            floor = last + 1 if last < _LONG_MAX else last
        columns[POSITION, n] = pos
        columns[SIZE, n] = _OVERHEAD + size
        columns[BASE_OFFSET, n] = base
        columns[LAST_OFFSET_DELTA, n] = last - base
        columns[LEADER_EPOCH, n] = -1
        columns[ATTRIBUTES, n] = attributes
        columns[BASE_TIMESTAMP, n] = timestamp
        columns[MAX_TIMESTAMP, n] = timestamp
        columns[PRODUCER_ID, n] = -1
        columns[PRODUCER_EPOCH, n] = -1
        columns[BASE_SEQUENCE, n] = -1
        columns[RECORDS_COUNT, n] = 1 if attributes & ATTR_CODEC == 0 else 0
        columns[CHECKED, n] = 0
        columns[MARKER, n] = NOT_A_MARKER
        columns[COORDINATOR_EPOCH, n] = 0
        n += 1
        pos = message_end
    return n, pos


@_jit
def agree_each(payloads, bounds, columns, rows):
    """`records_agree` for decompressed records sections: payload i is payloads[bounds[i]:bounds[i+1]]
    and belongs to batch columns[:, rows[i]], whose `checked` it sets when they agree."""
    for i in range(len(rows)):
        row = rows[i]
        if records_agree(payloads, bounds[i], bounds[i + 1], columns[RECORDS_COUNT, row],
                         columns[LAST_OFFSET_DELTA, row], columns[BASE_TIMESTAMP, row], columns[MAX_TIMESTAMP, row],
                         columns[ATTRIBUTES, row] & ATTR_LOG_APPEND_TIME != 0, False, bounds, bounds):
            columns[CHECKED, row] = 1




@_jit
def rows_apart(columns, n, lowest, highest, deep, rows, out):
    """The rows among the first `n` that `verify.bulk.BulkScan._accept` takes one by one, into
    `rows`; returns how many. A batch goes apart when its offsets leave the segment's
    (below `lowest`, last above `highest`), it is a control batch other than a plain marker, or (deep)
    its records were not walked. `out`: the run's outline (`OUTLINE_FIELDS`), compressed counting
    those walked not that are compressed batches inside the segment's offsets, which the caller
    decompresses and walks before it decides."""
    count = 0
    compressed = 0
    total_bytes, records = np.int64(0), np.int64(0)
    largest_last, largest_producer = _LONG_MIN, np.int64(-1)
    ascending, epochs_rise, epoch_changes = True, True, 0
    previous_last, previous_epoch = np.int64(0), np.int64(0)
    for row in range(n):
        base = columns[BASE_OFFSET, row]
        delta = columns[LAST_OFFSET_DELTA, row]
        last = base + delta
        attributes = columns[ATTRIBUTES, row]
        apart = (base < lowest or last < lowest or last > highest
                 or (attributes & ATTR_CONTROL != 0 and columns[MARKER, row] == NOT_A_MARKER))
        unwalked = deep and columns[CHECKED, row] == 0
        if unwalked and not apart and attributes & ATTR_CODEC != 0 and columns[RECORDS_COUNT, row] >= 0:
            compressed += 1
        if apart or unwalked:
            rows[count] = row
            count += 1
        total_bytes += columns[SIZE, row]
        records += columns[RECORDS_COUNT, row]
        largest_last = max(largest_last, last)
        largest_producer = max(largest_producer, columns[PRODUCER_ID, row])
        epoch = columns[LEADER_EPOCH, row]
        ascending &= delta >= 0
        epochs_rise &= epoch >= 0
        if row:
            ascending &= base > previous_last
            epochs_rise &= epoch >= previous_epoch
            epoch_changes += epoch != previous_epoch
        previous_last, previous_epoch = last, epoch
    out[RO_COMPRESSED], out[RO_BYTES], out[RO_RECORDS] = compressed, total_bytes, records
    out[RO_LARGEST_LAST], out[RO_LARGEST_PRODUCER] = largest_last, largest_producer
    out[RO_ASCENDING], out[RO_EPOCHS_RISE], out[RO_EPOCH_CHANGES] = ascending, epochs_rise, epoch_changes
    return count


@_jit
def _first_at_or_above(values, x):
    """The first index of ascending `values` whose value is >= x (len(values) if none)."""
    lo, hi = 0, len(values)
    while lo < hi:
        middle = (lo + hi) >> 1
        if values[middle] < x:
            lo = middle + 1
        else:
            hi = middle
    return lo


@_inline
def _at_or_max(values, i):
    return values[i] if i < len(values) else _LONG_MAX


@_jit
def keep_asked(positions, bases, lasts, max_timestamps, asked_positions, asked_holding, asked_after, largest, block,
               at, out):
    """`verify.indexes.BatchTable._rows_asked` and what `extend` writes of them, in one pass over a
    run of n batches: the rows it keeps (its first and last, and for each query within a column's
    span the row a search lands on and the row before) go to block[0..3, at...] as position, base
    offset, last offset and the largest max timestamp so far (from `largest`); returns how many.
    out[0]: 1 when positions ascend and last offsets do not fall over the run; out[1]: the largest
    max timestamp after it. The queries ascend; where the columns do not, the rows kept are some
    rows (the caller reads every row again)."""
    n = len(positions)
    in_order = True
    kept = 0
    emitted = -1
    at_position = _first_at_or_above(asked_positions, positions[0])
    at_holding = _first_at_or_above(asked_holding, lasts[0])
    at_after = _first_at_or_above(asked_after, lasts[0])
    # the next value of each query, _LONG_MAX past the last: most rows pass all three in one test
    next_position, next_holding, next_after = (_at_or_max(asked_positions, at_position),
                                               _at_or_max(asked_holding, at_holding), _at_or_max(asked_after, at_after))
    for row in range(n):
        before = largest
        largest = max(largest, max_timestamps[row])
        position, last = positions[row], lasts[row]
        if row:
            in_order &= position > positions[row - 1] and last >= lasts[row - 1]
        if next_position > position and next_holding > last and next_after >= last and 0 < row < n - 1:
            continue  # (no search lands here: a tie with _LONG_MAX goes on to the exact loops)
        # a left search lands here for queries up to this row's value, a right one below it
        landed = False
        while at_position < len(asked_positions) and asked_positions[at_position] <= position:
            landed = True
            at_position += 1
        while at_holding < len(asked_holding) and asked_holding[at_holding] <= last:
            landed = True
            at_holding += 1
        while at_after < len(asked_after) and asked_after[at_after] < last:
            landed = True
            at_after += 1
        next_position, next_holding, next_after = (_at_or_max(asked_positions, at_position),
                                                   _at_or_max(asked_holding, at_holding),
                                                   _at_or_max(asked_after, at_after))
        if not landed and row != 0 and row != n - 1:
            continue
        if landed and row and emitted < row - 1:  # the row before the one a search lands on
            block[0, at + kept], block[1, at + kept], block[2, at + kept] = (positions[row - 1], bases[row - 1],
                                                                             lasts[row - 1])
            block[3, at + kept] = before
            kept += 1
        block[0, at + kept], block[1, at + kept], block[2, at + kept] = position, bases[row], last
        block[3, at + kept] = largest
        kept += 1
        emitted = row
    out[0], out[1] = np.int64(in_order), largest
    return kept


@_jit
def recovery_index(columns, start, stop, state, offset_entries, time_entries):
    """LogSegment.recover's index appends (`recovery._RecoveryWalk.take`) over batches start..stop-1
    of `columns`, which need no producer state and whose offsets fit the segment. New (offset,
    position) and (timestamp, offset) entries go to the two [2, stop - start] arrays; the counts in
    `state` say how many there are in all. Stops before a batch whose append Kafka refuses and
    returns its row (else `stop`): the per-batch path raises there."""
    offsets_before, times_before = state[OFFSET_ENTRIES], state[TIME_ENTRIES]
    for row in range(start, stop):
        last = columns[BASE_OFFSET, row] + columns[LAST_OFFSET_DELTA, row]
        max_timestamp, offset_of_max = state[MAX_TIMESTAMP_SO_FAR], state[OFFSET_OF_MAX_TIMESTAMP]
        if columns[MAX_TIMESTAMP, row] > max_timestamp:
            max_timestamp, offset_of_max = columns[MAX_TIMESTAMP, row], last
        if state[VALID_BYTES] - state[LAST_INDEXED_POSITION] > state[INDEX_INTERVAL]:
            if state[OFFSET_ENTRIES] > 0 and last <= state[LAST_INDEXED_OFFSET]:
                return row
            has_time = state[TIME_ENTRIES] > 0
            if has_time and offset_of_max < state[LAST_TIME_OFFSET]:
                return row
            slot = state[OFFSET_ENTRIES] - offsets_before
            offset_entries[0, slot], offset_entries[1, slot] = last, state[VALID_BYTES]
            state[OFFSET_ENTRIES] += 1
            state[LAST_INDEXED_OFFSET] = last
            if max_timestamp > (state[LAST_TIME_TIMESTAMP] if has_time else -1):
                slot = state[TIME_ENTRIES] - times_before
                time_entries[0, slot], time_entries[1, slot] = max_timestamp, offset_of_max
                state[TIME_ENTRIES] += 1
                state[LAST_TIME_TIMESTAMP], state[LAST_TIME_OFFSET] = max_timestamp, offset_of_max
            state[LAST_INDEXED_POSITION] = state[VALID_BYTES]
        state[MAX_TIMESTAMP_SO_FAR], state[OFFSET_OF_MAX_TIMESTAMP] = max_timestamp, offset_of_max
        state[VALID_BYTES] += columns[SIZE, row]
    return stop


_ABORT = 0
"""The control type of an ABORT marker (`formats.control.CONTROL_TYPES`)."""


@_jit
def _in_sequence(status_epoch, status_last_sequence, epoch, base_sequence):
    """`recovery._in_sequence`: whether a data batch follows its producer's last one."""
    if status_epoch < 0 or base_sequence < 0:
        return True
    if epoch != status_epoch:
        return base_sequence == 0
    return status_last_sequence < 0 or base_sequence == (0 if status_last_sequence == _INT32_MAX
                                                         else status_last_sequence + 1)


@_jit
def replay_transactional(batches, start, producers, ongoing, aborted, abort_markers, state):
    """`ProducerState.replay_rows` over the batches (`REPLAY_FIELDS`) from `start`: what `apply` does
    to the producers (`PRODUCER_FIELDS`) and the open transactions (`ONGOING_FIELDS`, `state` saying
    how many columns are used) for transactional data batches and the markers the scan read. The
    transactions an ABORT marker ends go to `aborted`, with the last stable offset it had (the first
    offset of the earliest transaction another producer has open, else the offset after the marker);
    every ABORT marker's batch to `abort_markers`; a transaction a marker closes keeps the marker's
    offset (`O_CLOSED_AT`). Stops before a batch `apply` could report or raise
    on (an epoch or sequence out of order, a coordinator epoch that decreased, a non-transactional
    batch in an open transaction, another control batch) and returns it; else the batch count."""
    for i in range(start, batches.shape[1]):
        p = batches[RP_PRODUCER, i]
        epoch, attributes, base = batches[RP_EPOCH, i], batches[RP_ATTRIBUTES, i], batches[RP_BASE_OFFSET, i]
        control = attributes & ATTR_CONTROL != 0
        marker, coordinator_epoch = batches[RP_MARKER, i], batches[RP_COORDINATOR_EPOCH, i]
        if epoch < producers[P_EPOCH, p]:
            return i
        if control:
            if marker == NOT_A_MARKER or producers[P_COORDINATOR_EPOCH, p] > coordinator_epoch:
                return i
        elif ((attributes & ATTR_TRANSACTIONAL == 0 and producers[P_IN_TRANSACTION, p] != 0)
              or not _in_sequence(producers[P_EPOCH, p], producers[P_LAST_SEQUENCE, p], epoch,
                                  batches[RP_BASE_SEQUENCE, i])):
            return i
        producers[P_REPLAYED, p] = 1
        if epoch != producers[P_EPOCH, p]:  # a new epoch forgets the old one's batch metadata
            producers[P_EPOCH, p] = epoch
            producers[P_LAST_SEQUENCE, p], producers[P_LAST_OFFSET, p], producers[P_OFFSET_DELTA, p] = -1, -1, 0
        if not control:
            last = batches[RP_LAST_OFFSET, i]
            producers[P_LAST_SEQUENCE, p], producers[P_LAST_OFFSET, p] = batches[RP_LAST_SEQUENCE, i], last
            producers[P_OFFSET_DELTA, p], producers[P_LAST_TIMESTAMP, p] = last - base, batches[RP_MAX_TIMESTAMP, i]
            if producers[P_IN_TRANSACTION, p] == 0 and attributes & ATTR_TRANSACTIONAL != 0:
                producers[P_IN_TRANSACTION, p], producers[P_TRANSACTION_FIRST_OFFSET, p] = 1, base
                _open_transaction(ongoing, state, base, producers[P_PRODUCER_ID, p])
            continue
        in_transaction, first_offset = producers[P_IN_TRANSACTION, p], producers[P_TRANSACTION_FIRST_OFFSET, p]
        producers[P_COORDINATOR_EPOCH, p], producers[P_IN_TRANSACTION, p] = coordinator_epoch, 0
        producers[P_LAST_TIMESTAMP, p] = batches[RP_BASE_TIMESTAMP, i]  # the marker record's: deltas 0
        if marker == _ABORT:
            abort_markers[state[REPLAY_ABORT_MARKERS]] = i
            state[REPLAY_ABORT_MARKERS] += 1
        if in_transaction == 0:
            continue
        producer_id, last_stable_offset, other = producers[P_PRODUCER_ID, p], base + 1, False
        for o in range(state[REPLAY_ONGOING]):
            if ongoing[O_OPEN, o] == 1:
                if ongoing[O_PRODUCER_ID, o] != producer_id and (not other or ongoing[O_FIRST_OFFSET, o]
                                                                 < last_stable_offset):
                    last_stable_offset, other = ongoing[O_FIRST_OFFSET, o], True
                if ongoing[O_FIRST_OFFSET, o] == first_offset:
                    ongoing[O_OPEN, o], ongoing[O_CLOSED_AT, o] = 0, base
        if marker == _ABORT:
            a = state[REPLAY_ABORTED]
            aborted[A_PRODUCER_ID, a], aborted[A_FIRST_OFFSET, a] = producer_id, first_offset
            aborted[A_LAST_OFFSET, a], aborted[A_LAST_STABLE_OFFSET, a] = base, last_stable_offset
            state[REPLAY_ABORTED] += 1
    return batches.shape[1]


@_jit
def _open_transaction(ongoing, state, first_offset, producer_id):
    """`ongoing[first_offset] = producer_id`: the open entry of that first offset changes owner, else
    a new one follows the others."""
    for o in range(state[REPLAY_ONGOING]):
        if ongoing[O_OPEN, o] == 1 and ongoing[O_FIRST_OFFSET, o] == first_offset:
            ongoing[O_PRODUCER_ID, o] = producer_id
            return
    o = state[REPLAY_ONGOING]
    ongoing[O_FIRST_OFFSET, o], ongoing[O_PRODUCER_ID, o], ongoing[O_OPEN, o] = first_offset, producer_id, 1
    ongoing[O_CLOSED_AT, o] = -1
    state[REPLAY_ONGOING] += 1


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
"""Fibonacci hashing's multiplier: 2^64 over the golden ratio."""


@_jit
def producer_slots(plan, table, slots, ids, last_rows):
    """Number the producers of a run (`PLAN_FIELDS`) in the order they first appear: each row's
    producer's slot to `slots` (-1 without a producer id), each slot's producer id and last row to
    `ids` and `last_rows`. `table` (a power of two, at least twice the rows, zeros: its caller
    clears it, as a loop here would compile to a call of memset, a symbol from outside the object)
    is an open-addressing hash table of slot + 1 (0: free). Returns the producers."""
    mask = table.shape[0] - 1
    count = 0
    for i in range(plan.shape[1]):
        producer_id = plan[PL_PRODUCER_ID, i]
        if producer_id < 0:
            slots[i] = -1
            continue
        h = np.int64((np.uint64(producer_id) * _GOLDEN) >> np.uint64(32)) & mask
        while table[h] != 0 and ids[table[h] - 1] != producer_id:
            h = (h + 1) & mask
        if table[h] == 0:
            ids[count] = producer_id
            count += 1
            table[h] = count
        slot = table[h] - 1
        slots[i] = slot
        last_rows[slot] = i
    return count


@_jit
def _last_sequence(base_sequence, delta):
    """`bulk_scan.last_sequences` of one batch: -1 for a base sequence of -1, else Java's int sum."""
    if base_sequence == -1:
        return np.int64(-1)
    if base_sequence > _java_int(_INT32_MAX - delta):
        return _java_int(delta - (_INT32_MAX - base_sequence) - 1)
    return _java_int(base_sequence + delta)


@_jit
def plan_producers(plan, slots, epochs, sequences, apart, anomalies):
    """`ProducerState.plan_run`'s producers kept apart (`apart[slot]` set; it comes in set for a
    producer whose transaction is open): those with a transactional or control batch in the run
    and, with `anomalies`, those with a batch `_apply_data` would report (its epoch going back, or
    a sequence out of order after the producer's last batch: `epochs` and `sequences` come in as
    its status has them, -1 for none, and move batch by batch)."""
    for i in range(plan.shape[1]):
        s = slots[i]
        if s < 0:
            continue
        if plan[PL_ATTRIBUTES, i] & (ATTR_TRANSACTIONAL | ATTR_CONTROL) != 0:
            apart[s] = 1
        if anomalies:
            epoch, base_sequence = plan[PL_EPOCH, i], plan[PL_BASE_SEQUENCE, i]
            previous_epoch, previous_sequence = epochs[s], sequences[s]
            if epoch != previous_epoch:
                gap = base_sequence != 0
            else:
                gap = previous_sequence >= 0 and base_sequence != (0 if previous_sequence == _INT32_MAX
                                                                   else previous_sequence + 1)
            if epoch < previous_epoch or (previous_epoch >= 0 and base_sequence >= 0 and gap):
                apart[s] = 1
            epochs[s], sequences[s] = epoch, _last_sequence(base_sequence, plan[PL_LAST_OFFSET_DELTA, i])
    return 0


# dump: `decode_records` into columns (bulk_scan.RECORD_COLUMNS, HEADER_COLUMNS)
_SMALLEST_RECORD = 7
"""Bytes of a record with every field empty: length, attributes, two deltas, key, value, header count."""
_REFUSED, _NO_ROOM = -1, -2
_INT32_MAX = np.int64(0x7FFFFFFF)


@_jit
def _java_int(value):
    """`value` wrapped into an int, as Java's int arithmetic leaves it."""
    return (value + np.int64(1 << 31)) % np.int64(1 << 32) - np.int64(1 << 31)


@_jit
def _add_fits(base, delta):
    """Whether base + delta stays in a long (in Python it would not wrap)."""
    return not ((delta > 0 and base > _LONG_MAX - delta) or (delta < 0 and base < _LONG_MIN - delta))


@_jit
def _decode_records(data, start, end, count, base_offset, base_timestamp, max_timestamp, base_sequence,
                    log_append_time, records, n, headers, h):
    """`decode_records` over the records section data[start:end] into records[:, n:] and headers[:, h:].
    Returns the rows after it, (_REFUSED, h) where `decode_records` would raise or compute past a
    long (the per-batch path then has the batch), (_NO_ROOM, h) when the arrays are too small."""
    if count < 0 or count > (end - start) // _SMALLEST_RECORD:
        return _REFUSED, h
    if n + count > records.shape[1]:
        return _NO_ROOM, h
    pos = start
    for _ in range(count):
        record_start = pos
        length, pos = _varint(data, pos, end, 5)
        if pos < 0 or length < 1 or pos + length > end:
            return _REFUSED, h
        record_end = pos + length
        pos += 1  # attributes
        timestamp_delta, pos = _varint(data, pos, record_end, 9)
        if pos < 0:
            return _REFUSED, h
        offset_delta, pos = _varint(data, pos, record_end, 5)
        if pos < 0 or not _add_fits(base_offset, offset_delta):
            return _REFUSED, h
        if log_append_time:
            timestamp = max_timestamp
        elif _add_fits(base_timestamp, timestamp_delta):
            timestamp = base_timestamp + timestamp_delta
        else:
            return _REFUSED, h
        if base_sequence < 0:
            sequence = np.int64(-1)
        elif base_sequence > _java_int(_INT32_MAX - offset_delta):  # increment_sequence, in Java's int arithmetic
            sequence = _java_int(offset_delta - (_INT32_MAX - base_sequence) - 1)
        else:
            sequence = _java_int(base_sequence + offset_delta)
        records[R_OFFSET, n] = base_offset + offset_delta
        records[R_TIMESTAMP, n] = timestamp
        records[R_SEQUENCE, n] = sequence
        records[R_SIZE, n] = record_end - record_start
        for start_column, length_column in ((R_KEY_START, R_KEY_LENGTH), (R_VALUE_START, R_VALUE_LENGTH)):
            size, pos = _varint(data, pos, record_end, 5)
            if pos < 0:
                return _REFUSED, h
            if size < 0:
                size = -1  # null
            elif pos + size > record_end:
                return _REFUSED, h
            records[start_column, n] = pos
            records[length_column, n] = size
            pos += max(size, 0)
        header_count, pos = _varint(data, pos, record_end, 5)
        if pos < 0 or not 0 <= header_count <= record_end - pos:
            return _REFUSED, h
        if h + header_count > headers.shape[1]:
            return _NO_ROOM, h
        records[R_FIRST_HEADER, n] = h
        records[R_HEADER_COUNT, n] = header_count
        for _ in range(header_count):
            size, pos = _varint(data, pos, record_end, 5)
            if pos < 0 or size < 0 or pos + size > record_end:
                return _REFUSED, h
            headers[H_KEY_START, h] = pos
            headers[H_KEY_LENGTH, h] = size
            pos += size
            size, pos = _varint(data, pos, record_end, 5)
            if pos < 0:
                return _REFUSED, h
            if size < 0:
                size = -1
            elif pos + size > record_end:
                return _REFUSED, h
            headers[H_VALUE_START, h] = pos
            headers[H_VALUE_LENGTH, h] = size
            pos += max(size, 0)
            h += 1
        if pos != record_end:
            return _REFUSED, h
        n += 1
    if pos != end:
        return _REFUSED, h
    return n, h


@_jit
def decode_each(segment, payloads, columns, row, stop, starts, ends, in_payloads, first_record, records, n, headers, h):
    """`_decode_records` for batches row..stop-1 of `columns` whose records section is
    segment[starts[i]:ends[i]] (payloads[...] where in_payloads[i]); starts[i] < 0 skips batch i.
    Sets first_record[i] (NOT_DECODED for a batch the per-batch path must decode). Returns (row, n, h)
    after the last batch done: before `stop` when the arrays are too small for the next one."""
    while row < stop:
        first_record[row] = NOT_DECODED
        if starts[row] >= 0:
            attributes = columns[ATTRIBUTES, row]
            data = payloads if in_payloads[row] else segment
            after, after_headers = _decode_records(
                data, starts[row], ends[row], columns[RECORDS_COUNT, row], columns[BASE_OFFSET, row],
                columns[BASE_TIMESTAMP, row], columns[MAX_TIMESTAMP, row], columns[BASE_SEQUENCE, row],
                attributes & ATTR_LOG_APPEND_TIME != 0, records, n, headers, h)
            if after == _NO_ROOM:
                return row, n, h
            if after != _REFUSED:
                first_record[row] = n
                n, h = after, after_headers
        row += 1
    return row, n, h


# verify and dump: Kafka's lz4 frames (codecs/lz4_codec.py) decoded here, or refused
_LZ4_BLOCK_MAX = np.array([lz4_codec.BLOCK_MAX.get(code, 0) for code in range(8)], dtype=np.int64)
"""Block maximum size by the BD byte's code; 0 where the frame is refused."""
_LZ4_MAGIC = np.int64(lz4_codec.FRAME_MAGIC)
_LZ4, _SNAPPY = CODEC_IDS["lz4"], CODEC_IDS["snappy"]
_STORED_BLOCK = np.int64(0x80000000)
_LAST_LITERALS, _LAST_MATCH_START = 5, 12
"""The LZ4 block format's end rules: the last 5 bytes are literals, the last match starts 12 or
more bytes before the end."""
_X1, _X2, _X3, _X4, _X5 = (np.uint64(p) for p in (2654435761, 2246822519, 3266489917, 668265263, 374761393))
_M32 = np.uint64(0xFFFFFFFF)


@_jit
def _le32(buf, at):
    return (np.uint64(buf[at]) | (np.uint64(buf[at + 1]) << np.uint64(8)) | (np.uint64(buf[at + 2]) << np.uint64(16))
            | (np.uint64(buf[at + 3]) << np.uint64(24)))


@_jit
def _rotl32(x, r):
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M32


@_jit
def _xxh_round(lane, word):
    return (_rotl32((lane + word * _X2) & _M32, 13) * _X1) & _M32


@_jit
def xxh32(buf, start, end):
    """xxHash32 (seed 0) of buf[start:end], as lz4_codec.xxh32, in uint64s masked to 32 bits."""
    i = start
    if end - start >= 16:
        v1, v2, v3, v4 = (_X1 + _X2) & _M32, _X2, np.uint64(0), (np.uint64(1 << 32) - _X1) & _M32
        while i <= end - 16:
            v1 = _xxh_round(v1, _le32(buf, i))
            v2 = _xxh_round(v2, _le32(buf, i + 4))
            v3 = _xxh_round(v3, _le32(buf, i + 8))
            v4 = _xxh_round(v4, _le32(buf, i + 12))
            i += 16
        h = (_rotl32(v1, 1) + _rotl32(v2, 7) + _rotl32(v3, 12) + _rotl32(v4, 18)) & _M32
    else:
        h = _X5
    h = (h + np.uint64(end - start)) & _M32
    while i + 4 <= end:
        h = (_rotl32((h + _le32(buf, i) * _X3) & _M32, 17) * _X4) & _M32
        i += 4
    while i < end:
        h = (_rotl32((h + np.uint64(buf[i]) * _X5) & _M32, 11) * _X1) & _M32
        i += 1
    h ^= h >> np.uint64(15)
    h = (h * _X2) & _M32
    h ^= h >> np.uint64(13)
    h = (h * _X3) & _M32
    return h ^ (h >> np.uint64(16))


@intrinsic
def _put_word(typingctx, buf, at, word):
    """Store a uint64 as 8 bytes of a uint8 array at `at`, little-endian, unaligned, unchecked."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        target = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        builder.store(args[2], target, align=1)
        return context.get_dummy_value()
    return types.none(buf, at, types.uint64), codegen


@_inline
def _copy(dst, to, src, start, length):
    """dst[to:to + length] = src[start:start + length], two arrays or ranges 16 or more bytes apart,
    16 bytes at a time. Where both arrays have room it writes up to 15 bytes past the end (what
    comes next is written over them), else it ends byte by byte."""
    k = 0
    if to + length + 16 <= len(dst) and start + length + 16 <= len(src):
        while k < length:
            _put_word(dst, to + k, _word_at(src, start + k))
            _put_word(dst, to + k + 8, _word_at(src, start + k + 8))
            k += 16
        return
    while length - k >= 8:
        _put_word(dst, to + k, _word_at(src, start + k))
        k += 8
    while k < length:
        dst[to + k] = src[start + k]
        k += 1


@_inline
def _repeat(out, op, offset, length):
    """An LZ4 match: the `length` bytes from `offset` back, which repeat when it is shorter. A
    short pattern is written byte by byte until it spans 16 bytes, then copied from that far back."""
    if offset >= 16:
        _copy(out, op, out, op - offset, length)
        return
    span = offset * ((15 + offset) // offset)
    first = min(span, length)
    for k in range(first):
        out[op + k] = out[op - offset + k]
    if length > first:
        _copy(out, op + span, out, op, length - span)


@_inline
def _lz4_length(buf, ip, iend, length):
    """A literal or match length whose 4-bit field is all ones, with its extra bytes (each 255
    continues): (length, next position), the position -1 past the block."""
    while True:
        if ip >= iend:
            return length, -1
        byte = np.int64(buf[ip])
        ip += 1
        length += byte
        if byte != 255:
            return length, ip


@_jit
def lz4_block(buf, ip, iend, out, op, capacity):
    """One LZ4 block, buf[ip:iend], decoded to out[op:] as `lz4.block.decompress(block,
    uncompressed_size=capacity)` does. Returns the output's end, _REFUSED where that would raise
    (and wherever the block breaks the format's end rules, which liblz4 checks only in part), or
    _NO_ROOM where `out` ends before `capacity` does and the block needs more."""
    start = op
    capacity_end = op + capacity
    out_end = min(capacity_end, len(out))
    last_match, last_match_end = np.int64(-1), np.int64(-1)
    while True:
        if ip >= iend:
            return _REFUSED  # no token: an empty block, or one ending in a match
        token = np.int64(buf[ip])
        ip += 1
        length = token >> 4
        if length == 15:
            length, ip = _lz4_length(buf, ip, iend, length)
            if ip < 0:
                return _REFUSED
        if length > iend - ip:
            return _REFUSED
        if length > out_end - op:
            return _NO_ROOM if out_end < capacity_end else _REFUSED
        _copy(out, op, buf, ip, length)
        op += length
        ip += length
        if ip == iend:
            break  # the last sequence: literals only
        if iend - ip < 2:
            return _REFUSED
        offset = np.int64(buf[ip]) | (np.int64(buf[ip + 1]) << 8)
        ip += 2
        if offset == 0 or offset > op - start:
            return _REFUSED
        length = token & 15
        if length == 15:
            length, ip = _lz4_length(buf, ip, iend, length)
            if ip < 0:
                return _REFUSED
        length += 4
        if length > out_end - op:
            return _NO_ROOM if out_end < capacity_end else _REFUSED
        last_match = op
        _repeat(out, op, offset, length)
        op += length
        last_match_end = op
    if last_match >= 0 and (last_match > op - _LAST_MATCH_START or last_match_end > op - _LAST_LITERALS):
        return _REFUSED
    return op


@_jit
def lz4_frame(buf, start, end, limit, out, op):
    """`lz4_codec.decompress(buf[start:end], limit, magic=2)` into out[op:]: returns the output's
    end, _REFUSED wherever that raises (the caller lets it say why), or _NO_ROOM when `out` is full."""
    if end - start < 7 or np.int64(_le32(buf, start)) != _LZ4_MAGIC:
        return _REFUSED
    flags, descriptor = np.int64(buf[start + 4]), np.int64(buf[start + 5])
    if flags >> 6 != 1 or flags & 0x03 or not flags & 0x20 or descriptor & 0x8F:
        return _REFUSED
    block_max = _LZ4_BLOCK_MAX[(descriptor >> 4) & 0x07]
    if block_max == 0:
        return _REFUSED
    checksums = 4 if flags & 0x10 else 0
    pos = start + 6 + (8 if flags & 0x08 else 0)
    if pos >= end or np.int64(buf[pos]) != np.int64((xxh32(buf, start + 4, pos) >> np.uint64(8)) & np.uint64(0xFF)):
        return _REFUSED
    pos += 1
    first = op
    while True:
        if pos + 4 > end:
            return _REFUSED
        word = np.int64(_le32(buf, pos))
        pos += 4
        size = word & (_STORED_BLOCK - 1)
        if size == 0:  # the end mark (its stored bit masked off); a content checksum after it is skipped
            return _REFUSED if flags & 0x04 and end - pos < 4 else op  # (Kafka's getInt: 4 bytes or it throws)
        if size > block_max or pos + size + checksums > end:
            return _REFUSED
        if checksums and xxh32(buf, pos, pos + size) != _le32(buf, pos + size):
            return _REFUSED
        budget = limit - (op - first)
        if word & _STORED_BLOCK:
            if size > budget:
                return _REFUSED
            if size > len(out) - op:
                return _NO_ROOM
            _copy(out, op, buf, pos, size)
            op += size
        else:
            if budget <= 0:
                return _REFUSED
            op = lz4_block(buf, pos, pos + size, out, op, min(block_max, budget))
            if op < 0:
                return op
        pos += size + checksums


# snappy: snappy-java's xerial framing around raw snappy blocks, as Kafka's producers write it

_XERIAL_MAGIC = np.uint64(int.from_bytes(snappy_codec.XERIAL_MAGIC, "little"))
_XERIAL_HEADER = len(snappy_codec.XERIAL_HEADER)


@_jit
def snappy_block(buf, start, end, out, op, budget):
    """`snappy.uncompress(buf[start:end])` into out[op:], for a block that keeps every rule of the
    format (its length a varint of at most 5 bytes and 32 bits, every literal and copy inside the
    input and the declared length, every copy from at least one byte back inside the block's own
    output, the input ending where the output reaches the declared length): returns the output's
    end; _REFUSED for anything else and for a length above `budget` (the caller lets the codec say
    why), _NO_ROOM when `out` has no room for it."""
    length, shift, pos = np.int64(0), 0, start
    while True:
        if pos >= end or shift > 28:
            return _REFUSED
        byte = np.int64(buf[pos])
        pos += 1
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    if length > 0xFFFFFFFF or length > budget:
        return _REFUSED
    if length > len(out) - op:
        return _NO_ROOM
    first, stop = op, op + length
    while pos < end:
        tag = np.int64(buf[pos])
        pos += 1
        if tag & 3 == 0:  # literal: its length - 1 in the tag, or in the 1-4 bytes after it
            size = tag >> 2
            if size >= 60:
                extra = size - 59
                if pos + extra > end:
                    return _REFUSED
                size = np.int64(0)
                for k in range(extra):
                    size |= np.int64(buf[pos + k]) << (8 * k)
                pos += extra
            size += 1
            if pos + size > end or op + size > stop:
                return _REFUSED
            _copy(out, op, buf, pos, size)
            pos += size
        else:  # copy: 1, 2 or 4 bytes of offset
            if tag & 3 == 1:
                if pos + 1 > end:
                    return _REFUSED
                size, offset = 4 + ((tag >> 2) & 7), ((tag >> 5) << 8) | np.int64(buf[pos])
                pos += 1
            elif tag & 3 == 2:
                if pos + 2 > end:
                    return _REFUSED
                size, offset = (tag >> 2) + 1, np.int64(buf[pos]) | (np.int64(buf[pos + 1]) << 8)
                pos += 2
            else:
                if pos + 4 > end:
                    return _REFUSED
                size, offset = (tag >> 2) + 1, np.int64(_le32(buf, pos))
                pos += 4
            if offset == 0 or offset > op - first or op + size > stop:
                return _REFUSED
            _repeat(out, op, offset, size)
        op += size
    return op if op == stop else _REFUSED


@_jit
def snappy_xerial(buf, start, end, limit, out, op):
    """`snappy_codec.decompress(buf[start:end], limit, magic=2)` into out[op:] for a payload in
    xerial framing: returns the output's end, _REFUSED wherever that raises and for what it reads
    otherwise (a raw block without the framing, a second stream's header), _NO_ROOM when `out` is
    full."""
    if end - start < _XERIAL_HEADER or _word_at(buf, start) != _XERIAL_MAGIC:
        return _REFUSED
    first, pos = op, start + _XERIAL_HEADER
    while end - pos >= 4:  # (fewer bytes left end the stream: SnappyInputStream.hasNextChunk)
        length = _signed(_be(buf, pos, 4), 32)  # (a second header's magic reads as a negative length)
        pos += 4
        if length < 0 or pos + length > end:
            return _REFUSED
        op = snappy_block(buf, pos, pos + length, out, op, limit - (op - first))
        if op < 0:
            return op
        pos += length
    return op


@_jit
def frames_each(segment, codec_ids, starts, ends, limit, out, bounds, decoded):
    """`lz4_frame` or `snappy_xerial`, by codec id, for payloads segment[starts[i]:ends[i]]: payload
    i lands at out[bounds[i]:bounds[i+1]] (bounds[0] = 0) and decoded[i] says whether it did (else
    it is empty: the caller decompresses it). Returns how many it went through: fewer than all when
    `out` is full (a payload that does not fit in it alone is refused)."""
    bounds[0] = 0
    for i in range(len(starts)):
        if codec_ids[i] == _LZ4:
            after = lz4_frame(segment, starts[i], ends[i], limit, out, bounds[i])
        elif codec_ids[i] == _SNAPPY:
            after = snappy_xerial(segment, starts[i], ends[i], limit, out, bounds[i])
        else:
            after = _REFUSED
        if after == _NO_ROOM and bounds[i] > 0:
            return i
        decoded[i] = 1 if after >= 0 else 0
        bounds[i + 1] = after if after >= 0 else bounds[i]
    return len(starts)


# gzip: one member as Java's GZIPOutputStream writes it, inflated by ISA-L's own inflate

_GZIP_HEADER, _GZIP_TRAILER = 10, 8
"""A member's header without optional fields (flags 0) and its trailer (CRC-32, size mod 2^32)."""
_INFLATE_OUT_OVERFLOW = 2
"""ISA-L's ISAL_OUT_OVERFLOW; 0 (ISAL_DECOMP_OK) is a whole stream read."""


@intrinsic
def _inflate_raw(typingctx, inflate, state, source, start, length, out, at, room):
    """ISA-L's `isal_inflate_stateless` (its address in `inflate`) of the raw deflate stream at
    source[start:start + length] into out[at:at + room], through `state`: a zeroed `struct
    inflate_state` (so raw deflate: crc_flag 0). Sets only its first fields (next_out at 0,
    avail_out at 8, next_in at 16, avail_in at 32: their place since ISA-L 2.20) and returns
    (ISA-L's code, input bytes read, output bytes written)."""
    def codegen(context, builder, signature, args):
        i8p, i32, i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
        function, state_, source_, start_, length_, out_, at_, room_ = args
        begin = builder.gep(context.make_array(signature.args[2])(context, builder, source_).data, [start_])
        target = builder.gep(context.make_array(signature.args[5])(context, builder, out_).data, [at_])
        base = context.make_array(signature.args[1])(context, builder, state_).data

        def field(offset, kind):
            return builder.bitcast(builder.gep(base, [ir.Constant(i64, offset)]), kind.as_pointer())

        builder.store(target, field(0, i8p))
        builder.store(builder.trunc(room_, i32), field(8, i32))
        builder.store(begin, field(16, i8p))
        builder.store(builder.trunc(length_, i32), field(32, i32))
        call = builder.inttoptr(function, ir.FunctionType(i32, [i8p]).as_pointer())
        code = builder.call(call, [base])
        read = builder.sub(builder.ptrtoint(builder.load(field(16, i8p)), i64), builder.ptrtoint(begin, i64))
        written = builder.sub(builder.ptrtoint(builder.load(field(0, i8p)), i64), builder.ptrtoint(target, i64))
        return context.make_tuple(builder, signature.return_type, [builder.sext(code, i64), read, written])
    return types.UniTuple(types.int64, 3)(inflate, state, source, start, length, out, at, room), codegen


@_jit
def gzip_member(buf, start, end, out, op, size, inflate, state):
    """`gzip_codec.decompress(buf[start:end], ...)` into exactly out[op:op + size], where the payload
    is what producers write: one member, a header without optional fields, the trailer where the
    payload ends, `size` bytes (its trailer's) whose CRC-32 the trailer holds. Returns True where
    it is; False for anything else, which the caller decompresses as GZIPInputStream reads it."""
    if (end - start < _GZIP_HEADER + _GZIP_TRAILER or buf[start] != 0x1F or buf[start + 1] != 0x8B
            or buf[start + 2] != 8 or buf[start + 3] != 0 or size > 0xFFFFFFFF):
        return False
    code, read, written = _inflate_raw(inflate, state, buf, start + _GZIP_HEADER, end - start - _GZIP_HEADER,
                                       out, op, size)
    return (code == 0 and start + _GZIP_HEADER + read == end - _GZIP_TRAILER and written == size
            and np.uint64(size) == _le32(buf, end - 4) and crc32(out, op, op + size) == _le32(buf, end - 8))


@_jit
def gzip_each(segment, starts, ends, at, out, inflated, inflate, state):
    """`gzip_member` for payloads segment[starts[i]:ends[i]] into out[at[i]:at[i + 1]]: inflated[i]
    says whether it did. Returns how many did."""
    done = 0
    for i in range(len(starts)):
        inflated[i] = 1 if gzip_member(segment, starts[i], ends[i], out, at[i], at[i + 1] - at[i], inflate, state) else 0
        done += inflated[i]
    return done


# dump: V0/V1 messages into the same record columns, as `LegacyBatch.records` reads them


@_jit
def _legacy_sized(data, cursor, message_end):
    """(start, length, next cursor) of the int32-sized key or value at `cursor`: length -1 for null,
    the cursor -1 where `legacy.read_message` raises (the size or the bytes run past the message)
    or where a null's size field is not -1 (the reference keeps that field: Record.legacy_null_sizes)."""
    if cursor + 4 > message_end:
        return cursor, np.int64(-1), -1
    size = _signed(_be(data, cursor, 4), 32)
    cursor += 4
    if size < 0:
        return cursor, np.int64(-1), cursor if size == -1 else -1
    if cursor + size > message_end:
        return cursor, size, -1
    return cursor, size, cursor + size


@_jit
def _legacy_records(data, start, end, magic, compressed, wrapper_offset, wrapper_timestamp, log_append_time,
                    records, legacy_records, n):
    """`LegacyBatch.records` into records[:, n:] and legacy_records[:, n:]: the inner messages of a
    wrapper's decompressed message set data[start:end] (`compressed`), or the one uncompressed
    message there (its CRC checked by `scan_legacy`). Returns the rows after it; _REFUSED where the
    reference raises, or where it would report what this does not carry (an inner CRC mismatch, an
    inner magic that is not the wrapper's, offsets past a long); _NO_ROOM for too small arrays."""
    if n + (end - start) // SMALLEST_LEGACY_ENTRY + 1 > records.shape[1]:
        return _NO_ROOM
    first = n
    pos = start
    while end - pos >= _OVERHEAD:
        size = _signed(_be(data, pos + _LENGTH_AT, 4), 32)
        if size < _LEGACY_OVERHEAD_V0:
            return _REFUSED
        if pos + _OVERHEAD + size > end:
            break  # DataLogInputStream: a truncated inner entry ends the set
        message_end = pos + _OVERHEAD + size
        attributes = _signed(np.int64(data[pos + _LEGACY_MAGIC_AT + 1]), 8)
        if np.int64(data[pos + _LEGACY_MAGIC_AT]) != magic or (compressed and attributes & ATTR_CODEC != 0):
            return _REFUSED
        cursor = pos + _LEGACY_MAGIC_AT + 2
        timestamp = np.int64(-1)  # V0 has none
        if magic == 1:
            if cursor + 8 > message_end:
                return _REFUSED
            timestamp = wrapper_timestamp if log_append_time else _be(data, cursor, 8)
            cursor += 8
        key_start, key_length, cursor = _legacy_sized(data, cursor, message_end)
        if cursor < 0:
            return _REFUSED
        value_start, value_length, cursor = _legacy_sized(data, cursor, message_end)
        if cursor < 0:
            return _REFUSED
        crc = _be(data, pos + _LEGACY_CRC_AT, 4)
        if compressed and crc32(data, pos + _LEGACY_MAGIC_AT, message_end) != crc:
            return _REFUSED
        records[R_OFFSET, n] = _be(data, pos, 8)
        records[R_TIMESTAMP, n] = timestamp
        records[R_SEQUENCE, n] = -1
        records[R_SIZE, n] = _OVERHEAD + size
        records[R_KEY_START, n] = key_start
        records[R_KEY_LENGTH, n] = key_length
        records[R_VALUE_START, n] = value_start
        records[R_VALUE_LENGTH, n] = value_length
        records[R_FIRST_HEADER, n] = 0
        records[R_HEADER_COUNT, n] = 0
        legacy_records[L_CRC, n] = crc
        legacy_records[L_ATTRIBUTES, n] = attributes
        n += 1
        pos = message_end
    if n == first:
        return _REFUSED  # "Found invalid compressed record set with no inner records"
    if compressed and magic == 1 and wrapper_offset != 0:  # V1 inner offsets are relative to the last one
        last_inner = records[R_OFFSET, n - 1]
        if wrapper_offset < last_inner or (last_inner < 0 and wrapper_offset > _LONG_MAX + last_inner):
            return _REFUSED  # the reference raises; or the base would wrap past a long
        base = wrapper_offset - last_inner
        for i in range(first, n):
            if not _add_fits(base, records[R_OFFSET, i]):
                return _REFUSED
            records[R_OFFSET, i] += base
    return n


@_jit
def decode_legacy_each(segment, payloads, columns, row, stop, starts, ends, in_payloads, first_record, records, n,
                       legacy_records):
    """`_legacy_records` for the messages row..stop-1 of `columns`, all of one magic (`scan_legacy`),
    as `decode_each` does for V2 batches; also sets each decoded row's RECORDS_COUNT. Returns (row, n)
    after the last message done: before `stop` when the arrays are too small for the next one."""
    while row < stop:
        first_record[row] = NOT_DECODED
        if starts[row] >= 0:
            attributes = columns[ATTRIBUTES, row]
            after = _legacy_records(
                payloads if in_payloads[row] else segment, starts[row], ends[row],
                np.int64(segment[columns[POSITION, row] + _LEGACY_MAGIC_AT]), attributes & ATTR_CODEC != 0,
                columns[BASE_OFFSET, row] + columns[LAST_OFFSET_DELTA, row], columns[MAX_TIMESTAMP, row],
                attributes & ATTR_LOG_APPEND_TIME != 0, records, legacy_records, n)
            if after == _NO_ROOM:
                return row, n
            if after != _REFUSED:
                first_record[row] = n
                columns[RECORDS_COUNT, row] = after - n
                n = after
        row += 1
    return row, n


# dump: JSON Lines written from those columns, as output/jsonl.py writes them with orjson

_SHORT_ESCAPES = np.zeros(256, dtype=np.uint8)
"""The letter after the backslash where JSON has a short escape (json.dumps and orjson use them all),
else 0; the other control characters take \\u00XX, lowercase."""
for _byte, _letter in zip(b'"\\\b\f\n\r\t', b'"\\bfnrt'):
    _SHORT_ESCAPES[_byte] = _letter
_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8).copy()
_BASE64_DIGITS = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
                               dtype=np.uint8).copy()
_INT_WIDTH = 20
"""Characters of the widest int64, its sign included."""
_BATCH_LINE, _RECORD_LINE, _LEGACY_LINE, _HEADER_OBJECT = 19, 12, 16, 3
"""Fields of the batch, record and V0/V1 record templates and of a header's (each has a piece more)."""


_ONES, _HIGH_BITS = np.uint64(0x0101010101010101), np.uint64(0x8080808080808080)
_SPACES, _QUOTES, _BACKSLASHES = (np.uint64(0x0101010101010101 * byte) for byte in (0x20, 0x22, 0x5C))


@_jit
def _plain_word(word):
    """Whether 8 bytes are ASCII that a JSON string holds as they are: no control character, quote or
    backslash (a byte below 0x20, or equal to one, borrows into its high bit)."""
    quotes, backslashes = word ^ _QUOTES, word ^ _BACKSLASHES
    flags = word | ((word - _SPACES) & ~word) | ((quotes - _ONES) & ~quotes) | ((backslashes - _ONES) & ~backslashes)
    return flags & _HIGH_BITS == np.uint64(0)


@_inline
def _put_text(out, op, texts, bounds, k):
    start = bounds[k]
    length = bounds[k + 1] - start
    _copy(out, op, texts, start, length)
    return op + length


@_inline
def _put_int(out, op, value):
    """Decimal, as Python prints an int."""
    if value < 0:
        out[op] = 45  # '-'
        op += 1
    magnitude = np.uint64(value) if value >= 0 else np.uint64(0) - np.uint64(value)  # (Long.MIN_VALUE too)
    digits = 1
    probe = magnitude
    while probe >= np.uint64(10):
        probe //= np.uint64(10)
        digits += 1
    at = op + digits
    while at > op:
        at -= 1
        out[at] = np.uint8(np.uint64(48) + magnitude % np.uint64(10))
        magnitude //= np.uint64(10)
    return op + digits


@_jit
def _put_string(out, op, data, start, length):
    """data[start:start + length] as a JSON string, as orjson writes the text it decodes to; -1 where
    Python's strict UTF-8 decoder refuses it (overlong forms, surrogates, past U+10FFFF, cut short).
    Writes at most 6 * length + 2 bytes."""
    out[op] = 34  # '"'
    op += 1
    i, end = start, start + length
    while i < end:
        if end - i >= 8:
            word = _word_at(data, i)
            if _plain_word(word):
                _put_word(out, op, word)
                op += 8
                i += 8
                continue
        byte = data[i]
        if byte < 0x80:
            letter = _SHORT_ESCAPES[byte]
            if letter != 0:
                out[op] = 92  # '\'
                out[op + 1] = letter
                op += 2
            elif byte < 0x20:
                out[op] = 92
                out[op + 1] = 117  # 'u'
                out[op + 2] = 48
                out[op + 3] = 48
                out[op + 4] = _HEX_DIGITS[byte >> 4]
                out[op + 5] = _HEX_DIGITS[byte & 15]
                op += 6
            else:
                out[op] = byte
                op += 1
            i += 1
            continue
        length = _utf8_sequence(data, i, end)
        if length < 0:
            return -1
        for k in range(length):
            out[op + k] = data[i + k]
        op += length
        i += length
    out[op] = 34
    return op + 1


@_jit
def _utf8_sequence(data, i, end):
    """The bytes of the character of two to four that starts at data[i] (a lead byte, >= 0x80), or
    -1 where Python's strict UTF-8 decoder refuses it: overlong, a surrogate, past U+10FFFF, cut short."""
    byte = data[i]
    if byte < 0xC2:
        return -1
    if byte < 0xE0:
        more, low, high = 1, 0x80, 0xBF
    elif byte < 0xF0:
        more, low, high = 2, 0xA0 if byte == 0xE0 else 0x80, 0x9F if byte == 0xED else 0xBF
    elif byte < 0xF5:
        more, low, high = 3, 0x90 if byte == 0xF0 else 0x80, 0x8F if byte == 0xF4 else 0xBF
    else:
        return -1
    if end - i <= more or not low <= data[i + 1] <= high:
        return -1
    for k in range(2, more + 1):
        if data[i + k] & 0xC0 != 0x80:
            return -1
    return more + 1


@_jit
def _put_base64(out, op, data, start, length):
    """data[start:start + length] in base64 (binascii.b2a_base64 without a newline), quoted."""
    out[op] = 34
    op += 1
    i, end = start, start + length
    while i < end:
        word = np.int64(data[i]) << 16
        if i + 1 < end:
            word |= np.int64(data[i + 1]) << 8
        if i + 2 < end:
            word |= np.int64(data[i + 2])
        out[op] = _BASE64_DIGITS[word >> 18]
        out[op + 1] = _BASE64_DIGITS[(word >> 12) & 63]
        out[op + 2] = _BASE64_DIGITS[(word >> 6) & 63] if i + 1 < end else 61  # '='
        out[op + 3] = _BASE64_DIGITS[word & 63] if i + 2 < end else 61
        op += 4
        i += 3
    out[op] = 34
    return op + 1


@_jit
def _put_bytes(out, op, data, start, length, base64_only, texts, bounds, between):
    """A key or value as `jsonl._json_utf8` gives it, the text `between`, then its encoding's text."""
    encoding = T_NULL
    if length < 0:
        op = _put_text(out, op, texts, bounds, T_NULL)
    else:
        after = -1 if base64_only else _put_string(out, op, data, start, length)
        if after >= 0:
            op, encoding = after, T_UTF8
        else:
            op, encoding = _put_base64(out, op, data, start, length), T_BASE64
    op = _put_text(out, op, texts, bounds, between)
    return _put_text(out, op, texts, bounds, encoding)


@_jit
def _marker_type(batches, b, records, r, data):
    """The control type (0 ABORT, 1 COMMIT) of control batch b of a deep run when its one record r
    is a transaction marker's in the shape Kafka writes (`plain_marker`: key and value version 0, no
    header; the only control records `dump._BulkDump` decodes), else NOT_A_MARKER: the renderers
    leave any other to Python."""
    if (batches[B_COUNT, b] != 1 or records[R_KEY_LENGTH, r] != 4 or records[R_VALUE_LENGTH, r] != 6
            or records[R_HEADER_COUNT, r] != 0):
        return NOT_A_MARKER
    key, value = records[R_KEY_START, r], records[R_VALUE_START, r]
    if data[key] != 0 or data[key + 1] != 0 or data[key + 2] != 0 or data[key + 3] > 1 or data[value] != 0 \
            or data[value + 1] != 0:
        return NOT_A_MARKER
    return np.int64(data[key + 3])


@_jit
def _coordinator_epoch(records, r, data):
    """The coordinator epoch of a marker's record r (`_marker_type`): its value's int32 after the version."""
    return _signed(_be(data, records[R_VALUE_START, r] + 2, 4), 32)


@_jit
def _put_batch(out, op, batches, b, texts, bounds):
    """A batch line, as `jsonl.run_block` fills its template."""
    attributes, magic = batches[B_ATTRIBUTES, b], batches[B_MAGIC, b]
    for field in range(_BATCH_LINE):
        op = _put_text(out, op, texts, bounds, T_BATCH + field)
        if field == 4 and magic != 2:
            op = _put_text(out, op, texts, bounds, T_NULL)  # count
        elif field == 7:
            op = _put_text(out, op, texts, bounds, T_TRUE)  # crc_valid: a run holds valid CRCs only
        elif field == 8:
            op = _put_text(out, op, texts, bounds, T_CODEC + (attributes & ATTR_CODEC))
        elif field == 9:
            op = _put_text(out, op, texts, bounds, T_TIMESTAMP_TYPE + (
                2 if magic == 0 else 1 if attributes & ATTR_LOG_APPEND_TIME else 0))
        elif field == 15:
            op = _put_text(out, op, texts, bounds, T_TRUE if attributes & ATTR_TRANSACTIONAL else T_FALSE)
        elif field == 16:
            op = _put_text(out, op, texts, bounds, T_TRUE if attributes & ATTR_CONTROL else T_FALSE)
        elif field == 18 and not attributes & ATTR_DELETE_HORIZON:
            op = _put_text(out, op, texts, bounds, T_NULL)
        else:
            op = _put_int(out, op, batches[_BATCH_LINE_FIELDS[field], b])
    op = _put_text(out, op, texts, bounds, T_BATCH + _BATCH_LINE)
    out[op] = 10
    return op + 1


_BATCH_LINE_FIELDS = np.array([RUN_BATCH_FIELDS.index(name) for name in (
    "position", "size", "base_offset", "last_offset", "count", "magic", "crc", "crc", "attributes", "attributes",
    "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "last_sequence", "attributes", "attributes",
    "partition_leader_epoch", "base_timestamp")], dtype=np.int64)
"""The run row behind each of a batch line's fields (`_put_batch` writes the texts among them itself)."""


@_jit
def _put_record(out, op, records, r, headers, legacy, is_legacy, position, magic, data, base64_only, marker, texts,
                bounds):
    """A record line, as `jsonl.run_block` fills its template, with a transaction marker's `control`
    object when `marker` is its control type (not NOT_A_MARKER); -1 for one whose header key is not
    UTF-8 (Python replaces what does not decode)."""
    k = T_LEGACY if is_legacy else T_RECORD
    op = _put_text(out, op, texts, bounds, k)
    op = _put_int(out, op, position)
    for field in range(1, 7):
        op = _put_text(out, op, texts, bounds, k + field)
        op = _put_int(out, op, records[_RECORD_LINE_FIELDS[field], r])
    op = _put_text(out, op, texts, bounds, k + 7)
    op = _put_bytes(out, op, data, records[R_KEY_START, r], records[R_KEY_LENGTH, r], base64_only, texts, bounds,
                    k + 8)
    op = _put_text(out, op, texts, bounds, k + 9)
    op = _put_bytes(out, op, data, records[R_VALUE_START, r], records[R_VALUE_LENGTH, r], base64_only, texts, bounds,
                    k + 10)
    op = _put_text(out, op, texts, bounds, k + 11)
    first = records[R_FIRST_HEADER, r]
    for h in range(first, first + records[R_HEADER_COUNT, r]):
        if h > first:
            out[op] = 44  # ','
            op += 1
        op = _put_text(out, op, texts, bounds, T_HEADER)
        if headers[H_KEY_LENGTH, h] < 0:
            return -1
        op = _put_string(out, op, data, headers[H_KEY_START, h], headers[H_KEY_LENGTH, h])
        if op < 0:
            return -1
        op = _put_text(out, op, texts, bounds, T_HEADER + 1)
        op = _put_bytes(out, op, data, headers[H_VALUE_START, h], headers[H_VALUE_LENGTH, h], base64_only, texts,
                        bounds, T_HEADER + 2)
        op = _put_text(out, op, texts, bounds, T_HEADER + 3)
    if marker != NOT_A_MARKER:  # (a marker's key version is 0: `_marker_type`)
        op = _put_text(out, op, texts, bounds, T_CONTROL)
        op = _put_text(out, op, texts, bounds, T_CONTROL_TYPE + marker)
        op = _put_text(out, op, texts, bounds, T_CONTROL + 1)
        op = _put_int(out, op, marker)
        op = _put_text(out, op, texts, bounds, T_CONTROL + 2)
        op = _put_int(out, op, 0)
        op = _put_text(out, op, texts, bounds, T_CONTROL + 3)
        op = _put_int(out, op, _coordinator_epoch(records, r, data))
        op = _put_text(out, op, texts, bounds, T_CONTROL + 4)
        out[op] = 10
        return op + 1
    op = _put_text(out, op, texts, bounds, k + 12)
    if is_legacy:
        op = _put_int(out, op, magic)
        op = _put_text(out, op, texts, bounds, k + 13)
        op = _put_int(out, op, legacy[L_CRC, r])
        op = _put_text(out, op, texts, bounds, k + 14)
        op = _put_text(out, op, texts, bounds, T_TRUE)  # crc_valid: the kernel kept matching messages only
        op = _put_text(out, op, texts, bounds, k + 15)
        op = _put_int(out, op, legacy[L_ATTRIBUTES, r])
        op = _put_text(out, op, texts, bounds, k + 16)
    out[op] = 10
    return op + 1


_RECORD_LINE_FIELDS = np.array([0, R_OFFSET, R_TIMESTAMP, R_SEQUENCE, R_SIZE, R_KEY_LENGTH, R_VALUE_LENGTH],
                               dtype=np.int64)
"""The record row behind a record line's int fields 1 to 6 (the 0th is its batch's position)."""


@_jit
def _record_bound(records, r, headers, fixed, header_fixed, widest):
    """The most bytes `_put_record` can write for record r: every byte of text escaped (6 each)."""
    need = fixed + 16 * widest + 6 * (max(records[R_KEY_LENGTH, r], 0) + max(records[R_VALUE_LENGTH, r], 0)) + 8
    first = records[R_FIRST_HEADER, r]
    for h in range(first, first + records[R_HEADER_COUNT, r]):
        need += header_fixed + 3 * widest + 6 * (max(headers[H_KEY_LENGTH, h], 0)
                                                 + max(headers[H_VALUE_LENGTH, h], 0)) + 8
    return need


@_jit
def render_each(segment, payloads, batches, records, headers, legacy, deep, is_legacy, texts, bounds, base64_only, out,
                state):
    """The JSON lines of a run's batches and (`deep`) records from rows state[RENDER_BATCH] and
    state[RENDER_RECORD] into `out`, whole batches at a time, until the next does not fit or has a
    header key that is not UTF-8 (state[RENDER_REFUSED] = 1: the caller writes it). Records lie in
    `payloads` or `segment` as the batch's in_payloads says; `texts`[bounds[k]:bounds[k + 1]] is
    the k-th of `bulk_scan.TEXT_PIECES`. A control batch's records are a transaction marker's
    (`_marker_type`), or it is left to Python too."""
    widest = _INT_WIDTH
    for k in range(T_CODEC, TEXTS):
        widest = max(widest, bounds[k + 1] - bounds[k])
    record_text, record_fields = (T_LEGACY, _LEGACY_LINE) if is_legacy else (T_RECORD, _RECORD_LINE)
    batch_fixed = bounds[T_BATCH + _BATCH_LINE + 1] - bounds[T_BATCH]
    record_fixed = bounds[record_text + record_fields + 1] - bounds[record_text]
    header_fixed = bounds[T_HEADER + _HEADER_OBJECT + 1] - bounds[T_HEADER] + 1
    control_fixed = bounds[TEXTS] - bounds[T_CONTROL] + 3 * widest
    b, r, op = state[RENDER_BATCH], state[RENDER_RECORD], 0
    capacity = len(out)
    state[RENDER_REFUSED] = 0
    while b < batches.shape[1]:
        data = payloads if batches[B_IN_PAYLOADS, b] != 0 else segment
        marker = NOT_A_MARKER
        if deep and batches[B_ATTRIBUTES, b] & ATTR_CONTROL:
            marker = _marker_type(batches, b, records, r, data)
            if marker == NOT_A_MARKER:
                state[RENDER_REFUSED] = 1
                break
        batch_start, batch_record = op, r
        if op + batch_fixed + _BATCH_LINE * widest + 1 > capacity:
            break
        op = _put_batch(out, op, batches, b, texts, bounds)
        count = batches[B_COUNT, b]
        if deep and count > 0:
            position, magic = batches[B_POSITION, b], batches[B_MAGIC, b]
            stop = r + count
            while r < stop:
                need = _record_bound(records, r, headers, record_fixed, header_fixed, widest)
                if op + need + (control_fixed if marker != NOT_A_MARKER else 0) > capacity:
                    break
                op = _put_record(out, op, records, r, headers, legacy, is_legacy, position, magic, data, base64_only,
                                 marker, texts, bounds)
                if op < 0:
                    state[RENDER_REFUSED] = 1
                    break
                r += 1
            if r < stop:
                op, r = batch_start, batch_record
                break
        b += 1
    state[RENDER_BATCH], state[RENDER_RECORD], state[RENDER_WRITTEN] = b, r, op
    return 0


_DUMPLOG_BATCH, _DUMPLOG_POSITION = 18, 11
"""Fields of a V2 batch line of kafka-dump-log's text (`dumplog_text.batch_line`), and the first of
those a V0/V1 message's line has too."""
_DUMPLOG_BATCH_FIELDS = np.array([RUN_BATCH_FIELDS.index(name) for name in (
    "base_offset", "last_offset", "count", "base_sequence", "last_sequence", "producer_id", "producer_epoch",
    "partition_leader_epoch", "attributes", "attributes", "base_timestamp", "position", "attributes",
    "max_timestamp", "size", "magic", "attributes", "crc")], dtype=np.int64)
"""The run row behind each of its fields (`_put_dumplog_batch` writes the texts among them itself)."""


_MALFORMED = -2
"""`_put_java_text` without `replace`: the text is not UTF-8, and its replacements may take more room."""
_REPLACEMENT = (0xEF, 0xBF, 0xBD)
"""U+FFFD in UTF-8."""


@_jit
def _put_java_text(out, op, data, start, length, replace):
    """data[start:start + length] as `java_text.decode_utf8` reads it (Java's `new String(bytes,
    UTF_8)`), in UTF-8: as it is where it is UTF-8 (`length` bytes); else, with `replace`, each
    malformed sequence as one U+FFFD by Java's rules (at most 3 bytes for each byte), without,
    _MALFORMED. A valid character is copied as its bytes, which is what its text encodes to."""
    i, end = start, start + length
    while i < end:
        if end - i >= 8 and _word_at(data, i) & _HIGH_BITS == np.uint64(0):
            i += 8
        elif data[i] < 0x80:
            i += 1
        else:
            sequence = _utf8_sequence(data, i, end)
            if sequence < 0:
                break
            i += sequence
    if i < end and not replace:
        return _MALFORMED
    _copy(out, op, data, start, i - start)
    op += i - start
    while i < end:  # from the first byte Python's strict decoder refuses: `java_text._decode_replacing`
        b1 = data[i]
        i += 1
        if b1 < 0x80:
            out[op] = b1
            op += 1
            continue
        good = 0  # the bytes of a valid character starting at b1; else one U+FFFD
        if 0xC2 <= b1 <= 0xDF:
            if i < end and data[i] & 0xC0 == 0x80:
                good = 2
            elif i >= end:
                i = end + 1  # cut short at the end: one U+FFFD, and decoding stops
        elif 0xE0 <= b1 <= 0xEF:
            if i + 1 < end:
                b2, b3 = data[i], data[i + 1]
                if _malformed3_2(b1, b2) or b3 & 0xC0 != 0x80:
                    i += 0 if _malformed3_2(b1, b2) else 1
                elif b1 != 0xED or b2 < 0xA0:  # (ED A0..BF: a surrogate, read whole and replaced)
                    good = 3
                else:
                    i += 2
            elif i >= end or not _malformed3_2(b1, data[i]):
                i = end + 1
        elif 0xF0 <= b1 <= 0xF7:
            if i + 2 < end:
                b2, b3, b4 = data[i], data[i + 1], data[i + 2]
                if b1 > 0xF4 or _malformed4_2(b1, b2):
                    pass
                elif b3 & 0xC0 != 0x80:
                    i += 1
                elif b4 & 0xC0 != 0x80:
                    i += 2
                else:
                    good = 4  # (a lead of F0..F4 with its second byte in range is U+10000..U+10FFFF)
            elif not (b1 > 0xF4 or (i < end and _malformed4_2(b1, data[i]))):
                i += 1
                if i >= end or data[i] & 0xC0 == 0x80:
                    i = end + 1
        if good:
            out[op] = b1
            for k in range(1, good):
                out[op + k] = data[i + k - 1]
            op += good
            i += good - 1
        else:
            out[op], out[op + 1], out[op + 2] = _REPLACEMENT[0], _REPLACEMENT[1], _REPLACEMENT[2]
            op += 3
    return op


@_jit
def _malformed3_2(b1, b2):
    return (b1 == 0xE0 and b2 & 0xE0 == 0x80) or b2 & 0xC0 != 0x80


@_jit
def _malformed4_2(b1, b2):
    return (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and b2 & 0xF0 != 0x80) or b2 & 0xC0 != 0x80


@_jit
def _put_dumplog_batch(out, op, batches, b, timestamp_type, texts, bounds):
    """A batch line, as `dumplog_text.batch_line` writes it (a run's CRCs are valid): a V0/V1
    message's starts with its offset and goes on from the position."""
    attributes = batches[B_ATTRIBUTES, b]
    first = 0
    if batches[B_MAGIC, b] != 2:
        op = _put_text(out, op, texts, bounds, D_LEGACY)
        op = _put_int(out, op, batches[B_LAST_OFFSET, b])
        first = _DUMPLOG_POSITION
    for field in range(first, _DUMPLOG_BATCH):
        op = _put_text(out, op, texts, bounds, D_BATCH + field)
        if field == 8:
            op = _put_text(out, op, texts, bounds, D_TRUE if attributes & ATTR_TRANSACTIONAL else D_FALSE)
        elif field == 9:
            op = _put_text(out, op, texts, bounds, D_TRUE if attributes & ATTR_CONTROL else D_FALSE)
        elif field == 10 and attributes & ATTR_DELETE_HORIZON:
            op = _put_text(out, op, texts, bounds, D_OPTIONAL + 1)
            op = _put_int(out, op, batches[B_BASE_TIMESTAMP, b])
            op = _put_text(out, op, texts, bounds, D_OPTIONAL + 2)
        elif field == 10:
            op = _put_text(out, op, texts, bounds, D_OPTIONAL)
        elif field == 12:
            op = _put_text(out, op, texts, bounds, D_TIMESTAMP_TYPE + timestamp_type)
        elif field == 16:
            op = _put_text(out, op, texts, bounds, D_CODEC + (attributes & ATTR_CODEC))
        else:
            op = _put_int(out, op, batches[_DUMPLOG_BATCH_FIELDS[field], b])
    op = _put_text(out, op, texts, bounds, D_BATCH + _DUMPLOG_BATCH)
    out[op] = 10
    return op + 1


@_jit
def _put_dumplog_record(out, op, records, r, headers, legacy, is_legacy, data, timestamp_type, print_data,
                        skip_metadata, texts, bounds, replace):
    """A record line, as `dumplog_text.record_line` writes it, of a batch that is not a control batch
    (`_put_dumplog_marker` writes a marker's); -1 for a null header key; without `replace`,
    _MALFORMED where a key, value or header key is not UTF-8 (see `_put_java_text`)."""
    if not skip_metadata:
        op = _put_text(out, op, texts, bounds, D_RECORD)
        op = _put_int(out, op, records[R_OFFSET, r])
        op = _put_text(out, op, texts, bounds, D_RECORD + 1)
        op = _put_text(out, op, texts, bounds, D_TIMESTAMP_TYPE + timestamp_type)
        for field in range(2, 5 if is_legacy else 6):
            op = _put_text(out, op, texts, bounds, D_RECORD + field)
            op = _put_int(out, op, records[_DUMPLOG_RECORD_FIELDS[field], r])
    if not skip_metadata and is_legacy:  # a run keeps messages whose CRCs match only
        op = _put_text(out, op, texts, bounds, D_LEGACY + 1)
        op = _put_text(out, op, texts, bounds, D_TRUE)
        op = _put_text(out, op, texts, bounds, D_LEGACY + 2)
        op = _put_int(out, op, legacy[L_CRC, r])
        op = _put_text(out, op, texts, bounds, D_LEGACY + 3)
    elif not skip_metadata:
        op = _put_text(out, op, texts, bounds, D_RECORD + 6)
        first = records[R_FIRST_HEADER, r]
        for h in range(first, first + records[R_HEADER_COUNT, r]):
            if h > first:
                out[op] = 44  # ','
                op += 1
            if headers[H_KEY_LENGTH, h] < 0:
                return -1
            op = _put_java_text(out, op, data, headers[H_KEY_START, h], headers[H_KEY_LENGTH, h], replace)
            if op < 0:
                return op
        op = _put_text(out, op, texts, bounds, D_RECORD + 7)
    if print_data and records[R_KEY_LENGTH, r] >= 0:
        op = _put_text(out, op, texts, bounds, D_KEY + (1 if skip_metadata else 0))
        op = _put_java_text(out, op, data, records[R_KEY_START, r], records[R_KEY_LENGTH, r], replace)
        if op < 0:
            return op
    if print_data and records[R_VALUE_LENGTH, r] >= 0:
        op = _put_text(out, op, texts, bounds, D_PAYLOAD)
        op = _put_java_text(out, op, data, records[R_VALUE_START, r], records[R_VALUE_LENGTH, r], replace)
        if op < 0:
            return op
    out[op] = 10
    return op + 1


@_jit
def _put_dumplog_marker(out, op, records, r, headers, legacy, data, marker, timestamp_type, skip_metadata, texts,
                        bounds):
    """A transaction marker's record line (`_marker_type`), as `dumplog_text.record_line` writes it:
    its metadata, its type and coordinator epoch (`control_text`), and no key or payload (a control
    batch's are not printed); an empty line without metadata."""
    if not skip_metadata:
        op = _put_dumplog_record(out, op, records, r, headers, legacy, False, data, timestamp_type, False, False,
                                 texts, bounds, False) - 1  # (its newline comes after the marker's texts)
        op = _put_text(out, op, texts, bounds, D_MARKER)
        op = _put_text(out, op, texts, bounds, D_CONTROL_TYPE + marker)
        op = _put_text(out, op, texts, bounds, D_MARKER + 1)
        op = _put_int(out, op, _coordinator_epoch(records, r, data))
    out[op] = 10
    return op + 1


_DUMPLOG_RECORD_FIELDS = np.array([R_OFFSET, R_TIMESTAMP, R_TIMESTAMP, R_KEY_LENGTH, R_VALUE_LENGTH, R_SEQUENCE],
                                  dtype=np.int64)
"""The record row behind a record line's int fields 2 to 5 (0 and 1 are written before them; a
V0/V1 record has no sequence)."""


@_jit
def _dumplog_record_bound(records, r, headers, fixed, widest, per_byte):
    """The most bytes `_put_dumplog_record` can write for record r (and `_copy`'s 15 past the end)
    when each byte of its texts becomes at most `per_byte` (1 as they are, 3 replaced)."""
    need = fixed + 8 * widest + per_byte * (max(records[R_KEY_LENGTH, r], 0) + max(records[R_VALUE_LENGTH, r], 0)) + 17
    first = records[R_FIRST_HEADER, r]
    for h in range(first, first + records[R_HEADER_COUNT, r]):
        need += per_byte * max(headers[H_KEY_LENGTH, h], 0) + 1
    return need


@_jit
def render_dumplog_each(segment, payloads, batches, records, headers, legacy, deep, print_data, skip_metadata, texts,
                        bounds, out, state):
    """`render_each` for kafka-dump-log's text: the lines of a run's batches (V2, or V0/V1 messages
    with `legacy` rows beside their records) and (`deep`) their records, whole batches at a time,
    until the next does not fit or is one it leaves to Python (state[RENDER_REFUSED] = 1): with
    `deep`, a control batch whose records are not a transaction marker's as Kafka writes it
    (`_marker_type`), or a null header key, which no reader lets through. A key, value or header key
    that is not UTF-8 is written with Java's replacements, given room for them: the record is
    written again once it is known to need it. `texts`[bounds[k]:bounds[k + 1]] is the k-th of
    `bulk_scan.DUMPLOG_PIECES`."""
    widest = _INT_WIDTH
    for k in range(D_CODEC, DUMPLOG_TEXTS):
        widest = max(widest, bounds[k + 1] - bounds[k])
    batch_fixed = bounds[D_BATCH + _DUMPLOG_BATCH + 1] - bounds[D_BATCH] + 2 * widest
    record_fixed = bounds[D_PAYLOAD + 1] - bounds[D_RECORD]
    marker_fixed = bounds[DUMPLOG_TEXTS] - bounds[D_MARKER] + widest
    b, r, op = state[RENDER_BATCH], state[RENDER_RECORD], 0
    capacity = len(out)
    state[RENDER_REFUSED] = 0
    while b < batches.shape[1]:
        attributes, magic = batches[B_ATTRIBUTES, b], batches[B_MAGIC, b]
        data = payloads if batches[B_IN_PAYLOADS, b] != 0 else segment
        marker = NOT_A_MARKER
        if deep and attributes & ATTR_CONTROL:
            marker = _marker_type(batches, b, records, r, data)
            if marker == NOT_A_MARKER:
                state[RENDER_REFUSED] = 1
                break
        batch_start, batch_record = op, r
        if op + batch_fixed + _DUMPLOG_BATCH * widest + 17 > capacity:
            break
        timestamp_type = 2 if magic == 0 else 1 if attributes & ATTR_LOG_APPEND_TIME else 0
        op = _put_dumplog_batch(out, op, batches, b, timestamp_type, texts, bounds)
        count = batches[B_COUNT, b]
        if deep and marker != NOT_A_MARKER:
            if op + _dumplog_record_bound(records, r, headers, record_fixed, widest, 1) + marker_fixed > capacity:
                op = batch_start
                break
            op = _put_dumplog_marker(out, op, records, r, headers, legacy, data, marker, timestamp_type,
                                     skip_metadata, texts, bounds)
            r += 1
        elif deep and count > 0:
            stop = r + count
            while r < stop:
                if op + _dumplog_record_bound(records, r, headers, record_fixed, widest, 1) > capacity:
                    break
                after = _put_dumplog_record(out, op, records, r, headers, legacy, magic != 2, data, timestamp_type,
                                            print_data, skip_metadata, texts, bounds, False)
                if after == _MALFORMED:
                    if op + _dumplog_record_bound(records, r, headers, record_fixed, widest, 3) > capacity:
                        break
                    after = _put_dumplog_record(out, op, records, r, headers, legacy, magic != 2, data,
                                                timestamp_type, print_data, skip_metadata, texts, bounds, True)
                if after < 0:
                    state[RENDER_REFUSED] = 1
                    break
                op = after
                r += 1
            if r < stop:
                op, r = batch_start, batch_record
                break
        b += 1
    state[RENDER_BATCH], state[RENDER_RECORD], state[RENDER_WRITTEN] = b, r, op
    return 0


# ---------------------------------------------------------------------------------------------
# Version signatures: what `payloads.versions` needs of each record to know whether to decode it
# ---------------------------------------------------------------------------------------------

@_inline
def _prefix(buf, at, size, width):
    """(width tag, bytes): 0 for a null field, else 1 + how many of its first `width` bytes there
    are, and those bytes big-endian, left-aligned in `width` bytes."""
    if size < 0:
        return np.int64(0), np.int64(0)
    value = np.int64(0)
    for i in range(width):
        value = (value << 8) | (np.int64(buf[at + i]) if i < size else 0)
    return np.int64(min(size, width) + 1), value


@_jit
def version_signatures(buf, start, limit, end, table, state):
    """The version signatures of the records of the V2 data batches from `start`, while they start
    before `limit`, as `SegmentFile.batches` walks them to `end`: each distinct one + 1 in `table`
    (open addressing, a power of two, 0 free, cleared by its caller), `state[SIG_USED]` of them.
    Returns where the next batch starts, with the walk stopped and `state[SIG_UNSURE]` set to
    UNSURE_SEGMENT where it cannot vouch that it saw every record `Batch.records` would give (a V0/V1
    entry, a compressed batch, a record it cannot read), to UNSURE_TABLE_FULL where the table is
    half full. A control batch's records are not data; a batch after the last one the segment
    holds whole is not read."""
    pos = start
    while pos < limit and pos < end - 17:
        size = _signed(_be(buf, pos + _LENGTH_AT, 4), 32)
        if size < legacy.RECORD_OVERHEAD_V0 or pos > end - _OVERHEAD - size:
            break  # where `SegmentFile.entries` stops
        batch_end = pos + _OVERHEAD + size
        if buf[pos + _MAGIC_AT] != 2 or size < _HEADER_SIZE - _OVERHEAD:
            state[SIG_UNSURE] = UNSURE_SEGMENT
            return pos
        attributes = np.int64(buf[pos + _ATTRIBUTES_AT + 1])
        count = _signed(_be(buf, pos + _COUNT_AT, 4), 32)
        if attributes & ATTR_CONTROL == 0 and count != 0:
            if attributes & ATTR_CODEC != 0 or count < 0:
                state[SIG_UNSURE] = UNSURE_SEGMENT
                return pos
            at = pos + _HEADER_SIZE
            for _ in range(count):
                length, at = _varint(buf, at, batch_end, 5)
                record_end = at + length
                if at < 0 or length < 1 or record_end > batch_end:
                    state[SIG_UNSURE] = UNSURE_SEGMENT
                    return pos
                _, at = _varint(buf, at + 1, record_end, 9)  # after the attributes: the timestamp delta
                if at >= 0:
                    _, at = _varint(buf, at, record_end, 5)  # the offset delta
                if at >= 0:
                    key_size, at = _varint(buf, at, record_end, 5)
                if at < 0 or at + max(key_size, 0) > record_end:
                    state[SIG_UNSURE] = UNSURE_SEGMENT
                    return pos
                key_tag, key_bytes = _prefix(buf, at, key_size, SIGNATURE_KEY_BYTES)
                value_size, at = _varint(buf, at + max(key_size, 0), record_end, 5)
                if at < 0 or at + max(value_size, 0) > record_end:
                    state[SIG_UNSURE] = UNSURE_SEGMENT
                    return pos
                value_tag, value_bytes = _prefix(buf, at, value_size, SIGNATURE_VALUE_BYTES)
                at = record_end
                _note_signature(table, state, _signature(key_tag, key_bytes, value_tag, value_bytes))
                if state[SIG_UNSURE] == UNSURE_TABLE_FULL:
                    return pos
        pos = batch_end
    return pos


@_inline
def _signature(key_tag, key_bytes, value_tag, value_bytes):
    """A record's version signature, packed (`versions._prefixes` unpacks it), + 1: never 0."""
    return (((key_tag << 16 | key_bytes) << 3 | value_tag) << 24 | value_bytes) + 1


@_inline
def _note_signature(table, state, signature):
    """`signature` into `table` (open addressing, a power of two, 0 free) unless it is there; where
    that would fill more than half, `state[SIG_UNSURE]` is set to UNSURE_TABLE_FULL instead. The
    one noted last (`state[SIG_LAST]`) is known without a probe: most records of a log are like the
    one before (a KRaft log's NoOpRecords)."""
    if signature == state[SIG_LAST]:
        return
    mask = table.shape[0] - 1
    h = np.int64((np.uint64(signature) * _GOLDEN) >> np.uint64(32)) & mask
    while table[h] != 0 and table[h] != signature:
        h = (h + 1) & mask
    if table[h] == 0:
        if 2 * (state[SIG_USED] + 1) > table.shape[0]:
            state[SIG_UNSURE] = UNSURE_TABLE_FULL
            return
        table[h] = signature
        state[SIG_USED] += 1
    state[SIG_LAST] = signature


# ---------------------------------------------------------------------------------------------
# The entry points: C signatures over the kernels above, for `loader` to call with ctypes.
# Arrays arrive as pointers with their sizes; tuples leave through `out`.
# ---------------------------------------------------------------------------------------------

_I64, _BYTES, _LONGS = types.int64, types.CPointer(types.uint8), types.CPointer(types.int64)
_COLUMN_COUNT = len(COLUMNS)


@njit(_I64(_BYTES, _I64, _I64, _I64, _I64, _I64, _LONGS, _I64, _LONGS, _I64, _LONGS, _LONGS), nogil=True)
def _scan_entry(buf, length, start, limit, end, deep, columns, capacity, table, table_size, state, out):
    if table_size:  # (`scan_signing`: deep)
        n, after = scan_signing(carray(buf, (length,)), start, limit, end, carray(columns, (_COLUMN_COUNT, capacity)),
                                carray(table, (table_size,)), carray(state, (SIGNATURE_STATE,)))
    else:
        n, after = scan(carray(buf, (length,)), start, limit, end, deep != 0,
                        carray(columns, (_COLUMN_COUNT, capacity)))
    result = carray(out, (2,))
    result[0], result[1] = n, after
    return 0


@njit(_I64(_BYTES, _I64, _I64, _I64, _I64, _I64, _I64, _I64, _I64, _LONGS, _I64, _LONGS, _I64, _LONGS, _I64,
           _LONGS, _I64, _I64, _LONGS, _I64, _I64, _LONGS, _LONGS, _LONGS, _LONGS, _LONGS, _LONGS, _I64, _LONGS),
      nogil=True)
def _scan_outlined_entry(buf, length, start, limit, end, deep, lowest, highest, chunk, columns, capacity,
                         asked_positions, positions_asked, asked_holding, holding_asked, asked_after, after_asked,
                         largest, block, block_capacity, at, rows, lasts, outline, kept_out, out, table, table_size,
                         state):
    buf, columns = carray(buf, (length,)), carray(columns, (_COLUMN_COUNT, capacity))
    asked_positions, asked_holding = carray(asked_positions, (positions_asked,)), carray(asked_holding, (holding_asked,))
    asked_after, block = carray(asked_after, (after_asked,)), carray(block, (4, block_capacity))
    rows, lasts, outline = carray(rows, (chunk,)), carray(lasts, (chunk,)), carray(outline, (len(OUTLINE_FIELDS),))
    kept_out, out = carray(kept_out, (2,)), carray(out, (len(STRETCH_FIELDS),))
    if table_size:
        table, state = carray(table, (table_size,)), carray(state, (SIGNATURE_STATE,))
    else:
        table, state = columns[0], columns[0]  # (not read)
    return scan_outlined(buf, start, limit, end, deep != 0 or table_size != 0, lowest, highest, chunk, columns,
                         asked_positions, asked_holding, asked_after, largest, block, at, rows, lasts, outline,
                         kept_out, out, table_size != 0, table, state)


@njit(_I64(_BYTES, _I64, _I64, _I64, _I64, _I64, _LONGS, _I64, _LONGS), nogil=True)
def _scan_legacy_entry(buf, length, start, limit, end, floor, columns, capacity, out):
    n, after = scan_legacy(carray(buf, (length,)), start, limit, end, floor, carray(columns, (_COLUMN_COUNT, capacity)))
    result = carray(out, (2,))
    result[0], result[1] = n, after
    return 0


@njit(_I64(_BYTES, _I64, _LONGS, _LONGS, _I64, _LONGS, _I64), nogil=True)
def _agree_entry(payloads, length, bounds, rows, count, columns, capacity):
    agree_each(carray(payloads, (length,)), carray(bounds, (count + 1,)), carray(columns, (_COLUMN_COUNT, capacity)),
               carray(rows, (count,)))
    return 0


@njit(_I64(_LONGS, _I64, _I64, _I64, _I64, _I64, _LONGS, _LONGS), nogil=True)
def _apart_entry(columns, capacity, n, lowest, highest, deep, rows, out):
    return rows_apart(carray(columns, (_COLUMN_COUNT, capacity)), n, lowest, highest, deep != 0, carray(rows, (n,)),
                      carray(out, (len(OUTLINE_FIELDS),)))


@njit(_I64(_LONGS, _I64, _LONGS, _I64, _I64, _LONGS), nogil=True)
def _search_entry(haystack, length, needles, count, right, out):
    return search_ascending(carray(haystack, (length,)), carray(needles, (count,)), right != 0, carray(out, (count,)))


@njit(_I64(_LONGS, _LONGS, _LONGS, _LONGS, _I64, _LONGS, _I64, _LONGS, _I64, _LONGS, _I64, _I64, _LONGS, _I64,
           _I64, _LONGS), nogil=True)
def _keep_asked_entry(positions, bases, lasts, max_timestamps, n, asked_positions, positions_asked, asked_holding,
                      holding_asked, asked_after, after_asked, largest, block, capacity, at, out):
    return keep_asked(carray(positions, (n,)), carray(bases, (n,)), carray(lasts, (n,)), carray(max_timestamps, (n,)),
                      carray(asked_positions, (positions_asked,)), carray(asked_holding, (holding_asked,)),
                      carray(asked_after, (after_asked,)), largest, carray(block, (4, capacity)), at, carray(out, (2,)))


@njit(_I64(_LONGS, _I64, _I64, _I64, _LONGS, _LONGS, _LONGS, _I64), nogil=True)
def _recovery_entry(columns, capacity, start, stop, state, offset_entries, time_entries, width):
    return recovery_index(carray(columns, (_COLUMN_COUNT, capacity)), start, stop, carray(state, (RECOVERY_STATE,)),
                          carray(offset_entries, (2, width)), carray(time_entries, (2, width)))


@njit(_I64(_LONGS, _I64, _I64, _LONGS, _I64, _LONGS, _I64, _LONGS, _LONGS, _LONGS), nogil=True)
def _replay_entry(batches, count, start, producers, producer_count, ongoing, ongoing_capacity, aborted,
                  abort_markers, state):
    return replay_transactional(carray(batches, (len(REPLAY_FIELDS), count)), start,
                                carray(producers, (len(PRODUCER_FIELDS), producer_count)),
                                carray(ongoing, (len(ONGOING_FIELDS), ongoing_capacity)),
                                carray(aborted, (len(ABORTED_FIELDS), count)), carray(abort_markers, (count,)),
                                carray(state, (REPLAY_STATE,)))


@njit(_I64(_LONGS, _I64, _LONGS, _I64, _LONGS, _LONGS, _LONGS), nogil=True)
def _slots_entry(plan, count, table, table_size, slots, ids, last_rows):
    return producer_slots(carray(plan, (len(PLAN_FIELDS), count)), carray(table, (table_size,)),
                          carray(slots, (count,)), carray(ids, (count,)), carray(last_rows, (count,)))


@njit(_I64(_LONGS, _I64, _LONGS, _I64, _LONGS, _LONGS, _LONGS, _I64), nogil=True)
def _plan_entry(plan, count, slots, producers, epochs, sequences, apart, anomalies):
    return plan_producers(carray(plan, (len(PLAN_FIELDS), count)), carray(slots, (count,)),
                          carray(epochs, (producers,)), carray(sequences, (producers,)), carray(apart, (producers,)),
                          anomalies != 0)


@njit(_I64(_BYTES, _I64, _BYTES, _I64, _LONGS, _I64, _I64, _I64, _LONGS, _LONGS, _LONGS, _LONGS, _I64,
           _LONGS, _I64, _I64, _LONGS, _I64, _I64, _LONGS), nogil=True)
def _decode_entry(segment, segment_length, payloads, payloads_length, columns, capacity, row, stop, starts, ends,
                  in_payloads, first_record, batches, records, records_capacity, n, headers, headers_capacity, h, out):
    row, n, h = decode_each(
        carray(segment, (segment_length,)), carray(payloads, (payloads_length,)),
        carray(columns, (_COLUMN_COUNT, capacity)), row, stop, carray(starts, (batches,)), carray(ends, (batches,)),
        carray(in_payloads, (batches,)), carray(first_record, (capacity,)),
        carray(records, (len(RECORD_COLUMNS), records_capacity)), n,
        carray(headers, (len(HEADER_COLUMNS), headers_capacity)), h)
    result = carray(out, (3,))
    result[0], result[1], result[2] = row, n, h
    return 0


@njit(_I64(_BYTES, _I64, _LONGS, _LONGS, _LONGS, _I64, _I64, _BYTES, _I64, _LONGS, _LONGS), nogil=True)
def _frames_entry(segment, segment_length, codec_ids, starts, ends, count, limit, out, out_length, bounds, decoded):
    return frames_each(carray(segment, (segment_length,)), carray(codec_ids, (count,)), carray(starts, (count,)),
                       carray(ends, (count,)), limit, carray(out, (out_length,)), carray(bounds, (count + 1,)),
                       carray(decoded, (count,)))


@njit(_I64(_BYTES, _I64, _LONGS, _LONGS, _LONGS, _I64, _BYTES, _I64, _LONGS, _I64, _BYTES, _I64), nogil=True)
def _gzip_entry(segment, segment_length, starts, ends, at, count, out, out_length, inflated, inflate, state,
                state_length):
    return gzip_each(carray(segment, (segment_length,)), carray(starts, (count,)), carray(ends, (count,)),
                     carray(at, (count + 1,)), carray(out, (out_length,)), carray(inflated, (count,)), inflate,
                     carray(state, (state_length,)))

@njit(_I64(_BYTES, _I64, _BYTES, _I64, _LONGS, _I64, _I64, _I64, _LONGS, _LONGS, _LONGS, _LONGS, _I64,
           _LONGS, _I64, _I64, _LONGS, _LONGS), nogil=True)
def _decode_legacy_entry(segment, segment_length, payloads, payloads_length, columns, capacity, row, stop, starts, ends,
                         in_payloads, first_record, batches, records, records_capacity, n, legacy_records, out):
    row, n = decode_legacy_each(
        carray(segment, (segment_length,)), carray(payloads, (payloads_length,)),
        carray(columns, (_COLUMN_COUNT, capacity)), row, stop, carray(starts, (batches,)), carray(ends, (batches,)),
        carray(in_payloads, (batches,)), carray(first_record, (capacity,)),
        carray(records, (len(RECORD_COLUMNS), records_capacity)), n,
        carray(legacy_records, (len(LEGACY_RECORD_COLUMNS), records_capacity)))
    result = carray(out, (2,))
    result[0], result[1] = row, n
    return 0


@njit(_I64(_BYTES, _I64, _BYTES, _I64, _LONGS, _I64, _LONGS, _I64, _LONGS, _I64, _LONGS, _I64, _I64, _BYTES, _I64,
           _LONGS, _I64, _BYTES, _I64, _LONGS), nogil=True)
def _render_entry(segment, segment_length, payloads, payloads_length, batches, batch_count, records, record_count,
                  headers, header_count, legacy, deep, is_legacy, texts, texts_length, bounds, base64_only, out,
                  out_length, state):
    return render_each(carray(segment, (segment_length,)), carray(payloads, (payloads_length,)),
                       carray(batches, (len(RUN_BATCH_FIELDS), batch_count)),
                       carray(records, (len(RECORD_COLUMNS), record_count)),
                       carray(headers, (len(HEADER_COLUMNS), header_count)),
                       carray(legacy, (len(LEGACY_RECORD_COLUMNS), record_count if is_legacy else 0)),
                       deep != 0, is_legacy != 0, carray(texts, (texts_length,)), carray(bounds, (TEXTS + 1,)),
                       base64_only != 0, carray(out, (out_length,)), carray(state, (RENDER_STATE,)))


@njit(_I64(_BYTES, _I64, _BYTES, _I64, _LONGS, _I64, _LONGS, _I64, _LONGS, _I64, _LONGS, _I64, _I64, _I64, _I64,
           _BYTES, _I64, _LONGS, _BYTES, _I64, _LONGS), nogil=True)
def _dumplog_entry(segment, segment_length, payloads, payloads_length, batches, batch_count, records, record_count,
                   headers, header_count, legacy, legacy_count, deep, print_data, skip_metadata, texts, texts_length,
                   bounds, out, out_length, state):
    return render_dumplog_each(carray(segment, (segment_length,)), carray(payloads, (payloads_length,)),
                               carray(batches, (len(RUN_BATCH_FIELDS), batch_count)),
                               carray(records, (len(RECORD_COLUMNS), record_count)),
                               carray(headers, (len(HEADER_COLUMNS), header_count)),
                               carray(legacy, (len(LEGACY_RECORD_COLUMNS), legacy_count)), deep != 0, print_data != 0,
                               skip_metadata != 0, carray(texts, (texts_length,)), carray(bounds, (DUMPLOG_TEXTS + 1,)),
                               carray(out, (out_length,)), carray(state, (RENDER_STATE,)))


@njit(_I64(_BYTES, _I64, _I64, _I64, _I64, _LONGS, _I64, _LONGS), nogil=True)
def _signatures_entry(buf, length, start, limit, end, table, table_size, state):
    return version_signatures(carray(buf, (length,)), start, limit, end, carray(table, (table_size,)),
                              carray(state, (SIGNATURE_STATE,)))


ENTRIES = {"scan": _scan_entry, "scan_outlined": _scan_outlined_entry, "scan_legacy": _scan_legacy_entry,
           "agree_each": _agree_entry,
           "rows_apart": _apart_entry, "search_ascending": _search_entry, "keep_asked": _keep_asked_entry,
           "recovery_index": _recovery_entry,
           "replay_transactional": _replay_entry, "producer_slots": _slots_entry, "plan_producers": _plan_entry,
           "decode_each": _decode_entry, "decode_legacy_each": _decode_legacy_entry,
           "frames_each": _frames_entry, "gzip_each": _gzip_entry, "render_each": _render_entry,
           "render_dumplog_each": _dumplog_entry, "version_signatures": _signatures_entry}
"""The object's exported functions, each named `kafkalog_<key>`."""
_UNREACHABLE = """
define void @NRT_MemInfo_call_dtor(ptr %meminfo) {
  unreachable
}
"""
"""numba's reference counting, inlined into the kernels, calls this when a count falls to zero; the
arrays here come from `carray` and have no count at all, so the call is never made."""


_REFCOUNT_CALL = re.compile(r"^\s*(?:tail )?call void @NRT_(?:incref|decref)\(ptr [^)]*\)(?:, !.*)?$", re.MULTILINE)
"""numba's reference counting calls, left where its pruning gave up (around an inlined function's
loops): calls that return at once, as nothing here has a count, but whose clobbered registers made
the scan spill and reload its state around every batch."""


def build(target_machine) -> bytes:
    """The entry points compiled by `target_machine` into one relocatable object. Each
    `kafkalog_<name>` returns its kernel's int64, or -1 had the kernel raised (it cannot: nothing
    in it allocates, divides by a variable or checks bounds)."""
    context = _scan_entry.overloads[_scan_entry.signatures[0]].target_context
    with global_compiler_lock:
        library = context.codegen().create_library("kafkalog_bulk")
        module = context.create_module("kafkalog_entries")
        for name, dispatcher in ENTRIES.items():
            compiled = dispatcher.overloads[dispatcher.signatures[0]]
            fndesc = compiled.fndesc
            callee = ir.Function(module, context.call_conv.get_function_type(fndesc.restype, fndesc.argtypes),
                                 fndesc.llvm_func_name)
            c_type = ir.FunctionType(ir.IntType(64), [context.get_value_type(t) for t in fndesc.argtypes])
            entry = ir.Function(module, c_type, f"kafkalog_{name}")
            builder = ir.IRBuilder(entry.append_basic_block("entry"))
            status, result = context.call_conv.call_function(builder, callee, fndesc.restype, fndesc.argtypes,
                                                             entry.args)
            builder.ret(builder.select(status.is_error, ir.Constant(ir.IntType(64), -1), result))
            library.add_linking_library(compiled.library)
        library.add_ir_module(module)
        library.finalize()
        final = binding.parse_assembly(_REFCOUNT_CALL.sub("", library.get_llvm_str()))
    final.link_in(binding.parse_assembly(_UNREACHABLE))
    final.verify()
    outside = sorted(f.name for f in final.functions if f.is_declaration and not f.name.startswith("llvm."))
    outside += sorted(g.name for g in final.global_variables if g.is_declaration)
    if outside:
        raise RuntimeError(f"the bulk kernels would need symbols from outside: {', '.join(outside)}")
    return target_machine.emit_object(final)

"""Stage 1 over runs of clean batches read by the compiled scan (`native.bulk_scan`): what the
per-batch scan (`segment.LogScan`) would accept without a finding, taken a run at a time."""
from __future__ import annotations

from .. import codecs
from ..formats import legacy
from ..formats.batch import INT32_MAX
from ..formats.record_batch import ATTR_CODEC, ATTR_CONTROL, HEADER_SIZE, parse_batch
from ..formats.segment import MAGIC_OFFSET
from ..native import bulk_scan
from ..native.columns import (ATTRIBUTES, BASE_OFFSET, LAST_OFFSET_DELTA, MARKER, MAX_TIMESTAMP, NOT_A_MARKER, POSITION,
                              RECORDS_COUNT, RO_COMPRESSED, S_AFTER, S_BYTES, S_FIRST_POSITION, S_FOLDED, S_STOPPED,
                              SIZE, spread)


class BulkScan:
    """Stage 1 over runs of clean V2 batches, read by the compiled `bulk_scan` kernel. A batch
    that `_accept` could report on (offsets outside the segment, records the kernel did not walk, a
    control batch other than a transaction marker as Kafka writes it) goes through `_accept`
    itself, in order; the kernel stops before anything else and `_walk_from`'s per-batch path takes
    it from there."""

    def __init__(self, scan):
        self.scan = scan
        self.reader = bulk_scan.Reader(scan.log)
        self.kernel = self.reader.kernel
        self.frames_out = []
        """Where `_check_frames` decodes lz4 and snappy payloads, a buffer per thread, made on first use."""
        self.inflate_states = []
        """ISA-L's working memory of each thread that inflates (`bulk_scan.inflate_gzip`)."""

    @property
    def then_one_by_one(self) -> int:
        return self.reader.then_one_by_one

    def close(self) -> None:
        self.reader.close()

    def accept_from(self, position: int) -> int:
        """Accept what the kernel vouches for from `position`; return where it stopped."""
        scan, log, reader = self.scan, self.scan.log, self.reader
        lowest, highest = scan.segment.base_offset, scan.segment.base_offset + INT32_MAX
        start = position
        stopped = False
        reader.until = scan.until
        while position < min(log.end, scan.until) and not stopped:
            magic = log.buffer[position + MAGIC_OFFSET] if position + MAGIC_OFFSET < log.end else 2
            if magic < 2 and scan.range_start and not scan.deep:
                break  # the wrappers' base offsets need the batches before the range: the per-batch path stops
            if magic >= 2 and self.outlines:
                position, stopped = self._accept_outlined(position, lowest, highest)
                continue
            if magic >= 2:
                for columns, n, position, stopped in reader.runs(position, scan.deep):
                    if n:
                        self._accept(columns, n, lowest, highest, 2)
                        reader.release_before(position)
                continue
            # a legacy message set, its wrappers opened only where deep (each call needs the floor
            # the one before left, so none runs ahead); its records are not signed
            scan.vouches = False
            n, position, stopped = reader.read(position, False, scan.legacy_floor())
            if n:
                columns = reader.columns[:, :n].copy()  # (whole rows, for the kernels)
                if scan.deep:
                    self._open_wrappers(columns, magic)
                self._accept(columns, n, lowest, highest, magic)
                reader.release_before(position)
        reader.read_anything(position != start)
        return position

    @property
    def outlines(self) -> bool:
        """Whether V2 batches go through `kernels.scan_outlined`: where the consumer takes stretches
        (`LogScan.outlines`) and the batch table keeps only the rows the index checks reach."""
        return self.scan.outlines and self.scan.table.queries is not None

    def _accept_outlined(self, position: int, lowest: int, highest: int) -> tuple[int, bool]:
        """`reader.runs`' calls, through `scan_outlined`: each call's stretch, then the columns it
        left, until a call stops, the range ends or the next entry is not magic 2. Returns where
        the next entry starts and whether the last call stopped."""
        scan, reader, table = self.scan, self.reader, self.scan.table
        buffer, end = scan.log.buffer, min(scan.log.end, scan.until)
        while True:
            block = table.room_for(reader.CHUNK)
            n, said = reader.outlined(position, scan.deep, lowest, highest, table.queries, table.max_timestamp, block,
                                      table.count)
            if said[S_FOLDED]:
                start, rows, deep = said[S_FIRST_POSITION], said[S_FOLDED], scan.deep
                stop = start + said[S_BYTES]
                scan.accept_stretch(said, lambda: reader.rescan(start, stop, rows, deep))
            if n:
                self._accept(reader.columns, n, lowest, highest, 2)
            position = said[S_AFTER]
            reader.release_before(position)
            if said[S_STOPPED] or position >= end or position + MAGIC_OFFSET >= scan.log.end \
                    or buffer[position + MAGIC_OFFSET] < 2:
                return position, bool(said[S_STOPPED])

    def _accept(self, columns, n: int, lowest: int, highest: int, magic: int) -> None:
        """The first `n` rows of `columns` (whole rows: the kernels read them)."""
        scan = self.scan
        apart, outline = self.kernel.rows_apart(columns, n, lowest, highest, scan.deep)
        columns = columns[:, :n]
        if not len(apart):  # the usual run: stage 2 reads the outline instead of passing over it again
            scan.accept_clean(columns, magic, outline)
            return
        if outline[RO_COMPRESSED] and magic >= 2:  # (`_open_wrappers` has read V0/V1 wrappers)
            columns, apart = self._walk_compressed(columns, lowest, highest)
        start = 0
        log = scan.log
        for row in apart.tolist():
            if row > start:
                scan.accept_clean(columns[:, start:row], magic)
            position = int(columns[POSITION, row])
            if magic >= 2:
                scan._accept(parse_batch(log.buffer, position, log.path, log.decompress_limit))
            else:
                scan._accept(legacy.parse_batch(log.buffer, position, position + int(columns[SIZE, row]), log.path,
                                                log.decompress_limit))
            start = row + 1
        if start < columns.shape[1]:
            scan.accept_clean(columns[:, start:], magic)

    def _walk_compressed(self, columns, lowest: int, highest: int):
        """Where compressed batches wait to be walked: decompress them; returns the columns, their
        rows now whole and the walked ones marked, and the rows to take one by one after
        (`kernels.rows_apart`'s, once they are walked)."""
        import numpy as np

        base = columns[BASE_OFFSET]
        last = base + columns[LAST_OFFSET_DELTA]
        control = (columns[ATTRIBUTES] & ATTR_CONTROL != 0) & (columns[MARKER] == NOT_A_MARKER)  # (a marker: read)
        one_by_one = (base < lowest) | (last < lowest) | (last > highest) | control
        compressed = np.flatnonzero((columns[bulk_scan.CHECKED] == 0) & (columns[ATTRIBUTES] & ATTR_CODEC != 0)
                                    & ~one_by_one & (columns[RECORDS_COUNT] >= 0))
        columns = np.ascontiguousarray(columns)  # (whole rows, for the kernels)
        self._check_compressed(columns, compressed)
        return columns, np.flatnonzero(one_by_one | (columns[bulk_scan.CHECKED] == 0))

    def _check_compressed(self, columns, rows) -> None:
        """Decompress these batches and let the kernel walk their records (it marks those that
        agree): lz4 and snappy payloads in the kernel too, gzip members inflated from it, the others and
        those they refuse here. One that will not decompress is left to `_accept`, which reports why."""
        import numpy as np

        log = self.scan.log
        buffer, limit = log.buffer, log.decompress_limit
        codec = columns[ATTRIBUTES, rows] & ATTR_CODEC
        framed = (codec == codecs.IDS["lz4"]) | (codec == codecs.IDS["snappy"])
        if framed.any():
            rows = np.concatenate((rows[~framed], self._check_frames(columns, rows[framed], limit)))
            codec = columns[ATTRIBUTES, rows] & ATTR_CODEC
        gzip = codec == codecs.IDS["gzip"]
        if gzip.any() and bulk_scan.gzip_inflater():
            rows = np.concatenate((rows[~gzip], self._check_gzip(columns, rows[gzip], limit)))
        rows = rows.tolist()
        ranges = [(attributes & ATTR_CODEC, position + HEADER_SIZE, position + size) for position, size, attributes
                  in zip(columns[POSITION, rows].tolist(), columns[SIZE, rows].tolist(),
                         columns[ATTRIBUTES, rows].tolist())]
        # a budget at a time bounds what is held at once (each batch is bounded by `limit`)
        for first, results in codecs.decompress_in_rounds(buffer, ranges, magic=2, limit=limit,
                                                           budget=self.reader.step):
            payloads, spans = codecs.laid_end_to_end(results)
            kept = [(row, span) for row, span in zip(rows[first:], spans) if span is not None]
            if kept:
                self.kernel.agree_each(np.frombuffer(payloads, dtype=np.uint8),
                                       np.array([0] + [end for _, (_, end) in kept], dtype=np.int64), columns,
                                       np.array([row for row, _ in kept], dtype=np.int64))

    def _open_wrappers(self, columns, magic: int) -> None:
        """Deep verify of V0/V1 messages of `magic`: each wrapper's message set is decompressed and
        read by `decode_legacy_each` as `LegacyBatch.records` reads it. A wrapper whose records it
        reads and in which `_record_findings` would find nothing gets its real base offset (its
        first record's) and is marked checked, as is every uncompressed message (`scan_legacy` read
        it whole); the rest are left to `_accept`'s per-batch path, which reports what it finds."""
        import numpy as np

        log, view = self.scan.log, self.reader.view
        codec = columns[ATTRIBUTES] & ATTR_CODEC
        columns[bulk_scan.CHECKED] = codec == 0
        wrappers = np.flatnonzero(codec != 0)
        starts, ends = np.full(columns.shape[1], -1, dtype=np.int64), np.zeros(columns.shape[1], dtype=np.int64)
        starts[wrappers], ends[wrappers] = bulk_scan.wrapper_values(view, columns[POSITION, wrappers], codec[wrappers],
                                                                    magic)
        wrappers = wrappers[starts[wrappers] >= 0]
        in_payloads = np.ones(columns.shape[1], dtype=np.int64)
        first_record = np.empty(columns.shape[1], dtype=np.int64)
        gzip = codec[wrappers] == codecs.IDS["gzip"]
        if gzip.any() and bulk_scan.gzip_inflater():
            left = self._open_gzip_wrappers(columns, wrappers[gzip], starts, ends, in_payloads, first_record, magic)
            wrappers = np.sort(np.concatenate((wrappers[~gzip], left)))
        wrappers = wrappers.tolist()
        ranges = [(int(codec[row]), int(starts[row]), int(ends[row])) for row in wrappers]
        for first, results in codecs.decompress_in_rounds(log.buffer, ranges, magic=magic, limit=log.decompress_limit,
                                                           budget=self.reader.step):
            taken = wrappers[first:first + len(results)]
            payloads, spans = codecs.laid_end_to_end(results)
            round_starts, round_ends = np.full_like(starts, -1), np.zeros_like(ends)
            for row, span in zip(taken, spans):
                if span is not None:
                    round_starts[row], round_ends[row] = span
            if payloads:
                self._check_wrappers(columns, taken[0], taken[-1] + 1, np.frombuffer(payloads, np.uint8),
                                     round_starts, round_ends, in_payloads, first_record, magic)

    def _open_gzip_wrappers(self, columns, wrappers, starts, ends, in_payloads, first_record, magic: int):
        """`_open_wrappers` for gzip wrappers whose message sets `bulk_scan.inflate_gzip` inflates,
        a budget at a time; returns the wrappers it left."""
        import numpy as np

        left, done = [], 0
        while done < len(wrappers):
            out, at, inflated, taken = bulk_scan.inflate_gzip(self.reader.view, starts[wrappers[done:]],
                                                              ends[wrappers[done:]], self.scan.log.decompress_limit,
                                                              self.reader.step, self.inflate_states)
            taken_rows = wrappers[done:done + taken]
            round_starts, round_ends = np.full_like(starts, -1), np.zeros_like(ends)
            kept = inflated == 1
            round_starts[taken_rows[kept]], round_ends[taken_rows[kept]] = at[:-1][kept], at[1:][kept]
            if kept.any():
                self._check_wrappers(columns, int(taken_rows[0]), int(taken_rows[-1]) + 1, out, round_starts,
                                     round_ends, in_payloads, first_record, magic)
            left.append(taken_rows[~kept])
            done += taken
        return np.concatenate(left)

    def _check_wrappers(self, columns, row: int, stop: int, payloads, starts, ends, in_payloads, first_record,
                        magic: int) -> None:
        """`_open_wrappers` for the rows row..stop-1 whose decompressed message sets lie in
        `payloads` (start -1: not these)."""
        import numpy as np

        capacity = spread(max(1024, len(payloads) // bulk_scan.SMALLEST_LEGACY_ENTRY + stop - row))
        records = np.empty((len(bulk_scan.RECORD_COLUMNS), capacity), dtype=np.int64)
        legacy_records = np.empty((len(bulk_scan.LEGACY_RECORD_COLUMNS), records.shape[1]), dtype=np.int64)
        done, n = self.kernel.decode_legacy_each(self.reader.view, payloads, columns, row, stop, starts, ends,
                                                 in_payloads, first_record, records, 0, legacy_records)
        assert done == stop  # room for the smallest entries the payloads could hold
        rows = np.arange(row, stop)
        rows = rows[(starts[row:stop] >= 0) & (first_record[row:stop] != bulk_scan.NOT_DECODED)]
        if not len(rows):
            return
        offsets, firsts = records[bulk_scan.R_OFFSET, :n], first_record[rows]
        lasts = firsts + columns[RECORDS_COUNT, rows] - 1
        wrapper_last = columns[BASE_OFFSET, rows] + columns[LAST_OFFSET_DELTA, rows]
        # what `_record_findings` checks: offsets increasing and within the wrapper's, a V0 wrapper's
        # offset its last record's, the largest CreateTime timestamp the wrapper's (inner CRCs and
        # magics: `decode_legacy_each` refuses those)
        increasing = np.ones(n, dtype=bool)
        increasing[1:] = offsets[1:] > offsets[:-1]
        increasing[firsts] = True
        clean = np.logical_and.reduceat(increasing, firsts) & (offsets[lasts] <= wrapper_last)
        if magic == 0:
            clean &= offsets[lasts] == wrapper_last
        else:
            create_time = columns[ATTRIBUTES, rows] & legacy.ATTR_LOG_APPEND_TIME == 0
            largest = np.maximum.reduceat(records[bulk_scan.R_TIMESTAMP, :n], firsts)
            clean &= ~create_time | (largest == columns[MAX_TIMESTAMP, rows])
        rows = rows[clean]
        base = offsets[firsts[clean]]
        columns[LAST_OFFSET_DELTA, rows] = wrapper_last[clean] - base
        columns[BASE_OFFSET, rows] = base
        columns[bulk_scan.CHECKED, rows] = 1

    def _check_gzip(self, columns, rows, limit: int):
        """`bulk_scan.inflate_gzip` then `agree_each` on these gzip batches, a budget at a time;
        returns the rows whose payloads it left."""
        import numpy as np

        positions = columns[POSITION, rows]
        starts, ends = positions + HEADER_SIZE, positions + columns[SIZE, rows]
        left, done = [], 0
        while done < len(rows):
            out, at, inflated, taken = bulk_scan.inflate_gzip(self.reader.view, starts[done:], ends[done:], limit,
                                                              self.reader.step, self.inflate_states)
            kept = np.flatnonzero(inflated)
            for run in np.split(kept, np.flatnonzero(np.diff(kept) != 1) + 1):  # payloads end to end
                if len(run):
                    self.kernel.agree_each(out, at[run[0]:run[-1] + 2], columns, rows[done + run])
            left.append(rows[done:done + taken][inflated == 0])
            done += taken
        return np.concatenate(left)

    def _check_frames(self, columns, rows, limit: int):
        """`kernels.frames_each` then `agree_each` on these lz4 and snappy batches, an output buffer at a
        time, in pieces of about equal compressed bytes shared among threads; returns the rows
        whose frames the kernel refused."""
        import numpy as np

        sizes = np.cumsum(columns[SIZE, rows])
        threads = codecs.threads_for(int(sizes[-1]))
        while len(self.frames_out) < threads:
            self.frames_out.append(np.empty(self.reader.step, dtype=np.uint8))
        pieces = 4 * threads if threads > 1 else 1
        cuts = [0, *np.searchsorted(sizes, [sizes[-1] * piece // pieces for piece in range(1, pieces)]).tolist(),
                len(rows)]
        refused = codecs.in_pieces(lambda piece, slot: self._check_frames_part(
            columns, rows[cuts[piece]:cuts[piece + 1]], limit, self.frames_out[slot]), pieces, threads)
        return np.concatenate(refused)

    def _check_frames_part(self, columns, rows, limit: int, out):
        import numpy as np

        positions = columns[POSITION, rows]
        starts, ends = positions + HEADER_SIZE, positions + columns[SIZE, rows]
        codec_ids = columns[ATTRIBUTES, rows] & ATTR_CODEC
        bounds, decoded = np.empty(len(rows) + 1, dtype=np.int64), np.empty(len(rows), dtype=np.int64)
        done = 0
        while done < len(rows):
            went = self.kernel.frames_each(self.reader.view, codec_ids[done:], starts[done:], ends[done:], limit, out,
                                           bounds[done:], decoded[done:])
            kept = done + np.flatnonzero(decoded[done:done + went])
            if len(kept):  # refused frames hold no bytes: the kept ones lie end to end
                self.kernel.agree_each(out, np.append(bounds[kept], bounds[done + went]), columns, rows[kept])
            done += went
        return rows[decoded == 0]

"""Rich tables for `dump` on a terminal: one table per file, batches (and records) as rows.

Meant for people reading a screen; large dumps belong to `--format json` or `--format text`,
which stream. Rows of a file are held until the file ends.
"""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import dump as d
from .jsonl import encode_bytes

_PREVIEW = 60


def _preview(data: bytes | None) -> str:
    if data is None:
        return "null"
    text, encoding = encode_bytes(data, "auto")
    text = text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"
    return text if encoding == "utf8" else f"b64:{text}"


class TableRenderer:
    def __init__(self, console: Console | None = None):
        self.console = console or Console()
        self.table: Table | None = None
        self.title = ""
        self.columns: tuple[str, ...] = ("entry",)

    def _start(self, title: str, *columns: str) -> None:
        self.flush()
        self.columns = columns
        self.table = Table(title=title, title_justify="left", expand=False)
        for column in columns:
            self.table.add_column(column, overflow="fold")

    def _row(self, *cells) -> None:
        if self.table is None:  # flushed mid-file (a problem was printed): go on in a new table
            self._start(self.title, *self.columns)
        self.table.add_row(*cells)

    def flush(self) -> None:
        if self.table is not None and self.table.row_count:
            self.console.print(self.table)
        self.table = None

    def add(self, item) -> None:
        if isinstance(item, d.FileStart):
            self.title = item.path
            columns = {
                "log": ("position", "offsets", "count", "max timestamp", "codec", "producer", "flags", "size", "crc"),
                "checkpoint": ("position", "offsets", "count", "max timestamp", "codec", "producer", "flags", "size", "crc"),
                "index": ("slot", "offset", "position"),
                "timeindex": ("slot", "timestamp", "offset"),
                "txnindex": ("producer", "first offset", "last offset", "last stable offset"),
                "snapshot": ("producer", "epoch", "coordinator epoch", "txn first offset", "last sequence", "last offset"),
            }.get(item.kind, ("entry",))
            self._start(item.path, *columns)
        elif isinstance(item, d.BatchItem):
            b = item.batch
            flags = " ".join(f for f, on in (("txn", b.is_transactional), ("control", b.is_control)) if on)
            self._row(str(b.position), f"{b.base_offset}..{b.last_offset}", str(b.count if b.count is not None else "-"),
                               f"{b.timestamp_type} {b.max_timestamp}", b.compression,
                               "-" if b.producer_id < 0 else f"{b.producer_id}/{b.producer_epoch}", flags, str(b.size),
                               Text("ok", style="green") if b.crc_valid else Text("BAD", style="bold red"))
            for record in item.records or []:
                detail = f"key={_preview(record.key)} value={_preview(record.value)}"
                if record.control is not None:
                    detail = f"{record.control.name}"
                self._row("", f"  {record.offset}", "", str(record.timestamp), "", "", "", str(record.size), detail)
        elif isinstance(item, d.IndexEntryItem):
            self._row(str(item.entry.slot), str(item.entry.offset), str(item.entry.position))
        elif isinstance(item, d.TimeIndexEntryItem):
            self._row(str(item.entry.slot), str(item.entry.timestamp), str(item.entry.offset))
        elif isinstance(item, d.AbortedTxnItem):
            e = item.entry
            self._row(str(e.producer_id), str(e.first_offset), str(e.last_offset), str(e.last_stable_offset))
        elif isinstance(item, d.ProducerStateItem):
            e = item.entry
            self._row(str(e.producer_id), str(e.epoch), str(e.coordinator_epoch),
                               str(e.current_txn_first_offset), str(e.last_sequence), str(e.last_offset))
        elif isinstance(item, d.CheckpointItem):
            self._row(" ".join(f"{k}={v}" for k, v in item.values.items()))
        elif isinstance(item, d.EmptyIndex):
            self.console.print(Text(f"{item.path} is empty", style="dim"))  # Text: a name may hold [markup]
        elif isinstance(item, d.Trailing):
            self.flush()
            self.console.print(Text(f"{item.path}: {item.size} bytes after the last batch at {item.position}: "
                                    f"{item.reason}", style="yellow"))

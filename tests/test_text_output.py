"""Text for people: findings grouped by kind, then the errors in full; --all lists each; full lines
off a terminal, wrapped at its width on one. JSON Lines stay as they were (their own tests pin them)."""
from __future__ import annotations

import io
import shutil

import pytest

from kafkalog_tools.output.grouped import Item, TextOut, group_lines, partition_of, report_lines
from tests.test_evidence_safety import kafkalog

MIXED = "golden-v2-mixed-0"


def test_verify_groups_a_real_broker_dir(capsys, real):
    code, out, _ = kafkalog(capsys, "verify", "--format", "text", real / "zk-broker-b")
    lines = out.splitlines()
    assert code == 0
    assert "warning index-missing: 53 in 53 partitions" in lines
    assert "warning timeindex-missing: 53 in 53 partitions" in lines
    assert "info    unclean-shutdown: 1" in lines
    places = lines[lines.index("warning index-missing: 53 in 53 partitions") + 1]
    assert places.endswith("(+50 more)") and places.count(".index") == 3  # whole, not wrapped at 80
    assert len(places) > 80
    assert sum(1 for line in lines if line.startswith("warning")) == 2
    assert "errors in full" not in out  # no errors


def test_verify_all_lists_every_finding(capsys, real):
    code, out, _ = kafkalog(capsys, "verify", "--format", "text", "--all", real / "zk-broker-b")
    heads = [line for line in out.splitlines() if line.startswith(("warning", "info", "error"))]
    assert len(heads) == 107 and "findings by kind" not in out


def test_errors_come_first_and_in_full(capsys, golden, tmp_path):
    copy = tmp_path / MIXED
    shutil.copytree(golden / "logs" / MIXED, copy)
    log = copy / "00000000000000000424.log"
    data = bytearray(log.read_bytes())
    data[30_000:30_064] = bytes(64)
    log.write_bytes(bytes(data))
    code, out, _ = kafkalog(capsys, "verify", "--format", "text", copy)
    lines = out.splitlines()
    assert code == 1
    assert lines[1].startswith("error   ")  # the first group, under the heading
    full = lines.index("errors in full (1)")
    assert lines[full + 1].startswith(f"error   {lines[1].split()[1].rstrip(':')} {MIXED}/00000000000000000424.log @ ")


def test_groups_by_shape_for_free_text_notes():
    items = [Item("info", "note", "t-0", None, "segment 12 kept for 3 ms", coded=False),
             Item("info", "note", "t-1", None, "segment 40 kept for 9 ms", coded=False),
             Item("info", "note", "t-1", None, "something else", coded=False),
             Item("warning", "index-missing", "t-1", "t-1/0.index", "no offset index")]
    lines = [text for text, _ in group_lines(items)]
    assert lines[0] == "warning index-missing: 1 in 1 partition"
    assert "info    note: 2 in 2 partitions" in lines and "info    note: 1 in 1 partition" in lines
    assert report_lines([]) == []


def test_partition_of():
    assert partition_of("/x/logs/topic-a-3/00000000000000000000.index") == "topic-a-3"
    assert partition_of("/x/logs/topic-a-3") == "topic-a-3"
    assert partition_of("/x/logs/replication-offset-checkpoint") is None


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_text_wraps_to_the_terminal_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    line = "warning index-missing " + " ".join(f"/a/long/path/topic-{n}/00000000000000000000.index" for n in range(3))
    terminal = Terminal()
    TextOut(terminal).line(line)
    shown = terminal.getvalue().splitlines()
    assert len(shown) > 1 and all(len(part) <= 50 for part in shown)
    piped = io.StringIO()
    TextOut(piped).line(line)
    assert piped.getvalue() == line + "\n"


@pytest.mark.parametrize("command", [
    ["txns", "logs/golden-v2-txn-0"],
    ["retention", "--now", "1800000000000", "logs/golden-v2-txn-0"],
    ["compaction", "--now", "1800000000000", "logs/golden-v2-txn-0"],
    ["diverge", "logs/golden-v2-mixed-0", "damaged/truncated/golden-v2-mixed-0"],
], ids=lambda c: c[0])
@pytest.mark.parametrize("form", ["text", "table"])
def test_every_command_speaks_text_and_table(capsys, golden, command, form):
    args = [str(golden / a) if "/" in a else a for a in command]
    code, out, err = kafkalog(capsys, args[0], "--format", form, *args[1:])
    assert code == 0, err
    assert out.strip()
    if form == "text":
        assert all("│" not in line for line in out.splitlines())  # no table rules
    if command[0] == "txns" and form == "text":
        assert "golden-v2-txn-0: 13 committed, 20 aborted, 1 open; last stable offset 673" in out
        assert "  open: producer 3002 epoch 5 from offset 673 (6 records)" in out
    if command[0] == "retention" and form == "text":
        assert "  delete 00000000000000000000.log (time): largest timestamp 1700000081518" in out
    if command[0] == "diverge" and form == "text":
        assert "truncated/golden-v2-mixed-0: log end 2018" in out and "diverges at 2018" in out


def test_old_spellings_still_work(capsys, golden):
    """Every --format value a command took before still works (json and table everywhere they were)."""
    for command in (["txns"], ["retention"], ["compaction"]):
        for form in ("json", "table"):
            code, out, _ = kafkalog(capsys, *command, "--format", form, golden / "logs" / "golden-v2-txn-0")
            assert code == 0 and out
    code, out, _ = kafkalog(capsys, "verify", "--format", "json", golden / "logs" / "golden-v0-0")
    assert code == 0 and out.startswith("{")

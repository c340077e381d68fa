"""The committed man pages are exactly what the click definitions generate (no drift)."""
from __future__ import annotations

from kafkalog_tools.manpages import pages
from tests.conftest import ROOT


def test_man_pages_match_the_cli():
    generated = pages()
    committed = {p.name: p.read_text() for p in (ROOT / "man").glob("*.1")}
    assert set(committed) == set(generated), "run: python -m kafkalog_tools.manpages man"
    for name, text in generated.items():
        assert committed[name] == text, f"{name} drifted from the CLI; run: python -m kafkalog_tools.manpages man"


def test_every_subcommand_has_a_page():
    assert {"kafkalog.1", "kafkalog-dump.1"} <= set(pages())

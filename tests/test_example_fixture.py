"""The bundled example is what fixtures/make_example.py writes, and it dumps and decodes clean."""
from __future__ import annotations

import importlib.util
import json

from click.testing import CliRunner

from kafkalog_tools.cli import cli
from tests.conftest import FIXTURES

EXAMPLE = FIXTURES / "example-logdir"


def test_example_is_reproduced_by_its_generator(tmp_path):
    spec = importlib.util.spec_from_file_location("make_example", FIXTURES / "make_example.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path / "example")
    expected = {p.relative_to(EXAMPLE): p.read_bytes() for p in EXAMPLE.rglob("*") if p.is_file()}
    generated = {p.relative_to(tmp_path / "example"): p.read_bytes() for p in (tmp_path / "example").rglob("*") if p.is_file()}
    assert generated == expected


def test_example_dumps_every_codec_and_marker():
    result = CliRunner().invoke(cli, ["dump", "--format", "json", "-d", str(EXAMPLE)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    batches = [o for o in objects if o["type"] == "batch"]
    assert {b["compression"] for b in batches} == {"none", "gzip", "snappy", "lz4", "zstd"}
    markers = [o["control"]["type"] for o in objects if o["type"] == "record" and "control" in o]
    assert markers == ["ABORT", "COMMIT"]
    assert [o for o in objects if o["type"] == "aborted_txn"] == [
        {"type": "aborted_txn", "file": str(EXAMPLE / "orders-0" / "00000000000000000025.txnindex"), "version": 0,
         "producer_id": 2000, "first_offset": 50, "last_offset": 53, "last_stable_offset": 54}]

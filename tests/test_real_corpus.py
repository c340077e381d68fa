"""Log dirs written by real brokers: every segment decodes, every CRC holds, every
__consumer_offsets record renders."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kafkalog_tools.cli import cli

from tests.conftest import REAL

BROKERS = ["zk-broker-a", "zk-broker-b"]
SEGMENTS = sorted(p for p in REAL.glob("*/*/*.log") if p.stat().st_size) if REAL.exists() else []


@pytest.mark.parametrize("segment", SEGMENTS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_real_segment_dumps_clean(segment, real):
    result = CliRunner().invoke(cli, ["dump", "--format", "json", "-d", str(segment)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    batches = [o for o in objects if o["type"] == "batch"]
    records = [o for o in objects if o["type"] == "record"]
    assert batches and records
    assert all(b["crc_valid"] for b in batches)
    assert not [o for o in objects if o["type"] in ("problem", "trailing_bytes")]
    if segment.parent.name.startswith("__consumer_offsets-"):
        assert all(r["key_decoded"] is not None for r in records)
        assert not [r for r in records if r.get("decode_warning")]


@pytest.mark.parametrize("broker", BROKERS)
def test_whole_real_log_dir_dumps_in_order(broker, real):
    result = CliRunner().invoke(cli, ["dump", "--format", "json", str(real / broker)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    files = [json.loads(line)["file"] for line in result.stdout.splitlines() if '"type":"file"' in line]
    partitions = [f.split("/")[-2] for f in files if f.endswith(".log")]
    keys = [(p.rsplit("-", 1)[0], int(p.rsplit("-", 1)[1])) for p in partitions]
    assert keys == sorted(keys), "partitions are walked in topic/partition order"
    assert any(f.endswith("meta.properties") for f in files)


def test_real_segments_present(real):
    assert len(SEGMENTS) >= 10

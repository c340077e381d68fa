"""`dump --format text` on the real broker dirs against Kafka 4.0's kafka-dump-log
(`../shared/corpus/real-kdl-4.0`: its output for every file of `real/`, commands in COMMANDS.txt)."""
from __future__ import annotations

import shlex

import pytest
from click.testing import CliRunner

from kafkalog_tools.cli import cli
from tests.conftest import CORPUS, REAL

KAFKA_4_DUMPS = CORPUS / "real-kdl-4.0"


def _commands() -> list[tuple[str, list[str]]]:
    if not (KAFKA_4_DUMPS / "COMMANDS.txt").exists():
        return []
    commands = []
    for line in (KAFKA_4_DUMPS / "COMMANDS.txt").read_text().splitlines():
        if line.startswith("kafka-dump-log "):
            args = [arg for arg in shlex.split(line)[1:] if arg != "--files"]
            commands.append((args[-1], args[:-1]))
    return commands


COMMANDS = _commands()


@pytest.mark.parametrize("target, flags", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_text_dump_equals_kafka_4_dump_log(target, flags, real, monkeypatch):
    monkeypatch.chdir(real)  # Kafka was run from real/: "Dumping zk-broker-a/..."
    result = CliRunner().invoke(cli, ["dump", "--format", "text", *flags, target], catch_exceptions=False)
    assert result.stdout_bytes == (KAFKA_4_DUMPS / f"{target}.txt").read_bytes()


def test_every_real_file_has_a_kafka_4_dump():
    if not KAFKA_4_DUMPS.exists() or not REAL.exists():
        pytest.skip(f"{KAFKA_4_DUMPS} or {REAL} not found (set KAFKALOG_CORPUS)")
    assert len(COMMANDS) == 116

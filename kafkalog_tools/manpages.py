"""man pages from the click definitions, so the docs cannot drift from the CLI.

`python -m kafkalog_tools.manpages man/` writes `kafkalog.1` and `kafkalog-<command>.1`; a test
regenerates them and compares with the committed files.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from .cli import SUBCOMMANDS, cli

DATE = "2026-11"
SOURCE = "kafkalog-tools"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("-", "\\-").replace("\n.", "\n\\&.").replace("'", "\\(aq")


def _paragraphs(text: str) -> str:
    blocks = [" ".join(line.strip() for line in block.splitlines()) for block in text.strip().split("\n\n")]
    return "\n.PP\n".join(_escape(block) for block in blocks if block)


def _options(command: click.Command, ctx: click.Context) -> str:
    out = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, help_text = record
        out.append(f".TP\n.B {_escape(names)}\n{_escape(help_text)}")
    return "\n".join(out)


def render(command: click.Command, name: str, summary: str, parent: click.Context | None = None) -> str:
    ctx = click.Context(command, info_name=name.split()[-1], parent=parent, **command.context_settings)
    usage = " ".join(command.collect_usage_pieces(ctx))
    title = name.upper().replace(" ", "-")
    sections = [
        f'.TH "{title}" "1" "{DATE}" "{SOURCE}" "User Commands"',
        f".SH NAME\n{_escape(name.replace(' ', '-'))} \\- {_escape(summary)}",
        f".SH SYNOPSIS\n.B {_escape(name)}\n{_escape(usage)}",
        f".SH DESCRIPTION\n{_paragraphs(command.help or '')}",
        f".SH OPTIONS\n{_options(command, ctx)}",
    ]
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name="kafkalog")
        see = ", ".join(f"kafkalog\\-{_escape(sub)}(1)" for sub in command.list_commands(ctx))
        sections.append(f".SH SEE ALSO\n{see}")
    return "\n".join(sections) + "\n"


def pages() -> dict[str, str]:
    """Rendered in the contexts the CLI itself builds, so help option names come out the same."""
    result = {"kafkalog.1": render(cli, "kafkalog", "offline forensics for Apache Kafka's on-disk logs")}
    ctx = click.Context(cli, info_name="kafkalog", **cli.context_settings)
    for name, (_, summary) in SUBCOMMANDS.items():
        command = cli.get_command(ctx, name)
        if command is not None:
            result[f"kafkalog-{name}.1"] = render(command, f"kafkalog {name}", summary, parent=ctx)
    return result


def main(directory: str) -> None:
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    for name, text in pages().items():
        (target / name).write_text(text)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "man")

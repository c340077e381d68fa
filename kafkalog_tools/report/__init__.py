"""`kafkalog report`: one self-contained HTML page to attach to an incident ticket.

`collect` gathers the facts through the commands' own library calls (one verify scan feeds the
timelines too); `svg` draws them as inline SVG; `html` lays out the page and writes it. Nothing is fetched when the
page opens: no script, no font, no external URL.
"""
from __future__ import annotations

from .collect import Report, collect, verification
from .html import render, write

__all__ = ["Report", "collect", "render", "verification", "write"]

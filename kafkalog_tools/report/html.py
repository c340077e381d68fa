"""The report as one self-contained HTML page: the style inline, pictures as inline SVG, no script,
no font, no URL to fetch - it opens the same attached to a ticket on a machine without a network."""
from __future__ import annotations

import os
import tempfile
from html import escape
from pathlib import Path
from typing import Iterator

from .. import retention as r
from ..output import grouped
from . import svg
from .collect import PartitionView, Report

MAX_ERRORS_IN_FULL = 500
MAX_SEGMENT_ROWS = 40
MAX_PLACES = 5

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1000px;padding:16px;
color:#222}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ccc}
h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0}td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:left;
vertical-align:top}th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
.error{color:#b00020;font-weight:600}.warning{color:#a15c00}.info{color:#666}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}code{white-space:nowrap}
section.partition{border-top:2px solid #ddd;margin-top:20px}svg{display:block;margin:6px 0;max-width:100%;height:auto}
.muted{color:#777}.pill{display:inline-block;padding:0 6px;border-radius:8px;background:#eee;margin-right:4px}
"""


def render(report: Report) -> str:
    return "".join(_page(report))


def _page(report: Report) -> Iterator[str]:
    yield ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
           '<meta name="viewport" content="width=device-width,initial-scale=1">'
           f'<title>kafkalog report: {escape(", ".join(report.paths))}</title><style>{STYLE}</style></head><body>')
    yield f'<h1>kafkalog report</h1><p class="mono">{"<br>".join(escape(p) for p in report.paths)}</p>'
    yield from _summary(report)
    yield from _findings(report)
    yield from _partition_index(report)
    if report.divergences:
        yield from _divergences(report)
    for view in report.partitions:
        yield from _partition(report, view)
    yield '</body></html>\n'


def _summary(report: Report) -> Iterator[str]:
    s = report.summary
    records = "not decoded (--shallow)" if s.records is None else f"{s.records:,}"
    rows = [("partitions", f"{s.partitions:,}"), ("segments", f"{s.segments:,}"), ("batches", f"{s.batches:,}"),
            ("records", records), ("log bytes", f"{s.log_bytes:,}"), ("intact bytes", f"{s.intact_bytes:,}"),
            ("damaged bytes", f"{s.damaged_bytes:,}"), ("errors", f"{s.errors:,}"), ("warnings", f"{s.warnings:,}"),
            ("infos", f"{s.infos:,}")]
    if s.suppressed:
        rows.append(("not shown", f"{s.suppressed:,}"))
    yield '<h2 id="summary">verify summary</h2><table class="summary"><tr>'
    yield "".join(f'<th>{name}</th>' for name, _ in rows) + '</tr><tr>'
    yield "".join(f'<td class="n{" error" if name == "errors" and s.errors else ""}">{value}</td>' for name, value in rows)
    yield '</tr></table>'


def _place_link(report: Report, finding) -> str:
    anchor = report.anchor_of(finding.file)
    text = escape(grouped.short_place(finding.file, finding.position))
    return f'<a href="#{anchor}">{text}</a>' if anchor else text


def _findings(report: Report) -> Iterator[str]:
    yield '<h2 id="findings">findings by kind</h2>'
    if not report.findings:
        yield '<p>none</p>'
        return
    items = [grouped.verify_item(f) for f in report.findings]
    by_item = {id(item): finding for item, finding in zip(items, report.findings)}
    yield ('<table class="groups"><tr><th>severity</th><th>code</th><th>count</th><th>partitions</th>'
           '<th>first places</th><th>explanation (the first)</th></tr>')
    for group in grouped.groups(items):
        head = group.first
        firsts = [by_item[id(item)] for item in group.items[:MAX_PLACES]]
        more = f' <span class="muted">+{len(group.items) - MAX_PLACES} more</span>' if len(group.items) > MAX_PLACES else ""
        yield (f'<tr class="group" data-code="{escape(head.code)}"><td class="{head.severity}">{head.severity}</td>'
               f'<td><code>{escape(head.code)}</code></td><td class="n">{len(group.items):,}</td>'
               f'<td class="n">{group.partitions:,}</td>'
               f'<td class="mono">{"<br>".join(_place_link(report, f) for f in firsts)}{more}</td>'
               f'<td>{escape(head.message)}</td></tr>')
    yield '</table>'
    errors = [f for f in report.findings if f.severity == "error"]
    if errors:
        yield f'<h3>errors in full ({len(errors):,})</h3><table class="errors">'
        for f in errors[:MAX_ERRORS_IN_FULL]:
            yield (f'<tr><td><code>{escape(f.code)}</code></td><td class="mono">{_place_link(report, f)}</td>'
                   f'<td>{escape(f.message)}</td></tr>')
        yield '</table>'
        if len(errors) > MAX_ERRORS_IN_FULL:
            yield (f'<p class="muted">{len(errors) - MAX_ERRORS_IN_FULL:,} more errors: '
                   f'<code>kafkalog verify --format json</code> lists every one.</p>')


def _partition_index(report: Report) -> Iterator[str]:
    yield ('<h2 id="partitions">partitions</h2><table class="partitions"><tr><th>partition</th><th>in</th>'
           '<th>bytes</th><th>segments</th><th>batches</th><th>errors</th><th>warnings</th></tr>')
    for view in report.partitions:
        errors = view.count("error")
        yield (f'<tr><td><a href="#{view.anchor}">{escape(view.name)}</a></td><td class="mono">{escape(view.root)}</td>'
               f'<td class="n">{view.size:,}</td><td class="n">{len(view.segments):,}</td>'
               f'<td class="n">{view.timeline.batches:,}</td>'
               f'<td class="n{" error" if errors else ""}">{errors}</td><td class="n">{view.count("warning")}</td></tr>')
    yield '</table>'


def _divergences(report: Report) -> Iterator[str]:
    yield '<h2 id="replicas">replicas: where copies diverge</h2>'
    for name, result in report.divergences:
        yield f'<h3>{escape(name)}</h3>'
        if isinstance(result, str):
            yield f'<p class="error">{escape(result)}</p>'
            continue
        yield f'<p>leader: <span class="mono">{escape(result.leader.path)}</span> ({escape(result.leader_reason)})</p>'
        yield svg.replicas(result)
        yield ('<table><tr><th>replica</th><th>log end</th><th>HW</th><th>last epoch</th><th>diverges at</th>'
               '<th>records at risk</th></tr>')
        for replica in result.replicas:
            risk = replica.records_at_risk
            yield (f'<tr><td class="mono">{escape(replica.path)}{" (leader)" if replica.is_leader else ""}</td>'
                   f'<td class="n">{replica.log_end_offset}</td><td class="n">{_text(replica.high_watermark)}</td>'
                   f'<td class="n">{_text(replica.last_epoch)}</td><td class="n">{_text(replica.truncation_offset)}</td>'
                   f'<td class="n{" error" if risk else ""}">{risk}</td></tr>')
        yield '</table>'
        notes = [f"{replica.path}: {line}" for replica in result.replicas
                 for line in replica.truncation_steps + replica.notes + replica.problems] + result.notes
        if notes:
            yield '<ul>' + "".join(f'<li>{escape(n)}</li>' for n in notes) + '</ul>'


def _text(value) -> str:
    return "-" if value is None else str(value)


def _partition(report: Report, view: PartitionView) -> Iterator[str]:
    counts = " ".join(f'<span class="pill {sev}">{view.count(sev)} {sev}{"s" if view.count(sev) != 1 else ""}</span>'
                      for sev in ("error", "warning", "info") if view.count(sev))
    yield (f'<section class="partition" id="{view.anchor}"><h2>{escape(view.name)} {counts}</h2>'
           f'<p class="mono muted">{escape(str(view.partition.path))}</p>')
    for problem in view.problems:
        yield f'<p class="error">{escape(problem)}</p>'
    if not view.segments:
        yield '<p class="muted">no .log segments</p></section>'
        return
    yield '<h3>segment map</h3>' + svg.segment_map(view)
    yield from _segment_table(view)
    picture = svg.timeline(view)
    line = view.timeline
    yield '<h3>offsets over time</h3>'
    if picture:
        yield picture
    else:
        yield f'<p class="muted">{"no batches" if not line.batches else "no batch timestamps (message format V0)"}</p>'
    facts = []
    if line.gaps.count:
        facts.append(f"{line.gaps.count:,} offset gaps (compaction, or lost data)" + _marked(line.gaps.count))
    if line.steps_back.count:
        facts.append(f"{line.steps_back.count:,} batches whose max timestamp is below an earlier one"
                     + _marked(line.steps_back.count))
    if line.epochs.kept:
        shown = ", ".join(f"{epoch} from {offset}" for epoch, offset in line.epochs.kept[:12])
        more = f" (+{line.epochs.count - 12} more)" if line.epochs.count > 12 else ""
        facts.append(f"leader epochs: {shown}{more}")
    if facts:
        yield '<ul>' + "".join(f'<li>{escape(f)}</li>' for f in facts) + '</ul>'
    yield from _producers(view)
    yield from _retention(view)
    if view.findings:
        yield f'<h3>findings ({len(view.findings):,})</h3><table class="findings">'
        items = [grouped.verify_item(f) for f in view.findings]
        for group in grouped.groups(items):
            head = group.first
            places = [item.place for item in group.items[:MAX_PLACES]]
            more = f' +{len(group.items) - MAX_PLACES} more' if len(group.items) > MAX_PLACES else ""
            yield (f'<tr><td class="{head.severity}">{head.severity}</td><td><code>{escape(head.code)}</code></td>'
                   f'<td class="n">{len(group.items):,}</td><td class="mono">{"<br>".join(map(escape, places))}'
                   f'<span class="muted">{more}</span></td><td>{escape(head.message)}</td></tr>')
        yield '</table>'
    yield '</section>'


def _marked(count: int) -> str:
    return f" (the first {svg.DRAWN_MARKS} are marked)" if count > svg.DRAWN_MARKS else ""


def _segment_table(view: PartitionView) -> Iterator[str]:
    yield ('<table class="segments"><tr><th>segment</th><th>bytes</th><th>.index</th><th>.timeindex</th>'
           '<th>.txnindex</th><th>findings</th><th>damaged bytes</th></tr>')
    rows = view.segments
    shown = rows if len(rows) <= MAX_SEGMENT_ROWS else [s for s in rows if s.errors or s.active][:MAX_SEGMENT_ROWS]
    for s in shown:
        damaged = sum(d.end - d.start for d in s.damage)
        have = ["yes" if p is not None else '<span class="warning">missing</span>'
                for p in (s.segment.index, s.segment.timeindex)]
        have.append("yes" if s.segment.txnindex is not None else "-")  # only a segment with aborts has one
        yield (f'<tr><td class="mono">{s.segment.base_offset}{" (active)" if s.active else ""}</td>'
               f'<td class="n">{s.size:,}</td><td>{have[0]}</td><td>{have[1]}</td><td>{have[2]}</td>'
               f'<td class="n">{s.findings}</td><td class="n{" error" if damaged else ""}">{damaged:,}</td></tr>')
    yield '</table>'
    if len(shown) < len(rows):
        yield f'<p class="muted">{len(rows) - len(shown):,} more segments without errors</p>'


def _producers(view: PartitionView) -> Iterator[str]:
    line = view.timeline
    if view.transactions is not None:
        t = view.transactions
        yield (f'<h3>transactions</h3><p>{t.count("committed")} committed, {t.count("aborted")} aborted, '
               f'{t.count("open")} open; last stable offset {_text(t.last_stable_offset)}, '
               f'log end offset {_text(t.log_end_offset)}</p>')
        picture = svg.transactions(t, t.log_start_offset or 0, t.log_end_offset or 0)
        if picture:
            yield picture
        if t.findings:
            yield '<ul>' + "".join(f'<li class="{f.severity}">{escape(f.kind)}: {escape(f.message)}</li>'
                                   for f in t.findings[:50]) + '</ul>'
    if line.producers:
        yield ('<h3>producers</h3><table class="producers"><tr><th>producer id</th><th>batches</th>'
               '<th>transactional</th><th>markers</th><th>first offset</th><th>last offset</th></tr>')
        for pid, p in line.top_producers():
            yield (f'<tr><td class="mono">{pid}</td><td class="n">{p.batches:,}</td><td class="n">{p.transactional:,}'
                   f'</td><td class="n">{p.control:,}</td><td class="n">{p.first_offset}</td>'
                   f'<td class="n">{p.last_offset}</td></tr>')
        yield '</table>'
        if len(line.producers) > len(line.top_producers()):
            yield f'<p class="muted">{len(line.producers):,} producers in all</p>'


def _retention(view: PartitionView) -> Iterator[str]:
    report: r.RetentionReport | None = view.retention
    if report is None:
        return
    deleted = report.deleted
    settings = report.settings
    yield (f'<h3>retention at {escape(svg.iso(report.now))}</h3><p>retention.ms {settings.retention_ms}, '
           f'retention.bytes {settings.retention_bytes}: {len(deleted)} of {len(report.segments)} segments go '
           f'({sum(s.size for s in deleted):,} of {report.size:,} bytes); log start offset '
           f'{report.log_start_offset} &#8594; {_text(report.new_log_start_offset)}</p>')
    kept = [s for s in report.segments if not s.deleted][:1]
    rows = deleted[:MAX_SEGMENT_ROWS] + kept
    if rows:
        yield ('<table class="retention"><tr><th>segment</th><th>bytes</th><th>largest timestamp</th><th>verdict</th>'
               '<th>why</th></tr>')
        for s in rows:
            verdict = f'<span class="error">delete ({escape(s.deleted_by)})</span>' if s.deleted else "keep (next)"
            why = s.reason if s.deleted else "; ".join(s.kept_because)
            yield (f'<tr><td class="mono">{s.base_offset}</td><td class="n">{s.size:,}</td>'
                   f'<td class="mono">{escape(svg.iso(s.largest_timestamp))} ({escape(s.timestamp_source)})</td>'
                   f'<td>{verdict}</td><td>{escape(why)}</td></tr>')
        yield '</table>'
    notes = [f"leftover {x.file}: {x.action}" for x in report.leftovers] + report.notes + report.problems
    if notes:
        yield '<ul>' + "".join(f'<li>{escape(n)}</li>' for n in notes[:50]) + '</ul>'


def write(target: Path, page: str) -> int:
    """Write `page` beside `target`, then rename it into place; its size in bytes."""
    directory = target.parent if str(target.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as open() would have made it, not mkstemp's 0600
        with os.fdopen(handle, "w", encoding="utf-8", errors="backslashreplace") as out:  # names not UTF-8
            out.write(page)
        os.replace(temporary, target)
        return target.stat().st_size
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


"""The report's pictures, as inline SVG written by hand: no script, no font, nothing fetched.

Each picture is bounded in size whatever the input: segments narrower than a pixel or two merge into
one box (unless something about them must show), a timeline draws at most the points `collect` kept,
transactions and epochs are capped. Every mark carries a <title> (the browser's tooltip) and the
facts it shows as data- attributes, so a test can check where it is drawn.
"""
from __future__ import annotations

from datetime import datetime, timezone
from html import escape

from .collect import PartitionView, SegmentView, Timeline
from .. import diverge, txns

WIDTH = 960
MIN_BOX = 2.0
"""Pixels: damage is drawn at least this wide."""
MERGE_BELOW = 4.0
"""Pixels: plain segments merge into one box until it is this wide (a box per pixel column says nothing more)."""
MAX_TRANSACTIONS = 2000
DRAWN_POINTS = 1024
"""A timeline's line has at most this many vertices (about one per pixel)."""
DRAWN_MARKS = 60
"""Timestamp steps back and gaps marked per timeline; the list under it counts them all."""

COLOURS = {
    "segment": "#9cc3e6", "deleted": "#f4b183", "damage-error": "#d62728", "damage-warning": "#ff9f1c",
    "index-ok": "#2ca02c", "index-partial": "#ffbf00", "index-none": "#d62728", "line": "#1f77b4",
    "step-back": "#d62728", "gap": "#ff7f0e", "committed": "#2ca02c", "aborted": "#ff9f1c",
    "open": "#d62728", "axis": "#555",
}
EPOCH_HUES = ("#9cc3e6", "#b5d99c", "#d9b3e6", "#f9d58b", "#a7d7d7", "#e6b3b3")


def _title(text: str) -> str:
    return f"<title>{escape(text)}</title>"


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def iso(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return str(ms)


# ---------------------------------------------------------------------------------------------
# Segment map: segments to scale by bytes, damage, active segment, indexes
# ---------------------------------------------------------------------------------------------


def _index_state(segment: SegmentView) -> str:
    present = (segment.segment.index is not None) + (segment.segment.timeindex is not None)
    return "index-ok" if present == 2 else "index-partial" if present else "index-none"


def _runs(view: PartitionView, total: int) -> list[tuple[float, float, list[SegmentView]]]:
    """(x, width, segments) boxes: consecutive plain narrow segments share one box."""
    boxes: list[tuple[float, float, list[SegmentView]]] = []
    x = 0.0
    count = len(view.segments)
    for segment in view.segments:
        width = WIDTH * (segment.size / total if total else 1 / count)
        plain = not (segment.damage or segment.active or segment.errors)
        kind = (_index_state(segment), bool(segment.retention and segment.retention.deleted))
        if boxes and plain and boxes[-1][1] < MERGE_BELOW:
            last = boxes[-1][2][-1]
            last_plain = not (last.damage or last.active or last.errors)
            if last_plain and (_index_state(last), bool(last.retention and last.retention.deleted)) == kind:
                bx, bw, members = boxes[-1]
                boxes[-1] = (bx, bw + width, members + [segment])
                x += width
                continue
        boxes.append((x, width, [segment]))
        x += width
    return boxes


def segment_map(view: PartitionView) -> str:
    total = view.size
    height = 74
    parts = [f'<svg class="segment-map" data-partition="{escape(view.name)}" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}">']
    for x, width, members in _runs(view, total):
        first, last = members[0], members[-1]
        deleted = bool(first.retention and first.retention.deleted)
        fill = COLOURS["deleted" if deleted else "segment"]
        size = sum(m.size for m in members)
        if len(members) == 1:
            label = (f"{first.segment.log.name}: {first.size:,} bytes, offsets from {first.segment.base_offset}"
                     + (" (active segment)" if first.active else "") + f"; {first.findings} findings"
                     + (f"; retention deletes it ({first.retention.deleted_by})" if deleted else ""))
        else:
            label = (f"{len(members)} segments from {first.segment.base_offset} to {last.segment.base_offset}: "
                     f"{size:,} bytes")
        stroke = ' stroke="#333" stroke-dasharray="4 2" stroke-width="1.5"' if first.active else ' stroke="#fff"'
        facts = (f'data-file="{escape(str(first.segment.log))}" data-size="{first.size}"' if len(members) == 1
                 else f'data-segments="{len(members)}"')
        parts.append(f'<g class="segment" {facts}><rect x="{_num(x)}" y="16" width="{_num(max(width, 0.5))}" '
                     f'height="34" fill="{fill}"{stroke}>{_title(label)}</rect></g>')
        state = _index_state(first)
        missing = [name for name, path in (("index", first.segment.index), ("timeindex", first.segment.timeindex),
                                           ("txnindex", first.segment.txnindex)) if path is None]
        parts.append(f'<rect class="{state}" x="{_num(x)}" y="52" width="{_num(max(width, 0.5))}" height="6" '
                     f'fill="{COLOURS[state]}">'
                     f'{_title("indexes: " + ("all present" if not missing else "missing " + ", ".join(missing)))}'
                     f'</rect>')
        if width >= 70 or first is view.segments[0]:
            parts.append(f'<text x="{_num(x + 2)}" y="12" font-size="10" fill="{COLOURS["axis"]}">'
                         f'{first.segment.base_offset}{" (active)" if first.active and width >= 110 else ""}</text>')
        for segment in members:
            for damage in segment.damage:
                parts.append(_damage_mark(x, width, segment, damage))
    parts.append(f'<text x="0" y="70" font-size="10" fill="{COLOURS["axis"]}">{total:,} bytes in '
                 f'{len(view.segments)} segments; orange: retention deletes it; red: damaged bytes; dashed: active; '
                 f'bar below: indexes (green present, amber one missing, red none)'
                 f'</text></svg>')
    return "".join(parts)


def _damage_mark(x: float, width: float, segment: SegmentView, damage) -> str:
    size = segment.size or 1
    start = x + width * min(damage.start, size) / size
    span = max(width * (min(damage.end, size) - min(damage.start, size)) / size, MIN_BOX)
    start = min(start, x + width - span) if width >= span else start
    colour = COLOURS["damage-error" if damage.severity == "error" else "damage-warning"]
    title = _title(f"{damage.code}: bytes {damage.start}..{damage.end} of {segment.segment.log.name}")
    middle = start + span / 2
    return (f'<rect class="damage" data-file="{escape(str(segment.segment.log))}" data-start="{damage.start}" '
            f'data-end="{damage.end}" data-code="{escape(damage.code)}" x="{_num(start)}" y="14" '
            f'width="{_num(span)}" height="38" fill="{colour}" fill-opacity="0.9">{title}</rect>'
            f'<path class="damage-marker" d="M{_num(middle - 5)},2 L{_num(middle + 5)},2 L{_num(middle)},12 Z" '
            f'fill="{colour}">{title}</path>')


# ---------------------------------------------------------------------------------------------
# Offsets over time
# ---------------------------------------------------------------------------------------------


def timeline(view: PartitionView) -> str | None:
    line: Timeline = view.timeline
    offsets, stamps = line.points
    keep = stamps >= 0  # V0 messages have no timestamp
    offsets, stamps = offsets[keep], stamps[keep]
    step = max(1, -(-len(offsets) // DRAWN_POINTS))  # a ceiling; 1 when there is nothing to draw
    offsets, stamps = offsets[::step].tolist(), stamps[::step].tolist()
    if not offsets:
        return None
    steps_back = line.steps_back.kept[:DRAWN_MARKS]
    gaps = [gap for gap in line.gaps.kept if gap[2] >= 0][:DRAWN_MARKS]
    marks_t = [m[1] for m in steps_back] + [m[2] for m in gaps]
    marks_o = [m[0] for m in steps_back] + [m[1] for m in gaps]
    t0, t1 = min(stamps + marks_t), max(stamps + marks_t)
    o0, o1 = min(offsets + marks_o), max(offsets + marks_o)
    left, right, top, bottom, height = 90, 10, 10, 34, 190
    plot_w, plot_h = WIDTH - left - right, height - top - bottom

    def px(t: int) -> float:
        return left + (plot_w * (t - t0) / (t1 - t0) if t1 > t0 else plot_w / 2)

    def py(o: int) -> float:
        return top + plot_h - (plot_h * (o - o0) / (o1 - o0) if o1 > o0 else plot_h / 2)

    points = " ".join(f"{px(t):.0f},{py(o):.0f}" for o, t in zip(offsets, stamps))
    parts = [f'<svg class="timeline" data-partition="{escape(view.name)}" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}">',
             f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#ddd"/>',
             f'<polyline points="{points}" fill="none" stroke="{COLOURS["line"]}" stroke-width="1.2">'
             f'{_title(f"{line.batches:,} batches; {len(offsets):,} drawn (every {line.stride * step})")}</polyline>']
    for offset, stamp, before in steps_back:
        parts.append(f'<circle class="step-back" cx="{px(stamp):.0f}" cy="{py(offset):.0f}" r="2.5" '
                     f'fill="{COLOURS["step-back"]}">{_title(f"offset {offset}: {iso(stamp)} < {iso(before)}")}'
                     f'</circle>')
    for first, last, stamp in gaps:
        parts.append(f'<line class="gap" x1="{_num(px(stamp))}" x2="{_num(px(stamp))}" y1="{_num(py(first))}" '
                     f'y2="{_num(py(last))}" stroke="{COLOURS["gap"]}" stroke-width="3">'
                     f'{_title(f"offsets {first}..{last} missing")}</line>')
    axis = COLOURS["axis"]
    parts += [f'<text x="{left - 4}" y="{top + 9}" font-size="10" text-anchor="end" fill="{axis}">{o1}</text>',
              f'<text x="{left - 4}" y="{top + plot_h}" font-size="10" text-anchor="end" fill="{axis}">{o0}</text>',
              f'<text x="{left}" y="{height - 18}" font-size="10" fill="{axis}">{iso(t0)}</text>',
              f'<text x="{WIDTH - right}" y="{height - 18}" font-size="10" text-anchor="end" fill="{axis}">{iso(t1)}'
              f'</text>',
              f'<text x="{left + plot_w / 2:.0f}" y="{height - 4}" font-size="10" text-anchor="middle" fill="{axis}">'
              f'batch max timestamp &#8594; (offset &#8593;); red dots: timestamp steps back; orange: offset gaps'
              f'</text></svg>']
    return "".join(parts)


# ---------------------------------------------------------------------------------------------
# Transactions per producer, replicas' epochs
# ---------------------------------------------------------------------------------------------


def transactions(result: txns.PartitionTransactions, log_start: int, log_end: int) -> str | None:
    shown = result.transactions[:MAX_TRANSACTIONS]
    if not shown:
        return None
    producers = list(dict.fromkeys(t.producer_id for t in shown))[:12]
    lane = {pid: n for n, pid in enumerate(producers)}
    left, lane_h = 110, 16
    height = 24 + lane_h * len(producers)
    span = max(log_end - log_start, 1)

    def px(offset: int) -> float:
        return left + (WIDTH - left - 10) * (offset - log_start) / span

    parts = [f'<svg class="transactions" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}">']
    for pid, n in lane.items():
        parts.append(f'<text x="{left - 6}" y="{14 + n * lane_h}" font-size="10" text-anchor="end">producer {pid}</text>')
    for t in shown:
        if t.producer_id not in lane:
            continue
        end = t.marker_offset if t.marker_offset is not None else (t.last_offset if t.last_offset >= 0 else log_end)
        x0, x1 = px(t.first_offset), px(end + 1)
        parts.append(f'<rect class="txn {t.state}" x="{_num(x0)}" y="{4 + lane[t.producer_id] * lane_h}" '
                     f'width="{_num(max(x1 - x0, 1.5))}" height="{lane_h - 4}" fill="{COLOURS[t.state]}">'
                     f'{_title(f"producer {t.producer_id} epoch {t.producer_epoch}: {t.state}, offsets {t.first_offset}..{end}, {t.records} records")}'
                     f'</rect>')
    parts.append(f'<text x="{left}" y="{height - 4}" font-size="10" fill="{COLOURS["axis"]}">offsets {log_start} '
                 f'&#8594; {log_end}; green committed, amber aborted, red open</text></svg>')
    return "".join(parts)


def replicas(result: diverge.Divergence) -> str:
    end = max(max(r.log_end_offset for r in result.replicas), 1)
    start = min(r.log_start_offset for r in result.replicas)
    left, lane_h = 260, 24
    height = 24 + lane_h * len(result.replicas)
    span = max(end - start, 1)

    def px(offset: int) -> float:
        return left + (WIDTH - left - 10) * (offset - start) / span

    parts = [f'<svg class="replicas" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}">']
    for n, r in enumerate(result.replicas):
        y = 4 + n * lane_h
        name = "/".join(r.path.rstrip("/").split("/")[-2:]) + (" (leader)" if r.is_leader else "")
        parts.append(f'<text x="{left - 6}" y="{y + 13}" font-size="10" text-anchor="end">{escape(name)}</text>')
        for epoch, first, stop in r.epoch_ranges()[:500]:
            parts.append(f'<rect x="{_num(px(first))}" y="{y}" width="{_num(max(px(stop) - px(first), 1))}" '
                         f'height="{lane_h - 6}" fill="{EPOCH_HUES[epoch % len(EPOCH_HUES)]}" stroke="#fff">'
                         f'{_title(f"leader epoch {epoch}: offsets {first}..{stop - 1}")}</rect>')
        for epoch, first, last, records in r.at_risk_by_epoch()[:500]:
            parts.append(f'<rect class="at-risk" x="{_num(px(first))}" y="{y + 3}" '
                         f'width="{_num(max(px(last + 1) - px(first), 2))}" height="{lane_h - 12}" fill="none" '
                         f'stroke="{COLOURS["step-back"]}" stroke-width="2">'
                         f'{_title(f"truncated on failover: epoch {epoch}, offsets {first}..{last}, {records} records")}'
                         f'</rect>')
        if r.truncation_offset is not None:
            x = px(r.truncation_offset)
            parts.append(f'<line class="diverge" x1="{_num(x)}" x2="{_num(x)}" y1="{y - 2}" y2="{y + lane_h - 4}" '
                         f'stroke="#000" stroke-width="2">{_title(f"diverges at offset {r.truncation_offset}")}</line>')
    parts.append(f'<text x="{left}" y="{height - 4}" font-size="10" fill="{COLOURS["axis"]}">offsets {start} &#8594; '
                 f'{end}; colour per leader epoch; black line: divergence offset; red outline: records a failover '
                 f'truncates</text></svg>')
    return "".join(parts)

"""`kafkalog report`: the page's facts against Kafka's own manifests and verify's JSON, its size on a
big input, and the page itself in a real headless Chromium (no console errors, no network request,
the damaged byte range drawn where it is).

The browser tests need Debian's chromium and the playwright package (the test extra installs it).
Where chromium is absent the `chromium` fixture installs it with apt-get when it can (root, apt-get
present, KAFKALOG_NO_APT unset), as on a fresh CI machine; otherwise those tests skip, saying why.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kafkalog_tools import retention
from kafkalog_tools.cli import main
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.report import collect, render, verification
from kafkalog_tools.report.collect import MARKS, TIMELINE_POINTS, Timeline
from kafkalog_tools.verify import BatchFacts, FactsRun

MIXED = "golden-v2-mixed-0"
T0 = 1_700_000_000_000
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def kafkalog(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def report_of(*paths, now: int = T0):
    run = verification([str(p) for p in paths])
    return collect(run, [str(p) for p in paths], retention.RetentionSettings(now=now))


# ---------------------------------------------------------------------------------------------
# The facts drawn, against Kafka's own manifests
# ---------------------------------------------------------------------------------------------


def manifest_batches(golden: Path, partition: str) -> list[dict]:
    folder = golden / "manifests" / "logs" / partition
    out = []
    for path in sorted(folder.glob("0*.json")):
        out.extend(json.loads(path.read_text())["batches"])
    return out


@pytest.mark.parametrize("partition", [MIXED, "golden-v2-txn-0", "golden-v1-0", "golden-v2-broker-zstd-2"])
@pytest.mark.parametrize("bulk", ["never", "always"])
def test_timeline_equals_kafkas_batches(golden, monkeypatch, partition, bulk):
    """Gaps, timestamp steps back, epochs and producers as Kafka's manifest lists the batches, from
    the per-batch path and from the compiled scan's runs alike."""
    monkeypatch.setenv("KAFKALOG_BULK", bulk)
    batches = manifest_batches(golden, partition)
    line = report_of(golden / "logs" / partition).partitions[0].timeline
    gaps, steps, epochs, largest, previous_last, previous_epoch = [], [], [], None, None, None
    producers: dict[int, int] = {}
    for b in batches:
        base = b["baseOffset"]
        if previous_last is not None and base > previous_last + 1:
            gaps.append((previous_last + 1, base - 1, b["maxTimestamp"]))
        if largest is not None and b["maxTimestamp"] < largest:
            steps.append((base, b["maxTimestamp"], largest))
        if b["partitionLeaderEpoch"] >= 0 and b["partitionLeaderEpoch"] != previous_epoch:
            epochs.append((b["partitionLeaderEpoch"], base))
        if b["producerId"] >= 0:
            producers[b["producerId"]] = producers.get(b["producerId"], 0) + 1
        largest = b["maxTimestamp"] if largest is None else max(largest, b["maxTimestamp"])
        previous_last, previous_epoch = b["lastOffset"], b["partitionLeaderEpoch"]
    assert line.batches == len(batches)
    assert (line.gaps.kept, line.gaps.count) == (gaps[:MARKS], len(gaps))
    assert (line.steps_back.kept, line.steps_back.count) == (steps[:MARKS], len(steps))
    assert line.epochs.kept == epochs
    assert {pid: p.batches for pid, p in line.producers.items()} == producers
    assert line.transactional == any(b["isTransactional"] for b in batches)


def test_a_partition_named_twice_is_drawn_twice_not_summed(golden):
    partition = golden / "logs" / "golden-v2-txn-0"
    report = report_of(partition, golden / "logs", partition / "00000000000000000307.log")
    batches = len(manifest_batches(golden, "golden-v2-txn-0"))
    txn = [view for view in report.partitions if view.name == "golden-v2-txn-0"]
    assert [view.timeline.batches for view in txn][:2] == [batches, batches]
    assert len(txn) == 3 and 0 < txn[2].timeline.batches < batches  # one segment of it
    assert report.divergences == []  # the same directory, not copies


def test_producers_tie_by_id():
    from kafkalog_tools.report.collect import Producer, Timeline

    line = Timeline()
    line.producers = {9: Producer(batches=2), 3: Producer(batches=2), 5: Producer(batches=7)}
    assert [pid for pid, _ in line.top_producers()] == [5, 3, 9]


def test_timeline_keeps_a_bounded_even_sample(tmp_path):
    """Many batches: at most 2 * TIMELINE_POINTS kept, evenly spaced, the first batch among them."""
    partition = tmp_path / "big-0"
    partition.mkdir()
    count = 20_000
    template = bytearray(build_batch(0, [build_record(0, 0, b"k", b"v")], base_timestamp=T0, max_timestamp=T0))
    with open(partition / "00000000000000000000.log", "wb") as out:
        import struct

        from kafkalog_tools.crc import crc32c
        for offset in range(count):
            struct.pack_into(">q", template, 0, offset)
            struct.pack_into(">qq", template, 27, T0 + offset, T0 + offset)
            struct.pack_into(">I", template, 17, crc32c(bytes(template[21:])))
            out.write(template)
    line = report_of(partition).partitions[0].timeline
    offsets, stamps = line.points
    assert line.batches == count and len(offsets) <= 2 * TIMELINE_POINTS
    assert offsets[0] == 0 and set((offsets[1:] - offsets[:-1]).tolist()) == {line.stride}
    assert (stamps - offsets == T0).all()


# ---------------------------------------------------------------------------------------------
# The page: self-contained, small, its parts present
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def corrupted(golden, tmp_path) -> Path:
    """golden-v2-mixed-0 with 64 bytes inside its second segment overwritten: a CRC mismatch mid-log."""
    copy = tmp_path / "corrupted" / MIXED
    shutil.copytree(golden / "logs" / MIXED, copy)
    log = copy / "00000000000000000424.log"
    data = bytearray(log.read_bytes())
    data[30_000:30_064] = bytes(range(64))
    log.write_bytes(bytes(data))
    return copy


def test_page_is_self_contained(golden, corrupted):
    report = report_of(golden / "logs", golden / "damaged" / "truncated" / MIXED, corrupted)
    page = render(report)
    assert "<script" not in page and "http:" not in page and "https:" not in page and "url(" not in page
    assert page.count('<section class="partition"') == len(report.partitions) == 8
    # two more copies of golden-v2-mixed-0: the replicas section compares the three
    assert [name for name, _ in report.divergences] == [MIXED]
    assert 'class="diverge"' in page
    # the corrupted copy's error is grouped, listed in full and linked to its partition
    anchor = report.partitions[-1].anchor
    assert f'href="#{anchor}">{MIXED}/00000000000000000424.log @' in page
    assert 'data-code="crc-mismatch"' in page


def test_report_command(capsys, golden, tmp_path, corrupted):
    target = tmp_path / "out" / "report.html"
    code, _, err = kafkalog(capsys, "report", "--output", target, corrupted)
    assert code == 2 and "does not exist" in err
    target.parent.mkdir()
    code, out, err = kafkalog(capsys, "report", "--output", target, "--now", "2023-11-22T00:00:00", corrupted)
    assert code == 1 and out == "" and f"wrote {target}" in err  # errors found: exit 1, as verify
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]  # no temp file left
    code, _, err = kafkalog(capsys, "report", "--output", corrupted / "r.html", corrupted)
    assert code == 2 and "inside the input" in err and not (corrupted / "r.html").exists()
    code, out, _ = kafkalog(capsys, "report", "--output", "-", "--now", str(T0), golden / "logs" / "golden-v0-0")
    assert code == 0 and out.startswith("<!DOCTYPE html>")
    code, piped, _ = kafkalog(capsys, "report", "--now", str(T0), golden / "logs" / "golden-v0-0")
    assert code == 0 and piped == out  # no --output: stdout, when it is not a terminal


def test_names_that_are_not_utf8(capsys, golden, tmp_path):
    """A partition dir whose name is not UTF-8 (a surrogate escape in Python): written as \\udcXX."""
    name = os.fsdecode(b"t\xff-0")
    shutil.copytree(golden / "logs" / "golden-v2-txn-0", tmp_path / "logs" / name)
    target = tmp_path / "r.html"
    code, _, err = kafkalog(capsys, "report", "--output", target, "--now", str(T0), tmp_path / "logs")
    assert code == 0, err
    assert "t\\udcff-0" in target.read_text(encoding="utf-8")


def test_retention_section_says_which_segments_go(golden):
    """--now a week and a day after the data: every closed segment goes by time (Kafka keeps the active one)."""
    now = 1_700_000_100_000 + 8 * 24 * 3600 * 1000
    view = report_of(golden / "logs" / "golden-v2-txn-0", now=now).partitions[0]
    deleted = [s.segment.base_offset for s in view.segments if s.retention and s.retention.deleted]
    assert deleted == [s.base_offset for s in view.retention.deleted] and deleted
    page = render(report_of(golden / "logs" / "golden-v2-txn-0", now=now))
    assert page.count("delete (time)") == len(deleted)


def test_report_stays_small_on_many_segments(tmp_path):
    """1,200 segments of one partition: narrow ones merge into a box, the table lists a few."""
    partition = tmp_path / "many-0"
    partition.mkdir()
    for n in range(1200):
        batch = build_batch(n, [build_record(0, 0, b"k", b"v" * 100)], base_timestamp=T0 + n, max_timestamp=T0 + n)
        (partition / f"{n:020d}.log").write_bytes(batch)
    page = render(report_of(partition))
    assert len(page) < 120_000, len(page)
    assert page.count('<g class="segment"') <= 960 / 4 + 1


# ---------------------------------------------------------------------------------------------
# In a real browser
# ---------------------------------------------------------------------------------------------


def _install_chromium() -> str | None:
    """Debian's chromium through apt-get, when this process may (root, apt-get, KAFKALOG_NO_APT unset)."""
    if os.environ.get("KAFKALOG_NO_APT") or not shutil.which("apt-get") or os.geteuid() != 0:
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        if subprocess.run(step, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1200).returncode:
            return None
    return shutil.which("chromium")


@pytest.fixture(scope="session")
def chromium() -> str:
    path = shutil.which("chromium") or _install_chromium()
    if path is None:
        pytest.skip("Debian's chromium is not installed and could not be (needs root and apt-get; "
                    "KAFKALOG_NO_APT set?): apt-get install -y chromium")
    return path


@pytest.fixture(scope="session")
def browser(chromium, tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -e '.[test]'")
    with sync_api.sync_playwright() as driver:
        profile = tmp_path_factory.mktemp("chromium-profile")
        context = driver.chromium.launch_persistent_context(str(profile), executable_path=chromium,
                                                            headless=True, args=CHROMIUM_FLAGS,
                                                            viewport={"width": 1000, "height": 900})
        yield context
        context.close()


def open_page(browser, html: Path):
    """The page loaded, with every request it made and every console message or page error."""
    page = browser.new_page()
    requests, messages = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda message: messages.append((message.type, message.text)))
    page.on("pageerror", lambda error: messages.append(("pageerror", str(error))))
    page.goto(html.as_uri(), wait_until="load")
    return page, requests, messages


def geometry(page, file: Path) -> dict:
    """Where the segment box of `file` and its damage marks are drawn, in CSS pixels."""
    return page.evaluate("""(file) => {
        const box = e => { const r = e.getBoundingClientRect(); return {x: r.x, width: r.width}; };
        const segment = [...document.querySelectorAll('g.segment')].find(g => g.dataset.file === file);
        const damage = [...document.querySelectorAll('rect.damage')].filter(r => r.dataset.file === file);
        return {segment: segment && box(segment.querySelector('rect')), size: segment && +segment.dataset.size,
                damage: damage.map(r => ({...box(r), start: +r.dataset.start, end: +r.dataset.end}))};
    }""", str(file))


def check_loaded_cleanly(page, requests, messages, html: Path) -> None:
    assert requests == [html.as_uri()], "the page fetched something"
    assert [m for m in messages if m[0] in ("error", "pageerror", "warning")] == []
    assert page.evaluate("document.querySelectorAll('svg').length") > 0


def test_golden_report_in_chromium(browser, golden, tmp_path, capsys):
    html = tmp_path / "golden.html"
    code, _, err = kafkalog(capsys, "report", "--output", html, "--now", "2023-11-22T00:00:00", golden / "logs")
    assert code == 0, err
    page, requests, messages = open_page(browser, html)
    check_loaded_cleanly(page, requests, messages, html)
    assert page.evaluate("document.querySelectorAll('section.partition').length") == 6
    assert page.evaluate("document.querySelectorAll('svg.timeline polyline').length") == 5  # V0 has no timestamps
    # every partition link of the index leads to a section on the page
    assert page.evaluate("""[...document.querySelectorAll('table.partitions a')]
        .every(a => document.getElementById(a.getAttribute('href').slice(1)) !== null)""")
    page.screenshot(path=str(tmp_path / "golden.png"), full_page=True)
    assert (tmp_path / "golden.png").stat().st_size > 10_000


@pytest.mark.parametrize("which", ["truncated", "corrupted"])
def test_damage_drawn_where_it_is(browser, golden, corrupted, tmp_path, capsys, which):
    """The damaged range verify reports (JSON Lines) is drawn inside its segment's box, at its place
    to the pixel: the corpus's copy cut inside its last batch, and a copy with a CRC mismatch mid-log."""
    partition = golden / "damaged" / "truncated" / MIXED if which == "truncated" else corrupted
    code, out, _ = kafkalog(capsys, "verify", "--format", "json", partition)
    ranges = [(f["file"], f["position"], f.get("end", f["position"] + f.get("length", 0)))
              for f in map(json.loads, out.splitlines())
              if f["type"] == "finding" and f["file"].endswith(".log") and ("end" in f or "length" in f)]
    assert len(ranges) == 1
    file, start, end = ranges[0]
    if which == "truncated":
        damage = json.loads((golden / "manifests" / "damaged" / f"{MIXED}.damage.json").read_text())[0]
        assert (Path(file).name, start, end) == (damage["file"], damage["cutBatchPosition"], damage["truncatedTo"])
    html = tmp_path / f"{which}.html"
    kafkalog(capsys, "report", "--output", html, "--now", str(T0), partition)
    page, requests, messages = open_page(browser, html)
    check_loaded_cleanly(page, requests, messages, html)
    drawn = geometry(page, Path(file))
    box, size = drawn["segment"], drawn["size"]
    assert size == Path(file).stat().st_size
    assert [(d["start"], d["end"]) for d in drawn["damage"]] == [(start, end)]
    mark = drawn["damage"][0]
    expected_x = box["x"] + box["width"] * start / size
    expected_width = max(box["width"] * (end - start) / size, 2.0)
    assert box["x"] - 0.5 <= mark["x"] and mark["x"] + mark["width"] <= box["x"] + box["width"] + 0.5
    assert abs(mark["x"] - min(expected_x, box["x"] + box["width"] - expected_width)) <= 1.0
    assert abs(mark["width"] - expected_width) <= 1.0
    page.screenshot(path=str(tmp_path / f"{which}.png"), full_page=True)


def test_a_producers_first_offset_is_its_first_batchs_however_the_batches_come():
    """A producer whose first batch has a negative base offset (Long.MIN: a flipped bit) and whose
    next batch comes in another run of the scan: its first offset stays the first batch's. It was
    taken for "none yet" and overwritten, so the report said 701 where the per-batch path said
    Long.MIN (mutation fuzzer --differential, seed 3203)."""
    def facts(position: int, base: int, last: int) -> BatchFacts:
        return BatchFacts("p.log", position, 80, base, last, 2, 0, 4001, 0, 0, 0, False, False, 1_700_000_000_000,
                          None)

    first, second = facts(0, -(1 << 63), -(1 << 63)), facts(80, 701, 703)
    one_chunk, two_chunks = Timeline(), Timeline()
    for batch in (first, second):
        one_chunk.add(batch)
    two_chunks.add(first)
    two_chunks.add(FactsRun("p.log", FactsRun.row_of(second)))
    assert one_chunk.finish().producers == two_chunks.finish().producers
    assert (two_chunks.producers[4001].first_offset, two_chunks.producers[4001].last_offset) == (-(1 << 63), 703)

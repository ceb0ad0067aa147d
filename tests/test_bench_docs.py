# SPDX-License-Identifier: Apache-2.0
"""The Performance page shows the committed benchmark results: its headline
table matches docs/_data/bench.json, and its plots are there.

Marker ``docs``: runs once, in the matrix's ``docs`` environment, with the
other checks of the site (tests/test_docs.py); by hand:
``python3 tools/matrix.py run docs -- bash -c '$PY -m pytest -m docs tests/test_bench_docs.py'``.

The ratios are recomputed here from the raw rows of the JSON (not with the
docs extension's code) and compared with the text of the built page.
"""

from __future__ import annotations

import copy
import html
import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import hang_guard

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "docs" / "_data" / "bench.json"
PAGE = REPO / "build" / "docs" / "html" / "performance.html"
# tools/docs.sh may run the probe first; a hang guard (conftest.hang_guard)
BUILD_TIMEOUT_S = hang_guard(1500)

pytestmark = [pytest.mark.docs, pytest.mark.timeout(BUILD_TIMEOUT_S + 300)]


@pytest.fixture(scope="module")
def page() -> str:
    """The built Performance page (tools/docs.sh, which skips an up-to-date site)."""
    p = subprocess.run(
        ["bash", str(REPO / "tools" / "docs.sh")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    if p.returncode != 0:
        pytest.fail(f"make docs failed ({p.returncode}):\n{p.stdout[-6000:]}\n{p.stderr[-6000:]}")
    return PAGE.read_text(encoding="utf-8")


class _Tables(HTMLParser):
    """Rows of cell texts of every <table> whose class contains `cls`."""

    def __init__(self, cls: str):
        super().__init__()
        self.cls, self.depth, self.rows, self.cell = cls, 0, [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and self.cls in (a.get("class") or "").split():
            self.depth = 1
        elif self.depth and tag == "tr":
            self.rows.append([])
        elif self.depth and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            self.depth = 0
        elif self.depth and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def headline_rows(page_html: str) -> list[list[str]]:
    parser = _Tables("dc-bench-headline")
    parser.feed(page_html)
    return parser.rows


def expected_ratio(data: dict, row: dict) -> float:
    """The headline value recomputed from the raw rows it names."""
    core, kind = data["core"], row["kind"]
    if kind == "ns":
        return core[row["numerator"]]["ns_per_item"] / core[row["denominator"]]["ns_per_item"]
    if kind == "batch_ns":
        clock = core["clock/steady_clock_pair"]["ns_per_item"]
        return (core[row["numerator"]]["ns_per_item"] - clock) / (
            core[row["denominator"]]["ns_per_item"] - clock
        )
    if kind == "paired_throughput":  # timed beside its floor (BM_ProducersPaired)
        return core[row["numerator"]]["counters"]["floor_ratio"]
    if kind == "throughput":
        return (
            core[row["numerator"]]["items_per_second"]
            / core[row["denominator"]]["items_per_second"]
        )
    _, interp, variant, what = row["numerator"].split("/")
    e = data["e2e"][interp]["variants"][variant]
    if kind == "e2e_median":
        den = row["denominator"].split("/")[-1]
        return e["pyperf"][what]["median"] / e["pyperf"][den]["median"]
    if kind == "count":
        big = e["counts"]["burst_big"]
        return big["pending_calls"] / big["payloads"]
    raise AssertionError(f"unknown kind {kind}")


def mismatches(page_html: str, data: dict) -> list[str]:
    """Every difference between the page's headline table and the JSON."""
    rows = headline_rows(page_html)
    if not rows:
        return ["no headline table on the page"]
    header, body = rows[0], rows[1:]
    problems = []
    if header[:3] != ["measure", "ratio", "target"]:
        problems.append(f"header {header}")
    if len(body) != len(data["headline"]):
        problems.append(f"{len(body)} rows on the page, {len(data['headline'])} in the JSON")
    for cells, row in zip(body, data["headline"], strict=False):
        value = expected_ratio(data, row)
        shown = (
            f"{value:.2e}"
            if row["kind"] == "count" and value
            else ("0" if row["kind"] == "count" else f"{value:.2f}")
        )
        if cells[0] != row["measure"]:
            problems.append(f"measure {cells[0]!r} != {row['measure']!r}")
        if cells[1] != shown:
            problems.append(f"{row['measure']}: page shows {cells[1]}, the raw rows give {shown}")
        if cells[2] != row["target"]:
            problems.append(f"{row['measure']}: target {cells[2]!r} != {row['target']!r}")
        if row["target"]:
            op, bound = row["target"].split()[:2]
            met = value <= float(bound) if op == "<=" else value >= float(bound)
            if not cells[3].startswith("met" if met else "missed"):
                problems.append(
                    f"{row['measure']}: outcome {cells[3]!r}, but {shown} {op} {bound} is {met}"
                )
    return problems


def test_headline_table_matches_committed_json(page):
    data = json.loads(DATA.read_text())
    assert data["headline"], "the committed JSON has no headline rows"
    assert mismatches(page, data) == []


def test_the_comparison_catches_a_changed_figure(page):
    data = json.loads(DATA.read_text())
    tampered = copy.deepcopy(data)
    tampered["core"]["floor/treiber_push"]["ns_per_item"] *= (
        1.5  # as if the page showed an older run
    )
    assert any("page shows" in p for p in mismatches(page, tampered))
    fewer = copy.deepcopy(data)
    fewer["headline"].pop()
    assert mismatches(page, fewer) != []


def test_page_names_machine_compiler_interpreters_and_shows_plots(page):
    data = json.loads(DATA.read_text())
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert data["machine"]["compiler"] in text
    assert data["machine"]["cpu"] in text
    assert "contention, not parallelism" in text and "shared" in text
    for name, r in data["e2e"].items():
        if "python" in r:
            assert f"CPython {r['python']['version']}" in text, name
    images = re.findall(r'<img[^>]+src="([^"]+\.svg)"', page)
    assert sorted(Path(i).stem.split(".")[0] for i in images) == [
        "curves-cpu",
        "curves-latency",
        "curves-memory",
        "curves-pending_calls",
        "destructor",
        "drain",
        "e2e",
        "producers",
    ]
    for src in images:
        svg = (PAGE.parent / src).read_text(encoding="utf-8")
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg, src
        assert re.search(r'(?:href|src)\s*=\s*"(?:https?:)?//', svg) is None, (
            f"{src} loads something off the site"
        )
        assert "<text" not in svg, f"{src}: text not drawn as paths (would need a font)"


def test_before_after_table_matches_both_runs(page):
    data = json.loads(DATA.read_text())
    before = json.loads((DATA.parent / "bench-before-fast-path.json").read_text())
    parser = _Tables("dc-bench-before-after")
    parser.feed(page)
    body = {r[0]: r[1:] for r in parser.rows[1:]}
    assert "reference" in body

    def ratio(core, v):
        return (
            core[f"destructor/{v}/outstanding"]["ns_per_item"]
            / core["floor/treiber_push"]["ns_per_item"]
        )

    for v, (b, a) in body.items():
        if f"destructor/{v}/outstanding" in before["core"]:
            assert b == f"{ratio(before['core'], v):.2f}", v
        assert a == f"{ratio(data['core'], v):.2f}", v


def test_pending_call_cost_table_shows_every_measured_interpreter(page):
    """The ``Py_AddPendingCall`` cost table has one row per interpreter of each
    committed file, with that file's medians (read here from the JSON, not
    with the docs extension's code)."""
    parser = _Tables("pending-cost")
    parser.feed(page)
    assert parser.rows, "no Py_AddPendingCall cost table on the Performance page"
    body = [" | ".join(r) for r in parser.rows[1:]]
    expected = []
    gpu = json.loads((REPO / "notes" / "gpu" / "pending.json").read_text())
    expected.append((f"CPython {gpu['interpreter']['version']}", gpu))
    two = json.loads((REPO / "notes" / "pending-call-cost" / "all-2core.json").read_text())
    expected += [(f"{n} ({r['interpreter']['version']})", r) for n, r in two["results"].items()]
    assert len(body) == len(expected), body
    for (who, r), row in zip(expected, body, strict=True):
        assert who in row, (who, row)
        assert f"{r['uncontended_batch16']['median_ns']} ns" in row, row
        assert f"{r['racing8']['median_ns']} / {r['racing8']['p99_ns']} ns" in row, row


def _curves_data() -> tuple[dict, str]:
    """The curves the page shows: the GPU host's when collected, else the smoke run."""
    for name in ("curves.json", "curves-2core-smoke.json"):
        if (DATA.parent / name).exists():
            return json.loads((DATA.parent / name).read_text()), name
    raise AssertionError("no curves data under docs/_data")


def test_curves_tables_match_committed_json_and_name_the_machine(page):
    # Recomputed from the raw rows of the JSON, not with the docs extension's code.
    data, name = _curves_data()
    text = html.unescape(re.sub(r"<[^>]+>", "", page)).replace("\u2019", "'")  # smart quotes
    text = " ".join(text.split())
    assert name in text and data["machine"]["cpu"] in text
    assert f"{data['machine']['cores']} cores" in text and data["machine"]["note"] in text
    shown = [v for v in ("reference", "seed", "cuda-core-1.2", "mutexq") if v in data["variants"]]
    parser = _Tables("dc-bench-curve-latency")
    parser.feed(page)
    body = parser.rows[1:]
    assert len(body) == len(data["sizes"])
    for cells, n in zip(body, data["sizes"], strict=True):
        want = []
        for v in shown:
            r = data["variants"][v].get("rows", {}).get(str(n))
            want += (
                [f"{r['latency']['median_us']:.1f}", f"{r['latency']['p99_us']:.1f}"]
                if r
                else [cells[2 + len(want)]] * 2
            )
        assert cells[2:] == want, (n, cells)
    parser = _Tables("dc-bench-curve-pending-calls")
    parser.feed(page)
    for cells, n in zip(parser.rows[1:], data["sizes"], strict=True):
        for cell, v in zip(cells[1:], shown, strict=True):
            c = data["variants"][v].get("rows", {}).get(str(n), {}).get("pending_calls")
            if c:
                assert cell.startswith(f"{c['mean']:.2f} "), (n, v, cell)


def test_the_second_run_measured_the_same_sources_and_its_table_matches(page):
    """docs/_data/bench-repeat.json measured the sources of the committed run
    (the page says so), and the page's repeat table shows both runs' values."""
    base = json.loads(DATA.read_text())
    rep = json.loads((DATA.parent / "bench-repeat.json").read_text())
    a, b = base["provenance"]["sources"], rep["provenance"]["sources"]
    bench_sources = [s for s in a if s.startswith(("include/deferred_cleanup/", "tests/bench/"))]
    assert bench_sources and all(a[s] == b.get(s) for s in bench_sources), "different sources"
    parser = _Tables("dc-bench-repeat")
    parser.feed(page)
    body = parser.rows[1:]
    want = [h for h in base["headline"] if h.get("target")]
    assert len(body) == len(want), body
    other = {h["id"]: h for h in rep["headline"]}
    for cells, h in zip(body, want, strict=True):
        assert cells[2] == f"{expected_ratio(base, h):.2f}", (cells, h["id"])
        assert cells[4] == f"{expected_ratio(rep, other[h['id']]):.2f}", (cells, h["id"])


def _page_text(page_html: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page_html)).split())


def breakdown_mismatches(page_html: str, data: dict) -> list[str]:
    """Every difference between the page's slow-path breakdown and the JSON:
    the table's ratios recomputed from the raw rows, and the sentence on
    ONE_WORD against the reference-no-gate row's ratio and the target."""
    section = data.get("slow_path_breakdown")
    parser = _Tables("dc-bench-breakdown")
    parser.feed(page_html)
    text = _page_text(page_html)
    if section is None:
        problems = [] if "Not measured yet" in text else ["no 'Not measured yet' on the page"]
        if parser.rows:
            problems.append("a breakdown table without a slow_path_breakdown section")
        return problems
    if not parser.rows:
        return ["no breakdown table on the page"]
    core = data["core"]
    clock = core["clock/steady_clock_pair"]["ns_per_item"]

    def slow(v: str) -> float:
        return core[f"batch16/destructor/{v}/none"]["ns_per_item"] - clock

    def fast(v: str) -> float:
        return core[f"destructor/{v}/outstanding"]["ns_per_item"]

    base = section["base"]
    body = parser.rows[1:]
    problems = []
    if [c[0] for c in body] != [r["variant"] for r in section["rows"]]:
        problems.append(f"rows {[c[0] for c in body]} != {[r['variant'] for r in section['rows']]}")
    for cells in body:
        v = cells[0]
        want = [f"{slow(v) / slow(base):.2f}", f"{fast(v) / fast(base):.2f}"]
        if [cells[3], cells[5]] != want:
            problems.append(f"{v}: page shows {[cells[3], cells[5]]}, the raw rows give {want}")
    no_gate = slow("reference-no-gate") / slow(base)
    bound = float(section["target"].split()[1])
    # (Sphinx's smart quotes make the apostrophe typographic.)
    m = re.search(r"Without the gate the reference.s slow path takes (\d+\.\d\d)× the", text)
    if not m:
        problems.append("no sentence on ONE_WORD's bound")
    else:
        if m.group(1) != f"{no_gate:.2f}":
            problems.append(f"the sentence says {m.group(1)}×, the raw rows give {no_gate:.2f}×")
        verdict = "cannot meet the target" if no_gate > bound else "does not decide"
        if verdict not in text[m.start() : m.start() + 400]:
            problems.append(f"the sentence does not say {verdict!r} for {no_gate:.2f} vs {bound}")
    return problems


def test_slow_path_breakdown_matches_committed_json_or_says_not_measured(page):
    data = json.loads(DATA.read_text())
    assert breakdown_mismatches(page, data) == []
    why = _Tables("dc-bench-breakdown-why")
    why.feed(page)
    checks = {c for row in why.rows[1:] for c in row if c.startswith("tests/model/run.py::")}
    assert checks == {"tests/model/run.py::no_gate", "tests/model/run.py::no_rearm"}, why.rows


def one_producer_mismatches(page_html: str, data: dict) -> list[str]:
    """Every difference between the page's one-producer breakdown and the
    JSON: the table's ratios recomputed from the raw rows, and the generated
    sentence's ratio and verdict against the reference's row and the target."""
    section = data.get("one_producer_breakdown")
    parser = _Tables("dc-bench-one-producer")
    parser.feed(page_html)
    text = _page_text(page_html)
    if section is None:
        problems = (
            []
            if "has no one_producer_breakdown section" in text
            else ["no 'not measured yet' for the one-producer breakdown on the page"]
        )
        if parser.rows:
            problems.append("a one-producer table without a one_producer_breakdown section")
        return problems
    if not parser.rows:
        return ["no one-producer table on the page"]
    core = data["core"]
    floor = core["mt/treiber_push/threads:1"]["items_per_second"]
    body = parser.rows[1:]
    problems = []
    if [c[0] for c in body] != [r["variant"] for r in section["rows"]]:
        problems.append(f"rows {[c[0] for c in body]} != {[r['variant'] for r in section['rows']]}")
    ratio = {}
    for cells in body:
        v = cells[0]
        # A run with the paired rows (tests/bench/bench_core.cpp's BM_ProducersPaired):
        # their floor_ratio, the floor timed beside the row; an older run: the
        # quotient of the separate mt/ rows.
        paired = core.get(f"paired/mt/destructor/{v}/threads:1", {}).get("counters", {})
        ratio[v] = (
            paired["floor_ratio"]
            if "floor_ratio" in paired
            else core[f"mt/destructor/{v}/threads:1"]["items_per_second"] / floor
        )
        if cells[3] != f"{ratio[v]:.2f}":
            problems.append(f"{v}: page shows {cells[3]}, the raw rows give {ratio[v]:.2f}")
    bound = float(section["target"].split()[1])
    # (Sphinx's smart quotes make the apostrophe typographic.)
    m = re.search(
        r"At one producer the reference reaches (\d+\.\d+)× the bare Treiber push.s "
        r"throughput, (meeting|missing) the target",
        text,
    )
    if not m or "reference" not in ratio:
        problems.append("no sentence on the reference's one-producer ratio")
    else:
        if abs(float(m.group(1)) - ratio["reference"]) > 0.006:
            problems.append(
                f"the sentence says {m.group(1)}×, the raw rows give {ratio['reference']}"
            )
        want = "meeting" if ratio["reference"] >= bound else "missing"
        if m.group(2) != want:
            problems.append(f"the sentence says {m.group(2)!r}, the raw rows say {want!r}")
    return problems


def test_one_producer_breakdown_matches_committed_json_or_says_not_measured(page):
    data = json.loads(DATA.read_text())
    assert one_producer_mismatches(page, data) == []
    why = _Tables("dc-bench-one-producer-why")
    why.feed(page)
    records = {c for row in why.rows[1:] for c in row if c.startswith("tests/")}
    assert records == {
        "tests/model/run.py::no_rearm",
        "tests/litmus/wakeup_fast_sb_push_release.litmus",
        "tests/litmus/wakeup_fast_sb_check_acquire.litmus",
    }, why.rows


# Each breakdown section: its key in bench.json, the check of the page
# against it, one raw row it reads (and that row's field), and a section the
# page would have to show when the committed run has none.
BREAKDOWN_SECTIONS = [
    pytest.param(
        "slow_path_breakdown",
        breakdown_mismatches,
        ("batch16/destructor/reference-no-gate/none", "ns_per_item"),
        {"base": "cuda-core-1.2", "target": "<= 1.0", "rows": []},
        id="slow-path",
    ),
    pytest.param(
        "one_producer_breakdown",
        one_producer_mismatches,
        ("mt/destructor/reference-no-rearm/threads:1", "items_per_second"),
        {"target": ">= 0.9", "rows": []},
        id="one-producer",
    ),
]


@pytest.mark.parametrize("key,mismatches,raw,stub", BREAKDOWN_SECTIONS)
def test_the_breakdown_comparison_catches_a_changed_or_missing_section(
    page, key, mismatches, raw, stub
):
    data = json.loads(DATA.read_text())
    if key in data:
        tampered = copy.deepcopy(data)
        row, field = raw
        paired = tampered["core"].get(f"paired/{row}", {}).get("counters", {})
        if "floor_ratio" in paired:
            # A run with the paired rows: the page's ratio is the paired row's own.
            paired["floor_ratio"] *= 1.5
        else:
            tampered["core"][row][field] *= 1.5
        assert any("raw rows give" in p for p in mismatches(page, tampered))
        gone = copy.deepcopy(data)
        del gone[key]
        assert mismatches(page, gone) != []
    else:
        # The page says "not measured yet"; a section it does not show is caught.
        claimed = copy.deepcopy(data)
        claimed[key] = stub
        assert mismatches(page, claimed) != []

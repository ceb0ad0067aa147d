# SPDX-License-Identifier: Apache-2.0
"""Sphinx directives for the Performance page: tables and plots rendered at
build time from the committed benchmark results ``docs/_data/bench.json``
(``build/bench/bench.json`` of a ``make bench`` run on the GPU host's 16
cores, through tools/gpu_session.sh).  ``bench-machine`` and ``bench-e2e``
take an optional file name under docs/_data (``bench-2core-smoke.json``: the
2-core smoke run, which has the end-to-end rows).

* ``.. bench-machine:: [FILE]``  the machine, compiler, library, interpreters
  and the provenance stamp (with the stamped sources changed since, if any);
* ``.. bench-shared-line::`` the reference's producer throughput with the
  queue's contended fields on lines of their own and on one line
  (``bench-shared-line.json``);
* ``.. bench-headline::`` the headline ratios (class ``dc-bench-headline``);
* ``.. bench-core::``     every C++ microbenchmark row;
* ``.. bench-e2e::``      the end-to-end rows, one per interpreter and variant;
* ``.. bench-before-after::`` the destructor path's ratio to the floor with
  the core before the reference's fast path (``bench-before-fast-path.json``,
  the C++ rows of its own run) and in the committed run;
* ``.. bench-plot:: NAME`` an SVG plot made with matplotlib (Agg backend, text
  as paths, no date in the file: offline and reproducible); NAME is one of
  ``destructor``, ``producers``, ``drain``, ``e2e``;
* ``.. bench-drain-curve::`` the table under the ``drain`` plot: ns per item
  of every drain, direct and floor row, per size (10^2 to 10^7);
* ``.. bench-one-producer-breakdown::`` the one-producer breakdown
  (bench.json's ``one_producer_breakdown``, class ``dc-bench-one-producer``),
  the sentences generated from it (tools/bench.py ``one_producer_reason``),
  and beside each removed piece the model check or litmus file that says what
  goes wrong without it (class ``dc-bench-one-producer-why``); "not measured
  yet" when the committed run lacks the section.
* ``.. bench-slow-path-breakdown::`` the slow-path breakdown (bench.json's
  ``slow_path_breakdown``, class ``dc-bench-breakdown``), the sentence that
  bounds the one-state-word candidate from it (:func:`one_word_bound`), and
  for each removed piece the model check that fails without it (class
  ``dc-bench-breakdown-why``, read from tests/model/run.py); "not measured
  yet" while the committed run lacks the section;
* ``.. bench-curves-machine::`` which machine measured the curves shown, and
  their provenance stamp;
* ``.. bench-curve:: NAME`` one curve of ``tests/bench/curves.py`` as a plot
  with its table under it (NAME: ``latency``, ``pending_calls``, ``cpu``,
  ``memory``), from ``docs/_data/curves.json`` (the GPU host's run, collected
  by tools/gpu_collect.sh) or, while there is none, from
  ``docs/_data/curves-2core-smoke.json`` (the 2-core smoke run).

The numbers are formatted by :func:`fmt_ratio` and :func:`verdict`, which
``tests/test_bench_docs.py`` does not reuse: it recomputes each ratio from the
raw rows of the JSON and compares with the built page.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "_data" / "bench.json"
BEFORE = REPO / "docs" / "_data" / "bench-before-fast-path.json"
PLOTS = REPO / "build" / "docs" / "bench_plots"
VARIANTS = ["reference", "seed", "cuda-core-1.2"]
CURVES = DATA.parent / "curves.json"
CURVES_SMOKE = DATA.parent / "curves-2core-smoke.json"
#: The curves' series: tests/bench/curves.py's variants, the mutex queue last.
CURVE_SERIES = [*VARIANTS, "mutexq"]
CURVE_LABELS = {"mutexq": "mutex queue (greenlet's shape)"}
#: The drain curve's rows: (label, row prefix in bench.json).
DRAIN_SERIES = [(v, f"drain/{v}") for v in VARIANTS] + [
    ("mutex + vector", "drain/mutex_vector"),
    ("floor: one exchange, one walk", "floor/drain"),
    ("floor reversed first", "floor/drain_reversed"),
    ("cleanups run directly", "direct"),
]


def load(name: str | None = None) -> dict:
    """The committed results (``name``: a file under docs/_data, default
    bench.json); an ExtensionError that says how to make them."""
    path = DATA.parent / name if name else DATA
    if not path.exists():
        raise ExtensionError(
            f"{path} is missing: run `make bench` and copy build/bench/bench.json there"
        )
    return json.loads(path.read_text())


def provenance_line(data: dict) -> str:
    """What the stamp says, and which stamped sources changed since (tools/provenance.py)."""
    st = data.get("provenance")
    if not st:
        return "* **Provenance**: none recorded (a run from before stamps)."
    from dc_scripts import import_tool

    changed = import_tool("provenance").changed(st, REPO)
    text = (
        "* **Provenance**: measured at commit "
        f"``{st['commit'][:12]}``{' (uncommitted changes)' if st['dirty'] else ''}; "
        f"sources ``{'``, ``'.join(st['globs'])}``, sha256 ``{st['sources_sha256'][:16]}``. "
    )
    text += (
        "Since then these changed: " + ", ".join(f"``{c}``" for c in changed) + "."
        if changed
        else "None of them has changed since."
    )
    return text


def fmt_ratio(row: dict) -> str:
    """A headline value as the page shows it."""
    v = row["value"]
    if v is None:
        return "n/a"
    if row["kind"] == "count":
        return f"{v:.2e}" if v else "0"
    return f"{v:.2f}"


def verdict(row: dict) -> str:
    if row.get("ok") is None:
        return ""
    if row["ok"]:
        return "met"
    op, bound = row["target"].split()[:2]
    b = float(bound)
    miss = (row["value"] - b) / b if op == "<=" else (b - row["value"]) / b
    return f"missed by {100 * miss:.1f}%"


def _esc(text: str) -> str:
    return str(text).replace("*", r"\*").replace("|", r"\|").replace("`", r"\`")


def list_table(
    header: list[str], rows: list[list[str]], cls: str, widths: str | None = None
) -> list[str]:
    out = [".. list-table::", "   :header-rows: 1", f"   :class: {cls}"]
    if widths:
        out.append(f"   :widths: {widths}")
    out.append("")
    for r in [header, *rows]:
        out.append(f"   * - {_esc(r[0]) or ' '}")
        out += [f"     - {_esc(c) or ' '}" for c in r[1:]]
    out.append("")
    return out


class _BenchDirective(SphinxDirective):
    has_content = False
    optional_arguments = 1

    def lines(self, data: dict) -> list[str]:
        raise NotImplementedError

    def run(self):
        name = self.arguments[0] if self.arguments else None
        data = load(name)
        self.env.note_dependency(str(DATA.parent / name) if name else str(DATA))
        self.env.note_dependency(str(REPO / "tools" / "provenance.py"))
        node = nodes.container()
        self.state.nested_parse(
            StringList(self.lines(data), source=str(DATA)), self.content_offset, node
        )
        return node.children


class BenchMachine(_BenchDirective):
    def lines(self, data):
        m = data["machine"]
        interps = []
        for name, r in data.get("e2e", {}).items():
            if "python" in r:
                p = r["python"]
                interps.append(
                    f"{name} (CPython {p['version']}{', debug build' if p.get('debug') else ''}, "
                    f"built with {p.get('compiler', '?')})"
                )
            else:
                interps.append(f"{name} (missing: {r.get('missing', '?')})")
        text = [
            f"* **Machine**: {m['cpu']}, {m['cores']} cores; {m['os']}, Linux {m['kernel']}; "
            f"{m['shared']}; "
            f"load average (1, 5, 15 minutes) when the C++ rows were taken: "
            f"{', '.join(str(x) for x in m['load_average'] or ['not recorded'])}.",
            f"* **Compiler**: {m['compiler']}, ``-O3`` (CMake Release); Google Benchmark "
            f"{m['google_benchmark']} "
            "(Debian's ``libbenchmark-dev``, which warns that the library was built as DEBUG: "
            "that concerns "
            "its compiled functions, such as pausing the timer, not the timed loops, which are "
            "inline and "
            "built with ``-O3`` here).",
            f"* **Interpreters**: {'; '.join(interps) if interps else 'none (C++ only)'}.",
            f"* **Run**: {m['date_utc']}, commit ``{m['commit']}``.",
            provenance_line(data),
            "",
        ]
        return text


class BenchHeadline(_BenchDirective):
    def lines(self, data):
        rows = [
            [h["measure"], fmt_ratio(h), h.get("target", ""), verdict(h)] for h in data["headline"]
        ]
        return list_table(
            ["measure", "ratio", "target", "outcome"], rows, "dc-bench-headline", "70 10 12 8"
        )


class BenchCore(_BenchDirective):
    def lines(self, data):
        rows = []
        for name, r in data["core"].items():
            c = r["counters"]
            keep = ", ".join(
                f"{k}={v:g}"
                for k, v in sorted(c.items())
                if isinstance(v, (int, float)) and k not in ("items", "batch", "threads", "burst")
            )
            rows.append(
                [
                    f"``{name}``",
                    f"{r['ns_per_item']:.2f}",
                    f"{r['items_per_second'] / 1e6:.1f}",
                    keep,
                ]
            )
        out = list_table(
            ["benchmark", "ns per item", "M items/s", "counters"],
            rows,
            "dc-bench-core",
            "40 12 12 36",
        )
        # list_table escapes backquotes; literal names read better
        return [line.replace(r"\`\`", "``") for line in out]


class BenchE2E(_BenchDirective):
    def lines(self, data):
        rows = []
        for name, r in data.get("e2e", {}).items():
            if "python" not in r:
                rows.append([name, "", f"missing: {r.get('missing', '?')}", "", "", "", "", ""])
                continue
            for v, e in r["variants"].items():
                if "missing" in e:
                    rows.append([name, v, "not in this build", "", "", "", "", ""])
                    continue
                pp, c = e.get("pyperf", {}), e.get("counts", {})

                def ms(k, pp=pp):
                    return f"{pp[k]['median'] * 1e3:.1f}" if k in pp else "—"

                def calls(k, c=c):
                    if k not in c:
                        return "—"
                    return ("starved" if c[k].get("starved") else "") + f" {c[k]['pending_calls']}"

                entry = (
                    ms("burst_entry")
                    if "burst_entry" in pp
                    else (
                        "starved" if c.get("burst_entry", {}).get("starved") else ms("burst_entry")
                    )
                )
                rows.append(
                    [
                        name,
                        v,
                        ms("burst_pending"),
                        entry,
                        ms("consume_queue"),
                        ms("consume_direct"),
                        calls("burst_pending").strip(),
                        calls("burst_big").strip(),
                    ]
                )
        return list_table(
            [
                "interpreter",
                "variant",
                "burst, pending calls (ms)",
                "burst, entry point (ms)",
                "consumer via queue (ms CPU)",
                "cleanups directly (ms CPU)",
                "pending calls per 10^5 burst",
                "pending calls per 10^6 burst",
            ],
            rows,
            "dc-bench-e2e",
        )


class BenchSharedLine(_BenchDirective):
    """The reference's producer throughput, queue fields on lines of their own / on one line."""

    def lines(self, data):
        data = load("bench-shared-line.json")
        self.env.note_dependency(str(DATA.parent / "bench-shared-line.json"))
        core = data["core"]
        rows = []
        for t in (1, 2, 4, 8, 12, 16):
            a, b = (
                f"mt/destructor/reference/threads:{t}",
                f"shared_line/mt/destructor/reference/threads:{t}",
            )
            f = f"mt/treiber_push/threads:{t}"
            if a in core and b in core:
                ips = [core[k]["items_per_second"] / 1e6 for k in (a, b, f)]
                rows.append(
                    [
                        str(t),
                        f"{ips[0]:.1f}",
                        f"{ips[1]:.1f}",
                        f"{ips[0] / ips[1]:.2f}",
                        f"{ips[2]:.1f}",
                        f"{ips[0] / ips[2]:.2f}",
                    ]
                )
        out = list_table(
            [
                "producers",
                "own lines (M items/s)",
                "one line (M items/s)",
                "own / one",
                "bare Treiber push (M items/s)",
                "own lines / Treiber",
            ],
            rows,
            "dc-bench-shared-line",
        )
        m, st = data["machine"], data["provenance"]
        what = re.sub(
            r"\b(\w+_)(?=[\s,)])", r"``\1``", data["what"]
        )  # head_ etc. are not link targets
        out += [
            f"{what}. {m['cpu']}, {m['cores']} cores, {m['date_utc']}; measured at commit "
            f"``{st['commit'][:12]}``.",
            "",
        ]
        return out


def fast_path_ratio(core: dict, variant: str) -> float | None:
    """destructor/<variant>/outstanding over floor/treiber_push, or None."""
    num = core.get(f"destructor/{variant}/outstanding")
    return num["ns_per_item"] / core["floor/treiber_push"]["ns_per_item"] if num else None


class BenchBeforeAfter(_BenchDirective):
    def lines(self, data):
        if not BEFORE.exists():
            raise ExtensionError(f"{BEFORE} is missing")
        self.env.note_dependency(str(BEFORE))
        before = json.loads(BEFORE.read_text())
        rows = []
        for v in VARIANTS:
            b, a = fast_path_ratio(before["core"], v), fast_path_ratio(data["core"], v)
            if a is None and b is None:
                continue
            rows.append(
                [
                    v,
                    "not in that core" if b is None else f"{b:.2f}",
                    "—" if a is None else f"{a:.2f}",
                ]
            )
        head = [
            "variant",
            f"before (commit {before['machine']['commit']})",
            f"committed run (commit {data['machine']['commit']})",
        ]
        return list_table(head, rows, "dc-bench-before-after")


class BenchRepeat(_BenchDirective):
    """``.. bench-repeat:: FILE``: each targeted headline ratio of the
    committed run (docs/_data/bench.json) beside the same ratio of a second
    run of the same benchmarks (FILE under docs/_data), with each one's
    outcome (class ``dc-bench-repeat``)."""

    def lines(self, data):
        base = load()
        self.env.note_dependency(str(DATA))
        rep = {h["id"]: h for h in data["headline"]}
        rows = []
        for h in base["headline"]:
            r = rep.get(h["id"])
            if not h.get("target") or r is None:
                continue
            change = (
                f"{100 * (r['value'] / h['value'] - 1):+.0f}%" if h["value"] and r["value"] else ""
            )
            rows.append(
                [
                    h["measure"],
                    h["target"],
                    fmt_ratio(h),
                    verdict(h),
                    fmt_ratio(r),
                    verdict(r),
                    change,
                ]
            )
        head = [
            "measure",
            "target",
            # Seven hex digits, as git's short form: the table must fit the page's width.
            f"committed run ({base['machine']['commit'][:7]})",
            "outcome",
            f"second run ({data['machine']['commit'][:7]})",
            "outcome",
            "change",
        ]
        return list_table(head, rows, "dc-bench-repeat", "40 8 10 10 10 10 8")


# ------------------------------------------------------------ plots
def _plot(name: str, data: dict) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {"svg.hashsalt": f"dc-bench-{name}", "svg.fonttype": "path", "font.size": 9}
    )
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    core = data["core"]
    variants = [v for v in VARIANTS if f"destructor/{v}/outstanding" in core]
    if name == "destructor":
        clock = core["clock/steady_clock_pair"]["ns_per_item"]
        labels, outst, none = [], [], []
        for label, a, b in (
            [("bare Treiber push", "floor/treiber_push", "batch16/floor/treiber_push")]
            + [(v, f"destructor/{v}/outstanding", f"batch16/destructor/{v}/none") for v in variants]
            + [("mutex + vector", "mutex_vector/outstanding", "batch16/mutex_vector/none")]
        ):
            labels.append(label)
            outst.append(core[a]["ns_per_item"])
            none.append(core[b]["ns_per_item"] - clock)
        x = range(len(labels))
        ax.bar([i - 0.2 for i in x], outst, 0.4, label="pending call outstanding (wake flag set)")
        ax.bar([i + 0.2 for i in x], none, 0.4, label="none outstanding (host called)")
        ax.set_xticks(list(x), labels)
        ax.set_ylabel("ns per destructor call")
        ax.set_title("Destructor path, one producer")
    elif name == "producers":
        for label, prefix in [
            ("bare Treiber push", "mt/treiber_push"),
            ("mutex + vector", "mt/mutex_vector"),
        ] + [(v, f"mt/destructor/{v}") for v in variants]:
            ts = [t for t in (1, 2, 4, 8, 12, 16) if f"{prefix}/threads:{t}" in core]
            ax.plot(
                ts,
                [core[f"{prefix}/threads:{t}"]["items_per_second"] / 1e6 for t in ts],
                marker="o",
                label=label,
            )
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 2, 4, 8, 12, 16], ["1", "2", "4", "8", "12", "16"])
        ax.axvline(data["machine"]["cores"], color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel(
            (
                f"producer threads (dotted: {data['machine']['cores']} cores; beyond it, "
                "contention only)"
            )
        )
        ax.set_ylabel("M items/s (wall clock)")
        ax.set_title("Producers pushing into one queue, a pending call outstanding")
    elif name == "drain":
        for label, prefix in DRAIN_SERIES:
            ns = drain_sizes(core, prefix)
            if not ns:
                continue
            style = ":" if prefix.startswith(("floor/", "direct")) else "-"
            ax.plot(
                ns,
                [core[f"{prefix}/{n}"]["ns_per_item"] for n in ns],
                marker="o",
                linestyle=style,
                label=label,
            )
        ax.set_xscale("log")
        ax.set_ylim(bottom=0)
        ax.set_xlabel("items queued")
        ax.set_ylabel("ns per item")
        ax.set_title("Consumer: the pending call draining N items, next to its floors")
    elif name == "e2e":
        data = load("bench-2core-smoke.json")  # the only run with end-to-end rows
        names = [n for n, r in data.get("e2e", {}).items() if "python" in r]
        width = 0.8 / max(1, len(VARIANTS))
        for j, v in enumerate(VARIANTS):
            xs, ys = [], []
            for i, n in enumerate(names):
                pp = data["e2e"][n]["variants"].get(v, {}).get("pyperf", {})
                if "burst_pending" in pp:
                    xs.append(i + (j - (len(VARIANTS) - 1) / 2) * width)
                    ys.append(pp["burst_pending"]["median"] * 1e3)
            if xs:
                ax.bar(xs, ys, width, label=v)
        ax.set_xticks(list(range(len(names))), names, rotation=30, ha="right")
        ax.set_ylabel("ms, release to last cleanup")
        ax.set_title("Burst of 10^5 payloads from 8 driver threads (pending calls)")
    else:
        raise ExtensionError(f"bench-plot: unknown plot {name!r}")
    ax.legend(fontsize=8)
    ax.grid(axis="y", linewidth=0.3)
    fig.tight_layout()
    PLOTS.mkdir(parents=True, exist_ok=True)
    out = PLOTS / f"{name}.svg"
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    return out


class BenchPlot(SphinxDirective):
    required_arguments = 1
    has_content = True

    def run(self):
        data = load()
        self.env.note_dependency(str(DATA))
        path = _plot(self.arguments[0], data)
        doc_dir = Path(self.env.doc2path(self.env.docname)).parent
        rel = os.path.relpath(path, doc_dir)
        lines = [
            f".. figure:: {rel}",
            f"   :alt: {self.arguments[0]} plot",
            "   :class: dc-bench-plot",
            "",
        ]
        lines += [f"   {line}" for line in self.content]
        node = nodes.container()
        self.state.nested_parse(StringList(lines, source=str(DATA)), self.content_offset, node)
        return node.children


def drain_sizes(core: dict, prefix: str) -> list[int]:
    """The sizes N of the rows ``PREFIX/N`` in ``core``, ascending."""
    return sorted(
        int(k.rsplit("/", 1)[1])
        for k in core
        if k.rsplit("/", 1)[0] == prefix and k.rsplit("/", 1)[1].isdigit()
    )


def pow10(n: int) -> str:
    """``10^k`` for a power of ten from 100 on, else the number."""
    k = len(str(n)) - 1
    return f"10^{k}" if n >= 100 and n == 10**k else str(n)


class BenchDrainCurve(_BenchDirective):
    """ns per item of each drain, floor and direct row, one line per size."""

    def lines(self, data):
        core = data["core"]
        series = [(label, p) for label, p in DRAIN_SERIES if drain_sizes(core, p)]
        sizes = sorted({n for _, p in series for n in drain_sizes(core, p)})
        rows = [
            [pow10(n)]
            + [
                f"{core[f'{p}/{n}']['ns_per_item']:.2f}" if f"{p}/{n}" in core else "—"
                for _, p in series
            ]
            for n in sizes
        ]
        return list_table(
            ["items", *[f"{label} (ns per item)" for label, _ in series]],
            rows,
            "dc-bench-drain-curve probe-matrix",
        )


def load_curves() -> tuple[dict, Path]:
    """The curves shown: the GPU host's ``curves.json`` when collected, else
    the 2-core smoke run; an ExtensionError when neither exists."""
    for path in (CURVES, CURVES_SMOKE):
        if path.exists():
            return json.loads(path.read_text()), path
    raise ExtensionError(
        f"{CURVES_SMOKE} is missing: run `python3 tests/bench/curves.py all --out` there"
    )


def curve_label(v: str) -> str:
    return CURVE_LABELS.get(v, v)


def curve_rows(data: dict, name: str) -> tuple[list[str], list[list[str]]]:
    """The table of one curve: (header, rows), formatted as the page shows them."""
    vs = [v for v in CURVE_SERIES if v in data["variants"]]
    sizes = data["sizes"]

    def cell(v, n, f):
        if "rows" not in data["variants"][v]:
            return "missing"
        r = data["variants"][v]["rows"].get(str(n))
        return f(r) if r else "—"

    if name == "latency":

        def bursts(n):
            got = {
                data["variants"][v]["rows"][str(n)]["latency"]["bursts"]
                for v in vs
                if str(n) in data["variants"][v].get("rows", {})
            }
            return "/".join(str(b) for b in sorted(got)) or "—"

        head = ["burst", "bursts measured"] + [
            f"{curve_label(v)}: {q} (µs)" for v in vs for q in ("median", "p99")
        ]
        rows = [
            [pow10(n), bursts(n)]
            + [
                cell(v, n, lambda r, q=q: f"{r['latency'][q]:.1f}")
                for v in vs
                for q in ("median_us", "p99_us")
            ]
            for n in sizes
        ]
    elif name == "pending_calls":

        def calls(r):
            c = r["pending_calls"]
            if c is None:
                return "not counted"
            return f"{c['mean']:.2f} ({c['min']}–{c['max']})"

        head = ["burst"] + [f"{curve_label(v)}: mean (min–max)" for v in vs]
        rows = [[pow10(n)] + [cell(v, n, calls) for v in vs] for n in sizes]
    elif name == "cpu":
        head = ["burst"] + [
            f"{curve_label(v)}: {q} (ns per payload)" for v in vs for q in ("CPU", "drain wall")
        ]
        rows = [
            [pow10(n)]
            + [
                cell(v, n, lambda r, q=q: f"{r['cpu'][q]:.0f}")
                for v in vs
                for q in ("ns_per_payload", "drain_wall_ns_per_payload")
            ]
            for n in sizes
        ]
    elif name == "memory":
        n = sizes[-1]
        head = ["variant", f"RSS growth per queued payload, burst of {pow10(n)} (bytes)"]
        rows = [
            [curve_label(v), cell(v, n, lambda r: f"{r['rss_bytes_per_payload']:.1f}")] for v in vs
        ]
    else:
        raise ExtensionError(f"bench-curve: unknown curve {name!r}")
    return head, rows


def _curve_plot(name: str, data: dict) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {"svg.hashsalt": f"dc-curves-{name}", "svg.fonttype": "path", "font.size": 9}
    )
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    vs = [v for v in CURVE_SERIES if "rows" in data["variants"].get(v, {})]
    sizes = data["sizes"]
    if name == "memory":
        n = str(sizes[-1])
        ys = [data["variants"][v]["rows"][n]["rss_bytes_per_payload"] for v in vs]
        ax.bar(range(len(vs)), ys, 0.6)
        ax.set_xticks(list(range(len(vs))), [curve_label(v).replace(" (", "\n(") for v in vs])
        ax.set_ylabel("bytes per queued payload (RSS)")
        ax.set_title(f"Memory per queued payload, burst of {pow10(int(n))}")
    else:
        for i, v in enumerate(vs):
            color = f"C{i}"  # one colour per variant, whatever it draws
            rows = data["variants"][v]["rows"]
            xs = [n for n in sizes if str(n) in rows]
            if name == "latency":
                for q, style in (("median_us", "-"), ("p99_us", ":")):
                    ax.plot(
                        xs,
                        [rows[str(n)]["latency"][q] for n in xs],
                        marker="o",
                        linestyle=style,
                        color=color,
                        label=f"{curve_label(v)} ({'median' if q == 'median_us' else 'p99'})",
                    )
            elif name == "pending_calls":
                if rows[str(xs[0])]["pending_calls"] is None:
                    continue
                ax.plot(
                    xs,
                    [rows[str(n)]["pending_calls"]["mean"] for n in xs],
                    marker="o",
                    color=color,
                    label=v,
                )
            elif name == "cpu":
                ax.plot(
                    xs,
                    [rows[str(n)]["cpu"]["ns_per_payload"] for n in xs],
                    marker="o",
                    color=color,
                    label=curve_label(v),
                )
            else:
                raise ExtensionError(f"bench-curve: unknown curve {name!r}")
        ax.set_xscale("log")
        ax.set_xlabel(f"payloads per burst, released from up to {data['threads']} native threads")
        if name == "latency":
            ax.set_yscale("log")
            ax.set_ylabel("µs, release to cleanup")
            ax.set_title("Latency from the burst's release to each cleanup on the main thread")
        elif name == "pending_calls":
            ax.set_ylim(bottom=0)
            ax.set_ylabel("pending calls per burst (mean)")
            ax.set_title("Pending calls per burst")
        else:
            ax.set_yscale("log")
            ax.set_ylabel("ns of main-thread CPU per payload")
            ax.set_title("Main thread's CPU per released payload")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    ax.grid(axis="y", linewidth=0.3)
    fig.tight_layout()
    PLOTS.mkdir(parents=True, exist_ok=True)
    out = PLOTS / f"curves-{name}.svg"
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    return out


class BenchCurve(SphinxDirective):
    """One curve: its plot, then its table (class ``dc-bench-curve-NAME``)."""

    required_arguments = 1
    has_content = True

    def run(self):
        data, path = load_curves()
        self.env.note_dependency(str(path))
        name = self.arguments[0]
        plot = _plot_path(self, _curve_plot(name, data))
        lines = [f".. figure:: {plot}", f"   :alt: {name} curve", "   :class: dc-bench-plot", ""]
        lines += [f"   {line}" for line in self.content]
        lines.append("")
        head, rows = curve_rows(data, name)
        # probe-matrix: wide tables scroll with their first column frozen (docs/_static/dc.css)
        lines += list_table(head, rows, f"dc-bench-curve-{name.replace('_', '-')} probe-matrix")
        node = nodes.container()
        self.state.nested_parse(StringList(lines, source=str(path)), self.content_offset, node)
        return node.children


class BenchCurvesMachine(SphinxDirective):
    """Which machine measured the curves shown, with the stamp."""

    def run(self):
        data, path = load_curves()
        self.env.note_dependency(str(path))
        self.env.note_dependency(str(REPO / "tools" / "provenance.py"))
        m = data["machine"]
        pys = sorted({r["python"] for r in data["variants"].values() if "python" in r})
        missing = [
            f"{curve_label(v)} ({r['missing']})"
            for v, r in data["variants"].items()
            if "missing" in r
        ]
        lines = [
            f"* **Data**: ``docs/_data/{path.name}``"
            + (" (sizes of the smoke run)" if data.get("smoke") else "")
            + ".",
            f"* **Machine**: {m['cpu']}, {m['cores']} cores, Linux {m['kernel']}; "
            f"{m.get('note') or 'no note'}; load average at the start "
            f"{', '.join(str(x) for x in m['load_average'])}; {m['date_utc']}.",
            f"* **Interpreter**: CPython {', '.join(pys) or '?'}; up to {data['threads']} "
            "release threads per burst.",
        ]
        if missing:
            lines.append(f"* **Not measured**: {'; '.join(missing)}.")
        stalls = {
            curve_label(v): sum(row["stalls"] for row in r["rows"].values())
            for v, r in data["variants"].items()
            if "rows" in r
        }
        stall_s = f" (no payload released for {data['stall_s']:g} s)" if "stall_s" in data else ""
        lines.append(
            f"* **Stalls**{stall_s}: "
            + (", ".join(f"{v}: {k}" for v, k in stalls.items() if k) or "none in any burst")
            + "."
        )
        lines += [provenance_line(data), ""]
        node = nodes.container()
        self.state.nested_parse(StringList(lines, source=str(path)), self.content_offset, node)
        return node.children


def _plot_path(directive: SphinxDirective, path: Path) -> str:
    doc_dir = Path(directive.env.doc2path(directive.env.docname)).parent
    return os.path.relpath(path, doc_dir)


#: The slow-path breakdown's removed pieces, and the model checks
#: (tests/model/run.py) whose failure shows why the reference keeps each.
BREAKDOWN_WHY = [
    ("the in-flight gate", "reference-no-gate", ["no_gate"]),
    ("re-arm (call token, stale clock)", "reference-no-rearm", ["no_rearm"]),
]


def one_word_bound(section: dict) -> str:
    """tools/bench.py's :func:`one_word_bound` (the page's sentence on the
    one-state-word candidate, generated from the breakdown)."""
    from dc_scripts import import_tool

    return import_tool("bench").one_word_bound(section)


def model_checks() -> dict:
    """tests/model/run.py's checks by name (its CHECKS list), imported
    without running it."""
    import importlib.util
    import sys

    path = REPO / "tests" / "model" / "run.py"
    name = "dc_model_run_for_docs"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return {c.name: c for c in sys.modules[name].CHECKS}


def _run_commit(data: dict) -> str:
    """The commit a bench.json run measured (its provenance stamp, else its
    machine record, else "?"), for the "not measured yet" notes."""
    return (data.get("provenance") or {}).get("commit", "")[:12] or data.get("machine", {}).get(
        "commit", "?"
    )


class BenchSlowPathBreakdown(_BenchDirective):
    """The slow-path breakdown, the one-word bound and the records."""

    def lines(self, data):
        self.env.note_dependency(str(REPO / "tests" / "model" / "run.py"))
        section = data.get("slow_path_breakdown")
        out: list[str] = []
        if not section:
            commit = _run_commit(data)
            out += [
                f"**Not measured yet.** The committed run (commit ``{commit}``) has no "
                "``slow_path_breakdown`` section: its binary predates the breakdown's rows. "
                "Whether ``ONE_WORD`` can meet the target is therefore not measured yet.",
                "",
            ]
        else:
            base = section["base"]
            rows = [
                [
                    r["variant"],
                    r["removed"],
                    f"{r['slow_ns']:.1f}",
                    f"{r['slow_ratio']:.2f}",
                    f"{r['fast_ns']:.2f}",
                    f"{r['fast_ratio']:.2f}",
                    f"{r['host_calls_per_op']:g}" if r.get("host_calls_per_op") is not None else "",
                ]
                for r in section["rows"]
            ]
            out += list_table(
                [
                    "row",
                    "removed from the reference",
                    "slow path, ns per item",
                    f"/ {base}",
                    "fast path, ns per item",
                    f"/ {base}",
                    "host calls per op",
                ],
                rows,
                "dc-bench-breakdown",
                "22 30 10 8 10 8 8",
            )
            out += [one_word_bound(section), ""]
        checks = model_checks()
        why = []
        for piece, variant, names in BREAKDOWN_WHY:
            for n in names:
                c = checks.get(n)
                if c is None:
                    raise ExtensionError(f"tests/model/run.py has no check {n!r} any more")
                outcome = "fails (spin finds an error)" if c.expect_error else "verifies"
                # run.py's own words; a trailing underscore (scheduled_) is not a link
                what = re.sub(r"_(?=\W|$)", r"\\_", c.why)
                why.append([piece, variant, f"tests/model/run.py::{n}", outcome, what])
        out += list_table(
            ["piece", "row without it", "model check", "expected outcome", "what fails"],
            why,
            "dc-bench-breakdown-why",
            "16 18 22 14 30",
        )
        return out


#: The one-producer breakdown's pieces, each row without it, and the record
#: that says what goes wrong without it: ("model", check of
#: tests/model/run.py), ("litmus", file stem of tests/litmus whose herd7
#: verdict tests/test_litmus.py expects), or ("none", why no record is
#: needed).
ONE_PRODUCER_WHY = [
    ("re-arm's sampled check", "reference-no-rearm", ("model", "no_rearm")),
    ("the push's seq_cst", "reference-push-release", ("litmus", "wakeup_fast_sb_push_release")),
    (
        "the fast-path check's seq_cst",
        "reference-check-acquire",
        ("litmus", "wakeup_fast_sb_check_acquire"),
    ),
    (
        "everything after the push",
        "reference-push-only",
        (
            "none",
            "no record needed: a push onto a queue with no call outstanding asks for no "
            "pending call, so its payload waits until some other call drains the queue",
        ),
    ),
]

_LITMUS_ENTRY_RE = re.compile(r'^\s*"(\w+)": \(.*?, "(Always|Sometimes|Never)", \d+\),$', re.M)


def litmus_verdicts() -> dict[str, str]:
    """herd7's verdict that tests/test_litmus.py expects of each litmus file
    (its FILES table, read as text: test_herd7_verdict checks it in
    ``make test`` under both C11 models)."""
    text = (REPO / "tests" / "test_litmus.py").read_text()
    return {m.group(1): m.group(2) for m in _LITMUS_ENTRY_RE.finditer(text)}


def one_producer_reason(section: dict) -> str:
    """tools/bench.py's :func:`one_producer_reason` (the page's sentences on
    one producer, generated from the breakdown)."""
    from dc_scripts import import_tool

    return import_tool("bench").one_producer_reason(section)


class BenchOneProducerBreakdown(_BenchDirective):
    """The one-producer breakdown, its generated reason and the records."""

    def lines(self, data):
        self.env.note_dependency(str(REPO / "tests" / "model" / "run.py"))
        self.env.note_dependency(str(REPO / "tests" / "test_litmus.py"))
        section = data.get("one_producer_breakdown")
        out: list[str] = []
        if not section:
            commit = _run_commit(data)
            out += [
                f"**Not measured yet.** The committed run (commit ``{commit}``) has no "
                "``one_producer_breakdown`` section: its binary predates the breakdown's rows. "
                "Which piece costs what at one producer is therefore not measured yet.",
                "",
            ]
        else:
            rows = [
                [
                    r["variant"],
                    r["removed"],
                    f"{r['ns_per_item']:.2f}",
                    f"{r['throughput_ratio']:.2f}",
                    f"{r['fast_ns']:.2f}" if r.get("fast_ns") is not None else "",
                    f"{r['fast_ratio']:.2f}" if r.get("fast_ratio") is not None else "",
                ]
                for r in section["rows"]
            ]
            out += list_table(
                [
                    "row",
                    "removed from the reference",
                    "1 producer, ns per item",
                    "throughput / Treiber push",
                    "fast path, ns per item",
                    "/ Treiber push",
                ],
                rows,
                "dc-bench-one-producer",
                "20 34 10 10 10 8",
            )
            out += [one_producer_reason(section), ""]
        checks = model_checks()
        verdicts = litmus_verdicts()
        why = []
        for piece, variant, (kind, ref) in ONE_PRODUCER_WHY:
            if kind == "model":
                c = checks.get(ref)
                if c is None:
                    raise ExtensionError(f"tests/model/run.py has no check {ref!r} any more")
                outcome = "fails (spin finds an error)" if c.expect_error else "verifies"
                what = re.sub(r"_(?=\W|$)", r"\\_", c.why)
                why.append([piece, variant, f"tests/model/run.py::{ref}", outcome, what])
            elif kind == "litmus":
                v = verdicts.get(ref)
                if v is None or not (REPO / "tests" / "litmus" / f"{ref}.litmus").exists():
                    raise ExtensionError(
                        f"tests/litmus/{ref}.litmus is not in tests/test_litmus.py"
                    )
                outcome = (
                    "forbidden (Never): removing it is safe in the C++ model"
                    if v == "Never"
                    else "allowed (Sometimes): the lost wakeup"
                )
                why.append(
                    [
                        piece,
                        variant,
                        f"tests/litmus/{ref}.litmus",
                        outcome,
                        "herd7, rc11.cat and c11_partialSC.cat "
                        "(tests/test_litmus.py::test_herd7_verdict)",
                    ]
                )
            else:
                why.append([piece, variant, "", "", ref])
        out += list_table(
            ["piece", "row without it", "record", "outcome", "what it says"],
            why,
            "dc-bench-one-producer-why",
            "16 18 24 18 24",
        )
        return out


def setup(app: Sphinx):
    app.add_directive("bench-slow-path-breakdown", BenchSlowPathBreakdown)
    app.add_directive("bench-one-producer-breakdown", BenchOneProducerBreakdown)
    app.add_directive("bench-drain-curve", BenchDrainCurve)
    app.add_directive("bench-curve", BenchCurve)
    app.add_directive("bench-curves-machine", BenchCurvesMachine)
    app.add_directive("bench-machine", BenchMachine)
    app.add_directive("bench-headline", BenchHeadline)
    app.add_directive("bench-core", BenchCore)
    app.add_directive("bench-e2e", BenchE2E)
    app.add_directive("bench-plot", BenchPlot)
    app.add_directive("bench-before-after", BenchBeforeAfter)
    app.add_directive("bench-shared-line", BenchSharedLine)
    app.add_directive("bench-repeat", BenchRepeat)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

# SPDX-License-Identifier: Apache-2.0
"""The slow-path breakdown of tools/bench.py (bench.json's
``slow_path_breakdown``): its ratios divide the rows of one run, its sentence
on the one-state-word candidate says what the data says, and a committed run
that measured the breakdown's rows, or that claims to be of the current
benchmark sources, carries the section.

Only the standard library and tools/bench.py: no build, no benchmark run
(tests/test_bench.py runs the binary; tests/test_bench_docs.py checks the
rendered page).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import bench  # noqa: E402  (tools/bench.py)
import provenance  # noqa: E402  (tools/provenance.py)

DATA = REPO / "docs" / "_data" / "bench.json"
ROWS = [
    "reference",
    "reference-no-rearm",
    "reference-no-gate",
    "reference-no-gate-no-rearm",
    "cuda-core-1.2-fixed",
    "cuda-core-1.2",
]
CLOCK = "clock/steady_clock_pair"


def _core(slow: dict[str, float], fast: dict[str, float], clock: float = 2.0) -> dict:
    """Raw rows as core_rows() gives them: ns per item of each row."""

    def row(ns: float, **counters) -> dict:
        return {
            "ns_per_item": ns,
            "items_per_second": 1e9 / ns,
            "repetitions": 5,
            "counters": counters,
        }

    core = {CLOCK: row(clock)}
    for v, ns in slow.items():
        core[f"batch16/destructor/{v}/none"] = row(ns, host_calls_per_op=1.0)
    for v, ns in fast.items():
        core[f"destructor/{v}/outstanding"] = row(ns, host_calls=1.0)
    return core


def test_ratios_divide_by_cuda_core_rows_of_the_same_run_less_the_clock():
    slow = {v: 10.0 + 4 * i for i, v in enumerate(ROWS)}
    fast = {v: 3.0 + i for i, v in enumerate(ROWS)}
    section = bench.slow_path_breakdown(_core(slow, fast, clock=2.0))
    assert section is not None
    assert [r["variant"] for r in section["rows"]] == ROWS
    base_slow, base_fast = slow["cuda-core-1.2"] - 2.0, fast["cuda-core-1.2"]
    for r in section["rows"]:
        v = r["variant"]
        assert abs(r["slow_ns"] - (slow[v] - 2.0)) < 1e-9, v
        assert abs(r["slow_ratio"] - (slow[v] - 2.0) / base_slow) < 1e-9, v
        assert abs(r["fast_ratio"] - fast[v] / base_fast) < 1e-9, v
        assert r["host_calls_per_op"] == 1.0
    assert section["base"] == "cuda-core-1.2" and section["target"] == "<= 1.0"


def test_no_section_without_the_rows():
    # A run whose binary predates the breakdown: no section, not a broken one.
    assert bench.slow_path_breakdown(_core({"cuda-core-1.2": 9.0}, {"cuda-core-1.2": 3.0})) is None


def _section(no_gate_slow: float, base_slow: float = 10.0) -> dict:
    """A breakdown whose rows, less the clock pair's 1 ns, are the given ns."""
    slow = {v: 12.0 for v in ROWS} | {"reference-no-gate": no_gate_slow, "cuda-core-1.2": base_slow}
    slow = {v: ns + 1.0 for v, ns in slow.items()}
    section = bench.slow_path_breakdown(_core(slow, {v: 3.0 for v in ROWS}, clock=1.0))
    assert section is not None
    return section


def _stated_ratio(sentence: str) -> float:
    m = re.search(r"takes (\d+\.\d\d)× the", sentence)
    assert m, sentence
    return float(m.group(1))


def test_bound_rules_one_word_out_when_no_gate_is_above_the_target():
    sentence = bench.one_word_bound(_section(no_gate_slow=13.0))
    assert _stated_ratio(sentence) == 1.30
    assert "cannot meet the target" in sentence
    assert "does not decide" not in sentence


def test_bound_does_not_decide_when_no_gate_is_within_the_target():
    sentence = bench.one_word_bound(_section(no_gate_slow=8.0))
    assert _stated_ratio(sentence) == 0.80
    assert "does not decide" in sentence
    assert "cannot meet" not in sentence


def _claims_current(data: dict) -> bool:
    """The run's stamp names the bench sources as they are in this tree."""
    st = data.get("provenance")
    return (
        bool(st)
        and sorted(st.get("globs", [])) == sorted(bench.SOURCE_GLOBS)
        and not (provenance.changed(st, REPO))
    )


def test_committed_run_has_the_section_when_it_measured_or_claims_the_current_sources():
    data = json.loads(DATA.read_text())
    measured = "batch16/destructor/reference-no-gate/none" in data["core"]
    if measured or _claims_current(data):
        assert "slow_path_breakdown" in data, (
            "docs/_data/bench.json measured the breakdown's rows or is stamped with the current "
            "bench sources, but has no slow_path_breakdown section (run tools/bench.py "
            "--report-only on its raw results)"
        )
    if "slow_path_breakdown" not in data:
        return  # the page says "not measured yet" (tests/test_bench_docs.py)
    core, section = data["core"], data["slow_path_breakdown"]
    clock = core[CLOCK]["ns_per_item"]
    base = core["batch16/destructor/cuda-core-1.2/none"]["ns_per_item"] - clock
    for r in section["rows"]:
        raw = core[f"batch16/destructor/{r['variant']}/none"]
        assert abs(r["slow_ratio"] - (raw["ns_per_item"] - clock) / base) < 1e-9
        assert raw["counters"]["host_calls_per_op"] == 1.0, r["variant"]


# ------------------------------------------------------------ one producer
ONE = [v for v, _ in bench.ONE_PRODUCER_ABLATIONS]
FLOOR = bench.ONE_PRODUCER_FLOOR
FAST_FLOOR = bench.ONE_PRODUCER_FAST_FLOOR


def _core_one(mt: dict[str, float], floor: float, fast: dict[str, float] | None = None) -> dict:
    """Raw rows of the one-producer breakdown: ns per item of each row."""

    def row(ns: float) -> dict:
        return {"ns_per_item": ns, "items_per_second": 1e9 / ns, "repetitions": 3, "counters": {}}

    core = {FLOOR: row(floor), FAST_FLOOR: row(floor / 2)}
    for v, ns in mt.items():
        core[f"mt/destructor/{v}/threads:1"] = row(ns)
    for v, ns in (fast or {}).items():
        core[f"destructor/{v}/outstanding"] = row(ns)
    return core


def test_one_producer_ratios_divide_by_the_floor_of_the_same_run():
    mt = {v: 10.0 + i for i, v in enumerate(ONE)}
    fast = {v: 6.0 + i for i, v in enumerate(ONE)}
    section = bench.one_producer_breakdown(_core_one(mt, 9.0, fast))
    assert section is not None
    assert [r["variant"] for r in section["rows"]] == ONE
    assert section["floor"] == FLOOR and section["target"] == f">= {bench.TARGET_THROUGHPUT}"
    for r in section["rows"]:
        v = r["variant"]
        assert abs(r["throughput_ratio"] - 9.0 / mt[v]) < 1e-9, v
        assert abs(r["fast_ratio"] - fast[v] / 4.5) < 1e-9, v
        assert r["ns_per_item"] == mt[v] and r["floor_ns"] == 9.0


def _gb_run(name: str, reps: list[tuple[float, float]]) -> list[dict]:
    """Google Benchmark JSON entries of one paired row: one per repetition,
    (items per second, floor_ratio), as BM_ProducersPaired writes them."""
    return [
        {
            "name": f"{name}/iterations:16/manual_time",
            "run_name": f"{name}/iterations:16/manual_time",
            "run_type": "iteration",
            "repetition_index": i,
            "items_per_second": ips,
            "floor_ratio": ratio,
            "threads": 1.0,
            "host_calls_per_run": 1.0,
        }
        for i, (ips, ratio) in enumerate(reps)
    ]


def test_a_paired_row_gives_the_throughput_ratio_its_median_over_repetitions():
    """BM_ProducersPaired times the bare Treiber push beside the row in each
    iteration; the report takes that ratio (median over the repetitions), not
    the quotient of the separate rows, which ran minutes apart."""
    name = "paired/mt/destructor/reference/threads:4"
    raw = {"benchmarks": _gb_run(name, [(2e7, 0.97), (1e7, 0.70), (3e7, 0.93)])}
    core = bench.core_rows(raw)
    assert core[name]["counters"]["floor_ratio"] == 0.93  # the median, not the first
    sep = {"ns_per_item": 50.0, "items_per_second": 2e7, "repetitions": 3, "counters": {}}
    core["mt/destructor/reference/threads:4"] = dict(sep)
    core["mt/treiber_push/threads:4"] = dict(sep, items_per_second=4e7)  # separate: 0.5
    kind, row, value = bench.throughput_ratio(
        core, "mt/destructor/reference/threads:4", "mt/treiber_push/threads:4"
    )
    assert (kind, row, value) == ("paired_throughput", name, 0.93)
    for rest in (  # the rows the headline's other ratios divide
        "floor/treiber_push",
        "destructor/reference/outstanding",
        "batch16/floor/treiber_push",
        "batch16/destructor/reference/none",
    ):
        core[rest] = dict(sep, ns_per_item=20.0)
    core[CLOCK] = dict(sep, ns_per_item=2.0)
    h = {r["id"]: r for r in bench.headline(core, {})}["throughput.reference.4"]
    assert h["kind"] == "paired_throughput" and h["numerator"] == name and h["value"] == 0.93
    assert h["ok"] is True  # 0.93 >= 0.9; the separate rows' 0.5 would miss
    del core[name]
    assert bench.throughput_ratio(
        core, "mt/destructor/reference/threads:4", "mt/treiber_push/threads:4"
    ) == ("throughput", "mt/destructor/reference/threads:4", 0.5)


def test_the_one_producer_breakdown_takes_a_paired_rows_ratio_and_its_own_floor():
    mt = {v: 10.0 + i for i, v in enumerate(ONE)}
    core = _core_one(mt, 9.0)
    core["paired/mt/destructor/reference/threads:1"] = {
        "ns_per_item": 12.0,
        "items_per_second": 1e9 / 12.0,
        "repetitions": 3,
        "counters": {"floor_ratio": 0.95},
    }
    section = bench.one_producer_breakdown(core)
    assert section is not None
    ref = next(r for r in section["rows"] if r["variant"] == "reference")
    assert ref["row"] == "paired/mt/destructor/reference/threads:1"
    assert ref["throughput_ratio"] == 0.95 and ref["ns_per_item"] == 12.0
    assert abs(ref["floor_ns"] - 11.4) < 1e-9  # its own floor: 12 ns x 0.95
    other = next(r for r in section["rows"] if r["variant"] != "reference")
    assert other["row"].startswith("mt/") and other["floor_ns"] == 9.0  # no paired row


def test_no_one_producer_section_without_the_rows():
    # A run whose binary predates the breakdown: no section, not a broken one.
    assert bench.one_producer_breakdown(_core_one({"reference": 10.0}, 9.0)) is None


def _one(ns: dict[str, float], floor: float = 10.0) -> str:
    mt = {v: 11.0 for v in ONE} | ns
    section = bench.one_producer_breakdown(_core_one(mt, floor))
    assert section is not None
    return bench.one_producer_reason(section)


def test_one_producer_reason_when_missed_names_the_costliest_piece():
    # reference 12.5 ns against 10: 0.80x; no re-arm saves 2 ns, the orders
    # nothing; the push alone 10.5 ns: 0.95x.
    s = _one(
        {
            "reference": 12.5,
            "reference-no-rearm": 10.5,
            "reference-push-release": 12.5,
            "reference-check-acquire": 12.6,
            "reference-push-only": 10.5,
        }
    )
    assert "reaches 0.80× the bare Treiber push's throughput, missing the target" in s
    assert "2.50 ns above the floor" in s
    assert "``reference-no-rearm`` saves the most: 2.00 ns per item, reaching 0.95×" in s
    assert "``reference-push-release`` 0.80×" in s
    assert "does not stand in the way" in s and "could meet" not in s


def test_one_producer_reason_when_met_and_the_push_alone_is_below():
    s = _one(
        {
            "reference": 10.5,
            "reference-no-rearm": 10.6,
            "reference-push-release": 10.7,
            "reference-check-acquire": 10.8,
            "reference-push-only": 11.5,
        }
    )
    assert "reaches 0.95× the bare Treiber push's throughput, meeting the target" in s
    assert "No single piece's removal makes the row faster" in s
    assert "no fast path on this queue could meet the target" in s


def test_one_producer_reason_states_the_old_rate_apart_from_the_pieces():
    # reference-sample-16 adds work (the re-arm look at its old rate): it is no
    # piece whose removal could save time, so the reason states it on its own.
    s = _one(
        {
            "reference": 10.5,
            "reference-no-rearm": 10.2,
            "reference-push-release": 10.5,
            "reference-check-acquire": 10.5,
            "reference-push-only": 10.1,
            "reference-sample-16": 11.5,
        }
    )
    assert "``reference-no-rearm`` saves the most: 0.30 ns per item" in s
    assert "(the others: ``reference-push-release`` 0.95×, ``reference-check-acquire`` 0.95×)" in s
    assert (
        "With the re-arm look at its old rate (``reference-sample-16``) one producer reaches "
        "0.87×, 1.00 ns per item more than the reference."
    ) in s


def test_one_producer_reason_does_not_round_onto_the_target():
    # 0.899 would print as the target itself with two decimals.
    s = _one({"reference": 10.0 / 0.899})
    assert "reaches 0.899×" in s and "missing" in s


def test_committed_run_has_the_one_producer_section_when_it_measured_the_rows():
    data = json.loads(DATA.read_text())
    measured = "mt/destructor/reference-push-only/threads:1" in data["core"]
    if measured or _claims_current(data):
        assert "one_producer_breakdown" in data, (
            "docs/_data/bench.json measured the one-producer breakdown's rows or is stamped "
            "with the current bench sources, but has no one_producer_breakdown section (run "
            "tools/bench.py --report-only on its raw results)"
        )
    if "one_producer_breakdown" not in data:
        return  # the page says "not measured yet" (tests/test_bench_docs.py)
    core = data["core"]
    floor = core[FLOOR]["items_per_second"]
    for r in data["one_producer_breakdown"]["rows"]:
        pair = core.get(f"paired/mt/destructor/{r['variant']}/threads:1")
        if pair is not None:  # timed beside its own floor (BM_ProducersPaired)
            assert r["throughput_ratio"] == pair["counters"]["floor_ratio"]
            continue
        raw = core[f"mt/destructor/{r['variant']}/threads:1"]
        assert abs(r["throughput_ratio"] - raw["items_per_second"] / floor) < 1e-9

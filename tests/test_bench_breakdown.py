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

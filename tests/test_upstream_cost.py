# SPDX-License-Identifier: Apache-2.0
"""The cost table of the upstream store-buffering report is generated from
the benchmark data, never typed by hand (one place per number)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "tools" / "upstream_cost.py"
PAGE = REPO / "notes" / "upstream" / "fix-cost.md"


def test_committed_cost_table_is_generated_from_the_committed_bench_data():
    """tools/upstream_cost.py --check: notes/upstream/fix-cost.md is exactly
    what the generator writes from docs/_data/bench.json and bench-repeat.json."""
    r = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_cost_table_shows_each_runs_fixed_and_shipped_rows():
    """Every run's fast and slow ratio of the fixed variant appears in the
    table as the bench file states it (a reader sees the measured figure)."""
    text = PAGE.read_text()
    for name in ("bench.json", "bench-repeat.json"):
        data = json.loads((REPO / "docs" / "_data" / name).read_text())
        rows = {r["variant"]: r for r in data["slow_path_breakdown"]["rows"]}
        for kind in ("fast", "slow"):
            ratio = rows["cuda-core-1.2-fixed"][f"{kind}_ratio"]
            line = next(ln for ln in text.splitlines() if f"/{name}`" in ln and f"| {kind} |" in ln)
            assert line.endswith(f"| {ratio:.2f}x |"), line


def test_report_links_the_cost_table():
    """The store-buffering report points at the generated table."""
    report = (REPO / "notes" / "upstream" / "cuda-core-store-buffering.md").read_text()
    assert "fix-cost.md" in report

# SPDX-License-Identifier: Apache-2.0
"""Smoke run of tools/bench_pending.py (Py_AddPendingCall's own cost), so that
it cannot rot: the module builds against this interpreter, every call a
foreign thread adds is accepted (the ring never fills: each round waits until
its calls ran) and is timed, and the result file has the fields the GPU
session's report reads.

Marker ``bench``: runs once per ``make test``, in one interpreter's
environment; by hand: ``python3 tools/matrix.py run cp312-pyenv -- bash -c
'$PY -m pytest -m bench tests/test_bench_pending.py'``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
from conftest import LOAD  # noqa: E402

import bench_pending  # noqa: E402  (tools/bench_pending.py: the real tool)

# A hang guard, scaled by the load measured at collection (conftest.LOAD).
pytestmark = [pytest.mark.bench, pytest.mark.timeout(round(300 * LOAD))]


def test_every_foreign_call_is_accepted_and_run(tmp_path):
    out = tmp_path / "pending.json"
    rc = bench_pending.main(["--one", "--rounds", "200", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    modes = (
        ("uncontended", 1, 1),
        (f"uncontended_batch{bench_pending.BATCH}", 1, bench_pending.BATCH),
        (f"racing{bench_pending.RACING}", bench_pending.RACING, 1),
    )
    for key, threads, batch in modes:
        r = data[key]
        assert (r["threads"], r["batch"]) == (threads, batch), r
        assert r["refused"] == 0, f"{key}: the ring filled although each round waits: {r}"
        assert r["calls"] == 200 * threads * batch, f"{key}: {r}"
        assert 0 <= r["p10_ns"] <= r["median_ns"] <= r["p90_ns"] <= r["p99_ns"], r
    assert data["interpreter"]["version"].startswith("%d.%d." % sys.version_info[:2])

# SPDX-License-Identifier: Apache-2.0
"""Smoke run of the benchmarks: they build and each runs once, so they
cannot rot, and what they report about the design holds.

Marker ``bench``: runs once per ``make test`` (tools/matrix.py's run-once
checks), in one interpreter's environment; by hand:
``python3 tools/matrix.py run cp312-pyenv -- bash -c '$PY -m pytest -m bench tests/test_bench.py'``.
``make bench`` (tools/bench.py) is the real run; this one takes seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
from conftest import hang_guard  # noqa: E402

import bench  # noqa: E402  (tools/bench.py: the same build step as make bench)

# Hang guards, scaled by the load measured at collection (conftest.hang_guard).
pytestmark = [pytest.mark.bench, pytest.mark.timeout(hang_guard(600))]
VARIANT_NAMES = ["reference", "seed", "cuda-core-1.2"]


@pytest.fixture(scope="module")
def smoke_rows() -> dict[str, dict]:
    """Every benchmark once (DC_BENCH_SMOKE=1: small sizes, one iteration
    where the count is fixed), parsed from Google Benchmark's JSON."""
    binary = bench.build_core()
    p = subprocess.run(
        [str(binary), "--benchmark_min_time=0.001", "--benchmark_format=json"],
        env=dict(os.environ, DC_BENCH_SMOKE="1"),
        capture_output=True,
        text=True,
        timeout=hang_guard(300),
    )
    assert p.returncode == 0, p.stderr[-4000:]
    rows = {}
    for b in json.loads(p.stdout)["benchmarks"]:
        rows[bench._short(b["run_name"])] = b
    return rows


def _variants(rows) -> list[str]:
    return [v for v in VARIANT_NAMES if f"destructor/{v}/outstanding" in rows]


def test_every_benchmark_ran_without_error(smoke_rows):
    assert "reference" in _variants(smoke_rows)
    errors = {k: b.get("error_message") for k, b in smoke_rows.items() if b.get("error_occurred")}
    assert errors == {}
    expected = [
        "floor/treiber_push",
        "mutex_vector/outstanding",
        "naive/per_payload/31",
        "naive/per_payload/32",
        "clock/steady_clock_pair",
        "batch16/floor/treiber_push",
        "batch16/mutex_vector/none",
        "batch16/naive/per_payload",
        "direct/1000",
        "direct/100000",
        "floor/drain/1000",
        "floor/drain/100000",
        "floor/drain_reversed/1000",
        "floor/drain_reversed/100000",
        "drain/mutex_vector/1000",
        "drain/mutex_vector/100000",
    ]
    for v in _variants(smoke_rows):
        expected += [
            f"destructor/{v}/outstanding",
            f"batch16/destructor/{v}/none",
            f"drain/{v}/1000",
            f"drain/{v}/100000",
        ]
        expected += [f"mt/destructor/{v}/threads:{t}" for t in bench.THREAD_COUNTS]
    expected += [
        f"mt/{s}/threads:{t}" for s in ("treiber_push", "mutex_vector") for t in bench.THREAD_COUNTS
    ]
    assert bench.THREAD_COUNTS == [1, 2, 4, 8, 12, 16]
    missing = [name for name in expected if name not in smoke_rows]
    assert missing == [], f"rows missing from the smoke run: {missing}"
    assert all(b["iterations"] >= 1 and b["items_per_second"] > 0 for b in smoke_rows.values())


def test_shared_line_binary_packs_the_fields_and_names_its_rows(smoke_rows):
    # bench_core keeps head_, scheduled_ and the gate on lines of their own;
    # bench_core_shared_line is the same source with DC_QUEUE_FIELD_ALIGN=8,
    # and tools/bench.py reads its rows under the "shared_line/" prefix.
    binary = bench.build_core()
    out = {}
    for exe in (binary, binary.parent / "bench_core_shared_line"):
        rows = f"{bench.SHARED_LINE_FILTER}|^destructor/reference/"
        p = subprocess.run(
            [
                str(exe),
                "--benchmark_min_time=0.001",
                "--benchmark_format=json",
                f"--benchmark_filter={rows}",
            ],
            env=dict(os.environ, DC_BENCH_SMOKE="1"),
            capture_output=True,
            text=True,
            timeout=hang_guard(300),
        )
        assert p.returncode == 0, p.stderr[-3000:]
        out[exe.name] = json.loads(p.stdout)
    assert out["bench_core"]["context"]["queue_field_align"] == "64"
    assert out["bench_core_shared_line"]["context"]["queue_field_align"] == "8"
    names = [b["run_name"] for b in out["bench_core_shared_line"]["benchmarks"]]
    assert "shared_line/destructor/reference/outstanding" in names
    assert all(n.startswith("shared_line/") for n in names), names
    names = [b["run_name"] for b in out["bench_core"]["benchmarks"]]
    assert names == ["destructor/reference/outstanding"]


def test_drain_floor_rows_run_every_cleanup(smoke_rows):
    # A floor row stops with an error when a cleanup did not run.
    for n in (1000, 100000):
        for name in (f"floor/drain/{n}", f"floor/drain_reversed/{n}", f"drain/mutex_vector/{n}"):
            assert not smoke_rows[name].get("error_occurred"), name
            assert smoke_rows[name]["items"] == n


def test_naive_design_is_refused_at_cpython_capacity(smoke_rows):
    # One host call per payload, 1000 payloads while the main thread runs
    # nothing: CPython keeps 31 (3.10-3.12) or 32 (3.13+) and refuses the rest.
    assert smoke_rows["naive/per_payload/31"]["refused_per_burst"] == 1000 - 31
    assert smoke_rows["naive/per_payload/32"]["refused_per_burst"] == 1000 - 32


def test_one_pending_call_however_many_producers(smoke_rows):
    for v in _variants(smoke_rows):
        assert smoke_rows[f"destructor/{v}/outstanding"]["host_calls"] == 1, v
        for t in (1, 2, 4, 8):
            assert smoke_rows[f"mt/destructor/{v}/threads:{t}"]["host_calls_per_run"] == 1, (v, t)
        # with none outstanding, each destructor makes exactly one call
        assert smoke_rows[f"batch16/destructor/{v}/none"]["host_calls_per_op"] == 1, v


def test_slow_path_breakdown_rows_run_and_call_the_host_once(smoke_rows):
    # The breakdown's bench-only policies (tests/bench/variants.hpp): each
    # compiles against the real headers, runs both destructor rows without the
    # rows' own errors, makes one host call per destructor with none
    # outstanding and one call in all with one outstanding, and allocates nothing.
    names = [v for v, _ in bench.ABLATIONS]
    assert set(VARIANT_NAMES) & set(names) == {"reference"}
    for v in names:
        out, none = (
            smoke_rows[f"destructor/{v}/outstanding"],
            smoke_rows[f"batch16/destructor/{v}/none"],
        )
        assert not out.get("error_occurred") and not none.get("error_occurred"), v
        assert none["host_calls_per_op"] == 1, v
        assert out["host_calls"] == 1, v
        assert out["allocations"] == 0, v
    # Only the two destructor rows (and, for a row of the one-producer
    # breakdown too, its one-producer row): the variants' own tables keep
    # three variants.
    extra = [v for v in names if v not in VARIANT_NAMES]
    assert not [
        k for k in smoke_rows if any(f"/{v}/" in k for v in extra) and "destructor/" not in k
    ]
    one = {v for v, _ in bench.ONE_PRODUCER_ABLATIONS}
    assert not [
        k
        for k in smoke_rows
        if k.startswith(("drain/", "mt/"))
        and any(f"/{v}/" in k for v in extra)
        and not (k.endswith("/threads:1") and any(f"/{v}/" in k for v in one))
    ]


def test_paired_producer_rows_time_the_floor_beside_the_row(smoke_rows):
    # BM_ProducersPaired: every variant at every producer count, each
    # one-producer ablation at one; a row makes one host call per run (the
    # floor's runs make none), and its floor_ratio is a ratio of two timed
    # runs (positive; the smoke run's sizes say nothing about its value).
    names = [v for v, _ in bench.ONE_PRODUCER_ABLATIONS]
    rows = [(v, t) for v in _variants(smoke_rows) for t in bench.THREAD_COUNTS]
    rows += [(v, 1) for v in names if v not in VARIANT_NAMES]
    for v, t in rows:
        p = smoke_rows[f"paired/mt/destructor/{v}/threads:{t}"]
        assert not p.get("error_occurred"), (v, t)
        assert p["host_calls_per_run"] == 1, (v, t)
        assert p["floor_ratio"] > 0, (v, t)


def test_one_producer_breakdown_rows_run_on_the_real_queue(smoke_rows):
    # The one-producer breakdown's rows (tests/bench/variants.hpp): each runs
    # at one producer and on the fast-path row without the rows' own errors;
    # the first destructor of each goes through the real hand-off and makes
    # the one host call (the row's check that it did is an error otherwise),
    # and no later push of the row makes another, not even the push-only row
    # (the queue's own push, which never asks for a call); nothing allocates.
    # Only threads:1: the producer counts' table keeps its three variants.
    names = [v for v, _ in bench.ONE_PRODUCER_ABLATIONS]
    assert "reference" in names and "reference-push-only" in names
    for v in names:
        mt, out = (
            smoke_rows[f"mt/destructor/{v}/threads:1"],
            smoke_rows[f"destructor/{v}/outstanding"],
        )
        assert not mt.get("error_occurred") and not out.get("error_occurred"), v
        assert mt["host_calls_per_run"] == 1, v
        assert out["host_calls"] == 1, v
        assert out["allocations"] == 0, v
        if v not in VARIANT_NAMES:
            assert f"mt/destructor/{v}/threads:2" not in smoke_rows, v
    # The section tools/bench.py makes of these rows divides by the floor of
    # the same run.
    core = {
        k: {
            "ns_per_item": 1e9 / b["items_per_second"],
            "items_per_second": b["items_per_second"],
            "counters": {},
        }
        for k, b in smoke_rows.items()
        if "items_per_second" in b
    }
    section = bench.one_producer_breakdown(core)
    assert section is not None
    assert [r["variant"] for r in section["rows"]] == names


def test_queue_allocates_nothing(smoke_rows):
    item_bytes = smoke_rows["drain/reference/1000"]["bytes_per_item"]
    assert (
        item_bytes == 3 * 8
    )  # payload, cleanup, next: the item is all the memory a queued payload takes
    for v in _variants(smoke_rows):
        assert smoke_rows[f"destructor/{v}/outstanding"]["allocations"] == 0, v
        for n in (1000, 100000):
            row = smoke_rows[f"drain/{v}/{n}"]
            assert (row["allocations_push"], row["allocations_drain"]) == (0, 0), (v, n)


def _variants_in_package() -> list[str]:
    out = []
    for v in VARIANT_NAMES:
        p = subprocess.run(
            [sys.executable, "-c", "import deferred_cleanup as d; print(d.variant())"],
            env=dict(os.environ, DEFERRED_CLEANUP_VARIANT=v),
            capture_output=True,
            text=True,
        )
        if p.returncode == 0 and p.stdout.strip() == v:
            out.append(v)
    return out


def test_end_to_end_measurements_run_and_release_every_payload_on_the_main_thread():
    variants = _variants_in_package()
    assert "reference" in variants
    for v in variants:
        p = subprocess.run(
            [sys.executable, str(REPO / "tests" / "bench" / "e2e.py"), "smoke"],
            env=dict(os.environ, DEFERRED_CLEANUP_VARIANT=v),
            capture_output=True,
            text=True,
            timeout=hang_guard(120),
        )
        assert p.returncode == 0, f"{v}: {p.stderr[-3000:]}"
        r = json.loads(p.stdout)
        assert r["variant"] == v
        for mode in ("burst_pending", "burst_entry"):
            b = r[mode]
            assert (b["payloads"], b["cleaned"], b["cleanups_off_main"]) == (1000, 1000, 0), (
                v,
                mode,
                b,
            )
            assert b["seconds"] > 0, (v, mode, b)
        # coalescing: a burst of 1000 from 8 threads needs a handful of pending calls, not 1000
        assert r["burst_pending"]["pending_calls"] <= 20, (v, r["burst_pending"])
        assert r["consume_queue_s"] > 0 and r["consume_direct_s"] > 0


def test_curves_runner_releases_every_payload_on_the_main_thread_at_every_burst_size():
    # tests/bench/curves.py in smoke sizes on the real package, one process per
    # variant: every burst released all its payloads on the main thread (the
    # runner raises otherwise), each size has latency rows and CPU per payload
    # above zero, and every burst needed at least one pending call.
    variants = _variants_in_package()
    assert "reference" in variants
    sys.path.insert(0, str(REPO / "tests" / "bench"))
    import curves  # noqa: PLC0415  (tests/bench/curves.py: the sizes of its smoke run)

    for v in variants:
        p = subprocess.run(
            [sys.executable, str(REPO / "tests" / "bench" / "curves.py"), "run", "--variant", v]
            + ["--smoke"],
            env=dict(os.environ, DEFERRED_CLEANUP_VARIANT=v),
            capture_output=True,
            text=True,
            timeout=hang_guard(300),
        )
        assert p.returncode == 0, f"{v}: {p.stderr[-3000:]}"
        r = json.loads(p.stdout)
        assert r["variant"] == v and r["sizes"] == curves.SMOKE_SIZES
        for n in curves.SMOKE_SIZES:
            row = r["rows"][str(n)]
            lat = row["latency"]
            assert lat["samples"] == n * curves.SMOKE_REPS[n][0], (v, n, lat)
            assert 0 < lat["median_us"] <= lat["p99_us"] <= lat["max_us"], (v, n, lat)
            assert lat["min_us"] >= 0, (v, n, lat)  # no cleanup before its burst's release
            assert row["pending_calls"]["min"] >= 1, (v, n, row["pending_calls"])
            assert row["cpu"]["ns_per_payload"] > 0, (v, n, row["cpu"])
        assert r["rows"][str(curves.SMOKE_SIZES[-1])]["rss_bytes_per_payload"] >= 0

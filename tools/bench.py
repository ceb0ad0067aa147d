#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make bench: the benchmarks of the core and of the package, and their report.

Steps, each saying what it does:

1. Debian packages: libbenchmark-dev (Google Benchmark's CMake package),
   cmake and g++, installed with apt-get when missing.
2. The C++ microbenchmarks (tests/bench/bench_core.cpp): configured in
   build/bench/cmake (Release), run with ``DC_BENCH_REPS`` repetitions
   (default 3; the report uses the medians) into build/bench/core.json.
3. End to end on every interpreter of the matrix (``DC_BENCH_ONLY=a,b``
   restricts it): ``tools/matrix.py run NAME`` installs the pinned
   tests/bench/requirements.txt (pyperf) into that interpreter's environment,
   then, for each variant the build knows, runs tests/bench/e2e_pyperf.py
   (pyperf; ``DC_BENCH_PYPERF`` holds its options, default
   ``-p 1 -n 3 -w 1 -l 1``) and ``e2e.py counts`` in a process of its own
   with ``DEFERRED_CLEANUP_VARIANT`` set.  Results: build/bench/e2e/.
4. The report: build/bench/bench.json (everything, with the machine, the
   compiler and the interpreters named) and build/bench/bench.md (the tables);
   the headline table is printed.  Every headline figure is a ratio of two
   measurements taken in this one run.

``tools/bench.py --report-only`` rebuilds the two files from the raw results
of the last run (build/bench/core.json, build/bench/e2e/).

On a machine without Google Benchmark (the GPU host), the binaries built
elsewhere run from ``DC_BENCH_BINARY_DIR`` (bench_core and
bench_core_shared_line, with libbenchmark beside them on LD_LIBRARY_PATH),
``DC_BENCH_NO_E2E=1`` skips step 3, and these describe the build instead of
asking the machine: ``DC_BENCH_COMPILER``, ``DC_BENCH_GBENCH`` (Google
Benchmark's version), ``DC_COMMIT``, ``DC_BENCH_PROVENANCE`` (a stamp of
tools/provenance.py made where the binaries were built) and
``DC_BENCH_MACHINE_NOTE`` (what else ran on the machine); ``DC_BENCH_MIN_TIME``
passes ``--benchmark_min_time`` (seconds) to the binaries, and
``DC_BENCH_HEADLINE_REPS`` (read by the binaries) repeats the single-producer
destructor rows, their floors and the clock pair that many times instead of
``DC_BENCH_REPS``.

The slow-path breakdown (``slow_path_breakdown`` in bench.json; ``ABLATIONS``)
divides the slow and fast path of the reference with one piece removed, and of
cuda-core-1.2-fixed, by cuda-core-1.2's rows of the same run.  The one-producer
breakdown (``one_producer_breakdown``; ``ONE_PRODUCER_ABLATIONS``) divides one
producer's throughput of the reference with one piece weakened or removed, and
of the reference with the re-arm look at its old rate, by the bare Treiber
push's of the same run.  The report then
carries ``provenance``: the commit and the hash of the sources measured.

The docs page (docs/performance.rst) renders a committed copy:
``cp build/bench/bench.json docs/_data/bench.json``.

The drain, floor and direct rows run at 10^2 to 10^7 items (the page's drain
curve); the headline reads 10^3, 10^5 and 10^7 (``DRAIN_SIZES``).  The other
curves of the page's "Cost as the work grows" (latency, pending calls, CPU and
memory per burst size) are tests/bench/curves.py's, run apart
(``tests/bench/curves.py all``; on the GPU host by tools/gpu_session.sh).

Only the standard library is used here (it runs on the machine's python3).
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "build" / "bench"
CMAKE_DIR = OUT / "cmake"
BENCH_SRC = REPO / "tests" / "bench"
VARIANTS = ["reference", "seed", "cuda-core-1.2"]
E2E_PAYLOADS = 100_000
E2E_BIG = 1_000_000
THREAD_COUNTS = [1, 2, 4, 8, 12, 16]
DRAIN_SIZES = [1000, 100000, 10000000]

# Targets of the performance work (reported, not enforced), each a ratio of two
# rows of one run.
TARGET_FAST_PATH = 1.3  # reference destructor path, call outstanding / bare Treiber push
TARGET_SLOW_PATH = 1.0  # reference, no call outstanding / cuda-core-1.2, the same
TARGET_THROUGHPUT = 0.9  # reference throughput / bare Treiber push throughput, every count
TARGET_DRAIN = 1.3  # reference drain per item / the oldest-first floor (floor/drain_reversed)
TARGET_CALLS_PER_PAYLOAD = 0.01
TARGET_CONSUMER = 1.2  # through the queue / direct (end to end)
#: The slow-path breakdown: the reference with one piece removed,
#: and cuda-core-1.2-fixed (bench-only rows of tests/bench/variants.hpp,
#: DC_BENCH_ABLATIONS), each measured on the two destructor rows only.  Each
#: entry: the row's variant, and the piece of the reference it lacks.
ABLATIONS = [
    ("reference", "nothing (the reference)"),
    ("reference-no-rearm", "re-arm (the call token and the stale clock)"),
    ("reference-no-gate", "the in-flight gate (its two read-modify-writes)"),
    ("reference-no-gate-no-rearm", "the in-flight gate and re-arm"),
    ("cuda-core-1.2-fixed", "(not the reference: the shipped shape plus its three fixes)"),
]
#: The breakdown's denominator: the shipped shape's slow path.
BREAKDOWN_BASE = "cuda-core-1.2"
#: The one-producer breakdown (``one_producer_breakdown`` in bench.json): the
#: reference's fast path with one piece weakened or removed (bench-only rows
#: of tests/bench/variants.hpp, DC_BENCH_ONE_PRODUCER_ABLATIONS, and
#: reference-no-rearm), each measured on mt/destructor/<v>/threads:1 and
#: destructor/<v>/outstanding.  Each entry: the row's variant, and the piece
#: of the reference it lacks (or, for a row in ONE_PRODUCER_CHANGED, what it
#: does differently).
ONE_PRODUCER_ABLATIONS = [
    ("reference", "nothing (the reference)"),
    (
        "reference-no-rearm",
        "re-arm's sampled check (a sampled push, ReferencePolicy::rearm_sample_log2, reads "
        "the claim's time and the clock)",
    ),
    ("reference-push-release", "the push's seq_cst (release instead)"),
    ("reference-check-acquire", "the fast-path check's seq_cst (acquire instead)"),
    ("reference-push-only", "everything after the push (the check, re-arm, the claim)"),
    (
        "reference-sample-16",
        "nothing removed: the look at the old rate, one hit in 16 (rearm_sample_log2 = 4)",
    ),
]
#: Rows of the one-producer breakdown that change the reference instead of
#: removing a piece: one_producer_reason() states them apart from the pieces.
ONE_PRODUCER_CHANGED = ("reference-sample-16",)
#: The one-producer breakdown's floors: the bare Treiber push, at one
#: producer and on the single-producer fast-path row.
ONE_PRODUCER_FLOOR = "mt/treiber_push/threads:1"
ONE_PRODUCER_FAST_FLOOR = "floor/treiber_push"
SOURCE_GLOBS = [
    "include/deferred_cleanup/*.hpp",
    "include/deferred_cleanup/comparison/*.hpp",
    "tests/bench/*.cpp",
    "tests/bench/*.hpp",
    "tests/bench/CMakeLists.txt",
]


def say(msg: str) -> None:
    print(f"[bench] {msg}", flush=True)


# ------------------------------------------------------------ 1. packages
def ensure_packages() -> None:
    have_benchmark = any(
        Path(p).exists()
        for p in (
            "/usr/lib/x86_64-linux-gnu/cmake/benchmark/benchmarkConfig.cmake",
            "/usr/lib/cmake/benchmark/benchmarkConfig.cmake",
        )
    )
    missing = [
        pkg
        for pkg, ok in (
            ("libbenchmark-dev", have_benchmark),
            ("cmake", shutil.which("cmake")),
            ("g++", shutil.which("g++")),
        )
        if not ok
    ]
    if not missing:
        return
    if os.geteuid() != 0:
        raise SystemExit(
            (
                f"[bench] missing Debian packages: {' '.join(missing)} (not root: install them "
                "with apt-get)"
            )
        )
    say(f"apt-get install {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", *missing]
    if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode != 0:
        say("apt-get update, then install again")
        if (
            subprocess.run(
                ["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL
            ).returncode
            != 0
        ):
            say("apt-get update reported errors; trying the install anyway")
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)


# ------------------------------------------------------------ 2. C++
def build_core() -> Path:
    """Configure and build tests/bench; return the binary."""
    ensure_packages()
    CMAKE_DIR.mkdir(parents=True, exist_ok=True)
    log = OUT / "cmake.log"
    with open(log, "w") as f:
        for cmd in (
            ["cmake", "-S", str(BENCH_SRC), "-B", str(CMAKE_DIR), "-DCMAKE_BUILD_TYPE=Release"],
            ["cmake", "--build", str(CMAKE_DIR), "-j2"],
        ):
            if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode != 0:
                print(log.read_text()[-4000:], file=sys.stderr)
                raise SystemExit(f"[bench] failed: {' '.join(cmd)} (log: {log})")
    return CMAKE_DIR / "bench_core"


#: What the shared-line binary runs: the reference's rows that its layout can change.
SHARED_LINE_FILTER = "^shared_line/(mt/destructor|destructor)/reference/"


def run_core(binary: Path) -> dict:
    """Run bench_core, then bench_core_shared_line beside it (if built) on
    its destructor and producer rows; one Google Benchmark JSON with both."""
    reps = int(os.environ.get("DC_BENCH_REPS", "3"))
    extra = (
        [f"--benchmark_min_time={os.environ['DC_BENCH_MIN_TIME']}"]
        if os.environ.get("DC_BENCH_MIN_TIME")
        else []
    )
    out = OUT / "core.json"
    say(f"{binary}: {reps} repetition(s) of every benchmark (about {reps * 60} s)")
    subprocess.run(
        [
            str(binary),
            f"--benchmark_out={out}",
            "--benchmark_out_format=json",
            f"--benchmark_repetitions={reps}",
            "--benchmark_display_aggregates_only=true",
            *extra,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    raw = json.loads(out.read_text())
    shared = binary.parent / "bench_core_shared_line"
    if shared.exists():
        out2 = OUT / "core-shared-line.json"
        say(
            (
                f"{shared}: the destructor and producer rows with head_, scheduled_ and the gate "
                "on one line"
            )
        )
        subprocess.run(
            [
                str(shared),
                f"--benchmark_out={out2}",
                "--benchmark_out_format=json",
                f"--benchmark_repetitions={reps}",
                "--benchmark_display_aggregates_only=true",
                f"--benchmark_filter={SHARED_LINE_FILTER}",
                *extra,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        raw2 = json.loads(out2.read_text())
        raw["benchmarks"] += raw2["benchmarks"]
        raw.setdefault("context", {})["shared_line_queue_field_align"] = raw2.get(
            "context", {}
        ).get("queue_field_align")
        out.write_text(json.dumps(raw, indent=1) + "\n")
    return raw


def core_rows(raw: dict) -> dict[str, dict]:
    """name -> {ns_per_item, items_per_second, counters}: the median of the
    repetitions (or the single run)."""
    runs: dict[str, list[dict]] = {}
    for b in raw["benchmarks"]:
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        runs.setdefault(b["run_name"], []).append(b)
    rows = {}
    for name, bs in runs.items():
        ips = statistics.median(b["items_per_second"] for b in bs)
        counters = {
            k: v
            for k, v in bs[0].items()
            if k
            not in (
                "name",
                "family_index",
                "per_family_instance_index",
                "run_name",
                "run_type",
                "repetitions",
                "repetition_index",
                "threads",
                "iterations",
                "real_time",
                "cpu_time",
                "time_unit",
                "items_per_second",
                "aggregate_name",
                "aggregate_unit",
            )
        }
        if "floor_ratio" in counters:
            # A paired row's ratio (BM_ProducersPaired): each repetition's is
            # a median over its iterations; the row's is the median of those.
            counters["floor_ratio"] = statistics.median(b["floor_ratio"] for b in bs)
        rows[_short(name)] = {
            "ns_per_item": 1e9 / ips,
            "items_per_second": ips,
            "repetitions": len(bs),
            "counters": counters,
        }
    return rows


def paired(core: dict, row: str) -> str | None:
    """The paired row of a producer row (mt/destructor/V/threads:T ->
    paired/mt/destructor/V/threads:T) when the run has it, else None."""
    name = "paired/" + row
    return name if "floor_ratio" in core.get(name, {}).get("counters", {}) else None


def throughput_ratio(core: dict, row: str, floor: str) -> tuple[str, str, float]:
    """A producer row's throughput over the bare Treiber push's at the same
    count: (kind, numerator, value).  The paired row's floor_ratio when the
    run has one (kind "paired_throughput": both timed in each iteration, back
    to back), else the quotient of the two separate rows ("throughput")."""
    p = paired(core, row)
    if p is not None:
        return "paired_throughput", p, core[p]["counters"]["floor_ratio"]
    return "throughput", row, core[row]["items_per_second"] / core[floor]["items_per_second"]


def _short(run_name: str) -> str:
    """Drop Google Benchmark's decorations (iterations:N, repeats:N, manual_time)."""
    parts = [
        p
        for p in run_name.split("/")
        if not p.startswith(("iterations:", "repeats:")) and p not in ("manual_time", "real_time")
    ]
    return "/".join(parts)


# ------------------------------------------------------------ 3. end to end
def matrix_names() -> list[str]:
    only = os.environ.get("DC_BENCH_ONLY")
    if only:
        return [n for n in only.split(",") if n]
    sys.path.insert(0, str(REPO / "tools"))
    import matrix  # noqa: PLC0415  (tools/matrix.py: the interpreters of the matrix)

    return [it.name for it in matrix.MATRIX]


E2E_SCRIPT = r"""
set -u
out=build/bench/e2e/$DC_INTERPRETER_NAME
mkdir -p "$out"
$PY -m pip install -q --disable-pip-version-check -r tests/bench/requirements.txt \
  >"$out/pip.log" 2>&1 \
  || { echo "pip install failed: $(tail -3 "$out/pip.log")" >"$out/error.txt"; exit 3; }
$PY -c 'import sys, json, platform; print(json.dumps({"version": sys.version.split()[0],
  "debug": hasattr(sys, "gettotalrefcount"), "compiler": platform.python_compiler()}))' \
  >"$out/python.json"
for v in VARIANTS; do
  got=$(DEFERRED_CLEANUP_VARIANT=$v $PY -c 'import deferred_cleanup as d; print(d.variant())' \
    2>"$out/$v.variant.err") || got=""
  if [ "$got" != "$v" ]; then
    echo "not available in this build (variant() gave '${got}'):" \
      "$(tail -1 "$out/$v.variant.err")" >"$out/$v.missing"
    continue
  fi
  rm -f "$out/$v.pyperf.json"
  DEFERRED_CLEANUP_VARIANT=$v $PY tests/bench/e2e_pyperf.py --quiet \
    --inherit-environ DEFERRED_CLEANUP_VARIANT \
    PYPERF_OPTS --payloads PAYLOADS -o "$out/$v.pyperf.json" >"$out/$v.pyperf.log" 2>&1 \
    || echo "pyperf failed: $(tail -3 "$out/$v.pyperf.log")" >"$out/$v.error"
  DEFERRED_CLEANUP_VARIANT=$v $PY tests/bench/e2e.py counts --payloads PAYLOADS --big BIG \
    >"$out/$v.counts.json" 2>"$out/$v.counts.err" \
    || echo "counts failed: $(tail -3 "$out/$v.counts.err")" >>"$out/$v.error"
done
"""


def run_e2e(names: list[str]) -> dict:
    opts = os.environ.get("DC_BENCH_PYPERF", "-p 1 -n 3 -w 1 -l 1")
    payloads = int(os.environ.get("DC_BENCH_PAYLOADS", E2E_PAYLOADS))
    big = int(os.environ.get("DC_BENCH_BIG", E2E_BIG))
    script = (
        E2E_SCRIPT.replace("VARIANTS", " ".join(VARIANTS))
        .replace("PYPERF_OPTS", opts)
        .replace("PAYLOADS", str(payloads))
        .replace("BIG", str(big))
    )
    sys.path.insert(0, str(REPO / "tools"))
    import matrix  # noqa: PLC0415  (tools/matrix.py: run_in_env)

    results = {}
    for name in names:
        out = OUT / "e2e" / name
        if out.exists():
            shutil.rmtree(out)
        say(f"{name}: pyperf ({opts}, {payloads} payloads) and pending-call counts, per variant")
        t0 = time.monotonic()
        log = OUT / "e2e" / f"{name}.log"
        rc = matrix.run_in_env(name, script, log)
        results[name] = collect_e2e(name, rc, log)
        say(
            f"{name}: done in {time.monotonic() - t0:.0f} s"
            + ("" if rc == 0 else f" (exit {rc}: {results[name].get('missing', '')})")
        )
    return results


def _pyperf_values(path: Path) -> dict:
    """benchmark name -> {mean, median, stdev, values} in seconds."""
    data = json.loads(path.read_text())
    out = {}
    for b in data["benchmarks"]:
        name = b.get("metadata", {}).get("name") or data.get("metadata", {}).get("name")
        values = [v for run in b["runs"] for v in run.get("values", [])]
        if values:  # pyperf stores seconds per loop
            out[name] = {
                "mean": statistics.fmean(values),
                "median": statistics.median(values),
                "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
                "n": len(values),
            }
    return out


def collect_e2e(name: str, rc: int, log: Path) -> dict:
    out = OUT / "e2e" / name
    r: dict = {"variants": {}}
    if not (out / "python.json").exists():
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
        r["missing"] = " / ".join(tail) or f"exit {rc}"
        if (out / "error.txt").exists():
            r["missing"] = (out / "error.txt").read_text().strip()
        return r
    r["python"] = json.loads((out / "python.json").read_text())
    for v in VARIANTS:
        if (out / f"{v}.missing").exists():
            r["variants"][v] = {"missing": (out / f"{v}.missing").read_text().strip()}
            continue
        entry: dict = {}
        if (out / f"{v}.error").exists():
            entry["error"] = (out / f"{v}.error").read_text().strip()
        if (out / f"{v}.pyperf.json").exists():
            entry["pyperf"] = _pyperf_values(out / f"{v}.pyperf.json")
        if (out / f"{v}.counts.json").exists() and (out / f"{v}.counts.json").stat().st_size:
            entry["counts"] = json.loads((out / f"{v}.counts.json").read_text())
        r["variants"][v] = entry
    return r


# ------------------------------------------------------------ 4. report
def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux).

    :returns: the first ``model name`` line's value (str); "" where there is
        none or the file cannot be read
    """
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def machine() -> dict:
    cpu = cpu_model()
    env = os.environ
    if env.get("DC_BENCH_COMPILER"):
        compiler = env["DC_BENCH_COMPILER"]
    else:
        gxx = subprocess.run(
            ["g++", "--version"], capture_output=True, text=True
        ).stdout.splitlines()[:1]
        compiler = gxx[0] if gxx else ""
    bench_ver = (
        env.get("DC_BENCH_GBENCH")
        or subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "libbenchmark-dev"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    if env.get("DC_COMMIT"):
        commit = env["DC_COMMIT"]
    else:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
        commit += "+uncommitted" if dirty else ""
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "os": _os_name(),
        "compiler": compiler,
        "google_benchmark": bench_ver,
        "commit": commit,
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "shared": env.get(
            "DC_BENCH_MACHINE_NOTE",
            "a 2-core virtual machine shared with other jobs: the absolute times are noisy",
        ),
    }


def provenance() -> dict:
    """The stamp of the measured sources: DC_BENCH_PROVENANCE's file (made
    where the binaries were built), else the tree here (tools/provenance.py)."""
    path = os.environ.get("DC_BENCH_PROVENANCE")
    if path:
        return json.loads(Path(path).read_text())
    sys.path.insert(0, str(REPO / "tools"))
    import provenance as prov  # noqa: PLC0415  (tools/provenance.py)

    return prov.stamp(SOURCE_GLOBS)


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.system()


def _variants(core: dict) -> list[str]:
    return [v for v in VARIANTS if f"destructor/{v}/outstanding" in core]


def batch_ns(core: dict, name: str) -> float:
    """ns per operation of a batch16 row, the clock pair's share taken off."""
    clock = core["clock/steady_clock_pair"]["ns_per_item"]  # per op: pair / 16
    return core[name]["ns_per_item"] - clock


def _pow10(n: int) -> str:
    """10^k for a power of ten, else the number."""
    k = round(math.log10(n))
    return f"10^{k}" if 10**k == n else str(n)


def _row(
    h: list,
    id: str,
    measure: str,
    num: str,
    den: str,
    kind: str,
    value: float,
    target: str = "",
    ok: bool | None = None,
) -> None:
    h.append(
        dict(
            id=id,
            measure=measure,
            numerator=num,
            denominator=den,
            kind=kind,
            value=value,
            target=target,
            ok=ok,
        )
    )


def headline(core: dict, e2e: dict) -> list[dict]:
    """The headline ratios; each names the two measurements it divides."""
    h: list[dict] = []
    floor = "floor/treiber_push"
    ns = lambda k: core[k]["ns_per_item"]  # noqa: E731
    ips = lambda k: core[k]["items_per_second"]  # noqa: E731
    for v in _variants(core):
        num = f"destructor/{v}/outstanding"
        value = ns(num) / ns(floor)
        ref = v == "reference"
        _row(
            h,
            f"fast_path.{v}",
            f"{v}: destructor path, pending call outstanding / bare Treiber push",
            num,
            floor,
            "ns",
            value,
            f"<= {TARGET_FAST_PATH}" if ref else "",
            value <= TARGET_FAST_PATH if ref else None,
        )
    for v in _variants(core):
        num = f"batch16/destructor/{v}/none"
        den = "batch16/floor/treiber_push"
        _row(
            h,
            f"no_call.{v}",
            f"{v}: destructor path, no pending call outstanding / bare Treiber push",
            num,
            den,
            "batch_ns",
            batch_ns(core, num) / batch_ns(core, den),
        )
    num, den = "batch16/destructor/reference/none", "batch16/destructor/cuda-core-1.2/none"
    if num in core and den in core:
        value = batch_ns(core, num) / batch_ns(core, den)
        _row(
            h,
            "slow_path.reference",
            "reference / cuda-core-1.2: destructor path, no pending call outstanding",
            num,
            den,
            "batch_ns",
            value,
            f"<= {TARGET_SLOW_PATH}",
            value <= TARGET_SLOW_PATH,
        )
    for t in THREAD_COUNTS:
        tre, mtx = f"mt/treiber_push/threads:{t}", f"mt/mutex_vector/threads:{t}"
        if tre not in core:
            continue
        for v in _variants(core):
            num = f"mt/destructor/{v}/threads:{t}"
            if num not in core:
                continue
            kind, num, value = throughput_ratio(core, num, tre)
            ref = v == "reference"
            _row(
                h,
                f"throughput.{v}.{t}",
                f"{v}: throughput with {t} producers / bare Treiber push",
                num,
                tre,
                kind,
                value,
                f">= {TARGET_THROUGHPUT}" if ref else "",
                value >= TARGET_THROUGHPUT if ref else None,
            )
        num = f"mt/destructor/reference/threads:{t}"
        if num in core and mtx in core:
            _row(
                h,
                f"vs_mutex.reference.{t}",
                f"reference: throughput with {t} producers / mutex + vector",
                num,
                mtx,
                "throughput",
                ips(num) / ips(mtx),
            )
        shared = f"shared_line/mt/destructor/reference/threads:{t}"
        if num in core and shared in core:
            _row(
                h,
                f"separate_lines.reference.{t}",
                f"reference: throughput with {t} producers, fields on "
                "their own cache lines / on one line",
                num,
                shared,
                "throughput",
                ips(num) / ips(shared),
            )
    # The drain's target is against the floor that also runs the cleanups
    # oldest first (take, reverse, walk): the queue promises that order (the
    # contract's entry/pending-call row; the early stop re-queues the rest in
    # it).  The one-pass floor (take, walk newest first, as cuda-core 1.2.0's
    # drain walks) is context: the ratio to it is what the order costs.
    for n in DRAIN_SIZES:
        num, den = f"drain/reference/{n}", f"floor/drain_reversed/{n}"
        if num in core and den in core:
            value = ns(num) / ns(den)
            _row(
                h,
                f"drain_reversed.reference.{n}",
                f"reference: drain of {_pow10(n)} items per item / the oldest-first floor "
                "(one exchange, one reversal, one walk, the same cleanup)",
                num,
                den,
                "ns",
                value,
                f"<= {TARGET_DRAIN}",
                value <= TARGET_DRAIN,
            )
        den = f"floor/drain/{n}"
        if num in core and den in core:
            _row(
                h,
                f"drain_floor.reference.{n}",
                f"reference: drain of {_pow10(n)} items per item / the one-pass floor "
                "(newest first: what the oldest-first order costs)",
                num,
                den,
                "ns",
                ns(num) / ns(den),
            )
    # Growth with the list's length, 10^7 against 10^3, is context only: the
    # two sizes live in different cache levels, and the floor grows too (its
    # own row), so the target is the ratio to the floor at the same size.
    lo, hi = DRAIN_SIZES[0], DRAIN_SIZES[-1]
    for who, row in (
        ("reference", "drain/reference"),
        ("oldest-first floor", "floor/drain_reversed"),
    ):
        if f"{row}/{lo}" in core and f"{row}/{hi}" in core:
            _row(
                h,
                f"drain_growth.{'reference' if who == 'reference' else 'floor'}",
                f"{who}: per-item drain cost, {_pow10(hi)} items / {_pow10(lo)} items",
                f"{row}/{hi}",
                f"{row}/{lo}",
                "ns",
                ns(f"{row}/{hi}") / ns(f"{row}/{lo}"),
            )
    mid = DRAIN_SIZES[1]
    for v in _variants(core):
        num, den = f"drain/{v}/{mid}", f"direct/{mid}"
        if num in core and den in core:
            _row(
                h,
                f"consumer_cpp.{v}",
                f"{v}: C++ drain of 10^5 items / the same cleanups run directly",
                num,
                den,
                "ns",
                ns(num) / ns(den),
            )
    for name, r in e2e.items():
        ref = r.get("variants", {}).get("reference", {})
        pp, counts = ref.get("pyperf", {}), ref.get("counts", {})
        if "consume_queue" in pp and "consume_direct" in pp:
            value = pp["consume_queue"]["median"] / pp["consume_direct"]["median"]
            h.append(
                dict(
                    id=f"consumer_py.{name}",
                    measure=f"reference on {name}: releasing 10^5 payloads "
                    "through the queue / running the same cleanups directly",
                    numerator=f"e2e/{name}/reference/consume_queue",
                    denominator=f"e2e/{name}/reference/consume_direct",
                    kind="e2e_median",
                    value=value,
                    target=f"<= {TARGET_CONSUMER}",
                    ok=value <= TARGET_CONSUMER,
                )
            )
        big = counts.get("burst_big")
        if big:
            value = big["pending_calls"] / big["payloads"]
            h.append(
                dict(
                    id=f"coalescing.{name}",
                    measure=f"reference on {name}: pending calls per payload, "
                    f"{big['payloads']} payloads from 8 threads",
                    numerator=f"e2e/{name}/reference/pending_calls",
                    denominator=f"e2e/{name}/reference/payloads",
                    kind="count",
                    value=value,
                    target=f"<= {TARGET_CALLS_PER_PAYLOAD}",
                    ok=value <= TARGET_CALLS_PER_PAYLOAD,
                )
            )
    return h


def slow_path_breakdown(core: dict) -> dict | None:
    """The slow-path breakdown: each ABLATIONS row's slow path (batch16 row,
    the clock pair's share taken off) and fast path, and their ratios to
    cuda-core-1.2's rows of the same run; None when the run lacks the rows
    (a binary built before them)."""
    base_none = f"batch16/destructor/{BREAKDOWN_BASE}/none"
    base_out = f"destructor/{BREAKDOWN_BASE}/outstanding"
    if base_none not in core or base_out not in core:
        return None
    rows = []
    for v, removed in [*ABLATIONS, (BREAKDOWN_BASE, "(the shipped shape: the denominator)")]:
        none, out = f"batch16/destructor/{v}/none", f"destructor/{v}/outstanding"
        if none not in core or out not in core:
            continue
        slow = batch_ns(core, none)
        fast = core[out]["ns_per_item"]
        rows.append(
            dict(
                variant=v,
                removed=removed,
                slow_row=none,
                fast_row=out,
                slow_ns=slow,
                fast_ns=fast,
                slow_ratio=slow / batch_ns(core, base_none),
                fast_ratio=fast / core[base_out]["ns_per_item"],
                host_calls_per_op=core[none]["counters"].get("host_calls_per_op"),
            )
        )
    if not any(r["variant"] == "reference-no-gate" for r in rows):
        return None
    return dict(
        base=BREAKDOWN_BASE,
        target=f"<= {TARGET_SLOW_PATH}",
        kind="batch_ns",
        rows=rows,
    )


def one_producer_breakdown(core: dict) -> dict | None:
    """The one-producer breakdown: each ONE_PRODUCER_ABLATIONS row's
    throughput at one producer divided by the bare Treiber push's, and its
    fast path divided by the Treiber push row, all of the same run.

    Args:
        core: core_rows() of one run (name -> ns_per_item, items_per_second).
    Returns:
        bench.json's ``one_producer_breakdown``: floor, fast_floor, target,
        kind and rows (variant, removed, row, fast_row, ns_per_item,
        throughput_ratio, fast_ns, fast_ratio, floor_ns: from the paired row
        paired/mt/destructor/V/threads:1 when the run has it, whose
        floor_ns is its own floor's, timed beside it); None when the run
        lacks the floor or the push-only row (a binary built before them).
    """
    if ONE_PRODUCER_FLOOR not in core or (
        "mt/destructor/reference-push-only/threads:1" not in core
    ):
        return None
    floor = core[ONE_PRODUCER_FLOOR]
    fast_floor = core.get(ONE_PRODUCER_FAST_FLOOR)
    rows = []
    for v, removed in ONE_PRODUCER_ABLATIONS:
        mt, fast = f"mt/destructor/{v}/threads:1", f"destructor/{v}/outstanding"
        if mt not in core:
            continue
        fast_ns = core[fast]["ns_per_item"] if fast in core else None
        kind, row, ratio = throughput_ratio(core, mt, ONE_PRODUCER_FLOOR)
        ns_item = core[row]["ns_per_item"]
        rows.append(
            dict(
                variant=v,
                removed=removed,
                row=row,
                fast_row=fast,
                ns_per_item=ns_item,
                # A paired row's own floor, timed beside it (ratio = floor / row).
                floor_ns=ns_item * ratio if kind == "paired_throughput" else floor["ns_per_item"],
                throughput_ratio=ratio,
                fast_ns=fast_ns,
                fast_ratio=(
                    fast_ns / fast_floor["ns_per_item"]
                    if fast_ns is not None and fast_floor
                    else None
                ),
            )
        )
    if not any(r["variant"] == "reference" for r in rows):
        return None
    return dict(
        floor=ONE_PRODUCER_FLOOR,
        fast_floor=ONE_PRODUCER_FAST_FLOOR,
        target=f">= {TARGET_THROUGHPUT}",
        kind="throughput",
        rows=rows,
    )


def _ratio(x: float, bound: float) -> str:
    """x with two decimals, or three where two would print the bound itself
    for a value on the other side of it (0.899 against 0.9)."""
    two = f"{x:.2f}"
    return f"{x:.3f}" if two == f"{bound:.2f}" and x != bound else two


def one_producer_reason(section: dict) -> str:
    """The sentences the Performance page states about one producer,
    generated from the breakdown: the reference's ratio against the target,
    the nanoseconds per item it spends above the floor, the piece whose
    removal saves the most of them, what the re-arm look at its old rate
    costs (``reference-sample-16``, not a piece: ONE_PRODUCER_CHANGED), and
    what the push alone reaches.

    Args:
        section: bench.json's ``one_producer_breakdown``.
    Returns:
        reStructuredText sentences (numbers with two decimals).
    Raises:
        StopIteration: the section has no ``reference`` row.
    """
    rows = {r["variant"]: r for r in section["rows"]}
    ref = rows["reference"]
    bound = float(section["target"].split()[1])
    r0 = ref["throughput_ratio"]
    above = ref["ns_per_item"] - ref["floor_ns"]
    met = "meeting" if r0 >= bound else "missing"
    out = [
        f"At one producer the reference reaches {_ratio(r0, bound)}× the bare Treiber push's "
        f"throughput, {met} the target of {bound:g}×: {ref['ns_per_item']:.2f} ns per item "
        f"against {ref['floor_ns']:.2f} ns, {above:.2f} ns above the floor."
    ]
    pieces = [
        r
        for v, r in rows.items()
        if v not in ("reference", "reference-push-only", *ONE_PRODUCER_CHANGED)
    ]
    if pieces:
        top = max(pieces, key=lambda r: ref["ns_per_item"] - r["ns_per_item"])
        saved = ref["ns_per_item"] - top["ns_per_item"]
        others = ", ".join(
            f"``{r['variant']}`` {r['throughput_ratio']:.2f}×" for r in pieces if r is not top
        )
        if saved > 0:
            out.append(
                f"Removing one piece at a time, ``{top['variant']}`` saves the most: "
                f"{saved:.2f} ns per item, reaching {top['throughput_ratio']:.2f}×"
                + (f" (the others: {others})." if others else ".")
            )
        else:
            out.append(
                "No single piece's removal makes the row faster on this run"
                + (
                    f" ({others}, ``{top['variant']}`` {top['throughput_ratio']:.2f}×)."
                    if others
                    else "."
                )
            )
    old = rows.get("reference-sample-16")
    if old is not None:
        d = old["ns_per_item"] - ref["ns_per_item"]
        out.append(
            f"With the re-arm look at its old rate (``reference-sample-16``) one producer "
            f"reaches {old['throughput_ratio']:.2f}×, {abs(d):.2f} ns per item "
            f"{'more' if d >= 0 else 'less'} than the reference."
        )
    push = rows.get("reference-push-only")
    if push is not None:
        p = push["throughput_ratio"]
        tail = (
            "so on this run no fast path on this queue could meet the target."
            if p < bound
            else "so the queue's push itself does not stand in the way of the target."
        )
        out.append(f"The queue's push alone (``reference-push-only``) reaches {p:.2f}×, {tail}")
    return " ".join(out)


#: The bound's row: the reference without the gate (the claim, the host call
#: and re-arm), which the one-state-word candidate does plus one RMW.
BOUND_ROW = "reference-no-gate"


def one_word_bound(section: dict) -> str:
    """The sentence the Performance page states about the one-state-word
    candidate (docs/design/scheduling.rst, ``ONE_WORD``), generated from the
    breakdown: ONE_WORD's slow path does at least the claim and one more
    read-modify-write (the ``fetch_sub`` on leave), so the
    ``reference-no-gate`` row (the claim only) bounds it from below.

    Args:
        section: bench.json's ``slow_path_breakdown``.
    Returns:
        one sentence (reStructuredText) naming the row's ratio and the target.
    Raises:
        StopIteration: the section has no ``reference-no-gate`` row.
    """
    row = next(r for r in section["rows"] if r["variant"] == BOUND_ROW)
    ratio, bound = row["slow_ratio"], float(section["target"].split()[1])
    head = (
        f"Without the gate the reference's slow path takes {ratio:.2f}× the "
        f"``{section['base']}`` shape's, "
    )
    if ratio > bound:
        return head + (
            f"above the target of {bound:g}×; ``ONE_WORD`` does at least that work plus one "
            "read-modify-write, so on this run ``ONE_WORD`` cannot meet the target."
        )
    return head + (
        f"within the target of {bound:g}×; ``ONE_WORD`` does that work plus one "
        "read-modify-write, so this bound does not decide whether ``ONE_WORD`` meets the "
        "target: only a measurement of ``ONE_WORD`` would."
    )


def off_by(row: dict) -> float | None:
    """How far a missed target is, as a factor (>= 1): value / bound for an
    upper bound, bound / value for a lower bound; None when met or no target."""
    if row["ok"] is not False or not row["target"] or row["value"] is None:
        return None
    op, bound = row["target"].split()[:2]
    bound = float(bound)
    if op == "<=":
        return row["value"] / bound
    return bound / row["value"] if row["value"] else math.inf


def fmt_value(row: dict) -> str:
    v = row["value"]
    if row["kind"] == "count":
        return f"{v:.2e}" if v else "0"
    return f"{v:.2f}"


def verdict(row: dict) -> str:
    if row["ok"] is None:
        return ""
    return "met" if row["ok"] else f"missed by {miss_percent(row):.1f}%"


def miss_percent(row: dict) -> float:
    """How far a missed target is, in percent of its bound: (value - bound) /
    bound for an upper bound, (bound - value) / bound for a lower bound."""
    op, bound = row["target"].split()[:2]
    bound = float(bound)
    return 100.0 * ((row["value"] - bound) if op == "<=" else (bound - row["value"])) / bound


def md_table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def text_table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [head, *rows]
    )


def report(data: dict) -> tuple[str, str]:
    """(markdown, printed text) of the run."""
    m = data["machine"]
    head = ["measure", "ratio", "target", ""]
    rows = [[h["measure"], fmt_value(h), h["target"], verdict(h)] for h in data["headline"]]
    core_head = ["benchmark", "ns per item", "items/s", "counters"]
    core = [
        [
            k,
            f"{r['ns_per_item']:.2f}",
            f"{r['items_per_second']:.3g}",
            ", ".join(
                f"{ck}={cv:g}"
                for ck, cv in sorted(r["counters"].items())
                if isinstance(cv, (int, float))
            ),
        ]
        for k, r in data["core"].items()
    ]
    e2e_head = [
        "interpreter",
        "variant",
        "burst_pending ms",
        "burst_entry ms",
        "consume_queue ms",
        "consume_direct ms",
        "pending calls (10^5)",
        "pending calls (entry)",
        "pending calls (10^6)",
    ]
    e2e_rows = []
    for name, r in data["e2e"].items():
        if "missing" in r:
            e2e_rows.append([name, "-", "missing: " + r["missing"][:80], "", "", "", "", "", ""])
            continue
        for v, e in r["variants"].items():
            if "missing" in e:
                e2e_rows.append([name, v, "not in this build", "", "", "", "", "", ""])
                continue
            pp, c = e.get("pyperf", {}), e.get("counts", {})
            ms = lambda k, pp=pp: f"{pp[k]['median'] * 1e3:.1f}" if k in pp else "-"  # noqa: E731
            cnt = lambda k, c=c: str(c[k]["pending_calls"]) if k in c else "-"  # noqa: E731
            entry = (
                "starved"
                if "burst_entry" not in pp and c.get("burst_entry", {}).get("starved")
                else ms("burst_entry")
            )
            e2e_rows.append(
                [
                    name,
                    v,
                    ms("burst_pending"),
                    entry,
                    ms("consume_queue"),
                    ms("consume_direct"),
                    cnt("burst_pending"),
                    cnt("burst_entry"),
                    cnt("burst_big"),
                ]
            )
    intro = (
        f"Machine: {m['cpu']}, {m['cores']} cores ({m['shared']}); {m['os']}, kernel "
        f"{m['kernel']}; "
        f"{m['compiler']}; Google Benchmark {m['google_benchmark']}; commit {m['commit']}; "
        f"{m['date_utc']}; "
        f"load average at the start {m['load_average']}."
    )
    md = "\n\n".join(
        [
            "# deferred-cleanup benchmarks",
            intro,
            "## Headline ratios (one run)",
            md_table(head, rows),
            "## C++ microbenchmarks (medians of the repetitions)",
            md_table(core_head, core),
            "## End to end (pyperf medians; pending calls per burst)",
            md_table(e2e_head, e2e_rows),
            "",
        ]
    )
    text = intro + "\n\n" + text_table(head, rows)
    section = data.get("slow_path_breakdown")
    if section:
        b_head = ["row", "removed", "slow ns", f"/ {section['base']}", "fast ns", "/ fast"]
        b_rows = [
            [
                r["variant"],
                r["removed"],
                f"{r['slow_ns']:.1f}",
                f"{r['slow_ratio']:.2f}",
                f"{r['fast_ns']:.2f}",
                f"{r['fast_ratio']:.2f}",
            ]
            for r in section["rows"]
        ]
        bound = one_word_bound(section).replace("``", "")
        md += "\n\n## Slow-path breakdown\n\n" + md_table(b_head, b_rows) + "\n\n" + bound + "\n"
        text += "\n\nSlow-path breakdown\n" + text_table(b_head, b_rows) + "\n" + bound
    one = data.get("one_producer_breakdown")
    if one:
        o_head = ["row", "removed", "ns per item", "/ floor throughput", "fast ns", "/ fast floor"]
        o_rows = [
            [
                r["variant"],
                r["removed"],
                f"{r['ns_per_item']:.2f}",
                f"{r['throughput_ratio']:.2f}",
                f"{r['fast_ns']:.2f}" if r["fast_ns"] is not None else "",
                f"{r['fast_ratio']:.2f}" if r["fast_ratio"] is not None else "",
            ]
            for r in one["rows"]
        ]
        reason = one_producer_reason(one).replace("``", "")
        md += (
            "\n\n## One-producer breakdown\n\n" + md_table(o_head, o_rows) + "\n\n" + reason + "\n"
        )
        text += "\n\nOne-producer breakdown\n" + text_table(o_head, o_rows) + "\n" + reason
    return md, text


def main(argv: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    if argv == ["--report-only"]:  # rebuild the report from the raw results of the last run
        m = (
            json.loads((OUT / "machine.json").read_text())
            if (OUT / "machine.json").exists()
            else machine()
        )
        raw = json.loads((OUT / "core.json").read_text())
        core = core_rows(raw)
        names = [n for n in matrix_names() if (OUT / "e2e" / n).is_dir()]
        e2e = {name: collect_e2e(name, 0, OUT / "e2e" / f"{name}.log") for name in names}
        data = {"machine": m, "core_context": raw.get("context", {}), "core": core, "e2e": e2e}
    elif argv:
        print(__doc__)
        return 2
    else:
        m = machine()
        (OUT / "machine.json").write_text(json.dumps(m) + "\n")
        say(f"{m['cpu']}, {m['cores']} cores, load average {m['load_average']}")
        prebuilt = os.environ.get("DC_BENCH_BINARY_DIR")
        binary = Path(prebuilt).resolve() / "bench_core" if prebuilt else build_core()
        raw = run_core(binary)
        core = core_rows(raw)
        e2e = run_e2e(matrix_names()) if os.environ.get("DC_BENCH_NO_E2E") != "1" else {}
        data = {"machine": m, "core_context": raw.get("context", {}), "core": core, "e2e": e2e}
    data["headline"] = headline(core, e2e)
    breakdown = slow_path_breakdown(core)
    if breakdown is not None:
        data["slow_path_breakdown"] = breakdown
    one = one_producer_breakdown(core)
    if one is not None:
        data["one_producer_breakdown"] = one
    data["provenance"] = provenance()
    for h in data["headline"]:
        if isinstance(h["value"], float) and not math.isfinite(h["value"]):
            h["value"] = None
        h["off_by"] = off_by(h)
    (OUT / "bench.json").write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    md, text = report(data)
    (OUT / "bench.md").write_text(md)
    print()
    print(text)
    print()
    say(
        f"wrote {(OUT / 'bench.json').relative_to(REPO)} and {(OUT / 'bench.md').relative_to(REPO)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The interpreter matrix: every CPython from 3.10 to 3.15 this machine can have.

One command provisions each interpreter, a virtual environment for it with the
pinned test and build requirements, builds ``deferred_cleanup._native`` into it,
and runs a job there (the probe or the pytest suite).  Everything it makes lives
outside the work tree (``$DC_CACHE``, default ``~/.cache/deferred-cleanup``)
except the per-interpreter CMake trees under ``build/<name>``; each step leaves a
stamp and is skipped when nothing it depends on changed, so a second run costs
seconds.

Sources:
  * pyenv            3.10, 3.11, 3.12, 3.13 (highest installed patch of each)
  * debian-sid       3.13 (newest), 3.14, 3.15 and the 3.14 debug build, from a
                     Debian unstable root made by tools/sid-root.sh; jobs run
                     inside it with the work tree bind-mounted at the same path.

  * path               any interpreter you name with --python PATH (or a path
                     in place of NAME): e.g. a CPython build tree's ./python.
                     Only that one is used: no pyenv, no Debian root, no root.

Usage:
  tools/matrix.py provision [--only NAME,... | --python PATH]
  tools/matrix.py build     [--only NAME,... | --python PATH]
  tools/matrix.py probe     [--only NAME,... | --python PATH]
  tools/matrix.py test      [--only NAME,... | --python PATH] [--no-once] [--load N]
                            [-- PYTEST_ARGS...]
  tools/matrix.py run NAME|PATH -- CMD...      run CMD with NAME's python as $PY
  tools/matrix.py python NAME|PATH             print the python path to use for NAME

With --python PATH the matrix has one column: a virtual environment made from
PATH under $DC_CACHE/venvs/ and this checkout's build installed into it (the
CMake tree under build/).  Its name and source are DC_INTERPRETER_NAME and
DC_INTERPRETER_SOURCE when set, else derived: cp<major><minor>[t][d]-custom
(t free-threaded, d debug) and path:PATH.  The run-once checks (ONCE_CHECKS:
docs, model and litmus, hardware) need the full matrix and are left out.
`make probe PYTHON=PATH` and `make test PYTHON=PATH` pass --python PATH.

Every job runs with DC_MATRIX=1 in its environment: tests/conftest.py runs the
tests marked docs, tools, hardware and soak only then (plain pytest skips them).

`test` runs its jobs (each interpreter's suite, each run-once check: one
pytest session each) up to --jobs at once (default: one per core plus one),
the longest first, never two that write the same build directory
(SHARED_DIRS); each
job's output goes to build/logs/test-JOB.log (one at a time, as with --jobs 1
or a single job: to the console) and a
failed job's pytest failures are printed.  It holds every environment's lock
from provisioning to the last job.  It ends with one table row per job with
its wall time and its CPU time (user + system of every process the job
started and waited for: os.wait4's rusage of the job's pytest), then the
totals, builds included and this command's own CPU time added; the
same table and totals go to build/logs/test-summary.txt (and the totals, in
seconds, to build/logs/test-summary.json).  `--load N` keeps N
spinning processes (plain Python loops, one each) running for the whole
command, the way `make repeat` loads the machine: `make test LOAD=8` is a
loaded run; their own CPU time is not counted.

Under CI=true a missing interpreter 3.10…3.15 is an error.  The line
"free-threaded: ..." is derived from what each interpreter reports
(sysconfig Py_GIL_DISABLED); neither pyenv here nor Debian unstable has such
a build, so it says "not available".

Only the standard library is used here: this script runs on whatever python3
the machine has before anything is provisioned.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import glob
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

if sys.version_info < (3, 10):  # before anything that needs 3.10 (zip(strict=), X | None)
    sys.stderr.write(
        f"[matrix] tools/matrix.py needs Python 3.10 or newer to run, and {sys.executable} is "
        f"{sys.version.split()[0]}: run it with another python3 (make picks one itself; "
        "MATRIX_PYTHON=... names it)\n"
    )
    sys.exit(2)

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(
    os.environ.get("DC_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "deferred-cleanup"
)
# Compiler outputs, keyed by ccache on the preprocessed source and the
# compiler's arguments: the host-side builds of the extension (here) and
# tools/mutate.py's builds share it, across runs and checkouts.
CCACHE_DIR = CACHE / "ccache"
# What ccache needs to cache a precompiled header's creation and its use
# through ``-include`` (DC_PCH in TEST_BUILD_CONFIG): ccache's manual,
# "Precompiled headers".  time_macros: nothing we compile uses __TIME__ or
# __DATE__.
CCACHE_SLOPPINESS = "pch_defines,time_macros"
SID = REPO / "tools" / "sid-root.sh"
SID_ROOT = CACHE / "sid-root"
SID_VENVS = "/opt/deferred-cleanup/venvs"  # path inside the sid root
# ccache's directory for the builds inside the sid root (a path inside the
# root: it lives and goes with the root's compiler, like SID_VENVS).
SID_CCACHE = "/opt/deferred-cleanup/ccache"
BUILD = REPO / "build"
IN_CI = os.environ.get("CI", "").lower() == "true"

# Pinned: what every environment gets (pytest, pytest-timeout,
# pybind11; scikit-build-core builds the extension without build isolation).
REQUIREMENTS = [
    "pytest==9.2.0",
    "pytest-timeout==2.4.0",
    "pybind11==3.1.0",
    "scikit-build-core==1.1.2",
]
PIP = "pip==25.3"
DOCS_REQUIREMENTS_FILE = REPO / "docs" / "requirements.txt"


@dataclasses.dataclass
class Interp:
    name: str  # matrix column, e.g. cp314-sid
    minor: str  # "3.14"
    source: str  # "pyenv" | "debian-sid"
    debug: bool = False
    sid_python: str = ""  # path inside the sid root
    custom: bool = False  # given with --python PATH: source is "path:PATH"
    extra_reqs: bool = False  # docs environment: also docs/requirements.txt
    base: str = ""  # for derived envs: the interpreter they reuse
    # filled by discovery
    python: str | None = None  # the base interpreter
    why_missing: str = ""

    @property
    def in_sid(self) -> bool:
        return self.source == "debian-sid"

    @property
    def key(self) -> str:
        """Directory name of its venv and CMake tree: the name, plus for a --python
        interpreter a hash of its path (two build trees of one version stay apart)."""
        if self.custom:
            return f"{self.name}-{hashlib.sha256(str(self.python).encode()).hexdigest()[:8]}"
        return self.name

    @property
    def venv(self) -> str:
        if self.in_sid:
            return f"{SID_VENVS}/{self.name}"
        return str(CACHE / "venvs" / self.key)

    @property
    def venv_host(self) -> Path:
        return (SID_ROOT / self.venv.lstrip("/")) if self.in_sid else Path(self.venv)

    @property
    def py(self) -> str:
        return f"{self.venv}/bin/python"


MATRIX = [
    Interp("cp310-pyenv", "3.10", "pyenv"),
    Interp("cp311-pyenv", "3.11", "pyenv"),
    Interp("cp312-pyenv", "3.12", "pyenv"),
    Interp("cp313-pyenv", "3.13", "pyenv"),
    Interp("cp313-sid", "3.13", "debian-sid", sid_python="/usr/bin/python3.13"),
    Interp("cp314-sid", "3.14", "debian-sid", sid_python="/usr/bin/python3.14"),
    Interp("cp315-sid", "3.15", "debian-sid", sid_python="/usr/bin/python3.15"),
    Interp("cp314d-sid", "3.14", "debian-sid", debug=True, sid_python="/usr/bin/python3.14d"),
]
# Not interpreters of their own: environments for the checks that run once.
DOCS_ENV = Interp("docs", "3.12", "pyenv", extra_reqs=True, base="cp312-pyenv")
TOOLS_ENV_NAME = "cp314-sid"  # spin, herd7 and cbmc live in the sid root
# The checks that run once, not per interpreter: (row label, environment, pytest marker).
# Each marker is excluded from the per-interpreter runs.  One line per check.
ONCE_CHECKS = [
    ("tools", TOOLS_ENV_NAME, "tools"),
    ("docs", "docs", "docs"),
    ("format", "docs", "format"),
    ("hardware", "cp312-pyenv", "hardware"),
    ("sanitize", "cp312-pyenv", "sanitize"),
    ("mutate", "cp312-pyenv", "mutate"),
    ("bench", "cp312-pyenv", "bench"),
    ("production", "cp312-pyenv", "production"),
    # The wheel's files (a header or CMake file removed, cmake --install): the same on every
    # interpreter, so once.  The examples themselves (marker ``examples``) are not a run-once
    # check: they run in every interpreter's job, where the wheel reuses its build tree.
    ("examples-package", "cp312-pyenv", "examples_package"),
]
# What the probe measures with (its provenance stamp's sources).
PROBE_SOURCES = [
    "reference/src/probe*.cpp",
    "reference/python/deferred_cleanup/probe*.py",
    "reference/python/deferred_cleanup/report*.py",
    "reference/python/deferred_cleanup/cpython_facts.py",
]
REQUIRED_MINORS = ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15"]


#: One line at a time on the console: prepare()'s builds and schedule()'s jobs
#: report from worker threads.
_SAY_LOCK = threading.Lock()

#: The child processes that run() and run_job() wait for, so that end_jobs()
#: ends them when the run is ended (a build runs on a worker thread of
#: prepare(), where no exception of the main thread reaches it).
_RUNNING: set = set()


def say(msg: str) -> None:
    with _SAY_LOCK:
        print(f"[matrix] {msg}", flush=True)


def run(cmd, log: Path | None = None, check=True, **kw) -> subprocess.CompletedProcess:
    """Run cmd; with log, send its output there and show the tail on failure.

    Thread: any (prepare()'s builds run it on worker threads); the child is in
    _RUNNING while it runs, so end_jobs() ends it.  Blocking: until it exits.
    Errors: SystemExit with the log's path when it fails and check is true.
    """
    if log is None:
        return subprocess.run(cmd, check=check, **kw)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        child = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, **kw)
        _RUNNING.add(child)
        try:
            rc = child.wait()
        except BaseException:  # KeyboardInterrupt, SIGTERM's SystemExit: end it too
            child.kill()
            child.wait()
            raise
        finally:
            _RUNNING.discard(child)
    if check and rc != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        with _SAY_LOCK:
            print("\n".join(tail), file=sys.stderr, flush=True)
        raise SystemExit(
            f"[matrix] failed ({rc}): {' '.join(map(str, cmd))}\n[matrix] full log: {log}"
        )
    return subprocess.CompletedProcess(cmd, rc)


def in_env(it: Interp, argv: list[str]) -> list[str]:
    """argv to run inside it's world (the host, or the sid root)."""
    if it.in_sid:
        return [str(SID), "run", *argv]
    return argv


# ---------------------------------------------------------------- discovery
def pyenv_root() -> Path | None:
    exe = shutil.which("pyenv")
    if exe:
        try:
            return Path(subprocess.check_output([exe, "root"], text=True).strip())
        except subprocess.CalledProcessError:
            pass
    guess = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    return guess if (guess / "versions").is_dir() else None


def discover_pyenv(it: Interp) -> None:
    root = pyenv_root()
    if root is None:
        it.why_missing = "pyenv not installed"
        return
    best = None
    for d in glob.glob(str(root / "versions" / f"{it.minor}.*")):
        tail = Path(d).name[len(it.minor) + 1 :]
        if tail.isdigit() and (Path(d) / "bin" / "python3").exists():
            if best is None or int(tail) > best[0]:
                best = (int(tail), Path(d) / "bin" / "python3")
    if best is None:
        it.why_missing = f"pyenv has no {it.minor}.x under {root}/versions"
    else:
        it.python = str(best[1])


sid_state: dict = {}


def ensure_sid() -> bool:
    if "ok" in sid_state:
        return sid_state["ok"]
    say("Debian unstable root: tools/sid-root.sh (debootstrap + apt on first use, seconds after)")
    p = subprocess.run([str(SID)], stdout=subprocess.PIPE, text=True)
    sid_state["ok"] = p.returncode == 0
    sid_state["why"] = {3: "not root: the Debian unstable root cannot be made (see README)"}.get(
        p.returncode, f"tools/sid-root.sh failed with exit {p.returncode}"
    )
    return sid_state["ok"]


def discover(it: Interp) -> None:
    if it.custom:
        return  # custom_interp() found it, or said why not
    if it.base:
        base = next(i for i in MATRIX if i.name == it.base)
        discover(base)
        it.python, it.why_missing = base.python, base.why_missing
        return
    if it.source == "pyenv":
        discover_pyenv(it)
    else:
        if not ensure_sid():
            it.why_missing = sid_state["why"]
        elif not (SID_ROOT / it.sid_python.lstrip("/")).exists():
            it.why_missing = f"{it.sid_python} missing from the sid root"
        else:
            it.python = it.sid_python


METADATA_CODE = (
    "import json,sys,sysconfig,platform;print(json.dumps({'version':platform.python_version(),"
    "'version_info':list(sys.version_info[:3]),'debug':hasattr(sys,'gettotalrefcount'),"
    "'gil_disabled':bool(sysconfig.get_config_var('Py_GIL_DISABLED')),"
    "'implementation':platform.python_implementation()}))"
)


def custom_interp(path: str) -> Interp:
    """The one-column matrix for --python PATH (or a path given as NAME).

    The name is DC_INTERPRETER_NAME or cp<major><minor>[t][d]-custom, the source
    DC_INTERPRETER_SOURCE or path:<absolute PATH>, the same rule as
    deferred_cleanup.probe.derived_name.  A PATH that does not run, is not
    CPython, or is older than 3.10 comes back with why_missing set.
    """
    exe = path if os.sep in path else (shutil.which(path) or path)
    exe = os.path.abspath(exe)
    src = os.environ.get("DC_INTERPRETER_SOURCE") or f"path:{exe}"
    it = Interp(os.environ.get("DC_INTERPRETER_NAME") or "custom", "", src, custom=True)
    try:
        out = subprocess.run(
            [exe, "-c", METADATA_CODE],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        it.why_missing = f"{exe} does not run: {e}"
        return it
    if out.returncode != 0:
        it.why_missing = (
            f"{exe} exited {out.returncode}: {(out.stderr.strip().splitlines() or [''])[-1]}"
        )
        return it
    try:
        md = json.loads(out.stdout.strip().splitlines()[-1])
        major, minor = md["version_info"][:2]
    except (ValueError, IndexError, KeyError, TypeError):
        it.why_missing = f"{exe} is not a Python interpreter (it printed no version)"
        return it
    it.minor = f"{major}.{minor}"
    it.debug = md["debug"]
    if not os.environ.get("DC_INTERPRETER_NAME"):
        flags = ("t" if md["gil_disabled"] else "") + ("d" if md["debug"] else "")
        it.name = f"cp{major}{minor}{flags}-custom"
    if md["implementation"] != "CPython":
        it.why_missing = f"{exe} is {md['implementation']}, not CPython"
    elif (major, minor) < (3, 10):
        it.why_missing = (
            f"{exe} is Python {md['version']}; deferred-cleanup needs CPython 3.10 or newer"
        )
    else:
        it.python = exe
    return it


# ---------------------------------------------------------------- provisioning
def stamp_ok(path: Path, want: str) -> bool:
    return path.exists() and path.read_text() == want


def provision(it: Interp) -> None:
    reqs = list(REQUIREMENTS)
    if it.extra_reqs and DOCS_REQUIREMENTS_FILE.exists():
        reqs += [
            ln.strip()
            for ln in DOCS_REQUIREMENTS_FILE.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")
        ]
    want = json.dumps({"python": it.python, "pip": PIP, "reqs": reqs})
    stamp = it.venv_host / ".dc-env-stamp"
    if stamp_ok(stamp, want):
        return
    log = BUILD / "logs" / f"{it.key}-venv.log"
    say(f"{it.name}: creating virtual environment {it.venv} (log: {log.relative_to(REPO)})")
    if it.venv_host.exists():
        shutil.rmtree(it.venv_host)
    run(in_env(it, [it.python, "-m", "venv", it.venv]), log=log)
    # venv's bundled pip can predate config settings (-C); upgrade it first.
    run(
        in_env(it, [it.py, "-m", "pip", "install", "-q", "--disable-pip-version-check", PIP]),
        log=BUILD / "logs" / f"{it.key}-pip-self.log",
    )
    say(f"{it.name}: pip install {' '.join(reqs)}")
    run(
        in_env(it, [it.py, "-m", "pip", "install", "-q", "--disable-pip-version-check", *reqs]),
        log=BUILD / "logs" / f"{it.key}-pip.log",
    )
    stamp.write_text(want)


def source_hash() -> str:
    h = hashlib.sha256()
    files = [REPO / "CMakeLists.txt", REPO / "pyproject.toml"]
    # What the wheel is built from: the CMake package (cmake/), the headers (include/), the
    # CPython host's sources (src/) and the reference module (reference/).
    for sub in ("cmake", "include", "reference", "src"):
        if not (REPO / sub).is_dir():
            continue
        files += sorted(
            p for p in (REPO / sub).rglob("*") if p.is_file() and "__pycache__" not in p.parts
        )
    for f in files:
        h.update(str(f.relative_to(REPO)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def build(it: Interp, src_hash: str) -> None:
    stamp = it.venv_host / ".dc-build-stamp"
    # The build's flags are among its inputs: a change of TEST_BUILD_CONFIG rebuilds.
    want = f"{src_hash} {' '.join(TEST_BUILD_CONFIG)}"
    if it.custom:
        # A CPython build tree changes under the same path: rebuild after its
        # interpreter was rebuilt (its headers, and so its ABI, may have changed).
        st = os.stat(it.python)
        want += f" {it.python} {st.st_mtime_ns} {st.st_size}"
    # The venv is shared by every checkout, build/KEY is this checkout's own:
    # tests/test_examples.py builds its wheel in build/KEY (DC_EXAMPLES_BUILD_DIR),
    # where it compiles nothing, so a checkout without one builds it even when
    # the venv already holds these sources' build (from ccache: cheap), rather
    # than let that test compile the whole extension in a directory of its own.
    if stamp_ok(stamp, want) and (BUILD / it.key / "CMakeCache.txt").is_file():
        return
    log = BUILD / "logs" / f"{it.key}-build.log"
    say(
        f"{it.name}: building deferred_cleanup._native (scikit-build-core, build/{it.key}; log: "
        f"{log.relative_to(REPO)})"
    )
    t0 = time.monotonic()
    # ccache hands back what an earlier build of the same sources for the same
    # interpreter compiled, in this checkout or another (CCACHE_BASEDIR: paths
    # relative to REPO).
    cache = compiler_cache_env(it, REPO)
    run(
        in_env(
            it,
            pip_install_argv(it, REPO, f"build/{it.key}"),
        ),
        log=log,
        cwd=REPO,
        env=dict(os.environ, **cache),
    )
    stamp.write_text(want)
    say(f"{it.name}: built in {time.monotonic() - t0:.0f} s")


def compiler_cache_env(it: Interp, basedir: Path) -> dict[str, str]:
    """Environment that routes it's builds of the extension through ccache, or {}.

    On the host the cache is CCACHE_DIR ($DC_CACHE/ccache); inside the Debian
    unstable root, whose compiler is another program, it is SID_CCACHE, a
    directory of the root itself (kept with the root, shared by every checkout;
    ccache is in tools/sid-root.sh's package list).  ccache's key is the
    preprocessed source, the compiler (its path, size and mtime) and its
    arguments, so a changed file or a changed compiler is always compiled anew.
    Called from the main thread or one of prepare()'s build threads; it only reads the
    file system.

    :param it: the interpreter whose build this is
    :param basedir: CCACHE_BASEDIR: paths under it are hashed relative to it, so
        two checkouts (or two mutate scratch trees) share their objects
    :returns: the variables to add to the build's environment; {} when there
        is no ccache where the build runs (the build is then only slower)
    """
    if it.in_sid:
        if not (SID_ROOT / "usr" / "bin" / "ccache").exists():
            return {}
        cache_dir = SID_CCACHE
    elif shutil.which("ccache") is None:
        return {}
    else:
        cache_dir = str(CCACHE_DIR)
    return {
        "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
        "CCACHE_DIR": cache_dir,
        "CCACHE_BASEDIR": str(basedir),
        "CCACHE_NOHASHDIR": "1",
        "CCACHE_SLOPPINESS": CCACHE_SLOPPINESS,
    }


#: The CMake cache entry of the test builds' compiler flags, and its value.
#: TEST_BUILD_CONFIG (build_config()) is the CMake build type and flags of
#: every test build of ``_native``: this file's build/<interpreter>,
#: tools/mutate.py's scratch trees (with -O0 flags) and tools/examples.py's
#: wheel (the same settings, so that reusing a build directory recompiles
#: nothing).  RelWithDebInfo with its flags overridden
#: to -O2 -DNDEBUG, i.e. without -g: no test reads debug information (nm,
#: readelf and objdump read the symbol table), and -g is a large share of a
#: build's compiler CPU.  Not Release: pybind11_add_module gives a Release
#: build link-time optimization (all code generation in the link, which
#: ccache cannot hand back) and strips it.  scikit-build-core's
#: ``cmake.define`` sets the cache entry before CMake's default for the build
#: type would.  tests/test_production_build.py configures its own build
#: (its build type is its own choice, not this one).
CXX_FLAGS_VAR = "CMAKE_CXX_FLAGS_RELWITHDEBINFO"
TEST_CXX_FLAGS = "-O2 -DNDEBUG"


def build_config(cxx_flags: str = TEST_CXX_FLAGS) -> tuple[str, ...]:
    """scikit-build-core's settings of a test build (TEST_BUILD_CONFIG), with
    CXX_FLAGS_VAR set to cxx_flags: tools/mutate.py builds its mutants at -O0,
    and tools/examples.py's wheel keeps the flags of the build directory it
    reuses."""
    return (
        *("-C", "cmake.build-type=RelWithDebInfo"),
        *("-C", f"cmake.define.{CXX_FLAGS_VAR}={cxx_flags}"),
        # pybind11/pybind11.h precompiled for the sources that include it
        # (CMakeLists.txt's DC_PCH): a mutant of a core header recompiles those
        # sources without parsing pybind11 and Python.h again.
        *("-C", "cmake.define.DC_PCH=ON"),
    )


TEST_BUILD_CONFIG = build_config()


def pip_install_argv(
    it: Interp,
    src: Path,
    build_dir: str,
    target: Path | None = None,
    cxx_flags: str = TEST_CXX_FLAGS,
) -> list:
    """The one pip command that builds and installs the extension from src.

    :param it: the interpreter whose pip runs (in its virtual environment)
    :param src: the work tree to build (pyproject.toml, scikit-build-core)
    :param build_dir: scikit-build-core's build directory (kept between builds)
    :param target: install into this directory (``pip --target``) instead of
        the environment; tools/mutate.py uses it so that a mutant's build
        never replaces the shared environment's
    :param cxx_flags: the compiler flags (build_config())
    :returns: the argument vector
    """
    where = ["--target", str(target)] if target is not None else []
    return [
        it.py,
        *("-m", "pip", "install", "-q", "--disable-pip-version-check"),
        *("--no-build-isolation", "--no-deps", *where),
        *("-C", f"build-dir={build_dir}", *build_config(cxx_flags)),
        # The `_test_` hooks (reference/testing/) that the suite needs; a plain
        # `pip install .` builds without them (CMake option DC_TEST_HOOKS).
        *("-C", "cmake.define.DC_TEST_HOOKS=ON"),
        str(src),
    ]


_metadata: dict[str, dict] = {}


def metadata(it: Interp) -> dict:
    """Version, debug build and Py_GIL_DISABLED of it's interpreter, asked once
    per run (the matrix table and the test summary both print them)."""
    if it.name not in _metadata:
        _metadata[it.name] = _ask_metadata(it)
    return _metadata[it.name]


def _ask_metadata(it: Interp) -> dict:
    out = subprocess.check_output(in_env(it, [it.py, "-c", METADATA_CODE]), text=True)
    md = json.loads(out.strip().splitlines()[-1])
    md.update(name=it.name, source=it.source)
    return md


def usage_error(msg: str) -> SystemExit:
    """One line on stderr, exit status 2 (a usage error, as argparse's): raise
    what this returns."""
    print(f"[matrix] {msg}", file=sys.stderr)
    return SystemExit(2)


def usable_custom(path: str) -> Interp:
    """custom_interp(path), or a usage error (exit 2, one line) when PATH is
    missing, not CPython or older than 3.10: a job on it could only fail later
    and less clearly."""
    it = custom_interp(path)
    if it.python is None:
        raise usage_error(f"PYTHON={path}: {it.why_missing}")
    return it


def select(only: str | None, include_docs=False, python: str | None = None) -> list[Interp]:
    if python:
        if only:
            raise usage_error("--only and --python exclude each other")
        return [usable_custom(python)]
    if only and ("/" in only or only.startswith(".")):
        return [usable_custom(only)]
    if not only:
        return list(MATRIX) + ([DOCS_ENV] if include_docs else [])
    names = only.split(",")
    unknown = set(names) - {i.name for i in MATRIX} - {"docs"}
    if unknown:
        raise usage_error(f"unknown interpreter(s): {', '.join(sorted(unknown))}")
    return [i for i in MATRIX if i.name in names] + ([DOCS_ENV] if "docs" in names else [])


#: Seconds between two progress lines while waiting for another run's lock.
LOCK_PROGRESS_S = 60


def lock_holder(path: Path) -> str:
    """Who holds an environment's lock, as its holder wrote it into the lock
    file: "pid N (COMMAND) of checkout DIR, holding it for M min S s (DOING)",
    or a plain reason when the file says nothing readable."""
    try:
        h = json.loads(path.read_text() or "{}")
        held = max(0, int(time.time() - float(h["since"])))
        return (
            f"pid {h['pid']} ({h['command']}) of checkout {h['checkout']}, holding it for "
            f"{held // 60} min {held % 60} s ({h['doing']})"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return "a run that did not say who it is"


@contextlib.contextmanager
def env_lock(it: Interp, doing: str = "building and running a job"):
    """Serialise provisioning, building and the job run in one environment
    between concurrent invocations (two make targets, two shells, two
    checkouts: the environments are shared).

    The holder writes into the lock file its pid, command line, checkout, the
    time it took the lock and what it does (``doing``); a waiter prints that
    at once and again every LOCK_PROGRESS_S seconds, with how long it has
    waited, so no run waits silently on another.  Blocks until the lock is
    free; errors: OSError from the lock file."""
    held = os.environ.get("DC_MATRIX_HELD", "").split(",")
    if it.name in held:
        # A job run under this lock called the matrix again (the docs test
        # runs tools/docs.sh, which runs `matrix.py run docs`): the lock is
        # already ours.
        yield
        return
    lockdir = CACHE / "locks"
    lockdir.mkdir(parents=True, exist_ok=True)
    path = lockdir / f"{it.key}.lock"
    with open(path, "a+") as f:  # never "w": that would erase the holder's record
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            start = time.monotonic()
            next_line = start
            while True:
                now = time.monotonic()
                if now >= next_line:
                    waited = int(now - start)
                    say(
                        f"{it.name}: waiting ({waited // 60} min {waited % 60} s so far) for the "
                        f"environment's lock, held by {lock_holder(path)}"
                    )
                    next_line = now + LOCK_PROGRESS_S
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(1)
            say(f"{it.name}: got the lock after {int(time.monotonic() - start)} s")
        record = {
            "pid": os.getpid(),
            "command": " ".join(sys.argv),
            "checkout": str(REPO),
            "since": time.time(),
            "doing": doing,
        }
        f.seek(0)
        f.truncate()
        f.write(json.dumps(record))
        f.flush()
        yield


def run_in(it: Interp, argv: list[str], **kw) -> subprocess.CompletedProcess:
    """Run argv in it's world while holding it's lock, after making sure the
    package installed there is this work tree's build.  The environments live
    outside the work tree and are shared by every checkout on the machine: the
    lock keeps another checkout from installing its own build in the middle of
    this run, and the rebuild check undoes one that happened before it."""
    with env_lock(it, f"building this checkout's extension, then running {' '.join(argv[:4])}"):
        build(it, source_hash())
        env = dict(kw.pop("env", None) or os.environ)
        env["DC_MATRIX_HELD"] = ",".join(filter(None, [env.get("DC_MATRIX_HELD", ""), it.name]))
        env["DC_MATRIX"] = (
            "1"  # tests/conftest.py: the docs, tools, hardware and soak tests may run
        )
        return subprocess.run(in_env(it, argv), env=env, **kw)


def prepare(
    envs: list[Interp],
    do_build=True,
    hold: contextlib.ExitStack | None = None,
    build_jobs: int = 1,
) -> list[Interp]:
    """Discover, provision and build; return the environments that are ready.

    Each environment's lock (:func:`env_lock`) is taken in the order of envs
    (the matrix's order, in every command) and let go after its environment is
    ready; with hold, it is entered into that stack instead and stays held
    until the stack closes (``test``: its jobs run at once in several
    environments).  With hold and build_jobs > 1, the builds run after every
    environment is provisioned, up to build_jobs at once, each under its
    environment's lock, held since: on a busy machine each build gets a share
    of the cores per runnable compiler, so a fresh clone whose sources miss
    the compiler cache (nine builds of about 2 min each at load 8 on 2 cores)
    builds in a fraction of the serial time.  Thread: the main thread (the
    builds on worker threads); blocking: while another run holds a lock (a
    line a minute says who), and while building.  Errors: a failed build ends
    the run (SystemExit, its log's tail printed) once the builds started with
    it have ended.

    :param envs: the environments, in the matrix's order
    :param do_build: build the extension in each (False: provision only)
    :param hold: the stack that keeps every lock until it closes, or None
    :param build_jobs: how many builds at once (int >= 1; only with hold)
    :returns: the environments that are ready (list[Interp]), in envs' order
    """
    ready = []
    src = source_hash()
    later = []  # built below, after every lock is taken (hold and build_jobs > 1)
    for it in envs:
        discover(it)
        if it.python is None:
            say(f"{it.name}: MISSING ({it.why_missing})")
            continue
        doing = (
            "provisioning and building the environment"
            if do_build
            else "provisioning the environment"
        )
        with contextlib.ExitStack() as here:
            (hold or here).enter_context(
                env_lock(it, doing + (", then running make test's jobs in it" if hold else ""))
            )
            provision(it)
            if do_build and hold is not None and build_jobs > 1:
                later.append(it)
            elif do_build:
                build(it, src)
        ready.append(it)
    if later:
        build_at_once(later, src, build_jobs)
    return ready


def build_at_once(
    envs: list[Interp], src: str, jobs: int, stop: threading.Event | None = None
) -> None:
    """Build envs (their locks held by the caller), up to jobs at once.

    Thread: the main thread waits; each build runs on a worker thread.
    Blocking: until every started build has ended.  Errors: the first failed
    build (in envs' order) raises its SystemExit once the builds running with
    it have ended; the builds not started by then never start.  An exception
    of the wait itself (KeyboardInterrupt, SIGTERM's SystemExit) ends the
    running builds' processes (end_jobs) and is raised.

    :param envs: the environments to build, in the matrix's order
    :param src: the sources' hash (source_hash())
    :param jobs: how many builds at once (int >= 1)
    :param stop: the event set when a build fails or the wait ends, after
        which no build starts (a new one when None; a test passes its own)
    """
    import concurrent.futures as cf  # noqa: PLC0415  (test only)

    say(f"building {len(envs)} environments, up to {jobs} at once")
    if stop is None:
        stop = threading.Event()  # set by a failed build (before its future ends) or the wait

    def one(it: Interp) -> bool:
        if stop.is_set():
            return False  # not started: a build failed, or the run is ending
        try:
            build(it, src)
        except BaseException:
            stop.set()
            raise
        return True

    pool = cf.ThreadPoolExecutor(max_workers=jobs)
    futures = [pool.submit(one, it) for it in envs]
    try:
        cf.wait(futures, return_when=cf.FIRST_EXCEPTION)
    except BaseException:
        stop.set()
        end_jobs()
        raise
    finally:
        pool.shutdown(wait=True)
    for fut in futures:
        fut.result()  # the first failed build's SystemExit, in envs' order


def print_matrix(envs: list[Interp], ready: list[Interp]) -> list[str]:
    """Print the interpreter table; return the required minors that are missing."""
    rows = [("interpreter", "version", "source", "build", "Py_GIL_DISABLED")]
    have = set()
    for it in envs:
        if it in ready:
            md = metadata(it)
            have.add(it.minor)
            rows.append(
                (
                    it.name,
                    md["version"],
                    it.source,
                    "debug" if md["debug"] else "release",
                    "1" if md["gil_disabled"] else "0",
                )
            )
        else:
            rows.append((it.name, "MISSING", it.source, "-", it.why_missing))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    # Derived from what each ready interpreter reported (sysconfig Py_GIL_DISABLED).
    ft = [it.name for it in ready if it in envs and metadata(it)["gil_disabled"]]
    print(
        "free-threaded: "
        + (
            ", ".join(ft)
            if ft
            else "not available (none of the "
            f"{len([i for i in ready if i in envs])} interpreter(s) "
            "here has Py_GIL_DISABLED=1)"
        )
    )
    missing = [m for m in REQUIRED_MINORS if m not in have and any(i.minor == m for i in envs)]
    for m in missing:
        print(f"missing: CPython {m}")
    return missing


def check_missing(missing: list[str]) -> None:
    if missing and IN_CI:
        raise SystemExit(
            f"[matrix] CI=true and CPython {', '.join(missing)} missing: every version 3.10…3.15 "
            "is required"
        )


# ---------------------------------------------------------------- jobs
def cmd_provision(a) -> int:
    envs = select(a.only, python=a.python)
    ready = prepare(envs, do_build=False)
    check_missing(print_matrix(envs, ready))
    return 0


def cmd_build(a) -> int:
    envs = select(a.only, python=a.python)
    ready = prepare(envs)
    check_missing(print_matrix(envs, ready))
    return 0


def cmd_probe(a) -> int:
    envs = select(a.only, python=a.python)
    ready = prepare(envs)
    check_missing(print_matrix(envs, ready))
    out = BUILD / "probe"
    out.mkdir(parents=True, exist_ok=True)
    results, failed = [], []
    for it in ready:
        dest = out / f"{it.name}.json"
        say(f"{it.name}: python -m deferred_cleanup.probe --json {dest.relative_to(REPO)}")
        env = dict(
            os.environ,
            DC_INTERPRETER_NAME=it.name,
            DC_INTERPRETER_SOURCE=it.source,
            PYTHONUNBUFFERED="1",
        )
        log = out / f"{it.name}.txt"
        with open(log, "w") as f:
            p = run_in(
                it,
                [it.py, "-m", "deferred_cleanup.probe", "--json", str(dest)],
                env=env,
                cwd=REPO,
                stdout=f,
                stderr=subprocess.STDOUT,
            )
        if p.returncode != 0:
            print(log.read_text(errors="replace")[-3000:])
            say(
                f"{it.name}: probe exited {p.returncode}; its column is left out (log: "
                f"{log.relative_to(REPO)})"
            )
            failed.append(f"{it.name}: probe exited {p.returncode}")
            continue
        results.append(str(dest))
    if not ready:
        say("no interpreter ready")
        return 1
    # The combined table, the Markdown/JSON files and the comparison with the
    # expected table are made by the package itself (deferred_cleanup.report).
    reporter = ready[0]
    missing = [f"{i.name}: {i.why_missing}" for i in envs if i not in ready] + failed
    argv = [
        reporter.py,
        "-m",
        "deferred_cleanup.report",
        "--out-dir",
        str(out),
        "--outside-ci=notes/interpreters",  # relative to REPO, the reporter's cwd
        *[f"--missing={m}" for m in missing],
        *results,
    ]
    rc = run_in(reporter, argv, cwd=REPO).returncode
    combined = out / "probe.json"
    if combined.exists():  # the version page shows which code the probe measured
        import provenance  # tools/provenance.py

        provenance.write_stamp(combined, provenance.stamp(PROBE_SOURCES))
    return rc or (1 if failed else 0)


def junit_counts(path: Path) -> tuple[int, int, int]:
    if not path.exists():
        return (0, 1, 0)
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests = sum(int(s.get("tests", 0)) for s in suites)
    failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return (tests - failed - skipped, failed, skipped)


def session_aborted(report: Path, rc: int, ran: int) -> str:
    """Say how a pytest session aborted, or return "" when it ran every selected test.

    :param report: the JSON that tests/conftest.py wrote (``$DC_SESSION_REPORT``)
    :param rc: pytest's exit code
    :param ran: the tests the JUnit XML counts (passed, failed and skipped)
    :returns: e.g. "pytest session aborted (exit 2, interrupted): 150 of 238 selected tests
        did not run"
    """
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):
        data = {}
    selected = data.get("selected")
    if selected is None:
        return "" if rc in (0, 5) else f"pytest exited {rc} before it selected any test"
    how = {2: "interrupted", 3: "internal error"}.get(rc, f"exit {rc}")
    if not data.get("finished"):
        how = f"exit {rc}, ended before pytest's own finish (a crash or a kill)"
    if ran < selected or not data.get("finished"):
        return (
            f"pytest session aborted ({how}): {selected - ran} of {selected} selected tests "
            "did not run"
        )
    return ""


def load_scale() -> float:
    """How many times an idle machine's wall-clock bound to allow now.

    Measured, not assumed: the 1-minute load average (os.getloadavg) plus
    this process's own runnable share, per core, and never below 1.  At load
    8 on 2 cores it is 4.5; idle it is 1.

    Returns:
        float: the factor, >= 1.0 (1.0 where the load average is unavailable).
    """
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return max(1.0, (load + 1.0) / (os.cpu_count() or 1))


def hang_guard(idle_s: float, scale: float | None = None) -> float:
    """A hang guard's wall-clock bound: idle_s stretched by the machine's load.

    A hang guard only catches a run that never ends; it is no speed check.
    idle_s is a generous bound for an idle machine; the result is idle_s times
    the load factor, so a loaded machine (load 8 on 2 cores: 4.5 times) does
    not fail a slow but progressing run.  tests/conftest.py's hang_guard passes
    the factor measured once at collection; tools/mutate.py measures it anew
    per bound.

    Thread: any; blocking: no (one os.getloadavg call when scale is None).

    :param idle_s: the bound on an idle machine, in seconds (float)
    :param scale: the load factor to use (float >= 1.0); None measures it now
        with :func:`load_scale`
    :returns: the bound now, in seconds (float), never below idle_s
    :raises: nothing
    """
    return idle_s * (load_scale() if scale is None else scale)


def children_cpu_s() -> float:
    """User + system CPU seconds of every child process waited for so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def start_load(n: int) -> list[subprocess.Popen]:
    """Start n busy processes (``--load``): each a plain Python loop, at normal priority.

    :param n: how many; 0 starts none
    :returns: the processes, for :func:`stop_load`
    :raises SystemExit: when n is negative
    """
    if n < 0:
        raise SystemExit(f"[matrix] --load {n}: give a count of busy processes, 0 or more")
    if n:
        say(f"--load {n}: {n} busy processes run until this command ends")
    # Each spins until its parent is gone, so a matrix run that is killed
    # leaves none behind.
    spin = (
        f"import os\nwhile os.getppid() == {os.getpid()}:\n    for _ in range(10**6):\n"
        "        pass\n"
    )
    return [
        subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.DEVNULL) for _ in range(n)
    ]


def stop_load(procs: list[subprocess.Popen]) -> None:
    """Kill and reap the processes :func:`start_load` started."""
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def fmt_min(seconds: float) -> str:
    """seconds as minutes with one decimal, e.g. "12.3"."""
    return f"{seconds / 60:.1f}"


# ---------------------------------------------------------------- test's jobs
#: What two run-once checks write in the same place: jobs that share a name
#: here never run at the same time.  The hardware check and tools/docs.sh
#: (through tools/evidence.py) build tests/cpp's race programs in
#: build/lost-wakeup-test.  Besides, examples-package builds the wheel in its
#: interpreter's build/examples/NAME and build/NAME, as that interpreter's own
#: job does: _cmd_test gives both the name build/examples/NAME.
SHARED_DIRS: dict[str, tuple[str, ...]] = {
    "hardware": ("build/lost-wakeup-test",),
    "docs": ("build/lost-wakeup-test",),
}
#: The order jobs start in, longest first, so that a run does not end with one
#: long job running alone: the run-once checks' CPU minutes in the load-8 run
#: at 961da07 (mutate 7.2, tools 4.6, sanitize 1.8, docs, hardware and
#: production 1.5 each); then the debug interpreter, then the rest in the
#: table's order.
LONG_FIRST = ("mutate", "tools", "sanitize", "docs", "hardware", "production")


def start_rank(tag: str, it: Interp) -> int:
    """A job's place in the start order (lower starts first): LONG_FIRST,
    then a debug interpreter's job, then every other job."""
    if tag in LONG_FIRST:
        return LONG_FIRST.index(tag)
    return len(LONG_FIRST) + (0 if it.debug else 1)


@dataclasses.dataclass(frozen=True)
class Job:
    """One pytest session of ``test``: an interpreter's suite or a run-once check."""

    label: str  # the table's row, e.g. "mutate (cp312-pyenv)"
    it: Interp
    marker: str  # pytest -m expression
    shares: frozenset[str] = frozenset()  # SHARED_DIRS: never at once with a job sharing one
    rank: int = 0  # start_rank

    @property
    def tag(self) -> str:
        """The label's first word: names the job's JUnit XML and log files."""
        return self.label.split()[0]

    def outputs(self, outdir: Path) -> tuple[Path, Path]:
        """The JUnit XML and the session report (tests/conftest.py's
        DC_SESSION_REPORT) of this job under outdir: (xml, report)."""
        return outdir / f"{self.tag}.xml", outdir / f"{self.tag}.session.json"


#: Seconds between two progress lines while jobs run.
PROGRESS_S = 300


def default_jobs() -> int:
    """How many jobs ``test`` runs at once without --jobs: one per core plus one.

    The jobs are not CPU-bound throughout: they wait on child processes,
    builds' linkers and the timers of scenario tests (the mutation job used a
    twelfth of a core for minutes of the load-8 run at 1fb3072), so one more
    than the cores keeps them busy, as ``make -j`` users do.  On a busy
    machine each runnable process gets its share of the cores, so the suite's
    share grows with its jobs too.

    :returns: os.cpu_count() + 1 (int; 2 when the count is unknown)
    """
    return (os.cpu_count() or 1) + 1


def schedule(jobs: list, workers: int, run_one, progress_s: float = PROGRESS_S, abort=None) -> list:
    """Run run_one(job) for every job on up to workers threads; return the
    results in the order of jobs.

    Jobs start in the order of their rank (ties: the order of jobs), each as
    soon as a worker is free and no running job shares a directory with it
    (Job.shares); a job that must wait lets a later one that may run start.
    Every progress_s seconds a line says which jobs run and for how long.

    Thread: the caller's, which only waits; run_one runs on worker threads.
    Blocking: until every job has ended.  Errors: an exception of run_one is
    raised here once every started job has ended (the rest never start);
    KeyboardInterrupt and SystemExit (SIGTERM's handler) likewise, after
    abort() (when given) has been called to end the running jobs.

    :param jobs: Job objects (anything with label, shares and rank)
    :param workers: how many at once, >= 1
    :param run_one: callable(job) -> result, run on a worker thread
    :param progress_s: seconds between progress lines (float)
    :param abort: callable() that ends the running jobs, called when the
        wait is interrupted (run_job's :func:`end_jobs`); None: wait for them
    :returns: list of results, one per job, in the order of jobs
    """
    import concurrent.futures as cf  # noqa: PLC0415  (test only)

    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].rank, i))
    results: list = [None] * len(jobs)
    running: dict = {}  # future -> (index, start time)
    t0 = time.monotonic()
    next_line = t0 + progress_s
    with cf.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        try:
            while order or running:
                busy = set().union(*(jobs[i].shares for i, _ in running.values()))
                for i in list(order):
                    if len(running) >= workers:
                        break
                    if jobs[i].shares & busy:
                        continue
                    order.remove(i)
                    busy |= jobs[i].shares
                    running[pool.submit(run_one, jobs[i])] = (i, time.monotonic())
                done, _ = cf.wait(
                    running,
                    timeout=max(0.0, next_line - time.monotonic()),
                    return_when=cf.FIRST_COMPLETED,
                )
                for fut in done:
                    i, _ = running.pop(fut)
                    results[i] = fut.result()
                now = time.monotonic()
                if now >= next_line and running:
                    names = ", ".join(
                        f"{jobs[i].label} ({fmt_min(now - t)} min)" for i, t in running.values()
                    )
                    say(
                        f"{fmt_min(now - t0)} min: running {names}; "
                        f"{len(jobs) - len(order) - len(running)} of {len(jobs)} jobs done"
                    )
                if now >= next_line:
                    next_line = now + progress_s
        except BaseException:
            order.clear()
            if abort is not None:
                abort()
            raise
    return results


def run_job(
    job: Job, per_interpreter: str, outdir: Path, pytest_args: list[str], stream: bool
) -> tuple[int, float, float, Path | None]:
    """Run one job's pytest session in its environment and wait for it.

    The output goes to build/logs/test-TAG.log (TAG: the label's first word),
    or to this process's stdout when stream is true (one job at a time).  A
    job that fails has its log's failure section printed when it ends, so that
    a CI log shows it.  The environment's lock is the caller's
    (:func:`prepare` with hold).

    Thread: a worker thread of :func:`schedule`.  Blocking: until the session
    ends (pytest-timeout bounds each test; no bound here).

    :returns: (exit status, wall seconds, CPU seconds of the session and every
        process it waited for (os.wait4's rusage), the log's path or None)
    :raises OSError: the log or the child cannot be opened or started
    """
    it = job.it
    xml, report = job.outputs(outdir)
    for old in (xml, report):
        if old.exists():
            old.unlink()
    env = dict(
        os.environ,
        DC_INTERPRETER_NAME=it.name,
        DC_INTERPRETER_SOURCE=it.source,
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        DC_SESSION_REPORT=str(report),
        DC_MATRIX="1",  # tests/conftest.py: the docs, tools, hardware and soak tests may run
    )
    if job.marker == per_interpreter:
        # tests/test_examples.py builds the wheel in this job's own incremental tree.
        env["DC_EXAMPLES_BUILD_DIR"] = str(BUILD / it.key)
    argv = [
        it.py,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-m",
        job.marker,
        f"--junitxml={xml}",
        "-o",
        "junit_family=xunit2",
        *pytest_args,
    ]
    log = None if stream else BUILD / "logs" / f"test-{job.tag}.log"
    say(
        f"{job.label}: pytest -m '{job.marker}' {' '.join(pytest_args)}"
        + ("" if log is None else f" (log: {log.relative_to(REPO)})")
    )
    t0 = time.monotonic()
    with contextlib.ExitStack() as stack:
        out = None
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            out = stack.enter_context(open(log, "w"))
        child = subprocess.Popen(
            in_env(it, argv), env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT
        )
        _RUNNING.add(child)
        try:
            # wait4: this child's own rusage (its tree's, as far as it waited),
            # where RUSAGE_CHILDREN would mix the jobs that run at once.
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            _RUNNING.discard(child)
        child.returncode = os.waitstatus_to_exitcode(status)
    wall, cpu = time.monotonic() - t0, usage.ru_utime + usage.ru_stime
    p, f, s = junit_counts(xml)
    say(
        f"{job.label}: {p} passed, {f} failed, {s} skipped, exit {child.returncode}; "
        f"{fmt_min(wall)} min wall, {fmt_min(cpu)} min CPU"
    )
    if log is not None and (f or child.returncode not in (0, 5)):
        say(f"{job.label}: the end of {log.relative_to(REPO)}:\n{failure_section(log)}")
    return child.returncode, wall, cpu, log


def failure_section(log: Path, limit: int = 400) -> str:
    """What of a failed job's log to print: from pytest's FAILURES (or
    ERRORS) heading on, else its last 100 lines; at most limit lines (the
    last ones)."""
    lines = log.read_text(errors="replace").splitlines()
    start = next(
        (
            i
            for i, ln in enumerate(lines)
            if ln.startswith("=") and (" FAILURES " in ln or " ERRORS " in ln)
        ),
        max(0, len(lines) - 100),
    )
    return "\n".join(lines[start:][-limit:])


def end_jobs() -> None:
    """Kill every running job's process (the run is ending: SIGTERM, Ctrl-C)."""
    for child in list(_RUNNING):
        with contextlib.suppress(ProcessLookupError):
            child.kill()


def cmd_test(a) -> int:
    # The busy processes' CPU time is reaped (and so counted by
    # RUSAGE_CHILDREN) only after the totals are taken.
    load = start_load(a.load)
    # SIGTERM (a CI runner's cancel) ends the run through the finally below;
    # schedule(abort=end_jobs) ends the running jobs first.
    old = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        # The environments' locks, held from their provisioning to the last job.
        with contextlib.ExitStack() as held:
            return _cmd_test(a, held)
    finally:
        stop_load(load)
        signal.signal(signal.SIGTERM, old)


def _cmd_test(a, held: contextlib.ExitStack) -> int:
    if a.jobs < 0:
        raise usage_error(f"--jobs {a.jobs}: give 1 or more, or 0 for one per core plus one")
    t_start, cpu_start = time.monotonic(), children_cpu_s()
    envs = select(a.only, include_docs=not a.no_once, python=a.python)
    if envs[0].custom and not a.no_once:
        say(
            "one interpreter given: the run-once checks "
            f"({', '.join(label for label, _, _ in ONCE_CHECKS)}) "
            "are left out; they need the full matrix (make test without PYTHON=)"
        )
    workers = a.jobs or default_jobs()  # the jobs at once, and the builds before them
    ready = prepare(envs, hold=held, build_jobs=workers)
    prep_wall, prep_cpu = time.monotonic() - t_start, children_cpu_s() - cpu_start
    missing = print_matrix(
        [e for e in envs if e is not DOCS_ENV], [r for r in ready if r is not DOCS_ENV]
    )
    check_missing(missing)
    outdir = BUILD / "test"
    outdir.mkdir(parents=True, exist_ok=True)
    jobs = []  # (label, interp, marker expression)
    per_interpreter = "not (" + " or ".join(m for _, _, m in ONCE_CHECKS) + ")"
    for it in ready:
        if it is DOCS_ENV:
            continue
        jobs.append((it.name, it, per_interpreter))
    if not a.no_once:
        for label, env_name, marker in ONCE_CHECKS:
            env = (
                DOCS_ENV
                if env_name == DOCS_ENV.name
                else next((r for r in ready if r.name == env_name), None)
            )
            if env is not None and env in ready:
                jobs.append(
                    (
                        label if env is DOCS_ENV and label == "docs" else f"{label} ({env.name})",
                        env,
                        marker,
                    )
                )
    specs = []
    for label, it, marker in jobs:
        tag = label.split()[0]
        shares = set(SHARED_DIRS.get(tag, ()))
        if marker == per_interpreter or tag == "examples-package":
            shares.add(f"build/examples/{it.name}")
        specs.append(Job(label, it, marker, frozenset(shares), start_rank(tag, it)))
    # One job at a time (--jobs 1, or one job in all: make test PYTHON=...):
    # its output streams to the console, as pytest's own would.
    serial = workers == 1 or len(specs) == 1
    if len(specs) > 1:
        say(
            f"{len(specs)} jobs, one at a time (--jobs 1)"
            if serial
            else f"{len(specs)} jobs, {min(workers, len(specs))} at a time (--jobs; JOBS= in "
            "make), the longest first; each job's output goes to build/logs/test-JOB.log"
        )
    os.environ["DC_MATRIX_HELD"] = ",".join(
        filter(None, [os.environ.get("DC_MATRIX_HELD", ""), *(r.name for r in ready)])
    )
    # Built by prepare(), under the locks held since: no second build here.
    results = schedule(
        specs,
        workers,
        lambda job: run_job(job, per_interpreter, outdir, a.pytest_args, stream=serial),
        abort=end_jobs,
    )
    rows, tp, tf, ts, aborts = [], 0, 0, 0, []
    for job, (rc, wall, cpu, _log) in zip(specs, results, strict=True):
        label, it = job.label, job.it
        xml, report = job.outputs(outdir)
        p, f, s = junit_counts(xml)
        aborted = session_aborted(report, rc, p + f + s)
        if aborted:
            say(f"{label}: {aborted}")
            aborts.append(f"{label}: {aborted}")
            f += 1
        elif rc not in (0, 5) and f == 0:
            f = 1  # pytest failed without a test failure (collection error, crash)
        md = metadata(it)
        rows.append(
            (
                label,
                md["version"],
                it.source + (" (debug)" if md["debug"] else ""),
                str(p),
                str(f),
                str(s),
                fmt_min(wall),
                fmt_min(cpu),
            )
        )
        tp, tf, ts = tp + p, tf + f, ts + s
    for m in missing:
        rows.append((f"CPython {m}", "MISSING", "-", "0", "0", "0", "-", "-"))
    # Provisioning and builds (the same numbers would otherwise hide in the first job).
    rows.append(
        ("(provision, build)", "-", "-", "-", "-", "-", fmt_min(prep_wall), fmt_min(prep_cpu))
    )
    total_wall, total_cpu = time.monotonic() - t_start, children_cpu_s() - cpu_start
    head = (
        "interpreter",
        "version",
        "source",
        "passed",
        "failed",
        "skipped",
        "wall min",
        "CPU min",
    )
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]]
    lines += [f"ABORTED {line}" for line in aborts]
    lines.append(f"{tp} passed, {tf} failed, {ts} skipped")
    # This command's own CPU time too (the tables' rows count children only).
    own = resource.getrusage(resource.RUSAGE_SELF)
    total_cpu += own.ru_utime + own.ru_stime
    lines.append(
        f"total: {fmt_min(total_wall)} min wall, {fmt_min(total_cpu)} min CPU "
        f"(user + system of this command and every process it waited for"
        + (f"; {a.load} busy processes not counted" if a.load else "")
        + f"; 1-min load average at the end {os.getloadavg()[0]:.1f})"
    )
    print()
    print("\n".join(lines))
    # The same summary in a file, for notes that quote a run's cost: the table
    # and totals as printed, and the totals as numbers (seconds).
    logs = BUILD / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "test-summary.txt").write_text("\n".join(lines) + "\n")
    (logs / "test-summary.json").write_text(
        json.dumps(
            {
                "wall_s": round(total_wall, 1),
                "cpu_s": round(total_cpu, 1),
                "passed": tp,
                "failed": tf,
                "skipped": ts,
                "load": a.load,
                "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
            indent=1,
        )
        + "\n"
    )
    say(f"summary written to {(logs / 'test-summary.txt').relative_to(REPO)} (and .json)")
    bad = tf > 0 or tp == 0 or (IN_CI and missing)
    return 1 if bad else 0


def cmd_python(a) -> int:
    if "/" in a.name or a.name.startswith("."):
        it = custom_interp(a.name)
        if it.python is None:
            raise SystemExit(f"[matrix] {it.why_missing}")
        print(it.py)
        return 0
    it = next((i for i in [*MATRIX, DOCS_ENV] if i.name == a.name), None)
    if it is None:
        raise SystemExit(f"unknown interpreter {a.name}")
    print(it.py)
    return 0


def docs_env_fallback() -> list[Interp]:
    """The docs environment on a machine without pyenv's 3.12 (a fresh clone
    with one interpreter): the same requirements in a venv made from
    DC_DOCS_PYTHON, else the python running this script; said in one line."""
    discover(DOCS_ENV)
    if DOCS_ENV.python is not None:
        return [DOCS_ENV]
    path = os.environ.get("DC_DOCS_PYTHON") or sys.executable
    it = usable_custom(path)
    it.extra_reqs = True
    it.name = f"docs-{it.name}"  # its own venv: not the one make test PYTHON= uses
    say(f"docs: {DOCS_ENV.why_missing}; using {it.python} ({it.name}) for the docs environment")
    return [it]


def cmd_run(a) -> int:
    envs = docs_env_fallback() if a.name == "docs" else select(a.name)
    ready = prepare(envs)
    if not ready:
        return 1
    it = ready[0]
    env = dict(os.environ, PY=it.py, DC_INTERPRETER_NAME=it.name, DC_INTERPRETER_SOURCE=it.source)
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    return run_in(it, ["env", f"PY={it.py}", *cmd], env=env, cwd=REPO).returncode


def run_in_env(name: str, cmd: str, log: Path) -> int:
    """Run ``tools/matrix.py run NAME -- bash -c CMD`` with its output in log.

    The loop that tools/bench.py (the end-to-end runs) and tools/alternatives.py
    (one measurement per interpreter) share: a child ``matrix.py run`` provisions
    and builds NAME's environment if need be, takes its lock and runs CMD there
    with ``$PY`` set to its interpreter.

    Thread: the caller's; blocking: until the child exits, with no timeout of
    its own.

    :param name: a matrix name (str, e.g. ``"cp312-pyenv"``) or ``"docs"``
    :param cmd: a bash command line (str); ``$PY`` and ``$DC_INTERPRETER_NAME``
        are set in it
    :param log: the file (Path) that receives the child's stdout and stderr;
        its folder is made, the file overwritten
    :returns: the child's exit status (int): 0, or nonzero when provisioning,
        the build or CMD failed (the log tells which)
    :raises OSError: log cannot be written
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        return subprocess.run(
            [
                sys.executable,
                str(REPO / "tools" / "matrix.py"),
                "run",
                name,
                "--",
                "bash",
                "-c",
                cmd,
            ],
            cwd=REPO,
            stdout=f,
            stderr=subprocess.STDOUT,
        ).returncode


def cmd_check_python(a) -> int:
    """The Makefile's check of PYTHON= before any target runs: exit 0 and
    print nothing when PATH is a CPython 3.10 or newer that runs; else one
    line on stdout (make's $(error) prints it) and exit 2."""
    it = custom_interp(a.path) if a.path else None
    if it is not None and it.python is not None:
        return 0
    why = it.why_missing if it is not None else "empty"
    print(f"PYTHON={a.path}: {why}")
    return 2


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    only_help = (
        "comma-separated matrix names (e.g. cp312-pyenv,cp314-sid), or one interpreter's path"
    )
    python_help = (
        "test exactly this interpreter (e.g. a CPython build tree's ./python) in a venv made from "
        "it; "
        "no pyenv, no Debian root, no root"
    )
    for name, fn in (("provision", cmd_provision), ("build", cmd_build), ("probe", cmd_probe)):
        s = sub.add_parser(name)
        s.add_argument("--only", help=only_help)
        s.add_argument("--python", metavar="PATH", help=python_help)
        s.set_defaults(fn=fn)
    s = sub.add_parser("test")
    s.add_argument("--only", help=only_help)
    s.add_argument("--python", metavar="PATH", help=python_help)
    s.add_argument(
        "--no-once", action="store_true", help="skip the run-once checks (docs, model, litmus)"
    )
    s.add_argument(
        "--load",
        type=int,
        default=0,
        metavar="N",
        help="keep N busy processes running meanwhile (a loaded run; default 0)",
    )
    s.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=0,
        metavar="N",
        help="run up to N jobs (pytest sessions) at once; default 0: one per core plus one "
        "(default_jobs()); 1 streams each job's output instead of logging it",
    )
    s.add_argument("pytest_args", nargs=argparse.REMAINDER)
    s.set_defaults(fn=cmd_test)
    s = sub.add_parser("python")
    s.add_argument("name")
    s.set_defaults(fn=cmd_python)
    s = sub.add_parser(
        "check-python",
        help="print nothing and exit 0 if PATH can be tested here; else one line, exit 2",
    )
    s.add_argument("path")
    s.set_defaults(fn=cmd_check_python)
    s = sub.add_parser("run")
    s.add_argument("name")
    s.add_argument("cmd", nargs=argparse.REMAINDER)
    s.set_defaults(fn=cmd_run)
    a = ap.parse_args()
    if getattr(a, "pytest_args", None) and a.pytest_args[0] == "--":
        a.pytest_args = a.pytest_args[1:]
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())

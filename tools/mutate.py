#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The mutation kill matrix: every mutant in tests/mutants/ must be killed.

A mutant is one small, deliberate breakage of the C++ core (a one-line change
found by exact text, so it survives line shifts), the property it breaks, and
the checks that must notice.  For each mutant this script

  1. copies the work tree (tracked and untracked-not-ignored files, as git
     lists them) into a fresh scratch directory build/mutate/<name>/;
  2. applies the replacement; a `find` text that does not occur exactly once
     stops the run (a stale mutant must never pass silently);
  3. builds what the named checks need: tests/cpp with the chosen sanitizer,
     from nothing, inside the scratch; or the Python extension for one
     interpreter, in that interpreter's one incremental tree (below);
  4. runs the checks and records which tests failed.

Before any mutant, the same checks run on an unmutated scratch copy (the
control): they must pass there, or "killed" would mean nothing.  The
control's pytest checks of one interpreter run in one pytest session, each
with its own selection and verdict (tools/mutate_control.py,
Runner.control_pytest).  Compiler outputs are shared through ccache, whose
key is the preprocessed source (compiler_cache(); inside the Debian unstable
root, the root's own cache), so every unit that sees the mutated file is
compiled anew.

The pytest checks of one interpreter, the control's and every mutant's, run
in one scratch tree, build/mutate/_incr-<interpreter>/, whose CMake build
directory is kept (Runner.incremental_tree): before each check the previous
mutant's file is copied back from the snapshot, this mutant's file is
copied in, and everything else under its build/ is deleted; CMake then
compiles only the units that see a changed file (pip configures the tree
once), installs every file again, and the installed module must be the one
just linked (installed_module_differs()).  These builds are -O0
(MUTANT_FLAGS), the control's included.

Checks (KILLED_BY in a mutant file):
  litmus         pytest tests/test_litmus.py: the per-line [litmus:TAG] order
                 checks read the scratch's headers (herd7 itself runs in the
                 `tools` once-check; it checks the litmus files, not headers)
  text:ARGS      pytest ARGS on the scratch with no extension built: tests
                 that read the sources as text (tests/test_model_code.py)
  cpp            the GoogleTest suite tests/cpp, plain build
  cpp-asan       the same under AddressSanitizer + UBSan
  cpp-tsan       the same under ThreadSanitizer
  pytest:ENV:ARGS  pytest ARGS on interpreter ENV (a tools/matrix.py name),
                 against the mutant's extension (its incremental build: a few
                 seconds for one source file, about 25 s for a core header)

A mutant is killed when every check it names fails on it (a test failure, a
sanitizer report, a crash or a timeout) and every test named in KILLING_TESTS
is among the failures.  Three depths, each deciding "killed" by that rule:
  default      (`make mutate`) every check a mutant names runs; a C++ check
               stops once the mutant's KILLING_TESTS have failed (they run
               first), so "killed by" lists those and says how many tests
               were not run; a pytest check stops the same way (they run
               first; tests/conftest.py, DC_MUTATE_STOP_AFTER), at its first
               failure when none are named.  About 30 minutes here.
  --fast       (what `make test` runs) as the default, but a mutant that
               names other checks as well skips its pytest checks.
  --complete   every test of every check runs, so "killed by" lists every
               test that fails on the mutant (2-5 minutes a mutant here, about
               3 hours for all).

Usage:
  tools/mutate.py [--fast | --complete] [--only NAME,...] [--keep] [--out DIR]
                  [--mutants DIR]
  tools/mutate.py --validate          parse every mutant and check its find text
  tools/mutate.py --list              the mutants and their checks
  tools/mutate.py --universal N [--seed S]
                                      a report only: N mutants drawn at random from
                                      those universalmutator generates for the core
                                      headers, each run against the C++ suite under
                                      ASan+UBSan; the kill score and the survivors go
                                      to build/mutate/universal.md (never fails the run)

Writes build/mutate/mutate.json and build/mutate/mutate.md and prints the table
`mutant | property | killed by | note`.  Exit status 1 when the control fails,
a mutant is stale or does not build, or a mutant survives any of its checks.

Standard library only.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import filecmp
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
# stdlib-only, like this script
from matrix import CXX_FLAGS_VAR, hang_guard, load_scale  # noqa: E402

MUTANTS = REPO / "tests" / "mutants"
OUT = REPO / "build" / "mutate"
DEFAULT_ENV = "cp312-pyenv"  # the interpreter whose venv runs pytest for the litmus check

# The short C++ run: enough for the stress tests' own "did it test anything"
# assertions, bounded so a hung mutant is a timeout, not a hang.
CPP_ENV = {
    # 50000 left the ring never full once in ~10 runs (a vacuity failure).
    "DC_STRESS_ITEMS": "100000",
    "DC_STRESS_DEADLINE_S": "20",
    "DC_HANDSHAKE_ROUNDS": "1000",
    "DC_HANDSHAKE_SECONDS": "5",
}
# Wall-clock bounds on an idle machine; each is a hang guard, multiplied by
# load_scale() when it is set (matrix.hang_guard), so that a loaded machine
# (make test at load 8 on 2 cores) neither fails the control nor counts a slow
# test as a kill.
CPP_TEST_TIMEOUT_S = 30  # per GoogleTest test (each runs in its own process)
PYTEST_TIMEOUT_S = 600
#: The optimisation of the mutants' extension builds (pytest checks), the
#: control's included: -O0, about two thirds of -O2's compile time.  A mutant
#: changes what the code does, which -O0 keeps; the orders and the fences
#: that only an optimiser can break are the C++ checks' and the litmus
#: checks' (their own flags).  tools/matrix.py's builds stay -O2.
MUTANT_FLAGS = "-O0 -DNDEBUG"

SANITIZERS = {
    "cpp": ("", {}),
    # -O0: half the compile time of -O1 (make sanitize keeps -O1); ASan and
    # UBSan find at -O0 whatever they find at -O1.
    "cpp-asan": (
        "-fsanitize=address,undefined -fno-sanitize-recover=all -g -O0",
        {
            "ASAN_OPTIONS": "detect_leaks=1 halt_on_error=1 detect_stack_use_after_return=1",
            "UBSAN_OPTIONS": "print_stacktrace=1 halt_on_error=1",
        },
    ),
    "cpp-tsan": (
        "-fsanitize=thread -g -O0",
        {"TSAN_OPTIONS": "halt_on_error=1 exitcode=66 history_size=4"},
    ),
}
REQUIRED_KEYS = {"FILE": str, "FIND": str, "REPLACE": str, "PROPERTY": str, "KILLED_BY": list}
OPTIONAL_KEYS = {"NOTE": str, "KILLING_TESTS": list}
SANITIZER_LINE = re.compile(
    r"(ERROR: AddressSanitizer: [\w-]+|WARNING: ThreadSanitizer: [\w -]+|runtime error: .*|"
    r"ERROR: LeakSanitizer: .*)"
)


def say(msg: str) -> None:
    print(f"[mutate] {msg}", flush=True)


# ---------------------------------------------------------------- mutants
@dataclasses.dataclass
class Mutant:
    name: str
    path: Path
    file: str
    find: str
    replace: str
    property: str
    killed_by: list[str]
    note: str = ""
    killing_tests: list[str] = dataclasses.field(default_factory=list)


class MutantError(Exception):
    pass


def load_mutant(path: Path) -> Mutant:
    """Parse one mutant file: module-level assignments of literals only
    (never executed).  Raises MutantError naming what is wrong."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except SyntaxError as e:
        raise MutantError(f"{path.name}: {e}") from None
    values: dict = {}
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # docstring
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            raise MutantError(
                f"{path.name}:{node.lineno}: only NAME = literal assignments are allowed"
            )
        try:
            values[node.targets[0].id] = ast.literal_eval(node.value)
        except ValueError:
            raise MutantError(
                f"{path.name}:{node.lineno}: {node.targets[0].id} is not a literal"
            ) from None
    for key, typ in {**REQUIRED_KEYS, **OPTIONAL_KEYS}.items():
        if key in values and not isinstance(values[key], typ):
            raise MutantError(f"{path.name}: {key} must be a {typ.__name__}")
    missing = [k for k in REQUIRED_KEYS if k not in values]
    if missing:
        raise MutantError(f"{path.name}: missing {', '.join(missing)}")
    unknown = set(values) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS)
    if unknown:
        raise MutantError(f"{path.name}: unknown keys {', '.join(sorted(unknown))}")
    m = Mutant(
        name=path.stem,
        path=path,
        file=values["FILE"],
        find=values["FIND"],
        replace=values["REPLACE"],
        property=values["PROPERTY"].strip(),
        killed_by=list(values["KILLED_BY"]),
        note=values.get("NOTE", "").strip(),
        killing_tests=list(values.get("KILLING_TESTS", [])),
    )
    if not m.killed_by:
        raise MutantError(f"{path.name}: KILLED_BY names no check")
    for check in m.killed_by:
        if not (
            check in SANITIZERS
            or check == "litmus"
            or check.startswith("pytest:")
            or (check.startswith("text:") and check[5:].strip())
        ):
            raise MutantError(f"{path.name}: unknown check {check!r}")
        if check.startswith("pytest:") and len(check.split(":", 2)) < 3:
            raise MutantError(f"{path.name}: {check!r}: write pytest:ENV:ARGS")
    if m.find == m.replace:
        raise MutantError(f"{path.name}: FIND and REPLACE are the same")
    return m


def find_pattern(find: str) -> re.Pattern:
    """FIND as a pattern that ignores whitespace: the characters of FIND that
    are not whitespace, in order, with any whitespace (also none) between any
    two of them.  So a FIND survives a formatter (clang-format, ruff format)
    that re-indents, breaks or joins lines, or adds or drops spaces."""
    chars = [re.escape(c) for c in find if not c.isspace()]
    return re.compile(r"\s*".join(chars))


def check_applies(m: Mutant, root: Path) -> str:
    """Return the mutated text of m.file under root; raise MutantError when
    FIND does not occur exactly once there.

    FIND matches modulo whitespace (:func:`find_pattern`); the span it
    matches is replaced by REPLACE as written."""
    target = root / m.file
    if not target.is_file():
        raise MutantError(f"{m.name}: {m.file} does not exist (stale mutant)")
    text = target.read_text()
    spans = [x.span() for x in find_pattern(m.find).finditer(text)]
    if len(spans) != 1:
        raise MutantError(
            f"{m.name}: FIND occurs {len(spans)} times in {m.file} (whitespace "
            "ignored), not once (stale mutant: re-point it)"
        )
    a, b = spans[0]
    # The pattern starts and ends at non-whitespace characters, but FIND (and
    # REPLACE) usually hold whole lines: take the match's indentation and its
    # line end with it, or REPLACE's own indentation would be added to the
    # file's (an IndentationError in a Python file).
    if m.find[:1].isspace():
        while a > 0 and text[a - 1] in " \t":
            a -= 1
    if m.find.endswith("\n"):
        while b < len(text) and text[b] in " \t":
            b += 1
        if text[b : b + 1] == "\n":
            b += 1
    return text[:a] + m.replace + text[b:]


def load_all(directory: Path) -> list[Mutant]:
    return [load_mutant(p) for p in sorted(directory.glob("*.py"))]


def checks_for(m: Mutant, fast: bool) -> list[str]:
    if not fast:
        return list(m.killed_by)
    quick = [c for c in m.killed_by if not c.startswith("pytest:")]
    return quick or list(m.killed_by)


# ---------------------------------------------------------------- scratch trees
def tree_files() -> list[str]:
    out = subprocess.check_output(
        ["git", "-C", str(REPO), "ls-files", "-z", "-co", "--exclude-standard"]
    )
    return sorted({f for f in out.decode().split("\0") if f and (REPO / f).is_file()})


def snapshot(files: list[str], name: str = "_source") -> Path:
    """Copy the work tree once, at the start: the control and every mutant
    start from the same files even if the work tree is edited meanwhile."""
    dest = OUT / name
    if dest.exists():
        shutil.rmtree(dest)
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, dest / f)
    return dest


def make_scratch(name: str, source: Path) -> Path:
    dest = OUT / name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, symlinks=True)
    return dest


# ---------------------------------------------------------------- checks
@dataclasses.dataclass
class CheckResult:
    check: str
    outcome: str  # "passed" | "failed" | "error"
    failing: list[str]  # test names (or the crash / sanitizer line)
    seconds: float
    log: str
    detail: str = ""
    cpu_seconds: float = 0.0  # user + system of the processes the check waited for
    build_cpu_seconds: float = 0.0  # of that, the extension's build (pytest checks)


def children_cpu() -> float:
    """User + system CPU seconds of every child process waited for so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def compiler_cache() -> dict[str, str]:
    """Environment for a host-side build that goes through ccache, or {}.

    Each mutant is built from nothing in its own scratch tree, but most of
    its translation units are the same as the control's; ccache (installed
    with apt when missing, used only when present) hands those back.  Its key
    is the preprocessed source and the compiler's arguments, so the mutated
    file, and every unit that includes it, is always compiled anew.  The
    cache is tools/matrix.py's, $DC_CACHE/ccache, shared by every checkout
    and kept between runs: a second run, or a fresh clone of the same
    sources, gets the control's and each mutant's objects back instead of
    compiling them again (the key still decides; nothing else is reused).
    CCACHE_BASEDIR=OUT makes the scratch trees' different absolute paths look
    the same to it.  Builds inside the Debian unstable root do not use it
    (ccache is a host program)."""
    if shutil.which("ccache") is None:
        return {}
    sys.path.insert(0, str(REPO / "tools"))
    import matrix  # noqa: E402  (stdlib-only, like this script)

    return {
        "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
        "CCACHE_DIR": str(matrix.CCACHE_DIR),
        "CCACHE_BASEDIR": str(OUT),
        "CCACHE_NOHASHDIR": "1",
        "CCACHE_SLOPPINESS": matrix.CCACHE_SLOPPINESS,
    }


def ensure_ccache() -> None:
    """Install ccache with apt when it is missing; a failure only costs speed."""
    if shutil.which("ccache") is None:
        say("installing ccache (apt; it only makes the mutant builds faster)")
        cmd = "DEBIAN_FRONTEND=noninteractive apt-get install -y -q ccache"
        rc = subprocess.run(["bash", "-c", cmd], capture_output=True).returncode
        if rc != 0:
            say("ccache not installed; building without it")


def run_logged(argv, log: Path, timeout: float, **kw) -> tuple[int | None, str]:
    """Run argv with output to log; (returncode or None on timeout, output)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        f.write("$ " + " ".join(shlex.quote(str(a)) for a in argv) + "\n")
        f.flush()
        try:
            p = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, **kw)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = None
    return rc, log.read_text(errors="replace")


def junit_failures(xml: Path) -> tuple[int, list[str]]:
    """(passed, failing test ids) from a pytest junit file."""
    if not xml.exists():
        return 0, []
    root = ET.parse(xml).getroot()
    passed, failing = 0, []
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            failing.append(name)
        elif case.find("skipped") is None:
            passed += 1
    return passed, failing


class Runner:
    def __init__(self, fast: bool, complete: bool = False):
        self.fast = fast
        self.complete = complete  # run every test of a C++ check, also once killed
        self._matrix = None
        self._envs: dict = {}
        self._tools_checked = False
        # (incremental tree, environment) pairs whose build directory pip has
        # configured and built (incremental_tree(), build_incremental()):
        # later checks of that tree run CMake's incremental build instead.
        self._built: set[tuple[str, str]] = set()
        # The snapshot every scratch is copied from (main() sets it).
        self.source: Path | None = None
        # Per interpreter: the files of its incremental tree (OUT/_incr-ENV)
        # that differ from the snapshot (the last mutant's FILE).
        self._incr_dirty: dict[str, set[str]] = {}

    # -- interpreters, through tools/matrix.py (provisioned once, then reused)
    def matrix(self):
        if self._matrix is None:
            sys.path.insert(0, str(REPO / "tools"))
            import matrix  # noqa: E402  (stdlib-only, like this script)

            self._matrix = matrix
        return self._matrix

    def env(self, name: str):
        """The matrix environment `name`, provisioned (pytest, pybind11,
        scikit-build-core).  Its installed deferred_cleanup is never used or
        changed: builds go to the scratch with pip --target and PYTHONPATH
        points there (checked by an import).  So an environment that is
        already provisioned is used without its lock, which another
        checkout's matrix run may hold for the length of a test run."""
        if name not in self._envs:
            mx = self.matrix()
            it = mx.select(name)[0]
            mx.discover(it)
            if it.python is None:
                raise MutantError(f"interpreter {name} is not available: {it.why_missing}")
            if not (
                (it.venv_host / ".dc-env-stamp").exists()
                and (it.venv_host / "bin" / "python").exists()
            ):
                mx.prepare([it], do_build=False)
            self._envs[name] = it
        return self._envs[name]

    def run_check(
        self, check: str, tree: Path, logs: Path, mutant: Mutant | None = None
    ) -> CheckResult:
        t0, cpu0 = time.monotonic(), children_cpu()
        if check == "litmus":
            r = self.check_litmus(tree, logs)
        elif check.startswith("text:"):
            r = self.check_text(check, tree, logs)
        elif check in SANITIZERS:
            r = self.check_cpp(check, tree, logs, mutant)
        else:
            _, env_name, args = check.split(":", 2)
            r = self.check_pytest(env_name, args, tree, logs, check, mutant)
        r.seconds = time.monotonic() - t0
        r.cpu_seconds = children_cpu() - cpu0
        return r

    def pytest_outcome(self, check, rc, xml, log, out) -> CheckResult:
        passed, failing = junit_failures(xml)
        if rc is None:
            return CheckResult(check, "failed", failing + ["timeout"], 0, str(log))
        if rc == 0:
            if passed == 0:
                return CheckResult(check, "error", [], 0, str(log), "pytest ran no test")
            return CheckResult(check, "passed", [], 0, str(log))
        if rc == 1 or rc < 0:
            return CheckResult(check, "failed", failing or [f"pytest exited {rc}"], 0, str(log))
        return CheckResult(
            check, "error", failing, 0, str(log), f"pytest exited {rc}: {out[-400:]}"
        )

    def check_litmus(self, tree: Path, logs: Path) -> CheckResult:
        return self.check_text("litmus", tree, logs, "-q tests/test_litmus.py")

    def check_text(self, check: str, tree: Path, logs: Path, args: str = "") -> CheckResult:
        """pytest ARGS of a ``text:ARGS`` check (or of ``litmus``) on tree, with
        no extension built: tests that read the sources as text (the litmus
        tags, tests/test_model_code.py's statement orders)."""
        it = self.env(DEFAULT_ENV)
        args = args or check.split(":", 1)[1]
        tag = "litmus" if check == "litmus" else "text"
        xml = logs / f"{tag}.xml"
        log = logs / f"{tag}.log"
        # DC_MATRIX=1: the litmus tag checks are run-once tests (tests/conftest.py),
        # skipped by plain pytest; `make mutate` runs outside the matrix.
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", DC_MATRIX="1")
        rc, out = run_logged(
            self.matrix().in_env(
                it,
                [
                    it.py,
                    "-m",
                    "pytest",
                    "-p",
                    "no:cacheprovider",
                    *shlex.split(args),
                    f"--junitxml={xml}",
                    "-o",
                    "junit_family=xunit2",
                ],
            ),
            log,
            hang_guard(PYTEST_TIMEOUT_S),
            cwd=tree,
            env=env,
        )
        return self.pytest_outcome(check, rc, xml, log, out)

    def check_cpp(self, check: str, tree: Path, logs: Path, mutant: Mutant | None) -> CheckResult:
        flags, _ = SANITIZERS[check]
        if not self._tools_checked:
            # g++, cmake and GoogleTest: installed with apt when missing, by
            # the same function the sanitizer scripts use.
            subprocess.run(
                ["bash", "-c", ". .ci/sanitizer-common.sh && ensure_tools"], cwd=REPO, check=True
            )
            self._tools_checked = True
        bdir = tree / "build" / check
        log = logs / f"{check}.log"
        build_log = logs / f"{check}-build.log"
        rc, out = run_logged(
            [
                "cmake",
                "-S",
                "tests/cpp",
                "-B",
                str(bdir),
                "-DCMAKE_BUILD_TYPE=None",
                f"-DCMAKE_CXX_FLAGS={flags}",
                f"-DCMAKE_EXE_LINKER_FLAGS={flags}",
            ],
            build_log,
            hang_guard(300),  # cmake's configure
            cwd=tree,
            env=dict(os.environ, **compiler_cache()),
        )
        if rc != 0:
            tail = build_log.read_text(errors="replace")[-1500:]
            return CheckResult(check, "error", [], 0, str(build_log), f"build failed:\n{tail}")
        # A mutant whose named killing tests are all in one test file is
        # first checked with that file's own program (tests/cpp builds one per
        # file): about half the compile time of the whole suite.  When they
        # do not all fail there, the whole suite is built and run, as for
        # every other check.
        unit = None
        if mutant is not None and not self.complete:
            unit = killing_unit(mutant.killing_tests)
        if unit is not None:
            r = self._run_cpp(check, tree, bdir, log, build_log, mutant, f"unit_{unit}", False)
            if r.outcome == "failed" and not unfailed(mutant.killing_tests, r.failing):
                return r
        return self._run_cpp(
            check, tree, bdir, log, build_log, mutant, "core_tests", unit is not None
        )

    def _run_cpp(self, check, tree, bdir, log, build_log, mutant, target, append) -> CheckResult:
        """Build target (tests/cpp's core_tests or a unit_FILE program) in
        bdir and run its tests one process each, writing to log (after what
        it holds when append); a CheckResult."""
        _, san_env = SANITIZERS[check]
        with open(build_log, "a") as f:
            rc = subprocess.run(
                ["cmake", "--build", str(bdir), "-j2", "--target", target],
                cwd=tree,
                stdout=f,
                stderr=subprocess.STDOUT,
                timeout=hang_guard(900),  # the build
            ).returncode
        if rc != 0:
            tail = build_log.read_text(errors="replace")[-1500:]
            return CheckResult(check, "error", [], 0, str(build_log), f"build failed:\n{tail}")
        # One process per test: a crash or a hang in one test (an ASan abort,
        # a self-linked list that never ends) neither hides nor stops the
        # others, so "killed by" lists every test that notices the mutant.
        binary = str(bdir / target)
        whole = target == "core_tests"
        listing = subprocess.run(
            [binary, "--gtest_list_tests"], cwd=tree, capture_output=True, text=True, timeout=60
        )
        tests, suite = [], ""
        for line in listing.stdout.splitlines():
            if not line.strip() or line.startswith("Running main()"):
                continue
            if not line.startswith(" "):
                suite = line.split("#")[0].strip()
            else:
                tests.append(suite + line.split("#")[0].strip())
        if listing.returncode != 0 or not tests:
            return CheckResult(
                check,
                "error",
                [],
                0,
                str(build_log),
                f"--gtest_list_tests failed: {listing.stderr[-400:]}",
            )
        # A mutant's named killing tests run first.  The check stops once
        # they have all failed (or, with none named, at the first failure):
        # the mutant is killed by then, and a mutant that makes counting tests
        # loop forever would otherwise cost a timeout per test.  With
        # --complete every test runs, for a complete "killed by".
        wanted = mutant.killing_tests if mutant else []
        tests.sort(key=lambda t: not any(w in t for w in wanted))
        # The tests' own time budgets stretch with the measured load, like
        # the per-test bound below (their counts do not change).
        scale = load_scale()
        budgets = {
            k: str(round(int(v) * scale))
            for k, v in CPP_ENV.items()
            if k in ("DC_STRESS_DEADLINE_S", "DC_HANDSHAKE_SECONDS")
        }
        env = {**os.environ, **CPP_ENV, **budgets, **san_env}  # budgets override CPP_ENV
        failing = []
        skipped = 0
        with open(log, "a" if append else "w") as f:
            for i, name in enumerate(tests):
                if (
                    mutant is not None
                    and not self.complete
                    and failing
                    and not unfailed(wanted, failing)
                ):
                    skipped = len(tests) - i
                    f.write(f"[mutate] killed as named; {skipped} other tests not run\n")
                    break
                f.write(f"$ {binary} --gtest_filter={name}\n")
                f.flush()
                bound_s = hang_guard(CPP_TEST_TIMEOUT_S)
                try:
                    p = subprocess.run(
                        [binary, "--gtest_color=no", f"--gtest_filter={name}"],
                        cwd=tree,
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=bound_s,
                    )
                    rc, out = p.returncode, p.stdout + p.stderr
                except subprocess.TimeoutExpired as e:
                    rc, out = (
                        None,
                        (
                            (e.stdout or b"").decode(errors="replace")
                            if isinstance(e.stdout, bytes)
                            else (e.stdout or "")
                        ),
                    )
                f.write(out + f"\n[mutate] exit {rc}\n")
                if rc == 0:
                    continue
                why = "timeout after %d s" % bound_s if rc is None else ""
                san = SANITIZER_LINE.search(out)
                if san:
                    why = san.group(1).strip()
                elif rc is not None and rc < 0:
                    why = f"signal {-rc}"
                failing.append(f"{name} ({why})" if why else name)
        if not failing:
            return CheckResult(check, "passed", [], 0, str(log))
        if skipped:
            failing.append(f"{skipped} other tests not run (--complete runs them)")
        if not whole:
            failing.append("the other test files not built (--complete builds them)")
        return CheckResult(check, "failed", failing, 0, str(log))

    def check_pytest(
        self, env_name: str, args: str, tree: Path, logs: Path, check: str, mutant=None
    ) -> CheckResult:
        it = self.env(env_name)
        inc, changed = self.incremental_tree(env_name, tree, mutant)
        site = inc / "build" / f"site-{env_name}"
        build_log = logs / f"{env_name}-build.log"
        build_cpu = children_cpu()
        rc = self.build_incremental(it, inc, env_name, changed, build_log)
        build_cpu = children_cpu() - build_cpu
        if rc != 0:
            tail = build_log.read_text(errors="replace")[-1500:]
            return CheckResult(
                check, "error", [], 0, str(build_log), f"extension build failed:\n{tail}"
            )
        r = self._run_pytest(it, env_name, args, inc, logs, check, mutant, site, build_log)
        r.build_cpu_seconds = build_cpu
        return r

    def incremental_tree(self, env_name: str, tree: Path, mutant) -> tuple[Path, set[str]]:
        """The scratch tree of env_name's pytest checks, made equal to tree.

        One tree per interpreter, OUT/_incr-ENV, at the same path for the
        control and every mutant, so that its extension's CMake build
        directory is reused and only what a mutant's file changes is compiled
        again (build_incremental()).  Before each check: the files the
        previous check's mutant changed are copied back from the snapshot
        (with a new modification time, so that what depends on them is
        rebuilt: a ccache hit), this mutant's FILE is copied from its scratch
        tree, and everything under build/ except this interpreter's build
        directory and install target is deleted (the examples' builds, the
        checks' own outputs), as in a fresh scratch.

        :param env_name: the interpreter (a tools/matrix.py name)
        :param tree: the check's scratch tree (the control's or a mutant's)
        :param mutant: the mutant whose FILE tree holds, or None (the control)
        :returns: the tree, and the files changed since its last build
        """
        source = self.source
        assert source is not None, "main() sets the snapshot before any check"
        inc = OUT / f"_incr-{env_name}"
        if env_name not in self._incr_dirty or not inc.exists():
            if inc.exists():
                shutil.rmtree(inc)
            shutil.copytree(source, inc, symlinks=True)
            self._incr_dirty[env_name] = set()
        changed = set(self._incr_dirty[env_name])
        for rel in changed:
            shutil.copyfile(source / rel, inc / rel)  # a new mtime
        now = {mutant.file} if mutant is not None else set()
        for rel in now:
            shutil.copyfile(tree / rel, inc / rel)
        self._incr_dirty[env_name] = now
        keep = {f"ext-{env_name}", f"site-{env_name}"}
        build = inc / "build"
        if build.is_dir():
            for child in build.iterdir():
                if child.name not in keep:
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child)
                    else:
                        child.unlink()
        return inc, changed | now

    def build_incremental(self, it, inc: Path, env_name: str, changed: set[str], log: Path) -> int:
        """Build and install inc's extension into inc/build/site-ENV; the status.

        The first build of the tree is pip's (_build_extension(): configure,
        build, install); later ones run CMake's build and install in the
        same build directory, which compile only the units that see a changed
        file (and re-run CMake's configure when a CMake file changed), and
        copy the package's changed Python files, which CMake does not install.

        :param it: the interpreter
        :param inc: the tree of incremental_tree()
        :param env_name: its name
        :param changed: the files changed since the tree's last build
        :param log: the build's log
        :returns: 0 when the extension is built and installed
        """
        mx = self.matrix()
        bdir = inc / "build" / f"ext-{env_name}"
        site = inc / "build" / f"site-{env_name}"
        if (str(inc), env_name) not in self._built or not (bdir / "CMakeCache.txt").exists():
            self._built.discard((str(inc), env_name))
            rc, _ = self._build_extension(it, inc, env_name, log)
            if rc == 0:
                self._built.add((str(inc), env_name))
            return 1 if rc is None else rc
        env = dict(
            os.environ, **(mx.compiler_cache_env(it, OUT) if it.in_sid else compiler_cache())
        )
        # The cmake that configured the directory (pip's: the system's or the
        # environment's cmake package).
        cache = (bdir / "CMakeCache.txt").read_text(errors="replace")
        found = re.search(r"^CMAKE_COMMAND:INTERNAL=(.+)$", cache, re.M)
        cmake = found.group(1).strip() if found else "cmake"
        rc = 0
        if f"\n{CXX_FLAGS_VAR}:STRING={MUTANT_FLAGS}\n" not in cache:
            # tests/test_examples.py's wheel, built in this directory, set the
            # matrix's flags: back to the mutants' (a ccache hit per unit).
            rc, _ = run_logged(
                mx.in_env(it, [cmake, f"-D{CXX_FLAGS_VAR}={MUTANT_FLAGS}", str(bdir)]),
                log.with_suffix(".configure.log"),
                hang_guard(300),  # cmake's configure
                cwd=inc,
                env=env,
            )
        if rc == 0:
            rc, _ = run_logged(
                mx.in_env(it, [cmake, "--build", str(bdir)]),
                log,
                hang_guard(900),  # the build (a few seconds to a minute)
                cwd=inc,
                env=env,
            )
        if rc == 0:
            with open(log, "a") as f:
                rc = subprocess.run(
                    mx.in_env(it, [cmake, "--install", str(bdir), "--prefix", str(site)]),
                    cwd=inc,
                    # file(INSTALL) skips a file whose modification time equals
                    # the installed copy's to the second (CMake's
                    # cmFileTimes::DifferS); a ccache hit links the mutant's
                    # module within the second of the control's install, and
                    # the control's module stayed installed (a mutant
                    # "survived" with its code never loaded).  Copy every file.
                    env=dict(env, CMAKE_INSTALL_ALWAYS="1"),
                    stdout=f,
                    stderr=subprocess.STDOUT,
                    timeout=hang_guard(300),  # copies files
                ).returncode
            if rc == 0:
                rc = installed_module_differs(bdir, site / "deferred_cleanup", log)
        package = "reference/python/deferred_cleanup/"
        for rel in changed:
            if rel.startswith(package) and rel.endswith(".py"):
                dest = site / "deferred_cleanup" / rel[len(package) :]
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(inc / rel, dest)
        if rc != 0:
            # The next check starts this tree's build from nothing.
            self._built.discard((str(inc), env_name))
        return 1 if rc is None else rc

    def _build_extension(self, it, tree: Path, env_name: str, build_log: Path):
        """pip-install tree's extension for it into tree/build/site-ENV; (rc, output)."""
        mx = self.matrix()
        site = tree / "build" / f"site-{env_name}"
        argv = mx.pip_install_argv(
            it, tree, str(tree / "build" / f"ext-{env_name}"), site, cxx_flags=MUTANT_FLAGS
        )
        return run_logged(
            mx.in_env(it, argv),
            build_log,
            hang_guard(900),  # the build (about 40 s idle)
            cwd=tree,
            # On the host, compiler_cache(); inside the Debian unstable root, the
            # root's own ccache (tools/matrix.py's compiler_cache_env).
            env=dict(
                os.environ,
                **(mx.compiler_cache_env(it, OUT) if it.in_sid else compiler_cache()),
            ),
        )

    def control_pytest(self, env_name: str, checks: list[str], tree: Path, logs: Path):
        """The control's pytest checks of one interpreter in one pytest session.

        Each check keeps its own selection (its files and its ``-k``, applied
        by tools/mutate_control.py with pytest's own matcher) and gets its own
        CheckResult: passed when every test it selects passed or skipped and
        at least one passed, as a session of its own would.  A test that
        several checks select runs once.  Checks whose arguments are not
        plain files, ``-q`` and ``-k`` run in sessions of their own, and so do
        all of them when the shared session ends in anything but a pass or a
        test failure (its exit status, or no report): the control is never
        weaker than one session per check.

        :param env_name: the interpreter (a tools/matrix.py name)
        :param checks: KILLED_BY texts ``pytest:ENV:ARGS`` of that interpreter
        :param tree: the unmutated scratch tree
        :param logs: the control's log directory
        :returns: one CheckResult per check, in the order given
        """
        specs, alone = [], []
        for check in checks:
            spec = control_spec(check, tree)
            (specs.append(spec) if spec else alone.append(check))
        results: dict[str, CheckResult] = {}
        if len(specs) > 1:
            t0 = time.monotonic()
            batch = self._control_batch(env_name, specs, tree, logs)
            share = (time.monotonic() - t0) / len(specs)
            if batch is None:
                alone = checks
            else:
                for r in batch:
                    r.seconds = share
                    results[r.check] = r
        else:
            alone = checks
        for check in alone:
            if check not in results:
                results[check] = self.run_check(check, tree, logs)
        return [results[c] for c in checks]

    def _control_batch(self, env_name, specs, tree: Path, logs: Path):
        """One session for specs ([check, paths, k]); CheckResults, or None when
        the session itself failed (then each check runs alone)."""
        it = self.env(env_name)
        tree, changed = self.incremental_tree(env_name, tree, None)
        site = tree / "build" / f"site-{env_name}"
        build_log = logs / f"{env_name}-build.log"
        if self.build_incremental(it, tree, env_name, changed, build_log) != 0:
            return None  # each check reports the failed build itself
        out_json = logs / f"{env_name}-control.json"
        out_json.parent.mkdir(parents=True, exist_ok=True)
        out_json.unlink(missing_ok=True)
        paths = sorted({p for _, ps, _ in specs for p in ps})
        # The plugin alone on the path (not all of tools/, whose modules the
        # tests must not import by accident).
        plugin_dir = tree / "build" / "mutate-control-plugin"
        plugin_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree / "tools" / "mutate_control.py", plugin_dir / "mutate_control.py")
        extra = {
            "PYTHONPATH": f"{site}{os.pathsep}{plugin_dir}",
            "DC_MUTATE_CONTROL": json.dumps(specs),
            "DC_MUTATE_CONTROL_OUT": str(out_json),
        }
        r = self._run_pytest(
            it,
            env_name,
            shlex.join(["-p", "mutate_control", *paths]),
            tree,
            logs,
            f"pytest:{env_name}:(control, {len(specs)} checks in one session)",
            None,
            site,
            build_log,
            extra_env=extra,
            timeout_s=PYTEST_TIMEOUT_S * 2,
        )
        if r.outcome == "error" or not out_json.exists():
            say(
                f"  control: the shared {env_name} session failed ({r.detail[:200]}); "
                "each check runs alone"
            )
            return None
        return control_results(specs, json.loads(out_json.read_text()), r.log)

    def _run_pytest(
        self,
        it,
        env_name,
        args,
        tree,
        logs,
        check,
        mutant,
        site,
        build_log,
        extra_env=None,
        timeout_s=PYTEST_TIMEOUT_S,
    ):
        """Run one pytest check against tree's built extension; its CheckResult."""
        mx = self.matrix()
        env = dict(
            os.environ,
            PYTHONPATH=str(site),
            PYTHONDONTWRITEBYTECODE="1",
            DC_MATRIX="1",
            DC_INTERPRETER_NAME=it.name,
            DC_INTERPRETER_SOURCE=it.source,
        )
        if mutant is not None and not self.complete:
            # As for a C++ check: the mutant's KILLING_TESTS run first and the
            # session stops once they have all failed (with none named, at the
            # first failure); tests/conftest.py does it.  The verdict's rule is
            # unchanged: the check must fail, with every KILLING_TESTS entry
            # among its failures.  The control runs every test.
            env["DC_MUTATE_STOP_AFTER"] = json.dumps(list(mutant.killing_tests))
        env.update(extra_env or {})
        # The tests must import this scratch's build, not the venv's own.
        where = subprocess.run(
            mx.in_env(it, [it.py, "-c", "import deferred_cleanup._native as n; print(n.__file__)"]),
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
        )
        native = where.stdout.strip().splitlines()[-1] if where.stdout.strip() else ""
        if where.returncode != 0 or not native.startswith(str(site)):
            return CheckResult(
                check,
                "error",
                [],
                0,
                str(build_log),
                f"the scratch build is not the one imported: {native or where.stderr[-400:]}",
            )
        tag = env_name if extra_env is None else f"{env_name}-control"
        xml = logs / f"{tag}.xml"
        log = logs / f"{tag}.log"
        rc, out = run_logged(
            mx.in_env(
                it,
                [
                    it.py,
                    "-m",
                    "pytest",
                    "-p",
                    "no:cacheprovider",
                    *shlex.split(args),
                    f"--junitxml={xml}",
                    "-o",
                    "junit_family=xunit2",
                ],
            ),
            log,
            hang_guard(timeout_s),
            cwd=tree,
            env=env,
        )
        return self.pytest_outcome(check, rc, xml, log, out)


def installed_module_differs(bdir: Path, package: Path, log: Path) -> int:
    """1 (and a line in log) when a module built in bdir is not the one
    installed in package, so that a check never runs against a stale build;
    else 0.

    :param bdir: the CMake build directory (holds _native*.so)
    :param package: the installed package directory
    :param log: the build's log, appended to
    """
    for built in sorted(bdir.glob("_native*.so")):
        installed = package / built.name
        if not installed.is_file() or not filecmp.cmp(built, installed, shallow=False):
            with open(log, "a") as f:
                f.write(f"[mutate] {installed} is not the module just built ({built})\n")
            return 1
    return 0


def unfailed(killing_tests: list[str], failing: list[str]) -> list[str]:
    """The KILLING_TESTS entries that no failing entry contains (a substring
    match: a failure is recorded with its reason, "Name (timeout after 30 s)")."""
    return [t for t in killing_tests if not any(t in f for f in failing)]


#: A GoogleTest definition in tests/cpp: TEST(Suite, Name), TYPED_TEST, TEST_F, TEST_P.
GTEST_DEF = re.compile(r"\b(?:TYPED_)?TEST(?:_F|_P)?\(\s*\w+\s*,\s*(\w+)\s*\)")


def killing_unit(killing_tests: list[str], cpp_dir: Path | None = None) -> str | None:
    """The one tests/cpp file (its stem) that defines every named killing test.

    :param killing_tests: a mutant's KILLING_TESTS; an entry is matched by its
        last dotted part (``Core/reference.Name`` -> ``Name``); an entry that
        names no test (a sanitizer's report, such as ``heap-use-after-free``)
        is ignored
    :param cpp_dir: the directory to read, tests/cpp by default
    :returns: the stem, or None when no entry names a test or the named
        tests are in more than one file (the whole suite is then built)
    """
    cpp_dir = cpp_dir or REPO / "tests" / "cpp"
    defined: dict[str, set[str]] = {}
    for path in sorted(cpp_dir.glob("*_tests.cpp")):
        for name in GTEST_DEF.findall(path.read_text()):
            defined.setdefault(name, set()).add(path.stem)
    units: set[str] = set()
    for entry in killing_tests:
        units |= defined.get(entry.split(".")[-1], set())
    return units.pop() if len(units) == 1 else None


def control_results(specs: list, report: dict, log: str) -> list[CheckResult]:
    """One CheckResult per spec from tools/mutate_control.py's report.

    :param specs: ``[check, paths, k]`` as given to the shared session
    :param report: the plugin's DC_MUTATE_CONTROL_OUT file, parsed
    :param log: the shared session's log, named by every result
    :returns: per check, in specs' order: ``failed`` naming the node ids of
        its tests that failed; ``error`` when none of its tests passed (it
        selected none, or all were skipped: "pytest ran no test", as for a
        session of its own); else ``passed``
    """
    outcomes = report["outcomes"]
    results = []
    for check, _, _ in specs:
        ids = report["selected"].get(check, [])
        failing = [i for i in ids if outcomes.get(i) == "failed"]
        if failing:
            results.append(CheckResult(check, "failed", failing, 0, log))
        elif not any(outcomes.get(i) == "passed" for i in ids):
            results.append(CheckResult(check, "error", [], 0, log, "pytest ran no test"))
        else:
            results.append(CheckResult(check, "passed", [], 0, log))
    return results


def control_spec(check: str, tree: Path):
    """[check, paths, k] for tools/mutate_control.py, or None when check's
    arguments are anything but test files, ``-q`` and one ``-k EXPR``."""
    if not check.startswith("pytest:"):
        return None
    args = shlex.split(check.split(":", 2)[2])
    paths, expr, i = [], None, 0
    while i < len(args):
        a = args[i]
        if a == "-q":
            pass
        elif a == "-k" and i + 1 < len(args) and expr is None:
            expr = args[i + 1]
            i += 1
        elif a.startswith("-") or "::" in a or not (tree / a).is_file():
            return None
        else:
            paths.append(os.path.normpath(a))
        i += 1
    return [check, paths, expr] if paths else None


# ---------------------------------------------------------------- the run
def verdict(m: Mutant, results: list[CheckResult]) -> tuple[str, str]:
    """(status, why) of one mutant from its check results."""
    errors = [r for r in results if r.outcome == "error"]
    if errors:
        return "error", "; ".join(
            f"{r.check}: {r.detail.splitlines()[0] if r.detail else 'error'}" for r in errors
        )
    survived = [r.check for r in results if r.outcome == "passed"]
    if survived:
        return "survived", "passed " + ", ".join(survived)
    failing = [f for r in results for f in r.failing]
    missing = unfailed(m.killing_tests, failing)
    if missing:
        return "killed-elsewhere", "KILLING_TESTS did not fail: " + ", ".join(missing)
    return "killed", ""


def killed_by_text(results: list[CheckResult]) -> str:
    parts = []
    for r in results:
        if r.outcome == "failed":
            parts.append(f"{r.check}: {', '.join(r.failing)}")
    return "; ".join(parts) or "-"


def write_reports(
    rows: list[dict], control: dict, total_s: float, fast: bool, complete: bool = False
) -> str:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "mutate.json").write_text(
        json.dumps(
            {
                "fast": fast,
                "complete": complete,
                "seconds": round(total_s, 1),
                "control": control,
                "mutants": rows,
            },
            indent=2,
        )
        + "\n"
    )
    head = ["mutant", "property", "killed by", "status", "s", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    for r in rows:
        lines.append(
            "| "
            + " | ".join(
                esc(x)
                for x in (
                    r["name"],
                    r["property"],
                    r["killed_by"],
                    r["status"] + (f" ({r['why']})" if r["why"] else ""),
                    f"{r['seconds']:.0f}",
                    r["note"] or "",
                )
            )
            + " |"
        )
    md = "\n".join(lines)
    (OUT / "mutate.md").write_text(
        f"# Mutation kill matrix\n\nControl (unmutated tree): {control['status']} "
        f"({', '.join(control['checks'])}, {control['seconds']:.0f} s).  "
        f"{'Fast subset' if fast else 'Every test' if complete else 'Every check'}; "
        f"total {total_s:.0f} s.\n\n{md}\n"
    )
    return md


UNIVERSALMUTATOR = "universalmutator==1.14.1"  # pinned; its own venv under build/mutate/
UNIVERSAL_HEADERS = [
    "queue.hpp",
    "scheduling.hpp",
    "drain.hpp",
    "callback.hpp",
    "shutdown.hpp",
    "item.hpp",
]


def universal(n: int, seed: int) -> int:
    """A broader, automatic score (report only): universalmutator's C++ rules
    on the core headers, a random sample of n mutants, each against the C++
    suite under ASan+UBSan, stopping at the first failing test.  A mutant that
    does not build is 'invalid' and left out of the score.  Survivors are
    listed with their changed line: each is an equivalent mutant or a gap in
    the tests, to be read by a person."""
    import difflib
    import random

    venv = OUT / "universalmutator-venv"
    tool = venv / "bin" / "mutate"
    if not tool.exists():
        say(f"installing {UNIVERSALMUTATOR} into {venv} (pip)")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                UNIVERSALMUTATOR,
            ],
            check=True,
        )
    gen = OUT / "universal-mutants"
    if gen.exists():
        shutil.rmtree(gen)
    pool = []
    for h in UNIVERSAL_HEADERS:
        d = gen / h
        d.mkdir(parents=True)
        src = REPO / "include" / "deferred_cleanup" / h
        subprocess.run(
            [str(tool), str(src), "cpp", "--noCheck", "--mutantDir", str(d)],
            cwd=d,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
        pool += [(h, p) for p in sorted(d.glob("*.hpp"))]
    source = snapshot(tree_files(), "_source-universal")
    # Most generated mutants do not compile.  Draw at random and keep the
    # first n that pass a syntax check of every core header (well under a
    # second each), instead of paying a full build for each invalid one.
    rng = random.Random(seed)
    order = rng.sample(pool, len(pool))
    inc = OUT / "_syntax" / "include"
    if inc.parent.exists():
        shutil.rmtree(inc.parent)
    shutil.copytree(source / "include", inc)
    tu = inc.parent / "all.cpp"
    tu.write_text("".join(f'#include "deferred_cleanup/{h}"\n' for h in UNIVERSAL_HEADERS))

    def code(path: Path) -> str:
        """The file without comments (g++ -fpreprocessed -E: comments go, nothing expands)."""
        return subprocess.run(
            ["g++", "-x", "c++", "-fpreprocessed", "-E", "-P", str(path)],
            capture_output=True,
            text=True,
        ).stdout

    plain = {h: code(source / "include" / "deferred_cleanup" / h) for h in UNIVERSAL_HEADERS}
    sample, invalid, comment_only = [], 0, 0
    for h, path in order:
        if len(sample) >= n:
            break
        if code(path) == plain[h]:
            comment_only += 1  # changes only a comment: equivalent, not worth a build
            continue
        target = inc / "deferred_cleanup" / h
        original = target.read_text()
        shutil.copy2(path, target)
        ok = (
            subprocess.run(
                [
                    "g++",
                    "-std=c++20",
                    "-fsyntax-only",
                    "-Wall",
                    "-Wextra",
                    "-Werror",
                    "-I",
                    str(inc),
                    str(tu),
                ],
                capture_output=True,
            ).returncode
            == 0
        )
        target.write_text(original)
        if ok:
            sample.append((h, path))
        else:
            invalid += 1
    say(
        f"universalmutator: {len(pool)} mutants of {len(UNIVERSAL_HEADERS)} headers; drew "
        f"{len(sample) + invalid + comment_only} at random (seed {seed}): {comment_only} change "
        "only a comment, "
        f"{invalid} do not compile, {len(sample)} to run"
    )
    runner = Runner(fast=True)
    logs_root = OUT / "logs-universal"
    if logs_root.exists():
        shutil.rmtree(logs_root)
    rows = []
    t_start = time.monotonic()
    for i, (h, path) in enumerate(sample, 1):
        rel = f"include/deferred_cleanup/{h}"
        before = (source / rel).read_text().splitlines()
        after = path.read_text().splitlines()
        change = " / ".join(
            line[1:].strip()
            for line in difflib.unified_diff(before, after, lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        )
        tree = make_scratch("_universal", source)
        shutil.copy2(path, tree / rel)
        probe = Mutant(
            name=path.stem,
            path=path,
            file=rel,
            find="",
            replace="",
            property="",
            killed_by=["cpp-asan"],
        )
        r = runner.run_check("cpp-asan", tree, logs_root / f"{h}-{path.stem}", probe)
        status = {"failed": "killed", "passed": "SURVIVED", "error": "invalid"}[r.outcome]
        rows.append(
            dict(
                header=h,
                mutant=path.name,
                change=change[:160],
                status=status,
                killed_by=", ".join(f for f in r.failing if "not run" not in f)[:160],
            )
        )
        say(f"  [{i}/{len(sample)}] {h} {path.name}: {status} ({r.seconds:.0f} s) {change[:100]}")
        shutil.rmtree(tree, ignore_errors=True)
    valid = [r for r in rows if r["status"] != "invalid"]
    killed = [r for r in valid if r["status"] == "killed"]
    score = f"{len(killed)} of {len(valid)} valid mutants killed" + (
        f" ({100 * len(killed) / len(valid):.0f} %)" if valid else ""
    )
    lines = [
        "# universalmutator sample (report only)",
        "",
        f"{UNIVERSALMUTATOR}, C++ rules, on {', '.join(UNIVERSAL_HEADERS)}: {len(pool)} mutants.  "
        "Drawn at "
        f"random (seed {seed}) until {len(sample)} changed code and passed a syntax check "
        f"({comment_only} drawn "
        f"changed only a comment, {invalid} did not compile); "
        f"each against tests/cpp under ASan+UBSan, stopping at the first failing test.  {score}; "
        f"{len(rows) - len(valid)} more did not build.  "
        f"{time.monotonic() - t_start:.0f} s.",
        "",
        "| header | mutant | change | status | first failing test |",
        "|---|---|---|---|---|",
    ]
    esc = lambda x: str(x).replace("|", "\\|")  # noqa: E731
    for r in rows:
        lines.append(
            (
                f"| {r['header']} | {r['mutant']} | `{esc(r['change'])}` | {r['status']} | "
                f"{esc(r['killed_by'])} |"
            )
        )
    (OUT / "universal.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    say(f"universal: {score}; report: {OUT / 'universal.md'}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    depth = ap.add_mutually_exclusive_group()
    depth.add_argument(
        "--fast", action="store_true", help="skip a mutant's pytest checks when it names others"
    )
    depth.add_argument(
        "--complete",
        action="store_true",
        help="run every test of every check, also once the mutant is killed (about 3 h)",
    )
    ap.add_argument("--only", help="comma-separated mutant names")
    ap.add_argument(
        "--mutants", default=str(MUTANTS), help="directory of mutant files (default tests/mutants)"
    )
    ap.add_argument(
        "--validate", action="store_true", help="only parse the mutants and check their find texts"
    )
    ap.add_argument("--list", action="store_true", help="list the mutants and their checks")
    ap.add_argument(
        "--keep", action="store_true", help="keep the scratch trees (default: delete after each)"
    )
    ap.add_argument(
        "--universal",
        type=int,
        metavar="N",
        help="report only: a sample of N universalmutator mutants",
    )
    ap.add_argument(
        "--seed", type=int, default=1, help="seed of the --universal sample (default 1)"
    )
    ap.add_argument(
        "--out",
        help="directory for scratch trees, logs and reports (default build/mutate; keep it "
        "inside the work tree when a check runs in the Debian unstable root)",
    )
    a = ap.parse_args()
    global OUT
    if a.out:
        OUT = Path(a.out).resolve()
    if a.universal:
        return universal(a.universal, a.seed)

    try:
        mutants = load_all(Path(a.mutants))
        for m in mutants:
            check_applies(m, REPO)
    except MutantError as e:
        say(f"INVALID: {e}")
        return 1
    if a.only:
        want = a.only.split(",")
        unknown = set(want) - {m.name for m in mutants}
        if unknown:
            say(f"unknown mutant(s): {', '.join(sorted(unknown))}")
            return 1
        mutants = [m for m in mutants if m.name in want]
    if not mutants:
        say(f"no mutants in {a.mutants}")
        return 1
    if a.list or a.validate:
        for m in mutants:
            print(f"{m.name}: {m.file}; {', '.join(checks_for(m, a.fast))}; {m.property}")
        say(f"{len(mutants)} mutants, each FIND found exactly once")
        return 0

    t_start = time.monotonic()
    ensure_ccache()
    runner = Runner(a.fast, a.complete)
    source = snapshot(tree_files())
    runner.source = source
    OUT.mkdir(parents=True, exist_ok=True)
    for stale in ("mutate.json", "mutate.md"):
        (OUT / stale).unlink(missing_ok=True)
    logs_root = OUT / "logs"
    if logs_root.exists():
        shutil.rmtree(logs_root)

    # Control: every check any mutant uses must pass on the unmutated tree.
    all_checks = []
    for m in mutants:
        for c in checks_for(m, a.fast):
            if c not in all_checks:
                all_checks.append(c)
    say(f"control: the unmutated tree must pass {', '.join(all_checks)}")
    t0 = time.monotonic()
    tree = make_scratch("_control", source)
    # The pytest checks of one interpreter share one session (Runner.control_pytest).
    by_env: dict[str, list[str]] = {}
    for c in all_checks:
        if c.startswith("pytest:"):
            by_env.setdefault(c.split(":", 2)[1], []).append(c)
    done: dict[str, CheckResult] = {}
    for env_name, checks in by_env.items():
        for r in runner.control_pytest(env_name, checks, tree, logs_root / "_control"):
            done[r.check] = r
    control_results = [
        done[c] if c in done else runner.run_check(c, tree, logs_root / "_control")
        for c in all_checks
    ]
    bad = [r for r in control_results if r.outcome != "passed"]
    control = {
        "status": "passed" if not bad else "FAILED",
        "checks": all_checks,
        "seconds": round(time.monotonic() - t0, 1),
        "results": [dataclasses.asdict(r) for r in control_results],
    }
    for r in control_results:
        say(
            f"  control {r.check}: {r.outcome} ({r.seconds:.0f} "
            f"s){' ' + ', '.join(r.failing) if r.failing else ''}"
            f"{' ' + r.detail if r.detail else ''}"
        )
    if not a.keep:
        shutil.rmtree(tree, ignore_errors=True)
    if bad:
        write_reports([], control, time.monotonic() - t_start, a.fast, a.complete)
        say(f"control FAILED: a kill would mean nothing; logs under {logs_root}")
        return 1

    rows = []
    for i, m in enumerate(mutants, 1):
        t0 = time.monotonic()
        say(f"[{i}/{len(mutants)}] {m.name}: {m.property}")
        tree = make_scratch(m.name, source)
        try:
            mutated = check_applies(m, tree)
        except MutantError as e:
            rows.append(
                dict(
                    name=m.name,
                    property=m.property,
                    killed_by="-",
                    status="stale",
                    why=str(e),
                    note=m.note,
                    seconds=0.0,
                    checks=[],
                )
            )
            continue
        (tree / m.file).write_text(mutated)
        results = [runner.run_check(c, tree, logs_root / m.name, m) for c in checks_for(m, a.fast)]
        status, why = verdict(m, results)
        row = dict(
            name=m.name,
            property=m.property,
            killed_by=killed_by_text(results),
            status=status,
            why=why,
            note=m.note,
            seconds=round(time.monotonic() - t0, 1),
            cpu_seconds=round(sum(r.cpu_seconds for r in results), 1),
            file=m.file,
            checks=[dataclasses.asdict(r) for r in results],
        )
        rows.append(row)
        say(
            (
                f"  {status}{' (' + why + ')' if why else ''}: {row['killed_by']} "
                f"({row['seconds']:.0f} s)"
            )
        )
        if not a.keep:
            shutil.rmtree(tree, ignore_errors=True)

    total = time.monotonic() - t_start
    md = write_reports(rows, control, total, a.fast, a.complete)
    print()
    print(md)
    not_killed = [r["name"] for r in rows if r["status"] != "killed"]
    say(
        f"{len(rows) - len(not_killed)} of {len(rows)} mutants killed in {total:.0f} s, "
        f"{children_cpu() / 60:.1f} CPU-min (control {control['seconds']:.0f} s); "
        f"report: {OUT / 'mutate.md'}"
    )
    if not_killed:
        say(f"NOT KILLED: {', '.join(not_killed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

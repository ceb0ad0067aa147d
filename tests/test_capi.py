# SPDX-License-Identifier: Apache-2.0
"""The C API and the CMake package as a new extension author meets them.

What a user found building an extension from docs/extension-authors.rst alone
(issue "The core, adoptable"), each checked here against the real package:

* a C-only project (``project(x LANGUAGES C)``) that links
  ``deferred_cleanup::cpython`` stops at configure time with one message
  saying to enable CXX, from the installed config and from the source tree
  (``add_subdirectory``), instead of dropping the host's C++ sources;
* the host's sources are compiled hidden, the user's own keep their
  visibility (``nm -D`` of an extension with a C and a C++ source);
* ``dc_item_new`` with a NULL cleanup returns NULL, ``dc_hand_off`` with a NULL
  item or a host that is not the extension's returns -1 and queues nothing
  (include/deferred_cleanup/cpython/deferred_cleanup.h), also from a thread
  with no thread state;
* ``dc_item_payload`` gives the payload back;
* fork(): items queued at the fork are cleaned in the parent and in the
  child, and the user's ``outstanding()`` count is the child's copy.

The package is installed with ``cmake --install`` of this tree
(``-DDC_PACKAGE_ONLY=ON``) into a temporary prefix, and tests/capi/ is built
against it with this interpreter: mutants of cmake/ and src/cpython/ reach it.
Every scenario runs in its own interpreter, so a crash fails one test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "tests" / "capi"
HANG_GUARD_S = 600  # a subprocess or CMake step that takes longer has hung
CXX_MESSAGE = "links deferred_cleanup::cpython, whose sources are C++17"

# Configure and build take a few seconds idle, a minute or more with both cores busy.
pytestmark = pytest.mark.timeout(1800)


def _run(argv: list[str], ok: bool = True, **kw) -> subprocess.CompletedProcess:
    """Run a command; with ``ok``, assert it succeeded (its output in the message)."""
    p = subprocess.run(argv, capture_output=True, text=True, timeout=HANG_GUARD_S, **kw)
    if ok:
        assert p.returncode == 0, f"{argv}:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return p


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    """This tree's CMake package, installed by ``cmake --install`` into a temporary prefix.

    Returns:
        Path: the install prefix.
    """
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed here: the package is a CMake package")
    tmp = tmp_path_factory.mktemp("capi-package")
    _run(["cmake", "-S", str(REPO), "-B", str(tmp / "b"), "-DDC_PACKAGE_ONLY=ON"])
    _run(["cmake", "--install", str(tmp / "b"), "--prefix", str(tmp / "prefix")])
    return tmp / "prefix"


def _cmake_dir(prefix: Path) -> Path:
    return prefix / "share" / "cmake" / "deferred_cleanup"


@pytest.fixture(scope="module")
def probe(prefix, tmp_path_factory) -> Path:
    """tests/capi built with this interpreter against the installed package.

    Returns:
        Path: the build directory, which holds the module ``dc_capi_probe``.
    """
    b = tmp_path_factory.mktemp("capi-probe")
    _run(
        [
            "cmake",
            *("-S", str(PROBE), "-B", str(b)),
            "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Ddeferred_cleanup_DIR={_cmake_dir(prefix)}",
            "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror",
            "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror",
        ]
    )
    _run(["cmake", "--build", str(b), "-j2"])
    return b


def _script(probe: Path, code: str, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter that imports dc_capi_probe as ``probe``.

    Args:
        probe: the probe's build directory.
        code: the body; its last line of output must be a JSON object.
        **env: extra environment variables.

    Returns:
        dict: the JSON object the script printed last.
    """
    full = "import json, os, sys, time\nimport dc_capi_probe as probe\n" + textwrap.dedent(code)
    e = dict(os.environ, PYTHONPATH=str(probe), **env)
    e.pop("DC_SESSION_REPORT", None)
    p = subprocess.run(
        [sys.executable, "-c", full], capture_output=True, text=True, env=e, timeout=HANG_GUARD_S
    )
    assert p.returncode == 0, f"exit status {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- CMake: C-only projects

C_ONLY = """\
cmake_minimum_required(VERSION 3.25)
project(conly LANGUAGES {languages})
find_package(Python 3.10 REQUIRED COMPONENTS Interpreter Development.Module)
{find}
Python_add_library(conly MODULE WITH_SOABI conly.c)
target_link_libraries(conly PRIVATE deferred_cleanup::cpython)
"""


def _configure_c_project(tmp: Path, languages: str, find: str, *args: str):
    src = tmp / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(C_ONLY.format(languages=languages, find=find))
    (src / "conly.c").write_text("int conly_answer(void) { return 42; }\n")
    argv = ["cmake", "-S", str(src), "-B", str(tmp / "b"), f"-DPython_EXECUTABLE={sys.executable}"]
    return _run([*argv, *args], ok=False)


@pytest.mark.parametrize("languages", ["C", "C CXX"])
def test_a_c_only_project_stops_at_configure_with_one_message_installed(
    prefix, languages, tmp_path
):
    p = _configure_c_project(
        tmp_path,
        languages,
        "find_package(deferred_cleanup CONFIG REQUIRED)",
        f"-Ddeferred_cleanup_DIR={_cmake_dir(prefix)}",
    )
    out = " ".join((p.stdout + p.stderr).split())  # CMake wraps its messages
    if languages == "C":
        assert p.returncode != 0, f"a C-only project configured:\n{out[-3000:]}"
        assert out.count(CXX_MESSAGE) == 1 and "Enable CXX" in out, out[-3000:]
    else:  # the same project with CXX enabled configures, with no such message
        assert p.returncode == 0 and CXX_MESSAGE not in out, out[-3000:]


@pytest.mark.parametrize("languages", ["C", "C CXX"])
def test_a_c_only_project_stops_at_configure_with_one_message_source_tree(languages, tmp_path):
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed here: the package is a CMake package")
    p = _configure_c_project(
        tmp_path,
        languages,
        'set(DC_PACKAGE_ONLY ON CACHE BOOL "" FORCE)\n'
        f'add_subdirectory("{REPO.as_posix()}" deferred_cleanup)',
    )
    out = " ".join((p.stdout + p.stderr).split())  # CMake wraps its messages
    if languages == "C":
        assert p.returncode != 0, f"a C-only project configured:\n{out[-3000:]}"
        assert out.count(CXX_MESSAGE) == 1 and "Enable CXX" in out, out[-3000:]
    else:
        assert p.returncode == 0 and CXX_MESSAGE not in out, out[-3000:]


# ---------------------------------------------------------------- visibility


def test_the_users_symbols_stay_exported_and_the_hosts_are_hidden(probe):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) not found: it reads the module's dynamic symbols")
    (so,) = probe.glob("dc_capi_probe*.so")
    out = _run([nm, "-DC", "--defined-only", str(so)]).stdout
    exported = {line.split(maxsplit=2)[-1] for line in out.splitlines() if line.strip()}
    # The user's own C and C++ functions, default visibility, not static.
    assert {"capi_probe_user_c", "capi_probe_user_cxx"} <= exported, sorted(exported)
    # The host library's: none (dc_ functions, deferred_cleanup:: code).
    ours = sorted(e for e in exported if e.startswith("dc_") or "deferred_cleanup" in e)
    assert ours == [], f"the host's symbols are exported: {ours}"


# ---------------------------------------------------------------- argument checks


def test_null_cleanup_null_item_and_foreign_host_are_refused(probe):
    r = _script(
        probe,
        """
        o = object()
        refs = sys.getrefcount(o)
        out = {"new_null_cleanup_refused": probe.item_new_null_cleanup(),
               "null_item": probe.hand_off_null_item()}
        for which in ("null", "other"):
            rc, back = probe.hand_off_with(o, which)
            out[which] = [rc, back is o]
        del back
        out["refs_kept"] = sys.getrefcount(o) == refs
        out["native"] = list(probe.null_calls_on_native_thread())
        out["after_refusals"] = probe.counters()
        out["drained"] = probe.drain_now()
        rc, back = probe.hand_off_with(o, "host")  # the control: accepted, cleaned
        out["host"] = [rc, back is None]
        end = time.monotonic() + 60  # hang guard
        while probe.counters()["ours"] < 1 and time.monotonic() < end:
            time.sleep(0.001)
        out["after_one"] = probe.counters()
        out["refs_back"] = sys.getrefcount(o) == refs
        print(json.dumps(out))
        """,
    )
    assert r["new_null_cleanup_refused"] is True, r
    assert r["null_item"] == -1, r
    # Refused: -1, the item still the caller's (its payload read back).
    assert r["null"] == [-1, True] and r["other"] == [-1, True], r
    assert r["refs_kept"], r
    # From a thread with no thread state: the same answers.
    assert r["native"] == [-1, -1, 1], r
    # Nothing was queued or counted by a refusal.
    assert r["after_refusals"] == {"handed_off": 0, "cleaned": 0, "ours": 0}, r
    assert r["drained"] == 0, r
    # The control: this extension's host takes the item and cleans it.
    assert r["host"] == [0, True], r
    assert r["after_one"]["handed_off"] == 1 and r["after_one"]["ours"] == 1, r
    assert r["refs_back"], r


def test_item_payload_returns_the_payload_it_was_made_with(probe):
    r = _script(
        probe,
        """
        o = object()
        p, null_gives_null = probe.payload_of(o)
        print(json.dumps({"same": p is o, "null": null_gives_null}))
        """,
    )
    assert r == {"same": True, "null": True}, r


# ---------------------------------------------------------------- fork()

N_FORK = 200


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is unavailable here")
def test_items_queued_at_fork_are_cleaned_in_the_parent_and_in_the_child(probe):
    r = _script(
        probe,
        f"""
        rfd, wfd = os.pipe()
        objs = [object() for _ in range({N_FORK})]
        pid, at_fork = probe.hand_off_and_fork(objs)
        end = time.monotonic() + 60  # hang guard
        # No entry point, no drain_now: the host's pending calls alone.
        while probe.counters()["ours"] < {N_FORK} and time.monotonic() < end:
            time.sleep(0.001)
        mine = {{"at_fork": at_fork, "ours": probe.counters()["ours"]}}
        if pid == 0:
            os.write(wfd, json.dumps(mine).encode())
            os._exit(0)
        os.close(wfd)
        child = json.loads(os.read(rfd, 4096).decode() or "null")
        _, status = os.waitpid(pid, 0)
        print(json.dumps({{"parent": mine, "child": child, "status": status}}))
        """,
    )
    parent, child = r["parent"], r["child"]
    assert r["status"] == 0 and child is not None, r
    # The same moment seen from both sides; some items were still queued then,
    # else this run shows nothing about inherited items.
    assert parent["at_fork"] == child["at_fork"] < N_FORK, r
    # Each process cleans every item handed off before the fork: the child its
    # copies of those still queued at the fork, the parent its own.
    assert parent["ours"] == N_FORK, f"hang guard or lost items in the parent: {r}"
    assert child["ours"] == N_FORK, f"hang guard or lost items in the child: {r}"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is unavailable here")
def test_items_queued_with_no_pending_call_at_fork_are_cleaned_in_the_child(probe):
    # At this fork CPython's pending-call ring holds no call of the host's: it
    # was full when the items were handed off (the host's Py_AddPendingCall
    # was refused, the items stayed queued), then emptied by running our own
    # calls.  The child inherits the items and no pending call, so only the
    # host's fork handler can schedule their drain.
    r = _script(
        probe,
        f"""
        import threading
        released = []  # one entry per payload released: on the main thread?

        class Payload:
            def __del__(self):
                released.append(threading.current_thread() is threading.main_thread())

        rfd, wfd = os.pipe()
        objs = [Payload() for _ in range({N_FORK})]
        fillers, host_calls = probe.hand_off_while_ring_full(objs)
        del objs  # the items hold the only references now
        queued = {{"fillers": fillers, "host_calls": host_calls, "ours": probe.counters()["ours"]}}
        pid = os.fork()
        if pid == 0:
            end = time.monotonic() + 60  # hang guard
            # No entry point, no drain_now, no hand-off: the host's fork handler alone.
            while len(released) < {N_FORK} and time.monotonic() < end:
                time.sleep(0.001)
            mine = {{"released": len(released), "on_main": released.count(True)}}
            os.write(wfd, json.dumps(mine).encode())
            os._exit(0)
        os.close(wfd)
        child = json.loads(os.read(rfd, 4096).decode() or "null")
        _, status = os.waitpid(pid, 0)
        # The parent: no pending call either; its next entry point drains them.
        before_entry = len(released)
        probe.entry()
        parent = {{"before_entry": before_entry, "released": len(released),
                   "on_main": released.count(True)}}
        print(json.dumps({{"queued": queued, "parent": parent, "child": child,
                          "status": status}}))
        """,
    )
    queued, parent, child = r["queued"], r["parent"], r["child"]
    assert r["status"] == 0 and child is not None, r
    # The construction held: CPython's ring was full (31 or 32 of our calls),
    # the host got no pending call accepted, and nothing was cleaned before the fork.
    assert queued["fillers"] >= 31 and queued["host_calls"] == 0, r
    assert queued["ours"] == 0, r
    # The child cleans every item it inherited, each on its main thread.
    assert child == {"released": N_FORK, "on_main": N_FORK}, (
        f"hang guard or items left queued in the child: {r}"
    )
    # The parent had nothing scheduled either: an entry point cleans them all.
    assert parent["before_entry"] == 0, r
    assert parent["released"] == parent["on_main"] == N_FORK, r


FORK_OUTSTANDING = """
probe.set_outstanding(1)  # work in flight on a thread the child will not have
if {reset}:
    os.register_at_fork(after_in_child=lambda: probe.set_outstanding(0))
t0 = time.monotonic()
pid = os.fork()
if pid == 0:
    sys.exit(0)  # a normal exit: the atexit phase, the host's exit sequence
probe.set_outstanding(0)  # the parent's own work completed
_, status = os.waitpid(pid, 0)
print(json.dumps({{"status": status, "child_s": time.monotonic() - t0}}))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is unavailable here")
def test_a_childs_copied_outstanding_count_holds_its_exit_until_the_bound(probe):
    wait_ms = 500
    r = _script(
        probe, FORK_OUTSTANDING.format(reset=False), DC_CAPI_PROBE_EXIT_WAIT_MS=str(wait_ms)
    )
    assert r["status"] == 0, r
    # Step 0 of the child's exit sequence drains while outstanding() is
    # non-zero, until the bound: the copied count never falls in the child.
    assert r["child_s"] >= wait_ms / 1000, r


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is unavailable here")
def test_a_child_that_resets_its_count_at_fork_does_not_wait(probe):
    bound_ms = 120_000  # far beyond any exit of a child that does not wait
    r = _script(
        probe, FORK_OUTSTANDING.format(reset=True), DC_CAPI_PROBE_EXIT_WAIT_MS=str(bound_ms)
    )
    assert r["status"] == 0, r
    assert r["child_s"] < bound_ms / 1000 / 2, f"the child waited out its exit bound: {r}"


# ---------------------------------------------------------------- the exit wait (step 0)

EXIT_WAIT_BOUND_MS = 60_000  # far beyond an exit that does not wait it out


def _exit_run(probe: Path, code: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``code`` (after ``import dc_capi_probe as probe``) in a fresh
    interpreter and let it exit normally.

    Returns:
        tuple: the finished process and its wall time in seconds.
    """
    full = "import os, signal, sys, threading, time\nimport dc_capi_probe as probe\n"
    full += textwrap.dedent(code)
    e = dict(os.environ, PYTHONPATH=str(probe), **env)
    e.pop("DC_SESSION_REPORT", None)
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-c", full], capture_output=True, text=True, env=e, timeout=HANG_GUARD_S
    )
    return p, time.monotonic() - t0


ATEXIT_ORDER = """
import atexit, os, sys

class Payload:
    def __init__(self, name):
        self.name = name

    def __del__(self):  # the item's cleanup released the last reference
        os.write(1, f"released {self.name}\\n".encode())

def handler(name):
    def run():
        os.write(1, f"handler {name}\\n".encode())
        probe.hand_off_with(Payload(name), "host")  # the item holds the only reference
    return run

atexit.register(handler("before"))  # registered before the host
import dc_capi_probe as probe  # dc_host_get(): the host registers its exit sequence
atexit.register(handler("after"))  # registered after the host
"""


def test_the_exit_sequence_runs_after_the_users_other_atexit_handlers(probe):
    # Each handler hands off an item at exit.  The exit sequence drains what
    # is queued and then closes the queue: an item handed off after it stays
    # queued and is never cleaned.  So a payload released shows its handler
    # ran before the exit sequence.
    e = dict(os.environ, PYTHONPATH=str(probe))
    e.pop("DC_SESSION_REPORT", None)
    p = subprocess.run(
        [sys.executable, "-c", ATEXIT_ORDER],
        capture_output=True,
        text=True,
        env=e,
        timeout=HANG_GUARD_S,
    )
    assert p.returncode == 0, f"exit status {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    lines = p.stdout.splitlines()
    # Each of the user's handlers runs once, whatever its place.
    assert lines.count("handler before") == 1 and lines.count("handler after") == 1, p.stdout
    # A handler registered after dc_host_get() runs before the exit sequence
    # on every version (3.14+: the sequence is registered at get(), LIFO).
    assert lines.count("released after") == 1, p.stdout
    if sys.version_info < (3, 14):
        # 3.10-3.13: the exit sequence runs after every other handler, also
        # those registered before the host (include/deferred_cleanup/cpython/deferred_cleanup.h).
        assert lines.count("released before") == 1, p.stdout


def test_an_outstanding_callback_that_raises_is_reported_once_and_ends_the_wait(probe):
    # outstanding() leaves ValueError set and returns 1 on every call.
    p, seconds = _exit_run(
        probe,
        "probe.set_outstanding_raises(True)\n",
        DC_CAPI_PROBE_EXIT_WAIT_MS=str(EXIT_WAIT_BOUND_MS),
    )
    # The host reports the exception and clears it: CPython's own exit then
    # runs with a clear error state (left set, flushing stdout fails: 120).
    assert p.returncode == 0, f"exit status {p.returncode}\n{p.stderr[-3000:]}"
    assert p.stderr.count("outstanding() raised on purpose") == 1, p.stderr[-3000:]
    assert "ValueError" in p.stderr, p.stderr[-3000:]
    # A raising outstanding() counts as nothing due: the wait ends at once.
    assert seconds < EXIT_WAIT_BOUND_MS / 1000 / 2, f"the exit waited out its bound: {seconds} s"


def test_ctrl_c_during_the_exit_wait_ends_it_and_is_shown(probe):
    # outstanding() says work is due for the whole bound; a daemon thread
    # (alive in the atexit phase) sends SIGINT once the main module returned.
    # SIGINT's handler is set explicitly: a process started with SIGINT
    # ignored (a background job of a non-interactive shell, as CI may be)
    # passes that on, and CPython then installs no KeyboardInterrupt handler.
    code = """
        signal.signal(signal.SIGINT, signal.default_int_handler)
        probe.set_outstanding(1)
        def ctrl_c():
            time.sleep(1.0)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=ctrl_c, daemon=True).start()
        """
    p, seconds = _exit_run(probe, code, DC_CAPI_PROBE_EXIT_WAIT_MS=str(EXIT_WAIT_BOUND_MS))
    assert "KeyboardInterrupt" in p.stderr, f"status {p.returncode}\n{p.stderr[-3000:]}"
    assert seconds < EXIT_WAIT_BOUND_MS / 1000 / 2, f"Ctrl-C did not end the exit wait: {seconds} s"

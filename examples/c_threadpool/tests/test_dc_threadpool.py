# SPDX-License-Identifier: Apache-2.0
"""Tests of the dc_threadpool example: what a user of it sees.

Run with the built module importable (PYTHONPATH), on every interpreter.
Each time bound is a generous hang guard, not a speed requirement.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import dc_threadpool as m
import pytest

HANG_GUARD_S = 60.0  # hang guard: far above the 0.1-0.2 s these take when idle


def _wait_for(cond) -> bool:
    end = time.monotonic() + HANG_GUARD_S
    while not cond() and time.monotonic() < end:
        time.sleep(0.001)  # pure Python: the pending call runs between bytecodes
    return cond()


def _child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S * 2,  # hang guard
    )


def test_1e5_completions_from_8_threads_all_released_on_the_main_thread():
    before = m.counters()
    objs = [object() for _ in range(100_000)]
    seen = []
    m.complete(objs, seen.append, threads=8)
    assert _wait_for(lambda: len(seen) == len(objs)), f"hang guard: {len(seen)} released"
    after = m.counters()
    assert sorted(map(id, seen)) == sorted(map(id, objs))  # each payload once
    assert after["released_on_main"] - before["released_on_main"] == len(objs)
    assert after["released_off_main"] == before["released_off_main"] == 0
    assert after["cleaned_off_main"] == 0


def test_a_callback_that_raises_goes_to_unraisablehook_and_the_rest_still_run(monkeypatch):
    hooked = []
    monkeypatch.setattr(sys, "unraisablehook", hooked.append)
    seen = []

    def callback(i):
        seen.append(i)
        if i == 50:
            raise ValueError("callback 50")

    m.complete(list(range(100)), callback, threads=4)
    assert _wait_for(lambda: len(seen) == 100), f"hang guard: {len(seen)} released"
    assert sorted(seen) == list(range(100))
    assert [type(h.exc_value) for h in hooked] == [ValueError]


def test_a_completion_during_interpreter_exit_is_released_before_exit():
    p = _child("""
        import dc_threadpool as m
        n = [0]
        def cb(_):
            n[0] += 1
            if n[0] == 1000:
                print("ALL RELEASED", flush=True)
        # Completed 200 ms from now by a native thread; the script ends at once.
        m.complete([object() for _ in range(1000)], cb, threads=2, delay_ms=200, join=False)
    """)
    assert p.returncode == 0, p.stderr
    assert "ALL RELEASED" in p.stdout, p.stdout + p.stderr


def test_ctrl_c_during_a_long_drain_stops_it_at_once_and_every_payload_is_released_once():
    """SIGINT while a drain of 400 slow callbacks runs: the KeyboardInterrupt
    arrives at once (at most the one callback running when the SIGINT handler
    ran finishes first: a count, so it holds on any machine), and the callbacks
    the drain had not run are released later, each once, on the main thread,
    by the pending call re-armed for them (the script waits in pure Python,
    calling nothing of the module).  A callback tells which drain it is in by
    the Python frame below it: run() until the KeyboardInterrupt leaves it, the
    main module afterwards (on 3.10 the re-armed call runs as soon as the
    except clause is entered, before its first statement)."""
    p = _child("""
        import json, os, signal, sys, threading, time, weakref
        import dc_threadpool as m
        N = 400
        calls = []            # callback arguments, in the order they ran
        freed = [0]           # payload objects released (weakref.finalize)
        handled_at = []       # len(calls) when the SIGINT handler ran
        started = threading.Event()
        def on_sigint(signum, frame):
            handled_at.append(len(calls))
            raise KeyboardInterrupt
        # Installed explicitly: a shell without job control starts background
        # jobs with SIGINT ignored, and Python then installs no handler.
        signal.signal(signal.SIGINT, on_sigint)
        class Payload:
            def __init__(self, i):
                self.i = i
        callers = []          # the frame below each callback: run, or <module>
        def cb(p):
            calls.append(p.i)
            callers.append(sys._getframe(1).f_code.co_name)
            if len(calls) == 50:
                started.set()
            time.sleep(0.002)   # a long drain: the SIGINT lands inside a callback
        def interrupt():
            started.wait(60)
            os.kill(os.getpid(), signal.SIGINT)
        objs = [Payload(i) for i in range(N)]
        for o in objs:
            weakref.finalize(o, lambda: freed.__setitem__(0, freed[0] + 1))
        del o
        def run():
            global objs
            # The drain runs from the pending call right after complete()
            # returns, or from drain_now(): either way it is entered here.
            m.complete(objs, cb, threads=4)
            objs = None
            m.drain_now()
        threading.Thread(target=interrupt).start()
        try:
            run()
            at = "none"
        except KeyboardInterrupt:
            at = callers.count("run")   # callbacks run before the interrupt left run()
        objs = None
        end = time.monotonic() + 60       # hang guard
        while freed[0] < N and time.monotonic() < end:
            time.sleep(0.001)             # pure Python: the re-armed pending call runs
        print(json.dumps({"at": at, "handled_at": handled_at, "calls": calls,
                          "freed": freed[0], "c": m.counters()}))
    """)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["at"] != "none", "no KeyboardInterrupt reached the interrupted code"
    assert len(out["handled_at"]) == 1, out["handled_at"]
    assert out["at"] - out["handled_at"][0] <= 1, (
        "at most one callback after the SIGINT handler ran before the KeyboardInterrupt"
    )
    assert out["at"] < 400, "the drain stopped early"
    assert out["freed"] == 400, "hang guard: every payload released"
    assert sorted(out["calls"]) == list(range(400)), "each callback ran exactly once"
    c = out["c"]
    assert c["deferred_interrupts"] == 1
    assert c["cleaned"] == c["handed_off"] and c["released_off_main"] == 0, c


def test_an_interrupt_in_the_exit_time_flush_is_never_a_system_error():
    """A callback raises KeyboardInterrupt or SystemExit(3) in CPython's
    exit-time flush (_Py_FinishPendingCalls, no Python frame), where a -1
    from a pending call would become "SystemError: bad argument to internal
    function" on 3.10-3.13; the host holds the interrupt and its exit
    sequence raises it in the atexit phase.  Each child releases all its
    payloads and shows its exception, never a SystemError.

    The flush is reached by construction, whatever the load: Py_FinalizeEx
    calls threading._shutdown and then, with no Python frame in between,
    flushes the pending calls, before the atexit handlers
    (Python/pylifecycle.c, Py_FinalizeEx and wait_for_thread_shutdown,
    v3.10.0 to v3.14.0).  The child replaces threading._shutdown by C
    callables only (functools.partial, collections.deque, map,
    operator.methodcaller): the original, then complete(..., join=True),
    whose native thread hands the items off (the host's pending call is
    added) before it returns.  No bytecode runs on the main thread after that
    add, so no eval breaker check can run the pending call earlier: its first
    run is the flush.  The callback checks that itself (no Python frame below
    it, before the atexit handlers)."""
    for kind in ("ki", "exit"):
        p = _child(f"""
            import atexit, collections, functools, operator, sys, threading
            import dc_threadpool as m
            N = 20
            state = {{"atexit": False, "n": 0}}
            # After the import: it runs before the host's exit sequence.
            atexit.register(lambda: state.__setitem__("atexit", True))
            def cb(i):
                state["n"] += 1
                if state["n"] == N:
                    print("ALL RELEASED", flush=True)
                if i == 0:
                    if sys._getframe().f_back is None and not state["atexit"]:
                        print("AT FLUSH", flush=True)
                    raise KeyboardInterrupt if {kind!r} == "ki" else SystemExit(3)
            # The last thing threading._shutdown does: N completions on a native thread.
            complete = functools.partial(m.complete, list(range(N)), cb, threads=1)
            steps = [threading._shutdown, complete]
            threading._shutdown = functools.partial(
                collections.deque, map(operator.methodcaller("__call__"), steps), 0
            )
        """)
        assert "SystemError" not in p.stderr, (kind, p.stderr)
        assert "AT FLUSH" in p.stdout, ("the construction missed the flush", kind, p.stdout)
        assert "ALL RELEASED" in p.stdout, (kind, p.stdout, p.stderr)
        if kind == "ki":
            assert "KeyboardInterrupt" in p.stderr, (p.returncode, p.stderr)
        else:
            assert p.returncode == 3 or "SystemExit: 3" in p.stderr, (p.returncode, p.stderr)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="os.fork() is unavailable here")
def test_fork_child_releases_its_completions_on_its_main_thread():
    p = _child("""
        import json, os, time
        import dc_threadpool as m
        m.complete([object() for _ in range(100)], None, threads=4)   # parent's own
        m.drain_now()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            seen = []
            m.complete(list(range(1000)), seen.append, threads=8)
            end = time.monotonic() + 60     # hang guard
            while len(seen) < 1000 and time.monotonic() < end:
                time.sleep(0.001)
            os.write(w, json.dumps({"n": len(seen), "c": m.counters()}).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"status": status, "child": json.loads(data)}))
    """)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["status"] == 0
    assert out["child"]["n"] == 1000
    assert out["child"]["c"]["released_off_main"] == 0

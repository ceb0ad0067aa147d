# SPDX-License-Identifier: Apache-2.0
"""Tests of the dc_pool example (pybind11, std::thread pool): what a user sees.

Run with the built module importable (PYTHONPATH), on every interpreter.
Each time bound is a generous hang guard, not a speed requirement.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import dc_pool
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
    before = dc_pool.counters()
    pool = dc_pool.Pool(8)
    objs = [object() for _ in range(100_000)]
    seen = []
    for o in objs:
        pool.submit(o, seen.append)
    assert _wait_for(lambda: len(seen) == len(objs)), f"hang guard: {len(seen)} released"
    pool.close()
    after = dc_pool.counters()
    assert sorted(map(id, seen)) == sorted(map(id, objs))  # each payload once
    assert after["released_on_main"] - before["released_on_main"] == len(objs)
    assert after["released_off_main"] == 0


def test_a_callback_that_raises_goes_to_unraisablehook_and_the_rest_still_run(monkeypatch):
    hooked = []
    monkeypatch.setattr(sys, "unraisablehook", hooked.append)
    seen = []

    def callback(i):
        seen.append(i)
        if i == 50:
            raise ValueError("callback 50")

    pool = dc_pool.Pool(4)
    for i in range(100):
        pool.submit(i, callback)
    assert _wait_for(lambda: len(seen) == 100), f"hang guard: {len(seen)} released"
    pool.close()
    assert sorted(seen) == list(range(100))
    assert [type(h.exc_value) for h in hooked] == [ValueError]


def test_a_completion_during_interpreter_exit_is_released_before_exit():
    p = _child("""
        import dc_pool
        n = [0]
        def cb(_):
            n[0] += 1
            if n[0] == 200:
                print("ALL RELEASED", flush=True)
        pool = dc_pool.Pool(2)
        # Completed from 100 ms on by the pool's threads; the script ends at once.
        for _ in range(200):
            pool.submit(object(), cb, delay_ms=1)
        pool.submit(object(), None, delay_ms=100)
    """)
    assert p.returncode == 0, p.stderr
    assert "ALL RELEASED" in p.stdout, p.stdout + p.stderr


def test_ctrl_c_during_a_long_drain_stops_it_at_once_and_every_cleanup_runs_once():
    """SIGINT during a drain of 400 slow callbacks: the KeyboardInterrupt
    arrives at once (at most the callback running when the SIGINT handler ran
    finishes first: a count), and the rest run later, each once, from the
    pending call re-armed for them while the script waits in pure Python.  A
    callback tells which drain it is in by the frame below it (run() until the
    interrupt leaves it)."""
    p = _child("""
        import json, os, signal, sys, threading, time
        import dc_pool
        seen, callers, handled_at = [], [], []
        started = threading.Event()
        def on_sigint(signum, frame):
            handled_at.append(len(seen))
            raise KeyboardInterrupt
        # Installed explicitly: a shell without job control starts background
        # jobs with SIGINT ignored, and Python then installs no handler.
        signal.signal(signal.SIGINT, on_sigint)
        def cb(i):
            seen.append(i)
            callers.append(sys._getframe(1).f_code.co_name)
            if len(seen) == 50:
                started.set()
            time.sleep(0.002)   # a long drain: SIGINT lands inside a callback
        def interrupt():
            started.wait(60)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=interrupt).start()
        pool = dc_pool.Pool(1)
        # The one worker waits 2 s first, so that the 400 completions come in
        # one burst, after the loop: one drain (a hang guard-like margin).
        pool.submit(None, None, delay_ms=2000)
        def run():
            for i in range(400):
                pool.submit(i, cb)
            pool.close()            # joins: every item handed off
            dc_pool.drain_now()     # or the pending call, right after close()
        try:
            run()
            at = "none"
        except KeyboardInterrupt:
            at = callers.count("run")
        end = time.monotonic() + 60   # hang guard
        while len(seen) < 400 and time.monotonic() < end:
            time.sleep(0.001)         # pure Python: the re-armed pending call runs
        print(json.dumps({"at": at, "handled_at": handled_at, "seen": sorted(seen),
                          "c": dc_pool.counters()}))
    """)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["at"] != "none", "no KeyboardInterrupt reached the interrupted code"
    assert len(out["handled_at"]) == 1, out["handled_at"]
    assert out["at"] - out["handled_at"][0] <= 1, "at most one callback after the handler ran"
    assert out["at"] < 400, "the drain stopped early"
    assert out["seen"] == list(range(400)), "each callback ran exactly once"
    assert out["c"]["deferred_interrupts"] == 1


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="os.fork() is unavailable here")
def test_fork_child_releases_its_completions_on_its_main_thread():
    p = _child("""
        import json, os, time
        import dc_pool
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            seen = []
            pool = dc_pool.Pool(8)
            for i in range(1000):
                pool.submit(i, seen.append)
            end = time.monotonic() + 60     # hang guard
            while len(seen) < 1000 and time.monotonic() < end:
                time.sleep(0.001)
            os.write(w, json.dumps({"n": len(seen), "c": dc_pool.counters()}).encode())
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

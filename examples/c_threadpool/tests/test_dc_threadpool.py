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


def test_ctrl_c_during_a_long_drain_arrives_after_it_and_every_cleanup_runs_once():
    p = _child("""
        import json, os, signal, threading, time
        # A shell without job control starts background jobs with SIGINT
        # ignored, and Python then installs no handler: put Python's back.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import dc_threadpool as m
        seen = []
        started = threading.Event()
        def cb(i):
            seen.append(i)
            if len(seen) == 50:
                started.set()
            time.sleep(0.002)   # a long drain: SIGINT lands inside a callback
        def interrupt():
            started.wait(60)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=interrupt).start()
        try:
            # The drain runs from the pending call right after complete()
            # returns, or from drain_now(): either way it is entered here.
            m.complete(list(range(400)), cb, threads=4)
            m.drain_now()
            at = "none"
        except KeyboardInterrupt:
            at = len(seen)
        print(json.dumps({"at": at, "seen": sorted(seen), "c": m.counters()}))
    """)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["at"] == 400, "KeyboardInterrupt arrives after the drain, not inside it"
    assert out["seen"] == list(range(400))
    assert out["c"]["deferred_interrupts"] == 1


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

# SPDX-License-Identifier: Apache-2.0
"""The smallest example: an object dropped by a native thread is released on
the main thread.  Time bounds are generous hang guards."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
import weakref

import dc_minimal

HANG_GUARD_S = 60.0


def test_objects_dropped_by_native_threads_are_released_on_the_main_thread():
    released_on = []

    class Payload:
        pass

    for _ in range(1000):
        p = Payload()
        weakref.finalize(p, lambda: released_on.append(threading.get_ident()))
        dc_minimal.release_later(p)
        del p
    end = time.monotonic() + HANG_GUARD_S
    while len(released_on) < 1000 and time.monotonic() < end:
        time.sleep(0.001)
    assert len(released_on) == 1000, f"hang guard: {len(released_on)} of 1000 released"
    assert set(released_on) == {threading.main_thread().ident}


def test_objects_handed_to_threads_on_the_last_line_are_all_released_at_exit(tmp_path):
    """The script's last line gives 2000 objects to native threads and ends at
    once: the exit sequence waits, draining, while threads still hold objects
    (the example's ``outstanding``), so every finalizer runs before the
    process exits, each once.  Three children: the rule holds in each."""
    out = tmp_path / "released"
    code = textwrap.dedent(f"""
        import os
        import dc_minimal
        fd = os.open({str(out)!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        class Payload:
            def __del__(self):
                os.write(fd, b"x")
        for _ in range(2000):
            dc_minimal.release_later(Payload())
    """)
    for run in range(3):
        out.write_bytes(b"")
        p = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S * 2,  # hang guard
        )
        assert p.returncode == 0, p.stderr
        assert p.stderr == "", p.stderr
        assert len(out.read_bytes()) == 2000, f"run {run}: {len(out.read_bytes())} of 2000 released"

# SPDX-License-Identifier: Apache-2.0
"""The smallest example: an object dropped by a native thread is released on
the main thread.  Time bounds are generous hang guards."""

from __future__ import annotations

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

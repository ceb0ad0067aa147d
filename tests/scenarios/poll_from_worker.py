# SPDX-License-Identifier: Apache-2.0
"""cuda-core's lifetime-test shape (NVIDIA/cuda-python #2403): a worker thread
polls whether a payload was released while the main thread waits for it.

``python poll_from_worker.py MODE [BOUND_S]`` prints one JSON line.  A graph
of the simulated driver gets one payload and is destroyed with its destructor
call held; a worker thread releases it (the callback then runs on a native
driver thread, which pushes the item and adds a pending call) and polls a flag
that the payload's finalizer sets, for at most BOUND_S seconds (default 5.0,
as in cuda-core's tests), while the main thread already waits for the worker
in one of these ways:

``join``     ``worker.join()``: one blocking wait, no bytecode on the main thread.
``event``    ``threading.Event().wait(BOUND_S + 1)`` set by the worker.
``sleep``    ``while worker.is_alive(): time.sleep(0.01)``.

Output keys: ``mode``, ``gil_enabled`` (bool or None), ``released`` (the
worker saw it within the bound), ``poll_s`` (seconds the worker polled),
``release_s`` (seconds from the driver's release to the finalizer, or None),
``release_thread`` (``"main"``, ``"worker"`` or ``"other"``).
"""

from __future__ import annotations

import json
import sys
import threading
import time

import deferred_cleanup as dc


def main(mode: str, bound_s: float) -> dict:
    """Run one case; see the module docstring.

    :param mode: ``"join"``, ``"event"`` or ``"sleep"`` (str).
    :param bound_s: the worker's polling bound, seconds (float).
    :returns: the result dict.
    :raises ValueError: unknown mode.
    """
    done = {}
    main_ident = threading.get_ident()

    def finalizer(_obj: object) -> None:
        done.setdefault("t", time.monotonic())
        done.setdefault("thread", threading.get_ident())

    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    g.attach(object(), finalizer)
    seen = {}
    finished = threading.Event()

    def worker() -> None:
        time.sleep(0.05)  # the main thread is in its wait by now
        seen["t_release"] = time.monotonic()
        driver.release(1)
        t0 = time.monotonic()
        while time.monotonic() - t0 < bound_s and "t" not in done:
            time.sleep(0.001)
        seen["released"] = "t" in done
        seen["poll_s"] = time.monotonic() - t0
        seen["ident"] = threading.get_ident()
        finished.set()

    driver.set_hold(True)
    g.destroy()
    w = threading.Thread(target=worker)
    w.start()
    if mode == "join":
        w.join()
    elif mode == "event":
        finished.wait(bound_s + 1)
        w.join()
    elif mode == "sleep":
        while w.is_alive():
            time.sleep(0.01)
    else:
        raise ValueError(mode)
    for _ in range(100):  # let the main thread run the pending call if it has not
        if "t" in done:
            break
        time.sleep(0.01)
    th = done.get("thread")
    return {
        "mode": mode,
        "gil_enabled": getattr(sys, "_is_gil_enabled", lambda: None)(),
        "released": seen["released"],
        "poll_s": round(seen["poll_s"], 4),
        "release_s": round(done["t"] - seen["t_release"], 4) if "t" in done else None,
        "release_thread": "main"
        if th == main_ident
        else "worker"
        if th == seen["ident"]
        else "other",
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 5.0)))

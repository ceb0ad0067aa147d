# SPDX-License-Identifier: Apache-2.0
"""queue.hpp: the process-wide intrusive MPSC queue.

Source: cuda-python PR #2371; docs/design/queue.rst.
"""

import os
import subprocess
import sys


def test_variant_is_fixed_at_import(dc):
    assert dc.variant() == (os.environ.get("DEFERRED_CLEANUP_VARIANT") or "reference")
    assert dc.counters()["variant"] == dc.variant()


def test_queue_starts_idle_and_accepting(dc):
    c = dc.counters()
    assert c["accepting"] is True
    assert c["host_alive"] is True
    assert c["in_flight"] == 0
    assert c["queue_empty"] is True


def test_cleanups_run_in_push_order(dc, recorder, wait):
    """take_all() reverses the Treiber stack: one producer's items come out FIFO."""
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    n = 500
    for i in range(n):
        g.attach(i, recorder)
    driver.set_hold(True)
    g.destroy()
    assert driver.held == n
    driver.release(1)  # one producer thread, in the graph's order
    assert driver.wait_idle(10.0)
    assert wait(lambda: len(recorder.order) == n)
    assert recorder.order == list(range(n))


def test_bad_variant_is_rejected_at_import():
    env = dict(os.environ, DEFERRED_CLEANUP_VARIANT="bogus")
    p = subprocess.run(
        [sys.executable, "-c", "import deferred_cleanup"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode != 0
    assert (
        "DEFERRED_CLEANUP_VARIANT must be one of 'reference', 'seed', 'cuda-core-1.2', "
        "'cuda-core-1.2-fixed'" in p.stderr
    )

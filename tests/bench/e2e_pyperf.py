# SPDX-License-Identifier: Apache-2.0
"""pyperf runner for the end-to-end measurements of ``e2e.py``.

Run by ``make bench`` (tools/bench.py) once per interpreter and variant::

    DEFERRED_CLEANUP_VARIANT=seed python tests/bench/e2e_pyperf.py \
        --inherit-environ DEFERRED_CLEANUP_VARIANT -o out.json [pyperf options] [--payloads N]

Benchmarks (one value = one burst, or one batch of N cleanups):

* ``burst_pending``: seconds from releasing N payloads from 8 driver threads to
  the last cleanup on the main thread, the main thread waiting in sleeps (the
  payloads arrive through pending calls);
* ``burst_entry``: the same burst, the main thread calling the entry point
  ``deferred_cleanup.poll()`` back to back (direct drains); left out when a
  trial burst of 1000 starves (no payload released in ``e2e.STARVE_S``);
* ``consume_queue``: main-thread CPU seconds releasing N payloads through the
  queue; ``consume_direct``: the same cleanups run directly.
"""

from __future__ import annotations

import os
import sys

import pyperf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402


def _timed(fn):
    def run(loops: int) -> float:
        return sum(fn() for _ in range(loops))

    return run


def main() -> None:
    runner = pyperf.Runner()
    runner.argparser.add_argument("--payloads", type=int, default=100_000)
    args = runner.parse_args()
    n = args.payloads
    variant = os.environ.get("DEFERRED_CLEANUP_VARIANT", "reference")
    runner.metadata["dc_variant"] = variant
    runner.metadata["dc_payloads"] = str(n)
    runner.bench_time_func("burst_pending", _timed(lambda: e2e.burst(n, "pending")["seconds"]))
    # Without a direct drain, a main thread spinning on entry points may never
    # run the pending call (gh-95820, 3.10-3.12): try once, time it only if a
    # burst completes.  Every pyperf process decides the same way.
    if not e2e.burst(1000, "entry", starve_s=e2e.STARVE_S)["starved"]:
        runner.bench_time_func("burst_entry", _timed(lambda: e2e.burst(n, "entry")["seconds"]))
    runner.bench_time_func("consume_queue", _timed(lambda: e2e.consume_queue(n)))
    runner.bench_time_func("consume_direct", _timed(lambda: e2e.consume_direct(n)))


if __name__ == "__main__":
    main()

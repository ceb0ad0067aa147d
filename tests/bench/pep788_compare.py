# SPDX-License-Identifier: Apache-2.0
"""The host's Py_AddPendingCall with and without a PEP 788 guard, end to end.

Run once per build of the extension (``DC_PEP788_GUARD`` OFF, then ON; see
docs/pep788.rst) on CPython 3.15+::

    python tests/bench/pep788_compare.py [--slow N] [--payloads N]   # JSON on stdout

It reports, from the real package: the guard mode (``guard_counters()``), the
slow path (a burst of ``e2e.THREADS`` payloads into an idle queue, which makes
exactly one pending call: release-to-last-cleanup seconds, median and 90th
percentile of ``--slow`` bursts), a big burst (payloads, pending calls,
seconds) and the guards taken per host call (the guard's allocations: one
``PyMem_RawMalloc`` per guard, Python/pystate.c v3.15.0rc1).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import e2e  # noqa: E402

import deferred_cleanup as dc  # noqa: E402
from deferred_cleanup import _native  # noqa: E402


def main(argv: list[str]) -> int:
    """Measure and print one JSON line.

    :param argv: command-line arguments (list[str]).
    :returns: 0.  Raises TimeoutError when a burst does not release every payload.
    """
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--slow", type=int, default=300, help="slow-path bursts (int)")
    ap.add_argument("--payloads", type=int, default=200_000, help="payloads of the big burst (int)")
    a = ap.parse_args(argv)
    g0 = _native.guard_counters()
    c0 = dc.counters()
    slow = [e2e.burst(e2e.THREADS, "pending") for _ in range(a.slow)]
    secs = sorted(r["seconds"] for r in slow)
    big = e2e.burst(a.payloads, "pending")
    g1 = _native.guard_counters()
    c1 = dc.counters()
    attempts = c1["schedule_attempts"] - c0["schedule_attempts"]
    taken = g1["taken"] - g0["taken"]
    print(
        json.dumps(
            {
                "python": sys.version.split()[0],
                "variant": dc.variant(),
                "guard": g1["mode"],
                "slow_bursts": a.slow,
                "slow_pending_calls": sum(r["pending_calls"] for r in slow),
                "slow_median_us": statistics.median(secs) * 1e6,
                "slow_p90_us": secs[int(0.9 * (len(secs) - 1))] * 1e6,
                "big_payloads": big["payloads"],
                "big_pending_calls": big["pending_calls"],
                "big_seconds": big["seconds"],
                "host_calls": attempts,
                "guards_taken": taken,
                "guards_refused": g1["refused"] - g0["refused"],
                "guard_allocs_per_host_call": (taken / attempts) if attempts else None,
                "cleaned": c1["cleaned"] - c0["cleaned"],
                "cleanups_off_main": c1.get("cleanups_off_main", 0),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

# SPDX-License-Identifier: Apache-2.0
"""Short sanitizer runs of the C++ suite (tests/cpp) in ``make test``.

``make sanitize`` runs .ci/tsan.sh and .ci/asan.sh at full size (8 producers
x 10^6 items each).  Here the same scripts run with a small stress size, the
suite bounded by DC_SANITIZE_TIMEOUT; each script then proves its setup can
fail: its canary (a data race, a use after free) must be reported.  The
builds are incremental in build/tsan and build/asan.

Runs once (marker ``sanitize``), in the cp312-pyenv environment (the scripts
use the host's g++, cmake and GoogleTest; apt installs them when missing).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LOAD, hang_guard

pytestmark = pytest.mark.sanitize

REPO = Path(__file__).resolve().parent.parent
# Every wall-clock bound here is an idle machine's times conftest.LOAD, the
# load measured when the tests are collected (4.5 at load 8 on 2 cores): the
# hang guards through conftest.hang_guard, the handshake test's time budget
# (how long it keeps racing, not a bound that fails it) directly.
# The suite's wall-clock bound inside the script (timeout(1)): a hang guard,
# not a speed check.  About 25 s on an idle 2-core machine; with that machine
# loaded to about 6 the stress tests took 13-15 s each under TSan and the
# suite passed 50 s while still progressing.
SUITE_BOUND_S = hang_guard(300)
SHORT = {
    # Per producer, 8 producers (50000 left the ring never full once in ~10 runs).
    "DC_STRESS_ITEMS": "100000",
    # The tests' own time budgets (their counts stay): the stress tests' consumer
    # deadline is a hang guard, the handshake seconds how long it keeps racing.
    "DC_STRESS_DEADLINE_S": str(hang_guard(20)),
    "DC_HANDSHAKE_ROUNDS": "1000",
    "DC_HANDSHAKE_SECONDS": str(round(5 * LOAD)),
    "DC_SANITIZE_TIMEOUT": str(SUITE_BOUND_S),
}


# A hang guard: a first build of the sanitized suite (about a minute per
# script idle), the suite and the canaries.
@pytest.mark.timeout(hang_guard(900))
@pytest.mark.parametrize("script, done", [(".ci/tsan.sh", "tsan: ok"), (".ci/asan.sh", "asan: ok")])
def test_short_sanitizer_run_passes_and_its_canary_is_reported(script, done):
    p = subprocess.run(
        ["bash", script],
        cwd=REPO,
        env=dict(os.environ, **SHORT),
        capture_output=True,
        text=True,
        timeout=hang_guard(880),
    )
    out = p.stdout + p.stderr
    sys.stdout.write(out[-6000:])
    assert p.returncode == 0, out[-6000:]
    assert done in p.stdout
    assert (
        "must be reported" in p.stdout and "reported as expected" in p.stdout
    )  # the canary ran and was caught
    m = re.search(r"core_tests: passed in (\d+) s", p.stdout)
    assert m and int(m.group(1)) <= SUITE_BOUND_S, out[-3000:]
    assert "FAILED" not in p.stdout

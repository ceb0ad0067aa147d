# SPDX-License-Identifier: Apache-2.0
"""Every public function answers a wrong type with TypeError naming the
parameter and the type it accepts, and a value out of range with ValueError
naming the range; the library's own exceptions keep their classes.  Each row
calls the real function."""

import math

import pytest


class OnlyIndex:
    """An object with only __index__: not an int, so every int parameter
    refuses it (TypeError), as the docstrings say."""

    def __index__(self):
        return 1


BAD_TYPES = ["5", b"5", [], None, object(), OnlyIndex()]


# (id, call(dc, value), accepted-type words in the TypeError, values out of range,
#  range words in the ValueError, a good value, what None means)
def _sim(dc):
    return dc.SimulatedDriver()


ROWS = {
    "configure.exit_wait_s": (
        lambda dc, v: dc.configure(exit_wait_s=v),
        r"exit_wait_s.*int or float",
        [2**1024, -1, math.inf, math.nan, 10**10],
        r"from 0 to 31536000",
        5.0,
    ),
    "configure.stale_claim_s": (
        lambda dc, v: dc.configure(stale_claim_s=v),
        r"stale_claim_s.*int or float",
        [2**1024, -1, math.inf, 0, 1e-300, 9e-10],  # below 1 ns: refused
        r"(from 0 to 31536000|at least 1e-09 seconds)",
        1.0,
    ),
    "configure.backstop_wait_s": (
        lambda dc, v: dc.configure(backstop_wait_s=v),
        r"backstop_wait_s.*int or float",
        [2**1024, -1, math.inf, math.nan, 10**10],
        r"from 0 to 31536000",
        5.0,
    ),
    "SimulatedDriver.wait_idle.timeout_s": (
        lambda dc, v: _sim(dc).wait_idle(v),
        r"timeout_s.*int or float",
        [2**1024, -0.5, math.nan, 1e10],
        r"from 0 to 31536000",
        0.0,
    ),
    "SimulatedDriver.release.threads": (
        lambda dc, v: _sim(dc).release(v),
        r"threads.*int",
        [0, -1, 1025, 2**64, 2**1024],
        r"from 1 to 1024",
        1,
    ),
    "SimulatedDriver.set_hold.hold": (
        lambda dc, v: _sim(dc).set_hold(v),
        r"hold.*bool",
        [],
        "",
        True,
    ),
    "SimulatedDriver.set_synchronous.on": (
        lambda dc, v: _sim(dc).set_synchronous(v),
        r"on.*bool",
        [],
        "",
        False,
    ),
    "SimulatedDriver.set_paused.on": (
        lambda dc, v: _sim(dc).set_paused(v),
        r"on.*bool",
        [],
        "",
        False,
    ),
    "SimulatedDriver.fail_next_creates.n": (
        lambda dc, v: _sim(dc).fail_next_creates(v),
        r"\(n\).*int",
        [-1, 2**31, 2**1024],
        r"from 0 to 2147483647",
        0,
    ),
    "SimulatedDriver.fail_next_retains.n": (
        lambda dc, v: _sim(dc).fail_next_retains(v),
        r"\(n\).*int",
        [-1, 2**31, 2**1024],
        r"from 0 to 2147483647",
        0,
    ),
    "reference_burst.callbacks": (
        lambda dc, v: dc.reference_burst(callbacks=v, threads=1),
        r"callbacks.*int",
        [0, -5, 10**7 + 1, 10**400],
        r"(>= 1|from 1 to 10000000)",
        1,
    ),
    "reference_burst.threads": (
        lambda dc, v: dc.reference_burst(callbacks=2000, threads=v),
        r"threads.*int",
        [0, 1025, 2**1024],
        r"(>= 1|from 1 to 1024)",
        1,
    ),
    "reference_burst.timeout_s": (
        lambda dc, v: dc.reference_burst(callbacks=1, threads=1, timeout_s=v),
        r"timeout_s.*int or float",
        [-1, math.nan, 2**1024],
        r"from 0 to 31536000",
        30.0,
    ),
}

NONE_OK = {
    "configure.exit_wait_s",
    "configure.stale_claim_s",
    "configure.backstop_wait_s",
}  # None keeps the current value


def _extra_bad(row):
    """Wrong types beyond BAD_TYPES: bool is refused where a number is meant,
    a float where an int is, an int where a bool is."""
    if row.endswith((".hold", ".on")):  # the bool parameters: an int is not one
        return [1]
    if row.endswith("_s"):
        return [True]
    return [True, 1.5]


def _type_cases():
    for row in ROWS:
        for v in BAD_TYPES + _extra_bad(row):
            if v is None and row in NONE_OK:
                continue
            yield pytest.param(row, v, id=f"{row}-{type(v).__name__}")


@pytest.mark.parametrize("row,value", list(_type_cases()))
def test_a_wrong_type_is_a_type_error_naming_the_parameter(dc, row, value):
    call, words, _, _, _ = ROWS[row]
    before = dc.settings()
    with pytest.raises(TypeError, match=words):
        call(dc, value)
    assert dc.settings() == before, "a refused argument changes nothing"


def _value_cases():
    for row, (_, _, bad, _, _) in ROWS.items():
        for v in bad:
            yield pytest.param(row, v, id=f"{row}-{v!r:.12}")


@pytest.mark.parametrize("row,value", list(_value_cases()))
def test_a_value_out_of_range_is_a_value_error_naming_the_range(dc, row, value):
    call, _, _, words, _ = ROWS[row]
    before = dc.settings()
    with pytest.raises(ValueError, match=words):
        call(dc, value)
    assert dc.settings() == before, "a refused argument changes nothing"


@pytest.mark.parametrize("row", sorted(ROWS))
def test_a_good_value_is_accepted(dc, row):
    call, _, _, _, good = ROWS[row]
    before = dc.settings()
    try:
        call(dc, good)
    finally:
        dc.configure(**before)


# (id, call(dc, value), the documented bounds: each must be accepted).  A bound
# refused by an off-by-one is a promise broken as surely as a bad value accepted.
BOUNDS = {
    "configure.exit_wait_s": (lambda dc, v: dc.configure(exit_wait_s=v), [0, 31536000]),
    "configure.stale_claim_s": (lambda dc, v: dc.configure(stale_claim_s=v), [1e-9, 31536000]),
    "SimulatedDriver.wait_idle.timeout_s": (lambda dc, v: _sim(dc).wait_idle(v), [0, 31536000]),
    "SimulatedDriver.release.threads": (lambda dc, v: _sim(dc).release(v), [1, 1024]),
    "SimulatedDriver.fail_next_creates.n": (
        lambda dc, v: _sim(dc).fail_next_creates(v),
        [0, 2**31 - 1],
    ),
    "SimulatedDriver.fail_next_retains.n": (
        lambda dc, v: _sim(dc).fail_next_retains(v),
        [0, 2**31 - 1],
    ),
    "reference_burst.threads": (
        lambda dc, v: dc.reference_burst(callbacks=1024, threads=v),
        [1, 1024],
    ),
}


@pytest.mark.parametrize(
    "row,value", [pytest.param(r, v, id=f"{r}-{v}") for r, (_, vs) in BOUNDS.items() for v in vs]
)
def test_a_value_at_a_documented_bound_is_accepted(dc, row, value):
    call, _ = BOUNDS[row]
    before = dc.settings()
    try:
        call(dc, value)  # raises (and fails the test) if the bound is refused
    finally:
        dc.configure(**before)


def test_reference_burst_callbacks_bound_is_checked_before_any_work(dc):
    """callbacks=10**400 used to pass validation and then never return: it is
    refused at once, naming the range, with nothing attached or released."""
    before = dc.counters()
    with pytest.raises(ValueError, match=r"callbacks must be from 1 to 10000000"):
        dc.reference_burst(callbacks=10**400, threads=1)
    assert dc.MAX_BURST_CALLBACKS == 10**7
    after = dc.counters()
    assert after["user_objects"] == before["user_objects"], "nothing attached before the refusal"


def test_reference_burst_off_the_main_thread_names_itself_and_does_nothing(dc):
    import threading

    before, got = dc.counters(), []

    def worker():
        try:
            dc.reference_burst(callbacks=10, threads=1)
        except BaseException as e:  # noqa: BLE001  (the test reports any exception)
            got.append(e)

    t = threading.Thread(target=worker)
    t.start()
    t.join(timeout=60)  # hang guard: a refusal returns at once
    assert not t.is_alive()
    assert len(got) == 1 and type(got[0]) is dc.NotMainThreadError, got
    assert "reference_burst() may only be called on the main thread" in str(got[0])
    assert dc.counters()["user_objects"] == before["user_objects"], "nothing attached"


def test_configure_reports_what_it_was_given(dc):
    before = dc.settings()
    try:
        dc.configure(exit_wait_s=3, stale_claim_s=0.25, backstop_wait_s=0.5)
        assert dc.settings() == {"exit_wait_s": 3.0, "stale_claim_s": 0.25, "backstop_wait_s": 0.5}
    finally:
        dc.configure(**before)


def test_configure_keeps_every_millisecond_value_exactly(dc):
    """A bound given in whole milliseconds comes back from settings() equal,
    for each of the three bounds and every millisecond up to 100 s.  Kept as
    the nearest whole nanosecond: truncating seconds * 1e9 would keep 2.026 s
    as 2025999999 ns (2.026 * 1e9 is just below 2026000000 in a double), and
    2183 of these 100000 values would come back 1 ns short."""
    before = dc.settings()
    wrong = {}
    try:
        for key in ("exit_wait_s", "stale_claim_s", "backstop_wait_s"):
            for ms in range(1, 100_001):
                given = ms / 1000
                dc.configure(**{key: given})
                got = dc.settings()[key]
                if got != given:
                    wrong.setdefault(key, []).append((given, got))
    finally:
        dc.configure(**before)
    assert not wrong, {k: (len(v), v[:3]) for k, v in wrong.items()}


def test_attach_finalizer_must_be_callable(dc):
    g = dc.SimulatedDriver().create_graph()
    with pytest.raises(TypeError, match="finalizer must be callable or None"):
        g.attach(1, "print")
    assert g.attached == 0


def test_library_errors_keep_their_classes(dc):
    """Type and value mistakes are not RuntimeError; the library's own errors are."""
    assert not issubclass(TypeError, RuntimeError) and not issubclass(ValueError, RuntimeError)
    g = dc.SimulatedDriver().create_graph()
    g.destroy()
    with pytest.raises(dc.GraphDestroyedError):
        g.destroy()
    with pytest.raises(dc.GraphDestroyedError):
        g.attach(1, 5)  # the graph check comes first: still its own class
    for cls in (dc.DriverError, dc.ShutdownError, dc.NotMainThreadError, dc.GraphDestroyedError):
        assert issubclass(cls, RuntimeError)


def test_cuda_driver_spin_us_types(dc):
    """CudaDriver(spin_us): checked before the driver is opened, so this runs without a GPU."""
    with pytest.raises(TypeError, match=r"spin_us.*int"):
        dc.CudaDriver(spin_us="5")
    with pytest.raises(TypeError, match=r"spin_us.*int"):
        dc.CudaDriver(spin_us=1.5)
    for bad in (-1, 10**7 + 1, 2**1024):
        with pytest.raises(ValueError, match=r"spin_us.*from 0 to 10000000"):
            dc.CudaDriver(spin_us=bad)

"""C11 litmus tests of the two store-buffering handshakes (herd7).

The queue's correctness rests on two store-buffering pairs (issue 3,
Part 2a and 2b):

* wakeup: a producer pushes onto ``head_`` then claims ``scheduled_``; the
  pending call clears ``scheduled_`` then takes ``head_``;
* gate: a producer increments ``in_flight_`` then reads ``accepting_``; the
  atexit hook clears ``accepting_`` then reads ``in_flight_``.

``tests/litmus/`` holds each in two versions.  herd7 (Debian's herdtools7, with
its C11 models) must report the bad outcome *allowed* for acquire/release and
*forbidden* for the orders the reference uses.  A third group of tests reads the
headers: each atomic operation of the two handshakes carries a tag
``[litmus:NAME]`` on its line, whose first ``std::memory_order_*`` token is the
reference's order and the second the seed variant's.  The litmus files carry the
same tags, so the files cannot drift from the code.

A third handshake is message passing, not store buffering: leaving the gate
(``gate_leave``, a release decrement) against the shutdown wait that reads
zero (``gate.wait``): the host call made inside the gate must happen-before
teardown.  ``gate_exit_mp_reference.litmus`` (forbidden) and its relaxed
negative control ``gate_exit_mp_relaxed.litmus`` (allowed) carry tags
``[litmus-mp:...]``, checked against ``gate_leave()``'s and ``in_flight()``'s
header lines.

Runs once, in the Debian unstable root (marker ``tools``), where herd7 lives.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.tools

REPO = Path(__file__).resolve().parent.parent
LITMUS = REPO / "tests" / "litmus"
HEADERS = REPO / "reference" / "include" / "deferred_cleanup"

# Both C11 models shipped with herdtools7: RC11 (Lahav et al., PLDI 2017) and
# the partial-SC model of Batty, Donaldson, Wickerson (POPL 2016).
MODELS = ["rc11.cat", "c11_partialSC.cat"]

HANDSHAKES = {
    "wakeup": ["wakeup.push", "wakeup.check", "wakeup.clear", "wakeup.take"],
    "gate": ["gate.enter", "gate.check", "gate.close", "gate.wait"],
}
ALL_TAGS = [t for tags in HANDSHAKES.values() for t in tags]

TAG_RE = re.compile(r"\[litmus:([\w.]+)\]")
MP_TAG_RE = re.compile(r"\[litmus-mp:([\w.]+)\]")
CPP_ORDER_RE = re.compile(r"std::memory_order_(\w+)")
C_ORDER_RE = re.compile(r"\bmemory_order_(\w+)")

# Strength of a memory order for one access, as a partial order: relaxed is
# weakest, seq_cst strongest; acquire and release are incomparable, acq_rel
# covers both.
_STRONGER_OR_EQUAL = {
    "relaxed": {"relaxed", "acquire", "release", "acq_rel", "seq_cst"},
    "acquire": {"acquire", "acq_rel", "seq_cst"},
    "release": {"release", "acq_rel", "seq_cst"},
    "acq_rel": {"acq_rel", "seq_cst"},
    "seq_cst": {"seq_cst"},
}

# Kind of atomic access named on a header line -> herd C primitive that models
# it.  A successful compare-exchange is a read-modify-write, like an exchange.
_CPP_KIND = [
    (re.compile(r"\.compare_exchange_(weak|strong)\("), "rmw"),
    (re.compile(r"\.exchange\("), "rmw"),
    (re.compile(r"\.fetch_(add|sub|or|and)\("), "rmw"),
    (re.compile(r"\.store\("), "store"),
    (re.compile(r"\.load\("), "load"),
]
_C_KIND = [
    (re.compile(r"atomic_(exchange|fetch_\w+|compare_exchange_\w+)_explicit\("), "rmw"),
    (re.compile(r"atomic_store_explicit\("), "store"),
    (re.compile(r"atomic_load_explicit\("), "load"),
]


def _kind(line: str, table) -> str | None:
    for rx, kind in table:
        if rx.search(line):
            return kind
    return None


def header_tags() -> dict[str, dict]:
    """Tagged atomic operations in the reference headers.

    Returns:
        dict mapping tag name (str) to {"reference": str, "seed": str | None,
        "kind": str, "where": str}; orders without the ``memory_order_`` prefix.
    Raises:
        AssertionError: if a tag appears twice or its line names no order.
    """
    found: dict[str, dict] = {}
    for hpp in sorted(HEADERS.glob("*.hpp")):
        for no, line in enumerate(hpp.read_text().splitlines(), 1):
            if line.lstrip().startswith(("//", "*", "/*")):
                continue  # prose about the tags, not a tagged operation
            for tag in TAG_RE.findall(line):
                where = f"{hpp.name}:{no}"
                assert tag not in found, f"tag {tag} twice: {found[tag]['where']} and {where}"
                orders = CPP_ORDER_RE.findall(line)
                assert orders, f"{where}: tagged line names no std::memory_order_*"
                found[tag] = {
                    "reference": orders[0],
                    "seed": orders[1] if len(orders) > 1 else None,
                    "kind": _kind(line, _CPP_KIND),
                    "where": where,
                }
    return found


def litmus_tags(path: Path, tag_re: re.Pattern = TAG_RE) -> dict[str, dict]:
    """Tagged events of one litmus file.

    Args:
        path: the .litmus file.
        tag_re: the tag pattern (TAG_RE or MP_TAG_RE).
    Returns:
        dict mapping tag name (str) to {"order": str, "kind": str}.
    Raises:
        AssertionError: if a tagged line has not exactly one memory order.
    """
    found: dict[str, dict] = {}
    for no, line in enumerate(path.read_text().splitlines(), 1):
        code = line.split("//", 1)[0]
        for tag in tag_re.findall(line.split("//", 1)[1] if "//" in line else ""):
            orders = C_ORDER_RE.findall(code)
            assert len(orders) == 1, f"{path.name}:{no}: expected one memory order, got {orders}"
            found[tag] = {"order": orders[0], "kind": _kind(code, _C_KIND)}
    return found


def herd7(path: Path, model: str) -> dict:
    """Run herd7 on one litmus file.

    Args:
        path: the .litmus file.
        model: a cat model file name from herdtools7's library (str).
    Returns:
        {"observation": "Always"|"Sometimes"|"Never", "positive": int,
        "negative": int, "states": int, "output": str}.
    Raises:
        AssertionError: if herd7 fails or its output has no Observation line.
        subprocess.TimeoutExpired: after 60 s.
    """
    p = subprocess.run(["herd7", "-model", model, str(path)], capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"herd7 -model {model} {path.name} exited {p.returncode}:\n{out}"
    m = re.search(r"^Observation \S+ (Always|Sometimes|Never) (\d+) (\d+)", out, re.M)
    assert m, f"no Observation line from herd7:\n{out}"
    states = re.search(r"^States (\d+)", out, re.M)
    assert states, f"no States line from herd7:\n{out}"
    return {"observation": m.group(1), "positive": int(m.group(2)), "negative": int(m.group(3)),
            "states": int(states.group(1)), "output": out}


needs_herd7 = pytest.mark.skipif(shutil.which("herd7") is None,
                                 reason="herd7 not installed (it is in the Debian unstable root: marker 'tools', env cp314-sid)")


@needs_herd7
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("handshake", sorted(HANDSHAKES))
def test_acquire_release_allows_the_bad_outcome(handshake, model):
    """acquire/release: herd7 must find an execution with the bad outcome."""
    r = herd7(LITMUS / f"{handshake}_sb_acqrel.litmus", model)
    assert r["observation"] == "Sometimes" and r["positive"] >= 1, r["output"]
    # The good outcomes are there too: the test is not vacuous.
    assert r["states"] == 4, r["output"]


@needs_herd7
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("handshake", sorted(HANDSHAKES))
def test_reference_orders_forbid_the_bad_outcome(handshake, model):
    """The reference's orders: herd7 must find no execution with the bad outcome."""
    r = herd7(LITMUS / f"{handshake}_sb_reference.litmus", model)
    assert r["observation"] == "Never" and r["positive"] == 0, r["output"]
    # The three other outcomes of the two reads remain reachable.
    assert r["states"] == 3 and r["negative"] == 3, r["output"]


@pytest.mark.parametrize("handshake", sorted(HANDSHAKES))
def test_litmus_files_carry_every_tag(handshake):
    for version in ("acqrel", "reference"):
        tags = litmus_tags(LITMUS / f"{handshake}_sb_{version}.litmus")
        assert sorted(tags) == sorted(HANDSHAKES[handshake]), f"{handshake}_sb_{version}.litmus"


def test_headers_carry_every_tag_once():
    tags = header_tags()
    missing = [t for t in ALL_TAGS if t not in tags]
    assert not missing, f"no header line carries {missing}"
    extra = [t for t in tags if t not in ALL_TAGS]
    assert not extra, f"header tags with no litmus event: {extra}"


@pytest.mark.parametrize("tag", ALL_TAGS)
def test_reference_litmus_uses_the_headers_orders(tag):
    """The *_reference.litmus event has the header's reference order and kind."""
    h = header_tags()[tag]
    lit = litmus_tags(LITMUS / f"{tag.split('.')[0]}_sb_reference.litmus")[tag]
    assert lit["order"] == h["reference"], f"{tag}: litmus {lit['order']} vs header {h['reference']} ({h['where']})"
    assert lit["kind"] == h["kind"], f"{tag}: litmus models a {lit['kind']}, header does a {h['kind']} ({h['where']})"


@pytest.mark.parametrize("tag", ALL_TAGS)
def test_acqrel_litmus_is_at_least_the_seed(tag):
    """The *_acqrel.litmus event is acquire/release-only and at least as strong
    as the seed variant's order, so an outcome it allows the seed allows too."""
    h = header_tags()[tag]
    lit = litmus_tags(LITMUS / f"{tag.split('.')[0]}_sb_acqrel.litmus")[tag]
    assert lit["order"] in {"acquire", "release", "acq_rel"}, f"{tag}: {lit['order']} is not acquire/release"
    assert lit["kind"] == h["kind"], f"{tag}: litmus models a {lit['kind']}, header does a {h['kind']} ({h['where']})"
    assert h["seed"] is not None, f"{tag}: header line {h['where']} gives no seed order"
    assert lit["order"] in _STRONGER_OR_EQUAL[h["seed"]], (
        f"{tag}: litmus {lit['order']} is weaker than the seed's {h['seed']} ({h['where']})")


def test_order_parser_can_fail(tmp_path):
    """The drift check itself: a header order that differs is noticed."""
    hdr = "x.store(false, order(std::memory_order_release, std::memory_order_release));  // [litmus:gate.close]"
    orders = CPP_ORDER_RE.findall(hdr)
    lit = litmus_tags(LITMUS / "gate_sb_reference.litmus")["gate.close"]
    assert orders[0] != lit["order"]
    assert _kind(hdr, _CPP_KIND) == "store"


@needs_herd7
@pytest.mark.parametrize("model", MODELS)
def test_gate_exit_message_passing(model):
    """Release decrement read by the wait: the host call happens-before
    teardown; with relaxed orders it would not."""
    ref = herd7(LITMUS / "gate_exit_mp_reference.litmus", model)
    assert ref["observation"] == "Never" and ref["positive"] == 0 and ref["states"] == 3, ref["output"]
    neg = herd7(LITMUS / "gate_exit_mp_relaxed.litmus", model)
    assert neg["observation"] == "Sometimes" and neg["positive"] >= 1 and neg["states"] == 4, neg["output"]


def test_gate_exit_litmus_uses_the_headers_orders():
    lit = litmus_tags(LITMUS / "gate_exit_mp_reference.litmus", MP_TAG_RE)
    assert sorted(lit) == ["gate.leave", "gate.wait"]
    leave = [line for line in (HEADERS / "queue.hpp").read_text().splitlines() if "in_flight_.fetch_sub(" in line]
    assert len(leave) == 1, leave
    assert CPP_ORDER_RE.findall(leave[0])[0] == lit["gate.leave"]["order"], leave[0]
    assert _kind(leave[0], _CPP_KIND) == lit["gate.leave"]["kind"] == "rmw"
    wait = header_tags()["gate.wait"]
    assert wait["reference"] == lit["gate.wait"]["order"]
    # The seed's wait also synchronizes with the release decrement.
    assert wait["seed"] in _STRONGER_OR_EQUAL["acquire"], wait
    relaxed = litmus_tags(LITMUS / "gate_exit_mp_relaxed.litmus", MP_TAG_RE)
    assert {v["order"] for v in relaxed.values()} == {"relaxed"}

# SPDX-License-Identifier: Apache-2.0
"""C11 litmus tests of the store-buffering handshakes, and their drift check (herd7).

The queue's correctness rests on store-buffering pairs (queue.hpp explains
them), each in ``tests/litmus/`` with the orders of the policy it models:

* the reference's wakeup, twice: the producer's fast path (push, then one
  load of ``scheduled_``) and its slow path (push, then the claim exchange),
  each against the drain's clear-then-take; both forbidden;
* the comparison variants' drain shape (take until empty, clear, re-check
  ``head_``) against their producer (push, ``head_`` load, claim CAS): the
  lost wakeup, allowed, as it is on x86-64 hardware;
* the reference's in-flight gate against the shutdown's close-then-wait
  (forbidden), and the comparison variants' check-then-call window, which has
  no second half and is allowed whatever the orders;
* leaving the gate, a message-passing shape (``litmus-mp``): the release
  decrement read by the shutdown wait (forbidden).

Every file names the policy it models on a header line ``policy: NAME...``
(``policy: none`` for the negative controls, which weaken a reference file to
acquire/release or relaxed and must be allowed).  The drift check reads the
three policy structs of ``policy.hpp``: the order constant under each
``[litmus:NAME]`` tag must be the order of the event with that tag in every
file naming the policy, the event's location and kind (load, store,
read-modify-write) must be those of a header operation that uses the
constant, and every tag of every policy must appear in some file naming it.
``gate.leave`` is checked against the line after the comment
``litmus-mp: gate.leave`` in queue.hpp.  Mutating any order constant on a
scratch copy of the headers must make the check fail.

Both C11 models shipped with herdtools7 run every file.  Runs once, in the
Debian unstable root (marker ``tools``), where herd7 lives.
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
HEADERS = REPO / "include" / "deferred_cleanup"

# Both C11 models shipped with herdtools7: RC11 (Lahav et al., PLDI 2017) and
# the partial-SC model of Batty, Donaldson, Wickerson (POPL 2016).
MODELS = ["rc11.cat", "c11_partialSC.cat"]

POLICIES = ("ReferencePolicy", "SeedPolicy", "CudaCore12Policy", "CudaCore12FixedPolicy")
COMPARISON = ("SeedPolicy", "CudaCore12Policy")
# cuda-core 1.2.0's orders plus one seq_cst fence on each side of the drain
# tail's store-buffering pair (notes/upstream/cuda-core-store-buffering.md).
FIXED = "CudaCore12FixedPolicy"
FENCE_RE = re.compile(r"atomic_thread_fence\(memory_order_seq_cst\); // fixed\.fence")

# Every litmus file: the policies it models (empty: a control tied to no
# policy), herd7's expected observation, and the number of distinct final
# states of the condition's registers that herd7 must list (all
# combinations for an allowed 2-register outcome; all but the bad one when
# it is forbidden), so that a file whose threads lost their interleavings
# fails.
FILES = {
    "wakeup_fast_sb_reference": (("ReferencePolicy",), "Never", 3),
    "wakeup_fast_sb_acqrel": ((), "Sometimes", 4),
    "wakeup_slow_sb_reference": (("ReferencePolicy",), "Never", 3),
    "wakeup_slow_sb_acqrel": ((), "Sometimes", 4),
    # r1..r4: r1 = 0 only when the take got the item first (r3 = 1, r4 = 0),
    # and r3 = 1 leaves r4 = 0; r2 is free: 2 + 2 + 4 combinations.
    "wakeup_recheck_sb_comparison": (COMPARISON, "Sometimes", 8),
    # The same shape with both fences: all 8 combinations but the bad one.
    "wakeup_recheck_sb_fixed": ((FIXED,), "Never", 7),
    # The reference's gate, also the minimal finalization fix of cuda-core.
    "gate_sb_reference": (("ReferencePolicy", FIXED), "Never", 3),
    "gate_sb_acqrel": ((), "Sometimes", 4),
    "gate_window_comparison": (COMPARISON, "Sometimes", 4),
    "gate_exit_mp_reference": (("ReferencePolicy", FIXED), "Never", 3),
    "gate_exit_mp_relaxed": ((), "Sometimes", 4),
    # The one-producer breakdown's rows (docs/performance.rst): the fast-path
    # file with one order weakened.  The push's seq_cst is needed; the
    # check's is not (the take and the push are RMWs of one location).
    "wakeup_fast_sb_push_release": ((), "Sometimes", 4),
    "wakeup_fast_sb_check_acquire": ((), "Never", 3),
}
# Each file that weakens one order of a reference file, and that file: not a
# negative control (the others stay seq_cst), so its verdict is its own.
ONE_ORDER = {
    "wakeup_fast_sb_push_release": "wakeup_fast_sb_reference",
    "wakeup_fast_sb_check_acquire": "wakeup_fast_sb_reference",
}
# Each negative control and the reference file it weakens.
CONTROLS = {
    "wakeup_fast_sb_acqrel": "wakeup_fast_sb_reference",
    "wakeup_slow_sb_acqrel": "wakeup_slow_sb_reference",
    "gate_sb_acqrel": "gate_sb_reference",
    "gate_exit_mp_relaxed": "gate_exit_mp_reference",
}

TAG_RE = re.compile(r"\[litmus:([\w.]+)\]")
MP_TAG_RE = re.compile(r"\[litmus-mp:([\w.]+)\]")
POLICY_LINE_RE = re.compile(r"^\s*\*?\s*policy:\s*(.+?)\s*$", re.M)
STRUCT_RE = re.compile(r"^struct (\w+Policy) \{\n(.*?)^\};", re.M | re.S)
DECL_RE = re.compile(r"static constexpr std::memory_order (\w+) = std::memory_order_(\w+);")
CPP_ORDER_RE = re.compile(r"std::memory_order_(\w+)")
C_ORDER_RE = re.compile(r"\bmemory_order_(\w+)")
# An atomic member operation whose order is a policy constant P::NAME.
CPP_USE_RE = re.compile(
    r"\b(\w+)_\.(load|store|exchange|compare_exchange_weak|compare_exchange_strong|fetch_add|fetch_sub)"
    r"\(([^;()]*?)\bP::(\w+)\b"
)
C_USE_RE = re.compile(
    r"atomic_(load|store|exchange|compare_exchange_\w+|fetch_\w+)_explicit\(\s*(\w+)"
)

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


def _kind(op: str) -> str:
    """'load', 'store' or 'rmw' for a C++ member or C11 function name."""
    return op if op in ("load", "store") else "rmw"


# The files that hold policy structs: the reference in the core, the two
# comparison policies beside it in comparison/ (deferred_cleanup::comparison).
POLICY_FILES = ("policy.hpp", "comparison/policies.hpp")


def policy_orders(headers: Path = HEADERS) -> dict[str, dict[str, dict]]:
    """The tagged order constants of each policy struct (POLICY_FILES).

    Args:
        headers: the directory holding policy.hpp and comparison/.
    Returns:
        {policy name: {tag: {"member": str, "order": str, "where": str}}},
        orders without the ``memory_order_`` prefix; ``where`` is
        ``FILE:LINE`` with FILE relative to ``headers``.
    Raises:
        AssertionError: a tag not followed by an order constant, or twice in
        one struct.
    """
    out: dict[str, dict[str, dict]] = {}
    for rel in POLICY_FILES:
        text = (headers / rel).read_text()
        for m in STRUCT_RE.finditer(text):
            first = text.count("\n", 0, m.start(2)) + 1
            lines = m.group(2).splitlines()
            tags: dict[str, dict] = {}
            for i, line in enumerate(lines):
                for tag in TAG_RE.findall(line):
                    where = f"{rel}:{first + i}"
                    assert line.lstrip().startswith("//"), f"{where}: tag outside a comment line"
                    j = i + 1
                    while j < len(lines) and lines[j].lstrip().startswith("//"):
                        j += 1
                    decl = DECL_RE.search(lines[j]) if j < len(lines) else None
                    assert decl, (
                        f"{where}: [litmus:{tag}] is not followed by a memory-order constant"
                    )
                    assert tag not in tags, (
                        f"{m.group(1)}: tag {tag} twice ({tags[tag]['where']}, {where})"
                    )
                    tags[tag] = {
                        "member": decl.group(1),
                        "order": decl.group(2),
                        "where": f"{rel}:{first + j}",
                    }
            out[m.group(1)] = tags
    return out


def header_uses(headers: Path = HEADERS) -> dict[str, set[tuple[str, str]]]:
    """Where each policy constant is used: {member: {(location, kind)}}.

    Location is the atomic member without its trailing underscore (``head``,
    ``scheduled``, ``accepting``, ``in_flight``), as the litmus files name it.
    """
    uses: dict[str, set[tuple[str, str]]] = {}
    for hpp in sorted(headers.rglob("*.hpp")):
        for m in CPP_USE_RE.finditer(hpp.read_text()):
            uses.setdefault(m.group(4), set()).add((m.group(1), _kind(m.group(2))))
    return uses


def mp_leave_order(headers: Path = HEADERS) -> tuple[str, str, str]:
    """(location, kind, order) of the operation after the comment
    ``litmus-mp: gate.leave`` in queue.hpp."""
    lines = (headers / "queue.hpp").read_text().splitlines()
    hits = [i for i, line in enumerate(lines) if "litmus-mp: gate.leave" in line]
    assert len(hits) == 1, f"queue.hpp: {len(hits)} comments 'litmus-mp: gate.leave'"
    code = lines[hits[0] + 1]
    m = re.search(r"\b(\w+)_\.(\w+)\(", code)
    orders = CPP_ORDER_RE.findall(code)
    assert m and len(orders) == 1, (
        f"queue.hpp:{hits[0] + 2}: no atomic operation with one order: {code}"
    )
    return m.group(1), _kind(m.group(2)), orders[0]


def litmus_policies(path: Path) -> tuple[str, ...]:
    """The policies a litmus file names on its ``policy:`` line (empty for
    ``none``)."""
    found = POLICY_LINE_RE.findall(path.read_text())
    assert len(found) == 1, f"{path.name}: expected one 'policy:' line, got {found}"
    words = found[0].split()
    return () if words[0] == "none" else tuple(words)


def litmus_tags(path: Path, tag_re: re.Pattern = TAG_RE) -> dict[str, dict]:
    """Tagged events of one litmus file.

    Args:
        path: the .litmus file.
        tag_re: the tag pattern (TAG_RE or MP_TAG_RE).
    Returns:
        {tag: {"order": str, "kind": str, "location": str}}; for a
        compare-exchange the order is its success order.
    Raises:
        AssertionError: a tagged line that is not one atomic operation.
    """
    found: dict[str, dict] = {}
    for no, line in enumerate(path.read_text().splitlines(), 1):
        if "//" not in line:
            continue
        code, comment = line.split("//", 1)
        for tag in tag_re.findall(comment):
            use = C_USE_RE.search(code)
            orders = C_ORDER_RE.findall(code)
            assert use, f"{path.name}:{no}: tagged line has no atomic operation"
            want = 2 if use.group(1).startswith("compare_exchange") else 1
            assert len(orders) == want, (
                f"{path.name}:{no}: expected {want} memory order(s), got {orders}"
            )
            found[tag] = {"order": orders[0], "kind": _kind(use.group(1)), "location": use.group(2)}
    return found


def drift_errors(headers: Path = HEADERS, litmus: Path = LITMUS) -> list[str]:
    """Every disagreement between the policies' order constants and the
    litmus files that name them.

    Args:
        headers: directory of the C++ headers (policy.hpp, queue.hpp, ...).
        litmus: directory of the .litmus files.
    Returns:
        one message per disagreement; empty when the files match the code.
    """
    errors: list[str] = []
    policies = policy_orders(headers)
    uses = header_uses(headers)
    for name in POLICIES:
        if not policies.get(name):
            errors.append(f"policy.hpp: no tagged order constants in struct {name}")
    covered: set[tuple[str, str]] = set()
    for path in sorted(litmus.glob("*.litmus")):
        named = litmus_policies(path)
        tags = litmus_tags(path)
        mp = litmus_tags(path, MP_TAG_RE)
        for pol in named:
            if pol not in policies:
                errors.append(
                    f"{path.name}: policy {pol} is not a policy struct "
                    "(policy.hpp, comparison/policies.hpp)"
                )
                continue
            for tag, ev in list(tags.items()) + list(mp.items()):
                if tag == "gate.leave" and tag in mp:
                    loc, kind, order = mp_leave_order(headers)
                    if (ev["location"], ev["kind"], ev["order"]) != (loc, kind, order):
                        errors.append(
                            f"{path.name}: gate.leave is {ev['kind']} {ev['order']} of "
                            f"{ev['location']}; "
                            f"queue.hpp does {kind} {order} of {loc}_"
                        )
                    continue
                h = policies[pol].get(tag)
                if h is None:
                    errors.append(f"{path.name}: [{tag}] is not a tag of {pol}")
                    continue
                covered.add((pol, tag))
                if ev["order"] != h["order"]:
                    errors.append(
                        f"{path.name}: {tag} is {ev['order']}, {pol}::{h['member']} is "
                        f"{h['order']} "
                        f"({h['where']})"
                    )
                used = uses.get(h["member"], set())
                if (ev["location"], ev["kind"]) not in used:
                    errors.append(
                        f"{path.name}: {tag} is a {ev['kind']} of {ev['location']}; the headers "
                        "use "
                        f"P::{h['member']} only in {sorted(used)}"
                    )
    for pol, tags in policies.items():
        for tag, h in tags.items():
            if (pol, tag) not in covered:
                errors.append(
                    f"{pol}::{h['member']} ({h['where']}, [litmus:{tag}]) appears in no litmus "
                    "file "
                    f"naming {pol}"
                )
    return errors


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
    p = subprocess.run(
        ["herd7", "-model", model, str(path)], capture_output=True, text=True, timeout=60
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"herd7 -model {model} {path.name} exited {p.returncode}:\n{out}"
    m = re.search(r"^Observation \S+ (Always|Sometimes|Never) (\d+) (\d+)", out, re.M)
    assert m, f"no Observation line from herd7:\n{out}"
    states = re.search(r"^States (\d+)", out, re.M)
    assert states, f"no States line from herd7:\n{out}"
    return {
        "observation": m.group(1),
        "positive": int(m.group(2)),
        "negative": int(m.group(3)),
        "states": int(states.group(1)),
        "output": out,
    }


def _all_seq_cst(src: Path, dst_dir: Path) -> Path:
    """A copy of src with every memory order seq_cst (a compare-exchange's
    failure order too), under a new test name."""
    text = C_ORDER_RE.sub("memory_order_seq_cst", src.read_text())
    text = re.sub(r"^C (\w+)", r"C \1_all_seq_cst", text, count=1, flags=re.M)
    dst = dst_dir / f"{src.stem}_all_seq_cst.litmus"
    dst.write_text(text)
    return dst


needs_herd7 = pytest.mark.skipif(
    shutil.which("herd7") is None,
    reason="herd7 not installed (it is in the Debian unstable root: marker 'tools', env cp314-sid)",
)


# ------------------------------------------------------------------ herd7


@needs_herd7
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stem", sorted(FILES))
def test_herd7_verdict(stem, model):
    """Reference files: the bad outcome forbidden; negative controls and the
    comparison variants' files: allowed."""
    policies, expected, states = FILES[stem]
    r = herd7(LITMUS / f"{stem}.litmus", model)
    assert r["observation"] == expected, r["output"]
    if expected == "Never":
        assert r["positive"] == 0 and r["negative"] >= 1, r["output"]
    else:
        assert r["positive"] >= 1 and r["negative"] >= 1, r["output"]
    assert r["states"] == states, r["output"]


@needs_herd7
@pytest.mark.parametrize("model", MODELS)
def test_reference_files_forbid_and_controls_allow(model):
    """Every file naming the reference is forbidden; every control allowed."""
    for stem, (policies, _, _) in FILES.items():
        r = herd7(LITMUS / f"{stem}.litmus", model)
        if "ReferencePolicy" in policies:
            assert r["observation"] == "Never", (stem, r["output"])
        if not policies and stem not in ONE_ORDER:
            assert r["observation"] == "Sometimes", (stem, r["output"])


@needs_herd7
@pytest.mark.parametrize("model", MODELS)
def test_comparison_recheck_loss_is_the_orders(model, tmp_path):
    """The comparison drain shape loses the wakeup only because of its
    orders: with every order seq_cst herd7 forbids it, and every register
    value the bad outcome needs is still reached on its own."""
    r = herd7(_all_seq_cst(LITMUS / "wakeup_recheck_sb_comparison.litmus", tmp_path), model)
    assert r["observation"] == "Never" and r["positive"] == 0, r["output"]
    for reg in ("0:r1=1", "0:r2=0", "1:r3=0", "1:r4=0"):
        assert reg in r["output"], (reg, r["output"])


@needs_herd7
@pytest.mark.parametrize("model", MODELS)
def test_no_order_closes_the_comparison_window(model, tmp_path):
    """Without a gate, seq_cst everywhere still lets a producer call the host
    after shutdown: the window is the shape, not the orders."""
    r = herd7(_all_seq_cst(LITMUS / "gate_window_comparison.litmus", tmp_path), model)
    assert r["observation"] == "Sometimes" and r["positive"] >= 1, r["output"]


@needs_herd7
@pytest.mark.parametrize("model", MODELS)
def test_orders_alone_do_not_fix_the_comparison_tail(model, tmp_path):
    """Push, claim, clear and re-check made seq_cst, the claim's failure order
    left relaxed as shipped: still allowed.  So the smallest fix is the two
    fences of wakeup_recheck_sb_fixed.litmus, not a change of orders."""
    src = (LITMUS / "wakeup_recheck_sb_comparison.litmus").read_text()
    out = []
    for line in src.splitlines(keepends=True):
        if any(f"[litmus:wakeup.{t}]" in line for t in ("push", "claim", "clear", "recheck")):
            # the first order of each line: the claim's failure order stays relaxed
            line = re.sub(
                r"memory_order_(release|acquire|acq_rel)", "memory_order_seq_cst", line, count=1
            )
        out.append(line)
    p = tmp_path / "orders_only.litmus"
    p.write_text("".join(out).replace("C wakeup_recheck_sb_comparison", "C orders_only"))
    text = p.read_text()
    assert text.count("memory_order_seq_cst") == 4 and "memory_order_relaxed" in text, text
    r = herd7(p, model)
    assert r["observation"] == "Sometimes" and r["positive"] >= 1, r["output"]


def _producer_orders_variant(tmp_path: Path, name: str, fail: str, drain: str) -> Path:
    """The comparison drain tail with the push's success order seq_cst and the
    claim's failure order ``fail`` (success order as shipped), and on the drain
    side either a seq_cst fence before the re-check (``drain="fence"``) or the
    clear and the re-check made seq_cst (``drain="orders"``)."""
    out = []
    for line in (LITMUS / "wakeup_recheck_sb_comparison.litmus").read_text().splitlines(True):
        if "[litmus:wakeup.push]" in line:
            line = line.replace("memory_order_release", "memory_order_seq_cst")
        if "[litmus:wakeup.claim]" in line:
            line = line.replace("memory_order_relaxed", f"memory_order_{fail}")
        if drain == "orders" and any(f"[litmus:wakeup.{t}]" in line for t in ("clear", "recheck")):
            line = re.sub(r"memory_order_(release|acquire)", "memory_order_seq_cst", line, count=1)
        if drain == "fence" and "[litmus:wakeup.recheck]" in line:
            out.append("  atomic_thread_fence(memory_order_seq_cst);\n")
        out.append(line)
    p = tmp_path / f"{name}.litmus"
    p.write_text("".join(out).replace("C wakeup_recheck_sb_comparison", f"C {name}"))
    return p


@needs_herd7
@pytest.mark.parametrize("model", MODELS)
def test_drain_fence_with_seq_cst_push_and_claim_failure_also_fixes_the_tail(model, tmp_path):
    """A fix with one fence: the drain's fence, and on the producer side the
    push's success order and the claim's failure order seq_cst instead of a
    second fence.  Forbidden under both models; with the failure order left
    relaxed it is allowed again.  On x86-64 the two order changes compile to
    the same lock cmpxchg instructions as shipped, so this shape saves the
    producer's fence (notes/upstream/cuda-core-store-buffering.md, "What the
    fix costs")."""
    r = herd7(_producer_orders_variant(tmp_path, "fence_sc_fail", "seq_cst", "fence"), model)
    assert r["observation"] == "Never" and r["positive"] == 0, r["output"]
    r = herd7(_producer_orders_variant(tmp_path, "fence_relaxed_fail", "relaxed", "fence"), model)
    assert r["observation"] == "Sometimes" and r["positive"] >= 1, r["output"]


@needs_herd7
def test_seq_cst_clear_and_recheck_without_fences_is_not_forbidden_by_both_models(tmp_path):
    """No fence at all: push, claim failure, clear and re-check seq_cst.  RC11
    forbids the lost wakeup but the partial-SC C11 model allows it, so this
    shape is not offered as a fix: the drain keeps its fence."""
    p = _producer_orders_variant(tmp_path, "orders_sc_fail", "seq_cst", "orders")
    assert herd7(p, "rc11.cat")["observation"] == "Never"
    r = herd7(p, "c11_partialSC.cat")
    assert r["observation"] == "Sometimes" and r["positive"] >= 1, r["output"]


# ------------------------------------------------------------------ drift


def test_every_litmus_file_is_listed_with_its_policy():
    on_disk = {p.stem for p in LITMUS.glob("*.litmus")}
    assert on_disk == set(FILES), (
        f"files not in FILES: {on_disk - set(FILES)}; missing: {set(FILES) - on_disk}"
    )
    for stem, (policies, _, _) in FILES.items():
        assert litmus_policies(LITMUS / f"{stem}.litmus") == policies, stem


def test_every_policy_has_tagged_orders():
    pol = policy_orders()
    assert set(pol) == set(POLICIES)
    wakeup = {"wakeup.push", "wakeup.check", "wakeup.claim", "wakeup.clear", "wakeup.take"}
    assert set(pol["ReferencePolicy"]) == wakeup | {
        "gate.enter",
        "gate.check",
        "gate.close",
        "gate.wait",
    }
    for name in COMPARISON:
        assert set(pol[name]) == wakeup | {"wakeup.recheck", "gate.check", "gate.close"}, name
    gate = {"gate.enter", "gate.check", "gate.close", "gate.wait"}
    assert set(pol[FIXED]) == wakeup | {"wakeup.recheck"} | gate


def test_fixed_policy_keeps_the_shipped_orders():
    """The store-buffering fix changes no order: the fixed policy's wakeup
    constants are cuda-core 1.2.0's; its gate (the finalization fix) has the
    reference's gate orders, seq_cst on all four."""
    pol = policy_orders()
    cuda = {t: v["order"] for t, v in pol["CudaCore12Policy"].items() if t.startswith("wakeup.")}
    fixed = {t: v["order"] for t, v in pol[FIXED].items()}
    assert {t: o for t, o in fixed.items() if t.startswith("wakeup.")} == cuda
    ref = {t: v["order"] for t, v in pol["ReferencePolicy"].items() if t.startswith("gate.")}
    assert {t: o for t, o in fixed.items() if t.startswith("gate.")} == ref


def test_fixed_fences_are_in_the_headers_and_the_litmus_file():
    """Both fences of the fix are in queue.hpp (recheck() and claim(), after a
    comment naming fixed.fence) and in the litmus file that proves it."""
    lines = (HEADERS / "queue.hpp").read_text().splitlines()
    hits = [i for i, line in enumerate(lines) if "(fixed.fence)" in line]
    assert len(hits) == 2, hits
    for i in hits:
        assert lines[i + 1].strip() == "std::atomic_thread_fence(std::memory_order_seq_cst);", (
            f"queue.hpp:{i + 2}: {lines[i + 1]}"
        )
    text = (LITMUS / "wakeup_recheck_sb_fixed.litmus").read_text()
    assert len(FENCE_RE.findall(text)) == 2


@needs_herd7
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("side", ["producer", "drain"])
def test_fixed_needs_both_fences(model, side, tmp_path):
    """With either fence of the fix removed, the lost wakeup is allowed again:
    the minimal fix is two lines, not one."""
    src = (LITMUS / "wakeup_recheck_sb_fixed.litmus").read_text()
    line = f"  atomic_thread_fence(memory_order_seq_cst); // fixed.fence ({side})\n"
    assert src.count(line) == 1
    p = tmp_path / "wakeup_recheck_sb_fixed_one_fence.litmus"
    p.write_text(src.replace(line, "").replace("C wakeup_recheck_sb_fixed", "C one_fence"))
    r = herd7(p, model)
    assert r["observation"] == "Sometimes" and r["positive"] >= 1, r["output"]


def test_litmus_files_match_the_policies():
    """The drift check: no disagreement between policy.hpp and the files."""
    errors = drift_errors()
    assert not errors, "\n".join(errors)


def test_comparison_policies_share_their_orders():
    """One shared file models both comparison policies: their tagged orders
    must be identical (otherwise each needs its own file)."""
    pol = policy_orders()
    seed = {t: v["order"] for t, v in pol["SeedPolicy"].items()}
    cuda = {t: v["order"] for t, v in pol["CudaCore12Policy"].items()}
    assert seed == cuda


@pytest.mark.parametrize("stem", sorted(CONTROLS))
def test_negative_control_weakens_its_reference(stem):
    """A control has the same events as its reference file, none seq_cst and
    none stronger, so that its 'allowed' is about the orders alone."""
    ref_path = LITMUS / f"{CONTROLS[stem]}.litmus"
    for tag_re in (TAG_RE, MP_TAG_RE):
        ref = litmus_tags(ref_path, tag_re)
        ctl = litmus_tags(LITMUS / f"{stem}.litmus", tag_re)
        assert sorted(ctl) == sorted(ref)
        for tag, ev in ctl.items():
            assert (ev["kind"], ev["location"]) == (ref[tag]["kind"], ref[tag]["location"]), tag
            assert ev["order"] != "seq_cst", tag
            assert ref[tag]["order"] in _STRONGER_OR_EQUAL[ev["order"]], tag


@pytest.mark.parametrize("stem", sorted(ONE_ORDER))
def test_one_order_file_weakens_one_event_of_its_reference(stem):
    """A one-order file has its reference file's events, and exactly one of
    them weaker, so that its verdict is about that one order."""
    ref = litmus_tags(LITMUS / f"{ONE_ORDER[stem]}.litmus")
    ctl = litmus_tags(LITMUS / f"{stem}.litmus")
    assert sorted(ctl) == sorted(ref)
    weakened = [tag for tag, ev in ctl.items() if ev["order"] != ref[tag]["order"]]
    assert len(weakened) == 1, weakened
    for tag, ev in ctl.items():
        assert (ev["kind"], ev["location"]) == (ref[tag]["kind"], ref[tag]["location"]), tag
        assert ref[tag]["order"] in _STRONGER_OR_EQUAL[ev["order"]], tag


# ------------------------------------------------------------------ the drift check can fail


def _scratch_headers(tmp_path: Path) -> Path:
    dst = tmp_path / "deferred_cleanup"
    shutil.copytree(HEADERS, dst)
    return dst


def _mutate_constant(headers: Path, policy: str, tag: str, new: str) -> None:
    """Set the order constant under [litmus:tag] of one policy struct."""
    where = policy_orders(headers)[policy][tag]["where"]
    rel, lineno = where.split(":")[0], int(where.split(":")[1])
    p = headers / rel
    lines = p.read_text().splitlines(keepends=True)
    old = lines[lineno - 1]
    lines[lineno - 1] = CPP_ORDER_RE.sub(f"std::memory_order_{new}", old)
    assert lines[lineno - 1] != old
    p.write_text("".join(lines))


_CONSTANTS = [(pol, tag) for pol, tags in sorted(policy_orders().items()) for tag in sorted(tags)]


@pytest.mark.parametrize("policy,tag", _CONSTANTS, ids=[f"{p}-{t}" for p, t in _CONSTANTS])
def test_mutating_an_order_constant_fails_the_drift_check(policy, tag, tmp_path):
    headers = _scratch_headers(tmp_path)
    old = policy_orders(headers)[policy][tag]["order"]
    _mutate_constant(headers, policy, tag, "relaxed" if old != "relaxed" else "seq_cst")
    errors = drift_errors(headers)
    assert any(tag in e for e in errors), errors


def test_weakening_the_reference_clear_to_release_fails_the_drift_check(tmp_path):
    """The mutant of the clear that x86 hides behind the take's locked
    exchange: only this check and herd7 notice it."""
    headers = _scratch_headers(tmp_path)
    _mutate_constant(headers, "ReferencePolicy", "wakeup.clear", "release")
    errors = drift_errors(headers)
    assert any("wakeup.clear" in e and "release" in e for e in errors), errors


def test_changing_an_operation_kind_fails_the_drift_check(tmp_path):
    """The fast path's load replaced by an exchange: same order, other kind."""
    headers = _scratch_headers(tmp_path)
    q = headers / "queue.hpp"
    text = q.read_text()
    assert text.count("scheduled_.load(P::check)") == 1
    q.write_text(text.replace("scheduled_.load(P::check)", "scheduled_.exchange(true, P::check)"))
    errors = drift_errors(headers)
    assert any("wakeup.check" in e and "load of scheduled" in e for e in errors), errors


def test_weakening_gate_leave_fails_the_drift_check(tmp_path):
    headers = _scratch_headers(tmp_path)
    q = headers / "queue.hpp"
    text = q.read_text()
    assert text.count("in_flight_.fetch_sub(1, std::memory_order_release)") == 1
    q.write_text(
        text.replace(
            "in_flight_.fetch_sub(1, std::memory_order_release)",
            "in_flight_.fetch_sub(1, std::memory_order_relaxed)",
        )
    )
    errors = drift_errors(headers)
    assert any("gate.leave" in e for e in errors), errors


def test_an_untested_constant_fails_the_drift_check(tmp_path):
    """A new tagged constant that no litmus file covers is reported."""
    headers = _scratch_headers(tmp_path)
    p = headers / "policy.hpp"
    text = p.read_text()
    anchor = "  static constexpr DrainShape drain_shape = DrainShape::clear_then_take;\n"
    assert text.count(anchor) == 1
    p.write_text(
        text.replace(
            anchor,
            "  // [litmus:wakeup.extra]\n"
            "  static constexpr std::memory_order extra = std::memory_order_seq_cst;\n" + anchor,
        )
    )
    errors = drift_errors(headers)
    assert any("wakeup.extra" in e and "no litmus file" in e for e in errors), errors

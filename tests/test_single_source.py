# SPDX-License-Identifier: Apache-2.0
"""Each number the project states in several places has one source.

The bound on outstanding pending calls, the ring of call tokens, CPython's
pending-call ring, the default time bounds and the largest timeout are stated
in header comments, docstrings, the docs pages and the README.  Each has one
source: a C++ constant of the core (or of the host), or, for what CPython
does, the expected-facts table ``deferred_cleanup/cpython_facts.py``.  These
tests read the source, find every statement of the number in the prose, and
fail when one states another value, naming the file and the sentence.

No extension is needed: the headers and pages are read as text, and
cpython_facts.py is loaded by path (it imports nothing of the package).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
INCLUDE = REPO / "include" / "deferred_cleanup"
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _prose_files() -> list[Path]:
    """Every file whose comments or text state the numbers: the core's headers,
    the host's sources, the Python package, the docs pages and the README."""
    files = sorted(INCLUDE.rglob("*.hpp"))
    files += sorted((REPO / "reference" / "src").glob("*.[ch]pp"))
    files += sorted((REPO / "reference" / "python" / "deferred_cleanup").glob("*.py"))
    files += sorted(p for p in (REPO / "docs").rglob("*.rst") if "_build" not in p.parts)
    files.append(REPO / "README.md")
    return files


def _flat(text: str) -> str:
    """Text with comment leaders and line breaks folded into single spaces, so
    that a statement wrapped over several comment lines reads as one."""
    text = re.sub(r"^\s*(?:///?|#|\*|//!)\s?", " ", text, flags=re.M)
    return re.sub(r"\s+", " ", text)


def _sentence(text: str, start: int, end: int) -> str:
    a = max(text.rfind(". ", 0, start), text.rfind("; ", 0, start), 0)
    b = text.find(". ", end)
    return text[a : b if b != -1 else len(text)].strip(" .;")


def _number(token: str) -> int:
    token = token.lower()
    return WORDS[token] if token in WORDS else int(token)


def _cpp_constant(header: str, name: str) -> int:
    text = (INCLUDE / header).read_text()
    m = re.search(rf"constexpr [\w:]+ {name}\s*(?:=\s*|\{{)([\d']+)", text)
    assert m, f"{name} not found in {header}"
    return int(m.group(1).replace("'", ""))


def _statements(pattern: str, keep=lambda sentence: True):
    """(file, value, sentence) for every match of `pattern` (group 1: the
    number) in the prose, where keep(sentence) is true."""
    out = []
    rx = re.compile(pattern, re.I)
    for path in _prose_files():
        text = _flat(path.read_text(errors="replace"))
        for m in rx.finditer(text):
            sentence = _sentence(text, m.start(), m.end())
            if keep(sentence):
                out.append((path.relative_to(REPO), _number(m.group(1)), sentence))
    return out


def _check(source: int, found, what: str) -> None:
    print(f"{what}: {len(found)} statements, source {source}")
    for p, v, _s in found:
        print(f"  {p}: {v}")
    assert found, f"no statement of {what} found: the pattern no longer matches the prose"
    wrong = [f'{p}: states {v}, not {source}: "{s}"' for p, v, s in found if v != source]
    assert not wrong, f"{what} is {source} at its source; elsewhere:\n" + "\n".join(wrong)


# Sentences about a part of the bound: producers alone, or one kind of call.
_PARTIAL = re.compile(
    r"producers alone|from producers|producers keep|producer with|without the main thread|"
    r"such call|superseded call may|main thread's calls at",
    re.I,
)


def test_bound_on_outstanding_calls_is_stated_as_its_constant():
    source = _cpp_constant("rearm_state.hpp", "kMaxCallsOutstanding")
    found = _statements(
        r"at most (\w+) (?:of (?:the queue's|our|its) )?(?:pending )?(?:calls )?(?:are )?"
        r"(?:ever )?outstanding",
        keep=lambda s: not _PARTIAL.search(s),
    )
    found += _statements(r"the bound is (\w+)\b", keep=lambda s: "outstanding" in s)
    _check(
        source, found, "the bound on the queue's outstanding pending calls (kMaxCallsOutstanding)"
    )


def test_call_token_ring_is_stated_as_its_constant():
    source = _cpp_constant("rearm_state.hpp", "kCallTokens")
    found = _statements(r"\b(\d+) (?:reused )?slots\b", keep=lambda s: "token" in s.lower())
    found += _statements(r"\b(\d+) tokens later\b")
    _check(source, found, "the ring of call tokens (kCallTokens)")


def _facts():
    path = REPO / "reference" / "python" / "deferred_cleanup" / "cpython_facts.py"
    spec = importlib.util.spec_from_file_location("_dc_cpython_facts", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses looks its module up while it runs
    spec.loader.exec_module(mod)
    return mod


def test_cpython_ring_capacity_is_stated_as_the_facts_table():
    facts = _facts()
    cap = {(f.lo, f.hi): f.value for f in facts.TABLE if f.field == "capacity"}
    old = cap[((3, 10), (3, 12))]
    new = cap[((3, 13), (3, 15))]
    _check(
        old,
        _statements(r"(?<![-\w])(\d+) (?:pending )?(?:calls )?on 3\.10\s?[-–]\s?3\.12"),
        "CPython's pending-call capacity on 3.10-3.12 (cpython_facts.py, capacity)",
    )
    _check(
        new,
        _statements(r"(?<![-\w])(\d+) (?:pending )?(?:calls )?on 3\.13\+?(?! and)"),
        "CPython's pending-call capacity on 3.13+ (cpython_facts.py, capacity)",
    )
    # Both at once: "31 or 32 slots", "holds 32 pending calls instead of 31".
    pairs = []
    for path in _prose_files():
        text = _flat(path.read_text(errors="replace"))
        for m in re.finditer(r"(?<![-\w])(\d+) or (\d+) slots", text):
            pairs.append((path.relative_to(REPO), (int(m[1]), int(m[2])), m[0]))
        for m in re.finditer(r"holds (\d+) pending calls instead of (\d+)", text):
            pairs.append((path.relative_to(REPO), (int(m[2]), int(m[1])), m[0]))
    wrong = [f"{p}: {s!r}" for p, v, s in pairs if v != (old, new)]
    assert pairs and not wrong, f"capacity is {old} (3.10-3.12) and {new} (3.13+):\n" + "\n".join(
        wrong
    )


def _default_seconds(keyword: re.Pattern, exclude: re.Pattern | None = None):
    """Statements 'N s by default', 'default N s', 'default N.0' whose nearest
    preceding setting name (within the sentence) is `keyword`."""
    rx = re.compile(
        r"(?:\b(\d+(?:\.\d+)?) ?s(?:econds)? by default"
        r"|\bdefault:? (\d+(?:\.\d+)?) ?(?:s\b|seconds|\)))",
        re.I,
    )
    names = re.compile(r"exit[_ ]wait|stale|gate", re.I)
    out = []
    for path in _prose_files():
        text = _flat(path.read_text(errors="replace"))
        for m in rx.finditer(text):
            sentence_start = max(text.rfind(". ", 0, m.start()), 0)
            before = text[sentence_start : m.start()]
            named = list(names.finditer(before))
            if not named or not keyword.fullmatch(named[-1].group(0)):
                continue
            value = float(m.group(1) or m.group(2))
            out.append((path.relative_to(REPO), value, _sentence(text, m.start(), m.end())))
    return out


@pytest.mark.parametrize(
    "constant, header, keyword, unit_ns",
    [
        ("kDefaultExitWaitNs", "host.hpp", r"exit[_ ]wait", 1e9),
        ("kDefaultStaleClaimNs", "host.hpp", r"stale", 1e9),
        ("kDefaultGateBound", "shutdown.hpp", r"gate", 1e3),
    ],
)
def test_default_time_bounds_are_stated_as_their_constants(constant, header, keyword, unit_ns):
    source = _cpp_constant(header, constant) / unit_ns  # seconds
    found = _default_seconds(re.compile(keyword, re.I))
    _check(source, found, f"the default {keyword} ({constant}, seconds)")


def test_largest_timeout_is_one_year_where_stated():
    host = (REPO / "reference" / "src" / "host.cpp").read_text()
    m = re.search(r"constexpr double kMax = 365\.0 \* 24 \* 3600;", host)
    assert m, "checked_timeout's bound (one year) is no longer 365 days in host.cpp"
    found = _statements(r"(?:larger than|at most|up to|from 0 to) (one|two|\d+) years?\b")
    _check(1, found, "the largest timeout (checked_timeout, one year)")


# Sentences about the sampling rate before the one-producer decision (the bench
# row reference-sample-16, the history of the hash), not the reference's.
_OLD_RATE = re.compile(r"old rate|rate of the time|sample-16|rearm_sample_log2 = 4", re.I)


def test_rearm_sample_rate_is_stated_as_its_constant():
    # policy.hpp states the rate once (ReferencePolicy::rearm_sample_log2, its
    # comment); a page that needs the number derives it from the constant.
    source = 2 ** _cpp_constant("policy.hpp", "rearm_sample_log2")
    keep = lambda s: not _OLD_RATE.search(s) and "static_assert" not in s  # noqa: E731
    # "one in 2^Log2", "one push in 2\ :sup:`rearm_sample_log2`": the rate by its
    # name, not a number.
    found = _statements(
        r"\bone (?:fast-path )?(?:hit |item |push |call )?in (\d+)\b(?!\s*(?:\^|\\|bytes))",
        keep=keep,
    )
    found += _statements(r"\babout one in (\d+) of its fast-path hits", keep=keep)
    found += _statements(r"\babout (\d+) further fast-path hits", keep=keep)
    found += _statements(r"\(\d+/(\d+)\)\\? ?:sup:", keep=keep)
    _check(source, found, "the re-arm look's sampling rate (2^rearm_sample_log2, policy.hpp)")

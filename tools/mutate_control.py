# SPDX-License-Identifier: Apache-2.0
"""pytest plugin for tools/mutate.py's control: many pytest checks in one session.

The control must show that every test a mutant's pytest check selects passes
on the unmutated tree.  Run one pytest session per check and each pays
pytest's start-up, collection and the suite's fixtures again (about thirty
sessions); this plugin lets one session stand for all the checks of one
interpreter, with the same selection per check and a result per check.

Loaded with ``-p mutate_control`` (tools/ on PYTHONPATH) and driven by two
environment variables:

``DC_MUTATE_CONTROL`` (input)
    JSON list of ``[check, [path, ...], k_expression_or_null]``: check is the
    KILLED_BY text, paths the test files it names, the expression its ``-k``.
``DC_MUTATE_CONTROL_OUT`` (output)
    a file this plugin writes at the end of the session: JSON
    ``{"selected": {check: [nodeid, ...]}, "outcomes": {nodeid: outcome}}``
    with outcome ``"passed"``, ``"failed"`` (any phase failed) or ``"skipped"``.

An item is kept when some check names its file and, where that check has a
``-k``, the expression matches it as pytest's own ``-k`` would (pytest's
keyword matcher and expression parser, the ones ``-k`` uses; pytest is pinned
in tools/matrix.py's REQUIREMENTS).  Others are deselected.

Runs in pytest's main thread only; no locking.  Errors: a ``-k`` expression
pytest cannot parse raises ``pytest.UsageError`` (the session then errors, and
tools/mutate.py runs the checks one session each).
"""

from __future__ import annotations

import json
import os

import pytest
from _pytest.mark import KeywordMatcher
from _pytest.mark.expression import Expression

_SPEC = json.loads(os.environ.get("DC_MUTATE_CONTROL", "[]"))
_OUT = os.environ.get("DC_MUTATE_CONTROL_OUT")
_selected: dict[str, list[str]] = {check: [] for check, _, _ in _SPEC}
_outcomes: dict[str, str] = {}


def _file_of(nodeid: str) -> str:
    return os.path.normpath(nodeid.split("::", 1)[0])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the items some check selects; record which check selects which.

    Args:
        config (pytest.Config): the session's config (told of the deselected).
        items (list[pytest.Item]): the collected items, filtered in place.

    Raises:
        pytest.UsageError: a check's ``-k`` expression does not parse.
    """
    compiled = []
    for check, paths, expr in _SPEC:
        try:
            ex = Expression.compile(expr) if expr else None
        except Exception as e:  # pytest's ParseError
            raise pytest.UsageError(f"{check}: -k {expr!r}: {e}") from None
        compiled.append((check, {os.path.normpath(p) for p in paths}, ex))
    keep, drop = [], []
    for item in items:
        hit = False
        for check, paths, ex in compiled:
            if _file_of(item.nodeid) not in paths:
                continue
            if ex is not None and not ex.evaluate(KeywordMatcher.from_item(item)):
                continue
            _selected[check].append(item.nodeid)
            hit = True
        (keep if hit else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Record each test's outcome: failed if any phase failed, else its call's.

    Args:
        report (pytest.TestReport): one phase's report.
    """
    if report.failed:
        _outcomes[report.nodeid] = "failed"
    elif report.skipped and _outcomes.get(report.nodeid) != "failed":
        _outcomes[report.nodeid] = "skipped"
    elif report.when == "call" and report.nodeid not in _outcomes:
        _outcomes[report.nodeid] = "passed"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the selection and the outcomes to DC_MUTATE_CONTROL_OUT.

    Args:
        session (pytest.Session): unused.
        exitstatus (int): unused; tools/mutate.py reads pytest's own.
    """
    if _OUT:
        with open(_OUT, "w") as f:
            json.dump({"selected": _selected, "outcomes": _outcomes}, f, indent=1)

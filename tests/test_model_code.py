# SPDX-License-Identifier: Apache-2.0
"""The statement orders the Promela model assumes, read from the C++ headers.

tests/model/deferred_cleanup.pml proves liveness with lost calls and re-arms
for the rule as the model writes it, step by step.  Two of those steps are
orders inside one function that spin showed to matter (a different order is
a counterexample it found, tests/model: the checks with one lost call and a
third thread):

* rearm_state.hpp ``call_ran()``: the running call updates ``ran_max_seq_``, then
  moves the claim (``move_claim_seq(seq, 0)``), and only then reads the
  superseded and main-thread records.  Records read before the claim move
  let a re-arm record this very call as superseded and leave the record
  behind for good.
* rearm.hpp ``rearm_if_stale()``: a caller that may not re-arm a stale
  claim (a superseded call is recorded and it is not the main thread with a
  free main-thread record) returns before it takes the claim's clock, and a
  caller whose ``take_supersede`` fails off the main thread gives the clock
  back; otherwise the claim would never look stale again.

These checks read the headers as text, as the litmus tag checks do for the
memory orders (tests/test_litmus.py), so that the code cannot drift from
what the model proves without a test failing.
"""

from pathlib import Path

INCLUDE = Path(__file__).resolve().parent.parent / "include" / "deferred_cleanup"


def _body(path: Path, signature: str) -> str:
    """The text of the function whose definition starts with `signature`,
    from its opening brace to the matching closing one."""
    text = path.read_text()
    start = text.index(signature)
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i : j + 1]
    raise AssertionError(f"unbalanced braces after {signature!r} in {path.name}")


def _positions(body: str, needles: list[str]) -> list[int]:
    out = []
    for n in needles:
        assert body.count(n) == 1, f"{n!r} occurs {body.count(n)} times, expected once:\n{body}"
        out.append(body.index(n))
    return out


def test_call_ran_moves_the_claim_before_it_reads_the_records():
    body = _body(INCLUDE / "rearm_state.hpp", "bool call_ran(std::uint64_t seq) noexcept")
    steps = [
        "ran_max_seq_.compare_exchange_weak(",
        "move_claim_seq(seq, 0)",
        "superseded_seq_.load(",
        "main_seq_.load(",
    ]
    pos = _positions(body, steps)
    assert pos == sorted(pos), (
        "call_ran() must update ran_max, move the claim, then read the records "
        f"(the model's order): found {sorted(zip(pos, steps, strict=True))}"
    )


def test_move_claim_publishes_and_sees_the_records():
    body = _body(
        INCLUDE / "rearm_state.hpp",
        "bool move_claim_seq(std::uint64_t expected, std::uint64_t desired)",
    )
    assert "std::memory_order_acq_rel" in body and "std::memory_order_acquire" in body, (
        "a call that loses the claim to a re-arm must see the re-arm's record: acq_rel, acquire on "
        "failure\n" + body
    )


def test_rearm_leaves_the_clock_of_a_claim_it_may_not_rearm():
    body = _body(
        INCLUDE / "rearm.hpp", "ScheduleResult rearm_if_stale(BasicQueue<P>& q, bool main_entry"
    )
    at_bound, take_clock = _positions(
        body,
        [
            "r.superseded() != 0 && (!main_entry || r.main_rearmed() != 0)",
            "r.take_stale_claim(seen)",
        ],
    )
    assert at_bound < take_clock, "at the bound, return before taking the claim's clock"
    within = body.index("const bool within = r.take_supersede(old_seq);")
    branch = body.index("if (!within && !main_entry) {", within)
    give_back = body.index("r.start_stale_clock(old_seq, seen);", branch)
    ret = body.index("return ScheduleResult::already_scheduled;", branch)
    assert give_back < ret, (
        "a failed take_supersede off the main thread gives the clock back before returning"
    )

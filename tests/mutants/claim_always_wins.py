"""Every producer wins the claim, so each callback adds its own pending call."""

FILE = "reference/include/deferred_cleanup/queue.hpp"
FIND = """\
      return !scheduled_.exchange(true, P::claim);
"""
REPLACE = """\
      return (scheduled_.exchange(true, P::claim), true);  // MUTANT: every claimant wins
"""
PROPERTY = "one claim, one winner: a burst of callbacks makes exactly one pending call of the queue"
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_scheduling.py -k exactly_one"]
KILLING_TESTS = ["Core/reference.ManyCallbacksMakeOnePendingCall"]

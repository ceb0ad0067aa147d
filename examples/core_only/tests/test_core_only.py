# SPDX-License-Identifier: Apache-2.0
"""core_only: 10**5 objects handed back by 8 threads are all released, on the
main thread, once, when the main thread drains."""

from __future__ import annotations

import sys
import threading

import core_only


class Tracked:
    released_on: list[int] = []

    def __del__(self):
        Tracked.released_on.append(threading.get_ident())


def test_every_object_is_released_on_the_main_thread_once():
    n = 100_000
    objs = [Tracked() for _ in range(n)]
    core_only.start(objs, 8)
    refs = sys.getrefcount(objs[0])
    del objs  # the items hold the only references now
    assert refs >= 3  # the list's, the argument's, and the item's
    core_only.join()
    assert Tracked.released_on == []  # nothing released before the drain
    assert core_only.drain() == n
    assert len(Tracked.released_on) == n
    assert set(Tracked.released_on) == {threading.main_thread().ident}
    assert core_only.drain() == 0


def test_drain_off_the_main_thread_is_refused():
    errors = []

    def worker():
        try:
            core_only.drain()
        except ValueError as e:
            errors.append(str(e))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert errors == ["drain() runs on the main thread only"]


def test_built_against_the_installed_version():
    from importlib.metadata import version

    assert core_only.version == version("deferred-cleanup")

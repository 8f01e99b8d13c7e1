"""The Landlock rulesets holding a runner's program to its TCP ports, as a process keeps
them (real rulesets of the kernel)."""

from __future__ import annotations

import os
import threading

import pytest

from storlab.campaign.runners import _sandbox
from storlab.campaign.runners._sandbox import (TCP_RULESETS_KEPT, Walls,
                                               landlock_net_missing, tcp_ruleset)

pytestmark = pytest.mark.skipif(landlock_net_missing() is not None,
                                reason="no Landlock network rules")


def rulesets() -> set[int]:
    """This process's open Landlock ruleset descriptors."""
    out = set()
    for f in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{f}") == "anon_inode:[landlock-ruleset]":
                out.add(int(f))
        except FileNotFoundError:  # the listing's own descriptor
            pass
    return out


def open_fds() -> int:
    """This process's open Landlock ruleset descriptors, counted (not every descriptor:
    a socket an earlier test's thread in this worker closes meanwhile would count)."""
    return len(rulesets())


def test_a_port_per_run_keeps_a_bounded_number_of_rulesets() -> None:
    """One ruleset per set of ports was kept for good: a `port` factor of 1000 values held
    1000 descriptors. Now at most `TCP_RULESETS_KEPT`; the most recent one is reused."""
    before = rulesets()
    sets = [(40000 + i,) for i in range(TCP_RULESETS_KEPT + 20)]
    for p in sets:
        os.close(tcp_ruleset(p))
    assert len(rulesets() - before) <= TCP_RULESETS_KEPT
    kept = dict(_sandbox._TCP_RULESETS)
    os.close(tcp_ruleset(sets[-1]))
    assert _sandbox._TCP_RULESETS[sets[-1]] == kept[sets[-1]]  # reused, not made again
    # one used again stays; a set evicted is made again, working
    os.close(tcp_ruleset(sets[-TCP_RULESETS_KEPT]))
    again = tcp_ruleset(sets[0])
    try:
        assert again in rulesets()
    finally:
        os.close(again)
    assert len(rulesets() - before) <= TCP_RULESETS_KEPT


def test_the_descriptor_returned_is_the_callers_own() -> None:
    """It was the kept descriptor itself: rulesets for more sets of ports than are kept
    evicted and closed it while the caller still held it (its number then free for any
    other file). Now a duplicate made under the lock, which eviction leaves open."""
    first = tcp_ruleset((39000,))
    try:
        assert first not in _sandbox._TCP_RULESETS.values()
        for i in range(TCP_RULESETS_KEPT + 1):
            os.close(tcp_ruleset((39001 + i,)))
        assert (39000,) not in _sandbox._TCP_RULESETS  # evicted, its kept copy closed
        assert first in rulesets()
    finally:
        os.close(first)


def test_threads_past_the_limit_keep_their_own_and_leak_nothing() -> None:
    """Threads asking for more sets of ports than are kept, each using its descriptor
    after the others evicted: every one still a ruleset; no descriptor left over."""
    for i in range(TCP_RULESETS_KEPT):  # the cache full before counting
        os.close(tcp_ruleset((37000 + i,)))
    before = open_fds()
    bad: list[str] = []
    barrier = threading.Barrier(4)

    def hammer(t: int) -> None:
        barrier.wait()
        for i in range(3 * TCP_RULESETS_KEPT):
            fd = tcp_ruleset((38000 + 500 * t + i % (TCP_RULESETS_KEPT + 7),))
            try:
                os.close(tcp_ruleset((38000 + 500 * ((t + 1) % 4) + i,)))  # evicts
                if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:[landlock-ruleset]":
                    bad.append(f"{fd} is no ruleset")
            except OSError as exc:
                bad.append(f"{fd}: {exc}")
            finally:
                try:
                    os.close(fd)
                except OSError as exc:
                    bad.append(f"{fd} closed already: {exc}")

    threads = [threading.Thread(target=hammer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, bad[:5]
    assert len(_sandbox._TCP_RULESETS) == TCP_RULESETS_KEPT
    assert open_fds() == before


def test_walls_close_the_ruleset_they_were_given() -> None:
    """`Walls.landlock()` hands out a duplicate that `close()` releases: many starts leak
    no descriptor (the shared ruleset's and the TCP ones alike)."""
    for ports in [None, (36000,), (36001, 36002)]:  # kept ones made before counting
        w = Walls(network=True, tcp_ports=ports)
        w.landlock()
        w.close()
    before = open_fds()
    for i in range(300):
        w = Walls(network=True, tcp_ports=[None, (36000,), (36001, 36002)][i % 3])
        fd = w.landlock()
        assert fd is None or os.readlink(f"/proc/self/fd/{fd}") == \
            "anon_inode:[landlock-ruleset]"
        w.close()
        w.close()  # again: nothing left to close
    assert open_fds() == before

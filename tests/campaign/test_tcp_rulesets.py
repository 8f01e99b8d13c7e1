"""The Landlock rulesets holding a runner's program to its TCP ports, as a process keeps
them (real rulesets of the kernel)."""

from __future__ import annotations

import os

import pytest

from storlab.campaign.runners._sandbox import (TCP_RULESETS_KEPT, landlock_net_missing,
                                               tcp_ruleset)


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


@pytest.mark.skipif(landlock_net_missing() is not None, reason="no Landlock network rules")
def test_a_port_per_run_keeps_a_bounded_number_of_rulesets() -> None:
    """One ruleset per set of ports was kept for good: a `port` factor of 1000 values held
    1000 descriptors. Now at most `TCP_RULESETS_KEPT`; the most recent one is reused."""
    before = rulesets()
    sets = [(40000 + i,) for i in range(TCP_RULESETS_KEPT + 20)]
    fds = [tcp_ruleset(p) for p in sets]
    assert len(rulesets() - before) <= TCP_RULESETS_KEPT
    assert tcp_ruleset(sets[-1]) == fds[-1] and fds[-1] in rulesets()
    # one used again stays; a set evicted is made again, working
    tcp_ruleset(sets[-TCP_RULESETS_KEPT])
    again = tcp_ruleset(sets[0])
    assert again in rulesets()
    assert len(rulesets() - before) <= TCP_RULESETS_KEPT

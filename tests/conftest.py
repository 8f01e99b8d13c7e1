"""Fixtures shared by every test directory."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def lan():
    """Two network namespaces ("hosts") on a private /24 joined to this namespace by veth
    pairs on a bridge (storlab.clusters.netns.Lan); removed with everything started in them
    when the module's tests are done. Skipped, with the reason, without root or iproute2."""
    from storlab.clusters.netns import Lan, NetnsError, unavailable

    why = unavailable()
    if why:
        pytest.skip(why)
    try:
        net = Lan(2).__enter__()
    except NetnsError as exc:
        pytest.skip(f"cannot create network namespaces here: {exc}")
    try:
        yield net
    finally:
        net.close()

"""The ring: md5 partitions, weight-proportional placement within Swift's balance target,
zone-unique replicas whenever the weights allow it, handoffs."""

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storlab.sim.ring import SWIFT_BALANCE_TARGET, Ring, hash_partition


def test_partition_is_top_bits_of_md5():
    path = "/AUTH_test/photos/cat.jpg"
    digest = hashlib.md5(b"" + path.encode() + b"storlab").digest()
    want = int.from_bytes(digest[:4], "big") >> (32 - 10)
    assert hash_partition([path], 10)[0] == want
    paths = [f"/a/c/o{i}" for i in range(20)]
    assert not np.array_equal(hash_partition(paths, 16), hash_partition(paths, 16, suffix=b"x"))
    assert hash_partition([path], 16)[0] >> 6 == want  # more bits refine the same prefix


@settings(max_examples=25, deadline=None)
@given(nodes=st.integers(3, 12), per_node=st.integers(1, 6), zones=st.integers(3, 6),
       seed=st.integers(0, 1000), replicas=st.sampled_from([2, 3]))
def test_balance_and_zone_uniqueness(nodes, per_node, zones, seed, replicas):
    rng = np.random.default_rng(seed)
    node = np.repeat(np.arange(nodes), per_node)
    zone = node % zones
    weight = rng.choice([1.0, 2.0, 4.0, 8.0], node.size)
    ring = Ring.build(node, zone, weight, 12, replicas, seed=seed)
    have = ring.parts_per_device()
    assert have.sum() == ring.partitions * replicas
    # Each device within one partition of its weight-fair share ...
    wanted = ring.wanted()
    if np.all(wanted <= ring.partitions):
        assert np.all(np.abs(have - wanted) < 1.0 + 1e-9)
        # ... which is inside Swift's own rebalance target when shares are large enough.
        if wanted.min() >= 100:
            assert ring.balance() < SWIFT_BALANCE_TARGET
    # Never two replicas of a partition in one zone unless the weights force it, and then
    # only as often as the pigeonhole principle requires: exactly the minimum while no zone
    # must hold a partition's every replica; beyond that (a zone with more than 2/3 of the
    # weight at 3 replicas) storlab's placement is not optimal (seen: 4,096 partitions where
    # 3,152 would do) and only the bound holds.
    assert ring.zone_duplicates() >= ring.min_zone_duplicates()
    if ring.excess_zone_replicas() == ring.min_zone_duplicates():
        assert ring.zone_duplicates() == ring.min_zone_duplicates()
    zshare = np.bincount(zone, weights=weight) / weight.sum()
    if np.all(zshare <= 1.0 / replicas + 1e-12) and ring.min_zone_duplicates() == 0:
        assert ring.zone_duplicates() == 0


def test_zone_uniqueness_holds_in_a_typical_cluster():
    node = np.repeat(np.arange(20), 4)
    ring = Ring.build(node, node % 5, np.ones(node.size), 14, 3, seed=3)
    z = np.sort(ring.dev_zone[ring.r2p2d], axis=0)
    assert not np.any(z[1:] == z[:-1])
    assert ring.balance() < SWIFT_BALANCE_TARGET


def test_single_zone_falls_back_to_node_uniqueness():
    node = np.repeat(np.arange(6), 4)
    ring = Ring.build(node, np.zeros(node.size, int), np.ones(node.size), 10, 3, seed=2)
    n = np.sort(ring.dev_node[ring.r2p2d], axis=0)
    assert not np.any(n[1:] == n[:-1])


def test_zero_weight_device_gets_nothing_and_build_is_deterministic():
    node = np.repeat(np.arange(4), 3)
    w = np.ones(12)
    w[5] = 0
    a = Ring.build(node, node, w, 10, 3, seed=9)
    b = Ring.build(node, node, w, 10, 3, seed=9)
    assert a.parts_per_device()[5] == 0
    assert np.array_equal(a.r2p2d, b.r2p2d)
    assert not np.array_equal(a.r2p2d, Ring.build(node, node, w, 10, 3, seed=10).r2p2d)


def test_handoffs_prefer_unused_zones_and_skip_primaries():
    node = np.repeat(np.arange(8), 2)
    ring = Ring.build(node, node % 4, np.ones(16), 8, 2, seed=1)
    for part in (0, 17, 255):
        prim = ring.get_part_nodes(part)
        hand = ring.handoffs(part)
        assert not set(prim) & set(hand)
        assert len(hand) == 16 - len(prim)
        used = set(ring.dev_zone[prim])
        tiers = [ring.dev_zone[d] in used for d in hand]
        assert tiers == sorted(tiers)  # unused zones first
        assert hand == ring.handoffs(part)  # stable


def test_bad_input():
    with pytest.raises(ValueError):
        Ring.build([0, 1], [0, 1], [1, 1], 8, 3)
    with pytest.raises(ValueError):
        Ring.build([0], [0], [-1], 8, 1)

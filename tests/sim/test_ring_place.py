"""Swift's placement at any ring size (the compiled partition walk against the Python
reference, which test_ring_swift.py checks against Swift's builder) and regions and zones
given in the cluster file."""

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storlab.errors import SimError
from storlab.sim.model import build_model
from storlab.sim.spec import load_cluster, parse_cluster
from storlab.sim.engine import compiled_function
from storlab.sim.ring import Ring
from storlab.sim.ringbuild import parts_wanted, replica_plan, swift_rebalance
from storlab.sim.spec import load_raw

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
needs_walk = pytest.mark.skipif(compiled_function("ring_place") is None,
                                reason="needs the compiled engine (make)")


@needs_walk
@settings(max_examples=25, deadline=None)
@given(servers=st.integers(1, 9), disks=st.integers(1, 4), regions=st.integers(1, 3),
       zones=st.integers(1, 4), pp=st.integers(4, 9), replicas=st.integers(1, 4),
       seed=st.integers(0, 10_000), overload=st.sampled_from([0.0, 0.1]),
       weights=st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=36, max_size=36))
def test_compiled_walk_is_the_reference(servers, disks, regions, zones, pp, replicas, seed,
                                        overload, weights):
    """The compiled walk assigns every partition-replica where the Python reference does,
    over regions, zones, unequal and zero weights, overload."""
    n = servers * disks
    server = [i // disks for i in range(n)]
    region = [s % regions for s in server]
    zone = [(s // regions) % zones for s in server]
    weight = weights[:n]
    if sum(1 for w in weight if w) < replicas:
        weight = [1.0] * n
    if sum(1 for w in weight if w) < replicas:
        return
    args = (region, zone, server, weight, pp, replicas, seed, overload)
    try:
        ref = swift_rebalance(*args, compiled=False)
    except Exception as exc:  # a layout Swift's builder refuses: the compiled one must too
        with pytest.raises(type(exc)):
            swift_rebalance(*args)
        return
    assert np.array_equal(swift_rebalance(*args), ref)


@pytest.mark.skipif(compiled_function("py_shuffle") is None,
                    reason="needs the compiled engine (make)")
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**40), n=st.sampled_from([0, 1, 2, 3, 623, 624, 625, 5000]),
       before=st.integers(0, 700))
def test_compiled_shuffle_is_pythons(seed, n, before):
    """The engine's shuffle is random.shuffle's permutation, and leaves the generator where
    Python's leaves it (the builder draws the devices' sort keys next)."""
    from storlab.sim.ringbuild import _shuffled

    ref, ours = random.Random(seed), random.Random(seed)
    for g in (ref, ours):
        for _ in range(before):   # any position inside the 624-word block
            g.getrandbits(32)
    want = list(range(n))
    ref.shuffle(want)
    assert list(_shuffled(ours, n, compiled=True)) == want
    assert [ours.randint(0, 0xFFFF) for _ in range(5)] == [ref.randint(0, 0xFFFF)
                                                           for _ in range(5)]


@needs_walk
def test_large_ring_is_placed_as_swift_does():
    """Above the old pure-Python limit (3 x 2**16) 'auto' is Swift's placement: the counts of
    Swift's plan, a device never holds two replicas of a partition, and with 5 zones every
    partition's 3 replicas are in 3 zones (on a 2**15 ring the compiled and reference walks
    are compared whole)."""
    nodes, disks = 40, 6
    node = np.repeat(np.arange(nodes), disks)
    zone = node % 5
    ring = Ring.build(node, zone, np.ones(node.size), 17, 3)
    assert ring.placement == "swift"
    devs = [(0, int(zone[i]), int(node[i]), i) for i in range(node.size)]
    plan = replica_plan(devs, [1.0] * node.size, 1 << 17, 3)
    assert ring.parts_per_device().tolist() == parts_wanted(devs, [1.0] * node.size, plan,
                                                            1 << 17, 3)
    zones = np.sort(zone[ring.r2p2d], axis=0)
    assert np.all(zones[1:] != zones[:-1])
    small = swift_rebalance([0] * node.size, zone.tolist(), node.tolist(), [1.0] * node.size,
                            15, 3, seed=4)
    assert np.array_equal(small, swift_rebalance([0] * node.size, zone.tolist(), node.tolist(),
                                                 [1.0] * node.size, 15, 3, seed=4,
                                                 compiled=False))


# -- regions and zones in the cluster file ----------------------------------------------
def _regions_cluster(**storage: object) -> dict:
    raw = load_raw(EXAMPLES / "small.yaml")
    raw["nodes"] = [raw["nodes"][0],
                    {**raw["nodes"][1], "count": 3, "name": "east", "region": 1,
                     "zone": [1, 2, 3]},
                    {**raw["nodes"][1], "count": 3, "name": "west", "region": 2, "zone": 1}]
    for k, v in storage.items():
        raw["nodes"][1][k] = v
    raw["swift"] = {**raw["swift"], "part_power": 8}
    return raw


def test_regions_and_zones_from_the_cluster_file():
    """Each group's region and zone (one for all nodes, or one per node) reach the ring;
    with 2 regions and 3 replicas every partition has a replica in each region, and the
    east region's two replicas are in two of its zones."""
    model = build_model(parse_cluster(_regions_cluster()))
    ring = model.ring
    per_node = ring.dev_node.size // 6
    assert ring.dev_region.tolist() == [1] * 3 * per_node + [2] * 3 * per_node
    assert ring.dev_zone.tolist() == sum(([z] * per_node for z in (1, 2, 3, 1, 1, 1)), [])
    reg = ring.dev_region[ring.r2p2d]
    assert np.all((reg == 1).any(axis=0) & (reg == 2).any(axis=0))
    east = np.where(reg == 1, ring.dev_zone[ring.r2p2d], -1)
    for part in range(ring.partitions):
        zs = east[:, part][east[:, part] >= 0]
        assert len(set(zs.tolist())) == zs.size


def test_regions_change_the_placement_and_default_is_one_region():
    one = build_model(load_cluster(EXAMPLES / "small.yaml", {"part_power": 8})).ring
    assert set(one.dev_region.tolist()) == {0}
    raw = load_raw(EXAMPLES / "small.yaml")
    raw["nodes"][1]["region"] = [0, 0, 1, 1]
    raw["nodes"][1]["zone"] = [0, 1, 0, 1]
    two = build_model(parse_cluster({**raw, "swift": {**raw["swift"], "part_power": 8}})).ring
    assert two.dev_region.tolist() != one.dev_region.tolist()
    reg = two.dev_region[two.r2p2d]
    assert np.all((reg == 0).any(axis=0) & (reg == 1).any(axis=0))


@pytest.mark.parametrize("change,needle", [
    ({"zone": "rack1"}, "nodes.1.zone: must be a whole number"),
    ({"zone": 1.5}, "nodes.1.zone: must be a whole number"),
    ({"region": [1, "x", 2]}, "nodes.1.region: must be a whole number"),
    ({"zone": [1, 2]}, "zone: 2 values for 3 nodes"),
    ({"region": -1}, "nodes.1.region"),
    ({"region": None}, "nodes.1.region: missing while nodes.2 gives one"),
])
def test_bad_regions_and_zones(change, needle):
    with pytest.raises(SimError, match=needle.replace(".", r"\.")) as err:
        parse_cluster(_regions_cluster(**change), "c.yaml")
    assert "\n" not in str(err.value)


def test_zones_twice_and_proxy_zone_are_refused():
    raw = _regions_cluster()
    raw["swift"]["zones"] = 2
    with pytest.raises(SimError, match="swift.zones: set while node groups give their zones"):
        parse_cluster(raw)
    raw = _regions_cluster()
    raw["nodes"][0]["region"] = 1
    with pytest.raises(SimError, match="nodes.0.region: a proxy group holds no devices"):
        parse_cluster(raw)


def test_bad_zone_exits_2_with_one_line(tmp_path, storlab):
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(_regions_cluster(zone=[1, 2])))
    r = storlab("simulate", path, "--requests", "2000")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "zone: 2 values for 3 nodes" in r.stderr


def test_a_region_down_loses_no_request_where_one_region_loses_many():
    """examples/sim/regions.yaml: with its two regions the east region's three nodes go
    down and every request still finds a replica (each partition keeps one in the west);
    the same six nodes in one region, a zone each, get half their partitions' three
    replicas all on those three nodes (Swift's builder does the same: test_ring_swift), so
    GETs fail."""
    from storlab.sim.run import run_model

    def failed(overrides: dict) -> tuple[int, int]:
        model = build_model(load_cluster(EXAMPLES / "regions.yaml",
                                         {"failed_nodes": 3, **overrides}))
        f = run_model(model, requests=4000).failures[0]
        return f["failed"], f["requests"]

    assert failed({}) == (0, 4000)
    lost, n = failed({"storage.region": None, "storage.zone": None})
    assert 0.2 * n < lost < 0.5 * n

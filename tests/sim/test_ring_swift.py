"""storlab's ring against Swift's own ring code (Debian's python3-swift, run under
/usr/bin/python3 in a subprocess; storlab never imports Swift): the builder's assignments,
a ring file written by swift-ring-builder, get_nodes and get_more_nodes."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest  # noqa: I001

SYSTEM_PYTHON = "/usr/bin/python3"


def swift_available() -> bool:
    if not shutil.which(SYSTEM_PYTHON):
        return False
    out = subprocess.run([SYSTEM_PYTHON, "-c", "import swift.common.ring"], capture_output=True)
    return out.returncode == 0


needs_swift = pytest.mark.skipif(not swift_available(),
                                 reason="Swift (python3-swift) not installed for /usr/bin/python3")

_BUILD = r"""
import json, sys
from swift.common.ring.builder import RingBuilder
spec = json.load(sys.stdin)
b = RingBuilder(spec["part_power"], spec["replicas"], 1)
for i, (reg, z, srv, w) in enumerate(zip(spec["region"], spec["zone"], spec["server"],
                                         spec["weight"])):
    b.add_dev({"id": i, "region": reg, "zone": z, "ip": srv, "port": 6200,
               "device": "d%d" % i, "weight": w})
b.rebalance(seed=spec["seed"])
json.dump({"r2p2d": [list(a) for a in b._replica2part2dev],
           "balance": b.get_balance(), "dispersion": b.dispersion}, sys.stdout)
"""

_NODES = r"""
import json, sys
from swift.common import utils
from swift.common.ring import ring as ringmod
spec = json.load(sys.stdin)
# swift.conf's values, set the way Swift's utils holds them after reading the file.
utils.HASH_PATH_PREFIX = spec["prefix"].encode()
utils.HASH_PATH_SUFFIX = spec["suffix"].encode()
r = ringmod.Ring(spec["file"])
out = {"nodes": [], "more": {}}
for p in spec["paths"]:
    a, c, o = p.lstrip("/").split("/", 2)
    part, nodes = r.get_nodes(a, c, o)
    out["nodes"].append([part, [n["id"] for n in nodes]])
for part in spec["handoff_parts"]:
    out["more"][str(part)] = [n["id"] for n in r.get_more_nodes(part)]
json.dump(out, sys.stdout)
"""


def _run(script: str, spec: dict[str, Any], timeout: float = 600) -> Any:
    out = subprocess.run([SYSTEM_PYTHON, "-c", script], input=json.dumps(spec),
                         capture_output=True, text=True, timeout=timeout)
    if out.returncode:
        raise AssertionError(f"Swift reference failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def swift_build(region, zone, server, weight, part_power: int, replicas: int,
                seed: int) -> dict[str, Any]:
    """Swift's RingBuilder on these devices: r2p2d (lists), balance, dispersion."""
    return _run(_BUILD, {"region": list(region), "zone": list(zone), "server": list(server),
                         "weight": list(weight), "part_power": part_power,
                         "replicas": replicas, "seed": seed})


def swift_nodes(ring_file: str, paths: list[str], handoff_parts: list[int], prefix: str = "",
                suffix: str = "") -> dict[str, Any]:
    """Swift's Ring.get_nodes for each path and get_more_nodes for each partition."""
    return _run(_NODES, {"file": ring_file, "paths": paths, "handoff_parts": handoff_parts,
                         "prefix": prefix, "suffix": suffix})


# ---------------------------------------------------------------------------------------
import gzip  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from storlab.sim.model import build_model  # noqa: E402
from storlab.sim.spec import load_cluster, parse_cluster  # noqa: E402
from storlab.sim.ring import Ring, hash_partition  # noqa: E402
from storlab.sim.ringbuild import swift_rebalance  # noqa: E402
from storlab.sim.ringfile import RingFileError, read_ring_file, ring_from_file  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def _layout(model) -> tuple[list, list, list, list]:
    """A built cluster's devices as Swift would see them (one region; IPs that sort as the
    node numbers do)."""
    ring = model.ring
    n = ring.dev_node.size
    return ([1] * n, ring.dev_zone.tolist(), [f"n{x:06d}" for x in ring.dev_node.tolist()],
            ring.dev_weight.tolist())


@needs_swift
@pytest.mark.parametrize("nodes,zones,pp,replicas,seed", [
    (4, None, 10, 3, 0),    # small.yaml's layout: one zone per storage node
    (1, None, 10, 3, 1),    # one storage node: Swift spreads over its disks only
    (2, None, 10, 3, 2),    # two nodes hold 3 replicas: one node holds two, on two disks
    (6, 3, 9, 2, 3),
])
def test_built_ring_is_swifts(nodes, zones, pp, replicas, seed):
    overrides = {"nodes": nodes, "part_power": pp, "replicas": replicas, "swift.ring_seed": seed}
    if zones:
        overrides["zones"] = zones
    spec = load_cluster(EXAMPLES / "small.yaml", overrides)
    model = build_model(spec)
    ref = swift_build(*_layout(model), pp, replicas, seed)
    assert np.array_equal(model.ring.r2p2d, np.asarray(ref["r2p2d"]))
    assert model.ring.placement == "swift"


@needs_swift
def test_cluster700_layout_scaled_down_is_swifts():
    """cluster700.yaml's leaf-spine layout (a zone per rack of 20 nodes), 60 storage nodes
    instead of 650 so that Swift's pure-Python builder answers in seconds."""
    spec = load_cluster(EXAMPLES / "cluster700.yaml", {"nodes": 60, "proxies": 5,
                                                       "part_power": 11})
    model = build_model(spec)
    assert len(set(model.ring.dev_zone.tolist())) == 4 and model.ring.placement == "swift"
    ref = swift_build(*_layout(model), 11, 3, 0)
    assert np.array_equal(model.ring.r2p2d, np.asarray(ref["r2p2d"]))


@needs_swift
def test_regions_and_zones_of_the_cluster_file_match_swift(tmp_path):
    """Regions and zones given per node group in the cluster file: the built ring is the
    one Swift's builder makes for devices in those regions and zones."""
    cluster = tmp_path / "regions.yaml"
    text = (EXAMPLES / "small.yaml").read_text().replace(
        "    disks: {type: hdd7200, count: 12}",
        "    disks: {type: hdd7200, count: 4}\n    region: [1, 1, 2, 2, 2]\n"
        "    zone: [1, 2, 1, 1, 2]").replace("    count: 4\n", "    count: 5\n")
    cluster.write_text(text)
    model = build_model(load_cluster(cluster, {"part_power": 9}))
    ring = model.ring
    assert sorted(set(ring.dev_region.tolist())) == [1, 2]
    _, zone, server, weight = _layout(model)
    ref = swift_build(ring.dev_region.tolist(), zone, server, weight, 9, 3, 0)
    assert np.array_equal(ring.r2p2d, np.asarray(ref["r2p2d"]))


@needs_swift
def test_unequal_weights_and_zones_match_swift():
    rng = np.random.default_rng(5)
    node = np.repeat(np.arange(7), [3, 1, 4, 2, 2, 5, 1])
    zone = (node % 3).tolist()
    weight = rng.choice([1.0, 2.0, 4.0], node.size).tolist()
    server = [f"n{x:06d}" for x in node.tolist()]
    region = [1 + (x >= 5) for x in node.tolist()]
    ref = swift_build(region, zone, server, weight, 10, 3, 11)
    mine = swift_rebalance(region, zone, server, weight, 10, 3, 11)
    assert np.array_equal(mine, np.asarray(ref["r2p2d"]))
    # A lone disk beside a 3-disk server in one zone: Swift's greedy leaves the lone disk
    # a third short of its weight's share, and so do we.
    args = ([1] * 4, [0] * 4, ["n0", "n1", "n1", "n1"], [0.5] * 4)
    ref = np.asarray(swift_build(*args, 8, 3, 0)["r2p2d"])
    mine = swift_rebalance(*args, 8, 3, 0)
    assert np.array_equal(mine, ref) and np.bincount(mine.ravel())[0] == 128


@needs_swift
def test_fast_placement_keeps_swifts_counts_and_dispersion():
    """Above SWIFT_PLACEMENT_LIMIT the layout is storlab's own: per-device counts equal
    Swift's and no partition is less dispersed than Swift's plan allows."""
    spec = parse_cluster({
        "nodes": [{"role": "proxy", "count": 1},
                  {"role": "storage", "count": 9, "disks": {"type": "hdd7200", "count": 4}}],
        "swift": {"part_power": 9, "zones": 3}, "ring": {"placement": "fast"}})
    model = build_model(spec)
    ref = np.asarray(swift_build(*_layout(model), 9, 3, 0)["r2p2d"])
    fast = model.ring.r2p2d
    n = model.ring.dev_node.size
    assert np.array_equal(np.bincount(fast.ravel(), minlength=n),
                          np.bincount(ref.ravel(), minlength=n))
    for key in (model.ring.dev_zone, model.ring.dev_node, np.arange(n)):
        for table in (fast, ref):
            k = np.sort(key[table], axis=0)
            assert not np.any(k[1:] == k[:-1])  # 3 zones, 3 replicas: one per zone, as Swift


def _write_ring(tmp: Path, part_power: int = 8) -> Path:
    """A ring built by swift-ring-builder: 2 zones x 2 servers x 3 devices, 3 replicas."""
    b = tmp / "object.builder"
    run = lambda *a: subprocess.run(["swift-ring-builder", str(b), *a],  # noqa: E731
                                    capture_output=True, text=True)
    out = run("create", str(part_power), "3", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    devs = []
    for server in range(4):
        for d in range(3):
            devs += [f"r1z{server % 2 + 1}-10.0.0.{server + 1}:6200/sd{d}", "100" if d else "50"]
    out = run("add", *devs)
    assert out.returncode == 0, out.stdout + out.stderr
    out = run("rebalance", "7")
    assert out.returncode in (0, 1), out.stdout + out.stderr  # 1: a balance warning
    return tmp / "object.ring.gz"


@pytest.fixture(scope="module")
def ring_file(tmp_path_factory) -> Path:
    return _write_ring(tmp_path_factory.mktemp("ring"))


needs_ring_builder = pytest.mark.skipif(not shutil.which("swift-ring-builder"),
                                        reason="swift-ring-builder not installed")


@needs_swift
@needs_ring_builder
def test_ring_file_routes_as_swift_get_nodes(ring_file):
    rf = read_ring_file(ring_file)
    assert rf.part_power == 8 and rf.replicas == 3 and len(rf.used_devices()) == 12
    paths = [f"/AUTH_test/c{i % 7}/o{i}" for i in range(2000)]
    prefix, suffix = "pre", "changeme"
    ref = swift_nodes(str(ring_file), paths, list(range(0, 256, 5)), prefix, suffix)
    parts = hash_partition(paths, rf.part_power, prefix.encode(), suffix.encode())
    assert parts.tolist() == [p for p, _ in ref["nodes"]]
    node = np.repeat(np.arange(4), 3)     # devices were added server by server: ids 0..11
    ring = ring_from_file(ring_file, node)
    assert [ring.get_part_nodes(int(p)) for p in parts] == [n for _, n in ref["nodes"]]
    for part, more in ref["more"].items():
        assert ring.handoffs(int(part)) == more


@needs_swift
@needs_ring_builder
def test_cluster_file_reads_a_ring_file(ring_file, tmp_path):
    shutil.copy(ring_file, tmp_path / "object.ring.gz")  # found beside the cluster file
    (tmp_path / "c.yaml").write_text(
        "nodes:\n  - {role: proxy, count: 1}\n"
        "  - {role: storage, count: 4, disks: {type: hdd7200, count: 3}}\n"
        "ring: {file: object.ring.gz, hash_path_suffix: changeme}\n"
        "workload: {requests: 2000}\n")
    model = build_model(load_cluster(tmp_path / "c.yaml"))
    assert model.ring.part_power == 8 and model.ring.suffix == b"changeme"
    assert np.array_equal(model.ring.r2p2d, read_ring_file(ring_file).r2p2d)
    with pytest.raises(Exception, match="4 servers"):
        build_model(load_cluster(tmp_path / "c.yaml", {"nodes": 3}))


def test_ring_file_errors(tmp_path):
    bad = tmp_path / "x.ring.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(RingFileError, match="not a gzipped"):
        read_ring_file(bad)
    with gzip.open(bad, "wb") as f:
        f.write(b"PICKLE")
    with pytest.raises(RingFileError, match="no R1NG"):
        read_ring_file(bad)
    with pytest.raises(RingFileError, match="not found"):
        read_ring_file(tmp_path / "none.ring.gz")

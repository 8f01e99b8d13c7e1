"""Failed devices and nodes against hand-computed cases: where requests go (Swift's order),
quorum writes, availability, latency."""

import numpy as np
import pytest

from storlab.errors import SimError
from storlab.sim.model import build_model, draw_requests
from storlab.sim.ops import GET, PUT
from storlab.sim.routes import build_routes
from storlab.sim.run import run_model
from storlab.sim.spec import apply_overrides, parse_cluster
from storlab.sim.failures import parse_time, shortcut_devices

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)


def _spec(storage: int = 3, disks: int = 1, mix=None, clients: int = 1, **extra):
    raw = {"nodes": [{"role": "proxy", "count": 1},
                     {"role": "storage", "count": storage, "name": "store",
                      "disks": {"type": "hdd7200", "count": disks}}],
           "swift": {"part_power": 6, "replicas": 3, "write_quorum": 2},
           "workload": {"mix": mix or {"GET": 1.0}, "object_size": "64KiB", "clients": clients,
                        "requests": 3000, "warmup": 0.0, "objects": 2000}}
    return parse_cluster(apply_overrides(raw, extra) if extra else raw)


def _disk_visits(model, routes):
    disk = np.full(model.stations.kind.size, -1)
    disk[model.dev_station] = np.arange(model.dev_station.size)
    d = disk[routes.station]
    return np.bincount(d[d >= 0], minlength=model.dev_station.size)


def test_one_failed_device_gets_go_to_the_other_replicas_at_the_same_latency():
    """3 nodes x 1 disk, 3 replicas, one client (no queueing), identical nodes: with disk 0
    down every GET reads disk 1 or 2, half each, none fails, and each takes exactly as
    long as before (the same visits on an identical node)."""
    base = run_model(build_model(_spec()), backend="python")
    model = build_model(_spec(failures=[{"device": 0}]))
    req = draw_requests(model, 3000)
    routes = build_routes(model, req)
    visits = _disk_visits(model, routes)
    assert visits[0] == 0 and visits.sum() == 3000
    assert abs(visits[1] - visits[2]) < 4 * np.sqrt(3000)  # a fair coin per request
    rep = run_model(model, backend="python")
    row = rep.ops.set_index("op").loc["GET"]
    assert row["availability"] == 1.0 and row["failed"] == 0
    assert row["lat_mean_ms"] == pytest.approx(base.ops.set_index("op").loc["GET", "lat_mean_ms"],
                                               rel=1e-9)


def test_put_reaches_quorum_two_of_three_without_a_handoff():
    """3 devices, 3 replicas, disk 0 down: no handoff exists, so each PUT writes 2 replicas
    and succeeds on both (quorum 2). One client on identical nodes: the proxy's NIC sends
    2 copies at once instead of 3 (processor sharing), so a PUT is faster by exactly one
    copy's time on the wire: 64 KiB / (10 Gb/s x 0.94 payload efficiency)."""
    base = run_model(build_model(_spec(mix={"PUT": 1.0})), backend="python")
    model = build_model(_spec(mix={"PUT": 1.0}, failures=[{"device": 0}]))
    rep = run_model(model, backend="python")
    row = rep.ops.set_index("op").loc["PUT"]
    assert row["availability"] == 1.0
    copy_ms = 65536 / (10e9 / 8 * 0.94) * 1e3
    assert row["lat_mean_ms"] == pytest.approx(
        base.ops.set_index("op").loc["PUT", "lat_mean_ms"] - copy_ms, rel=1e-9)
    routes = build_routes(model, draw_requests(model, 3000))
    visits = _disk_visits(model, routes)
    assert visits.tolist() == [0, 3000, 3000]


def test_two_failed_devices_fail_every_put_and_no_get():
    """2 of 3 disks down: a GET still has one replica; a PUT reaches 1 < quorum 2 and fails.
    Availability is exactly the GET share of the requests."""
    model = build_model(_spec(mix={"GET": 0.5, "PUT": 0.5}, failed_disks=2))
    req = draw_requests(model, 3000)
    assert req.ok.tolist() == (req.op == GET).tolist()
    rep = run_model(model, backend="python")
    ops = rep.ops.set_index("op")
    assert ops.loc["PUT", "availability"] == 0.0
    assert ops.loc["GET", "availability"] == 1.0
    assert ops.loc["ALL", "availability"] == pytest.approx(np.mean(req.op == GET))
    # throughput counts successes, in the steady-state window (warm-up and drain left out)
    assert ops.loc["ALL", "count"] == ops.loc["GET", "count"]
    assert 0.9 * np.sum(req.op == GET) < ops.loc["GET", "count"] <= np.sum(req.op == GET)
    assert any("failed" in n for n in rep.notes)


def test_all_replicas_down_fails_gets_quickly():
    """4 nodes x 1 disk, 3 nodes down: each partition has replicas on 3 of the 4 disks, so
    a GET succeeds exactly when its partition uses the live disk (3 partitions in 4); the
    others fail, each with its proxy's CPU visit alone."""
    model = build_model(_spec(storage=4, failed_nodes=3))
    req = draw_requests(model, 2000)
    on_live = (req.devs == 3).any(axis=1)
    assert req.ok.tolist() == on_live.tolist()
    assert np.bincount(model.ring.r2p2d.ravel()).tolist() == [48] * 4   # 64 parts x 3 / 4
    assert abs(on_live.mean() - 0.75) < 0.06
    routes = build_routes(model, req)
    bad = np.flatnonzero(~req.ok)
    for i in bad[:50]:
        s0, s1 = routes.step_ptr[i], routes.step_ptr[i + 1]
        assert s1 - s0 == 1
        v0 = routes.visit_ptr[routes.branch_ptr[s0]]
        v1 = routes.visit_ptr[routes.branch_ptr[s1]]
        assert routes.station[v0:v1].tolist() == [model.node_cpu[0]]
    with pytest.raises(SimError, match="every request fails"):
        draw_requests(build_model(_spec(failed_nodes=3)), 100)


def test_writes_go_to_handoffs_in_swifts_order():
    """6 nodes x 2 disks: a PUT whose primaries include the failed disk writes its replica
    to the first live device of `get_more_nodes`; the other replicas stay."""
    model = build_model(_spec(storage=6, disks=2, mix={"PUT": 1.0},
                              failures=[{"device": "store-2/disk4"}]))
    req = draw_requests(model, 3000)
    ring = model.ring
    hit = 0
    for i in range(len(req)):
        prim = ring.r2p2d[:, req.part[i]].tolist()
        if 4 in prim:
            hit += 1
            want = [d if d != 4 else ring.handoffs(int(req.part[i]))[0] for d in prim]
            assert req.devs[i].tolist() == want
        else:
            assert req.devs[i].tolist() == prim
    assert hit > 100 and req.ok.all()
    assert _disk_visits(model, build_routes(model, req))[4] == 0


def test_failed_node_moves_its_proxy_requests_and_disks():
    raw = {"nodes": [{"role": "both", "count": 4, "name": "n",
                      "disks": {"type": "hdd7200", "count": 2}}],
           "swift": {"part_power": 6}, "workload": {"requests": 2000, "warmup": 0.0},
           "failures": [{"node": "n-1"}]}
    model = build_model(parse_cluster(raw))
    req = draw_requests(model, 2000)
    assert not np.any(req.proxy == 1) and req.ok.all()
    assert _disk_visits(model, build_routes(model, req))[[2, 3]].sum() == 0


def test_failure_window_in_an_open_loop():
    """Open loop at 100 req/s for 30 s; disks 0 and 1 of 3 down from 10 s to 20 s: GETs
    arriving then read disk 2, PUTs arriving then fail (1 < quorum 2), everything else is
    as without failures; availability is the share of PUTs outside the window."""
    window = [{"device": 0, "at": "10s", "until": "20s"},
              {"device": 1, "at": 10, "until": 20, "rebuild_mb_s": 30}]
    spec = _spec(mix={"GET": 0.5, "PUT": 0.5}, failures=window, **{"workload.rate": 100,
                 "workload.clients": None})
    model = build_model(spec)
    plain = draw_requests(build_model(_spec(mix={"GET": 0.5, "PUT": 0.5},
                                            **{"workload.rate": 100})), 3000)
    req = draw_requests(model, 3000)
    inside = (req.arrivals >= 10) & (req.arrivals < 20)
    assert 800 < inside.sum() < 1200
    get = req.op == GET
    assert np.all(req.devs[get & inside, req.read_replica[get & inside]] == 2)
    assert np.array_equal(req.read_replica[~inside], plain.read_replica[~inside])
    assert req.ok.tolist() == (~inside | get).tolist()
    routes = build_routes(model, req)
    rep = run_model(model, backend="python", requests=3000)
    ops = rep.ops.set_index("op")
    assert ops.loc["ALL", "availability"] == pytest.approx(1 - np.mean(inside & (req.op == PUT)))
    assert routes.n_requests == 3000


def test_rebuild_slows_the_surviving_peers():
    a = run_model(build_model(_spec(storage=5, failed_disks=1)), backend="python")
    b = run_model(build_model(_spec(storage=5, failed_disks=1, rebuild_mb_s=60)),
                  backend="python")
    # GETs of the failed disk's partitions read its peers, now 1/(1 - 60/MB_s) slower
    assert b.ops.iloc[0]["lat_mean_ms"] > a.ops.iloc[0]["lat_mean_ms"]


def test_no_failure_changes_nothing():
    model = build_model(_spec(mix={"GET": 0.7, "PUT": 0.3}))
    req = draw_requests(model, 1000)
    assert req.ok is None


def test_shortcut_spreads_over_nodes():
    model = build_model(_spec(storage=3, disks=2))
    assert shortcut_devices(model, 4) == [0, 2, 4, 1]


@pytest.mark.parametrize("extra,match", [
    ({"failures": [{"device": 99}]}, "device 99 is not a device"),
    ({"failures": [{"node": "nope"}]}, "node 'nope' is not a node"),
    ({"failed_disks": 9}, "failed_disks 9 > the cluster's 3 disks"),
    ({"failed_nodes": 4}, "failed_nodes 4 > the cluster's 3 storage nodes"),
])
def test_bad_failures_name_what_is_wrong(extra, match):
    with pytest.raises(SimError, match=match):
        draw_requests(build_model(_spec(**extra)), 10)


def test_bad_failure_fields():
    with pytest.raises(SimError, match="either a device or a node"):
        _spec(failures=[{"device": 1, "node": 1}])
    with pytest.raises(SimError, match="not after at"):
        _spec(failures=[{"device": 1, "at": "10s", "until": 5}])
    assert parse_time("250ms") == 0.25 and parse_time("2m") == 120.0
    with pytest.raises(ValueError):
        parse_time("soon")


# ---------------------------------------------------------------------------------------
# as a user runs it (the `storlab` fixture of tests/conftest.py)
SMALL = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples/sim/small.yaml"


def test_sweep_failed_disks_reports_availability(storlab, tmp_path):
    import json
    # In a fresh directory: a sweep resumes the store it finds in ./simulate-sweep.
    r = storlab("simulate", SMALL, "--set", "object_size=16KiB", "--requests", 5000,
                "--sweep", "failed_disks=0,4", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert [int(x["failed_disks"]) for x in rows] == [0, 4]
    assert [x["availability"] for x in rows] == [1.0, 1.0]  # 4 zones: a replica survives
    assert rows[1]["ops_s"] < 0.9 * rows[0]["ops_s"]        # 4 disks fewer and their GETs re-routed


@pytest.mark.parametrize("args,needle", [
    (["--analytic", "--set", "failed_disks=1"], "--analytic does not model failures"),
    (["--set", "failed_disks=-1"], "failed_disks"),
    (["--set", "ring.file=nope.ring.gz"], "nope.ring.gz: ring file not found"),
    (["--set", "ring.placement=exact"], "ring.placement"),
])
def test_bad_failure_and_ring_input_exits_2_with_one_line(storlab, args, needle):
    r = storlab("simulate", SMALL, *args)
    assert r.returncode == 2, r.stdout
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def _closed_window_run(backend: str = "python", **extra):
    """A closed loop of 6,000 requests (8 clients, 70 % GET) on 4 nodes x 1 disk, disk 0 down
    for the middle third of the run's simulated time (measured without the failure first);
    returns (model, settled requests, routes, result, window)."""
    from storlab.sim import engine
    from storlab.sim.failures import settle

    kw = dict(storage=4, mix={"GET": 0.7, "PUT": 0.3}, clients=8, **extra)
    n = 6000
    span = run_model(build_model(_spec(**kw)), backend=backend, requests=n).sim_time
    at, until = span / 3, 2 * span / 3
    model = build_model(_spec(failures=[{"device": 0, "at": at, "until": until}], **kw))
    req = draw_requests(model, n)
    assert model.extra["failures"].provisional
    kept = {}

    def once(r):
        kept["routes"] = build_routes(model, r)
        return engine.simulate(model.stations, kept["routes"], backend=backend, clients=8,
                               think=r.think)

    req, res = settle(model, req, once)
    return model, req, kept["routes"], res, (at, until)


def test_closed_loop_failure_window_settles_on_simulated_start_times():
    """Disk 0 down for the middle third of a closed loop: once settled, no request that
    starts inside the window visits disk 0, requests before and after it do; every request
    met the failure state of its simulated start (the fixed point holds); throughput drops
    inside the window (3 disks serve 4 disks' load) and recovers after it."""
    from storlab.sim.failures import failure_plan

    model, req, routes, res, (at, until) = _closed_window_run()
    plan = model.extra["failures"]
    assert plan.passes >= 2
    start = np.asarray(res.start)
    assert np.array_equal(failure_plan(model, req.drawn, start).epoch, plan.epoch)
    inside = (start >= at) & (start < until)
    disk = np.full(model.stations.kind.size, -1)
    disk[model.dev_station] = np.arange(model.dev_station.size)
    n_v = np.diff(routes.visit_ptr[routes.branch_ptr[routes.step_ptr]])
    v_req = np.repeat(np.arange(len(req)), n_v)
    d = disk[routes.station]

    def counts(sel):
        v = sel[v_req] & (d >= 0)
        return np.bincount(d[v], minlength=4)

    before, during, after = counts(start < at), counts(inside), counts(start >= until)
    assert during[0] == 0 and during[1:].min() > 200
    assert before[0] > 200 and after[0] > 200
    assert req.ok.all()     # 3 live disks: every GET has a replica, every PUT a quorum
    fin = np.asarray(res.finish)

    def rate(a, b):
        return np.sum((fin >= a) & (fin < b)) / (b - a)

    third = (until - at)
    x_before = rate(0.2 * third, at)
    x_during = rate(at + 0.2 * third, until)
    x_after = rate(until + 0.2 * third, min(until + third, float(fin.max())) * 0.97)
    assert x_during < 0.92 * x_before
    assert x_after == pytest.approx(x_before, rel=0.10)


def test_closed_loop_window_in_the_report():
    """run_model settles a closed loop with a failure window and its report says what was
    down, when, how requests were placed and how many it re-routed."""
    spec = _spec(storage=4, mix={"GET": 0.7, "PUT": 0.3}, clients=8,
                 failures=[{"device": "store-1/disk1", "at": "2s", "until": "4s"}])
    rep = run_model(build_model(spec), backend="python", requests=3000)
    (f,) = rep.failures
    assert f["down"] == ["store-1/disk1"] and (f["from_s"], f["to_s"]) == (2.0, 4.0)
    assert "closed loop: settled after" in f["placed"]
    assert 0 < f["rerouted"] < f["requests"] and f["failed"] == 0
    # 3 disks serve while one of 4 is down: fewer requests per second, each slower
    assert f["ops_s"] < 0.95 * f["ops_s_outside"]
    assert f["lat_mean_ms"] > f["lat_mean_ms_outside"]
    assert rep.to_dict()["failures"] == rep.failures
    whole = run_model(build_model(_spec(failed_disks=1)), backend="python", requests=500)
    assert whole.failures[0]["placed"] == "whole run" and whole.failures[0]["to_s"] is None


def test_keyed_service_draws_belong_to_their_request():
    """Exponential service times for the closed-loop fixed point: a request's draws depend
    on the request and the visit's place in its route only (another request's route may
    change between passes), and they are Exponential(1)."""
    from storlab.sim.run import keyed_exponentials

    model = build_model(_spec(storage=4, mix={"GET": 0.5, "PUT": 0.5}))
    req = draw_requests(model, 4000)
    a = keyed_exponentials(build_routes(model, req), seed=1)
    assert a.mean() == pytest.approx(1.0, abs=0.03) and a.var() == pytest.approx(1.0, abs=0.1)
    # request 0 becomes another operation (a route of another length): every other
    # request keeps its own draws, visit for visit
    import dataclasses
    other = dataclasses.replace(req, op=req.op.copy())
    other.op[0] = PUT if req.op[0] == GET else GET
    ra, rb = build_routes(model, req), build_routes(model, other)
    b = keyed_exponentials(rb, seed=1)

    def from_request_1(routes):
        return int(routes.visit_ptr[routes.branch_ptr[routes.step_ptr[1]]])

    assert from_request_1(ra) != from_request_1(rb)
    assert np.array_equal(a[from_request_1(ra):], b[from_request_1(rb):])
    assert not np.array_equal(a, keyed_exponentials(ra, seed=2))


def test_failure_windows_are_cut_at_the_end_of_the_run():
    """A window declared past the run's end is described up to the end, and one starting
    after it is a note, not a window that 0 requests met (nor a plot 3x too wide)."""
    span = run_model(build_model(_spec(clients=4)), backend="python").sim_time
    model = build_model(_spec(clients=4, failures=[
        {"device": 0, "at": f"{span / 2}s", "until": f"{span * 3}s"},
        {"device": 1, "at": f"{span * 4}s"}]))
    rep = run_model(model, backend="python")
    assert len(rep.failures) == 1
    f = rep.failures[0]
    assert f["from_s"] == pytest.approx(span / 2) and f["to_s"] is None
    assert any("comes after the run's end" in n for n in rep.notes)
    fig = rep.plot()
    assert fig.axes[0].get_xlim()[1] <= rep.sim_time * 1.1


def test_sweep_says_when_points_see_different_outage_shares(storlab, tmp_path):
    """outage.yaml's node is down from 4 s to 8 s: 16 clients run longer than 64 do, so
    the same failure covers a different share of each point's measured window."""
    import json
    outage = SMALL.parent / "outage.yaml"
    r = storlab("simulate", outage, "--requests", 20000, "--sweep", "clients=16,64",
                "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    share = [row["down_share"] for row in doc["rows"]]
    assert all(0 < s < 1 for s in share) and share[0] > share[1] + 0.05
    assert len(doc["notes"]) == 1 and "different outage shares" in doc["notes"][0]
    text = storlab("simulate", outage, "--requests", 20000, "--sweep", "clients=16,64",
                   cwd=tmp_path)  # resumed from the same sweep directory
    assert "note: the failure windows cover" in " ".join(text.stdout.split())

"""A run streamed block by block (issue 16, speed): the compiled engine fed its routes in
chunks gives exactly the one-call result, the report does not depend on the chunking, the
latency percentiles keep their stated error bound, and memory does not grow with the run."""

from pathlib import Path

import numpy as np
import pytest

from storlab.sim import engine, stream
from storlab.sim.model import build_model, draw_requests
from storlab.sim.routes import build_routes
from storlab.sim.spec import apply_overrides, load_raw, parse_cluster
from storlab.sim.summary import summarise, window_marks
from storlab.sim.model import DRAW_BLOCK, iter_requests
from storlab.sim.summary import LAT_REL_ERR, hist_percentile, lat_bin

SMALL = Path(__file__).resolve().parents[2] / "examples" / "sim" / "small.yaml"

pytestmark = pytest.mark.skipif(not engine.compiled(), reason="needs the compiled engine")


def model(**ov):
    return build_model(parse_cluster(apply_overrides(load_raw(SMALL), ov)))


def _slice_routes(r: engine.Routes, a: int, b: int) -> engine.Routes:
    """Requests a:b of whole-run routes, with chunk-local offsets (as the builder makes)."""
    s0, s1 = r.step_ptr[a], r.step_ptr[b]
    b0, b1 = r.branch_ptr[s0], r.branch_ptr[s1]
    v0, v1 = r.visit_ptr[b0], r.visit_ptr[b1]
    return engine.Routes(step_ptr=r.step_ptr[a:b + 1] - s0, branch_ptr=r.branch_ptr[s0:s1 + 1] - b0,
                         quorum=r.quorum[s0:s1], visit_ptr=r.visit_ptr[b0:b1 + 1] - v0,
                         station=r.station[v0:v1], demand=r.demand[v0:v1])


@pytest.mark.parametrize("loop", ["closed", "open"])
@pytest.mark.parametrize("chunk", [1, 777, 5000])
def test_stream_equals_one_call_bit_for_bit(loop, chunk):
    """Every request's arrival and finish, every station integral and snapshot: identical
    (==, not approx) whatever the chunk size; HOLD pools, quorum forks, PS and FCFS all in."""
    ov = {"requests": 5000, "clients": 200} if loop == "closed" else {"requests": 5000,
                                                                      "rate": 2000}
    m = model(**ov, service_times="exponential")
    n = 5000
    req = draw_requests(m, n)
    routes = build_routes(m, req)
    routes.demand *= stream.block_service_draws(m, routes)
    kw = dict(warmup=500, marks=window_marks(n))
    loop_kw = {"clients": 200} if loop == "closed" else {}
    whole = engine.simulate(m.stations, routes, **kw, **loop_kw,
                            **({"think": req.think} if loop == "closed"
                               else {"arrivals": req.arrivals}))
    s = engine.Stream(m.stations, n, clients=loop_kw.get("clients"), **kw)
    start, finish = np.full(n, np.nan), np.full(n, np.nan)
    for a in range(0, n, chunk):
        b = min(a + chunk, n)
        idx, st, fi = s.feed(_slice_routes(routes, a, b), think=req.think[a:b],
                             arrivals=None if loop == "closed" else req.arrivals[a:b])
        assert np.all(np.isnan(finish[idx]))            # each request reported once
        start[idx], finish[idx] = st, fi
    res = s.finish()
    assert np.array_equal(start, whole.start) and np.array_equal(finish, whole.finish)
    for f in ("busy", "area", "completions", "residence", "snap_t", "snap_busy", "snap_area"):
        assert np.array_equal(getattr(res, f), getattr(whole, f)), f
    assert (res.events, res.sim_time, res.stats_start) == (whole.events, whole.sim_time,
                                                          whole.stats_start)


def test_stream_refuses_misuse():
    m = model()
    s = engine.Stream(m.stations, 10, clients=4)
    with pytest.raises(ValueError, match="fed 10 of|after 0 of 10"):
        s.finish()
    req = draw_requests(m, 20)
    with pytest.raises(ValueError, match="more than the 10 announced"):
        s.feed(build_routes(m, req), think=req.think)
    five = draw_requests(m, 5)
    with pytest.raises(ValueError, match="arrivals"):      # a closed loop takes none
        s.feed(build_routes(m, five), arrivals=np.arange(5.0), think=0.0)


def test_report_does_not_depend_on_the_chunking(monkeypatch):
    """run_stream with feed chunks of 16,384 and of 3,001 requests, and the whole run
    summarised at once: the same counts, throughput, percentiles and utilisations exactly;
    summed latencies to rounding (they are added in another order)."""
    n = 70_000          # two draw blocks
    m = model(requests=n, clients=256, object_size="64KiB")
    a = stream.run_stream(m, n)
    monkeypatch.setattr(stream, "FEED_CHUNK", 3001)
    b = stream.run_stream(model(requests=n, clients=256, object_size="64KiB"), n)
    m2 = model(requests=n, clients=256, object_size="64KiB")
    req = draw_requests(m2, n)
    res = engine.simulate(m2.stations, build_routes(m2, req), clients=256, think=req.think,
                          warmup=int(m2.spec.workload.warmup * n), marks=window_marks(n, 256))
    c = summarise(m2, req, res)
    for other in (b, c):
        for col in ("op", "count", "ops_s", "mb_s", "lat_p50_ms", "lat_p95_ms", "lat_p99_ms",
                    "ops_s_ci95"):
            assert a.ops[col].tolist() == other.ops[col].tolist(), col
        assert np.allclose(a.ops["lat_mean_ms"], other.ops["lat_mean_ms"], rtol=1e-12, atol=0)
        assert a.util.equals(other.util) and a.window == other.window
        assert a.events == other.events and a.sim_time == other.sim_time
        assert a.littles_law_system == pytest.approx(other.littles_law_system, abs=1e-9)


def test_draw_blocks_join_to_the_whole_draw():
    m = model(rate=500.0)    # open loop: arrival times carried from block to block
    n = DRAW_BLOCK + 1234
    blocks = list(iter_requests(m, n))
    whole = draw_requests(m, n)
    assert [len(b) for b in blocks] == [DRAW_BLOCK, 1234]
    for f in ("op", "size", "proxy", "devs", "read_replica", "think", "arrivals"):
        assert np.array_equal(np.concatenate([getattr(b, f) for b in blocks]),
                              getattr(whole, f)), f
    assert np.all(np.diff(whole.arrivals) > 0)
    # The first block is what a run of exactly that many requests draws.
    first = draw_requests(m, DRAW_BLOCK)
    assert np.array_equal(first.op, whole.op[:DRAW_BLOCK])


def test_percentiles_within_the_stated_bound():
    rng = np.random.default_rng(3)
    for lat in (rng.lognormal(-4, 1.5, 20_001), rng.exponential(0.01, 7),
                np.r_[np.zeros(5), rng.uniform(1e-3, 2e-3, 50)]):
        h = np.bincount(lat_bin(lat), minlength=int(lat_bin(np.array([1e6]))[0]) + 1)
        for q in (0, 1, 50, 95, 99, 99.9, 100):
            exact = float(np.percentile(lat, q))
            got = hist_percentile(h, q)
            assert abs(got - exact) <= LAT_REL_ERR * exact + 1e-9, (q, got, exact)


def _held_max(n: int, chunk: int) -> int:
    """Most requests the engine held at once over a run of n requests fed in chunks."""
    m = model(requests=n, clients=256, object_size="64KiB")
    s = engine.Stream(m.stations, n, clients=256, warmup=0, marks=window_marks(n))
    most = 0
    for req in iter_requests(m, n):
        for a in range(0, len(req), chunk):
            sub = stream.slice_requests(req, a, min(a + chunk, len(req)))
            s.feed(build_routes(m, sub), think=sub.think)
            most = max(most, s.held_requests)
    s.finish()
    return most


def test_engine_memory_does_not_grow_with_requests():
    """The engine holds the requests in flight and the last chunk, not the run: the most
    it held over 20,000 requests and over 160,000 is the same to 20 %."""
    short, long = _held_max(20_000, 2000), _held_max(160_000, 2000)
    assert long <= 1.2 * short
    assert long < 20_000


def test_streamed_run_peak_memory_is_flat():
    """tracemalloc's peak (numpy's buffers included) over a streamed run of 140,000
    requests is within 20 % of one of 70,000: the per-request arrays are gone."""
    import tracemalloc

    def peak(n):
        m = model(requests=n, clients=256, object_size="64KiB")
        tracemalloc.start()
        stream.run_stream(m, n)
        p = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return p

    peak(2000)                                      # imports and caches out of the way
    a, b = peak(70_000), peak(140_000)
    assert b <= 1.2 * a, (a, b)


def _whole_run(m, monkeypatch):
    """run_model on the whole-run path (the one it takes without the compiled engine's
    stream; the engine's one-call `simulate` still runs it)."""
    from storlab.sim import run

    with monkeypatch.context() as mp:
        mp.setattr(engine, "compiled", lambda: False)
        return run.run_model(m)


@pytest.mark.parametrize("ov", [
    # Whole-run failures in a closed loop over two draw blocks; with one replica, GETs of
    # the dead disk's objects fail (no other copy): availability < 1.
    {"failed_disks": 1, "replicas": 1, "write_quorum": 1, "requests": 70_000, "clients": 64,
     "object_size": "16KiB", "mix": {"GET": 0.7, "PUT": 0.3}},
    # An open loop's node outage from 1 s to 2 s (windows by arrival time).
    {"failures": [{"node": "storage1-1", "at": 1, "until": 2}], "rate": 1500,
     "requests": 6000, "object_size": "16KiB"},
    # A closed loop's outage over two draw blocks, exponential service: settled by passes.
    {"failures": [{"node": "storage1-1", "at": 4, "until": 8}], "requests": 70_000,
     "clients": 64, "think_ms": 0, "object_size": "16KiB", "service_times": "exponential"}])
def test_failures_stream_like_the_whole_run(ov, monkeypatch):
    """A run with failures streams (flat memory; a closed loop's windows: pass by pass) and
    reports what the whole-run path reports for it: same counts, availability and failure
    windows; summed latencies to rounding."""
    from storlab.sim import run

    streamed = []
    monkeypatch.setattr(stream, "_stream_pass", lambda *a, _f=stream._stream_pass:
                        streamed.append(1) or _f(*a))
    a = run.run_model(model(**ov))
    assert streamed, "the run did not stream"
    b = _whole_run(model(**ov), monkeypatch)
    cols = ["op", "count", "ops_s", "mb_s", "lat_p50_ms", "lat_p95_ms", "lat_p99_ms",
            "failed", "availability"]
    assert a.ops[cols].equals(b.ops[cols])
    assert np.allclose(a.ops["lat_mean_ms"], b.ops["lat_mean_ms"], rtol=1e-12, atol=0)
    assert a.window == b.window and a.util.equals(b.util) and a.notes == b.notes
    assert a.failures and len(a.failures) == len(b.failures)
    for fa, fb in zip(a.failures, b.failures):
        assert fa.keys() == fb.keys()
        for k, v in fa.items():
            if isinstance(v, float):
                assert v == pytest.approx(fb[k], rel=1e-12), k
            else:
                assert v == fb[k], k
    if "failed_disks" in ov:
        assert float(a.ops["availability"].iloc[0]) < 1.0
    else:
        assert a.failures[0]["rerouted"] > 0 and a.failures[0]["ops_s"] is not None
    if "clients" in ov and "failures" in ov:      # one streamed pass per whole-run pass
        assert "settled after" in a.failures[0]["placed"] and len(streamed) >= 2

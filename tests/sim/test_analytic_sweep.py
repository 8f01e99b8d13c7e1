"""`--analytic` against the simulator over a load sweep on the shipped examples: the label
the CLI prints (analytic.ACCURACY) must hold here."""

from pathlib import Path

import pytest

from storlab.sim.analytic import ACCURACY, solve_mva
from storlab.sim.model import build_model
from storlab.sim.run import run_model
from storlab.sim.spec import apply_overrides, load_raw, parse_cluster

EX = Path(__file__).resolve().parents[2] / "examples" / "sim"

CASES = [("small", {"clients": c, "requests": 40_000}) for c in (8, 64, 256, 512)] + [
    ("small", {"rate": r, "requests": 30_000}) for r in (200, 500)] + [
    ("cluster700", {"clients": c, "requests": 100_000}) for c in (500, 2000)] + [
    ("cluster700", {"rate": 45_000, "requests": 100_000})]


@pytest.mark.parametrize("example,ov", CASES, ids=[f"{e}-{list(o.items())[0]}" for e, o in CASES])
def test_analytic_within_its_label_of_the_simulator(example, ov):
    m = build_model(parse_cluster(apply_overrides(load_raw(EX / f"{example}.yaml"), ov)))
    s, a = run_model(m), solve_mva(m)
    assert a.stable
    x_err = a.ops.loc[0, "ops_s"] / s.ops.loc[0, "ops_s"] - 1
    r_err = a.ops.loc[0, "lat_mean_ms"] / s.ops.loc[0, "lat_mean_ms"] - 1
    assert abs(x_err) <= ACCURACY["throughput"] <= 0.10
    assert abs(r_err) <= ACCURACY["latency"] <= 0.15
    assert s.bottleneck["resource"] == a.bottleneck["resource"]

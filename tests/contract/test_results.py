"""One result shape (issue 14): every result class (a subclass of `storlab.result_shape.Result`)
has `to_frame()` (a DataFrame), `to_dict()` (JSON as it is, no NaN), and `plot(kind=...)`
for each of its `PLOT_KINDS` (the first being the default), with an unknown kind refused in
one line by the package's own error. Each class is built here from a small real computation;
a new result class without a builder below fails `test_every_result_class_is_checked`."""

from __future__ import annotations

import importlib
import itertools
import json
import pkgutil
from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd
import pytest

import storlab
from storlab.errors import StorlabError
from storlab.result_shape import Result

CLUSTER = {"name": "p", "swift": {"part_power": 6},
           "nodes": [{"role": "proxy", "count": 1},
                     {"role": "storage", "count": 3, "disks": {"type": "ssd_s3700", "count": 1}}],
           "workload": {"objects": 50, "requests": 400, "clients": 4, "seed": 2}}


def grid(levels: int = 2, reps: int = 2, seed: int = 1) -> pd.DataFrame:
    """A full factorial on a, b, c with y = 10 + 3a - 2b (+ noise) and a second metric."""
    rng = np.random.default_rng(seed)
    rows = []
    for a, b, c in itertools.product(range(levels), repeat=3):
        for _ in range(reps):
            y = 10 + 3 * a - 2 * b + rng.normal(0, 0.2)
            rows.append({"a": a, "b": b, "c": c, "y": y, "z": y * (1 + c) + rng.normal(0, 1)})
    return pd.DataFrame(rows)


def effects() -> Result:
    from storlab.analysis.effects import analyze

    return analyze(grid(), "y")


def importance() -> Result:
    from storlab.analysis.importance import importance

    return importance(grid(3, 1), "y", params=["a", "b", "c"])


def importance_eval() -> Result:
    from storlab.analysis.importance_eval import evaluate

    return evaluate(grid(3, 1), "y", fractions=[0.5, 1.0], repeats=10, ranks=2,
                    params=["a", "b", "c"], n_jobs=1)


def coverage() -> Result:
    from storlab.analysis.coverage import coverage

    df = grid(2, 3)
    df["group"] = np.where(df["c"] == 0, "one", "two")
    df["w"] = df["y"] ** 2 + np.arange(len(df))
    return coverage(df, "group", metrics=["y", "z", "w"], seed=1)


def compare() -> Result:
    from storlab.analysis.compare import compare

    return compare(grid(3, 1), "y", params=["a", "b", "c"])


def rw_model() -> Result:
    return storlab.RWModel.from_anchors({"4k": (1000, 500), "64k": (200, 400)})


def prediction() -> Result:
    return rw_model().predict(70, "4k:0.8,64k:0.2")  # type: ignore[attr-defined]


def measure() -> Result:
    from storlab.estimate.measure import MeasurePlan, MeasureResult
    from storlab.estimate.tables import mixed_checks

    model = rw_model()
    plan = MeasurePlan.build("4k,64k", repeat=1, mixed="4k:0.8,64k:0.2", mixed_pcts="30")
    mixed = pd.DataFrame({"size": ["4k:0.8,64k:0.2"], "read_pct": [30], "total_iops": [400.0]})
    checks = pd.concat([model.validation().assign(kind="single"),  # type: ignore[attr-defined]
                        mixed_checks(model, mixed).assign(kind="mixed")], ignore_index=True)
    runs = pd.DataFrame({"kind": ["anchor"], "status": ["ok"], "error": [""]})
    return MeasureResult(plan, runs, model, checks)


def sim_report() -> Result:
    return storlab.simulate(CLUSTER, backend="python")


def analytic() -> Result:
    return storlab.simulate(CLUSTER, analytic=True)


def sweep() -> Result:
    from storlab.campaign.sweep_campaign import run_sweep

    return run_sweep(CLUSTER, {"clients": [1, 4], "object_size": ["4KiB", "64KiB"]},
                     analytic=True, executor="serial")


def calibration() -> Result:
    from storlab.sim.analytic import solve_mva
    from storlab.sim.calibrate import calibrate
    from storlab.sim.model import build_model
    from storlab.sim.spec import apply_overrides, parse_cluster

    rows = []
    for clients, op in itertools.product((1, 8), ("GET", "PUT")):
        ov = {"clients": clients, "mix": f"{op}:1", "object_size": "64KiB"}
        x = solve_mva(build_model(parse_cluster(apply_overrides(CLUSTER, ov)))).throughput
        rows.append({"config": "base", "clients": clients, "object_size": "64KiB", "op": op,
                     "ops_s": 1.2 * x})
    return calibrate(CLUSTER, pd.DataFrame(rows))


def tune_result() -> Result:
    from storlab.campaign.sources import Observation
    from storlab.tune.result import TuneResult
    from storlab.tune.strategies import Objective

    df = grid(2, 2)
    hist = [Observation(f"c{i}", i, i // 2 + 1, i % 2 + 1, {"a": int(r.a), "b": int(r.b)}, "ok",
                        {"y": float(r.y)}, "confirm" if i >= 12 else "tune")
            for i, r in enumerate(df.itertuples())]
    return TuneResult([Objective("y")], hist, "storlab", len(hist))


def tune_eval() -> Result:
    from storlab.tune.evaluate import tune_eval

    return tune_eval(grid(3, 1), "y", params=["a", "b", "c"], strategies=("random",), budget=8,
                     repeats=3)


BUILDERS: dict[str, Callable[[], Result]] = {
    "EffectsAnalysis": effects, "ImportanceResult": importance, "EvalResult": importance_eval,
    "CoverageResult": coverage, "MethodComparison": compare, "RWModel": rw_model,
    "Prediction": prediction, "MeasureResult": measure, "SimReport": sim_report,
    "AnalyticResult": analytic, "SweepResult": sweep, "CalibrationResult": calibration,
    "TuneResult": tune_result, "TuneEvalResult": tune_eval,
}


def all_result_classes() -> list[type[Result]]:
    """Every subclass of Result in storlab, after importing every module of the package."""
    for mod in pkgutil.walk_packages(storlab.__path__, "storlab."):
        if mod.name.startswith("storlab.cli") or mod.name.startswith("storlab.commands"):
            continue  # the CLI's modules hold no results (and pick the backend)
        importlib.import_module(mod.name)

    def subs(c: type[Result]) -> Iterator[type[Result]]:
        for s in c.__subclasses__():
            yield s
            yield from subs(s)

    return sorted(set(subs(Result)), key=lambda c: c.__name__)


def test_every_result_class_is_checked() -> None:
    names = {c.__name__ for c in all_result_classes()}
    assert names == set(BUILDERS), f"add a builder for {sorted(names - set(BUILDERS))}"


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_the_result_shape(name: str) -> None:
    from matplotlib.figure import Figure  # (here: not at every worker's collection)

    res = BUILDERS[name]()
    assert type(res).__name__ == name and isinstance(res, Result)
    frame = res.to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame.columns) > 0
    pd.testing.assert_frame_equal(res.table(), frame)  # the old name, kept for users
    d = res.to_dict()
    assert isinstance(d, dict) and d
    assert json.loads(json.dumps(d, allow_nan=False)) == d  # JSON-safe as it is

    kinds = type(res).PLOT_KINDS
    assert isinstance(kinds, tuple) and kinds and all(isinstance(k, str) for k in kinds)
    for kind in kinds:
        fig = res.plot(kind=kind)
        assert isinstance(fig, Figure) and fig.axes, kind
        assert any(ax.has_data() for ax in fig.axes), kind
    assert isinstance(res.plot(), Figure)  # the first kind is the default
    with pytest.raises(StorlabError) as exc:
        res.plot(kind="no-such-kind")
    assert isinstance(exc.value, type(res).ERROR)
    msg = str(exc.value)
    assert "\n" not in msg and all(k in msg for k in kinds)

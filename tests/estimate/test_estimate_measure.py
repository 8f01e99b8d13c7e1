"""The measurement plan and its execution, with a fake runner whose device follows a known
law (so every number is checkable), plus bad plan input."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from storlab.campaign.runners.base import RunResult
from storlab.estimate.measure import MeasurePlan, bssplit, probe_direct, run_plan
from storlab.estimate.model import EstimateError
from storlab.space import parse_size

TRUTH = {4096: (1000.0, 500.0), 65536: (200.0, 400.0)}  # T_100%read, T_100%write


def _total(bs: int, p: float) -> float:
    r, w = TRUTH[bs]
    return 100.0 / (p / r + (100.0 - p) / w)


class FakeRunner:
    """A device that obeys the harmonic cost law exactly (times a seeded noise factor)."""

    name = "fake"

    def __init__(self, noise: float = 0.0, fail_every: int = 0) -> None:
        self.rng = np.random.default_rng(0)
        self.noise = noise
        self.fail_every = fail_every
        self.configs: list[dict[str, Any]] = []

    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult:
        assert workdir.is_dir()
        self.configs.append(dict(config))
        if self.fail_every and len(self.configs) % self.fail_every == 0:
            return RunResult("failed", stderr="fio: something broke\n", exit_code=1)
        rw = config["rw"]
        p = {"randread": 100.0, "randwrite": 0.0}.get(rw, float(config.get("rwmixread", 50)))
        if "bssplit" in config:
            parts = [x.split("/") for x in config["bssplit"].split(":")]
            props = {int(parse_size(s)): float(q) / 100 for s, q in parts}
            total = 1.0 / sum(q / _total(b, p) for b, q in props.items())
            mean_bs = sum(q * b for b, q in props.items())
        else:
            b = int(parse_size(config["bs"]))
            total, mean_bs = _total(b, p), b
        total *= 1 + self.noise * self.rng.standard_normal()
        rd, wr = total * p / 100, total * (100 - p) / 100
        return RunResult("ok", {"read_iops": rd, "write_iops": wr, "total_iops": total,
                                "read_bw_bytes": rd * mean_bs, "write_bw_bytes": wr * mean_bs,
                                "total_bw_bytes": total * mean_bs})


def test_plan_shape_and_interleaving() -> None:
    plan = MeasurePlan.build("4k,64k", repeat=3, validate="30,50,70", mixed="4k:0.8,64k:0.2",
                             mixed_pcts="70", seed=1)
    runs = plan.runs()
    # 2 sizes x (2 anchors + 3 mixes) + 1 mixed point, per replicate
    assert len(runs) == 3 * (2 * 5 + 1)
    assert [r.replicate for r in runs] == sorted(r.replicate for r in runs)
    first = [(r.size, r.read_pct) for r in runs[:11]]
    assert first != sorted(first)  # shuffled within the round
    cfg = {(r.kind, r.size, r.read_pct): r.config for r in runs}
    assert cfg[("anchor", "4k", 100.0)] == {"rw": "randread", "bs": "4k"}
    assert cfg[("anchor", "64k", 0.0)] == {"rw": "randwrite", "bs": "64k"}
    assert cfg[("validate", "4k", 30.0)] == {"rw": "randrw", "rwmixread": 30, "bs": "4k"}
    assert cfg[("mixed", "4k:0.8,64k:0.2", 70.0)] == {
        "rw": "randrw", "rwmixread": 70, "bssplit": "4k/80:64k/20"}
    assert MeasurePlan.build("4k", seed=1).runs() == MeasurePlan.build("4k", seed=1).runs()


def test_run_plan_recovers_known_device(tmp_path) -> None:
    plan = MeasurePlan.build("4k,64k", repeat=2, validate="30,70", mixed="4k:0.8,64k:0.2",
                             mixed_pcts="70", seed=3)
    fake = FakeRunner()
    res = run_plan(plan, directory=tmp_path, runner=fake)
    assert len(fake.configs) == len(plan.runs()) == 2 * (2 * 4 + 1)
    assert res.model.fit_for("4k").f_rw == pytest.approx(2.0)
    assert res.model.fit_for("64k").f_rw == pytest.approx(0.5)
    chk = res.table()
    single = chk[chk["kind"] != "mixed"]
    # this device obeys the read/write model exactly: no error at held-out mixes
    assert np.allclose(single["error_pct"], 0, atol=1e-6)
    mixed = chk[chk["kind"] == "mixed"].set_index("rule")
    truth = 1 / (0.8 / _total(4096, 70) + 0.2 / _total(65536, 70))
    assert mixed.loc["harmonic", "measured_iops"] == pytest.approx(truth)
    assert mixed.loc["harmonic", "error_pct"] == pytest.approx(0, abs=1e-6)
    slides = 100 * (0.8 * 1000 / 130 + 0.2 * 200 / 85)
    assert mixed.loc["slides", "error_pct"] == pytest.approx(100 * (slides - truth) / truth)
    # the scratch directory is cleaned up
    assert list(tmp_path.iterdir()) == []


def test_noisy_runs_give_intervals_and_failures_are_reported(tmp_path) -> None:
    plan = MeasurePlan.build("4k", repeat=4, validate="50", seed=2)
    res = run_plan(plan, directory=tmp_path, runner=FakeRunner(noise=0.03, fail_every=5))
    assert (res.runs["status"] == "failed").sum() == 2
    assert any("2 of 12 runs failed" in w and "something broke" in w for w in res.warnings)
    row = res.table().query("read_pct == 50").iloc[0]
    assert row["pred_lo"] < row["predicted_iops"] < row["pred_hi"]
    assert row["measured_lo"] < row["measured_iops"] < row["measured_hi"]
    assert math.isfinite(row["error_pct"])
    d = res.to_dict()
    assert d["plan"]["sizes"] == ["4k"] and len(d["runs"]) == 12


def test_all_failed_is_an_error(tmp_path) -> None:
    plan = MeasurePlan.build("4k", repeat=1)
    with pytest.raises(EstimateError, match="every run failed.*something broke"):
        run_plan(plan, directory=tmp_path, runner=FakeRunner(fail_every=1))


@pytest.mark.parametrize("kw, message", [
    ({"sizes": ""}, "--sizes is empty"),
    ({"sizes": "4k", "repeat": 0}, "--repeat 0"),
    ({"sizes": "4k", "validate": "50,150"}, "outside 0-100"),
    ({"sizes": "4k", "mixed": "4k:0.5,64k:0.5"}, "64k, which --sizes does not measure"),
    ({"sizes": "4k,64k", "mixed": "4k:0.8,64k:0.3"}, "sum to 1.1"),
    ({"sizes": "4k,64k", "mixed": "4k:0.333,64k:0.667"}, "whole percentages"),
    ({"sizes": "4k", "pattern": "zigzag"}, "--pattern"),
    ({"sizes": "4k", "runtime": 0.2}, "--runtime"),
])
def test_bad_plans(kw, message) -> None:
    with pytest.raises(EstimateError, match=message):
        MeasurePlan.build(**kw)


def test_bssplit_and_probe(tmp_path) -> None:
    assert bssplit({4096: 0.8, 65536: 0.2}) == "4k/80:64k/20"
    ok, why = probe_direct(tmp_path)
    assert isinstance(ok, bool) and (ok or why)
    assert list(tmp_path.iterdir()) == []

"""The f_rw model against hand-computed cases of the MSST'19 slides' formulas, its least
squares fit, uncertainty, persistence and input errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from storlab.errors import StorlabError
from storlab.errors import EstimateError
from storlab.estimate.cells import Cell, parse_size_mix, size_label
from storlab.estimate.rwmodel import RWModel
from storlab.estimate.tables import fit_table


@pytest.fixture
def two_sizes() -> RWModel:
    # 4k: reads 1000, writes 500 -> f_rw 2; 64k: reads 200, writes 400 -> f_rw 0.5
    return RWModel.from_anchors({"4k": (1000, 500), "64k": (200, 400)})


def test_f_rw_and_k_by_hand(two_sizes: RWModel) -> None:
    sf = two_sizes.fit_for("4k")
    assert sf.f_rw == pytest.approx(2.0)
    assert sf.capacity == pytest.approx(1000.0)
    # k = 1000 / (70 + 30 * 2) = 1000 / 130
    assert sf.k(70) == pytest.approx(1000 / 130)
    pr = two_sizes.predict_size("4k", 70)
    assert pr.value("read_iops") == pytest.approx(70 * 1000 / 130)
    assert pr.value("write_iops") == pytest.approx(30 * 1000 / 130)
    assert pr.value("total_iops") == pytest.approx(100 * 1000 / 130)
    assert pr.value("read_bw_bytes") == pytest.approx(70 * 1000 / 130 * 4096)
    # C is invariant along the predicted line by construction
    assert pr.value("read_iops") + 2.0 * pr.value("write_iops") == pytest.approx(1000.0)


def test_endpoints_are_reproduced(two_sizes: RWModel) -> None:
    assert two_sizes.predict_size("64k", 100).value() == pytest.approx(200)
    assert two_sizes.predict_size("64k", 0).value() == pytest.approx(400)
    assert two_sizes.predict_size("64k", 0).value("read_iops") == 0


def test_mixed_sizes_slides_formula_by_hand(two_sizes: RWModel) -> None:
    pr = two_sizes.predict(70, "4k:0.8,64k:0.2", mix="slides")
    k4 = 1000 / (70 + 30 * 2.0)
    k64 = 200 / (70 + 30 * 0.5)
    total = 100 * (0.8 * k4 + 0.2 * k64)  # T_total = 100 * sum P_i k_i
    assert pr.value() == pytest.approx(total)  # 662.44...
    assert total == pytest.approx(662.4434, rel=1e-6)
    assert pr.value("read_iops", "4k") == pytest.approx(70 * 0.8 * k4)
    assert pr.value("write_iops", "64k") == pytest.approx(30 * 0.2 * k64)
    bw = 4096 * 100 * 0.8 * k4 + 65536 * 100 * 0.2 * k64
    assert pr.value("total_bw_bytes") == pytest.approx(bw)


def test_mixed_sizes_harmonic_by_hand(two_sizes: RWModel) -> None:
    pr = two_sizes.predict(70, {"4k": 0.8, "64k": 0.2}, mix="harmonic")
    t4, t64 = 100 * 1000 / 130, 100 * 200 / 85
    total = 1 / (0.8 / t4 + 0.2 / t64)
    assert pr.value() == pytest.approx(total)
    # the harmonic rule keeps the requested size proportions in the stream
    assert pr.value("total_iops", "4k") / total == pytest.approx(0.8)
    # one size alone: both rules agree with the single-size model
    one = two_sizes.predict(30, "64k:1", mix="harmonic").value()
    assert one == pytest.approx(two_sizes.predict(30, "64k:1").value())


def test_least_squares_recovers_exact_model() -> None:
    # data generated from C=900, f=1.5 exactly: every mix lies on the line
    cap, f = 900.0, 1.5
    cells = []
    for p in (0, 30, 50, 70, 100):
        k = cap / (p + (100 - p) * f)
        cells.append(Cell(p, 1, k * p, k * (100 - p)))
    m = RWModel.from_cells({"16k": cells})
    sf = m.fit_for("16k")
    assert sf.method == "lsq"
    assert sf.f_rw == pytest.approx(f)
    assert sf.capacity == pytest.approx(cap)
    assert sf.c_spread == pytest.approx(0, abs=1e-12)
    assert m.warnings == []


def test_least_squares_matches_numpy_polyfit() -> None:
    # r = C - f w by ordinary least squares is a straight-line fit of r on w
    r = np.array([0.0, 300.0, 520.0, 690.0, 1000.0])
    w = np.array([480.0, 640.0, 500.0, 310.0, 0.0])
    cells = [Cell(p, 1, a, b) for p, a, b in zip((0, 30, 50, 70, 100), r, w)]
    sf = RWModel.from_cells({"4k": cells}, method="lsq").fit_for("4k")
    slope, intercept = np.polyfit(w, r, 1)
    assert sf.f_rw == pytest.approx(-slope)
    assert sf.capacity == pytest.approx(intercept)


def test_spread_warning_when_c_not_invariant() -> None:
    # mixes far above both endpoints: C varies a lot
    cells = [Cell(0, 1, 0, 500), Cell(50, 1, 600, 600), Cell(100, 1, 1000, 0)]
    m = RWModel.from_cells({"4k": cells}, method="anchors", spread_threshold=0.10)
    sf = m.fit_for("4k")
    c = sf.capacities()  # f=2: 1000, 600+1200=1800, 1000
    assert c == pytest.approx([1000, 1800, 1000])
    assert sf.c_spread == pytest.approx(800 / np.mean(c))
    assert len(m.warnings) == 2 and "4k" in m.warnings[0]
    # the 50% mix is faster than both endpoints: the model's shape cannot reach it
    assert "above both endpoints" in m.warnings[1]
    assert not bool(m.table().loc[0, "invariant"])
    # the held-out mix is reported with its error
    v = m.validation().set_index("read_pct")
    assert not v.loc[50.0, "used_in_fit"]
    pred = 100 * 1000 / (50 + 50 * 2)
    assert v.loc[50.0, "error_pct"] == pytest.approx(100 * (pred - 1200) / 1200)


def test_anchor_method_ignores_mixes_auto_uses_them() -> None:
    cells = [Cell(0, 1, 0, 500), Cell(50, 1, 300, 300), Cell(100, 1, 1000, 0)]
    a = RWModel.from_cells({"4k": cells}, method="anchors").fit_for("4k")
    assert (a.f_rw, a.capacity) == (2.0, 1000.0)
    auto = RWModel.from_cells({"4k": cells}).fit_for("4k")
    assert auto.method == "lsq" and auto.f_rw != pytest.approx(2.0)


# ----------------------------------------------------------------- uncertainty

def _replicated_cells(rng: np.random.Generator, r: float, w: float, n: int, sd: float
                      ) -> list[Cell]:
    return [Cell.from_samples(100, r * (1 + sd * rng.standard_normal(n)), np.zeros(n)),
            Cell.from_samples(0, np.zeros(n), w * (1 + sd * rng.standard_normal(n)))]


def test_interval_matches_hand_delta_method() -> None:
    reads, writes = [990.0, 1000.0, 1010.0], [480.0, 500.0, 520.0]
    cells = [Cell.from_samples(100, reads, [0, 0, 0]), Cell.from_samples(0, [0, 0, 0], writes)]
    m = RWModel.from_cells({"4k": cells})
    pr = m.predict_size("4k", 50)
    # total(p) = 100 / (p/R + (100-p)/W); its gradient by hand
    R, W, p = 1000.0, 500.0, 50.0
    T = 100 / (p / R + (100 - p) / W)
    dR = T**2 / 100 * p / R**2
    dW = T**2 / 100 * (100 - p) / W**2
    vR, vW = np.var(reads, ddof=1) / 3, np.var(writes, ddof=1) / 3
    var = dR**2 * vR + dW**2 * vW
    df = var**2 / ((dR**2 * vR) ** 2 / 2 + (dW**2 * vW) ** 2 / 2)
    from scipy import stats
    half = stats.t.ppf(0.975, df) * math.sqrt(var)
    assert pr.value() == pytest.approx(T)
    assert pr.value("total_iops_hi") - T == pytest.approx(half, rel=1e-5)
    assert T - pr.value("total_iops_lo") == pytest.approx(half, rel=1e-5)


def test_interval_coverage_by_simulation() -> None:
    rng = np.random.default_rng(7)
    R, W, p = 1000.0, 400.0, 60.0
    truth = 100 / (p / R + (100 - p) / W)
    hits, trials = 0, 400
    for _ in range(trials):
        m = RWModel.from_cells({"4k": _replicated_cells(rng, R, W, 5, 0.05)})
        pr = m.predict_size("4k", p)
        hits += pr.value("total_iops_lo") <= truth <= pr.value("total_iops_hi")
    assert 0.90 <= hits / trials <= 0.99


def test_no_replicates_no_interval(two_sizes: RWModel) -> None:
    pr = two_sizes.predict_size("4k", 50)
    assert math.isnan(pr.value("total_iops_lo"))
    assert math.isfinite(pr.value())


def test_wider_spread_wider_interval() -> None:
    rng = np.random.default_rng(1)
    base = rng.standard_normal(4)
    def width(sd: float) -> float:
        cells = [Cell.from_samples(100, 1000 * (1 + sd * base), np.zeros(4)),
                 Cell.from_samples(0, np.zeros(4), 500 * (1 + sd * base[::-1]))]
        pr = RWModel.from_cells({"4k": cells}).predict_size("4k", 50)
        return pr.value("total_iops_hi") - pr.value("total_iops_lo")
    assert width(0.01) < width(0.05) < width(0.2)


# ----------------------------------------------------------------- persistence

def test_round_trip_through_json(tmp_path, two_sizes: RWModel) -> None:
    rng = np.random.default_rng(3)
    m = RWModel.from_cells({"4k": _replicated_cells(rng, 1000, 500, 3, 0.05)
                            + [Cell.from_samples(50, [400, 420, 410], [390, 400, 380])],
                            "64k": _replicated_cells(rng, 200, 400, 3, 0.05)},
                           method="anchors", meta={"engine": "libaio"})
    path = m.save(tmp_path / "model.json")
    back = RWModel.load(path)
    assert back.meta == {"engine": "libaio"}
    for s in ("4k", "64k"):
        assert back.fit_for(s).f_rw == m.fit_for(s).f_rw
        assert back.fit_for(s).cells == m.fit_for(s).cells
    a = m.predict(70, "4k:0.8,64k:0.2").table()
    b = back.predict(70, "4k:0.8,64k:0.2").table()
    pd.testing.assert_frame_equal(a, b)


def test_hand_written_model(tmp_path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"sizes": [{"size": "4k", "read_iops": 1000,
                                           "write_iops": 500}]}))
    m = RWModel.load(path)
    assert m.predict(70).value() == pytest.approx(100 * 1000 / 130)


def test_edited_model_is_rejected(tmp_path, two_sizes: RWModel) -> None:
    d = two_sizes.to_dict()
    d["sizes"][0]["f_rw"] = 3.0
    path = tmp_path / "m.json"
    path.write_text(json.dumps(d))
    with pytest.raises(EstimateError, match="f_rw=3.0 disagrees"):
        RWModel.load(path)


# ----------------------------------------------------------------- tables in

def test_fit_table_with_replicates_and_columns() -> None:
    df = pd.DataFrame({
        "bs": ["4k"] * 6 + ["64k"] * 2,
        "rwmixread": [100, 100, 0, 0, 50, 50, 100, 0],
        "read_iops": [990, 1010, 0, 0, 330, 340, 200, 0],
        "write_iops": [0, 0, 490, 510, 330, 340, 0, 400],
    })
    m = fit_table(df, method="anchors")
    sf = m.fit_for("4k")
    assert sf.f_rw == pytest.approx(1000 / 500)
    assert [c.n for c in sf.cells] == [2, 2, 2]
    assert m.fit_for(65536).f_rw == pytest.approx(0.5)


def test_fit_table_from_total_iops_and_bandwidth() -> None:
    tot = pd.DataFrame({"size": ["4k", "4k", "4k"], "read_pct": [0, 70, 100],
                        "total_iops": [500, 700, 1000]})
    sf = fit_table(tot).fit_for("4k")
    assert sf.cells[1].read_iops == pytest.approx(490)
    assert sf.cells[1].write_iops == pytest.approx(210)
    bw = pd.DataFrame({"size": [4096, 4096], "read_pct": [0, 100],
                       "total_bw_bytes": [500 * 4096, 1000 * 4096]})
    assert fit_table(bw).fit_for("4k").f_rw == pytest.approx(2.0)


# ----------------------------------------------------------------- bad input

@pytest.mark.parametrize("anchors, message", [
    ({"4k": (1000, 0)}, "100% write throughput is 0"),
    ({"4k": (0, 500)}, "100% read throughput is 0"),
])
def test_zero_throughput_is_an_error(anchors, message) -> None:
    with pytest.raises(EstimateError, match=message):
        RWModel.from_anchors(anchors)


def test_zero_write_in_table_names_the_size() -> None:
    df = pd.DataFrame({"size": ["64k", "64k"], "read_pct": [0, 100],
                       "read_iops": [0, 300], "write_iops": [0, 0]})
    with pytest.raises(EstimateError, match="size 64k: 100% write throughput is 0"):
        fit_table(df)


@pytest.mark.parametrize("spec, message", [
    ("4k:0.8,64k:0.3", "sum to 1.1, not 1"),
    ("4k:80,64k:20", "sum to 100, not 1"),
    ("4k:-0.2,64k:1.2", ">= 0"),
    ("4k:0.5,4k:0.5", "appears twice"),
    ("4q:1", "not a size"),
    ("", "empty"),
])
def test_bad_mixes(spec, message) -> None:
    with pytest.raises(EstimateError, match=message):
        parse_size_mix(spec)


@pytest.mark.parametrize("pct", [-1, 100.5, float("nan"), "seventy"])
def test_read_pct_outside_range(two_sizes: RWModel, pct) -> None:
    with pytest.raises(EstimateError, match="read percentage"):
        two_sizes.predict(pct, "4k:1")


def test_other_bad_input(two_sizes: RWModel) -> None:
    with pytest.raises(EstimateError, match="size 8k is not in the model"):
        two_sizes.predict(50, "8k:1")
    with pytest.raises(EstimateError, match="several sizes"):
        two_sizes.predict(50)
    with pytest.raises(EstimateError, match="mix rule"):
        two_sizes.predict(50, "4k:1", mix="geometric")
    with pytest.raises(EstimateError, match="no 100% write"):
        RWModel.from_cells({"4k": [Cell(100, 1, 1000, 0), Cell(50, 1, 400, 400)]},
                           method="anchors")
    df = pd.DataFrame({"size": ["4k"], "read_pct": [120], "read_iops": [1], "write_iops": [1]})
    with pytest.raises(EstimateError, match="row 1: read percentage 120 is outside 0-100"):
        fit_table(df)
    assert issubclass(EstimateError, StorlabError)


def test_size_labels() -> None:
    assert [size_label(b) for b in (512, 4096, 65536, 1 << 20, 6144)] == \
        ["512", "4k", "64k", "1m", "6k"]


def test_plots_return_figures(two_sizes: RWModel) -> None:
    fig = two_sizes.plot(points=11)
    ax, axc = fig.axes[:2]
    assert len(ax.lines) >= 2  # one model line per size
    assert ax.get_ylabel() == "total I/O rate (IO/s)"
    # Seed 004's invariance: one C line per size, one point per measured mix.
    assert sorted(ln.get_label().split(":")[0] for ln in axc.lines
                  if not ln.get_label().startswith("_")) == ["4k", "64k"]
    fig2 = two_sizes.predict(70, "4k:0.8,64k:0.2").plot(points=11)
    assert fig2.axes[0].get_xlabel() == "read share of the I/O (%)"


# ----------------------------------------------------------------- model error

def _biased_cells(rng: np.random.Generator, pcts, bias: float, n: int = 4, sd: float = 0.01
                  ) -> list[Cell]:
    """A device whose mixes run `bias` * 4p(100-p)/100^2 faster than the harmonic law
    (0 at the endpoints, `bias` at 50 %): a systematic error the two anchors cannot see."""
    def truth(p: float) -> float:
        return 100 / (p / 1000 + (100 - p) / 400) * (1 + bias * 4 * p * (100 - p) / 100**2)
    cells = []
    for p in pcts:
        t = truth(p) * (1 + sd * rng.standard_normal(n))
        cells.append(Cell.from_samples(p, t * p / 100, t * (100 - p) / 100))
    return cells


def test_two_anchors_give_a_noise_only_interval() -> None:
    m = RWModel.from_cells({"4k": _biased_cells(np.random.default_rng(1), (0, 100), 0.05)})
    pr = m.predict_size("4k", 50)
    assert pr.interval.startswith("noise only")
    assert math.isnan(m.fit_for("4k").model_sd)
    assert "noise only" in json.dumps(pr.to_dict())


def test_interval_with_model_error_covers_a_planted_bias() -> None:
    """A +5 % bias at 50 % read, learned from held-out mixes at 25 and 75 %: the interval at
    50 % (not measured) covers the truth; the noise-only interval does not."""
    truth50 = 100 / (50 / 1000 + 50 / 400) * 1.05
    covered = noise_covered = 0
    trials = 40
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        m = RWModel.from_cells({"4k": _biased_cells(rng, (0, 25, 75, 100), 0.05)},
                               method="anchors")
        sf = m.fit_for("4k")
        assert sf.model_df == 2 and 0.02 < sf.model_sd < 0.06  # the 3.75 % seen at 25/75
        pr = m.predict_size("4k", 50)
        assert pr.interval == "noise + model error"
        covered += pr.value("total_iops_lo") <= truth50 <= pr.value("total_iops_hi")
        pn = m.predict_size("4k", 50, model_error=False)
        noise_covered += pn.value("total_iops_lo") <= truth50 <= pn.value("total_iops_hi")
    assert covered == trials
    assert noise_covered == 0


def test_no_bias_no_model_error() -> None:
    m = RWModel.from_cells({"4k": _biased_cells(np.random.default_rng(3), (0, 30, 50, 70, 100),
                                                0.0, sd=0.01)}, method="anchors")
    # errors at the held-out mixes are explained by the replicates' noise
    assert m.fit_for("4k").model_sd < 0.01


def test_third_anchor_corrects_the_bias() -> None:
    rng = np.random.default_rng(11)
    cells = _biased_cells(rng, (0, 30, 50, 70, 100), 0.08, sd=0.002)
    truth70 = 100 / (70 / 1000 + 30 / 400) * (1 + 0.08 * 4 * 70 * 30 / 100**2)
    two = RWModel.from_cells({"4k": cells}, method="anchors")
    three = RWModel.from_cells({"4k": cells}, method="anchors3")
    assert three.fit_for("4k").method == "anchors3"
    assert [three.fit_for("4k").used(c) for c in cells] == [True, False, True, False, True]
    err2 = abs(two.predict_size("4k", 70).value() / truth70 - 1)
    err3 = abs(three.predict_size("4k", 70).value() / truth70 - 1)
    assert err3 < 0.7 * err2  # 6.2 % -> 3.9 % here: a line through three points
    with pytest.raises(EstimateError, match="three-anchor fit needs read 50%"):
        RWModel.from_cells({"4k": [cells[0], cells[-1]]}, method="anchors3")
    # saved and loaded with its method
    back = RWModel.from_dict(three.to_dict())
    assert back.fit_for("4k").f_rw == pytest.approx(three.fit_for("4k").f_rw)


# ------------------------------------------- adding model error never narrows an interval

def _audit_cells(mix_bias: float | None, eps: tuple[float, ...] = (1.1, 0.9)) -> list[Cell]:
    """The audit's planted table: 4k with 10,000 read / 5,000 write IOPS (f_rw 2), two runs
    per anchor at +-10 %, and optionally a 50 % mix running `mix_bias` above the law."""
    def total(p: float) -> float:
        return 10000 / (p / 100 + 2 * (1 - p / 100))
    pts = [(100.0, 1.0), (0.0, 1.0)] + ([] if mix_bias is None else [(50.0, 1 + mix_bias)])
    cells = []
    for p, bias in pts:
        t = np.array([total(p) * e * bias for e in eps])
        cells.append(Cell.from_samples(p, t * p / 100, t * (100 - p) / 100))
    return cells


def _half(pr, q: str = "write_iops") -> float:
    return (pr.value(f"{q}_hi") - pr.value(f"{q}_lo")) / 2


def test_model_error_does_not_narrow_the_audit_interval() -> None:
    """Same anchors; the mix only adds a model-error term. Before the fix: +-6,353 noise
    only, +-3,238 with model error (Welch-Satterthwaite df 1 -> ~2 halved the t quantile)."""
    noise = RWModel.from_cells({"4k": _audit_cells(None)}, method="anchors")
    both = RWModel.from_cells({"4k": _audit_cells(0.2)}, method="anchors")
    pn, pb = noise.predict_size("4k", 0), both.predict_size("4k", 0)
    assert pn.interval.startswith("noise only") and pb.interval == "noise + model error"
    assert pn.value("write_iops") == pytest.approx(5000) == pb.value("write_iops")
    assert _half(pn) == pytest.approx(6353, rel=1e-3)  # t(1 df) 12.71 * sd 500
    assert _half(pb) >= _half(pn)


@settings(max_examples=60, deadline=None)
@given(eps=st.lists(st.floats(0.7, 1.3), min_size=2, max_size=4), bias=st.floats(-0.4, 0.6),
       pct=st.floats(0, 100), conf=st.sampled_from([0.8, 0.95, 0.99]))
def test_adding_model_error_never_narrows(eps: list[float], bias: float, pct: float,
                                          conf: float) -> None:
    """Any anchor noise (2 to 4 runs each), any model-error variance (learned from a biased
    mix), any read percentage: the interval with the model error is at least as wide as
    without it."""
    assume(max(eps) - min(eps) > 1e-3)
    m = RWModel.from_cells({"4k": _audit_cells(bias, tuple(eps))}, method="anchors")
    with_me = m.predict_size("4k", pct, confidence=conf)
    without = m.predict_size("4k", pct, confidence=conf, model_error=False)
    for q in ("read_iops", "write_iops", "total_iops"):
        assert _half(with_me, q) >= _half(without, q) * (1 - 1e-9)


# ------------------------------------------- model error pooled over sizes: coverage

def _curved_cells(rng: np.random.Generator, r: float, w: float, bias: float,
                  pcts: tuple[float, ...], n: int, cv: float) -> list[Cell]:
    """Cells of a device off the f_rw law by `bias` * 4 q (1 - q) (q: the read share), each
    with `n` replicates of known relative noise `cv`."""
    out = []
    for p in pcts:
        t = _curved_truth(r, w, p, bias) * (1 + cv * rng.standard_normal(n))
        out.append(Cell.from_samples(p, t * p / 100, t * (100 - p) / 100))
    return out


def _curved_truth(r: float, w: float, p: float, bias: float) -> float:
    q = p / 100
    return 100 / (p / r + (100 - p) / w) * (1 + bias * 4 * q * (1 - q))


def test_pooled_model_error_covers_at_the_stated_rate() -> None:
    """Planted data with known noise (5 % per run, 4 runs per mix) and a model error of
    known spread (each size off the law by a bias drawn with SD 5 % at 50 % read): fitted
    from 0/100 %, its error learned from 30/70 % of all three sizes, the 95 % interval at
    50 % (measured nowhere) covers the truth at about its rate: pooled 91.7 % of 180,
    shrunk toward the pooled (the default) 96.1 %. Each size's own two mixes (2 df, t
    quantile 4.3) cover 99.4 %; noise-only intervals 58.9 %."""
    sizes = {"4k": (1000.0, 400.0), "64k": (300.0, 150.0), "1m": (40.0, 30.0)}
    hits = {"shrunk": 0, "pooled": 0, "own": 0, "noise": 0}
    total = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        bias = {s: rng.normal(0, 0.05) for s in sizes}
        m = RWModel.from_cells({s: _curved_cells(rng, r, w, bias[s], (0, 30, 70, 100), 4, 0.05)
                                for s, (r, w) in sizes.items()}, method="anchors")
        assert m.model_error()[1] == 6
        for s, (r, w) in sizes.items():
            truth = _curved_truth(r, w, 50, bias[s])
            total += 1
            for k, kw in (("shrunk", {}), ("pooled", {"error": "pooled"}), ("own", {"error": "own"}),
                          ("noise", {"model_error": False})):
                pr = m.predict_size(s, 50, **kw)
                hits[k] += pr.value("total_iops_lo") <= truth <= pr.value("total_iops_hi")
    rate = {k: v / total for k, v in hits.items()}
    assert 0.90 <= rate["pooled"] <= 0.985 and 0.90 <= rate["shrunk"] <= 0.99, rate
    assert rate["own"] > 0.99 and rate["noise"] < 0.75, rate


def test_pooled_model_error_reaches_a_size_without_mixes() -> None:
    """A size measured only at its anchors takes the model error the other sizes show."""
    rng = np.random.default_rng(5)
    m = RWModel.from_cells({"4k": _curved_cells(rng, 1000, 400, 0.08, (0, 30, 70, 100), 4, 0.01),
                            "64k": _curved_cells(rng, 300, 150, 0.0, (0, 100), 4, 0.01)},
                           method="anchors")
    sd, df = m.model_error()
    assert df == 2 and 0.04 < sd < 0.09
    assert math.isnan(m.fit_for("64k").model_sd)
    assert m.predict_size("64k", 50).interval == "noise + model error"
    assert m.predict_size("64k", 50, error="own").interval.startswith("noise only")

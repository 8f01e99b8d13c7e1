"""Carver's PI / CPI / RSD (eqs. 1-5) against direct computation, and the greedy selection
on synthetic full-factorial data with a planted structure."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storlab.analysis.importance import (ImportanceResult, StopRule, encode, greedy_order,
                                         importance, parse_stop, rsd)
from storlab.errors import AnalysisError


# ----------------------------------------------------------------- direct (slow) formulas
def var_pop(y) -> float:
    y = np.asarray(y, dtype=float)
    return float(((y - y.mean()) ** 2).mean())


def pi_direct(df: pd.DataFrame, p: str, r: str) -> float:
    """Eq. 2 literally: Var(S) - sum |S_p| / |S| Var(S_p)."""
    n = len(df)
    return var_pop(df[r]) - sum(len(s) / n * var_pop(s[r]) for _, s in df.groupby(p))


def cpi_direct(df: pd.DataFrame, q: str, given: list[str], r: str, how: str) -> float:
    """Eq. 3 in every subset fixing `given`, then eq. 4 (max) or the size-weighted mean."""
    vals, sizes = [], []
    for _, sub in df.groupby(given):
        vals.append(pi_direct(sub, q, r))
        sizes.append(len(sub))
    if how == "max":
        return max(vals)
    return float(np.dot(vals, sizes) / sum(sizes))


HAND = pd.DataFrame({
    "P": ["a", "a", "a", "b", "b", "b", "c", "c"],
    "Q": ["x", "y", "x", "y", "x", "y", "x", "y"],
    "R": [1, 1, 2, 2, 1, 1, 1, 2],  # every (P, Q, R) once: nothing to average
    "y": [10.0, 14.0, 11.0, 30.0, 20.0, 31.0, 5.0, 6.0],
})


def test_eq2_pi_matches_hand_computation():
    res = importance(HAND, "y", params=["P", "Q", "R"], stop="top:1")
    # P: overall var minus weighted within-value variances, computed by hand.
    y = HAND["y"].to_numpy()
    total = np.var(y)
    within = (3 / 8) * np.var([10, 14, 11]) + (3 / 8) * np.var([30, 20, 31]) \
        + (2 / 8) * np.var([5, 6])
    assert res.pi["P"] == pytest.approx(total - within, rel=1e-12)
    for p in "PQR":
        assert res.pi[p] == pytest.approx(pi_direct(HAND, p, "y"), rel=1e-12)
    assert res.variance == pytest.approx(total)


@pytest.mark.parametrize("how", ["max", "mean"])
def test_eq3_eq4_cpi_matches_direct(how):
    # min_support=1: the third step leaves one configuration per subset (the equations
    # hold there too; the default refuses such a step)
    res = importance(HAND, "y", params=["P", "Q", "R"], stop="top:3", aggregate=how,
                     min_support=1)
    first = res.steps[0].param
    assert first == "P"
    for q in ("Q", "R"):
        assert res.steps[1].candidates[q] == pytest.approx(
            cpi_direct(HAND, q, [first], "y", how), rel=1e-12, abs=1e-12)
    two = [s.param for s in res.steps[:2]]
    last = res.steps[2].param
    assert res.steps[2].importance == pytest.approx(
        cpi_direct(HAND, last, two, "y", how), rel=1e-12, abs=1e-12)


def test_eq3_hand_value_for_one_subset():
    # CPI(Q | P=b) = Var({30,20,31}) - 1/3 Var({20}) - 2/3 Var({30,31}).
    sub = HAND[HAND.P == "b"]
    expect = np.var([30, 20, 31]) - (2 / 3) * np.var([30, 31])
    assert pi_direct(sub, "Q", "y") == pytest.approx(expect)
    res = importance(HAND, "y", params=["P", "Q", "R"], stop="top:2", aggregate="max")
    # Eq. 4: max over P = a, b, c; b gives the largest reduction here.
    per = [pi_direct(HAND[HAND.P == v], "Q", "y") for v in "abc"]
    assert max(per) == pytest.approx(expect)
    assert res.steps[1].candidates["Q"] == pytest.approx(expect)


def test_eq5_rsd():
    y = np.array([10.0, 12.0, 11.0, 13.0])
    n = len(y)
    assert rsd(y) == pytest.approx(math.sqrt(np.var(y) * n / (n - 1)) / y.mean())
    assert rsd(y) == pytest.approx(np.std(y, ddof=1) / y.mean())
    assert math.isnan(rsd(np.array([5.0])))


# ----------------------------------------------------------------- planted structure
def planted(seed: int = 0, noise: float = 1.0, reps: int = 1) -> pd.DataFrame:
    """A dominates; B matters only when A == 'a0'; C has a small main effect; N1, N2 are
    pure noise; additive Gaussian noise on every run."""
    rng = np.random.default_rng(seed)
    grid = list(itertools.product(["a0", "a1", "a2"], ["b0", "b1", "b2", "b3"],
                                  ["c0", "c1"], [1, 2, 3], ["u", "v"]))
    df = pd.DataFrame(grid * reps, columns=["A", "B", "C", "N1", "N2"])
    b_eff = df["B"].map({"b0": 0.0, "b1": 15.0, "b2": 30.0, "b3": -10.0})
    y = (100.0 + df["A"].map({"a0": 40.0, "a1": 0.0, "a2": -60.0})
         + np.where(df["A"] == "a0", b_eff, 0.0)
         + np.where(df["C"] == "c1", 3.0, 0.0)
         + rng.normal(0, noise, len(df)))
    df["tput"] = y
    return df


def test_greedy_recovers_planted_order_and_noise_pi_is_near_zero():
    df = planted()
    res = importance(df, "tput", stop="top:3")
    assert res.selected == ["A", "B", "C"]
    share = {p: v / res.variance for p, v in res.pi.items()}
    assert share["N1"] < 0.005 and share["N2"] < 0.005
    assert share["A"] > 0.7
    # B barely matters on average, but a lot under A = a0: CPI exposes it.
    assert res.steps[1].importance > 10 * res.pi["B"] / 4
    assert res.best_values() == {"A": "a0", "B": "b2", "C": "c1"}


def test_weighted_mean_aggregate_also_recovers_order_and_shares_add_up():
    df = planted(seed=3)
    res = importance(df, "tput", stop="top:5", aggregate="mean")
    assert res.selected[:3] == ["A", "B", "C"]
    # The fifth parameter would leave one configuration per value combination: refused.
    assert len(res.steps) == 4 and "too few" in res.stop_reason
    # With the weighted mean, step importances partition the variance (like R^2 gains):
    # together the explained part, Var(S) minus the pooled variance within the subsets.
    within = df.groupby(res.selected)["tput"].var(ddof=0).mul(
        df.groupby(res.selected).size()).sum() / len(df)
    assert sum(s.importance for s in res.steps) == pytest.approx(res.variance - within,
                                                                 rel=1e-9)
    assert sum(s.share for s in res.steps) == pytest.approx(1 - within / res.variance)


def test_max_aggregate_shares_are_shares_of_the_variance():
    """The max aggregate's CPI is one subset's reduction and can exceed Var(S); the share
    reported is the part of Var(S) the step explains, so shares stay in [0, 1] and add up
    to at most 1."""
    df = planted(seed=5)
    res = importance(df, "tput", stop="top:4", aggregate="max")
    assert res.steps[1].importance > res.steps[1].share * res.variance  # B under A = a0
    assert all(0 <= s.share <= 1 for s in res.steps)
    assert sum(s.share for s in res.steps) <= 1 + 1e-12
    within = df.groupby(res.selected)["tput"].var(ddof=0).mul(
        df.groupby(res.selected).size()).sum() / len(df)
    assert sum(s.share for s in res.steps) == pytest.approx(1 - within / res.variance)


def test_path_describes_the_recommended_combination():
    """Each step's subset fixes the final best values of the parameters selected so far:
    the path ends at the recommendation, and its subsets shrink around it."""
    df = planted(seed=2)
    res = importance(df, "tput", stop="top:3")
    best = res.best_values()
    for i, s in enumerate(res.steps):
        fixed = {p: best[p] for p in res.selected[:i + 1]}
        sub = df
        for p, v in fixed.items():
            sub = sub[sub[p] == v]
        assert s.subset_size == len(sub)
        assert s.subset_mean == pytest.approx(sub["tput"].mean())
        assert s.subset_rsd == pytest.approx(rsd(sub["tput"].to_numpy()))


def test_saturated_table_is_too_few():
    """11 two-level factors in a 12-run Plackett-Burman: no degree of freedom left."""
    from storlab.design import make_design
    from storlab.space import Space

    d = make_design(Space.two_level(11), "pb", runs=12, seed=1)
    df = d.table[[f.name for f in Space.two_level(11).factors]].copy()
    df["y"] = np.random.default_rng(0).normal(100, 10, len(df))
    res = importance(df, "y")
    assert "saturated" in res.too_few and "12 configurations" in res.too_few
    assert res.to_dict()["too_few"] == res.too_few
    ok = importance(planted(), "tput", stop="top:1")
    assert ok.too_few == ""


def test_rsd_stop_rule_and_gain_rule():
    df = planted(noise=0.5)
    res = importance(df, "tput", stop="rsd:0.02")
    assert res.selected[:2] == ["A", "B"]
    assert res.steps[-1].subset_rsd <= 0.02
    assert all(s.subset_rsd > 0.02 for s in res.steps[:-1])
    res = importance(df, "tput", stop="gain:0.05")
    assert res.selected == ["A", "B"]  # C explains about 0.2 % of the variance
    assert "reduces variance" in res.stop_reason
    # RSD of the whole table already below the threshold: nothing is important.
    flat = df.assign(tput=1000 + 0.01 * df["tput"])
    res = importance(flat, "tput", stop="rsd:0.02")
    assert res.selected == [] and "nothing to select" in res.stop_reason


def test_minimize_goal_picks_low_subset():
    df = planted()
    res = importance(df, "tput", stop="top:1", goal="minimize")
    assert res.best_values() == {"A": "a2"}


def test_repeated_runs_are_averaged_and_spread_kept():
    df = planted(reps=3, noise=2.0)
    res = importance(df, "tput", stop="top:2")
    assert res.n_rows == len(df) and res.n_configs == len(df) // 3
    means = df.groupby(["A", "B", "C", "N1", "N2"])["tput"].mean().reset_index()
    direct = pi_direct(means, "A", "tput")
    assert res.pi["A"] == pytest.approx(direct, rel=1e-10)
    assert (res.configs["n_runs"] == 3).all()
    assert res.noise_rsd > 0


def test_numeric_parameter_with_many_values_is_binned():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 100, 400)
    df = pd.DataFrame({"x": x, "k": rng.choice(["p", "q"], 400)})
    df["y"] = 50 + 0.5 * x + rng.normal(0, 1, 400)
    res = importance(df, "y", params=["x", "k"], stop="top:1", bins=4)
    assert "x" in res.binned and "4 quantile strata" in res.binned["x"]
    assert len(res.levels["x"]) == 4
    assert res.selected == ["x"]
    assert res.table()["binned"].iloc[0] == "yes"
    # Without --params, a column with many distinct numbers could be either a parameter or
    # a measurement: storlab says it cannot tell rather than guess.
    with pytest.raises(AnalysisError, match="cannot tell whether x is a parameter or a "
                                            "measurement.*--params.*--space"):
        importance(df, "y", stop="top:1")


def test_storlab_metric_and_bookkeeping_columns_are_never_parameters():
    """A table `storlab results` wrote: the fio metrics beside the response (few distinct
    values on a small design) and the design's bookkeeping are not ranked as settings, when
    the runner registry's answer (what the CLI and the report pass) says which are metrics."""
    from storlab.campaign.runners import is_metric

    df = planted().head(24).copy()  # A, B, C x N1=1, N2=u/v: few values per column
    rng = np.random.default_rng(4)
    df["config_id"] = range(1, len(df) + 1)
    df["std_order"] = df["config_id"]
    df["read_iops"] = np.round(df["tput"] * 0.7, -1)
    df["write_iops"] = np.round(df["tput"] * 0.3, -1)
    df["read_clat_p99_us"] = rng.choice([10.0, 20.0], len(df))
    df["usr_cpu"] = rng.choice([1.0, 2.0, 3.0], len(df))
    df["_n_ok"] = 1
    # fio's own names, kept beside storlab's (few values here, so not "cannot tell" either)
    df["fio.read.iops"] = df["read_iops"]
    df["fio.write.clat_ns.percentile.99.000000"] = rng.choice([1e4, 2e4], len(df))
    res = importance(df, "tput", stop="top:2", is_metric=is_metric)
    assert set(res.pi) == {"A", "B", "C", "N1", "N2"}
    # a library call without the answer asks the declared names itself (storlab.metrics)
    assert set(importance(df, "tput", stop="top:2").pi) == {"A", "B", "C", "N1", "N2"}
    # a caller's own answer wins: told no column is a metric, they are columns like others
    res = importance(df, "tput", stop="top:2", is_metric=lambda name: False)
    assert {"read_clat_p99_us", "usr_cpu", "fio.read.iops"} <= set(res.pi)
    assert "_n_ok" not in res.pi and "config_id" not in res.pi


def test_parse_stop():
    assert parse_stop("top:3") == [StopRule("top", 3)]
    assert parse_stop("rsd:2%") == [StopRule("rsd", 0.02)]
    assert parse_stop("top:4, gain:0.01") == [StopRule("top", 4), StopRule("gain", 0.01)]
    for bad in ("foo:1", "top:0", "top:2.5", "rsd:", "rsd:-1", "rsd:abc", ""):
        with pytest.raises(AnalysisError, match="--stop"):
            parse_stop(bad)


def test_bad_input_errors_name_the_column():
    with pytest.raises(AnalysisError, match="'nope'"):
        importance(HAND, "nope")
    with pytest.raises(AnalysisError, match="parameter column 'Z'"):
        importance(HAND, "y", params=["P", "Z"])
    bad = HAND.assign(y=HAND["y"].astype(object))
    bad.loc[2, "y"] = "oops"
    with pytest.raises(AnalysisError, match="'oops'"):
        importance(bad, "y")
    with pytest.raises(AnalysisError, match="aggregate"):
        importance(HAND, "y", aggregate="median")  # type: ignore[arg-type]


def test_failed_runs_without_response_are_dropped():
    df = HAND.copy()
    df.loc[0, "y"] = np.nan
    res = importance(df, "y", params=["P", "Q", "R"], stop="top:1")
    assert res.n_dropped == 1 and res.n_rows == 7


def test_result_shapes():
    res = importance(planted(), "tput", stop="top:2")
    assert isinstance(res, ImportanceResult)
    d = res.to_dict()
    assert [s["param"] for s in d["selected"]] == ["A", "B"]
    assert {"param", "importance", "best_value"} <= set(d["selected"][0])
    assert set(d["pi"]) == {"A", "B", "C", "N1", "N2"}
    tab = res.table()
    assert list(tab["param"]) == ["A", "B"] and tab["share"].iloc[0] > 0.5
    assert res.pi_table()["param"].iloc[0] == "A"
    fig = res.plot()
    assert len(fig.axes) >= 2
    import matplotlib.pyplot as plt

    plt.close(fig)


# ----------------------------------------------------------------- properties
tables = st.integers(min_value=0, max_value=2**31 - 1).flatmap(
    lambda seed: st.tuples(st.just(seed), st.integers(3, 60), st.lists(st.integers(1, 4),
                                                                       min_size=1, max_size=4)))


def _random_table(seed: int, n: int, levels: list[int]) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({f"p{j}": rng.integers(0, L, n) for j, L in enumerate(levels)})
    df["y"] = rng.normal(50, 10, n) * rng.choice([1.0, 100.0])
    return df


@settings(max_examples=60, deadline=None)
@given(tables, st.sampled_from(["max", "mean"]))
def test_bincount_selection_equals_groupby_computation(spec, how):
    seed, n, levels = spec
    df = _random_table(seed, n, levels)
    params = [c for c in df.columns if c != "y"]
    enc = encode(df, "y", params)
    means = enc.configs[params + ["y"]]
    order = greedy_order(enc.codes, enc.nlev, enc.y, len(params), how)
    chosen: list[str] = []
    for j, v in order:
        p = params[j]
        direct = pi_direct(means, p, "y") if not chosen else \
            cpi_direct(means, p, chosen, "y", how)
        assert v == pytest.approx(direct, rel=1e-9, abs=1e-9 * max(1.0, var_pop(means.y)))
        # ...and it is the largest among the candidates (up to rounding).
        for q in params:
            if q not in chosen and q != p:
                other = pi_direct(means, q, "y") if not chosen else \
                    cpi_direct(means, q, chosen, "y", how)
                assert other <= v + 1e-9 * max(1.0, var_pop(means.y))
        chosen.append(p)


@settings(max_examples=40, deadline=None)
@given(tables, st.floats(-1e3, 1e3), st.floats(0.1, 10))
def test_pi_bounds_shift_and_scale(spec, shift, scale):
    seed, n, levels = spec
    df = _random_table(seed, n, levels)
    res = importance(df, "y", stop="top:1")
    moved = importance(df.assign(y=df["y"] * scale + shift), "y", stop="top:1")
    for p, v in res.pi.items():
        assert -1e-9 * res.variance <= v <= res.variance * (1 + 1e-9)
        assert moved.pi[p] == pytest.approx(v * scale**2, rel=1e-6, abs=1e-9 * res.variance)


def test_a_sparse_step_never_overturns_the_best_values_so_far():
    """A 12-run Plackett-Burman with a planted a=10 (+30), c=10 (-20), e=fast (+8): the best
    values stay a=10, c=1. Once no refinement of the best subset keeps two configurations,
    the selection stops; it once went on and jumped to the only pair left (a=1, c=1, b=1,
    e=slow), recommending the worst level of the top factor."""
    from storlab.design import make_design
    from storlab.space import Space

    sp = Space.from_dict({"factors": [
        *({"name": n, "kind": "integer", "values": [1, 10]} for n in "abcd"),
        {"name": "e", "kind": "categorical", "values": ["slow", "fast"]},
        {"name": "f", "kind": "integer", "values": [1, 10]}]})
    t = make_design(sp, "pb", runs=12, seed=1).table
    rng = np.random.default_rng(0)
    t["tput"] = (100 + 30 * (t.a == 10) - 20 * (t.c == 10) + 8 * (t.e == "fast")
                 + rng.normal(0, 1, len(t)))
    res = importance(t, "tput", params=list("abcdef"))
    assert res.steps[0].best_values == {"a": 10}
    assert res.steps[1].best_values == {"a": 10, "c": 1}
    for before, after in zip(res.steps, res.steps[1:]):  # a nested path
        assert {k: after.best_values[k] for k in before.best_values} == before.best_values
    assert all(s.subset_size >= 2 for s in res.steps)
    assert "too few to go on" in res.stop_reason


def test_a_response_on_part_of_the_runs_is_ranked_on_those_and_says_so():
    """Read p99 exists only on the read runs: importance uses those, says on how many, and
    leaves out rw (constant there) instead of ranking it last with PI 0; the plot says it
    under its title."""
    import itertools

    rng = np.random.default_rng(0)
    rows = []
    for a, b, c, rw in itertools.product([1, 2, 4], [8, 16], ["x", "y"], ["read", "write"]):
        for _ in range(2):
            rows.append({"a": a, "b": b, "c": c, "rw": rw,
                         "p99": 100 * a + rng.normal(0, 3) if rw == "read" else np.nan})
    df = pd.DataFrame(rows)
    res = importance(df, "p99", params=["a", "b", "c", "rw"], goal="minimize", stop="top:1")
    assert (res.n_rows, res.n_dropped, res.n_configs) == (24, 24, 12)
    assert res.held == {"rw": "read"} and "rw" not in res.pi
    assert res.selected == ["a"] and res.best_values() == {"a": 1}
    assert res.to_dict()["held"] == {"rw": "read"}
    assert res.subset_note.endswith("analysed on the 24 of 48 runs that have it; constant "
                                    "there, so not ranked: rw=read")
    fig = res.plot()
    titles = [f._suptitle.get_text() for f in fig.subfigs if f._suptitle is not None]
    assert any("24 of 48 runs" in t for t in titles)
    assert any("24 of 48 runs" in t.get_text() for t in res.plot("path").texts)
    full = importance(df.assign(p99=df["p99"].fillna(1.0)), "p99", params=["a", "b", "c"],
                      stop="top:1")
    assert full.subset_note == "" and full.held == {}
    with pytest.raises(AnalysisError, match="present on 24 of 48 rows, where every parameter "
                                            "is constant"):
        importance(df, "p99", params=["rw"])


def test_subset_plot_step_labels_stay_apart_and_inside_and_name_the_best_corner():
    """The two steps' sets sit almost on one point at the left edge: their labels must
    neither overlap nor run off the axes, and for a latency the best corner is bottom
    left."""
    import itertools

    from matplotlib.text import Annotation, Text

    rng = np.random.default_rng(0)
    df = pd.DataFrame([{"a": a, "b": b, "c": c, "p99": 100 * a + rng.normal(0, 3)}
                       for a, b, c in itertools.product([1, 2, 4], [8, 16], ["x", "y"])
                       for _ in range(2)])
    for goal, corner in (("minimize", "bottom left"), ("maximize", "bottom right")):
        res = importance(df, "p99", params=["a", "b", "c"], goal=goal, stop="top:2")
        fig = res.plot("subsets")
        ax = fig.axes[0]
        assert ax.get_title().endswith(f"(best: {corner})")
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        canvas = FigureCanvasAgg(fig)  # storlab's figures are detached: give it a canvas
        canvas.draw()
        r = canvas.get_renderer()
        # the labels' text (an Annotation's own extent includes its line to the point)
        boxes = [Text.get_window_extent(t, r) for t in ax.texts if isinstance(t, Annotation)]
        assert len(boxes) == 2
        assert not boxes[0].overlaps(boxes[1])
        area = ax.get_window_extent(r)
        assert all(area.x0 <= b.x0 and b.x1 <= area.x1 for b in boxes)


# ------------------------------------------- repeats are identical raw configurations
def _lhs_like(n: int = 40, seed: int = 4) -> pd.DataFrame:
    """n distinct continuous configurations (one run each), as an LHS gives: binned into
    quartiles, some of them share every stratum."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({p: rng.permutation((np.arange(n) + rng.uniform(size=n)) / n * 2 - 1)
                       for p in "ABCDE"})
    df["y"] = 100 + 5 * df["A"] + 3 * df["B"] + rng.normal(0, 1, n)
    return df


def test_distinct_configurations_in_one_cell_are_no_repeat():
    """Two different configurations that fall into the same quantile bins are two
    configurations, not a repeat: before, 39 configurations and a run-to-run RSD of their
    difference were reported for 40 distinct single runs."""
    df = _lhs_like()
    res = importance(df, "y", params=list("ABCDE"))
    assert res.n_configs == 40 and res.n_repeated == 0
    assert res.n_cells < 40  # two configurations share every quartile (the method's cells)
    assert math.isnan(res.noise_rsd)
    assert res.noise_note == "no repeated configuration: run-to-run noise unknown"
    assert res.cells_note == f"after binning continuous factors into 4 levels, {res.n_cells} cells"
    d = res.to_dict()
    assert d["n_configs"] == 40 and d["n_cells"] == res.n_cells and d["noise_rsd"] is None


def test_run_to_run_rsd_only_from_true_repeats():
    """Repeating two configurations twice: the noise is their spread alone (the median of
    their two RSDs), whatever the binning puts together."""
    df = _lhs_like()
    rep = df.iloc[[0, 1]].copy()
    rep["y"] = df["y"].iloc[[0, 1]].to_numpy() * np.array([1.02, 0.9])
    both = pd.concat([df, rep], ignore_index=True)
    res = importance(both, "y", params=list("ABCDE"))
    assert res.n_configs == 40 and res.n_rows == 42 and res.n_repeated == 2
    expect = [np.std(both["y"].iloc[[i, 40 + i]], ddof=1) / abs(np.mean(both["y"].iloc[[i, 40 + i]]))
              for i in (0, 1)]
    assert res.noise_rsd == pytest.approx(float(np.median(expect)), rel=1e-12)
    assert "over 2 repeated configurations" in res.noise_note


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60))
def test_the_repeat_noise_median_is_numpys(values: list[float]) -> None:
    from storlab.analysis.importance import _median

    v = np.array(values)
    assert _median(v) == pytest.approx(float(np.median(v)), rel=1e-12, abs=1e-9)

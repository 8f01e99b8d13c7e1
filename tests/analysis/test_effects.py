"""Effects, ANOVA, Lenth and recommendations on textbook data."""

import itertools

import numpy as np
import pandas as pd
import pytest

from storlab.analysis.effects import analyze, lenth
from storlab.design import fractional_factorial, full_factorial, make_design, plackett_burman
from storlab.errors import AnalysisError
from storlab.space import Space

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

# Seed 000's worked 2^3 example, standard order.
Y = [2.10, 0.90, 3.35, 1.50, 5.15, 2.40, 8.20, 4.55]


def seed_table():
    t = full_factorial(Space.two_level(3)).table.copy()
    t["distance"] = Y
    return t


def hand_effect(signs):
    y = np.array(Y)
    return (y[signs > 0].mean() - y[signs < 0].mean())


def test_seed_000_effects_by_hand():
    t = seed_table()
    a = analyze(t, "distance", max_order=3)
    eff = dict(zip(a.effects["term"], a.effects["effect"]))
    x = t[["A", "B", "C"]].to_numpy()
    for r in (1, 2, 3):
        for combo in itertools.combinations(range(3), r):
            name = ":".join("ABC"[i] for i in combo)
            assert eff[name] == pytest.approx(hand_effect(np.prod(x[:, list(combo)], axis=1)))
    # the slide's arithmetic: A = (0.90+1.50+2.40+4.55)/4 - (2.10+3.35+5.15+8.20)/4
    assert eff["A"] == pytest.approx(-2.3625)
    assert eff["C"] == pytest.approx(3.1125)
    assert eff["A:B:C"] == pytest.approx(((0.90 + 3.35 + 5.15 + 4.55) - (2.10 + 1.50 + 2.40 + 8.20)) / 4)


def test_anova_sums_of_squares_and_contribution():
    a = analyze(seed_table(), "distance")
    rows = a.anova.set_index("source")
    for term, e in zip(a.effects["term"], a.effects["effect"]):
        assert rows.loc[term, "ss"] == pytest.approx(8 * e**2 / 4)  # SS = N * effect^2 / 4
    total = rows.loc["total", "ss"]
    assert total == pytest.approx(np.var(Y) * 8)
    assert rows.drop("total")["pct"].sum() == pytest.approx(100.0)
    assert rows.loc["error", "df"] == 1  # ABC pooled as error


def test_recommendation_interaction_aware():
    a = analyze(seed_table(), "distance")
    rec = {s["factor"]: s["level"] for s in a.recommendation["settings"]}
    assert rec == {"A": -1, "B": 1, "C": 1}  # run 7 of the slide, the largest distance
    assert a.recommendation["predicted"] == pytest.approx(7.975)
    low = analyze(seed_table(), "distance", goal="minimize").recommendation
    assert {s["factor"]: s["level"] for s in low["settings"]}["C"] == -1


def test_lenth_by_hand():
    c = np.array([10.0, -8.0, 1.0, -0.5, 0.7, 0.2, -1.2])
    s0 = 1.5 * np.median(np.abs(c))
    pse = 1.5 * np.median(np.abs(c)[np.abs(c) < 2.5 * s0])
    res = lenth(c)
    assert res.pse == pytest.approx(pse)
    from scipy import stats
    assert res.me == pytest.approx(stats.t.ppf(0.975, 7 / 3) * pse)
    g = (1 + 0.95 ** (1 / 7)) / 2
    assert res.sme == pytest.approx(stats.t.ppf(g, 7 / 3) * pse)


def test_unreplicated_saturated_uses_lenth():
    rng = np.random.default_rng(1)
    d = fractional_factorial(Space.two_level(7), runs=8)
    t = d.table.copy()
    t["y"] = 50 + 10 * t["A"] - 6 * t["D"] + rng.normal(0, 0.3, 8)
    a = analyze(t, "y")
    assert a.lenth is not None
    top = a.effects.iloc[:2]
    assert set(top["term"]) == {"A", "D"}
    assert top["significant"].all()
    assert any("aliased" in w for w in a.warnings) or a.aliases == []


def test_pb_main_effects_only_and_dummies_as_error():
    rng = np.random.default_rng(2)
    d = plackett_burman(Space.two_level(8))
    t = d.table.copy()
    t["y"] = 100 + 20 * t["B"] + 8 * t["F"] + rng.normal(0, 1, len(t))
    a = analyze(t, "y", factors=list("ABCDEFGH") + ["dummy1", "dummy2", "dummy3"])
    assert list(a.effects["order"].unique()) == [1]
    assert any("partially aliased" in w for w in a.warnings)
    assert list(a.effects["term"][:2]) == ["B", "F"]
    assert a.effects.set_index("term").loc[["B", "F"], "significant"].all()


def test_curvature_with_center_points():
    s = Space.from_dict({"factors": [{"name": "a", "range": [0.0, 2.0]},
                                     {"name": "b", "range": [0.0, 2.0]}]})
    d = make_design(s, "full", center=4, replicates=2, seed=1)
    t = d.table.copy()
    rng = np.random.default_rng(3)
    # a dome: center much higher than corners
    t["y"] = 10 - 3 * ((t["a"] - 1) ** 2 + (t["b"] - 1) ** 2) + rng.normal(0, 0.1, len(t))
    a = analyze(t, "y", space=s)
    assert a.curvature is not None
    assert a.curvature["center_mean"] > a.curvature["factorial_mean"] + 4
    assert a.curvature["p"] < 0.001 and a.curvature["p_pure_error"] < 0.001


def test_a_saturated_design_never_tests_effects_against_a_pooled_real_one():
    """2^(5-1), resolution V, unreplicated, all 15 terms estimable: the old code pooled the
    last two-factor interaction (D:E, planted at 6) as the error and called A, B, C and A:B
    noise. Every contrast is judged by Lenth's margin instead."""
    d = fractional_factorial(Space.two_level(5), runs=16)
    t = d.table.copy()
    rng = np.random.default_rng(7)
    t["y"] = (100 + 10 * t["A"] + 5 * t["B"] - 3 * t["C"] + 4 * t["A"] * t["B"]
              + 6 * t["D"] * t["E"] + rng.normal(0, 0.3, len(t)))
    a = analyze(t, "y")
    e = a.effects.set_index("term")
    assert (e["basis"] == "Lenth ME").all() and e["p"].isna().all()
    planted = {"A", "B", "C", "A:B", "D:E"}
    assert planted <= set(e.index[e["significant"]]) and set(e.index[:5]) == planted
    assert any(w.startswith("saturated:") for w in a.warnings)
    rec = {s["factor"]: s["level"] for s in a.recommendation["settings"]}
    assert rec["A"] == 1 and rec["B"] == 1 and rec["C"] == -1 and rec["D"] == rec["E"]


def test_significant_curvature_is_said_beside_the_recommendation():
    """A dome over a 2^2 with center points: the corners' model recommends a corner the
    center runs already beat; the analysis says so."""
    s = Space.from_dict({"factors": [{"name": "a", "range": [0.0, 2.0]},
                                     {"name": "b", "range": [0.0, 2.0]}]})
    t = make_design(s, "full", center=4, replicates=2, seed=1).table.copy()
    rng = np.random.default_rng(3)
    t["y"] = (10 + 0.5 * t["a"] - 3 * ((t["a"] - 1) ** 2 + (t["b"] - 1) ** 2)
              + rng.normal(0, 0.1, len(t)))
    a = analyze(t, "y", space=s, goal="maximize")
    note = next(w for w in a.warnings if w.startswith("curvature is significant"))
    assert "better than the predicted" in note
    flat = t.assign(y=10 + 0.5 * t["a"] + rng.normal(0, 0.1, len(t)))
    assert not any(w.startswith("curvature") for w in analyze(flat, "y", space=s).warnings)


def test_replicated_design_uses_anova():
    s = Space.two_level(3)
    d = make_design(s, "full", replicates=3, seed=4)
    t = d.table.copy()
    rng = np.random.default_rng(5)
    t["y"] = 5 + 2 * t["A"] + 1.5 * t["A"] * t["B"] + rng.normal(0, 0.2, len(t))
    a = analyze(t, "y")
    e = a.effects.set_index("term")
    assert e.loc["A", "basis"] == "ANOVA" and e.loc["A", "significant"]
    assert e.loc["A:B", "significant"] and not e.loc["C", "significant"]
    assert e.loc["A", "effect"] == pytest.approx(4, abs=0.3)


def test_natural_units_and_categorical_from_space():
    s = Space.from_dict({"factors": [
        {"name": "engine", "values": ["psync", "libaio"]},
        {"name": "iodepth", "range": [1, 64], "log": True}],
        "responses": [{"name": "lat", "goal": "minimize"}]})
    d = make_design(s, "full", replicates=2, seed=0)
    t = d.table.copy()
    t["lat"] = np.where(t["engine"] == "libaio", 1.0, 3.0) + np.where(t["iodepth"] > 8, 2.0, 0.0)
    t["lat"] += np.random.default_rng(0).normal(0, 0.01, len(t))
    a = analyze(t, "lat", space=s)
    rec = {r["factor"]: r["value"] for r in a.recommendation["settings"]}
    assert rec == {"engine": "libaio", "iodepth": 1}
    assert a.goal == "minimize"


@pytest.mark.parametrize("mutate,msg", [
    (lambda t: t.drop(columns=["distance"]), "no response column"),
    (lambda t: t.assign(distance=["x"] * 8), "non-numeric"),
    (lambda t: t.assign(A=[-1, 1, 0.5, 1, -1, 1, -1, 1]), "neither"),
])
def test_bad_results_tables(mutate, msg):
    with pytest.raises(AnalysisError, match=msg):
        analyze(mutate(seed_table()), "distance", factors=["A", "B", "C"])


def test_plots_render():
    a = analyze(seed_table(), "distance")
    for kind in ("pareto", "halfnormal", "main", "interaction"):
        fig = a.plot(kind)
        assert fig.axes


def test_saturated_main_effects_judged_by_lenth_only():
    # PB(12) with 11 factors on averages: no error df, so no F tests and no main effect
    # pooled as error; Lenth picks the real effects.
    rng = np.random.default_rng(7)
    d = plackett_burman(Space.two_level(11))
    t = d.table.copy()
    t["y"] = 100 + 30 * t["A"] - 20 * t["E"] + rng.normal(0, 1, len(t))
    a = analyze(t, "y")
    assert len(a.effects) == 11
    assert a.effects["p"].isna().all()
    assert (a.effects["basis"] == "Lenth ME").all()
    assert set(a.effects[a.effects["significant"]]["term"]) == {"A", "E"}


def multiplicative_table():
    """2^3 full factorial, replicated, where A triples and B doubles throughput (C: none)."""
    t = make_design(Space.two_level(3), "full", replicates=2, seed=0).table.copy()
    noise = np.exp(np.random.default_rng(1).normal(0, 0.01, len(t)))
    t["iops"] = 100 * np.where(t["A"] > 0, 3.0, 1.0) * np.where(t["B"] > 0, 2.0, 1.0) * noise
    return t


def test_log_transform_gives_ratios_and_predicts_in_natural_units():
    t = multiplicative_table()
    a = analyze(t, "iops", transform="log")
    e = a.effects.set_index("term")
    assert e.loc["A", "ratio"] == pytest.approx(3.0, rel=0.02)
    assert e.loc["B", "ratio"] == pytest.approx(2.0, rel=0.02)
    assert e.loc["A", "effect"] == pytest.approx(np.log(3.0), abs=0.02)
    # Additive on the log scale: no A:B interaction, C and its interactions inactive.
    assert not e.loc["A:B", "significant"] and not e.loc["C", "significant"]
    rec = a.recommendation
    assert {s["factor"]: s["level"] for s in rec["settings"]} == {"A": 1, "B": 1}
    assert rec["predicted"] == pytest.approx(600.0, rel=0.02)
    assert rec["predicted_transformed"] == pytest.approx(np.log(600.0), abs=0.02)
    assert a.label == "log(iops)" and a.to_dict()["transform"] == "log"
    assert not any("extrapolation" in w for w in a.warnings)  # 600 was measured
    # On the raw scale the same data show a large A:B interaction instead.
    raw = analyze(t, "iops").effects.set_index("term")
    assert raw.loc["A:B", "significant"] and "ratio" not in raw
    assert "log(iops)" in a.plot("pareto").axes[0].get_xlabel()
    assert "log(iops)" in a.plot("main").axes[0].get_ylabel()


def test_log10_and_sqrt_transforms():
    t = multiplicative_table()
    a10 = analyze(t, "iops", transform="log10").effects.set_index("term")
    assert a10.loc["A", "ratio"] == pytest.approx(3.0, rel=0.02)
    s = analyze(t, "iops", transform="sqrt")
    assert s.recommendation["predicted"] == pytest.approx(
        s.recommendation["predicted_transformed"] ** 2)


def test_extrapolated_prediction_is_flagged():
    # Half fraction: the best corner (A, B, C all high) is never run.
    half = fractional_factorial(Space.two_level(3), generators=["C=-AB"]).table
    t = pd.concat([half] * 3, ignore_index=True)
    assert not ((t["A"] > 0) & (t["B"] > 0) & (t["C"] > 0)).any()
    t["y"] = (10 + 3 * t["A"] + 2 * t["B"] + 1 * t["C"]
              + np.random.default_rng(2).normal(0, 0.05, len(t)))
    a = analyze(t, "y", max_order=1)
    assert {s["factor"]: s["level"] for s in a.recommendation["settings"]} == \
        {"A": 1, "B": 1, "C": 1}
    assert a.recommendation["predicted"] == pytest.approx(16.0, abs=0.2)
    assert a.recommendation["predicted"] > t["y"].max()
    assert any("extrapolation" in w for w in a.warnings)


@pytest.mark.parametrize("y,transform,msg", [
    ([1, 2, 3, 0, 5, 6, 7, 8], "log", "needs iops > 0; row 4 has 0"),
    ([1, 2, 3, -1, 5, 6, 7, 8], "sqrt", "needs iops >= 0"),
    ([1, 2, 3, 4, 5, 6, 7, 8], "boxcox", "transform 'boxcox' must be one of"),
])
def test_bad_transforms(y, transform, msg):
    t = full_factorial(Space.two_level(3)).table.copy()
    t["iops"] = y
    with pytest.raises(AnalysisError, match=msg):
        analyze(t, "iops", transform=transform)


def test_level_direction_table_per_term_as_seed_000():
    # Seed 000 prints, per significant term, the level direction and the optimised value:
    # "A6 +1 10", "A4 -1 1", "A4 * A6 (-1) * (+1) (1) * (10)".
    import numpy as np
    import pandas as pd

    from storlab.analysis.effects import analyze
    from storlab.design import full_factorial
    from storlab.space import Space

    s = Space.from_dict({"factors": [
        {"name": "A6", "kind": "integer", "range": [2, 10]},
        {"name": "A4", "kind": "integer", "range": [1, 5]},
        {"name": "A1", "kind": "integer", "range": [2, 8]}]})
    d = full_factorial(s)
    x = np.vstack([d.coded.to_numpy()] * 2)
    t = pd.concat([d.table, d.table], ignore_index=True)
    noise = np.random.default_rng(0).normal(0, 0.5, len(t))
    t["iops"] = 100 + 20 * x[:, 0] - 15 * x[:, 1] - 8 * x[:, 0] * x[:, 1] + noise
    a = analyze(t, "iops", space=s)
    rows = {r["term"]: r for r in a.recommendation["directions"]}
    assert rows["A6"]["direction"] == "+1" and rows["A6"]["value"] == "10"
    assert rows["A4"]["direction"] == "-1" and rows["A4"]["value"] == "1"
    inter = next(r for r in rows.values() if r["kind"] == "interaction")
    assert inter["direction"] == "(+1) * (-1)" and inter["value"] == "(10) * (1)"
    assert "A1" not in rows  # not significant: no direction claimed


def test_a_response_on_part_of_the_runs_is_analysed_on_those_and_says_so():
    """Read latency exists only on the runs that read: the analysis uses those runs, says
    how many, and names the factor the subset holds constant (its effect is not estimable
    there, rather than silently missing)."""
    rows = []
    for i, (a, b, c) in enumerate(itertools.product([-1, 1], repeat=3)):
        rows.append({"a": a, "rw": "read" if b == 1 else "write", "c": c,
                     "iops": 100 + 30 * a + 10 * b + i % 3,
                     "p99": 5.0 + 2 * a + 0.1 * (i % 2) if b == 1 else np.nan})
    df = pd.DataFrame(rows * 2)
    res = analyze(df, "p99")
    assert len(res.data) == 8
    assert "p99 is present on 8 of 16 runs: analysed on those runs only" in res.warnings
    assert "constant on the runs with p99, so not estimated: rw=read" in res.warnings
    assert set(res.effects["term"]) == {"a", "c", "a:c"}
    assert res.effects.set_index("term").loc["a", "effect"] == pytest.approx(4.0)
    full = analyze(df, "iops")  # a response every run has: no such note
    assert not any("present on" in w for w in full.warnings)
    with pytest.raises(AnalysisError, match="no run has a value of 'p99'"):
        analyze(df.assign(p99=np.nan), "p99")


def test_measurement_columns_are_never_factors_of_a_bare_table():
    """`storlab results -o` of a 2-configuration fio campaign: every metric has two values,
    and was taken for a factor ('aliased: write_iops = -bs'). The runner registry says which
    columns are measurements; the CLI and the report pass its answer."""
    from storlab.campaign.runners import is_metric

    df = pd.DataFrame({"config_id": [1, 2], "bs": ["4k", "64k"],
                       "total_iops": [48070.0, 31390.0], "write_iops": [48070.0, 31390.0],
                       "write_bw_bytes": [1.969e8, 2.057e9], "write_clat_p99_us": [5.8, 52.5],
                       "fio.write.iops": [48070.0, 31390.0], "usr_cpu": [3.0, 2.0]})
    res = analyze(df, "total_iops", is_metric=is_metric)
    assert list(res.effects["term"]) == ["bs"]
    assert not any("aliased" in w for w in res.warnings)
    # a library call without the answer asks the declared names itself (storlab.metrics)
    assert list(analyze(df, "total_iops").effects["term"]) == ["bs"]
    # told no column is a metric, the metrics look like factors
    assert any(w.startswith("aliased: write_iops = -bs")
               for w in analyze(df, "total_iops", is_metric=lambda name: False).warnings)


def _two_by_two(rows: list[tuple[int, int, int]]) -> pd.DataFrame:
    """(a, b, copies) cells of a coded 2x2 with the planted response 10 + 3a + b."""
    out = [{"A": a, "B": b, "y": 10 + 3 * a + b} for a, b, n in rows for _ in range(n)]
    return pd.DataFrame(out)


def test_a_missing_configuration_does_not_bias_the_effects():
    """A failed corner (a=+1, b=+1) left three cells: marginal means gave b's effect as -1
    (its +1 level only seen with a=-1) where it is +2 in every measured pair."""
    t = _two_by_two([(-1, -1, 2), (1, -1, 2), (-1, 1, 2)])
    t["y"] += np.tile([0.05, -0.05], 3)  # replicate noise: the fit has error df
    results = pd.concat([t, pd.DataFrame([{"A": 1, "B": 1, "y": np.nan}] * 2)],
                        ignore_index=True)
    a = analyze(results, "y", max_order=1)
    eff = dict(zip(a.effects["term"], a.effects["effect"]))
    assert eff["A"] == pytest.approx(6.0) and eff["B"] == pytest.approx(2.0)
    assert any("not balanced on these runs" in w for w in a.warnings)
    assert any("recommended configuration ran 2 time(s) without a value" in w
               for w in a.warnings)
    assert a.anova["pct"].iloc[:2].isna().all() and a.ss_type == "II"  # adjusted: no shares


def test_uneven_replication_does_not_bias_the_effects():
    t = _two_by_two([(-1, -1, 1), (1, -1, 1), (-1, 1, 1), (1, 1, 3)])
    t["y"] += np.linspace(-0.01, 0.01, len(t))
    a = analyze(t, "y", max_order=1)
    eff = dict(zip(a.effects["term"], a.effects["effect"]))
    assert eff["A"] == pytest.approx(6.0, abs=0.02) and eff["B"] == pytest.approx(2.0, abs=0.02)


def test_analyze_a_campaign_with_a_failing_configuration(storlab, tmp_path):
    """End to end: a real command campaign whose a=1, b=1 runs exit 3."""
    import sys

    import yaml

    prog = ("import random, sys; a, b = int(sys.argv[1]), int(sys.argv[2]); "
            "sys.exit(3) if a and b else print('score', 5 * a + 2 * b + random.gauss(0, 0.1))")
    spec = {"name": "unbalanced", "seed": 1, "repetitions": 2,
            "space": {"factors": [{"name": n, "kind": "integer", "range": [0, 1]}
                                  for n in "ab"],
                      "responses": [{"name": "score", "goal": "maximize"}]},
            "design": {"kind": "full"},
            "runner": {"type": "command", "options": {
                "command": [sys.executable, "-c", prog, "{a}", "{b}"],
                "regex_metrics": [r"score (?P<score>[-\d.]+)"]}}}
    camp = tmp_path / "campaign.yaml"
    camp.write_text(yaml.safe_dump(spec))
    ran = storlab("run", camp)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # (a=1, b=1) fails twice by design; any other failure would change the estimates
    failures = storlab("status", camp, "--failures").stdout
    assert "ok 6, failed 2" in ran.stdout, ran.stdout + failures
    r = storlab("analyze", camp, "-y", "score", "--json")
    assert r.returncode == 0, r.stderr
    import json

    terms = {t["term"]: t["effect"] for t in json.loads(r.stdout)["terms"]}
    assert terms["a"] == pytest.approx(5.0, abs=0.5) and terms["b"] == pytest.approx(2.0, abs=0.5), \
        (r.stdout, failures)


def test_old_to_json_warns_and_returns_to_dict():
    """`to_json` was renamed `to_dict` (one result shape); code calling the old name still
    gets the same dictionary, told that the name is deprecated."""
    a = analyze(seed_table(), "distance")
    with pytest.warns(DeprecationWarning, match=r"to_json\(\) is deprecated; use to_dict\(\)"):
        old = a.to_json()
    assert old == a.to_dict() and old["response"] == "distance" and old["terms"]


# ------------------------------------------------------------------ uneven runs (audit F1)
def _full3(reps, planted, sd, seed, skip=()):
    """A full 2^3 with `reps(A, B, C)` runs per configuration, less the (A, B, C, r) runs in
    `skip`; y = planted(A, B, C) + N(0, sd)."""
    rng = np.random.default_rng(seed)
    rows = []
    for a, b, c in itertools.product([-1, 1], repeat=3):
        for r in range(reps(a, b, c)):
            y = planted(a, b, c) + rng.normal(0, sd)
            rows.append(dict(A=a, B=b, C=c, y=np.nan if (a, b, c, r) in skip else y))
    return pd.DataFrame(rows)


def _ols_type2(t: pd.DataFrame, formula: str):
    import statsmodels.api as sm
    import statsmodels.formula.api as smf

    m = smf.ols(formula, t.dropna(subset=["y"])).fit()
    return m, sm.stats.anova_lm(m, typ=2)


def _assert_matches_ols(a, t: pd.DataFrame, formula: str) -> None:
    """Coefficients, type II sums of squares, F, p and the error MS of `a` are those of
    statsmodels' ols + anova_lm(typ=2) on the same runs."""
    m, table = _ols_type2(t, formula)
    coef = dict(zip(a.effects["term"], a.effects["coef"]))
    for term, b in m.params.items():
        if term != "Intercept":
            assert coef[term] == pytest.approx(b, abs=1e-9), term
    anova = a.anova.set_index("source")
    for term, row in table.iterrows():
        src = "error" if term == "Residual" else term
        assert anova.loc[src, "ss"] == pytest.approx(row["sum_sq"], rel=1e-9), term
        if term != "Residual":
            assert anova.loc[src, "F"] == pytest.approx(row["F"], rel=1e-9), term
            assert anova.loc[src, "p"] == pytest.approx(row["PR(>F)"], rel=1e-6), term
    assert a.ss_type == "II"


def test_failed_runs_keep_every_interaction_of_a_measured_design():
    """The audit's campaign c2: a full 2^3, 3 repeats, y = 50 + 6A - 4B + 2C + 3AC, 5 of 24
    runs failed but every configuration measured. All interactions stay estimable; the
    old code dropped A:C ("partially aliased ... main effects only") and called C inert."""
    skip = {(1, -1, -1, 1), (1, -1, -1, 2), (-1, 1, -1, 0), (1, 1, -1, 0), (1, 1, 1, 1)}
    t = _full3(lambda *_: 3, lambda a, b, c: 50 + 6 * a - 4 * b + 2 * c + 3 * a * c, 2.0,
               5, skip)
    a = analyze(t, "y")
    assert not any("main effects only" in w for w in a.warnings)
    _assert_matches_ols(a, t, "y ~ (A + B + C)**2")
    e = a.effects.set_index("term")
    assert e.loc["A:C", "significant"] and e.loc["A:C", "coef"] == pytest.approx(3, abs=1.5)
    rec = {s["factor"]: s["level"] for s in a.recommendation["settings"]}
    assert rec == {"A": 1, "B": -1, "C": 1}   # max of 6A - 4B + 2C + 3AC


def test_uneven_repeats_keep_interactions_and_pick_the_right_level():
    """The audit's gen_unb2: two failed runs of a 3-repeat 2^3, y = ... + 1.5C - 2.5AC:
    with A high, C's best level is low (1.5 - 2.5 < 0)."""
    t = _full3(lambda *_: 3, lambda a, b, c: 50 + 6 * a - 4 * b + 1.5 * c - 2.5 * a * c,
               0.5, 11, {(1, 1, 1, 0), (-1, 1, -1, 2)})
    a = analyze(t, "y")
    _assert_matches_ols(a, t, "y ~ (A + B + C)**2")
    rec = {s["factor"]: s["level"] for s in a.recommendation["settings"]}
    assert rec == {"A": 1, "B": -1, "C": -1}
    # without failures, uneven repeats (the audit's gen_unb): the same holds
    t = _full3(lambda a, b, c: {(1, 1, 1): 4, (-1, -1, -1): 3}.get((a, b, c), 2),
               lambda a, b, c: 50 + 6 * a - 4 * b + 2 * c + 3 * a * c, 1.0, 7)
    a = analyze(t, "y")
    _assert_matches_ols(a, t, "y ~ (A + B + C)**2")
    assert not any("correlated" in w or "aliased" in w for w in a.warnings)


def test_replicated_fraction_less_one_run_keeps_its_interactions():
    """A 2^(5-1) resolution V (E = ABCD), twice, less one run (the audit's c1_minus1):
    A:B, planted at 4, stays with its F in the thousands."""
    rng = np.random.default_rng(3)
    rows = []
    for a, b, c, d in itertools.product([-1, 1], repeat=4):
        for _ in range(2):
            rows.append(dict(A=a, B=b, C=c, D=d, E=a * b * c * d,
                             y=100 + 5 * a + 3 * c + 4 * a * b + rng.normal(0, 0.7)))
    t = pd.DataFrame(rows).iloc[1:].reset_index(drop=True)
    a = analyze(t, "y")
    _assert_matches_ols(a, t, "y ~ (A + B + C + D + E)**2")
    e = a.effects.set_index("term")
    assert e.loc["A:B", "significant"] and e.loc["A:B", "coef"] == pytest.approx(4, abs=0.5)


def test_a_configuration_lost_entirely_keeps_interactions_and_says_they_correlate():
    """Every run of (1, 1, 1) failed: the seven configurations left are not orthogonal, but
    the two-factor model is still full rank with error df: it is kept (as statsmodels fits
    it) and the note names the partially aliased terms and the lost configuration."""
    skip = {(1, 1, 1, r) for r in range(3)}
    t = _full3(lambda *_: 3, lambda a, b, c: 50 + 6 * a - 4 * b + 2 * c + 3 * a * c, 1.0,
               5, skip)
    a = analyze(t, "y")
    _assert_matches_ols(a, t, "y ~ (A + B + C)**2")
    note = next(w for w in a.warnings if "partially aliased (correlated)" in w)
    assert "A=1, B=1, C=1" in note and "A:C" in note
    assert a.effects.set_index("term").loc["A:C", "significant"]


def test_main_effects_plot_draws_adjusted_means_on_unbalanced_runs():
    """Audit F2: on uneven repeats the plot drew raw marginal means (B spanned -5.5) beside
    the table's least-squares effect (-8.1, planted -8). Now each panel spans the table's
    effect, and the title says the means are adjusted; balanced runs keep raw means."""
    t = _full3(lambda a, b, c: {(1, 1, 1): 4, (-1, -1, -1): 3}.get((a, b, c), 2),
               lambda a, b, c: 50 + 6 * a - 4 * b + 2 * c + 3 * a * c, 1.0, 7)
    a = analyze(t, "y")
    effect = dict(zip(a.effects["term"], a.effects["effect"]))
    fig = a.plot("main")
    for ax in fig.axes[:3]:
        lo, hi = ax.lines[-1].get_ydata()
        assert hi - lo == pytest.approx(effect[ax.get_title()], rel=1e-9)
    assert "adjusted" in fig._suptitle.get_text()
    raw = t.groupby("B")["y"].mean()
    assert abs(raw[1] - raw[-1] - effect["B"]) > 1  # the old line was off by that much
    fig = a.plot("interaction")
    ac = next(ax for ax in fig.axes if ax.get_title().startswith("A:C"))
    (l1, h1), (l2, h2) = (ln.get_ydata() for ln in ac.lines[:2])
    assert (h2 - l2) - (h1 - l1) == pytest.approx(2 * effect["A:C"], rel=1e-9)
    b = analyze(seed_table(), "distance")
    fig = b.plot("main")
    lo, hi = fig.axes[0].lines[-1].get_ydata()
    y = np.array(Y)
    signs = seed_table()["A"].to_numpy()
    assert (lo, hi) == pytest.approx((y[signs < 0].mean(), y[signs > 0].mean()))
    assert "adjusted" not in fig._suptitle.get_text()


SPC = {"factors": [{"name": "eng", "kind": "categorical", "values": ["psync", "libaio"]},
                   {"name": "iodepth", "kind": "integer", "range": [1, 64], "log": True},
                   {"name": "bs", "kind": "ordinal", "values": ["4k", "16k", "64k"]}],
       "responses": [{"name": "iops", "goal": "maximize"}]}


def _spc_runs(curve: float) -> tuple[Space, pd.DataFrame]:
    """The audit's fc5r: the 8-run two-level design with a center run, twice, over a space
    whose eng and bs have no center (the center runs sit at psync and 4k). iops is additive
    (+300 libaio, +100 iodepth 64 on a log scale, +200 bs 64k) plus `curve` at the center."""
    s = Space.from_dict(SPC)
    t = make_design(s, "fractional", runs=8, center=1, replicates=2, seed=1).table.copy()
    rng = np.random.default_rng(5)
    lib = (t["eng"] == "libaio").to_numpy()
    deep = np.log2(t["iodepth"].astype(float).to_numpy()) / 6.0  # 0 .. 1
    big = (t["bs"].astype(str) == "64k").to_numpy()
    t["iops"] = (1000 + 300 * lib + 100 * deep + 200 * big + curve * t["center"].astype(float)
                 + rng.normal(0, 3, len(t)))
    return s, t


def test_curvature_with_categorical_factors_compares_like_with_like():
    """Audit F6: the center runs sit at the categorical factors' low levels, so the plain
    factorial mean (1299 vs 1048) measured eng's and bs's effects and the pure-error test
    called that curvature (p 0.005). The comparison is now with the factorial runs at the
    same eng and bs; the ANOVA curvature test (which adjusts for them) is unchanged."""
    s, t = _spc_runs(0.0)
    assert (t.loc[t["center"], "eng"] == "psync").all()
    a = analyze(t, "iops", space=s)
    c = a.curvature
    assert abs(c["center_mean"] - c["factorial_mean"]) < 15   # flat: only noise
    assert c["p_pure_error"] > 0.01 and c["p"] > 0.01
    assert c["matched_levels"] == ["eng=psync, bs=4k"] and c["n_factorial"] > 0
    curv = a.anova.set_index("source").loc["curvature", "ss"]
    assert c["ss"] == pytest.approx(curv, rel=1e-6)   # the adjusted test's own SS
    s, t = _spc_runs(80.0)                                    # a real bump at the center
    c = analyze(t, "iops", space=s).curvature
    assert c["center_mean"] - c["factorial_mean"] == pytest.approx(80, abs=15)
    assert c["p"] < 0.01 and c["p_pure_error"] < 0.05


def test_plackett_burman_keeps_main_effects_only_with_a_failed_run():
    """The distinct-configuration rule must not read a non-regular design as a regular one
    with configurations lost: 4 factors in a 12-run PB (11 distinct configurations of 16),
    with or without a failed run, stay main effects only."""
    rng = np.random.default_rng(1)
    t = make_design(Space.two_level(4), "pb", runs=12, seed=1).table.copy()
    t["y"] = 10 + 3 * t["A"] + rng.normal(0, 1, len(t))
    for failed in (False, True):
        if failed:
            t.loc[3, "y"] = np.nan
        a = analyze(t, "y", factors=list("ABCD"))
        assert sorted(a.effects["term"]) == list("ABCD")
        assert any("non-regular design such as Plackett-Burman" in w for w in a.warnings)


def test_a_lost_configuration_without_room_for_every_interaction_keeps_none():
    """A 2^(5-1) resolution V run once with one run failed: 15 runs cannot hold the 10
    interactions, now correlated, beside the main effects with error df. Keeping the first
    ones in list order (A:B, A:C, ...) blamed the left-out D:E (planted 12) on them and on
    A (22.7, planted 16, not significant); all or none: main effects only, A found, and
    the note names every interaction left out."""
    rng = np.random.default_rng(3)
    rows = [dict(A=a, B=b, C=c, D=d, E=a * b * c * d,
                 y=100 + 8 * a + 6 * d * (a * b * c * d) + rng.normal(0, 0.5))
            for a, b, c, d in itertools.product([-1, 1], repeat=4)]
    t = pd.DataFrame(rows)
    t.loc[5, "y"] = np.nan
    a = analyze(t, "y")
    e = a.effects.set_index("term")
    assert set(e.index) == {"A", "B", "C", "D", "E"}
    assert e.loc["A", "significant"] and e.loc["A", "effect"] == pytest.approx(16, abs=3)
    note = next(w for w in a.warnings if "left out" in w)
    assert "D:E" in note and "A:B" in note


def test_an_interaction_the_lost_configuration_leaves_no_room_for_is_named():
    """Audit MED-2: a 2^2 run twice whose (+1, +1) failed both times leaves three
    configurations, room for the mean and two main effects only; A:B was dropped without
    a word. The note now names it and the lost configuration."""
    rows = [dict(A=a, B=b, y=np.nan if (a, b) == (1, 1) else 10 * a + b + 0.01 * r)
            for r in range(2) for a, b in itertools.product([-1, 1], repeat=2)]
    a = analyze(pd.DataFrame(rows), "y")
    assert sorted(a.effects["term"]) == ["A", "B"]
    note = next(w for w in a.warnings if "left out" in w)
    assert note.endswith(": A:B") and "A=1, B=1" in note


def test_naming_the_interactions_left_no_room_does_not_drop_the_kept_ones():
    """Review HIGH: a 2^(4-1) (D=ABC) run 3 times whose (+1,+1,+1,+1) failed. A:B and A:C
    are kept (correlated) and A:D, B:C have no room; naming those in the note fed the
    all-or-none rule, which then dropped A:B too and biased the main effects (A 17.98,
    B 7.85 for 20, 10). The fit is the one before the note named them."""
    rng = np.random.default_rng(1)
    rows = []
    for _ in range(3):
        for a, b, c in itertools.product([-1, 1], repeat=3):
            y = 100 + 10 * a + 5 * b + 3 * a * b + 2 * c + a * b * c + rng.normal(0, 0.5)
            rows.append(dict(A=a, B=b, C=c, D=a * b * c, y=np.nan if a == b == c == 1 else y))
    a = analyze(pd.DataFrame(rows), "y")
    got = dict(zip(a.effects["term"], a.effects["effect"]))
    want = {"A": 20.0456, "B": 9.9104, "A:B": 6.1612, "C": 3.9920, "D": 2.0553, "A:C": 0.0351}
    assert got == pytest.approx(want, abs=1e-3)
    note = next(w for w in a.warnings if "left out" in w)
    assert "A:B, A:C are partially aliased" in note and note.endswith(": A:D, B:C")


def test_runs_off_two_levels_are_refused_by_type():
    # a run between the levels (an LHS, a tuning's runs): NotTwoLevel, an AnalysisError,
    # which the CLI catches by type to point to `storlab importance`
    from storlab.errors import NotTwoLevel

    t = seed_table()
    t.loc[2, "A"] = 0.5
    with pytest.raises(NotTwoLevel, match="row 3 is neither") as info:
        analyze(t, "distance", space=Space.two_level(3))
    assert isinstance(info.value, AnalysisError)

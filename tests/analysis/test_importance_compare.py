"""Other importance measures beside Carver's PI on a known-answer full factorial."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from storlab.analysis.compare import compare


def grid(noise: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    df = pd.DataFrame(list(itertools.product([0, 1, 2], ["a", "b"], ["u", "v", "w", "z"])),
                      columns=["A", "B", "C"])
    # y = 10*[A==2] + 4*[B==b]*[A==0] : B acts only through its interaction with A.
    df["y"] = 10.0 * (df.A == 2) + 4.0 * ((df.B == "b") & (df.A == 0)) \
        + rng.normal(0, noise, len(df)) if noise else \
        10.0 * (df.A == 2) + 4.0 * ((df.B == "b") & (df.A == 0))
    return df


def test_known_answer_indices():
    cmp = compare(grid(), "y")
    t = cmp.table().set_index("param")
    assert cmp.complete_grid
    y = grid()["y"].to_numpy()
    var = y.var()
    # Analytic first-order index of A: Var over A of E[y | A] (A=0: 2, A=1: 0, A=2: 10).
    ea = np.array([2.0, 0.0, 10.0])
    assert t.loc["A", "sobol_s1"] == pytest.approx(ea.var() / var)
    assert t.loc["A", "pi_share"] == pytest.approx(t.loc["A", "sobol_s1"])
    # Balanced grid: ANOVA main-effect share equals the PI share.
    for p in "ABC":
        assert t.loc[p, "anova_share"] == pytest.approx(t.loc[p, "pi_share"], abs=1e-9)
    # C does nothing; B has a small first-order and a larger total index (interaction).
    assert t.loc["C", "sobol_st"] == pytest.approx(0.0, abs=1e-12)
    assert t.loc["B", "sobol_st"] > 2 * t.loc["B", "sobol_s1"] > 0
    # Total indices cover the variance: sum ST >= 1 >= sum S1.
    assert t["sobol_st"].sum() >= 1 - 1e-9 >= t["sobol_s1"].sum() - 2e-9


def test_incomplete_data_leaves_sobol_empty():
    df = grid(noise=0.1).iloc[:-3]
    cmp = compare(df, "y")
    assert not cmp.complete_grid
    assert cmp.table()["sobol_s1"].isna().all()
    assert cmp.table()["anova_share"].notna().all()
    fig = cmp.plot()
    import matplotlib.pyplot as plt

    plt.close(fig)

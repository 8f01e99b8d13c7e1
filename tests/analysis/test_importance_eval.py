"""Section 5.4 harness: LHS-compatible subsets, reproducibility, Figure 5 table and plot."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from storlab.analysis.importance import encode
from storlab.analysis.importance_eval import SubsetSampler, evaluate
from storlab.errors import AnalysisError


def dataset(seed: int = 0, constrained: bool = False) -> pd.DataFrame:
    """Full factorial 3x4x3x2x2 (=144) with a clear order A > D > B, optionally with the
    (B=b2, C=*) corner missing as a constrained space would have it."""
    rng = np.random.default_rng(seed)
    grid = itertools.product(range(3), range(4), range(3), range(2), range(2))
    df = pd.DataFrame(list(grid), columns=["A", "B", "C", "D", "E"])
    if constrained:
        df = df[~((df.B == 2) & (df.C > 0))].reset_index(drop=True)
    df["y"] = (1000 - 500 * (df.A == 2) + 150 * (df.D == 1) + 40 * (df.B == 3)
               + rng.normal(0, 5, len(df)))
    return df


@pytest.mark.parametrize("n", [3, 7, 12, 50])
def test_subsets_are_lhs_balanced_on_full_factorial(n):
    enc = encode(dataset(), "y")
    s = SubsetSampler(enc.codes, enc.nlev)
    rng = np.random.default_rng(n)
    for _ in range(20):
        rows = s.sample(n, rng)
        assert len(rows) == n and len(np.unique(rows)) == n
        for j, L in enumerate(enc.nlev):
            counts = np.bincount(enc.codes[rows, j], minlength=L)
            if n >= L:
                assert counts.max() - counts.min() <= 1, (j, counts)
            else:
                assert counts.max() == 1  # n < L: n distinct values, as LHS would


def test_subsets_on_constrained_data_are_valid_and_nearly_balanced():
    enc = encode(dataset(constrained=True), "y")
    s = SubsetSampler(enc.codes, enc.nlev)
    rng = np.random.default_rng(5)
    spread = []
    for _ in range(50):
        rows = s.sample(24, rng)
        assert len(np.unique(rows)) == 24 and rows.max() < len(enc.y)
        spread.append(max(np.ptp(np.bincount(enc.codes[rows, j], minlength=L))
                          for j, L in enumerate(enc.nlev)))
    # Missing combinations force some imbalance, but the repair keeps it small.
    assert np.mean(spread) <= 3
    # Whole dataset asked for: everything, once.
    assert sorted(s.sample(len(enc.y), rng)) == list(range(len(enc.y)))


def test_subsets_differ_between_seeds_and_repeat_for_a_seed():
    enc = encode(dataset(), "y")
    s = SubsetSampler(enc.codes, enc.nlev)
    a = s.sample(10, np.random.default_rng(1))
    b = s.sample(10, np.random.default_rng(1))
    c = s.sample(10, np.random.default_rng(2))
    assert np.array_equal(a, b) and not np.array_equal(np.sort(a), np.sort(c))


def test_evaluate_finds_truth_more_often_with_more_data_and_is_reproducible():
    df = dataset()
    one = evaluate(df, "y", [0.03, 0.1, 0.5], repeats=60, seed=7, n_jobs=1)
    assert one.truth == ["A", "D", "B"]
    assert one.sizes == [4, 14, 72]
    tab = one.table()
    assert list(tab.columns) == ["fraction", "configs", "rank1_correct", "rank2_correct",
                                 "rank3_correct", "all_correct"]
    assert tab["rank1_correct"].iloc[-1] == 1.0 and tab["all_correct"].iloc[-1] == 1.0
    assert tab["rank1_correct"].iloc[0] < 1.0  # 4 configurations are not enough
    assert (np.diff(tab["rank1_correct"]) >= 0).all()
    two = evaluate(df, "y", [0.03, 0.1, 0.5], repeats=60, seed=7, n_jobs=2)
    pd.testing.assert_frame_equal(one.table(), two.table())  # processes do not matter
    other = evaluate(df, "y", [0.03, 0.1, 0.5], repeats=60, seed=8, n_jobs=1)
    assert not one.table().equals(other.table())


def test_evaluate_outputs_and_errors():
    res = evaluate(dataset(), "y", [0.05, 0.2], repeats=10, ranks=2, n_jobs=1)
    d = res.to_dict()
    assert [t["param"] for t in d["truth"]] == ["A", "D"]
    assert len(d["table"]) == 2
    fig = res.plot()
    assert fig.axes[0].get_xscale() == "log"
    import matplotlib.pyplot as plt

    plt.close(fig)
    with pytest.raises(AnalysisError, match="1.5"):
        evaluate(dataset(), "y", [1.5], repeats=5)
    with pytest.raises(AnalysisError, match="repeats"):
        evaluate(dataset(), "y", [0.5], repeats=0)
    with pytest.raises(AnalysisError, match="'nope'"):
        evaluate(dataset(), "nope", [0.5], repeats=5)

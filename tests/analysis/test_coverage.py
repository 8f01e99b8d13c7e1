"""Coverage analysis on synthetic metric sets with planted clusters: the clusters are
found, and the benchmark whose runs span more of them scores higher (seed 002's question)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from storlab.analysis.coverage import ALL, coverage
from storlab.errors import AnalysisError

METRICS = ["read_iops", "write_iops", "read_clat_p99_us", "write_clat_p99_us", "usr_cpu",
           "sys_cpu"]


def planted(seed: int = 3, noise: float = 0.4) -> pd.DataFrame:
    """Four behaviour clusters in six metrics. `fio` (parameters varied) visits all four;
    `postmark`, `iozone` and `sysbench` (fixed settings) sit in one cluster each, two of
    them in the same one."""
    rng = np.random.default_rng(seed)
    centers = np.array([[8, 1, 2, 9, 1, 5], [1, 8, 9, 2, 5, 1],
                        [5, 5, 5, 5, 9, 9], [9, 9, 1, 1, 2, 2]], dtype=float) * 1.5
    rows = []

    def add(bench: str, cluster: int, n: int, **extra: object) -> None:
        for _ in range(n):
            v = centers[cluster] + rng.normal(0, noise, len(METRICS))
            rows.append({"benchmark": bench, **dict(zip(METRICS, v)), "planted": cluster,
                         **extra})

    for c in range(4):
        add("fio", c, 7, iodepth=[1, 4, 16, 64][c])
    add("postmark", 0, 9, iodepth=1)
    add("iozone", 2, 9, iodepth=1)
    add("sysbench", 2, 6, iodepth=1)
    return pd.DataFrame(rows).sample(frac=1.0, random_state=seed).reset_index(drop=True)


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    return planted()


@pytest.fixture(scope="module")
def result(df: pd.DataFrame):  # noqa: ANN201
    return coverage(df, "benchmark", metrics=METRICS, seed=0)


def test_planted_clusters_are_found(df: pd.DataFrame, result) -> None:  # noqa: ANN001
    from sklearn.metrics import adjusted_rand_score  # (here: 1 s at collection otherwise)

    assert result.k == 4  # silhouette picks the planted number
    assert adjusted_rand_score(df["planted"], result.kmeans) > 0.95
    assert adjusted_rand_score(df["planted"], result.hier) > 0.95
    assert result.agreement > 0.95  # Ward and k-means tell the same story
    assert max(result.k_scores, key=result.k_scores.get) == 4


def test_benchmark_spanning_more_clusters_scores_higher(result) -> None:  # noqa: ANN001
    t = result.table().set_index("benchmark")
    assert t.loc["fio", "clusters"] == 4 and t.loc["fio", "cluster_share"] == 1.0
    for b in ("postmark", "iozone", "sysbench"):
        assert t.loc[b, "clusters"] == 1
        assert t.loc["fio", "spread"] > 3 * t.loc[b, "spread"]
        assert t.loc["fio", "range_share"] > t.loc[b, "range_share"]
    assert result.best() == "fio"
    # The seed's conclusion: the fixed-setting benchmarks together reach fewer clusters
    # than the one benchmark with varied parameters.
    together = set()
    for b in ("postmark", "iozone", "sysbench"):
        together |= set(t.loc[b, "reached"].split())
    assert len(together) == 2 < t.loc["fio", "clusters"]
    assert t.loc[ALL, "runs"] == len(result.labels) and t.loc[ALL, "clusters"] == 4
    ct = result.cluster_table()
    assert ct.loc["fio"].tolist() == [7, 7, 7, 7]
    assert ct.to_numpy().sum() == len(result.labels)


def test_default_metrics_skip_factors_bookkeeping_and_empty_columns(df: pd.DataFrame) -> None:
    d = df.assign(config_id=np.arange(len(df), dtype=float), _n_ok=1.0, constant=1.0,
                  trim_iops=np.where(np.arange(len(df)) < 5, np.arange(len(df)), np.nan))
    r = coverage(d, "benchmark", seed=0, exclude=["planted"])
    assert r.metrics == METRICS  # not iodepth (int factor), config_id, _n_ok, constant
    assert any("trim_iops" in x for x in r.dropped)  # mostly empty: left out, said so
    assert r.k == 4


def test_deterministic_for_a_seed_and_explicit_k(df: pd.DataFrame) -> None:
    a = coverage(df, "benchmark", metrics=METRICS, n_clusters=2, seed=5)
    b = coverage(df, "benchmark", metrics=METRICS, n_clusters=2, seed=5)
    assert a.k == 2 and np.array_equal(a.kmeans, b.kmeans)
    assert np.allclose(a.scores, b.scores)
    assert a.table().equals(b.table())


def test_log_metrics_spanning_decades() -> None:
    # Two behaviours 100x apart in throughput; on a linear scale the high one's noise
    # dominates, on a log scale both are tight clusters.
    rng = np.random.default_rng(0)
    lo = rng.lognormal(np.log([100, 50, 2000]), 0.05, size=(12, 3))
    hi = rng.lognormal(np.log([10000, 5000, 20]), 0.05, size=(12, 3))
    d = pd.DataFrame(np.vstack([lo, hi]), columns=["iops", "bw", "lat_us"])
    d["bench"] = ["a"] * 6 + ["b"] * 6 + ["b"] * 12
    r = coverage(d, "bench", log=True, seed=0)
    assert r.k == 2 and r.log
    t = r.table().set_index("bench")
    assert t.loc["b", "clusters"] == 2 and t.loc["a", "clusters"] == 1
    for kind in ("scatter", "dendrogram", "coverage"):  # also with a single component
        assert r.plot(kind).axes
    with pytest.raises(AnalysisError, match="non-negative"):
        coverage(d.assign(iops=-d["iops"]), "bench", log=True)


def test_bad_input_is_a_clear_error(df: pd.DataFrame) -> None:
    with pytest.raises(AnalysisError, match="no column 'workload'"):
        coverage(df, "workload")
    with pytest.raises(AnalysisError, match="not found"):
        coverage(df, "benchmark", metrics=["read_iops", "nope"])
    with pytest.raises(AnalysisError, match="at least two metric"):
        coverage(df, "benchmark", metrics=["read_iops"])
    with pytest.raises(AnalysisError, match="at least 4 runs"):
        coverage(df.head(3), "benchmark", metrics=METRICS)


def test_plots_are_labelled_figures(result) -> None:  # noqa: ANN001
    from matplotlib.figure import Figure

    for kind in ("scatter", "dendrogram", "coverage"):
        fig = result.plot(kind)
        assert isinstance(fig, Figure)
        for ax in fig.axes:
            if ax.get_visible() and ax.has_data() and ax.get_label() != "<colorbar>":
                assert ax.get_xlabel() or ax.get_ylabel(), kind
    with pytest.raises(AnalysisError, match="scatter"):
        result.plot("pie")


def test_json_is_serialisable(result) -> None:  # noqa: ANN001
    d = json.loads(json.dumps(result.to_dict()))
    assert d["best"] == "fio" and d["clusters"] == 4
    assert d["cluster_counts"]["fio"] == {"1": 7, "2": 7, "3": 7, "4": 7}


def test_cli(tmp_path: Path, df: pd.DataFrame, storlab_quick: Any) -> None:
    csv = tmp_path / "runs.csv"
    df.drop(columns=["planted"]).to_csv(csv, index=False)
    cmd = ["coverage", str(csv), "--by", "benchmark"]
    p = storlab_quick(*cmd, "--json", "-o", str(tmp_path / "c.html"))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["best"] == "fio" and out["clusters"] == 4
    page = (tmp_path / "c.html").read_text()
    assert page.count("data:image/png;base64,") == 3 and "http" not in page.split("<body>")[1]
    p = storlab_quick(*cmd[:-1], "suite")
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "no column 'suite'" in p.stderr


def test_ties_are_broken_the_same_way_whatever_the_row_order() -> None:
    """Eight benchmarks of one run each tie on everything (one cluster, no spread): the
    answer is the first by name in any row order (it was the first row's group), and the
    tie is reported, not presented as a finding."""
    rng = np.random.default_rng(1)
    names = ["zeta", "mu", "alpha", "kappa", "beta", "omega", "delta", "gamma"]
    df = pd.DataFrame(rng.normal(size=(8, 4)) + np.repeat([[0.0], [6.0]], 4, axis=0),
                      columns=["read_iops", "write_iops", "usr_cpu", "sys_cpu"])
    df["benchmark"] = names
    for rows in (df, df.iloc[::-1], df.sample(frac=1.0, random_state=3)):
        r = coverage(rows.reset_index(drop=True), "benchmark", n_clusters=2, seed=0)
        assert r.best() == "alpha"
        assert r.tied_with_best() == sorted(names)[1:]
        assert r.to_dict()["best_tied_with"] == sorted(names)[1:]
    # no tie where the measures differ: fio (four clusters) is not "tied"
    res = coverage(planted(), "benchmark", metrics=METRICS, seed=0)
    assert res.best() == "fio" and res.tied_with_best() == []
    assert list(res.ranking()["benchmark"])[0] == "fio"

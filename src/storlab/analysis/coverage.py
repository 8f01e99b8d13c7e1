"""Benchmark coverage: how much of the observed space of behaviours each benchmark (or
workload) reaches (seed 002, "Benchmark coverage testing").

Every run is a vector of metrics (IOPS, bandwidth, latency percentiles, CPU ...). The
vectors are standardised (z-scores; optionally after a log, since storage metrics span
orders of magnitude), reduced to independent components with scikit-learn's FastICA (the
components "have no physical meaning"; they are the axes along which runs differ
independently), and clustered twice: k-means on the component scores (k chosen by the
silhouette score unless given) and Ward hierarchical clustering with scipy (the
dendrogram). A benchmark covers much when its runs reach many of the clusters and spread
widely over the components; the seed's conclusion is that one benchmark with varied
parameters reaches more than several benchmarks with fixed settings.

Per group the result reports: runs, clusters reached (and their share of all clusters),
spread (RMS distance of its runs from their centroid, in component units; every component
has unit variance over all runs) and range share (mean over components of the group's
range over the overall range).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import AnalysisError
from ..fileio import BOOKKEEPING
from ..jsonutil import to_jsonable
from ..result_shape import Result

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

PLOT_KINDS = ("scatter", "dendrogram", "coverage")
ALL = "(all)"


@dataclass
class CoverageResult(Result):
    """Result of `coverage`: per-group table, component scores, both clusterings."""

    PLOT_KINDS = PLOT_KINDS
    ERROR = AnalysisError

    by: str
    metrics: list[str]
    groups: list[str]
    labels: np.ndarray            # group of each kept run
    scores: np.ndarray            # (n_runs, n_components) independent component scores
    mixing: pd.DataFrame          # metric x component loadings (how metrics build each IC)
    kmeans: np.ndarray            # k-means cluster of each run (0..k-1)
    hier: np.ndarray              # hierarchical (Ward) cluster of each run (0..k-1)
    linkage: np.ndarray = field(repr=False)
    k: int = 0
    k_scores: dict[int, float] = field(default_factory=dict)  # silhouette per candidate k
    agreement: float = math.nan   # adjusted Rand index between k-means and Ward
    rows: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)  # kept rows
    dropped: list[str] = field(default_factory=list)
    log: bool = False
    seed: int = 0

    def to_frame(self) -> pd.DataFrame:
        """One row per group (plus `(all)`): runs, clusters reached, share, spread, range."""
        out = []
        for g in [*self.groups, ALL]:
            m = np.ones(len(self.labels), bool) if g == ALL else self.labels == g
            s = self.scores[m]
            reached = sorted({int(c) for c in self.kmeans[m]})
            spread = float(np.sqrt(((s - s.mean(axis=0)) ** 2).sum(axis=1).mean())) \
                if len(s) > 1 else 0.0
            full = self.scores.max(axis=0) - self.scores.min(axis=0)
            rng = s.max(axis=0) - s.min(axis=0)
            range_share = float(np.mean(np.where(full > 0, rng / np.where(full > 0, full, 1), 0)))
            out.append({self.by: g, "runs": int(m.sum()), "clusters": len(reached),
                        "cluster_share": len(reached) / self.k if self.k else math.nan,
                        "spread": spread, "range_share": range_share,
                        "reached": " ".join(str(c + 1) for c in reached)})
        return pd.DataFrame(out)

    def group_rows(self) -> pd.DataFrame:
        """`to_frame` without its `(all)` row: one row per group."""
        t = self.to_frame()
        return t[t[self.by] != ALL].copy()

    def cluster_table(self) -> pd.DataFrame:
        """Runs of each group in each k-means cluster (groups x clusters counts)."""
        ct = pd.crosstab(pd.Series(self.labels, name=self.by),
                         pd.Series(self.kmeans + 1, name="cluster"))
        return ct.reindex(index=self.groups, columns=range(1, self.k + 1), fill_value=0)

    def best(self) -> str:
        """The group that covers most: most clusters, then widest spread, then widest range
        share, then most runs, then the first name in sorted order. Spreads are compared
        to 9 significant digits: the same runs in another row order give sums that differ
        in the last bits, and the answer must not depend on the order of the rows."""
        return str(self.ranking().iloc[0][self.by])

    def tied_with_best(self) -> list[str]:
        """The groups equal to `best` on every measure (only the name put it first)."""
        rank = self.ranking()
        return [str(g) for g in rank[self.by].iloc[1:][rank["tied"].iloc[1:].cummin()]]

    def ranking(self) -> pd.DataFrame:
        """The groups' table (without `(all)`) in the order `best` ranks them; `tied`: True
        where a group ties the one above it on every measure (the name decided)."""
        t = self.group_rows()
        keys = pd.DataFrame({
            "c": -t["clusters"],
            "s": -t["spread"].map(lambda v: float(f"{v:.9g}")),
            "r": -t["range_share"].map(lambda v: float(f"{v:.9g}")),
            "n": -t["runs"], "name": t[self.by].astype(str)}, index=t.index)
        keys = keys.sort_values(["c", "s", "r", "n", "name"], kind="stable")
        t = t.loc[keys.index].reset_index(drop=True)
        same = keys[["c", "s", "r", "n"]].reset_index(drop=True)
        t["tied"] = (same == same.shift()).all(axis=1)
        return t

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({
            "by": self.by, "metrics": self.metrics, "log": self.log, "seed": self.seed,
            "n_runs": int(len(self.labels)), "components": int(self.scores.shape[1]),
            "clusters": self.k, "silhouette": {str(k): v for k, v in self.k_scores.items()},
            "agreement_ari": self.agreement, "best": self.best(),
            "best_tied_with": self.tied_with_best(), "dropped": self.dropped,
            "groups": self.to_frame().to_dict("records"),
            "cluster_counts": {str(g): {str(c): int(n) for c, n in row.items()}
                               for g, row in self.cluster_table().iterrows()},
            "mixing": {str(m): {str(c): float(v) for c, v in row.items()}
                       for m, row in self.mixing.iterrows()},
        })

    def plot(self, kind: str | None = None) -> Figure:
        """scatter: runs on the first two components, coloured by group, clusters outlined;
        dendrogram: Ward clustering of the runs, leaves coloured by group;
        coverage: clusters reached and spread per group, with the group x cluster counts."""
        from ..plotstyle import styled
        from .plots import coverage_figure

        kind = self.plot_kind(kind)
        with styled():
            return coverage_figure(self, kind)


# --------------------------------------------------------------------------- analysis
def default_metrics(df: pd.DataFrame, by: str, exclude: Sequence[str] = ()) -> list[str]:
    """Numeric measurement columns: floats that are not bookkeeping, private (`_x`), the
    grouping column or `exclude` (factors), and that vary."""
    out = []
    for c in df.columns:
        name = str(c)
        if c == by or name in BOOKKEEPING or name.startswith("_") or c in exclude:
            continue
        col = df[c]
        if pd.api.types.is_bool_dtype(col) or not pd.api.types.is_float_dtype(col):
            continue
        if col.nunique(dropna=True) > 1:
            out.append(c)
    return out


def coverage(results: pd.DataFrame, by: str, metrics: Sequence[str] | None = None,
             n_components: int | None = None, n_clusters: int | None = None,
             log: bool = False, seed: int = 0, max_clusters: int = 10,
             exclude: Sequence[str] = (), source: str = "results") -> CoverageResult:
    """Standardise the metric vectors, extract independent components, cluster them and
    measure what each group of runs (`by`: benchmark, workload) covers."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA, FastICA
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.metrics import adjusted_rand_score, silhouette_score

    if by not in results.columns:
        raise AnalysisError(f"{source}: no column {by!r} to group runs by (columns: "
                            f"{', '.join(map(str, results.columns))})")
    dropped: list[str] = []
    if metrics:
        metrics = list(metrics)
        missing = [m for m in metrics if m not in results.columns]
        if missing:
            raise AnalysisError(f"{source}: metric column(s) {missing} not found")
    else:
        metrics = default_metrics(results, by, exclude)
    if len(metrics) < 2:
        raise AnalysisError(f"{source}: coverage needs at least two metric columns "
                            f"(found {metrics or 'none'}); name them with --metrics")
    data = results[metrics].apply(pd.to_numeric, errors="coerce")
    # A metric missing in many runs (write latency of read-only runs) would drop those
    # runs; leave the metric out instead, and say so.
    for m in list(metrics):
        if data[m].isna().mean() >= 0.2:
            dropped.append(f"metric {m}: empty in {int(data[m].isna().sum())} of "
                           f"{len(data)} runs")
            metrics.remove(m)
    data = data[metrics]
    keep = data.notna().all(axis=1) & results[by].notna()
    if (~keep).any():
        dropped.append(f"{int((~keep).sum())} run(s) with an empty metric or {by}")
    data, groups_col = data[keep], results.loc[keep, by].astype(str)
    x = data.to_numpy(dtype=float)
    if log:
        if (x <= 0).any():
            # log1p keeps zero throughputs (a read-only run's writes) finite
            if (x < 0).any():
                raise AnalysisError(f"{source}: --log needs non-negative metrics")
            x = np.log1p(x)
        else:
            x = np.log(x)
    sd = x.std(axis=0)
    const = [m for m, s in zip(metrics, sd) if s == 0]
    if const:
        dropped += [f"metric {m}: constant" for m in const]
        x = x[:, sd > 0]
        metrics = [m for m, s in zip(metrics, sd) if s > 0]
    n = len(x)
    if n < 4 or len(metrics) < 2:
        raise AnalysisError(f"{source}: coverage needs at least 4 runs and 2 varying metrics "
                            f"(have {n} runs, {len(metrics)} metrics"
                            + (f"; left out: {'; '.join(dropped)}" if dropped else "") + ")")
    z = (x - x.mean(axis=0)) / x.std(axis=0)

    # Components: as many as it takes to explain 95 % of the variance, so that noise
    # dimensions (scaled to unit variance like every component) do not become
    # "independent behaviours" of their own and split the clusters.
    max_c = min(len(metrics), n - 1)
    if n_components is None:
        ev = PCA().fit(z).explained_variance_ratio_
        n_components = int(np.searchsorted(np.cumsum(ev), 0.95) + 1)
        n_components = max(1, min(n_components, max_c))
    elif not 1 <= n_components <= max_c:
        raise AnalysisError(f"components {n_components} must be between 1 and {max_c}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ica = FastICA(n_components=n_components, whiten="unit-variance", random_state=seed,
                      max_iter=1000, tol=1e-3)
        s = ica.fit_transform(z)
    s = (s - s.mean(axis=0)) / np.where(s.std(axis=0) > 0, s.std(axis=0), 1.0)
    mixing = pd.DataFrame(ica.mixing_, index=metrics,
                          columns=[f"IC{i + 1}" for i in range(n_components)])

    # k-means, with k chosen by silhouette (well-separated clusters score near 1).
    k_scores: dict[int, float] = {}
    uniq = len(np.unique(np.round(s, 9), axis=0))
    if n_clusters is None:
        best_k, best_s = 1, -1.0
        for k in range(2, min(max_clusters, uniq - 1, n - 1) + 1):
            lab = KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(s)
            sc = float(silhouette_score(s, lab))
            k_scores[k] = sc
            if sc > best_s + 1e-9:
                best_k, best_s = k, sc
        n_clusters = best_k
    elif not 1 <= n_clusters <= min(uniq, n):
        raise AnalysisError(f"clusters {n_clusters} must be between 1 and {min(uniq, n)} "
                            "(distinct runs)")
    km = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit_predict(s)
    # ICA gives components in no particular order; put first those that separate the
    # clusters most (between-cluster share of their variance), so that the scatter of
    # IC1 x IC2 shows the structure the clustering found.
    if n_clusters > 1:
        between = np.array([sum((km == c).sum() * s[km == c, j].mean() ** 2
                                for c in range(n_clusters)) for j in range(s.shape[1])])
        order = np.argsort(-between, kind="stable")
        s = s[:, order]
        mixing = mixing.iloc[:, order]
        mixing.columns = [f"IC{i + 1}" for i in range(n_components)]
    km = _relabel(km, s)
    z_link = linkage(s, method="ward")
    hier = fcluster(z_link, t=n_clusters, criterion="maxclust") - 1
    agreement = float(adjusted_rand_score(km, hier)) if n_clusters > 1 else 1.0

    labels = groups_col.to_numpy()
    groups = list(pd.unique(labels))
    return CoverageResult(by=by, metrics=list(metrics), groups=groups, labels=labels,
                          scores=s, mixing=mixing, kmeans=km, hier=hier, linkage=z_link,
                          k=int(n_clusters), k_scores=k_scores, agreement=agreement,
                          rows=results.loc[keep].reset_index(drop=True), dropped=dropped,
                          log=log, seed=seed)


def _relabel(lab: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Number clusters by their position along IC1, so the numbering is stable across
    k-means restarts and readable on the scatter plot."""
    order = np.argsort([s[lab == c, 0].mean() for c in range(lab.max() + 1)])
    new = np.empty_like(order)
    new[order] = np.arange(len(order))
    return new[lab]

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
        t = self.to_frame()
        t = t[t[self.by] != ALL].copy()
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
        from .. import plotstyle

        kind = self.plot_kind(kind)
        with plotstyle.styled():
            return {"scatter": _scatter, "dendrogram": _dendrogram,
                    "coverage": _bars}[kind](self)


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


# --------------------------------------------------------------------------- plots
def _group_colors(r: CoverageResult) -> dict[str, str]:
    from ..plotstyle import PALETTE

    return {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(r.groups)}


def _scatter(r: CoverageResult) -> Figure:
    from ..plotstyle import subplots

    # Two panels when there are three or more components: clusters that overlap on
    # IC1 x IC2 separate on the next pair.
    nc = r.scores.shape[1]
    pairs = [(0, 1)] if nc < 3 else [(0, 1), (2, 3 if nc > 3 else 0)]
    if nc == 1:
        pairs = [(0, -1)]
    fig, axes = subplots(1, len(pairs), figsize=(5.2 * len(pairs) + 0.6, 4.6),
                             squeeze=False)
    for ax, (i, j) in zip(axes[0], pairs):
        _scatter_panel(r, ax, i, j)
    # Below the panels: clusters fill the axes, so a legend inside would cover runs.
    h, lab = axes[0][-1].get_legend_handles_labels()
    fig.legend(h, lab, loc="outside lower center", ncol=min(len(lab), 4), title=r.by,
               title_fontsize=8)
    fig.suptitle(f"Runs on the independent components, by {r.by}")
    return fig


def _scatter_panel(r: CoverageResult, ax: Any, i: int, j: int) -> None:
    from scipy.spatial import ConvexHull, QhullError

    from ..plotstyle import STYLE

    if j >= 0:
        s = np.column_stack([r.scores[:, i], r.scores[:, j]])
    else:  # one component: a strip per group
        gi = np.array([r.groups.index(g) for g in r.labels], dtype=float)
        jitter = np.random.default_rng(0).uniform(-0.15, 0.15, len(gi))
        s = np.column_stack([r.scores[:, i], gi + jitter])
    for c in range(r.k):  # clusters as grey outlines, numbered at their centre
        pts = s[r.kmeans == c]
        if len(pts) >= 3:
            try:
                h = ConvexHull(pts)
                v = np.append(h.vertices, h.vertices[0])
                ax.fill(pts[v, 0], pts[v, 1], color=STYLE["muted"], alpha=0.3, lw=0)
            except QhullError:  # collinear points
                pass
        cx, cy = pts.mean(axis=0)
        ax.annotate(f"C{c + 1}", (cx, cy), xytext=(0, 12), textcoords="offset points",
                    ha="center", va="bottom", fontsize=8.5, color="#222222",
                    fontweight="bold", zorder=5,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                          "alpha": 0.8})
    colors = _group_colors(r)
    markers = "osD^vP*X"
    for n, g in enumerate(r.groups):
        m = r.labels == g
        ax.scatter(s[m, 0], s[m, 1], s=26, color=colors[g], marker=markers[n % len(markers)],
                   label=f"{g} ({len(set(r.kmeans[m]))}/{r.k} clusters)", alpha=0.85,
                   edgecolors="white", linewidths=0.4, zorder=3)
    ax.set_xlabel(f"IC{i + 1} (standardised score)")
    if j >= 0:
        ax.set_ylabel(f"IC{j + 1} (standardised score)")
    else:
        ax.set_yticks(range(len(r.groups)), r.groups)
        ax.set_ylim(-0.6, len(r.groups) - 0.4)
        ax.set_ylabel(r.by)


def _dendrogram(r: CoverageResult) -> Figure:
    from matplotlib.patches import Patch
    from scipy.cluster.hierarchy import dendrogram

    from ..plotstyle import subplots

    n = len(r.labels)
    fig, ax = subplots(figsize=(max(6.4, min(0.12 * n + 2, 12)), 4.4))
    colors = _group_colors(r)
    cut = None
    if r.k > 1:  # the height that cuts the tree into k clusters
        h = r.linkage[:, 2]
        cut = float((h[-r.k] + h[-r.k + 1]) / 2) if r.k < len(h) + 1 else None
    many = n > 2000  # beyond this even the colour strip is mush: show the top of the tree
    # Links in one neutral colour; the groups are a colour strip under the leaves (text
    # labels, one per run, are unreadable beyond a few dozen runs and repeat one name).
    d = dendrogram(r.linkage, ax=ax, no_labels=True, truncate_mode="lastp" if many else None,
                   p=40, link_color_func=lambda _: "#555555")
    top = float(r.linkage[:, 2].max()) if len(r.linkage) else 1.0
    handles: list = []
    if not many:
        leaves = np.asarray(d["leaves"])
        xs = 5.0 + 10.0 * np.arange(len(leaves))
        groups = [str(r.labels[i]) for i in leaves]
        ax.bar(xs, 0.05 * top, width=10.0, bottom=-0.075 * top,
               linewidth=0.5 if n <= 200 else 0, edgecolor="white",  # one cell per run
               color=[colors.get(g, "#000000") for g in groups])
        ax.set_ylim(-0.09 * top, top * 1.06)
        ax.set_yticks([t for t in ax.get_yticks() if 0 <= t <= top * 1.06])
        ax.spines["left"].set_bounds(0, top * 1.06)
        ax.spines["bottom"].set_visible(False)
        handles = [Patch(facecolor=colors[g], label=str(g)) for g in r.groups]
        ax.set_xlabel(f"{n} runs, coloured by {r.by}")
    if cut is not None:
        handles.append(ax.axhline(cut, color="#555555", ls="--", lw=0.9,
                                  label=f"cut into {r.k} clusters"))
    if handles:
        ax.legend(handles=handles, loc="best", title=r.by, title_fontsize=8)
    ax.grid(axis="x", visible=False)
    ax.set_ylabel("Ward linkage distance (standardised units)")
    ax.set_title("Cluster dendrogram of runs" + ("; top 40 merges" if many else ""))
    return fig


def _bars(r: CoverageResult) -> Figure:
    from ..plotstyle import subplots

    t = r.table()
    t = t[t[r.by] != ALL]
    ct = r.cluster_table()
    colors = _group_colors(r)
    fig, (ax1, ax2) = subplots(1, 2, figsize=(9.6, 0.35 * len(t) + 2.6),
                                   gridspec_kw={"width_ratios": [1, 1.2]})
    y = np.arange(len(t))
    ax1.barh(y, t["clusters"], color=[colors[g] for g in t[r.by]], height=0.6)
    ax1.axvline(r.k, color="#555555", ls="--", lw=0.9, label=f"all clusters ({r.k})")
    for yi, (c, sp) in enumerate(zip(t["clusters"], t["spread"])):
        ax1.annotate(f"spread {sp:.2f}", (c, yi), xytext=(4, 0), textcoords="offset points",
                     va="center", fontsize=7.5)
    ax1.set_yticks(y, t[r.by])
    ax1.invert_yaxis()
    ax1.set_xlim(0, r.k * 1.45 + 0.5)
    ax1.set_xlabel("k-means clusters reached (count)")
    ax1.grid(axis="y", visible=False)
    ax1.legend(loc="lower right")
    ax1.set_title("Clusters reached per " + r.by)
    im = ax2.imshow(ct.to_numpy(), aspect="auto", cmap="Blues")
    for (i, j), v in np.ndenumerate(ct.to_numpy()):
        if v:
            ax2.text(j, i, str(v), ha="center", va="center", fontsize=8,
                     color="white" if v > ct.to_numpy().max() / 2 else "black")
    ax2.set_xticks(range(r.k), [f"C{c}" for c in ct.columns])
    ax2.set_yticks(range(len(ct)), ct.index)
    ax2.grid(False)
    ax2.set_xlabel("cluster")
    ax2.set_title("Runs per cluster (count)")
    fig.colorbar(im, ax=ax2, shrink=0.8, label="runs")
    return fig

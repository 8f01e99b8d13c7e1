"""The evaluation harness of Carver's section 5.4: how small a study finds the right parameters?

Given a complete dataset (every configuration measured) as ground truth, and a list of
fractions: for each fraction, repeat R times (default 1000) — draw a random subset of that
many configurations that is compatible with Latin Hypercube Sampling, run the greedy
selection on it, and record whether the 1st, 2nd, 3rd selected parameters equal those the
full dataset gives. The result is the table and plot of the paper's Figure 5.

"LHS-compatible subset" (`lhs_subset`): every parameter's values are covered as evenly as
the subset size allows (each of L values floor(n/L) or ceil(n/L) times), as an LHS design of
n runs would; the target combinations are drawn at random and looked up in the dataset. When
a combination is missing (constrained spaces) or drawn twice, the slot is filled by the
unused configuration that best repairs the per-value coverage (random among equals). This is
a row-subset sampler over existing data, not a design generator: to plan a real study use the
core LHS (`storlab design SPACE.yaml --kind lhs --runs N`).

Repetitions run in `n_jobs` processes (default 2); each repetition has its own seed from
`np.random.SeedSequence(seed)`, so results do not depend on the number of processes.
"""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..errors import AnalysisError
from ..jsonutil import to_jsonable
from ..result_shape import Result
from .importance import Aggregate, encode, greedy_order

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure


# --------------------------------------------------------------------------- sampler
class SubsetSampler:
    """Draws LHS-compatible row subsets of a coded dataset (see module docstring)."""

    def __init__(self, codes: np.ndarray, nlev: np.ndarray):
        self.codes = np.ascontiguousarray(codes, dtype=np.int64)
        self.nlev = np.asarray(nlev, dtype=np.int64)
        n, k = self.codes.shape
        self.offsets = np.concatenate([[0], np.cumsum(self.nlev)[:-1]]).astype(np.int64)
        self.flat = self.codes + self.offsets  # row -> index of each (param, value) counter
        self.n_cells = int(self.nlev.sum())
        self.onehot_t = np.zeros((self.n_cells, n), dtype=np.float32)
        for j in range(k):
            self.onehot_t[self.flat[:, j], np.arange(n)] = 1.0
        total = 1
        for L in self.nlev:
            total *= int(L)
        self.lookup = total < 2**62
        if self.lookup:
            # Mixed-radix weights: key = codes @ weights, as importance.combine computes.
            w = np.ones(k, dtype=np.int64)
            for j in range(k - 2, -1, -1):
                w[j] = w[j + 1] * self.nlev[j + 1]
            self.weights = w
            keys = self.codes @ w
            self.cell_param = np.repeat(np.arange(k), self.nlev)
            self.cell_level = np.concatenate([np.arange(L) for L in self.nlev]).astype(np.int64)
            self.order = np.argsort(keys, kind="stable")
            self.sorted_keys = keys[self.order]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Row indices of a subset of `n` configurations."""
        N, k = self.codes.shape
        if n >= N:
            return np.arange(N)
        target = np.empty((n, k), dtype=np.int64)
        for j in range(k):
            L = int(self.nlev[j])
            col = np.concatenate([np.repeat(np.arange(L), n // L),
                                  rng.choice(L, n % L, replace=False)])
            target[:, j] = rng.permutation(col)
        keep = np.zeros(n, dtype=bool)  # targets that found their own configuration
        chosen = np.empty(0, dtype=np.int64)
        if self.lookup:
            self._swap_repair(target, rng)
            tk = self.tkey(target)
            pos = np.minimum(np.searchsorted(self.sorted_keys, tk), N - 1)
            hit = np.flatnonzero(self.sorted_keys[pos] == tk)
            rows = self.order[pos[hit]]
            _, first = np.unique(rows, return_index=True)
            first = np.sort(first)
            chosen = rows[first]
            keep[hit[first]] = True
        taken = np.zeros(N, dtype=bool)
        taken[chosen] = True
        rest = target[~keep]
        if len(rest) == 0:
            return chosen
        # Repair, for each target without its own configuration (absent from the data, or
        # drawn twice): first a random free configuration differing in one parameter only
        # (found by key look-up), else the free one agreeing on most parameters.
        extra: list[int] = []
        if self.lookup:
            nb = self._neighbours(rest)
            nb = np.take_along_axis(nb, rng.random(nb.shape).argsort(axis=1), axis=1)
            left = []
            for i, cand in enumerate(nb.tolist()):
                for r in cand:
                    if r >= 0 and not taken[r]:
                        extra.append(r)
                        taken[r] = True
                        break
                else:
                    left.append(i)
            rest = rest[left]
        if len(rest):
            jitter = rng.random(N).astype(np.float32) * 0.5  # random tie-break
            for t in rest:
                score = self.onehot_t[t + self.offsets].sum(axis=0) + jitter
                score[taken] = -np.inf
                r = int(np.argmax(score))
                extra.append(r)
                taken[r] = True
        return np.concatenate([chosen, np.array(extra, dtype=np.int64)])

    def _swap_repair(self, target: np.ndarray, rng: np.random.Generator,
                     rounds: int = 60) -> None:
        """Make target rows that are absent from the data, or drawn twice, valid and distinct
        by swapping one column's value with another row (the core LHS repairs constraints
        the same way): swaps keep every column's value counts, so the balance stays exact.

        All bad rows propose a random (partner, column) swap at once each round; a swap is
        kept when both new rows exist in the data and are new to the subset. Rows no round
        repairs are left for the caller's nearest-configuration repair."""
        n, k = target.shape
        keys = self.tkey(target)
        _, first = np.unique(keys, return_index=True)
        bad = ~self._exists(keys)
        dup = np.ones(n, dtype=bool)
        dup[first] = False
        bad |= dup
        w = self.weights
        stale = 0
        for _ in range(rounds):
            idx = np.flatnonzero(bad)
            if len(idx) == 0 or stale >= 15:  # done, or stuck: leave the rest to the caller
                return
            stale += 1
            c = rng.integers(0, n, len(idx))
            j = rng.integers(0, k, len(idx))
            delta = (target[c, j] - target[idx, j]) * w[j]
            ki = keys[idx] + delta
            kc = keys[c] - delta
            cur = np.sort(keys)
            fine = (delta != 0) & ~bad[c] & self._exists(ki) & self._exists(kc) \
                & (ki != kc) & ~_member(ki, cur) & ~_member(kc, cur)
            partners: set[int] = set()
            new_keys: set[int] = set()
            for m in np.flatnonzero(fine).tolist():
                a, b, col = int(idx[m]), int(c[m]), int(j[m])
                ka, kb = int(ki[m]), int(kc[m])
                if b in partners or ka in new_keys or kb in new_keys:
                    continue  # another swap of this round already took the partner or key
                partners.add(b)
                new_keys.update((ka, kb))
                target[a, col], target[b, col] = target[b, col], target[a, col]
                keys[a], keys[b] = ka, kb
                bad[a] = False
                stale = 0

    def _exists(self, keys: np.ndarray) -> np.ndarray:
        pos = np.minimum(np.searchsorted(self.sorted_keys, keys), len(self.sorted_keys) - 1)
        return self.sorted_keys[pos] == keys

    def _neighbours(self, t: np.ndarray) -> np.ndarray:
        """(len(t), n_cells): the row whose codes equal t's but for one parameter's value
        (one column per (parameter, value)), or -1 where the data lack it."""
        N = len(self.codes)
        delta = self.cell_level[None, :] - t[:, self.cell_param]
        keys = self.tkey(t)[:, None] + delta * self.weights[self.cell_param][None, :]
        pos = np.minimum(np.searchsorted(self.sorted_keys, keys), N - 1)
        return np.where(self.sorted_keys[pos] == keys, self.order[pos], -1)

    def tkey(self, t: np.ndarray) -> np.ndarray:
        return t @ self.weights


def _member(x: np.ndarray, sorted_ref: np.ndarray) -> np.ndarray:
    pos = np.minimum(np.searchsorted(sorted_ref, x), len(sorted_ref) - 1)
    return sorted_ref[pos] == x


# --------------------------------------------------------------------------- workers
_STATE: dict[str, Any] = {}


def _init(codes: np.ndarray, nlev: np.ndarray, y: np.ndarray, one_thread: bool = False) -> None:
    if one_thread:  # two worker processes on two cores: no BLAS threads on top
        try:
            from threadpoolctl import threadpool_limits

            _STATE["limits"] = threadpool_limits(1)
        except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
            pass
    _STATE["sampler"] = SubsetSampler(codes, nlev)
    _STATE["y"] = y


def _run_chunk(n: int, seeds: list[np.random.SeedSequence], ranks: int,
               aggregate: Aggregate) -> np.ndarray:
    """Selected columns (-1: nothing distinguishable) for each repetition of one chunk."""
    sampler: SubsetSampler = _STATE["sampler"]
    y: np.ndarray = _STATE["y"]
    out = np.full((len(seeds), ranks), -1, dtype=np.int64)
    for i, ss in enumerate(seeds):
        rng = np.random.default_rng(ss)
        rows = sampler.sample(n, rng)
        order = greedy_order(sampler.codes[rows], sampler.nlev, y[rows], ranks, aggregate)
        for r, (j, v) in enumerate(order):
            if v <= 0:  # no information left: count as not found rather than guess
                break
            out[i, r] = j
    return out


# --------------------------------------------------------------------------- result
@dataclass
class EvalResult(Result):
    """Fraction of repetitions that found each rank's ground-truth parameter."""

    PLOT_KINDS = ("found",)
    ERROR = AnalysisError

    response: str
    truth: list[str]
    truth_importance: list[float]
    fractions: list[float]
    sizes: list[int]
    n_configs: int
    repeats: int
    seed: int
    aggregate: str
    correct: np.ndarray          # (n_fractions, ranks): fraction of repetitions correct
    all_correct: np.ndarray      # (n_fractions,): first `ranks` all right, in order
    seconds: float

    def to_frame(self) -> pd.DataFrame:
        df = pd.DataFrame({"fraction": self.fractions, "configs": self.sizes})
        for r in range(len(self.truth)):
            df[f"rank{r + 1}_correct"] = self.correct[:, r]
        df["all_correct"] = self.all_correct
        return df

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({"response": self.response, "n_configs": self.n_configs,
                "repeats": self.repeats, "seed": self.seed, "aggregate": self.aggregate,
                "truth": [{"rank": i + 1, "param": p, "importance": v}
                          for i, (p, v) in enumerate(zip(self.truth, self.truth_importance))],
                "seconds": self.seconds, "table": self.to_frame()})

    def plot(self, kind: str | None = None) -> Figure:
        """`found` (the only kind), Figure 5: x = percentage of the dataset (log2), y =
        fraction of repetitions that found the parameter of each rank; top axis: number of
        configurations."""
        self.plot_kind(kind)
        from ..plotstyle import styled
        from .plots import evaluation_figure

        with styled():
            return evaluation_figure(self)


# --------------------------------------------------------------------------- harness
def evaluate(df: pd.DataFrame, response: str, fractions: Sequence[float],
             repeats: int = 1000, ranks: int = 3, params: Sequence[str] | None = None,
             aggregate: Aggregate = "max", seed: int = 0, n_jobs: int = 2,
             max_levels: int = 10, bins: int = 4, source: str = "results",
             progress: Callable[..., None] | None = None,
             is_metric: Callable[[str], bool] | None = None) -> EvalResult:
    """Section 5.4's experiment on a complete dataset (see the module docstring).
    `progress(label, advance=repeats done, total=all repeats)` hears of each finished
    chunk; `is_metric` names the measurement columns when `params` is None (`encode`)."""
    import time

    t0 = time.perf_counter()
    if repeats < 1:
        raise AnalysisError(f"--repeats must be at least 1, not {repeats}")
    fr = [float(f) for f in fractions]
    if not fr:
        raise AnalysisError("--fractions: give at least one fraction")
    for f in fr:
        if not (0 < f <= 1):
            raise AnalysisError(f"--fractions: {f:g} is not in (0, 1]")
    if aggregate not in ("max", "mean"):
        raise AnalysisError(f"aggregate {aggregate!r} must be 'max' or 'mean'")
    enc = encode(df, response, params, max_levels=max_levels, bins=bins, source=source,
                 is_metric=is_metric)
    N, k = enc.codes.shape
    if ranks < 1 or ranks > k:
        raise AnalysisError(f"--ranks {ranks} must be between 1 and the {k} parameters")
    truth_order = greedy_order(enc.codes, enc.nlev, enc.y, ranks, aggregate)
    truth = [enc.params[j] for j, _ in truth_order]
    truth_cols = np.array([j for j, _ in truth_order])
    sizes = [min(N, max(2, int(round(f * N)))) for f in fr]

    root = np.random.SeedSequence(seed)
    per_fraction = root.spawn(len(fr))
    tasks = []
    chunk = max(1, math.ceil(repeats / (4 * max(n_jobs, 1))))
    for fi, (n, ss) in enumerate(zip(sizes, per_fraction)):
        seeds = ss.spawn(repeats)
        for s in range(0, repeats, chunk):
            tasks.append((fi, n, seeds[s:s + chunk]))
    picks = [np.empty((0, ranks), dtype=np.int64) for _ in fr]
    args = (enc.codes, enc.nlev, enc.y)
    say = progress or (lambda *a, **k: None)
    say("", advance=0, total=repeats * len(fr))

    def done(fi: int, sd: Sequence[Any]) -> None:
        say(f"{sizes[fi]} configurations", advance=len(sd))

    if n_jobs <= 1:
        _init(*args)
        results = []
        for fi, n, sd in tasks:
            results.append(_run_chunk(n, sd, ranks, aggregate))
            done(fi, sd)
    else:
        with ProcessPoolExecutor(max_workers=n_jobs, initializer=_init,
                                 initargs=args + (True,)) as ex:
            futs = [ex.submit(_run_chunk, n, sd, ranks, aggregate) for _, n, sd in tasks]
            for fut in as_completed(futs):
                fi, _, sd = tasks[futs.index(fut)]
                done(fi, sd)
            results = [f.result() for f in futs]
    for (fi, _, _), res in zip(tasks, results):
        picks[fi] = np.vstack([picks[fi], res])
    hit = np.array([(p == truth_cols[None, :]).mean(axis=0) for p in picks])
    allc = np.array([(p == truth_cols[None, :]).all(axis=1).mean() for p in picks])
    return EvalResult(response, truth, [float(v) for _, v in truth_order], fr, sizes, N,
                      repeats, seed, aggregate, hit, allc, time.perf_counter() - t0)

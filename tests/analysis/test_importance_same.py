"""The counting and hashing `encode` and per-candidate `candidate_scores` give bit for bit
what the earlier sorting implementation gave (kept below as the reference): the same
configurations in the same order, the same means, spreads and noise, the same scores.

Tables mix categorical, integer, many-valued numeric (binned), boolean and missing
parameter values, repeated configurations and missing response cells."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from storlab.analysis.importance import (candidate_scores, combine, dense_ids, encode,
                                         importance)
from storlab.jsonutil import plain


# ------------------------------------------------------------- the sorting reference
def ref_raw_repeats(data: pd.DataFrame, params: list[str], y: np.ndarray
                    ) -> tuple[int, float, int]:
    raw = np.column_stack([pd.factorize(data[p], use_na_sentinel=False)[0]
                           for p in params]).astype(np.int64)
    _, inv = np.unique(raw, axis=0, return_inverse=True)
    inv = inv.ravel()
    n_cfg = int(inv.max()) + 1
    cnt = np.bincount(inv, minlength=n_cfg).astype(float)
    mean = np.bincount(inv, y, minlength=n_cfg) / cnt
    dev = y - mean[inv]
    sd = np.sqrt(np.bincount(inv, dev * dev, minlength=n_cfg) / np.maximum(cnt - 1, 1))
    rep = cnt > 1
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = sd[rep] / np.abs(mean[rep])
    spread = spread[np.isfinite(spread)]
    return n_cfg, float(np.median(spread)) if len(spread) else math.nan, int(rep.sum())


def ref_encode(df: pd.DataFrame, response: str, params: list[str], max_levels: int = 10,
               bins: int = 4):
    """The earlier encode, for tables where every row has the response."""
    data = df[params]
    y_rows = df[response].to_numpy(dtype=float)
    n_raw, noise, n_rep = ref_raw_repeats(data, params, y_rows)
    codes = np.empty((len(data), len(params)), dtype=np.int64)
    levels = []
    for j, p in enumerate(params):
        col = data[p]
        nu = col.nunique(dropna=True)
        sparse = nu > bins and 2 * nu > n_raw
        if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col) \
                and (nu > max_levels or sparse):
            cut = pd.qcut(col, q=bins, duplicates="drop")
            c = cut.cat.codes.to_numpy().astype(np.int64)
            labels = [f"[{iv.left:.4g}, {iv.right:.4g}]" for iv in cut.cat.categories]
            if (c < 0).any():
                c = np.where(c < 0, len(labels), c)
                labels.append("NA")
        else:
            c, uniq = pd.factorize(col, sort=True, use_na_sentinel=False)
            labels = [plain(v) for v in uniq]
        codes[:, j] = c
        levels.append(labels)
    key, _ = combine(codes, np.array([len(lv) for lv in levels], dtype=np.int64))
    uniq_key, first, inv = np.unique(key, return_index=True, return_inverse=True)
    n_cfg = len(uniq_key)
    cnt = np.bincount(inv, minlength=n_cfg).astype(float)
    mean = np.bincount(inv, y_rows, minlength=n_cfg) / cnt
    dev = y_rows - mean[inv]
    var = np.bincount(inv, dev * dev, minlength=n_cfg) / np.maximum(cnt - 1, 1)
    std = np.where(cnt > 1, np.sqrt(var), np.nan)
    ccodes = codes[first]
    configs = pd.DataFrame({p: np.asarray(levels[j], dtype=object)[ccodes[:, j]]
                            for j, p in enumerate(params)})
    configs[response] = mean
    configs["std"] = std
    configs["n_runs"] = cnt.astype(np.int64)
    return ccodes, levels, mean, configs, (n_raw, noise, n_rep)


def ref_candidate_scores(codes, nlev, cols, g, n_groups, y, aggregate="max"):
    cols = list(cols)
    L = nlev[cols]
    C = int(L.sum())
    off = np.concatenate([[0], np.cumsum(L)[:-1]]).astype(np.int64)
    cell = (g * C)[:, None] + (codes[:, cols] + off[None, :])
    m = n_groups * C
    cnt = np.bincount(cell.ravel(), minlength=m).reshape(n_groups, C)
    sums = np.bincount(cell.ravel(), weights=np.repeat(y, len(cols)),
                       minlength=m).reshape(n_groups, C)
    ng = np.bincount(g, minlength=n_groups)
    mg = np.bincount(g, weights=y, minlength=n_groups) / np.maximum(ng, 1)
    dev = sums / np.maximum(cnt, 1) - mg[:, None]
    red = np.add.reduceat(cnt * dev * dev, off, axis=1) / np.maximum(ng, 1)[:, None]
    occ = ng > 0
    if aggregate == "max":
        return red[occ].max(axis=0)
    return (red * ng[:, None]).sum(axis=0) / ng.sum()


# ------------------------------------------------------------- tables
@st.composite
def tables(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(2, 300))
    kinds = draw(st.lists(st.sampled_from(["cat", "int", "real", "bool", "cat_na",
                                           "real_na"]), min_size=1, max_size=5))
    # Few distinct rows (many repeats) or many (mostly unique configurations).
    pool = draw(st.sampled_from([3, 12, 1000]))
    df = pd.DataFrame()
    for j, kind in enumerate(kinds):
        p = f"p{j}"
        if kind == "cat":
            df[p] = rng.choice(["a", "bb", "c", "d"][: 2 + j % 3], n)
        elif kind == "cat_na":
            df[p] = pd.Series(rng.choice(["x", "y", None], n), dtype=object)
        elif kind == "int":
            df[p] = rng.integers(0, min(pool, 30), n)
        elif kind == "bool":
            df[p] = rng.integers(0, 2, n).astype(bool)
        elif kind == "real":
            df[p] = rng.integers(0, pool, n) * 0.37
        else:
            v = rng.integers(0, min(pool, 20), n).astype(float)
            v[rng.random(n) < 0.2] = np.nan
            df[p] = v
    df["y"] = rng.normal(100, 20, n).round(draw(st.sampled_from([0, 3])))
    return df


@settings(max_examples=40, deadline=None)
@given(tables())
def test_encode_is_the_sorting_encode(df):
    params = [c for c in df.columns if c != "y"]
    enc = encode(df, "y", params)
    ccodes, levels, mean, configs, raw = ref_encode(df, "y", params)
    assert np.array_equal(enc.codes, ccodes)
    assert repr(enc.levels) == repr(levels)  # (NaN labels: repr, as NaN != NaN)
    assert np.array_equal(enc.y, mean)
    pd.testing.assert_frame_equal(enc.configs, configs, check_exact=True)
    n_raw, noise, n_rep = raw
    assert (enc.n_raw_configs, enc.n_repeated) == (n_raw, n_rep)
    assert enc.noise_rsd == noise or (math.isnan(enc.noise_rsd) and math.isnan(noise))


@settings(max_examples=60, deadline=None)
@given(tables(), st.sampled_from(["max", "mean"]), st.integers(0, 2**32 - 1))
def test_candidate_scores_are_the_one_pass_scores(df, how, seed):
    params = [c for c in df.columns if c != "y"]
    enc = encode(df, "y", params)
    rng = np.random.default_rng(seed)
    n_groups = int(rng.integers(1, 6))
    g = rng.integers(0, n_groups, len(enc.y))
    y = enc.y - enc.y.mean()
    cols = list(range(len(params)))
    ours = candidate_scores(enc.codes, enc.nlev, cols, g, n_groups, y, how)
    ref = ref_candidate_scores(enc.codes, enc.nlev, cols, g, n_groups, y, how)
    assert np.array_equal(ours, ref)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**40), min_size=1, max_size=200),
       st.sampled_from([2**41, 10**6]))
def test_dense_ids_number_like_np_unique(keys, total):
    key = np.array([k % total for k in keys], dtype=np.int64)
    ids, n = dense_ids(key, total)
    uniq, inv = np.unique(key, return_inverse=True)
    assert n == len(uniq)
    assert np.array_equal(ids, inv.ravel())


def test_missing_response_cells_and_held_parameters_match_the_reference():
    """Rows without the response are left out before anything is counted; the result on
    the full table is the reference's on the rows that have the response."""
    rng = np.random.default_rng(4)
    n = 400
    df = pd.DataFrame({"bs": rng.choice(["4k", "64k", "1m"], n),
                       "qd": rng.choice([1, 4, 16], n),
                       "ratio": rng.uniform(0, 1, n).round(2),
                       "rw": "read"})
    df["y"] = 100 + 30 * (df.bs == "4k") + df.qd + rng.normal(0, 3, n)
    df.loc[rng.random(n) < 0.15, "y"] = np.nan
    df.loc[: n // 2, "rw"] = "write"
    df.loc[: n // 2, "y"] = np.nan  # y only where rw=read: rw held
    params = ["bs", "qd", "ratio", "rw"]
    res = importance(df, "y", params=params, stop="top:3")
    assert res.held == {"rw": "read"}
    kept = df[df.y.notna()]
    ccodes, levels, mean, configs, raw = ref_encode(kept, "y", ["bs", "qd", "ratio"])
    pd.testing.assert_frame_equal(res.configs, configs, check_exact=True)
    assert (res.n_configs, res.n_repeated) == (raw[0], raw[2])
    assert res.noise_rsd == raw[1]

"""Full factorial (2^k and mixed-level), regular 2^(k-p) fractional factorial with a
maximum-resolution / minimum-aberration generator search, and foldovers.

The search works on columns of the 2^n base design as integers (bit i: base factor i
takes part). The first n factors are the base; the p added factors get distinct columns
of weight >= 2. A branch-and-bound over added columns keeps the lexicographically
smallest word-length pattern: the counts of words of length 3 and 4 only grow as columns
are added, so a partial design already worse than the best complete one is cut. Bit
permutations of the base leave the pattern unchanged, so the first added column is taken
as the canonical one of its weight. No library does this search for us (pyDOE's is
known to report wrong resolutions; FrF2 uses a stored catalogue), hence the hand code.

The search's answers for the cases it solves exactly up to 128 runs are shipped as a
catalogue (data/ma_catalogue.json, written by scripts/ma_catalogue.py with this very
search): `minimum_aberration` looks there first, as FrF2 does, and searches otherwise.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import DesignError
from ..space import Space
from . import aliasing as al
from .aliasing import ROMAN
from .base import Design, from_coded



def design_levels(space: Space) -> list[list[Any]]:
    """Levels a full factorial crosses: all listed values, or low/high of a numeric range."""
    return [list(f.values) if f.values is not None else [f.low, f.high] for f in space.factors]


def full_factorial(space: Space, two_level: bool | None = None) -> Design:
    """Every combination of levels, in standard (Yates) order: first factor fastest.

    Two-level when every factor has two levels (or `two_level=True`: each factor at its
    low/high); otherwise the general mixed-level factorial over each factor's values.
    """
    levels = design_levels(space)
    if two_level is None:
        two_level = all(len(lv) == 2 for lv in levels)
    if two_level:
        k = space.k
        if k > 20:  # 2^20 runs is MAX_RUNS's order; 2**k itself can be a 30000-digit number
            raise DesignError(f"a 2^{k} full factorial has more than 10^6 runs; use --kind "
                              "fractional, pb or lhs")
        r = np.arange(2**k)
        coded = np.stack([np.where(r >> j & 1, 1.0, -1.0) for j in range(k)], axis=1)
        meta = {"kind": "full", "levels": 2, "resolution": None, "generators": [],
                "defining_relation": [], "wlp": [0] * k, "aliases": {},
                "clear_2fi": k * (k - 1) // 2}
        return from_coded(space, coded, meta)
    sizes = [len(lv) for lv in levels]
    n = math.prod(sizes)
    if n > 1_000_000:
        raise DesignError(f"the full factorial has {n} runs; use a fractional or LHS design")
    # Standard order: first factor changes fastest.
    idx = np.array(list(itertools.product(*[range(s) for s in reversed(sizes)])))[:, ::-1]
    table = pd.DataFrame({f.name: _values(f, levels[j], idx[:, j])
                          for j, f in enumerate(space.factors)})
    coded = np.stack([-1.0 + 2.0 * idx[:, j] / (sizes[j] - 1) for j in range(space.k)], axis=1)
    table["run"] = np.arange(1, n + 1)
    table["std_order"] = np.arange(1, n + 1)
    table["replicate"] = 1
    table["block"] = 1
    table["center"] = False
    meta = {"kind": "full", "levels": sizes, "resolution": None}
    return Design(space, table, pd.DataFrame(coded, columns=space.names), meta)


def _values(f: Any, levels: list[Any], idx: np.ndarray) -> np.ndarray:
    if f.numeric:
        from ..units import to_number

        arr = np.array([to_number(v) for v in levels])
        arr = arr.astype(np.int64) if f.kind == "integer" else arr
        return arr[idx]
    return np.asarray(levels, dtype=object)[idx]


# --------------------------------------------------------------------------- search
@dataclass
class SearchResult:
    """Added-factor columns (base-bit masks) of the best design found, and its pattern."""

    n: int
    columns: list[int]
    wlp: list[int]
    exact: bool
    nodes: int
    seconds: float
    source: str = "search"  # or "catalogue"


#: Defining relations with more words than 2^WORDS_MAX_P are not listed: the pattern then
#: comes from the MacWilliams identity and aliasing from the words of length 3 and 4.
WORDS_MAX_P = 16

#: What a user is told when a catalogued design is the best found, not a proven optimum.
NOT_PROVEN = ("not proven minimum aberration: the best design storlab's exact search met "
              "within its budget (scripts/ma_catalogue.py); a design with a smaller "
              "word-length pattern may exist")


@functools.cache
def _catalogue() -> dict[str, dict[str, Any]]:
    """The shipped catalogue's entries, {"k-n": {"columns", "wlp", "exact", ...}}; empty
    when the file is missing or unreadable (the search then answers every case)."""
    from importlib.resources import files

    try:
        doc = json.loads(files("storlab.design").joinpath("data/ma_catalogue.json")
                         .read_text(encoding="utf-8"))
        return dict(doc["entries"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def catalogue_generators(k: int, n: int) -> SearchResult | None:
    """The catalogued design of k factors in 2^n runs (exact=False when the search that
    made it ran out of budget: then it is not proven minimum aberration), or None when the
    case is not in the catalogue (or its entry does not describe a valid fraction)."""
    entry = _catalogue().get(f"{k}-{n}")
    if entry is None:
        return None
    cols, pattern = entry.get("columns"), entry.get("wlp")
    if (not isinstance(cols, list) or len(cols) != k - n or len(set(cols)) != len(cols)
            or not all(isinstance(c, int) and 0 < c < 1 << n and al.popcount(c) >= 2
                       for c in cols)
            or not isinstance(pattern, list) or len(pattern) != k):
        return None
    return SearchResult(n, list(cols), list(pattern), bool(entry.get("exact", True)),
                        0, 0.0, "catalogue")


def minimum_aberration(k: int, n: int, time_limit: float = 120.0,
                       min_resolution: int = 3) -> SearchResult | None:
    """`search_generators`, answered from the catalogue when the case is in it. The
    catalogued design has the largest resolution of any fraction of its size (a proven
    entry; an unproven one is checked by the search when it falls short), so when it
    falls short of `min_resolution` no design reaches it (None, as the search says)."""
    if k - n > 0:
        hit = catalogue_generators(k, n)
        if hit is not None:
            if (al.resolution(hit.wlp) or 99) >= min_resolution:
                return hit
            if hit.exact:
                return None
    return search_generators(k, n, time_limit, min_resolution)


def _wlp_of(n: int, added: Sequence[int]) -> list[int]:
    return al.wlp_from_columns(n, [1 << i for i in range(n)] + list(added))


def search_generators(k: int, n: int, time_limit: float = 120.0,
                      min_resolution: int = 3) -> SearchResult | None:
    """Minimum-aberration 2^(k-p) design with 2^n runs (p = k - n), by branch and bound.

    Only designs of at least `min_resolution` (3, 4 or 5) are considered; None when there
    is none. `exact` is False when the time limit cut the search (the best so far is kept).
    """
    p = k - n
    if p < 0:
        raise DesignError(f"{k} factors need no fraction of {2**n} runs")
    if p == 0:
        return SearchResult(n, [], [0] * k, True, 0, 0.0)
    cands = sorted((c for c in range(1, 1 << n) if al.popcount(c) >= 2),
                   key=lambda c: (al.popcount(c), c))
    if len(cands) < p:
        raise DesignError(f"{k} two-level factors need more than {2**n} runs "
                          f"(at most {2**n - 1} factors fit)")
    cand_arr = np.array(cands, dtype=np.int64)
    pairs = np.zeros(1 << n, dtype=np.int64)  # pairs[v]: pairs of current columns, XOR v
    base = [1 << i for i in range(n)]
    for a, b in itertools.combinations(base, 2):
        pairs[a ^ b] += 1
    cur = np.zeros(k, dtype=np.int64)
    cur[:n] = base
    added: list[int] = []
    # Words of length 3 (and 4) are forbidden up front for resolution IV (V) requests.
    big = 10**12
    best_key: tuple[int, int, int] | None = {3: None, 4: (0, big, big)}.get(
        min_resolution, (0, 0, big))
    best_wlp: list[int] | None = None
    best_cols: list[int] = []
    nodes = 0
    deadline = time.monotonic() + time_limit
    cut = False

    def canonical_start(c: int) -> bool:
        # Bit permutations of the base keep the pattern: the first added column can be the
        # lowest of its weight, and the second the lowest in its orbit under the
        # permutations that fix the first.
        if not added:
            return c == (1 << al.popcount(c)) - 1
        if len(added) == 1:
            w1 = al.popcount(added[0])
            inside, outside = c & ((1 << w1) - 1), c >> w1
            return (inside == (1 << al.popcount(inside)) - 1
                    and outside == (1 << al.popcount(outside)) - 1)
        return True

    allv = np.arange(1 << n, dtype=np.int64)

    def dfs(start: int, a3: int, a4x3: int, a5x6: int) -> None:
        nonlocal best_key, best_wlp, best_cols, nodes, cut
        nodes += 1
        m = n + len(added)
        if len(added) == p:
            key = (a3, a4x3, a5x6)
            if best_key is None or key < best_key or best_wlp is None:
                best_key, best_wlp, best_cols = key, _wlp_of(n, added), list(added)
            elif key == best_key:  # tie on A3, A4: decide on the whole pattern
                w = _wlp_of(n, added)
                if w < best_wlp:
                    best_wlp, best_cols = w, list(added)
            return
        if nodes & 0x3FF == 0 and time.monotonic() > deadline:
            cut = True
        if cut:
            return
        need = p - len(added)
        if len(cands) - start < need:
            return
        idxs = np.arange(start, len(cands))  # the bound looks at every remaining column
        cs = cand_arr[idxs]
        # Adding c closes a 3-word per pair (a, b) with a^b == c, and a 4-word (counted
        # 3 times) per pair whose XOR equals c^d for a current column d.
        inc3 = pairs[cs]
        inc4 = pairs[cs[:, None] ^ cur[None, :m]].sum(axis=1)
        # Lower bound on what the other need-1 columns add: increments only grow as
        # columns are added, so the smallest current ones bound the future from below.
        rest4 = 0
        if best_key is not None:
            ok = inc3 == 0 if a3 == best_key[0] else np.ones(len(cs), dtype=bool)
            if ok.sum() < need:
                return
            smallest = np.sort(inc4[ok])[:need]
            if a4x3 + smallest.sum() > best_key[1] and a3 == best_key[0]:
                return
            rest4 = int(smallest[: need - 1].sum()) if a3 == best_key[0] else 0
        last = len(cands) - need + 1  # the next column must leave room for the others
        # Visit the cheapest columns first so good designs, and tight bounds, come early;
        # each subset is still reached once, through its columns in index order.
        nxt = last - start
        order = np.lexsort((inc4[:nxt], inc3[:nxt]))
        for idx, c, i3, i4 in zip(idxs[order].tolist(), cs[order].tolist(),
                                  inc3[order].tolist(), inc4[order].tolist()):
            x3, x4 = a3 + i3, a4x3 + i4
            if best_key is not None and (x3, x4 + (rest4 if x3 == a3 else 0)) > best_key[:2]:
                continue
            # 5-words: pairs of disjoint pairs whose XOR is c (each counted 6 times); only
            # tracked while there are no 3-words, where pairs cannot overlap.
            x5 = a5x6 + int(pairs @ pairs[allv ^ c]) if x3 == 0 else 0
            if best_key is not None and (x3, x4, x5) > best_key:
                continue
            if len(added) < 2 and not canonical_start(c):
                continue
            np.add.at(pairs, c ^ cur[:m], 1)
            cur[m] = c
            added.append(c)
            dfs(idx + 1, x3, x4, x5)
            added.pop()
            np.subtract.at(pairs, c ^ cur[:m], 1)

    t0 = time.monotonic()
    dfs(0, 0, 0, 0)
    if best_wlp is None:
        return None
    return SearchResult(n, best_cols, best_wlp, not cut, nodes, time.monotonic() - t0)


# Most two-level factors a regular 2^n-run fraction holds at resolution IV (2^(n-1)) and
# V (the known maxima for 16..1024 runs); beyond them the search is skipped.
_MAX_FACTORS = {4: {n: 2 ** (n - 1) for n in range(2, 16)},
                5: {4: 5, 5: 6, 6: 8, 7: 11, 8: 17, 9: 23, 10: 33}}


def _choose_n(k: int, runs: int | None, min_resolution: int | None,
              time_limit: float) -> SearchResult:
    """Pick the run size: the largest power of two within the budget, or the smallest one
    whose minimum-aberration design reaches the resolution asked for."""
    n_min = max(1, math.ceil(math.log2(k + 1)))
    if runs is not None:
        n = int(math.floor(math.log2(runs)))
        if n < n_min:
            raise DesignError(f"{k} two-level factors need at least {2**n_min} runs "
                              f"in a regular fraction, not {runs}")
        n = min(n, k)
        res = minimum_aberration(k, n, time_limit, min(min_resolution or 3, 5))
        if res is None or (al.resolution(res.wlp) or 99) < (min_resolution or 3):
            raise DesignError(f"no 2^({k}-{k - n}) design of {2**n} runs reaches resolution "
                              f"{al.roman(min_resolution)}")
        return res
    target = min_resolution or 3
    for n in range(n_min, k + 1):
        if k - n > 0 and k > _MAX_FACTORS.get(min(target, 5), {}).get(n, k):
            continue  # known bound: no such design of this size exists
        res = minimum_aberration(k, n, time_limit, min(target, 5))
        if res is not None and (al.resolution(res.wlp) or 99) >= target:
            return res
    raise AssertionError("the full factorial always qualifies")  # pragma: no cover


def fractional_factorial(space: Space, runs: int | None = None,
                         resolution: int | None = None,
                         generators: Sequence[str] | None = None,
                         time_limit: float = 120.0) -> Design:
    """A regular 2^(k-p) fraction in standard order.

    With `generators` (e.g. ["E=ABC", "F=-BCD"]) the user's fraction is built as given;
    otherwise the run size comes from `runs` or `resolution` and the generators from the
    minimum-aberration search.
    """
    k = space.k
    labels = space.labels
    if generators:
        n, cols, signs = _parse_generators(generators, labels)
        search = None
    else:
        search = _choose_n(k, runs, resolution, time_limit)
        n, cols, signs = search.n, search.columns, [1] * len(search.columns)
    r = np.arange(2**n)
    base = np.stack([np.where(r >> i & 1, 1.0, -1.0) for i in range(n)], axis=1)
    coded = np.empty((2**n, k))
    coded[:, :n] = base
    for i, (c, s) in enumerate(zip(cols, signs)):
        prod = np.ones(2**n)
        for b in range(n):
            if c >> b & 1:
                prod *= base[:, b]
        coded[:, n + i] = s * prod
    generators = [f"{labels[n + i]}={'-' if s < 0 else ''}{al.word_name(c, labels)}"
                  for i, (c, s) in enumerate(zip(cols, signs))]
    meta: dict[str, Any] = {
        "kind": "fractional",
        **_relation_meta(labels, coded, [1 << i for i in range(n)] + list(cols),
                         [c | 1 << (n + i) for i, c in enumerate(cols)], generators)}
    if search is not None:
        meta["search"] = {"exact": search.exact, "nodes": search.nodes,
                          "seconds": round(search.seconds, 4), "source": search.source}
        if not search.exact:
            meta["search"]["warning"] = NOT_PROVEN if search.source == "catalogue" else (
                "not proven minimum aberration: the search stopped at its time limit "
                f"({time_limit:g} s) with the best design it had met")
    return from_coded(space, coded, meta)


def _word_signs(coded: np.ndarray, words: Sequence[int]) -> dict[int, float]:
    # A word's column product is constant; its sign is the product in the first run, i.e.
    # -1 to the number of the word's factors that are at -1 there.
    neg = sum(1 << j for j in range(coded.shape[1]) if coded[0, j] < 0)
    return {w: -1.0 if al.popcount(w & neg) & 1 else 1.0 for w in words}


_GEN_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*([+-]?)\s*([A-Za-z0-9:]+)\s*$")


def _parse_generators(generators: Sequence[str], labels: Sequence[str]
                      ) -> tuple[int, list[int], list[int]]:
    """`E=ABC` strings to base-bit columns; the added factors must be the last p labels."""
    k = len(labels)
    p = len(generators)
    n = k - p
    if n < 1:
        raise DesignError(f"{p} generators for {k} factors leave no base factors")
    base_labels = labels[:n]
    cols, signs = [], []
    for i, g in enumerate(generators):
        m = _GEN_RE.match(g)
        if not m:
            raise DesignError(f"generator {g!r} is not of the form E=ABC")
        lhs, sign, rhs = m.groups()
        if lhs != labels[n + i]:
            raise DesignError(f"generator {g!r}: with {k} factors and {p} generators the "
                              f"added factors are {', '.join(labels[n:])}, in that order")
        try:
            col = al.parse_word(rhs, base_labels)
        except KeyError as exc:
            raise DesignError(f"generator {g!r}: {exc.args[0]!r} is not a base factor "
                              f"({''.join(base_labels)})") from None
        if al.popcount(col) < 2:
            raise DesignError(f"generator {g!r} must use at least two base factors")
        if col in cols:
            raise DesignError(f"generator {g!r} repeats another generator's column")
        cols.append(col)
        signs.append(-1 if sign == "-" else 1)
    return n, cols, signs


def _alias_meta(labels: list[str], generators: list[str], relation: list[str],
                pattern: list[int], aliases: Any, clear: tuple[list[int], list[int]]
                ) -> dict[str, Any]:
    """Resolution, generators, the named defining relation, pattern, aliases and clear
    effects: the metadata every two-level design with words lists, regular or not."""
    res = al.resolution(pattern)
    clear_main, clear_2fi = clear
    return {
        "resolution": res,
        "resolution_roman": al.roman(res) if res else None,
        "generators": generators,
        "defining_relation": relation,
        "wlp": pattern,
        "aliases": aliases,
        "clear_main": [al.word_name(e, labels) for e in clear_main],
        "clear_2fi": len(clear_2fi),
        "clear_2fi_list": [al.word_name(e, labels) for e in clear_2fi],
    }


def _relation_meta(labels: list[str], coded: np.ndarray, columns: list[int],
                   gen_words: list[int], generators: list[str],
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The aliasing part of a regular fraction's metadata (a built design's and a folded
    one's): its defining relation (signed as the columns `coded` have it), pattern,
    aliases and clear effects. `columns[j]`: factor j's column as a product of the basic
    factors (bit i: i-th basic factor); `gen_words`: one generator word per added factor.
    `extra` entries come before the note that only the short words are listed (the one
    place that note is written)."""
    k, p = len(labels), len(gen_words)
    if p <= WORDS_MAX_P:
        words = al.subgroup(gen_words)
        pattern = al.wlp(words, k)
        aliases = al.alias_structure(words, k, labels)
        clear = al.clear_effects(words, k)
    else:  # 2^p words are too many to list: what aliasing needs is the short ones
        words = al.short_words(columns)
        pattern = al.wlp_from_columns(k - p, columns)
        aliases = al.alias_structure_short(words, k, labels)
        clear = al.clear_effects_short(words, k)
    signed = _word_signs(coded, words)
    relation = [("-" if signed[w] < 0 else "") + al.word_name(w, labels) for w in words]
    meta: dict[str, Any] = {"base_factors": k - p, "p": p,
                            **_alias_meta(labels, generators, relation, pattern, aliases,
                                          clear),
                            **(extra or {})}
    if p > WORDS_MAX_P:
        meta["defining_relation_note"] = f"words of length 3 and 4 only (of {2**p - 1})"
    return meta


def _relation_from_columns(space: Space, coded: np.ndarray, block: np.ndarray
                           ) -> dict[str, Any]:
    """Generators, defining relation, resolution, aliases of a regular two-level design
    read off its columns (a foldover's are not the folded design's), and which effect the
    `block` column (-1 first block, +1 second) is confounded with."""
    k, labels = space.k, space.labels
    basic, generated, fold = al.generators_from_matrix(coded, block)
    if 2 ** len(basic) != len({tuple(r) for r in coded}):
        # Not a regular fraction (a folded Plackett-Burman): no generators; the words are
        # those whose column product is constant, if any.
        words = al.words_from_matrix(coded) if k <= 22 else []
        return _alias_meta(labels, [], [al.word_name(w, labels) for w in words],
                           al.wlp(words, k), al.alias_structure(words, k, labels),
                           al.clear_effects(words, k))
    # Each factor's column as a product of the basic factors (bit i: i-th basic factor).
    rank = {j: i for i, j in enumerate(basic)}
    columns = [0] * k
    for j in basic:
        columns[j] = 1 << rank[j]
    for j, w, _ in generated:
        columns[j] = sum(1 << rank[b] for b in basic if w >> b & 1)
    generators = [f"{labels[j]}={'-' if s < 0 else ''}{al.word_name(w, labels)}"
                  for j, w, s in generated]
    # The fold factor: a full foldover of a resolution III fraction confounds blocks with
    # an interaction of the basic factors; None: the foldover repeats the runs.
    block_generator = (None if fold is None else
                       f"block={'-' if fold[1] < 0 else ''}{al.word_name(fold[0], labels)}")
    return _relation_meta(labels, coded, columns, [w | 1 << j for j, w, _ in generated],
                          generators, {"block_generator": block_generator})


def foldover(design: Design, factor: str | None = None) -> Design:
    """Full foldover (every sign reversed) or single-factor foldover (`factor` reversed).

    The combined design's defining relation is read off its columns; the foldover runs
    form block 2.
    """
    space = design.space
    base = design.table[~design.table["center"]] if "center" in design.table else design.table
    coded = design.coded.loc[base.index].to_numpy(dtype=float)
    if not np.all(np.isin(coded, (-1.0, 1.0))):
        raise DesignError("foldover needs a two-level design")
    mirror = coded.copy()
    if factor is None:
        mirror = -mirror
    else:
        if factor not in space:
            raise DesignError(f"no factor {factor!r} to fold over")
        mirror[:, space.names.index(factor)] *= -1
    both = np.concatenate([coded, mirror])
    block = np.repeat([-1.0, 1.0], len(coded))
    meta = {k: v for k, v in design.meta.items()
            if k not in ("search", "defining_relation_note", "base_factors", "p")}
    if design.meta.get("generators"):  # what was folded; the search found those
        meta["folded"] = {k: design.meta[k] for k in ("generators", "resolution", "search")
                          if k in design.meta}
    meta.update(kind=f"{design.kind}+foldover", foldover=factor or "all",
                **_relation_from_columns(space, both, block))
    out = from_coded(space, both, meta)
    out.table["block"] = np.repeat([1, 2], len(coded))
    return out

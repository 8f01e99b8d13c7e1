"""Full and fractional factorials: properties computed from the columns themselves."""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storlab.design import fractional_factorial, full_factorial, make_design
from storlab.design import aliasing as al
from storlab.design.factorial import foldover, search_generators
from storlab.errors import DesignError
from storlab.space import Space


def balanced_orthogonal(x: np.ndarray) -> bool:
    n = x.shape[0]
    return bool(np.all(x.sum(axis=0) == 0) and np.array_equal(x.T @ x, n * np.eye(x.shape[1])))


def test_full_2k_standard_order_matches_seed_000():
    d = full_factorial(Space.two_level(3))
    expected = [[-1, -1, -1], [1, -1, -1], [-1, 1, -1], [1, 1, -1],
                [-1, -1, 1], [1, -1, 1], [-1, 1, 1], [1, 1, 1]]
    assert d.coded.to_numpy().tolist() == expected
    assert d.meta["resolution"] is None


def test_mixed_level_full_factorial():
    s = Space.from_dict({"factors": [{"name": "a", "values": ["x", "y", "z"]},
                                     {"name": "b", "values": [1, 2]},
                                     {"name": "c", "range": [0.0, 1.0]}]})
    d = full_factorial(s)
    assert d.runs == 12
    assert d.table.groupby(["a", "b", "c"]).size().eq(1).all()
    assert d.table["a"].value_counts().eq(4).all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(3, 11), n=st.integers(3, 5))
def test_fractional_reported_pattern_is_the_columns_pattern(k, n):
    if k <= n or k > 2**n - 1:
        return
    d = fractional_factorial(Space.two_level(k), runs=2**n)
    x = d.coded.to_numpy()
    assert balanced_orthogonal(x)
    words = al.words_from_matrix(x)
    assert al.wlp(words, k) == d.meta["wlp"]
    assert al.resolution(d.meta["wlp"]) == d.meta["resolution"]
    assert len(words) == 2 ** (k - n) - 1
    # every generator holds in the columns
    labels = d.space.labels
    for g in d.meta["generators"]:
        lhs, rhs = g.split("=")
        col = np.prod(x[:, [labels.index(c) for c in rhs.lstrip("-")]], axis=1)
        assert np.array_equal(x[:, labels.index(lhs)], -col if rhs.startswith("-") else col)


def brute_force_min_wlp(k: int, n: int) -> list[int]:
    cols = [c for c in range(1, 2**n) if al.popcount(c) >= 2]
    best = None
    for added in itertools.combinations(cols, k - n):
        gens = [c | (1 << (n + i)) for i, c in enumerate(added)]
        w = al.wlp(al.subgroup(gens), k)
        best = w if best is None or w < best else best
    return best


@pytest.mark.parametrize("k,n", [(5, 3), (6, 3), (7, 3), (6, 4), (7, 4), (8, 4), (9, 4),
                                 (10, 4), (12, 4), (15, 4), (7, 5), (8, 5), (9, 5)])
def test_search_is_minimum_aberration(k, n):
    res = search_generators(k, n)
    assert res.exact
    assert res.wlp == brute_force_min_wlp(k, n)


@pytest.mark.parametrize("k,runs,a4", [(8, 16, 14), (10, 32, 10), (12, 32, 38), (13, 64, 14)])
def test_known_minimum_aberration_counts(k, runs, a4):
    # A4 of the minimum-aberration designs in Chen, Sun and Wu's (1993) catalogue.
    d = fractional_factorial(Space.two_level(k), runs=runs)
    assert d.meta["wlp"][:3] == [0, 0, 0] and d.meta["wlp"][3] == a4


@pytest.mark.parametrize("k,res,runs", [(5, 5, 16), (7, 4, 16), (8, 5, 64), (11, 5, 128),
                                        (6, 6, 32), (9, 4, 32), (4, 3, 8)])
def test_resolution_request_picks_smallest_run_size(k, res, runs):
    d = fractional_factorial(Space.two_level(k), resolution=res)
    assert d.runs == runs and d.meta["resolution"] >= res


def test_user_generators_and_aliases():
    d = fractional_factorial(Space.two_level(5), generators=["D=AB", "E=-AC"])
    x = d.coded.to_numpy()
    assert np.array_equal(x[:, 3], x[:, 0] * x[:, 1])
    assert np.array_equal(x[:, 4], -x[:, 0] * x[:, 2])
    assert d.meta["resolution"] == 3
    assert set(d.meta["defining_relation"]) == {"ABD", "-ACE", "-BCDE"}
    assert "D" in d.meta["aliases"]["AB"]
    words = al.words_from_matrix(x)
    assert al.wlp(words, 5) == d.meta["wlp"]


@pytest.mark.parametrize("gens,msg", [(["E=ABX"], "not a base factor"), (["E=A"], "two base"),
                                      (["D=AB", "E=AB"], "repeats"), (["F=ABC"], "added factors"),
                                      (["E ABC"], "form")])
def test_bad_generators(gens, msg):
    with pytest.raises(DesignError, match=msg):
        fractional_factorial(Space.two_level(5), generators=gens)


def test_clear_2fis_agree_with_columns():
    # MA 2^(6-2): every 2FI sits in a 4-letter word, none clear; 2^(6-1) VI: all 15 clear.
    for runs, clear in ((16, 0), (32, 15)):
        d = fractional_factorial(Space.two_level(6), runs=runs)
        words = al.words_from_matrix(d.coded.to_numpy())
        _, found = al.clear_effects(words, 6)
        assert d.meta["clear_2fi"] == len(found) == clear


def test_full_foldover_of_resolution_iii_gives_iv():
    d = fractional_factorial(Space.two_level(7), runs=8)
    assert d.meta["resolution"] == 3
    f = foldover(d)
    assert f.runs == 16 and f.meta["resolution"] == 4
    assert al.wlp(al.words_from_matrix(f.coded.to_numpy()), 7) == f.meta["wlp"]
    assert set(f.table["block"]) == {1, 2}


def _signed_relation(x: np.ndarray, labels: list[str]) -> set[str]:
    """The defining relation recomputed from the columns, each word with its sign."""
    out = set()
    for w in al.words_from_matrix(x):
        prod = np.prod(x[:, [j for j in range(x.shape[1]) if w >> j & 1]], axis=1)
        out.add(("-" if prod[0] < 0 else "") + al.word_name(w, labels))
    return out


def _relation_of_generators(gens: list[str], labels: list[str]) -> set[str]:
    """The signed words the generators `E=-BCD` span."""
    pos = {lab: j for j, lab in enumerate(labels)}
    group = {0: 1}
    for g in gens:
        lhs, rhs = g.split("=")
        sign = -1 if rhs.startswith("-") else 1
        w = al.parse_word(rhs.lstrip("-"), labels) | 1 << pos[lhs]
        group.update({a ^ w: s * sign for a, s in list(group.items())})
    return {("-" if s < 0 else "") + al.word_name(w, labels) for w, s in group.items() if w}


@pytest.mark.parametrize("k,runs,fold", [(7, 8, None), (7, 8, "D"), (7, 8, "A"),
                                         (5, 8, None), (6, 16, None), (9, 16, "B")])
def test_foldover_generators_are_the_folded_designs(k, runs, fold):
    """After a foldover the generators are read off the combined columns: they span the
    defining relation those columns have (the unfolded D=AB, E=AC, ... were printed), and
    the block column is the product they say."""
    d = fractional_factorial(Space.two_level(k), runs=runs)
    f = foldover(d, fold)
    x, labels = f.coded.to_numpy(), f.space.labels
    want = _signed_relation(x, labels)
    assert _relation_of_generators(f.meta["generators"], labels) == want
    assert set(f.meta["defining_relation"]) == want
    assert f.meta["p"] == len(f.meta["generators"]) == k - f.meta["base_factors"]
    assert 2 ** f.meta["base_factors"] == len({tuple(r) for r in x})
    assert f.meta["folded"]["generators"] == d.meta["generators"]
    assert "search" not in f.meta  # the search found the unfolded generators only
    block = np.where(f.table["block"] == 1, -1.0, 1.0)
    bg = f.meta["block_generator"]
    if bg is None:  # the mirror image is the fraction itself: blocks are replicates
        assert len({tuple(r) for r in x}) == len(x) // 2
    else:
        rhs = bg.split("=")[1]
        cols = [labels.index(c) for c in rhs.lstrip("-")]
        assert np.array_equal(block, (-1 if rhs.startswith("-") else 1)
                              * np.prod(x[:, cols], axis=1))


def test_foldover_cli_prints_the_folded_generators(storlab_quick):
    """Table output and --json say the same, folded, generators and relation."""
    import json

    args = ["design", "--factors", "7", "--kind", "fractional", "--runs", "8",
            "--foldover", "all"]
    text = storlab_quick(*args)
    data = json.loads(storlab_quick(*args, "--json").stdout)
    assert text.returncode == 0
    x = np.array([[r[c] for c in data["factors"]] for r in data["table"]], dtype=float)
    labels = list(data["labels"])
    assert set(data["defining_relation"]) == _signed_relation(x, labels)
    assert _relation_of_generators(data["generators"], labels) == _signed_relation(x, labels)
    lines = text.stdout.splitlines()
    assert "generators: " + ", ".join(data["generators"]) in lines
    assert "D=AB" not in lines[1]
    assert f"blocks: {data['block_generator']} (block 1 at -1, block 2 at +1)" in lines


def test_single_factor_foldover_clears_that_factor():
    d = fractional_factorial(Space.two_level(7), runs=8)
    f = foldover(d, "A")
    assert "A" in f.meta["clear_main"]


def test_too_few_runs():
    with pytest.raises(DesignError, match="at least 16 runs"):
        fractional_factorial(Space.two_level(9), runs=8)


def test_make_design_center_replicate_randomize_deterministic():
    s = Space.from_dict({"factors": [{"name": "a", "range": [1, 9]},
                                     {"name": "b", "values": ["x", "y"]},
                                     {"name": "c", "range": [0.0, 2.0]}]})
    d1 = make_design(s, "full", center=3, replicates=2, seed=7)
    d2 = make_design(s, "full", center=3, replicates=2, seed=7)
    assert d1.table.equals(d2.table)
    assert d1.runs == 2 * (8 + 3)
    centers = d1.table[d1.table["center"]]
    assert len(centers) == 6 and set(centers["a"]) == {5} and set(centers["b"]) == {"x", "y"}
    assert sorted(d1.table["run"]) == list(range(1, 23))
    assert not d1.table["std_order"].is_monotonic_increasing


def test_two_level_design_refuses_infeasible_runs():
    s = Space.from_dict({"factors": [{"name": "a", "range": [1, 9]},
                                     {"name": "b", "range": [1, 9]}],
                         "constraints": ["a <= b"]})
    with pytest.raises(DesignError, match="violate"):
        make_design(s, "full")


def test_to_dict_is_the_json_and_to_json_its_deprecated_old_name():
    """One name for JSON-ready data across storlab (issue 14): `Design.to_dict()`, what
    `storlab design --json` prints; the old `to_json()` still answers, with a warning."""
    import json

    d = make_design(Space.two_level(5), "fractional", runs=8, seed=1)
    data = d.to_dict()
    assert data["runs"] == 8 and data["resolution"] == 3 and len(data["table"]) == 8
    json.dumps(data, allow_nan=False)  # JSON-ready as it is
    with pytest.warns(DeprecationWarning, match=r"Design.to_json\(\) is deprecated"):
        assert d.to_json() == data

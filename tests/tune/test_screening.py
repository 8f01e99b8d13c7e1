"""screen-then-tune's screening on a constrained space: a parent factor that forces its
children (MongoDB's journal: off forces its compressor and commit interval) keeps the
Latin Hypercube's balance of its levels, every screened configuration is feasible and
distinct, and a space without constraints is screened exactly as before."""

from __future__ import annotations

from typing import Any

from storlab.campaign.sources import config_key
from storlab.design.lhs import lhs_design
from storlab.jsonutil import plain
from storlab.space import Space
from storlab.tune.domain import Domain
from storlab.tune.strategies import Objective, ScreenThenTune, TuneSettings, make_strategy

FACTORS: list[dict[str, Any]] = [
    {"name": "journal", "kind": "ordinal", "levels": [0, 1]},
    {"name": "journal_compressor", "kind": "categorical", "levels": ["none", "snappy", "zlib"]},
    {"name": "commit_ms", "kind": "ordinal", "levels": [1, 10, 50, 100, 200, 500]},
    {"name": "block_compressor", "kind": "categorical", "levels": ["none", "snappy", "zlib"]},
    {"name": "prefix", "kind": "ordinal", "levels": [0, 1]},
    {"name": "cache_mib", "kind": "ordinal", "levels": [256, 512, 1024, 2048, 4096]},
]
JOURNAL = 'journal == 1 or (journal_compressor == "none" and commit_ms == 1)'


def _space(constraints: list[str]) -> Space:
    return Space.from_dict({"factors": FACTORS, "constraints": constraints}, source="t")


def _strategy(space: Space, seed: int) -> ScreenThenTune:
    s = make_strategy("screen-then-tune", Domain(space), [Objective("ops", "maximize")],
                      TuneSettings(budget=60, seed=seed))
    assert isinstance(s, ScreenThenTune)
    return s


def test_repair_changes_the_forced_children_not_the_two_level_parent() -> None:
    domain = Domain(_space([JOURNAL]))
    bad = {"journal": 0, "journal_compressor": "zlib", "commit_ms": 100,
           "block_compressor": "snappy", "prefix": 1, "cache_mib": 512}
    assert not domain.feasible(bad)
    fixed = domain.repair(bad)
    assert fixed == {**bad, "journal_compressor": "none", "commit_ms": 1}
    # the nearest is taken: the next one outside `avoid` turns the journal on instead
    other = domain.repair(bad, avoid={config_key(fixed)})
    assert other is not None and domain.feasible(other) and other["journal"] == 1
    assert domain.repair(bad, avoid={config_key(fixed), config_key(other)}) not in (
        fixed, other)


def test_constrained_screening_keeps_the_parents_levels_balanced() -> None:
    # The Latin Hypercube puts each journal level in half the runs; the screening keeps
    # them (one fewer where two journal-off rows would be the same configuration), while
    # the design's own repair (swaps, then redraws) loses most journal-off runs.
    space = _space([JOURNAL])
    ours, design = [], []
    for seed in range(12):
        s = _strategy(space, seed)
        configs = s.screen_configs()
        n = s.screen_size()
        assert len(configs) == n == 6
        assert all(space.validate(c) is None for c in configs)
        assert len({config_key(c) for c in configs}) == n
        ours.append(sum(c["journal"] == 0 for c in configs))
        design.append(int((lhs_design(space, n, seed=seed).table["journal"] == 0).sum()))
    assert min(ours) >= 2 and sum(ours) / 12 > 2.5
    assert sum(design) / 12 < 2.0


def test_unconstrained_screening_is_the_latin_hypercube_as_before() -> None:
    space = _space([])
    for seed in (0, 5):
        table = lhs_design(space, 6, seed=seed).table[space.names]
        rows = [{k: plain(v) for k, v in r.items()} for r in table.to_dict("records")]
        want = list({config_key(r): r for r in rows}.values())
        assert _strategy(space, seed).screen_configs() == want


def test_constraint_on_a_range_factor_keeps_the_designs_repair() -> None:
    factors = [*FACTORS, {"name": "ratio", "kind": "real", "range": [0.0, 1.0]}]
    space = Space.from_dict({"factors": factors,
                             "constraints": [JOURNAL, "ratio < 0.5 or prefix == 1"]},
                            source="t")
    domain = Domain(space)
    assert not domain.repairable()
    s = make_strategy("screen-then-tune", domain, [Objective("ops", "maximize")],
                      TuneSettings(budget=60, seed=1))
    assert isinstance(s, ScreenThenTune)
    configs = s.screen_configs()
    assert configs and all(domain.feasible(c) for c in configs)

"""screen-then-tune's moves on planted response surfaces, driven directly through its
strategy object (no campaign, no runner): the exploit step after the screening and the
two-factor step at a local optimum that no one-factor step can leave."""

from __future__ import annotations

import itertools
from typing import Any

import pandas as pd

from storlab.campaign.sources import Observation
from storlab.tune.domain import Domain
from storlab.tune.evaluate import space_from_table
from storlab.tune.strategies import (Objective, ScreenThenTune, Tally, TuneSettings,
                                     make_strategy)

LEVELS = {"page_kib": [1, 4], "hash": [0, 1], "crypto": [0, 1], "stats": [0, 1]}


def _strategy() -> ScreenThenTune:
    grid = pd.DataFrame([dict(zip(LEVELS, c)) for c in itertools.product(*LEVELS.values())])
    domain = Domain(space_from_table(grid, list(LEVELS)))
    s = make_strategy("screen-then-tune", domain, [Objective("ops", "maximize")],
                      TuneSettings(budget=40, seed=3))
    assert isinstance(s, ScreenThenTune)
    return s


def _history(rows: list[tuple[dict[str, Any], float, str]]) -> list[Observation]:
    return [Observation(f"r{i}", i, i, 1, cfg, "ok", {"ops": v}, phase)
            for i, (cfg, v, phase) in enumerate(rows, 1)]


def test_pair_step_reaches_a_planted_interaction_a_one_factor_step_cannot() -> None:
    # Page size and hash table only pay together (Berkeley DB): from 4 KiB without hash,
    # each alone loses 5 %, both together gain 30 %; crypto always costs half.
    def ops(page_kib: int, hash: int, crypto: int, stats: int) -> float:
        v = 100.0 - 5 * (page_kib == 1) - 5 * hash + 40 * (page_kib == 1 and hash == 1)
        return v * (0.5 if crypto else 1.0) * (0.99 if stats else 1.0)

    inc = {"page_kib": 4, "hash": 0, "crypto": 0, "stats": 0}
    around = [inc] + [{**inc, n: [v for v in LEVELS[n] if v != inc[n]][0]} for n in LEVELS]
    hist = _history([(c, ops(**c), "screen" if i < 3 else "tune")
                     for i, c in enumerate(around)])
    s = _strategy()
    tally = Tally(hist, s.objectives)
    ranking = ["page_kib", "hash", "crypto", "stats"]
    assert tally.best().config == inc  # the incumbent is a local optimum...
    assert s.local_step(tally, ranking, inc) is None  # ...that one factor cannot leave
    step = s.pair_step(tally, ranking, inc)
    assert step == {"page_kib": 1, "hash": 1, "crypto": 0, "stats": 0}
    assert ops(**step) > ops(**inc) * 1.2


def test_first_search_run_combines_the_screenings_best_levels() -> None:
    # Three additive gains seen one at a time in the screening: the first search run
    # measures them together instead of wandering around the best single one.
    base = {"page_kib": 4, "hash": 0, "crypto": 0, "stats": 0}
    screen = [base, {**base, "page_kib": 1}, {**base, "hash": 1}, {**base, "stats": 1}]
    gain = {"page_kib": 1.10, "hash": 1.10, "stats": 1.10}

    def ops(c: dict[str, Any]) -> float:
        v = 100.0
        for n, g in gain.items():
            v *= g if c[n] != base[n] else 1.0
        return v

    hist = _history([(c, ops(c), "screen") for c in screen])
    s = _strategy()
    proposal = s.ask(hist)
    assert len(proposal) == 1 and proposal[0].phase == "tune"
    assert proposal[0].config == {"page_kib": 1, "hash": 1, "crypto": 0, "stats": 1}


def test_local_model_keeps_a_wide_prior_only_for_factors_it_has_not_compared() -> None:
    # Around the incumbent: page size measured at both levels (a 2x effect), stats measured
    # at both levels with no effect, hash never varied. The per-factor priors follow what
    # the runs show: stats' shrinks to noise size, page's and hash's stay wide, so an
    # untried hash level is still worth a run and an untried stats level is not.
    from storlab.tune.strategies import LocalModel

    inc = {"page_kib": 4, "hash": 0, "crypto": 0, "stats": 0}
    rows = [(inc, 100.0), ({**inc, "page_kib": 1}, 200.0), ({**inc, "stats": 1}, 100.5),
            ({**inc, "crypto": 1}, 50.0)]
    s = _strategy()
    tally = Tally(_history([(c, v, "screen") for c, v in rows]), s.objectives)
    model = LocalModel(s.domain, tally.measured(), inc)
    assert model.prior["stats"] < model.prior["hash"] / 20
    assert model.prior["page_kib"] > model.prior["stats"] * 20
    _, sd_stats = model.gain({**inc, "stats": 1})
    _, sd_hash = model.gain({**inc, "hash": 1})
    assert sd_stats < sd_hash / 5


def test_local_model_keeps_a_wide_prior_for_a_level_never_run() -> None:
    # Cache sizes 1-8 measured flat around the incumbent, 16 and 32 never run: the flat
    # levels must not make the untried ones "known" (a cache or queue-depth knee sits at
    # the extremes). Before, the factor's one prior was averaged over run and unrun levels
    # and collapsed to the noise floor: sd 0.03 for cache=32 against 0.18 for an untried
    # hash level.
    from storlab.space import Factor, Space
    from storlab.tune.strategies import LocalModel

    space = Space([Factor("cache", "integer", values=[1, 2, 4, 8, 16, 32]),
                   Factor("hash", "integer", values=[0, 1]),
                   Factor("crypto", "integer", values=[0, 1])])
    s = make_strategy("screen-then-tune", Domain(space), [Objective("ops", "maximize")],
                      TuneSettings(budget=40, seed=3))
    inc = {"cache": 1, "hash": 0, "crypto": 0}
    rows = [(inc, 100.0), ({**inc, "cache": 2}, 100.5), ({**inc, "cache": 4}, 99.8),
            ({**inc, "cache": 8}, 100.2), ({**inc, "crypto": 1}, 50.0)]
    tally = Tally(_history([(c, v, "screen") for c, v in rows]), s.objectives)
    model = LocalModel(s.domain, tally.measured(), inc)
    _, sd_hash = model.gain({**inc, "hash": 1})
    for level in (16, 32):
        _, sd = model.gain({**inc, "cache": level})
        assert sd > sd_hash / 2, (level, sd, sd_hash)
    _, sd_seen = model.gain({**inc, "cache": 4})
    assert sd_seen < sd_hash / 5  # a level run next to the incumbent is known


def test_escape_moves_several_factors_at_once_to_another_basin() -> None:
    # Two basins three factors apart: a = all zeros (wide), b = (0, 0, 2, 2, 2), 4 % higher
    # and narrow. From a every one- and two-factor change is worse (each alone costs 20 %,
    # and b's basin is still two or one factor away); a screening run lies in b's basin.
    a, b = (0, 0, 0, 0, 0), (0, 0, 2, 2, 2)
    names = ["f0", "f1", "f2", "f3", "f4"]

    def y(c: dict[str, Any]) -> float:
        x = tuple(c[n] for n in names)
        da = sum(p != q for p, q in zip(x, a))
        db = sum(p != q for p, q in zip(x, b))
        return max(100 * 0.8 ** da, 104 * 0.8 ** db)

    grid = pd.DataFrame([dict(zip(names, c)) for c in itertools.product(range(3), repeat=5)])
    s = make_strategy("screen-then-tune", Domain(space_from_table(grid, names)),
                      [Objective("ops", "maximize")], TuneSettings(budget=60, seed=1))
    assert isinstance(s, ScreenThenTune)
    cfg = lambda x: dict(zip(names, x))  # noqa: E731
    screen = [cfg((1, 0, 2, 2, 2)), cfg((2, 1, 0, 1, 0)), cfg((1, 2, 1, 0, 2)),
              cfg((2, 2, 2, 1, 1)), cfg((0, 1, 1, 2, 1)), cfg((1, 1, 0, 0, 2))]
    around = [cfg(a)] + [cfg(tuple(lv if i == j else 0 for j in range(5)))
                         for i in range(5) for lv in (1, 2)]
    hist = _history([(c, y(c), "screen") for c in screen] +
                    [(c, y(c), "tune") for c in around])
    tally = Tally(hist, s.objectives)
    ranking, _ = s.screening(hist)
    assert tally.best().config == cfg(a)
    # a local optimum for one- and two-factor moves...
    assert s.local_step(tally, ranking, cfg(a)) is None
    assert s.pair_step(tally, ranking, cfg(a)) is None
    # ...that the next search run leaves by a group move towards the other basin
    step = s.ask(hist)[0]
    assert step.note == {"move": "escape"}
    assert sum(step.config[n] != 0 for n in names) >= 3
    # Escape moves, the other asks' turn between them, reach b's peak within a few runs.
    for _ in range(8):
        if any(o.config == cfg(b) for o in hist):
            break
        p = s.ask(hist)[0]
        hist += _history([(p.config, y(p.config), p.phase)])
    assert any(o.config == cfg(b) for o in hist)
    # Off, the same history goes elsewhere: TPE's turn at a local optimum
    s.escape = False
    assert s.ask(hist[:len(screen) + len(around)])[0].note == {}

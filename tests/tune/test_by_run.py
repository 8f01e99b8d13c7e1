"""The define-by-run space the Optuna TPE baseline of `tune-eval` writes (`_by_run`)."""

from __future__ import annotations

import itertools

import optuna

from storlab.space import Factor, Space
from storlab.tune.domain import Domain
from storlab.tune.evaluate import _by_run

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _space() -> Space:
    return Space([Factor("journal", "categorical", values=["on", "off"]),
                  Factor("compressor", "categorical", values=["none", "snappy", "zlib"]),
                  Factor("cache", "integer", values=[1, 2, 4, 8])])


def _rows(domain: Domain) -> list[tuple]:
    return [tuple(c[n] for n in domain.names) for c in domain.candidates or []]


def _study(seed: int) -> optuna.Study:
    return optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))


def test_full_factorial_suggests_what_ask_with_the_whole_space_suggests() -> None:
    """On a full factorial nothing is fixed: the parameter sequence over 30 trials (past
    TPE's 10 random startup trials) equals `study.ask(dists)`'s with the same seed."""
    space = _space()
    full = [dict(zip(space.names, c)) for c in itertools.product(
        ["on", "off"], ["none", "snappy", "zlib"], [1, 2, 4, 8])]
    domain = Domain(space, full)
    dists = {n: domain.distribution(n) for n in domain.names}
    by_run, whole = _study(4), _study(4)
    for i in range(30):
        t = by_run.ask()
        cfg = _by_run(t, domain, dists, _rows(domain))
        u = whole.ask(dists)
        assert t.params == u.params, i
        assert cfg == {n: domain.from_param(n, u.params[n]) for n in domain.names}
        y = float(len(cfg["compressor"]) + cfg["cache"])
        by_run.tell(t, y)
        whole.tell(u, y)


def test_a_factor_the_rows_fix_is_set_not_suggested() -> None:
    """Without a journal the table holds only compressor "none": once journal is off the
    compressor is fixed (no parameter for it), with a journal it is suggested. What is
    fixed depends on the order of `domain.names`: a factor is fixed only by the ones
    before it."""
    space = _space()
    rows = [{"journal": j, "compressor": c, "cache": k}
            for j, c, k in itertools.product(["on", "off"], ["none", "snappy", "zlib"],
                                             [1, 2, 4, 8])
            if j == "on" or c == "none"]
    domain = Domain(space, rows)
    dists = {n: domain.distribution(n) for n in domain.names}
    study = _study(1)
    seen = set()
    for _ in range(40):
        t = study.ask()
        cfg = _by_run(t, domain, dists, _rows(domain))
        seen.add(cfg["journal"])
        if cfg["journal"] == "off":
            assert "compressor" not in t.params and cfg["compressor"] == "none"
        else:
            assert "compressor" in t.params
        assert {"journal", "cache"} <= set(t.params)
        assert cfg in domain.candidates
        study.tell(t, float(cfg["cache"]))
    assert seen == {"on", "off"}

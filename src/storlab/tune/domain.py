"""What a tuner may propose: the space's factors as Optuna distributions, feasibility
(the space's constraints, and for offline evaluation the measured table's rows), and
enumeration or sampling of the feasible configurations of a subspace."""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import (BaseDistribution, CategoricalDistribution,
                                  FloatDistribution, IntDistribution)

from ..campaign.sources import config_key
from ..jsonutil import plain
from ..space import Factor, Space
from ..units import to_number

#: Above this many combinations a subspace is sampled rather than enumerated.
ENUMERATE_MAX = 20_000


class Domain:
    """The feasible configurations of a space, optionally restricted to a finite list
    (`candidates`: the rows of a measured table, for offline evaluation)."""

    def __init__(self, space: Space, candidates: Sequence[Mapping[str, Any]] | None = None
                 ) -> None:
        self.space = space
        self.names = space.names
        self.candidates = None if candidates is None else \
            [{n: plain(c[n]) for n in self.names} for c in candidates]
        self._cand_keys = None if self.candidates is None else \
            {config_key(c) for c in self.candidates}

    # ------------------------------------------------------------------ feasibility
    def feasible(self, config: Mapping[str, Any]) -> bool:
        if self._cand_keys is not None:
            return config_key(config) in self._cand_keys
        return all(c(config) for c in self.space.constraints)

    # ------------------------------------------------------------------ optuna mapping
    def distribution(self, name: str) -> BaseDistribution:
        """Categorical factors as categories; listed numeric/ordinal values as an ordered
        index (TPE then learns which end is better); ranges as int/float distributions."""
        f = self.space[name]
        levels = f.levels
        if f.kind == "categorical":
            return CategoricalDistribution([plain(v) for v in levels or []])
        if levels is not None:
            return IntDistribution(0, len(levels) - 1)
        lo, hi = f.range  # type: ignore[misc]
        if f.kind == "integer":
            return IntDistribution(int(lo), int(hi), log=f.log)
        return FloatDistribution(float(lo), float(hi), log=f.log)

    def to_param(self, name: str, value: Any) -> Any:
        f = self.space[name]
        levels = f.levels
        if f.kind == "categorical":
            return plain(value)
        if levels is not None:
            return _index_of(f, value)
        return plain(value)

    def from_param(self, name: str, param: Any) -> Any:
        f = self.space[name]
        levels = f.levels
        if f.kind == "categorical":
            return param
        if levels is not None:
            return plain(levels[int(param)])
        return int(param) if f.kind == "integer" else float(param)

    # ------------------------------------------------------------------ subspaces
    def n_levels(self, name: str) -> float:
        levels = self.space[name].levels
        return float(len(levels)) if levels is not None else math.inf

    def subspace(self, active: Sequence[str], fixed: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """Every feasible configuration that varies `active` and keeps `fixed`, or None
        when the subspace is continuous or too large to list."""
        if self.candidates is not None:
            keep = [n for n in self.names if n not in active]
            return [c for c in self.candidates
                    if all(c[n] == fixed[n] for n in keep)]
        size = math.prod(self.n_levels(n) for n in active)
        if not math.isfinite(size) or size > ENUMERATE_MAX:
            return None
        levels = [[plain(v) for v in self.space[n].levels or []] for n in active]
        out = []
        for combo in itertools.product(*levels):
            cfg = {**fixed, **dict(zip(active, combo))}
            cfg = {n: cfg[n] for n in self.names}
            if self.feasible(cfg):
                out.append(cfg)
        return out

    def _constrained(self) -> list[str]:
        """The factors the constraints name, in the space's order."""
        return sorted({n for c in self.space.constraints for n in c.names},
                      key=self.names.index)

    def repairable(self) -> bool:
        """Whether `repair` can list the changes: constraints over listed levels only,
        at most ENUMERATE_MAX combinations of them."""
        names = self._constrained()
        return bool(names) and all(self.space[n].levels for n in names) and \
            math.prod(len(self.space[n].levels or []) for n in names) <= ENUMERATE_MAX

    def repair(self, config: Mapping[str, Any], avoid: Collection[str] = ()
               ) -> dict[str, Any] | None:
        """The feasible configuration nearest `config` that changes only factors the
        constraints name, or None (a range factor among them, too many combinations to
        list, or nothing feasible outside `avoid`, a set of config keys).

        Nearest: the fewest factor levels given up, a factor with L levels weighing
        1 / (L - 1), so a two-level factor's level is the last to go (each of its levels
        holds half a screening's runs: MongoDB's `journal == 0` forces its compressor and
        commit interval, and changing those two keeps the journal off, where changing the
        journal alone would leave a screening with one run without it); then the smaller
        move in level positions; then the space's order of levels."""
        if not self.repairable():
            return None
        names = self._constrained()
        levels = [[plain(v) for v in self.space[n].levels or []] for n in names]
        here = {n: plain(config[n]) for n in self.names}
        best: tuple[float, float] | None = None
        out: dict[str, Any] | None = None
        for combo in itertools.product(*levels):
            cfg = {**here, **dict(zip(names, combo))}
            if not self.feasible(cfg) or config_key(cfg) in avoid:
                continue
            cost, move = 0.0, 0.0
            for n, lv, v in zip(names, levels, combo):
                if v != here[n]:
                    cost += 1.0 / max(1, len(lv) - 1)
                    at = lv.index(here[n]) if here[n] in lv else 0
                    move += abs(lv.index(v) - at) / max(1, len(lv) - 1)
            if best is None or (cost, move) < best:
                best, out = (cost, move), cfg
        return out

    def sample(self, rng: np.random.Generator, active: Sequence[str],
               fixed: Mapping[str, Any], tries: int = 200) -> dict[str, Any] | None:
        """One random feasible configuration of a continuous or very large subspace."""
        for _ in range(tries):
            cfg = dict(fixed)
            for n in active:
                u = rng.random(1)
                cfg[n] = plain(self.space[n].from_unit(u)[0])
            cfg = {n: cfg[n] for n in self.names}
            if self.feasible(cfg):
                return cfg
        return None


def _index_of(f: Factor, value: Any) -> int:
    levels = [plain(v) for v in f.levels or []]
    if value in levels:
        return levels.index(value)
    try:  # "4k" written where the space lists 4096
        sizes = [to_number(v) for v in levels]
        x = to_number(value)
    except ValueError:
        sizes, x = [], None
    if x in sizes:
        return sizes.index(x)
    raise ValueError(f"{value!r} is not a value of {f.name!r}")

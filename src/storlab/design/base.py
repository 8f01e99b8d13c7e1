"""The `Design` shape every design family returns, and the steps every design shares:
center points, replicates, randomised run order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..jsonutil import plain, to_jsonable
from ..space import Space


@dataclass
class Design:
    """A run table in natural units plus its coded matrix and provenance.

    `table`: one row per run: the factor columns, then `run` (execution order, 1-based),
    `std_order` (row of the unrandomised design, 1-based), `replicate`, `block`, `center`.
    `coded`: the same rows, factor columns only, coded -1/0/+1 for two-level designs or
    in [0, 1) for sampling designs. `meta`: kind, seed, and for fractional factorials the
    generators, defining relation, resolution, word-length pattern and aliases.
    """

    space: Space
    table: pd.DataFrame
    coded: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def runs(self) -> int:
        return len(self.table)

    @property
    def kind(self) -> str:
        return str(self.meta.get("kind", ""))

    def configurations(self) -> list[dict[str, Any]]:
        """The runs in execution order as plain {factor: value} dicts."""
        rows = self.table.sort_values("run")[self.space.names]
        return [{k: plain(v) for k, v in r.items()} for r in rows.to_dict("records")]

    def export_table(self) -> pd.DataFrame:
        """The run table as a file holds it: a factor given in coded units (all its values
        -1, 0 or +1, as `--factors K` makes them) is written as integers, `-1`/`1` as R's
        FrF2 writes them, not `-1.0`/`1.0`; natural values stay as they are."""
        out = self.table.copy()
        for name in self.space.names:
            col = out[name]
            if col.dtype.kind == "f" and len(col) and col.isin((-1.0, 0.0, 1.0)).all():
                out[name] = col.astype(np.int64)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The design as JSON-ready data: metadata plus the run table (what `storlab design
        --json` prints)."""
        out = to_jsonable(self.meta)
        out["runs"] = self.runs
        out["factors"] = self.space.names
        out["labels"] = dict(zip(self.space.labels, self.space.names))
        out["table"] = [{k: plain(v) for k, v in r.items()}
                        for r in self.export_table().to_dict("records")]
        return out

    def to_json(self) -> dict[str, Any]:
        """The old name of `to_dict` (one name for JSON-ready data across storlab): kept so
        that code written against it keeps working, with a DeprecationWarning."""
        import warnings

        warnings.warn("Design.to_json() is deprecated; use to_dict(), which returns the same "
                      "dictionary", DeprecationWarning, stacklevel=2)
        return self.to_dict()


def from_coded(space: Space, coded: np.ndarray, meta: dict[str, Any],
               center: np.ndarray | None = None) -> Design:
    """Build a Design from a coded (-1/0/+1) matrix, one column per factor, in std order."""
    coded = np.asarray(coded, dtype=float)
    n = coded.shape[0]
    data = {f.name: f.from_coded(coded[:, j]) for j, f in enumerate(space.factors)}
    table = pd.DataFrame(data)
    table["run"] = np.arange(1, n + 1)
    table["std_order"] = np.arange(1, n + 1)
    table["replicate"] = 1
    table["block"] = 1
    table["center"] = center if center is not None else np.zeros(n, dtype=bool)
    return Design(space, table, pd.DataFrame(coded, columns=space.names), dict(meta))


def add_center_points(design: Design, n: int) -> Design:
    """Append `n` center runs (numeric factors at their center).

    Categorical and ordinal factors have no center; in center runs they alternate between
    low and high so the curvature test stays balanced over them.
    """
    if n <= 0:
        return design
    space = design.space
    if not any(f.numeric for f in space.factors):
        raise ValueError("center points need at least one integer or real factor")
    coded = np.zeros((n, space.k))
    for j, f in enumerate(space.factors):
        if not f.numeric:
            coded[:, j] = np.where(np.arange(n) % 2 == 0, -1.0, 1.0)
    extra = from_coded(space, coded, {}, center=np.ones(n, dtype=bool))
    m = design.runs
    extra.table["std_order"] = np.arange(m + 1, m + n + 1)
    extra.table["run"] = extra.table["std_order"]
    table = pd.concat([design.table, extra.table], ignore_index=True)
    coded_all = pd.concat([design.coded, extra.coded], ignore_index=True)
    meta = dict(design.meta, center_points=n)
    return Design(space, table, coded_all, meta)


def replicate(design: Design, r: int) -> Design:
    """Repeat the whole design `r` times; each copy gets its replicate number (and block)."""
    if r <= 1:
        return design
    tables, codeds = [], []
    for i in range(r):
        t = design.table.copy()
        t["replicate"] = i + 1
        t["block"] = i + 1
        tables.append(t)
        codeds.append(design.coded)
    table = pd.concat(tables, ignore_index=True)
    table["run"] = np.arange(1, len(table) + 1)
    return Design(design.space, table, pd.concat(codeds, ignore_index=True),
                  dict(design.meta, replicates=r))


def randomize(design: Design, seed: int | None) -> Design:
    """Shuffle the run order (within blocks), reproducibly for a seed."""
    rng = np.random.default_rng(seed)
    order = np.empty(design.runs, dtype=int)
    blocks = design.table["block"].to_numpy()
    pos = 0
    for b in sorted(set(blocks)):
        idx = np.flatnonzero(blocks == b)
        order[pos:pos + len(idx)] = rng.permutation(idx)
        pos += len(idx)
    table = design.table.iloc[order].reset_index(drop=True)
    table["run"] = np.arange(1, len(table) + 1)
    coded = design.coded.iloc[order].reset_index(drop=True)
    return Design(design.space, table, coded, dict(design.meta, randomized=True, seed=seed))

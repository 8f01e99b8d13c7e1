"""A fixed design as a design source: a generated design (one of `design.KINDS`), a CSV or a
literal list of configurations, read and checked against the space before anything runs.

`FixedSource` proposes its whole table once, as Optuna's grid sampler proposes its grid:
the campaign asks it before the first run and lays the table out (configuration `c` of the
design's standard order, repetition `r`: run `c<c>-r<r>`, shuffled with the campaign's
seed); asked again, it has nothing more. Its plan follows from the file, so the store keeps
only its configurations (and a resume or a grown CSV is checked against them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import CampaignError, StorlabError
from ..fileio import read_table
from ..jsonutil import to_jsonable
from ..space import Space
from .inputs import read_campaign_input
from .sources import Observation, Proposal
from .spec import CampaignSpec

#: Design bookkeeping columns carried into the results.
DESIGN_COLUMNS = ("std_order", "replicate", "block", "center")

Config = tuple[int, dict[str, Any], dict[str, Any]]


class FixedSource:
    """A table of configurations, each to run `repetitions` times, proposed once."""

    adaptive = False
    batches = False

    def __init__(self, configs: list[Config], meta: dict[str, Any], repetitions: int) -> None:
        self.configs = configs
        self._meta = meta
        self.repetitions = repetitions
        self._asked = False

    def ask(self, history: Sequence[Observation], pending: Sequence[Proposal] = ()
            ) -> list[Proposal]:
        """The whole table the first time (its bookkeeping as each proposal's note), then
        nothing."""
        if self._asked:
            return []
        self._asked = True
        return [Proposal(dict(cfg), self.repetitions, "", dict(info))
                for _, cfg, info in self.configs]

    def meta(self) -> dict[str, Any]:
        """A generated design's (kind, resolution, generators, aliases ... seed), or
        `{kind: csv|configs}`."""
        return dict(self._meta)


Stored = Callable[[], "dict[str, Any] | None"]


def fixed_source(spec: CampaignSpec, path: Path, space: Space, stored: Stored) -> FixedSource:
    """The fixed design of a campaign file, every configuration validated against the space;
    `stored()` is the design metadata the store keeps (a resume draws the same table)."""
    configs, meta = _configurations(spec, path, space, stored)
    return FixedSource(configs, meta, spec.repetitions)


def _configurations(spec: CampaignSpec, path: Path, space: Space, stored: Stored
                    ) -> tuple[list[Config], dict[str, Any]]:
    """(config_id, {factor: value}, {design bookkeeping}) in the design's standard order,
    and the design's metadata."""
    d = spec.design
    here = path.parent
    meta: dict[str, Any] = {"kind": "configs" if d.configs is not None else "csv",
                            **({"csv": d.csv} if d.csv is not None else {})}
    if d.configs is not None:
        source = f"{path}: design.configs"
        table = pd.DataFrame(d.configs)
        extra = [c for c in table.columns if c not in space.names]
        if extra:
            raise CampaignError(f"{source}: {extra} are not factors of the space")
    elif d.csv is not None:
        source = str(here / d.csv)
        try:  # the one table reader: its errors read as every other table's
            table = read_table(here / d.csv, data=read_campaign_input(here / d.csv, path))
        except StorlabError as exc:
            raise CampaignError(f"{path}: field design.csv: {exc}") from None
        extra = [c for c in table.columns
                 if c not in space.names and c not in (*DESIGN_COLUMNS, "run")]
        if extra:
            raise CampaignError(f"{source}: column(s) {extra} are not factors of the space")
        if "std_order" in table:
            table = table.sort_values("std_order", kind="stable")
    else:
        source = f"{path}: design"
        from ..design import make_design

        kw = design_kwargs(spec)
        before = stored() if d.kind == "lhs" else None
        if before is not None and before.get("kind") == "lhs":
            # resume with the mapping the plan was made with (none recorded: made before
            # the LHS drew which levels get the extra runs), not refuse it as another plan
            kw["extra_levels"] = before.get("extra_levels", "first")
        try:
            design = make_design(space, str(d.kind), **kw)
        except StorlabError as exc:
            raise CampaignError(f"{source}: {exc}") from None
        meta = to_jsonable(dict(design.meta))
        table = design.table
        if "std_order" in table:
            table = table.sort_values("std_order", kind="stable")
    missing = [n for n in space.names if n not in table.columns]
    if missing:
        raise CampaignError(f"{source}: no column for factor(s) {missing}")
    out = []
    for i, row in enumerate(table.to_dict("records"), start=1):
        cfg = {n: plain(row[n]) for n in space.names}
        for n, v in cfg.items():
            if v is None:
                raise CampaignError(f"{source}: configuration {i}: factor {n!r} is empty")
        try:
            space.validate(cfg)
        except StorlabError as exc:
            raise CampaignError(f"{source}: configuration {i}: {exc}") from None
        info = {c: plain(row[c]) for c in DESIGN_COLUMNS if c in row}
        out.append((i, cfg, info))
    if not out:
        raise CampaignError(f"{source}: the design has no configurations")
    return out, meta


def design_kwargs(spec: CampaignSpec) -> dict[str, Any]:
    """`make_design`'s keywords for the campaign's generated design. The campaign owns the
    run order, so the design stays in standard order (`randomize_order=False`)."""
    d = spec.design
    kw: dict[str, Any] = dict(runs=d.runs, resolution=d.resolution, generators=d.generators,
                              center=d.center, replicates=d.replicates,
                              seed=d.seed if d.seed is not None else spec.seed,
                              randomize_order=False)
    if d.fold is not None:
        kw["fold"] = d.fold
    if d.optimize is not None:
        kw["optimize"] = d.optimize
    return kw


def plain(v: Any) -> Any:
    """A table cell as a plain Python value (NaN: None)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and np.isnan(v):
        return None
    return v

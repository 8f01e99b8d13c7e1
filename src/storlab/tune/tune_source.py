"""The tuning design source: `design: {kind: tune, budget: 60, strategy: auto, ...}` in a
campaign file. It adapts a strategy (strategies.py) to the campaign's design-source seam;
everything else (runner, executor, store, resume, progress) is the campaign's own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..campaign.sources import Observation, Proposal
from ..campaign.spec import DesignSpec
from ..jsonutil import plain
from ..space import Space
from .domain import Domain
from .strategies import Objective, Strategy, TuneError, TuneSettings, make_strategy


class TuneSource:
    """A strategy behind the campaign's ask/tell seam."""

    adaptive = True

    def __init__(self, strategy: Strategy) -> None:
        self.strategy = strategy

    @property
    def objectives(self) -> list[Objective]:
        return self.strategy.objectives

    @property
    def batches(self) -> bool:
        """Whether it can propose runs while others are in flight (a parallel executor)."""
        return self.strategy.batches

    @property
    def width(self) -> int:
        """Runs the executor keeps in flight: an ask with none in flight fills them."""
        return self.strategy.width

    @width.setter
    def width(self, n: int) -> None:
        self.strategy.width = max(1, int(n))

    def ask(self, history: Sequence[Observation], pending: Sequence[Proposal] = ()
            ) -> list[Proposal]:
        return self.strategy.ask(history, pending)

    def meta(self) -> dict[str, Any]:
        return {"kind": "tune", **self.strategy.meta()}

    def check(self, runner: Any) -> None:
        """Refuse, before anything runs, a response the runner cannot produce."""
        check_metrics(runner, [o.name for o in self.objectives])


def check_metrics(runner: Any, wanted: Sequence[str]) -> None:
    """Refuse a response the runner cannot produce (when the runner can say what it gives),
    before anything runs: `tune` and `confirm` alike."""
    names = getattr(runner, "metric_names", None)
    known = names() if callable(names) else None
    if known is None:
        return
    missing = [n for n in wanted if n not in known]
    if missing:
        raise TuneError(f"response {missing[0]!r} is not a metric of this runner; it "
                        f"gives {', '.join(sorted(known)[:12])}"
                        + (" ..." if len(known) > 12 else ""))


def objectives_from(space: Space, spec: Sequence[str | dict[str, str]] | None
                    ) -> list[Objective]:
    """`[bw]`, `[{bw: maximize}, {p99: minimize}]` or `[{name: p99, goal: minimize}]`; a
    goal left out comes from the space's responses; none given: the space's first one."""
    if not spec:
        if not space.responses:
            raise TuneError("name the response to optimise (design.objectives, or "
                            "--response); the space declares no responses")
        r = space.responses[0]
        return [Objective(r.name, r.goal)]
    out = []
    for item in spec:
        parsed = _name_and_goal(item)
        if parsed is None:
            raise TuneError(f"objective {item!r}: write a name, {{name: goal}} or "
                            "{name: ..., goal: ...}")
        name, goal = parsed
        if goal is None:
            goal = declared_goal(space, name)
        if goal not in ("maximize", "minimize"):
            raise TuneError(f"objective {name!r}: goal {goal!r} must be maximize or minimize")
        out.append(Objective(str(name), str(goal)))
    if len({o.name for o in out}) != len(out):
        raise TuneError("an objective is named twice")
    if len(out) > 2:
        raise TuneError("at most two objectives (throughput and tail latency, say)")
    return out


def objectives_given(spec: Sequence[str | dict[str, str]] | None) -> list[Objective]:
    """The objectives whose goal the list itself gives (`{p99: minimize}`, `{name: p99,
    goal: minimize}`); bare names are left out."""
    parsed = [_name_and_goal(item) for item in spec or []]
    return [Objective(p[0], p[1]) for p in parsed if p is not None and p[1] is not None]


def _name_and_goal(item: str | dict[str, Any]) -> tuple[str, str | None] | None:
    """One objective as written: (name, its goal or None when left out); None when the item
    has none of the shapes `name`, `{name: goal}`, `{name: ..., goal: ...}`."""
    if isinstance(item, str):
        return item, None
    if "name" in item:
        return str(item["name"]), (str(item["goal"]) if "goal" in item else None)
    if len(item) == 1:
        name, goal = next(iter(item.items()))
        return str(name), str(goal)
    return None


def declared_goal(space: Space, name: str) -> str:
    """The goal the space declares for a response; an undeclared one needs its goal said
    (a p99 left to default to maximize would be tuned the wrong way without a word)."""
    if any(r.name == name for r in space.responses):
        return space.response(name).goal
    raise TuneError(f"response {name!r} is not declared in the space, so its goal is "
                    f"unknown: give it (-y {name}:minimize or :maximize; {{{name}: minimize}} "
                    "in design.objectives)")


def check_feasible(domain: Domain, seed: int) -> None:
    """Refuse a space whose constraints leave nothing to run."""
    pool = domain.subspace(domain.names, {})
    if pool is not None:
        if not pool:
            raise TuneError("the space's constraints leave no feasible configuration")
        return
    rng = np.random.default_rng(seed)
    if domain.sample(rng, domain.names, {}, tries=2000) is None:
        raise TuneError("the space's constraints left no feasible configuration in 2,000 "
                        "random draws")


def design_from_meta(design: DesignSpec, meta: Mapping[str, Any]) -> DesignSpec:
    """A fixed design's file read as the tuning a store recorded (its source's `meta()`):
    `storlab tune --budget N` of a fixed design, read back by status, results and report."""
    return design.with_source(
        kind=meta["kind"], budget=meta.get("budget"), strategy=meta.get("strategy"),
        objectives=[{"name": n, "goal": g} for n, g in meta.get("objectives") or []] or None)


def make_source(space: Space, design: DesignSpec, seed: int) -> TuneSource:
    """The campaign's factory for `kind: tune`."""
    domain = Domain(space)
    objectives = objectives_from(space, design.objectives)
    baseline = None
    if design.baseline is None and space.defaults() is not None:
        baseline = {n: plain(v) for n, v in space.defaults().items()}  # type: ignore[union-attr]
        if not domain.feasible(baseline):
            raise TuneError(f"the space's default configuration {baseline} violates its "
                            "constraints")
    if design.baseline is not None:
        missing = [n for n in space.names if n not in design.baseline]
        extra = [n for n in design.baseline if n not in space.names]
        if missing or extra:
            raise TuneError(f"baseline: {'lacks ' + str(missing) if missing else ''}"
                            f"{' and ' if missing and extra else ''}"
                            f"{str(extra) + ' are not factors' if extra else ''}")
        space.validate(design.baseline)
        baseline = {n: design.baseline[n] for n in space.names}
    check_feasible(domain, seed)
    settings = TuneSettings(budget=int(design.budget or 0), seed=seed,
                            screen_runs=design.screen_runs, confirm_runs=design.confirm_runs,
                            confirm_top=design.confirm_top, stall=design.stall,
                            confirm_share=design.confirm_share,
                            baseline=baseline)
    return TuneSource(make_strategy(design.strategy, domain, objectives, settings))

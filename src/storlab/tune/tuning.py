"""The library face of tuning and confirmation, which `storlab tune` and `storlab confirm`
only call and print:

    from storlab.tune import tune, confirm
    out = tune("campaign.yaml", budget=60)          # screen, search, confirm; resumable
    out.result.best, out.data                        # TuneResult; its JSON with the run's facts
    cmp = confirm("campaign.yaml", ["bs=4k,iodepth=8"], against="bs=4k,iodepth=1")

Each has a two-step form (`Tuning`, `Confirmation`: everything checked when made, before any
run; then `run()`), for a caller that shows progress named after what it runs. A fixed
design's file is read as a tuning over its space (`--budget N`), into its own store. Errors
are `StorlabError` subclasses (a store of another comparison: `errors.PlanMismatch`)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import PlanMismatch, RunsFailed, StorlabError
from ..fileio import check_target, check_trusted_output_dir
from .optuna_storage import refuse_code_in_optuna_db

if TYPE_CHECKING:
    from ..campaign.campaign import Campaign
    from ..campaign.loop import Event, RunSummary
    from ..space import Space
    from .result import TuneResult

#: The design kind a tuning campaign file names.
KIND = "tune"


@dataclass
class TuneOutcome:
    """What one tuning invocation did: the result read from the store, its JSON (`data`:
    the result's `to_dict()` with the campaign, store, warm-up runs, notes, interruption and
    any Optuna export) and the run's summary."""

    campaign: Campaign
    result: TuneResult
    data: dict[str, Any]
    summary: RunSummary

    @property
    def interrupted(self) -> bool:
        return bool(self.summary.interrupted)


class Tuning:
    """A tuning campaign made from a file and the caller's overrides, checked (a budget
    below the runs a store already holds, a bad Optuna storage ...) before anything runs.
    The overrides are the only writer of the design's budget, strategy, seed, share and
    objectives."""

    def __init__(self, campaign_file: str | Path, *, budget: int | None = None,
                 strategy: str | None = None, objectives: Sequence[str] | None = None,
                 seed: int | None = None, confirm_share: float | None = None,
                 optuna_storage: str | None = None) -> None:
        from ..campaign.campaign import Campaign
        from ..campaign.spec import read_spec
        from ..campaign.storemeta import source_store
        from ..design import KINDS

        real, spec = read_spec(campaign_file)  # resolved once, with its link check
        d = spec.design
        #: What the tuning changed on the way (a fixed design's repetitions ...), said last.
        self.notes: list[str] = []
        if d.kind is not None and d.kind != KIND and d.kind not in KINDS:
            raise StorlabError(f"{campaign_file}: field design.kind: {d.kind!r} must be one "
                               f"of {', '.join(KINDS)} or {KIND}")
        update: dict[str, Any] = {}
        if d.kind != KIND:
            if budget is None:
                raise StorlabError(f"{campaign_file}: its design is not a tuning one; give "
                                   "--budget N to tune over its space")
            d = d.with_source(kind=KIND)
            if spec.store == "campaign.db":  # never mix with the fixed design's runs
                spec = spec.model_copy(update={"store": source_store(real, KIND)})
            if spec.repetitions != 1:  # said (terminal and JSON notes), not dropped in silence
                self.notes.append(f"the fixed design's repetitions: {spec.repetitions} do "
                                  "not apply to tuning (its confirmation re-runs the "
                                  "candidates)")
                spec = spec.model_copy(update={"repetitions": 1})
        if budget is not None:
            update["budget"] = budget
        if strategy is not None:
            update["strategy"] = strategy
        if seed is not None:
            update["seed"] = seed
        if confirm_share is not None:
            update["confirm_share"] = confirm_share
        if objectives:
            objs: list[Any] = []
            for r in objectives:
                name, _, goal = r.partition(":")
                objs.append({"name": name, "goal": goal} if goal else name)
            update["objectives"] = objs
        if update:
            spec = spec.model_copy(update={"design": d.model_copy(update=update)})
        _check_optuna_storage(optuna_storage)
        self.optuna_storage = optuna_storage
        self.campaign = Campaign(spec, real)
        done = _runs_done(self.campaign)
        budget_now = int(self.campaign.source.meta()["budget"])
        if done > budget_now:
            raise StorlabError(f"{self.campaign.store_path}: already holds {done} tuning "
                               f"runs; a budget of {budget_now} cannot take them back")

    @property
    def objectives(self) -> tuple[str, ...]:
        """The objectives' names, first the one the recommendation is best on."""
        return tuple(o.name for o in self.campaign.source.objectives)  # type: ignore[attr-defined]

    def run(self, executor: str = "sequential", on_event: Event | None = None,
            wait: bool = False) -> TuneOutcome:
        """Run (or resume) the tuning and read its result from the store."""
        from ..campaign.store import DONE, FAILED

        camp = self.campaign
        summary = camp.run(executor=executor, on_event=on_event, wait=wait)
        # imported after the runs: it needs scipy.stats, which no run has to wait for
        from .result import result_from_campaign

        res = result_from_campaign(camp)
        # Warm-ups are not in the history the strategy counts: said beside the budget. Only
        # those that finished or failed: one cut off while running under a key no resume
        # asks for again (an earlier storlab's c<c>-w<i>) stays 'running' in the store.
        warm = sum(bool(r["warmup"]) and r["status"] in DONE + FAILED
                   for r in camp.stored_runs(warmup=True))
        data = {"campaign": str(camp.path), "store": str(camp.store_path), **res.to_dict(),
                "warmup_runs": warm, "interrupted": summary.interrupted}
        data["notes"] = self.notes + data["notes"]
        if self.optuna_storage is not None:  # interrupted too: the runs so far are worth a look
            from .optuna_export import export_study

            n = export_study(res, camp.space, self.optuna_storage, camp.name,
                             {r["key"]: (r["started"], r["ended"]) for r in camp.stored_runs()})
            data["optuna"] = {"storage": self.optuna_storage, "study": camp.name,
                              "trials": n}
        return TuneOutcome(camp, res, data, summary)


def tune(campaign_file: str | Path, *, budget: int | None = None, strategy: str | None = None,
         objectives: Sequence[str] | None = None, seed: int | None = None,
         confirm_share: float | None = None, optuna_storage: str | None = None,
         executor: str = "sequential", on_event: Event | None = None,
         wait: bool = False) -> TuneOutcome:
    """Screen, tune, confirm: the best measured configuration of a campaign file, re-run and
    compared with the baseline (resumes like `Campaign.run`: call it again). `objectives`
    as the CLI's -y: NAME, NAME:minimize or NAME:maximize."""
    return Tuning(campaign_file, budget=budget, strategy=strategy, objectives=objectives,
                  seed=seed, confirm_share=confirm_share,
                  optuna_storage=optuna_storage).run(executor, on_event, wait)


def _check_optuna_storage(url: str | None) -> None:
    if url is None:
        return
    if not re.match(r"^[a-z][a-z0-9+]*://", url):
        raise StorlabError(f"--optuna-storage {url!r}: not a database URL (an Optuna RDB "
                           "storage such as sqlite:///study.db)")
    if url.startswith("sqlite:///"):
        # SQLite writes through a link and into a device as into a file (a study.db linked
        # to /dev/loop0 had a database written over the device's first blocks)
        db = url[len("sqlite:///"):]
        if os.path.islink(db):
            raise StorlabError(f"--optuna-storage {url}: {db} is a symbolic link; name the "
                               "database file itself")
        if db and db != ":memory:":
            check_target(db, "--optuna-storage")
            # as root: SQLite writes by path, so a directory no other user can swap
            check_trusted_output_dir(Path(db).parent, "--optuna-storage")
            refuse_code_in_optuna_db(url, db)


def _runs_done(camp: Campaign) -> int:
    """Measured runs a tuning store already holds, finished or failed, as its history
    counts them (0 without a store): read through the campaign, never a Store of our own."""
    from ..campaign.store import DONE, FAILED

    return sum(r["status"] in DONE + FAILED for r in camp.stored_runs())


# --------------------------------------------------------------------------- confirm
@dataclass
class ConfirmOutcome:
    """Configurations re-run side by side: one row per configuration (its role, the
    configuration, mean and spread of the response, failed runs and runs without a value,
    and the comparison with the reference), notes on short groups, and the run's summary."""

    campaign: Campaign
    response: str
    goal: str
    runs: int
    rows: list[dict[str, Any]]
    notes: list[str]
    summary: RunSummary
    unit: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def interrupted(self) -> bool:
        return bool(self.summary.interrupted)

    def to_dict(self) -> dict[str, Any]:
        """What `storlab confirm --json` prints."""
        return {"response": self.response, "goal": self.goal,
                "store": str(self.campaign.store_path), "runs": self.runs,
                "configs": self.rows, "notes": self.notes, "interrupted": self.interrupted}


class Confirmation:
    """Configurations (`factor=value,...` texts or mappings), and a reference, to re-run in
    random interleaved order into their own store, checked before anything runs (the
    response is one the runner gives; the same configuration given twice is refused)."""

    def __init__(self, campaign_file: str | Path, configs: Sequence[str | dict[str, Any]],
                 against: str | dict[str, Any] | None = None, *, runs: int = 3,
                 response: str | None = None, store: str = "confirm.db",
                 seed: int = 7) -> None:
        from ..campaign.campaign import Campaign, campaign_space
        from ..campaign.sources import config_key
        from ..campaign.spec import read_spec
        from .tune_source import check_metrics, declared_goal, objectives_given

        real, spec = read_spec(campaign_file)  # resolved once, with its link check
        space = campaign_space(spec, real)
        cfgs = [parse_config(c, space, "--config") for c in configs]
        ref = parse_config(against, space, "--against") if against else None
        allc = cfgs + ([ref] if ref is not None else [])
        if len({config_key(c) for c in allc}) != len(allc):
            raise StorlabError("the same configuration is given twice")
        name, _, goal = (response or (space.responses[0].name if space.responses else "")
                         ).partition(":")
        if not name:
            raise StorlabError("name the response to compare with --response")
        if goal not in ("", "maximize", "minimize"):
            raise StorlabError(f"--response {response}: the goal must be maximize or "
                               "minimize")
        design = spec.design.with_source(configs=allc, budget=None)
        spec = spec.model_copy(update={
            "design": design, "repetitions": runs, "randomize": True, "seed": seed,
            "store": store, "name": f"{spec.name or Path(campaign_file).stem}-confirm"})
        self.campaign = Campaign(spec, real)
        # before anything runs (it ran every run, then said no run produced it)
        check_metrics(self.campaign.preflight(), [name])
        # the goal given, else the file's objectives' (a tuning file says {p99: minimize}),
        # else the space's declaration
        file_goals = {o.name: o.goal for o in objectives_given(spec.design.objectives)}
        self.response = name
        self.goal = goal or file_goals.get(name) or declared_goal(space, name)
        self.runs = runs
        self.has_reference = ref is not None

    def run(self, executor: str = "sequential", on_event: Event | None = None,
            wait: bool = False) -> ConfirmOutcome:
        """Run (or resume) the interleaved runs and compare each configuration with the
        reference (Welch's t-test)."""
        from ..campaign.store import FAILED
        from .result import WelchComparison, describe

        camp, name = self.campaign, self.response
        try:
            summary = camp.run(executor=executor, on_event=on_event, wait=wait)
        except PlanMismatch:  # another set of configurations
            raise PlanMismatch(f"{camp.store_path}: holds the runs of other configurations; "
                               "give this comparison its own --store FILE") from None
        df = camp.results("run")
        groups = []
        for cid, cfg, _ in camp.configs:
            mine = df[df["config_id"] == cid] if len(df) else df
            ok = mine[mine["status"] == "ok"] if len(mine) else mine
            vals = [float(v) for v in ok.get(name, []) if isinstance(v, (int, float))
                    and math.isfinite(v)]
            # A mean over the one run of four that worked is no mean of four: count the rest.
            failed = int(mine["status"].isin(FAILED).sum()) if len(mine) else 0
            groups.append((cfg, vals, failed, len(ok) - len(vals)))
        if all(not v for _, v, _, _ in groups):
            raise RunsFailed(f"no run produced {name!r}: see `storlab status --failures` "
                               f"(store {camp.store_path})")
        base = groups[-1] if self.has_reference else None
        rows = []
        for i, (cfg, vals, failed, no_value) in enumerate(groups):
            role = "reference" if base is not None and i == len(groups) - 1 \
                else f"config {i + 1}"
            row: dict[str, Any] = {"role": role, "config": cfg, **describe(vals),
                                   "failed_runs": failed, "runs_without_value": no_value}
            if base is not None and i < len(groups) - 1 and vals and base[1]:
                row["comparison"] = WelchComparison(name, self.goal, vals, base[1]).to_dict()
            rows.append(row)
        short = [r for r in rows if r["failed_runs"] or r["runs_without_value"]]
        notes = [f"{r['role']}: {r['runs']} of "
                 f"{r['runs'] + r['failed_runs'] + r['runs_without_value']} runs gave {name}"
                 + (f"; {r['failed_runs']} failed" if r["failed_runs"] else "")
                 + (f"; {r['runs_without_value']} ran without a value of {name}"
                    if r["runs_without_value"] else "")
                 for r in short]
        return ConfirmOutcome(camp, name, self.goal, self.runs, rows, notes, summary,
                              camp.space.response(name).unit
                              if any(r.name == name for r in camp.space.responses) else "")


def confirm(campaign_file: str | Path, configs: Sequence[str | dict[str, Any]],
            against: str | dict[str, Any] | None = None, *, runs: int = 3,
            response: str | None = None, store: str = "confirm.db", seed: int = 7,
            executor: str = "sequential", on_event: Event | None = None,
            wait: bool = False) -> ConfirmOutcome:
    """Re-run configurations in random interleaved order and compare them with the
    reference (the last one, `against`) by Welch's t-test."""
    return Confirmation(campaign_file, configs, against, runs=runs, response=response,
                        store=store, seed=seed).run(executor, on_event, wait)


def parse_config(text: str | dict[str, Any], space: Space, what: str) -> dict[str, Any]:
    """`k=v,k=v` (or a mapping) into the space's values (a listed value as listed, else a
    number), every factor given."""
    from ..jsonutil import plain

    if isinstance(text, dict):
        text = ",".join(f"{k}={v}" for k, v in text.items())
    out: dict[str, Any] = {}
    for part in [p for p in text.split(",") if p.strip()]:
        k, eq, v = part.partition("=")
        k, v = k.strip(), v.strip()
        if not eq or not k:
            raise StorlabError(f"{what} {text!r}: write factor=value pairs separated by commas")
        if k not in space:
            raise StorlabError(f"{what}: {k!r} is not a factor (factors: "
                               f"{', '.join(space.names)})")
        f = space[k]
        levels = f.levels
        match = [plain(x) for x in levels or [] if str(x) == v]
        if match:
            out[k] = match[0]
        else:
            try:
                x = float(v)
            except ValueError:
                raise StorlabError(f"{what}: {k}={v!r} is not one of {levels}") from None
            out[k] = int(x) if x.is_integer() and f.kind in ("integer", "ordinal") else x
            if levels is not None:
                near = [plain(lv) for lv in levels if isinstance(plain(lv), (int, float))
                        and float(plain(lv)) == x]
                if near:
                    out[k] = near[0]
    missing = [n for n in space.names if n not in out]
    if missing:
        raise StorlabError(f"{what}: give every factor; missing {', '.join(missing)}")
    try:
        space.validate(out)
    except StorlabError as exc:
        raise StorlabError(f"{what}: {exc}") from None
    return {n: out[n] for n in space.names}

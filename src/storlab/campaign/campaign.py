"""A campaign: a design's configurations x repetitions, run by a runner through an
executor into the store; resumable, and exportable as the tidy results table.

Plan: configuration `c` (1-based, the design's standard order) and repetition `r` make the
run `c<c>-r<r>`; the warm-up runs before it are `c<c>-r<r>-w<i>`. The measured runs are
shuffled with the campaign's seed (`randomize: true`), and a configuration's warm-ups go
right before its first pending measured run (of each batch, in an adaptive campaign). The
plan is saved in the store the first time, so a resume or an export sees exactly the
configurations that were run.

Configurations come from a design source (`sources.py`): a fixed design gives its whole
table up front; an adaptive one (`design: {kind: tune, ...}`) is asked for the next batch
whenever every planned run has finished (with a parallel executor and a source that
batches: whenever a slot frees, told the runs still in flight), and its batches are saved
in the store as they come (`plan` table), so a killed adaptive campaign resumes the batch
it was in and then asks again with the same history it would have had.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import StorlabError
from ..fileio import read_table
from ..jsonutil import to_jsonable
from ..space import Space
from .executors import make_executor, requested_width
from .runners import (UNSANDBOXED_ENV, ShellTemplateError, make_runner, refused_writable,
                      render_argv, require_sandbox, reserved_env_clash, run_identity,
                      shell_command, template_names, unsandboxed)
from .sources import DesignSource, Observation, Proposal, adaptive_kinds, config_key, \
    make_source
from .spec import CampaignError, CampaignSpec, check_plan, load_spec
from .store import DONE, FAILED, Store
from .task import RunTask, StepSpec, TaskOutcome

#: Names the step templates may use besides the factors and `vars`.
BUILTINS = ("workdir", "campaign_dir", "key", "config_id", "repetition")
#: Design bookkeeping columns carried into the results.
DESIGN_COLUMNS = ("std_order", "replicate", "block", "center")

Event = Callable[[str, dict[str, Any]], None]


@dataclass
class PlannedRun:
    key: str
    seq: int
    config_id: int
    repetition: int
    warmup: bool
    config: dict[str, Any]


@dataclass
class RunSummary:
    """What one `storlab run` did."""

    planned: int
    already_done: int
    ran: int = 0
    ok: int = 0
    failed: int = 0
    interrupted: bool = False
    failures: list[str] = field(default_factory=list)


class Campaign:
    """A loaded, checked campaign file."""

    def __init__(self, spec: CampaignSpec, path: str | Path) -> None:
        self.spec = spec
        self.path = Path(path).resolve()
        self.dir = self.path.parent
        self.name = spec.name or self.path.stem
        self.space = self._load_space()
        self.source: DesignSource | None = None
        self._design_meta: dict[str, Any] = {}
        if spec.design.kind in adaptive_kinds():
            self.source = self._adaptive_source()
            self.configs: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
        else:
            self.configs = self._configurations()
            check_plan(spec, len(self.configs), str(self.path))
        self._check_steps()

    @property
    def adaptive(self) -> bool:
        """Whether the configurations come from an adaptive source (asked as runs finish)."""
        return self.source is not None

    @classmethod
    def load(cls, path: str | Path, store: str | None = None) -> Campaign:
        """The campaign of a file; with `store`, read from that store file (next to the
        file) instead of the file's `store:`, as the tuning it holds when `storlab tune`
        wrote it from a fixed design (`tune_store`)."""
        spec = load_spec(path)
        if store is None:
            _check_own_store(Path(path).resolve().parent / spec.store, Path(path))
        if store is not None:
            here = Path(path).resolve().parent
            own = {(here / n).resolve() for n in (spec.store, tune_store(path))}
            if (here / store).resolve() not in own:
                # the file's own stores are read as without --store (a campaign directory
                # moved or copied keeps its old path in their meta)
                _check_store_campaign(Path(path).resolve().parent / store, Path(path))
            spec = spec.model_copy(update={"store": store})
            spec = _as_stored_tuning(spec, Path(path).resolve().parent / store)
        return cls(spec, path)

    def tune_store_note(self) -> str | None:
        """One line when this fixed design's store has no runs but `storlab tune` wrote a
        store beside it (its runs went there, and read 'no store yet' here)."""
        other = self.dir / tune_store(self.path)
        if self.adaptive or other == self.store_path or not other.exists() or \
                self.stored_runs():
            return None
        return (f"`storlab tune` wrote this file's runs to {other.name}, not "
                f"{self.spec.store}: add --store {other.name}")

    # ------------------------------------------------------------------ loading
    @property
    def store_path(self) -> Path:
        return self.dir / self.spec.store

    @property
    def scratch(self) -> Path:
        return self.dir / self.spec.workdir

    def own_scratch(self) -> bool:
        """Whether the scratch area is the campaign's own: `workdir:` is a name inside the
        campaign's directory, but a link there may lead elsewhere (a shared directory),
        where only each run's own directory is the campaign's."""
        return self.scratch.resolve().is_relative_to(self.dir.resolve())

    def _load_space(self) -> Space:
        return campaign_space(self.spec, self.path)

    def _adaptive_source(self) -> DesignSource:
        d = self.spec.design
        seed = d.seed if d.seed is not None else self.spec.seed
        if self.spec.repetitions != 1:  # it was ignored without a word
            raise CampaignError(f"{self.path}: repetitions: {self.spec.repetitions} does not "
                                f"apply to a {d.kind} design (its confirmation re-runs the "
                                "candidates: design.confirm_runs); remove it")
        if d.objectives:
            # A store tuned when an undeclared response defaulted to maximize keeps the goal
            # it was tuned with (its design metadata has it): status and report still read it.
            declared = {r.name for r in self.space.responses}
            goals = self._stored_goals()
            d = d.model_copy(update={"objectives": [
                {o: goals[o]} if isinstance(o, str) and o not in declared and o in goals
                else o for o in d.objectives]})
        try:
            return make_source(str(d.kind), self.space, d, seed)
        except StorlabError as exc:
            raise CampaignError(f"{self.path}: design: {exc}") from None

    def _stored_goals(self) -> dict[str, str]:
        """The objectives' goals as the store's design metadata recorded them ({} without
        a store)."""
        meta = self._stored_design_meta(adaptive=True) or {}
        return {str(n): str(g) for n, g in meta.get("objectives") or []}

    def _configurations(self) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
        """(config_id, {factor: value}, {design bookkeeping}) in the design's standard order,
        every one validated against the space (before anything runs)."""
        d = self.spec.design
        self._design_meta = {"kind": "configs" if d.configs is not None else "csv",
                             **({"csv": d.csv} if d.csv is not None else {})}
        if d.configs is not None:
            source = f"{self.path}: design.configs"
            table = pd.DataFrame(d.configs)
            extra = [c for c in table.columns if c not in self.space.names]
            if extra:
                raise CampaignError(f"{source}: {extra} are not factors of the space")
        elif d.csv is not None:
            source = str(self.dir / d.csv)
            try:  # the one table reader: its errors read as every other table's
                table = read_table(self.dir / d.csv)
            except StorlabError as exc:
                raise CampaignError(f"{self.path}: field design.csv: {exc}") from None
            extra = [c for c in table.columns
                     if c not in self.space.names and c not in (*DESIGN_COLUMNS, "run")]
            if extra:
                raise CampaignError(f"{source}: column(s) {extra} are not factors of the space")
            if "std_order" in table:
                table = table.sort_values("std_order", kind="stable")
        else:
            source = f"{self.path}: design"
            from ..design import make_design

            kw = design_kwargs(self.spec)
            stored = self._stored_design_meta(adaptive=False)
            if d.kind == "lhs" and stored is not None and stored.get("kind") == "lhs":
                # resume with the mapping the plan was made with (none recorded: made before
                # the LHS drew which levels get the extra runs), not refuse it as another plan
                kw["extra_levels"] = stored.get("extra_levels", "first")
            try:
                design = make_design(self.space, str(d.kind), **kw)
            except StorlabError as exc:
                raise CampaignError(f"{source}: {exc}") from None
            self._design_meta = to_jsonable(dict(design.meta))
            table = design.table
            if "std_order" in table:
                table = table.sort_values("std_order", kind="stable")
        missing = [n for n in self.space.names if n not in table.columns]
        if missing:
            raise CampaignError(f"{source}: no column for factor(s) {missing}")
        out = []
        for i, row in enumerate(table.to_dict("records"), start=1):
            cfg = {n: _plain(row[n]) for n in self.space.names}
            for n, v in cfg.items():
                if v is None:
                    raise CampaignError(f"{source}: configuration {i}: factor {n!r} is empty")
            try:
                self.space.validate(cfg)
            except StorlabError as exc:
                raise CampaignError(f"{source}: configuration {i}: {exc}") from None
            info = {c: _plain(row[c]) for c in DESIGN_COLUMNS if c in row}
            out.append((i, cfg, info))
        if not out:
            raise CampaignError(f"{source}: the design has no configurations")
        return out

    def _check_steps(self) -> None:
        known = set(self.space.names) | set(self.spec.vars) | set(BUILTINS)
        clash = reserved_env_clash(set(self.space.names) | set(self.spec.vars))
        if clash:
            what = "factor" if clash[0] in self.space.names else "field vars:"
            raise CampaignError(f"{self.path}: {what} {clash[0]!r} would reach shell steps as "
                                f"{clash[1]}, storlab's own environment variable; rename it")
        for part in ("setup", "teardown"):
            for i, step in enumerate(getattr(self.spec, part)):
                for t in step.templates:
                    unknown = template_names(t) - known
                    if unknown:
                        raise CampaignError(
                            f"{self.path}: field {part}[{i}]: {{{sorted(unknown)[0]}}} is not a "
                            "factor, a var or one of " + ", ".join(BUILTINS))
                try:  # shell steps get values by the environment, `sh -c` scripts as words
                    if step.shell:
                        shell_command(str(step.run), dict.fromkeys(known, ""))
                    else:
                        render_argv(step.templates, dict.fromkeys(known, ""))
                except ShellTemplateError as exc:
                    raise CampaignError(f"{self.path}: field {part}[{i}]: {exc}") from None
        bad = [n for n in self.spec.runner.exclude if n not in self.space.names]
        if bad:
            raise CampaignError(f"{self.path}: field runner.exclude: {bad} are not factors")

    def preflight(self) -> Any:
        """Checks that need the runner: options accepted, targets allowed (a block device or
        an existing file outside the campaign's scratch area without `allow_destructive` is
        refused here, before any run or step), resolved in a run's scratch directory.
        Returns the runner (an adaptive campaign checks each new batch with it). Refused too
        when the run's programs cannot be sandboxed here (`require_sandbox`)."""
        try:
            runner = make_runner(self.spec.runner.type, self.runner_options())
        except CampaignError as exc:
            raise CampaignError(f"{self.path}: field runner: {exc}") from None
        if self.spec.runner.type in PROGRAM_RUNNERS or self.spec.setup or self.spec.teardown:
            try:
                require_sandbox()
            except CampaignError as exc:
                raise CampaignError(f"{self.path}: {exc}") from None
        sb = self.spec.sandbox
        why = refused_writable([str(self.dir / p) for p in sb.writable], str(self.dir),
                               sb.allow_destructive)
        if why:
            raise CampaignError(f"{self.path}: field sandbox.writable: {why}")
        names = getattr(runner, "check_fields", None)
        if names is not None:  # every {field} is known before the first run
            try:
                names({n for n in self.space.names if n not in self.spec.runner.exclude})
            except CampaignError as exc:
                raise CampaignError(f"{self.path}: field runner: {exc}") from None
        self._check_targets(runner, [(cid, cfg) for cid, cfg, _ in self.configs])
        if self.source is not None:
            check = getattr(self.source, "check", None)
            if check is not None:  # e.g. a response the runner cannot produce
                try:
                    check(runner)
                except StorlabError as exc:
                    raise CampaignError(f"{self.path}: design: {exc}") from None
        return runner

    def _check_targets(self, runner: Any, configs: list[tuple[int, dict[str, Any]]]) -> None:
        """Every configuration's targets, resolved in the run directory fio will use."""
        check = getattr(runner, "check_target", None)
        if check is not None:
            own = self.own_scratch()
            for cid, cfg in configs:
                run_dir = self.scratch / f"c{cid}-r1"
                try:
                    check(self._runner_config(cfg), base=self.scratch if own else run_dir,
                          workdir=run_dir)
                except CampaignError as exc:
                    hint = "" if own else (
                        f" ({self.scratch} leads outside the campaign's directory: only "
                        "each run's own directory counts as the campaign's there)")
                    raise CampaignError(f"{self.path}: {exc}{hint}") from None

    def runner_options(self) -> dict[str, Any]:
        """The runner's fixed options; the simulator's `cluster` file is resolved against
        the campaign's directory (workers may run elsewhere)."""
        opts = dict(self.spec.runner.options)
        c = opts.get("cluster")
        if self.spec.runner.type == "simulator" and isinstance(c, str) \
                and (self.dir / c).exists():
            opts["cluster"] = str((self.dir / c).resolve())
        j = opts.get("job_file")
        if self.spec.runner.type == "fio" and isinstance(j, str):
            # A .fio file beside the campaign, read here into plain options (the runner's own
            # override it): workers on other hosts need no copy, and what runs is what the
            # target guard checked.
            del opts["job_file"]
            opts = {**self._job_file_options(), **opts}
        return opts

    def _job_file_options(self) -> dict[str, str]:
        """The fio job file's options, read once: every run of this invocation (and the
        measurement the store records) uses the same ones, even if the file is edited."""
        if getattr(self, "_job_opts", None) is None:
            from .runners.fio import read_job_file

            self._job_opts = read_job_file(self.dir / self.spec.runner.options["job_file"])
        return dict(self._job_opts)

    def _runner_config(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in cfg.items() if k not in self.spec.runner.exclude}

    # ------------------------------------------------------------------ design metadata
    def design_meta_now(self) -> dict[str, Any]:
        """The design's metadata as this campaign file makes it: a generated design's
        (kind, resolution, generators, defining relation, aliases, word-length pattern,
        seed ...), `{kind: csv|configs}`, or an adaptive source's (kind, strategy, ...)."""
        if self.source is not None:
            return dict(to_jsonable(self.source.meta()))
        return dict(self._design_meta)

    def design_meta(self) -> dict[str, Any]:
        """The metadata of the design the store's runs came from, as the store keeps it
        (meta key `design`); for a store written before storlab kept it, or no store yet,
        the campaign file's (`design_meta_now`)."""
        meta = self._stored_design_meta(adaptive=self.source is not None)
        return meta if meta is not None else self.design_meta_now()

    def _stored_design_meta(self, adaptive: bool) -> dict[str, Any] | None:
        """The design metadata the store keeps (key `design`; an adaptive source's store
        written before it: key `source`), None without a store or either key."""
        if not self.store_path.exists():
            return None
        with Store(self.store_path, readonly=True) as store:
            text = store.get_meta("design")
            if text is None and adaptive:
                text = store.get_meta("source")
        return dict(json.loads(text)) if text is not None else None

    def stored_runs(self, warmup: bool = False, with_raw: bool = False
                    ) -> list[dict[str, Any]]:
        """The store's runs in campaign order (measured only unless `warmup`); none before
        the first run."""
        if not self.store_path.exists():
            return []
        with Store(self.store_path, readonly=True) as store:
            return [r for r in store.runs(with_raw) if warmup or not r["warmup"]]

    # ------------------------------------------------------------------ plan
    def plan(self, store: Store | None = None) -> list[PlannedRun]:
        """Every measured run, in campaign order (warm-ups are added by `pending`). An
        adaptive campaign's plan is what its source has asked for so far (in the store)."""
        if self.adaptive:
            if store is None:
                if not self.store_path.exists():
                    return []
                with Store(self.store_path, readonly=True) as st:
                    return self.plan(st)
            cfgs = {cid: cfg for cid, cfg, _ in store.configs()}
            return [PlannedRun(r["key"], r["seq"], r["config_id"], r["repetition"], False,
                               cfgs[r["config_id"]]) for r in store.plan_rows()]
        measured = [(cid, rep) for cid, _, _ in self.configs
                    for rep in range(1, self.spec.repetitions + 1)]
        if self.spec.randomize:
            rng = np.random.default_rng(self.spec.seed)
            measured = [measured[i] for i in rng.permutation(len(measured))]
        cfgs = {cid: cfg for cid, cfg, _ in self.configs}
        return [PlannedRun(f"c{cid}-r{rep}", seq, cid, rep, False, cfgs[cid])
                for seq, (cid, rep) in enumerate(measured, start=1)]

    def pending(self, statuses: Mapping[str, str], retry_failed: bool = False,
                plan: list[PlannedRun] | None = None) -> list[PlannedRun]:
        """Runs still to do: not finished (never started, or cut off by a kill), or failed
        when `retry_failed`; each configuration's warm-ups before its first one."""
        skip = DONE + (() if retry_failed else FAILED)
        todo = [r for r in (self.plan() if plan is None else plan)
                if statuses.get(r.key) not in skip]
        out: list[PlannedRun] = []
        warmed: set[int] = set()
        for r in todo:
            if r.config_id not in warmed and self.spec.warmup:
                warmed.add(r.config_id)
                # keyed by the measured run they precede: a configuration warmed again in
                # a later batch (a tuning's confirmation) kept the key `c<c>-w1` and
                # replaced the earlier warm-up's record (14 ran, 11 stored and counted). A
                # resume re-warms before the same run under the same key, for warm-ups
                # this version wrote; one an earlier version left under `c<c>-w<i>` is
                # not reused (tune counts only finished or failed warm-ups)
                out += [PlannedRun(f"{r.key}-w{w}", r.seq, r.config_id, 1 - w, True,
                                   r.config) for w in range(1, self.spec.warmup + 1)]
            out.append(r)
        return out

    def task(self, r: PlannedRun) -> RunTask:
        values = {**self.spec.vars, **r.config, "campaign_dir": str(self.dir), "key": r.key,
                  "config_id": r.config_id, "repetition": r.repetition}
        steps = lambda part: [StepSpec(s.run, s.shell, s.timeout, s.ignore_errors,  # noqa: E731
                                       s.system_writable) for s in getattr(self.spec, part)]
        return RunTask(key=r.key, config=dict(r.config), runner_type=self.spec.runner.type,
                       runner_options=self.runner_options(), values=values,
                       workdir=str(self.scratch / r.key), exclude=list(self.spec.runner.exclude),
                       setup=steps("setup"), teardown=steps("teardown"),
                       timeout=self.spec.timeout, keep_scratch=self.spec.keep_scratch,
                       own_scratch=self.own_scratch(),
                       writable=[str(self.dir / p) for p in self.spec.sandbox.writable],
                       allow_destructive=self.spec.sandbox.allow_destructive,
                       homes=[str(self.dir), str(self.scratch)],
                       output_dir=str(self.output_dir),
                       tag=run_identity(self.store_path, r.key))

    @property
    def output_dir(self) -> Path:
        """Where each run's whole stdout and stderr go (`<key>.stdout`, `<key>.stderr`): a
        directory beside the store; the store keeps their tails."""
        return self.store_path.with_name(self.store_path.name + ".output")

    def system_writable_steps(self) -> list[str]:
        """The steps declared to run outside the sandbox, as `setup[i]: command`."""
        return [f"{part}[{i}]: {s.run if isinstance(s.run, str) else ' '.join(s.run)}"
                for part in ("setup", "teardown")
                for i, s in enumerate(getattr(self.spec, part)) if s.system_writable]

    def sandbox_summary(self) -> list[str]:
        """How this campaign's programs run, for `storlab status` and the report: one line
        for the sandbox (what it opens besides each run's directory), then one per step
        declared `system_writable` (it runs outside). Empty for a runner that starts no
        program and has no steps."""
        if self.spec.runner.type not in PROGRAM_RUNNERS and not (self.spec.setup
                                                                   or self.spec.teardown):
            return []
        if unsandboxed():
            head = f"off ({UNSANDBOXED_ENV}=1): programs run with the whole system writable"
        else:
            sb = self.spec.sandbox
            extra = ", ".join(sb.writable) or "nothing else"
            dev = self.spec.runner.options.get("allow_destructive") or sb.allow_destructive
            head = (f"bwrap: read-only system; writable: each run's directory, the runner's "
                    f"targets, {extra}; declared devices "
                    + ("writable (allow_destructive)" if dev else "not openable"))
        return [head, *self.system_writable_steps()]

    def _measurement(self) -> dict[str, Any]:
        """What makes two runs of one configuration the same measurement."""
        sp = self.spec
        extra: dict[str, Any] = {}
        if sp.runner.type == "fio" and isinstance(sp.runner.options.get("job_file"), str):
            # the job file's content, not its name: an edited file is another measurement
            extra["job_file_options"] = self._job_file_options()
        return json.loads(json.dumps({
            **extra, "runner": sp.runner.type, "options": self.spec.runner.options,
            "exclude": sp.runner.exclude, "vars": sp.vars,
            "setup": [st.model_dump() for st in sp.setup],
            "teardown": [st.model_dump() for st in sp.teardown]}, default=str))

    def _keep_meta(self, store: Store, key: str, now: dict[str, Any], what: str,
                   free: tuple[str, ...] = ()) -> None:
        """Record settings the store's runs depend on; refuse to go on under others (all but
        the `free` ones), naming what changed."""
        old = store.get_meta(key)
        if old is not None:
            before = {k: v for k, v in json.loads(old).items() if k not in free}
            after = {k: v for k, v in now.items() if k not in free}
            diff = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            if diff:
                changes = [c for k in diff for c in _changes(k, before.get(k), after.get(k))]
                detail = "; ".join(changes[:5]) + (f"; {len(changes) - 5} more"
                                                   if len(changes) > 5 else "")
                raise CampaignError(f"{self.store_path}: {what} ({detail}); move the store "
                                    "away or give it a new name ('store:' in the campaign "
                                    "file)")
        store.set_meta(key, json.dumps(now))

    def _sync_measurement(self, store: Store) -> None:
        """Refuse to add runs measured differently to a store (a changed runtime, command or
        step would silently mix two measurements under one configuration)."""
        self._keep_meta(store, "measurement", self._measurement(),
                        "its runs were measured with other settings")

    def _sync_plan(self, store: Store) -> None:
        """Save the plan on the first run; refuse a store written for another plan or
        measured with other runner settings."""
        self._sync_measurement(store)
        if self.source is None:
            self._sync_configs(store)
        else:
            self._sync_source(store)
        # What readers (the report) know the design by; they never make it again.
        store.set_meta("design", json.dumps(self.design_meta_now()))

    def _sync_configs(self, store: Store) -> None:
        stored = store.configs()
        current = [(cid, json.loads(json.dumps(cfg)), info) for cid, cfg, info in self.configs]
        if not stored:
            store.save_configs(current)
            store.set_meta("campaign", str(self.path))
            return
        old = {cid: cfg for cid, cfg, _ in stored}
        for cid, cfg, _ in current:
            if cid in old and old[cid] != cfg:
                raise CampaignError(
                    f"{self.store_path}: holds another plan (configuration {cid} was {old[cid]},"
                    f" is now {cfg}); move the store away or set 'store:' to a new file")
        new = [c for c in current if c[0] not in old]
        if new:
            store.save_configs(new)

    def _sync_source(self, store: Store) -> None:
        """An adaptive store remembers its source's settings; any change but the budget
        (which may grow to continue a search) would make the history mean something else."""
        meta = json.loads(json.dumps(self.source.meta()))  # type: ignore[union-attr]
        if store.get_meta("source") is None:
            if store.configs():
                raise CampaignError(f"{self.store_path}: holds a fixed design's runs; set "
                                    "'store:' to a new file for an adaptive design")
            store.set_meta("campaign", str(self.path))
        self._keep_meta(store, "source", meta,
                        f"was written by another {meta.get('kind')} design", free=("budget",))

    def history(self, store: Store) -> list[Observation]:
        """Every finished measured run, in campaign order, as the design source sees it."""
        plan = {r["key"]: r for r in store.plan_rows()}
        out = []
        for r in store.runs():
            if r["warmup"] or r["status"] not in DONE + FAILED:
                continue
            p = plan.get(r["key"], {})
            out.append(Observation(r["key"], r["seq"], r["config_id"], r["repetition"],
                                   r["config"], r["status"], r["metrics"],
                                   p.get("phase", ""), p.get("note", {})))
        return out

    def _extend_plan(self, store: Store, batch: list[Proposal], runner: Any) -> None:
        """Check and save a source's batch: new configurations get the next ids, known ones
        new repetitions; the batch's runs are shuffled (seeded by the batch number)."""
        configs = store.configs()
        ids = {config_key(cfg): cid for cid, cfg, _ in configs}
        next_id = max(ids.values(), default=0) + 1
        plan = store.plan_rows()
        reps: dict[int, int] = {}
        for r in plan:
            reps[r["config_id"]] = max(reps.get(r["config_id"], 0), r["repetition"])
        n_batch = max((r["batch"] for r in plan), default=-1) + 1
        new_configs: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
        rows: list[tuple[int, int, str, dict[str, Any]]] = []
        for p in batch:
            cfg = {n: _plain(p.config[n]) for n in self.space.names}
            try:
                self.space.validate(cfg)
            except StorlabError as exc:  # a source bug, never a user's run
                raise CampaignError(f"{self.path}: design proposed {cfg}: {exc}") from None
            cfg = json.loads(json.dumps(cfg))
            k = config_key(cfg)
            if k not in ids:
                ids[k] = next_id
                new_configs.append((next_id, cfg, {"phase": p.phase}))
                next_id += 1
            cid = ids[k]
            for _ in range(p.repetitions):
                reps[cid] = reps.get(cid, 0) + 1
                rows.append((cid, reps[cid], p.phase, p.note))
        self._check_targets(runner, [(cid, cfg) for cid, cfg, _ in new_configs])
        if self.spec.randomize:
            rng = np.random.default_rng([self.spec.seed, n_batch])
            rows = [rows[i] for i in rng.permutation(len(rows))]
        seq0 = max((r["seq"] for r in plan), default=0)
        store.extend_plan(new_configs, [(f"c{cid}-r{rep}", seq0 + i, cid, rep, n_batch, ph, note)
                                        for i, (cid, rep, ph, note) in enumerate(rows, 1)])

    # ------------------------------------------------------------------ run
    def run(self, executor: str | None = None, retry_failed: bool = False,
            on_event: Event | None = None, stop: threading.Event | None = None,
            wait: bool = False) -> RunSummary:
        """Run what is left of the campaign. Each finished run is committed at once. An
        adaptive campaign asks its source for more whenever every planned run is done.

        The first Ctrl-C (SIGINT) stops handing out runs and returns after the runs in
        flight; a second one aborts them (they stay `running` and are repeated next time).
        """
        emit = on_event or (lambda kind, data: None)
        runner = self.preflight()
        self._check_width(executor)
        stop = stop or threading.Event()
        with Store(self.store_path) as store, store.writer_lock(wait, self.scratch, emit):
            self._sync_plan(store)
            plan = self.plan(store)
            todo = self.pending(store.statuses(), retry_failed, plan)
            done = len(plan) - sum(not r.warmup for r in todo)
            planned = len(plan) if self.source is None else \
                max(len(plan), int(self.source.meta().get("budget", 0)))
            summary = RunSummary(planned=planned, already_done=done)
            emit("start", {"planned": planned, "done": done, "todo": len(todo),
                           "store": str(self.store_path)})
            old = _install_sigint(stop, emit)
            try:
                if self.source is None:
                    if todo:
                        self._run_batch(store, todo, executor, summary, emit, stop)
                else:
                    self._run_adaptive(store, todo, executor, summary, emit, stop, runner)
            finally:
                _restore_sigint(old)
            summary.interrupted = stop.is_set()
            emit("end", {"summary": summary})
            return summary

    def _run_batch(self, store: Store, todo: list[PlannedRun], executor: str | None,
                   summary: RunSummary, emit: Event, stop: threading.Event) -> None:
        ex = make_executor(executor)
        by_key = {r.key: r for r in todo}

        def on_submit(t: RunTask) -> None:
            r = by_key[t.key]
            store.mark_running(r.key, r.seq, r.config_id, r.repetition, r.warmup, r.config)
            emit("submit", {"key": r.key, "config": r.config})

        for out in ex.run((self.task(r) for r in todo), on_submit, stop.is_set):
            self._finish(store, by_key[out.key], out, summary, emit)

    def _check_width(self, executor: str | None) -> None:
        """Refuse, before anything runs, `parallel:N` with more workers than an adaptive
        design's budget, or with a source that proposes one run at a time (N - 1 slots
        would stay idle)."""
        width = requested_width(executor)
        if self.source is None or width is None or width <= 1:
            return
        budget = int(self.source.meta().get("budget") or 0)
        if budget and width > budget:
            raise CampaignError(f"--executor {executor}: {width} workers for a budget of "
                                f"{budget} runs; use at most parallel:{budget}")
        if not getattr(self.source, "batches", False):
            raise CampaignError(f"--executor {executor}: the {self.source.meta().get('kind')} "
                                "design proposes one run at a time; use --executor "
                                "sequential")

    def _run_adaptive(self, store: Store, todo: list[PlannedRun], executor: str | None,
                      summary: RunSummary, emit: Event, stop: threading.Event,
                      runner: Any) -> None:
        """Run what is planned, then ask the source for more, until it has nothing more.
        With one run at a time it is asked when every run has finished; a source that
        `batches` is asked again whenever a slot frees (its pending runs are those asked
        for and not finished), so a parallel executor keeps N runs in flight. Each batch
        is saved in the store's plan before its first run starts: a killed campaign
        resumes the runs that were in flight under their own keys."""
        source = self.source
        assert source is not None
        ex = make_executor(executor)
        batches = bool(getattr(source, "batches", False)) and ex.width > 1
        if batches:  # its asks with nothing in flight fill the slots
            source.width = ex.width  # type: ignore[attr-defined]
        queue = list(todo)
        by_key = {r.key: r for r in todo}
        started: set[str] = set()   # handed to the executor by this invocation
        finished: set[str] = set()

        def on_submit(t: RunTask) -> None:
            r = by_key[t.key]
            started.add(r.key)
            store.mark_running(r.key, r.seq, r.config_id, r.repetition, r.warmup, r.config)
            emit("submit", {"key": r.key, "config": r.config})

        def feed() -> Iterator[RunTask | None]:
            planned_at = -1  # the plan's size when the source said "once they finish"
            while True:
                if queue:
                    yield self.task(queue.pop(0))
                    continue
                busy = bool(started - finished)
                if busy and (not batches or planned_at == len(by_key)):
                    yield None  # asked when every run has finished, or the plan grew
                    continue
                if busy:
                    batch = self._ask_pending(store, ex.width)
                    if batch is None:  # an older run is still in flight
                        yield None
                        continue
                    if not batch:  # not with these runs pending: ask once all finished
                        planned_at = len(by_key)
                else:
                    batch = source.ask(self.history(store))
                if not batch:
                    if busy:
                        yield None  # more once a run in flight has finished
                        continue
                    return
                self._extend_plan(store, batch, runner)
                fresh = [r for r in self.plan(store) if r.key not in by_key]
                new = self.pending(store.statuses(), False, fresh)
                by_key.update((r.key, r) for r in new)
                queue.extend(new)

        for out in ex.run(feed(), on_submit, stop.is_set):
            finished.add(out.key)
            self._finish(store, by_key[out.key], out, summary, emit)

    def _ask_pending(self, store: Store, width: int) -> list[Proposal] | None:
        """Ask a batching source for a run while others are in flight, or None to wait.

        What it is told depends on the plan's order, never on which runs happened to finish
        first: every planned run but the newest `width - 1` must have finished (else wait
        for them), those are its history, and the newest `width - 1` are pending whether
        finished or not. So the same seed and width give the same proposals, resumed after
        a kill or not, at the price of a slot left idle while an older run finishes after a
        newer one."""
        plan = self.plan(store)
        rows = store.plan_rows()
        done = store.statuses()
        cut = max(0, len(plan) - (width - 1))
        if any(done.get(r.key) not in DONE + FAILED for r in plan[:cut]):
            return None
        older = {r.key for r in plan[:cut]}
        history = [o for o in self.history(store) if o.key in older]
        pending = [Proposal(dict(r.config), 1, p["phase"], p["note"])
                   for r, p in zip(plan[cut:], rows[cut:])]
        return self.source.ask(history, pending)  # type: ignore[union-attr,call-arg]

    def _finish(self, store: Store, r: PlannedRun, out: TaskOutcome, summary: RunSummary,
                emit: Event) -> None:
        store.record(out.key, out.result, out.host)
        if not r.warmup and out.result.ok and self.spec.runner.type == "fio":
            # fio's own document as a plain file beside the store, for fio-plot and scripts
            self._write_fio_json(self.fio_json_dir, r.config_id, r.repetition, out.result.raw)
        if not r.warmup:
            summary.ran += 1
            if out.result.ok:
                summary.ok += 1
            else:
                summary.failed += 1
                summary.failures.append(out.key)
        emit("run", {"key": out.key, "warmup": r.warmup, "result": out.result,
                     "config": r.config, "host": out.host})

    # ------------------------------------------------------------------ results
    def results(self, level: str = "config") -> pd.DataFrame:
        """The tidy table: `config` (one row per configuration, metrics averaged over its
        successful repetitions), `run` (one row per measured run) or `host` (per-host rows
        of multi-client runs)."""
        if level not in ("config", "run", "host"):
            raise CampaignError(f"level {level!r} must be config, run or host")
        if not self.store_path.exists():
            raise CampaignError(f"{self.store_path}: no store yet; run the campaign first")
        with Store(self.store_path, readonly=True) as store:
            configs = store.configs()
            runs = [r for r in store.runs() if not r["warmup"]]
        return results_table(configs, runs, self.space.names, level)

    @property
    def fio_json_dir(self) -> Path:
        """Where a fio campaign writes each measured run's fio JSON as it finishes:
        `<store's directory>/<store's name without .db>-fio/c<config>-r<repetition>.json`
        (campaign.db -> campaign-fio/, tune.db -> tune-fio/)."""
        return self.store_path.parent / f"{self.store_path.stem}-fio"

    @staticmethod
    def _write_fio_json(directory: Path, config_id: int, repetition: int,
                        raw: str | None) -> Path | None:
        """One run's fio document (warnings around it stripped) as
        `directory/c<config>-r<repetition>.json`; None when the output holds none."""
        from ..fileio import write_in_dir
        from .runners.fio import parse_json_output

        try:
            doc = parse_json_output(raw or "")
        except ValueError:
            return None
        # never through a link a run's program could have planted beside the store
        return write_in_dir(directory, f"c{config_id}-r{repetition}.json",
                            json.dumps(doc, indent=2) + "\n", what="fio JSON directory")

    def export_fio_json(self, directory: Path) -> list[Path]:
        """Write each successful measured fio run's JSON document to `directory` as
        `c<config>-r<repetition>.json` (fio's own output, warnings stripped), the form
        fio-plot and other fio tools read. Returns the files written."""
        if self.spec.runner.type != "fio":
            raise CampaignError(f"{self.path}: --fio-json needs a fio campaign (runner "
                                f"{self.spec.runner.type!r})")
        if not self.store_path.exists():
            raise CampaignError(f"{self.store_path}: no store yet; run the campaign first")
        with Store(self.store_path, readonly=True) as store:
            runs = [r for r in store.runs(with_raw=True) if not r["warmup"]
                    and r["status"] == "ok"]
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        out = []
        for r in runs:
            path = self._write_fio_json(directory, r["config_id"], r["repetition"], r["raw"])
            if path is not None:
                out.append(path)
        return out

    def status(self) -> pd.DataFrame:
        """Counts of runs per status (pending = planned but never started)."""
        statuses: dict[str, str] = {}
        if self.store_path.exists():
            with Store(self.store_path, readonly=True) as store:
                statuses = store.statuses()
        counts: dict[str, int] = {}
        for r in self.plan():
            s = statuses.get(r.key, "pending")
            counts[s] = counts.get(s, 0) + 1
        return pd.DataFrame({"status": list(counts), "runs": list(counts.values())})


#: Runners that start programs (each in its sandbox); the simulator and the object-store
#: load generator run in storlab's own process.
PROGRAM_RUNNERS = ("fio", "command", "postmark", "sysbench", "ceph")


def tune_store(campaign_file: str | Path) -> str:
    """The store `storlab tune` uses for a fixed design's file: never its `campaign.db`."""
    return f"{Path(campaign_file).stem}-tune.db"


def _check_store_campaign(store: Path, campaign_file: Path) -> None:
    """Refuse a store another campaign file wrote (its meta `campaign`): read as this
    file's, it showed that campaign's runs under this one's name. A store that does not
    name its campaign (written before storlab recorded it) is taken as it is."""
    if not store.exists():
        return
    with Store(store, readonly=True) as st:
        owner = st.get_meta("campaign")
    if owner is not None and Path(owner).resolve() != campaign_file.resolve():
        raise CampaignError(f"{store}: holds the runs of another campaign file ({owner}), "
                            f"not {campaign_file}")


def _check_own_store(store: Path, campaign_file: Path) -> None:
    """Refuse a file's own `store:` when another campaign file of its directory wrote it (two
    files left at the default `campaign.db`: the second "ran 0" and showed the first's runs
    as its own). A store whose recorded file has this file's name is taken (a campaign
    directory moved or copied keeps its old path in the store)."""
    if not store.is_file():
        return
    with Store(store, readonly=True) as st:
        owner = st.get_meta("campaign")
    if owner is not None and Path(owner).name != campaign_file.name:
        raise CampaignError(f"{campaign_file}: its store {store.name} holds the runs of "
                            f"another campaign file ({Path(owner).name}); give this file its "
                            "own 'store:' (two campaign files share a store only by mistake)")


def _as_stored_tuning(spec: CampaignSpec, store: Path) -> CampaignSpec:
    """`spec` read as the tuning its store holds, when the store holds one and the file
    has a fixed design (`storlab tune --budget N` of a fixed design), else unchanged."""
    if spec.design.kind in adaptive_kinds() or not store.exists():
        return spec
    with Store(store, readonly=True) as st:
        text = st.get_meta("source")
    meta = dict(json.loads(text)) if text else {}
    if meta.get("kind") not in adaptive_kinds():
        return spec
    design = spec.design.with_source(
        kind=meta["kind"], budget=meta.get("budget"), strategy=meta.get("strategy"),
        objectives=[{"name": n, "goal": g} for n, g in meta.get("objectives") or []] or None)
    return spec.model_copy(update={"design": design, "repetitions": 1})


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


def campaign_space(spec: CampaignSpec, path: str | Path) -> Space:
    """The campaign's space (a file next to the campaign file, or inline)."""
    path = Path(path).resolve()
    sp = spec.space
    try:
        if isinstance(sp, str):
            return Space.from_yaml(path.parent / sp)
        return Space.from_dict(sp, source=f"{path}: space")
    except StorlabError as exc:
        raise CampaignError(str(exc)) from None


def results_table(configs: list[tuple[int, dict[str, Any], dict[str, Any]]],
                  runs: list[dict[str, Any]], names: list[str], level: str) -> pd.DataFrame:
    """Build the results table from stored configurations and runs."""
    info = {cid: (cfg, d) for cid, cfg, d in configs}
    if level == "config":
        rows = []
        for cid, (cfg, d) in info.items():
            mine = [r for r in runs if r["config_id"] == cid]
            good = [r for r in mine if r["status"] == "ok"]
            row: dict[str, Any] = {"config_id": cid, **cfg, **d}
            metrics = pd.DataFrame([r["metrics"] for r in good])
            row.update(metrics.mean(numeric_only=True).to_dict() if len(metrics) else {})
            row["_n_ok"] = len(good)
            row["_n_failed"] = sum(r["status"] in FAILED for r in mine)
            rows.append(row)
        df = pd.DataFrame(rows)
    elif level == "run":
        df = pd.DataFrame([{"config_id": r["config_id"], "repetition": r["repetition"],
                            **info.get(r["config_id"], (r["config"], {}))[0],
                            **info.get(r["config_id"], ({}, {}))[1],
                            "status": r["status"], "exit_code": r["exit_code"],
                            "started": r["started"], "ended": r["ended"], "host": r["host"],
                            **r["metrics"]} for r in runs])
        if len(df):
            df = df.sort_values(["config_id", "repetition"], kind="stable")
    else:
        df = pd.DataFrame([{"config_id": r["config_id"], "repetition": r["repetition"],
                            **r["config"], **h} for r in runs if r["status"] == "ok"
                           for h in r["rows"]])
    if df.empty:
        return pd.DataFrame(columns=["config_id", *names])
    return df.reset_index(drop=True)


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and np.isnan(v):
        return None
    return v


def _install_sigint(stop: threading.Event, emit: Event) -> Any:
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        emit("stopping", {})

    return signal.signal(signal.SIGINT, handler)


def _restore_sigint(old: Any) -> None:
    if old is not None:
        signal.signal(signal.SIGINT, old)


def _changes(path: str, a: Any, b: Any) -> list[str]:
    """`path: old -> new` for each leaf that differs between two JSON values: a changed
    argument of a long command is named, not cut off in the middle of the whole list."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [c for k in sorted(set(a) | set(b), key=str) if a.get(k) != b.get(k)
                for c in _changes(f"{path}.{k}", a.get(k), b.get(k))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [c for i, (x, y) in enumerate(zip(a, b)) if x != y
                for c in _changes(f"{path}[{i}]", x, y)]

    def short(v: Any) -> str:
        r = repr(v)
        return r if len(r) <= 120 else r[:117] + "..."
    return [f"{path}: {short(a)} -> {short(b)}"]

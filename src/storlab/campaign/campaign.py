"""A campaign: a design's configurations x repetitions, run by a runner through an
executor into the store; resumable, and exportable as the tidy results table.

Plan: configuration `c` (1-based, the design's standard order) and repetition `r` make the
run `c<c>-r<r>`; the warm-up runs before it are `c<c>-r<r>-w<i>`. The measured runs are
shuffled with the campaign's seed (`randomize: true`), and a configuration's warm-ups go
right before its first pending measured run (of each batch, in an adaptive campaign). The
plan is saved in the store the first time, so a resume or an export sees exactly the
configurations that were run.

`Campaign` is the face; each job is its own module: where configurations come from
(`sources.py`, the seam; `fixed.py`, a fixed design as a source), the plan and what is left
of it (`plan.py`), what the store records and the guards that read it (`storemeta.py`), and
the one run loop (`loop.py`). Every design is a source: a fixed design proposes its whole
table once, an adaptive one (`design: {kind: <a registered kind>, ...}`) is asked for the
next batch whenever every planned run has finished (with a parallel executor and a source
that batches: whenever a slot frees, told the runs still in flight), and its batches are
saved in the store as they come (`plan` table), so a killed adaptive campaign resumes the
batch it was in and then asks again with the same history it would have had.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from ..errors import StorlabError
from ..fileio import MAX_YAML_BYTES, within, write_in_dir
from ..jsonutil import to_jsonable
from ..space import Space
from .executors import requested_width
from .fixed import Config, fixed_source
from .inputs import check_campaign_input, read_campaign_input
from .loop import Event, RunSummary, install_sigint, restore_sigint, run_loop
from .plan import (PlannedRun, batch_rows, history, pending, stored_plan, table_layout,
                   table_plan)
from .runners import (UNSANDBOXED_ENV, ShellTemplateError, landlock_missing,
                      landlock_net_missing,
                      ld_conf_opt_dirs, make_runner,
                      refused_shared, refused_socket,
                      refused_writable, render_argv, require_sandbox, reserved_env_clash,
                      run_identity, runner_class, shell_command, shown_install_trees,
                      starts_programs, template_names, unsandboxed)
from .sources import DesignSource, Observation, Proposal, adaptive_kinds, make_source
from .spec import CampaignError, CampaignSpec, check_plan, load_spec
from .store import FAILED, Store, refuse_linked_dirs, refuse_links
from .storemeta import (as_stored_source, check_own_store, check_store_campaign,
                        source_store, stored_design_meta, sync_plan)
from .task import RunTask, StepSpec, TaskOutcome, scratch_view

_T = TypeVar("_T")

#: Names the step templates may use besides the factors and `vars`.
BUILTINS = ("workdir", "campaign_dir", "key", "config_id", "repetition")

__all__ = ["BUILTINS", "Campaign", "PlannedRun", "RunSummary", "campaign_space",
           "results_table"]


class Campaign:
    """A loaded, checked campaign file."""

    def __init__(self, spec: CampaignSpec, path: str | Path) -> None:
        self.spec = spec
        self.path = Path(path).resolve()
        self.dir = self.path.parent
        self.name = spec.name or self.path.stem
        self.space = campaign_space(spec, self.path)
        self.source: DesignSource = self._make_source()
        #: A source that proposes its table once: the table, laid out before anything
        #: runs (the plan follows from it); an adaptive source's plan is in the store.
        self.configs: list[Config] = []
        self._repetitions = spec.repetitions
        if not self.source.adaptive:
            self.configs, self._repetitions = table_layout(self.source.ask([]))
            check_plan(spec, len(self.configs), str(self.path))
        self._options: tuple[dict[str, Any], dict[str, Any]] | None = None
        self._scratch_id: tuple[str, int, int] | None = None  # set by `run`
        self._check_steps()

    @property
    def adaptive(self) -> bool:
        """Whether the configurations come from an adaptive source (asked as runs finish)."""
        return bool(self.source.adaptive)

    @classmethod
    def load(cls, path: str | Path, store: str | None = None) -> Campaign:
        """The campaign of a file; with `store`, read from that store file (next to the
        file) instead of the file's `store:`, as the adaptive design it holds when, say,
        `storlab tune` wrote it from a fixed design (`storemeta.source_store`)."""
        spec = load_spec(path)
        here = Path(path).resolve().parent
        if store is None:
            check_own_store(here / spec.store, Path(path))
        if store is not None:
            own = {(here / n).resolve()
                   for n in (spec.store, *(source_store(path, k) for k in adaptive_kinds()))}
            if (here / store).resolve() not in own:
                # the file's own stores are read as without --store (a campaign directory
                # moved or copied keeps its old path in their meta)
                check_store_campaign(here / store, Path(path))
            spec = spec.model_copy(update={"store": store})
            spec = as_stored_source(spec, here / store)
        return cls(spec, path)

    def source_store_note(self) -> str | None:
        """One line when this fixed design's store has no runs but an adaptive command
        (`storlab tune`) wrote a store beside it (its runs went there, and read 'no store
        yet' here)."""
        if self.adaptive or self.has_stored_runs():
            return None
        for kind in adaptive_kinds():
            other = self.dir / source_store(self.path, kind)
            if other != self.store_path and other.exists():
                return (f"`storlab {kind}` wrote this file's runs to {other.name}, not "
                        f"{self.spec.store}: add --store {other.name}")
        return None

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

    def _make_source(self) -> DesignSource:
        """The design's source: a registered adaptive kind's, else the fixed table."""
        d = self.spec.design
        if d.kind not in adaptive_kinds():
            return fixed_source(self.spec, self.path, self.space,
                                lambda: self._stored_design_meta(adaptive=False))
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
        when the run's programs cannot be sandboxed here (`require_sandbox`), and when the
        store lies in the scratch area, where the runs' programs write (one could put a link
        at the store's name that storlab, as root, would then write through)."""
        if self.store_path.resolve().is_relative_to(self.scratch.resolve()):
            raise CampaignError(f"{self.path}: field store: {self.spec.store} lies inside the "
                                f"scratch area ({self.spec.workdir}), where the runs' programs "
                                "write; name a store outside it")
        for fld in ("store", "workdir"):
            try:
                refuse_linked_dirs(self.dir, getattr(self.spec, fld), fld)
            except CampaignError as exc:
                raise CampaignError(f"{self.path}: {exc}") from None
        refuse_links(self.store_path)
        try:
            runner = make_runner(self.spec.runner.type, self.runner_options())
        except CampaignError as exc:
            raise CampaignError(f"{self.path}: field runner: {exc}") from None
        if starts_programs(self.spec.runner.type) or self.spec.setup or self.spec.teardown:
            try:
                require_sandbox()
            except CampaignError as exc:
                raise CampaignError(f"{self.path}: {exc}") from None
        sb = self.spec.sandbox
        why = refused_writable([str(self.dir / p) for p in sb.writable], str(self.dir),
                               sb.allow_destructive)
        if why:
            raise CampaignError(f"{self.path}: field sandbox.writable: {why}")
        why = refused_socket([str(self.dir / p) for p in sb.sockets])
        if why:
            raise CampaignError(f"{self.path}: field sandbox.sockets: {why}")
        names = getattr(runner, "check_fields", None)
        if names is not None:  # every {field} is known before the first run
            try:
                names({n for n in self.space.names if n not in self.spec.runner.exclude})
            except CampaignError as exc:
                raise CampaignError(f"{self.path}: field runner: {exc}") from None
        self._check_targets(runner, [(cid, cfg) for cid, cfg, _ in self.configs])
        check = getattr(self.source, "check", None)
        if check is not None:  # e.g. a response the runner cannot produce
            try:
                check(runner)
            except StorlabError as exc:
                raise CampaignError(f"{self.path}: design: {exc}") from None
        return runner

    def _check_targets(self, runner: Any, configs: list[tuple[int, dict[str, Any]]]) -> None:
        """Every configuration's targets, resolved in the run directory the runner will use."""
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
        # a shared system directory declared writable whole (fio `directory: /var/tmp`)
        sb = self.spec.sandbox
        # a program the runner's program starts must not inherit an undeclared grant
        grant = getattr(runner, "refused_grant", None)
        if grant is not None:
            for cid, cfg in configs:
                why = grant(runner.job_options(self._runner_config(cfg),
                                               self.scratch / f"c{cid}-r1", check=False),
                            bool(sb.sockets) or sb.unix_sockets, sb.io_uring, sb.network)
                if why:
                    raise CampaignError(f"{self.path}: field runner: {why}")
        # the runner's implicit network is held to its TCP ports by Landlock, or not given
        need = getattr(runner, "network_reason", lambda: None)()
        if need and not sb.network and not unsandboxed() and (no := landlock_net_missing()):
            raise CampaignError(f"{self.path}: field runner: {need} gets the host's network, "
                                f"held to its TCP ports by Landlock, but {no}; declare "
                                "sandbox.network: true to give the programs the whole network")
        walls = getattr(runner, "sandbox", None)
        allow = sb.allow_destructive or bool(self.spec.runner.options.get("allow_destructive"))
        why = refused_shared([str(self.dir / p) for p in sb.writable], allow)
        if why:
            raise CampaignError(f"{self.path}: field sandbox.writable: {why}")
        self._refuse_over_own(sb.writable, "sandbox.writable", allow)
        if walls is not None:
            for cid, cfg in configs:
                targets = walls(self._runner_config(cfg), self.scratch / f"c{cid}-r1")[0]
                why = refused_shared(targets, allow)
                if why:
                    raise CampaignError(f"{self.path}: field runner: {why}")
        # a file a program makes directly in the campaign's directory: the sandbox keeps
        # that directory read-only unless the campaign declares it (or allow_destructive)
        home = getattr(runner, "check_home", None)
        here = os.path.realpath(self.dir)
        if home is not None and not sb.allow_destructive and not any(
                within(here, os.path.realpath(self.dir / p)) for p in sb.writable):
            for cid, cfg in configs:
                try:
                    home(self._runner_config(cfg), self.dir, self.scratch / f"c{cid}-r1")
                except CampaignError as exc:
                    raise CampaignError(f"{self.path}: {exc}") from None
        # a file not made yet in another existing directory, an existing directory the
        # job names beside a program fio starts: refused unless declared
        new_file = getattr(runner, "refused_new_file", None)
        program_dir = getattr(runner, "refused_program_dir", None)
        if new_file is not None and program_dir is not None and not sb.allow_destructive:
            declared = [os.path.realpath(self.dir / p) for p in sb.writable]
            for cid, cfg in configs:
                run_dir = self.scratch / f"c{cid}-r1"
                why = new_file(self._runner_config(cfg), run_dir, declared) \
                    or program_dir(runner.job_options(self._runner_config(cfg), run_dir,
                                                      check=False), run_dir, declared)
                if why:
                    raise CampaignError(f"{self.path}: field runner: {why}")
        if walls is not None:  # (after: a file made in the campaign's directory has a hint)
            for cid, cfg in configs:
                self._refuse_over_own(walls(self._runner_config(cfg),
                                            self.scratch / f"c{cid}-r1")[0], "runner", allow)


    def _refuse_over_own(self, targets: list[str], field: str, allow: bool) -> None:
        """A directory a run's programs may write (a declared directory, or the directory
        of a file not made yet) that holds the store or the directory above the scratch
        area: a program could swap storlab's own files or directories there for links.
        A file not made yet counts only where the sandbox opens its directory (with
        `allow`: `_open_target`)."""
        own = [os.path.realpath(self.store_path.parent),
               os.path.realpath(self.scratch.parent)]
        for t in targets:
            # as in the run (its directory not made yet: `..` taken from the name)
            r = os.path.realpath(self.dir / t)  # an absolute target stays itself
            if os.path.isdir(r) or os.path.basename(os.fspath(t)) in (".", ".."):
                ds = [r]
            elif not os.path.lexists(r):
                # a directory made by the time the run starts (by storlab for its store,
                # by a step) opens as itself; a file not made yet opens its directory
                # only with `allow` (`_open_target`)
                parent = os.path.dirname(r)
                ds = [r] + ([parent] if allow else [])
            else:
                continue
            for d in ds:
                if any(within(o, d) for o in own):
                    raise CampaignError(
                        f"{self.path}: field {field}: {t} opens {d} to the runs' programs, "
                        "which holds the campaign's store or scratch area (a program could "
                        "swap them for links); declare a directory of its own, beside them")

    def runner_options(self) -> dict[str, Any]:
        """The runner's fixed options as its runs use them (the runner's `prepare_options`:
        a file beside the campaign resolved or read here, once per invocation, so every run
        and the measurement the store records use the same ones even if it is edited)."""
        return dict(self._prepared_options()[0])

    def _prepared_options(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self._options is None:
            opts = dict(self.spec.runner.options)
            try:
                prepare = getattr(runner_class(self.spec.runner.type), "prepare_options", None)
            except CampaignError:  # an unknown runner is refused by `preflight`, by field
                prepare = None
            self._options = prepare(opts, self.dir) if prepare is not None else (opts, {})
            try:  # the options naming a file storlab reads (the runner's `input_options`)
                inputs = getattr(runner_class(self.spec.runner.type), "input_options", ())
            except CampaignError:
                inputs = ()
            for k in inputs:  # as the campaign file names it (prepared: resolved)
                if isinstance(f := self.spec.runner.options.get(k), str):
                    check_campaign_input(self.dir / f, self.path, f"options.{k}: ")
        return self._options

    def _runner_config(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in cfg.items() if k not in self.spec.runner.exclude}

    # ------------------------------------------------------------------ design metadata
    def design_meta_now(self) -> dict[str, Any]:
        """The design's metadata as this campaign file makes it: a generated design's
        (kind, resolution, generators, defining relation, aliases, word-length pattern,
        seed ...), `{kind: csv|configs}`, or an adaptive source's (kind, strategy, ...)."""
        return dict(to_jsonable(self.source.meta()))

    def design_meta(self) -> dict[str, Any]:
        """The metadata of the design the store's runs came from, as the store keeps it
        (meta key `design`); for a store written before storlab kept it, or no store yet,
        the campaign file's (`design_meta_now`)."""
        meta = self._stored_design_meta(adaptive=self.adaptive)
        return meta if meta is not None else self.design_meta_now()

    def _stored_design_meta(self, adaptive: bool) -> dict[str, Any] | None:
        return stored_design_meta(self.store_path, adaptive)

    def stored_runs(self, warmup: bool = False, with_raw: bool = False
                    ) -> list[dict[str, Any]]:
        """The store's runs in campaign order (measured only unless `warmup`); none before
        the first run."""
        if not self.store_path.exists():
            return []
        with Store(self.store_path, readonly=True) as store:
            return [r for r in store.runs(with_raw) if warmup or not r["warmup"]]

    def has_stored_runs(self) -> bool:
        """Whether the store holds a measured run (`stored_runs` not empty), without reading
        them (`storlab results` on a large store read every run twice)."""
        if not self.store_path.exists():
            return False
        with Store(self.store_path, readonly=True) as store:
            return store.has_runs()

    # ------------------------------------------------------------------ plan
    def plan(self, store: Store | None = None) -> list[PlannedRun]:
        """Every measured run, in campaign order (warm-ups are added by `pending`). An
        adaptive campaign's plan is what its source has asked for so far (in the store)."""
        if not self.adaptive:
            return table_plan(self.configs, self._repetitions, self.spec.randomize,
                              self.spec.seed)
        return self._read(stored_plan, store)

    def pending(self, statuses: Mapping[str, str], retry_failed: bool = False,
                plan: list[PlannedRun] | None = None) -> list[PlannedRun]:
        """Runs still to do: not finished (never started, or cut off by a kill), or failed
        when `retry_failed`; each configuration's warm-ups before its first one."""
        return pending(self.plan() if plan is None else plan, statuses, self.spec.warmup,
                       retry_failed)

    def history(self, store: Store | None = None) -> list[Observation]:
        """Every finished measured run, in campaign order, as the design source sees it
        (without `store`: read from the campaign's store, none before the first run)."""
        return self._read(history, store)

    def _read(self, read: Callable[[Store], list[_T]], store: Store | None) -> list[_T]:
        """`read(store)`, the campaign's own store opened read-only when none is given
        (nothing before the first run)."""
        if store is not None:
            return read(store)
        if not self.store_path.exists():
            return []
        with Store(self.store_path, readonly=True) as st:
            return read(st)

    def extend_plan(self, store: Store, batch: list[Proposal], runner: Any) -> None:
        """Check and save a source's batch: new configurations get the next ids, known ones
        new repetitions; the batch's runs are shuffled (seeded by the batch number)."""
        configs, rows = batch_rows(store, batch, self.space, str(self.path),
                                   self.spec.randomize, self.spec.seed)
        self._check_targets(runner, [(cid, cfg) for cid, cfg, _ in configs])
        store.extend_plan(configs, rows)

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
                       own_scratch=self.own_scratch(), scratch_id=self._scratch_id,
                       writable=[str(self.dir / p) for p in self.spec.sandbox.writable],
                       allow_destructive=self.spec.sandbox.allow_destructive,
                       network=self.spec.sandbox.network,
                       readable=[str(self.dir / p) for p in self.spec.sandbox.readable],
                       sockets=[str(self.dir / p) for p in self.spec.sandbox.sockets],
                       io_uring=self.spec.sandbox.io_uring,
                       unix_sockets=self.spec.sandbox.unix_sockets,
                       homes=[str(self.dir)],  # a scratch area of its own lies inside; one that
                       # leads elsewhere (a shared directory) is not the campaign's
                       output_dir=str(self.output_dir),
                       tag=run_identity(self.store_path, r.key))

    def _scratch_identity(self) -> tuple[str, int, int] | None:
        """(`scratch_view`, st_dev, st_ino) of the scratch area now (made if missing): each run's
        directory is made only while it still leads there (`RunTask.scratch_id`)."""
        try:
            self.scratch.mkdir(parents=True, exist_ok=True)
            st = os.stat(self.scratch)
        except OSError:
            return None  # each run then fails on it in one line
        return scratch_view(), st.st_dev, st.st_ino

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
        if not starts_programs(self.spec.runner.type) and not (self.spec.setup
                                                                   or self.spec.teardown):
            return []
        if unsandboxed():
            head = f"off ({UNSANDBOXED_ENV}=1): programs run with the whole system writable"
        else:
            sb = self.spec.sandbox
            extra = ", ".join(sb.writable) or "nothing else"
            dev = self.spec.runner.options.get("allow_destructive") or sb.allow_destructive
            net = "the host's (sandbox.network)" if sb.network else "none (its own)"
            try:
                runner = make_runner(self.spec.runner.type, self.runner_options())
                why = getattr(runner, "network_reason", lambda: None)()
                ring = getattr(runner, "io_uring_reason", lambda: None)()
                prog = getattr(runner, "program", lambda: None)()
            except (StorlabError, OSError, TypeError, ValueError):
                why = ring = prog = None
            if why and not sb.network:
                net = f"the host's for the runner's program ({why})"
            trees = shown_install_trees(prog, str(self.dir)) if prog else []
            head = (f"bwrap: read-only system (/usr, /etc, /sys) and campaign "
                    + (f"directory, also {', '.join(sb.readable)}" if sb.readable
                       else "directory")
                    + (f", the program's install tree {', '.join(trees)}" if trees else "")
                    + (f", ld.so.conf's library directories {', '.join(libs)}"
                       if (libs := ld_conf_opt_dirs()) else "")
                    + f"; writable: each run's directory, the runner's targets, {extra}; "
                    "declared devices "
                    + ("writable (allow_destructive)" if dev else "not openable")
                    + f"; network: {net}; Unix sockets: "
                    + (", ".join([*sb.sockets, *(["the run's own (sandbox.unix_sockets)"]
                                                 if sb.unix_sockets else [])]) or "none")
                    + "; io_uring: " + ("every program (sandbox.io_uring)" if sb.io_uring
                                        else f"the runner's program ({ring})" if ring
                                        else "none but the runner's own need (a factor's "
                                        "engine)")
                    + "; Landlock: " + (f"not applied ({ll})" if (ll := landlock_missing())
                                        else "abstract sockets and signals scoped")
                    + ("" if not why or sb.network else
                       "; the runner's network: TCP to its own ports only (Landlock)"
                       if not (no := landlock_net_missing()) else
                       f"; the runner's network: not applied ({no}): refused unless "
                       "sandbox.network"))
        return [head, *self.system_writable_steps()]

    def _measurement(self) -> dict[str, Any]:
        """What makes two runs of one configuration the same measurement (with what the
        runner's `prepare_options` records, say a job file's content: an edited file is
        another measurement)."""
        sp = self.spec
        extra = self._prepared_options()[1]
        return json.loads(json.dumps({
            **extra, "runner": sp.runner.type, "options": self.spec.runner.options,
            "exclude": sp.runner.exclude, "vars": sp.vars,
            "setup": [st.model_dump() for st in sp.setup],
            "teardown": [st.model_dump() for st in sp.teardown]}, default=str))

    # ------------------------------------------------------------------ run
    def run(self, executor: str | None = None, retry_failed: bool = False,
            on_event: Event | None = None, stop: threading.Event | None = None,
            wait: bool = False) -> RunSummary:
        """Run what is left of the campaign (`loop.run_loop`). Each finished run is
        committed at once; the source is asked for more whenever every planned run is done.

        The first Ctrl-C (SIGINT) stops handing out runs and returns after the runs in
        flight; a second one aborts them (they stay `running` and are repeated next time).
        """
        emit = on_event or (lambda kind, data: None)
        runner = self.preflight()
        self._check_width(executor)
        stop = stop or threading.Event()
        with Store(self.store_path) as store, store.writer_lock(wait, self.scratch, emit,
                                                             home=self.dir):
            self._scratch_id = self._scratch_identity()
            sync_plan(store, self.path, self._measurement(), self.design_meta_now(),
                      None if self.adaptive else self.configs,
                      self.source.meta() if self.adaptive else None)
            plan = self.plan(store)
            todo = self.pending(store.statuses(), retry_failed, plan)
            done = len(plan) - sum(not r.warmup for r in todo)
            planned = max(len(plan), int(self.source.meta().get("budget") or 0))
            summary = RunSummary(planned=planned, already_done=done)
            emit("start", {"planned": planned, "done": done, "todo": len(todo),
                           "store": str(self.store_path)})
            old = install_sigint(stop, emit)
            try:
                run_loop(self, self.source, store, todo, executor, summary, emit, stop, runner)
            finally:
                restore_sigint(old)
            summary.interrupted = stop.is_set()
            emit("end", {"summary": summary})
            return summary

    def _check_width(self, executor: str | None) -> None:
        """Refuse, before anything runs, `parallel:N` with more workers than an adaptive
        design's budget, or with an adaptive source that proposes one run at a time (N - 1
        slots would stay idle)."""
        width = requested_width(executor)
        if not self.adaptive or width is None or width <= 1:
            return
        budget = int(self.source.meta().get("budget") or 0)
        if budget and width > budget:
            raise CampaignError(f"--executor {executor}: {width} workers for a budget of "
                                f"{budget} runs; use at most parallel:{budget}")
        if not getattr(self.source, "batches", False):
            raise CampaignError(f"--executor {executor}: the {self.source.meta().get('kind')} "
                                "design proposes one run at a time; use --executor "
                                "sequential")

    def keep(self, store: Store, r: PlannedRun, out: TaskOutcome, runner: Any) -> None:
        """Commit a finished run; a measured one's program document (the runner's
        `document`, fio's JSON say) also as a plain file beside the store."""
        store.record(out.key, out.result, out.host)
        document = getattr(runner, "document", None)
        if not r.warmup and out.result.ok and document is not None:
            self._write_document(document(out.result.raw), self.documents_dir,
                                 r.config_id, r.repetition)

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
    def documents_dir(self) -> Path:
        """Where each measured run's program document goes as it finishes, for a runner
        that has one: `<store's directory>/<store's name without .db>-<runner type>/
        c<config>-r<repetition>.json` (campaign.db -> campaign-fio/, tune.db -> tune-fio/)."""
        return self.store_path.parent / f"{self.store_path.stem}-{self.spec.runner.type}"

    def _write_document(self, doc: dict[str, Any] | None, directory: Path, config_id: int,
                        repetition: int) -> Path | None:
        """One run's document as `directory/c<config>-r<repetition>.json`; None without
        one. Never through a link a run's program could have planted beside the store."""
        if doc is None:
            return None
        return write_in_dir(directory, f"c{config_id}-r{repetition}.json",
                            json.dumps(doc, indent=2) + "\n",
                            what=f"{self.spec.runner.type} JSON directory", home=self.dir)

    def export_documents(self, directory: Path) -> list[Path]:
        """Write each successful measured run's program document (the runner's `document`:
        fio's own JSON output, warnings stripped, as fio-plot and other fio tools read it)
        to `directory` as `c<config>-r<repetition>.json`. Returns the files written; none
        for a runner without documents."""
        document = getattr(runner_class(self.spec.runner.type), "document", None)
        if not self.store_path.exists():
            raise CampaignError(f"{self.store_path}: no store yet; run the campaign first")
        if document is None:
            return []
        with Store(self.store_path, readonly=True) as store:
            runs = [r for r in store.runs(with_raw=True) if not r["warmup"]
                    and r["status"] == "ok"]
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        out = []
        for r in runs:
            path = self._write_document(document(r["raw"]), directory, r["config_id"],
                                        r["repetition"])
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


def campaign_space(spec: CampaignSpec, path: str | Path) -> Space:
    """The campaign's space (a file next to the campaign file, or inline)."""
    path = Path(path).resolve()
    sp = spec.space
    try:
        if isinstance(sp, str):
            content = read_campaign_input(path.parent / sp, path, f"{path}: field space: ",
                                          MAX_YAML_BYTES)
            return Space.from_yaml(path.parent / sp, content)
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

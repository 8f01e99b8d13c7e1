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
of it (`plan.py`), what the store records and the guards that read it (`storemeta.py`), the
checks before anything runs (`preflight.py`), the one run loop (`loop.py`), each run's
program document as a file (`documents.py`), and the sandbox in words for status and the
report (`sandbox_summary.py`). Every design is a source: a fixed design proposes its whole
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
from ..fileio import MAX_YAML_BYTES
from ..jsonutil import to_jsonable
from ..space import Space
from .documents import documents_dir, export_documents, write_document
from .fixed import Config, fixed_source
from .inputs import check_campaign_input, read_campaign_input
from .loop import Event, RunSummary, install_sigint, restore_sigint, run_loop
from .plan import (PlannedRun, batch_rows, history, pending, run_key, stored_plan,
                   table_layout, table_plan)
from .preflight import check_runner, check_steps, check_targets, check_width
from .runners import run_identity, runner_class
from .sandbox_summary import sandbox_summary
from .sources import DesignSource, Observation, Proposal, adaptive_kinds, make_source
from .spec import CampaignError, CampaignSpec, check_plan, read_spec
from .store import FAILED, Store
from .storemeta import (as_stored_source, check_own_store, check_store_campaign,
                        source_store, stored_design_meta, sync_plan)
from .task import RunTask, StepSpec, TaskOutcome, identity, open_scratch

_T = TypeVar("_T")

__all__ = ["Campaign", "PlannedRun", "RunSummary", "campaign_space", "results_table"]


class Campaign:
    """A loaded, checked campaign file."""

    def __init__(self, spec: CampaignSpec, path: str | Path) -> None:
        self.spec = spec
        # absolute, not resolved again: `load` passes the path its checks resolved
        self.path = Path(os.path.abspath(path))
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
        self._home_id: tuple[str, int, int] | None = None  # set by `run`
        check_steps(self)

    @property
    def adaptive(self) -> bool:
        """Whether the configurations come from an adaptive source (asked as runs finish)."""
        return bool(self.source.adaptive)

    @classmethod
    def load(cls, path: str | Path, store: str | None = None) -> Campaign:
        """The campaign of a file; with `store`, read from that store file (next to the
        file) instead of the file's `store:`, as the adaptive design it holds when, say,
        `storlab tune` wrote it from a fixed design (`storemeta.source_store`)."""
        path, spec = read_spec(path)  # the real path, resolved once with its checks
        here = path.parent
        if store is None:
            check_own_store(here / spec.store, path)
        if store is not None:
            own = {(here / n).resolve()
                   for n in (spec.store, *(source_store(path, k) for k in adaptive_kinds()))}
            if (here / store).resolve() not in own:
                # the file's own stores are read as without --store (a campaign directory
                # moved or copied keeps its old path in their meta)
                check_store_campaign(here / store, path)
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

    def run_dir(self, config_id: int, repetition: int = 1) -> Path:
        """The directory a run of configuration `config_id` (its `repetition`) runs in:
        named by its key in the scratch area (`RunTask.workdir`); the preflight and the
        sandbox's summary judge a configuration there, in its first repetition's."""
        return self.scratch / run_key(config_id, repetition)

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
        pairs = meta.get("objectives") or []
        if not (isinstance(pairs, list) and all(
                isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
                for p in pairs)):
            raise CampaignError(f"{self.store_path}: meta design: objectives is not a list "
                                "of [response, goal] pairs (storlab writes one there); the "
                                "store was changed, or not written by storlab")
        return {n: g for n, g in pairs}

    def preflight(self) -> Any:
        """Checks that need the runner, before any run or step (`preflight.check_runner`):
        options accepted, the sandbox possible here and its declarations allowed, every
        configuration's targets allowed. Returns the runner (an adaptive campaign checks
        each new batch with it)."""
        return check_runner(self)

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
        check_targets(self, runner, [(cid, cfg) for cid, cfg, _ in configs])
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
                       home_id=self._home_id,
                       writable=[str(self.dir / p) for p in self.spec.sandbox.writable],
                       allow_destructive=self.spec.sandbox.allow_destructive,
                       network=self.spec.sandbox.network,
                       readable=[str(self.dir / p) for p in self.spec.sandbox.readable],
                       sockets=[str(self.dir / p) for p in self.spec.sandbox.sockets],
                       io_uring=self.spec.sandbox.io_uring,
                       unix_sockets=self.spec.sandbox.unix_sockets,
                       realtime=self.spec.sandbox.realtime,
                       lock_memory=self.spec.sandbox.lock_memory,
                       env_pass=list(self.spec.sandbox.env_pass),
                       homes=[str(self.dir)],  # a scratch area of its own lies inside; one that
                       # leads elsewhere (a shared directory) is not the campaign's
                       output_dir=str(self.output_dir),
                       tag=run_identity(self.store_path, r.key))

    def _identities(self) -> tuple[tuple[str, int, int] | None, tuple[str, int, int] | None]:
        """(`scratch_view`, st_dev, st_ino) of the campaign's directory and of the scratch
        area now (made if missing, from the directory's descriptor: `open_scratch`): each
        run's directory is made only while both still lead there (`RunTask.home_id`,
        `RunTask.scratch_id`)."""
        try:
            hfd, pfd = open_scratch(self.scratch, str(self.dir))
        except (OSError, StorlabError):
            return None, None  # each run then fails on it in one line
        try:
            st = os.fstat(pfd)
            if st.st_uid == os.geteuid() and st.st_mode & 0o077 and self.own_scratch():
                _tighten(pfd)  # an older campaign's (0755, 0711): its kept runs private
            return identity(hfd) if hfd is not None else None, identity(pfd)
        finally:
            os.close(pfd)
            if hfd is not None:
                os.close(hfd)

    @property
    def output_dir(self) -> Path:
        """Where each run's whole stdout and stderr go (`<key>.stdout`, `<key>.stderr`): a
        directory beside the store; the store keeps their tails."""
        return self.store_path.with_name(self.store_path.name + ".output")

    def sandbox_summary(self) -> list[str]:
        """How this campaign's programs run, for `storlab status` and the report: one line
        for the sandbox, then one per step declared `system_writable`
        (`sandbox_summary.sandbox_summary`)."""
        return sandbox_summary(self)

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
        check_width(self, executor)
        stop = stop or threading.Event()
        with Store(self.store_path) as store, store.writer_lock(wait, self.scratch, emit,
                                                             home=self.dir):
            self._home_id, self._scratch_id = self._identities()
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

    def keep(self, store: Store, r: PlannedRun, out: TaskOutcome, runner: Any) -> None:
        """Commit a finished run; a measured one's program document (the runner's
        `document`, fio's JSON say) also as a plain file beside the store."""
        store.record(out.key, out.result, out.host)
        document = getattr(runner, "document", None)
        if not r.warmup and out.result.ok and document is not None:
            write_document(document(out.result.raw), self.documents_dir, r.config_id,
                           r.repetition, self.spec.runner.type, self.dir, private=True)

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
        that has one (`documents.documents_dir`: campaign.db -> campaign-fio/)."""
        return documents_dir(self.store_path, self.spec.runner.type)

    def export_documents(self, directory: Path) -> list[Path]:
        """Write each successful measured run's program document (the runner's `document`)
        to `directory` as `c<config>-r<repetition>.json` (`documents.export_documents`).
        Returns the files written; none for a runner without documents."""
        return export_documents(self.store_path, self.spec.runner.type, Path(directory),
                                self.dir)

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
    """The campaign's space (a file next to the campaign file, or inline); `path` as
    `read_spec` resolved it."""
    path = Path(os.path.abspath(path))
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


def _tighten(fd: int) -> None:
    """Take group's and others' access away from the directory open as `fd` (a
    campaign's own scratch area, held since `open_scratch` checked it: never reopened by
    path; `task.SCRATCH_MODE`), and from the run directories an older storlab left in it
    (0755), opened without following a link. Best effort: the runs' own directories are
    made 0700 anyway."""
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            return
        for name in os.listdir(fd):
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                              | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                continue  # not a directory, or a link: nothing of ours to tighten
            try:
                sst = os.fstat(sub)
                if sst.st_uid == os.geteuid() and sst.st_mode & 0o077:
                    os.fchmod(sub, sst.st_mode & 0o7700)
            finally:
                os.close(sub)
        os.fchmod(fd, st.st_mode & 0o7700)
    except OSError:
        pass

"""The campaign's plan and what is left of it: every measured run in campaign order, the
runs still to do (with their warm-ups), the history a source is told, and a source's batch
added to the plan.

Two layouts, by what the source is, never by its kind: a source that proposes its whole
table once (not `adaptive`) has a plan that follows from the table and the campaign's seed,
so the store keeps only its configurations; an adaptive source's batches are saved in the
store as they come (`plan` table), so a killed campaign resumes the batch it was in and
then asks again with the same history it would have had."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import CampaignError, StorlabError
from ..space import Space
from .fixed import Config, plain
from .sources import Observation, Proposal, config_key
from .store import DONE, FAILED, Store


@dataclass
class PlannedRun:
    key: str
    seq: int
    config_id: int
    repetition: int
    warmup: bool
    config: dict[str, Any]


def table_layout(proposals: list[Proposal]) -> tuple[list[Config], int]:
    """A table proposed at once as the campaign's configurations (1-based ids in the order
    proposed, each proposal's note its design bookkeeping) and their repetitions."""
    configs = [(i, dict(p.config), dict(p.note)) for i, p in enumerate(proposals, start=1)]
    return configs, max((p.repetitions for p in proposals), default=1)


def run_key(config_id: int, repetition: int) -> str:
    """A run's key, `c<configuration id>-r<repetition>`: also its directory's name in the
    campaign's scratch area (`Campaign.run_dir`)."""
    return f"c{config_id}-r{repetition}"


def table_plan(configs: list[Config], repetitions: int, randomize: bool,
               seed: int) -> list[PlannedRun]:
    """Every measured run of a table, shuffled with the campaign's seed (`randomize`)."""
    measured = [(cid, rep) for cid, _, _ in configs for rep in range(1, repetitions + 1)]
    if randomize:
        rng = np.random.default_rng(seed)
        measured = [measured[i] for i in rng.permutation(len(measured))]
    cfgs = {cid: cfg for cid, cfg, _ in configs}
    return [PlannedRun(run_key(cid, rep), seq, cid, rep, False, cfgs[cid])
            for seq, (cid, rep) in enumerate(measured, start=1)]


def stored_plan(store: Store) -> list[PlannedRun]:
    """The runs an adaptive source has asked for so far, as the store keeps them."""
    cfgs = {cid: cfg for cid, cfg, _ in store.configs()}
    return [PlannedRun(r["key"], r["seq"], r["config_id"], r["repetition"], False,
                       cfgs[r["config_id"]]) for r in store.plan_rows()]


def pending(plan: list[PlannedRun], statuses: Mapping[str, str], warmup: int,
            retry_failed: bool = False) -> list[PlannedRun]:
    """Runs still to do: not finished (never started, or cut off by a kill), or failed
    when `retry_failed`; each configuration's warm-ups before its first one."""
    skip = DONE + (() if retry_failed else FAILED)
    todo = [r for r in plan if statuses.get(r.key) not in skip]
    out: list[PlannedRun] = []
    warmed: set[int] = set()
    for r in todo:
        if r.config_id not in warmed and warmup:
            warmed.add(r.config_id)
            # keyed by the measured run they precede: a configuration warmed again in
            # a later batch (a tuning's confirmation) kept the key `c<c>-w1` and
            # replaced the earlier warm-up's record (14 ran, 11 stored and counted). A
            # resume re-warms before the same run under the same key, for warm-ups
            # this version wrote; one an earlier version left under `c<c>-w<i>` is
            # not reused (tune counts only finished or failed warm-ups)
            out += [PlannedRun(f"{r.key}-w{w}", r.seq, r.config_id, 1 - w, True,
                               r.config) for w in range(1, warmup + 1)]
        out.append(r)
    return out


def history(store: Store) -> list[Observation]:
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


def pending_proposals(plan: list[PlannedRun], store: Store, width: int
                      ) -> tuple[list[Observation], list[Proposal]] | None:
    """What a batching source is told while runs are in flight, or None to wait.

    It depends on the plan's order, never on which runs happened to finish first: every
    planned run but the newest `width - 1` must have finished (else wait for them), those
    are its history, and the newest `width - 1` are pending whether finished or not. So
    the same seed and width give the same proposals, resumed after a kill or not, at the
    price of a slot left idle while an older run finishes after a newer one."""
    rows = store.plan_rows()
    done = store.statuses()
    cut = max(0, len(plan) - (width - 1))
    if any(done.get(r.key) not in DONE + FAILED for r in plan[:cut]):
        return None
    older = {r.key for r in plan[:cut]}
    told = [o for o in history(store) if o.key in older]
    return told, [Proposal(dict(r.config), 1, p["phase"], p["note"])
                  for r, p in zip(plan[cut:], rows[cut:])]


def batch_rows(store: Store, batch: list[Proposal], space: Space, where: str,
               randomize: bool, seed: int) -> tuple[list[Config], list[tuple[Any, ...]]]:
    """A source's batch checked against the space, as the store's new configurations (the
    next ids; known ones get new repetitions) and plan rows (shuffled, seeded by the batch
    number)."""
    configs = store.configs()
    ids = {config_key(cfg): cid for cid, cfg, _ in configs}
    next_id = max(ids.values(), default=0) + 1
    plan = store.plan_rows()
    reps: dict[int, int] = {}
    for r in plan:
        reps[r["config_id"]] = max(reps.get(r["config_id"], 0), r["repetition"])
    n_batch = max((r["batch"] for r in plan), default=-1) + 1
    new_configs: list[Config] = []
    rows: list[tuple[int, int, str, dict[str, Any]]] = []
    for p in batch:
        cfg = {n: plain(p.config[n]) for n in space.names}
        try:
            space.validate(cfg)
        except StorlabError as exc:  # a source bug, never a user's run
            raise CampaignError(f"{where}: design proposed {cfg}: {exc}") from None
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
    if randomize:
        rng = np.random.default_rng([seed, n_batch])
        rows = [rows[i] for i in rng.permutation(len(rows))]
    seq0 = max((r["seq"] for r in plan), default=0)
    return new_configs, [(run_key(cid, rep), seq0 + i, cid, rep, n_batch, ph, note)
                         for i, (cid, rep, ph, note) in enumerate(rows, 1)]

"""Parallel tuning through the real CLI: `--executor parallel:N` keeps N runs of a tuning in
flight (the search proposes while runs are pending), a SIGKILL with N in flight resumes
without a lost or repeated run and to the same tuning as an uninterrupted one, and the
proposals of one batch are distinct. The runs are
a command that sleeps, then prints a planted function of its configuration."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.sources import Observation, Proposal, config_key
from storlab.tune.batch import EARLY, decided, rounded, search_slots, spread
from storlab.tune.racing import race
from storlab.tune.domain import Domain
from storlab.tune.strategies import Objective, Tally, TuneSettings, make_strategy
from storlab.space import Space

# Additive with one interaction; best a=2, b=2, c=0, d=2, e=2 -> 154.
ORACLE = r'''
import json, os, sys, time
cfg = dict(a.split("=", 1) for a in sys.argv[1:])
a, b, c, d = (int(cfg[k]) for k in "abcd")
time.sleep(float(os.environ.get("ORACLE_SLEEP", "0")))
y = 100 + 10 * a + 8 * b - 4 * c + 3 * d + (10 if a == 2 and b == 2 else 0) + int(cfg["e"])
print(json.dumps({"y": y}))
'''
FACTORS = [{"name": n, "kind": "integer", "values": [0, 1, 2]} for n in "abcde"]


def campaign(d: Path, budget: int, sleep: float, **design: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "oracle.py").write_text(ORACLE)
    spec = {
        "name": "parallel",
        "space": {"factors": FACTORS, "responses": [{"name": "y", "goal": "maximize"}]},
        "design": {"kind": "tune", "budget": budget, **design},
        "runner": {"type": "command", "options": {
            "command": [sys.executable, str(d / "oracle.py"),
                        *[f"{n}={{{n}}}" for n in "abcde"]],
            "json_metrics": {"y": "y"}, "env": {"ORACLE_SLEEP": str(sleep)}}},
        "seed": 5,
        "timeout": 60,
    }
    p = d / "tune.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def stored(db: Path) -> list[dict[str, Any]]:
    if not db.exists():  # connecting would create it, and storlab refuse it
        return []
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT r.key, r.config, r.status, r.started, r.ended, r.attempts, "
                           "p.note FROM runs r LEFT JOIN plan p ON p.key = r.key "
                           "WHERE r.warmup = 0 ORDER BY r.seq").fetchall()
    except sqlite3.OperationalError:  # tables not created yet
        rows = []
    finally:
        con.close()
    return [dict(zip(("key", "config", "status", "started", "ended", "attempts", "note"), r))
            for r in rows]


def early(row: dict[str, Any]) -> bool:
    """Whether a stored run is a race run made early by a spare slot (its plan note)."""
    return bool(row["note"] and json.loads(row["note"]).get(EARLY))


def most_in_flight(runs: list[dict[str, Any]]) -> int:
    """The largest number of runs whose [started, ended] intervals overlap."""
    edges = sorted([(r["started"], 1) for r in runs] + [(r["ended"], -1) for r in runs],
                   key=lambda e: (e[0], e[1]))
    now = top = 0
    for _, step in edges:
        now += step
        top = max(top, now)
    return top


def test_parallel_tuning_keeps_n_runs_in_flight(tmp_path: Path, storlab_forked: Any) -> None:
    p = campaign(tmp_path, budget=16, sleep=0.6)
    r = storlab_forked("tune", str(p), "--executor", "parallel:3", "--json", "--quiet", timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    hist = out["history"]
    assert len(hist) == 16 and {h["phase"] for h in hist} == {"screen", "tune", "confirm"}
    runs = stored(tmp_path / "campaign.db")
    assert len(runs) == 16 and all(r["status"] == "ok" and r["attempts"] == 1 for r in runs)
    assert most_in_flight(runs) == 3
    # The search runs in flight together were distinct configurations: no search run
    # repeats a configuration measured or pending before it.
    search = [config_key(h["config"]) for h in hist if h["phase"] != "confirm"]
    assert len(search) == len(set(search))
    # The race starts on finished runs only: every run planned before the first
    # confirmation run had ended when it started (a decided race may hand runs back to
    # the search afterwards, so search runs can follow it).
    phases = [h["phase"] for h in hist]
    first = phases.index("confirm")
    assert json.loads(runs[first]["config"]) == hist[first]["config"]  # plan order
    assert max(r["ended"] for r in runs[:first]) <= runs[first]["started"]
    assert out["best"]["config"]["a"] == 2 and out["best"]["config"]["b"] == 2


@pytest.mark.parametrize(("when", "budget"), [("search", 16), ("early", 24)])
def test_sigkill_with_n_in_flight_resumes_without_lost_or_repeated_runs(
        tmp_path: Path, storlab_forked: Any, storlab_argv: list[str], when: str, budget: int,
        act_on_a_stopped_look: Any) -> None:
    """Killed in the search (six runs done, three in flight) or with an early race run in
    flight (its plan note `early`: a budget of 24 leaves the search room for them)."""
    ref = storlab_forked("tune", str(campaign(tmp_path / "ref", budget=budget, sleep=0.1)),
                         "--executor", "parallel:3", "--json", "--quiet", timeout=300)
    assert ref.returncode == 0, ref.stderr
    p = campaign(tmp_path / "killed", budget=budget, sleep=1.0)
    db = tmp_path / "killed" / "campaign.db"
    proc = subprocess.Popen([*storlab_argv, "tune", str(p), "--executor", "parallel:3",
                             "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)

    def ready() -> list[dict[str, Any]] | None:
        runs = stored(db)
        done = [r for r in runs if r["status"] == "ok"]
        running = [r for r in runs if r["status"] == "running"]
        return runs if len(running) == 3 and (len(done) >= 6 if when == "search" else
                                              any(early(r) for r in running)) else None

    # Kill with three runs in flight, decided on a look taken with the tuner's process group
    # stopped: a run finishing between the look and the kill (CI saw it under load) would
    # leave two in flight. A stopped tuner records nothing, so what is read is what is cut.
    try:
        killed = act_on_a_stopped_look(
            proc, ready, lambda _: os.killpg(proc.pid, signal.SIGKILL), group=True)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert killed, f"never saw three runs in flight ({when}): {stored(db)}"
    before = stored(db)
    cut = [r["key"] for r in before if r["status"] == "running"]
    # A commit whose WAL frames the tuner had written, but not yet its index in the shared
    # memory, when it stopped is invisible to the stopped look; SQLite recovers it from the
    # WAL after the kill. So one of the three runs the look saw in flight may be finished
    # (seen under load): the others were cut, and none started after the look.
    looked = [r["key"] for r in killed if r["status"] == "running"]
    assert 2 <= len(cut) <= 3 and set(cut) <= set(looked), (killed, before)
    assert when == "search" or any(early(r) for r in killed if r["key"] in looked), killed
    finished = {r["key"]: r for r in before if r["status"] == "ok"}
    r = storlab_forked("tune", str(p), "--executor", "parallel:3", "--json", "--quiet", timeout=300)
    assert r.returncode == 0, r.stderr
    after = stored(db)
    keys = [a["key"] for a in after]
    assert len(after) == len(set(keys)) == budget == len(json.loads(r.stdout)["history"])
    for a in after:
        assert a["status"] == "ok"
        if a["key"] in finished:  # finished before the kill: kept, not run again
            assert (a["started"], a["ended"], a["attempts"]) == \
                (finished[a["key"]]["started"], finished[a["key"]]["ended"], 1)
    # the runs cut off by the kill ran again under their own keys, once
    assert all(next(a for a in after if a["key"] == k)["attempts"] == 2 for k in cut)
    # What the search is told depends on the plan's order, not on which run finished
    # first: the same seed and width give the same tuning, killed or not, runs of 0.1 s
    # or 1 s.
    assert [(h["config"], h["phase"], h["value"]) for h in json.loads(r.stdout)["history"]] \
        == [(h["config"], h["phase"], h["value"]) for h in json.loads(ref.stdout)["history"]]


def test_more_workers_than_the_budget_is_refused_before_anything_runs(
        tmp_path: Path, storlab_forked: Any) -> None:
    p = campaign(tmp_path, budget=14, sleep=0)
    r = storlab_forked("tune", str(p), "--executor", "parallel:20", "--quiet", timeout=120)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "20 workers for a budget of 14" in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert not stored(tmp_path / "campaign.db")


def _space() -> Space:
    return Space.from_dict({"factors": FACTORS, "responses": [{"name": "y"}]})


def _y(c: dict[str, Any]) -> float:
    a, b, cc, d = (int(c[k]) for k in "abcd")
    return 100 + 10 * a + 8 * b - 4 * cc + 3 * d + (10 if a == 2 and b == 2 else 0) + c["e"]


@pytest.mark.parametrize("strategy", ["screen-then-tune", "tpe", "random"])
def test_a_batch_asked_with_runs_pending_is_distinct(strategy: str) -> None:
    s = make_strategy(strategy, Domain(_space()), [Objective("y")],
                      TuneSettings(budget=40, seed=2))
    hist: list[Observation] = []
    while len(hist) < 12:  # finished runs, asked one at a time
        for p in s.ask(hist):
            hist.append(Observation(f"r{len(hist)}", len(hist), 0, 1, p.config, "ok",
                                    {"y": _y(p.config)}, p.phase, p.note))
    pending: list[Proposal] = []
    for _ in range(4):  # a free slot each time, earlier proposals still running
        more = s.ask(hist, pending)
        assert len(more) == 1
        pending += more
    keys = [config_key(p.config) for p in pending]
    assert len(set(keys)) == 4
    assert not set(keys) & {config_key(o.config) for o in hist}
    # With the runs pending the budget is counted: never more than it allows.
    assert s.ask(hist, [Proposal(p.config, 1, "tune") for p in pending] * 7) == []


def test_screen_then_tune_waits_for_its_screening_and_for_confirmation() -> None:
    s = make_strategy("screen-then-tune", Domain(_space()), [Objective("y")],
                      TuneSettings(budget=20, seed=2))
    screen = s.ask([])
    assert all(p.phase == "screen" for p in screen)
    first = Observation("r0", 0, 0, 1, screen[0].config, "ok", {"y": _y(screen[0].config)},
                        "screen")
    # the ranking needs the whole screening: no search run while part of it is pending
    assert s.ask([first], screen[1:]) == []
    hist = [Observation(f"r{i}", i, 0, 1, p.config, "ok", {"y": _y(p.config)}, "screen")
            for i, p in enumerate(screen)]
    while len(hist) < 20:
        batch = s.ask(hist)
        if batch[0].phase == "confirm":
            break
        hist.append(Observation(f"r{len(hist)}", len(hist), 0, 1, batch[0].config, "ok",
                                {"y": _y(batch[0].config)}, batch[0].phase))
    # at the switch to confirmation, a run in flight makes it wait: the confirmation
    # decides on finished runs only
    assert batch[0].phase == "confirm"
    assert s.ask(hist[:-1], [Proposal(hist[-1].config, 1, "tune")]) == []


def test_a_source_that_cannot_batch_is_refused_with_parallel(tmp_path: Path) -> None:
    from storlab.campaign.campaign import Campaign
    from storlab.campaign.spec import CampaignError

    camp = Campaign.load(campaign(tmp_path, budget=14, sleep=0))
    camp.source.strategy.batches = False  # type: ignore[union-attr]
    with pytest.raises(CampaignError, match="proposes one run at a time"):
        camp.run(executor="parallel:2")
    assert not stored(tmp_path / "campaign.db")


def _run(hist: list[Observation], props: list[Proposal]) -> None:
    for p in props:
        for _ in range(p.repetitions):
            hist.append(Observation(f"r{len(hist)}", len(hist), 0, 1, p.config, "ok",
                                    {"y": _y(p.config)}, p.phase, p.note))


def test_an_ask_with_nothing_in_flight_fills_the_slots() -> None:
    """With N slots, the screening is a whole number of rounds, the first search ask gives
    N distinct runs (constant liar), later ones one search run and N - 1 of the race's runs
    early (re-runs of its candidates), the search still gets its whole share of the budget,
    the race proper gets at least a round, and a width of 1 changes nothing."""
    def strategy(width: int) -> Any:
        s = make_strategy("screen-then-tune", Domain(_space()), [Objective("y")],
                          TuneSettings(budget=40, seed=2))
        s.width = width
        return s

    one, four = strategy(1), strategy(4)
    assert len(one.ask([])) == 6  # max(6, 5 // 2 + 1)
    screen = four.ask([])
    assert len(screen) == 8 and {p.phase for p in screen} == {"screen"}
    assert len({config_key(p.config) for p in screen}) == 8
    hist: list[Observation] = []
    _run(hist, screen)
    batch = four.ask(hist)
    assert [p.phase for p in batch] == ["tune"] * 4
    keys = {config_key(p.config) for p in batch}
    assert len(keys) == 4 and not keys & {config_key(o.config) for o in hist}
    # the first is what one slot would have been asked for
    assert batch[0].config == strategy(1).ask(hist)[0].config
    _run(hist, batch)
    early = 0
    while True:  # one search run and three early race runs a round until the race proper
        batch = four.ask(hist)
        assert sum(p.repetitions for p in batch) == 4
        if any(p.phase == "confirm" and not p.note.get(EARLY) for p in batch):
            break
        search = [p for p in batch if p.phase == "tune"]
        assert config_key(search[0].config) not in {config_key(o.config) for o in hist}
        # more search runs only when the race over the finished runs wants none
        assert len(search) == search_slots(4) == 1 or decided(four, hist)
        for p in batch:
            if p.phase == "confirm":  # a re-run of a candidate the race would run next
                assert p.note == {EARLY: True}
                r = race(Tally(hist, [Objective("y")]), 3)
                assert config_key(p.config) in {config_key(e.config) for e in r.round(3)}
                early += 1
        assert four.ask(hist) == batch  # a function of the history
        _run(hist, batch)
    # the search's share at least: the early runs are the race's
    assert sum(o.phase == "tune" for o in hist) >= 40 - 20 - 8
    assert 0 < early <= 20 - 4  # the race proper keeps a whole round
    assert sum(o.phase == "confirm" for o in hist) == early
    while len(hist) < 40:  # from then on every ask fills whole rounds, to the budget
        n = sum(p.repetitions for p in batch)
        assert n % 4 == 0 or n == 40 - len(hist)
        _run(hist, batch)
        batch = four.ask(hist)
    assert four.ask(hist) == []


def test_a_freed_slot_gets_an_early_race_run_beside_a_search_run() -> None:
    """With four slots and a search run in flight, a freed slot re-runs a race candidate
    (no lie: the configuration is measured); with none in flight it gets the search run,
    and once the search's runs are spent the spare slots still get race runs while the
    race proper waits for the runs in flight."""
    s = make_strategy("screen-then-tune", Domain(_space()), [Objective("y")],
                      TuneSettings(budget=40, seed=2))
    s.width = 4
    hist: list[Observation] = []
    _run(hist, s.ask([]))
    _run(hist, s.ask(hist))  # the screening, then four search runs
    t = Proposal(s.ask(hist)[0].config, 1, "tune")
    got = s.ask(hist, [t])
    assert len(got) == 1 and got[0].phase == "confirm" and got[0].note == {EARLY: True}
    assert config_key(got[0].config) in {config_key(o.config) for o in hist}
    e = got[0]
    got = s.ask(hist, [e])  # only a race run in flight: the search's turn
    assert len(got) == 1 and got[0].phase == "tune"
    while sum(o.phase == "tune" for o in hist) < 12 - 1:  # all but one search run
        _run(hist, [p for p in s.ask(hist) if p.phase == "tune"])
    last = [p for p in s.ask(hist) if p.phase == "tune"]
    assert len(last) == 1
    got = s.ask(hist, last)  # the search's runs spent, the last one in flight
    assert len(got) == 1 and got[0].phase == "confirm" and got[0].note == {EARLY: True}


def test_a_race_round_spreads_over_the_slots_leader_first() -> None:
    assert spread(["lead", "c1", "c2"], 4) == ["lead", "c1", "c2", "lead"]
    assert spread(["lead", "c1", "c2"], 8) == ["lead", "c1", "c2"] * 2 + ["lead", "c1"]
    assert spread(["lead", "c1", "c2"], 2) == ["lead", "c1", "c2"]  # never fewer
    assert spread([], 4) == []
    assert rounded(6, 4, 10) == 8 and rounded(6, 4, 1) == 7 and rounded(6, 1, 10) == 6
    assert rounded(8, 4, 10) == 8


def _noisy(c: dict[str, Any], k: int, seed: int) -> float:
    """The planted function times lognormal noise (5 %), the k-th run of c."""
    return _y(c) * math.exp(random.Random(f"{seed}|{sorted(c.items())}|{k}").gauss(0, .05))


def _simulate(width: int, budget: int, seed: int) -> tuple[Any, list[Observation], list[bool]]:
    """A tuning on `width` slots through the library, as the campaign drives it: a freed
    slot is asked for a run (told the runs in flight), results told in plan order. Also
    whether each run was proposed alone, nothing in flight, on a decided race."""
    s = make_strategy("screen-then-tune", Domain(_space()), [Objective("y")],
                      TuneSettings(budget=budget, seed=seed))
    s.width = width
    hist: list[Observation] = []
    flight: list[Proposal] = []
    alone: list[bool] = []
    count: dict[str, int] = {}

    def finish() -> None:
        p = flight.pop(0)
        k = count.get(config_key(p.config), 0)
        count[config_key(p.config)] = k + 1
        hist.append(Observation(f"r{len(hist)}", len(hist), 0, 1, p.config, "ok",
                                {"y": _noisy(p.config, k, seed)}, p.phase, p.note))

    while True:
        while len(flight) > width - 1:
            finish()
        got = s.ask(hist, flight) if flight else s.ask(hist)
        got = [Proposal(p.config, 1, p.phase, p.note) for p in got for _ in range(p.repetitions)]
        if got:
            alone += [not flight and len(got) == 1 and decided(s, hist)] * len(got)
            flight += got
        elif flight:
            finish()
        else:
            return s, hist, alone


@pytest.mark.parametrize("width", [2, 3, 8])
def test_the_race_proper_keeps_a_whole_round_when_early_runs_decided_the_race(width: int
                                                                              ) -> None:
    """Once early race runs have decided the race over the finished runs, its spare slots
    go to the search but never the last round of the budget: the race proper starts with
    `width` runs (a decided race then hands them back one search run at a time, each
    raced in turn if it leads). At width 8, budget 24, seed 1 the search used to spend
    all 8 in flight together, none ever raced."""
    for budget in (24, 40):
        for seed in (1, 2):
            s, hist, alone = _simulate(width, budget, seed)
            assert len(hist) == budget
            keep = min(width, math.ceil(s.s.confirm_share * budget))
            proper = [i for i, o in enumerate(hist)
                      if o.phase == "confirm" and not o.note.get(EARLY)]
            first = proper[0] if proper else budget
            for i in range(budget - keep, first):
                assert hist[i].phase == "confirm" or alone[i], (width, budget, seed, i)

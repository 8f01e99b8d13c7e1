"""How a tuning keeps N runs in flight (`--executor parallel:N`, a Dask scheduler).

The campaign asks the strategy for runs whenever every planned run has finished (`ask`)
and, between those, whenever a slot frees (`ask_more`, the runs in flight pending). An ask
with nothing in flight answers with a batch of N runs (`fill`), so no slot idles while
the next decision waits for finished runs:

- the first search run after the screening is joined by N - 1 more, each proposed with
  the ones before it counted as measured at the incumbent's value (a constant liar:
  Ginsbourger, Le Riche and Carraro, "Kriging is well-suited to parallelize
  optimization", Computational Intelligence in Expensive Optimization Problems, 2010),
  so they are distinct;
- from then on, until the race proper, one search run is kept in flight per four slots
  (`search_slots`) and the other slots run the race's runs early (`early_run`: re-runs of
  the candidates of its next round over the finished runs), out of the runs kept for the
  race; a race over the finished runs that is decided spares its slots to the search,
  all but one whole round of N, which the race proper keeps;
- a race's round (the leader and its challengers, one run each) is spread over the N
  slots: the candidates of the round get runs in turn, leader first (`spread`); a leader
  left without challengers gets the runs that decide the race and the search the other
  slots (`race_runs`);
- a screening is sized to a whole number of rounds (`rounded`).

Everything here is a function of the history, the proposals and N: the same seed and N
give the same tuning, killed and resumed or not.
"""

from __future__ import annotations

import importlib
import math
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from ..campaign.sources import Observation, Proposal, config_key

if TYPE_CHECKING:
    from .racing import Race
    from .strategies import Entry, Strategy

T = TypeVar("T")


def spread(round_: Sequence[T], slots: int) -> list[T]:
    """A race round's candidates (most useful first) given `slots` runs: each in turn,
    from the first, until the slots are used; one round never gives fewer runs than it
    asked for."""
    if not round_:
        return []
    n = max(slots, len(round_))
    return [round_[i % len(round_)] for i in range(n)]


def race_runs(r: Race, width: int, taken: int, limit: int) -> list[Entry]:
    """The runs of a race's round on `width` slots, `taken` of them by the baseline's runs:
    with challengers (or no noise estimate yet) the round's candidates in turn up to a
    whole number of rounds (`spread`: five runs on four slots would leave three idle
    while the fifth runs); a leader left alone gets the runs that decide the race and
    leaves the other slots to the search, which a decided race hands its runs back to.
    At most `limit` runs (the budget's)."""
    entries = r.round(limit)
    if r.sigma is None or r.live or r.leader is None:
        slots = math.ceil((taken + len(entries)) / max(1, width)) * max(1, width) - taken
        return spread(entries, slots)[:limit]
    return (entries * max(1, 2 - r.leader.n))[:limit]


def rounded(runs: int, width: int, extra: int) -> int:
    """A screening of `runs` runs grown to a whole number of rounds of `width` runs, by at
    most `extra` runs (what the budget can spare); unchanged with one run at a time."""
    if width <= 1:
        return runs
    return min(math.ceil(runs / width) * width, runs + max(0, extra))


#: The note of a race run made during the search (`early_run`).
EARLY = "early"


def raced(runs: Sequence[Observation] | Sequence[Proposal]) -> bool:
    """Whether the race proper has begun among `runs`: a confirmation run that is not one
    the search's spare slots made (`early_run`)."""
    return any(r.phase == "confirm" and not r.note.get(EARLY) for r in runs)


def early_spent(history: Sequence[Observation], pending: Sequence[Proposal] = ()) -> int:
    """Race runs made during the search (`early_run`), finished and in flight: they come
    out of the runs kept for the race, not out of the search's."""
    return sum(1 for r in [*history, *pending] if r.phase == "confirm" and r.note.get(EARLY))


def search_slots(width: int) -> int:
    """Search runs kept in flight during the search with `width` slots: a quarter of them,
    at least one. The
    search is a sequence of decisions (each step moves from the incumbent the runs so far
    crown); with N in flight each is proposed without the newest N - 1 results, and on a
    planted function with a five-percent noise parallel:4 recommended a configuration
    within 5 % of the optimum in 12 of 20 seeds where one run at a time did in 15
    (benchmarks/bench_tune_parallel.py). The other slots run the race's runs early: re-runs
    of the leading candidates (`early_run`) that the race needs anyway, and that correct a
    lucky incumbent before the search builds on it."""
    return max(1, width // 4)


def _spare(strategy: Strategy, history: Sequence[Observation]) -> bool:
    """Whether parallel slots can spare runs for the race: more than one slot, a race, and
    a search past its first steps (it first builds on the screening)."""
    return strategy.width > 1 and strategy.racing() and \
        any(o.phase == "tune" for o in history)


def decided(strategy: Strategy, history: Sequence[Observation]) -> bool:
    """Whether the race over the finished runs is decided with slots to spare: it wants no
    run, so a spare slot goes to the search, as a decided race hands its runs back."""
    if not _spare(strategy, history):
        return False
    from .racing import race

    return race(strategy.tally(history), strategy.s.confirm_top).decided


def early_run(strategy: Strategy, history: Sequence[Observation],
              pending: Sequence[Proposal]) -> Proposal | None:
    """One race run for a spare slot during the search, or None: the candidate of the
    race's next round (over the finished runs) with the fewest runs in flight, most useful
    first; none once the race over the runs so far is decided (`decided`), or when the
    runs kept for the race could no longer give it a whole round of `width` after this
    one. Noted `early` (the race proper starts when the search's runs are spent, on
    finished runs only, as with one slot)."""
    if not _spare(strategy, history):
        return None
    from .racing import race

    tally = strategy.tally(history)
    left = strategy.reserve(tally) - early_spent(history, pending)
    used = len(history) + sum(p.repetitions for p in pending)
    if left - 1 < strategy.width or strategy.s.budget - used < left:
        return None
    entries = race(tally, strategy.s.confirm_top).round(strategy.s.confirm_top)
    if not entries:
        return None
    busy = [config_key(p.config) for p in pending]
    e = min(entries, key=lambda x: busy.count(config_key(x.config)))  # first on ties
    return Proposal(dict(e.config), 1, "confirm", {EARLY: True})


def more(strategy: Strategy, history: Sequence[Observation], pending: Sequence[Proposal]
         ) -> list[Proposal]:
    """A freed slot's run while `pending` are in flight, before the race proper: a search
    run while fewer than `search_slots` are in flight (and the search has runs left),
    else an early race run (`early_run`); when the race over the finished runs is decided,
    a search run from the race's runs (as a decided race hands them back), all but the
    last whole round of `width`, which the race proper keeps (`Strategy.search_more`)."""
    if sum(p.phase in ("screen", "tune") for p in pending) < search_slots(strategy.width):
        got = strategy.search_more(history, pending)
        if got:
            return got
    e = early_run(strategy, history, pending)
    if e is not None:
        return [e]
    return strategy.search_more(history, pending, spare=decided(strategy, history))


def fill(strategy: Strategy, history: Sequence[Observation], out: list[Proposal]
         ) -> list[Proposal]:
    """`out` (what an ask with nothing in flight proposes) topped up to the strategy's
    `width`: a lone search run gets N - 1 companions (`more`: search runs up to
    `search_slots`, then early race runs; the first search ask after the screening, N
    search runs), within the budget and, before the confirmation has started, outside
    the runs it keeps; a race round
    that leaves slots free (its leader alone, `race_runs`) gets them once the race has
    begun. A race's round is spread over the slots where it is made
    (`Strategy.race_round`); a screening and a fixed confirmation's repetitions are
    batches already (a fixed confirmation ends the tuning: nothing is searched beside
    it)."""
    width = strategy.width
    if width <= 1 or not out:
        return out
    first = any(p.phase == "confirm" for p in out) and not raced(history)
    spare = first and decided(strategy, history)
    if first and not spare:
        return out  # the first round: the switch to confirmation keeps its runs
    out = list(out)
    n = sum(p.repetitions for p in out)
    while n < width:
        # before the race proper, at most `search_slots` search runs, then early race runs
        got = more(strategy, history, out) if not raced([*history, *out]) else \
            strategy.search_more(history, out, spare=spare)
        if not got:
            break
        out += got
        n += sum(p.repetitions for p in got)
    return out


#: The background import started by `warm_up` (one per process).
_WARMING: list[threading.Thread] = []


def warm_up() -> None:
    """Import the race's statistics (tune/racing.py: scipy.stats, about 1 s of CPU, far more
    on a loaded machine) in a background thread, once. Called while runs are in flight
    (`Strategy.ask_more`), so the first race round, which waits for every run to finish,
    does not also wait for the import with every slot idle; a parallel executor's workers
    were forked at its first run, so no fork copies the import half done."""
    if _WARMING or "storlab.tune.racing" in sys.modules:
        return
    t = threading.Thread(target=importlib.import_module, args=("storlab.tune.racing",),
                         name="storlab-warm-up", daemon=True)
    _WARMING.append(t)
    t.start()


__all__ = ["EARLY", "decided", "early_run", "early_spent", "fill", "more", "race_runs", "raced",
           "rounded", "search_slots", "spread", "warm_up"]

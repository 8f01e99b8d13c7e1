"""How a tuning keeps N runs in flight (`--executor parallel:N`, a Dask scheduler).

The campaign asks the strategy for runs whenever every planned run has finished (`ask`)
and, between those, whenever a slot frees (`ask_more`, the runs in flight pending). An ask
with nothing in flight answers with a batch of N runs (`fill`), so no slot idles while
the next decision waits for finished runs:

- a search run is joined by N - 1 more, each proposed with the ones before it counted as
  measured at the incumbent's value (a constant liar: Ginsbourger, Le Riche and Carraro,
  "Kriging is well-suited to parallelize optimization", Computational Intelligence in
  Expensive Optimization Problems, 2010), so they are distinct;
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

from ..campaign.sources import Observation, Proposal

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


def fill(strategy: Strategy, history: Sequence[Observation], out: list[Proposal]
         ) -> list[Proposal]:
    """`out` (what an ask with nothing in flight proposes) topped up with search runs to
    the strategy's `width`: a lone search run gets N - 1 companions, within the budget
    and, before the confirmation has started, outside the runs it keeps; a race round
    that leaves slots free (its leader alone, `race_runs`) gets them once the race has
    begun. A race's round is spread over the slots where it is made
    (`Strategy.race_round`); a screening and a fixed confirmation's repetitions are
    batches already (a fixed confirmation ends the tuning: nothing is searched beside
    it)."""
    width = strategy.width
    if width <= 1 or not out:
        return out
    if any(p.phase == "confirm" for p in out) and \
            not any(o.phase == "confirm" for o in history):
        return out  # the first round: the switch to confirmation keeps its runs
    out = list(out)
    n = sum(p.repetitions for p in out)
    while n < width:
        more = strategy.search_more(history, out)
        if not more:
            break
        out += more
        n += sum(p.repetitions for p in more)
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


__all__ = ["fill", "race_runs", "rounded", "spread", "warm_up"]

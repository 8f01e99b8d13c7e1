"""The one run loop: hand the plan's pending runs to an executor, commit each as it
finishes, and ask the design source for more until it has nothing more, whatever the source
is (a fixed table, proposed once, has nothing more once laid out).

With one run at a time the source is asked when every run has finished; a source that
`batches` is asked again whenever a slot frees (its pending runs are those asked for and
not finished), so a parallel executor keeps N runs in flight. Each batch is saved in the
store's plan before its first run starts: a killed campaign resumes the runs that were in
flight under their own keys. The first Ctrl-C (SIGINT) stops handing out runs and returns
after the runs in flight; a second one aborts them (they stay `running` and are repeated
next time)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from .executors import make_executor
from .plan import PlannedRun, history, pending_proposals
from .sources import DesignSource, Proposal
from .store import Store
from .task import RunTask, TaskOutcome

Event = Callable[[str, dict[str, Any]], None]


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


class Plans(Protocol):
    """What the loop needs of a campaign: its plan, a run's task, and where a batch and a
    finished run go."""

    def plan(self, store: Store | None = None) -> list[PlannedRun]: ...

    def pending(self, statuses: dict[str, str], retry_failed: bool = False,
                plan: list[PlannedRun] | None = None) -> list[PlannedRun]: ...

    def task(self, r: PlannedRun) -> RunTask: ...

    def extend_plan(self, store: Store, batch: list[Proposal], runner: Any) -> None: ...

    def keep(self, store: Store, r: PlannedRun, out: TaskOutcome, runner: Any) -> None: ...


def run_loop(camp: Plans, source: DesignSource, store: Store, todo: list[PlannedRun],
             executor: str | None, summary: RunSummary, emit: Event, stop: threading.Event,
             runner: Any) -> None:
    """Run what is planned, then ask the source for more, until it has nothing more."""
    queue = list(todo)
    by_key = {r.key: r for r in todo}

    def grow(batch: list[Proposal]) -> None:
        camp.extend_plan(store, batch, runner)
        fresh = [r for r in camp.plan(store) if r.key not in by_key]
        new = camp.pending(store.statuses(), False, fresh)
        by_key.update((r.key, r) for r in new)
        queue.extend(new)

    if not queue and not getattr(source, "batches", False):
        # asked before an executor starts: with nothing more (a table laid out, a finished
        # search), none is started; a source that batches is asked once the width is known
        first = source.ask(history(store))
        if not first:
            return
        grow(first)
    ex = make_executor(executor)
    batches = bool(getattr(source, "batches", False)) and ex.width > 1
    if batches:  # its asks with nothing in flight fill the slots
        source.width = ex.width  # type: ignore[attr-defined]
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
                yield camp.task(queue.pop(0))
                continue
            busy = bool(started - finished)
            if busy and (not batches or planned_at == len(by_key)):
                yield None  # asked when every run has finished, or the plan grew
                continue
            if batches and planned_at != len(by_key):
                # told in the plan's order even when the runs in flight have all finished
                # (a resumed batch starts together and its oldest may finish last): the
                # newest N - 1 are pending, as when the oldest finished first
                told = pending_proposals(camp.plan(store), store, ex.width)
                if told is None:  # an older run is still in flight
                    yield None
                    continue
                batch = source.ask(*told)  # type: ignore[call-arg]
                if not batch:  # not with these runs pending: ask once all finished
                    planned_at = len(by_key)
                    if not busy:
                        continue
            else:
                batch = source.ask(history(store))
            if not batch:
                if busy:
                    yield None  # more once a run in flight has finished
                    continue
                return
            grow(batch)

    for out in ex.run(feed(), on_submit, stop.is_set):
        finished.add(out.key)
        r = by_key[out.key]
        camp.keep(store, r, out, runner)
        if not r.warmup:
            summary.ran += 1
            if out.result.ok:
                summary.ok += 1
            else:
                summary.failed += 1
                summary.failures.append(out.key)
        emit("run", {"key": out.key, "warmup": r.warmup, "result": out.result,
                     "config": r.config, "host": out.host})


def install_sigint(stop: threading.Event, emit: Event) -> Any:
    """The first Ctrl-C sets `stop` (and says so); a second one aborts."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        emit("stopping", {})

    return signal.signal(signal.SIGINT, handler)


def restore_sigint(old: Any) -> None:
    if old is not None:
        signal.signal(signal.SIGINT, old)

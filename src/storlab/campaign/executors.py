"""Executors: where runs execute. The store has a single writer, the campaign process; an
executor only hands tasks out and gives outcomes back, in completion order.

- `sequential` (default): one run at a time in this process; benchmarks on one device must
  not overlap.
- `parallel[:N]`: N local worker processes, for independent targets.
- `dask://host:port`: each run goes to a Dask worker (a load host) of a running scheduler.

Every run executes through `execute`: its programs carry the run's tag (so a later resume
can find what a killed storlab left running) and die with the thread that started them.
Local worker processes die with the campaign process (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import socket
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Protocol

from .. import _proc_lifetime
from ..errors import StorlabError
from ..fileio import temporary_directory
from .runners import TAG_ENV, run_tag, tail
from .runners.base import RunResult
from .spec import CampaignError
from .task import RunTask, TaskOutcome, execute_task

Submit = Callable[[RunTask], None]
Stop = Callable[[], bool]
_END = object()


class Executor(Protocol):
    """Runs tasks; calls `on_submit` just before each task starts, stops handing out new
    tasks once `stop()` is true, and yields outcomes as they finish. The task iterable is
    read lazily, one task per free slot: an adaptive campaign proposes the next run when a
    slot frees. It may yield `None` ("nothing to hand out until a run in flight finishes"),
    never while nothing is in flight."""

    width: int

    def run(self, tasks: Iterable[RunTask | None], on_submit: Submit, stop: Stop
            ) -> Iterator[TaskOutcome]: ...


def execute(task: RunTask) -> TaskOutcome:
    """Run one task wherever the executor put it: its programs are tagged with the run's
    identity (`run_identity`; without one, its scratch directory), and anything that
    escapes the task (e.g. its scratch directory cannot be made on a full disk) fails this
    run, not the campaign."""
    try:
        with run_tag(task.tag or os.path.abspath(task.workdir)):
            return execute_task(task)
    except StorlabError as exc:  # a refusal: its one line, no traceback
        now = time.time()
        return TaskOutcome(task.key, RunResult("failed", stderr=f"storlab: {exc}",
                                               started=now, ended=now), socket.gethostname())
    except Exception as exc:
        now = time.time()
        return TaskOutcome(task.key, RunResult(
            "failed", stderr=tail(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"),
            started=now, ended=now), socket.gethostname())


class SequentialExecutor:
    """One run after the other, in this process."""

    width = 1

    def run(self, tasks: Iterable[RunTask | None], on_submit: Submit, stop: Stop
            ) -> Iterator[TaskOutcome]:
        for t in tasks:
            if stop():
                return
            if t is None:  # nothing is ever in flight here to wait for
                raise CampaignError("internal: the task feed waits with nothing in flight")
            on_submit(t)
            yield execute(t)


def _init_worker(parent: int) -> None:
    # Die with the campaign process (a SIGKILLed storlab must not leave workers that go on
    # running benchmarks); the programs a worker starts die with the worker in turn.
    _proc_lifetime.die_with_parent(parent)
    # Ctrl-C is for the campaign process: it stops handing out work and waits for the
    # runs in flight, which must not be cut short in the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _WindowedExecutor:
    """Keeps at most `width` tasks in flight so that a stop request leaves little to drain."""

    width: int

    def _submit(self, task: RunTask) -> Any: ...

    def _wait_one(self, pending: set[Any]) -> tuple[set[Any], set[Any]]: ...

    def run(self, tasks: Iterable[RunTask | None], on_submit: Submit, stop: Stop
            ) -> Iterator[TaskOutcome]:
        it = iter(tasks)
        inflight: dict[Any, RunTask] = {}
        exhausted = False
        while True:
            while not exhausted and not stop() and len(inflight) < self.width:
                t = next(it, _END)
                if t is _END:
                    exhausted = True
                    break
                if t is None:  # the feed waits for a run in flight to finish
                    if not inflight:
                        raise CampaignError("internal: the task feed waits with nothing "
                                            "in flight")
                    break
                on_submit(t)
                inflight[self._submit(t)] = t
            if not inflight:
                return
            done, _ = self._wait_one(set(inflight))
            for f in done:
                task = inflight.pop(f)
                try:
                    yield f.result()
                except Exception as exc:  # a lost worker fails this run, not the campaign
                    now = time.time()
                    yield TaskOutcome(task.key, RunResult(
                        "failed", stderr=f"executor: {type(exc).__name__}: {exc}",
                        started=now, ended=now), "")


class ParallelExecutor(_WindowedExecutor):
    """N local processes (concurrent.futures), for runs on independent targets."""

    def __init__(self, workers: int | None = None) -> None:
        self.width = workers or os.cpu_count() or 2
        # Workers are forked by the thread that submits (the one running the campaign loop,
        # which outlives them: `run` shuts the pool down before it returns), so their
        # parent-death signal fires exactly when the campaign process dies.
        self.pool = ProcessPoolExecutor(self.width, initializer=functools.partial(
            _init_worker, os.getpid()))

    def _submit(self, task: RunTask) -> Future[TaskOutcome]:
        return self.pool.submit(execute, task)

    def _wait_one(self, pending: set[Any]) -> tuple[set[Any], set[Any]]:
        done, rest = wait(pending, return_when=FIRST_COMPLETED)
        return set(done), set(rest)

    def run(self, tasks: Iterable[RunTask | None], on_submit: Submit, stop: Stop
            ) -> Iterator[TaskOutcome]:
        try:
            yield from super().run(tasks, on_submit, stop)
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


#: The mutual-TLS credentials (`distributed.security.Security`) of the Dask clusters this
#: process started (`local_dask_cluster`), by the scheduler's `host:port`: a client of
#: one connects with them; a scheduler storlab did not start is reached as given.
_SECURITY: dict[str, Any] = {}


@contextlib.contextmanager
def local_dask_cluster(workers: int | None) -> Iterator[str]:
    """A local Dask cluster (worker processes) for this process, as `host:port`. Its
    scheduler listens on 127.0.0.1 with distributed's mutual TLS
    (`Security.temporary()`: a CA and certificate made in memory for this cluster, never
    written): a client without that certificate, say a program of a run reaching the
    scheduler over the host's network, is refused at the handshake, so no one else can
    submit code to run as storlab's user.

    Its scratch space is a new private directory (`mkdtemp`: 0700, made with O_EXCL
    semantics), removed afterwards: distributed's default, `<tmp>/dask-scratch-space`,
    is a fixed name in a shared directory that it accepts whoever made it, and it puts
    that directory first on `sys.path` of this process and the workers, so another
    user's `distributed/__init__.py` there would run as storlab's user. The config key
    `temporary-directory` (what every other Dask server here defaults to) points there
    too while the cluster lives. Raises OSError when it cannot start."""
    import dask
    from distributed import LocalCluster
    from distributed.security import Security

    sec = Security.temporary()
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(temporary_directory("storlab-dask-"))
        stack.enter_context(dask.config.set({"temporary-directory": scratch}))
        cluster = stack.enter_context(LocalCluster(
            n_workers=workers or None, processes=True, protocol="tls", host="127.0.0.1",
            dashboard_address=None, security=sec, local_directory=scratch))
        where = cluster.scheduler_address.split("://", 1)[1]
        _SECURITY[where] = sec
        try:
            yield where
        finally:
            _SECURITY.pop(where, None)


class DaskExecutor(_WindowedExecutor):
    """Runs on the workers of a Dask scheduler; results return to this (the writing)
    process. `width` defaults to the workers' total threads."""

    def __init__(self, address: str, width: int | None = None) -> None:
        from distributed import Client

        from ..clusters.dask_tls import client_security, scheduler_address

        where = address.split("://", 1)[-1]
        sec = _SECURITY.get(where)
        if sec is not None:  # a cluster this process started: its TLS
            address = "tls://" + where
        else:  # the user's: Dask's TLS configuration; plain TCP refused as root
            try:
                address = scheduler_address(address)
            except ValueError as exc:
                raise CampaignError(str(exc)) from None
            sec = client_security()
        try:
            self.client = Client(address, timeout=30, security=sec)
        except OSError as exc:
            raise CampaignError(f"cannot reach the Dask scheduler at {address} ({exc})") from None
        threads = sum(self.client.nthreads().values())
        self.width = width or max(1, threads)

    def _submit(self, task: RunTask) -> Any:
        # pure=False: a repeated configuration is a new measurement, never a cached result.
        return self.client.submit(execute, task, pure=False, key=f"storlab-{task.key}-"
                                  f"{os.urandom(4).hex()}")

    def _wait_one(self, pending: set[Any]) -> tuple[set[Any], set[Any]]:
        from distributed import wait as dwait

        res = dwait(list(pending), return_when="FIRST_COMPLETED")
        return set(res.done), set(res.not_done)

    def run(self, tasks: Iterable[RunTask | None], on_submit: Submit, stop: Stop
            ) -> Iterator[TaskOutcome]:
        try:
            it = iter(tasks)
            first = next(it, None)
            if first is None:
                return
            self._reap(first.tag.partition("/")[0] if first.tag
                       else os.path.dirname(os.path.abspath(first.workdir)))
            yield from super().run(itertools.chain([first], it), on_submit, stop)
        finally:
            self.client.close()

    def _reap(self, owner: str) -> None:
        """A killed campaign process leaves its runs going on the workers (a Dask worker
        finishes a task whose client is gone): kill them on every worker first, as the
        campaign process does on its own host, so that no run is measured twice at once."""
        for worker, left in self.client.run(reap_leftovers, owner).items():
            if left:
                raise CampaignError(
                    f"Dask worker {worker}: process {left[0]} left by an earlier storlab run of "
                    "this campaign survived SIGKILL; wait until it is gone, then run again")


def reap_leftovers(owner: str) -> list[str]:
    """Kill the processes on this host started for runs of the campaign `owner` (its
    `campaign_identity`: tags `<owner>/<key>`); those that survive SIGKILL, as
    `pid (command)`."""
    left = _proc_lifetime.kill_and_wait(_proc_lifetime.tagged(TAG_ENV, owner))
    return [f"{p.pid} ({p.command[:60]})" for p in left]


def requested_width(spec: str | None) -> int | None:
    """The N of `parallel:N` (None for any other executor, or a malformed N, which
    `make_executor` refuses)."""
    n = (spec or "").strip().partition("parallel:")[2]
    given = (spec or "").strip().startswith("parallel:")
    return int(n) if given and n.isascii() and n.isdigit() else None  # `²`: int() refuses


#: How an executor spec naming a Dask scheduler's address starts (`DaskExecutor`).
DASK_PREFIXES = ("dask://", "tcp://", "tls://")


def make_executor(spec: str | None) -> Executor:
    """`sequential`, `parallel`, `parallel:N`, or `dask://host:port`."""
    spec = (spec or "sequential").strip()
    if spec in ("sequential", "local"):
        return SequentialExecutor()
    if spec == "parallel" or spec.startswith("parallel:"):
        n = spec.partition(":")[2]
        if n and not (n.isascii() and n.isdigit() and int(n) > 0):
            raise CampaignError(f"executor {spec!r}: parallel:N needs a positive N")
        return ParallelExecutor(int(n) if n else None)
    if spec.startswith(DASK_PREFIXES):
        return DaskExecutor(spec)
    raise CampaignError(f"executor {spec!r} must be sequential, parallel[:N] or "
                        "dask://host:port")

"""The progress display every command that executes runs shares (run, tune, confirm): a rich
bar on a terminal, one line per finished run otherwise, nothing with --quiet/--json; and
the campaign lock's messages (waiting, stale lock taken over, leftovers killed).
`task_progress` is the same bar for long commands that run no campaign (report,
importance-eval, simulate --calibrate)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import terminal_safe
from ._common import SafeConsole, console

# Headline metrics for the progress bar's "last result", first one present wins.
PROGRESS_METRICS = ("total_iops", "iops", "transactions_per_s", "reads_per_s", "total_bw_bytes")

Event = Callable[[str, dict[str, Any]], None]


def headline(metrics: dict[str, Any], prefer: tuple[str, ...] = ()) -> str:
    for k in (*prefer, *PROGRESS_METRICS, *sorted(metrics)):
        v = metrics.get(k)
        if isinstance(v, (int, float)) and math.isfinite(v):
            return f"{k}={v:.4g}"
    return ""


def _why(stderr: str) -> str:
    """A failed run in one short line: the program's own last line first."""
    from ..campaign.runners import failure_lines

    lines = failure_lines(stderr, 2)
    text = " / ".join(lines)
    return text if len(text) <= 100 else text[:99] + "…"


@contextmanager
def campaign_progress(name: str, quiet: bool = False, json_out: bool = False,
                      prefer: tuple[str, ...] = ()) -> Iterator[Event]:
    """Yield the `on_event` callback for `Campaign.run`; `prefer` names the metrics to show
    first (a tuning campaign's objectives)."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    show = not (quiet or json_out) and sys.stderr.isatty()
    talk = not (quiet or json_out)
    # the campaign's name and the last run's stderr are data: no markup, no control bytes
    progress = Progress(TextColumn("{task.description}", style="bold", markup=False),
                        BarColumn(),
                        MofNCompleteColumn(), TextColumn("failed {task.fields[failed]}"),
                        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                        TextColumn("{task.fields[last]}", markup=False), disable=not show,
                        console=console if show else None, transient=False)
    state: dict[str, Any] = {"task": None, "failed": 0}

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "start":
            state["task"] = progress.add_task(terminal_safe(name), total=data["planned"],
                                              completed=data["done"], failed=0, last="")
            if talk:
                print(terminal_safe(f"{name}: {data['planned']} runs planned, "
                                    f"{data['done']} done, store {data['store']}"),
                      file=sys.stderr)
        elif kind == "run":
            res = data["result"]
            if data["warmup"]:
                progress.update(state["task"],
                                last=terminal_safe(f"warm-up {data['key']} {res.status}"))
                return
            if not res.ok:
                state["failed"] += 1
            last = terminal_safe(f"{data['key']} {res.status} "
                                 + (headline(res.metrics, prefer) if res.ok
                                    else _why(res.stderr)))
            progress.update(state["task"], advance=1, failed=state["failed"], last=last)
            if not show and talk:
                print(f"  {last}", file=sys.stderr)
        elif kind == "waiting":
            print(terminal_safe(f"waiting for {data['holder']} to finish with "
                                f"{data['store']} ..."), file=sys.stderr)
        elif kind == "takeover":
            print(terminal_safe(f"taking over the lock of {data['store']} left by "
                                f"{data['holder']}, which is no longer running"),
                  file=sys.stderr)
        elif kind == "leftovers":
            procs = ", ".join(f"{pid} ({cmd[:40]})" for pid, cmd in data["processes"][:5])
            print(terminal_safe(f"killing {len(data['processes'])} process(es) left running "
                                f"for run(s) {', '.join(data['runs'])} by an earlier, "
                                f"killed storlab: {procs}"), file=sys.stderr)
        elif kind == "stopping":
            print("\nstopping after the current run (Ctrl-C again to abort it)",
                  file=sys.stderr)

    with progress:
        yield on_event


Step = Callable[..., None]


@contextmanager
def task_progress(name: str, total: int | None = None, quiet: bool = False
                  ) -> Iterator[Step]:
    """Yield `step(label, advance=1, total=None)` for a long command: on a terminal a rich
    bar on stderr (done/total, elapsed, ETA, what it is doing), removed when done; nothing
    when stderr is not a terminal or with quiet (--json), so piped output stays the
    command's own."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    show = not quiet and sys.stderr.isatty()
    if not show:
        yield lambda *a, **k: None
        return
    progress = Progress(TextColumn("{task.description}", style="bold", markup=False),
                        BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("ETA"), TimeRemainingColumn(),
                        TextColumn("{task.fields[label]}", markup=False),
                        console=SafeConsole(stderr=True, emoji=False),  # a:b: in labels
                        transient=True)
    task = progress.add_task(terminal_safe(name), total=total, label="")

    def step(label: str = "", advance: float = 1, total: int | None = None) -> None:
        if total is not None:
            progress.update(task, total=total)
        progress.update(task, advance=advance, label=terminal_safe(label))

    with progress:
        yield step

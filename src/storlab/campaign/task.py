"""One run as a self-contained, picklable task: what an executor ships to a worker (a local
process or a Dask worker on a load host). The worker runs the setup steps, the runner and
the teardown steps; the outcome goes back to the campaign process, the store's only writer."""

from __future__ import annotations

import shutil
import socket
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .runners import (ShellTemplateError, make_runner, render_argv, run_program, shell_command,
                      tail)
from .runners.base import RunResult


@dataclass
class StepSpec:
    """A setup/teardown step as plain data (argv template list, or a shell string)."""

    run: list[str] | str
    shell: bool = False
    timeout: float | None = None
    ignore_errors: bool = False


@dataclass
class RunTask:
    key: str
    config: dict[str, Any]
    runner_type: str
    runner_options: dict[str, Any]
    values: dict[str, Any]  # factors + vars + bookkeeping, for the steps' templates
    workdir: str
    exclude: list[str] = field(default_factory=list)
    setup: list[StepSpec] = field(default_factory=list)
    teardown: list[StepSpec] = field(default_factory=list)
    timeout: float | None = None
    keep_scratch: bool = False


@dataclass
class TaskOutcome:
    key: str
    result: RunResult
    host: str


def run_step(step: StepSpec, values: dict[str, Any], cwd: Path, timeout: float | None
             ) -> tuple[bool, str, int | None]:
    """Run one step; (succeeded, message, exit code). Values become whole argv elements;
    with `shell: true` they reach the shell through the environment (STORLAB_<NAME>), never
    as command text (see `shell_command`)."""
    env: dict[str, str] | None = None
    if step.shell:
        try:
            argv: list[str] | str
            argv, env = shell_command(str(step.run), values)
        except ShellTemplateError as exc:
            return False, f"step `{step.run}`: {exc}", None
    else:  # a `sh -c SCRIPT` step gets its values in the script as a shell step does
        try:
            argv, env = render_argv(step.run, values)
        except ShellTemplateError as exc:
            return False, f"step `{' '.join(step.run)}`: {exc}", None
    out = run_program(argv, cwd=cwd, timeout=step.timeout or timeout, shell=step.shell,
                      env=env)
    shown = argv if isinstance(argv, str) else " ".join(argv)
    if out.timed_out:
        return False, f"step `{shown}` timed out\n{out.stderr}", out.exit_code
    if out.exit_code != 0:
        return False, f"step `{shown}` exited {out.exit_code}\n{out.stderr}", out.exit_code
    return True, "", 0


def execute_task(task: RunTask) -> TaskOutcome:
    """Setup, run, teardown in the run's own scratch directory. Never raises for a failed
    benchmark: the failure (with its stderr) is the outcome."""
    started = time.time()
    workdir = Path(task.workdir)
    if workdir.exists():  # left over by a killed attempt
        shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)
    values = {**task.values, "workdir": str(workdir)}
    result: RunResult | None = None
    for step in task.setup:
        ok, msg, code = run_step(step, values, workdir, task.timeout)
        if not ok and not step.ignore_errors:
            result = RunResult("failed", stderr=tail(f"setup: {msg}"), exit_code=code,
                               started=started, ended=time.time())
            break
    if result is None:
        cfg = {k: v for k, v in task.config.items() if k not in task.exclude}
        try:
            runner = make_runner(task.runner_type, task.runner_options)
            result = runner.run(cfg, workdir, task.timeout)
        except Exception as exc:  # a runner bug or refusal fails this run, not the campaign
            result = RunResult("failed", stderr=tail(f"{type(exc).__name__}: {exc}\n"
                                                     f"{traceback.format_exc()}"),
                               started=started, ended=time.time())
    for step in task.teardown:
        ok, msg, code = run_step(step, values, workdir, task.timeout)
        if not ok and not step.ignore_errors:
            result.stderr = tail(f"{result.stderr}\nteardown: {msg}")
            if result.ok:  # the system may be left in an unknown state: do not trust it
                result.status = "failed"
                result.exit_code = code
    if result.ok and not task.keep_scratch:
        shutil.rmtree(workdir, ignore_errors=True)
    return TaskOutcome(task.key, result, socket.gethostname())

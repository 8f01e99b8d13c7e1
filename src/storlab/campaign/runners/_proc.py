"""Running one program for a runner: argv lists (never a shell unless asked), a timeout that
kills the whole process group, and `{name}` substitution of values into argv elements."""

from __future__ import annotations

import functools
import math
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._process import guard_child

#: How much of stderr a run keeps (the tail is where programs say what went wrong).
STDERR_TAIL = 4000

_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_.]*)\}")


class SubstitutionError(KeyError):
    """A `{name}` in a template names no factor or variable."""


def render_value(value: Any) -> str:
    """A configuration value as program text: 4096.0 -> "4096", True -> "1", numpy -> plain."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)


def substitute(template: str, values: Mapping[str, Any], quote: bool = False) -> str:
    """Replace each `{name}` in `template` by its value (`{{`/`}}` escape braces).

    The result is one string: used as one argv element, a value holding spaces or `; rm -rf x`
    stays one literal argument. `quote=True` shell-quotes values (for `shell: true` steps).
    """

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        name = m.group(1)
        if name not in values:
            raise SubstitutionError(name)
        text = render_value(values[name])
        return shlex.quote(text) if quote else text

    return _FIELD.sub(repl, template)


def template_names(template: str) -> set[str]:
    """The `{name}` fields a template uses."""
    return {m.group(1) for m in _FIELD.finditer(template) if m.group(1)}


#: Environment variable naming the run a program was started for (its scratch directory).
#: Inherited by everything the program starts, so a resume can find and kill what a killed
#: storlab left running for its runs, even processes that left the process group.
TAG_ENV = "STORLAB_RUN"
_RUN_TAG: ContextVar[str | None] = ContextVar("storlab_run_tag", default=None)


@contextmanager
def run_tag(tag: str) -> Iterator[None]:
    """Programs started inside carry `STORLAB_RUN=tag` in their environment."""
    token = _RUN_TAG.set(tag)
    try:
        yield
    finally:
        _RUN_TAG.reset(token)


@dataclass
class ProcOutcome:
    """What one program run gave back."""

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    started: float
    ended: float


def run_program(argv: Sequence[str] | str, *, cwd: str | os.PathLike[str] | None = None,
                timeout: float | None = None, env: Mapping[str, str] | None = None,
                shell: bool = False, stdin_text: str | None = None) -> ProcOutcome:
    """Run `argv` (a list; a string only with `shell=True`) and collect its output.

    The child gets its own session so a terminal Ctrl-C reaches storlab only (it stops
    cleanly after the current run instead of cutting the benchmark short), and so a timeout
    can kill the program together with anything it started. It dies with storlab, together
    with everything it started (a guard process, see `_process.guard_child`: the parent-death
    signal is tied to the calling thread, which always waits here for the child, so it fires
    when storlab dies), and it carries the run's tag (`run_tag`).
    """
    if shell and not isinstance(argv, str):
        argv = " ".join(shlex.quote(a) for a in argv)
    if not shell and isinstance(argv, str):
        raise TypeError("argv must be a list unless shell=True")
    full_env = None
    tag = _RUN_TAG.get()
    if env or tag:
        full_env = dict(os.environ)
        full_env.update({k: str(v) for k, v in (env or {}).items()})
        if tag:
            full_env[TAG_ENV] = tag
    started = time.time()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=full_env, shell=shell, text=True,
                                stdin=subprocess.PIPE if stdin_text is not None else
                                subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, errors="replace",
                                preexec_fn=functools.partial(guard_child, os.getpid()))
    except OSError as exc:  # program missing or not executable: a failed run, not a crash
        return ProcOutcome("", f"cannot start {argv!r}: {exc}", None, False, started, time.time())
    timed_out = False
    try:
        out, err = proc.communicate(stdin_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, err = proc.communicate()
    except BaseException:  # KeyboardInterrupt (second Ctrl-C) or a kill: leave no orphan
        _kill_group(proc)
        proc.wait()
        raise
    return ProcOutcome(out or "", err or "", proc.returncode, timed_out, started, time.time())


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """Kill the program, its process group and every descendant: fio's job processes
    leave the group (they call setsid), so the group alone would leave them running."""
    victims = _descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _descendants(root: int) -> list[int]:
    """All processes below `root`, from /proc (Linux); empty elsewhere."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: parse after the last ')'.
        fields = data[data.rfind(b")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(e))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def tail(text: str, n: int = STDERR_TAIL) -> str:
    """The last `n` characters of `text`."""
    return text if len(text) <= n else text[-n:]

"""Process identity and lifetime helpers shared by the campaign machinery and the cluster
bring-ups (Linux /proc and prctl; elsewhere they degrade to "unknown" and no-ops).

A process is identified by its pid *and* its start time (field 22 of /proc/PID/stat, in clock
ticks since boot), so that a recycled pid is never mistaken for the process we knew.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _resolve_prctl():  # type: ignore[no-untyped-def]
    # Resolved once in the parent: the child between fork and exec must not dlopen (another
    # thread of the parent may have held the loader's lock at fork time).
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _resolve_prctl()


def die_with_parent(parent: int | None = None) -> None:
    """In a child (a `preexec_fn`): SIGKILL when the thread that started it dies (Linux
    PR_SET_PDEATHSIG, kept across exec). `parent`: the starting process's pid; if it already
    died before the prctl took effect the child exits at once instead of running orphaned."""
    if _PRCTL is None:
        return
    _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def guard_child(parent: int) -> None:
    """A `preexec_fn` that puts a guard between the caller and the program, so that the
    program *and everything it starts* dies with the caller.

    A parent-death signal on the program alone is not enough: programs fork workers that
    leave the process group (fio's job processes call setsid), and such grandchildren get no
    signal when storlab dies (one fio kept writing after a SIGKILLed `storlab run`). Here the
    forked child stays a guard and never execs: it gets SIGTERM when the caller's thread dies,
    is a child subreaper (orphaned descendants stay below it, wherever they went), and on that
    signal SIGKILLs its whole tree. Its own child returns from this function and execs the
    program. The guard mirrors the program's exit status, so the caller sees the program's.
    It costs one fork, no exec. Linux only; elsewhere nothing is done.
    """
    if _PRCTL is None:
        return
    sigs = {signal.SIGTERM, signal.SIGCHLD}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the caller died before the prctl: nothing to run for
        os._exit(1)
    _PRCTL(PR_SET_CHILD_SUBREAPER, 1)
    guard = os.getpid()
    pid = os.fork()
    if pid == 0:  # the program: back to the caller's signal mask, dies with its guard
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        _PRCTL(PR_SET_CHILD_SUBREAPER, 0)
        die_with_parent(guard)
        return  # subprocess execs the program now
    try:
        _guard(pid, sigs)
    finally:
        os._exit(255)


def _guard(pid: int, sigs: set[signal.Signals]) -> None:
    # Hold no pipe open (the caller reads the program's output to EOF) and no inherited fd.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, 65536)
    while True:
        info = signal.sigtimedwait(sigs, 0.5)  # timed: works even if SIGCHLD is ignored
        if info is not None and info.si_signo == signal.SIGTERM:
            for p in descendants(os.getpid()):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            os._exit(128 + signal.SIGTERM)
        while True:  # reap: the program, and orphans handed to us as subreaper
            try:
                done, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                os._exit(255)
            if done == 0:
                break
            if done == pid:
                _exit_like(status)


def _exit_like(status: int) -> None:
    """Exit with the program's status: its code, or death by its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:  # SIGKILL and SIGSTOP have no handler to reset
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def descendants(root: int) -> list[int]:
    """Every process below `root` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{e}/stat", os.O_RDONLY)
            try:
                data = os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(e))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (fields 3.. of proc(5)), or None
    if the process does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: parse after the last ')'.
    fields = data[data.rfind(b")") + 2:].split()
    return fields if len(fields) > 19 else None


def start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), or None if it does not exist or is
    a zombie (a zombie runs nothing: for our purposes it is gone)."""
    fields = stat_fields(pid)
    if fields is None or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def alive(pid: int, start: int | None) -> bool:
    """The process `pid` that started at `start` still runs (same pid AND same start time;
    `start=None` accepts any start time)."""
    now = start_time(pid)
    return now is not None and (start is None or now == start)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass(frozen=True)
class Proc:
    pid: int
    start: int
    tag: str
    command: str


def tagged(env_name: str, prefix: str) -> list[Proc]:
    """Live processes whose environment holds `env_name` = `prefix` or `prefix/...`.

    Children inherit their parent's environment, so this finds every descendant of a process
    that was started with the tag, also those that left its process group (setsid, daemons).
    """
    want = f"{env_name}=".encode()
    out = []
    me = os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for e in entries:
        if not e.isdigit() or int(e) == me:
            continue
        pid = int(e)
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read()
        except OSError:  # gone, or a kernel thread
            continue
        for item in env.split(b"\0"):
            if item.startswith(want):
                value = item[len(want):].decode("utf-8", "replace")
                if value == prefix or value.startswith(prefix.rstrip("/") + "/"):
                    st = start_time(pid)
                    if st is not None:
                        out.append(Proc(pid, st, value, cmdline(pid)))
                break
    return out


def kill_and_wait(procs: Iterable[Proc], timeout: float = 10.0) -> list[Proc]:
    """SIGKILL each process (and its process group when it leads one); wait until they are
    gone. Returns those still alive after `timeout` (e.g. stuck in uninterruptible I/O)."""
    procs = list(procs)
    for p in procs:
        if not alive(p.pid, p.start):  # exited, or the pid was recycled: not ours to kill
            continue
        try:
            if os.getpgid(p.pid) == p.pid:
                os.killpg(p.pid, signal.SIGKILL)
            os.kill(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + timeout
    left = procs
    while True:
        left = [p for p in left if alive(p.pid, p.start)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)

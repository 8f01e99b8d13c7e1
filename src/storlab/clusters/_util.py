"""Process plumbing shared by the cluster bring-ups: argv-only commands with a timeout,
daemons tracked by PID file and stopped by PID, bounded waits that end with the log's tail."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._process import die_with_parent
from ..errors import ClusterError

#: Where clusters live unless told otherwise (one subdirectory per kind).
DEFAULT_BASE = Path(os.environ.get("STORLAB_CLUSTER_DIR", "/tmp/storlab-clusters"))
LOG_TAIL_LINES = 25


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of a log file ('' if there is none)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def run(argv: Sequence[str], *, timeout: float = 60, check: bool = True,
        env: Mapping[str, str] | None = None, input_text: str | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command (argv list, no shell); raise ClusterError with its stderr on failure."""
    full_env = None if env is None else {**os.environ, **env}
    try:
        cp = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                            env=full_env, input=input_text, cwd=cwd, errors="replace")
    except FileNotFoundError:
        raise ClusterError(f"{argv[0]}: command not found (run scripts/sysdeps.sh as root "
                           "to install the cluster packages)") from None
    except subprocess.TimeoutExpired:
        raise ClusterError(f"`{' '.join(argv)}` did not finish within {timeout:g} s") from None
    if check and cp.returncode != 0:
        msg = (cp.stderr.strip() or cp.stdout.strip()).splitlines()[-5:]
        raise ClusterError(f"`{' '.join(argv)}` exited {cp.returncode}: " + " | ".join(msg))
    return cp


class Daemon:
    """One long-running program, started in its own session with output to a log, its PID
    in a file. The command line is recorded so that a recycled PID is never killed."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, pidfile: Path,
                 env: Mapping[str, str] | None = None, user: str | None = None,
                 tie_to_parent: bool = False) -> None:
        self.name, self.argv, self.log, self.pidfile = name, list(argv), log, pidfile
        self.env, self.user, self.tie_to_parent = env, user, tie_to_parent
        # Kept so that its exit status stays ours: a dropped Popen of a running child is
        # reaped by the subprocess module's clean-up at the next Popen, status and all.
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> int:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.pidfile.parent.mkdir(parents=True, exist_ok=True)
        full_env = None if self.env is None else {**os.environ, **self.env}
        with open(self.log, "ab") as out:
            try:
                # cwd: the daemon's own directory, never the caller's (ceph-mon was seen
                # exiting silently with status 1 in one caller's directory)
                p = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     cwd=self.pidfile.parent,
                                     env=full_env, user=self.user,
                                     preexec_fn=_die_with_parent if self.tie_to_parent
                                     else None)
            except FileNotFoundError:
                raise ClusterError(f"{self.argv[0]}: command not found (run "
                                   "scripts/sysdeps.sh as root)") from None
        self.pidfile.write_text(f"{p.pid}\n{self.argv[0]}\n")
        self.proc = p
        return p.pid

    def alive(self) -> bool:
        return pid_alive(self.pidfile)

    def check_alive(self) -> None:
        """Raise with the log's tail if the daemon has exited."""
        if not self.alive():
            how = ""
            rec = read_pid(self.pidfile)
            if self.proc is not None and rec is not None and rec[0] == self.proc.pid:
                # Seen dead in /proc, it may still be exiting: give it a moment to be reaped.
                try:
                    code = self.proc.wait(timeout=2.0)
                    how = (f" (killed by signal {-code})" if code < 0 else
                           f" (exit status {code})")
                except subprocess.TimeoutExpired:
                    pass
            elif rec is not None:
                try:  # our own child: its exit status says how it ended
                    pid, status = os.waitpid(rec[0], os.WNOHANG)
                    if pid:
                        how = (f" (killed by signal {os.WTERMSIG(status)})"
                               if os.WIFSIGNALED(status) else
                               f" (exit status {os.WEXITSTATUS(status)})")
                except ChildProcessError:
                    pass
            tail = log_tail(self.log)
            if not tail:  # output may still be on its way (buffered stdout of a dead child)
                time.sleep(0.5)
                tail = log_tail(self.log) or "(the log is empty)"
            raise ClusterError(f"{self.name} exited during start-up{how}; last lines of "
                               f"{self.log}:\n{tail}")


def _die_with_parent() -> None:
    """In the child: SIGKILL when the process that started us dies. Test clusters use it, so
    a killed test run cannot leave daemons behind (the helper is shared with the campaign's
    runners)."""
    die_with_parent()


def read_pid(pidfile: Path) -> tuple[int, str] | None:
    try:
        lines = pidfile.read_text().split("\n")
        return int(lines[0]), (lines[1] if len(lines) > 1 else "")
    except (OSError, ValueError):
        return None


def _proc_matches(pid: int, program: str) -> bool:
    """The process `pid` exists, is not a zombie and runs `program` (guards PID reuse)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        if stat[stat.rfind(b")") + 2:].split()[0] == b"Z":
            # a zombie leader may still have threads holding locks until they exit
            return len(os.listdir(f"/proc/{pid}/task")) > 1
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().split(b"\0")
    except OSError:
        return False
    if not program:
        return True
    base = os.path.basename(program).encode()
    # Python daemons (swift) show the interpreter first, the script second.
    return any(os.path.basename(c) == base for c in cmd[:3])


def pid_alive(pidfile: Path) -> bool:
    rec = read_pid(pidfile)
    return rec is not None and _proc_matches(*rec)


def _reap(pid: int) -> None:
    """Collect a child we started in this process (tests start and stop in one process)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_pid(pidfile: Path, grace: float = 10.0) -> bool:
    """SIGTERM the recorded process, SIGKILL it after `grace` seconds; True if one ran."""
    rec = read_pid(pidfile)
    if rec is None or not _proc_matches(*rec):
        pidfile.unlink(missing_ok=True)
        return False
    pid, prog = rec
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(pid)
        if not _proc_matches(pid, prog):
            break
        time.sleep(0.1)
    else:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for _ in range(300):  # a process in uninterruptible I/O dies when that I/O ends
            _reap(pid)
            if not _proc_matches(pid, prog):
                break
            time.sleep(0.1)
    pidfile.unlink(missing_ok=True)
    return True


def pids_with_arg(arg: str) -> list[tuple[int, str]]:
    """(pid, program) of live processes with `arg` as one whole argument: our own daemons
    found by their config path, should a PID file have been lost (a killed test run)."""
    out = []
    want = arg.encode()
    for e in os.listdir("/proc"):
        if not e.isdigit() or int(e) == os.getpid():
            continue
        try:
            with open(f"/proc/{e}/cmdline", "rb") as fh:
                cmd = fh.read().split(b"\0")
        except OSError:
            continue
        if want in cmd and _proc_matches(int(e), ""):
            out.append((int(e), cmd[0].decode(errors="replace")))
    return out


def stop_strays(arg: str, grace: float = 10.0) -> list[int]:
    """Stop (TERM, then KILL) every process that has `arg` as an argument; their PIDs."""
    strays = pids_with_arg(arg)
    for pid, _ in strays:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    for pid, _ in strays:
        while time.monotonic() < deadline and _proc_matches(pid, ""):
            _reap(pid)
            time.sleep(0.1)
        if _proc_matches(pid, ""):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return [pid for pid, _ in strays]


def wait_until(pred: Callable[[], bool], timeout: float, what: str,
               daemons: Sequence[Daemon] = (), interval: float = 0.5) -> float:
    """Poll `pred` until true; fail fast (with the log's tail) if a daemon dies, or after
    `timeout` seconds. Returns the seconds waited."""
    t0 = time.monotonic()
    while True:
        for d in daemons:
            d.check_alive()
        try:
            if pred():
                return time.monotonic() - t0
        except ClusterError:
            pass
        if time.monotonic() - t0 > timeout:
            tails = "".join(f"\nlast lines of {d.log}:\n{log_tail(d.log, 12)}" for d in daemons)
            raise ClusterError(f"timed out after {timeout:g} s waiting for {what}{tails}")
        time.sleep(interval)


def save_state(path: Path, state: Mapping[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def load_state(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True

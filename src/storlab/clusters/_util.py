"""Process plumbing shared by the cluster bring-ups: argv-only commands with a timeout,
daemons tracked by PID file (pid and start time) and stopped by PID, bounded waits that end
with the exit status and the log's tail, the Ceph admin socket, private file modes."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import resource
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._proc_lifetime import descendants, die_with_parent, stat_fields
from ..errors import ClusterError, PortTaken, StorlabError
from ..fileio import check_trusted_dir, remove_tree, walk_resolved

LOG_TAIL_LINES = 25


def default_base() -> Path:
    """Where clusters live unless told otherwise (one subdirectory per kind):
    `$STORLAB_CLUSTER_DIR`, else `/var/lib/storlab/clusters` for root and
    `$XDG_STATE_HOME/storlab/clusters` (`~/.local/state/...`) for anyone else. Never a
    shared directory such as /tmp, where another user could plant the path first."""
    env = os.environ.get("STORLAB_CLUSTER_DIR")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/lib/storlab/clusters")
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(state) / "storlab" / "clusters"


#: The default base as this process started (`default_base()` is asked at each use).
DEFAULT_BASE = default_base()


def trusted_cluster_dir(base: str | Path | None, kind: str) -> Path:
    """`base/kind` with the base resolved (no link in it; `kind` an entry of it), once
    `check_trusted_dir` finds that no user but root or this one could change what it
    leads to or holds: storlab, often as
    root, starts daemons from the confs there, signals the processes its PID records name
    and copies its logs into messages. It may not exist yet (`up` makes it): readers ask
    `present_cluster_dir` before reading."""
    top = Path(base or default_base())
    try:
        check_trusted_dir(top / kind, "cluster directory")  # the base, `kind`, its target
        # the base's resolved path (its entries were judged just above: only root or this
        # user could change them), and `kind` kept as an entry: a link of ours there is
        # replaced by `up`, not followed into the directory it leads to
        return walk_resolved(top, lambda *_: None) / kind
    except StorlabError as exc:
        raise ClusterError(str(exc)) from None


def chmod_dir(path: str | Path, mode: int, dir_fd: int | None = None) -> None:
    """Set a directory just made to `mode` (mkdir applies the umask), never through a link."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                 dir_fd=dir_fd)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


#: How deep `give_tree` goes: each level holds one descriptor until its subtree is done,
#: and no tree storlab makes is a tenth as deep; a deeper one is refused in one line.
GIVE_DEPTH = 64


def give_tree(top: str | Path, uid: int, gid: int) -> None:
    """Give the directory `top` (0700) and all it holds to `uid:gid`, for it alone (no
    group or other bits), from held descriptors only: `top` and every subdirectory are opened
    `O_NOFOLLOW` from their parent's descriptor and each entry is changed through a
    descriptor of what was opened, so an entry swapped for a link (the tree's owner may
    write in it while this runs) is never followed, never resolved by path again, and
    never changed. Links are left as they are (none are made); a non-directory with
    more than one name (a hard link: its other name may be any file) is refused, as is
    a tree deeper than `GIVE_DEPTH` and any error of the system (one-line ClusterError,
    the tree part given)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    at = str(top)
    # the walk by hand (post-order): a stack of [descriptor, name, mode, names left]
    stack: list[tuple[int, str, int, list[str]]] = []
    try:
        stack.append((os.open(top, flags), at, 0o700, []))
        stack[-1][3].extend(os.listdir(stack[-1][0]))
        while stack:
            dfd, where, mode, names = stack[-1]
            if not names:  # all it holds is given: now the directory itself
                stack.pop()
                at = where
                try:
                    os.fchown(dfd, uid, gid)
                    os.fchmod(dfd, mode)
                finally:
                    os.close(dfd)
                continue
            name = names.pop()
            at = f"{where}/{name}"
            sub = _give_entry(dfd, at, name, uid, gid)
            if sub is None:
                continue
            if len(stack) >= GIVE_DEPTH:
                os.close(sub[0])
                raise ClusterError(f"{at}: deeper than {GIVE_DEPTH} directories; not given "
                                   "to the cluster's daemons")
            stack.append((sub[0], at, sub[1], []))
            stack[-1][3].extend(os.listdir(sub[0]))
    except OSError as exc:
        raise ClusterError(f"{at}: cannot be given to the cluster's daemons "
                           f"({exc.strerror or exc}; a link is never followed)") from None
    finally:
        for dfd, *_ in stack:
            os.close(dfd)


def _give_entry(dfd: int, where: str, name: str, uid: int, gid: int) -> tuple[int, int] | None:
    """Give the entry `name` of the directory held as `dfd` (`where`: its path, for errors)
    unless it is a directory: then (a descriptor of that very directory, the mode it is to
    get once what it holds is given). None for what was given, a link or an entry gone."""
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        return None  # removed meanwhile by the tree's owner
    try:
        st = os.fstat(fd)
        if stat.S_ISLNK(st.st_mode):
            return None
        if stat.S_ISDIR(st.st_mode):  # the directory itself, by the entry just held
            return (os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC),
                    stat.S_IMODE(st.st_mode) & 0o700)
        if st.st_nlink != 1:
            raise ClusterError(f"{where}: has {st.st_nlink} names (a hard link); "
                               "not given to the cluster's daemons")
        # an O_PATH descriptor takes no fchown/fchmod; its /proc name is that very inode
        os.chown(f"/proc/self/fd/{fd}", uid, gid)
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(st.st_mode) & 0o700)
        return None
    finally:
        os.close(fd)


def make_base(base: Path) -> None:
    """Make the missing directories of `base`, each 0755 whatever the umask (set again
    after mkdir, which applies it): under umask 002 a made base would be 0775 and the
    trust check refuse what storlab made itself. Not 0700: the Swift daemons, run as
    their own user, pass through it. One made meanwhile by another is left to the check."""
    missing = []
    while not os.path.lexists(base):
        missing.append(base)
        base = base.parent
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o755)
        except FileExistsError:
            continue
        try:
            chmod_dir(p, 0o755)
        except OSError as exc:
            raise ClusterError(f"{p}: cannot make the directory ({exc.strerror or exc})"
                               ) from None


def present_cluster_dir(d: Path) -> bool:
    """Whether the cluster directory `d` is there now, walked again by `check_trusted_dir`
    to its end (refused in one line when untrusted). What reads or signals from a cluster's
    directory (state, status, down, a run's cluster) asks this first: a directory that was
    missing when the cluster object was made (`--dir /tmp/x`) may since have been made by
    another user, and is then refused, never read."""
    try:
        check_trusted_dir(d, "cluster directory", missing_ok=False)
    except FileNotFoundError:
        return False
    except StorlabError as exc:
        raise ClusterError(str(exc)) from None
    return True


def fresh_cluster_dir(d: Path) -> None:
    """Make the cluster directory `d` anew, 0700, never through a link: its base is made
    if missing and checked again (`trusted_cluster_dir`), then opened by the path that
    check resolved (never resolved a second time); whatever is at `d`'s name there (an
    old cluster, or a link another user planted) is removed from that descriptor without
    following a link, and `d` is made in it."""
    make_base(d.parent)
    base = trusted_cluster_dir(d.parent, d.name).parent
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        bfd = os.open(base, flags)
    except OSError as exc:
        raise ClusterError(f"{d.parent}: cannot open ({exc.strerror or exc})") from None
    try:
        remove_tree(d.name, bfd)
        os.mkdir(d.name, 0o700, dir_fd=bfd)
        chmod_dir(d.name, 0o700, bfd)
    except OSError as exc:
        raise ClusterError(f"{d}: cannot make the cluster's directory "
                           f"({exc.strerror or exc})") from None
    finally:
        os.close(bfd)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of a log file ('' if there is none). Read with O_NOFOLLOW:
    a link at a log's name (to a root-only file) is never copied into a message."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device: nothing to show
            os.close(fd)
            return ""
        with os.fdopen(fd, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Walled:
    """A program made ready to start inside its walls (`walled`): start `argv` with
    `pass_fds`, the environment `env` (None: storlab's) and `preexec` in the child, then
    call `close` (the descriptors the walls bind from)."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    env: dict[str, str] | None = None
    preexec: Callable[[], None] | None = None
    close: Callable[[], None] = lambda: None
    #: False when the user opted out of the sandbox: `argv` is the program itself
    inside: bool = True


#: What builds a cluster program's walls: set by the layer that owns the sandbox
#: (`storlab.campaign.runners` registers bubblewrap's on import; this layer sits below it).
_WALLS: Callable[..., Walled] | None = None
_OPTED_OUT: Callable[[], bool] = lambda: False


def use_walls(provider: Callable[..., Walled], opted_out: Callable[[], bool]) -> None:
    """Register what `walled` builds the walls with, and what says the user opted out of
    them (`walls_opted_out`)."""
    global _WALLS, _OPTED_OUT
    _WALLS, _OPTED_OUT = provider, opted_out


def walls_opted_out() -> bool:
    """The user opted out of the sandbox (`STORLAB_UNSANDBOXED=1`): programs run as they
    are (Ceph's daemons then as root, as before the walls: the `ceph` user could not reach
    its directories in the cluster's root-only directory)."""
    return _OPTED_OUT()


def walled(program: Sequence[str], *, cwd: str, writable: Sequence[str] = (),
           readable: Sequence[str] = (), ports: Sequence[int] = (),
           unix_sockets: bool = False, daemon: bool = False, die_with_parent: bool = True,
           info_fd: int | None = None, proc_writable: bool = False,
           user: str | None = None, copies: Sequence[str] = ()) -> Walled:
    """`program` inside a sandbox: the system read-only, `writable` the only places it
    may write, `readable` shown read-only beside the system's trees, the host's network
    with TCP to and on `ports` only; a `daemon` may outlive storlab and then runs as the
    sandbox's pid 1; with `die_with_parent` it runs under bwrap's init, which dies with
    storlab and ends the namespace (a daemon changing its credentials, ceph's
    `--setuser`, loses its own parent-death signal); bwrap writes the sandbox's first
    pid to `info_fd`;
    `proc_writable`: its own processes' /proc entries writable (the kernel's stay
    read-only); `user`: it runs as that account from its start (never root, no
    capability); `copies`: files shown as read-only copies that account reads (the host's
    stay as they are: root's). Fails closed:
    no sandbox registered (`use_walls`) is an error, never a program run without walls."""
    if _WALLS is None:
        raise ClusterError(f"cannot start {program[0]}: the sandbox cluster programs run in "
                           "is not loaded (call storlab.campaign.runners.register_cluster_walls() first)")
    return _WALLS(list(program), cwd=cwd, writable=list(writable), readable=list(readable),
                  ports=tuple(ports), unix_sockets=unix_sockets, daemon=daemon,
                  die_with_parent=die_with_parent, info_fd=info_fd,
                  proc_writable=proc_writable, user=user, copies=list(copies))


def run(argv: Sequence[str], *, timeout: float = 60, check: bool = True,
        env: Mapping[str, str] | None = None, input_text: str | None = None,
        cwd: Path | None = None, walls: Walled | None = None
        ) -> subprocess.CompletedProcess[str]:
    """Run a command (argv list, no shell); raise ClusterError with its stderr on failure.
    With `walls` (`walled(argv, ...)`), what starts is the walled program.

    The command gets /dev/null as its input (`input_text` through a pipe) and a session of
    its own: never the caller's terminal, neither as its stdin nor as its controlling
    terminal. The Ceph CLI runs as the `ceph` account, which may trace it (same uid): in
    root's session with root's tty as fd 0 it had that account push bytes into root's
    terminal input (`ioctl(0, TIOCSTI)`), which root's shell ran after storlab."""
    full_env = None if env is None else {**os.environ, **env}
    try:
        if walls is not None:
            full_env = walls.env if full_env is None else {**full_env, **(walls.env or {})}
        cp = subprocess.run(walls.argv if walls is not None else list(argv),
                            capture_output=True, text=True, timeout=timeout,
                            env=full_env, input=input_text, cwd=cwd, errors="replace",
                            stdin=subprocess.DEVNULL if input_text is None else None,
                            start_new_session=True,
                            pass_fds=walls.pass_fds if walls is not None else (),
                            preexec_fn=walls.preexec if walls is not None else None)
    except FileNotFoundError:
        raise ClusterError(f"{argv[0]}: command not found (run scripts/sysdeps.sh as root "
                           "to install the cluster packages)") from None
    except subprocess.TimeoutExpired:
        raise ClusterError(f"`{' '.join(argv)}` did not finish within {timeout:g} s") from None
    except subprocess.SubprocessError:  # the child could not enter its walls
        raise ClusterError(f"{argv[0]}: could not enter its sandbox (no_new_privs or "
                           "Landlock refused); not run without it") from None
    finally:
        if walls is not None:
            walls.close()
    if check and cp.returncode != 0:
        msg = (cp.stderr.strip() or cp.stdout.strip()).splitlines()[-5:]
        raise ClusterError(f"`{' '.join(argv)}` exited {cp.returncode}: " + " | ".join(msg))
    return cp


#: A daemon's log is rotated to `<log>.1` at this size (two generations at most).
LOG_CAP_BYTES = int(os.environ.get("STORLAB_CLUSTER_LOG_CAP", 32 << 20))
_LOGCAP = Path(__file__).with_name("_logcap.py")
#: Files and directories a cluster creates are for root alone (keys, keyrings, configs with
#: credentials, the monitor's database).
PRIVATE_UMASK = 0o077


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """Create files 0600 and directories 0700 in this block (the process's umask)."""
    old = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(old)


# ------------------------------------------------------------------ process identity
RUNNING, EXITING, GONE = "running", "exiting", "gone"


def proc_start(pid: int) -> int | None:
    """Start time of `pid` (field 22 of /proc/PID/stat, clock ticks since boot), or None."""
    st = stat_fields(pid)
    return None if st is None else int(st[19])


def proc_state(pid: int, start: int | None, program: str = "") -> str:
    """RUNNING, EXITING (still in /proc holding what it held: a dying process whose memory
    is gone, shown with an empty command line, or a zombie leader whose threads still run)
    or GONE (no such process, another process with a recycled pid, or a bare zombie, which
    holds nothing). `start` None (a PID file of an older storlab): the command line must
    name `program` instead."""
    st = stat_fields(pid)
    if st is None or (start is not None and int(st[19]) != start):
        return GONE
    if st[0] in (b"Z", b"X"):
        try:
            threads = len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            return GONE
        return EXITING if threads > 1 else GONE
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read()
    except OSError:
        return GONE
    if not cmd:
        return EXITING
    if start is None and program:
        base = os.path.basename(program).encode()
        # Python daemons (swift) show the interpreter first, the script second.
        if not any(os.path.basename(c) == base for c in cmd.split(b"\0")[:3]):
            return GONE
    return RUNNING


def _describe_status(status: int) -> str:
    """'exit status 3' or 'killed by signal 9 (SIGKILL)' from a wait status code."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = "?"
        return f"killed by signal {-status} ({name})"
    return f"exit status {status}"


@dataclass
class PidRecord:
    """What a PID file holds: the daemon's pid, program and start time, and those of the
    log writer that reads its output."""

    pid: int
    program: str
    start: int | None
    log_pid: int | None = None
    log_start: int | None = None

    def state(self) -> str:
        return proc_state(self.pid, self.start, self.program)


def read_record(pidfile: Path) -> PidRecord | None:
    try:
        lines = pidfile.read_text().split("\n")
        nums = [int(x) if x.strip() else None for x in (lines[2:5] + ["", "", ""])[:3]]
        return PidRecord(int(lines[0]), lines[1] if len(lines) > 1 else "", *nums)
    except (OSError, ValueError, IndexError):
        return None


def read_pid(pidfile: Path) -> tuple[int, str] | None:
    rec = read_record(pidfile)
    return None if rec is None else (rec.pid, rec.program)


def _write_record(pidfile: Path, rec: PidRecord) -> None:
    tmp = pidfile.with_name(pidfile.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join("" if v is None else str(v) for v in
                           (rec.pid, rec.program, rec.start, rec.log_pid, rec.log_start))
                 + "\n")
    tmp.replace(pidfile)  # atomic: a reader never sees a half-written file


def same_argv_pids(argv: Sequence[str]) -> list[int]:
    """Live (not bare-zombie) processes running exactly `argv` (a Python daemon: the
    interpreter, then argv): a second copy of a daemon is found by its command line."""
    want = [a.encode() for a in argv]
    prog = os.path.basename(want[0])
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit() or int(e) == os.getpid():
            continue
        try:
            with open(f"/proc/{e}/cmdline", "rb") as fh:
                cmd = fh.read().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        if len(cmd) < len(want) or cmd[len(cmd) - len(want) + 1:] != want[1:]:
            continue
        head = cmd[:len(cmd) - len(want) + 1]
        if any(os.path.basename(c) == prog for c in head) and \
                proc_state(int(e), None) != GONE:
            out.append(int(e))
    return out


class Daemon:
    """One long-running program, started in its own session, its output written by a log
    writer that caps the log's size, its pid and start time in a PID file: a recycled pid
    is never taken for it, and a dying one is never taken for gone."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, pidfile: Path,
                 env: Mapping[str, str] | None = None, user: str | None = None,
                 tie_to_parent: bool = False, walls: Mapping[str, Any] | None = None
                 ) -> None:
        self.name, self.argv, self.log, self.pidfile = name, list(argv), log, pidfile
        self.env, self.user, self.tie_to_parent = env, user, tie_to_parent
        #: `walled`'s arguments (cwd, writable, readable, ports...): the daemon starts in
        #: a sandbox of its own, as its pid 1 (tied: as the child of bwrap's init, which
        #: dies with this process); None: as a plain child
        self.walls = dict(walls) if walls is not None else None
        self.pid: int | None = None  # the daemon's own pid, once started by this object
        # Kept so that its exit status stays ours: a dropped Popen of a running child is
        # reaped by the subprocess module's clean-up at the next Popen, status and all.
        self.proc: subprocess.Popen[bytes] | None = None
        self.writer: subprocess.Popen[bytes] | None = None

    def record(self) -> PidRecord | None:
        return read_record(self.pidfile)

    def start(self) -> int:
        """Start the program once: refused while a copy of it (this PID file's process, or
        any process with the same command line) still runs or exits."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.pidfile.parent.mkdir(parents=True, exist_ok=True)
        rec = self.record()
        if rec is not None and rec.state() != GONE:
            raise ClusterError(f"{self.name} is still running (pid {rec.pid}); not starting "
                               "a second copy")
        copies = same_argv_pids(self.argv)
        if copies:
            raise ClusterError(f"{self.name} is already running as pid(s) {copies} "
                               f"(`{' '.join(self.argv)}`); not starting a second copy")
        full_env = None if self.env is None else {**os.environ, **self.env}
        os.close(os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW,
                         0o600))
        writer = subprocess.Popen([sys.executable, "-I", str(_LOGCAP), str(self.log),
                                   str(LOG_CAP_BYTES)], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True, umask=PRIVATE_UMASK)
        assert writer.stdin is not None
        info_r = info_w = -1
        walls: Walled | None = None
        started = False
        try:
            argv, pass_fds, preexec = self.argv, (), _die_with_parent if \
                self.tie_to_parent else None
            if self.walls is not None:
                # bwrap writes the daemon's pid (outside its namespace) to this pipe
                info_r, info_w = os.pipe2(os.O_CLOEXEC)
                walls = walled(self.argv, daemon=True, die_with_parent=self.tie_to_parent,
                               info_fd=info_w, **self.walls)
                argv, pass_fds, preexec = walls.argv, (*walls.pass_fds, info_w), walls.preexec
                if walls.inside:
                    full_env = walls.env
                else:  # no bwrap to write the pid: the program is the child
                    os.close(info_r)
                    os.close(info_w)
                    info_r = info_w = -1
                    pass_fds = ()
                    preexec = _die_with_parent if self.tie_to_parent else None
            # cwd: the daemon's own directory, never the caller's (ceph-mon was seen
            # exiting silently with status 1 in one caller's directory)
            p = subprocess.Popen(argv, stdout=writer.stdin, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True,
                                 cwd=self.pidfile.parent, env=full_env, user=self.user,
                                 umask=PRIVATE_UMASK, pass_fds=pass_fds,
                                 preexec_fn=functools.partial(_clamped_start, preexec))
            started = True
        except FileNotFoundError:
            writer.stdin.close()
            writer.wait()
            raise ClusterError(f"{self.argv[0]}: command not found (run "
                               "scripts/sysdeps.sh as root)") from None
        except subprocess.SubprocessError:
            writer.stdin.close()
            writer.wait()
            if walls is None:
                raise
            raise ClusterError(f"{self.name}: could not enter its sandbox (no_new_privs or "
                               "Landlock refused); not started without it") from None
        finally:
            writer.stdin.close()  # the daemon holds the pipe now: EOF when it exits
            if walls is not None:
                walls.close()
            if info_w >= 0:
                os.close(info_w)
            if not started and info_r >= 0:
                os.close(info_r)
        pid = p.pid
        if info_r >= 0:
            pid = _info_pid(info_r) or p.pid  # bwrap failed before its child: bwrap's own
            if self.tie_to_parent and pid != p.pid:
                # the sandbox's pid 1 is bwrap's init (it dies with us); the record names
                # the daemon, its child, so that SIGTERM reaches it (an init without a
                # handler drops it) and its end is the daemon's own
                pid = _only_child(pid) or pid
        # The start time is read now: a process that died at once has none (recorded None
        # would fall back to the command line, so the writer's pid stands in: never ours).
        start = proc_start(pid)
        _write_record(self.pidfile, PidRecord(pid, self.argv[0],
                                              start if start is not None else -1,
                                              writer.pid, proc_start(writer.pid)))
        self.proc, self.writer, self.pid = p, writer, pid
        return pid

    def state(self) -> str:
        rec = self.record()
        return GONE if rec is None else rec.state()

    def alive(self) -> bool:
        return self.state() == RUNNING

    def exit_status(self, wait: float = 2.0) -> str:
        """How the process ended ('exit status 3', 'killed by signal 9 (SIGKILL)'), when it
        is our child; '' when unknown (started by another storlab process)."""
        rec = self.record()
        # bwrap (self.proc) exits with its child's status
        if self.proc is not None and rec is not None and rec.pid == self.pid:
            try:
                return _describe_status(self.proc.wait(timeout=wait))
            except subprocess.TimeoutExpired:
                return ""
        return ""

    def check_alive(self) -> None:
        """Raise with the exit status and the log's tail once the daemon is gone (a daemon
        that is exiting is not taken for gone yet: its status comes when it is)."""
        if self.state() != GONE:
            return
        how = self.exit_status()
        how = f" ({how})" if how else ""
        # started by this process: it died starting; else it died some time before
        what = "exited during start-up" if self.proc is not None else "is not running"
        tail = _final_tail(self)
        raise ClusterError(f"{self.name} {what}{how}; last lines of {self.log}:\n{tail}")

    def stop(self, grace: float = 10.0) -> bool:
        return stop_pid(self.pidfile, grace)


def _info_pid(fd: int, timeout: float = 30.0) -> int | None:
    """The `child-pid` bwrap wrote to its `--info-fd` (read from `fd`, then closed): the
    daemon's pid as this namespace sees it; None when bwrap ended without one."""
    import select

    data = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            got = os.read(fd, 4096)
            if not got:
                break
            data += got
    finally:
        os.close(fd)
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _only_child(pid: int, timeout: float = 10.0) -> int | None:
    """The child of `pid` (bwrap's init in a sandbox: it starts the one program), once it
    has forked it; None when `pid` ends first (the program failed to start: the init's
    own end then tells it)."""
    start = proc_start(pid)
    deadline = time.monotonic() + timeout
    while start is not None and proc_state(pid, start) == RUNNING:
        for e in os.listdir("/proc"):
            if not e.isdigit():
                continue
            st = stat_fields(int(e))
            if st is not None and int(st[1]) == pid:
                return int(e)
        if time.monotonic() > deadline:
            break
        time.sleep(0.005)
    return None


def _final_tail(d: Daemon) -> str:
    """The log's tail once the log writer has written everything the daemon said."""
    rec = d.record()
    if rec is not None and rec.log_pid:
        _wait_gone(rec.log_pid, rec.log_start, 3.0)
    tail = log_tail(d.log)
    if not tail:
        time.sleep(0.5)
        tail = log_tail(d.log) or "(the log is empty)"
    return tail


def clamp_memlock() -> None:
    """The calling process's hard RLIMIT_MEMLOCK down to its soft one (in a child about to
    exec a cluster's program). None of the clusters' daemons locks memory (Ceph's on
    memstore, a bluestore file and TCP messengers; Swift's servers, memcached without
    `-k`) and none keeps CAP_IPC_LOCK: a hard limit above the soft one (systemd's
    `LimitMEMLOCK=infinity`) only let a daemon raise its own, so it could lock memory
    the host cannot reclaim. Raising the hard limit back needs CAP_SYS_RESOURCE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (soft, soft))


def _clamped_start(then: Callable[[], None] | None) -> None:
    """A daemon's `preexec_fn`: `clamp_memlock`, then `then` (its walls' entry, or dying
    with its parent)."""
    clamp_memlock()
    if then is not None:
        then()


def _die_with_parent() -> None:
    """In the child: SIGKILL when the process that started us dies. Test clusters use it, so
    a killed test run cannot leave daemons behind (the helper is shared with the campaign's
    runners)."""
    die_with_parent()


def _reap(pid: int) -> None:
    """Collect a child we started in this process (tests start and stop in one process)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _wait_gone(pid: int, start: int | None, timeout: float, program: str = "") -> bool:
    """Wait until the process is GONE (reaping it if it is our child); True if it is."""
    deadline = time.monotonic() + timeout
    while True:
        _reap(pid)
        if proc_state(pid, start, program) == GONE:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def stop_pid(pidfile: Path, grace: float = 10.0, kill_wait: float = 60.0) -> bool:
    """SIGTERM the recorded process, SIGKILL it after `grace` seconds, and return only once
    it is gone (by pid and start time: an exiting process still holds its files and locks);
    then its log writer. True if one ran. Raises if it outlives SIGKILL by `kill_wait` s
    (stuck in uninterruptible I/O): the PID file stays, so nothing starts a second copy."""
    rec = read_record(pidfile)
    if rec is None or rec.state() == GONE:
        if rec is not None and rec.log_pid:
            _wait_gone(rec.log_pid, rec.log_start, 5.0)
        pidfile.unlink(missing_ok=True)
        return False
    # identified by start time above: ours. A daemon that is its sandbox's pid 1 and has
    # no SIGTERM handler yet (early in its start) would never see SIGTERM: killed at once
    _kill(rec.pid, signal.SIGKILL if _term_dropped(rec.pid) else signal.SIGTERM)
    if not _wait_gone(rec.pid, rec.start, grace, rec.program):
        _kill(rec.pid, signal.SIGKILL)
        if not _wait_gone(rec.pid, rec.start, kill_wait, rec.program):
            raise ClusterError(f"pid {rec.pid} ({rec.program}, {pidfile.stem}) is still "
                               f"there {kill_wait:g} s after SIGKILL")
    if rec.log_pid and not _wait_gone(rec.log_pid, rec.log_start, 10.0):
        _kill(rec.log_pid, signal.SIGKILL)
        _wait_gone(rec.log_pid, rec.log_start, 5.0)
    pidfile.unlink(missing_ok=True)
    return True


def _term_dropped(pid: int) -> bool:
    """Whether SIGTERM sent to `pid` would be dropped: it is pid 1 of a PID namespace of
    its own (a walled daemon) and catches no SIGTERM (`SigCgt`), and a namespace's pid 1
    gets no signal it has no handler for."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
        nspid = fields.get("NSpid", "").split()
        caught = int(fields.get("SigCgt", "0").strip(), 16)
    except (OSError, ValueError):
        return False
    return len(nspid) > 1 and nspid[-1] == "1" and not caught & (1 << (signal.SIGTERM - 1))


def pid_alive(pidfile: Path) -> bool:
    rec = read_record(pidfile)
    return rec is not None and rec.state() == RUNNING


def pid_present(pidfile: Path) -> bool:
    """Running or still exiting: a new copy must not start yet."""
    rec = read_record(pidfile)
    return rec is not None and rec.state() != GONE


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
        if want in cmd and proc_state(int(e), None) != GONE:
            out.append((int(e), cmd[0].decode(errors="replace")))
    return out


def stop_strays(arg: str, grace: float = 10.0) -> list[int]:
    """Stop (TERM, then KILL) every process that has `arg` as an argument; their PIDs."""
    strays = [(pid, proc_start(pid)) for pid, _ in pids_with_arg(arg)]
    for pid, _ in strays:
        _kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for pid, start in strays:
        if not _wait_gone(pid, start, max(0.0, deadline - time.monotonic())):
            _kill(pid, signal.SIGKILL)
            _wait_gone(pid, start, 30.0)
    return [pid for pid, _ in strays]


#: The longest answer read from a Ceph admin socket. Its 4-byte length is the daemon's
#: word (up to 4 GiB), and the daemons run as the `ceph` user: a compromised account
#: announcing 4 GiB and sending it within the 5 s filled root's memory. The largest real
#: answers are far below this: on the tests' single-host cluster (Ceph 16, memstore)
#: `config show` is 68 KB of JSON and `perf dump` 8 KB (mon) and 13 KB (OSD); a bluestore
#: OSD has more counters (not measured here); 64 MiB is a thousand times 68 KB.
ASOK_REPLY_LIMIT = 64 << 20


def asok_command(path: Path | str, prefix: str, timeout: float = 5.0, **args: Any) -> Any:
    """One command on a Ceph daemon's admin socket (what `ceph daemon` does: the JSON
    command and a NUL; the answer is a 4-byte big-endian length and JSON). Raises
    ClusterError when the socket does not answer within `timeout` seconds as a whole, or
    announces an answer longer than `ASOK_REPLY_LIMIT` (refused before it is read)."""
    import socket
    import struct

    req = json.dumps({"prefix": prefix, "format": "json", **args}).encode() + b"\0"
    end = time.monotonic() + timeout
    fd = -1
    try:
        # The socket's directory is the daemons' (`var/run`): the name is opened without
        # following a link and connected to through that descriptor, so a link planted
        # there never sends root to another Unix socket.
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise ClusterError(f"admin socket {path}: not a socket")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(f"/proc/self/fd/{fd}")
            s.sendall(req)
            head = b""
            while len(head) < 4:
                s.settimeout(max(end - time.monotonic(), 0.001))  # the whole answer's time
                got = s.recv(4 - len(head))
                if not got:
                    raise ClusterError(f"admin socket {path}: closed without an answer")
                head += got
            (n,) = struct.unpack(">I", head)
            if n > ASOK_REPLY_LIMIT:  # before a byte of it: root's memory is not the daemon's
                raise ClusterError(f"admin socket {path}: announced a {n}-byte answer, more "
                                   f"than the {ASOK_REPLY_LIMIT >> 20} MiB any Ceph daemon's "
                                   "answer needs; refused unread")
            body = bytearray()
            while len(body) < n:
                s.settimeout(max(end - time.monotonic(), 0.001))
                got = s.recv(min(n - len(body), 1 << 20))
                if not got:
                    break
                body += got
    except OSError as exc:
        raise ClusterError(f"admin socket {path}: {exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    try:
        return json.loads(bytes(body) or b"null")
    except ValueError:
        return bytes(body).decode(errors="replace")


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
        except PortTaken:
            raise  # another process answers there: waiting cannot help
        except ClusterError:
            pass
        if time.monotonic() - t0 > timeout:
            tails = "".join(f"\nlast lines of {d.log}:\n{log_tail(d.log, 12)}" for d in daemons)
            raise ClusterError(f"timed out after {timeout:g} s waiting for {what}{tails}")
        time.sleep(interval)


#: At most this many bytes of a daemon's HTTP answer are read waiting for its status line.
HTTP_ANSWER_LIMIT = 16 << 10
#: Each attempt to get an HTTP status line from a daemon lasts at most this many seconds.
HTTP_ATTEMPT_SECONDS = 2.0


def http_answer(host: str, port: int, deadline: float, limit: int = HTTP_ANSWER_LIMIT
                ) -> str | None:
    """The status line (`HTTP/1.1 200 OK`) what listens on `host`:`port` answers to `GET /`
    with, or None when nothing answers there (refused, reset, closed before a byte) or
    `deadline` has passed before asking. Bounded as a whole, not per read: by `deadline`
    (`time.monotonic()`) and by `limit` bytes; a listener dripping bytes (a compromised
    daemon's account holding root's `cluster up`) or sending an endless line gets
    ClusterError saying so. Only the status line is read: any HTTP answer counts, its body
    is never waited for."""
    import socket

    got = b""
    try:
        left = deadline - time.monotonic()
        if left <= 0:
            return None  # no time left to ask
        with socket.create_connection((host, port), timeout=left) as s:
            s.sendall(f"GET / HTTP/1.0\r\nHost: {host}:{port}\r\n\r\n".encode())
            while b"\n" not in got:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                s.settimeout(left)
                chunk = s.recv(min(4096, limit - len(got)))
                if not chunk:
                    break
                got += chunk
                if len(got) >= limit and b"\n" not in got:
                    raise ClusterError(f"{host}:{port} sent {len(got)} bytes without an "
                                       "HTTP status line")
    except TimeoutError:
        raise ClusterError(f"{host}:{port} gave no complete HTTP status line in time "
                           f"({len(got)} bytes received)") from None
    except OSError:
        if not got:
            return None
    if not got:
        return None
    line = got.split(b"\n", 1)[0].strip().decode("latin-1")
    parts = line.split()
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not _decimal(parts[1]):
        raise ClusterError(f"{host}:{port} answered no HTTP: {line[:80]!r}")
    return line


def wait_http(host: str, port: int, timeout: float, what: str,
              daemons: Sequence[Daemon] = (), ours: Callable[[], bool] = lambda: True
              ) -> float:
    """Wait until what listens on `host`:`port` answers HTTP (`http_answer`), and `ours()`
    says the listener is the daemon started; every attempt ends by the whole wait's
    deadline (`timeout` seconds from now, at most `HTTP_ATTEMPT_SECONDS` each), so a
    listener that drips its answer cannot hold the wait past it: ClusterError then, saying
    what the last attempt got. Returns the seconds waited (`wait_until`)."""
    deadline = time.monotonic() + timeout
    last: list[str] = []

    def answers() -> bool:
        last.clear()  # what an earlier attempt got is not the last attempt's
        if not ours():
            return False
        try:
            return http_answer(host, port, min(deadline, time.monotonic()
                                               + HTTP_ATTEMPT_SECONDS)) is not None
        except ClusterError as exc:
            last[:] = [str(exc)]
            raise
    try:
        return wait_until(answers, timeout, what, daemons)
    except ClusterError as exc:
        if not last:
            raise
        raise ClusterError(f"{exc}\nlast attempt: {last[0]}") from None


@dataclass(frozen=True)
class HttpReply:
    """A whole HTTP answer read by `http_request`: header names lower-cased."""
    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes


def http_request(host: str, port: int, deadline: float, method: str = "GET",
                 path: str = "/", headers: Mapping[str, str] | None = None,
                 body: bytes = b"", limit: int = HTTP_ANSWER_LIMIT) -> HttpReply | None:
    """One HTTP/1.0 request to `host`:`port` and its whole answer (status line, headers and
    body, none for HEAD), or None when nothing answers there (refused, reset, closed before
    a byte) or `deadline` has passed before asking. Bounded as a whole, not per read: by
    `deadline` (`time.monotonic()`) and by `limit` bytes of answer, headers and body
    together; a server dripping bytes (a compromised daemon's account holding root's
    `cluster up` or `status`), announcing or sending more, or closing mid-answer gets
    ClusterError saying so. HTTP/1.0: no chunked answer, the body ends at its
    Content-Length or at the close."""
    import socket

    where = f"{host}:{port}"
    head = [f"{method} {path} HTTP/1.0", f"Host: {where}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body or method in ("PUT", "POST"):
        head.append(f"Content-Length: {len(body)}")
    got = bytearray()
    want: int | None = None  # the whole answer's length, once its headers say it
    ends = -1  # where the headers end
    try:
        left = deadline - time.monotonic()
        if left <= 0:
            return None  # no time left to ask
        with socket.create_connection((host, port), timeout=left) as s:
            s.sendall("\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + body)
            while want is None or len(got) < want:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                s.settimeout(left)
                chunk = s.recv(min(64 << 10, limit + 1 - len(got)))
                if not chunk:
                    break
                got += chunk
                if len(got) > limit:
                    raise ClusterError(f"{where} sent more than {limit} bytes of answer to "
                                       f"{method} {path}")
                if ends < 0:
                    ends = got.find(b"\r\n\r\n")
                    if ends >= 0:
                        want = _http_length(where, bytes(got[:ends]), method, ends + 4,
                                            limit)
    except TimeoutError:
        raise ClusterError(f"{where} gave no complete HTTP answer to {method} {path} in "
                           f"time ({len(got)} bytes received)") from None
    except OSError:
        if not got:
            return None
        raise ClusterError(f"{where} broke off its answer to {method} {path} "
                           f"({len(got)} bytes received)") from None
    if not got:
        return None
    if ends < 0 or (want is not None and len(got) < want):
        raise ClusterError(f"{where} closed mid-answer to {method} {path} "
                           f"({len(got)} bytes received)")
    lines = bytes(got[:ends]).decode("latin-1").split("\r\n")
    version, status, reason = (lines[0].split(None, 2) + ["", "", ""])[:3]
    fields: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return HttpReply(int(status), reason, fields, bytes(got[ends + 4:want]))


def _http_length(where: str, head: bytes, method: str, start: int, limit: int
                 ) -> int | None:
    """The whole answer's length its headers (`head`, up to the blank line) say, `start`
    its body's offset: None when it ends at the close. ClusterError for no HTTP, a chunked
    answer (never to HTTP/1.0), or a Content-Length past `limit`."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not _decimal(parts[1]) \
            or len(parts[1]) != 3:
        raise ClusterError(f"{where} answered no HTTP: {lines[0][:80]!r}")
    status = int(parts[1])
    fields = {n.strip().lower(): v.strip() for n, _, v in
              (line.partition(":") for line in lines[1:])}
    if method == "HEAD" or status in (204, 304) or status < 200:
        return start  # no body
    if "chunked" in fields.get("transfer-encoding", "").lower():
        raise ClusterError(f"{where} sent a chunked answer to an HTTP/1.0 request")
    if "content-length" not in fields:
        return None
    n = fields["content-length"]
    if not _decimal(n):
        raise ClusterError(f"{where} sent a Content-Length of {n[:40]!r}")
    # its digits counted before int() reads them (past 4300 it raises ValueError)
    if len(n.lstrip("0")) > len(str(limit)) or start + int(n) > limit:
        raise ClusterError(f"{where} announced a {n[:40]}-byte body, more than the "
                           f"{limit} bytes read")
    return start + int(n)


def _decimal(text: str) -> bool:
    """Whether `text` is ASCII digits only: str.isdigit() also takes latin-1's `²`, which
    int() refuses with ValueError (a traceback, not the server's error)."""
    return text.isascii() and text.isdigit()


def save_state(path: Path, state: Mapping[str, Any]) -> None:
    """Write the state atomically, 0600: it holds the cluster's credentials."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(state, indent=2) + "\n")
    os.chmod(tmp, 0o600)
    tmp.replace(path)


def keep_logs_only(directory: Path, logs: str = "log") -> None:
    """Remove everything in `directory` but its `logs` subdirectory (a failed bring-up:
    the state, keys and data go, what the daemons said stays for the diagnosis)."""
    import shutil

    if not directory.exists():
        return
    for entry in directory.iterdir():
        if entry.name == logs:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


_NUM = (int, float)
_STR_MAP = {"endpoint": str, "access_key": str, "secret_key": str, "region": str}
#: The keys each kind's `up` writes into its cluster.json, with their types (a tuple: any
#: of them; a dict: an object of those keys; `"path"`: a str naming an entry of the
#: cluster's own directory; `"name"`: a pool or image name). A value of another type
#: refuses the state (a campaign may ship its cluster directory); other keys are never read.
STATE_KEYS: dict[str, dict[str, Any]] = {
    "ceph": {"kind": str, "dir": str, "conf": "path", "fsid": str, "osds": int,
             "replicas": int, "store": str, "pool": "name", "image": "name",
             "mon_port": int, "bind": str, "rgw_port": int, "s3": _STR_MAP,
             "started": _NUM, "ready": bool, "tie_to_parent": bool, "up_seconds": _NUM},
    "swift": {"kind": str, "dir": str, "replicas": int, "workers": int,
              "proxy_workers": int, "storage": str, "bind": str, "proxy": str,
              "auth_url": str, "user": str, "key": str, "admin_key": str, "run_as": str,
              "ports": {k: int for k in ("object", "container", "account", "proxy",
                                         "memcached")},
              "s3": _STR_MAP, "loop": "loop", "mounted": "path", "started": _NUM,
              "ready": bool, "tie_to_parent": bool, "up_seconds": _NUM},
}


#: The keys every state of a kind holds from `up`'s first save on, which readers index
#: (`cluster status`'s endpoints, the runners): a state without one is refused, not a
#: KeyError traceback. (Not every key of `STATE_KEYS`: a state an older storlab wrote
#: may lack the later ones, which readers `.get`.)
STATE_NEEDS: dict[str, tuple[str, ...]] = {
    "ceph": ("conf", "pool", "image"),
    "swift": ("auth_url", "user", "key"),
}
_S3_NEEDS = ("endpoint", "access_key", "secret_key")


def _state_value_refused(value: Any, want: Any, directory: Path) -> str | None:
    """Why `value` is not of the type `want` (`STATE_KEYS`), or None."""
    if isinstance(want, dict):
        if not isinstance(value, dict):
            return "must be an object"
        for k, v in value.items():
            why = None if k not in want else _state_value_refused(v, want[k], directory)
            if why:
                return f"{k}: {why}"
        return None
    if want == "name":
        ok = isinstance(value, str) and bool(re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", value))
        return None if ok else "must be a name of letters, digits, '_', '.' or '-'"
    if want == "loop":
        ok = isinstance(value, str) and bool(re.fullmatch(r"/dev/loop[0-9]{1,6}", value))
        return None if ok else "must be a loop device (/dev/loopN)"
    if want == "path":
        if not isinstance(value, str) or "\0" in value or not os.path.isabs(value):
            return "must be an absolute path"
        top = os.path.realpath(directory)
        if os.path.dirname(os.path.realpath(value)) != top:
            return f"must name an entry of the cluster's directory {top}"
        return None
    types = want if isinstance(want, tuple) else (want,)
    if isinstance(value, bool) and bool not in types:  # True is an int to isinstance
        return f"must be {' or '.join(t.__name__ for t in types)}"
    if not isinstance(value, types):
        return f"must be {' or '.join(t.__name__ for t in types)}"
    return None


def load_state(path: Path, kind: str) -> dict[str, Any] | None:
    """The state a `kind` cluster's `up` saved at `path` (its directory's cluster.json);
    None when there is none or it is not JSON (a bring-up cut short). A state of another
    shape than `up` writes (`STATE_KEYS`) is refused in one line (ClusterError)."""
    try:
        data = json.loads(path.read_text())
    except PermissionError:
        # 0600 in a 0700 directory: another user must not be told "down"
        raise ClusterError(f"{path.parent}: the cluster's state is readable by root "
                           "only (run as root)") from None
    except (OSError, ValueError):
        return None
    keys = STATE_KEYS[kind]
    if not isinstance(data, dict):
        why = "is not a JSON object"
    elif data.get("kind", kind) != kind:
        why = f"kind: {str(data.get('kind'))[:40]!r} must be {kind!r}"
    else:
        why = next((f"{k}: {w}" for k, v in data.items()
                    if k in keys and (w := _state_value_refused(v, keys[k], path.parent))),
                   None)
        missing = [k for k in STATE_NEEDS[kind] if k not in data] + [
            f"s3.{k}" for k in _S3_NEEDS if data.get("s3") and k not in data["s3"]]
        if why is None and missing:
            why = f"{missing[0]}: missing"
    if why:
        raise ClusterError(f"{path}: {why} (not a state storlab's `cluster up {kind}` "
                           "wrote); remove the directory or name another")
    return data


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _proc_net_hex(packed: bytes) -> str:
    """An address as /proc/net/tcp{,6} prints it: 32-bit words, each in host byte order."""
    return "".join(f"{int.from_bytes(packed[i:i + 4], sys.byteorder):08X}"
                   for i in range(0, len(packed), 4))


def _addresses(host: str) -> list[Any]:
    """`host` as IP addresses: itself when it is one, else what it resolves to (a state
    written by hand or by an older storlab may name `localhost`; the load connects to
    what the name resolves to, so that is what is checked)."""
    import ipaddress
    import socket

    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ClusterError(f"{host!r}: a cluster's address is an IP address or a name that "
                           f"resolves to one ({getattr(exc, 'strerror', None) or exc})") from None
    return [ipaddress.ip_address(str(i[4][0]).partition("%")[0]) for i in infos]


def _listeners(host: str, port: int) -> set[int]:
    """The socket inodes listening in this network namespace that take a TCP connection
    to `host:port` (`host` an address or a name, every address it resolves to): bound to
    that address or to the wildcard of its family (an IPv4 one also to ::ffff:ADDR or
    :: in /proc/net/tcp6)."""
    return set().union(*listening(host, [port]).values())


def listening(host: str | None, ports: Iterable[int], udp: bool = False
              ) -> dict[int, set[int]]:
    """{port: socket inodes} for each of `ports` where a socket of this network namespace
    takes a TCP connection to `host` (listening on that address or its family's wildcard;
    see `_listeners`), or with `udp` a datagram sent there (bound, not connected); `host`
    None: listening on any address at all (v4 or v6, loopback or not). The tables are
    read once whatever the number of ports."""
    v4, v6 = set(), {"0" * 32}
    for ip in _addresses(host) if host is not None else ():
        if ip.version == 6 and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if ip.version == 4:
            v4 |= {_proc_net_hex(ip.packed), "00000000"}
            v6.add(_proc_net_hex(b"\0" * 10 + b"\xff\xff" + ip.packed))
        else:
            v6.add(_proc_net_hex(ip.packed))
    wanted = set(ports)
    kind, state = ("udp", "07") if udp else ("tcp", "0A")
    out: dict[int, set[int]] = {}
    anywhere = host is None
    for table, mine in ((f"/proc/net/{kind}", v4), (f"/proc/net/{kind}6", v6)):
        try:
            with open(table) as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            addr, _, hexport = f[1].partition(":")
            port = int(hexport, 16)
            if f[3] == state and port in wanted and (anywhere or addr.upper() in mine):
                out.setdefault(port, set()).add(int(f[9]))
    return out


def _socket_inodes(pids: Sequence[int]) -> set[int]:
    out: set[int] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                out.add(int(link[8:-1]))
    return out


def listener_is_daemons(pidfile: Path, name: str, host: str, port: int) -> bool:
    """Whether what answers TCP connections to `host:port` is the daemon `name` storlab
    started (`pidfile`'s process or one it forked): True when every socket listening
    there is one of theirs, False while none listens yet. A port another process holds
    (a local user who bound it after `up`'s "port free" check) raises ClusterError:
    nothing is sent there, the cluster's keys least of all."""
    held = _listeners(host, port)
    if not held:
        return False
    rec = read_record(pidfile)
    ours = _socket_inodes([rec.pid, *descendants(rec.pid)]) if rec is not None and \
        rec.state() == RUNNING else set()
    if held <= ours:
        return True
    raise PortTaken(f"port {host}:{port} is held by another process, not the {name} "
                       "storlab started; nothing (no key) is sent there: bring the cluster "
                       "down and find who listens there (ss -ltnp)")


def check_endpoint_daemon(url: str, pidfile: Path, name: str, kind: str,
                          withheld: str = "nothing") -> None:
    """Refuse (ClusterError) to send anything to `url` (a cluster's state's own word for
    its endpoint) unless what listens at its host and port is the daemon `name` storlab
    started (`pidfile`, `listener_is_daemons`): another process holding the port, or
    nothing listening (the daemon is gone, and whoever binds the port next would be sent
    what was meant for it: `withheld` says what is not sent). A check by port cannot
    close the window between it and the connection the load then makes; it refuses every
    state it can see. `kind` names the cluster for `storlab cluster status`."""
    import urllib.parse

    u = urllib.parse.urlsplit(str(url))
    host, port = u.hostname or "", u.port or 80
    if not listener_is_daemons(pidfile, name, host, port):
        raise ClusterError(f"the {name} storlab started does not listen on {host}:{port}; "
                           f"{withheld} is sent there: `storlab cluster status {kind}` says "
                           "why")


def check_bind(addr: str) -> None:
    """Refuse a bind address that is not one of this host's own loopback or private
    addresses (a cluster for benchmarks is not for the outside world)."""
    import ipaddress
    import socket

    try:
        ip = ipaddress.IPv4Address(addr)
    except ValueError:
        raise ClusterError(f"--bind {addr!r} must be an IPv4 address") from None
    if not (ip.is_loopback or ip.is_private) or ip.is_unspecified:
        raise ClusterError(f"--bind {addr}: only a loopback or private address of this "
                           "host (e.g. the root end of a namespace LAN)")
    with socket.socket() as s:
        try:
            s.bind((addr, 0))
        except OSError:
            raise ClusterError(f"--bind {addr}: no interface of this host has that "
                               "address") from None


def free_port_block(n: int, tries: int = 200) -> int:
    """The first of `n` consecutive free loopback ports, chosen at random so that two runs
    on one machine (tests, a stress run, a CI clone) do not collide."""
    import random
    import socket

    # Below the kernel's ephemeral range: a port in it can be taken by any outgoing
    # connection (Ceph, Dask, an HTTP client) between this check and the daemon's bind,
    # which made a Swift test fail with "Could not bind to 127.0.0.1:38218".
    top = 32768
    try:
        top = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    top = max(top, 10000 + 2 * n)
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(max(1024, top - 12768), top - n)
        try:
            for port in range(base, base + n):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise ClusterError("no free block of loopback ports")


@contextlib.contextmanager
def logs_kept_on_failure(down: Callable[..., Any], log_dir: Path, kind: str) -> Iterator[None]:
    """A bring-up that fails takes the cluster down but keeps its daemons' logs, and a
    ClusterError says where they are."""
    try:
        yield
    except BaseException as exc:
        down(keep_logs=True)
        if isinstance(exc, ClusterError):
            raise ClusterError(f"{exc}\n(the daemons' logs are kept in {log_dir}; "
                               f"`storlab cluster down {kind}` removes them)") from None
        raise

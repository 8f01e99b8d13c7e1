"""The walls every program of a run starts inside: bubblewrap (`bwrap`) mount and PID
namespaces that the kernel enforces, whatever the program's options say.

Inside, the whole file system is read-only (and `nodev`) except the run's own directory and
the targets the campaign declares; `/dev` is a private tmpfs holding the usual pseudo devices
(null, zero, random, tty...) and only the device nodes the campaign declares, writable only
with `allow_destructive`; `/proc` is private (only the run's processes) and read-only (no
sysctl writes); every capability that reaches past the mounts is dropped (mount, mknod,
raw I/O, modules, `open_by_handle_at`). The program, and everything it starts, dies with the
sandbox's first process (PID namespace) and with storlab (`--die-with-parent`). The network
is shared: object-store runners talk to local daemons.

A step declared `system_writable: true` runs outside the walls (it formats, mounts, sets a
sysctl); with `STORLAB_UNSANDBOXED=1` every program does (for kernels that refuse
namespaces; storlab refuses to run programs there otherwise).
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

from ...errors import CampaignError

#: Opt-out for kernels that refuse namespaces: programs run without walls.
UNSANDBOXED_ENV = "STORLAB_UNSANDBOXED"
#: The bubblewrap program (a path, for a bwrap installed elsewhere).
BWRAP_ENV = "STORLAB_BWRAP"

#: Capabilities a root program keeps inside: none reaches past the mounts. Dropped among
#: others: SYS_ADMIN (mount, remount rw), MKNOD, SYS_RAWIO, SYS_MODULE, NET_ADMIN, SYS_PTRACE,
#: and DAC_READ_SEARCH (`open_by_handle_at` opens any file of a file system through a
#: writable mount of it, the way out of a bind-mount jail).
KEPT_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
             "CAP_SETGID", "CAP_SETUID", "CAP_IPC_LOCK", "CAP_SYS_NICE",
             "CAP_NET_BIND_SERVICE")


@dataclass(frozen=True)
class Declared:
    """What the campaign declared for the programs of a run: extra writable `paths`
    (absolute), whether declared devices may be written, and whether this program runs
    outside the walls (a step declared `system_writable`)."""

    paths: tuple[str, ...] = ()
    allow_destructive: bool = False
    system: bool = False


_DECLARED: ContextVar[Declared] = ContextVar("storlab_declared", default=Declared())


@contextmanager
def declared(decl: Declared) -> Iterator[None]:
    """Programs started inside get the walls `decl` opens."""
    token = _DECLARED.set(decl)
    try:
        yield
    finally:
        _DECLARED.reset(token)


@contextmanager
def system_writable() -> Iterator[None]:
    """Programs started inside run outside the walls (a declared `system_writable` step)."""
    with declared(replace(_DECLARED.get(), system=True)):
        yield


def current() -> Declared:
    return _DECLARED.get()


def unsandboxed() -> bool:
    """The user opted out of the sandbox (`STORLAB_UNSANDBOXED=1`)."""
    return os.environ.get(UNSANDBOXED_ENV, "").strip().lower() in ("1", "true", "yes")


def bwrap_exe() -> str:
    return os.environ.get(BWRAP_ENV) or "bwrap"


def _base(exe: str) -> list[str]:
    argv = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--remount-ro", "/proc", "--unshare-pid", "--die-with-parent"]
    if os.geteuid() == 0:  # root keeps its capabilities in bwrap unless told
        argv += ["--cap-drop", "ALL"]
        for cap in KEPT_CAPS:
            argv += ["--cap-add", cap]
    return argv


@functools.cache
def probe(exe: str) -> str | None:
    """None if `exe` builds the walls here; else why not, in a few words (tried once per
    process: the kernel's answer does not change)."""
    if shutil.which(exe) is None:
        return f"{exe} is not installed (Debian package bubblewrap)"
    try:
        cp = subprocess.run([*_base(exe), "--", "true"], capture_output=True, text=True,
                            timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{exe} could not start ({exc})"
    if cp.returncode != 0:
        said = (cp.stderr.strip().splitlines() or [f"exit {cp.returncode}"])[-1]
        return f"the kernel refused the namespaces ({said})"
    return None


def require_sandbox() -> None:
    """Refuse, with one line, to start programs when the walls cannot be built and the user
    did not opt out."""
    if unsandboxed():
        return
    why = probe(bwrap_exe())
    if why is not None:
        raise CampaignError(f"cannot sandbox the programs of a run: {why}; storlab refuses "
                            f"to run them unsandboxed unless {UNSANDBOXED_ENV}=1 is set")


@dataclass
class Walls:
    """The mounts of one program's sandbox."""

    writable: list[str] = field(default_factory=list)
    devices: list[tuple[str, str]] = field(default_factory=list)  # (real node, shown at)
    device_writes: bool = False

    def argv(self, program: Sequence[str], cwd: str) -> list[str]:
        out = _base(bwrap_exe())
        for p in _outermost(self.writable):
            out += ["--bind", p, p]
        for real, at in self.devices:
            out += ["--dev-bind" if self.device_writes else "--ro-bind", real, at]
        return [*out, "--chdir", cwd, "--", *program]


def _outermost(paths: Iterable[str]) -> list[str]:
    """The paths without those inside another (a bind inside a bind is redundant)."""
    out: list[str] = []
    for p in sorted(set(paths), key=len):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


def _plain(path: str) -> bool:
    """No link on the way: the path names what it shows."""
    return os.path.realpath(path) == os.path.abspath(path)


#: Directories of the system itself: declared as a target directory (fio `directory: /`),
#: they open only with `allow_destructive`.
SYSTEM_DIRS = ("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64",
               "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/usr", "/var")


def _system(path: str) -> bool:
    """`path` is one of `SYSTEM_DIRS`, or holds one, or is under /etc, /usr, /boot, /var/lib
    (programs and their state)."""
    p = os.path.abspath(path)
    return p in SYSTEM_DIRS or any(p == d or p.startswith(d + "/") for d in
                                   ("/etc", "/usr", "/boot", "/var/lib", "/bin", "/sbin",
                                    "/lib", "/lib64", "/root"))


def _is_device(path: str) -> bool:
    """A block or character device node (following links)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISBLK(mode) or stat.S_ISCHR(mode)


def walls_for(cwd: str, targets: Iterable[str] = (), allow_destructive: bool = False
              ) -> Walls:
    """The walls of a program run in `cwd` (always writable) for the declared `targets`
    (absolute paths: the runner's, then the campaign's `sandbox.writable`).

    Without `allow_destructive` a target opens only as named, without a link on the way:
    a directory, a regular file with one hard link, or a file not yet made (its directory
    opens); a path through a link (or /proc/self/...), a file with several links, a
    system directory (`_system`) and a device stay shut (the static checks refuse
    existing files outside the scratch area with a message first). With
    `allow_destructive` targets are resolved (links followed) and open as what they name:
    a device node is bound into the private /dev, writable. `/proc/...` targets never
    open (storlab's /proc/self is not the program's: declare the real path).
    """
    decl = current()
    allow = allow_destructive or decl.allow_destructive
    # the run's directory at its real path: bwrap cannot make a mount point through a link
    # (a scratch directory that is a link elsewhere); the program still reaches it by `cwd`
    w = Walls(writable=[os.path.realpath(cwd)], device_writes=allow)
    for t in [*targets, *decl.paths]:
        t = os.path.abspath(t)
        if t == "/proc" or t.startswith("/proc/"):  # storlab's /proc/self is not the program's
            continue
        if _is_device(t):  # bound read-only and nodev (not openable) unless `allow`
            real = os.path.realpath(t)
            w.devices.append((real, real))
            if t != real and t.startswith("/dev/"):  # /dev/disk/by-id/... inside too
                w.devices.append((real, t))
            continue
        if allow:
            real = os.path.realpath(t)
            if os.path.exists(real):
                w.writable.append(real)
            elif os.path.isdir(os.path.dirname(real)):
                w.writable.append(os.path.dirname(real))
            continue
        if not _plain(t):
            continue
        if os.path.isdir(t) and _system(t):
            continue
        if os.path.isdir(t) or (os.path.isfile(t) and os.stat(t).st_nlink == 1):
            w.writable.append(t)
        elif not os.path.lexists(t) and os.path.isdir(os.path.dirname(t)) \
                and _plain(os.path.dirname(t)) and not _system(os.path.dirname(t)):
            w.writable.append(os.path.dirname(t))
    return w


def wrap(program: Sequence[str], cwd: str | None, targets: Iterable[str] = (),
         allow_destructive: bool = False) -> list[str]:
    """`program` inside its walls (unchanged for a `system_writable` step, or when the user
    opted out). Raises CampaignError when the walls cannot be built (see `require_sandbox`)."""
    if current().system or unsandboxed():
        return list(program)
    require_sandbox()
    cwd = os.path.abspath(cwd or os.getcwd())
    return walls_for(cwd, targets, allow_destructive).argv(program, cwd)

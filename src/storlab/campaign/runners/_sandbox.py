"""The walls every program of a run starts inside: bubblewrap (`bwrap`) mount and PID
namespaces that the kernel enforces, whatever the program's options say.

Inside, a program sees a smaller root, read-only (and `nodev`): the system's programs and
settings (/usr, /etc, /lib*, /bin, /sbin, /sys), the campaign's directory, the
install tree of the program started, and what the campaign declares; /tmp, /var/tmp and /run
are empty and read-only. Nothing else of the host shows, so no Unix socket a daemon made
(/run, /var/lib, /home, /srv, /tmp...) can be reached, whatever the daemon. Writable: the
run's own directory and the targets the campaign declares; `/dev` is a private tmpfs holding
the usual pseudo devices (null, zero, random, tty...) and only the device nodes the campaign
declares, writable only with `allow_destructive`; `/proc` is private (only the run's
processes) and read-only (no sysctl writes); every capability that reaches past the mounts is
dropped (mount, mknod, raw I/O, modules, `open_by_handle_at`, FSETID), and a seccomp
filter refuses the keyrings, tracing the sandbox's pid 1 and set-ID mode bits. The network
namespace is the sandbox's own (only a loopback of its own: no abstract socket, no TCP to
the host's daemons) unless the campaign (`sandbox.network`) or the runner (fio's network engines and
client mode, the ceph runner's load) declares it needs the network; a path socket opens only
when the campaign declares it (`sandbox.sockets`). The program, and everything it starts,
dies with the sandbox's first process (PID namespace) and with storlab
(`--die-with-parent`).

A step declared `system_writable: true` runs outside the walls (it formats, mounts, sets a
sysctl); with `STORLAB_UNSANDBOXED=1` every program does (for kernels that refuse
namespaces; storlab refuses to run programs there otherwise).
"""

from __future__ import annotations

import errno
import functools
import os
import resource
import shutil
import stat
import subprocess
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn

from ...errors import CampaignError
from ...fileio import within

#: Opt-out for kernels that refuse namespaces: programs run without walls.
UNSANDBOXED_ENV = "STORLAB_UNSANDBOXED"
#: The bubblewrap program (a path, for a bwrap installed elsewhere).
BWRAP_ENV = "STORLAB_BWRAP"

#: bwrap's own environment: nothing of the program's (its dynamic loader reads LD_PRELOAD,
#: LD_AUDIT, LD_LIBRARY_PATH, GCONV_PATH... and bwrap runs outside the walls).
BWRAP_ENV_OUTSIDE: dict[str, str] = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}

#: Capabilities a root program keeps inside: none reaches past the mounts. Dropped among
#: others: SYS_ADMIN (mount, remount rw), MKNOD, SYS_RAWIO, SYS_MODULE, NET_ADMIN, SYS_PTRACE,
#: and DAC_READ_SEARCH (`open_by_handle_at` opens any file of a file system through a
#: writable mount of it, the way out of a bind-mount jail).
#: Dropped too: FSETID (without it, writing a file, growing it or cloning into it clears
#: its set-user-ID and set-group-ID bits: a file made empty with them cannot be filled),
#: and SYS_NICE and IPC_LOCK unless declared (`REALTIME_CAPS`, `LOCK_MEMORY_CAPS`).
KEPT_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_KILL",
             "CAP_SETGID", "CAP_SETUID", "CAP_NET_BIND_SERVICE")
#: Kept only when the campaign declares `sandbox.realtime: true`: SYS_NICE lets a program
#: take a real-time scheduling class (`chrt -f 99`: a spinning SCHED_FIFO thread starves
#: every other task of its CPU, storlab and the host's daemons included), a negative nice
#: value, the real-time I/O class (fio `prioclass=1`) and another process's priority.
REALTIME_CAPS = ("CAP_SYS_NICE",)
#: Kept only when the campaign declares `sandbox.lock_memory: true`: IPC_LOCK lets a
#: program lock any amount of memory (`mlock`, `mlockall`, fio `lockmem`, SHM_LOCK) past
#: its RLIMIT_MEMLOCK: locked pages cannot be reclaimed, so one program can leave the
#: host (storlab, its daemons) without memory.
LOCK_MEMORY_CAPS = ("CAP_IPC_LOCK",)


def clamp_memlock() -> None:
    """Set the calling process's hard RLIMIT_MEMLOCK to its soft one (in a child about to
    exec bwrap, when the program does not keep `LOCK_MEMORY_CAPS`). Without CAP_IPC_LOCK
    a process locks up to its soft limit, but any process may raise that soft limit to
    the hard one (a hard `memlock` of unlimited: systemd's `LimitMEMLOCK=infinity`, many
    container runtimes); lowering the hard one needs no capability, raising it back needs
    CAP_SYS_RESOURCE, which the walls drop."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (soft, soft))


@dataclass(frozen=True)
class Declared:
    """What the campaign declared for the programs of a run: extra writable `paths`
    (absolute, its `sandbox.writable`), whether declared devices and existing files may be
    written, and whether this program runs outside the walls (a step declared
    `system_writable`)."""

    paths: tuple[str, ...] = ()
    allow_destructive: bool = False
    system: bool = False
    #: The campaign's directory (its scratch area, when its own, lies inside): an existing
    #: file (a runner's target or one of `paths`) outside it opens only with
    #: `allow_destructive`.
    homes: tuple[str, ...] = ()
    #: The run's directory as storlab made it: (path, st_dev, st_ino). A program started
    #: there is refused when the path no longer leads to it (a program of another run
    #: swapped it for a link to somewhere else).
    run_dir: tuple[str, int, int] | None = None
    #: The programs share the host's network namespace, every port (the campaign's
    #: `sandbox.network`); otherwise they get one of their own.
    network: bool = False
    #: A runner's need (the ceph runner's load talks to its cluster: `opened`): the host's
    #: network namespace, TCP only to and on `ports` (Landlock), unless `network`.
    implicit_network: bool = False
    ports: tuple[int, ...] = ()
    #: Extra paths shown read-only: the campaign's `sandbox.readable` (for root without
    #: `allow_destructive`, judged again on the descriptor bound: `walls_for`), and a
    #: runner's own (`shown`, from `opened`: a cluster's conf, storlab's package), not
    #: judged; the campaign's directory (`homes`) is shown read-only too.
    readable: tuple[str, ...] = ()
    shown: tuple[str, ...] = ()
    #: Unix sockets the programs may connect to (the campaign's `sandbox.sockets`): each
    #: bound alone, from the socket storlab opened.
    sockets: tuple[str, ...] = ()
    #: The programs may make io_uring rings (the campaign's `sandbox.io_uring`); otherwise
    #: only fio with an io_uring engine may.
    io_uring: bool = False
    #: The programs may make Unix sockets of their own (the campaign's
    #: `sandbox.unix_sockets`): the seccomp filter's rule is off, the other walls stay.
    unix_sockets: bool = False
    #: The programs keep CAP_SYS_NICE (`REALTIME_CAPS`; the campaign's `sandbox.realtime`).
    realtime: bool = False
    #: The programs keep CAP_IPC_LOCK (`LOCK_MEMORY_CAPS`; the campaign's
    #: `sandbox.lock_memory`).
    lock_memory: bool = False
    #: Directories a runner holds open for its program, writable: (descriptor, where it
    #: shows), bound from the descriptor (the object-store load's records directory in the
    #: scratch area, made and opened without following a link).
    bound: tuple[tuple[int, str], ...] = ()
    #: Variables of storlab's environment the programs get by name (the campaign's
    #: `sandbox.env_pass`; `_program.program_environment`).
    env_pass: tuple[str, ...] = ()
    #: The run's directory held open (`run_dir`'s): bound from it, never opened again by
    #: path (a campaign's directory swapped meanwhile leads elsewhere).
    run_fd: int | None = None

    @property
    def may_make_unix_sockets(self) -> bool:
        """Whether every program may make a Unix socket: declared `sockets`,
        `unix_sockets`, or `io_uring` (a ring's `IORING_OP_SOCKET` passes round the
        filter; `Walls.may_make_unix_sockets` adds a runner's own grants)."""
        return bool(self.sockets) or self.unix_sockets or self.io_uring

    def holding(self, path: str | os.PathLike[str], fd: int) -> Declared:
        """These declarations for a run whose directory `path` storlab holds open (`fd`):
        `run_dir` from the descriptor (what every program of the run must find at
        `path`), `run_fd` the descriptor itself (bound from it)."""
        st = os.fstat(fd)
        return replace(self, run_dir=(os.path.abspath(path), st.st_dev, st.st_ino),
                       run_fd=fd)


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
def opened(network: bool = False, readable: Iterable[str] = (),
           ports: Iterable[int] = (), bound: Iterable[tuple[int, str]] = ()
           ) -> Iterator[None]:
    """Programs started inside also get the network (`network`: TCP to and on `ports`
    only, unless the campaign declares `sandbox.network`), see `readable` and may write
    the directories `bound` ((descriptor, where it shows): the caller keeps the
    descriptors open meanwhile) (a runner's own needs: the ceph runner's load talks to
    its cluster, reads its conf; the object-store load writes its records)."""
    d = _DECLARED.get()
    with declared(replace(d, implicit_network=d.implicit_network or network,
                          ports=(*d.ports, *ports), shown=(*d.shown, *readable),
                          bound=(*d.bound, *bound))):
        yield


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


#: The host's trees every program sees, read-only: programs, libraries, settings, sysfs.
#: No daemon keeps its socket there (they use /run, /var/lib, /tmp, a home); a socket made
#: in one of them would show.
#: Not /opt: software installed there by hand keeps its own state (and, for a daemon, its
#: sockets) beside itself; a program under /opt sees its own install tree only
#: (`_install_trees`), another one there is shown when the campaign declares it
#: (`sandbox.readable`); the library directories ld.so.conf names under /opt are shown
#: (`ld_conf_opt_dirs`).
SYSTEM_TREES = ("/usr", "/etc", "/sys", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
                "/libx32")
#: Directories the program gets empty and read-only (in bwrap's own root, a tmpfs made
#: read-only once the mounts are made): where daemons put their sockets. Read-only: a fio
#: file meant for a disk must not land in memory unseen.
OWN_TMPFS = ("/tmp", "/var/tmp", "/run")


@functools.cache
def _root() -> tuple[str, ...]:
    """bwrap's arguments for the smaller root: `SYSTEM_TREES` read-only (a merged-/usr link
    such as /bin -> usr/bin made again as a link), `OWN_TMPFS` empty, /var/run the link to
    /run it is, and /etc/resolv.conf's target when that lies outside /etc (systemd-resolved
    keeps it in /run: the file alone, not its directory, which holds resolved's socket)."""
    argv: list[str] = []
    for d in SYSTEM_TREES:
        if os.path.islink(d):
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    for d in ("/var", *OWN_TMPFS):  # directories of bwrap's own root (a tmpfs)
        argv += ["--dir", d]
    argv += ["--symlink", "../run", "/var/run"]
    conf = os.path.realpath("/etc/resolv.conf")
    if os.path.isfile(conf) and not any(within(conf, t) for t in ("/etc", "/usr")):
        argv += ["--ro-bind", conf, conf]
    return tuple(argv)


#: What of /proc stays read-only when the rest is writable (`Walls.proc_writable`): what
#: Docker keeps read-only (sysctls, the sysrq trigger, bus, fs, irq) and the kernel's
#: driver tables; bwrap covers bus and irq itself.
PROC_READONLY = ("sys", "sysrq-trigger", "fs", "scsi", "acpi", "driver")
#: The pseudo devices bwrap's `--dev` binds into its private /dev, bound again over a
#: writable bind of the host's /dev (`directory: /dev` with allow_destructive), which is
#: `nodev` like every bind: there they would fail to open (EACCES), and perl, the execute
#: rules' shim, dies at start without /dev/null (`-e` reads it as its script file).
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")


def _links_in(path: str) -> list[tuple[str, str]]:
    """(name, what it says) of each symbolic link directly in the directory `path`."""
    try:
        with os.scandir(path) as it:
            names = [e.name for e in it if e.is_symlink()]
    except OSError:
        return []
    out = []
    for name in sorted(names):
        try:
            out.append((name, os.readlink(os.path.join(path, name))))
        except OSError:
            pass
    return out


def _made_above(bound: Sequence[str]) -> list[str]:
    """The directories above the `bound` mount points that bwrap makes in its own root (not
    a system tree, not inside another bind, not /dev, /proc or its own tmpfs mounts),
    outermost first. bwrap makes them 0700: a program that switches user (a database's
    server in its run directory) could not pass them by path; 0711 lets it pass, not list."""
    skip = (*SYSTEM_TREES, "/dev", "/proc")
    made: set[str] = set()
    for p in bound:
        d = os.path.dirname(os.path.normpath(p))
        while d not in ("/", ""):
            if (d not in ("/var", *OWN_TMPFS) and not any(within(d, t) for t in skip)
                    and not any(within(d, b) for b in bound)):
                made.add(d)
            d = os.path.dirname(d)
    return sorted(made, key=lambda d: (d.count("/"), d))


def _base(exe: str, network: bool = False, realtime: bool = False,
          die_with_parent: bool = True, proc_writable: bool = False,
          lock_memory: bool = False) -> list[str]:
    argv = [exe, *_root(), "--dev", "/dev", "--proc", "/proc"]
    if proc_writable:  # the own processes' entries (a thread's name), never the kernel's
        for sub in PROC_READONLY:
            if os.path.exists(f"/proc/{sub}"):
                argv += ["--ro-bind", f"/proc/{sub}", f"/proc/{sub}"]
    else:
        argv += ["--remount-ro", "/proc"]
    argv.append("--unshare-pid")
    # a session of its own (setsid): no controlling terminal, so no `ioctl(TIOCSTI)` into
    # the terminal storlab was started from, whoever started the program's bwrap
    argv.append("--new-session")
    if die_with_parent:  # a cluster's daemons outlive the command that starts them
        argv.append("--die-with-parent")
    if not network:
        argv.append("--unshare-net")
    argv.append("--unshare-ipc")  # the host's SysV shared memory and queues: not the run's
    if os.geteuid() == 0:  # root keeps its capabilities in bwrap unless told
        argv += ["--cap-drop", "ALL"]
        for cap in (*KEPT_CAPS, *(REALTIME_CAPS if realtime else ()),
                    *(LOCK_MEMORY_CAPS if lock_memory else ())):
            argv += ["--cap-add", cap]
    return argv


#: Syscalls a program gets EPERM for: the kernel's keyrings (root's user keyring is the
#: host root's: a key added inside would reach processes outside; `request_key` starts
#: /sbin/request-key as root outside every namespace). Docker's default profile refuses
#: them too. By architecture: (AUDIT_ARCH, first, last syscall number).
DENIED_SYSCALLS = {"x86_64": [(0xC000003E, 248, 250), (0x40000003, 286, 288)],
                   "aarch64": [(0xC00000B7, 217, 219)]}

#: Syscalls a program gets EPERM for when they name the sandbox's first process (pid 1,
#: bwrap's init, which ends the run when the program ends): `ptrace` (its pid is argument
#: 1) and `process_vm_writev` (argument 0). A program that stopped pid 1 (PTRACE_ATTACH) or
#: wrote its memory kept the run, and everything it started, until the run's timeout. By
#: architecture: (AUDIT_ARCH, syscall number, index of the pid argument); x32's numbers
#: (the x86_64 filter clears x32's bit) are x86_64's entries 521 and 540.
PID1_SYSCALLS = {"x86_64": [(0xC000003E, 101, 1), (0xC000003E, 521, 1),
                            (0xC000003E, 311, 0), (0xC000003E, 540, 0),
                            (0x40000003, 26, 1), (0x40000003, 348, 0)],
                 "aarch64": [(0xC00000B7, 117, 1), (0xC00000B7, 271, 0)]}


#: Syscalls a program gets EPERM for when the mode they set holds S_ISUID or S_ISGID
#: (`SETID_BITS`): chmod, fchmod, fchmodat, fchmodat2, and those that make a file with a
#: mode: open, openat, creat, mknod, mknodat (`openat2`, its mode in memory, gets ENOSYS:
#: `ENOSYS_SYSCALLS`). A program of a run is root: a set-user-ID copy of a shell it left in
#: its directory or a declared one (on the host's file system, where no mount is nosuid)
#: gave any local user root. By architecture: (AUDIT_ARCH, syscall number, index of the
#: mode argument); x32 shares x86_64's.
SETID_SYSCALLS = {"x86_64": [(0xC000003E, 90, 1), (0xC000003E, 91, 1), (0xC000003E, 268, 2),
                             (0xC000003E, 452, 2), (0xC000003E, 2, 2), (0xC000003E, 257, 3),
                             (0xC000003E, 85, 1), (0xC000003E, 133, 1), (0xC000003E, 259, 2),
                             (0x40000003, 15, 1), (0x40000003, 94, 1),
                             (0x40000003, 306, 2), (0x40000003, 452, 2), (0x40000003, 5, 2),
                             (0x40000003, 295, 3), (0x40000003, 8, 1), (0x40000003, 14, 1),
                             (0x40000003, 297, 2)],
                  "aarch64": [(0xC00000B7, 52, 1), (0xC00000B7, 53, 2), (0xC00000B7, 452, 2),
                              (0xC00000B7, 56, 3), (0xC00000B7, 33, 2)]}
SETID_BITS = 0o6000

#: `ioctl` by architecture (AUDIT_ARCH, syscall number, index of the request argument):
#: a program gets EPERM for the requests `TTY_REQUESTS`, whatever the descriptor:
#: TIOCSTI pushes bytes into a terminal's input (a shell reading that terminal runs them
#: as its user), TIOCLINUX's selection calls paste a console's text into its input. A
#: program has no terminal of storlab's caller (stdin /dev/null, a session of its own),
#: but a program of another account may be traced by that account, and one that still
#: held a terminal would type into it. x32's ioctl is 514.
IOCTL_SYSCALLS = {"x86_64": [(0xC000003E, 16, 1), (0xC000003E, 514, 1), (0x40000003, 54, 1)],
                  "aarch64": [(0xC00000B7, 29, 1)]}
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
TTY_REQUESTS = (TIOCSTI, TIOCLINUX)

#: `socket` (and i386's `socketcall` multiplexer) by architecture: (AUDIT_ARCH, syscall
#: number, index of the argument, value refused): a program gets EPERM for
#: `socket(AF_UNIX, ...)` unless the campaign declares `sandbox.sockets` (or the runner
#: needs one of its own: fio's net engine with `protocol=unix`). Refusing the socket
#: refuses every Unix socket by construction, whatever its name, its network namespace,
#: when or where it was bound, or how it was linked. i386's `socketcall(SYS_SOCKET, args)`
#: and `socketcall(SYS_SOCKETPAIR, args)` keep the domain in memory the filter cannot
#: read: refused whatever the domain (a 32-bit program then has no socket at all).
AF_UNIX = 1
UNIX_SOCKET_SYSCALLS = {"x86_64": [(0xC000003E, 41, 0, AF_UNIX), (0x40000003, 359, 0, AF_UNIX)],
                        "aarch64": [(0xC00000B7, 198, 0, AF_UNIX)]}
#: i386's `socketcall(SYS_SOCKET)` and `socketcall(SYS_SOCKETPAIR)`: the family lies in
#: memory the filter cannot read, so neither the Unix rule nor the family list could hold:
#: refused always (a 32-bit program makes its sockets with i386's own `socket`, 359).
SOCKETCALL_SYSCALLS = {"x86_64": [(0x40000003, 102, 0, 1), (0x40000003, 102, 0, 8)]}
#: The socket families a program may make a socket of (`socket`, `socketpair`): IPv4,
#: IPv6, netlink (glibc's getaddrinfo and `ip` ask the kernel through it) and Unix (under
#: the Unix rule above). Every other family gets EPERM, as systemd's
#: RestrictAddressFamilies= gives: AF_VSOCK (40) is not namespaced (a program bound and
#: reached the host's vsock ports), AF_PACKET, AF_ALG, AF_XDP, AF_TIPC, AF_BLUETOOTH...
#: reach kernel code storlab's runs never need. (fio's `rdma` engine would need AF_IB:
#: not supported in the sandbox, like the RDMA devices it needs are not shown.)
SOCKET_FAMILIES = (AF_UNIX, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
#: `socket` and `socketpair` by architecture (AUDIT_ARCH, syscall number): the family
#: (argument 0) must be one of `SOCKET_FAMILIES`.
FAMILY_SYSCALLS = {"x86_64": [(0xC000003E, 41), (0xC000003E, 53), (0x40000003, 359),
                              (0x40000003, 360)],
                   "aarch64": [(0xC00000B7, 198), (0xC00000B7, 199)]}
#: Calls that make a user namespace (`unshare`, `clone` with CLONE_NEWUSER in argument
#: 0) get EPERM: a program of a run never needs one, and inside one it is root of the
#: kernel's namespaced code (the surface most local privilege escalations went through).
#: bwrap's `--disable-userns` needs `--unshare-user`, which maps only root's uid: a root
#: program then loses its capabilities over files of other owners (a declared directory
#: of a user). By architecture: (AUDIT_ARCH, syscall number, argument index).
CLONE_NEWUSER = 0x10000000
USERNS_SYSCALLS = {"x86_64": [(0xC000003E, 272, 0), (0xC000003E, 56, 0), (0x40000003, 310, 0),
                              (0x40000003, 120, 0)],
                   "aarch64": [(0xC00000B7, 97, 0), (0xC00000B7, 220, 0)]}
#: `clone3` passes its flags in memory the filter cannot read: it gets ENOSYS, and glibc
#: (2.34 on) falls back to `clone` for threads, `posix_spawn` and `fork`; so does
#: `openat2` (its mode in memory: `SETID_SYSCALLS`), which glibc never calls for `open`.
ENOSYS_SYSCALLS = {"x86_64": [(0xC000003E, 435), (0x40000003, 435), (0xC000003E, 437),
                              (0x40000003, 437)],
                   "aarch64": [(0xC00000B7, 435), (0xC00000B7, 437)]}
#: `socketpair` by architecture (AUDIT_ARCH, syscall number), under the same rule for a
#: datagram pair: `socketpair(AF_UNIX, SOCK_DGRAM)` (or SOCK_RAW, which AF_UNIX makes a
#: datagram socket) gives sockets that may `sendto` any path or be `connect`ed again, a
#: daemon's datagram socket included. Only a stream or seqpacket pair (type & 0xf of 1 or
#: 5, whatever SOCK_NONBLOCK/SOCK_CLOEXEC) stays: each end is connected for good (connect
#: gives EISCONN, an address given to sendto is refused or ignored), so it reaches only
#: its other end (Python's multiprocessing pipes and asyncio's self-pipe are such pairs).
SOCKETPAIR_SYSCALLS = {"x86_64": [(0xC000003E, 53), (0x40000003, 360)],
                       "aarch64": [(0xC00000B7, 199)]}
SOCKETPAIR_TYPES = (1, 5)  # SOCK_STREAM, SOCK_SEQPACKET

#: io_uring_setup, io_uring_enter, io_uring_register by architecture (AUDIT_ARCH, first,
#: last): a ring's operations (IORING_OP_SOCKET, _CONNECT, _OPENAT...) never pass through
#: the seccomp filter, so a program that may make a ring steps round the rules above. They
#: get EPERM unless the program is fio with an io_uring engine (`IO_URING_ENGINES`) or the
#: campaign declares `sandbox.io_uring: true`.
IO_URING_SYSCALLS = {"x86_64": [(0xC000003E, 425, 427), (0x40000003, 425, 427)],
                     "aarch64": [(0xC00000B7, 425, 427)]}


@functools.cache
def _seccomp_program(unix_sockets: bool = True, io_uring: bool = True) -> bytes:
    """A classic BPF seccomp filter (bwrap `--seccomp`) returning EPERM for
    `DENIED_SYSCALLS`, for `PID1_SYSCALLS` naming pid 1, for `SETID_SYSCALLS` setting
    `SETID_BITS`, for `IOCTL_SYSCALLS` asking one of `TTY_REQUESTS`, unless
    `unix_sockets` for `UNIX_SOCKET_SYSCALLS` making a Unix socket and for
    `SOCKETPAIR_SYSCALLS` making a Unix pair of a type not in `SOCKETPAIR_TYPES`,
    unless `io_uring` for `IO_URING_SYSCALLS`, and allowing everything else of the
    architectures listed there (the machine's own and its compat ones). A call of an
    architecture the filter does not list
    (say x86_64's x32 is listed, a 32-bit ARM call on aarch64 is not) gets EPERM: its
    numbers mean other calls, none of the rules would hold for it. On a machine none of the
    tables names the filter allows everything (it knows no rule, nor the native arch).
    Written by hand (a few instructions per rule do not call for libseccomp, not installed
    as a Python package here), with symbolic jump targets resolved at the end."""
    import platform
    import struct

    ld_abs, jeq, jge, jgt, jset, and_k, ret = 0x20, 0x15, 0x35, 0x25, 0x45, 0x54, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO(EPERM)
    machine = platform.machine()
    ranges = [*DENIED_SYSCALLS.get(machine, []),
              *([] if io_uring else IO_URING_SYSCALLS.get(machine, []))]
    # (arch, nr, argument, jump, k): deny when the argument's low 32 bits match k
    args = [(a, nr, i, jeq, 1) for a, nr, i in PID1_SYSCALLS.get(machine, [])] + [
        (a, nr, i, jset, SETID_BITS) for a, nr, i in SETID_SYSCALLS.get(machine, [])] + [
        (a, nr, i, jset, CLONE_NEWUSER) for a, nr, i in USERNS_SYSCALLS.get(machine, [])] + [
        (a, nr, i, jeq, k) for a, nr, i, k in SOCKETCALL_SYSCALLS.get(machine, [])] + [
        (a, nr, i, jeq, k) for a, nr, i, k in
        ([] if unix_sockets else UNIX_SOCKET_SYSCALLS.get(machine, []))]
    pairs = [] if unix_sockets else SOCKETPAIR_SYSCALLS.get(machine, [])
    families = FAMILY_SYSCALLS.get(machine, [])
    enosys = ENOSYS_SYSCALLS.get(machine, [])
    ioctls = IOCTL_SYSCALLS.get(machine, [])
    # (code, jump if true, jump if false, k): jumps are labels ("deny:N", "next:N", ...)
    # or 0 (the next instruction); a jump goes 255 instructions at most, so each
    # architecture's block ends with its own `deny:N` and `enosys:N`
    prog: list[tuple[int, int | str, int | str, int]] = []
    labels: dict[str, int] = {}
    every = (*ranges, *args, *pairs, *families, *enosys, *ioctls)
    for n, arch in enumerate(dict.fromkeys(a for a, *_ in every)):
        prog += [(ld_abs, 0, 0, 4), (jeq, 0, f"next:{n}", arch), (ld_abs, 0, 0, 0),
                 (and_k, 0, 0, 0xBFFFFFFF)]  # nr, x32's bit cleared
        prog += [(jeq, f"enosys:{n}", 0, nr) for a, nr in enosys if a == arch]
        for a, nr in families:
            if a == arch:
                # socket(family, ...), socketpair(family, ...): a listed family or EPERM
                at = len(prog)
                prog += [(jeq, 0, f"f{at}", nr), (ld_abs, 0, 0, 16),
                         *((jeq, f"g{at}", 0, k) for k in SOCKET_FAMILIES),
                         (ret, 0, 0, deny)]
                labels[f"g{at}"] = len(prog)
                prog += [(ld_abs, 0, 0, 0), (and_k, 0, 0, 0xBFFFFFFF)]
                labels[f"f{at}"] = len(prog)
        for a, first, last in ranges:
            if a == arch:
                at = len(prog)
                prog += [(jge, 0, f"r{at}", first), (jgt, f"r{at}", f"deny:{n}", last)]
                labels[f"r{at}"] = len(prog)
        for a, nr, arg, test, k in args:
            if a == arch:
                # the argument's low 32 bits (a pid_t, a mode_t: the kernel reads no
                # more), little-endian
                at = len(prog)
                prog += [(jeq, 0, f"p{at}", nr), (ld_abs, 0, 0, 16 + 8 * arg),
                         (test, f"deny:{n}", 0, k), (ld_abs, 0, 0, 0),
                         (and_k, 0, 0, 0xBFFFFFFF)]
                labels[f"p{at}"] = len(prog)
        for a, nr in pairs:
            if a == arch:
                # socketpair(AF_UNIX, type): denied unless type & 0xf is a kept one
                at = len(prog)
                prog += [(jeq, 0, f"s{at}", nr), (ld_abs, 0, 0, 16), (jeq, 0, f"k{at}", AF_UNIX),
                         (ld_abs, 0, 0, 24), (and_k, 0, 0, 0xF),
                         *((jeq, f"k{at}", 0, t) for t in SOCKETPAIR_TYPES),
                         (ret, 0, 0, deny)]
                labels[f"k{at}"] = len(prog)
                prog += [(ld_abs, 0, 0, 0), (and_k, 0, 0, 0xBFFFFFFF)]
                labels[f"s{at}"] = len(prog)
        for a, nr, arg in ioctls:
            if a == arch:
                # ioctl(fd, request): denied for the requests `TTY_REQUESTS`
                at = len(prog)
                prog += [(jeq, 0, f"i{at}", nr), (ld_abs, 0, 0, 16 + 8 * arg),
                         *((jeq, f"deny:{n}", 0, k) for k in TTY_REQUESTS),
                         (ld_abs, 0, 0, 0), (and_k, 0, 0, 0xBFFFFFFF)]
                labels[f"i{at}"] = len(prog)
        prog.append((ret, 0, 0, allow))
        labels[f"deny:{n}"] = len(prog)
        prog.append((ret, 0, 0, deny))
        labels[f"enosys:{n}"] = len(prog)
        prog.append((ret, 0, 0, 0x00050000 | errno.ENOSYS))
        labels[f"next:{n}"] = len(prog)
    # an architecture none of the blocks above took
    prog.append((ret, 0, 0, deny if labels else allow))

    def off(i: int, j: int | str) -> int:
        at = j if isinstance(j, int) else labels[j] - i - 1
        if not 0 <= at <= 255:  # a classic BPF jump's reach
            raise ValueError(f"seccomp filter: a jump of {at} instructions")
        return at

    return b"".join(struct.pack("<HBBI", code, off(i, jt), off(i, jf), k)
                    for i, (code, jt, jf, k) in enumerate(prog))


def _data_fd(name: str, data: bytes) -> int:
    """A memory file holding `data`, at its start, for bwrap to read (`--seccomp FD`,
    `--args FD`): readable through /proc by its owner only, unlike an argv."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _seccomp_fd(unix_sockets: bool, io_uring: bool) -> int:
    """A descriptor holding the filter, for bwrap to read (`--seccomp FD`)."""
    return _data_fd("storlab-seccomp", _seccomp_program(unix_sockets, io_uring))


#: Landlock's scopes (ABI 6, Linux 6.12): LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET and
#: LANDLOCK_SCOPE_SIGNAL. A process of the sandbox then reaches no abstract Unix socket and
#: signals no process made outside it, whatever its network namespace (a campaign's
#: `sandbox.network` shares the host's) and whatever the route (an io_uring
#: IORING_OP_CONNECT runs with the ring's credentials, which carry the domain).
LANDLOCK_SCOPES = 0x1 | 0x2
#: Landlock's syscalls: one number on every architecture (the generic table).
_LL_CREATE, _LL_RESTRICT = 444, 446


#: The ruleset once made, or why the kernel has none (no Landlock, an ABI before 6): both
#: final for the process. A failure to make one where the ABI has scopes is not kept: the
#: next call tries again.
_LANDLOCK: tuple[int | None, str] | None = None
#: The kernel's Landlock ABI (0: none), once asked.
_LANDLOCK_ABI: int | None = None
#: Landlock's network rights (ABI 4, Linux 6.7): LANDLOCK_ACCESS_NET_BIND_TCP,
#: LANDLOCK_ACCESS_NET_CONNECT_TCP; the rule type LANDLOCK_RULE_NET_PORT.
LANDLOCK_NET_TCP = 0x1 | 0x2
_LL_RULE_NET_PORT = 2
_LL_ADD_RULE = 445


def _landlock() -> tuple[int | None, str, bool]:
    """(the ruleset's descriptor or None, why there is none, whether that refuses: the
    kernel's ABI is 6 or newer but the ruleset could not be made)."""
    global _LANDLOCK
    if _LANDLOCK is not None:
        return (*_LANDLOCK, False)
    import ctypes
    import struct

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        abi = libc.syscall(_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
        global _LANDLOCK_ABI
        _LANDLOCK_ABI = max(abi, 0)
        if abi < 6:
            _LANDLOCK = None, ("the kernel has no Landlock" if abi < 0 else
                               f"the kernel's Landlock ABI {abi} predates scopes: ABI 6, "
                               "Linux 6.12")
            return (*_LANDLOCK, False)
        attr = ctypes.create_string_buffer(struct.pack("<QQQ", 0, 0, LANDLOCK_SCOPES))
        fd = libc.syscall(_LL_CREATE, attr, ctypes.c_size_t(24), ctypes.c_uint32(0))
        if fd < 0:
            return None, (f"the kernel's Landlock ABI {abi} has scopes but "
                          f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}"
                          ), True
        _libc_calls()  # looked up here, in storlab: the forked child only calls them
    except (OSError, AttributeError) as exc:
        _LANDLOCK = None, f"Landlock's syscalls could not be called ({exc})"
        return (*_LANDLOCK, False)
    _LANDLOCK = fd, ""
    return fd, "", False


def landlock_ruleset() -> int | None:
    """A Landlock ruleset (its descriptor, close-on-exec, kept for the process) that
    handles no file or network access and scopes `LANDLOCK_SCOPES`; None when the kernel
    has no Landlock or an ABI older than 6 (`landlock_missing` says which), or could not
    make it (then `probe` refuses the walls). Two syscalls through ctypes: the Python
    bindings published (`landlock` on PyPI) are pre-releases, and a ruleset without rules
    needs nothing else."""
    return _landlock()[0]


def landlock_refused() -> str | None:
    """Why no program may start in the walls now (the kernel's Landlock ABI has scopes but
    the ruleset could not be made: running without it would fail open), or None."""
    _, why, refused = _landlock()
    return why if refused else None


def landlock_missing() -> str | None:
    """Why the programs run without Landlock's scopes here (for `storlab status`), or
    None when each sandbox enters them."""
    fd, why, _ = _landlock()
    return None if fd is not None else why


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0 without Landlock)."""
    _landlock()
    return _LANDLOCK_ABI or 0


def landlock_net_missing() -> str | None:
    """Why a runner's implicit network cannot be held to its TCP ports here (Landlock's
    network rules need ABI 4, Linux 6.7), or None (for `storlab status`)."""
    abi = landlock_abi()
    if abi >= 4:
        return None
    return ("the kernel has no Landlock" if abi == 0 else
            f"the kernel's Landlock ABI {abi} predates network rules: ABI 4, Linux 6.7")


#: How many TCP rulesets (`tcp_ruleset`) a process keeps: one per set of ports, and a
#: `port` factor makes a set per value; the least recently used beyond are closed.
TCP_RULESETS_KEPT = 64
_TCP_RULESETS: OrderedDict[tuple[int, ...], int] = OrderedDict()
_TCP_RULESETS_LOCK = threading.Lock()


def _kept_ruleset(kept: OrderedDict[Any, int], limit: int, key: Any,
                  make: Callable[[], int]) -> int:
    """A duplicate of the ruleset descriptor `kept` holds for `key`, or of `make()`'s,
    kept (at most `limit`: the least recently used one's descriptor is closed); the
    caller's to close. Duplicated under `_TCP_RULESETS_LOCK`, which it takes: another
    thread may evict and close the kept one before the caller uses it."""
    with _TCP_RULESETS_LOCK:
        fd = kept.get(key)
        if fd is not None:
            kept.move_to_end(key)
            return os.dup(fd)
        fd = kept[key] = make()
        while len(kept) > limit:
            os.close(kept.popitem(last=False)[1])
        return os.dup(fd)


def tcp_ruleset(ports: tuple[int, ...]) -> int:
    """`_tcp_ruleset(ports)`: a duplicate of its descriptor, the caller's to close (the
    ruleset is kept for the next start with the same ports, at most `TCP_RULESETS_KEPT`
    sets: `_kept_ruleset`)."""
    return _kept_ruleset(_TCP_RULESETS, TCP_RULESETS_KEPT, ports, lambda: _tcp_ruleset(ports))


def _tcp_ruleset(ports: tuple[int, ...]) -> int:
    """A Landlock ruleset (its descriptor, close-on-exec, kept by `tcp_ruleset`: made once
    per set of ports, 5.7 ms for Ceph's 503, then reused by each start) that
    scopes `LANDLOCK_SCOPES` (ABI 6 on) and handles TCP bind and connect, allowing both
    on `ports` only: a program in the host's network namespace for a runner's need reaches
    no other TCP service of the host (a root Dask scheduler, a database). UDP is not
    Landlock's to restrict. Raises CampaignError when the kernel cannot (ABI before 4)."""
    import ctypes
    import struct

    why = landlock_net_missing()
    if why is not None:
        raise CampaignError(f"the runner's program gets the host's network, held to its "
                            f"TCP ports by Landlock, but {why}; declare sandbox.network: "
                            "true to give it the whole network")
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    scoped = landlock_abi() >= 6
    attr = ctypes.create_string_buffer(
        struct.pack("<QQQ", 0, LANDLOCK_NET_TCP, LANDLOCK_SCOPES) if scoped
        else struct.pack("<QQ", 0, LANDLOCK_NET_TCP))
    fd = syscall(_LL_CREATE, attr, ctypes.c_size_t(len(attr.raw)), ctypes.c_uint32(0))
    if fd < 0:
        raise CampaignError("cannot make the Landlock ruleset holding the runner's program "
                            f"to its TCP ports: {os.strerror(ctypes.get_errno())}")
    try:
        for port in sorted(set(ports)):
            rule = ctypes.create_string_buffer(struct.pack("<QQ", LANDLOCK_NET_TCP, port))
            if syscall(_LL_ADD_RULE, fd, _LL_RULE_NET_PORT, rule, ctypes.c_uint32(0)) != 0:
                raise CampaignError(f"cannot allow TCP port {port} in the Landlock ruleset: "
                                    f"{os.strerror(ctypes.get_errno())}")
    except BaseException:
        os.close(fd)
        raise
    return fd


#: Landlock's right to execute a file (ABI 1) and the rule type naming a file or a
#: directory by descriptor: `struct landlock_path_beneath_attr` (packed: u64
#: allowed_access, s32 parent_fd).
LANDLOCK_ACCESS_FS_EXECUTE = 0x1
_LL_RULE_PATH_BENEATH = 1
#: How many execute rulesets (`exec_ruleset`) a process keeps (one per set of files).
EXEC_RULESETS_KEPT = 16
_EXEC_RULESETS: OrderedDict[tuple[tuple[str, int, int], ...], int] = OrderedDict()
#: The system's Perl (Debian's Essential perl-base): it enters the execute rules inside the
#: walls, once bwrap has made its mounts (the kernel refuses mount to a process whose
#: Landlock domain handles a file access: entered before bwrap, bwrap fails), then
#: starts the program. Perl starts in 1 ms, Python in 15 (measured on the machine the
#: guarantees doc names); no compiled helper ships with storlab.
PERL = "/usr/bin/perl"
#: The shim's code. argv: (ruleset fd, environment fd or "-", filter fd, the syscall
#: numbers of seccomp, dup3 and execveat, dup3's flags (O_CLOEXEC but for a script, whose
#: interpreter opens it by /dev/fd), the file to start, the program's argv...). It
#: enters the ruleset, puts the file to start on the ruleset's descriptor number, loads
#: the filter (`exec_filter`: every execve refused but an execveat of that descriptor)
#: and starts the file through it. The environment reaches it in a memory file, not
#: through bwrap's `--setenv`: Perl and its loader must not read the program's LD_PRELOAD
#: or PERL5OPT before the rules hold.
EXEC_SHIM = r"""my ($r, $e, $f, $sc, $dup, $xat, $cx, $x) = splice(@ARGV, 0, 8);
if ($e ne "-") { open(my $h, "<&=", $e) or die "storlab: environment: $!\n";
  my $s = do { local $/; <$h> }; close($h);
  %ENV = map { split(/=/, $_, 2) } grep { length } split(/\0/, $s); }
syscall(446, $r + 0, 0) == 0 or die "storlab: landlock_restrict_self: $!\n";
open(my $p, "<", $x) or die "storlab: cannot open $x: $!\n";
syscall($dup, fileno($p), $r + 0, $cx + 0) == $r or die "storlab: dup3: $!\n"; close($p);
open(my $fh, "<&=", $f) or die "storlab: filter: $!\n";
my $flt = do { local $/; <$fh> }; close($fh);
my $prog = pack("S x![p] p", length($flt) / 8, $flt);
syscall($sc, 1, 0, $prog) == 0 or die "storlab: seccomp: $!\n";
my @env = map { "$_=$ENV{$_}" } sort keys %ENV;
my ($none, $av, $ev) = ("", pack("p*", @ARGV, undef), pack("p*", @env, undef));
syscall($xat, $r + 0, $none, $av, $ev, 0x1000);
die "storlab: cannot start $x: $!\n";"""
#: By architecture: the AUDIT_ARCH, (seccomp, dup3, execveat, execve) numbers, and the
#: compat architectures' (AUDIT_ARCH, execve, execveat) refused whole (x86_64's x32
#: numbers, 520 and 545 once the x32 bit is cleared, are refused with the native block).
EXEC_SYSCALLS = {"x86_64": (0xC000003E, (317, 292, 322, 59), [(0x40000003, 11, 358)],
                            (520, 545)),
                 "aarch64": (0xC00000B7, (277, 24, 281, 221), [], ())}
AT_EMPTY_PATH = 0x1000


def exec_filter(fd: int) -> bytes:
    """A seccomp filter (classic BPF, as `_seccomp_program`) refusing with EACCES every
    execve, and every execveat but one of descriptor `fd` with AT_EMPTY_PATH: the shim's
    start of the program. The program itself then starts nothing: not through the
    dynamic loader (`ld.so /bin/sh`, which the execute rule must allow: the kernel opens
    it for every dynamic program), nor through a name (fio's `ioengine=exec` calls
    execvp). What stays is an execveat of a descriptor at `fd` that the program placed
    there itself (arbitrary code already), held by the execute rule to its own files."""
    import platform
    import struct

    arch, (_, _, xat, xve), compat, x32 = EXEC_SYSCALLS[platform.machine()]
    ld_abs, jeq, jset, and_k, ret = 0x20, 0x15, 0x45, 0x54, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | errno.EACCES
    # (code, jump if true, jump if false, k); jumps: a label or 0 (the next instruction)
    prog: list[tuple[int, int | str, int | str, int]] = [
        (ld_abs, 0, 0, 4), (jeq, 0, "compat", arch),
        (ld_abs, 0, 0, 0), (and_k, 0, 0, 0xBFFFFFFF),  # nr, x32's bit cleared
        *((jeq, "deny", 0, nr) for nr in (xve, *x32)),
        (jeq, 0, "allow", xat),
        (ld_abs, 0, 0, 16), (jeq, 0, "deny", fd),  # execveat's dirfd: the shim's
        (ld_abs, 0, 0, 16 + 8 * 4), (jset, "allow", "deny", AT_EMPTY_PATH)]
    labels = {"compat": len(prog)}
    for a, ve, xa in compat:  # a compat architecture: no execve at all
        prog += [(jeq, 0, f"not{a}", a), (ld_abs, 0, 0, 0), (jeq, "deny", 0, ve),
                 (jeq, "deny", "allow", xa)]
        labels[f"not{a}"] = len(prog)
    labels["allow"] = len(prog)
    prog.append((ret, 0, 0, allow))
    labels["deny"] = len(prog)
    prog.append((ret, 0, 0, deny))

    def off(at: int, j: int | str) -> int:
        return j if isinstance(j, int) else labels[j] - at - 1

    return b"".join(struct.pack("<HBBI", code, off(n, jt), off(n, jf), k)
                    for n, (code, jt, jf, k) in enumerate(prog))


def is_script(path: str) -> bool:
    """`path` starts with `#!` (a wrapper: `wrap` gives it no execute rule)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"#!"
    except OSError:
        return False


def exec_missing() -> str | None:
    """Why a known runner's program may start other programs here (Landlock's execute
    rules need ABI 1, Linux 5.13; the shim's syscall numbers are known for x86_64 and
    aarch64), or None (for `storlab status`)."""
    import platform

    if landlock_abi() < 1:
        return "the kernel has no Landlock"
    if platform.machine() not in EXEC_SYSCALLS:
        return f"no execute rules on {platform.machine()} (x86_64 and aarch64 only)"
    return None


def _open_program(path: str) -> Any:
    """`path` (a program, an interpreter a PT_INTERP or `#!` names) opened for its header
    only when it is a regular file: looked at through O_PATH first, so a FIFO or a device
    the campaign ships (a PT_INTERP naming a FIFO hung root's storlab for ever, outside
    every time bound; a watchdog or tape opened does harm) is refused in one line, never
    opened; the very inode checked is then read, non-blocking."""

    pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        mode = os.fstat(pfd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode)
                    or stat.S_ISBLK(mode) else "a directory" if stat.S_ISDIR(mode)
                    else "not a regular file")
            raise CampaignError(f"{path}: is {kind}, not a regular file; a program and its "
                                "interpreter (PT_INTERP, #!) must be regular files")
        fd = os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    finally:
        os.close(pfd)
    return os.fdopen(fd, "rb")


def elf_interpreter(path: str) -> str | None:
    """The ELF interpreter `path` names (PT_INTERP: the kernel opens it with execute
    intent during execve), or None (a static or non-ELF file). Read by hand: a header and
    a program-header table, too little to add pyelftools for."""
    import struct

    with _open_program(path) as fh:
        head = fh.read(64)
        if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2):
            return None
        end = "<" if head[5] == 1 else ">"
        wide = head[4] == 2
        phoff = struct.unpack_from(end + ("Q" if wide else "I"), head, 32 if wide else 28)[0]
        size, count = struct.unpack_from(end + "HH", head, 54 if wide else 42)
        fh.seek(phoff)
        table = fh.read(size * min(count, 4096))
        for i in range(len(table) // max(size, 1)):
            ent = table[i * size:(i + 1) * size]
            if struct.unpack_from(end + "I", ent, 0)[0] != 3:  # PT_INTERP
                continue
            # p_offset and p_filesz: at 8 and 32 in a 64-bit entry, at 4 and 16 in a 32-bit
            word, at = ("Q", (8, 32)) if wide else ("I", (4, 16))
            off, n = (struct.unpack_from(end + word, ent, a)[0] for a in at)
            fh.seek(off)
            return os.fsdecode(fh.read(min(n, 4096)).split(b"\0")[0]) or None
    return None


def program_files(exe: str) -> tuple[str, ...]:
    """The files (real paths) the kernel opens with execute intent to start `exe`: the
    file itself, its ELF interpreter and, for a `#!` script, its interpreter's (4 levels,
    the kernel's own limit)."""
    out: list[str] = []
    todo = [exe]
    while todo and len(out) < 8:
        f = os.path.realpath(todo.pop())
        if f in out:
            continue
        out.append(f)
        try:
            with _open_program(f) as fh:
                head = fh.read(256)
        except OSError:
            continue
        if head[:2] == b"#!":
            words = head[2:].split(b"\n", 1)[0].split()
            if words:
                todo.append(os.fsdecode(words[0]))
        elif (interp := elf_interpreter(f)) is not None:
            todo.append(interp if interp.startswith("/") else os.path.join(
                os.path.dirname(f), interp))
    return tuple(out)


def exec_ruleset(files: tuple[str, ...]) -> int:
    """A Landlock ruleset handling LANDLOCK_ACCESS_FS_EXECUTE and allowing it on `files`
    only: a duplicate of its descriptor, the caller's to close (the ruleset is kept for
    the process: at most `EXEC_RULESETS_KEPT`, by the files' identities, so a file
    replaced since gets a new one; duplicated under the lock, as another thread may evict
    and close the kept one). Rules hold the inodes, so they hold inside bwrap's mount
    namespace. Raises CampaignError when the kernel cannot make it."""
    key = []
    for f in files:
        try:
            st = os.stat(f)
        except OSError as exc:
            raise CampaignError(f"cannot allow {f} to execute: {exc.strerror}") from None
        key.append((f, st.st_dev, st.st_ino))
    return _kept_ruleset(_EXEC_RULESETS, EXEC_RULESETS_KEPT, tuple(key),
                         lambda: _exec_ruleset(key))


def _exec_ruleset(key: list[tuple[str, int, int]]) -> int:
    """A new ruleset for `exec_ruleset`: execute allowed on each file, if it is still the
    one (device, inode) `key` names."""
    import ctypes
    import struct

    syscall = ctypes.CDLL(None, use_errno=True).syscall
    attr = ctypes.create_string_buffer(struct.pack("<Q", LANDLOCK_ACCESS_FS_EXECUTE))
    fd = syscall(_LL_CREATE, attr, ctypes.c_size_t(8), ctypes.c_uint32(0))
    if fd < 0:
        raise CampaignError("cannot make the Landlock ruleset holding the program to "
                            f"its own files: {os.strerror(ctypes.get_errno())}")
    try:
        for f, dev, ino in key:
            pfd = os.open(f, os.O_PATH | os.O_CLOEXEC)
            try:
                st = os.fstat(pfd)
                rule = ctypes.create_string_buffer(
                    struct.pack("<Qi", LANDLOCK_ACCESS_FS_EXECUTE, pfd))
                if (st.st_dev, st.st_ino) != (dev, ino) or syscall(
                        _LL_ADD_RULE, fd, _LL_RULE_PATH_BENEATH, rule,
                        ctypes.c_uint32(0)) != 0:
                    raise CampaignError(f"cannot allow {f} to execute in the Landlock "
                                        f"ruleset: {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(pfd)
    except BaseException:
        os.close(fd)
        raise
    return fd


@functools.cache
def _libc_calls() -> tuple[object, object]:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall, libc.prctl


#: prctl(PR_SET_NO_NEW_PRIVS): what lets a process without CAP_SYS_ADMIN (storlab run by
#: a user) enter a Landlock domain; bwrap sets it for the program anyway.
_PR_SET_NO_NEW_PRIVS = 38


def enter_landlock(ruleset: int) -> None:
    """Put the calling process (a child about to exec bwrap: everything the sandbox starts
    inherits it) in `ruleset`'s Landlock domain, after setting no_new_privs (without it
    the kernel refuses a process lacking CAP_SYS_ADMIN: storlab run by a user). A ruleset
    that handles no file access leaves bwrap free to mount. Raises OSError when the kernel
    refuses either: the caller (a `preexec_fn`) then fails the start, the program does not
    run without the scopes. With no_new_privs a set-user-ID bwrap starts without its
    privileges: it then needs unprivileged user namespaces (`probe` finds out)."""
    import ctypes

    syscall, prctl = _libc_calls()
    if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # type: ignore[operator]
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if syscall(_LL_RESTRICT, ruleset, 0) != 0:  # type: ignore[operator]
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")


def probe(exe: str) -> str | None:
    """None if `exe` builds the walls here; else why not, in a few words (tried once per
    process: the kernel's answer does not change; a Landlock ruleset the kernel could not
    make, where its ABI has scopes, is tried again on the next call). The walls bind from
    descriptors (`--ro-bind-fd`, bubblewrap 0.8 or newer): tried too."""
    # the ruleset made here, in storlab, before forking: the child only enters it
    ruleset, why, refused = _landlock()
    if refused:
        return f"Landlock: {why}"
    return _probe(exe, ruleset)


@functools.cache
def _probe(exe: str, ruleset: int | None) -> str | None:
    if shutil.which(exe) is None:
        return f"{exe} is not installed (Debian package bubblewrap)"
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        # started as the programs are: in the Landlock domain (no_new_privs first)
        cp = subprocess.run([*_base(exe), "--ro-bind-fd", str(fd), "/mnt", "--", "true"],
                            capture_output=True, text=True, timeout=30, pass_fds=(fd,),
                            stdin=subprocess.DEVNULL, env=BWRAP_ENV_OUTSIDE,
                            start_new_session=True, preexec_fn=None if ruleset is None else
                            functools.partial(enter_landlock, ruleset))
    except subprocess.SubprocessError as exc:
        if isinstance(exc, subprocess.TimeoutExpired):
            return f"{exe} could not start ({exc})"
        return ("the kernel has Landlock but refused its domain (prctl no_new_privs or "
                "landlock_restrict_self failed)")
    except OSError as exc:
        return f"{exe} could not start ({exc})"
    finally:
        os.close(fd)
    if cp.returncode != 0:
        said = (cp.stderr.strip().splitlines() or [f"exit {cp.returncode}"])[-1]
        if "Unknown option" in said:
            return f"{exe} is too old ({said}; storlab needs bubblewrap 0.8 or newer)"
        setuid = os.stat(shutil.which(exe) or exe).st_mode & stat.S_ISUID
        return f"the kernel refused the namespaces ({said})" + (
            "; a set-user-ID bwrap runs without its privileges under no_new_privs, which "
            "Landlock's domain needs: allow unprivileged user namespaces"
            if setuid and os.geteuid() != 0 and ruleset is not None else "")
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


@functools.cache
def _raise_nofile() -> None:
    """The soft descriptor limit raised to the hard one, once: each hard-linked file in a
    writable directory holds a descriptor until its program starts (a `cp -al` data set
    of a thousand files passes the usual soft limit of 1024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass  # the limit as it is: the refusal's message says what to raise


@dataclass
class Walls:
    """The mounts of one program's sandbox. Each writable place is bound from a descriptor
    storlab opened (`--bind-fd`), not from a path: bwrap checks that what it mounted is
    what the descriptor holds and refuses to start otherwise ("Race condition binding
    dirfd"), so a path swapped for a link between storlab's look and bwrap's mount (a
    program of another run can do it) opens nothing. The places shown read-only (the
    campaign's directory, the program's install tree, declared sockets) are bound from
    descriptors too: a path swapped for a link to /run shows nothing of /run. `close()`
    releases the descriptors once the program started."""

    writable: list[str] = field(default_factory=list)  # where each bind shows
    fds: list[int] = field(default_factory=list)  # what is bound there, parallel to writable
    devices: list[tuple[str, str]] = field(default_factory=list)  # (real node, shown at)
    device_writes: bool = False
    readonly: list[tuple[int, str]] = field(default_factory=list)  # (descriptor, shown at)
    network: bool = False  # the host's network namespace, not one of the sandbox's own
    #: with `network`, the only TCP ports a program may bind or connect to (Landlock);
    #: None: every port (the campaign's `sandbox.network`) or a namespace of its own
    tcp_ports: tuple[int, ...] | None = None
    sockets: list[str] = field(default_factory=list)  # declared sockets, where they show
    seccomp: int | None = None  # the filter's descriptor (`_seccomp_fd`)
    #: the filter lets the program make Unix sockets (declared ones) and io_uring rings
    unix_sockets: bool = False
    io_uring: bool = False
    realtime: bool = False  # the program keeps `REALTIME_CAPS` (`sandbox.realtime`)
    lock_memory: bool = False  # it keeps `LOCK_MEMORY_CAPS` (`sandbox.lock_memory`)
    #: the campaign's directory and declared readable places, where they show: walked for
    #: sockets (a hard link to a daemon's socket has a name /proc/net/unix does not list)
    trees: list[str] = field(default_factory=list)
    #: writable declared directories open without `allow_destructive`: walked for files
    #: with several hard links too (each shown read-only over itself)
    strict: bool = True
    covers: list[tuple[int, str]] = field(default_factory=list)  # (descriptor, shown at)
    #: a cluster's daemon: it may outlive storlab (no `--die-with-parent`), then runs as
    #: the sandbox's pid 1 (`--as-pid-1`: signalled by its own pid, its exit ends the
    #: namespace; a tied one runs under bwrap's init, which dies with storlab), and bwrap
    #: writes its pid (the init's when not `as_pid_1`) to `info_fd` (`--info-fd`)
    die_with_parent: bool = True
    as_pid_1: bool = False
    info_fd: int | None = None
    #: /proc writable but its kernel-wide parts (`PROC_READONLY`): radosgw names its
    #: threads through /proc/self/task/TID/comm and aborts when it cannot
    proc_writable: bool = False
    #: directories of the sandbox's own root (mount points bwrap made, with the modes of
    #: the host's directories they stand for) opened to every user (0755): a daemon that
    #: drops root (`ceph`) reaches its places through them
    open_dirs: tuple[str, ...] = ()
    #: (descriptor, shown at): regular files shown as read-only copies in the sandbox's
    #: memory (`--ro-bind-data`), readable by every account inside (0444) while the host's
    #: file keeps its owner and mode: a program that runs as another user (`setpriv`, the
    #: `ceph` user) reads a root-only conf or keyring only there
    copies: list[tuple[int, str]] = field(default_factory=list)
    #: bwrap's options, NUL-separated in a memory file (`--args FD`; made by `argv`)
    args_fd: int | None = None
    #: where the run's directory shows inside (the kernel's name of the one bound)
    run_at: str | None = None
    #: the program's words before the one the shim starts (`setpriv ... --`), the file it
    #: starts, and the files that may execute (`exec_ruleset`: the binary and its
    #: interpreters); None: any (the command runner, steps, clusters)
    executes: tuple[int, str, tuple[str, ...]] | None = None
    #: the execute ruleset's, the environment's and the filter's descriptors (the shim's)
    exec_fds: list[int] = field(default_factory=list)
    #: the Landlock ruleset descriptors `landlock()` returned (duplicates: `close()`
    #: closes them; never passed to bwrap)
    rulesets: list[int] = field(default_factory=list)

    def add(self, fd: int, at: str) -> None:
        self.fds.append(fd)
        self.writable.append(at)

    def show(self, path: str, at: str | None = None,
             inside: Sequence[str] | None = None) -> None:
        """Show `path` read-only at `at` (default: there), opened without links on the way;
        nothing when a link, a missing path or a socket (declared in `sockets` instead),
        nor when it is visible already. `inside`: the places (real paths) what is opened
        must lie in, judged on the descriptor (`held_within`; the campaign's
        `sandbox.readable` for root without `allow_destructive`): elsewhere CampaignError."""
        at = at or path
        if any(within(at, t) for t in (*SYSTEM_TREES, *self.writable)) or any(
                within(at, p) for _, p in self.readonly):
            return
        fd = open_plain(path)
        if fd is None:
            return
        if inside is not None and not held_within(fd, inside):
            held = os.readlink(f"/proc/self/fd/{fd}")
            os.close(fd)
            raise CampaignError(
                f"sandbox.readable: {at}: what it leads to now, {held}, lies outside the "
                "campaign's directory and the system's trees (changed since the "
                "campaign's check, or never judged); not shown to this run: copy what the "
                "runs need into the campaign's directory, or set "
                "sandbox.allow_destructive: true if showing it is really meant")
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.close(fd)
            return
        self.readonly.append((fd, at))

    def copy(self, path: str, at: str | None = None) -> bool:
        """Show a copy of the regular file `path` (opened without a link on the way) at
        `at` (default: there), read-only and readable by every account inside; the host's
        file is not changed. False when missing, a link on the way, or not a regular file."""
        where = open_plain(path)
        if where is None:
            return False
        try:
            if not stat.S_ISREG(os.fstat(where).st_mode):
                return False
            # bwrap reads the data: a readable descriptor of what was opened (no FIFO)
            fd = os.open(f"/proc/self/fd/{where}", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            os.close(where)
        self.copies.append((fd, at or path))
        return True

    def socket(self, path: str, at: str, declared: str | None = None) -> None:
        """Bind the Unix socket `path` alone at `at`, from the socket found there without a
        link on the way (nothing when it is missing or not a socket). `declared`: the
        campaign's name for it, when a root daemon's socket may not open (no
        `allow_destructive`): the daemon listening on the socket held is asked now, at
        each run's start (one that started listening there since the preflight asked, a
        restarted Docker, a root tmux, is not shown; CampaignError naming it)."""
        fd = open_plain(path)
        if fd is None:
            return
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            if declared is not None:
                try:
                    uid: int | None = listener_uid(fd)
                except OSError:  # cannot be asked: not shown (fails closed)
                    uid = 0
                if uid == 0:
                    os.close(fd)
                    raise CampaignError(
                        f"sandbox.sockets: {declared}: the daemon listening there now runs "
                        "as root (it started after the campaign's check), and the run's "
                        "programs could have it do anything outside the sandbox; not shown "
                        "to this run: set sandbox.allow_destructive: true if that is "
                        "really meant")
            self.readonly.append((fd, at))
            # kept out of `covered` even when its bind is dropped inside a writable one
            self.sockets.append(at)
        else:
            os.close(fd)

    def scratch_over(self) -> str | None:
        """The directory holding the run's directory (the scratch area), when the program
        would see it through a read-only place shown (the campaign's directory): an empty
        memory file system is mounted there instead, holding only the run's directory, made
        0711 and read-only. The host's scratch area is root's 0700 (a program is root
        inside and its run directory the root of its writable bind: a `chmod 755` it made
        stays when storlab is killed before the run's end); inside, a program that switches
        user (a database server) still passes it by path, and no other run's directory
        shows. None without a run's directory, or when the scratch area shows through
        none, or lies in a writable place (the campaign's declaration: its mode counts), or
        is itself a place shown (declared `readable` whole: shown as it is, its runs
        included)."""
        if self.run_at is None:
            return None
        over = os.path.dirname(self.run_at)
        if over in ("/", "") or any(within(over, w) for w in self.writable):
            return None
        shown = [p for _, p in self.readonly]
        if over in shown or not any(within(over, p) for p in shown):
            return None
        return over

    @property
    def all_fds(self) -> list[int]:
        """Every descriptor bwrap binds from (to pass it)."""
        return [*self.fds, *(fd for fd, _ in self.readonly), *(fd for fd, _ in self.covers),
                *(fd for fd, _ in self.copies),
                *([self.seccomp] if self.seccomp is not None else []),
                *self.exec_fds,
                *([self.args_fd] if self.args_fd is not None else [])]

    def argv(self, program: Sequence[str], cwd: str,
             env: Mapping[str, str] | None = None) -> list[str]:
        """bwrap's argv; the program's environment `env` is set inside (`--clearenv`,
        `--setenv`): bwrap itself runs as root outside the walls and must not see it
        (`LD_PRELOAD` from a campaign would load its code into bwrap)."""
        out = _base(shutil.which(bwrap_exe()) or bwrap_exe(), self.network, self.realtime,
                    self.die_with_parent, self.proc_writable, self.lock_memory)
        if self.as_pid_1:
            out.append("--as-pid-1")
        if self.info_fd is not None:
            out += ["--info-fd", str(self.info_fd)]
        kept = _outermost(zip(self.fds, self.writable))
        # a bind inside another is dropped: its descriptor too, or bwrap (which closes
        # those it uses) would hand it to the program
        for fd in set(self.fds) - {fd for fd, _ in kept}:
            os.close(fd)
        self.fds, self.writable = [fd for fd, _ in kept], [p for _, p in kept]
        # a place shown read-only inside a writable one would shut part of it
        shown = [(fd, p) for fd, p in self.readonly
                 if not any(within(p, w) for w in self.writable)]
        for fd in {fd for fd, _ in self.readonly} - {fd for fd, _ in shown}:
            os.close(fd)
        self.readonly = shown
        # parents before what lies inside them (bwrap mounts in order)
        sockets, linked = self.specials(cwd)
        over = self.scratch_over()
        binds: list[tuple[str, str, int | None]] = sorted(
            [(p, "--ro-bind-fd", fd) for fd, p in shown]
            + [(p, "--bind-fd", fd) for fd, p in kept]
            + [(p, "--ro-bind-fd", fd) for fd, p in linked]
            # after a bind at its own depth (stable sort), before what is inside
            + ([(over, "--tmpfs", None)] if over else []),
            key=lambda b: b[0].count("/"))
        for p, how, fd in binds:
            out += [how, p] if fd is None else [how, str(fd), p]
        if over:  # the scratch area's own links, as they were shown (a target named
            # through one, with allow_destructive, opens as it names)
            for name, to in _links_in(over):
                if not any(within(b, f"{over}/{name}") for b, _, _ in binds):
                    out += ["--symlink", to, f"{over}/{name}"]
        if any(within("/dev", p) for p in self.writable):
            out += [x for n in DEV_NODES if os.path.exists(f"/dev/{n}")
                    for x in ("--dev-bind", f"/dev/{n}", f"/dev/{n}")]
        for real, at in self.devices:
            out += ["--dev-bind" if self.device_writes else "--ro-bind", real, at]
        for sock in sorted({*self.covered(cwd), *sockets}):
            out += ["--ro-bind", "/dev/null", sock]
        for fd, p in self.copies:
            out += ["--perms", "0444", "--ro-bind-data", str(fd), p]
        for d in _made_above([*(p for p, _, _ in binds), *(p for _, p in self.copies)]):
            out += ["--chmod", "0711", d]
        for d in self.open_dirs:
            out += ["--chmod", "0755", d]
        if over:  # passable, not listable, and nothing more written there
            out += ["--chmod", "0711", over, "--remount-ro", over]
        # once every mount point is made: the root (with the empty /tmp, /var/tmp, /run)
        # read-only: a write outside the declared places fails loudly, not in memory unseen
        out += ["--remount-ro", "/"]
        if self.seccomp is None:
            self.seccomp = _seccomp_fd(self.unix_sockets, self.io_uring)
        out += ["--seccomp", str(self.seccomp)]
        for fd in self.exec_fds:
            os.close(fd)
        self.exec_fds = []
        if self.executes is not None:  # the shim enters the execute rules, then starts it
            import platform

            at, start, files = self.executes
            rfd = exec_ruleset(files)
            self.exec_fds.append(rfd)
            self.exec_fds.append(_data_fd("storlab-exec-filter", exec_filter(rfd)))
            if env is not None:
                self.exec_fds.append(_data_fd("storlab-env", b"".join(
                    f"{k}={v}".encode() + b"\0" for k, v in env.items())))
            nrs = EXEC_SYSCALLS[platform.machine()][1]
            program = [*program[:at], PERL, "-e", EXEC_SHIM, str(rfd),
                       str(self.exec_fds[2]) if env is not None else "-",
                       str(self.exec_fds[1]), *(str(n) for n in nrs[:3]),
                       "0" if is_script(start) else str(os.O_CLOEXEC), start,
                       *program[at:]]
            if env is not None:
                out.append("--clearenv")
        elif env is not None:
            out.append("--clearenv")
            for k, v in env.items():
                out += ["--setenv", k, v]
        out += ["--chdir", cwd]
        # every option (the `--setenv` values: a token in a command runner's `env:`) read
        # by bwrap from a descriptor (`--args FD`): /proc/PID/cmdline, which every local
        # user reads, shows only `bwrap --args N -- PROGRAM...`
        if self.args_fd is not None:
            os.close(self.args_fd)
        self.args_fd = _data_fd("storlab-bwrap-args",
                                b"".join(a.encode() + b"\0" for a in out[1:]))
        return [out[0], "--args", str(self.args_fd), "--", *program]

    @property
    def may_make_unix_sockets(self) -> bool:
        """Whether the program may make a Unix socket: the filter lets it (declared
        sockets, `sandbox.unix_sockets`, fio's net engine with `protocol=unix`), or it may
        make io_uring rings (`IORING_OP_SOCKET`, which the filter does not see: the
        campaign's `sandbox.io_uring`, fio's io_uring engines)."""
        return self.unix_sockets or bool(self.sockets) or self.io_uring

    def covered(self, cwd: str) -> list[str]:
        """The Unix sockets bound on the host that lie in a place the program sees (the
        system's trees, the campaign's directory, a declared directory, the program's
        install tree), each to be covered by /dev/null: a daemon's socket there does not
        open either. Those of every network namespace that has a task
        (`_host_sockets.bound`: `connect()` on a path crosses network namespaces), each at
        the path its name leads to (its directory's links followed); when the program may
        make Unix sockets (`may_make_unix_sockets`), those whose listed name does not lead
        to them (a relative name, a directory renamed since, another file at the name) are
        looked for by their inode in the shown trees `specials` does not walk
        (`_host_sockets.find`). Not the declared
        sockets, nor those in the run's own directory (the run's, say from a server a
        `system_writable` step started). CampaignError when such a socket cannot be looked
        for, or the look gives up, without `allow_destructive` (`strict`)."""
        from . import _host_sockets

        seen = [*SYSTEM_TREES, *(p for _, p in self.readonly), *self.writable]
        own = set(self.sockets)
        run_dir = os.path.realpath(cwd)
        listed, unplaced = _host_sockets.bound(self.may_make_unix_sockets)
        out = [path for path in listed
               if any(within(path, t) for t in seen) and os.path.exists(path)]
        if unplaced:  # only asked for when the program may make Unix sockets
            # the trees `specials` walks find every socket in them by name already
            walked = {*self.trees, *(p for fd, p in zip(self.fds, self.writable)
                                     if not _unwalked(p))}
            roots = [t for t in seen if t not in walked and t not in own and t != run_dir]
            way_out = ("set sandbox.allow_destructive: true to run without it, or drop the "
                       "Unix sockets (or io_uring rings) the campaign's programs get")
            try:
                wanted = _host_sockets.placed(unplaced)
            except OSError as exc:
                if self.strict:
                    raise CampaignError(
                        f"cannot place the Unix socket {unplaced[0].name!r} (its listed name "
                        f"leads nowhere; {exc}), which may lie in what the program sees: "
                        f"refusing to start a program that may make Unix sockets; "
                        f"{way_out}") from None
                wanted = {}
            found, left, whole = _host_sockets.find(
                _host_sockets.narrowed(roots, (d for d, _ in wanted.values())), wanted)
            out += found
            if not whole and self.strict:
                u = wanted[min(left)][1]
                raise CampaignError(
                    f"cannot cover the Unix socket {u.name!r} (bound under that name, its "
                    f"file moved or named relative to its daemon's directory): not found "
                    f"within {_host_sockets.BUDGET} entries of what the program sees, so "
                    f"refusing to start a program that may make Unix sockets; {way_out}")
        return sorted({p for p in out if p not in own and not within(p, run_dir)
                       and not within(p, "/dev")})

    def specials(self, cwd: str) -> tuple[list[str], list[tuple[int, str]]]:
        """What a name on the host's /proc/net/unix does not tell: every Unix socket found
        in the shown places walked (`trees`, and the writable directories but the run's
        own), to be covered by /dev/null (a hard link to a daemon's socket, placed in the
        campaign's directory beforehand, is the daemon's socket under another name); and,
        in the writable directories when `strict`, every regular file with several hard
        links (one may be somebody's file elsewhere), each opened without a link on the
        way and shown read-only over itself (not those in the run's own directory: a link
        across bind mounts fails with EXDEV, so one made there leads nowhere outside, and
        `cp -al` or `git clone --local` there keeps working). A linked file that cannot be
        opened (EMFILE) refuses the run (CampaignError): left uncovered it stays writable.
        Walked again at each start where a directory changed (`_specials`). Not the
        declared sockets."""
        run_dir = os.path.realpath(cwd)
        _raise_nofile()
        dirs = [p for fd, p in zip(self.fds, self.writable)
                if p != run_dir and not _unwalked(p) and stat.S_ISDIR(os.fstat(fd).st_mode)]
        sockets: set[str] = set()
        for t in self.trees:
            sockets.update(_specials(t, False)[0])
        linked: list[tuple[int, str]] = []
        try:
            for d in dirs:
                socks, files = _specials(d, self.strict)
                sockets.update(socks)
                for f in files:
                    if within(f, run_dir):
                        continue
                    try:
                        fd = open_plain(f)
                    except OSError as exc:
                        raise CampaignError(
                            f"cannot cover {f}, a file with several hard links in a writable "
                            f"directory ({exc.strerror}); refusing to start the program "
                            "with it writable (out of descriptors: raise `ulimit -n`, or "
                            "declare a directory without hard-linked files)") from None
                    if fd is None:  # gone, or a link now: nothing of another's left there
                        continue
                    st = os.fstat(fd)
                    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                        linked.append((fd, f))
                    else:
                        os.close(fd)
        except BaseException:
            for fd, _ in linked:
                os.close(fd)
            raise
        self.covers = linked
        own = set(self.sockets)
        return sorted(s for s in sockets if s not in own and not within(s, run_dir)), linked

    def landlock(self) -> int | None:
        """The Landlock ruleset the program's sandbox enters: the shared one
        (`landlock_ruleset`), or the one holding TCP to `tcp_ports` (`tcp_ruleset`); a
        duplicate of its descriptor, these walls' own until `close()` (a kept ruleset
        another thread evicts stays open for this start). Raises CampaignError when the
        kernel cannot hold it to them."""
        if self.tcp_ports is None:
            shared = landlock_ruleset()  # kept for the process, never closed
            if shared is None:
                return None
            fd = os.dup(shared)
        else:
            fd = tcp_ruleset(self.tcp_ports)
        self.rulesets.append(fd)
        return fd

    def close(self) -> None:
        for fd in self.all_fds:
            os.close(fd)
        for fd in self.rulesets:
            os.close(fd)
        self.rulesets.clear()
        self.covers.clear()
        self.seccomp = None
        self.args_fd = None
        self.exec_fds = []
        self.fds.clear()
        self.writable.clear()
        self.readonly.clear()
        self.copies.clear()
        self.sockets.clear()


#: Per directory walked (path, files asked): its (st_dev, st_ino, st_mtime_ns, st_ctime_ns)
#: when listed, and what it held: subdirectory names, sockets, regular files with several
#: hard links.
_LISTED: dict[tuple[str, bool], tuple[tuple[int, ...], list[str], list[str], list[str]]
              ] = {}

#: The kernel's PATH_MAX: a longer path cannot be named to bwrap, so a special there
#: cannot be covered.
_PATH_MAX = 4096


def _specials(top: str, files: bool) -> tuple[list[str], list[str]]:
    """The Unix sockets under the directory `top` and, with `files`, the regular files with
    several hard links (links not followed). Walked relative to directory descriptors
    (one open per level of the current branch), so depth does not matter; fails closed
    (CampaignError): a directory that cannot be listed but can be entered, or a special
    whose path is too long to cover, refuses the run instead of being skipped. A directory
    is listed again only when it changed since (its mtime: a name added or removed changes
    it; a hard link made elsewhere to a file here does not, and needs no cover: the file
    was this directory's), so a start costs one `open` per directory of an unchanged tree."""
    if len(_LISTED) > 200_000:
        _LISTED.clear()
    socks: list[str] = []
    multi: list[str] = []
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        fd = os.open(top, flags)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return socks, multi
        _unwalkable(top, exc)
    # Each entry: the directory's descriptor, its path, its subdirectories left to walk.
    stack: list[tuple[int, str, list[str]]] = []
    try:
        stack.append((fd, top, _listed(fd, top, files, socks, multi)))
        while stack:
            fd, path, left = stack[-1]
            if not left:
                os.close(stack.pop()[0])
                continue
            name = left.pop()
            sub = os.path.join(path, name)
            try:
                cfd = os.open(name, flags | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    continue  # gone, or not a directory now
                if exc.errno == errno.EACCES and not os.access(name, os.X_OK, dir_fd=fd):
                    continue  # neither listed nor entered: nothing there is reachable
                _unwalkable(sub, exc)
            stack.append((cfd, sub, []))  # on the stack first: closed if the listing fails
            stack[-1] = (cfd, sub, _listed(cfd, sub, files, socks, multi))
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    for p in (*socks, *multi):
        if len(os.fsencode(p)) >= _PATH_MAX:
            raise CampaignError(
                f"cannot cover a socket or hard-linked file too long to name "
                f"({len(os.fsencode(p))} bytes) under {top}: {p[:60]}...{p[-30:]}; refusing "
                "to start the program (remove it or declare a shallower directory)")
    return socks, multi


def _unwalkable(path: str, exc: OSError) -> NoReturn:
    """Refuse the run: a directory the walk for sockets and hard links cannot list."""
    raise CampaignError(
        f"cannot walk {path} for sockets and hard-linked files ({exc.strerror}); refusing "
        "to start the program with it uncovered (make it readable or declare another "
        "directory)") from None


def _listed(fd: int, path: str, files: bool, socks: list[str], multi: list[str]
            ) -> list[str]:
    """The directory open as `fd` (at `path`) listed (or its cached listing when unchanged):
    its sockets and linked files added to `socks`/`multi`; its subdirectory names returned."""
    st = os.fstat(fd)
    key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)  # owner can set mtime back
    got = _LISTED.get((path, files))
    if got is None or got[0] != key:
        subdirs: list[str] = []
        s: list[str] = []
        f: list[str] = []
        try:
            with os.scandir(fd) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        subdirs.append(e.name)
                    elif e.is_file(follow_symlinks=False):
                        if files and e.stat(follow_symlinks=False).st_nlink > 1:
                            f.append(os.path.join(path, e.name))
                    elif not e.is_symlink() and stat.S_ISSOCK(
                            e.stat(follow_symlinks=False).st_mode):
                        s.append(os.path.join(path, e.name))
        except OSError as exc:
            _unwalkable(path, exc)
        got = (key, subdirs, s, f)
        _LISTED[(path, files)] = got
    socks += got[2]
    multi += got[3]
    return list(got[1])


def _outermost(binds: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    """The binds without those inside another (a bind inside a bind is redundant)."""
    out: list[tuple[int, str]] = []
    for fd, p in sorted(set(binds), key=lambda b: len(b[1])):
        if not any(within(p, q) for _, q in out):
            out.append((fd, p))
    return out


_PATH = os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW


#: What `open_plain` answers None for: a link on the way (ELOOP, ENOTDIR), a missing
#: component, no access. Anything else (EMFILE, ENFILE, ENOMEM) is raised: a walk that
#: skipped what it could not open would leave it uncovered (fail open).
_NOT_THERE = frozenset({errno.ELOOP, errno.ENOENT, errno.ENOTDIR, errno.EACCES})


def open_plain(path: str) -> int | None:
    """An `O_PATH` descriptor of absolute `path`, opened one component at a time from `/`
    with `O_NOFOLLOW` (each from the directory opened before it); None when a component is
    a link or missing (`_NOT_THERE`); other errors raised."""
    names = [n for n in path.split("/") if n]
    fd = os.open("/", _PATH | os.O_DIRECTORY)
    try:
        for name in names[:-1]:
            nxt = os.open(name, _PATH | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        if not names:
            fd, root = -1, fd
            return root
        return os.open(names[-1], _PATH, dir_fd=fd)
    except OSError as exc:
        if exc.errno in _NOT_THERE:
            return None
        raise
    finally:
        if fd >= 0:
            os.close(fd)


#: Directories of the system itself: declared as a target directory (fio `directory: /`),
#: they open only with `allow_destructive`.
SYSTEM_DIRS = ("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64",
               "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/usr", "/var")


#: Directories shared by every user and program of the host: declared writable as a whole
#: (fio `directory: /var/tmp`), every program of a run could write all of it, other users'
#: files included. They open only with `allow_destructive`; a directory of its own inside
#: (/var/tmp/mine) opens.
SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/shm", "/mnt", "/media")


def _norm(path: str) -> str:
    """`path` absolute and normal with one leading slash: POSIX lets a path keep a leading
    `//` (`abspath("//etc")` is `//etc`), which a comparison with `/etc` would miss."""
    return "/" + os.path.normpath(os.path.abspath(path)).lstrip("/")


def _shared(path: str) -> bool:
    return os.path.realpath(path) in SHARED_DIRS or _norm(path) in SHARED_DIRS


def refused_shared(paths: Iterable[str], allow: bool) -> str | None:
    """Why the first of `paths` (a runner's targets, the campaign's `sandbox.writable`)
    may not open, or None: a shared system directory (`SHARED_DIRS`) without `allow`."""
    if allow:
        return None
    for p in paths:
        if _shared(p) and os.path.isdir(p):
            real = os.path.realpath(p)
            what = p if real == _norm(p) else f"{p} ({real})"
            return (f"{what} is a directory every user of the host shares: declared "
                    "writable, every program of a run could write all of it; name a "
                    f"directory of its own inside ({real.rstrip('/')}/storlab) or set "
                    "sandbox.allow_destructive: true")
    return None


def _unwalked(path: str) -> bool:
    """Not walked for sockets and hard links (`Walls.specials`): `/`, `/home`, `/var`...
    (`SYSTEM_DIRS`, declared whole: the host's whole tree), the kernel's trees and the
    system's (`SYSTEM_TREES`): there only the sockets the host lists are covered."""
    p = _norm(path)
    return p in SYSTEM_DIRS or any(within(p, t) for t in ("/proc", "/sys", "/dev",
                                                            *SYSTEM_TREES))


#: The system's trees, at tree granularity: a directory in one (or one of them) opens
#: writable only with `allow_destructive` (outside the campaign's own directory). /var holds
#: logs, spools (cron's crontabs), mail, caches, web roots; /home and /root the users'
#: files (`.ssh/authorized_keys`, `.bashrc`); /srv, /opt services and software. `/lib*`
#: (any name starting with `lib` right below /) counts too.
SYSTEM_WRITE_TREES = ("/etc", "/usr", "/var", "/boot", "/efi", "/root", "/home", "/srv",
                      "/opt", "/run", "/proc", "/sys", "/dev", "/bin", "/sbin", "/snap",
                      "/nix", "/lost+found", "/selinux", "/cdrom")
#: Inside those, trees where a directory of one's own opens (the trees themselves are
#: shared, `SHARED_DIRS`): temporary files kept across reboots, shared memory.
OWN_DIR_TREES = ("/var/tmp", "/dev/shm")


def _system_tree(path: str) -> str | None:
    """The system tree (`SYSTEM_WRITE_TREES`) the normal path `path` lies in, or None: not
    one of `OWN_DIR_TREES` strictly below (but a systemd service's private temporary
    directory there is the service's)."""
    p = _norm(path)
    if p == "/":
        return "/"
    for own in OWN_DIR_TREES:
        if within(p, own, strict=True):
            name = p[len(own) + 1:].split("/", 1)[0]
            return own if name.startswith("systemd-private-") else None
    top = "/" + p.split("/")[1]
    if top in SYSTEM_WRITE_TREES or top.startswith("/lib"):
        return top
    if within(p, "/tmp", strict=True) and \
            p[5:].split("/", 1)[0].startswith("systemd-private-"):
        return "/tmp"
    return None


def _foreign(st: os.stat_result) -> str | None:
    """Why a directory with status `st` is not storlab's caller's alone: another user owns
    it, or its group or other users may write it (a shared directory, /tmp)."""
    if st.st_uid not in (0, os.geteuid()):
        return f"owned by uid {st.st_uid}, another user"
    if st.st_mode & 0o022:
        return (f"writable by {'other users' if st.st_mode & 0o002 else 'its group'} "
                f"(mode {stat.S_IMODE(st.st_mode):04o})")
    return None


def _changeable_link(path: str) -> str | None:
    """The first link on the way to `path` whose directory another user can change (swap
    the link for one leading elsewhere), in words, or None. Links followed as the kernel
    does (relative to the directory holding them); a missing component ends the walk."""
    todo = [n for n in _norm(path).split("/") if n]
    cur, hops = "/", 0
    while todo:
        name = todo.pop(0)
        if name == ".":
            continue
        if name == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, name)
        try:
            st = os.lstat(nxt)
        except OSError:
            return None
        if not stat.S_ISLNK(st.st_mode):
            cur = nxt
            continue
        hops += 1
        if hops > 40:
            return f"{nxt}: too many links"
        try:
            holder = os.lstat(cur)
        except OSError:
            return None
        why = _foreign(holder)
        sticky_own = holder.st_mode & stat.S_ISVTX and st.st_uid in (0, os.geteuid()) \
            and holder.st_uid in (0, os.geteuid())
        if why and not sticky_own:
            return f"the link {nxt} lies in {cur}, {why}, who may swap it"
        try:
            target = os.readlink(nxt)
        except OSError:  # removed since its lstat: nothing more on this way
            return None
        if target.startswith("/"):
            cur = "/"
        todo = [n for n in target.split("/") if n] + todo
    return None


def refused_dir(path: str, homes: Iterable[str] = ()) -> str | None:
    """Why the directory `path` (the scratch area a link leads to, with the campaign's
    `allow_destructive`; `sandbox.writable` and a runner's targets have the stricter
    `refused_outside` without it) may not open writable, in words, or None. Inside the
    campaign's directory (`homes`, real paths) it opens. Elsewhere, what it leads to
    (links resolved) may not be `/`, lie in one of the system's trees (`_system_tree`)
    or be a shared directory (`SHARED_DIRS`), and must be owned by root or the caller
    and writable by neither its group nor others (`_foreign`); no link on the way may
    lie in a directory another user can change."""
    real = os.path.realpath(path)
    if any(within(real, os.path.realpath(h)) for h in homes):
        return None
    shown = path if real == _norm(path) else f"{path} (leading to {real})"
    if real == "/" or _norm(path) == "/":
        return f"{shown} is the host's whole file system"
    if _shared(path):
        return f"{shown} is a directory every user of the host shares"
    tree = _system_tree(real) or _system_tree(path)
    if tree is not None:
        return f"{shown} lies in {tree}, one of the system's trees"
    try:
        st = os.stat(real)
    except OSError:
        return None  # not made yet: judged when it is (the run's walls)
    why = _foreign(st)
    if why:
        return f"{shown} is {why}"
    link = _changeable_link(path)
    if link:
        return f"{path}: {link}"
    return None


def refused_outside(path: str, homes: Iterable[str]) -> str | None:
    """Why `path`, declared in the campaign's `sandbox.writable`, may not open writable
    without `allow_destructive`, in words, or None: what it leads to (links resolved) must
    lie inside the campaign's own directory (`homes`, its scratch area when its own lies
    inside), with no link on the way in a directory another user may change. A deny-list
    of the system's trees cannot name every root-owned directory a root-run script or
    storlab's own interpreter lives in (`/work/app`, `/mnt/backup`, a venv's
    site-packages): outside the campaign's directory a declaration needs the opt-in."""
    homes = [os.path.realpath(h) for h in homes]
    real = os.path.realpath(path)
    if not any(within(real, h) for h in homes):
        shown = path if real == _norm(path) else f"{path} (leading to {real})"
        where = homes[0] if homes else "(none)"
        return f"{shown} lies outside the campaign's directory {where}"
    link = _changeable_link(path)
    if link:
        return f"{path}: {link}"
    return None


def opens_declared(path: str, allow: bool, homes: Iterable[str] | None = None) -> bool:
    """Whether the directory `path`, declared in `sandbox.writable` or a runner's target
    directory (fio `directory:`, a pattern's directory), opens writable: only
    inside the campaign's directory (`refused_outside`: a deny-list cannot name every
    root-owned directory a root-run script or an interpreter's site-packages lives in);
    with `allow` (`allow_destructive`), always. `homes`: the campaign's directory (None:
    the one `current()` declares)."""
    if allow:
        return True
    homes = current().homes if homes is None else homes
    return refused_outside(path, homes) is None


def _is_device(path: str) -> bool:
    """A block or character device node (following links)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISBLK(mode) or stat.S_ISCHR(mode)


def listener_uid(fd: int) -> int | None:
    """The uid the daemon listening on the Unix socket held by `fd` (an `O_PATH`
    descriptor) runs as, asked of the kernel: a connection (non-blocking, through
    /proc/self/fd, closed at once) and its `SO_PEERCRED` (the listener's credentials when it
    called listen). None when nobody listens (ECONNREFUSED) or it cannot be asked; for a
    datagram socket (no listener), its file's owner."""
    import socket
    import struct

    at = f"/proc/self/fd/{fd}"
    for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
        s = socket.socket(socket.AF_UNIX, kind | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
        try:
            try:
                s.connect(at)
            except BlockingIOError:  # its backlog is full: the kernel knows who bound it
                pass
            except OSError as exc:
                if exc.errno == errno.EPROTOTYPE:
                    continue
                if exc.errno == errno.ECONNREFUSED:
                    return None
                raise
            cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                struct.calcsize("3i"))
            pid, uid, _ = struct.unpack("3i", cred)
            # not connected (a full backlog): who made the socket's file
            return uid if pid > 0 else os.fstat(fd).st_uid
        finally:
            s.close()
    return os.fstat(fd).st_uid  # datagram: no listener to ask


def refused_socket(paths: Iterable[str], allow: bool = True) -> str | None:
    """Why the first of the campaign's `sandbox.sockets` cannot be one, or None: a path
    that exists and is not a Unix socket (one missing yet, say a server a step starts, is
    bound when it is there); without `allow` (`allow_destructive`), a socket whose daemon
    runs as root (`listener_uid`): Docker's, systemd's, a root shell's do whatever they
    are asked, outside every wall."""
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        if not stat.S_ISSOCK(st.st_mode):
            return f"{p} is not a Unix socket"
        if allow:
            continue
        try:
            fd = os.open(os.path.realpath(p), _PATH | os.O_CLOEXEC)
            try:
                uid = listener_uid(fd)
            finally:
                os.close(fd)
        except OSError as exc:  # not ours to connect to (EACCES), gone meanwhile...
            return f"{p}: cannot ask who listens there ({exc.strerror or exc})"
        if uid == 0:
            return (f"{p}: the daemon listening there runs as root, and the runs' programs "
                    "could have it do anything outside the sandbox (a root daemon's socket "
                    "amounts to root); set sandbox.allow_destructive: true if that is "
                    "really meant")
    return None


#: Where daemons put their Unix sockets: shown read-only, a socket bound there after the
#: run's walls were built (a root daemon restarting) is still reached by connect().
SOCKET_DIRS = ("/run", "/var/run")


def held_within(fd: int, places: Iterable[str]) -> bool:
    """Whether what the descriptor `fd` holds lies in one of `places` (real paths), judged
    where the descriptor leads (the kernel's name of it), not by a path that may lead
    elsewhere since it was looked at (a link swapped in after the campaign's check)."""
    held = os.readlink(f"/proc/self/fd/{fd}")
    return any(within(held, p) for p in places)


def refused_readable(paths: Iterable[str], network: bool, allow: bool,
                     sockets: bool | str = False, homes: Iterable[str] = ()) -> str | None:
    """Why the first of the campaign's `sandbox.readable` may not be shown without `allow`
    (`allow_destructive`), or None. A place inside the campaign's directory (`homes`:
    shown anyway) passes.

    For a storlab run as root, a place must otherwise lie (links resolved) in one of the
    system's trees the walls show anyway (`SYSTEM_TREES`: declaring /usr/share is a no-op);
    what it leads to is judged as a `sandbox.writable` declaration is (`refused_outside`):
    inside the campaign's directory, no link on the way another user may swap. Every other
    place needs the opt-in: the programs run as root, and a deny-list of what root alone
    may read cannot name it all (`/` or `/root/..` show /root and /home whole, /var shows
    cron's crontabs and /var/backups, /var/lib a root daemon's socket bound during a run);
    what they read they may copy where others reach it (with the network, `network`:
    `sandbox.network`, off the machine; without, into a directory of the run's while it
    lasts, or a declared writable place). The walls judge the place again on the
    descriptor they bind (`walls_for`).

    For a storlab not run as root (its programs read only what its user may), the one
    place refused is, when the runs may make Unix sockets (`sockets`: `sandbox.sockets`,
    `unix_sockets`, `io_uring`; or, as text, the program that gets them without a
    declaration and why: fio's net engine with `protocol=unix`, named in the line), /run,
    /var/run, a place inside them or above them (`SOCKET_DIRS`): a read-only bind does not
    stop connect(), and a daemon that starts listening there during a run is not covered
    by the walls built at its start (as root, the same places are refused with this
    reason, which names the program)."""
    if allow:
        return None
    own = [os.path.realpath(h) for h in homes]
    root = os.geteuid() == 0
    for p in paths:
        real = os.path.realpath(p)
        if any(within(real, h) for h in own) and (not root
                                                  or refused_outside(p, own) is None):
            continue
        near = sockets and next((d for d in SOCKET_DIRS for x in (real, _norm(p))
                                 if within(x, d) or within(d, x)), None)
        if near:
            who = (f"{sockets} makes Unix sockets of its own" if isinstance(sockets, str)
                   else "the campaign lets the runs make Unix sockets")
            return (f"{p} is or holds {near}, where daemons (root's among them) put their "
                    f"Unix sockets, and {who}: one a root daemon binds there during a run "
                    "would be reached (a read-only view does not stop connect()); set "
                    "sandbox.allow_destructive: true if that is really meant")
        if not root or any(within(real, t) for t in SYSTEM_TREES):
            continue  # the user's own reach; the system's trees are shown anyway
        why = refused_outside(p, own) or ""
        if not any(within(real, h) for h in own):
            why += " and the system's trees shown anyway (/usr, /etc)"
        how = ("with sandbox.network they could send what they read there off the machine"
               if network else "they could copy what they read there where other users "
               "reach it")
        return (f"{why}: the runs' programs run as root, {how}; copy what they need into "
                "the campaign's directory, or set sandbox.allow_destructive: true if "
                "showing it is really meant")
    return None


def walls_for(cwd: str, targets: Iterable[str] = (), allow_destructive: bool = False,
              network: bool = False, unix_sockets: bool = False,
              io_uring: bool = False, ports: Iterable[int] = ()) -> Walls:
    """The walls of a program run in `cwd` (always writable) for the declared `targets`
    (absolute paths: the runner's, then the campaign's `sandbox.writable`). The caller
    closes them (`Walls.close`) once the program started.

    Without `allow_destructive` a target opens only as named, without a link on the way
    (`open_plain`; a declared file that does not exist yet opens its directory when that
    lies inside the campaign's directory, see `_open_target`): a directory, or a regular
    file with one hard link inside the campaign's directory or scratch area
    (`Declared.homes`); a `sandbox.writable` directory only inside the campaign's
    directory (`refused_outside`), a runner's target directory likewise; a
    declared socket whose daemon runs as root is asked about again here and refused
    (`Walls.socket`); a path through a link (or /proc/self/...), a file with several
    links, an existing file elsewhere, a system directory (`_system_tree`), a shared one
    (`SHARED_DIRS`) and a device stay shut (the static checks refuse them with a message
    first); files with several links inside a writable directory are shown read-only over
    themselves (`Walls.specials`). With `allow_destructive` targets are resolved (links
    followed) and open as what they name: a device node under /dev is bound into the
    private /dev, writable. `/proc/...` targets never open
    (storlab's /proc/self is not the program's: declare the real path).

    Besides the system's trees, the program sees the campaign's directory and the declared
    `readable` places read-only (a socket in them does not open), the declared `sockets`,
    and the host's network when `network` (the runner's need: TCP to and on `ports` only)
    or the campaign says so (`sandbox.network`: every port).
    """
    decl = current()
    allow = allow_destructive or decl.allow_destructive
    w = Walls(device_writes=allow)
    try:
        # the run's directory as the kernel names it: bwrap cannot make a mount point
        # through a link (a scratch directory that is a link elsewhere); the program still
        # reaches it by `cwd`
        made = decl.run_dir
        held = made is not None and _norm(made[0]) == cwd and decl.run_fd is not None
        # the run's directory as storlab holds it: the campaign's directory swapped for a
        # link since (between the run's checks and here) does not move the program
        fd = (os.dup(decl.run_fd) if held and decl.run_fd is not None else
              os.open(cwd, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY))
        w.add(fd, os.readlink(f"/proc/self/fd/{fd}"))
        w.run_at = w.writable[-1]
        if made is not None and _norm(made[0]) == cwd:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != made[1:]:
                raise CampaignError(f"{cwd} is no longer the run directory storlab made (it "
                                    "leads elsewhere now); refusing to start a program there")
        homes = [os.path.realpath(h) for h in decl.homes]
        for t in [*targets, *decl.paths]:  # both inside the campaign's directory only
            _open_target(w, _norm(t), allow, homes)
        for bfd, at in decl.bound:  # opened by the runner: bound as it holds them
            w.add(os.dup(bfd), at)
        # read-only, and sockets: what the path leads to, shown where the kernel names it
        # and at the path given (a program uses the name it was told). The campaign's
        # `readable`, for root without the opt-in: judged again on the descriptor bound
        # (`refused_readable` judged the path; a link swapped in since leads elsewhere).
        # The campaign's opt-in only: a runner's own `allow_destructive` (fio's, for its
        # block device) is about its targets, not about what the campaign shows
        inside = (None if decl.allow_destructive or os.geteuid() != 0
                  else [*homes, *SYSTEM_TREES])
        for r, judged in [*((h, None) for h in (*decl.homes, *decl.shown)),
                          *((r, inside) for r in decl.readable)]:
            for at in dict.fromkeys((os.path.realpath(r), _norm(r))):
                w.show(os.path.realpath(r), at, inside=judged)
                if any(p == at for _, p in w.readonly) and not _unwalked(at):
                    w.trees.append(at)
        w.strict = not allow
        for sock in decl.sockets:
            for at in dict.fromkeys((_norm(sock), os.path.realpath(sock))):
                w.socket(os.path.realpath(sock), at, declared=None if allow else sock)
        w.network = network or decl.network or decl.implicit_network
        if w.network and not decl.network:  # the runner's need only: its TCP ports
            w.tcp_ports = tuple(sorted({*ports, *decl.ports}))
        w.unix_sockets = unix_sockets or bool(decl.sockets) or decl.unix_sockets
        w.io_uring = io_uring or decl.io_uring
        w.realtime = decl.realtime
        w.lock_memory = decl.lock_memory
    except BaseException:
        w.close()
        raise
    return w


def _open_target(w: Walls, t: str, allow: bool, homes: Sequence[str]) -> None:
    """Add target `t` to `w` if it opens (see `walls_for`); `homes`: the campaign's
    directory (real paths). A runner's target and a `sandbox.writable` entry open without
    `allow` only inside the campaign's directory (a directory: where the descriptor held
    leads)."""
    if t == "/proc" or t.startswith("/proc/"):  # storlab's /proc/self is not the program's
        return
    if _is_device(t):  # bound read-only and nodev (not openable) unless `allow`
        real = os.path.realpath(t)
        if not real.startswith("/dev/"):  # elsewhere a program of a run could swap it
            return
        w.devices.append((real, real))
        if t != real and t.startswith("/dev/"):  # /dev/disk/by-id/... inside too
            w.devices.append((real, t))
        return
    if allow:
        t = os.path.realpath(t)
    parent = os.path.dirname(t)
    if not os.path.lexists(t) and within(os.path.realpath(parent), w.writable[0]):
        return  # in the run's directory (w.writable[0]), writable already: nothing to make
    if not os.path.lexists(t):
        # A file not made yet in another existing directory opens that directory only
        # with `allow` (fio lays a file out by removing and making it again, which a bind
        # of the file alone refuses: EBUSY). Without, nothing opens: the campaign's
        # preflight refuses such a target (`refused_new_file`) unless its directory is
        # declared in `sandbox.writable`, which opens as declared.
        if allow:
            dfd = open_plain(parent)
            if dfd is not None and stat.S_ISDIR(os.fstat(dfd).st_mode):
                w.add(dfd, parent)
            elif dfd is not None:
                os.close(dfd)
        return
    fd = open_plain(t)
    if fd is None:
        return
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):  # judged as held: where the descriptor leads, its owner
        ok = allow or held_within(fd, homes)
    elif stat.S_ISREG(st.st_mode):
        ok = allow or (st.st_nlink == 1 and any(within(t, h) for h in homes))
    else:  # a link (O_NOFOLLOW opened the link itself), a FIFO, a socket, a device
        ok = False
    if ok:
        w.add(fd, t)
    else:
        os.close(fd)


def wrap(program: Sequence[str], cwd: str | None, targets: Iterable[str] = (),
         allow_destructive: bool = False, env: Mapping[str, str] | None = None,
         network: bool = False, unix_sockets: bool = False,
         io_uring: bool = False, ports: Iterable[int] = (),
         executables: Sequence[str] | None = None) -> tuple[list[str], Walls | None]:
    """`program` inside its walls (with its environment `env` set inside), and the walls:
    start the argv with `pass_fds=walls.all_fds` and BWRAP_ENV_OUTSIDE as its environment,
    then `walls.close()`. `network`: the runner needs the host's network for this program
    (TCP to and on `ports` only, unless the campaign declares `sandbox.network`);
    `unix_sockets`, `io_uring`: it makes Unix sockets of its own (fio's net engine with
    `protocol=unix`), io_uring rings (fio's io_uring engines).
    `program` unchanged (and no walls) for a `system_writable` step, or when the user opted
    out. `executables`: the programs (found as `program[0]` is) the program may execute,
    the one started first (a word of `program`: what comes before it, `setpriv ... --`,
    runs before the rules; a `#!` script started gets no rule): nothing else executes inside (Landlock's execute rule, where the
    kernel has Landlock); None: anything (the command runner, steps).
    Raises CampaignError when the walls cannot be built (see `require_sandbox`)."""
    if current().system or unsandboxed():
        return list(program), None
    require_sandbox()
    cwd = _norm(cwd or os.getcwd())
    w = walls_for(cwd, targets, allow_destructive, network, unix_sockets, io_uring, ports)
    try:
        for home in _install_trees(program[0], cwd, (env or os.environ).get("PATH")):
            w.show(home)
        for lib in ld_conf_opt_dirs():  # a /usr/bin program's libraries found under /opt
            for at in dict.fromkeys((os.path.realpath(lib), lib)):
                w.show(os.path.realpath(lib), at)
        # the run's directory as the kernel names it (the one bound): a link on the way
        # may not exist inside
        real = w.run_at or os.path.realpath(cwd)
        found = [] if executables is None or exec_missing() is not None else [
            _found(e, cwd, (env or os.environ).get("PATH")) for e in executables]
        # a `#!` wrapper (a `fio:` script that execs the real fio) starts programs by
        # design: no rule holds what it starts
        if executables and found and not is_script(found[0]):
            if not os.path.isfile(PERL):
                raise CampaignError(f"no {PERL} (Debian package perl-base), which enters the "
                                    "program's execute rules inside its walls")
            # the shim starts `executables[0]` where the program names it (after a
            # `setpriv ... --` that drops the account first), else the program itself
            at = program.index(executables[0]) if executables[0] in program else 0
            w.executes = (at, found[0], tuple(dict.fromkeys(
                f for e in found for f in program_files(e))))
        tmp = (env or {}).get("TMPDIR")
        if env is not None and not (tmp and any(within(os.path.realpath(tmp), p)
                                                for p in w.writable)):
            env = {**env, "TMPDIR": real}  # /tmp is read-only: temporary files go here
        return w.argv(program, real, env), w
    except BaseException:
        w.close()
        raise


def _found(name: str, cwd: str, path: str | None) -> str:
    """The file `name` starts (on `path`, or relative to `cwd`), absolute; CampaignError
    when there is none."""
    found = name if os.sep in name else shutil.which(name, path=path or os.defpath)
    if found is None:
        raise CampaignError(f"cannot find the program {name!r} to allow it to execute")
    return os.path.join(cwd, found)


def shown_install_trees(name: str, cwd: str, path: str | None = None) -> list[str]:
    """The install trees of program `name` shown read-only beside the system's trees (for
    `storlab status`): none for a program under /usr, /bin..."""
    return [t for t in _install_trees(name, cwd, path if path is not None else
                                      os.environ.get("PATH"))
            if not any(within(t, s) for s in SYSTEM_TREES)]


#: Beside a program in /opt/bin or /opt/sbin (a prefix of its own, `make install
#: PREFIX=/opt`), what the prefix holds for it: not /opt whole (other software's state).
_OPT_PREFIX = ("bin", "sbin", "lib", "lib32", "lib64", "libexec", "share")


@functools.cache
def ld_conf_opt_dirs(conf: str = "/etc/ld.so.conf") -> tuple[str, ...]:
    """The directories under /opt that `conf` (and the files it includes, by glob) names:
    the dynamic linker finds a /usr/bin program's libraries there, so the sandbox shows
    them read-only (those directories only, not the software's tree)."""
    import glob

    out: list[str] = []
    seen: set[str] = set()

    def read(path: str) -> None:
        if path in seen:
            return
        seen.add(path)
        try:
            with open(path, errors="replace") as fh:
                lines = fh.read().splitlines()
        except OSError:
            return
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if line.startswith("include"):
                for pattern in line.split()[1:]:
                    pattern = os.path.join(os.path.dirname(path), pattern)
                    for inc in sorted(glob.glob(pattern)):
                        read(inc)
            elif line.startswith("/"):
                d = _norm(line.split("=", 1)[0])  # old `dir=TYPE` entries
                if within(d, "/opt", strict=True) and d not in out:
                    out.append(d)

    read(conf)
    return tuple(out)


def _install_trees(name: str, cwd: str, path: str | None) -> list[str]:
    """Where the program `name` is installed, to show it read-only: for the program as
    found (on `path`, or relative to `cwd`) and for what its links lead to: in a home
    (/root, /home/<user>), the directory above its `bin`/`sbin` when that lies deeper than
    the home's entry (/root/.pyenv/versions/3.11.7) or is a virtualenv, the entry whole
    for a version manager's shim (/root/.pyenv/shims/python: /root/.pyenv), else its own
    directory (not the entry whole: /root/.cargo holds tokens); elsewhere the
    directory above its `bin`/`sbin` (a Python's `lib` lies there, a virtualenv's
    `pyvenv.cfg`), else its own directory; the program's file alone rather than a home, a
    system directory or a directory right below / (/data). Under /opt: the package's
    directory (/opt/<x> for /opt/<x>/bin/prog, the /opt(7) layout); for /opt/bin/prog the
    prefix's directories that exist (`_OPT_PREFIX`)."""
    found = name if os.sep in name else shutil.which(name, path=path or os.defpath)
    if found is None:
        return []
    found = os.path.join(cwd, found)
    out = []
    for exe in dict.fromkeys((_norm(found), os.path.realpath(found))):
        parts = exe.split("/")  # ['', 'root', '.pyenv', ...]
        d = os.path.dirname(exe)
        if parts[1] == "opt" and len(parts) > 3 and parts[2] in ("bin", "sbin"):
            out += [d for d in (f"/opt/{p}" for p in _OPT_PREFIX)
                    if d == os.path.dirname(exe) or os.path.isdir(d)]
            continue
        if parts[1] == "opt" and len(parts) > 3:
            out.append("/".join(parts[:3]))
            continue
        entry = ("/".join(parts[:3]) if parts[1] == "root" and len(parts) > 3 else
                 "/".join(parts[:4]) if parts[1] == "home" and len(parts) > 4 else None)
        if entry is not None:
            # in a home: an entry of the home whole (/root/.cargo holds registry tokens
            # beside rustup) only for a version manager's shim (<entry>/shims/python:
            # pyenv, rbenv, nodenv run their tree's libexec); else the directory above the
            # program's bin/sbin when it lies deeper (/root/.pyenv/versions/3.11.7) or is
            # a virtualenv (its pyvenv.cfg), else the program's own directory
            above = os.path.dirname(d) if os.path.basename(d) in ("bin", "sbin") else None
            top = entry if d == f"{entry}/shims" else above if above is not None and (
                within(above, entry, strict=True)
                or os.path.isfile(os.path.join(above, "pyvenv.cfg"))) else d
            out.append(exe if top in ("/root", *SYSTEM_DIRS) or os.path.dirname(top)
                       == "/home" else top)
            continue
        else:
            top = os.path.dirname(d) if os.path.basename(d) in ("bin", "sbin") else d
            if top in SYSTEM_DIRS or os.path.dirname(top) == "/":
                top = d
        # a program right in a home, a system or top directory (/data): that file alone
        out.append(exe if top in SYSTEM_DIRS or os.path.dirname(top) in ("/", "/home")
                   else top)
    return list(dict.fromkeys(out))

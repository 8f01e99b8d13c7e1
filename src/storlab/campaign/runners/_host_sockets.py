"""The Unix sockets bound on the host, for the walls to cover those in what a program sees.

A network namespace's `/proc/net/unix` lists only its own sockets, while `connect()` on a
path crosses network namespaces: a root daemon in a container with a socket volume, under
`ip netns exec` or in a systemd unit with `PrivateNetwork=yes` listens on a path the host's
own list never names. So every network namespace that has a task is read
(`/proc/<pid>/task/<tid>/net/unix` of one thread per namespace, deduplicated by the
namespace's inode: `unshare(CLONE_NEWNET)` and `setns` move the calling thread only; a
task may end meanwhile: the next one of that namespace is read).

A listed name does not always say where the socket's file is: a name bound relative to
the daemon's working directory (`ctl.sock`), one whose directory was renamed (or whose
file was moved or replaced) since, one through a link (judged where it leads), one of
another mount namespace's view (where on the host another user may have left a stale
socket file). So each namespace that lists a path-bound socket is asked once
(`NETLINK_SOCK_DIAG`, `UNIX_DIAG_VFS`, in that namespace) for the device and inode of each
socket's file: a name counts only when the file there is that one, and `find` looks for
the others in the trees a program sees.
"""

from __future__ import annotations

import collections
import ctypes
import os
import re
import socket
import stat
import struct
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...errors import NamespaceGone
from ...fileio import within


@dataclass(frozen=True)
class Unplaced:
    """A bound socket whose listed name does not lead to it: `name` as listed (relative,
    or a path now missing or another file: a stale socket left there, say), in the network
    namespace `netns` (its inode) of the tasks `tasks` (their /proc directories, any of
    them), the socket's own inode `sock`; `vfs`: its file's (device, inode low 32 bits) as
    the kernel gave them (`bound` asked), None when the kernel could not be asked (every
    task of the namespace ended meanwhile)."""

    name: str
    netns: int
    tasks: tuple[str, ...]
    sock: int
    vfs: tuple[int, int] | None = None
    #: why the kernel could not be asked (`vfs` None): not asked when its tasks all ended
    error: str | None = None


def _netns(path: str, dir_fd: int | None = None) -> int:
    """The inode of the network namespace `path` (`/proc/PID/ns/net`) is, read from the
    link's text (`net:[4026531840]`: half a stat's cost, paid for every process at every
    start); by a stat when the text says otherwise. OSError when it is gone."""
    text = os.readlink(path, dir_fd=dir_fd)
    if text.startswith("net:[") and text.endswith("]") and text[5:-1].isascii() \
            and text[5:-1].isdigit():
        return int(text[5:-1])
    return os.stat(path, dir_fd=dir_fd).st_ino


def _namespaces() -> dict[int, list[str]]:
    """Each network namespace that has a task (its inode) and up to 4 of its tasks (their
    /proc directories), this thread's own namespace first. Every thread of every process
    is looked at: `unshare(CLONE_NEWNET)` and `setns` move the calling thread only, so a
    daemon's thread may live in a namespace no process's /proc/PID/ns/net names."""
    out: dict[int, list[str]] = {}
    try:
        out[_netns("/proc/thread-self/ns/net")] = ["/proc/thread-self"]
    except OSError:
        pass
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:  # gone
            continue
        for tid in tids:
            task = f"/proc/{pid}/task/{tid}"
            try:
                ino = _netns(f"{task}/ns/net")
            except OSError:  # gone, or not ours to look at
                continue
            got = out.setdefault(ino, [])
            if len(got) < 4:
                got.append(task)
    return out


def _read_unix(tasks: Sequence[str], netns: int) -> list[tuple[int, str]] | None:
    """(socket inode, name) of the path-bound sockets `<task>/net/unix` lists, from the
    first of `tasks` still in the network namespace `netns` (its inode, asked before and
    after the read through the task's own /proc directory: a task that moved, or a pid
    ended and reused meanwhile by a process of another namespace, is not read for this
    one); None when none is."""
    for task in tasks:
        try:
            dfd = os.open(task, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if _netns("ns/net", dir_fd=dfd) != netns:
                continue
            fd = os.open("net/unix", os.O_RDONLY | os.O_CLOEXEC, dir_fd=dfd)
            with open(fd, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().split("\n")[1:]  # a name may hold \x1c, \x85...
            if _netns("ns/net", dir_fd=dfd) != netns:
                continue
        except OSError:
            continue
        finally:
            os.close(dfd)
        out = []
        for line in lines:
            f = line.split(None, 7)
            if len(f) == 8 and not f[7].startswith("@") and f[6].isdigit():
                out.append((int(f[6]), f[7]))
        return out
    return None


def resolved(name: str) -> str:
    """`name` with its directory's links followed (the last component not): where the
    file a path-bound socket's name leads to lies, as the walls show it."""
    head, tail = os.path.split(name)
    return os.path.join(os.path.realpath(head or "."), tail)


def bound(locate: bool = True) -> tuple[list[str], list[Unplaced]]:
    """The bound Unix sockets of every network namespace that has a task: the paths of
    those whose listed name leads to them now (their directory's links followed:
    `resolved`), and the sockets whose name does not (`Unplaced`). A name leads to its
    socket only when the file there is that socket's: the kernel's socket diagnostics
    (`UNIX_DIAG_VFS`, one dump per namespace that lists a path-bound socket) give its
    file's device and inode, compared with the file's at the name (a stale socket file
    another user left at a name a daemon of another mount namespace listens under is not
    the daemon's). When the kernel cannot be asked about a namespace whose tasks are still
    there, its sockets are all unplaced (`placed` fails closed on them); those of one
    whose tasks all ended meanwhile are placed by name alone, as a name that leads to a
    socket. `locate` False (for a program that makes no Unix socket, which only the
    covering of what names lead to concerns): the kernel is not asked, every name that
    leads to a socket is placed by name, and none is returned unplaced."""
    placed: list[str] = []
    unplaced: list[Unplaced] = []
    spaces = _namespaces()
    lists = {ns: got for ns, tasks in spaces.items() if (got := _read_unix(tasks, ns))}
    answers = _dumps({ns: spaces[ns] for ns in lists}) if locate else {}
    for ns, listed in lists.items():
        tasks = spaces[ns]
        answer = answers.get(ns)
        error = None
        if answer is None or isinstance(answer, NamespaceGone):  # as before the kernel was asked: a name
            vfs: dict[int, tuple[int, int]] | None = None  # leading to a socket does
        elif isinstance(answer, OSError):  # every one of them unplaced: `placed` says why
            vfs, error = None, str(answer)
        else:
            vfs = answer
        for sock, name in listed:
            want = vfs.get(sock) if vfs is not None else None
            if name.startswith("/"):
                at = resolved(name)
                try:
                    st = os.lstat(at)
                except OSError:
                    st = None
                if st is not None and stat.S_ISSOCK(st.st_mode):
                    placed.append(at)  # covered whatever it is: harmless
                    if want is not None and _same_file(st, want):
                        continue
                    if (vfs is None and error is None) or (vfs is not None and want is None):
                        continue  # its namespace gone, or the socket closed since listed
            if locate and (vfs is None or want is not None):
                unplaced.append(Unplaced(name, ns, tuple(tasks), sock, want, error))
    return placed, unplaced


def _same_file(st: os.stat_result, vfs: tuple[int, int]) -> bool:
    """Whether `st` (an lstat) is the file the kernel's (device, inode low 32 bits) name.
    The device is the file system's own, which for a btrfs subvolume or an overlay is not
    the `st_dev` a stat gives: compared only where the mount table knows it."""
    dev, ino = vfs
    if st.st_ino & 0xFFFFFFFF != ino:
        return False
    return st.st_dev == dev or _mounted([dev]) is None


# NETLINK_SOCK_DIAG for AF_UNIX (linux/sock_diag.h, linux/unix_diag.h). Written by hand:
# the venv has no netlink library (pyroute2 is not a dependency, and adding one for a
# single 40-byte request and its replies is more to trust than these few lines).
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_UDIAG_SHOW_VFS = 0x2
_UNIX_DIAG_VFS = 1
_CLONE_NEWNET = 0x40000000


def _dump_vfs() -> dict[int, tuple[int, int]]:
    """{socket inode: (st_dev, st_ino) of its file} of every path-bound Unix socket of the
    calling thread's network namespace (`UNIX_DIAG_VFS`; the kernel gives the inode's low
    32 bits). Raises OSError when the kernel does not answer."""
    req = struct.pack("=IHHII", 16 + 24, _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP,
                      1, 0) + struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0,
                                          _UDIAG_SHOW_VFS, 0xFFFFFFFF, 0xFFFFFFFF)
    out: dict[int, tuple[int, int]] = {}
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC,
                       _NETLINK_SOCK_DIAG) as s:
        s.settimeout(5)
        s.sendto(req, (0, 0))
        while True:
            data = s.recv(1 << 16)
            if not data:
                raise OSError("sock_diag: an empty reply")
            if _parse_vfs(data, out):
                break
    return out


def _parse_vfs(data: bytes, out: dict[int, tuple[int, int]]) -> bool:
    """Read one datagram of a `SOCK_DIAG_BY_FAMILY` dump into `out` (`_dump_vfs`): True
    once it ends the dump (`NLMSG_DONE`). OSError for the kernel's error (`NLMSG_ERROR`)
    and for a message that does not fit (a length below the header's or past what was
    received, a body shorter than a `unix_diag_msg`): never a struct.error traceback,
    never a socket silently left out."""
    at = 0
    while at < len(data):
        if at + 16 > len(data):
            raise OSError("sock_diag: a truncated reply")
        length, kind = struct.unpack_from("=IH", data, at)
        if length < 16 or at + length > len(data):
            raise OSError("sock_diag: a malformed reply")
        if kind == _NLMSG_DONE:
            return True
        if kind == _NLMSG_ERROR:
            if length < 20:
                raise OSError("sock_diag: a malformed reply")
            err = -struct.unpack_from("=i", data, at + 16)[0]
            raise OSError(err, f"sock_diag: {os.strerror(err)}")
        if length < 16 + 16:
            raise OSError("sock_diag: a malformed reply")
        body = at + 16
        sock = struct.unpack_from("=I", data, body + 4)[0]
        a = body + 16
        while a + 4 <= at + length:
            alen, atype = struct.unpack_from("=HH", data, a)
            if alen < 4 or a + alen > at + length:
                raise OSError("sock_diag: a malformed reply")
            if atype == _UNIX_DIAG_VFS and alen >= 12:
                ino, dev = struct.unpack_from("=II", data, a + 4)
                out[sock] = (os.makedev(dev >> 20, dev & 0xFFFFF), ino)
            a += (alen + 3) & ~3
        at += (length + 3) & ~3
    return False


def _dump_one(tasks: Sequence[str], netns: int, libc: ctypes.CDLL
              ) -> dict[int, tuple[int, int]]:
    """`_dump_vfs` in the network namespace `netns`, entered (`setns`, by the calling
    thread) through the first of `tasks` still in it. `NamespaceGone` when none of them
    is left there, OSError when the kernel cannot be asked."""
    errors: list[OSError] = []
    for task in tasks:
        try:
            fd = os.open(f"{task}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, ProcessLookupError):
            continue
        except OSError as exc:
            errors.append(exc)
            continue
        try:
            if os.fstat(fd).st_ino != netns:  # it moved (or the pid was reused) meanwhile
                continue
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                e = ctypes.get_errno()
                errors.append(OSError(e, f"setns: {os.strerror(e)}"))
                continue
            return _dump_vfs()
        finally:
            os.close(fd)
    if not errors:
        raise NamespaceGone(f"no task left in network namespace {netns}")
    raise OSError(f"cannot ask the kernel about its sockets ({errors[-1]})")


def _dumps(groups: dict[int, Sequence[str]]
           ) -> dict[int, dict[int, tuple[int, int]] | OSError]:
    """`_dump_vfs` of each network namespace of `groups` (its inode: its tasks), or why
    the kernel could not be asked there (`NamespaceGone`, OSError). This thread's own
    namespace is asked here; the others by one thread of its own that enters each in turn (`setns`
    changes the calling thread only; the thread ends with it)."""
    own = os.stat("/proc/thread-self/ns/net").st_ino
    out: dict[int, dict[int, tuple[int, int]] | OSError] = {}
    if own in groups:
        try:
            out[own] = _dump_vfs()
        except OSError as exc:
            out[own] = exc
    others = {ns: tasks for ns, tasks in groups.items() if ns != own}
    if not others:
        return out

    def ask() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        for ns, tasks in others.items():
            try:
                out[ns] = _dump_one(tasks, ns, libc)
            except OSError as exc:
                out[ns] = exc
            except BaseException as exc:  # noqa: BLE001 (handed to the caller)
                out[ns] = OSError(str(exc))

    t = threading.Thread(target=ask, name="storlab-sock-diag", daemon=True)
    t.start()
    t.join()
    for ns in others:
        out.setdefault(ns, OSError("the kernel's answer did not come"))
    return out


def placed(unplaced: Iterable[Unplaced]) -> dict[int, tuple[int, Unplaced]]:
    """{inode of its file (low 32 bits): (its file system's device, socket)} for
    `unplaced`, as the kernel gave them to `bound` (the device is the file system's own,
    which for a btrfs subvolume or an overlay is not the `st_dev` a stat gives: only used
    to narrow where to look, `_mounted`). OSError when the kernel could not be asked about
    one (its namespace's tasks all ended meanwhile): it cannot be looked for. A socket the
    kernel no longer lists is closed: nothing to look for."""
    out: dict[int, tuple[int, Unplaced]] = {}
    for u in unplaced:
        if u.vfs is None:
            raise OSError(u.error or "every task of its network namespace ended before "
                          "the kernel could be asked there")
        dev, ino = u.vfs
        out[ino] = (dev, u)
    return out


#: Where `find` last found a socket's file: its inode (low 32 bits): path.
_FOUND: dict[int, str] = {}
#: Entries `find` looks at before it gives up (fails closed); the system's /usr and /etc
#: hold some 150,000 here.
BUDGET = 1_000_000


def _unescape(field: str) -> str:
    """A mountinfo path: `\\040` and the like are octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mounted(devs: Iterable[int]) -> list[str] | None:
    """Where the file systems `devs` are mounted in this mount namespace (the one bwrap
    builds from); None when one of them is mounted nowhere mountinfo says (a device the
    kernel names otherwise than mountinfo: look everywhere)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            rows = [r.split() for r in fh]
    except OSError:
        return None
    by_dev: dict[int, list[str]] = {}
    for r in rows:
        if len(r) > 4 and ":" in r[2]:
            major, _, minor = r[2].partition(":")
            if major.isdigit() and minor.isdigit():
                by_dev.setdefault(os.makedev(int(major), int(minor)), []).append(
                    _unescape(r[4]))
    out: list[str] = []
    for d in set(devs):
        if d not in by_dev:
            return None
        out += by_dev[d]
    return out


def narrowed(roots: Sequence[str], devs: Iterable[int]) -> list[str]:
    """The parts of `roots` where a file of the file systems `devs` can lie: a root inside
    one of their mount points, or a mount point inside a root (a socket on a tmpfs
    mounted nowhere shown needs no look at all)."""
    mounts = _mounted(devs)
    if mounts is None:
        return list(roots)
    out = [r for r in roots if any(within(r, m) for m in mounts)]
    out += [m for m in mounts for r in roots if within(m, r) and not within(r, m)]
    return out


def find(roots: Sequence[str], wanted: Iterable[int], budget: int | None = None
         ) -> tuple[list[str], set[int], bool]:
    """The paths of the sockets whose inodes (low 32 bits) are `wanted` under `roots`
    (links not followed, /proc, /sys and /dev skipped), looked for breadth first, stopping
    once all are found: (paths, those not found, whether the whole of `roots` was
    looked at: False when `budget` entries did not do). A socket of another file system
    with the same inode number is found too (covered for nothing: harmless)."""
    left = set(wanted)
    found: list[str] = []
    budget = BUDGET if budget is None else budget
    tops: list[str] = []
    for r in sorted(set(roots), key=len):
        if any(within(r, t) for t in ("/proc", "/sys", "/dev")) or os.path.islink(r) or \
                any(within(r, t) for t in tops):
            continue
        tops.append(r)
    for key in list(left):  # where it was last time, unless it moved (or lies elsewhere
        p = _FOUND.get(key)  # than these roots: another program's walls found it)
        try:
            st = os.lstat(p) if p and any(within(p, t) for t in tops) else None
        except OSError:
            st = None
        if st is not None and stat.S_ISSOCK(st.st_mode) and st.st_ino & 0xFFFFFFFF == key:
            found.append(p)  # type: ignore[arg-type]
            left.discard(key)
    queue = collections.deque(tops)
    seen = 0
    while left and queue:
        d = queue.popleft()
        try:
            it = os.scandir(d)
        except OSError:
            continue  # gone, or not listable: a program of the run cannot list it either
        with it:
            for e in it:
                seen += 1
                if seen > budget:
                    return found, left, False
                try:
                    if e.is_dir(follow_symlinks=False):
                        if not any(within(e.path, t) for t in ("/proc", "/sys", "/dev")):
                            queue.append(e.path)
                        continue
                    if e.is_file(follow_symlinks=False) or e.is_symlink():
                        continue
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                key = st.st_ino & 0xFFFFFFFF
                if stat.S_ISSOCK(st.st_mode) and key in left:
                    found.append(e.path)
                    _FOUND[key] = e.path
                    left.discard(key)
                    if not left:
                        break
    return found, left, not queue or not left

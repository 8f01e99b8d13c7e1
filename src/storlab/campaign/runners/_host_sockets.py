"""The Unix sockets bound on the host, for the walls to cover those in what a program sees.

A network namespace's `/proc/net/unix` lists only its own sockets, while `connect()` on a
path crosses network namespaces: a root daemon in a container with a socket volume, under
`ip netns exec` or in a systemd unit with `PrivateNetwork=yes` listens on a path the host's
own list never names. So every network namespace that has a process is read
(`/proc/<pid>/net/unix` of one process per namespace, deduplicated by the namespace's inode;
a process may end meanwhile: the next one of that namespace is read).

A listed name does not always say where the socket's file is: a name bound relative to
the daemon's working directory (`ctl.sock`), or one whose directory was renamed (or whose
file was moved or replaced) since. For those the kernel's socket diagnostics
(`NETLINK_SOCK_DIAG`, `UNIX_DIAG_VFS`, asked in the socket's own network namespace) give
the file's device and inode, and `find` looks for them in the trees a program sees.
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

from ...fileio import within


@dataclass(frozen=True)
class Unplaced:
    """A bound socket whose listed name does not lead to it: `name` as listed (relative,
    or a path now missing or not that socket), in the network namespace `netns` (its
    inode) of process `pids` (any of them), the socket's own inode `sock`."""

    name: str
    netns: int
    pids: tuple[int, ...]
    sock: int


def _netns(path: str, dir_fd: int | None = None) -> int:
    """The inode of the network namespace `path` (`/proc/PID/ns/net`) is, read from the
    link's text (`net:[4026531840]`: half a stat's cost, paid for every process at every
    start); by a stat when the text says otherwise. OSError when it is gone."""
    text = os.readlink(path, dir_fd=dir_fd)
    if text.startswith("net:[") and text.endswith("]") and text[5:-1].isascii() \
            and text[5:-1].isdigit():
        return int(text[5:-1])
    return os.stat(path, dir_fd=dir_fd).st_ino


def _namespaces() -> dict[int, list[int]]:
    """Each network namespace that has a process (its inode) and up to 4 of its processes,
    this process's own namespace first."""
    out: dict[int, list[int]] = {}
    try:
        out[_netns("/proc/self/ns/net")] = [os.getpid()]
    except OSError:
        pass
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        try:
            ino = _netns(f"/proc/{pid}/ns/net")
        except OSError:  # gone, or not ours to look at
            continue
        got = out.setdefault(ino, [])
        if len(got) < 4:
            got.append(pid)
    return out


def _read_unix(ns: int, pids: Sequence[int]) -> list[tuple[int, str]] | None:
    """(socket inode, name) of the path-bound sockets `/proc/<pid>/net/unix` lists, from
    the first of `pids` still there and still in the network namespace `ns` (its inode,
    asked before and after the read through the process's own /proc directory: a pid
    ended and reused meanwhile by a process of another namespace is not read for this
    one); None when none is."""
    for pid in pids:
        try:
            dfd = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if _netns("ns/net", dir_fd=dfd) != ns:
                continue
            fd = os.open("net/unix", os.O_RDONLY | os.O_CLOEXEC, dir_fd=dfd)
            with open(fd, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().split("\n")[1:]  # a name may hold \x1c, \x85...
            if _netns("ns/net", dir_fd=dfd) != ns:
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


def bound() -> tuple[list[str], list[Unplaced]]:
    """The bound Unix sockets of every network namespace that has a process: the absolute
    names that lead to a socket now (each named once on the host: a name listed twice
    was bound again after the first socket's file moved away), and the sockets whose name
    does not (`Unplaced`)."""
    listed: list[tuple[int, list[int], int, str]] = []
    for ns, pids in _namespaces().items():
        for sock, name in _read_unix(ns, pids) or ():
            listed.append((ns, pids, sock, name))
    count = collections.Counter(name for *_, name in listed)
    placed: list[str] = []
    unplaced: list[Unplaced] = []
    for ns, pids, sock, name in listed:
        if name.startswith("/") and count[name] == 1:
            try:
                if stat.S_ISSOCK(os.lstat(name).st_mode):
                    placed.append(name)
                    continue
            except OSError:
                pass
        unplaced.append(Unplaced(name, ns, tuple(pids), sock))
    return placed, unplaced


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


def _dump_in(ns: int, pids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """`_dump_vfs` in the network namespace `ns` (its inode), entered through the first of
    `pids` still in it (a pid reused by a process of another namespace is passed over):
    asked by a thread of its own that enters it (`setns` changes the calling thread only;
    the thread ends with it)."""
    own = os.stat("/proc/self/ns/net").st_ino
    errors: list[BaseException] = []
    for pid in pids:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            errors.append(exc)
            continue
        try:
            if os.fstat(fd).st_ino != ns:
                errors.append(OSError(f"process {pid} left that network namespace"))
                continue
            if os.fstat(fd).st_ino == own:
                return _dump_vfs()
            got: list[dict[int, tuple[int, int]]] = []

            def ask() -> None:
                try:
                    libc = ctypes.CDLL(None, use_errno=True)
                    if libc.setns(fd, _CLONE_NEWNET) != 0:
                        e = ctypes.get_errno()
                        raise OSError(e, f"setns: {os.strerror(e)}")
                    got.append(_dump_vfs())
                except BaseException as exc:  # noqa: BLE001 (handed to the caller)
                    errors.append(exc)

            t = threading.Thread(target=ask, name="storlab-sock-diag", daemon=True)
            t.start()
            t.join()
            if got:
                return got[0]
        finally:
            os.close(fd)
    why = errors[-1] if errors else "no process"
    raise OSError(f"cannot ask the kernel about its sockets ({why})")


def placed(unplaced: Iterable[Unplaced]) -> dict[int, tuple[int, Unplaced]]:
    """{inode of its file (low 32 bits): (its file system's device, socket)} for
    `unplaced`, asked of the kernel in each one's network namespace (the device is the
    file system's own, which for a btrfs subvolume or an overlay is not the `st_dev` a
    stat gives: only used to narrow where to look, `_mounted`). OSError when the kernel
    cannot be asked."""
    by_ns: dict[int, list[Unplaced]] = {}
    for u in unplaced:
        by_ns.setdefault(u.netns, []).append(u)
    out: dict[int, tuple[int, Unplaced]] = {}
    for group in by_ns.values():
        vfs = _dump_in(group[0].netns, group[0].pids)
        for u in group:
            if u.sock in vfs:
                dev, ino = vfs[u.sock]
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

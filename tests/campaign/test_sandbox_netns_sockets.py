"""A root daemon's socket that the host's own /proc/net/unix does not name where it lies
(a daemon in another network namespace, a socket bound by a relative name, a socket whose
directory was renamed after it was bound), and a fio net engine's Unix socket named by
`hostname`: real daemons (one in a network namespace of its own, `unshare -n`), real bwrap,
real fio. The daemon records every connection it accepts in a file: none may come.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.errors import NamespaceGone

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("unshare") is None
                                 or os.geteuid() != 0, reason="needs bwrap, unshare, root"),
              pytest.mark.xdist_group("fio")]

#: A daemon (root) that listens at argv[1] (argv[2] "rel": bound by its base name after a
#: chdir; "moved": its directory renamed to argv[3] once bound; "thread": bound by a thread
#: that moved to a network namespace of its own, `unshare(CLONE_NEWNET)`) and appends a
#: line to argv[4] for each connection; it writes argv[5] once it listens. argv[6], when
#: given: the name it binds (argv[1] through a link, or as its mount namespace names it).
DAEMON = r"""
import ctypes, os, socket, sys, threading
path, how, moved, log, ready = sys.argv[1:6]
name = sys.argv[6] if len(sys.argv) > 6 else path
def serve():
    if how == "thread":
        assert ctypes.CDLL(None, use_errno=True).unshare(0x40000000) == 0
    s = socket.socket(socket.AF_UNIX)
    if how == "rel":
        os.chdir(os.path.dirname(name)); s.bind(os.path.basename(name))
    else:
        s.bind(name)
    os.chmod(name, 0o600)
    s.listen(8)
    if how == "moved":
        os.rename(os.path.dirname(path), moved)
    open(ready, "w").close()
    while True:
        c, _ = s.accept()
        with open(log, "a") as fh:
            fh.write("connected\n")
        c.close()
t = threading.Thread(target=serve, daemon=True)
t.start()
t.join()
"""


class Daemon:
    def __init__(self, tmp: Path, where: str = "/etc", netns: bool = True,
                 how: str = "abs", name: str | None = None,
                 prefix: tuple[str, ...] = ()) -> None:
        self.dir = Path(where) / f"storlab-test-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir(mode=0o755)
        self.path = str(self.dir / "ctl.sock")
        self.moved = Path(f"{self.dir}-moved")
        self.log = tmp / "daemon.log"
        ready = tmp / "ready"
        argv = [sys.executable, "-c", DAEMON, self.path, how, str(self.moved),
                str(self.log), str(ready), *([name] if name else [])]
        self.proc = subprocess.Popen([*(a.format(dir=self.dir) for a in prefix),
                                      *(["unshare", "-n"] if netns else []), *argv])
        for _ in range(100):
            if ready.exists():
                break
            time.sleep(0.05)
        assert ready.exists(), "the daemon did not start"
        #: where its socket lies now
        self.at = str(self.moved / "ctl.sock") if how == "moved" else self.path

    def connections(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        # removed when the module ends, not now: a walled program another test starts
        # meanwhile may have listed this socket just before the kill, and bwrap fails
        # closed ("Can't mkdir parents") when a socket it covers has lost its directory
        _LEFT.extend((self.dir, self.moved))


#: the daemons' directories under /etc, removed when the module's tests end
_LEFT: list[Path] = []


@pytest.fixture(autouse=True, scope="module")
def _remove_daemon_dirs() -> Iterator[None]:
    yield
    for d in _LEFT:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path)
    try:
        yield d
    finally:
        d.close()


def fio_campaign(camp: Path, options: dict[str, Any], sandbox: dict[str, Any] | None = None
                 ) -> Path:
    camp.mkdir(parents=True, exist_ok=True)
    spec = {"name": "n", "timeout": 30, "seed": 1, "randomize": False,
            "space": {"factors": [{"name": "bs", "kind": "categorical",
                                   "values": ["4k", "8k"]}]},
            "design": {"configs": [{"bs": "4k"}]}, "sandbox": sandbox or {},
            "runner": {"type": "fio", "options": options}}
    (camp / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return camp / "campaign.yaml"


@pytest.mark.parametrize("proto", ["protocol", "proto"])
def test_a_net_engines_unix_socket_named_by_hostname_is_a_target(
        tmp_path: Path, storlab: Any, daemon: Daemon, proto: str) -> None:
    """fio's net engine with `protocol=unix` (or its alias `proto`) takes the socket's path
    from `hostname` when no `filename` is given: a root daemon's socket outside the
    campaign's directory (here one bound in another network namespace, in /etc) is refused
    before any run, naming the option, and by the runner before fio starts; nothing
    connects."""
    opts = {"ioengine": "net", proto: "unix", "hostname": daemon.path, "rw": "write",
            "size": "64k"}
    r = storlab("run", fio_campaign(tmp_path / "c", opts), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "hostname" in r.stderr and daemon.path in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert daemon.connections() == 0

    # the runner's own check, before fio starts (a campaign's preflight aside)
    from storlab.campaign.runners import make_runner
    from storlab.campaign.spec import CampaignError

    runner = make_runner("fio", opts)
    with pytest.raises(CampaignError, match="hostname"):
        runner.run({"bs": "4k"}, tmp_path / "c" / "scratch" / "c1-r1", timeout=30)
    assert daemon.connections() == 0


#: A program that connects to argv[1] and prints what happened, as a JSON line.
CONNECT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(3)
try:
    s.connect(sys.argv[1]); got = "connected"
except OSError as exc:
    got = type(exc).__name__
print(json.dumps({"y": 1, "got": got}))
"""


def run_connect(tmp_path: Path, path: str, **task: Any) -> Any:
    """The worker's own path (`execute_task`) running CONNECT on `path` in a campaign
    under `tmp_path` that lets its programs make Unix sockets."""
    from storlab.campaign.task import RunTask, execute_task

    camp = tmp_path / "camp"
    (camp / "scratch").mkdir(parents=True, exist_ok=True)
    t = RunTask(key="c1-r1", config={}, runner_type="command",
                runner_options={"command": [sys.executable, "-c", CONNECT, path],
                                "json_metrics": {"y": "y"}},
                values={}, workdir=str(camp / "scratch" / "c1-r1"), timeout=60,
                homes=[str(camp)], unix_sockets=True, **task)
    return execute_task(t).result


def got(res: Any) -> str:
    assert res.status == "ok", res.stderr[-800:]
    return str(json.loads(res.raw.strip().splitlines()[-1])["got"])


def assert_covered(tmp_path: Path, d: Daemon, at: str) -> None:
    """A walled program's connect() to `at` (where `d`'s socket is named) is refused, and
    the daemon counted no connection."""
    assert got(run_connect(tmp_path, at)) == "ConnectionRefusedError"
    assert d.connections() == 0


@pytest.mark.parametrize("netns,how", [(True, "abs"), (False, "rel"), (False, "moved"),
                                       (True, "moved")])
def test_a_root_daemons_socket_in_a_shown_tree_is_covered_whatever_its_listing(
        tmp_path: Path, netns: bool, how: str) -> None:
    """`sandbox.unix_sockets: true`, nothing else declared: a root daemon's socket in /etc
    (shown by default, not walked) is covered whether the daemon runs in another network
    namespace (its socket is not in the host's /proc/net/unix), bound it by a relative
    name after a chdir, or renamed its directory once bound (the listed path leads
    nowhere): the program's connect() is refused, the daemon counts no connection."""
    d = Daemon(tmp_path, netns=netns, how=how)
    try:
        assert_covered(tmp_path, d, d.at)
    finally:
        d.close()


def test_a_socket_not_found_within_the_budget_refuses_the_grant(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails closed: when the look for a socket whose name leads nowhere gives up (here a
    budget of 10 entries), a program that may make Unix sockets does not start (one line
    naming the socket and `allow_destructive`); with `allow_destructive` it does."""
    from storlab.campaign.runners import _host_sockets

    d = Daemon(tmp_path, netns=True, how="moved")
    try:
        monkeypatch.setattr(_host_sockets, "BUDGET", 10)
        monkeypatch.setattr(_host_sockets, "_FOUND", {})
        res = run_connect(tmp_path, d.at)
        assert res.status != "ok"
        assert d.path in res.stderr and "allow_destructive" in res.stderr, res.stderr[-800:]
        assert d.connections() == 0
        assert got(run_connect(tmp_path, d.at, allow_destructive=True)) == "connected"
    finally:
        d.close()


def test_the_look_is_narrowed_to_where_the_sockets_file_system_is_mounted(
        tmp_path: Path) -> None:
    """A socket whose name leads nowhere is looked for only where its file system is
    mounted in what is shown (a stale socket on a tmpfs shown nowhere costs no walk), and
    a file system mounted inside a shown tree is looked at there: a root daemon's socket
    on a tmpfs mounted in /etc, its directory renamed, is still covered."""
    from storlab.campaign.runners import _host_sockets

    roots = ["/etc", "/usr"]
    assert _host_sockets.narrowed(roots, [os.stat("/dev/shm").st_dev]) == []
    assert sorted(_host_sockets.narrowed(roots, [os.stat("/etc").st_dev])) == roots
    mnt = Path(f"/etc/storlab-test-mnt-{uuid.uuid4().hex[:8]}")
    mnt.mkdir()
    try:
        if subprocess.run(["mount", "-t", "tmpfs", "none", str(mnt)]).returncode != 0:
            pytest.skip("cannot mount a tmpfs here")
        try:
            assert _host_sockets.narrowed(roots, [os.stat(mnt).st_dev]) == [str(mnt)]
            d = Daemon(tmp_path, where=str(mnt), netns=True, how="moved")
            try:
                assert_covered(tmp_path, d, d.at)
            finally:
                d.close()
                time.sleep(1)  # as in Daemon.close: a start that listed it is done by now
        finally:
            subprocess.run(["umount", str(mnt)])
    finally:
        mnt.rmdir()


def test_where_a_socket_was_found_before_counts_only_inside_the_roots_looked_at(
        tmp_path: Path) -> None:
    """`find` remembers where it found a socket's file (the next start looks there first),
    but a place outside the roots of this look is not what this program sees: not
    returned (it would be covered with /dev/null where nothing of it is shown)."""
    import socket

    from storlab.campaign.runners import _host_sockets

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    path = str(tmp_path / "a" / "s.sock")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(path)
        key = os.lstat(path).st_ino & 0xFFFFFFFF
        assert _host_sockets.find([str(tmp_path / "a")], {key}) == ([path], set(), True)
        assert _host_sockets.find([str(tmp_path / "b")], {key}) == ([], {key}, True)
        assert _host_sockets.find([str(tmp_path)], {key}) == ([path], set(), True)


def test_the_kernels_socket_dump_is_read_whole_or_refused() -> None:
    """The sock_diag replies read by hand: a socket's file given by its `UNIX_DIAG_VFS`
    attribute (after another attribute, padded to 4 bytes), over several datagrams until
    `NLMSG_DONE`; the kernel's error is OSError with its errno; a message cut short or
    longer than what came is OSError too (it was a struct.error traceback, or read past
    the message), never a socket silently left out. And the real dump of this network
    namespace names a socket this process bound."""
    import socket
    import struct

    from storlab.campaign.runners import _host_sockets as h

    def msg(kind: int, body: bytes) -> bytes:
        raw = struct.pack("=IHHII", 16 + len(body), kind, 2, 1, 0) + body
        return raw + b"\0" * (-len(raw) % 4)

    def sock(ino: int, dev: int, vino: int) -> bytes:
        name = struct.pack("=HH", 4 + 5, 0) + b"abcde" + b"\0" * 3  # UNIX_DIAG_NAME
        vfs = struct.pack("=HHII", 12, 1, vino, dev)  # UNIX_DIAG_VFS
        return msg(20, struct.pack("=BBBBIII", 1, 1, 10, 0, ino, 0, 0) + name + vfs)

    out: dict[int, tuple[int, int]] = {}
    assert h._parse_vfs(sock(7, (8 << 20) | 3, 99) + sock(8, 5, 100), out) is False
    assert h._parse_vfs(msg(3, struct.pack("=i", 0)), out) is True
    assert out == {7: (os.makedev(8, 3), 99), 8: (os.makedev(0, 5), 100)}
    with pytest.raises(OSError) as exc:
        h._parse_vfs(msg(2, struct.pack("=i", -13) + b"\0" * 16), {})
    assert exc.value.errno == 13
    whole = sock(9, 1, 1)
    for cut in (whole[:10], whole[:30], whole[:-4]):
        with pytest.raises(OSError, match="sock_diag"):
            h._parse_vfs(cut, {})
    bad = bytearray(whole)
    bad[32:34] = struct.pack("=H", 200)  # the name attribute's length past the message
    with pytest.raises(OSError, match="sock_diag"):
        h._parse_vfs(bytes(bad), {})
    with socket.socket(socket.AF_UNIX) as s:
        path = f"/tmp/storlab-test-diag-{uuid.uuid4().hex[:8]}"
        s.bind(path)
        try:
            st = os.lstat(path)
            assert (st.st_ino & 0xFFFFFFFF) in {ino for _, ino in h._dump_vfs().values()}
        finally:
            os.unlink(path)


def test_a_process_is_read_only_for_the_network_namespace_it_was_listed_in() -> None:
    """A namespace's sockets are read through one of its processes: a pid that is no
    longer in that namespace (ended and reused by a process of another one) is passed
    over, so its namespace's list is not taken for the one wanted (which would leave the
    wanted one's sockets uncovered), nor its kernel asked."""
    from storlab.campaign.runners import _host_sockets as h

    own = os.stat("/proc/thread-self/ns/net").st_ino
    assert h._netns("/proc/thread-self/ns/net") == own  # read from the link's text
    assert h._read_unix(["/proc/thread-self"], own) is not None
    assert h._read_unix(["/proc/thread-self"], own + 1) is None
    assert isinstance(h._dumps({own: ["/proc/thread-self"]})[own], dict)
    assert isinstance(h._dumps({own + 1: ["/proc/thread-self"]})[own + 1], NamespaceGone)


def test_a_sockets_name_is_read_whole_whatever_its_characters(tmp_path: Path) -> None:
    """/proc/net/unix prints a name as bound: a line ends at a newline only (str's
    splitlines also ends one at \\x1c or \\x85, cutting `a\\x1cb.sock` to `a`, a path that
    leads nowhere or to another socket)."""
    import socket

    from storlab.campaign.runners import _host_sockets

    path = str(tmp_path / "a\x1cb\x85c.sock")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(path)
        placed, unplaced = _host_sockets.bound()
        assert path in placed, [u.name for u in unplaced if str(tmp_path) in u.name]


def test_a_stale_socket_at_a_daemons_listed_name_does_not_hide_its_real_file(
        tmp_path: Path) -> None:
    """A root daemon in a mount namespace of its own binds under a name (in a directory
    another user may write, here /tmp) that is, in its namespace, a bind of a directory in
    /etc: the listed name is not where its file lies on the host. A stale socket file left
    at that name (bound, never listened on) is another file than the daemon's: the
    kernel's device and inode say so, and the daemon's real file in /etc is looked for and
    covered: refused, no connection."""
    m = tmp_path / "m"
    m.mkdir()
    d = Daemon(tmp_path, netns=False, name=str(m / "ctl.sock"),
               prefix=("unshare", "-m", "--propagation", "private", "sh", "-c",
                       'mount --bind "$0" "$1" && shift && exec "$@"', "{dir}", str(m)))
    try:
        assert not os.path.exists(m / "ctl.sock")  # on the host: the daemon's file is in /etc
        decoy = socket.socket(socket.AF_UNIX)
        decoy.bind(str(m / "ctl.sock"))
        decoy.close()
        assert_covered(tmp_path, d, d.path)
    finally:
        d.close()


def test_a_socket_bound_through_a_link_is_covered_where_it_lies(tmp_path: Path) -> None:
    """A root daemon binds its socket by a name through a symbolic link (here one in /tmp
    to a directory in /etc, as through a merged /usr's /lib -> usr/lib): its listed name
    is not in what the program sees, the file it leads to is, and is covered there."""
    link = tmp_path / "lnk"
    d = Daemon(tmp_path, netns=False, name=str(link / "ctl.sock"),
               prefix=("sh", "-c", 'ln -s "$0" "$1" && shift && exec "$@"', "{dir}",
                       str(link)))
    try:
        assert os.path.exists(d.path)
        assert_covered(tmp_path, d, d.path)
    finally:
        d.close()


def test_a_socket_bound_by_a_thread_in_a_network_namespace_of_its_own_is_covered(
        tmp_path: Path) -> None:
    """A root daemon's thread moved to a network namespace of its own
    (`unshare(CLONE_NEWNET)` acts on the calling thread only) binds in /etc: no process's
    /proc/PID/net/unix lists it, its thread's does; covered: refused, no connection."""
    d = Daemon(tmp_path, netns=False, how="thread")
    try:
        assert_covered(tmp_path, d, d.path)
    finally:
        d.close()


def test_a_program_allowed_io_uring_alone_gets_the_same_covering(
        tmp_path: Path, uring_connect: str) -> None:
    """`sandbox.io_uring: true` and nothing else: a ring's `IORING_OP_SOCKET` makes a Unix
    socket the filter does not see, so a root daemon's socket whose listed name leads
    nowhere (another network namespace, its directory renamed) is looked for by inode and
    covered as with `unix_sockets`: the ring's connect is refused, no connection."""
    from storlab.campaign.task import RunTask, execute_task

    d = Daemon(tmp_path, netns=True, how="moved")
    try:
        camp = tmp_path / "camp"
        (camp / "scratch").mkdir(parents=True)
        # a file: the command runner would read the program's {...} as factors
        (camp / "uring.py").write_text(uring_connect)
        t = RunTask(key="c1-r1", config={}, runner_type="command",
                    runner_options={"command": [sys.executable, str(camp / "uring.py"),
                                                d.at],
                                    "json_metrics": {"y": "y"}},
                    values={}, workdir=str(camp / "scratch" / "c1-r1"), timeout=60,
                    homes=[str(camp)], io_uring=True)
        assert got(execute_task(t).result) == f"connect:{-errno.ECONNREFUSED}"
        assert d.connections() == 0
    finally:
        d.close()

"""The sandbox against a program that asks a daemon outside to write for it: real listening
Unix sockets outside the campaign (in /run, /var/lib, /var/tmp, /dev/shm, a shared
directory under /tmp), an abstract socket and a loopback TCP listener, and a real program
inside (a command, fio's `net` engine) that tries each one. Without an opt-in none of them
is reached (the listener counts no connection); with the declared opt-in
(`sandbox.network`, `sandbox.sockets`, a runner that needs the network) exactly what it
opens is.

Runs go through the worker's own path (`execute_task`), as the attack tests do.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.task import RunTask, execute_task

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.xdist_group("fio")]


def listen_as_nobody(s: socket.socket, backlog: int) -> None:
    """`s.listen(backlog)` by a forked child as `nobody`: the kernel then gives that
    account as the listener's (`SO_PEERCRED`), a database's daemon rather than root's,
    which the walls of each run refuse without `allow_destructive` (A8-9). The socket is
    shared: this process accepts on it."""
    pid = os.fork()
    if pid == 0:
        try:
            os.seteuid(65534)
            s.listen(backlog)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


class Listeners:
    """Listening sockets outside any campaign, each counting the connections it accepted."""

    def __init__(self, shared: Path) -> None:
        tag = f"storlab-test-{uuid.uuid4().hex[:8]}"
        self.dirs = [Path("/run") / tag, Path("/var/lib") / tag, Path("/var/tmp") / tag]
        paths = {"run": self.dirs[0] / "daemon.sock", "var_lib": self.dirs[1] / "d.sock",
                 "var_tmp": self.dirs[2] / "d.sock", "dev_shm": Path(f"/dev/shm/{tag}.sock"),
                 "shared_tmp": shared / "d.sock"}
        self.addrs: dict[str, Any] = {}
        self.socks: dict[str, socket.socket] = {}
        for name, p in paths.items():
            p.parent.mkdir(parents=True, exist_ok=True)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(str(p))
            self.addrs[name] = str(p)
            self.socks[name] = s
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("\0" + tag)  # an abstract socket: no inode, only the network namespace
        self.addrs["abstract"], self.socks["abstract"] = "@" + tag, s
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        self.addrs["tcp"], self.socks["tcp"] = s.getsockname()[1], s
        self.count = {name: 0 for name in self.socks}
        self.sel = selectors.DefaultSelector()
        for name, s in self.socks.items():
            listen_as_nobody(s, 16)
            s.setblocking(False)
            self.sel.register(s, selectors.EVENT_READ, name)
        self.stop = threading.Event()
        self.th = threading.Thread(target=self._serve, daemon=True)
        self.th.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            for key, _ in self.sel.select(0.05):
                try:
                    conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                self.count[key.data] += 1
                try:
                    conn.sendall(b"hi")
                    # a daemon that does what it is asked: drain (fio's net engine sends)
                    conn.settimeout(5)
                    while conn.recv(1 << 16):
                        pass
                except OSError:
                    pass
                conn.close()

    def close(self) -> None:
        self.stop.set()
        self.th.join()
        for s in self.socks.values():
            s.close()
        for p in self.addrs.values():
            if isinstance(p, str) and p.startswith("/"):
                Path(p).unlink(missing_ok=True)
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def listeners(tmp_path: Path) -> Iterator[Listeners]:
    ls = Listeners(tmp_path / "shared")
    try:
        yield ls
    finally:
        ls.close()


#: A program that tries every listener and prints what it reached, as a JSON line.
PROBE = """
import json, socket, sys
addrs = json.loads(sys.argv[1])
out = {"y": 1}
for name, a in addrs.items():
    fam = socket.AF_INET if name == "tcp" else socket.AF_UNIX
    try:
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(("127.0.0.1", a) if name == "tcp" else
                  "\\0" + a[1:] if a.startswith("@") else a)
        out[name] = s.recv(2).decode()
    except OSError as exc:
        out[name] = type(exc).__name__
print(json.dumps(out))
"""


def run(tmp_path: Path, argv: list[str], runner: str = "command", **task: Any) -> Any:
    camp = tmp_path / "camp"
    (camp / "scratch").mkdir(parents=True, exist_ok=True)
    opts = ({"command": argv, "json_metrics": {"y": "y"}} if runner == "command"
            else task.pop("options"))
    t = RunTask(key="c1-r1", config={}, runner_type=runner, runner_options=opts, values={},
                workdir=str(camp / "scratch" / "c1-r1"), timeout=60, homes=[str(camp)],
                **task)
    return execute_task(t).result


def probe(tmp_path: Path, ls: Listeners, **task: Any) -> dict[str, str]:
    res = run(tmp_path, [sys.executable, "-c", PROBE, json.dumps(ls.addrs)], **task)
    assert res.status == "ok", res.stderr[-800:]
    return {k: v for k, v in json.loads(res.raw.strip().splitlines()[-1]).items() if k != "y"}


def test_no_socket_outside_is_reached_without_an_opt_in(tmp_path: Path,
                                                         listeners: Listeners) -> None:
    got = probe(tmp_path, listeners)
    assert got.keys() == listeners.count.keys()
    assert not any(v == "hi" for v in got.values()), got
    assert sum(listeners.count.values()) == 0, listeners.count
    # no Unix socket can be made at all (seccomp: EPERM), whatever its name; TCP: another
    # network namespace
    assert {got[k] for k in ("run", "var_lib", "var_tmp", "dev_shm", "shared_tmp",
                             "abstract")} == {"PermissionError"}, got
    assert got["tcp"] == "ConnectionRefusedError", got
    # with a socket declared (Unix sockets can be made): the others are not there at all,
    # the host's abstract ones in another network namespace
    got = probe(tmp_path, listeners, sockets=[str(tmp_path / "declared.sock")])
    assert {got[k] for k in ("run", "var_lib", "var_tmp", "dev_shm", "shared_tmp")} == {
        "FileNotFoundError"}, got
    assert got["abstract"] == "ConnectionRefusedError", got
    assert sum(listeners.count.values()) == 0, listeners.count


def test_sandbox_network_opens_the_network_and_no_path_socket(tmp_path: Path,
                                                              listeners: Listeners) -> None:
    got = probe(tmp_path, listeners, network=True)
    assert got["tcp"] == "hi" and listeners.count["tcp"] == 1, got
    paths = ("run", "var_lib", "var_tmp", "dev_shm", "shared_tmp")
    # no Unix socket without `sandbox.sockets`, abstract ones included
    assert all(got[k] == "PermissionError" for k in (*paths, "abstract")), got
    # with one declared: the host's abstract sockets stay out of reach (Landlock's scope,
    # whatever the network namespace), the undeclared path sockets are not there
    got = probe(tmp_path, listeners, network=True, sockets=[str(tmp_path / "declared.sock")])
    from storlab.campaign.runners._sandbox import landlock_ruleset

    if landlock_ruleset() is not None:  # Landlock ABI 6 or newer (Linux 6.12)
        assert got["abstract"] == "PermissionError", got
        assert listeners.count["abstract"] == 0, listeners.count
    assert all(got[k] == "FileNotFoundError" for k in paths), got
    assert all(listeners.count[k] == 0 for k in paths), listeners.count


def test_sandbox_sockets_opens_the_declared_socket_only(tmp_path: Path,
                                                        listeners: Listeners) -> None:
    want = listeners.addrs["run"]
    got = probe(tmp_path, listeners, sockets=[want])
    # 2: the walls' question (who listens: one connection, closed at once), the program's
    assert got["run"] == "hi" and listeners.count["run"] == 2, got
    assert [k for k, v in got.items() if v == "hi"] == ["run"], got
    # its directory stays hidden: a socket beside it does not open
    other = socket.socket(socket.AF_UNIX)
    other.bind(str(Path(want).parent / "other.sock"))
    other.listen(1)
    try:
        res = run(tmp_path, ["sh", "-c", f"ls {Path(want).parent}; echo '{{\"y\": 1}}'"],
                  sockets=[want])
        assert "daemon.sock" in res.raw and "other.sock" not in res.raw, res.raw + res.stderr
    finally:
        other.close()


def test_a_socket_in_a_readable_or_campaign_directory_does_not_open_through_show(
        tmp_path: Path, listeners: Listeners) -> None:
    """`sandbox.readable` naming a socket itself shows nothing (sockets are declared in
    `sandbox.sockets`)."""
    got = probe(tmp_path, listeners, readable=[listeners.addrs["var_lib"]],
                sockets=[str(tmp_path / "declared.sock")], allow_destructive=True)
    assert got["var_lib"] == "FileNotFoundError" and listeners.count["var_lib"] == 0, got


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_fio_net_engine_gets_the_network_a_command_does_not(tmp_path: Path,
                                                            listeners: Listeners) -> None:
    """fio's `net` engine, a network engine: the fio runner declares the network for it;
    the listener, a service of this host, is reached only when the campaign declares
    `sandbox.network` (without, the run is refused before fio starts); the same fio
    started by a command runner (nothing declared) does not reach it."""
    port = listeners.addrs["tcp"]
    job = {"ioengine": "net", "hostname": "127.0.0.1", "port": port, "protocol": "tcp",
           "rw": "write", "bs": "4k", "size": "64k"}
    res = run(tmp_path, [], runner="fio", options=dict(job))
    assert res.status != "ok" and f"port {port} is a service of this host" in res.stderr, \
        res.stderr[-600:]
    assert listeners.count["tcp"] == 0
    res = run(tmp_path, [], runner="fio", options=dict(job), network=True)
    assert listeners.count["tcp"] == 1, (res.status, res.stderr[-600:])
    argv = ["fio", "--name=x", *(f"--{k}={v}" for k, v in job.items()),
            "--output-format=json"]
    res = run(tmp_path, ["sh", "-c", " ".join(argv) + "; echo '{\"y\": 1}'"])
    assert listeners.count["tcp"] == 1, res.raw[-400:]


def campaign(d: Path, sandbox: dict[str, Any]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "net", "space": {"factors": [{"name": "n", "kind": "categorical",
                                                  "values": ["a", "b"]}]},
            "design": {"configs": [{"n": "a"}]},
            "runner": {"type": "command", "options": {
                "command": ["sh", "-c", "echo '{\"y\": 1}'"], "json_metrics": {"y": "y"}}},
            "sandbox": sandbox}
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def test_opt_ins_are_shown_and_wrong_values_refused_in_one_line(tmp_path: Path,
                                                                storlab: Any) -> None:
    sock = tmp_path / "db.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    try:
        camp = campaign(tmp_path / "c", {"network": True, "sockets": [str(sock)]})
        r = storlab("status", camp)
        assert r.returncode == 0, r.stderr
        assert ("network: the host's (sandbox.network: whatever the programs read, root "
                "inside, can leave the machine: root-only files under /etc included); Unix "
                f"sockets: {sock}") in r.stdout
        for bad, field in (({"network": "maybe"}, "network"),
                           ({"sockets": [str(camp)]}, "sockets"),
                           ({"readable": "x"}, "readable")):
            camp = campaign(tmp_path / f"bad-{field}", bad)
            r = storlab("run", camp)
            assert r.returncode == 2, (bad, r.stdout, r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and "sandbox" in lines[0] and field in lines[0], lines
    finally:
        s.close()


def test_the_ceph_runner_and_fio_network_engines_declare_the_network() -> None:
    from storlab.campaign.runners.fio import FioRunner

    assert FioRunner(ioengine="psync").network_reason() is None
    assert FioRunner(ioengine="rbd").network_reason() == "ioengine rbd"
    assert FioRunner(clients=["h1"]).network_reason() == "fio client mode"
    assert FioRunner(extra_args=["--ioengine=net"]).network_reason() == "ioengine net"
    assert FioRunner().network_reason({"ioengine": "http"}) == "ioengine http"
    # io_uring rings and Unix sockets of fio's own, declared by the runner for fio alone
    assert FioRunner(ioengine="psync").io_uring_reason() is None
    assert FioRunner(ioengine="io_uring").io_uring_reason() == "ioengine io_uring"
    assert FioRunner(extra_args=["--ioengine=io_uring_cmd"]).io_uring_reason() is not None
    assert FioRunner().io_uring_reason({"ioengine": "libaio"}) is None
    assert FioRunner(ioengine="net", protocol="tcp").unix_socket_reason() is None
    assert FioRunner(ioengine="net", protocol="unix").unix_socket_reason() is not None
    assert FioRunner(clients=["sock:/run/fio.sock"]).unix_socket_reason() is not None
    assert FioRunner(clients=["h1"]).unix_socket_reason() is None


def test_the_program_still_sees_what_it_needs(tmp_path: Path) -> None:
    """The smaller root keeps what programs use: the system's files (/etc/passwd, the
    resolver's file), /sys, the campaign's directory (read-only), an empty /tmp, and the
    program's own install tree (this Python, from a virtualenv or elsewhere). A write
    outside the declared places fails loudly (it does not land in a tmpfs unseen)."""
    camp = tmp_path / "camp"
    camp.mkdir()
    (camp / "input.txt").write_text("data\n")
    # what /tmp may show: the way to the campaign's directory, and to this Python's
    # install tree when it lies under /tmp (a clean clone's virtualenv in CI)
    shown = sorted({camp.parts[2], *(Path(p).parts[2] for p in (sys.executable, sys.prefix)
                                     if Path(p).parts[1:2] == ("tmp",))})
    script = ("import os, json\n"
              "try: open('/tmp/t', 'w'); tmp = 'written'\n"
              "except OSError as exc: tmp = exc.strerror\n"
              f"print(json.dumps({{'y': 1, 'passwd': os.path.exists('/etc/passwd'), "
              f"'tmp': tmp, 'tmp_empty': sorted(os.listdir('/tmp')) == {shown!r}, "
              f"'resolv': os.path.exists('/etc/resolv.conf'), "
              f"'sys': os.path.isdir('/sys/block'), "
              f"'input': open({str(camp / 'input.txt')!r}).read(), "
              f"'mnt': os.path.exists('/mnt') and os.listdir('/mnt')}}))")
    res = run(tmp_path, [sys.executable, "-c", script])
    assert res.status == "ok", res.stderr[-800:]
    got = json.loads(res.raw.strip().splitlines()[-1])
    assert got["passwd"] and got["resolv"] and got["sys"] and got["input"] == "data\n", got
    assert not got["mnt"], got  # nothing of the host beyond what the program needs
    assert got["tmp"] == "Read-only file system" and got["tmp_empty"], got
    res = run(tmp_path, ["sh", "-c", f"echo x > {camp}/new 2>&1; echo '{{\"y\": 1}}'"])
    assert "Read-only file system" in res.stderr and not (camp / "new").exists(), res.stderr


# ---------------------------------------------------------------- routes of our own
KEYRING = """
import ctypes, json, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 248, "aarch64": 217}[platform.machine()]
# add_key("user", ..., KEY_SPEC_USER_KEYRING): root's user keyring is the host root's
r = libc.syscall(nr, b"user", b"%s", b"PWNED", 5, ctypes.c_int(-4))
print(json.dumps({"y": 1, "add_key": r, "errno": ctypes.get_errno()}))
"""


def test_a_key_added_inside_does_not_reach_the_host_keyring(tmp_path: Path) -> None:
    """The kernel's keyrings are not namespaced: root's user keyring inside is the host
    root's (and `request_key` would start /sbin/request-key outside every namespace). The
    sandbox's seccomp filter refuses add_key, request_key and keyctl (EPERM)."""
    name = f"storlab-probe-{uuid.uuid4().hex[:8]}"
    res = run(tmp_path, [sys.executable, "-c", KEYRING % name.encode().decode()])
    assert res.status == "ok", res.stderr[-600:]
    got = json.loads(res.raw.strip().splitlines()[-1])
    assert got["add_key"] == -1 and got["errno"] == 1, got  # EPERM
    assert name not in Path("/proc/keys").read_text()


SHM = """
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
sid = libc.shmget(int(sys.argv[1]), 4096, 0)
if sid >= 0:
    addr = libc.shmat(sid, None, 0)
    ctypes.memmove(addr, b"PWNED", 5)
print(json.dumps({"y": 1, "shmget": sid}))
"""


def test_the_hosts_sysv_shared_memory_is_not_the_runs(tmp_path: Path) -> None:
    """A root program outside (a database, say) keeps state in SysV shared memory; a
    program of a run shared the host's IPC namespace and, as root, could attach and write
    it. The sandbox has an IPC namespace of its own."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    key = 0x5701AB00 + os.getpid() % 256
    sid = libc.shmget(key, 4096, 0o1000 | 0o600)  # IPC_CREAT
    assert sid >= 0, ctypes.get_errno()
    addr = libc.shmat(sid, None, 0)
    try:
        res = run(tmp_path, [sys.executable, "-c", SHM, str(key)])
        assert res.status == "ok", res.stderr[-600:]
        assert ctypes.string_at(addr, 5) == b"\0" * 5
        assert json.loads(res.raw.strip().splitlines()[-1])["shmget"] == -1
    finally:
        libc.shmdt(ctypes.c_void_p(addr))
        libc.shmctl(sid, 0, None)  # IPC_RMID


def test_nested_namespaces_cgroups_and_other_processes_stay_shut(tmp_path: Path) -> None:
    """A user namespace made inside (where the program would hold every capability again)
    cannot even be set up (/proc is read-only), so no remount of the read-only trees; the
    cgroup files are read-only; storlab's own process is not in the program's /proc."""
    me = os.getpid()
    script = ("unshare -Urm sh -c 'mount -o remount,rw /usr && touch /usr/storlab-probe' "
              "2>&1; echo 1 > /sys/fs/cgroup/cgroup.procs 2>&1; "
              f"ls /proc/{me}/root 2>&1 | head -1; ls /proc | grep -c '^[0-9]'; "
              "echo '{\"y\": 1}'")
    res = run(tmp_path, ["sh", "-c", script])
    assert res.status == "ok", res.stderr[-600:]
    assert not os.path.exists("/usr/storlab-probe")
    # the user namespace refused by the seccomp filter (CLONE_NEWUSER)
    assert "unshare failed: Operation not permitted" in res.raw, res.raw
    lines = res.raw.splitlines()
    assert int(lines[-2]) <= 4, res.raw  # the run's own few processes only


def test_a_daemons_socket_in_a_place_the_program_sees_is_covered(tmp_path: Path) -> None:
    """A socket inside what the program must see (here the campaign's directory and a
    directory declared `sandbox.readable`) is covered: the host's listening sockets there
    (its /proc/net/unix) are mounted over with /dev/null. One the campaign declares in
    `sandbox.sockets` stays open."""
    camp = tmp_path / "camp"
    (camp / "run").mkdir(parents=True)
    (tmp_path / "in").mkdir()
    socks = []
    for p in (camp / "run" / "daemon.sock", tmp_path / "in" / "d.sock",
              camp / "declared.sock"):
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        listen_as_nobody(s, 4)
        socks.append(s)
    addrs = {"camp": str(camp / "run" / "daemon.sock"), "readable": str(tmp_path / "in/d.sock"),
             "declared": str(camp / "declared.sock")}
    script = PROBE.replace("s.recv(2).decode()", "'connected'")
    try:
        res = run(tmp_path, [sys.executable, "-c", script, json.dumps(addrs)],
                  readable=[str(tmp_path / "in")], sockets=[addrs["declared"]],
                  allow_destructive=True)  # a readable place outside: the opt-in
        assert res.status == "ok", res.stderr[-600:]
        got = json.loads(res.raw.strip().splitlines()[-1])
        assert got["camp"] == got["readable"] == "ConnectionRefusedError", got
        assert got["declared"] == "connected", got
    finally:
        for s in socks:
            s.close()


def test_temporary_files_go_to_the_runs_directory(tmp_path: Path) -> None:
    """/tmp is read-only: TMPDIR leads to the run's directory, where mktemp and Python's
    tempfile write."""
    res = run(tmp_path, ["sh", "-c", "mktemp; echo '{\"y\": 1}'"])
    assert res.status == "ok", res.stderr[-400:]
    assert res.raw.startswith(str(tmp_path / "camp" / "scratch" / "c1-r1") + "/tmp."), res.raw


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_fio_engines_and_name_lookups_work_in_the_smaller_root(tmp_path: Path) -> None:
    """What users run still runs: fio with psync, libaio and io_uring writes its file in
    the run's directory; names resolve from /etc (getent). io_uring started by a command
    needs `sandbox.io_uring` (the fio runner declares it for its io_uring engines); without
    it fio fails and storlab's hint names the declaration."""
    jobs = " && ".join(f"fio --name={e} --ioengine={e} --rw=randwrite --bs=4k --size=256k "
                       "--output-format=terse >/dev/null" for e in ("psync", "libaio",
                                                                    "io_uring"))
    argv = ["sh", "-c", f"{jobs} && ls && getent hosts localhost && echo '{{\"y\": 1}}'"]
    res = run(tmp_path, argv, io_uring=True)
    assert res.status == "ok", res.stderr[-600:]
    assert all(f"{e}.0.0" in res.raw for e in ("psync", "libaio", "io_uring")), res.raw
    assert "localhost" in res.raw, res.raw
    res = run(tmp_path, ["fio", "--name=u", "--ioengine=io_uring", "--rw=write", "--size=64k"])
    assert res.status == "failed" and "sandbox.io_uring: true" in res.stderr, res.stderr


def test_a_declared_socket_inside_a_declared_writable_directory_opens(tmp_path: Path) -> None:
    """A database a setup step started keeps its socket in a directory the campaign declares
    writable and the socket in `sandbox.sockets`: the socket's own bind is dropped inside
    the writable one, and it must not then be covered as a daemon's."""
    from storlab.campaign.runners import run_program
    from storlab.campaign.runners._sandbox import Declared, declared

    # the declared directory the campaign's own (outside: allow_destructive, A8-3), its
    # daemon not root's (a root daemon's socket is not shown, A8-9)
    camp = tmp_path / "camp"
    shared = camp / "db"
    wd = camp / "runs" / "r1"
    wd.mkdir(parents=True)
    shared.mkdir()
    sp = str(shared / "db.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(sp)
    listen_as_nobody(srv, 5)
    code = ("import socket; c = socket.socket(socket.AF_UNIX); "
            f"c.connect({sp!r}); print('connected')")
    try:
        for paths in ((), (str(shared),)):
            with declared(Declared(homes=(str(camp),), sockets=(sp,), paths=paths)):
                p = run_program(["python3", "-c", code], cwd=str(wd), timeout=60)
            assert p.stdout.strip() == "connected", (paths, p.stderr[-400:])
    finally:
        srv.close()
        shutil.rmtree(shared, ignore_errors=True)


def test_a_hard_link_to_a_daemons_socket_placed_beforehand_is_covered(
        tmp_path: Path) -> None:
    """A daemon's listening socket outside the campaign (on the same file system: a hard
    link cannot cross one), hard linked beforehand into the campaign's directory, into a
    declared readable directory and into a declared writable one: the host's
    /proc/net/unix lists only the daemon's own name, yet each link is the daemon's socket.
    Found by walking the places shown, each is covered: 0 connections accepted."""
    daemon = tmp_path / "daemon"
    daemon.mkdir()
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(daemon / "d.sock"))
    srv.listen(8)
    srv.settimeout(0.5)
    camp = tmp_path / "camp"
    (camp / "deep" / "er").mkdir(parents=True)
    (tmp_path / "in").mkdir()
    (camp / "out").mkdir()  # the campaign's own: outside, only with allow_destructive
    names = {"camp": camp / "deep" / "er" / "x.sock", "readable": tmp_path / "in" / "x",
             "writable": camp / "out" / "x.sock"}
    for p in names.values():
        os.link(daemon / "d.sock", p)
    addrs = {k: str(v) for k, v in names.items()}
    script = PROBE.replace("s.recv(2).decode()", "'connected'")
    try:
        # a socket declared (Unix sockets can be made): the covering is what holds
        res = run(tmp_path, [sys.executable, "-c", script, json.dumps(addrs)],
                  readable=[str(tmp_path / "in")], writable=[str(camp / "out")],
                  sockets=[str(tmp_path / "declared.sock")], allow_destructive=True)
        assert res.status == "ok", res.stderr[-600:]
        got = json.loads(res.raw.strip().splitlines()[-1])
        assert {got[k] for k in addrs} == {"ConnectionRefusedError"}, got
        accepted = 0
        try:
            while srv.accept():
                accepted += 1
        except OSError:
            pass
        assert accepted == 0
    finally:
        srv.close()

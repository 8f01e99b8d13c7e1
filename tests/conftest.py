"""Fixtures every test package shares: the `storlab` program as a user runs it, and a LAN of
network-namespace hosts."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

# Byte-code caches written as Python writes them by default (`__pycache__`, ignored by git):
# with PYTHONDONTWRITEBYTECODE set (as on the development machine) every xdist worker
# compiled storlab and rewrote every test module from source again (collection: 14.5 s of
# CPU per worker, 6.3 s with the caches), and every `storlab` child compiled the commands
# it runs. Unset before xdist starts its workers and the tests their children.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

# xdist groups (`make test` runs `-n 3 --dist loadgroup`): a group keeps tests on one worker,
# one after the other. Only what needs that is grouped: modules sharing a cluster or a
# browser ("ceph": the session's Ceph; "clusters": its Swift; "browser"), the modules of
# network-namespace hosts ("lan": one private /24 at a time), each group apart so the slow
# ones run side by side, and the kill/lock tests ("lock"). The real-fio tests share nothing
# (temporary directories, free ports, `losetup -f`) and are spread over both workers.

#: The `storlab` program of this checkout, whatever environment runs the tests (an
#: installed entry point may be another version).
STORLAB_ARGV = (sys.executable, "-m", "storlab.cli")

Run = Callable[..., "subprocess.CompletedProcess[str]"]


def run_storlab(*args: Any, cwd: str | Path | None = None,
                env: Mapping[str, str] | None = None, timeout: float = 300,
                input: str | None = None) -> subprocess.CompletedProcess[str]:
    """`storlab ARGS...` (each argument str()-ed), text output captured; `env` adds to the
    environment."""
    return subprocess.run([*STORLAB_ARGV, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=None if env is None else {**os.environ, **env},
                          timeout=timeout, input=input)


@pytest.fixture(scope="module")
def storlab(request: pytest.FixtureRequest) -> Run:
    """Run the CLI: `storlab("report", path, "-o", out)` -> CompletedProcess. In a module that
    sets `STORLAB_FORKED = True` each call is a process forked from the started program
    (`storlab_forked`: a fresh start costs ~1.2 s of CPU), with the same arguments (`env`
    adds to this environment, but what the server read as it imported the program, e.g.
    COLUMNS, stays this process's; `input` is not taken): for modules whose subject is not
    the start-up (COLUMNS, the installed entry point) nor a signal the program handles
    (SIGINT, Ctrl-C: start one with `storlab_argv`); a SIGKILL ends a forked child as it
    ends a started one (`storlab_forked.start` returns a child to kill)."""
    if not getattr(request.module, "STORLAB_FORKED", False):
        return run_storlab
    forked = request.getfixturevalue("storlab_forked")

    def run(*args: Any, env: Mapping[str, str] | None = None,
            **kw: Any) -> subprocess.CompletedProcess[str]:
        return forked(*args, env=None if env is None else {**os.environ, **env}, **kw)
    return run


@pytest.fixture(scope="session")
def storlab_argv() -> list[str]:
    """The argv prefix, for a test that starts the program itself (Popen, signals)."""
    return list(STORLAB_ARGV)


@pytest.fixture(scope="session")
def storlab_inprocess() -> Callable[..., Any]:
    """Run the CLI inside this process (typer's CliRunner), for a test that checks many
    commands' parsing cheaply (every `--help`): `storlab_inprocess("design", "--help",
    env={...})` -> click's Result (`exit_code`, `output`). Prefer `storlab` otherwise: only
    a real process shows what a user sees (exit status, stderr, signals)."""
    from typer.testing import CliRunner

    from storlab.cli import app

    runner = CliRunner()

    def invoke(*args: Any, env: Mapping[str, str] | None = None) -> Any:
        return runner.invoke(app, list(map(str, args)), env=env)
    return invoke


@pytest.fixture
def storlab_main(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run `storlab ARGS` through the real entry point (storlab.cli.main) in this process:
    `storlab_main("estimate", "fit", path)` -> (exit status, stdout, stderr). For tests that
    make many cheap calls (a subprocess costs ~0.5 s of start-up each)."""
    from storlab.cli import main

    def call(*args: Any) -> tuple[int, str, str]:
        try:
            main(list(map(str, args)))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return code, out, err
    return call


@pytest.fixture
def storlab_quick(storlab_main: Callable[..., tuple[int, str, str]]) -> Run:
    """`storlab` run in this process (`storlab_main`) that answers as `storlab` does (a
    CompletedProcess): for a test making many calls whose output is what it checks, not
    the process (each subprocess pays the program's start-up again)."""
    def run(*args: Any) -> subprocess.CompletedProcess[str]:
        code, out, err = storlab_main(*args)
        return subprocess.CompletedProcess([*STORLAB_ARGV, *map(str, args)], code, out, err)
    return run


# The forking server of `storlab_forked`: it has imported the program (and the libraries
# every command loads) once; each request forks a child that takes the request's working
# directory, environment, memory cap and output files, runs the entry point, and exits
# with its status. Requests and replies are JSON lines on the server's stdin and stdout.
_FORK_SERVER = r"""
import atexit, json, os, resource, sys, threading, traceback
import storlab.cli
storlab.cli.app  # every command, built once (else each child imports its command's module)
import numpy, pandas, pydantic, yaml  # what nearly every command imports when it runs
import matplotlib, scipy.stats, statsmodels.formula.api  # and the analyses (~3 s)
import optuna  # and the tuning (~1 s)
replies = os.fdopen(os.dup(1), "w")
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            sys.stdin = open(os.devnull)
            for fd, name in ((1, "stdout"), (2, "stderr")):
                os.dup2(os.open(req[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            os.environ.clear()
            os.environ.update(req["env"])
            os.chdir(req["cwd"])
            if req["memory"]:
                resource.setrlimit(resource.RLIMIT_AS, (req["memory"], req["memory"]))
            try:
                storlab.cli.main(req["argv"])
                code = 0
            except SystemExit as exc:  # as the interpreter turns it into a status
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
            threading._shutdown()  # as the interpreter exits: join non-daemon threads,
            atexit._run_exitfuncs()  # then the atexit functions (os._exit skips both)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    replies.write(json.dumps(pid) + "\n")  # first its pid (a timeout kills it), then its status
    replies.flush()
    replies.write(json.dumps(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])) + "\n")
    replies.flush()
"""


@pytest.fixture(scope="session")
def storlab_forked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Any]]:
    """`storlab ARGS` in a process of its own, forked from a server that has started the program
    once (a fork costs milliseconds, a start-up ~0.5 s): `storlab_forked(*args, cwd=, env=,
    memory=, timeout=300)` -> CompletedProcess, with its own working directory (this one's by
    default), environment (`env` replaces it), stdout, stderr, exit status, address-space cap
    (`memory` bytes) and time limit (then killed, and TimeoutExpired raised, as by
    subprocess.run). What the program reads as it starts (COLUMNS: rich's width) comes from
    this process's environment, not `env`: a test of that starts the program (`storlab`). For
    tests of many calls whose subject is each call's own process: its status, its one-line
    error, what it leaves on disk, memory it may not exceed, runs it makes.
    `storlab_forked.start(*args, cwd=, env=, memory=)` returns at once with the child (`pid`,
    `poll`, `wait`, `send_signal`, `kill`, `result`: as a Popen), for a test that signals it."""
    here = tmp_path_factory.mktemp("forked")
    server = subprocess.Popen([sys.executable, "-c", _FORK_SERVER], cwd=here,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    replies, pending = server.stdout.fileno(), bytearray()
    calls = 0

    def reply(timeout: float | None) -> Any:
        """The server's next reply line, or None after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([replies], [], [], left)[0]:
                return None
            chunk = os.read(replies, 4096)
            if not chunk:
                raise RuntimeError(f"the fork server died (exit {server.wait()})")
            pending.extend(chunk)
        line, _, rest = bytes(pending).partition(b"\n")
        pending[:] = rest
        return json.loads(line)

    class Child:
        """A `storlab` child started by `storlab_forked.start`, asked as a Popen is: `pid`,
        `poll()`, `wait(timeout)`, `send_signal(sig)`, `kill()`; `result()` its CompletedProcess."""

        def __init__(self, argv: list[str], out: Path, err: Path, pid: int) -> None:
            self.args, self.out, self.err, self.pid = [*STORLAB_ARGV, *argv], out, err, pid
            self.returncode: int | None = None

        def poll(self) -> int | None:
            return self.wait(0.0, check=False)

        def wait(self, timeout: float | None = None, check: bool = True) -> int | None:
            """Its exit status (negative: the signal), waiting up to `timeout` s (then
            TimeoutExpired as Popen.wait, or None with check=False)."""
            nonlocal running
            if self.returncode is None:
                status = reply(timeout)
                if status is None:
                    if check:
                        raise subprocess.TimeoutExpired(self.args, timeout or 0)
                    return None
                self.returncode, running = status, None
            return self.returncode

        def send_signal(self, sig: int) -> None:
            if self.poll() is None:  # not reaped: the pid is still its own
                with contextlib.suppress(ProcessLookupError):  # reaped, status not yet read
                    os.kill(self.pid, sig)

        def kill(self) -> None:
            self.send_signal(signal.SIGKILL)

        def result(self) -> subprocess.CompletedProcess[str]:
            done = subprocess.CompletedProcess(self.args, self.returncode, self.out.read_text(),
                                               self.err.read_text())
            self.out.unlink()
            self.err.unlink()
            return done

    running: Child | None = None

    def start(*args: Any, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
              memory: int = 0) -> Child:
        """Start `storlab ARGS` and return at once (one child at a time: the server waits
        for it before it forks the next)."""
        nonlocal calls, running
        assert running is None, "the fork server's last child has not been waited for"
        calls += 1
        out, err = here / f"{calls}.out", here / f"{calls}.err"
        argv = list(map(str, args))
        assert server.stdin is not None
        server.stdin.write((json.dumps({
            "argv": argv, "cwd": str(cwd or os.getcwd()),
            "env": dict(os.environ if env is None else env), "memory": memory,
            "stdout": str(out), "stderr": str(err)}) + "\n").encode())
        server.stdin.flush()
        running = Child(argv, out, err, reply(None))
        return running

    def run(*args: Any, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
            memory: int = 0, timeout: float | None = 300) -> subprocess.CompletedProcess[str]:
        child = start(*args, cwd=cwd, env=env, memory=memory)
        if child.wait(timeout, check=False) is None:  # as subprocess.run: killed, then raised
            child.send_signal(signal.SIGKILL)
            child.wait()
            done = child.result()
            raise subprocess.TimeoutExpired(done.args, timeout or 0, done.stdout, done.stderr)
        return child.result()

    run.start = start  # type: ignore[attr-defined]
    try:
        yield run
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=60)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "last: run after every other test (it ends a "
                                       "session-wide resource, e.g. brings the Ceph down)")


#: Modules of long ungrouped tests (real tunings and campaigns, 20-70 s each under load), longest
#: first, run before the others: `--dist loadgroup` hands out the groups, then the ungrouped
#: tests in this order, so the last tests given out are short and the workers finish together
#: (the replay, racing, parallel-tuning and plot-gallery tests, 10-36 s each, came last and
#: left the other workers idle for up to 25 s).
SLOW_FIRST = ("tests/tune/test_tune.py", "tests/campaign/test_campaign.py",
              "tests/sim/test_simulate_cli.py", "tests/test_fileio.py",
              "tests/tune/test_replay_cli.py", "tests/tune/test_racing.py",
              "tests/tune/test_parallel_tune.py", "tests/test_plotstyle.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `last` move to the end, in their order (xdist's workers collect alike,
    and a group's tests run in this order on its worker), the modules of SLOW_FIRST to the
    front; xdist groups are made to hold."""
    root = config.rootpath

    def rank(item: pytest.Item) -> int:
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        return SLOW_FIRST.index(path) if path in SLOW_FIRST else len(SLOW_FIRST)

    items.sort(key=lambda item: (item.get_closest_marker("last") is not None, rank(item)))
    _xdist_groups(config, items)


def _xdist_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--dist loadgroup` keeps a group on one worker by a suffix `@GROUP` that pytest-xdist
    appends to each test's node id in its own collection hook; pytest 9.2's structured node
    ids no longer take that assignment (an open pytest-xdist bug), so every group was spread
    over both workers: each set up the group's module fixtures (a Ceph, a Swift, a browser)
    again, and the kill/lock tests ran side by side. The suffix is set here as pytest 9.2
    keeps a node id (nothing to do on a pytest whose ids take xdist's own)."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # pytest before 9.2: xdist's own suffix works
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def ceph_cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One real memstore Ceph (1 mon, 1 mgr, 1 OSD) for every Ceph test of the session
    (the cluster's own tests and the runner contract; each bringing up its own cost
    half a minute): (cluster, its directory, the status `up` gave). Their modules share
    the xdist group "ceph", so one worker holds it; brought down at the end, or by the
    test marked `last` that checks what down leaves."""
    import storlab.campaign.runners.cluster_walls  # noqa: F401  (the walls the cluster's programs run in)
    from storlab.clusters._util import free_port_block
    from storlab.clusters.ceph import CephCluster, CephOptions

    base = tmp_path_factory.mktemp("ceph")
    c = CephCluster(base)
    # a random free port: a user's cluster or another test run may hold the default
    st = c.up(CephOptions(osds=1, store="memstore", osd_bytes=512 << 20,
                          mon_port=free_port_block(1), pg_num=16, tie_to_parent=True),
              timeout=180)
    yield c, base, st
    c.down()


@pytest.fixture(scope="session")
def swift_cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One real Swift (2 replicas on 3 devices of an XFS loop file, S3 and Swift APIs) for
    every Swift test of the session (the cluster's own tests and the runner contract; each
    bringing up its own cost half a minute under load): (cluster, its directory, the status
    `up` gave). Their modules share the xdist group "clusters"; brought down at the end, or
    by the test marked `last` that checks what down leaves."""
    from storlab.clusters._util import free_port_block
    from storlab.clusters.swift import SwiftCluster, SwiftOptions

    base = tmp_path_factory.mktemp("clusters")
    c = SwiftCluster(base)
    # random free ports: a user's own cluster or another test run may hold the defaults;
    # tie_to_parent: a killed test run takes its daemons with it
    port = free_port_block(5)
    st = c.up(SwiftOptions(replicas=2, port=port + 3, storage_port=port,
                           memcached_port=port + 4, tie_to_parent=True), timeout=90)
    yield c, base, st
    c.down()


@pytest.fixture(scope="module")
def lan():
    """Two network namespaces ("hosts") on a private /24 joined to this namespace by veth
    pairs on a bridge (storlab.clusters.netns.Lan); removed with everything started in them
    when the module's tests are done. Skipped, with the reason, without root or iproute2."""
    from storlab.clusters.netns import Lan, NetnsError, unavailable

    why = unavailable()
    if why:
        pytest.skip(why)
    try:
        net = Lan(2).__enter__()
    except NetnsError as exc:
        pytest.skip(f"cannot create network namespaces here: {exc}")
    try:
        yield net
    finally:
        net.close()


# ------------------------------------------------ acting on a moment of a running program
def _stopped_or_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in "TtZX"
    except (OSError, IndexError):
        return True


def _group(pgid: int) -> list[int]:
    """The processes of process group `pgid`."""
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[2]) == pgid:
                        out.append(int(e))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _stop(pid: int, group: bool, patience: float = 5.0) -> bool:
    """SIGSTOP to `pid` (or its process group), then True once every process is seen
    stopped: a system call one was in (a store's commit) has finished, so nothing it writes
    changes until SIGCONT. False if one did not stop within `patience` s (one waiting for a
    vfork()ed child that the stop caught before its exec cannot stop)."""
    send = os.killpg if group else os.kill
    with contextlib.suppress(ProcessLookupError):  # gone: nothing left to change the state
        send(pid, signal.SIGSTOP)
    deadline = time.monotonic() + patience
    while not all(_stopped_or_gone(p) for p in (_group(pid) if group else [pid])):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


@pytest.fixture(scope="session")
def act_on_a_stopped_look() -> Callable[..., Any]:
    """`act_on_a_stopped_look(proc, look, act, group=False, timeout=120)`: for a test that
    signals a running program at a moment it reads from what the program writes (its store).
    `look()` returns the state when it is the moment, else None. Once a look at the running
    program says so, the program is stopped (SIGSTOP; its process group with `group`) and
    looked at again: `act(state)` (a SIGKILL, a SIGINT) gets the state of that second look,
    sent before the program goes on (CI saw a run end between an unstopped look and a kill
    under load: a kill meant for three runs in flight cut two). With SIGKILL nothing finishes
    between the look and the act. A signal the program handles (SIGINT) is handled only
    after SIGCONT, once the C call it was stopped in returns: that one step (an sqlite
    commit marking a run done) can still complete, so such a test must allow it.
    Returns that state; None if the program ended or `timeout` s passed first."""
    def watch(proc: Any, look: Callable[[], Any], act: Callable[[Any], None],
              group: bool = False, timeout: float = 120, every: float = 0.05) -> Any:
        deadline = time.monotonic() + timeout
        send = os.killpg if group else os.kill
        while proc.poll() is None and time.monotonic() < deadline:
            if look() is not None:  # the program running: only then stopped, for the look
                try:               # that counts (stopping at every look slowed it down)
                    if _stop(proc.pid, group):
                        state = look()
                        if state is not None:
                            act(state)
                            return state
                finally:
                    with contextlib.suppress(ProcessLookupError):  # killed meanwhile
                        send(proc.pid, signal.SIGCONT)
            time.sleep(every)
        return None
    return watch


# ------------------------------------------------------------- a program on a terminal
#: The program of `terminal_probe`.
_TERMINAL_PROBE = r"""
import errno, fcntl, json, os, pty, termios
def ioc(fd, req, arg):
    try:
        fcntl.ioctl(fd, req, arg)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
r = {"tty0": os.isatty(0), "sid": os.getsid(0), "sti0": ioc(0, 0x5412, b"x")}
try:
    os.close(os.open("/dev/tty", os.O_RDWR))
    r["devtty"] = "opened"
except OSError as e:
    r["devtty"] = errno.errorcode[e.errno]
rd, wr = os.pipe()
pid, master = pty.fork()
if pid == 0:
    os.write(wr, json.dumps([ioc(0, 0x5412, b"x"), ioc(0, 0x541C, bytes([2]) + bytes(12)),
                             ioc(0, termios.TIOCGWINSZ, bytes(8))]).encode())
    os._exit(0)
os.close(wr)
os.waitpid(pid, 0)
r["own"] = json.loads(os.read(rd, 4096))
print(json.dumps({"y": 1, "got": r}))
"""


@pytest.fixture(scope="session")
def terminal_probe() -> str:
    """A Python program (`python3 -c`) that says what it holds of a terminal, as a command
    campaign's metric line `{"y": 1, "got": {...}}`: `tty0` (is stdin a terminal), `sid`
    (its session), `sti0` (TIOCSTI on stdin: "ok" or the errno's name), `devtty` (opening
    /dev/tty: "opened" or the errno's name), `own` (TIOCSTI, TIOCLINUX, TIOCGWINSZ on a pty
    of its own, its child's controlling terminal, where only a filter refuses the first
    two)."""
    return _TERMINAL_PROBE


def _under_a_pty(argv: list[str], cwd: str | Path | None = None,
                 env: Mapping[str, str] | None = None, timeout: float = 120
                 ) -> tuple[int, str]:
    """See `under_a_pty`."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            if cwd is not None:
                os.chdir(cwd)
            os.execve(argv[0], argv, os.environ if env is None else env)
        finally:
            os._exit(127)
    seen, status = b"", -1
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    seen += os.read(fd, 65536)
                except OSError:  # EIO: the child closed the terminal
                    pass
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                pid, status = 0, os.waitstatus_to_exitcode(st)
                break
    finally:
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
    return status, seen.decode(errors="replace")


@pytest.fixture(scope="session")
def under_a_pty() -> Callable[..., tuple[int, str]]:
    """`under_a_pty(argv, cwd=None, env=None, timeout=120)` -> (exit status, what it wrote):
    argv run with a new pty as its controlling terminal and standard streams (an
    operator's ssh session); `env` replaces the environment; killed after `timeout` s."""
    return _under_a_pty

"""What a campaign file declares under `sandbox.*` about places outside its own directory,
without `allow_destructive`: a writable directory in the system's trees (/var/log, a
crontab spool, /home...), another user's or one others may write, a root daemon's Unix
socket, root's or a user's home shown while the programs have the network, and a program
under /root whose home entry would be shown whole. Each through the real CLI and real
bwrap; each refused in one line naming the field, or closed inside the walls, and the
legitimate places (the campaign's own directories, a non-root daemon's socket) keep
working; a writable declaration outside the campaign's directory needs the opt-in."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the host's trees)"),
              pytest.mark.xdist_group("lock")]

NOBODY = 65534


def campaign(d: Path, command: list[str], sandbox: dict[str, Any],
             runner: dict[str, Any] | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    spec: dict[str, Any] = {
        "name": "outside", "seed": 1, "randomize": False,
        "space": {"factors": [{"name": "n", "kind": "categorical", "values": ["a", "b"]}]},
        "design": {"configs": [{"n": "a"}]},
        "runner": runner or {"type": "command", "options": {"command": command,
                                                            "json_metrics": {"y": "y"}}},
        "sandbox": sandbox,
    }
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def write_in(d: Path | str) -> list[str]:
    return ["sh", "-c", f"echo PWNED > {d}/root; echo '{{\"y\": 1}}'"]


def one_line(r: subprocess.CompletedProcess[str], *words: str) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stdout, r.stderr)
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """Directories outside the campaign: in /var/spool (a crontab spool's stand-in), in
    /home, another user's under /tmp, one everybody may write, one root made under /tmp
    (legitimate), and a link to it in a directory another user owns."""
    made = {"spool": Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/var/spool")),
            "home": Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/home")),
            "foreign": Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/tmp")),
            "open": Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/tmp")),
            "mine": Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/tmp")),
            "holder": Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/tmp"))}
    for d in made.values():
        d.chmod(0o755)
    os.chown(made["foreign"], NOBODY, NOBODY)
    made["open"].chmod(0o777)
    os.chown(made["holder"], NOBODY, NOBODY)
    (made["holder"] / "lnk").symlink_to(made["mine"])
    made["link"] = made["holder"] / "lnk"
    yield made
    for k, d in made.items():
        if k != "link":
            shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("where", ["spool", "home", "foreign", "open", "link", "mine"])
def test_a_declared_writable_directory_outside_is_refused_in_one_line(
        tmp_path: Path, storlab: Any, outside: dict[str, Path], where: str) -> None:
    """A7-6, A8-3: `sandbox.writable: [/var/spool/cron/crontabs]` (here a directory made
    in /var/spool), a directory in /home, another user's, one everybody may write, a link
    in a directory another user owns, and a directory root made under /tmp (root-owned,
    0755: what a deny-list of trees let through): outside the campaign's directory,
    without `allow_destructive`, each is refused before any run, in one line naming the
    field, the path and the way out; nothing written there."""
    d = outside[where]
    camp = campaign(tmp_path / "c", write_in(d), {"writable": ["data", str(d)]})
    r = storlab("run", camp, "-q", timeout=120)
    line = one_line(r, "field sandbox.writable[1]", str(d),
                    "lies outside the campaign's directory",
                    "put it inside the campaign's directory",
                    "sandbox.allow_destructive: true")
    if where == "link":
        assert f"leading to {outside['mine']}" in line, line
    assert not (d / "root").exists()
    assert not (outside["mine"] / "root").exists()
    r = storlab("status", camp)
    assert r.returncode == 0 and "declared but read-only (outside the campaign's " \
        f"directory: writable only with sandbox.allow_destructive): {d}" in r.stdout, \
        r.stdout
    assert "sandbox.writable inside the campaign's directory only" in r.stdout, r.stdout


@pytest.fixture
def top_level() -> Iterator[tuple[Path, Path]]:
    """A8-3's victims: a root-owned 0755 directory in a top-level tree no deny-list names
    (`/mnt/<x>`, as `/work/<x>`, `/data/<x>`), holding a script root runs."""
    d = Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/mnt"))
    d.chmod(0o755)
    job = d / "job.sh"
    job.write_text("#!/bin/sh\necho ORIGINAL\n")
    job.chmod(0o755)
    yield d, job
    shutil.rmtree(d, ignore_errors=True)


ECHO = ["sh", "-c", "echo '{\"y\": 1}'"]


def test_a_root_run_script_in_an_unlisted_tree_is_not_overwritten(
        tmp_path: Path, storlab: Any, top_level: tuple[Path, Path]) -> None:
    """A8-3: `sandbox.writable: [/mnt/<x>]` (root's, 0755, a script root runs there) and
    a link inside the campaign's directory leading there: refused in one line, the
    script unchanged. storlab's own interpreter's site-packages (a `.pth` there runs as
    root at the next start) is refused the same way (`status` says read-only)."""
    import sysconfig

    d, job = top_level
    evil = ["sh", "-c", f"printf 'id\\n' > {job}; echo '{{\"y\": 1}}'"]
    camp = campaign(tmp_path / "c", evil, {"writable": [str(d)]})
    r = storlab("run", camp, "-q", timeout=120)
    one_line(r, "field sandbox.writable[0]", str(d), "lies outside the campaign's directory",
             "sandbox.allow_destructive: true")
    (tmp_path / "l").mkdir()
    (tmp_path / "l" / "out").symlink_to(d)
    camp = campaign(tmp_path / "l", evil, {"writable": ["out"]})
    r = storlab("run", camp, "-q", timeout=120)
    one_line(r, "field sandbox.writable[0]", f"leading to {d}",
             "lies outside the campaign's directory")
    assert job.read_text() == "#!/bin/sh\necho ORIGINAL\n"
    site = sysconfig.get_paths()["purelib"]
    camp = campaign(tmp_path / "s", ECHO, {"writable": [site]})
    r = storlab("status", camp)
    assert f"writable only with sandbox.allow_destructive): {site}" in r.stdout, r.stdout
    r = storlab("run", camp, "-q", timeout=120)
    one_line(r, "field sandbox.writable[0]", site, "lies outside the campaign's directory")
    # the opt-in: the same declaration runs and writes
    camp = campaign(tmp_path / "a", evil, {"writable": [str(d)], "allow_destructive": True})
    r = storlab("run", camp, "-q", timeout=120)
    assert r.returncode == 0 and job.read_text() == "id\n", r.stderr


def test_the_walls_open_no_declared_directory_outside_the_campaign(
        tmp_path: Path, top_level: tuple[Path, Path]) -> None:
    """A8-3, the walls alone (the preflight skipped, as a library caller would): a
    `sandbox.writable` directory outside the campaign's directory is not bound writable
    (the program's write fails, the script unchanged); inside, it opens."""
    from storlab.campaign.task import RunTask, execute_task

    d, job = top_level
    camp = tmp_path / "camp"
    (camp / "out").mkdir(parents=True)
    (camp / "scratch").mkdir()

    def run(where: Path) -> Any:
        task = RunTask(key="c1-r1", config={}, runner_type="command",
                       runner_options={"command": ["sh", "-c", f"echo PWNED > {where}/job.sh;"
                                                   " echo '{\"y\": 1}'"],
                                       "json_metrics": {"y": "y"}},
                       values={}, workdir=str(camp / "scratch" / "c1-r1"), timeout=30,
                       writable=[str(where)], homes=[str(camp)])
        return execute_task(task).result

    res = run(d)
    assert job.read_text() == "#!/bin/sh\necho ORIGINAL\n", res.stderr[-400:]
    res = run(camp / "out")
    assert res.status == "ok" and (camp / "out" / "job.sh").read_text() == "PWNED\n", \
        res.stderr[-400:]


def test_a_directory_of_the_campaigns_own_opens_and_allow_destructive_opens_the_rest(
        tmp_path: Path, storlab: Any, outside: dict[str, Path]) -> None:
    """A directory inside the campaign's directory opens writable; with
    `allow_destructive: true` a directory root made under /tmp and a system tree's
    directory open too (the way out)."""
    (tmp_path / "c" / "out").mkdir(parents=True)
    camp = campaign(tmp_path / "c", write_in(tmp_path / "c" / "out"), {"writable": ["out"]})
    r = storlab("status", camp)
    assert "the runner's targets, out; " in r.stdout, r.stdout
    r = storlab("run", camp, "-q", timeout=120)
    assert r.returncode == 0 and (tmp_path / "c" / "out" / "root").read_text() == "PWNED\n", \
        r.stderr
    for i, where in enumerate(("mine", "spool")):
        d = outside[where]
        camp = campaign(tmp_path / f"d{i}", write_in(d), {"writable": [str(d)],
                                                          "allow_destructive": True})
        r = storlab("run", camp, "-q", timeout=120)
        assert r.returncode == 0 and (d / "root").exists(), r.stderr


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_a_runner_target_directory_in_a_system_tree_is_refused(
        tmp_path: Path, storlab: Any, outside: dict[str, Path]) -> None:
    """fio `directory: /var/spool/<x>` (a target directory of the runner's, opened whole)
    holding fio's own file name: refused in one line (fio wrote there; a new file there
    was refused already, `refused_new_file`): outside the campaign's directory, as any
    runner target without allow_destructive."""
    spool = outside["spool"]
    runner = {"type": "fio", "exclude": ["n"],
              "options": {"directory": str(spool), "job_name": "j", "rw": "write",
                          "bs": "4k", "size": "64k"}}
    (spool / "j.0.0").touch()  # fio's own name (a leftover): its directory opened whole
    camp = campaign(tmp_path / "c", [], {}, runner)
    r = storlab("run", camp, "-q", timeout=120)
    one_line(r, "field runner.options.directory", str(spool),
             "outside the campaign's directory", "sandbox.allow_destructive: true")
    assert [p.name for p in spool.iterdir()] == ["j.0.0"]
    assert (spool / "j.0.0").stat().st_size == 0


class Listener:
    """A Unix socket listener in its own process, as `uid` (setpriv), that writes what the
    first connection sends to `got` (a root daemon that does what it is asked, or a
    database's as its own account)."""

    def __init__(self, d: Path, uid: int) -> None:
        self.sock, self.got = d / "d.sock", d / "got"
        code = ("import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\n"
                "s.listen(4)\ns.settimeout(60)\nwhile True:\n c,_=s.accept()\n"
                " b=c.recv(100)\n if b:\n  open(sys.argv[2],'wb').write(b)\n  break\n")
        argv = ["/usr/bin/python3", "-c", code, str(self.sock), str(self.got)]
        if uid:
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        self.proc = subprocess.Popen(argv)
        for _ in range(100):
            if self.sock.exists():
                break
            threading.Event().wait(0.05)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


SEND = ["python3", "-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); "
        "s.connect(sys.argv[1]); s.sendall(b'id > /etc/x'); print('{\"y\": 1}')"]


def test_a_root_daemons_socket_is_refused_a_non_root_daemons_opens(
        tmp_path: Path, storlab: Any) -> None:
    """A7-7: `sandbox.sockets` naming the socket of a daemon running as root (what
    Docker's is): refused in one line, the daemon told nothing. The socket of a daemon
    running as another account (a database's) opens and the program reaches it."""
    d = Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/tmp"))
    d.chmod(0o755)
    try:
        root = Listener(d, 0)
        try:
            camp = campaign(tmp_path / "c", [*SEND, str(root.sock)],
                            {"sockets": [str(root.sock)]})
            r = storlab("run", camp, "-q", timeout=120)
            one_line(r, "field sandbox.sockets[0]", str(root.sock), "runs as root",
                     "sandbox.allow_destructive: true")
            assert not root.got.exists()
        finally:
            root.close()
        root.sock.unlink()
        os.chown(d, NOBODY, NOBODY)
        other = Listener(d, NOBODY)
        try:
            camp = campaign(tmp_path / "d", [*SEND, str(other.sock)],
                            {"sockets": [str(other.sock)]})
            r = storlab("run", camp, "-q", timeout=120)
            assert r.returncode == 0, r.stderr
            other.proc.wait(timeout=30)
            assert other.got.read_bytes() == b"id > /etc/x"
        finally:
            other.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_roots_files_shown_need_allow_destructive_with_or_without_the_network(
        tmp_path: Path, storlab: Any) -> None:
    """A7-5, A8-1: `sandbox.readable: [/root/...]` (or a place only root may read), with
    `sandbox.network: true` or without: refused in one line (its programs, root inside,
    could send root's files to another user's listener, or copy them where another user
    reads them); with `allow_destructive: true` shown as before."""
    secret = Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/root"))
    closed = Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/tmp"))  # 0700
    try:
        for i, place in enumerate((secret, closed)):
            for net in (True, False):
                camp = campaign(tmp_path / f"c{i}{net}", ["sh", "-c", "echo '{\"y\": 1}'"],
                                {"readable": [str(place)], "network": net})
                r = storlab("run", camp, "-q", timeout=120)
                one_line(r, "field sandbox.readable[0]", str(place),
                         "sandbox.network" if net else "where other users reach it",
                         "sandbox.allow_destructive: true")
        camp = campaign(tmp_path / "d", ["sh", "-c", "echo '{\"y\": 1}'"],
                        {"readable": [str(secret)], "allow_destructive": True})
        r = storlab("run", camp, "-q", timeout=120)
        assert r.returncode == 0, r.stderr
    finally:
        shutil.rmtree(secret, ignore_errors=True)
        shutil.rmtree(closed, ignore_errors=True)


def test_a_program_under_root_sees_its_bin_not_its_home_entry(
        tmp_path: Path, storlab: Any) -> None:
    """A7-5: a program under /root/<x>/bin (rustup in /root/.cargo/bin, which runs any
    command) showed /root/<x> whole, registry tokens beside it: now its own directory
    only; a deeper install (/root/.pyenv/versions/3.11.7/bin) keeps its tree."""
    from storlab.campaign.runners import shown_install_trees

    top = Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/root"))
    try:
        (top / "bin").mkdir()
        prog = top / "bin" / "tool"
        prog.write_text(f"#!/bin/sh\ncat {top}/token; echo '{{\"y\": 1}}'\n")
        prog.chmod(0o755)
        (top / "token").write_text("root-only-token\n")
        (top / "token").chmod(0o600)
        assert shown_install_trees(str(prog), "/") == [str(top / "bin")]
        deep = top / "versions" / "3.11.7" / "bin" / "python3"
        assert shown_install_trees(str(deep), "/") == [str(top / "versions" / "3.11.7")]
        # a version manager's shim runs its tree's libexec: the entry whole
        assert shown_install_trees(str(top / "shims" / "python"), "/") == [str(top)]
        camp = campaign(tmp_path / "c", [str(prog)], {})
        r = storlab("status", camp)
        assert f"the program's install tree {top / 'bin'};" in r.stdout, r.stdout
        r = storlab("run", camp, "-q", timeout=120)
        assert r.returncode == 0, r.stderr
        out = "".join(p.read_text() for p in (tmp_path / "c").glob("*.output/*.stdout"))
        err = "".join(p.read_text() for p in (tmp_path / "c").glob("*.output/*.stderr"))
        assert "root-only-token" not in out and "token" in err, (out, err)
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_a_campaign_under_home_keeps_its_own_directories(storlab: Any) -> None:
    """The campaign's own directory tree opens wherever it lies, /home included: a
    declared `out` of its own and a fio log prefix in it (a pattern's directory)."""
    home = Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/home"))
    try:
        (home / "c" / "out").mkdir(parents=True)
        camp = campaign(home / "c", write_in(home / "c" / "out"), {"writable": ["out"]})
        r = storlab("run", camp, "-q", timeout=120)
        assert r.returncode == 0 and (home / "c" / "out" / "root").exists(), r.stderr
        (home / "d" / "logs").mkdir(parents=True)
        runner = {"type": "fio", "exclude": ["n"],
                  "options": {"rw": "write", "bs": "4k", "size": "64k",
                              "write_bw_log": str(home / "d" / "logs" / "bw")}}
        camp = campaign(home / "d", [], {}, runner)
        r = storlab("run", camp, "-q", timeout=120)
        assert r.returncode == 0, r.stderr
        assert list((home / "d" / "logs").glob("bw*.log")), r.stdout
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_run_directory_the_program_opened_is_private_again_when_kept(
        tmp_path: Path, storlab: Any) -> None:
    """A8-1: a campaign's command (no opt-in) copies a root-only file (/etc/shadow) into
    its run directory, makes the copy 0644 and the directory 0755 (and tries to give it to
    another user), then fails: the kept run directory, in a campaign directory other users
    may enter, is storlab's and 0700 again: another user reads nothing."""
    top = Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/tmp"))
    top.chmod(0o755)
    try:
        camp = campaign(top / "c", ["sh", "-c", "cat /etc/shadow > leak; chmod 644 leak; "
                                    f"chmod 755 .; chown {NOBODY} . || true; exit 1"], {})
        (top / "c").chmod(0o755)
        r = storlab("run", camp, "-q", timeout=120)
        assert "failed 1" in r.stdout, r.stdout + r.stderr
        run = next((top / "c").glob("*/c1-r1"))
        assert "root:" in (run / "leak").read_text()  # the program ran
        st = run.stat()
        assert (st.st_uid, oct(st.st_mode & 0o777)) == (0, oct(0o700)), (st.st_uid,
                                                                       oct(st.st_mode))
        p = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                            "--clear-groups", "cat", str(run / "leak")],
                           capture_output=True, text=True)
        assert p.returncode != 0 and "root:" not in p.stdout, p.stdout
    finally:
        shutil.rmtree(top, ignore_errors=True)


LATE = """\
import json, os, socket, sys, time
n, sock, go = sys.argv[1:]
if n == "a":  # run 1: waits while the root daemon comes (back)
    t = time.time()
    while not os.path.exists(go) and time.time() - t < 30:
        time.sleep(0.05)
else:  # run 2: asks the daemon what a root shell would do
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(b"id > /etc/x")
print(json.dumps({"y": 1}))
"""


def test_a_root_daemon_listening_after_the_check_is_not_reached(
        tmp_path: Path, storlab: Any) -> None:
    """A8-9: `sandbox.sockets: [<path>]` where nobody listens at the check (so it passes);
    a root daemon starts listening there during run 1 (a restarted Docker, root's tmux):
    run 2's walls ask again, from the socket they would bind, and leave it out; the run
    fails in one storlab line naming the socket, the daemon is told nothing."""
    import sqlite3

    d = Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/tmp"))
    d.chmod(0o755)
    sock, go = d / "d.sock", tmp_path / "c" / "go"
    camp = campaign(tmp_path / "c", ["python3", "-c", LATE, "{n}", str(sock), str(go)],
                    {"sockets": [str(sock)]})
    spec = yaml.safe_load(camp.read_text())
    spec["design"] = {"configs": [{"n": "a"}, {"n": "b"}]}
    camp.write_text(yaml.safe_dump(spec, sort_keys=False))
    got: list[subprocess.CompletedProcess[str]] = []
    t = threading.Thread(target=lambda: got.append(storlab("run", camp, "-q", timeout=120)))
    t.start()
    root = None
    try:
        for _ in range(600):  # run 1 started: the check is behind
            if (tmp_path / "c" / "scratch" / "c1-r1").exists():
                break
            threading.Event().wait(0.05)
        root = Listener(d, 0)
        go.touch()
        t.join(120)
        assert got and "ok 1, failed 1" in got[0].stdout, got
        with sqlite3.connect(tmp_path / "c" / "campaign.db") as db:
            tail = db.execute("SELECT stderr_tail FROM runs WHERE status = 'failed'"
                              ).fetchone()[0]
        assert "storlab: sandbox.sockets: " + str(sock) in tail and "runs as root" in tail, \
            tail
        assert not root.got.exists()
    finally:
        go.touch()
        t.join(120)
        if root is not None:
            root.close()
        shutil.rmtree(d, ignore_errors=True)

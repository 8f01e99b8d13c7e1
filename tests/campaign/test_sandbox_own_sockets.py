"""Programs that make Unix sockets of their own (Python's multiprocessing: a Manager, a
Listener, the forkserver) under the campaign's `sandbox.unix_sockets`, the hints a
refused program gets (only for what a campaign can declare), and what the sandbox shows
of /opt (an install tree there, the library directories ld.so.conf names)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from storlab.campaign.runners import landlock_missing, ld_conf_opt_dirs, shown_install_trees
from storlab.campaign.runners._program import sandbox_hint

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.xdist_group("fio")]

# a Manager's dict, a Listener and a Client, a forkserver Pool: each makes a Unix socket
OWN_SOCKETS = """
import json, multiprocessing as mp
from multiprocessing.connection import Client, Listener
if __name__ == "__main__":
    with mp.Manager() as m:
        d = m.dict(); d["y"] = 1; y = d["y"]
    with Listener(family="AF_UNIX") as lis:
        c = Client(lis.address); a = lis.accept(); c.send(2); y += a.recv()
    with mp.get_context("forkserver").Pool(2) as p:
        y += sum(p.map(abs, [-1, -2]))
    print(json.dumps({"y": y}))
"""


def _campaign(make: Any, d: Path, **sandbox: Any) -> Path:
    d.mkdir()
    (d / "own.py").write_text(OWN_SOCKETS)
    return make(d, [sys.executable, str(d / "own.py")], timeout=120, **sandbox)


def test_a_program_makes_its_own_unix_sockets_only_when_declared(storlab: Any,
                                                                 command_campaign: Any) -> None:
    """Without `sandbox.unix_sockets` the Manager's socket is refused (EPERM) and the hint
    names the declaration; with it the program runs whole (6 = 1 + 2 + 3). In a short
    directory: the sockets are made under TMPDIR (the run's directory), and a Unix
    socket's path holds 107 bytes at most."""
    tmp_path = Path(tempfile.mkdtemp(prefix="sl-", dir="/tmp"))
    try:
        _own_sockets(tmp_path, storlab, command_campaign)
    finally:
        shutil.rmtree(tmp_path)


def _own_sockets(tmp_path: Path, storlab: Any, make: Any) -> None:
    plain = _campaign(make, tmp_path / "p")
    r = storlab("run", plain, timeout=300)
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    with sqlite3.connect(plain.parent / "campaign.db") as db:
        (status, tail), = db.execute("SELECT status, stderr_tail FROM runs")
    assert status == "failed" and "Operation not permitted" in tail, tail
    assert "sandbox.unix_sockets: true" in tail, tail

    own = _campaign(make, tmp_path / "o", unix_sockets=True)
    r = storlab("status", own)
    assert "Unix sockets: the run's own (sandbox.unix_sockets)" in r.stdout, r.stdout
    missing = landlock_missing()  # the status line says whether Landlock's scopes apply
    assert ("; Landlock: abstract sockets and signals scoped" if missing is None
            else f"; Landlock: not applied ({missing})") in r.stdout, r.stdout
    r = storlab("run", own, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with sqlite3.connect(own.parent / "campaign.db") as db:
        (status, metrics), = db.execute("SELECT status, metrics FROM runs")
    assert status == "ok" and json.loads(metrics)["y"] == 6, metrics


def test_a_wrong_unix_sockets_value_is_one_line(tmp_path: Path, storlab: Any,
                                                command_campaign: Any) -> None:
    r = storlab("status", _campaign(command_campaign, tmp_path / "w", unix_sockets="yes please"))
    assert r.returncode == 2 and "sandbox.unix_sockets" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


TRACEBACK = ('  File "/usr/lib/python3.11/socket.py", line 232, in __init__\n'
             "    _socket.socket.__init__(self, family, type, proto, fileno)\n"
             "PermissionError: [Errno 1] Operation not permitted\n")


def test_the_eperm_hint_names_what_the_program_was_refused() -> None:
    """A socket made: `sandbox.unix_sockets` and `sandbox.sockets`; a connect (an abstract
    socket outside, Landlock): `sandbox.sockets`; a ring (fio says it on stdout):
    `sandbox.io_uring`."""
    made = sandbox_hint(TRACEBACK)
    assert "sandbox.unix_sockets: true" in made and "sandbox.sockets" in made, made
    assert "io_uring" not in made
    said = sandbox_hint("could not create socket: Operation not permitted")
    assert "sandbox.unix_sockets" in said, said
    conn = sandbox_hint("    s.connect('\\0db')\nPermissionError: [Errno 1] Operation not "
                        "permitted\n")
    assert "sandbox.sockets" in conn and "unix_sockets" not in conn, conn
    ring = sandbox_hint("", "fio: pid=6, err=1/file:engines/io_uring.c:998, "
                        "func=io_queue_init, error=Operation not permitted\n")
    assert "sandbox.io_uring: true" in ring and "socket" not in ring, ring
    pair = sandbox_hint("socketpair: Operation not permitted")
    assert "sandbox.unix_sockets: true" in pair, pair


@pytest.mark.parametrize("said", [
    "mount: /mnt: mount failed: Operation not permitted.",
    "chmod: changing permissions of 'sh': Operation not permitted",
    "attach 1: Operation not permitted\nseize 1: Operation not permitted",
    "unshare: unshare failed: Operation not permitted",
    "chown: changing ownership of '/data/connections.db': Operation not permitted",
])
def test_another_eperm_gets_no_socket_or_ring_hint(said: str) -> None:
    """EPERM from what no declaration opens (mount, a set-ID chmod, ptrace of pid 1)."""
    assert sandbox_hint(said, said) == ""


def test_ld_so_conf_names_the_library_directories_under_opt(tmp_path: Path) -> None:
    """Directories under /opt only (not /opt itself, not the system's), includes by glob
    relative to the including file, comments dropped."""
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "a.conf").write_text("/opt/b/lib64  # b's libraries\n/usr/lib\n")
    (tmp_path / "conf.d" / "skip.txt").write_text("/opt/c/lib\n")
    conf = tmp_path / "ld.so.conf"
    conf.write_text("# mine\n/opt/a/lib\n/opt\ninclude conf.d/*.conf\n/usr/local/lib\n"
                    f"include {conf}\n")
    assert ld_conf_opt_dirs(str(conf)) == ("/opt/a/lib", "/opt/b/lib64")


def test_a_program_under_opt_sees_its_package_directory() -> None:
    assert shown_install_trees("/opt/pkg/bin/prog", "/") == ["/opt/pkg"]
    assert shown_install_trees("/opt/pkg/x86_64/bin/prog", "/") == ["/opt/pkg"]
    assert shown_install_trees("/opt/pkg/prog", "/") == ["/opt/pkg"]
    opt_bin = shown_install_trees("/opt/bin/prog", "/")  # the prefix's own directories
    assert opt_bin[0] == "/opt/bin" and "/opt" not in opt_bin, opt_bin
    assert all(d.split("/")[2] in ("bin", "sbin", "lib", "lib32", "lib64", "libexec",
                                   "share") for d in opt_bin), opt_bin


def test_the_sandbox_shows_an_opt_package_and_ld_so_conf_libraries(
        storlab: Any, tmp_path: Path, command_campaign: Any) -> None:
    """A program in /opt/<x>/bin reads its package's files; a library directory under
    /opt that /etc/ld.so.conf.d names is shown (that directory only); another package
    under /opt stays hidden."""
    tag = f"storlab-test-{uuid.uuid4().hex[:8]}"
    pkg, libs, other = (Path("/opt") / f"{tag}-{n}" for n in ("pkg", "libs", "other"))
    conf = Path("/etc/ld.so.conf.d") / f"zz-{tag}.conf"
    try:
        for f in (pkg / "share" / "data.txt", libs / "lib" / "libx.txt",
                  libs / "run" / "state.txt", other / "state.txt"):
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(f.name)
        prog = pkg / "bin" / "prog"
        prog.parent.mkdir()
        prog.write_text("#!/bin/sh\nfor f in " + " ".join(str(p) for p in (
            pkg / "share" / "data.txt", libs / "lib" / "libx.txt", libs / "run" / "state.txt",
            other / "state.txt")) + "; do test -e $f && echo \"seen $f\" >&2; done\n"
            "echo '{\"y\": 1}'\n")
        prog.chmod(0o755)
        conf.write_text(f"{libs / 'lib'}\n")
        camp = tmp_path / "c"
        command_campaign(camp, [str(prog)])
        r = storlab("status", camp / "campaign.yaml")
        assert f"the program's install tree {pkg}, ld.so.conf's library directories " \
               f"{libs / 'lib'}" in r.stdout, r.stdout
        r = storlab("run", camp / "campaign.yaml", timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        said = "".join(p.read_text() for p in (camp / "campaign.db.output").glob("*.stderr"))
        seen = {line.split()[1] for line in said.splitlines() if line.startswith("seen ")}
        assert seen == {str(pkg / "share" / "data.txt"), str(libs / "lib" / "libx.txt")}, said
    finally:
        conf.unlink(missing_ok=True)
        for d in (pkg, libs, other):
            shutil.rmtree(d, ignore_errors=True)

"""fio client mode: the fio servers run outside storlab's walls, so only allow-listed
options reach them (an iolog or `replay_redirect` would name any file or device on the
server host), and `storlab fio-server` gives a server the walls local runs get. Real fio
servers on loopback; each victim is a file outside the scratch area, compared by bytes."""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.runners.fio import FioRunner
from storlab.campaign.spec import CampaignError
from storlab.clusters._util import free_port_block
from storlab.clusters.netns import wait_port

NOBODY = pwd.getpwnam("nobody").pw_uid
NOBODY_GROUP = pwd.getpwnam("nobody").pw_gid
STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)
pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@contextlib.contextmanager
def _serve(argv: list[str], walled: bool = False) -> Iterator[str]:
    """A fio server on 127.0.0.1 (`argv` plus its address), while the block runs."""
    port = free_port_block(1)  # below the ephemeral range: no outgoing connection takes it
    where = ["--port", str(port)] if walled else [f"--server=ip:127.0.0.1,{port}"]
    srv = subprocess.Popen([*argv, *where], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        wait_port("127.0.0.1", port, timeout=60)
        yield f"127.0.0.1,{port}"
    finally:
        srv.terminate()
        srv.wait(timeout=30)


@pytest.fixture
def plain_server() -> Iterator[str]:
    """A fio server as users start one: root, no walls."""
    with _serve(["fio"]) as s:
        yield s


def campaign(d: Path, options: dict[str, Any]) -> Path:
    (d / "scratch").mkdir(parents=True, exist_ok=True)
    spec = {"name": "client", "seed": 1, "timeout": 60, "repetitions": 1,
            "space": {"factors": [{"name": "bs", "kind": "categorical", "values": ["4k", "8k"]}],
                      "responses": [{"name": "write_iops", "goal": "maximize"}]},
            "design": {"kind": "full"}, "runner": {"type": "fio", "options": options}}
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim.dat"
    v.write_bytes(b"v" * 8192)
    return v


def _iolog(path: Path, name: Path) -> Path:
    path.write_text(f"fio version 2 iolog\n{name} add\n{name} open\n{name} write 0 4096\n"
                    f"{name} close\n")
    return path


def _refused(p: subprocess.CompletedProcess[str], option: str) -> None:
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and option in lines[0] and "client mode" in lines[0], p.stderr
    assert "campaign.yaml" in lines[0]


def test_read_iolog_naming_a_file_outside_is_refused(tmp_path: Path, victim: Path,
                                                     plain_server: str, storlab: Any) -> None:
    c = tmp_path / "c"
    c.mkdir()
    log = _iolog(c / "replay.log", victim)
    dummy = c / "scratch" / "dummy.dat"
    camp = campaign(c, {"clients": [plain_server], "read_iolog": str(log),
                        "ioengine": "psync", "filename": str(dummy), "size": "4k"})
    dummy.write_bytes(b"\0" * 4096)
    before = digest(victim)
    _refused(storlab("run", camp, timeout=120), "read_iolog")
    assert digest(victim) == before


def test_replay_redirect_to_a_file_outside_is_refused(tmp_path: Path, victim: Path,
                                                      plain_server: str, storlab: Any) -> None:
    c = tmp_path / "c"
    c.mkdir()
    dummy = c / "scratch" / "dummy.dat"
    camp = campaign(c, {"clients": [plain_server], "ioengine": "psync",
                        "read_iolog": str(c / "replay.log"), "replay_redirect": str(victim),
                        "filename": str(dummy), "size": "4k"})
    dummy.write_bytes(b"\0" * 4096)
    _iolog(c / "replay.log", dummy)
    before = digest(victim)
    p = storlab("run", camp, timeout=120)
    _refused(p, "read_iolog")
    assert digest(victim) == before
    # each option is named on its own, whichever comes first
    camp = campaign(c, {"clients": [plain_server], "replay_redirect": str(victim),
                        "filename": str(dummy), "size": "4k"})
    _refused(storlab("run", camp, timeout=120), "replay_redirect")


def test_engines_and_command_line_options_outside_the_lists_are_refused(
        tmp_path: Path) -> None:
    for extra, word in (({"ioengine": "sg"}, "ioengine='sg'"),
                        ({"extra_args": ["--trigger-remote=touch /x"]}, "trigger-remote"),
                        ({"verify": "md5"}, "verify="), ({"mem": "mmap:/etc/x"}, "mem=")):
        r = FioRunner(clients=["127.0.0.1"], rw="write", size="4k", **extra)
        with pytest.raises(CampaignError, match=f"{word}.*client mode"):
            r.check_target({}, base=tmp_path, workdir=tmp_path / "c1-r1")
        FioRunner(clients=["127.0.0.1"], rw="write", size="4k", allow_destructive=True,
                  **extra).check_target({}, base=tmp_path, workdir=tmp_path / "c1-r1")


def test_allowed_options_run_and_allow_destructive_passes_the_rest(
        tmp_path: Path, victim: Path, plain_server: str, storlab: Any) -> None:
    c = tmp_path / "c"
    # everyday options that name no file (refused before, every one)
    camp = campaign(c, {"clients": [plain_server], "rw": "randwrite", "size": "64k",
                        "iodepth": 2, "ioengine": "psync", "direct": 0, "numjobs": 1,
                        "runtime": 1, "thread": 1, "fallocate": "none",
                        "cpus_allowed": "0", "cpus_allowed_policy": "shared",
                        "stonewall": 1, "prio": 4, "prioclass": 2, "gtod_reduce": 1,
                        "norandommap": 1, "randrepeat": 0, "unlink": 1, "ramp_time": 0,
                        "log_avg_msec": 100, "zero_buffers": 1, "invalidate": 1})
    p = storlab("run", camp, timeout=120)
    assert p.returncode == 0 and "ok 2" in p.stdout, p.stdout + p.stderr
    # the owner's word passes an option off the list (the run itself is not the subject)
    camp = campaign(tmp_path / "d", {"clients": [plain_server], "rw": "write",
                                     "size": "4k", "allow_destructive": True,
                                     "description": "x", "verify_fatal": 0})
    assert storlab("run", camp, timeout=120).returncode == 0


def server_dir(tmp_path: Path) -> Path:
    """A directory for `storlab fio-server --dir`: run as root, the server runs as the
    directory's owner, which must not be root (here: nobody)."""
    d = tmp_path / "srv"
    d.mkdir()
    if os.geteuid() == 0:
        os.chown(d, NOBODY, NOBODY_GROUP)
    return d


def test_a_walled_fio_server_writes_only_its_directory(tmp_path: Path, victim: Path,
                                                       storlab_argv: list[str]) -> None:
    """A job in the server's directory runs as with any server; one naming a file
    elsewhere (what a client passing the guard with allow_destructive may send) meets
    the walls, and the file keeps its bytes."""
    srv = server_dir(tmp_path)
    ok, bad = tmp_path / "ok.fio", tmp_path / "bad.fio"
    ok.write_text("[a]\nfilename=data\nsize=64k\nrw=write\nioengine=psync\n")
    bad.write_text(f"[b]\nfilename={victim}\nsize=4k\nrw=write\n")
    before = digest(victim)
    with _serve([*storlab_argv, "fio-server", "--dir", str(srv)], walled=True) as server:
        out = _client(server, ok)
        assert "err= 0" in out and (srv / "data").stat().st_size == 64 << 10, out
        out = _client(server, bad)
        assert "exited with error 1" in out, out
    assert digest(victim) == before


def _client(server: str, job: Path, *extra: str) -> str:
    """What `fio --client` prints for `job` sent to `server` (as anyone may send one: fio's
    protocol has no authentication)."""
    p = subprocess.run(["fio", f"--client=ip:{server}", *extra, str(job)],
                       capture_output=True, text=True, timeout=60)
    return p.stdout + p.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the server drops root: needs root")
@pytest.mark.skipif(not os.path.isfile("/etc/shadow"), reason="no /etc/shadow")
def test_a_client_job_reads_no_root_only_file_through_the_walled_server(
        tmp_path: Path, storlab_argv: list[str]) -> None:
    """fio's server runs any job a client sends, `exec_prerun` included: run by root,
    `storlab fio-server` must not read root's files for it (it runs as DIR's owner, with
    no capability), neither through a program the job starts nor through `filename=`."""
    srv = server_dir(tmp_path)
    copy = srv / "shadow"
    steal = tmp_path / "steal.fio"
    # names relative to the server's directory: the 0700 directories above it are root's
    steal.write_text("[a]\nexec_prerun=/usr/bin/cp /etc/shadow shadow\n"
                     "exec_postrun=/usr/bin/chmod 644 shadow\n"
                     "filename=data\nsize=4k\nrw=write\n")
    read = tmp_path / "read.fio"
    read.write_text("[b]\nfilename=/etc/shadow\nsize=512\nbs=512\nrw=read\n")
    with _serve([*storlab_argv, "fio-server", "--dir", str(srv)], walled=True) as server:
        out = _client(server, steal)
        assert (srv / "data").exists(), out  # the job itself ran: the refusal is the walls'
        assert not copy.exists()
        # the server's fio executes nothing but itself: the shell never started (the
        # account's rights are shown by the read below)
        assert not (srv / "a.prerun.txt").exists()
        out = _client(server, read, "--readonly")
        assert "func=open(/etc/shadow), error=Permission denied" in out, out
    # the same read from a server as users start one (root, no walls) succeeds
    with _serve(["fio"]) as server:
        out = _client(server, read, "--readonly")
        assert "err= 0" in out and "error=" not in out, out


def test_a_walled_fio_server_connects_only_to_its_declared_ports(
        tmp_path: Path, storlab_argv: list[str]) -> None:
    """TCP out of the server's jobs: refused by Landlock (EACCES) off the declared ports;
    with `--connect-port` (or `--ceph`: its monitors and OSDs) the connect reaches the
    kernel (nobody listens: ECONNREFUSED)."""
    srv = server_dir(tmp_path)
    port = free_port_block(1)  # nobody listens there
    job = tmp_path / "net.fio"
    job.write_text(f"[n]\nioengine=net\nhostname=127.0.0.1\nport={port}\n"
                   "protocol=tcp\nrw=write\nsize=4k\n")
    with _serve([*storlab_argv, "fio-server", "--dir", str(srv)], walled=True) as server:
        assert "func=connect, error=Permission denied" in _client(server, job)
    with _serve([*storlab_argv, "fio-server", "--dir", str(srv), "--connect-port",
                 str(port)], walled=True) as server:
        assert "func=connect, error=Connection refused" in _client(server, job)
    ceph = tmp_path / "ceph.fio"
    ceph.write_text(job.read_text().replace(f"port={port}", "port=6789"))
    with _serve([*storlab_argv, "fio-server", "--dir", str(srv), "--ceph"],
                walled=True) as server:
        assert "func=connect, error=Connection refused" in _client(server, ceph)


def test_ceph_engines_pass_with_plain_names_only() -> None:
    """The ceph runner's fio load in client mode (rbd: pool, image, client name) is on the
    list; a name that could steer a path on the server, or `conf`, is not."""
    from storlab.campaign.runners.fio_guard import refused_client_option

    base = {"ioengine": "rbd", "clientname": "admin", "pool": "rbd", "rbdname": "img",
            "rw": "randread", "bs": "4k", "iodepth": "16"}
    r = FioRunner(clients=["h"])
    assert refused_client_option(r, base) is None
    for bad in ({"clientname": "../x"}, {"conf": "/tmp/ceph.conf"},
                {"clustername": "../../tmp/x"}):
        assert refused_client_option(r, {**base, **bad}) is not None, bad


def _fio_names(*args: str) -> set[str]:
    out = subprocess.run(["fio", *args], capture_output=True, text=True).stdout
    return {ln.split(":")[0].strip() for ln in out.splitlines()
            if ":" in ln and "has no options" not in ln}


def test_every_fio_option_is_judged_for_client_mode() -> None:
    """Each option the installed fio lists (`--cmdhelp=all`, the client engines'
    `--enghelp`) is on the list or refused with a reason, never both; each name on them
    is fio's (an option or its alias)."""
    from storlab.campaign.runners.fio_guard import (CLIENT_ENGINES, CLIENT_OPTIONS,
                                                    CLIENT_REFUSED)

    names = _fio_names("--cmdhelp=all").union(
        *(_fio_names(f"--enghelp={e}") for e in sorted(CLIENT_ENGINES | {"io_uring_cmd"})))
    assert not names - CLIENT_OPTIONS - CLIENT_REFUSED.keys()
    assert not CLIENT_OPTIONS & CLIENT_REFUSED.keys()
    for n in sorted((CLIENT_OPTIONS | CLIENT_REFUSED.keys()) - names):  # aliases
        said = subprocess.run(["fio", f"--cmdhelp={n}"], capture_output=True, text=True)
        assert f"alias: {n}" in said.stdout, n


@pytest.mark.parametrize("opts", [
    {"thread": "1"}, {"fallocate": "none"}, {"cpus_allowed": "0-1"},
    {"cpus_allowed_policy": "split"}, {"stonewall": "1"}, {"new_group": "1"},
    {"prio": "4"}, {"prioclass": "2"}, {"gtod_reduce": "1"}, {"disable_slat": "1"},
    {"ioengine": "io_uring", "hipri": "1", "fixedbufs": "1", "registerfiles": "1",
     "sqthread_poll": "1", "sqthread_poll_cpu": "0", "nonvectored": "1"},
    {"ioengine": "pvsync2", "uncached": "1"}, {"zonemode": "none"}, {"overwrite": "1"},
    {"create_on_open": "1"}, {"file_append": "1"}, {"group_reporting": "1"},
    {"refill_buffers": "1"}, {"scramble_buffers": "1"}, {"dedupe_percentage": "10"},
    {"random_generator": "lfsr"}, {"random_distribution": "zipf:1.2"},
    {"clat_percentiles": "1", "percentile_list": "50:99"}, {"lat_percentiles": "1"},
    {"disable_lat": "1"}, {"mem": "malloc"}, {"lockfile": "exclusive"}])
def test_options_that_name_no_file_pass_in_client_mode(opts: dict[str, str]) -> None:
    from storlab.campaign.runners.fio_guard import refused_client_option

    assert refused_client_option(FioRunner(clients=["h"]), opts) is None


@pytest.mark.parametrize("opts, why", [
    ({"write_bw_log": "bw"}, "log file"), ({"ioscheduler": "none"}, "sysfs"),
    ({"exec_prerun": "true"}, "program"), ({"verify_state_save": "1"}, "verification"),
    ({"mem": "mmaphuge:/hugetlbfs/x"}, "names a file"), ({"cgroup": "x"}, "cgroup"),
    ({"buffer_pattern": "'/etc/shadow'"}, "reads a file"), ({"no_such": "1"}, "list")])
def test_refusals_say_why_and_what_to_do(opts: dict[str, str], why: str) -> None:
    from storlab.campaign.runners.fio_guard import refused_client_option

    said = refused_client_option(FioRunner(clients=["h"]), opts)
    assert said is not None and why in said, said
    assert "allow_destructive: true if the servers may run it outside any wall" in said
    assert "fio-server" not in said  # a walled server does not lift the refusal


@pytest.mark.skipif(os.geteuid() != 0, reason="the server takes DIR's owner: needs root")
def test_fio_server_refuses_a_link_a_system_tree_and_a_system_accounts_directory(
        tmp_path: Path, storlab: Any) -> None:
    """The server runs as DIR's owner with DIR writable: DIR's owner who swapped it for a
    link to a daemon's directory (/var/log/ceph, /etc/polkit-1/rules.d) got the server as
    that daemon's account, writing there. A link on the way, a directory in the system's
    trees, or one a system account owns is refused in one line, before any server."""
    daemon = pwd.getpwnam("daemon").pw_uid  # uid 1 on Debian
    sysdir = tmp_path / "daemons-dir"
    sysdir.mkdir()
    os.chown(sysdir, daemon, daemon)
    link = tmp_path / "fs"
    link.symlink_to(sysdir)
    port = str(free_port_block(1))
    for d, why in ((link, "symbolic link"), (tmp_path / "fs" / ".", "symbolic link"),
                   (sysdir, f"owned by system account uid {daemon}"),
                   (Path("/etc"), "inside the system's trees"),
                   (Path("/var/log"), "inside the system's trees"),
                   ("//var/log", "inside the system's trees")):
        r = storlab("fio-server", "--dir", d, "--port", port, timeout=30)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (d, r.stderr)
        assert why in r.stderr, (d, r.stderr)
    assert list(sysdir.iterdir()) == []

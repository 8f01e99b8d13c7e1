"""fio client mode: the fio servers run outside storlab's walls, so only allow-listed
options reach them (an iolog or `replay_redirect` would name any file or device on the
server host), and `storlab fio-server` gives a server the walls local runs get. Real fio
servers on loopback; each victim is a file outside the scratch area, compared by bytes."""

from __future__ import annotations

import contextlib
import hashlib
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


def test_a_walled_fio_server_writes_only_its_directory(tmp_path: Path, victim: Path,
                                                       storlab: Any,
                                                       storlab_argv: list[str]) -> None:
    c = tmp_path / "c"
    (c / "scratch").mkdir(parents=True)
    with _serve([*storlab_argv, "fio-server", "--dir", str(c / "scratch")],
                walled=True) as server:
        # in its directory: the run works as with any server
        camp = campaign(c, {"clients": [server], "rw": "write", "size": "64k",
                            "ioengine": "psync"})
        p = storlab("run", camp, timeout=120)
        assert p.returncode == 0 and "ok 2" in p.stdout, p.stdout + p.stderr
        # a client that passes the guard with allow_destructive still meets the walls
        before = digest(victim)
        d = tmp_path / "d"
        camp = campaign(d, {"clients": [server], "rw": "write", "size": "4k",
                            "filename": str(victim), "allow_destructive": True})
        p = storlab("run", camp, timeout=120)
        assert "failed 2" in p.stdout, p.stdout + p.stderr
        assert digest(victim) == before


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

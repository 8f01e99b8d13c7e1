"""The run sandbox as a user meets it: what `storlab status` says about it, the one-line
refusal when namespaces cannot be made (and the opt-out), the run's resources (a default
timeout, output streamed to files with bounded tails in the store), and leftovers matched
by the campaign's identity, never by a path prefix."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.spec import DEFAULT_RUN_TIMEOUT, load_spec

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.xdist_group("lock")]


def command_campaign(d: Path, command: list[str], **extra: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    spec: dict[str, Any] = {
        "name": "sb", "seed": 1, "randomize": False,
        "space": {"factors": [{"name": "n", "kind": "categorical", "values": ["a", "b"]}]},
        "design": {"configs": [{"n": "a"}]},
        "runner": {"type": "command", "options": {"command": command,
                                                  "json_metrics": {"y": "y"}}},
        **extra,
    }
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


ECHO = ["sh", "-c", "echo '{\"y\": 1}'"]


def test_status_shows_the_sandbox_and_the_steps_outside_it(tmp_path: Path, storlab: Any) -> None:
    camp = command_campaign(tmp_path / "c", ECHO, sandbox={"writable": ["data"],
                                                           "allow_destructive": True}, setup=[
        {"run": "sysctl -w vm.swappiness=10", "system_writable": True}, "true"])
    r = storlab("status", camp)
    assert r.returncode == 0, r.stderr
    assert "sandbox: bwrap: read-only system (/usr, /etc, /sys) and campaign " \
           "directory; writable: each run's directory, the runner's targets, data; " \
           "sandbox.writable and the runner's targets anywhere " \
           "(sandbox.allow_destructive); declared " \
           "devices writable (allow_destructive); network: none (its own); Unix sockets: none; io_uring: " \
           "none but the runner's own need" in r.stdout
    assert "outside the sandbox (system_writable): setup[0]: sysctl -w vm.swappiness=10" \
        in r.stdout
    js = json.loads(storlab("status", camp, "--json").stdout)
    assert js["sandbox"][1] == "setup[0]: sysctl -w vm.swappiness=10"
    from storlab.report.inputs import from_campaign
    from storlab.report.sections import overview_section

    inp = from_campaign(camp)
    assert inp.sandbox == js["sandbox"]
    html = overview_section(inp, []).html
    assert "outside the sandbox" in html and "sysctl -w vm.swappiness=10" in html


def test_no_namespaces_refuses_in_one_line_unless_opted_out(tmp_path: Path, storlab: Any
                                                           ) -> None:
    """A stand-in bwrap that fails as bwrap does when the kernel refuses namespaces."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    camp = command_campaign(tmp_path / "c", ECHO)
    t0 = time.monotonic()
    r = storlab("run", camp, "-q", env={"STORLAB_BWRAP": str(fake)})
    # refused at once, not after a hang (the bound is loose: CI machines run under load 20+)
    assert r.returncode == 2 and time.monotonic() - t0 < 60
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "the kernel refused the namespaces (bwrap: No permissions to creating new " \
           "namespace)" in lines[0] and "STORLAB_UNSANDBOXED=1" in lines[0]
    assert not (tmp_path / "c" / "campaign.db").exists() or "ok 1" not in r.stdout
    r = storlab("run", camp, "-q", env={"STORLAB_BWRAP": str(fake), "STORLAB_UNSANDBOXED": "1"})
    assert r.returncode == 0, r.stderr
    assert "off (STORLAB_UNSANDBOXED=1)" in storlab(
        "status", camp, env={"STORLAB_UNSANDBOXED": "1"}).stdout


def test_default_timeout_is_stated_and_overridable(tmp_path: Path) -> None:
    camp = command_campaign(tmp_path / "a", ECHO)
    assert load_spec(camp).timeout == DEFAULT_RUN_TIMEOUT == 3600
    camp = command_campaign(tmp_path / "b", ECHO, timeout=5)
    assert load_spec(camp).timeout == 5
    camp = command_campaign(tmp_path / "c", ECHO, timeout=None)
    assert load_spec(camp).timeout is None


def test_a_flood_on_stdout_streams_to_a_file_and_the_store_keeps_a_tail(
        tmp_path: Path, storlab: Any) -> None:
    """64 MiB on stdout (then the metric): the run is ok, the store holds 16 MiB of it, the
    file beside the store the whole stream."""
    flood = ["sh", "-c", "head -c 67108864 /dev/zero | tr '\\0' 'x'; echo; "
             "echo '{\"y\": 1}'"]
    camp = command_campaign(tmp_path / "c", flood, timeout=60)
    r = storlab("run", camp, "-q")
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(tmp_path / "c" / "campaign.db")
    status, raw, err = con.execute("SELECT status, length(raw), stderr_tail FROM runs"
                                   ).fetchone()
    con.close()
    assert status == "ok" and raw <= 16 << 20
    assert "stdout was longer than 16 MiB; kept its tail (whole stream:" in err
    whole = tmp_path / "c" / "campaign.db.output" / "c1-r1.stdout"
    assert whole.stat().st_size > 64 << 20


def test_a_program_run_holds_little_memory_whatever_it_prints(tmp_path: Path) -> None:
    """run_program on 512 MiB of output: storlab's peak memory stays near the tail's."""
    code = textwrap.dedent(f"""
        import resource
        from storlab.campaign.runners import run_program
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out = run_program(["sh", "-c", "head -c 536870912 /dev/zero"], cwd={str(tmp_path)!r})
        assert out.exit_code == 0 and out.stdout_cut, out
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)
        """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=120)
    assert p.returncode == 0, p.stderr
    assert int(p.stdout.split()[-1]) < 120, p.stdout  # MiB above the start (tail: 16 MiB)


def test_leftovers_are_matched_by_identity_not_by_path(tmp_path: Path) -> None:
    """A campaign in a parent directory (its scratch holds the nested campaign) reaps only
    its own runs: the nested campaign's live run survives."""
    from storlab.campaign.executors import reap_leftovers
    from storlab.campaign.runners import campaign_identity, run_identity

    parent = tmp_path / "p"
    nested = parent / "scratch" / "inner"
    nested.mkdir(parents=True)
    theirs = subprocess.Popen(["sleep", "60"], start_new_session=True, env={
        **os.environ, "STORLAB_RUN": run_identity(nested / "campaign.db", "c1-r1")})
    ours = subprocess.Popen(["sleep", "60"], start_new_session=True, env={
        **os.environ, "STORLAB_RUN": run_identity(parent / "campaign.db", "c1-r1")})
    try:
        time.sleep(0.2)
        assert reap_leftovers(campaign_identity(parent / "campaign.db")) == []
        assert ours.wait(timeout=5) == -signal.SIGKILL
        assert theirs.poll() is None
    finally:
        for p in (ours, theirs):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_what_a_declaration_opens(tmp_path: Path) -> None:
    """Without allow_destructive: directories and single-link files named without links,
    each bound from the descriptor storlab opened; a file not made yet outside the run's
    directory opens nothing (the campaign's preflight refuses it unless its directory is
    declared; nothing is made); never a system directory, a link, a hard-linked file,
    /proc, or a new file in a system directory. With allow_destructive, a file not made
    yet opens its directory."""
    from storlab.campaign.runners._sandbox import Declared, declared, walls_for

    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "dir").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "hard").write_text("x")
    os.link(tmp_path / "hard", tmp_path / "hard2")
    os.symlink(tmp_path / "file", tmp_path / "link")
    targets = [str(tmp_path / n) for n in ("dir", "file", "hard", "link", "new/x")] + [
        str(tmp_path / "newfile"), str(tmp_path / "sub" / "newfile"), "/", "/etc",
        "/etc/storlab-new", "/usr/share",
        "/proc/self/root/tmp"]
    with declared(Declared(homes=(str(tmp_path),))):  # the campaign's directory
        w = walls_for(str(run), targets)
    try:
        assert sorted(w.writable) == sorted([str(run), str(tmp_path / "dir"),
                                             str(tmp_path / "file")])
        for fd, p in zip(w.fds, w.writable):  # each descriptor holds what its path names
            assert os.path.samestat(os.fstat(fd), os.stat(p))
    finally:
        w.close()
    assert os.listdir(tmp_path / "sub") == []
    assert not (tmp_path / "newfile").exists()
    assert not os.path.lexists("/etc/storlab-new") and not (tmp_path / "new").exists()
    w = walls_for(str(run), [str(tmp_path / "sub" / "newfile")], allow_destructive=True)
    assert w.writable == [str(run), str(tmp_path / "sub")]
    w.close()
    w = walls_for(str(run), [str(tmp_path / "file")])  # outside the campaign: shut
    assert w.writable == [str(run)]
    w.close()
    w = walls_for(str(run), [str(tmp_path / "link")], allow_destructive=True)
    assert w.writable == [str(run), str(tmp_path / "file")]
    w.close()


def test_a_run_directory_left_without_the_mark_is_reused_in_the_own_scratch_area(
        tmp_path: Path, storlab: Any) -> None:
    """A run directory an older storlab (or a killed attempt before the mark) left in the
    campaign's own scratch area is cleared and reused on resume; behind a link leading out
    of the campaign's directory it is refused, never deleted, unless this run's own mark is
    in it (another campaign's run there is not this one's)."""
    camp = command_campaign(tmp_path / "own", ECHO)
    left = tmp_path / "own" / "scratch" / "c1-r1"
    left.mkdir(parents=True)
    (left / "job.fio").write_text("left by an older storlab\n")
    p = storlab("run", str(camp), timeout=120)
    assert p.returncode == 0 and "ok 1, failed 0" in p.stdout, p.stdout + p.stderr
    assert not (left / "job.fio").exists()
    theirs = tmp_path / "shared"
    (theirs / "c1-r1").mkdir(parents=True)
    (theirs / "c1-r1" / "data").write_text("somebody's\n")
    (theirs / "c1-r1" / ".storlab-run").write_text("another-campaign/c1-r1")  # not ours
    # a scratch area leading out of the campaign's directory needs the opt-in (A8-4)
    camp = command_campaign(tmp_path / "linked", ECHO, sandbox={"allow_destructive": True})
    (tmp_path / "linked" / "scratch").symlink_to(theirs)
    p = storlab("run", str(camp), timeout=120)
    assert "ok 0, failed 1" in p.stdout, p.stdout + p.stderr
    assert (theirs / "c1-r1" / "data").read_text() == "somebody's\n"


def test_sandbox_writable_file_outside_the_campaign_needs_allow_destructive(
        tmp_path: Path, victim: Path, loopdev: str, storlab: Any) -> None:
    """An existing file (or a device) outside the campaign's directory in
    `sandbox.writable`: one line, exit 2, before any run, the victim untouched; with
    `allow_destructive` the campaign runs; a directory outside needs it too (A8-3), one
    inside the campaign's directory nothing."""
    before = victim.read_bytes()
    write = ["sh", "-c", f"printf PWNED | dd of={victim} conv=notrunc; echo '{{\"y\": 1}}'"]
    for declared in (str(victim), loopdev):
        camp = command_campaign(tmp_path / "c", write, sandbox={"writable": [declared]})
        r = storlab("run", camp, "-q")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "field sandbox.writable" in r.stderr and declared in r.stderr, r.stderr
        assert "allow_destructive" in r.stderr and not (tmp_path / "c" / "campaign.db").exists()
    assert victim.read_bytes() == before
    (tmp_path / "out").mkdir()
    camp = command_campaign(tmp_path / "d", ECHO, sandbox={"writable": [str(tmp_path / "out")]})
    r = storlab("run", camp, "-q")
    assert r.returncode == 2 and "field sandbox.writable[0]" in r.stderr, r.stderr
    (tmp_path / "d" / "out").mkdir()
    camp = command_campaign(tmp_path / "d", ECHO, sandbox={"writable": ["out"]})
    assert storlab("run", camp, "-q").returncode == 0
    camp = command_campaign(tmp_path / "e", write, sandbox={
        "writable": [str(victim)], "allow_destructive": True})
    r = storlab("run", camp, "-q")
    assert r.returncode == 0 and victim.read_bytes().startswith(b"PWNED"), r.stderr


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_a_fio_file_made_directly_in_the_campaign_directory_is_refused_before_any_run(
        tmp_path: Path, storlab: Any) -> None:
    """The sandbox keeps the campaign's directory (campaign file, store) read-only: a fio
    file fio would make there failed every run with `Read-only file system`. Refused in
    one line naming the file, exit 2, nothing run; the directory declared in
    `sandbox.writable` is refused too (it holds the store, which a program could swap);
    in a directory inside declared in `sandbox.writable`, the campaign runs and fio makes
    its file."""
    d = tmp_path / "c"
    d.mkdir()
    target = d / "f.dat"
    spec: dict[str, Any] = {
        "name": "f", "randomize": False,
        "space": {"factors": [{"name": "bs", "kind": "categorical", "values": ["4k", "8k"]}]},
        "design": {"configs": [{"bs": "4k"}]},
        "runner": {"type": "fio", "options": {"ioengine": "psync", "rw": "write",
                                              "size": "64k", "filename": str(target)}}}
    camp = d / "campaign.yaml"
    camp.write_text(yaml.safe_dump(spec, sort_keys=False))
    r = storlab("run", camp, "-q")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stdout + r.stderr
    assert str(target) in lines[0] and "data/f.dat" in lines[0], lines
    assert not (d / "campaign.db").exists() and not target.exists()
    camp.write_text(yaml.safe_dump({**spec, "sandbox": {"writable": ["."]}}, sort_keys=False))
    r = storlab("run", camp, "-q")
    assert r.returncode == 2 and "holds the campaign's store" in r.stderr, r.stdout + r.stderr
    target = d / "data" / "f.dat"
    target.parent.mkdir()
    spec["runner"]["options"]["filename"] = str(target)
    camp.write_text(yaml.safe_dump({**spec, "sandbox": {"writable": ["data"]}},
                                   sort_keys=False))
    r = storlab("run", camp, "-q")
    assert r.returncode == 0 and target.stat().st_size == 64 << 10, r.stdout + r.stderr


def test_status_names_the_programs_install_tree_shown_read_only(tmp_path: Path,
                                                                storlab: Any) -> None:
    """A program outside the system's trees (this Python, a virtualenv's or pyenv's): its
    install tree is shown read-only in the runs' sandbox, and `storlab status` says so."""
    from storlab.campaign.runners import shown_install_trees

    trees = shown_install_trees(sys.executable, str(tmp_path))
    if not trees:
        pytest.skip("this Python lies in the system's trees")
    camp = command_campaign(tmp_path / "c", [sys.executable, "-c", "print(1)"])
    r = storlab("status", camp)
    assert r.returncode == 0, r.stderr
    assert f"campaign directory, the program's install tree {', '.join(trees)};" in r.stdout
    assert os.path.realpath(sys.executable).startswith(tuple(trees)), trees


def test_the_seccomp_filter_decides_as_documented() -> None:
    """The hand-written BPF filter, run by a small interpreter over seccomp_data: the
    keyrings, ptrace/process_vm_writev naming pid 1 (also with high bits set, also from
    x32 and i386), chmod and its kin with set-ID bits, any call of an architecture the
    filter does not list (32-bit ARM), denied; the rest allowed. The real
    kernel runs it in test_sandbox_attacks.py (x86_64); i386's calls are checked here."""
    import platform
    import struct

    from storlab.campaign.runners._sandbox import _seccomp_program

    if platform.machine() != "x86_64":
        pytest.skip("x86_64's syscall numbers")
    prog = _seccomp_program()
    ins = [struct.unpack("<HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]

    def decide(arch: int, nr: int, *args: int) -> str:
        data = struct.pack("<iIQ6Q", nr, arch, 0, *args, *[0] * (6 - len(args)))
        a, pc = 0, 0
        while True:
            code, jt, jf, k = ins[pc]
            if code == 0x20:  # load
                a, pc = struct.unpack_from("<I", data, k)[0], pc + 1
            elif code == 0x54:  # and
                a, pc = a & k, pc + 1
            elif code == 0x06:  # return
                return ("allow" if k == 0x7FFF0000 else "enosys" if k == 0x50000 | 38
                        else "deny")
            else:
                hit = {0x15: a == k, 0x35: a >= k, 0x25: a > k, 0x45: bool(a & k)}[code]
                pc += 1 + (jt if hit else jf)

    x64, i386, x32 = 0xC000003E, 0x40000003, 0x40000000
    denied = [(x64, 248), (x64, 250), (x64, 101, 16, 1), (x64, 101, 0x4206, 1 << 32 | 1),
              (x64, x32 | 521, 16, 1), (x64, x32 | 248), (x64, 311, 1),
              (x64, 90, 0, 0o4755), (x64, 91, 3, 0o2755), (x64, 268, 0, 0, 0o6755),
              (x64, 452, 0, 0, 0o4000), (i386, 15, 0, 0o4755), (i386, 26, 16, 1),
              # files made with a set-ID mode: open, openat, creat, mknod, mknodat
              (x64, 2, 0, 0o101, 0o4755), (x64, 257, 0, 0, 0o100101, 0o2755),
              (x64, 85, 0, 0o4700), (x64, 133, 0, 0o104755), (x64, 259, 0, 0, 0o102755),
              (x64, x32 | 257, 0, 0, 0o101, 0o4755), (i386, 5, 0, 0o101, 0o4755),
              (i386, 295, 0, 0, 0o101, 0o6755), (i386, 8, 0, 0o4755), (i386, 14, 0, 0o104755),
              (i386, 297, 0, 0, 0o104755),
              (i386, 288), (i386, 348, 1), (i386, 306, 0, 0, 0o4755),
              # ioctl TIOCSTI, TIOCLINUX (any descriptor; the request's low 32 bits)
              (x64, 16, 0, 0x5412), (x64, 16, 7, 0x541C), (x64, 16, 0, 1 << 32 | 0x5412),
              (x64, x32 | 514, 0, 0x5412), (i386, 54, 0, 0x5412), (i386, 54, 3, 0x541C),
              # architectures the filter does not list: denied whatever the call
              (0x40000028, 4, 1, 2, 3), (0xC00000B7, 64), (0x12345678, 0)]
    allowed = [(x64, 247), (x64, 251), (x64, 101, 16, 2), (x64, 310, 1), (x64, 90, 0, 0o755),
               (x64, 268, 0, 0, 0o755), (x64, 1, 1, 0o4755), (i386, 15, 0, 0o755),
               (i386, 4, 1, 2, 3), (x64, 2, 0, 0o101, 0o644), (x64, 257, 0, 0, 0o101, 0o755),
               (x64, 85, 0, 0o755), (x64, 133, 0, 0o100644), (i386, 295, 0, 0, 0o101, 0o644),
               (x64, 16, 0, 0x5401), (x64, 16, 0x5412, 0x5413), (x64, x32 | 514, 0, 0x5401),
               (i386, 54, 0, 0x5401), (x64, 54, 0, 0x5412)]
    assert [c for c in denied if decide(*c) != "deny"] == []
    assert [c for c in allowed if decide(*c) != "allow"] == []
    # Unix sockets and io_uring rings: refused unless the program may have them
    # (`sandbox.sockets`, fio's io_uring engines), and so are datagram pairs (SOCK_DGRAM,
    # SOCK_RAW, whatever SOCK_CLOEXEC/SOCK_NONBLOCK; i386's socketcall(SYS_SOCKETPAIR));
    # stream and seqpacket pairs and other families stay
    socks = [(x64, 41, 1, 1), (x64, x32 | 41, 1, 5), (x64, 41, 1 << 32 | 1), (i386, 359, 1),
             (x64, 53, 1, 2), (x64, 53, 1, 2 | 0o2000000), (x64, 53, 1, 3),
             (x64, 53, 1 << 32 | 1, 2), (x64, x32 | 53, 1, 2), (i386, 360, 1, 2 | 0o4000)]
    # whatever is declared: families other than Unix, IPv4, IPv6, netlink (AF_VSOCK,
    # AF_PACKET, AF_ALG, also through socketpair and x32, i386), i386's socketcall
    # (SYS_SOCKET, SYS_SOCKETPAIR: the family in memory), CLONE_NEWUSER (unshare, clone)
    always = [(x64, 41, 40, 1), (x64, 41, 17, 3), (x64, 41, 38, 5), (x64, x32 | 41, 40),
              (x64, 41, 1 << 32 | 40), (x64, 53, 40, 1), (x64, 53, 30, 5), (i386, 359, 40),
              (i386, 360, 44), (i386, 102, 1, 0), (i386, 102, 8),
              (x64, 272, 0x10000000), (x64, 272, 0x10020000), (x64, 56, 0x10000011),
              (i386, 310, 0x10000000), (i386, 120, 0x10000000)]
    kept = [(x64, 41, 2, 1), (x64, 41, 10, 2), (x64, 41, 16, 3), (x64, 272, 0x20000),
            (x64, 56, 0x3D0F00), (x64, 56, 0x11), (i386, 120, 0x11), (i386, 359, 2)]
    rings = [(x64, 425, 8), (x64, 426), (x64, 427), (i386, 425), (x64, x32 | 425)]
    others = [(x64, 41, 2, 1), (x64, 41, 10), (x64, 53, 1, 1), (x64, 53, 1, 5 | 0o2004000),
              (x64, x32 | 53, 1, 1), (x64, 53, 2, 2), (i386, 360, 1, 1), (i386, 102, 3),
              (x64, 424), (x64, 428), (x64, 248 - 1)]
    for unix, ring in ((False, False), (True, False), (False, True), (True, True)):
        prog = _seccomp_program(unix, ring)
        ins = [struct.unpack("<HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
        assert {decide(*c) for c in socks} == {"allow" if unix else "deny"}, (unix, ring)
        assert {decide(*c) for c in rings} == {"allow" if ring else "deny"}, (unix, ring)
        assert {decide(*c) for c in others} == {"allow"}, (unix, ring)
        assert [c for c in denied if decide(*c) != "deny"] == []
        assert [c for c in always if decide(*c) != "deny"] == [], (unix, ring)
        assert {decide(*c) for c in kept} == {"allow"}, (unix, ring)
        # clone3 (flags in memory): ENOSYS, on which glibc falls back to clone
        assert {decide(x64, 435), decide(i386, 435), decide(x64, x32 | 435)} == {"enosys"}
        # openat2 (its mode in memory): ENOSYS, on which glibc's callers use openat
        assert {decide(x64, 437, 0, 0, 0, 24), decide(i386, 437)} == {"enosys"}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a directory under /var/lib)")
def test_status_lists_a_declared_system_directory_as_read_only(tmp_path: Path, storlab: Any
                                                               ) -> None:
    """`sandbox.writable: [/var/lib/x]` without allow_destructive: the sandbox leaves it
    read-only (outside the campaign's directory), and `status` listed it as writable. Now
    it says what the kernel does; the run is refused before it starts (A8-3)."""
    import tempfile

    sysdir = tempfile.mkdtemp(prefix="storlab-decl-", dir="/var/lib")
    try:
        camp = command_campaign(tmp_path / "c", ["sh", "-c", f"echo x > {sysdir}/f && "
                                                 "echo '{\"y\": 1}'"],
                                sandbox={"writable": ["data", sysdir]})
        r = storlab("status", camp)
        assert r.returncode == 0, r.stderr
        assert "the runner's targets, data; declared but read-only (outside the " \
               "campaign's directory: writable only with sandbox.allow_destructive): " \
               + sysdir \
               in r.stdout, r.stdout
        assert storlab("run", camp, "-q", timeout=120).returncode == 2
        assert not os.path.exists(os.path.join(sysdir, "f"))  # the kernel agrees
    finally:
        shutil.rmtree(sysdir, ignore_errors=True)


def test_a_system_writable_step_needs_allow_destructive(tmp_path: Path, storlab: Any) -> None:
    """A `system_writable` step runs with no walls: without `allow_destructive` it wrote a
    file outside (the README: an outside file is never written without it). Refused in one
    line before any step; with `allow_destructive: true` it runs."""
    victim = tmp_path / "outside"
    step = {"run": ["sh", "-c", f"echo x > {victim}"], "system_writable": True}
    camp = command_campaign(tmp_path / "c", ECHO, setup=[step])
    r = storlab("run", camp, "-q")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "field setup[0].system_writable" in r.stderr
    assert "sandbox.allow_destructive: true" in r.stderr
    assert not victim.exists()
    # refused before runs only: a finished campaign's results stay readable
    assert storlab("status", camp).returncode == 0
    camp = command_campaign(tmp_path / "c", ECHO, setup=[step],
                            sandbox={"allow_destructive": True})
    r = storlab("run", camp, "-q")
    assert r.returncode == 0 and victim.read_text() == "x\n", r.stderr

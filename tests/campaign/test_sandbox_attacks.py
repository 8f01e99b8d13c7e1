"""The sandbox against an attacker: for each route by which a run could write somebody's
file or a block device, real fio or a real command runs it inside the run's sandbox (real
bwrap) and the victim file and a real loop device stay untouched without an opt-in, and
are written with it (declared in `sandbox.writable` with `allow_destructive`).

Runs go through the worker's own path (`execute_task`): the static checks of preflight are
skipped on purpose, so what holds here is the kernel's doing. Each fio run writes 64 KiB.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import stat
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from storlab.campaign.task import RunTask, StepSpec, execute_task

pytestmark = [
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
    pytest.mark.xdist_group("fio"),
]

FIO = {"ioengine": "psync", "rw": "write", "bs": "4k", "size": "64k"}


def digest(p: str | Path, n: int = 4 << 20) -> str:
    with open(p, "rb") as fh:
        return hashlib.sha256(fh.read(n)).hexdigest()


@dataclass
class Lab:
    """A tmp directory with a victim file, the device, an evil script that writes both, and
    the campaign's scratch area."""

    root: Path
    dev: str
    victim: Path = field(init=False)
    evil: Path = field(init=False)
    scratch: Path = field(init=False)

    def __post_init__(self) -> None:
        self.victim = self.root / "victim.dat"
        self.victim.write_bytes(b"VICTIM\n" * 150_000)  # larger than fio's size: written in place
        self.scratch = self.root / "scratch"
        self.scratch.mkdir()
        self.evil = self.scratch / "evil.sh"
        self.evil.write_text(textwrap.dedent(f"""\
            #!/bin/sh
            printf PWNED | dd of={self.victim} conv=notrunc 2>/dev/null
            printf PWNED | dd of={self.dev} conv=notrunc 2>/dev/null
            exit 0
            """))
        self.evil.chmod(0o755)
        # the device starts as zeros again for every test
        with open(self.dev, "r+b") as fh:
            fh.write(b"\0" * (1 << 20))

    def state(self) -> tuple[str, str]:
        return digest(self.victim), digest(self.dev)

    def run(self, runner: str, options: dict[str, Any], opt_in: bool, *,
            setup: list[StepSpec] | None = None, workdir: Path | None = None,
            key: str = "c1-r1", timeout: float = 30) -> Any:
        opts = dict(options)
        if opt_in and runner == "fio":
            opts["allow_destructive"] = True
        task = RunTask(key=key, config={}, runner_type=runner, runner_options=opts, values={},
                       workdir=str(workdir or self.scratch / key), setup=setup or [],
                       timeout=timeout, writable=[str(self.victim), self.dev] if opt_in else [],
                       allow_destructive=opt_in, output_dir=str(self.root / "out"),
                       homes=[str(self.scratch)],
                       # shown read-only (the victim, the iolog), as the whole root was
                       # before the sandbox's root got smaller: a readable place outside
                       # the campaign's directory needs the opt-in (the evil script lies
                       # in the scratch area, shown anyway)
                       readable=[str(self.root)] if opt_in else [])
        return execute_task(task).result


@pytest.fixture
def lab(tmp_path: Path, loopdev: str) -> Lab:
    return Lab(tmp_path, loopdev)


def evil_argv(lab: Lab) -> list[str]:
    return ["sh", "-c", f"{lab.evil}; echo '{{\"y\": 1}}'"]


def cmd(argv: list[str]) -> dict[str, Any]:
    return {"command": argv, "json_metrics": {"y": "y"}}


# Each route: (name, what it aims at, how: lab -> (runner, options, extra keywords)).
Route = Callable[[Lab], tuple[str, dict[str, Any], dict[str, Any]]]


def _link(lab: Lab, name: str, to: str) -> str:
    os.symlink(to, lab.scratch / name)
    return f"../{name}"


def _iolog(lab: Lab) -> str:
    p = lab.root / "replay.log"
    # absolute names, with a `filename` in the job (with fio's `directory` before the
    # log's names, fio 3.33 crashes replaying)
    names = [str(lab.victim), lab.dev]
    lines = ["fio version 2 iolog", *(f"{f} add" for f in names)]
    for f in names:  # (fio 3.33 crashes on an `add` after other files' I/O)
        lines += [f"{f} open", f"{f} write 0 4096", f"{f} close"]
    p.write_text("\n".join(lines) + "\n")
    return str(p)


ROUTES: dict[str, tuple[str, Route]] = {
    "link in the scratch area -> victim file": ("victim", lambda lab: (
        "fio", {**FIO, "filename": _link(lab, "l", str(lab.victim))}, {})),
    "link in the scratch area -> device": ("device", lambda lab: (
        "fio", {**FIO, "filename": _link(lab, "l", lab.dev)}, {})),
    "by-id style link -> device": ("device", lambda lab: (
        "fio", {**FIO, "filename": str(_byid(lab))}, {})),
    "/proc/self/root/... -> victim file": ("victim", lambda lab: (
        "fio", {**FIO, "filename": f"/proc/self/root{lab.victim}"}, {})),
    "/proc/self/cwd/../.. -> victim file": ("victim", lambda lab: (
        "fio", {**FIO, "filename": "/proc/self/cwd/../../victim.dat"}, {})),
    "read_iolog replay of both": ("both", lambda lab: (
        "fio", {"ioengine": "psync", "read_iolog": _iolog(lab), "filename": "x.dat",
                "size": "64k"}, {})),
    "write_iolog onto the victim file": ("victim", lambda lab: (
        "fio", {**FIO, "write_iolog": str(lab.victim)}, {})),
    "write_iolog: a declared directory's sibling (data/../victim)": ("victim", lambda lab: (
        "fio", {**FIO, "directory": _dir(lab, "data"),
                "write_iolog": f"{lab.root}/data/../victim.dat"}, {})),
    "exec_prerun": ("both", lambda lab: ("fio", {**FIO, "exec_prerun": str(lab.evil)}, {})),
    "exec_postrun": ("both", lambda lab: ("fio", {**FIO, "exec_postrun": str(lab.evil)}, {})),
    "ioengine=exec": ("both", lambda lab: (
        "fio", {"ioengine": "exec", "program": str(lab.evil), "size": "4k",
                "runtime": "300ms", "time_based": 1}, {})),
    "trigger command": ("both", lambda lab: (
        "command", cmd(["sh", "-c", f"touch trig; fio --name=t --filename=t.dat --size=64k "
                        f"--rw=write --trigger-file=trig --trigger={lab.evil} "
                        "--output-format=json >/dev/null; echo '{\"y\": 1}'"]), {})),
    "setup step swaps the target for a link": ("victim", lambda lab: (
        "fio", {**FIO, "filename": "target.dat"},
        {"setup": [StepSpec(["ln", "-sf", str(lab.victim), "target.dat"])]})),
    "fio --output onto the device": ("device", lambda lab: (
        "command", cmd(["sh", "-c", f"fio --name=o --filename=o.dat --size=64k --rw=write "
                        f"--output={lab.dev}; echo '{{\"y\": 1}}'"]), {})),
    "fio --output onto the victim file": ("victim", lambda lab: (
        "fio", {**FIO}, {"extra": ["--output=" + str(lab.victim)]})),
    "workdir climbing out to a shared directory": ("victim", lambda lab: (
        "command", cmd(["sh", "-c", "printf PWNED | dd of=../../victim.dat conv=notrunc; "
                        "echo '{\"y\": 1}'"]),
        {"workdir": lab.root / "shared" / "c1-r1"})),
    "command writes the device node directly": ("device", lambda lab: (
        "command", cmd(["sh", "-c", f"printf PWNED | dd of={lab.dev} conv=notrunc; "
                        "echo '{\"y\": 1}'"]), {})),
    "setup step writes both": ("both", lambda lab: (
        "command", cmd(["sh", "-c", "echo '{\"y\": 1}'"]),
        {"setup": [StepSpec(str(lab.evil), shell=True)]})),
    "fio filename: the victim's own path": ("victim", lambda lab: (
        "fio", {**FIO, "filename": str(lab.victim)}, {})),
    "fio filename: a ':'-separated list ending at the victim": ("victim", lambda lab: (
        "fio", {**FIO, "filename": f"x.dat:{lab.victim}"}, {})),
    "writing through /proc/1/root": ("victim", lambda lab: (
        "command", cmd(["sh", "-c", f"printf PWNED | dd of=/proc/1/root{lab.victim} "
                        "conv=notrunc; echo '{\"y\": 1}'"]), {})),
}


def _dir(lab: Lab, name: str) -> str:
    (lab.root / name).mkdir(exist_ok=True)
    return str(lab.root / name)


def _byid(lab: Lab) -> Path:
    d = lab.root / "disk" / "by-id"
    d.mkdir(parents=True)
    os.symlink(lab.dev, d / "ata-STORLAB_TEST")
    return d / "ata-STORLAB_TEST"


def _changed(before: tuple[str, str], after: tuple[str, str], aim: str) -> list[str]:
    names = ("victim", "device")
    return [n for n, b, a in zip(names, before, after) if b != a and aim in (n, "both")]


def _go(lab: Lab, name: str, opt_in: bool) -> tuple[str, Any]:
    aim, make = ROUTES[name]
    runner, opts, kw = make(lab)
    extra = kw.pop("extra", None)
    if extra:
        opts["extra_args"] = extra
    return aim, lab.run(runner, opts, opt_in, **kw)


@pytest.mark.parametrize("name", list(ROUTES))
def test_route_leaves_victim_and_device_untouched_without_opt_in(lab: Lab, name: str) -> None:
    before = lab.state()
    aim, res = _go(lab, name, opt_in=False)
    after = lab.state()
    assert after == before, (name, res.status, res.stderr[-400:])


@pytest.mark.parametrize("name", list(ROUTES))
def test_route_writes_with_opt_in(lab: Lab, name: str) -> None:
    before = lab.state()
    aim, res = _go(lab, name, opt_in=True)
    changed = _changed(before, lab.state(), aim)
    want = ["victim", "device"] if aim == "both" else [aim]
    assert changed == want, (name, res.status, res.stderr[-600:])


# ---------------------------------------------------------------- routes with no opt-in
def _inside(lab: Lab, script: str, opt_in: bool = False) -> Any:
    return lab.run("command", cmd(["sh", "-c", script + "; echo '{\"y\": 1}'"]), opt_in)


def test_mknod_inside_the_sandbox_is_refused(lab: Lab) -> None:
    """A node made for the loop device's numbers (even with the device declared): no
    CAP_MKNOD, and every writable mount is nodev."""
    st = os.stat(lab.dev)
    before = lab.state()
    res = _inside(lab, f"mknod d b {os.major(st.st_rdev)} {os.minor(st.st_rdev)} 2>&1; "
                  "printf PWNED | dd of=d conv=notrunc 2>&1; ls -l d", opt_in=False)
    assert lab.state() == before
    assert "Operation not permitted" in res.raw + res.stderr, res.raw


def test_mount_and_remount_are_refused(lab: Lab) -> None:
    before = lab.state()
    res = _inside(lab, f"mount -o remount,rw / 2>&1; mount {lab.dev} /mnt 2>&1; "
                  f"mount --bind {lab.root} . 2>&1; printf PWNED > {lab.victim} 2>&1")
    assert lab.state() == before
    assert "permission denied" in (res.raw + res.stderr).lower(), res.raw + res.stderr


def test_sysctl_and_sys_writes_are_refused(lab: Lab) -> None:
    """/proc is private and read-only; /sys is read-only: no sysctl, no device setting."""
    name = os.path.basename(lab.dev)
    ra = Path(f"/sys/block/{name}/queue/read_ahead_kb")
    swappiness = Path("/proc/sys/vm/swappiness")
    before = (ra.read_text(), swappiness.read_text())
    res = _inside(lab, f"echo 4 > {ra} 2>&1; echo 7 > {swappiness} 2>&1")
    assert (ra.read_text(), swappiness.read_text()) == before
    assert (res.raw + res.stderr).count("Read-only file system") == 2, res.raw + res.stderr


def test_system_writable_step_is_the_declared_way_out(lab: Lab) -> None:
    """The same /sys write as a `system_writable` step changes the device's setting."""
    ra = Path(f"/sys/block/{os.path.basename(lab.dev)}/queue/read_ahead_kb")
    old = ra.read_text().strip()
    new = "4" if old != "4" else "8"
    try:
        res = lab.run("command", cmd(["sh", "-c", "echo '{\"y\": 1}'"]), False, setup=[
            StepSpec(f"echo {new} > {ra}", shell=True, system_writable=True)])
        assert res.status == "ok", res.stderr
        assert ra.read_text().strip() == new
    finally:
        ra.write_text(old)


def test_open_by_handle_at_is_refused(lab: Lab) -> None:
    """The bind-mount escape: a file handle of the victim opened through the writable run
    directory's mount. CAP_DAC_READ_SEARCH is dropped: EPERM. (The victim's handle taken
    through a hard link in the scratch area, shown read-only: the victim's own directory
    is not shown without the opt-in.)"""
    seen = lab.scratch / "victim-link"
    os.link(lab.victim, seen)
    code = textwrap.dedent(f"""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        buf = ctypes.create_string_buffer(8 + 128)
        ctypes.c_uint.from_buffer(buf).value = 128
        mnt = ctypes.c_int()
        r = libc.name_to_handle_at(-100, b"{seen}", buf, ctypes.byref(mnt), 0)
        assert r == 0, os.strerror(ctypes.get_errno())
        here = os.open(".", os.O_RDONLY)
        fd = libc.open_by_handle_at(here, buf, os.O_WRONLY)
        if fd >= 0:
            os.write(fd, b"PWNED")
        print("open_by_handle_at:", os.strerror(ctypes.get_errno()) if fd < 0 else "opened")
        print('{{"y": 1}}')
        """)
    before = lab.state()
    res = lab.run("command", cmd([sys.executable, "-c", code]), False)
    assert lab.state() == before
    assert "open_by_handle_at: Operation not permitted" in res.raw, res.raw + res.stderr


def test_a_hard_link_in_the_scratch_area_stays_shut(lab: Lab) -> None:
    """A hard link to the victim placed in the scratch area (the same bytes): fio may name
    it, the walls do not open a file with several links without the opt-in."""
    os.link(lab.victim, lab.scratch / "hl.dat")
    before = lab.state()
    res = lab.run("fio", {**FIO, "filename": "../hl.dat"}, False)
    assert lab.state() == before, res.stderr
    assert res.status == "failed"


def test_storlab_never_deletes_a_directory_it_did_not_make(lab: Lab) -> None:
    """A `workdir` that reaches somebody's directory: the run directory is not wiped."""
    theirs = lab.root / "shared" / "c1-r1"
    theirs.mkdir(parents=True)
    (theirs / "notes.txt").write_text("mine")
    res = lab.run("command", cmd(["sh", "-c", "echo '{\"y\": 1}'"]), False, workdir=theirs)
    assert res.status == "failed" and "not a run directory this campaign made" in res.stderr
    assert (theirs / "notes.txt").read_text() == "mine"


def test_the_device_is_absent_or_unopenable_without_opt_in(lab: Lab) -> None:
    """What the program sees: undeclared, no such node (a write makes a file in the private
    /dev); declared without allow_destructive, a node that cannot be opened."""
    res = lab.run("fio", {**FIO, "filename": lab.dev}, False)
    assert res.status == "failed" and "block device" in res.stderr  # the friendly check
    mode = stat.S_IMODE(os.stat(lab.dev).st_mode)
    assert mode  # the host's node is as it was


# ------------------------------------------- routes found by trying, closed by construction
RACER = """#!/bin/sh
# A program of another run, at the worst moment: after storlab looked at the declared path
# and before bwrap mounts it, the path becomes a link to the victim (once).
case "$*" in *"{target}"*)
  [ -e "{target}.old" ] || {{ mv "{target}" "{target}.old"; ln -s "{victim}" "{target}"; }};;
esac
exec {bwrap} "$@"
"""


def test_bind_race_a_declared_path_swapped_for_a_link_before_bwrap_mounts(
        lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """The declared target lies in a directory another run can write (a parallel run's
    scratch directory); the swap happens between storlab's look and bwrap's mount, made
    certain by a stand-in bwrap that swaps and then runs the real one. Bound by path, the
    link's target (the victim) became writable; bound from the descriptor storlab opened,
    bwrap finds the mount is not that file and refuses to start. (The lab's scratch area
    is its campaign's directory, shown as it is: a real campaign's shows inside as a fresh
    file system holding only the run's directory, test_killed_run_dir.py.)"""
    other = lab.root / "scratch" / "c2-r1"
    other.mkdir()
    target = other / "t.dat"
    target.write_bytes(b"\0" * 65536)
    racer = lab.root / "bwrap-racer"
    # a relative link: it resolves inside bwrap's new root too, so bwrap mounts there and
    # its own check (the mount is not the descriptor's file) is what refuses
    racer.write_text(RACER.format(target=target, victim="../../victim.dat",
                                  bwrap=shutil.which("bwrap")))
    racer.chmod(0o755)
    monkeypatch.setenv("STORLAB_BWRAP", str(racer))
    before = lab.state()
    res = lab.run("fio", {**FIO, "filename": str(target)}, False,
                  workdir=lab.root / "s2" / "c1-r1")
    assert target.is_symlink(), "the racer did not run"
    assert lab.state() == before, (res.status, res.stderr[-400:])
    assert res.status == "failed" and "Race condition" in res.stderr, res.stderr[-400:]


def test_a_declared_file_not_made_yet_outside_the_campaign_opens_nothing(lab: Lab) -> None:
    """fio's `filename` names a file not made yet, beside the victim (outside the
    campaign): neither the file nor its directory (the victim's) opens, and the run is
    refused with storlab's hint. In a directory of the campaign's scratch area the same
    (no existing directory but the run's own opens for a file not made yet); made first,
    the file opens alone and the run writes it."""
    new = lab.root / "new.dat"
    before = lab.state()
    res = lab.run("fio", {**FIO, "filename": str(new), "exec_prerun": str(lab.evil)}, False)
    assert lab.state() == before, res.stderr[-400:]
    assert not new.exists()
    assert res.status == "failed" and "sandbox.writable" in res.stderr, res.stderr[-400:]
    new = lab.scratch / "shared" / "new.dat"
    new.parent.mkdir()
    res = lab.run("fio", {**FIO, "filename": str(new), "exec_prerun": str(lab.evil)}, False)
    assert lab.state() == before, res.stderr[-400:]
    assert res.status == "failed" and "make the file first" in res.stderr, res.stderr[-400:]
    assert not new.exists()
    new.write_bytes(b"\0" * (64 << 10))  # made first (its whole size: no layout)
    res = lab.run("fio", {**FIO, "filename": str(new), "exec_prerun": str(lab.evil)}, False)
    assert lab.state() == before, res.stderr[-400:]
    assert res.status == "ok" and new.stat().st_size > 0, res.stderr[-400:]
    assert new.read_bytes() != b"\0" * new.stat().st_size  # fio wrote it


def test_a_sandbox_writable_file_outside_the_campaign_stays_shut(lab: Lab) -> None:
    """`sandbox.writable` names an existing file outside the campaign's directory, without
    allow_destructive: the walls do not open it (the CLI refuses it before any run:
    test_sandbox.py); inside the campaign's directory it opens."""
    def run(writable: Path) -> Any:
        task = RunTask(key="c1-r1", config={}, runner_type="command",
                       runner_options=cmd(["sh", "-c", f"{lab.evil}; printf PWNED | dd "
                                           f"of={writable} conv=notrunc; echo '{{\"y\": 1}}'"]),
                       values={}, workdir=str(lab.scratch / "c1-r1"), timeout=30,
                       writable=[str(writable)], homes=[str(lab.root / "camp")])
        return execute_task(task).result

    before = lab.state()
    res = run(lab.victim)
    assert lab.state() == before, res.stderr[-400:]
    own = lab.root / "camp" / "data.bin"
    own.parent.mkdir()
    own.write_bytes(b"\0" * 16)
    res = run(own)
    assert res.status == "ok" and own.read_bytes().startswith(b"PWNED"), res.stderr[-400:]
    assert lab.state() == before


def _env_route(lab: Lab, env: dict[str, str]) -> Any:
    return lab.run("command", {**cmd(["sh", "-c", "echo '{\"y\": 1}'"]), "env": env}, False)


def test_a_campaign_path_cannot_choose_the_bwrap_that_runs(lab: Lab) -> None:
    """The command runner's `env: {PATH: ...}` names a directory with a `bwrap` of the
    campaign's own (it writes the victim and the device, as root, outside any walls).
    bwrap is found on storlab's PATH, never the program's."""
    fake = lab.root / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text(f"#!/bin/sh\n{lab.evil}\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    before = lab.state()
    res = _env_route(lab, {"PATH": f"{fake}:/usr/bin:/bin"})
    assert lab.state() == before and res.status == "ok", res.stderr[-400:]


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_ld_preload_from_a_campaign_reaches_only_the_program(lab: Lab) -> None:
    """`env: {LD_PRELOAD: evil.so}`: a library whose constructor writes the victim and the
    device. bwrap runs as root outside the walls: given the program's environment, its
    loader ran the constructor there. The environment is set inside (`--setenv`)."""
    src = lab.root / "evil.c"
    src.write_text(textwrap.dedent(f"""\
        #include <fcntl.h>
        #include <unistd.h>
        __attribute__((constructor)) static void pwn(void) {{
            const char *p[] = {{"{lab.victim}", "{lab.dev}"}};
            for (int i = 0; i < 2; i++) {{
                int fd = open(p[i], O_WRONLY);
                if (fd >= 0) {{ pwrite(fd, "PWNED", 5, 0); close(fd); }}
            }}
        }}
        """))
    so = lab.root / "evil.so"
    import subprocess
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    before = lab.state()
    res = _env_route(lab, {"LD_PRELOAD": str(so)})
    assert lab.state() == before, res.stderr[-400:]
    assert res.status == "ok", res.stderr[-400:]  # the program ran, with its library


def test_dev_shm_and_tmp_are_not_shared_with_the_host_or_the_next_run(lab: Lab) -> None:
    """/dev/shm is in the run's private /dev (gone with it); /tmp, /var/tmp and /run are
    empty read-only tmpfs of the run's own: nothing a run leaves there reaches the host or
    the next run, and a write there fails loudly."""
    name = f"storlab-probe-{os.getpid()}"
    places = [f"/dev/shm/{name}", f"/tmp/{name}", f"/var/tmp/{name}", f"/run/{name}"]
    res = _inside(lab, "; ".join(f"(echo x > {p}) 2>&1 && echo MADE" for p in places))
    assert res.raw.count("MADE") == 1, res.raw + res.stderr  # /dev/shm only
    assert res.raw.count("Read-only file system") == 3, res.raw + res.stderr
    assert not any(os.path.exists(p) for p in places)
    res = _inside(lab, "; ".join(f"test -e {p} && echo LEFT" for p in places))
    assert "LEFT" not in res.raw


def test_a_run_directory_swapped_for_a_link_by_another_run(lab: Lab) -> None:
    """Two runs at once, the scratch area declared writable (fio `directory: ..` does it).
    Run A's program waits for run B's directory and swaps it for a link to the victim's
    directory while B's first setup step runs; B's next step would have been started
    with the link's target bound writable as its directory. Every program of B runs in
    the directory storlab made (bound from the descriptor the run holds, bwrap started
    in /), wherever its name leads now: B's next step writes there, the victim's stays
    as it was."""
    import threading

    def task(key: str, command: str, setup: list[StepSpec]) -> RunTask:
        return RunTask(key=key, config={}, runner_type="command",
                       runner_options=cmd(["sh", "-c", command + "; echo '{\"y\": 1}'"]),
                       values={}, workdir=str(lab.scratch / key), setup=setup, timeout=30,
                       writable=[str(lab.scratch)], homes=[str(lab.scratch)],
                       keep_scratch=True)

    # A swaps once B's first step runs (its marker): swapping earlier races B's bwrap
    # chdir, which then fails with a different message (safe, but not this route). B's
    # first step ends once the swap is made (a fixed 2 s let a loaded machine swap after
    # B's next step had started), so the next step meets the link.
    swap = ("for i in $(seq 400); do [ -e ../c1-r2/started ] && break; sleep 0.05; "
            f"done; mv ../c1-r2 ../gone && ln -s {lab.root} ../c1-r2")
    a = task("c1-r1", swap, [])
    b = task("c1-r2", "true", [
        StepSpec("touch started && for i in $(seq 400); do [ -L ../c1-r2 ] && break; "
                 "sleep 0.05; done", shell=True),
        StepSpec("touch made_here", shell=True)])
    before = lab.state()
    out: dict[str, Any] = {}
    th = threading.Thread(target=lambda: out.setdefault("a", execute_task(a).result))
    th.start()
    res = execute_task(b).result
    th.join()
    assert (lab.scratch / "c1-r2").is_symlink(), out["a"].stderr  # A did swap it
    assert lab.state() == before, res.stderr[-400:]
    assert not (lab.root / "made_here").exists()
    assert res.status == "ok", res.stderr
    assert (lab.scratch / "gone" / "made_here").is_file()  # the run's own, moved


def test_no_descriptor_storlab_opened_reaches_the_program(lab: Lab) -> None:
    """The descriptors the walls are bound from lead outside the sandbox's mounts (a
    program holding one could write beside its directory through it): bwrap closes them;
    the program has only stdin, stdout and stderr (and `ls`'s own listing of the
    directory), with a declared directory and a declared file among the walls."""
    (lab.scratch / "shared").mkdir()
    task = RunTask(key="c1-r1", config={}, runner_type="command",
                   runner_options=cmd(["sh", "-c", "ls /proc/self/fd >&2; echo - >&2; "
                                       "ls /proc/1/fd >&2; echo '{\"y\": 1}'"]),
                   values={}, workdir=str(lab.scratch / "c1-r1"), timeout=30,
                   writable=[str(lab.scratch / "shared"), str(lab.scratch / "new.dat")],
                   homes=[str(lab.scratch)])
    res = execute_task(task).result
    assert res.status == "ok", res.stderr
    mine, init = res.stderr.split("-")
    assert mine.split() == ["0", "1", "2", "3"], res.stderr  # 3: ls's own listing
    assert init.split()[:3] == ["0", "1", "2"] and len(init.split()) <= 4, res.stderr


@pytest.mark.skipif(shutil.which("fio") is None or shutil.which("sysbench") is None,
                    reason="fio or sysbench not installed")
def test_the_questions_asked_before_any_run_are_sandboxed_too(tmp_path: Path) -> None:
    """A campaign names the program (`fio:`, `sysbench:`): storlab's questions before the
    runs (`--parse-only` of the option names, `--version`, `--help`) ran it as root with no
    walls, and it wrote outside. They run in a sandbox of their own now."""
    from storlab.campaign.runners import make_runner
    from storlab.campaign.runners.fio_cmdline import _fio_version
    from storlab.campaign.runners.sysbench import known_options

    victim = Path(tempfile.mkdtemp(dir="/var/tmp")) / "victim.txt"
    try:
        for real in ("fio", "sysbench"):
            evil = tmp_path / f"evil-{real}"
            evil.write_text(f"#!/bin/sh\necho \"$*\" >> {victim}\n"
                            f"exec {shutil.which(real)} \"$@\"\n")
            evil.chmod(0o755)
        fio = make_runner("fio", {"fio": str(tmp_path / "evil-fio")})
        fio.check_option_names({"rw": "write", "bs": "4k", "size": "64k"})
        assert _fio_version(str(tmp_path / "evil-fio")).startswith("fio-")  # still answers
        known_options.cache_clear()
        assert "file-total-size" in known_options(str(tmp_path / "evil-sysbench"))
        assert not victim.exists(), victim.read_text()
    finally:
        shutil.rmtree(victim.parent, ignore_errors=True)


def test_a_store_in_the_scratch_area_or_through_a_link_is_refused(tmp_path: Path,
                                                                  storlab: Any) -> None:
    """storlab writes its store as root: a store in the scratch area (a run's program
    could put a link at its name: the next resume wrote a loop device) and a store or a
    file beside it that is a link are refused in one line, before any run."""
    import subprocess
    import sys

    base = ("name: c\nspace:\n  factors:\n    - {name: a, kind: ordinal, values: [1, 2]}\n"
            "  responses:\n    - {name: y}\ndesign: {kind: full}\nrunner:\n  type: command\n"
            "  options:\n    command: [sh, -c, \"echo '{\\\"y\\\": 1}'\"]\n"
            "    json_metrics: {y: y}\n")
    victim = tmp_path / "victim"
    victim.write_bytes(b"V" * 4096)
    (tmp_path / "link.db").symlink_to(victim)
    (tmp_path / "fine.db.output").symlink_to(tmp_path)
    cases = {"scratch/c1-r1/s.db": "lies inside the scratch area",
             "link.db": "is a symbolic link", "fine.db": "fine.db.output: is a symbolic link"}
    for store, said in cases.items():
        f = tmp_path / "c.yaml"
        f.write_text(f"store: {store}\n" + base)
        p = storlab("run", str(f))
        assert p.returncode == 2 and said in p.stderr, (store, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert victim.read_bytes() == b"V" * 4096


def test_a_program_the_walls_stop_gets_a_hint_naming_what_to_declare(tmp_path: Path) -> None:
    """A script outside the shown places, a write to /tmp, a name lookup: the program's
    own error, then one storlab line naming the declaration (sandbox.readable, .writable,
    .network); a program that fails for its own reasons gets none."""
    from storlab.campaign.runners import run_program
    from storlab.campaign.runners._sandbox import Declared, declared

    wd = tmp_path / "camp" / "runs" / "r1"
    wd.mkdir(parents=True)
    cases = {"sh /srv/storlab-missing.sh": "sandbox.readable",
             "echo x > /tmp/storlab-x": "sandbox.writable",
             "getent hosts pypi.org || echo 'Temporary failure in name resolution' >&2; "
             "exit 1": "sandbox.network"}
    with declared(Declared(homes=(str(tmp_path / "camp"),))):
        for script, want in cases.items():
            p = run_program(["sh", "-c", script], cwd=str(wd), timeout=60)
            assert p.exit_code != 0 and want in p.stderr, (script, p.stderr)
        p = run_program(["sh", "-c", "echo broken >&2; exit 3"], cwd=str(wd), timeout=60)
        assert p.exit_code == 3 and "storlab" not in p.stderr, p.stderr


def test_a_program_cannot_stop_the_sandboxs_first_process(lab: Lab) -> None:
    """pid 1 is bwrap's init, which ends the run when the program ends. A child that
    stopped it (PTRACE_ATTACH) or wrote its memory (process_vm_writev) kept the run and
    everything it started until the run's timeout (30 s here). The seccomp filter refuses
    both for pid 1 (a program may still trace its own children): the run ends when its
    program does, and the child that tried is gone with it."""
    import time

    code = textwrap.dedent("""
        import ctypes, os, time
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        def sc(*a):
            r = libc.syscall(*[ctypes.c_long(x) for x in a])
            return "ok" if r >= 0 else os.strerror(ctypes.get_errno())
        if os.fork() == 0:
            os.setsid()
            print("attach 1:", sc(101, 16, 1, 0, 0), flush=True)       # PTRACE_ATTACH
            print("seize 1:", sc(101, 0x4206, 1 | 1 << 32, 0, 0), flush=True)
            buf = ctypes.create_string_buffer(8)
            iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
            print("vm_writev 1:", sc(311, 1, ctypes.addressof(iov), 1,
                                     ctypes.addressof(iov), 1, 0), flush=True)
            with open("child.pid", "w") as fh:
                fh.write(str(os.getpid()))
            time.sleep(60)
            os._exit(0)
        for _ in range(500):  # its lines are out once it wrote child.pid (a fixed pause of
            if os.path.exists("child.pid"):  # 1 s left a loaded machine no margin)
                break
            time.sleep(0.02)
        kid = os.fork()
        if kid == 0:
            time.sleep(60)
            os._exit(0)
        print("attach own child:", sc(101, 16, kid, 0, 0), flush=True)
        print('{"y": 1}')
        """)
    if os.uname().machine != "x86_64":
        pytest.skip("syscall numbers of x86_64")
    t0 = time.monotonic()
    res = lab.run("command", cmd([sys.executable, "-c", code]), False)
    took = time.monotonic() - t0
    assert res.status == "ok", res.stderr
    out = res.raw
    assert "attach 1: Operation not permitted" in out, out
    assert "seize 1: Operation not permitted" in out and \
        "vm_writev 1: Operation not permitted" in out, out
    assert "attach own child: ok" in out, out  # tracing its own processes still works
    assert took < 15, took  # not held until the 30-s timeout


def test_the_timeout_kills_the_whole_pid_namespace(lab: Lab) -> None:
    """A program that outlives its timeout, with a `setsid` daemon and a child that
    ignores SIGTERM: when the timeout kills it, every process of the run is gone (the
    kill reaches the sandbox's pid 1 from outside, and the namespace ends with it)."""
    import secrets
    import time

    # durations of this test's own (another test or user on the machine may run `sleep 300`)
    tag = f".{secrets.randbelow(10**6):06d}"
    res = lab.run("command", cmd(["sh", "-c", f"setsid sh -c 'trap \"\" TERM; sleep 300{tag}' & "
                                  f"(trap '' TERM; exec sleep 301{tag}) & sleep 302{tag}"]),
                  False, timeout=3)
    assert res.status == "timeout", res.stderr
    mine = tuple(f"sleep {n}{tag}" for n in (300, 301, 302))
    deadline = time.monotonic() + 10  # the kernel ends the namespace: not instant under load
    while (left := [p for p in os.listdir("/proc") if p.isdigit()
                    and _cmdline(p).startswith(mine)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], left


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def test_a_hard_link_in_a_declared_directory_stays_shut(lab: Lab) -> None:
    """A declared writable directory (fio `directory:`) holding, placed beforehand, a hard
    link to the victim: fio writing that name, and a command writing it, leave the victim
    untouched (each file with several links is shown read-only over itself); with
    allow_destructive it is written, as the user declared."""
    d = lab.scratch / "data"  # the campaign's own: outside, only allow_destructive
    d.mkdir()
    os.link(lab.victim, d / "job.0.0")
    before = lab.state()
    res = lab.run("fio", {**FIO, "directory": str(d), "filename": "job.0.0"}, False)
    assert lab.state() == before, res.stderr[-400:]
    assert res.status == "failed", res.stderr[-400:]
    task = RunTask(key="c1-r2", config={}, runner_type="command",
                   runner_options=cmd(["sh", "-c", f"printf PWNED | dd of={d}/job.0.0 "
                                       "conv=notrunc; touch " + f"{d}/new; "
                                       "echo '{\"y\": 1}'"]),
                   values={}, workdir=str(lab.scratch / "c1-r2"), timeout=30,
                   writable=[str(d)], homes=[str(lab.scratch)])
    res = execute_task(task).result
    assert lab.state() == before and (d / "new").exists(), res.stderr[-400:]
    res = lab.run("fio", {**FIO, "directory": str(d), "filename": "job.0.0"}, True)
    assert lab.state()[0] != before[0], res.stderr[-400:]


def test_a_shared_system_directory_declared_whole_stays_shut(lab: Lab, storlab: Any) -> None:
    """fio `directory: /var/tmp` (or `sandbox.writable: [/var/tmp]`) declared every file
    of /var/tmp writable, other users' included: refused before any run in one line; past
    the check, the walls do not open it (a victim file there is untouched) unless
    allow_destructive says so."""
    victim = Path(tempfile.mkdtemp(dir="/var/tmp")) / "theirs.dat"
    victim.write_bytes(b"THEIRS" * 1000)
    try:
        def run(allow: bool) -> Any:
            task = RunTask(key="c1-r1", config={}, runner_type="command",
                           runner_options=cmd(["sh", "-c", f"printf PWNED | dd of={victim} "
                                               "conv=notrunc; echo '{\"y\": 1}'"]),
                           values={}, workdir=str(lab.scratch / "c1-r1"), timeout=30,
                           writable=["/var/tmp"], allow_destructive=allow,
                           homes=[str(lab.scratch)], readable=[str(victim.parent)])
            return execute_task(task).result

        res = run(False)
        assert victim.read_bytes() == b"THEIRS" * 1000, res.stderr[-400:]
        res = run(True)
        assert victim.read_bytes().startswith(b"PWNED"), res.stderr[-400:]
        camp = lab.root / "camp"
        camp.mkdir()
        f = camp / "c.yaml"
        f.write_text("name: c\nspace:\n  factors:\n    - {name: bs, kind: ordinal, values: "
                     "[4k, 8k]}\n  responses:\n    - {name: iops}\ndesign: {kind: full}\n"
                     "runner:\n  type: fio\n  options: {directory: /var/tmp, rw: write, "
                     "size: 64k}\n")
        p = storlab("run", str(f))
        assert p.returncode == 2 and "every user of the host shares" in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and not (camp / "scratch").exists()
    finally:
        shutil.rmtree(victim.parent, ignore_errors=True)


# ------------------------------------------- routes of our own (docs' table, last rows)
def test_a_set_user_id_shell_left_for_the_host(lab: Lab) -> None:
    """A program of a run is root: a set-user-ID copy of a shell it leaves in its directory
    or a declared one is root for any local user on the host (the host's mount is not
    nosuid). chmod with S_ISUID/S_ISGID is refused (seccomp), `cp -p` of a set-user-ID
    program loses the bits, and a file is not made with them (open with such a mode:
    EPERM): no file there carries them after the run."""
    d = lab.scratch / "data"  # the campaign's own
    d.mkdir()
    script = (f"cp /bin/sh {d}/sh; chmod 4755 {d}/sh; chmod g+s {d}/sh; "
              f"cp -p /usr/bin/passwd {d}/pw; "
              f"python3 -c \"import os; fd = os.open('{d}/e', os.O_CREAT | os.O_WRONLY, "
              "0o6755); os.write(fd, open('/bin/sh', 'rb').read())\"; "
              f"cp /bin/sh own; chmod u+s own; cp -p own {d}/own; chmod 755 {d}/sh && "
              "echo PLAIN-CHMOD-OK")
    task = RunTask(key="c1-r1", config={}, runner_type="command",
                   runner_options=cmd(["sh", "-c", script + "; echo '{\"y\": 1}'"]),
                   values={}, workdir=str(lab.scratch / "c1-r1"), timeout=30,
                   writable=[str(d)], homes=[str(lab.scratch)], keep_scratch=True)
    res = execute_task(task).result
    assert "PLAIN-CHMOD-OK" in res.raw, res.raw + res.stderr  # a plain chmod still works
    made = [*d.iterdir(), *(lab.scratch / "c1-r1").iterdir()]
    assert {p.name for p in made} >= {"sh", "own"} and "e" not in {p.name for p in made}, made
    setid = [p.name for p in made if os.lstat(p).st_mode & 0o6000]
    assert setid == [], setid


def test_a_numeric_chmod_of_a_set_group_id_directory_fails(lab: Lab) -> None:
    """As the docs say: GNU chmod keeps a directory's S_ISGID by passing it back, so the
    filter refuses `chmod 755` of a 2755 directory (EPERM); `chmod g-s` clears it."""
    d = lab.scratch / "data"  # the campaign's own (outside: allow_destructive)
    (d / "sg").mkdir(parents=True)
    os.chmod(d / "sg", 0o2755)
    script = (f"chmod 755 {d}/sg || echo NUMERIC-REFUSED; chmod g-s {d}/sg && echo CLEARED; "
              "echo '{\"y\": 1}'")
    task = RunTask(key="c1-r1", config={}, runner_type="command",
                   runner_options=cmd(["sh", "-c", script]), values={},
                   workdir=str(lab.scratch / "c1-r1"), timeout=30, writable=[str(d)],
                   homes=[str(lab.scratch)])
    res = execute_task(task).result
    assert res.raw.split()[:2] == ["NUMERIC-REFUSED", "CLEARED"], res.raw + res.stderr
    assert stat.S_IMODE(os.stat(d / "sg").st_mode) == 0o755


def test_the_programs_own_descriptors_reach_only_its_own_output(lab: Lab) -> None:
    """stdout and stderr are storlab's files beside the store, on the host's mount:
    reopened through /proc/self/fd/1 (or /dev/stdout) the program writes its own stream
    only; the directory above it is not reached through them."""
    out = lab.root / "out"
    res = _inside(lab, "echo REOPENED > /proc/self/fd/1; echo X > /dev/stdout/../c2-r1.stdout "
                  "2>&1; ls /proc/self/fd/1/.. 2>&1; echo MARK")
    # `>` truncated the run's own stream below storlab's offset: its own parse may miss
    # (the run's business), storlab does not crash reading it
    assert "Traceback" not in res.stderr, res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["c1-r1.stderr", "c1-r1.stdout"]
    text = (out / "c1-r1.stdout").read_text()
    assert "REOPENED" in text and "Not a directory" in text and "MARK" in text, text


def test_an_abstract_socket_bound_inside_is_not_the_hosts(lab: Lab) -> None:
    """Squatting: a program binds an abstract name a host client may later ask for (a
    daemon's). Without `sandbox.sockets` it cannot make the socket (seccomp: EPERM); and
    in its own network namespace the name would not be the host's: a client on the host
    finds nothing there while the program runs."""
    import socket
    import uuid

    name = f"storlab-squat-{uuid.uuid4().hex[:8]}"
    code = textwrap.dedent(f"""
        import socket, time
        try:
            s = socket.socket(socket.AF_UNIX)
            s.bind("\\0{name}")
            s.listen(1)
            state = "bound"
        except PermissionError:
            state = "refused"
        open("bound", "w").close()
        for _ in range(600):  # held until the host's client has looked (at most 30 s)
            try:
                open("looked").close()
                break
            except FileNotFoundError:
                time.sleep(0.05)
        print('{{"y": 1}}', state)
        """)
    import threading

    out: dict[str, Any] = {}
    th = threading.Thread(target=lambda: out.setdefault("r", lab.run(
        "command", cmd([sys.executable, "-c", code]), False)))
    th.start()
    try:
        for _ in range(200):
            if (lab.scratch / "c1-r1" / "bound").exists():
                break
            import time
            time.sleep(0.05)
        c = socket.socket(socket.AF_UNIX)
        with pytest.raises(ConnectionRefusedError):
            c.connect("\0" + name)
        c.close()
    finally:
        with contextlib.suppress(OSError):  # the program waits for it (else 30 s)
            (lab.scratch / "c1-r1" / "looked").touch()
        th.join()
    assert out["r"].status == "ok", out["r"].stderr
    assert "refused" in out["r"].raw, out["r"].raw


def test_no_terminal_to_type_into(lab: Lab) -> None:
    """TIOCSTI pushes keystrokes into a terminal's input (root's shell runs them): a run's
    program has no controlling terminal (its own session, stdin /dev/null)."""
    code = ("import fcntl, termios\n"
            "try:\n"
            "    fcntl.ioctl(open('/dev/tty', 'rb'), termios.TIOCSTI, b'x')\n"
            "    print('TYPED')\n"
            "except OSError as exc:\n"
            "    print('tty:', exc.strerror)\n"
            "print('{\"y\": 1}')\n")
    res = lab.run("command", cmd([sys.executable, "-c", code]), False)
    assert res.status == "ok" and "TYPED" not in res.raw and "tty:" in res.raw, res.raw


def test_kill_everything_reaches_only_the_runs_processes(lab: Lab) -> None:
    """`kill -9 -1` as root inside: only the run's processes (its PID namespace) die;
    storlab (this test) survives and records the run."""
    res = _inside(lab, "sleep 30 & kill -9 -1; sleep 1; echo AFTER")
    assert res.status == "ok" and "AFTER" in res.raw, (res.status, res.stderr)
    os.kill(os.getpid(), 0)  # still here


@pytest.mark.parametrize("spelled", ["//etc", "//var/lib", "/./etc", "/etc/../etc",
                                     "//usr/local"])
def test_a_system_directory_spelled_otherwise_stays_shut(lab: Lab, spelled: str) -> None:
    """A system directory declared writable under another spelling (POSIX keeps a leading
    `//`: `abspath("//etc")` is `//etc`, not in any list) without allow_destructive: it
    stays read-only inside (`test -w` asks the kernel: EROFS on a read-only mount, nothing
    written); the run's own directory stays writable."""
    real = "/" + os.path.normpath(spelled).lstrip("/")
    probe = (f"test -w {real} && echo OPEN || echo SHUT; test -w . && echo RUN; "
             "echo '{\"y\": 1}'")
    task = RunTask(key="c1-r1", config={}, runner_type="command",
                   runner_options=cmd(["sh", "-c", probe]), values={},
                   workdir=str(lab.scratch / "c1-r1"), timeout=30, writable=[spelled],
                   homes=[str(lab.scratch)])
    res = execute_task(task).result
    assert res.status == "ok", res.stderr[-400:]
    assert res.raw.split()[:2] == ["SHUT", "RUN"], res.raw + res.stderr[-400:]


_UNDER_RLIMIT = """\
import json, os, resource, sys
from storlab.campaign.runners import _sandbox
from storlab.campaign.task import RunTask, execute_task
from storlab.errors import CampaignError
task, linked, hard = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE,
                   (50, hard if hard else resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
try:  # the walls alone: which linked files does bwrap's argv cover? (a runner's target
    # directory opens only inside the campaign's directory: `homes` said)
    with _sandbox.declared(_sandbox.Declared(homes=tuple(task["homes"]))):
        _, walls = _sandbox.wrap(["true"], task["workdir"], task["writable"])
    argv = os.pread(walls.args_fd, 1 << 24, 0).decode().split(chr(0))  # bwrap's --args
    walls.close()
    walls_said = [f for f in linked if f not in argv]
except CampaignError as exc:
    walls_said = str(exc)
res = execute_task(RunTask(**task)).result
print(json.dumps({"walls": walls_said, "status": res.status, "stderr": res.stderr}))
"""


@pytest.mark.parametrize("hard", [50, 0])
def test_hard_links_the_walls_cannot_all_cover_refuse_the_run(lab: Lab, hard: int) -> None:
    """60 files of another directory hard-linked into a declared writable one, storlab
    limited to 50 descriptors (RLIMIT_NOFILE). With the hard limit at 50 too the walls
    cannot open a cover for each (EMFILE): they refuse (a cover skipped left that file
    writable), the run fails with one line. With only the soft limit at 50 (`hard` 0: the
    usual case, 1024 against a higher hard limit) storlab raises it and covers them all.
    Either way none of the files is written."""
    import json
    import subprocess
    theirs, d = lab.root / "theirs", lab.scratch / "data"
    theirs.mkdir()
    d.mkdir()
    for i in range(60):
        (theirs / f"f{i}").write_bytes(b"THEIRS")
        os.link(theirs / f"f{i}", d / f"f{i}")
    (lab.scratch / "c1-r1").mkdir()
    task = dict(key="c1-r1", config={}, runner_type="command",
                runner_options=cmd(["sh", "-c", f"for f in {d}/*; do printf PWNED > $f; "
                                    "done; echo '{\"y\": 1}'"]),
                values={}, workdir=str(lab.scratch / "c1-r1"), timeout=30,
                writable=[str(d)], homes=[str(lab.scratch)])
    linked = [str(d / f"f{i}") for i in range(60)]
    p = subprocess.run([sys.executable, "-c", _UNDER_RLIMIT, json.dumps(task),
                        json.dumps(linked), str(hard)], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert p.returncode == 0, p.stderr[-800:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    written = [f.name for f in theirs.iterdir() if f.read_bytes() != b"THEIRS"]
    assert written == [], written
    if hard:
        assert isinstance(out["walls"], str) and out["walls"].startswith("cannot cover "), out
        assert out["status"] == "failed", out
        said = [ln for ln in out["stderr"].splitlines() if ln.strip()]
        assert len(said) == 1 and said[0].startswith("storlab: cannot cover "), said
        assert "ulimit -n" in said[0], said
    else:
        assert out["walls"] == [], out  # every linked file covered
        assert "Read-only file system" in out["stderr"], out["stderr"][-400:]


def test_hard_links_made_inside_the_run_directory_stay_writable(lab: Lab) -> None:
    """The scratch area declared writable (so the run's directory is walked with it): a
    setup step's `cp -al` makes files with two links inside the run's own directory; the
    run writes them (a link across bind mounts fails with EXDEV: none made there leads
    outside), rather than failing with EROFS."""
    task = RunTask(key="c1-r1", config={}, runner_type="command",
                   runner_options=cmd(["sh", "-c", "echo more >> b/f && grep -q more a/f "
                                       "&& echo '{\"y\": 1}'"]),
                   values={}, workdir=str(lab.scratch / "c1-r1"), timeout=30,
                   writable=[str(lab.scratch)], homes=[str(lab.scratch)],
                   setup=[StepSpec("mkdir -p a && echo one > a/f && cp -al a b", shell=True)])
    res = execute_task(task).result
    assert res.status == "ok", res.stderr[-400:]

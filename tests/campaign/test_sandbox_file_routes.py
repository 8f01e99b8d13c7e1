"""Routes through which storlab (often root) wrote or showed a file it should not: a sweep
directory through a planted link, an input file through a link to a root-only file, a
fio file not made yet that opened its whole directory, a program's stream files that the
program could change the mode of. Each through the real CLI (and real bwrap/fio)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)
ROOT = Path(__file__).resolve().parents[2]


def test_sweep_refuses_a_planted_simulate_sweep_link(storlab, tmp_path: Path) -> None:
    """`simulate --sweep` made its default directory with mkdir(parents=True): a
    `simulate-sweep` link in the working directory made root write the campaign, its
    store and scratch where the link led. Now: one line naming the link, exit 2, nothing
    written there."""
    victim, work = tmp_path / "victim", tmp_path / "work"
    victim.mkdir()
    work.mkdir()
    (work / "simulate-sweep").symlink_to(victim)
    r = storlab("simulate", ROOT / "examples/sim/small.yaml", "--sweep", "nodes=4,8",
                cwd=work, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out, out
    assert "simulate-sweep is a symbolic link" in out, out
    assert list(victim.iterdir()) == []


def _nobody_campaign(d: Path, **design: object) -> Path:
    """A fixed-design command campaign in `d`, the file owned by nobody (uid 65534: the
    campaign is somebody's while storlab runs as root; copied into a directory of root's,
    as root must: a directory another user owns is refused)."""
    import yaml

    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "r", "space": {"factors": [
                {"name": "n", "kind": "categorical", "values": ["a", "b"]}]},
            "design": design,
            "runner": {"type": "command", "options": {"command": ["true"]}}}
    (d / "r.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    os.chown(d / "r.yaml", 65534, 65534)
    return d / "r.yaml"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a file nobody else may read)")
def test_design_csv_linked_to_a_root_only_file_is_not_shown(storlab, tmp_path: Path
                                                            ) -> None:
    """A design CSV that was a link to a mode-600 root file: `storlab status` printed its
    first line in `column(s) [...] are not factors`. Now: refused naming the file, no line
    of it shown; the same CSV as a file of the campaign still reads."""
    secret = tmp_path / "root-only" / "shadow"
    secret.parent.mkdir()
    secret.write_text("secretline1 root:x:SECRET\nline2\n")
    secret.chmod(0o600)
    camp = _nobody_campaign(tmp_path / "c", csv="design.csv")
    (camp.parent / "design.csv").symlink_to(secret)
    r = storlab("status", camp, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out, out
    assert "SECRET" not in out and "design.csv" in out and "cannot read" in out, out
    # the space by a link too
    (camp.parent / "design.csv").unlink()
    (camp.parent / "design.csv").write_text("n\na\nb\n")
    camp.write_text(camp.read_text().replace("space:", "space: s.yaml\nold_space:", 1))
    # (a campaign whose space is a file: the link to the root file is refused the same)
    import yaml

    spec = yaml.safe_load(camp.read_text())
    del spec["old_space"]
    camp.write_text(yaml.safe_dump(spec, sort_keys=False))
    (camp.parent / "s.yaml").symlink_to(secret)
    r = storlab("status", camp, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "SECRET" not in out and "s.yaml" in out, out
    (camp.parent / "s.yaml").unlink()
    (camp.parent / "s.yaml").write_text(yaml.safe_dump(
        {"factors": [{"name": "n", "kind": "categorical", "values": ["a", "b"]}]}))
    r = storlab("status", camp, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's binds need root")
def test_a_fio_file_not_made_yet_opens_no_existing_directory(storlab, tmp_path: Path
                                                             ) -> None:
    """A fio `filename` not made yet in a subdirectory of the campaign's directory opened
    that whole directory writable (later a directory made for the program, bound there,
    whose files were moved back: a forged `campaign.db-wal` planted into another campaign
    nested there). Now refused before any run, in one line naming the option and the
    path, the other campaign untouched; declared in `sandbox.writable`, the directory
    opens as declared and the run makes its file."""
    import yaml

    a = tmp_path / "A"
    b = a / "B"
    b.mkdir(parents=True)
    (b / "campaign.db").write_text("B's store\n")
    (b / "b.yaml").write_text("B's campaign\n")
    target = b / "campaign.db-wal"
    spec = {"name": "a", "space": {"factors": [
                {"name": "bs", "kind": "categorical", "values": ["4k", "8k"]}]},
            "design": {"configs": [{"bs": "4k"}]},
            "runner": {"type": "fio", "options": {"filename": str(target), "size": "1M",
                                                  "rw": "write",
                                                  "exec_prerun": f"echo PWNED > {target}"}},
            "setup": [["sh", "-c", f"echo PWNED > {b}/campaign.db; echo x > {b}/planted"]]}
    (a / "a.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    r = storlab("run", a / "a.yaml", timeout=240)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out and len(out.strip().splitlines()) == 1, out
    assert "filename" in out and str(target) in out and "sandbox.writable" in out, out
    assert sorted(p.name for p in b.iterdir()) == ["b.yaml", "campaign.db"]
    assert (b / "campaign.db").read_text() == "B's store\n"
    # declared: that directory opens as declared (a directory of the campaign's own)
    c = a / "data"
    c.mkdir()
    spec["runner"]["options"] = {"filename": str(c / "new.dat"), "size": "1M", "rw": "read"}
    del spec["setup"]
    spec["sandbox"] = {"writable": ["data"]}
    (a / "a.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    r = storlab("run", a / "a.yaml", timeout=240)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "c1-r1 ok" in out, out
    assert (c / "new.dat").stat().st_size == 1 << 20
    assert not [p for p in c.iterdir() if p.name.startswith(".storlab-new-")]



@pytest.mark.parametrize("option", ["filename_format", "write_bw_log"])
def test_a_fio_pattern_with_no_file_yet_in_a_system_directory_is_refused_before_the_run(
        storlab, tmp_path: Path, option: str) -> None:
    """A `filename_format` (or a log prefix) naming files not made yet in a system or
    shared directory (`/etc/cron.d` in an attack; a shared one is refused earlier) reached the run, where only the
    kernel's read-only mount stopped it. Now it is refused before any run, in one line
    naming the option, as a `filename` is. (A directory of the job's own opens whole:
    test_a_step_gets_none_of_the_runners_directories.)"""
    import uuid

    import yaml

    name = f"/etc/storlab-{uuid.uuid4().hex}"  # a system directory: never opened
    spec = {"name": "p", "space": {"factors": [
                {"name": "bs", "kind": "categorical", "values": ["4k", "8k"]}]},
            "design": {"configs": [{"bs": "4k"}]},
            "runner": {"type": "fio", "options": {
                "size": "64k", "rw": "write", "ioengine": "psync",
                option: name + (".$jobnum" if option == "filename_format" else "")}}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    r = storlab("run", tmp_path / "p.yaml", timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out and len(out.strip().splitlines()) == 1, out
    assert f"runner.options.{option}" in out and "/etc lies outside the campaign's " \
        "directory" in out and "allow_destructive" in out, out
    assert not [p for p in Path("/etc").iterdir() if p.name.startswith(name[5:])]
    assert not (tmp_path / "campaign.db").exists()


FCHMOD = r"""
import json, os, sys
got = dict()  # (no braces: the command runner substitutes names in them)
for fd in (1, 2):
    try:
        os.fchmod(fd, 0o777)
        got["chmod" + str(fd)] = "done"
    except OSError as exc:
        got["chmod" + str(fd)] = exc.strerror
    try:
        os.setxattr(fd, "user.storlab", b"x")
        got["xattr" + str(fd)] = "done"
    except OSError as exc:
        got["xattr" + str(fd)] = exc.strerror
print(json.dumps(dict(y=1, got=got)))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's binds need root")
def test_the_program_cannot_change_its_stream_files(storlab, tmp_path: Path,
                                                    command_campaign, program_got) -> None:
    """The program's stdout and stderr were the run's output files themselves: an
    `fchmod(1, 0o777)` inside made `<store>.output/c1-r1.stdout` writable by every local
    user (and `setxattr user.*` worked). Now it writes pipes storlab copies: the files keep
    their mode and no attribute, and the stream is still there whole."""
    camp = command_campaign(tmp_path / "c", ["python3", "-c", FCHMOD])
    got = program_got(camp)
    assert got  # what the program did to its descriptors (pipes now) is its own business
    for name in ("c1-r1.stdout", "c1-r1.stderr"):
        f = camp.parent / "campaign.db.output" / name
        assert f.stat().st_mode & 0o777 == 0o600, oct(f.stat().st_mode)  # as the store
        assert "user.storlab" not in os.listxattr(f)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a file nobody else may read)")
def test_a_cluster_file_outside_reads_only_when_the_owner_could(storlab, tmp_path: Path
                                                                ) -> None:
    """The simulator's `cluster:` file may lie outside the campaign's directory (a shared
    cluster description, the examples): read when the campaign file's owner could read
    it, refused in one line (nothing of it shown) when it leads to a root-only file."""
    import yaml

    example = ROOT / "examples" / "sim" / "small.yaml"
    d = tmp_path / "c"
    d.mkdir()
    os.chmod(tmp_path, 0o755)
    spec = {"name": "s", "space": {"factors": [
                {"name": "nodes", "kind": "categorical", "values": [4, 8]}]},
            "design": {"kind": "full"},
            "runner": {"type": "simulator", "options": {"cluster": "cluster.yaml"}}}
    (d / "s.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    os.chown(d / "s.yaml", 65534, 65534)  # the directory root's: another user's is refused
    secret = tmp_path / "root-only.yaml"
    secret.write_text(example.read_text().replace("#", "# SECRET", 1))
    secret.chmod(0o600)
    (d / "cluster.yaml").symlink_to(secret)
    r = storlab("run", d / "s.yaml", timeout=180)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "SECRET" not in out and "cluster.yaml" in out, out
    assert "cannot read" in out, out
    if all(os.stat(p).st_mode & 0o005 == 0o005 for p in example.parents
           if p != Path("/")) and example.stat().st_mode & 0o004:
        (d / "cluster.yaml").unlink()
        (d / "cluster.yaml").symlink_to(example)  # readable by everybody: read
        r = storlab("run", d / "s.yaml", timeout=180)
        assert r.returncode == 0, r.stdout + r.stderr


def test_a_server_a_system_writable_step_starts_outlives_the_step(storlab, tmp_path: Path,
                                                                    command_campaign) -> None:
    """A program outside the walls (a `system_writable` step) wrote pipes storlab closed
    2 s after it ended: the server it left running died of SIGPIPE at its next line, and
    the step waited those 2 s. Now it writes the run's stream files itself: the server
    still writes after the run, and the next program started at once."""
    import json
    import signal
    import time

    import yaml

    from storlab.campaign.runners._program import STREAM_GRACE

    pidf, t0 = tmp_path / "server.pid", tmp_path / "t0"
    camp = command_campaign(tmp_path / "c", ["python3", "-c",
                            "import json, time; print(json.dumps(dict(y=time.time())))"])
    spec = yaml.safe_load(camp.read_text())
    spec["setup"] = [{"run": "(while true; do echo tick; sleep 0.3; done) & "
                             f"echo $! > {pidf}; date +%s.%N > {t0}",
                      "shell": True, "system_writable": True}]
    spec["sandbox"] = {**spec.get("sandbox", {}), "allow_destructive": True}
    camp.write_text(yaml.safe_dump(spec, sort_keys=False))
    try:
        r = storlab("run", str(camp), timeout=120)
        out = r.stdout + r.stderr
        assert r.returncode == 0 and "Traceback" not in out, out
        pid = int(pidf.read_text())
        stdout = camp.parent / "campaign.db.output" / "c1-r1.stdout"
        y = [json.loads(ln)["y"] for ln in stdout.read_text().splitlines()
             if ln.startswith("{")]
        # the old wait alone was STREAM_GRACE: a program started sooner did not wait for
        # the server (a bound of 1.5 s left a loaded machine 1.5 s for the sandbox's start)
        assert y and y[-1] - float(t0.read_text()) < STREAM_GRACE, (y, t0.read_text())
        before = stdout.read_text().count("tick")
        deadline = time.monotonic() + 30  # a tick every 0.3 s: waited for, not paused for
        while stdout.read_text().count("tick") == before and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(pid, 0)  # alive
        assert stdout.read_text().count("tick") > before
    finally:
        if pidf.exists():
            try:
                os.kill(int(pidf.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


SETID_MAKE = r"""
import ctypes, json, os, sys
d = sys.argv[1]
got = dict()  # (no braces: the command runner substitutes names in them)
libc = ctypes.CDLL(None, use_errno=True)
def creat(p):
    fd = libc.creat(p.encode(), 0o4755)
    if fd < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    os.close(fd)
calls = [("open", lambda p: os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o4755))),
         ("openat", lambda p: os.close(os.open(os.path.basename(p), os.O_CREAT | os.O_WRONLY,
                                               0o2755, dir_fd=os.open(d, os.O_RDONLY)))),
         ("creat", creat),
         ("mknod", lambda p: os.mknod(p, 0o104755)),
         ("plain", lambda p: os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o755)))]
for name, call in calls:
    try:
        call(os.path.join(d, name))
        got[name] = "done"
    except OSError as exc:
        got[name] = exc.strerror
print(json.dumps(dict(y=1, got=got)))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's binds need root")
def test_a_program_cannot_make_a_set_id_file(storlab, tmp_path: Path, command_campaign,
                                            program_got) -> None:
    """Only chmod and its kin were refused a set-ID mode: `open(p, O_CREAT, 0o4755)` by a
    root program of a run made a set-user-ID root file on the host (so did openat, creat,
    mknod). Now each gets EPERM and no file with a set-ID bit exists; a plain file is
    still made."""
    out = tmp_path / "c" / "out"  # the campaign's own (outside: allow_destructive)
    out.mkdir(parents=True)
    camp = command_campaign(tmp_path / "c", ["python3", "-c", SETID_MAKE, str(out)],
                            writable=[str(out)])
    got = program_got(camp)
    assert got == {"open": "Operation not permitted", "openat": "Operation not permitted",
                   "creat": "Operation not permitted", "mknod": "Operation not permitted",
                   "plain": "done"}, got
    assert [p.name for p in out.iterdir() if p.stat().st_mode & 0o6000] == []
    assert (out / "plain").stat().st_mode & 0o7777 == 0o755


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a file nobody else may read)")
@pytest.mark.parametrize("field", ["csv", "space"])
def test_a_campaign_input_swapped_after_its_check_is_not_read(storlab_main, tmp_path: Path,
                                                              monkeypatch, field: str
                                                              ) -> None:
    """The check opened the input, looked, closed; the reader opened the name again: a
    `renameat2(RENAME_EXCHANGE)` loop swapping `design.csv` with a link to a root-only
    file made `storlab status` print the file's first line. Here the swap happens right
    after the check looks at what it opened (the race won every time): the content read
    is still the checked file's, no line of the root-only file shown."""
    import yaml

    secret = tmp_path / "root-only" / "shadow"
    secret.parent.mkdir()
    secret.write_text("secretline1 root:x:SECRET\nfactors: SECRET\n")
    secret.chmod(0o600)
    camp = _nobody_campaign(tmp_path / "c", csv="design.csv")
    name = camp.parent / ("design.csv" if field == "csv" else "s.yaml")
    if field == "space":
        spec = yaml.safe_load(camp.read_text())
        spec["space"] = "s.yaml"
        camp.write_text(yaml.safe_dump(spec, sort_keys=False))
        name.write_text(yaml.safe_dump(
            {"factors": [{"name": "n", "kind": "categorical", "values": ["a", "b"]}]}))
        (camp.parent / "design.csv").write_text("n\na\nb\n")
    else:
        name.write_text("n\na\nb\n")
    real_readlink, swapped = os.readlink, []

    def readlink(path, *a, **k):  # the check reads what it opened by /proc/self/fd
        got = real_readlink(path, *a, **k)
        if str(path).startswith("/proc/self/fd/") and got == str(name) and not swapped:
            swapped.append(got)
            name.rename(name.with_suffix(".kept"))
            name.symlink_to(secret)
        return got

    monkeypatch.setattr(os, "readlink", readlink)
    code, out, err = storlab_main("status", camp)
    assert swapped, "the check did not look at the file it opened"
    assert "SECRET" not in out + err and "Traceback" not in out + err, out + err
    assert code == 0, out + err


def _fio_campaign(d: Path, options: dict, **extra: object) -> Path:
    """A one-run fio campaign in `d` with these runner options (and top-level `extra`)."""
    import yaml

    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "f", "space": {"factors": [
                {"name": "bs", "kind": "categorical", "values": ["4k", "8k"]}]},
            "design": {"configs": [{"bs": "4k"}]},
            "runner": {"type": "fio", "options": {"size": "256k", "rw": "write",
                                                  **options}}, **extra}
    (d / "f.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return d / "f.yaml"


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's binds need root")
@pytest.mark.parametrize("option", ["directory", "write_bw_log"])
def test_a_program_fio_starts_gets_no_existing_directory_the_job_names(
        storlab, tmp_path: Path, option: str) -> None:
    """An existing directory outside the campaign named by a fio path option opened whole
    and writable: an `exec_prerun` appended to an existing file in it (a crontab, an
    authorized_keys). Now refused before any run in one line, the file untouched: outside
    the campaign's directory as every runner target without allow_destructive; inside
    it, undeclared, because a program fio starts would get it."""
    for outside, why in ((tmp_path / "home" / ".ssh", "outside the campaign's directory"),
                         (tmp_path / "c" / "home" / ".ssh", "exec_prerun")):
        outside.mkdir(parents=True)
        keys = outside / "authorized_keys"
        keys.write_text("ssh-ed25519 AAAA user\n")
        value = str(outside) if option == "directory" else str(outside / "lg")
        camp = _fio_campaign(tmp_path / "c", {option: value,
                                              "exec_prerun": f"sh -c 'echo PWNED >> {keys}'"})
        r = storlab("run", camp, timeout=240)
        out = r.stdout + r.stderr
        assert r.returncode == 2 and "Traceback" not in out, out
        assert len(out.strip().splitlines()) == 1 and why in out, out
        assert str(outside) in out, out
        assert ("sandbox.writable" if why == "exec_prerun" else "allow_destructive") in out
        assert keys.read_text() == "ssh-ed25519 AAAA user\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's binds need root")
def test_a_step_gets_none_of_the_runners_directories(storlab, tmp_path: Path) -> None:
    """The setup and teardown steps got the runner's targets: with fio `directory:` naming
    an existing directory outside the campaign, a step appended to a file there. Now a
    step gets what the campaign declares only: the step fails, the file untouched, while
    fio itself still lays its files out and writes its logs there (the runner's
    allow_destructive, which a target outside the campaign's directory needs, is fio's
    only)."""
    outside = tmp_path / "spool"
    outside.mkdir()
    tab = outside / "root"
    tab.write_text("# crontab\n")
    camp = _fio_campaign(tmp_path / "c", {"directory": str(outside), "allow_destructive": True,
                                          "write_bw_log": str(outside / "lg")},
                         setup=[["sh", "-c", f"echo '* * * * * PWNED' >> {tab}"]])
    r = storlab("run", camp, timeout=240)
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    assert tab.read_text() == "# crontab\n"
    assert "c1-r1 failed" in out, out
    # without the step, fio makes its file and logs in the directory the job names
    camp = _fio_campaign(tmp_path / "c", {"directory": str(outside), "allow_destructive": True,
                                          "write_bw_log": str(outside / "lg")})
    (camp.parent / "campaign.db").unlink()
    r = storlab("run", camp, timeout=240)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "c1-r1 ok" in out, out
    made = sorted(p.name for p in outside.iterdir())
    assert "root" in made and any(n.startswith("lg_bw") for n in made), made
    assert any((outside / n).stat().st_size == 256 << 10 for n in made), made  # fio's file


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's binds need root")
def test_an_existing_file_in_a_named_directory_opens_only_with_allow_destructive(
        storlab, tmp_path: Path) -> None:
    """fio opens an existing file in the directory a job names only when the job names
    it as `filename`: refused without allow_destructive (one line, exit 2), the file
    untouched."""
    outside = tmp_path / "data"
    outside.mkdir()
    old = outside / "old.dat"
    old.write_bytes(b"keep" * 1024)
    camp = _fio_campaign(tmp_path / "c", {"directory": str(outside), "filename": "old.dat"})
    r = storlab("run", camp, timeout=240)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out, out
    assert "old.dat" in out and "allow_destructive" in out, out
    assert old.read_bytes() == b"keep" * 1024


def test_a_campaign_reached_through_somebody_elses_link_is_refused(storlab, tmp_path: Path
                                                                   ) -> None:
    """A campaign file named through a link another user owns (nobody's link in /tmp to
    a root campaign) made root's store and runs where the link led, in the target's
    directory. Now refused in one line naming the link, wherever the kernel meets it: a
    link to the file, a link to a directory before `..` (`dirlink/../campaign.yaml` opens
    the target's parent's file, which `abspath` would have hidden), and nobody's link
    behind root's own; the same file through links of our own, or by its real path,
    loads."""
    import shutil

    real = tmp_path / "theirs"
    shutil.copytree(ROOT / "examples/fio-screening", real)
    (real / "sub").mkdir()
    before = sorted(p.name for p in real.iterdir())
    camp = real / "campaign.yaml"
    link, dirlink = tmp_path / "link.yaml", tmp_path / "dirlink"
    link.symlink_to(camp)
    dirlink.symlink_to(real / "sub")
    (tmp_path / "rootlink").symlink_to(dirlink)  # root's link -> nobody's link
    for p in (link, dirlink):
        os.lchown(p, 65534, 65534)
    for given, through in ((link, link), (dirlink / ".." / "campaign.yaml", dirlink),
                           (tmp_path / "rootlink" / ".." / "campaign.yaml", dirlink)):
        r = storlab("status", given, timeout=60)
        out = r.stdout + r.stderr
        assert r.returncode == 2 and "Traceback" not in out and \
            len(out.strip().splitlines()) == 1, out
        assert f"reached through {through}, a symbolic link owned by uid 65534" in out, out
        assert str(camp) in out, out
    assert sorted(p.name for p in real.iterdir()) == before
    for p in (link, dirlink):
        os.lchown(p, os.geteuid(), os.getegid())
    assert storlab("status", link, timeout=60).returncode == 0
    assert storlab("status", tmp_path / "rootlink" / ".." / "campaign.yaml",
                   timeout=60).returncode == 0

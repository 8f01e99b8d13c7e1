"""storlab itself runs as root outside the sandbox: the files and directories it handles
for a campaign (the run directory, its config, the documents directory, the locks, the
store's SQLite files) are handled through descriptors held from their creation, never by
a path a run's program could have swapped for a link. Each case is a route found by an
attacker: a real sandbox, real programs, the victim's bytes compared before and after."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.errors import StorlabError
from storlab.fileio import write_in_dir

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)


def tree(d: Path) -> dict[str, str]:
    """Every file below `d` and its digest."""
    return {str(p.relative_to(d)): digest(p) for p in sorted(d.rglob("*")) if p.is_file()}


FACTOR = {"postmark": {"name": "number", "kind": "ordinal", "values": [10, 20]},
          "fio": {"name": "bs", "kind": "ordinal", "values": ["4k", "8k"]}}


ECHO = {"type": "command", "options": {"command": ["sh", "-c", "echo '{\"y\": {n}}'"],
                                       "json_metrics": {"y": "y"}}}


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def campaign(d: Path, runner: dict[str, Any], **extra: Any) -> Path:
    """A two-run campaign file in `d` (one factor the runner knows)."""
    factor = FACTOR.get(runner["type"], {"name": "n", "kind": "ordinal", "values": [10, 20]})
    space = {"factors": [factor], "responses": [{"name": "y", "goal": "maximize"}]}
    d.mkdir(parents=True, exist_ok=True)
    (d / "campaign.yaml").write_text(yaml.safe_dump(
        {"name": "own", "timeout": 30, "space": space, "design": {"kind": "full"},
         "runner": runner, **extra}, sort_keys=False))
    return d / "campaign.yaml"


def theirs(tmp_path: Path, names: list[str]) -> tuple[Path, dict[str, str]]:
    """Somebody's directory outside the campaign, with files; and its contents."""
    d = tmp_path / "theirs"
    for n in names:
        (d / n).parent.mkdir(parents=True, exist_ok=True)
        (d / n).write_bytes(os.urandom(4096))
    return d, tree(d)


def stderr_tails(store: Path) -> list[str]:
    with sqlite3.connect(store) as db:
        return [r[0] or "" for r in db.execute("SELECT stderr_tail FROM runs")]


@pytest.mark.skipif(shutil.which("postmark") is None, reason="postmark not installed")
def test_a_setup_step_swapping_the_run_directory_for_a_link(tmp_path: Path, storlab: Any
                                                            ) -> None:
    """Route: the run directory swapped for a link to somebody's directory before the
    runner writes postmark.cfg. storlab writes it relative to the run directory's
    descriptor (the directory it made); the link's target is untouched. (A step in the
    sandbox no longer gets postmark's `location` directory, the runner's target: the
    step runs outside to show storlab's own part.)"""
    victim_dir, before = theirs(tmp_path, ["postmark.cfg", "keep.dat"])
    swap = (f'k=$(basename "$PWD"); mv "../$k" "../gone-$k" && ln -s {victim_dir} "../$k"')
    camp = campaign(tmp_path / "c", {"type": "postmark",
                                     "options": {"transactions": 20, "location": ".."}},
                    setup=[{"run": swap, "shell": True, "system_writable": True}],
                    sandbox={"allow_destructive": True})
    p = storlab("run", str(camp), timeout=120)
    assert "ran 2" in p.stdout and "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    assert tree(victim_dir) == before
    made = tmp_path / "c" / "scratch" / "gone-c1-r1" / "postmark.cfg"
    assert made.is_file() and "set number" in made.read_text()  # written where storlab made it


def test_a_teardown_swapping_the_scratch_area_for_a_link(tmp_path: Path, storlab: Any
                                                         ) -> None:
    """Route: the scratch area swapped for a link during the campaign. The run directory
    is removed by name from the scratch area held open (the directory of the same name
    where the link leads survives), and the next run is refused in one line: the scratch
    area no longer leads where it did at the campaign's start. (A program cannot do this
    from the sandbox since the directory above the scratch area may not be declared
    writable, see the next test; a step outside the sandbox shows storlab's own part.)"""
    victim_dir, before = theirs(tmp_path, ["scratch/c1-r1/result.dat", "scratch/other.dat"])
    swap = f"cd ../.. && mv scratch old && ln -s {victim_dir / 'scratch'} scratch"
    camp = campaign(tmp_path / "c", ECHO, workdir="w/scratch",
                    teardown=[{"run": swap, "shell": True, "system_writable": True}],
                    sandbox={"allow_destructive": True})
    p = storlab("run", str(camp), timeout=120)
    assert "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    assert tree(victim_dir) == before, p.stdout + p.stderr
    assert not (victim_dir / "scratch" / "c2-r1").exists()
    tails = stderr_tails(tmp_path / "c" / "campaign.db")
    assert any("scratch area leads to another directory" in t for t in tails), tails


def test_a_writable_directory_holding_the_store_or_the_scratch_parent_is_refused(
        tmp_path: Path, storlab: Any) -> None:
    """A declared writable directory (sandbox.writable, postmark's location, the directory
    of a fio file not made yet) that holds the store or the directory above the scratch
    area: one line, exit 2, nothing run."""
    cases = [({"sandbox": {"writable": ["."]}}, ECHO),
             ({"store": "x/y/s.db", "sandbox": {"writable": ["x"]}}, ECHO),
             ({"workdir": "w/scratch"}, {"type": "postmark", "options": {"location": "../.."}})]
    for i, (extra, runner) in enumerate(cases):
        camp = campaign(tmp_path / f"c{i}", runner, **extra)
        p = storlab("run", str(camp), timeout=120)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1, p.stdout + p.stderr
        assert "holds the campaign's store or scratch area" in lines[0], lines
        assert not list((tmp_path / f"c{i}").rglob("*.db"))


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_a_fio_file_beside_the_store_directory_is_refused(tmp_path: Path, storlab: Any
                                                          ) -> None:
    """Route: fio `filename: <campaign>/x/f.dat` (not made yet: x is opened to fio) with
    the store in x/y: a teardown could swap x/y for a link and storlab would write its
    JSON document where it leads. Refused before any run."""
    c = tmp_path / "c"
    (c / "x").mkdir(parents=True)
    camp = campaign(c, {"type": "fio", "options": {"rw": "write", "size": "64k",
                                                   "filename": str(c / "x" / "f.dat"),
                                                   "unlink": 1}},
                    store="x/y/s.db")
    p = storlab("run", str(camp), timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stdout + p.stderr
    assert "field runner" in lines[0] and str(c / "x") in lines[0], lines


def test_the_documents_directory_is_made_without_following_a_link_on_the_way(
        tmp_path: Path) -> None:
    """`write_in_dir(..., home=)` opens every directory from the campaign's down with
    O_NOFOLLOW: a link swapped in above the last component is refused too (mkdir -p
    followed it)."""
    c = tmp_path / "c"
    (c / "x").mkdir(parents=True)
    victim_dir, before = theirs(tmp_path, ["keep.dat"])
    (c / "x" / "y").symlink_to(victim_dir)
    with pytest.raises(StorlabError, match="symbolic link"):
        write_in_dir(c / "x" / "y" / "s-fio", "c1-r1.json", "{}", home=c)
    assert tree(victim_dir) == before and not (victim_dir / "s-fio").exists()
    assert write_in_dir(c / "x" / "z" / "s-fio", "c1-r1.json", "{}", home=c).exists()


@pytest.mark.parametrize("name", ["campaign.db.lock", "scratch.lock"])
def test_a_hard_link_planted_at_a_lock(tmp_path: Path, victim: Path, storlab: Any,
                                       name: str) -> None:
    """Route: a hard link at the lock's name (O_NOFOLLOW does not see it): refused."""
    before = digest(victim)
    camp = campaign(tmp_path / "c", ECHO)
    os.link(victim, tmp_path / "c" / name)
    p = storlab("run", str(camp), timeout=120)
    assert p.returncode == 2 and "one link" in p.stderr and "Traceback" not in p.stderr, \
        p.stdout + p.stderr
    assert digest(victim) == before


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
@pytest.mark.parametrize("kind", ["hard link", "device"])
def test_a_hard_link_or_device_at_the_stores_sqlite_files(tmp_path: Path, victim: Path,
                                                          storlab: Any, suffix: str,
                                                          kind: str) -> None:
    """Route: SQLite opens the store's -wal/-shm itself, even for `storlab status`: a hard
    link there (to a victim) or a device node is refused before the store is opened."""
    camp = campaign(tmp_path / "c", ECHO)
    assert storlab("run", str(camp), timeout=120).returncode == 0
    beside = tmp_path / "c" / f"campaign.db{suffix}"
    beside.unlink(missing_ok=True)
    before = digest(victim)
    if kind == "hard link":
        os.link(victim, beside)
    else:
        os.mknod(beside, stat.S_IFCHR | 0o600, os.stat("/dev/zero").st_rdev)
    for cmd in ("status", "run"):
        p = storlab(cmd, str(camp), timeout=120)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert beside.name in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert digest(victim) == before


def test_the_walk_cache_sees_a_directory_whose_mtime_was_set_back(tmp_path: Path) -> None:
    """Route: the socket walk's cache trusted st_mtime_ns, which the directory's owner
    sets back (utime) after adding a socket; its ctime moves whatever they do."""
    from storlab.campaign.runners import _sandbox

    d = tmp_path / "d"
    d.mkdir()
    st = os.stat(d)
    assert _sandbox._specials(str(d), False)[0] == []
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(d / "s.sock"))
        os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert os.stat(d).st_mtime_ns == st.st_mtime_ns
        assert _sandbox._specials(str(d), False)[0] == [str(d / "s.sock")]
    finally:
        s.close()


def test_a_file_planted_at_the_run_directory_is_cleared(tmp_path: Path, storlab: Any
                                                        ) -> None:
    """A regular file at scratch/c1-r1 (in the campaign's own scratch area) failed the run
    with a FileExistsError traceback: it is cleared, the run runs."""
    camp = campaign(tmp_path / "c", ECHO)
    (tmp_path / "c" / "scratch").mkdir()
    (tmp_path / "c" / "scratch" / "c1-r1").write_text("stray\n")
    p = storlab("run", str(camp), timeout=120)
    assert p.returncode == 0 and "ok 2, failed 0" in p.stdout, p.stdout + p.stderr


def test_a_fifo_planted_at_the_runs_output_file_is_one_line(tmp_path: Path, storlab: Any
                                                            ) -> None:
    """A setup step that puts a FIFO at the run's stdout file (its directory declared
    writable): the run fails with one storlab line, not an io.UnsupportedOperation
    traceback."""
    out = "{campaign_dir}/campaign.db.output/{key}.stdout"
    camp = campaign(tmp_path / "c", ECHO, sandbox={"writable": ["campaign.db.output"]},
                    setup=[["sh", "-c", f"rm -f {out} && mkfifo {out}"]])
    (tmp_path / "c" / "campaign.db.output").mkdir()
    p = storlab("run", str(camp), timeout=120)
    assert "ok 0, failed 2" in p.stdout, p.stdout + p.stderr
    tails = stderr_tails(tmp_path / "c" / "campaign.db")
    assert all("no longer a regular file" in t and "Traceback" not in t for t in tails), tails


def test_somebodys_file_put_at_the_runs_output_file_is_not_written(tmp_path: Path,
                                                                   storlab: Any) -> None:
    """A step that swaps the run's stdout file for one of another user's (its owner would
    read what the program prints next, e.g. a root-only file it read): the run fails with
    one storlab line and the program's output never lands there. One of storlab's own made
    readable by everybody is made private again before anything is written."""
    out = "{campaign_dir}/campaign.db.output/{key}.stdout"
    for name, swap, ok in (("other", f"chown 65534 {out}", False),
                           ("mode", f"chmod 666 {out}", True)):
        camp = campaign(tmp_path / name, ECHO, sandbox={"writable": ["campaign.db.output"]},
                        setup=[["sh", "-c", f"rm -f {out} && : > {out} && {swap}"]])
        (tmp_path / name / "campaign.db.output").mkdir(mode=0o700)
        p = storlab("run", str(camp), timeout=120)
        outputs = list((tmp_path / name / "campaign.db.output").glob("*.stdout"))
        if ok:
            assert "ok 2, failed 0" in p.stdout, p.stdout + p.stderr
            assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in outputs), outputs
            continue
        assert "ok 0, failed 2" in p.stdout, p.stdout + p.stderr
        tails = stderr_tails(tmp_path / name / "campaign.db")
        assert all("is not storlab's own (owner uid 65534)" in t for t in tails), tails
        assert all(f.read_bytes() == b"" for f in outputs), outputs


def test_a_hard_link_copy_of_the_store_gets_advice_that_keeps_its_results(
        tmp_path: Path, storlab: Any) -> None:
    """A `cp -al` copy of a campaign leaves the store with two links: refused, but the
    advice gives it a copy of its own (its bytes kept), never "remove it"."""
    camp = campaign(tmp_path / "c", ECHO)
    assert storlab("run", str(camp), timeout=120).returncode == 0
    store = tmp_path / "c" / "campaign.db"
    os.link(store, tmp_path / "backup.db")
    p = storlab("status", str(camp), timeout=120)
    assert p.returncode == 2 and "remove it" not in p.stderr, p.stderr
    assert "cp -p" in p.stderr and "hard links" in p.stderr, p.stderr
    assert os.system(f"cp -p '{store}' '{store}.tmp' && mv '{store}.tmp' '{store}'") == 0
    assert storlab("status", str(camp), timeout=120).returncode == 0


def test_a_directory_not_made_yet_beside_the_store_is_not_refused(tmp_path: Path,
                                                                  storlab: Any) -> None:
    """`sandbox.writable: [data]` with data/ not made yet: the sandbox opens nothing for it
    (its directory is the campaign's own, not strictly inside it), so nothing of storlab's
    is exposed and the campaign is not refused for holding the store; declared with
    `allow_destructive` the campaign's directory would open, and it is refused."""
    camp = campaign(tmp_path / "c", ECHO, sandbox={"writable": ["data"]})
    p = storlab("run", str(camp), timeout=120)
    assert "holds the campaign's store" not in p.stderr, p.stderr
    assert p.returncode == 0, p.stderr
    camp = campaign(tmp_path / "d", ECHO, sandbox={"writable": ["data"],
                                                   "allow_destructive": True})
    p = storlab("run", str(camp), timeout=120)
    assert p.returncode == 2 and "holds the campaign's store" in p.stderr, p.stderr


def test_a_link_planted_at_an_output_file_is_one_line(tmp_path: Path) -> None:
    """A symbolic link at the run's output file (O_NOFOLLOW: ELOOP) is refused in one
    storlab line, not an OSError traceback."""
    from storlab.campaign.runners._program import _open_stream
    from storlab.errors import CampaignError

    target = tmp_path / "victim"
    target.write_bytes(b"v")
    (tmp_path / "k.stdout").symlink_to(target)
    with pytest.raises(CampaignError, match="cannot open the run's output file"):
        _open_stream(str(tmp_path / "k.stdout"), b"")
    assert target.read_bytes() == b"v"


def test_a_left_over_run_directory_that_cannot_be_cleared_is_named(tmp_path: Path,
                                                                    storlab: Any) -> None:
    """A run directory left over with an immutable file in it (chattr +i; a mount or a
    busy NFS file does the same) cannot be cleared: the run fails saying what remains,
    not "cannot make the run directory (File exists)"."""
    if shutil.which("chattr") is None:
        pytest.skip("needs chattr")
    camp = campaign(tmp_path / "c", ECHO)
    left = tmp_path / "c" / "scratch" / "c1-r1"  # in the campaign's own scratch area
    left.mkdir(parents=True)
    (left / "stuck").write_text("x")
    if os.system(f"chattr +i '{left / 'stuck'}' 2>/dev/null") != 0:
        pytest.skip("the file system here has no immutable flag")
    try:
        p = storlab("run", str(camp), timeout=120)
        tails = stderr_tails(tmp_path / "c" / "campaign.db")
        assert any("could not be cleared (stuck remains)" in t for t in tails), \
            (tails, p.stdout, p.stderr)
    finally:
        os.system(f"chattr -i '{left / 'stuck'}'")


def test_records_dir_is_made_in_the_scratch_area_storlab_holds(tmp_path: Path) -> None:
    """Route: the object-store runner wrote `<records_dir>/<key>.csv.gz` by path, so a
    scratch area swapped for a link while the load ran (a step outside the sandbox can)
    sent the records where it leads. Now the directory is made in the scratch area storlab
    opened when the run started, and that descriptor is what the load's child gets
    writable; a link planted for `records_dir` itself is refused in one line. (The
    runner's whole path: tests/campaign/test_objectstore_child.py, tests/clusters.)"""
    from storlab.campaign.runners._program import run_directory
    from storlab.campaign.runners.objectstore import records_place

    victim_dir, before = theirs(tmp_path, ["scratch/records/c1-r1.csv.gz"])
    scratch = tmp_path / "c" / "scratch"
    (scratch / "c1-r1").mkdir(parents=True)
    pfd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    wfd = os.open(scratch / "c1-r1", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rename(scratch, tmp_path / "c" / "old")
        scratch.symlink_to(victim_dir / "scratch")
        with run_directory(scratch / "c1-r1", wfd, pfd):
            bound, rec = records_place(Path("records"), scratch / "c1-r1")
            for fd, _ in bound:
                os.close(fd)
            assert [at for _, at in bound] == [rec["dir"]] == [str(tmp_path / "c" / "old" /
                                                                  "records")]
            assert rec["name"] == "c1-r1.csv.gz"
            (tmp_path / "c" / "old" / "planted").symlink_to(victim_dir / "scratch" / "records")
            with pytest.raises(StorlabError, match="planted is a symbolic link"):
                records_place(Path("planted"), scratch / "c1-r1")
    finally:
        os.close(pfd)
        os.close(wfd)
    assert tree(victim_dir) == before


def test_the_scratch_area_is_compared_only_when_seen_the_same_way(tmp_path: Path) -> None:
    """The scratch area's (dev, inode) at the campaign's start is compared with the one a
    run opens only when both are seen by the same host name, boot and mount namespace:
    a container sharing the host's name (another mount namespace) or a scratch area on
    NFS remounted after a reboot (another boot id) does not refuse runs with a message
    about a link that is not there; seen the same way, a scratch area leading elsewhere
    is refused."""
    from storlab.campaign.task import RunTask, execute_task, scratch_view

    camp = tmp_path / "c"
    (camp / "scratch").mkdir(parents=True)
    st = os.stat(camp / "scratch")
    view = scratch_view()
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert view.split() == [socket.gethostname(), boot, os.readlink("/proc/self/ns/mnt")]

    def run(seen: str, ino: int) -> Any:
        t = RunTask(key="c1-r1", config={}, runner_type="command", values={},
                    runner_options={"command": ["sh", "-c", "echo '{\"y\": 1}'"],
                                    "json_metrics": {"y": "y"}},
                    workdir=str(camp / "scratch" / "c1-r1"), timeout=30, homes=[str(camp)],
                    own_scratch=True, scratch_id=(seen, st.st_dev, ino))
        return execute_task(t).result

    assert run(view, st.st_ino).status == "ok"
    r = run(view, st.st_ino + 1)
    assert r.status == "failed" and "leads to another directory" in r.stderr, r.stderr
    for other in (view.replace(boot, "another-boot"), view.rsplit(" ", 1)[0] + " mnt:[1]"):
        r = run(other, st.st_ino + 1)
        assert r.status == "ok", (other, r.stderr)


def _as_nobody(*argv: str) -> "subprocess.CompletedProcess[str]":
    import subprocess

    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           *argv], capture_output=True, text=True, timeout=30)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv (another user reads)")
def test_a_failed_runs_kept_directory_is_private(storlab: Any) -> None:
    """A5-9: a failed run's directory is kept for inspection, with whatever its program
    copied there of what it read (as root); it was 0755 with 0644 files, readable by every
    user. Now 0700 (and an older campaign's 0755 scratch area is made 0700 when a run
    touches it), so `nobody` reads nothing, whatever the files' modes."""
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(prefix="storlab-a5-9-", dir="/tmp"))  # others reach it
    try:
        _kept_directory_is_private(tmp_path, storlab)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _kept_directory_is_private(tmp_path: Path, storlab: Any) -> None:
    tmp_path.chmod(0o755)
    camp = campaign(tmp_path / "c", {"type": "command", "options": {
        "command": ["sh", "-c", "umask 022; echo s3cret-a5-9 > leak.txt; exit 1"],
        "regex_metrics": []}})
    (tmp_path / "c").chmod(0o755)
    old = tmp_path / "c" / "scratch" / "c9-r1"  # an older campaign's kept run, 0755/0644
    old.mkdir(parents=True)
    (tmp_path / "c" / "scratch").chmod(0o755)
    old.chmod(0o755)
    (old / "old.txt").write_text("old-secret\n")
    (old / "old.txt").chmod(0o644)
    assert _as_nobody("cat", str(old / "old.txt")).returncode == 0  # readable before
    p = storlab("run", camp, timeout=120)
    assert p.returncode != 0 or "failed" in p.stdout + p.stderr, p.stderr
    leak = tmp_path / "c" / "scratch" / "c1-r1" / "leak.txt"
    assert leak.read_text() == "s3cret-a5-9\n"  # kept, for the operator
    assert stat.S_IMODE(leak.stat().st_mode) == 0o644  # the program's mode, unreachable:
    assert stat.S_IMODE(leak.parent.stat().st_mode) == 0o700
    for path in (leak, old / "old.txt"):
        r = _as_nobody("cat", str(path))
        assert r.returncode != 0 and "s3cret" not in r.stdout and "old-" not in r.stdout
    assert stat.S_IMODE((tmp_path / "c" / "scratch").stat().st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a store another user owns)")
@pytest.mark.parametrize("owner,mode", [(65534, 0o666), (65534, 0o600), (0, 0o666)])
def test_a_store_another_user_owns_or_may_write_is_refused(tmp_path: Path, storlab: Any,
                                                           owner: int, mode: int) -> None:
    """A5-2: a store another user owns (or anyone may write) was written by root with what
    the runs printed (a root-only file a program read): that user read it back. Now one
    line, exit 2, before any run; the store's bytes are unchanged."""
    camp = campaign(tmp_path / "c", ECHO)
    assert storlab("run", camp, timeout=120).returncode == 0
    store = tmp_path / "c" / "campaign.db"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600  # storlab's own store: private
    with sqlite3.connect(store) as db:
        db.execute("DELETE FROM runs")
    db.close()
    for p in tmp_path.joinpath("c").glob("campaign.db*"):
        if p.is_file():
            os.chown(p, owner, owner)
            p.chmod(mode)
    before = digest(store)
    p = storlab("run", camp, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip()
    assert err.count("\n") == 0 and "campaign store" in err, err
    assert ("uid 65534" in err) if owner else (f"mode {mode:04o}" in err), err
    assert digest(store) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a file another user owns)")
def test_the_store_check_judges_what_sqlite_holds_not_the_names(tmp_path: Path) -> None:
    """A5-2, the race (F3): another user's file swapped in at the store's name before
    SQLite opens it, then renamed away (the old check matched descriptors by name, so it
    was skipped). The files SQLite opened are judged on their descriptors, whatever their
    names, before anything is written."""
    from storlab.campaign.spec import CampaignError
    from storlab.campaign.store import (Store, held_files, refuse_foreign_files,
                                        refuse_foreign_held)

    home = tmp_path / "c"
    home.mkdir(mode=0o755)
    store = home / "campaign.db"
    Store(store).db.close()
    checked = refuse_foreign_files(store)
    assert checked[str(store)] == (store.stat().st_dev, store.stat().st_ino)
    before = held_files()
    conn = sqlite3.connect(store)
    try:
        conn.execute("PRAGMA user_version").fetchone()  # open: the store, -wal, -shm
        refuse_foreign_held(before)  # storlab's own files: fine
        os.chown(store, 65534, 65534)  # what is open is now nobody's ...
        os.rename(store, home / "elsewhere.db")  # ... and no longer at the name
        with pytest.raises(CampaignError, match="owned by uid 65534"):
            refuse_foreign_held(before)
        os.rename(home / "elsewhere.db", store)
    finally:
        conn.close()
    with pytest.raises(CampaignError, match="owned by uid 65534"):
        Store(store)
    os.chown(store, 0, 0)
    swapped = home / "other.db"
    shutil.copy(store, swapped)
    os.replace(swapped, store)  # another file at the name, root's: judged, fine
    refuse_foreign_files(store, checked)
    os.chown(home, 65534, 65534)  # the store alone: the campaign file is what refuses
    Store(store).db.close()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv (a program that switches user)")
@pytest.mark.parametrize("opening", ["chown 65534 .", "chmod 1777 ."])
def test_a_program_that_switches_user_reaches_its_run_directory(storlab: Any,
                                                                opening: str) -> None:
    """F17: a run's program that drops to another user (postgres, mysqld --user) reaches
    its run directory by path (`{workdir}`, `$PWD`) once a setup step opens that directory
    to it: the scratch area is root's 0700 on the host and, inside the walls, an empty
    0711 file system holding only the run's directory (passable, not listable), the run
    directories 0700. Real bwrap walls, a real uid switch (setpriv: CAP_SETUID is kept
    inside)."""
    import tempfile

    # a campaign two levels below /tmp: inside the walls the directories above a bound
    # one are bwrap's own (made 0700), which the sandbox makes passable (0711)
    top = Path(tempfile.mkdtemp(prefix="storlab-f17-", dir="/tmp"))
    try:
        top.chmod(0o755)
        (top / "bench").mkdir(mode=0o755)
        tmp_path = top / "bench" / "camp"
        tmp_path.mkdir()
        _switched_user_runs(tmp_path, storlab, opening)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _switched_user_runs(tmp_path: Path, storlab: Any, opening: str) -> None:
    tmp_path.chmod(0o755)
    camp = campaign(tmp_path, {"type": "command", "options": {
        "command": ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    "sh", "-c", 'cat "$PWD/cfg.txt" >/dev/null && '
                    'echo "{\\"y\\": {n}}" > "{workdir}/db.dat" && cat "$PWD/db.dat"'],
        "json_metrics": {"y": "y"}}},
        setup=[{"run": f"echo cfg > cfg.txt && {opening}", "shell": True}],
        )
    p = storlab("run", camp, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "campaign.db") as db:
        rows = db.execute("SELECT status, metrics, stderr_tail FROM runs ORDER BY key"
                          ).fetchall()
    db.close()
    assert [(r[0], json.loads(r[1])) for r in rows] == [("ok", {"y": 10}), ("ok", {"y": 20})
                                                        ], rows
    scratch = tmp_path / "scratch"
    assert stat.S_IMODE(scratch.stat().st_mode) == 0o700
    assert _as_nobody("ls", str(scratch)).returncode != 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a directory another user owns)")
@pytest.mark.parametrize("owner,mode", [(65534, 0o700), (65534, 0o755), (0, 0o777)])
def test_an_output_directory_another_user_owns_or_may_write_is_refused(
        tmp_path: Path, storlab: Any, owner: int, mode: int) -> None:
    """The runs' output directory beside the store (`<store>.output`: what each run's
    programs printed, as root) owned by another user, or writable by others: that user
    would read it, or swap a run's file for a link. One line, exit 2, before any run;
    nothing written in it."""
    camp = campaign(tmp_path / "c", ECHO)
    out = tmp_path / "c" / "campaign.db.output"
    out.mkdir()
    os.chown(out, owner, owner)
    out.chmod(mode)
    p = storlab("run", camp, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip()
    assert err.count("\n") == 0 and "the runs' output directory" in err, err
    assert ("uid 65534" in err) if owner else (f"mode {mode:04o}" in err), err
    assert not any(out.iterdir())
    os.chown(out, 0, 0)
    out.chmod(0o700)
    assert storlab("run", camp, timeout=120).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == [
        f"c{c}-r1.{s}" for c in (1, 2) for s in ("stderr", "stdout")]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a directory another user owns)")
def test_an_output_directory_given_away_during_the_campaign_fails_the_next_run(
        tmp_path: Path, storlab: Any) -> None:
    """The same rule on the directory each run holds (after the preflight's look at the
    name): a step of the first run (outside the walls) gives the directory to `nobody`;
    the next run fails in one line, its stream files never made."""
    out = tmp_path / "c" / "campaign.db.output"
    camp = campaign(tmp_path / "c", ECHO, setup=[
        {"run": f"chown 65534 {out}", "shell": True, "system_writable": True}],
        sandbox={"allow_destructive": True})
    p = storlab("run", camp, timeout=120)
    assert "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    errs = stderr_tails(tmp_path / "c" / "campaign.db")
    assert sum("the runs' output directory" in e and "uid 65534" in e for e in errs) == 1, errs
    assert sorted(p.name for p in out.iterdir()) == ["c1-r1.stderr", "c1-r1.stdout"]


def _nobody_top() -> Path:
    """A fresh directory in /tmp (root's, 0755) that `nobody` may pass through."""
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="storlab-a74-", dir="/tmp"))
    top.chmod(0o755)
    return top


SWAPPER = r"""
import ctypes, os, select, struct, sys
d, target = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
assert libc.inotify_add_watch(fd, d.encode(), 0x10) >= 0  # IN_CLOSE_NOWRITE
print("ready", flush=True)
while True:
    r, _, _ = select.select([fd], [], [], 60)
    if not r:
        sys.exit(3)
    buf, i, hit = os.read(fd, 65536), 0, False
    while i < len(buf):
        _, mask, _, n = struct.unpack_from("iIII", buf, i)
        hit |= buf[i + 16:i + 16 + n].rstrip(b"\0") == b"campaign.yaml"
        i += 16 + n
    if hit:
        break
os.rename(d, d + ".real")
os.symlink(target, d)
print("swapped", flush=True)
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv (another user's campaign directory)")
def test_a_campaign_directory_another_user_can_swap_is_refused_before_anything_is_written(
        storlab: Any) -> None:
    """A7-4: root runs a campaign in a directory another user (`nobody`, a real uid switch)
    owns; that user swaps the directory for a link to a root-only directory as soon as
    storlab has read campaign.yaml (inotify). storlab made its store, lock, output files
    and scratch area where the link led (with `store: authorized_keys`, root's 0600 file
    holding a run's output in /root/.ssh). Now: one line, exit 2, naming the directory,
    its owner and the way out, before anything is written; the victim stays empty, and so
    does the campaign's own directory."""
    import subprocess
    import sys

    top = _nobody_top()
    try:
        theirs = top / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        victim = top / "victim"
        victim.mkdir(mode=0o700)
        camp = campaign(theirs / "c", ECHO, store="authorized_keys")
        for p in (theirs / "c", camp):
            os.chown(p, 65534, 65534)
        swapper = subprocess.Popen(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             sys.executable, "-c", SWAPPER, str(theirs / "c"), str(victim)],
            stdout=subprocess.PIPE, text=True)
        try:
            assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
            p = storlab("run", camp, timeout=120)
            assert p.returncode == 2, p.stdout + p.stderr
            err = p.stderr.strip()
            assert err.count("\n") == 0, err
            assert "owned by uid 65534" in err and str(theirs) in err, err
            assert "copy the campaign into a directory only root can change" in err, err
            assert list(victim.iterdir()) == []
            real = theirs / "c.real" if (theirs / "c.real").exists() else theirs / "c"
            assert sorted(x.name for x in real.iterdir()) == ["campaign.yaml"]
        finally:
            swapper.kill()
            swapper.wait()
        # the way out: the same campaign copied into a directory only root can change
        mine = top / "mine"
        mine.mkdir(mode=0o700)
        shutil.copy(camp, mine / "campaign.yaml")
        assert storlab("run", mine / "campaign.yaml", timeout=120).returncode == 0
        assert (mine / "authorized_keys").stat().st_uid == 0
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (another user's directory)")
@pytest.mark.parametrize("command", [["run"], ["status"], ["report"]])
def test_a_campaign_directory_another_user_owns_is_refused_by_every_command(
        storlab: Any, command: list[str]) -> None:
    """The same refusal reaches every command that reads the campaign file as root (run,
    status, report: all go through the one reading of the file), with the owner named;
    nothing is made in that directory."""
    top = _nobody_top()
    try:
        camp = campaign(top / "c", ECHO)
        os.chown(top / "c", 65534, 65534)
        p = storlab(*command, camp, timeout=120)
        assert p.returncode == 2, p.stdout + p.stderr
        err = p.stderr.strip()
        assert err.count("\n") == 0 and "owned by uid 65534" in err, err
        assert sorted(x.name for x in (top / "c").iterdir()) == ["campaign.yaml"]
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a world-writable directory)")
def test_a_world_writable_campaign_directory_is_refused_a_private_one_below_tmp_runs(
        storlab: Any) -> None:
    """A campaign directory anyone may write (0777, no sticky bit) is refused as root; a
    root-owned 0700 directory below the sticky /tmp runs (the rule of sudo and sshd's
    StrictModes: a sticky directory on the way, not as the last)."""
    top = _nobody_top()
    try:
        camp = campaign(top / "c", ECHO)
        (top / "c").chmod(0o777)
        p = storlab("run", camp, timeout=120)
        assert p.returncode == 2 and "mode 0777" in p.stderr, p.stdout + p.stderr
        (top / "c").chmod(0o700)
        assert storlab("run", camp, timeout=120).returncode == 0
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_an_existing_sqlite_database_that_is_not_a_store_is_refused(
        tmp_path: Path, storlab: Any) -> None:
    """A7-4d: `store:` naming an existing SQLite database of an application (root's, say):
    storlab switched it to WAL and wrote its tables and the runs into it. Now one line,
    exit 2, the database's bytes unchanged."""
    camp = campaign(tmp_path / "c", ECHO, store="app.db")
    app = tmp_path / "c" / "app.db"
    with sqlite3.connect(app) as db:
        db.execute("CREATE TABLE users (name TEXT, pw TEXT)")
        db.execute("INSERT INTO users VALUES ('admin', 'x')")
    db.close()
    before = digest(app)
    p = storlab("run", camp, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip()
    assert err.count("\n") == 0 and "not a storlab store" in err and "users" in err, err
    assert digest(app) == before
    assert sorted(x.name for x in (tmp_path / "c").iterdir()) == ["app.db", "campaign.yaml"]
    # the writer itself (what `run` opens once the campaign is loaded: the file swapped in
    # after the load's look, as in the attack) refuses before it writes a byte
    from storlab.campaign.spec import CampaignError
    from storlab.campaign.store import Store

    with pytest.raises(CampaignError, match="not a storlab store"):
        Store(app)
    assert digest(app) == before
    with sqlite3.connect(app) as db:  # another application's id: refused too
        db.execute("DROP TABLE users")
        db.execute("PRAGMA application_id=1234")
    db.close()
    p = storlab("run", camp, timeout=120)
    assert p.returncode == 2 and "application_id 0x4d2" in p.stderr, p.stdout + p.stderr


def test_a_store_an_earlier_storlab_made_is_still_a_store(tmp_path: Path,
                                                          storlab: Any) -> None:
    """A store without the application id (made before it was set) is storlab's by its
    tables: run again it is used, and marked; a new store carries the id."""
    from storlab.campaign.store import APPLICATION_ID

    camp = campaign(tmp_path / "c", ECHO)
    assert storlab("run", camp, timeout=120).returncode == 0
    store = tmp_path / "c" / "campaign.db"
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        db.execute("PRAGMA application_id=0")
        db.execute("DELETE FROM runs")
    db.close()
    p = storlab("run", camp, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
    db.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (another user's directory)")
def test_a_store_subdirectory_another_user_owns_is_refused(tmp_path: Path,
                                                          storlab: Any) -> None:
    """`store: sub/campaign.db` with `sub` another user's (a campaign copied with its
    owners kept): that user could swap the store's files there; refused in one line, as
    root, before anything is written."""
    camp = campaign(tmp_path / "c", ECHO, store="sub/campaign.db")
    (tmp_path / "c" / "sub").mkdir()
    os.chown(tmp_path / "c" / "sub", 65534, 65534)
    p = storlab("run", camp, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip()
    assert err.count("\n") == 0 and "field store:" in err and "uid 65534" in err, err
    assert list((tmp_path / "c" / "sub").iterdir()) == []


SHIPPED_STORE = """
PRAGMA application_id=1398033474;
PRAGMA user_version=1;
CREATE TABLE configs (config_id INTEGER PRIMARY KEY, config TEXT NOT NULL,
 design TEXT NOT NULL);
CREATE TABLE runs (key TEXT PRIMARY KEY, seq INTEGER NOT NULL, config_id INTEGER NOT NULL,
 repetition INTEGER NOT NULL, warmup INTEGER NOT NULL, config TEXT NOT NULL,
 status TEXT NOT NULL, exit_code INTEGER, started REAL, ended REAL, host TEXT,
 attempts INTEGER NOT NULL DEFAULT 0, stderr_tail TEXT, raw TEXT, metrics TEXT, rows TEXT,
 owner TEXT);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@pytest.mark.parametrize("odd, named", [
    ("CREATE TABLE junk (x); CREATE TRIGGER t AFTER INSERT ON runs BEGIN INSERT INTO junk "
     "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c; "
     "END;", "trigger 't' on 'runs'"),
    ("CREATE TABLE junk (x);", "table 'junk'"),
    ("CREATE VIEW v AS SELECT 1;", "view 'v'"),
    ("CREATE INDEX i ON runs (status) WHERE length(status) > 0;", "index 'i' on 'runs'"),
])
def test_a_shipped_store_holding_objects_storlab_never_makes_is_refused(
        tmp_path: Path, storlab: Any, odd: str, named: str) -> None:
    """A8-2: a campaign ships its own store, storlab's id and tables plus a trigger on
    `runs` evaluating an endless recursive query: root's `storlab run` never returned (and
    a trigger could rewrite the results). Now every command refuses the store in one line
    naming the object, before anything is written; a store storlab made is untouched by
    the check."""
    camp = campaign(tmp_path / "c", ECHO)
    store = tmp_path / "c" / "campaign.db"
    db = sqlite3.connect(store)
    db.executescript(SHIPPED_STORE + odd)
    db.close()
    before = digest(store)
    for cmd in ("run", "status"):
        p = storlab(cmd, camp, timeout=60)
        assert p.returncode == 2, (cmd, p.stdout + p.stderr)
        err = p.stderr.strip()
        assert err.count("\n") == 0 and named in err and "never creates" in err, (cmd, err)
    assert digest(store) == before
    assert sorted(x.name for x in (tmp_path / "c").iterdir()) == ["campaign.db",
                                                                   "campaign.yaml"]


def test_a_store_every_storlab_made_passes_the_schema_check(tmp_path: Path) -> None:
    """The schema check accepts what storlab makes: a new store, an older one (no `plan`,
    no `owner` column: added on open) and a store somebody ran ANALYZE on."""
    from storlab.campaign.store import Store, foreign_schema_object

    old = tmp_path / "old.db"
    db = sqlite3.connect(old)
    db.executescript(SHIPPED_STORE.replace(",\n owner TEXT", "").replace(
        "PRAGMA application_id=1398033474;", ""))
    db.close()
    with Store(old) as s:
        assert s.db.execute("SELECT count(*) FROM plan").fetchone()[0] == 0
    db = sqlite3.connect(old)
    db.execute("ANALYZE")
    assert foreign_schema_object(db) is None
    db.close()
    with Store(tmp_path / "new.db"):
        pass
    with Store(tmp_path / "new.db", readonly=True) as s:
        assert foreign_schema_object(s.db) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a system tree, another user)")
def test_a_shipped_scratch_link_leading_out_of_the_campaign_is_refused(
        tmp_path: Path, storlab: Any) -> None:
    """A8-4: a campaign ships `scratch` as a link to a system directory (`cp -r` keeps it):
    root made the runs' directories there (/etc/<x>/c1-r1/ with what the program wrote).
    Now, before any run, one line: without allow_destructive any scratch area leading out
    of the campaign's directory; with it, one in a system tree or another user's
    directory. A benchmark directory of root's own, with allow_destructive, is used."""
    import tempfile

    plant = ["sh", "-c", "echo planted > planted.conf; echo '{\"y\": 1}'"]
    runner = {"type": "command", "options": {"command": plant, "json_metrics": {"y": "y"}}}
    etc = Path(tempfile.mkdtemp(prefix="storlab-a84-", dir="/etc"))
    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, 65534, 65534)
    fast = tmp_path / "fast"
    fast.mkdir(mode=0o700)
    try:
        for allow, to, said in ((False, etc, "leads outside the campaign's directory"),
                                (False, fast, "leads outside the campaign's directory"),
                                (True, etc, "one of the system's trees"),
                                (True, other, "uid 65534")):
            d = tmp_path / f"c-{allow}-{to.name}"
            camp = campaign(d, runner, sandbox={"allow_destructive": allow})
            (d / "scratch").symlink_to(to)
            p = storlab("run", camp, timeout=120)
            assert p.returncode == 2, (allow, to, p.stdout + p.stderr)
            err = p.stderr.strip()
            assert err.count("\n") == 0 and said in err and "field workdir" in err, err
            assert str(to) in err, err
            assert list(to.iterdir()) == [], (allow, to)
            assert not (d / "campaign.db").exists()
        d = tmp_path / "c-fast"
        camp = campaign(d, runner, sandbox={"allow_destructive": True})
        (d / "scratch").symlink_to(fast)
        p = storlab("run", camp, timeout=120)
        assert p.returncode == 0 and "ok 2, failed 0" in p.stdout, p.stdout + p.stderr
    finally:
        shutil.rmtree(etc, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None
                    or shutil.which("fio") is None,
                    reason="needs root, setpriv (another user makes the link) and fio")
def test_an_output_directory_through_another_users_link_is_not_made(
        tmp_path: Path, storlab: Any) -> None:
    """A8-6: root exports a fio campaign's documents under another user's directory
    (`results --fio-json /home/them/x/out`), `x` that user's link to a root-only directory:
    root made `out/` there and wrote `c1-r1.json` in it. Now the directory is judged first
    and made from `/` without following a link: one line, nothing made where the link
    leads; the same for `analyze --plots`. Into a directory of root's own it is written."""
    import tempfile

    camp = campaign(tmp_path / "c", {"type": "fio", "options": {
        "rw": "write", "size": "1M", "ioengine": "psync"}})
    assert storlab("run", camp, timeout=180).returncode == 0
    victim = Path(tempfile.mkdtemp(prefix="storlab-a86-", dir="/etc"))
    theirs_dir = Path(tempfile.mkdtemp(prefix="storlab-a86-"))
    try:
        theirs_dir.chmod(0o755)
        os.chown(theirs_dir, 65534, 65534)
        made = _as_nobody("ln", "-s", str(victim), str(theirs_dir / "x"))
        assert made.returncode == 0, made.stderr
        p = storlab("results", camp, "--fio-json", theirs_dir / "x" / "out", timeout=60)
        assert p.returncode == 2, p.stdout + p.stderr
        err = p.stderr.strip()
        assert err.count("\n") == 0 and "uid 65534" in err and "--fio-json" in err, err
        (tmp_path / "r.csv").write_text("A,B,y\n-1,-1,1\n1,-1,3\n-1,1,2\n1,1,5\n")
        p = storlab("analyze", tmp_path / "r.csv", "-y", "y", "--plots",
                    theirs_dir / "x" / "plots", timeout=60)
        assert p.returncode != 0 and "uid 65534" in p.stderr, p.stdout + p.stderr
        assert list(victim.iterdir()) == []
        p = storlab("results", camp, "--fio-json", tmp_path / "mine" / "out", timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
        assert sorted(x.name for x in (tmp_path / "mine" / "out").iterdir()) == [
            "c1-r1.json", "c2-r1.json"]
    finally:
        shutil.rmtree(victim, ignore_errors=True)
        shutil.rmtree(theirs_dir, ignore_errors=True)

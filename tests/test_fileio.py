"""storlab.fileio: every file is written to a temporary name and renamed, so a kill leaves
the previous file or the complete new one (issue 12, "Exports are atomic")."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from storlab.errors import StorlabError
from storlab.fileio import (atomic_write, read_table, read_text, save_figure, write_frame,
                            within, write_json, write_text)



def _temps(d: Path) -> list[Path]:
    return sorted(d.glob(".*.tmp"))


# ---------------------------------------------------------------- the helper itself

def test_atomic_write_replaces_with_a_fixed_mode(tmp_path: Path) -> None:
    p = tmp_path / "out.txt"
    write_text(p, "one\n")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(p.stat().st_mode) == 0o644 & ~umask
    os.chmod(p, 0o6777)  # another user's set-ID, world-writable file at the name (A5-11)
    inode = p.stat().st_ino
    write_text(p, "two\n")
    assert p.read_text() == "two\n"
    assert p.stat().st_ino != inode  # a new file renamed over the old one
    assert stat.S_IMODE(p.stat().st_mode) == 0o644 & ~umask  # never the old, wider mode
    assert _temps(tmp_path) == []


@pytest.mark.parametrize("old, private, new", [
    (0o600, False, 0o600),   # a results table the user made private stays private
    (0o640, False, 0o640),
    (0o755, False, 0o644),   # execute bits never taken
    (0o6777, False, 0o644),  # set-ID bits never taken, never wider than the default
    (0o7777, True, 0o600),
    (0o400, True, 0o400),
    (0o000, False, 0o000),
])
def test_atomic_write_keeps_an_own_files_narrower_mode(tmp_path: Path, old: int,
                                                       private: bool, new: int) -> None:
    """F4: `-o out.csv` over the user's 0600 out.csv made it 0644 (world-readable)."""
    p = tmp_path / "out.csv"
    p.write_text("secret\n")
    os.chmod(p, old)
    umask = os.umask(0o022)
    try:
        write_text(p, "a,b\n", what="-o", private=private)
    finally:
        os.umask(umask)
    assert stat.S_IMODE(p.stat().st_mode) == new


def test_atomic_write_takes_no_mode_from_another_users_file(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to make a file another user owns")
    p = tmp_path / "out.csv"
    p.write_text("x\n")
    os.chown(p, 65534, 65534)
    os.chmod(p, 0o600)
    umask = os.umask(0o022)
    try:
        write_text(p, "a\n", what="-o")
    finally:
        os.umask(umask)
    st = p.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o644)


def test_atomic_write_over_a_link_takes_not_its_targets_mode(tmp_path: Path) -> None:
    """A5-11: `-o res.csv` where res.csv links to a 6777 file made a -rwsrwsrwx output."""
    mine = tmp_path / "mine"
    mine.write_text("x\n")
    os.chmod(mine, 0o6777)
    out = tmp_path / "res.csv"
    out.symlink_to(mine)
    write_text(out, "a,b\n", what="-o")
    assert not out.is_symlink() and out.read_text() == "a,b\n"
    assert stat.S_IMODE(out.lstat().st_mode) & 0o7022 == 0
    assert mine.read_text() == "x\n"  # the link's target untouched
    write_text(tmp_path / "p.html", "x", private=True)
    assert stat.S_IMODE((tmp_path / "p.html").stat().st_mode) == 0o600


def test_failure_inside_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    p = tmp_path / "out.csv"
    p.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_write(p) as fh:
            fh.write("half of the new\n")
            raise RuntimeError("killed halfway")
    assert p.read_text() == "old\n"
    assert _temps(tmp_path) == []


@pytest.mark.parametrize("target,message", [
    ("adir", "is a directory"),
    ("nodir/x.csv", "does not exist"),
    ("afile/x.csv", "is not a directory"),
])
def test_bad_targets_are_one_line(tmp_path: Path, target: str, message: str) -> None:
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(StorlabError, match=message):
        write_text(tmp_path / target, "x", what="-o")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"]


def test_frames_round_trip_by_suffix(tmp_path: Path) -> None:
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, np.nan], "c": ["x", "y"]})
    for suffix in (".csv", ".parquet", ".json"):
        write_frame(df, tmp_path / f"t{suffix}")
        back = read_table(tmp_path / f"t{suffix}")
        pd.testing.assert_frame_equal(back, df, check_dtype=False)
    with pytest.raises(StorlabError, match="use a .csv, .parquet or .json"):
        write_frame(df, tmp_path / "t.txt")
    write_frame(df, tmp_path / "t.txt", fmt="csv")
    assert (tmp_path / "t.txt").read_text().startswith("a,b,c\n")
    write_json(tmp_path / "j.json", {"x": np.float64(np.inf), "n": np.int64(3)})
    assert json.loads((tmp_path / "j.json").read_text()) == {"x": None, "n": 3}


def test_save_figure(tmp_path: Path) -> None:
    from storlab.plotstyle import subplots

    fig, ax = subplots()  # a detached Figure: the test picks no backend
    ax.plot([1, 2], [3, 4])
    save_figure(fig, tmp_path / "f.png", close=False)
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    save_figure(fig, tmp_path / "f.svg", close=False)
    assert b"<svg" in (tmp_path / "f.svg").read_bytes()[:2000]
    with pytest.raises(StorlabError, match="unknown plot format"):
        save_figure(fig, tmp_path / "f.xyz")
    assert not (tmp_path / "f.xyz").exists() and _temps(tmp_path) == []


@pytest.mark.parametrize("content,message", [
    (b"\x89\xff\xfe garbage", "not a UTF-8 text file"),
    (b"", "empty file"),
    (b"a,a,y\n1,2,3\n", "duplicate column name"),
    (b"a,y\n1,3\n2,inf\n", "not a finite number"),
    (b"a,y\n1,3\n2,1e400\n", "not a finite number"),
])
def test_read_table_refuses(tmp_path: Path, content: bytes, message: str) -> None:
    p = tmp_path / "t.csv"
    p.write_bytes(content)
    with pytest.raises(StorlabError, match=message):
        read_table(p)


def test_read_text_refuses_binary_and_directories(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_bytes(b"name: x\n\x00\x01")
    with pytest.raises(StorlabError, match="not a text file"):
        read_text(tmp_path / "b.yaml")
    with pytest.raises(StorlabError, match="is a directory"):
        read_text(tmp_path)


# ------------------------------------------------ a real SIGKILL of a real export

def _big_campaign(storlab: Any, d: Path, metrics: int = 2000, runs: int = 60) -> Path:
    """A campaign whose run-level export is ~1.5 MB of CSV (60 runs x 2000 nine-digit
    metrics): few runs (each a sandboxed program) and few numbers (each export reads,
    tabulates and writes every one), one pattern naming every metric (a 1000-entry
    json_metrics map cost every export 0.4-1 s of YAML parsing). 300 runs x 1000 metrics
    made the test take 1.5x the CPU time."""
    out = " ".join(str(123_456_789 + i) for i in range(metrics))
    (d / "c.yaml").write_text(yaml.safe_dump({
        "name": "big", "randomize": False,
        "space": {"factors": [{"name": "a", "kind": "integer", "range": [1, 100000]}]},
        "design": {"kind": "lhs", "runs": runs},
        "runner": {"type": "command", "options": {
            "command": ["printf", "%s", out],
            "regex_metrics": [" ".join(f"(?P<m{i}>\\d+)" for i in range(metrics))]}}},
        width=1 << 30))
    r = storlab("run", str(d / "c.yaml"), "-q", timeout=600)
    assert r.returncode == 0, r.stderr
    return d / "c.yaml"


def _kill_when_writing(start: Any, out_dir: Path, target: Path, delay: float,
                       stopped_look: Any) -> tuple[bool, int]:
    """Start the export (`start()` -> a process, as Popen's); as soon as it starts writing (a
    new file in `out_dir`, or the target changed), wait `delay` s and SIGKILL it. (killed
    while running, returncode). With no delay, the kill is decided on a look taken with the
    export stopped (`act_on_a_stopped_look`): its temporary file is there when it dies (under
    load, the export could finish between a look and the kill)."""
    before = {p.name: p.stat() for p in out_dir.iterdir()}

    def writing() -> bool:
        for p in out_dir.iterdir():
            old = before.get(p.name)
            try:
                st = p.stat()
            except FileNotFoundError:
                continue
            if old is None or (st.st_ino, st.st_size, st.st_mtime_ns) != \
                    (old.st_ino, old.st_size, old.st_mtime_ns):
                return True
        return False

    proc = start()
    if delay == 0:
        looked = stopped_look(proc, lambda: _temps(out_dir) or None,
                              lambda _: proc.send_signal(signal.SIGKILL), every=0.005)
        return looked is not None, proc.wait(timeout=60)
    deadline = time.monotonic() + 120
    while proc.poll() is None and not writing() and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(delay)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    return killed, proc.wait(timeout=60)


def test_sigkill_during_results_export_leaves_old_or_new(tmp_path: Path, storlab_forked: Any,
                                                         act_on_a_stopped_look: Any) -> None:
    """Each export a real process, SIGKILLed at ten delays after it starts writing: forked
    from the started program (`storlab_forked`), as a fresh start cost ~1.2 s CPU each."""
    camp = _big_campaign(storlab_forked, tmp_path)
    out_dir = tmp_path / "exports"
    out_dir.mkdir()
    ref = out_dir / "reference.csv"
    r = storlab_forked("results", str(camp), "--level", "run", "-o", str(ref), timeout=300)
    assert r.returncode == 0, r.stderr
    new = ref.read_bytes()
    ref.unlink()
    assert len(new) > 1_000_000
    target = out_dir / "results.csv"
    old = b"config_id,previous\n1,good export\n"
    outcomes = []
    for delay in (0.0, 0.0, 0.005, 0.01, 0.02, 0.04, 0.08, 0.15, 0.3, 0.6):
        target.write_bytes(old)
        args = ("results", camp, "--level", "run", "-o", target)
        killed, code = _kill_when_writing(lambda: storlab_forked.start(*args), out_dir,
                                          target, delay, act_on_a_stopped_look)
        got = target.read_bytes()
        assert got in (old, new), (f"delay {delay}: {len(got)} bytes, neither the old "
                                   f"export ({len(old)}) nor the new one ({len(new)})")
        assert got == (old if killed else new) or (killed and got == new)
        if not killed:
            assert code == 0
        leftovers = _temps(out_dir)  # what a kill mid-write leaves: a hidden temp file
        outcomes.append((delay, killed, got == new, len(leftovers)))
        for p in leftovers:
            p.unlink()
    # The kills did land while the export was being written (else the test proves nothing).
    assert any(killed and n for _, killed, _, n in outcomes), outcomes


def test_a_link_gone_before_its_message_is_written_names_no_target(tmp_path: Path) -> None:
    """The messages about a link read where it leads after the check that it is one; the
    link removed in between (another process) gives `?`, not an OSError's traceback."""
    from storlab.fileio import link_to

    (tmp_path / "l").symlink_to("/somewhere")
    assert link_to(tmp_path / "l") == "/somewhere"
    (tmp_path / "l").unlink()
    assert link_to(tmp_path / "l") == "?"
    (tmp_path / "l").write_text("a file now")
    assert link_to(tmp_path / "l") == "?"


@pytest.mark.parametrize(("path", "top", "inside", "below"), [
    ("/home/c", "/home/c", True, False),
    ("/home/c/f", "/home/c", True, True),
    ("/home/c/f", "/home/c/", True, True),
    ("/home/c//d/./f", "/home/c/d", True, True),
    ("/home/cx/f", "/home/c", False, False),       # a shared prefix is no parent
    ("/home", "/home/c", False, False),
    ("//home/c/f", "/home/c", False, False),       # POSIX may read `//` as another root
    ("/home/c/../etc", "/home/c", True, True),     # as written: `..` is the caller's
    ("/x", "/", True, True),
    ("a/b", ".", True, True),
    ("", ".", True, False),
    ("/a", ".", False, False),
])
def test_within_compares_components_as_written(path: str, top: str, inside: bool,
                                                below: bool) -> None:
    assert within(path, top) is inside
    assert within(path, top, strict=True) is below
    assert within(Path(path), Path(top)) is inside


# ---------------------------------------------------------------- directories trusted as root
NOBODY = 65534


def test_trusted_dir_accepts_a_private_path_below_a_sticky_tmp(tmp_path: Path) -> None:
    from storlab.fileio import check_trusted_dir

    # pytest's basetemp lies below /tmp (sticky, world-writable): allowed above the end
    assert check_trusted_dir(tmp_path / "clusters" / "ceph") == tmp_path / "clusters" / "ceph"
    assert check_trusted_dir(tmp_path) == tmp_path


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's link needs root")
def test_trusted_dir_refuses_a_link_another_user_planted_in_a_sticky_dir(
        tmp_path: Path) -> None:
    from storlab.fileio import check_trusted_dir

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    # nobody's link `shared/clusters` -> a directory of root's (made here, then given to
    # nobody: pytest's base directory is 0700, so nobody itself could not reach it)
    os.symlink(mine, shared / "clusters")
    os.lchown(shared / "clusters", NOBODY, NOBODY)
    assert (shared / "clusters").lstat().st_uid == NOBODY
    with pytest.raises(StorlabError) as exc:
        check_trusted_dir(shared / "clusters" / "ceph", "cluster directory")
    msg = str(exc.value)
    assert "\n" not in msg and f"{shared / 'clusters'} (a symbolic link" in msg
    assert "uid 65534" in msg
    # the sticky directory alone, as a non-final component, is fine; as the last it is not
    check_trusted_dir(shared / "ceph")
    with pytest.raises(StorlabError, match="mode 1777"):
        check_trusted_dir(shared)


def test_trusted_dir_refuses_a_group_writable_component(tmp_path: Path) -> None:
    from storlab.fileio import check_trusted_dir

    mid = tmp_path / "mid"
    (mid / "base").mkdir(parents=True)
    os.chmod(mid, 0o775)
    with pytest.raises(StorlabError) as exc:
        check_trusted_dir(mid / "base" / "ceph")
    msg = str(exc.value)
    assert "\n" not in msg and f"{mid} (a directory" in msg and "mode 0775" in msg
    os.chmod(mid, 0o755)
    check_trusted_dir(mid / "base" / "ceph")
    # reached through a link of our own, the link's target is walked too
    os.symlink(mid, tmp_path / "alias")
    os.chmod(mid, 0o1777)  # sticky, but the last component of the real path
    with pytest.raises(StorlabError, match="mode 1777"):
        check_trusted_dir(tmp_path / "alias")


# ---------------------------------------------------------------- the kernel's way through a path
def test_walk_resolved_goes_where_the_kernel_goes(tmp_path: Path) -> None:
    """`..` after a link is the target's parent (as `open` takes it, not `abspath`), a
    relative target is read from the link's directory, and links chain: the answer is
    the real path, every entry met handed to the rule once."""
    from storlab.fileio import walk_resolved

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "c").mkdir()
    os.symlink("a/b", tmp_path / "rel")          # relative: from tmp_path
    os.symlink(tmp_path / "rel", tmp_path / "abs")  # absolute, to another link
    met: list[str] = []
    cases = {"rel/..": "a", "abs/../b": "a/b", "abs/../../c": "c", "rel/./": "a/b",
             "abs/x/y": "a/b/x/y"}  # a missing part ends the walk, the rest as written
    for given, want in cases.items():
        got = walk_resolved(tmp_path / given, lambda at, st, last: met.append(at))
        assert got == tmp_path / want, given
        if "x" not in given:
            assert os.path.realpath(tmp_path / given) == str(got)
    assert str(tmp_path / "rel") in met and str(tmp_path / "abs") in met
    with pytest.raises(FileNotFoundError):
        walk_resolved(tmp_path / "abs" / "x", lambda *_: None, missing_ok=False)


def test_walk_resolved_stops_a_link_loop_in_one_line(tmp_path: Path) -> None:
    from storlab.fileio import MAX_LINK_HOPS, walk_resolved

    os.symlink("loop", tmp_path / "loop")
    with pytest.raises(StorlabError) as exc:
        walk_resolved(tmp_path / "loop" / "f", lambda *_: None)
    msg = str(exc.value)
    assert "\n" not in msg and f"more than {MAX_LINK_HOPS} symbolic links" in msg
    assert str(tmp_path / "loop") in msg
    # a chain of exactly the cap resolves (the kernel's limit is the same)
    (tmp_path / "end").mkdir()
    prev = "end"
    for i in range(MAX_LINK_HOPS):
        os.symlink(prev, tmp_path / f"l{i}")
        prev = f"l{i}"
    assert walk_resolved(tmp_path / prev, lambda *_: None) == tmp_path / "end"
    os.symlink(prev, tmp_path / "one-more")
    with pytest.raises(StorlabError, match="more than"):
        walk_resolved(tmp_path / "one-more", lambda *_: None)


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's link needs root")
def test_a_foreign_link_before_dotdot_or_behind_our_own_link_is_refused(
        tmp_path: Path) -> None:
    """nobody's link met on the kernel's way: before a `..` (which `abspath` would erase)
    and inside the target of root's own link (never lstat'ed by a walk of the path as
    written). Both checks refuse in one line naming nobody's link; the real path passes."""
    from storlab.fileio import check_no_foreign_link, check_trusted_dir

    theirs = tmp_path / "theirs" / "sub"
    theirs.mkdir(parents=True)
    (theirs / "c.yaml").write_text("")
    (theirs.parent / "c.yaml").write_text("")
    link = tmp_path / "link"
    os.symlink(theirs, link)
    os.lchown(link, NOBODY, NOBODY)
    os.symlink(link, tmp_path / "rootlink")  # root's link -> nobody's link
    for given in (link / ".." / "c.yaml", tmp_path / "rootlink" / "c.yaml"):
        with pytest.raises(StorlabError) as exc:
            check_no_foreign_link(given)
        msg = str(exc.value)
        assert "\n" not in msg and f"reached through {link}, a symbolic link owned by " \
            "uid 65534" in msg, msg
    with pytest.raises(StorlabError) as exc:
        check_trusted_dir(tmp_path / "rootlink", "cluster directory")
    assert f"{link} (a symbolic link" in str(exc.value) and "uid 65534" in str(exc.value)
    assert check_no_foreign_link(theirs / "c.yaml") == theirs / "c.yaml"
    # our own links, chained and before `..`, pass and give the real path
    os.lchown(link, 0, 0)
    assert check_no_foreign_link(link / ".." / "c.yaml") == theirs.parent / "c.yaml"
    assert check_trusted_dir(tmp_path / "rootlink") == theirs


def test_trusted_dir_judges_the_directory_a_trailing_dotdot_ends_on(tmp_path: Path) -> None:
    """`shared/x/..` ends on the sticky, world-writable `shared`: the last directory, so
    refused, though it was met first as a middle one."""
    from storlab.fileio import check_trusted_dir

    shared = tmp_path / "shared"
    (shared / "x").mkdir(parents=True)
    os.chmod(shared, 0o1777)
    check_trusted_dir(shared / "x")
    with pytest.raises(StorlabError, match="mode 1777"):
        check_trusted_dir(shared / "x" / "..")


BILLION_LAUGHS = "vars:\n" + "".join(
    f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10) if i else ', '.join(['lol'] * 10)}]\n"
    for i in range(10))


def test_a_billion_laughs_campaign_is_one_line(tmp_path, storlab) -> None:
    """Ten levels of ten aliases (under 1 kB, 10^10 values expanded) hung `status`,
    `run` and `design` in the walks after the YAML load; now refused at the load."""
    (tmp_path / "c.yaml").write_text(
        "space: {factors: [{name: a, values: [1, 2]}]}\ndesign: {kind: full}\n"
        "runner: {type: command, options: {command: [echo, '{a}'], "
        "regex_metrics: ['(?P<n>\\d+)']}}\n" + BILLION_LAUGHS)
    (tmp_path / "s.yaml").write_text(BILLION_LAUGHS.replace("vars:", "x-junk:") + (
        "factors:\n  - {name: a, values: [1, 2]}\n  - {name: b, values: *l9}\n"))
    for args in (("status", tmp_path / "c.yaml"), ("run", tmp_path / "c.yaml"),
                 ("design", tmp_path / "s.yaml", "--kind", "full")):
        r = storlab(*args, timeout=60)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "aliases" in r.stderr, r.stderr


def test_aliases_of_a_normal_size_still_read(tmp_path) -> None:
    from storlab.fileio import read_yaml

    (tmp_path / "a.yaml").write_text(
        "base: &b {bs: 4k, depth: 8}\nx: {a: *b, depth: 16}\ny: [*b, *b]\n")
    assert read_yaml(tmp_path / "a.yaml") == {
        "base": {"bs": "4k", "depth": 8}, "x": {"a": {"bs": "4k", "depth": 8}, "depth": 16},
        "y": [{"bs": "4k", "depth": 8}] * 2}


def test_csv_cells_round_trip_verbatim(tmp_path: Path) -> None:
    """A5-4, decided (docs/guarantees-input.md): the CSV is storlab's data format, read back
    by its analyses; values starting with = + - @ are written as they are (no `'` prefix,
    which would change a level `-o noatime` and break the round trip), numbers stay numbers."""
    df = pd.DataFrame({"opt": ["=HYPERLINK(\"http://x\")", "-o noatime", "+1x", "@a"],
                       "y": [-3.5, 2.0, -0.25, 1e-9]})
    p = write_frame(df, tmp_path / "r.csv")
    back = read_table(p)
    assert back["opt"].tolist() == df["opt"].tolist()
    assert back["y"].tolist() == df["y"].tolist()


def test_cli_output_onto_a_link_to_a_set_id_file(tmp_path: Path, storlab: Any) -> None:
    """A5-11 through the program: `-o out.csv` where out.csv links to a 6777 file."""
    (tmp_path / "space.yaml").write_text(yaml.safe_dump({"factors": [
        {"name": "a", "kind": "integer", "values": [1, 2]}]}))
    mine = tmp_path / "mine"
    mine.write_text("x\n")
    os.chmod(mine, 0o6777)
    (tmp_path / "out.csv").symlink_to(mine)
    p = storlab("design", tmp_path / "space.yaml", "--kind", "full", "-o",
                tmp_path / "out.csv")
    assert p.returncode == 0, p.stderr
    st = (tmp_path / "out.csv").lstat()
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o7022 == 0
    assert mine.read_text() == "x\n" and stat.S_IMODE(mine.stat().st_mode) == 0o6777


# ------------------------------------------- writing where no other user can lead us

def test_atomic_write_renames_in_the_directory_it_opened(tmp_path: Path) -> None:
    """A7-3: the output's directory swapped for a link while the file is written (after
    any look at the path): the file lands in the directory opened at the start, never
    where the link leads (root's report.html replaced a file in a root-only directory)."""
    out, victim = tmp_path / "out", tmp_path / "victim"
    out.mkdir()
    victim.mkdir(mode=0o700)
    (victim / "report.html").write_text("ORIGINAL\n")
    with atomic_write(out / "report.html") as fh:
        fh.write("new\n")
        out.rename(tmp_path / "out.real")
        out.symlink_to(victim)
    assert (victim / "report.html").read_text() == "ORIGINAL\n"
    assert sorted(p.name for p in victim.iterdir()) == ["report.html"]
    assert (tmp_path / "out.real" / "report.html").read_text() == "new\n"
    assert _temps(tmp_path / "out.real") == []


def _nobody_dir() -> Path:
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="storlab-a73-", dir="/tmp"))
    top.chmod(0o755)
    (top / "theirs").mkdir()
    os.chown(top / "theirs", 65534, 65534)
    return top


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (another user's directory)")
def test_root_writes_no_output_into_a_directory_another_user_can_change(
        tmp_path: Path, storlab: Any) -> None:
    """As root, `-o` (and every output through `atomic_write`) into a directory another
    user owns is refused in one line naming the owner: that user could swap it for a link
    to a root-only directory between storlab's look and its write."""
    import shutil

    (tmp_path / "space.yaml").write_text(yaml.safe_dump({"factors": [
        {"name": "a", "kind": "integer", "values": [1, 2]}]}))
    top = _nobody_dir()
    try:
        p = storlab("design", tmp_path / "space.yaml", "--kind", "full", "-o",
                    top / "theirs" / "out.csv")
        assert p.returncode == 2, p.stdout + p.stderr
        err = p.stderr.strip()
        assert err.count("\n") == 0 and "owned by uid 65534" in err, err
        assert "run storlab as that user" in err, err
        assert list((top / "theirs").iterdir()) == []
        from storlab.fileio import write_in_dir  # `results --fio-json DIR` writes with it

        with pytest.raises(StorlabError, match="owned by uid 65534"):
            write_in_dir(top / "theirs" / "docs", "c1-r1.json", "{}")
        assert list((top / "theirs").iterdir()) == []
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the sticky-directory rule)")
def test_root_still_writes_into_a_sticky_directory(tmp_path: Path) -> None:
    """A sticky directory others may write (/tmp) is fine for an output: the file is made
    there under a fresh name (O_EXCL) and renamed through the held directory; a plain
    world-writable one is refused."""
    sticky, plain = tmp_path / "sticky", tmp_path / "plain"
    sticky.mkdir()
    sticky.chmod(0o1777)
    plain.mkdir()
    plain.chmod(0o777)
    write_text(sticky / "out.txt", "ok\n")
    assert (sticky / "out.txt").read_text() == "ok\n"
    with pytest.raises(StorlabError, match="mode 0777"):
        write_text(plain / "out.txt", "no\n")
    assert list(plain.iterdir()) == []

"""A known runner's program executes nothing but its own files (Landlock's execute rule,
entered inside the walls after bwrap's mounts): real fio, a real `storlab fio-server`,
real Python, real bwrap. Each attack runs twice in the same walls, with the rule (the
victim stays untouched, the exec gets EACCES) and without it (the control: written)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.runners import _sandbox
from storlab.campaign.runners._program import run_program
from storlab.campaign.runners._sandbox import (elf_interpreter, exec_missing, exec_ruleset,
                                               program_files)

from .test_fio_client_walls import _client, _serve, campaign, server_dir

STORLAB_FORKED = True
FIO = shutil.which("fio")
pytestmark = [
    pytest.mark.skipif(FIO is None, reason="fio not installed"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
    pytest.mark.skipif(exec_missing() is not None, reason=f"Landlock: {exec_missing()}"),
]


def _fio(d: Path, *opts: str, execs: list[str] | None, **kw: object) -> object:
    return run_program([str(FIO), "--name=x", "--filename=f", "--size=256k", "--bs=4k",
                        *opts, "--output-format=json"], cwd=d, timeout=60,
                       executables=execs, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("route", ["--exec_prerun", "--exec_postrun"])
def test_a_fio_option_that_runs_a_shell_gets_nothing_with_the_rule(tmp_path: Path,
                                                                   route: str) -> None:
    """fio's system(3) cannot start /bin/sh: no victim, fio's own job still runs. The same
    walls without the rule (what the runner gives a job that names the option) write it."""
    victim = tmp_path / "victim"
    out = _fio(tmp_path, "--rw=write", f"{route}=/usr/bin/touch {victim}", execs=[str(FIO)])
    assert out.exit_code == 0 and '"error" : 0' in out.stdout, out.stderr  # type: ignore[attr-defined]
    assert not victim.exists()
    out = _fio(tmp_path, "--rw=write", f"{route}=/usr/bin/touch {victim}", execs=None)
    assert out.exit_code == 0 and victim.exists(), out.stderr  # type: ignore[attr-defined]


def test_ioengine_exec_cannot_start_its_program(tmp_path: Path) -> None:
    """Neither its program nor the dynamic loader running it (`ld.so PROGRAM`: the loader
    may execute, the kernel opens it for fio itself; the filter refuses the execve)."""
    loader = elf_interpreter(str(FIO))
    assert loader is not None
    for program, args in (("/usr/bin/touch", "{}"), (loader, "/usr/bin/touch {}")):
        victim = tmp_path / f"victim-{len(args)}"
        opts = ("--ioengine=exec", f"--program={program}",
                f"--arguments={args.format(victim)}", "--runtime=300ms", "--time_based")
        _fio(tmp_path, *opts, execs=[str(FIO)])
        assert not victim.exists(), program
        _fio(tmp_path, *opts, execs=None)
        assert victim.exists(), program


def test_an_exec_gets_eacces_and_nothing_leaks_into_the_program(tmp_path: Path) -> None:
    """The program's execve of /bin/sh fails with EACCES (its own binary re-executes); the
    shim's descriptors (ruleset, environment) are closed; the environment arrives."""
    code = ("import os, errno\n"
            "print(sorted(os.listdir('/proc/self/fd')), os.environ['FOO'])\n"
            "try:\n os.execv('/bin/sh', ['sh', '-c', 'echo PWNED > victim'])\n"
            "except OSError as e:\n print('errno', errno.errorcode[e.errno])\n")
    out = run_program([sys.executable, "-c", code], cwd=tmp_path, timeout=60,
                      env={"FOO": "b a=r"}, executables=[sys.executable])
    assert out.exit_code == 0, out.stderr
    fds, rest = out.stdout.split("]", 1)
    assert fds == "['0', '1', '2', '3'" and rest.split() == ["b", "a=r", "errno", "EACCES"]
    assert not (tmp_path / "victim").exists()
    out = run_program([sys.executable, "-c", code], cwd=tmp_path, timeout=60,
                      env={"FOO": "x"}, executables=None)
    assert (tmp_path / "victim").read_text() == "PWNED\n", out.stderr


@pytest.mark.parametrize("engine", ["psync", "libaio", "io_uring"])
def test_fio_engines_load_their_libraries_under_the_rule(tmp_path: Path, engine: str) -> None:
    """Shared libraries and fio's engines are mapped, not executed: every engine runs."""
    out = _fio(tmp_path, "--rw=randwrite", f"--ioengine={engine}", "--iodepth=4",
               execs=[str(FIO)], io_uring=engine == "io_uring")
    assert out.exit_code == 0 and '"error" : 0' in out.stdout, out.stderr  # type: ignore[attr-defined]


@pytest.mark.skipif(os.geteuid() != 0, reason="the server drops root: needs root")
def test_a_client_job_on_the_walled_fio_server_starts_no_program(
        tmp_path: Path, storlab_argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """fio's protocol has no authentication: a client's `exec_prerun` reached a shell as
    the server's account. Now the shell does not start; the job's I/O runs. A server as
    users start one (root, no walls) is the control: the same job writes the victim."""
    srv = server_dir(tmp_path)
    victim = srv / "victim"
    job = tmp_path / "job.fio"
    # absolute names: the plain server runs in this process's directory, not srv
    job.write_text(f"[a]\nexec_prerun=/usr/bin/touch {victim}\n"
                   f"filename={srv / 'data'}\nsize=4k\nrw=write\n")
    with _serve([*storlab_argv, "fio-server", "--dir", str(srv)], walled=True) as server:
        out = _client(server, job)
        assert (srv / "data").exists(), out
    assert not victim.exists()
    monkeypatch.chdir(tmp_path)  # where the plain server writes its prerun.txt
    with _serve(["fio"]) as server:
        out = _client(server, job)
    assert victim.exists(), out


@pytest.mark.skipif(os.geteuid() != 0, reason="/dev writable takes allow_destructive as root")
@pytest.mark.parametrize("execs", [[sys.executable], None])
def test_the_pseudo_devices_open_when_dev_is_declared_writable(
        tmp_path: Path, execs: list[str] | None) -> None:
    """`directory: /dev` (allow_destructive) binds the host's /dev writable and `nodev`
    over the walls' own: perl, the rule's shim, died there ("Can't open /dev/null") and
    fio never ran. null, zero, urandom still open, with the rule and without."""
    code = ("open('/dev/null', 'w').write('x')\n"
            "print(len(open('/dev/zero', 'rb').read(4) + open('/dev/urandom', 'rb').read(4)))")
    out = run_program([sys.executable, "-c", code], cwd=tmp_path, timeout=60,
                      targets=["/dev"], allow_destructive=True, executables=execs)
    assert out.exit_code == 0 and out.stdout.strip() == "8", out.stderr


def test_the_files_allowed_are_the_binary_and_its_elf_interpreter() -> None:
    """PT_INTERP read from the file, as readelf reads it; the ruleset kept per set of
    files (the same descriptor for the same files)."""
    want = subprocess.run(["readelf", "-l", str(FIO)], capture_output=True, text=True
                          ).stdout.split("interpreter: ", 1)[1].split("]", 1)[0] \
        if shutil.which("readelf") else None
    got = elf_interpreter(str(FIO))
    assert got is not None and (want is None or got == want)
    files = program_files(str(FIO))
    assert files == (os.path.realpath(str(FIO)), os.path.realpath(got))
    assert elf_interpreter(__file__) is None
    a = exec_ruleset(files)
    kept = len(_sandbox._EXEC_RULESETS)
    b = exec_ruleset(files)
    try:  # the caller's own duplicates of the one ruleset kept
        assert a != b and len(_sandbox._EXEC_RULESETS) == kept
    finally:
        os.close(a)
        os.close(b)


def test_a_ruleset_returned_outlives_its_eviction(tmp_path: Path) -> None:
    """The descriptor returned is the caller's: rulesets for more sets of files than are
    kept evict and close the kept one, not the caller's (it was dup'ed under the lock)."""
    paths = []
    for i in range(_sandbox.EXEC_RULESETS_KEPT + 1):
        (tmp_path / f"f{i}").write_text("")
        paths.append(str(tmp_path / f"f{i}"))
    first = exec_ruleset((paths[0],))
    try:
        for p in paths[1:]:
            os.close(exec_ruleset((p,)))
        assert all(k[0][0] != paths[0] for k in _sandbox._EXEC_RULESETS)  # evicted
        assert "landlock-ruleset" in os.readlink(f"/proc/self/fd/{first}")
    finally:
        os.close(first)


def test_a_wrapper_script_gets_no_rule(tmp_path: Path) -> None:
    """A `#!` wrapper (a `fio:` script that execs the real fio) starts programs by design:
    it runs with no execute rule (the walls hold it as any program)."""
    script = tmp_path / "prog"
    script.write_text("#!/bin/sh\n/usr/bin/printf hi\n")
    script.chmod(0o755)
    assert program_files(str(script))[:2] == (str(script), os.path.realpath("/bin/sh"))
    out = run_program([str(script)], cwd=tmp_path, timeout=60, executables=[str(script)])
    assert out.exit_code == 0 and out.stdout == "hi", out.stderr


def test_status_says_what_the_program_may_execute(tmp_path: Path, storlab: Any) -> None:
    """One clause in the sandbox line: the rule, or why a job's fio may start programs."""
    plain = campaign(tmp_path / "a", {"rw": "write", "size": "64k"})
    out = storlab("status", plain).stdout
    assert "programs it may execute: itself only (Landlock" in out.replace("\n", " "), out
    prerun = campaign(tmp_path / "b", {"rw": "write", "size": "64k", "exec_prerun": "true"})
    out = storlab("status", prerun).stdout
    assert "programs it may execute: any (fio option exec_prerun" in out.replace("\n", " "), out
    # a factor that gives some configurations an engine running a program: no rule for
    # those runs (`FioRunner.run`), so the line does not say "itself only"
    spec = yaml.safe_load(plain.read_text())
    spec["space"]["factors"].append({"name": "ioengine", "kind": "categorical",
                                     "values": ["psync", "exec"]})
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    out = storlab("status", tmp_path / "c" / "campaign.yaml").stdout.replace("\n", " ")
    said = ("programs it may execute: any (fio option ioengine='exec' runs or loads code "
            "other than fio's engines, in some configurations)")
    assert said in out, out
    # an adaptive design: its configurations are not known before it runs, each level of
    # its factors is asked
    spec["design"] = {"kind": "tune", "budget": 12, "objectives": ["write_iops"]}
    (tmp_path / "c" / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    out = storlab("status", tmp_path / "c" / "campaign.yaml").stdout.replace("\n", " ")
    assert said in out, out
    # a `#!` wrapper as the campaign's fio: `wrap` gives it no rule
    wrapper = tmp_path / "fio-wrapper"
    wrapper.write_text(f"#!/bin/sh\nexec {FIO} \"$@\"\n")
    wrapper.chmod(0o755)
    spec = yaml.safe_load(plain.read_text())
    spec["runner"]["options"]["fio"] = str(wrapper)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    out = storlab("status", tmp_path / "d" / "campaign.yaml").stdout.replace("\n", " ")
    assert f"programs it may execute: any ({wrapper} is a #! script" in out, out


def _with_interp(src: str, dst: Path, interp: bytes) -> None:
    """A copy of the ELF `src` whose PT_INTERP names `interp` (shorter than the original)."""
    import struct

    b = bytearray(Path(src).read_bytes())
    phoff = struct.unpack_from("<Q", b, 32)[0]
    size, count = struct.unpack_from("<HH", b, 54)
    for i in range(count):
        e = phoff + i * size
        if struct.unpack_from("<I", b, e)[0] == 3:
            off = struct.unpack_from("<Q", b, e + 8)[0]  # p_offset
            n = struct.unpack_from("<Q", b, e + 32)[0]  # p_filesz
            assert len(interp) < n
            b[off:off + n] = interp + b"\0" * (n - len(interp))
    dst.write_bytes(bytes(b))
    dst.chmod(0o755)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_an_interpreter_that_is_a_fifo_or_a_device_is_refused_not_opened(
        tmp_path: Path, storlab: Any, kind: str) -> None:
    """A7-2: a campaign's own `fio:` ELF whose PT_INTERP names a FIFO it ships hung root's
    `storlab run` for ever in the preflight (the interpreter opened by path, blocking,
    outside the walls and before any time bound); a device there was opened as root. Now
    refused in one line, exit 2, before any run, and quickly."""
    import time

    _with_interp("/usr/bin/true", tmp_path / "myfio", b"interp.x")
    if kind == "fifo":
        os.mkfifo(tmp_path / "interp.x")
    else:
        (tmp_path / "interp.x").symlink_to("/dev/zero")
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump({
        "name": "interp", "seed": 1, "randomize": False,
        "space": {"factors": [{"name": "bs", "kind": "categorical", "values": ["4k", "8k"]}]},
        "design": {"configs": [{"bs": "4k"}]},
        "runner": {"type": "fio", "options": {"fio": str(tmp_path / "myfio")}}}))
    start = time.monotonic()
    p = storlab("run", tmp_path / "campaign.yaml", timeout=60)
    assert time.monotonic() - start < 30
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip()
    assert err.count("\n") == 0, err
    assert ("is a FIFO" if kind == "fifo" else "is a device") in err, err
    assert not (tmp_path / "campaign.db").exists()

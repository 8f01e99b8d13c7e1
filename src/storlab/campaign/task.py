"""One run as a self-contained, picklable task: what an executor ships to a worker (a local
process or a Dask worker on a load host). The worker runs the setup steps, the runner and
the teardown steps; the outcome goes back to the campaign process, the store's only writer."""

from __future__ import annotations

import os
import socket
import stat
import sys
import time
import traceback
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import StorlabError
from ..fileio import open_dir_beneath, remove_tree, within, write_fresh
from .runners import (Declared, ShellTemplateError, declared, make_runner, output_files,
                      render_argv, run_directory, run_program, shell_command,
                      system_writable, tail)
from .runners.base import RunResult
from .store import refuse_foreign_entry


#: The file that marks a run directory as storlab's; it holds the run's identity, so a run
#: done again clears only a directory it made itself.
RUN_MARK = ".storlab-run"


@dataclass
class StepSpec:
    """A setup/teardown step as plain data (argv template list, or a shell string)."""

    run: list[str] | str
    shell: bool = False
    timeout: float | None = None
    ignore_errors: bool = False
    system_writable: bool = False  # runs outside the sandbox (formats, mounts, sysctl)


@dataclass
class RunTask:
    key: str
    config: dict[str, Any]
    runner_type: str
    runner_options: dict[str, Any]
    values: dict[str, Any]  # factors + vars + bookkeeping, for the steps' templates
    workdir: str
    exclude: list[str] = field(default_factory=list)
    setup: list[StepSpec] = field(default_factory=list)
    teardown: list[StepSpec] = field(default_factory=list)
    timeout: float | None = None
    keep_scratch: bool = False
    writable: list[str] = field(default_factory=list)  # the campaign's `sandbox.writable`
    allow_destructive: bool = False  # the campaign's `sandbox.allow_destructive`
    network: bool = False  # the campaign's `sandbox.network`
    readable: list[str] = field(default_factory=list)  # the campaign's `sandbox.readable`
    sockets: list[str] = field(default_factory=list)  # the campaign's `sandbox.sockets`
    io_uring: bool = False  # the campaign's `sandbox.io_uring`
    unix_sockets: bool = False  # the campaign's `sandbox.unix_sockets`
    realtime: bool = False  # the campaign's `sandbox.realtime`
    lock_memory: bool = False  # the campaign's `sandbox.lock_memory`
    env_pass: list[str] = field(default_factory=list)  # the campaign's `sandbox.env_pass`
    #: The campaign's directory and scratch area: an existing file outside them opens in
    #: the sandbox only with `allow_destructive`.
    homes: list[str] = field(default_factory=list)
    output_dir: str | None = None  # the runs' whole stdout/stderr files, beside the store
    tag: str | None = None  # the run's identity (`run_tag`); default: its directory
    #: The run's directory lies in the campaign's own scratch area (inside its directory, no
    #: link leading out): one left there without storlab's mark (by an older storlab, or a
    #: killed attempt) is the campaign's, cleared and reused; elsewhere it is refused.
    own_scratch: bool = False
    #: (view, st_dev, st_ino) of the scratch area at the campaign's start (`scratch_view`:
    #: host, boot and mount namespace): seen the same way, a scratch area that leads
    #: elsewhere since (a link swapped in) is refused.
    scratch_id: tuple[str, int, int] | None = None
    #: (view, st_dev, st_ino) of the campaign's directory (`homes[0]`) at the campaign's
    #: start: seen the same way, one that leads elsewhere since (moved, a link put in its
    #: place) is refused before anything is made there (`open_scratch`).
    home_id: tuple[str, int, int] | None = None


@dataclass
class TaskOutcome:
    key: str
    result: RunResult
    host: str


def run_step(step: StepSpec, values: dict[str, Any], cwd: Path, timeout: float | None
             ) -> tuple[bool, str, int | None]:
    """Run one step; (succeeded, message, exit code). Values become whole argv elements
    (in a `sh -c SCRIPT` argv, quoted words of the script: `render_argv`); with `shell:
    true` they reach the shell through the environment (STORLAB_<NAME>), never as command
    text (see `shell_command`). It runs in the run's sandbox, opened for what the
    campaign declares (`sandbox.*`) and nothing of the runner's targets, unless declared
    `system_writable`."""
    env: dict[str, str] | None = None
    if step.shell:
        try:
            argv: list[str] | str
            argv, env = shell_command(str(step.run), values)
        except ShellTemplateError as exc:
            return False, f"step `{step.run}`: {exc}", None
    else:  # a `sh -c SCRIPT` step gets its values in the script as quoted words
        try:
            argv, env = render_argv(step.run, values)
        except ShellTemplateError as exc:
            return False, f"step `{' '.join(step.run)}`: {exc}", None
    with ExitStack() as stack:
        if step.system_writable:
            stack.enter_context(system_writable())
        out = run_program(argv, cwd=cwd, timeout=step.timeout or timeout, shell=step.shell,
                          env=env)
    shown = argv if isinstance(argv, str) else " ".join(argv)
    if out.timed_out:
        return False, f"step `{shown}` timed out\n{out.stderr}", out.exit_code
    if out.exit_code != 0:
        return False, f"step `{shown}` exited {out.exit_code}\n{out.stderr}", out.exit_code
    return True, "", 0


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def scratch_view() -> str:
    """Who sees the scratch area's (st_dev, st_ino) the same way: the host's name, the
    kernel's boot (`/proc/sys/kernel/random/boot_id`: device numbers change across boots,
    an NFS mount's when remounted) and the mount namespace (a container may share the
    host's name but not its mounts). A run seen another way does not compare them (a
    Dask worker elsewhere, a container) instead of refusing with a misleading message."""
    def read(how: Any) -> str:
        try:
            return str(how())
        except OSError:
            return "?"

    boot = read(lambda: Path("/proc/sys/kernel/random/boot_id").read_text().strip())
    return f"{socket.gethostname()} {boot} {read(lambda: os.readlink('/proc/self/ns/mnt'))}"


def identity(fd: int) -> tuple[str, int, int]:
    """(`scratch_view`, st_dev, st_ino) of the directory open as `fd`."""
    st = os.fstat(fd)
    return scratch_view(), st.st_dev, st.st_ino


#: A scratch area's mode: its owner's alone. The run directories in it are 0700 too, but
#: a run's directory is the root of its program's writable bind and the program is root
#: inside: it may `chmod 755 .` it (a setup step does, for a program that switches user),
#: and when storlab is killed before the run's end nothing puts it back (`_private`). The
#: scratch area above it, which no program can change (read-only inside), keeps it from
#: other users whatever its own mode. Inside the walls the scratch area shows as an empty
#: 0711 file system holding only the run's directory (`Walls.scratch_over`), so a program
#: that switches user (postgres, mysqld --user) still reaches its directory by path.
SCRATCH_MODE = 0o700


def _scratch_mode(fd: int) -> None:
    """The scratch area open as `fd`, storlab's own (made by it, or the campaign's):
    `SCRATCH_MODE` whatever the umask, through the descriptor."""
    try:
        st = os.fstat(fd)
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~0o077)
    except OSError:
        pass  # best effort: a filesystem without modes


def open_scratch(scratch: Path, home: str | None, home_id: tuple[str, int, int] | None = None
                 ) -> tuple[int | None, int]:
    """(the campaign's directory `home`, the scratch area), both open (O_DIRECTORY), the
    scratch area made when missing. Made and opened relative to `home`'s descriptor, never
    by path: `home` is opened once and, when `home_id` (its identity at the campaign's
    start) is seen the same way, must still be that directory, else StorlabError, one
    line, before anything is made (a campaign's directory swapped for a link to somebody's
    directory in the middle of a campaign had root make an empty `scratch/` there). The
    directories between are opened without following a link (`open_dir_beneath`); the
    scratch area itself may be a link the user set up (to a faster disk), followed, while
    one made here is opened without following. Without `home` (or a scratch area outside
    it), by path as named. The caller closes both."""
    if home is None or not within(scratch, home, strict=True):
        made = not scratch.exists()
        scratch.mkdir(mode=SCRATCH_MODE, parents=True, exist_ok=True)
        pfd = os.open(scratch, _DIR)
        if made:
            _scratch_mode(pfd)
        return None, pfd
    if home_id is None or home_id[0] != scratch_view():
        # nothing to hold it to (another host's view, say a Dask worker): made as named
        Path(home).mkdir(parents=True, exist_ok=True)
    hfd = os.open(home, _DIR)
    try:
        if home_id is not None and home_id[0] == scratch_view() and identity(hfd) != home_id:
            raise StorlabError(f"{home}: the campaign's directory leads to another directory "
                               "than at the campaign's start (moved, or a link put in its "
                               "place); refusing to make, use or delete run directories "
                               "there")
        parent = scratch.parent
        dfd = os.dup(hfd) if os.path.abspath(parent) == os.path.abspath(home) else \
            open_dir_beneath(home, parent, what="the scratch area", home_fd=hfd)
        try:
            try:  # as named: the user's own link to a faster disk is followed
                pfd = os.open(scratch.name, _DIR, dir_fd=dfd)
            except FileNotFoundError:
                try:
                    os.mkdir(scratch.name, SCRATCH_MODE, dir_fd=dfd)
                except FileExistsError:
                    pass
                pfd = os.open(scratch.name, _DIR | os.O_NOFOLLOW, dir_fd=dfd)
                _scratch_mode(pfd)
        finally:
            os.close(dfd)
    except BaseException:
        os.close(hfd)
        raise
    return hfd, pfd


def _marked(dfd: int, mark: bytes) -> bool:
    """Whether the directory `dfd` carries this run's mark (its identity, written when made)."""
    try:
        fd = os.open(RUN_MARK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return False
    try:
        return os.read(fd, len(mark) + 1) == mark
    except OSError:
        return False
    finally:
        os.close(fd)


def _ours(pfd: int, name: str, task: RunTask, mark: bytes) -> bool:
    """Whether the entry `name` in the scratch area (`pfd`) may be cleared for this run: a
    leftover of the campaign's own (in its own scratch area, a directory or a stray file),
    or elsewhere an empty directory or one with this run's mark. A link never is."""
    st = os.lstat(name, dir_fd=pfd)
    if stat.S_ISLNK(st.st_mode):
        return False
    if not stat.S_ISDIR(st.st_mode):
        return task.own_scratch
    if task.own_scratch:
        return True
    dfd = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=pfd)
    try:
        return not os.listdir(dfd) or _marked(dfd, mark)
    finally:
        os.close(dfd)


def execute_task(task: RunTask) -> TaskOutcome:
    """Setup, run, teardown in the run's own scratch directory, each program in the run's
    sandbox, its whole output appended to the run's files in `output_dir`. Never raises for
    a failed benchmark: the failure (with its stderr) is the outcome.

    storlab handles the run's directory only through descriptors: the scratch area is
    opened once (and must be the directory it was at the campaign's start,
    `RunTask.scratch_id`), the run's directory is made, cleared and removed relative to
    it, and the files storlab writes in it relative to the run directory's own descriptor
    (`run_directory`): a link a step swaps in for either is never followed."""
    started = time.time()
    workdir = Path(task.workdir)
    mark = (task.tag or str(workdir)).encode()  # which run made it: this one, or another's

    def failed(msg: str) -> TaskOutcome:
        return TaskOutcome(task.key, RunResult("failed", stderr=f"storlab: {msg}",
                                               started=started, ended=time.time()),
                           socket.gethostname())

    name = workdir.name
    home = task.homes[0] if task.homes else None
    try:
        # from the campaign's directory, still the one at the campaign's start
        hfd, pfd = open_scratch(workdir.parent, home, task.home_id)
    except StorlabError as exc:
        return failed(str(exc))
    except OSError as exc:
        return failed(f"{workdir.parent}: cannot open the scratch area "
                      f"({exc.strerror or exc})")
    with ExitStack() as stack:
        stack.callback(os.close, pfd)
        if hfd is not None:
            stack.callback(os.close, hfd)
        now = os.fstat(pfd)
        if (task.scratch_id is not None and task.scratch_id[0] == scratch_view()
                and (now.st_dev, now.st_ino) != tuple(task.scratch_id[1:])):
            return failed(f"{workdir.parent}: the scratch area leads to another directory "
                          "than at the campaign's start (a link put there meanwhile); "
                          "refusing to make, use or delete run directories there")
        if task.own_scratch:  # the campaign's own: its owner's alone (`SCRATCH_MODE`)
            _scratch_mode(pfd)
        try:
            if not _ours(pfd, name, task, mark):
                # not a directory this run made (a scratch link that reaches somebody's
                # directory, or another campaign's run there): never delete it, never run
                # in it
                return failed(f"{workdir} exists and is not a run directory this campaign "
                              f"made (no {RUN_MARK} of its own in it); refusing to delete or "
                              "use it")
            # left over by a killed attempt (or a stray file): cleared from the held parent
            if stat.S_ISDIR(os.lstat(name, dir_fd=pfd).st_mode):
                remove_tree(name, pfd)
                left = _left_over(pfd, name)
                if left is not None:  # an immutable file, a mount, a busy NFS file
                    return failed(f"{workdir}: left over by an earlier attempt and could "
                                  f"not be cleared ({left or 'the directory itself'} "
                                  "remains); remove it and run again")
            else:
                os.unlink(name, dir_fd=pfd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            return failed(f"{workdir}: cannot clear the run directory left there "
                          f"({exc.strerror or exc})")
        try:
            # 0700: a failed run's directory is kept, with copies of what its programs
            # read (as root): other users must not reach them, whatever their modes
            os.mkdir(name, 0o700, dir_fd=pfd)
            # the directory just made, not where a link swapped in meanwhile leads
            wfd = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=pfd)
        except OSError as exc:
            return failed(f"{workdir}: cannot make the run directory ({exc.strerror or exc})")
        stack.callback(os.close, wfd)
        write_fresh(workdir / RUN_MARK, mark, dir_fd=wfd)
        with ExitStack() as inner:
            inner.enter_context(declared(Declared(
                tuple(task.writable), task.allow_destructive, homes=tuple(task.homes),
                network=task.network, readable=tuple(task.readable),
                sockets=tuple(task.sockets), io_uring=task.io_uring,
                unix_sockets=task.unix_sockets, realtime=task.realtime,
                lock_memory=task.lock_memory,
                env_pass=tuple(task.env_pass)).holding(workdir, wfd)))
            inner.enter_context(run_directory(workdir, wfd, pfd))
            if task.output_dir is not None:
                out = Path(task.output_dir)
                # opened from the campaign's directory without following a link: a
                # directory link on the way (planted beforehand, or by a program when the
                # campaign's directory is declared writable) is refused, the run fails
                at = next((h for h in task.homes if out.is_relative_to(h)), out.parent)
                try:  # private as the store (0600): what a program printed, a secret too
                    dfd = open_dir_beneath(at, out, what="the runs' output directory",
                                           mode=0o700,  # from the one checked above
                                           home_fd=hfd if at == home else None)
                except StorlabError as exc:
                    return failed(str(exc))
                inner.callback(os.close, dfd)
                try:  # the directory held, as the preflight judged its name: ours still
                    refuse_foreign_entry(str(out), os.fstat(dfd), output=True)
                except StorlabError as exc:
                    return failed(str(exc))
                for suffix in ("stdout", "stderr"):  # a run done again starts them afresh
                    write_fresh(out / f"{task.key}.{suffix}", dir_fd=dfd,  # never via a link
                                mode=0o600)
                inner.enter_context(output_files(out / f"{task.key}.stdout",
                                                 out / f"{task.key}.stderr", dfd))
            try:
                result = _execute(task, workdir, started)
            finally:
                _private(wfd, workdir)
        if result.ok and not task.keep_scratch:
            # by name in the scratch area held open: a link swapped in for the run's
            # directory, or for the scratch area, is not followed (rmtree refuses a link)
            remove_tree(name, pfd)
    return TaskOutcome(task.key, result, socket.gethostname())


def _execute(task: RunTask, workdir: Path, started: float) -> RunResult:
    values = {**task.values, "workdir": str(workdir)}
    cfg = {k: v for k, v in task.config.items() if k not in task.exclude}
    runner: Any = None
    # the steps get what the campaign declares (`sandbox.*`, the run's directory) and
    # nothing of the runner's implicit targets: those open to the runner's own program
    # only (a step beside fio `directory: ~/.ssh` wrote all of ~/.ssh)
    made: Exception | None = None
    try:
        runner = make_runner(task.runner_type, task.runner_options)
    except Exception as exc:  # a runner bug or refusal fails this run, not the campaign
        made = exc
    result: RunResult | None = None
    for step in task.setup:
        ok, msg, code = run_step(step, values, workdir, task.timeout)
        if not ok and not step.ignore_errors:
            result = RunResult("failed", stderr=tail(f"setup: {msg}"), exit_code=code,
                               started=started, ended=time.time())
            break
    if result is None:
        try:
            if made is not None:
                raise made
            result = runner.run(cfg, workdir, task.timeout)
        except StorlabError as exc:  # a refusal: its one line
            result = RunResult("failed", stderr=f"storlab: {exc}", started=started,
                               ended=time.time())
        except Exception as exc:  # a runner bug fails this run, not the campaign
            result = RunResult("failed", stderr=tail(f"{type(exc).__name__}: {exc}\n"
                                                     f"{traceback.format_exc()}"),
                               started=started, ended=time.time())
    assert result is not None
    for step in task.teardown:
        ok, msg, code = run_step(step, values, workdir, task.timeout)
        if not ok and not step.ignore_errors:
            result.stderr = tail(f"{result.stderr}\nteardown: {msg}")
            if result.ok:  # the system may be left in an unknown state: do not trust it
                result.status = "failed"
                result.exit_code = code
    return result


def _private(wfd: int, workdir: Path) -> None:
    """The run's directory (held by `wfd`) put back to storlab's own, mode 0700, once its
    programs ended, ok or failed: a program is root inside and the directory is the root
    of its writable bind, so it could `chmod 755` (or `chown`) it, and a failed run's
    directory is kept, with copies of what the program read (root-only files), and a
    scratch area storlab did not make may be passable by others. Through the descriptor,
    never the name (a link swapped in is not followed)."""
    at = f"/proc/self/fd/{wfd}"
    try:
        st = os.fstat(wfd)
        if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
            os.chown(at, os.geteuid(), os.getegid())
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(at, 0o700)
    except OSError as exc:  # cannot happen to root on its own directory; said, not hidden
        print(f"storlab: warning: {workdir}: cannot make the run directory private again "
              f"({exc.strerror or exc})", file=sys.stderr)


def _left_over(pfd: int, name: str) -> str | None:
    """What remains of `name` in the directory `pfd` after clearing it (its first entry,
    or "" when empty), read without following a link; None when it is gone."""
    try:
        fd = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=pfd)
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    try:
        return next(iter(sorted(os.listdir(fd))), "")
    finally:
        os.close(fd)

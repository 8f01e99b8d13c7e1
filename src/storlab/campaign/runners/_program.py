"""Running one program for a runner: argv lists (never a shell unless asked), a timeout that
kills the whole process group, `{name}` substitution of values into argv elements, and
shell commands whose values arrive through the environment (`shell_command`)."""

from __future__ import annotations

import errno
import fcntl
import functools
import hashlib
import math
import os
import re
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._proc_lifetime import descendants, guard_child
from ...fileio import temporary_directory, write_fresh
from ...errors import CampaignError, ShellTemplateError, SubstitutionError  # re-exported
from . import _sandbox

#: How much of stderr a run keeps (the tail is where programs say what went wrong).
STDERR_TAIL = 4000

_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_.]*)\}")


def render_value(value: Any) -> str:
    """A configuration value as program text: 4096.0 -> "4096", True -> "1", numpy -> plain."""
    np = sys.modules.get("numpy")  # not imported: no value is one of its scalars
    if np is not None and isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)


def substitute(template: str, values: Mapping[str, Any]) -> str:
    """Replace each `{name}` in `template` by its value (`{{`/`}}` escape braces).

    The result is one string, used as one argv element: a value holding spaces or
    `; rm -rf x` stays one literal argument. Never use it to build shell text: shell
    steps get their values through the environment (`shell_command`).
    """

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        name = m.group(1)
        if name not in values:
            raise SubstitutionError(name)
        return render_value(values[name])

    return _FIELD.sub(repl, template)


def env_name(name: str) -> str:
    """The environment variable that carries `{name}` to a shell step: STORLAB_<NAME>."""
    return "STORLAB_" + re.sub(r"[^A-Za-z0-9_]", "_", name).upper()


def _literal(text: str, state: str) -> str:
    """`text` as one quoted shell word where it stands: single-quoted outside quotes, with
    `\\ $ ` "` escaped inside double quotes, the single quote closed around it inside one."""
    if state == '"':
        return re.sub(r'([\\$`"])', r"\\\1", text)
    quoted = shlex.quote(text)
    return f"'{quoted}'" if state == "'" else quoted


def shell_command(template: str, values: Mapping[str, Any], literal: bool = False
                  ) -> tuple[str, dict[str, str]]:
    """A `shell: true` template as (command text, environment).

    Values never become shell text: every value goes into an environment variable
    `STORLAB_<NAME>` and each `{name}` becomes a reference to it, quoted for where it
    stands: `"${STORLAB_NAME}"` outside quotes (one word, no globbing), `${STORLAB_NAME}`
    inside double quotes, `'"${STORLAB_NAME}"'` inside single quotes (the quote is closed
    around it). A shell expands a variable once and never reads its value as code, so
    `$(touch x)`, backquotes, quotes or newlines in a value reach the program as text.
    Placeholders in here-documents are refused (write `$STORLAB_NAME` there).

    With `literal` (the script of an argv `sh -c SCRIPT`, whose environment a wrapper such
    as `sudo`, `env -i` or `ssh` may drop) each value is written into the text as one
    quoted word instead (`_literal`); placeholders inside backquotes are then refused
    (their text is parsed twice: write `$( )`).
    """
    env: dict[str, str] = {}
    owner: dict[str, str] = {}
    for name, v in values.items():
        text = render_value(v)
        var = env_name(name)
        if "\0" in text:
            raise ShellTemplateError(f"value of {{{name}}} holds a NUL byte")
        if var in owner and env.get(var) != text:
            if name in template_names(template) or owner[var] in template_names(template):
                raise ShellTemplateError(f"{{{owner[var]}}} and {{{name}}} would share the "
                                         f"environment variable {var}; rename one")
            continue
        owner.setdefault(var, name)
        env[var] = text
    out: list[str] = []
    state = ""  # "" outside quotes, "'" or '"' inside them
    outer: list[tuple[str, int, str]] = []  # enclosing (state, depth, closer) of $( ) / ` `
    depth = 0  # open "(" inside the innermost command substitution
    heredoc = False
    i = 0
    while i < len(template):
        c = template[i]
        m = _FIELD.match(template, i)
        if m:
            if m.group(0) in ("{{", "}}"):
                out.append(m.group(0)[0])
            else:
                name = m.group(1)
                if name not in values:
                    raise SubstitutionError(name)
                if heredoc:
                    raise ShellTemplateError(
                        f"{{{name}}} in a here-document: write ${env_name(name)} there")
                if literal:
                    if any(o[2] == "`" for o in outer):
                        raise ShellTemplateError(
                            f"{{{name}}} inside backquotes in a sh -c script: write $( ) "
                            "instead")
                    out.append(_literal(env[env_name(name)], state))
                else:
                    ref = "${" + env_name(name) + "}"
                    out.append({"": f'"{ref}"', '"': ref, "'": f"'\"{ref}\"'"}[state])
            i = m.end()
            continue
        out.append(c)
        if state == "'":
            if c == "'":
                state = ""
        elif c == "\\" and i + 1 < len(template):  # an escaped character stays literal
            out.append(template[i + 1])
            i += 1
        elif c == "$" and template.startswith("$(", i):  # a command substitution: unquoted
            outer.append((state, depth, ")"))
            state, depth = "", 0
            out.append("(")
            i += 1
        elif c == "`":
            if outer and outer[-1][2] == "`" and state == "":
                state, depth, _ = outer.pop()
            else:
                outer.append((state, depth, "`"))
                state, depth = "", 0
        elif state == '"':
            if c == '"':
                state = ""
        elif c in "'\"":
            state = c
        elif c == "(":
            depth += 1
        elif c == ")":
            if depth:
                depth -= 1
            elif outer and outer[-1][2] == ")":
                state, depth, _ = outer.pop()
        elif c == "<" and template.startswith("<<", i) and "\n" in template[i:]:
            heredoc = True  # the body starts on the next line; placeholders there refused
        i += 1
    if state or outer:
        raise ShellTemplateError("unbalanced quotes or $( ) in the shell command")
    return "".join(out), env


def template_names(template: str) -> set[str]:
    """The `{name}` fields a template uses."""
    return {m.group(1) for m in _FIELD.finditer(template) if m.group(1)}


#: Programs whose `-c SCRIPT` argument is shell text (a wrapper before them, such as
#: `env`, `sudo` or `timeout 5`, changes nothing: the shell is found anywhere in argv).
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "posh", "yash"})


def shell_script_index(argv: Sequence[str]) -> int | None:
    """The position of the script in a `sh -c SCRIPT ...` argv (flags may combine: `-ec`,
    `-xc`, `-o pipefail -c`), or None when no shell reads a script from argv."""
    for i, a in enumerate(argv):
        if os.path.basename(a) not in SHELLS:
            continue
        j = i + 1
        while j < len(argv) and argv[j].startswith(("-", "+")) and argv[j] not in ("-", "--"):
            if argv[j] in ("-o", "+o", "-O", "+O"):  # takes a value: `-o pipefail`
                j += 2
                continue
            if "c" in argv[j][1:] and not argv[j].startswith("--"):
                return j + 1 if j + 1 < len(argv) else None
            j += 1
        return None
    return None


def render_argv(templates: Sequence[str], values: Mapping[str, Any]
                ) -> tuple[list[str], dict[str, str]]:
    """An argv template rendered: each `{name}` becomes a whole argv element's text, except
    in the script of `sh -c SCRIPT` (`bash -c`, `sudo sh -ec`, ...), where a value would be
    read as shell code: there it is written as one quoted word (`shell_command` with
    `literal`: a wrapper such as `sudo` or `env -i` drops the environment a reference would
    need). The values' environment is returned too, for scripts that read `$STORLAB_NAME`."""
    k = shell_script_index(templates)
    env: dict[str, str] = {}
    out = []
    for i, t in enumerate(templates):
        if i == k:
            text, env = shell_command(t, values, literal=True)
            out.append(text)
        else:
            out.append(substitute(t, values))
    return out, env


#: storlab's own environment variables: a factor or var whose variable (`env_name`) would
#: be one of these is refused when the campaign loads (a factor `Run` was overwritten by
#: the run's tag STORLAB_RUN in every shell step).
RESERVED_ENV = frozenset({"STORLAB_RUN", "STORLAB_CLUSTER_DIR", "STORLAB_CLUSTER_LOG_CAP"})


def reserved_env_clash(names: Sequence[str] | set[str]) -> tuple[str, str] | None:
    """The first (name, variable) whose variable is one of storlab's own, or None."""
    for n in sorted(names):
        if env_name(n) in RESERVED_ENV:
            return n, env_name(n)
    return None


#: Environment variable naming the run a program was started for (`run_identity`).
#: Inherited by everything the program starts, so a resume can find and kill what a killed
#: storlab left running for its runs, even processes that left the process group.
TAG_ENV = "STORLAB_RUN"


def campaign_identity(store: str | os.PathLike[str]) -> str:
    """A campaign's identity in its runs' tags: a digest of its store's real path. Fixed
    length, so no campaign's identity is a prefix of another's (a path prefix was: a
    campaign in a parent directory killed a live run of another nested below it)."""
    real = os.path.realpath(os.fspath(store)).encode("utf-8", "surrogateescape")
    return hashlib.sha256(real).hexdigest()[:20]


def run_identity(store: str | os.PathLike[str], key: str) -> str:
    """The tag of run `key` of the campaign whose store is `store`: `<identity>/<key>`."""
    return f"{campaign_identity(store)}/{key}"
_RUN_TAG: ContextVar[str | None] = ContextVar("storlab_run_tag", default=None)

#: The run's directory as made: (its path, a descriptor opened at its creation).
_RUN_DIR: ContextVar[tuple[str, int] | None] = ContextVar("storlab_run_dir", default=None)


_SCRATCH: ContextVar[tuple[str, int] | None] = ContextVar("storlab_scratch", default=None)


@contextmanager
def run_directory(path: str | os.PathLike[str], dir_fd: int,
                  scratch_fd: int | None = None) -> Iterator[None]:
    """Files runners write inside (`write_run_file`) directly in `path` are made in the
    directory `dir_fd` (opened when storlab made it), never where a link a step swapped in
    for `path` (or for a directory above it) leads; `scratch_fd`: the scratch area (the
    directory above `path`) as storlab holds it (`held_scratch`)."""
    token = _RUN_DIR.set((os.path.abspath(path), dir_fd))
    stoken = _SCRATCH.set(None if scratch_fd is None else
                          (os.path.dirname(os.path.abspath(path)), scratch_fd))
    try:
        yield
    finally:
        _SCRATCH.reset(stoken)
        _RUN_DIR.reset(token)


def make_run_dir(path: str | os.PathLike[str]) -> None:
    """The run's directory, for a runner about to use it: made by the campaign beneath
    its held directory (`run_directory`) when it runs the task, so nothing is made here
    then (a `mkdir(parents=True)` by path would follow a link swapped in meanwhile for
    the campaign's directory and make `scratch/<run>` wherever it leads); made by path
    only for a runner used on its own (no campaign holding it)."""
    got = _RUN_DIR.get()
    if got is not None and os.path.abspath(path) == got[0]:
        return
    Path(path).mkdir(parents=True, exist_ok=True)


def held_scratch() -> tuple[str, int] | None:
    """(path, descriptor) of the scratch area the running run's directory lies in, opened
    once when the run started (a runner writes beside the runs from it, never by path)."""
    return _SCRATCH.get()


def write_run_file(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """`fileio.write_fresh(path, data)` for a file a runner writes for its program (a job
    file, a config); made relative to the run directory's descriptor (`run_directory`)
    when `path` lies directly in it."""
    got = _RUN_DIR.get()
    p = Path(path)
    if got is not None and os.path.abspath(p.parent) == got[0]:
        return write_fresh(p, data, dir_fd=got[1])
    return write_fresh(p, data)


def read_run_file(path: str | os.PathLike[str]) -> bytes:
    """The regular file `path` a runner's program wrote in the run directory, opened
    without following a link (relative to the run directory's descriptor,
    `run_directory`, when `path` lies directly in it); OSError otherwise."""
    got = _RUN_DIR.get()
    p = Path(path)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    if got is not None and os.path.abspath(p.parent) == got[0]:
        fd = os.open(p.name, flags, dir_fd=got[1])
    else:
        fd = os.open(p, flags)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{p} is not a regular file")
        return fh.read()


@contextmanager
def run_tag(tag: str) -> Iterator[None]:
    """Programs started inside carry `STORLAB_RUN=tag` in their environment."""
    token = _RUN_TAG.set(tag)
    try:
        yield
    finally:
        _RUN_TAG.reset(token)


#: How much of stdout a run keeps in the store (and hands its runner to parse): a fio JSON
#: document is far smaller; a program that prints more has its whole stream in the run's
#: output file beside the store, and only this tail in memory and in the store.
STDOUT_TAIL = 16 << 20

_STREAMS: ContextVar[tuple[str, str, int | None] | None] = ContextVar("storlab_streams",
                                                                     default=None)


@contextmanager
def output_files(stdout: str | os.PathLike[str], stderr: str | os.PathLike[str],
                 dir_fd: int | None = None) -> Iterator[None]:
    """Programs started inside append their whole stdout and stderr to these files (each
    after a header line naming the program); without, to anonymous temporary files. With
    `dir_fd` (the files' directory, opened without following links), the files are opened
    there by name, never through a directory link planted since."""
    token = _STREAMS.set((os.fspath(stdout), os.fspath(stderr), dir_fd))
    try:
        yield
    finally:
        _STREAMS.reset(token)


@dataclass
class ProcOutcome:
    """What one program run gave back: the tails of its output (`STDOUT_TAIL`,
    `STDERR_TAIL`), whether it was cut (`stdout_cut`), and where the whole of it is."""

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    started: float
    ended: float
    stdout_cut: bool = False
    stdout_file: str | None = None


def _open_stream(path: str | None, header: bytes, dir_fd: int | None = None
                 ) -> tuple[Any, int]:
    """(binary file, offset where this program's output starts)."""
    if path is None:
        return tempfile.TemporaryFile(), 0
    try:
        fd = os.open(os.path.basename(path) if dir_fd is not None else path,
                     os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
                     | os.O_NONBLOCK, 0o600, dir_fd=dir_fd)  # private, as the store
    except OSError as exc:  # a link a step put at the name (ELOOP), or no room: one line
        raise CampaignError(f"{path}: cannot open the run's output file ({exc.strerror}); "
                            "refusing to write it") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        # a FIFO, a device or a hard link a step put at the name: not storlab's output file
        os.close(fd)
        raise CampaignError(f"{path}: the run's output file is no longer a regular file of "
                            "its own (a step replaced it); refusing to write it")
    if st.st_uid != os.geteuid():
        # somebody's file put at the name: its owner would read what the program prints
        # next (a root-only file the program read in the walls)
        os.close(fd)
        raise CampaignError(f"{path}: the run's output file is not storlab's own (owner uid "
                            f"{st.st_uid}); refusing to write it")
    if st.st_mode & 0o077:  # made readable by a step, or by an older storlab: private again
        os.fchmod(fd, 0o600)
    os.set_blocking(fd, True)
    fh = os.fdopen(fd, "a+b")
    fh.write(header)
    fh.flush()
    return fh, fh.tell()


#: How long the copy of a program's streams goes on once it ended (a process it left
#: behind outside a sandbox may hold the pipe open): what it writes later is not kept.
STREAM_GRACE = 2.0


class _Pump(threading.Thread):
    """Copies a program's stdout and stderr pipes into its stream files (spliced in the
    kernel: the bytes never enter Python), so the program holds pipes, never storlab's
    files: a `fchmod(1, 0o777)` or `fsetxattr` inside changes a pipe, not the run's
    record. The program blocks while the copy lags (nothing piles up in memory)."""

    def __init__(self, pairs: Sequence[tuple[int, int]]) -> None:
        super().__init__(daemon=True, name="storlab-streams")
        self.pairs = dict(pairs)  # read end -> file descriptor (at its end, no O_APPEND)
        self.deadline: float | None = None
        self.plain: set[int] = set()  # files splice refused: copied through memory
        for r, f in self.pairs.items():
            os.set_blocking(r, False)
            os.set_blocking(f, True)
            os.set_inheritable(r, False)
            flags = fcntl.fcntl(f, fcntl.F_GETFL)
            # splice refuses an O_APPEND file; one writer (this thread) appends at the end
            fcntl.fcntl(f, fcntl.F_SETFL, flags & ~os.O_APPEND)
            os.lseek(f, 0, os.SEEK_END)

    def run(self) -> None:
        poller = select.poll()
        for r in self.pairs:
            poller.register(r, select.POLLIN | select.POLLHUP | select.POLLERR)
        live = set(self.pairs)
        while live and (self.deadline is None or time.monotonic() < self.deadline):
            for r, _ in poller.poll(100):
                try:
                    more = _copy_some(r, self.pairs[r], self.plain)
                except OSError:  # the file cannot take more (ENOSPC): the rest is read and
                    more = self.pairs[r] >= 0  # dropped, so the program never blocks on
                    self.pairs[r] = -1  # its pipe (the pipe itself failing: its end)
                if not more:
                    poller.unregister(r)
                    live.discard(r)

    def finish(self) -> None:
        """Wait for the copy to reach the pipes' end (at most `STREAM_GRACE` more), then
        close the read ends."""
        self.deadline = time.monotonic() + STREAM_GRACE
        self.join()
        for r in self.pairs:
            os.close(r)


#: What one `_copy_some` call copies at most before its caller looks at its deadline
#: again (a writer that keeps the pipe full would hold it otherwise).
COPY_ROUND = 16 << 20


def _copy_some(r: int, f: int, plain: set[int] | None = None) -> bool:
    """Copy what pipe `r` holds now (at most `COPY_ROUND` bytes) into file `f` (-1: read
    and drop it); False at its end. `plain`: the files splice refused (EINVAL: a file
    system without it, an O_APPEND file), copied through memory; a file refused is added.
    An error writing `f` is raised."""
    plain = set() if plain is None else plain
    copied = 0
    while copied < COPY_ROUND:
        try:
            if f < 0:
                n = len(os.read(r, 1 << 20))
            elif f in plain:
                data = os.read(r, 1 << 20)
                n = len(data)
                view = memoryview(data)
                while view:
                    view = view[os.write(f, view):]
            else:
                try:
                    n = os.splice(r, f, 1 << 20, flags=getattr(os, "SPLICE_F_NONBLOCK", 2))
                except OSError as exc:
                    if exc.errno != errno.EINVAL:
                        raise
                    plain.add(f)
                    continue
        except BlockingIOError:  # the pipe is empty for now
            return True
        if n == 0:
            return False
        copied += n
    return True


def _read_tail(fh: Any, start: int, limit: int) -> tuple[str, bool]:
    """The last `limit` bytes written after `start`, as text; and whether more was written."""
    end = fh.seek(0, os.SEEK_END)
    start = min(start, end)  # the program truncated its own stream (/proc/self/fd/1)
    begin = max(start, end - limit)
    fh.seek(begin)
    return fh.read(end - begin).decode("utf-8", "replace"), begin > start


#: The operator's variables a run's program and steps get, by name (and every `LC_*`):
#: the rest of storlab's environment (tokens, cloud keys, PYTHONPATH, LD_PRELOAD) stays
#: out. CEPH_CONF: the cluster the ceph runner's fio rbd engine reaches (a path it sets).
#: TMPDIR is then pointed at the run's directory by the sandbox.
PROGRAM_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ",
               "TMPDIR", "CEPH_CONF")


def program_environment(env: Mapping[str, Any] | None = None) -> dict[str, str]:
    """A program's environment: storlab's own `PROGRAM_ENV` and `LC_*` variables and those
    the campaign names (`sandbox.env_pass`, as the run declared them), then `env` (the
    campaign's `env:`, the factor values `STORLAB_<NAME>`) over them."""
    named = {*PROGRAM_ENV, *_sandbox.current().env_pass}
    out = {k: v for k, v in os.environ.items() if k in named or k.startswith("LC_")}
    out.update({k: str(v) for k, v in (env or {}).items()})
    return out


def run_program(argv: Sequence[str] | str, *, cwd: str | os.PathLike[str] | None = None,
                timeout: float | None = None, env: Mapping[str, str] | None = None,
                shell: bool = False, stdin_text: str | None = None,
                targets: Sequence[str] = (), allow_destructive: bool = False,
                network: bool = False, unix_sockets: bool = False,
                io_uring: bool = False, ports: Sequence[int] = (),
                executables: Sequence[str] | None = None) -> ProcOutcome:
    """Run `argv` (a list; a string only with `shell=True`) inside its sandbox and collect
    its output.

    The sandbox (`_sandbox.wrap`) opens `cwd` and the declared `targets` (the runner's; the
    campaign's own declarations come from `_sandbox.declared`), and shares the host's
    network when the runner says the program needs it (`network`, TCP to and on `ports`
    only unless the campaign declares `sandbox.network`; `unix_sockets`,
    `io_uring`: it makes Unix sockets, io_uring rings of its own); everything else is
    read-only, and every process of the program dies when its first one ends, on a timeout,
    or with storlab. stdout and stderr stream to files (`output_files`), never into memory:
    the outcome holds their tails. The child gets its own session so a terminal Ctrl-C
    reaches storlab only (it stops cleanly after the current run), and a guard process
    (`_proc_lifetime.guard_child`) kills it when storlab dies, also when it runs unsandboxed.
    It carries the run's tag (`run_tag`). `executables`: the only programs it may execute
    (`_sandbox.wrap`; a known runner's program: itself), None for any.
    """
    if shell and not isinstance(argv, str):
        argv = " ".join(shlex.quote(a) for a in argv)
    if not shell and isinstance(argv, str):
        raise TypeError("argv must be a list unless shell=True")
    program = ["/bin/sh", "-c", argv] if isinstance(argv, str) else list(argv)
    full_env = program_environment(env)
    tag = _RUN_TAG.get()
    if tag:
        full_env[TAG_ENV] = tag
    started = time.time()
    if not shell:  # a missing program is told as before, not as bwrap's exit 1
        exe = program[0] if os.sep in program[0] else shutil.which(
            program[0], path=full_env.get("PATH", os.defpath))
        if exe is not None and cwd is not None:
            exe = os.path.join(os.fspath(cwd), exe)
        if exe is None or not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            return ProcOutcome("", f"cannot start {argv!r}: no such executable program",
                               None, False, started, time.time())
    try:
        wrapped, walls = _sandbox.wrap(program, os.fspath(cwd) if cwd is not None else None,
                                       targets, allow_destructive, full_env, network,
                                       unix_sockets, io_uring, ports, executables)
    except CampaignError as exc:
        return ProcOutcome("", f"storlab: {exc}", None, False, started, time.time())
    except OSError as exc:  # the walls could not open what they bind (EMFILE): one line
        return ProcOutcome("", f"storlab: cannot build the sandbox of {program[0]}: {exc}",
                           None, False, started, time.time())
    # bwrap's own environment: fixed, and the run's tag (leftovers are found by it)
    outside = {**_sandbox.BWRAP_ENV_OUTSIDE, **({TAG_ENV: tag} if tag else {})}
    paths = _STREAMS.get() or (None, None, None)
    shown = (" ".join(program) if not shell else argv).encode("utf-8", "replace")
    head = b"\n=== storlab: " + shown[:500] + b" ===\n"
    try:
        out_f, out_at = _open_stream(paths[0], head, paths[2])
        err_f, err_at = _open_stream(paths[1], head, paths[2])
    except BaseException:
        if walls is not None:  # the descriptors the walls hold, released
            walls.close()
        raise
    with out_f, err_f:
        # inside the walls the program writes pipes, copied into the files here
        # (`_Pump`); outside them it writes the files themselves (it could fchmod
        # anything anyway), so what it leaves running keeps writing after the step
        pipes = [os.pipe2(os.O_CLOEXEC), os.pipe2(os.O_CLOEXEC)] if walls else []
        pump: _Pump | None = None
        proc: subprocess.Popen[bytes] | None = None
        try:
            if walls is not None and (why := _sandbox.landlock_refused()):
                return ProcOutcome("", f"storlab: cannot start {program[0]} in its sandbox: "
                                   f"Landlock: {why}; refusing to run it without",
                                   None, False, started, time.time())
            ruleset = walls.landlock() if walls else None
            # bwrap starts in / (its `--chdir` puts the program in the run's directory as
            # bound): no path to the run's directory is followed outside the walls
            proc = subprocess.Popen(wrapped, cwd="/" if walls else cwd,
                                    pass_fds=walls.all_fds if walls else (),
                                    env=outside if walls else full_env,
                                    stdin=subprocess.PIPE if stdin_text is not None else
                                    subprocess.DEVNULL,
                                    stdout=pipes[0][1] if pipes else out_f,
                                    stderr=pipes[1][1] if pipes else err_f,
                                    start_new_session=True,
                                    preexec_fn=functools.partial(
                                        _start_child, os.getpid(), ruleset,
                                        walls is not None and not walls.lock_memory))
        except CampaignError as exc:  # the kernel cannot hold it to its TCP ports
            return ProcOutcome("", f"storlab: cannot start {program[0]} in its sandbox: {exc}",
                               None, False, started, time.time())
        except OSError as exc:  # program missing or not executable: a failed run, not a crash
            return ProcOutcome("", f"cannot start {argv!r}: {exc}", None, False, started,
                               time.time())
        except subprocess.SubprocessError:  # `_start_child` raised: never run unconfined
            return ProcOutcome("", f"storlab: cannot start {program[0]} in its sandbox: the "
                               "child could not set up its guard or enter the Landlock "
                               "domain (no_new_privs, landlock_restrict_self); refusing to "
                               "run it without", None, False, started, time.time())
        finally:  # bwrap holds what it binds (the descriptors it was given) from here on
            if walls is not None:
                walls.close()
            for _, w in pipes:  # the program's ends: the copy sees the end when it ends
                os.close(w)
            if proc is not None and pipes:
                try:
                    pump = _Pump([(pipes[0][0], out_f.fileno()),
                                  (pipes[1][0], err_f.fileno())])
                    pump.start()
                except BaseException:  # no copy: the program is not left unwaited
                    pump = None
                    _kill_group(proc)
                    proc.wait()
                    raise
                finally:
                    if pump is None:
                        for r, _ in pipes:
                            os.close(r)
            else:
                for r, _ in pipes:
                    os.close(r)
        assert proc is not None
        timed_out = False
        try:
            if stdin_text is not None:
                assert proc.stdin is not None
                try:
                    proc.stdin.write(stdin_text.encode())
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
            # Only the program's own end counts: the pipes are drained for at most
            # STREAM_GRACE after it, so a detached child that keeps stdout open cannot
            # hold the run past its timeout.
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            proc.wait()
        except BaseException:  # KeyboardInterrupt (second Ctrl-C) or a kill: leave no orphan
            _kill_group(proc)
            proc.wait()
            if pump is not None:
                pump.finish()
            raise
        ended = time.time()
        if pump is not None:
            pump.finish()
        out, cut = _read_tail(out_f, out_at, STDOUT_TAIL)
        err, _ = _read_tail(err_f, err_at, STDERR_TAIL * 4)
    if walls is not None and proc.returncode != 0:
        err += sandbox_hint(err, out[:4096] + "\n" + out[-4096:])  # fio: errors, then JSON
    if cut:
        err += (f"\nstorlab: stdout was longer than {STDOUT_TAIL >> 20} MiB; kept its tail"
                + (f" (whole stream: {paths[0]})" if paths[0] else ""))
    return ProcOutcome(out, err, proc.returncode, timed_out, started, ended, cut, paths[0])


#: What a program's error says when the sandbox refused it, and what the user can declare.
_SANDBOX_HINTS = (
    (re.compile(r"Read-only file system"),
     "the sandbox keeps everything read-only but the run's directory (TMPDIR points there) "
     "and the places the campaign declares: declare a directory in sandbox.writable"),
    (re.compile(r"No such file or directory|not found|cannot open|No module named"),
     "the sandbox shows /usr, /etc, the campaign's directory and the program's own "
     "directory; a file elsewhere (a script under /home or /srv, a home's dot-files, an "
     "editable install's sources) is shown with sandbox.readable (outside the campaign's "
     "directory with sandbox.allow_destructive: true, or copy it into the campaign)"),
    (re.compile(r"func=(?:ioprio_set|nice),|set niceness|failed to set pid \d+'s policy|"
                r"sched_setscheduler|setpriority"),
     "programs cannot raise their CPU or I/O priority (real-time scheduling, a negative "
     "nice value, fio prioclass=1: CAP_SYS_NICE) unless the campaign declares "
     "sandbox.realtime: true"),
    (re.compile(r"\bmlock(?:all)?\b|memlock", re.I),
     "programs cannot lock more memory than RLIMIT_MEMLOCK (mlock, fio lockmem: "
     "CAP_IPC_LOCK) unless the campaign declares sandbox.lock_memory: true"),
    (re.compile(r"name resolution|Name or service not known|Network is unreachable"
                r"|Connection refused"),
     "programs get a network of their own (loopback only) unless the campaign declares "
     "sandbox.network: true (a Unix socket: sandbox.sockets)"),
)
#: An EPERM, and the words before it (on its line and the few before: a Python traceback
#: names the call above its last line) that say what the sandbox refused: a Unix socket
#: made (the seccomp filter), a connect (an abstract socket outside: Landlock), an io_uring
#: ring (fio: `error=... io_uring.c ... Operation not permitted`). Another EPERM (mount,
#: chmod of a set-ID bit, ptrace) gets no hint: those name nothing a campaign can declare.
_EPERM = re.compile(r"Operation not permitted|\bEPERM\b")
_EPERM_CAUSES = re.compile(r"(?P<ring>io_uring|IORING)|(?P<prio>func=io commit,|func=io_u error,|"
                           r"io_u error on file)|(?P<made>socketpair|socket\(|"
                           r"socket\.socket|create socket|socket:|AF_UNIX|SOCK_STREAM)|"
                           r"(?P<connect>\bconnect\b)", re.I)
_EPERM_HINTS = {
    "made": "programs get EPERM making a Unix socket: name the sockets outside to reach in "
            "sandbox.sockets, or declare sandbox.unix_sockets: true for sockets of the "
            "program's own (multiprocessing's forkserver, Manager, Listener)",
    "connect": "programs reach no Unix socket outside but those named in sandbox.sockets "
               "(an abstract one outside: none)",
    "prio": "an I/O refused with EPERM: a real-time I/O priority needs CAP_SYS_NICE (fio "
            "prioclass=1, or cmdprio_percentage/cmdprio_bssplit without cmdprio_class=2: "
            "fio's default there is the real-time class): set cmdprio_class=2, or declare "
            "sandbox.realtime: true",
    "ring": "programs get EPERM for an io_uring ring unless the campaign declares "
            "sandbox.io_uring: true (fio's io_uring engines have one)",
}


def _eperm_hints(said: str) -> list[str]:
    """The `_EPERM_HINTS` for what each EPERM in `said` followed (the last cause named on
    its line or the three before, at most 300 characters back)."""
    out: list[str] = []
    for m in _EPERM.finditer(said):
        start = m.start()
        for _ in range(4):
            start = max(said.rfind("\n", 0, start), 0)
        end = said.find("\n", m.end())
        causes = list(_EPERM_CAUSES.finditer(said[max(start, m.start() - 300):
                                                  end if end >= 0 else len(said)]))
        if causes:
            text = _EPERM_HINTS[str(causes[-1].lastgroup)]
            if text not in out:
                out.append(text)
    return out


def _start_child(parent: int, ruleset: int | None, clamp_memlock: bool = False) -> None:
    """The child's `preexec_fn`: the guard (`guard_child`), the hard RLIMIT_MEMLOCK down
    to the soft one when the program does not keep CAP_IPC_LOCK (`clamp_memlock`), then,
    for a sandboxed program, the Landlock scopes (`_sandbox.enter_landlock`; it raises
    when the kernel refuses: Popen then fails and the program does not run)."""
    guard_child(parent)
    if clamp_memlock:
        _sandbox.clamp_memlock()
    if ruleset is not None:
        _sandbox.enter_landlock(ruleset)


def sandbox_hint(stderr: str, stdout: str = "") -> str:
    """A line naming what the campaign can declare, when a failed program's error reads
    like the sandbox's walls (fio's own read-only hint says more: not repeated). An EPERM
    is looked for in the end of `stdout` too (fio reports a refused ring there)."""
    if "error=Read-only file system" in stderr:
        return ""
    texts = [text for pattern, text in _SANDBOX_HINTS if pattern.search(stderr)]
    return "".join(f"\nstorlab: if this is the sandbox: {text}"
                   for text in [*texts, *_eperm_hints(stderr + "\n" + stdout)])


def ask_program(argv: Sequence[str], timeout: float = 30) -> ProcOutcome:
    """A question storlab asks a program before any run (`fio --parse-only`, `fio
    --version`, `sysbench --help`), in a sandbox of its own with nothing declared: the
    program is the campaign's to choose (a `fio:` path, fio's `external:` engine, which
    `--parse-only` loads), so its answer runs with no more rights than its runs."""
    token = _STREAMS.set(None)  # asked during a run: not into that run's output files
    try:
        with temporary_directory("storlab-ask-") as tmp, \
                _sandbox.declared(_sandbox.Declared()):
            return run_program(list(argv), cwd=tmp, timeout=timeout,
                               executables=[argv[0]])
    finally:
        _STREAMS.reset(token)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """Kill the program, its process group and every descendant: fio's job processes
    leave the group (they call setsid), so the group alone would leave them running."""
    victims = descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def tail(text: str, n: int = STDERR_TAIL) -> str:
    """The last `n` characters of `text`."""
    return text if len(text) <= n else text[-n:]

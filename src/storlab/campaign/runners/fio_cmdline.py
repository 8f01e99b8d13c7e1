"""fio's options as fio reads them, and the command line storlab hands it: option names
(abbreviations, command-line-only options, names the installed fio does not know), values
fio would read differently (comments, blanks, `$` expansion, sizes against times),
`extra_args` read as fio's getopt does, an existing job file read into plain options, and
one run's options, argv and (client/server mode) job file."""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..spec import CampaignError
from ._program import ask_program, render_value, write_run_file
from ...fileio import within
from ...units import fio_value

#: Engines whose target is not a local file (no default scratch directory for them).
REMOTE_ENGINES = {"rbd", "rados", "http", "net", "netsplice", "nfs", "libcufile", "nbd"}

#: fio options that name the files a job opens (and may create or overwrite).
TARGET_OPTIONS = ("filename", "directory", "filename_format", "opendir")
#: fio options that name one file fio writes as given (an I/O log, fio's own output).
WRITTEN_FILES = ("write_iolog", "output")
#: fio options whose value is a prefix: fio writes `<prefix>_bw.<jobnum>.log` and the like.
LOG_PREFIXES = ("write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log")
#: fio's command-line options (`fio --help`, fio 3.33): not job options; they belong in
#: `extra_args`, where fio reads them before the job (as runner options or factors they
#: would land after `--name` on fio's command line).
COMMAND_LINE_ONLY = frozenset((
    "debug", "parse-only", "merge-blktrace-only", "output", "bandwidth-log", "minimal",
    "output-format", "terse-version", "version", "help", "cpuclock-test", "crctest",
    "cmdhelp", "enghelp", "showcmd", "eta", "eta-newline", "eta-interval",
    "status-interval", "readonly", "section", "alloc-size", "warnings-fatal", "max-jobs",
    "server", "daemonize", "client", "remote-config", "idle-prof", "inflate-log",
    "trigger-file", "trigger-timeout", "trigger", "trigger-remote", "aux-path",
    "append-terse", "latency-log"))
#: fio options that name files fio reads and puts into what it writes or sends (a
#: pattern's quoted 'file' parts) or replays (an I/O log): `fio_guard.loaded_files`.
LOADED_FILES = ("buffer_pattern", "verify_pattern", "read_iolog")
#: Names whose abbreviations fio would also accept and storlab refuses.
GUARDED = (*TARGET_OPTIONS, "name", *WRITTEN_FILES, *LOG_PREFIXES, *LOADED_FILES)
_OPTION_NAME = re.compile(r"[a-z][a-z0-9_-]*")
_UNKNOWN = re.compile(r"unrecognized option '--([^'=]+)|option '--([^'=]+)[^']*' is ambiguous")
#: The tokens fio expands in a `filename_format`.
TOKENS = re.compile(r"\$(jobname|jobnum|filenum|clientuid)", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SECTION = re.compile(r"^\[([^\]]*)\]$")

#: fio options whose value is a time: a trailing m is minutes there ("runtime=1.5m"), not
#: mebibytes, so their values never go through the size conversion.
TIME_OPTIONS = frozenset({
    "runtime", "ramp_time", "startdelay", "thinktime", "thinktime_spin", "thinktime_iotime",
    "latency_target", "latency_window", "max_latency", "steadystate_duration",
    "steadystate_ramp_time", "ss_dur", "ss_ramp", "job_start_clock_id", "flow_sleep",
    "rate_cycle"})


def _as_fio(name: str, value: str) -> str:
    """`fio_value` for sizes; time-valued options as given."""
    return value if name in TIME_OPTIONS else fio_value(value)


class FioSettings(Protocol):
    """What a fio runner fixes for every run (`FioRunner`), as the guard reads it."""

    fio: str
    job_name: str
    clients: list[str]
    extra_args: list[str]
    allow_destructive: bool
    options: dict[str, Any]

    def system_fio(self) -> bool: ...


def job_options(job: FioSettings, config: Mapping[str, Any], workdir: Path,
                check: bool = True) -> dict[str, str]:
    """The fio options of one run: fixed, then the configuration's, then defaults.
    With `check`, names and values fio would read differently are refused."""
    # fio_value: fio's default mode reads "4KiB" as 4000 bytes; storlab (and the
    # analysis of these runs) reads 4096, so such values reach fio as bytes.
    opts = {k: _as_fio(k, render_value(v)) for k, v in job.options.items() if v is not None}
    opts.update({k: _as_fio(k, render_value(v)) for k, v in config.items() if v is not None})
    if check:
        for k, v in opts.items():
            check_option(k, v, jobfile=bool(job.clients), fio=job.fio)
    engine = opts.get("ioengine", "")
    if not {"filename", "directory", "filename_format"} & opts.keys() \
            and engine not in REMOTE_ENGINES:
        opts["directory"] = str(workdir)  # the run's own scratch directory
    opts.setdefault("group_reporting", "1")
    return opts


def given_options(job: FioSettings, opts: Mapping[str, str] | None = None
                  ) -> list[tuple[str, str]]:
    """(name, value) of every option the job's fio reads: `extra_args` (before the job,
    inherited by it), then `opts` (default: the runner's own options)."""
    return [*parse_extra_args(job.extra_args),
            *(job.options if opts is None else opts).items()]


#: The names fio reads a net engine's protocol from (`proto` is `protocol`'s alias).
PROTOCOL_OPTIONS = ("protocol", "proto")
#: The net engines that take `protocol=unix`: their Unix socket's path is `filename` or,
#: fio copying it there when no `filename` is given, `hostname`.
UNIX_NET_ENGINES = frozenset({"net", "netsplice"})


def unix_net(given: Sequence[tuple[str, str]]) -> bool:
    """Whether these options (`given_options`) make a net engine speak over a Unix socket
    (`protocol=unix` or its alias `proto=unix`)."""
    return bool({str(v) for k, v in given if k == "ioengine"} & UNIX_NET_ENGINES) and \
        any(k in PROTOCOL_OPTIONS and str(v).strip() == "unix" for k, v in given)


def check_option_names(job: FioSettings, opts: Mapping[str, str],
                       checked: set[frozenset[str]]) -> None:
    """Refuse option names the installed fio does not know (a typo would make fio
    fail every run, or worse, be read as an abbreviation of another option): fio's own
    parser decides (`fio --parse-only`), once per set of names (`checked`: the sets
    already asked). Skipped when fio is not installed here (the runs then report fio's own
    error)."""
    names = frozenset(opts)
    if names in checked:
        return
    checked.add(names)
    for k in opts:
        if not _OPTION_NAME.fullmatch(k):
            raise CampaignError(f"fio option name {k!r} is not a fio option name")
    exe = shutil.which(job.fio)
    if exe is None:
        return
    argv = [exe, "--parse-only", f"--name={job.job_name}",
            # no option that names a file: parsing must not touch any
            *(f"--{k}={v}" for k, v in opts.items() if k not in GUARDED)]
    from ._sandbox import program_files

    program_files(exe)  # a FIFO or device as fio or its interpreter: refused before any run
    p = ask_program(argv)  # in the sandbox: an `external:` engine is loaded to parse
    if p.timed_out:
        return
    if "not loadable" in p.stderr:  # an engine missing here may exist on the run hosts
        return
    m = _UNKNOWN.search(p.stderr)
    if m:
        hint = re.search(r"Did you mean (\S+)\?", p.stderr)
        raise CampaignError(f"fio option {m.group(1) or m.group(2)!r} is not an option of "
                            f"{exe} ({_fio_version(exe)})"
                            + (f"; did you mean {hint.group(1)!r}?" if hint else ""))


def argv(job: FioSettings, opts: Mapping[str, str], jobfile: Path | None = None) -> list[str]:
    """fio's command line: options as `--key=value` argv elements (no shell), or a
    job file for client/server mode (fio sends job files to its servers)."""
    base = [job.fio, "--output-format=json+", *job.extra_args]
    if jobfile is not None:
        out = list(base)
        for c in job.clients:
            out += [f"--client={c}", str(jobfile)]
        return out
    return [*base, f"--name={job.job_name}", *(f"--{k}={v}" for k, v in opts.items())]


def write_jobfile(job: FioSettings, opts: Mapping[str, str], path: Path) -> Path:
    """The job file of client/server mode (`[job_name]`, one `key=value` a line) at `path`."""
    lines = [f"[{job.job_name}]"]
    for k, v in opts.items():
        if "\n" in v or "\n" in k:
            raise CampaignError(f"fio option {k!r} has a newline in its value")
        lines.append(f"{k}={v}")
    return write_run_file(path, "\n".join(lines) + "\n")  # a step may have left a link


_VERSIONS: dict[str, str] = {}


def _fio_version(exe: str) -> str:
    if exe not in _VERSIONS:
        p = ask_program([exe, "--version"])
        out = "" if p.timed_out or p.exit_code != 0 else p.stdout.strip()
        _VERSIONS[exe] = out or "version unknown"
    return _VERSIONS[exe]


def _abbreviated(name: str) -> tuple[str, ...]:
    """The guarded options `name` abbreviates (fio accepts unambiguous abbreviations on
    its command line), none when it is one or an option of its own (`direct`: an exact
    name wins over an abbreviation)."""
    if name in GUARDED:
        return ()
    hits = tuple(t for t in GUARDED if name and t.startswith(name))
    if hits and exact_fio_option(name):
        return ()
    return hits


def target_option(name: str) -> tuple[str, ...]:
    """The target options a name stands for: itself, or every one it abbreviates."""
    if name in TARGET_OPTIONS:
        return (name,)
    return tuple(t for t in _abbreviated(name) if t in TARGET_OPTIONS)


@functools.cache
def exact_fio_option(name: str) -> bool:
    """Whether `name` is an option of fio in its own right (fio 3.33: only `direct` among
    the prefixes of the target options); the installed fio is asked as well."""
    if name in ("direct",):
        return True
    exe = shutil.which("fio")
    if exe is None or not _OPTION_NAME.fullmatch(name):
        return False
    p = ask_program([exe, f"--cmdhelp={name}"])
    return bool(re.search(rf"^\s*{re.escape(name)}\s*:", p.stdout, re.MULTILINE))


#: Options of fio 3.33's engines that a packaged fio may lack (built as plugins it cannot
#: load here: http, nfs, libhdfs, gfapi...), so fio's help does not list them, while
#: storlab's checks read them by name (`fio_guard.HOST_OPTIONS`, `fio_guard._NAMED_BY`):
#: taken as full names, and their prefixes refused, whatever the installed fio lists.
UNLISTED_READ = frozenset(("hostname", "http_host", "namenode", "brick", "uri", "nfs_url"))
_HELP_ENTRY = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*:", re.MULTILINE)
_HELP_ALIAS = re.compile(r"^\s*alias\s*:\s*(\S+)\s*$", re.MULTILINE)


@functools.cache
def _fio_options(exe: str) -> frozenset[str]:
    """The installed fio's own option names (`fio --cmdhelp=all`), asked once per process.
    CampaignError when it lists none (it could not be asked, or timed out): nothing to
    tell a full name from an abbreviation by, so no name passes, and the answer is not
    kept (the next name asks again)."""
    p = ask_program([exe, "--cmdhelp=all"])
    names = frozenset() if p.timed_out else frozenset(_HELP_ENTRY.findall(p.stdout))
    if not names:
        said = (p.stderr.strip().splitlines() or ["timed out" if p.timed_out else
                                                   "no output"])[-1][:200]
        raise CampaignError(f"{exe} --cmdhelp=all listed no option names ({said}), so "
                            "storlab cannot tell an option's full name from an "
                            "abbreviation fio would take")
    return names


@functools.cache
def _engine_options(exe: str) -> dict[str, frozenset[str]]:
    """Each engine's option names (`fio --enghelp=ENGINE`, for every engine `fio
    --enghelp` lists), asked once per process and only when a name is not one of fio's
    own options. Aliases are not listed there: `_exact_in_fio` asks for them."""
    engines: dict[str, frozenset[str]] = {}
    p = ask_program([exe, "--enghelp"])
    listed = [] if p.timed_out else [ln.strip() for ln in p.stdout.splitlines()[1:]]
    for e in listed:
        if not _OPTION_NAME.fullmatch(e):
            continue
        q = ask_program([exe, f"--enghelp={e}"])
        if not q.timed_out:
            engines[e] = frozenset(_HELP_ENTRY.findall(q.stdout))
    return engines


def _help_names(text: str) -> set[str]:
    """The name and aliases of the option fio's help shows, unless fio says it shows only
    the closest match (the name asked is then no option of its own)."""
    if "closest match" in text:
        return set()
    return set(_HELP_ENTRY.findall(text.split("\n\n")[0])[:1]) | set(_HELP_ALIAS.findall(text))


@functools.cache
def _exact_in_fio(exe: str, name: str) -> bool:
    """Whether `name` is an option of the installed fio or an alias fio lists for one
    (`fio --cmdhelp=NAME`; `fio --enghelp=ENGINE,NAME` for the engines with an option
    that starts with `name`, as an alias does here: `proto` of `protocol`; an engine's
    alias of another spelling is refused, which fails closed)."""
    if name in _fio_options(exe):
        return True
    p = ask_program([exe, f"--cmdhelp={name}"])
    if not p.timed_out and name in _help_names(p.stdout):
        return True
    engines = _engine_options(exe)
    if any(name in o for o in engines.values()):
        return True
    for e, opts in engines.items():
        if not any(o.startswith(name) for o in opts):
            continue
        q = ask_program([exe, f"--enghelp={e},{name}"])
        if not q.timed_out and name in _help_names(q.stdout):
            return True
    return False


def full_option_name(name: str, fio: str = "fio") -> str | None:
    """Why `name` is refused as a fio option name, or None: fio takes any unique prefix
    of an option's name (getopt_long_only; `por` is `port`), and storlab's checks read
    options by their full names, so every name given to fio must be one of the option
    names or an alias that the fio the runs start lists (`fio`, the runner's `fio:` as
    given: a name on PATH or a path; fio's command-line options in `extra_args` too; the
    system's fio when that one lists no names). Not checked when `fio` resolves to no
    program (no run can start fio then)."""
    if name in COMMAND_LINE_ONLY:
        return None
    exe = shutil.which(str(fio))
    if exe is None:
        return None
    try:
        _fio_options(exe)
    except CampaignError as exc:
        # A runner's `fio:` that lists no names is no fio (a campaign's stand-in: what it
        # reads is its own business) or a broken one: judged by the system's fio (found
        # in the system's directories, not on a PATH a link may have been swapped on),
        # whose reading storlab's checks follow; with none to ask, nothing passes.
        system = shutil.which("fio", path="/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                                          "/usr/bin:/sbin:/bin")
        if system is None or system == exe:
            return str(exc)
        try:
            _fio_options(system)
        except CampaignError:
            return str(exc)
        exe = system
    if name in UNLISTED_READ or (_OPTION_NAME.fullmatch(name) and _exact_in_fio(exe, name)):
        return None
    known = _fio_options(exe).union(*_engine_options(exe).values(), COMMAND_LINE_ONLY,
                                    UNLISTED_READ)
    hits = sorted(k for k in known if name and k.startswith(name))
    if len(hits) == 1:
        return (f"fio would read {name!r} as an abbreviation of {hits[0]!r}; write the "
                f"option's full name {hits[0]!r}")
    if hits:
        return (f"fio would read {name!r} as an abbreviation of one of "
                f"{', '.join(repr(h) for h in hits[:8])}{' ...' if len(hits) > 8 else ''}; "
                "write the option's full name")
    import difflib

    near = difflib.get_close_matches(name, sorted(known), 1)
    return (f"{name!r} is not the full name of an option of {exe} (storlab checks options "
            "by their full names, as fio lists them in --cmdhelp and --enghelp)"
            + (f"; did you mean {near[0]!r}?" if near else ""))


def check_option(name: str, value: str, jobfile: bool, where: str = "fio option",
                 fio: str = "fio") -> None:
    """Refuse a name or value that fio would read differently from what storlab checks
    (`fio`: the runner's fio, whose option names are the full names)."""
    label = f"{where} {name}={value!r}"
    if name == "name" and where != "extra_args":
        raise CampaignError(f"{label}: 'name' starts another fio job; use the runner option "
                            "job_name")
    if name in COMMAND_LINE_ONLY and where != "extra_args":
        raise CampaignError(f"{label}: {name!r} is one of fio's command-line options, not a "
                            "job option; put it in extra_args (--name=value)")
    if _abbreviated(name):
        raise CampaignError(f"{label}: fio would read {name!r} as an abbreviation of "
                            f"{' or '.join(_abbreviated(name))}; write the option's full name")
    why = full_option_name(name, fio)
    if why:
        raise CampaignError(f"{label}: {why}")
    if _CONTROL.search(value):
        raise CampaignError(f"{label}: control characters (newline, tab...) are refused: "
                            "fio would not read the value as written")
    if name in GUARDED or jobfile:
        if ";" in value or "#" in value:
            raise CampaignError(f"{label}: fio reads ';' and '#' as the start of a comment "
                                "and would cut the value there; refused")
    if name in GUARDED:
        if value != value.strip() or re.search(r"\s:|:\s", value):
            raise CampaignError(f"{label}: blanks at the start or end of a name are refused "
                                "(fio strips some of them)")
    plain = TOKENS.sub("", value) if name == "filename_format" else value
    if jobfile and "$" in plain:
        raise CampaignError(f"{label}: fio expands '$' (environment variables, $ncpus...) "
                            "in job files; refused in client mode")


def parse_extra_args(args: Sequence[str]) -> list[tuple[str, str]]:
    """(name, value) of the options in `extra_args`, read as fio's getopt_long_only reads
    them (`-x`/`--x`, `=value` or the next argument). Job files (bare arguments) are
    refused: storlab could not check what they name."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-") or a in ("-", "--"):
            raise CampaignError(f"fio extra_args: {a!r} is not an option (job files and "
                                "bare values are refused: write --name=value, and put job "
                                "options in the runner options)")
        name, eq, value = a.lstrip("-").partition("=")
        if not eq and (name in GUARDED or _abbreviated(name)):
            if i + 1 >= len(args):
                raise CampaignError(f"fio extra_args: {a!r} needs a value")
            value = args[i + 1]
            i += 1
        for bad in ("client", "server", "remote-config", "daemonize"):
            if name and bad.startswith(name) and len(name) > 1:
                raise CampaignError(f"fio extra_args: {a!r}: client/server mode is set with "
                                    "the runner option clients")
        out.append((name, value))
        i += 1
    return out


def split_names(value: str) -> list[str]:
    """fio's ':'-separated list (a '\\:' is a literal ':'; empty entries are skipped)."""
    parts = value.replace("\\:", "\0").split(":")
    return [p.replace("\0", ":") for p in parts if p]


def read_job_file(path: str | Path, home: str | Path | None = None, fio: str = "fio"
                  ) -> dict[str, str]:
    """The options of an existing fio job file, as storlab's base job: `[global]` first,
    then its one job section (which wins). Read as fio reads it: blank lines and lines
    starting with ';' or '#' skipped, a value cut at ';' or '#', blanks around names and
    values stripped, a bare option (`time_based`) set to 1. Refused, naming the file and
    line: several job sections (storlab runs one job per run), `include` (a file storlab
    would not see), fio's command-line options, `name`, and anything fio would expand or
    read differently on a command line (`$` variables, control characters...). With `home`
    (the campaign's directory), the file opened must lie inside it, links followed (what
    was opened is checked, not the name): storlab, often root, would otherwise read
    somebody's file through a link the campaign planted and show its lines in its errors
    and its options in the store."""
    p = Path(path)
    # O_PATH: what the name leads to is looked at before it is opened for reading, so a
    # directory, a FIFO or a device (a watchdog, a tape) is refused, never opened
    try:
        pfd = os.open(p, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        raise CampaignError(f"fio job_file {p}: cannot read it ({exc.strerror or exc})"
                            ) from None
    try:
        if not stat.S_ISREG(os.fstat(pfd).st_mode):
            raise CampaignError(f"fio job_file {p}: not a regular file")
        if home is not None:
            real, top = os.readlink(f"/proc/self/fd/{pfd}"), os.path.realpath(home)
            if not within(real, top, strict=True):
                raise CampaignError(f"fio job_file {p}: leads outside the campaign's "
                                    f"directory {top} (to {real}); storlab reads a job file "
                                    "only inside it: copy the file there")
        try:  # the very file checked, through its descriptor
            fd = os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                text = fh.read().decode("utf-8")
        except OSError as exc:
            raise CampaignError(f"fio job_file {p}: cannot read it ({exc.strerror or exc})"
                                ) from None
        except UnicodeDecodeError:
            raise CampaignError(f"fio job_file {p}: not UTF-8 text") from None
    finally:
        os.close(pfd)
    sections: dict[str, dict[str, str]] = {}
    jobs: list[str] = []
    current: dict[str, str] | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        where = f"fio job_file {p}, line {lineno}"
        if not line or line[0] in ";#":
            continue
        m = _SECTION.match(line)
        if m:
            name = m.group(1).strip()
            if name != "global":
                jobs.append(name)
                if len(jobs) > 1:
                    raise CampaignError(f"{where}: a second job [{name}] (after [{jobs[0]}]):"
                                        " storlab runs one fio job per run; keep one job "
                                        "section and share options through [global]")
            current = sections.setdefault(name, {})
            continue
        if line.startswith("include ") or line == "include":
            raise CampaignError(f"{where}: 'include' is refused: storlab checks the options "
                                "it reads, so put them in this file")
        if current is None:
            raise CampaignError(f"{where}: option {line!r} before any [section]")
        key, eq, value = line.partition("=")
        key = key.strip()
        value = re.split(r"[;#]", value, maxsplit=1)[0].strip() if eq else "1"
        if not _OPTION_NAME.fullmatch(key):
            raise CampaignError(f"{where}: {key!r} is not a fio option name")
        check_option(key, value, jobfile=True, where=where, fio=fio)
        current[key] = value
    if not sections:
        raise CampaignError(f"fio job_file {p}: no [global] or job section")
    return {**sections.get("global", {}), **(sections[jobs[0]] if jobs else {})}


"""The paths a fio job may open, resolved as fio resolves them (`filename`, `directory`,
`filename_format`, `opendir`, its logs and written files, in every order fio may join them),
and the refusal, before a run, of a destructive one: a block or character device, a socket
or FIFO, an existing file outside the campaign's scratch area, a hard-linked file. These are
early, friendly errors; the sandbox (`_sandbox.py`) is the guarantee."""

from __future__ import annotations

import glob
import itertools
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..spec import CampaignError
from .fio_cmdline import (LOG_PREFIXES, TARGET_OPTIONS, TOKENS, WRITTEN_FILES, FioSettings,
                          given_options, split_names, target_option, unix_net)
from ...fileio import within

#: fio's default file name when no `filename` is given.
DEFAULT_FORMAT = "$jobname.$jobnum.$filenum"
#: How many existing paths a wildcard target (filename_format) or an opendir tree may
#: match before storlab stops looking and refuses (bounded work at preflight).
MAX_MATCHES = 10000
#: How deep a tree fio's `opendir` names may be for storlab to check it.
MAX_OPENDIR_DEPTH = 256
#: Harmless sinks and sources fio may name outside the scratch area.
HARMLESS = ("/dev/null", "/dev/zero")


@dataclass(frozen=True)
class Candidate:
    """A path fio may open: `path` (absolute; a glob pattern when `pattern`), the value it
    came from, whether it was relative to fio's working directory, and for an `opendir`
    the `directory` entries fio prefixes to the files it finds there."""

    path: str
    pattern: bool
    given: str
    opendir: bool = False
    relative: bool = False
    dirs: tuple[str, ...] = ()
    own: str = ""  # with fio's default naming, the job name: `<own>.<n>.<m>` files are fio's
    option: str = "filename_format"  # what a pattern came from, for the message


def candidates(job: FioSettings, opts: Mapping[str, str], workdir: Path) -> list[Candidate]:
    """Every path fio may open for these job options plus `extra_args`, a superset of
    what fio does (the order of options changes fio's joining, so every order is
    assumed): each `filename` entry (':'-separated, '\\:' escapes) in fio's working
    directory and under each `directory` entry (fio joins `directory/filename` even for
    an absolute filename); without `filename`, `filename_format` (default
    `$jobname.$jobnum.$filenum`, tokens case-insensitive) the same way with the numbers
    and `$clientuid` as wildcards; the regular files under `opendir`, as themselves and
    under each `directory`. Options given on the command line before the job
    (`extra_args`) are inherited by the job, so they count too."""
    values: dict[str, list[str]] = {k: [] for k in (*TARGET_OPTIONS, *WRITTEN_FILES,
                                                    *LOG_PREFIXES)}
    jobnames = {job.job_name}
    for k, v in given_options(job, opts):
        if k == "name":
            jobnames.add(v)
        for t in target_option(k):
            values[t].append(v)
        if k in WRITTEN_FILES or k in LOG_PREFIXES:
            values[k].append(v)
    dirs = [d for v in values["directory"] for d in split_names(v)]
    bases = [(str(workdir), str(workdir))] + [(d, _join(workdir, d)) for d in dirs]
    out: list[Candidate] = []

    def under_all(name: str, pattern: bool, own: str = "") -> None:
        # A job file (client mode) is sorted by fio: `directory` always applies there;
        # on the command line it applies only to names given after it.
        if not (job.clients and dirs):
            out.append(Candidate(_join(workdir, name), pattern, name,
                                 relative=not Path(name).is_absolute(), own=own))
        out.extend(Candidate(_join(b, name, always=True), pattern, name,
                             relative=not os.path.isabs(given), own=own)
                   for given, b in bases[1:])

    for v in values["filename"]:
        for name in split_names(v):
            under_all(name, False)
    formats = list(values["filename_format"])
    if not values["filename"]:
        formats.append(DEFAULT_FORMAT)
    for f in formats:
        # fio's own naming for this job: `<job_name>.<jobnum>.<filenum>` files
        own = f.lower() == DEFAULT_FORMAT.lower() and jobnames == {job.job_name}
        under_all(_format_glob(f, jobnames), True, job.job_name if own else "")
    for k in LOG_PREFIXES:  # `<prefix>_<kind>.<jobnum>.log` in fio's working directory
        out.extend(Candidate(_join(workdir, glob.escape(v)) + "_*.log", True, v,
                             relative=not os.path.isabs(v), option=k)
                   for v in values[k])
    for k in WRITTEN_FILES:  # written as named, in fio's working directory
        out.extend(Candidate(_join(workdir, v), False, v,
                             relative=not os.path.isabs(v)) for v in values[k])
    # a net engine's Unix socket: fio takes its path from `hostname` when no `filename`
    # is given, connects there (or, listening, removes what is there and binds), relative
    # to its working directory
    if unix_net(given_options(job, opts)):
        for v in (v for k, v in given_options(job, opts) if k == "hostname" and v):
            out.append(Candidate(_join(workdir, v), False, v,
                                 relative=not os.path.isabs(v), option="hostname"))
    for v in values["opendir"]:
        out.append(Candidate(_join(workdir, v), False, v, opendir=True,
                             relative=not Path(v).is_absolute(),
                             dirs=tuple(b for _, b in bases[1:])))
    return out


def sandbox_targets(job: FioSettings, opts: Mapping[str, str], workdir: Path) -> list[str]:
    """The paths this job declares, for its sandbox (`_sandbox.walls_for` decides what
    opens): each target and written file fio may open, the directory of a wildcard
    (fio's own file names, log prefixes), each `directory` entry."""
    given = given_options(job, opts)
    out = [_join(workdir, d) for k, v in given
           if "directory" in target_option(k) for d in split_names(v)]
    written = {v for k, v in given if k in WRITTEN_FILES}
    for c in candidates(job, opts, workdir):
        if c.option == "hostname":
            continue  # a Unix socket's path: judged, never opened for fio (`candidates`)
        if not job.allow_destructive and c.given in written and os.path.lexists(c.path):
            continue  # fio would replace it whole: only a new one is the campaign's
        out.append(os.path.dirname(c.path) if c.pattern else c.path)
    return [p for p in out if not glob.has_magic(p)]


def _join(base: Path | str, name: str, always: bool = False) -> str:
    """`name` in directory `base`: fio's `directory` joins with '/' even an absolute name
    (`always`); fio's working directory applies to relative names only."""
    if always:
        return f"{base}/{name}"
    return name if os.path.isabs(name) else f"{base}/{name}"


def _format_glob(fmt: str, jobnames: set[str]) -> str:
    """A `filename_format` as a glob pattern: the literal parts escaped, `$jobnum`,
    `$filenum` and `$clientuid` as wildcards. `$jobname` is known; with several job names
    (a `--name` in extra_args) it becomes a wildcard too."""
    parts = []
    pos = 0
    for m in TOKENS.finditer(fmt):
        parts.append(glob.escape(fmt[pos:m.start()]))
        tok = m.group(1).lower()
        if tok == "jobname" and len(jobnames) == 1:
            parts.append(glob.escape(next(iter(jobnames))))
        else:
            parts.append("*")
        pos = m.end()
    parts.append(glob.escape(fmt[pos:]))
    return "".join(parts)


def _refuse_device(shown: str) -> CampaignError:
    return CampaignError(f"fio target {shown} is a block device (or a device node): fio "
                         "would overwrite it; set allow_destructive: true in the runner "
                         "options to allow it")


def _refuse_file(shown: str, root: Path | None) -> CampaignError:
    return CampaignError(f"fio target {shown} is an existing file outside the campaign "
                         f"directory's scratch area {root}: fio may overwrite it; set "
                         "allow_destructive: true in the runner options to allow it")


def _check_path(p: str, shown: str, root: Path | None, files: bool = True) -> None:
    """One concrete path: a block device (or a missing /dev node), a character device, or
    (with `files`) an existing file outside `root` is refused."""
    real = os.path.realpath(p)
    if real in HARMLESS:
        return
    try:
        st = os.stat(real)
    except OSError:
        if _may_become_device(real):
            raise _refuse_device(shown) from None  # a device node that may appear later
        return
    if stat.S_ISBLK(st.st_mode):
        raise _refuse_device(shown)
    if stat.S_ISDIR(st.st_mode):
        return
    if not stat.S_ISREG(st.st_mode) and (root is None or not within(real, root)):
        kind = {stat.S_IFSOCK: "a Unix socket", stat.S_IFIFO: "a named pipe (FIFO)"}.get(
            stat.S_IFMT(st.st_mode))
        if kind:
            raise CampaignError(f"fio target {shown} is {kind} outside the campaign "
                                f"directory's scratch area {root}: fio would open it or "
                                "connect to it; set allow_destructive: true in the runner "
                                "options to allow it")
        raise _refuse_device(shown)  # a character device (/dev/sg0, /dev/ng0n1...)
    if files and root is not None and not within(real, root):
        raise _refuse_file(shown, root)
    if files and st.st_nlink > 1:  # a hard link: the same bytes live outside too
        raise CampaignError(f"fio target {shown} has {st.st_nlink} hard links (its data may "
                            "be somebody's file elsewhere); set allow_destructive: true in "
                            "the runner options to allow it")


def _may_become_device(path: str) -> bool:
    """Whether a missing `path` (resolved; may hold wildcards) would be a device node: it
    is under /dev and its nearest existing directory is on /dev's own file system (devtmpfs;
    /dev/shm, a tmpfs, holds ordinary files)."""
    if path != "/dev" and not path.startswith("/dev/"):
        return False
    parent = os.path.dirname(path)
    while parent and (glob.has_magic(parent) or not os.path.isdir(parent)):
        parent = os.path.dirname(parent)
    try:
        return os.stat(parent or "/").st_dev == os.stat("/dev").st_dev
    except OSError:
        return True


def _real_prefix(pattern: str) -> str:
    """`pattern` with its leading wildcard-free directories resolved as the kernel would
    (symbolic links, then '..' through directories that do not exist yet, such as the
    run's directory at preflight), the rest kept for glob."""
    parts = pattern.split("/")
    n = next((i for i, p in enumerate(parts) if glob.has_magic(p)), len(parts))
    head = os.path.realpath("/".join(parts[:n]) or "/")
    return "/".join([head.rstrip("/"), *parts[n:]]) if n < len(parts) else head


def _opendir_files(top: str, given: str) -> Iterable[str]:
    """The regular files fio's `opendir` adds: recursively, entries by lstat (symbolic
    links are skipped), as `dir/entry` strings. Iterative (an explicit stack) and bounded:
    a tree deeper than `MAX_OPENDIR_DEPTH`, a path past PATH_MAX, or more than
    `MAX_MATCHES` directories is refused (CampaignError naming `given`), not skipped."""
    stack = [(top, 0)]
    dirs = 0
    while stack:
        d, depth = stack.pop()
        dirs += 1
        if depth > MAX_OPENDIR_DEPTH or dirs > MAX_MATCHES:
            raise _opendir_too_big(given)
        try:
            entries = sorted(os.listdir(d))
        except OSError:
            continue
        subdirs = []
        for e in entries:
            full = f"{d}/{e}"
            if len(os.fsencode(full)) >= 4096:  # lstat would fail: refused, not skipped
                raise _opendir_too_big(given)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                yield full
            elif stat.S_ISDIR(st.st_mode):
                subdirs.append((full, depth + 1))
        stack.extend(reversed(subdirs))


def _opendir_too_big(given: str) -> CampaignError:
    return CampaignError(
        f"fio opendir {given}: a tree too deep or too large to check (more than "
        f"{MAX_OPENDIR_DEPTH} levels, {MAX_MATCHES} directories or 4096-byte paths); "
        "set allow_destructive: true")


def check_candidate(c: Candidate, root: Path | None, remote: bool, files: bool = True
                    ) -> None:
    """Refuse a candidate target that is destructive (see `FioRunner.check_target`)."""
    if remote and files and (c.relative or root is None
                             or not within(os.path.normpath(c.path), root)):
        raise CampaignError(
            f"fio target {c.given} (as {c.path}): in client/server mode the servers' files "
            "cannot be checked from here; keep targets inside the scratch area"
            + (f" {root}" if root else "") + " or set allow_destructive: true")
    if c.opendir:
        real = os.path.realpath(c.path)
        # fio names the files `<opendir value>/<entry>...`; walk the real directory
        given = c.given.rstrip("/") or "/"
        found_files = itertools.islice(_opendir_files(real, c.given), MAX_MATCHES)
        for i, found in enumerate(found_files):
            f = given + found[len(real):]
            if i + 1 >= MAX_MATCHES:
                raise CampaignError(f"fio opendir {c.given}: more than {MAX_MATCHES} files "
                                    "to check; set allow_destructive: true")
            if files and os.stat(found).st_nlink > 1:
                _check_path(found, f"{found} (opendir {c.given})", root, files)
            if files and (root is None or not within(real, root)):
                raise CampaignError(f"fio opendir {c.given} holds existing files outside the "
                                    f"campaign directory's scratch area {root} ({f}): fio "
                                    "would overwrite them; set allow_destructive: true in "
                                    "the runner options to allow it")
            for d in c.dirs:
                _check_path(f"{d}/{f}", f"{d}/{f} (opendir {c.given})", root, files)
        return
    if not c.pattern:
        shown = c.given if c.given == c.path else f"{c.given} (as {c.path})"
        if c.option == "hostname":
            shown += " (option hostname: the Unix socket of protocol=unix)"
        _check_path(c.path, shown, root, files)
        return
    pattern = _real_prefix(c.path)
    if _may_become_device(pattern):
        raise _refuse_device(f"{c.given} (as {c.path})")
    for i, p in enumerate(glob.iglob(pattern, include_hidden=True)):
        if i >= MAX_MATCHES:
            raise CampaignError(f"fio {c.option} {c.given}: more than {MAX_MATCHES} "
                                "existing paths match it; set allow_destructive: true")
        own = bool(c.own) and re.fullmatch(re.escape(c.own) + r"\.\d+\.\d+",
                                           os.path.basename(p)) is not None
        _check_path(p, f"{p} ({c.option} {c.given})", root, files and not own)


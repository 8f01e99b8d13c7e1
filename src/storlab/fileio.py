"""Every file storlab writes for the user goes through here.

A file is written to a temporary name in the target's directory, flushed to disk, and
renamed over the target (`os.replace`, atomic on POSIX). A kill at any moment leaves the
previous file or the complete new one, never a truncated one. A kill can leave a hidden
`.NAME.*.tmp` beside the target; the target itself is never partial.

Use `atomic_write` for anything written through a file object, and the helpers for the
usual payloads: `write_text`, `write_json`, `write_frame` (CSV/Parquet/JSON by suffix) and
`save_figure` (matplotlib). Errors become one-line `StorlabError`s naming the file.
`within` is the one test of whether a path lies inside a directory.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePath
from typing import IO, TYPE_CHECKING, Any

from .errors import StorlabError, YamlRefusal

if TYPE_CHECKING:
    import pandas as pd


def _umask() -> int:
    # No API reads the umask without setting it; set it back at once.
    mask = os.umask(0)
    os.umask(mask)
    return mask


def link_to(path: str | Path) -> str:
    """Where the symbolic link `path` leads, for a message: `?` when it is gone or no link
    any more (another process may remove it between the check and this read)."""
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def within(path: str | os.PathLike[str], top: str | os.PathLike[str], *,
           strict: bool = False) -> bool:
    """Whether `path` is `top` or lies below it (with `strict`, below only): the
    containment test the sandbox, the runners' target guards and the campaign file share.
    Compared as written, component by component (`a//b` and `a/./b` are `a/b`); nothing
    is resolved, not even `..` (`/top/../etc` counts as under `/top`). So where a link or
    a `..` could lead out, the caller passes real paths (`os.path.realpath`, the name the
    kernel gives an open descriptor) or refuses `..` itself."""
    p = PurePath(path)
    return p.is_relative_to(top) and not (strict and p == PurePath(top))


def _entry(mode: int) -> str:
    """A directory entry's kind in words (a link judged by lstat, not followed)."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a file" if stat.S_ISREG(mode) else _kind(mode)


def _owner(uid: int) -> str:
    import pwd

    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


#: Symbolic links followed while resolving one path before it is refused (the kernel's
#: limit: ELOOP after 40).
MAX_LINK_HOPS = 40

#: A per-entry rule for `walk_resolved`: the entry's path as met, its lstat, and whether
#: it is the path's last entry (a link's target, spliced in, comes after it).
EntryRule = Callable[[str, os.stat_result, bool], None]


def walk_resolved(path: str | os.PathLike[str], rule: EntryRule, label: str = "", *,
                  missing_ok: bool = True) -> Path:
    """Resolve `path` as the kernel does, calling `rule` on every entry it lstat's, and
    return the path it resolved to. Component by component from `/` (a relative path from
    the working directory): `..` is applied to the prefix resolved so far, never to the
    text (`link/..` is the link target's parent, as `open` goes); a symbolic link's target
    is spliced in where the link stood (relative to the link's directory, absolute from
    `/`), so every link on the way is met, at any depth, and so is every directory. After
    `MAX_LINK_HOPS` links the path is refused (a loop). A component that does not exist
    ends the walk: the rest is appended as written (the caller makes it, then checks
    again); without `missing_ok` it raises FileNotFoundError instead. The returned path
    has no link in it: use it, not the path given, for what follows (a second resolution
    could take another way)."""
    text = os.fspath(path)
    label = label or text
    if not os.path.isabs(text):
        text = os.path.join(os.getcwd(), text)  # getcwd: the kernel's name, no links
    pending = [c for c in text.split("/") if c not in ("", ".")]
    pending.reverse()  # a stack: the next component last

    def judge(entry: str, last: bool) -> None:  # an entry already known to exist
        try:
            rule(entry, os.lstat(entry), last)
        except OSError as exc:
            raise StorlabError(f"{label}: cannot check {entry} ({exc.strerror or exc})"
                               ) from None

    at = "/"
    judge(at, not pending)
    hops = 0
    while pending:
        name = pending.pop()
        if name == "..":
            at = os.path.dirname(at)  # `at` holds no link: its parent is the real one
            if not pending:  # met above as a middle entry: now it is the last
                judge(at, True)
            continue
        entry = os.path.join(at, name)
        try:
            st = os.lstat(entry)
        except (FileNotFoundError, NotADirectoryError):
            if not missing_ok:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), entry
                                        ) from None
            return Path(entry, *reversed(pending))
        except OSError as exc:
            raise StorlabError(f"{label}: cannot check {entry} ({exc.strerror or exc})"
                               ) from None
        rule(entry, st, not pending)
        if not stat.S_ISLNK(st.st_mode):
            at = entry
            continue
        hops += 1
        if hops > MAX_LINK_HOPS:
            raise StorlabError(f"{label}: more than {MAX_LINK_HOPS} symbolic links on the "
                               f"way (a loop?), the last {entry}")
        try:
            target = os.readlink(entry)
        except OSError as exc:
            raise StorlabError(f"{label}: cannot read the link {entry} "
                               f"({exc.strerror or exc})") from None
        if target.startswith("/"):
            at = "/"
        pending.extend(reversed([c for c in target.split("/") if c not in ("", ".")]))
    return Path(at)


def check_trusted_entry(at: str, st: os.stat_result, label: str, last: bool = True) -> None:
    """`check_trusted_dir`'s rule for one entry, from its lstat (or the fstat of a
    descriptor storlab opened): owned by root or the euid, and (unless a link, or a sticky
    directory that is not the `last` entry) writable by neither its group nor others.
    For a file storlab writes as root (a store, its -wal/-shm, its lock): another user's,
    or one others may write, could be read by them afterwards, whatever storlab wrote."""
    mode = st.st_mode
    if st.st_uid not in (0, os.geteuid()):
        raise StorlabError(
            f"{label}: {at} ({_entry(mode)}, mode {stat.S_IMODE(mode):04o}) is owned "
            f"by {_owner(st.st_uid)}, not by root or you: storlab trusts a "
            "directory with its own files as root only when no other user can "
            "change the path")
    if stat.S_ISLNK(mode):
        return  # a link's mode means nothing; its target is walked next
    sticky_above = stat.S_ISDIR(mode) and mode & stat.S_ISVTX and not last
    if mode & 0o022 and not sticky_above:
        raise StorlabError(
            f"{label}: {at} ({_entry(mode)}, owner {_owner(st.st_uid)}) has mode "
            f"{stat.S_IMODE(mode):04o}: writable by its group or others, who could "
            "swap what storlab keeps there as root; remove their write permission "
            "(chmod go-w) or choose another directory")


def check_trusted_dir(path: str | os.PathLike[str], what: str = "", *,
                      missing_ok: bool = True) -> Path:
    """Refuse, in one line naming the entry, its owner and mode, a directory storlab
    keeps its own root files in (a cluster's keys, configs, PID records, daemons' logs)
    when anyone but root or the effective user could change where the path leads or what
    it holds. The path is resolved as the kernel does (`walk_resolved`), and every entry
    met on the way (each directory, each link at any depth, the links' targets) must be
    owned by root or the euid; a directory (or the last entry) must be writable by
    neither its group nor others, unless it is a sticky directory and not the last (`/tmp`:
    others may add names there, not replace ours). OpenSSH's StrictModes and sudo check
    the same. A link or directory another user planted in `/tmp` fails here. Components
    that do not exist yet end the walk: the caller makes them, then checks again (without
    `missing_ok`, FileNotFoundError: a reader must not take a directory anyone may make
    later in a sticky one for its own). The resolved path is returned: the caller uses
    it, so a link swapped later changes nothing."""
    label = f"{what} {path}" if what else str(path)

    def rule(at: str, st: os.stat_result, last: bool) -> None:
        check_trusted_entry(at, st, label, last)

    return walk_resolved(path, rule, label, missing_ok=missing_ok)


def check_trusted_output_dir(path: str | os.PathLike[str], what: str = "") -> Path:
    """As root, the directory storlab writes a user-named file into (`-o`, a report, an
    export), resolved (`walk_resolved`) and refused in one line unless no other user can
    change where the path leads: every entry owned by root or the euid, no directory
    writable by its group or others unless sticky (`/tmp`: the file is made there under a
    fresh name, O_EXCL, and renamed through the held directory, never followed). Without
    this, the owner of a directory on the way could swap it for a link between storlab's
    check and its write, and root would replace a file in a root-only directory. Not
    root: the path as given (the kernel's permissions guard the user). The returned path
    has no link in it; what does not exist yet is appended as written."""
    if os.geteuid() != 0:
        return Path(path)
    label = f"{what} {path}" if what else str(path)

    def rule(at: str, st: os.stat_result, last: bool) -> None:
        try:  # the directory holds the file written: a sticky one is fine as the last
            check_trusted_entry(at, st, label, last=False)
        except StorlabError as exc:
            raise StorlabError(f"{exc}; as root storlab writes only into directories no "
                               "other user can change: write to such a directory, or run "
                               "storlab as that user") from None

    return walk_resolved(path, rule, label)


def open_output_dir(path: str | os.PathLike[str], what: str = "", mode: int = 0o777) -> int:
    """A descriptor (O_DIRECTORY) of the user-named output directory `path` (an export's,
    `--plots`), made when missing. As root: judged first (`check_trusted_output_dir`: no
    other user can change where it leads), then made and opened from `/` one component
    of the resolved path at a time with O_NOFOLLOW, never by path (a `mkdir(parents=True)`
    followed another user's link on the way and made the directory in a root-only one),
    and judged again, the descriptor's directory the one the path now names. Not root:
    made by path (the kernel's permissions guard the user). The caller closes it."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    label = f"{what} {path}" if what else str(path)
    if os.geteuid() != 0:
        try:
            Path(path).mkdir(mode=mode, parents=True, exist_ok=True)
            return os.open(path, flags)
        except OSError as exc:
            raise StorlabError(f"{label}: cannot make the directory "
                               f"({exc.strerror or exc})") from None
    real = check_trusted_output_dir(path, what)
    fd = open_dir_beneath("/", real, what=what, mode=mode)
    try:
        again = check_trusted_output_dir(real, what)  # what was made meanwhile, judged too
        st, held = os.stat(again), os.fstat(fd)
        if (st.st_dev, st.st_ino) != (held.st_dev, held.st_ino):
            raise StorlabError(f"{label}: changed while storlab made it; not written")
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_output_dir(path: str | os.PathLike[str], what: str = "") -> None:
    """`open_output_dir`, for a caller that writes its files by path afterwards (each one
    judged again by `atomic_write`)."""
    os.close(open_output_dir(path, what))


def check_campaign_dir(path: str | os.PathLike[str], what: str = "campaign directory"
                       ) -> Path:
    """As root, the campaign's directory (where storlab makes the store, its lock, the
    runs' output files and the scratch area) reached only through directories no other
    user can change (`check_trusted_dir`: owned by root or the euid, not writable by their
    group or others unless sticky and not the last; every link on the way root's or the
    euid's). Otherwise that user could swap the directory for a link after the campaign
    file was read, and root would write its files wherever the link leads. Refused in one
    line naming the entry, its owner and the way out. Not root: the path as given."""
    if os.geteuid() != 0:
        return Path(path)
    try:
        return check_trusted_dir(path, what, missing_ok=False)
    except FileNotFoundError as exc:
        raise StorlabError(f"{what} {path}: {exc.filename} does not exist") from None
    except StorlabError as exc:
        raise StorlabError(f"{exc}; as root, copy the campaign into a directory only root "
                           "can change (cp -r --no-preserve=ownership), or run storlab as "
                           "that user") from None


def check_no_foreign_link(path: str | os.PathLike[str], what: str = "") -> Path:
    """Refuse, in one line, a path reached through a symbolic link owned by anyone but root
    or the effective user: where such a link leads decides where storlab (often root)
    makes what it writes beside the file, a campaign's store and runs say. The kernel's
    `fs.protected_symlinks` refuses the same only for links in sticky directories; this
    refuses it anywhere on the way the kernel takes (`walk_resolved`: links inside a link's
    target and links before a `..` included). The resolved path is returned: read the
    file there, and make what goes beside it there."""
    label = f"{what} {path}" if what else str(path)
    euid = os.geteuid()

    def rule(at: str, st: os.stat_result, last: bool) -> None:
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (0, euid):
            raise StorlabError(
                f"{label}: reached through {at}, a symbolic link owned by "
                f"{_owner(st.st_uid)}, not by root or you: where it leads would decide "
                f"where storlab writes; name the file by its real path "
                f"({os.path.realpath(path)})")

    return walk_resolved(path, rule, label)


def check_target(path: str | Path, what: str = "") -> Path:
    """`path` as a Path, or a one-line error when it cannot be a file we write."""
    p = Path(path)
    label = f"{what} {p}" if what else str(p)
    _check_path_text(p, label)
    if p.is_dir():
        raise StorlabError(f"{label}: is a directory, expected a file name")
    try:
        st = p.stat()
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        # the file is written beside and renamed over: a device or FIFO would be replaced
        # (as root, /dev/full became a regular file) and nothing would reach the device
        raise StorlabError(f"{label}: is {_kind(st.st_mode)}, not a regular file; give a "
                           "file name (without -o a command prints to stdout)")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise StorlabError(f"{label}: directory {parent} does not exist")
    if not parent.is_dir():
        raise StorlabError(f"{label}: {parent} is not a directory")
    return p


@contextmanager
def atomic_write(path: str | Path, mode: str = "w", *, encoding: str | None = "utf-8",
                 what: str = "", private: bool = False) -> Iterator[IO[Any]]:
    """Open a temporary file beside `path` for writing; on success it replaces `path`.

    `mode` is "w" (text) or "wb" (binary). On any exception the temporary file is removed
    and `path` is left as it was. `what` names the option in error messages ("-o").
    `private`: the file 0600 whatever the umask (it holds what a run printed, as private
    as the store); otherwise 0644 less the umask. A regular file of the caller's already
    at `path` narrows that mode to its own permission bits (a results table the user made
    0600 stays 0600), never widens it: set-ID, sticky and execute bits are never taken,
    and any other entry there (a link, another user's file) is replaced, not followed,
    lending nothing.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', not {mode!r}")
    p = check_target(path, what)
    label = f"{what} {p}" if what else str(p)
    parent = check_trusted_output_dir(p.parent if str(p.parent) else Path("."), what)
    try:  # every step below through this descriptor: a link swapped in later is not met
        dfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise StorlabError(f"{label}: cannot write ({exc.strerror or exc})") from None
    try:
        tmp = f".{p.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:  # 0600 until written; at most the default, never the old file's wider bits
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        except OSError as exc:
            raise StorlabError(f"{label}: cannot write ({exc.strerror or exc})") from None
        with _removed_unless_renamed(tmp, dfd):
            try:
                os.fchmod(fd, _output_mode(p, private, dfd))
                with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding,
                               newline=None if "b" in mode else "") as fh:
                    yield fh
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, p.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except OSError as exc:
                raise StorlabError(f"{label}: cannot write ({exc.strerror or exc})") from None
        try:  # the rename itself durable (best effort: some filesystems refuse)
            os.fsync(dfd)
        except OSError:
            pass
    finally:
        os.close(dfd)


@contextmanager
def _removed_unless_renamed(tmp: str, dir_fd: int) -> Iterator[None]:
    """The temporary file `tmp` (in `dir_fd`) removed when the block that writes and
    renames it raises: nothing half-written is left beside the target."""
    try:
        yield
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def _output_mode(p: Path, private: bool, dir_fd: int | None = None) -> int:
    """The mode `atomic_write` gives its file: the default (0600 when `private`, else 0644
    less the umask) intersected with the permission bits of a regular file the effective
    user owns at `p` (lstat: a link at the name lends nothing)."""
    bits = 0o600 if private else 0o644 & ~_umask()
    try:
        st = os.lstat(p.name, dir_fd=dir_fd) if dir_fd is not None else os.lstat(p)
    except OSError:
        return bits
    if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
        bits &= stat.S_IMODE(st.st_mode)
    return bits


def write_text(path: str | Path, text: str, what: str = "", private: bool = False) -> Path:
    """Write `text` (UTF-8) atomically (`private`: see `atomic_write`)."""
    with atomic_write(path, "w", what=what, private=private) as fh:
        fh.write(text)
    return Path(path)


def write_fresh(path: str | Path, data: str | bytes = b"", dir_fd: int | None = None,
                mode: int = 0o666) -> Path:
    """Make `path` anew with `data`, never through a link: whatever entry is there (a link
    a campaign's step planted, pointing at a device or somebody's file) is removed, not
    followed, and the file is created exclusively (O_EXCL | O_NOFOLLOW). For the files
    storlab itself writes beside a run's programs (job files, configs, output streams).
    With `dir_fd` (`open_dir_beneath`), `path`'s name is made in that directory; `mode`
    (less the umask): 0o600 for a file beside the store that holds what a run printed."""
    p = Path(path)
    name: str | Path = p.name if dir_fd is not None else p
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 mode & ~_umask(), dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
    return p


def open_dir_beneath(home: str | Path, path: str | Path, make: bool = True,
                     what: str = "", home_fd: int | None = None, mode: int = 0o777) -> int:
    """A descriptor (O_RDONLY | O_DIRECTORY) of the directory `path`, which lies inside the
    directory `home`: `home` is opened as named (the user's own path, links and all), then
    each component of `path` below it with O_NOFOLLOW, from the directory opened before it
    (made when missing, with `make`). A component that is a link (one planted in the
    campaign's directory, leading to somebody's directory) is refused in one line: what
    storlab makes there as root (its locks, the runs' output files) is made in the
    directory it opened, never where a link leads. `path` outside `home`: only its last
    component is opened without following. `home_fd`: `home` as the caller holds it (opened
    once, earlier), used instead of opening `home` by name; `mode`: of the directories made
    (less the umask)."""
    home, p = os.path.abspath(home), os.path.abspath(path)
    if not within(p, home):
        home, home_fd = os.path.dirname(p), None
    label = f"{what} {path}" if what else str(path)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        fd = os.open(home, flags) if home_fd is None else os.dup(home_fd)
    except OSError as exc:
        raise StorlabError(f"{label}: cannot open {home} ({exc.strerror or exc})") from None
    at = home
    try:
        for name in Path(os.path.relpath(p, home)).parts:
            if name == ".":
                continue
            at = os.path.join(at, name)
            try:
                nxt = os.open(name, flags | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not make:
                    raise
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                except FileExistsError:  # made meanwhile (or a link made meanwhile)
                    pass
                nxt = os.open(name, flags | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as exc:
        try:  # the component as the held directory names it (not by path: a link above)
            linked = stat.S_ISLNK(os.lstat(os.path.basename(at), dir_fd=fd).st_mode)
        except OSError:
            linked = False
        os.close(fd)
        if linked or os.path.islink(at):
            raise StorlabError(f"{label}: {at} is a symbolic link (to {link_to(at)}); "
                               "storlab makes its own files there only in directories of "
                               "their own, never through a link: remove the link (or put "
                               "the whole directory where it leads)") from None
        raise StorlabError(f"{label}: cannot open {at} ({exc.strerror or exc})") from None
    return fd


def remove_tree(name: str, dir_fd: int) -> None:
    """Remove `name` (a directory and all it holds; a file or a link is unlinked, a link
    never followed) from the directory held open as `dir_fd`; errors are ignored (the
    caller checks what is left and reports it). The trees removed here are made by
    programs: Python 3.11's shutil.rmtree recurses once per level, so a tree deeper than
    the recursion limit (1500 nested directories) raised RecursionError, a traceback. What
    it leaves then is removed by GNU rm (fts: iterative, links removed not followed,
    `--one-file-system`) at a fixed path (never looked up in PATH: storlab often runs as
    root), started in the held directory (by its descriptor, not a path a link could
    swap); without one the tree stays, for the caller to report."""
    try:
        if not stat.S_ISDIR(os.lstat(name, dir_fd=dir_fd).st_mode):
            os.unlink(name, dir_fd=dir_fd)
            return
    except OSError:
        return
    try:
        shutil.rmtree(name, ignore_errors=True, dir_fd=dir_fd)
        return
    except RecursionError:
        pass
    rm = next((p for p in ("/usr/bin/rm", "/bin/rm") if os.access(p, os.X_OK)), None)
    if rm is None:
        return
    try:
        subprocess.run([rm, "-rf", "--one-file-system", "--", name],
                       cwd=f"/proc/self/fd/{dir_fd}", pass_fds=(dir_fd,),
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=600, check=False,
                       start_new_session=True)
    except (OSError, subprocess.SubprocessError):
        pass


@contextmanager
def temporary_directory(prefix: str) -> Iterator[str]:
    """A new directory in the system's temporary directory (tempfile.mkdtemp), removed
    afterwards with `remove_tree` (programs may have made a deep tree in it:
    tempfile.TemporaryDirectory's cleanup would raise RecursionError)."""
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        try:
            pfd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            pass
        else:
            try:
                remove_tree(os.path.basename(path), pfd)
            finally:
                os.close(pfd)


def write_in_dir(directory: str | Path, name: str, data: str | bytes, what: str = "",
                 home: str | Path | None = None, home_fd: int | None = None,
                 mode: int = 0o666, dir_mode: int = 0o777) -> Path:
    """Write `directory/name` anew with `data`, atomically and never through a link:
    `directory` (made if missing) is opened with O_NOFOLLOW, so a link there (to somebody's
    directory) is refused in one line; the file is written under a temporary name made
    exclusively inside it and renamed over `name` (a link there is replaced, not
    followed). For files storlab writes beside a store or a scratch area, where a run's
    programs may have planted a link. With `home` (the campaign's directory), `directory`
    is made and opened from it one component at a time (`open_dir_beneath`): a link
    swapped in for any directory on the way is refused, not only for the last; `home_fd`:
    `home` as the caller holds it (see `open_dir_beneath`); `mode`: the file's, `dir_mode`:
    of the directories made (both less the umask)."""
    d = Path(directory)
    label = f"{what} {d}" if what else str(d)
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise StorlabError(f"{label}: {name!r} is not a plain file name")
    try:
        if home is not None:
            dfd = open_dir_beneath(home, d, what=what, home_fd=home_fd, mode=dir_mode)
        else:
            check_trusted_output_dir(d, what)  # as root: no other user's way in
            d.mkdir(mode=dir_mode, parents=True, exist_ok=True)
            check_trusted_output_dir(d, what)  # what was made meanwhile, judged too
            dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if d.is_symlink():
            raise StorlabError(f"{label}: is a link (to {link_to(d)}); storlab writes "
                               "there only into a directory of its own: remove the link"
                               ) from None
        raise StorlabError(f"{label}: cannot write ({exc.strerror or exc})") from None
    tmp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode & ~_umask(), dir_fd=dfd)
        with _removed_unless_renamed(tmp, dfd):
            with os.fdopen(fd, "wb") as fh:
                fh.write(data.encode() if isinstance(data, str) else data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except OSError as exc:
        raise StorlabError(f"{label}/{name}: cannot write ({exc.strerror or exc})") from None
    finally:
        os.close(dfd)
    return d / name


def write_bytes(path: str | Path, data: bytes, what: str = "") -> Path:
    """Write `data` atomically."""
    with atomic_write(path, "wb", what=what) as fh:
        fh.write(data)
    return Path(path)


def write_json(path: str | Path, data: Any, what: str = "") -> Path:
    """Write `data` as indented JSON (numpy/pandas values and NaN made JSON-safe)."""
    from .jsonutil import to_jsonable

    return write_text(path, json.dumps(to_jsonable(data), indent=2) + "\n", what=what)


def write_frame(df: pd.DataFrame, path: str | Path, what: str = "-o",
                fmt: str | None = None) -> Path:
    """Write a table by suffix (or `fmt`): .csv, .parquet/.pq, or .json (records),
    atomically."""
    p = Path(path)
    suffix = f".{fmt}" if fmt else p.suffix.lower()
    if suffix == ".csv":
        with atomic_write(p, "w", what=what) as fh:
            df.to_csv(fh, index=False)
    elif suffix in (".parquet", ".pq"):
        with atomic_write(p, "wb", what=what) as fh:
            df.to_parquet(fh, index=False)
    elif suffix == ".json":
        write_json(p, df, what=what)
    else:
        raise StorlabError(f"{what} {p}: use a .csv, .parquet or .json file".lstrip())
    return p


def save_figure(fig: Any, path: str | Path, what: str = "--plot", close: bool = True,
                **savefig_kw: Any) -> Path:
    """`fig.savefig` to a temporary file and rename; the format comes from the suffix."""
    p = Path(path)
    fmt = p.suffix.lower().lstrip(".")
    supported = fig.canvas.get_supported_filetypes()
    if fmt not in supported:
        raise StorlabError(f"{what} {p}: unknown plot format {p.suffix or '(none)'!r}; use "
                           f"{', '.join(f'.{s}' for s in ('png', 'svg', 'pdf'))}".lstrip())
    from .plotstyle import saving

    try:
        with atomic_write(p, "wb", what=what) as fh, saving():
            fig.savefig(fh, format=fmt, **savefig_kw)
    finally:
        if close:
            from .plotstyle import close as close_figure

            close_figure(fig)
    return p


# ---------------------------------------------------------------------------- reading

#: The largest input file storlab reads (a space, a campaign, a results table): far above
#: any real one, and a bound on what an endless stream or a wrong file can cost.
MAX_INPUT_BYTES = 512 * 2**20
#: The largest YAML file: spaces, campaigns and clusters are a few kB, and PyYAML reads
#: about 1 MB a second (a longer list of configurations belongs in a CSV: design.csv).
MAX_YAML_BYTES = 256 * 2**10
#: Deepest nesting of a YAML document (a campaign nests 4 levels; PyYAML recurses per level).
MAX_YAML_DEPTH = 64
#: Most nodes a YAML document may stand for, an alias counted as what it repeats: a
#: file of MAX_YAML_BYTES without aliases holds at most ~130,000 (`[1,1,...]`); ten
#: levels of ten aliases each ("billion laughs", 899 bytes) stand for 10^10, which every
#: later walk of the data would visit.
MAX_YAML_NODES = 250_000


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 2**20 else f"{n >> 10} KiB"


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, word in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return word
    return "not a regular file"


def _check_path_text(p: Path, label: str) -> None:
    if "\x00" in str(p):
        raise StorlabError(f"{label!r}: a file name cannot hold a NUL byte")


def check_input(path: str | Path, what: str = "", limit: int = MAX_INPUT_BYTES) -> Path:
    """`path` as a Path when it is a regular file storlab may read, else a one-line error:
    missing, a directory, a FIFO, a device or a socket (checked before opening: opening a
    FIFO blocks, /dev/zero never ends), or larger than `limit` bytes."""
    p = Path(path)
    label = f"{what} {p}" if what else str(p)
    _check_path_text(p, label)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise StorlabError(f"{label}: file not found") from None
    except OSError as exc:
        raise StorlabError(f"{label}: cannot read ({exc.strerror or exc})") from None
    check_input_stat(st, label, limit)
    return p


def check_input_stat(st: os.stat_result, label: str, limit: int = MAX_INPUT_BYTES) -> None:
    """`check_input`'s refusals for a file's `stat` (a directory, a FIFO, a device, a
    socket, larger than `limit` bytes), one line starting with `label`."""
    if stat.S_ISDIR(st.st_mode):
        raise StorlabError(f"{label}: is a directory, expected a file")
    if not stat.S_ISREG(st.st_mode):
        raise StorlabError(f"{label}: is {_kind(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        raise StorlabError(f"{label}: {st.st_size} bytes, more than the {_size(limit)} "
                           "storlab reads from such a file")


def read_in_dir(dir_fd: int | None, name: str | os.PathLike[str], what: str = "",
                limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file `name` in the directory held as `dir_fd` (None: `name`
    as a path), opened without following a link (O_NOFOLLOW) nor blocking on a FIFO,
    checked on its descriptor (`check_input_stat`: a regular file, at most `limit` bytes).
    The reading counterpart of `write_in_dir` for files beside a store or in a run
    directory, where a program may have planted a link. A missing file raises
    FileNotFoundError (the caller decides); any other refusal is a one-line StorlabError
    starting with `what`."""
    label = what or os.fspath(name)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        why = "a link there is refused" if exc.errno == errno.ELOOP else exc.strerror
        raise StorlabError(f"{label}: cannot read it ({why})") from None
    with os.fdopen(fd, "rb") as fh:
        check_input_stat(os.fstat(fd), label, limit)
        data = fh.read(limit + 1)  # a file that grows while read stays bounded
    if len(data) > limit:
        raise StorlabError(f"{label}: more than the {_size(limit)} storlab reads from such "
                           "a file")
    return data


def read_input_bytes(path: str | Path, what: str = "", limit: int = MAX_INPUT_BYTES,
                     checked: bool = False) -> bytes:
    """The bytes of the input file `path` (links followed: the user's own), opened ONCE
    without blocking (O_NONBLOCK: a FIFO put at the name after `check_input` looked would
    have held an open by path for ever) and judged on that descriptor (`check_input_stat`:
    a regular file, at most `limit` bytes), read from it and nowhere else. `checked`: the
    caller ran `check_input` already (its one-line answers for a missing file, say)."""
    p = Path(path) if checked else check_input(path, what, limit)
    label = f"{what} {p}" if what else str(p)
    try:
        # O_PATH first, judged by fstat, then opened for reading through that descriptor:
        # a device swapped in at the name is never opened (a watchdog armed, a tape wound)
        pfd = os.open(p, os.O_PATH | os.O_CLOEXEC)
        try:
            check_input_stat(os.fstat(pfd), label, limit)
            fd = os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        finally:
            os.close(pfd)
    except IsADirectoryError:
        raise StorlabError(f"{label}: is a directory, expected a file") from None
    except FileNotFoundError:
        raise StorlabError(f"{label}: file not found") from None
    except OSError as exc:
        raise StorlabError(f"{label}: cannot read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as fh:
        check_input_stat(os.fstat(fd), label, limit)
        try:
            data = fh.read(limit + 1)  # a file that grows while read stays bounded
        except OSError as exc:
            raise StorlabError(f"{label}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise StorlabError(f"{label}: more than the {_size(limit)} storlab reads from such "
                           "a file")
    return data


def read_text(path: str | Path, what: str = "", limit: int = MAX_INPUT_BYTES) -> str:
    """A UTF-8 text file's contents; a missing file, a directory, a FIFO or device, a file
    over `limit` bytes or binary data is a one-line StorlabError naming the file."""
    return _read_checked(path, what, limit)[1]


def _read_checked(path: str | Path, what: str = "", limit: int = MAX_INPUT_BYTES,
                  data: bytes | None = None) -> tuple[bytes, str]:
    """`read_text`'s checks, returning the bytes as read and the text; `data`, when
    given, is the file's content already read (from a descriptor its caller checked),
    and `path` only names it."""
    p = Path(path) if data is not None else check_input(path, what, limit)
    label = f"{what} {p}" if what else str(p)
    if data is None:
        data = read_input_bytes(p, what, limit, checked=True)
    if len(data) > limit:
        raise StorlabError(f"{label}: more than the {_size(limit)} storlab reads from such "
                           "a file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StorlabError(f"{label}: not a UTF-8 text file (byte {exc.start})") from None
    if "\x00" in text:
        raise StorlabError(f"{label}: not a text file (NUL byte at {text.index(chr(0))})")
    return data, text


def _lines(text: str) -> Iterator[str]:
    """The lines of `text` one by one (csv.reader reads only the header's), without the
    copy of the whole text that `splitlines` or `io.StringIO` makes."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


def read_yaml(path: str | Path, what: str = "", data: bytes | None = None) -> Any:
    """A YAML file's data (the one YAML reader: spaces, campaigns, cluster files). A
    missing, binary or malformed file is a one-line StorlabError naming the file and,
    for bad YAML, the line. The reader is YAML 1.2-minded where 1.1 surprises
    (`_StrictLoader`): `yes/no/on/off` are refused (quote them, or write true/false), a
    duplicate key is refused, dates stay the text written, binary values and integers
    beyond 64 bits are refused, nesting is bounded. `data`: the content already read
    (`path` then only names it)."""
    import yaml

    p = Path(path)
    label = f"{what} {p}" if what else str(p)
    text = _read_checked(p, what, MAX_YAML_BYTES, data)[1]
    try:
        data = yaml.load(text, Loader=_strict_loader())  # noqa: S506 (a SafeLoader subclass)
    except YamlRefusal as exc:
        raise StorlabError(f"{label}: {exc}") from None
    except RecursionError:
        raise StorlabError(f"{label}: nested more than {MAX_YAML_DEPTH} levels deep") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise StorlabError(f"{label}: not valid YAML ({where}{problem})") from None
    return data


_LOADER: Any = None


def _strict_loader() -> Any:
    """The SafeLoader subclass behind `read_yaml` (built once, on first use: yaml loads
    lazily)."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml

    def where(node: Any, loader: Any = None) -> str:
        """"line N" and, for a mapping's value, "line N: key" (the field the user wrote)."""
        key = getattr(loader, "value_keys", {}).get(id(node)) if loader is not None else None
        return f"line {node.start_mark.line + 1}" + (f": {key}" if key is not None else "")

    class StrictLoader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.depth += 1
            try:
                if self.depth > MAX_YAML_DEPTH:
                    raise YamlRefusal(f"{where(self.peek_event())}: nested more than "
                                       f"{MAX_YAML_DEPTH} levels deep")
                alias = self.check_event(yaml.AliasEvent)
                node = super().compose_node(parent, index)
            finally:
                self.depth -= 1
            self._count(node, alias)
            return node

        def _count(self, node: Any, alias: bool) -> None:
            """Record what `node` stands for, an alias's repeats included; refuse a
            document past MAX_YAML_NODES (a composed child is counted before its
            parent, so each node is summed once: linear in the file)."""
            if not hasattr(self, "sizes"):
                self.sizes: dict[int, int] = {}
            if alias:
                if id(node) not in self.sizes:  # its collection is still being composed
                    raise YamlRefusal(f"{where(node)}: an alias inside the collection it "
                                       "names (an endless document)")
                return
            if isinstance(node, yaml.MappingNode):
                kids = [n for pair in node.value for n in pair]
            else:
                kids = node.value if isinstance(node, yaml.SequenceNode) else []
            size = 1 + sum(self.sizes[id(k)] for k in kids)
            if size > MAX_YAML_NODES:
                raise YamlRefusal(f"{where(node)}: stands for more than {MAX_YAML_NODES:,} "
                                   "values once its aliases (*name) are expanded; write "
                                   "the data out, or use fewer aliases")
            self.sizes[id(node)] = size

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, int] = {}
            if not hasattr(self, "value_keys"):
                self.value_keys: dict[int, Any] = {}
            for key_node, value_node in node.value:
                try:
                    key = self.construct_object(key_node, deep=True)
                    hash(key)
                except TypeError:
                    continue  # unhashable keys: SafeLoader's own error follows
                self.value_keys[id(value_node)] = key
                if key in seen and key != "<<":
                    raise YamlRefusal(f"{where(key_node)}: duplicate key {key!r} (first on "
                                       f"line {seen[key]}); YAML would keep only the last")
                seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    def boolean(loader: Any, node: Any) -> bool:
        text = str(node.value)
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise YamlRefusal(f"{where(node, loader)}: {text!r} is a YAML 1.1 boolean; write "
                           f"\"{text}\" (quoted) for the word, or true/false")

    def timestamp(loader: Any, node: Any) -> str:
        return str(node.value)  # a date stays the text written (2024-01-31), never a date

    def binary(loader: Any, node: Any) -> Any:
        raise YamlRefusal(f"{where(node, loader)}: a !!binary value cannot reach a program; "
                           "write the text")

    def integer(loader: Any, node: Any) -> int:
        n = yaml.SafeLoader.construct_yaml_int(loader, node)
        if not -(2**63) <= n < 2**63:
            raise YamlRefusal(f"{where(node, loader)}: {node.value} is beyond a 64-bit integer "
                               f"(\u00b1{2**63})")
        return n

    StrictLoader.add_constructor("tag:yaml.org,2002:bool", boolean)
    StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", timestamp)
    StrictLoader.add_constructor("tag:yaml.org,2002:binary", binary)
    StrictLoader.add_constructor("tag:yaml.org,2002:int", integer)
    _LOADER = StrictLoader
    return _LOADER


#: Columns of a results table that describe a run rather than measure it: never a factor
#: or a response to the analyses and the report (one definition, imported everywhere).
BOOKKEEPING: frozenset[str] = frozenset({
    "run", "std_order", "replicate", "block", "center", "repetition", "status", "seed",
    "config_id", "run_id", "key", "started", "ended", "finished", "duration", "exit_code",
    "host", "attempts", "seq", "n_runs", "stderr", "stderr_tail"})


def _check_width(n: int, label: str) -> None:
    from .limits import MAX_COLUMNS

    if n > MAX_COLUMNS:
        raise StorlabError(f"{label}: {n} columns, more than the {MAX_COLUMNS} storlab reads "
                           "(one column per factor or response)")


def read_table(path: str | Path, what: str = "", data: bytes | None = None) -> pd.DataFrame:
    """A results table from .csv, .parquet/.pq or .json (records), checked: readable,
    not empty, column names unique (pandas would rename a second `x` to `x.1`), and no
    infinite numbers (an overflowing value such as 1e400 reads as inf). `data`: the
    file's content already read (`path` then only names it and its format)."""
    import io

    import numpy as np
    import pandas as pd

    p = Path(path)
    label = f"{what} {p}" if what else str(p)
    suffix = p.suffix.lower()
    if data is None:
        if p.is_dir():
            raise StorlabError(f"{label}: is a directory, expected a table file")
        check_input(p, what)
    try:
        if suffix in (".parquet", ".pq"):  # the bytes read once, never the path again
            df = pd.read_parquet(io.BytesIO(read_input_bytes(p, what, checked=True)
                                            if data is None else data))
            names = [str(c) for c in df.columns]
        else:
            data, text = _read_checked(p, what, data=data)
            if not text or text.isspace():  # (not text.strip(), without copying the text)
                raise StorlabError(f"{label}: empty file")
            if suffix == ".json":
                df = pd.read_json(io.StringIO(text))
                names = [str(c) for c in df.columns]
            else:
                import csv

                names = next(csv.reader(_lines(text)), [])
                _check_width(len(names), label)
                # The bytes as read: pandas parses UTF-8 bytes directly, where text
                # would be encoded back first (0.1 s on a 24 MB table).
                df = pd.read_csv(io.BytesIO(data))
    except StorlabError:
        raise
    except Exception as exc:  # pandas and pyarrow raise many kinds; the user needs one line
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise StorlabError(f"{label}: cannot read as a table ({exc.__class__.__name__}: "
                           f"{first})") from None
    _check_width(len(names), label)
    dup = sorted({n.strip() for n in names if [m.strip() for m in names].count(n.strip()) > 1})
    if dup:
        raise StorlabError(f"{label}: duplicate column name(s) {', '.join(map(repr, dup))}")
    if df.columns.empty or len(df) == 0:
        raise StorlabError(f"{label}: no rows")
    num = df.select_dtypes(include="number")
    if len(num.columns):
        inf = np.isinf(num.to_numpy(dtype=float))
        if inf.any():
            r, c = (int(i[0]) for i in np.nonzero(inf))
            raise StorlabError(f"{label}: column {num.columns[c]!r} row {r + 1}: "
                               f"{num.iat[r, c]} is not a finite number (too large?)")
    return df

"""The campaign store: one SQLite file in the campaign's directory, one row per run.

One writer (the process that runs the campaign) commits each run the moment it finishes;
WAL journaling with synchronous=FULL means a run that was committed survives a SIGKILL (and
a power cut) of the writer. A run is first written as `running`; if the process dies the row
stays `running` and the next `storlab run` repeats it.

Only the holder of the campaign's writer lock (`Store.writer_lock`, see lock.py) writes runs.
Taking the lock also clears what a killed predecessor left: processes it started for its runs
(found by the tag every run's programs carry in their environment) are killed before any run
starts. A store that cannot be written (a full disk) stops the campaign with one line; every
run committed before stays, and the run in flight stays `running` and is repeated next time.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from .. import _proc_lifetime
from ..errors import StorlabError
from ..fileio import check_trusted_entry, link_to
from ..jsonutil import to_jsonable
from . import lock
from .runners import TAG_ENV, campaign_identity
from .runners.base import RunResult
from .spec import CampaignError

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS configs (
    config_id INTEGER PRIMARY KEY,  -- 1-based position in the design's run order
    config    TEXT NOT NULL,        -- JSON {factor: value}
    design    TEXT NOT NULL         -- JSON design bookkeeping (std_order, center, ...)
);
CREATE TABLE IF NOT EXISTS runs (
    key         TEXT PRIMARY KEY,   -- c<config_id>-r<repetition>, its warm-ups <that>-w<i>
    seq         INTEGER NOT NULL,   -- position in the campaign's run order
    config_id   INTEGER NOT NULL,
    repetition  INTEGER NOT NULL,   -- 1..R; warm-up runs count 0, -1, ...
    warmup      INTEGER NOT NULL,
    config      TEXT NOT NULL,
    status      TEXT NOT NULL,      -- running | ok | failed | timeout
    exit_code   INTEGER,
    started     REAL,
    ended       REAL,
    host        TEXT,
    attempts    INTEGER NOT NULL DEFAULT 0,
    stderr_tail TEXT,
    raw         TEXT,
    metrics     TEXT,               -- JSON {name: number}
    rows        TEXT,               -- JSON [{host, metric...}] (fio client/server)
    owner       TEXT                -- JSON {pid, start, host}: the storlab that started it
);
"""
#: Columns added after the first release: (name, type), added to older stores on open.
ADDED_COLUMNS = (("owner", "TEXT"),)

# The runs an adaptive design source asked for, in campaign order (fixed designs compute
# their plan from the configurations instead).
PLAN_SCHEMA = """
CREATE TABLE IF NOT EXISTS plan (
    key         TEXT PRIMARY KEY,   -- c<config_id>-r<repetition>
    seq         INTEGER NOT NULL,   -- position in the campaign's run order
    config_id   INTEGER NOT NULL,
    repetition  INTEGER NOT NULL,
    batch       INTEGER NOT NULL,   -- which ask of the source proposed it (0, 1, ...)
    phase       TEXT NOT NULL,      -- the source's word for it (screen, tune, confirm, ...)
    note        TEXT NOT NULL       -- JSON, the source's own bookkeeping
);
"""

#: The store's format, kept in SQLite's `user_version`: raised only when an older storlab
#: could not read or would damage the store (a new nullable column is not such a change).
#: A store of a higher format is refused, never reused.
FORMAT = 1
#: SQLite's `application_id` of a store (b"STLB"): set on every store a writer opens; an
#: existing database with another id, or with tables but not storlab's, is not a store.
APPLICATION_ID = 0x53544C42
#: The table that marks a store an earlier storlab made (its application_id is 0): every
#: store has had its `runs` table (a hand-made old one may have no other).
STORE_TABLES = frozenset({"runs"})


#: What storlab itself makes in a store, every format still read: its tables and the
#: indexes SQLite makes for their primary keys (and ANALYZE's statistics tables).
OWN_OBJECTS = frozenset({("table", "meta"), ("table", "configs"), ("table", "runs"),
                         ("table", "plan"), ("index", "sqlite_autoindex_meta_1"),
                         ("index", "sqlite_autoindex_runs_1"),
                         ("index", "sqlite_autoindex_plan_1"),
                         ("table", "sqlite_stat1"), ("table", "sqlite_stat4")})


def _own_columns() -> dict[str, set[str]]:
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(SCHEMA)
        db.executescript(PLAN_SCHEMA)
        return {t: {r[1] for r in db.execute(f"PRAGMA table_info({t})")}
                for t in ("meta", "configs", "runs", "plan")}
    finally:
        db.close()


def foreign_schema_object(db: sqlite3.Connection,
                          own: frozenset[tuple[str, str]] | None = OWN_OBJECTS
                          ) -> str | None:
    """The first schema object of `db` its maker (storlab) does not make, as a phrase
    ("trigger t on runs"), or None. A database a campaign ships runs its schema inside
    whoever opens it: a trigger on `runs` evaluating an endless recursive query hung root's
    `storlab run`, and could rewrite what storlab writes. With `own` None (a database of
    another program, Optuna's): only what runs code is refused (triggers, views, virtual
    tables)."""
    rows = db.execute("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master "
                      "ORDER BY type NOT IN ('trigger', 'view')").fetchall()  # code first
    columns = _own_columns() if own is not None else {}
    for kind, name, table, sql in rows:
        words = " ".join(sql.split()[:3]).upper()
        if kind in ("trigger", "view") or words.startswith("CREATE VIRTUAL"):
            return f"{kind if kind != 'table' else 'virtual table'} {name!r}" + (
                f" on {table!r}" if kind == "trigger" else "")
        if own is None:
            continue
        if (kind, name) not in own:
            return f"{kind} {name!r}" + (f" on {table!r}" if kind == "index" else "")
        if kind == "table" and name in columns:
            cols = db.execute(f"PRAGMA table_xinfo({name})").fetchall()
            extra = [c[1] for c in cols if c[1] not in columns[name] or c[6] != 0]
            if extra:
                return f"column {extra[0]!r} of table {name!r}"
            if re.search(r"\bCHECK\b", sql, re.IGNORECASE):
                return f"a CHECK constraint on table {name!r}"
    return None


def _version() -> str:
    from .. import __version__

    return __version__


DONE = ("ok",)
FAILED = ("failed", "timeout")


#: The runs' whole stdout and stderr, one file each per run, beside the store.
OUTPUT = ".output"
#: What storlab writes beside a store: SQLite's own files, the lock, the runs' whole output.
BESIDE = ("-wal", "-shm", "-journal", ".lock", OUTPUT)


def refuse_links(path: Path) -> None:
    """A store, or a file storlab writes beside it, that is a link (a device, a file
    elsewhere: storlab, as root, would write there) or a store that is not a regular file:
    refused in one line. An early, friendly check; the sandbox keeps programs from placing
    such links (the store must not lie in a run's writable directory, `Campaign`)."""
    for p in (path, *(path.with_name(path.name + s) for s in BESIDE)):
        if p.is_symlink():
            raise CampaignError(f"{p}: is a symbolic link; storlab writes its store and the "
                                "files beside it only where they are, never through a link "
                                "(remove it; for a store on another disk, put the "
                                "campaign's directory itself there, or make the campaign's "
                                "directory the link)")
    if path.exists() and not path.is_file():
        raise CampaignError(f"{path}: not a regular file, so not a campaign store")
    _refuse_shared_files(path)


#: The store's files another user must not own or be able to write (`refuse_foreign_files`),
#: and the runs' output directory (`OUTPUT`): storlab writes what the runs printed there.
TRUSTED = ("", "-wal", "-shm", "-journal", ".lock", OUTPUT)


#: A store file's identity, (st_dev, st_ino), by name.
Identities = dict[str, tuple[int, int]]


def refuse_foreign_files(path: Path, checked: Identities | None = None) -> Identities:
    """A writer's store (or its -wal/-shm/-journal/lock file) owned by another user, or
    writable by its group or others: refused in one line (`fileio.check_trusted_entry`,
    the rule for storlab's own directories as root). storlab writes what the runs printed
    into it (a root-only file a program read, say): in another user's file, that user would
    read it. Checked on the names (lstat); returns the identities (st_dev, st_ino) of the
    files checked. Given those (`checked`, after SQLite opened the store, before it
    writes), a file now at a name that is not one of them is judged itself; what SQLite
    holds is judged on its descriptors (`refuse_foreign_held`), whatever the names."""
    seen: Identities = {}
    for suffix in TRUSTED:
        name = os.path.abspath(path.with_name(path.name + suffix))
        st = _lstat(name)
        if st is None:
            continue
        seen[name] = (st.st_dev, st.st_ino)
        if checked is not None and checked.get(name) == seen[name]:
            continue  # the very file checked before
        refuse_foreign_entry(name, st, output=suffix == OUTPUT)
    return seen


def refuse_foreign_entry(name: str, st: os.stat_result, output: bool = False) -> None:
    """One of the store's files, or with `output` the runs' output directory
    (`<store>.output`), `name` (`st` its lstat, or the fstat of the descriptor held) owned
    by another user, or writable by its group or others: refused in one line with the way
    out (that user would read what the runs printed, or swap a run's file for a link)."""
    what, way_out = (("the runs' output directory", "remove it (storlab makes it again, "
                      "mode 0700) or run as its owner") if output else
                     ("campaign store", "copy the store to a file of your own (cp "
                      "--no-preserve=ownership) or run as its owner"))
    try:
        check_trusted_entry(name, st, what)
    except StorlabError as exc:
        raise CampaignError(f"{exc}; {way_out}") from None


def held_files() -> set[tuple[int, int, int]]:
    """The regular files this process holds open: (descriptor, st_dev, st_ino)."""
    held = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            st = os.fstat(int(fd))
        except OSError:
            continue  # closed meanwhile (listdir's own descriptor, another thread's)
        if stat.S_ISREG(st.st_mode):
            held.add((int(fd), st.st_dev, st.st_ino))
    return held


def refuse_foreign_held(before: set[tuple[int, int, int]]) -> None:
    """Every regular file opened since `before` (`held_files`: what SQLite opened for the
    store, its -wal and -shm) judged on its descriptor by the store's rule, whatever its
    name: a file swapped in at a checked name, then renamed away, is still caught (in a
    directory another user may change: root running somebody's campaign)."""
    for fd, _, _ in sorted(held_files() - before):
        try:
            st = os.fstat(fd)
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        refuse_foreign_entry(name, st)


def _lstat(p: str | Path) -> os.stat_result | None:
    """`p`'s lstat, None when missing; any other failure one line."""
    try:
        return os.lstat(p)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CampaignError(f"{p}: cannot check ({exc.strerror or exc})") from None


def _refuse_shared_files(path: Path) -> None:
    """SQLite opens the store and its -wal/-shm/-journal itself (even to read): one that
    is a hard link to somebody's file, or a device node, would be written by storlab as
    root. Each must be absent or a regular file with one link."""
    for p in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
        st = _lstat(p)
        if st is None:
            continue
        if not stat.S_ISREG(st.st_mode):
            raise CampaignError(f"{p}: not a regular file; SQLite would write it as the "
                                "store's own: remove it (storlab never makes such a file)")
        if st.st_nlink != 1:
            # a hard-link copy of the campaign (`cp -al`, snapshot tools) makes these too:
            # the file holds results, so the advice keeps its bytes and drops the link
            raise CampaignError(
                f"{p}: has {st.st_nlink} hard links (one may be somebody's file elsewhere, "
                "which SQLite would write as root); if it is this campaign's own (a "
                f"`cp -al` copy), give it a copy of its own: cp -p '{p}' '{p}.tmp' && "
                f"mv '{p}.tmp' '{p}'")


def refuse_linked_dirs(home: Path, name: str, field: str) -> None:
    """A `store:` or `workdir:` (`name`, inside the campaign's directory `home`) whose
    directories on the way are links: refused in one line. storlab makes its store, its
    locks and the runs' output files there, as root: through a directory link planted in
    the campaign's directory they would be made (and a file of that name truncated or
    replaced) where the link leads. An early, friendly check: the locks and output files
    are made from directories opened without following a link (`fileio.open_dir_beneath`)
    whatever it says. The scratch area itself may be a link (to a faster disk): only the
    directories above it count. `store:` and `workdir:` are names inside the campaign's
    directory (the spec says so), so the advice is to move or link that directory, or the
    scratch area itself, rather than to name another place."""
    at = home
    for part in Path(name).parent.parts:
        at = at / part
        if at.is_symlink():
            other = ("make the scratch area itself the link (workdir: its name)"
                     if field == "workdir" else "make the campaign's directory the link")
            raise CampaignError(f"field {field}: {name} leads through {at}, a symbolic link "
                                f"(to {link_to(at)}); storlab makes its store, locks and "
                                "output files only in directories of the campaign's own, "
                                "never through a link: to keep them on that disk, put the "
                                f"campaign's directory itself there, or {other}")


class Store:
    """SQLite store of a campaign's configurations and runs.

    `readonly=True` is how every reader opens it (results, status, report, analyses): the
    file is opened with SQLite's `mode=ro`, so reading never creates a store, never adds
    tables or columns to an older one, and works on a read-only copy (a read-only file or
    directory). A missing store is an error then, not a new empty file."""

    def __init__(self, path: str | Path, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._owner: str | None = None
        if readonly:
            refuse_links(self.path)  # the same one-line answer before a run as after it
            self.db = self._open_readonly()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        refuse_links(self.path)
        checked = refuse_foreign_files(self.path)
        try:
            if not self.path.exists():
                self._create()
            before = held_files()
            self.db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self.db.execute("PRAGMA trusted_schema=OFF")  # a belt: _check_format refuses
            self._check_format(self.db)  # a read: SQLite opens the store, -wal and -shm
            # opened, nothing written yet: judged on the names and on the descriptors
            try:
                refuse_foreign_files(self.path, checked)
                refuse_foreign_held(before)
            except CampaignError:
                self.db.close()
                raise
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(SCHEMA)
            self.db.executescript(PLAN_SCHEMA)
            have = {r[1] for r in self.db.execute("PRAGMA table_info(runs)")}
            for name, kind in ADDED_COLUMNS:
                if name not in have:  # a store written by an older storlab
                    self.db.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
            if self.db.execute("PRAGMA user_version").fetchone()[0] < FORMAT:
                self.db.execute(f"PRAGMA user_version={FORMAT}")
            if self.db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                self.db.execute(f"PRAGMA application_id={APPLICATION_ID}")  # an older store
        except sqlite3.DatabaseError as exc:
            if _is_full(exc):
                raise self._full(exc) from None
            raise CampaignError(f"{self.path}: not a usable campaign store ({exc})") from None

    def _create(self) -> None:
        """Make the store complete under a temporary name, then link it into place: three
        `storlab run`s started at once on a new campaign saw a store with no tables yet
        ("not a campaign store") when one was created in place. The first link wins; the
        others open the store it made."""
        import tempfile

        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".new",
                                       dir=self.path.parent)
        except OSError as exc:
            raise CampaignError(f"{self.path}: cannot create the store "
                                f"({exc.strerror or exc})") from None
        os.close(fd)
        try:
            db = sqlite3.connect(tmp, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(SCHEMA)
                db.executescript(PLAN_SCHEMA)
                db.execute(f"PRAGMA user_version={FORMAT}")
                db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            finally:
                db.close()
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                pass  # another process made it first: use theirs
            except OSError:  # no hard links here (vfat, some FUSE/SMB mounts): rename, which
                if not self.path.exists():  # replaces, so only when no store is there yet
                    os.replace(tmp, self.path)
        finally:
            for leftover in (tmp, tmp + "-wal", tmp + "-shm"):
                try:
                    os.unlink(leftover)
                except FileNotFoundError:
                    pass

    def _check_format(self, db: sqlite3.Connection) -> None:
        """Refuse a store a newer storlab wrote in a format this one does not know (it was
        reused and overwritten), and an SQLite database that is not a store at all (another
        `application_id`, or tables without storlab's: an application's database the
        campaign's `store:` names) before anything is written into it."""
        app = db.execute("PRAGMA application_id").fetchone()[0]
        tables = {r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite%'")}
        if app not in (0, APPLICATION_ID) or (app == 0 and tables
                                              and not STORE_TABLES <= tables):
            # somebody's database at the store's name (an application's, root's): storlab
            # would add its tables and write the runs into it
            db.close()
            what = (f"application_id {app:#x}" if app else
                    f"tables {', '.join(sorted(tables)[:5])}")
            raise CampaignError(f"{self.path}: not a storlab store (an SQLite database with "
                                f"{what}); storlab writes only into its own stores: give "
                                "the campaign another `store:` name")
        odd = foreign_schema_object(db)
        if odd is not None:
            db.close()
            raise CampaignError(f"{self.path}: not a storlab store as storlab makes it (it "
                                f"holds {odd}, which storlab never creates; a database's "
                                "schema runs inside whoever opens it): remove that, or "
                                "give the campaign another `store:` name")
        have = db.execute("PRAGMA user_version").fetchone()[0]
        if have > FORMAT:
            db.close()
            raise CampaignError(f"{self.path}: written by a newer storlab (store format "
                                f"{have}; this storlab {_version()} reads format {FORMAT} "
                                "and older): upgrade storlab to use it")

    def _open_readonly(self) -> sqlite3.Connection:
        if not self.path.is_file():
            raise CampaignError(f"{self.path}: no campaign store here (run the campaign "
                                "first, or give the campaign file whose store this is)")
        uri = self.path.resolve().as_uri()
        try:
            db = self._connect_ro(uri + "?mode=ro")
        except sqlite3.OperationalError:
            # A WAL store needs its -shm/-wal files; a reader cannot create them in a
            # read-only directory. No writer can work there either (it would need them
            # too), so the file cannot change under us: open it as immutable.
            if os.access(self.path.parent, os.W_OK):
                raise CampaignError(f"{self.path}: cannot open the store for reading") from None
            try:
                db = self._connect_ro(uri + "?mode=ro&immutable=1")
            except sqlite3.DatabaseError as exc:
                raise CampaignError(f"{self.path}: cannot open the store for reading "
                                    f"({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise CampaignError(f"{self.path}: not a usable campaign store ({exc})") from None
        self._check_format(db)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"meta", "configs", "runs"} <= tables:
            db.close()
            raise CampaignError(f"{self.path}: not a campaign store (it has no runs table)")
        self._tables = tables
        return db

    @staticmethod
    def _connect_ro(uri: str) -> sqlite3.Connection:
        db = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
        try:
            db.execute("PRAGMA trusted_schema=OFF")
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the file now
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing
    @contextmanager
    def writer_lock(self, wait: bool = False, scratch: str | Path | None = None,
                    on_event: Callable[[str, dict[str, Any]], None] | None = None,
                    home: str | Path | None = None) -> Iterator[None]:
        """Be the campaign's only writer for the duration: refused with one line naming the
        holder (CampaignLocked), or with `wait` wait for it. A lock left by a killed process
        is taken over (event `takeover`); then processes a killed predecessor left running
        for runs in `scratch` are killed (event `leftovers`), or, if one survives SIGKILL,
        the campaign is refused with one line. With `home` (the campaign's directory) both
        lock files are made in directories opened from it without following a link."""
        if self.readonly:
            raise CampaignError(f"{self.path}: opened read-only; runs are not written here")
        emit = on_event or (lambda kind, data: None)

        def waiting(holder: lock.Holder | None) -> None:
            emit("waiting", {"holder": holder.describe() if holder else "another process",
                             "store": str(self.path)})

        at = Path(home) if home is not None else None
        with lock.hold(self.path, wait=wait, on_wait=waiting, home=at) as (me, stale), \
                ExitStack() as scratch_lock:
            if stale is not None:
                emit("takeover", {"holder": stale.describe(), "store": str(self.path)})
            if scratch is not None:
                # The scratch directory too: two campaigns (two stores) in one directory share
                # it by default, and would delete each other's run directories (and the
                # leftover check below would take the other's runs for leftovers).
                scratch_lock.enter_context(lock.hold(
                    Path(os.path.abspath(scratch)), wait=wait, on_wait=waiting,
                    what="scratch directory is in use (by another campaign's store)",
                    home=at))
                self._reap(emit)
            self._owner = _dumps({"pid": me.pid, "start": me.start, "host": me.host})
            try:
                yield
            finally:
                self._owner = None

    def _reap(self, emit: Callable[[str, dict[str, Any]], None]) -> None:
        """Kill what earlier (killed) writers left running for this campaign's runs. We hold
        the lock, so every process tagged with a run of this campaign (its identity, a
        digest of this store's path: never another campaign's, wherever it lies) is such a
        leftover: running a run again next to it would measure both at once."""
        found = _proc_lifetime.tagged(TAG_ENV, campaign_identity(self.path))
        if not found:
            return
        emit("leftovers", {"processes": [(p.pid, p.command) for p in found],
                           "runs": sorted({Path(p.tag).name for p in found})})
        left = _proc_lifetime.kill_and_wait(found)
        if left:
            p = left[0]
            raise CampaignError(
                f"{self.path}: run {Path(p.tag).name}: process {p.pid} ({p.command[:80]}) left "
                "by an earlier storlab run of this campaign survived SIGKILL; wait until it "
                "is gone, then run again")

    def _check_writer(self) -> None:
        if self.readonly:
            raise CampaignError(f"{self.path}: opened read-only; runs are not written here")
        # Runs are written only under the lock: a second writer would repeat every run.
        if self._owner is None:
            raise CampaignError(f"{self.path}: runs are written only inside "
                                "Store.writer_lock() (one writer per campaign)")

    def _write(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        try:
            self.db.execute(sql, params)
        except sqlite3.OperationalError as exc:
            if _is_full(exc):
                raise self._full(exc) from None
            raise CampaignError(f"{self.path}: cannot write the store ({exc})") from None

    def _full(self, exc: Exception) -> CampaignError:
        return CampaignError(f"{self.path}: cannot write the store: {exc} (every finished run "
                             "is kept; free some space and run the same command to resume)")

    # ------------------------------------------------------------------ plan
    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def get_meta_object(self, key: str) -> dict[str, Any] | None:
        """The meta value `key` storlab writes as a JSON object (`design`, `source`,
        `measurement`), read by `decoded`; None when the store has none."""
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else self.decoded(row[0], "object", f"meta {key}", "value")

    def decoded(self, text: Any, shape: str, where: str, column: str) -> Any:
        """The one reader of the JSON storlab keeps in a store's columns, checked for the
        shape storlab writes there (`STORED_SHAPES`): a store a campaign ships may hold
        anything in them. Another shape is refused in one line naming the store, the row
        (`where`: table and key) and the column (CampaignError), never a traceback."""
        if text is None or text == "":
            if shape in ("numbers", "rows"):  # a run not finished yet
                return {} if shape == "numbers" else []
            why = "is empty"
        elif not isinstance(text, str):
            why = f"is {type(text).__name__}, not JSON text"
        else:
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                why = "is not JSON"
            else:
                why = _shape_refused(value, shape)
                if why is None:
                    if shape == "numbers":
                        return {k: (float("nan") if v is None else v)
                                for k, v in value.items()}
                    return value
        raise CampaignError(f"{self.path}: {where}: column {column} {why} (storlab writes "
                            f"{STORED_SHAPES[shape]} there); the store was changed, or not "
                            "written by storlab")

    def set_meta(self, key: str, value: str) -> None:
        self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def configs(self) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
        rows = self.db.execute("SELECT config_id, config, design FROM configs ORDER BY config_id")
        return [(int(i), self.decoded(c, "config", f"configs {i}", "config"),
                 self.decoded(d, "object", f"configs {i}", "design")) for i, c, d in rows]

    def save_configs(self, configs: Iterable[tuple[int, Mapping[str, Any], Mapping[str, Any]]]
                     ) -> None:
        """Record the plan once (so a resume and an export see exactly the same one)."""
        try:
            with self.db:
                self.db.execute("BEGIN")
                for cid, cfg, design in configs:
                    self.db.execute("INSERT OR REPLACE INTO configs VALUES (?, ?, ?)",
                                    (cid, _dumps(cfg), _dumps(design)))
        except sqlite3.OperationalError as exc:
            if _is_full(exc):
                raise self._full(exc) from None
            raise CampaignError(f"{self.path}: cannot write the store ({exc})") from None

    def plan_rows(self) -> list[dict[str, Any]]:
        """An adaptive campaign's planned runs, in campaign order."""
        cols = ["key", "seq", "config_id", "repetition", "batch", "phase", "note"]
        if self.readonly and "plan" not in self._tables:
            return []  # a store from before adaptive campaigns, read without migrating it
        rows = self.db.execute(f"SELECT {', '.join(cols)} FROM plan ORDER BY seq")
        return [dict(zip(cols, r), note=self.decoded(r[-1], "object", f"plan {r[0]}", "note"))
                for r in rows]

    def extend_plan(self, configs: Iterable[tuple[int, Mapping[str, Any], Mapping[str, Any]]],
                    rows: Iterable[tuple[str, int, int, int, int, str, Mapping[str, Any]]]
                    ) -> None:
        """Add new configurations and planned runs (key, seq, config_id, repetition, batch,
        phase, note) in one transaction: a kill leaves the batch wholly in or wholly out."""
        self._check_writer()
        with self.db:
            self.db.execute("BEGIN")
            for cid, cfg, design in configs:
                self.db.execute("INSERT INTO configs VALUES (?, ?, ?)",
                                (cid, _dumps(cfg), _dumps(design)))
            for key, seq, cid, rep, batch, phase, note in rows:
                self.db.execute("INSERT INTO plan VALUES (?, ?, ?, ?, ?, ?, ?)",
                                (key, seq, cid, rep, batch, phase, _dumps(note)))

    # ------------------------------------------------------------------ runs
    def statuses(self) -> dict[str, str]:
        return {k: s for k, s in self.db.execute("SELECT key, status FROM runs")}

    def mark_running(self, key: str, seq: int, config_id: int, repetition: int, warmup: bool,
                     config: Mapping[str, Any]) -> None:
        """Note that a run has been handed to an executor (kept if the process dies)."""
        self._check_writer()
        self._write(
            "INSERT INTO runs (key, seq, config_id, repetition, warmup, config, status, started,"
            " attempts, owner) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, 1, ?) ON CONFLICT(key)"
            " DO UPDATE SET status='running', seq=excluded.seq, started=excluded.started,"
            " ended=NULL, attempts=attempts+1, owner=excluded.owner",
            (key, seq, config_id, repetition, int(warmup), _dumps(config), time.time(),
             self._owner))

    def record(self, key: str, result: RunResult, host: str = "") -> None:
        """Store a finished run; committed before this returns."""
        self._check_writer()
        self._write(
            "UPDATE runs SET status=?, exit_code=?, started=?, ended=?, host=?, stderr_tail=?,"
            " raw=?, metrics=?, rows=? WHERE key=?",
            (result.status, result.exit_code, result.started, result.ended, host,
             result.stderr, result.raw, _dumps(result.metrics), _dumps(result.rows), key))

    def has_runs(self) -> bool:
        """Whether any measured (not warm-up) run is stored, without reading the runs."""
        return self.db.execute("SELECT 1 FROM runs WHERE warmup = 0 LIMIT 1").fetchone() \
            is not None

    def runs(self, with_raw: bool = False) -> list[dict[str, Any]]:
        cols = ["key", "seq", "config_id", "repetition", "warmup", "config", "status",
                "exit_code", "started", "ended", "host", "attempts", "stderr_tail", "metrics",
                "rows"] + (["raw"] if with_raw else [])
        out = []
        for r in self.db.execute(f"SELECT {', '.join(cols)} FROM runs ORDER BY seq"):
            d = dict(zip(cols, r))
            where = f"runs {d['key']}"
            d["config"] = self.decoded(d["config"], "config", where, "config")
            d["metrics"] = self.decoded(d["metrics"], "numbers", where, "metrics")
            d["rows"] = self.decoded(d["rows"], "rows", where, "rows")
            d["warmup"] = bool(d["warmup"])
            out.append(d)
        return out


def _is_full(exc: Exception) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code == sqlite3.SQLITE_FULL or "disk is full" in str(exc)


def _dumps(obj: Any) -> str:
    """JSON with NaN/inf written as null (strict JSON; read back as NaN for metrics)."""
    return json.dumps(to_jsonable(obj), sort_keys=False)


#: What storlab writes in each kind of JSON column (`Store.decoded`).
STORED_SHAPES = {
    "object": "a JSON object",
    "config": "a JSON object of factor values (strings, numbers, booleans or null)",
    "numbers": "a JSON object of numbers (null for NaN)",
    "rows": "a JSON list of objects",
}
_SCALARS = (str, int, float, bool, type(None))


def _shape_refused(value: Any, shape: str) -> str | None:
    """Why the decoded `value` is not of `shape` (`STORED_SHAPES`), or None."""
    if shape == "rows":
        if not isinstance(value, list):
            return f"is a JSON {_json_kind(value)}, not a list"
        bad = next((i for i, v in enumerate(value) if not isinstance(v, dict)), None)
        return None if bad is None else f"item {bad} is a JSON {_json_kind(value[bad])}"
    if not isinstance(value, dict):
        return f"is a JSON {_json_kind(value)}, not an object"
    for k, v in value.items():
        if shape == "config" and not isinstance(v, _SCALARS):
            return f"holds {k[:40]!r}: a JSON {_json_kind(v)}"
        if shape == "numbers" and (isinstance(v, bool)
                                   or not isinstance(v, (int, float, type(None)))):
            return f"holds {k[:40]!r}: a JSON {_json_kind(v)}, not a number"
    return None


def _json_kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean",
            type(None): "null"}.get(type(value), "number")

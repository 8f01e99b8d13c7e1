"""An Optuna SQLite storage as root may write it: judged before the runs (no code in an
existing database) and again at the time of use, after them (`held_sqlite`)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StorlabError
from ..fileio import check_trusted_output_dir, open_dir_beneath


def refuse_code_in_optuna_db(url: str, db: str, shown: str | None = None) -> None:
    """An existing Optuna database holding triggers, views or virtual tables is refused:
    Optuna makes none, and a database's schema runs inside whoever writes to it (a trigger
    evaluating an endless query hung root's storlab). Optuna's own tables and indexes
    change with its versions, so only what runs code is judged here. `shown`: `db`'s
    name in a message (`db` may be a /proc/self/fd name)."""
    import sqlite3

    from ..campaign.store import foreign_schema_object

    if not os.path.isfile(db):
        return
    shown = shown or db
    try:
        con = sqlite3.connect(Path(db).resolve().as_uri() + "?mode=ro", uri=True,
                              timeout=30.0)
        try:
            con.execute("PRAGMA trusted_schema=OFF")
            odd = foreign_schema_object(con, own=None)
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise StorlabError(f"--optuna-storage {url}: {shown} is not a usable SQLite database "
                           f"({exc})") from None
    if odd is not None:
        raise StorlabError(f"--optuna-storage {url}: {shown} holds {odd}, which Optuna never "
                           "creates (a database's schema runs inside whoever writes to it): "
                           "name a new database file")


#: SQLite's files beside a database (its journals), opened by SQLite by name as well
_SQLITE_SIDES = ("", "-journal", "-wal", "-shm")


@contextmanager
def held_sqlite(storage: str) -> Iterator[str]:
    """`storage` as the URL to open: a SQLite file judged again now, at the time of use,
    after the runs (the check before them cannot see what a campaign's command planted
    since in a directory it may write: `study.db` as a link to a root-only directory or to
    a device had root create a database there, or write SQLite pages over the device).
    Its directory is walked as root writes any output (`check_trusted_output_dir`), then
    held open (component by component, O_NOFOLLOW) and named to SQLite through
    /proc/self/fd (SQLite resolves that name to the real path again: what holds is that
    the path was just judged root's, and no program of the campaign runs any more after
    the runs, so nothing changes it meanwhile); the database and its
    journals must each be a regular file with one name, or not exist (a link, a device,
    a FIFO refused in one line), and an existing database holds no trigger or view.
    Other URLs (a server's database) as given."""
    if not storage.startswith("sqlite:///"):
        yield storage
        return
    db, sep, query = storage[len("sqlite:///"):].partition("?")  # SQLAlchemy's options
    if not db or db == ":memory:":
        yield storage
        return
    label = f"--optuna-storage {storage}"
    parent, name = os.path.dirname(db) or ".", os.path.basename(db)
    if os.geteuid() == 0:
        dfd = open_dir_beneath("/", check_trusted_output_dir(parent, "--optuna-storage"),
                               make=False, what="--optuna-storage")
    else:
        try:
            dfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise StorlabError(f"{label}: cannot open {parent} "
                               f"({exc.strerror or exc})") from None
    try:
        for side in _SQLITE_SIDES:
            try:
                st = os.lstat(name + side, dir_fd=dfd)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(st.st_mode):
                kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
                raise StorlabError(f"{label}: {os.path.join(parent, name + side)} is {kind} "
                                   "now (made during the runs?); the study was not exported "
                                   "(the tuning's results are in its store)")
            if st.st_nlink != 1 and os.geteuid() == 0:
                raise StorlabError(f"{label}: {os.path.join(parent, name + side)} has "
                                   f"{st.st_nlink} names (a hard link); the study was not "
                                   "exported (the tuning's results are in its store)")
        held = f"/proc/self/fd/{dfd}/{name}"
        refuse_code_in_optuna_db(storage, held, os.path.join(parent, name))
        yield f"sqlite:///{held}{sep}{query}"
    finally:
        os.close(dfd)

"""Every file storlab writes for the user goes through here.

A file is written to a temporary name in the target's directory, flushed to disk, and
renamed over the target (`os.replace`, atomic on POSIX). A kill at any moment leaves the
previous file or the complete new one, never a truncated one. A kill can leave a hidden
`.NAME.*.tmp` beside the target; the target itself is never partial.

Use `atomic_write` for anything written through a file object, and the helpers for the
usual payloads: `write_text`, `write_json`, `write_frame` (CSV/Parquet/JSON by suffix) and
`save_figure` (matplotlib). Errors become one-line `StorlabError`s naming the file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .errors import StorlabError

if TYPE_CHECKING:
    import pandas as pd


def _umask() -> int:
    # No API reads the umask without setting it; set it back at once.
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_target(path: str | Path, what: str = "") -> Path:
    """`path` as a Path, or a one-line error when it cannot be a file we write."""
    p = Path(path)
    label = f"{what} {p}" if what else str(p)
    if p.is_dir():
        raise StorlabError(f"{label}: is a directory, expected a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise StorlabError(f"{label}: directory {parent} does not exist")
    if not parent.is_dir():
        raise StorlabError(f"{label}: {parent} is not a directory")
    return p


@contextmanager
def atomic_write(path: str | Path, mode: str = "w", *, encoding: str | None = "utf-8",
                 what: str = "") -> Iterator[IO[Any]]:
    """Open a temporary file beside `path` for writing; on success it replaces `path`.

    `mode` is "w" (text) or "wb" (binary). On any exception the temporary file is removed
    and `path` is left as it was. `what` names the option in error messages ("-o").
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', not {mode!r}")
    p = check_target(path, what)
    label = f"{what} {p}" if what else str(p)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as exc:
        raise StorlabError(f"{label}: cannot write ({exc.strerror or exc})") from None
    try:
        try:
            # mkstemp makes 0600; give the file the mode a plain open() would have given.
            mode_bits = p.stat().st_mode & 0o7777 if p.exists() else 0o666 & ~_umask()
            os.fchmod(fd, mode_bits)
            with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding,
                           newline=None if "b" in mode else "") as fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, p)
        except OSError as exc:
            raise StorlabError(f"{label}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(p.parent)


def _fsync_dir(d: Path) -> None:
    """Make the rename itself durable (best effort: some filesystems refuse)."""
    try:
        fd = os.open(d if str(d) else ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_text(path: str | Path, text: str, what: str = "") -> Path:
    """Write `text` (UTF-8) atomically."""
    with atomic_write(path, "w", what=what) as fh:
        fh.write(text)
    return Path(path)


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
    try:
        with atomic_write(p, "wb", what=what) as fh:
            fig.savefig(fh, format=fmt, **savefig_kw)
    finally:
        if close:
            from .plotstyle import close as close_figure

            close_figure(fig)
    return p


# ---------------------------------------------------------------------------- reading

def read_text(path: str | Path, what: str = "") -> str:
    """A UTF-8 text file's contents; a missing file, a directory or binary data is a
    one-line StorlabError naming the file."""
    return _read_checked(path, what)[1]


def _read_checked(path: str | Path, what: str = "") -> tuple[bytes, str]:
    """`read_text`'s checks, returning the bytes as read and the text."""
    p = Path(path)
    label = f"{what} {p}" if what else str(p)
    try:
        data = p.read_bytes()
    except IsADirectoryError:
        raise StorlabError(f"{label}: is a directory, expected a file") from None
    except FileNotFoundError:
        raise StorlabError(f"{label}: file not found") from None
    except OSError as exc:
        raise StorlabError(f"{label}: cannot read ({exc.strerror or exc})") from None
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


def read_yaml(path: str | Path, what: str = "") -> Any:
    """A YAML file's data (the one YAML reader: spaces, campaigns, cluster files). A
    missing, binary or malformed file is a one-line StorlabError naming the file and,
    for bad YAML, the line."""
    import yaml

    p = Path(path)
    text = read_text(p, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        label = f"{what} {p}" if what else str(p)
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise StorlabError(f"{label}: not valid YAML ({where}{problem})") from None


#: Columns of a results table that describe a run rather than measure it: never a factor
#: or a response to the analyses and the report (one definition, imported everywhere).
BOOKKEEPING: frozenset[str] = frozenset({
    "run", "std_order", "replicate", "block", "center", "repetition", "status", "seed",
    "config_id", "run_id", "key", "started", "ended", "finished", "duration", "exit_code",
    "host", "attempts", "seq", "n_runs", "stderr", "stderr_tail"})


def read_table(path: str | Path, what: str = "") -> pd.DataFrame:
    """A results table from .csv, .parquet/.pq or .json (records), checked: readable,
    not empty, column names unique (pandas would rename a second `x` to `x.1`), and no
    infinite numbers (an overflowing value such as 1e400 reads as inf)."""
    import numpy as np
    import pandas as pd

    p = Path(path)
    label = f"{what} {p}" if what else str(p)
    suffix = p.suffix.lower()
    if p.is_dir():
        raise StorlabError(f"{label}: is a directory, expected a table file")
    if not p.exists():
        raise StorlabError(f"{label}: file not found")
    try:
        if suffix in (".parquet", ".pq"):
            df = pd.read_parquet(p)
            names = [str(c) for c in df.columns]
        else:
            data, text = _read_checked(p, what)
            if not text or text.isspace():  # (not text.strip(), without copying the text)
                raise StorlabError(f"{label}: empty file")
            import io

            if suffix == ".json":
                df = pd.read_json(io.StringIO(text))
                names = [str(c) for c in df.columns]
            else:
                import csv

                names = next(csv.reader(_lines(text)), [])
                # The bytes as read: pandas parses UTF-8 bytes directly, where text
                # would be encoded back first (0.1 s on a 24 MB table).
                df = pd.read_csv(io.BytesIO(data))
    except StorlabError:
        raise
    except Exception as exc:  # pandas and pyarrow raise many kinds; the user needs one line
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise StorlabError(f"{label}: cannot read as a table ({exc.__class__.__name__}: "
                           f"{first})") from None
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

"""A plain results CSV read straight into integer codes, without pandas.

`storlab importance` on a 500,000-row table spent half its time importing pandas (0.4 s
of CPU) to read a file of short labels and numbers. `read_coded_csv` reads such a file
with `numpy.loadtxt` (C) and numbers every column's distinct values in sorted order, as
`pandas.factorize(sort=True)` does on the frame `pandas.read_csv` makes. It reads only
what it can read exactly as pandas would: an ASCII file without quotes, spaces, tabs or
carriage returns, unique non-empty column names, every row complete, and column values
that are all integers, all decimal numbers or all labels (no empty or NA-like value, no
bool, nothing pandas reads as infinite). Anything else returns None and the caller reads
the file with pandas (`storlab.fileio.read_table`), errors included.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StorlabError
from ..fileio import read_input_bytes
from ..limits import MAX_COLUMNS

#: Integers and decimal numbers as pandas' C parser reads them (no spaces: refused above).
_INT = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: Lines sampled to choose each column's reading (label width; number or label).
_SAMPLE_BYTES = 1 << 16


@dataclass
class CodedColumn:
    """One column: `codes` into `values` (its distinct values, sorted, as plain Python
    scalars), or for a column of many distinct numbers only `data` (float per row)."""

    values: list[Any]
    codes: np.ndarray | None = None
    numeric: bool = False
    data: np.ndarray | None = None

    def floats(self) -> np.ndarray:
        """The column's numbers per row (a numeric column only)."""
        if self.data is not None:
            return self.data
        assert self.codes is not None
        return np.asarray(self.values, dtype=float)[self.codes]


@dataclass
class CodedTable:
    names: list[str]
    n_rows: int
    columns: dict[str, CodedColumn]


def read_coded_csv(path: str | Path, numbers: set[str], many: int = 10
                   ) -> CodedTable | None:
    """The CSV at `path` as coded columns, or None when it is not a plain table (see the
    module's text). Columns in `numbers` are read as floats per row; so is a column whose
    first lines hold more than `many` distinct numbers (a measurement)."""
    try:  # (the reader of the pandas path says what is wrong with the file)
        data = read_input_bytes(path)  # one descriptor, never blocking on a FIFO
    except (StorlabError, OSError):
        return None
    if not data.isascii() or any(c in data for c in (b'"', b" ", b"\t", b"\r", b"\x00")):
        return None
    end = data.find(b"\n")
    names = data[:max(end, 0)].decode().split(",")
    if end < 0 or len(names) > MAX_COLUMNS or "" in names or len(set(names)) != len(names):
        return None
    sample = [ln.split(b",") for ln in data[end + 1:end + 1 + _SAMPLE_BYTES].split(b"\n")[:-1]
              if ln]
    if not sample or any(len(r) != len(names) for r in sample):
        return None
    kinds: list[str] = []
    for j, name in enumerate(names):
        seen = {r[j] for r in sample}
        # more than `many` distinct numbers already in the sample ("1" and "1.0" are one)
        if name in numbers or (len(seen) > many
                               and all(_NUMBER.fullmatch(v.decode()) for v in seen)
                               and len({float(v) for v in seen}) > many):
            kinds.append("f8")
        else:
            kinds.append(f"S{max(8, -(-2 * max(map(len, seen)) // 8) * 8)}")
    for _ in range(3):  # a label wider than the sample's twice: read again, wider
        try:
            table = np.loadtxt(io.BytesIO(data), delimiter=",", skiprows=1, comments=None,
                               quotechar=None,
                               dtype=[(f"c{j}", k) for j, k in enumerate(kinds)], ndmin=1)
        except ValueError:  # a label among numbers, a short or long row
            return None
        # Each column as a view of the rows' bytes (no copy): labels as big-endian words.
        rows = table.view(np.uint8).reshape(len(table), -1)
        offs = [table.dtype.fields[f"c{j}"][1] for j in range(len(kinds))]
        cols = [table[f"c{j}"] if k == "f8" else rows[:, o:o + int(k[1:])]
                for j, (k, o) in enumerate(zip(kinds, offs))]
        wide = [j for j, k in enumerate(kinds) if k[0] == "S" and cols[j][:, -1].any()]
        if not wide:
            break
        for j in wide:
            kinds[j] = f"S{4 * int(kinds[j][1:])}"
    else:
        return None
    if len(table) == 0:
        return None
    columns: dict[str, CodedColumn] = {}
    for j, name in enumerate(names):
        col = cols[j]
        if kinds[j] == "f8":
            if np.isinf(col).any():  # pandas' reader names the value
                return None
            columns[name] = CodedColumn([], numeric=True, data=col)
            continue
        coded = _labels(col)
        if coded is None:
            return None
        columns[name] = coded
    return CodedTable(names, len(table), columns)


def _labels(col: np.ndarray) -> CodedColumn | None:
    """A fixed-width bytes column (rows x bytes, zero-padded) as codes into its sorted distinct values, typed as pandas
    types the column (all integers: int; all numbers: float; else str), or None when
    pandas would read a value otherwise (empty, NA-like, bool, inf, two spellings of one
    number)."""
    # Native-order words: arithmetic on the big-endian strided view converts on every
    # operation (3x slower than converting once).
    words = col.view(">u8").astype(np.uint64)
    codes, uniq = _factorize(words[:, 0])
    n = len(uniq)
    for k in range(1, words.shape[1]):
        if not words[:, k].any():
            break
        c, more = _factorize(words[:, k])
        codes, n = dense_ids(codes * len(more) + c, n * len(more))
        uniq = None
    if uniq is not None:  # labels of up to 8 bytes: each is its word
        texts = [int(w).to_bytes(8, "big").rstrip(b"\0").decode() for w in uniq]
    else:  # longer: read one row of each
        first = np.empty(n, dtype=np.int64)
        first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
        texts = [bytes(b).rstrip(b"\0").decode() for b in col[first]]
    if all(_INT.fullmatch(t) for t in texts):
        values: list[Any] = [int(t) for t in texts]
        if any(abs(v) >= 2**63 for v in values):
            return None
    elif all(_NUMBER.fullmatch(t) for t in texts):
        values = [float(t) for t in texts]
        if not all(math.isfinite(v) for v in values):
            return None
    else:
        if any(_number_like(t) for t in texts):
            return None
        return CodedColumn(texts, codes)
    if len(set(values)) != len(values):  # "7" and "07": one number to pandas
        return None
    order = np.argsort(np.asarray(values, dtype=float if isinstance(values[0], float)
                                  else np.int64), kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    return CodedColumn([values[i] for i in order], rank[codes], numeric=True)


#: What pandas' reader turns into NaN or bool (beside what float() reads, e.g. "inf").
_SPECIAL = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
            "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
            "True", "False", "TRUE", "FALSE", "true", "false"}


def _number_like(t: str) -> bool:
    if t in _SPECIAL or _NUMBER.fullmatch(t):
        return True
    try:
        float(t)
    except ValueError:
        return False
    return True


def _factorize(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes of `key`'s distinct values in increasing order, and those values: by a hash
    table (multiplicative hashing) when no two distinct values share a bucket (linear, a
    few passes), else by sorting."""
    for bits in (16, 20):
        # In place, and the bucket (< 2**20) viewed as int64, not copied: 40% faster.
        h = key * np.uint64(0x9E3779B97F4A7C15)
        h >>= np.uint64(64 - bits)
        h = h.view(np.int64)
        rep = np.zeros(1 << bits, dtype=np.uint64)
        rep[h] = key
        if np.array_equal(rep[h], key):
            present = np.flatnonzero(np.bincount(h, minlength=1 << bits))
            order = np.argsort(rep[present], kind="stable")
            code = np.empty(1 << bits, dtype=np.int64)
            code[present[order]] = np.arange(len(present))
            return code[h], rep[present[order]]
    uniq, inv = np.unique(key, return_inverse=True)
    return inv.ravel().astype(np.int64), uniq


def dense_ids(key: np.ndarray, total: int) -> tuple[np.ndarray, int]:
    """Number the distinct values of `key` (ints in [0, total)) 0, 1, ... in increasing
    order (as `np.unique(key, return_inverse=True)` does), and how many there are.

    By counting when the key space is small against the rows, else by hashing
    (`pd.factorize`): both linear, where `np.unique` sorts the rows (3 s on 500,000)."""
    if total <= max(4 * len(key), 1 << 16):
        present = np.bincount(key, minlength=total) > 0
        rank = np.cumsum(present) - 1
        return rank[key], int(rank[-1]) + 1 if total else 0
    import pandas as pd

    ids, uniq = pd.factorize(key, sort=True)
    return ids.astype(np.int64, copy=False), len(uniq)

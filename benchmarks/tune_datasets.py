"""Complete measured configuration datasets for the tuning benchmark (benchmarks/data/).

`load_dataset(name)` returns `(table, response, goal, params)`: one row per configuration,
the parameter columns, the measured response, and whether lower or higher is better.

Most files keep the data exactly as published (one-hot 0/1 columns for alternative
features). By default the loader folds each group of mutually exclusive one-hot columns
into one parameter (BDBC's five page-size columns become `page_size_kib`), so that such a
dataset is a full factorial over its parameters: every combination a sampler can propose
was measured, and none is forbidden. `raw=True` returns the file's own columns instead.
A dataset whose feature model forbids some combinations (MongoDB: the journal's commit
interval and compressor mean nothing without a journal) says so with `constraints(name)`,
written over its parameters as a user writes them in a space file; the table then holds
every combination those constraints allow, each once.

    .venv/bin/python benchmarks/tune_datasets.py     # prints a summary of each dataset
"""

from __future__ import annotations

import gzip
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from storlab.errors import StorlabError

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class _Spec:
    file: str
    response: str
    goal: str
    rows: int
    # new parameter -> {one-hot column -> value}; the columns of a group are exclusive
    groups: dict[str, dict[str, object]]
    # new parameter -> (ordered columns, function from their 0/1 tuple to a value)
    derived: dict[str, tuple[tuple[str, ...], dict[tuple[int, ...], object]]]
    sep: str = ","
    # measured columns that are not the response (another metric of the same runs)
    other: tuple[str, ...] = ()
    # the feature model's constraints over the folded parameters (space-file syntax)
    constraints: tuple[str, ...] = ()


_SPECS: dict[str, _Spec] = {
    # Berkeley DB C edition (SPL Conqueror measurements, via DeepPerf's Data/BDBC_AllNumeric.csv)
    "bdbc": _Spec(
        "bdbc.csv", "PERF", "minimize", 2560,
        groups={
            "page_size_kib": {"PS1K": 1, "PS4K": 4, "PS8K": 8, "PS16K": 16, "PS32K": 32},
            "cache_size_mib": {"CS16MB": 16, "CS32MB": 32, "CS64MB": 64, "CS512MB": 512},
        },
        derived={}),
    # Berkeley DB Java edition (SPL Conqueror measurements, via DeepPerf's Data/BDBJ_AllNumeric.csv)
    "bdbj": _Spec(
        "bdbj.csv", "PERF", "minimize", 180,
        groups={
            "log_file_size_mib": {"S1MiB": 1, "S100MiB": 100},
        },
        derived={
            # OldIO xor NewIO; NewIO has NIOBase+NIOType and ChunkedNIO xor SingleWriteNIO,
            # and DirectNIO optional: five I/O modes in all.
            "io_mode": (("OldIO", "NewIO", "NIOBase", "NIOType", "ChunkedNIO",
                         "SingleWriteNIO", "DirectNIO"), {
                (1, 0, 0, 0, 0, 0, 0): "old",
                (0, 1, 1, 1, 1, 0, 0): "nio_chunked",
                (0, 1, 1, 1, 1, 0, 1): "nio_chunked_direct",
                (0, 1, 1, 1, 0, 1, 0): "nio_single_write",
                (0, 1, 1, 1, 0, 1, 1): "nio_single_write_direct",
            }),
            # the verifier needs the in-compressor
            "checker": (("INCompressor", "Verifier"), {
                (0, 0): "none", (1, 0): "in_compressor", (1, 1): "in_compressor_verifier",
            }),
            # ITracing, Tracing and TracingLevel go together; Severe xor Finest under it
            "tracing": (("ITracing", "Tracing", "TracingLevel", "Severe", "Finest"), {
                (0, 0, 0, 0, 0): "off",
                (1, 1, 1, 1, 0): "severe",
                (1, 1, 1, 0, 1): "finest",
            }),
        }),
    # PostgreSQL (timm/moot optimize/systems/PostgreSQL.csv, PromiseTune's data): the first
    # complete pass over the 2^5 x 3^3 grid; `root` is constant and dropped
    "postgresql": _Spec("postgresql.csv", "Performance-", "minimize", 864, groups={}, derived={}),
    # HSQLDB (mcguenther/configurable-workload-uncertainty, twins-paper-data/HSQLDB): every
    # valid configuration of its feature model, PolePosition run time; `energy` is dropped
    "hsqldb": _Spec(
        "hsqldb.csv", "performance", "minimize", 864, sep=";", other=("energy",),
        groups={
            "txc": {"txc_mvlocks": "mvlocks", "txc_mvcc": "mvcc", "txc_locks": "locks"},
        },
        derived={
            # encryption has AES xor Blowfish under it
            "encryption": (("encryption", "crypt_aes", "crypt_blowfish"), {
                (0, 0, 0): "none", (1, 1, 0): "aes", (1, 0, 1): "blowfish",
            }),
            # memory xor cached tables; a cached table has a small, a large or the default
            # cache
            "table": (("memory_tables", "cached_tables", "small_cache", "large_cache"), {
                (1, 0, 0, 0): "memory", (0, 1, 0, 0): "cached",
                (0, 1, 1, 0): "cached_small_cache", (0, 1, 0, 1): "cached_large_cache",
            }),
            # detailed logging needs logging
            "logging": (("logging", "detailed_logging"), {
                (0, 0): "off", (1, 0): "on", (1, 1): "detailed",
            }),
        }),
    # MongoDB 4.0.1 (mcguenther/configurable-workload-uncertainty, twins-paper-data/MongoDB):
    # the storage options of its sweep with SSL, network compression and the wire object
    # check off (570 of the 6,840 rows), PolePosition run time; a journal's compressor and
    # commit interval exist only with the journal on (the table keeps 1 ms without one)
    "mongodb": _Spec(
        "mongodb.csv", "performance", "minimize", 570, sep=";", groups={}, derived={},
        constraints=('journal == 1 or (journal_compressor == "none" and '
                     'journal_commit_interval_ms == 1)',)),
}

NAMES = tuple(_SPECS)


def dataset_names(arg: str) -> list[str]:
    """The datasets a comma-separated `--datasets` value names; an unknown one is one line
    on stderr and exit 2."""
    names = [n.strip() for n in arg.split(",") if n.strip()]
    for name in names:
        if name not in NAMES:
            print(f"--datasets: unknown dataset {name!r} (known: {', '.join(NAMES)})",
                  file=sys.stderr)
            sys.exit(2)
    return names


def constraints(name: str) -> tuple[str, ...]:
    """The dataset's constraints over its folded parameters (empty: a full factorial)."""
    spec = _SPECS.get(name.lower())
    if spec is None:
        raise StorlabError(f"dataset {name!r}: unknown (known: {', '.join(NAMES)})")
    return spec.constraints


def _read(path: Path, sep: str = ",") -> pd.DataFrame:
    if path.exists():
        return pd.read_csv(path, sep=sep)
    gz = path.with_name(path.name + ".gz")
    if gz.exists():
        with gzip.open(gz, "rt") as f:
            return pd.read_csv(f, sep=sep)
    raise StorlabError(f"{path}: dataset file missing (neither it nor {gz.name} exists)")


def load_dataset(name: str, raw: bool = False) -> tuple[pd.DataFrame, str, str, list[str]]:
    """(table, response, goal, params) of one dataset; see the module docstring."""
    spec = _SPECS.get(name.lower())
    if spec is None:
        raise StorlabError(f"dataset {name!r}: unknown (known: {', '.join(NAMES)})")
    path = DATA / spec.file
    df = _read(path, spec.sep).drop(columns=list(spec.other))
    if len(df) != spec.rows or spec.response not in df.columns:
        raise StorlabError(f"{path}: expected {spec.rows} rows with column {spec.response!r}, "
                           f"found {len(df)} rows and columns {list(df.columns)}")
    y = pd.to_numeric(df[spec.response], errors="coerce")
    if y.isna().any() or not all(math.isfinite(v) for v in y):
        raise StorlabError(f"{path}: column {spec.response!r} has non-numeric values")
    if raw:
        params = [c for c in df.columns if c != spec.response and df[c].nunique() > 1]
        return df, spec.response, spec.goal, params

    out = pd.DataFrame(index=df.index)
    used: set[str] = set()
    for new, cols in spec.groups.items():
        block = df[list(cols)]
        if not (block.sum(axis=1) == 1).all():
            raise StorlabError(f"{path}: columns {list(cols)} are not exactly one-hot")
        out[new] = block.idxmax(axis=1).map(cols)
        used.update(cols)
    for new, (cols, table) in spec.derived.items():
        keys = [tuple(int(v) for v in row) for row in df[list(cols)].itertuples(index=False)]
        bad = sorted({k for k in keys if k not in table})
        if bad:
            raise StorlabError(f"{path}: columns {list(cols)} take combination(s) {bad} "
                               f"outside the feature model")
        out[new] = [table[k] for k in keys]
        used.update(cols)
    for c in df.columns:
        if c == spec.response or c in used or df[c].nunique() < 2:
            continue
        # 0/1 options and numeric levels as integers; named levels (a compressor) as text
        out[c] = df[c].astype(int) if pd.api.types.is_numeric_dtype(df[c]) else df[c]
    params = list(out.columns)
    out[spec.response] = y.astype(float)
    if out.duplicated(params).any():
        raise StorlabError(f"{path}: repeated configurations after folding the one-hot columns")
    return out, spec.response, spec.goal, params


def feasible_grid(name: str) -> pd.DataFrame:
    """Every combination of the dataset's parameter levels that its constraints allow (the
    full factorial when it has none), as a space file with those constraints defines it."""
    import itertools

    from storlab.space import Space
    from storlab.tune.evaluate import space_from_table

    df, _, _, params = load_dataset(name)
    space = Space.from_dict({"factors": [f.to_dict() for f in
                                         space_from_table(df, params).factors],
                             "constraints": list(constraints(name))}, source=name)
    grid = pd.DataFrame(list(itertools.product(*(sorted(df[p].unique()) for p in params))),
                        columns=params)
    return grid[space.feasible(grid)].reset_index(drop=True)


def summary(name: str) -> dict[str, object]:
    """Size, optimum and how many configurations lie within 1 % / 5 % of it."""
    df, resp, goal, params = load_dataset(name)
    y = df[resp]
    best = y.min() if goal == "minimize" else y.max()
    gap = (y - best) / abs(best) if goal == "minimize" else (best - y) / abs(best)
    full = math.prod(df[p].nunique() for p in params)
    return {"dataset": name, "configs": len(df), "full_factorial": full,
            "feasible": len(feasible_grid(name)) if constraints(name) else full,
            "params": len(params), "levels": {p: int(df[p].nunique()) for p in params},
            "response": resp, "goal": goal, "optimum": float(best),
            "within_1pct": int((gap <= 0.01).sum()), "within_5pct": int((gap <= 0.05).sum()),
            "median_gap": float(gap.median())}


if __name__ == "__main__":
    for n in NAMES:
        print(summary(n))

"""The campaign store: one SQLite file in the campaign's directory, one row per run.

One writer (the process that runs the campaign) commits each run the moment it finishes;
WAL journaling with synchronous=FULL means a run that was committed survives a SIGKILL (and
a power cut) of the writer. A run is first written as `running`; if the process dies the row
stays `running` and the next `storlab run` repeats it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..jsonutil import to_jsonable
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
    key         TEXT PRIMARY KEY,   -- c<config_id>-r<repetition> or c<config_id>-w<i>
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
    rows        TEXT                -- JSON [{host, metric...}] (fio client/server)
);
"""

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

DONE = ("ok",)
FAILED = ("failed", "timeout")


class Store:
    """SQLite store of a campaign's configurations and runs."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(SCHEMA)
            self.db.executescript(PLAN_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise CampaignError(f"{self.path}: not a usable campaign store ({exc})") from None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ plan
    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def configs(self) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
        rows = self.db.execute("SELECT config_id, config, design FROM configs ORDER BY config_id")
        return [(int(i), json.loads(c), json.loads(d)) for i, c, d in rows]

    def save_configs(self, configs: Iterable[tuple[int, Mapping[str, Any], Mapping[str, Any]]]
                     ) -> None:
        """Record the plan once (so a resume and an export see exactly the same one)."""
        with self.db:
            self.db.execute("BEGIN")
            for cid, cfg, design in configs:
                self.db.execute("INSERT OR REPLACE INTO configs VALUES (?, ?, ?)",
                                (cid, _dumps(cfg), _dumps(design)))

    def plan_rows(self) -> list[dict[str, Any]]:
        """An adaptive campaign's planned runs, in campaign order."""
        cols = ["key", "seq", "config_id", "repetition", "batch", "phase", "note"]
        rows = self.db.execute(f"SELECT {', '.join(cols)} FROM plan ORDER BY seq")
        return [dict(zip(cols, r), note=json.loads(r[-1])) for r in rows]

    def extend_plan(self, configs: Iterable[tuple[int, Mapping[str, Any], Mapping[str, Any]]],
                    rows: Iterable[tuple[str, int, int, int, int, str, Mapping[str, Any]]]
                    ) -> None:
        """Add new configurations and planned runs (key, seq, config_id, repetition, batch,
        phase, note) in one transaction: a kill leaves the batch wholly in or wholly out."""
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
        self.db.execute(
            "INSERT INTO runs (key, seq, config_id, repetition, warmup, config, status, started,"
            " attempts) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, 1) ON CONFLICT(key) DO UPDATE"
            " SET status='running', seq=excluded.seq, started=excluded.started, ended=NULL,"
            " attempts=attempts+1", (key, seq, config_id, repetition, int(warmup),
                                     _dumps(config), time.time()))

    def record(self, key: str, result: RunResult, host: str = "") -> None:
        """Store a finished run; committed before this returns."""
        self.db.execute(
            "UPDATE runs SET status=?, exit_code=?, started=?, ended=?, host=?, stderr_tail=?,"
            " raw=?, metrics=?, rows=? WHERE key=?",
            (result.status, result.exit_code, result.started, result.ended, host,
             result.stderr, result.raw, _dumps(result.metrics), _dumps(result.rows), key))

    def runs(self, with_raw: bool = False) -> list[dict[str, Any]]:
        cols = ["key", "seq", "config_id", "repetition", "warmup", "config", "status",
                "exit_code", "started", "ended", "host", "attempts", "stderr_tail", "metrics",
                "rows"] + (["raw"] if with_raw else [])
        out = []
        for r in self.db.execute(f"SELECT {', '.join(cols)} FROM runs ORDER BY seq"):
            d = dict(zip(cols, r))
            d["config"] = json.loads(d["config"])
            d["metrics"] = _loads_numbers(d["metrics"])
            d["rows"] = json.loads(d["rows"]) if d["rows"] else []
            d["warmup"] = bool(d["warmup"])
            out.append(d)
        return out


def _dumps(obj: Any) -> str:
    """JSON with NaN/inf written as null (strict JSON; read back as NaN for metrics)."""
    return json.dumps(to_jsonable(obj), sort_keys=False)


def _loads_numbers(text: str | None) -> dict[str, float]:
    if not text:
        return {}
    return {k: (float("nan") if v is None else v) for k, v in json.loads(text).items()}

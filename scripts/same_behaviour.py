"""Check that two storlab source trees behave the same on small campaigns: the same store
contents (meta, configurations, plan, runs: keys, order, status, metrics) and the same
JSON of `run`, `results`, `status`, `tune` and `confirm`, times, paths and hosts aside.

    git worktree add /tmp/base main
    python scripts/same_behaviour.py /tmp/base/src src

Each tree runs the same campaign files in its own directory, with the CLI as a user runs
it (`python -m storlab`); runs are a deterministic Python one-liner under the command
runner (sandboxed, as every program run). Prints what differs; exits 1 when anything does.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

FACTORS = [{"name": "a", "kind": "integer", "range": [1, 4]},
           {"name": "c", "kind": "categorical", "values": ["x", "y"]},
           {"name": "d", "kind": "ordinal", "values": [1, 2]}]
PROGRAM = ("import json,sys; a,c,d=sys.argv[1:]; "
           "print(json.dumps({'y': int(a)*1.5+(c=='y')+int(d)**2}))")
DESIGNS = {
    "full": ({"kind": "full"}, {"repetitions": 2, "warmup": 1}),
    "lhs": ({"kind": "lhs", "runs": 5}, {}),
    "tune": ({"kind": "tune", "budget": 10, "strategy": "tpe", "objectives": ["y"],
              "screen_runs": 4}, {}),
}
#: Fields that differ between any two runs (times, hosts, paths).
VOLATILE = {"started", "ended", "host", "store", "campaign", "stdout", "stderr", "raw",
            "attempts", "pid", "output", "owner"}


def write(d: Path, design: dict[str, Any], extra: dict[str, Any]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "same", "seed": 3, "randomize": True,
            "space": {"factors": FACTORS, "responses": [{"name": "y", "goal": "maximize"}]},
            "design": design, **extra,
            "runner": {"type": "command", "options": {
                "command": [sys.executable, "-c", PROGRAM, "{a}", "{c}", "{d}"],
                "json_metrics": {"y": "y"}}}}
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def cli(src: str, root: Path, *args: str) -> Any:
    env = {**os.environ, "PYTHONPATH": src}
    p = subprocess.run([sys.executable, "-m", "storlab", *args], env=env, text=True,
                       capture_output=True, timeout=600)
    if p.returncode not in (0, 130):  # the one error line, its directory said as <root>
        return {"exit": p.returncode,
                "stderr": p.stderr.replace(str(root), "<root>").strip().splitlines()[-1:]}
    try:
        return clean(json.loads(p.stdout))
    except json.JSONDecodeError:
        return {"exit": p.returncode, "text": p.stdout}


def clean(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items() if k not in VOLATILE}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v


def store_dump(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    db = sqlite3.connect(path)
    out: dict[str, Any] = {}
    for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' "
                               "ORDER BY name"):
        cur = db.execute(f"SELECT * FROM {table}")
        cols = [c[0] for c in cur.description]
        rows = [{c: v for c, v in zip(cols, r) if c not in VOLATILE} for r in cur]
        if table == "meta":  # the campaign's own path differs by directory
            rows = [r for r in rows if r.get("key") != "campaign"]
        out[table] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    db.close()
    return out


def behaviour(src: str, root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (design, extra) in DESIGNS.items():
        f = write(root / name, design, extra)
        if name == "tune":
            out[name] = {"tune": cli(src, root, "tune", str(f), "-q", "--json")}
        else:
            out[name] = {"run": cli(src, root, "run", str(f), "-q", "--json"),
                         "again": cli(src, root, "run", str(f), "-q", "--json")}
        out[name]["results"] = cli(src, root, "results", str(f), "--json")
        out[name]["status"] = cli(src, root, "status", str(f), "--json")
        out[name]["store"] = store_dump(f.parent / "campaign.db")
    f = root / "full" / "campaign.yaml"
    out["fixed-as-tune"] = {"tune": cli(src, root, "tune", str(f), "--budget", "6", "-q", "--json"),
                            "store": store_dump(f.parent / "campaign-tune.db")}
    out["confirm"] = {"confirm": cli(src, root, "confirm", str(f), "-c", "a=4,c=y,d=2", "-a",
                                     "a=1,c=x,d=1", "-n", "2", "-q", "--json"),
                      "other": cli(src, root, "confirm", str(f), "-c", "a=3,c=y,d=2", "-a",
                                   "a=1,c=x,d=1", "-n", "2", "-q", "--json"),
                      "store": store_dump(f.parent / "confirm.db")}
    return out


def diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in diff(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {str(a)[:200]} != {str(b)[:200]}"]


def main() -> int:
    base, new = (str(Path(p).resolve()) for p in sys.argv[1:3])
    with tempfile.TemporaryDirectory() as tmp:
        a = behaviour(base, Path(tmp) / "base")
        b = behaviour(new, Path(tmp) / "new")
    out = diff(a, b)
    for line in out:
        print(line)
    n = sum(len(v.get("store", {}).get("runs", [])) for v in a.values())
    print(f"{'differences: ' + str(len(out)) if out else 'the same'} "
          f"({len(a)} campaigns, {n} stored runs compared)")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())

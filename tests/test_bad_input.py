"""The regression guard for bad input (issue 12): every command, every kind of bad input.

Each case runs the real `storlab` (a process of its own, forked from one that has started
the program, memory capped so that a blow-up fails instead of swapping) in a directory of
small input files and asserts:

- exit code 2;
- stderr is one line, `storlab: error: ...`, with no traceback (usage errors that click
  itself detects, such as `--runs abc`, print click's usual usage message instead);
- nothing in the directory was created, changed or left half-written.

`test_every_option_has_a_case` fails when a command gains a numeric or path option (or a
new command appears) without a case here: add one when you add an option.
"""

from __future__ import annotations

import inspect
import json
import os
import shlex
import typing
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
MEMORY_CAP = 6 * 2**30  # bytes of address space per case: a blow-up raises, not swaps


@dataclass(frozen=True)
class Case:
    command: str           # "design", "estimate fit", ...
    args: str              # shell-split; run in the case directory
    covers: tuple[str, ...]  # the options/arguments (first spelling) this case exercises
    usage: bool = False    # detected by click itself: its usual usage message
    expect: str = ""       # a substring of the message

    @property
    def id(self) -> str:
        return f"{self.command} {self.args}"[:80]


def C(command: str, args: str, *covers: str, usage: bool = False, expect: str = "") -> Case:
    return Case(command, args, covers, usage, expect)


SPACE = """name: t
factors:
  - {name: A, kind: integer, range: [1, 8]}
  - {name: B, kind: integer, range: [10, 20]}
  - {name: C, kind: categorical, values: [x, y]}
responses:
  - {name: y, goal: maximize}
"""

CAMPAIGN = """name: c
space: space.yaml
design: {kind: full}
runner: {type: command, options: {command: ["true"], regex_metrics: ['t (?P<t>\\d+)']}}
repetitions: %s
setup: %s
"""


def make_inputs(d: Path) -> None:
    """The files the cases point at: good ones, and bad ones of every kind."""
    rng = np.random.default_rng(1)
    (d / "space.yaml").write_text(SPACE)
    grid = pd.DataFrame([(a, b, c) for a in (1, 8) for b in (10, 20) for c in "xy"],
                        columns=["A", "B", "C"])
    res = pd.concat([grid, grid], ignore_index=True)
    res["y"] = 100 + 10 * (res.A == 8) + rng.normal(0, 1, len(res))
    res["bench"] = ["b1", "b2"] * (len(res) // 2)
    res["m1"] = rng.normal(5, 1, len(res))
    res["m2"] = rng.normal(3, 1, len(res))
    res.to_csv(d / "results.csv", index=False)
    inf = res.copy()
    inf.loc[3, "y"] = np.inf
    inf.to_csv(d / "inf.csv", index=False)
    over = res.astype({"y": object})
    over.loc[2, "y"] = "1e400"  # overflows a double: pandas reads inf
    over.to_csv(d / "overflow.csv", index=False)
    big = res.copy()
    big["y"] = big["y"] * 1e305  # finite values whose squares overflow
    big.to_csv(d / "huge.csv", index=False)
    (d / "dup.csv").write_text("A,A,B,y\n1,2,10,5\n8,1,20,7\n1,8,20,6\n8,8,10,9\n")
    (d / "text.csv").write_text("A,B,C,y\n1,10,x,fast\n8,20,y,slow\n1,20,x,fast\n")
    rw = pd.DataFrame({"bs": ["4k"] * 4, "rwmixread": [100, 100, 0, 0],
                       "read_iops": [1000.0, 1010, 0, 0], "write_iops": [0, 0, 500.0, 490]})
    rw.to_csv(d / "rw.csv", index=False)
    rwi = rw.copy()
    rwi.loc[0, "read_iops"] = np.inf
    rwi.to_csv(d / "rw-inf.csv", index=False)
    (d / "model.json").write_text(json.dumps({
        "format": "storlab-estimate-model",
        "sizes": [{"size": "4k", "read_iops": 1000.0, "write_iops": 500.0}]}))
    (d / "cluster.yaml").write_text((ROOT / "examples/sim/small.yaml").read_text())
    (d / "calibration.csv").write_text((ROOT / "examples/sim/calibration.csv").read_text())
    (d / "campaign.yaml").write_text(CAMPAIGN % (1, "[]"))
    # 1e9 repetitions once took 15 GB of memory in `storlab status`
    (d / "rep1e9.yaml").write_text(CAMPAIGN % ("1000000000", "[]"))
    (d / "rep1e20.yaml").write_text(CAMPAIGN % ("100000000000000000000", "[]"))
    (d / "rep0.yaml").write_text(CAMPAIGN % (0, "[]"))
    (d / "shell5.yaml").write_text(CAMPAIGN % (1, '[{run: "echo hi", shell: 5}]'))
    (d / "shellyes.yaml").write_text(CAMPAIGN % (1, '[{run: "echo hi", shell: "yes"}]'))
    # a quoted "no"/"false" is a true string: a runner's safety flag refuses it
    runner = "runner: {type: command, options: {command: [\"true\"], regex_metrics: "
    (d / "fioallow.yaml").write_text((CAMPAIGN % (1, "[]")).replace(
        runner, "runner: {type: fio, options: {allow_destructive: 'no', rw: read}}\n#"))
    (d / "shellfalse.yaml").write_text((CAMPAIGN % (1, "[]")).replace(
        "options: {command:", "options: {shell: 'false', command:"))
    (d / "runs-5.yaml").write_text(CAMPAIGN.replace("{kind: full}", "{kind: lhs, runs: -5}")
                                   % (1, "[]"))
    (d / "previous.json").write_text('{"kept": true}\n')
    garbage = bytes(rng.integers(0, 256, 4096, dtype=np.uint8)) + b"\xff\xfe\x00\x81"
    for name in ("garbage.yaml", "garbage.csv", "garbage.json", "garbage.bin"):
        (d / name).write_bytes(garbage)
    for name in ("empty.yaml", "empty.csv", "empty.json"):
        (d / name).write_bytes(b"")
    (d / "adir").mkdir()


# Bad values for every numeric option; garbage, empty, missing and directory inputs for
# every file argument; directories and impossible places for every output.
CASES: list[Case] = [
    # ---- usage errors detected by click (its usual usage message) ----
    C("analyze", "results.csv", usage=True, expect="--response"),
    C("analyze", "results.csv -y y --no-such-option", usage=True),
    C("design", "--factors 3 --runs abc", "--runs", usage=True, expect="--runs"),
    C("nosuchcmd", "", usage=True, expect="nosuchcmd"),
    C("estimate nosuch", "", usage=True),
    # ---- design ----
    C("design", "garbage.yaml", "space_file"),
    C("design", "empty.yaml", "space_file"),
    C("design", "adir", "space_file"),
    C("design", "missing.yaml", "space_file"),
    C("design", "--factors 0", "--factors"),
    C("design", "--factors -5", "--factors"),
    C("design", "--factors 100000 --kind full", "--factors", expect="100000"),
    C("design", "--factors 100000 --kind lhs", "--factors"),
    C("design", "--factors 40 --kind full", "--factors"),
    C("design", "--factors 3 --kind lhs --runs -5", "--runs", expect="-5"),
    C("design", "--factors 3 --kind lhs --runs 0", "--runs"),
    C("design", "--factors 3 --kind lhs --runs 100000000000", "--runs"),
    C("design", "--factors 3 --kind full --center -1", "--center"),
    C("design", "--factors 3 --kind full --center 100000000000", "--center"),
    C("design", "--factors 3 --kind full --replicates 0", "--replicates"),
    C("design", "--factors 3 --kind full --replicates 100000000000", "--replicates"),
    C("design", "--factors 3 --kind full --seed -1", "--seed"),
    C("design", "--factors 3 --kind full -o adir", "-o"),
    C("design", "--factors 3 --kind full -o garbage.bin/d.csv", "-o"),
    C("design", "--factors 3 --kind full -o nodir/d.csv", "-o"),
    C("design", "--factors 3 --kind full -o adir --json", "-o"),
    C("design", "space.yaml --follow-up missing.csv", "--follow-up"),
    C("design", "space.yaml --follow-up adir", "--follow-up"),
    C("design", "space.yaml --follow-up garbage.csv -y y", "--follow-up"),
    C("design", "space.yaml --follow-up results.csv -y y --top 0", "--top"),
    C("design", "space.yaml --follow-up results.csv -y y --top 99", "--top", expect="--top 99"),
    # ---- analyze ----
    C("analyze", "garbage.csv -y y", "results"),
    C("analyze", "empty.csv -y y", "results"),
    C("analyze", "adir -y y", "results"),
    C("analyze", "missing.csv -y y", "results"),
    C("analyze", "inf.csv -y y", "results", expect="inf"),
    C("analyze", "overflow.csv -y y", "results"),
    C("analyze", "huge.csv -y y --factors A,B,C", "results"),
    C("analyze", "dup.csv -y y", "results", expect="duplicate"),
    C("analyze", "text.csv -y y", "results"),
    C("analyze", "results.csv -y y --space garbage.yaml", "--space"),
    C("analyze", "results.csv -y y --space adir", "--space"),
    C("analyze", "results.csv -y y --order 0", "--order", expect="--order"),
    C("analyze", "results.csv -y y --order -2", "--order"),
    C("analyze", "results.csv -y y --alpha 5", "--alpha", expect="--alpha"),
    C("analyze", "results.csv -y y --alpha nan", "--alpha"),
    C("analyze", "results.csv -y y --alpha inf", "--alpha"),
    C("analyze", "results.csv -y y --alpha 0", "--alpha"),
    C("analyze", "results.csv -y y --alpha -0.1", "--alpha"),
    C("analyze", "results.csv -y y --plots garbage.bin/x", "--plots"),
    C("analyze", "results.csv -y y --plots garbage.bin", "--plots"),
    C("analyze", "results.csv -y y -o adir", "-o"),
    C("analyze", "results.csv -y y -o nodir/a.json", "-o"),
    # ---- importance, importance-eval ----
    C("importance", "garbage.csv -y y", "results"),
    C("importance", "garbage.json -y y", "results"),
    C("importance", "empty.csv -y y", "results"),
    C("importance", "adir -y y", "results"),
    C("importance", "inf.csv -y y", "results"),
    C("importance", "dup.csv -y y", "results"),
    C("importance", "results.csv -y y -p A,B,C --bins 0", "--bins", expect="--bins"),
    C("importance", "results.csv -y y -p A,B,C --bins -3", "--bins"),
    C("importance", "results.csv -y y -p A,B,C -o adir", "-o"),
    C("importance", "results.csv -y y -p A,B,C --plot adir", "--plot"),
    C("importance", "results.csv -y y -p A,B,C --plot fig.xyz", "--plot"),
    C("importance", "results.csv -y y -p A,B,C --plot nodir/fig.png", "--plot"),
    C("importance", "results.csv -y y --space garbage.yaml", "--space"),
    C("importance", "results.csv -y y --space adir", "--space"),
    C("importance", "space.yaml -y y", "not a campaign file"),
    C("importance-eval", "garbage.csv -y y", "full"),
    C("importance-eval", "adir -y y", "full"),
    C("importance-eval", "results.csv -y y -n 0", "--repeats"),
    C("importance-eval", "results.csv -y y --ranks 0", "--ranks"),
    C("importance-eval", "results.csv -y y --seed -1", "--seed"),
    C("importance-eval", "results.csv -y y -j 0", "--jobs", expect="--jobs"),
    C("importance-eval", "results.csv -y y -j -2", "--jobs"),
    C("importance-eval", "results.csv -y y --fractions nan", "--fractions"),
    C("importance-eval", "results.csv -y y --fractions 0,2", "--fractions"),
    C("importance-eval", "results.csv -y y -o adir", "-o"),
    C("importance-eval", "results.csv -y y --plot adir", "--plot"),
    # ---- report, coverage ----
    C("report", "garbage.yaml", "source"),
    C("report", "garbage.csv", "source"),
    C("report", "empty.yaml", "source"),
    C("report", "adir", "source"),
    C("report", "rep1e9.yaml", "source"),
    C("report", "results.csv --space garbage.yaml", "--space"),
    C("report", "results.csv --alpha 5", "--alpha"),
    C("report", "results.csv --alpha nan", "--alpha"),
    C("report", "results.csv -o adir", "-o"),
    C("report", "results.csv -o nodir/r.html", "-o"),
    C("coverage", "garbage.csv --by bench", "results"),
    C("coverage", "adir --by bench", "results"),
    C("coverage", "inf.csv --by bench", "results"),
    C("coverage", "results.csv --by bench --components 0", "--components"),
    C("coverage", "results.csv --by bench --clusters 0", "--clusters"),
    C("coverage", "results.csv --by bench --seed -1", "--seed"),
    C("coverage", "results.csv --by bench --plots garbage.bin/x", "--plots"),
    C("coverage", "results.csv --by bench -o adir", "-o"),
    C("coverage", "results.csv --by bench -o nodir/c.json", "-o"),
    # ---- simulate ----
    C("simulate", "garbage.yaml", "cluster"),
    C("simulate", "empty.yaml", "cluster"),
    C("simulate", "adir", "cluster"),
    C("simulate", "cluster.yaml --requests 0", "--requests"),
    C("simulate", "cluster.yaml --requests -5", "--requests"),
    C("simulate", "cluster.yaml --sweep nodes=2,3 --workers 0", "--workers"),
    C("simulate", "cluster.yaml --sweep nodes=2,3 --plot adir", "--plot"),
    C("simulate", "cluster.yaml --sweep nodes=2,3 --campaign cluster.yaml", "--campaign"),
    C("simulate", "cluster.yaml --sweep nodes=2,3 --executor parallel:0", "--executor"),
    C("simulate", "cluster.yaml --calibrate garbage.csv", "--calibrate"),
    C("simulate", "cluster.yaml --calibrate adir", "--calibrate"),
    C("simulate", "cluster.yaml --calibrate calibration.csv --holdout nan", "--holdout"),
    C("simulate", "cluster.yaml --calibrate calibration.csv --holdout 1", "--holdout"),
    C("simulate", "cluster.yaml --calibrate calibration.csv --save-calibrated adir",
      "--save-calibrated"),
    C("simulate", "cluster.yaml -o adir", "-o"),
    C("simulate", "cluster.yaml -o previous.json/x", "-o"),
    # ---- estimate ----
    C("estimate fit", "garbage.csv", "results"),
    C("estimate fit", "empty.csv", "results"),
    C("estimate fit", "adir", "results"),
    C("estimate fit", "rw-inf.csv", "results"),
    C("estimate fit", "rw.csv --threshold -1", "--threshold"),
    C("estimate fit", "rw.csv --threshold nan", "--threshold"),
    C("estimate fit", "rw.csv --confidence 1", "--confidence"),
    C("estimate fit", "rw.csv --confidence nan", "--confidence"),
    C("estimate fit", "rw.csv --save-model adir", "--save-model"),
    C("estimate fit", "rw.csv --plot adir", "--plot"),
    C("estimate fit", "rw.csv -o adir", "-o"),
    C("estimate predict", "--model garbage.json --read-pct 50", "--model"),
    C("estimate predict", "--model empty.json --read-pct 50", "--model"),
    C("estimate predict", "--model adir --read-pct 50", "--model"),
    C("estimate predict", "--model model.json --read-pct 150", "--read-pct"),
    C("estimate predict", "--model model.json --read-pct nan", "--read-pct"),
    C("estimate predict", "--model model.json --read-pct 50 --confidence 2", "--confidence"),
    C("estimate predict", "--model model.json --read-pct 50 --plot adir", "--plot"),
    C("estimate predict", "--model model.json --read-pct 50 -o adir", "-o"),
    # measure would run fio: every one of these must stop before anything runs
    C("estimate measure", "--repeat 0", "--repeats"),
    C("estimate measure", "--runtime 0", "--runtime"),
    C("estimate measure", "--runtime nan", "--runtime"),
    C("estimate measure", "--iodepth 0", "--iodepth"),
    C("estimate measure", "--seed -1", "--seed"),
    C("estimate measure", "--confidence 5", "--confidence"),
    C("estimate measure", "--campaign garbage.bin", "--campaign"),
    C("estimate measure", "--target garbage.bin", "--target", expect="--allow-destructive"),
    C("estimate measure", "--save-model adir", "--save-model"),
    C("estimate measure", "--runs adir", "--runs"),
    C("estimate measure", "--plot adir", "--plot"),
    C("estimate measure", "-o adir", "-o"),
    # ---- run, results, status (a campaign file) ----
    C("run", "garbage.yaml", "campaign_file"),
    C("run", "empty.yaml", "campaign_file"),
    C("run", "adir", "campaign_file"),
    C("run", "rep1e9.yaml", "campaign_file", expect="repetitions"),
    C("run", "rep1e20.yaml", "campaign_file", expect="repetitions"),
    C("run", "rep0.yaml", "campaign_file"),
    C("run", "shell5.yaml", "campaign_file", expect="shell"),
    C("run", "shellyes.yaml", "campaign_file", expect="shell"),
    C("run", "fioallow.yaml", "campaign_file",
      expect="option allow_destructive: 'no' must be true or false"),
    C("run", "shellfalse.yaml", "campaign_file", expect="option shell: 'false' must be true"),
    C("run", "runs-5.yaml", "campaign_file"),
    C("run", "campaign.yaml -o adir", "-o"),
    C("tune", "garbage.yaml --budget 10", "campaign_file"),
    C("tune", "adir --budget 10", "campaign_file"),
    C("tune", "campaign.yaml", "campaign_file", expect="--budget"),
    C("tune", "campaign.yaml --budget 10", "campaign_file", expect="not a metric"),
    C("tune", "campaign.yaml --budget 0", "--budget", usage=True),
    C("tune", "campaign.yaml --budget 10 --strategy nope", "--budget", expect="strategy"),
    C("tune", "campaign.yaml --budget 10 --seed -1", "--seed"),
    C("tune", "campaign.yaml --budget 10 -o adir", "-o"),
    C("tune", "campaign.yaml --budget 10 --plot adir", "--plot"),
    C("tune", "campaign.yaml --budget 10 --confirm-share 1.5", "--confirm-share"),
    C("confirm", "garbage.yaml --config A=1", "campaign_file"),
    C("confirm", "campaign.yaml --config A=1,B=10,C=x --runs 1", "--repeats", usage=True),
    C("confirm", "campaign.yaml --config A=1", "--config", expect="missing"),
    C("confirm", "campaign.yaml --config A=1,B=10,C=x --seed -1", "--seed"),
    C("confirm", "campaign.yaml --config A=1,B=10,C=x -o adir", "-o"),
    C("tune-eval", "garbage.csv -y y", "full"),
    C("tune-eval", "adir -y y", "full"),
    C("tune-eval", "results.csv -y nosuch", "full", expect="nosuch"),
    C("tune-eval", "results.csv -y y --budget 1", "--budget", usage=True),
    C("tune-eval", "results.csv -y y --repeats 0", "--repeats", usage=True),
    C("tune-eval", "results.csv -y y --noise 2", "--noise"),
    C("tune-eval", "results.csv -y y --noise nan", "--noise"),
    C("tune-eval", "results.csv -y y --confirm-share 0", "--confirm-share"),
    C("tune-eval", "results.csv -y y --seed -1", "--seed"),
    C("tune-eval", "results.csv -y y -o adir", "-o"),
    C("tune-eval", "results.csv -y y --plot adir", "--plot"),
    C("results", "garbage.yaml", "campaign_file"),
    C("results", "adir", "campaign_file"),
    C("results", "rep1e9.yaml", "campaign_file"),
    C("results", "campaign.yaml -o adir", "-o"),
    C("results", "campaign.yaml -o out.txt", "-o"),
    C("results", "campaign.yaml -o nodir/r.csv", "-o"),
    C("results", "campaign.yaml --fio-json garbage.bin", "--fio-json", expect="not a directory"),
    C("results", "campaign.yaml --fio-json garbage.bin/sub", "--fio-json"),
    C("status", "garbage.yaml", "campaign_file"),
    C("status", "rep1e9.yaml", "campaign_file", expect="repetitions"),
    C("status", "shell5.yaml", "campaign_file"),
    C("status", "campaign.yaml -o adir", "-o"),
    # ---- cluster (nothing may start when an option is bad) ----
    C("cluster up", "ceph --osds 0 --dir cl", "--osds"),
    C("cluster up", "ceph --osds 9 --dir cl", "--osds"),
    C("cluster up", "ceph --replicas 0 --dir cl", "--replicas"),
    C("cluster up", "swift --workers 0 --dir cl", "--workers"),
    C("cluster up", "swift --proxy-workers 0 --dir cl", "--proxy-workers"),
    C("cluster up", "swift --timeout nan --dir cl", "--timeout"),
    C("cluster up", "swift --timeout -1 --dir cl", "--timeout"),
    C("cluster up", "swift --dir garbage.bin", "--dir"),
    C("cluster up", "swift --dir cl -o adir", "-o"),
    C("cluster status", "--dir garbage.bin", "--dir"),
    C("cluster status", "--dir cl -o adir", "-o"),
    C("cluster down", "--dir garbage.bin", "--dir"),
    C("cluster down", "--dir cl -o adir", "-o"),
    C("cluster load", "swift --clients 0 --dir cl", "--clients"),
    C("cluster load", "swift --rate 0 --dir cl", "--rate"),
    C("cluster load", "swift --rate nan --dir cl", "--rate"),
    C("cluster load", "swift --duration -1 --dir cl", "--duration"),
    C("cluster load", "swift --duration inf --dir cl", "--duration"),
    C("cluster load", "swift --objects 0 --dir cl", "--objects"),
    C("cluster load", "swift --timeout 0 --dir cl", "--timeout"),
    C("cluster load", "swift --timeout nan --dir cl", "--timeout"),
    C("cluster load", "swift --records adir --dir cl", "--records"),
    C("cluster load", "swift --dir garbage.bin", "--dir"),
    C("cluster load", "swift --dir cl -o adir", "-o"),
    C("cluster load", "swift --hosts 0 --dir cl", "--hosts"),
    C("cluster client-conf", "adir --dir cl", "dest", expect="no ceph cluster is up"),
    C("cluster client-conf", "cc --dir garbage.bin", "--dir"),
    # ---- fio-server (nothing may start when an option is bad) ----
    C("fio-server", "--dir garbage.bin", "--dir", expect="not a directory"),
    C("fio-server", "--dir nosuch", "--dir", expect="not an existing directory"),
    C("fio-server", "--dir adir --port 0", "--port"),
    C("fio-server", "--dir adir --port 70000", "--port"),
    C("fio-server", "--dir adir --device garbage.bin", "--device",
      expect="not a block or character device"),
    C("fio-server", "--dir adir --bind 'a b'", "--bind", expect="not an address"),
    C("fio-server", "--dir adir --bind 10.0.0.256", "--bind", expect="not an address"),
    C("fio-server", "--dir adir --device /dev/../etc/passwd", "--device",
      expect="not a block or character device"),
    C("fio-server", "--dir adir --device /dev/nosuch", "--device",
      expect="No such file"),
    C("fio-server", "--dir adir --connect-port 0", "--connect-port"),
    # run as root, the server runs as DIR's owner: a root-owned DIR starts nothing
    *([C("fio-server", "--dir adir", "--dir", expect="owned by root")]
      if os.geteuid() == 0 else []),
]


def _snapshot(d: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(d)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(d.rglob("*"))}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path: Path, storlab_forked: typing.Any) -> None:
    make_inputs(tmp_path)
    before = _snapshot(tmp_path)
    env = {**os.environ, "STORLAB_CLUSTER_DIR": str(tmp_path / "cl"), "COLUMNS": "100"}
    # a process of its own under a memory cap, forked from one that started the program
    # (221 start-ups took two minutes of the suite)
    r = storlab_forked(*case.command.split(), *shlex.split(case.args), cwd=tmp_path,
                       env=env, memory=MEMORY_CAP)
    err = r.stderr.strip()
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 2, f"exit {r.returncode}\nstdout: {r.stdout[-1500:]}\n" \
                              f"stderr: {r.stderr[-1500:]}"
    if case.usage:
        assert "Usage:" in err and "storlab" in err
    else:
        assert len(err.splitlines()) == 1, err
        assert err.startswith("storlab: error: "), err
    if case.expect:
        assert case.expect in err, err
    assert _snapshot(tmp_path) == before, "files were created or changed"


# ---- the guard's own guard: every command and option has a case ----

def _commands(app: typing.Any, prefix: tuple[str, ...] = ()) -> typing.Iterator:
    for ci in app.registered_commands:
        yield " ".join((*prefix, ci.name or ci.callback.__name__)), ci.callback
    for gi in app.registered_groups:
        yield from _commands(gi.typer_instance, (*prefix, gi.name))


def _checked_params(callback: typing.Any) -> list[str]:
    """The numeric and path parameters of a command, by first spelling (or name)."""
    hints = typing.get_type_hints(callback)
    out = []
    for name, p in inspect.signature(callback).parameters.items():
        args = [a for a in typing.get_args(hints[name]) if a is not type(None)]
        base = args[0] if args else hints[name]
        if base in (int, float, Path):
            decls = getattr(p.default, "param_decls", None) or ()
            out.append(decls[0] if decls else name)
    return out


def test_every_option_has_a_case() -> None:
    from storlab.cli import app

    covered = {(c.command, o) for c in CASES for o in c.covers}
    missing = [f"{cmd} {opt}" for cmd, cb in _commands(app) for opt in _checked_params(cb)
               if (cmd, opt) not in covered]
    assert not missing, f"add bad-input cases to CASES for: {', '.join(missing)}"

"""A campaign's directory swapped in the middle of a campaign (moved away, a link to
somebody's directory put in its place): the run in flight finishes in the real directory,
the next run refuses it in one line before anything is made there. Route found by an
attacker: the run was refused, but only after storlab (root) had made an empty `scratch/`
in the link's target (`mkdir -p` by path)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import yaml

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)


def _runs(db: Path) -> dict[str, tuple[str, str]]:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return {k: (s, e or "") for k, s, e in
                    c.execute("SELECT key, status, stderr_tail FROM runs").fetchall()}
    except sqlite3.Error:  # not made yet, or the writer is making it
        return {}


def test_a_directory_swapped_between_runs_is_refused_before_anything_is_made_there(
        tmp_path: Path, storlab_forked: Any, act_on_a_stopped_look: Any) -> None:
    d, victim = tmp_path / "camp", tmp_path / "victim"
    d.mkdir()
    victim.mkdir()
    n = 6
    (d / "campaign.yaml").write_text(yaml.safe_dump({
        "name": "swap", "timeout": 60, "randomize": False, "design": {"kind": "full"},
        "space": {"factors": [{"name": "n", "kind": "ordinal", "values": list(range(n))}],
                  "responses": [{"name": "y", "goal": "minimize"}]},
        "runner": {"type": "command", "options": {
            "command": ["sh", "-c", "sleep 0.2; echo '{\"y\": 1}'"],
            "json_metrics": {"y": "y"}}}}))
    proc = storlab_forked.start("run", str(d / "campaign.yaml"))

    def swap(_: Any) -> None:  # with storlab stopped, once a run is done
        os.rename(d, tmp_path / "camp.real")
        d.symlink_to(victim)

    try:
        done = act_on_a_stopped_look(
            proc, lambda: {k for k, (s, _) in _runs(d / "campaign.db").items()
                           if s == "ok"} or None, swap, timeout=120, every=0.02)
        assert done, "no run finished"
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    assert list(victim.iterdir()) == []  # no scratch/, no output directory, nothing
    runs = _runs(tmp_path / "camp.real" / "campaign.db")
    refused = [runs[k][1] for k in sorted(runs, key=lambda k: int(k[1:].split("-")[0]))
               if runs[k][0] == "failed"]  # in run order
    assert refused, runs
    # The run being started while the swap happened may have passed the directory check
    # and then met the swapped directory as bwrap built its walls (the campaign's
    # directory is shown read-only by its path: the victim's, empty, so bwrap could not
    # make the run directory there, "Read-only file system", or found its bound directory
    # moved, "Race condition binding dirfd"): it failed closed, nothing written (above).
    first, rest = refused[0], refused[1:]
    assert all("the campaign's directory leads to another directory than at the "
               "campaign's start" in e and len(e.strip().splitlines()) == 1
               for e in rest), refused
    assert ("the campaign's directory leads to another directory" in first
            or first.startswith("bwrap: ")), first
    assert sum(s == "ok" for s, _ in runs.values()) + len(refused) == n, json.dumps(runs)
    # in order (randomize: false): the runs done before the swap and the one in flight at
    # the stop ok, in the real directory (its program started from the run's directory
    # held open, bwrap in /: never by the path that leads elsewhere now), then every
    # later run refused; none failed any other way
    order = [runs[f"c{i}-r1"][0] for i in range(1, n + 1)]
    k = order.count("ok")
    assert k >= len(done) and order == ["ok"] * k + ["failed"] * (n - k), order

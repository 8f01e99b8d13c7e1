"""The Dask cluster storlab starts (`simulate --sweep --executor dask`) keeps its scratch
space in a private directory: distributed's default, `<tmp>/dask-scratch-space`, is a
fixed name in a shared directory that Dask accepts whoever made it and puts first on the
processes' `sys.path`, so another user's `distributed/__init__.py` planted there ran as
root in the workers (the attack). Real Dask, in a child process whose TMPDIR is a sticky
world-writable directory holding the planted package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NOBODY = 65534

PAYLOAD = """\
import importlib, os, sys
with open({marker!r} + "-%d" % os.getpid(), "w") as fh:
    fh.write("imported as uid %d" % os.getuid())
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
del sys.modules[__name__]
sys.modules[__name__] = importlib.import_module(__name__)
"""

CHILD = """\
import json, os, sys
from storlab.campaign.executors import make_executor
from storlab.campaign.sweep_campaign import campaign_executor
with campaign_executor("dask", 1, 2) as spec:
    ex = make_executor(spec)
    try:
        paths = list(ex.client.run(lambda: __import__("sys").path).values())[0]
    finally:
        ex.client.close()
    mine = [p for p in sys.path if "dask-scratch-space" in p]
    modes = {p: oct(os.stat(p.split("/dask-scratch-space")[0]).st_mode & 0o7777)
             for p in mine}
print(json.dumps({"worker": paths, "mine": mine, "modes": modes}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="plants the package as another user (nobody)")
def test_a_planted_dask_scratch_space_is_never_imported(tmp_path: Path) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # what /tmp is
    pkg = shared / "dask-scratch-space" / "distributed"
    pkg.mkdir(parents=True)
    marker = tmp_path / "pwned"
    (pkg / "__init__.py").write_text(PAYLOAD.format(marker=str(marker)))
    for p in (pkg.parent, pkg, pkg / "__init__.py"):
        os.chown(p, NOBODY, NOBODY)
    env = {**os.environ, "TMPDIR": str(shared)}
    env.pop("DASK_TEMPORARY_DIRECTORY", None)
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert not list(tmp_path.glob("pwned-*")), "the planted module ran"
    planted = str(shared / "dask-scratch-space")
    for p in got["worker"] + got["mine"]:
        assert not p.startswith(planted), p
    scratch = [p for p in got["worker"] if "storlab-dask-" in p]
    assert scratch, got["worker"]  # the worker's scratch space: the private directory
    private = scratch[0].split("/dask-scratch-space")[0]
    assert set(got["modes"].values()) == {"0o700"}, got["modes"]
    assert not os.path.exists(private)  # removed with the cluster
    assert sorted(os.listdir(shared)) == ["dask-scratch-space"]  # nothing else left there

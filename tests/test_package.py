"""The package faces: every public name resolves, `import storlab` stays cheap."""

import importlib
import subprocess
import sys

import pytest

FACES = ["storlab", "storlab.campaign", "storlab.analysis", "storlab.sim", "storlab.design",
         "storlab.estimate", "storlab.tune", "storlab.report", "storlab.clusters",
         "storlab.campaign.runners"]


@pytest.mark.parametrize("face", FACES)
def test_every_name_in_all_resolves(face):
    mod = importlib.import_module(face)
    assert mod.__all__, face
    missing = [n for n in mod.__all__ if getattr(mod, n, None) is None]
    assert missing == []
    assert set(mod.__all__) <= set(dir(mod))


def test_the_main_nouns_and_verbs():
    import storlab
    from storlab.analysis.coverage import coverage
    from storlab.analysis.importance import importance

    for name in ("Space", "make_design", "Campaign", "analyze", "importance", "coverage",
                 "RWModel", "simulate", "build_report", "StorlabError"):
        assert name in storlab.__all__
    assert storlab.importance is importance and storlab.coverage is coverage
    # the analysis face names them otherwise: a submodule's name would shadow them
    assert storlab.analysis.importance_of is importance
    assert storlab.analysis.coverage_of is coverage
    assert storlab.sim.simulate is storlab.simulate  # subpackages load on first use too
    with pytest.raises(AttributeError):
        storlab.no_such_name  # noqa: B018


def test_import_storlab_loads_no_heavy_library():
    """The faces are lazy: `import storlab`, the subpackage faces and the CLI with all its
    commands registered pull in neither pandas nor numpy nor matplotlib, so `storlab --help`
    starts quickly (a check on what is loaded, not a timing)."""
    code = ("import sys, storlab, storlab.errors, storlab.units, storlab.campaign, storlab.sim, "
            "storlab.analysis, storlab.tune, storlab.report, storlab.estimate, storlab.cli\n"
            "print(sorted(m for m in ('pandas', 'numpy', 'matplotlib', 'scipy', 'optuna', 'yaml') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.strip()
    assert out == "[]"


def test_simulate_verb_matches_the_cli_path(tmp_path):
    import storlab
    from storlab.sim.model import build_model
    from storlab.sim.run import run_model
    from storlab.sim.spec import apply_overrides, parse_cluster

    raw = {"name": "p", "swift": {"part_power": 6},
           "nodes": [{"role": "proxy", "count": 1},
                     {"role": "storage", "count": 3, "disks": {"type": "ssd_s3700", "count": 1}}],
           "workload": {"objects": 50, "requests": 400, "clients": 4, "seed": 2}}
    a = storlab.simulate(raw, clients=8, backend="python")
    b = run_model(build_model(parse_cluster(apply_overrides(raw, {"clients": 8}))),
                  backend="python")
    assert a.metrics() == b.metrics()
    assert storlab.simulate(raw, analytic=True).throughput > 0

"""storlab: design, run, analyse and simulate storage performance experiments.

The main nouns and verbs, loaded on first use (so `import storlab` is cheap)::

    import storlab
    space = storlab.Space.from_yaml("space.yaml")
    design = storlab.make_design(space, "fractional", runs=16, seed=1)
    camp = storlab.Campaign.load("campaign.yaml"); camp.run()
    storlab.analyze(camp.results(), "iops", space).table()
    storlab.importance(table, "iops"); storlab.coverage(table, by="system")
    storlab.RWModel.load("model.json").predict(70, "4k:0.8,64k:0.2")
    storlab.simulate("examples/sim/small.yaml", clients=128).metrics()
    storlab.build_report(storlab.report.from_campaign("campaign.yaml")).write("r.html")

Each subpackage (campaign, analysis, sim, design, estimate, tune, report, clusters) has
its own face; docs/architecture.md is the map.
"""

# First, before any import that could be shadowed: `python -m storlab` puts the working
# directory first on sys.path, and this face runs before storlab/__main__.py (sys.argv[0]
# is "-m" while the package is being found). Root running `python -m storlab` in another
# user's directory would import that user's `typing.py` or `pandas.py`; the working
# directory is dropped here. (`python -P`, Python 3.11+, never adds it; a `storlab/`
# package there is found before this code runs: docs/guarantees-*.md.)
import os as _os
import sys as _sys

if _sys.argv[:1] == ["-m"] and not _sys.flags.safe_path and _sys.path:
    try:
        if _sys.path[0] in ("", ".") or _os.path.samefile(_sys.path[0], _os.getcwd()):
            del _sys.path[0]
    except OSError:  # the working directory is gone: nothing can be imported from it
        pass
del _os, _sys

from typing import TYPE_CHECKING  # noqa: E402  (after the guard above, on purpose)

from ._lazy import attach  # noqa: E402

__version__ = "0.1.0"

_lazy_names, __getattr__, __dir__ = attach(__name__, {
    "StorlabError": ".errors",
    "Space": ".space", "Factor": ".space", "Response": ".space",
    "make_design": ".design", "Design": ".design",
    "Campaign": ".campaign",
    # the functions, from their modules: `storlab.analysis.importance` is the module
    "analyze": ".analysis", "importance": ".analysis.importance",
    "coverage": ".analysis.coverage",
    "RWModel": ".estimate",
    "simulate": ".sim",
    "build_report": ".report",
})

__all__ = ["Campaign", "Design", "Factor", "RWModel", "Response", "Space", "StorlabError",
           "analyze", "build_report", "coverage", "importance", "make_design", "simulate"]

if TYPE_CHECKING:  # for type checkers and editors; at run time the names load lazily
    from .analysis import analyze
    from .analysis.coverage import coverage
    from .analysis.importance import importance
    from .campaign import Campaign
    from .design import Design, make_design
    from .errors import StorlabError
    from .estimate import RWModel
    from .report import build_report
    from .sim import simulate
    from .space import Factor, Response, Space

"""Reports: the self-contained HTML campaign report and the coverage report.

    from storlab.report import from_campaign, build_report
    build_report(from_campaign("campaign.yaml")).write("report.html")

Figures for notebooks come from the analyses themselves (`analyze(...).plot("pareto")`,
`coverage(...).plot("scatter")`, `importance(...).plot()`, `RWModel.plot()`) and from
`progress_plot(Campaign.load(path).results("run"))`. Names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

_lazy_names, __getattr__, __dir__ = attach(__name__, {
    **{n: ".build" for n in ("Report", "build_report", "coverage_report")},
    **{n: ".inputs" for n in ("ReportInput", "design_from_data", "from_campaign",
                              "from_results")},
    **{n: ".sections" for n in ("Section", "progress_plot")},
    "ReportError": "storlab.errors",
})

__all__ = ["Report", "ReportError", "ReportInput", "Section", "build_report", "coverage_report",
           "design_from_data", "from_campaign", "from_results", "progress_plot"]

if TYPE_CHECKING:  # the names above, for type checkers and readers; loaded lazily at run time
    from ..errors import ReportError
    from .build import Report, build_report, coverage_report
    from .inputs import ReportInput, design_from_data, from_campaign, from_results
    from .sections import Section, progress_plot

"""Reports: the self-contained HTML campaign report and the coverage report.

    from storlab.report import from_campaign, build_report
    build_report(from_campaign("campaign.yaml")).write("report.html")

Figures for notebooks come from the analyses themselves (`analyze(...).plot("pareto")`,
`coverage(...).plot("scatter")`, `importance(...).plot()`, `RWModel.plot()`) and from
`progress_plot(Campaign.load(path).results("run"))`. Names load on first use.
"""

from __future__ import annotations

from .._lazy import attach

__all__, __getattr__, __dir__ = attach(__name__, {
    **{n: ".build" for n in ("Report", "build_report", "coverage_report")},
    **{n: ".inputs" for n in ("ReportInput", "design_from_data", "from_campaign",
                              "from_results")},
    **{n: ".sections" for n in ("Section", "progress_plot")},
    "ReportError": "storlab.errors",
})

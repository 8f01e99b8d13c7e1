"""Campaigns: run a design's configurations with a runner, through an executor, into a store.

    from storlab.campaign import Campaign
    camp = Campaign.load("campaign.yaml"); camp.run(); camp.results()

The names below load on first use (runners pull in their programs' modules only then)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

_lazy_names, __getattr__, __dir__ = attach(__name__, {
    "Campaign": ".campaign", "RunSummary": ".campaign", "results_table": ".campaign",
    "CampaignSpec": ".spec", "DesignSpec": ".spec", "RunnerSpec": ".spec", "load_spec": ".spec",
    "CampaignError": "storlab.errors", "CampaignLocked": "storlab.errors",
    "Store": ".store", "FAILED": ".store",
    "DesignSource": ".sources", "Proposal": ".sources", "Observation": ".sources",
    "make_source": ".sources",
    "run_sweep": ".sweep_campaign", "check_executor": ".sweep_campaign",
    "default_directory": ".sweep_campaign", "grant_env": ".preflight",
    "Executor": ".executors", "make_executor": ".executors",
    "Runner": ".runners", "RunResult": ".runners", "make_runner": ".runners",
})

__all__ = ["FAILED", "Campaign", "CampaignError", "CampaignLocked", "CampaignSpec",
           "DesignSource", "DesignSpec", "Executor", "Observation", "Proposal", "RunResult",
           "RunSummary", "Runner", "RunnerSpec", "Store", "check_executor", "default_directory",
           "grant_env", "load_spec", "make_executor", "make_runner", "make_source", "results_table",
           "run_sweep"]

if TYPE_CHECKING:  # the names above, for type checkers and readers; loaded lazily at run time
    from ..errors import CampaignError, CampaignLocked
    from .campaign import Campaign, RunSummary, results_table
    from .executors import Executor, make_executor
    from .preflight import grant_env
    from .runners import Runner, RunResult, make_runner
    from .sources import DesignSource, Observation, Proposal, make_source
    from .spec import CampaignSpec, DesignSpec, RunnerSpec, load_spec
    from .store import FAILED, Store
    from .sweep_campaign import check_executor, default_directory, run_sweep

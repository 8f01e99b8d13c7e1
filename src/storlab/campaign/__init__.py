"""Campaigns: run a design's configurations with a runner, through an executor, into a store.

    from storlab.campaign import Campaign
    camp = Campaign.load("campaign.yaml"); camp.run(); camp.results()

The names below load on first use (runners pull in their programs' modules only then)."""

from __future__ import annotations

from .._lazy import attach

__all__, __getattr__, __dir__ = attach(__name__, {
    "Campaign": ".campaign", "RunSummary": ".campaign", "results_table": ".campaign",
    "CampaignSpec": ".spec", "DesignSpec": ".spec", "RunnerSpec": ".spec", "load_spec": ".spec",
    "CampaignError": "storlab.errors", "CampaignLocked": "storlab.errors",
    "Store": ".store",
    "DesignSource": ".sources", "Proposal": ".sources", "Observation": ".sources",
    "make_source": ".sources", "run_sweep": ".sweep_campaign",
    "Executor": ".executors", "make_executor": ".executors",
    "Runner": ".runners", "RunResult": ".runners", "make_runner": ".runners",
})

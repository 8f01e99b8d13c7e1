"""Campaigns: run a design's configurations with a runner, through an executor, into a store."""

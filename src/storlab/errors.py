"""Errors that reach the user as one line (the CLI prints them and exits 2)."""

from __future__ import annotations


class StorlabError(Exception):
    """Bad input or a request storlab cannot honour; the message is shown as is."""


class SpaceError(StorlabError):
    """A parameter space (YAML or dict) is malformed."""

    def __init__(self, message: str, source: str | None = None, field: str | None = None):
        where = ": ".join(p for p in (source, field) if p)
        super().__init__(f"{where}: {message}" if where else message)
        self.source = source
        self.field = field


class DesignError(StorlabError):
    """A design cannot be built as asked (too few runs, unknown generator, ...)."""


class AnalysisError(StorlabError):
    """A results table does not fit the analysis asked of it."""

"""The design-source seam: where a campaign's configurations come from.

A source answers `ask(history)` with the next batch of configurations to run, given every
measured run finished so far (in execution order), or an empty list when it has nothing
more to propose. A fixed design (a generated one, a CSV, a literal list) is the trivial
case, `fixed.FixedSource`: it proposes its whole table once, before the first run, and has
nothing more when asked again. An adaptive source proposes from the results so far. With one run at a time the campaign loop asks only when every run it was given has
finished, so an `ask` sees the same history whether or not the campaign was killed and
resumed in between: a source that is a pure function of (its settings, the history)
resumes exactly. A source that `batches` is also asked whenever an executor slot frees,
with the runs still in flight (`pending`), so N runs stay in flight. What it is told
follows the plan's order, not which runs happened to finish first (`plan.pending_proposals`:
every run but the newest N - 1 has finished, those N - 1 are pending), so the same seed
and N give the same tuning, killed and resumed or not, and no run is lost or repeated.

New strategies plug in here without touching the run loop: register a factory under a
design `kind` in `SOURCES` ("module:callable", imported only when that kind is used); the
same module's `design_from_meta(design, meta)` reads a fixed design's file as the adaptive
design a store recorded (`meta`, the source's `meta()`).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..space import Space
    from .spec import DesignSpec


@dataclass
class Proposal:
    """A configuration to run `repetitions` times; `phase` and `note` travel with its runs
    into the store and back into the history."""

    config: dict[str, Any]
    repetitions: int = 1
    phase: str = ""
    note: dict[str, Any] = field(default_factory=dict)


@dataclass
class Observation:
    """One finished measured run as a source sees it."""

    key: str
    seq: int
    config_id: int
    repetition: int
    config: dict[str, Any]
    status: str
    metrics: dict[str, float]
    phase: str = ""
    note: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class DesignSource(Protocol):
    """Proposes configurations from the history; `meta()` is stored with the campaign."""

    adaptive: bool

    def ask(self, history: Sequence[Observation]) -> list[Proposal]: ...

    # A source that can propose while runs are in flight also has `batches = True` and
    # `ask(history, pending)`, pending being the asked-for runs not finished yet.

    def meta(self) -> dict[str, Any]: ...


#: Adaptive design kinds and the factory that builds their source:
#: factory(space, design_spec, seed) -> DesignSource.
SOURCES: dict[str, str] = {"tune": "storlab.tune.tune_source:make_source"}


def adaptive_kinds() -> tuple[str, ...]:
    return tuple(SOURCES)


def make_source(kind: str, space: Space, design: DesignSpec, seed: int) -> DesignSource:
    """The adaptive source registered for `kind` (imported on first use)."""
    module, _, name = SOURCES[kind].partition(":")
    factory: Callable[..., DesignSource] = getattr(importlib.import_module(module), name)
    return factory(space, design, seed)


def design_as_stored(kind: str, design: DesignSpec, meta: Mapping[str, Any]) -> DesignSpec:
    """`design` read as the adaptive design of `kind` whose settings a store recorded."""
    module = importlib.import_module(SOURCES[kind].partition(":")[0])
    reread: Callable[..., DesignSpec] = module.design_from_meta
    return reread(design, meta)


def config_key(config: Mapping[str, Any]) -> str:
    """A canonical text for a configuration (same values in any key order -> same key)."""
    return json.dumps({k: config[k] for k in sorted(config)}, sort_keys=True, default=str)

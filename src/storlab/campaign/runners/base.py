"""The runner seam: one configuration in, one `RunResult` out. Kept as small as Optuna's
sampler interface so that fio, any command, postmark, sysbench and the simulator fit it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass
class RunResult:
    """What one run produced. `metrics` are flat numbers (the response columns);
    `raw` is the program's whole output (fio JSON kept as is); `rows` holds extra
    per-host or per-operation rows when a run has them (fio client/server)."""

    status: str  # "ok" | "failed" | "timeout"
    metrics: dict[str, float] = field(default_factory=dict)
    raw: str = ""
    stderr: str = ""
    exit_code: int | None = None
    started: float = 0.0
    ended: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def failure_lines(stderr: str | None, n: int = 3) -> list[str]:
    """What a failed run's stderr tail says, for a person: the program's own last `n`
    non-empty lines (fio's "engine nosuchengine not loadable"), then storlab's diagnosis
    lines ("storlab: no fio JSON document in the output"), which runners append last and
    would otherwise push the program's words out of a one-line summary."""
    lines = [ln.rstrip() for ln in (stderr or "").splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith("storlab: ")]
    theirs = [ln for ln in lines if not ln.startswith("storlab: ")]
    return theirs[-n:] + ours[-2:]


class Runner(Protocol):
    """Runs one configuration. `workdir` is a scratch directory owned by this run."""

    name: str

    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult: ...

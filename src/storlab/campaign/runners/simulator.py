"""Simulator runner: a campaign configuration -> one simulated Swift-like cluster run.

    runner = SimulatorRunner("examples/sim/small.yaml", requests=20000)
    result = runner.run({"nodes": 8, "disk": "ssd_s3700", "nic": 25}, workdir)
    result.metrics["ops_s"], result.metrics["get_lat_p99_ms"], result.metrics["bottleneck_util"]

Configuration keys override the cluster file: short names (`nodes`, `proxies`, `disk`,
`disks`, `nic`, `cores`, `ghz`, `proxy_workers`, `object_workers`, `replicas`,
`write_quorum`, `part_power`, `clients`, `rate`, `object_size`, `mix`, `think_ms`, `seed`,
... see `storlab.sim.spec.SHORT_KEYS`) or dotted paths (`swift.replicas`,
`storage.disks.count`, `proxy.cpu.cores`, `workload.mix.GET`). Constructor keywords
`analytic`, `backend` and `requests` configure the runner; any other keyword is a fixed
override applied before the configuration's (the configuration wins).

Metrics: ops_s, mb_s, lat_mean_ms, lat_p50/p95/p99_ms (totals and per op as put_*, get_*,
delete_*), util_<resource> (busiest station of each resource class), bottleneck_util.
A configuration that does not describe a valid cluster is a failed run with the reason in
stderr; the campaign goes on. The simulation runs in-process; `timeout` is checked after.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .base import RunResult

RUNNER_KEYS = ("analytic", "backend", "requests")


class SimulatorRunner:
    """Runs the cluster model for each configuration (no hardware needed)."""

    name = "simulator"
    #: options naming a file storlab reads for the campaign (checked as a campaign input:
    #: `campaign.inputs.check_campaign_input`)
    input_options = ("cluster",)

    @staticmethod
    def prepare_options(options: dict[str, Any], directory: Path
                        ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The `cluster` file resolved against the campaign's directory (workers may run
        elsewhere); nothing more to record."""
        opts = dict(options)
        c = opts.get("cluster")
        if isinstance(c, str) and (directory / c).exists():
            opts["cluster"] = str((directory / c).resolve())
        return opts, {}

    def __init__(self, cluster: str | Path | Mapping[str, Any], analytic: bool = False,
                 backend: str = "rust", requests: int | None = None, **fixed: Any) -> None:
        from ...sim.spec import load_raw

        if isinstance(cluster, Mapping):
            self.raw = dict(cluster)
            self.source = "cluster"
        else:
            self.raw = load_raw(cluster)
            self.source = str(cluster)
        self.analytic = bool(analytic)
        self.backend = backend
        self.requests = requests
        self.fixed = dict(fixed)
        if self.fixed:  # a misspelt override must not simulate the unchanged cluster
            from ...errors import SimError
            from ...sim.spec import apply_overrides, parse_cluster

            from ..spec import CampaignError

            try:
                parse_cluster(apply_overrides(self.raw, self.fixed, self.source), self.source)
            except SimError as exc:
                raise CampaignError(f"simulator runner: {exc}") from None

    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult:
        from ...errors import SimError
        from ...sim.model import build_model
        from ...sim.run import run_model
        from ...sim.spec import apply_overrides, parse_cluster

        started = time.time()
        overrides = {**self.fixed, **dict(config)}
        if self.requests is not None and "requests" not in overrides:
            overrides["requests"] = self.requests
        try:
            spec = parse_cluster(apply_overrides(self.raw, overrides, self.source), self.source)
            model = build_model(spec)
            if self.analytic:
                from ...sim.analytic import solve_mva
                from ...sim.failures import refuse_analytic

                refuse_analytic(spec)  # the MVA model has no failed devices
                rep: Any = solve_mva(model)
            else:
                rep = run_model(model, backend=self.backend)
        except SimError as exc:
            return RunResult(status="failed", stderr=str(exc), exit_code=2, started=started,
                             ended=time.time())
        ended = time.time()
        from ...jsonutil import to_jsonable

        raw = json.dumps(to_jsonable(rep.to_dict()))
        status = "timeout" if timeout is not None and ended - started > timeout else "ok"
        rows = [{"op": r["op"], **{k: v for k, v in r.items() if k != "op"}}
                for r in rep.ops.to_dict("records")]
        return RunResult(status=status, metrics=rep.metrics(), raw=raw, stderr="\n".join(
            rep.notes), exit_code=0, started=started, ended=ended, rows=rows)

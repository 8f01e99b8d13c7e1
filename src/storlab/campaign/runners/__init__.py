"""Runners turn one configuration into one measured run (see `base.Runner`).

The registry maps a campaign's `runner.type` to its class, imported only when used (the
simulator runner lives in another engineer's module and pulls in the simulator), and to the
measurement columns the runner writes (`METRICS`), so that `is_metric` tells the analyses a
measurement from a setting without importing any runner.

The object-store runner's load generator lives here too: `objload` (S3/Swift load from one
host: `LoadSpec`, `Target`, `run_load`) and `fanout` (the same from several hosts through
Dask: `run_load_on_hosts`); they load on first use, as the runners do."""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..._lazy import attach
from ._program import (RESERVED_ENV, TAG_ENV, ShellTemplateError, SubstitutionError,
                    campaign_identity, output_files, render_argv, render_value,
                    reserved_env_clash, run_identity, run_program, run_tag, shell_command,
                    substitute, tail, template_names)
from ._sandbox import (UNSANDBOXED_ENV, Declared, declared, refused_socket, refused_writable,
                       require_sandbox, system_writable, unsandboxed)
from .base import Runner, RunResult, failure_lines

REGISTRY: dict[str, str] = {
    "fio": "storlab.campaign.runners.fio:FioRunner",
    "command": "storlab.campaign.runners.command:CommandRunner",
    "postmark": "storlab.campaign.runners.postmark:PostmarkRunner",
    "sysbench": "storlab.campaign.runners.sysbench:SysbenchRunner",
    "simulator": "storlab.campaign.runners.simulator:SimulatorRunner",
    "objectstore": "storlab.campaign.runners.objectstore:ObjectStoreRunner",
    "ceph": "storlab.campaign.runners.ceph:CephRunner",
}

#: The measurement columns each runner writes, as regular expressions matching a whole
#: column name: what an analysis must never read as a setting, whatever its values look like
#: (`is_metric` asks). Declared beside the registry rather than in each runner's module so
#: that asking imports no runner: importing all seven costs 0.18 s of CPU even with pandas
#: already loaded (pydantic, the load generator), a fifth of the importance command's 1 s.
METRICS: dict[str, tuple[str, ...]] = {
    "fio": (r"(?:read|write|trim|total)_(?:iops\w*|bw\w*|io_\w+|runtime|(?:c|s)?lat\w*)",
            "usr_cpu", "sys_cpu",
            r"fio\..+"),  # fio's own names kept beside storlab's (fio.read.iops, ...)
    "command": (),  # named by the user (json_metrics, patterns)
    "postmark": (r"\w+_per_s", "total_s", "transactions_s"),
    "sysbench": (r"\w+_per_s", "total_time_s", "total_events",
                 r"latency_(?:min|avg|max|p\d+)_ms"),
    "simulator": (r"(?:(?:get|put|delete|head)_)?(?:ops_s|mb_s|lat_(?:mean|p\d+)_ms)",
                  r"util_\w+", "bottleneck_util"),
    "objectstore": (r"(?:(?:get|put|delete|head)_)?"
                    r"(?:ops_per_s|bytes_per_s|lat_\w+_ms|requests|errors)",
                    "prepare_s"),  # its totals also as fio's read_iops, ... (fio's entry)
    "ceph": (),  # the metrics of the load it drives: fio's, the object store's
}


def is_metric(name: str, kinds: Iterable[str] | None = None) -> bool:
    """Whether the column `name` is a measurement of one of the runners `kinds` (default:
    every runner, since a results table, a CSV or a command's named outputs, may hold any
    of their columns): `total_iops`, `read_clat_p99_us`, `ops_s`, `reads_per_s`, ..."""
    return bool(_metric_pattern(tuple(REGISTRY if kinds is None else kinds)).match(str(name)))


@functools.cache
def _metric_pattern(kinds: tuple[str, ...]) -> re.Pattern[str]:
    from ...errors import CampaignError

    unknown = [k for k in kinds if k not in METRICS]
    if unknown:
        raise CampaignError(f"runner type {unknown[0]!r} must be one of {', '.join(REGISTRY)}")
    parts = dict.fromkeys(p for k in kinds for p in METRICS[k])  # once each, in order
    return re.compile("^(?:" + "|".join(parts) + ")$" if parts else r"(?!)")


#: Runners that start programs (each in its sandbox); the simulator and the object-store
#: load generator run in storlab's own process.
PROGRAM_RUNNERS = ("fio", "command", "postmark", "sysbench", "ceph")


def starts_programs(kind: str) -> bool:
    """Whether the runner `kind` starts programs (in the sandbox), without importing it."""
    return kind in PROGRAM_RUNNERS


# The load generator (numpy, pandas) loads on first use.
_lazy_names, __getattr__, __dir__ = attach(__name__, {
    "LoadSpec": ".objload", "LoadResult": ".objload", "Target": ".objload",
    "run_load": ".objload", "LoadError": "storlab.errors", "run_load_on_hosts": ".fanout",
    "load_spec_from": ".objectstore", "resolve_target": ".objectstore",
})

if TYPE_CHECKING:  # the lazy names, for type checkers and readers; loaded on first use
    from ...errors import LoadError
    from .fanout import run_load_on_hosts
    from .objectstore import load_spec_from, resolve_target
    from .objload import LoadResult, LoadSpec, Target, run_load

#: The program-running helpers (private modules `_program`, `_sandbox`) the campaign loop shares
#: with runners.
__all__ = ["REGISTRY", "RunResult", "Runner", "make_runner", "runner_class", "failure_lines",
           "PROGRAM_RUNNERS", "starts_programs", "METRICS", "is_metric",
           "RESERVED_ENV", "TAG_ENV", "ShellTemplateError", "SubstitutionError", "render_argv",
           "render_value", "reserved_env_clash", "run_program", "run_tag", "shell_command",
           "substitute", "tail", "template_names", "output_files", "campaign_identity",
           "run_identity", "UNSANDBOXED_ENV", "Declared", "declared", "require_sandbox",
           "refused_writable", "refused_socket",
           "system_writable", "unsandboxed",
           # loaded on first use
           "LoadSpec", "LoadResult", "Target", "run_load", "LoadError", "run_load_on_hosts",
           "load_spec_from", "resolve_target"]


def make_runner(kind: str, options: dict[str, Any] | None = None) -> Runner:
    """An instance of the runner `kind` with its fixed options."""
    from ..spec import CampaignError

    factory = runner_class(kind)
    options = dict(options or {})
    _check_signature(kind, factory, options)
    try:
        return factory(**options)
    except TypeError as exc:
        raise CampaignError(f"runner {kind!r}: bad options ({exc})") from None


def runner_class(kind: str) -> Any:
    """The class of the runner `kind` (its module imported now). Besides `run`, a class
    may have `prepare_options(options, directory)` (a campaign's options as its runs use
    them, and what the measurement records beside them) and `document(raw)` (the program's
    own output document of a run, written beside the store)."""
    from ..spec import CampaignError

    if kind not in REGISTRY:
        raise CampaignError(f"runner type {kind!r} must be one of {', '.join(REGISTRY)}")
    module, cls = REGISTRY[kind].split(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as exc:
        raise CampaignError(f"runner {kind!r} is not available here ({exc})") from None


def _check_signature(kind: str, factory: Any, options: dict[str, Any]) -> None:
    """Refuse a missing required option or (for a runner without free-form options) an
    unknown one, with a "did you mean" (a typo `comand:` read as `CommandRunner.__init__()
    missing 1 required positional argument`)."""
    import difflib
    import inspect

    from ..spec import CampaignError

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return
    named = [n for n, p in params.items()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    free = any(p.kind == p.VAR_KEYWORD for p in params.values())
    unknown = [k for k in options if k not in named]
    for n in named:
        if params[n].default is params[n].empty and n not in options:
            near = difflib.get_close_matches(n, unknown, n=1)
            raise CampaignError(f"runner {kind!r} needs option {n!r}"
                                + (f" (you wrote {near[0]!r}: did you mean {n!r}?)"
                                   if near else ""))
    if unknown and not free:
        near = difflib.get_close_matches(unknown[0], named, n=1)
        raise CampaignError(f"runner {kind!r}: unknown option {unknown[0]!r}"
                            + (f" (did you mean {near[0]!r}?)" if near else "")
                            + f"; its options are {', '.join(named)}")

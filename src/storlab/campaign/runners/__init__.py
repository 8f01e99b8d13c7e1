"""Runners turn one configuration into one measured run (see `base.Runner`).

The registry maps a campaign's `runner.type` to its class, imported only when used (the
simulator runner lives in another engineer's module and pulls in the simulator), and to the
measurement columns the runner writes (`METRICS`), so that `is_metric` tells the analyses a
measurement from a setting without importing any runner.

The object-store runner's load generator lives here too: `objload` (S3/Swift load from one
host: `LoadSpec`, `Target`, `run_load`) and `fanout` (the same from several hosts through
Dask: `run_load_on_hosts`); they load on first use, as the runners do."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..._lazy import attach
from ...metrics import METRICS, is_metric  # each runner's measurement columns (a low layer)

REGISTRY: dict[str, str] = {
    "fio": "storlab.campaign.runners.fio:FioRunner",
    "command": "storlab.campaign.runners.command:CommandRunner",
    "postmark": "storlab.campaign.runners.postmark:PostmarkRunner",
    "sysbench": "storlab.campaign.runners.sysbench:SysbenchRunner",
    "simulator": "storlab.campaign.runners.simulator:SimulatorRunner",
    "objectstore": "storlab.campaign.runners.objectstore:ObjectStoreRunner",
    "ceph": "storlab.campaign.runners.ceph:CephRunner",
}

#: Runners that start programs (each in its sandbox; the object-store load is a child
#: process of its own there); the simulator runs in storlab's own process.
PROGRAM_RUNNERS = ("fio", "command", "postmark", "sysbench", "ceph", "objectstore")


def starts_programs(kind: str) -> bool:
    """Whether the runner `kind` starts programs (in the sandbox), without importing it."""
    return kind in PROGRAM_RUNNERS


# Loaded on first use: the program-running helpers (a load generator's child process
# imports this package without needing them: its start pays for what it imports), the
# load generator (numpy, pandas).
_lazy_names, __getattr__, __dir__ = attach(__name__, {
    **{n: "._program" for n in (
        "RESERVED_ENV", "TAG_ENV", "ShellTemplateError", "SubstitutionError",
        "campaign_identity", "output_files", "render_argv", "render_value",
        "reserved_env_clash", "run_directory", "run_identity", "run_program", "run_tag",
        "shell_command", "substitute", "tail", "template_names", "write_run_file")},
    **{n: "._sandbox" for n in (
        "UNSANDBOXED_ENV", "Declared", "current", "declared", "exec_missing", "is_script",
        "landlock_missing", "landlock_net_missing", "ld_conf_opt_dirs", "opens_declared",
        "refused_dir", "refused_outside", "refused_readable", "refused_shared",
        "refused_socket", "require_sandbox", "shown_install_trees", "system_writable",
        "unsandboxed")},
    **{n: ".base" for n in ("Runner", "RunResult", "failure_lines", "option_bool")},
    "LoadSpec": ".objload", "LoadResult": ".objload", "Target": ".objload",
    "run_load": ".objload", "LoadError": "storlab.errors", "run_load_on_hosts": ".fanout",
    "load_spec_from": ".objectstore", "resolve_target": ".objectstore",
    "run_load_walled": ".objectstore", "serve_fio": ".fio",
    "register_cluster_walls": ".cluster_walls",
})

if TYPE_CHECKING:  # the lazy names, for type checkers and readers; loaded on first use
    from ._program import (RESERVED_ENV, TAG_ENV, ShellTemplateError, SubstitutionError,
                           campaign_identity, output_files, render_argv, render_value,
                           reserved_env_clash, run_directory, run_identity, run_program,
                           run_tag, shell_command, substitute, tail, template_names,
                           write_run_file)
    from ._sandbox import (UNSANDBOXED_ENV, Declared, current, declared, exec_missing, is_script,
                           landlock_missing,
                           landlock_net_missing, ld_conf_opt_dirs, opens_declared,
                           refused_dir, refused_outside, refused_readable, refused_shared,
                           refused_socket, require_sandbox,
                           shown_install_trees, system_writable, unsandboxed)
    from .base import Runner, RunResult, failure_lines, option_bool
    from ...errors import LoadError
    from .fanout import run_load_on_hosts
    from .cluster_walls import register_cluster_walls
    from .fio import serve_fio
    from .objectstore import load_spec_from, resolve_target, run_load_walled
    from .objload import LoadResult, LoadSpec, Target, run_load

#: The program-running helpers (private modules `_program`, `_sandbox`) the campaign loop shares
#: with runners.
__all__ = ["REGISTRY", "RunResult", "Runner", "make_runner", "runner_class", "failure_lines",
           "PROGRAM_RUNNERS", "starts_programs", "METRICS", "is_metric",
           "RESERVED_ENV", "TAG_ENV", "ShellTemplateError", "SubstitutionError", "render_argv",
           "render_value", "reserved_env_clash", "run_program", "run_tag", "shell_command",
           "substitute", "tail", "template_names", "output_files", "campaign_identity",
           "run_identity", "UNSANDBOXED_ENV", "Declared", "current", "declared", "require_sandbox",
           "refused_socket", "refused_shared", "refused_dir", "refused_outside",
           "refused_readable", "shown_install_trees",
           "system_writable", "unsandboxed", "landlock_missing", "landlock_net_missing", "exec_missing",
           "is_script", "ld_conf_opt_dirs", "opens_declared", "option_bool", "run_directory",
           "write_run_file",
           # loaded on first use
           "LoadSpec", "LoadResult", "Target", "run_load", "LoadError", "run_load_on_hosts",
           "load_spec_from", "resolve_target", "run_load_walled", "serve_fio",
           "register_cluster_walls"]


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

"""The checks a campaign passes before anything runs, each naming the file and field: its
steps' templates (at load), then those that need the runner (`check_runner`, the
campaign's `preflight`): its options, the sandbox (the store outside the scratch area, the
declared directories and sockets), every configuration's targets resolved where its run
will use them (`check_targets`, also for each new batch of an adaptive source), the grants
a runner's program would pass on, and the executor's width against the source. What only a
runner knows it checks itself (`check_target`, `refused_grant`, `check_home`, ...); these
are early, friendly errors, the sandbox is the guarantee."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import StorlabError
from ..fileio import within
from .executors import requested_width
from .runners import (ShellTemplateError, current, landlock_net_missing, make_runner,
                      refused_dir, refused_outside, refused_readable, refused_shared,
                      refused_socket, render_argv, require_sandbox, reserved_env_clash,
                      shell_command, starts_programs, template_names, unsandboxed)
from .runners import declared as in_campaign
from .spec import CampaignError, CampaignSpec
from .store import refuse_foreign_files, refuse_linked_dirs, refuse_links

if TYPE_CHECKING:
    from .campaign import Campaign

#: Names the step templates may use besides the factors and `vars`.
BUILTINS = ("workdir", "campaign_dir", "key", "config_id", "repetition")


def check_steps(camp: Campaign) -> None:
    """The setup and teardown steps' templates (each `{name}` a factor, a var or a
    builtin; a shell step's values reach it by the environment) and `runner.exclude`."""
    known = set(camp.space.names) | set(camp.spec.vars) | set(BUILTINS)
    clash = reserved_env_clash(set(camp.space.names) | set(camp.spec.vars))
    if clash:
        what = "factor" if clash[0] in camp.space.names else "field vars:"
        raise CampaignError(f"{camp.path}: {what} {clash[0]!r} would reach shell steps as "
                            f"{clash[1]}, storlab's own environment variable; rename it")
    for part in ("setup", "teardown"):
        for i, step in enumerate(getattr(camp.spec, part)):
            for t in step.templates:
                unknown = template_names(t) - known
                if unknown:
                    raise CampaignError(
                        f"{camp.path}: field {part}[{i}]: {{{sorted(unknown)[0]}}} is not a "
                        "factor, a var or one of " + ", ".join(BUILTINS))
            try:  # shell steps get values by the environment, `sh -c` scripts as words
                if step.shell:
                    shell_command(str(step.run), dict.fromkeys(known, ""))
                else:
                    render_argv(step.templates, dict.fromkeys(known, ""))
            except ShellTemplateError as exc:
                raise CampaignError(f"{camp.path}: field {part}[{i}]: {exc}") from None
    bad = [n for n in camp.spec.runner.exclude if n not in camp.space.names]
    if bad:
        raise CampaignError(f"{camp.path}: field runner.exclude: {bad} are not factors")


#: The operator's grant: the variables (comma-separated names) a campaign's
#: `sandbox.env_pass` may hand its programs. The campaign file names what its programs
#: need; only the operator, at run time, lets them have it (`storlab run --env-pass NAME`).
ENV_GRANT = "STORLAB_ENV_PASS"


def granted_env() -> set[str]:
    """The names the operator granted (ENV_GRANT in this process's environment)."""
    return {n for n in re.split(r"[,\s]+", os.environ.get(ENV_GRANT, "")) if n}


def grant_env(names: Iterable[str]) -> None:
    """Grant `names` too (`storlab run --env-pass`), for this process's campaigns."""
    names = set(names)
    if names:
        os.environ[ENV_GRANT] = ",".join(sorted(granted_env() | names))


def check_runner(camp: Campaign) -> Any:
    """Checks that need the runner: options accepted, targets allowed (a block device or
    an existing file outside the campaign's scratch area without `allow_destructive` is
    refused here, before any run or step), resolved in a run's scratch directory.
    Returns the runner (an adaptive campaign checks each new batch with it). Refused too
    when the run's programs cannot be sandboxed here (`require_sandbox`), and when the
    store lies in the scratch area, where the runs' programs write (one could put a link
    at the store's name that storlab, as root, would then write through)."""
    if camp.store_path.resolve().is_relative_to(camp.scratch.resolve()):
        raise CampaignError(f"{camp.path}: field store: {camp.spec.store} lies inside the "
                            f"scratch area ({camp.spec.workdir}), where the runs' programs "
                            "write; name a store outside it")
    for fld in ("store", "workdir"):
        try:
            refuse_linked_dirs(camp.dir, getattr(camp.spec, fld), fld)
        except CampaignError as exc:
            raise CampaignError(f"{camp.path}: {exc}") from None
    _refuse_scratch_elsewhere(camp)
    refuse_links(camp.store_path)
    refuse_foreign_files(camp.store_path)
    try:
        runner = make_runner(camp.spec.runner.type, camp.runner_options())
    except CampaignError as exc:
        raise CampaignError(f"{camp.path}: field runner: {exc}") from None
    if starts_programs(camp.spec.runner.type) or camp.spec.setup or camp.spec.teardown:
        try:
            require_sandbox()
        except CampaignError as exc:
            raise CampaignError(f"{camp.path}: {exc}") from None
    sb = camp.spec.sandbox
    if not sb.allow_destructive:  # the campaign's own directory, or the opt-in
        for i, p in enumerate(sb.writable):
            why = refused_outside(str(camp.dir / p), [str(camp.dir)])
            if why:
                raise CampaignError(
                    f"{camp.path}: field sandbox.writable[{i}]: {why}: the runs' programs "
                    "could overwrite what is there (a script root runs, storlab's own "
                    "files); put it inside the campaign's directory, or set "
                    "sandbox.allow_destructive: true if writing there is really meant")
    for i, p in enumerate(sb.sockets):
        why = refused_socket([str(camp.dir / p)], sb.allow_destructive)
        if why:
            raise CampaignError(f"{camp.path}: field sandbox.sockets[{i}]: {why}")
    for i, p in enumerate(sb.readable):
        why = refused_readable([str(camp.dir / p)], sb.network, sb.allow_destructive,
                               sb.may_make_unix_sockets, homes=[str(camp.dir)])
        if why:
            raise CampaignError(f"{camp.path}: field sandbox.readable[{i}]: {why}")
    if not sb.allow_destructive:  # here, not when the file is read: its results stay readable
        for part in ("setup", "teardown"):
            for i, step in enumerate(getattr(camp.spec, part)):
                if step.system_writable:  # no walls at all: any device or file of the host
                    raise CampaignError(
                        f"{camp.path}: field {part}[{i}].system_writable: the step runs "
                        "outside the sandbox, where it may write any device or file: it "
                        "needs sandbox.allow_destructive: true")
    ungranted = [n for n in sb.env_pass if n not in granted_env()]
    if ungranted:  # the campaign's author would pick the operator's tokens and keys
        raise CampaignError(
            f"{camp.path}: field sandbox.env_pass: {', '.join(ungranted)} not granted: a "
            "campaign's programs get the operator's variables only when the operator says so "
            f"(storlab run --env-pass {ungranted[0]}, or {ENV_GRANT}={','.join(ungranted)})")
    names = getattr(runner, "check_fields", None)
    if names is not None:  # every {field} is known before the first run
        try:
            names({n for n in camp.space.names if n not in camp.spec.runner.exclude})
        except CampaignError as exc:
            raise CampaignError(f"{camp.path}: field runner: {exc}") from None
    check_targets(camp, runner, [(cid, cfg) for cid, cfg, _ in camp.configs])
    check = getattr(camp.source, "check", None)
    if check is not None:  # e.g. a response the runner cannot produce
        try:
            check(runner)
        except StorlabError as exc:
            raise CampaignError(f"{camp.path}: design: {exc}") from None
    return runner


def _refuse_scratch_elsewhere(camp: Campaign) -> None:
    """The scratch area (`workdir:`, default `scratch`) may be a link the user set up (to a
    faster disk); storlab makes the runs' directories there as root and the programs write
    in them. Judged like a writable declaration: leading outside the campaign's directory
    it needs `sandbox.allow_destructive` (a campaign shipped `scratch` as a link to /etc,
    `cp -r` kept it, and root made the runs' directories there), and even then not into
    the system's trees, a shared directory or one another user owns or may write
    (`refused_dir`)."""
    if camp.own_scratch():
        return
    shown = f"{camp.spec.workdir} (leading to {os.path.realpath(camp.scratch)})"
    if not camp.spec.sandbox.allow_destructive:
        raise CampaignError(
            f"{camp.path}: field workdir: the scratch area {shown} leads outside the "
            "campaign's directory, and storlab would make the runs' directories there as "
            "root; make it a directory inside the campaign's, or set "
            "sandbox.allow_destructive: true if a scratch area there is really meant")
    why = refused_dir(str(camp.scratch), [str(camp.dir)])
    if why:
        raise CampaignError(
            f"{camp.path}: field workdir: the scratch area {why}: storlab would make the "
            "runs' directories there as root, even with sandbox.allow_destructive; link a "
            "directory of the benchmark's own (/mnt/test, one made under /var/tmp)")


def check_targets(camp: Campaign, runner: Any, configs: list[tuple[int, dict[str, Any]]]
                  ) -> None:
    """Every configuration's targets, resolved in the run directory the runner will use."""
    check = getattr(runner, "check_target", None)
    if check is not None:
        own = camp.own_scratch()
        for cid, cfg in configs:
            run_dir = camp.run_dir(cid)
            try:
                check(_runner_config(camp.spec, cfg), base=camp.scratch if own else run_dir,
                      workdir=run_dir)
            except CampaignError as exc:
                hint = "" if own else (
                    f" ({camp.scratch} leads outside the campaign's directory: only "
                    "each run's own directory counts as the campaign's there)")
                raise CampaignError(f"{camp.path}: {exc}{hint}") from None
    # a shared system directory declared writable whole (fio `directory: /var/tmp`)
    sb = camp.spec.sandbox
    job_options = _per_config(camp, lambda c, d: runner.job_options(c, d, check=False))
    # a program the runner's program starts must not inherit an undeclared grant
    grant = getattr(runner, "refused_grant", None)
    if grant is not None:
        for cid, cfg in configs:
            why = grant(job_options(cid, cfg), bool(sb.sockets) or sb.unix_sockets,
                        sb.io_uring, sb.network)
            if why:
                raise CampaignError(f"{camp.path}: field runner: {why}")
    # Unix sockets the runner's program gets without a declaration (fio's net engine with
    # protocol=unix): sandbox.readable judged as with them declared (`refused_readable`)
    implicit = getattr(runner, "unix_socket_reason", None)
    if implicit is not None and sb.readable and not sb.may_make_unix_sockets:
        for cid, cfg in configs:
            reason = implicit(job_options(cid, cfg))
            for i, p in enumerate(sb.readable) if reason else ():
                why = refused_readable([str(camp.dir / p)], sb.network, sb.allow_destructive,
                                       f"the runner's program ({reason})", homes=[str(camp.dir)])
                if why:
                    raise CampaignError(f"{camp.path}: field sandbox.readable[{i}]: {why}")
    # a priority only CAP_SYS_NICE gives, memory locked past RLIMIT_MEMLOCK only
    # CAP_IPC_LOCK allows: kept only when declared (a real-time class starves the host's
    # CPU, locked pages its memory), so said before any run rather than as each run's error
    for ask, kept, cap, key in (("realtime_reason", sb.realtime, "CAP_SYS_NICE",
                                 "sandbox.realtime"),
                                ("lockmem_reason", sb.lock_memory, "CAP_IPC_LOCK",
                                 "sandbox.lock_memory")):
        reason = getattr(runner, ask, None)
        if reason is None or kept:
            continue
        for cid, cfg in configs:
            why = reason(job_options(cid, cfg))
            if why:
                raise CampaignError(f"{camp.path}: field runner: {why} needs {cap}, which "
                                    f"the programs keep only when the campaign declares "
                                    f"{key}: true")
    # the runner's implicit network is held to its TCP ports by Landlock, or not given
    need = getattr(runner, "network_reason", lambda: None)()
    if need and not sb.network and not unsandboxed() and (no := landlock_net_missing()):
        raise CampaignError(f"{camp.path}: field runner: {need} gets the host's network, "
                            f"held to its TCP ports by Landlock, but {no}; declare "
                            "sandbox.network: true to give the programs the whole network")
    walls = getattr(runner, "sandbox", None)
    targets_of = _per_config(camp, lambda c, d: walls(c, d)[0])
    allow = sb.allow_destructive or getattr(runner, "allow_destructive", False)
    why = refused_shared([str(camp.dir / p) for p in sb.writable], allow)
    if why:
        raise CampaignError(f"{camp.path}: field sandbox.writable: {why}")
    _refuse_over_own(camp, sb.writable, "sandbox.writable", allow)
    if walls is not None:
        for cid, cfg in configs:
            why = refused_shared(targets_of(cid, cfg), allow)
            if why:
                raise CampaignError(f"{camp.path}: field runner: {why}")
    # a file a program makes directly in the campaign's directory: the sandbox keeps
    # that directory read-only unless the campaign declares it (or allow_destructive)
    home = getattr(runner, "check_home", None)
    here = os.path.realpath(camp.dir)
    if home is not None and not sb.allow_destructive and not any(
            within(here, os.path.realpath(camp.dir / p)) for p in sb.writable):
        for cid, cfg in configs:
            try:
                home(_runner_config(camp.spec, cfg), camp.dir, camp.run_dir(cid))
            except CampaignError as exc:
                raise CampaignError(f"{camp.path}: {exc}") from None
    # a runner's target outside the campaign's directory: only with allow_destructive
    # (a deny-list cannot name every root-owned directory a root-run script or a
    # site-packages lies in); fio's names its option
    outside = getattr(runner, "refused_outside_target", None)
    if not allow:
        for cid, cfg in configs:
            why = outside and outside(_runner_config(camp.spec, cfg),
                                      camp.run_dir(cid), str(camp.dir))
            if why:
                raise CampaignError(f"{camp.path}: {why}")
            if walls is not None:
                _refuse_outside_targets(camp, targets_of(cid, cfg))
    # a file not made yet in another existing directory, an existing directory the
    # job names beside a program the runner's program starts: refused unless declared
    # (each asked of the runners that have it: the object-store load starts no program)
    new_file = getattr(runner, "refused_new_file", None)
    program_dir = getattr(runner, "refused_program_dir", None)
    if (new_file or program_dir) and not sb.allow_destructive:
        declared = [os.path.realpath(camp.dir / p) for p in sb.writable]
        # as the runs judge a directory (`opens_declared`): the campaign's own opens
        with in_campaign(replace(current(), homes=(str(camp.dir),))):
            _refuse_new_files(camp, configs, new_file, program_dir, declared, job_options)
    if walls is not None:  # (after: a file made in the campaign's directory has a hint)
        for cid, cfg in configs:
            _refuse_over_own(camp, targets_of(cid, cfg), "runner", allow)


def _per_config(camp: Campaign, build: Callable[[dict[str, Any], Path], Any]
                ) -> Callable[[int, Mapping[str, Any]], Any]:
    """What `build` makes of a configuration as the runner sees it (`_runner_config`) in
    its run directory, by the configuration's id, as the preflight's checks ask it (the
    runner's `job_options`, what its sandbox opens): each made once, when first asked."""
    built: dict[int, Any] = {}

    def get(cid: int, cfg: Mapping[str, Any]) -> Any:
        if cid not in built:
            built[cid] = build(_runner_config(camp.spec, cfg), camp.run_dir(cid))
        return built[cid]
    return get


def _refuse_new_files(camp: Campaign, configs: list[tuple[int, dict[str, Any]]],
                      new_file: Any, program_dir: Any, declared: list[str],
                      job_options: Callable[[int, Mapping[str, Any]], Any]) -> None:
    """A file not made yet in another existing directory, an existing directory the job
    names beside a program the runner's program starts: refused unless declared."""
    for cid, cfg in configs:
        run_dir = camp.run_dir(cid)
        why = (new_file and new_file(_runner_config(camp.spec, cfg), run_dir, declared)) \
            or (program_dir and program_dir(job_options(cid, cfg), run_dir, declared))
        if why:
            raise CampaignError(f"{camp.path}: field runner: {why}")


def _refuse_outside_targets(camp: Campaign, targets: list[str]) -> None:
    """A runner's target (a directory, a file made or not yet) outside the campaign's
    directory, without allow_destructive: refused in one line, with the way out (the
    sandbox opens none there either). Devices are the target check's; /proc never opens."""
    for t in targets:
        t = os.path.normpath(os.path.join(camp.dir, t))
        if t.startswith(("/dev/", "/proc/")) or t in ("/dev", "/proc"):
            continue
        why = refused_outside(t, [str(camp.dir)])
        if why:
            raise CampaignError(
                f"{camp.path}: field runner: a target of the runner's: {why}; the runs' "
                "programs may write only inside it unless the campaign sets "
                "sandbox.allow_destructive: true")


def _refuse_over_own(camp: Campaign, targets: list[str], field: str, allow: bool) -> None:
    """A directory a run's programs may write (a declared directory, or the directory
    of a file not made yet) that holds the store or the directory above the scratch
    area: a program could swap storlab's own files or directories there for links.
    A file not made yet counts only where the sandbox opens its directory (with
    `allow`: `_open_target`)."""
    own = [os.path.realpath(camp.store_path.parent),
           os.path.realpath(camp.scratch.parent)]
    for t in targets:
        # as in the run (its directory not made yet: `..` taken from the name)
        r = os.path.realpath(camp.dir / t)  # an absolute target stays itself
        if os.path.isdir(r) or os.path.basename(os.fspath(t)) in (".", ".."):
            ds = [r]
        elif not os.path.lexists(r):
            # a directory made by the time the run starts (by storlab for its store,
            # by a step) opens as itself; a file not made yet opens its directory
            # only with `allow` (`_open_target`)
            parent = os.path.dirname(r)
            ds = [r] + ([parent] if allow else [])
        else:
            continue
        for d in ds:
            if any(within(o, d) for o in own):
                raise CampaignError(
                    f"{camp.path}: field {field}: {t} opens {d} to the runs' programs, "
                    "which holds the campaign's store or scratch area (a program could "
                    "swap them for links); declare a directory of its own, beside them")


def check_width(camp: Campaign, executor: str | None) -> None:
    """Refuse, before anything runs, `parallel:N` with more workers than an adaptive
    design's budget, or with an adaptive source that proposes one run at a time (N - 1
    slots would stay idle)."""
    width = requested_width(executor)
    if not camp.adaptive or width is None or width <= 1:
        return
    budget = int(camp.source.meta().get("budget") or 0)
    if budget and width > budget:
        raise CampaignError(f"--executor {executor}: {width} workers for a budget of "
                            f"{budget} runs; use at most parallel:{budget}")
    if not getattr(camp.source, "batches", False):
        raise CampaignError(f"--executor {executor}: the {camp.source.meta().get('kind')} "
                            "design proposes one run at a time; use --executor "
                            "sequential")


def _runner_config(spec: CampaignSpec, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration as the runner sees it (`runner.exclude` left out)."""
    return {k: v for k, v in cfg.items() if k not in spec.runner.exclude}

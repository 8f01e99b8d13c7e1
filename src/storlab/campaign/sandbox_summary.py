"""How a campaign's programs run, in words, for `storlab status` and the report: what the
sandbox opens besides each run's directory (declared directories, devices, network, Unix
sockets, io_uring, Landlock), then each step declared to run outside it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import StorlabError
from .runners import (UNSANDBOXED_ENV, exec_missing, is_script, landlock_missing,
                      landlock_net_missing, ld_conf_opt_dirs, make_runner, opens_declared,
                      shown_install_trees,
                      starts_programs, unsandboxed)
from .spec import CampaignSpec

if TYPE_CHECKING:
    from .campaign import Campaign


def sandbox_summary(camp: Campaign) -> list[str]:
    """How this campaign's programs run, for `storlab status` and the report: one line
    for the sandbox (what it opens besides each run's directory), then one per step
    declared `system_writable` (it runs outside). Empty for a runner that starts no
    program and has no steps."""
    if not starts_programs(camp.spec.runner.type) and not (camp.spec.setup
                                                           or camp.spec.teardown):
        return []
    if unsandboxed():
        head = f"off ({UNSANDBOXED_ENV}=1): programs run with the whole system writable"
    else:
        sb = camp.spec.sandbox
        opens, shut = declared_writable(sb.writable, sb.allow_destructive, str(camp.dir))
        extra = ", ".join(opens) or "nothing else"
        if shut:  # what the sandbox leaves read-only, said so, not listed as writable
            extra += (f"; declared but read-only (outside the campaign's directory: "
                      f"writable only with sandbox.allow_destructive): "
                      f"{', '.join(shut)}")
        own_allow = bool(camp.spec.runner.options.get("allow_destructive"))
        extra += ("; sandbox.writable and the runner's targets anywhere "
                  "(sandbox.allow_destructive)" if sb.allow_destructive else
                  "; sandbox.writable inside the campaign's directory only (elsewhere "
                  "with sandbox.allow_destructive), the runner's targets anywhere (its "
                  "allow_destructive)" if own_allow else
                  "; sandbox.writable inside the campaign's directory only, the runner's "
                  "targets too (elsewhere with sandbox.allow_destructive)")
        dev = own_allow or sb.allow_destructive
        net = ("the host's (sandbox.network: whatever the programs read, root inside, can "
               "leave the machine: root-only files under /etc included)" if sb.network
               else "none (its own)")
        try:
            runner = make_runner(camp.spec.runner.type, camp.runner_options())
            why = getattr(runner, "network_reason", lambda: None)()
            ring = getattr(runner, "io_uring_reason", lambda: None)()
            prog = getattr(runner, "program", lambda: None)()
            own = hasattr(runner, "starts_programs_reason")
            others = starts_others(camp, runner, prog) if own else None
        except (StorlabError, OSError, TypeError, ValueError):
            why = ring = prog = others = None
            own = False
        if why and not sb.network:
            net = f"the host's for the runner's program ({why})"
        trees = shown_install_trees(prog, str(camp.dir)) if prog else []
        head = (f"bwrap: read-only system (/usr, /etc, /sys) and campaign "
                + (f"directory, also {', '.join(sb.readable)}" if sb.readable
                   else "directory")
                + (f", the program's install tree {', '.join(trees)}" if trees else "")
                + (f", ld.so.conf's library directories {', '.join(libs)}"
                   if (libs := ld_conf_opt_dirs()) else "")
                + f"; writable: each run's directory, the runner's targets, {extra}; "
                "declared devices "
                + ("writable (allow_destructive)" if dev else "not openable")
                + f"; network: {net}; Unix sockets: "
                + (", ".join([*sb.sockets, *(["the run's own (sandbox.unix_sockets)"]
                                             if sb.unix_sockets else [])]) or "none")
                + "; io_uring: " + ("every program (sandbox.io_uring)" if sb.io_uring
                                    else f"the runner's program ({ring})" if ring
                                    else "none but the runner's own need (a factor's "
                                    "engine)")
                + "; CPU and I/O priority: " + ("raised at will, CAP_SYS_NICE kept "
                                                "(sandbox.realtime)" if sb.realtime else
                                                "not raised (no CAP_SYS_NICE)")
                + "; locked memory: " + ("at will, CAP_IPC_LOCK kept (sandbox.lock_memory)"
                                         if sb.lock_memory else
                                         "up to RLIMIT_MEMLOCK (no CAP_IPC_LOCK)")
                + "; Landlock: " + (f"not applied ({ll})" if (ll := landlock_missing())
                                    else "abstract sockets and signals scoped")
                + ("" if not why or sb.network else
                   "; the runner's network: TCP to its own ports only (Landlock)"
                   if not (no := landlock_net_missing()) else
                   f"; the runner's network: not applied ({no}): refused unless "
                   "sandbox.network")
                + "; programs it may execute: " + (
                    f"any, not applied ({no})" if own and (no := exec_missing()) else
                    "itself only (Landlock: its binary and ELF interpreter; seccomp: no "
                    "other execve)"
                    if own and not others else f"any ({others})" if own else
                    "any (the runner runs what it names)")
                + ("; setup and teardown steps: any program" if camp.spec.setup
                   or camp.spec.teardown else ""))
    if camp.spec.sandbox.env_pass:  # names only: the values are the operator's, at run time
        head += ("; variables passed by name besides the stated ones (sandbox.env_pass): "
                 + ", ".join(camp.spec.sandbox.env_pass))
    return [head, *system_writable_steps(camp.spec)]


def starts_others(camp: Campaign, runner: Any, prog: str | None) -> str | None:
    """Why some run's program may start other programs, so that it runs with no execute
    rule, decided as the runs decide it: the runner's own reason, the program a `#!`
    wrapper (`wrap` gives it none), or a configuration's options (fio's `exec_prerun`,
    `ioengine=exec`: the runner passes no executables for that run). The configurations
    are the fixed table's, each judged in its run's directory (`Campaign.run_dir`), or for
    an adaptive campaign each level a factor may take, judged in the first run's."""
    import inspect
    import shutil

    if why := runner.starts_programs_reason():
        return why
    if prog and is_script(shutil.which(prog) or prog):
        return f"{prog} is a #! script: what it starts is not held"
    if not inspect.signature(runner.starts_programs_reason).parameters:
        return None
    spec = camp.spec
    configs = [(cid, cfg) for cid, cfg, _ in camp.configs] if camp.configs else [
        (1, {f.name: v}) for f in camp.space.factors for v in (f.levels or [])]
    for cid, cfg in configs:
        opts = runner.job_options({k: v for k, v in cfg.items()
                                   if k not in spec.runner.exclude},
                                  camp.run_dir(cid), check=False)
        if why := runner.starts_programs_reason(opts):
            return f"{why}, in some configurations"
    return None


def declared_writable(paths: list[str], allow: bool, home: str
                      ) -> tuple[list[str], list[str]]:
    """The campaign's `sandbox.writable` split as the sandbox opens them (`_sandbox`'s
    `_open_target`): without `allow`, only inside the campaign's directory `home`
    (`opens_declared`; an existing file too); with `allow`, everything. Returns
    (writable, left read-only), as declared."""
    import os
    import stat

    from ..fileio import within

    opens: list[str] = []
    shut: list[str] = []
    for p in paths:
        at = os.path.join(home, p)  # relative to the campaign file, an absolute one itself
        try:
            st = os.stat(at)
        except OSError:
            st = None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            ok = allow or within(os.path.realpath(at), os.path.realpath(home))
        else:
            ok = opens_declared(at, allow, [home])
        (opens if ok else shut).append(p)
    return opens, shut


def system_writable_steps(spec: CampaignSpec) -> list[str]:
    """The steps declared to run outside the sandbox, as `setup[i]: command`."""
    return [f"{part}[{i}]: {s.run if isinstance(s.run, str) else ' '.join(s.run)}"
            for part in ("setup", "teardown")
            for i, s in enumerate(getattr(spec, part)) if s.system_writable]

"""The campaign file: one YAML document describing what to run, how often, in which order.

    name: fio-screening
    space: space.yaml               # or the space inline: {factors: [...]}
    design: {kind: pb, runs: 12}    # or {csv: configs.csv}
    runner:
      type: fio                     # fio | command | postmark | sysbench | simulator
      options: {ioengine: psync, size: 4M, runtime: 2, time_based: 1}
      exclude: [fs]                 # factors used by steps only, not passed to the runner
    repetitions: 2
    randomize: true                 # shuffle all (configuration, repetition) runs ...
    seed: 7                         # ... reproducibly; also the design's seed
    warmup: 1                       # discarded runs before each configuration's first run
    timeout: 60                     # seconds per run (default 3600; null: none)
    vars: {device: /dev/loop0}      # names for the steps besides the factors
    sandbox:                        # what the run's programs may write besides their run
      writable: [/mnt/test]         # directory (and the runner's declared targets)
      allow_destructive: false      # declared devices and existing files writable
      network: false                # true: the host's network (default: none of it)
      readable: [traces]            # shown read-only besides the system and campaign
                                    # (outside the campaign's directory: as root, only
                                    # with allow_destructive)
      sockets: [/run/mysqld/mysqld.sock]  # Unix sockets the programs may connect to
      io_uring: false               # true: every program may make io_uring rings
      unix_sockets: false           # true: every program may make Unix sockets of its own
      realtime: false               # true: programs keep CAP_SYS_NICE (chrt, nice -n -5,
                                    # fio prioclass=1); default: dropped
      lock_memory: false            # true: programs keep CAP_IPC_LOCK (mlock past
                                    # RLIMIT_MEMLOCK, fio lockmem); default: dropped
      env_pass: [SSH_AUTH_SOCK, https_proxy]  # storlab's variables every program and
                                    # step gets too, once `run --env-pass NAME` grants
                                    # them (names only: values read at run time)
    setup:                          # argv templates; values become whole argv elements
      # system_writable: no walls at all; only with sandbox.allow_destructive: true
      - {run: [mkfs.ext4, -F, -b, "{block_size}", "{device}"], system_writable: true}
      - {run: "echo {scheduler} > /sys/block/loop0/queue/scheduler", shell: true,
         system_writable: true}     # outside the sandbox: shown by status and report
    teardown: ["umount {mnt}"]     # a string is split like a shell would, then templated

Relative paths are relative to the campaign file's directory.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, \
    field_validator, model_validator

from ..errors import CampaignError, StorlabError
from ..fileio import (check_campaign_dir, check_no_foreign_link, check_trusted_dir,
                      read_yaml, within)
from ..limits import MAX_REPETITIONS, MAX_RUNS, MAX_SEED, MAX_TIMEOUT, MAX_WARMUP

# Bounds (storlab.limits) keep a typo from planning more runs than memory holds
# (`repetitions: 1000000000` once took 15 GB in `storlab status`).
MAX_PLANNED_RUNS = MAX_RUNS


class _Model(BaseModel):
    # No inf/nan for floats; booleans are true/false only (StrictBool below: `shell: 5` or
    # `shell: "yes"` is refused rather than read as true).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Step(_Model):
    """A setup or teardown command. `run` is an argv template (list), or a string split
    with shell rules (no shell runs it) unless `shell: true`."""

    run: list[str] | str
    shell: StrictBool = False
    timeout: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT)
    ignore_errors: StrictBool = False
    system_writable: StrictBool = False  # runs outside the sandbox (mkfs, mount, sysctl)

    @model_validator(mode="after")
    def _split(self) -> Step:
        if isinstance(self.run, str) and not self.shell:
            self.run = shlex.split(self.run)
        if isinstance(self.run, list):
            self.run = [str(a) for a in self.run]
            if not self.run:
                raise ValueError("a step needs a program to run")
        return self

    @property
    def templates(self) -> list[str]:
        return self.run if isinstance(self.run, list) else [self.run]


class DesignSpec(_Model):
    """Where the configurations come from: a generated design (`kind` and its options), a
    CSV of configurations, a literal list (`configs`), or an adaptive source (`kind: tune`
    and its options: `budget`, `strategy`, `objectives`, ...)."""

    kind: str | None = None
    csv: str | None = None
    configs: list[dict[str, Any]] | None = None
    runs: int | None = Field(default=None, ge=1, le=MAX_PLANNED_RUNS)
    resolution: int | None = None  # V, IV or 5: as `storlab design --resolution` reads it
    generators: list[str] | None = None
    center: int = Field(default=0, ge=0, le=MAX_PLANNED_RUNS)
    replicates: int = Field(default=1, ge=1, le=MAX_REPETITIONS)
    fold: str | None = None
    optimize: str | None = None
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)
    # kind: tune (storlab.tune): runs executed in all, strategy, what to optimise, ...
    budget: int | None = Field(default=None, ge=1, le=MAX_PLANNED_RUNS)
    strategy: str = "auto"
    objectives: list[str | dict[str, str]] | None = None
    screen_runs: int | None = Field(default=None, ge=2, le=100_000)
    confirm_runs: int = Field(default=3, ge=1, le=1000)
    confirm_top: int = Field(default=3, ge=1, le=1000)
    # share of the budget kept for racing the leading candidates (one objective)
    confirm_share: float = Field(default=0.5, gt=0, lt=1)
    stall: int | None = Field(default=None, ge=1, le=100_000)
    baseline: dict[str, Any] | None = None

    @field_validator("resolution", mode="before")
    @classmethod
    def _resolution(cls, v: Any) -> int | None:
        from ..design.aliasing import parse_resolution

        return None if v is None else parse_resolution(v)

    @model_validator(mode="after")
    def _one_source(self) -> DesignSpec:
        if sum(x is not None for x in (self.kind, self.csv, self.configs)) != 1:
            raise ValueError("give one of 'kind' (full, fractional, pb, lhs, tune), 'csv' "
                             "or 'configs'")
        if self.kind == "tune" and self.budget is None:
            raise ValueError("a tune design needs 'budget' (runs executed in all)")
        return self

    def with_source(self, **update: Any) -> DesignSpec:
        """This design read from another source (`kind`, `csv` or `configs` in `update`, with
        its own options): the other sources cleared and every generated-design option
        (runs, resolution, generators, center, replicates, fold, optimize) back to its
        default, so none of the file's fixed design leaks into the new one."""
        reset: dict[str, Any] = {"kind": None, "csv": None, "configs": None, "runs": None,
                                 "resolution": None, "generators": None, "center": 0,
                                 "replicates": 1, "fold": None, "optimize": None}
        return self.model_copy(update={**reset, **update})


class RunnerSpec(_Model):
    type: str
    options: dict[str, Any] = Field(default_factory=dict)
    exclude: list[str] = Field(default_factory=list)


#: Seconds a run may take unless the campaign file says `timeout:` (`null`: no limit).
DEFAULT_RUN_TIMEOUT = 3600.0


class SandboxSpec(_Model):
    """What the programs of a run may write besides their run directory and the runner's
    declared targets: `writable` paths (relative to the campaign file), and whether devices
    and existing files among them open for writing (`allow_destructive`); what they may
    reach besides the system's trees and the campaign's directory: the host's `network`,
    `readable` paths, `sockets`, io_uring rings (`io_uring`), Unix sockets of their own
    (`unix_sockets`); whether they may raise their CPU and I/O priority (`realtime`) and
    lock memory past their RLIMIT_MEMLOCK (`lock_memory`)."""

    writable: list[str] = Field(default_factory=list)
    allow_destructive: StrictBool = False
    #: The programs share the host's network (TCP/UDP, abstract sockets); otherwise they
    #: get a network namespace of their own with a loopback only.
    network: StrictBool = False
    #: Paths shown read-only besides the system's trees and the campaign's directory;
    #: for a storlab run as root, outside the campaign's directory (and those trees) only
    #: with `allow_destructive` (`refused_readable`).
    readable: list[str] = Field(default_factory=list)
    #: Unix sockets the programs may connect to (a database's, a server's); without one
    #: the programs cannot make a Unix socket at all (seccomp: EPERM).
    sockets: list[str] = Field(default_factory=list)
    #: Every program may make io_uring rings (their operations pass round the seccomp
    #: filter); otherwise only fio with an io_uring engine may.
    io_uring: StrictBool = False
    #: Every program may make Unix sockets of its own (multiprocessing's forkserver and
    #: Manager, a Listener); the host's stay out of reach (hidden, covered, Landlock).
    unix_sockets: StrictBool = False
    #: The programs keep CAP_SYS_NICE: real-time scheduling (`chrt`), a negative nice
    #: value, the real-time I/O class (fio `prioclass=1`). Dropped by default: one
    #: SCHED_FIFO program starves the host's CPU.
    realtime: StrictBool = False
    #: The programs keep CAP_IPC_LOCK: they may lock memory past their RLIMIT_MEMLOCK
    #: (`mlock`, fio `lockmem`). Dropped by default: locked pages cannot be reclaimed, one
    #: program can take the host's memory.
    lock_memory: StrictBool = False
    #: Variables of storlab's environment every program and step gets besides the stated
    #: ones (`PROGRAM_ENV`), by name: the value is read at run time, never stored
    #: (`SSH_AUTH_SOCK`, `https_proxy`, `CEPH_ARGS`, `LD_LIBRARY_PATH`).
    env_pass: list[str] = Field(default_factory=list)

    @property
    def may_make_unix_sockets(self) -> bool:
        """Whether every program may make a Unix socket: declared `sockets`,
        `unix_sockets`, or `io_uring` (a ring's `IORING_OP_SOCKET` passes round the
        filter)."""
        return bool(self.sockets) or self.unix_sockets or self.io_uring

    @field_validator("env_pass")
    @classmethod
    def _env_names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not a variable name (letters, digits, _)")
            if name.upper().startswith("STORLAB_"):
                raise ValueError(f"{name}: STORLAB_* variables are storlab's own (the "
                                 "factors' values, the run's tag), not passed by name")
        return list(dict.fromkeys(v))


class CampaignSpec(_Model):
    name: str = ""
    space: str | dict[str, Any]
    design: DesignSpec
    runner: RunnerSpec
    repetitions: int = Field(default=1, ge=1, le=MAX_REPETITIONS)
    randomize: StrictBool = True
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    warmup: int = Field(default=0, ge=0, le=MAX_WARMUP)
    timeout: float | None = Field(default=DEFAULT_RUN_TIMEOUT, gt=0, le=MAX_TIMEOUT)
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    vars: dict[str, Any] = Field(default_factory=dict)
    setup: list[Step] = Field(default_factory=list)
    teardown: list[Step] = Field(default_factory=list)
    store: str = "campaign.db"
    workdir: str = "scratch"
    keep_scratch: StrictBool = False

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if any(ord(c) < 32 for c in v):
            raise ValueError("a campaign name is one line of text")
        return v

    @field_validator("store", "workdir")
    @classmethod
    def _in_campaign_dir(cls, v: str) -> str:
        # the store and the scratch directory (emptied after each run) live inside the
        # campaign's directory: `workdir: ../..` would have emptied a parent directory
        if ".." in Path(v).parts or not within(v, ".", strict=True):
            raise ValueError("must be a name inside the campaign's directory (no '..', not "
                             "absolute)")
        return v

    @field_validator("runner", mode="before")
    @classmethod
    def _runner_shorthand(cls, v: Any) -> Any:
        return {"type": v} if isinstance(v, str) else v

    @field_validator("setup", "teardown", mode="before")
    @classmethod
    def _step_shorthand(cls, v: Any) -> Any:
        if v is None:
            return []
        if not isinstance(v, list):
            raise ValueError("must be a list of steps")
        return [{"run": s} if isinstance(s, (str, list)) else s for s in v]


def load_spec(path: str | Path) -> CampaignSpec:
    """Read and check a campaign file; errors name the file, the field and the value."""
    return read_spec(path)[1]


def read_spec(path: str | Path) -> tuple[Path, CampaignSpec]:
    """The campaign file's real path and its checked spec (`load_spec`). The path is the
    one `check_no_foreign_link` resolved, the file is read there, and the caller makes the
    store and the runs beside it: never a second resolution, which a link swapped in
    between would lead elsewhere."""
    p = Path(path)
    try:
        real = check_no_foreign_link(p)  # the store and the runs are made where the file is
        # as root: a directory no other user can swap for a link once the file is read
        check_campaign_dir(real.parent)
        data = read_yaml(real)
    except StorlabError as exc:
        raise CampaignError(str(exc)) from None
    if not isinstance(data, dict):
        raise CampaignError(f"{p}: expected a mapping of campaign fields")
    nul = _nul_field(data)
    if nul is not None:  # a path or argument with a NUL byte cannot reach the system
        raise CampaignError(f"{p}: field {nul}: holds a NUL byte")
    try:
        spec = CampaignSpec.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = ".".join(str(x) for x in e["loc"]) or "(top)"
        value = e.get("input")
        shown = "" if isinstance(value, dict) or e["type"] == "missing" else f" (value {value!r})"
        msg = str(e['msg']).removeprefix("Value error, ")
        raise CampaignError(f"{p}: field {loc}: {msg}{shown}") from None
    sub = Path(spec.store).parent
    if os.geteuid() == 0 and sub != Path("."):  # `store: sub/x.db`: sub judged as well
        try:
            check_trusted_dir(real.parent / sub, f"{p}: field store:")
        except StorlabError as exc:
            raise CampaignError(str(exc)) from None
    return real, spec


def _nul_field(data: Any, where: str = "") -> str | None:
    """The dotted field of the first text (key or value) holding a NUL byte, or None."""
    items = data.items() if isinstance(data, dict) else \
        enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        here = f"{where}.{k}" if where else str(k)
        if (isinstance(k, str) and "\0" in k) or (isinstance(v, str) and "\0" in v):
            return here
        inner = _nul_field(v, here)
        if inner is not None:
            return inner
    return None


def check_plan(spec: CampaignSpec, n_configs: int, source: str = "campaign") -> None:
    """Refuse a plan of more runs than `MAX_PLANNED_RUNS` (configurations x (repetitions +
    warm-ups)) before anything is allocated for it."""
    total = n_configs * (spec.repetitions + spec.warmup)
    if total > MAX_PLANNED_RUNS:
        raise CampaignError(f"{source}: {n_configs} configurations x {spec.repetitions} "
                            f"repetitions (+{spec.warmup} warm-up) = {total} runs, more than "
                            f"{MAX_PLANNED_RUNS}")

"""The minimal measurement set for the f_rw model, run through the campaign machinery.

Per I/O size: 100 % read and 100 % write (optionally 50 % as a third anchor), repeated;
optionally validation mixes (other read percentages) and a mixed-size workload (fio
`bssplit`). Replicate rounds run in a shuffled order so that the endpoints are interleaved
with the mixes: on a drifting device a block of endpoints measured first would bias every
check. The model is fitted from the anchors only; everything else is held out and compared.

Every run is one configuration of a campaign (a CSV design written into the campaign
directory, run by `storlab.campaign.Campaign` with the fio runner): each finished run is in
the campaign's SQLite store at once, and the same command resumes a killed measurement.

The workload is the one the model predicts: fio's random map is off (`norandommap`). With
it on, fio marks the blocks each I/O touched and cuts a new I/O short at the first block
already done (io_u.c, mark_random_map), so a bssplit of 4k/80:64k/20 ran with a mean I/O of
7.9 KiB instead of 16 KiB (issue 13). The mean I/O size of every run (bytes / I/Os) is
checked against the requested size or split, and a run that is off by more than 2 % is
refused: it is kept in the store, marked `io_size_off`, and left out of the fit and the
checks.
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import random
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from ..errors import EstimateError, MeasureRunsFailed, StorlabError
from ..fileio import (check_no_foreign_link, check_trusted_dir, open_dir_beneath,
                      read_in_dir, read_yaml, walk_resolved, within, write_fresh, write_in_dir)
from ..jsonutil import to_jsonable
from ..result_shape import Result
from .cells import Cell, check_read_pct, parse_size_mix, size_bytes, size_label
from .mixrule import DEFAULT_MIX, MIXES
from .rwmodel import RWModel

PATTERNS = {"random": ("randread", "randwrite", "randrw"),
            "sequential": ("read", "write", "rw")}
METRICS = ("read_iops", "write_iops", "total_iops",
           "read_bw_bytes", "write_bw_bytes", "total_bw_bytes")
#: fio options the plan sets itself (the workload it predicts); --fio-option may not.
RESERVED = ("rw", "readwrite", "rwmixread", "rwmixwrite", "bs", "blocksize", "bssplit",
            "bsrange", "blocksize_range", "norandommap", "randommap", "runtime", "time_based",
            "filename", "directory", "filename_format", "name")
#: Largest accepted relative deviation of a run's mean I/O size from the requested one.
IO_SIZE_TOLERANCE = 0.02
STATUS_OFF = "io_size_off"
DATA_NAME = "storlab-estimate.dat"
MARKER = "target-created"


@dataclass(frozen=True)
class PlannedRun:
    """One fio run of the plan. `size` is a size label, or a mix spec for kind 'mixed'."""

    kind: str  # "anchor" | "validate" | "mixed"
    size: str
    read_pct: float
    replicate: int
    config: dict[str, Any]


def _pcts(spec: str | Iterable[float] | None) -> list[float]:
    if spec is None:
        return []
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out = []
    for x in items:
        if isinstance(x, str) and not x.strip():
            continue
        p = check_read_pct(x.strip() if isinstance(x, str) else x)
        if p != int(p):
            raise EstimateError(f"read percentage {x!r}: fio's rwmixread takes whole percents")
        if p not in out:
            out.append(p)
    return out


def mix_spec(props: Mapping[int, float]) -> str:
    """{4096: 0.8, 65536: 0.2} -> '4k:0.8,64k:0.2'."""
    return ",".join(f"{size_label(s)}:{p:g}" for s, p in props.items())


def bssplit(props: Mapping[int, float]) -> str:
    """fio's bssplit for I/O-count proportions: '4k/80:64k/20'. fio wants whole percents."""
    parts = []
    for s, p in props.items():
        pct = 100.0 * p
        if abs(pct - round(pct)) > 1e-6:
            raise EstimateError(f"fio bssplit needs whole percentages; {size_label(s)}:{p:g} "
                                f"is {pct:g}%")
        parts.append(f"{size_label(s)}/{int(round(pct))}")
    return ":".join(parts)


def parse_bssplit(text: str) -> dict[int, float]:
    """'4k/80:64k/20' -> {4096: 0.8, 65536: 0.2} (the inverse of `bssplit`)."""
    out: dict[int, float] = {}
    for part in str(text).split(":"):
        s, _, q = part.partition("/")
        out[size_bytes(s)] = float(q) / 100.0
    return out


def fio_options(pairs: Iterable[str] | Mapping[str, Any] | None) -> dict[str, str]:
    """Extra fio options from KEY=VALUE strings (or a mapping); the plan's own are refused."""
    if pairs is None:
        return {}
    items = list(pairs.items()) if isinstance(pairs, Mapping) else []
    if not isinstance(pairs, Mapping):
        for text in pairs:
            key, eq, value = str(text).partition("=")
            if not eq or not key.strip():
                raise EstimateError(f"--fio-option {text!r} must be KEY=VALUE, e.g. "
                                    "numjobs=2")
            items.append((key.strip(), value.strip()))
    out: dict[str, str] = {}
    for key, value in items:
        k = str(key).strip().lstrip("-")
        if k in RESERVED:
            raise EstimateError(f"--fio-option {k}: measure sets it itself (the workload "
                                "it predicts); use --sizes/--validate/--mixed/--target")
        if "\n" in str(value):
            raise EstimateError(f"--fio-option {k}: the value has a newline")
        out[k] = str(value)
    return out


@dataclass
class MeasurePlan:
    """What to run. fio options common to every run go in `options`."""

    sizes: list[int]
    repeat: int = 3
    validate: list[float] = field(default_factory=list)
    mixed: dict[int, float] | None = None
    mixed_pcts: list[float] = field(default_factory=list)
    pattern: str = "random"
    runtime: float = 3.0
    file_size: str = "256m"
    options: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    third_anchor: bool = False

    @classmethod
    def build(cls, sizes: str | Iterable[Any], repeat: int = 3,
              validate: str | Iterable[float] | None = None,
              mixed: str | Mapping[Any, float] | None = None,
              mixed_pcts: str | Iterable[float] | None = None,
              runtime: float = 3.0, file_size: str = "256m", iodepth: int = 16,
              ioengine: str = "libaio", pattern: str = "random", seed: int | None = None,
              third_anchor: bool = False,
              fio: Iterable[str] | Mapping[str, Any] | None = None) -> MeasurePlan:
        """Check and normalise the user's choices; `fio` holds extra fio options."""
        items = sizes.split(",") if isinstance(sizes, str) else list(sizes)
        bs = []
        for s in items:
            if isinstance(s, str) and not s.strip():
                continue
            b = size_bytes(s.strip() if isinstance(s, str) else s)
            if b not in bs:
                bs.append(b)
        if not bs:
            raise EstimateError("--sizes is empty; give I/O sizes such as 4k,64k")
        if repeat < 1:
            raise EstimateError(f"--repeat {repeat} must be >= 1")
        if not (math.isfinite(runtime) and runtime >= 1):
            raise EstimateError(f"--runtime {runtime} must be at least 1 second")
        if pattern not in PATTERNS:
            raise EstimateError(f"--pattern {pattern!r} is not one of {', '.join(PATTERNS)}")
        if iodepth < 1:
            raise EstimateError(f"--iodepth {iodepth} must be >= 1")
        size_bytes(file_size)
        anchors = (0.0, 50.0, 100.0) if third_anchor else (0.0, 100.0)
        val = [p for p in _pcts(validate) if p not in anchors]
        mix = parse_size_mix(mixed) if mixed else None
        if mix is not None:
            missing = [size_label(s) for s in mix if s not in bs]
            if missing:
                raise EstimateError(f"mixed-size workload uses {', '.join(missing)}, which "
                                    f"--sizes does not measure")
            bssplit(mix)  # fail now, not after minutes of runs
        mpcts = _pcts(mixed_pcts) if mixed_pcts is not None else (val or [70.0])
        opts = {"ioengine": ioengine, "iodepth": int(iodepth), **fio_options(fio)}
        return cls(bs, int(repeat), val, mix, mpcts if mix else [], pattern, float(runtime),
                   str(file_size), opts, seed, bool(third_anchor))

    @property
    def anchors(self) -> tuple[float, ...]:
        return (100.0, 50.0, 0.0) if self.third_anchor else (100.0, 0.0)

    @property
    def method(self) -> str:
        """The fit that uses exactly the anchors."""
        return "anchors3" if self.third_anchor else "anchors"

    def _config(self, read_pct: float, split: str) -> dict[str, Any]:
        rd, wr, rw = PATTERNS[self.pattern]
        name = rd if read_pct == 100.0 else wr if read_pct == 0.0 else rw
        # rwmixread is written for every run (fio ignores it for pure reads or writes) so
        # the read percentage is a column of the stored design
        return {"rw": name, "rwmixread": int(read_pct), "bssplit": split}

    def runs(self) -> list[PlannedRun]:
        """Every run, in execution order: replicate rounds, each round shuffled."""
        rng = random.Random(self.seed)
        out: list[PlannedRun] = []
        for rep in range(1, self.repeat + 1):
            rnd: list[PlannedRun] = []
            for b in self.sizes:
                lab = size_label(b)
                split = f"{lab}/100"
                for p in self.anchors:
                    rnd.append(PlannedRun("anchor", lab, p, rep, self._config(p, split)))
                for p in self.validate:
                    rnd.append(PlannedRun("validate", lab, p, rep, self._config(p, split)))
            if self.mixed:
                split = bssplit(self.mixed)
                for p in self.mixed_pcts:
                    rnd.append(PlannedRun("mixed", mix_spec(self.mixed), p, rep,
                                          self._config(p, split)))
            rng.shuffle(rnd)
            out.extend(rnd)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"sizes": [size_label(b) for b in self.sizes], "repeat": self.repeat,
                "anchors": list(self.anchors), "validate": self.validate,
                "mixed": mix_spec(self.mixed) if self.mixed else None,
                "mixed_pcts": self.mixed_pcts, "pattern": self.pattern,
                "runtime": self.runtime, "file_size": self.file_size,
                "options": self.options, "seed": self.seed}


def probe_direct(directory: Path, dir_fd: int | None = None) -> tuple[bool, str]:
    """Whether files in `directory` accept O_DIRECT (some filesystems reject it). The probe
    file is made in the directory held as `dir_fd` (default: `directory` opened here) under
    a fresh name, exclusively and without following a link (O_EXCL | O_NOFOLLOW): storlab
    often runs as root, and a link planted at a fixed name would make it create the file
    the link names (/etc/nologin)."""
    flag = getattr(os, "O_DIRECT", None)
    if flag is None:
        return False, "this platform has no O_DIRECT"
    own = dir_fd is None
    try:
        if dir_fd is None:
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise EstimateError(f"{directory}: cannot open it ({exc.strerror})") from None
    name = f".storlab-odirect-probe.{os.getpid()}.{os.urandom(4).hex()}"
    try:
        fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_WRONLY | os.O_CLOEXEC
                     | flag, 0o600, dir_fd=dir_fd)
        os.close(fd)
        os.unlink(name, dir_fd=dir_fd)
        return True, ""
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            return False, f"{directory} rejects O_DIRECT ({exc.strerror})"
        raise EstimateError(f"{directory}: cannot create the scratch file ({exc.strerror})"
                            ) from None
    finally:
        if own:
            os.close(dir_fd)


# --------------------------------------------------------------------------- target

@dataclass(frozen=True)
class Target:
    """Where fio does its I/O: a scratch file (in the campaign directory by default, or a
    given file or directory) or a whole block device."""

    path: Path | None
    device: bool
    ours: bool  # a file storlab creates and removes

    @classmethod
    def resolve(cls, target: Path | None, campaign_dir: Path, allow_destructive: bool,
                ioengine: str = "libaio") -> Target:
        """Check a target the way fio will use it. A block device, or an existing file
        that this measurement did not create, needs `allow_destructive`. An engine that
        does its I/O elsewhere (rbd: pool and image given as --fio-option) has none."""
        from ..campaign.runners.fio_cmdline import REMOTE_ENGINES

        marker = campaign_dir / MARKER
        if ioengine in REMOTE_ENGINES:
            if target is not None:
                raise EstimateError(f"--target {target}: the {ioengine} engine does its I/O "
                                    "elsewhere; name it with --fio-option (e.g. pool=, "
                                    "rbdname=)")
            return cls(None, False, False)
        if target is None:
            return cls(campaign_dir / "data" / DATA_NAME, False, True)
        t = _resolve_target(target, campaign_dir)
        try:
            st = os.stat(t)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISBLK(st.st_mode):
            if not allow_destructive:
                raise EstimateError(f"--target {t} is a block device: fio would overwrite "
                                    "its data; add --allow-destructive to allow it")
            return cls(t, True, False)
        if st is not None and stat.S_ISDIR(st.st_mode):
            t = t / DATA_NAME
            st = os.stat(t) if t.exists() else None
        elif st is not None and not stat.S_ISREG(st.st_mode):
            raise EstimateError(f"--target {t} is neither a file, a directory nor a block "
                                "device")
        if st is None and not t.parent.is_dir():
            raise EstimateError(f"--target {t}: directory {t.parent} does not exist")
        if not within(t, campaign_dir):
            # storlab (often root) makes files there (the O_DIRECT probe, fio's file):
            # only in a directory no other user can change
            try:
                check_trusted_dir(t.parent, "--target")
            except StorlabError as exc:
                raise EstimateError(str(exc)) from None
        created = marker.exists() and marker.read_text().strip() == str(t)
        if st is not None and not created and not allow_destructive:
            raise EstimateError(f"--target {t} is an existing file: fio would overwrite it; "
                                "add --allow-destructive to allow it, or name a new file")
        return cls(t, False, st is None or created)


def _resolve_target(target: Path, campaign_dir: Path) -> Path:
    """`target` resolved as the kernel will (`walk_resolved`: links and `..` applied, so
    `CAMPAIGN/../elsewhere/file` is elsewhere, not inside); inside the campaign directory
    it is named from `campaign_dir` as given, so the lexical containment tests that follow
    hold."""
    def _any(at: str, st: os.stat_result, last: bool) -> None:
        pass

    try:
        t = walk_resolved(target, _any, f"--target {target}")
        home = walk_resolved(campaign_dir, _any, f"--campaign {campaign_dir}")
    except StorlabError as exc:
        raise EstimateError(str(exc)) from None
    return campaign_dir / t.relative_to(home) if within(t, home) else t


# --------------------------------------------------------------------------- campaign

def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def write_campaign(plan: MeasurePlan, campaign_dir: Path, target: Target,
                   allow_destructive: bool = False) -> tuple[Path, list[PlannedRun], list[str]]:
    """The campaign files for `plan`: design.csv (one configuration per planned run, in run
    order; `block` is the replicate round) and campaign.yaml. An existing campaign directory
    must hold the same measurement (then it resumes). Returns the campaign file, the runs
    in configuration order and notes. The directory is checked before anything is written
    (no other user's link on its path) and every file is written from its held descriptor:
    as root, a link swapped in would otherwise decide where these files go."""
    cfd = _open_campaign_dir(campaign_dir)
    try:
        return _write_campaign(plan, campaign_dir, target, allow_destructive, cfd)
    finally:
        os.close(cfd)


def _open_campaign_dir(campaign_dir: Path) -> int:
    """The campaign directory, checked (`check_no_foreign_link`) and held open (made, one
    component at a time without following a link, when missing)."""
    try:
        real = check_no_foreign_link(campaign_dir, "--campaign")
        # from / down, no component followed: a link swapped in after the check is refused
        return open_dir_beneath("/", real, what="--campaign")
    except StorlabError as exc:
        raise EstimateError(str(exc)) from None


def _read_in(cfd: int, name: str, campaign_dir: Path) -> str | None:
    """The text of `name` in the held directory, None when missing; never through a link."""
    try:
        return read_in_dir(cfd, name, f"{campaign_dir}/{name}").decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except StorlabError as exc:
        raise EstimateError(str(exc)) from None


def _write_campaign(plan: MeasurePlan, campaign_dir: Path, target: Target,
                    allow_destructive: bool, cfd: int
                    ) -> tuple[Path, list[PlannedRun], list[str]]:
    notes: list[str] = []
    runs = plan.runs()
    table = pd.DataFrame([r.config for r in runs])
    fixed: dict[str, Any] = {}
    factors: dict[str, Any] = {}
    for col in table.columns:
        values = list(dict.fromkeys(table[col].tolist()))
        if len(values) < 2:
            fixed[col] = values[0]  # a space factor needs two values; a constant is an option
        else:
            factors[col] = {"values": values}
    table = table[list(factors)]
    table["block"] = [r.replicate for r in runs]
    options: dict[str, Any] = dict(plan.options)
    if target.path is None:
        pass  # a remote engine (rbd): fio's engine options name the target
    elif "direct" not in options:
        if target.device:
            options["direct"] = 1
        else:
            dfd = _target_dir(target.path, campaign_dir, cfd)
            try:
                direct, why = probe_direct(target.path.parent, dfd)
            finally:
                os.close(dfd)
            options["direct"] = 1 if direct else 0
            if not direct:
                notes.append(f"{why}: running buffered (direct=0); the page cache will "
                             "flatter reads and absorb writes")
    rt = (int(plan.runtime) if float(plan.runtime).is_integer()
          else f"{round(plan.runtime * 1000)}ms")  # fio's runtime: whole seconds or a unit
    options.update({"runtime": rt, "time_based": 1, "norandommap": 1, **fixed})
    if target.path is not None:
        options["filename"] = str(target.path)
        if not target.device or "size" in plan.options:
            options.setdefault("size", plan.file_size)
    if allow_destructive or (target.path is not None
                             and not target.path.is_relative_to(campaign_dir)):
        # Target.resolve has applied the destructive-target rule already, knowing what the
        # runner cannot: that a file left by a killed measurement is this campaign's own
        # scratch file (and that /dev/shm/... is a file, not a device node)
        options["allow_destructive"] = True
    spec = {"name": "estimate-measure",
            "space": {"name": "estimate-measure", "factors": factors},
            "design": {"csv": "design.csv"},
            "runner": {"type": "fio", "options": options},
            "repetitions": 1, "randomize": False, "seed": int(plan.seed or 0),
            "timeout": float(plan.runtime * 4 + 120),  # the first run lays out the file
            "store": "campaign.db", "workdir": "scratch"}
    if target.path is not None and not target.device and not allow_destructive \
            and target.path.parent != campaign_dir \
            and target.path.is_relative_to(campaign_dir):
        # the sandbox opens the directory of a file fio makes only when declared
        os.close(_target_dir(target.path, campaign_dir, cfd))
        spec["sandbox"] = {"writable": [str(target.path.parent.relative_to(campaign_dir))]}
    csv_text = table.to_csv(index=False)
    yaml_text = ("# storlab estimate measure: one configuration per planned run, in run "
                 "order\n# plan: " + yaml.safe_dump(plan.to_dict(), default_flow_style=True,
                                                    width=10**6).strip() + "\n"
                 + yaml.safe_dump(spec, sort_keys=False))
    path = campaign_dir / "campaign.yaml"
    for name, text in (("campaign.yaml", yaml_text), ("design.csv", csv_text)):
        old = _read_in(cfd, name, campaign_dir)
        if old is not None and old != text:
            raise EstimateError(f"{campaign_dir}: holds another measurement ({name} differs "
                                "from this command's); give another --campaign or remove it")
    for name, text in (("design.csv", csv_text), ("campaign.yaml", yaml_text)):
        try:  # temp + rename, in the directory held
            write_in_dir(campaign_dir, name, text, home=campaign_dir, home_fd=cfd)
        except StorlabError as exc:
            raise EstimateError(str(exc)) from None
    notes.append(f"campaign {campaign_dir} (store campaign.db; the same command resumes it)")
    return path, runs, notes


def _target_dir(path: Path, campaign_dir: Path, cfd: int) -> int:
    """The directory of the target file `path`, held open: inside the campaign directory
    made and opened from its descriptor without following links; elsewhere the directory
    `Target.resolve` checked (`check_trusted_dir`: no other user can change it)."""
    try:
        if path.is_relative_to(campaign_dir):
            return open_dir_beneath(campaign_dir, path.parent, what="--target", home_fd=cfd)
        return os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except StorlabError as exc:
        raise EstimateError(str(exc)) from None
    except OSError as exc:
        raise EstimateError(f"--target {path}: cannot open {path.parent} ({exc.strerror})"
                            ) from None


@dataclass
class MeasureResult(Result):
    """Every run, the model fitted from the anchors, and predicted against measured."""

    PLOT_KINDS = ("model",)
    ERROR = EstimateError

    plan: MeasurePlan
    runs: pd.DataFrame
    model: RWModel
    checks: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    campaign: Path | None = None

    @property
    def warnings(self) -> list[str]:
        out = list(self.model.warnings)
        failed = self.runs[~self.runs["status"].isin(["ok", STATUS_OFF])]
        if len(failed):
            out.append(f"{len(failed)} of {len(self.runs)} runs failed and were left out "
                       f"(first error: {failed['error'].iloc[0]})")
        off = self.runs[self.runs["status"] == STATUS_OFF]
        if len(off):
            out.append(f"{len(off)} of {len(self.runs)} runs were refused: their mean I/O "
                       f"size was not the requested one (first: {off['error'].iloc[0]})")
        # a size at its anchors alone takes the others' error (`modelerror`)
        if self.model.fits and not all(math.isfinite(sd) for sd, _ in
                                       self.model.size_errors().values()):
            out.append("intervals are noise-only for sizes measured at the anchors alone: "
                       "add --validate mixes or --third-anchor to measure the model's error")
        return out

    def to_frame(self) -> pd.DataFrame:
        """Predicted against measured total IOPS for every measured point."""
        return self.checks.copy()

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({
            "plan": self.plan.to_dict(), "notes": self.notes, "warnings": self.warnings,
            "campaign": str(self.campaign) if self.campaign else None,
            "model": self.model.to_dict(), "fits": self.model.to_frame(),
            "checks": self.checks, "runs": self.runs})

    def plot(self, kind: str | None = None):  # noqa: ANN201 - matplotlib Figure
        """`model` (the only kind): the model's plot plus the measured mixed-size points and
        both mix rules' lines."""
        self.plot_kind(kind)
        from ..plotstyle import styled
        from .plots import iops_legend

        fig = self.model.plot()
        ax = fig.axes[0]
        mixed = self.checks[self.checks["kind"] == "mixed"]
        if self.plan.mixed and len(mixed):
            with styled():
                xs = np.linspace(0, 100, 51)
                for rule, style in (("harmonic", ":"), ("slides", "--")):
                    ys = [self.model.predict(x, self.plan.mixed, mix=rule).value() for x in xs]
                    ax.plot(xs, ys, style, color="#555555",
                            label=f"{mix_spec(self.plan.mixed)}: model, {rule} mix rule")
                first = mixed.drop_duplicates("read_pct")
                ax.plot(first["read_pct"], first["measured_iops"], "s", color="black",
                        label=f"{mix_spec(self.plan.mixed)}: measured")
                iops_legend(ax)
        return fig


def expected_io_bytes(run: PlannedRun) -> float:
    """The mean I/O size the run asks for: sum_i P_i S_i of its bssplit."""
    return sum(b * q for b, q in parse_bssplit(run.config["bssplit"]).items())


def io_size_tolerance(expected: float, split: Mapping[int, float], ios: float) -> float:
    """2 %, or four standard errors of the mean size of `ios` I/Os drawn from the split when
    that is larger (a slow target may run too few I/Os for 2 %)."""
    sd = math.sqrt(sum(q * (b - expected) ** 2 for b, q in split.items()))
    se = sd / math.sqrt(ios) / expected if ios > 0 else math.inf
    return max(IO_SIZE_TOLERANCE, 4 * se)


def _row(run: PlannedRun, order: int, rec: Mapping[str, Any] | None, runtime: float
         ) -> dict[str, Any]:
    row: dict[str, Any] = {"order": order, "kind": run.kind, "size": run.size,
                           "read_pct": run.read_pct, "replicate": run.replicate}
    metrics = rec["metrics"] if rec else {}
    status = rec["status"] if rec else "pending"
    row["status"] = status
    for m in METRICS:
        row[m] = float(metrics[m]) if m in metrics and metrics[m] is not None else math.nan
    exp = expected_io_bytes(run)
    row["expected_io_bytes"] = exp
    row["mean_io_bytes"] = (row["total_bw_bytes"] / row["total_iops"]
                            if row["total_iops"] > 0 else math.nan)
    row["error"] = ""
    if status == "ok":
        if not all(math.isfinite(row[m]) for m in ("read_iops", "write_iops")):
            row["status"] = "failed"
            row["error"] = "runner reported no read_iops/write_iops"
        else:
            split = parse_bssplit(run.config["bssplit"])
            tol = io_size_tolerance(exp, split, row["total_iops"] * runtime)
            dev = row["mean_io_bytes"] / exp - 1.0
            if not abs(dev) <= tol:
                row["status"] = STATUS_OFF
                row["error"] = (f"{run.kind} {run.size} {run.read_pct:g}% read rep "
                                f"{run.replicate}: mean I/O {row['mean_io_bytes'] / 1024:.2f} "
                                f"KiB, requested {exp / 1024:.2f} KiB ({dev:+.1%}, limit "
                                f"±{tol:.0%})")
    elif rec is not None:
        from ..campaign.runners.base import failure_lines

        tail = failure_lines(rec.get("stderr_tail"), 2)
        row["error"] = " / ".join(tail) if tail else f"exit {rec.get('exit_code')}"
    row["config"] = " ".join(f"{k}={v}" for k, v in run.config.items())
    row["key"] = rec["key"] if rec else ""
    return row


def _cells(ok: pd.DataFrame) -> dict[int, list[Cell]]:
    cells: dict[int, list[Cell]] = {}
    single = ok[ok["kind"] != "mixed"]
    for (size, pct), g in single.groupby(["size", "read_pct"], sort=True):
        cells.setdefault(size_bytes(size), []).append(
            Cell.from_samples(float(pct), g["read_iops"].to_numpy(), g["write_iops"].to_numpy()))
    return cells


def _mean_ci(values: np.ndarray, confidence: float) -> tuple[float, float, float]:
    m = float(values.mean())
    if values.size < 2:
        return m, math.nan, math.nan
    half = stats.t.ppf(0.5 + confidence / 2, values.size - 1) * values.std(ddof=1) \
        / math.sqrt(values.size)
    return m, m - half, m + half


def _checks(model: RWModel, ok: pd.DataFrame, plan: MeasurePlan, confidence: float
            ) -> pd.DataFrame:
    rows = []
    for (kind, size, pct), g in ok.groupby(["kind", "size", "read_pct"], sort=False):
        meas, mlo, mhi = _mean_ci(g["total_iops"].to_numpy(dtype=float), confidence)
        rules = [DEFAULT_MIX, *(m for m in MIXES if m != DEFAULT_MIX)] \
            if kind == "mixed" else ["-"]
        for rule in rules:
            if kind == "mixed":
                pr = model.predict(pct, plan.mixed, mix=rule, confidence=confidence)
            else:
                pr = model.predict_size(size, pct, confidence)
            pred = pr.value()
            rows.append({
                "kind": kind, "size": size, "read_pct": pct, "rule": rule, "n": len(g),
                "mean_io_kib": float(g["mean_io_bytes"].mean()) / 1024,
                "measured_iops": meas, "measured_lo": mlo, "measured_hi": mhi,
                "predicted_iops": pred, "pred_lo": pr.value("total_iops_lo"),
                "pred_hi": pr.value("total_iops_hi"), "interval": pr.interval,
                "error_pct": 100.0 * (pred - meas) / meas if meas > 0 else math.nan,
            })
    order = {"anchor": 0, "validate": 1, "mixed": 2}
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["_k"] = df["kind"].map(order)
    df["_s"] = [size_bytes(s) if k != "mixed" else 0 for k, s in zip(df["kind"], df["size"])]
    df["_r"] = [MIXES.index(r) if r in MIXES else -1 for r in df["rule"]]
    return (df.sort_values(["_k", "_s", "read_pct", "_r"])
              .drop(columns=["_k", "_s", "_r"]).reset_index(drop=True))


def _run_order_seed(campaign_dir: Path) -> int:
    """The run-order seed when none is given: the one the campaign directory's measurement
    was written with, so that the same command resumes it (or waits for it with --wait);
    a new one for a new campaign. (An unrecorded random order made every resume of a
    measurement of more than two runs "another measurement".)"""
    f = campaign_dir / "campaign.yaml"
    if f.is_file():
        try:  # an unreadable file is a new measurement's: its errors are not the user's
            seed = read_yaml(f).get("seed")
        except (StorlabError, AttributeError):
            seed = None
        if isinstance(seed, int) and not isinstance(seed, bool):
            return seed
    return random.SystemRandom().randrange(2**31)


def run_plan(plan: MeasurePlan, campaign_dir: Path | str, target: Path | str | None = None,
             allow_destructive: bool = False, confidence: float = 0.95,
             progress: Callable[[str], None] | None = None, executor: str | None = None,
             wait: bool = False,
             on_event: Callable[[str, dict[str, Any]], None] | None = None
             ) -> MeasureResult:
    """Run the plan as a campaign in `campaign_dir` (resuming what is already stored), fit
    the model from the anchors, and compare it with every other run. `wait`: wait for
    another storlab running the same campaign instead of refusing; `on_event` receives
    every campaign event (the lock's: waiting, takeover, ...)."""
    from ..campaign.campaign import Campaign  # the one run loop (DESIGN.md)

    campaign_dir = Path(campaign_dir).absolute()
    if campaign_dir.exists() and not campaign_dir.is_dir():
        raise EstimateError(f"--campaign {campaign_dir}: not a directory")
    try:  # before anything is read or written there
        check_no_foreign_link(campaign_dir, "--campaign")
        if os.geteuid() == 0:  # as root: no other user can swap it for a link later
            check_trusted_dir(campaign_dir, "--campaign")
    except StorlabError as exc:
        raise EstimateError(str(exc)) from None
    tgt = Target.resolve(Path(target) if target is not None else None, campaign_dir,
                         allow_destructive, str(plan.options.get("ioengine", "")))
    if plan.seed is None:
        plan = replace(plan, seed=_run_order_seed(campaign_dir))
    path, planned, notes = write_campaign(plan, campaign_dir, tgt, allow_destructive)
    marker = campaign_dir / MARKER
    if tgt.ours and tgt.path is not None:
        # our own scratch file, left by a killed run: fio lays it out again
        tgt.path.unlink(missing_ok=True)
        write_fresh(marker, f"{tgt.path}\n")  # never through a link planted there
    load0 = os.getloadavg()[0]
    try:
        camp = Campaign.load(path)
        by_key = {f"c{i}-r1": (i, r) for i, r in enumerate(planned, 1)}

        def events(kind: str, data: dict[str, Any]) -> None:
            if on_event is not None:
                on_event(kind, data)
            if progress is None:
                return
            if kind == "start" and data["done"]:
                progress(f"resuming: {data['done']} of {data['planned']} runs already stored")
            if kind == "run" and data["key"] in by_key:
                i, run = by_key[data["key"]]
                res = data["result"]
                m = res.metrics
                tot = m.get("total_iops", math.nan)
                mean_io = m.get("total_bw_bytes", 0.0) / max(tot, 1e-9) / 1024
                status = (f"{tot:,.0f} IOPS, mean I/O {mean_io:.1f} KiB" if res.ok
                          else f"{res.status}: {(res.stderr or '').strip()[-200:]}")
                progress(f"[{i}/{len(planned)}] {run.kind} {run.size} {run.read_pct:g}% "
                         f"read (rep {run.replicate}): {status}")

        summary = camp.run(executor=executor, retry_failed=True, on_event=events, wait=wait)
    except EstimateError:
        raise
    except Exception as exc:  # CampaignError and friends: one line for the user
        if isinstance(exc, StorlabError):
            raise EstimateError(str(exc)) from None
        raise
    finally:
        if tgt.ours and tgt.path is not None:
            tgt.path.unlink(missing_ok=True)
            marker.unlink(missing_ok=True)
    notes.append(f"machine load (1 min) {load0:.2f} at the start, "
                 f"{os.getloadavg()[0]:.2f} at the end")
    if summary.interrupted:
        raise EstimateError(f"interrupted; {campaign_dir} keeps the finished runs: the same "
                            "command resumes")
    from ..campaign.store import Store

    with Store(camp.store_path, readonly=True) as store:
        recs = {r["key"]: r for r in store.runs() if not r["warmup"]}
    rows = [_row(run, i, recs.get(f"c{i}-r1"), plan.runtime)
            for i, run in enumerate(planned, 1)]
    runs = pd.DataFrame(rows)
    ok = runs[runs["status"] == "ok"]
    if ok.empty:
        bad = runs[runs["error"] != ""]
        first = bad["error"].iloc[0] if len(bad) else "no runs"
        raise MeasureRunsFailed(f"every run failed or was refused (first: {first})")
    cells = _cells(ok)
    try:
        model = RWModel.from_cells(cells, method=plan.method,
                                   meta={"measured": plan.to_dict(), "notes": notes})
    except EstimateError as exc:
        raise EstimateError(f"{campaign_dir}: {exc}") from None
    fio_opts = camp.runner_options()
    notes.append("fio " + " ".join(f"{k}={v}" for k, v in fio_opts.items()
                                    if k not in ("filename", "allow_destructive"))
                 + (f", target {tgt.path}" if tgt.path else ""))
    return MeasureResult(plan, runs, model, _checks(model, ok, plan, confidence), notes,
                         campaign_dir)

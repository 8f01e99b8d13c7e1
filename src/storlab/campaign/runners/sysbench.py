"""sysbench fileio runner (Debian `sysbench` 1.0.20): prepare, run, cleanup in the run's
scratch directory, text report parsed (fileio has no JSON output in 1.0.20).

Options are sysbench's own, `_` or `-` alike: file_total_size, file_num, file_test_mode,
file_block_size, file_io_mode, file_extra_flags, file_fsync_freq, file_rw_ratio, threads,
time, percentile... Defaults: 64M in 4 files, rndrw, 5 s. Mind sysbench's surprising
defaults (fsync every 100 requests, read/write ratio 1.5) when comparing runs.
"""

from __future__ import annotations

import difflib
import functools
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..spec import CampaignError
from ._program import ask_program, make_run_dir, render_value, run_program, tail
from .base import RunResult

DEFAULTS = {"file-total-size": "64M", "file-num": "4", "file-test-mode": "rndrw", "time": "5"}

_PATTERNS = {
    "reads_per_s": r"reads/s:\s+([\d.]+)",
    "writes_per_s": r"writes/s:\s+([\d.]+)",
    "fsyncs_per_s": r"fsyncs/s:\s+([\d.]+)",
    "read_mib_per_s": r"read, MiB/s:\s+([\d.]+)",
    "written_mib_per_s": r"written, MiB/s:\s+([\d.]+)",
    "total_time_s": r"total time:\s+([\d.]+)s",
    "total_events": r"total number of events:\s+(\d+)",
    "latency_min_ms": r"^\s*min:\s+([\d.]+)",
    "latency_avg_ms": r"^\s*avg:\s+([\d.]+)",
    "latency_max_ms": r"^\s*max:\s+([\d.]+)",
}
_PCT = re.compile(r"(\d+)th percentile:\s+([\d.]+)")


class SysbenchRunner:
    name = "sysbench"

    def __init__(self, sysbench: str = "sysbench", cleanup: bool = True, **options: Any
                 ) -> None:
        self.sysbench = sysbench
        self.cleanup = cleanup
        self.options = dict(options)
        self.check_names(self.options, "runner option")

    def program(self) -> str:
        """The program started (its install tree is shown read-only)."""
        return self.sysbench

    def starts_programs_reason(self) -> str | None:
        """None: its program executes nothing but its own files (the sandbox's execute
        rules); else why it may start other programs."""
        return None

    def check_names(self, options: Mapping[str, Any], what: str) -> None:
        """Refuse names that the installed sysbench does not list in `sysbench --help` and
        `sysbench fileio help` (skipped when sysbench is not installed here)."""
        known = known_options(self.sysbench)
        if not known:
            return
        bad = sorted(k for k in options if str(k).replace("_", "-") not in known)
        if bad:
            near = difflib.get_close_matches(bad[0].replace("_", "-"), sorted(known), n=1)
            raise CampaignError(f"sysbench runner: unknown {what}(s) {bad}"
                                + (f" (did you mean {near[0]!r}?)" if near else "")
                                + f"; see `{self.sysbench} fileio help`")

    def check_target(self, config: Mapping[str, Any], base: Path | None = None,
                     workdir: Path | None = None) -> None:
        """Preflight: every factor passed to sysbench must be one of its options (sysbench
        writes its files in the run's own directory: no target to check)."""
        self.check_names(config, "factor")

    def args(self, config: Mapping[str, Any]) -> list[str]:
        opts = dict(DEFAULTS)
        for k, v in {**self.options, **config}.items():
            opts[k.replace("_", "-")] = render_value(v)
        return [f"--{k}={v}" for k, v in opts.items()]

    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult:
        workdir = Path(workdir)
        make_run_dir(workdir)
        base = [self.sysbench, "fileio", *self.args(config)]
        prep = run_program([*base, "prepare"], cwd=workdir, timeout=timeout,
                           executables=base[:1])
        if prep.exit_code != 0 or prep.timed_out:
            return RunResult("timeout" if prep.timed_out else "failed", raw=prep.stdout,
                             stderr=tail(f"prepare: {prep.stderr}{_fatal(prep.stdout)}"),
                             exit_code=prep.exit_code, started=prep.started, ended=prep.ended)
        proc = run_program([*base, "run"], cwd=workdir, timeout=timeout,
                           executables=base[:1])
        if self.cleanup:
            run_program([*base, "cleanup"], cwd=workdir, timeout=timeout,
                        executables=base[:1])
        res = RunResult("failed", raw=proc.stdout, stderr=tail(proc.stderr + _fatal(proc.stdout)),
                        exit_code=proc.exit_code, started=proc.started, ended=proc.ended)
        if proc.timed_out:
            res.status = "timeout"
        elif proc.exit_code == 0:
            try:
                res.metrics = parse_report(proc.stdout)
                res.status = "ok"
            except ValueError as exc:
                res.stderr = tail(f"{res.stderr}\nstorlab: {exc}")
        return res


@functools.cache
def known_options(sysbench: str) -> frozenset[str]:
    """Option names the installed sysbench lists for fileio (general and fileio's own);
    empty when it cannot be asked."""
    exe = shutil.which(sysbench)
    if exe is None:
        return frozenset()
    names: set[str] = set()
    for argv in ([exe, "--help"], [exe, "fileio", "help"]):
        p = ask_program(argv)  # in the sandbox: the campaign names the program
        if p.timed_out or p.exit_code is None:
            return frozenset()
        names |= set(re.findall(r"^\s+--([a-z0-9][a-z0-9-]*)", p.stdout, re.MULTILINE))
    return frozenset(names) if "file-total-size" in names else frozenset()


def _fatal(stdout: str) -> str:
    # sysbench prints FATAL errors on stdout; keep them with stderr where users look.
    return "".join(f"\n{line}" for line in stdout.splitlines() if "FATAL" in line)


def parse_report(text: str) -> dict[str, float]:
    """Metrics of a sysbench fileio report (the final summary, not interval lines)."""
    m: dict[str, float] = {}
    for name, pat in _PATTERNS.items():
        hit = re.search(pat, text, re.MULTILINE)
        if hit:
            m[name] = float(hit.group(1))
    for p, v in _PCT.findall(text):
        m[f"latency_p{p}_ms"] = float(v)
    if "reads_per_s" not in m or "total_events" not in m:
        raise ValueError("no sysbench fileio report in the output")
    return m

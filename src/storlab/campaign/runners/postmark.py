"""postmark runner (Debian `postmark` 1.51): small-file, mail-server-like workload.

The configuration's (and fixed) options become postmark `set` commands in a config file;
the terse report (one line of 13 numbers) is parsed. postmark reports whole seconds, so
runs should last at least 10-20 s for rates worth comparing (see notes/real-systems.md).
Options: number, transactions, min_size, max_size, read, write, buffering, subdirectories,
bias_read, bias_create, seed; `location` defaults to the run's scratch directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...units import parse_size
from ..spec import CampaignError
from ._program import make_run_dir, render_value, run_program, tail, write_run_file
from .base import RunResult

#: Columns of `set report terse`, in postmark's order.
TERSE = ("total_s", "transactions_s", "transactions_per_s", "created_per_s",
         "created_alone_per_s", "created_mixed_per_s", "read_per_s", "appended_per_s",
         "deleted_per_s", "deleted_alone_per_s", "deleted_mixed_per_s", "read_bytes_per_s",
         "written_bytes_per_s")
NUMERIC = ("number", "transactions", "min_size", "max_size", "read", "write",
           "subdirectories", "bias_read", "bias_create", "seed")
KNOWN = (*NUMERIC, "buffering", "location")


class PostmarkRunner:
    name = "postmark"

    def __init__(self, postmark: str = "postmark", **options: Any) -> None:
        self.postmark = postmark
        self.options = dict(options)
        bad = sorted(set(options) - set(KNOWN))
        if bad:
            raise CampaignError(f"postmark runner: unknown option(s) {bad} (known: "
                                f"{', '.join(KNOWN)})")

    def program(self) -> str:
        """The program started (its install tree is shown read-only)."""
        return self.postmark

    def starts_programs_reason(self) -> str | None:
        """None: its program executes nothing but its own files (the sandbox's execute
        rules); else why it may start other programs."""
        return None

    def check_target(self, config: Mapping[str, Any], base: Path | None = None,
                     workdir: Path | None = None) -> None:
        """Preflight: every factor passed to postmark must be one of its options."""
        unknown = sorted(set(config) - set(KNOWN))
        if unknown:
            raise CampaignError(f"postmark runner: unknown factor(s) {unknown} (known: "
                                f"{', '.join(KNOWN)}; exclude the others with runner.exclude)")

    def script(self, config: Mapping[str, Any], workdir: Path) -> str:
        """The postmark command file for one run."""
        opts = {**self.options, **config}
        unknown = sorted(set(opts) - set(KNOWN))
        if unknown:
            raise CampaignError(f"postmark: unknown option(s) {unknown}")
        num = {k: parse_size(v, f"postmark option {k}", allow_zero=True)
               for k, v in opts.items() if k in NUMERIC}
        lines = [f"set location {opts.get('location', workdir)}"]
        if "min_size" in num or "max_size" in num:
            lines.append(f"set size {num.get('min_size', 500)} {num.get('max_size', 10000)}")
        for k in ("number", "transactions", "read", "write", "subdirectories", "seed"):
            if k in num:
                lines.append(f"set {k} {num[k]}")
        for k in ("read", "create"):
            if f"bias_{k}" in num:
                lines.append(f"set bias {k} {num[f'bias_{k}']}")
        if "buffering" in opts:
            on = render_value(opts["buffering"]).lower() in ("1", "true", "yes", "on")
            lines.append(f"set buffering {'true' if on else 'false'}")
        lines += ["set report terse", "run", "quit"]
        for line in lines:
            if "\n" in line:
                raise CampaignError("postmark: option values cannot hold newlines")
        return "\n".join(lines) + "\n"

    def sandbox(self, config: Mapping[str, Any], workdir: Path) -> tuple[list[str], bool]:
        """What a run declares for its sandbox: postmark's `location` (its directory of
        files), when not the run's own directory."""
        loc = {**self.options, **config}.get("location")
        return ([str(Path(workdir).absolute() / render_value(loc))] if loc is not None
                else []), False

    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult:
        workdir = Path(workdir)
        make_run_dir(workdir)
        cfg = workdir / "postmark.cfg"
        write_run_file(cfg, self.script(config, workdir))  # a step may have left a link there
        proc = run_program([self.postmark, str(cfg)], cwd=workdir, timeout=timeout,
                           targets=self.sandbox(config, workdir)[0],
                           executables=[self.postmark])
        res = RunResult("failed", raw=proc.stdout, stderr=tail(proc.stderr),
                        exit_code=proc.exit_code, started=proc.started, ended=proc.ended)
        if proc.timed_out:
            res.status = "timeout"
            return res
        if proc.exit_code != 0:
            return res
        try:
            res.metrics = parse_terse(proc.stdout)
        except ValueError as exc:
            res.stderr = tail(f"{proc.stderr}\nstorlab: {exc}")
            return res
        res.status = "ok"
        return res


def parse_terse(text: str) -> dict[str, float]:
    """The metrics of postmark's terse report; ValueError if it rejected a command."""
    if "Eh?" in text:  # postmark's only word for a command it did not understand
        raise ValueError("postmark rejected a configuration command ('Eh?')")
    for line in reversed(text.splitlines()):
        parts = line.split()
        if len(parts) == len(TERSE):
            try:
                return dict(zip(TERSE, map(float, parts)))
            except ValueError:
                continue
    raise ValueError("no postmark terse report in the output")

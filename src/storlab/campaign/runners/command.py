"""Command runner: any program. `{factor}` fields in its argv template are replaced by the
configuration's values, each as one whole argv element (no shell unless `shell: true`).
Metrics come from its JSON output by key path (`jobs.0.read.iops`) or from its text by
regular expressions with one named group per metric.

    runner:
      type: command
      options:
        command: [my-bench, --threads, "{threads}", --mode, "{mode}"]
        json_metrics: {iops: result.iops, p99: result.latency.p99}
        regex_metrics: ['Throughput (?P<throughput>[\\d.]+) MB/sec']
        args: true      # also append --<factor>=<value> for every factor
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import regex

from ..spec import CampaignError
from ._program import (RESERVED_ENV, ShellTemplateError, SubstitutionError, make_run_dir,
                       render_argv, render_value, reserved_env_clash, run_program,
                       shell_command, substitute, tail, template_names)
from .base import RunResult, find_json, option_bool


#: The command runner's own options (any other option is a constant for the templates).
OPTIONS = ("command", "shell", "json_metrics", "regex_metrics", "args", "env", "stream",
           "ok_codes")
#: Most CPU seconds of its own thread each pattern of `regex_metrics` may take on one
#: run's output (Python's `re` has no limit: a backtracking pattern such as `(a|a)+b` on a
#: line of a's took storlab hours after the run, on every resume): the campaign's
#: `timeout:`, at least MIN_MATCH_S (the longest a plain pattern took over the largest
#: output kept, 16 MiB of 4M matches, was 3.3-3.8 s: benchmarks/bench_regex_metrics.py)
#: and at most MAX_MATCH_S. Not reduced by the run's own time: a run that used all of
#: `timeout:` still gets its numbers.
MAX_MATCH_S = 60.0
MIN_MATCH_S = 10.0


class CommandRunner:
    """Runs an argv template per configuration and extracts numbers from its output."""

    name = "command"

    def __init__(self, command: Sequence[str] | str, shell: bool = False,
                 json_metrics: Mapping[str, str] | None = None,
                 regex_metrics: Sequence[str] | Mapping[str, str] | None = None,
                 args: bool = False, env: Mapping[str, str] | None = None,
                 stream: str = "stdout", ok_codes: Sequence[int] = (0,),
                 **fixed: Any) -> None:
        shell = option_bool("shell", shell)
        args = option_bool("args", args)
        if isinstance(command, str) and not shell:
            import shlex

            command = shlex.split(command)
        if not command:
            raise CampaignError("command runner: 'command' is empty")
        self.command = command if isinstance(command, str) else [str(c) for c in command]
        if isinstance(self.command, str):  # refuse what cannot be rendered, before any run
            try:
                shell_command(self.command, dict.fromkeys(
                    {*template_names(self.command), "workdir"}, ""))
            except ShellTemplateError as exc:
                raise CampaignError(f"command runner: {exc}") from None
        self.shell = shell
        self.json_metrics = dict(json_metrics or {})
        pats = regex_metrics or []
        if isinstance(pats, Mapping):  # {metric: pattern with one group}
            pats = [p if "(?P<" in p else p.replace("(", f"(?P<{m}>", 1)
                    for m, p in pats.items()]
        try:  # `regex` (re's syntax, and a time limit on matching: `extract`)
            self.regexes = [regex.compile(p, regex.MULTILINE | regex.VERSION0) for p in pats]
        except (regex.error, TypeError) as exc:
            raise CampaignError(f"command runner: bad regular expression ({exc})") from None
        if stream not in ("stdout", "stderr", "both"):
            raise CampaignError(f"command runner: stream {stream!r} must be stdout, stderr "
                                "or both")
        self.args = args
        self.env = dict(env or {})
        self.stream = stream
        self.ok_codes = set(ok_codes)
        self.fixed = fixed  # extra names for the template (constants)
        used = set().union(*(template_names(t) for t in
                             ([self.command] if isinstance(self.command, str) else self.command)),
                           *(template_names(str(v)) for v in self.env.values()))
        unknown = sorted(k for k in fixed if k not in used)
        if unknown:  # a typo such as `regex_metric:` must not run "ok" with no metrics
            near = difflib.get_close_matches(unknown[0], OPTIONS, n=1)
            raise CampaignError(
                f"command runner: unknown option(s) {unknown}"
                + (f" (did you mean {near[0]!r}?)" if near else "")
                + f"; options are {', '.join(OPTIONS)}, and constants named by a "
                "{field} of the command or env")
        if json_metrics is None and regex_metrics is None:
            # every run was "ok" with no value, and `tune` said so only at the end
            raise CampaignError(
                "command runner: no metric: add json_metrics ({name: key.path}) or "
                "regex_metrics (['n: (?P<n>\\d+)']); regex_metrics: [] runs it for its exit "
                "status only")
        mine = sorted(k for k in self.env if k in RESERVED_ENV)
        clash = reserved_env_clash(set(fixed))
        if mine or clash:
            var = mine[0] if mine else clash[1]  # type: ignore[index]
            raise CampaignError(f"command runner: {var} is storlab's own environment "
                                "variable; rename " + (f"env {var}" if mine else
                                                       f"the option {clash[0]!r}"))

    def program(self) -> str:
        """The program started (its install tree is shown read-only): the shell for a
        shell command."""
        return "/bin/sh" if isinstance(self.command, str) else self.command[0]

    def check_fields(self, names: set[str]) -> None:
        """Refuse a `{field}` of the command or env that is neither one of `names` (the
        factors this runner gets), a fixed option nor `workdir`: before any run, not as a
        failure of every run."""
        temps = [self.command] if isinstance(self.command, str) else list(self.command)
        used = set().union(*(template_names(t) for t in temps),
                           *(template_names(str(v)) for v in self.env.values()))
        missing = sorted(used - set(names) - set(self.fixed) - {"workdir"})
        if missing:
            near = difflib.get_close_matches(missing[0], sorted(names), n=1)
            raise CampaignError(f"command runner: {{{missing[0]}}} is neither a factor nor a "
                                "fixed option" + (f" (did you mean {{{near[0]}}}?)"
                                                  if near else ""))

    def argv(self, config: Mapping[str, Any], workdir: Path) -> list[str] | str:
        """The program's argv, or with `shell: true` the shell command (its values are in
        `shell_env`, never in the text)."""
        return self._render(config, workdir)[0]

    def _render(self, config: Mapping[str, Any], workdir: Path
                ) -> tuple[list[str] | str, dict[str, str]]:
        values = {**self.fixed, **config, "workdir": str(workdir)}
        try:
            if isinstance(self.command, str):
                return shell_command(self.command, values)
            out, env = render_argv(self.command, values)
        except SubstitutionError as exc:
            raise CampaignError(f"command runner: {{{exc.args[0]}}} is neither a factor nor a "
                                "fixed option") from None
        except ShellTemplateError as exc:
            raise CampaignError(f"command runner: {exc}") from None
        if self.args:
            out += [f"--{k}={render_value(v)}" for k, v in config.items()]
        return out, env

    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult:
        workdir = Path(workdir)
        make_run_dir(workdir)
        env = {k: substitute(v, {**self.fixed, **config}) for k, v in self.env.items()}
        argv, shell_env = self._render(config, workdir)
        proc = run_program(argv, cwd=workdir, timeout=timeout, shell=self.shell,
                           env={**shell_env, **env})
        res = RunResult("failed", raw=proc.stdout, stderr=tail(proc.stderr),
                        exit_code=proc.exit_code, started=proc.started, ended=proc.ended)
        if proc.timed_out:
            res.status = "timeout"
            return res
        if proc.exit_code not in self.ok_codes:
            return res
        text = {"stdout": proc.stdout, "stderr": proc.stderr,
                "both": proc.stdout + "\n" + proc.stderr}[self.stream]
        try:
            res.metrics = self.extract(text, match_limit(timeout))
        except ValueError as exc:
            res.stderr = tail(f"{proc.stderr}\nstorlab: {exc}")
            return res
        res.status = "ok"
        return res

    def metric_names(self) -> set[str]:
        """Every metric this runner can report (what json_metrics and the patterns name)."""
        return set(self.json_metrics) | {n for rx in self.regexes for n in rx.groupindex}

    def extract(self, text: str, limit: float = MAX_MATCH_S) -> dict[str, float]:
        """Metrics from the output; ValueError naming what is missing, or a pattern
        that took more than `limit` CPU seconds of this thread on it (`_last_match`)."""
        m: dict[str, float] = {}
        if self.json_metrics:
            doc = find_json(text)
            for name, path in self.json_metrics.items():
                m[name] = _number(_walk(doc, path), name)
        for rx in self.regexes:
            hit = _last_match(rx, text, limit)
            if hit is None:
                raise ValueError(f"pattern {rx.pattern!r} not found in the output")
            for name, v in hit.groupdict().items():
                if v is not None:
                    m[name] = _number(v, name)
        return m


def match_limit(timeout: float | None) -> float:
    """The CPU seconds each pattern may take on a run's output: the campaign's
    `timeout:` held to MIN_MATCH_S..MAX_MATCH_S (MAX_MATCH_S without one)."""
    return MAX_MATCH_S if timeout is None else max(MIN_MATCH_S, min(MAX_MATCH_S, timeout))


def _last_match(rx: regex.Pattern[str], text: str, limit: float) -> regex.Match[str] | None:
    """The last match of `rx` in `text` (final summaries come after interval reports), or
    None; ValueError when matching took more than `limit` CPU seconds of this thread.
    `regex`'s own `timeout=` counts the whole process's CPU time (another busy thread
    spends it too): it stops each slice, and the slices resume after the last match
    until this thread's own time reaches `limit`."""
    used, pos, hit = 0.0, 0, None
    while True:
        start = time.thread_time()
        try:
            for hit in rx.finditer(text, pos, timeout=limit - used):
                pass
            return hit
        except TimeoutError:
            used += time.thread_time() - start
            if limit - used < 0.01 * limit:
                raise ValueError(
                    f"pattern {rx.pattern!r} took more than {limit:.1f} CPU seconds on the "
                    "output (a pattern that backtracks, such as a nested quantifier "
                    "(a+)+; write it without)") from None
            if hit is not None:
                pos = hit.end()


def _walk(doc: Any, path: str) -> Any:
    cur = doc
    for part in path.split("."):
        if isinstance(cur, list) and part.lstrip("-").isdigit():
            try:
                cur = cur[int(part)]
            except IndexError:
                raise ValueError(f"key path {path!r}: index {part} out of range") from None
        elif isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            raise ValueError(f"key path {path!r}: no {part!r}")
    return cur


def _number(v: Any, name: str) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ValueError(f"metric {name!r}: {v!r} is not a number") from None

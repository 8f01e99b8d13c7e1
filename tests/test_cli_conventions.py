"""The CLI's conventions, checked on every command's parameters (issue 15): a new option
that breaks one fails here, whoever adds it."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any

#: A short option stands for one long option everywhere; -n is a count of runs, the
#: design's --runs budget or the --repeats of each configuration.
SHARED_SHORT = {"-n": {"--runs", "--repeats"}}
#: The same thing has the same short option in every command that gives it one.
SAME_SHORT = {"--response": "-y", "--output": "-o", "--quiet": "-q", "--executor": "-e"}


def _commands() -> Iterator[tuple[str, Any]]:
    import typer.main

    from storlab.cli import app

    def walk(cmd: Any, path: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, (*path, name))
        else:
            yield " ".join(path), cmd

    yield from walk(typer.main.get_command(app), ())


COMMANDS = list(_commands())


def _options(cmd: Any) -> Iterator[Any]:
    return (p for p in cmd.params if p.param_type_name == "option")


def _bools(cmd: Any) -> set[str]:
    """Names of the callback's parameters annotated bool."""
    hints = typing.get_type_hints(cmd.callback.__wrapped__) if hasattr(
        cmd.callback, "__wrapped__") else typing.get_type_hints(cmd.callback)
    return {n for n, t in hints.items() if t is bool}


def test_boolean_options_are_flag_pairs():
    seen = 0
    bad = []
    for name, cmd in COMMANDS:
        bools = _bools(cmd)
        for p in _options(cmd):
            if p.name in bools:
                seen += 1
                if not (p.is_flag and p.secondary_opts
                        and all(s.startswith("--no-") for s in p.secondary_opts)):
                    bad.append(f"{name} {p.opts[0]}")
    assert seen > 20  # the check found the flags (json, quiet, wait, ...)
    assert not bad, f"boolean options must be --x/--no-x flags: {bad}"


def test_short_options_mean_one_thing():
    meaning: dict[str, set[str]] = {}
    for name, cmd in COMMANDS:
        for p in _options(cmd):
            longs = [o for o in p.opts if o.startswith("--")]
            for short in (o for o in p.opts if not o.startswith("--")):
                meaning.setdefault(short, set()).add(longs[0])
            for long, short in SAME_SHORT.items():
                if long in p.opts:
                    assert short in p.opts, f"{name} {long}: short option must be {short}"
    for short, longs in meaning.items():
        assert len(longs) == 1 or longs <= SHARED_SHORT.get(short, set()), \
            f"{short} means {sorted(longs)} in different commands"
    assert meaning["-y"] == {"--response"} and meaning["-r"] == {"--resolution"}


def test_response_is_y_where_issue_15_asks():
    names = {n for n, cmd in COMMANDS for p in _options(cmd) if "--response" in p.opts}
    assert {"analyze", "importance", "importance-eval", "report", "tune", "confirm",
            "tune-eval"} <= names


def test_help_usage_and_flags_read_as_in_click(storlab_inprocess: Any) -> None:
    for name, _ in COMMANDS:
        r = storlab_inprocess(*name.split(), "--help", env={"COLUMNS": "120", "NO_COLOR": "1"})
        assert r.exit_code == 0, (name, r.output)
        usage = next(line for line in r.output.splitlines() if "Usage:" in line)
        assert "{" not in usage and "}" not in usage, usage
        words = usage.split()
        args = [w for w in words[words.index(name.split()[-1]) + 1:] if w != "[OPTIONS]"]
        assert all(w.strip("[].").isupper() for w in args), usage
        assert "<bool>" not in r.output, (name, r.output)


def test_old_spellings_still_work(storlab_inprocess: Any) -> None:
    r = storlab_inprocess("design", "--factors", "3", "--kind", "full", "--no-randomize",
                          "--json")
    assert r.exit_code == 0, r.output
    assert '"std_order": 1' in r.output.split('"table"')[1].split("}")[0]
    for cmd, old in (("confirm", "--runs"), ("estimate measure", "--repeat")):
        cmd_obj = dict(COMMANDS)[cmd]
        assert any(old in p.opts for p in _options(cmd_obj)), f"{cmd} {old} was dropped"


def test_help_speaks_to_a_storage_engineer_not_to_a_reader_of_the_papers():
    """A first-day user does not know "seed 002", "the paper, eq. 4" or "Figure 5": help
    says what a thing does (the methods keep their authors' names)."""
    import re

    jargon = re.compile(r"\bseed 0\d\d|\bseeds?'s?\b.*\bstep|\bpaper\b|\bFigure \d|"
                        r"\bsec\. \d|\beq\. \d", re.I)
    bad = []
    for name, cmd in COMMANDS:
        texts = [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]
        bad += [f"{name}: {t}" for t in texts if jargon.search(t)]
    assert not bad, bad

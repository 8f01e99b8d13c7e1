"""`shell: true` templates cannot be broken out of: values reach the shell through the
environment (STORLAB_<NAME>), never as command text, whatever quotes surround `{v}`.
Every payload runs through the real /bin/sh; nothing it carries may execute, and the
program receives the value exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from storlab.campaign.runners import _program
from storlab.campaign.runners.command import CommandRunner
from storlab.campaign.spec import CampaignError
from storlab.campaign.task import StepSpec, run_step

PAYLOADS = [
    "$(touch PWNED)", "`touch PWNED`", "; touch PWNED", "'; touch PWNED; '",
    '"; touch PWNED; "', '"$(touch PWNED)"', "'$(touch PWNED)'", "\ntouch PWNED\n",
    "x' && touch PWNED && echo '", 'x" && touch PWNED && echo "', "$(touch${IFS}PWNED)",
    "\\'; touch PWNED #", '\\"; touch PWNED #', "' \"$(touch PWNED)\" '", "|| touch PWNED",
    "&& touch PWNED", "> PWNED", "$((1+1))$(touch PWNED)", "${X:-$(touch PWNED)}",
    "*", "a  b\tc", "'", '"', "\\", "{v}", "$STORLAB_V", "-n",
]
#: (template, what the program must print for value v)
TEMPLATES = [
    ("printf '%s' {v} > out", lambda v: v),
    ("printf '%s' \"{v}\" > out", lambda v: v),
    ("printf '%s' '{v}' > out", lambda v: v),
    ("printf '%s' \"a{v}b\" > out", lambda v: f"a{v}b"),
    ("printf '%s' 'a{v}b' > out", lambda v: f"a{v}b"),
    ("printf '%s' x{v}y > out", lambda v: f"x{v}y"),
    ("printf '%s' \"$(printf '%s' {v})\" > out", lambda v: v.rstrip("\n")),
    ("printf '%s' \"$(printf '%s' \"{v}\")\" > out", lambda v: v.rstrip("\n")),
    ("printf '%s' `printf '%s' {v}` > out", lambda v: None),  # word-split: only no-exec
    ("v=\"{v}\"; printf '%s' \"$v\" > out", lambda v: v),
    ("printf '%s' \"$STORLAB_V\" > out", lambda v: v),
]


@pytest.mark.parametrize("template,expect", TEMPLATES)
def test_no_payload_executes_in_a_shell_step(tmp_path: Path, template: str, expect) -> None:
    for i, payload in enumerate(PAYLOADS):
        cwd = tmp_path / f"p{i}"
        cwd.mkdir()
        ok, msg, _ = run_step(StepSpec(template, shell=True), {"v": payload}, cwd, 10)
        assert not (cwd / "PWNED").exists(), (template, payload)
        assert not Path("PWNED").exists()
        assert ok, (template, payload, msg)
        want = expect(payload)
        if want is not None:
            assert (cwd / "out").read_text() == want, (template, payload)


def test_no_payload_executes_in_the_command_runner(tmp_path: Path) -> None:
    r = CommandRunner("printf 'value=%s\\n' '{v}' > out; echo 'n: 1'", shell=True,
                      regex_metrics=[r"n: (?P<n>\d+)"])
    for i, payload in enumerate(PAYLOADS):
        wd = tmp_path / f"r{i}"
        res = r.run({"v": payload}, wd, timeout=10)
        assert not (wd / "PWNED").exists(), payload
        assert res.ok, (payload, res.stderr)
        assert (wd / "out").read_text() == f"value={payload}\n"


def test_values_are_in_the_environment_and_not_in_the_text() -> None:
    cmd, env = _program.shell_command("run --size {size} '{name}' \"{workdir}\"",
                             {"size": 4096.0, "name": "$(rm -rf /)", "workdir": "/w d"})
    assert "rm" not in cmd and "4096" not in cmd
    assert env["STORLAB_SIZE"] == "4096" and env["STORLAB_NAME"] == "$(rm -rf /)"
    assert env["STORLAB_WORKDIR"] == "/w d"


def test_what_cannot_be_rendered_is_refused_with_one_line() -> None:
    for t in ("cat <<EOF\n{v}\nEOF", "echo 'unbalanced {v}", "echo $(echo {v}"):
        with pytest.raises(_program.ShellTemplateError):
            _program.shell_command(t, {"v": "x"})
    with pytest.raises(CampaignError, match="here-document"):
        CommandRunner("cat <<EOF\n{v}\nEOF", shell=True)
    with pytest.raises(_program.ShellTemplateError, match="share"):
        _program.shell_command("echo {a.b} {a_b}", {"a.b": "1", "a_b": "2"})


def test_argv_templates_stay_literal(tmp_path: Path) -> None:
    for i, payload in enumerate(PAYLOADS):
        cwd = tmp_path / f"a{i}"
        cwd.mkdir()
        ok, _, _ = run_step(StepSpec(["sh", "-c", "printf '%s' \"$1\" > out", "sh", "{v}"]),
                            {"v": payload}, cwd, 10)
        assert ok and (cwd / "out").read_text() == payload
        assert not (cwd / "PWNED").exists()

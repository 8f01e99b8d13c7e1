"""Values are data in argv too: a `sh -c SCRIPT` argv (the command runner's, a setup step's,
a string step split into one) gets its values in the script as quoted words, one word each
where it stands (a wrapper such as `sudo` or `env -i` may drop the environment). Every payload runs through the real bash and sh;
nothing it carries may execute, and the script receives the value exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from storlab.campaign.runners import _program
from storlab.campaign.runners.command import CommandRunner
from storlab.campaign.spec import Step
from storlab.campaign.task import StepSpec, run_step

PAYLOADS = ["$(touch PWNED)", "`touch PWNED`", "; touch PWNED", "'; touch PWNED; '",
            '"; touch PWNED; "', "\ntouch PWNED\n", "|| touch PWNED", "> PWNED", "*",
            "a  b", "-n"]


@pytest.mark.parametrize("argv", [
    ["bash", "-c", "printf '%s' {v} > out"],
    ["/bin/sh", "-ec", "printf '%s' \"{v}\" > out"],
    ["env", "A=1", "bash", "-o", "pipefail", "-c", "printf '%s' '{v}' > out"],
    # a wrapper that drops the environment (as sudo's env_reset does): the value is in the
    # script itself, not in a variable the wrapper would clear
    ["env", "-i", "sh", "-c", "printf '%s' {v} > out"],
    ["env", "-i", "bash", "-c", "printf '%s' \"{v}\" > out"],
    ["env", "-i", "bash", "-c", "printf '%s' '{v}' > out"],
])
def test_a_shell_script_in_argv_gets_values_as_data(tmp_path: Path, argv: list[str]) -> None:
    for i, payload in enumerate(PAYLOADS):
        cwd = tmp_path / f"s{i}"
        cwd.mkdir()
        ok, msg, _ = run_step(StepSpec(argv), {"v": payload}, cwd, 10)
        assert ok, msg
        assert not (cwd / "PWNED").exists(), (argv, payload)
        assert (cwd / "out").read_text() == payload, (argv, payload)


def test_a_string_step_split_into_sh_c_is_covered(tmp_path: Path) -> None:
    step = Step(run="sh -c 'printf %s {v} > out'")
    for i, payload in enumerate(PAYLOADS):
        cwd = tmp_path / f"s{i}"
        cwd.mkdir()
        ok, msg, _ = run_step(StepSpec(step.run), {"v": payload}, cwd, 10)
        assert ok and not (cwd / "PWNED").exists(), (payload, msg)
        assert (cwd / "out").read_text() == payload


def test_the_command_runner_bash_c(tmp_path: Path) -> None:
    r = CommandRunner(["bash", "-c", "printf 'v=%s\\n' {v}; echo 'n: 1'"],
                      regex_metrics=[r"n: (?P<n>\d+)"])
    for i, payload in enumerate(PAYLOADS):
        wd = tmp_path / f"r{i}"
        res = r.run({"v": payload}, wd, timeout=10)
        assert res.status == "ok", res.stderr
        assert not (wd / "PWNED").exists(), payload
        assert res.raw.startswith(f"v={payload}\n"), (payload, res.raw)


@pytest.mark.parametrize("argv,index", [
    (["bash", "-c", "x"], 2), (["sudo", "sh", "-ec", "x", "name"], 3),
    (["bash", "-o", "pipefail", "-c", "x"], 4), (["bash", "script.sh", "-c"], None),
    (["python3", "-c", "x"], None), (["bash", "-c"], None), (["echo", "sh", "-c"], None),
])
def test_which_argument_is_a_script(argv: list[str], index: int | None) -> None:
    # `echo sh -c`: the shell is found anyway, and `-c` has no script after it
    assert _program.shell_script_index(argv) == index


def test_outside_a_script_values_stay_whole_arguments() -> None:
    argv, env = _program.render_argv(["printf", "%s", "{v}"], {"v": "$(touch x)"})
    assert argv == ["printf", "%s", "$(touch x)"] and env == {}


def test_a_placeholder_in_backquotes_of_a_sh_c_script_is_refused(tmp_path: Path) -> None:
    """Text inside backquotes is parsed twice: a quoted value could end them."""
    ok, msg, _ = run_step(StepSpec(["sh", "-c", "echo `echo {v}` > out"]), {"v": "x"},
                          tmp_path, 10)
    assert not ok and "backquotes" in msg and not (tmp_path / "out").exists()

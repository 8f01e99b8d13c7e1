"""A run's programs get a stated environment, not the operator's: storlab's own PATH,
HOME, USER, LOGNAME, LANG, LANGUAGE, LC_*, TERM, TZ, CEPH_CONF, TMPDIR (the run's
directory), the campaign's `env:` and the values storlab sets (STORLAB_<NAME>, the run's
tag). Before, root's whole environment (tokens, cloud keys) reached every program (the
attack: `env` printed `ATK5_SECRET_TOKEN=hunter2` into the run's output). Real storlab,
real /bin/sh, in its sandbox."""

from __future__ import annotations

from pathlib import Path

import yaml

SECRET = "hunter2-a5-10"


def _campaign(d: Path, name: str, options: dict, **fields: object) -> Path:
    """The campaign `name` in `d` (made): a factor `x` (c, d), a response `v`, the command
    runner with `options`, and `fields`."""
    d.mkdir()
    (d / "campaign.yaml").write_text(yaml.safe_dump({
        "name": name, "design": {"kind": "full"},
        "space": {"factors": [{"name": "x", "kind": "categorical", "values": ["c", "d"]}],
                  "responses": [{"name": "v", "goal": "minimize"}]},
        "runner": {"type": "command", "options": options}, **fields}))
    return d / "campaign.yaml"


#: The runs' metric, from the line `result v=N` their command prints.
METRIC = [r"result v=(?P<v>\d+)"]


def _env_of(text: str) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln and
                ln.split("=", 1)[0].replace("_", "").isalnum())


def test_a_runs_programs_get_an_allow_listed_environment(tmp_path: Path, storlab) -> None:
    d = tmp_path / "c"
    camp = _campaign(d, "env", {"command": ["sh", "-c", "env; echo result v=1"],
                                "regex_metrics": METRIC, "env": {"MINE": "{x}-declared"}},
                     repetitions=1, setup=[{"run": "env > setup.env", "shell": True}],
                     keep_scratch=True)
    r = storlab("run", camp, env={
        "A5_SECRET_TOKEN": SECRET, "AWS_SECRET_ACCESS_KEY": SECRET, "PYTHONSTARTUP": SECRET,
        "LD_PRELOAD": "", "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC", "TERM": "dumb"})
    assert r.returncode == 0, r.stderr
    out = (d / "campaign.db.output" / "c1-r1.stdout").read_text()
    assert SECRET not in out
    seen = _env_of(out)
    assert seen["MINE"] == "c-declared"  # the campaign's env:
    assert seen["STORLAB_X"] == "c"  # the factor, as storlab sets it
    assert "STORLAB_RUN" in seen  # the run's tag
    assert (seen["LANG"], seen["LC_TIME"], seen["TZ"], seen["TERM"]) == (
        "C.UTF-8", "C", "UTC", "dumb")
    assert "PATH" in seen and "LD_PRELOAD" not in seen
    assert Path(seen["TMPDIR"]).name == "c1-r1"  # the run's own directory
    allowed = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ",
               "TMPDIR", "CEPH_CONF", "MINE", "PWD", "SHLVL", "_", "OLDPWD"}
    extra = {k for k in seen if k not in allowed and not k.startswith(("LC_", "STORLAB_"))}
    assert extra == set(), extra
    steps = (d / "scratch" / "c1-r1" / "setup.env").read_text()  # a step: the same rule
    assert SECRET not in steps and "STORLAB_X=c" in steps


def test_sandbox_env_pass_hands_named_variables_to_programs_and_steps(tmp_path: Path,
                                                                       storlab) -> None:
    """`sandbox.env_pass` names variables of storlab's environment every program and step
    gets (an SSH agent's socket, a proxy): the value at run time, never stored; `status`
    names them, without their values."""
    d = tmp_path / "c"
    camp = _campaign(d, "pass", {"command": ["sh", "-c", "env > run.env; echo result v=1"],
                                 "regex_metrics": METRIC},
                     sandbox={"env_pass": ["https_proxy", "F2_AGENT", "F2_UNSET"]},
                     setup=[{"run": "env > setup.env", "shell": True}], keep_scratch=True)
    # granted by the operator: on the command line and in STORLAB_ENV_PASS
    r = storlab("run", camp, "--env-pass", "https_proxy", "--env-pass",
                "F2_AGENT", env={"https_proxy": "http://proxy.f2:3128", "F2_AGENT": SECRET,
                                 "F2_OTHER": SECRET, "STORLAB_ENV_PASS": "F2_UNSET"})
    assert r.returncode == 0, r.stderr
    seen = _env_of((d / "scratch" / "c1-r1" / "run.env").read_text())
    assert (seen["https_proxy"], seen["F2_AGENT"]) == ("http://proxy.f2:3128", SECRET)
    assert "F2_OTHER" not in seen and "F2_UNSET" not in seen  # not named; not set
    steps = _env_of((d / "scratch" / "c1-r1" / "setup.env").read_text())
    assert steps["F2_AGENT"] == SECRET and "F2_OTHER" not in steps
    assert SECRET.encode() not in (d / "campaign.db").read_bytes()  # names, not values
    st = storlab("status", camp, env={"F2_AGENT": SECRET})
    assert st.returncode == 0, st.stderr
    assert "sandbox.env_pass" in st.stdout and "F2_AGENT" in st.stdout.replace("\n", "")
    assert SECRET not in st.stdout


def test_sandbox_env_pass_refuses_a_bad_name_in_one_line(tmp_path: Path, storlab) -> None:
    for bad, said in (("A=B", "not a variable name"), ("STORLAB_X", "storlab's own")):
        camp = _campaign(tmp_path / bad, "bad", {"command": ["true"]},
                         sandbox={"env_pass": ["HOME", bad]})
        r = storlab("run", camp)
        assert r.returncode == 2, r.stderr
        assert said in r.stderr and "env_pass" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_env_pass_needs_the_operators_grant(tmp_path: Path, storlab) -> None:
    """The campaign's author named the operator's token in `sandbox.env_pass` (with
    `network: true`, sent to the author's listener): the operator did not grant it, so the
    run is refused in one line naming the flag, before any program; granted, it passes."""
    d = tmp_path / "c"
    camp = _campaign(d, "grab", {"command": ["sh", "-c", "echo \"$F2_ROOT_TOKEN\" > got; "
                                             "echo result v=1"], "regex_metrics": METRIC},
                     sandbox={"env_pass": ["F2_ROOT_TOKEN"], "network": True},
                     keep_scratch=True)
    got = d / "scratch" / "c1-r1" / "got"
    for grant in ({}, {"STORLAB_ENV_PASS": "F2_OTHER,https_proxy"}):
        r = storlab("run", camp, env={"F2_ROOT_TOKEN": SECRET, **grant})
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "sandbox.env_pass: F2_ROOT_TOKEN not granted" in r.stderr
        assert "--env-pass F2_ROOT_TOKEN" in r.stderr
        assert not got.exists()
    r = storlab("run", camp, "--env-pass", "F2_ROOT_TOKEN",
                env={"F2_ROOT_TOKEN": SECRET})
    assert r.returncode == 0, r.stderr
    assert got.read_text().strip() == SECRET

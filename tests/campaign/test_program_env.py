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


def _env_of(text: str) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln and
                ln.split("=", 1)[0].replace("_", "").isalnum())


def test_a_runs_programs_get_an_allow_listed_environment(tmp_path: Path, storlab) -> None:
    d = tmp_path / "c"
    d.mkdir()
    (d / "campaign.yaml").write_text(yaml.safe_dump({
        "name": "env", "design": {"kind": "full"}, "repetitions": 1,
        "space": {"factors": [{"name": "x", "kind": "categorical", "values": ["c", "d"]}],
                  "responses": [{"name": "v", "goal": "minimize"}]},
        "setup": [{"run": "env > setup.env", "shell": True}],
        "runner": {"type": "command", "options": {
            "command": ["sh", "-c", "env; echo result v=1"],
            "regex_metrics": [r"result v=(?P<v>\d+)"],
            "env": {"MINE": "{x}-declared"}}},
        "keep_scratch": True}))
    r = storlab("run", d / "campaign.yaml", env={
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

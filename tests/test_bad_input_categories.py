"""Bad input, fresh categories: YAML 1.1 surprises, duplicate keys, deep nesting, dates and
binary values, absurd numbers, NUL bytes, reserved factor names, inputs that are FIFOs or
devices, oversized tables, outputs that are devices, paths that climb out of the campaign's
directory. Each is one line naming the file and the problem, exit 2, quickly; the few that
are accepted (a date stays the text written) are tested as accepted.

Most cases run in this process (`storlab_main`: the real entry point, a fraction of a
second each); the ones that hung before (a FIFO, a device) run as a real process with a
timeout, so a regression fails instead of hanging the suite."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

SPACE = "factors:\n  - {name: A, kind: integer, range: [1, 8]}\n  - {name: C, values: [x, y]}\n"
CAMPAIGN = ("space: space.yaml\ndesign: {kind: full}\n"
            "runner: {type: command, options: {command: [echo, 'n: {A}'], "
            "regex_metrics: ['n: (?P<n>\\d+)']}}\n")


@pytest.fixture(autouse=True, scope="module")
def _warm() -> None:
    """Import the commands once, so the time bounds below measure the check, not imports."""
    import storlab.commands.campaign  # noqa: F401
    import storlab.commands.design  # noqa: F401


def _one_line(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("storlab: error: "), err
    for w in words:
        assert w in err, err


# (file name, its text, words the one-line error must hold)
SPACES = [
    ("on.yaml", "factors:\n  - {name: A, values: [on, off]}\n",
     ("on.yaml", "line 2", "'on'", "YAML 1.1 boolean", '"on"')),
    ("yes.yaml", "factors:\n  - name: A\n    values: [yes, no]\n", ("yes.yaml", "'yes'")),
    ("dup.yaml", "factors:\n  - name: A\n    values: [1, 2]\n    values: [3, 4]\n",
     ("dup.yaml", "duplicate key 'values'", "line 4")),
    ("bin.yaml", "factors:\n  - {name: A, values: [!!binary aGk=, b]}\n",
     ("bin.yaml", "!!binary")),
    ("deep.yaml", "factors: " + "[" * 5000 + "]" * 5000 + "\n", ("deep.yaml", "nested")),
    ("block-deep.yaml", "factors:\n" + "".join("  " * i + "- \n" for i in range(1, 200)),
     ("block-deep.yaml", "nested")),
    ("2e70.yaml", f"factors:\n  - {{name: A, kind: integer, values: [1, {2**70}]}}\n",
     ("2e70.yaml", str(2**70), "64-bit")),
    ("intrange.yaml", "factors:\n  - {name: A, kind: integer, range: [1, 1.0e+30]}\n",
     ("intrange.yaml", "64-bit")),
    ("inf.yaml", "factors:\n  - {name: A, values: [.inf, 1]}\n", ("inf.yaml", "finite")),
    ("empty-name.yaml", "factors:\n  - {name: '', values: [1, 2]}\n",
     ("empty-name.yaml", "empty")),
    ("config-id.yaml", "factors:\n  - {name: config_id, values: [1, 2]}\n",
     ("config-id.yaml", "'config_id' is reserved")),
    ("underscore.yaml", "factors:\n  - {name: _x, values: [1, 2]}\n", ("reserved",)),
    ("nul-value.yaml", 'factors:\n  - {name: A, values: ["a\\0b", c]}\n',
     ("nul-value.yaml", "NUL")),
    ("big.yaml", "factors:\n  - {name: A, values: [" + ",".join(map(str, range(60000)))
     + "]}\n", ("big.yaml", "KiB")),
]


@pytest.mark.parametrize("name,text,words", SPACES, ids=[s[0] for s in SPACES])
def test_bad_space_files(name: str, text: str, words: tuple[str, ...], tmp_path: Path,
                         storlab_main: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path(name).write_text(text)
    t0 = time.process_time()  # the work done (a loaded machine stretches the wall clock)
    code, out, err = storlab_main("design", name)
    assert time.process_time() - t0 < 5
    _one_line(code, err, *words)


@pytest.mark.parametrize("command", [["importance", "-y", "x"], ["analyze", "-y", "x"]])
def test_a_deep_yaml_given_where_a_campaign_or_table_goes(
        command: list[str], tmp_path: Path, storlab_main: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The analyses ask whether a .yaml is a campaign with the one YAML reader too (a
    RecursionError traceback before)."""
    monkeypatch.chdir(tmp_path)
    Path("deep.yaml").write_text("x: " + "[" * 20000 + "\n")
    code, out, err = storlab_main(command[0], "deep.yaml", *command[1:])
    _one_line(code, err, "deep.yaml", "nested")


def test_dates_and_true_false_are_accepted(tmp_path: Path, storlab_main: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A date stays the text written (never a datetime); true/false stay booleans."""
    monkeypatch.chdir(tmp_path)
    Path("s.yaml").write_text("factors:\n  - {name: d, values: [2024-01-31, 2024-02-29]}\n"
                              "  - {name: b, values: [true, false]}\n"
                              "  - {name: w, values: ['on', 'off']}\n")
    code, out, err = storlab_main("design", "s.yaml", "-o", "d.csv")
    assert code == 0, err
    rows = pd.read_csv("d.csv", dtype=str).to_dict("records")
    assert {r["d"] for r in rows} == {"2024-01-31", "2024-02-29"}
    assert {r["b"] for r in rows} == {"True", "False"}
    assert {r["w"] for r in rows} == {"on", "off"}


CAMPAIGNS = [
    ("timeout.yaml", CAMPAIGN + "timeout: 1.0e+308\n", ("timeout.yaml", "timeout")),
    ("store-up.yaml", CAMPAIGN + "store: ../elsewhere.db\n", ("store-up.yaml", "store")),
    ("workdir-abs.yaml", CAMPAIGN + "workdir: /tmp\n", ("workdir-abs.yaml", "workdir")),
    ("nul.yaml", CAMPAIGN + 'store: "a\\0.db"\n', ("nul.yaml", "store", "NUL")),
    ("shellon.yaml", CAMPAIGN + "setup: [{run: 'echo hi', shell: on}]\n",
     ("shellon.yaml", "'on'")),
    ("dupkey.yaml", CAMPAIGN + "repetitions: 2\nrepetitions: 3\n",
     ("dupkey.yaml", "duplicate key 'repetitions'")),
    ("run-factor.yaml", CAMPAIGN.replace("space.yaml", "{factors: [{name: Run, values: "
                                         "[a, b]}]}").replace("{A}", "{Run}"),
     ("run-factor.yaml", "'Run'", "STORLAB_RUN")),
    ("placeholder.yaml", CAMPAIGN.replace("{A}", "{B}"),
     ("placeholder.yaml", "{B} is neither a factor")),
    ("no-metric.yaml", CAMPAIGN.replace(", regex_metrics: ['n: (?P<n>\\d+)']", ""),
     ("no-metric.yaml", "no metric")),
    ("typo.yaml", CAMPAIGN.replace("{command:", "{comand:"),
     ("typo.yaml", "did you mean 'command'")),
    ("excluded.yaml", CAMPAIGN + "vars: {STORLAB_x: 1}\n".replace("STORLAB_x", "run")
     .replace("run", "Run"), ("excluded.yaml", "STORLAB_RUN")),
]


@pytest.mark.parametrize("name,text,words", CAMPAIGNS, ids=[c[0] for c in CAMPAIGNS])
def test_bad_campaign_files_are_refused_before_any_run(
        name: str, text: str, words: tuple[str, ...], tmp_path: Path, storlab_main: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("space.yaml").write_text(SPACE)
    Path(name).write_text(text)
    code, out, err = storlab_main("run", name, "-q")
    _one_line(code, err, *words)
    assert not Path("campaign.db").exists() and not Path("scratch").exists()


def test_a_csv_with_too_many_columns_is_refused(tmp_path: Path, storlab_main: Any) -> None:
    p = tmp_path / "wide.csv"
    p.write_text(",".join(f"c{i}" for i in range(200_000)) + "\n"
                 + ",".join("1" for _ in range(200_000)) + "\n")
    t0 = time.process_time()  # CPU time: ~1.1 s here, imports included, on a quiet machine
    code, out, err = storlab_main("analyze", str(p), "-y", "c1")
    assert time.process_time() - t0 < 5
    _one_line(code, err, "wide.csv", "200000 columns")


def test_an_output_that_is_not_a_regular_file_is_left_alone(tmp_path: Path,
                                                          storlab_main: Any) -> None:
    """`-o /dev/full` said "wrote" (as root, the device node was replaced by a file); a FIFO
    stands in for the device here, so the test cannot damage the machine on old code."""
    (tmp_path / "space.yaml").write_text(SPACE)
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    code, out, err = storlab_main("design", str(tmp_path / "space.yaml"), "-o", str(fifo))
    _one_line(code, err, "out.csv", "FIFO", "not a regular file")
    assert fifo.is_fifo()


@pytest.mark.parametrize("kind", ["fifo", "device"])
@pytest.mark.parametrize("command", ["design {}", "analyze {} -y y", "run {}"])
def test_inputs_that_are_fifos_or_devices_do_not_hang(kind: str, command: str,
                                                     tmp_path: Path, storlab: Any) -> None:
    if kind == "fifo":
        path = tmp_path / "in.yaml"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    t0 = time.monotonic()
    r = storlab(*command.format(path).split(), cwd=tmp_path, timeout=60)
    assert time.monotonic() - t0 < 30  # a subprocess start on a loaded machine included
    _one_line(r.returncode, r.stderr, str(path), "not a regular file")

"""The directory a run runs in, as the checks made before any run name it (the preflight,
the sandbox's summary of `storlab status`): `Campaign.run_dir`, where the run really runs.
The summary judged a configuration's options in `<campaign>/run`, where no run runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from storlab.campaign import Campaign
from storlab.campaign.sandbox_summary import starts_others

#: Prints the metric and the directory it runs in.
WHERE = "import json, os; print(json.dumps({'y': 1, 'cwd': os.getcwd()}))"


class Judging:
    """A runner's judging methods (`starts_programs_reason`, `job_options` with fio's
    signatures): its reason names the directory a configuration was judged in."""

    def starts_programs_reason(self, opts: dict[str, Any] | None = None) -> str | None:
        return None if opts is None else f"judged in {opts['directory']}"

    def job_options(self, config: dict[str, Any], workdir: Path, check: bool = True
                    ) -> dict[str, Any]:
        return {**config, "directory": str(workdir)}


def test_a_configuration_is_judged_where_its_runs_run(tmp_path: Path) -> None:
    d = tmp_path / "c"
    d.mkdir()
    spec = {"name": "dirs", "timeout": 60, "repetitions": 2,
            "space": {"factors": [{"name": "n", "kind": "categorical", "values": ["a", "b"]}],
                      "responses": [{"name": "y", "goal": "maximize"}]},
            "design": {"kind": "full"},
            "runner": {"type": "command", "options": {
                "command": [sys.executable, "-c", WHERE], "json_metrics": {"y": "y"}}}}
    (d / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    camp = Campaign.load(d / "campaign.yaml")
    camp.run()
    ran = {f.name.removesuffix(".stdout"): json.loads(f.read_text().splitlines()[-1])["cwd"]
           for f in (d / "campaign.db.output").glob("*.stdout")}
    assert len(ran) == 4, ran
    named = {f"c{cid}-r{rep}": str(camp.run_dir(cid, rep))
             for cid, _, _ in camp.configs for rep in (1, 2)}
    assert named == ran
    first = camp.configs[0][0]
    assert starts_others(camp, Judging(), None) == \
        f"judged in {ran[f'c{first}-r1']}, in some configurations"

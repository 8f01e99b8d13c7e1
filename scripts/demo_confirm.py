"""The demo's confirmation step: write a campaign that runs the recommended configuration
and the best one measured in the screening, side by side, and compare them afterwards.

    python scripts/demo_confirm.py prepare OUT_DIR RESPONSE   # -> OUT_DIR/confirm.{csv,yaml}
    python scripts/demo_confirm.py compare OUT_DIR RESPONSE   # reads OUT_DIR/confirm_runs.csv

A screening model's recommendation is a prediction at a configuration that was usually
never run; only runs say whether it holds. Factors the analysis found no effect for are
set as in the best measured configuration.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import yaml
from scipy import stats


def prepare(out: Path, response: str) -> None:
    rec = json.loads((out / "effects.json").read_text())["recommendation"]
    results = pd.read_csv(out / "results.csv")
    space = yaml.safe_load((out / "space.yaml").read_text())
    factors = [f["name"] for f in space["factors"]]
    best = results.loc[results[response].idxmax(), factors].to_dict()
    recommended = dict(best, **{s["factor"]: s["value"] for s in rec["settings"]})
    rows = pd.DataFrame([dict(recommended, role="recommended"), dict(best, role="best_measured")])
    if recommended == best:
        rows = rows.iloc[:1].assign(role="recommended=best_measured")
    rows[factors].to_csv(out / "confirm.csv", index=False)
    rows["role"].to_csv(out / "confirm_roles.csv", index=False)
    spec = yaml.safe_load((out / "campaign.yaml").read_text())
    spec.update(name="fio-confirm", design={"csv": "confirm.csv"}, repetitions=3,
                store="confirm.db", seed=7)
    (out / "confirm.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    print(f"confirm: predicted {response} at the recommendation {rec['predicted']:.4g}; "
          f"best measured {results[response].max():.4g}")


def compare(out: Path, response: str) -> None:
    runs = pd.read_csv(out / "confirm_runs.csv")
    roles = pd.read_csv(out / "confirm_roles.csv")["role"].tolist()
    groups = [runs.loc[runs["config_id"] == i + 1, response].to_numpy() for i in range(len(roles))]
    for role, g in zip(roles, groups):
        print(f"  {role:26s} {g.mean():.4g} +/- {g.std(ddof=1):.2g} {response} "
              f"over {len(g)} runs")
    if len(groups) == 2 and min(len(g) for g in groups) >= 2:
        t = stats.ttest_ind(groups[0], groups[1], equal_var=False)
        change = 100.0 * (groups[0].mean() / groups[1].mean() - 1.0)
        print(f"  recommended vs best measured: {change:+.1f} % (Welch p = {t.pvalue:.2g})")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("prepare", "compare"):
        sys.exit(__doc__)
    {"prepare": prepare, "compare": compare}[sys.argv[1]](Path(sys.argv[2]), sys.argv[3])

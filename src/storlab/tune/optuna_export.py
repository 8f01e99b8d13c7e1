"""A tuning campaign's history as an Optuna study in an Optuna RDB storage
(`storlab tune --optuna-storage sqlite:///study.db`), so the tools Optuna users already
have (optuna-dashboard, `optuna.load_study`, their notebooks) open it.

Every measured run is one trial, in execution order: its configuration as the trial's
params (a factor with listed levels as a categorical distribution of those levels, a range
as an int or float distribution), its objective values, state COMPLETE or FAIL (a failed
run has no value), and user attrs `phase` (screen, tune, confirm), `run`, `key`,
`config_id`, `replicate`, `status` and the run's metrics. The study is rewritten whole on
each export, so exporting again after a resume gives the same study plus the new runs."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import StorlabError
from ..jsonutil import plain
from ..space import Factor, Space
from .domain import Domain
from .optuna_storage import held_sqlite
from .strategies import observed_values

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution

    from .result import TuneResult


def distribution(f: Factor) -> BaseDistribution:
    """The factor as the dashboard should show it: its own values, not indices."""
    from optuna.distributions import (CategoricalDistribution, FloatDistribution,
                                      IntDistribution)

    if f.values is not None:  # listed levels (a range's integers are no list of choices)
        return CategoricalDistribution([plain(v) for v in f.levels or []])
    lo, hi = f.range  # type: ignore[misc]
    if f.kind == "integer":
        return IntDistribution(int(lo), int(hi), log=f.log)
    return FloatDistribution(float(lo), float(hi), log=f.log)


def _param(domain: Domain, f: Factor, value: Any) -> Any:
    """A run's value as one of the distribution's choices ("4k" where 4096 is listed)."""
    if f.values is None:
        return int(value) if f.kind == "integer" else float(value)
    if f.kind == "categorical":
        return plain(value)
    return plain((f.levels or [])[domain.to_param(f.name, value)])


def export_study(result: TuneResult, space: Space, storage: str, study_name: str,
                 times: Mapping[str, tuple[float | None, float | None]] | None = None) -> int:
    """Write `result`'s history to `storage` as the study `study_name` (replacing a study
    of that name); `times` (run key -> start, end in epoch seconds) dates the trials, so
    a dashboard's timeline shows when each run was made. Returns the trials written."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with held_sqlite(storage) as url:
        try:
            storage_obj = optuna.storages.RDBStorage(url)
        except Exception as exc:  # a bad URL, a driver that is missing, an unwritable file
            raise StorlabError(f"--optuna-storage {storage}: "
                               f"{str(exc).splitlines()[0]}") from None
        try:
            return _write_study(result, space, storage_obj, study_name, times)
        finally:
            storage_obj.engine.dispose()  # closed before the held directory is


def _write_study(result: TuneResult, space: Space, storage_obj: Any, study_name: str,
                 times: Mapping[str, tuple[float | None, float | None]] | None) -> int:
    import optuna
    from optuna.trial import TrialState, create_trial

    try:
        optuna.delete_study(study_name=study_name, storage=storage_obj)
    except KeyError:
        pass
    study = optuna.create_study(storage=storage_obj, study_name=study_name,
                                directions=[o.goal for o in result.objectives])
    with warnings.catch_warnings():  # "experimental" since Optuna 3.2: not the user's concern
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([o.name for o in result.objectives])  # the dashboard's labels
    study.set_user_attr("strategy", result.strategy)
    study.set_user_attr("budget", result.budget)
    best = result.best()
    if best is not None:
        study.set_user_attr("recommended", {k: plain(v) for k, v in best.config.items()})
    domain = Domain(space)
    dists = {f.name: distribution(f) for f in space.factors}
    trials = []
    for i, o in enumerate(result.history, 1):
        params = {n: _param(domain, space[n], o.config[n]) for n in dists if n in o.config}
        vals = observed_values(o, result.objectives)
        attrs = {"phase": o.phase, "run": i, "key": o.key, "config_id": o.config_id,
                 "replicate": o.repetition, "status": o.status,
                 "metrics": {k: float(v) for k, v in o.metrics.items()
                             if isinstance(v, (int, float)) and math.isfinite(v)}}
        t = create_trial(params=params, distributions={n: dists[n] for n in params},
                         values=None if vals is None else [float(v) for v in vals],
                         state=TrialState.FAIL if vals is None else TrialState.COMPLETE,
                         user_attrs=attrs)
        start, end = (times or {}).get(o.key, (None, None))
        if start and end:
            t.datetime_start = datetime.fromtimestamp(start)
            t.datetime_complete = datetime.fromtimestamp(end)
        trials.append(t)
    study.add_trials(trials)
    return len(trials)

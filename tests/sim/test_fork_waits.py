"""The analytic model's quorum wait at single-server stations: waits that are zero when the
server is idle, and branches that wait together where replica sets repeat."""

from pathlib import Path

import numpy as np
import pytest

from storlab.sim.analytic import _order_stat, _order_stat_idle, demands
from storlab.sim.model import build_model
from storlab.sim.spec import load_raw, parse_cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


@pytest.mark.parametrize("q,b", [(1, 3), (2, 3), (3, 3), (2, 2), (1, 1)])
def test_idle_or_exponential_order_statistic_against_draws(q, b):
    """E[q-th smallest of b waits], each 0 with probability 1 - p and exponential
    otherwise, in units of the mean wait: against a million draws, and at p = 1 the
    exponentials' order statistic."""
    assert _order_stat_idle(q, b, np.array([1.0]))[0] == pytest.approx(_order_stat(q, b))
    rng = np.random.default_rng(1)
    for p in (0.1, 0.4, 0.8):
        w = rng.exponential(1.0, (1_000_000, b)) * (rng.random((1_000_000, b)) < p)
        want = np.sort(w, axis=1)[:, q - 1].mean() / w.mean()
        assert _order_stat_idle(q, b, np.array([p]))[0] == pytest.approx(want, rel=0.02)


def test_branches_wait_together_where_replica_sets_repeat():
    """cluster700's ring puts its partitions on few sets of 3 disks: a DELETE's disks share
    about 0.3 of their work with its other disks; with each partition's replicas drawn at
    random, nearly nothing. GETs do not fork."""
    m = build_model(parse_cluster(load_raw(EXAMPLES / "cluster700.yaml")))
    tog = demands(m, n=40_000).together
    assert tog[1] == 0.0
    assert 0.2 < tog[2] < 0.4 and 0.2 < tog[0] < 0.4
    rng = np.random.default_rng(5)
    node = m.ring.dev_node
    P = m.ring.r2p2d.shape[1]
    rr = rng.integers(0, node.size, (3, P))
    while (bad := (node[rr[0]] == node[rr[1]]) | (node[rr[0]] == node[rr[2]])
           | (node[rr[1]] == node[rr[2]])).any():
        rr[:, bad] = rng.integers(0, node.size, (3, int(bad.sum())))
    m.ring.r2p2d[:] = rr
    assert demands(m, n=40_000).together[2] < 0.02


"""The write quorum and when the proxy answers a write, as Swift's replication policy does:
the quorum is half the replicas rounded up (so 1 of 2, not 2 of 2), and with
`post_quorum_wait` (the default) the proxy answers once every live replica has (Swift's
proxy waits post_quorum_timeout past the quorum for the rest), not at the quorum."""

import pytest

from storlab.errors import SimError
from storlab.sim.model import build_model
from storlab.sim.run import run_model
from storlab.sim.spec import apply_overrides, parse_cluster


def _spec(replicas: int = 3, slow_last: bool = False, **extra):
    """One proxy, `replicas` storage nodes of one disk each (no handoff to go to), one
    client, PUTs only; with slow_last the last node's disk is an HDD, the others SSDs."""
    fast = {"role": "storage", "count": replicas - 1 if slow_last else replicas, "name": "fast",
            "disks": {"type": "ssd_s3700", "count": 1}}
    groups = [{"role": "proxy", "count": 1}, fast]
    if slow_last:
        groups.append({"role": "storage", "count": 1, "name": "slow",
                       "disks": {"type": "hdd7200", "count": 1}})
    raw = {"nodes": groups, "swift": {"part_power": 6, "replicas": replicas},
           "workload": {"mix": {"PUT": 1.0}, "object_size": "64KiB", "clients": 1,
                        "requests": 2000, "warmup": 0.0, "objects": 2000}}
    return parse_cluster(apply_overrides(raw, extra) if extra else raw)


def _put(spec) -> dict:
    return run_model(build_model(spec), backend="python").ops.set_index("op").loc["PUT"]


@pytest.mark.parametrize("replicas, quorum", [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3)])
def test_default_write_quorum_is_half_the_replicas_rounded_up(replicas, quorum):
    assert _spec(replicas).swift.write_quorum == quorum


def test_writes_wait_past_the_quorum_by_default():
    """Swift's proxy waits post_quorum_timeout past the quorum (measured on a real Swift:
    +8.7 ms per PUT at 1 client), so the model's default answers at every live replica."""
    assert _spec(3).swift.post_quorum_wait is True
    assert _spec(3, post_quorum_wait=False).swift.post_quorum_wait is False


def test_two_replicas_one_down_still_write():
    """2 replicas on 2 disks, one down: the live one is a quorum (1 of 2), so every PUT
    succeeds; a quorum of 2 set by hand fails every one."""
    assert _put(_spec(2, failed_disks=1))["availability"] == 1.0
    with pytest.raises(SimError, match="every request fails"):
        _put(_spec(2, failed_disks=1, write_quorum=2))


def test_post_quorum_wait_answers_after_the_slowest_replica():
    """One client (nothing queues, nothing left running between requests), two SSD
    replicas and one HDD: at the quorum (2 of 3) a PUT waits for the SSDs only; with
    post_quorum_wait (the default, as Swift's proxy does) it waits for the HDD too, exactly
    as a quorum of 3 would."""
    at_quorum = _put(_spec(3, slow_last=True, post_quorum_wait=False))["lat_mean_ms"]
    waited = _put(_spec(3, slow_last=True))["lat_mean_ms"]
    all3 = _put(_spec(3, slow_last=True, write_quorum=3))["lat_mean_ms"]
    assert waited == pytest.approx(all3, rel=1e-9)
    assert waited > 2 * at_quorum  # an HDD write is several times an SSD's


def test_post_quorum_wait_skips_a_failed_replica():
    """A failed device answers 507 and drops out: the proxy waits for the live ones only, so
    with one of three down every PUT still succeeds (2 live >= quorum 2)."""
    row = _put(_spec(3, post_quorum_wait=True, failed_disks=1))
    assert row["availability"] == 1.0 and row["failed"] == 0

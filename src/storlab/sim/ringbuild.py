"""Swift's RingBuilder initial rebalance, re-implemented without importing Swift.

A new ring built by `swift-ring-builder create P R 1; add ...; rebalance SEED` is fully
determined by the device list and the seed: Swift (2.x, `swift/common/ring/builder.py`)

1. plans, per tier (region, zone, server, device), how many replicas ("replicanths") it should
   hold: each device's weight share capped at one replica, then spread as evenly as the
   device counts allow for dispersion, blended by `overload` (0 by default: weight wins);
2. turns the plan into whole partition-replica counts per device ("parts wanted");
3. seeds Python's `random` with SEED, draws one gather offset, shuffles the partitions, and
   gives every device a sort key (parts wanted, random 16 bits, id);
4. walks the shuffled partitions, and for each replica descends the tier tree, at each level
   taking the child with the most parts still wanted among those below their plan's maximum
   replicas for this partition (ties: the child whose best device sorts first).

With `min_part_hours` >= 1 (what every deployment uses) nothing placed in step 4 can move
again in the same rebalance, so steps 1-4 are the whole initial build. We follow the same
steps with the same random draws (Python's `random.Random` is the same Mersenne Twister),
so the assignments are identical; tests check this against Swift's builder. Step 3's
shuffle and step 4's walk run in the compiled engine when it is built (`py_shuffle`, the
same Mersenne Twister draws; `ring_place`, the same walk): 700 nodes x 10 disks at part
power 18 in under a second of CPU, where Python's walk took about 2 s per 200,000
partition-replicas. The Python walk stays as the reference (`compiled=False`).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ..errors import RingBuildError  # re-exported: sim.ring catches it
from .engine import compiled_function

Tier = tuple


def _weighted_replicas(devs: list[tuple], weights: list[float], parts: int,
                       replicas: float) -> dict[Tier, float]:
    """Each weighted device's replicanths by weight (at most 1), summed up every tier."""
    one_part = parts * replicas / sum(weights)
    per_dev: dict[int, float] = {}
    room: list[int] = []
    for i, w in enumerate(weights):
        if not w:
            continue
        r = w * one_part / parts
        if r < 1:
            room.append(i)
        else:
            r = 1
        per_dev[i] = r
    while True:
        remaining = replicas - sum(per_dev.values())
        if remaining < 1e-10:
            break
        room = [i for i in room if per_dev[i] < 1]
        rel = remaining / sum(per_dev[i] for i in room)
        for i in room:
            per_dev[i] = min(1, per_dev[i] * (rel + 1))
    by_tier: dict[Tier, float] = defaultdict(float)
    for i, w in enumerate(weights):
        if not w:
            continue
        tier = devs[i]
        for k in range(5):
            by_tier[tier[:k]] += per_dev[i]
    return by_tier


def _children(devs: list[tuple], weights: list[float]) -> dict[Tier, set]:
    """Tier tree over weighted devices: tier -> set of child tiers."""
    tree: dict[Tier, set] = defaultdict(set)
    for tier, w in zip(devs, weights):
        if w:
            for k in range(4):
                tree[tier[:k]].add(tier[:k + 1])
    return tree


def _max_replicas(tree: dict[Tier, set], replicas: float) -> dict[Tier, float]:
    """Upper bound of replicanths per tier from the tree's shape alone (bound=float)."""
    out: dict[Tier, float] = defaultdict(float)

    def walk(tier: Tier, count: float) -> None:
        if len(tier) == 4:
            count = min(1, count)
        out[tier] = count
        subs = tree.get(tier)
        if subs:
            for s in subs:
                walk(s, float(count) / len(subs))
    walk((), replicas)
    return out


def _wanted_replicas(devs: list[tuple], weights: list[float], tree: dict[Tier, set],
                     weighted: dict[Tier, float], replicas: float) -> dict[Tier, float]:
    """Replicanths per tier for the widest dispersion the weights and device counts allow."""
    dispersed = {t: (math.floor(r), math.ceil(r)) for t, r in _max_replicas(tree, replicas).items()}
    n_dev: dict[Tier, int] = defaultdict(int)
    for tier, w in zip(devs, weights):
        if w > 0:
            for k in range(1, 5):
                n_dev[tier[:k]] += 1
            n_dev[()] += 1
    wanted: dict[Tier, float] = defaultdict(float)

    def place(tier: Tier, amount: float) -> None:
        if amount > n_dev[tier]:
            raise RingBuildError(f"more replicas ({amount}) than devices ({n_dev[tier]}) "
                                 f"in tier {tier}")
        wanted[tier] = amount
        subs = sorted(tree.get(tier, ()))
        if not subs:
            return
        to_place: dict[Tier, float] = defaultdict(float)
        remaining = amount
        spread = subs
        device_limited = False
        while True:
            rel = remaining / sum(weighted[t] for t in spread)
            for t in spread:
                r = to_place[t] + weighted[t] * rel
                lo, hi = dispersed[t]
                if r < lo:
                    r = lo
                elif r > hi and not device_limited:
                    r = hi
                if r > n_dev[t]:
                    r = n_dev[t]
                to_place[t] = r
            remaining = amount - sum(to_place.values())
            if remaining < -1e-10:
                spread = [t for t in subs if to_place[t] > dispersed[t][0]]
            elif remaining > 1e-10:
                spread = [t for t in subs if n_dev[t] > to_place[t] < dispersed[t][1]]
                if not spread:
                    device_limited = True
                    spread = [t for t in subs if to_place[t] < n_dev[t]]
            else:
                break
        for t in subs:
            place(t, to_place[t])

    place((), replicas)
    return wanted


def replica_plan(devs: list[tuple], weights: list[float], parts: int, replicas: float,
                 overload: float = 0.0) -> dict[Tier, tuple[int, float, int]]:
    """Tier -> (min, target, max) replicas per partition, as Swift's builder plans them."""
    weighted = _weighted_replicas(devs, weights, parts, replicas)
    tree = _children(devs, weights)
    wanted = _wanted_replicas(devs, weights, tree, weighted, replicas)
    need = 0.0
    for tier, w in zip(devs, weights):
        if not w:
            continue
        need = max(need, (wanted[tier] - weighted[tier]) / weighted[tier])
    if need <= 0.0:
        target = wanted
    else:
        ov = min(overload, need)
        target = {t: (wanted[t] - w) / need * ov + w for t, w in weighted.items()}
    return {t: (math.floor(r + 1e-10), r, math.ceil(r - 1e-10)) for t, r in target.items()}


def parts_wanted(devs: list[tuple], weights: list[float], plan: dict[Tier, tuple],
                 parts: int, replicas: float) -> list[int]:
    """Whole partition-replicas per device from the plan (Swift's `_set_parts_wanted`)."""
    tree = _children(devs, weights)
    by_tier: dict[Tier, int] = defaultdict(int)

    def target(t: Tier) -> float:
        return plan[t][1] if t in plan else 0

    def place(tier: Tier, n: int) -> None:
        by_tier[tier] = n
        subs = sorted(tree.get(tier, ()))
        if not subs:
            return
        to_place: dict[Tier, int] = defaultdict(int)
        for t in subs:
            to_place[t] = min(n, int(math.floor(target(t) * parts)))
            n -= to_place[t]
        order = sorted(subs, key=target)
        k = 0
        while n > 0:
            to_place[order[k % len(order)]] += 1
            k += 1
            n -= 1
        for t, p in to_place.items():
            place(t, p)

    place((), int(replicas * parts))
    return [by_tier[d] if w else -parts * int(replicas) for d, w in zip(devs, weights)]


def swift_rebalance(region: Sequence, zone: Sequence, server: Sequence,
                    weight: Sequence[float], part_power: int, replicas: int,
                    seed: int = 0, overload: float = 0.0, compiled: bool = True) -> np.ndarray:
    """`r2p2d[replica, part]` of a new ring, as Swift's builder assigns it with `seed`.

    Devices are numbered 0..n-1 in the order given (Swift's device ids); `server` stands for
    the device's IP (tiers sort by it, so give values that sort as the IPs would).
    `compiled`: walk the partitions in the compiled engine when it is built (the same
    assignments; False forces the Python reference)."""
    n = len(weight)
    weights = [float(w) for w in weight]
    if sum(1 for w in weights if w > 0) < replicas:
        raise RingBuildError(f"{replicas} replicas need as many devices with weight > 0")
    devs = [(region[i], zone[i], server[i], i) for i in range(n)]
    parts = 1 << part_power
    plan = replica_plan(devs, weights, parts, replicas, overload)
    wanted = parts_wanted(devs, weights, plan, parts, replicas)

    rnd = random.Random(seed)
    rnd.randint(0, parts // 2)          # the first balance gather's start (nothing to gather)
    order = _shuffled(rnd, parts, compiled)   # the gathered (part, replicas) list
    sort_key = {i: (wanted[i], rnd.randint(0, 0xFFFF), i) for i in range(n)}

    # Integer tier ids; children ordered by their best device's sort key.
    live = sorted((i for i in range(n) if weights[i]), key=sort_key.__getitem__)
    tid: dict[Tier, int] = {(): 0}
    best_key: dict[Tier, tuple] = {}
    dev_tiers: dict[int, list[int]] = {}
    for i in live:
        ids = []
        for k in range(1, 5):
            t = devs[i][:k]
            if t not in tid:
                tid[t] = len(tid)
            best_key[t] = sort_key[i]
            ids.append(tid[t])
        dev_tiers[i] = ids
    n_t = len(tid)
    kids: list[list[int]] = [[] for _ in range(n_t)]
    child_tiers: dict[Tier, list[Tier]] = defaultdict(list)
    for t in tid:
        if t:
            child_tiers[t[:-1]].append(t)
    for t, cs in child_tiers.items():
        cs.sort(key=best_key.__getitem__)
        kids[tid[t]] = [tid[c] for c in cs]
    mx = [0] * n_t
    avail = [0] * n_t
    leaf_dev = [-1] * n_t
    for t, j in tid.items():
        mx[j] = plan[t][2] if t in plan else 0
    for i in live:
        for j in dev_tiers[i]:
            avail[j] += max(wanted[i], 0)
        leaf_dev[dev_tiers[i][-1]] = i

    place = compiled_function("ring_place") if compiled else None
    if place is not None:
        kid_ptr = np.zeros(n_t + 1, dtype=np.int64)
        kid_ptr[1:] = np.cumsum([len(k) for k in kids])
        flat = np.fromiter((c for k in kids for c in k), dtype=np.int64, count=int(kid_ptr[-1]))
        tiers = np.zeros((n, 4), dtype=np.int64)   # weightless devices: never a leaf
        for i in live:
            tiers[i] = dev_tiers[i]
        try:
            flat_out = place(np.asarray(order, dtype=np.int64), kid_ptr, flat,
                             np.asarray(mx, dtype=np.int64), np.asarray(avail, dtype=np.int64),
                             np.asarray(leaf_dev, dtype=np.int64), tiers.ravel(), replicas)
        except ValueError as exc:
            raise RingBuildError(str(exc).removeprefix("ring_place: ")) from None
        return flat_out.reshape(replicas, parts)
    return _walk(order, kids, mx, avail, leaf_dev, dev_tiers, replicas, parts)


def _shuffled(rnd: random.Random, n: int, compiled: bool) -> list[int] | np.ndarray:
    """`rnd.shuffle(list(range(n)))`, leaving `rnd` where that leaves it; the compiled
    engine runs the same Mersenne Twister draws (Python's loop is ~0.6 s CPU at 1e6)."""
    shuffle = compiled_function("py_shuffle") if compiled else None
    if shuffle is None:
        order = list(range(n))
        rnd.shuffle(order)
        return order
    version, internal, gauss = rnd.getstate()
    order, state, index = shuffle(np.asarray(internal[:-1], dtype=np.uint32), internal[-1], n)
    rnd.setstate((version, (*state.tolist(), index), gauss))
    return order


def _walk(order: list[int], kids: list[list[int]], mx: list[int], avail: list[int],
          leaf_dev: list[int], dev_tiers: dict[int, list[int]], replicas: int,
          parts: int) -> np.ndarray:
    """Step 4 in Python (the compiled `ring_place` is the same walk, about 100x faster)."""
    n_t = len(mx)
    out = np.full((replicas, parts), -1, dtype=np.int32)
    rows = [out[r] for r in range(replicas)]
    key = avail.__getitem__
    never = {j for j in range(1, n_t) if mx[j] <= 0}   # planned for no replica at all
    for part in order:
        at: dict[int, int] = {}
        full = set(never)           # tiers at their plan's maximum for this partition
        for r in range(replicas):
            t = 0
            for _ in range(4):
                # max() keeps the first of equal children, as Swift's does; most children
                # are never full, so try the unfiltered maximum first.
                kc = kids[t]
                t = max(kc, key=key)
                if t in full:
                    cand = [c for c in kc if c not in full]
                    if not cand:
                        raise RingBuildError(f"no device can take replica {r} of partition "
                                             f"{part}")
                    t = max(cand, key=key)
            dev = leaf_dev[t]
            for j in dev_tiers[dev]:
                avail[j] -= 1
                k = at[j] = at.get(j, 0) + 1
                if k >= mx[j]:
                    full.add(j)
            rows[r][part] = dev
    return out

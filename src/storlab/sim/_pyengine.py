"""Pure-Python reference implementation of the event engine.

It defines the semantics the Rust core (``engine/src/lib.rs``) must reproduce bit for
bit: the same events in the same (time, seq) order, the same floating-point
operations. It is slow (~10^5 events/s) and is meant for tests and for reading.

Events: request arrival, FCFS departure (carries the visit's token), PS departure
(carries the station and a version number; a PS station reschedules its next
departure whenever its population or head job changes, and stale events are
skipped without being counted). A token is (visit, branch, step, request, arrival
time at the station).

PS stations use virtual time: ``V`` grows at the per-job rate ``min(1, c/n)``, a
job arriving at virtual time ``V`` with demand ``d`` leaves when ``V`` reaches
``V + d``; the job with the smallest tag leaves first. ``V`` restarts at 0 whenever
the station empties, which keeps tags small and precise.

HOLD stations are token pools (``c`` tokens, demand 0). A visit takes a free token
through a GRANT event at its arrival time, or waits FIFO; the branch keeps every token
it took until its last visit completes, then releases them in visit order (each
release hands the token to the head waiter, whose GRANT fires at the release time).
Granting through the event heap, never inline, keeps a step from completing while
``start_step`` is still launching its branches. ``n`` counts holders + waiters,
``nbusy`` tokens in use; a release is a completion, its residence runs from the
arrival at the pool to the release.
"""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np

ARR, FDEP, PDEP, GRANT = 0, 1, 2, 3
HOLD = 2


_DEADLOCK = ("deadlock: branches still wait for HOLD tokens when no event is left "
             "(a branch takes tokens of pools in an order others reverse, or more than a pool has)")


def _rate(n: int, c: int) -> float:
    """Per-job service rate at a PS station with c servers and n jobs."""
    return 1.0 if n <= c else c / n


def simulate_core(
    kind: np.ndarray,
    servers: np.ndarray,
    step_ptr: np.ndarray,
    branch_ptr: np.ndarray,
    quorum: np.ndarray,
    visit_ptr: np.ndarray,
    station: np.ndarray,
    demand: np.ndarray,
    arrivals: np.ndarray,
    clients: int,
    think: np.ndarray,
    warmup: int,
    marks: np.ndarray | None = None,
):
    """Run the validated, dtype-converted inputs; returns the tuple the Rust core returns."""
    # Plain Python lists: much faster to index than numpy scalars in a Python loop.
    kind_l = kind.tolist()
    c_l = servers.tolist()
    step_ptr_l, branch_ptr_l, visit_ptr_l = step_ptr.tolist(), branch_ptr.tolist(), visit_ptr.tolist()
    quorum_l, station_l, demand_l = quorum.tolist(), station.tolist(), demand.tolist()
    arrivals_l, think_l = arrivals.tolist(), think.tolist()
    n_req = len(step_ptr_l) - 1
    n_st = len(kind_l)

    start = [0.0] * n_req
    finish = [0.0] * n_req
    done = [0] * len(quorum_l)
    # Per-station state.
    n = [0] * n_st
    nbusy = [0] * n_st
    tint = [0.0] * n_st
    busy = [0.0] * n_st
    area = [0.0] * n_st
    comp = [0] * n_st
    res = [0.0] * n_st
    queue = [deque() for _ in range(n_st)]
    jobs: list[list] = [[] for _ in range(n_st)]
    vt = [0.0] * n_st
    tv = [0.0] * n_st
    ver = [0] * n_st
    any_hold = HOLD in kind_l
    held: dict[int, float] = {}  # HOLD visit -> arrival time at the pool, while held

    heap: list = []
    seq = 0
    events = 0
    now = 0.0
    stats_start = 0.0
    next_issue = 0
    # Snapshots at the m-th arrival for each m in `marks` (sorted; counted in arrival order,
    # which think times can make differ from request order): time, and every station's busy
    # and area integrals since t = 0 (the warm-up reset does not clear them).
    marks_l = [] if marks is None else [int(x) for x in marks]
    next_mark = 0
    n_arr = 0
    snap_t: list[float] = []
    snap_busy: list[list[float]] = []
    snap_area: list[list[float]] = []
    pre_busy = [0.0] * n_st
    pre_area = [0.0] * n_st

    def push(t: float, k: int, a, b) -> None:
        nonlocal seq
        heapq.heappush(heap, (t, seq, k, a, b))
        seq += 1

    def acc(s: int, t: float) -> None:
        dt = t - tint[s]
        m = n[s]
        c = c_l[s]
        area[s] += dt * m
        busy[s] += dt * (m if m < c else c)
        tint[s] = t

    def ps_resched(s: int, t: float) -> None:
        ver[s] += 1
        dt = (jobs[s][0][0] - vt[s]) / _rate(n[s], c_l[s])
        if dt < 0.0:
            dt = 0.0
        push(t + dt, PDEP, s, ver[s])

    def arrive(s: int, tok: tuple, t: float) -> None:
        nonlocal seq
        acc(s, t)
        c = c_l[s]
        if kind_l[s] == HOLD:
            n[s] += 1
            if nbusy[s] < c:
                nbusy[s] += 1
                push(t, GRANT, tok, None)
            else:
                queue[s].append(tok)
        elif kind_l[s] == 0:
            n[s] += 1
            if nbusy[s] < c:
                nbusy[s] += 1
                push(t + demand_l[tok[0]], FDEP, tok, None)
            else:
                queue[s].append(tok)
        else:
            n_old = n[s]
            if n_old > 0:
                vt[s] += (t - tv[s]) * _rate(n_old, c)
            tv[s] = t
            tag = vt[s] + demand_l[tok[0]]
            head_changed = n_old == 0 or tag < jobs[s][0][0]
            heapq.heappush(jobs[s], (tag, seq, tok))
            seq += 1
            n[s] = n_old + 1
            if head_changed or n_old + 1 > c:
                ps_resched(s, t)

    def start_step(st: int, i: int, t: float) -> bool:
        """Launch the step's branches; True when its quorum is already met."""
        empty = 0
        for b in range(branch_ptr_l[st], branch_ptr_l[st + 1]):
            v = visit_ptr_l[b]
            if v == visit_ptr_l[b + 1]:
                empty += 1
            else:
                arrive(station_l[v], (v, b, st, i, t), t)
        done[st] += empty
        return done[st] >= quorum_l[st]

    def request_done(i: int, t: float) -> None:
        nonlocal next_issue
        finish[i] = t
        if clients > 0 and next_issue < n_req:
            push(t + think_l[next_issue], ARR, next_issue, None)
            next_issue += 1

    def step_done(st: int, i: int, t: float) -> None:
        while True:
            if st + 1 < step_ptr_l[i + 1]:
                st += 1
                if not start_step(st, i, t):
                    return
            else:
                request_done(i, t)
                return

    def release(b: int, t: float) -> None:
        """The branch has ended: give back every token it holds, in visit order."""
        for v in range(visit_ptr_l[b], visit_ptr_l[b + 1]):
            s = station_l[v]
            if kind_l[s] != HOLD:
                continue
            acc(s, t)
            n[s] -= 1
            comp[s] += 1
            res[s] += t - held.pop(v)
            if queue[s]:
                push(t, GRANT, queue[s].popleft(), None)  # the token passes on, still in use
            else:
                nbusy[s] -= 1

    def advance(tok: tuple, t: float) -> None:
        v, b, st, i, _ = tok
        v += 1
        if v < visit_ptr_l[b + 1]:
            arrive(station_l[v], (v, b, st, i, t), t)
        else:
            if any_hold:
                release(b, t)
            done[st] += 1
            if done[st] == quorum_l[st]:
                step_done(st, i, t)

    if clients > 0:
        next_issue = min(clients, n_req)
        for j in range(next_issue):
            push(think_l[j], ARR, j, None)
    elif n_req:
        push(arrivals_l[0], ARR, 0, None)

    while heap:
        t, _, k, a, b = heapq.heappop(heap)
        if k == PDEP and b != ver[a]:
            continue  # superseded PS departure
        events += 1
        now = t
        if k == ARR:
            i = a
            start[i] = t
            if i == warmup and warmup > 0:
                for s in range(n_st):
                    acc(s, t)
                    pre_busy[s] += busy[s]
                    pre_area[s] += area[s]
                    busy[s] = area[s] = res[s] = 0.0
                    comp[s] = 0
                stats_start = t
            while next_mark < len(marks_l) and marks_l[next_mark] == n_arr:
                for s in range(n_st):
                    acc(s, t)
                snap_t.append(t)
                snap_busy.append([pre_busy[s] + busy[s] for s in range(n_st)])
                snap_area.append([pre_area[s] + area[s] for s in range(n_st)])
                next_mark += 1
            n_arr += 1
            if clients <= 0 and i + 1 < n_req:
                push(arrivals_l[i + 1], ARR, i + 1, None)
            st = step_ptr_l[i]
            if st == step_ptr_l[i + 1]:
                request_done(i, t)
            elif start_step(st, i, t):
                step_done(st, i, t)
        elif k == FDEP:
            tok = a
            s = station_l[tok[0]]
            acc(s, t)
            n[s] -= 1
            comp[s] += 1
            res[s] += t - tok[4]
            if queue[s]:
                nxt = queue[s].popleft()
                push(t + demand_l[nxt[0]], FDEP, nxt, None)
            else:
                nbusy[s] -= 1
            advance(tok, t)
        elif k == GRANT:
            tok = a
            held[tok[0]] = tok[4]
            advance(tok, t)
        else:
            s = a
            acc(s, t)
            vt[s] += (t - tv[s]) * _rate(n[s], c_l[s])
            tv[s] = t
            _, _, tok = heapq.heappop(jobs[s])
            n[s] -= 1
            comp[s] += 1
            res[s] += t - tok[4]
            if n[s] == 0:
                vt[s] = 0.0
            else:
                ps_resched(s, t)
            advance(tok, t)

    if held or any(queue[s] for s in range(n_st) if kind_l[s] == HOLD):
        raise ValueError(_DEADLOCK)
    if marks_l:  # a last snapshot at the end of the run closes the last interval
        for s in range(n_st):
            acc(s, now)
        snap_t.append(now)
        snap_busy.append([pre_busy[s] + busy[s] for s in range(n_st)])
        snap_area.append([pre_area[s] + area[s] for s in range(n_st)])
    return (
        np.array(start, dtype=np.float64),
        np.array(finish, dtype=np.float64),
        np.array(busy, dtype=np.float64),
        np.array(area, dtype=np.float64),
        np.array(comp, dtype=np.int64),
        np.array(res, dtype=np.float64),
        events,
        now,
        stats_start,
        np.array(snap_t, dtype=np.float64),
        np.array(snap_busy, dtype=np.float64).reshape(len(snap_t), n_st),
        np.array(snap_area, dtype=np.float64).reshape(len(snap_t), n_st),
    )

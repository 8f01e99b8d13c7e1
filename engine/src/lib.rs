//! Compiled core of storlab's discrete-event engine.
//!
//! It reproduces `storlab/sim/_pyengine.py` operation for operation (same events in the
//! same (time, seq) order, same floating-point arithmetic), so both backends give
//! identical results. Inputs are validated by `storlab.sim.engine._prepare`; this
//! module re-checks only what would make it index out of bounds.

use std::collections::VecDeque;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

mod md5part;
mod ringplace;

const ARR: u8 = 0;
const FDEP: u8 = 1;
const PDEP: u8 = 2;
const GRANT: u8 = 3;

/// Station kinds, as in `storlab.sim.engine`.
const K_FCFS: u8 = 0;
const K_PS: u8 = 1;
const K_HOLD: u8 = 2;

/// A branch in flight: its current visit, its branch (whose step and request the route
/// windows give) and when it reached the station. 16 bytes: heap entries stay small.
#[derive(Clone, Copy)]
struct Token {
    v: u32,
    b: u32,
    t_arr: f64,
}

/// The bits of a time or tag as an integer that orders as the value does: every time and
/// tag is finite and >= 0 (validated in `storlab.sim.engine`), where IEEE-754 bits order as
/// the numbers; -0.0 is mapped to 0.0's bits so it ties with 0.0, as `==` does in Python.
#[inline]
fn time_bits(t: f64) -> u128 {
    let b = t.to_bits();
    (if b == 1u64 << 63 { 0 } else { b }) as u128
}

/// Heap entry, 32 bytes: `k` is the time's bits << 64 | seq << 2 | kind for an event (ARR:
/// `tok.v` is the request; FDEP: `tok` is the visit in service; PDEP: `tok.v` is the
/// station, see `ps_resched`; GRANT: `tok` is a HOLD visit that has just obtained its
/// token), or the virtual finish tag's bits << 64 | seq for a PS job. One integer compare
/// orders entries on (time, seq) (seqs are unique, so no two keys are equal).
#[derive(Clone, Copy)]
struct Ev {
    k: u128,
    tok: Token,
}

impl Ev {
    #[inline]
    fn new(t: f64, low: u64, tok: Token) -> Ev {
        Ev { k: time_bits(t) << 64 | low as u128, tok }
    }
    #[inline]
    fn t(&self) -> f64 {
        f64::from_bits((self.k >> 64) as u64)
    }
    #[inline]
    fn low(&self) -> u64 {
        self.k as u64
    }
    #[inline]
    fn seq(&self) -> u64 {
        self.low() >> 2
    }
    #[inline]
    fn kind(&self) -> u8 {
        (self.low() & 3) as u8
    }
}

/// Children per node of `Heap`.
const ARITY: usize = 4;

/// A 4-ary min-heap on `Ev::k` (std's BinaryHeap compared (f64, u64) pairs in two steps):
/// half the levels of a binary heap, a node's children in two cache lines. Pops are the
/// event loop's hottest code; this took an engine-only run of 300,000 cluster700 requests
/// from 0.91 to 0.79 CPU s (binary: 0.80-0.83 s; the machine was loaded).
struct Heap {
    v: Vec<Ev>,
}

impl Heap {
    fn with_capacity(n: usize) -> Heap {
        Heap { v: Vec::with_capacity(n) }
    }
    #[inline]
    fn peek(&self) -> Option<&Ev> {
        self.v.first()
    }
    #[inline]
    fn is_empty(&self) -> bool {
        self.v.is_empty()
    }
    #[inline]
    fn push(&mut self, e: Ev) {
        let mut i = self.v.len();
        self.v.push(e);
        while i > 0 {
            let p = (i - 1) / ARITY;
            if self.v[p].k <= e.k {
                break;
            }
            self.v[i] = self.v[p];
            i = p;
        }
        self.v[i] = e;
    }
    #[inline]
    fn pop(&mut self) -> Option<Ev> {
        let last = self.v.pop()?;
        let n = self.v.len();
        if n == 0 {
            return Some(last);
        }
        let top = self.v[0];
        let mut i = 0;
        loop {
            let c = ARITY * i + 1;
            if c >= n {
                break;
            }
            // The smallest child, as a tournament of selects (no data-dependent branches:
            // which child wins is unpredictable, and mispredictions dominated the pops).
            let (m, mk) = if c + ARITY <= n {
                let w = &self.v[c..c + 4];
                let (a, ak) = if w[1].k < w[0].k { (c + 1, w[1].k) } else { (c, w[0].k) };
                let (b, bk) = if w[3].k < w[2].k { (c + 3, w[3].k) } else { (c + 2, w[2].k) };
                if bk < ak { (b, bk) } else { (a, ak) }
            } else {
                let mut m = c;
                for j in c + 1..n {
                    if self.v[j].k < self.v[m].k {
                        m = j;
                    }
                }
                (m, self.v[m].k)
            };
            if mk >= last.k {
                break;
            }
            self.v[i] = self.v[m];
            i = m;
        }
        self.v[i] = last;
        Some(top)
    }
}

#[derive(Clone, Default)]
struct Station {
    kind: u8,
    c: u32,
    n: u32,     // present (queued + in service; HOLD: waiters + holders)
    nbusy: u32, // FCFS: servers busy; HOLD: tokens in use
    tint: f64,  // last integral update
    busy: f64,
    area: f64,
    comp: i64,
    res: f64,
    vt: f64,       // PS virtual time
    tv: f64,       // PS: when vt was last advanced
    live: u64,     // PS: seq of the valid departure event
    live_t: f64,   // PS: its time
    carrier: u64,  // PS: seq of the heap entry standing for it (u64::MAX: none)
    carrier_t: f64,
}

#[inline]
fn rate(n: u32, c: u32) -> f64 {
    if n <= c {
        1.0
    } else {
        c as f64 / n as f64
    }
}

/// The engine's whole state. Routes arrive in chunks (`feed`); the arrays below hold only
/// the requests still in play, as windows over the run's global indices (`*_base` is the
/// global index of element 0), so memory stays flat however long the run. Events carry
/// global indices; a request leaves the window once it has finished and every branch it
/// started (background replicas included) has ended.
struct Sim {
    // Route windows: step_ptr per request (+1), branch_ptr/quorum/done per step,
    // visit_ptr per branch (+1 for ptrs), station/demand per visit; pointers hold global
    // indices.
    req_base: usize,
    step_base: usize,
    br_base: usize,
    v_base: usize,
    step_ptr: Vec<i64>,
    branch_ptr: Vec<i64>,
    quorum: Vec<i32>,
    done: Vec<u32>,
    step_req: Vec<u32>, // per step: its request
    br_step: Vec<u32>,  // per branch: its step
    visit_ptr: Vec<i64>,
    station: Vec<i32>,
    demand: Vec<f64>,
    arrivals: Vec<f64>,
    think: Vec<f64>,
    start: Vec<f64>,
    /// Per request: 1 until it finishes, plus its branches in flight; 0 = can be dropped.
    left: Vec<u32>,
    fed: usize,
    n_total: usize,
    closed: bool,
    warmup: usize,
    /// An arrival whose request has not been fed yet: (request, base time, reserved seq).
    /// Events stop until it is fed, so the (time, seq) order is the unchunked run's.
    pending: Option<(usize, f64, u64)>,
    /// Closed loop: first clients whose arrival (seq = request index) is not pushed yet.
    init_pushed: usize,
    init_n: usize,

    st: Vec<Station>,
    queues: Vec<VecDeque<Token>>, // FCFS waiting jobs; HOLD waiting branches
    any_hold: bool,
    /// Per visit (window like `station`): arrival time at the pool while its HOLD token is
    /// held (a vector, not a hash map: no hashing per grant and release).
    held_t: Vec<f64>,
    n_held: usize,
    jobs: Vec<Heap>,
    heap: Heap,
    /// Events pushed for the current time with a fresh seq (token grants, zero think
    /// times, zero demands): they come after every heap entry of that time with a smaller
    /// seq and before any later time, in push order, so a FIFO beside the heap keeps the
    /// (time, seq) order without a heap push and pop each.
    imm: VecDeque<Ev>,
    seq: u64,
    next_issue: usize,
    events: u64,
    now: f64,
    stats_start: f64,
    // Snapshots at the m-th arrival for m in `marks` (arrival order): time and every
    // station's busy/area integrals since t = 0 (`pre_*` keep what the warm-up reset cleared).
    marks: Vec<i64>,
    next_mark: usize,
    n_arr: i64,
    snap_t: Vec<f64>,
    snap_busy: Vec<f64>,
    snap_area: Vec<f64>,
    pre_busy: Vec<f64>,
    pre_area: Vec<f64>,
    // Requests finished since the last `take_out`: index, arrival, finish.
    out_i: Vec<i64>,
    out_s: Vec<f64>,
    out_f: Vec<f64>,
}

impl Sim {
    fn new(kind: &[i8], servers: &[i32], clients: i64, warmup: i64, marks: Vec<i64>, n_total: usize) -> Sim {
        let n_st = kind.len();
        let stations: Vec<Station> = (0..n_st)
            .map(|s| Station { kind: kind[s] as u8, c: servers[s] as u32, live: u64::MAX, carrier: u64::MAX, ..Default::default() })
            .collect();
        let closed = clients > 0;
        let init_n = if closed { (clients as usize).min(n_total) } else { 0 };
        // Reserved sequence numbers, as the unchunked run pushes them first: closed loop,
        // one per initial client (seq = its index); open loop, seq 0 for the first arrival.
        let (seq, pending) = if closed {
            (init_n as u64, None)
        } else if n_total > 0 {
            (1, Some((0usize, 0.0, 0u64)))
        } else {
            (0, None)
        };
        Sim {
            req_base: 0,
            step_base: 0,
            br_base: 0,
            v_base: 0,
            step_ptr: vec![0],
            branch_ptr: vec![0],
            quorum: Vec::new(),
            done: Vec::new(),
            step_req: Vec::new(),
            br_step: Vec::new(),
            visit_ptr: vec![0],
            station: Vec::new(),
            demand: Vec::new(),
            arrivals: Vec::new(),
            think: Vec::new(),
            start: Vec::new(),
            left: Vec::new(),
            fed: 0,
            n_total,
            closed,
            warmup: warmup.max(0) as usize,
            pending,
            init_pushed: 0,
            init_n,
            st: stations,
            queues: vec![VecDeque::new(); n_st],
            any_hold: kind.iter().any(|&k| k as u8 == K_HOLD),
            held_t: Vec::new(),
            n_held: 0,
            jobs: (0..n_st).map(|_| Heap::with_capacity(0)).collect(),
            heap: Heap::with_capacity(1024),
            imm: VecDeque::with_capacity(256),
            seq,
            next_issue: init_n,
            events: 0,
            now: 0.0,
            stats_start: 0.0,
            snap_t: Vec::with_capacity(marks.len()),
            snap_busy: Vec::with_capacity(marks.len() * n_st),
            snap_area: Vec::with_capacity(marks.len() * n_st),
            marks,
            next_mark: 0,
            n_arr: 0,
            pre_busy: vec![0.0; n_st],
            pre_area: vec![0.0; n_st],
            out_i: Vec::new(),
            out_s: Vec::new(),
            out_f: Vec::new(),
        }
    }

    // Window accessors: global index -> element.
    #[inline]
    fn sp(&self, i: usize) -> usize {
        self.step_ptr[i - self.req_base] as usize
    }
    #[inline]
    fn bp(&self, s: usize) -> usize {
        self.branch_ptr[s - self.step_base] as usize
    }
    #[inline]
    fn vp(&self, b: usize) -> usize {
        self.visit_ptr[b - self.br_base] as usize
    }
    #[inline]
    fn station_of(&self, v: usize) -> usize {
        self.station[v - self.v_base] as usize
    }

    #[inline]
    fn push_seq(&mut self, t: f64, kind: u8, tok: Token, seq: u64) {
        self.heap.push(Ev::new(t, seq << 2 | kind as u64, tok));
    }

    #[inline]
    fn push(&mut self, t: f64, kind: u8, tok: Token) -> u64 {
        let seq = self.seq;
        let ev = Ev::new(t, seq << 2 | kind as u64, tok);
        if t == self.now {
            self.imm.push_back(ev);
        } else {
            self.heap.push(ev);
        }
        self.seq += 1;
        seq
    }

    #[inline]
    fn arr_tok(i: usize) -> Token {
        Token { v: i as u32, b: 0, t_arr: 0.0 }
    }

    #[inline]
    fn acc(s: &mut Station, t: f64) {
        let dt = t - s.tint;
        let m = s.n;
        s.area += dt * m as f64;
        s.busy += dt * (if m < s.c { m } else { s.c }) as f64;
        s.tint = t;
    }

    /// The station's next departure is now at `t + dt`, as event (time, seq) with a fresh
    /// seq. An arrival usually delays the departure: rather than a heap entry per change
    /// (most of them superseded), an earlier entry already in the heap (the carrier) stands
    /// for it and is re-pushed at the true (time, seq) when it comes up. Events still come
    /// out in exactly the (time, seq) order of one entry per change.
    fn ps_resched(&mut self, s: usize, t: f64) {
        let head = self.jobs[s].peek().expect("PS station with jobs").t();
        let stn = &self.st[s];
        let mut dt = (head - stn.vt) / rate(stn.n, stn.c);
        if dt < 0.0 {
            dt = 0.0;
        }
        let (tn, seq) = (t + dt, self.seq);
        self.seq += 1;
        let stn = &mut self.st[s];
        stn.live = seq;
        stn.live_t = tn;
        if stn.carrier == u64::MAX || stn.carrier_t > tn {
            stn.carrier = seq;
            stn.carrier_t = tn;
            let tok = Token { v: s as u32, b: 0, t_arr: 0.0 };
            self.push_seq(tn, PDEP, tok, seq);
        }
    }

    fn arrive(&mut self, s: usize, tok: Token, t: f64) {
        let d = self.demand[tok.v as usize - self.v_base];
        let stn = &mut self.st[s];
        Self::acc(stn, t);
        let c = stn.c;
        if stn.kind == K_HOLD {
            // Granted through the heap, never inline (see _pyengine.py).
            stn.n += 1;
            if stn.nbusy < c {
                stn.nbusy += 1;
                self.push(t, GRANT, tok);
            } else {
                self.queues[s].push_back(tok);
            }
        } else if stn.kind == K_FCFS {
            stn.n += 1;
            if stn.nbusy < c {
                stn.nbusy += 1;
                self.push(t + d, FDEP, tok);
            } else {
                self.queues[s].push_back(tok);
            }
        } else {
            let n_old = stn.n;
            if n_old > 0 {
                stn.vt += (t - stn.tv) * rate(n_old, c);
            }
            stn.tv = t;
            let tag = stn.vt + d;
            stn.n = n_old + 1;
            let head_changed = n_old == 0 || tag < self.jobs[s].peek().map_or(f64::INFINITY, |j| j.t());
            let seq = self.seq;
            self.jobs[s].push(Ev::new(tag, seq, tok));
            self.seq += 1;
            if head_changed || n_old + 1 > c {
                self.ps_resched(s, t);
            }
        }
    }

    /// Launch a step's branches; true when its quorum is already met (empty branches).
    fn start_step(&mut self, st: usize, i: usize, t: f64) -> bool {
        let mut empty = 0u32;
        for b in self.bp(st)..self.bp(st + 1) {
            let v = self.vp(b);
            if v == self.vp(b + 1) {
                empty += 1;
            } else {
                self.left[i - self.req_base] += 1;
                let tok = Token { v: v as u32, b: b as u32, t_arr: t };
                self.arrive(self.station_of(v), tok, t);
            }
        }
        let k = st - self.step_base;
        self.done[k] += empty;
        self.done[k] as i64 >= self.quorum[k] as i64
    }

    fn request_done(&mut self, i: usize, t: f64) {
        self.out_i.push(i as i64);
        self.out_s.push(self.start[i - self.req_base]);
        self.out_f.push(t);
        self.left[i - self.req_base] -= 1;
        if self.closed && self.next_issue < self.n_total {
            let k = self.next_issue;
            if k < self.fed {
                let th = self.think[k - self.req_base];
                self.push(t + th, ARR, Self::arr_tok(k));
            } else {
                // Its think time is in a chunk not fed yet: keep its place in the order.
                self.pending = Some((k, t, self.seq));
                self.seq += 1;
            }
            self.next_issue += 1;
        }
    }

    fn step_done(&mut self, mut st: usize, i: usize, t: f64) {
        loop {
            if st + 1 < self.sp(i + 1) {
                st += 1;
                if !self.start_step(st, i, t) {
                    return;
                }
            } else {
                self.request_done(i, t);
                return;
            }
        }
    }

    /// The branch has ended: give back every token it holds, in visit order.
    fn release(&mut self, b: usize, t: f64) {
        for v in self.vp(b)..self.vp(b + 1) {
            let s = self.station_of(v);
            if self.st[s].kind != K_HOLD {
                continue;
            }
            let t_arr = self.held_t[v - self.v_base];
            self.n_held -= 1;
            let stn = &mut self.st[s];
            Self::acc(stn, t);
            stn.n -= 1;
            stn.comp += 1;
            stn.res += t - t_arr;
            if let Some(nxt) = self.queues[s].pop_front() {
                self.push(t, GRANT, nxt); // the token passes on, still in use
            } else {
                self.st[s].nbusy -= 1;
            }
        }
    }

    fn advance(&mut self, tok: Token, t: f64) {
        let v = tok.v as usize + 1;
        if v < self.vp(tok.b as usize + 1) {
            let nt = Token { v: v as u32, t_arr: t, ..tok };
            self.arrive(self.station_of(v), nt, t);
        } else {
            if self.any_hold {
                self.release(tok.b as usize, t);
            }
            let st = self.br_step[tok.b as usize - self.br_base] as usize;
            let i = self.step_req[st - self.step_base] as usize;
            self.left[i - self.req_base] -= 1;
            let k = st - self.step_base;
            self.done[k] += 1;
            if self.done[k] as i64 == self.quorum[k] as i64 {
                self.step_done(st, i, t);
            }
        }
    }

    /// Push the arrivals that waited for their request's chunk.
    fn release_pending(&mut self) {
        while self.init_pushed < self.init_n && self.init_pushed < self.fed {
            let j = self.init_pushed;
            let th = self.think[j - self.req_base];
            self.push_seq(th, ARR, Self::arr_tok(j), j as u64);
            self.init_pushed += 1;
        }
        if let Some((k, tb, seq)) = self.pending {
            if k < self.fed {
                let t = if self.closed { tb + self.think[k - self.req_base] } else { self.arrivals[k - self.req_base] };
                self.push_seq(t, ARR, Self::arr_tok(k), seq);
                self.pending = None;
            }
        }
    }

    /// Drop the leading requests that are done with (finished, no branch in flight).
    fn compact(&mut self) {
        let mut r = 0;
        while r < self.left.len() && self.left[r] == 0 {
            r += 1;
        }
        // After every chunk: waiting until more of the window is dead saved no measurable
        // time and raised the peak memory (bench_sim: 1.19x from 1e5 to 1e6, not 1.05x).
        if r == 0 {
            return;
        }
        let s_end = self.step_ptr[r] as usize; // global index of the first step kept
        let b_end = self.branch_ptr[s_end - self.step_base] as usize;
        let v_end = self.visit_ptr[b_end - self.br_base] as usize;
        let (ds, db, dv) = (s_end - self.step_base, b_end - self.br_base, v_end - self.v_base);
        self.step_ptr.drain(..r);
        self.start.drain(..r);
        self.left.drain(..r);
        self.think.drain(..r.min(self.think.len()));
        self.arrivals.drain(..r.min(self.arrivals.len()));
        self.branch_ptr.drain(..ds);
        self.quorum.drain(..ds);
        self.done.drain(..ds);
        self.step_req.drain(..ds);
        self.visit_ptr.drain(..db);
        self.br_step.drain(..db);
        self.station.drain(..dv);
        self.demand.drain(..dv);
        if self.any_hold {
            self.held_t.drain(..dv);
        }
        self.req_base += r;
        self.step_base = s_end;
        self.br_base = b_end;
        self.v_base = v_end;
    }

    fn run(&mut self) {
        while self.pending.is_none() && self.init_pushed == self.init_n {
            let from_imm = match (self.imm.front(), self.heap.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(a), Some(h)) => a.k < h.k,
            };
            let ev = if from_imm { self.imm.pop_front().unwrap() } else { self.heap.pop().unwrap() };
            let t = ev.t();
            let (kind, evseq) = (ev.kind(), ev.seq());
            if kind == PDEP {
                let stn = &mut self.st[ev.tok.v as usize];
                if stn.carrier == evseq {
                    if stn.live != evseq {
                        // The carrier of a later departure: put the real one in its place.
                        stn.carrier = stn.live;
                        stn.carrier_t = stn.live_t;
                        let (lt, ls) = (stn.live_t, stn.live);
                        self.push_seq(lt, PDEP, ev.tok, ls);
                        continue;
                    }
                    stn.carrier = u64::MAX;
                } else {
                    continue; // superseded by an earlier departure
                }
            }
            self.events += 1;
            self.now = t;
            match kind {
                ARR => {
                    let i = ev.tok.v as usize;
                    self.start[i - self.req_base] = t;
                    if i == self.warmup && self.warmup > 0 {
                        for (k, s) in self.st.iter_mut().enumerate() {
                            Self::acc(s, t);
                            self.pre_busy[k] += s.busy;
                            self.pre_area[k] += s.area;
                            s.busy = 0.0;
                            s.area = 0.0;
                            s.res = 0.0;
                            s.comp = 0;
                        }
                        self.stats_start = t;
                    }
                    while self.next_mark < self.marks.len() && self.marks[self.next_mark] == self.n_arr {
                        self.snap_t.push(t);
                        for (k, s) in self.st.iter_mut().enumerate() {
                            Self::acc(s, t);
                            self.snap_busy.push(self.pre_busy[k] + s.busy);
                            self.snap_area.push(self.pre_area[k] + s.area);
                        }
                        self.next_mark += 1;
                    }
                    self.n_arr += 1;
                    if !self.closed && i + 1 < self.n_total {
                        if i + 1 < self.fed {
                            let a = self.arrivals[i + 1 - self.req_base];
                            self.push(a, ARR, Self::arr_tok(i + 1));
                        } else {
                            self.pending = Some((i + 1, 0.0, self.seq));
                            self.seq += 1;
                        }
                    }
                    let st = self.sp(i);
                    if st == self.sp(i + 1) {
                        self.request_done(i, t);
                    } else if self.start_step(st, i, t) {
                        self.step_done(st, i, t);
                    }
                }
                FDEP => {
                    let tok = ev.tok;
                    let s = self.station_of(tok.v as usize);
                    let stn = &mut self.st[s];
                    Self::acc(stn, t);
                    stn.n -= 1;
                    stn.comp += 1;
                    stn.res += t - tok.t_arr;
                    if let Some(nxt) = self.queues[s].pop_front() {
                        let d = self.demand[nxt.v as usize - self.v_base];
                        self.push(t + d, FDEP, nxt);
                    } else {
                        self.st[s].nbusy -= 1;
                    }
                    self.advance(tok, t);
                }
                GRANT => {
                    self.held_t[ev.tok.v as usize - self.v_base] = ev.tok.t_arr;
                    self.n_held += 1;
                    self.advance(ev.tok, t);
                }
                _ => {
                    let s = ev.tok.v as usize;
                    let stn = &mut self.st[s];
                    Self::acc(stn, t);
                    stn.vt += (t - stn.tv) * rate(stn.n, stn.c);
                    stn.tv = t;
                    let job = self.jobs[s].pop().expect("PS departure with no job");
                    let stn = &mut self.st[s];
                    stn.n -= 1;
                    stn.comp += 1;
                    stn.res += t - job.tok.t_arr;
                    if stn.n == 0 {
                        stn.vt = 0.0;
                    } else {
                        self.ps_resched(s, t);
                    }
                    self.advance(job.tok, t);
                }
            }
        }
    }

    /// Append one chunk of routes (local CSR offsets, as `Routes` holds them) and its
    /// requests' arrival and think times.
    #[allow(clippy::too_many_arguments)]
    fn append(&mut self, step_ptr: &[i64], branch_ptr: &[i64], quorum: &[i32], visit_ptr: &[i64],
              station: &[i32], demand: &[f64], arrivals: &[f64], think: &[f64], n_st: usize) -> PyResult<()> {
        check_ptr(step_ptr, branch_ptr.len().saturating_sub(1), "step_ptr")?;
        check_ptr(branch_ptr, visit_ptr.len().saturating_sub(1), "branch_ptr")?;
        check_ptr(visit_ptr, station.len(), "visit_ptr")?;
        let n = step_ptr.len() - 1;
        if quorum.len() != branch_ptr.len() - 1 || demand.len() != station.len() {
            return Err(PyValueError::new_err("quorum/demand lengths do not match the routes"));
        }
        if station.iter().any(|&s| s < 0 || s as usize >= n_st) {
            return Err(PyValueError::new_err("station index out of range"));
        }
        if self.fed + n > self.n_total {
            return Err(PyValueError::new_err(format!(
                "fed {} requests, more than the {} announced", self.fed + n, self.n_total)));
        }
        if think.len() != n || (!self.closed && arrivals.len() != n) {
            return Err(PyValueError::new_err("arrivals/think must have one entry per request"));
        }
        let (s0, b0, v0) = (
            *self.step_ptr.last().unwrap(),
            *self.branch_ptr.last().unwrap(),
            *self.visit_ptr.last().unwrap(),
        );
        let lim = u32::MAX as i64;
        if v0 + station.len() as i64 >= lim || b0 + quorum.len() as i64 >= lim
            || s0 + quorum.len() as i64 >= lim || (self.fed + n) as i64 >= lim {
            return Err(PyValueError::new_err("too many requests, steps or visits for one run (max 2^32 - 1 each)"));
        }
        self.step_ptr.extend(step_ptr[1..].iter().map(|&x| x + s0));
        self.branch_ptr.extend(branch_ptr[1..].iter().map(|&x| x + b0));
        self.visit_ptr.extend(visit_ptr[1..].iter().map(|&x| x + v0));
        self.quorum.extend_from_slice(quorum);
        let r0 = self.fed as u32;
        for (k, w) in step_ptr.windows(2).enumerate() {
            self.step_req.extend(std::iter::repeat(r0 + k as u32).take((w[1] - w[0]) as usize));
        }
        for (k, w) in branch_ptr.windows(2).enumerate() {
            self.br_step.extend(std::iter::repeat((s0 + k as i64) as u32).take((w[1] - w[0]) as usize));
        }
        self.done.extend(std::iter::repeat(0).take(quorum.len()));
        self.station.extend_from_slice(station);
        self.demand.extend_from_slice(demand);
        if self.any_hold {
            self.held_t.extend(std::iter::repeat(0.0).take(demand.len()));
        }
        if !self.closed {
            self.arrivals.extend_from_slice(arrivals);
        }
        self.think.extend_from_slice(think);
        self.start.extend(std::iter::repeat(0.0).take(n));
        self.left.extend(std::iter::repeat(1).take(n));
        self.fed += n;
        Ok(())
    }

    fn deadlocked(&self) -> bool {
        self.n_held > 0 || self.queues.iter().zip(&self.st).any(|(q, s)| s.kind == K_HOLD && !q.is_empty())
    }

    /// After the last event: the closing snapshot and the station totals.
    fn close(&mut self) -> PyResult<()> {
        if self.fed < self.n_total {
            return Err(PyValueError::new_err(format!(
                "finish() after {} of {} requests were fed", self.fed, self.n_total)));
        }
        if self.deadlocked() || !self.heap.is_empty() || !self.imm.is_empty() {
            return Err(PyValueError::new_err(
                "deadlock: branches still wait for HOLD tokens when no event is left \
                 (a branch takes tokens of pools in an order others reverse, or more than a pool has)",
            ));
        }
        if !self.marks.is_empty() {
            // A last snapshot at the end of the run closes the last interval.
            let now = self.now;
            self.snap_t.push(now);
            for (k, s) in self.st.iter_mut().enumerate() {
                Sim::acc(s, now);
                self.snap_busy.push(self.pre_busy[k] + s.busy);
                self.snap_area.push(self.pre_area[k] + s.area);
            }
        }
        Ok(())
    }

    fn take_out(&mut self) -> (Vec<i64>, Vec<f64>, Vec<f64>) {
        (std::mem::take(&mut self.out_i), std::mem::take(&mut self.out_s), std::mem::take(&mut self.out_f))
    }
}

fn slice<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, name: &str) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| PyValueError::new_err(format!("{name} must be a contiguous 1-D array")))
}

fn check_ptr(p: &[i64], n: usize, name: &str) -> PyResult<()> {
    if p.is_empty() || p[0] != 0 || p[p.len() - 1] as usize != n || p.windows(2).any(|w| w[1] < w[0]) {
        return Err(PyValueError::new_err(format!("{name} is not a valid offset array")));
    }
    Ok(())
}

fn check_stations(kind: &[i8], servers: &[i32], marks: &[i64]) -> PyResult<()> {
    if marks.windows(2).any(|w| w[1] <= w[0]) || marks.iter().any(|&m| m < 0) {
        return Err(PyValueError::new_err("marks must be increasing and >= 0"));
    }
    if kind.iter().any(|&k| !(k as u8 == K_FCFS || k as u8 == K_PS || k as u8 == K_HOLD) || k < 0) {
        return Err(PyValueError::new_err("kind must be 0 (FCFS), 1 (PS) or 2 (HOLD)"));
    }
    if servers.len() != kind.len() || servers.iter().any(|&c| c < 1) {
        return Err(PyValueError::new_err("servers must have one entry >= 1 per station"));
    }
    Ok(())
}

type Totals<'py> = (
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<f64>>,
    u64,
    f64,
    f64,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
);

fn totals<'py>(py: Python<'py>, sim: &mut Sim) -> Totals<'py> {
    let busy: Vec<f64> = sim.st.iter().map(|s| s.busy).collect();
    let area: Vec<f64> = sim.st.iter().map(|s| s.area).collect();
    let comp: Vec<i64> = sim.st.iter().map(|s| s.comp).collect();
    let res: Vec<f64> = sim.st.iter().map(|s| s.res).collect();
    (
        busy.into_pyarray(py),
        area.into_pyarray(py),
        comp.into_pyarray(py),
        res.into_pyarray(py),
        sim.events,
        sim.now,
        sim.stats_start,
        std::mem::take(&mut sim.snap_t).into_pyarray(py),
        std::mem::take(&mut sim.snap_busy).into_pyarray(py),
        std::mem::take(&mut sim.snap_area).into_pyarray(py),
    )
}

type Out<'py> = (
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<f64>>,
    u64,
    f64,
    f64,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
);

/// simulate(kind, servers, step_ptr, branch_ptr, quorum, visit_ptr, station, demand,
/// arrivals, clients, think, warmup, marks) -> (start, finish, busy, area, completions,
/// residence, events, sim_time, stats_start, snap_t, snap_busy, snap_area). `clients <= 0`
/// means open loop; snap_busy/snap_area are [len(snap_t), n_stations], row-major.
/// The whole run as one chunk of a `Stream`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn simulate<'py>(
    py: Python<'py>,
    kind: PyReadonlyArray1<'py, i8>,
    servers: PyReadonlyArray1<'py, i32>,
    step_ptr: PyReadonlyArray1<'py, i64>,
    branch_ptr: PyReadonlyArray1<'py, i64>,
    quorum: PyReadonlyArray1<'py, i32>,
    visit_ptr: PyReadonlyArray1<'py, i64>,
    station: PyReadonlyArray1<'py, i32>,
    demand: PyReadonlyArray1<'py, f64>,
    arrivals: PyReadonlyArray1<'py, f64>,
    clients: i64,
    think: PyReadonlyArray1<'py, f64>,
    warmup: i64,
    marks: PyReadonlyArray1<'py, i64>,
) -> PyResult<Out<'py>> {
    let kind = slice(&kind, "kind")?;
    let servers = slice(&servers, "servers")?;
    let step_ptr = slice(&step_ptr, "step_ptr")?;
    let marks = slice(&marks, "marks")?;
    check_stations(kind, servers, marks)?;
    let n_req = step_ptr.len().saturating_sub(1);
    let mut sim = Sim::new(kind, servers, clients, warmup, marks.to_vec(), n_req);
    sim.append(step_ptr, slice(&branch_ptr, "branch_ptr")?, slice(&quorum, "quorum")?,
               slice(&visit_ptr, "visit_ptr")?, slice(&station, "station")?,
               slice(&demand, "demand")?, slice(&arrivals, "arrivals")?,
               slice(&think, "think")?, kind.len())?;
    sim.release_pending();
    py.detach(|| sim.run());
    sim.close()?;
    let (idx, s, f) = sim.take_out();
    let mut start = vec![0.0; n_req];
    let mut finish = vec![0.0; n_req];
    for k in 0..idx.len() {
        start[idx[k] as usize] = s[k];
        finish[idx[k] as usize] = f[k];
    }
    let (busy, area, comp, res, events, now, stats_start, snap_t, snap_busy, snap_area) = totals(py, &mut sim);
    Ok((start.into_pyarray(py), finish.into_pyarray(py), busy, area, comp, res, events, now,
        stats_start, snap_t, snap_busy, snap_area))
}

type Done<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

/// A run fed its routes chunk by chunk: Stream(kind, servers, clients, warmup, marks,
/// n_requests), then feed(...) per chunk of requests in order (local CSR offsets), then
/// finish(). Events are processed as far as the requests fed allow; the result is the
/// unchunked run's exactly, whatever the chunk sizes, in memory bounded by the requests in
/// flight.
#[pyclass]
struct Stream {
    sim: Sim,
    n_st: usize,
}

#[pymethods]
impl Stream {
    #[new]
    fn new(kind: PyReadonlyArray1<'_, i8>, servers: PyReadonlyArray1<'_, i32>, clients: i64,
           warmup: i64, marks: PyReadonlyArray1<'_, i64>, n_requests: i64) -> PyResult<Self> {
        let kind = slice(&kind, "kind")?;
        let servers = slice(&servers, "servers")?;
        let marks = slice(&marks, "marks")?;
        check_stations(kind, servers, marks)?;
        if n_requests < 0 {
            return Err(PyValueError::new_err("n_requests must be >= 0"));
        }
        Ok(Stream { sim: Sim::new(kind, servers, clients, warmup, marks.to_vec(), n_requests as usize), n_st: kind.len() })
    }

    /// Add the next chunk of requests and run; returns the requests finished meanwhile as
    /// (index, arrival, finish), in finishing order.
    #[allow(clippy::too_many_arguments)]
    fn feed<'py>(&mut self, py: Python<'py>, step_ptr: PyReadonlyArray1<'py, i64>,
                 branch_ptr: PyReadonlyArray1<'py, i64>, quorum: PyReadonlyArray1<'py, i32>,
                 visit_ptr: PyReadonlyArray1<'py, i64>, station: PyReadonlyArray1<'py, i32>,
                 demand: PyReadonlyArray1<'py, f64>, arrivals: PyReadonlyArray1<'py, f64>,
                 think: PyReadonlyArray1<'py, f64>) -> PyResult<Done<'py>> {
        let sim = &mut self.sim;
        sim.compact();
        sim.append(slice(&step_ptr, "step_ptr")?, slice(&branch_ptr, "branch_ptr")?,
                   slice(&quorum, "quorum")?, slice(&visit_ptr, "visit_ptr")?,
                   slice(&station, "station")?, slice(&demand, "demand")?,
                   slice(&arrivals, "arrivals")?, slice(&think, "think")?, self.n_st)?;
        sim.release_pending();
        py.detach(|| sim.run());
        let (i, s, f) = sim.take_out();
        Ok((i.into_pyarray(py), s.into_pyarray(py), f.into_pyarray(py)))
    }

    /// After the last chunk: (busy, area, completions, residence, events, sim_time,
    /// stats_start, snap_t, snap_busy, snap_area), as `simulate` returns them.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Totals<'py>> {
        self.sim.close()?;
        Ok(totals(py, &mut self.sim))
    }

    /// Requests held in the engine's window (not yet done with): for memory tests.
    #[getter]
    fn held_requests(&self) -> usize {
        self.sim.left.len()
    }

    /// Times of the marked arrivals reached so far.
    #[getter]
    fn snap_times<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.sim.snap_t.clone().into_pyarray(py)
    }

    /// Simulated time of the last event processed.
    #[getter]
    fn now(&self) -> f64 {
        self.sim.now
    }
}

#[pymodule]
fn storlab_engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(md5part::numbered_partitions, m)?)?;
    m.add_function(wrap_pyfunction!(ringplace::ring_place, m)?)?;
    m.add_function(wrap_pyfunction!(ringplace::py_shuffle, m)?)?;
    m.add_class::<Stream>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

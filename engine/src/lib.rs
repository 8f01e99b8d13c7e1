//! Compiled core of storlab's discrete-event engine.
//!
//! It reproduces `storlab/sim/_pyengine.py` operation for operation (same events in the
//! same (time, seq) order, same floating-point arithmetic), so both backends give
//! identical results. Inputs are validated by `storlab.sim.engine._prepare`; this
//! module re-checks only what would make it index out of bounds.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

mod ma;

const ARR: u8 = 0;
const FDEP: u8 = 1;
const PDEP: u8 = 2;
const GRANT: u8 = 3;

/// Station kinds, as in `storlab.sim.engine`.
const K_FCFS: u8 = 0;
const K_PS: u8 = 1;
const K_HOLD: u8 = 2;

/// A branch in flight: its current visit, where it belongs, and when it reached the station.
#[derive(Clone, Copy)]
struct Token {
    v: u32,
    b: u32,
    st: u32,
    i: u32,
    t_arr: f64,
}

/// Heap entry. ARR: `tok.i` is the request; FDEP: `tok` is the visit in service;
/// PDEP: `tok.v` is the station (valid only if `seq` is the station's live departure);
/// GRANT: `tok` is a HOLD visit that has just obtained its token.
struct Ev {
    t: f64,
    seq: u64,
    kind: u8,
    tok: Token,
}

/// Min-heap order on (t, seq); `<`/`>` rather than `total_cmp` so -0.0 == 0.0 as in Python.
#[inline]
fn cmp_key(t1: f64, s1: u64, t2: f64, s2: u64) -> Ordering {
    if t1 < t2 {
        Ordering::Less
    } else if t1 > t2 {
        Ordering::Greater
    } else {
        s1.cmp(&s2)
    }
}

impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        self.seq == o.seq
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    fn cmp(&self, o: &Self) -> Ordering {
        cmp_key(o.t, o.seq, self.t, self.seq) // reversed: BinaryHeap is a max-heap
    }
}

/// A job at a PS station, keyed by its virtual finish tag.
struct Job {
    tag: f64,
    seq: u64,
    tok: Token,
}
impl PartialEq for Job {
    fn eq(&self, o: &Self) -> bool {
        self.seq == o.seq
    }
}
impl Eq for Job {}
impl PartialOrd for Job {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Job {
    fn cmp(&self, o: &Self) -> Ordering {
        cmp_key(o.tag, o.seq, self.tag, self.seq)
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
}

#[inline]
fn rate(n: u32, c: u32) -> f64 {
    if n <= c {
        1.0
    } else {
        c as f64 / n as f64
    }
}

struct Sim<'a> {
    step_ptr: &'a [i64],
    branch_ptr: &'a [i64],
    quorum: &'a [i32],
    visit_ptr: &'a [i64],
    station: &'a [i32],
    demand: &'a [f64],
    arrivals: &'a [f64],
    think: &'a [f64],
    closed: bool,
    clients: usize,
    warmup: usize,
    n_req: usize,

    st: Vec<Station>,
    queues: Vec<VecDeque<Token>>, // FCFS waiting jobs; HOLD waiting branches
    any_hold: bool,
    held: HashMap<u32, f64>, // HOLD visit -> arrival time at the pool, while its token is held
    jobs: Vec<BinaryHeap<Job>>,
    heap: BinaryHeap<Ev>,
    seq: u64,
    done: Vec<u32>,
    start: Vec<f64>,
    finish: Vec<f64>,
    next_issue: usize,
    events: u64,
    now: f64,
    stats_start: f64,
    // Snapshots at the m-th arrival for m in `marks` (arrival order): time and every
    // station's busy/area integrals since t = 0 (`pre_*` keep what the warm-up reset cleared).
    marks: &'a [i64],
    next_mark: usize,
    n_arr: i64,
    snap_t: Vec<f64>,
    snap_busy: Vec<f64>,
    snap_area: Vec<f64>,
    pre_busy: Vec<f64>,
    pre_area: Vec<f64>,
}

impl<'a> Sim<'a> {
    #[inline]
    fn push(&mut self, t: f64, kind: u8, tok: Token) -> u64 {
        let seq = self.seq;
        self.heap.push(Ev { t, seq, kind, tok });
        self.seq += 1;
        seq
    }

    #[inline]
    fn acc(s: &mut Station, t: f64) {
        let dt = t - s.tint;
        let m = s.n;
        s.area += dt * m as f64;
        s.busy += dt * (if m < s.c { m } else { s.c }) as f64;
        s.tint = t;
    }

    fn ps_resched(&mut self, s: usize, t: f64) {
        let head = self.jobs[s].peek().expect("PS station with jobs").tag;
        let stn = &self.st[s];
        let mut dt = (head - stn.vt) / rate(stn.n, stn.c);
        if dt < 0.0 {
            dt = 0.0;
        }
        let tok = Token { v: s as u32, b: 0, st: 0, i: 0, t_arr: 0.0 };
        let seq = self.push(t + dt, PDEP, tok);
        self.st[s].live = seq;
    }

    fn arrive(&mut self, s: usize, tok: Token, t: f64) {
        let d = self.demand[tok.v as usize];
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
            let head_changed = n_old == 0 || tag < self.jobs[s].peek().map_or(f64::INFINITY, |j| j.tag);
            let seq = self.seq;
            self.jobs[s].push(Job { tag, seq, tok });
            self.seq += 1;
            if head_changed || n_old + 1 > c {
                self.ps_resched(s, t);
            }
        }
    }

    /// Launch a step's branches; true when its quorum is already met (empty branches).
    fn start_step(&mut self, st: usize, i: usize, t: f64) -> bool {
        let mut empty = 0u32;
        for b in self.branch_ptr[st] as usize..self.branch_ptr[st + 1] as usize {
            let v = self.visit_ptr[b] as usize;
            if v == self.visit_ptr[b + 1] as usize {
                empty += 1;
            } else {
                let tok = Token { v: v as u32, b: b as u32, st: st as u32, i: i as u32, t_arr: t };
                self.arrive(self.station[v] as usize, tok, t);
            }
        }
        self.done[st] += empty;
        self.done[st] as i64 >= self.quorum[st] as i64
    }

    fn request_done(&mut self, i: usize, t: f64) {
        self.finish[i] = t;
        if self.closed && self.next_issue < self.n_req {
            let k = self.next_issue;
            let tok = Token { v: 0, b: 0, st: 0, i: k as u32, t_arr: 0.0 };
            self.push(t + self.think[k], ARR, tok);
            self.next_issue += 1;
        }
    }

    fn step_done(&mut self, mut st: usize, i: usize, t: f64) {
        loop {
            if st + 1 < self.step_ptr[i + 1] as usize {
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
        for v in self.visit_ptr[b] as usize..self.visit_ptr[b + 1] as usize {
            let s = self.station[v] as usize;
            if self.st[s].kind != K_HOLD {
                continue;
            }
            let t_arr = self.held.remove(&(v as u32)).expect("released token was held");
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
        if v < self.visit_ptr[tok.b as usize + 1] as usize {
            let nt = Token { v: v as u32, t_arr: t, ..tok };
            self.arrive(self.station[v] as usize, nt, t);
        } else {
            if self.any_hold {
                self.release(tok.b as usize, t);
            }
            let st = tok.st as usize;
            self.done[st] += 1;
            if self.done[st] as i64 == self.quorum[st] as i64 {
                self.step_done(st, tok.i as usize, t);
            }
        }
    }

    fn run(&mut self) {
        if self.closed {
            self.next_issue = self.clients.min(self.n_req);
            for j in 0..self.next_issue {
                let tok = Token { v: 0, b: 0, st: 0, i: j as u32, t_arr: 0.0 };
                self.push(self.think[j], ARR, tok);
            }
        } else if self.n_req > 0 {
            let tok = Token { v: 0, b: 0, st: 0, i: 0, t_arr: 0.0 };
            self.push(self.arrivals[0], ARR, tok);
        }
        while let Some(ev) = self.heap.pop() {
            let t = ev.t;
            if ev.kind == PDEP && self.st[ev.tok.v as usize].live != ev.seq {
                continue; // superseded PS departure
            }
            self.events += 1;
            self.now = t;
            match ev.kind {
                ARR => {
                    let i = ev.tok.i as usize;
                    self.start[i] = t;
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
                    if !self.closed && i + 1 < self.n_req {
                        let tok = Token { v: 0, b: 0, st: 0, i: (i + 1) as u32, t_arr: 0.0 };
                        self.push(self.arrivals[i + 1], ARR, tok);
                    }
                    let st = self.step_ptr[i] as usize;
                    if st == self.step_ptr[i + 1] as usize {
                        self.request_done(i, t);
                    } else if self.start_step(st, i, t) {
                        self.step_done(st, i, t);
                    }
                }
                FDEP => {
                    let tok = ev.tok;
                    let s = self.station[tok.v as usize] as usize;
                    let stn = &mut self.st[s];
                    Self::acc(stn, t);
                    stn.n -= 1;
                    stn.comp += 1;
                    stn.res += t - tok.t_arr;
                    if let Some(nxt) = self.queues[s].pop_front() {
                        let d = self.demand[nxt.v as usize];
                        self.push(t + d, FDEP, nxt);
                    } else {
                        self.st[s].nbusy -= 1;
                    }
                    self.advance(tok, t);
                }
                GRANT => {
                    self.held.insert(ev.tok.v, ev.tok.t_arr);
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
    let branch_ptr = slice(&branch_ptr, "branch_ptr")?;
    let quorum = slice(&quorum, "quorum")?;
    let visit_ptr = slice(&visit_ptr, "visit_ptr")?;
    let station = slice(&station, "station")?;
    let demand = slice(&demand, "demand")?;
    let arrivals = slice(&arrivals, "arrivals")?;
    let think = slice(&think, "think")?;
    let marks = slice(&marks, "marks")?;
    if marks.windows(2).any(|w| w[1] <= w[0]) || marks.iter().any(|&m| m < 0) {
        return Err(PyValueError::new_err("marks must be increasing and >= 0"));
    }

    // Bounds the loop relies on (the Python wrapper checks the rest, with better messages).
    let n_st = kind.len();
    let n_req = step_ptr.len().saturating_sub(1);
    if kind.iter().any(|&k| !(k as u8 == K_FCFS || k as u8 == K_PS || k as u8 == K_HOLD) || k < 0) {
        return Err(PyValueError::new_err("kind must be 0 (FCFS), 1 (PS) or 2 (HOLD)"));
    }
    if servers.len() != n_st || servers.iter().any(|&c| c < 1) {
        return Err(PyValueError::new_err("servers must have one entry >= 1 per station"));
    }
    check_ptr(step_ptr, branch_ptr.len().saturating_sub(1), "step_ptr")?;
    check_ptr(branch_ptr, visit_ptr.len().saturating_sub(1), "branch_ptr")?;
    check_ptr(visit_ptr, station.len(), "visit_ptr")?;
    if quorum.len() != branch_ptr.len() - 1 || demand.len() != station.len() {
        return Err(PyValueError::new_err("quorum/demand lengths do not match the routes"));
    }
    if station.iter().any(|&s| s < 0 || s as usize >= n_st) {
        return Err(PyValueError::new_err("station index out of range"));
    }
    if station.len() > u32::MAX as usize || branch_ptr.len() > u32::MAX as usize || n_req > u32::MAX as usize {
        return Err(PyValueError::new_err("too many requests, steps or visits for one run (max 2^32 - 1 each)"));
    }
    let closed = clients > 0;
    if think.len() != n_req || (!closed && arrivals.len() != n_req) {
        return Err(PyValueError::new_err("arrivals/think must have one entry per request"));
    }

    let stations: Vec<Station> = (0..n_st)
        .map(|s| Station { kind: kind[s] as u8, c: servers[s] as u32, live: u64::MAX, ..Default::default() })
        .collect();
    let mut sim = Sim {
        step_ptr,
        branch_ptr,
        quorum,
        visit_ptr,
        station,
        demand,
        arrivals,
        think,
        closed,
        clients: clients.max(0) as usize,
        warmup: warmup.max(0) as usize,
        n_req,
        st: stations,
        queues: vec![VecDeque::new(); n_st],
        any_hold: kind.iter().any(|&k| k as u8 == K_HOLD),
        held: HashMap::new(),
        jobs: (0..n_st).map(|_| BinaryHeap::new()).collect(),
        heap: BinaryHeap::with_capacity(1024),
        seq: 0,
        done: vec![0; quorum.len()],
        start: vec![0.0; n_req],
        finish: vec![0.0; n_req],
        next_issue: 0,
        events: 0,
        now: 0.0,
        stats_start: 0.0,
        marks,
        next_mark: 0,
        n_arr: 0,
        snap_t: Vec::with_capacity(marks.len()),
        snap_busy: Vec::with_capacity(marks.len() * n_st),
        snap_area: Vec::with_capacity(marks.len() * n_st),
        pre_busy: vec![0.0; n_st],
        pre_area: vec![0.0; n_st],
    };
    py.detach(|| sim.run());
    if !sim.held.is_empty() || sim.queues.iter().zip(&sim.st).any(|(q, s)| s.kind == K_HOLD && !q.is_empty()) {
        return Err(PyValueError::new_err(
            "deadlock: branches still wait for HOLD tokens when no event is left \
             (a branch takes tokens of pools in an order others reverse, or more than a pool has)",
        ));
    }

    let busy: Vec<f64> = sim.st.iter().map(|s| s.busy).collect();
    let area: Vec<f64> = sim.st.iter().map(|s| s.area).collect();
    let comp: Vec<i64> = sim.st.iter().map(|s| s.comp).collect();
    let res: Vec<f64> = sim.st.iter().map(|s| s.res).collect();
    if !sim.marks.is_empty() {
        // A last snapshot at the end of the run closes the last interval.
        let now = sim.now;
        sim.snap_t.push(now);
        for (k, s) in sim.st.iter_mut().enumerate() {
            Sim::acc(s, now);
            sim.snap_busy.push(sim.pre_busy[k] + s.busy);
            sim.snap_area.push(sim.pre_area[k] + s.area);
        }
    }
    let (events, now, stats_start) = (sim.events, sim.now, sim.stats_start);
    let (snap_t, snap_busy, snap_area) = (sim.snap_t, sim.snap_busy, sim.snap_area);
    Ok((
        sim.start.into_pyarray(py),
        sim.finish.into_pyarray(py),
        busy.into_pyarray(py),
        area.into_pyarray(py),
        comp.into_pyarray(py),
        res.into_pyarray(py),
        events,
        now,
        stats_start,
        snap_t.into_pyarray(py),
        snap_busy.into_pyarray(py),
        snap_area.into_pyarray(py),
    ))
}

#[pymodule]
fn storlab_engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(ma::ma_search, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

//! The placement walk of Swift's RingBuilder initial rebalance, compiled: in pure Python it
//! takes about 2 s per 200,000 partition-replicas, so a 700-node ring at part power 18
//! (786,432) was out of reach. `storlab.sim.ringbuild.swift_rebalance` prepares the inputs
//! (the replica plan, the seeded shuffle and sort keys, the tier tree with its children in
//! Swift's order) and keeps the same walk in Python as the reference; a test compares both.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// ring_place(order, kid_ptr, kids, mx, avail, leaf_dev, dev_tiers, replicas) -> int32[R*P]
///
/// Tiers are numbered 0..n_t (0 the root); `kids[kid_ptr[t]..kid_ptr[t+1]]` are tier t's
/// children in Swift's order (by their best device's sort key), `mx[t]` the plan's maximum
/// replicas of one partition in t, `avail[t]` the partition-replicas t still wants,
/// `leaf_dev[t]` the device of a device tier, `dev_tiers[4*d..4*d+4]` device d's region,
/// zone, server and device tiers. For each partition in `order`, each replica descends the
/// four levels taking the child with the most wanted among those below their maximum (the
/// first such in order on ties), then charges the device's tiers. Row-major `r2p2d`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn ring_place<'py>(py: Python<'py>, order: PyReadonlyArray1<'py, i64>,
                       kid_ptr: PyReadonlyArray1<'py, i64>, kids: PyReadonlyArray1<'py, i64>,
                       mx: PyReadonlyArray1<'py, i64>, avail: PyReadonlyArray1<'py, i64>,
                       leaf_dev: PyReadonlyArray1<'py, i64>, dev_tiers: PyReadonlyArray1<'py, i64>,
                       replicas: usize) -> PyResult<Bound<'py, PyArray1<i32>>> {
    let order = order.as_slice()?;
    let kid_ptr = kid_ptr.as_slice()?;
    let kids = kids.as_slice()?;
    let mx = mx.as_slice()?;
    let avail = avail.as_slice()?;
    let leaf_dev = leaf_dev.as_slice()?;
    let dev_tiers = dev_tiers.as_slice()?;
    let n_t = mx.len();
    let parts = order.len();
    let bad = |what: &str| PyValueError::new_err(format!("ring_place: {what}"));
    if kid_ptr.len() != n_t + 1 || avail.len() != n_t || leaf_dev.len() != n_t
        || kid_ptr[n_t] as usize != kids.len() || dev_tiers.len() % 4 != 0 {
        return Err(bad("inconsistent tier arrays"));
    }
    if kids.iter().any(|&k| k < 0 || k as usize >= n_t)
        || kid_ptr.windows(2).any(|w| w[0] < 0 || w[1] < w[0])
        || dev_tiers.iter().any(|&k| k < 0 || k as usize >= n_t)
        || order.iter().any(|&p| p < 0 || p as usize >= parts) {
        return Err(bad("index out of range"));
    }
    let n_dev = dev_tiers.len() / 4;
    if leaf_dev.iter().any(|&d| d >= n_dev as i64) {
        return Err(bad("device out of range"));
    }
    // Renumber the tiers breadth first, so that every tier's children are one contiguous
    // run of ids in Swift's order: a level's choice is then a scan of adjacent integers
    // (the maximum of a slice, then its first position), not an indexed gather.
    let mut new_id = vec![usize::MAX; n_t];
    let mut old_of = Vec::with_capacity(n_t);
    new_id[0] = 0;
    old_of.push(0usize);
    let mut first = vec![0usize; n_t + 1];   // by new id: its children are first[t]..first[t+1]
    let mut head = 0;
    while head < old_of.len() {
        let t = old_of[head];
        first[head] = old_of.len();
        for &c in &kids[kid_ptr[t] as usize..kid_ptr[t + 1] as usize] {
            let c = c as usize;
            if new_id[c] != usize::MAX {
                return Err(bad("a tier with two parents"));
            }
            new_id[c] = old_of.len();
            old_of.push(c);
        }
        head += 1;
    }
    if old_of.len() != n_t {
        return Err(bad("a tier outside the tree"));
    }
    first[n_t] = n_t;
    let mxn: Vec<i64> = old_of.iter().map(|&t| mx[t]).collect();
    let mut av: Vec<i64> = old_of.iter().map(|&t| avail[t]).collect();
    let leaf: Vec<i64> = old_of.iter().map(|&t| leaf_dev[t]).collect();
    let dtn: Vec<usize> = dev_tiers.iter().map(|&t| new_id[t as usize]).collect();

    let mut out = vec![-1i32; replicas * parts];
    let mut at = vec![0i64; n_t];
    let mut touched: Vec<usize> = Vec::with_capacity(4 * replicas);
    for &part in order {
        let part = part as usize;
        for r in 0..replicas {
            let mut t = 0usize;
            for _ in 0..4 {
                let (lo, hi) = (first[t], first[t + 1]);
                if lo == hi {
                    return Err(bad("a tier without children above the devices"));
                }
                // Swift's max() takes the first child with the most wanted; a tier is
                // excluded once it holds its plan's maximum of this partition's replicas
                // (rare: try the unfiltered maximum first, as the Python reference does).
                let sl = &av[lo..hi];
                let m = *sl.iter().max().unwrap();
                let mut best = lo + sl.iter().position(|&v| v == m).unwrap();
                if at[best] >= mxn[best] {
                    best = usize::MAX;
                    let mut best_av = i64::MIN;
                    for c in lo..hi {
                        if at[c] < mxn[c] && (best == usize::MAX || av[c] > best_av) {
                            best = c;
                            best_av = av[c];
                        }
                    }
                    if best == usize::MAX {
                        return Err(bad(&format!(
                            "no device can take replica {r} of partition {part}")));
                    }
                }
                t = best;
            }
            let dev = leaf[t];
            if dev < 0 {
                return Err(bad("a leaf tier without a device"));
            }
            let dev = dev as usize;
            for &j in &dtn[4 * dev..4 * dev + 4] {
                av[j] -= 1;
                if at[j] == 0 {
                    touched.push(j);
                }
                at[j] += 1;
            }
            out[r * parts + part] = dev as i32;
        }
        for &j in &touched {
            at[j] = 0;
        }
        touched.clear();
    }
    Ok(out.into_pyarray(py))
}

const MT_N: usize = 624;
const MT_M: usize = 397;

/// Python's `random.Random` generator (MT19937, `Modules/_randommodule.c`), from a state
/// taken with `getstate()`.
struct Mt {
    mt: Vec<u32>,
    index: usize,
}

impl Mt {
    fn refill(&mut self) {
        let mag = |y: u32| if y & 1 == 1 { 0x9908_b0df } else { 0 };
        let mt = &mut self.mt;
        for kk in 0..MT_N {
            let y = (mt[kk] & 0x8000_0000) | (mt[(kk + 1) % MT_N] & 0x7fff_ffff);
            mt[kk] = mt[(kk + MT_M) % MT_N] ^ (y >> 1) ^ mag(y);
        }
        self.index = 0;
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= MT_N {
            self.refill();
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `Random._randbelow_with_getrandbits(n)` for 1 <= n < 2**32.
    fn below(&mut self, n: u64) -> u64 {
        let k = 64 - n.leading_zeros();
        loop {
            let r = (self.next_u32() >> (32 - k)) as u64;
            if r < n {
                return r;
            }
        }
    }
}

/// py_shuffle(state, index, n) -> (list(range(n)) shuffled, state, index): what
/// `Random.shuffle` does to `list(range(n))` from the generator state `state` (624 words)
/// and `index` of `getstate()`, with the state after it (for `setstate`). 1e6 elements:
/// Python's shuffle is a loop of 1e6 `_randbelow` calls.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn py_shuffle<'py>(py: Python<'py>, state: PyReadonlyArray1<'py, u32>, index: usize, n: usize)
                       -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u32>>, usize)> {
    let mt = state.as_slice()?.to_vec();
    if mt.len() != MT_N || index > MT_N || n as u64 > u32::MAX as u64 {
        return Err(PyValueError::new_err("py_shuffle: a state of 624 words, index <= 624, n < 2**32"));
    }
    let mut g = Mt { mt, index };
    let mut x: Vec<i64> = (0..n as i64).collect();
    for i in (1..n).rev() {
        let j = g.below(i as u64 + 1) as usize;
        x.swap(i, j);
    }
    Ok((x.into_pyarray(py), g.mt.into_pyarray(py), g.index))
}

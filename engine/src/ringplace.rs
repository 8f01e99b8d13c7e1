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
    let mut avail = avail.as_slice()?.to_vec();
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
    let mut out = vec![-1i32; replicas * parts];
    let mut at = vec![0i64; n_t];
    let mut touched: Vec<usize> = Vec::with_capacity(4 * replicas);
    for &part in order {
        let part = part as usize;
        for r in 0..replicas {
            let mut t = 0usize;
            for _ in 0..4 {
                let (lo, hi) = (kid_ptr[t] as usize, kid_ptr[t + 1] as usize);
                // A tier is full for this partition once it holds its plan's maximum; the
                // first non-full child with the most wanted is what Swift's max() picks.
                let mut best = usize::MAX;
                let mut best_av = i64::MIN;
                for &c in &kids[lo..hi] {
                    let c = c as usize;
                    if at[c] < mx[c] && (best == usize::MAX || avail[c] > best_av) {
                        best = c;
                        best_av = avail[c];
                    }
                }
                if best == usize::MAX {
                    return Err(bad(&format!("no device can take replica {r} of partition {part}")));
                }
                t = best;
            }
            let dev = leaf_dev[t];
            if dev < 0 {
                return Err(bad("a leaf tier without a device"));
            }
            let dev = dev as usize;
            for &j in &dev_tiers[4 * dev..4 * dev + 4] {
                let j = j as usize;
                avail[j] -= 1;
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

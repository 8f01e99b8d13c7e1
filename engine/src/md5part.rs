//! Swift's partition of numbered object names, hashed here: md5 in a Python loop was a
//! fifth of a 1e6-request run's non-engine time (200,000 names, 0.2 CPU s; here ~0.02 s).
//! `storlab.sim.ring.hash_partition` is the reference; a test compares the two.

use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::io::Write;

const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];
const S: [u32; 16] = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21];

/// The first 32 bits of md5(msg), big-endian (Swift's `unpack_from('>I', digest)`).
/// `buf` is scratch space, reused between calls.
fn md5_top32(msg: &[u8], buf: &mut Vec<u8>) -> u32 {
    buf.clear();
    buf.extend_from_slice(msg);
    buf.push(0x80);
    while buf.len() % 64 != 56 {
        buf.push(0);
    }
    buf.extend_from_slice(&((msg.len() as u64).wrapping_mul(8)).to_le_bytes());
    let (mut a0, mut b0, mut c0, mut d0) = (0x67452301u32, 0xefcdab89u32, 0x98badcfeu32, 0x10325476u32);
    for chunk in buf.chunks_exact(64) {
        let mut m = [0u32; 16];
        for (j, w) in m.iter_mut().enumerate() {
            *w = u32::from_le_bytes([chunk[4 * j], chunk[4 * j + 1], chunk[4 * j + 2], chunk[4 * j + 3]]);
        }
        let (mut a, mut b, mut c, mut d) = (a0, b0, c0, d0);
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(K[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(S[(i / 16) * 4 + i % 4]));
        }
        a0 = a0.wrapping_add(a);
        b0 = b0.wrapping_add(b);
        c0 = c0.wrapping_add(c);
        d0 = d0.wrapping_add(d);
    }
    let _ = (b0, c0, d0);
    a0.swap_bytes()
}

/// numbered_partitions(prefix, head, mid, containers, width, n, suffix, part_power) ->
/// int64[n]: the partition (top `part_power` bits of md5) of
/// `prefix + head + str(k % containers) + mid + str(k).zfill(width) + suffix` for k in 0..n,
/// as `storlab.sim.model._object_partitions` names a population's objects.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn numbered_partitions<'py>(py: Python<'py>, prefix: &[u8], head: &[u8], mid: &[u8],
                                containers: u64, width: usize, n: u64, suffix: &[u8],
                                part_power: u32) -> PyResult<Bound<'py, PyArray1<i64>>> {
    if containers == 0 || !(1..=32).contains(&part_power) {
        return Err(PyValueError::new_err("containers must be >= 1 and part_power in 1..32"));
    }
    let shift = 32 - part_power;
    let mut out = Vec::with_capacity(n as usize);
    let (mut name, mut buf) = (Vec::with_capacity(128), Vec::with_capacity(192));
    for k in 0..n {
        name.clear();
        name.extend_from_slice(prefix);
        name.extend_from_slice(head);
        write!(name, "{}", k % containers).unwrap();
        name.extend_from_slice(mid);
        write!(name, "{:0width$}", k, width = width).unwrap();
        name.extend_from_slice(suffix);
        out.push((md5_top32(&name, &mut buf) >> shift) as i64);
    }
    Ok(out.into_pyarray(py))
}

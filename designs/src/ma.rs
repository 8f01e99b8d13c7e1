//! Exact minimum-aberration search for regular two-level fractions 2^(k-p) in 2^n runs.
//!
//! A design is a set of k distinct nonzero columns of GF(2)^n (bit i: base factor i takes
//! part) containing the n unit vectors (the base factors); the p = k - n added columns are
//! chosen from the columns of weight >= 2. Its word-length pattern comes from the
//! MacWilliams identity: the row code {(u.c_1, ..., u.c_k) : u in GF(2)^n} has as weights
//! cnt[u] = #{columns c : u.c odd}, and A_j = 2^-n * sum_u K_j(cnt[u]; k) (Krawtchouk).
//! That costs O(2^n k) and never lists the 2^p words, so 120 factors in 128 runs are fine.
//!
//! Two exact searches, both orderly (a set is visited only as the lexicographically
//! smallest image of itself under the base-bit permutations, checked on short prefixes,
//! which keeps one set of each orbit: removing the largest element of a lex-min set leaves
//! a lex-min set):
//! - `direct`: branch and bound over added columns. Words only appear as columns are
//!   added, so a partial design whose pattern prefix is already lexicographically worse
//!   than the best complete one is cut, and so is one whose cheapest completion adds more
//!   3-words (or, at equal A3, 4-words) than the best has.
//! - `complement`: for many factors the f = 2^n - 1 - k columns left out are few. Every
//!   set F of f columns of rank r is equivalent to one holding the r unit vectors of its
//!   span, so enumerating those and scoring PG(n-1,2) \ F covers every design. The
//!   design's A3 and A4 follow F's (Tang and Wu 1996, Chen and Hedayat 1996): more lines
//!   (3-words) in F, or as many and fewer 4-words, make a better design, so a partial F
//!   whose most lines any completion can reach (or, at a tie, whose 4-words already) fall
//!   short of the incumbent's is cut. `complement_all` is the same enumeration unbounded.
//!   `even` cuts F out of the even design instead, where neither has lines and again
//!   A4(D) = C4 + A4(F): a partial F with more 4-words than the incumbent's is cut.
//!
//! Both stop at a node or time budget; `exact` then says whether the search finished.

use std::time::Instant;

use pyo3::prelude::*;

/// Pattern prefix (A_1..A_J) compared at every node of the branch and bound.
const JPRE: usize = 12;

struct Tables {
    k: usize,
    /// binom[a][b] modulo 2^128 (exact values below 2^128 are exact).
    binom: Vec<Vec<u128>>,
}

impl Tables {
    fn new(k: usize) -> Self {
        let mut binom = vec![vec![0u128; k + 2]; k + 2];
        for a in 0..=k + 1 {
            binom[a][0] = 1;
            for b in 1..=a {
                binom[a][b] = binom[a - 1][b - 1].wrapping_add(if b < a { binom[a - 1][b] } else { 0 });
            }
        }
        Tables { k, binom }
    }

    /// Krawtchouk K_j(w; m) modulo 2^128.
    fn kraw(&self, j: usize, w: usize, m: usize) -> u128 {
        let mut s = 0u128;
        for i in 0..=j.min(w) {
            if j - i > m - w {
                continue;
            }
            let t = self.binom[w][i].wrapping_mul(self.binom[m - w][j - i]);
            s = if i % 2 == 0 { s.wrapping_add(t) } else { s.wrapping_sub(t) };
        }
        s
    }

    /// A_1..A_jmax of an m-column design whose row code has weight histogram `hist`.
    /// Every true sum 2^n A_j is below 2^(m) <= 2^127, so the wrapped sum is exact.
    fn wlp(&self, hist: &[u64], m: usize, jmax: usize, n: usize) -> Vec<u128> {
        debug_assert!(m <= self.k);
        (1..=jmax.min(m))
            .map(|j| {
                let mut s = 0u128;
                for (w, &h) in hist.iter().enumerate().take(m + 1) {
                    if h != 0 {
                        s = s.wrapping_add((h as u128).wrapping_mul(self.kraw(j, w, m)));
                    }
                }
                s >> n
            })
            .collect()
    }
}

/// All permutations of 0..n (n <= 7 here: at most 5040).
fn permutations(n: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut p: Vec<usize> = (0..n).collect();
    fn rec(i: usize, p: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if i == p.len() {
            out.push(p.clone());
            return;
        }
        for j in i..p.len() {
            p.swap(i, j);
            rec(i + 1, p, out);
            p.swap(i, j);
        }
    }
    rec(0, &mut p, &mut out);
    out
}

fn permute_bits(c: u32, perm: &[usize]) -> u32 {
    let mut out = 0;
    for (i, &t) in perm.iter().enumerate() {
        if c >> i & 1 == 1 {
            out |= 1 << t;
        }
    }
    out
}

/// Candidate columns of weight >= 2 in 2^r runs ordered by (weight, value), each one's
/// image index under every bit permutation, and the permutation-orbit minimality test.
struct Orbits {
    cands: Vec<u32>,
    /// img[π][i]: index of the image of cands[i] under permutation π.
    img: Vec<Vec<u16>>,
}

impl Orbits {
    fn new(r: usize, with_perms: bool) -> Self {
        let mut cands: Vec<u32> = (1u32..1 << r).filter(|c| c.count_ones() >= 2).collect();
        cands.sort_by_key(|&c| (c.count_ones(), c));
        let mut index = vec![u16::MAX; 1 << r];
        for (i, &c) in cands.iter().enumerate() {
            index[c as usize] = i as u16;
        }
        let img = if with_perms {
            permutations(r)
                .into_iter()
                .skip(1) // the identity
                .map(|perm| cands.iter().map(|&c| index[permute_bits(c, &perm) as usize]).collect())
                .collect()
        } else {
            Vec::new()
        };
        Orbits { cands, img }
    }

    /// Whether the sorted index set `s` is the smallest of its images (as sorted sequences).
    fn is_min(&self, s: &[u16], buf: &mut Vec<u16>) -> bool {
        for im in &self.img {
            buf.clear();
            buf.extend(s.iter().map(|&i| im[i as usize]));
            buf.sort_unstable();
            if buf.as_slice() < s {
                return false;
            }
        }
        true
    }
}

/// Row-code weights of the current design: cnt[u] = #{columns c: popcount(u & c) odd}.
fn add_col(cnt: &mut [u32], c: u32, sign: i32) {
    for (u, x) in cnt.iter_mut().enumerate() {
        if (u as u32 & c).count_ones() & 1 == 1 {
            *x = (*x as i32 + sign) as u32;
        }
    }
}

fn hist_of(cnt: &[u32], m: usize) -> Vec<u64> {
    let mut h = vec![0u64; m + 1];
    for &x in cnt {
        h[x as usize] += 1;
    }
    h
}

/// The word-length pattern A_1..A_k of the design with the n base columns plus `added`.
pub fn wlp_of(n: usize, added: &[u32]) -> Vec<u128> {
    let k = n + added.len();
    let t = Tables::new(k);
    let mut cnt = vec![0u32; 1 << n];
    for i in 0..n {
        add_col(&mut cnt, 1 << i, 1);
    }
    for &c in added {
        add_col(&mut cnt, c, 1);
    }
    t.wlp(&hist_of(&cnt, k), k, k, n)
}

struct Budget {
    start: Instant,
    seconds: f64,
    max_nodes: u64,
    nodes: u64,
    cut: bool,
}

impl Budget {
    fn tick(&mut self) -> bool {
        self.nodes += 1;
        if self.max_nodes > 0 && self.nodes >= self.max_nodes {
            self.cut = true;
        }
        if self.nodes & 0x3FF == 0 && self.start.elapsed().as_secs_f64() > self.seconds {
            self.cut = true;
        }
        self.cut
    }
}

struct Best {
    wlp: Option<Vec<u128>>,
    cols: Vec<u32>,
}

impl Best {
    fn offer(&mut self, wlp: Vec<u128>, cols: Vec<u32>) {
        if self.wlp.as_ref().is_none_or(|b| wlp < *b) {
            self.wlp = Some(wlp);
            self.cols = cols;
        }
    }
}

/// How many leading added columns are checked for orbit minimality: n! permutations per
/// check, so fewer for larger n (completeness does not depend on the depth).
fn canon_depth(n: usize) -> usize {
    match n {
        0..=4 => 64,
        5 => 8,
        6 => 4,
        _ => 3,
    }
}

struct Direct<'a> {
    n: usize,
    p: usize,
    k: usize,
    orb: &'a Orbits,
    t: Tables,
    cur: Vec<u32>,
    chosen: Vec<u16>,
    pairs: Vec<u32>,
    cnt: Vec<u32>,
    best: Best,
    budget: Budget,
    buf: Vec<u16>,
}

impl Direct<'_> {
    fn push(&mut self, idx: u16) {
        let c = self.orb.cands[idx as usize];
        for &d in &self.cur {
            self.pairs[(c ^ d) as usize] += 1;
        }
        self.cur.push(c);
        self.chosen.push(idx);
        add_col(&mut self.cnt, c, 1);
    }

    fn pop(&mut self) {
        let c = self.cur.pop().unwrap();
        self.chosen.pop();
        for &d in &self.cur {
            self.pairs[(c ^ d) as usize] -= 1;
        }
        add_col(&mut self.cnt, c, -1);
    }

    fn dfs(&mut self, start: usize) {
        if self.budget.tick() {
            return;
        }
        let m = self.cur.len();
        let depth = m - self.n;
        if depth == self.p {
            let w = self.t.wlp(&hist_of(&self.cnt, m), m, self.k, self.n);
            self.best.offer(w, self.cur[self.n..].to_vec());
            return;
        }
        let need = self.p - depth;
        let ncand = self.orb.cands.len();
        if ncand - start < need {
            return;
        }
        let (b3, b4) = match &self.best.wlp {
            Some(b) => {
                let pre = self.t.wlp(&hist_of(&self.cnt, m), m, JPRE, self.n);
                let bp = &b[..pre.len()];
                if pre.as_slice() > bp {
                    return;
                }
                (b[2], b.get(3).copied().unwrap_or(0) * 3)
            }
            None => (u128::MAX, u128::MAX),
        };
        let a3 = self.t.wlp(&hist_of(&self.cnt, m), m, 4, self.n);
        let (a3, a4x3) = (a3.get(2).copied().unwrap_or(0), a3.get(3).copied().unwrap_or(0) * 3);
        // Increments of A3 and 3*A4 each remaining column would bring now; they only grow.
        let mut inc: Vec<(u128, u128, u16)> = (start..ncand)
            .map(|i| {
                let c = self.orb.cands[i];
                let i3 = self.pairs[c as usize] as u128;
                let i4: u128 = self.cur.iter().map(|&d| self.pairs[(c ^ d) as usize] as u128).sum();
                (i3, i4, i as u16)
            })
            .collect();
        let mut rest3 = 0u128;
        let mut rest4 = 0u128;
        if self.best.wlp.is_some() {
            let mut v3: Vec<u128> = inc.iter().map(|x| x.0).collect();
            v3.sort_unstable();
            if a3 + v3[..need].iter().sum::<u128>() > b3 {
                return;
            }
            rest3 = v3[..need - 1].iter().sum();
            if a3 == b3 {
                let mut v4: Vec<u128> = inc.iter().filter(|x| x.0 == 0).map(|x| x.1).collect();
                if v4.len() < need {
                    return;
                }
                v4.sort_unstable();
                if a4x3 + v4[..need].iter().sum::<u128>() > b4 {
                    return;
                }
                rest4 = v4[..need - 1].iter().sum();
            }
        }
        // The next column must leave room for the others; cheapest first, so good designs
        // (and tight bounds) come early.
        inc.retain(|x| (x.2 as usize) <= ncand - need);
        inc.sort_unstable();
        for (i3, i4, idx) in inc {
            if self.best.wlp.is_some() {
                let x3 = a3 + i3;
                if x3 + rest3 > b3 {
                    continue;
                }
                if x3 == b3 && a3 == b3 && a4x3 + i4 + rest4 > b4 {
                    continue;
                }
            }
            self.chosen.push(idx);
            let canon = depth >= canon_depth(self.n) || {
                let s = self.chosen.clone();
                self.orb.is_min(&s, &mut self.buf)
            };
            self.chosen.pop();
            if !canon {
                continue;
            }
            self.push(idx);
            self.dfs(idx as usize + 1);
            self.pop();
            if self.budget.cut {
                return;
            }
        }
    }
}

/// Invert the basis `b` (n independent columns) and map every column of `cols` into the
/// coordinates where b_i is the unit vector e_i.
fn to_base(n: usize, b: &[u32], cols: &[u32]) -> Vec<u32> {
    // Gauss-Jordan on [B | I] row by row, as bit rows: row i of B is bit i of every b_j.
    let mut rows: Vec<(u32, u32)> = (0..n)
        .map(|i| {
            let r = b.iter().enumerate().fold(0u32, |acc, (j, &c)| acc | ((c >> i & 1) << j));
            (r, 1u32 << i)
        })
        .collect();
    for col in 0..n {
        let piv = (col..n).find(|&r| rows[r].0 >> col & 1 == 1).expect("basis");
        rows.swap(col, piv);
        for r in 0..n {
            if r != col && rows[r].0 >> col & 1 == 1 {
                rows[r] = (rows[r].0 ^ rows[col].0, rows[r].1 ^ rows[col].1);
            }
        }
    }
    // rows[i].1 is row i of B^-1: bit i of the image of c is parity(rows[i].1 & c).
    cols.iter()
        .map(|&c| (0..n).fold(0u32, |acc, i| acc | (((rows[i].1 & c).count_ones() & 1) << i)))
        .collect()
}

/// A basis among `cols` (greedy), or None when they do not span GF(2)^n.
fn basis_of(n: usize, cols: &[u32]) -> Option<Vec<u32>> {
    let mut red: Vec<u32> = Vec::new(); // reduced vectors with distinct leading bits
    let mut out = Vec::new();
    for &c in cols {
        let mut x = c;
        for &r in &red {
            x = x.min(x ^ r);
        }
        if x != 0 {
            red.push(x);
            red.sort_unstable_by(|a, b| b.cmp(a));
            out.push(c);
            if out.len() == n {
                return Some(out);
            }
        }
    }
    None
}

/// The added columns (base coordinates) of the design made of the columns `d`.
fn standardise(n: usize, d: &[u32]) -> Option<Vec<u32>> {
    let b = basis_of(n, d)?;
    let mut added: Vec<u32> = to_base(n, &b, d).into_iter().filter(|c| c.count_ones() >= 2).collect();
    added.sort_unstable_by_key(|&c| (c.count_ones(), c));
    Some(added)
}

struct Complement<'a> {
    n: usize,
    k: usize,
    f: usize,
    orb: &'a Orbits,
    t: Tables,
    /// cntf[u] = #{c in F: u.c odd}; the design's cnt is ucnt[u] - cntf[u].
    cntf: Vec<u32>,
    /// The same counts for the universe the design is cut from (all of PG(n-1,2), or the
    /// even design: the columns with bit n-1 set), and the bit every F column carries.
    ucnt: Vec<u32>,
    hbit: u32,
    fcols: Vec<u32>,
    chosen: Vec<u16>,
    best: Best,
    best_f: Vec<u32>,
    budget: Budget,
    buf: Vec<u16>,
    /// Bound on (only for the whole PG(n-1,2) as universe, see `fstats`): pairs[x] =
    /// #{unordered {a, b} in F : a + b = x}; lines = A3(F); a4 = A4(F); the incumbent's
    /// (A3(F), A4(F)); the per-point line cap (f - 1) / 2.
    bound: bool,
    pairs: Vec<u32>,
    lines: u64,
    a4: u64,
    best_fa: Option<(u64, u64)>,
    cap: u64,
}

/// (A3, A4) of a set of distinct nonzero columns: its lines (a + b + c = 0) and 4-words.
pub fn fstats(n: usize, f: &[u32]) -> (u64, u64) {
    let mut pairs = vec![0u32; 1 << n];
    let (mut l, mut a4x3) = (0u64, 0u64);
    for (i, &c) in f.iter().enumerate() {
        l += pairs[c as usize] as u64;
        a4x3 += f[..i].iter().map(|&a| pairs[(c ^ a) as usize] as u64).sum::<u64>();
        for &a in &f[..i] {
            pairs[(c ^ a) as usize] += 1;
        }
    }
    (l, a4x3 / 3)
}

impl Complement<'_> {
    fn push_f(&mut self, c: u32) {
        add_col(&mut self.cntf, c, 1);
        if self.bound {
            self.lines += self.pairs[c as usize] as u64;
            let x3: u64 = self.fcols.iter().map(|&a| self.pairs[(c ^ a) as usize] as u64).sum();
            self.a4 += x3 / 3;
            for &a in &self.fcols {
                self.pairs[(c ^ a) as usize] += 1;
            }
        }
        self.fcols.push(c);
    }

    fn pop_f(&mut self) {
        let c = self.fcols.pop().unwrap();
        add_col(&mut self.cntf, c, -1);
        if self.bound {
            for &a in &self.fcols {
                self.pairs[(c ^ a) as usize] -= 1;
            }
            let x3: u64 = self.fcols.iter().map(|&a| self.pairs[(c ^ a) as usize] as u64).sum();
            self.a4 -= x3 / 3;
            self.lines -= self.pairs[c as usize] as u64;
        }
    }

    /// Whether no completion of F (with columns of index >= start) can beat the incumbent.
    /// The design's pattern follows F's (Tang and Wu 1996; Chen and Hedayat 1996): with
    /// D = PG(n-1,2) minus F, A3(D) = C3 - A3(F) and A4(D) = C4 + c A3(F) + A4(F) (C3, C4,
    /// c depend on n and k only), so a better D needs more lines in F, or as many and no
    /// more 4-words. Lines only appear as columns are added: the new ones through one new
    /// point c number pairs[c] now; a new point lies on at most cap lines of F in all and
    /// on at most need - 1 lines with another new point, each such line counted at least
    /// twice over the new points.
    fn hopeless(&self, start: usize) -> bool {
        let Some((b3, b4)) = self.best_fa else { return false };
        let need = self.f - self.fcols.len();
        let ncand = self.orb.cands.len();
        let mut v: Vec<u64> = (start..ncand)
            .map(|i| {
                let g = self.pairs[(self.orb.cands[i] | self.hbit) as usize] as u64;
                2 * g + ((need as u64) - 1).min(self.cap.saturating_sub(g))
            })
            .collect();
        if v.len() < need {
            return true;
        }
        v.select_nth_unstable_by(need - 1, |a, b| b.cmp(a));
        // In the even design (an affine hyperplane missing the origin) no three columns
        // sum to zero: F has no lines, and the design's A4 is C4 + A4(F) there too.
        let ub = if self.hbit != 0 { 0 } else { (2 * self.lines + v[..need].iter().sum::<u64>()) / 2 };
        ub < b3 || (ub == b3 && self.a4 > b4)
    }

    fn leaf(&mut self) {
        let mut h = vec![0u64; self.k + 1];
        h[0] += 1;
        for (&x, &y) in self.cntf[1..].iter().zip(&self.ucnt[1..]) {
            let w = y - x;
            if w == 0 {
                return; // the design lies in a hyperplane: not of full rank
            }
            h[w as usize] += 1;
        }
        if let Some(b) = &self.best.wlp {
            let pre = self.t.wlp(&h, self.k, JPRE, self.n);
            if pre.as_slice() > &b[..pre.len()] {
                return;
            }
        }
        let w = self.t.wlp(&h, self.k, self.k, self.n);
        if self.best.wlp.as_ref().is_none_or(|b| w < *b) {
            self.best.wlp = Some(w);
            self.best_f = self.fcols.clone();
            if self.bound {
                self.best_fa = Some((self.lines, self.a4));
            }
        } else if self.bound && self.best_fa.is_none() && self.best.wlp.as_ref() == Some(&w) {
            // an incumbent given in other coordinates: an F as good has its (A3, A4)
            self.best_fa = Some((self.lines, self.a4));
        }
    }

    fn dfs(&mut self, start: usize, r: usize) {
        if self.budget.tick() {
            return;
        }
        if self.fcols.len() == self.f {
            self.leaf();
            return;
        }
        if self.bound && self.hopeless(start) {
            return;
        }
        let need = self.f - self.fcols.len();
        let ncand = self.orb.cands.len();
        let depth = self.chosen.len();
        for idx in start..ncand {
            if ncand - idx < need {
                break;
            }
            let c = self.orb.cands[idx] | self.hbit;
            self.chosen.push(idx as u16);
            let canon = depth >= canon_depth(r) || {
                let s = self.chosen.clone();
                self.orb.is_min(&s, &mut self.buf)
            };
            if canon {
                self.push_f(c);
                self.dfs(idx + 1, r);
                self.pop_f();
            }
            self.chosen.pop();
            if self.budget.cut {
                return;
            }
        }
    }
}

/// Outcome of a search: added columns, pattern A_1..A_k, finished, nodes, seconds.
pub type Found = (Vec<u32>, Vec<u128>, bool, u64, f64);

/// Exact minimum-aberration search (see the module docs). `initial` seeds the incumbent
/// (any valid design: it only speeds the bound up); `method` is "direct", "even",
/// "complement" (bounded by the left-out set's lines and 4-words) or "complement_all" (the
/// same enumeration without that bound: the check of the bound).
pub fn search(k: usize, n: usize, seconds: f64, max_nodes: u64, initial: Option<Vec<u32>>,
              method: &str) -> Result<Found, String> {
    if !(2..=7).contains(&n) || k <= n || k >= 1 << n {
        return Err(format!("need 2 <= n <= 7 and n < k < 2^n, got k={k}, n={n}"));
    }
    let start = Instant::now();
    let mut best = Best { wlp: None, cols: Vec::new() };
    if let Some(init) = initial {
        let ok = init.len() == k - n
            && init.iter().all(|&c| c < 1 << n && c.count_ones() >= 2)
            && { let mut s = init.clone(); s.sort_unstable(); s.dedup(); s.len() == init.len() };
        if !ok {
            return Err("initial: k - n distinct columns of weight >= 2 below 2^n".into());
        }
        best.offer(wlp_of(n, &init), init);
    }
    let budget = Budget { start, seconds, max_nodes, nodes: 0, cut: false };
    let method = if method.starts_with("complement") && k + 1 == 1 << n { "direct" } else { method };
    match method {
        "direct" => {
            let orb = Orbits::new(n, true);
            let mut s = Direct {
                n, p: k - n, k, orb: &orb, t: Tables::new(k),
                cur: Vec::new(), chosen: Vec::new(), pairs: vec![0; 1 << n],
                cnt: vec![0; 1 << n], best, budget, buf: Vec::new(),
            };
            for i in 0..n {
                let c = 1u32 << i;
                for &d in &s.cur {
                    s.pairs[(c ^ d) as usize] += 1;
                }
                s.cur.push(c);
                add_col(&mut s.cnt, c, 1);
            }
            s.dfs(0);
            let w = s.best.wlp.ok_or("no design")?;
            Ok((s.best.cols, w, !s.budget.cut, s.budget.nodes, start.elapsed().as_secs_f64()))
        }
        "complement" | "complement_all" | "even" => {
            // "even": for 5 2^(n-4) < k <= 2^(n-1) every resolution IV design is a subset
            // of the even design. Its columns are a sum-free set of F_2^n (no a + b = c: no
            // word of length 3), and Davydov and Tombak (1990) proved that a sum-free set
            // larger than 5 2^(n-4) lies in an affine hyperplane missing the origin, i.e. in
            // {c : h.c = 1} (their theorem as restated in the sum-free-set literature, where
            // sf1(F_2^n) = 5 2^(n-4); Butler 2003 uses it for MA). The MA design has
            // resolution IV there, so cutting F out of the even design covers them all.
            // (At k = 5 2^(n-4) it fails already: 20 factors in 64 runs, A5 > 0.)
            // Outside that range (k <= 2^(n-1) still) it is a heuristic: exact stays False.
            let even = method == "even";
            if even && k > 1 << (n - 1) {
                return Err("method 'even' needs k <= 2^(n-1)".into());
            }
            let proof = !even || (n >= 4 && 5 * (1 << (n - 4)) < k);
            let hbit: u32 = if even { 1 << (n - 1) } else { 0 };
            let universe: Vec<u32> = (1u32..1 << n).filter(|&c| c & hbit == hbit).collect();
            let mut ucnt = vec![0u32; 1 << n];
            for &c in &universe {
                add_col(&mut ucnt, c, 1);
            }
            let f = universe.len() - k;
            // F's span: its r unit vectors (plus, in the even design, the point hbit itself,
            // which a translation puts in F) and f - r (- 1) columns of weight >= 2 in it.
            let fixed = |r: usize| -> Vec<u32> {
                let mut v: Vec<u32> = (0..r).map(|i| (1u32 << i) | hbit).collect();
                if even {
                    v.insert(0, hbit);
                }
                v
            };
            let dims = if even { n - 1 } else { n };
            let mut best_f: Vec<u32> = Vec::new();
            let mut nodes = 0;
            let mut cut = false;
            let mut best_w = best.wlp.clone();
            let mut best_cols = best.cols.clone();
            let rmin = if even { 0 } else { 1 };
            // The incumbent's (A3, A4) of its left-out set, for the complement's bound.
            // (Only when the incumbent lies in the universe, as it always does in PG(n-1,2).)
            let mut best_fa = match &best.wlp {
                Some(_) => {
                    let mut d: Vec<u32> = (0..n).map(|i| 1u32 << i).collect();
                    d.extend(&best.cols);
                    let fset: Vec<u32> = universe.iter().copied().filter(|c| !d.contains(c)).collect();
                    (fset.len() == f).then(|| fstats(n, &fset))
                }
                None => None,
            };
            for r in rmin..=dims {
                let fx = fixed(r);
                if fx.len() > f || f - fx.len() > (1 << r) - 1 - r {
                    continue;
                }
                let orb = Orbits::new(r, true);
                let mut s = Complement {
                    n, k, f, orb: &orb, t: Tables::new(k), cntf: vec![0; 1 << n],
                    ucnt: ucnt.clone(), hbit, fcols: Vec::new(), chosen: Vec::new(),
                    best: Best { wlp: best_w.clone(), cols: Vec::new() },
                    best_f: Vec::new(), budget: Budget {
                        start, seconds, max_nodes: if max_nodes > 0 { max_nodes.saturating_sub(nodes).max(1) } else { 0 },
                        nodes: 0, cut: false },
                    buf: Vec::new(),
                    bound: method != "complement_all", pairs: vec![0; 1 << n], lines: 0, a4: 0, best_fa,
                    cap: (f as u64).saturating_sub(1) / 2,
                };
                for &c in &fx {
                    s.push_f(c);
                }
                s.dfs(0, r);
                best_fa = s.best_fa;
                nodes += s.budget.nodes;
                cut |= s.budget.cut;
                if !s.best_f.is_empty() {
                    best_w = s.best.wlp.clone();
                    best_f = s.best_f.clone();
                }
                if cut {
                    break;
                }
            }
            if f == 0 {
                best_f = vec![0]; // no column left out: the design is the whole universe
                best_w = Some(wlp_of(n, &standardise(n, &universe).ok_or("rank")?));
            }
            if !best_f.is_empty() {
                let d: Vec<u32> = universe.iter().copied().filter(|c| !best_f.contains(c)).collect();
                best_cols = standardise(n, &d).ok_or("complement design not of full rank")?;
            }
            let w = best_w.ok_or("no design")?;
            if wlp_of(n, &best_cols) != w {
                return Err("internal: the complement's pattern does not match".into());
            }
            Ok((best_cols, w, !cut && proof, nodes, start.elapsed().as_secs_f64()))
        }
        _ => Err(format!("method must be 'direct', 'even', 'complement' or 'complement_all', not {method:?}")),
    }
}

/// ma_search(k, n, seconds=60.0, max_nodes=0, initial=None, method="direct") ->
/// (added columns, [A_1..A_k], exact, nodes, seconds). Minimum-aberration 2^(k-(k-n))
/// design by exact search; `exact` is False when the budget stopped it (best so far).
#[pyfunction]
#[pyo3(signature = (k, n, seconds=60.0, max_nodes=0, initial=None, method="direct"))]
pub fn ma_search(py: Python<'_>, k: usize, n: usize, seconds: f64, max_nodes: u64,
                 initial: Option<Vec<u32>>, method: &str) -> PyResult<Found> {
    let method = method.to_string();
    py.detach(|| search(k, n, seconds, max_nodes, initial, &method))
        .map_err(pyo3::exceptions::PyValueError::new_err)
}

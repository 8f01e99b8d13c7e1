//! Compiled design search of storlab: the exact minimum-aberration search (`ma`) that
//! writes the catalogue of regular two-level fractions `storlab.design` reads. Its own
//! crate, apart from the simulator's engine: the two share nothing, and a change to one
//! rebuilds only it.

use pyo3::prelude::*;

mod ma;

#[pymodule]
fn storlab_designs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ma::ma_search, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

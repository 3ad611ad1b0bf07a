//! The guarantees at risk right now, as `events::config_warnings` last found them; shown in
//! `INFO idgen` (`idgen_warnings`). Both run on Redis's main thread.

use crate::ffi::main_thread::MainThreadCell;

static CURRENT: MainThreadCell<Vec<String>> = MainThreadCell::new(Vec::new());

/// Makes `found` the warnings in force; returns those that are new (to log once).
pub fn replace(found: Vec<String>) -> Vec<String> {
    CURRENT.with(|current| {
        let new = found
            .iter()
            .filter(|warning| !current.contains(warning))
            .cloned()
            .collect();
        *current = found;
        new
    })
}

/// The warnings in force, joined for INFO (`none` when there are none).
pub fn summary() -> String {
    CURRENT.with(|current| {
        if current.is_empty() {
            "none".to_string()
        } else {
            current.join(" | ")
        }
    })
}

//! The guarantees at risk right now, as `events::config_warnings` last found them; shown in
//! `INFO idgen` (`idgen_warnings`).

use std::sync::Mutex;

static CURRENT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Makes `found` the warnings in force; returns those that are new (to log once).
pub fn replace(found: Vec<String>) -> Vec<String> {
    let mut current = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
    let new = found
        .iter()
        .filter(|warning| !current.contains(warning))
        .cloned()
        .collect();
    *current = found;
    new
}

/// The warnings in force, joined for INFO (`none` when there are none).
pub fn summary() -> String {
    let current = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
    if current.is_empty() {
        "none".to_string()
    } else {
        current.join(" | ")
    }
}

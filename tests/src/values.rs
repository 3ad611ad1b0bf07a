//! Assertions and probes the tests share.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;

/// Panics, naming the first repeated value, unless every value is distinct.
pub fn assert_unique<T: Eq + Hash + Debug + Copy>(values: impl IntoIterator<Item = T>) -> usize {
    let mut seen = HashSet::new();
    for value in values {
        assert!(seen.insert(value), "duplicate value {value:?}");
    }
    seen.len()
}

/// How many values repeat one seen before (0 if all are distinct): for tests that report
/// the count before asserting it.
pub fn count_duplicates<T: Eq + Hash>(values: impl IntoIterator<Item = T>) -> usize {
    let mut seen = HashSet::new();
    let mut repeated = 0;
    for value in values {
        if !seen.insert(value) {
            repeated += 1;
        }
    }
    repeated
}

/// The value of `field` in an INFO reply (`field:value` lines), if present.
pub fn info_line(info: &str, field: &str) -> Option<String> {
    info.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name == field).then(|| value.trim().to_string())
    })
}

/// Panics, naming the first offending pair, unless each value is above the one before.
pub fn assert_strictly_increasing<T: Ord + Debug>(values: &[T]) {
    if let Some(pair) = values.windows(2).find(|pair| pair[0] >= pair[1]) {
        panic!("not increasing: {:?} then {:?}", pair[0], pair[1]);
    }
}

/// The wall clock in unix milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

/// `SNOWFLAKE.NEXT key COUNT count`: the batch, or the server's refusal.
pub fn snowflake_batch(
    conn: &mut redis::Connection,
    key: &str,
    count: impl redis::ToRedisArgs,
) -> redis::RedisResult<Vec<i64>> {
    redis::cmd("SNOWFLAKE.NEXT")
        .arg(key)
        .arg("COUNT")
        .arg(count)
        .query(conn)
}

/// `DEBUG DIGEST` of the whole dataset.
pub fn digest(conn: &mut redis::Connection) -> String {
    redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(conn)
        .expect("DEBUG DIGEST")
}

/// One field of `INFO idgen` (without the `idgen_` prefix), as text.
pub fn info_field(conn: &mut redis::Connection, field: &str) -> String {
    let info: String = redis::cmd("INFO")
        .arg("idgen")
        .query(conn)
        .expect("INFO idgen");
    info_line(&info, &format!("idgen_{field}"))
        .unwrap_or_else(|| panic!("INFO idgen has no field {field}:\n{info}"))
}

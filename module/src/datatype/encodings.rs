//! What this release reads of data written by other releases, and the message for data it
//! cannot read.
//!
//! The `snowflake` type's encoding (the number Redis stores with each key and with the
//! module's aux record) changes only when the stored format does. A release reads every
//! encoding up to its own and writes the oldest one that holds its data, so that releases
//! next to each other replicate both ways and load each other's files (docs/guarantees.md,
//! "Upgrades and compatibility").
//!
//! A format that a release cannot read must be refused with a message saying which release
//! wrote it. For that, every encoding after [`KNOWN`] begins its aux record with the writing
//! release's version, as a string: this release reads just that much of a newer record.

use crate::ffi::data_type::Rdb;
use crate::state::version;

/// The newest encoding this release reads, and the one it writes: a key is its bound and
/// owner (2; 0 and 1, a last ID, load as a bound with no owner); the aux record is the
/// snowflake position (0) and the remembered segment values (1 on).
pub const KNOWN: i32 = 2;

/// Whether this release reads `encver`.
pub fn readable(encver: i32) -> bool {
    (0..=KNOWN).contains(&encver)
}

/// Logs why the aux record in encoding `encver` (newer than [`KNOWN`]) cannot be loaded,
/// naming the release that wrote it, read from the record's start.
pub fn refuse_aux(rdb: &mut Rdb<'_>, encver: i32) {
    let writer = rdb
        .load_bytes()
        .ok()
        .map(|text| String::from_utf8_lossy(&text).into_owned())
        .filter(|text| looks_like_a_version(text));
    rdb.log_warning(&newer_data_message(encver, writer.as_deref()));
}

/// Logs why a key in encoding `encver` (newer than [`KNOWN`]) cannot be loaded (an RDB, or a
/// `RESTORE`, `MIGRATE` or slot migration from a node on a newer release).
pub fn refuse_key(rdb: &mut Rdb<'_>, encver: i32) {
    rdb.log_warning(&newer_data_message(encver, None));
}

/// The message for data in encoding `encver`, written by release `writer` if known.
fn newer_data_message(encver: i32, writer: Option<&str>) -> String {
    let who = match writer {
        Some(writer) => format!("idgen {writer}"),
        None => "a newer idgen release".to_string(),
    };
    format!(
        "this data was written by {who} (snowflake encoding {encver}); idgen {} reads \
         encodings up to {KNOWN}: load it with {} or later, or downgrade that node only \
         after it has written its data with a release this one reads",
        version::TEXT,
        writer.map_or_else(|| "that release".to_string(), |w| format!("idgen {w}")),
    )
}

/// A release number such as `0.3.0` or `1.0.0-rc1`.
fn looks_like_a_version(text: &str) -> bool {
    let core = text.split('-').next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    text.len() <= 32
        && parts.len() == 3
        && parts
            .iter()
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_encoding_is_refused_naming_its_writer() {
        let message = newer_data_message(3, Some("0.3.0"));
        assert!(
            message.starts_with("this data was written by idgen 0.3.0 (snowflake encoding 3)")
                && message.contains("reads encodings up to 2")
                && message.contains("load it with idgen 0.3.0 or later"),
            "{message}"
        );
        let unknown = newer_data_message(7, None);
        assert!(unknown.contains("a newer idgen release"), "{unknown}");
    }

    #[test]
    fn versions_are_recognised_and_other_text_is_not() {
        assert!(looks_like_a_version("0.3.0"));
        assert!(looks_like_a_version("10.2.33-rc1"));
        assert!(!looks_like_a_version("0.3"));
        assert!(!looks_like_a_version("snowflake"));
        assert!(!looks_like_a_version(""));
        assert!(!looks_like_a_version("1.2.x"));
    }

    #[test]
    fn this_release_reads_every_encoding_up_to_its_own() {
        assert!((0..=KNOWN).all(readable));
        assert!(!readable(KNOWN + 1) && !readable(-1));
    }
}

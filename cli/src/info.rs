//! `INFO` replies read as `field → value`.

use std::collections::HashMap;

/// The `field:value` lines of an `INFO` reply (section headers and blank lines skipped).
pub fn parse_info(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once(':'))
        .map(|(field, value)| (field.trim().to_string(), value.trim().to_string()))
        .collect()
}

/// A numeric field, if present and a number.
pub fn number(info: &HashMap<String, String>, field: &str) -> Option<u64> {
    info.get(field)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_and_headers_skipped() {
        let info = parse_info("# idgen\r\nidgen_step:6\r\nidgen_warnings:a: b | c\r\n\r\n");
        assert_eq!(number(&info, "idgen_step"), Some(6));
        assert_eq!(info["idgen_warnings"], "a: b | c");
        assert_eq!(info.len(), 2);
    }
}

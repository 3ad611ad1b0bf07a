//! Formats unix milliseconds as an ISO-8601 UTC timestamp, without a date-time dependency.

/// Formats `unix_ms` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (proleptic Gregorian calendar, UTC).
pub fn format_unix_ms(unix_ms: u64) -> String {
    let days = unix_ms / 86_400_000;
    let ms_of_day = unix_ms % 86_400_000;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000
    )
}

/// Formats `unix_ms` as the calendar date `YYYY-MM-DD` (UTC).
pub fn format_date(unix_ms: u64) -> String {
    let (year, month, day) = civil_from_days(unix_ms / 86_400_000);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Converts days since 1970-01-01 into (year, month, day).
///
/// Works in 400-year eras (146,097 days each) counted from 0000-03-01, so that the leap day
/// falls at the end of each counted year and needs no special case.
fn civil_from_days(days_since_unix: u64) -> (u64, u64, u64) {
    const DAYS_0000_03_01_TO_1970_01_01: u64 = 719_468;
    let days = days_since_unix + DAYS_0000_03_01_TO_1970_01_01;
    let era = days / 146_097;
    let day_of_era = days % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(format_unix_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_unix_ms(1_704_067_200_000),
            "2024-01-01T00:00:00.000Z"
        );
        // Twitter's snowflake epoch.
        assert_eq!(
            format_unix_ms(1_288_834_974_657),
            "2010-11-04T01:42:54.657Z"
        );
        // A leap day and the last millisecond of a leap year.
        assert_eq!(format_unix_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(
            format_unix_ms(1_735_689_599_999),
            "2024-12-31T23:59:59.999Z"
        );
        assert_eq!(format_date(4_102_444_800_000), "2100-01-01");
    }

    #[test]
    fn consecutive_days_never_repeat_or_skip() {
        let mut previous = civil_from_days(0);
        for day in 1..200_000u64 {
            let current = civil_from_days(day);
            assert!(
                current > previous,
                "day {day}: {current:?} after {previous:?}"
            );
            let (y, m, d) = current;
            if d != 1 {
                assert_eq!((y, m, d - 1), previous);
            }
            previous = current;
        }
    }
}

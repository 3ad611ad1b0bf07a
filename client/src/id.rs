//! [`Id`]: an ID as applications store and send it — a number, or a string in one of the
//! forms `SNOWFLAKE.NEXT … FORMAT` replies (decimal digits for JavaScript, fixed-width base32
//! and base62 that sort like the numbers).

use std::fmt;
use std::str::FromStr;

use idgen_core::{IdFormat, IdTextError};

/// A snowflake ID or segment value. `Display` and `FromStr` use the decimal digits; other
/// forms through [`Id::format`] and [`Id::parse`]. With the crate's `serde` feature it
/// serializes as a decimal string, which JSON readers in JavaScript keep whole (as
/// Twitter's `id_str`), and deserializes from such a string or a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id(pub i64);

impl Id {
    /// The ID written in `format`: `Id(383191459228024834).format(IdFormat::Base62)` is
    /// `"0SJ1IWe1bGk"`.
    pub fn format(self, format: IdFormat) -> String {
        format.encode(self.0 as u64)
    }

    /// Reads an ID written in `format` (base32 in any case, `I`/`L` as 1, `O` as 0).
    pub fn parse(text: &str, format: IdFormat) -> Result<Id, IdTextError> {
        format.decode(text).map(|id| Id(id as i64))
    }
}

impl From<i64> for Id {
    fn from(id: i64) -> Self {
        Id(id)
    }
}

impl From<Id> for i64 {
    fn from(id: Id) -> Self {
        id.0
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for Id {
    type Err = IdTextError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Id::parse(text, IdFormat::Decimal)
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an ID as a decimal string or a non-negative integer")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Id, E> {
                text.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, id: u64) -> Result<Id, E> {
                i64::try_from(id)
                    .map(Id)
                    .map_err(|_| E::custom("an ID is at most 2^63 - 1"))
            }
            fn visit_i64<E: serde::de::Error>(self, id: i64) -> Result<Id, E> {
                (id >= 0)
                    .then_some(Id(id))
                    .ok_or_else(|| E::custom("an ID is not negative"))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_reads_back() {
        let id = Id(383_191_459_228_024_834);
        assert_eq!(id.to_string(), "383191459228024834");
        assert_eq!("383191459228024834".parse::<Id>(), Ok(id));
        for format in IdFormat::ALL {
            assert_eq!(Id::parse(&id.format(format), format), Ok(id), "{format}");
        }
        assert!(Id::parse("0SJ1IWe1bG", IdFormat::Base62).is_err());
        assert!("12a".parse::<Id>().is_err());
    }

    #[cfg(feature = "serde")]
    #[test]
    fn json_carries_a_string_and_reads_either() {
        let id = Id(383_191_459_228_024_834);
        assert_eq!(
            serde_json::to_string(&id).unwrap(),
            "\"383191459228024834\""
        );
        assert_eq!(
            serde_json::from_str::<Id>("\"383191459228024834\"").unwrap(),
            id
        );
        assert_eq!(
            serde_json::from_str::<Id>("383191459228024834").unwrap(),
            id
        );
        assert!(serde_json::from_str::<Id>("-1").is_err());
    }
}

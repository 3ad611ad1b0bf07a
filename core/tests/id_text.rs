//! Property tests of IDs as text: every format reads back what it wrote, the fixed-width
//! forms sort like the numbers (byte order is numeric order), and base32 reads any case.

use idgen_core::IdFormat;
use proptest::prelude::*;

fn id() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..=i64::MAX as u64,
        0u64..100_000,
        (i64::MAX as u64 - 100_000)..=i64::MAX as u64
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn every_format_reads_back_what_it_wrote(id in id()) {
        for format in IdFormat::ALL {
            let text = format.encode(id);
            prop_assert_eq!(format.decode(&text), Ok(id), "{} {}", format, text);
            if let Some(width) = format.width() {
                prop_assert_eq!(text.len(), width);
            }
        }
    }

    #[test]
    fn fixed_width_forms_sort_like_the_numbers(a in id(), b in id()) {
        for format in [IdFormat::Base32, IdFormat::Base62] {
            prop_assert_eq!(a.cmp(&b), format.encode(a).cmp(&format.encode(b)), "{}", format);
        }
    }

    #[test]
    fn base32_reads_any_case(id in id()) {
        let text = IdFormat::Base32.encode(id);
        prop_assert_eq!(IdFormat::Base32.decode(&text.to_lowercase()), Ok(id));
    }
}

//! `IDGEN.IDENTITY`: what a client must know to check a deployment, without `CONFIG`.
//!
//! An application's ACL user should not need `CONFIG` (an @admin, @dangerous command) to
//! check that the nodes it talks to share step and layout and have distinct offsets; this
//! keyless, read-only command answers exactly that.

use crate::ffi::call::Request;
use crate::ffi::refusal::Refusal;
use crate::state::instance;
use crate::state::leases;
use crate::state::version;

/// Replies with the node's identity as field/value pairs (a map for RESP3 clients), named
/// like the settings: step, offset, epoch, time-unit-ms, time-bits, shard-bits,
/// sequence-bits, id-bits, lease-workers, and the module version.
pub fn identity(call: &impl Request) -> Result<(), Refusal> {
    let config = instance::config();
    let layout = &config.layout;
    let numbers = [
        ("step", config.identity.step),
        ("offset", config.identity.offset),
        ("epoch", layout.epoch_unix_ms),
        ("time-unit-ms", layout.time_unit_ms),
        ("time-bits", u64::from(layout.time_bits)),
        ("shard-bits", u64::from(layout.shard_bits)),
        ("sequence-bits", u64::from(layout.sequence_bits)),
        ("id-bits", u64::from(config.id_bits)),
        ("lease-workers", leases::setup().band.count),
    ];
    call.reply_map(numbers.len() + 1);
    for (name, value) in numbers {
        call.reply_bulk(name);
        call.reply_integer(value as i64);
    }
    call.reply_bulk("version");
    call.reply_bulk(version::TEXT);
    Ok(())
}

#[cfg(test)]
mod tests {
    use idgen_core::commands::IDGEN_IDENTITY;

    use super::identity;
    use crate::commands::args::fake::FakeCall;

    #[test]
    fn the_identity_names_its_fields_like_the_settings() {
        let call = FakeCall::new(&IDGEN_IDENTITY, &[]);
        identity(&call).unwrap();
        let replied = call.replied();
        assert!(
            replied.starts_with("map 10, bulk step, int 1, bulk offset, int 0, bulk epoch, int "),
            "{replied}"
        );
        assert!(replied.contains("bulk time-bits, int 41, bulk shard-bits, int 10"));
        assert!(replied.contains("bulk lease-workers, int 4, bulk version, bulk "));
    }
}

//! `idgen decode ID`: the parts of a snowflake ID, read with the deployment's layout.

use std::time::Duration;

use idgen_client::IdFormat;
use idgen_core::utc::format_unix_ms;
use serde_json::json;

use crate::args::DecodeArgs;
use crate::client_link::{client_error, connect};
use crate::error::{CliError, EXIT_OK};
use crate::target::Target;

/// Reads an ID given as decimal digits, or as its fixed-width base32 (13 characters) or
/// base62 (11 characters) text. Digits only are decimal.
pub fn parse_id(text: &str) -> Result<i64, CliError> {
    let format = if text.bytes().all(|b| b.is_ascii_digit()) {
        IdFormat::Decimal
    } else if text.len() == 13 {
        IdFormat::Base32
    } else if text.len() == 11 {
        IdFormat::Base62
    } else {
        return Err(CliError::usage(format!(
            "{text:?} is not an ID: give decimal digits, 13 base32 or 11 base62 characters"
        )));
    };
    let id = format
        .decode(text)
        .map_err(|error| CliError::usage(error.to_string()))?;
    i64::try_from(id).map_err(|_| CliError::usage(format!("{text:?} is above 2^63 - 1")))
}

/// Decodes and prints.
pub async fn run(target: &Target, args: &DecodeArgs, timeout: Duration) -> Result<u8, CliError> {
    let id = parse_id(&args.id)?;
    let client = connect(target, timeout).await?;
    let parts = client.decode(id).map_err(|error| client_error(&error))?;
    // Only the servers know which shard values are leased worker ids (lease-workers).
    let leased = crate::leases::leased_worker(target, id, timeout).await;
    if args.json {
        println!(
            "{}",
            json!({
                "id": id.to_string(),
                "unix_ms": parts.unix_ms,
                "time": format_unix_ms(parts.unix_ms),
                "shard": parts.shard,
                "sequence": parts.sequence,
                "offset": parts.offset,
                "leased_worker": leased,
            })
        );
    } else {
        println!("id        {id}");
        println!(
            "time      {} ({} ms)",
            format_unix_ms(parts.unix_ms),
            parts.unix_ms
        );
        println!("shard     {}", parts.shard);
        println!("sequence  {}", parts.sequence);
        match leased {
            Some(worker) => println!(
                "leased    worker id {worker} (made in a process holding a lease; offset does \
                 not apply)"
            ),
            None => println!("offset    {}", parts.offset),
        }
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::parse_id;

    #[test]
    fn ids_are_read_in_every_format() {
        assert_eq!(parse_id("12345").unwrap(), 12345);
        let id = 383_182_656_508_002_312_u64;
        for format in idgen_client::IdFormat::ALL {
            assert_eq!(parse_id(&format.encode(id)).unwrap() as u64, id);
        }
        assert_eq!(parse_id("not-an-id").unwrap_err().code, 64);
    }
}

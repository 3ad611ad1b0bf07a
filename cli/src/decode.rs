//! `idgen decode ID`: the parts of a snowflake ID, read with the deployment's layout.

use std::time::Duration;

use idgen_client::IdFormat;
use idgen_core::utc::format_unix_ms;
use idgen_core::Layout;
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

/// Whether any offline layout option was given.
fn layout_given(args: &DecodeArgs) -> bool {
    args.step.is_some()
        || args.epoch.is_some()
        || args.time_bits.is_some()
        || args.shard_bits.is_some()
        || args.sequence_bits.is_some()
        || args.time_unit_ms.is_some()
}

/// The layout the options give, over the default one; refuses one no deployment can have.
fn offline_layout(args: &DecodeArgs) -> Result<Layout, CliError> {
    let default = Layout::default();
    let layout = Layout {
        time_bits: args.time_bits.unwrap_or(default.time_bits),
        shard_bits: args.shard_bits.unwrap_or(default.shard_bits),
        sequence_bits: args.sequence_bits.unwrap_or(default.sequence_bits),
        epoch_unix_ms: args.epoch.unwrap_or(default.epoch_unix_ms),
        time_unit_ms: args.time_unit_ms.unwrap_or(default.time_unit_ms),
    };
    if layout.time_bits == 0 || layout.sequence_bits == 0 {
        return Err(CliError::usage(
            "--time-bits and --sequence-bits must each be at least 1",
        ));
    }
    if layout.id_bits() > 63 {
        return Err(CliError::usage(format!(
            "--time-bits {} + --shard-bits {} + --sequence-bits {} = {}: IDs have at most 63 \
             bits",
            layout.time_bits,
            layout.shard_bits,
            layout.sequence_bits,
            layout.id_bits()
        )));
    }
    if layout.time_unit_ms == 0 || 1000 % layout.time_unit_ms != 0 {
        return Err(CliError::usage(format!(
            "--time-unit-ms {} does not divide a second (1, 10, 100, 1000, …)",
            layout.time_unit_ms
        )));
    }
    if args.step == Some(0) {
        return Err(CliError::usage("--step must be at least 1"));
    }
    Ok(layout)
}

/// `idgen decode ID` with no node named: the default layout, or the one the options give;
/// no server is asked. The offset needs the step (`--step`); a leased worker id needs a
/// node (only the nodes know `lease-workers`).
pub fn offline(args: &DecodeArgs) -> Result<u8, CliError> {
    let id = parse_id(&args.id)?;
    let layout = offline_layout(args)?;
    let parts = layout
        .decode(id, args.step.unwrap_or(1))
        .map_err(|error| CliError::usage(error.to_string()))?;
    let offset = args.step.map(|_| parts.offset);
    let default = layout == Layout::default();
    if args.json {
        let mut fields = fields_json(id, parts.unix_ms, parts.shard, parts.sequence, offset, None);
        fields["layout"] = json!({
            "source": if default { "default" } else { "options" },
            "epoch": layout.epoch_unix_ms,
            "time_unit_ms": layout.time_unit_ms,
            "time_bits": layout.time_bits,
            "shard_bits": layout.shard_bits,
            "sequence_bits": layout.sequence_bits,
            "step": args.step,
        });
        println!("{fields}");
    } else {
        let which = if default {
            "default"
        } else {
            "from the options"
        };
        print_fields(id, parts.unix_ms, parts.shard, parts.sequence);
        match offset {
            Some(offset) => println!("offset    {offset}"),
            None => println!(
                "offset    the sequence modulo the deployment's step (give --step N, or --node \
                 URL)"
            ),
        }
        println!(
            "layout    {which}, offline: {} time | {} shard | {} sequence bits, {} ms units \
             from {} (--node URL decodes with a deployment's layout)",
            layout.time_bits,
            layout.shard_bits,
            layout.sequence_bits,
            layout.time_unit_ms,
            format_unix_ms(layout.epoch_unix_ms)
        );
    }
    Ok(EXIT_OK)
}

/// The fields every decoded ID shows, as `--json` prints them.
fn fields_json(
    id: i64,
    unix_ms: u64,
    shard: u64,
    sequence: u64,
    offset: Option<u64>,
    leased_worker: Option<i64>,
) -> serde_json::Value {
    json!({
        "id": id.to_string(),
        "unix_ms": unix_ms,
        "time": format_unix_ms(unix_ms),
        "shard": shard,
        "sequence": sequence,
        "offset": offset,
        "leased_worker": leased_worker,
    })
}

/// The fields every decoded ID shows, one a line.
fn print_fields(id: i64, unix_ms: u64, shard: u64, sequence: u64) {
    println!("id        {id}");
    println!("time      {} ({unix_ms} ms)", format_unix_ms(unix_ms));
    println!("shard     {shard}");
    println!("sequence  {sequence}");
}

/// Decodes with the layout of the deployment `target` names, and prints.
pub async fn run(target: &Target, args: &DecodeArgs, timeout: Duration) -> Result<u8, CliError> {
    let id = parse_id(&args.id)?;
    if layout_given(args) {
        return Err(CliError::usage(
            "give a node (its deployment's layout) or layout options (offline), not both",
        ));
    }
    let client = connect(target, timeout).await?;
    let parts = client.decode(id).map_err(|error| client_error(&error))?;
    // Only the servers know which shard values are leased worker ids (lease-workers).
    let leased = crate::leases::leased_worker(target, id, timeout).await;
    if args.json {
        let offset = Some(parts.offset);
        let fields = fields_json(
            id,
            parts.unix_ms,
            parts.shard,
            parts.sequence,
            offset,
            leased,
        );
        println!("{fields}");
    } else {
        print_fields(id, parts.unix_ms, parts.shard, parts.sequence);
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

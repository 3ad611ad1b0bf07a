//! `idgen next KEY`: snowflake IDs or segment values, one per line.

use std::time::Duration;

use idgen_client::IdFormat;

use crate::args::{NextArgs, OutputFormat};
use crate::client_link::{client_error, connect};
use crate::error::{CliError, EXIT_OK};
use crate::target::Target;

impl OutputFormat {
    fn id_format(self) -> IdFormat {
        match self {
            OutputFormat::Decimal => IdFormat::Decimal,
            OutputFormat::Base32 => IdFormat::Base32,
            OutputFormat::Base62 => IdFormat::Base62,
        }
    }
}

/// Takes the IDs and prints them.
pub async fn run(target: &Target, args: &NextArgs, timeout: Duration) -> Result<u8, CliError> {
    if args.count == 0 {
        return Err(CliError::usage("--count must be at least 1"));
    }
    if args.segment && args.format != OutputFormat::Decimal {
        return Err(CliError::usage(
            "--format applies to snowflake IDs; segment values are plain integers",
        ));
    }
    let client = connect(target, timeout).await?;
    let lines: Vec<String> = if args.segment {
        let range = client
            .take_segment_range(&args.key, u64::from(args.count))
            .await
            .map_err(|error| client_error(&error))?;
        range.values().map(|value| value.to_string()).collect()
    } else {
        let format = args.format.id_format();
        client
            .next_snowflakes(&args.key, args.count)
            .await
            .map_err(|error| client_error(&error))?
            .into_iter()
            .map(|id| format.encode(id as u64))
            .collect()
    };
    println!("{}", lines.join("\n"));
    Ok(EXIT_OK)
}

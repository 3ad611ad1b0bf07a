//! `idgen`: check that a redis-idgen deployment is sound, watch it, take and decode IDs.
//!
//! Exit codes: 0 success (every check passed or warned); 1 a check failed, or a server
//! refused; 2 a node could not be reached; 64 the command line is wrong. Every error is one
//! line on stderr.
#![forbid(unsafe_code)]

mod args;
mod check;
mod client_link;
mod decode;
mod error;
mod info;
mod leases;
mod next;
mod node;
mod permissions;
mod report;
mod server_errors;
mod target;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::error::{CliError, EXIT_OK, EXIT_USAGE};
use crate::target::Target;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return usage_error(error),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("idgen: cannot start: {error}");
            return ExitCode::from(error::EXIT_FAILED);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("idgen: {error}");
            ExitCode::from(error.code)
        }
    }
}

/// `--help` and `--version` print and succeed; anything else clap rejects is one line and
/// exit 64.
fn usage_error(error: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match error.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = error.print();
            ExitCode::from(
                if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    EXIT_USAGE
                } else {
                    EXIT_OK
                },
            )
        }
        _ => {
            let rendered = error.render().to_string();
            let first = rendered
                .lines()
                .find(|line| !line.trim().is_empty())
                .unwrap_or("invalid command line")
                .trim_start_matches("error: ");
            eprintln!("idgen: {first} (idgen --help for usage)");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

async fn run(cli: Cli) -> Result<u8, CliError> {
    let timeout = Duration::from_millis(cli.target.timeout_ms.max(1));
    match cli.command {
        Command::Check(args) => {
            let target = Target::from_args(&cli.target, &args.urls)?;
            let report = check::run(&target, &args, timeout).await?;
            if args.json {
                println!("{}", report::json(&report));
            } else {
                print!("{}", report::text(&report));
            }
            Ok(report.exit_code())
        }
        Command::Watch(args) => {
            let target = Target::from_args(&cli.target, &args.urls)?;
            watch::run(&target, &args, timeout).await
        }
        Command::Next(args) => {
            let target = Target::from_args(&cli.target, &[])?;
            next::run(&target, &args, timeout).await
        }
        Command::Decode(args) => {
            // Decoding needs only a layout: a deployment's when one is named, else offline.
            let named = !cli.target.nodes.is_empty()
                || !cli.target.cluster.is_empty()
                || !cli.target.sentinel.is_empty();
            if named {
                let target = Target::from_args(&cli.target, &[])?;
                decode::run(&target, &args, timeout).await
            } else {
                decode::offline(&args)
            }
        }
        Command::Leases(args) => {
            let target = Target::from_args(&cli.target, &[])?;
            leases::run(&target, &args, timeout).await
        }
    }
}

//! The fault soak's command line; `scripts/soak.sh` builds the network and runs it.
//!
//! ```text
//! soak [--seconds N] [--seed S] [--topology sentinel|cluster]
//!      [--control shared-offset|identity-warn|lease-fence] [--holders H]
//!      [--namespaces] [--base-port P] [--dir DIR] [--print-plan]
//! ```
//!
//! Prints what the nemesis does as it does it, then the checker's findings and, last,
//! `soak: F faults, N snowflakes + M segment values, D duplicates, longest outage T s`, and
//! with holders (`lease_holder` processes, 4 by default) `; L leased IDs from P holder
//! processes, longest holder without an ID U s`.
//! Exits 0 only when the run passed (for a control run: when it found duplicates).

use std::path::PathBuf;

use idgen_tests::soak::deployment::Network;
use idgen_tests::soak::{run, Options, Shape};

fn main() {
    let mut options = Options {
        seconds: 90,
        seed: 1,
        shape: Shape::Sentinel,
        control_shared_offset: false,
        control_identity_warn: false,
        control_lease_fence: false,
        holders: 4,
        network: Network {
            namespaces: false,
            base_port: 7300,
        },
        run_dir: std::env::temp_dir().join(format!("soak-{}", std::process::id())),
    };
    let mut print_plan = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--seconds" => options.seconds = number(&value()),
            "--seed" => options.seed = number(&value()),
            "--topology" => {
                options.shape = match value().as_str() {
                    "sentinel" => Shape::Sentinel,
                    "cluster" => Shape::Cluster,
                    other => usage(&format!("unknown topology '{other}'")),
                }
            }
            "--control" => match value().as_str() {
                "shared-offset" => options.control_shared_offset = true,
                "identity-warn" => options.control_identity_warn = true,
                "lease-fence" => options.control_lease_fence = true,
                other => usage(&format!("unknown control '{other}'")),
            },
            "--holders" => options.holders = number(&value()),
            "--print-plan" => print_plan = true,
            "--namespaces" => options.network.namespaces = true,
            "--base-port" => options.network.base_port = number(&value()),
            "--dir" => options.run_dir = PathBuf::from(value()),
            other => usage(&format!("unknown argument '{other}'")),
        }
    }
    if options.control_identity_warn && options.shape != Shape::Cluster {
        usage("--control identity-warn needs --topology cluster (the guard is the cluster's)");
    }
    if options.control_lease_fence && (options.shape != Shape::Sentinel || options.holders < 2) {
        usage("--control lease-fence needs --topology sentinel and at least two holders");
    }
    if print_plan {
        // The seed's first steps (which faults, not what they meet: that depends on timing).
        let kinds = idgen_tests::soak::schedule::kinds(
            options.shape == Shape::Cluster,
            options.network.namespaces,
            options.holders > 0,
        );
        for step in idgen_tests::soak::schedule::plan(options.seed, 12, &kinds) {
            let names: Vec<&str> = step.faults.iter().map(|f| f.kind.name()).collect();
            println!("{}", names.join(" + "));
        }
        return;
    }
    match run(&options) {
        Ok(outcome) => {
            println!("{}", outcome.summary);
            std::process::exit(if outcome.passed { 0 } else { 1 });
        }
        Err(error) => {
            eprintln!("soak: could not run: {error}");
            std::process::exit(2);
        }
    }
}

fn number<T: std::str::FromStr>(text: &str) -> T {
    text.parse()
        .unwrap_or_else(|_| usage(&format!("'{text}' is not a number")))
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "soak: {problem}\nusage: soak [--seconds N] [--seed S] [--topology sentinel|cluster] \
         [--control shared-offset|identity-warn|lease-fence] [--holders H] [--namespaces] \
         [--base-port P] [--dir DIR] [--print-plan]"
    );
    std::process::exit(2);
}

//! What Node.js services see: through ioredis 5 and node-redis 4 (npm packages, pinned in
//! tests/node/package-lock.json), an integer reply becomes a JavaScript number of 53 bits,
//! and consecutive 63-bit IDs collapse into one; with `FORMAT decimal` or `FORMAT base62`
//! every one of 10,000 IDs arrives whole, distinct and in order.
//!
//! Needs `node` and `npm` (scripts/deps.sh --test installs them where missing); installs the
//! two clients from the npm registry into tests/node/node_modules on first use.

use std::process::Command;

use idgen_tests::{install_node_clients, node_dir, Server};
use serde_json::Value;

#[test]
fn node_js_clients_keep_every_digit_of_string_ids() {
    install_node_clients();
    let server = Server::start(&["step", "4", "offset", "3", "snowflake-restart-fence", "no"]);
    let output = Command::new("node")
        .arg(node_dir().join("ids.mjs"))
        .arg(server.port().to_string())
        .output()
        .expect("run node");
    assert!(
        output.status.success(),
        "node failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).expect("the script's JSON");
    println!("{seen}");
    // The hazard the string forms exist for: plain integer replies lose digits.
    let numbers = &seen["numbers"];
    assert_eq!(numbers["type"], "number");
    assert!(
        numbers["distinct"].as_u64().unwrap() < numbers["calls"].as_u64().unwrap(),
        "JavaScript numbers should have collapsed some 63-bit IDs: {numbers}"
    );
    for form in ["ioredis_decimal", "ioredis_base62", "node_redis_decimal"] {
        let seen = &seen[form];
        assert_eq!(seen["calls"], 10_000, "{form}");
        assert_eq!(
            seen["distinct"], 10_000,
            "{form}: no duplicate among 10,000 IDs"
        );
        assert_eq!(seen["increasing"], true, "{form}");
    }
    // The last decimal string is exactly an ID the server issued: it decodes to this
    // instance's offset.
    let last = seen["ioredis_decimal"]["last"].as_str().unwrap();
    let decoded: Vec<redis::Value> = redis::cmd("SNOWFLAKE.DECODE")
        .arg(last)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(redis::from_redis_value_ref::<i64>(&decoded[11]).unwrap(), 3);
    assert_eq!(seen["segment_range"][2], "4");
}

//! Random calls of every idgen command, with words drawn from its options, their values and
//! garbage: every call gets a reply (a value or an error, never a dropped connection), the
//! server stays up, and the calls that only read (decode, range, compose, identity) change
//! no data. The generator is seeded, so a failure repeats.

use idgen_tests::{digest, Server};

const COMMANDS: [&str; 7] = [
    "SNOWFLAKE.NEXT",
    "SEGMENT.NEXT",
    "SNOWFLAKE.DECODE",
    "SNOWFLAKE.RANGE",
    "SNOWFLAKE.COMPOSE",
    "SNOWFLAKE.BOUND",
    "IDGEN.IDENTITY",
];

const READ_ONLY: [&str; 4] = [
    "SNOWFLAKE.DECODE",
    "SNOWFLAKE.RANGE",
    "SNOWFLAKE.COMPOSE",
    "IDGEN.IDENTITY",
];

const WORDS: [&str; 34] = [
    "k",
    "seg",
    "COUNT",
    "count",
    "SHARD",
    "FORMAT",
    "format",
    "decimal",
    "base32",
    "base62",
    "BASE32",
    "hex",
    "0",
    "1",
    "-1",
    "7",
    "1023",
    "1024",
    "4095",
    "4096",
    "100000",
    "100001",
    "1800000000000",
    "1700000000000",
    "9223372036854775807",
    "9223372036854775808",
    "0AMAYK8C40008",
    "0SJ1IWe1bGk",
    "zzzzzzzzzzz",
    "7ZZZZZZZZZZZZ",
    "",
    "é",
    "{k}",
    "1.5",
];

/// A small linear congruential generator: the same calls on every run.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn random_calls_get_replies_and_reads_change_nothing() {
    let server = Server::start(&["step", "4", "offset", "1", "snowflake-restart-fence", "no"]);
    let mut conn = server.conn();
    let _: () = redis::cmd("SET")
        .arg("seg")
        .arg(10)
        .query(&mut conn)
        .unwrap();
    let mut random = Lcg(20_261_123);
    let (mut values, mut errors) = (0, 0);
    for _ in 0..5000 {
        let command = COMMANDS[random.below(COMMANDS.len())];
        let mut call = redis::cmd(command);
        for _ in 0..random.below(7) {
            call.arg(WORDS[random.below(WORDS.len())]);
        }
        let read_only = READ_ONLY.contains(&command);
        let before = read_only.then(|| digest(&mut conn));
        match call.query::<redis::Value>(&mut conn) {
            Ok(_) => values += 1,
            Err(error) => {
                assert!(
                    error.code().is_some(),
                    "{command}: not an error reply but {error} (the connection?)"
                );
                errors += 1;
            }
        }
        if let Some(before) = before {
            assert_eq!(digest(&mut conn), before, "{command} changed data");
        }
    }
    println!("5000 random calls: {values} answered, {errors} refused");
    let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
    assert_eq!(pong, "PONG");
}

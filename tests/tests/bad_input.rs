//! Every malformed call gets a clear error reply, changes nothing (DEBUG DIGEST), and the
//! server keeps running.

use idgen_tests::{digest, info_field, snowflake_batch, Server};
use redis::cmd;

/// A call given as words, and a piece of the error it must get.
struct Case {
    words: Vec<String>,
    expect: &'static str,
}

fn case(words: &str, expect: &'static str) -> Case {
    Case {
        words: words.split(' ').map(str::to_string).collect(),
        expect,
    }
}

#[test]
fn malformed_calls_are_refused_and_change_nothing() {
    let server = Server::start(&["step", "6", "offset", "2"]);
    let mut conn = server.conn();
    let sf: i64 = cmd("SNOWFLAKE.NEXT").arg("sf").query(&mut conn).unwrap();
    let setup: [(&str, &str); 6] = [
        ("seg", "10"),
        ("big", "9223372036854775800"),
        ("near_end", "9223372036854775798"),
        ("text", "hello"),
        ("neg", "-5"),
        ("float", "3.5"),
    ];
    for (key, value) in setup {
        let _: () = cmd("SET").arg(key).arg(value).query(&mut conn).unwrap();
    }
    let _: i64 = cmd("RPUSH").arg("list").arg("x").query(&mut conn).unwrap();
    let _: i64 = cmd("HSET")
        .arg("hash")
        .arg("f")
        .arg("v")
        .query(&mut conn)
        .unwrap();
    let far_future_id = idgen_core::Layout::default().compose((1 << 41) - 2, 0, 2);

    let cases = vec![
        case("SNOWFLAKE.NEXT", "wrong number of arguments"),
        case("SEGMENT.NEXT", "wrong number of arguments"),
        case(
            "SNOWFLAKE.NEXT sf COUNT 0",
            "COUNT must be a positive integer, got '0'",
        ),
        case(
            "SNOWFLAKE.NEXT sf COUNT -3",
            "COUNT must be a positive integer, got '-3'",
        ),
        case(
            "SNOWFLAKE.NEXT sf COUNT abc",
            "COUNT must be a positive integer",
        ),
        case(
            "SNOWFLAKE.NEXT sf COUNT 100001",
            "COUNT 100001 is out of range: give 1 to 100000",
        ),
        case(
            "SNOWFLAKE.NEXT sf COUNT 99999999999999999999",
            "COUNT must be a positive integer",
        ),
        case(
            "SNOWFLAKE.NEXT sf COUNT 2 COUNT 3",
            "COUNT is given more than once",
        ),
        case("SNOWFLAKE.NEXT sf BOGUS 1", "unknown option 'BOGUS'"),
        case("SNOWFLAKE.NEXT sf COUNT", "COUNT needs a value"),
        case("SNOWFLAKE.NEXT sf count 2 shard", "SHARD needs a value"),
        case(
            "SNOWFLAKE.NEXT sf SHARD 1024",
            "SHARD 1024 does not fit the layout",
        ),
        case(
            "SNOWFLAKE.NEXT sf SHARD -1",
            "SHARD must be an integer of 0 or more",
        ),
        case("SNOWFLAKE.NEXT seg", "WRONGTYPE"),
        case("SNOWFLAKE.NEXT list", "WRONGTYPE"),
        case("SEGMENT.NEXT sf", "WRONGTYPE"),
        case("SEGMENT.NEXT hash", "WRONGTYPE"),
        case("SEGMENT.NEXT text", "holds 'hello', not an integer"),
        case("SEGMENT.NEXT float", "holds '3.5', not an integer"),
        case(
            "SEGMENT.NEXT neg",
            "holds -5; SEGMENT.NEXT continues from 0 or a positive",
        ),
        case(
            "SEGMENT.NEXT big COUNT 10",
            "OVERFLOW: the counter holds 9223372036854775800; only 1 value of this instance's class left up to 9223372036854775807, the largest value, and COUNT asked for 10 (and this first call",
        ),
        // One value of the class (…802) is left, but the first call after a start skips
        // the segment fence first: the message blames the fence, not COUNT.
        case(
            "SEGMENT.NEXT near_end",
            "OVERFLOW: the counter holds 9223372036854775798; the first call for a key after a start skips idgen.segment-fence (1000000000) values",
        ),
        case(
            "SEGMENT.NEXT seg COUNT 0",
            "COUNT must be a positive integer",
        ),
        case(
            "SEGMENT.NEXT seg COUNT 1000000001",
            "COUNT 1000000001 is out of range",
        ),
        case(
            "SEGMENT.NEXT seg SHARD 1",
            "unknown option 'SHARD' for SEGMENT.NEXT",
        ),
        case("SNOWFLAKE.DECODE abc", "'abc' is not an ID"),
        case("SNOWFLAKE.DECODE -1", "-1 is not positive"),
        case("SNOWFLAKE.DECODE 0", "0 is not positive"),
        case(
            "SNOWFLAKE.DECODE 1 2",
            "unknown option '2' for SNOWFLAKE.DECODE",
        ),
        case(
            "SNOWFLAKE.NEXT sf FORMAT hex",
            "FORMAT must be one of decimal, base32, base62, got 'hex'",
        ),
        case("SNOWFLAKE.NEXT sf FORMAT", "FORMAT needs a value"),
        case(
            "SEGMENT.NEXT seg FORMAT base32",
            "FORMAT must be one of decimal, got 'base32'",
        ),
        case(
            "SNOWFLAKE.DECODE 0000000000U00 FORMAT base32",
            "'U', which is not in the base32 alphabet",
        ),
        case(
            "SNOWFLAKE.DECODE 000000000001 FORMAT base32",
            "has 12 characters; a base32 ID has 13",
        ),
        case(
            "SNOWFLAKE.DECODE zzzzzzzzzzz FORMAT base62",
            "is above 2^63 - 1",
        ),
        case(
            "SNOWFLAKE.DECODE 12a FORMAT decimal",
            "not 1 to 19 decimal digits",
        ),
        case("SNOWFLAKE.RANGE 2000000000000", "wrong number of arguments"),
        case(
            "SNOWFLAKE.RANGE 1800000000001 1800000000000",
            "the window ends (1800000000000, 2027-01-15T08:00:00.000Z) before it starts",
        ),
        case(
            "SNOWFLAKE.RANGE 5 1800000000000",
            "the window's start 5 (1970-01-01T00:00:00.005Z) is before the layout's epoch",
        ),
        case(
            "SNOWFLAKE.RANGE -5 1800000000000",
            "from-unix-ms must be an integer of 0 or more",
        ),
        case(
            "SNOWFLAKE.RANGE 1800000000000 9999999999999",
            "is past the end of the layout's time field",
        ),
        case(
            "SNOWFLAKE.COMPOSE 1800000000000 1",
            "wrong number of arguments",
        ),
        case(
            "SNOWFLAKE.COMPOSE 1800000000000 1024 0",
            "the shard 1024 does not fit the layout: it runs from 0 to 1023",
        ),
        case(
            "SNOWFLAKE.COMPOSE 1800000000000 0 4096",
            "the sequence 4096 does not fit the layout: it runs from 0 to 4095",
        ),
        case(
            "SNOWFLAKE.COMPOSE 1800000000000 x 0",
            "shard must be an integer of 0 or more",
        ),
        case(
            "SNOWFLAKE.COMPOSE 1800000000000 0 0 FORMAT octal",
            "FORMAT must be one of decimal, base32, base62, got 'octal'",
        ),
        case(
            "SNOWFLAKE.DECODE 0SaSc2p1dEC",
            "add FORMAT base32 or FORMAT base62",
        ),
        case(
            "SNOWFLAKE.SETBOUND sf notanumber",
            "the bound must be an integer",
        ),
        case(
            &format!("SNOWFLAKE.SETBOUND sf {}", sf - 1),
            "only moves a key's bound forward",
        ),
        case(&format!("SNOWFLAKE.SETBOUND sf {far_future_id}"), "DRIFT"),
        case("SNOWFLAKE.SETBOUND list 5", "WRONGTYPE"),
    ];
    assert!(cases.len() >= 20);
    let before = digest(&mut conn);
    for case in &cases {
        let result: redis::RedisResult<redis::Value> =
            cmd(&case.words[0]).arg(&case.words[1..]).query(&mut conn);
        // `CODE: message`, however the client library prints errors.
        let error = match result {
            Ok(value) => panic!("{:?} succeeded with {value:?}", case.words),
            Err(error) => format!(
                "{}: {}",
                error.code().unwrap_or("(no code)"),
                error.detail().unwrap_or_default()
            ),
        };
        assert!(
            error.contains(case.expect),
            "{:?}: got '{error}', expected '{}'",
            case.words,
            case.expect
        );
        assert_eq!(
            digest(&mut conn),
            before,
            "{:?} changed the data",
            case.words
        );
    }
    let pong: String = cmd("PING").query(&mut conn).unwrap();
    assert_eq!(pong, "PONG");
    // Arity errors are the server's; every other refusal is counted by the module.
    let counted: usize = info_field(&mut conn, "errors").parse().unwrap();
    assert!(counted >= cases.len() - 5, "{counted}");
    // And the generators still work.
    let next: i64 = cmd("SNOWFLAKE.NEXT").arg("sf").query(&mut conn).unwrap();
    assert!(next > sf);
}

#[test]
fn a_burst_past_the_drift_bound_is_refused_whole() {
    let server = Server::start(&["max-drift-ms", "3"]);
    let mut conn = server.conn();
    let _: i64 = cmd("SNOWFLAKE.NEXT").arg("k").query(&mut conn).unwrap();
    let before = digest(&mut conn);
    // 100,000 IDs at 4,096 per ms need 24 ms: far more than 3 ms ahead of the clock.
    let refused: redis::RedisResult<Vec<i64>> = snowflake_batch(&mut conn, "k", 100_000);
    let error = refused.unwrap_err();
    assert_eq!(error.code(), Some("DRIFT"), "{error}");
    assert!(
        error.to_string().contains("idgen.max-drift-ms (3)"),
        "{error}"
    );
    assert_eq!(digest(&mut conn), before);
    assert_eq!(info_field(&mut conn, "drift_refusals"), "1");
}

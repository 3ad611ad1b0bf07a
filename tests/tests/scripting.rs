//! The commands inside MULTI/EXEC, Lua scripts and functions: 10,000 IDs in one
//! transaction or script, unique and increasing; inside scripts IDs arrive as strings,
//! because Lua numbers are doubles and would round a 63-bit ID.

use idgen_tests::{assert_strictly_increasing, assert_unique, Server};
use redis::cmd;

const N: usize = 10_000;

/// 10,000 IDs in one transaction or script are several milliseconds of sequence at once;
/// in the 2 s after a start the restart fence allows one millisecond per elapsed
/// millisecond, so whether they fit would depend on how fast the server runs them. These
/// tests are about exact replies, so the fence is off.
const NO_FENCE: [&str; 2] = ["snowflake-restart-fence", "no"];

#[test]
fn ten_thousand_ids_in_one_multi() {
    let server = Server::start(&[
        "step",
        "2",
        "offset",
        "1",
        "segment-fence",
        "0",
        NO_FENCE[0],
        NO_FENCE[1],
    ]);
    let mut conn = server.conn();
    let mut pipe = redis::pipe();
    pipe.atomic();
    for _ in 0..N {
        pipe.cmd("SNOWFLAKE.NEXT").arg("tx");
    }
    let ids: Vec<i64> = pipe.query(&mut conn).unwrap();
    assert_eq!(ids.len(), N);
    assert_strictly_increasing(&ids);

    let mut pipe = redis::pipe();
    pipe.atomic();
    for _ in 0..N {
        pipe.cmd("SEGMENT.NEXT").arg("txseg");
    }
    let values: Vec<i64> = pipe.query(&mut conn).unwrap();
    assert_strictly_increasing(&values);
    assert_eq!(values[0], 1);
    assert_eq!(values[N - 1], 1 + 2 * (N as i64 - 1));
}

#[test]
fn ten_thousand_ids_in_one_lua_script_arrive_exact() {
    let server = Server::start(&NO_FENCE);
    let mut conn = server.conn();
    let script = r"
        local ids = {}
        for i = 1, tonumber(ARGV[1]) do
            ids[i] = redis.call('SNOWFLAKE.NEXT', KEYS[1])
        end
        return ids
    ";
    let ids: Vec<String> = redis::Script::new(script)
        .key("lua")
        .arg(N)
        .invoke(&mut conn)
        .unwrap();
    let ids: Vec<i64> = ids.iter().map(|id| id.parse().unwrap()).collect();
    assert_eq!(ids.len(), N);
    assert_strictly_increasing(&ids);
    // The key's recorded bound covers every ID the script got.
    let bound: i64 = cmd("SNOWFLAKE.BOUND").arg("lua").query(&mut conn).unwrap();
    assert!(bound >= ids[N - 1]);

    let batch: Vec<String> =
        redis::Script::new("return redis.call('SNOWFLAKE.NEXT', KEYS[1], 'COUNT', ARGV[1])")
            .key("lua")
            .arg(N)
            .invoke(&mut conn)
            .unwrap();
    let batch: Vec<i64> = batch.iter().map(|id| id.parse().unwrap()).collect();
    assert!(batch[0] > ids[N - 1]);
    assert_strictly_increasing(&batch);

    let values: Vec<i64> = redis::Script::new(
        "local v = {} for i = 1, tonumber(ARGV[1]) do v[i] = redis.call('SEGMENT.NEXT', KEYS[1]) end return v",
    )
    .key("luaseg")
    .arg(N)
    .invoke(&mut conn)
    .unwrap();
    assert_strictly_increasing(&values);
    assert_unique(ids.into_iter().chain(batch));
}

#[test]
fn functions_get_exact_ids_too() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    let library = "#!lua name=idlib\n\
        redis.register_function('ids', function(keys, args) \
        return redis.call('SNOWFLAKE.NEXT', keys[1], 'COUNT', args[1]) end)";
    let _: String = cmd("FUNCTION")
        .arg("LOAD")
        .arg(library)
        .query(&mut conn)
        .unwrap();
    let ids: Vec<String> = cmd("FCALL")
        .arg("ids")
        .arg(1)
        .arg("fn")
        .arg(1000)
        .query(&mut conn)
        .unwrap();
    let ids: Vec<i64> = ids.iter().map(|id| id.parse().unwrap()).collect();
    assert_strictly_increasing(&ids);
    let bound: i64 = cmd("SNOWFLAKE.BOUND").arg("fn").query(&mut conn).unwrap();
    assert!(bound >= ids[999]);
}

/// Whether a call runs in a script is remembered per client with a connection (it never
/// does): a connection's own single calls get integers before, between and after its
/// scripts' and functions' single calls, which get strings (batches inside scripts: above).
#[test]
fn a_connection_gets_integers_and_its_scripts_get_strings() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    let library = "#!lua name=onelib\n\
        redis.register_function('one', function(keys, args) \
        return redis.call('SNOWFLAKE.NEXT', keys[1]) end)";
    let _: String = cmd("FUNCTION")
        .arg("LOAD")
        .arg(library)
        .query(&mut conn)
        .unwrap();
    let script = redis::Script::new("return redis.call('SNOWFLAKE.NEXT', KEYS[1])");
    let mut ids = Vec::new();
    for round in 0..3 {
        // Direct calls, pipelined and single: integers.
        let direct: Vec<redis::Value> = (0..40)
            .fold(redis::pipe(), |mut pipe, _| {
                pipe.cmd("SNOWFLAKE.NEXT").arg("mixed");
                pipe
            })
            .query(&mut conn)
            .unwrap();
        for value in direct {
            let redis::Value::Int(id) = value else {
                panic!("round {round}: a direct call answered {value:?}, not an integer");
            };
            ids.push(id);
        }
        // The same connection's script and function: strings, exact.
        for value in [
            script
                .key("mixed")
                .invoke::<redis::Value>(&mut conn)
                .unwrap(),
            cmd("FCALL")
                .arg("one")
                .arg(1)
                .arg("mixed")
                .query::<redis::Value>(&mut conn)
                .unwrap(),
        ] {
            let redis::Value::BulkString(text) = value else {
                panic!("round {round}: a script's call answered {value:?}, not a string");
            };
            ids.push(String::from_utf8(text).unwrap().parse().unwrap());
        }
    }
    assert_strictly_increasing(&ids);
}

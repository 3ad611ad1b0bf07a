//! Masters replicate effects, never commands: the replication stream holds only absolute
//! writes, replicas end with exactly the master's data (also after MULTI and Lua), and
//! replicas refuse to issue.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use idgen_tests::{digest, Server};
use redis::cmd;

/// Issues a mix of calls: single, COUNT, SHARD, inside MULTI and inside a Lua script.
fn issue_mix(conn: &mut redis::Connection) {
    for i in 0..50 {
        let _: i64 = cmd("SNOWFLAKE.NEXT")
            .arg(format!("sf{}", i % 3))
            .query(conn)
            .unwrap();
        let _: Vec<i64> = cmd("SEGMENT.NEXT")
            .arg("seg")
            .arg("COUNT")
            .arg(i + 1)
            .query(conn)
            .unwrap();
    }
    let _: Vec<i64> = cmd("SNOWFLAKE.NEXT")
        .arg("sf0")
        .arg("COUNT")
        .arg(500)
        .arg("SHARD")
        .arg(3)
        .query(conn)
        .unwrap();
    let mut multi = redis::pipe();
    multi.atomic();
    for _ in 0..100 {
        multi
            .cmd("SNOWFLAKE.NEXT")
            .arg("tx")
            .cmd("SEGMENT.NEXT")
            .arg("txseg");
    }
    let _: Vec<i64> = multi.query(conn).unwrap();
    let _: Vec<String> = redis::Script::new(
        "local r = {} for i = 1, 100 do r[i] = redis.call('SNOWFLAKE.NEXT', KEYS[1]); redis.call('SEGMENT.NEXT', KEYS[2]) end return r",
    )
    .key("lua")
    .key("luaseg")
    .invoke(conn)
    .unwrap();
}

#[test]
fn the_replication_stream_holds_only_effects() {
    let master = Server::start(&["step", "2", "offset", "0"]);
    // redis-cli --replica prints each command of the stream as "CMD","arg",... per line.
    let mut watcher = Command::new("redis-cli")
        .args(["-p", &master.port().to_string(), "--replica"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-cli --replica");
    let (lines_tx, lines) = mpsc::channel();
    let stdout = watcher.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = |timeout| lines.recv_timeout(timeout).ok();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while master
        .info_value("replication", "connected_slaves")
        .as_deref()
        != Some("1")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "redis-cli --replica did not attach"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut conn = master.conn();
    issue_mix(&mut conn);
    let _: () = cmd("SET")
        .arg("end-marker")
        .arg(1)
        .query(&mut conn)
        .unwrap();

    let mut commands = Vec::new();
    while let Some(line) = next(Duration::from_secs(10)) {
        if line.contains("end-marker") {
            break;
        }
        commands.push(line);
    }
    let _ = watcher.kill();
    let _ = watcher.wait();

    let name = |line: &str| {
        line.split(',')
            .next()
            .unwrap_or("")
            .trim_matches('"')
            .to_uppercase()
    };
    let names: std::collections::BTreeSet<String> = commands.iter().map(|l| name(l)).collect();
    let allowed = [
        "SET",
        "SNOWFLAKE.SETBOUND",
        "MULTI",
        "EXEC",
        "PING",
        "SELECT",
    ];
    assert!(
        names.iter().all(|n| allowed.contains(&n.as_str())),
        "unexpected commands in the stream: {names:?}"
    );
    assert!(
        names.contains("SNOWFLAKE.SETBOUND") && names.contains("SET"),
        "{names:?}"
    );
    // The last SET of the counter is its value on the master: an absolute effect.
    let last_seg = commands
        .iter()
        .rev()
        .find(|l| l.starts_with("\"SET\",\"seg\""))
        .unwrap();
    let value: String = cmd("GET").arg("seg").query(&mut conn).unwrap();
    assert_eq!(*last_seg, format!("\"SET\",\"seg\",\"{value}\""));
}

#[test]
fn a_replica_ends_with_exactly_the_masters_data() {
    let master = Server::start(&["step", "2", "offset", "0"]);
    let replica = Server::start_replica(&master, &["step", "2", "offset", "1"]);
    let mut conn = master.conn();
    issue_mix(&mut conn);
    master.wait_replicated(1);
    let mut replica_conn = replica.conn();
    assert_eq!(digest(&mut conn), digest(&mut replica_conn));
    for key in ["sf0", "sf1", "tx", "lua"] {
        let on_master: i64 = cmd("SNOWFLAKE.BOUND").arg(key).query(&mut conn).unwrap();
        let on_replica: i64 = cmd("SNOWFLAKE.BOUND")
            .arg(key)
            .query(&mut replica_conn)
            .unwrap();
        assert_eq!(on_master, on_replica, "{key}");
    }
    // A replica that joins later gets the same data by full sync.
    let late = Server::start_replica(&master, &["step", "3", "offset", "2"]);
    assert_eq!(digest(&mut conn), digest(&mut late.conn()));
}

#[test]
fn replicas_refuse_to_issue_even_when_writable() {
    let master = Server::start(&["step", "2", "offset", "0"]);
    let replica = Server::start_replica(&master, &["step", "2", "offset", "1"]);
    let mut conn = replica.conn();
    let before = digest(&mut conn);
    let read_only: redis::RedisResult<i64> = cmd("SNOWFLAKE.NEXT").arg("k").query(&mut conn);
    assert_eq!(read_only.unwrap_err().code(), Some("READONLY"));
    let _: () = cmd("CONFIG")
        .arg("SET")
        .arg("replica-read-only")
        .arg("no")
        .query(&mut conn)
        .unwrap();
    for command in ["SNOWFLAKE.NEXT", "SEGMENT.NEXT"] {
        let refused: redis::RedisResult<i64> = cmd(command).arg("k").query(&mut conn);
        let error = refused.unwrap_err();
        assert_eq!(error.code(), Some("READONLY"), "{command}: {error}");
        assert!(
            error.to_string().contains("IDs are issued only by masters"),
            "{error}"
        );
    }
    assert_eq!(digest(&mut conn), before);
}

//! Nodes compare identities themselves over the cluster bus (docs/identity.md): in a
//! 3-master/3-replica cluster, a master restarted with another node's offset, another step or
//! another layout is reported by every node within seconds; the node that joined later refuses
//! to issue with an error naming the other node and the setting to change, the others keep
//! issuing; under `identity-conflicts warn` it keeps issuing; once it is restarted with the
//! right settings the conflict clears everywhere.
//!
//! And what an operator gets wrong around it: the earlier node frozen for 13 s while it is
//! still a member (a refusal never lifts because a node went quiet); healthy nodes restarted
//! one by one after a wrong one (none of them starts refusing); a master restarted onto its
//! own replica's offset (it keeps its slots issuing; the replica, once promoted, refuses).
//!
//! And a rolling upgrade to the next release half done: nodes that announce as a later
//! release would (`idgen.debug-announce-future-record yes`: a higher format version, a record
//! of an unknown tag) and nodes of this release read each other's announcements and find a
//! shared offset together, whichever side started later.

use std::time::{Duration, Instant};

use idgen_tests::{Cluster, NodeInfo};
use redis::cmd;

/// `INFO idgen` of the node on `port`, as field → value (without the `idgen_` prefix).
fn idgen_info(cluster: &Cluster, port: u16) -> Vec<(String, String)> {
    let text: String = cmd("INFO")
        .arg("idgen")
        .query(&mut cluster.node_conn(port))
        .unwrap();
    text.lines()
        .filter_map(|line| line.strip_prefix("idgen_"))
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_string(), value.trim_end().to_string()))
        .collect()
}

fn field(info: &[(String, String)], name: &str) -> String {
    info.iter()
        .find(|(field, _)| field == name)
        .unwrap_or_else(|| panic!("no idgen_{name} in {info:?}"))
        .1
        .clone()
}

/// Polls every node (every 100 ms, at most 30 s) until `wanted` holds for each one's INFO.
fn wait_on_every_node(cluster: &Cluster, what: &str, wanted: impl Fn(&[(String, String)]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let infos: Vec<_> = cluster
            .ports()
            .into_iter()
            .map(|port| (port, idgen_info(cluster, port)))
            .collect();
        if infos.iter().all(|(_, info)| wanted(info)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not every node shows {what} after 30 s: {infos:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A key whose slot the master on `port` serves.
fn key_on(cluster: &Cluster, node: &NodeInfo) -> String {
    let mut conn = cluster.node_conn(node.port);
    (0..)
        .map(|i| format!("key-{i}"))
        .find(|key| {
            let slot: u16 = cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(key)
                .query(&mut conn)
                .unwrap();
            node.owns_slot(slot)
        })
        .unwrap()
}

fn offset_of(cluster: &Cluster, port: u16) -> String {
    let reply: Vec<String> = cmd("CONFIG")
        .arg("GET")
        .arg("idgen.offset")
        .query(&mut cluster.node_conn(port))
        .unwrap();
    reply[1].clone()
}

/// The masters now, each with its slots.
fn masters(cluster: &Cluster) -> Vec<NodeInfo> {
    cluster
        .nodes()
        .into_iter()
        .filter(|node| node.master)
        .collect()
}

/// Restarts the master on `port` with `args` after its own module arguments; if its replica
/// took over while it was down, makes it master again (`CLUSTER FAILOVER`). Returns it as
/// the cluster then sees it.
fn restart_master(cluster: &Cluster, port: u16, args: &[&str]) -> NodeInfo {
    cluster.restart_node_with(port, &idgen_tests::module_path(), args);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let me = cluster.nodes().into_iter().find(|node| node.port == port);
        if let Some(me) = me.filter(|me| me.master && !me.slots.is_empty()) {
            cluster.wait_healthy();
            wait_compared(cluster, port);
            return me;
        }
        let _: redis::RedisResult<()> = cmd("CLUSTER")
            .arg("FAILOVER")
            .query(&mut cluster.node_conn(port));
        assert!(
            Instant::now() < deadline,
            "node {port} did not become master again"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits (at most 10 s) until the node on `port` has compared identities after its start
/// (it answers `TRYAGAIN` until then).
fn wait_compared(cluster: &Cluster, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while field(&idgen_info(cluster, port), "identity_standing") == "comparing" {
        assert!(
            Instant::now() < deadline,
            "node {port} still comparing after 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn next_snowflake(cluster: &Cluster, node: &NodeInfo, key: &str) -> redis::RedisResult<i64> {
    cmd("SNOWFLAKE.NEXT")
        .arg(key)
        .query(&mut cluster.node_conn(node.port))
}

fn next_segment(cluster: &Cluster, node: &NodeInfo, key: &str) -> redis::RedisResult<i64> {
    cmd("SEGMENT.NEXT")
        .arg(key)
        .query(&mut cluster.node_conn(node.port))
}

/// Every master but `refusing` issues both kinds.
fn others_issue(cluster: &Cluster, refusing: u16) {
    for master in masters(cluster).iter().filter(|m| m.port != refusing) {
        let key = key_on(cluster, master);
        next_snowflake(cluster, master, &key).expect("a running master keeps issuing");
        next_segment(cluster, master, &format!("seg-{key}")).ok();
        assert_eq!(
            field(&idgen_info(cluster, master.port), "issuing_refused"),
            "0"
        );
    }
}

fn conflicts(info: &[(String, String)]) -> u64 {
    field(info, "conflicts").parse().unwrap()
}

#[test]
fn a_master_started_with_another_nodes_offset_is_found_and_refused_until_fixed() {
    let cluster = Cluster::start();
    wait_on_every_node(&cluster, "5 peers and no conflict", |info| {
        field(info, "peers") == "5" && conflicts(info) == 0
    });
    let all = masters(&cluster);
    let (first, second) = (&all[0], &all[1]);
    let taken = offset_of(&cluster, first.port);
    let own = offset_of(&cluster, second.port);

    let second = restart_master(&cluster, second.port, &["offset", &taken]);
    wait_on_every_node(&cluster, "the shared offset", |info| {
        let detail = field(info, "conflict_detail");
        conflicts(info) == 1
            && detail.contains(&format!("offset {taken} is used by both"))
            && detail.contains(&first.id)
            && detail.contains(&second.id)
    });
    let key = key_on(&cluster, &second);
    for refused in [
        next_snowflake(&cluster, &second, &key).unwrap_err(),
        next_segment(&cluster, &second, &key).unwrap_err(),
    ] {
        let text = refused.to_string();
        assert_eq!(refused.code(), Some("CONFLICT"), "{text}");
        assert!(
            text.contains(&first.id)
                && text.contains(&format!("127.0.0.1:{}", first.port))
                && text.contains("idgen.offset"),
            "{text}"
        );
    }
    let info = idgen_info(&cluster, second.port);
    assert_eq!(field(&info, "issuing_refused"), "1");
    assert_eq!(field(&info, "identity_standing"), "refusing");
    assert_eq!(field(&info, "identity_policy"), "refuse");
    others_issue(&cluster, second.port);
    let log = cluster.log(second.port);
    assert_eq!(
        log.matches("idgen identity conflict:").count(),
        1,
        "logged once, not on every message"
    );

    // The `warn` policy: the same conflict is reported, and the node issues.
    let second = restart_master(
        &cluster,
        second.port,
        &["offset", &taken, "identity-conflicts", "warn"],
    );
    wait_on_every_node(&cluster, "the shared offset again", |info| {
        conflicts(info) == 1
    });
    let info = idgen_info(&cluster, second.port);
    assert_eq!(field(&info, "identity_policy"), "warn");
    assert_eq!(field(&info, "issuing_refused"), "0");
    assert_eq!(field(&info, "identity_standing"), "warned");
    next_snowflake(&cluster, &second, &key).expect("warn keeps issuing");

    // Corrected and restarted: the conflict clears on every node.
    let second = restart_master(&cluster, second.port, &["offset", &own]);
    wait_on_every_node(&cluster, "no conflict", |info| {
        conflicts(info) == 0 && field(info, "conflict_detail").is_empty()
    });
    next_snowflake(&cluster, &second, &key).expect("issues again once fixed");
    others_issue(&cluster, 0);
}

#[test]
fn a_master_with_another_step_or_layout_is_found_and_refused_until_fixed() {
    let cluster = Cluster::start();
    wait_on_every_node(&cluster, "5 peers", |info| field(info, "peers") == "5");
    let odd = masters(&cluster)[2].clone();
    let key = key_on(&cluster, &odd);

    for (args, words, setting) in [
        (&["step", "6"][..], "but step 8 on", "idgen.step"),
        (
            &["time-unit-ms", "10"][..],
            "in units of 10 ms on node",
            "time-unit-ms",
        ),
    ] {
        let odd = restart_master(&cluster, odd.port, args);
        // The odd node's settings differ from the 5 others': it alone is in conflict.
        wait_on_every_node(&cluster, words, |info| {
            conflicts(info) == 1 && field(info, "conflict_detail").contains(words)
        });
        let refused = next_snowflake(&cluster, &odd, &key).unwrap_err();
        assert_eq!(refused.code(), Some("CONFLICT"), "{refused}");
        assert!(refused.to_string().contains(setting), "{refused}");
        others_issue(&cluster, odd.port);
    }

    let odd = restart_master(&cluster, odd.port, &[]);
    wait_on_every_node(&cluster, "no conflict", |info| conflicts(info) == 0);
    next_snowflake(&cluster, &odd, &key).expect("issues again once fixed");
}

/// Whether the master `node` refuses both kinds with `CONFLICT` right now.
fn refuses(cluster: &Cluster, node: &NodeInfo, key: &str) -> bool {
    let snowflake = next_snowflake(cluster, node, key);
    let segment = next_segment(cluster, node, &format!("{{{key}}}:seg"));
    match (snowflake, segment) {
        (Err(a), Err(b)) => {
            assert_eq!(a.code(), Some("CONFLICT"), "{a}");
            assert_eq!(b.code(), Some("CONFLICT"), "{b}");
            true
        }
        (Ok(_), Ok(_)) => false,
        other => panic!("the two commands disagree: {other:?}"),
    }
}

/// Waits (at most 30 s) until the master `node` refuses (`wanted`) or issues.
fn wait_refusing(cluster: &Cluster, node: &NodeInfo, key: &str, wanted: bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while refuses(cluster, node, key) != wanted {
        assert!(
            Instant::now() < deadline,
            "node {} still {} after 30 s",
            node.port,
            if wanted { "issues" } else { "refuses" }
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn signal(cluster: &Cluster, port: u16, signal: libc::c_int) {
    // SAFETY: signalling a process this test started, by its pid.
    assert_eq!(
        unsafe { libc::kill(cluster.pid(port) as libc::pid_t, signal) },
        0
    );
}

#[test]
fn a_refusal_outlasts_the_earlier_nodes_silence_while_it_is_a_member() {
    // 15 s: a node frozen for 13 s stays a healthy member of the cluster, as in production.
    let cluster = Cluster::start_with_node_timeout(15_000);
    wait_on_every_node(&cluster, "5 peers", |info| field(info, "peers") == "5");
    let all = masters(&cluster);
    let (earlier, later) = (&all[0], &all[1]);
    let later = restart_master(
        &cluster,
        later.port,
        &["offset", &offset_of(&cluster, earlier.port)],
    );
    wait_on_every_node(&cluster, "the shared offset", |info| conflicts(info) == 1);
    let (key, earlier_key) = (key_on(&cluster, &later), key_on(&cluster, earlier));
    assert!(refuses(&cluster, &later, &key));

    signal(&cluster, earlier.port, libc::SIGSTOP);
    let frozen = Instant::now();
    let mut checks = 0;
    while frozen.elapsed() < Duration::from_secs(13) {
        assert!(
            refuses(&cluster, &later, &key),
            "the later node issued {:?} into the earlier node's silence",
            frozen.elapsed()
        );
        checks += 1;
        std::thread::sleep(Duration::from_millis(250));
    }
    // Every node still counts the frozen one.
    for port in cluster.ports().into_iter().filter(|&p| p != earlier.port) {
        assert_eq!(conflicts(&idgen_info(&cluster, port)), 1, "node {port}");
    }
    signal(&cluster, earlier.port, libc::SIGCONT);
    assert!(checks >= 40, "only {checks} checks in 13 s");
    assert!(
        !refuses(&cluster, earlier, &earlier_key),
        "the earlier node issues on"
    );
    assert!(refuses(&cluster, &later, &key));
}

#[test]
fn restarting_healthy_nodes_after_a_wrong_one_never_makes_them_refuse() {
    // Restarts take about a second: well inside the node timeout, nobody is failed over.
    let cluster = Cluster::start_with_node_timeout(15_000);
    wait_on_every_node(&cluster, "5 peers", |info| field(info, "peers") == "5");
    let all = masters(&cluster);
    let (a, b, c) = (all[0].clone(), all[1].clone(), all[2].clone());
    let b_key = key_on(&cluster, &b);
    let a_offset = offset_of(&cluster, a.port);
    for (mistake, words) in [
        (vec!["offset", a_offset.as_str()], "is used by both"),
        (vec!["step", "6"], "step 6 on"),
    ] {
        let b = restart_master(&cluster, b.port, &mistake);
        wait_on_every_node(&cluster, words, |info| {
            conflicts(info) == 1 && field(info, "conflict_detail").contains(words)
        });
        wait_refusing(&cluster, &b, &b_key, true);
        // A rolling restart of the healthy masters, the one b's offset copies included.
        for healthy in [&c, &a] {
            let healthy = restart_master(&cluster, healthy.port, &[]);
            wait_on_every_node(&cluster, "the same single conflict", |info| {
                conflicts(info) == 1
                    && field(info, "conflict_detail").contains(&format!("node {} refuses", b.id))
            });
            let key = key_on(&cluster, &healthy);
            assert!(
                !refuses(&cluster, &healthy, &key),
                "healthy node {} refuses",
                healthy.port
            );
            assert!(refuses(&cluster, &b, &b_key), "the wrong node issues");
        }
        others_issue(&cluster, b.port);
    }
    let b = restart_master(&cluster, b.port, &[]);
    wait_on_every_node(&cluster, "no conflict", |info| conflicts(info) == 0);
    wait_refusing(&cluster, &b, &b_key, false);
}

#[test]
fn a_master_on_its_replicas_offset_keeps_issuing_and_the_replica_refuses_once_promoted() {
    let cluster = Cluster::start_with_node_timeout(15_000);
    wait_on_every_node(&cluster, "5 peers", |info| field(info, "peers") == "5");
    let master = masters(&cluster)[0].clone();
    let replica = cluster.replica_of(&master.id);
    let own = offset_of(&cluster, master.port);
    let master = restart_master(
        &cluster,
        master.port,
        &["offset", &offset_of(&cluster, replica.port)],
    );
    wait_on_every_node(&cluster, "the replica's conflict", |info| {
        conflicts(info) == 1
            && field(info, "conflict_detail").contains("would refuse if promoted")
            && field(info, "conflict_detail").contains(&replica.id)
    });
    let key = key_on(&cluster, &master);
    assert!(
        !refuses(&cluster, &master, &key),
        "the master's slots went dark"
    );
    others_issue(&cluster, 0);

    // A coordinated failover: the replica that shares the old master's offset refuses.
    let _: () = cmd("CLUSTER")
        .arg("FAILOVER")
        .query(&mut cluster.node_conn(replica.port))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let promoted = loop {
        let now = cluster
            .nodes()
            .into_iter()
            .find(|n| n.port == replica.port)
            .unwrap();
        if now.master && !now.slots.is_empty() {
            break now;
        }
        assert!(Instant::now() < deadline, "the replica was not promoted");
        std::thread::sleep(Duration::from_millis(100));
    };
    cluster.wait_healthy();
    wait_refusing(&cluster, &promoted, &key, true);

    // Fixed: the old master (now a replica) gets its own offset back; the new master issues.
    cluster.restart_node_with(master.port, &idgen_tests::module_path(), &["offset", &own]);
    wait_compared(&cluster, master.port);
    wait_on_every_node(&cluster, "no conflict", |info| conflicts(info) == 0);
    wait_refusing(&cluster, &promoted, &key, false);
}

/// The module arguments that make a node announce as a later release would: a higher format
/// version and a record of a tag this release does not know (the hidden test setting).
const LATER_RELEASE: [&str; 2] = ["debug-announce-future-record", "yes"];

/// Every node holds a readable announcement from every other one: 5 peers, none unreadable.
fn read_by_all(info: &[(String, String)]) -> bool {
    field(info, "peers") == "5" && field(info, "announcements_unreadable") == "0"
}

#[test]
fn nodes_of_this_release_and_of_a_later_one_find_a_shared_offset_together() {
    let cluster = Cluster::start();
    wait_on_every_node(&cluster, "5 peers", read_by_all);
    let all = masters(&cluster);
    // A rolling upgrade half done: two masters announce as the next release will (their
    // replicas and the third master as this one does).
    let later_release: Vec<NodeInfo> = all[..2]
        .iter()
        .map(|master| restart_master(&cluster, master.port, &LATER_RELEASE))
        .collect();
    let (new_a, new_b, old) = (&later_release[0], &later_release[1], &all[2]);
    for node in [new_a, new_b] {
        let setting: Vec<String> = cmd("CONFIG")
            .arg("GET")
            .arg("idgen.debug-announce-future-record")
            .query(&mut cluster.node_conn(node.port))
            .unwrap();
        assert_eq!(setting[1], "yes", "node {}", node.port);
    }
    wait_on_every_node(&cluster, "every announcement read, no conflict", |info| {
        read_by_all(info) && conflicts(info) == 0
    });

    // The later node of a shared offset: of the later release with an earlier node of the
    // later release, then with an earlier node of this one; of this release with an earlier
    // node of the later one.
    for (later, earlier, release) in [
        (new_b, new_a, &LATER_RELEASE[..]),
        (new_b, old, &LATER_RELEASE[..]),
        (old, new_a, &[][..]),
    ] {
        let (taken, own) = (
            offset_of(&cluster, earlier.port),
            offset_of(&cluster, later.port),
        );
        let with = |offset| -> Vec<&str> { [release, &["offset", offset]].concat() };
        let later = restart_master(&cluster, later.port, &with(&taken));
        wait_on_every_node(
            &cluster,
            "the shared offset, every announcement read",
            |info| {
                let detail = field(info, "conflict_detail");
                read_by_all(info)
                    && conflicts(info) == 1
                    && detail.contains(&format!("offset {taken} is used by both"))
                    && detail.contains(&earlier.id)
                    && detail.contains(&later.id)
            },
        );
        let key = key_on(&cluster, &later);
        assert!(
            refuses(&cluster, &later, &key),
            "the later node {} issues",
            later.port
        );
        let info = idgen_info(&cluster, later.port);
        assert_eq!(field(&info, "identity_standing"), "refusing");
        assert!(
            field(&info, "identity_refusal").contains(&earlier.id),
            "{info:?}"
        );
        others_issue(&cluster, later.port);

        let later = restart_master(&cluster, later.port, &with(&own));
        wait_on_every_node(&cluster, "no conflict, every announcement read", |info| {
            read_by_all(info) && conflicts(info) == 0
        });
        wait_refusing(&cluster, &later, &key, false);
    }
}

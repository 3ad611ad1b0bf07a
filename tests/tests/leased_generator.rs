//! The client crate's `LeasedGenerator` against real servers: two generators on one pool
//! never share a worker id at once and their IDs never collide with each other nor with
//! `SNOWFLAKE.NEXT`'s; a generator keeps issuing with the server gone until its window
//! ends, then says why it stopped.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use idgen_client::{LeaseError, LeasedGenerator, LeasedOptions};
use idgen_tests::{assert_unique, Server, SHORT_LEASES as ARGS};
use redis::cmd;

fn options(duration_ms: u64) -> LeasedOptions {
    LeasedOptions {
        duration: Duration::from_millis(duration_ms),
        margin: Duration::from_millis(20),
        ..LeasedOptions::new("workers")
    }
}

fn shard(id: u64) -> u64 {
    (id >> 12) & 1023
}

#[test]
fn two_generators_never_share_a_worker_id_nor_an_id() {
    let server = Server::start(&ARGS);
    let url = server.url();
    let first = LeasedGenerator::start(&[&url], options(1000)).unwrap();
    let second = LeasedGenerator::start(&[&url], options(1000)).unwrap();
    assert_ne!(first.holder(), second.holder());
    let mut conn = server.conn();
    let mut module_ids: Vec<u64> = Vec::new();
    let mut leased: Vec<Vec<u64>> = vec![Vec::new(), Vec::new()];
    // Until both generators have renewed twice (about 700 ms), IDs from both and from the
    // module, checking at each step that the two hold different worker ids.
    let deadline = Instant::now() + Duration::from_secs(20);
    while first.lease_counts().1 < 2 || second.lease_counts().1 < 2 {
        assert!(Instant::now() < deadline, "the generators did not renew");
        for (generator, ids) in [&first, &second].into_iter().zip(leased.iter_mut()) {
            for _ in 0..2000 {
                ids.push(generator.next_id().expect("an ID while the server is up"));
            }
        }
        let (a, b) = (first.grant().unwrap(), second.grant().unwrap());
        assert_ne!(
            a.worker, b.worker,
            "two generators hold one worker id at once"
        );
        let batch: Vec<u64> = cmd("SNOWFLAKE.NEXT")
            .arg("orders")
            .arg("COUNT")
            .arg(500)
            .query(&mut conn)
            .unwrap();
        module_ids.extend(batch);
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut all = HashSet::new();
    for ids in &leased {
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "IDs increase");
        assert!(
            ids.iter().all(|&id| shard(id) >= 1020),
            "a leased worker id"
        );
        all.extend(ids.iter().copied());
    }
    assert!(module_ids.iter().all(|&id| shard(id) < 1020));
    all.extend(module_ids.iter().copied());
    let total = leased[0].len() + leased[1].len() + module_ids.len();
    assert_eq!(all.len(), total, "duplicate IDs");
    let listed: Vec<redis::Value> = cmd("LEASE.LIST").arg("workers").query(&mut conn).unwrap();
    assert_eq!(listed.len(), 2);
}

#[test]
fn a_generator_issues_through_an_outage_until_its_window_ends() {
    let mut server = Server::start(&ARGS);
    let url = server.url();
    let generator = LeasedGenerator::start(&[&url], options(1000)).unwrap();
    let before = generator.next_id().unwrap();
    let grant = generator.grant().unwrap();
    server.kill();
    // With the server gone, IDs go on until the window's end (by this process's clock),
    // then stop with a reason.
    let mut after_kill = 0u64;
    let mut last = before;
    let deadline = Instant::now() + Duration::from_secs(10);
    let error = loop {
        assert!(Instant::now() < deadline, "the generator never stopped");
        match generator.next_id() {
            Ok(id) => {
                assert!(id > last);
                assert_eq!(shard(id), grant.worker);
                assert!(id >> 22 <= grant.end_unit, "an ID past the window");
                last = id;
                after_kill += 1;
            }
            Err(error) => break error,
        }
        if after_kill.is_multiple_of(1000) {
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    assert!(after_kill > 0, "no ID during the outage");
    assert!(
        matches!(error, LeaseError::Unreachable { .. }),
        "{error:?}: {error}"
    );
    // It stays stopped.
    assert!(generator.try_next_id().is_err());
}

#[test]
fn leases_off_is_a_clear_refusal() {
    let server = Server::start(&[]);
    let error = LeasedGenerator::start(&[&server.url()], options(1000)).unwrap_err();
    match error {
        LeaseError::Refused { message } => assert!(message.contains("LEASESOFF"), "{message}"),
        other => panic!("{other:?}"),
    }
}

/// A restart (from the AOF) fences the worker ids: the renewal is refused, the generator
/// issues to its window's end, takes a new lease once the fence allows, and goes on; its IDs
/// increase throughout and never repeat.
#[test]
fn a_generator_takes_a_new_lease_after_its_server_restarts() {
    let server_options = idgen_tests::ServerOptions::module(&ARGS).server_args(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]);
    let mut server = Server::start_with(server_options).unwrap();
    let url = server.url();
    let generator = LeasedGenerator::start(&[&url], options(1000)).unwrap();
    let mut ids = vec![generator.next_id().unwrap()];
    let first = generator.grant().unwrap();
    server.terminate();
    server.start_again(&[]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let is_new = |grant: idgen_client::LeaseGrant| {
        grant.worker != first.worker || grant.start_unit != first.start_unit
    };
    // Until IDs come from a new lease (in between, the generator says why it has none).
    loop {
        assert!(Instant::now() < deadline, "no new lease after the restart");
        match generator.next_id() {
            Ok(id) => {
                ids.push(id);
                if generator.grant().is_some_and(is_new) && id >> 22 > first.end_unit {
                    break;
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "IDs increase");
    let unique: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len());
    let second = generator.grant().unwrap();
    assert_eq!(shard(*ids.last().unwrap()), second.worker);
    // The fence: a window of the same worker id starts after the one before.
    assert!(second.worker != first.worker || second.start_unit > first.end_unit);
}

/// In a Redis Cluster the generator follows the pool key to the master that holds its slot
/// (from any seed), and that master leases only worker ids of its own offset.
#[test]
fn a_generator_finds_its_pool_in_a_cluster() {
    let cluster = idgen_tests::Cluster::start_with_module_args(&[
        "lease-workers",
        "16",
        "lease-max-ms",
        "1000",
        "max-drift-ms",
        "100",
    ]);
    let slot: u16 = {
        let mut any = cluster.node_conn(cluster.ports()[0]);
        cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg("workers")
            .query(&mut any)
            .unwrap()
    };
    let owner = cluster
        .nodes()
        .into_iter()
        .find(|node| node.master && node.owns_slot(slot))
        .expect("a master owns the pool's slot");
    // Seeds that start with a node that does not hold the pool: it answers MOVED.
    let mut urls = cluster.urls();
    urls.sort_by_key(|url| url.contains(&format!(":{}/", owner.port)));
    let seeds: Vec<&str> = urls.iter().map(String::as_str).collect();
    let generator = LeasedGenerator::start(&seeds, options(1000)).unwrap();
    let ids: Vec<u64> = (0..10_000).map(|_| generator.next_id().unwrap()).collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
    let worker = generator.grant().unwrap().worker;
    assert!(ids.iter().all(|&id| shard(id) == worker));
    let mut conn = cluster.conn();
    let listed: Vec<redis::Value> = cmd("LEASE.LIST").arg("workers").query(&mut conn).unwrap();
    assert_eq!(listed.len(), 1);
    // The worker id is of the owning master's offset class.
    let offset: u64 = {
        let mut node = cluster.node_conn(owner.port);
        let info: String = cmd("INFO").arg("idgen").query(&mut node).unwrap();
        idgen_tests::info_line(&info, "idgen_offset")
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(
        (worker - 1008) % 8,
        offset,
        "worker {worker} on offset {offset}"
    );
}

/// More generators than worker ids: the one without says so.
#[test]
fn a_generator_without_a_free_worker_id_says_so() {
    let server = Server::start(&[
        "lease-workers",
        "1",
        "lease-max-ms",
        "1000",
        "max-drift-ms",
        "100",
    ]);
    let url = server.url();
    let holder = LeasedGenerator::start(&[&url], options(1000)).unwrap();
    holder.next_id().unwrap();
    let short = LeasedOptions {
        start_timeout: Duration::from_millis(300),
        ..options(1000)
    };
    match LeasedGenerator::start(&[&url], short) {
        Err(LeaseError::NoWorkerFree { message }) => {
            assert!(message.contains("no worker id free"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

/// The master dies and its replica (another offset) is promoted: the generator goes on to
/// its window's end, moves to the replica, is refused the renewal there (fenced), takes a
/// worker id of the replica's offset, and its IDs never repeat.
#[test]
fn a_generator_moves_to_a_promoted_replica() {
    let args = |offset: &'static str| {
        let mut args = vec!["step", "2", "offset", offset];
        args.extend(ARGS);
        args
    };
    let mut master = Server::start(&args("0"));
    let replica = Server::start_replica(&master, &args("1"));
    let (master_url, replica_url) = (master.url(), replica.url());
    let generator = LeasedGenerator::start(&[&master_url, &replica_url], options(1000)).unwrap();
    let mut ids = vec![generator.next_id().unwrap()];
    let first = generator.grant().unwrap();
    master.wait_replicated(1);
    master.kill();
    let _: () = cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut replica.conn())
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(
            Instant::now() < deadline,
            "no lease from the promoted replica"
        );
        match generator.next_id() {
            Ok(id) => {
                ids.push(id);
                if shard(id) != first.worker {
                    break;
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    // Offset 1's worker ids: the band's positions 1 and 3.
    let second = generator.grant().unwrap();
    assert!([1021, 1023].contains(&second.worker), "{second:?}");
    assert!([1020, 1022].contains(&first.worker), "{first:?}");
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
    let unique: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len());
}

/// A `lease_holder` process (tests/src/bin/lease_holder.rs) on pool `workers`, writing into
/// `dir`; one worker id in the band, so that the next holder must take the same one.
struct HolderProcess {
    child: std::process::Child,
    dir: std::path::PathBuf,
}

/// One leased worker id, 1 s windows, 100 ms of drift allowance.
const ONE_WORKER: [&str; 6] = [
    "lease-workers",
    "1",
    "lease-max-ms",
    "1000",
    "max-drift-ms",
    "100",
];

impl HolderProcess {
    fn start(url: &str, dir: std::path::PathBuf) -> HolderProcess {
        std::fs::create_dir_all(&dir).unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_lease_holder"))
            .args(["--urls", url, "--pool", "workers", "--duration-ms", "1000"])
            .arg("--dir")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start lease_holder");
        HolderProcess { child, dir }
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: signalling a child this test started and has not reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }

    /// SIGSTOP, and waits until the process is stopped (its state `T`).
    fn freeze(&self) {
        self.signal(libc::SIGSTOP);
        let stat = format!("/proc/{}/stat", self.child.id());
        wait_for("the holder to stop", || {
            std::fs::read_to_string(&stat).is_ok_and(|text| {
                text.rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('T'))
            })
        });
    }

    /// Every ID written so far.
    fn ids(&self) -> Vec<u64> {
        std::fs::read(self.dir.join("ids.bin"))
            .unwrap_or_default()
            .chunks_exact(8)
            .map(|chunk| u64::from_le_bytes(chunk.try_into().unwrap()))
            .collect()
    }

    /// The windows it took up: (worker id, last unix ms), in order.
    fn leases(&self) -> Vec<(u64, u64)> {
        let log = std::fs::read_to_string(self.dir.join("log.tsv")).unwrap_or_default();
        // `unix_ms<TAB>lease<TAB>worker W units A..=B end_unix_ms E`
        log.lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split('\t').collect();
                let words: Vec<&str> = fields.get(2)?.split_whitespace().collect();
                (fields[1] == "lease").then_some(())?;
                Some((words.get(1)?.parse().ok()?, words.get(5)?.parse().ok()?))
            })
            .collect()
    }

    /// SIGTERM and wait: the holder releases its lease and exits.
    fn stop(mut self) -> Vec<u64> {
        self.signal(libc::SIGCONT);
        self.signal(libc::SIGTERM);
        self.child.wait().unwrap();
        self.ids()
    }
}

impl Drop for HolderProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for `condition` (a bound of 30 s only turns a hang into a failure).
fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(Instant::now() < deadline, "waited 30 s for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn unix_ms_of(id: u64) -> u64 {
    idgen_core::DEFAULT_EPOCH_UNIX_MS + (id >> 22)
}

fn scratch_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("leased-{name}-{}", std::process::id()))
}

/// A holder process frozen (SIGSTOP) past its window: meanwhile another process takes the
/// worker id; when the first wakes it issues nothing under its old window, and nothing at
/// all until it holds a new window — after the second's. No ID of one equals the other's.
#[test]
fn a_holder_frozen_past_its_window_issues_nothing_until_it_holds_a_new_one() {
    let server = Server::start(&ONE_WORKER);
    let url = server.url();
    let dir = scratch_dir("frozen");
    let first = HolderProcess::start(&url, dir.join("a"));
    wait_for("the first holder's IDs", || first.ids().len() > 1000);
    first.freeze();
    let frozen_ids = first.ids().len();
    let (worker, first_end) = *first.leases().last().unwrap();
    // The second holder gets the only worker id once the first's window has ended.
    let second = HolderProcess::start(&url, dir.join("b"));
    wait_for("the second holder's IDs", || second.ids().len() > 1000);
    assert_eq!(second.leases()[0].0, worker);
    first.signal(libc::SIGCONT);
    // The first wakes past its window: while the second holds the worker id it has none.
    let awake = Instant::now();
    wait_for("the second holder's renewals", || {
        awake.elapsed() > Duration::from_millis(1500) && second.leases().len() >= 3
    });
    assert_eq!(
        first.ids().len(),
        frozen_ids,
        "issued after waking, under no lease"
    );
    let second_ids = second.stop();
    // Released: the first takes the worker id again and goes on.
    wait_for("the first holder's IDs after the second stopped", || {
        first.ids().len() > frozen_ids + 1000
    });
    let first_ids = first.stop();
    let second_last = unix_ms_of(*second_ids.last().unwrap());
    for &id in &first_ids[..frozen_ids] {
        assert!(unix_ms_of(id) <= first_end, "an ID past the first window");
    }
    for &id in &first_ids[frozen_ids..] {
        assert!(
            unix_ms_of(id) > second_last,
            "an ID of the first holder under the second's window"
        );
    }
    assert_unique(first_ids.iter().chain(&second_ids).copied());
    let _ = std::fs::remove_dir_all(dir);
}

/// A holder whose clock (the one its generator reads) steps back a minute thinks its window
/// lasts a minute longer: it still issues nothing past the window the server granted, and
/// the next holder of the worker id, whose window starts after it, never repeats its IDs.
#[test]
fn a_holder_whose_clock_steps_back_stays_inside_its_window() {
    let server = Server::start(&ONE_WORKER);
    let url = server.url();
    let dir = scratch_dir("clock");
    let first = HolderProcess::start(&url, dir.join("a"));
    wait_for("the first holder's IDs", || first.ids().len() > 1000);
    std::fs::write(dir.join("a").join("clock_offset_ms"), "-60000").unwrap();
    let second = HolderProcess::start(&url, dir.join("b"));
    wait_for("the second holder's IDs", || second.ids().len() > 2000);
    let second_ids = second.stop();
    let first_leases = first.leases();
    let first_ids = first.stop();
    let first_end = first_leases.iter().map(|&(_, end)| end).max().unwrap();
    assert!(first_ids.iter().all(|&id| unix_ms_of(id) <= first_end));
    let second_first = unix_ms_of(second_ids[0]);
    assert!(
        first_end < second_first,
        "the second window starts after the first"
    );
    assert_unique(first_ids.iter().chain(&second_ids).copied());
    let _ = std::fs::remove_dir_all(dir);
}

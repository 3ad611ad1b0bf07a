//! Three independent masters (step 3, offsets 0, 1, 2) issuing for the same keys from
//! concurrent clients: no ID or segment value is ever handed out twice, and each ID names
//! the master that issued it.

use std::thread;

use idgen_core::Layout;
use idgen_tests::{assert_unique, snowflake_batch, Server};
use redis::cmd;

#[test]
fn three_masters_never_hand_out_the_same_value() {
    let servers: Vec<Server> = (0..3)
        .map(|offset| Server::start(&["step", "3", "offset", &offset.to_string()]))
        .collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();

    let workers: Vec<_> = (0..3)
        .map(|worker| {
            let urls = urls.clone();
            thread::spawn(move || {
                let mut conns: Vec<redis::Connection> = urls
                    .iter()
                    .map(|url| {
                        redis::Client::open(url.as_str())
                            .unwrap()
                            .get_connection()
                            .unwrap()
                    })
                    .collect();
                let mut snowflakes = Vec::new();
                let mut segments = Vec::new();
                for i in 0..1500usize {
                    let node = (i + worker) % 3;
                    let count = 1 + (i * 7 + worker) % 40;
                    let ids: Vec<i64> = snowflake_batch(&mut conns[node], "orders", count).unwrap();
                    snowflakes.extend(ids.into_iter().map(|id| (id, node)));
                    let [first, last, step]: [i64; 3] = cmd("SEGMENT.NEXT")
                        .arg("invoice")
                        .arg("COUNT")
                        .arg(count)
                        .query(&mut conns[node])
                        .unwrap();
                    assert_eq!(last, first + (count as i64 - 1) * step);
                    segments.extend((0..count as i64).map(|k| (first + k * step, node)));
                }
                (snowflakes, segments)
            })
        })
        .collect();

    let mut snowflakes = Vec::new();
    let mut segments = Vec::new();
    for worker in workers {
        let (s, g) = worker.join().unwrap();
        snowflakes.extend(s);
        segments.extend(g);
    }
    let layout = Layout::default();
    for &(id, node) in &snowflakes {
        assert_eq!(layout.decode(id, 3).unwrap().offset, node as u64);
    }
    for &(value, node) in &segments {
        assert_eq!(value % 3, node as i64);
    }
    let issued = assert_unique(snowflakes.iter().map(|&(id, _)| id));
    let values = assert_unique(segments.iter().map(|&(value, _)| value));
    println!("three masters: {issued} snowflake IDs and {values} segment values, 0 duplicates");
    drop(servers);
}

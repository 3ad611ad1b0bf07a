//! Reading a `CLUSTER NODES` reply: which members a cluster lists, at which addresses, and
//! whether it marks them failing. The client finds the nodes to check with it; the `idgen`
//! tool lists them in its reports.

/// One member line of a `CLUSTER NODES` reply.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub struct ClusterMember {
    /// The host the member announces (an IP address, or a hostname).
    pub host: String,
    /// Its client port (the bus port, after `@`, is left out).
    pub port: u16,
    /// Flagged `fail`: the majority of masters agree it is down.
    pub failed: bool,
    /// Flagged `fail?`: one node cannot reach it (not yet agreed).
    pub suspected: bool,
}

/// The members with an address in a `CLUSTER NODES` reply, in the reply's order. Lines
/// flagged `noaddr` or `handshake` (no address to use yet), or without a host and port, are
/// left out.
pub fn cluster_members(reply: &str) -> Vec<ClusterMember> {
    reply
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let address = fields.nth(1)?.split('@').next()?;
            let flags: Vec<&str> = fields.next()?.split(',').collect();
            if flags
                .iter()
                .any(|flag| matches!(*flag, "noaddr" | "handshake"))
            {
                return None;
            }
            let (host, port) = address.rsplit_once(':')?;
            let port: u16 = port.parse().ok()?;
            if host.is_empty() || port == 0 {
                return None;
            }
            Some(ClusterMember {
                host: host.to_string(),
                port,
                failed: flags.contains(&"fail"),
                suspected: flags.contains(&"fail?"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(port: u16, failed: bool, suspected: bool) -> ClusterMember {
        ClusterMember {
            host: "127.0.0.1".into(),
            port,
            failed,
            suspected,
        }
    }

    #[test]
    fn members_keep_their_failure_flags_and_those_without_an_address_are_left_out() {
        let reply = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7001@17001 master,fail? - 0 0 2 connected 5461-10922
c3 127.0.0.1:7003@17003 slave a1 0 0 1 connected
d4 127.0.0.1:7004@17004 slave,fail b2 0 0 2 disconnected
e5 :0@0 master,noaddr - 0 0 0 disconnected
f6 127.0.0.1:7005@17005 handshake - 0 0 0 disconnected
";
        assert_eq!(
            cluster_members(reply),
            [
                member(7000, false, false),
                member(7001, false, true),
                member(7003, false, false),
                member(7004, true, false),
            ]
        );
    }

    #[test]
    fn an_announced_hostname_after_the_bus_port_is_not_part_of_the_address() {
        let reply =
            "a1 10.0.0.5:6379@16379,redis-0.example myself,master - 0 0 1 connected 0-16383\n";
        assert_eq!(
            cluster_members(reply),
            [ClusterMember {
                host: "10.0.0.5".into(),
                port: 6379,
                failed: false,
                suspected: false,
            }]
        );
    }
}

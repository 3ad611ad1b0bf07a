//! The leased generator's conversation with the servers: `LEASE.ACQUIRE`, `LEASE.RENEW` and
//! `LEASE.RELEASE` over a blocking connection, following cluster redirections and moving to
//! the next node when one fails, and the replies' errors sorted into [`LeaseError`]s.

use std::collections::HashMap;
use std::time::Duration;

use idgen_core::Layout;

use crate::api::leased::cursor::Grant;
use crate::api::leased::error::LeaseError;
use crate::commands::build;

/// The background thread's connection to the servers, as one holder of one pool.
pub(crate) struct Session {
    clients: Vec<redis::Client>,
    current: usize,
    connection: Option<redis::Connection>,
    pool: String,
    /// This generator's holder name in the pool.
    pub(crate) holder: String,
    /// How long a window should last (`DURATION`), in ms.
    duration_ms: u64,
    request_timeout: Duration,
}

impl Session {
    /// A session with the nodes at `urls` (none contacted yet): the first is asked first,
    /// the next when it fails.
    pub(crate) fn new(
        urls: &[&str],
        pool: &str,
        holder: String,
        duration: Duration,
        request_timeout: Duration,
    ) -> Result<Self, LeaseError> {
        let clients = urls
            .iter()
            .map(|url| redis::Client::open(*url))
            .collect::<Result<_, _>>()
            .map_err(|error| LeaseError::Refused {
                message: error.to_string(),
            })?;
        Ok(Session {
            clients,
            current: 0,
            connection: None,
            pool: pool.to_string(),
            holder,
            duration_ms: duration.as_millis() as u64,
            request_timeout,
        })
    }

    fn connection(&mut self) -> Result<&mut redis::Connection, LeaseError> {
        if self.connection.is_none() {
            let client = &self.clients[self.current % self.clients.len()];
            let connection = client
                .get_connection_with_timeout(self.request_timeout)
                .map_err(|error| self.unreachable(error))?;
            let _ = connection.set_read_timeout(Some(self.request_timeout));
            let _ = connection.set_write_timeout(Some(self.request_timeout));
            self.connection = Some(connection);
        }
        Ok(self.connection.as_mut().expect("just connected"))
    }

    fn unreachable(&mut self, error: redis::RedisError) -> LeaseError {
        // Try the next node next time.
        self.connection = None;
        self.current += 1;
        LeaseError::Unreachable {
            message: error.to_string(),
        }
    }

    fn query(&mut self, command: &redis::Cmd) -> Result<(Grant, Layout), LeaseError> {
        // In a cluster the pool's key may live elsewhere, or move: follow a redirection.
        for _ in 0..3 {
            let reply: redis::RedisResult<HashMap<String, redis::Value>> =
                command.query(self.connection()?);
            match reply {
                Ok(map) => {
                    return parse_grant(&map).ok_or_else(|| LeaseError::Refused {
                        message: format!("unexpected lease reply: {map:?}"),
                    })
                }
                Err(error) => match error.redirect_node() {
                    Some((address, _)) => self.redirect(address)?,
                    None => return Err(self.classify(error)),
                },
            }
        }
        Err(LeaseError::Unreachable {
            message: "redirected more than three times".into(),
        })
    }

    /// Talks to the node at `address` (`host:port`) from now on, with the same credentials
    /// and TLS as the node that redirected there.
    fn redirect(&mut self, address: &str) -> Result<(), LeaseError> {
        let (host, port) = address
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host.to_string(), port.parse::<u16>().ok()?)))
            .ok_or_else(|| LeaseError::Refused {
                message: format!("a redirection to '{address}', which is not host:port"),
            })?;
        let index = self.current % self.clients.len();
        let info = self.clients[index].get_connection_info().clone();
        let mut addr = info.addr().clone();
        match &mut addr {
            redis::ConnectionAddr::TcpTls {
                host: tls_host,
                port: tls_port,
                ..
            } => {
                *tls_host = host;
                *tls_port = port;
            }
            other => *other = redis::ConnectionAddr::Tcp(host, port),
        }
        let client =
            redis::Client::open(info.set_addr(addr)).map_err(|error| LeaseError::Refused {
                message: error.to_string(),
            })?;
        self.clients[index] = client;
        self.connection = None;
        Ok(())
    }

    fn classify(&mut self, error: redis::RedisError) -> LeaseError {
        let message = format!(
            "{} {}",
            error.code().unwrap_or(""),
            error.detail().unwrap_or("")
        )
        .trim()
        .to_string();
        match error.code() {
            Some("EXHAUSTED") => LeaseError::NoWorkerFree { message },
            Some("NOTHELD") | Some("LEASELOST") => LeaseError::WindowEnded,
            // A replica (before its promotion) or a node on its way: try another.
            Some("READONLY") | Some("LOADING") | Some("MASTERDOWN") | Some("TRYAGAIN") => {
                self.unreachable(error)
            }
            Some(_) => LeaseError::Refused { message },
            None => self.unreachable(error),
        }
    }

    /// A new lease: `LEASE.ACQUIRE`.
    pub(crate) fn acquire(&mut self) -> Result<(Grant, Layout), LeaseError> {
        self.query(&build::lease_acquire(
            &self.pool,
            &self.holder,
            self.duration_ms,
        ))
    }

    /// The lease on `worker` extended: `LEASE.RENEW`.
    pub(crate) fn renew(&mut self, worker: u64) -> Result<(Grant, Layout), LeaseError> {
        let command = build::lease_renew(&self.pool, worker, &self.holder, self.duration_ms);
        self.query(&command)
    }

    /// The lease on `worker` given back, if a node answers: `LEASE.RELEASE`.
    pub(crate) fn release(&mut self, worker: u64) {
        let command = build::lease_release(&self.pool, worker, &self.holder);
        if let Ok(connection) = self.connection() {
            let _: redis::RedisResult<()> = command.query(connection);
        }
    }
}

fn parse_grant(map: &HashMap<String, redis::Value>) -> Option<(Grant, Layout)> {
    let int = |field: &str| match map.get(field)? {
        redis::Value::Int(value) => u64::try_from(*value).ok(),
        _ => None,
    };
    let grant = Grant {
        worker: int("worker")?,
        start_unit: int("start_unit")?,
        end_unit: int("end_unit")?,
        end_unix_ms: int("end_unix_ms")?,
        server_now_ms: int("now_unix_ms")?,
    };
    let layout = Layout {
        time_bits: u32::try_from(int("time_bits")?).ok()?,
        shard_bits: u32::try_from(int("shard_bits")?).ok()?,
        sequence_bits: u32::try_from(int("sequence_bits")?).ok()?,
        epoch_unix_ms: int("epoch_ms")?,
        time_unit_ms: int("time_unit_ms")?,
    };
    Some((grant, layout))
}

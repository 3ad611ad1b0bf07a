//! Connection info for a node the client finds by itself (a cluster member, a master or
//! replica named by Sentinel): the address it was told, with the credentials, database and
//! TLS settings the application gave for such nodes.

use redis::{ConnectionAddr, ConnectionInfo};

use crate::error::{Error, Result};

/// `template` pointed at `host:port`. `what` names the template in the error ("a cluster
/// seed").
pub(crate) fn at(
    template: &ConnectionInfo,
    what: &str,
    host: String,
    port: u16,
) -> Result<ConnectionInfo> {
    let addr = match template.addr() {
        ConnectionAddr::Tcp(..) => ConnectionAddr::Tcp(host, port),
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        other => {
            return Err(Error::InvalidArgument(format!(
                "{what} must be a TCP address, not {other}"
            )))
        }
    };
    Ok(template.clone().set_addr(addr))
}

/// The host and port of a TCP (or TLS) address.
pub(crate) fn host_port(info: &ConnectionInfo) -> Option<(String, u16)> {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            Some((host.clone(), *port))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_found_node_keeps_the_templates_credentials_and_tls() {
        let template =
            redis::IntoConnectionInfo::into_connection_info("redis://app:pw@10.0.0.1:7000/3")
                .unwrap();
        let other = at(&template, "a seed", "10.0.0.2".into(), 7001).unwrap();
        assert_eq!(other.addr().to_string(), "10.0.0.2:7001");
        let redis = other.redis_settings();
        assert_eq!(
            (redis.username(), redis.password(), redis.db()),
            (Some("app"), Some("pw"), 3)
        );
        assert_eq!(host_port(&other), Some(("10.0.0.2".to_string(), 7001)));
    }

    #[cfg(feature = "tls-rustls-insecure")]
    #[test]
    fn tls_and_its_certificate_check_setting_carry_over() {
        let template =
            redis::IntoConnectionInfo::into_connection_info("rediss://10.0.0.1:7000/#insecure")
                .unwrap();
        let other = at(&template, "a seed", "10.0.0.2".into(), 7001).unwrap();
        assert!(matches!(
            other.addr(),
            ConnectionAddr::TcpTls {
                insecure: true,
                port: 7001,
                ..
            }
        ));
    }
}

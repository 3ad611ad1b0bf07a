//! Telling a TLS certificate that was not accepted apart from a node that cannot be
//! reached, and saying how to trust a private CA: without this, a server whose certificate
//! the client does not trust looked like a node that is down.

/// Where the client finds the CA certificates it trusts, and how to add a private CA: the
/// end of every certificate error.
const HOW_TO_TRUST: &str = "the client trusts the system's CA certificates and those in the \
     PEM file the SSL_CERT_FILE environment variable names: for a private CA, start the \
     application with SSL_CERT_FILE=/path/to/ca.crt (or give the CA in the ConnectionInfo's \
     TLS settings, redis::TlsCertificates)";

/// Whether `error` is a TLS certificate the client refused (rather than a connection that
/// failed).
pub(crate) fn is_certificate_error(error: &redis::RedisError) -> bool {
    #[cfg(feature = "tls-rustls")]
    if rustls_error(error).is_some_and(|tls| {
        matches!(
            tls,
            rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
        )
    }) {
        return true;
    }
    #[cfg(feature = "tls-native-tls")]
    if error.is_io_error() && error.to_string().to_lowercase().contains("certificate") {
        // native-tls gives the platform library's error as text only (OpenSSL's
        // "certificate verify failed").
        return true;
    }
    let _ = error;
    false
}

/// What was wrong with the certificate, and how to trust a private CA.
pub(crate) fn explain_certificate_error(error: &redis::RedisError) -> String {
    #[cfg(feature = "tls-rustls")]
    if let Some(tls) = rustls_error(error) {
        let what = match tls {
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => {
                "the server's certificate is signed by a CA this client does not trust"
            }
            _ => "the server's certificate was refused",
        };
        return format!("{what} ({tls}); {HOW_TO_TRUST}");
    }
    format!("{error}; {HOW_TO_TRUST}")
}

/// The rustls error inside a redis-rs I/O error: redis-rs keeps the I/O error behind an
/// `Arc<dyn Error>`, and the TLS stream puts rustls's error inside the I/O error.
#[cfg(feature = "tls-rustls")]
fn rustls_error(error: &redis::RedisError) -> Option<&rustls::Error> {
    use std::error::Error as _;
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    let source = error.source()?;
    let io: &std::io::Error = match source.downcast_ref::<Shared>() {
        Some(shared) => shared.downcast_ref()?,
        None => source.downcast_ref()?,
    };
    io.get_ref()?.downcast_ref::<rustls::Error>()
}

#[cfg(all(test, feature = "tls-rustls"))]
mod tests {
    use super::*;

    #[test]
    fn an_untrusted_certificate_is_told_apart_from_a_lost_connection() {
        let untrusted = redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        ));
        assert!(is_certificate_error(&untrusted));
        let text = explain_certificate_error(&untrusted);
        assert!(
            text.starts_with(
                "the server's certificate is signed by a CA this client does not trust \
                 (invalid peer certificate: UnknownIssuer); "
            ) && text.contains("SSL_CERT_FILE=/path/to/ca.crt"),
            "{text}"
        );
        let refused =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(!is_certificate_error(&refused));
    }
}

//! Certificates for TLS tests, made by the test itself (no openssl binary needed).

use std::path::{Path, PathBuf};

/// A self-signed certificate for 127.0.0.1 and localhost, and its key, as PEM files. The
/// certificate is its own CA (servers are started with it as `tls-ca-cert-file`); clients
/// connect with `rediss://…/#insecure`, as for any self-signed test certificate.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
}

impl TlsFiles {
    /// Generates a new certificate and key into `dir`.
    pub fn generate(dir: &Path) -> TlsFiles {
        let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        let certified = rcgen::generate_simple_self_signed(names).expect("generate a certificate");
        std::fs::create_dir_all(dir).expect("create the certificate directory");
        let files = TlsFiles {
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
        };
        std::fs::write(&files.cert, certified.cert.pem()).expect("write the certificate");
        std::fs::write(&files.key, certified.signing_key.serialize_pem()).expect("write the key");
        files
    }
}

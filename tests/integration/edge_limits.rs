//! The edge under load, on a real socket (#37): sign-in limits that hold when the attempts
//! arrive all at once, and request bodies sent a byte a second that stall no one but their
//! own connection.

use std::net::SocketAddr;

use gpuledger::auth::{Role, User, password};
use gpuledger::web::{AppState, AuthConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A server on 127.0.0.1 with local sign-in, the user `dana`, on its own database.
async fn server(dir: &std::path::Path) -> (SocketAddr, AppState) {
    let store = crate::helpers::connect(&format!("sqlite:{}", dir.join("edge.db").display())).await;
    let dana =
        User::new("dana", Role::Finance, Vec::new(), password::hash("the right password, long").unwrap());
    store.create_user(&dana).await.unwrap();
    let state = AppState::new(store, AuthConfig::local());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = gpuledger::web::router(state.clone());
    let timeout = gpuledger::web::listen::HEADER_READ_TIMEOUT;
    tokio::spawn(gpuledger::web::listen::serve(listener, router, timeout, std::future::pending()));
    (address, state)
}

/// One request on its own connection; the whole answer.
async fn http(address: SocketAddr, request: String) -> String {
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n")
}

/// The login form's CSRF token (the cookie and the form field carry the same value).
async fn login_token(address: SocketAddr) -> String {
    let form = http(address, get("/login")).await;
    let start = form.find("gpuledger_login_csrf=").expect("the CSRF cookie") + "gpuledger_login_csrf=".len();
    form[start..start + 64].to_string()
}

async fn attempt(address: SocketAddr, token: String, user: String, password: String) -> u16 {
    let body = format!("csrf={token}&next=%2F&username={user}&password={}", password.replace(' ', "+"));
    let request = format!(
        "POST /login HTTP/1.1\r\nHost: edge\r\nCookie: gpuledger_login_csrf={token}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = http(address, request).await;
    answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status: {answer}"))
}

/// Sends every (user, password) sign-in at once, each on its own connection, and counts the
/// answers by status.
async fn all_at_once(
    address: SocketAddr,
    token: &str,
    attempts: impl Iterator<Item = (String, String)>,
) -> std::collections::BTreeMap<u16, usize> {
    let sent: Vec<_> = attempts
        .map(|(user, password)| tokio::spawn(attempt(address, token.to_string(), user, password)))
        .collect();
    let mut counts = std::collections::BTreeMap::new();
    for answer in sent {
        *counts.entry(answer.await.unwrap()).or_insert(0) += 1;
    }
    counts
}

/// 100 wrong passwords for one account at once, from one address: the account's limit (5)
/// is taken before any password is checked, so 5 are checked (401) and 95 refused (429);
/// then the right password is refused too. The five are one counted row, and each limit
/// passed one audit entry.
#[tokio::test]
async fn simultaneous_sign_ins_for_one_account_are_counted_before_any_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (address, state) = server(dir.path()).await;
    let token = login_token(address).await;
    let wrong = (0..100).map(|i| ("dana".to_string(), format!("wrong password {i:03}")));
    assert_eq!(all_at_once(address, &token, wrong).await, [(401, 5), (429, 95)].into_iter().collect());
    assert_eq!(attempt(address, token, "dana".into(), "the right password, long".into()).await, 429);
    let failures = state.store.login_failures(0, 10).await.unwrap();
    assert_eq!(
        failures.iter().map(|f| (f.username.as_str(), f.address.as_str(), f.failures)).collect::<Vec<_>>(),
        [("dana", "127.0.0.1", 5)]
    );
    assert_eq!(state.store.count_audit("login_failed", 0, None, None).await.unwrap(), 0);
    // One entry when the address passed its limit, one when the account did.
    assert_eq!(state.store.count_audit("login_blocked", 0, Some("dana"), None).await.unwrap(), 2);
}

/// 40 attempts at once from one address, each for another account: the address's limit
/// (20) holds.
#[tokio::test]
async fn simultaneous_sign_ins_from_one_address_are_counted_before_any_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (address, state) = server(dir.path()).await;
    let token = login_token(address).await;
    let each_another = (0..40).map(|i| (format!("user{i:02}"), "some wrong password".to_string()));
    assert_eq!(
        all_at_once(address, &token, each_another).await,
        [(401, 20), (429, 20)].into_iter().collect()
    );
    // One row per account tried (20 of them), one audit entry for the block.
    let failures = state.store.login_failures(0, 100).await.unwrap();
    assert_eq!(failures.len(), 20);
    assert!(failures.iter().all(|f| f.failures == 1 && f.address == "127.0.0.1"));
    assert_eq!(state.store.count_audit("login_blocked", 0, None, Some("127.0.0.1")).await.unwrap(), 1);
}

/// More connections than the server has permits (256), each sending a sign-in body a byte a
/// second: while every one of them is still sending, /healthz and the login form answer;
/// the slow bodies are cut off with 408 at the body deadline, before the 30 s request limit.
#[tokio::test]
async fn bodies_sent_a_byte_a_second_stall_no_one_else() {
    let dir = tempfile::tempdir().unwrap();
    let (address, _state) = server(dir.path()).await;
    let slow = gpuledger::web::IN_FLIGHT + 4;
    let (answered_tx, mut answered_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut senders = Vec::new();
    for _ in 0..slow {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream
            .write_all(b"POST /login HTTP/1.1\r\nHost: edge\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n")
            .await
            .unwrap();
        let answered = answered_tx.clone();
        senders.push(tokio::spawn(async move {
            let (mut reader, mut writer) = stream.into_split();
            let drip = tokio::spawn(async move {
                for _ in 0..1000 {
                    if writer.write_all(b"a").await.is_err() {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            });
            let mut answer = Vec::new();
            let _ = reader.read_to_end(&mut answer).await;
            drip.abort();
            let _ = answered.send(String::from_utf8_lossy(&answer).into_owned());
        }));
    }
    drop(answered_tx);
    // Give every slow request time to reach the server and start its body.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let health = http(address, get("/healthz")).await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let form = http(address, get("/login")).await;
    assert!(form.starts_with("HTTP/1.1 200"), "{form}");
    assert!(answered_rx.try_recv().is_err(), "no slow request had been answered while those two were");
    // Each slow body is refused at the body deadline, none left waiting for the 30 s limit.
    for _ in 0..slow {
        let answer = answered_rx.recv().await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    }
    for sender in senders {
        sender.abort();
    }
}

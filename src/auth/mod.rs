//! Accounts: users with a role and, for managers and client users, the clients they may see;
//! password hashing; session and CSRF tokens; and the [`Scope`] every read of client data
//! takes.
//!
//! | role | sees | may do |
//! |---|---|---|
//! | admin | everything | users, settings, everything below |
//! | finance | everything | invoices; client billing details |
//! | manager | its clients, plus fleet pages with other clients' names withheld | its clients' invoices |
//! | viewer | everything, read-only | download tables |
//! | client | only its own client(s) | its own pages and downloads |

pub mod password;
mod scope;

use serde::Serialize;

pub use scope::{Others, Scope};

/// What a user may see and do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Admin,
    Finance,
    Manager,
    Viewer,
    Client,
}

impl Role {
    pub const ALL: [Role; 5] = [Role::Admin, Role::Finance, Role::Manager, Role::Viewer, Role::Client];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Finance => "finance",
            Role::Manager => "manager",
            Role::Viewer => "viewer",
            Role::Client => "client",
        }
    }

    /// Whether the role is limited to the clients assigned to the user.
    pub fn is_scoped(self) -> bool {
        matches!(self, Role::Manager | Role::Client)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(text: &str) -> Result<Role, String> {
        Role::ALL.into_iter().find(|r| r.as_str() == text).ok_or_else(|| {
            format!("unknown role {text:?}: expected one of admin, finance, manager, viewer, client")
        })
    }
}

/// A stored account.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub role: Role,
    /// The clients a manager or client user may see (empty for the other roles).
    pub clients: Vec<String>,
    /// An argon2id PHC string; empty for users who sign in only through a trusted proxy.
    #[serde(skip)]
    pub password_hash: String,
    pub disabled: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

impl User {
    /// A new, enabled user, made now (the store gives it its id).
    pub fn new(name: &str, role: Role, clients: Vec<String>, password_hash: String) -> User {
        let now = chrono::Utc::now().timestamp();
        User {
            id: 0,
            name: name.trim().to_string(),
            role,
            clients,
            password_hash,
            disabled: false,
            created_at: now,
            updated_at: now,
        }
    }

    /// What this user may see.
    pub fn scope(&self) -> Scope {
        match self.role {
            Role::Admin | Role::Finance | Role::Viewer => Scope::All,
            Role::Manager => Scope::clients(self.clients.iter().cloned(), Others::Anonymous),
            Role::Client => Scope::clients(self.clients.iter().cloned(), Others::Hidden),
        }
    }
}

impl std::fmt::Display for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.role)
    }
}

/// A server-side session. The cookie carries a random token; the store keeps only its hash.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub token_hash: String,
    pub user_id: i64,
    /// The session's CSRF token, sent back in every form.
    pub csrf: String,
    pub created_at: i64,
    pub last_seen: i64,
    pub address: String,
}

/// One line of the append-only audit log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    pub id: i64,
    /// UTC epoch seconds.
    pub at: i64,
    pub username: String,
    pub address: String,
    /// `login`, `login_failed`, `logout`, `download`, `user_added`, `user_changed`,
    /// `password_changed`, `settings_changed`.
    pub action: String,
    pub detail: String,
}

/// Refused sign-ins of one account from one address in one window (they are counted, not
/// logged one by one).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LoginFailures {
    pub window_start: i64,
    pub username: String,
    pub address: String,
    pub failures: i64,
    pub last_at: i64,
}

/// A user or client name as every page, file and report can show it: not empty, at most 64
/// characters, no control character, no space at either end, and not in parentheses (those
/// are the names gpuledger gives what is no client, such as `(house)`).
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    let problem = if name.trim().is_empty() {
        "is empty"
    } else if name.chars().count() > 64 {
        "is longer than 64 characters"
    } else if name.chars().any(char::is_control) {
        "holds a control character"
    } else if name.trim() != name {
        "begins or ends with a space"
    } else if name.starts_with('(') {
        "begins with '(' (kept for gpuledger's own names, such as (house))"
    } else {
        return Ok(());
    };
    Err(format!("a {what} name {problem}: {name:?}"))
}

impl AuditEntry {
    /// An entry for now (the store gives it its id).
    pub fn new(username: &str, address: &str, action: &str, detail: &str) -> AuditEntry {
        AuditEntry {
            id: 0,
            at: chrono::Utc::now().timestamp(),
            username: username.into(),
            address: address.into(),
            action: action.into(),
            detail: detail.into(),
        }
    }
}

/// A new random token: 32 bytes from the OS, hex-encoded (64 characters).
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    // The OS random source failing is not something a login can work around.
    getrandom::getrandom(&mut bytes).expect("the operating system's random source failed");
    hex(&bytes)
}

/// The SHA-256 of a token, hex-encoded: what the store keeps of a session's token.
pub fn token_hash(token: &str) -> String {
    sha256_hex(token.as_bytes())
}

/// The SHA-256 of `bytes` as lowercase hex (session tokens, migration checksums, an issued
/// PDF's fingerprint).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A URL without the user and password it may carry (`https://u:p@host/x` → `https://host/x`),
/// for runs, messages and logs.
pub fn redacted_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// Compares two secrets in time that does not depend on where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_checked() {
        assert!(super::check_name("user", "dana").is_ok());
        assert!(super::check_name("client", "Acme Corp").is_ok());
        for bad in ["", "   ", "a\nb", " acme", "(house)", &"x".repeat(65)] {
            assert!(super::check_name("client", bad).is_err(), "{bad:?}");
        }
    }

    use super::*;

    #[test]
    fn roles_read_back_and_unknown_ones_name_the_choices() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
        }
        assert!("root".parse::<Role>().unwrap_err().contains("admin, finance, manager, viewer, client"));
    }

    #[test]
    fn urls_lose_their_credentials() {
        assert_eq!(
            redacted_url("https://u:secret@prom.example:9090/api?x=1"),
            "https://prom.example:9090/api?x=1"
        );
        assert_eq!(redacted_url("postgres://gl:pw@db/ledger"), "postgres://db/ledger");
        assert_eq!(redacted_url("http://prom:9090"), "http://prom:9090");
        assert_eq!(redacted_url("sqlite:gpuledger.db"), "sqlite:gpuledger.db");
    }

    #[test]
    fn tokens_are_random_and_stored_only_as_their_hash() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        // SHA-256 of "abc", the FIPS 180-2 example.
        assert_eq!(token_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(same_secret(&a, &a.clone()) && !same_secret(&a, &b) && !same_secret("ab", "abc"));
    }
}

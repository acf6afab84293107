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

pub use scope::{ClientColumn, OTHER_CLIENTS, Others, Scope};

pub use crate::domain::users::{AuditEntry, LoginFailures, Role, Session, User, check_name};
pub use crate::text::{redacted_url, sha256_hex};

impl User {
    /// What this user may see.
    pub fn scope(&self) -> Scope {
        match self.role {
            Role::Admin | Role::Finance | Role::Viewer => Scope::All,
            Role::Manager => Scope::clients(self.clients.iter().cloned(), Others::Anonymous),
            Role::Client => Scope::clients(self.clients.iter().cloned(), Others::Hidden),
        }
    }
}

/// A new random token: 32 bytes from the OS, hex-encoded (64 characters).
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    // The OS random source failing is not something a login can work around.
    getrandom::getrandom(&mut bytes).expect("the operating system's random source failed");
    crate::text::hex(&bytes)
}

/// The SHA-256 of a token, hex-encoded: what the store keeps of a session's token.
pub fn token_hash(token: &str) -> String {
    sha256_hex(token.as_bytes())
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

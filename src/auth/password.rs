//! Passwords: argon2id (the argon2 crate's defaults: 19 MiB, 2 passes, 1 lane, OWASP's
//! minimum), stored as PHC strings that carry their own parameters and salt.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

/// The shortest password accepted.
pub const MIN_LENGTH: usize = 12;

/// Why a password was not accepted or could not be hashed.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("a password needs at least {MIN_LENGTH} characters")]
    TooShort,
    #[error("hashing the password failed: {0}")]
    Hash(String),
}

/// Hashes `password` with a fresh random salt.
pub fn hash(password: &str) -> Result<String, PasswordError> {
    if password.chars().count() < MIN_LENGTH {
        return Err(PasswordError::TooShort);
    }
    let mut salt = [0u8; 16];
    getrandom::getrandom(&mut salt).map_err(|e| PasswordError::Hash(e.to_string()))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| PasswordError::Hash(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| PasswordError::Hash(e.to_string()))
}

/// Whether `password` matches the stored PHC string (false for an empty or unreadable one).
pub fn verify(password: &str, stored: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(stored) else { return false };
    Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok()
}

/// A hash of a random password, verified against when the user named does not exist, so
/// a login takes as long for an unknown user as for a wrong password.
pub fn decoy() -> &'static str {
    static DECOY: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| hash(&super::random_token()).unwrap_or_default());
    &DECOY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_verifies_against_its_own_hash_only() {
        let stored = hash("correct horse battery").unwrap();
        assert!(stored.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{stored}");
        assert!(verify("correct horse battery", &stored));
        assert!(!verify("correct horse batterY", &stored));
        assert!(!verify("correct horse battery", ""));
        // Two hashes of one password differ (fresh salt).
        assert_ne!(stored, hash("correct horse battery").unwrap());
        assert!(matches!(hash("short"), Err(PasswordError::TooShort)));
    }
}

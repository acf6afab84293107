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
    /// NIST SP 800-63B: no password that is among the first an attacker tries.
    #[error(
        "that password is among the first an attacker tries ({0}): choose another, such as a few unrelated words"
    )]
    Common(&'static str),
    #[error("hashing the password failed: {0}")]
    Hash(String),
}

/// The words most common passwords are made of (the top of every published list of leaked
/// passwords), with digits or symbols around them: `password1234`, `Qwerty123456!`.
const COMMON_WORDS: &[&str] = &[
    "password",
    "passw0rd",
    "p@ssword",
    "p@ssw0rd",
    "qwerty",
    "qwertyuiop",
    "asdfgh",
    "asdfghjkl",
    "zxcvbn",
    "letmein",
    "welcome",
    "admin",
    "administrator",
    "iloveyou",
    "monkey",
    "dragon",
    "football",
    "baseball",
    "master",
    "sunshine",
    "princess",
    "shadow",
    "superman",
    "batman",
    "trustno",
    "login",
    "starwars",
    "whatever",
    "freedom",
    "secret",
    "changeme",
    "default",
    "root",
    "toor",
    "test",
    "guest",
    "hello",
    "michael",
    "jennifer",
    "charlie",
    "abc",
    "abcdef",
    "qazwsx",
    "access",
    "mustang",
    "computer",
    "internet",
    "gpuledger",
];

/// Why `password` is among the first an attacker tries, if it is.
fn common(password: &str) -> Option<&'static str> {
    let chars: Vec<char> = password.chars().collect();
    let mut distinct = chars.clone();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < 5 {
        return Some("too few different characters");
    }
    // A run along the alphabet, the digits or a keyboard row: 123456789012, abcdefghijkl.
    let lower = password.to_lowercase();
    for row in [
        "abcdefghijklmnopqrstuvwxyz",
        "01234567890123456789",
        "qwertyuiopasdfghjklzxcvbnm",
        "98765432109876543210",
    ] {
        if row.contains(&lower) || row.chars().rev().collect::<String>().contains(&lower) {
            return Some("a sequence of neighbouring keys");
        }
    }
    // A common word with digits and symbols around it, or repeated.
    let core = lower.trim_matches(|c: char| !c.is_alphabetic());
    if core.is_empty() {
        return Some("digits and symbols only");
    }
    for word in COMMON_WORDS {
        if core == *word || (core.len() % word.len() == 0 && core == word.repeat(core.len() / word.len())) {
            return Some("a common password with digits or symbols added");
        }
    }
    None
}

/// A random password of 16 hex digits (64 bits) that [`hash`] takes: drawn again in the rare
/// case (about 1 in 1,800) that the draw is all digits or otherwise looks guessable.
pub fn random() -> String {
    loop {
        let secret = crate::auth::random_token()[..16].to_string();
        if common(&secret).is_none() {
            return secret;
        }
    }
}

/// Hashes `password` with a fresh random salt.
pub fn hash(password: &str) -> Result<String, PasswordError> {
    if password.chars().count() < MIN_LENGTH {
        return Err(PasswordError::TooShort);
    }
    if let Some(why) = common(password) {
        return Err(PasswordError::Common(why));
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
    fn a_random_password_is_always_one_that_hashing_accepts() {
        // All digits is refused; a random draw is redrawn until it passes.
        assert_eq!(common("4930218576019384"), Some("digits and symbols only"));
        for _ in 0..2000 {
            let secret = random();
            assert_eq!(secret.len(), 16);
            assert_eq!(common(&secret), None, "{secret}");
        }
    }

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
        // #37: twelve spaces and password1234 were accepted.
        for weak in [
            "            ",
            "password1234",
            "Password123!",
            "qwertyqwerty",
            "123456789012",
            "aaaaaaaaaaaaaaa",
            "!!2024letmein",
        ] {
            assert!(matches!(hash(weak), Err(PasswordError::Common(_))), "{weak:?}");
        }
        assert!(hash("mauve kettle on the stairs").is_ok());
    }
}

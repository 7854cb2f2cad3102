//! Passwords of human agents: Argon2id hashes (PHC strings) in the team config, verified at
//! login; the password itself is never stored. Also the session tokens a login hands out.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2};

/// Hashes a password as an Argon2id PHC string (what `cohort hash-password` prints).
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::encode_b64(&random_bytes::<16>()).map_err(|e| e.to_string())?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Whether `hash` is an Argon2id PHC string (the only kind accepted in a team config).
pub fn check_hash(hash: &str) -> Result<(), String> {
    let parsed = PasswordHash::new(hash)
        .map_err(|e| format!("not an Argon2id hash ({e}); make one with `cohort hash-password`"))?;
    if parsed.algorithm != Algorithm::Argon2id.ident() {
        return Err(format!(
            "the hash uses {}, not argon2id; make one with `cohort hash-password`",
            parsed.algorithm
        ));
    }
    Ok(())
}

/// Checks a password against a stored hash. Any malformed hash simply fails.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

/// A fresh session token: 256 random bits, hex-encoded.
pub fn new_token() -> String {
    random_bytes::<32>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Bytes from the operating system's generator (via `rand`'s thread RNG, seeded from it).
fn random_bytes<const N: usize>() -> [u8; N] {
    use rand::RngCore;
    let mut bytes = [0u8; N];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let h = hash_password("cohort-demo").unwrap();
        assert!(h.starts_with("$argon2id$"));
        check_hash(&h).unwrap();
        assert!(verify_password("cohort-demo", &h));
        assert!(!verify_password("cohort-dem0", &h));
        assert!(!verify_password("cohort-demo", "plain-text"));
    }

    #[test]
    fn plain_or_other_hashes_are_refused() {
        assert!(check_hash("cohort-demo").is_err());
        let argon2i = "$argon2i$v=19$m=16,t=2,p=1$c29tZXNhbHQ$YmFzZTY0aGFzaA";
        assert!(check_hash(argon2i).unwrap_err().contains("not argon2id"));
    }

    #[test]
    fn tokens_are_long_and_fresh() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}

//! Challenge-response authentication with a shared token: each side proves it knows the token by an
//! HMAC-SHA-256 over both sides' fresh nonces, with a different label for each side so that one
//! side's answer can never serve as the other's.

use crate::wire::{Nonce, Tag};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

fn tag(token: &[u8], label: &[u8], first: &Nonce, second: &Nonce) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(token).expect("HMAC takes keys of any length");
    mac.update(label);
    mac.update(first);
    mac.update(second);
    mac
}

/// The master's proof: over the worker's nonce, then its own.
pub fn master_tag(token: &[u8], worker_nonce: &Nonce, master_nonce: &Nonce) -> Tag {
    tag(token, b"bts master v1", worker_nonce, master_nonce).finalize().into_bytes().into()
}

/// The worker's proof: over the master's nonce, then its own.
pub fn worker_tag(token: &[u8], master_nonce: &Nonce, worker_nonce: &Nonce) -> Tag {
    tag(token, b"bts worker v1", master_nonce, worker_nonce).finalize().into_bytes().into()
}

/// Checks a master's proof in constant time.
pub fn verify_master(token: &[u8], worker_nonce: &Nonce, master_nonce: &Nonce, got: &Tag) -> bool {
    tag(token, b"bts master v1", worker_nonce, master_nonce).verify_slice(got).is_ok()
}

/// Checks a worker's proof in constant time.
pub fn verify_worker(token: &[u8], master_nonce: &Nonce, worker_nonce: &Nonce, got: &Tag) -> bool {
    tag(token, b"bts worker v1", master_nonce, worker_nonce).verify_slice(got).is_ok()
}

/// A fresh random nonce from the operating system.
pub fn nonce() -> Nonce {
    let mut n = [0u8; 32];
    getrandom::fill(&mut n).expect("the operating system provides random bytes");
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_verify_only_with_the_same_token_and_nonces() {
        let (w, m) = (nonce(), nonce());
        assert_ne!(w, m);
        let t = worker_tag(b"secret", &m, &w);
        assert!(verify_worker(b"secret", &m, &w, &t));
        assert!(!verify_worker(b"Secret", &m, &w, &t));
        assert!(!verify_worker(b"secret", &w, &m, &t));
        // A worker's answer is not a master's proof (no reflection).
        assert!(!verify_master(b"secret", &w, &m, &master_tag(b"secret", &m, &w)));
        assert!(verify_master(b"secret", &w, &m, &master_tag(b"secret", &w, &m)));
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231_test_case_2() {
        let mut mac = HmacSha256::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        let got: [u8; 32] = mac.finalize().into_bytes().into();
        let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }
}

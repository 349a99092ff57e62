//! The admin API's key table: each key kept as its SHA-256 digest with the principal and role
//! it stands for, so the table shows no key in a memory dump or a debug print. A presented key
//! is hashed once and compared with every digest without an early exit, so the time taken
//! says neither which key nearly matched nor where.

use sha2::{Digest, Sha256};
use std::fmt;

use crate::config::{AdminKey, AdminRole};

struct Entry {
    principal: String,
    role: AdminRole,
    digest: [u8; 32],
}

/// Valid admin keys; empty disables the admin API.
#[derive(Default)]
pub struct AdminKeys(Vec<Entry>);

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl AdminKeys {
    /// The unnamed key (principal `admin`, role admin) and the named keys with their roles.
    /// The texts are hashed here and not kept.
    pub fn new(unnamed: Option<String>, named: &[AdminKey]) -> Self {
        let mut entries: Vec<Entry> = unnamed
            .filter(|k| !k.is_empty())
            .map(|k| Entry {
                principal: "admin".into(),
                role: AdminRole::Admin,
                digest: digest(&k),
            })
            .into_iter()
            .collect();
        entries.extend(named.iter().map(|k| Entry {
            principal: k.name.clone(),
            role: k.role,
            digest: digest(k.key.expose()),
        }));
        Self(entries)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Who holds `presented`, and with which role.
    pub fn holder(&self, presented: &str) -> Option<(String, AdminRole)> {
        let presented = digest(presented);
        let mut matched = None;
        for entry in &self.0 {
            let difference = entry
                .digest
                .iter()
                .zip(presented.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if difference == 0 {
                matched = Some((entry.principal.clone(), entry.role));
            }
        }
        matched
    }
}

impl fmt::Debug for AdminKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|e| (&e.principal, e.role.as_str())))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::Secret;

    const UNNAMED: &str = "unnamed-admin-key-0123";
    const VIEWER: &str = "viewer-admin-key-0123";

    fn keys() -> AdminKeys {
        AdminKeys::new(
            Some(UNNAMED.into()),
            &[AdminKey {
                name: "vera".into(),
                key: Secret::from(VIEWER),
                role: AdminRole::Viewer,
            }],
        )
    }

    #[test]
    fn a_key_is_recognised_with_its_principal_and_role_and_nothing_else_is() {
        let keys = keys();
        assert_eq!(
            keys.holder(UNNAMED),
            Some(("admin".into(), AdminRole::Admin))
        );
        assert_eq!(
            keys.holder(VIEWER),
            Some(("vera".into(), AdminRole::Viewer))
        );
        assert_eq!(keys.holder("viewer-admin-key-0124"), None);
        assert_eq!(keys.holder(""), None);
        assert!(AdminKeys::new(Some(String::new()), &[]).is_empty());
    }

    #[test]
    fn the_table_holds_no_key_text() {
        let keys = keys();
        let printed = format!("{keys:?}");
        assert!(!printed.contains("admin-key"), "{printed}");
        // The memory of the table: digests, principals and roles only.
        for entry in &keys.0 {
            assert_eq!(entry.digest.len(), 32);
            assert!(!String::from_utf8_lossy(&entry.digest).contains("admin-key"));
            assert_ne!(entry.principal, UNNAMED);
        }
    }
}

//! API credentials (API.md §6, 5): a key id is a random UUIDv4 journaled with its address
//! and L1 nonce; the secret and passphrase are derived from a server master key that never
//! enters the journal, so nothing in the journal lets a reader recompute them.
//!
//! The key table is the gateway threads' read-side copy of the engine's key records, updated
//! by the thread that created or deleted a key before it answers, so a deleted key fails L2
//! at once on every thread.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use ladder_protocol::{Address, L2Secret};
use parking_lot::RwLock;
use sha2::Sha256;
use uuid::Uuid;

/// File holding the master key inside the data directory.
pub const MASTER_KEY_FILE: &str = "master.key";

/// The server's secret from which API secrets and passphrases derive.
#[derive(Clone)]
pub struct MasterKey([u8; 32]);

/// Credentials as returned once to the client (API.md §2.10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// The key id.
    pub api_key: Uuid,
    /// Base64 (URL-safe, padded) of the 32-byte secret.
    pub secret: String,
    /// The passphrase.
    pub passphrase: String,
}

impl MasterKey {
    /// Reads `<data_dir>/master.key`, creating it with 32 random bytes (mode 0600) if absent.
    pub fn load_or_create(data_dir: &Path) -> std::io::Result<MasterKey> {
        let path = data_dir.join(MASTER_KEY_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let key: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
                    std::io::Error::other(format!("{} must hold exactly 32 bytes", path.display()))
                })?;
                Ok(MasterKey(key))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let master = MasterKey(rand::random());
                master.store(data_dir)?;
                Ok(master)
            }
            Err(e) => Err(e),
        }
    }

    /// Writes the key to `<data_dir>/master.key` durably (mode 0600): a temporary file,
    /// synced, renamed into place, the directory synced. A power loss leaves the old key or
    /// the new one, never a torn or missing file (a standby takes its primary's this way).
    pub fn store(&self, data_dir: &Path) -> std::io::Result<()> {
        let path = data_dir.join(MASTER_KEY_FILE);
        ladder_journal::create_dir_durably(data_dir).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("tmp");
        let mut file = open_private(&tmp)?;
        file.write_all(&self.0)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        ladder_journal::sync_dir(data_dir).map_err(std::io::Error::other)
    }

    /// A master key from bytes (tests).
    pub fn from_bytes(bytes: [u8; 32]) -> MasterKey {
        MasterKey(bytes)
    }

    /// HMAC-SHA256 under the master key of `label` followed by `parts`.
    fn mac(&self, label: &str, parts: &[&[u8]]) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(label.as_bytes());
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }

    fn derive(&self, label: &str, key_id: &Uuid, address: &Address) -> [u8; 32] {
        self.mac(label, &[key_id.as_bytes(), address.as_bytes()])
    }

    /// The id of the key `address` creates with L1 nonce `nonce` after `creations_before`
    /// others with that nonce (API.md §7: keys derive from the master key, the address, the
    /// nonce and that count, so derive can answer without storing a secret, and a key deleted
    /// and created again gets new credentials). A UUIDv4 in form: its 122 free bits come
    /// from the HMAC.
    pub fn key_id(&self, address: &Address, nonce: &[u8; 32], creations_before: u32) -> Uuid {
        let count = creations_before.to_be_bytes();
        let digest = self.mac("ladder:api-key-id:v2", &[address.as_bytes(), nonce, &count]);
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }

    /// The credentials of key `key_id` belonging to `address`.
    pub fn credentials(&self, key_id: Uuid, address: &Address) -> Credentials {
        let secret = self.derive("ladder:api-secret:v1", &key_id, address);
        let passphrase = self.derive("ladder:api-passphrase:v1", &key_id, address);
        Credentials {
            api_key: key_id,
            secret: base64::engine::general_purpose::URL_SAFE.encode(secret),
            passphrase: hex::encode(passphrase),
        }
    }
}

#[cfg(unix)]
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // A file left behind (an earlier start that failed) is removed, not reused: it keeps
    // its own mode, and whoever opened it then could read what is written into it now.
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::create(path)
}

/// What L2 needs to check a request signed with a key.
#[derive(Clone, Debug)]
pub struct KeyEntry {
    /// The key's address.
    pub address: Address,
    /// The HMAC key, ready to use.
    pub secret: L2Secret,
    /// The passphrase.
    pub passphrase: String,
}

/// The gateway's table of live API keys.
pub struct KeyTable {
    master: RwLock<MasterKey>,
    keys: RwLock<HashMap<Uuid, KeyEntry>>,
    /// Keys created per address and nonce, as the engine counts them.
    creations: RwLock<HashMap<(Address, [u8; 32]), u32>>,
    /// Keys removed so far: a gateway loop that sees it move looks at its `/ws/user`
    /// subscriptions' keys at once.
    removals: std::sync::atomic::AtomicU64,
}

impl KeyTable {
    /// An empty table.
    pub fn new(master: MasterKey) -> KeyTable {
        KeyTable {
            master: RwLock::new(master),
            keys: RwLock::new(HashMap::new()),
            creations: RwLock::new(HashMap::new()),
            removals: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Keys `address` has created with `nonce` so far (the next key's id derives from it).
    pub fn creations(&self, address: &Address, nonce: &[u8; 32]) -> u32 {
        self.creations
            .read()
            .get(&(*address, *nonce))
            .copied()
            .unwrap_or(0)
    }

    /// The engine counts `count` keys created by `address` with `nonce`.
    pub fn set_creations(&self, address: Address, nonce: [u8; 32], count: u32) {
        let mut creations = self.creations.write();
        let entry = creations.entry((address, nonce)).or_insert(0);
        *entry = (*entry).max(count);
    }

    /// The master key.
    pub fn master(&self) -> MasterKey {
        self.master.read().clone()
    }

    /// The master key's bytes (sent to standbys, which must derive the same secrets).
    pub fn master_bytes(&self) -> [u8; 32] {
        self.master.read().0
    }

    /// Replaces the master key (a standby takes its primary's) and re-derives every entry.
    pub fn replace_master(&self, master: MasterKey) {
        let mut keys = self.keys.write();
        *self.master.write() = master;
        let entries: Vec<(Uuid, Address)> = keys.iter().map(|(k, e)| (*k, e.address)).collect();
        keys.clear();
        drop(keys);
        for (key_id, address) in entries {
            self.insert(key_id, address);
        }
    }

    /// Adds a key (after the engine recorded it).
    pub fn insert(&self, key_id: Uuid, address: Address) -> Credentials {
        let credentials = self.master.read().credentials(key_id, &address);
        let secret = L2Secret::from_base64(&credentials.secret)
            .unwrap_or_else(|_| unreachable!("derived secrets are valid base64"));
        self.keys.write().insert(
            key_id,
            KeyEntry {
                address,
                secret,
                passphrase: credentials.passphrase.clone(),
            },
        );
        credentials
    }

    /// Removes a key (after the engine deleted it).
    pub fn remove(&self, key_id: &Uuid) {
        self.keys.write().remove(key_id);
        self.removals
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// How many keys were removed so far.
    pub fn removals(&self) -> u64 {
        self.removals.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The entry of a live key.
    pub fn get(&self, key_id: &Uuid) -> Option<KeyEntry> {
        self.keys.read().get(key_id).cloned()
    }

    /// Whether `key_id` is a live key (not deleted).
    pub fn contains(&self, key_id: &Uuid) -> bool {
        self.keys.read().contains_key(key_id)
    }

    /// Number of live keys.
    pub fn len(&self) -> usize {
        self.keys.read().len()
    }

    /// Whether no key is live.
    pub fn is_empty(&self) -> bool {
        self.keys.read().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `master.tmp` an earlier failed start left with a wider mode does not lend it to
    /// `master.key`.
    #[cfg(unix)]
    #[test]
    fn the_master_key_is_private_even_over_a_leftover_temporary_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let leftover = dir.path().join(MASTER_KEY_FILE).with_extension("tmp");
        std::fs::write(&leftover, b"").unwrap();
        std::fs::set_permissions(&leftover, std::fs::Permissions::from_mode(0o666)).unwrap();
        MasterKey::from_bytes([7; 32]).store(dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join(MASTER_KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    /// A leftover `master.tmp` that is a symbolic link is not followed: the key is written
    /// into a new file of the data directory, and the link's target is left as it was.
    #[cfg(unix)]
    #[test]
    fn a_leftover_temporary_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"theirs").unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let leftover = data.join(MASTER_KEY_FILE).with_extension("tmp");
        std::os::unix::fs::symlink(&outside, &leftover).unwrap();
        MasterKey::from_bytes([7; 32]).store(&data).unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"theirs");
        let key = data.join(MASTER_KEY_FILE);
        assert!(std::fs::symlink_metadata(&key)
            .unwrap()
            .file_type()
            .is_file());
        assert_eq!(std::fs::read(&key).unwrap(), [7; 32]);
    }

    #[test]
    fn key_ids_derive_from_master_address_nonce_and_count_as_uuid_v4() {
        let master = MasterKey::from_bytes([7; 32]);
        let alice = Address([0xa1; 20]);
        let bob = Address([0xb0; 20]);
        let nonce = |n: u8| {
            let mut bytes = [0u8; 32];
            bytes[31] = n;
            bytes
        };
        let id = master.key_id(&alice, &nonce(0), 0);
        assert_eq!(id, master.key_id(&alice, &nonce(0), 0), "deterministic");
        assert_eq!(id.get_version_num(), 4);
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        for other in [
            master.key_id(&alice, &nonce(1), 0),
            master.key_id(&bob, &nonce(0), 0),
            master.key_id(&alice, &nonce(0), 1),
            MasterKey::from_bytes([8; 32]).key_id(&alice, &nonce(0), 0),
        ] {
            assert_ne!(id, other);
        }
    }

    #[test]
    fn credentials_are_deterministic_per_key_and_differ_between_keys() {
        let master = MasterKey::from_bytes([7; 32]);
        let address = Address([1; 20]);
        let a = master.credentials(Uuid::from_bytes([1; 16]), &address);
        assert_eq!(a, master.credentials(Uuid::from_bytes([1; 16]), &address));
        let b = master.credentials(Uuid::from_bytes([2; 16]), &address);
        assert_ne!(a.secret, b.secret);
        assert_ne!(a.passphrase, b.passphrase);
        assert_eq!(a.passphrase.len(), 64);
        let other_master = MasterKey::from_bytes([8; 32]);
        assert_ne!(
            other_master
                .credentials(Uuid::from_bytes([1; 16]), &address)
                .secret,
            a.secret
        );
    }

    #[test]
    fn a_stored_key_replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().join("new").join("data");
        MasterKey::from_bytes([3; 32]).store(&data_dir).unwrap();
        MasterKey::from_bytes([4; 32]).store(&data_dir).unwrap();
        assert_eq!(MasterKey::load_or_create(&data_dir).unwrap().0, [4; 32]);
        let names: Vec<_> = std::fs::read_dir(&data_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![MASTER_KEY_FILE.to_string()]);
    }

    #[test]
    fn the_master_key_is_created_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let first = MasterKey::load_or_create(dir.path()).unwrap();
        let again = MasterKey::load_or_create(dir.path()).unwrap();
        assert_eq!(first.0, again.0);
    }
}

//! The on-disk cache of precompiled components, and why Berth trusts what it loads
//! from it.
//!
//! A precompiled artifact is native code: whoever can put a file there runs code in
//! the scheduler. So:
//!
//! - The cache directory is created 0700, and refused, naming it, when group or others
//!   may write it.
//! - Beside each artifact `NAME.cwasm` lies `NAME.cwasm.mac`: HMAC-SHA256, under a key
//!   kept outside the cache, of the artifact's name and bytes (the name binds the
//!   module's hash and the engine's compatibility hash, so one valid artifact cannot
//!   stand in for another). An artifact is read into memory, checked, and deserialized
//!   from the checked bytes, never mapped from the file, which could change after the
//!   check. One that fails the check is not loaded: it is recompiled, overwritten and a
//!   warning logged.
//! - The key is `cache.key` (32 random bytes, created 0600) in the key directory:
//!   `$BERTH_CACHE_KEY_DIR`, else `$XDG_STATE_HOME/berth`, else `~/.local/state/berth`;
//!   the directory is created 0700 and refused when group or others may write it, the
//!   key when they may read or write it. Where no key directory can be made or written
//!   (no home directory, a read-only file system), the key is made for this process
//!   only: the cache then serves this process, and artifacts an earlier process wrote
//!   are recompiled.

use ring::hmac;
use sha2::{Digest, Sha256};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The key file's name in the key directory.
const KEY_FILE: &str = "cache.key";
/// The first word of a `.mac` file.
const MAC_SCHEME: &str = "berth-hmac-sha256";

/// Why the component cache (or its key) was refused.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// Group or others may write the cache directory.
    #[error(
        "refusing the component cache {}: group or others can write it (mode {mode:03o}); \
         make it private (chmod go-w) or choose another (--cache-dir, $BERTH_CACHE_DIR)",
        .dir.display()
    )]
    Writable {
        /// The directory.
        dir: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Group or others may write the key directory.
    #[error(
        "refusing the component cache's key directory {}: group or others can write it \
         (mode {mode:03o}); make it private (chmod go-w) or choose another \
         ($BERTH_CACHE_KEY_DIR)",
        .dir.display()
    )]
    KeyDirWritable {
        /// The directory.
        dir: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Group or others may read or write the key.
    #[error(
        "refusing the component cache's key {}: group or others can read or write it \
         (mode {mode:03o}); chmod 600 it, or remove it to have a new one made",
        .file.display()
    )]
    KeyExposed {
        /// The key file.
        file: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file holds something else than a key.
    #[error(
        "the component cache's key {} is not 32 bytes; remove it to have a new one made",
        .file.display()
    )]
    BadKey {
        /// The key file.
        file: PathBuf,
    },
    /// A directory or file could not be made or read.
    // The OS error is part of the message, not a `source`: shown once in a chain.
    #[error("{}: {error}", .path.display())]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
}

/// The cache directory and the key its artifacts are checked with.
pub(super) struct ComponentCache {
    dir: PathBuf,
    key: [u8; 32],
    /// A digest of the key, written in each `.mac` so that an artifact written under
    /// another key (an earlier process's) is told apart from a tampered one.
    key_id: String,
}

/// What looking an artifact up found.
pub(super) enum Lookup {
    /// Checked and deserialized.
    Loaded(Component),
    /// No artifact (or no `.mac`) yet.
    Missing,
    /// Written under another key: expected after a per-process key.
    OtherKey,
    /// Refused: the digest does not match, or wasmtime refused the checked bytes.
    Refused(String),
}

impl ComponentCache {
    /// Prepares `dir` (created 0700, refused when others can write it) and the key:
    /// from `key_dir` when given, else from the default key directory.
    pub(super) fn open(dir: &Path, key_dir: Option<&Path>) -> Result<Self, CacheError> {
        make_private_dir(dir)?;
        check_not_writable_by_others(dir).map_err(|e| match e {
            Check::Writable(mode) => CacheError::Writable {
                dir: dir.to_owned(),
                mode,
            },
            Check::Io(error) => CacheError::Io {
                path: dir.to_owned(),
                error,
            },
        })?;
        let key = match key_dir.map(Path::to_owned).or_else(default_key_dir) {
            Some(kd) => match load_or_make_key(&kd)? {
                Ok(key) => key,
                Err(why) => {
                    tracing::info!(
                        "cannot keep the component cache's key in {} ({why}): using a key of \
                         this process only, so compiled components are reused only until it \
                         exits (set $BERTH_CACHE_KEY_DIR to a private, writable directory)",
                        kd.display()
                    );
                    rand::random()
                }
            },
            None => {
                tracing::info!(
                    "no directory for the component cache's key ($BERTH_CACHE_KEY_DIR, \
                     $XDG_STATE_HOME and $HOME are unset): using a key of this process only"
                );
                rand::random()
            }
        };
        Ok(Self::with_key(dir, key))
    }

    fn with_key(dir: &Path, key: [u8; 32]) -> Self {
        let key_id = super::engine::hex(
            &Sha256::digest([b"berth cache key id".as_slice(), key.as_slice()].concat())[..8],
        );
        ComponentCache {
            dir: dir.to_owned(),
            key,
            key_id,
        }
    }

    /// The cache directory.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of the artifact named `name`.
    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn mac_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.mac"))
    }

    /// The HMAC key (ring's HMAC-SHA256 under the cache key).
    fn mac_key(&self) -> hmac::Key {
        hmac::Key::new(hmac::HMAC_SHA256, &self.key)
    }

    /// The bytes the MAC covers: the artifact's name, a NUL, its bytes.
    fn mac_prefix(name: &str) -> Vec<u8> {
        [name.as_bytes(), b"\0"].concat()
    }

    fn mac_line(&self, name: &str, bytes: &[u8]) -> String {
        let mut ctx = hmac::Context::with_key(&self.mac_key());
        ctx.update(&Self::mac_prefix(name));
        ctx.update(bytes);
        format!(
            "{MAC_SCHEME} {} {}\n",
            self.key_id,
            super::engine::hex(ctx.sign().as_ref())
        )
    }

    /// Reads the artifact `name`, checks it and deserializes it.
    pub(super) fn load(&self, engine: &Engine, name: &str) -> Lookup {
        // The artifact is read after the MAC's prefix, into one buffer, so that the
        // check covers exactly the bytes deserialized without copying them.
        let mut signed = Self::mac_prefix(name);
        let prefix = signed.len();
        let read = std::fs::File::open(self.path(name))
            .and_then(|mut f| std::io::Read::read_to_end(&mut f, &mut signed));
        let (bytes, recorded) = match (read, std::fs::read_to_string(self.mac_path(name))) {
            (Ok(_), Ok(m)) => (&signed[prefix..], m),
            (Err(e), _) | (_, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Lookup::Missing;
            }
            (Err(e), _) | (_, Err(e)) => return Lookup::Refused(format!("cannot read it: {e}")),
        };
        let mut words = recorded.split_whitespace();
        if words.next() != Some(MAC_SCHEME) {
            return Lookup::Refused("its .mac file is not Berth's".into());
        }
        if words.next() != Some(self.key_id.as_str()) {
            return Lookup::OtherKey;
        }
        let tag = match words.next().map(unhex) {
            Some(Some(tag)) if words.next().is_none() => tag,
            _ => return Lookup::Refused("its .mac file is not Berth's".into()),
        };
        // ring compares the tags in constant time.
        if hmac::verify(&self.mac_key(), &signed, &tag).is_err() {
            return Lookup::Refused("its digest does not match its contents".into());
        }
        // SAFETY: these bytes were written by `Component::serialize` of an engine with
        // the same compatibility hash (it is in the name, which the digest covers), and
        // the digest under the key proves that this process or an earlier one holding
        // the key wrote them; they are checked in memory, so the file may change now.
        match unsafe { Component::deserialize(engine, bytes) } {
            Ok(c) => Lookup::Loaded(c),
            Err(e) => Lookup::Refused(format!("wasmtime refused it: {e:#}")),
        }
    }

    /// Writes the artifact `name` and its digest (each to a temporary file renamed
    /// into place).
    pub(super) fn store(&self, name: &str, component: &Component) -> Result<(), WriteError> {
        let bytes = component.serialize().map_err(WriteError::Serialize)?;
        let mac = self.mac_line(name, &bytes);
        write_atomically(&self.dir, &self.path(name), &bytes)?;
        write_atomically(&self.dir, &self.mac_path(name), mac.as_bytes())?;
        Ok(())
    }
}

/// Why a compiled component could not be written to the cache.
#[derive(Debug, thiserror::Error)]
pub(super) enum WriteError {
    /// Writing or renaming a file.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// wasmtime could not serialize the component.
    #[error("{0:#}")]
    Serialize(wasmtime::Error),
}

fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(".tmp-{}-{n}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// `$BERTH_CACHE_KEY_DIR`, else `$XDG_STATE_HOME/berth`, else `~/.local/state/berth`.
pub(super) fn default_key_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("BERTH_CACHE_KEY_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("berth"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".local/state/berth"))
}

enum Check {
    Writable(u32),
    Io(std::io::Error),
}

fn make_private_dir(dir: &Path) -> Result<(), CacheError> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir).map_err(|error| CacheError::Io {
        path: dir.to_owned(),
        error,
    })
}

#[cfg(unix)]
fn check_not_writable_by_others(dir: &Path) -> Result<(), Check> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(dir).map_err(Check::Io)?;
    if !meta.is_dir() {
        return Err(Check::Io(std::io::Error::other("not a directory")));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(Check::Writable(mode & 0o777));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_not_writable_by_others(_dir: &Path) -> Result<(), Check> {
    Ok(())
}

/// The key in `dir`, made if missing. `Ok(Err(why))`: the directory or key cannot be
/// made or written (the caller falls back to a per-process key); `Err`: refused.
fn load_or_make_key(dir: &Path) -> Result<Result<[u8; 32], String>, CacheError> {
    if let Err(e) = make_private_dir(dir) {
        return Ok(Err(e.to_string()));
    }
    check_not_writable_by_others(dir).map_err(|e| match e {
        Check::Writable(mode) => CacheError::KeyDirWritable {
            dir: dir.to_owned(),
            mode,
        },
        Check::Io(error) => CacheError::Io {
            path: dir.to_owned(),
            error,
        },
    })?;
    let file = dir.join(KEY_FILE);
    if let Some(key) = read_key(&file)? {
        return Ok(Ok(key));
    }
    // Made under a temporary name and linked into place, so a process starting at the
    // same time reads either no key or the whole key, and both end with the same one.
    let key: [u8; 32] = rand::random();
    let tmp = dir.join(format!(".{KEY_FILE}.{}", std::process::id()));
    let made = (|| {
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
        let mut f = o.open(&tmp)?;
        f.write_all(&key)?;
        f.sync_all()?;
        match std::fs::hard_link(&tmp, &file) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    if let Err(e) = made {
        return Ok(Err(format!("{}: {e}", file.display())));
    }
    match read_key(&file)? {
        Some(key) => Ok(Ok(key)),
        None => Ok(Err(format!(
            "{}: vanished after it was made",
            file.display()
        ))),
    }
}

fn read_key(file: &Path) -> Result<Option<[u8; 32]>, CacheError> {
    let io = |error| CacheError::Io {
        path: file.to_owned(),
        error,
    };
    let meta = match std::fs::metadata(file) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(CacheError::KeyExposed {
                file: file.to_owned(),
                mode,
            });
        }
    }
    let _ = meta;
    let bytes = std::fs::read(file).map_err(io)?;
    let key = <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| CacheError::BadKey {
        file: file.to_owned(),
    })?;
    Ok(Some(key))
}

/// The bytes a string of lower-case hex digits spells; `None` for anything else.
fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            let digit = |c: u8| match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                _ => None,
            };
            let b = s.as_bytes();
            Some(digit(b[i])? << 4 | digit(b[i + 1])?)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_mac_line_is_hmac_sha256_of_the_name_and_bytes() {
        // RFC 4231's test case 2 (key "Jefe", zero-padded as HMAC pads every short
        // key), its message split as the cache splits name and bytes.
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::with_key(dir.path(), key);
        let line = cache.mac_line("what do ya want", b"for nothing?");
        // The name's NUL stands where the RFC's message has a space: recompute the
        // RFC's own message with the same key to check the construction.
        let rfc = hmac::sign(&cache.mac_key(), b"what do ya want for nothing?");
        assert_eq!(
            crate::wasm::engine::hex(rfc.as_ref()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let ours = hmac::sign(&cache.mac_key(), b"what do ya want\0for nothing?");
        assert_eq!(
            line,
            format!(
                "{MAC_SCHEME} {} {}\n",
                cache.key_id,
                crate::wasm::engine::hex(ours.as_ref())
            )
        );
        assert_eq!(unhex("00ff7a"), Some(vec![0, 0xff, 0x7a]));
        assert_eq!(unhex("0g"), None);
        assert_eq!(unhex("abc"), None);
    }

    #[test]
    fn directories_are_made_private_and_a_writable_one_is_refused_by_name() {
        let root = tempfile::tempdir().unwrap();
        let (dir, keys) = (root.path().join("a/cache"), root.path().join("keys"));
        ComponentCache::open(&dir, Some(keys.as_path())).unwrap();
        for d in [&dir, &keys] {
            let mode = std::fs::metadata(d).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", d.display());
        }
        let key = keys.join(KEY_FILE);
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // The same key on the next start.
        let a = ComponentCache::open(&dir, Some(keys.as_path())).unwrap();
        let b = ComponentCache::open(&dir, Some(keys.as_path())).unwrap();
        assert_eq!(a.key, b.key);

        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = ComponentCache::open(&dir, Some(keys.as_path()))
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            format!(
                "refusing the component cache {}: group or others can write it (mode 777); \
                 make it private (chmod go-w) or choose another (--cache-dir, $BERTH_CACHE_DIR)",
                dir.display()
            )
        );
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        ComponentCache::open(&dir, Some(keys.as_path())).unwrap();

        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = ComponentCache::open(&dir, Some(keys.as_path()))
            .err()
            .unwrap();
        assert!(
            matches!(&e, CacheError::KeyExposed { file, mode: 0o644 } if *file == key),
            "{e}"
        );
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o770)).unwrap();
        let e = ComponentCache::open(&dir, Some(keys.as_path()))
            .err()
            .unwrap();
        assert!(matches!(e, CacheError::KeyDirWritable { .. }), "{e}");
    }

    #[test]
    fn an_unusable_key_directory_falls_back_to_a_key_of_this_process() {
        let root = tempfile::tempdir().unwrap();
        // A file where the key directory should be: it cannot be made.
        let blocked = root.path().join("blocked");
        std::fs::write(&blocked, "").unwrap();
        let a = ComponentCache::open(&root.path().join("c"), Some(blocked.as_path())).unwrap();
        let b = ComponentCache::open(&root.path().join("c"), Some(blocked.as_path())).unwrap();
        assert_ne!(a.key, b.key);
    }

    #[test]
    fn only_a_digest_under_the_key_lets_an_artifact_through() {
        let root = tempfile::tempdir().unwrap();
        let engine = Engine::default();
        let ours = ComponentCache::with_key(root.path(), [1; 32]);
        let theirs = ComponentCache::with_key(root.path(), [2; 32]);
        let (name, bytes) = ("m.cwasm", b"not an artifact".as_slice());
        std::fs::write(ours.path(name), bytes).unwrap();
        assert!(matches!(ours.load(&engine, name), Lookup::Missing));

        // Under another key, as written by an earlier process with a key of its own.
        std::fs::write(ours.mac_path(name), theirs.mac_line(name, bytes)).unwrap();
        assert!(matches!(ours.load(&engine, name), Lookup::OtherKey));
        // Another key's digest presented as ours.
        let forged = theirs
            .mac_line(name, bytes)
            .replace(&theirs.key_id, &ours.key_id);
        std::fs::write(ours.mac_path(name), forged).unwrap();
        assert!(
            matches!(ours.load(&engine, name), Lookup::Refused(why) if why == "its digest does not match its contents")
        );
        // Our digest of other bytes.
        std::fs::write(ours.mac_path(name), ours.mac_line(name, b"other bytes")).unwrap();
        assert!(matches!(ours.load(&engine, name), Lookup::Refused(_)));
        // Our digest of these bytes, under another name.
        std::fs::write(ours.mac_path(name), ours.mac_line("n.cwasm", bytes)).unwrap();
        assert!(matches!(ours.load(&engine, name), Lookup::Refused(_)));
        // Our digest: checked, then handed to wasmtime, which refuses what is not an
        // artifact.
        std::fs::write(ours.mac_path(name), ours.mac_line(name, bytes)).unwrap();
        assert!(
            matches!(ours.load(&engine, name), Lookup::Refused(why) if why.starts_with("wasmtime refused it"))
        );
    }
}

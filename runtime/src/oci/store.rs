//! The modules pulled from registries, kept on disk so that a restart or a registry
//! that cannot be reached still loads the last good module.
//!
//! Layout, under the runtime's cache directory (`$BERTH_CACHE_DIR/oci`, made 0700):
//! `blobs/sha256/HEX` holds manifests and layers by digest, each checked against
//! its digest when read (a blob whose bytes do not match is removed and fetched
//! again); `tags/HEX` (HEX: the sha256 of `REGISTRY/REPOSITORY:TAG`) holds the
//! manifest digest the tag last resolved to, and the reference on a second line for
//! people.

use super::OciRef;
use sha2::{Digest, Sha256};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// `sha256:HEX` of some bytes.
pub fn digest_of(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// The on-disk store of pulled blobs and resolved tags.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

/// What reading a blob found.
pub(super) enum Blob {
    /// Its bytes, checked against its digest.
    Found(Vec<u8>),
    /// Not there.
    Missing,
    /// There, but its bytes do not match its digest (removed).
    Corrupt,
}

impl Store {
    /// The store in `dir` (created 0700 when first written).
    pub fn new(dir: PathBuf) -> Self {
        Store { dir }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn blob_path(&self, digest: &str) -> Option<PathBuf> {
        super::reference::check_digest(digest).ok()?;
        let hex = digest.strip_prefix("sha256:")?;
        Some(self.dir.join("blobs").join("sha256").join(hex))
    }

    fn tag_path(&self, r: &OciRef) -> Option<PathBuf> {
        let tag = r.tag()?;
        let key = digest_of(format!("{}/{}:{tag}", r.registry(), r.repository()).as_bytes());
        Some(self.dir.join("tags").join(&key["sha256:".len()..]))
    }

    /// The blob of `digest`, checked.
    pub(super) fn blob(&self, digest: &str) -> Blob {
        let Some(path) = self.blob_path(digest) else {
            return Blob::Missing;
        };
        match std::fs::read(&path) {
            Ok(bytes) if digest_of(&bytes) == digest => Blob::Found(bytes),
            Ok(_) => {
                let _ = std::fs::remove_file(&path);
                Blob::Corrupt
            }
            Err(_) => Blob::Missing,
        }
    }

    /// Keeps a blob whose digest was checked.
    pub(super) fn put_blob(&self, digest: &str, bytes: &[u8]) -> std::io::Result<()> {
        let path = self.blob_path(digest).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("bad digest {digest}"),
            )
        })?;
        write_atomically(&path, bytes)
    }

    /// The manifest digest a tag last resolved to.
    pub(super) fn tag(&self, r: &OciRef) -> Option<String> {
        let text = std::fs::read_to_string(self.tag_path(r)?).ok()?;
        let digest = text.lines().next()?.trim().to_owned();
        super::reference::check_digest(&digest).ok()?;
        Some(digest)
    }

    /// Records what a tag resolved to.
    pub(super) fn put_tag(&self, r: &OciRef, digest: &str) -> std::io::Result<()> {
        let Some(path) = self.tag_path(r) else {
            return Ok(());
        };
        let at_tag = r.at_tag().unwrap_or_else(|| r.clone());
        write_atomically(&path, format!("{digest}\n{at_tag}\n").as_bytes())
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so that a reader
/// never sees half a file; directories are made 0700.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("a store path has a directory");
    make_private_dirs(dir)?;
    let mut tmp = tempfile_in(dir)?;
    tmp.1.write_all(bytes)?;
    tmp.1.sync_all()?;
    std::fs::rename(&tmp.0, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp.0);
    })
}

fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    use rand::Rng as _;
    loop {
        let name = format!(".tmp-{:016x}", rand::rng().random::<u64>());
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

fn make_private_dirs(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        b.mode(0o700);
    }
    b.create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_checked_against_their_digest_and_tags_remembered() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::new(root.path().join("oci"));
        let bytes = b"a module".to_vec();
        let d = digest_of(&bytes);
        assert!(matches!(store.blob(&d), Blob::Missing));
        store.put_blob(&d, &bytes).unwrap();
        assert!(matches!(store.blob(&d), Blob::Found(b) if b == bytes));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(store.dir()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }

        // A changed byte: not served, and removed.
        let path = store.blob_path(&d).unwrap();
        std::fs::write(&path, b"a modulE").unwrap();
        assert!(matches!(store.blob(&d), Blob::Corrupt));
        assert!(!path.exists());

        let r = OciRef::parse("oci://127.0.0.1:5000/p/x:1.0").unwrap();
        assert_eq!(store.tag(&r), None);
        store.put_tag(&r, &d).unwrap();
        assert_eq!(store.tag(&r), Some(d.clone()));
        // The same tag of another repository is another entry.
        let other = OciRef::parse("oci://127.0.0.1:5000/p/y:1.0").unwrap();
        assert_eq!(store.tag(&other), None);
    }
}

//! What a run works out from a tree alone, kept for the next run: the attribute files an
//! export reads, the entries a protection covers. Each is a pure function of the tree (a
//! content address) and of what else its key names, so it holds for as long as the key does;
//! on a 100,000-file tree each costs a walk of every entry, on the way to a second run's
//! first test. One file a kind, holding the last key's answer, in the repository's own git
//! dir (`agent-git/derived`), where neither the model's commands nor the tests can write; a
//! build of agent-git trusts only what it wrote itself, so that no other build's reading of
//! a tree stands in for its own.

use std::hash::Hasher;
use std::path::{Path, PathBuf};

/// The first line of every file.
const MAGIC: &[u8] = b"agent-git derived 1\n";

/// A key: the parts it was made of, hashed with this build's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key(u64, u64);

impl Key {
    /// The key of `parts`, each written out with its length, so that no two lists of parts
    /// read alike.
    pub fn of(parts: &[&[u8]]) -> Key {
        let build = build_identity();
        let mut halves = [0u64; 2];
        for (seed, half) in halves.iter_mut().enumerate() {
            let mut hasher = siphasher::sip::SipHasher13::new_with_keys(seed as u64, 0);
            hasher.write(build.as_bytes());
            for part in parts {
                hasher.write_u64(part.len() as u64);
                hasher.write(part);
            }
            *half = hasher.finish();
        }
        Key(halves[0], halves[1])
    }

    fn text(&self) -> String {
        format!("{:016x}{:016x}\n", self.0, self.1)
    }
}

/// What identifies the running build: its executable's device, inode, size and
/// modification time. Another build (a rebuild, an upgrade) has another.
fn build_identity() -> &'static str {
    static IDENTITY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    IDENTITY.get_or_init(|| {
        use std::os::unix::fs::MetadataExt;
        let meta = std::env::current_exe().and_then(std::fs::metadata);
        match meta {
            Ok(m) => format!(
                "{} {} {} {} {} {}",
                env!("CARGO_PKG_VERSION"),
                m.dev(),
                m.ino(),
                m.size(),
                m.mtime(),
                m.mtime_nsec()
            ),
            // Unknown: nothing is trusted, as no key can match what another build wrote
            // under the same want of an identity.
            Err(_) => format!("unknown {}", std::process::id()),
        }
    })
}

/// Where what the repository whose common git dir is `common` keeps of `kind` is.
fn file_of(common: &Path, kind: &str) -> PathBuf {
    common.join("agent-git").join("derived").join(kind)
}

/// What was kept of `kind` under `key`, if that is the key it was kept under. Only a regular
/// file of a sane size is read (no link, pipe or device).
pub fn read(common: &Path, kind: &str, key: Key) -> Option<Vec<u8>> {
    let mut bytes = crate::files::read_kept(&file_of(common, kind), 64 << 20)?;
    let key = key.text();
    bytes.strip_prefix(MAGIC)?.strip_prefix(key.as_bytes())?;
    // Cut off in place: a copy held the file twice (2.5 MiB of paths at 100,000 files).
    bytes.drain(..MAGIC.len() + key.len());
    Some(bytes)
}

/// What is to be kept, before `open`: the common dir, the key, and the kind and value (see
/// `split_kind`).
type Waiting = Vec<(PathBuf, Key, Vec<u8>)>;

/// What was to be kept before `open`: written by it, or never where the process ends first.
/// None once open.
static PENDING: std::sync::Mutex<Option<Waiting>> = std::sync::Mutex::new(Some(Vec::new()));

fn pending() -> std::sync::MutexGuard<'static, Option<Waiting>> {
    PENDING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Lets what this process works out be kept from now on, and keeps what it worked out so
/// far: called once a run has started. Until then nothing is written, so that a plan that
/// fails leaves nothing in the repository.
pub fn open() {
    let waiting = pending().take();
    for (common, key, value) in waiting.into_iter().flatten() {
        let Some((kind, value)) = split_kind(&value) else {
            continue;
        };
        write_now(&common, kind, key, value);
    }
}

/// A pending value is its kind, a NUL, then the value.
fn split_kind(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let at = bytes.iter().position(|b| *b == 0)?;
    Some((std::str::from_utf8(&bytes[..at]).ok()?, &bytes[at + 1..]))
}

/// Keeps `value` as what `kind` is under `key`, in place of what was kept before, once the
/// process may keep anything (`open`).
pub fn write(common: &Path, kind: &str, key: Key, value: &[u8]) {
    if let Some(waiting) = pending().as_mut() {
        waiting.push((
            common.to_path_buf(),
            key,
            [kind.as_bytes(), &[0], value].concat(),
        ));
        return;
    }
    write_now(common, kind, key, value);
}

/// A file that cannot be written costs the next run only time.
fn write_now(common: &Path, kind: &str, key: Key, value: &[u8]) {
    let whole = [MAGIC, key.text().as_bytes(), value].concat();
    let _ = crate::files::keep(&file_of(common, kind), &whole);
}

/// Adds one part to a kept value: its `pieces`, then a NUL.
pub fn push_part(out: &mut Vec<u8>, pieces: &[&[u8]]) {
    for piece in pieces {
        out.extend_from_slice(piece);
    }
    out.push(0);
}

/// The parts `push_part` added; None where `bytes` are not such parts.
pub fn split_parts(bytes: &[u8]) -> Option<Vec<&[u8]>> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    Some(bytes.strip_suffix(&[0])?.split(|b| *b == 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_kept_is_read_back_under_its_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let common = dir.path();
        let key = Key::of(&[b"tree", b"a"]);
        assert_eq!(read(common, "kind", key), None);
        open();
        write(common, "kind", key, b"value");
        assert_eq!(read(common, "kind", key).as_deref(), Some(&b"value"[..]));
        // Parts that read alike when joined are other keys.
        assert_ne!(Key::of(&[b"tree", b"a"]), Key::of(&[b"tre", b"ea"]));
        assert_eq!(read(common, "kind", Key::of(&[b"tree", b"b"])), None);
        assert_eq!(read(common, "other", key), None);
        // A newer answer takes the place of the older.
        let newer = Key::of(&[b"tree", b"b"]);
        write(common, "kind", newer, b"newer");
        assert_eq!(read(common, "kind", key), None);
        assert_eq!(read(common, "kind", newer).as_deref(), Some(&b"newer"[..]));
        // A link in the file's place is not followed.
        let file = file_of(common, "kind");
        let elsewhere = common.join("elsewhere");
        std::fs::rename(&file, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
        assert_eq!(read(common, "kind", newer), None);
    }
}

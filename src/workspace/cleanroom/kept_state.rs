//! The state a lasting room keeps when its run lets go of it, and reading it back.

use super::walk::{Keys, Snapshot, Stamp};
use git2::Oid;

/// What a lasting room's run knew of it when it let go: the key of its hashes, the tree it
/// holds and the snapshot of its entries. Written only by agent-git, in the room's own folder,
/// which the tests cannot see and nobody else can enter.
pub(super) struct KeptState {
    pub(super) keys: Keys,
    pub(super) tree: Oid,
    pub(super) snapshot: Snapshot,
}

/// The first bytes of a room's state file.
pub(super) const STATE_MAGIC: &[u8] = b"agent-git clean room state 1\n";

impl KeptState {
    pub(super) fn encode(keys: Keys, tree: Oid, snapshot: &Snapshot) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + snapshot.files.len() * 16 + snapshot.dirs.len() * 48);
        out.extend_from_slice(STATE_MAGIC);
        for word in [keys.0, keys.1] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(tree.as_bytes());
        out.extend_from_slice(&(snapshot.files.len() as u64).to_le_bytes());
        for (key, hash) in &snapshot.files {
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(&hash.to_le_bytes());
        }
        out.extend_from_slice(&(snapshot.dirs.len() as u64).to_le_bytes());
        for (key, stamp) in &snapshot.dirs {
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(&stamp.ino.to_le_bytes());
            out.extend_from_slice(&stamp.ctime.to_le_bytes());
            out.extend_from_slice(&stamp.mtime.to_le_bytes());
            for word in [stamp.ctime_nsec, stamp.mtime_nsec, stamp.mode] {
                out.extend_from_slice(&word.to_le_bytes());
            }
        }
        out
    }

    /// The state in `bytes`, if they are one whole.
    pub(super) fn decode(bytes: &[u8]) -> Option<KeptState> {
        let mut input = Reader(bytes.strip_prefix(STATE_MAGIC)?);
        let keys = Keys(input.u64()?, input.u64()?);
        let tree = Oid::from_bytes(input.take(20)?).ok()?;
        let mut snapshot = Snapshot::default();
        let files = usize::try_from(input.u64()?).ok()?;
        snapshot.files.reserve(files.min(bytes.len() / 16));
        for _ in 0..files {
            snapshot.files.insert(input.u64()?, input.u64()?);
        }
        let dirs = usize::try_from(input.u64()?).ok()?;
        for _ in 0..dirs {
            let key = input.u64()?;
            let stamp = Stamp {
                ino: input.u64()?,
                ctime: input.i64()?,
                mtime: input.i64()?,
                ctime_nsec: input.u32()?,
                mtime_nsec: input.u32()?,
                mode: input.u32()?,
            };
            snapshot.dirs.insert(key, stamp);
        }
        input.0.is_empty().then_some(KeptState {
            keys,
            tree,
            snapshot,
        })
    }
}

/// Reads little-endian numbers off the front of a state file.
struct Reader<'b>(&'b [u8]);

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(taken)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
}

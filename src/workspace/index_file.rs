//! A checkout's index file read one entry at a time, never held whole: for a look that only
//! compares each entry with the file it names. libgit2 reads an index whole into entries, a
//! path each and a hash map of them: 21 MiB at 100,000 files, held while every file is looked
//! at. Read here as git's index-format document describes it (versions 2 to 4); whatever this
//! does not read (another version, a split or sparse index, an extension it must understand),
//! it does not answer, and the caller asks libgit2 instead.

use git2::{IndexEntry, IndexTime, Oid};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The size of an object id in the index: SHA-1 only (a SHA-256 repository is left to
/// libgit2).
const ID: usize = 20;
/// An entry's flags: its path's length where it is shorter than this, and the extended bit.
const NAME_LENGTH: u16 = 0x0fff;
const EXTENDED: u16 = 0x4000;
/// The longest path this reads: no checkout's path comes near it.
const MAX_PATH: usize = 1 << 16;

/// The entries of an index file, in its order (by path, then stage).
pub(crate) struct IndexFile {
    reader: BufReader<std::fs::File>,
    version: u32,
    /// How many entries the header says the file holds, and how many are left to read.
    count: u32,
    left: u32,
    path: Vec<u8>,
}

impl IndexFile {
    /// The index file at `path`, if it is one this can read.
    pub(crate) fn open(path: &Path) -> Option<IndexFile> {
        let mut reader = BufReader::with_capacity(64 << 10, std::fs::File::open(path).ok()?);
        let mut header = [0u8; 12];
        reader.read_exact(&mut header).ok()?;
        let version = be32(&header[4..8]);
        if &header[..4] != b"DIRC" || !(2..=4).contains(&version) {
            return None;
        }
        let count = be32(&header[8..12]);
        Some(IndexFile {
            reader,
            version,
            count,
            left: count,
            path: Vec::new(),
        })
    }

    /// The next entry; None after the last one, or where the file cannot be read as an index
    /// (which `tree` then says).
    pub(crate) fn next_entry(&mut self) -> Option<IndexEntry> {
        if self.left == 0 {
            return None;
        }
        let entry = self.read_entry();
        self.left = match entry {
            Some(_) => self.left - 1,
            // What follows cannot be trusted: `tree` answers nothing.
            None => u32::MAX,
        };
        entry
    }

    fn read_entry(&mut self) -> Option<IndexEntry> {
        let mut fixed = [0u8; 40 + ID + 2];
        self.reader.read_exact(&mut fixed).ok()?;
        let word = |i: usize| be32(&fixed[i * 4..i * 4 + 4]);
        let flags = u16::from_be_bytes([fixed[40 + ID], fixed[41 + ID]]);
        let mut length = fixed.len();
        let flags_extended = match flags & EXTENDED != 0 {
            true if self.version >= 3 => {
                let mut more = [0u8; 2];
                self.reader.read_exact(&mut more).ok()?;
                length += 2;
                u16::from_be_bytes(more)
            }
            true => return None,
            false => 0,
        };
        if self.version == 4 {
            // The path is the last one's, less as many bytes as a number says, then these.
            let strip = self.varint()?;
            let keep = self.path.len().checked_sub(strip)?;
            self.path.truncate(keep);
            self.read_name_onto_path()?;
        } else {
            self.path.clear();
            self.read_name_onto_path()?;
            length += self.path.len() + 1;
            // Padded with NULs (the one ending the path among them) to a multiple of eight.
            let padding = (8 - length % 8) % 8;
            let mut pad = [0u8; 8];
            self.reader.read_exact(&mut pad[..padding]).ok()?;
            if pad.iter().any(|b| *b != 0) {
                return None;
            }
        }
        let short = usize::from(flags & NAME_LENGTH);
        if short != usize::from(NAME_LENGTH) && short != self.path.len() {
            return None;
        }
        // Seconds as libgit2 reads them: the 32 bits taken as signed.
        let time = |i: usize| {
            let seconds = i32::from_be_bytes([
                fixed[i * 4],
                fixed[i * 4 + 1],
                fixed[i * 4 + 2],
                fixed[i * 4 + 3],
            ]);
            IndexTime::new(seconds, word(i + 1))
        };
        Some(IndexEntry {
            ctime: time(0),
            mtime: time(2),
            dev: word(4),
            ino: word(5),
            mode: word(6),
            uid: word(7),
            gid: word(8),
            file_size: word(9),
            id: Oid::from_bytes(&fixed[40..40 + ID]).ok()?,
            flags,
            flags_extended,
            path: self.path.clone(),
        })
    }

    /// Reads a NUL-ended name onto the end of `path`, without the NUL.
    fn read_name_onto_path(&mut self) -> Option<()> {
        let room = MAX_PATH.saturating_sub(self.path.len());
        (&mut self.reader)
            .take(u64::try_from(room).ok()?)
            .read_until(0, &mut self.path)
            .ok()?;
        (self.path.pop() == Some(0)).then_some(())
    }

    /// git's variable-length number: seven bits a byte, high bit set while more follow, each
    /// byte after the first adding one before the shift.
    fn varint(&mut self) -> Option<usize> {
        let mut byte = [0u8; 1];
        self.reader.read_exact(&mut byte).ok()?;
        let mut value = usize::from(byte[0] & 0x7f);
        while byte[0] & 0x80 != 0 {
            if value > MAX_PATH {
                return None;
            }
            self.reader.read_exact(&mut byte).ok()?;
            value = ((value + 1) << 7) | usize::from(byte[0] & 0x7f);
        }
        Some(value)
    }

    /// After the last entry: the tree the index's cached trees say it holds, where they are
    /// valid for the whole index and nothing says the entries read were not all of it.
    pub(crate) fn tree(mut self) -> Option<Oid> {
        use std::io::Seek;
        if self.left != 0 {
            return None;
        }
        let end = self.reader.get_ref().metadata().ok()?.len();
        // The extensions, each a signature, a size and that many bytes, up to the file's
        // checksum (twenty bytes).
        let mut left = end.checked_sub(self.reader.stream_position().ok()?)?;
        let mut root = None;
        while left > ID as u64 {
            let mut head = [0u8; 8];
            self.reader.read_exact(&mut head).ok()?;
            let size = u64::from(be32(&head[4..8]));
            left = left.checked_sub(8 + size)?;
            if left < ID as u64 {
                return None;
            }
            let mut data = (&mut self.reader).take(size);
            match &head[..4] {
                b"TREE" => {
                    // The root's entry comes first, and is short.
                    let mut first = Vec::new();
                    (&mut data).take(64).read_to_end(&mut first).ok()?;
                    // A root that covers other entries than the file holds names another
                    // index's tree (git has written such a root after splitting an index).
                    root = cached_root(&first)
                        .filter(|&(covered, _)| covered == u64::from(self.count))
                        .map(|(_, id)| id);
                }
                // Optional ones (an upper-case first letter) may be passed over; any other
                // changes what the entries mean (a split index's "link", a sparse one's "sdir").
                [b'A'..=b'Z', ..] => {}
                _ => return None,
            }
            std::io::copy(&mut data, &mut std::io::sink()).ok()?;
            if data.limit() != 0 {
                return None;
            }
        }
        (left == ID as u64).then_some(root).flatten()
    }
}

/// How many entries the whole tree in a cached-trees extension covers, and its id, if it is
/// valid.
fn cached_root(data: &[u8]) -> Option<(u64, Oid)> {
    // The root's entry: its path (empty), NUL, its entry count (-1 where invalid), a space,
    // its subtrees' count, a newline, then its id.
    let rest = data.strip_prefix(b"\0")?;
    let line = rest.iter().position(|b| *b == b'\n')?;
    let (counts, rest) = (&rest[..line], &rest[line + 1..]);
    let entries = std::str::from_utf8(counts).ok()?.split(' ').next()?;
    // Invalid ("-1") does not parse as a count.
    let covered = entries.parse::<u64>().ok()?;
    Some((covered, Oid::from_bytes(rest.get(..ID)?).ok()?))
}

fn be32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

#[cfg(test)]
pub(in crate::workspace) mod tests {
    use super::*;
    use git2::Repository;
    use std::process::Command;

    /// `git ARGS` in `dir`, with no user or system config and a fixed identity: its output,
    /// trimmed. Fails the test where git fails.
    pub(in crate::workspace) fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Every entry of the index at `path` as read here, and the tree it names.
    fn read(path: &Path) -> Option<(Vec<IndexEntry>, Option<Oid>)> {
        let mut file = IndexFile::open(path)?;
        let mut entries = Vec::new();
        while let Some(entry) = file.next_entry() {
            entries.push(entry);
        }
        Some((entries, file.tree()))
    }

    /// The fields of an entry, to compare: git2's entries are not comparable.
    fn fields(e: &IndexEntry) -> String {
        format!(
            "{} {}.{} {}.{} {} {} {:o} {} {} {} {} {:x} {:x}",
            String::from_utf8_lossy(&e.path),
            e.ctime.seconds(),
            e.ctime.nanoseconds(),
            e.mtime.seconds(),
            e.mtime.nanoseconds(),
            e.dev,
            e.ino,
            e.mode,
            e.uid,
            e.gid,
            e.file_size,
            e.id,
            e.flags,
            e.flags_extended,
        )
    }

    /// Each version of the index git writes is read entry for entry as libgit2 reads it, paths
    /// of every length (the padding of versions 2 and 3, the shared prefixes of version 4),
    /// extended flags included; the cached trees name the commit's tree until a change is
    /// staged, and an index split in two, whose entries are not all in the file, names none.
    #[test]
    fn each_version_is_read_as_libgit2_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        let mut names: Vec<String> = (1..=17).map(|n| "p".repeat(n)).collect();
        names.extend(["a/b/c.py", "a/b/cd.py", "a/bc/d.py", "ab", "z/ü.txt"].map(String::from));
        for name in &names {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, name.as_bytes()).unwrap();
        }
        git(root, &["add", "."]);
        // A long path, with no file to look at.
        let blob = git(root, &["rev-parse", ":ab"]);
        let long = format!("long/{}e", "n/".repeat(2000));
        let info = format!("100644,{blob},{long}");
        git(root, &["update-index", "--add", "--cacheinfo", &info]);
        names.push(long);
        git(root, &["commit", "-qm", "base"]);
        let repo = Repository::open(root).unwrap();
        let head = repo.head().unwrap().peel_to_tree().unwrap().id();
        let index_path = root.join(".git/index");
        let libgit2 = || -> Vec<String> {
            let mut index = repo.index().unwrap();
            index.read(true).unwrap();
            index.iter().map(|e| fields(&e)).collect()
        };
        let ours = || -> (Vec<String>, Option<Oid>) {
            let (entries, tree) = read(&index_path).expect("an index read here");
            (entries.iter().map(fields).collect(), tree)
        };

        for version in ["2", "4", "3"] {
            git(root, &["update-index", "--index-version", version]);
            let (entries, tree) = ours();
            assert_eq!(entries, libgit2(), "version {version}");
            assert_eq!(entries.len(), names.len());
            assert_eq!(tree, Some(head), "version {version}");
        }
        // Extended flags (version 3): skip-worktree, and a file only meant to be added.
        git(root, &["update-index", "--skip-worktree", "ab"]);
        std::fs::write(root.join("new.py"), "x\n").unwrap();
        git(root, &["add", "-N", "new.py"]);
        let (entries, _) = ours();
        assert_eq!(entries, libgit2());
        assert!(entries
            .iter()
            .any(|e| e.contains("ab ") && e.ends_with(" 4000")));
        assert!(entries
            .iter()
            .any(|e| e.starts_with("new.py ") && e.ends_with(" 2000")));
        git(root, &["update-index", "--index-version", "4"]);
        assert_eq!(ours().0, libgit2());

        // A path longer than an entry's flags can count (libgit2 refuses it).
        let longer = format!("longer/{}e", "n/".repeat(2100));
        let info = format!("100644,{blob},{longer}");
        git(root, &["update-index", "--add", "--cacheinfo", &info]);
        for version in ["2", "4"] {
            git(root, &["update-index", "--index-version", version]);
            let (entries, _) = read(&index_path).unwrap();
            assert!(entries.iter().any(|e| e.path == longer.as_bytes()));
            assert_eq!(entries.len(), names.len() + 2);
        }
        git(root, &["rm", "-q", "--cached", &longer]);

        // A staged change: the cached trees no longer name a tree for the whole index.
        git(root, &["rm", "-q", "--cached", "new.py"]);
        git(root, &["update-index", "--no-skip-worktree", "ab"]);
        std::fs::write(root.join("ab"), "changed\n").unwrap();
        git(root, &["add", "ab"]);
        assert_eq!(ours().1, None);
        git(root, &["commit", "-qm", "next"]);
        let next = repo.head().unwrap().peel_to_tree().unwrap().id();
        assert_eq!(ours().1, Some(next));
        // An optional extension is passed over: the untracked cache.
        git(root, &["config", "core.untrackedCache", "true"]);
        git(root, &["update-index", "--untracked-cache"]);
        git(root, &["status", "--porcelain"]);
        assert!(std::fs::read(&index_path)
            .unwrap()
            .windows(4)
            .any(|w| w == b"UNTR"));
        assert_eq!(ours(), (libgit2(), Some(next)));
        // A split index: the file holds only what changed since the shared part.
        git(root, &["update-index", "--split-index"]);
        std::fs::write(root.join("ab"), "again\n").unwrap();
        git(root, &["add", "ab"]);
        assert_eq!(read(&index_path).map(|(_, tree)| tree), Some(None));
    }

    /// Cached trees that cover other entries than the file holds name no tree: git has written
    /// an index of no entries whose cached root still covered the two it had split away.
    #[test]
    fn a_root_covering_other_entries_names_no_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        std::fs::write(root.join("a.py"), "a\n").unwrap();
        std::fs::write(root.join("c"), "c\n").unwrap();
        git(root, &["add", "."]);
        git(root, &["commit", "-qm", "base"]);
        let whole = std::fs::read(root.join(".git/index")).unwrap();
        assert!(read(&root.join(".git/index")).unwrap().1.is_some());
        // The same cached trees after a header of no entries.
        let at = whole
            .windows(5)
            .position(|w| w[..4] == *b"TREE" && w[4] == 0)
            .unwrap();
        let size = usize::try_from(be32(&whole[at + 4..at + 8])).unwrap();
        let mut emptied = b"DIRC\0\0\0\x02\0\0\0\0".to_vec();
        emptied.extend(&whole[at..at + 8 + size]);
        emptied.extend([0u8; ID]);
        let file = root.join("emptied");
        std::fs::write(&file, &emptied).unwrap();
        let (entries, tree) = read(&file).expect("an index read here");
        assert!(entries.is_empty());
        assert_eq!(tree, None);
    }

    /// A file cut short, or not an index at all, answers nothing.
    #[test]
    fn what_is_not_a_whole_index_names_no_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        std::fs::write(root.join("a.py"), "a\n").unwrap();
        git(root, &["add", "."]);
        git(root, &["commit", "-qm", "base"]);
        let whole = std::fs::read(root.join(".git/index")).unwrap();
        assert!(read(&root.join(".git/index")).unwrap().1.is_some());
        let cut = root.join("cut");
        for at in [whole.len() - 1, whole.len() - 21, whole.len() / 2, 20] {
            std::fs::write(&cut, &whole[..at]).unwrap();
            assert_eq!(read(&cut).and_then(|(_, tree)| tree), None, "cut at {at}");
        }
        std::fs::write(&cut, b"not an index at all").unwrap();
        assert!(IndexFile::open(&cut).is_none());
    }
}

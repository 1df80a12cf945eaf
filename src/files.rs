//! Opening files that a model's command or code under test may have replaced: a FIFO in place
//! of a file would block a plain open (or read) for good, and the harness with it.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::Path;

/// Opens `path` (following links) without ever waiting, and only if it is a regular file.
pub fn open_regular(path: &Path, options: &mut OpenOptions) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular = || std::io::Error::other("not a regular file");
    // Said plainly before the open, which for a FIFO without a reader fails with ENXIO.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(not_regular());
    }
    let file = options.custom_flags(libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// The bytes of the regular file at `path`, at most `max` of them.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path, OpenOptions::new().read(true))?
        .take(max)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The whole of what a run kept for a later one at `path`: only a regular file, not through
/// a link, of at most `largest` bytes (a larger one is refused, not cut). None otherwise: a
/// kept file costs a run time at most, never a hang.
pub fn read_kept(path: &Path, largest: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = opened.metadata().ok()?;
    if !meta.is_file() || meta.len() > largest {
        return None;
    }
    // Made at the file's size (and a byte to see its end): grown as it is read, the buffer
    // doubled past it.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).ok()?.saturating_add(1));
    opened.take(largest).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Keeps `bytes` at `path` for a later run, its folders made where missing: written whole
/// beside, then renamed into place, so that a run reading it finds all or none.
pub fn keep(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no folder to keep it in"))?;
    std::fs::create_dir_all(dir)?;
    let mut beside = tempfile::NamedTempFile::new_in(dir)?;
    beside.write_all(bytes)?;
    beside.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_or_a_link_to_one_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        for path in [&fifo, &link] {
            let read = read_regular(path, 10).unwrap_err();
            assert_eq!(read.to_string(), "not a regular file");
            let write = open_regular(path, OpenOptions::new().write(true)).unwrap_err();
            assert_eq!(write.to_string(), "not a regular file");
        }
        let text = dir.path().join("text");
        std::fs::write(&text, "0123456789abc").unwrap();
        assert_eq!(read_regular(&text, 10).unwrap(), b"0123456789");
        assert!(
            read_regular(dir.path(), 10).is_err(),
            "a directory is not read"
        );
    }
}

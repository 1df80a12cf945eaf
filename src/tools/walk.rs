//! Walking the work tree as git sees it, on every core: the reading tools' one walker.

use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// Calls `visit` for each file under `start` that git tracks or would track (.gitignore rules
/// apply, `.git` is skipped; a symlink counts as a file, as git stores it). The walk runs on
/// several threads: each gathers into its own state, made by `make`, and all the states come
/// back, in no particular order, when the walk is done.
pub(super) fn each_file<S, M, F>(start: &Path, make: M, visit: F) -> Vec<S>
where
    S: Send,
    M: Fn() -> S + Sync,
    F: Fn(&mut S, &DirEntry) + Sync,
{
    let done = Mutex::new(Vec::new());
    WalkBuilder::new(start)
        .hidden(false)
        .require_git(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build_parallel()
        .visit(&mut Gather {
            make: &make,
            visit: &visit,
            done: &done,
        });
    done.into_inner().unwrap_or_else(PoisonError::into_inner)
}

/// Makes one `Thread` for each thread of the walk.
struct Gather<'a, S, M, F> {
    make: &'a M,
    visit: &'a F,
    done: &'a Mutex<Vec<S>>,
}

impl<'a, S, M, F> ParallelVisitorBuilder<'a> for Gather<'a, S, M, F>
where
    S: Send + 'a,
    M: Fn() -> S + Sync,
    F: Fn(&mut S, &DirEntry) + Sync,
{
    fn build(&mut self) -> Box<dyn ParallelVisitor + 'a> {
        Box::new(Thread {
            state: Some((self.make)()),
            visit: self.visit,
            done: self.done,
        })
    }
}

/// One thread's share of the walk; its state joins the others when the thread ends.
struct Thread<'a, S, F> {
    state: Option<S>,
    visit: &'a F,
    done: &'a Mutex<Vec<S>>,
}

impl<S, F> ParallelVisitor for Thread<'_, S, F>
where
    S: Send,
    F: Fn(&mut S, &DirEntry) + Sync,
{
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        let is_file = |e: &DirEntry| e.file_type().is_some_and(|t| t.is_file() || t.is_symlink());
        if let (Ok(entry), Some(state)) = (entry, self.state.as_mut()) {
            if is_file(&entry) {
                (self.visit)(state, &entry);
            }
        }
        WalkState::Continue
    }
}

impl<S, F> Drop for Thread<'_, S, F> {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
            done.push(state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_file_git_would_track_is_visited_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (path, text) in [
            (".gitignore", "*.log\nbuild/\n"),
            ("a.py", ""),
            (".hidden", ""),
            ("x.log", ""),
            ("build/out.o", ""),
            ("sub/deep/b.py", ""),
            ("sub/.gitignore", "secret.txt\n"),
            ("sub/secret.txt", ""),
            (".git/HEAD", ""),
        ] {
            std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            std::fs::write(root.join(path), text).unwrap();
        }
        std::os::unix::fs::symlink("a.py", root.join("link.py")).unwrap();
        let states = each_file(root, Vec::new, |seen: &mut Vec<String>, e| {
            let rel = e.path().strip_prefix(root).unwrap();
            seen.push(rel.to_string_lossy().into_owned());
        });
        let all: Vec<String> = states.into_iter().flatten().collect();
        let unique: BTreeSet<&str> = all.iter().map(String::as_str).collect();
        assert_eq!(all.len(), unique.len(), "{all:?}");
        let expected = [
            ".gitignore",
            ".hidden",
            "a.py",
            "link.py",
            "sub/.gitignore",
            "sub/deep/b.py",
        ];
        assert_eq!(unique, expected.into_iter().collect());
    }
}

//! Which files the map shows first: the ones a failure passes through, what they import, the
//! ones defining names the failure mentions, then the rest. Ranking reads text, never parses.

use super::failures::output_of;
use super::frames::{frames_in, RepoFiles};
use super::lang::Lang;
use super::locate::{is_test_path, TestName};
use crate::testrun::TestResult;
use regex::Regex;
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

/// Names looked for at most: the first ones come from the test names and details.
const MAX_NAMES: usize = 48;

/// What a repository map is ranked by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Focus {
    /// Repository files the failures' tracebacks pass through, in the order printed.
    pub traced: Vec<String>,
    /// Files of the failing tests: shown late, but what they import ranks high.
    pub tests: Vec<String>,
    /// Identifiers from the failure output: files defining them rank next.
    pub names: Vec<String>,
}

impl Focus {
    /// The focus of a failed run: its tracebacks, its tests' files, the names it printed.
    pub fn from_result(result: &TestResult, files: &[String]) -> Focus {
        Focus::of(result, &RepoFiles::new(files))
    }

    /// `from_result`, with the files' index made once for the whole brief.
    pub(crate) fn of(result: &TestResult, repo: &RepoFiles) -> Focus {
        let frames = frames_in(&output_of(result), repo);
        let mut traced: Vec<String> = Vec::new();
        for frame in &frames {
            if !traced.contains(&frame.file) {
                traced.push(frame.file.clone());
            }
        }
        let mut tests: Vec<String> = Vec::new();
        for failure in &result.failing {
            if let Some(file) = test_file(&failure.name, repo) {
                if !tests.iter().any(|t| t == file) {
                    tests.push(file.to_string());
                }
            }
        }
        let mut texts: Vec<&str> = result.failing.iter().map(|f| f.name.as_str()).collect();
        texts.extend(result.failing.iter().filter_map(|f| f.detail.as_deref()));
        texts.extend(frames.iter().filter_map(|f| f.function.as_deref()));
        texts.push(&result.tail);
        Focus {
            traced,
            tests,
            names: identifiers(&texts),
        }
    }
}

/// The file of a test whose name says it (pytest's path, unittest's module), without reading.
fn test_file<'a>(name: &str, repo: &RepoFiles<'a>) -> Option<&'a str> {
    match TestName::parse(name) {
        TestName::Pytest { file, .. } => repo.resolve(&file, &[]),
        TestName::Dotted(parts) => (1..parts.len()).rev().find_map(|split| {
            let module = parts[..split].join("/");
            repo.ending_with(&format!("{module}.py")).first().copied()
        }),
        _ => None,
    }
}

/// Words of code in `texts`, first seen first, without the words every output has.
fn identifiers(texts: &[&str]) -> Vec<String> {
    const COMMON: &str = "self None True False def class return assert import from line File \
        Traceback most recent call last Error error ERROR failed passed FAILED FAIL thread \
        panicked left right stack backtrace note with the and for not expected actual received \
        got want main src lib tests anonymous async function Object const let var new run ran \
        exit status equal AssertionError";
    static WORD: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(word) = WORD.get_or_init(|| Regex::new(r"[A-Za-z_][A-Za-z0-9_]{2,}").ok()) else {
        return Vec::new();
    };
    let mut seen = HashSet::new();
    let mut names = Vec::new();
    // Paths name folders of the machine that ran the tests, not code.
    let tokens = texts.iter().flat_map(|t| t.split_whitespace());
    for token in tokens.filter(|t| !t.contains('/')) {
        for m in word.find_iter(token) {
            let name = m.as_str();
            let test_like = name.to_ascii_lowercase().starts_with("test");
            if !test_like && !COMMON.split_whitespace().any(|w| w == name) && seen.insert(name) {
                names.push(name.to_string());
                if names.len() == MAX_NAMES {
                    return names;
                }
            }
        }
    }
    names
}

/// A file the map may show, with its text when ranking already read it.
pub(crate) struct Candidate<'f> {
    pub path: &'f str,
    pub lang: Lang,
    pub text: Option<String>,
}

/// Rank key: tier first (0 traced, 1 imported, 2 defines names, 3 rest, 4 tests), then order,
/// then depth. Twelve bytes: the rest of a large repository is a list of these.
type Key = (u8, i32, u32);

/// The source files of a map in rank order, in two parts: the files the failure is about,
/// found by reading a few files; then the rest, whose ranking reads the files nearest the
/// failure (up to a budget) and is only worth it when the map gets that far.
///
/// Files are held as places in the repository's sorted paths (`RepoFiles::all`), four bytes
/// each: on 100,000 files, lists of pairs of slices and languages, and a candidate made for
/// every file to show a few hundred, held 10 MiB while the brief was written.
pub(crate) struct Ranking<'r, 'f> {
    all: &'r [&'f str],
    /// The files the map may show, as places in `all` (so in path order).
    sources: Vec<u32>,
    keys: HashMap<&'f str, Key>,
    texts: HashMap<&'f str, String>,
    /// The failing tests' files, then the traced ones: the test files shown first.
    late: Vec<&'f str>,
}

impl<'r, 'f> Ranking<'r, 'f> {
    /// Ranks the traced files and what they and the failing tests import.
    pub(crate) fn new(
        repo: &'r RepoFiles<'f>,
        read: &dyn Fn(&str) -> Option<String>,
        focus: &Focus,
    ) -> Self {
        let all = repo.all();
        // More files than a u32 counts are not shown.
        let count = u32::try_from(all.len()).unwrap_or(u32::MAX);
        let sources: Vec<u32> = (0..count)
            .filter(|&at| is_source(all[at as usize]))
            .collect();
        // A source file among the repository's, found in its sorted index.
        let pick = |f: &String| repo.get(f).filter(|f| is_source(f));
        let traced: Vec<&str> = focus.traced.iter().filter_map(pick).collect();
        let tests: Vec<&str> = focus.tests.iter().filter_map(pick).collect();
        let mut texts: HashMap<&str, String> = HashMap::new();
        let mut keys: HashMap<&str, Key> = HashMap::new();
        let importers: Vec<&str> = traced.iter().chain(&tests).copied().collect();
        let imported = imports_of(&importers, repo, read, &mut texts);
        let focused = traced
            .iter()
            .map(|f| (0, f))
            .chain(imported.iter().map(|f| (1, f)));
        for (i, (tier, file)) in focused.enumerate() {
            if !is_test_path(file) {
                keys.entry(file).or_insert((tier, order(i), 0));
            }
        }
        Ranking {
            all,
            late: tests.iter().chain(&traced).copied().collect(),
            sources,
            keys,
            texts,
        }
    }

    /// How many files the map may show.
    pub(crate) fn len(&self) -> usize {
        self.sources.len()
    }

    /// The files the failure is about, best first.
    pub(crate) fn focused(&mut self) -> Vec<Candidate<'f>> {
        let all = self.all;
        let mut focused: Vec<(Key, u32)> = self
            .sources
            .iter()
            .filter_map(|&at| Some((*self.keys.get(all[at as usize])?, at)))
            .collect();
        focused.sort_unstable();
        let texts = &mut self.texts;
        focused
            .into_iter()
            .filter_map(|(_, at)| candidate(all[at as usize], texts))
            .collect()
    }

    /// Every other file, best first: files defining `names` before the rest, tests last. Each
    /// is made a candidate only as the map reaches it.
    pub(crate) fn rest(
        mut self,
        names: &[String],
        read: &dyn Fn(&str) -> Option<String>,
        beside: Option<&super::Readers>,
    ) -> impl Iterator<Item = Candidate<'f>> + use<'r, 'f> {
        let all = self.all;
        // The files not ranked yet, each with whether it is a test's: looked at once.
        let others: Vec<(u32, bool)> = self
            .sources
            .iter()
            .filter(|&&at| !self.keys.contains_key(all[at as usize]))
            .map(|&at| (at, is_test_path(all[at as usize])))
            .collect();
        drop(self.sources);
        let found = match names.is_empty() {
            true => Vec::new(),
            false => {
                let unranked: Vec<u32> = others
                    .iter()
                    .filter(|(_, test)| !test)
                    .map(|&(at, _)| at)
                    .collect();
                let anchors: Vec<&str> = self.keys.keys().chain(&self.late).copied().collect();
                let nearest = nearest_first(&unranked, all, &anchors, DEFINING_FILES);
                drop(unranked);
                defining(&nearest, names, read, &mut self.texts, beside)
            }
        };
        let mut tiers: HashMap<&str, Key> = HashMap::new();
        for (file, count) in found {
            tiers.insert(file, (2, -order(count), 0));
        }
        let mut rest: Vec<(Key, u32)> = others
            .into_iter()
            .map(|(at, test)| (key(all[at as usize], test, &tiers, &self.late), at))
            .collect();
        // Places in `all` follow the paths' order, so this is by key, then path.
        rest.sort_unstable();
        let mut texts = self.texts;
        rest.into_iter()
            .filter_map(move |(_, at)| candidate(all[at as usize], &mut texts))
    }
}

/// `path` as the map's candidate, with its text if ranking read it.
fn candidate<'f>(path: &'f str, texts: &mut HashMap<&'f str, String>) -> Option<Candidate<'f>> {
    Some(Candidate {
        path,
        lang: Lang::of(path)?,
        text: texts.remove(path),
    })
}

/// A file the map may show: source, not vendored.
fn is_source(path: &str) -> bool {
    !vendored(path) && Lang::of(path).is_some()
}

/// A count or a place as a key's order.
fn order(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// A file's key: test files (`test`) go last (the failing ones first), the rest by depth then
/// path.
fn key(file: &str, test: bool, keys: &HashMap<&str, Key>, failing_tests: &[&str]) -> Key {
    let depth = u32::try_from(file.matches('/').count()).unwrap_or(u32::MAX);
    if !test {
        return keys.get(file).copied().unwrap_or((3, 0, depth));
    }
    match failing_tests.iter().position(|t| *t == file) {
        Some(i) => (4, order(i), 0),
        None => (4, i32::MAX, depth),
    }
}

/// The most text `defining` reads, and the most files: on a large repository it reads the
/// files nearest the failure, not the whole repository (100,000 files took seconds, and held
/// their text in memory), and the map then ranks the rest by path alone.
const DEFINING_BYTES: usize = 16 << 20;
pub(super) const DEFINING_FILES: usize = 5_000;

/// The first `limit` of `files` (places in `all`) with those in the folder of one of
/// `anchors` first (the files the failure is about), then those sharing the most folders with
/// one, then the rest, each part in the order it came: what a search that must stop somewhere
/// reads first.
fn nearest_first<'f>(
    files: &[u32],
    all: &[&'f str],
    anchors: &[&str],
    limit: usize,
) -> Vec<&'f str> {
    let own: HashSet<&str> = anchors.iter().map(|a| folder_of(a)).collect();
    // Each folder above an anchor, with how many folders deep it is.
    let mut shared: HashMap<&str, u32> = HashMap::new();
    for anchor in anchors {
        for (i, _) in anchor.match_indices('/') {
            let folder = &anchor[..i];
            let depth = u32::try_from(folder.matches('/').count() + 1).unwrap_or(u32::MAX);
            shared.insert(folder, depth);
        }
    }
    let nearness = |file: &str| -> (bool, u32) {
        let depth = file
            .rmatch_indices('/')
            .find_map(|(i, _)| shared.get(&file[..i]).copied())
            .unwrap_or(0);
        (own.contains(folder_of(file)), depth)
    };
    // Nearest first, then by where each came: twelve bytes a file, and only the first `limit`
    // of them sorted. A file's nearness is its folder's, and a folder's files come together.
    let mut last: Option<(&str, (bool, u32))> = None;
    let mut ranked: Vec<(std::cmp::Reverse<(bool, u32)>, u32)> = (0..files.len())
        .map(|i| {
            let file = all[files[i] as usize];
            let near = match last {
                Some((folder, near)) if folder == folder_of(file) => near,
                _ => {
                    let near = nearness(file);
                    last = Some((folder_of(file), near));
                    near
                }
            };
            (
                std::cmp::Reverse(near),
                u32::try_from(i).unwrap_or(u32::MAX),
            )
        })
        .collect();
    if ranked.len() > limit {
        ranked.select_nth_unstable(limit);
        ranked.truncate(limit);
    }
    ranked.sort_unstable();
    ranked
        .into_iter()
        .map(|(_, i)| all[files[i as usize] as usize])
        .collect()
}

/// The folder `path` is in; "" at the root.
fn folder_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The files of `candidates` that define any of `names`, with how many of them, read in
/// order until `DEFINING_BYTES` or `DEFINING_FILES` is reached; the texts of the files found
/// are kept in `texts`. Where `beside` makes readers, the second half is read in a thread of
/// its own: reading 5,000 files was half of a large repository's brief.
fn defining<'f>(
    candidates: &[&'f str],
    names: &[String],
    read: &dyn Fn(&str) -> Option<String>,
    texts: &mut HashMap<&'f str, String>,
    beside: Option<&super::Readers>,
) -> Vec<(&'f str, usize)> {
    let Some(pattern) = definition_pattern(names) else {
        return Vec::new();
    };
    let candidates = &candidates[..candidates.len().min(DEFINING_FILES)];
    let half = match beside {
        Some(_) if candidates.len() >= SEARCHED_BESIDE => candidates.len() / 2,
        _ => candidates.len(),
    };
    let (first, second) = candidates.split_at(half);
    let held = &*texts;
    let looked = std::thread::scope(|scope| {
        let other = beside.filter(|_| !second.is_empty()).map(|make| {
            let pattern = &pattern;
            scope.spawn(move || make().map(|read| search(second, pattern, &read, held)))
        });
        let mut looked = search(first, &pattern, read, held);
        let theirs = other.and_then(|other| other.join().ok().flatten());
        looked.extend(theirs.unwrap_or_else(|| search(second, &pattern, read, held)));
        looked
    });
    // As if read in one thread, in order: each half stopped no sooner than that would.
    let mut found = Vec::new();
    let mut bytes = 0;
    for (&file, seen) in candidates.iter().zip(looked) {
        if bytes >= DEFINING_BYTES {
            break;
        }
        match seen {
            Searched::Unread => {}
            Searched::Held(0) => {
                texts.remove(file);
            }
            Searched::Held(count) => found.push((file, count)),
            Searched::Read { bytes: read, text } => {
                bytes += read;
                if let Some((text, count)) = text {
                    found.push((file, count));
                    texts.entry(file).or_insert(text);
                }
            }
            Searched::Past => break,
        }
    }
    found
}

/// Fewer candidates than this are searched in one thread.
const SEARCHED_BESIDE: usize = 200;

/// What the search found of a file.
enum Searched {
    /// It could not be read.
    Unread,
    /// Its text was held already: how many of the names it defines.
    Held(usize),
    /// Read: its size, and its text with the count where it defines any of the names (else
    /// it is read again if the map reaches it: most files are not, and all of them would hold
    /// the repository's text in memory).
    Read {
        bytes: usize,
        text: Option<(String, usize)>,
    },
    /// Past `DEFINING_BYTES` of what this part read.
    Past,
}

/// `files`, each searched for `pattern`, in order, until `DEFINING_BYTES` are read.
fn search(
    files: &[&str],
    pattern: &Regex,
    read: &dyn Fn(&str) -> Option<String>,
    held: &HashMap<&str, String>,
) -> Vec<Searched> {
    let mut bytes = 0;
    files
        .iter()
        .map(|&file| {
            if bytes >= DEFINING_BYTES {
                return Searched::Past;
            }
            if let Some(text) = held.get(file) {
                return Searched::Held(distinct_matches(pattern, text));
            }
            let Some(text) = read(file) else {
                return Searched::Unread;
            };
            bytes += text.len();
            let count = distinct_matches(pattern, &text);
            Searched::Read {
                bytes: text.len(),
                text: (count > 0).then_some((text, count)),
            }
        })
        .collect()
}

/// Third-party code kept in the repository: never what a failure is about.
pub(super) fn vendored(path: &str) -> bool {
    let dirs = path.split('/').rev().skip(1);
    dirs.into_iter().any(|d| {
        matches!(
            d,
            "node_modules" | "vendor" | "third_party" | "site-packages" | ".venv" | "venv" | "dist"
        )
    }) || path.ends_with(".min.js")
}

/// `def NAME`, `fn NAME`, `func (r *T) NAME`, ... for the given names.
fn definition_pattern(names: &[String]) -> Option<Regex> {
    if names.is_empty() {
        return None;
    }
    let alternatives: Vec<String> = names.iter().map(|n| regex::escape(n)).collect();
    let pattern = format!(
        r"\b(?:def|class|fn|struct|enum|trait|type|func|function|interface|const|let|var|mod|impl)\s+(?:\([^)]*\)\s*)?({})\b",
        alternatives.join("|")
    );
    Regex::new(&pattern).ok()
}

fn distinct_matches(pattern: &Regex, text: &str) -> usize {
    let mut found: Vec<&str> = Vec::new();
    for c in pattern.captures_iter(text) {
        if let Some(m) = c.get(1) {
            if !found.contains(&m.as_str()) {
                found.push(m.as_str());
            }
        }
    }
    found.len()
}

/// The repository files that `importers` import, in the order found, importers excluded.
fn imports_of<'f>(
    importers: &[&'f str],
    repo: &RepoFiles<'f>,
    read: &dyn Fn(&str) -> Option<String>,
    texts: &mut HashMap<&'f str, String>,
) -> Vec<&'f str> {
    let mut found: Vec<&'f str> = Vec::new();
    for &importer in importers {
        let Some(text) = read(importer) else { continue };
        let Some(lang) = Lang::of(importer) else {
            continue;
        };
        let wanted = super::imports::imported(importer, lang, &text, repo);
        texts.insert(importer, text);
        for file in wanted {
            if !found.contains(&file) && !importers.contains(&file) {
                found.push(file);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_reads_the_failures_own_folders_first_then_their_neighbours() {
        let anchors = ["calc.py", "lib/util/x.py"];
        let files = vec![
            "lib/other/z.py",
            "lib/util/y.py",
            "docs/a.py",
            "helpers.py",
            "lib/util/deep/w.py",
        ];
        let places: Vec<u32> = (0..5).collect();
        assert_eq!(
            nearest_first(&places, &files, &anchors, 5),
            [
                "lib/util/y.py",
                "helpers.py",
                "lib/util/deep/w.py",
                "lib/other/z.py",
                "docs/a.py"
            ]
        );
        // Cut short, the same order as far as it goes.
        assert_eq!(
            nearest_first(&places, &files, &anchors, 3),
            ["lib/util/y.py", "helpers.py", "lib/util/deep/w.py"]
        );
    }

    /// The search in two threads finds what one finds, in the same order, keeps the same
    /// texts, and stops where one stops: past `DEFINING_BYTES` of text (here in the second
    /// half), nothing more is found.
    #[test]
    fn the_search_in_two_threads_finds_what_one_finds() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let filler = "x = 1\n".repeat(40_000 / 6);
        let mut files: HashMap<String, String> = HashMap::new();
        let paths: Vec<String> = (0..600).map(|i| format!("pkg/m{i:03}.py")).collect();
        for (i, path) in paths.iter().enumerate() {
            let defines = match i % 50 {
                7 => "def total(a):\n    pass\nclass Cart:\n    pass\n",
                9 => "def total(a):\n    pass\n",
                _ => "",
            };
            files.insert(path.clone(), format!("{defines}{filler}"));
        }
        // One that cannot be read, and one whose text is held already.
        files.remove(&paths[3]);
        let files = Arc::new(files);
        let names = vec!["total".to_string(), "Cart".to_string()];
        let candidates: Vec<&str> = paths.iter().map(String::as_str).collect();
        let reader = |files: Arc<HashMap<String, String>>, reads: Arc<AtomicUsize>| {
            move |path: &str| {
                reads.fetch_add(1, Ordering::SeqCst);
                files.get(path).cloned()
            }
        };
        let search = |beside: Option<&crate::brief::Readers>| {
            let mut texts: HashMap<&str, String> = HashMap::new();
            texts.insert(candidates[57], "def total(b): pass\n".to_string());
            let read = reader(files.clone(), Arc::new(AtomicUsize::new(0)));
            let found = defining(&candidates, &names, &read, &mut texts, beside);
            let mut kept: Vec<&str> = texts.keys().copied().collect();
            kept.sort_unstable();
            (found, kept)
        };
        let alone = search(None);
        let read_beside = Arc::new(AtomicUsize::new(0));
        let (files_there, reads) = (files.clone(), read_beside.clone());
        let maker = move || -> Option<crate::brief::Reader> {
            Some(Box::new(reader(files_there.clone(), reads.clone())))
        };
        let together = search(Some(&maker));
        assert_eq!(together, alone);
        assert!(
            read_beside.load(Ordering::SeqCst) > 0,
            "nothing read beside"
        );
        let (found, _) = alone;
        assert_eq!(found[0], (candidates[7], 2));
        assert!(found.contains(&(candidates[57], 1)));
        // 16 MiB of 40 kB files: the search stops after about 420 of them.
        let last = candidates
            .iter()
            .position(|c| *c == found.last().unwrap().0);
        assert!((400..430).contains(&last.unwrap()), "{last:?}");
        assert!(!found.iter().any(|(f, _)| *f == candidates[457]));
    }
}

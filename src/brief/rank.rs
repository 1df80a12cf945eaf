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

/// Rank key: tier first (0 traced, 1 imported, 2 defines names, 3 rest, 4 tests), then order.
type Key = (u8, i64, usize);

/// The source files of a map in rank order, in two parts: the files the failure is about,
/// found by reading a few files; then the rest, whose ranking reads the files nearest the
/// failure (up to a budget) and is only worth it when the map gets that far.
pub(crate) struct Ranking<'f> {
    sources: Vec<(&'f str, Lang)>,
    keys: HashMap<&'f str, Key>,
    texts: HashMap<&'f str, String>,
    /// The failing tests' files, then the traced ones: the test files shown first.
    late: Vec<&'f str>,
}

impl<'f> Ranking<'f> {
    /// Ranks the traced files and what they and the failing tests import.
    pub(crate) fn new(
        files: &'f [String],
        repo: &RepoFiles<'f>,
        read: &dyn Fn(&str) -> Option<String>,
        focus: &Focus,
    ) -> Self {
        let sources: Vec<(&str, Lang)> = files
            .iter()
            .filter(|f| !vendored(f))
            .filter_map(|f| Some((f.as_str(), Lang::of(f)?)))
            .collect();
        // A source file among the repository's, found in its sorted index: a set of every
        // source's name cost 3.5 MiB at 100,000 files, for the few names a failure traced.
        let pick = |f: &String| {
            repo.get(f)
                .filter(|f| !vendored(f) && Lang::of(f).is_some())
        };
        let traced: Vec<&str> = focus.traced.iter().filter_map(pick).collect();
        let tests: Vec<&str> = focus.tests.iter().filter_map(pick).collect();
        let mut texts: HashMap<&str, String> = HashMap::new();
        let mut keys: HashMap<&str, Key> = HashMap::new();
        let importers: Vec<&str> = traced.iter().chain(&tests).copied().collect();
        let imported = imports_of(&importers, repo, &sources, read, &mut texts);
        let focused = traced
            .iter()
            .map(|f| (0, f))
            .chain(imported.iter().map(|f| (1, f)));
        for (i, (tier, file)) in focused.enumerate() {
            if !is_test_path(file) {
                keys.entry(file).or_insert((tier, i as i64, 0));
            }
        }
        Ranking {
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
        let mut focused: Vec<(Key, &str, Lang)> = self
            .sources
            .iter()
            .filter_map(|&(f, lang)| Some((*self.keys.get(f)?, f, lang)))
            .collect();
        focused.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        self.candidates(focused)
    }

    /// Every other file, best first: files defining `names` before the rest, tests last.
    pub(crate) fn rest(
        mut self,
        names: &[String],
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<Candidate<'f>> {
        let unranked: Vec<&str> = self
            .sources
            .iter()
            .map(|(f, _)| *f)
            .filter(|f| !self.keys.contains_key(f) && !is_test_path(f))
            .collect();
        let found = match names.is_empty() {
            true => Vec::new(),
            false => {
                let anchors: Vec<&str> = self.keys.keys().chain(&self.late).copied().collect();
                let nearest = nearest_first(unranked, &anchors);
                defining(&nearest, names, read, &mut self.texts)
            }
        };
        let mut tiers: HashMap<&str, Key> = HashMap::new();
        for (file, count) in found {
            tiers.insert(file, (2, -(count as i64), 0));
        }
        let mut rest: Vec<(Key, &str, Lang)> = self
            .sources
            .iter()
            .filter(|(f, _)| !self.keys.contains_key(f))
            .map(|&(f, lang)| (key(f, &tiers, &self.late), f, lang))
            .collect();
        // Each path once, so no two compare equal: a sort in place gives the same order, without
        // the stable sort's buffer of half the list (4.8 MiB at 100,000 files).
        rest.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        self.candidates(rest)
    }

    fn candidates(&mut self, ranked: Vec<(Key, &'f str, Lang)>) -> Vec<Candidate<'f>> {
        ranked
            .into_iter()
            .map(|(_, path, lang)| Candidate {
                path,
                lang,
                text: self.texts.remove(path),
            })
            .collect()
    }
}

/// A file's key: test files go last (the failing ones first), the rest by depth then path.
fn key(file: &str, keys: &HashMap<&str, Key>, failing_tests: &[&str]) -> Key {
    let depth = file.matches('/').count();
    if !is_test_path(file) {
        return keys.get(file).copied().unwrap_or((3, 0, depth));
    }
    match failing_tests.iter().position(|t| *t == file) {
        Some(i) => (4, i as i64, 0),
        None => (4, i64::MAX, depth),
    }
}

/// The most text `defining` reads, and the most files: on a large repository it reads the
/// files nearest the failure, not the whole repository (100,000 files took seconds, and held
/// their text in memory), and the map then ranks the rest by path alone.
const DEFINING_BYTES: usize = 16 << 20;
pub(super) const DEFINING_FILES: usize = 5_000;

/// `files` with those in the folder of one of `anchors` first (the files the failure is
/// about), then those sharing the most folders with one, then the rest, each part in the
/// order it came: what a search that must stop somewhere reads first.
fn nearest_first<'f>(files: Vec<&'f str>, anchors: &[&str]) -> Vec<&'f str> {
    let own: HashSet<&str> = anchors.iter().map(|a| folder_of(a)).collect();
    // Each folder above an anchor, with how many folders deep it is.
    let mut shared: HashMap<&str, usize> = HashMap::new();
    for anchor in anchors {
        for (i, _) in anchor.match_indices('/') {
            let folder = &anchor[..i];
            shared.insert(folder, folder.matches('/').count() + 1);
        }
    }
    let nearness = |file: &str| -> (bool, usize) {
        let depth = file
            .rmatch_indices('/')
            .find_map(|(i, _)| shared.get(&file[..i]).copied())
            .unwrap_or(0);
        (own.contains(folder_of(file)), depth)
    };
    let mut ranked: Vec<((bool, usize), &str)> =
        files.into_iter().map(|f| (nearness(f), f)).collect();
    // Stable: files equally near keep their order.
    ranked.sort_by_key(|&(near, _)| std::cmp::Reverse(near));
    ranked.into_iter().map(|(_, f)| f).collect()
}

/// The folder `path` is in; "" at the root.
fn folder_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The files of `candidates` that define any of `names`, with how many of them, read in
/// order until `DEFINING_BYTES` or `DEFINING_FILES` is reached; the texts of the files found
/// are kept in `texts`.
fn defining<'f>(
    candidates: &[&'f str],
    names: &[String],
    read: &dyn Fn(&str) -> Option<String>,
    texts: &mut HashMap<&'f str, String>,
) -> Vec<(&'f str, usize)> {
    let Some(pattern) = definition_pattern(names) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut bytes = 0;
    for &file in candidates.iter().take(DEFINING_FILES) {
        if bytes >= DEFINING_BYTES {
            break;
        }
        let text = match texts.get(file) {
            Some(text) => text,
            None => {
                let Some(text) = read(file) else { continue };
                bytes += text.len();
                texts.entry(file).or_insert(text)
            }
        };
        let count = distinct_matches(&pattern, text);
        if count > 0 {
            found.push((file, count));
        } else {
            // Read again if the map reaches it: most files are not, and all of them would
            // hold the repository's text in memory.
            texts.remove(file);
        }
    }
    found
}

/// Third-party code kept in the repository: never what a failure is about.
fn vendored(path: &str) -> bool {
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
    sources: &[(&'f str, Lang)],
    read: &dyn Fn(&str) -> Option<String>,
    texts: &mut HashMap<&'f str, String>,
) -> Vec<&'f str> {
    let mut found: Vec<&'f str> = Vec::new();
    for &importer in importers {
        let Some(text) = read(importer) else { continue };
        let Some(lang) = Lang::of(importer) else {
            continue;
        };
        let wanted = super::imports::imported(importer, lang, &text, repo, sources);
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
        assert_eq!(
            nearest_first(files, &anchors),
            [
                "lib/util/y.py",
                "helpers.py",
                "lib/util/deep/w.py",
                "lib/other/z.py",
                "docs/a.py"
            ]
        );
    }
}

//! What `git archive` makes of a tree, which is what the clean room tests: an export of the
//! branch has no path whose `export-ignore` attribute is set, and files whose `export-subst`
//! is set have their `$Format:...$` placeholders expanded from the commit. Code the model
//! writes under an export-ignored folder is not tested, as no archive of the branch holds it.
//!
//! The attributes are read as `git archive` reads them: from the `.gitattributes` files of the
//! tree itself (deeper ones win, later lines win) and the repository's `info/attributes`
//! (which wins over all), with the macros of the top-level files.

use super::dates::{format_git_date, DateStyle};
use super::WorkspaceError;
use git2::{Commit, ObjectType, Oid, Repository, Tree};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const IGNORE: &str = "export-ignore";
const SUBST: &str = "export-subst";
const ATTRIBUTES: &str = ".gitattributes";

/// What one attribute word says: `name` (set), `-name` (unset), `!name` (unspecified again),
/// `name=value`. Only a set attribute is acted on by `git archive`, and expands as a macro.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Set,
    Other,
}

/// The words of one line: each attribute's name and what the line says of it, in order.
type Words = Vec<(String, State)>;

/// One line of an attributes file that may bear on the export attributes: its pattern,
/// matched from the folder of its file, and its attribute words.
struct Rule {
    dir: PathBuf,
    pattern: Gitignore,
    words: Words,
}

/// The export rules of a tree, lowest precedence first, and the macros they may use.
pub struct ExportRules {
    rules: Vec<Rule>,
    macros: HashMap<String, Words>,
}

impl ExportRules {
    /// The rules `tree` and the repository's `info/attributes` hold; none for the tree of
    /// nearly every project, which then is exported as it is.
    pub fn of(repo: &Repository, tree: &Tree) -> Result<ExportRules, WorkspaceError> {
        let mut files: Vec<(PathBuf, Oid)> = attribute_files(repo, tree)?.as_ref().clone();
        // Shallower files first: a deeper file's lines win over its parents'.
        files.sort_by_key(|(dir, _)| dir.components().count());
        let mut sources: Vec<(PathBuf, Vec<u8>)> = Vec::new();
        for (dir, id) in files {
            sources.push((dir, repo.find_blob(id)?.content().to_vec()));
        }
        let info = repo.commondir().join("info").join("attributes");
        if let Ok(text) = std::fs::read(&info) {
            sources.push((PathBuf::new(), text));
        }
        Ok(ExportRules::parse(&sources))
    }

    /// The rules of attribute files given as (folder, text), lowest precedence first, read
    /// as git reads them: a line with a word that is no attribute is dropped whole, so is one
    /// longer than 2048 bytes or with a negative pattern; a pattern may be quoted; macros
    /// come from the top-level files only, the last definition of the highest file winning,
    /// wherever it stands.
    fn parse(sources: &[(PathBuf, Vec<u8>)]) -> ExportRules {
        let none = || ExportRules {
            rules: Vec::new(),
            macros: HashMap::new(),
        };
        if !sources
            .iter()
            .any(|(_, text)| find(text, b"export-").is_some())
        {
            return none();
        }
        let mut macros: HashMap<String, Words> = HashMap::new();
        let mut lines: Vec<(&Path, String, Words)> = Vec::new();
        for (dir, text) in sources {
            for line in String::from_utf8_lossy(text).lines() {
                let Some((pattern, words)) = parse_line(line) else {
                    continue;
                };
                match pattern.strip_prefix("[attr]") {
                    Some(name) if dir.as_os_str().is_empty() && valid_name(name) => {
                        macros.insert(name.to_string(), words);
                    }
                    Some(_) => {}
                    None => lines.push((dir, pattern, words)),
                }
            }
        }
        let bearing = bearing_names(&macros);
        let rules: Vec<Rule> = lines
            .into_iter()
            .filter(|(_, _, words)| words.iter().any(|(name, _)| bearing.contains(name)))
            .filter_map(|(dir, pattern, words)| {
                let mut builder = GitignoreBuilder::new("");
                builder.add_line(None, &pattern).ok()?;
                Some(Rule {
                    dir: dir.to_path_buf(),
                    pattern: builder.build().ok()?,
                    words,
                })
            })
            .collect();
        if rules.is_empty() {
            return none();
        }
        ExportRules { rules, macros }
    }

    /// Whether an export is the tree as it is.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether `attribute` (IGNORE or SUBST) is set for the tree path `path`, by git's own
    /// reckoning: from the rule of highest precedence down, each line's words from its last,
    /// the first word that names an attribute decides it, and a macro set that way decides
    /// what it expands to where nothing decided it yet.
    fn is_set(&self, attribute: &str, path: &Path, is_dir: bool) -> bool {
        let mut decided: HashMap<&str, State> = HashMap::new();
        for rule in self.rules.iter().rev() {
            let Ok(rel) = path.strip_prefix(&rule.dir) else {
                continue;
            };
            if rel.as_os_str().is_empty() || !rule.pattern.matched(rel, is_dir).is_ignore() {
                continue;
            }
            self.fill(&rule.words, &mut decided, 0);
        }
        decided.get(attribute) == Some(&State::Set)
    }

    fn fill<'a>(&'a self, words: &'a Words, decided: &mut HashMap<&'a str, State>, depth: usize) {
        for (name, state) in words.iter().rev() {
            if decided.contains_key(name.as_str()) {
                continue;
            }
            decided.insert(name, *state);
            if *state == State::Set && depth < 16 {
                if let Some(expansion) = self.macros.get(name) {
                    self.fill(expansion, decided, depth + 1);
                }
            }
        }
    }
}

/// A line of an attributes file as git reads it: its pattern (unquoted) and its words, or
/// None for a comment, a blank line, and a line git drops.
fn parse_line(line: &str) -> Option<(String, Words)> {
    const MAX_LINE: usize = 2048;
    if line.len() > MAX_LINE {
        return None;
    }
    let line = line.trim_start_matches([' ', '\t', '\r', '\n']);
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (pattern, rest) = match line.strip_prefix('"') {
        Some(quoted) => unquote(quoted)?,
        None => {
            let end = line.find([' ', '\t', '\r']).unwrap_or(line.len());
            (line[..end].to_string(), &line[end..])
        }
    };
    // Negative patterns are ignored in attribute files.
    if pattern.starts_with('!') {
        return None;
    }
    let mut words = Vec::new();
    for word in rest.split([' ', '\t', '\r']).filter(|w| !w.is_empty()) {
        let (name, state) = match word.split_once('=') {
            Some((name, _)) => (name, State::Other),
            None => match word.strip_prefix(['-', '!']) {
                Some(name) => (name, State::Other),
                None => (word, State::Set),
            },
        };
        if !valid_name(name) {
            return None;
        }
        words.push((name.to_string(), state));
    }
    Some((pattern, words))
}

/// git's attribute names: letters, digits, `-`, `.` and `_`, not starting with `-`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
}

/// A C-quoted pattern (after its opening quote) as git unquotes it, and the rest of the line;
/// None when the quote does not end.
fn unquote(quoted: &str) -> Option<(String, &str)> {
    let bytes = quoted.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let pattern = String::from_utf8_lossy(&out).into_owned();
                return Some((pattern, &quoted[i + 1..]));
            }
            b'\\' => {
                let next = *bytes.get(i + 1)?;
                let (byte, used) = match next {
                    b'a' => (0x07, 2),
                    b'b' => (0x08, 2),
                    b'f' => (0x0c, 2),
                    b'n' => (b'\n', 2),
                    b'r' => (b'\r', 2),
                    b't' => (b'\t', 2),
                    b'v' => (0x0b, 2),
                    b'\\' | b'"' => (next, 2),
                    b'0'..=b'3' => {
                        let digits = quoted.get(i + 1..i + 4)?;
                        (u8::from_str_radix(digits, 8).ok()?, 4)
                    }
                    _ => return None,
                };
                out.push(byte);
                i += used;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    None
}

/// The attribute names that bear on an export: IGNORE, SUBST, and every macro that sets one
/// (or sets a macro that does).
fn bearing_names(macros: &HashMap<String, Words>) -> std::collections::HashSet<String> {
    let mut bearing: std::collections::HashSet<String> =
        [IGNORE, SUBST].iter().map(|n| n.to_string()).collect();
    loop {
        let more: Vec<String> = macros
            .iter()
            .filter(|(name, words)| {
                !bearing.contains(*name) && words.iter().any(|(w, _)| bearing.contains(w))
            })
            .map(|(name, _)| name.clone())
            .collect();
        if more.is_empty() {
            return bearing;
        }
        bearing.extend(more);
    }
}

/// Which values `export-subst` writes. An archive of the branch is made from a commit the run
/// cannot know yet (its report's, or the one `apply` makes), so a pass must not stand on them:
/// it is tested with the tested commit's values and again with other ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Values {
    /// The tested commit's, as `git archive` of it writes them.
    OfCommit,
    /// Others of the same shape (ids, dates, names, subject), and a word for every
    /// placeholder this does not expand.
    Other,
}

/// An archived tree, and whether `export-subst` wrote anything from the commit into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Archived {
    /// The tree the archive would hold: the one given when no `export-ignore` or `export-subst`
    /// rule applies.
    pub tree: Oid,
    /// Some `export-subst` placeholder was expanded, so the tree holds values of the commit (a pass
    /// on it is then tested again with other values).
    pub from_commit: bool,
}

/// The tree an archive of `commit` (of the bare tree, when there is none: git then expands
/// nothing) would hold. Paths `keep` names (the base's protected files: the original tests,
/// which anyone who checks an export runs) stay even where an export leaves them out.
pub fn archived(
    repo: &Repository,
    tree: Oid,
    commit: Option<Oid>,
    keep: &dyn Fn(&Path) -> bool,
    values: Values,
) -> Result<Archived, WorkspaceError> {
    let root = repo.find_tree(tree)?;
    let rules = ExportRules::of(repo, &root)?;
    if rules.is_empty() {
        return Ok(Archived {
            tree,
            from_commit: false,
        });
    }
    let commit = commit.map(|id| repo.find_commit(id)).transpose()?;
    let placeholders = match &commit {
        Some(commit) => Some(Placeholders::of(repo, commit, values)?),
        None => None,
    };
    let export = Export {
        repo,
        rules: &rules,
        placeholders: placeholders.as_ref(),
        keep,
        from_commit: std::cell::Cell::new(false),
    };
    let tree = match export.tree(&root, Path::new(""), false)? {
        Some(id) => id,
        None => repo.treebuilder(None)?.write()?,
    };
    Ok(Archived {
        tree,
        from_commit: export.from_commit.get(),
    })
}

/// The attribute files beneath each tree looked at (by its id, which names its content in
/// any repository): their folders relative to it, and their blobs.
type AttributeFiles = std::sync::Arc<Vec<(PathBuf, Oid)>>;

/// The attribute files of the trees looked at so far, in this process: a run tests trees that
/// differ from the base in a few folders, and only those are read again.
static ATTRIBUTE_MEMO: std::sync::Mutex<Option<HashMap<Oid, AttributeFiles>>> =
    std::sync::Mutex::new(None);

/// The most trees the memo holds before it starts over.
const MAX_ATTRIBUTE_MEMO: usize = 200_000;

/// The kind of what is kept of the attribute files of a repository's first tree looked at
/// (`derived`): the base's, the one its next run looks at first.
const ATTRIBUTE_FILES: &str = "attribute-files";

/// The `.gitattributes` files of `tree`, by their folders: the memo's where it has them,
/// else what the last process kept of the same tree, else a walk of the folders not yet seen.
fn attribute_files(repo: &Repository, tree: &Tree) -> Result<AttributeFiles, WorkspaceError> {
    let mut memo = ATTRIBUTE_MEMO
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let memo = memo.get_or_insert_with(HashMap::new);
    if memo.len() > MAX_ATTRIBUTE_MEMO {
        memo.clear();
    }
    if let Some(found) = memo.get(&tree.id()) {
        return Ok(found.clone());
    }
    let first = memo.is_empty();
    let key = super::derived::Key::of(&[ATTRIBUTE_FILES.as_bytes(), tree.id().as_bytes()]);
    let common = repo.commondir();
    if first {
        if let Some(kept) =
            super::derived::read(common, ATTRIBUTE_FILES, key).and_then(|b| decode_memo(&b))
        {
            *memo = kept;
            if let Some(found) = memo.get(&tree.id()) {
                return Ok(found.clone());
            }
        }
    }
    let found = attribute_files_in(repo, tree, memo)?;
    if first {
        super::derived::write(common, ATTRIBUTE_FILES, key, &encode_memo(memo));
    }
    Ok(found)
}

fn attribute_files_in(
    repo: &Repository,
    tree: &Tree,
    memo: &mut HashMap<Oid, AttributeFiles>,
) -> Result<AttributeFiles, WorkspaceError> {
    use std::os::unix::ffi::OsStrExt;
    if let Some(found) = memo.get(&tree.id()) {
        return Ok(found.clone());
    }
    let mut found = Vec::new();
    for entry in tree.iter() {
        match entry.kind() {
            Some(ObjectType::Tree) => {
                let name = Path::new(std::ffi::OsStr::from_bytes(entry.name_bytes()));
                let below = attribute_files_in(repo, &repo.find_tree(entry.id())?, memo)?;
                found.extend(below.iter().map(|(dir, id)| (name.join(dir), *id)));
            }
            Some(ObjectType::Blob) if entry.name_bytes() == ATTRIBUTES.as_bytes() => {
                found.push((PathBuf::new(), entry.id()));
            }
            _ => {}
        }
    }
    let found = std::sync::Arc::new(found);
    memo.insert(tree.id(), found.clone());
    Ok(found)
}

/// Each tree of the memo as its id and its count of files, then each file as its folder and
/// its blob's id, each a part (`derived::push_part`).
fn encode_memo(memo: &HashMap<Oid, AttributeFiles>) -> Vec<u8> {
    use super::derived::push_part;
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    for (tree, files) in memo {
        push_part(&mut out, &[tree.to_string().as_bytes()]);
        push_part(&mut out, &[files.len().to_string().as_bytes()]);
        for (dir, blob) in files.iter() {
            push_part(&mut out, &[dir.as_os_str().as_bytes()]);
            push_part(&mut out, &[blob.to_string().as_bytes()]);
        }
    }
    out
}

/// The memo `encode_memo` wrote; None for anything else.
fn decode_memo(bytes: &[u8]) -> Option<HashMap<Oid, AttributeFiles>> {
    use std::os::unix::ffi::OsStrExt;
    let oid = |part: &[u8]| Oid::from_str(std::str::from_utf8(part).ok()?).ok();
    let mut memo = HashMap::new();
    let mut parts = super::derived::split_parts(bytes)?.into_iter();
    while let Some(tree) = parts.next() {
        let tree = oid(tree)?;
        let count: usize = std::str::from_utf8(parts.next()?).ok()?.parse().ok()?;
        let mut files = Vec::new();
        for _ in 0..count {
            let dir = PathBuf::from(std::ffi::OsStr::from_bytes(parts.next()?));
            files.push((dir, oid(parts.next()?)?));
        }
        memo.insert(tree, std::sync::Arc::new(files));
    }
    Some(memo)
}

struct Export<'a> {
    repo: &'a Repository,
    rules: &'a ExportRules,
    placeholders: Option<&'a Placeholders>,
    keep: &'a dyn Fn(&Path) -> bool,
    from_commit: std::cell::Cell<bool>,
}

impl Export<'_> {
    /// `tree` (at `prefix`) as exported; None when nothing of it is left. `ignored`: a folder
    /// above is export-ignored.
    fn tree(
        &self,
        tree: &Tree,
        prefix: &Path,
        ignored: bool,
    ) -> Result<Option<Oid>, WorkspaceError> {
        use std::os::unix::ffi::OsStrExt;
        let mut builder = self.repo.treebuilder(None)?;
        let mut changed = false;
        for entry in tree.iter() {
            let path = prefix.join(std::ffi::OsStr::from_bytes(entry.name_bytes()));
            let is_dir = entry.kind() == Some(ObjectType::Tree);
            let ignored = ignored || self.rules.is_set(IGNORE, &path, is_dir);
            let id = if is_dir {
                self.tree(&self.repo.find_tree(entry.id())?, &path, ignored)?
            } else if ignored {
                (self.keep)(&path).then(|| entry.id())
            } else if entry.kind() == Some(ObjectType::Blob)
                && self.rules.is_set(SUBST, &path, false)
            {
                Some(self.substituted(entry.id())?)
            } else {
                Some(entry.id())
            };
            match id {
                Some(id) => {
                    changed |= id != entry.id();
                    builder.insert(entry.name_bytes(), id, entry.filemode_raw())?;
                }
                None => changed = true,
            }
        }
        if builder.is_empty() {
            return Ok(None);
        }
        if !changed {
            return Ok(Some(tree.id()));
        }
        Ok(Some(builder.write()?))
    }

    /// The blob `id` with its placeholders expanded, as a new blob when that changed it.
    fn substituted(&self, id: Oid) -> Result<Oid, WorkspaceError> {
        let Some(placeholders) = self.placeholders else {
            return Ok(id);
        };
        let blob = self.repo.find_blob(id)?;
        let expanded = expand_placeholders(blob.content(), placeholders);
        if expanded == blob.content() {
            return Ok(id);
        }
        self.from_commit.set(true);
        Ok(self.repo.blob(&expanded)?)
    }
}

/// What `git log --format` placeholders say of one commit, as `git archive` expands them
/// (the `%h` abbreviations unique in this repository, `%d` from the refs that point at it).
struct Placeholders {
    values: HashMap<&'static str, String>,
    /// What a placeholder this does not know becomes: None keeps it as written.
    unknown: Option<&'static str>,
}

impl Placeholders {
    fn of(
        repo: &Repository,
        commit: &Commit,
        values: Values,
    ) -> Result<Placeholders, WorkspaceError> {
        let other = values == Values::Other;
        let short = |id: Oid| -> Result<String, WorkspaceError> {
            let object = repo.find_object(id, None)?;
            let text = object.short_id()?.as_str().unwrap_or_default().to_string();
            Ok(if other { other_hex(&text) } else { text })
        };
        let full = |id: Oid| {
            if other {
                other_hex(&id.to_string())
            } else {
                id.to_string()
            }
        };
        let word = |text: String| if other { format!("other {text}") } else { text };
        let parents: Vec<Oid> = commit.parent_ids().collect();
        let mut values: HashMap<&'static str, String> = HashMap::new();
        values.insert("H", full(commit.id()));
        values.insert("h", short(commit.id())?);
        values.insert("T", full(commit.tree_id()));
        values.insert("t", short(commit.tree_id())?);
        let all: Vec<String> = parents.iter().map(|p| full(*p)).collect();
        values.insert("P", all.join(" "));
        let abbreviated: Result<Vec<String>, _> = parents.iter().map(|p| short(*p)).collect();
        values.insert("p", abbreviated?.join(" "));
        for (who, signature) in [("a", commit.author()), ("c", commit.committer())] {
            let name = word(String::from_utf8_lossy(signature.name_bytes()).into_owned());
            let email = word(String::from_utf8_lossy(signature.email_bytes()).into_owned());
            let when = signature.when();
            // A day and an hour later: another date, in the same zone.
            let shift = if other { 90_061 } else { 0 };
            let time = git2::Time::new(when.seconds() + shift, when.offset_minutes());
            let dates = [
                ("d", format_git_date(time, DateStyle::Default)),
                ("D", format_git_date(time, DateStyle::Rfc)),
                ("i", format_git_date(time, DateStyle::Iso)),
                ("I", format_git_date(time, DateStyle::Strict)),
                ("s", format_git_date(time, DateStyle::Short)),
                ("t", time.seconds().to_string()),
                ("n", name.clone()),
                ("N", name),
                ("e", email.clone()),
                ("E", email),
            ];
            for (key, value) in dates {
                values.insert(placeholder_key(who, key), value);
            }
        }
        let message = word(String::from_utf8_lossy(commit.message_bytes()).into_owned());
        let (subject, body) = split_message(&message);
        values.insert("s", subject);
        values.insert("b", body);
        values.insert("B", message);
        let mut refs = refs_at(repo, commit.id())?;
        if other {
            refs.push("agent-git/other".to_string());
        }
        values.insert("D", refs.join(", "));
        let decorated = if refs.is_empty() {
            String::new()
        } else {
            format!(" ({})", refs.join(", "))
        };
        values.insert("d", decorated);
        Ok(Placeholders {
            values,
            unknown: other.then_some("agent-git-other"),
        })
    }
}

/// `hex` with every digit another (of the same length).
fn other_hex(hex: &str) -> String {
    hex.chars()
        .map(|c| match c.to_digit(16) {
            Some(d) => std::char::from_digit((d + 1) % 16, 16).unwrap_or(c),
            None => c,
        })
        .collect()
}

/// `"a" + "d"` as a `'static` key.
fn placeholder_key(who: &str, key: &str) -> &'static str {
    const KEYS: [&str; 20] = [
        "ad", "aD", "ai", "aI", "as", "at", "an", "aN", "ae", "aE", "cd", "cD", "ci", "cI", "cs",
        "ct", "cn", "cN", "ce", "cE",
    ];
    KEYS.iter()
        .find(|k| k.starts_with(who) && &k[1..] == key)
        .copied()
        .unwrap_or("")
}

/// git's subject (the first paragraph, its lines joined by spaces) and body (the rest).
fn split_message(message: &str) -> (String, String) {
    let message = message.trim_start_matches('\n');
    let (subject, body) = match message.split_once("\n\n") {
        Some((subject, body)) => (subject, body.trim_start_matches('\n')),
        None => (message.trim_end_matches('\n'), ""),
    };
    let subject: Vec<&str> = subject.lines().map(str::trim).collect();
    (subject.join(" "), body.to_string())
}

/// The names of the branches, tags and remote branches at `id`, as `%D` lists them.
fn refs_at(repo: &Repository, id: Oid) -> Result<Vec<String>, WorkspaceError> {
    let mut names = Vec::new();
    for reference in repo.references()?.flatten() {
        let (Ok(name), Ok(target)) = (reference.name(), reference.peel_to_commit()) else {
            continue;
        };
        if target.id() != id {
            continue;
        }
        if let Some(branch) = name.strip_prefix("refs/heads/") {
            names.push(branch.to_string());
        } else if let Some(tag) = name.strip_prefix("refs/tags/") {
            names.push(format!("tag: {tag}"));
        } else if let Some(remote) = name.strip_prefix("refs/remotes/") {
            names.push(remote.to_string());
        }
    }
    // HEAD first, as git decorates: `HEAD -> main` for the branch it is on.
    if let Ok(head) = repo.head() {
        if head.peel_to_commit().is_ok_and(|c| c.id() == id) {
            let branch = head
                .shorthand()
                .ok()
                .filter(|_| head.is_branch())
                .map(String::from);
            match branch {
                Some(branch) => {
                    names.retain(|name| *name != branch);
                    names.insert(0, format!("HEAD -> {branch}"));
                }
                None => names.insert(0, "HEAD".to_string()),
            }
        }
    }
    Ok(names)
}

/// `text` with each `$Format:FORMAT$` replaced by FORMAT expanded: `%H`, `%an`, `%n`,
/// `%%`, `%x0a` and the like; a placeholder this does not know stays as it is written.
fn expand_placeholders(text: &[u8], values: &Placeholders) -> Vec<u8> {
    const OPEN: &[u8] = b"$Format:";
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = find(rest, OPEN) {
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.iter().position(|b| *b == b'$') else {
            break;
        };
        out.extend_from_slice(&rest[..start]);
        out.extend_from_slice(format_one(&after[..end], values).as_bytes());
        rest = &after[end + 1..];
    }
    out.extend_from_slice(rest);
    out
}

fn format_one(format: &[u8], values: &Placeholders) -> String {
    let format = String::from_utf8_lossy(format);
    let mut out = String::new();
    let mut chars = format.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let rest = &format[at + 1..];
        let (value, used) = match rest.chars().next() {
            Some('%') => (Some("%".to_string()), 1),
            Some('n') => (Some("\n".to_string()), 1),
            Some('x') => match rest.get(1..3).and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(byte) if byte.is_ascii() => (Some(char::from(byte).to_string()), 3),
                _ => (None, 0),
            },
            Some(who @ ('a' | 'c')) => match rest.get(1..2) {
                Some(key) => {
                    let value = values.values.get(placeholder_key(&who.to_string(), key));
                    (value.cloned(), 2)
                }
                None => (None, 0),
            },
            Some(one) => (values.values.get(&one.to_string()[..]).cloned(), 1),
            None => (None, 0),
        };
        match (value, values.unknown) {
            (Some(value), _) => {
                out.push_str(&value);
                for _ in 0..used {
                    chars.next();
                }
            }
            // `%(describe)`, `%ar`, `%G?`, ...: a word, consuming what git would read.
            (None, Some(word)) if !rest.is_empty() => {
                out.push_str(word);
                let used = match rest.find(')').filter(|_| rest.starts_with('(')) {
                    Some(close) => rest[..=close].chars().count(),
                    None => rest.chars().next().map_or(0, |_| 1),
                };
                for _ in 0..used {
                    chars.next();
                }
            }
            (None, _) => out.push('%'),
        }
    }
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_DATE", "2026-01-05T10:00:00+01:00")
            .env("GIT_COMMITTER_DATE", "2026-01-05T10:00:00+01:00")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        out.stdout
    }

    /// Every file of `tree`, with its content.
    fn files(repo: &Repository, tree: Oid) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let tree = repo.find_tree(tree).unwrap();
        super::super::entries::each_entry(repo, &tree, &mut |dir, entry| {
            if entry.kind() == Some(ObjectType::Blob) {
                let blob = repo.find_blob(entry.id()).unwrap();
                let text = String::from_utf8_lossy(blob.content()).into_owned();
                let path = super::super::entries::entry_path(dir, entry);
                out.push((path.to_string_lossy().into_owned(), text));
            }
            true
        })
        .unwrap();
        out.sort();
        out
    }

    /// Every file of `git archive HEAD`, with its content, read back from the tar itself.
    fn archive(dir: &Path) -> Vec<(String, String)> {
        let out = tempfile::tempdir().unwrap();
        let tar = out.path().join("a.tar");
        git(dir, &["archive", "-o", tar.to_str().unwrap(), "HEAD"]);
        let unpacked = out.path().join("x");
        std::fs::create_dir(&unpacked).unwrap();
        assert!(Command::new("tar")
            .args([
                "-xf",
                tar.to_str().unwrap(),
                "-C",
                unpacked.to_str().unwrap()
            ])
            .status()
            .unwrap()
            .success());
        let mut files = Vec::new();
        for entry in walkdir::WalkDir::new(&unpacked) {
            let entry = entry.unwrap();
            if entry.file_type().is_file() {
                let rel = entry.path().strip_prefix(&unpacked).unwrap();
                files.push((
                    rel.to_string_lossy().into_owned(),
                    std::fs::read_to_string(entry.path()).unwrap(),
                ));
            }
        }
        files.sort();
        files
    }

    /// The attribute files found through the memo (and through what was kept of it) are the
    /// ones a walk of every entry finds, in a tree and in one changed from it.
    #[test]
    fn attribute_files_through_the_memo_are_those_a_walk_finds() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let tree_of = |files: &[(&str, &str)]| {
            let mut index = git2::Index::new().unwrap();
            for (path, text) in files {
                let blob = repo.blob(text.as_bytes()).unwrap();
                let mut entry = git2::IndexEntry {
                    ctime: git2::IndexTime::new(0, 0),
                    mtime: git2::IndexTime::new(0, 0),
                    dev: 0,
                    ino: 0,
                    mode: 0o100644,
                    uid: 0,
                    gid: 0,
                    file_size: 0,
                    id: blob,
                    flags: 0,
                    flags_extended: 0,
                    path: path.as_bytes().to_vec(),
                };
                entry.flags = u16::try_from(path.len()).unwrap().min(0xfff);
                index.add(&entry).unwrap();
            }
            index.write_tree_to(&repo).unwrap()
        };
        let walked = |tree: Oid| {
            let tree = repo.find_tree(tree).unwrap();
            let mut found = Vec::new();
            super::super::entries::each_entry(&repo, &tree, &mut |dir, entry| {
                if entry.name_bytes() == ATTRIBUTES.as_bytes() {
                    found.push((dir.to_path_buf(), entry.id()));
                }
                true
            })
            .unwrap();
            found.sort();
            found
        };
        let first = tree_of(&[
            (".gitattributes", "*.txt export-ignore\n"),
            ("a/.gitattributes", "x export-subst\n"),
            ("a/b/c/.gitattributes", "y export-ignore\n"),
            ("a/b/file.py", "1\n"),
            ("d/file.py", "2\n"),
        ]);
        let second = tree_of(&[
            (".gitattributes", "*.txt export-ignore\n"),
            ("a/.gitattributes", "x export-subst\n"),
            ("a/b/c/.gitattributes", "y export-ignore\n"),
            ("a/b/file.py", "1\n"),
            ("d/.gitattributes", "z export-ignore\n"),
            ("d/file.py", "2\n"),
        ]);
        let mut memo = HashMap::new();
        for tree in [first, second, first] {
            let found = attribute_files_in(&repo, &repo.find_tree(tree).unwrap(), &mut memo);
            let mut found = found.unwrap().as_ref().clone();
            found.sort();
            assert_eq!(found, walked(tree));
        }
        assert_eq!(walked(second).len(), 4);
        let kept = decode_memo(&encode_memo(&memo)).unwrap();
        assert_eq!(kept, memo);
        assert_eq!(decode_memo(b"not a memo"), None);
    }

    #[test]
    fn an_export_holds_what_git_archive_holds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let attributes = "\
[attr]private export-ignore\n\
/tools/ export-ignore\n\
*.secret private\n\
docs/**/*.draft export-ignore\n\
build export-ignore\n\
!negated export-ignore\n\
version.txt export-subst\n\
kept.secret -export-ignore\n\
sub/stamp.txt export-subst\n\
vendor/** export-ignore\n\
vendor/kept.py -export-ignore   # a comment git drops the whole line for\n\
late/** latemacro\n\
[attr]latemacro export-ignore\n\
cancel/x.py private\n\
cancel/x.py -private\n\
\"with space/**\" export-ignore\n\
\"oct\\040al/**\" export-ignore\n\
dropped/** export-ignore b@d\n\
frominfo/** infomacro\n";
        let files_in = [
            (".gitattributes", attributes),
            ("tools/gen.py", "x\n"),
            ("src/tools/kept.py", "kept: a tools/ below the top\n"),
            ("a.secret", "gone\n"),
            ("kept.secret", "unset again\n"),
            ("docs/guide/a.draft", "gone\n"),
            ("docs/guide/a.md", "kept\n"),
            ("lib/build/out.txt", "a folder named build, anywhere\n"),
            ("build", "wait: a file named build\n"),
            ("negated", "negative patterns do nothing\n"),
            ("version.txt", "$Format:%H %h %T %P %an <%ae> %ad|%aI|%ci|%cs|%ct%n%s%%%x41 %q %b$ and $Format:%d$ $no end\n"),
            ("sub/.gitattributes", "stamp.txt -export-subst\nlocal.txt export-ignore\n"),
            ("sub/stamp.txt", "$Format:%H$\n"),
            ("sub/local.txt", "gone\n"),
            ("protected/local.txt", "kept by the caller\n"),
            ("vendor/kept.py", "gone: the line that keeps it is dropped\n"),
            ("late/a.py", "gone: a macro counts wherever it is defined\n"),
            ("cancel/x.py", "kept: -private unsets the macro\n"),
            ("with space/a.txt", "gone\n"),
            ("oct al/a.txt", "gone\n"),
            ("dropped/a.txt", "kept: its line is dropped\n"),
            ("frominfo/a.txt", "gone: a macro of info/attributes\n"),
        ];
        for (path, text) in files_in {
            let full = root.join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        std::fs::write(root.join("protected/.gitattributes"), "* export-ignore\n").unwrap();
        git(root, &["init", "-q", "-b", "main"]);
        std::fs::create_dir_all(root.join(".git/info")).unwrap();
        std::fs::write(
            root.join(".git/info/attributes"),
            "[attr]infomacro export-ignore\n",
        )
        .unwrap();
        git(root, &["add", "-A"]);
        git(
            root,
            &[
                "-c",
                "user.name=A U",
                "-c",
                "user.email=a@u",
                "commit",
                "-q",
                "-m",
                "first line\nsecond\n\nthe body",
            ],
        );
        git(root, &["tag", "v1"]);
        let repo = Repository::open(root).unwrap();
        let head = repo.head().unwrap().peel_to_commit().unwrap();
        let exported = archived(
            &repo,
            head.tree_id(),
            Some(head.id()),
            &|_| false,
            Values::OfCommit,
        )
        .unwrap();
        assert!(exported.from_commit);
        assert_eq!(files(&repo, exported.tree), archive(root));
        // Other values: every placeholder writes something else, unknown ones a word.
        let other = archived(
            &repo,
            head.tree_id(),
            Some(head.id()),
            &|_| false,
            Values::Other,
        )
        .unwrap();
        let version = |tree| {
            files(&repo, tree)
                .into_iter()
                .find(|(name, _)| name == "version.txt")
                .unwrap()
                .1
        };
        let (mine, theirs) = (version(exported.tree), version(other.tree));
        assert!(
            theirs.contains("agent-git-other") && !theirs.contains("%q"),
            "{theirs}"
        );
        for (a, b) in mine
            .split(['|', ' ', '\n'])
            .zip(theirs.split(['|', ' ', '\n']))
        {
            assert!(
                a != b || a.is_empty() || a == "and" || a == "$no" || a == "end",
                "{a}"
            );
        }
        // What the caller keeps (the protected files) stays, under an ignored folder too.
        let keep = |p: &Path| p.starts_with("protected");
        let kept = archived(
            &repo,
            head.tree_id(),
            Some(head.id()),
            &keep,
            Values::OfCommit,
        )
        .unwrap();
        let names: Vec<String> = files(&repo, kept.tree)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert!(
            names.contains(&"protected/local.txt".to_string()),
            "{names:?}"
        );
        assert!(!names.contains(&"tools/gen.py".to_string()), "{names:?}");
    }

    #[test]
    fn a_tree_without_export_rules_is_its_own_export() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".gitattributes"), "*.sh text eol=lf\n").unwrap();
        std::fs::write(dir.path().join("a.sh"), "$Format:%H$\n").unwrap();
        git(dir.path(), &["init", "-q"]);
        git(dir.path(), &["add", "-A"]);
        git(
            dir.path(),
            &[
                "-c",
                "user.name=A",
                "-c",
                "user.email=a@u",
                "commit",
                "-q",
                "-m",
                "x",
            ],
        );
        let repo = Repository::open(dir.path()).unwrap();
        let head = repo.head().unwrap().peel_to_commit().unwrap();
        let exported = archived(
            &repo,
            head.tree_id(),
            Some(head.id()),
            &|_| false,
            Values::Other,
        )
        .unwrap();
        assert_eq!(exported.tree, head.tree_id());
        assert!(!exported.from_commit);
    }
}

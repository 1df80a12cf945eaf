//! Tests that live inside source files rather than beside them: Rust's `#[cfg(test)]` modules,
//! `#[test]` functions and doc tests, and Python's doctests. The code around them may change;
//! they may not.

use quote::ToTokens;
use syn::visit::Visit;

/// The tests of a Rust source file, in order: every item under `#[cfg(test)]` (or any `cfg`
/// that names `test`), every `#[test]`-like function (`#[tokio::test]` too), and every fenced
/// code block of a doc comment. None when the file does not parse.
pub fn rust_tests(text: &str) -> Option<Vec<String>> {
    let file = syn::parse_file(text).ok()?;
    let whole_file_is_test =
        |attr: &syn::Attribute| attr.path().is_ident("cfg") && is_test_attr(attr);
    if file.attrs.iter().any(whole_file_is_test) {
        // `#![cfg(test)]`: the whole file is test code (not `#![cfg_attr(test, ...)]`, which
        // only adds an attribute in test builds).
        return Some(vec![file.to_token_stream().to_string()]);
    }
    let mut found = RustTests::default();
    found.visit_file(&file);
    let mut tests = found.items;
    tests.extend(
        fenced_blocks(&found.docs)
            .into_iter()
            .map(|b| format!("doc: {b}")),
    );
    Some(tests)
}

/// The same for a file that does not parse, by its text: everything from the first
/// `#[cfg(test)]` on, and the code blocks of its doc comments. Coarser, but a file whose code
/// does not compile yet (the bug to fix, say) still has tests that must not change.
pub fn rust_tests_by_text(text: &str) -> Vec<String> {
    let mut tests: Vec<String> = Vec::new();
    if let Some(start) = text.find("#[cfg(test)]") {
        tests.push(text[start..].trim_end().to_string());
    }
    let docs: String = text
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            l.strip_prefix("///").or_else(|| l.strip_prefix("//!"))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    tests.extend(
        fenced_blocks(&docs)
            .into_iter()
            .map(|b| format!("doc: {b}")),
    );
    tests
}

/// The files that hold a Rust file's test modules declared out of line (`#[cfg(test)] mod
/// tests;` is `tests.rs` or `tests/mod.rs` beside it, or what `#[path]` names), and the
/// directories of their own submodules, relative to the repository root. `path` is the file's.
pub fn rust_test_module_files(path: &str, text: &str) -> Vec<String> {
    let Ok(file) = syn::parse_file(text) else {
        return Vec::new();
    };
    let here = std::path::Path::new(path);
    let dir = here.parent().unwrap_or(std::path::Path::new(""));
    let stem = here.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    // Children of lib.rs, main.rs and mod.rs live beside them; of foo.rs, in foo/.
    let children = if ["lib", "main", "mod"].contains(&stem) {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    let mut found = TestModules {
        dir: dir.to_path_buf(),
        children,
        inline: Vec::new(),
        in_test: file.attrs.iter().any(is_test_attr),
        files: Vec::new(),
    };
    found.visit_file(&file);
    found.files
}

struct TestModules {
    dir: std::path::PathBuf,
    children: std::path::PathBuf,
    inline: Vec<String>,
    in_test: bool,
    files: Vec<String>,
}

impl<'ast> Visit<'ast> for TestModules {
    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        // `#[doc = include_str!("../README.md")]`: that file's code blocks are doc tests.
        let syn::Meta::NameValue(pair) = &attr.meta else {
            return;
        };
        let syn::Expr::Macro(call) = &pair.value else {
            return;
        };
        if attr.path().is_ident("doc") && call.mac.path.is_ident("include_str") {
            if let Ok(included) = call.mac.parse_body::<syn::LitStr>() {
                let path = self.dir.join(included.value());
                self.files.push(normal(&path));
            }
        }
    }

    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        let test = self.in_test || module.attrs.iter().any(is_test_attr);
        let name = module.ident.to_string();
        match &module.content {
            Some(_) => {
                let outer = std::mem::replace(&mut self.in_test, test);
                self.inline.push(name);
                syn::visit::visit_item_mod(self, module);
                self.inline.pop();
                self.in_test = outer;
            }
            None if test => {
                let base = self
                    .inline
                    .iter()
                    .fold(self.children.clone(), |d, m| d.join(m));
                let shown = |p: std::path::PathBuf| p.to_string_lossy().replace('\\', "/");
                match path_attr(&module.attrs) {
                    Some(path) => {
                        let dir = self.inline.iter().fold(self.dir.clone(), |d, m| d.join(m));
                        self.files.push(shown(dir.join(path)));
                    }
                    None => {
                        self.files.push(shown(base.join(format!("{name}.rs"))));
                        self.files.push(format!("{}/", shown(base.join(&name))));
                    }
                }
            }
            None => {}
        }
    }
}

/// The value of a `#[path = "..."]` attribute.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs
        .iter()
        .find(|a| a.path().is_ident("path"))
        .and_then(|a| {
            if let syn::Meta::NameValue(pair) = &a.meta {
                if let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(text),
                    ..
                }) = &pair.value
                {
                    return Some(text.value());
                }
            }
            None
        })
}

/// A relative path with `.` and `..` folded away, `/`-separated.
fn normal(path: &std::path::Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    parts.join("/")
}

#[derive(Default)]
struct RustTests {
    items: Vec<String>,
    docs: String,
    /// The inline modules around the item being visited, with their attributes.
    context: Vec<String>,
}

impl<'ast> Visit<'ast> for RustTests {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        // Where an item sits matters too: the same test module inside `#[cfg(any())] mod
        // parked` no longer runs.
        let tokens = || format!("{}{}", self.context.join(""), item.to_token_stream());
        // A macro's input is opaque to the parser: one that may hold tests or doc tests, or
        // that pulls in other source (`include!`), counts as a test whole.
        let macro_with_tests = match item {
            syn::Item::Macro(m) => {
                let text = m.to_token_stream().to_string();
                text.contains("```") || has_word(&text, "test") || m.mac.path.is_ident("include")
            }
            _ => false,
        };
        if attrs_of(item).iter().any(is_test_attr) || macro_with_tests {
            self.items.push(tokens());
            return;
        }
        if let syn::Item::Mod(module) = item {
            let attrs: String = module
                .attrs
                .iter()
                .map(|a| a.to_token_stream().to_string())
                .collect();
            self.context
                .push(format!("{attrs} mod {} :: ", module.ident));
            syn::visit::visit_item(self, item);
            self.context.pop();
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        if attr.path().is_ident("cfg_attr") {
            // `#[cfg_attr(doctest, doc = "...")]`: a doc test that only doctests see.
            let text = attr.to_token_stream().to_string();
            if has_word(&text, "doc") {
                self.items.push(format!("doc: {text}"));
            }
            return;
        }
        if !attr.path().is_ident("doc") {
            return;
        }
        if let syn::Meta::NameValue(pair) = &attr.meta {
            match &pair.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(text),
                    ..
                }) => {
                    self.docs.push_str(&text.value());
                    self.docs.push('\n');
                }
                // `include_str!("../README.md")`: its doc tests live in that file.
                other => self.items.push(format!("doc: {}", other.to_token_stream())),
            }
        }
    }
}

/// Whether `word` stands alone in `text` (not inside `testing` or `contest`).
fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric() && c != '_')
        .any(|w| w == word)
}

fn attrs_of(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item;
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// `#[test]`, `#[tokio::test]`, `#[cfg(test)]`, `#[cfg(all(test, unix))]`,
/// `#[cfg_attr(test, ...)]`; not `#[cfg(not(test))]` or `#![cfg_attr(not(test), no_std)]`,
/// which mark what test builds leave out.
fn is_test_attr(attr: &syn::Attribute) -> bool {
    let path = attr.path();
    if path.segments.last().is_some_and(|s| s.ident == "test") {
        return true;
    }
    if !(path.is_ident("cfg") || path.is_ident("cfg_attr")) {
        return false;
    }
    has_word(
        &without_not(&attr.meta.to_token_stream().to_string()),
        "test",
    )
}

/// `text` without its `not(...)` groups.
fn without_not(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = find_word(rest, "not") {
        out.push_str(&rest[..at]);
        let after = rest[at + 3..].trim_start();
        let Some(inner) = after.strip_prefix('(') else {
            out.push_str("not");
            rest = &rest[at + 3..];
            continue;
        };
        let mut depth = 1;
        let end = inner
            .char_indices()
            .find(|&(_, c)| {
                depth += match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                };
                depth == 0
            })
            .map_or(inner.len(), |(i, _)| i + 1);
        rest = &inner[end..];
    }
    out.push_str(rest);
    out
}

/// Where `word` first stands alone in `text`.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let is_part = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).map(|(i, _)| i).find(|&i| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_part) && !after.is_some_and(is_part)
    })
}

/// The fenced code blocks of doc text, each as its opening fence (`should_panic`, `ignore`
/// change what the test means) and its trimmed lines.
fn fenced_blocks(docs: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in docs.lines().map(str::trim) {
        if line.starts_with("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some(format!("{line}\n")),
            }
            continue;
        }
        if let Some(block) = current.as_mut() {
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks
}

/// A Python module's `load_tests`, the hook unittest's discovery calls on a test module or a
/// package's `__init__.py` to decide which tests there are: every top-level statement that
/// defines, assigns or imports it, with its body.
pub fn python_load_tests(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let top_level = !line.starts_with([' ', '\t']) && !line.trim().is_empty();
        if top_level {
            inside = has_word(line, "load_tests");
            if inside {
                found.push(String::new());
            }
        }
        if let (true, Some(statement)) = (inside, found.last_mut()) {
            statement.push_str(line.trim_end());
            statement.push('\n');
        }
    }
    found
}

/// The doctest examples of a Python file: each `>>>` example with its continuation lines and
/// the output it expects, as trimmed lines.
pub fn python_doctests(text: &str) -> Vec<String> {
    // A docstring can hold its examples on one physical line, as `\n` escapes.
    let unescaped = text.replace("\\n", "\n");
    let mut examples = doctest_examples(text);
    if unescaped != text {
        examples.extend(doctest_examples(&unescaped));
    }
    examples
}

fn doctest_examples(text: &str) -> Vec<String> {
    let mut examples = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines().map(str::trim) {
        let ends = line.is_empty() || line.starts_with("\"\"\"") || line.starts_with("'''");
        if line.starts_with(">>>") {
            if let Some(example) = current.take() {
                examples.push(example);
            }
            current = Some(format!("{line}\n"));
        } else if ends {
            examples.extend(current.take());
        } else if let Some(example) = current.as_mut() {
            example.push_str(line);
            example.push('\n');
        }
    }
    examples.extend(current);
    examples
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIB: &str = r#"
//! Adding.

/// Adds.
///
/// ```
/// assert_eq!(calc::add(2, 3), 5);
/// ```
pub fn add(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
mod tests {
    #[test]
    fn adds() {
        assert_eq!(super::add(2, 3), 5);
    }
}
"#;

    #[test]
    fn rust_tests_are_the_test_items_and_doc_blocks() {
        let tests = rust_tests(LIB).unwrap();
        assert_eq!(tests.len(), 2);
        assert!(
            tests[0].starts_with("# [cfg (test)] mod tests"),
            "{}",
            tests[0]
        );
        assert_eq!(tests[1], "doc: ```\nassert_eq!(calc::add(2, 3), 5);\n");

        let fixed = LIB.replace("    a - b", "    // fixed\n    a + b");
        assert_eq!(
            rust_tests(&fixed),
            Some(tests.clone()),
            "the code may change"
        );
        let cheat = LIB.replace("super::add(2, 3), 5", "super::add(2, 3), -1");
        assert_ne!(rust_tests(&cheat), Some(tests.clone()));
        let doc_cheat = LIB.replace("calc::add(2, 3), 5", "calc::add(2, 3), -1");
        assert_ne!(rust_tests(&doc_cheat), Some(tests.clone()));
        let panics = LIB.replace("/// ```\n/// assert", "/// ```should_panic\n/// assert");
        assert_ne!(
            rust_tests(&panics),
            Some(tests.clone()),
            "the fence says what it tests"
        );
        let in_macro =
            "unit_tests! {\n    #[test]\n    fn adds() { assert_eq!(add(2, 3), 5); }\n}\n";
        assert_ne!(
            rust_tests(in_macro),
            rust_tests(&in_macro.replace(", 5)", ", -1)")),
            "tests inside a macro's input"
        );
        let parked = LIB.replace(
            "#[cfg(test)]\nmod tests {",
            "#[cfg(any())]\nmod parked {\n#[cfg(test)]\nmod tests {",
        ) + "}\n";
        assert_ne!(
            rust_tests(&parked),
            Some(tests.clone()),
            "a test module moved where it never runs"
        );
        let included = format!("{LIB}\ninclude!(\"checks.inc\");\n");
        assert_ne!(
            rust_tests(&included),
            Some(tests.clone()),
            "source pulled in from elsewhere"
        );
        let only_doctest = format!("{LIB}\n#[cfg_attr(doctest, doc = \"```\\nassert!(true);\\n```\")]\npub fn other() {{}}\n");
        assert_ne!(rust_tests(&only_doctest), Some(tests.clone()));
        let readme = "#![doc = include_str!(\"../README.md\")]\npub fn add() {}\n";
        assert_eq!(rust_tests(readme).unwrap().len(), 1);
        assert_eq!(
            rust_test_module_files("src/lib.rs", readme),
            vec!["README.md"]
        );
        // What test builds leave out is not a test; an attribute only test builds add does
        // not make a whole file one.
        let no_std = format!("#![cfg_attr(not(test), no_std)]\n#![cfg_attr(test, allow(dead_code))]\n{LIB}\n#[cfg(not(test))]\nfn off_in_tests() {{}}\n");
        let no_std_tests = rust_tests(&no_std).unwrap();
        assert_eq!(no_std_tests, tests, "{no_std_tests:?}");
        let fixed = no_std
            .replace("a - b", "a + b")
            .replace("fn off_in_tests() {}", "fn off_in_tests() { }");
        assert_eq!(rust_tests(&fixed), Some(tests.clone()));
        let mixed = "#[cfg(all(not(miri), test))]\nmod t { fn f() {} }\n";
        assert_eq!(rust_tests(mixed).map(|t| t.len()), Some(1));
        let async_test = "#[tokio::test]\nasync fn t() { assert!(true) }\n";
        assert_eq!(rust_tests(async_test).unwrap().len(), 1);
        assert_eq!(rust_tests("fn broken( {"), None);
    }

    #[test]
    fn test_modules_declared_out_of_line_are_found() {
        let lib = "pub fn add() {}\n#[cfg(test)]\nmod tests;\nmod util;\n#[cfg(test)]\n#[path = \"checks/more.rs\"]\nmod more;\n#[cfg(test)]\nmod inline {\n    mod deeper;\n}\n";
        assert_eq!(
            rust_test_module_files("src/lib.rs", lib),
            vec![
                "src/tests.rs",
                "src/tests/",
                "src/checks/more.rs",
                "src/inline/deeper.rs",
                "src/inline/deeper/",
            ]
        );
        let nested = "#[cfg(test)]\nmod tests;\n";
        assert_eq!(
            rust_test_module_files("src/calc/ops.rs", nested),
            vec!["src/calc/ops/tests.rs", "src/calc/ops/tests/"]
        );
        let whole = "#![cfg(test)]\nfn helper() -> i32 { 1 }\n";
        assert_eq!(rust_tests(whole).map(|t| t.len()), Some(1));
        assert_ne!(
            rust_tests(whole),
            rust_tests(&whole.replace("{ 1 }", "{ 2 }")),
            "a whole test file's helpers are tests too"
        );
    }

    #[test]
    fn a_file_that_does_not_parse_keeps_its_tests_by_text() {
        let broken = LIB.replace(
            "pub fn add(a: i32, b: i32) -> i32 {",
            "pub fn add(a: i32, b: i32 -> i32 {",
        );
        let tests = rust_tests_by_text(&broken);
        assert_eq!(tests, rust_tests_by_text(LIB));
        assert!(tests[0].starts_with("#[cfg(test)]\nmod tests {"));
        let cheat = broken.replace("super::add(2, 3), 5", "super::add(2, 3), -1");
        assert_ne!(rust_tests_by_text(&cheat), tests);
    }

    #[test]
    fn load_tests_hooks_are_found_with_their_bodies() {
        let init = "\"\"\"The package.\"\"\"\nfrom .calc import add\n\n\ndef load_tests(loader, tests, pattern):\n    return tests\n\n\nVERSION = 1\n";
        assert_eq!(
            python_load_tests(init),
            vec!["def load_tests(loader, tests, pattern):\n    return tests\n\n\n"]
        );
        assert_eq!(
            python_load_tests(&init.replace("VERSION = 1", "VERSION = 2")),
            python_load_tests(init)
        );
        assert!(python_load_tests("from x import load_tests\n").len() == 1);
        assert!(python_load_tests("import calc\n").is_empty());
    }

    #[test]
    fn python_doctests_are_the_examples_and_their_output() {
        let calc = "def add(a, b):\n    \"\"\"Adds.\n\n    >>> add(2, 3)\n    5\n    >>> add(\n    ...     1, 1)\n    2\n    \"\"\"\n    return a - b\n";
        assert_eq!(
            python_doctests(calc),
            vec![">>> add(2, 3)\n5\n", ">>> add(\n...     1, 1)\n2\n"]
        );
        let fixed = calc.replace("return a - b", "return a + b");
        assert_eq!(python_doctests(&fixed), python_doctests(calc));
        assert_ne!(
            python_doctests(&calc.replace("    5\n", "    -1\n")),
            python_doctests(calc)
        );
        let escaped =
            format!("{calc}\n\ndef other():\n    \"Other.\\n\\n>>> add(2, 3) and 5\\n5\\n\"\n");
        assert_ne!(
            python_doctests(&escaped),
            python_doctests(calc),
            "examples on one line"
        );
    }
}

//! Where a failing test is defined, from its name as the runner printed it.

use super::frames::RepoFiles;
use super::lang::{self, field, find_first, Lang};
use std::collections::HashMap;
use std::rc::Rc;
use tree_sitter::Node;

/// A failing test's name, read for where its definition is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TestName {
    /// pytest: `tests/test_calc.py::TestCalc::test_add[2-3]`.
    Pytest {
        file: String,
        class: Option<String>,
        func: String,
    },
    /// unittest: `test_calc.TestCalc.test_add`, a module path then a class and a method.
    Dotted(Vec<String>),
    /// cargo: `calc::tests::adds`, a module path then a function.
    Path(Vec<String>),
    /// go: `TestAdd`, from `TestAdd/negative` too.
    Go(String),
    /// One word: a cargo integration test, or a JavaScript test's title.
    Word(String),
    /// node --test: the title given to `test(...)` or `it(...)`.
    Title(String),
}

impl TestName {
    pub(crate) fn parse(name: &str) -> TestName {
        let words = |sep: &str| name.split(sep).map(String::from).collect::<Vec<_>>();
        let is_word = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
        // unittest's `test_add (test_calc.TestCalc)`: read by hand, as a pattern with Unicode
        // word classes took 0.8 MiB of memory for this one shape.
        let unittest = name
            .strip_suffix(')')
            .and_then(|n| n.split_once(" ("))
            .filter(|(method, owner)| {
                is_word(method)
                    && !owner.is_empty()
                    && owner.split('.').all(|p| p.is_empty() || is_word(p))
            });
        if let Some((method, owner)) = unittest {
            let mut parts: Vec<String> = owner.split('.').map(String::from).collect();
            if parts.last().map(String::as_str) != Some(method) {
                parts.push(method.to_string());
            }
            return TestName::Dotted(parts);
        }
        let segments = words("::");
        if segments.len() > 1 && segments[0].ends_with(".py") {
            let func = segments[segments.len() - 1].split('[').next().unwrap_or("");
            let class = (segments.len() > 2).then(|| segments[segments.len() - 2].clone());
            return TestName::Pytest {
                file: segments[0].clone(),
                class,
                func: func.to_string(),
            };
        }
        let go = name.split('/').next().unwrap_or(name);
        if go.starts_with("Test") && is_word(go) && !name.contains(' ') {
            return TestName::Go(go.to_string());
        }
        if segments.len() > 1 && segments.iter().all(|s| is_word(s)) {
            return TestName::Path(segments);
        }
        let dotted = words(".");
        if dotted.len() > 1 && dotted.iter().all(|s| is_word(s)) {
            return TestName::Dotted(dotted);
        }
        if is_word(name) {
            return TestName::Word(name.to_string());
        }
        TestName::Title(name.to_string())
    }
}

/// Whether a path holds tests: by the folder it is in or by how its name is made.
pub(crate) fn is_test_path(path: &str) -> bool {
    let name = super::frames::file_name(path);
    let in_test_dir = path
        .split('/')
        .rev()
        .skip(1)
        .any(|dir| matches!(dir, "test" | "tests" | "__tests__" | "spec" | "specs"));
    in_test_dir
        || name.starts_with("test_")
        || name.ends_with("_test.py")
        || name.ends_with("_test.go")
        || name == "conftest.py"
        || name.contains(".test.")
        || name.contains(".spec.")
}

/// Reads files through the caller's reader, each once.
pub(crate) struct Reader<'r> {
    read: &'r dyn Fn(&str) -> Option<String>,
    cache: HashMap<String, Option<Rc<str>>>,
}

impl<'r> Reader<'r> {
    pub(crate) fn new(read: &'r dyn Fn(&str) -> Option<String>) -> Self {
        Reader {
            read,
            cache: HashMap::new(),
        }
    }

    pub(crate) fn get(&mut self, path: &str) -> Option<Rc<str>> {
        let read = self.read;
        self.cache
            .entry(path.to_string())
            .or_insert_with(|| read(path).map(Rc::from))
            .clone()
    }
}

/// A test's definition: its file and the 1-based lines it spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Located {
    pub file: String,
    pub start: usize,
    pub end: usize,
}

/// Where the test `name` is defined, if its file and definition can be found.
pub(crate) fn locate(
    name: &str,
    repo: &RepoFiles,
    files: &[String],
    reader: &mut Reader,
) -> Option<Located> {
    let mut finder = Finder {
        repo,
        files,
        reader,
        prefer: Vec::new(),
    };
    match TestName::parse(name) {
        TestName::Pytest { file, class, func } => {
            let file = repo.resolve(&file, &[])?;
            finder.def_in(file, &func, class.as_deref())
        }
        TestName::Dotted(parts) => finder.dotted(&parts),
        TestName::Path(segments) => {
            let (func, modules) = segments.split_last()?;
            let scope = modules.last().map(String::as_str);
            finder.prefer = modules.iter().map(String::as_str).collect();
            finder.search(&|l| l == Lang::Rust, &format!("fn {func}("), &|f, s| {
                s.def_in(f, func, scope)
            })
        }
        TestName::Go(func) => {
            finder.search(&|l| l == Lang::Go, &format!("func {func}("), &|f, s| {
                s.def_in(f, &func, None)
            })
        }
        TestName::Word(word) => finder.word(&word),
        TestName::Title(title) => finder.title(&title),
    }
}

struct Finder<'f, 'r> {
    repo: &'f RepoFiles<'f>,
    files: &'f [String],
    reader: &'f mut Reader<'r>,
    /// Folder or file names a search tries first: `calc` of `calc::tests::adds`.
    prefer: Vec<&'f str>,
}

impl Finder<'_, '_> {
    /// `test_calc.TestCalc.test_add`: the longest leading part that names a module file.
    fn dotted(&mut self, parts: &[String]) -> Option<Located> {
        for split in (1..parts.len()).rev() {
            let module = parts[..split].join("/");
            let candidates = [format!("{module}.py"), format!("{module}/__init__.py")];
            let file = candidates
                .iter()
                .find_map(|c| self.repo.ending_with(c).first().copied());
            if let Some(file) = file {
                let rest = &parts[split..];
                let func = rest.last()?;
                let class = rest.len().checked_sub(2).map(|i| rest[i].as_str());
                return self.def_in(file, func, class);
            }
        }
        None
    }

    /// A bare word: a Rust integration test, a Python function, or a JavaScript title.
    fn word(&mut self, word: &str) -> Option<Located> {
        self.search(&|l| l == Lang::Rust, &format!("fn {word}("), &|f, s| {
            s.def_in(f, word, None)
        })
        .or_else(|| {
            self.search(&|l| l == Lang::Python, &format!("def {word}("), &|f, s| {
                s.def_in(f, word, None)
            })
        })
        .or_else(|| self.title(word))
    }

    fn title(&mut self, title: &str) -> Option<Located> {
        self.search(&Lang::is_js_like, title, &|file, s| {
            let lang = Lang::of(file)?;
            let src = s.reader.get(file)?;
            let tree = lang::parse(lang, &src)?;
            let call = find_first(tree.root_node(), &|n| is_test_call(n, &src, title))?;
            let whole = call
                .parent()
                .filter(|p| p.kind() == "expression_statement")
                .unwrap_or(call);
            Some(span(file, whole))
        })
    }

    /// The first file of `lang` containing `needle` where `find` succeeds; files named as
    /// preferred first, then test files.
    fn search(
        &mut self,
        lang: &dyn Fn(Lang) -> bool,
        needle: &str,
        find: &dyn Fn(&str, &mut Self) -> Option<Located>,
    ) -> Option<Located> {
        let files = self.files;
        let mut candidates: Vec<&str> = files
            .iter()
            .map(String::as_str)
            .filter(|f| Lang::of(f).is_some_and(lang))
            .collect();
        let preferred = |f: &str| {
            let stem = f.rsplit_once('.').map_or(f, |(stem, _)| stem);
            stem.split('/').any(|part| self.prefer.contains(&part))
        };
        candidates.sort_by_key(|f| (!preferred(f), !is_test_path(f)));
        for file in candidates {
            if self
                .reader
                .get(file)
                .is_some_and(|src| src.contains(needle))
            {
                if let Some(found) = find(file, self) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// The function `func` in `file`, inside the class or module `scope` when there is one.
    fn def_in(&mut self, file: &str, func: &str, scope: Option<&str>) -> Option<Located> {
        let lang = Lang::of(file)?;
        let src = self.reader.get(file)?;
        let tree = lang::parse(lang, &src)?;
        let root = tree.root_node();
        let named = |n: Node| is_function(n) && field(n, "name", &src) == Some(func);
        let scoped = |n: Node| named(n) && enclosing_name(n, &src) == scope;
        let node = find_first(root, &scoped).or_else(|| find_first(root, &named))?;
        Some(decorated_span(file, node))
    }
}

fn is_function(node: Node) -> bool {
    matches!(
        node.kind(),
        "function_definition"
            | "function_item"
            | "function_declaration"
            | "method_declaration"
            | "method_definition"
    )
}

/// The name of the class, module or impl a definition sits in.
fn enclosing_name<'s>(node: Node, src: &'s str) -> Option<&'s str> {
    let mut up = node.parent();
    while let Some(parent) = up {
        match parent.kind() {
            "class_definition" | "class_declaration" | "mod_item" => {
                return field(parent, "name", src)
            }
            "impl_item" => return field(parent, "type", src),
            _ => up = parent.parent(),
        }
    }
    None
}

/// A definition's span, with its decorators (Python) or attributes such as `#[test]` (Rust).
fn decorated_span(file: &str, node: Node) -> Located {
    if let Some(parent) = node.parent().filter(|p| p.kind() == "decorated_definition") {
        return span(file, parent);
    }
    let mut first = node;
    while let Some(previous) = first
        .prev_named_sibling()
        .filter(|p| p.kind() == "attribute_item")
    {
        first = previous;
    }
    Located {
        start: lang::line_of(first),
        ..span(file, node)
    }
}

/// `test('adds two numbers', ...)`, `it(...)` or `describe(...)` with this title.
fn is_test_call(node: Node, src: &str, title: &str) -> bool {
    if node.kind() != "call_expression" {
        return false;
    }
    let Some(first) = node
        .child_by_field_name("arguments")
        .and_then(|a| a.named_child(0))
    else {
        return false;
    };
    matches!(first.kind(), "string" | "template_string")
        && lang::text(first, src).trim_matches(['\'', '"', '`']) == title
}

fn span(file: &str, node: Node) -> Located {
    Located {
        file: file.to_string(),
        start: lang::line_of(node),
        end: node.end_position().row + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_names_of_every_runner() {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases = [
            (
                "tests/test_calc.py::TestCalc::test_add[2-3]",
                TestName::Pytest {
                    file: "tests/test_calc.py".into(),
                    class: Some("TestCalc".into()),
                    func: "test_add".into(),
                },
            ),
            (
                "test_calc.py::test_add",
                TestName::Pytest {
                    file: "test_calc.py".into(),
                    class: None,
                    func: "test_add".into(),
                },
            ),
            (
                "test_add (test_calc.TestCalc.test_add)",
                TestName::Dotted(strings(&["test_calc", "TestCalc", "test_add"])),
            ),
            (
                "test_add (test_calc.TestCalc)",
                TestName::Dotted(strings(&["test_calc", "TestCalc", "test_add"])),
            ),
            (
                "test_sum (test_calc.TestCalc) (i=1)",
                TestName::Title("test_sum (test_calc.TestCalc) (i=1)".into()),
            ),
            (
                "test_add (test calc.TestCalc)",
                TestName::Title("test_add (test calc.TestCalc)".into()),
            ),
            (
                "tests.test_calc.TestCalc.test_add",
                TestName::Dotted(strings(&["tests", "test_calc", "TestCalc", "test_add"])),
            ),
            (
                "calc::tests::adds",
                TestName::Path(strings(&["calc", "tests", "adds"])),
            ),
            ("TestAdd/negative_numbers", TestName::Go("TestAdd".into())),
            ("adds", TestName::Word("adds".into())),
            (
                "adds two numbers",
                TestName::Title("adds two numbers".into()),
            ),
        ];
        for (name, want) in cases {
            assert_eq!(TestName::parse(name), want, "{name}");
        }
    }

    #[test]
    fn unittest_module_names_resolve_under_a_start_directory() {
        let files: Vec<String> = ["tests/test_calc.py", "calc.py"].map(String::from).to_vec();
        let src = "import unittest\n\n\nclass TestCalc(unittest.TestCase):\n    def test_add(self):\n        pass\n";
        let read = |p: &str| (p == "tests/test_calc.py").then(|| src.to_string());
        let repo = RepoFiles::new(&files);
        let mut reader = Reader::new(&read);
        let found = locate(
            "test_add (test_calc.TestCalc.test_add)",
            &repo,
            &files,
            &mut reader,
        );
        assert_eq!(
            found,
            Some(Located {
                file: "tests/test_calc.py".into(),
                start: 5,
                end: 6
            })
        );
    }

    #[test]
    fn test_paths() {
        for path in [
            "tests/test_cart.py",
            "pkg/tests/helpers.py",
            "test_calc.py",
            "calc/calc_test.go",
            "src/app.test.ts",
            "web/__tests__/a.js",
            "conftest.py",
        ] {
            assert!(is_test_path(path), "{path}");
        }
        for path in [
            "shop/cart.py",
            "src/testing.rs",
            "contest.py",
            "latest/x.go",
        ] {
            assert!(!is_test_path(path), "{path}");
        }
    }

    #[test]
    fn a_cargo_test_is_looked_for_first_in_the_module_its_path_names() {
        let files: Vec<String> = ["src/a_money.rs", "src/calc.rs"].map(String::from).to_vec();
        let text = "pub fn f() {}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {}\n}\n";
        let read = |_: &str| Some(text.to_string());
        let repo = RepoFiles::new(&files);
        let mut reader = Reader::new(&read);
        let found = locate("calc::tests::adds", &repo, &files, &mut reader);
        assert_eq!(
            found,
            Some(Located {
                file: "src/calc.rs".into(),
                start: 5,
                end: 6
            })
        );
    }
}

//! Which grammar reads a file, and the few things done with a tree-sitter tree.

use std::cell::RefCell;
use tree_sitter::{Node, Parser, Tree};

/// Files larger than this are generated or minified: not worth a parse, nor a place in a map.
pub(crate) const MAX_PARSED_BYTES: usize = 256 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    Python,
    Rust,
    JavaScript,
    TypeScript,
    Tsx,
    Go,
}

impl Lang {
    /// The language of a repository path, by its extension.
    pub(crate) fn of(path: &str) -> Option<Lang> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let (_, ext) = name.rsplit_once('.')?;
        Some(match ext {
            "py" | "pyi" => Lang::Python,
            "rs" => Lang::Rust,
            "js" | "mjs" | "cjs" | "jsx" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "go" => Lang::Go,
            _ => return None,
        })
    }

    pub(crate) fn is_js_like(self) -> bool {
        matches!(self, Lang::JavaScript | Lang::TypeScript | Lang::Tsx)
    }

    fn grammar(self) -> tree_sitter::Language {
        match self {
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
        }
    }
}

/// A tree for `text`, or None when the grammar cannot be loaded or the text is too large.
pub(crate) fn parse(lang: Lang, text: &str) -> Option<Tree> {
    thread_local! {
        // One parser per thread: making one allocates, switching its language does not.
        static PARSER: RefCell<Parser> = RefCell::new(Parser::new());
    }
    if text.len() > MAX_PARSED_BYTES {
        return None;
    }
    PARSER.with(|parser| {
        let mut parser = parser.borrow_mut();
        parser.set_language(&lang.grammar()).ok()?;
        parser.parse(text, None)
    })
}

/// The source text of a node.
pub(crate) fn text<'a>(node: Node, src: &'a str) -> &'a str {
    src.get(node.byte_range()).unwrap_or("")
}

/// The text of a node's field, e.g. the `name` of a function.
pub(crate) fn field<'a>(node: Node, name: &str, src: &'a str) -> Option<&'a str> {
    node.child_by_field_name(name).map(|n| text(n, src))
}

/// The 1-based line a node starts on.
pub(crate) fn line_of(node: Node) -> usize {
    node.start_position().row + 1
}

/// The named children of a node, collected so callers may recurse freely.
pub(crate) fn named_children(node: Node) -> Vec<Node> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor).collect()
}

/// The first node, in document order, for which `wanted` holds.
pub(crate) fn find_first<'t>(root: Node<'t>, wanted: &dyn Fn(Node) -> bool) -> Option<Node<'t>> {
    let mut cursor = root.walk();
    loop {
        let node = cursor.node();
        if wanted(node) {
            return Some(node);
        }
        if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_by_extension() {
        let of = |p: &str| Lang::of(p);
        assert_eq!(of("pkg/calc.py"), Some(Lang::Python));
        assert_eq!(of("src/lib.rs"), Some(Lang::Rust));
        assert_eq!(of("web/app.mjs"), Some(Lang::JavaScript));
        assert_eq!(of("web/app.tsx"), Some(Lang::Tsx));
        assert_eq!(of("cmd/main.go"), Some(Lang::Go));
        assert_eq!(of("README.md"), None);
        assert_eq!(of("v1.2/Makefile"), None);
    }

    #[test]
    fn every_grammar_loads_and_parses() {
        for (lang, src) in [
            (Lang::Python, "def f():\n    pass\n"),
            (Lang::Rust, "fn f() {}\n"),
            (Lang::JavaScript, "function f() {}\n"),
            (Lang::TypeScript, "function f(): void {}\n"),
            (Lang::Tsx, "const f = () => <div/>;\n"),
            (Lang::Go, "package p\nfunc f() {}\n"),
        ] {
            let tree = parse(lang, src).expect("parses");
            assert!(!tree.root_node().has_error(), "{lang:?}");
        }
    }
}

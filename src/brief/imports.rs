//! The repository files a source file imports, found by a cheap scan of its text: the map
//! ranks them next to the files a failure passes through.

use super::frames::RepoFiles;
use super::lang::Lang;
use super::locate::is_test_path;
use super::rank::vendored;
use regex::Regex;
use std::sync::OnceLock;

const JS_EXTENSIONS: &[&str] = &["js", "ts", "tsx", "jsx", "mjs", "cjs", "mts", "cts"];

struct Patterns {
    py_import: Regex,
    py_from: Regex,
    rust_mod: Regex,
    rust_crate: Regex,
    rust_super: Regex,
    rust_extern: Regex,
    js: Regex,
    go_block: Regex,
    go_single: Regex,
    go_path: Regex,
}

/// Compiles the patterns now, so that their first use does not wait for them.
pub(super) fn warm_up() {
    let _ = patterns();
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let re = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("bad built-in regex {p}: {e}"));
        Patterns {
            py_import: re(r"(?m)^[ \t]*import[ \t]+([\w. \t,]+)"),
            py_from: re(r"(?m)^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)"),
            // A module kept in a file of its own, and a crate, have ASCII names: rustc loads
            // no file for a module named otherwise (E0754), and Cargo names no crate so. A
            // Unicode `\w` class in these four took 2.7 MiB of memory.
            rust_mod: re(r"(?m)^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?mod[ \t]+((?-u:\w)+)[ \t]*;"),
            rust_crate: re(r"\bcrate::((?-u:\w)+)(?:::((?-u:\w)+))?"),
            rust_super: re(r"\bsuper::((?-u:\w)+)"),
            rust_extern: re(r"(?m)^[ \t]*use[ \t]+((?-u:\w)+)::((?-u:\w)+)"),
            js: re(
                r#"(?:\brequire\(\s*|\bimport\(\s*|\bfrom\s+|\bimport\s+)['"](\.{1,2}/[^'"]+)['"]"#,
            ),
            go_block: re(r"(?s)\bimport\s*\(([^)]*)\)"),
            go_single: re(r#"\bimport\s+(?:[\w.]+\s+)?"([^"]+)""#),
            go_path: re(r#""([^"]+)""#),
        }
    })
}

/// A file an import may name: an exact path, or (Python's absolute modules, which may live
/// under a source folder such as `src/`) a path's tail.
enum Wanted {
    Exact(String),
    Tail(String),
}

/// The tracked files `path` (of `lang`, with `text`) imports.
pub(crate) fn imported<'f>(
    path: &str,
    lang: Lang,
    text: &str,
    repo: &RepoFiles<'f>,
) -> Vec<&'f str> {
    let wanted = match lang {
        Lang::Python => python(path, text),
        Lang::Rust => rust(path, text).into_iter().map(Wanted::Exact).collect(),
        Lang::JavaScript | Lang::TypeScript | Lang::Tsx => javascript(path, text)
            .into_iter()
            .map(Wanted::Exact)
            .collect(),
        Lang::Go => return go(path, text, repo),
    };
    let mut found = Vec::new();
    for want in wanted {
        let file = match &want {
            Wanted::Exact(exact) => repo.get(exact),
            Wanted::Tail(tail) => repo.ending_with(tail).first().copied(),
        };
        if let Some(file) = file.filter(|f| *f != path && !found.contains(f)) {
            found.push(file);
        }
    }
    found
}

fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// `dir` joined with a relative path, `.` and `..` resolved; None when it climbs out.
fn join(dir: &str, relative: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            _ => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

/// A module's file candidates: `a/b.py`, `a/b/__init__.py`, exact or as a tail.
fn python_module(base: &str, exact: bool) -> [Wanted; 2] {
    let wanted = if exact { Wanted::Exact } else { Wanted::Tail };
    [
        wanted(format!("{base}.py")),
        wanted(format!("{base}/__init__.py")),
    ]
}

fn python(path: &str, text: &str) -> Vec<Wanted> {
    let p = patterns();
    let mut out = Vec::new();
    for c in p.py_import.captures_iter(text) {
        for module in c[1].split(',') {
            let module = module.split_whitespace().next().unwrap_or("");
            out.extend(python_module(&module.replace('.', "/"), false));
        }
    }
    for c in p.py_from.captures_iter(text) {
        let (dots, module) = (c[1].len(), c[2].replace('.', "/"));
        let relative = dots > 0;
        let base = if relative {
            let up = "../".repeat(dots - 1);
            match join(dir_of(path), &format!("{up}{module}")) {
                Some(base) => base,
                None => continue,
            }
        } else {
            module
        };
        if !base.is_empty() {
            out.extend(python_module(&base, relative));
        }
        let names = c[3].trim_matches(['(', ')', ' ', '\t', '\n']);
        for name in names.split(',').filter_map(|n| n.split_whitespace().next()) {
            if name != "*" {
                let joined = join(&base, name).unwrap_or_default();
                out.extend(python_module(&joined, relative));
            }
        }
    }
    out
}

/// The folder of a Rust file's child modules: `src/` for `src/lib.rs`, `src/a/` for `src/a.rs`.
fn rust_module_dir(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name {
        "lib.rs" | "main.rs" | "mod.rs" => dir_of(path).to_string(),
        _ => path.trim_end_matches(".rs").to_string(),
    }
}

/// The crate's `src` folder for a file in it (or in its `tests`), else the file's folder.
fn rust_crate_root(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').collect();
    let at = parts.iter().rposition(|p| *p == "src" || *p == "tests");
    match at {
        Some(i) => parts[..i]
            .iter()
            .chain(&["src"])
            .copied()
            .collect::<Vec<_>>()
            .join("/"),
        None => dir_of(path).to_string(),
    }
}

fn rust_module(dir: &str, name: &str) -> [String; 2] {
    let base = if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    };
    [format!("{base}.rs"), format!("{base}/mod.rs")]
}

fn rust(path: &str, text: &str) -> Vec<String> {
    let p = patterns();
    let mut out = Vec::new();
    let module_dir = rust_module_dir(path);
    for c in p.rust_mod.captures_iter(text) {
        out.extend(rust_module(&module_dir, &c[1]));
    }
    let root = rust_crate_root(path);
    for c in p.rust_crate.captures_iter(text) {
        out.extend(rust_module(&root, &c[1]));
        if let Some(inner) = c.get(2) {
            out.extend(rust_module(&format!("{root}/{}", &c[1]), inner.as_str()));
        }
    }
    // `super` of `a/b.rs` is `a`, whose children are in `a/`; of `a/mod.rs`, the folder above.
    let parent_dir = match path.rsplit('/').next() {
        Some("mod.rs") => dir_of(dir_of(path)),
        _ => dir_of(path),
    };
    for c in p.rust_super.captures_iter(text) {
        out.extend(rust_module(parent_dir, &c[1]));
    }
    // An integration test uses the crate by its name: `use calc::pricing`.
    if is_test_path(path) {
        for c in p.rust_extern.captures_iter(text) {
            if !matches!(&c[1], "std" | "core" | "alloc" | "crate" | "super" | "self") {
                out.extend(rust_module(&root, &c[2]));
                out.push(format!("{root}/lib.rs"));
            }
        }
    }
    out
}

fn javascript(path: &str, text: &str) -> Vec<String> {
    let p = patterns();
    let mut out = Vec::new();
    for c in p.js.captures_iter(text) {
        let Some(target) = join(dir_of(path), &c[1]) else {
            continue;
        };
        out.push(target.clone());
        // TypeScript imports `./x.js` for the file `./x.ts`.
        let stem = match target.rsplit_once('.') {
            Some((stem, ext)) if JS_EXTENSIONS.contains(&ext) => stem.to_string(),
            _ => target.clone(),
        };
        for ext in JS_EXTENSIONS {
            out.push(format!("{stem}.{ext}"));
            out.push(format!("{target}/index.{ext}"));
        }
    }
    out
}

/// A Go file's package is its folder; an imported package is the folder its path ends with.
fn go<'f>(path: &str, text: &str, repo: &RepoFiles<'f>) -> Vec<&'f str> {
    let p = patterns();
    let strings = |re: &Regex, text: &str| -> Vec<String> {
        re.captures_iter(text).map(|c| c[1].to_string()).collect()
    };
    let mut packages = strings(&p.go_single, text);
    for block in strings(&p.go_block, text) {
        packages.extend(strings(&p.go_path, &block));
    }
    let here = dir_of(path);
    let imports = |dir: &str| {
        dir == here
            || packages
                .iter()
                .any(|pkg| !dir.is_empty() && (pkg == dir || pkg.ends_with(&format!("/{dir}"))))
    };
    repo.all()
        .iter()
        .filter(|f| Lang::of(f) == Some(Lang::Go) && !vendored(f))
        .filter(|f| !f.ends_with("_test.go") && **f != path)
        .filter(|f| imports(dir_of(f)))
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `path` imports, with `text`, in a repository of `files`.
    fn imports(files: &[&str], path: &str, text: &str) -> Vec<String> {
        let files: Vec<String> = files.iter().map(|f| f.to_string()).collect();
        let repo = RepoFiles::new(&files);
        let lang = Lang::of(path).unwrap();
        imported(path, lang, text, &repo)
            .into_iter()
            .map(String::from)
            .collect()
    }

    #[test]
    fn python_absolute_relative_and_src_layout_imports() {
        let files = [
            "src/shop/__init__.py",
            "src/shop/cart.py",
            "src/shop/pricing.py",
            "src/shop/util/money.py",
            "src/shop/models/__init__.py",
            "tests/test_cart.py",
        ];
        let text = "import os, shop.util.money as m\n\
                    from shop.cart import Cart\n\
                    from .pricing import apply\n\
                    from . import models\n\
                    from ..elsewhere import x\n\
                    from shop import (\n    pricing,\n    cart as c,\n)\n";
        assert_eq!(
            imports(&files, "src/shop/checkout.py", text),
            [
                "src/shop/util/money.py",
                "src/shop/cart.py",
                "src/shop/pricing.py",
                "src/shop/__init__.py",
                "src/shop/models/__init__.py",
            ]
        );
    }

    #[test]
    fn rust_mods_crate_paths_and_integration_tests() {
        let files = [
            "src/lib.rs",
            "src/cart.rs",
            "src/pricing/mod.rs",
            "src/pricing/rates.rs",
            "src/money.rs",
            "tests/checkout.rs",
        ];
        let lib = "pub mod cart;\nmod pricing;\nuse crate::money::Cents;\n";
        assert_eq!(
            imports(&files, "src/lib.rs", lib),
            ["src/cart.rs", "src/pricing/mod.rs", "src/money.rs"]
        );
        let pricing = "mod rates;\nuse super::cart::Cart;\nuse crate::pricing::rates::RATE;\n";
        assert_eq!(
            imports(&files, "src/pricing/mod.rs", pricing),
            ["src/pricing/rates.rs", "src/cart.rs"]
        );
        let test = "use shop::cart::Cart;\nuse std::fmt;\n";
        assert_eq!(
            imports(&files, "tests/checkout.rs", test),
            ["src/cart.rs", "src/lib.rs"]
        );
    }

    #[test]
    fn javascript_require_and_import_with_extensions_and_index_files() {
        let files = [
            "src/calc.js",
            "src/money/index.ts",
            "src/rates.ts",
            "test/calc.test.js",
        ];
        let text = "const { add } = require('../src/calc');\n\
                    import { cents } from '../src/money';\n\
                    import rates from \"../src/rates.js\";\n\
                    const lodash = require('lodash');\n";
        assert_eq!(
            imports(&files, "test/calc.test.js", text),
            ["src/calc.js", "src/money/index.ts", "src/rates.ts"]
        );
    }

    #[test]
    fn go_same_package_and_imported_packages() {
        let files = [
            "go.mod",
            "calc/calc.go",
            "calc/round.go",
            "calc/calc_test.go",
            "money/money.go",
            "web/server.go",
        ];
        let text = "package calc\n\nimport (\n\t\"testing\"\n\tm \"example.com/shop/money\"\n)\n";
        assert_eq!(
            imports(&files, "calc/calc_test.go", text),
            ["calc/calc.go", "calc/round.go", "money/money.go"]
        );
    }
}

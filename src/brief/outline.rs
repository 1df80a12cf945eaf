//! The top-level definitions of one source file, one line each, read from its syntax tree.

use super::lang::{self, line_of, named_children, Lang};
use tree_sitter::Node;

/// A signature longer than this is cut: the map shows where things are, not what they say.
const MAX_SIGNATURE: usize = 100;
/// Classes in classes, mods in mods: deeper nesting adds lines the model rarely needs.
const MAX_DEPTH: usize = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Def {
    pub line: usize,
    /// 0 for top-level, 1 for a method of a class or impl, ...
    pub depth: usize,
    pub signature: String,
}

/// The definitions of `src`, in file order; empty when it does not parse.
pub(crate) fn outline(lang: Lang, src: &str) -> Vec<Def> {
    let Some(tree) = lang::parse(lang, src) else {
        return Vec::new();
    };
    let mut out = Outline {
        src,
        defs: Vec::new(),
    };
    let root = tree.root_node();
    match lang {
        Lang::Python => out.python_block(root, 0),
        Lang::Rust => out.rust_items(root, 0),
        Lang::Go => out.go_decls(root),
        Lang::JavaScript | Lang::TypeScript | Lang::Tsx => out.js_statements(root),
    }
    out.defs
}

struct Outline<'s> {
    src: &'s str,
    defs: Vec<Def>,
}

impl Outline<'_> {
    /// Adds the text from `start` up to the node's body (or its first line) as a definition.
    fn push(&mut self, node: Node, start: usize, depth: usize) {
        let rest = self.src.get(start..).unwrap_or("");
        let start = start + (rest.len() - rest.trim_start().len());
        let end = match node.child_by_field_name("body") {
            // A tuple struct's fields are its signature: `struct Meters(f64)`.
            Some(body) if body.kind() != "ordered_field_declaration_list" => body.start_byte(),
            _ => first_line_end(self.src, start, node.end_byte()),
        };
        let line = self.line_at(node, start);
        self.push_text(line, depth, self.src.get(start..end).unwrap_or(""));
    }

    /// The line of byte `start`, counted from the node's own line: `start` is near it.
    fn line_at(&self, node: Node, start: usize) -> usize {
        let from = node.start_byte();
        let newlines =
            |a: usize, b: usize| self.src.get(a..b).map_or(0, |t| t.matches('\n').count());
        if start >= from {
            line_of(node) + newlines(from, start)
        } else {
            line_of(node).saturating_sub(newlines(start, from))
        }
    }

    fn push_text(&mut self, line: usize, depth: usize, raw: &str) {
        let signature = one_line(raw);
        if !signature.is_empty() {
            self.defs.push(Def {
                line,
                depth,
                signature,
            });
        }
    }

    fn python_block(&mut self, block: Node, depth: usize) {
        for child in named_children(block) {
            let def = match child.kind() {
                "decorated_definition" => child.child_by_field_name("definition"),
                _ => Some(child),
            };
            let Some(def) = def else { continue };
            match def.kind() {
                "function_definition" => self.push(def, def.start_byte(), depth),
                "class_definition" => {
                    self.push(def, def.start_byte(), depth);
                    if let Some(body) = def
                        .child_by_field_name("body")
                        .filter(|_| depth < MAX_DEPTH)
                    {
                        self.python_block(body, depth + 1);
                    }
                }
                _ => {}
            }
        }
    }

    fn rust_items(&mut self, items: Node, depth: usize) {
        for item in named_children(items) {
            match item.kind() {
                "function_item"
                | "function_signature_item"
                | "struct_item"
                | "enum_item"
                | "union_item"
                | "type_item"
                | "macro_definition" => self.push(item, item.start_byte(), depth),
                "trait_item" | "impl_item" | "mod_item" => {
                    // `mod x;` only points at another file, which has its own entry.
                    let Some(body) = item.child_by_field_name("body") else {
                        continue;
                    };
                    self.push(item, item.start_byte(), depth);
                    if depth < MAX_DEPTH {
                        self.rust_items(body, depth + 1);
                    }
                }
                _ => {}
            }
        }
    }

    fn go_decls(&mut self, root: Node) {
        for decl in named_children(root) {
            match decl.kind() {
                "function_declaration" | "method_declaration" => {
                    self.push(decl, decl.start_byte(), 0)
                }
                "type_declaration" => {
                    let specs = named_children(decl).into_iter();
                    for spec in specs.filter(|s| matches!(s.kind(), "type_spec" | "type_alias")) {
                        // A struct's fields or an interface's methods start at `{`.
                        let whole = lang::text(spec, self.src);
                        let head = whole.split('{').next().unwrap_or(whole);
                        self.push_text(line_of(spec), 0, &format!("type {head}"));
                    }
                }
                _ => {}
            }
        }
    }

    fn js_statements(&mut self, root: Node) {
        for statement in named_children(root) {
            let start = start_after_decorators(statement);
            self.js_statement(statement, start);
        }
    }

    /// One statement; `start` is where its signature starts (before `export`, after decorators).
    fn js_statement(&mut self, node: Node, start: usize) {
        match node.kind() {
            "export_statement" => {
                if let Some(decl) = node.child_by_field_name("declaration") {
                    self.js_statement(decl, start);
                }
            }
            "function_declaration"
            | "generator_function_declaration"
            | "function_signature"
            | "interface_declaration"
            | "enum_declaration"
            | "type_alias_declaration" => self.push(node, start, 0),
            "class_declaration" | "abstract_class_declaration" => {
                self.push(node, start, 0);
                if let Some(body) = node.child_by_field_name("body") {
                    self.js_class_members(body);
                }
            }
            "lexical_declaration" | "variable_declaration" => self.js_function_values(node, start),
            _ => {}
        }
    }

    fn js_class_members(&mut self, body: Node) {
        for member in named_children(body) {
            if matches!(
                member.kind(),
                "method_definition" | "abstract_method_signature"
            ) {
                self.push(member, start_after_decorators(member), 1);
            }
        }
    }

    /// `const add = (a, b) => ...` and `let f = function () {...}`: functions by another name.
    fn js_function_values(&mut self, declaration: Node, start: usize) {
        let declarators = named_children(declaration);
        let declarators = declarators
            .into_iter()
            .filter(|d| d.kind() == "variable_declarator");
        for (i, declarator) in declarators.enumerate() {
            let Some(value) = declarator.child_by_field_name("value") else {
                continue;
            };
            if !matches!(
                value.kind(),
                "arrow_function" | "function_expression" | "generator_function"
            ) {
                continue;
            }
            // The first declarator keeps `export const`; later ones start at their name.
            let from = if i == 0 {
                start
            } else {
                declarator.start_byte()
            };
            let to = value
                .child_by_field_name("body")
                .map_or(value.end_byte(), |b| b.start_byte());
            let line = line_of(declarator);
            self.push_text(line, 0, self.src.get(from..to).unwrap_or(""));
        }
    }
}

/// Where a node's own text starts: past the decorators that lead it, `export` kept.
fn start_after_decorators(node: Node) -> usize {
    named_children(node)
        .iter()
        .filter(|c| c.kind() == "decorator")
        .map(|d| d.end_byte())
        .max()
        .map_or(node.start_byte(), |end| end.max(node.start_byte()))
}

/// The end of the line that starts at `start`, at most `end`.
fn first_line_end(src: &str, start: usize, end: usize) -> usize {
    let rest = src.get(start..end).unwrap_or("");
    start + rest.find('\n').unwrap_or(rest.len())
}

/// Whitespace collapsed, the opener of a body dropped, cut to `MAX_SIGNATURE` characters.
fn one_line(raw: &str) -> String {
    let collapsed = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    let trimmed = collapsed.trim_end_matches(['{', ':', ';', ' ']);
    match trimmed.char_indices().nth(MAX_SIGNATURE) {
        Some((cut, _)) => format!("{}…", &trimmed[..cut]),
        None => trimmed.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The outline as the map prints it, without the padding of line numbers.
    fn lines(lang: Lang, src: &str) -> Vec<String> {
        outline(lang, src)
            .iter()
            .map(|d| format!("{} {}{}", d.line, "  ".repeat(d.depth), d.signature))
            .collect()
    }

    #[test]
    fn python_functions_classes_and_methods() {
        let src = r#"import math

RATE = 0.2


def add(a, b):
    return a + b


@dataclass
class Calculator(Base):
    """Adds things up."""

    def __init__(self, items: list[int]) -> None:
        self.items = items

    @property
    def total(self):
        def helper():
            pass
        return sum(self.items)

    class Error(Exception):
        pass


async def fetch(url,
                timeout=3):
    pass
"#;
        assert_eq!(
            lines(Lang::Python, src),
            vec![
                "6 def add(a, b)",
                "11 class Calculator(Base)",
                "14   def __init__(self, items: list[int]) -> None",
                "18   def total(self)",
                "23   class Error(Exception)",
                "27 async def fetch(url, timeout=3)",
            ]
        );
    }

    #[test]
    fn rust_items_impls_and_inline_modules() {
        let src = r#"use std::fmt;

/// A point.
#[derive(Debug)]
pub struct Point {
    x: i32,
}

pub struct Meters(f64);

pub enum Shape { Circle, Square }

pub trait Area {
    fn area(&self) -> f64;
}

impl Area for Point {
    fn area(&self) -> f64 {
        0.0
    }
}

pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

type Pair = (i32, i32);

mod helpers;

#[cfg(test)]
mod tests {
    #[test]
    fn adds() {
        assert_eq!(super::add(2, 3), 5);
    }
}
"#;
        assert_eq!(
            lines(Lang::Rust, src),
            vec![
                "5 pub struct Point",
                "9 pub struct Meters(f64)",
                "11 pub enum Shape",
                "13 pub trait Area",
                "14   fn area(&self) -> f64",
                "17 impl Area for Point",
                "18   fn area(&self) -> f64",
                "23 pub fn add(a: i32, b: i32) -> i32",
                "27 type Pair = (i32, i32)",
                "32 mod tests",
                "34   fn adds()",
            ]
        );
    }

    #[test]
    fn go_funcs_types_and_methods() {
        let src = r#"package calc

import "fmt"

type Calc struct {
	total int
}

type (
	ID    int
	Adder interface {
		Add(a, b int) int
	}
)

func Add(a, b int) int {
	return a + b
}

func (c *Calc) Total() int {
	return c.total
}
"#;
        assert_eq!(
            lines(Lang::Go, src),
            vec![
                "5 type Calc struct",
                "10 type ID int",
                "11 type Adder interface",
                "16 func Add(a, b int) int",
                "20 func (c *Calc) Total() int",
            ]
        );
    }

    #[test]
    fn javascript_functions_classes_methods_and_arrow_consts() {
        let src = r#"const path = require('path');

function add(a, b) {
  return a + b;
}

export const total = (items) => items.reduce(add, 0);

export default class Cart extends Base {
  constructor(items) {
    super();
    this.items = items;
  }

  static empty() {
    return new Cart([]);
  }

  async checkout(user) {}
}

let double = function (x) { return 2 * x; }, limit = 10;

module.exports = { add };
"#;
        assert_eq!(
            lines(Lang::JavaScript, src),
            vec![
                "3 function add(a, b)",
                "7 export const total = (items) =>",
                "9 export default class Cart extends Base",
                "10   constructor(items)",
                "15   static empty()",
                "19   async checkout(user)",
                "22 let double = function (x)",
            ]
        );
    }

    #[test]
    fn typescript_interfaces_types_enums_and_classes() {
        let src = r#"import { Item } from './item';

export interface Priced {
  price(): number;
}

export type Currency = 'EUR' | 'USD';

enum Level { Low, High }

export function discount(total: number, code?: string): number {
  return total;
}

@Injectable()
export class Pricing implements Priced {
  @Memo()
  price(): number {
    return 1;
  }
}

export abstract class Rule {
  abstract apply(total: number): number;
}

export const round = (x: number): number => Math.round(x);
"#;
        assert_eq!(
            lines(Lang::TypeScript, src),
            vec![
                "3 export interface Priced",
                "7 export type Currency = 'EUR' | 'USD'",
                "9 enum Level",
                "11 export function discount(total: number, code?: string): number",
                "16 export class Pricing implements Priced",
                "18   price(): number",
                "23 export abstract class Rule",
                "24   abstract apply(total: number): number",
                "27 export const round = (x: number): number =>",
            ]
        );
    }

    #[test]
    fn long_signatures_are_cut_to_one_line() {
        let params: Vec<String> = (0..40).map(|i| format!("argument_{i}")).collect();
        let src = format!("def f(\n    {}\n):\n    pass\n", params.join(",\n    "));
        let defs = outline(Lang::Python, &src);
        assert_eq!(defs.len(), 1);
        assert_eq!(defs[0].signature.chars().count(), MAX_SIGNATURE + 1);
        assert!(defs[0]
            .signature
            .starts_with("def f( argument_0, argument_1,"));
        assert!(defs[0].signature.ends_with('…'));
    }
}

//! Changing tools: write_file, edit_file, delete_file. Each accepted change is one commit;
//! a refused one changes nothing and commits nothing.

use super::files::{read_text, refused, write_regular};
use super::{parse_input, path_label, short, Tool, ToolContext, ToolError, ToolOutcome};
use crate::guard::{display, Resolved};
use crate::model::ToolSpec;
use crate::workspace::{Changed, CommitOutcome};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Commits what a tool just did at `changed` (where the file it wrote or removed really is),
/// and says so to the model.
fn commit(
    ctx: &ToolContext,
    changed: &Path,
    verb: &str,
    shown: &str,
    done: &str,
) -> Result<ToolOutcome, ToolError> {
    let subject = format!("agent-git: {verb} {shown}");
    let protection = ctx.guard.protection();
    // Only that path is looked at; when it cannot be named inside the tree, all of it is.
    let paths: Vec<PathBuf> = in_tree(ctx.guard.root(), changed).into_iter().collect();
    let changed = if paths.is_empty() {
        Changed::Status
    } else {
        Changed::Paths(&paths)
    };
    let result = ctx
        .workspace
        .commit(changed, &subject, ctx.note, protection, &*ctx.hooks())?;
    if !result.dropped.is_empty() {
        return Ok(ToolOutcome::error(
            super::dropped_lines(&result.dropped).join("\n"),
            "refused: not committable",
        ));
    }
    let outcome = match result.outcome {
        CommitOutcome::Committed(oid) => ToolOutcome {
            commit: Some(oid),
            ..ToolOutcome::ok(
                // No sha here: it differs from run to run, and the model has no use for it.
                format!("{done}; committed"),
                format!("commit {}", short(oid)),
            )
        },
        CommitOutcome::NoChange => ToolOutcome::ok(
            format!("{shown} already had this content; nothing changed, nothing committed"),
            "no change",
        ),
        CommitOutcome::Refused(paths) => {
            ToolOutcome::error(super::refused_protected(&paths), "refused: protected")
        }
        CommitOutcome::Rejected { hook, output } => super::rejected_by_hook(hook, &output),
    };
    Ok(outcome)
}

/// `full` relative to the work tree `root` (the guard's, already resolved), its folder's links
/// resolved (the name itself is kept: a link removed is the link's path).
fn in_tree(root: &Path, full: &Path) -> Option<PathBuf> {
    let folder = full.parent()?.canonicalize().ok()?;
    let rel = folder.join(full.file_name()?);
    rel.strip_prefix(root).ok().map(Path::to_path_buf)
}

/// The guard's verdict, then what only git knows: a path git ignores cannot be committed, so
/// a change there would shape the test runs without ever reaching the branch.
fn resolve_for_write(ctx: &ToolContext, path: &str) -> Result<(Resolved, String), ToolError> {
    let resolved = ctx.guard.check_write(path).map_err(refused)?;
    let shown = display(&resolved.rel);
    if resolved.rel.as_os_str().is_empty() || resolved.real.is_dir() {
        return Err(ToolOutcome::error(
            format!("{shown} is a directory; name a file"),
            "error: a directory",
        )
        .into());
    }
    if ctx.workspace.is_ignored_untracked(&resolved.rel)? {
        return Err(ToolOutcome::error(
            format!(
                "refused: git ignores {shown}, so a change to it could not be committed; \
                 change files that git tracks"
            ),
            "refused: ignored by git",
        )
        .into());
    }
    Ok((resolved, shown))
}

fn io_error(what: &str, shown: &str, e: std::io::Error) -> ToolOutcome {
    ToolOutcome::error(format!("cannot {what} {shown}: {e}"), "error: i/o")
}

pub struct WriteFile;

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}

impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write_file",
            description:
                "Create a file or replace its whole content; parent directories are created. \
                The change is committed at once. Test files are protected and will be refused.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the repository root."},
                    "content": {"type": "string", "description": "The complete new content of the file."}
                },
                "required": ["path", "content"]
            }),
        }
    }

    fn label(&self, input: &Value) -> String {
        path_label("write", input)
    }

    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolError> {
        let args: WriteArgs = parse_input("write_file", input)?;
        let (resolved, shown) = resolve_for_write(ctx, &args.path)?;
        if let Some(parent) = resolved.real.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| io_error("create the directory of", &shown, e))?;
        }
        write_regular(&resolved.real, args.content.as_bytes())
            .map_err(|e| io_error("write", &shown, e))?;
        let lines = args.content.lines().count();
        commit(
            ctx,
            &resolved.real,
            "write",
            &shown,
            &format!(
                "wrote {shown} ({})",
                crate::text::count(lines as u64, "line")
            ),
        )
    }
}

pub struct EditFile;

#[derive(Deserialize)]
struct EditArgs {
    path: String,
    old_text: String,
    new_text: String,
}

impl Tool for EditFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit_file",
            description:
                "Replace one exact piece of a file: old_text must occur exactly once (include \
                enough surrounding lines to make it unique, whitespace included). The change is \
                committed at once. Test files are protected and will be refused.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the repository root."},
                    "old_text": {"type": "string", "description": "The exact text to replace; must occur exactly once."},
                    "new_text": {"type": "string", "description": "The text to put in its place."}
                },
                "required": ["path", "old_text", "new_text"]
            }),
        }
    }

    fn label(&self, input: &Value) -> String {
        path_label("edit", input)
    }

    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolError> {
        let args: EditArgs = parse_input("edit_file", input)?;
        let (resolved, shown) = resolve_for_write(ctx, &args.path)?;
        if !resolved.real.exists() {
            return Ok(ToolOutcome::error(
                format!("{shown} does not exist; use write_file to create it"),
                "error: not found",
            ));
        }
        let text = read_text(&resolved.real, &shown)?;
        let new = replace_once(&text, &args.old_text, &args.new_text, &shown)?;
        write_regular(&resolved.real, new.as_bytes()).map_err(|e| io_error("write", &shown, e))?;
        commit(
            ctx,
            &resolved.real,
            "edit",
            &shown,
            &format!("edited {shown}"),
        )
    }
}

/// Replaces the single occurrence of `old`; zero or several occurrences are errors that help
/// the model find the right text.
fn replace_once(text: &str, old: &str, new: &str, shown: &str) -> Result<String, ToolOutcome> {
    if old.is_empty() {
        return Err(ToolOutcome::error(
            "old_text is empty; give the exact text to replace (or use write_file for a whole file)",
            "error: empty old_text",
        ));
    }
    let starts: Vec<usize> = text.match_indices(old).map(|(i, _)| i).collect();
    match starts.len() {
        1 => Ok(text.replacen(old, new, 1)),
        0 => Err(ToolOutcome::error(
            format!(
                "old_text was not found in {shown}. The closest lines are:\n{}\nCopy the text \
                 exactly, whitespace included, or read the file again.",
                closest_lines(text, old)
            ),
            "error: old_text not found",
        )),
        n => {
            let lines: Vec<String> = starts
                .iter()
                .map(|&i| (text[..i].matches('\n').count() + 1).to_string())
                .collect();
            Err(ToolOutcome::error(
                format!(
                    "old_text occurs {n} times in {shown} (at lines {}); include more surrounding \
                     lines so that it occurs exactly once",
                    lines.join(", ")
                ),
                "error: old_text not unique",
            ))
        }
    }
}

/// The numbered lines of `text` most like the first line of `wanted`, with some context.
fn closest_lines(text: &str, wanted: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let first = wanted
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let best = lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let ratio = similar::TextDiff::from_chars(line.trim(), first).ratio();
            (i, ratio)
        })
        .fold((0, -1.0f32), |acc, x| if x.1 > acc.1 { x } else { acc })
        .0;
    let span = wanted.lines().count().max(1);
    let from = best.saturating_sub(2);
    let to = (best + span + 2).min(lines.len());
    lines[from..to]
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{:>6}\t{l}", from + i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

pub struct DeleteFile;

#[derive(Deserialize)]
struct DeleteArgs {
    path: String,
}

impl Tool for DeleteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "delete_file",
            description:
                "Delete a file. The deletion is committed at once. Test files are protected \
                and will be refused.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the repository root."}
                },
                "required": ["path"]
            }),
        }
    }

    fn label(&self, input: &Value) -> String {
        path_label("delete", input)
    }

    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolError> {
        let args: DeleteArgs = parse_input("delete_file", input)?;
        let (resolved, shown) = resolve_for_write(ctx, &args.path)?;
        // The name itself goes, not what a symlink points to.
        let target = ctx.guard.root().join(&resolved.rel);
        if std::fs::symlink_metadata(&target).is_err() {
            return Ok(ToolOutcome::error(
                format!("{shown} does not exist"),
                "error: not found",
            ));
        }
        std::fs::remove_file(&target).map_err(|e| io_error("delete", &shown, e))?;
        commit(ctx, &target, "delete", &shown, &format!("deleted {shown}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_once_explains_missing_and_repeated_text() {
        let text = "def add(a, b):\n    return a - b\n\ndef sub(a, b):\n    return a - b\n";
        let missing = replace_once(text, "return a-b", "x", "calc.py").unwrap_err();
        assert!(missing.is_error);
        assert!(missing.content.contains("was not found in calc.py"));
        assert!(
            missing.content.contains("     2\t    return a - b"),
            "{}",
            missing.content
        );

        let twice = replace_once(text, "return a - b", "x", "calc.py").unwrap_err();
        assert!(twice
            .content
            .contains("occurs 2 times in calc.py (at lines 2, 5)"));

        let once = replace_once(
            text,
            "def add(a, b):\n    return a - b",
            "def add(a, b):\n    return a + b",
            "calc.py",
        );
        assert_eq!(
            once.unwrap(),
            "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n"
        );
        assert!(replace_once(text, "", "x", "calc.py").is_err());
    }
}

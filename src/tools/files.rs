//! Reading a file (read_file), and the file helpers the other tools share.

use super::{parse_input, path_label, Tool, ToolContext, ToolError, ToolOutcome};
use crate::guard::{display, PathError};
use crate::model::ToolSpec;
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::Path;

const MAX_READ_LINES: usize = 2000;
const MAX_READ_BYTES: usize = 100 * 1024;
/// The largest file read or edited whole: memory stays bounded whatever a command left.
const MAX_TEXT_FILE: u64 = 64 << 20;

pub(super) fn refused(error: PathError) -> ToolOutcome {
    let summary = match &error {
        PathError::Protected(_) => "refused: protected",
        PathError::Escapes(_) | PathError::Absolute(_) => "refused: outside the repository",
        PathError::InsideGit(_) => "refused: inside .git",
        PathError::DanglingLink(_) => "refused: dangling symlink",
        PathError::Empty => "refused: empty path",
        PathError::Nul(_) => "refused: NUL in path",
    };
    ToolOutcome::error(error.to_string(), summary)
}

/// Writes `content` to the regular file at `path`, made if need be; never to a FIFO or device.
pub(super) fn write_regular(path: &Path, content: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // A file with another name (a hard link a command made, to a test file say) is replaced,
    // not written through: only the path the tool named may change.
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if meta.is_file() && meta.nlink() > 1 {
            std::fs::remove_file(path)?;
            let mut options = std::fs::OpenOptions::new();
            let mut file = options.write(true).create_new(true).open(path)?;
            file.set_permissions(std::fs::Permissions::from_mode(meta.mode() & 0o7777))?;
            return file.write_all(content);
        }
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true);
    let mut file = crate::files::open_regular(path, &mut options)?;
    file.set_len(0)?;
    file.write_all(content)
}

/// Text of a file, or why it cannot be shown as text.
pub(super) fn read_text(path: &Path, shown: &str) -> Result<String, ToolOutcome> {
    let bytes = crate::files::read_regular(path, MAX_TEXT_FILE + 1).map_err(|e| {
        ToolOutcome::error(format!("cannot read {shown}: {e}"), "error: unreadable")
    })?;
    if bytes.len() as u64 > MAX_TEXT_FILE {
        return Err(ToolOutcome::error(
            format!(
                "refused: {shown} is over {} MB, too large to read whole; search it instead",
                MAX_TEXT_FILE >> 20
            ),
            "refused: too large",
        ));
    }
    let head = &bytes[..bytes.len().min(8000)];
    if head.contains(&0) {
        return Err(ToolOutcome::error(
            format!("refused: {shown} is a binary file"),
            "refused: binary",
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        ToolOutcome::error(
            format!("refused: {shown} is not UTF-8 text"),
            "refused: binary",
        )
    })
}

pub struct ReadFile;

#[derive(Deserialize)]
struct ReadArgs {
    path: String,
    start_line: Option<usize>,
    end_line: Option<usize>,
}

impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file",
            description:
                "Read a text file with numbered lines. At most 2000 lines or 100 KB per call; \
                use start_line and end_line (1-based, inclusive) to read a part or to read on.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the repository root."},
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line to show (default 1)."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to show (default: the end)."}
                },
                "required": ["path"]
            }),
        }
    }

    fn label(&self, input: &Value) -> String {
        path_label("read", input)
    }

    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolError> {
        let args: ReadArgs = parse_input("read_file", input)?;
        let resolved = ctx.guard.check_read(&args.path).map_err(refused)?;
        let shown = display(&resolved.rel);
        if resolved.real.is_dir() {
            return Ok(ToolOutcome::error(
                format!("{shown} is a directory; use list_files to see what it holds"),
                "error: a directory",
            ));
        }
        if !resolved.real.exists() {
            return Ok(ToolOutcome::error(
                format!("{shown} does not exist"),
                "error: not found",
            ));
        }
        let text = read_text(&resolved.real, &shown)?;
        Ok(number_lines(&shown, &text, args.start_line, args.end_line))
    }
}

fn number_lines(shown: &str, text: &str, start: Option<usize>, end: Option<usize>) -> ToolOutcome {
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let start = start.unwrap_or(1).max(1);
    if total == 0 {
        return ToolOutcome::ok(format!("{shown} is empty"), "0 lines");
    }
    if start > total {
        return ToolOutcome::error(
            format!("{shown} has {total} lines; start_line {start} is past the end"),
            "error: past the end",
        );
    }
    let end = end.unwrap_or(total).min(total);
    if end < start {
        return ToolOutcome::error(
            format!("end_line {end} is before start_line {start}"),
            "error: bad range",
        );
    }
    let mut out = String::new();
    let mut last = start - 1;
    for (i, line) in lines[start - 1..end].iter().enumerate() {
        let numbered = format!("{:>6}\t{line}\n", start + i);
        if i >= MAX_READ_LINES || out.len() + numbered.len() > MAX_READ_BYTES {
            if out.is_empty() {
                // One line larger than the cap: show its start rather than nothing at all.
                let cut: String = numbered.chars().take(MAX_READ_BYTES).collect();
                out.push_str(&format!(
                    "{cut}\n[line {start} cut at {MAX_READ_BYTES} bytes]\n"
                ));
                last = start;
            }
            break;
        }
        out.push_str(&numbered);
        last = start + i;
    }
    if last < end {
        out.push_str(&format!(
            "[showing lines {start}-{last} of {total}; call read_file with start_line {} to read on]\n",
            last + 1
        ));
    }
    ToolOutcome::ok(out, format!("lines {start}-{last} of {total}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_lines_are_capped_with_a_way_to_read_on() {
        let text: String = (1..=2500).map(|i| format!("l{i}\n")).collect();
        let out = number_lines("big.txt", &text, None, None);
        assert!(out.content.starts_with("     1\tl1\n"));
        assert!(out.content.contains("  2000\tl2000\n"));
        assert!(!out.content.contains("l2001\n"));
        assert!(out.content.ends_with(
            "[showing lines 1-2000 of 2500; call read_file with start_line 2001 to read on]\n"
        ));

        let part = number_lines("big.txt", &text, Some(2499), Some(9999));
        assert_eq!(part.content, "  2499\tl2499\n  2500\tl2500\n");
        assert!(number_lines("big.txt", &text, Some(3000), None).is_error);
        assert!(number_lines("big.txt", &text, Some(5), Some(4)).is_error);
    }

    #[test]
    fn a_write_to_a_file_with_another_name_leaves_the_other_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let test = dir.path().join("test_calc.py");
        let alias = dir.path().join("helper.py");
        std::fs::write(&test, "assert True\n").unwrap();
        std::fs::set_permissions(&test, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::hard_link(&test, &alias).unwrap();
        write_regular(&alias, b"assert 1 == 1\n").unwrap();
        assert_eq!(std::fs::read_to_string(&test).unwrap(), "assert True\n");
        assert_eq!(std::fs::read_to_string(&alias).unwrap(), "assert 1 == 1\n");
        let mode = std::fs::metadata(&alias).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755, "the mode stays");
    }
}

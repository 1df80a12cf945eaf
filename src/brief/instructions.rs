//! The repository's own instructions for coding agents: `AGENTS.md` at the root, else
//! `CLAUDE.md`. They go into the first message, capped, since a repository can hold anything.

/// Files read, in order of preference: the first that exists is the one used.
pub const INSTRUCTION_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// The most of an instructions file the model is shown.
pub const MAX_INSTRUCTION_BYTES: usize = 16 * 1024;

/// An instructions file as the model is shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instructions {
    /// Which of `INSTRUCTION_FILES` it is.
    pub file: &'static str,
    /// Its text, trimmed, at most `MAX_INSTRUCTION_BYTES` and cut on a character boundary.
    pub text: String,
    /// Bytes left out past the cap.
    pub cut: usize,
}

impl Instructions {
    /// Reads the root's instruction file at the base commit; None when there is none or it is
    /// empty.
    pub fn find(read: &dyn Fn(&str) -> Option<String>) -> Option<Instructions> {
        INSTRUCTION_FILES.iter().find_map(|file| {
            let text = read(file)?;
            let text = text.trim();
            if text.is_empty() {
                return None;
            }
            let end = text.floor_char_boundary(MAX_INSTRUCTION_BYTES);
            Some(Instructions {
                file,
                text: text[..end].to_string(),
                cut: text.len() - end,
            })
        })
    }

    /// The section of the first message that carries them.
    pub fn section(&self) -> String {
        let mut out = format!(
            "The repository's instructions for agents ({}), from its base commit. Follow them \
             where they do not conflict with the harness's rules:\n\n{}",
            self.file, self.text
        );
        if self.cut > 0 {
            out.push_str(&format!(
                "\n\n[{} more bytes of {} not shown; read_file shows the rest]",
                self.cut, self.file
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(entries: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let entries: Vec<(String, String)> = entries
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        move |path: &str| {
            entries
                .iter()
                .find(|(p, _)| p == path)
                .map(|(_, t)| t.clone())
        }
    }

    #[test]
    fn agents_md_comes_first_then_claude_md_and_long_ones_are_cut() {
        let both = files(&[
            ("CLAUDE.md", "Use tabs."),
            ("AGENTS.md", "\nRun make lint.\n"),
        ]);
        assert_eq!(
            Instructions::find(&both),
            Some(Instructions {
                file: "AGENTS.md",
                text: "Run make lint.".into(),
                cut: 0
            })
        );
        let claude = files(&[("CLAUDE.md", "Use tabs."), ("AGENTS.md", "  \n")]);
        assert_eq!(Instructions::find(&claude).unwrap().file, "CLAUDE.md");
        assert_eq!(Instructions::find(&files(&[("docs/AGENTS.md", "x")])), None);

        let long = "é".repeat(MAX_INSTRUCTION_BYTES);
        let found = Instructions::find(&files(&[("AGENTS.md", long.as_str())])).unwrap();
        assert_eq!(found.text.len(), MAX_INSTRUCTION_BYTES);
        assert_eq!(found.cut, MAX_INSTRUCTION_BYTES);
        assert!(found.section().ends_with(&format!(
            "[{MAX_INSTRUCTION_BYTES} more bytes of AGENTS.md not shown; read_file shows the rest]"
        )));
    }
}

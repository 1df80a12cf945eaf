//! Keeping the conversation inside the model's context window.

use crate::model::{ContentBlock, Message, Role};

/// Tool results shorter than this are kept: the note would save nothing.
const KEEP_SHORTER_THAN: usize = 200;
/// The newest messages are never touched: the model is working with them.
const KEEP_NEWEST: usize = 4;

pub const REMOVED: &str =
    "[removed by the harness to save context; call the tool again if you need this]";

/// Replaces old, long tool results with a short note, all in one step, and tells the model in
/// the newest user message. Returns how many were replaced.
pub fn compact(messages: &mut Vec<Message>) -> usize {
    let old = messages.len().saturating_sub(KEEP_NEWEST);
    let mut replaced = 0;
    for message in &mut messages[..old] {
        for block in &mut message.content {
            if let ContentBlock::ToolResult { content, .. } = block {
                if content.len() >= KEEP_SHORTER_THAN {
                    *content = REMOVED.to_string();
                    replaced += 1;
                }
            }
        }
    }
    if replaced > 0 {
        tell(
            messages,
            format!(
                "Note from the harness: the conversation neared the model's context window, \
                 so {replaced} older tool results were replaced by a short note. Read files \
                 again if you need them."
            ),
        );
    }
    replaced
}

/// What a result is cut to when even the newest must shrink.
const CUT_TO: usize = 2_000;

/// The last resort when old results are gone and the conversation still does not fit: every
/// tool result longer than `CUT_TO` keeps its start only, and the model is told. Returns how
/// many were cut.
pub fn cut_long(messages: &mut Vec<Message>) -> usize {
    let mut cut = 0;
    for message in messages.iter_mut() {
        for block in &mut message.content {
            if let ContentBlock::ToolResult { content, .. } = block {
                if content.len() > CUT_TO + CUT_NOTE.len() {
                    let end = content.floor_char_boundary(CUT_TO);
                    content.truncate(end);
                    content.push_str(CUT_NOTE);
                    cut += 1;
                }
            }
        }
    }
    if cut > 0 {
        tell(
            messages,
            format!(
                "Note from the harness: the conversation did not fit the model's context \
                 window, so {cut} long tool results were cut to their first {CUT_TO} bytes. \
                 Read files in smaller parts (read_file with start_line and end_line) from now on."
            ),
        );
    }
    cut
}

const CUT_NOTE: &str = "\n[cut by the harness to fit the context window]";

/// Adds a note for the model to the newest user message (or a new one).
fn tell(messages: &mut Vec<Message>, text: String) {
    let note = ContentBlock::text(text);
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.push(note),
        _ => messages.push(Message::user(vec![note])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, len: usize) -> ContentBlock {
        ContentBlock::ToolResult {
            tool_use_id: id.into(),
            content: "x".repeat(len),
            is_error: false,
        }
    }

    #[test]
    fn old_long_results_go_new_ones_stay_and_the_model_is_told() {
        let assistant = Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text("...")],
        };
        let mut messages = vec![
            Message::user(vec![ContentBlock::text("Task")]),
            assistant.clone(),
            Message::user(vec![result("a", 5000), result("b", 10)]),
            assistant.clone(),
            Message::user(vec![result("c", 5000)]),
            assistant,
            Message::user(vec![result("d", 5000)]),
        ];
        assert_eq!(compact(&mut messages), 1);
        assert_eq!(
            messages[2].content[0],
            ContentBlock::ToolResult {
                tool_use_id: "a".into(),
                content: REMOVED.into(),
                is_error: false
            }
        );
        assert_eq!(messages[2].content[1], result("b", 10));
        assert_eq!(messages[4].content[0], result("c", 5000));
        let ContentBlock::Text { text } = &messages[6].content[1] else {
            panic!("the newest user message carries the note");
        };
        assert!(text.contains("1 older tool results were replaced"));
        assert_eq!(compact(&mut messages), 0, "nothing more to remove");

        // The newest results are long: only cutting them makes room.
        assert_eq!(cut_long(&mut messages), 2);
        let ContentBlock::ToolResult { content, .. } = &messages[6].content[0] else {
            panic!("still a tool result");
        };
        assert_eq!(content, &format!("{}{CUT_NOTE}", "x".repeat(CUT_TO)));
        assert_eq!(messages[2].content[1], result("b", 10));
        assert_eq!(cut_long(&mut messages), 0, "nothing more to cut");
    }
}

//! How hard a model thinks before it answers: Anthropic's extended thinking (a token budget,
//! or adaptive) and OpenAI's reasoning effort. One table says what each model family takes
//! and what agent-git asks of it by default; a setting the model cannot take is refused
//! before the run starts, never sent for the API to refuse.

use super::ModelSpec;

/// `--thinking`: what the user asked of an Anthropic model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// No thinking.
    Off,
    /// Claude decides how much to think (the newer models).
    Adaptive,
    /// Think with at most this many tokens per reply.
    Budget(u32),
}

/// The smallest thinking budget the API takes.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// A default budget, and the room adaptive thinking is given on top of the reply.
pub const DEFAULT_THINKING_BUDGET: u32 = 8192;

/// The header that lets a Claude 4 model think between tool calls (manual thinking).
pub const INTERLEAVED_BETA: &str = "interleaved-thinking-2025-05-14";

impl Thinking {
    /// `off`, `adaptive`, or a budget in tokens (at least 1024).
    pub fn parse(text: &str) -> Result<Thinking, String> {
        match text.trim() {
            "off" => Ok(Thinking::Off),
            "adaptive" => Ok(Thinking::Adaptive),
            number => match number.parse::<u32>() {
                Ok(budget) if budget >= MIN_THINKING_BUDGET => Ok(Thinking::Budget(budget)),
                Ok(_) => Err(format!(
                    "a thinking budget is at least {MIN_THINKING_BUDGET} tokens, not {number}"
                )),
                Err(_) => Err(format!(
                    "`{text}` is not a thinking setting; use a budget in tokens, adaptive or off"
                )),
            },
        }
    }
}

/// `--reasoning-effort`: what the user asked of an OpenAI reasoning model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effort {
    /// `minimal`: the least reasoning, where the model takes it (not every model does).
    Minimal,
    /// `low`.
    Low,
    /// `medium`: what a reasoning model is asked when the user names no effort.
    Medium,
    /// `high`: the most reasoning.
    High,
}

impl Effort {
    /// `minimal`, `low`, `medium` or `high`; an error names them.
    pub fn parse(text: &str) -> Result<Effort, String> {
        match text.trim() {
            "minimal" => Ok(Effort::Minimal),
            "low" => Ok(Effort::Low),
            "medium" => Ok(Effort::Medium),
            "high" => Ok(Effort::High),
            other => Err(format!(
                "`{other}` is not a reasoning effort; use minimal, low, medium or high"
            )),
        }
    }

    /// The effort as the API and `--reasoning-effort` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Effort::Minimal => "minimal",
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }
}

/// What a model family can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Can {
    /// No reasoning setting at all.
    Nothing,
    /// Manual thinking with a budget; `interleaved` between tool calls with the beta header.
    Budget { interleaved: bool, max_output: u32 },
    /// Adaptive thinking (interleaved of itself); `budget` where manual thinking is still
    /// taken too.
    Adaptive { budget: bool, max_output: u32 },
    /// A reasoning effort, of these levels.
    Effort(&'static [Effort]),
}

const ALL_EFFORTS: &[Effort] = &[Effort::Minimal, Effort::Low, Effort::Medium, Effort::High];
const NO_MINIMAL: &[Effort] = &[Effort::Low, Effort::Medium, Effort::High];

/// Model families by name prefix, the most specific first. Names not listed have no
/// reasoning setting unless the user gives one (and then only on a server that is not
/// OpenAI's or Anthropic's own, where agent-git cannot know).
const FAMILIES: &[(&str, Can)] = &[
    (
        "claude-3-7-sonnet",
        Can::Budget {
            interleaved: false,
            max_output: 64_000,
        },
    ),
    (
        "claude-sonnet-4-5",
        Can::Budget {
            interleaved: true,
            max_output: 64_000,
        },
    ),
    (
        "claude-haiku-4-5",
        Can::Budget {
            interleaved: true,
            max_output: 64_000,
        },
    ),
    (
        "claude-opus-4-5",
        Can::Budget {
            interleaved: true,
            max_output: 64_000,
        },
    ),
    (
        "claude-opus-4-1",
        Can::Budget {
            interleaved: true,
            max_output: 32_000,
        },
    ),
    (
        "claude-sonnet-4-6",
        Can::Adaptive {
            budget: true,
            max_output: 64_000,
        },
    ),
    (
        "claude-opus-4-6",
        Can::Adaptive {
            budget: true,
            max_output: 128_000,
        },
    ),
    (
        "claude-opus-4-7",
        Can::Adaptive {
            budget: false,
            max_output: 128_000,
        },
    ),
    (
        "claude-sonnet-4",
        Can::Budget {
            interleaved: true,
            max_output: 64_000,
        },
    ),
    (
        "claude-opus-4",
        Can::Budget {
            interleaved: true,
            max_output: 32_000,
        },
    ),
    ("claude-", Can::Nothing),
    ("gpt-5-chat", Can::Nothing),
    ("gpt-5.", Can::Effort(NO_MINIMAL)),
    ("gpt-5", Can::Effort(ALL_EFFORTS)),
    ("o1-mini", Can::Nothing),
    ("o1", Can::Effort(NO_MINIMAL)),
    ("o3", Can::Effort(NO_MINIMAL)),
    ("o4-mini", Can::Effort(NO_MINIMAL)),
    ("gpt-oss", Can::Effort(NO_MINIMAL)),
    ("gpt-", Can::Nothing),
];

/// What `model` can do; None for a name the table does not know.
fn family(model: &str) -> Option<Can> {
    let name = model.rsplit('/').next().unwrap_or(model);
    FAMILIES
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, can)| *can)
}

/// The reasoning a run asks of its model, settled before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reasoning {
    /// Nothing is asked (and nothing sent).
    #[default]
    Off,
    /// `thinking: {type: enabled, budget_tokens}`, with the interleaved header where taken.
    Budget {
        /// The thinking budget of one reply, in tokens.
        tokens: u32,
        /// Thinking between tool calls too: requests carry the interleaved-thinking beta header.
        interleaved: bool,
        /// The most output tokens the model allows a reply: thinking and reply must fit in it.
        max_output: u32,
    },
    /// `thinking: {type: adaptive}`.
    Adaptive {
        /// The most output tokens the model allows a reply: thinking and reply must fit in it.
        max_output: u32,
    },
    /// `reasoning_effort`.
    Effort(Effort),
}

impl Reasoning {
    /// Settles `thinking` and `effort` for `spec`: unset ones take the family's default,
    /// and a setting the model cannot take is refused with what it can take.
    pub fn settle(
        spec: &ModelSpec,
        thinking: Option<Thinking>,
        effort: Option<Effort>,
    ) -> Result<Reasoning, String> {
        let (model, anthropic) = match spec {
            ModelSpec::Anthropic(model) => (model.as_str(), true),
            ModelSpec::OpenAi(model)
            | ModelSpec::OpenAiChat(model)
            | ModelSpec::OpenAiResponses(model) => (model.as_str(), false),
            // A script or a recording does not think.
            ModelSpec::Script(_) | ModelSpec::Replay(_) => return Ok(Reasoning::Off),
        };
        if anthropic && effort.is_some() {
            return Err(format!(
                "--reasoning-effort is for OpenAI reasoning models; {model} takes --thinking \
                 TOKENS|adaptive|off"
            ));
        }
        if !anthropic && thinking.is_some_and(|t| t != Thinking::Off) {
            return Err(format!(
                "--thinking is for Anthropic models; {model} takes --reasoning-effort where it \
                 reasons"
            ));
        }
        let can = family(model);
        if anthropic {
            return match (can.unwrap_or(Can::Nothing), thinking) {
                (_, Some(Thinking::Off)) => Ok(Reasoning::Off),
                (
                    Can::Budget {
                        interleaved,
                        max_output,
                    },
                    None,
                ) => Ok(Reasoning::Budget {
                    tokens: DEFAULT_THINKING_BUDGET,
                    interleaved,
                    max_output,
                }),
                (
                    Can::Budget {
                        interleaved,
                        max_output,
                    },
                    Some(Thinking::Budget(tokens)),
                ) => Ok(Reasoning::Budget {
                    tokens,
                    interleaved,
                    max_output,
                }),
                (Can::Budget { .. }, Some(Thinking::Adaptive)) => Err(format!(
                    "{model} has no adaptive thinking; give it a budget (--thinking TOKENS) or \
                     turn it off"
                )),
                (Can::Adaptive { max_output, .. }, None | Some(Thinking::Adaptive)) => {
                    Ok(Reasoning::Adaptive { max_output })
                }
                (
                    Can::Adaptive {
                        budget: true,
                        max_output,
                    },
                    Some(Thinking::Budget(tokens)),
                ) => {
                    // Taken, and between tool calls too, as adaptive thinking is.
                    Ok(Reasoning::Budget {
                        tokens,
                        interleaved: true,
                        max_output,
                    })
                }
                (Can::Adaptive { budget: false, .. }, Some(Thinking::Budget(_))) => Err(format!(
                    "{model} thinks adaptively only; use --thinking adaptive (the default) or off"
                )),
                (_, None) => Ok(Reasoning::Off),
                (_, Some(_)) => Err(format!(
                    "{model} has no extended thinking that agent-git knows of; drop --thinking"
                )),
            };
        }
        match (can, effort) {
            (Some(Can::Effort(levels)), Some(effort)) if !levels.contains(&effort) => {
                let names: Vec<&str> = levels.iter().map(|e| e.name()).collect();
                Err(format!(
                    "{model} takes a reasoning effort of {}, not {}",
                    names.join(", "),
                    effort.name()
                ))
            }
            (Some(Can::Effort(_)), Some(effort)) => Ok(Reasoning::Effort(effort)),
            (Some(Can::Effort(_)), None) => Ok(Reasoning::Effort(Effort::Medium)),
            (Some(_), Some(effort)) => Err(format!(
                "{model} is not a reasoning model: it takes no reasoning effort (asked: {})",
                effort.name()
            )),
            // A model the table does not know (on a local server): what the user asked.
            (None, Some(effort)) => Ok(Reasoning::Effort(effort)),
            (_, None) => Ok(Reasoning::Off),
        }
    }

    /// The reply's token limit with room for the thinking: the thinking counts toward it.
    /// An error where the model's output cannot hold the budget and a reply.
    pub fn max_tokens(self, reply: u32) -> Result<u32, String> {
        match self {
            Reasoning::Budget {
                tokens,
                interleaved,
                max_output,
            } => {
                let wanted = reply.saturating_add(tokens);
                let fitted = wanted.min(max_output);
                if !interleaved && tokens >= fitted {
                    return Err(format!(
                        "a thinking budget of {tokens} tokens leaves no room for a reply within \
                         the model's {max_output} output tokens; lower --thinking"
                    ));
                }
                Ok(fitted)
            }
            Reasoning::Adaptive { max_output } => Ok(reply
                .saturating_add(DEFAULT_THINKING_BUDGET)
                .min(max_output)),
            Reasoning::Off | Reasoning::Effort(_) => Ok(reply),
        }
    }

    /// How the report states it.
    pub fn describe(self) -> String {
        match self {
            Reasoning::Off => "off".to_string(),
            Reasoning::Budget {
                tokens,
                interleaved: true,
                ..
            } => {
                format!("thinking, {tokens} tokens a reply, between tool calls too")
            }
            Reasoning::Budget { tokens, .. } => format!("thinking, {tokens} tokens a reply"),
            Reasoning::Adaptive { .. } => "adaptive thinking".to_string(),
            Reasoning::Effort(effort) => format!("reasoning effort {}", effort.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claude(model: &str) -> ModelSpec {
        ModelSpec::Anthropic(model.into())
    }

    fn gpt(model: &str) -> ModelSpec {
        ModelSpec::OpenAi(model.into())
    }

    #[test]
    fn each_family_gets_its_default_and_refuses_what_it_cannot_take() {
        let settle = Reasoning::settle;
        assert_eq!(
            settle(&claude("claude-sonnet-4-5"), None, None),
            Ok(Reasoning::Budget {
                tokens: 8192,
                interleaved: true,
                max_output: 64_000
            })
        );
        assert_eq!(
            settle(
                &claude("claude-3-7-sonnet-20250219"),
                Some(Thinking::Budget(2000)),
                None
            ),
            Ok(Reasoning::Budget {
                tokens: 2000,
                interleaved: false,
                max_output: 64_000
            })
        );
        assert_eq!(
            settle(&claude("claude-opus-4-7"), None, None),
            Ok(Reasoning::Adaptive {
                max_output: 128_000
            })
        );
        assert!(settle(
            &claude("claude-opus-4-7"),
            Some(Thinking::Budget(4000)),
            None
        )
        .unwrap_err()
        .contains("adaptively only"));
        assert!(settle(&claude("claude-sonnet-4-5"), Some(Thinking::Adaptive), None).is_err());
        assert_eq!(
            settle(&claude("claude-3-5-haiku"), None, None),
            Ok(Reasoning::Off)
        );
        assert!(settle(
            &claude("claude-3-5-haiku"),
            Some(Thinking::Budget(2000)),
            None
        )
        .is_err());
        assert!(settle(&claude("claude-sonnet-4-5"), None, Some(Effort::Low)).is_err());

        assert_eq!(
            settle(&gpt("gpt-5"), None, None),
            Ok(Reasoning::Effort(Effort::Medium))
        );
        assert_eq!(
            settle(&gpt("gpt-5-mini"), None, Some(Effort::Minimal)),
            Ok(Reasoning::Effort(Effort::Minimal))
        );
        assert!(settle(&gpt("gpt-5.1"), None, Some(Effort::Minimal)).is_err());
        assert!(settle(&gpt("gpt-4.1"), None, Some(Effort::High))
            .unwrap_err()
            .contains("not a reasoning model"));
        assert_eq!(settle(&gpt("gpt-4.1"), None, None), Ok(Reasoning::Off));
        assert_eq!(
            settle(&gpt("gpt-5-chat-latest"), None, None),
            Ok(Reasoning::Off)
        );
        assert_eq!(settle(&gpt("llama3.1:8b"), None, None), Ok(Reasoning::Off));
        assert_eq!(
            settle(&gpt("qwen3:8b"), None, Some(Effort::High)),
            Ok(Reasoning::Effort(Effort::High))
        );
        assert!(settle(&gpt("o3"), Some(Thinking::Budget(2000)), None).is_err());
        assert_eq!(
            settle(&gpt("o3"), Some(Thinking::Off), None),
            Ok(Reasoning::Effort(Effort::Medium))
        );
    }

    #[test]
    fn the_reply_limit_makes_room_for_the_thinking() {
        let manual = Reasoning::Budget {
            tokens: 2000,
            interleaved: false,
            max_output: 64_000,
        };
        assert_eq!(manual.max_tokens(1500), Ok(3500));
        let tight = Reasoning::Budget {
            tokens: 63_000,
            interleaved: false,
            max_output: 64_000,
        };
        assert_eq!(tight.max_tokens(8192), Ok(64_000));
        let none_left = Reasoning::Budget {
            tokens: 64_000,
            interleaved: false,
            max_output: 64_000,
        };
        assert!(none_left.max_tokens(8192).is_err());
        let interleaved = Reasoning::Budget {
            tokens: 64_000,
            interleaved: true,
            max_output: 64_000,
        };
        assert_eq!(interleaved.max_tokens(8192), Ok(64_000));
        assert_eq!(Reasoning::Effort(Effort::High).max_tokens(900), Ok(900));
    }

    #[test]
    fn settings_read_as_users_write_them() {
        assert_eq!(Thinking::parse("off"), Ok(Thinking::Off));
        assert_eq!(Thinking::parse("adaptive"), Ok(Thinking::Adaptive));
        assert_eq!(Thinking::parse("4096"), Ok(Thinking::Budget(4096)));
        assert!(Thinking::parse("512")
            .unwrap_err()
            .contains("at least 1024"));
        assert!(Thinking::parse("lots").is_err());
        assert_eq!(Effort::parse("minimal"), Ok(Effort::Minimal));
        assert!(Effort::parse("max").is_err());
    }
}

//! `--model SPEC` parsing: which model a run talks to.

use super::{Model, ScriptedModel};
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    Script(PathBuf),
}

impl ModelSpec {
    pub fn parse(spec: &str) -> Result<Self, String> {
        match spec.split_once(':') {
            Some(("script", path)) if !path.is_empty() => {
                Ok(ModelSpec::Script(PathBuf::from(path)))
            }
            Some(("script", _)) => Err("`script:` needs a path, e.g. script:replies.json".into()),
            Some((provider, _)) => Err(format!(
                "unknown model provider `{provider}` in `{spec}`; known: script:PATH"
            )),
            None => Err(format!(
                "`{spec}` is not a model spec; use PROVIDER:NAME, e.g. script:replies.json"
            )),
        }
    }
}

pub fn open_model(spec: &ModelSpec) -> Result<Box<dyn Model>, String> {
    match spec {
        ModelSpec::Script(path) => Ok(Box::new(ScriptedModel::from_file(path)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_script_specs_and_rejects_others() {
        assert_eq!(
            ModelSpec::parse("script:a/b.json"),
            Ok(ModelSpec::Script(PathBuf::from("a/b.json")))
        );
        assert!(ModelSpec::parse("script:").is_err());
        assert!(ModelSpec::parse("gpt")
            .unwrap_err()
            .contains("not a model spec"));
        assert!(ModelSpec::parse("foo:bar")
            .unwrap_err()
            .contains("unknown model provider `foo`"));
    }
}

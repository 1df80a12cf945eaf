//! run_tests: the model may ask the verifier at any time; the harness asks it anyway.

use super::{Tool, ToolContext, ToolError, ToolOutcome};
use crate::model::ToolSpec;
use crate::verify::describe_for_model;
use serde_json::{json, Value};

pub struct RunTests;

impl Tool for RunTests {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "run_tests",
            description:
                "Run the repository's tests (with the test files as in the base commit) and \
                get pass or fail, counts where known, the failing tests and the output's tail.",
            input_schema: json!({"type": "object", "properties": {}}),
        }
    }

    fn label(&self, _input: &Value) -> String {
        "run_tests".to_string()
    }

    fn run(&self, _input: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolError> {
        let result = ctx.verifier.run()?;
        Ok(ToolOutcome {
            tests: Some(Box::new(result.clone())),
            ..ToolOutcome::ok(describe_for_model(&result), result.summary())
        })
    }
}

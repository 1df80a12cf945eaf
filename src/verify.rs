//! The verifier: the only judge of "done". It runs the tests on the protected files exactly as
//! they are in the base commit, then puts the work tree back to the branch's last commit.

use crate::guard::Protection;
use crate::sandbox::Sandbox;
use crate::testrun::{TestPlan, TestResult};
use crate::workspace::{Workspace, WorkspaceError};
use std::sync::atomic::AtomicBool;

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error("cannot start `{command}`: {source}")]
    Start {
        command: String,
        source: std::io::Error,
    },
}

pub struct Verifier<'a> {
    pub workspace: &'a Workspace,
    pub protection: &'a Protection,
    pub plan: &'a TestPlan,
    pub sandbox: &'a Sandbox,
    pub interrupt: &'a AtomicBool,
}

impl Verifier<'_> {
    pub fn run(&self) -> Result<TestResult, VerifyError> {
        self.workspace.restore_protected(self.protection)?;
        let result = self
            .plan
            .run(self.sandbox, self.interrupt)
            .map_err(|source| VerifyError::Start {
                command: self.plan.label.clone(),
                source,
            })?;
        // Whatever the tests wrote is theirs, not the agent's: it must not reach a commit.
        self.workspace.discard_changes()?;
        Ok(result)
    }
}

/// A test result as the model reads it: the summary, the failing tests, the output's tail.
pub fn describe_for_model(result: &TestResult) -> String {
    let mut text = format!("Tests ({}): {}", result.command, result.summary());
    if !result.failing.is_empty() {
        text.push_str("\nFailing tests:");
        for failure in &result.failing {
            match &failure.detail {
                Some(detail) => text.push_str(&format!("\n- {}: {detail}", failure.name)),
                None => text.push_str(&format!("\n- {}", failure.name)),
            }
        }
    }
    if !result.passed && !result.tail.is_empty() {
        text.push_str(&format!("\nOutput (last lines):\n{}", result.tail));
    }
    text
}

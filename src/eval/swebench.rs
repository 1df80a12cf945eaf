//! `eval import --swe-bench`: a task from a SWE-bench-format instance and a local clone of its
//! repository. The base is `base_commit` with `test_patch` applied; the oracle writes the files
//! `patch` changes; FAIL_TO_PASS and PASS_TO_PASS become the task's required tests.

use super::import::{changes, oracle_script, refuse_nonempty, tree_files, verify, write_task};
use super::task::{RequiredTests, TaskSpec};
use super::EvalError;
use git2::{Diff, Oid, Repository};
use globset::GlobSet;
use serde::{Deserialize, Deserializer};
use std::path::PathBuf;

/// The fields of an instance a task needs; others (hints_text, version, ...) are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct Instance {
    /// The instance's name (`owner__project-1234`); the import prints it.
    pub instance_id: String,
    /// The GitHub repository (`owner/project`), named when `base_commit` is missing from the local
    /// clone; may be absent.
    #[serde(default)]
    pub repo: String,
    /// The commit the task starts from, before `test_patch`.
    pub base_commit: String,
    /// The fix, as a unified diff: what the oracle writes.
    pub patch: String,
    /// The fix's tests, as a unified diff applied to `base_commit` to make the task's base.
    pub test_patch: String,
    /// The issue text: trimmed, the task's prompt.
    pub problem_statement: String,
    /// FAIL_TO_PASS: the tests the fix makes pass; an instance without any is refused.
    #[serde(rename = "FAIL_TO_PASS", default, deserialize_with = "test_list")]
    pub fail_to_pass: Vec<String>,
    /// PASS_TO_PASS: the tests that pass before the fix and must still pass.
    #[serde(rename = "PASS_TO_PASS", default, deserialize_with = "test_list")]
    pub pass_to_pass: Vec<String>,
}

/// Published SWE-bench files hold these lists as JSON strings holding an array; hand-written
/// ones often hold the array itself. Both are accepted.
fn test_list<'de, D: Deserializer<'de>>(de: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum List {
        Array(Vec<String>),
        Encoded(String),
    }
    match List::deserialize(de)? {
        List::Array(names) => Ok(names),
        List::Encoded(text) => serde_json::from_str(&text).map_err(serde::de::Error::custom),
    }
}

/// `agent-git eval import --swe-bench`: make a task of a SWE-bench instance.
pub struct SweBenchRequest {
    /// The instance's JSON file.
    pub instance: PathBuf,
    /// A local clone of the instance's repository, holding `base_commit`.
    pub repo: PathBuf,
    /// The test command, when detection should not choose it.
    pub test_cmd: Option<String>,
    /// The task directory to write: missing or empty, else the import is refused.
    pub out: PathBuf,
}

impl Instance {
    /// Reads the instance at `path`: `EvalError::Io` when the file cannot be read,
    /// `EvalError::Refused` when it holds no instance.
    pub fn read(path: &std::path::Path) -> Result<Instance, EvalError> {
        let text = std::fs::read_to_string(path).map_err(|e| EvalError::io(path, e))?;
        serde_json::from_str(&text).map_err(|e| {
            EvalError::Refused(format!("{}: not a SWE-bench instance: {e}", path.display()))
        })
    }
}

/// Makes the task, or refuses with the reason and writes nothing. Returns the instance id.
pub fn import_instance(
    req: &SweBenchRequest,
    progress: &mut dyn FnMut(&str),
) -> Result<String, EvalError> {
    refuse_nonempty(&req.out)?;
    let instance = Instance::read(&req.instance)?;
    if instance.fail_to_pass.is_empty() {
        return Err(EvalError::Refused(format!(
            "{}: FAIL_TO_PASS is empty; a task needs a test the fix makes pass",
            instance.instance_id
        )));
    }
    let repo = Repository::open(&req.repo).map_err(|e| EvalError::Git(e.to_string()))?;
    let base = repo
        .revparse_single(&instance.base_commit)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| {
            EvalError::Refused(format!(
                "base_commit {} is not in {} ({e}); clone {} there first",
                instance.base_commit,
                req.repo.display(),
                instance.repo
            ))
        })?;
    let with_tests = apply(&repo, base.tree_id(), &instance.test_patch, "test_patch")?;
    let fixed_tree = apply(&repo, with_tests, &instance.patch, "patch")?;
    let (_, code) = changes(&repo, with_tests, fixed_tree, &GlobSet::empty())?;
    if code.is_empty() {
        return Err(EvalError::Refused("the patch changes no files".into()));
    }
    let base_files = tree_files(&repo, with_tests)?;
    let fixed_files = tree_files(&repo, fixed_tree)?;
    let oracle = oracle_script(&code)?;
    verify(req.test_cmd.as_deref(), &base_files, &fixed_files, progress)?;
    let spec = TaskSpec {
        prompt: instance.problem_statement.trim().to_string(),
        test_cmd: req.test_cmd.clone(),
        tags: vec!["imported".into(), "swe-bench".into()],
        required_tests: Some(RequiredTests {
            fail_to_pass: instance.fail_to_pass.clone(),
            pass_to_pass: instance.pass_to_pass.clone(),
        }),
        ..TaskSpec::default()
    };
    write_task(&req.out, &spec, &base_files, &oracle)?;
    Ok(instance.instance_id)
}

/// `tree` with a unified diff applied, by git's own patch code; a diff that does not apply
/// is refused with git's reason.
fn apply(repo: &Repository, tree: Oid, patch: &str, field: &str) -> Result<Oid, EvalError> {
    let refused = |e: git2::Error| EvalError::Refused(format!("the {field} does not apply: {e}"));
    let diff = Diff::from_buffer(patch.as_bytes()).map_err(refused)?;
    let tree = repo
        .find_tree(tree)
        .map_err(|e| EvalError::Git(e.to_string()))?;
    let mut index = repo.apply_to_tree(&tree, &diff, None).map_err(refused)?;
    index
        .write_tree_to(repo)
        .map_err(|e| EvalError::Git(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(lists: &str) -> Instance {
        let text = format!(
            r#"{{"instance_id": "o__p-1", "repo": "o/p", "base_commit": "abc",
                "patch": "", "test_patch": "", "problem_statement": "It breaks.",
                "hints_text": "", {lists}}}"#
        );
        serde_json::from_str(&text).expect("an instance")
    }

    #[test]
    fn test_lists_are_read_as_arrays_or_as_strings_holding_arrays() {
        let arrays = instance(r#""FAIL_TO_PASS": ["a"], "PASS_TO_PASS": []"#);
        let strings = instance(r#""FAIL_TO_PASS": "[\"a\"]", "PASS_TO_PASS": "[]""#);
        assert_eq!(arrays.fail_to_pass, vec!["a".to_string()]);
        assert_eq!(strings.fail_to_pass, arrays.fail_to_pass);
        assert_eq!(strings.pass_to_pass, Vec::<String>::new());
    }

    #[test]
    fn a_string_that_is_not_an_array_is_refused() {
        let text = r#"{"instance_id": "x", "base_commit": "abc", "patch": "",
            "test_patch": "", "problem_statement": "", "FAIL_TO_PASS": "a"}"#;
        assert!(serde_json::from_str::<Instance>(text).is_err());
    }
}

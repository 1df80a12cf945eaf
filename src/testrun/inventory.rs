//! The test inventory: every test the runner named before any change. A `passed` needs each
//! of them to have run and passed (or, if it was skipped then, to be skipped still) in the
//! run that decides, so deselecting, skipping, renaming or deleting a test cannot pass.

use super::{Case, Status, TestResult};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    tests: BTreeMap<String, Status>,
    /// Files or modules that could not even be collected: their tests are unknown, so a skip
    /// of one of them later cannot be told from a dodge.
    uncollected: Vec<String>,
}

impl Inventory {
    /// The inventory of a run before any change; None when it named nothing.
    pub fn of(baseline: &TestResult) -> Option<Self> {
        let cases = baseline.cases.as_ref()?;
        let (errors, tests): (Vec<&Case>, Vec<&Case>) =
            cases.iter().partition(|c| c.status == Status::Error);
        let inventory = Inventory {
            tests: tests.iter().map(|c| (c.name.clone(), c.status)).collect(),
            uncollected: errors.iter().map(|c| c.name.clone()).collect(),
        };
        (!inventory.tests.is_empty() || !inventory.uncollected.is_empty()).then_some(inventory)
    }

    /// How many tests it holds.
    pub fn len(&self) -> usize {
        self.tests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tests.is_empty()
    }

    /// Whether `name` is a test of a file that could not be collected before any change, or
    /// that whole file (`path::test` or `path` for pytest and the built-in runner;
    /// `module.Class.test`, or unittest's `...ModuleSkipped.module` for unittest).
    fn in_uncollected(&self, name: &str) -> bool {
        self.uncollected.iter().any(|file| {
            let module = super::cases::module_of(file);
            name == file
                || name == module
                || name.starts_with(&format!("{file}::"))
                || name.starts_with(&format!("{module}."))
                || name.ends_with(&format!(".{module}"))
        })
    }

    /// The tests of the inventory that `cases` lacks, or shows skipped where they ran before,
    /// and the skipped tests of files that could not be collected before any change. A test
    /// that ran and failed is not vanished: it is failing.
    pub fn vanished(&self, cases: &[Case]) -> Vec<String> {
        let now: BTreeMap<&str, Status> =
            cases.iter().map(|c| (c.name.as_str(), c.status)).collect();
        let mut gone: Vec<String> = self
            .tests
            .iter()
            .filter(|(name, before)| match now.get(name.as_str()) {
                None | Some(Status::Error) => true,
                Some(Status::Skipped) => **before != Status::Skipped,
                Some(Status::Passed | Status::Failed) => false,
            })
            .map(|(name, _)| name.clone())
            .collect();
        gone.extend(
            cases
                .iter()
                .filter(|c| c.status == Status::Skipped && !self.tests.contains_key(&c.name))
                .filter(|c| self.in_uncollected(&c.name))
                .map(|c| c.name.clone()),
        );
        gone
    }

    /// Holds a result to the inventory: what vanished is named, and the verdict is no longer
    /// `passed` if anything did.
    pub fn check(inventory: Option<&Inventory>, result: &mut TestResult) {
        let Some(inventory) = inventory else {
            result.exit_code_only = true;
            return;
        };
        result.exit_code_only = inventory.is_empty();
        if !result.ran || result.timed_out_after.is_some() || result.interrupted {
            return;
        }
        result.vanished = inventory.vanished(result.cases.as_deref().unwrap_or(&[]));
        if !result.vanished.is_empty() {
            result.passed = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testrun::{Ended, TestPlan};
    use std::time::Duration;

    fn case(name: &str, status: Status) -> Case {
        Case {
            name: name.into(),
            status,
        }
    }

    fn result(cases: Option<Vec<Case>>, exit_code: i32) -> TestResult {
        let plan = TestPlan::shell("python3 -m pytest".into(), Duration::from_secs(9));
        let ended = Ended {
            exit_code: Some(exit_code),
            timed_out: false,
            interrupted: false,
        };
        TestResult::read(&plan, "", ended, cases)
    }

    #[test]
    fn a_test_that_is_gone_or_newly_skipped_has_vanished() {
        let baseline = result(
            Some(vec![
                case("t.py::test_add", Status::Failed),
                case("t.py::test_mul", Status::Passed),
                case("t.py::test_win", Status::Skipped),
                case("broken.py", Status::Error),
            ]),
            1,
        );
        let inventory = Inventory::of(&baseline).unwrap();
        assert_eq!(
            inventory.len(),
            3,
            "a file that did not collect is not a test"
        );

        let mut complete = result(
            Some(vec![
                case("t.py::test_add", Status::Passed),
                case("t.py::test_mul", Status::Passed),
                case("t.py::test_win", Status::Skipped),
                case("t.py::test_new", Status::Passed),
            ]),
            0,
        );
        Inventory::check(Some(&inventory), &mut complete);
        assert!(complete.passed);
        assert_eq!(complete.vanished, Vec::<String>::new());

        let mut deselected = result(
            Some(vec![
                case("t.py::test_mul", Status::Passed),
                case("t.py::test_win", Status::Passed),
            ]),
            0,
        );
        Inventory::check(Some(&inventory), &mut deselected);
        assert!(!deselected.passed);
        assert_eq!(deselected.vanished, vec!["t.py::test_add"]);
        assert_eq!(deselected.summary(), "2 passed, 0 failed, 1 vanished");

        let mut skipped = result(
            Some(vec![
                case("t.py::test_add", Status::Skipped),
                case("t.py::test_mul", Status::Passed),
                case("t.py::test_win", Status::Skipped),
            ]),
            0,
        );
        Inventory::check(Some(&inventory), &mut skipped);
        assert_eq!(skipped.vanished, vec!["t.py::test_add"]);

        // A test of a file that did not even load before any change may not be skipped now.
        let mut dodged = result(
            Some(vec![
                case("t.py::test_add", Status::Passed),
                case("t.py::test_mul", Status::Passed),
                case("t.py::test_win", Status::Skipped),
                case("broken.py::test_x", Status::Skipped),
                case("broken.py::test_y", Status::Passed),
                case("broken.py", Status::Skipped),
            ]),
            0,
        );
        Inventory::check(Some(&inventory), &mut dodged);
        assert_eq!(dodged.vanished, vec!["broken.py::test_x", "broken.py"]);

        let mut nameless = result(None, 0);
        Inventory::check(Some(&inventory), &mut nameless);
        assert!(!nameless.passed, "no names now, three before: all vanished");
        assert_eq!(nameless.vanished.len(), 3);
    }

    #[test]
    fn without_names_before_any_change_the_exit_code_decides_and_says_so() {
        assert_eq!(Inventory::of(&result(None, 1)), None);
        assert_eq!(Inventory::of(&result(Some(vec![]), 1)), None);
        let broken = result(Some(vec![case("tests/test_calc.py", Status::Error)]), 2);
        let inventory = Inventory::of(&broken).unwrap();
        assert!(inventory.is_empty());
        for dodge in [
            "tests.test_calc.T.test_add",
            "tests/test_calc.py",
            "unittest.loader.ModuleSkipped.tests.test_calc",
        ] {
            let mut skipped = result(Some(vec![case(dodge, Status::Skipped)]), 0);
            Inventory::check(Some(&inventory), &mut skipped);
            assert!(
                !skipped.passed,
                "{dodge}: a skip in a file that did not load is no pass"
            );
        }
        let mut later = result(None, 0);
        Inventory::check(None, &mut later);
        assert!(later.passed);
        assert!(later.exit_code_only);
    }
}

//! The test inventory: every test the runner named, or counted, before any change. A `passed`
//! needs each of them to have run and passed (or, if it was skipped then, to be skipped still)
//! in the run that decides, so deselecting, skipping, renaming or deleting a test cannot pass.
//! Where the output names only failures, the counts must show as many tests run, and no more
//! skipped; where it names and counts nothing, the exit code decides, and the report says so.

use super::{Case, Checked, Counts, Runner, Status, TestResult};
use std::collections::{BTreeMap, BTreeSet};

/// Says which of the given test functions change their parameter ids from run to run.
pub type Unstable<'u> = &'u mut dyn FnMut(&[String]) -> Vec<String>;

/// Whether the test (or file, or module) named `name` is `file` or one of its tests:
/// `path::test` for pytest and the built-in runner; `module.Class.test`, or unittest's
/// `...ModuleSkipped.module` and `..._FailedTest.module`, for unittest.
fn of_file(name: &str, file: &str) -> bool {
    let module = super::cases::module_of(file);
    name == file
        || name == module
        || name.starts_with(&format!("{file}::"))
        || name.starts_with(&format!("{module}."))
        || name.ends_with(&format!(".{module}"))
}

/// The test function of a parametrized test's name: `t.py::test_x` of `t.py::test_x[3-4]`.
fn function_of(name: &str) -> Option<String> {
    name.split_once('[')
        .map(|(function, _)| function.to_string())
}

/// The tests that existed before any change, by name (else by count): every later run must
/// run them all and pass them for `passed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    tests: BTreeMap<String, Status>,
    /// Files or modules that could not even be collected: their tests are unknown, so a skip
    /// of one of them later cannot be told from a dodge.
    uncollected: Vec<String>,
    /// How many tests ran (passed or failed, a file that did not load counting as one) and
    /// how many were skipped; None when the output counted nothing.
    counted: Option<Counts>,
    /// The names came from a report file the runner was asked for: a later run without one
    /// (a runner killed before it wrote it, a report planted or blocked) names nothing.
    by_report: bool,
}

impl Inventory {
    /// The inventory of a run before any change; None when it named and counted nothing.
    pub fn of(baseline: &TestResult) -> Option<Self> {
        let cases = baseline.cases.as_deref().unwrap_or(&[]);
        let (errors, tests): (Vec<&Case>, Vec<&Case>) =
            cases.iter().partition(|c| c.status == Status::Error);
        let inventory = Inventory {
            tests: tests.iter().map(|c| (c.name.clone(), c.status)).collect(),
            uncollected: errors.iter().map(|c| c.name.clone()).collect(),
            counted: baseline
                .counts
                .filter(|c| c.passed + c.failed + c.skipped > 0),
            by_report: baseline.named_by_report,
        };
        let empty = inventory.tests.is_empty()
            && inventory.uncollected.is_empty()
            && inventory.counted.is_none();
        (!empty).then_some(inventory)
    }

    /// How many tests it holds, named or counted.
    pub fn len(&self) -> usize {
        match self.counted {
            _ if !self.tests.is_empty() => self.tests.len(),
            Some(c) => (c.passed + c.failed + c.skipped) as usize,
            None => 0,
        }
    }

    /// Whether it holds no test.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every name it holds: the tests, and the files or modules that did not load.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tests
            .keys()
            .chain(self.uncollected.iter())
            .map(String::as_str)
    }

    /// The Python test files of `files` none of whose tests it names (`path::test` for pytest
    /// and the built-in runner, `module.Class.test` for unittest). Empty when it names none.
    pub fn python_files_not_run<'f>(&self, files: &'f [String]) -> Vec<&'f str> {
        if self.tests.is_empty() && self.uncollected.is_empty() {
            return Vec::new();
        }
        files
            .iter()
            .filter(|path| !self.names().any(|name| of_file(name, path)))
            .map(String::as_str)
            .collect()
    }

    /// How later runs are held to it, at best: by name when it names tests, else by count.
    pub fn method(&self) -> Checked {
        match self.counted {
            _ if !self.tests.is_empty() => Checked::ByName,
            Some(c) if c.passed + c.failed > 0 => Checked::ByCount,
            _ => Checked::ByExitCode,
        }
    }

    /// Whether `name` is a test of a file that could not be collected before any change, or
    /// that whole file (`path::test` or `path` for pytest and the built-in runner;
    /// `module.Class.test`, or unittest's `...ModuleSkipped.module` for unittest).
    fn in_uncollected(&self, name: &str) -> bool {
        self.uncollected.iter().any(|file| of_file(name, file))
    }

    /// The tests of the inventory that `cases` lacks, or shows skipped where they ran before,
    /// and the skipped tests of files that could not be collected before any change. A test
    /// that ran and failed is not vanished: it is failing. Also the test functions whose
    /// parameter ids all changed, and whose number of tests did not, that `unstable` confirms
    /// change from run to run of the same tree: matched by count.
    pub fn vanished(&self, cases: &[Case], unstable: Unstable) -> (Vec<String>, Vec<String>) {
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
        let matched = self.matched_by_count(&mut gone, cases, unstable);
        gone.extend(
            cases
                .iter()
                .filter(|c| c.status == Status::Skipped && !self.tests.contains_key(&c.name))
                .filter(|c| self.in_uncollected(&c.name))
                .map(|c| c.name.clone()),
        );
        (gone, matched)
    }

    /// Takes out of `gone` the parametrized tests (`test_x[id]`) of each function none of whose
    /// ids is left (not even skipped) and that ran as many new ids, none skipped, as it lost,
    /// where `unstable` confirms that its ids change from run to run of the same tree (built
    /// from the time or a random seed). Returns those functions.
    fn matched_by_count(
        &self,
        gone: &mut Vec<String>,
        cases: &[Case],
        unstable: Unstable,
    ) -> Vec<String> {
        let lost: BTreeSet<String> = gone.iter().filter_map(|name| function_of(name)).collect();
        let mut candidates = Vec::new();
        for function in lost {
            let in_function = |name: &str| function_of(name).as_deref() == Some(function.as_str());
            let left = cases
                .iter()
                .any(|c| in_function(&c.name) && self.tests.contains_key(&c.name));
            let missing = gone.iter().filter(|n| in_function(n)).count();
            let new: Vec<&Case> = cases
                .iter()
                .filter(|c| in_function(&c.name) && !self.tests.contains_key(&c.name))
                .collect();
            let ran = new
                .iter()
                .all(|c| matches!(c.status, Status::Passed | Status::Failed));
            if !left && new.len() == missing && ran {
                candidates.push(function);
            }
        }
        if candidates.is_empty() {
            return candidates;
        }
        let matched = unstable(&candidates);
        gone.retain(|n| !function_of(n).is_some_and(|f| matched.contains(&f)));
        matched
    }

    /// The parametrized test functions whose ids in `again`, a second run of the tree the
    /// inventory was taken from, are not the inventory's: their ids change from run to run.
    pub fn unstable_functions(&self, again: &[Case]) -> Vec<String> {
        let ids = |names: &mut dyn Iterator<Item = &str>| {
            let mut by_function: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for name in names {
                if let Some(function) = function_of(name) {
                    by_function
                        .entry(function)
                        .or_default()
                        .insert(name.to_string());
                }
            }
            by_function
        };
        let before = ids(&mut self.tests.keys().map(String::as_str));
        let now = ids(&mut again.iter().map(|c| c.name.as_str()));
        before
            .into_iter()
            .filter(|(function, names)| now.get(function) != Some(names))
            .map(|(function, _)| function)
            .collect()
    }

    /// Holds a result to the inventory, by name where both name their tests, else by count:
    /// what vanished is named or counted, and the verdict is no longer `passed` if anything
    /// did.
    pub fn check(inventory: Option<&Inventory>, result: &mut TestResult) {
        Inventory::check_with(inventory, result, &mut |_| Vec::new());
    }

    /// `check`, where `unstable` says which of the test functions whose parameter ids all
    /// changed change them from run to run of the same tree: those are matched by count.
    pub fn check_with(inventory: Option<&Inventory>, result: &mut TestResult, unstable: Unstable) {
        let Some(inventory) = inventory else {
            result.checked = Checked::ByExitCode;
            return;
        };
        result.checked = inventory.method();
        if !result.ran || result.timed_out_after.is_some() || result.interrupted {
            return;
        }
        let named = !inventory.tests.is_empty();
        // Names read from the output do not stand in for the report the inventory came from.
        let names_now = result
            .cases
            .as_ref()
            .filter(|_| result.named_by_report || !inventory.by_report);
        match (names_now, result.counts) {
            (Some(cases), _) if named => {
                (result.vanished, result.matched_by_count) = inventory.vanished(cases, unstable);
            }
            // Named before, by a report or in full, and not now: every test is unaccounted for.
            (None, counts) if named && (inventory.by_report || counts.is_none()) => {
                result.vanished = inventory.tests.keys().cloned().collect();
            }
            // An unknown command's counts were a line it printed: one it need not print again.
            (None, None) if result.runner == Runner::Other => {
                result.checked = Checked::ByExitCode;
            }
            (cases, now) => {
                if let Some(cases) = cases {
                    // A skip in a file that did not load before any change is still a dodge.
                    result.vanished = inventory.vanished(cases, &mut |_| Vec::new()).0;
                }
                if result.checked == Checked::ByName {
                    result.checked = Checked::ByCount;
                }
                let before = inventory.counted.unwrap_or_default();
                result.vanished_uncounted = uncounted(before, now);
            }
        }
        if result.vanished_count() > 0 {
            result.passed = false;
        }
    }
}

/// How many tests counted before any change did not run now, or how many more were skipped,
/// whichever is more; all of them when nothing was counted now.
fn uncounted(before: Counts, now: Option<Counts>) -> u32 {
    let ran_before = before.passed + before.failed;
    let Some(now) = now else {
        return ran_before;
    };
    let missing = ran_before.saturating_sub(now.passed + now.failed);
    let newly_skipped = now.skipped.saturating_sub(before.skipped);
    missing.max(newly_skipped)
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
        assert_eq!(
            inventory.method(),
            Checked::ByCount,
            "a file that did not load counts as one test"
        );
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
        assert!(later.exit_code_only());
    }

    /// A run of `python3 -m unittest` (no -v) that printed `output` and exited `exit_code`.
    fn unittest_run(output: &str, exit_code: i32) -> TestResult {
        let plan = TestPlan::shell("python3 -m unittest".into(), Duration::from_secs(9));
        let ended = Ended {
            exit_code: Some(exit_code),
            timed_out: false,
            interrupted: false,
        };
        TestResult::read(&plan, output, ended, None)
    }

    const ONE_FAILS: &str =
        "F\n======================================================================\n\
        FAIL: test_add (test_calc.TestAdd.test_add)\n------------------------------------------\n\
        AssertionError: -1 != 5\n\n----------------------------------------------------------\n\
        Ran 1 test in 0.000s\n\nFAILED (failures=1)\n";

    #[test]
    fn a_runner_that_names_only_failures_is_held_to_its_counts() {
        // Before any change the one test fails, so it is named; after the fix nothing is.
        let inventory = Inventory::of(&unittest_run(ONE_FAILS, 1)).unwrap();
        assert_eq!(inventory.method(), Checked::ByName);
        let mut fixed = unittest_run(".\n------\nRan 1 test in 0.000s\n\nOK\n", 0);
        Inventory::check(Some(&inventory), &mut fixed);
        assert!(fixed.passed, "a correct fix passes: {:?}", fixed.vanished);
        assert_eq!(fixed.checked, Checked::ByCount);

        let mut dodged = unittest_run("s\n------\nRan 1 test in 0.000s\n\nOK (skipped=1)\n", 0);
        Inventory::check(Some(&inventory), &mut dodged);
        assert!(!dodged.passed, "a test skipped now is no pass");
        assert_eq!(
            dodged.summary(),
            "0 passed, 0 failed, 1 skipped, 1 vanished"
        );

        let mut none_ran = unittest_run("\n------\nRan 0 tests in 0.000s\n\nOK\n", 0);
        Inventory::check(Some(&inventory), &mut none_ran);
        assert!(!none_ran.passed);
        assert_eq!(none_ran.vanished_uncounted, 1);
    }

    #[test]
    fn counts_alone_make_an_inventory_that_catches_a_missing_or_skipped_test() {
        let two = "F.\n=====\nFAIL: test_add (t.T.test_add)\n-----\nAssertionError\n\n-----\n\
            Ran 2 tests in 0.001s\n\nFAILED (failures=1)\n";
        let baseline = unittest_run(two, 1);
        assert_eq!(baseline.cases, None, "one of two named: not every test");
        let inventory = Inventory::of(&baseline).unwrap();
        assert_eq!((inventory.method(), inventory.len()), (Checked::ByCount, 2));
        let mut both = unittest_run("..\n-----\nRan 2 tests in 0.001s\n\nOK\n", 0);
        Inventory::check(Some(&inventory), &mut both);
        assert!(both.passed);
        let mut one = unittest_run(".\n-----\nRan 1 test in 0.001s\n\nOK\n", 0);
        Inventory::check(Some(&inventory), &mut one);
        assert!(!one.passed);
        assert_eq!(one.summary(), "1 passed, 0 failed, 1 vanished");
        let mut skip = unittest_run(".s\n-----\nRan 2 tests in 0.001s\n\nOK (skipped=1)\n", 0);
        Inventory::check(Some(&inventory), &mut skip);
        assert!(!skip.passed);
        let mut silent = unittest_run("", 0);
        Inventory::check(Some(&inventory), &mut silent);
        assert!(!silent.passed, "counted before, nothing now: all vanished");
    }

    #[test]
    fn parameter_ids_that_change_from_run_to_run_are_matched_by_count() {
        let baseline = result(
            Some(vec![
                case("t.py::test_now[1764000001]", Status::Failed),
                case("t.py::test_now[1764000002]", Status::Failed),
                case("t.py::test_add", Status::Failed),
            ]),
            1,
        );
        let inventory = Inventory::of(&baseline).unwrap();
        let run_confirmed = |cases, confirmed: bool| {
            let mut now = result(Some(cases), 0);
            let mut unstable = |functions: &[String]| match confirmed {
                true => functions.to_vec(),
                false => Vec::new(),
            };
            Inventory::check_with(Some(&inventory), &mut now, &mut unstable);
            now
        };
        let run = |cases| run_confirmed(cases, true);
        let later = run(vec![
            case("t.py::test_now[1764000091]", Status::Passed),
            case("t.py::test_now[1764000092]", Status::Passed),
            case("t.py::test_add", Status::Passed),
        ]);
        assert!(later.passed, "{:?}", later.vanished);
        assert_eq!(later.matched_by_count, vec!["t.py::test_now"]);
        let fewer = run(vec![
            case("t.py::test_now[1764000091]", Status::Passed),
            case("t.py::test_add", Status::Passed),
        ]);
        assert!(!fewer.passed, "one id fewer is a vanished test");
        let skipped = run(vec![
            case("t.py::test_now[1764000091]", Status::Passed),
            case("t.py::test_now[1764000092]", Status::Skipped),
            case("t.py::test_add", Status::Passed),
        ]);
        assert!(!skipped.passed, "a new id that was skipped is not a match");
        let one_kept = run(vec![
            case("t.py::test_now[1764000001]", Status::Skipped),
            case("t.py::test_now[1764000092]", Status::Passed),
            case("t.py::test_add", Status::Passed),
        ]);
        assert!(
            !one_kept.passed,
            "an id that is still there, skipped, is no drift"
        );
        let stable = run_confirmed(
            vec![
                case("t.py::test_now[1764000091]", Status::Passed),
                case("t.py::test_now[1764000092]", Status::Passed),
                case("t.py::test_add", Status::Passed),
            ],
            false,
        );
        assert!(
            !stable.passed,
            "ids that a second run of the base keeps are other tests now"
        );
        assert_eq!(stable.vanished.len(), 2);
        let again = [
            case("t.py::test_now[1764000051]", Status::Failed),
            case("t.py::test_now[1764000052]", Status::Failed),
            case("t.py::test_add", Status::Failed),
        ];
        assert_eq!(inventory.unstable_functions(&again), vec!["t.py::test_now"]);
        assert_eq!(
            inventory.unstable_functions(&baseline.cases.unwrap()),
            Vec::<String>::new()
        );
    }
}

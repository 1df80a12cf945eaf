"""agent-git's built-in test runner: needs only Python's standard library.

Default mode: finds test_*.py files under the current directory and runs their test*
functions and the tests of their unittest.TestCase classes. Prints one "path::name STATUS"
line per test, then each failure in full, then "FAILED path::name - why" lines and a final
"N passed, M failed" line.

--unittest: what `python3 -m unittest discover` runs (so load_tests is honoured), printed
as `python3 -m unittest -v` prints it, then the same summary lines, named by unittest ids.

When AGENT_GIT_RESULTS names a file, the results are written there as JSON:
{"tests": [{"name": "test_calc.py::test_add", "status": "passed"}]}, where status is one
of passed, failed, skipped, error (a test file that could not be imported).

Exit status: 0 when every test passed (or was skipped), 1 when any failed, 5 when there
were no tests.
"""
import importlib.util
import inspect
import json
import os
import sys
import traceback
import unittest

RUNNER = os.path.abspath(__file__)
UNITTEST_DIR = os.path.dirname(os.path.abspath(unittest.__file__))
SKIP_DIRS = {".git", "node_modules", "venv", ".venv", "__pycache__", "build", "dist"}
SEVERITY = {"skipped": 0, "passed": 1, "failed": 2, "error": 3}
PROGRESS_WORD = {"passed": "PASSED", "failed": "FAILED", "skipped": "SKIPPED", "error": "ERROR"}
FAILED_IMPORT = "unittest.loader._FailedTest."
NOT_RUN = "did not run: a class or module fixture failed"
NO_TESTS = 5


class Outcomes:
    """Every test's status in the order first seen; the worst report of a test wins."""

    def __init__(self):
        self.status = {}
        self.owners = {}
        self.skipped_owners = set()
        self.problems = []

    def expect(self, name, owners=()):
        self.status.setdefault(name, None)
        self.owners[name] = owners

    def record(self, name, status):
        old = self.status.get(name)
        if old is None or SEVERITY[status] > SEVERITY[old]:
            self.status[name] = status

    def problem(self, name, status, why, details, label=None):
        self.record(name, status)
        self.problems.append((name, why, details, label or name))

    def final(self):
        """Tests that never reported were cut off by a fixture: skipped with it, else failed."""
        return {
            name: status or self._unreported(name) for name, status in self.status.items()
        }

    def _unreported(self, name):
        skipped = any(owner in self.skipped_owners for owner in self.owners.get(name, ()))
        return "skipped" if skipped else "failed"


def keep_frame(filename):
    """Frames a reader wants: not the runner's own, nor unittest's or importlib's plumbing."""
    if filename.startswith("<frozen importlib"):
        return False
    path = os.path.abspath(filename)
    return path != RUNNER and not path.startswith(UNITTEST_DIR + os.sep)


def trimmed(exc_type, exc, tb):
    """The exception with its traceback (and those chained to it) cut to the frames kept."""
    top = traceback.TracebackException(exc_type, exc, tb)
    pending, seen = [top], set()
    while pending:
        te = pending.pop()
        if te is None or id(te) in seen:
            continue
        seen.add(id(te))
        te.stack = traceback.StackSummary.from_list([f for f in te.stack if keep_frame(f.filename)])
        pending += [te.__cause__, te.__context__]
    return top


def bare_assert_locals(exc, tb):
    """For an assert without a message, the failing frame's variables: the values it compared."""
    if not isinstance(exc, AssertionError) or str(exc).strip():
        return ""
    frames = [f for f, _ in traceback.walk_tb(tb) if keep_frame(f.f_code.co_filename)]
    if not frames:
        return ""
    shown = [
        f"    {name} = {short_repr(value)}\n"
        for name, value in frames[-1].f_locals.items()
        if not name.startswith("__") and not inspect.ismodule(value)
        and not inspect.isroutine(value) and not inspect.isclass(value)
    ]
    return f"Local variables in {frames[-1].f_code.co_name}:\n" + "".join(shown) if shown else ""


def short_repr(value, limit=200):
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not hide the failure itself
        text = f"<repr failed: {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(err):
    """(one line saying why, the failure in full) for an exc_info triple."""
    exc_type, exc, tb = err
    te = trimmed(exc_type, exc, tb)
    details = "".join(te.format()) + bare_assert_locals(exc, tb)
    message = str(exc).strip()
    if not message and te.stack:  # a bare assert: the line that failed says it best
        message = (te.stack[-1].line or "").strip()
    if message:
        return f"{exc_type.__name__}: {message.splitlines()[0]}", details
    return exc_type.__name__, details


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else text


def fixture_holder(test):
    """(method, owner) of a setUpClass/setUpModule-style error unittest reports as a test."""
    if type(test).__name__ != "_ErrorHolder":
        return None
    method, _, owner = test.description.partition(" (")
    return method, owner.rstrip(")")


def real_test(test):
    return getattr(test, "test_case", test) if type(test).__name__ == "_SubTest" else test


def owners_of(test):
    cls = type(test)
    return (cls.__module__, f"{cls.__module__}.{cls.__qualname__}")


def unittest_name(test):
    """(name, forced status): the unittest id; a module that failed to import by its name."""
    test = real_test(test)
    holder = fixture_holder(test)
    if holder:
        method, owner = holder
        return f"{owner}.{method}", "error"
    test_id = test.id()
    if test_id.startswith(FAILED_IMPORT):
        return test_id[len(FAILED_IMPORT):], "error"
    return test_id, None


def default_namer(path, module_name):
    """Names as pytest's node ids: path::Class::method (path::Class::setUpClass for fixtures)."""

    def name(test):
        test = real_test(test)
        holder = fixture_holder(test)
        if holder:
            method, owner = holder
            classes = owner[len(module_name) + 1:].split(".") if owner != module_name else []
            return "::".join([path, *classes, method]), "error"
        return f"{path}::{type(test).__name__}::{test._testMethodName}", None

    return name


class Recording:
    """Records what unittest reports of each test (a subtest's failure fails its test)."""

    def start_recording(self, outcomes, namer, progress):
        self.outcomes, self.namer, self.progress = outcomes, namer, progress

    def _record(self, test, status):
        name, _ = self.namer(test)  # a forced status is for problems; a skip stays a skip
        self.outcomes.record(name, status)
        holder = fixture_holder(real_test(test))
        if holder and status == "skipped":
            self.outcomes.skipped_owners.add(holder[1])
        if holder:
            self._show(name)

    def _problem(self, test, status, err):
        name, forced = self.namer(test)
        why, details = describe(err)
        label = name
        if test is not real_test(test):
            why = f"{test._subDescription()} {why}"
            label = f"{name} {test._subDescription()}"
        if real_test(test).id().startswith(FAILED_IMPORT):
            why = last_line(str(err[1]))  # the import error, not unittest's wrapper
        self.outcomes.problem(name, forced or status, why, details, label)
        if fixture_holder(real_test(test)):
            self._show(name)

    def _show(self, name):
        if self.progress:
            show(name, self.outcomes)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._problem(test, "failed", err)

    def addError(self, test, err):
        super().addError(test, err)
        self._problem(test, "failed", err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "skipped")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        name, _ = self.namer(test)
        self.outcomes.problem(name, "failed", "unexpected success", "")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._problem(subtest, "failed", err)

    def stopTest(self, test):
        super().stopTest(test)
        self._show(self.namer(test)[0])


class QuietRecorder(Recording, unittest.TestResult):
    pass


class TextRecorder(Recording, unittest.TextTestResult):
    pass


def walk(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from walk(test)
        else:
            yield test


def test_files(root):
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("test_") and name.endswith(".py"):
                found.append(os.path.relpath(os.path.join(dirpath, name), root))
    return found


def load(path):
    directory = os.path.dirname(os.path.abspath(path))
    for entry in (os.getcwd(), directory):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    name = os.path.splitext(path)[0].replace(os.sep, ".")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def is_test_case_class(obj):
    return inspect.isclass(obj) and issubclass(obj, unittest.TestCase)


def defined_here(obj, module):
    return getattr(obj, "__module__", None) == module.__name__


def show(name, outcomes):
    print(f"{name} {PROGRESS_WORD[outcomes.status[name]]}", flush=True)


def run_function(name, func, outcomes):
    try:
        func()
    except unittest.SkipTest:
        outcomes.record(name, "skipped")
    except (Exception, SystemExit):
        outcomes.problem(name, "failed", *describe(sys.exc_info()))
    else:
        outcomes.record(name, "passed")
    show(name, outcomes)


def run_file(path, outcomes, loader):
    try:
        module = load(path)
    except unittest.SkipTest:
        outcomes.record(path, "skipped")
        show(path, outcomes)
        return
    except (Exception, SystemExit):  # a file that cannot be imported fails as a whole
        outcomes.problem(path, "error", *describe(sys.exc_info()))
        show(path, outcomes)
        return
    suite = unittest.TestSuite()
    for name, obj in list(vars(module).items()):
        if name.startswith("test") and inspect.isfunction(obj) and defined_here(obj, module):
            run_function(f"{path}::{name}", obj, outcomes)
        elif is_test_case_class(obj) and defined_here(obj, module):
            suite.addTests(loader.loadTestsFromTestCase(obj))
    namer = default_namer(path, module.__name__)
    for test in walk(suite):
        outcomes.expect(namer(test)[0], owners_of(test))
    result = QuietRecorder()
    result.start_recording(outcomes, namer, progress=True)
    suite.run(result)


def run_default(outcomes):
    root = os.getcwd()
    loader = unittest.TestLoader()
    for path in test_files("."):
        run_file(path, outcomes, loader)
        os.chdir(root)  # a test that changed directory must not move the next file
    print_failures(outcomes)


def run_unittest(outcomes):
    loader = unittest.TestLoader()
    suite = loader.discover(".", pattern="test*.py", top_level_dir=".")
    for test in walk(suite):
        outcomes.expect(unittest_name(test)[0], owners_of(test))

    def recorder(*args, **kwargs):
        result = TextRecorder(*args, **kwargs)
        result.start_recording(outcomes, unittest_name, progress=False)
        return result

    unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=recorder).run(suite)


def print_failures(outcomes):
    shown = [(label, details) for _, _, details, label in outcomes.problems if details]
    if shown:
        print("\n" + " FAILURES ".center(70, "="))
    for label, details in shown:
        print(f" {label} ".center(70, "_"))
        print(details.rstrip("\n"))


def summarize(outcomes):
    """The FAILED/ERROR lines other tools read, the counts, and the exit status."""
    final = outcomes.final()
    why = {}
    for name, reason, _, _ in outcomes.problems:
        why.setdefault(name, reason)
    for name, status in final.items():
        if status in ("failed", "error"):
            print(f"{PROGRESS_WORD[status]} {name} - {why.get(name, NOT_RUN)}")
    counts = {status: list(final.values()).count(status) for status in SEVERITY}
    if counts["skipped"]:
        print(f"{counts['skipped']} skipped")
    print(f"{counts['passed']} passed, {counts['failed'] + counts['error']} failed", flush=True)
    if not final:
        return NO_TESTS
    return 1 if counts["failed"] or counts["error"] else 0


def write_results(path, outcomes):
    tests = [{"name": name, "status": status} for name, status in outcomes.final().items()]
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"tests": tests}, out)
        out.write("\n")


def isolate_imports():
    """Imports resolve as under `python3 -m`: from the project, never from the runner's folder."""
    here = os.path.dirname(RUNNER)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path.insert(0, os.getcwd())
    sys.dont_write_bytecode = True  # leave no __pycache__ in the project


def main(argv):
    results = os.environ.get("AGENT_GIT_RESULTS")
    results = os.path.abspath(results) if results else None
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # keep our lines in order with stderr's
    isolate_imports()
    outcomes = Outcomes()
    if "--unittest" in argv:
        run_unittest(outcomes)
    else:
        run_default(outcomes)
    status = summarize(outcomes)
    if results:
        try:
            write_results(results, outcomes)
        except OSError as exc:  # the printed lines still tell what ran
            print(f"agent-git runner: cannot write {results}: {exc}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

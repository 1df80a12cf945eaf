"""agent-git's built-in test runner: needs only Python's standard library.

Default mode: runs what pytest would for the conventions that need no pytest: files
test_*.py and *_test.py in the folders pytest enters, imported as pytest's default import
mode (prepend) imports them; their test* functions, the tests of their unittest.TestCase
classes, and of their Test* classes without __init__ (one instance per test); pytest's xunit
setups (setup_module, setup_function, setup_class, setup_method and their teardowns, and a
package's setup_module in its __init__.py); the doctest files test*.txt, each one test, as
pytest's doctest plugin runs them. Tests are named by pytest's node ids. Prints one
"path::name STATUS" line per test, then each failure in full, then "FAILED path::name - why"
lines (ERROR when a setup or teardown failed) and a final "N passed, M failed" line.

What only pytest can honour (pytest settings, a conftest.py, a test file importing pytest or
naming pytest_plugins, a test taking fixture arguments, a doctest file using getfixture or
pytest's option flags) stops the run before any test runs: one line
"agent-git-runner: needs pytest: WHAT", no results file, exit status 5.

--unittest: what `python3 -m unittest discover` runs (so load_tests is honoured), printed
as `python3 -m unittest -v` prints it, then the same summary lines, named by unittest ids.

When AGENT_GIT_RESULTS names a file, the results are written there as JSON:
{"tests": [{"name": "test_calc.py::test_add", "status": "passed"}]}, where status is one
of passed, failed, skipped, error (a test file that could not be imported).

Exit status: 0 when every test passed (or was skipped), 1 when any failed, 5 when there
were no tests or they need pytest.
"""
import ast
import fnmatch
import functools
import importlib
import inspect
import io
import json
import logging
import os
import sys
import traceback
import unittest

RUNNER = os.path.abspath(__file__)
UNITTEST_DIR = os.path.dirname(os.path.abspath(unittest.__file__))
IMPORTLIB = os.path.abspath(importlib.__file__)
DOCTEST = os.path.join(os.path.dirname(UNITTEST_DIR), "doctest.py")  # imported only when needed
SEVERITY = {"skipped": 0, "passed": 1, "failed": 2, "error": 3}
PROGRESS_WORD = {"passed": "PASSED", "failed": "FAILED", "skipped": "SKIPPED", "error": "ERROR"}
FAILED_IMPORT = "unittest.loader._FailedTest."
NOT_RUN = "did not run: a class or module fixture failed"
NO_TESTS = 5
NEEDS_PYTEST = "agent-git-runner: needs pytest: "
NEEDS_PYTEST_EXIT = 5
# pytest's defaults: python_files, --doctest-glob, norecursedirs (and __pycache__), and where
# it reads settings.
TEST_FILES = ("test_*.py", "*_test.py")
DOCTEST_FILES = ("test*.txt",)
NOT_ENTERED = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}",
               "__pycache__")
PYTEST_SETTINGS = (
    ("pytest.ini", "[pytest]"),
    (".pytest.ini", "[pytest]"),
    ("pyproject.toml", "[tool.pytest.ini_options]"),
    ("pyproject.toml", "[tool.pytest]"),
    ("tox.ini", "[pytest]"),
    ("setup.cfg", "[tool:pytest]"),
)
ASYNC_TEST = "async def functions are not natively supported (pytest fails them without a plugin)"
# The doctest option flags pytest adds (its doctest files may use them; plain doctest has none).
PYTEST_DOCTEST_FLAGS = ("ALLOW_UNICODE", "ALLOW_BYTES", "NUMBER")


class NeedsPytest(Exception):
    """Something in the tests that only pytest honours: running them here could lie."""


class CollectError(Exception):
    """What makes pytest fail a whole file as it collects it: why in a line, and in full."""

    def __init__(self, why, details=None):
        super().__init__(why)
        self.details = details or f"{why}\n"


class Outcomes:
    """Every test's status in the order first seen; the worst report of a test wins."""

    def __init__(self):
        self.status = {}
        self.owners = {}
        self.skipped_owners = set()
        self.problems = []
        self.at_fixture = set()  # failed in a setup or teardown: pytest's ERROR, not FAILED

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

    def word(self, name, status):
        if status == "failed" and name in self.at_fixture:
            return "ERROR"
        return PROGRESS_WORD[status]

    def final(self):
        """Tests that never reported were cut off by a fixture: skipped with it, else failed."""
        return {
            name: status or self._unreported(name) for name, status in self.status.items()
        }

    def _unreported(self, name):
        skipped = any(owner in self.skipped_owners for owner in self.owners.get(name, ()))
        return "skipped" if skipped else "failed"


def keep_frame(filename):
    """Frames a reader wants: not the runner's own, nor unittest's, doctest's or importlib's
    plumbing."""
    if filename.startswith("<frozen importlib"):
        return False
    path = os.path.abspath(filename)
    return path not in (RUNNER, IMPORTLIB, DOCTEST) and not path.startswith(UNITTEST_DIR + os.sep)


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


def show(name, outcomes):
    status = outcomes.status[name] or "failed"
    print(f"{name} {outcomes.word(name, status)}", flush=True)


def warn(text):
    print(f"agent-git-runner: warning: {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Default mode, part 1: what pytest would collect.


def entered(path, name):
    """Whether pytest recurses into a folder: not one of its norecursedirs, nor a venv."""
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in NOT_ENTERED):
        return False
    venv = ("pyvenv.cfg",), ("conda-meta", "history")
    return not any(os.path.isfile(os.path.join(path, *marker)) for marker in venv)


def tree(root):
    """(test files, conftest.py files) in the folders pytest enters, in pytest's order."""
    tests, conftests, seen = [], [], set()

    def visit(folder):
        real = os.path.realpath(folder)
        if real in seen:  # pytest follows folder links; a loop must not hang us
            return
        seen.add(real)
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            return
        for entry in entries:
            if entry.is_dir():
                if entered(entry.path, entry.name):
                    visit(entry.path)
            elif entry.name == "conftest.py":
                conftests.append(os.path.relpath(entry.path, root))
            elif is_doctest_file(entry.name) or any(
                fnmatch.fnmatchcase(entry.name, pattern) for pattern in TEST_FILES
            ):
                tests.append(os.path.relpath(entry.path, root))

    visit(root)
    return tests, conftests


def has_settings(path, header):
    """Whether a config file has the pytest section `header` with a setting in it."""
    try:
        with open(path, encoding="utf-8", errors="replace") as config:
            lines = config.read().splitlines()
    except OSError:
        return False
    inside = False
    for line in (raw.strip() for raw in lines):
        if line.startswith("[") and not line.startswith("[["):
            inside = line.split("#")[0].strip() == header
        elif inside and line and not line.startswith(("#", ";")):
            return True
    return False


def is_pytest_module(name):
    top = (name or "").split(".")[0]
    return top in ("pytest", "_pytest") or top.startswith("pytest_")


def is_doctest_file(name):
    return any(fnmatch.fnmatchcase(os.path.basename(name), pattern) for pattern in DOCTEST_FILES)


def imports_pytest(node):
    """Whether an ast node imports pytest (or a plugin of it)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and not node.level:
        names = [node.module]
    else:
        return False
    return any(is_pytest_module(name) for name in names)


def pytest_import_line(path):
    """The line where a test file imports pytest (or a plugin of it), or None."""
    try:
        with open(path, "rb") as source:
            parsed = ast.parse(source.read(), path)
    except (OSError, SyntaxError, ValueError):  # importing it will report what is wrong
        return None
    for node in ast.walk(parsed):
        if imports_pytest(node):
            return node.lineno
    return None


def read_doctest(full):
    """A doctest file as pytest's doctest plugin reads it: UTF-8, run as __main__, named by
    its file name; pytest's own option flags parse, as under pytest."""
    import doctest  # only for a doctest file: pytest imports doctest no sooner either

    for flag in PYTEST_DOCTEST_FLAGS:
        doctest.register_optionflag(flag)
    with open(full, encoding="utf-8") as source:
        text = source.read()
    globs = {"__name__": "__main__"}
    return doctest.DocTestParser().get_doctest(text, globs, os.path.basename(full), full, 0)


def doctest_needs_pytest(path):
    """What in a doctest file only pytest gives: its getfixture, its option flags, pytest."""
    import doctest

    try:
        test = read_doctest(os.path.abspath(path))
    except (OSError, ValueError):  # collecting it will report what is wrong
        return None
    pytest_flags = [doctest.OPTIONFLAGS_BY_NAME[flag] for flag in PYTEST_DOCTEST_FLAGS]
    for example in test.examples:
        line = test.lineno + example.lineno + 1
        if any(example.options.get(flag) for flag in pytest_flags):
            return f"{path} uses a doctest option flag of pytest's (line {line})"
        try:
            nodes = list(ast.walk(ast.parse(example.source)))
        except (SyntaxError, ValueError):  # running it will report what is wrong
            continue
        if any(imports_pytest(node) for node in nodes):
            return f"{path} imports pytest (line {line})"
        if any(isinstance(node, ast.Name) and node.id == "getfixture" for node in nodes):
            return f"{path} calls getfixture, which pytest gives its doctests (line {line})"
    return None


def needs_pytest_unseen(files, conftests):
    """What in the tree only pytest honours, found without running any of its code."""
    for config, header in PYTEST_SETTINGS:
        if has_settings(config, header):
            return f"{config} has pytest settings ({header})"
    if conftests:
        return f"{conftests[0]}: pytest loads conftest.py files (fixtures, hooks, plugins)"
    for path in files:
        if is_doctest_file(path):
            why = doctest_needs_pytest(path)
        else:
            line = pytest_import_line(path)
            why = line and f"{path} imports pytest (line {line})"
        if why:
            return why
    return None


def root_and_name(full):
    """Where pytest's default import mode (prepend) imports a file from, and its module name:
    from above its outermost package, dotted; else from its own folder, by its bare name."""
    top, folder = None, os.path.dirname(full)
    while (os.path.isfile(os.path.join(folder, "__init__.py"))
           and os.path.basename(folder).isidentifier()):
        top, folder = folder, os.path.dirname(folder)
    if top is None:
        return os.path.dirname(full), os.path.splitext(os.path.basename(full))[0]
    names = os.path.splitext(os.path.relpath(full, os.path.dirname(top)))[0].split(os.sep)
    if names[-1] == "__init__":
        names.pop()
    return os.path.dirname(top), ".".join(names)


def import_path(full):
    """The module at `full`, imported as pytest's prepend mode does: its root put first on
    sys.path (for good), a real import by name, and the same name from elsewhere refused."""
    root, name = root_and_name(full)
    if sys.path[0] != root:  # even when it is further down: pytest puts it first again
        sys.path.insert(0, root)
    importlib.import_module(name)
    module = sys.modules[name]
    if os.path.basename(full) == "__init__.py":
        return module
    if os.environ.get("PY_IGNORE_IMPORTMISMATCH", "") == "1":  # pytest's own way out
        return module
    found = getattr(module, "__file__", None)
    if found is None or not same_file(full, module_source(found)):
        raise import_mismatch(name, found, full)
    return module


def module_source(found):
    if found.endswith((".pyc", ".pyo")):
        found = found[:-1]
    return found.removesuffix(os.sep + "__init__.py")


def same_file(one, other):
    try:
        return os.path.samefile(one, other)
    except FileNotFoundError:
        return False


def import_mismatch(name, found, full):
    """pytest's collection error for a second test file of the same module name."""
    details = (
        f"import file mismatch:\nimported module {name!r} has this __file__ attribute:\n"
        f"  {found}\nwhich is not the same as the test file we want to collect:\n  {full}\n"
        "HINT: remove __pycache__ / .pyc files and/or use a unique basename for your test "
        "file modules\n"
    )
    shown = os.path.relpath(found) if found else found
    why = (f"import file mismatch: module {name!r} is already {shown} (test files in folders "
           "without __init__.py need unique basenames)")
    return CollectError(why, details)


def pytest_loaded():
    return any(is_pytest_module(name) for name in list(sys.modules))


def load_test_file(full, label):
    """The module, unless it reaches for pytest through the modules it imports or names
    plugins for pytest to load."""
    before = pytest_loaded()
    try:
        module = import_path(full)
    except ModuleNotFoundError as exc:
        if is_pytest_module(exc.name):
            raise NeedsPytest(f"{label} imports {exc.name} (through the modules it imports)")
        raise
    if not before and pytest_loaded():
        raise NeedsPytest(f"{label} imports pytest (through the modules it imports)")
    if getattr(module, "pytest_plugins", None) is not None:
        raise NeedsPytest(f"{label} names pytest_plugins for pytest to load")
    return module


class Test:
    """A collected test: its node id, the shared setups it runs under (outermost first), and
    how it runs (None for a file whose outcome collecting it decided)."""

    def __init__(self, name, scopes, run):
        self.name, self.scopes, self.run = name, scopes, run


class Scope:
    """A package's, a module's or a class's setups, run before the first of its tests, as
    pytest does: an error in one is each such test's error; its teardowns run after the last."""

    def __init__(self, fixtures):
        self.fixtures, self.owed, self.error, self.told = fixtures, [], None, False

    def open(self):
        self.error = set_up(self.fixtures, self.owed)

    def close(self):
        return tear_down(self.owed)


def collect_all(outcomes):
    """Every test, collected before any runs, as pytest does: a need for pytest found while
    importing the last file still stops the run before the first test."""
    root = os.getcwd()
    files, conftests = tree(".")
    unseen = needs_pytest_unseen(files, conftests)
    if unseen:
        raise NeedsPytest(unseen)
    tests, packages = [], {}
    for path in files:
        tests += collect_file(root, path, outcomes, package_scopes(root, path, packages))
    return tests


def collect_file(root, path, outcomes, scopes):
    full = os.path.join(root, path)
    try:
        if is_doctest_file(path):
            tests = collect_doctest(path, read_doctest(full), scopes)
        else:
            tests = collect_module(path, load_test_file(full, path), scopes)
    except NeedsPytest:
        raise
    except unittest.SkipTest:
        outcomes.record(path, "skipped")
    except CollectError as exc:
        outcomes.problem(path, "error", str(exc), exc.details)
    except (Exception, SystemExit):  # a file that cannot be imported fails as a whole
        outcomes.problem(path, "error", *describe(sys.exc_info()))
    else:
        for test in tests:
            outcomes.expect(test.name)
        return tests
    return [Test(path, [], None)]


def package_scopes(root, path, packages):
    """The setups of the packages a test file is in, outermost first: pytest makes a package
    of each folder with an __init__.py from the root down, whatever is above it."""
    folders = [root]
    for part in os.path.dirname(path).split(os.sep) if os.path.dirname(path) else []:
        folders.append(os.path.join(folders[-1], part))
    scopes = []
    for folder in folders:
        init = os.path.join(folder, "__init__.py")
        if os.path.isfile(init):
            if folder not in packages:
                packages[folder] = Scope(package_fixtures(init, os.path.relpath(init, root)))
            scopes.append(packages[folder])
    return scopes


def package_fixtures(init, label):
    """A package's setup, as pytest's: importing its __init__.py before its first test (for a
    test file outside any package, the first time), then calling its setup_module."""
    box = {}

    def setup():
        box["module"] = load_test_file(init, label)
        module_fixture(box["module"], ("setUpModule", "setup_module"))

    def teardown():
        module_fixture(box["module"], ("tearDownModule", "teardown_module"))

    return [(setup, teardown)]


def module_fixture(module, names):
    func = first_found(module, names)
    if func is not None:
        call_xunit(func, module)


def collect_module(path, module, scopes):
    if not getattr(module, "__test__", True):
        return []
    fixtures = xunit(module, ("setUpModule", "setup_module"),
                     ("tearDownModule", "teardown_module"), module)
    scopes = scopes + [Scope(fixtures)]
    tests = []
    for attr, obj in list(vars(module).items()):  # imported tests too: pytest collects them
        tests += collect_member([path], attr, obj, scopes, [], module)
    return tests


def collect_doctest(path, test, scopes):
    """A doctest file as one test of all its examples (none: no test), as pytest runs it."""
    if not test.examples:
        return []
    name = f"{path}::{test.name}"
    return [Test(name, scopes, lambda outcomes: call_doctest(outcomes, name, test))]


def collect_member(ids, attr, obj, scopes, classes, module):
    """The tests pytest makes of one name of a module or class; `classes` hold it, outermost
    first."""
    if inspect.isclass(obj):
        if is_test_case(obj):
            return collect_test_case(ids + [attr], obj, scopes)
        if attr.startswith("Test") or marked_test(obj):
            return collect_class(ids + [attr], obj, scopes, classes + [obj], module)
        return []
    func = test_function(ids, attr, obj, classes[-1] if classes else None)
    if func is None:
        return []
    name = "::".join(ids + [attr])
    if classes:
        return [method_test(classes, attr, name, scopes)]
    return [function_test(module, func, name, scopes)]


def marked_test(obj):
    """`__test__ = True` makes pytest collect a function or class whatever its name."""
    return getattr(obj, "__test__", False) is True


def is_test_case(cls):
    try:
        return issubclass(cls, unittest.TestCase)
    except TypeError:  # a class with an odd metaclass is no TestCase to pytest either
        return False


def test_function(ids, attr, obj, owner):
    """The function pytest would collect as test `attr`, or None; raises what stops pytest."""
    if not (attr.startswith("test") or marked_test(obj)):
        return None
    inner = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
    if not callable(inner):
        return None
    func = getattr(obj, "__func__", obj)
    if not (inspect.isfunction(func) or inspect.isfunction(real_function(func))):
        warn(f"cannot collect {attr!r} because it is not a function (in {ids[0]})")
        return None
    if not getattr(func, "__test__", True):
        return None
    if inspect.isgeneratorfunction(func):
        raise CollectError(f"'yield' keyword is allowed in fixtures, but not in tests ({attr})")
    wanted = fixture_args(func, owner, isinstance(obj, staticmethod))
    if wanted:
        name = "::".join(ids + [attr])
        raise NeedsPytest(f"{name} takes fixture arguments ({', '.join(wanted)})")
    return func


def real_function(func):
    """Under decorators and partials, as pytest looks for a function."""
    for _ in range(100):
        if isinstance(func, functools.partial):
            func = func.func
        elif callable(getattr(func, "__wrapped__", None)):
            func = func.__wrapped__
        else:
            return func
    return func


def fixture_args(func, owner, static):
    """The arguments pytest fills with fixtures: the ones with no default, past a method's
    self or cls and those that mock.patch passes."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = [p.name for p in params if p.kind in kinds and p.default is p.empty]
    if owner is not None and not static:
        names = names[1:]
    if hasattr(func, "__wrapped__"):
        names = names[mock_patched(func):]
    return names


def mock_patched(func):
    """How many arguments a test's mock.patch decorators pass it."""
    mocks = (sys.modules.get(name) for name in ("unittest.mock", "mock"))
    defaults = [getattr(mock, "DEFAULT", None) for mock in mocks]
    patches = getattr(func, "patchings", None) or ()
    return sum(
        1 for p in patches
        if not getattr(p, "attribute_name", None)
        and any(d is not None and getattr(p, "new", None) is d for d in defaults)
    )


def members(cls):
    """A class's names in pytest's order: inherited ones first, base by base, each once."""
    seen, groups = set(), []
    for klass in cls.__mro__:
        group = [(a, obj) for a, obj in list(vars(klass).items()) if a not in seen]
        seen.update(a for a, _ in group)
        groups.append(group)
    return [member for group in reversed(groups) for member in group]


def collect_class(ids, cls, scopes, classes, module):
    if not getattr(cls, "__test__", True) or inspect.isabstract(cls):
        return []
    for constructor in ("__init__", "__new__"):
        if getattr(cls, constructor, None) != getattr(object, constructor):
            warn(f"cannot collect test class {cls.__name__!r} because it has a {constructor} "
                 f"constructor (from: {'::'.join(ids[:-1])})")  # as pytest warns
            return []
    scopes = scopes + [Scope(xunit(cls, ("setup_class",), ("teardown_class",), cls))]
    tests = []
    for attr, obj in members(cls):
        tests += collect_member(ids, attr, obj, scopes, classes, module)
    return tests


def collect_test_case(ids, cls, scopes):
    """A TestCase's tests as pytest runs them: each on its own instance, by unittest."""
    if not getattr(cls, "__test__", True) or inspect.isabstract(cls):
        return []
    loader = unittest.TestLoader()
    names = [n for n in loader.getTestCaseNames(cls) if getattr(getattr(cls, n), "__test__", True)]
    if not names and getattr(cls, "runTest", None) is not None:
        names = ["runTest"]
    scopes = scopes + [Scope(test_case_class_fixtures(cls))]
    return [test_case_test(cls, n, "::".join(ids + [n]), scopes) for n in names]


# ---------------------------------------------------------------------------------------------
# Default mode, part 2: setups and teardowns, as pytest's xunit fixtures call them.


def xunit(owner, setups, teardowns, arg):
    """A fixture of the first of `setups` and of `teardowns` the owner has, called with `arg`."""
    setup, teardown = first_found(owner, setups), first_found(owner, teardowns)
    if setup is None and teardown is None:
        return []

    def later(func):
        return None if func is None else (lambda: call_xunit(func, arg))

    return [(later(setup), later(teardown))]


def first_found(owner, names):
    for name in names:
        found = getattr(owner, name, None)
        if found is not None:
            return found
    return None


def call_xunit(func, arg):
    """Calls an xunit setup or teardown with `arg` only if it takes an argument, as pytest."""
    code = getattr(func, "__code__", None)
    takes = code.co_argcount - inspect.ismethod(func) if code else 0
    return func(arg) if takes > 0 else func()


def set_up(fixtures, owed):
    """Runs each (setup, teardown)'s setup, owing its teardown; the first error stops it."""
    for setup, teardown in fixtures:
        try:
            if setup is not None:
                setup()
        except NeedsPytest:  # a package's __init__.py can reach for pytest as it is set up
            raise
        except (Exception, SystemExit):
            return sys.exc_info()
        if teardown is not None:
            owed.append(teardown)
    return None


def tear_down(owed):
    """Every teardown owed, last first, whatever the others raise: their errors."""
    errors = []
    while owed:
        try:
            owed.pop()()
        except (Exception, SystemExit):
            errors.append(sys.exc_info())
    return errors


def fixture_failed(outcomes, name, err, when, shown=True):
    """A setup or teardown error, pytest's ERROR on the test; a skip raised there skips it."""
    if isinstance(err[1], unittest.SkipTest) and when == "setup":
        outcomes.record(name, "skipped")
        return
    why, details = describe(err)
    if outcomes.status.get(name) != "failed":  # a test that failed stays FAILED, as in pytest
        outcomes.at_fixture.add(name)
    outcomes.problem(name, "failed", why, details if shown else "", f"ERROR at {when} of {name}")


def run_phases(outcomes, name, fixtures, call):
    """One test's own setups, the test, and the teardowns of the setups that ran."""
    owed = []
    error = set_up(fixtures, owed)
    if error is not None:
        fixture_failed(outcomes, name, error, "setup")
    else:
        call(outcomes, name)
    for error in tear_down(owed):
        fixture_failed(outcomes, name, error, "teardown")


def call_plain(outcomes, name, func):
    """A test function or a plain class's test method, called with no arguments."""
    if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
        outcomes.problem(name, "failed", ASYNC_TEST, ASYNC_TEST + "\n")
        return
    try:
        result = func()
    except unittest.SkipTest:  # pytest skips a test that raises it, TestCase or not
        outcomes.record(name, "skipped")
    except (Exception, SystemExit):
        outcomes.problem(name, "failed", *describe(sys.exc_info()))
    else:
        if inspect.isawaitable(result) or hasattr(result, "__aiter__"):
            getattr(result, "close", lambda: None)()  # never awaited: no warning about it
            outcomes.problem(name, "failed", ASYNC_TEST, ASYNC_TEST + "\n")
        else:
            outcomes.record(name, "passed")


def call_doctest(outcomes, name, test):
    """A doctest file's examples as pytest runs them: ELLIPSIS on, stopping at the first that
    fails; skipped when every example is +SKIP."""
    import doctest

    if all(example.options.get(doctest.SKIP, False) for example in test.examples):
        outcomes.record(name, "skipped")
        return
    try:
        doctest.DebugRunner(verbose=False, optionflags=doctest.ELLIPSIS).run(test)
    except (doctest.DocTestFailure, doctest.UnexpectedException) as failure:
        outcomes.problem(name, "failed", *doctest_failed(failure))
    else:
        outcomes.record(name, "passed")


def doctest_failed(failure):
    """(why, in full) of the doctest example that printed what it should not, or raised."""
    import doctest

    test, example = failure.test, failure.example
    line = test.lineno + example.lineno + 1
    source = "".join(f"    {text}\n" for text in example.source.splitlines())
    header = f'File "{test.filename}", line {line}, in {test.name}\nFailed example:\n{source}'
    if isinstance(failure, doctest.UnexpectedException):
        why, details = describe(failure.exc_info)
        return f"line {line}: {why}", f"{header}Exception raised:\n{details}"
    got = failure.got
    difference = doctest.OutputChecker().output_difference(example, got, doctest.REPORT_UDIFF)
    why = (f"line {line}: {short_repr(example.want.strip(), 80)} expected, "
           f"got {short_repr(got.strip(), 80)}")
    return why, header + difference


def function_test(module, func, name, scopes):
    fixtures = xunit(module, ("setup_function",), ("teardown_function",), func)

    def call(outcomes, name):
        call_plain(outcomes, name, func)

    return Test(name, scopes, lambda outcomes: run_phases(outcomes, name, fixtures, call))


def method_test(classes, attr, name, scopes):
    """A plain class's test: a new instance of it, each class's setup_method (outermost
    first, looked up on that instance, as pytest does), the method."""
    box = {}

    def make():
        box["self"] = classes[-1]()

    fixtures = [(make, None)]
    for level in classes:
        fixtures += method_fixtures(level, box, attr)

    def call(outcomes, name):
        call_plain(outcomes, name, getattr(box["self"], attr))

    return Test(name, scopes, lambda outcomes: run_phases(outcomes, name, fixtures, call))


def method_fixtures(level, box, attr):
    setup = first_found(level, ("setup_method",)) is not None
    teardown = first_found(level, ("teardown_method",)) is not None
    if not (setup or teardown):
        return []

    def later(which):
        return lambda: call_xunit(getattr(box["self"], which), getattr(box["self"], attr))

    return [(later("setup_method") if setup else None,
             later("teardown_method") if teardown else None)]


def test_case_class_fixtures(cls):
    """setUpClass and tearDownClass with the class cleanups, then setup_class and
    teardown_class, which pytest calls for a TestCase too; a skipped class skips its tests."""
    if getattr(cls, "__unittest_skip__", False):
        why = getattr(cls, "__unittest_skip_why__", "")

        def skip():
            raise unittest.SkipTest(why)

        return [(skip, None)]
    own = (lambda: set_up_class(cls), lambda: tear_down_class(cls))
    return [own] + xunit(cls, ("setup_class",), ("teardown_class",), cls)


def set_up_class(cls):
    try:
        cls.setUpClass()
    except Exception:  # unittest runs the class cleanups after a setUpClass that failed
        class_cleanups(cls)
        raise


def tear_down_class(cls):
    try:
        cls.tearDownClass()
    finally:
        class_cleanups(cls)


def class_cleanups(cls):
    getattr(cls, "doClassCleanups", lambda: None)()
    errors = getattr(cls, "tearDown_exceptions", None)
    if errors:
        raise errors[0][1]


def test_case_test(cls, attr, name, scopes):
    box = {}

    def make():
        box["self"] = cls(attr)

    fixtures = [(make, None)]
    setup, teardown = getattr(cls, "setup_method", None), getattr(cls, "teardown_method", None)
    if setup is not None or teardown is not None:  # pytest calls them on a TestCase too
        def later(func):
            return None if func is None else (lambda: func(box["self"], getattr(box["self"], attr)))

        fixtures.append((later(setup), later(teardown)))

    def call(outcomes, name):
        result = QuietRecorder()
        result.start_recording(outcomes, lambda test: (name, None), progress=False)
        box["self"](result)

    return Test(name, scopes, lambda outcomes: run_phases(outcomes, name, fixtures, call))


# ---------------------------------------------------------------------------------------------
# Default mode, part 3: the run.


def run_default(outcomes):
    """The tests in order, each shared setup opened before its first and closed after its
    last; a directory a test moves to stays for the next, as under pytest."""
    tests = collect_all(outcomes)
    opened = []
    for index, test in enumerate(tests):
        if test.run is not None:
            run_in_scopes(test, opened, outcomes)
        following = tests[index + 1].scopes if index + 1 < len(tests) else []
        while opened and opened[-1] not in following:
            for error in opened.pop().close():  # pytest's ERROR at teardown of the last test
                fixture_failed(outcomes, test.name, error, "teardown")
        show(test.name, outcomes)
    print_failures(outcomes)


def run_in_scopes(test, opened, outcomes):
    """The test, once the setups it shares are open; an error there is its error."""
    for scope in test.scopes:
        if scope not in opened:
            scope.open()
            opened.append(scope)
        if scope.error is not None:
            fixture_failed(outcomes, test.name, scope.error, "setup", shown=not scope.told)
            scope.told = True
            return
    test.run(outcomes)


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
            print(f"{outcomes.word(name, status)} {name} - {why.get(name, NOT_RUN)}")
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


class CapturedStdin:
    """pytest's stdin while it captures output: any read fails, as the code would see there."""

    encoding = "utf-8"

    def read(self, *args):
        raise OSError("pytest: reading from stdin while output is captured!  Consider using `-s`.")

    readline = readlines = read
    __next__ = read

    def __iter__(self):
        return self

    def fileno(self):
        raise io.UnsupportedOperation("redirected stdin is pseudofile, has no fileno()")

    def isatty(self):
        return False

    def close(self):
        pass

    @property
    def buffer(self):
        return self


def as_under_pytest():
    """What pytest sets up before it imports a test: stdin that cannot be read, and a handler
    on the root logger (so `logging.basicConfig` does nothing, as it does there)."""
    sys.stdin = CapturedStdin()
    logging.getLogger().addHandler(logging.NullHandler())


def main(argv):
    results = os.environ.get("AGENT_GIT_RESULTS")
    results = os.path.abspath(results) if results else None
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # keep our lines in order with stderr's
    isolate_imports()
    outcomes = Outcomes()
    try:
        if "--unittest" in argv:
            run_unittest(outcomes)
        else:
            as_under_pytest()
            run_default(outcomes)
    except NeedsPytest as why:  # no verdict at all: not even a results file from an earlier run
        print(f"{NEEDS_PYTEST}{why}", flush=True)
        if results and os.path.exists(results):
            os.remove(results)
        return NEEDS_PYTEST_EXIT
    status = summarize(outcomes)
    if results:
        try:
            write_results(results, outcomes)
        except OSError as exc:  # the printed lines still tell what ran
            print(f"agent-git runner: cannot write {results}: {exc}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

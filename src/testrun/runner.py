"""agent-git's built-in test runner: needs only Python's standard library.

Finds test_*.py files under the current directory, runs their test_* functions (and the
test_* methods of unittest.TestCase classes) and prints each failure, then a final
"N passed, M failed" line. Exits 1 when anything failed.
"""
import importlib.util
import inspect
import os
import sys
import traceback
import unittest

SKIP_DIRS = {".git", "node_modules", "venv", ".venv", "__pycache__", "build", "dist"}


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


def cases(module):
    for name, obj in vars(module).items():
        if name.startswith("test") and inspect.isfunction(obj) and obj.__module__ == module.__name__:
            yield name, obj
        elif inspect.isclass(obj) and issubclass(obj, unittest.TestCase) and obj.__module__ == module.__name__:
            for method in unittest.TestLoader().getTestCaseNames(obj):
                yield f"{name}::{method}", obj(method)


def run_case(case):
    if isinstance(case, unittest.TestCase):
        result = unittest.TestResult()
        case.run(result)
        problems = result.failures + result.errors
        if problems:
            raise AssertionError(problems[0][1].strip().splitlines()[-1])
    else:
        case()


def first_line(exc):
    message = str(exc).strip()
    if not message:  # a bare assert: show the line that failed
        frames = traceback.extract_tb(exc.__traceback__)
        message = (frames[-1].line or "").strip() if frames else ""
    return f"{type(exc).__name__}: {message.splitlines()[0]}" if message else type(exc).__name__


def main():
    passed = failed = 0
    for path in test_files("."):
        try:
            module = load(path)
        except Exception as exc:  # a file that cannot be imported fails as a whole
            failed += 1
            print(f"FAILED {path} - {first_line(exc)}")
            traceback.print_exc(file=sys.stdout)
            continue
        for name, case in cases(module):
            try:
                run_case(case)
            except Exception as exc:
                failed += 1
                print(f"FAILED {path}::{name} - {first_line(exc)}")
                traceback.print_exc(file=sys.stdout)
            else:
                passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

"""testlib.py — what the python tests share: check() counts and reports, finish() prints the tally and exits
with the verdict (a test that checked nothing fails)."""
import atexit
import shutil
import sys
import tempfile

failures = 0
checks = 0


def check(cond, what):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print("FAIL:", what)
    return bool(cond)


def finish(summary=""):
    print(f"{summary}{': ' if summary else ''}{checks - failures} passed, {failures} failed")
    sys.exit(1 if failures or checks == 0 else 0)


def scratch_dir(prefix):
    """A temporary directory removed when the test exits, whatever the verdict."""
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d

"""Shared runner of the client test scripts: runs every check_* function, prints one line per check
and a closing "<label>: N passed, M failed" line, and exits non-zero on any failure."""
import os
import sys
import time
import traceback


def run_checks(namespace, label):
    # PG_DP_LABEL names the layer for a second run of the same checks (another server setup)
    label = os.environ.get("PG_DP_LABEL", label)
    checks = sorted((n, f) for n, f in namespace.items() if n.startswith("check_") and callable(f))
    # PG_DP_CHECKS=word runs only the checks whose name contains it (while working on them)
    only = os.environ.get("PG_DP_CHECKS")
    if only:
        checks = [(n, f) for n, f in checks if only in n]
    passed = failed = 0
    for name, f in checks:
        t0 = time.time()
        try:
            f()
            print(f"{label} {name} ... ok ({time.time() - t0:.1f}s)")
            passed += 1
        except Exception:  # noqa: BLE001
            print(f"{label} {name} ... FAILED")
            traceback.print_exc()
            failed += 1
    print(f"{label}: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


def refused(c, sql, error, args=None):
    """Runs sql and returns the exception it must raise (an instance of error)."""
    try:
        c.execute(sql, args)
    except error as e:
        return e
    raise AssertionError("not refused: " + sql)

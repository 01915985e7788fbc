"""Helpers of the Python package tests: where the build is, and run_job, which runs a
script as the ranks of a real job under `cohort run`. A module of its own (not conftest.py)
so that tests import it by a name no other test folder uses."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.path.abspath(os.environ.get("COHORT_BUILD_DIR", os.path.join(ROOT, "build")))
COHORT = os.path.join(BUILD, "bin", "cohort")
PACKAGE_DIR = os.path.join(BUILD, "python")
if PACKAGE_DIR not in sys.path:  # so `import cohort` here finds this build's package
    sys.path.insert(0, PACKAGE_DIR)


def worker_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_DIR, env.get("PYTHONPATH")) if p)
    env["COHORT_NUM_THREADS"] = "1"  # 2 cores shared by up to 3 ranks
    return env


def run_job(n, script, *args, timeout=60, check=True):
    """Runs `cohort run -n N -- /usr/bin/python3 SCRIPT ARGS` (every rank a real process) and
    returns the CompletedProcess; with check, a non-zero exit fails the test with the output."""
    cmd = [COHORT, "run", "-n", str(n), "--", sys.executable, script, *map(str, args)]
    r = subprocess.run(cmd, cwd=ROOT, env=worker_env(), capture_output=True, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-6000:]}\n"
                    f"{r.stderr[-6000:]}")
    return r


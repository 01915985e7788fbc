"""Shared by the tests of the Python package (tests/python, not tests/python/torch): where the
build is, and `launch`, which runs a script as the ranks of a real job under `cohort run`.

Run from CTest (python_package), or by hand:
    COHORT_BUILD_DIR=build PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python \
        --ignore=tests/python/torch
"""
import os

import pytest

from cohort_jobs import HERE, run_job


@pytest.fixture
def launch():
    """launch(n, "workers/x.py", args...) -> CompletedProcess (cohort_jobs.run_job)."""
    def go(n, script, *args, **kw):
        return run_job(n, os.path.join(HERE, script), *args, **kw)
    return go

"""examples/python/allreduce.py runs as documented: 2 ranks under `cohort run`, and alone."""
import os
import subprocess
import sys

from cohort_jobs import ROOT, run_job, worker_env

EXAMPLE = os.path.join(ROOT, "examples", "python", "allreduce.py")


def test_example_under_cohort_run():
    r = run_job(2, EXAMPLE)
    assert "2 ranks: mean 1.5, ranks summed 1, gathered [0, 0, 1, 10]" in r.stdout, r.stdout


def test_example_alone_is_a_world_of_one():
    r = subprocess.run([sys.executable, EXAMPLE], env=worker_env(), capture_output=True,
                       text=True, timeout=60, check=True)
    assert "1 ranks: mean 1" in r.stdout

"""examples/python/torch_ddp.py runs as docs/python.md says: under `cohort run` on the cohort
backend and on gloo (the same losses, bit for bit, at 2 ranks), and alone."""
import os
import subprocess

import pytest

from conftest import PYTHON, ROOT, worker_env

torch = pytest.importorskip("torch")
EXAMPLE = os.path.join(ROOT, "examples", "python", "torch_ddp.py")


def test_example_cohort_equals_gloo(cohort_run):
    out = {}
    for backend in ("cohort", "gloo"):
        r = cohort_run(2, EXAMPLE, "--backend", backend, "--steps", 10)
        line = [l for l in r.stdout.splitlines() if f"{backend}: 2 ranks, 10 steps" in l]
        assert len(line) == 1, r.stdout
        out[backend] = line[0].split(", loss ")[1]
    assert out["cohort"] == out["gloo"], out
    first, last = map(float, out["cohort"].split(" -> "))
    assert last < first, out


def test_example_alone():
    r = subprocess.run([PYTHON, EXAMPLE, "--steps", "3"], env=worker_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "cohort: 1 ranks, 3 steps" in r.stdout, r.stdout + r.stderr

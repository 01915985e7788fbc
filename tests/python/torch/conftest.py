"""Shared by the tests of the torch.distributed backend (tests/python/torch): where the build
is, and fixtures that run a script as the ranks of a real job, under `cohort run` or torchrun.

Run from CTest (python_torch_backend), or by hand:
    COHORT_BUILD_DIR=build PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python/torch
"""
import os
import socket
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
BUILD = os.path.abspath(os.environ.get("COHORT_BUILD_DIR", os.path.join(ROOT, "build")))
COHORT = os.path.join(BUILD, "bin", "cohort")
PACKAGE_DIR = os.path.join(BUILD, "python")
# Debian's torchrun fails on Python 3.11; this wrapper is torchrun with that fixed.
TORCHRUN = os.path.join(ROOT, "tests", "docs", "torchrun_compat.py")
PYTHON = "/usr/bin/python3"  # Debian's, where python3-torch is


def worker_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("COHORT_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_DIR, env.get("PYTHONPATH")) if p)
    # 2 cores shared by up to 3 ranks, each with torch's and cohort's thread pools.
    env["OMP_NUM_THREADS"] = "1"
    env["COHORT_NUM_THREADS"] = "1"
    return env


def _run(cmd, timeout, check, env=None):
    r = subprocess.run(cmd, cwd=ROOT, env={**worker_env(), **(env or {})}, capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-6000:]}\n"
                    f"{r.stderr[-6000:]}")
    return r


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cohort_run():
    """cohort_run(n, script, args..., timeout=120, check=True, env=None) -> CompletedProcess:
    the script (relative to this folder, or absolute) as the n ranks of `cohort run -n N`, with
    `env` (a dict) added to the workers' environment."""
    def go(n, script, *args, timeout=120, check=True, env=None):
        script = os.path.join(HERE, script)
        return _run([COHORT, "run", "-n", str(n), "--", PYTHON, script, *map(str, args)],
                    timeout, check, env)
    return go


@pytest.fixture
def torchrun():
    """torchrun(n, script, args..., timeout=120, check=True): the same under torchrun (c10d
    rendezvous on a free port, so that concurrent runs do not meet)."""
    def go(n, script, *args, timeout=120, check=True):
        script = os.path.join(HERE, script)
        rdzv = ["--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{free_port()}",
                "--rdzv_id=cohort-torch-test", "--nnodes=1", f"--nproc_per_node={n}"]
        return _run([PYTHON, TORCHRUN, *rdzv, script, *map(str, args)], timeout, check)
    return go


def rank_lines(r, marker):
    """The lines of a job's output that contain `marker` (one per rank that printed it)."""
    return [l for l in (r.stdout + r.stderr).splitlines() if marker in l]

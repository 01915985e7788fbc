"""The "cohort" torch.distributed backend in real jobs: every op and dtype against gloo at 2 and
3 ranks, the error cases, under `cohort run` and under torchrun."""
import subprocess

import pytest

from conftest import PYTHON, rank_lines, worker_env

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("n", [2, 3])
def test_ops_match_gloo(cohort_run, n):
    r = cohort_run(n, "workers/ops_vs_gloo.py")
    assert len(rank_lines(r, "ops OK")) == n, r.stdout


def test_ops_match_gloo_with_every_op_on_the_completion_thread(cohort_run):
    # Small collectives normally run on the calling thread; 0 sends each through the
    # communicator's worker and the group's completion thread, the path of large tensors.
    r = cohort_run(2, "workers/ops_vs_gloo.py", env={"COHORT_TORCH_INLINE_BYTES": "0"})
    assert len(rank_lines(r, "ops OK")) == 2, r.stdout


@pytest.mark.parametrize("value", ["64k", "-1", ""])
def test_a_bad_inline_size_names_the_variable(value):
    code = ("import torch.distributed as dist, cohort.torch\n"
            "dist.init_process_group('cohort', store=dist.HashStore(), rank=0, world_size=1)\n"
            "print('joined')")
    env = {**worker_env(), "COHORT_TORCH_INLINE_BYTES": value}
    r = subprocess.run([PYTHON, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    if value == "":  # unset and empty mean the default
        assert r.returncode == 0 and "joined" in r.stdout, r.stderr
        return
    assert r.returncode != 0
    assert f"COHORT_TORCH_INLINE_BYTES='{value}'" in r.stderr, r.stderr
    assert "expected a number of bytes" in r.stderr, r.stderr


def test_errors(cohort_run):
    r = cohort_run(2, "workers/errors.py")
    assert len(rank_lines(r, "errors OK")) == 2, r.stdout


def test_under_torchrun(torchrun):
    # No job secret in torchrun's environment: rank 0 draws one and shares it through the store.
    r = torchrun(2, "workers/ops_vs_gloo.py")
    assert len(rank_lines(r, "ops OK")) == 2, r.stdout + r.stderr

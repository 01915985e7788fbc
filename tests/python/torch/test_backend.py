"""The "cohort" torch.distributed backend in real jobs: every op and dtype against gloo at 2 and
3 ranks, the error cases, under `cohort run` and under torchrun."""
import pytest

from conftest import rank_lines

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("n", [2, 3])
def test_ops_match_gloo(cohort_run, n):
    r = cohort_run(n, "workers/ops_vs_gloo.py")
    assert len(rank_lines(r, "ops OK")) == n, r.stdout


def test_errors(cohort_run):
    r = cohort_run(2, "workers/errors.py")
    assert len(rank_lines(r, "errors OK")) == 2, r.stdout


def test_under_torchrun(torchrun):
    # No job secret in torchrun's environment: rank 0 draws one and shares it through the store.
    r = torchrun(2, "workers/ops_vs_gloo.py")
    assert len(rank_lines(r, "ops OK")) == 2, r.stdout + r.stderr

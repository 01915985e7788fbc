"""PyTorch's DistributedDataParallel on the "cohort" backend gives gloo's parameters: bit for
bit at 2 ranks, within float tolerance at 3; and the same under torchrun."""
import pytest

from conftest import rank_lines

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_matches_gloo(cohort_run, n):
    r = cohort_run(n, "workers/ddp_vs_gloo.py", "--steps", 5)
    assert len(rank_lines(r, "ddp OK")) == n, r.stdout


def test_ddp_under_torchrun(torchrun):
    r = torchrun(2, "workers/ddp_vs_gloo.py", "--steps", 3)
    assert len(rank_lines(r, "ddp OK")) == 2, r.stdout + r.stderr

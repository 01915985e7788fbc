"""cohort.torch.horovod, Horovod's PyTorch API on cohort (docs/python.md, "Horovod's API"), in
real jobs under `cohort run`: its collectives checked against torch (workers/horovod_ops.py),
DistributedOptimizer against single-process training on the global batch
(workers/horovod_train.py), and examples/python/horovod_mnist_style.py."""
import importlib.util
import os
import re

import pytest

from cohort_jobs import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed for this interpreter")


@pytest.mark.parametrize("n", [2, 3])
def test_collectives(launch, n):
    r = launch(n, "workers/horovod_ops.py")
    for k in range(n):
        assert f"horovod ops ok rank {k} of {n}" in r.stdout, r.stdout


def test_mismatched_shapes_name_the_ranks(launch):
    r = launch(2, "workers/horovod_ops.py", "--mismatch")
    for me, peer, count in ((0, 1, 4), (1, 0, 5)):
        assert (f"mismatch rank {me}: allreduce #0 on rank {me}: collective mismatch with rank "
                f"{peer}: rank {me} called allreduce(count={count}") in r.stdout, r.stdout


def test_distributed_optimizer_equals_global_batch_training(launch):
    """2 ranks: plain (several buckets), backward_passes_per_step=2, fp16 compression."""
    r = launch(2, "workers/horovod_train.py")
    for variant in ("plain", "bpps2", "fp16"):
        for k in range(2):
            assert f"horovod train {variant} ok rank {k} of 2" in r.stdout, r.stdout


def test_distributed_optimizer_three_ranks(launch):
    r = launch(3, "workers/horovod_train.py", "--variants", "plain")
    for k in range(3):
        assert f"horovod train plain ok rank {k} of 3" in r.stdout, r.stdout


def test_mnist_style_example(launch):
    example = os.path.join(ROOT, "examples", "python", "horovod_mnist_style.py")
    r = launch(2, example, "--epochs", "1", "--limit", "2048", "--lr", "0.05", timeout=120)
    accs = re.findall(r"test accuracy ([0-9.]+)%", r.stdout)
    assert len(accs) == 1, r.stdout  # printed by rank 0 only, averaged over the ranks
    assert float(accs[0]) > 50.0, r.stdout

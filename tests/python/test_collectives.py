"""Every operation and dtype of cohort.ProcessGroup on 2 and 3 real ranks under `cohort run`,
checked against NumPy (workers/collectives.py); torch CPU tensors too where torch is
installed."""
import importlib.util

import pytest

HAVE_TORCH = importlib.util.find_spec("torch") is not None


@pytest.mark.parametrize("n", [2, 3])
def test_every_op_and_dtype(launch, n):
    args = ["--torch"] if HAVE_TORCH and n == 2 else []
    r = launch(n, "workers/collectives.py", *args)
    for k in range(n):
        assert f"collectives ok rank {k} of {n}" in r.stdout, r.stdout

"""cohort from Python: join a job, run collectives on NumPy arrays and torch CPU tensors in
place, train with cohort's trainer and read its metrics (docs/python.md).

    import cohort, numpy as np
    cohort.init()                          # under `cohort run -n 2`, torchrun, mpirun, srun
    x = np.ones(4, dtype=np.float32)
    cohort.allreduce(x)                    # x is now 2.0 everywhere (2 ranks)
    cohort.shutdown()

The C++ core is the extension cohort._core; this package adds the default world, the
module-level shortcuts and cohort.train.
"""
from cohort._core import (AuthRefused, CollectiveMismatch, Error, Internal, InvalidArgument,
                          IoError, ProcessGroup, ReduceOp, Timeout, Work, World,
                          available_backends)
from cohort._train import TrainSummary, read_metrics, train
from cohort._world import (allgather, allreduce, barrier, broadcast, get_world, init,
                           is_initialized, local_rank, local_size, new_group, rank, recv,
                           reduce_scatter, send, shutdown, size, split)

__all__ = [
    "AuthRefused", "CollectiveMismatch", "Error", "Internal", "InvalidArgument", "IoError",
    "ProcessGroup", "ReduceOp", "Timeout", "TrainSummary", "Work", "World", "allgather",
    "allreduce", "available_backends", "barrier", "broadcast", "get_world", "init",
    "is_initialized", "local_rank", "local_size", "new_group", "rank", "read_metrics", "recv",
    "reduce_scatter", "send", "shutdown", "size", "split", "train",
]

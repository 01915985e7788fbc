"""Horovod's PyTorch API on cohort's collectives: a Horovod training script runs on cohort with
one changed import (docs/python.md, "Horovod's API"):

    import cohort.torch.horovod as hvd       # was: import horovod.torch as hvd
    hvd.init()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

Built in Python on the default cohort world's ProcessGroup (cohort._core), not on
torch.distributed, so it needs neither the C++ torch plugin nor init_process_group. CPU tensors;
no Adasum, process sets, elastic training or hvd.join() yet.
"""
from cohort.torch._hvd_functions import (Compression, Compressor, allgather_object,
                                         broadcast_object, broadcast_optimizer_state,
                                         broadcast_parameters)
from cohort.torch._hvd_ops import (Adasum, Average, Max, Min, Product, ReduceOp, Sum,
                                   allgather, allgather_async, allreduce, allreduce_,
                                   allreduce_async, allreduce_async_, barrier, broadcast,
                                   broadcast_, broadcast_async, broadcast_async_, ccl_built,
                                   cross_rank, cross_size, cuda_built, ddl_built,
                                   global_process_set, gloo_built, gloo_enabled, init,
                                   is_initialized, join, local_rank, local_size, mpi_built,
                                   mpi_enabled, mpi_threads_supported, nccl_built, poll, rank,
                                   rocm_built, shutdown, size, synchronize)
from cohort.torch._hvd_optimizer import DistributedOptimizer
import cohort as _cohort

# What Horovod raises when a collective fails; cohort's errors all derive from cohort.Error.
HorovodInternalError = _cohort.Error

__all__ = [
    "Adasum", "Average", "Compression", "Compressor", "DistributedOptimizer",
    "HorovodInternalError", "Max", "Min", "Product", "ReduceOp", "Sum", "allgather",
    "allgather_async", "allgather_object", "allreduce", "allreduce_", "allreduce_async",
    "allreduce_async_", "barrier", "broadcast", "broadcast_", "broadcast_async",
    "broadcast_async_", "broadcast_object", "broadcast_optimizer_state", "broadcast_parameters",
    "ccl_built", "cross_rank", "cross_size", "cuda_built", "ddl_built", "global_process_set",
    "gloo_built", "gloo_enabled", "init", "is_initialized", "join", "local_rank", "local_size",
    "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "poll", "rank",
    "rocm_built", "shutdown", "size", "synchronize",
]

"""The collectives of cohort.torch.horovod (Horovod's horovod/torch/mpi_ops.py), on the default
cohort world's ProcessGroup: every operation works in place on a contiguous buffer of a dtype
cohort moves, asynchronously, and Horovod's integer handles map to cohort Work objects.

Nothing here touches torch.distributed, so it runs whether or not the C++ torch plugin is built.
"""
import itertools
import math
import threading

import torch

import cohort


class ReduceOp:
    """Horovod's reduction constants (hvd.Average, hvd.Sum, ...); `core` is cohort's name."""

    def __init__(self, name, core):
        self.name, self.core = name, core

    def __repr__(self):
        return f"hvd.{self.name}"


Average = ReduceOp("Average", "avg")
Sum = ReduceOp("Sum", "sum")
Adasum = ReduceOp("Adasum", None)
Min = ReduceOp("Min", "min")
Max = ReduceOp("Max", "max")
Product = ReduceOp("Product", "prod")

# Horovod's process sets are not implemented; this stands for "all ranks" in signatures.
global_process_set = None

# Element types cohort's kernels move directly, and lossless stand-ins for the rest, so every
# dtype Horovod accepts works (sums of int8 wrap when narrowed back, as in their own width).
_CORE_DTYPES = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                torch.int64, torch.uint8}
_WIDEN = {torch.bool: torch.uint8, torch.int8: torch.int32, torch.int16: torch.int32}

_owns_world = False  # whether hvd.init() joined the world (then hvd.shutdown() leaves it)


def init(comm=None, process_sets=None, timeout=300.0):
    """Joins the job (cohort.init(): `cohort run`, torchrun, mpirun, srun), or adopts the world
    this process already joined with cohort.init(). `timeout` (seconds) is every operation's
    deadline. Horovod's `comm` (an MPI communicator) and `process_sets` are not supported."""
    global _owns_world
    if comm is not None:
        raise NotImplementedError("cohort.torch.horovod: init(comm=...) (an MPI communicator) is "
                                  "not supported; ranks come from the launcher's environment")
    if process_sets is not None:
        raise NotImplementedError("cohort.torch.horovod: process sets are not supported yet")
    if not cohort.is_initialized():
        cohort.init(timeout=timeout)
        _owns_world = True


def shutdown():
    """Waits for this process's outstanding operations and leaves the world hvd.init() joined
    (a world joined with cohort.init() is left to cohort.shutdown())."""
    global _owns_world
    with _lock:
        pending = list(_handles.values())
        _handles.clear()
    for h in pending:
        for w in h.works:
            try:
                w.wait()
            except cohort.Error:
                pass  # already shutting down; its error was the caller's to collect
    if _owns_world:
        cohort.shutdown()
        _owns_world = False


def is_initialized():
    return cohort.is_initialized()


def _world():
    if not cohort.is_initialized():
        raise ValueError("cohort.torch.horovod has not been initialized; call hvd.init() first")
    return cohort.get_world()


def rank():
    return _world().rank


def size():
    return _world().size


def local_rank():
    return _world().local_rank


def local_size():
    return _world().local_size


def cross_rank():
    """The index of this host among the job's hosts (ranks are packed per host)."""
    return _world().rank // _world().local_size


def cross_size():
    w = _world()
    return (w.size + w.local_size - 1) // w.local_size


def _group():
    return _world().group


def barrier(process_set=global_process_set):
    _check_process_set(process_set)
    _group().barrier()


def join(device=-1):
    raise NotImplementedError(
        "cohort.torch.horovod: hvd.join() (ranks with uneven numbers of batches) is not "
        "supported; give every rank the same number of steps (e.g. DistributedSampler with "
        "drop_last=True)")


# Capabilities scripts query to pick code paths: this is neither MPI, Gloo, NCCL nor ROCm.
def mpi_threads_supported():
    return False


def mpi_enabled():
    return False


def mpi_built():
    return False


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    return 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


def _check_process_set(process_set):
    if process_set is not None:
        raise NotImplementedError("cohort.torch.horovod: process sets are not supported yet; "
                                  "leave process_set at its default (all ranks)")


def resolve_op(average, op, what):
    """Horovod's rule: op wins, `average` (deprecated) picks Average or Sum, default Average."""
    if op is not None and average is not None:
        raise ValueError(f"{what}: the op parameter supersedes average; pass only one")
    if op is None:
        op = Sum if average is False else Average
    if not isinstance(op, ReduceOp):
        raise ValueError(f"{what}: op must be hvd.Average, hvd.Sum, hvd.Min, hvd.Max or "
                         f"hvd.Product, got {op!r}")
    if op is Adasum:
        raise NotImplementedError(
            f"{what}: hvd.Adasum is not supported by cohort.torch.horovod; use op=hvd.Average "
            "(and scale the learning rate by hvd.size() as for Average)")
    return op


def _check_tensor(tensor, what):
    if not torch.is_tensor(tensor):
        raise TypeError(f"{what}: expected a torch tensor, got {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise ValueError(f"{what}: tensor is on {tensor.device}; cohort.torch.horovod moves CPU "
                         "tensors only (call .cpu())")
    if tensor.layout != torch.strided:
        raise ValueError(f"{what}: {tensor.layout} tensors are not supported; pass a dense one")
    if tensor.dtype not in _CORE_DTYPES and tensor.dtype not in _WIDEN:
        raise TypeError(f"{what}: dtype {tensor.dtype} is not supported (float32/64/16, "
                        "bfloat16, int8/16/32/64, uint8, bool)")


def stage(tensor, what):
    """A contiguous buffer of a dtype cohort moves holding `tensor`'s values (the tensor itself
    where it already is one), and the function that copies a result in it back to `tensor`."""
    _check_tensor(tensor, what)
    wire = _WIDEN.get(tensor.dtype, tensor.dtype)
    if wire == tensor.dtype and tensor.is_contiguous():
        return tensor.detach(), lambda: None
    buf = tensor.detach().to(wire).contiguous()
    if buf.data_ptr() == tensor.data_ptr():  # .to()/.contiguous() returned the same storage
        buf = buf.clone()

    def back():
        with torch.no_grad():
            tensor.copy_(buf)
    return buf, back


def _scale(buf, factor, what):
    if factor == 1.0:
        return
    if not buf.is_floating_point():
        raise ValueError(f"{what}: prescale/postscale factors need a floating-point tensor, "
                         f"got {buf.dtype}")
    buf.mul_(factor)


class _Handle:
    """What synchronize() needs: the cohort Work objects to wait for, and `finish`, which makes
    the output once they are done."""

    def __init__(self, works, finish):
        self.works, self.finish = works, finish


_lock = threading.Lock()  # DistributedOptimizer's hooks may run on autograd's threads
_handles = {}
_next_handle = itertools.count(1)


def _register(works, finish):
    with _lock:
        h = next(_next_handle)
        _handles[h] = _Handle(works, finish)
    return h


def poll(handle):
    """True once the operation of `handle` is done (then synchronize() does not block)."""
    with _lock:
        if handle not in _handles:
            raise ValueError(f"poll: unknown handle {handle!r} (already synchronized?)")
        h = _handles[handle]
    return all(w.is_completed() for w in h.works)


def synchronize(handle):
    """Waits for the operation of `handle` and returns its output tensor. Each operation has
    the world's deadline; a failed one raises cohort's error (e.g. cohort.CollectiveMismatch
    naming the ranks that disagreed, cohort.Timeout naming the peer)."""
    with _lock:
        if handle not in _handles:
            raise ValueError(f"synchronize: unknown handle {handle!r} (already synchronized?)")
        h = _handles.pop(handle)
    for w in h.works:
        w.wait()
    return h.finish()


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce of `tensor` in place; synchronize(handle) returns `tensor`."""
    what = f"allreduce {name}" if name else "allreduce"
    _check_process_set(process_set)
    op = resolve_op(average, op, what)
    buf, back = stage(tensor, what)
    _scale(buf, prescale_factor, what)
    work = _group().allreduce(buf, op.core, async_op=True)

    def finish():
        _scale(buf, postscale_factor, what)
        back()
        return tensor
    return _register([work], finish)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce into a new tensor; synchronize(handle) returns it."""
    return allreduce_async_(tensor.detach().clone(), average, name, op, prescale_factor,
                            postscale_factor, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts a broadcast of root_rank's `tensor` into every rank's `tensor`, in place."""
    what = f"broadcast {name}" if name else "broadcast"
    _check_process_set(process_set)
    n = size()
    if not 0 <= root_rank < n:
        raise ValueError(f"{what}: root_rank {root_rank} is not a rank of this job of {n}")
    buf, back = stage(tensor, what)
    work = _group().broadcast(buf, root_rank, async_op=True)

    def finish():
        back()
        return tensor
    return _register([work], finish)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    return broadcast_async_(tensor.detach().clone(), root_rank, name, process_set)


_DTYPE_CODES = {d: i for i, d in enumerate(sorted(_CORE_DTYPES | set(_WIDEN), key=str))}
_META_DIMS = 8  # dimensions of each rank's shape exchanged as they are (more: hashed)


def _shape_meta(tensor):
    """[ndim, dtype, dims...] as int64, padded to a fixed length so ranks can allgather it."""
    dims = list(tensor.shape)
    meta = [len(dims), _DTYPE_CODES[tensor.dtype]] + dims[:_META_DIMS]
    if len(dims) > _META_DIMS:  # the rest as one number: enough to notice a difference
        meta[-1] = hash(tuple(dims[_META_DIMS - 1:])) & ((1 << 62) - 1)
    return torch.tensor(meta + [-1] * (2 + _META_DIMS - len(meta)), dtype=torch.int64)


def _describe(meta):
    ndim = int(meta[0])
    dtype = next(d for d, c in _DTYPE_CODES.items() if c == int(meta[1]))
    dims = [int(d) for d in meta[2:2 + min(ndim, _META_DIMS)]]
    return f"{dtype} of shape {tuple(dims)}" + (" (more dims)" if ndim > _META_DIMS else "")


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an allgather: every rank's `tensor` concatenated along dimension 0, in rank
    order; the first dimension may differ between ranks, the others and the dtype may not.
    The shapes are exchanged first (a small blocking allgather), then the rows move padded to
    the longest rank's. A 0-dim tensor counts as one row."""
    what = f"allgather {name}" if name else "allgather"
    _check_process_set(process_set)
    _check_tensor(tensor, what)
    t = tensor.detach().reshape(1) if tensor.dim() == 0 else tensor.detach()
    g, n, me = _group(), size(), rank()
    metas = torch.empty(n * (2 + _META_DIMS), dtype=torch.int64)
    g.allgather(metas, _shape_meta(t))
    metas = metas.view(n, -1)
    for k in range(n):
        if not torch.equal(metas[k, 0:2], metas[me, 0:2]) or \
                not torch.equal(metas[k, 3:], metas[me, 3:]):
            raise cohort.CollectiveMismatch(
                f"{what}: rank {me} has a {_describe(metas[me])} but rank {k} a "
                f"{_describe(metas[k])}; ranks must agree on the dtype and every dimension "
                "but the first")
    rows = [int(r) for r in metas[:, 2]]
    row_shape = t.shape[1:]
    row_len = math.prod(row_shape)
    most = max(rows)
    wire = _WIDEN.get(t.dtype, t.dtype)
    src = torch.zeros(most * row_len, dtype=wire)
    src[:rows[me] * row_len] = t.reshape(-1)
    out = torch.empty(n * most * row_len, dtype=wire)
    work = g.allgather(out, src, async_op=True)

    def finish():
        blocks = out.view(n, most * row_len)
        parts = [blocks[k, :rows[k] * row_len] for k in range(n)]
        return torch.cat(parts).view(sum(rows), *row_shape).to(t.dtype)
    return _register([work], finish)


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's tensor concatenated along dimension 0 (differentiable, as Horovod's)."""
    if tensor.requires_grad and torch.is_grad_enabled():
        return _AllgatherFn.apply(tensor, name)
    return synchronize(allgather_async(tensor, name, process_set))


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """A new tensor: `tensor` reduced over the ranks (Average by default), optionally sent
    compressed (hvd.Compression.fp16). Differentiable, as Horovod's."""
    op = resolve_op(average, op, f"allreduce {name}" if name else "allreduce")
    _check_process_set(process_set)
    if compression is not None:
        wire, ctx = compression.compress(tensor)
    else:
        wire, ctx = tensor, None
    if wire.requires_grad and torch.is_grad_enabled():
        out = _AllreduceFn.apply(wire, op, name, prescale_factor, postscale_factor)
    else:
        out = synchronize(allreduce_async(wire, None, name, op, prescale_factor,
                                          postscale_factor))
    return compression.decompress(out, ctx) if compression is not None else out


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """A new tensor holding root_rank's `tensor` (differentiable, as Horovod's)."""
    _check_process_set(process_set)
    if tensor.requires_grad and torch.is_grad_enabled():
        return _BroadcastFn.apply(tensor, root_rank, name)
    return synchronize(broadcast_async(tensor, root_rank, name))


# Horovod's gradients of the collectives (horovod/torch/mpi_ops.py).
class _AllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, op, name, pre, post):
        ctx.args = (op, name, pre, post)
        return synchronize(allreduce_async(tensor, None, name, op, pre, post))

    @staticmethod
    def backward(ctx, grad):
        op, name, pre, post = ctx.args
        return allreduce(grad, op=op, name=name, prescale_factor=pre,
                         postscale_factor=post), None, None, None, None


class _AllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        ctx.rows = tensor.shape[0] if tensor.dim() else 1
        ctx.scalar = tensor.dim() == 0
        return synchronize(allgather_async(tensor, name))

    @staticmethod
    def backward(ctx, grad):
        summed = allreduce(grad, op=Sum)
        rows = synchronize(allgather_async(torch.tensor([ctx.rows])))
        offset = int(rows[:rank()].sum())
        g = summed.narrow(0, offset, ctx.rows)
        return (g.reshape(()) if ctx.scalar else g), None


class _BroadcastFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root = root_rank
        return synchronize(broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad):
        g = allreduce(grad, op=Average)
        if rank() != ctx.root:
            g = g * 0
        return g, None, None

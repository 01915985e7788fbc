"""Horovod's helpers (horovod/torch/functions.py and compression.py) on cohort's collectives:
broadcasting a model's parameters, an optimizer's state and any picklable object, and the
gradient compressors DistributedOptimizer and allreduce accept."""
import pickle

import numpy as np
import torch

from cohort.torch import _hvd_ops as ops


class Compressor:
    """Horovod's interface: compress(tensor) -> (tensor, ctx); decompress(tensor, ctx)."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors cross the network as float16 (half the bytes), and come back
    in their own dtype; others pass unchanged."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor.type(ctx) if ctx is not None else tensor


class Compression:
    """hvd.Compression.none and hvd.Compression.fp16."""
    none = NoneCompressor
    fp16 = FP16Compressor


def broadcast_parameters(params, root_rank, process_set=ops.global_process_set):
    """Copies root_rank's values into every rank's tensors, in place: `params` is a
    state_dict (ordered by name, as Horovod does, so every rank sends the same sequence), or a
    list/iterable of tensors or of (name, tensor) pairs such as model.named_parameters()."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, (list, tuple)) or hasattr(params, "__iter__"):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError(f"broadcast_parameters: invalid params of type {type(params).__name__}; "
                         "pass model.state_dict() or model.named_parameters()")
    # All started before any is waited for, so the broadcasts pipeline on the communicator.
    handles = [ops.broadcast_async_(p, root_rank, name, process_set) for name, p in params
               if p is not None]
    for h in handles:
        ops.synchronize(h)


def broadcast_object(obj, root_rank=0, name=None, process_set=ops.global_process_set):
    """root_rank's `obj` on every rank (pickled; the size travels first). The bytes come from
    a rank of this job, whose connections are authenticated: unpickle only what you trust."""
    if ops.rank() == root_rank:
        payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8).copy()
        length = np.array([payload.size], dtype=np.int64)
    else:
        length = np.zeros(1, dtype=np.int64)
    ops._group().broadcast(length, root_rank)
    if ops.rank() != root_rank:
        payload = np.empty(int(length[0]), dtype=np.uint8)
    ops._group().broadcast(payload, root_rank)
    return obj if ops.rank() == root_rank else pickle.loads(payload.tobytes())


def allgather_object(obj, name=None, process_set=ops.global_process_set):
    """A list of every rank's `obj`, in rank order."""
    ops._check_process_set(process_set)
    payload = torch.from_numpy(np.frombuffer(pickle.dumps(obj), dtype=np.uint8).copy())
    sizes = ops.allgather(torch.tensor([payload.numel()]), name)
    data = ops.allgather(payload, name).numpy()
    out, at = [], 0
    for n in sizes.tolist():
        out.append(pickle.loads(data[at:at + n].tobytes()))
        at += n
    return out


def _make_state_exist(optimizer):
    """A new optimizer has no state (momentum buffers, Adam's moments) until its first step;
    Horovod's remedy: a step with zero gradients. Unlike Horovod, the parameters and gradients
    are restored afterwards, so a weight decay does not move the weights."""
    params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    saved = [(p.detach().clone(), p.grad) for p in params]
    for p in params:
        p.grad = torch.zeros_like(p)
    skip = getattr(optimizer, "skip_synchronize", None)  # DistributedOptimizer: no allreduce
    if skip is not None:
        with skip():
            optimizer.step()
    else:
        optimizer.step()
    with torch.no_grad():
        for p, (data, grad) in zip(params, saved):
            p.copy_(data)
            p.grad = grad


def broadcast_optimizer_state(optimizer, root_rank, model=None,
                              process_set=ops.global_process_set):
    """Makes every rank's optimizer state and options (lr, momentum, ...) root_rank's: state
    tensors are broadcast in place, in the order of the parameter groups; options and
    non-tensor state travel pickled."""
    ops._check_process_set(process_set)
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("broadcast_optimizer_state: cannot broadcast torch.optim.LBFGS state")
    if len(optimizer.state) == 0:
        _make_state_exist(optimizer)
    options = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    tensors, scalars = [], []
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.get(p)
            if not state:  # no gradient yet (requires_grad False): nothing to send
                continue
            for key in sorted(state, key=str):
                value = state[key]
                if torch.is_tensor(value):
                    tensors.append((key, value))
                else:
                    scalars.append((state, key, value))
    # Ranks whose state differs in structure would send different tensors: compare first, so
    # the error names the rank instead of surfacing as a mismatched broadcast.
    layout = [(str(k), tuple(t.shape), str(t.dtype)) for k, t in tensors]
    root_layout = broadcast_object(layout, root_rank)
    if root_layout != layout:
        raise ValueError(f"broadcast_optimizer_state: rank {ops.rank()}'s optimizer state has "
                         f"{len(layout)} tensors but root rank {root_rank}'s {len(root_layout)} "
                         "(or they differ in shape); build the same optimizer on every rank")
    root_options, root_scalars = broadcast_object(
        (options, [v for _, _, v in scalars]), root_rank)
    for group, opts in zip(optimizer.param_groups, root_options):
        group.update(opts)
    for (state, key, _), value in zip(scalars, root_scalars):
        state[key] = value
    broadcast_parameters(tensors, root_rank)

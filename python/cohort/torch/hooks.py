"""cohort's gradient codecs as DDP communication hooks for torch's DistributedDataParallel
(docs/python.md, "cohort's codecs as DDP comm hooks"). Each is a drop-in for
`ddp.register_comm_hook(state, hook)`:

    from cohort.torch import hooks
    state = hooks.PowerSGDState(None, matrix_approximation_rank=4, start_powerSGD_iter=10)
    ddp.register_comm_hook(state, hooks.powersgd)      # like torch's powerSGD_hook
    ddp.register_comm_hook(None, hooks.fp16)           # like torch's fp16_compress_hook
    ddp.register_comm_hook(hooks.TopKState(None, ratio=0.01), hooks.topk)
    ddp.register_comm_hook(hooks.QSGDState(None, levels=8), hooks.qsgd)

The arithmetic (encoding, decoding, PowerSGD's products and orthogonalization, error feedback)
is cohort's C++ (compress/ and parallel/ddp/low_rank.h, through cohort.torch._hooks); this module
only moves bytes with torch.distributed on the hook state's process group (the DDP's: "cohort"
or gloo) and keeps the state. Every state has state_dict() / load_state_dict() for a torch
checkpoint.

Per-parameter state. DDP rebuilds its buckets after its first step, and a process that resumes
from a checkpoint starts from the first layout again, so state kept per bucket would land on other
parameters. Residuals and PowerSGD's Qs are kept per parameter instead, each keyed by the order
in which the process's first step showed it (the same in every process of the same model: DDP's
first layout follows the model's parameter order).
"""
import torch
import torch.distributed as dist

from cohort.torch._hook_base import HookState, _C, _allreduce, _check, _np, _then
from cohort.torch._powersgd import PowerSGDState, powersgd


def _group_of(state):
    """fp16/bf16 take a HookState or, as torch's hooks, a process group (None: the default)."""
    if isinstance(state, HookState):
        return state._group()
    return state if state is not None else dist.group.WORLD


def _cast_hook(method, wire_dtype):
    codec = _C.Codec(method)

    def hook(state, bucket):
        group = _group_of(state)
        world = dist.get_world_size(group)
        if isinstance(state, HookState):
            state._keys(bucket)
            state.maybe_increase_iter(bucket)
        buf = bucket.buffer()
        msg = torch.empty(codec.message_bytes(buf.numel()), dtype=torch.uint8)
        # scale * g, rounded once to 16 bits (1/world: the sum is the average).
        codec.encode(_np(buf), _np(msg), 0, 1.0 / world)

        def decode(_):
            buf.zero_()
            codec.decode_add(_np(msg), 0, _np(buf))
            return buf

        return _then(_allreduce(group, msg.view(wire_dtype)), decode)

    hook.__name__ = method
    hook.__doc__ = (f"{method}: the bucket cast to {method} as scale * g (scale 1/world), "
                    f"allreduced (sum) in {method}, cast back: torch's {method}_compress_hook.")
    return hook


fp16 = _cast_hook("fp16", torch.float16)
bf16 = _cast_hook("bf16", torch.bfloat16)


class _GatherState(HookState):
    """topk and qsgd: each rank's message all-gathered and every message decoded."""

    def __init__(self, process_group, use_error_feedback, method, **codec_args):
        super().__init__(process_group)
        self.use_error_feedback = bool(use_error_feedback)
        self._method, self._codec_args, self._codec = method, codec_args, None

    def _rank_seed(self):
        return 0

    def codec(self):
        if self._codec is None:  # the rank is known once the group is
            self._codec = _C.Codec(self._method, seed=self._rank_seed(), **self._codec_args)
        return self._codec


class TopKState(_GatherState):
    """top-k with error feedback: each rank sends its k = ratio * numel largest |g + residual|
    of a bucket as (index, value) pairs; the rest stays in its residual for the next step."""

    hook_name = "topk"

    def __init__(self, process_group=None, ratio=0.01, use_error_feedback=True):
        _check(isinstance(ratio, (int, float)) and 0 < ratio <= 1,
               f"TopKState: ratio = {ratio!r} must be a number in (0, 1]")
        super().__init__(process_group, use_error_feedback, "topk", ratio=float(ratio))
        self.ratio = float(ratio)


class QSGDState(_GatherState):
    """QSGD with `levels` levels per 512-value chunk, rounded stochastically by a counter-based
    draw from (seed, rank, step, bucket): reproducible, and independent between ranks."""

    hook_name = "qsgd"

    def __init__(self, process_group=None, levels=8, seed=0, use_error_feedback=False):
        _check(isinstance(levels, int) and 1 <= levels <= 127,
               f"QSGDState: levels = {levels!r} must be an integer in [1, 127]")
        super().__init__(process_group, use_error_feedback, "qsgd", levels=levels)
        self.levels, self.seed = levels, int(seed)

    def _rank_seed(self):
        rank = dist.get_rank(self._group())
        return (self.seed * 0x9E3779B97F4A7C15 + rank + 1) % (1 << 64)


def _gather_hook(state, bucket):
    group = state._group()
    world = dist.get_world_size(group)
    keys = state._keys(bucket)
    codec = state.codec()
    round_ = state.iter << 16 | bucket.index()  # a fresh draw for every bucket and step
    state.maybe_increase_iter(bucket)
    # The codec sees the bucket in key order: DDP lists a bucket's parameters in another order
    # after its first step (and again from the start after a restore), and QSGD's chunks and
    # draws, or top-k's ties, depend on where each value sits.
    grads = bucket.gradients()
    order = sorted(range(len(keys)), key=keys.__getitem__)
    in_order = order == list(range(len(keys)))
    flat = bucket.buffer() if in_order else torch.cat([grads[i].reshape(-1) for i in order])
    msg = torch.empty(codec.message_bytes(flat.numel()), dtype=torch.uint8)
    residual = None
    if state.use_error_feedback:
        residual = _np(state._flat_residual(bucket.index(), tuple(keys[i] for i in order),
                                            [grads[i].numel() for i in order]))
    codec.encode(_np(flat), _np(msg), round_, 1.0 / world, residual)
    gathered = torch.empty(world, msg.numel(), dtype=torch.uint8)
    work = dist.all_gather(list(gathered.unbind(0)), msg, group=group, async_op=True)

    def decode(_):
        codec.decode_gathered(_np(gathered), round_, _np(flat))
        if not in_order:
            for i, part in zip(order, flat.split([grads[i].numel() for i in order])):
                grads[i].copy_(part.view_as(grads[i]))
        return bucket.buffer()

    return _then(work.get_future(), decode)


def topk(state, bucket):
    """top-k sparsification (TopKState): (index, value) pairs all-gathered, summed locally."""
    return _gather_hook(state, bucket)


def qsgd(state, bucket):
    """QSGD (QSGDState): int8 levels and a norm per chunk all-gathered, decoded and summed."""
    return _gather_hook(state, bucket)

__all__ = ["HookState", "PowerSGDState", "QSGDState", "TopKState", "bf16", "fp16", "powersgd",
           "qsgd", "topk"]

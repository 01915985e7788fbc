"""Horovod's DistributedOptimizer (horovod/torch/optimizer.py) on cohort's collectives.

The wrapped optimizer is an instance of a class made on the fly, a subclass of the user's
optimizer class (Horovod's trick), so isinstance checks and LR schedulers still see an SGD or
an Adam. A hook on each parameter's gradient accumulator fires as backward produces the
gradient; once a parameter has had backward_passes_per_step of them, its gradient is copied
(compressed) into its bucket's flat buffer, and a bucket whose gradients are all in starts its
allreduce asynchronously while backward goes on. step() (or synchronize()) waits for them and
writes the reduced gradients back into p.grad.

Buckets hold parameters in reverse order at first (roughly the order backward produces them,
as DDP does), and after the first step in the order backward produced them on rank 0 (agreed by
a broadcast, as DDP rebuilds its buckets); grouped by wire dtype, up to HOROVOD_FUSION_THRESHOLD
bytes each (default 4 MiB; 0: one bucket per parameter). They start strictly in bucket order,
so every rank issues the same allreduces in the same order even when its hooks fire in another:
no negotiation is needed, and ranks cannot reduce different gradients into each other.
"""
import os
import warnings
from contextlib import contextmanager

import torch

from cohort.torch import _hvd_ops as ops
from cohort.torch._hvd_functions import Compression
from cohort.torch._hvd_functions import broadcast_object as _broadcast_object

_DEFAULT_BUCKET_BYTES = 4 << 20


class _Bucket:
    def __init__(self, params, wire_dtype):
        self.params = params
        self.offsets, at = {}, 0
        for p in params:
            self.offsets[p] = (at, p.numel())
            at += p.numel()
        self.flat = torch.zeros(at, dtype=wire_dtype)
        self.ctx = {}          # p -> the compressor's context, to decompress with
        self.waiting = set(params)
        self.handle = None     # the allreduce's handle once started

    def slot(self, p):
        at, n = self.offsets[p]
        return self.flat[at:at + n]


class _DistributedOptimizer:
    """The methods mixed into the user's optimizer class (first in the MRO)."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor):
        super().__init__(params)
        self._compression = compression
        named = self._named(named_parameters)
        self._names = {p: name for name, p in named}
        self.backward_passes_per_step = backward_passes_per_step
        self._op = op
        self._predivide = gradient_predivide_factor
        self._delay = {}
        self._hooked = set()      # hooks fired since the last synchronize (Horovod's _handles)
        self._grad_accs = []      # the accumulators must stay alive for their hooks to fire
        self._buckets, self._bucket_of, self._next_bucket = [], {}, 0
        self._ready_order, self._rebuilt = [], False  # for _rebuild_buckets after step 1
        self._synchronized = False
        self._should_synchronize = True
        if ops.size() > 1:  # a world of one has nothing to average (Horovod does the same)
            self._register_hooks()

    def _named(self, named_parameters):
        if named_parameters is None:
            return [(f"allreduce.noname.{i}", p) for group in self.param_groups
                    for i, p in enumerate(group["params"])]
        named = list(named_parameters)
        if any(not isinstance(x, tuple) for x in named):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                             "usually produced by model.named_parameters()")
        seen, dups = set(), set()
        for name, _ in named:
            (dups if name in seen else seen).add(name)
        if dups:
            raise ValueError("Parameter names in named_parameters must be unique. Found "
                             f"duplicates: {', '.join(sorted(dups))}")
        known = {id(p) for _, p in named}
        unnamed = [id(p) for g in self.param_groups for p in g["params"] if id(p) not in known]
        if unnamed:
            raise ValueError("named_parameters was specified, but one or more model parameters "
                             f"were not named. Python object ids: {unnamed}")
        return named

    def _register_hooks(self):
        params = [p for g in self.param_groups for p in g["params"] if p.requires_grad]
        self._params = params
        self._make_buckets(list(reversed(params)))
        for p in params:
            self._delay[p] = self.backward_passes_per_step
            p_tmp = p.expand_as(p)  # a view whose grad_fn leads to p's AccumulateGrad node
            grad_acc = p_tmp.grad_fn.next_functions[0][0]
            grad_acc.register_hook(self._make_hook(p))
            self._grad_accs.append(grad_acc)

    def _make_buckets(self, order):
        """Buckets of the parameters in `order`, filled up to HOROVOD_FUSION_THRESHOLD bytes per
        wire dtype."""
        limit = int(os.environ.get("HOROVOD_FUSION_THRESHOLD", _DEFAULT_BUCKET_BYTES))
        self._buckets, self._bucket_of, open_buckets = [], {}, {}
        for p in order:
            wire = self._compression.compress(torch.zeros(1, dtype=p.dtype))[0].dtype
            cur = open_buckets.setdefault(wire, [])
            item = torch.empty(0, dtype=wire).element_size()
            if cur and (sum(q.numel() for q in cur) + p.numel()) * item > limit:
                self._buckets.append(_Bucket(cur, wire))
                cur = open_buckets[wire] = []
            cur.append(p)
        for wire, cur in open_buckets.items():
            if cur:
                self._buckets.append(_Bucket(cur, wire))
        for b in self._buckets:
            for p in b.params:
                self._bucket_of[p] = b

    def _rebuild_buckets(self):
        """After the first step, buckets follow the order in which backward produced the
        gradients on rank 0 (agreed by broadcast, so every rank builds the same), parameters
        that got none last: a parameter backward never reaches no longer holds back every
        bucket behind it."""
        index = {p: i for i, p in enumerate(self._params)}
        seen = [index[p] for p in self._ready_order]
        order = seen + [i for i in range(len(self._params)) if i not in set(seen)]
        order = _broadcast_object(order, 0)
        self._make_buckets([self._params[i] for i in order])

    def _make_hook(self, p):
        def hook(*ignore):
            if self._delay[p] <= 0:
                raise AssertionError(
                    "Gradients were computed more than backward_passes_per_step times before "
                    "call to step(). Increase backward_passes_per_step to accumulate "
                    "gradients locally.")
            self._hooked.add(p)
            self._delay[p] -= 1
            if self._delay[p] == 0:
                if not self._rebuilt:
                    self._ready_order.append(p)
                self._ready(p)
        return hook

    def _ready(self, p):
        """p's gradient is final for this step: into its bucket; start what can start."""
        b = self._bucket_of[p]
        if p.grad is None:
            # Not computed here (a branch this rank did not take) but maybe on other ranks:
            # every rank must still send it, as zeros.
            p.grad = torch.zeros_like(p)
        wire, ctx = self._compression.compress(p.grad.detach())
        if wire.numel() != p.numel():
            raise ValueError(f"DistributedOptimizer: the compressor turned {self._names[p]}'s "
                             f"{p.numel()} elements into {wire.numel()}; cohort reduces "
                             "compressed gradients of the same size only")
        b.slot(p).copy_(wire.reshape(-1))
        b.ctx[p] = ctx
        b.waiting.discard(p)
        while self._next_bucket < len(self._buckets) and \
                not self._buckets[self._next_bucket].waiting:
            self._start(self._buckets[self._next_bucket])
            self._next_bucket += 1

    def _start(self, b):
        if self._op is ops.Average:  # Horovod's split of the average around the sum
            pre, post = 1.0 / self._predivide, self._predivide
        else:
            pre = post = 1.0
        name = self._names[b.params[0]]
        b.handle = ops.allreduce_async_(b.flat, name=name, op=self._op, prescale_factor=pre,
                                        postscale_factor=post)

    def synchronize(self):
        """Starts the allreduce of every gradient not yet started (those of parameters that
        backward did not reach, or reached fewer than backward_passes_per_step times), waits
        for all of them and writes the reduced gradients into p.grad."""
        if not self._buckets:
            self._synchronized = True
            return
        if not self._hooked:
            # Horovod goes on (a rank may legitimately skip backward); say so, since it is
            # usually a step() before loss.backward().
            warnings.warn("DistributedOptimizer: step()/synchronize() with no backward pass "
                          "since the last one; reducing the gradients as they are (zeros "
                          "where there are none)")
        for b in self._buckets:
            for p in list(b.waiting):
                self._delay[p] = 0
                self._ready(p)
        for b in self._buckets:
            ops.synchronize(b.handle)
            b.handle = None
            for p in b.params:
                reduced = self._compression.decompress(b.slot(p).view(p.shape), b.ctx.pop(p))
                with torch.no_grad():
                    p.grad.copy_(reduced)
                self._delay[p] = self.backward_passes_per_step
            b.waiting = set(b.params)
        self._next_bucket = 0
        self._hooked.clear()
        self._synchronized = True
        if not self._rebuilt:
            self._rebuilt = True
            self._rebuild_buckets()

    @contextmanager
    def skip_synchronize(self):
        """For a step() after an explicit synchronize() (e.g. to clip the reduced gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._delay:
            self._delay[p] = passes

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._hooked:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super().zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=ops.Average,
                         gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=ops.global_process_set):
    """Wraps `optimizer` so its step() applies gradients averaged (op) over every rank, as
    Horovod's does. Keep using the returned object in place of the original; its parameter
    groups are the same dicts, and its state starts from the original's."""
    ops._check_process_set(process_set)
    ops.resolve_op(None, op, "DistributedOptimizer")
    if gradient_predivide_factor != 1.0 and op is not ops.Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if backward_passes_per_step < 1:
        raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
    if num_groups or groups is not None:
        warnings.warn("DistributedOptimizer: num_groups/groups are ignored; cohort buckets by "
                      "HOROVOD_FUSION_THRESHOLD bytes")
    if sparse_as_dense:
        warnings.warn("DistributedOptimizer: sparse_as_dense is ignored; gradients are dense")
    base = optimizer.__class__
    cls = type(base.__name__, (_DistributedOptimizer, base), {})
    dist = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor)
    if optimizer.state:  # Horovod drops it; carrying it over costs nothing
        dist.load_state_dict(optimizer.state_dict())
    return dist

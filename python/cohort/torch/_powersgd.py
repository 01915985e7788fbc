"""PowerSGD as a DDP comm hook (cohort.torch.hooks.powersgd), with the semantics of torch's
torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook so that a script swaps one for the
other. Per bucket, once `iter` reaches start_powerSGD_iter (before: a plain averaging allreduce):
  1. each gradient with 2+ dimensions seen as a matrix M [n, m] (view(n, -1)) is compressed where
     (n + m) r * min_compression_rate < n m, r = min(n, m, rank); the others (biases) are
     allreduced as they are;
  2. M = gradient + residual (error feedback); Q [m, r] orthogonalized (drawn on first use, as
     torch draws it: one seed from np.random.RandomState(random_seed) per bucket, torch.randn per
     matrix, so both hooks start from the same Qs); P = M Q; allreduce(P);
  3. P orthogonalized; Q = M^T P; allreduce(Q); Q /= world (kept: the warm start);
  4. gradient = P Q^T; residual = M - P Q^T.
The products and the Gram-Schmidt are cohort's C++ (cohort.torch._hooks, parallel/ddp/
low_rank.h). Where torch differs: it orthogonalizes with QR above rank 2 (columns may differ in
sign: P Q^T does not), and its error feedback also covers the uncompressed gradients (their
residual, local - average, sums to zero over ranks); cohort keeps residuals for the compressed
matrices only. So parameters agree with torch's within float tolerance, not bit for bit."""
from collections import defaultdict

import numpy as np
import torch
import torch.distributed as dist

from cohort.torch._hook_base import HookState, _C, _allreduce, _check, _np, _then


class PowerSGDState(HookState):
    """torch's PowerSGDState's arguments and meaning. orthogonalization_epsilon is accepted for
    compatibility: cohort's Gram-Schmidt keeps a zero column zero instead of dividing by 0.
    compression_stats_logging_frequency and batch_tensors_with_same_shape change no result."""

    hook_name = "powersgd"

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1_000,
                 min_compression_rate=2, use_error_feedback=True, warm_start=True,
                 orthogonalization_epsilon=0, random_seed=0,
                 compression_stats_logging_frequency=10_000, batch_tensors_with_same_shape=False):
        _check(isinstance(matrix_approximation_rank, int) and matrix_approximation_rank >= 1,
               f"PowerSGDState: matrix_approximation_rank = {matrix_approximation_rank!r} must "
               "be an integer >= 1")
        _check(isinstance(start_powerSGD_iter, int) and start_powerSGD_iter >= 0,
               f"PowerSGDState: start_powerSGD_iter = {start_powerSGD_iter!r} must be an "
               "integer >= 0")
        # torch's own rule: DDP rebuilds its buckets after step 1, and the residuals and Qs of
        # torch's hook are kept per bucket (cohort's per parameter, but the rule is kept so that
        # the same arguments are accepted and refused by both).
        _check(not (use_error_feedback or warm_start) or start_powerSGD_iter > 1,
               f"PowerSGDState: start_powerSGD_iter = {start_powerSGD_iter} must be > 1 when "
               "use_error_feedback or warm_start is on (as torch's PowerSGDState)")
        _check(min_compression_rate > 0,
               f"PowerSGDState: min_compression_rate = {min_compression_rate!r} must be > 0")
        super().__init__(process_group)
        self.matrix_approximation_rank = matrix_approximation_rank
        self.start_powerSGD_iter = start_powerSGD_iter
        self.min_compression_rate = min_compression_rate
        self.use_error_feedback = bool(use_error_feedback)
        self.warm_start = bool(warm_start)
        self.orthogonalization_epsilon = orthogonalization_epsilon
        self.rng = np.random.RandomState(random_seed)
        self._qs = {}  # parameter key -> Q [m, r], the warm start

    def state_dict(self):
        out = super().state_dict()
        out["qs"] = {k: q.clone() for k, q in self._qs.items()}
        out["rng"] = self.rng.get_state()
        return out

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self._qs = {int(k): q.clone() for k, q in state["qs"].items()}
        self.rng.set_state(state["rng"])


def _plan(state, keys, grads):
    """(compressed [(key, grad, n, m, r)] in torch's order: grouped by shape, first seen first;
    uncompressed [grad])."""
    by_shape, plain = defaultdict(list), []
    for key, g in zip(keys, grads):
        if g.dim() > 1:
            n = g.shape[0]
            m = g.numel() // n
            r = min(n, m, state.matrix_approximation_rank)
            if (n + m) * r * state.min_compression_rate < n * m:
                by_shape[g.shape].append((key, g, n, m, r))
                continue
        plain.append(g)
    return [e for group in by_shape.values() for e in group], plain


def _start_qs(state, compressed):
    """Each matrix's Q: the last step's (warm start), else drawn as torch's hook draws it."""
    if state.warm_start and all(key in state._qs for key, *_ in compressed):
        return [state._qs[key] for key, *_ in compressed]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(state.rng.randint(1_000_000_000))
        qs = [torch.randn(m, r) for _, _, n, m, r in compressed]
    state._qs.update((key, q) for (key, *_), q in zip(compressed, qs))
    return qs


def powersgd(state, bucket):
    """PowerSGD (see the top of this module); a drop-in for torch's powerSGD_hook."""
    group = state._group()
    world = dist.get_world_size(group)
    buf = bucket.buffer()
    keys = state._keys(bucket)
    if state.iter < state.start_powerSGD_iter:  # warm-up: torch's default allreduce
        state.maybe_increase_iter(bucket)
        buf.div_(world)
        return _then(_allreduce(group, buf), lambda _: buf)
    state.maybe_increase_iter(bucket)

    compressed, plain = _plan(state, keys, bucket.gradients())
    ms = []
    for key, g, n, m, r in compressed:
        if not state.use_error_feedback:
            ms.append(g.view(n, m))
            continue
        res = state._residuals.get(key)
        _check(res is None or res.numel() == n * m, f"PowerSGDState: the residual of parameter "
               f"#{key} holds {0 if res is None else res.numel()} values, the parameter {n * m} "
               "(a checkpoint of another model?)")
        res = state._residuals[key] = torch.zeros(n, m) if res is None else res.view(n, m)
        _C.add_into(_np(res), _np(g))
        ms.append(res)
    qs = _start_qs(state, compressed)
    p_flat = torch.empty(sum(n * r for _, _, n, _, r in compressed))
    q_flat = torch.empty(sum(m * r for _, _, _, m, r in compressed))
    ps = [t.view(n, r) for t, (_, _, n, _, r) in
          zip(p_flat.split([n * r for _, _, n, _, r in compressed]), compressed)]
    new_qs = [t.view(m, r) for t, (_, _, _, m, r) in
              zip(q_flat.split([m * r for _, _, _, m, r in compressed]), compressed)]
    for mat, q, p in zip(ms, qs, ps):
        _C.powersgd_p(_np(mat), _np(q), _np(p))
    flat_plain = torch.cat([g.reshape(-1) for g in plain]) if plain else torch.zeros(0)

    def plain_done(_):
        flat_plain.div_(world)
        for g, part in zip(plain, flat_plain.split([g.numel() for g in plain])):
            g.copy_(part.view_as(g))
        return _allreduce(group, p_flat)

    def ps_done(_):
        for mat, p, q in zip(ms, ps, new_qs):
            _C.powersgd_q(_np(mat), _np(p), _np(q))
        return _allreduce(group, q_flat)

    def qs_done(_):
        q_flat.div_(world)
        for (key, g, n, m, _), p, q, mat in zip(compressed, ps, new_qs, ms):
            state._qs[key] = q
            _C.powersgd_out(_np(p), _np(q), _np(g.view(n, m)),
                            _np(mat) if state.use_error_feedback else None)
        return buf

    return _then(_then(_then(_allreduce(group, flat_plain), plain_done), ps_done), qs_done)

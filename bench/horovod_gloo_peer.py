"""The gloo run of a Horovod script, for bench/run_python_accuracy.sh: Horovod itself is not a
Debian package (and pip has no network here), so this stands in for `horovod.torch` on gloo with
the calls examples/python/horovod_mnist_style.py makes, each with Horovod's meaning on
torch.distributed's gloo: init, rank, size, local_rank, allreduce (average), broadcast_parameters,
broadcast_optimizer_state, DistributedOptimizer (gradients averaged over the ranks before each
step, fp16 compression optional), Compression, Average / Sum / Adasum. It then runs the script
given, with `import cohort.torch.horovod as hvd` answered by this module:

    cohort run -n 2 -- /usr/bin/python3 bench/horovod_gloo_peer.py SCRIPT [ARGS...]
"""
import os
import runpy
import sys

import torch
import torch.distributed as dist

Average, Sum, Adasum = "average", "sum", "adasum"


class Compression:
    none = torch.float32  # the dtype the gradient travels in
    fp16 = torch.float16


def init():
    dist.init_process_group("gloo")


def rank():
    return dist.get_rank()


def size():
    return dist.get_world_size()


def local_rank():
    return int(os.environ.get("LOCAL_RANK", "0"))


def allreduce(tensor, name=None, op=Average):
    out = tensor.detach().clone()
    dist.all_reduce(out)
    return out / size() if op == Average else out


def broadcast_parameters(params, root_rank=0):
    items = params.items() if hasattr(params, "items") else params
    for _, p in items:
        dist.broadcast(p.data, root_rank)


def broadcast_optimizer_state(optimizer, root_rank=0):
    for state in optimizer.state.values():  # empty before the first step, as in the example
        for v in state.values():
            if torch.is_tensor(v):
                dist.broadcast(v, root_rank)


class DistributedOptimizer:
    """The optimizer with each gradient averaged over the ranks just before its step."""

    def __init__(self, optimizer, named_parameters=None, compression=Compression.none,
                 op=Average, gradient_predivide_factor=1.0, **_):
        if op == Adasum:
            raise NotImplementedError("horovod_gloo_peer: no Adasum")
        self._opt, self._dtype, self._op = optimizer, compression, op
        self._pre = gradient_predivide_factor

    def step(self, closure=None):
        for group in self._opt.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.to(self._dtype) / self._pre
                dist.all_reduce(g)
                scale = self._pre / size() if self._op == Average else self._pre
                p.grad.copy_(g.to(p.grad.dtype) * scale)
        return self._opt.step(closure)

    def __getattr__(self, name):  # zero_grad, param_groups, state_dict, ...
        return getattr(self._opt, name)


if __name__ == "__main__":
    import cohort.torch  # the real package: the script's import resolves to this module

    sys.modules["cohort.torch.horovod"] = sys.modules[__name__]
    cohort.torch.horovod = sys.modules[__name__]
    script, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_path(script, run_name="__main__")

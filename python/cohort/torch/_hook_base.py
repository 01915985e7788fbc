"""What cohort.torch.hooks' hooks share: the per-parameter state with its state_dict, the future
chaining, and the C++ half cohort.torch._hooks."""
import torch
import torch.distributed as dist

try:
    from cohort.torch import _hooks as _C
except ImportError as e:  # the C++ half is built with the plugin (target cohort_torch)
    raise ImportError(f"cohort.torch.hooks: its extension cohort.torch._hooks is not built ({e}); "
                      "build the target cohort_torch") from e


def _np(t):
    """A NumPy view of a CPU tensor's memory: the C++ side writes through it."""
    return t.detach().numpy()


def _then(fut, fn):
    """A future of fn(value of fut); fn may return a future, whose value it then becomes. Torch
    1.13's Future.then does not flatten, and waiting inside a callback would block the thread
    that completes the backend's operations."""
    result = torch.futures.Future()

    def done(f):
        try:
            out = fn(f.value())
        except BaseException as e:  # noqa: B036 - the hook's caller must see every failure
            result.set_exception(e)
            return
        if isinstance(out, torch._C.Future):  # what get_future() returns; Future subclasses it
            out.add_done_callback(lambda g: _settle(result, g))
        else:
            result.set_result(out)

    fut.add_done_callback(done)
    return result


def _settle(result, f):
    try:
        result.set_result(f.value())
    except BaseException as e:  # noqa: B036
        result.set_exception(e)


def _allreduce(group, tensor):
    return dist.all_reduce(tensor, group=group, async_op=True).get_future()


def _check(ok, message):
    if not ok:
        raise ValueError(message)


class HookState:
    """The state every hook shares: the process group (None: the default group), the step
    counter `iter` (counted at each step's last bucket, as torch's PowerSGDState) and the
    per-parameter tensors. fp16 and bf16 take it or a bare process group, as torch's hooks."""

    hook_name = "cast"

    def __init__(self, process_group=None):
        self.process_group = process_group
        self.iter = 0
        self._key_of = {}       # id(parameter) -> key
        self._params = []       # holds the parameters so that their ids stay theirs
        self._residuals = {}    # key -> tensor
        self._flat = {}         # bucket index -> (keys, flat tensor whose views are residuals)

    def _group(self):
        return self.process_group if self.process_group is not None else dist.group.WORLD

    def _keys(self, bucket):
        keys = []
        for p in bucket.parameters():
            key = self._key_of.get(id(p))
            if key is None:
                key = self._key_of[id(p)] = len(self._params)
                self._params.append(p)
            keys.append(key)
        return tuple(keys)

    def maybe_increase_iter(self, bucket):
        if bucket.is_last():
            self.iter += 1

    def _flat_residual(self, bucket_index, keys, sizes):
        """The residuals of parameters `keys` (of `sizes` values) as one flat tensor, each
        parameter's part a view of it (what the codec encodes with error feedback); reassembled
        when the bucket's parameters change."""
        cached = self._flat.get(bucket_index)
        if cached is not None and cached[0] == keys:
            return cached[1]
        parts = [self._residuals.get(k, torch.zeros(n)).reshape(-1) for k, n in zip(keys, sizes)]
        for k, part, n in zip(keys, parts, sizes):
            _check(part.numel() == n, f"{type(self).__name__}: the residual of parameter #{k} "
                   f"holds {part.numel()} values, the parameter {n} (a checkpoint of another "
                   "model?)")
        flat = torch.cat(parts) if parts else torch.zeros(0)
        self._residuals.update(zip(keys, flat.split(sizes)))
        self._flat[bucket_index] = (keys, flat)
        return flat

    def state_dict(self):
        return {"hook": self.hook_name, "iter": self.iter,
                "residuals": {k: t.clone() for k, t in self._residuals.items()}}

    def load_state_dict(self, state):
        _check(state.get("hook") == self.hook_name, f"{type(self).__name__}.load_state_dict: the "
               f"state is of the hook {state.get('hook')!r}, not {self.hook_name!r}")
        self.iter = int(state["iter"])
        self._residuals = {int(k): t.clone() for k, t in state["residuals"].items()}
        self._flat = {}

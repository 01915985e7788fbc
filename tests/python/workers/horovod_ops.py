"""cohort.torch.horovod's collectives on N real ranks, each result checked against what torch
computes from every rank's input (inputs depend only on the rank, so each rank rebuilds them).
Run by test_horovod.py under `cohort run -n N`; exits non-zero on the first wrong number.
`--mismatch`: ranks allreduce tensors of different sizes, and print cohort's error."""
import sys
import warnings

import torch

import cohort
import cohort.torch.horovod as hvd


def value(r, shape, dtype=torch.float32):
    return (torch.arange(int(torch.tensor(shape).prod())).view(shape) % 5 + r + 1).to(dtype)


def check(got, want, what, tol=0.0):
    if got.shape != want.shape or got.dtype != want.dtype or \
            not torch.allclose(got.double(), want.double(), rtol=tol, atol=tol):
        raise AssertionError(f"rank {hvd.rank()}: {what}: got {got} want {want}")


def test_allreduce(r, n):
    stack = torch.stack([value(k, (3, 4)) for k in range(n)])
    check(hvd.allreduce(value(r, (3, 4))), stack.mean(0), "allreduce average", 1e-6)
    check(hvd.allreduce(value(r, (3, 4)), average=False), stack.sum(0), "allreduce average=False")
    for op, want in ((hvd.Sum, stack.sum(0)), (hvd.Min, stack.min(0).values),
                     (hvd.Max, stack.max(0).values), (hvd.Product, stack.prod(0))):
        check(hvd.allreduce(value(r, (3, 4)), op=op), want, f"allreduce {op}")
    t = value(r, (3, 4))
    assert hvd.allreduce_(t, op=hvd.Sum) is t
    check(t, stack.sum(0), "allreduce_")
    check(hvd.allreduce(value(r, (3, 4)), op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0),
          stack.sum(0) * 1.5, "allreduce pre/postscale")
    check(hvd.allreduce(value(r, (2, 3), torch.float64), compression=hvd.Compression.fp16),
          sum(value(k, (2, 3), torch.float64) for k in range(n)) / n, "allreduce fp16", 1e-3)
    # dtypes cohort's kernels lack travel widened; integers, bool, bf16, 0-dim tensors
    for dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
                  torch.bfloat16, torch.float16):
        got = hvd.allreduce(value(r, (5,), dtype), op=hvd.Sum)
        check(got, sum(value(k, (5,), torch.float64) for k in range(n)).to(dtype), f"{dtype}")
    check(hvd.allreduce(torch.tensor(r == 0), op=hvd.Max), torch.tensor(True), "bool")
    check(hvd.allreduce(torch.tensor(float(r))), torch.tensor((n - 1) / 2), "0-dim", 1e-6)
    strided = value(r, (4, 6))[:, ::2]
    check(hvd.allreduce(strided, op=hvd.Sum), sum(value(k, (4, 6))[:, ::2] for k in range(n)),
          "non-contiguous")
    # async handles: several in flight, poll, synchronize in any order
    handles = [hvd.allreduce_async(value(r, (64,)) * i, op=hvd.Sum) for i in range(4)]
    for i in reversed(range(4)):
        check(hvd.synchronize(handles[i]), sum(value(k, (64,)) for k in range(n)) * i, "async")
    h = hvd.allreduce_async_(value(r, (8,)))
    while not hvd.poll(h):
        pass
    check(hvd.synchronize(h), sum(value(k, (8,)) for k in range(n)) / n, "poll", 1e-6)
    # differentiable, as Horovod's: d/dx sum(allreduce_avg(x)) is allreduce_avg(ones)
    x = value(r, (3,)).requires_grad_()
    hvd.allreduce(x).sum().backward()
    check(x.grad, torch.ones(3), "allreduce backward", 1e-6)


def test_allgather(r, n):
    # rank k has k + 1 rows (uneven first dims), the other dims agree
    got = hvd.allgather(value(r, (r + 1, 2, 3)))
    check(got, torch.cat([value(k, (k + 1, 2, 3)) for k in range(n)]), "allgather uneven")
    got = hvd.allgather(value(r, (2, 5), torch.int8))
    check(got, torch.cat([value(k, (2, 5), torch.int8) for k in range(n)]), "allgather int8")
    empty_here = value(r, (0 if r == 0 else 2, 3))
    check(hvd.allgather(empty_here), torch.cat([value(k, (0 if k == 0 else 2, 3))
                                                for k in range(n)]), "allgather empty rank")
    h = hvd.allgather_async(torch.tensor([r]))
    check(hvd.synchronize(h), torch.arange(n), "allgather_async")
    assert hvd.allgather_object({"rank": r, "s": "x" * r}) == \
        [{"rank": k, "s": "x" * k} for k in range(n)]
    x = value(r, (r + 1, 2)).requires_grad_()
    (hvd.allgather(x) * 2).sum().backward()  # each row's gradient summed over ranks
    check(x.grad, torch.full((r + 1, 2), 2.0 * n), "allgather backward", 1e-6)
    try:
        hvd.allgather(value(r, (2, 3 + r)))
    except cohort.CollectiveMismatch as e:
        msg = str(e)
        assert f"rank {r} has a torch.float32 of shape (2, {3 + r})" in msg, msg
    else:
        raise AssertionError("allgather of different trailing dims did not raise")


def test_broadcast(r, n):
    root = n - 1
    check(hvd.broadcast(value(r, (4, 2)), root), value(root, (4, 2)), "broadcast")
    t = value(r, (7,), torch.int16)
    assert hvd.broadcast_(t, 0) is t
    check(t, value(0, (7,), torch.int16), "broadcast_ int16")
    obj = hvd.broadcast_object({"from": r, "list": list(range(r + 3))}, root_rank=1)
    assert obj == {"from": 1, "list": [0, 1, 2, 3]}, obj
    try:
        hvd.broadcast(torch.ones(1), n)
    except ValueError as e:
        assert f"root_rank {n} is not a rank" in str(e), e
    else:
        raise AssertionError("broadcast from a root outside the job did not raise")


def test_errors():
    try:
        hvd.allreduce(torch.ones(2), op=hvd.Adasum)
    except NotImplementedError as e:
        assert "Adasum is not supported" in str(e), e
    else:
        raise AssertionError("Adasum did not raise")
    try:
        hvd.allreduce(torch.ones(2), average=True, op=hvd.Sum)
    except ValueError as e:
        assert "supersedes" in str(e), e
    else:
        raise AssertionError("average with op did not raise")
    try:
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    except TypeError as e:
        assert "complex64 is not supported" in str(e), e
    else:
        raise AssertionError("complex64 did not raise")


def main():
    if hvd.is_initialized():
        raise AssertionError("initialized before hvd.init()")
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    assert 0 <= hvd.local_rank() < hvd.local_size() and hvd.cross_size() == 1
    if "--mismatch" in sys.argv:
        try:
            hvd.allreduce(torch.ones(4 + r))
        except cohort.CollectiveMismatch as e:
            print(f"mismatch rank {r}: {e}")
        sys.stdout.flush()
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        test_allreduce(r, n)
        test_allgather(r, n)
        test_broadcast(r, n)
        test_errors()
    hvd.shutdown()
    print(f"horovod ops ok rank {r} of {n}")


main()

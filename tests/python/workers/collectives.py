"""Every ProcessGroup operation and dtype on N real ranks, each result checked against NumPy
computing the same thing from every rank's input (which each rank can rebuild: inputs depend
only on the rank). Run by test_collectives.py under `cohort run -n N`; exits non-zero on the
first wrong number. `--torch` also runs the ops on torch CPU tensors."""
import sys

import numpy as np

import cohort

DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8", "bf16"]
OPS = ["sum", "avg", "min", "max", "prod"]


def values(rank, count, shift=0):
    # Small integers, 1..4: exact in every dtype (bf16 included), and products of 3 ranks
    # stay below 256 so uint8 does not wrap.
    return (np.arange(count) * 7 + rank * 3 + shift) % 4 + 1


def as_dtype(v, dtype):
    """v as an array of dtype; bf16 as the uint16 bit patterns of bfloat16 (passed with
    dtype='bf16')."""
    if dtype == "bf16":
        return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return v.astype(dtype)


def as_float(a, dtype):
    if dtype == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float64)


def reduce_expected(stack, op, n, dtype):
    if op == "sum":
        return stack.sum(0)
    if op == "avg":
        s = stack.sum(0)
        return s / n if dtype in ("float32", "float64", "float16", "bf16") else s // n
    return {"min": stack.min(0), "max": stack.max(0), "prod": stack.prod(0)}[op]


def check(got, want, what):
    if not np.allclose(got, want, rtol=1e-2, atol=0):
        raise AssertionError(f"rank {cohort.rank()}: {what}: got {got[:8]} want {want[:8]}")


def test_allreduce(g, r, n, count):
    for dtype in DTYPES:
        kw = {"dtype": "bf16"} if dtype == "bf16" else {}
        for op in OPS:
            a = as_dtype(values(r, count), dtype)
            g.allreduce(a, op, **kw)
            stack = np.stack([values(k, count) for k in range(n)])
            want = reduce_expected(stack, op, n, dtype)
            if dtype == "bf16" and op == "avg":  # the quotient rounded to bf16's 8 bits
                want = as_float(as_dtype(want, "bf16"), "bf16")
            check(as_float(a, dtype), want, f"allreduce {op} {dtype} x{count}")


def test_others(g, r, n, count):
    for dtype in DTYPES:
        kw = {"dtype": "bf16"} if dtype == "bf16" else {}
        rows = [as_float(as_dtype(values(k, count), dtype), dtype) for k in range(n)]
        b = as_dtype(values(r, count) if r == n - 1 else np.zeros(count), dtype)
        g.broadcast(b, root=n - 1, **kw)
        check(as_float(b, dtype), rows[n - 1], f"broadcast {dtype}")
        out = as_dtype(np.zeros(n * count), dtype)
        g.allgather(out, as_dtype(values(r, count), dtype), **kw)
        check(as_float(out, dtype), np.concatenate(rows), f"allgather {dtype}")
        inplace = as_dtype(np.zeros(n * count), dtype)
        inplace[r * count:(r + 1) * count] = as_dtype(values(r, count), dtype)
        g.allgather(inplace, **kw)
        check(as_float(inplace, dtype), np.concatenate(rows), f"allgather in place {dtype}")
        full = as_dtype(values(r, n * count, shift=1), dtype)
        part = as_dtype(np.zeros(count), dtype)
        g.reduce_scatter(part, full, "max", **kw)
        want = np.stack([values(k, n * count, shift=1) for k in range(n)]).max(0)
        check(as_float(part, dtype), want[r * count:(r + 1) * count], f"reduce_scatter {dtype}")


def test_p2p_and_async(g, r, n, count):
    # A ring: send to the next rank, receive from the previous; the send is asynchronous so
    # every rank can post its receive.
    nxt, prev = (r + 1) % n, (r - 1) % n
    src = np.full(count, r + 10, dtype=np.float32)
    dst = np.zeros(count, dtype=np.float32)
    w = g.send(src, nxt, tag=3, async_op=True)
    g.recv(dst, prev, tag=3)
    assert w.wait(timeout=30) is True and w.is_completed()
    check(dst, np.full(count, prev + 10), "send/recv ring")
    # Several operations in flight, waited for in issue order; one handle dropped unwaited
    # (its destructor waits, so the array is complete when we read it).
    a = np.full(count, r + 1.0)
    b = np.full(count, r + 1.0)
    wa = g.allreduce(a, cohort.ReduceOp.SUM, async_op=True)
    wb = g.allreduce(b, "max", async_op=True)
    wa.wait()
    wb.wait()
    check(a, np.full(count, n * (n + 1) / 2), "async sum")
    check(b, np.full(count, float(n)), "async max")
    c = np.ones(count, dtype=np.int64)
    g.allreduce(c, async_op=True)  # dropped at once
    g.barrier(timeout=30)
    check(c, np.full(count, n), "dropped async handle")


def test_subgroups(g, r, n):
    pair = g.new_group([0, n - 1])
    if r in (0, n - 1):
        x = np.array([float(r)])
        pair.allreduce(x)
        check(x, np.array([float(n - 1)]), "new_group allreduce")
        assert pair.size == 2 and pair.rank == (0 if r == 0 else 1)
    else:
        assert pair is None
    half = g.split(color=r % 2)
    y = np.array([1], dtype=np.int32)
    half.allreduce(y)
    check(y, np.array([len(range(r % 2, n, 2))]), "split allreduce")


def test_torch(g, r, n):
    import torch
    for dt in (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.uint8):
        t = torch.full((5,), r + 1, dtype=dt)
        g.allreduce(t, "sum")
        assert t.tolist() == [n * (n + 1) // 2] * 5, (dt, t)
    out = torch.zeros(n * 3)
    g.allgather(out, torch.full((3,), float(r)))
    assert out.tolist() == [float(k) for k in range(n) for _ in range(3)], out
    w = g.broadcast(torch.arange(4.0) * (r == 0), root=0, async_op=True)
    w.wait()


def main():
    world = cohort.init(timeout=60)
    g, r, n = world.group, world.rank, world.size
    assert (cohort.rank(), cohort.size()) == (r, n) and 0 <= cohort.local_rank() < n
    assert cohort.local_size() == n
    for count in (7, 40000):  # small and large: different algorithms
        test_allreduce(g, r, n, count)
        test_others(g, r, n, count)
        test_p2p_and_async(g, r, n, count)
    test_subgroups(g, r, n)
    if "--torch" in sys.argv:
        test_torch(g, r, n)
    cohort.barrier()
    cohort.shutdown()
    print(f"collectives ok rank {r} of {n}")


if __name__ == "__main__":
    main()

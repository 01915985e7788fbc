"""Every operation of the "cohort" backend on every CPU dtype, checked against gloo's result for
the same inputs in the same job (a gloo group made beside the cohort world).

gloo (torch 1.13) lacks some of them: bfloat16, int16 and bool tensors, ReduceOp.AVG,
reduce_scatter, all_gather_into_tensor and the list form of all_to_all. For those, gloo computes
the answer through an exact stand-in: the values are small integers, so float32 for bfloat16
and int32 for int16 give the same bits once cast back; bool is reduced as uint8 with max (or) /
min (and); AVG is gloo's SUM divided as torch divides that dtype; the others come from gloo's
all_reduce, all_gather and all_to_all_single. Every comparison is exact (torch.equal).

Prints "ops OK <count>" on success; exits 1 listing every mismatch otherwise.
"""
import time

import torch
import torch.distributed as dist

from _exit import finish, say
import cohort.torch  # noqa: F401  (registers "cohort")

torch.set_num_threads(1)
dist.init_process_group("cohort")
RANK, N = dist.get_rank(), dist.get_world_size()
GLOO = dist.new_group(backend="gloo")
assert dist.get_backend() == "cohort"

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.uint8, torch.bool]
# What gloo computes in for the dtypes it lacks.
PROXY = {torch.bfloat16: torch.float32, torch.int16: torch.int32, torch.bool: torch.uint8}
OPS = {"SUM": dist.ReduceOp.SUM, "AVG": dist.ReduceOp.AVG, "PRODUCT": dist.ReduceOp.PRODUCT,
       "MIN": dist.ReduceOp.MIN, "MAX": dist.ReduceOp.MAX}
BITWISE = {"BAND": dist.ReduceOp.BAND, "BOR": dist.ReduceOp.BOR, "BXOR": dist.ReduceOp.BXOR}
failures = []
checks = 0


def check(what, got, want):
    global checks
    checks += 1
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        failures.append(f"{what}: cohort {got.flatten()[:8].tolist()} ({got.dtype}, "
                        f"{tuple(got.shape)}) vs gloo {want.flatten()[:8].tolist()} "
                        f"({want.dtype}, {tuple(want.shape)})")


def values(dtype, rank, numel=37, op="SUM", salt=0):
    """Small integers, exact in every dtype (products over 3 ranks stay <= 27)."""
    i = torch.arange(numel, dtype=torch.int64)
    if dtype == torch.bool:
        return ((i + rank + salt) % 3 == 0)
    if op == "PRODUCT":
        v = (i * 7 + rank * 3 + salt) % 3 + 1
    elif dtype in (torch.uint8,):
        v = (i * 5 + rank * 11 + salt) % 10
    else:
        v = (i * 5 + rank * 11 + salt) % 10 - 4  # negative values too
    return v.to(dtype)


def gloo_allreduce(t, op_name):
    """gloo's all_reduce of t (in place semantics: returns the result)."""
    dtype = t.dtype
    if op_name == "AVG":
        if dtype in (torch.int8, torch.int16):  # cohort reduces those in int32
            s = gloo_allreduce(t.to(torch.int32), "SUM")
            return torch.div(s, N, rounding_mode="trunc").to(dtype)
        s = gloo_allreduce(t, "SUM")
        if dtype.is_floating_point:
            return s / N
        return torch.div(s, N, rounding_mode="trunc")
    if dtype == torch.bool:
        op = {"SUM": "MAX", "MAX": "MAX", "PRODUCT": "MIN", "MIN": "MIN"}.get(op_name, op_name)
        u = t.to(torch.uint8)
        dist.all_reduce(u, op={**OPS, **BITWISE}[op], group=GLOO)
        return u != 0
    x = t.to(PROXY.get(dtype, dtype))
    dist.all_reduce(x, op={**OPS, **BITWISE}[op_name], group=GLOO)
    return x.to(dtype)


def gloo_allgather(t):
    x = t.to(PROXY.get(t.dtype, t.dtype))
    out = [torch.empty_like(x) for _ in range(N)]
    dist.all_gather(out, x, group=GLOO)
    return [o.to(t.dtype) if t.dtype != torch.bool else o != 0 for o in out]


def test_reductions(dtype):
    tag = str(dtype).replace("torch.", "")
    for name, op in OPS.items():
        x = values(dtype, RANK, op=name)
        if dtype == torch.bool and name == "AVG":
            try:
                dist.all_reduce(x, op=op)
                failures.append("all_reduce AVG on bool did not raise")
            except RuntimeError as e:
                assert "AVG" in str(e) and "bool" in str(e), e
            continue
        want = gloo_allreduce(x.clone(), name)
        got = x.clone()
        dist.all_reduce(got, op=op)
        check(f"all_reduce {name} {tag}", got, want)
        # reduce to the last rank: only the root's result is defined
        got = x.clone()
        dist.reduce(got, dst=N - 1, op=op)
        if RANK == N - 1:
            check(f"reduce {name} {tag}", got, want)
        if name in ("SUM", "MIN", "AVG"):
            # reduce_scatter: rank k gets block k of the all-reduce of every rank's list
            ins = [values(dtype, RANK, numel=9, op=name, salt=k) for k in range(N)]
            wants = [gloo_allreduce(b.clone(), name) for b in ins]
            out = torch.empty(9, dtype=dtype)
            dist.reduce_scatter(out, ins, op=op)
            check(f"reduce_scatter {name} {tag}", out, wants[RANK])
            out = torch.empty(9, dtype=dtype)
            dist.reduce_scatter_tensor(out, torch.cat(ins), op=op)
            check(f"reduce_scatter_tensor {name} {tag}", out, wants[RANK])
    for name, op in BITWISE.items():
        x = values(dtype, RANK) if dtype == torch.bool else values(dtype, RANK) + 5
        if dtype.is_floating_point:
            try:
                dist.all_reduce(x, op=op)
                failures.append(f"all_reduce {name} on {tag} did not raise")
            except RuntimeError as e:
                assert name in str(e) and "integer" in str(e), e
            continue
        got = x.clone()
        dist.all_reduce(got, op=op)
        check(f"all_reduce {name} {tag}", got, gloo_allreduce(x.clone(), name))
    # coalesced: several tensors reduced in one call
    xs = [values(dtype, RANK, numel=k + 3, op="SUM", salt=k) for k in range(3)]
    got = [x.clone() for x in xs]
    dist.all_reduce_coalesced(got, op=dist.ReduceOp.MAX)
    for k, x in enumerate(xs):
        check(f"all_reduce_coalesced MAX {tag} [{k}]", got[k], gloo_allreduce(x.clone(), "MAX"))


def test_movement(dtype):
    tag = str(dtype).replace("torch.", "")
    x = values(dtype, RANK, numel=23)
    parts = gloo_allgather(x)
    # broadcast from the last rank
    got = x.clone()
    dist.broadcast(got, src=N - 1)
    check(f"broadcast {tag}", got, parts[N - 1])
    out = [torch.empty_like(x) for _ in range(N)]
    dist.all_gather(out, x)
    for k in range(N):
        check(f"all_gather {tag} [{k}]", out[k], parts[k])
    flat = torch.empty(N * 23, dtype=dtype)
    dist.all_gather_into_tensor(flat, x)
    check(f"all_gather_into_tensor {tag}", flat, torch.cat(parts))
    # gather / scatter at rank 1 % N
    root = 1 % N
    out = [torch.empty_like(x) for _ in range(N)] if RANK == root else None
    dist.gather(x, out, dst=root)
    if RANK == root:
        for k in range(N):
            check(f"gather {tag} [{k}]", out[k], parts[k])
    ins = [values(dtype, root, numel=5, salt=k) for k in range(N)]
    got = torch.empty(5, dtype=dtype)
    dist.scatter(got, ins if RANK == root else None, src=root)
    check(f"scatter {tag}", got, ins[RANK])
    # all-to-all, equal blocks then rows split unevenly (rank r sends r + k + 1 rows to k)
    a = values(dtype, RANK, numel=N * 4).reshape(N * 2, 2)
    got = torch.empty_like(a)
    dist.all_to_all_single(got, a)
    want = torch.empty_like(a.to(PROXY.get(dtype, dtype)))
    dist.all_to_all_single(want, a.to(want.dtype), group=GLOO)
    check(f"all_to_all_single {tag}", got, want.to(dtype) if dtype != torch.bool else want != 0)
    in_splits = [RANK + k + 1 for k in range(N)]
    out_splits = [k + RANK + 1 for k in range(N)]
    a = values(dtype, RANK, numel=sum(in_splits) * 3).reshape(-1, 3)
    got = torch.empty(sum(out_splits), 3, dtype=dtype)
    dist.all_to_all_single(got, a, out_splits, in_splits)
    p = PROXY.get(dtype, dtype)
    want = torch.empty(sum(out_splits), 3, dtype=p)
    dist.all_to_all_single(want, a.to(p), out_splits, in_splits, group=GLOO)
    check(f"all_to_all_single splits {tag}", got, want.to(dtype) if dtype != torch.bool else want != 0)
    # the list form, blocks of different sizes
    ins = list(torch.split(a, in_splits))
    outs = [torch.empty(s, 3, dtype=dtype) for s in out_splits]
    dist.all_to_all(outs, ins)
    check(f"all_to_all {tag}", torch.cat(outs), want.to(dtype) if dtype != torch.bool else want != 0)
    # point-to-point around the ring, blocking and async
    nxt, prv = (RANK + 1) % N, (RANK - 1) % N
    got = torch.empty_like(x)
    reqs = [dist.isend(x, nxt, tag=3), dist.irecv(got, prv, tag=3)]
    for r in reqs:
        r.wait()
    check(f"isend/irecv {tag}", got, parts[prv])
    got = torch.empty_like(x)
    if RANK % 2 == 0:
        dist.send(x, nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(x, nxt)
    check(f"send/recv {tag}", got, parts[prv])


def test_layouts():
    """Non-contiguous tensors and a large message (several pipeline chunks) in and out."""
    base = values(torch.float32, RANK, numel=12 * 10).reshape(12, 10)
    t = base.t()  # not contiguous
    want = gloo_allreduce(t.contiguous(), "SUM")
    dist.all_reduce(t)
    check("all_reduce non-contiguous", t.contiguous(), want)
    src = values(torch.float32, 0, numel=120).reshape(12, 10)
    t = torch.zeros(10, 12).t() if RANK != 0 else src.clone()
    dist.broadcast(t, src=0)
    check("broadcast non-contiguous", t.contiguous(), src)
    # int8 sums wrap modulo 256, as gloo's do (cohort reduces them in int32 and narrows)
    x = torch.full((5,), 100 + RANK, dtype=torch.int8)
    want = gloo_allreduce(x.clone(), "SUM")
    dist.all_reduce(x)
    check("all_reduce int8 wrap", x, want)
    big = (torch.arange(600_000, dtype=torch.float32) % 97) * (RANK + 1)
    want = gloo_allreduce(big.clone(), "SUM")
    dist.all_reduce(big)
    check("all_reduce 2.4 MB", big, want)
    # Both ranks isend a large tensor before their irecv (8 MB, more than cohort's transport
    # buffers): the backend posts them together, as gloo lets them pass.
    nxt, prv = (RANK + 1) % N, (RANK - 1) % N
    big = torch.full((2 << 20,), float(RANK))
    got = torch.empty_like(big)
    for w in [dist.isend(big, nxt), dist.irecv(got, prv)]:
        w.wait()
    check("isend/irecv 8 MB both ways", got, torch.full((2 << 20,), float(prv)))
    empty = torch.empty(0)
    dist.all_reduce(empty)
    check("all_reduce empty", empty, torch.empty(0))


def test_async():
    """Several operations in flight, waited for out of order; futures carry the results."""
    xs = [values(torch.float32, RANK, numel=50, salt=k) for k in range(4)]
    wants = [gloo_allreduce(x.clone(), "SUM") for x in xs]
    got = [x.clone() for x in xs]
    works = [dist.all_reduce(g, async_op=True) for g in got]
    fut = works[2].get_future()
    for w in reversed(works):
        assert w.wait() is True
        assert w.is_completed() and w.is_success()
    for k in range(4):
        check(f"async all_reduce [{k}]", got[k], wants[k])
    check("future value", fut.wait()[0], wants[2])
    # A large operation in flight first: the small ones after it (which would otherwise run on
    # this thread) queue behind it and finish in issue order; callbacks see their results.
    big = values(torch.float32, RANK, numel=40000, salt=9)
    big_want = gloo_allreduce(big.clone(), "SUM")
    small = [x.clone() for x in xs]
    works = [dist.all_reduce(big, async_op=True)] + [dist.all_reduce(s, async_op=True)
                                                      for s in small]
    doubled = works[-1].get_future().then(lambda f: f.value()[0] * 2)
    for w in works:
        w.wait()
    check("large all_reduce in flight", big, big_want)
    for k in range(4):
        check(f"all_reduce queued behind it [{k}]", small[k], wants[k])
    check("future.then", doubled.wait(), wants[3] * 2)
    # A small collective that rank 0 issues and does not wait for (it sleeps) still completes
    # for the ranks that wait: held back, it is posted by the completion thread within ms.
    x = torch.ones(4)
    if RANK == 0:
        h = dist.all_reduce(x, async_op=True)
        time.sleep(1.0)
        h.wait()
    else:
        start = time.monotonic()
        dist.all_reduce(x)
        if time.monotonic() - start > 0.5:
            failures.append(f"all_reduce waited {time.monotonic() - start:.2f} s for rank 0's "
                            "held collective (posted only when rank 0 woke)")
    check("all_reduce not waited for", x, torch.full((4,), float(N)))
    w = dist.barrier(async_op=True)
    w.wait()
    b = dist.broadcast(torch.ones(3), src=0, async_op=True)
    b.wait()
    assert b.is_completed()


for dt in DTYPES:
    test_reductions(dt)
    test_movement(dt)
test_layouts()
test_async()
dist.barrier()
if failures:
    print(f"rank {RANK}: {len(failures)} of {checks} checks failed:", *failures, sep="\n  ")
    finish(1)
say(f"ops OK {checks}")
finish(0)

"""What the "cohort" backend refuses, and how it says so: each case must raise RuntimeError
whose message names the operation (and what to do instead). 2 ranks. Prints "errors OK"."""
import datetime
import sys

import torch
import torch.distributed as dist

from _exit import finish, say
import cohort.torch  # noqa: F401  (registers "cohort")
from cohort.torch import _c10d

torch.set_num_threads(1)
dist.init_process_group("cohort")
RANK, N = dist.get_rank(), dist.get_world_size()
assert N == 2
failures = []
VERBOSE = RANK == 0 and "-v" in sys.argv


def expect(what, fn, *words):
    try:
        fn()
    except RuntimeError as e:
        msg = str(e).splitlines()[0]
        missing = [w for w in words if w not in msg]
        if missing:
            failures.append(f"{what}: message lacks {missing}: {msg}")
        if VERBOSE:
            print(f"{what}: {msg}", flush=True)
        return msg
    failures.append(f"{what}: did not raise")
    return ""


expect("tensor on another device", lambda: _c10d._check_operand(torch.empty(3, device="meta"),
                                                                "allreduce"),
       "cohort backend", "allreduce", "meta", "CPU tensors only")
expect("sparse tensor", lambda: dist.all_reduce(torch.ones(3).to_sparse()),
       "all_reduce", "dense")
expect("bitwise op on floats", lambda: dist.all_reduce(torch.ones(3), op=dist.ReduceOp.BXOR),
       "all_reduce", "BXOR", "integer or bool")
expect("PREMUL_SUM", lambda: dist.all_reduce(torch.ones(3), op=dist._make_nccl_premul_sum(2.0)),
       "all_reduce", "PREMUL_SUM")
expect("AVG of bool", lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool),
                                              op=dist.ReduceOp.AVG), "all_reduce", "AVG", "bool")
expect("complex reduce", lambda: dist.reduce(torch.ones(3, dtype=torch.complex64), dst=0),
       "reduce", "ComplexFloat")
expect("recv from any source", lambda: dist.recv(torch.ones(3)), "recv", "src=")
expect("all_gather_coalesced", lambda: dist.all_gather_coalesced([[torch.ones(2)] * N],
                                                                 [torch.ones(2)]),
       "all_gather_coalesced", "not supported")
expect("all_gather list too long", lambda: dist.all_gather([torch.ones(2)] * (N + 1),
                                                           torch.ones(2)), "all_gather", "2 tensors")
expect("all_gather wrong size", lambda: dist.all_gather([torch.ones(3)] * N, torch.ones(2)),
       "all_gather", "3 elements")
expect("send to itself", lambda: dist.send(torch.ones(2), dst=RANK), "send", "another rank")
expect("all_to_all_single split mismatch",
       lambda: dist.all_to_all_single(torch.ones(4), torch.ones(4), [1, 1, 2], [2, 2]),
       "all_to_all_single", "split")
dist.barrier()  # nothing above was issued to a peer: the world is still in step

# Ranks that disagree: a mismatch, in a group of its own (a failed group refuses more work).
bad = dist.new_group(backend="cohort")
expect("count mismatch", lambda: dist.all_reduce(torch.ones(3 + RANK), group=bad),
       "allreduce")

# A rank that never arrives: the group's timeout (from new_group) ends the wait, and a
# shorter wait(timeout) says the operation is still running.
slow = dist.new_group(backend="cohort", timeout=datetime.timedelta(seconds=1))
if RANK == 0:
    w = dist.all_reduce(torch.ones(3), group=slow, async_op=True)
    expect("wait(timeout)", lambda: w.wait(timeout=datetime.timedelta(milliseconds=50)),
           "allreduce", "did not complete within 50 ms")
    msg = expect("group timeout", w.wait, "allreduce", "rank 0")
    if "tim" not in msg.lower():
        failures.append(f"group timeout: message does not say it timed out: {msg}")
dist.barrier()

if failures:
    print(f"rank {RANK}:", *failures, sep="\n  ")
    finish(1)
say("errors OK")
finish(0)

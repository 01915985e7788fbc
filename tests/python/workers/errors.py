"""Error cases on 2 real ranks, each a Python exception of the matching type with cohort's
message naming the operation, argument or rank. Run by test_errors.py under `cohort run -n 2`,
once for a collective mismatch and once with --timeout: either leaves the communicator
unusable, so each ends its run."""
import sys
import time

import numpy as np

import cohort


def expect(exc_type, fn, *words):
    try:
        fn()
    except exc_type as e:
        msg = str(e)
        missing = [w for w in words if w not in msg]
        assert not missing, f"rank {cohort.rank()}: {missing} not in: {msg}"
        return e
    raise AssertionError(f"rank {cohort.rank()}: {fn} raised no {exc_type.__name__}")


def main():
    world = cohort.init(timeout=30)
    g, r = world.group, world.rank
    # Local checks, before anything is sent: the same on every rank.
    expect(cohort.InvalidArgument, lambda: g.allgather(np.zeros(5, np.float32),
                                                       np.zeros(2, np.float32)),
           "allgather on rank", "'output' has 5 elements", "2 x 2 = 4")
    expect(cohort.InvalidArgument, lambda: g.reduce_scatter(np.zeros(2), np.zeros(3)),
           "reduce_scatter on rank", "'input' has 3 elements")
    expect(ValueError, lambda: g.allgather(np.zeros(4, np.float64), np.zeros(2, np.float32)),
           "'input' is f32 but 'output' is f64")
    expect(ValueError, lambda: g.broadcast(np.zeros(2), root=5), "root 5")
    expect(ValueError, lambda: g.send(np.zeros(2), peer=r), f"peer {r}")
    g.barrier(timeout=10)  # the group still works after local errors

    if "--timeout" in sys.argv:
        # Rank 1 waits for a message rank 0 never sends: cohort.Timeout, a TimeoutError.
        if r == 1:
            e = expect(cohort.Timeout, lambda: g.recv(np.zeros(1), peer=0, tag=9, timeout=0.5),
                       "recv", "rank 1")
            assert isinstance(e, TimeoutError)
            print(f"rank 1 timeout: {e}")
        else:
            time.sleep(2)  # stays connected (an exit would be an IoError on rank 1)
    else:
        # Ranks disagree on the count: a CollectiveMismatch (a ValueError) on every rank,
        # naming both sides; the communicator is unusable afterwards (an IoError, an OSError).
        e = expect(cohort.CollectiveMismatch, lambda: g.allreduce(np.zeros(4 + r, np.float32)),
                   "allreduce", f"on rank {r}", "count=4", "count=5")
        assert isinstance(e, cohort.InvalidArgument) and isinstance(e, ValueError)
        print(f"rank {r} mismatch: {e}")
        e = expect(cohort.IoError, lambda: g.barrier(timeout=5), "unusable")
        assert isinstance(e, OSError)
    print(f"errors ok rank {r}")


if __name__ == "__main__":
    main()

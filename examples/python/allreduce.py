"""Every rank adds its numbers into everyone's array, in place, with cohort's collectives.

    cmake --build build --target cohort_python
    PYTHONPATH=build/python build/bin/cohort run -n 2 -- /usr/bin/python3 examples/python/allreduce.py

Under torchrun, mpirun or srun it runs unchanged (cohort.init reads their variables); started
alone it is a world of one.
"""
import numpy as np

import cohort

with cohort.init(timeout=60) as world:
    rank, size = world.rank, world.size
    grads = np.full(4, rank + 1, dtype=np.float32)  # rank r holds r + 1
    cohort.allreduce(grads, op="avg")  # in place: the mean over the ranks
    expected = (size + 1) / 2
    assert np.all(grads == expected), grads

    # Asynchronous: start the operation, do other work, then wait for it.
    counts = np.array([rank, 1], dtype=np.int64)
    work = cohort.allreduce(counts, cohort.ReduceOp.SUM, async_op=True)
    work.wait(timeout=30)

    # Everyone's block, in rank order.
    everyone = np.zeros(size * 2, dtype=np.int64)
    cohort.allgather(everyone, np.array([rank, rank * 10], dtype=np.int64))

    if rank == 0:
        print(f"{size} ranks: mean {grads[0]:g}, ranks summed {counts[0]}, gathered "
              f"{everyone.tolist()}")
    cohort.barrier()

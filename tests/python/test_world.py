"""cohort.init and the ProcessGroup in a world of one (this process, no launcher variables):
the API's shape, buffers of every kind, async handles."""
import array

import numpy as np
import pytest

import cohort


def test_world_of_one():
    with cohort.init() as world:
        assert (world.rank, world.size, world.local_rank, world.local_size) == (0, 1, 0, 1)
        assert (cohort.rank(), cohort.size(), cohort.local_rank(), cohort.local_size()) == \
            (0, 1, 0, 1)
        assert world.backend == "native" and world.group.backend == "native"
        assert cohort.get_world() is world
        assert "rank 0 of 1" in repr(world)
    assert world.closed and "closed" in repr(world)
    cohort.shutdown()  # after the with block: a no-op
    assert "native" in cohort.available_backends()


def test_ops_on_any_buffer():
    cohort.init()
    try:
        for buf in (np.arange(5, dtype=np.float32), bytearray(b"\x01\x02"),
                    array.array("d", [1.5, 2.5]), memoryview(np.ones(3, np.int64))):
            before = bytes(memoryview(buf))
            cohort.allreduce(buf, cohort.ReduceOp.MAX)
            cohort.broadcast(buf, root=0)
            assert bytes(memoryview(buf)) == before  # a world of one changes nothing
        out = np.zeros(3, np.int32)
        cohort.allgather(out, np.array([4, 5, 6], np.int32))
        assert out.tolist() == [4, 5, 6]
        part = np.zeros(2)
        cohort.reduce_scatter(part, np.array([1.0, 2.0]), "prod")
        assert part.tolist() == [1.0, 2.0]
        cohort.barrier(timeout=5)
    finally:
        cohort.shutdown()


def test_async_handle_keeps_buffers():
    with cohort.init() as world:
        w = world.group.allreduce(np.ones(1000), "avg", async_op=True)
        assert "allreduce" in w.name and w.wait(timeout=10) is True and w.is_completed()
        assert w.wait() is True  # waiting again is fine
        assert world.group.new_group([0]).size == 1
        assert world.group.split(0).rank == 0 and world.group.split(-1) is None
    cohort.shutdown()


def test_subgroups_close_with_the_world():
    world = cohort.init()
    sub = world.group.new_group([0])
    cohort.shutdown()
    with pytest.raises(cohort.InvalidArgument, match="left the world"):
        sub.barrier()
    assert "closed" in repr(sub)

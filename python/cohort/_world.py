"""The default world of this process (what cohort.init() joins), and module-level shortcuts to
its ProcessGroup, in the style of torch.distributed and Horovod.

The C++ core keeps no global state; this module holds the one default World a script uses, and
leaves it at interpreter exit so the connections close before Python tears down.
"""
import atexit

from cohort import _core

_world = None


def init(backend="native", timeout=300.0):
    """Join the job this process was launched into and make it the default world.

    The launcher's environment says rank, size and where to meet: `cohort run`, torchrun,
    mpirun and srun are understood (backend "mpi" where cohort was built with MPI). A process
    without launcher variables is a world of one. `timeout` (seconds) is the deadline for every
    rank to arrive and the default deadline of each operation. Returns the World, which is also
    a context manager that leaves the job on exit.
    """
    global _world
    if _world is not None and not _world.closed:
        raise _core.InvalidArgument(
            "cohort.init: this process already joined a world "
            f"(rank {_world.rank} of {_world.size}); call cohort.shutdown() first")
    _world = _core.join(backend, float(timeout))
    return _world


def is_initialized():
    return _world is not None and not _world.closed


def get_world():
    """The default World; InvalidArgument if cohort.init() was not called (or shut down)."""
    if not is_initialized():
        raise _core.InvalidArgument("cohort: no world joined; call cohort.init() first")
    return _world


def shutdown():
    """Leave the default world (closes its connections). No-op if none is joined. Ranks do not
    wait for each other here: call cohort.barrier() first if a peer may still be sending."""
    global _world
    if _world is not None:
        _world.close()
        _world = None


atexit.register(shutdown)


def rank():
    return get_world().rank


def size():
    return get_world().size


def local_rank():
    return get_world().local_rank


def local_size():
    return get_world().local_size


def _group():
    return get_world().group


def allreduce(tensor, op="sum", **kw):
    """In place on `tensor`: op is a cohort.ReduceOp or 'sum', 'avg', 'min', 'max', 'prod'.
    Keywords of every operation: async_op=False (True: returns a Work), timeout=None (seconds;
    None: the world's), dtype=None (reinterpret the elements, e.g. a uint16 array as 'bf16')."""
    return _group().allreduce(tensor, op, **kw)


def broadcast(tensor, root=0, **kw):
    return _group().broadcast(tensor, root, **kw)


def allgather(output, input=None, **kw):
    """output holds size() blocks of input's length, rank k's at block k; input None: this
    rank's block is already in place in output."""
    return _group().allgather(output, input, **kw)


def reduce_scatter(output, input, op="sum", **kw):
    """input holds size() blocks of output's length; block k, reduced, lands on rank k."""
    return _group().reduce_scatter(output, input, op, **kw)


def send(tensor, peer, tag=0, **kw):
    return _group().send(tensor, peer, tag, **kw)


def recv(tensor, peer, tag=0, **kw):
    return _group().recv(tensor, peer, tag, **kw)


def barrier(timeout=None):
    return _group().barrier(timeout=timeout)


def new_group(ranks):
    """A ProcessGroup of `ranks` (rank i of it is ranks[i]); None on ranks not listed.
    Collective: every rank calls it with the same list."""
    return _group().new_group(list(ranks))


def split(color, key=None):
    """MPI_Comm_split: one group per colour, ordered by (key, rank); a negative colour gets
    None. Collective."""
    return _group().split(color, key)

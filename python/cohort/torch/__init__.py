"""cohort as a torch.distributed backend (docs/python.md, "A torch.distributed backend").

    import torch.distributed as dist
    import cohort.torch                      # registers the "cohort" backend
    dist.init_process_group("cohort")        # under `cohort run` or torchrun
    dist.all_reduce(tensor)                  # CPU tensors, every ReduceOp, every dtype

Importing this module registers "cohort" with torch.distributed.Backend.register_backend; the
backend is the C++ ProcessGroup of cohort.torch._c10d, which runs every collective on cohort's
Communicator (shared memory between ranks of one host, TCP between hosts). Groups made with
dist.new_group(backend="cohort") form their own Communicator through the same store.
"""
import torch.distributed as _dist

try:
    from cohort.torch._c10d import ProcessGroupCohort, create_process_group
except ImportError as _plugin_error:
    # The C++ plugin is not built (no libtorch-dev); cohort.torch.horovod, pure Python on
    # cohort._core, must still import. Using the backend says why it is missing.
    ProcessGroupCohort = None
    _why = str(_plugin_error)

    def create_process_group(*args, **kwargs):
        raise RuntimeError("cohort.torch: the torch.distributed backend was not built (its "
                           f"extension cohort.torch._c10d failed to import: {_why}); build "
                           "with libtorch-dev installed (target cohort_torch)")

BACKEND = "cohort"

# register_backend refuses a second registration; a module is imported once, but
# importlib.reload or two copies of the package on sys.path would try again.
if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, create_process_group)


def is_available():
    """Whether the "cohort" backend works: its C++ plugin is built and registered with
    torch.distributed (registration alone happens on import either way)."""
    return ProcessGroupCohort is not None and BACKEND.upper() in _dist.Backend._plugins


__all__ = ["BACKEND", "ProcessGroupCohort", "create_process_group", "is_available"]

"""cohort's errors as Python exceptions: the class hierarchy, the local checks of buffers and
arguments (a world of one, in this process), and the errors only real peers produce (a
collective mismatch, a timeout; workers/errors.py under `cohort run -n 2`)."""
import numpy as np
import pytest

import cohort


@pytest.fixture
def group():
    with cohort.init(timeout=10) as world:
        yield world.group
    cohort.shutdown()


def test_exception_classes_mirror_the_cpp_hierarchy():
    assert issubclass(cohort.Error, RuntimeError)
    assert issubclass(cohort.InvalidArgument, cohort.Error)
    assert issubclass(cohort.InvalidArgument, ValueError)
    assert issubclass(cohort.CollectiveMismatch, cohort.InvalidArgument)
    assert issubclass(cohort.IoError, OSError) and issubclass(cohort.IoError, cohort.Error)
    assert issubclass(cohort.AuthRefused, cohort.IoError)
    assert issubclass(cohort.Timeout, TimeoutError) and issubclass(cohort.Timeout, cohort.Error)
    assert issubclass(cohort.Internal, cohort.Error)
    assert str(cohort.Timeout("same message")) == "same message"


@pytest.mark.parametrize("make, words", [
    (lambda: np.zeros(8, np.float32)[::2], ["allreduce", "'tensor'", "not C-contiguous"]),
    (lambda: np.zeros((3, 3), np.float64).T, ["not C-contiguous"]),
    (lambda: np.zeros(3, bool), ["element type bool", "supported"]),
    (lambda: np.zeros(3, np.complex64), ["element type complex64"]),
    (lambda: np.zeros(3, np.uint16), ["element type uint16", "dtype='bf16'"]),
    (lambda: [1.0, 2.0], ["is a list", "buffer protocol"]),
    (lambda: b"abc", ["read-only", "writes its result"]),
])
def test_bad_buffers_are_invalid_arguments(group, make, words):
    with pytest.raises(cohort.InvalidArgument) as e:
        group.allreduce(make())
    for w in words:
        assert w in str(e.value)


def test_read_only_input_is_fine_where_only_read(group):
    src = np.arange(4, dtype=np.float32)
    src.flags.writeable = False
    out = np.zeros(4, np.float32)
    group.allgather(out, src)
    assert out.tolist() == [0, 1, 2, 3]


def test_bad_arguments(group):
    x = np.zeros(4, np.float32)
    with pytest.raises(cohort.InvalidArgument, match="unknown op 'median'"):
        group.allreduce(x, "median")
    with pytest.raises(ValueError, match="dtype=f64 has 8-byte elements"):
        group.allreduce(x, dtype="f64")
    with pytest.raises(ValueError, match="unknown dtype 'f8'"):
        group.allreduce(x, dtype="f8")
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        group.allreduce(x, timeout=-1)
    with pytest.raises(ValueError, match="root 1 is not a rank"):
        group.broadcast(x, root=1)


def test_torch_tensor_checks(group):
    torch = pytest.importorskip("torch")
    with pytest.raises(cohort.InvalidArgument, match="non-contiguous tensor"):
        group.allreduce(torch.zeros(4, 4).t())
    with pytest.raises(cohort.InvalidArgument, match="torch.bool"):
        group.allreduce(torch.zeros(4, dtype=torch.bool))


def test_use_before_init_and_after_shutdown():
    cohort.shutdown()
    with pytest.raises(cohort.InvalidArgument, match="call cohort.init"):
        cohort.rank()
    world = cohort.init(timeout=10)
    with pytest.raises(cohort.InvalidArgument, match="already joined"):
        cohort.init()
    group = world.group
    cohort.shutdown()
    assert world.closed and not cohort.is_initialized()
    with pytest.raises(cohort.InvalidArgument, match="left the world"):
        group.allreduce(np.zeros(1))


def test_collective_mismatch_names_both_ranks(launch):
    r = launch(2, "workers/errors.py")
    assert "errors ok rank 0" in r.stdout and "errors ok rank 1" in r.stdout, r.stdout


def test_timeout_is_a_timeout_error(launch):
    r = launch(2, "workers/errors.py", "--timeout")
    assert "rank 1 timeout: " in r.stdout and "timed out after 500 ms" in r.stdout, r.stdout

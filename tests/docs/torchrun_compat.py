"""torchrun for Debian 12's python3-torch (1.13) on Python 3.11, where `torchrun` itself fails
in elastic's to_map() (its Std enum parses "0" to None): the same entry point with None read as
Std.NONE (no redirection, no tee). Used as `python3 torchrun_compat.py ARGS` in place of
`torchrun ARGS`; test_torchrun.py runs the torchrun recipe of docs/training.md through it."""
import sys

import torch.distributed.elastic.multiprocessing as mp
from torch.distributed.elastic.multiprocessing.api import Std
from torch.distributed import run

_to_map = mp.to_map


def _to_map_none_is_none(val_or_map, local_world_size):
    return _to_map(Std.NONE if val_or_map is None else val_or_map, local_world_size)


mp.to_map = _to_map_none_is_none

if __name__ == "__main__":
    sys.argv[0] = "torchrun"
    sys.exit(run.main())

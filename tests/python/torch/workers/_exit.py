"""How the test workers report and leave: say(line) and finish(code).

torch 1.13's gloo frees a finished operation's tensors on its own thread after waking the
waiter; when the interpreter is already exiting by then, that thread dies taking the GIL and the
process aborts ("terminate called without an active exception", seen at 3 ranks on 2 cores).
The workers compare cohort with gloo, so they flush their output and leave with os._exit once
every group is destroyed."""
import gc
import os
import sys

import torch.distributed as dist


def say(line):
    """Prints one line in one write: ranks under torchrun share a pipe, and print's separate
    writes of the text and the newline interleave there."""
    sys.stdout.flush()
    os.write(1, (line + "\n").encode())


def finish(code=0):
    gc.collect()  # DDP's reducer holds its group until its reference cycle is collected
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

"""The torchrun recipe of docs/training.md, run for real: its lines (the job secret, then torchrun
with --no_python) in bash, through torchrun_compat.py (Debian's torchrun fails on Python 3.11),
with a few steps on a port of its own. Skipped where PyTorch is not installed."""
import os
import shlex
import socket
import subprocess

import pytest

import doc_blocks as db
from test_docs import BLOCKS, BUILD, ROOT

COMPAT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchrun_compat.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_recipe(tmp_path):
    pytest.importorskip("torch.distributed.run")
    block = next(b for b in BLOCKS if b.path == "docs/training.md" and "torchrun " in b.body)
    lines = db.command_lines(block)
    i = next(k for k, l in enumerate(lines) if l.lstrip().startswith("torchrun "))
    setup = [l for l in lines[:i] if "COHORT_JOB_SECRET" in l]
    assert setup, f"{block.where}: the torchrun recipe does not set COHORT_JOB_SECRET"
    words = db.split_commands(lines[i])[0]
    words = [os.path.join(BUILD, "bin", "cohort") if db.is_cohort(w) else w for w in words]
    # --standalone is c10d rendezvous on port 29400: the same on a free port, so that runs at the
    # same time do not meet.
    assert "--standalone" in words, f"{block.where}: torchrun without --standalone"
    words = [w for w in words[1:] if w != "--standalone"]
    rdzv = ["--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{free_port()}", "--rdzv_id=docs"]
    cmd = (["/usr/bin/python3", COMPAT] + rdzv + words +
           ["--set", "train.max_steps=3", "--set", f"run.dir={tmp_path}",
            "--set", "train.eval_batches=1", "--set", "run.progress=plain"])
    script = "\n".join(setup + [shlex.join(cmd)])
    env = {k: v for k, v in os.environ.items() if not k.startswith("COHORT_")}
    r = subprocess.run(["bash", "-ec", script], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"{block.where}: the torchrun recipe failed:\n{script}\n{out[-3000:]}"
    assert "2 workers" in out and "done:" in out, out[-3000:]

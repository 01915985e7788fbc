"""cohort.torch.hooks, cohort's codecs as DDP comm hooks: against torch's own hooks, top-k's
error feedback, the state through a torch checkpoint, the example, and the argument errors."""
import os
import subprocess

import pytest

from conftest import PYTHON, ROOT, rank_lines, worker_env

torch = pytest.importorskip("torch")
EXAMPLE = os.path.join(ROOT, "examples", "python", "ddp_powersgd.py")


def test_hooks_against_torch(cohort_run):
    """fp16 within 1e-6 of torch's fp16_compress_hook (not bit for bit: torch rounds g to fp16
    and then halves it, which rounds again where g / 2 is an fp16 subnormal; cohort rounds
    g / 2 once), bf16 identical to torch's bf16_compress_hook, powersgd within 2e-5 of torch's
    powerSGD_hook (the same Qs; sums in another order), topk's residual carrying exactly what was
    not sent, qsgd reproducible; every hook lowers the loss."""
    r = cohort_run(2, "workers/hooks_vs_torch.py", "--steps", 8)
    lines = rank_lines(r, "hooks OK")
    assert len(lines) == 2, r.stdout + r.stderr
    assert all("bf16 identical" in l for l in lines), lines


def test_checkpoint_resumes_every_hook(cohort_run, tmp_path):
    """N steps, torch.save of model, optimizer and hook state, fresh processes, M more steps:
    the parameters of N + M steps straight, bit for bit."""
    r = cohort_run(2, "workers/hooks_checkpoint.py", "--phase", "save", "--dir", tmp_path)
    assert len(rank_lines(r, "save OK")) == 2, r.stdout + r.stderr
    r = cohort_run(2, "workers/hooks_checkpoint.py", "--phase", "resume", "--dir", tmp_path)
    assert len(rank_lines(r, "resume OK")) == 2, r.stdout + r.stderr


def test_example_matches_torch_powersgd(cohort_run):
    """examples/python/ddp_powersgd.py: cohort's hook and torch's give the same losses (to the
    printed 3 decimals) and the loss goes down."""
    out = {}
    for hook, backend in (("cohort", "cohort"), ("torch", "gloo")):
        r = cohort_run(2, EXAMPLE, "--hook", hook, "--backend", backend, "--steps", 20,
                       check=backend != "gloo")
        if backend == "gloo" and r.returncode != 0:
            # The peer's own rare abort at interpreter exit (torch 1.13's gloo with DDP: "terminate
            # called without an active exception" after destroy_process_group; seen once in a CI
            # run, 0 of 8 by hand). Its result line is printed before; anything else fails.
            assert r.returncode == 134 and "terminate called without an active exception" in (
                r.stdout + r.stderr), r.stdout + r.stderr
        line = [l for l in r.stdout.splitlines() if f"{hook} powersgd on {backend}: 2 ranks" in l]
        assert len(line) == 1, r.stdout + r.stderr
        out[hook] = line[0].split(", loss ")[1]
    assert out["cohort"] == out["torch"], out
    first, last = map(float, out["cohort"].split(" -> "))
    assert last < first, out


BAD = [  # (a state made with a bad argument, the argument its ValueError must name)
    ("PowerSGDState(None, matrix_approximation_rank=0)", "matrix_approximation_rank"),
    ("PowerSGDState(None, matrix_approximation_rank=2.5)", "matrix_approximation_rank"),
    ("PowerSGDState(None, start_powerSGD_iter=1)", "start_powerSGD_iter"),
    ("PowerSGDState(None, min_compression_rate=0)", "min_compression_rate"),
    ("TopKState(None, ratio=0)", "ratio"),
    ("TopKState(None, ratio=1.5)", "ratio"),
    ("QSGDState(None, levels=0)", "levels"),
    ("QSGDState(None, levels=128)", "levels"),
    ("QSGDState(None).load_state_dict(hooks.TopKState(None).state_dict())", "'topk'"),
]


def test_bad_arguments_name_the_argument():
    """One interpreter for every case (each import of torch costs a second or two)."""
    code = "from cohort.torch import hooks\n" + "".join(
        f"try:\n    hooks.{make}\n    print('no error')\n"
        "except ValueError as e:\n    print('ValueError:', e)\n" for make, _ in BAD)
    r = subprocess.run([PYTHON, "-c", code], env=worker_env(), capture_output=True, text=True,
                       timeout=60)
    lines = r.stdout.splitlines()
    assert len(lines) == len(BAD), r.stdout + r.stderr
    for (make, argument), line in zip(BAD, lines):
        assert line.startswith("ValueError:") and argument in line, (make, line)


def test_torch_powersgd_hook_runs_unchanged_on_cohort(cohort_run):
    """torch's own powerSGD_hook (torch.distributed.algorithms) on the cohort backend: its
    callback waits for a second allreduce, which completes on another thread of the plugin's
    pool; the parameters are gloo's within 1e-5 (the same Qs, sums of two in either order)."""
    r = cohort_run(2, "workers/torch_algorithms.py", timeout=90)
    lines = rank_lines(r, "algorithms OK")
    assert len(lines) == 2, r.stdout + r.stderr

"""model.type = "sequential" and its PyTorch twin (cohort.torch.sequential, docs/models.md): the
torch.nn.Sequential built from a layer list has cohort's names and shapes, and computes what
cohort computes. A model with batch norm, a residual block, average pooling and dropout trained
in PyTorch evaluates in cohort, before any step, to PyTorch's accuracy; a language model's
weights load into cohort's model of the same list."""
import os
import re
import subprocess
import sys

import pytest

from conftest import COHORT, PACKAGE_DIR, PYTHON, ROOT, worker_env

torch = pytest.importorskip("torch")
sys.path.insert(0, PACKAGE_DIR)
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))
from cohort.torch.sequential import build  # noqa: E402
from torch_to_cohort import save_safetensors  # noqa: E402

EXPORT = os.path.join(ROOT, "examples", "python", "torch_to_cohort.py")
CNN_TOML = os.path.join(ROOT, "examples", "fashion_cnn.toml")
EVAL0 = re.compile(r"eval \((test|validation)\) after step 0: loss ([0-9.]+)(, accuracy ([0-9.]+)%)?")
IMAGE_LAYERS = ("conv2d 8 kernel=3 padding=1; batchnorm; relu; maxpool 2; "
                "residual; conv2d 8 kernel=3 padding=1; batchnorm; relu; end; avgpool 2; "
                "flatten; dropout 0.2; linear 32; relu; linear")
LM_LAYERS = ("embedding 32; positions; residual; layernorm; attention 4; end; "
             "residual; layernorm; linear 64; gelu; linear 32; end; layernorm; linear")


def run(cmd):
    return subprocess.run(cmd, cwd=ROOT, env=worker_env(), capture_output=True, text=True,
                          timeout=300)


def cohort_eval_at_start(tmp_path, layers, weights, *sets):
    args = [COHORT, "train", CNN_TOML, "--set", "model.type=sequential",
            "--set", f"model.layers={layers}", "--set", f"model.init_from={weights}",
            "--set", "train.eval_at_start=true", "--set", "train.max_steps=1",
            "--set", f"run.dir={tmp_path / 'runs'}", "--set", "run.progress=plain"]
    for s in sets:
        args += ["--set", s]
    r = run(args)
    assert r.returncode == 0, r.stdout + r.stderr
    return EVAL0.search(r.stdout)


def test_names_and_shapes_are_cohorts():
    net = build(IMAGE_LAYERS, (1, 28, 28), 10)
    shapes = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    assert shapes["0.weight"] == (8, 1, 3, 3)
    assert shapes["1.running_var"] == (8,)
    assert shapes["4.0.weight"] == (8, 8, 3, 3)  # inside the residual block at position 4
    assert shapes["8.weight"] == (32, 8 * 7 * 7)  # 28, max-pooled to 14, average-pooled to 7
    assert net(torch.zeros(2, 1, 28, 28)).shape == (2, 10)


def test_torch_weights_evaluate_to_torchs_accuracy_before_any_step(tmp_path):
    weights = tmp_path / "seq.safetensors"
    r = run([PYTHON, EXPORT, "--layers", IMAGE_LAYERS, "--steps", "150", "--out", str(weights)])
    assert r.returncode == 0, r.stderr
    torch_acc = float(re.search(r"test accuracy ([0-9.]+)%", r.stdout).group(1))
    assert torch_acc > 60.0  # trained: chance is 10%
    m = cohort_eval_at_start(tmp_path, IMAGE_LAYERS, weights)
    assert abs(float(m.group(4)) - torch_acc) <= 0.01 + 1e-9, (torch_acc, m.group(0))


def test_a_language_models_weights_load_and_give_torchs_loss(tmp_path):
    torch.manual_seed(0)
    net = build(LM_LAYERS, (16,), 256)
    weights = tmp_path / "lm.safetensors"
    save_safetensors(net.state_dict(), str(weights))
    # One byte repeated: every window cohort evaluates is the same 16 tokens, so torch can
    # score exactly what cohort scores.
    text = tmp_path / "text.txt"
    text.write_bytes(b"a" * 2000)
    m = cohort_eval_at_start(tmp_path, LM_LAYERS, weights, "data.dataset=text",
                             f"data.path={text}", "model.block_size=16", "data.batch_size=4",
                             "train.eval_batches=2")
    assert m is not None
    with torch.no_grad():
        x = torch.full((1, 16), ord("a"), dtype=torch.int64)
        loss = torch.nn.functional.cross_entropy(net.eval()(x).reshape(-1, 256), x.reshape(-1))
    assert loss.item() > 1.0  # untrained
    assert abs(float(m.group(2)) - loss.item()) < 1e-4 * loss.item(), (loss.item(), m.group(0))

"""model.init_from with weights from PyTorch (docs/models.md, "Pretrained weights"): the CNN
trained by examples/python/torch_to_cohort.py evaluates in cohort, before any step, to the
accuracy PyTorch gave it; a head left out keeps its initialisation; a file of another model is
refused with the names of both sides."""
import os
import re
import subprocess

import pytest

from conftest import COHORT, PYTHON, ROOT, worker_env

torch = pytest.importorskip("torch")
EXPORT = os.path.join(ROOT, "examples", "python", "torch_to_cohort.py")
CNN_TOML = os.path.join(ROOT, "examples", "fashion_cnn.toml")
EVAL0 = re.compile(r"eval \(test\) after step 0: loss [0-9.]+, accuracy ([0-9.]+)%")


def run(cmd):
    return subprocess.run(cmd, cwd=ROOT, env=worker_env(), capture_output=True, text=True,
                          timeout=300)


def cohort_train(tmp_path, weights, *sets):
    args = [COHORT, "train", CNN_TOML, "--set", f"model.init_from={weights}",
            "--set", "train.eval_at_start=true", "--set", "train.max_steps=1",
            "--set", f"run.dir={tmp_path / 'runs'}", "--set", "run.progress=plain"]
    for s in sets:
        args += ["--set", s]
    return run(args)


@pytest.fixture(scope="module")
def torch_cnn(tmp_path_factory):
    out = tmp_path_factory.mktemp("weights") / "cnn.safetensors"
    r = run([PYTHON, EXPORT, "--steps", "200", "--out", str(out)])
    assert r.returncode == 0, r.stderr
    acc = float(re.search(r"test accuracy ([0-9.]+)%", r.stdout).group(1))
    return out, acc


def test_torch_weights_evaluate_to_torchs_accuracy_before_any_step(tmp_path, torch_cnn):
    weights, torch_acc = torch_cnn
    r = cohort_train(tmp_path, weights)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"initial weights from {weights}: 8 tensor(s)" in r.stdout
    cohort_acc = float(EVAL0.search(r.stdout).group(1))
    assert torch_acc > 70.0  # trained: chance is 10%
    assert abs(cohort_acc - torch_acc) <= 0.01 + 1e-9, (torch_acc, cohort_acc)


def test_a_skipped_head_keeps_its_initialisation(tmp_path, torch_cnn):
    weights, torch_acc = torch_cnn
    r = cohort_train(tmp_path, weights, "model.init_skip=fc2.")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "6 tensor(s), 2 left at their initialisation" in r.stdout
    assert float(EVAL0.search(r.stdout).group(1)) < torch_acc - 20  # a fresh head: near chance


def test_weights_of_another_model_are_refused_naming_both_sides(tmp_path, torch_cnn):
    weights, _ = torch_cnn
    r = run([COHORT, "train", CNN_TOML, "--set", "model.type=mlp",
             "--set", f"model.init_from={weights}", "--set", f"run.dir={tmp_path / 'runs'}"])
    assert r.returncode != 0
    err = r.stderr
    assert f"model.init_from '{weights}'" in err, err
    assert "not in the file: layers.0.bias" in err, err
    assert "not in the model: conv1.weight, conv1.bias" in err, err
    assert "model.init_map" in err and "model.init_skip" in err, err

"""cohort.train runs cohort's trainer (the `cohort` executable, 1 and 2 workers) and returns
its summary; cohort.read_metrics reads the run's records."""
import pytest

import cohort

TINY = {
    "data": {"dataset": "synthetic", "synthetic_samples": 256, "batch_size": 32},
    "model": {"hidden": [16]},
    "run": {"threads": 1, "progress": "none"},
}


@pytest.mark.parametrize("workers", [1, 2])
def test_train_returns_the_summary(tmp_path, workers):
    s = cohort.train(TINY, workers=workers, overrides={"run.dir": str(tmp_path)}, timeout=120)
    assert s.workers == workers and s.steps == 256 // (32 * workers)
    assert 0 <= s.accuracy <= 1 and s.loss > 0 and s.samples_per_s > 0
    assert s.run_dir == str(tmp_path / "train")
    records = cohort.read_metrics(s.run_dir)
    assert records[-1]["event"] == "summary" or any(r["event"] == "summary" for r in records)
    evals = cohort.read_metrics(s.run_dir, event="eval")
    assert evals and evals[-1]["loss"] == pytest.approx(s.loss)
    assert cohort.read_metrics(s.run_dir + "/metrics.jsonl") == records


def test_train_from_a_file_with_overrides(tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text('[data]\ndataset = "synthetic"\nsynthetic_samples = 128\n'
                   "[model]\nhidden = [8]\n[run]\nthreads = 1\n")
    s = cohort.train(cfg, overrides=["data.batch_size=16", f"run.dir={tmp_path}"], cwd=tmp_path)
    assert s.steps == 8 and s.run_dir == str(tmp_path / "tiny")
    assert "metrics:" in s.output


def test_train_errors(tmp_path):
    with pytest.raises(cohort.InvalidArgument, match="unknown config key 'bogus.key'"):
        cohort.train(TINY, overrides={"bogus.key": 1, "run.dir": str(tmp_path)})
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        cohort.train(TINY, workers=0)
    with pytest.raises(cohort.IoError, match="executable was not found"):
        cohort.train(TINY, cohort_bin=str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError):
        cohort.read_metrics(tmp_path / "no_run")

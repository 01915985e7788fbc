"""cohort.train and cohort.read_metrics: cohort's trainer from Python.

train() runs the `cohort` executable as a child process, for one worker as for several
(`cohort train CONFIG --workers N --set key=value ...`): the trainer's threads, its signal
handling and its memory stay out of the Python process, and a crash there is an exception here.
The summary is the run's own record of it (the "summary" event of metrics.jsonl), so the
numbers are the ones `cohort report` shows.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field

from cohort import _core

_METRICS_LINE = re.compile(r"metrics: (\S*metrics\.jsonl)\s*$")
_USAGE_ERROR = 2  # the CLI's exit status for an InvalidArgument (a bad key, value or file)


@dataclass
class TrainSummary:
    steps: int
    loss: float               # the last evaluation's mean loss
    accuracy: float           # the last evaluation's accuracy (0..1); None for language models
    samples_per_s: float      # all workers together
    train_seconds: float
    workers: int
    run_dir: str
    record: dict = field(repr=False)   # the whole summary record of metrics.jsonl
    output: str = field(repr=False)    # what the run printed (stdout and stderr)


def read_metrics(run_dir, event=None):
    """The records of <run_dir>/metrics.jsonl (or of that file itself) as a list of dicts, in
    the order they were written; with `event`, only those of that kind ("step", "eval",
    "summary", ...)."""
    path = os.fspath(run_dir)
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    records = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as e:
                raise _core.IoError(f"read_metrics: {path}:{n}: not a JSON record ({e})") from None
            if event is None or rec.get("event") == event:
                records.append(rec)
    return records


def _find_cli(cohort_bin):
    """The `cohort` executable: the argument (only it, when given), else $COHORT_CLI, the
    build this package came from, then PATH."""
    tried = []
    if cohort_bin is not None:
        candidates = [os.fspath(cohort_bin)]
    else:
        candidates = [os.environ.get("COHORT_CLI")]
        try:
            from cohort import _build_info
            candidates.append(_build_info.COHORT_CLI)
        except ImportError:
            pass
        candidates.append(shutil.which("cohort"))
    for c in candidates:
        if c:
            if os.access(c, os.X_OK):
                return c
            tried.append(c)
    raise _core.IoError("cohort.train: the `cohort` executable was not found (tried: "
                        f"{', '.join(tried) or 'PATH'}); build it (cmake --build build --target "
                        "cohort_cli) or pass cohort_bin=")


def _toml_value(v):
    """A --set value: TOML's spelling of booleans and lists; strings bare at the top level."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(json.dumps(x) if isinstance(x, str) else _toml_value(x)
                               for x in v) + "]"
    return str(v)


def _flatten(d, prefix=""):
    """{"optim": {"lr": 0.1}} and {"optim.lr": 0.1} alike -> ["optim.lr=0.1"]."""
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += _flatten(v, f"{prefix}{k}.")
        else:
            out.append(f"{prefix}{k}={_toml_value(v)}")
    return out


def _command(cli, config, workers, overrides):
    if isinstance(config, dict):  # the keys themselves: no file, every key a --set
        sets = _flatten(config)
        if not any(s.startswith("run.name=") for s in sets):
            sets.append("run.name=train")  # not the stem of /dev/null
        path = "/dev/null"
    else:
        sets, path = [], os.fspath(config)
    if isinstance(overrides, dict):
        sets += _flatten(overrides)
    else:
        sets += list(overrides or [])
    cmd = [cli, "train", path]
    if workers != 1:
        cmd += ["--workers", str(workers)]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def _run(cmd, cwd, timeout, echo):
    """Runs cmd in its own process group; returns (exit status, output). Past `timeout` the
    whole group (the launcher and its workers) is killed and cohort.Timeout raised."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    lines = []

    def pump():  # reads while the main thread waits with a deadline
        for line in proc.stdout:
            lines.append(line)
            if echo:
                print(line, end="", flush=True)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=timeout)
    except BaseException as e:  # the deadline, or Ctrl-C: never leave workers behind
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if isinstance(e, subprocess.TimeoutExpired):
            raise _core.Timeout(f"cohort.train: `{' '.join(cmd)}` did not finish within "
                                f"{timeout} s; killed it") from None
        raise
    reader.join(timeout=10)
    return rc, "".join(lines)


def train(config, workers=1, overrides=None, *, cwd=None, timeout=None, echo=False,
          cohort_bin=None):
    """Train with cohort's trainer and return its TrainSummary.

    config: a TOML file (path), or a dict of keys ({"model": {"type": "mlp"}} or
    {"model.type": "mlp"}). workers: data-parallel worker processes on this host. overrides:
    keys over the config, as a dict or as "key=value" strings (`--set`). cwd: where the run
    starts (run.dir is relative to it). timeout: seconds before the run is killed and
    cohort.Timeout raised (None: no limit; the trainer's own deadlines still apply). echo: print
    the run's output as it comes.

    A run that fails raises InvalidArgument (a bad key, value or config file: the CLI's usage
    error) or Error, with the trainer's message.
    """
    if not isinstance(workers, int) or workers < 1:
        raise _core.InvalidArgument(f"cohort.train: workers must be an int >= 1, got {workers!r}")
    cwd = os.fspath(cwd) if cwd is not None else os.getcwd()
    cmd = _command(_find_cli(cohort_bin), config, workers, overrides)
    rc, output = _run(cmd, cwd, timeout, echo)
    if rc != 0:
        errors = [l for l in output.splitlines() if "error:" in l] or output.splitlines()[-5:]
        kind = _core.InvalidArgument if rc == _USAGE_ERROR else _core.Error
        raise kind(f"cohort.train: exit status {rc}: " + "\n".join(errors).strip())
    paths = [m.group(1) for m in map(_METRICS_LINE.search, output.splitlines()) if m]
    if not paths:
        raise _core.Error("cohort.train: the run printed no metrics path; output ends:\n"
                          + "\n".join(output.splitlines()[-5:]))
    run_dir = os.path.dirname(os.path.join(cwd, paths[-1]))
    summaries = read_metrics(run_dir, event="summary")
    if not summaries:
        raise _core.Error(f"cohort.train: {run_dir}/metrics.jsonl has no summary record")
    rec = next((r for r in reversed(summaries) if r.get("rank", 0) == 0), summaries[-1])
    return TrainSummary(steps=rec["steps"], loss=rec["eval_loss"],
                        accuracy=rec.get("eval_accuracy"), samples_per_s=rec["samples_per_s"],
                        train_seconds=rec["train_seconds"], workers=rec.get("workers", workers),
                        run_dir=run_dir, record=rec, output=output)

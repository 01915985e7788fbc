#!/usr/bin/python3
"""One rank of bench/run_torch_powersgd_bench.sh: PyTorch DDP with a PowerSGD comm hook on a
slow link, over backend "cohort" or "gloo", with torch's powerSGD_hook or cohort's
cohort.torch.hooks.powersgd (the same PowerSGDState arguments: rank --rank, start_powerSGD_iter
--start-iter, error feedback, warm start, random_seed --seed).

Run once per network namespace, both at once, with torchrun's variables set by the caller
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; init_process_group reads them for both backends)
and the interface or address of this namespace (GLOO_SOCKET_IFNAME for gloo,
COHORT_BIND_ADDRESS for cohort: it listens on loopback otherwise). The training is that of
bench/torch_slow_link.py (its loader, shards, SGD of examples/fashion_<model>.toml, test-set
accuracy at the end on rank 0), so the two benches' torch rows are the same program.
--max-steps cuts the epoch short (the smoke test).

Prints one JSON line on rank 0, or exits 77 with --hook cohort when cohort.torch.hooks.powersgd
cannot be imported (not built yet).
"""
import argparse
import json
import os
import sys
import time

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_ddp  # noqa: E402  (load_train, batches)
import torch_slow_link  # noqa: E402  (test_accuracy)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["cohort", "gloo"], required=True)
    p.add_argument("--hook", choices=["torch", "cohort"], required=True)
    p.add_argument("--model", choices=["mlp", "cnn"], default="cnn")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0, help="0: the whole epochs")
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--rank", type=int, default=4, help="matrix_approximation_rank")
    p.add_argument("--start-iter", type=int, default=10, help="start_powerSGD_iter")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    import tomllib
    with open(os.path.join(os.path.dirname(HERE), "examples", f"fashion_{a.model}.toml"), "rb") as f:
        optim = tomllib.load(f).get("optim", {})
    a.lr, a.momentum = float(optim.get("lr", 0.01)), float(optim.get("momentum", 0.0))
    return a


def main():
    a = parse_args()
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch_models import MODELS

    if a.backend == "cohort" or a.hook == "cohort":
        import cohort.torch  # noqa: F401  (registers the backend)
    if a.hook == "cohort":
        try:
            from cohort.torch.hooks import PowerSGDState, powersgd as hook
        except ImportError as e:
            print(f"torch_powersgd_link: cohort.torch.hooks.powersgd not built: {e}", file=sys.stderr)
            sys.exit(77)
    else:
        from torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import (
            PowerSGDState, powerSGD_hook as hook)
    torch.set_num_threads(1)
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(a.seed)
    model = MODELS[a.model]()
    net = torch.nn.parallel.DistributedDataParallel(model)
    state = PowerSGDState(process_group=None, matrix_approximation_rank=a.rank,
                          start_powerSGD_iter=a.start_iter, use_error_feedback=True,
                          warm_start=True, random_seed=a.seed)
    net.register_comm_hook(state, hook)
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum)
    x_all, y_all = torch_ddp.load_train(torch_ddp.DATA_DIR)
    steps = a.epochs * (len(y_all) // world // a.batch)
    if a.max_steps:
        steps = min(steps, a.max_steps)
    it = torch_ddp.batches(len(y_all), rank, world, a.batch)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        b = next(it)
        loss = F.cross_entropy(net(x_all[b]), y_all[b])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    dist.barrier()
    seconds = time.perf_counter() - t0
    if rank == 0:
        acc = torch_slow_link.test_accuracy(model)
        print(json.dumps({"backend": a.backend, "hook": a.hook, "rank": a.rank, "seed": a.seed,
                          "steps": steps, "seconds": round(seconds, 3),
                          "samples_per_s": round(world * a.batch * steps / seconds, 1),
                          "accuracy": round(acc, 4)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

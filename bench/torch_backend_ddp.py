#!/usr/bin/python3
"""PyTorch DDP on backend "cohort" or "gloo": one rank of bench/run_torch_backend_bench.sh.

The same script runs both backends (only --backend differs), started as the ranks of a job by
`cohort run -n 2 -- /usr/bin/python3 bench/torch_backend_ddp.py --backend cohort|gloo`, which
sets torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): init_process_group
reads them from the environment for both backends, so the launcher is not a difference either.

It trains the model of bench/torch_models.py on the real Fashion-MNIST train set exactly as
bench/torch_ddp.py does (its loader, DistributedSampler shards, SGD lr/momentum of
examples/fashion_<model>.toml, 1 thread per rank, seed 0): --warmup untimed steps, a barrier,
--steps timed steps. samples/s counts all ranks: world * batch * steps / rank 0's wall time.
--synthetic uses random inputs of the same shape instead of the files (no dataset installed).
Rank 0 prints one JSON line.
"""
import argparse
import json
import os
import sys
import time

# One thread per rank, before torch loads (OpenMP reads these once).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_ddp  # noqa: E402  (load_train, batches: the very loader of the gloo peer)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["cohort", "gloo"], required=True)
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--synthetic", action="store_true", help="random data of Fashion-MNIST's shape")
    a = p.parse_args()
    if a.steps < 1 or a.batch < 1 or a.warmup < 0:
        p.error("need --steps >= 1, --batch >= 1, --warmup >= 0")
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

    if a.backend == "cohort":
        import cohort.torch  # noqa: F401  (registers the backend)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    if a.backend == "gloo":
        # cohort run's master is on loopback; gloo would otherwise pick the hostname's interface.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # same start on both backends (DDP broadcasts rank 0's anyway)
    model = MODELS[a.model]()
    net = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum)
    if a.synthetic:
        g = torch.Generator().manual_seed(1)
        x_all = torch.randn(8192, 1, 28, 28, generator=g)
        y_all = torch.randint(0, 10, (8192,), generator=g)
    else:
        x_all, y_all = torch_ddp.load_train(torch_ddp.DATA_DIR)
    it = torch_ddp.batches(len(y_all), rank, world, a.batch)

    def step():
        b = next(it)
        loss = F.cross_entropy(net(x_all[b]), y_all[b])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    loss = 0.0
    for _ in range(a.steps):
        loss = step()
    seconds = time.perf_counter() - t0
    dist.barrier()
    if rank == 0:
        print(json.dumps({"impl": a.backend, "model": a.model, "workers": world,
                          "steps": a.steps, "batch": a.batch, "seconds": round(seconds, 4),
                          "samples_per_s": round(world * a.batch * a.steps / seconds, 1),
                          "final_loss": round(loss, 4), "synthetic": a.synthetic}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

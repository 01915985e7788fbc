#!/usr/bin/python3
"""PyTorch DDP peer of bench/run_compression_bench.sh: one rank of a 2-"host" job over gloo TCP.

Run once per network namespace (rank 0 and rank 1), both at once; trains the model of
bench/torch_models.py on Fashion-MNIST for --epochs with the DistributedSampler shards of
bench/torch_ddp.py, SGD with examples/fashion_<model>.toml's lr and momentum, and a DDP comm
hook from torch.distributed.algorithms.ddp_comm_hooks:

  none       DDP's allreduce
  fp16       default_hooks.fp16_compress_hook
  powersgd   powerSGD_hook.powerSGD_hook, PowerSGDState(matrix_approximation_rank=--rank,
             start_powerSGD_iter=--start-iter, use_error_feedback=True, warm_start=True)

Rank 0 evaluates the test set at the end and prints one JSON line: training samples/s (both
ranks' samples over rank 0's training wall time, evaluation excluded) and test accuracy.

  ip netns exec A /usr/bin/python3 bench/torch_slow_link.py --node-rank 0 --master 10.0.0.1:29500 \\
      --ifname vethA --hook powersgd --rank 4 &
  ip netns exec B /usr/bin/python3 bench/torch_slow_link.py --node-rank 1 --master 10.0.0.1:29500 \\
      --ifname vethB --hook powersgd --rank 4
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
import torch_ddp  # noqa: E402  (load_train, batches, the config's lr and momentum)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--node-rank", type=int, required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--master", required=True, help="ADDR:PORT of rank 0")
    p.add_argument("--ifname", required=True, help="the interface gloo uses")
    p.add_argument("--model", choices=["mlp", "cnn"], default="cnn")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--hook", choices=["none", "fp16", "powersgd"], default="none")
    p.add_argument("--rank", type=int, default=4, help="PowerSGD's matrix_approximation_rank")
    p.add_argument("--start-iter", type=int, default=10, help="PowerSGD's start_powerSGD_iter")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    cfg = os.path.join(os.path.dirname(HERE), "examples", f"fashion_{a.model}.toml")
    import tomllib
    with open(cfg, "rb") as f:
        optim = tomllib.load(f).get("optim", {})
    a.lr, a.momentum = float(optim.get("lr", 0.01)), float(optim.get("momentum", 0.0))
    return a


def register_hook(net, a):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    if a.hook == "fp16":
        net.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif a.hook == "powersgd":
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=a.rank,
            start_powerSGD_iter=a.start_iter, use_error_feedback=True, warm_start=True,
            random_seed=a.seed)
        net.register_comm_hook(state, powerSGD_hook.powerSGD_hook)


def test_accuracy(model):
    import torch
    sys.path.insert(0, HERE)
    from torch_fashion_accuracy import load
    x, y = load("t10k")
    model.eval()
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def main():
    a = parse_args()
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch_models import MODELS

    torch.set_num_threads(1)
    addr, port = a.master.rsplit(":", 1)
    os.environ.update(MASTER_ADDR=addr, MASTER_PORT=port, GLOO_SOCKET_IFNAME=a.ifname)
    dist.init_process_group("gloo", rank=a.node_rank, world_size=a.world)
    torch.manual_seed(a.seed)
    model = MODELS[a.model]()
    net = torch.nn.parallel.DistributedDataParallel(model)
    register_hook(net, a)
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum)
    x_all, y_all = torch_ddp.load_train(torch_ddp.DATA_DIR)
    steps = a.epochs * (len(y_all) // a.world // a.batch)
    it = torch_ddp.batches(len(y_all), a.node_rank, a.world, a.batch)
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
    if a.node_rank == 0:
        acc = test_accuracy(model)
        print(json.dumps({"impl": "torch", "hook": a.hook, "rank": a.rank, "steps": steps,
                          "seconds": round(seconds, 3),
                          "samples_per_s": round(a.world * a.batch * steps / seconds, 1),
                          "accuracy": round(acc, 4), "torch_version": torch.__version__}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

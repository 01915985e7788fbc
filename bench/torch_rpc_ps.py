#!/usr/bin/python3
"""A parameter server written the usual torch.distributed.rpc way: the peer of cohort's ps.

One server process and W worker processes on one host (torch.multiprocessing spawn, RPC over
TensorPipe on loopback). The server holds the model of bench/torch_models.py and an SGD
optimizer (lr and momentum of examples/fashion_<model>.toml); each worker holds a replica,
trains on its DistributedSampler shard of the real Fashion-MNIST train set (a batch of --batch,
one thread), and per step: forward, backward, then one rpc_sync to the server that applies its
gradients at once (asynchronous updates, under a lock, as the PyTorch parameter-server
tutorials do) and returns the fresh parameters, which the worker copies into its replica.
Push and pull in one round trip, like cohort's ps.

Each worker runs --warmup untimed steps, meets the others (an RPC barrier through the server),
then --steps timed steps. samples/s counts all workers together: workers * batch * steps / the
slowest worker's wall time. Prints one JSON line on stdout and a human line on stderr:

  /usr/bin/python3 bench/torch_rpc_ps.py --workers 2 --steps 300
  {"impl":"torch-rpc-ps","model":"mlp","workers":2,...,"samples_per_s":...}
"""
import argparse
import json
import os
import sys
import threading
import time

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ddp import DATA_DIR, batches, free_port, load_train  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--batch", type=int, default=64, help="per worker")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--data-dir", default=DATA_DIR)
    a = p.parse_args()
    for name in ("workers", "steps", "batch"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    return a


class ParameterServer:
    """The model and its optimizer; updates are applied one at a time as they arrive."""

    def __init__(self, model_name, lr, momentum, workers):
        import torch
        from torch_models import MODELS
        torch.set_num_threads(1)
        torch.manual_seed(0)
        self.model = MODELS[model_name]()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=momentum)
        self.lock = threading.Lock()
        self.arrived = 0
        self.workers = workers
        self.all_arrived = threading.Event()

    def params(self):
        with self.lock:
            return [p.detach().clone() for p in self.model.parameters()]

    def update(self, grads):
        with self.lock:
            for p, g in zip(self.model.parameters(), grads):
                p.grad = g
            self.opt.step()
            return [p.detach().clone() for p in self.model.parameters()]

    def barrier(self):
        with self.lock:
            self.arrived += 1
            if self.arrived == self.workers:
                self.all_arrived.set()
        self.all_arrived.wait()
        return True


# RPC targets must be module-level functions: they reach the server's one instance.
_server = None


def rpc_params():
    return _server.params()


def rpc_update(grads):
    return _server.update(grads)


def rpc_barrier():
    return _server.barrier()


def run(rank, world, port, a, queue):
    import torch
    import torch.distributed.rpc as rpc
    import torch.nn.functional as F
    from torch_models import MODELS

    global _server
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=max(4, a.workers + 1),
                                              rpc_timeout=600)
    if rank == 0:
        _server = ParameterServer(a.model, a.lr, a.momentum, a.workers)
        rpc.init_rpc("server", rank=0, world_size=world, rpc_backend_options=options)
        rpc.shutdown()  # waits for every worker to finish
        return
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world, rpc_backend_options=options)
    model = MODELS[a.model]()
    model.train()
    x_all, y_all = load_train(a.data_dir)
    it = batches(len(y_all), rank - 1, a.workers, a.batch)

    def load(values):
        with torch.no_grad():
            for p, v in zip(model.parameters(), values):
                p.copy_(v)

    load(rpc.rpc_sync("server", rpc_params))

    def step():
        b = next(it)
        loss = F.cross_entropy(model(x_all[b]), y_all[b])
        for p in model.parameters():
            p.grad = None
        loss.backward()
        load(rpc.rpc_sync("server", rpc_update, args=([p.grad for p in model.parameters()],)))
        return loss.item()

    for _ in range(a.warmup):
        step()
    rpc.rpc_sync("server", rpc_barrier)
    w0 = time.perf_counter()
    loss = 0.0
    for _ in range(a.steps):
        loss = step()
    seconds = time.perf_counter() - w0
    queue.put({"rank": rank, "seconds": seconds, "final_loss": loss,
               "torch_version": torch.__version__})
    rpc.shutdown()


def main():
    a = parse_args()
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(run, args=(a.workers + 1, free_port(), a, queue), nprocs=a.workers + 1, join=True)
    results = [queue.get() for _ in range(a.workers)]
    seconds = max(r["seconds"] for r in results)
    sps = a.workers * a.batch * a.steps / seconds
    loss = sum(r["final_loss"] for r in results) / len(results)
    print(f"torch rpc ps {a.model}, {a.workers} worker(s), 1 server, asynchronous: "
          f"{sps:.1f} samples/s, mean final loss {loss:.4f}", file=sys.stderr)
    out = {"impl": "torch-rpc-ps", "model": a.model, "workers": a.workers, "servers": 1,
           "batch": a.batch, "threads": 1, "steps": a.steps, "warmup": a.warmup, "lr": a.lr,
           "momentum": a.momentum, "torch_version": results[0]["torch_version"],
           "seconds": round(seconds, 4), "samples_per_s": round(sps, 1),
           "final_loss": round(loss, 4)}
    print(json.dumps(out, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()

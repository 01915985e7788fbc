#!/usr/bin/python3
"""PyTorch peer for `cohort fl run`: FedAvg / FedProx simulated in one process, sequentially, the
way Flower's simulation mode runs clients (no network, no processes, no TLS).

The same federation as examples/fashion_mlp_fl.toml: MLP 784-512-256-10 on Fashion-MNIST
(inputs standardised with cohort's data.mean 0.2860 / data.std 0.3530), K = 10 clients, C = 0.5
(ceil(C K) = 5 sampled per round), E = 1 local epoch of batch-64 SGD (lr 0.05, momentum 0.9, a
fresh optimizer every round; the last batch may be short, as cohort's loader), FedAvg's mean of
the clients' models weighted by their sample counts; FedProx adds mu (w - w_global) to each
gradient. Partitions: IID (a shuffled split into K near-equal parts) or Dirichlet label skew
(Hsu et al. 2019: per class, shares ~ numpy's Dirichlet(alpha); floor(cumsum * n) cuts; redrawn
until every client holds --min-samples), as cohort's fl.partition. The random streams differ from
cohort's (numpy vs Philox), so the partitions are statistically, not bitwise, the same.

Per round it prints `round R/N: test accuracy XX.XX%, loss L, S s` and, with --out, appends
{"event":"fl_round","round":r,"test_accuracy":a,"test_loss":l,"seconds":s,"sampled":[...],
"samples":n,"train_loss":t} -- `seconds` is the round's training and aggregation wall time,
without the evaluation, like cohort's.

  /usr/bin/python3 bench/torch_fedavg.py --rounds 30 --partition dirichlet --alpha 0.5 --seed 0
"""
import argparse, gzip, json, math, os, statistics, sys, time
import numpy as np
import torch
import torch.nn as nn

D = "/usr/share/datasets/fashion-mnist/"
MEAN, STD = 0.2860, 0.3530  # cohort's data.mean / data.std (`cohort config docs | grep data.`)


def idx(name, offset):
    with gzip.open(D + name) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def load(split):
    x = idx(f"{split}-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32)
    y = idx(f"{split}-labels-idx1-ubyte.gz", 8).astype(np.int64)
    return torch.from_numpy((x / 255.0 - MEAN) / STD), torch.from_numpy(y)


def mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def partition_iid(n, k, rng):
    perm = rng.permutation(n)
    return [np.sort(perm[n * c // k:n * (c + 1) // k]) for c in range(k)]


def partition_dirichlet(labels, k, alpha, min_samples, rng, classes=10):
    by_class = [rng.permutation(np.flatnonzero(labels == c)) for c in range(classes)]
    for _ in range(1000):
        cuts = []
        for idx_c in by_class:
            p = rng.dirichlet([alpha] * k)
            cut = np.floor(np.cumsum(p) * len(idx_c)).astype(np.int64)
            cut = np.concatenate([[0], np.minimum(cut[:-1], len(idx_c)), [len(idx_c)]])
            cuts.append(np.maximum.accumulate(cut))
        sizes = sum(np.diff(c) for c in cuts)
        if sizes.min() >= min_samples:
            return [np.sort(np.concatenate([by_class[c][cuts[c][j]:cuts[c][j + 1]]
                                            for c in range(classes)])) for j in range(k)]
    sys.exit(f"torch_fedavg: no Dirichlet({alpha}) draw left every client >= {min_samples}")


def local_train(model, global_state, x, y, a, gen):
    model.load_state_dict(global_state)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    w0 = [p.detach().clone() for p in model.parameters()] if a.mu > 0 else None
    total, steps = 0.0, 0
    for _ in range(a.local_epochs):
        perm = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), a.batch):
            b = perm[i:i + a.batch]
            loss = nn.functional.cross_entropy(model(x[b]), y[b])
            opt.zero_grad()
            loss.backward()
            if w0 is not None:
                with torch.no_grad():
                    for p, p0 in zip(model.parameters(), w0):
                        p.grad.add_(p.detach() - p0, alpha=a.mu)
            opt.step()
            total += loss.item()
            steps += 1
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, total / max(steps, 1)


def evaluate(model, state, test):
    model.load_state_dict(state)
    with torch.no_grad():
        out = model(test[0])
        return ((out.argmax(1) == test[1]).float().mean().item(),
                nn.functional.cross_entropy(out, test[1]).item())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--fraction", type=float, default=0.5)
    p.add_argument("--local-epochs", type=int, default=1)
    p.add_argument("--partition", choices=["iid", "dirichlet"], default="iid")
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--min-samples", type=int, default=10)
    p.add_argument("--strategy", choices=["fedavg", "fedprox"], default="fedavg")
    p.add_argument("--mu", type=float, default=0.01, help="FedProx's mu (fedprox only)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--out", help="append one JSON line per round here")
    a = p.parse_args()
    if a.strategy == "fedavg":
        a.mu = 0.0
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    train, test = load("train"), load("t10k")
    labels = train[1].numpy()
    parts = (partition_iid(len(labels), a.clients, rng) if a.partition == "iid" else
             partition_dirichlet(labels, a.clients, a.alpha, a.min_samples, rng))
    data = [(train[0][torch.from_numpy(ix)], train[1][torch.from_numpy(ix)]) for ix in parts]
    want = max(2, math.ceil(a.fraction * a.clients - 1e-9))  # as cohort (fl.min_clients = 2)
    model = mlp()
    glob = {k: v.detach().clone() for k, v in model.state_dict().items()}
    gen = torch.Generator().manual_seed(a.seed)
    out = open(a.out, "a") if a.out else None
    print(f"torch FedAvg simulation ({a.strategy}, {a.partition}"
          f"{f' alpha {a.alpha}' if a.partition == 'dirichlet' else ''}): {a.clients} clients, "
          f"{want} per round, E = {a.local_epochs}, torch {torch.__version__}, "
          f"{a.threads} thread(s), seed {a.seed}; client sizes {[len(ix) for ix in parts]}",
          flush=True)
    times = []
    for r in range(1, a.rounds + 1):
        t0 = time.perf_counter()
        sampled = sorted(rng.choice(a.clients, size=min(want, a.clients), replace=False).tolist())
        acc_state, n_total, losses = None, 0, []
        for c in sampled:
            state, loss = local_train(model, glob, *data[c], a, gen)
            n = len(data[c][1])
            losses.append(loss)
            n_total += n
            if acc_state is None:
                acc_state = {k: v.double() * n for k, v in state.items()}
            else:
                for k in acc_state:
                    acc_state[k] += state[k].double() * n
        glob = {k: (v / n_total).float() for k, v in acc_state.items()}
        secs = time.perf_counter() - t0
        times.append(secs)
        acc, loss = evaluate(model, glob, test)
        print(f"round {r}/{a.rounds}: test accuracy {100 * acc:.2f}%, loss {loss:.4f}, "
              f"{secs:.2f} s", flush=True)
        if out:
            out.write(json.dumps({"event": "fl_round", "round": r, "test_accuracy": acc,
                                  "test_loss": loss, "seconds": secs, "sampled": sampled,
                                  "samples": n_total,
                                  "train_loss": statistics.mean(losses)}) + "\n")
            out.flush()
    print(f"torch done: {a.rounds} rounds, median {statistics.median(times):.2f} s/round, "
          f"test accuracy {100 * acc:.2f}%")


if __name__ == "__main__":
    main()

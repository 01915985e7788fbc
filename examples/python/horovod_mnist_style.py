"""Horovod's examples/pytorch/pytorch_mnist.py on cohort: the same script with one changed
import (`import cohort.torch.horovod as hvd` for `import horovod.torch as hvd`), CPU only, on
Fashion-MNIST (Debian's dataset-fashion-mnist, /usr/share/datasets/fashion-mnist) or, where
that is not installed, a synthetic stand-in of the same shape (docs/python.md, "Horovod's API").

    cmake --build build --target cohort_python
    PYTHONPATH=build/python build/bin/cohort run -n 2 -- /usr/bin/python3 \\
        examples/python/horovod_mnist_style.py --epochs 1 --limit 4096

Started without a launcher it is a world of one.
"""
import argparse
import gzip
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed

import cohort.torch.horovod as hvd  # was: import horovod.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch MNIST Example")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--test-batch-size", type=int, default=1000)
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--momentum", type=float, default=0.5)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--log-interval", type=int, default=10)
parser.add_argument("--fp16-allreduce", action="store_true", default=False)
parser.add_argument("--use-adasum", action="store_true", default=False)
parser.add_argument("--gradient-predivide-factor", type=float, default=1.0)
parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
parser.add_argument("--limit", type=int, default=0,
                    help="use only the first N training samples (and N/4 test samples)")


class Net(nn.Module):  # Horovod's example model, unchanged
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(x, dim=1)


def read_idx(path):
    """An IDX file (gzipped) as a NumPy array: a big-endian header of the dims, then bytes."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = np.frombuffer(data, dtype=">u4", count=ndim, offset=4)
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def dataset(data_dir, split, limit):
    """(images normalised as Horovod's example does, labels) as a TensorDataset."""
    prefix = "train" if split == "train" else "t10k"
    images = os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz")
    if os.path.exists(images):
        x = read_idx(images)
        y = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    else:  # a learnable stand-in: each class a fixed pattern plus noise
        g = np.random.default_rng(0 if split == "train" else 1)
        y = g.integers(0, 10, 60000 if split == "train" else 10000).astype(np.uint8)
        patterns = np.random.default_rng(2).integers(0, 256, (10, 28, 28))
        x = np.clip(patterns[y] * 0.7 + g.integers(0, 77, (len(y), 28, 28)), 0, 255)
    if limit:
        x, y = x[:limit], y[:limit]
    x = (torch.from_numpy(np.asarray(x, dtype=np.float32)) / 255.0 - 0.2860) / 0.3530
    return torch.utils.data.TensorDataset(x.unsqueeze(1), torch.from_numpy(y.astype(np.int64)))


def train(epoch):
    model.train()
    # Horovod: set epoch to sampler for shuffling.
    train_sampler.set_epoch(epoch)
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0 and hvd.rank() == 0:
            # Horovod: use train_sampler to determine the number of examples in this worker's
            # partition.
            print("Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                epoch, batch_idx * len(data), len(train_sampler),
                100. * batch_idx / len(train_loader), loss.item()), flush=True)


def metric_average(val, name):
    tensor = torch.tensor(val)
    avg_tensor = hvd.allreduce(tensor, name=name)
    return avg_tensor.item()


def test():
    model.eval()
    test_loss = 0.
    test_accuracy = 0.
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            # sum up batch loss
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            # get the index of the max log-probability
            pred = output.data.max(1, keepdim=True)[1]
            test_accuracy += pred.eq(target.data.view_as(pred)).float().sum()

    # Horovod: use test_sampler to determine the number of examples in this worker's partition.
    test_loss /= len(test_sampler)
    test_accuracy /= len(test_sampler)

    # Horovod: average metric values across workers.
    test_loss = metric_average(test_loss, "avg_loss")
    test_accuracy = metric_average(test_accuracy, "avg_accuracy")

    # Horovod: print output only on first rank.
    if hvd.rank() == 0:
        print("\nTest set: Average loss: {:.4f}, test accuracy {:.2f}%\n".format(
            test_loss, 100. * test_accuracy), flush=True)


args = parser.parse_args()

# Horovod: initialize library.
hvd.init()
torch.manual_seed(args.seed)
# Horovod: limit # of CPU threads to be used per worker.
torch.set_num_threads(1)

train_dataset = dataset(args.data_dir, "train", args.limit)
# Horovod: use DistributedSampler to partition the training data.
train_sampler = torch.utils.data.distributed.DistributedSampler(
    train_dataset, num_replicas=hvd.size(), rank=hvd.rank())
train_loader = torch.utils.data.DataLoader(
    train_dataset, batch_size=args.batch_size, sampler=train_sampler)

test_dataset = dataset(args.data_dir, "test", args.limit // 4)
# Horovod: use DistributedSampler to partition the test data.
test_sampler = torch.utils.data.distributed.DistributedSampler(
    test_dataset, num_replicas=hvd.size(), rank=hvd.rank())
test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=args.test_batch_size,
                                          sampler=test_sampler)

model = Net()

# By default, Adasum doesn't need scaling up learning rate.
lr_scaler = hvd.size() if not args.use_adasum else 1

# Horovod: scale learning rate by lr_scaler.
optimizer = optim.SGD(model.parameters(), lr=args.lr * lr_scaler, momentum=args.momentum)

# Horovod: broadcast parameters & optimizer state.
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

# Horovod: (optional) compression algorithm.
compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

# Horovod: wrap optimizer with DistributedOptimizer.
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     compression=compression,
                                     op=hvd.Adasum if args.use_adasum else hvd.Average,
                                     gradient_predivide_factor=args.gradient_predivide_factor)

for epoch in range(1, args.epochs + 1):
    train(epoch)
    test()

"""The PyTorch twins of cohort's models (cohort/nn/models/), shared by the PyTorch peers in
bench/ (torch_train.py, torch_ddp.py) so that every benchmark compares against the same layers.

Import it after the caller has set its thread environment (OMP_NUM_THREADS, ...): importing
torch.nn loads torch.
"""
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    """784-512-256-10 with ReLU between layers: cohort::nn::MLP({784, 512, 256, 10})."""

    def __init__(self, sizes=(784, 512, 256, 10)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

    def forward(self, x):
        h = x.flatten(1)
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i + 1 < len(self.layers):
                h = F.relu(h)
        return h


class CNN(nn.Module):
    """Same layers as cohort/nn/models/cnn.h."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(64 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)  # [N, 32, 13, 13]
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)  # [N, 64, 5, 5]
        h = F.relu(self.fc1(h.flatten(1)))  # [N, 128]
        return self.fc2(h)  # [N, 10]


MODELS = {"mlp": MLP, "cnn": CNN}

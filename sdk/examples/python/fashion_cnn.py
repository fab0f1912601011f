"""The example CNN for Fashion-MNIST (sdk/examples/fashion_cnn.cc in C++), shared by
train_fmnist.py beside it and the benchmarks that compare against it (bench/), so they
all train the same model."""

import torch.nn.functional as F
from torch import nn


class FashionCnn(nn.Module):
    """Images [B, 1, 28, 28] -> logits [B, 10]: 2 conv + 2 fully connected layers."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))

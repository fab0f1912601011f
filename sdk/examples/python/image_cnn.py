"""The small CNN of train_images.py and of its baselines (bench/baselines/*_images_train.py):
one model, imported by each."""

import torch
import torch.nn.functional as F


class SmallCnn(torch.nn.Module):
    """uint8 [B, 3, 224, 224] -> class scores: 4x average pooling to 56x56, two strided
    convolutions, global average pooling, a linear layer."""

    def __init__(self, classes):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 5, stride=2, padding=2)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(32, classes)

    def forward(self, images):
        x = F.avg_pool2d(images.float().div(255), 4)
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        return self.fc(x.mean((2, 3)))

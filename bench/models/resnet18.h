// ResNet-18 (He et al., 2015) in its CIFAR form, the large model of the sync benchmarks
// (bench/sync_bench): BasicBlock x [2, 2, 2, 2] with 64-128-256-512 channels, a 3x3
// stride-1 stem and no max-pool, for [B, 3, 32, 32] inputs; 11,173,962 parameters with 10
// classes (about 45 MB of float32 gradients per step).
//
// Same architecture, parameter names, registration order and initialization as
// torchvision's resnet18(num_classes=10) with conv1 = Conv2d(3, 64, 3, 1, 1, bias=False)
// and maxpool = Identity, which is how bench/ddp_baseline.py builds its copy.
#ifndef EMBER_BENCH_MODELS_RESNET18_H_
#define EMBER_BENCH_MODELS_RESNET18_H_

#include <cstdint>

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

namespace ember::bench {

// Members are declared, and so registered, in torchvision's order.

// Two 3x3 convolutions with batch norm and a residual connection; `downsample` (a 1x1
// convolution and batch norm) is set when the stride or the channel count changes.
struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(int64_t in_channels, int64_t out_channels, int64_t stride);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
  torch::nn::Sequential downsample{nullptr};  // empty when the shapes match
};
TORCH_MODULE(BasicBlock);

// Input [B, 3, 32, 32] float32, output logits [B, num_classes].
struct ResNet18Impl : torch::nn::Module {
  explicit ResNet18Impl(int64_t num_classes = 10);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Sequential layer1, layer2, layer3, layer4;
  torch::nn::Linear fc;
};
TORCH_MODULE(ResNet18);

}  // namespace ember::bench

#endif  // EMBER_BENCH_MODELS_RESNET18_H_

#include "bench/models/resnet18.h"

namespace ember::bench {
namespace {

torch::nn::Conv2d Conv(int64_t in_channels, int64_t out_channels, int64_t kernel,
                       int64_t stride) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, out_channels, kernel)
                               .stride(stride)
                               .padding(kernel / 2)
                               .bias(false));
}

torch::nn::Sequential Layer(int64_t in_channels, int64_t out_channels, int64_t stride) {
  return torch::nn::Sequential(BasicBlock(in_channels, out_channels, stride),
                               BasicBlock(out_channels, out_channels, 1));
}

}  // namespace

BasicBlockImpl::BasicBlockImpl(int64_t in_channels, int64_t out_channels, int64_t stride)
    : conv1(register_module("conv1", Conv(in_channels, out_channels, 3, stride))),
      bn1(register_module("bn1", torch::nn::BatchNorm2d(out_channels))),
      conv2(register_module("conv2", Conv(out_channels, out_channels, 3, 1))),
      bn2(register_module("bn2", torch::nn::BatchNorm2d(out_channels))) {
  if (stride != 1 || in_channels != out_channels) {
    downsample = register_module(
        "downsample", torch::nn::Sequential(Conv(in_channels, out_channels, 1, stride),
                                            torch::nn::BatchNorm2d(out_channels)));
  }
}

torch::Tensor BasicBlockImpl::forward(torch::Tensor x) {
  torch::Tensor out = torch::relu(bn1(conv1(x)));
  out = bn2(conv2(out));
  return torch::relu(out + (downsample ? downsample->forward(x) : x));
}

ResNet18Impl::ResNet18Impl(int64_t num_classes)
    : conv1(register_module("conv1", Conv(3, 64, 3, 1))),
      bn1(register_module("bn1", torch::nn::BatchNorm2d(64))),
      layer1(register_module("layer1", Layer(64, 64, 1))),
      layer2(register_module("layer2", Layer(64, 128, 2))),
      layer3(register_module("layer3", Layer(128, 256, 2))),
      layer4(register_module("layer4", Layer(256, 512, 2))),
      fc(register_module("fc", torch::nn::Linear(512, num_classes))) {
  // torchvision's init: Kaiming-normal (fan_out, ReLU) convolutions, batch norm 1 and 0;
  // the linear layer keeps its default.
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* conv = module->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(conv->weight, 0, torch::kFanOut, torch::kReLU);
    } else if (auto* bn = module->as<torch::nn::BatchNorm2d>()) {
      torch::nn::init::ones_(bn->weight);
      torch::nn::init::zeros_(bn->bias);
    }
  }
}

torch::Tensor ResNet18Impl::forward(torch::Tensor x) {
  x = torch::relu(bn1(conv1(x)));
  for (torch::nn::Sequential* layer : {&layer1, &layer2, &layer3, &layer4}) {
    x = (*layer)->forward(x);
  }
  x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  return fc(x);
}

}  // namespace ember::bench

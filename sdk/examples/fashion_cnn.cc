#include "sdk/examples/fashion_cnn.h"

namespace ember::examples {

FashionCnnImpl::FashionCnnImpl()
    : conv1(register_module(
          "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)))),
      conv2(register_module(
          "conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)))),
      fc1(register_module("fc1", torch::nn::Linear(64 * 7 * 7, 128))),
      fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}

torch::Tensor FashionCnnImpl::forward(torch::Tensor x) {
  x = torch::max_pool2d(torch::relu(conv1(x)), 2);
  x = torch::max_pool2d(torch::relu(conv2(x)), 2);
  x = torch::relu(fc1(x.flatten(1)));
  return fc2(x);
}

torch::Tensor FashionInputs(const torch::Tensor& images) {
  TORCH_CHECK(images.dim() == 3 && images.size(1) == 28 && images.size(2) == 28,
              "expected an image batch of shape [B, 28, 28], got ", images.sizes());
  return images.to(torch::kFloat32)
      .div(255)
      .sub(kFashionPixelMean)
      .div(kFashionPixelStd)
      .unsqueeze(1);
}

}  // namespace ember::examples

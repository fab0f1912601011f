// The example CNN for Fashion-MNIST (2 conv + 2 fully connected layers), shared by the
// example trainer and the benchmarks that compare against it (bench/), so they all
// train the same model.
#ifndef EMBER_SDK_EXAMPLES_FASHION_CNN_H_
#define EMBER_SDK_EXAMPLES_FASHION_CNN_H_

#include <utility>

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace ember::examples {

// Fashion-MNIST pixel statistics, for inputs scaled to [0, 1].
constexpr double kFashionPixelMean = 0.2860;
constexpr double kFashionPixelStd = 0.3530;

// Input [B, 1, 28, 28] float32, output logits [B, 10].
struct FashionCnnImpl : torch::nn::Module {
  FashionCnnImpl();
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(FashionCnn);

// Normalized float images [B, 1, 28, 28] from uint8 images [B, 28, 28].
torch::Tensor FashionInputs(const torch::Tensor& images);

}  // namespace ember::examples

#endif  // EMBER_SDK_EXAMPLES_FASHION_CNN_H_

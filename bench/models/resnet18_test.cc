#include "bench/models/resnet18.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace {

int64_t ParameterCount(const torch::nn::Module& module) {
  int64_t count = 0;
  for (const torch::Tensor& parameter : module.parameters()) count += parameter.numel();
  return count;
}

}  // namespace

TEST_CASE("ResNet18 has torchvision's CIFAR-variant parameters") {
  ember::bench::ResNet18 net;
  // torchvision resnet18(num_classes=10) with a 3x3 stem: 11,181,642 - 64*3*7*7 + 64*3*3*3.
  CHECK(ParameterCount(*net) == 11173962);

  std::vector<std::string> names;
  for (const auto& item : net->named_parameters()) names.push_back(item.key());
  REQUIRE(names.size() == 62);
  CHECK(names.front() == "conv1.weight");
  CHECK(names[3] == "layer1.0.conv1.weight");
  CHECK(names[21] == "layer2.0.downsample.0.weight");
  CHECK(names.back() == "fc.bias");
  CHECK(net->named_parameters()["layer4.1.bn2.weight"].sizes() == torch::IntArrayRef{512});
  CHECK(net->named_buffers().size() == 60);  // running mean, var and count of 20 batch norms
}

TEST_CASE("ResNet18 maps 32x32 images to class logits and back-propagates") {
  torch::manual_seed(0);
  ember::bench::ResNet18 net(7);
  torch::Tensor x = torch::randn({2, 3, 32, 32});
  torch::Tensor logits = net->forward(x);
  CHECK(logits.sizes() == torch::IntArrayRef{2, 7});
  logits.sum().backward();
  for (const auto& item : net->named_parameters()) {
    INFO(item.key());
    CHECK(item.value().grad().defined());
  }
}

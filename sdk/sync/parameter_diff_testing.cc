#include "sdk/sync/parameter_diff_testing.h"

#include <algorithm>
#include <cstdio>

namespace ember::sdk::testing {

ParameterDiff CompareParameters(torch::nn::Module& actual, torch::nn::Module& expected) {
  torch::NoGradGuard no_grad;
  auto expected_named = expected.named_parameters();
  ParameterDiff diff;
  for (const auto& item : actual.named_parameters()) {
    torch::Tensor b = expected_named[item.key()].to(torch::kFloat64);
    torch::Tensor a = item.value().to(torch::kFloat64);
    const double scale = std::max(b.abs().max().item<double>(), 1e-12);
    const double relative = (a - b).abs().max().item<double>() / scale;
    if (relative > diff.worst) diff = {relative, item.key()};
  }
  return diff;
}

bool MatchesSingleProcess(const ParameterDiff& diff, double tolerance, int rank) {
  if (diff.worst <= tolerance) return true;
  std::fprintf(stderr,
               "rank %d: parameter %s differs from single-process training by %.3g (relative)\n",
               rank, diff.name.c_str(), diff.worst);
  return false;
}

}  // namespace ember::sdk::testing

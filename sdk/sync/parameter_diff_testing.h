// Test helper for the sync workers: how far one module's parameters are from another's.
#ifndef EMBER_SDK_SYNC_PARAMETER_DIFF_TESTING_H_
#define EMBER_SDK_SYNC_PARAMETER_DIFF_TESTING_H_

#include <string>

#include <torch/torch.h>

namespace ember::sdk::testing {

struct ParameterDiff {
  double worst = 0;  // the largest max|a - b| / max|b| over same-named parameters
  std::string name;  // the parameter where it is
};

ParameterDiff CompareParameters(torch::nn::Module& actual, torch::nn::Module& expected);

}  // namespace ember::sdk::testing

#endif  // EMBER_SDK_SYNC_PARAMETER_DIFF_TESTING_H_

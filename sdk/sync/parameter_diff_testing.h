// Test helper for the sync workers: how far one module's parameters are from another's.
#ifndef EMBER_SDK_SYNC_PARAMETER_DIFF_TESTING_H_
#define EMBER_SDK_SYNC_PARAMETER_DIFF_TESTING_H_

#include <string>

#include <torch/nn/module.h>

namespace ember::sdk::testing {

struct ParameterDiff {
  double worst = 0;  // the largest max|a - b| / max|b| over same-named parameters
  std::string name;  // the parameter where it is
};

ParameterDiff CompareParameters(torch::nn::Module& actual, torch::nn::Module& expected);

// Whether `diff`, of rank `rank`'s parameters from the same network trained in one
// process, is within `tolerance`; if not, says so on stderr ("rank R: parameter P differs
// from single-process training by D (relative)").
bool MatchesSingleProcess(const ParameterDiff& diff, double tolerance, int rank);

}  // namespace ember::sdk::testing

#endif  // EMBER_SDK_SYNC_PARAMETER_DIFF_TESTING_H_

// Summaries of the benchmarks' timings.
#ifndef EMBER_BENCH_STATS_H_
#define EMBER_BENCH_STATS_H_

#include <vector>

namespace ember::bench {

// The median of `values` (the mean of the middle two for an even count); NaN when empty.
double Median(std::vector<double> values);

// The arithmetic mean of `values`; NaN when empty.
double Mean(const std::vector<double>& values);

}  // namespace ember::bench

#endif  // EMBER_BENCH_STATS_H_

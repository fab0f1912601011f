// Summaries of the benchmarks' timings.
#ifndef EMBER_BENCH_STATS_H_
#define EMBER_BENCH_STATS_H_

#include <vector>

namespace ember::bench {

// The median of `values` (the mean of the middle two for an even count); NaN when empty.
double Median(std::vector<double> values);

// The arithmetic mean of `values`; NaN when empty.
double Mean(const std::vector<double>& values);

// The `fraction` (0..1) quantile of `values`, nearest rank below: the value at index
// floor(fraction x (n - 1)) of the sorted values (reordered in place); 0 when empty.
double Quantile(std::vector<double>& values, double fraction);

}  // namespace ember::bench

#endif  // EMBER_BENCH_STATS_H_

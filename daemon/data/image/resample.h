// Separable resampling of an 8-bit RGB image to the image pipeline's output, in fixed
// point. Each axis has a set of taps (ResampleTaps): every output index takes a weighted
// sum of a window of source indices, the weights of a triangle filter widened to the
// downscale factor (PIL's antialiased bilinear), or all zero where the output is padding.
// A flip is a negative scale and needs nothing more.
//
// Arithmetic, as Pillow-SIMD: weights are int16 in units of 2^-14 summing to exactly
// 2^14; the horizontal pass takes the 8-bit source straight to int16 rows with 7
// fractional bits. For uint8 output the vertical pass sums each row times its weight
// rounded to 2^-6 (x86's pmulhrsw) and rounds the sum to a byte: within 1 of rounding
// the exact (real-valued) filter output. For float32 it sums exactly in int32 and scales
// the sum (within 0.1 of a level of the exact output). A solid colour stays exact.
//
// On x86-64 CPUs with AVX2 the horizontal pass and the uint8 vertical pass use SIMD
// kernels chosen at run time; portable loops compute the same values elsewhere (and for
// float32 output).
//
// Thread-safety: BuildResampleTaps and ResampleImage are thread-safe; a ResampleScratch
// belongs to one thread at a time.
#ifndef EMBER_DAEMON_DATA_IMAGE_RESAMPLE_H_
#define EMBER_DAEMON_DATA_IMAGE_RESAMPLE_H_

#include <cstdint>
#include <vector>

#include "daemon/data/image/decode.h"

namespace ember::daemon {

// The weight of a whole source pixel.
constexpr int kResampleWeightOne = 1 << 14;

// One axis: output index o reads source indices start[o] .. start[o] + n - 1.
struct ResampleTaps {
  int n = 1;                     // window size, the same for every output index
  std::vector<int> start;        // per output index
  std::vector<int16_t> weights;  // out * n, units of 2^-14, summing to 2^14 (0: padding)
  std::vector<uint8_t> inside;   // 0: padding (the output's centre is outside the source)
  int lowest = 0;                // the source indices the windows touch; highest < lowest: none
  int highest = -1;
  // BuildResampleTaps's scratch.
  std::vector<int> counts;
  std::vector<double> window;
};

// The taps of an axis of `out` outputs over `source` source pixels, where output o
// samples the source at scale * (o + 0.5) + offset (pixel i covers [i, i + 1)): a
// triangle filter of half-width max(1, |scale|) (bilinear when enlarging, an
// antialiasing average when shrinking), clipped to the source and normalized. Outputs
// whose centre is outside the source are padding. `taps` keeps its memory between calls.
void BuildResampleTaps(double scale, double offset, int out, int source, ResampleTaps* taps);

// Where and how the output is written: 3 channels of out_width x out_height.
struct ResampleOutput {
  void* dst = nullptr;
  bool float32 = false;  // else uint8
  bool hwc = false;      // else CHW
  // float32 only: the value of a channel (0..255) times mul plus add.
  float mul[3] = {1, 1, 1};
  float add[3] = {0, 0, 0};
};

// Memory the resampler reuses from one image to the next. Its rows are planar: out_width
// R values, then the G values, then the B values.
struct ResampleScratch {
  std::vector<int16_t> rows;     // horizontally resampled source rows, 7 fraction bits
  std::vector<int32_t> sums;     // one float32 output row, 21 fraction bits
  std::vector<uint8_t> bytes;    // one uint8 output row (HWC output)
  std::vector<int> offsets;      // per output column: bytes from the first source column used
  std::vector<int16_t> pairs;    // the horizontal weights as the x86 kernels take them
  std::vector<int> group_bases;  // and, enlarging, where groups of outputs load from,
  std::vector<int8_t> group_shuffles;  // how their pixels are picked
  std::vector<int16_t> group_weights;  // and their weights
  std::vector<uint8_t> padded_row;  // a source row copied where SIMD loads would overrun
  // Frees the memory if more than `bytes` are held.
  void ShrinkTo(size_t bytes);
};

// Which kernels ResampleImage uses.
enum class ResampleKernels { kBest, kPortable };

// Resamples the image through the taps (x over its columns, y over its rows) and writes
// the output. image.region must hold every source pixel the taps touch.
void ResampleImage(const RgbImage& image, const ResampleTaps& x, const ResampleTaps& y,
                   const ResampleOutput& output, ResampleScratch& scratch,
                   ResampleKernels kernels = ResampleKernels::kBest);

// Whether kBest uses the SIMD kernels on this CPU.
bool ResampleHasSimd();

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IMAGE_RESAMPLE_H_

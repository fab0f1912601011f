#include "daemon/data/image/resample.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace ember::daemon {
namespace {

// One axis of a resample: output o samples the source at scale * (o + 0.5) + offset.
struct Axis {
  double scale = 1;
  double offset = 0;
  int out = 1;
  int source = 1;
};

// The filter's exact (real-valued) weights for output o, written independently of the
// code under test: a triangle of half-width max(1, |scale|) over every source pixel,
// normalized; all zero when the output's centre is outside the source.
std::vector<double> ReferenceWeights(const Axis& axis, int o) {
  std::vector<double> w(axis.source, 0.0);
  const double center = axis.scale * (o + 0.5) + axis.offset;
  if (!(center >= 0 && center < axis.source)) return w;
  const double support = std::max(1.0, std::abs(axis.scale));
  double sum = 0;
  for (int i = 0; i < axis.source; ++i) {
    w[i] = std::max(0.0, 1.0 - std::abs(i + 0.5 - center) / support);
    sum += w[i];
  }
  for (double& v : w) v /= sum;
  return w;
}

// The exact output, channel-major: [c][y][x], in 0..255 units.
std::vector<double> Reference(const std::vector<uint8_t>& rgb, const Axis& ax, const Axis& ay) {
  std::vector<double> out(size_t(3) * ax.out * ay.out, 0.0);
  for (int y = 0; y < ay.out; ++y) {
    const std::vector<double> wy = ReferenceWeights(ay, y);
    for (int x = 0; x < ax.out; ++x) {
      const std::vector<double> wx = ReferenceWeights(ax, x);
      for (int c = 0; c < 3; ++c) {
        double sum = 0;
        for (int j = 0; j < ay.source; ++j) {
          if (wy[j] == 0) continue;
          for (int i = 0; i < ax.source; ++i) {
            sum += wy[j] * wx[i] * rgb[(size_t(j) * ax.source + i) * 3 + c];
          }
        }
        out[(size_t(c) * ay.out + y) * ax.out + x] = sum;
      }
    }
  }
  return out;
}

std::vector<uint8_t> Noise(int width, int height, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<uint8_t> rgb(size_t(width) * height * 3);
  for (uint8_t& v : rgb) v = static_cast<uint8_t>(random());
  return rgb;
}

struct Rendered {
  std::vector<uint8_t> bytes;
  std::vector<float> floats;
};

// Resamples `rgb` (ax.source x ay.source) with the code under test; the image is held as
// the part of a larger buffer a region decode would give (`margin` pixels more on each
// side where the source has them), so kernels that read past a row see other pixels.
Rendered Run(const std::vector<uint8_t>& rgb, const Axis& ax, const Axis& ay, bool float32,
             bool hwc, ResampleKernels kernels, int margin = 0) {
  ResampleTaps tx, ty;
  BuildResampleTaps(ax.scale, ax.offset, ax.out, ax.source, &tx);
  BuildResampleTaps(ay.scale, ay.offset, ay.out, ay.source, &ty);
  PixelRect region{0, 0, ax.source, ay.source};
  if (tx.highest >= tx.lowest && ty.highest >= ty.lowest) {
    region.x = std::max(0, tx.lowest - margin);
    region.y = std::max(0, ty.lowest - margin);
    region.width = std::min(ax.source, tx.highest + 1 + margin) - region.x;
    region.height = std::min(ay.source, ty.highest + 1 + margin) - region.y;
  }
  // Exactly the region's bytes, in a vector of its own: reads past it are errors.
  std::vector<uint8_t> held;
  for (int y = region.y; y < region.y + region.height; ++y) {
    const uint8_t* row = &rgb[(size_t(y) * ax.source + region.x) * 3];
    held.insert(held.end(), row, row + size_t(region.width) * 3);
  }
  RgbImage image{ax.source, ay.source, held.data(), region};
  ResampleOutput output;
  output.float32 = float32;
  output.hwc = hwc;
  Rendered out;
  const size_t values = size_t(3) * ax.out * ay.out;
  if (float32) {
    out.floats.assign(values, -1.0f);
    output.dst = out.floats.data();
  } else {
    out.bytes.assign(values, 77);
    output.dst = out.bytes.data();
  }
  ResampleScratch scratch;
  ResampleImage(image, tx, ty, output, scratch, kernels);
  return out;
}

// Random axes: enlarging, shrinking, flipped, partly outside the source (padding), and
// output widths that leave SIMD tails.
Axis RandomAxis(std::mt19937& random, int source) {
  Axis axis;
  axis.source = source;
  axis.out = std::uniform_int_distribution<int>(1, 45)(random);
  const double span = source * std::uniform_real_distribution<double>(0.1, 2.5)(random);
  axis.scale = span / axis.out;
  axis.offset = std::uniform_real_distribution<double>(-0.2, 1.0)(random) * (source - span);
  if (random() % 4 == 0) {  // flipped: the output's first pixel at the span's end
    axis.offset += span;
    axis.scale = -axis.scale;
  }
  return axis;
}

TEST_CASE("taps: weights sum to one, windows inside the source, padding has none") {
  std::mt19937 random(1);
  for (int trial = 0; trial < 300; ++trial) {
    const Axis axis = RandomAxis(random, std::uniform_int_distribution<int>(1, 60)(random));
    ResampleTaps taps;
    BuildResampleTaps(axis.scale, axis.offset, axis.out, axis.source, &taps);
    REQUIRE(taps.start.size() == size_t(axis.out));
    REQUIRE(taps.weights.size() == size_t(axis.out) * taps.n);
    int inside = 0;
    for (int o = 0; o < axis.out; ++o) {
      INFO("scale " << axis.scale << " offset " << axis.offset << " output " << o);
      CHECK(taps.start[o] >= 0);
      CHECK(taps.start[o] + taps.n <= axis.source);
      int sum = 0;
      for (int k = 0; k < taps.n; ++k) {
        CHECK(taps.weights[size_t(o) * taps.n + k] >= 0);
        sum += taps.weights[size_t(o) * taps.n + k];
      }
      const double center = axis.scale * (o + 0.5) + axis.offset;
      const bool in_source = center >= 0 && center < axis.source;
      CHECK(taps.inside[o] == in_source);
      CHECK(sum == (in_source ? kResampleWeightOne : 0));
      if (in_source) {
        ++inside;
        CHECK(taps.start[o] >= taps.lowest);
        CHECK(taps.start[o] + taps.n - 1 <= taps.highest);
      }
    }
    if (inside == 0) CHECK(taps.highest < taps.lowest);
  }
  // Enlarging is bilinear (2 taps); halving is a triangle of half-width 2, which covers
  // 4 pixels: (1, 3, 3, 1) / 8.
  ResampleTaps taps;
  BuildResampleTaps(0.5, 0, 10, 5, &taps);
  CHECK(taps.n == 2);
  BuildResampleTaps(2.0, 0, 10, 20, &taps);
  REQUIRE(taps.n == 4);
  CHECK(taps.start[1] == 1);
  CHECK(std::vector<int16_t>(taps.weights.begin() + 4, taps.weights.begin() + 8) ==
        std::vector<int16_t>{2048, 6144, 6144, 2048});
}

TEST_CASE("uint8 output is within 1 of the exact filter, for every kernel set") {
  std::mt19937 random(2);
  for (int trial = 0; trial < 150; ++trial) {
    const int width = std::uniform_int_distribution<int>(1, 50)(random);
    const int height = std::uniform_int_distribution<int>(1, 50)(random);
    const Axis ax = RandomAxis(random, width), ay = RandomAxis(random, height);
    const std::vector<uint8_t> rgb = Noise(width, height, trial);
    const std::vector<double> exact = Reference(rgb, ax, ay);
    for (ResampleKernels kernels : {ResampleKernels::kBest, ResampleKernels::kPortable}) {
      const Rendered chw = Run(rgb, ax, ay, false, false, kernels, trial % 3);
      const Rendered hwc = Run(rgb, ax, ay, false, true, kernels, trial % 3);
      int worst = 0;
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < ay.out; ++y) {
          for (int x = 0; x < ax.out; ++x) {
            const size_t at = (size_t(c) * ay.out + y) * ax.out + x;
            const double error = std::abs(chw.bytes[at] - exact[at]);
            worst = std::max(worst, static_cast<int>(std::ceil(error - 0.5)));
            REQUIRE(hwc.bytes[(size_t(y) * ax.out + x) * 3 + c] == chw.bytes[at]);
          }
        }
      }
      INFO("trial " << trial << ", " << width << "x" << height << " to " << ax.out << "x" << ay.out
                    << ", scales " << ax.scale << ", " << ay.scale);
      // The error beyond rounding the exact value: at most 1.
      CHECK(worst <= 1);
    }
  }
}

TEST_CASE("a large reduction (many taps) stays within 1 of the exact filter") {
  const Axis ax{300.0 / 7, 0, 7, 300}, ay{200.0 / 5, 0, 5, 200};
  const std::vector<uint8_t> rgb = Noise(300, 200, 11);
  const std::vector<double> exact = Reference(rgb, ax, ay);
  for (ResampleKernels kernels : {ResampleKernels::kBest, ResampleKernels::kPortable}) {
    const Rendered out = Run(rgb, ax, ay, false, false, kernels);
    for (size_t i = 0; i < exact.size(); ++i) {
      INFO("value " << i);
      CHECK(std::abs(out.bytes[i] - exact[i]) < 1.5);
    }
  }
}

TEST_CASE("the SIMD kernels give exactly the portable kernels' bytes") {
  if (!ResampleHasSimd()) return;  // nothing to compare on this CPU
  std::mt19937 random(3);
  for (int trial = 0; trial < 200; ++trial) {
    const int width = std::uniform_int_distribution<int>(1, 300)(random);
    const int height = std::uniform_int_distribution<int>(1, 40)(random);
    Axis ax = RandomAxis(random, width), ay = RandomAxis(random, height);
    ax.out = std::uniform_int_distribution<int>(1, 250)(random);
    const std::vector<uint8_t> rgb = Noise(width, height, 100 + trial);
    for (bool hwc : {false, true}) {
      INFO("trial " << trial << (hwc ? " HWC" : " CHW"));
      CHECK(Run(rgb, ax, ay, false, hwc, ResampleKernels::kBest).bytes ==
            Run(rgb, ax, ay, false, hwc, ResampleKernels::kPortable).bytes);
      CHECK(Run(rgb, ax, ay, true, hwc, ResampleKernels::kBest).floats ==
            Run(rgb, ax, ay, true, hwc, ResampleKernels::kPortable).floats);
    }
  }
}

TEST_CASE("the SIMD kernels match the portable ones at a training crop's sizes") {
  if (!ResampleHasSimd()) return;  // nothing to compare on this CPU
  // A random-resized crop of a 256x256 image to 224x224 (and 227 wide: SIMD tails):
  // enlarging (2 taps, grouped loads) or reducing, flipped or not, and partly outside the
  // source (padding).
  const std::vector<uint8_t> rgb = Noise(256, 256, 7);
  for (int out : {224, 227}) {
    for (double side : {72.5, 150.0, 223.0, 240.0, 256.0}) {
      for (bool flip : {false, true}) {
        for (double offset : {3.25, 256.0 - side, -20.0}) {
          Axis ax{side / out, offset, out, 256}, ay{side / 224, 256 - side - offset / 2, 224, 256};
          if (flip) {
            ax.offset += side;
            ax.scale = -ax.scale;
          }
          for (bool hwc : {false, true}) {
            INFO("out " << out << " side " << side << (flip ? " flipped" : "") << " offset "
                        << offset << (hwc ? " HWC" : " CHW"));
            CHECK(Run(rgb, ax, ay, false, hwc, ResampleKernels::kBest, 1).bytes ==
                  Run(rgb, ax, ay, false, hwc, ResampleKernels::kPortable, 1).bytes);
            CHECK(Run(rgb, ax, ay, true, hwc, ResampleKernels::kBest, 1).floats ==
                  Run(rgb, ax, ay, true, hwc, ResampleKernels::kPortable, 1).floats);
          }
        }
      }
    }
  }
}

TEST_CASE("float32 output is the exact filter (scaled), HWC and CHW") {
  std::mt19937 random(4);
  for (int trial = 0; trial < 60; ++trial) {
    const int width = std::uniform_int_distribution<int>(1, 40)(random);
    const int height = std::uniform_int_distribution<int>(1, 40)(random);
    const Axis ax = RandomAxis(random, width), ay = RandomAxis(random, height);
    const std::vector<uint8_t> rgb = Noise(width, height, 200 + trial);
    const std::vector<double> exact = Reference(rgb, ax, ay);
    const Rendered chw = Run(rgb, ax, ay, true, false, ResampleKernels::kBest);
    const Rendered hwc = Run(rgb, ax, ay, true, true, ResampleKernels::kBest);
    double worst = 0;
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < ay.out; ++y) {
        for (int x = 0; x < ax.out; ++x) {
          const size_t at = (size_t(c) * ay.out + y) * ax.out + x;
          worst = std::max(worst, std::abs(chw.floats[at] - exact[at]));
          REQUIRE(hwc.floats[(size_t(y) * ax.out + x) * 3 + c] == chw.floats[at]);
        }
      }
    }
    INFO("trial " << trial);
    // Fixed-point weights and rows: a small fraction of one level.
    CHECK(worst < 0.1);
  }
}

TEST_CASE("a solid colour stays exact at any scale; padding is zero (or `add`)") {
  std::mt19937 random(5);
  for (int trial = 0; trial < 100; ++trial) {
    const int width = std::uniform_int_distribution<int>(1, 70)(random);
    const int height = std::uniform_int_distribution<int>(1, 30)(random);
    const Axis ax = RandomAxis(random, width), ay = RandomAxis(random, height);
    std::vector<uint8_t> rgb;
    for (int i = 0; i < width * height; ++i) rgb.insert(rgb.end(), {255, 3, 128});
    const Rendered bytes = Run(rgb, ax, ay, false, false, ResampleKernels::kBest);
    const Rendered floats = Run(rgb, ax, ay, true, false, ResampleKernels::kBest);
    ResampleTaps tx, ty;
    BuildResampleTaps(ax.scale, ax.offset, ax.out, ax.source, &tx);
    BuildResampleTaps(ay.scale, ay.offset, ay.out, ay.source, &ty);
    const int color[3] = {255, 3, 128};
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < ay.out; ++y) {
        for (int x = 0; x < ax.out; ++x) {
          const size_t at = (size_t(c) * ay.out + y) * ax.out + x;
          const int expected = tx.inside[x] && ty.inside[y] ? color[c] : 0;
          INFO("trial " << trial << " at " << x << "," << y << "," << c);
          REQUIRE(bytes.bytes[at] == expected);
          REQUIRE(floats.floats[at] == static_cast<float>(expected));
        }
      }
    }
  }
}

TEST_CASE("float32 applies mul and add per channel") {
  std::vector<uint8_t> rgb;
  for (int i = 0; i < 16; ++i) rgb.insert(rgb.end(), {255, 0, 51});
  ResampleTaps tx, ty;
  BuildResampleTaps(0.5, 0, 8, 4, &tx);
  BuildResampleTaps(0.5, 0, 8, 4, &ty);
  RgbImage image = RgbImage::Whole(4, 4, rgb.data());
  std::vector<float> out(3 * 64);
  ResampleOutput output;
  output.dst = out.data();
  output.float32 = true;
  for (int c = 0; c < 3; ++c) {
    output.mul[c] = 1.0f / (255.0f * 0.5f);
    output.add[c] = -0.25f * (c + 1);
  }
  ResampleScratch scratch;
  ResampleImage(image, tx, ty, output, scratch);
  CHECK(out[0] == Approx(2.0 - 0.25));
  CHECK(out[64] == Approx(0.0 - 0.5));
  CHECK(out[128 + 63] == Approx(0.4 - 0.75));
}

}  // namespace
}  // namespace ember::daemon

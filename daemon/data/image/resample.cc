#include "daemon/data/image/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define EMBER_RESAMPLE_AVX2 1
#endif

namespace ember::daemon {

namespace {

// Fixed point. Weights: 2^-14. The horizontal pass: rows of source * weight in 2^-7
// (at most 255 * 2^7, an int16). The vertical pass: exact int32 sums of row * weight in
// 2^-21, scaled for float32 output, rounded for uint8; but for uint8 output of at most
// kMaxByteTaps rows, int16 sums of each row * weight rounded to 2^-6 (what x86's pmulhrsw
// computes: (a * b + 2^14) >> 15), then rounded to a byte. Those products' roundings add
// at most kMaxByteTaps / 128 of a level: bytes stay within 1 of the exact filter.
constexpr int kWeightBits = 14;                            // kResampleWeightOne = 1 << kWeightBits
constexpr int kRowBits = 7;                                // fraction bits of the horizontal pass
constexpr int kRowShift = kWeightBits - kRowBits;          // source * weight -> row value
constexpr int kSumBits = kRowBits + kWeightBits;           // fraction bits of the float32 sums
constexpr int kByteSumBits = kRowBits + kWeightBits - 15;  // of the uint8 sums (6)
constexpr int kMaxByteTaps = 16;

// ---- Portable kernels ----

// One source row to one RGBX row: out[4o + c] = sum over k of w[o][k] * channel c of
// source pixel (offsets[o] / 3 + k), in 2^-7 units, rounded; out[4o + 3] = 0.
// `src` points at the pixel offsets are counted from (bytes).
template <int kN>
void HorizontalRow(const uint8_t* src, const int* offsets, const int16_t* weights, int n,
                   int out_width, int16_t* __restrict out) {
  if (kN > 0) n = kN;
  constexpr int kRound = 1 << (kRowShift - 1);
  for (int o = 0; o < out_width; ++o) {
    const uint8_t* p = src + offsets[o];
    const int16_t* w = weights + o * n;
    int r = kRound, g = kRound, b = kRound;
    for (int k = 0; k < n; ++k) {
      r += w[k] * p[3 * k];
      g += w[k] * p[3 * k + 1];
      b += w[k] * p[3 * k + 2];
    }
    out[4 * o] = static_cast<int16_t>(r >> kRowShift);
    out[4 * o + 1] = static_cast<int16_t>(g >> kRowShift);
    out[4 * o + 2] = static_cast<int16_t>(b >> kRowShift);
    out[4 * o + 3] = 0;
  }
}

void HorizontalPortable(const uint8_t* src, const int* offsets, const ResampleTaps& taps,
                        int16_t* out) {
  const int out_width = static_cast<int>(taps.start.size());
  const int16_t* w = taps.weights.data();
  switch (taps.n) {
    case 1: HorizontalRow<1>(src, offsets, w, 1, out_width, out); break;
    case 2: HorizontalRow<2>(src, offsets, w, 2, out_width, out); break;
    case 3: HorizontalRow<3>(src, offsets, w, 3, out_width, out); break;
    case 4: HorizontalRow<4>(src, offsets, w, 4, out_width, out); break;
    default: HorizontalRow<0>(src, offsets, w, taps.n, out_width, out); break;
  }
}

// The float32 vertical pass: sums[i] = sum over k < n of w[k] * rows[k * stride + i], for
// i < count.
void VerticalSums(const int16_t* rows, size_t stride, const int16_t* w, int n, int count,
                  int32_t* __restrict sums) {
  const int16_t* row = rows;
  const int32_t w0 = w[0];
  for (int i = 0; i < count; ++i) sums[i] = w0 * row[i];
  for (int k = 1; k < n; ++k) {
    row += stride;
    const int32_t wk = w[k];
    for (int i = 0; i < count; ++i) sums[i] += wk * row[i];
  }
}

inline uint8_t SumToByte(int32_t sum) {
  const int32_t value = (sum + (1 << (kSumBits - 1))) >> kSumBits;
  return static_cast<uint8_t>(std::clamp(value, 0, 255));
}

// x86's pmulhrsw: a * b in 2^-15 units, rounded.
inline int MulHighRound(int a, int b) { return (a * b + (1 << 14)) >> 15; }

// The uint8 vertical pass at value i (n <= kMaxByteTaps): the rounded products summed,
// then rounded and clamped to a byte.
inline uint8_t VerticalByte(const int16_t* rows, size_t stride, const int16_t* w, int n, size_t i) {
  int sum = 0;
  for (int k = 0; k < n; ++k) sum += MulHighRound(rows[k * stride + i], w[k]);
  return static_cast<uint8_t>(std::min(255, MulHighRound(sum, 1 << (15 - kByteSumBits))));
}

void VerticalBytes(const int16_t* rows, size_t stride, const int16_t* w, int n, int count,
                   uint8_t* __restrict out) {
  for (int i = 0; i < count; ++i) out[i] = VerticalByte(rows, stride, w, n, i);
}

// One output row of RGBX bytes to its place in the uint8 output.
void StoreBytes(const uint8_t* rgbx, int out_width, int out_height, int y,
                const ResampleOutput& output) {
  uint8_t* dst = static_cast<uint8_t*>(output.dst);
  if (output.hwc) {
    uint8_t* out = dst + size_t(y) * out_width * 3;
    for (int x = 0; x < out_width; ++x) {
      for (int c = 0; c < 3; ++c) out[3 * x + c] = rgbx[4 * x + c];
    }
    return;
  }
  const size_t plane = size_t(out_width) * out_height;
  for (int c = 0; c < 3; ++c) {
    uint8_t* out = dst + plane * c + size_t(y) * out_width;
    for (int x = 0; x < out_width; ++x) out[x] = rgbx[4 * x + c];
  }
}

// One output row of RGBX sums to its place in the float32 output.
void StoreFloats(const int32_t* sums, int out_width, int out_height, int y,
                 const ResampleOutput& output) {
  float* dst = static_cast<float*>(output.dst);
  constexpr float kUnit = 1.0f / (1 << kSumBits);
  if (output.hwc) {
    float* out = dst + size_t(y) * out_width * 3;
    for (int x = 0; x < out_width; ++x) {
      for (int c = 0; c < 3; ++c) {
        out[3 * x + c] =
            static_cast<float>(sums[4 * x + c]) * (kUnit * output.mul[c]) + output.add[c];
      }
    }
    return;
  }
  const size_t plane = size_t(out_width) * out_height;
  for (int c = 0; c < 3; ++c) {
    float* out = dst + plane * c + size_t(y) * out_width;
    const float mul = kUnit * output.mul[c], add = output.add[c];
    for (int x = 0; x < out_width; ++x) out[x] = static_cast<float>(sums[4 * x + c]) * mul + add;
  }
}

// Every output pixel is padding.
void StorePadding(int out_width, int out_height, const ResampleOutput& output) {
  const size_t plane = size_t(out_width) * out_height;
  if (!output.float32) {
    std::memset(output.dst, 0, plane * 3);
    return;
  }
  float* dst = static_cast<float*>(output.dst);
  for (size_t i = 0; i < plane; ++i) {
    for (int c = 0; c < 3; ++c) {
      if (output.hwc) {
        dst[3 * i + c] = output.add[c];
      } else {
        dst[plane * c + i] = output.add[c];
      }
    }
  }
}

// ---- AVX2 kernels (x86-64) ----
//
// Compiled for AVX2 whatever the build's target; called only when the CPU has it. They
// compute exactly what the portable kernels do.
#ifdef EMBER_RESAMPLE_AVX2

#define EMBER_AVX2 __attribute__((target("avx2")))

// Bytes the horizontal kernel may read past the last source pixel a row's taps touch.
constexpr size_t kHorizontalOverread = 16;

// The horizontal kernel's weights: ceil(n / 2) pairs of taps, pair-major (pair p of
// output o at (p * out + o) * 8), each 8 int16 (w0, w1, w0, w1, w0, w1, 0, 0), one lane
// pair per colour channel.
void BuildPairs(const ResampleTaps& taps, std::vector<int16_t>* pairs_out) {
  const int out = static_cast<int>(taps.start.size());
  const int n = taps.n;
  const int pairs = (n + 1) / 2;
  pairs_out->resize(size_t(out) * pairs * 8);
  for (int o = 0; o < out; ++o) {
    const int16_t* w = &taps.weights[size_t(o) * n];
    for (int p = 0; p < pairs; ++p) {
      const int16_t w0 = w[2 * p];
      const int16_t w1 = 2 * p + 1 < n ? w[2 * p + 1] : 0;
      int16_t* lanes = &(*pairs_out)[(size_t(p) * out + o) * 8];
      lanes[0] = lanes[2] = lanes[4] = w0;
      lanes[1] = lanes[3] = lanes[5] = w1;
      lanes[6] = lanes[7] = 0;
    }
  }
}

// Output pixels p0 and p1 of the horizontal kernel (w: their weights, pair 0), as
// (R, G, B, 0 | R, G, B, 0) in 2^-7 units. kPairs > 0: `pairs` known at compile time.
template <int kPairs>
EMBER_AVX2 inline __m256i HorizontalTwo(const uint8_t* p0, const uint8_t* p1, const int16_t* w,
                                        int pairs, size_t pair_stride, __m256i shuffle,
                                        __m256i round) {
  if (kPairs > 0) pairs = kPairs;
  __m256i sum = round;
  for (int p = 0; p < pairs; ++p, p0 += 6, p1 += 6, w += pair_stride) {
    const __m256i pixels = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1)), 1);
    sum = _mm256_add_epi32(
        sum, _mm256_madd_epi16(_mm256_shuffle_epi8(pixels, shuffle),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w))));
  }
  return _mm256_srai_epi32(sum, kRowShift);
}

// As HorizontalPortable, two output pixels at a time, with the weights of BuildPairs. For
// each pair of taps, 16 bytes from the pair's first pixel are loaded (one pixel per
// 128-bit lane), their 6 bytes shuffled to (R0, R1, G0, G1, B0, B1, 0, 0) as int16, and
// multiplied with the pair's weights and summed by pmaddwd into (R, G, B, 0) as int32.
template <int kPairs>
EMBER_AVX2 void HorizontalAvx2(const uint8_t* src, const int* offsets, const int16_t* weights,
                               int n, int out_width, int16_t* out) {
  const int pairs = (n + 1) / 2;
  const size_t pair_stride = size_t(out_width) * 8;  // int16 from one pair to the next
  const __m256i shuffle =
      _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, 0, -1, 3, -1, 1,
                       -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
  const __m256i round = _mm256_set1_epi32(1 << (kRowShift - 1));
  int o = 0;
  for (; o + 4 <= out_width; o += 4) {
    const __m256i first =
        HorizontalTwo<kPairs>(src + offsets[o], src + offsets[o + 1], weights + size_t(o) * 8,
                              pairs, pair_stride, shuffle, round);
    const __m256i second =
        HorizontalTwo<kPairs>(src + offsets[o + 2], src + offsets[o + 3],
                              weights + size_t(o + 2) * 8, pairs, pair_stride, shuffle, round);
    // packs interleaves the 128-bit lanes: pixels o, o + 2, o + 1, o + 3; permute fixes.
    const __m256i packed = _mm256_packs_epi32(first, second);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * o),
                        _mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0)));
  }
  for (; o < out_width; ++o) {
    const uint8_t* p = src + offsets[o];
    const int16_t* w = weights + size_t(o) * 8;
    __m128i sum = _mm256_castsi256_si128(round);
    for (int k = 0; k < pairs; ++k, p += 6, w += pair_stride) {
      const __m128i pixels = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      sum = _mm_add_epi32(sum,
                          _mm_madd_epi16(_mm_shuffle_epi8(pixels, _mm256_castsi256_si128(shuffle)),
                                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(w))));
    }
    sum = _mm_srai_epi32(sum, kRowShift);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 4 * o), _mm_packs_epi32(sum, sum));
  }
}

// 16 values of the uint8 vertical pass from `row`: VerticalByte's sums, as int16.
template <int kTaps>
EMBER_AVX2 inline __m256i VerticalSixteen(const int16_t* row, size_t stride, const __m256i* weights,
                                          int n) {
  if (kTaps > 0) n = kTaps;
  __m256i sum =
      _mm256_mulhrs_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)), weights[0]);
  for (int k = 1; k < n; ++k) {
    row += stride;
    sum = _mm256_add_epi16(
        sum,
        _mm256_mulhrs_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)), weights[k]));
  }
  return _mm256_mulhrs_epi16(sum, _mm256_set1_epi16(1 << (15 - kByteSumBits)));
}

// The uint8 vertical pass for one output row (n <= kMaxByteTaps), 8 pixels (32 values)
// at a time: as RGBX bytes to `rgbx` or, kPlanes, shuffled to (R0-3 G0-3 B0-3 X0-3 |
// R4-7 G4-7 B4-7 X4-7), permuted to (R0-7 G0-7 | B0-7 X0-7) and stored to the planes r,
// g, b.
template <int kTaps, bool kPlanes>
EMBER_AVX2 void VerticalBytesAvx2(const int16_t* rows, size_t stride, const int16_t* w, int n,
                                  int out_width, uint8_t* rgbx, uint8_t* r, uint8_t* g,
                                  uint8_t* b) {
  __m256i weights[kMaxByteTaps];
  for (int k = 0; k < n; ++k) weights[k] = _mm256_set1_epi16(w[k]);
  const __m256i shuffle = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0,
                                           4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int x = 0;
  for (; x + 8 <= out_width; x += 8) {
    const __m256i first = VerticalSixteen<kTaps>(rows + 4 * x, stride, weights, n);
    const __m256i second = VerticalSixteen<kTaps>(rows + 4 * x + 16, stride, weights, n);
    // packus interleaves the lanes of its two inputs; permute4x64 puts them back.
    const __m256i pixels =
        _mm256_permute4x64_epi64(_mm256_packus_epi16(first, second), _MM_SHUFFLE(3, 1, 2, 0));
    if (!kPlanes) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(rgbx + 4 * x), pixels);
      continue;
    }
    const __m256i planes = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(pixels, shuffle), order);
    const __m128i rg = _mm256_castsi256_si128(planes);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(r + x), rg);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(g + x), _mm_unpackhi_epi64(rg, rg));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(b + x), _mm256_extracti128_si256(planes, 1));
  }
  for (; x < out_width; ++x) {
    for (int c = 0; c < 4; ++c) {
      const uint8_t value = VerticalByte(rows, stride, w, n, 4 * size_t(x) + c);
      if (!kPlanes) {
        rgbx[4 * x + c] = value;
      } else if (c < 3) {
        (c == 0 ? r : c == 1 ? g : b)[x] = value;
      }
    }
  }
}

bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

#endif  // EMBER_RESAMPLE_AVX2

// floor and ceil to int without a call into libm (x86-64's baseline has no roundsd).
int FloorToInt(double v) {
  const int i = static_cast<int>(v);
  return i - (v < i);
}
int CeilToInt(double v) {
  const int i = static_cast<int>(v);
  return i + (v > i);
}

}  // namespace

void ResampleScratch::ShrinkTo(size_t bytes) {
  if (rows.capacity() * sizeof(int16_t) > bytes) std::vector<int16_t>().swap(rows);
}

void BuildResampleTaps(double scale, double offset, int out, int source, ResampleTaps* taps) {
  const double support = std::max(1.0, std::abs(scale));
  const double inverse_support = 1.0 / support;
  const int max_taps = std::min(source, CeilToInt(support) * 2 + 1);
  // Output o is centred on source coordinate scale * (o + 0.5) + offset; its window is
  // the source pixels whose centres are within the support, i + 0.5 in (center - support,
  // center + support). An output centred outside the source is padding.
  taps->start.resize(out);
  taps->inside.resize(out);
  std::vector<int>& counts = taps->counts;
  counts.resize(out);
  int n = 1;
  for (int o = 0; o < out; ++o) {
    const double center = scale * (o + 0.5) + offset;
    taps->inside[o] = center >= 0 && center < source;
    if (!taps->inside[o]) continue;
    const int first = std::max(0, FloorToInt(center - support - 0.5) + 1);
    const int last = std::min(source - 1, CeilToInt(center + support - 0.5) - 1);
    taps->start[o] = first;
    counts[o] = std::max(1, std::min(max_taps, last - first + 1));
    n = std::max(n, counts[o]);
  }

  // Windows of n, shifted left where one would run past the source's end; weights
  // normalized, then rounded to 2^-14 with the rounding error put on the largest.
  taps->n = n;
  taps->weights.assign(size_t(out) * n, 0);
  std::vector<double>& weights = taps->window;  // of one output's window
  if (weights.size() < size_t(n)) weights.resize(n);
  int lowest = source, highest = -1;
  for (int o = 0; o < out; ++o) {
    if (!taps->inside[o]) continue;
    const double center = scale * (o + 0.5) + offset;
    const int first = taps->start[o], count = counts[o];
    const int start = std::min(first, source - n);
    int16_t* w = &taps->weights[size_t(o) * n + (first - start)];
    taps->start[o] = start;
    lowest = std::min(lowest, start);
    highest = std::max(highest, start + n - 1);
    if (count == 2) {
      // The common case (enlarging), unrolled: the same values as the loops below.
      const double w0 = std::max(0.0, 1.0 - std::abs(first + 0.5 - center) * inverse_support);
      const double w1 = std::max(0.0, 1.0 - std::abs(first + 1.5 - center) * inverse_support);
      const double unit = kResampleWeightOne / (w0 + w1);
      const int q0 = static_cast<int>(w0 * unit + 0.5), q1 = static_cast<int>(w1 * unit + 0.5);
      w[0] = static_cast<int16_t>(q1 > q0 ? q0 : kResampleWeightOne - q1);
      w[1] = static_cast<int16_t>(q1 > q0 ? kResampleWeightOne - q0 : q1);
      continue;
    }
    double sum = 0;
    for (int k = 0; k < count; ++k) {
      weights[k] = std::max(0.0, 1.0 - std::abs(first + k + 0.5 - center) * inverse_support);
      sum += weights[k];
    }
    const double unit = kResampleWeightOne / sum;
    int total = 0, largest = 0, largest_value = -1;
    for (int k = 0; k < count; ++k) {
      const int value = static_cast<int>(weights[k] * unit + 0.5);
      w[k] = static_cast<int16_t>(value);
      total += value;
      if (value > largest_value) {
        largest = k;
        largest_value = value;
      }
    }
    w[largest] = static_cast<int16_t>(largest_value + kResampleWeightOne - total);
  }
  taps->lowest = lowest;
  taps->highest = highest;
  if (taps->highest < 0) taps->lowest = 0;
  for (int o = 0; o < out; ++o) {
    if (!taps->inside[o]) taps->start[o] = taps->lowest;  // zero weights, a valid window
  }
}

bool ResampleHasSimd() {
#ifdef EMBER_RESAMPLE_AVX2
  return CpuHasAvx2();
#else
  return false;
#endif
}

void ResampleImage(const RgbImage& image, const ResampleTaps& x, const ResampleTaps& y,
                   const ResampleOutput& output, ResampleScratch& scratch,
                   ResampleKernels kernels) {
  const int out_width = static_cast<int>(x.start.size());
  const int out_height = static_cast<int>(y.start.size());
  if (x.highest < x.lowest || y.highest < y.lowest) {
    StorePadding(out_width, out_height, output);
    return;
  }
  [[maybe_unused]] const bool simd = kernels == ResampleKernels::kBest && ResampleHasSimd();
  const PixelRect& region = image.region;
  const int row_count = y.highest - y.lowest + 1;
  const size_t row_values = size_t(out_width) * 4;
  // Grown, never shrunk here: resizing down and up again would zero-fill each time.
  auto grow = [](auto& v, size_t size) {
    if (v.size() < size) v.resize(size);
  };
  grow(scratch.rows, row_values * row_count);
  grow(scratch.offsets, out_width);
  grow(scratch.sums, row_values);
  grow(scratch.bytes, row_values);

  // Horizontal pass over the source rows the output needs.
  int* offsets = scratch.offsets.data();
  for (int o = 0; o < out_width; ++o) offsets[o] = 3 * (x.start[o] - x.lowest);
#ifdef EMBER_RESAMPLE_AVX2
  if (simd) BuildPairs(x, &scratch.pairs);
#endif
  for (int r = 0; r < row_count; ++r) {
    const uint8_t* src =
        image.pixels + (size_t(y.lowest + r - region.y) * region.width + (x.lowest - region.x)) * 3;
    int16_t* out = &scratch.rows[row_values * r];
#ifdef EMBER_RESAMPLE_AVX2
    if (simd) {
      // The kernel reads a little past the last pixel: past the end of the image, it
      // reads a copy of the row instead.
      const size_t bytes = size_t(x.highest - x.lowest + 1) * 3;
      const uint8_t* end = image.pixels + size_t(region.width) * region.height * 3;
      if (size_t(end - src) < bytes + kHorizontalOverread) {
        scratch.padded_row.assign(bytes + kHorizontalOverread, 0);
        std::memcpy(scratch.padded_row.data(), src, bytes);
        src = scratch.padded_row.data();
      }
      const int16_t* w = scratch.pairs.data();
      switch ((x.n + 1) / 2) {
        case 1: HorizontalAvx2<1>(src, offsets, w, x.n, out_width, out); break;
        case 2: HorizontalAvx2<2>(src, offsets, w, x.n, out_width, out); break;
        default: HorizontalAvx2<0>(src, offsets, w, x.n, out_width, out); break;
      }
      continue;
    }
#endif
    HorizontalPortable(src, offsets, x, out);
  }

  // Vertical pass per output row.
  for (int o = 0; o < out_height; ++o) {
    const int16_t* rows = &scratch.rows[row_values * (y.start[o] - y.lowest)];
    const int16_t* w = &y.weights[size_t(o) * y.n];
    if (output.float32) {
      VerticalSums(rows, row_values, w, y.n, static_cast<int>(row_values), scratch.sums.data());
      StoreFloats(scratch.sums.data(), out_width, out_height, o, output);
      continue;
    }
    uint8_t* bytes = scratch.bytes.data();
    if (y.n > kMaxByteTaps) {
      VerticalSums(rows, row_values, w, y.n, static_cast<int>(row_values), scratch.sums.data());
      for (size_t i = 0; i < row_values; ++i) bytes[i] = SumToByte(scratch.sums[i]);
      StoreBytes(bytes, out_width, out_height, o, output);
      continue;
    }
#ifdef EMBER_RESAMPLE_AVX2
    if (simd) {
      if (!output.hwc) {
        const size_t plane = size_t(out_width) * out_height;
        uint8_t* r = static_cast<uint8_t*>(output.dst) + size_t(o) * out_width;
        uint8_t* g = r + plane;
        uint8_t* b = g + plane;
        switch (y.n) {
          case 2:
            VerticalBytesAvx2<2, true>(rows, row_values, w, 2, out_width, bytes, r, g, b);
            break;
          case 3:
            VerticalBytesAvx2<3, true>(rows, row_values, w, 3, out_width, bytes, r, g, b);
            break;
          case 4:
            VerticalBytesAvx2<4, true>(rows, row_values, w, 4, out_width, bytes, r, g, b);
            break;
          default:
            VerticalBytesAvx2<0, true>(rows, row_values, w, y.n, out_width, bytes, r, g, b);
            break;
        }
        continue;
      }
      VerticalBytesAvx2<0, false>(rows, row_values, w, y.n, out_width, bytes, nullptr, nullptr,
                                  nullptr);
      StoreBytes(bytes, out_width, out_height, o, output);
      continue;
    }
#endif
    VerticalBytes(rows, row_values, w, y.n, static_cast<int>(row_values), bytes);
    StoreBytes(bytes, out_width, out_height, o, output);
  }
}

}  // namespace ember::daemon

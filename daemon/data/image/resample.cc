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

// Layout of the horizontal pass's rows: each is 3 planes (R, G, B) of out_width int16
// values, one after the other, so that the vertical pass works on each channel as a
// plain array (and writes CHW output planes directly).

// ---- Portable kernels ----

// One source row to one planar row: channel c of output o, out[c * plane + o], is the sum
// over k of w[o][k] * channel c of source pixel (offsets[o] / 3 + k), in 2^-7 units,
// rounded. `src` points at the pixel offsets are counted from (bytes).
template <int kN>
void HorizontalRow(const uint8_t* src, const int* offsets, const int16_t* weights, int n,
                   int out_width, size_t plane, int16_t* __restrict out) {
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
    out[o] = static_cast<int16_t>(r >> kRowShift);
    out[plane + o] = static_cast<int16_t>(g >> kRowShift);
    out[2 * plane + o] = static_cast<int16_t>(b >> kRowShift);
  }
}

// HorizontalRow for outputs [first, out_width) of the taps (SIMD kernels' tails too).
void HorizontalPortable(const uint8_t* src, const int* offsets, const ResampleTaps& taps,
                        int first, int16_t* out) {
  const int out_width = static_cast<int>(taps.start.size());
  const int count = out_width - first;
  const int n = taps.n;
  const int16_t* w = taps.weights.data() + size_t(first) * n;
  offsets += first;
  out += first;
  const size_t plane = size_t(out_width);
  switch (n) {
    case 1: HorizontalRow<1>(src, offsets, w, 1, count, plane, out); break;
    case 2: HorizontalRow<2>(src, offsets, w, 2, count, plane, out); break;
    case 3: HorizontalRow<3>(src, offsets, w, 3, count, plane, out); break;
    case 4: HorizontalRow<4>(src, offsets, w, 4, count, plane, out); break;
    default: HorizontalRow<0>(src, offsets, w, n, count, plane, out); break;
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

// Values [first, count) of the uint8 vertical pass.
void VerticalBytes(const int16_t* rows, size_t stride, const int16_t* w, int n, int first,
                   int count, uint8_t* __restrict out) {
  for (int i = first; i < count; ++i) out[i] = VerticalByte(rows, stride, w, n, i);
}

// One output row, as 3 planes of out_width bytes, to its place in HWC uint8 output.
void StoreBytesHwc(const uint8_t* planes, int out_width, int y, const ResampleOutput& output) {
  uint8_t* out = static_cast<uint8_t*>(output.dst) + size_t(y) * out_width * 3;
  for (int x = 0; x < out_width; ++x) {
    for (int c = 0; c < 3; ++c) out[3 * x + c] = planes[size_t(c) * out_width + x];
  }
}

// One output row of sums, as 3 planes of out_width, to its place in the float32 output.
void StoreFloats(const int32_t* sums, int out_width, int out_height, int y,
                 const ResampleOutput& output) {
  float* dst = static_cast<float*>(output.dst);
  constexpr float kUnit = 1.0f / (1 << kSumBits);
  if (output.hwc) {
    float* out = dst + size_t(y) * out_width * 3;
    for (int x = 0; x < out_width; ++x) {
      for (int c = 0; c < 3; ++c) {
        out[3 * x + c] = static_cast<float>(sums[size_t(c) * out_width + x]) *
                             (kUnit * output.mul[c]) +
                         output.add[c];
      }
    }
    return;
  }
  const size_t plane = size_t(out_width) * out_height;
  for (int c = 0; c < 3; ++c) {
    float* out = dst + plane * c + size_t(y) * out_width;
    const int32_t* in = sums + size_t(c) * out_width;
    const float mul = kUnit * output.mul[c], add = output.add[c];
    for (int x = 0; x < out_width; ++x) out[x] = static_cast<float>(in[x]) * mul + add;
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

// Bytes the horizontal kernels may read past the last source pixel a row's taps touch.
constexpr size_t kHorizontalOverread = 16;

// Stores 8 outputs' channels to the planes of a row (`out` at the first output): r, g, b
// as int32 (lanes: outputs 0-3 | 4-7).
EMBER_AVX2 inline void StorePlanar8(__m256i r, __m256i g, __m256i b, size_t plane,
                                    int16_t* out) {
  // packs interleaves the 128-bit lanes: (r 0-3, g 0-3 | r 4-7, g 4-7); permute fixes.
  const __m256i rg =
      _mm256_permute4x64_epi64(_mm256_packs_epi32(r, g), _MM_SHUFFLE(3, 1, 2, 0));
  const __m256i bb =
      _mm256_permute4x64_epi64(_mm256_packs_epi32(b, b), _MM_SHUFFLE(3, 1, 2, 0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(rg));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + plane), _mm256_extracti128_si256(rg, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * plane), _mm256_castsi256_si128(bb));
}

// The general horizontal kernel's weights: ceil(n / 2) pairs of taps, pair-major (pair p
// of output o at (p * out + o) * 8), each 8 int16 (w0, w1, w0, w1, w0, w1, 0, 0), one lane
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

// Output pixels p0 and p1 of the general kernel (w: their weights, pair 0), as
// (R, G, B, 0 | R, G, B, 0) in 2^-7 units, int32. kPairs > 0: `pairs` known at compile
// time.
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

// The general horizontal kernel, any number of taps: outputs [0, out_width rounded down
// to 8) of a planar row, with the weights of BuildPairs. Per pair of taps and two output
// pixels, 16 bytes from each pixel's pair are loaded (one per 128-bit lane), their 6
// bytes shuffled to (R0, R1, G0, G1, B0, B1, 0, 0) as int16, and multiplied with the
// pair's weights and summed by pmaddwd into (R, G, B, 0) as int32; the sums of 8 outputs
// are then transposed to the planes. Returns the number of outputs done.
template <int kPairs>
EMBER_AVX2 int HorizontalAvx2(const uint8_t* src, const int* offsets, const int16_t* weights,
                              int n, int out_width, int16_t* out) {
  const int pairs = (n + 1) / 2;
  const size_t pair_stride = size_t(out_width) * 8;  // int16 from one pair to the next
  const __m256i shuffle =
      _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, 0, -1, 3, -1, 1,
                       -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
  const __m256i round = _mm256_set1_epi32(1 << (kRowShift - 1));
  const int done = out_width / 8 * 8;
  for (int o = 0; o < done; o += 8) {
    __m256i rgb[4];  // outputs (o, o + 1), (o + 2, o + 3), ... as (R, G, B, 0 | R, G, B, 0)
    for (int i = 0; i < 4; ++i) {
      const int first = o + 2 * i;
      rgb[i] = HorizontalTwo<kPairs>(src + offsets[first], src + offsets[first + 1],
                                     weights + size_t(first) * 8, pairs, pair_stride, shuffle,
                                     round);
    }
    // To channels: unpacklo_epi32 of (R0 G0 B0 0 | R1 ..) and (R2 G2 B2 0 | R3 ..) gives
    // (R0 R2 G0 G2 | R1 R3 G1 G3), unpackhi (B0 B2 0 0 | B1 B3 0 0); then 64-bit halves.
    const __m256i lo01 = _mm256_unpacklo_epi32(rgb[0], rgb[1]);  // R0 R2 G0 G2 | R1 R3 G1 G3
    const __m256i hi01 = _mm256_unpackhi_epi32(rgb[0], rgb[1]);  // B0 B2 0 0 | B1 B3 0 0
    const __m256i lo23 = _mm256_unpacklo_epi32(rgb[2], rgb[3]);  // R4 R6 G4 G6 | R5 R7 G5 G7
    const __m256i hi23 = _mm256_unpackhi_epi32(rgb[2], rgb[3]);  // B4 B6 0 0 | B5 B7 0 0
    // r: R0 R2 R4 R6 | R1 R3 R5 R7, and so on: outputs in the order 0 2 4 6 1 3 5 7.
    const __m256i r = _mm256_unpacklo_epi64(lo01, lo23);
    const __m256i g = _mm256_unpackhi_epi64(lo01, lo23);
    const __m256i b = _mm256_unpacklo_epi64(hi01, hi23);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    StorePlanar8(_mm256_permutevar8x32_epi32(r, order), _mm256_permutevar8x32_epi32(g, order),
                 _mm256_permutevar8x32_epi32(b, order), size_t(out_width), out + o);
  }
  return done;
}

// Enlarging (windows of at most 2 taps), 4 neighbouring outputs read at most 5
// neighbouring source pixels: 15 bytes, one 16-byte load. BuildGroups plans that for
// blocks of 8 outputs (two groups of 4, one per 128-bit lane): `bases[g]` is the byte
// offset (as `offsets`) of group g's first source pixel; `shuffles` holds, per block and
// channel, the pshufb masks (32 bytes: group 2b's in the low lane, 2b + 1's in the high)
// that take the channel's two pixels of each of the group's outputs from its 16 bytes, as
// int16: (o0 first, o0 second, o1 first, ...); `pair_weights` holds (w0, w1) per output.
// Padding outputs (zero weights) read their group's first pixels. False if some group's
// pixels span more than 16 bytes (a reduction) or there is no whole block: the general
// kernel then does the rows.
bool BuildGroups(const ResampleTaps& taps, const int* offsets, std::vector<int>* bases,
                 std::vector<int8_t>* shuffles, std::vector<int16_t>* pair_weights) {
  const int out = static_cast<int>(taps.start.size());
  const int n = taps.n;
  if (n > 2 || out < 8) return false;
  const int blocks = out / 8;
  bases->resize(size_t(blocks) * 2);
  shuffles->resize(size_t(blocks) * 3 * 32);
  pair_weights->resize(size_t(blocks) * 8 * 2);
  for (int g = 0; g < 2 * blocks; ++g) {
    int low = -1, high = -1;
    for (int o = 4 * g; o < 4 * g + 4; ++o) {
      if (!taps.inside[o]) continue;
      low = low < 0 ? offsets[o] : std::min(low, offsets[o]);
      high = std::max(high, offsets[o]);
    }
    if (low < 0) low = high = offsets[4 * g];  // all padding
    if (high - low + 6 > 16) return false;
    (*bases)[g] = low;
    for (int j = 0; j < 4; ++j) {
      const int o = 4 * g + j;
      const int at = taps.inside[o] ? offsets[o] - low : 0;
      for (int c = 0; c < 3; ++c) {
        int8_t* mask = &(*shuffles)[(size_t(g / 2) * 3 + c) * 32 + (g % 2) * 16 + 4 * j];
        mask[0] = static_cast<int8_t>(at + c);      // channel c of the first pixel
        mask[2] = static_cast<int8_t>(at + 3 + c);  // and of the second
        mask[1] = mask[3] = -1;                     // high bytes: zero
      }
      (*pair_weights)[2 * size_t(o)] = taps.weights[size_t(o) * n];
      (*pair_weights)[2 * size_t(o) + 1] = n == 2 ? taps.weights[size_t(o) * n + 1] : 0;
    }
  }
  return true;
}

// BuildGroups's kernel: per block of 8 outputs, one 16-byte load per group and, per
// channel, one shuffle and one pmaddwd (the same weights for the three channels). Does
// outputs [0, out_width rounded down to 8).
EMBER_AVX2 void HorizontalGroupsAvx2(const uint8_t* src, const int* bases, const int8_t* shuffles,
                                     const int16_t* pair_weights, int out_width, int16_t* out) {
  const __m256i round = _mm256_set1_epi32(1 << (kRowShift - 1));
  const int blocks = out_width / 8;
  const size_t plane = size_t(out_width);
  for (int block = 0; block < blocks; ++block) {
    const __m256i pixels = _mm256_inserti128_si256(
        _mm256_castsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + bases[2 * block]))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + bases[2 * block + 1])), 1);
    const __m256i w =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair_weights + size_t(block) * 16));
    const int8_t* masks = shuffles + size_t(block) * 96;
    __m256i sums[3];
    for (int c = 0; c < 3; ++c) {
      const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(masks + 32 * c));
      const __m256i sum =
          _mm256_add_epi32(_mm256_madd_epi16(_mm256_shuffle_epi8(pixels, mask), w), round);
      sums[c] = _mm256_srai_epi32(sum, kRowShift);
    }
    StorePlanar8(sums[0], sums[1], sums[2], plane, out + size_t(block) * 8);
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

// The uint8 vertical pass (n <= kMaxByteTaps) of one output row: for each channel c, the
// `count` values of plane c (at rows + c * count) into outs[c], 32 (then 16) at a time;
// returns how many of each were done (count rounded down to 16). With `stream`, stores
// to 32-byte aligned places bypass the cache (the output is the image's final place,
// read later by another process: a normal store would first read each line from memory
// and then evict the decoder's working set with it); the caller fences.
template <int kTaps>
EMBER_AVX2 int VerticalBytesAvx2(const int16_t* rows, size_t stride, const int16_t* w, int n,
                                 int count, uint8_t* const outs[3], bool stream) {
  __m256i weights[kMaxByteTaps];
  for (int k = 0; k < n; ++k) weights[k] = _mm256_set1_epi16(w[k]);
  const int done32 = count / 32 * 32, done = count / 16 * 16;
  for (int c = 0; c < 3; ++c) {
    const int16_t* plane = rows + size_t(c) * count;
    const bool aligned = stream && reinterpret_cast<uintptr_t>(outs[c]) % 32 == 0;
    for (int i = 0; i < done32; i += 32) {
      const __m256i first = VerticalSixteen<kTaps>(plane + i, stride, weights, n);
      const __m256i second = VerticalSixteen<kTaps>(plane + i + 16, stride, weights, n);
      // packus interleaves the lanes of its two inputs; permute4x64 puts them back.
      const __m256i bytes =
          _mm256_permute4x64_epi64(_mm256_packus_epi16(first, second), _MM_SHUFFLE(3, 1, 2, 0));
      auto* to = reinterpret_cast<__m256i*>(outs[c] + i);
      if (aligned) {
        _mm256_stream_si256(to, bytes);
      } else {
        _mm256_storeu_si256(to, bytes);
      }
    }
    if (done > done32) {
      const __m256i values = VerticalSixteen<kTaps>(plane + done32, stride, weights, n);
      const __m256i packed =
          _mm256_permute4x64_epi64(_mm256_packus_epi16(values, values), _MM_SHUFFLE(3, 1, 2, 0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(outs[c] + done32),
                       _mm256_castsi256_si128(packed));
    }
  }
  return done;
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
  taps->counts.resize(out);
  // Raw pointers: stores through uint8_t* `inside` would otherwise make the compiler
  // reload every vector's data pointer in each iteration.
  int* const starts = taps->start.data();
  uint8_t* const inside = taps->inside.data();
  int* const counts = taps->counts.data();
  int n = 1;
  for (int o = 0; o < out; ++o) {
    const double center = scale * (o + 0.5) + offset;
    const bool in = center >= 0 && center < source;
    inside[o] = in;
    if (!in) continue;
    const int first = std::max(0, FloorToInt(center - support - 0.5) + 1);
    const int last = std::min(source - 1, CeilToInt(center + support - 0.5) - 1);
    starts[o] = first;
    counts[o] = std::max(1, std::min(max_taps, last - first + 1));
    n = std::max(n, counts[o]);
  }

  // Windows of n, shifted left where one would run past the source's end; weights
  // normalized, then rounded to 2^-14 with the rounding error put on the largest.
  taps->n = n;
  taps->weights.assign(size_t(out) * n, 0);
  int16_t* const all_weights = taps->weights.data();
  if (taps->window.size() < size_t(n)) taps->window.resize(n);
  double* const weights = taps->window.data();  // of one output's window
  int lowest = source, highest = -1;
  for (int o = 0; o < out; ++o) {
    if (!inside[o]) continue;
    const double center = scale * (o + 0.5) + offset;
    const int first = starts[o], count = counts[o];
    const int start = std::min(first, source - n);
    int16_t* w = all_weights + size_t(o) * n + (first - start);
    starts[o] = start;
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
    if (!inside[o]) starts[o] = taps->lowest;  // zero weights, a valid window
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
  const size_t row_values = size_t(out_width) * 3;  // planes R, G, B
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
  bool grouped = false;
  if (simd) {
    grouped = BuildGroups(x, offsets, &scratch.group_bases, &scratch.group_shuffles,
                          &scratch.group_weights);
    if (!grouped) BuildPairs(x, &scratch.pairs);
  }
#endif
  for (int r = 0; r < row_count; ++r) {
    const uint8_t* src =
        image.pixels + (size_t(y.lowest + r - region.y) * region.width + (x.lowest - region.x)) * 3;
    int16_t* out = &scratch.rows[row_values * r];
    int done = 0;
#ifdef EMBER_RESAMPLE_AVX2
    if (simd) {
      // The kernels read a little past the last pixel: past the end of the image, they
      // read a copy of the row instead.
      const size_t bytes = size_t(x.highest - x.lowest + 1) * 3;
      const uint8_t* end = image.pixels + size_t(region.width) * region.height * 3;
      if (size_t(end - src) < bytes + kHorizontalOverread) {
        scratch.padded_row.assign(bytes + kHorizontalOverread, 0);
        std::memcpy(scratch.padded_row.data(), src, bytes);
        src = scratch.padded_row.data();
      }
      if (grouped) {
        HorizontalGroupsAvx2(src, scratch.group_bases.data(), scratch.group_shuffles.data(),
                             scratch.group_weights.data(), out_width, out);
        done = out_width / 8 * 8;
      } else {
        const int16_t* w = scratch.pairs.data();
        switch ((x.n + 1) / 2) {
          case 1: done = HorizontalAvx2<1>(src, offsets, w, x.n, out_width, out); break;
          case 2: done = HorizontalAvx2<2>(src, offsets, w, x.n, out_width, out); break;
          default: done = HorizontalAvx2<0>(src, offsets, w, x.n, out_width, out); break;
        }
      }
    }
#endif
    if (done < out_width) HorizontalPortable(src, offsets, x, done, out);
  }

  // Vertical pass per output row and channel.
  const size_t plane = size_t(out_width) * out_height;
  [[maybe_unused]] const bool stream = !output.hwc;  // CHW goes straight to the output
  for (int o = 0; o < out_height; ++o) {
    const int16_t* rows = &scratch.rows[row_values * (y.start[o] - y.lowest)];
    const int16_t* w = &y.weights[size_t(o) * y.n];
    if (output.float32) {
      VerticalSums(rows, row_values, w, y.n, static_cast<int>(row_values), scratch.sums.data());
      StoreFloats(scratch.sums.data(), out_width, out_height, o, output);
      continue;
    }
    // CHW: straight to the output's planes; HWC: to scratch planes, interleaved below.
    uint8_t* outs[3];
    for (int c = 0; c < 3; ++c) {
      outs[c] = output.hwc ? scratch.bytes.data() + size_t(c) * out_width
                           : static_cast<uint8_t*>(output.dst) + plane * c + size_t(o) * out_width;
    }
    if (y.n > kMaxByteTaps) {
      int32_t* sums = scratch.sums.data();
      VerticalSums(rows, row_values, w, y.n, static_cast<int>(row_values), sums);
      for (int c = 0; c < 3; ++c) {
        for (int i = 0; i < out_width; ++i) outs[c][i] = SumToByte(sums[size_t(c) * out_width + i]);
      }
    } else {
      int done = 0;
#ifdef EMBER_RESAMPLE_AVX2
      if (simd) {
        switch (y.n) {
          case 2: done = VerticalBytesAvx2<2>(rows, row_values, w, 2, out_width, outs, stream); break;
          case 3: done = VerticalBytesAvx2<3>(rows, row_values, w, 3, out_width, outs, stream); break;
          case 4: done = VerticalBytesAvx2<4>(rows, row_values, w, 4, out_width, outs, stream); break;
          default: done = VerticalBytesAvx2<0>(rows, row_values, w, y.n, out_width, outs, stream); break;
        }
      }
#endif
      for (int c = 0; c < 3; ++c) {
        VerticalBytes(rows + size_t(c) * out_width, row_values, w, y.n, done, out_width, outs[c]);
      }
    }
    if (output.hwc) StoreBytesHwc(scratch.bytes.data(), out_width, o, output);
  }
#ifdef EMBER_RESAMPLE_AVX2
  // The streaming stores are weakly ordered: make them visible before whatever publishes
  // the output.
  if (simd && stream && !output.float32) _mm_sfence();
#endif
}

}  // namespace ember::daemon

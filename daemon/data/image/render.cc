#include "daemon/data/image/render.h"

#include <cstddef>
#include <cstdint>

namespace ember::daemon {

namespace {

// Render without filtering (every window is one source pixel of weight 1).
void CopyPixels(const RgbImage& image, const ResampleTaps& tx, const ResampleTaps& ty,
                const PixelFormat& format, void* dst) {
  const int out_w = static_cast<int>(tx.start.size()), out_h = static_cast<int>(ty.start.size());
  const size_t plane = size_t(out_w) * out_h;
  const PixelRect& region = image.region;
  // Channel c of output (x, y) is at dst[base(y) + c * channel_step + x * pixel_step].
  const bool hwc = format.layout == ImageLayout::kHWC;
  const size_t pixel_step = hwc ? 3 : 1;
  const size_t channel_step = hwc ? 1 : plane;
  const float* mul = format.mul;
  const float* add = format.add;
  for (int y = 0; y < out_h; ++y) {
    const size_t base = size_t(y) * out_w * pixel_step;
    const bool row_inside = ty.inside[y] != 0;
    // Rows and columns outside are padding, never read.
    const uint8_t* row = image.pixels + ptrdiff_t(ty.start[y] - region.y) * region.width * 3;
    if (format.dtype == ring::DType::kUInt8) {
      uint8_t* r = static_cast<uint8_t*>(dst) + base;
      uint8_t* g = r + channel_step;
      uint8_t* b = g + channel_step;
      if (!row_inside) {
        for (int x = 0; x < out_w; ++x) {
          r[x * pixel_step] = g[x * pixel_step] = b[x * pixel_step] = 0;
        }
        continue;
      }
      for (int x = 0; x < out_w; ++x) {
        const uint8_t* p = row + ptrdiff_t(tx.start[x] - region.x) * 3;
        const size_t at = x * pixel_step;
        const bool inside = tx.inside[x] != 0;
        r[at] = inside ? p[0] : 0;
        g[at] = inside ? p[1] : 0;
        b[at] = inside ? p[2] : 0;
      }
    } else {
      float* r = static_cast<float*>(dst) + base;
      float* g = r + channel_step;
      float* b = g + channel_step;
      for (int x = 0; x < out_w; ++x) {
        const bool inside = row_inside && tx.inside[x];
        const uint8_t* p = row + ptrdiff_t(tx.start[x] - region.x) * 3;
        const size_t at = x * pixel_step;
        r[at] = (inside ? p[0] : 0) * mul[0] + add[0];
        g[at] = (inside ? p[1] : 0) * mul[1] + add[1];
        b[at] = (inside ? p[2] : 0) * mul[2] + add[2];
      }
    }
  }
}

}  // namespace

void BuildPlanTaps(const SamplePlan& plan, int width, int height, ResampleTaps* x,
                   ResampleTaps* y) {
  const double rx = static_cast<double>(width) / plan.source_width;
  const double ry = static_cast<double>(height) / plan.source_height;
  BuildResampleTaps(plan.x_scale * rx, plan.x_offset * rx, plan.width, width, x);
  BuildResampleTaps(plan.y_scale * ry, plan.y_offset * ry, plan.height, height, y);
}

PixelRect TapsRegion(const ResampleTaps& x, const ResampleTaps& y) {
  if (x.highest < x.lowest || y.highest < y.lowest) return PixelRect{};
  return PixelRect{x.lowest, y.lowest, x.highest - x.lowest + 1, y.highest - y.lowest + 1};
}

bool RectContains(const PixelRect& outer, const PixelRect& inner) {
  if (inner.width <= 0 || inner.height <= 0) return true;
  return inner.x >= outer.x && inner.y >= outer.y &&
         inner.x + inner.width <= outer.x + outer.width &&
         inner.y + inner.height <= outer.y + outer.height;
}

void RenderTaps(const RgbImage& image, const ResampleTaps& x, const ResampleTaps& y,
                const PixelFormat& format, ResampleScratch& scratch, void* dst) {
  if (x.n == 1 && y.n == 1) {
    // No filtering on either axis (a crop or flip at the decoded size): a direct copy.
    CopyPixels(image, x, y, format, dst);
    return;
  }
  ResampleOutput output;
  output.dst = dst;
  output.float32 = format.dtype == ring::DType::kFloat32;
  output.hwc = format.layout == ImageLayout::kHWC;
  for (int c = 0; c < 3; ++c) {
    output.mul[c] = format.mul[c];
    output.add[c] = format.add[c];
  }
  ResampleImage(image, x, y, output, scratch);
}

}  // namespace ember::daemon

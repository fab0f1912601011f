// The image pipeline's rendering: a sample plan (geometry.h) turned into resampling taps
// over a decoded image, and the output pixels written in the output dtype and layout.
#ifndef EMBER_DAEMON_DATA_IMAGE_RENDER_H_
#define EMBER_DAEMON_DATA_IMAGE_RENDER_H_

#include "daemon/data/image/decode.h"
#include "daemon/data/image/geometry.h"
#include "daemon/data/image/pipeline_spec.h"
#include "daemon/data/image/resample.h"
#include "ember/ring_layout.h"

namespace ember::daemon {

// How rendered pixels are written: dtype, layout, and for float32 output
// = value (0..255) * mul + add per channel.
struct PixelFormat {
  ring::DType dtype = ring::DType::kUInt8;
  ImageLayout layout = ImageLayout::kCHW;
  float mul[3] = {1, 1, 1};
  float add[3] = {0, 0, 0};
};

// The taps of `plan` over an image decoded at `width` x `height` (the plan rescaled to it).
void BuildPlanTaps(const SamplePlan& plan, int width, int height, ResampleTaps* x,
                   ResampleTaps* y);

// The source pixels the taps read (empty when every output pixel is padding).
PixelRect TapsRegion(const ResampleTaps& x, const ResampleTaps& y);

// Whether `outer` holds every pixel of `inner` (always, for an empty `inner`).
bool RectContains(const PixelRect& outer, const PixelRect& inner);

// Writes the output of the taps over `image` (whose region must hold TapsRegion) to `dst`
// in `format`: a direct copy when neither axis filters, else ResampleImage with `scratch`.
void RenderTaps(const RgbImage& image, const ResampleTaps& x, const ResampleTaps& y,
                const PixelFormat& format, ResampleScratch& scratch, void* dst);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IMAGE_RENDER_H_

// The image pipeline: decode, geometric transforms, pixel conversion, written straight
// into a sample's destination. Declared as YAML at dataset registration
// (DatasetSpec::pipeline):
//
//   steps:                  # applied in order, at least one
//     - random_resized_crop: {size: 224, scale: [0.08, 1.0], ratio: [0.75, 1.3333]}
//     - resize: {size: 256}         # shorter side to 256, keeps the aspect ratio
//     - resize: {size: [240, 320]}  # exactly [height, width]
//     - center_crop: {size: 224}    # or [height, width]; zero-pads an image smaller than that
//     - horizontal_flip: {p: 0.5}
//     - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
//   output: {dtype: uint8, layout: CHW}
//   decode: {max_pixels: 64000000}
//
// Steps and their keys (all others are errors):
//   random_resized_crop  size (required: N or [h, w]); scale [lo, hi], 0 < lo <= hi <= 1,
//                        default [0.08, 1.0]; ratio [lo, hi], 0 < lo <= hi, default
//                        [3/4, 4/3]. torchvision's RandomResizedCrop: 10 tries at a random
//                        area fraction and log-uniform aspect ratio, then a central crop.
//   resize               size (required): N resizes the shorter side to N (the longer one
//                        to floor(N * long / short), as torchvision), [h, w] resizes exactly.
//   center_crop          size (required): N or [h, w].
//   horizontal_flip      p, the probability of flipping, in [0, 1]; default 0.5. A step with
//                        no keys may be written `- horizontal_flip` or `- horizontal_flip: {}`.
//   normalize            mean and std, 3 numbers each (std > 0), in units of [0, 1] pixel
//                        values: out = (pixel / 255 - mean) / std. At most once, as the
//                        last step, and only with dtype float32.
//   output.dtype         uint8 (default) or float32 (pixel / 255, then normalize if given).
//   output.layout        CHW (default) or HWC.
//   decode.max_pixels    largest width * height a file may claim (default 64000000);
//                        larger images fail as corrupt samples before any pixel is decoded.
//   <plugin step>        a step added by a transform plugin loaded by emberd (ember_transform_v1
//                        in ember/plugin.h), e.g. `- solarize: {threshold: 128, p: 0.5}`.
//                        Its settings must be scalars; the plugin checks them. Plugin steps
//                        change pixels, not geometry: they come after every crop, resize
//                        and flip (normalize may follow) and run, in order, on the final
//                        8-bit RGB image before its conversion to the output dtype and
//                        layout, each with a random value derived from (seed, epoch, sample
//                        id, step index).
//
// The output shape must not depend on the image: after the last step that sets the size
// (a crop or a resize to [h, w]) only flips and normalize may follow, and a resize of the
// shorter side must be followed by a crop or a resize to [h, w].
// Empty (or blank) text is the default pipeline, ImageNet's evaluation transform:
// resize 256, center_crop 224, uint8 CHW (configs/pipelines/imagenet_eval.yaml).
//
// Execution: the geometric steps are composed into one map from output pixels to the
// source image (no intermediate image per step), the JPEG is decoded at the smallest DCT
// scale that still gives >= 1 source pixel per output pixel and only around the pixels
// the output reads (decode.h's region decoding), and one separable fixed-point resample
// (resample.h: a triangle filter widened to the downscale factor, as PIL's antialiased
// bilinear) writes the final dtype and layout into the destination.
//
// Randomness derives only from (seed, epoch, sample id): the same triple gives the same
// bytes on any thread, and another epoch gives other crops and flips.
#ifndef EMBER_DAEMON_DATA_IMAGE_PIPELINE_H_
#define EMBER_DAEMON_DATA_IMAGE_PIPELINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/data/image/decode.h"
#include "daemon/data/image/resample.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "daemon/data/plugin/plugin_transform.h"
#include "ember/ring_layout.h"
#include "ember/status.h"

namespace ember::daemon {

enum class ImageLayout { kCHW, kHWC };

struct ImageSize {
  int height = 0;
  int width = 0;
};

struct PipelineStep {
  enum class Kind {
    kRandomResizedCrop,
    kResize,
    kCenterCrop,
    kHorizontalFlip,
    kNormalize,
    kPlugin,
  };
  Kind kind = Kind::kResize;
  ImageSize size;        // crops; resize to [h, w]
  int shorter_side = 0;  // resize: N (then `size` is unused), 0 for [h, w]
  double scale[2] = {0.08, 1.0};            // random_resized_crop
  double ratio[2] = {3.0 / 4.0, 4.0 / 3.0};  // random_resized_crop
  double p = 0.5;                           // horizontal_flip
  float mean[3] = {0, 0, 0};                // normalize
  float std[3] = {1, 1, 1};                 // normalize
  std::shared_ptr<const TransformStep> plugin;  // kPlugin: the configured plugin step
};

// Where the output of one sample comes from, in the coordinates of the full-resolution
// source (continuous: pixel i covers [i, i + 1)). Output pixel (x, y), centred at
// (x + 0.5, y + 0.5), samples the source at (x_scale * (x + 0.5) + x_offset, the same in y).
// A negative scale is a flip. Output pixels whose centre falls outside the source are
// padding (zero before normalize).
struct SamplePlan {
  int source_width = 0;
  int source_height = 0;
  double x_scale = 1, x_offset = 0;
  double y_scale = 1, y_offset = 0;
  int width = 0;  // output
  int height = 0;
};

// Immutable once parsed; every method is const and thread-safe.
class ImagePipeline {
 public:
  // Parses and checks the YAML text (see above; empty: the default). kInvalidArgument
  // naming the line and column, the key or step, and the bad value, e.g.
  //   "pipeline line 3, column 7: step 'resize': unknown key 'sise' (known: size)"
  // Steps that are not built in are looked up in `plugins` (none if null).
  static Result<ImagePipeline> Parse(const std::string& yaml_text,
                                     const PluginRegistry* plugins = nullptr);

  const std::vector<PipelineStep>& steps() const { return steps_; }
  ImageSize output_size() const { return output_size_; }
  ring::DType dtype() const { return dtype_; }
  ImageLayout layout() const { return layout_; }
  const ImageDecodeOptions& decode_options() const { return decode_options_; }

  // The per-sample shape of the output: [3, H, W] (CHW) or [H, W, 3] (HWC).
  std::vector<int64_t> shape() const;
  uint64_t OutputBytes() const;

  // The geometry of sample `id` for a source of `width` x `height` pixels.
  SamplePlan Plan(int width, int height, uint64_t seed, uint64_t epoch, uint64_t id) const;

  // The smallest fraction of the source's resolution a decoder may keep so that the
  // output still gets >= 1 source pixel per output pixel on both axes (1 at most).
  static double MinDecodeScale(const SamplePlan& plan);

  // Resamples `image` (the plan's source, decoded at any size: the plan is rescaled to
  // it) and writes OutputBytes() bytes of the output dtype and layout to `dst`.
  // kInvalidArgument if image.region lacks source pixels the plan reads. Plugin steps are
  // not applied (they need the sample's randomness): Run applies them.
  Status Render(const SamplePlan& plan, const RgbImage& image, void* dst) const;

  // Decodes the encoded image `data` (named `name` in errors) and writes the sample to
  // `dst`: DecodeImageRegion, choosing from the header (read once) the Plan and the pixels
  // it reads at MinDecodeScale, then Render and the plugin steps. kDataLoss for a corrupt
  // image (see decode.h) or a plugin step that fails.
  Status Run(const std::string& name, const uint8_t* data, size_t size, uint64_t seed,
             uint64_t epoch, uint64_t id, void* dst) const;

 private:
  // How rendered pixels are written: dtype, layout, and output = value (0..255) * mul + add
  // for float32.
  struct PixelFormat {
    ring::DType dtype = ring::DType::kUInt8;
    ImageLayout layout = ImageLayout::kCHW;
    float mul[3] = {1, 1, 1};
    float add[3] = {0, 0, 0};
  };
  PixelFormat OutputFormat() const;

  // Render with the taps of the plan over the image's whole decoded size, in `format`.
  void RenderWithTaps(const RgbImage& image, const ResampleTaps& x, const ResampleTaps& y,
                      const PixelFormat& format, void* dst) const;

  // Renders uint8 HWC into a scratch image, applies the plugin steps, converts to the
  // output format in `dst`.
  Status RenderWithPlugins(const RgbImage& image, const ResampleTaps& x, const ResampleTaps& y,
                           uint64_t seed, uint64_t epoch, uint64_t id, void* dst) const;

  std::vector<PipelineStep> steps_;
  ImageSize output_size_;
  ring::DType dtype_ = ring::DType::kUInt8;
  ImageLayout layout_ = ImageLayout::kCHW;
  ImageDecodeOptions decode_options_;
  float mul_[3] = {1, 1, 1};  // output = value (0..255) * mul_ + add_, for float32
  float add_[3] = {0, 0, 0};
  bool has_plugin_steps_ = false;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IMAGE_PIPELINE_H_

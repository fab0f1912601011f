// The image pipeline: decode, geometric transforms, pixel conversion, written straight
// into a sample's destination. It composes four pieces:
//   pipeline_spec.h  the YAML a dataset declares (DatasetSpec::pipeline): steps, output
//                    dtype and layout, decode limits; documented there
//   sample_random.h  per-sample randomness: only (seed, epoch, sample id)
//   geometry.h       the steps' crops, resizes and flips as one map to the source
//   render.h         that map as resampling taps, and the output pixels
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
#include <string>
#include <utility>
#include <vector>

#include "daemon/data/image/decode.h"
#include "daemon/data/image/geometry.h"
#include "daemon/data/image/pipeline_spec.h"
#include "daemon/data/image/render.h"
#include "daemon/data/image/resample.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "ember/ring_layout.h"
#include "ember/status.h"

namespace ember::daemon {

// Immutable once parsed; every method is const and thread-safe.
class ImagePipeline {
 public:
  // Parses and checks the YAML text (ParsePipelineSpec in pipeline_spec.h; empty: the
  // default). kInvalidArgument naming the line and column, the key or step, and the bad
  // value, e.g.
  //   "pipeline: line 3, column 7: step 'resize': unknown key 'sise' (known: size)"
  // Steps that are not built in are looked up in `plugins` (none if null).
  static Result<ImagePipeline> Parse(const std::string& yaml_text,
                                     const PluginRegistry* plugins = nullptr);

  const std::vector<PipelineStep>& steps() const { return spec_.steps; }
  ImageSize output_size() const { return spec_.output_size; }
  ring::DType dtype() const { return spec_.dtype; }
  ImageLayout layout() const { return spec_.layout; }
  const ImageDecodeOptions& decode_options() const { return spec_.decode_options; }

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
  explicit ImagePipeline(PipelineSpec spec) : spec_(std::move(spec)) {}

  // The output dtype and layout, with the float32 scaling of the spec.
  PixelFormat OutputFormat() const;

  // RenderTaps with this thread's scratch memory.
  void RenderWithTaps(const RgbImage& image, const ResampleTaps& x, const ResampleTaps& y,
                      const PixelFormat& format, void* dst) const;

  // Renders uint8 HWC into a scratch image, applies the plugin steps, converts to the
  // output format in `dst`.
  Status RenderWithPlugins(const RgbImage& image, const ResampleTaps& x, const ResampleTaps& y,
                           uint64_t seed, uint64_t epoch, uint64_t id, void* dst) const;

  PipelineSpec spec_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IMAGE_PIPELINE_H_

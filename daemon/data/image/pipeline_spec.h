// The image pipeline's specification: the YAML a dataset declares at registration
// (DatasetSpec::pipeline), parsed and checked. pipeline.h runs it.
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
// Steps and their keys (all others, and a key given twice, are errors):
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
//   decode.max_pixels    largest width * height a file may claim (default 64000000, at most
//                        kMaxDecodePixels); larger images fail as corrupt samples before
//                        any pixel is decoded.
//   <plugin step>        a step added by a transform plugin loaded by emberd (ember_transform_v1
//                        in ember/plugin.h), e.g. `- solarize: {threshold: 128, p: 0.5}`.
//                        Its settings must be scalars; the plugin checks them. Plugin steps
//                        change pixels, not geometry: they come after every crop, resize
//                        and flip (normalize may follow) and run, in order, on the final
//                        8-bit RGB image before its conversion to the output dtype and
//                        layout, each with a random value derived from (seed, epoch, sample
//                        id, step index).
// Sizes are whole numbers of pixels in 1..65535.
//
// The output shape must not depend on the image: after the last step that sets the size
// (a crop or a resize to [h, w]) only flips and normalize may follow, and a resize of the
// shorter side must be followed by a crop or a resize to [h, w].
// Empty (or blank) text is the default pipeline, ImageNet's evaluation transform:
// resize 256, center_crop 224, uint8 CHW (configs/pipelines/imagenet_eval.yaml).
#ifndef EMBER_DAEMON_DATA_IMAGE_PIPELINE_SPEC_H_
#define EMBER_DAEMON_DATA_IMAGE_PIPELINE_SPEC_H_

#include <memory>
#include <string>
#include <vector>

#include "daemon/data/image/decode.h"
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

// A parsed pipeline: its steps and what follows from them.
struct PipelineSpec {
  std::vector<PipelineStep> steps;
  ImageSize output_size;
  ring::DType dtype = ring::DType::kUInt8;
  ImageLayout layout = ImageLayout::kCHW;
  ImageDecodeOptions decode_options;
  // float32 output = value (0..255) * mul + add per channel: 1/255 and 0, or normalize's.
  float mul[3] = {1, 1, 1};
  float add[3] = {0, 0, 0};
  bool has_plugin_steps = false;
};

// Parses and checks the YAML text (see above; empty: the default). kInvalidArgument
// naming the line and column, the key or step, and the bad value, e.g.
//   "pipeline: line 3, column 7: step 'resize': unknown key 'sise' (known: size)"
// Steps that are not built in are looked up in `plugins` (none if null).
Result<PipelineSpec> ParsePipelineSpec(const std::string& yaml_text,
                                       const PluginRegistry* plugins = nullptr);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IMAGE_PIPELINE_SPEC_H_

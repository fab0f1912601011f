// The image pipeline's geometry: its crops, resizes and flips composed into one map from
// output pixels to the source image, with no intermediate image per step.
#ifndef EMBER_DAEMON_DATA_IMAGE_GEOMETRY_H_
#define EMBER_DAEMON_DATA_IMAGE_GEOMETRY_H_

#include <vector>

#include "common/random.h"
#include "daemon/data/image/pipeline_spec.h"

namespace ember::daemon {

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

// The plan of `steps` for a source of `width` x `height` pixels. The random steps draw
// from `random` in step order: random_resized_crop a scale and a ratio per try (as
// torchvision's get_params) and then its top and left, horizontal_flip one uniform.
// Normalize and plugin steps do not change the geometry.
SamplePlan PlanGeometry(const std::vector<PipelineStep>& steps, int width, int height,
                        SplitMix64& random);

// The smallest fraction of the source's resolution a decoder may keep so that the plan's
// output still gets >= 1 source pixel per output pixel on both axes (1 at most).
double MinDecodeScale(const SamplePlan& plan);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IMAGE_GEOMETRY_H_

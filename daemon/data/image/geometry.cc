#include "daemon/data/image/geometry.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ember::daemon {

namespace {

using Kind = PipelineStep::Kind;

constexpr int kRandomResizedCropTries = 10;  // as torchvision

// Python's int(round(x)): half to even (the default floating-point rounding mode).
int64_t RoundEven(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

// The image as the steps so far see it: `width` x `height` virtual pixels, mapped to the
// source by source = scale * virtual + offset on each axis.
struct View {
  int64_t width, height;
  double x_scale, x_offset, y_scale, y_offset;

  void Crop(int64_t left, int64_t top, int64_t crop_width, int64_t crop_height) {
    x_offset += x_scale * static_cast<double>(left);
    y_offset += y_scale * static_cast<double>(top);
    width = crop_width;
    height = crop_height;
  }
  void Resize(int64_t new_width, int64_t new_height) {
    x_scale *= static_cast<double>(width) / static_cast<double>(new_width);
    y_scale *= static_cast<double>(height) / static_cast<double>(new_height);
    width = new_width;
    height = new_height;
  }
};

// torchvision's center_crop offset on one axis: centred, zero-padding when larger.
int64_t CenterOffset(int64_t extent, int64_t crop) {
  if (crop > extent) return -((crop - extent) / 2);
  return RoundEven(static_cast<double>(extent - crop) / 2.0);
}

// Uniform in [0, n), n >= 1.
int64_t Below(SplitMix64& random, int64_t n) {
  return static_cast<int64_t>(random.Below(static_cast<uint64_t>(n)));
}

// torchvision's RandomResizedCrop.get_params.
void RandomResizedCrop(const PipelineStep& step, SplitMix64& random, View& view) {
  const double width = static_cast<double>(view.width), height = static_cast<double>(view.height);
  const double area = width * height;
  const double log_ratio[2] = {std::log(step.ratio[0]), std::log(step.ratio[1])};
  for (int attempt = 0; attempt < kRandomResizedCropTries; ++attempt) {
    const double target_area = area * random.Uniform(step.scale[0], step.scale[1]);
    const double aspect = std::exp(random.Uniform(log_ratio[0], log_ratio[1]));
    const int64_t w = RoundEven(std::sqrt(target_area * aspect));
    const int64_t h = RoundEven(std::sqrt(target_area / aspect));
    if (w > 0 && w <= view.width && h > 0 && h <= view.height) {
      const int64_t top = Below(random, view.height - h + 1);
      const int64_t left = Below(random, view.width - w + 1);
      view.Crop(left, top, w, h);
      return;
    }
  }
  const double in_ratio = width / height;
  int64_t w = view.width, h = view.height;
  if (in_ratio < step.ratio[0]) {
    h = std::max<int64_t>(1, RoundEven(width / step.ratio[0]));
  } else if (in_ratio > step.ratio[1]) {
    w = std::max<int64_t>(1, RoundEven(height * step.ratio[1]));
  }
  view.Crop((view.width - w) / 2, (view.height - h) / 2, w, h);
}

// torchvision's Resize(N): the shorter side to N, the longer to floor(N * long / short).
void ResizeShorterSide(int64_t side, View& view) {
  const int64_t w = view.width, h = view.height;
  if ((w <= h && w == side) || (h <= w && h == side)) return;
  if (w <= h) {
    view.Resize(side, std::max<int64_t>(1, side * h / w));
  } else {
    view.Resize(std::max<int64_t>(1, side * w / h), side);
  }
}

}  // namespace

SamplePlan PlanGeometry(const std::vector<PipelineStep>& steps, int width, int height,
                        SplitMix64& random) {
  View view{width, height, 1.0, 0.0, 1.0, 0.0};
  for (const PipelineStep& step : steps) {
    switch (step.kind) {
      case Kind::kRandomResizedCrop:
        RandomResizedCrop(step, random, view);
        view.Resize(step.size.width, step.size.height);
        break;
      case Kind::kResize:
        if (step.shorter_side == 0) {
          view.Resize(step.size.width, step.size.height);
        } else {
          ResizeShorterSide(step.shorter_side, view);
        }
        break;
      case Kind::kCenterCrop:
        view.Crop(CenterOffset(view.width, step.size.width),
                  CenterOffset(view.height, step.size.height), step.size.width, step.size.height);
        break;
      case Kind::kHorizontalFlip:
        if (random.Uniform() < step.p) {
          view.x_offset += view.x_scale * static_cast<double>(view.width);
          view.x_scale = -view.x_scale;
        }
        break;
      case Kind::kNormalize:
      case Kind::kPlugin:
        break;
    }
  }
  SamplePlan plan;
  plan.source_width = width;
  plan.source_height = height;
  plan.x_scale = view.x_scale;
  plan.x_offset = view.x_offset;
  plan.y_scale = view.y_scale;
  plan.y_offset = view.y_offset;
  plan.width = static_cast<int>(view.width);
  plan.height = static_cast<int>(view.height);
  return plan;
}

double MinDecodeScale(const SamplePlan& plan) {
  const double x = std::abs(plan.x_scale), y = std::abs(plan.y_scale);
  if (!(x > 0) || !(y > 0)) return 1.0;
  return std::min(1.0, std::max(1.0 / x, 1.0 / y));
}

}  // namespace ember::daemon

#include "daemon/data/image/pipeline.h"

#include <utility>

#include "daemon/data/image/sample_random.h"

namespace ember::daemon {

namespace {

// A thread's scratch memory above this is freed after each sample.
constexpr size_t kMaxRetainedScratch = size_t{32} << 20;

struct Scratch {
  ResampleTaps x, y;
  ResampleTaps identity_x, identity_y;  // plugin steps: their image to the output format
  ResampleScratch resample;
  PixelBuffer decoded;
  PixelBuffer plugin_image;  // plugin steps: the uint8 HWC image they transform
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

}  // namespace

Result<ImagePipeline> ImagePipeline::Parse(const std::string& yaml_text,
                                           const PluginRegistry* plugins) {
  EMBER_ASSIGN_OR_RETURN(PipelineSpec spec, ParsePipelineSpec(yaml_text, plugins));
  return ImagePipeline(std::move(spec));
}

std::vector<int64_t> ImagePipeline::shape() const {
  const ImageSize size = spec_.output_size;
  if (spec_.layout == ImageLayout::kCHW) return {3, size.height, size.width};
  return {size.height, size.width, 3};
}

uint64_t ImagePipeline::OutputBytes() const {
  return uint64_t{3} * spec_.output_size.height * spec_.output_size.width *
         ring::DTypeSize(spec_.dtype);
}

SamplePlan ImagePipeline::Plan(int width, int height, uint64_t seed, uint64_t epoch,
                               uint64_t id) const {
  SplitMix64 random = SampleRandom(seed, epoch, id);
  return PlanGeometry(spec_.steps, width, height, random);
}

double ImagePipeline::MinDecodeScale(const SamplePlan& plan) {
  return daemon::MinDecodeScale(plan);
}

PixelFormat ImagePipeline::OutputFormat() const {
  PixelFormat format;
  format.dtype = spec_.dtype;
  format.layout = spec_.layout;
  for (int c = 0; c < 3; ++c) {
    format.mul[c] = spec_.mul[c];
    format.add[c] = spec_.add[c];
  }
  return format;
}

void ImagePipeline::RenderWithTaps(const RgbImage& image, const ResampleTaps& x,
                                   const ResampleTaps& y, const PixelFormat& format,
                                   void* dst) const {
  Scratch& scratch = ThreadScratch();
  RenderTaps(image, x, y, format, scratch.resample, dst);
  scratch.resample.ShrinkTo(kMaxRetainedScratch);
}

Status ImagePipeline::Render(const SamplePlan& plan, const RgbImage& image, void* dst) const {
  Scratch& scratch = ThreadScratch();
  BuildPlanTaps(plan, image.width, image.height, &scratch.x, &scratch.y);
  const PixelRect needed = TapsRegion(scratch.x, scratch.y);
  if (!RectContains(image.region, needed)) {
    return InvalidArgument(
        "render: the image holds pixels [" + std::to_string(image.region.x) + ", " +
        std::to_string(image.region.x + image.region.width) + ") x [" +
        std::to_string(image.region.y) + ", " +
        std::to_string(image.region.y + image.region.height) + "), the plan needs [" +
        std::to_string(needed.x) + ", " + std::to_string(needed.x + needed.width) + ") x [" +
        std::to_string(needed.y) + ", " + std::to_string(needed.y + needed.height) + ")");
  }
  RenderWithTaps(image, scratch.x, scratch.y, OutputFormat(), dst);
  return Status::Ok();
}

Status ImagePipeline::RenderWithPlugins(const RgbImage& image, const ResampleTaps& x,
                                        const ResampleTaps& y, uint64_t seed, uint64_t epoch,
                                        uint64_t id, void* dst) const {
  Scratch& scratch = ThreadScratch();
  const int width = spec_.output_size.width, height = spec_.output_size.height;
  uint8_t* pixels = scratch.plugin_image.Reserve(size_t(width) * height * 3);
  PixelFormat hwc;
  hwc.layout = ImageLayout::kHWC;
  RenderWithTaps(image, x, y, hwc, pixels);
  for (size_t i = 0; i < spec_.steps.size(); ++i) {
    const PipelineStep& step = spec_.steps[i];
    if (step.kind != PipelineStep::Kind::kPlugin) continue;
    EMBER_RETURN_IF_ERROR(
        step.plugin->Apply(pixels, width, height, PluginStepRandom(seed, epoch, id, i)));
  }
  // The plugins' image to the output format: a copy through an identity map.
  RgbImage rendered;
  rendered.width = width;
  rendered.height = height;
  rendered.pixels = pixels;
  rendered.region = PixelRect{0, 0, width, height};
  ResampleTaps& identity_x = scratch.identity_x;
  ResampleTaps& identity_y = scratch.identity_y;
  BuildResampleTaps(1.0, 0.0, width, width, &identity_x);
  BuildResampleTaps(1.0, 0.0, height, height, &identity_y);
  RenderWithTaps(rendered, identity_x, identity_y, OutputFormat(), dst);
  scratch.plugin_image.ShrinkTo(kMaxRetainedScratch);
  return Status::Ok();
}

Status ImagePipeline::Run(const std::string& name, const uint8_t* data, size_t size,
                          uint64_t seed, uint64_t epoch, uint64_t id, void* dst) const {
  Scratch& scratch = ThreadScratch();
  // Planned from the header, which the decoder reads once.
  int width = 0, height = 0;
  PixelRect needed;
  const auto choose = [&](const ImageHeader& header) {
    const SamplePlan plan = Plan(header.width, header.height, seed, epoch, id);
    const double min_scale = MinDecodeScale(plan);
    DecodedSize(header, min_scale, &width, &height);
    BuildPlanTaps(plan, width, height, &scratch.x, &scratch.y);
    needed = TapsRegion(scratch.x, scratch.y);
    return DecodeRequest{min_scale, needed};
  };
  RgbImage image;
  Status status = DecodeImageRegion(name, data, size, spec_.decode_options, choose,
                                    scratch.decoded, &image);
  if (status.ok() && (image.width != width || image.height != height ||
                      !RectContains(image.region, needed))) {
    status = Internal(name + ": decoded " + std::to_string(image.width) + "x" +
                      std::to_string(image.height) + " pixels, not the planned " +
                      std::to_string(width) + "x" + std::to_string(height) +
                      " or without the region needed");
  }
  if (status.ok()) {
    if (spec_.has_plugin_steps) {
      status = RenderWithPlugins(image, scratch.x, scratch.y, seed, epoch, id, dst);
    } else {
      RenderWithTaps(image, scratch.x, scratch.y, OutputFormat(), dst);
    }
  }
  scratch.decoded.ShrinkTo(kMaxRetainedScratch);
  return status;
}

}  // namespace ember::daemon

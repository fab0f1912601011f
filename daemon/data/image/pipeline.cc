#include "daemon/data/image/pipeline.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <limits>

namespace ember::daemon {

namespace {

using Kind = PipelineStep::Kind;

constexpr int kMaxSide = 65535;
constexpr int kRandomResizedCropTries = 10;  // as torchvision
// A thread's scratch memory above this is freed after each sample.
constexpr size_t kMaxRetainedScratch = size_t{32} << 20;

// ---- YAML parsing ----

std::string Where(const YAML::Mark& mark) {
  if (mark.line < 0) return "pipeline: ";
  return "pipeline line " + std::to_string(mark.line + 1) + ", column " +
         std::to_string(mark.column + 1) + ": ";
}

Status Bad(const YAML::Node& node, const std::string& what) {
  return InvalidArgument(Where(node.Mark()) + what);
}

// The text of a node for an error message.
std::string Show(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsNull()) return "nothing";
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.good() ? std::string(out.c_str()) : std::string("a ") +
                                                    (node.IsMap() ? "map" : "list");
}

std::string Format(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

// Fails on keys of `map` outside `known`.
Status CheckKeys(const YAML::Node& map, const std::string& what,
                 std::initializer_list<const char*> known) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string key = it->first.Scalar();
    bool found = false;
    std::string names;
    for (const char* k : known) {
      found = found || key == k;
      names += (names.empty() ? "" : ", ") + std::string(k);
    }
    if (!found) {
      return Bad(it->first, what + ": unknown key '" + key + "' (known: " + names + ")");
    }
  }
  return Status::Ok();
}

Result<double> Number(const YAML::Node& node, const std::string& what) {
  if (!node.IsScalar()) return Bad(node, what + " must be a number, got " + Show(node));
  double value = 0;
  try {
    value = node.as<double>();
  } catch (const YAML::Exception&) {
    return Bad(node, what + " must be a number, got " + Show(node));
  }
  if (!std::isfinite(value)) return Bad(node, what + " must be finite, got " + Show(node));
  return value;
}

Result<int> Side(const YAML::Node& node, const std::string& what) {
  if (node.IsScalar()) {
    try {
      const long long value = node.as<long long>();
      if (value >= 1 && value <= kMaxSide) return static_cast<int>(value);
    } catch (const YAML::Exception&) {
    }
  }
  return Bad(node, what + " must be a whole number of pixels in 1.." + std::to_string(kMaxSide) +
                       ", got " + Show(node));
}

// `size`: N or [h, w]. Sets *square to N for the scalar form.
Status Size(const YAML::Node& node, const std::string& what, ImageSize* size, int* square) {
  if (node.IsSequence()) {
    if (node.size() != 2) {
      return Bad(node, what + " must be N or [height, width], got " + Show(node));
    }
    EMBER_ASSIGN_OR_RETURN(size->height, Side(node[0], what + " height"));
    EMBER_ASSIGN_OR_RETURN(size->width, Side(node[1], what + " width"));
    *square = 0;
    return Status::Ok();
  }
  if (!node.IsScalar()) return Bad(node, what + " must be N or [height, width], got " + Show(node));
  EMBER_ASSIGN_OR_RETURN(*square, Side(node, what));
  size->height = size->width = *square;
  return Status::Ok();
}

// A [lo, hi] range with lo <= hi, each in (min, max] (`max` may be infinite).
Status Range(const YAML::Node& node, const std::string& what, double min, double max,
             double out[2]) {
  if (!node.IsSequence() || node.size() != 2) {
    return Bad(node, what + " must be [low, high], got " + Show(node));
  }
  for (int i = 0; i < 2; ++i) {
    EMBER_ASSIGN_OR_RETURN(out[i], Number(node[i], what));
    if (!(out[i] > min && out[i] <= max)) {
      const std::string bounds = std::isinf(max) ? "above " + Format(min)
                                                 : "in (" + Format(min) + ", " + Format(max) + "]";
      return Bad(node[i], what + " values must be " + bounds + ", got " + Show(node[i]));
    }
  }
  if (out[0] > out[1]) return Bad(node, what + " must have low <= high, got " + Show(node));
  return Status::Ok();
}

Status Triple(const YAML::Node& node, const std::string& what, bool positive, float out[3]) {
  if (!node.IsSequence() || node.size() != 3) {
    return Bad(node, what + " must be 3 numbers (one per channel, R G B), got " + Show(node));
  }
  for (int i = 0; i < 3; ++i) {
    EMBER_ASSIGN_OR_RETURN(double value, Number(node[i], what));
    if (positive && !(value > 0)) {
      return Bad(node[i], what + " values must be above 0, got " + Show(node[i]));
    }
    out[i] = static_cast<float>(value);
  }
  return Status::Ok();
}

// "random_resized_crop, resize, ..." and then the plugins' steps, for error messages.
std::string KnownSteps(const PluginRegistry* plugins) {
  std::string known;
  for (const char* step : kBuiltinImageSteps) known += (known.empty() ? "" : ", ") + std::string(step);
  if (plugins != nullptr) {
    for (const std::string& step : plugins->Transforms()) known += ", " + step;
  }
  return known;
}

// A step added by a transform plugin: its settings (scalars only) go to the plugin as text.
Result<PipelineStep> ParsePluginStep(std::shared_ptr<const Plugin> plugin, const std::string& name,
                                     const YAML::Node& at, const YAML::Node& settings) {
  const std::string what = "step '" + name + "'";
  TransformParams params;
  for (auto it = settings.begin(); it != settings.end(); ++it) {
    const std::string key = it->first.Scalar();
    if (!it->second.IsScalar()) {
      return Bad(it->second, what + ": " + key +
                                 ": a plugin step's settings must be single values, got " +
                                 Show(it->second));
    }
    params.emplace_back(key, it->second.Scalar());
  }
  auto created = TransformStep::Create(std::move(plugin), name, params);
  if (!created.ok()) return Bad(at, created.status().message());
  PipelineStep step;
  step.kind = Kind::kPlugin;
  step.plugin = std::move(created).value();
  return step;
}

Result<PipelineStep> ParseStep(const YAML::Node& node, const PluginRegistry* plugins) {
  std::string name;
  YAML::Node params;
  if (node.IsScalar()) {
    name = node.Scalar();
  } else if (node.IsMap() && node.size() == 1) {
    name = node.begin()->first.Scalar();
    params = node.begin()->second;
  } else {
    return Bad(node, "a step must be a map of one step name to its settings, e.g. "
                     "'- center_crop: {size: 224}', got " + Show(node));
  }
  const std::string what = "step '" + name + "'";
  const YAML::Node at = node.IsMap() ? node.begin()->first : node;
  if (params.IsDefined() && !params.IsNull() && !params.IsMap()) {
    return Bad(params, what + ": settings must be a map, got " + Show(params));
  }
  const YAML::Node settings = params.IsMap() ? params : YAML::Node(YAML::NodeType::Map);
  auto required = [&](const char* key) -> Result<YAML::Node> {
    const YAML::Node value = settings[key];
    if (!value) return Bad(at, what + ": missing required key '" + key + "'");
    return value;
  };

  PipelineStep step;
  int square = 0;
  if (name == "random_resized_crop") {
    step.kind = Kind::kRandomResizedCrop;
    EMBER_RETURN_IF_ERROR(CheckKeys(settings, what, {"size", "scale", "ratio"}));
    EMBER_ASSIGN_OR_RETURN(YAML::Node size, required("size"));
    EMBER_RETURN_IF_ERROR(Size(size, what + ": size", &step.size, &square));
    if (settings["scale"]) {
      EMBER_RETURN_IF_ERROR(Range(settings["scale"], what + ": scale", 0, 1, step.scale));
    }
    if (settings["ratio"]) {
      EMBER_RETURN_IF_ERROR(Range(settings["ratio"], what + ": ratio", 0,
                                  std::numeric_limits<double>::infinity(), step.ratio));
    }
  } else if (name == "resize") {
    step.kind = Kind::kResize;
    EMBER_RETURN_IF_ERROR(CheckKeys(settings, what, {"size"}));
    EMBER_ASSIGN_OR_RETURN(YAML::Node size, required("size"));
    EMBER_RETURN_IF_ERROR(Size(size, what + ": size", &step.size, &square));
    step.shorter_side = square;
  } else if (name == "center_crop") {
    step.kind = Kind::kCenterCrop;
    EMBER_RETURN_IF_ERROR(CheckKeys(settings, what, {"size"}));
    EMBER_ASSIGN_OR_RETURN(YAML::Node size, required("size"));
    EMBER_RETURN_IF_ERROR(Size(size, what + ": size", &step.size, &square));
  } else if (name == "horizontal_flip") {
    step.kind = Kind::kHorizontalFlip;
    EMBER_RETURN_IF_ERROR(CheckKeys(settings, what, {"p"}));
    if (settings["p"]) {
      EMBER_ASSIGN_OR_RETURN(step.p, Number(settings["p"], what + ": p"));
      if (step.p < 0 || step.p > 1) {
        return Bad(settings["p"], what + ": p must be a probability in [0, 1], got " +
                                      Show(settings["p"]));
      }
    }
  } else if (name == "normalize") {
    step.kind = Kind::kNormalize;
    EMBER_RETURN_IF_ERROR(CheckKeys(settings, what, {"mean", "std"}));
    EMBER_ASSIGN_OR_RETURN(YAML::Node mean, required("mean"));
    EMBER_ASSIGN_OR_RETURN(YAML::Node std, required("std"));
    EMBER_RETURN_IF_ERROR(Triple(mean, what + ": mean", false, step.mean));
    EMBER_RETURN_IF_ERROR(Triple(std, what + ": std", true, step.std));
  } else if (auto plugin = plugins != nullptr ? plugins->FindTransform(name) : nullptr) {
    return ParsePluginStep(std::move(plugin), name, at, settings);
  } else {
    return Bad(at, "unknown step '" + name + "' (known: " + KnownSteps(plugins) + ")");
  }
  return step;
}

// ---- Randomness ----

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A generator that depends only on (seed, epoch, id).
class SampleRandom {
 public:
  SampleRandom(uint64_t seed, uint64_t epoch, uint64_t id) : state_(seed) {
    state_ = SplitMix64(&state_) ^ epoch;
    state_ = SplitMix64(&state_) ^ id;
    state_ = SplitMix64(&state_);
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(SplitMix64(&state_) >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform in [0, n), n >= 1.
  int64_t Below(int64_t n) { return static_cast<int64_t>(SplitMix64(&state_) % uint64_t(n)); }

 private:
  uint64_t state_;
};

// The random value a plugin step gets: depends only on (seed, epoch, id, step index), and
// not on the stream SampleRandom draws the geometry from.
uint64_t PluginStepRandom(uint64_t seed, uint64_t epoch, uint64_t id, size_t step_index) {
  uint64_t state = seed ^ 0x706c7567696e5f31ULL;  // "plugin_1"
  state = SplitMix64(&state) ^ epoch;
  state = SplitMix64(&state) ^ id;
  state = SplitMix64(&state) ^ step_index;
  return SplitMix64(&state);
}

// Python's int(round(x)): half to even (the default floating-point rounding mode).
int64_t RoundEven(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

// ---- Geometry ----

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

// torchvision's RandomResizedCrop.get_params.
void RandomResizedCrop(const PipelineStep& step, SampleRandom& random, View& view) {
  const double width = static_cast<double>(view.width), height = static_cast<double>(view.height);
  const double area = width * height;
  const double log_ratio[2] = {std::log(step.ratio[0]), std::log(step.ratio[1])};
  for (int attempt = 0; attempt < kRandomResizedCropTries; ++attempt) {
    const double target_area = area * random.Uniform(step.scale[0], step.scale[1]);
    const double aspect = std::exp(random.Uniform(log_ratio[0], log_ratio[1]));
    const int64_t w = RoundEven(std::sqrt(target_area * aspect));
    const int64_t h = RoundEven(std::sqrt(target_area / aspect));
    if (w > 0 && w <= view.width && h > 0 && h <= view.height) {
      const int64_t top = random.Below(view.height - h + 1);
      const int64_t left = random.Below(view.width - w + 1);
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

// ---- Rendering ----

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
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(Where(e.mark) + "not valid YAML: " + e.msg);
  }
  if (root.IsNull()) {
    return Parse("steps: [{resize: {size: 256}}, {center_crop: {size: 224}}]");
  }
  ImagePipeline pipeline;
  try {
    if (!root.IsMap()) {
      return Bad(root, "a pipeline is a map with 'steps' (and optionally 'output', 'decode'), "
                       "got " + Show(root));
    }
    EMBER_RETURN_IF_ERROR(CheckKeys(root, "pipeline", {"steps", "output", "decode"}));
    const YAML::Node steps = root["steps"];
    if (!steps) return Bad(root, "missing required key 'steps'");
    if (!steps.IsSequence() || steps.size() == 0) {
      return Bad(steps, "'steps' must be a non-empty list of steps, got " + Show(steps));
    }
    std::string plugin_step;  // the first plugin step so far
    for (const YAML::Node& node : steps) {
      EMBER_ASSIGN_OR_RETURN(PipelineStep step, ParseStep(node, plugins));
      if (!pipeline.steps_.empty() && pipeline.steps_.back().kind == Kind::kNormalize) {
        return Bad(node, "normalize must be the last step");
      }
      if (step.kind == Kind::kPlugin) {
        if (plugin_step.empty()) plugin_step = step.plugin->name();
        pipeline.has_plugin_steps_ = true;
      } else if (!plugin_step.empty() && step.kind != Kind::kNormalize) {
        return Bad(node, "plugin step '" + plugin_step +
                             "' changes the final image, so it must come after every crop, "
                             "resize and flip");
      }
      pipeline.steps_.push_back(step);
    }

    if (const YAML::Node output = root["output"]) {
      if (!output.IsMap()) return Bad(output, "'output' must be a map, got " + Show(output));
      EMBER_RETURN_IF_ERROR(CheckKeys(output, "output", {"dtype", "layout"}));
      if (const YAML::Node dtype = output["dtype"]) {
        const std::string value = dtype.IsScalar() ? dtype.Scalar() : "";
        if (value == "uint8") {
          pipeline.dtype_ = ring::DType::kUInt8;
        } else if (value == "float32") {
          pipeline.dtype_ = ring::DType::kFloat32;
        } else {
          return Bad(dtype, "output: dtype must be uint8 or float32, got " + Show(dtype));
        }
      }
      if (const YAML::Node layout = output["layout"]) {
        const std::string value = layout.IsScalar() ? layout.Scalar() : "";
        if (value == "CHW") {
          pipeline.layout_ = ImageLayout::kCHW;
        } else if (value == "HWC") {
          pipeline.layout_ = ImageLayout::kHWC;
        } else {
          return Bad(layout, "output: layout must be CHW or HWC, got " + Show(layout));
        }
      }
    }

    if (const YAML::Node decode = root["decode"]) {
      if (!decode.IsMap()) return Bad(decode, "'decode' must be a map, got " + Show(decode));
      EMBER_RETURN_IF_ERROR(CheckKeys(decode, "decode", {"max_pixels"}));
      if (const YAML::Node max_pixels = decode["max_pixels"]) {
        unsigned long long value = 0;
        bool ok = max_pixels.IsScalar();
        try {
          if (ok) value = max_pixels.as<unsigned long long>();
        } catch (const YAML::Exception&) {
          ok = false;
        }
        if (!ok || value == 0) {
          return Bad(max_pixels,
                     "decode: max_pixels must be a whole number above 0, got " + Show(max_pixels));
        }
        pipeline.decode_options_.max_pixels = value;
      }
    }

    // The output size must be fixed; normalize needs float32.
    bool fixed = false;
    YAML::Node last_unfixing;
    size_t index = 0;
    for (const PipelineStep& step : pipeline.steps_) {
      const YAML::Node node = steps[index++];
      switch (step.kind) {
        case Kind::kRandomResizedCrop:
        case Kind::kCenterCrop:
          fixed = true;
          pipeline.output_size_ = step.size;
          break;
        case Kind::kResize:
          fixed = step.shorter_side == 0;
          pipeline.output_size_ = step.size;
          if (!fixed) last_unfixing = node;
          break;
        case Kind::kNormalize:
          if (pipeline.dtype_ != ring::DType::kFloat32) {
            return Bad(node, "step 'normalize' needs 'output: {dtype: float32}' (uint8 cannot "
                             "hold normalized values)");
          }
          for (int c = 0; c < 3; ++c) {
            pipeline.mul_[c] = 1.0f / (255.0f * step.std[c]);
            pipeline.add_[c] = -step.mean[c] / step.std[c];
          }
          break;
        case Kind::kHorizontalFlip:
        case Kind::kPlugin:
          break;
      }
    }
    if (!fixed) {
      return Bad(last_unfixing ? last_unfixing : steps,
                 "the output size depends on the image: end the pipeline with a crop "
                 "(center_crop, random_resized_crop) or a resize to [height, width] after any "
                 "resize of the shorter side");
    }
    if (pipeline.dtype_ == ring::DType::kFloat32 &&
        (pipeline.steps_.back().kind != Kind::kNormalize)) {
      for (int c = 0; c < 3; ++c) pipeline.mul_[c] = 1.0f / 255.0f;
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(Where(e.mark) + e.msg);
  }
  return pipeline;
}

std::vector<int64_t> ImagePipeline::shape() const {
  if (layout_ == ImageLayout::kCHW) return {3, output_size_.height, output_size_.width};
  return {output_size_.height, output_size_.width, 3};
}

uint64_t ImagePipeline::OutputBytes() const {
  return uint64_t{3} * output_size_.height * output_size_.width * ring::DTypeSize(dtype_);
}

SamplePlan ImagePipeline::Plan(int width, int height, uint64_t seed, uint64_t epoch,
                               uint64_t id) const {
  SampleRandom random(seed, epoch, id);
  View view{width, height, 1.0, 0.0, 1.0, 0.0};
  for (const PipelineStep& step : steps_) {
    switch (step.kind) {
      case Kind::kRandomResizedCrop:
        RandomResizedCrop(step, random, view);
        view.Resize(step.size.width, step.size.height);
        break;
      case Kind::kResize:
        if (step.shorter_side == 0) {
          view.Resize(step.size.width, step.size.height);
        } else {
          const int64_t side = step.shorter_side;
          const int64_t w = view.width, h = view.height;
          if ((w <= h && w == side) || (h <= w && h == side)) break;
          if (w <= h) {
            view.Resize(side, std::max<int64_t>(1, side * h / w));
          } else {
            view.Resize(std::max<int64_t>(1, side * w / h), side);
          }
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

double ImagePipeline::MinDecodeScale(const SamplePlan& plan) {
  const double x = std::abs(plan.x_scale), y = std::abs(plan.y_scale);
  if (!(x > 0) || !(y > 0)) return 1.0;
  return std::min(1.0, std::max(1.0 / x, 1.0 / y));
}

namespace {

// The taps of the plan over an image decoded at width x height (the plan rescaled to it).
void BuildPlanTaps(const SamplePlan& plan, int width, int height, ResampleTaps* x,
                   ResampleTaps* y) {
  const double rx = static_cast<double>(width) / plan.source_width;
  const double ry = static_cast<double>(height) / plan.source_height;
  BuildResampleTaps(plan.x_scale * rx, plan.x_offset * rx, plan.width, width, x);
  BuildResampleTaps(plan.y_scale * ry, plan.y_offset * ry, plan.height, height, y);
}

// The source pixels the taps touch (empty when every output pixel is padding).
PixelRect TapsRegion(const ResampleTaps& x, const ResampleTaps& y) {
  if (x.highest < x.lowest || y.highest < y.lowest) return PixelRect{};
  return PixelRect{x.lowest, y.lowest, x.highest - x.lowest + 1, y.highest - y.lowest + 1};
}

bool Contains(const PixelRect& outer, const PixelRect& inner) {
  if (inner.width <= 0 || inner.height <= 0) return true;
  return inner.x >= outer.x && inner.y >= outer.y &&
         inner.x + inner.width <= outer.x + outer.width &&
         inner.y + inner.height <= outer.y + outer.height;
}

// Render without filtering (every window is one source pixel of weight 1).
void CopyPixels(const RgbImage& image, const ResampleTaps& tx, const ResampleTaps& ty,
                ring::DType dtype, ImageLayout layout, const float* mul, const float* add,
                void* dst) {
  const int out_w = static_cast<int>(tx.start.size()), out_h = static_cast<int>(ty.start.size());
  const size_t plane = size_t(out_w) * out_h;
  const PixelRect& region = image.region;
  // Channel c of output (x, y) is at dst[base(y) + c * channel_step + x * pixel_step].
  const bool hwc = layout == ImageLayout::kHWC;
  const size_t pixel_step = hwc ? 3 : 1;
  const size_t channel_step = hwc ? 1 : plane;
  for (int y = 0; y < out_h; ++y) {
    const size_t base = size_t(y) * out_w * pixel_step;
    const bool row_inside = ty.inside[y] != 0;
    // Rows and columns outside are padding, never read.
    const uint8_t* row = image.pixels + ptrdiff_t(ty.start[y] - region.y) * region.width * 3;
    if (dtype == ring::DType::kUInt8) {
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

ImagePipeline::PixelFormat ImagePipeline::OutputFormat() const {
  PixelFormat format;
  format.dtype = dtype_;
  format.layout = layout_;
  for (int c = 0; c < 3; ++c) {
    format.mul[c] = mul_[c];
    format.add[c] = add_[c];
  }
  return format;
}

void ImagePipeline::RenderWithTaps(const RgbImage& image, const ResampleTaps& x,
                                   const ResampleTaps& y, const PixelFormat& format,
                                   void* dst) const {
  Scratch& scratch = ThreadScratch();
  if (x.n == 1 && y.n == 1) {
    // No filtering on either axis (a crop or flip at the decoded size): a direct copy.
    CopyPixels(image, x, y, format.dtype, format.layout, format.mul, format.add, dst);
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
  ResampleImage(image, x, y, output, scratch.resample);
  scratch.resample.ShrinkTo(kMaxRetainedScratch);
}

Status ImagePipeline::Render(const SamplePlan& plan, const RgbImage& image, void* dst) const {
  Scratch& scratch = ThreadScratch();
  BuildPlanTaps(plan, image.width, image.height, &scratch.x, &scratch.y);
  const PixelRect needed = TapsRegion(scratch.x, scratch.y);
  if (!Contains(image.region, needed)) {
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
  const int width = output_size_.width, height = output_size_.height;
  uint8_t* pixels = scratch.plugin_image.Reserve(size_t(width) * height * 3);
  PixelFormat hwc;
  hwc.layout = ImageLayout::kHWC;
  RenderWithTaps(image, x, y, hwc, pixels);
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].kind != Kind::kPlugin) continue;
    EMBER_RETURN_IF_ERROR(
        steps_[i].plugin->Apply(pixels, width, height, PluginStepRandom(seed, epoch, id, i)));
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
  Status status =
      DecodeImageRegion(name, data, size, decode_options_, choose, scratch.decoded, &image);
  if (status.ok() && (image.width != width || image.height != height ||
                      !Contains(image.region, needed))) {
    status = Internal(name + ": decoded " + std::to_string(image.width) + "x" +
                      std::to_string(image.height) + " pixels, not the planned " +
                      std::to_string(width) + "x" + std::to_string(height) +
                      " or without the region needed");
  }
  if (status.ok()) {
    if (has_plugin_steps_) {
      status = RenderWithPlugins(image, scratch.x, scratch.y, seed, epoch, id, dst);
    } else {
      RenderWithTaps(image, scratch.x, scratch.y, OutputFormat(), dst);
    }
  }
  scratch.decoded.ShrinkTo(kMaxRetainedScratch);
  return status;
}

}  // namespace ember::daemon

#include "daemon/data/image/pipeline_spec.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "common/strict_yaml.h"

namespace ember::daemon {

namespace {

using Kind = PipelineStep::Kind;

constexpr int kMaxSide = 65535;
constexpr const char* kDefaultPipeline =
    "steps: [{resize: {size: 256}}, {center_crop: {size: 224}}]";

std::string Format(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

// Parses one pipeline; not thread-safe (one per Parse call).
class SpecParser {
 public:
  explicit SpecParser(const PluginRegistry* plugins) : yaml_("pipeline"), plugins_(plugins) {}

  Result<PipelineSpec> Parse(const std::string& text) const {
    return yaml_.Parse(text, [this](const YAML::Node& root) { return Root(root); });
  }

 private:
  Result<int> Side(const YAML::Node& node, const std::string& what) const {
    EMBER_ASSIGN_OR_RETURN(const uint64_t side, yaml_.Unsigned(node, what, 1, kMaxSide));
    return static_cast<int>(side);
  }

  // `size`: N or [h, w]. Sets *square to N for the scalar form.
  Status Size(const YAML::Node& node, const std::string& what, ImageSize* size,
              int* square) const {
    if (node.IsSequence()) {
      if (node.size() != 2) {
        return yaml_.Error(node, what + " must be N or [height, width], got " + DescribeYaml(node));
      }
      EMBER_ASSIGN_OR_RETURN(size->height, Side(node[0], what + " height"));
      EMBER_ASSIGN_OR_RETURN(size->width, Side(node[1], what + " width"));
      *square = 0;
      return Status::Ok();
    }
    if (!node.IsScalar()) {
      return yaml_.Error(node, what + " must be N or [height, width], got " + DescribeYaml(node));
    }
    EMBER_ASSIGN_OR_RETURN(*square, Side(node, what));
    size->height = size->width = *square;
    return Status::Ok();
  }

  // A [lo, hi] range with lo <= hi, each in (min, max] (`max` may be infinite).
  Status Range(const YAML::Node& node, const std::string& what, double min, double max,
               double out[2]) const {
    if (!node.IsSequence() || node.size() != 2) {
      return yaml_.Error(node, what + " must be [low, high], got " + DescribeYaml(node));
    }
    for (int i = 0; i < 2; ++i) {
      EMBER_ASSIGN_OR_RETURN(out[i], yaml_.Number(node[i], what));
      if (!(out[i] > min && out[i] <= max)) {
        const std::string bounds = std::isinf(max)
                                       ? "above " + Format(min)
                                       : "in (" + Format(min) + ", " + Format(max) + "]";
        return yaml_.Error(node[i],
                           what + " values must be " + bounds + ", got " + DescribeYaml(node[i]));
      }
    }
    if (out[0] > out[1]) {
      return yaml_.Error(node, what + " must have low <= high, got " + DescribeYaml(node));
    }
    return Status::Ok();
  }

  Status Triple(const YAML::Node& node, const std::string& what, bool positive,
                float out[3]) const {
    if (!node.IsSequence() || node.size() != 3) {
      return yaml_.Error(node, what + " must be 3 numbers (one per channel, R G B), got " +
                                   DescribeYaml(node));
    }
    for (int i = 0; i < 3; ++i) {
      EMBER_ASSIGN_OR_RETURN(double value, yaml_.Number(node[i], what));
      if (positive && !(value > 0)) {
        return yaml_.Error(node[i], what + " values must be above 0, got " + DescribeYaml(node[i]));
      }
      out[i] = static_cast<float>(value);
    }
    return Status::Ok();
  }

  // "random_resized_crop, resize, ..." and then the plugins' steps, for error messages.
  std::string KnownSteps() const {
    std::string known;
    for (const char* step : kBuiltinImageSteps) {
      known += (known.empty() ? "" : ", ") + std::string(step);
    }
    if (plugins_ != nullptr) {
      for (const std::string& step : plugins_->Transforms()) known += ", " + step;
    }
    return known;
  }

  // A step added by a transform plugin: its settings (scalars only) go to the plugin as
  // text.
  Result<PipelineStep> PluginStep(std::shared_ptr<const Plugin> plugin, const std::string& name,
                                  const YAML::Node& at, const YAML::Node& settings) const {
    const std::string what = "step '" + name + "'";
    TransformParams params;
    for (auto it = settings.begin(); it != settings.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (!it->second.IsScalar()) {
        return yaml_.Error(it->second, what + ": " + key +
                                           ": a plugin step's settings must be single values, "
                                           "got " + DescribeYaml(it->second));
      }
      params.emplace_back(key, it->second.Scalar());
    }
    auto created = TransformStep::Create(std::move(plugin), name, params);
    if (!created.ok()) return yaml_.Error(at, created.status().message());
    PipelineStep step;
    step.kind = Kind::kPlugin;
    step.plugin = std::move(created).value();
    return step;
  }

  Result<PipelineStep> Step(const YAML::Node& node) const {
    std::string name;
    YAML::Node params;
    if (node.IsScalar()) {
      name = node.Scalar();
    } else if (node.IsMap() && node.size() == 1) {
      name = node.begin()->first.Scalar();
      params = node.begin()->second;
    } else {
      return yaml_.Error(node, "a step must be a map of one step name to its settings, e.g. "
                               "'- center_crop: {size: 224}', got " + DescribeYaml(node));
    }
    const std::string what = "step '" + name + "'";
    const YAML::Node at = node.IsMap() ? node.begin()->first : node;
    if (params.IsDefined() && !params.IsNull() && !params.IsMap()) {
      return yaml_.Error(params, what + ": settings must be a map, got " + DescribeYaml(params));
    }
    const YAML::Node settings = params.IsMap() ? params : YAML::Node(YAML::NodeType::Map);
    auto required = [&](const char* key) -> Result<YAML::Node> {
      const YAML::Node value = settings[key];
      if (!value) return yaml_.Error(at, what + ": missing required key '" + key + "'");
      return value;
    };

    PipelineStep step;
    int square = 0;
    if (name == "random_resized_crop") {
      step.kind = Kind::kRandomResizedCrop;
      EMBER_RETURN_IF_ERROR(yaml_.CheckKeys(settings, what, {"size", "scale", "ratio"}));
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
      EMBER_RETURN_IF_ERROR(yaml_.CheckKeys(settings, what, {"size"}));
      EMBER_ASSIGN_OR_RETURN(YAML::Node size, required("size"));
      EMBER_RETURN_IF_ERROR(Size(size, what + ": size", &step.size, &square));
      step.shorter_side = square;
    } else if (name == "center_crop") {
      step.kind = Kind::kCenterCrop;
      EMBER_RETURN_IF_ERROR(yaml_.CheckKeys(settings, what, {"size"}));
      EMBER_ASSIGN_OR_RETURN(YAML::Node size, required("size"));
      EMBER_RETURN_IF_ERROR(Size(size, what + ": size", &step.size, &square));
    } else if (name == "horizontal_flip") {
      step.kind = Kind::kHorizontalFlip;
      EMBER_RETURN_IF_ERROR(yaml_.CheckKeys(settings, what, {"p"}));
      if (const YAML::Node p = settings["p"]) {
        EMBER_ASSIGN_OR_RETURN(step.p, yaml_.Number(p, what + ": p"));
        if (step.p < 0 || step.p > 1) {
          return yaml_.Error(p, what + ": p must be a probability in [0, 1], got " +
                                    DescribeYaml(p));
        }
      }
    } else if (name == "normalize") {
      step.kind = Kind::kNormalize;
      EMBER_RETURN_IF_ERROR(yaml_.CheckKeys(settings, what, {"mean", "std"}));
      EMBER_ASSIGN_OR_RETURN(YAML::Node mean, required("mean"));
      EMBER_ASSIGN_OR_RETURN(YAML::Node std, required("std"));
      EMBER_RETURN_IF_ERROR(Triple(mean, what + ": mean", false, step.mean));
      EMBER_RETURN_IF_ERROR(Triple(std, what + ": std", true, step.std));
    } else if (auto plugin = plugins_ != nullptr ? plugins_->FindTransform(name) : nullptr) {
      return PluginStep(std::move(plugin), name, at, settings);
    } else {
      return yaml_.Error(at, "unknown step '" + name + "' (known: " + KnownSteps() + ")");
    }
    return step;
  }

  Status Output(const YAML::Node& output, PipelineSpec* spec) const {
    if (!output.IsMap()) {
      return yaml_.Error(output, "'output' must be a map, got " + DescribeYaml(output));
    }
    EMBER_RETURN_IF_ERROR(yaml_.CheckKeys(output, "output", {"dtype", "layout"}));
    if (const YAML::Node dtype = output["dtype"]) {
      EMBER_ASSIGN_OR_RETURN(const size_t index,
                             yaml_.OneOf(dtype, "output: dtype", {"uint8", "float32"}));
      spec->dtype = index == 0 ? ring::DType::kUInt8 : ring::DType::kFloat32;
    }
    if (const YAML::Node layout = output["layout"]) {
      EMBER_ASSIGN_OR_RETURN(const size_t index,
                             yaml_.OneOf(layout, "output: layout", {"CHW", "HWC"}));
      spec->layout = index == 0 ? ImageLayout::kCHW : ImageLayout::kHWC;
    }
    return Status::Ok();
  }

  Status Decode(const YAML::Node& decode, PipelineSpec* spec) const {
    if (!decode.IsMap()) {
      return yaml_.Error(decode, "'decode' must be a map, got " + DescribeYaml(decode));
    }
    EMBER_RETURN_IF_ERROR(yaml_.CheckKeys(decode, "decode", {"max_pixels"}));
    if (const YAML::Node max_pixels = decode["max_pixels"]) {
      EMBER_ASSIGN_OR_RETURN(spec->decode_options.max_pixels,
                             yaml_.Unsigned(max_pixels, "decode: max_pixels", 1, kMaxDecodePixels));
    }
    return Status::Ok();
  }

  // The output size must be fixed; normalize needs float32. Sets the output size and the
  // float32 scaling.
  Status CheckOutput(const YAML::Node& steps, PipelineSpec* spec) const {
    bool fixed = false;
    YAML::Node last_unfixing;
    size_t index = 0;
    for (const PipelineStep& step : spec->steps) {
      const YAML::Node node = steps[index++];
      switch (step.kind) {
        case Kind::kRandomResizedCrop:
        case Kind::kCenterCrop:
          fixed = true;
          spec->output_size = step.size;
          break;
        case Kind::kResize:
          fixed = step.shorter_side == 0;
          spec->output_size = step.size;
          if (!fixed) last_unfixing = node;
          break;
        case Kind::kNormalize:
          if (spec->dtype != ring::DType::kFloat32) {
            return yaml_.Error(node, "step 'normalize' needs 'output: {dtype: float32}' (uint8 "
                                     "cannot hold normalized values)");
          }
          for (int c = 0; c < 3; ++c) {
            spec->mul[c] = 1.0f / (255.0f * step.std[c]);
            spec->add[c] = -step.mean[c] / step.std[c];
          }
          break;
        case Kind::kHorizontalFlip:
        case Kind::kPlugin:
          break;
      }
    }
    if (!fixed) {
      return yaml_.Error(last_unfixing ? last_unfixing : steps,
                         "the output size depends on the image: end the pipeline with a crop "
                         "(center_crop, random_resized_crop) or a resize to [height, width] "
                         "after any resize of the shorter side");
    }
    if (spec->dtype == ring::DType::kFloat32 && spec->steps.back().kind != Kind::kNormalize) {
      for (int c = 0; c < 3; ++c) spec->mul[c] = 1.0f / 255.0f;
    }
    return Status::Ok();
  }

  Result<PipelineSpec> Root(const YAML::Node& root) const {
    if (root.IsNull()) return SpecParser(nullptr).Parse(kDefaultPipeline);
    if (!root.IsMap()) {
      return yaml_.Error(root, "a pipeline is a map with 'steps' (and optionally 'output', "
                               "'decode'), got " + DescribeYaml(root));
    }
    EMBER_RETURN_IF_ERROR(yaml_.CheckKeys(root, "", {"steps", "output", "decode"}));
    const YAML::Node steps = root["steps"];
    if (!steps) return yaml_.Error(root, "missing required key 'steps'");
    if (!steps.IsSequence() || steps.size() == 0) {
      return yaml_.Error(steps, "'steps' must be a non-empty list of steps, got " +
                                    DescribeYaml(steps));
    }
    PipelineSpec spec;
    std::string plugin_step;  // the first plugin step so far
    for (const YAML::Node& node : steps) {
      EMBER_ASSIGN_OR_RETURN(PipelineStep step, Step(node));
      if (!spec.steps.empty() && spec.steps.back().kind == Kind::kNormalize) {
        return yaml_.Error(node, "normalize must be the last step");
      }
      if (step.kind == Kind::kPlugin) {
        if (plugin_step.empty()) plugin_step = step.plugin->name();
        spec.has_plugin_steps = true;
      } else if (!plugin_step.empty() && step.kind != Kind::kNormalize) {
        return yaml_.Error(node, "plugin step '" + plugin_step +
                                     "' changes the final image, so it must come after every "
                                     "crop, resize and flip");
      }
      spec.steps.push_back(std::move(step));
    }
    if (const YAML::Node output = root["output"]) EMBER_RETURN_IF_ERROR(Output(output, &spec));
    if (const YAML::Node decode = root["decode"]) EMBER_RETURN_IF_ERROR(Decode(decode, &spec));
    EMBER_RETURN_IF_ERROR(CheckOutput(steps, &spec));
    return spec;
  }

  const StrictYaml yaml_;
  const PluginRegistry* const plugins_;
};

}  // namespace

Result<PipelineSpec> ParsePipelineSpec(const std::string& yaml_text,
                                       const PluginRegistry* plugins) {
  return SpecParser(plugins).Parse(yaml_text);
}

}  // namespace ember::daemon

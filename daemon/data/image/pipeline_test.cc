#include "daemon/data/image/pipeline.h"

#include <turbojpeg.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "daemon/data/image/decode.h"
#include "daemon/data/image/image_testing.h"

namespace ember::daemon {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

ImagePipeline MustParse(const std::string& yaml) {
  auto pipeline = ImagePipeline::Parse(yaml);
  INFO(yaml);
  INFO((pipeline.ok() ? std::string() : pipeline.status().message()));
  REQUIRE(pipeline.ok());
  return *pipeline;
}

// The error message of a pipeline that must not parse.
std::string ParseError(const std::string& yaml) {
  auto pipeline = ImagePipeline::Parse(yaml);
  INFO(yaml);
  REQUIRE(!pipeline.ok());
  CHECK(pipeline.status().code() == StatusCode::kInvalidArgument);
  return pipeline.status().message();
}

RgbImage View(const TestImage& image) {
  REQUIRE(image.channels == 3);
  return RgbImage::Whole(image.width, image.height, image.pixels.data());
}

// A test image whose pixel (x, y) is (x, y, x + y): every position is recognizable.
TestImage CoordinateImage(int width, int height) {
  TestImage image{width, height, 3, {}};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      image.pixels.insert(image.pixels.end(), {static_cast<uint8_t>(x), static_cast<uint8_t>(y),
                                               static_cast<uint8_t>(x + y)});
  return image;
}

std::vector<uint8_t> RenderBytes(const ImagePipeline& pipeline, const TestImage& image,
                                 uint64_t seed = 0, uint64_t epoch = 0, uint64_t id = 0) {
  std::vector<uint8_t> out(pipeline.OutputBytes());
  const SamplePlan plan = pipeline.Plan(image.width, image.height, seed, epoch, id);
  const Status status = pipeline.Render(plan, View(image), out.data());
  INFO(status.ToString());
  REQUIRE(status.ok());
  return out;
}

std::vector<uint8_t> RunBytes(const ImagePipeline& pipeline, const std::string& encoded,
                              uint64_t seed, uint64_t epoch, uint64_t id) {
  std::vector<uint8_t> out(pipeline.OutputBytes());
  Status status = pipeline.Run("img", reinterpret_cast<const uint8_t*>(encoded.data()),
                               encoded.size(), seed, epoch, id, out.data());
  INFO(status.ToString());
  REQUIRE(status.ok());
  return out;
}

std::vector<float> AsFloats(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

TEST_CASE("an empty pipeline is resize 256 + center_crop 224, uint8 CHW") {
  for (const char* text : {"", "  \n# nothing\n"}) {
    const ImagePipeline pipeline = MustParse(text);
    REQUIRE(pipeline.steps().size() == 2);
    CHECK(pipeline.steps()[0].kind == PipelineStep::Kind::kResize);
    CHECK(pipeline.steps()[0].shorter_side == 256);
    CHECK(pipeline.steps()[1].kind == PipelineStep::Kind::kCenterCrop);
    CHECK(pipeline.dtype() == ring::DType::kUInt8);
    CHECK(pipeline.layout() == ImageLayout::kCHW);
    CHECK(pipeline.shape() == std::vector<int64_t>{3, 224, 224});
    CHECK(pipeline.OutputBytes() == 3 * 224 * 224);
    CHECK(pipeline.decode_options().max_pixels == 64'000'000);
  }
}

TEST_CASE("every step and setting parses") {
  const ImagePipeline pipeline = MustParse(R"(
steps:
  - random_resized_crop: {size: [200, 300], scale: [0.25, 0.5], ratio: [0.5, 2]}
  - resize: {size: [100, 150]}
  - resize: {size: 90}
  - center_crop: {size: [80, 60]}
  - horizontal_flip
  - horizontal_flip: {}
  - horizontal_flip: {p: 0.25}
  - normalize: {mean: [0.5, 0.25, 0], std: [0.5, 0.5, 2]}
output: {dtype: float32, layout: HWC}
decode: {max_pixels: 1000}
)");
  const auto& steps = pipeline.steps();
  REQUIRE(steps.size() == 8);
  CHECK(steps[0].size.height == 200);
  CHECK(steps[0].size.width == 300);
  CHECK(steps[0].scale[1] == 0.5);
  CHECK(steps[0].ratio[0] == 0.5);
  CHECK(steps[1].shorter_side == 0);
  CHECK(steps[2].shorter_side == 90);
  CHECK(steps[4].p == 0.5);
  CHECK(steps[6].p == 0.25);
  CHECK(steps[7].std[2] == 2.0f);
  CHECK(pipeline.dtype() == ring::DType::kFloat32);
  CHECK(pipeline.layout() == ImageLayout::kHWC);
  CHECK(pipeline.shape() == std::vector<int64_t>{80, 60, 3});
  CHECK(pipeline.OutputBytes() == 80 * 60 * 3 * 4);
  CHECK(pipeline.decode_options().max_pixels == 1000);
}

TEST_CASE("pipeline errors name the place, the key or step, and the value") {
  std::string e = ParseError("steps:\n  - rotate: {degrees: 3}\n");
  CHECK(Contains(e, "pipeline: line 2, column 5: unknown step 'rotate' (known: "));

  e = ParseError("steps:\n  - resize: {sise: 3}\n");
  CHECK(Contains(e, "pipeline: line 2, column 14: step 'resize': unknown key 'sise' (known: size)"));

  e = ParseError("steps:\n  - center_crop: {size: -3}\n");
  CHECK(Contains(e, "line 2"));
  CHECK(Contains(e, "step 'center_crop': size must be a whole number in 1..65535, got '-3'"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 22.5}}]"), "got '22.5'"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: [1, 2, 3]}}]"),
                 "size must be N or [height, width], got a list [1, 2, 3]"));
  CHECK(Contains(ParseError("steps: [{center_crop: {}}]"),
                 "step 'center_crop': missing required key 'size'"));
  CHECK(Contains(ParseError("steps: [{random_resized_crop: {size: 8, scale: [0.5, 2]}}]"),
                 "step 'random_resized_crop': scale values must be in (0, 1], got '2'"));
  CHECK(Contains(ParseError("steps: [{random_resized_crop: {size: 8, scale: [0.9, 0.5]}}]"),
                 "scale must have low <= high, got a list [0.9, 0.5]"));
  CHECK(Contains(ParseError("steps: [{random_resized_crop: {size: 8, ratio: [0, 1]}}]"),
                 "ratio values must be above 0, got '0'"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}, {horizontal_flip: {p: 1.5}}]"),
                 "step 'horizontal_flip': p must be a probability in [0, 1], got '1.5'"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}, {horizontal_flip: {p: often}}]"),
                 "p must be a number, got 'often'"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}]\noutput: {dtype: int8}"),
                 "output: dtype must be uint8 or float32, got 'int8'"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}]\noutput: {layout: NCHW}"),
                 "output: layout must be CHW or HWC, got 'NCHW'"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}]\noutput: {shape: 3}"),
                 "output: unknown key 'shape' (known: dtype, layout)"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}]\ndecode: {max_pixels: -1}"),
                 "decode: max_pixels must be a whole number in 1..268435456, got '-1'"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}]\n"
                            "decode: {max_pixels: 4611686018427387904}"),
                 "decode: max_pixels"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}]\ndecode: {max_pixels: 268435457}"),
                 "268435456"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}]\ntransforms: []"),
                 "pipeline: line 2, column 1: unknown key 'transforms' (known: steps, output, decode)"));
  CHECK(Contains(ParseError("steps: [{resize: {size: 3, size: 4}}]"),
                 "step 'resize': key 'size' is given more than once"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}]\nsteps: [{center_crop: {size: 8}}]"),
                 "pipeline: line 2, column 1: key 'steps' is given more than once"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 0x10}}]"), "got '0x10'"));
  CHECK(Contains(ParseError("output: {dtype: uint8}"), "missing required key 'steps'"));
  CHECK(Contains(ParseError("steps: []"), "'steps' must be a non-empty list of steps"));
  CHECK(Contains(ParseError("- resize: 3"), "a pipeline is a map with 'steps'"));
  CHECK(Contains(ParseError("steps: [{resize: {size: 3}, center_crop: {size: 2}}]"),
                 "a step must be a map of one step name"));
  CHECK(Contains(ParseError("steps: [{resize: 256}]"),
                 "step 'resize': settings must be a map, got '256'"));
}

TEST_CASE("a YAML syntax error reports its line and column") {
  const std::string e = ParseError("steps:\n  - resize: {size: [1, 2}\n");
  CHECK(Contains(e, "pipeline: line 2, column "));
  CHECK(Contains(e, "not valid YAML"));
}

TEST_CASE("the output size must be fixed") {
  std::string e = ParseError("steps:\n  - resize: {size: 256}\n");
  CHECK(Contains(e, "line 2"));
  CHECK(Contains(e, "the output size depends on the image"));
  e = ParseError("steps: [{center_crop: {size: 8}}, {resize: {size: 4}}, {horizontal_flip: {}}]");
  CHECK(Contains(e, "the output size depends on the image"));
  CHECK(Contains(ParseError("steps: [{horizontal_flip: {}}]"), "depends on the image"));
  // A resize of the shorter side followed by an exact resize is fixed.
  CHECK(MustParse("steps: [{resize: {size: 8}}, {resize: {size: [4, 5]}}]").shape() ==
        std::vector<int64_t>{3, 4, 5});
}

TEST_CASE("normalize needs float32 and comes last") {
  const std::string norm = "{normalize: {mean: [0.5, 0.5, 0.5], std: [0.2, 0.2, 0.2]}}";
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}, " + norm + "]"),
                 "step 'normalize' needs 'output: {dtype: float32}'"));
  CHECK(Contains(ParseError("steps: [" + norm + ", {center_crop: {size: 8}}]\n"
                            "output: {dtype: float32}"),
                 "normalize must be the last step"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}, {normalize: {mean: [0.5, 0.5], "
                            "std: [1, 1, 1]}}]\noutput: {dtype: float32}"),
                 "step 'normalize': mean must be 3 numbers"));
  CHECK(Contains(ParseError("steps: [{center_crop: {size: 8}}, {normalize: {mean: [0, 0, 0], "
                            "std: [1, 0, 1]}}]\noutput: {dtype: float32}"),
                 "step 'normalize': std values must be above 0, got '0'"));
}

TEST_CASE("center_crop takes the centre pixels exactly") {
  const ImagePipeline pipeline = MustParse("steps: [{center_crop: {size: [4, 6]}}]");
  const TestImage image = CoordinateImage(10, 8);
  const std::vector<uint8_t> out = RenderBytes(pipeline, image);
  // CHW: plane c, row y, column x; the crop starts at (2, 2).
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 6; ++x) {
      CHECK(out[0 * 24 + y * 6 + x] == x + 2);
      CHECK(out[1 * 24 + y * 6 + x] == y + 2);
      CHECK(out[2 * 24 + y * 6 + x] == x + y + 4);
    }
  }
}

TEST_CASE("center_crop larger than the image pads with zeros (normalized like black)") {
  const ImagePipeline pipeline = MustParse("steps: [{center_crop: {size: 6}}]\n"
                                           "output: {layout: HWC}");
  const std::vector<uint8_t> out = RenderBytes(pipeline, SolidImage(2, 4, {100, 150, 200}));
  // 2 pad columns left, 2 right; 1 pad row above and below.
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 6; ++x) {
      const bool inside = x >= 2 && x < 4 && y >= 1 && y < 5;
      CHECK(out[(y * 6 + x) * 3 + 0] == (inside ? 100 : 0));
      CHECK(out[(y * 6 + x) * 3 + 2] == (inside ? 200 : 0));
    }
  }
  const ImagePipeline normalized = MustParse(
      "steps: [{center_crop: {size: 6}}, {normalize: {mean: [0.5, 0.5, 0.5], std: [0.25, 0.5, "
      "1]}}]\noutput: {dtype: float32}");
  const std::vector<float> f = AsFloats(RenderBytes(normalized, SolidImage(2, 4, {255, 255, 255})));
  CHECK(f[0] == Approx(-2.0));             // channel 0, a corner: (0 - 0.5) / 0.25
  CHECK(f[36 + 0] == Approx(-1.0));        // channel 1
  CHECK(f[1 * 6 + 2] == Approx(2.0));      // channel 0, inside: (1 - 0.5) / 0.25
  CHECK(f[72 + 1 * 6 + 3] == Approx(0.5));  // channel 2, inside

  // The same with filtering: a 2x downscale, then a crop that pads 1 pixel all round.
  const ImagePipeline filtered = MustParse("steps: [{resize: {size: [3, 3]}}, "
                                           "{center_crop: {size: 5}}]");
  const std::vector<uint8_t> g = RenderBytes(filtered, SolidImage(6, 6, {90, 90, 90}));
  for (int y = 0; y < 5; ++y) {
    for (int x = 0; x < 5; ++x) {
      const bool inside = x >= 1 && x < 4 && y >= 1 && y < 4;
      CHECK(g[y * 5 + x] == (inside ? 90 : 0));
    }
  }
}

TEST_CASE("horizontal_flip mirrors columns; p is honoured over many samples") {
  const ImagePipeline always = MustParse(
      "steps: [{center_crop: {size: [3, 5]}}, {horizontal_flip: {p: 1}}]");
  const std::vector<uint8_t> out = RenderBytes(always, CoordinateImage(5, 3));
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 5; ++x) CHECK(out[y * 5 + x] == 4 - x);

  // Flipping a filtered (resized) image reverses the gradient too.
  const ImagePipeline resized = MustParse(
      "steps: [{resize: {size: [2, 8]}}, {horizontal_flip: {p: 1}}]");
  const std::vector<uint8_t> mirrored = RenderBytes(resized, GradientImage(24, 2));
  for (int x = 1; x < 8; ++x) CHECK(mirrored[x] < mirrored[x - 1]);
  CHECK(mirrored[0] > 230);
  CHECK(mirrored[7] < 25);

  const ImagePipeline never = MustParse(
      "steps: [{center_crop: {size: [3, 5]}}, {horizontal_flip: {p: 0}}]");
  CHECK(RenderBytes(never, CoordinateImage(5, 3))[0] == 0);

  const ImagePipeline half = MustParse("steps: [{center_crop: {size: 5}}, {horizontal_flip: {}}]");
  int flipped = 0;
  for (uint64_t id = 0; id < 1000; ++id) flipped += half.Plan(5, 5, 7, 0, id).x_scale < 0;
  CHECK(flipped > 430);
  CHECK(flipped < 570);
}

TEST_CASE("resize of the shorter side follows torchvision's sizes") {
  const ImagePipeline pipeline = MustParse(
      "steps: [{resize: {size: 256}}, {center_crop: {size: 224}}]");
  // 400x300 -> 341x256, then the centre 224x224 at (58, 16) (58.5 rounds to even).
  const SamplePlan plan = pipeline.Plan(400, 300, 0, 0, 0);
  CHECK(plan.width == 224);
  CHECK(plan.height == 224);
  CHECK(plan.x_scale == Approx(400.0 / 341.0));
  CHECK(plan.y_scale == Approx(300.0 / 256.0));
  CHECK(plan.x_offset == Approx(58 * 400.0 / 341.0));
  CHECK(plan.y_offset == Approx(16 * 300.0 / 256.0));
  // The vertical axis needs more: 256 of 300 rows.
  CHECK(ImagePipeline::MinDecodeScale(plan) == Approx(256.0 / 300.0));

  // Portrait, and an image whose shorter side already fits (no resize).
  const SamplePlan portrait = pipeline.Plan(300, 600, 0, 0, 0);
  CHECK(portrait.x_scale == Approx(300.0 / 256.0));
  CHECK(portrait.y_scale == Approx(600.0 / 512.0));
  const SamplePlan fits = pipeline.Plan(256, 300, 0, 0, 0);
  CHECK(fits.x_scale == 1.0);
  CHECK(fits.x_offset == 16.0);
  CHECK(fits.y_offset == 38.0);
}

TEST_CASE("a downscale averages (no aliasing); an exact resize keeps a solid colour") {
  // Columns alternate 0 and 255: halving must give mid-gray, not one of the two.
  TestImage stripes{32, 4, 3, {}};
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 32; ++x)
      for (int c = 0; c < 3; ++c) stripes.pixels.push_back(x % 2 ? 255 : 0);
  const ImagePipeline half = MustParse("steps: [{resize: {size: [4, 16]}}]");
  const std::vector<uint8_t> out = RenderBytes(half, stripes);
  for (int x = 1; x < 15; ++x) CHECK(std::abs(int(out[16 + x]) - 128) <= 1);

  const ImagePipeline up = MustParse("steps: [{resize: {size: [37, 23]}}]\noutput: {layout: HWC}");
  for (uint8_t v : RenderBytes(up, SolidImage(9, 11, {10, 20, 30}))) {
    CHECK((v == 10 || v == 20 || v == 30));
  }
}

TEST_CASE("random_resized_crop stays inside the image and within scale and ratio") {
  const ImagePipeline pipeline = MustParse(
      "steps: [{random_resized_crop: {size: 32, scale: [0.2, 0.6], ratio: [0.5, 2.0]}}]");
  for (uint64_t id = 0; id < 300; ++id) {
    const SamplePlan plan = pipeline.Plan(640, 480, 42, 3, id);
    const double w = plan.x_scale * 32, h = plan.y_scale * 32;
    CHECK(plan.x_offset >= 0);
    CHECK(plan.y_offset >= 0);
    CHECK(plan.x_offset + w <= 640 + 1e-9);
    CHECK(plan.y_offset + h <= 480 + 1e-9);
    const double area = w * h / (640.0 * 480.0);
    CHECK(area >= 0.2 * 0.95);
    CHECK(area <= 0.6 * 1.05);
    CHECK(w / h >= 0.5 * 0.95);
    CHECK(w / h <= 2.0 * 1.05);
  }
  // An aspect ratio the image cannot hold falls back to a central crop of the
  // nearest allowed ratio, as torchvision.
  const ImagePipeline wide = MustParse(
      "steps: [{random_resized_crop: {size: 8, scale: [1, 1], ratio: [3, 4]}}]");
  const SamplePlan fallback = wide.Plan(100, 100, 1, 1, 1);
  CHECK(fallback.x_scale * 8 == Approx(100));
  CHECK(fallback.y_scale * 8 == Approx(33));  // round(100 / 3)
  CHECK(fallback.y_offset == Approx(33));
}

TEST_CASE("randomness depends only on (seed, epoch, id)") {
  const ImagePipeline pipeline = MustParse(
      "steps: [{random_resized_crop: {size: 48}}, {horizontal_flip: {}}]");
  const std::string jpeg = EncodeJpeg(GradientImage(200, 150));
  const std::vector<uint8_t> a = RunBytes(pipeline, jpeg, 5, 2, 17);
  // Other samples in between (other state on this thread) change nothing.
  RunBytes(pipeline, jpeg, 9, 9, 9);
  CHECK(RunBytes(pipeline, jpeg, 5, 2, 17) == a);

  int epoch_differs = 0, id_differs = 0, seed_differs = 0;
  for (uint64_t id = 0; id < 20; ++id) {
    const SamplePlan base = pipeline.Plan(200, 150, 5, 2, id);
    auto differs = [&](const SamplePlan& other) {
      return other.x_offset != base.x_offset || other.y_offset != base.y_offset ||
             other.x_scale != base.x_scale || other.y_scale != base.y_scale;
    };
    epoch_differs += differs(pipeline.Plan(200, 150, 5, 3, id));
    id_differs += differs(pipeline.Plan(200, 150, 5, 2, id + 1));
    seed_differs += differs(pipeline.Plan(200, 150, 6, 2, id));
  }
  CHECK(epoch_differs >= 18);
  CHECK(id_differs >= 18);
  CHECK(seed_differs >= 18);
  CHECK(RunBytes(pipeline, jpeg, 5, 3, 17) != a);
}

TEST_CASE("float32 output is pixel / 255, normalize applies per channel, HWC matches CHW") {
  const TestImage image = SolidImage(20, 20, {255, 0, 51});
  const ImagePipeline plain = MustParse("steps: [{center_crop: {size: 4}}]\n"
                                        "output: {dtype: float32}");
  const std::vector<float> f = AsFloats(RenderBytes(plain, image));
  REQUIRE(f.size() == 3 * 16);
  CHECK(f[0] == Approx(1.0f));
  CHECK(f[16] == Approx(0.0f));
  CHECK(f[32] == Approx(0.2f));

  const ImagePipeline norm = MustParse(
      "steps: [{center_crop: {size: 4}}, {normalize: {mean: [0.485, 0.456, 0.406], "
      "std: [0.229, 0.224, 0.225]}}]\noutput: {dtype: float32, layout: CHW}");
  const std::vector<float> n = AsFloats(RenderBytes(norm, image));
  CHECK(n[5] == Approx((1.0 - 0.485) / 0.229).epsilon(1e-5));
  CHECK(n[16 + 5] == Approx((0.0 - 0.456) / 0.224).epsilon(1e-5));
  CHECK(n[32 + 5] == Approx((0.2 - 0.406) / 0.225).epsilon(1e-5));

  const TestImage gradient = GradientImage(30, 20);
  const ImagePipeline chw = MustParse("steps: [{resize: {size: [7, 9]}}]");
  const ImagePipeline hwc = MustParse("steps: [{resize: {size: [7, 9]}}]\noutput: {layout: HWC}");
  const std::vector<uint8_t> a = RenderBytes(chw, gradient);
  const std::vector<uint8_t> b = RenderBytes(hwc, gradient);
  for (int y = 0; y < 7; ++y)
    for (int x = 0; x < 9; ++x)
      for (int c = 0; c < 3; ++c) CHECK(a[c * 63 + y * 9 + x] == b[(y * 9 + x) * 3 + c]);
}

TEST_CASE("Run decodes a large JPEG at a reduced DCT scale and writes the right pixels") {
  const ImagePipeline pipeline = MustParse("");  // resize 256 + center_crop 224
  const SamplePlan plan = pipeline.Plan(1024, 1024, 0, 0, 0);
  CHECK(ImagePipeline::MinDecodeScale(plan) == Approx(0.25));
  const JpegScale scale = ChooseJpegScale(ImagePipeline::MinDecodeScale(plan));
  CHECK(scale.num * 4 == scale.denom);

  const std::vector<uint8_t> out =
      RunBytes(pipeline, EncodeJpeg(SolidImage(1024, 1024, {250, 128, 3}), 90), 0, 0, 0);
  for (size_t i = 0; i < out.size(); i += 997) {
    const int expected = i < 224 * 224 ? 250 : i < 2 * 224 * 224 ? 128 : 3;
    CHECK(std::abs(int(out[i]) - expected) <= 4);
  }
}

// A 4:2:0 JPEG (as most photographs) of fine texture, where a wrong neighbouring pixel
// shows.
std::string TexturedJpeg420(int width, int height) {
  std::mt19937 random(width + height);
  TestImage image{width, height, 3, std::vector<uint8_t>(size_t(width) * height * 3)};
  for (size_t i = 0; i < image.pixels.size(); ++i)
    image.pixels[i] = static_cast<uint8_t>(i % 97 + random() % 64);
  std::string bytes = EncodeJpeg(image, 90, TJSAMP_420, false);
  REQUIRE(!bytes.empty());
  return bytes;
}

TEST_CASE("Run, which decodes only the region a sample reads, renders the whole decode's bytes") {
  // Crops smaller and larger than the output (enlarged, or shrunk after DCT scaling),
  // flips, and a centre crop that pads; uint8 and float32.
  const char* pipelines[] = {
      "steps: [{random_resized_crop: {size: 40}}, {horizontal_flip: {}}]",
      "steps: [{random_resized_crop: {size: [24, 56], scale: [0.5, 1]}}, {horizontal_flip: {}}]\n"
      "output: {layout: HWC}",
      "steps: [{resize: {size: 72}}, {center_crop: {size: 64}}]",
      "steps: [{center_crop: {size: [300, 50]}}]",
      "steps: [{random_resized_crop: {size: 32}}, {normalize: {mean: [0.5, 0.5, 0.5], "
      "std: [0.2, 0.3, 0.4]}}]\noutput: {dtype: float32}"};
  for (const auto& [width, height] : {std::pair{203, 157}, std::pair{640, 480}}) {
    const std::string jpeg = TexturedJpeg420(width, height);
    for (const char* yaml : pipelines) {
      const ImagePipeline pipeline = MustParse(yaml);
      for (uint64_t id = 0; id < 25; ++id) {
        INFO(yaml << ", " << width << "x" << height << ", sample " << id);
        const SamplePlan plan = pipeline.Plan(width, height, 3, 1, id);
        PixelBuffer buffer;
        RgbImage whole;
        REQUIRE(DecodeImage("img", reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(),
                            pipeline.decode_options(), ImagePipeline::MinDecodeScale(plan),
                            buffer, &whole)
                    .ok());
        std::vector<uint8_t> expected(pipeline.OutputBytes());
        REQUIRE(pipeline.Render(plan, whole, expected.data()).ok());
        CHECK(RunBytes(pipeline, jpeg, 3, 1, id) == expected);
      }
    }
  }
}

TEST_CASE("Render refuses an image without the pixels the plan reads") {
  const ImagePipeline pipeline = MustParse("steps: [{center_crop: {size: 4}}]");
  const TestImage image = CoordinateImage(10, 10);
  RgbImage part = View(image);
  part.region = PixelRect{0, 0, 5, 10};  // the left half; the crop needs columns 3..6
  std::vector<uint8_t> out(pipeline.OutputBytes());
  const Status status = pipeline.Render(pipeline.Plan(10, 10, 0, 0, 0), part, out.data());
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK(Contains(status.message(), "the plan needs [3, 7) x [3, 7)"));
}

TEST_CASE("Run reports a corrupt image as data loss and names it") {
  const ImagePipeline pipeline = MustParse("");
  std::vector<uint8_t> out(pipeline.OutputBytes());
  const std::string jpeg = EncodeJpeg(GradientImage(64, 64));
  Status status = pipeline.Run("/d/cat/1.jpg", reinterpret_cast<const uint8_t*>(jpeg.data()),
                               jpeg.size() / 2, 0, 0, 0, out.data());
  CHECK(status.code() == StatusCode::kDataLoss);
  CHECK(Contains(status.message(), "/d/cat/1.jpg: corrupt JPEG: "));
  const ImagePipeline limited = MustParse("steps: [{center_crop: {size: 8}}]\n"
                                          "decode: {max_pixels: 100}");
  status = limited.Run("x", reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), 0, 0, 0,
                       out.data());
  CHECK(status.message() == "x: image is 64x64 pixels, over the limit of 100 pixels");
}

}  // namespace
}  // namespace ember::daemon

// Fuzzes the image header reader and decoders (JPEG, PNG) on bytes in memory. Input: a
// scale byte (min_scale (b % 8 + 1) / 8), a region byte (the region's corner, in
// sixteenths of the decoded size), then the image file's bytes. Images are limited to
// 64Ki pixels, so that each input decodes quickly; every decoded pixel is read, so a
// decoder that reports more pixels than it wrote is caught.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/fuzz_input.h"
#include "daemon/data/image/decode.h"

namespace ember::daemon {
namespace {

// Reads every byte of the image's region.
uint32_t Touch(const RgbImage& image) {
  uint32_t sum = 0;
  const size_t bytes = size_t(image.region.width) * size_t(image.region.height) * 3;
  for (size_t i = 0; i < bytes; ++i) sum += image.pixels[i];
  return sum;
}

}  // namespace
}  // namespace ember::daemon

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  using namespace ember::daemon;
  FuzzInput input(data, size);
  const double min_scale = (input.Byte() % 8 + 1) / 8.0;
  const uint8_t corner = input.Byte();
  const std::string file = input.Rest();
  const auto* bytes = reinterpret_cast<const uint8_t*>(file.data());

  ImageDecodeOptions options;
  options.max_pixels = 1 << 16;
  Result<ImageHeader> header = ReadImageHeader("fuzz", bytes, file.size(), options);
  if (!header.ok()) return 0;

  static PixelBuffer buffer;
  RgbImage image;
  if (DecodeImage("fuzz", bytes, file.size(), options, min_scale, buffer, &image).ok()) {
    (void)Touch(image);
  }
  auto choose = [&](const ImageHeader& h) {
    DecodeRequest request;
    request.min_scale = min_scale;
    int width = 0;
    int height = 0;
    DecodedSize(h, min_scale, &width, &height);
    request.region.x = width * (corner & 15) / 16;
    request.region.y = height * (corner >> 4) / 16;
    request.region.width = std::max(1, width / 2);
    request.region.height = std::max(1, height / 2);
    return request;
  };
  if (DecodeImageRegion("fuzz", bytes, file.size(), options, choose, buffer, &image).ok()) {
    (void)Touch(image);
  }
  return 0;
}

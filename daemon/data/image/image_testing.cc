#include "daemon/data/image/image_testing.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>

namespace ember::daemon {

TestImage SolidImage(int width, int height, const std::vector<uint8_t>& color) {
  TestImage image{width, height, static_cast<int>(color.size()), {}};
  image.pixels.reserve(size_t(width) * height * color.size());
  for (int i = 0; i < width * height; ++i)
    image.pixels.insert(image.pixels.end(), color.begin(), color.end());
  return image;
}

TestImage GradientImage(int width, int height) {
  TestImage image{width, height, 3, {}};
  image.pixels.resize(size_t(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &image.pixels[(size_t(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(width > 1 ? x * 255 / (width - 1) : 0);
      p[1] = static_cast<uint8_t>(height > 1 ? y * 255 / (height - 1) : 0);
      p[2] = 64;
    }
  }
  return image;
}

std::string EncodeJpeg(const TestImage& image, int quality) {
  return EncodeJpeg(image, quality, image.channels == 1 ? TJSAMP_GRAY : TJSAMP_444, false);
}

std::string EncodeJpeg(const TestImage& image, int quality, int subsampling, bool progressive) {
  tjhandle handle = tjInitCompress();
  if (handle == nullptr) return "";
  const int format = image.channels == 1   ? TJPF_GRAY
                     : image.channels == 4 ? TJPF_CMYK
                                           : TJPF_RGB;
  unsigned char* out = nullptr;
  unsigned long size = 0;
  std::string bytes;
  if (tjCompress2(handle, image.pixels.data(), image.width, image.width * image.channels,
                  image.height, format, &out, &size, subsampling, quality,
                  progressive ? TJFLAG_PROGRESSIVE : 0) == 0) {
    bytes.assign(reinterpret_cast<const char*>(out), size);
  }
  tjFree(out);
  tjDestroy(handle);
  return bytes;
}

std::string EncodePng(const TestImage& image) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = image.channels == 1   ? PNG_FORMAT_GRAY
               : image.channels == 4 ? PNG_FORMAT_RGBA
                                     : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, image.pixels.data(), 0, nullptr)) {
    return "";
  }
  std::string bytes(size, '\0');
  if (!png_image_write_to_memory(&png, bytes.data(), &size, 0, image.pixels.data(), 0, nullptr)) {
    return "";
  }
  bytes.resize(size);
  return bytes;
}

size_t FindJpegMarker(const std::string& jpeg, uint8_t marker) {
  const auto* p = reinterpret_cast<const unsigned char*>(jpeg.data());
  size_t at = 2;  // after SOI
  while (at + 4 <= jpeg.size() && p[at] == 0xff) {
    if (p[at + 1] == marker) return at;
    if (p[at + 1] == 0xda) break;  // start of scan: entropy-coded data follows
    at += 2 + ((size_t(p[at + 2]) << 8) | p[at + 3]);
  }
  return std::string::npos;
}

size_t FindPngChunk(const std::string& png, const char* type) {
  size_t at = 8;  // after the signature
  while (at + 8 <= png.size()) {
    const auto* p = reinterpret_cast<const unsigned char*>(png.data() + at);
    const size_t length = (size_t(p[0]) << 24) | (size_t(p[1]) << 16) | (size_t(p[2]) << 8) | p[3];
    if (std::memcmp(p + 4, type, 4) == 0) return at;
    at += 12 + length;
  }
  return std::string::npos;
}

}  // namespace ember::daemon

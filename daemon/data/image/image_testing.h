// Test helpers: synthetic images, encoded with TurboJPEG and libpng, and where their
// markers and chunks lie (files to write them to: common/temp_dir_testing.h).
#ifndef EMBER_DAEMON_DATA_IMAGE_IMAGE_TESTING_H_
#define EMBER_DAEMON_DATA_IMAGE_IMAGE_TESTING_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ember::daemon {

// Interleaved pixels, `channels` bytes per pixel, rows without padding.
struct TestImage {
  int width = 0;
  int height = 0;
  int channels = 3;
  std::vector<uint8_t> pixels;

  uint8_t at(int x, int y, int c) const { return pixels[(size_t(y) * width + x) * channels + c]; }
};

// Every pixel `color` (channels = color.size(): 1 gray, 3 RGB, 4 RGBA or CMYK).
TestImage SolidImage(int width, int height, const std::vector<uint8_t>& color);
// RGB: red rises left to right (0..255), green top to bottom, blue constant 64.
TestImage GradientImage(int width, int height);

// Lossy JPEG (4:4:4, or grayscale for 1 channel; 4 channels are encoded as CMYK).
// Empty on failure.
std::string EncodeJpeg(const TestImage& image, int quality = 95);
// The same with chroma subsampling `subsampling` (a TJSAMP_* value of turbojpeg.h), and
// progressive if `progressive`.
std::string EncodeJpeg(const TestImage& image, int quality, int subsampling, bool progressive);
// Lossless 8-bit PNG (1 gray, 3 RGB, 4 RGBA). Empty on failure.
std::string EncodePng(const TestImage& image);

// The offset of the first `marker` (e.g. 0xc0 for SOF0) segment among those before a
// JPEG's scan data (0xda finds the scan itself): the 0xff byte before it, or
// std::string::npos.
size_t FindJpegMarker(const std::string& jpeg, uint8_t marker);
// The offset of the first chunk of `type` (e.g. "IDAT") in a PNG: its length field, or
// std::string::npos.
size_t FindPngChunk(const std::string& png, const char* type);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IMAGE_IMAGE_TESTING_H_

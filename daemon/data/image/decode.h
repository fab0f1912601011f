// Image decoding for the image formats: JPEG through libjpeg-turbo's libjpeg API (with
// DCT-domain downscaling and region decoding), PNG through libpng. Output is always 8-bit
// interleaved RGB: grayscale becomes 3 equal channels, alpha is dropped, palettes are
// expanded, 16-bit samples keep their high byte, CMYK/YCCK JPEGs (Adobe's inverted CMYK)
// are converted to RGB.
//
// The format is told by the file's first bytes, not by its name (ImageNet has PNGs named
// .JPEG). Every failure is kDataLoss with a message "<name>: <reason>"; a file whose
// header claims more pixels than ImageDecodeOptions::max_pixels fails before any pixel
// buffer is allocated. Any libjpeg warning (truncated file, bad Huffman code, ...) is an
// error: libjpeg would fill the damaged part with gray and carry on, which is not a
// sample to train on. (JPEG has no checksum, and libjpeg-turbo's fast Huffman decoder,
// which decodes most baseline scans, does not check codes: a corrupt byte in the scan
// data is caught only when it throws the rest of the scan out of step.)
//
// Region decoding: a caller that needs only part of the image (a random crop) names it,
// and a JPEG decoder skips the inverse DCT, upsampling and colour conversion of most of
// the rest. It still entropy-decodes every scan to the end of the file, so whether a file
// is reported corrupt never depends on the region, and the region's pixels are those a
// whole-image decode gives.
//
// Thread-safety: all functions are safe to call concurrently (each thread keeps its own
// libjpeg decompressor).
#ifndef EMBER_DAEMON_DATA_IMAGE_DECODE_H_
#define EMBER_DAEMON_DATA_IMAGE_DECODE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ember/status.h"

namespace ember::daemon {

enum class ImageFormat { kJpeg, kPng };

// The most a pipeline may raise max_pixels to (16384 x 16384, 768 MiB of RGB): a decode
// holds the whole image, on each decode thread at once.
inline constexpr uint64_t kMaxDecodePixels = uint64_t{1} << 28;

struct ImageDecodeOptions {
  // Largest width * height a header may claim (at most kMaxDecodePixels); bounds the
  // memory one decode needs.
  uint64_t max_pixels = 64'000'000;
};

// What a file's header says, read without decoding pixels.
struct ImageHeader {
  ImageFormat format = ImageFormat::kJpeg;
  int width = 0;
  int height = 0;
};

// A reduction applied while decoding a JPEG: the decoded size is
// ceil(width * num / denom) x ceil(height * num / denom).
struct JpegScale {
  int num = 1;
  int denom = 1;
};

// A growable pixel buffer that keeps its memory between uses and does not zero-fill.
// Not thread-safe; one per thread.
class PixelBuffer {
 public:
  // Returns at least `bytes` writable bytes; earlier contents are lost.
  uint8_t* Reserve(size_t bytes);
  // Frees the memory if more than `bytes` are held (keeps one huge image from pinning
  // memory for the life of a thread).
  void ShrinkTo(size_t bytes);
  size_t capacity() const { return capacity_; }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t capacity_ = 0;
};

// A rectangle of pixels: columns [x, x + width), rows [y, y + height).
struct PixelRect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// A decoded image of width x height pixels, of which `pixels` holds those in `region`:
// pixel (x, y) of the image is at pixels + ((y - region.y) * region.width + x - region.x)
// * 3 (rows of region.width * 3 bytes, no padding). The whole image unless decoded with
// a region.
struct RgbImage {
  int width = 0;
  int height = 0;
  const uint8_t* pixels = nullptr;
  PixelRect region;

  // An image whose pixels are all held.
  static RgbImage Whole(int width, int height, const uint8_t* pixels) {
    return RgbImage{width, height, pixels, PixelRect{0, 0, width, height}};
  }
};

// Reads the header of a JPEG or PNG held in memory. kDataLoss if the bytes are neither,
// the header is corrupt, or width * height > options.max_pixels.
Result<ImageHeader> ReadImageHeader(const std::string& name, const uint8_t* data, size_t size,
                                    const ImageDecodeOptions& options);

// The smallest of the DCT scaling factors 1/8, 1/4, 1/2, 1 that is >= min_scale, so the
// decoded image keeps at least min_scale of the resolution on both axes; 1 for
// min_scale >= 1 (or NaN). libjpeg also scales by 3/8, 5/8, ..., but without SIMD: slower
// than a power of two and a resample of the larger image.
JpegScale ChooseJpegScale(double min_scale);

// The size DecodeImage gives the image `header` describes, at `min_scale`: a JPEG's at
// ChooseJpegScale(min_scale), a PNG's always full size.
void DecodedSize(const ImageHeader& header, double min_scale, int* width, int* height);

// Decodes into `buffer` and describes the result in `image`. A JPEG is decoded at
// ChooseJpegScale(min_scale); a PNG always at full size. kDataLoss as ReadImageHeader,
// and for corrupt or truncated pixel data (e.g. a PNG chunk with a bad CRC).
Status DecodeImage(const std::string& name, const uint8_t* data, size_t size,
                   const ImageDecodeOptions& options, double min_scale, PixelBuffer& buffer,
                   RgbImage* image);

// As DecodeImage, where the caller needs only the pixels in `region` (in the coordinates
// of the decoded image, DecodedSize; clipped to it). image->region holds at least those
// (a JPEG's region is widened to whole blocks; a PNG is always decoded whole), with the
// same values a whole decode gives them. Corruption anywhere in the file fails whatever
// the region.
Status DecodeImageRegion(const std::string& name, const uint8_t* data, size_t size,
                         const ImageDecodeOptions& options, double min_scale,
                         const PixelRect& region, PixelBuffer& buffer, RgbImage* image);

// The min_scale and region of a DecodeImageRegion, chosen from the image's header.
struct DecodeRequest {
  double min_scale = 1.0;
  PixelRect region;
};
using DecodeChooser = std::function<DecodeRequest(const ImageHeader& header)>;

// As DecodeImageRegion, for a caller whose scale and region depend on the image's size:
// `choose` is called once with the header, after the pixel limit is checked and before
// any pixel is decoded (never if the header fails). The header is read once, where
// ReadImageHeader and then DecodeImageRegion read it twice.
Status DecodeImageRegion(const std::string& name, const uint8_t* data, size_t size,
                         const ImageDecodeOptions& options, const DecodeChooser& choose,
                         PixelBuffer& buffer, RgbImage* image);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IMAGE_DECODE_H_

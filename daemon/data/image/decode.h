// Image decoding for the image formats: JPEG through TurboJPEG (with DCT-domain
// downscaling), PNG through libpng. Output is always 8-bit interleaved RGB: grayscale
// becomes 3 equal channels, alpha is dropped, palettes are expanded, 16-bit samples keep
// their high byte, CMYK/YCCK JPEGs (Adobe's inverted CMYK) are converted to RGB.
//
// The format is told by the file's first bytes, not by its name (ImageNet has PNGs named
// .JPEG). Every failure is kDataLoss with a message "<name>: <reason>"; a file whose
// header claims more pixels than ImageDecodeOptions::max_pixels fails before any pixel
// buffer is allocated. Any libjpeg warning (truncated file, bad Huffman code, ...) is an
// error: libjpeg would fill the damaged part with gray and carry on, which is not a
// sample to train on.
//
// Thread-safety: all functions are safe to call concurrently (each thread keeps its own
// TurboJPEG handle).
#ifndef EMBER_DAEMON_DATA_IMAGE_DECODE_H_
#define EMBER_DAEMON_DATA_IMAGE_DECODE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ember/status.h"

namespace ember::daemon {

enum class ImageFormat { kJpeg, kPng };

struct ImageDecodeOptions {
  // Largest width * height a header may claim; bounds the memory one decode needs.
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

// A decoded image: `pixels` points into a PixelBuffer, rows of width * 3 bytes, no padding.
struct RgbImage {
  int width = 0;
  int height = 0;
  const uint8_t* pixels = nullptr;
};

// Reads the header of a JPEG or PNG held in memory. kDataLoss if the bytes are neither,
// the header is corrupt, or width * height > options.max_pixels.
Result<ImageHeader> ReadImageHeader(const std::string& name, const uint8_t* data, size_t size,
                                    const ImageDecodeOptions& options);

// The smallest of TurboJPEG's scaling factors (1/8 ... 1) that is >= min_scale, so the
// decoded image keeps at least min_scale of the resolution on both axes; 1 for
// min_scale >= 1 (or NaN).
JpegScale ChooseJpegScale(double min_scale);

// Decodes into `buffer` and describes the result in `image`. A JPEG is decoded at
// ChooseJpegScale(min_scale); a PNG always at full size. kDataLoss as ReadImageHeader,
// and for corrupt or truncated pixel data (e.g. a PNG chunk with a bad CRC).
Status DecodeImage(const std::string& name, const uint8_t* data, size_t size,
                   const ImageDecodeOptions& options, double min_scale, PixelBuffer& buffer,
                   RgbImage* image);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IMAGE_DECODE_H_

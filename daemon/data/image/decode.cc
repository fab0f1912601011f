#include "daemon/data/image/decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>

namespace ember::daemon {

namespace {

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

bool IsJpeg(const uint8_t* data, size_t size) {
  return size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff;
}

bool IsPng(const uint8_t* data, size_t size) {
  return size >= sizeof(kPngSignature) &&
         std::memcmp(data, kPngSignature, sizeof(kPngSignature)) == 0;
}

std::string FirstBytes(const uint8_t* data, size_t size) {
  std::string out;
  char hex[8];
  for (size_t i = 0; i < size && i < 4; ++i) {
    std::snprintf(hex, sizeof(hex), "%s0x%02x", i == 0 ? "" : " ", data[i]);
    out += hex;
  }
  return out.empty() ? "nothing (empty file)" : out;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

Status CheckPixels(const std::string& name, uint64_t width, uint64_t height,
                   const ImageDecodeOptions& options) {
  if (width == 0 || height == 0) {
    return DataLoss(name + ": image is " + std::to_string(width) + "x" + std::to_string(height) +
                    " pixels (empty)");
  }
  if (width * height > options.max_pixels) {
    return DataLoss(name + ": image is " + std::to_string(width) + "x" + std::to_string(height) +
                    " pixels, over the limit of " + std::to_string(options.max_pixels) +
                    " pixels");
  }
  return Status::Ok();
}

// ---- JPEG (TurboJPEG) ----

// One TurboJPEG decompressor per thread, made on first use. TurboJPEG 2.1 leaves a
// handle mid-header after an error (the next header read continues from stale state), so
// a handle that failed is replaced.
class TjDecompressor {
 public:
  ~TjDecompressor() { Reset(); }
  tjhandle get() {
    if (handle_ == nullptr) handle_ = tjInitDecompress();
    return handle_;
  }
  void Reset() {
    if (handle_ != nullptr) tjDestroy(handle_);
    handle_ = nullptr;
  }

 private:
  tjhandle handle_ = nullptr;
};

TjDecompressor& ThreadDecompressor() {
  thread_local TjDecompressor decompressor;
  return decompressor;
}

Result<tjhandle> DecompressorHandle() {
  tjhandle handle = ThreadDecompressor().get();
  if (handle == nullptr) {
    return ResourceExhausted(std::string("cannot create a TurboJPEG decompressor: ") +
                             tjGetErrorStr2(nullptr));
  }
  return handle;
}

// A Status for the error `handle` reports; the handle is replaced.
Status JpegError(tjhandle handle, const std::string& what) {
  Status status = DataLoss(what + tjGetErrorStr2(handle));
  ThreadDecompressor().Reset();
  return status;
}

struct JpegHeader {
  int width = 0;
  int height = 0;
  int colorspace = TJCS_RGB;
};

Result<JpegHeader> ReadJpegHeader(tjhandle handle, const std::string& name, const uint8_t* data,
                                  size_t size) {
  JpegHeader header;
  int subsampling = 0;
  if (tjDecompressHeader3(handle, data, static_cast<unsigned long>(size), &header.width,
                          &header.height, &subsampling, &header.colorspace) != 0) {
    return JpegError(handle, name + ": corrupt JPEG header: ");
  }
  if (header.width <= 0 || header.height <= 0) {
    ThreadDecompressor().Reset();
    return DataLoss(name + ": corrupt JPEG header: no frame header before the end of the data");
  }
  return header;
}

// Adobe CMYK as libjpeg delivers it (inverted: 255 is no ink) to RGB, in place: pixel i
// is read from 4i before anything at or after 3i + 3 is written.
void InvertedCmykToRgb(uint8_t* pixels, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* in = pixels + 4 * i;
    const unsigned k = in[3];
    const unsigned c = in[0], m = in[1], y = in[2];
    uint8_t* out = pixels + 3 * i;
    out[0] = static_cast<uint8_t>((c * k + 127) / 255);
    out[1] = static_cast<uint8_t>((m * k + 127) / 255);
    out[2] = static_cast<uint8_t>((y * k + 127) / 255);
  }
}

Status DecodeJpeg(const std::string& name, const uint8_t* data, size_t size,
                  const ImageDecodeOptions& options, double min_scale, PixelBuffer& buffer,
                  RgbImage* image) {
  EMBER_ASSIGN_OR_RETURN(tjhandle handle, DecompressorHandle());
  EMBER_ASSIGN_OR_RETURN(JpegHeader header, ReadJpegHeader(handle, name, data, size));
  EMBER_RETURN_IF_ERROR(CheckPixels(name, header.width, header.height, options));
  const JpegScale scale = ChooseJpegScale(min_scale);
  const tjscalingfactor factor{scale.num, scale.denom};
  const int width = TJSCALED(header.width, factor);
  const int height = TJSCALED(header.height, factor);
  const bool cmyk = header.colorspace == TJCS_CMYK || header.colorspace == TJCS_YCCK;
  const int channels = cmyk ? 4 : 3;
  uint8_t* pixels = buffer.Reserve(size_t{static_cast<size_t>(width)} * height * channels);
  const int flags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;
  if (tjDecompress2(handle, data, static_cast<unsigned long>(size), pixels, width,
                    width * channels, height, cmyk ? TJPF_CMYK : TJPF_RGB, flags) != 0) {
    return JpegError(handle, name + ": corrupt JPEG: ");
  }
  if (cmyk) InvertedCmykToRgb(pixels, size_t{static_cast<size_t>(width)} * height);
  image->width = width;
  image->height = height;
  image->pixels = pixels;
  return Status::Ok();
}

// ---- PNG (libpng) ----
//
// libpng reports errors by calling an error function that must not return; it leaves
// with longjmp to the setjmp in the function that called into libpng. A longjmp is only
// defined when every frame it skips holds trivially destructible objects, so the
// functions below that call setjmp, and the callbacks libpng calls, hold nothing else;
// C++ objects live in the caller, DecodePng.

struct PngInput {
  const uint8_t* data;
  size_t size;
  size_t position;
  char message[256];  // the error libpng reported, for the Status
};

void PngReadCallback(png_structp png, png_bytep out, size_t count) {
  auto* input = static_cast<PngInput*>(png_get_io_ptr(png));
  if (input->size - input->position < count) {
    png_error(png, "truncated: the file ends inside a chunk");
  }
  std::memcpy(out, input->data + input->position, count);
  input->position += count;
}

[[noreturn]] void PngErrorCallback(png_structp png, png_const_charp message) {
  auto* input = static_cast<PngInput*>(png_get_error_ptr(png));
  std::snprintf(input->message, sizeof(input->message), "%s", message);
  png_longjmp(png, 1);
}

void PngWarningCallback(png_structp, png_const_charp) {}

// Reads the chunks up to the image data and sets the transforms that make 8-bit RGB.
bool PngReadInfo(png_structp png, png_infop info, uint32_t* width, uint32_t* height,
                 size_t* row_bytes) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  png_set_expand(png);  // palette to RGB, gray below 8 bits to 8, tRNS to alpha
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  *width = png_get_image_width(png, info);
  *height = png_get_image_height(png, info);
  *row_bytes = png_get_rowbytes(png, info);
  return true;
}

// Reads every row (and the chunks after the image data, checking their CRCs).
bool PngReadRows(png_structp png, png_infop info, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, info);
  return true;
}

Status DecodePng(const std::string& name, const uint8_t* data, size_t size,
                 const ImageDecodeOptions& options, PixelBuffer& buffer, RgbImage* image) {
  EMBER_ASSIGN_OR_RETURN(ImageHeader header, ReadImageHeader(name, data, size, options));
  PngInput input{data, size, 0, {0}};
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &input, PngErrorCallback, PngWarningCallback);
  if (png == nullptr) return ResourceExhausted(name + ": cannot create a libpng reader");
  png_infop info = png_create_info_struct(png);
  struct Destroyer {
    png_structp* png;
    png_infop* info;
    ~Destroyer() { png_destroy_read_struct(png, info, nullptr); }
  } destroyer{&png, &info};
  if (info == nullptr) return ResourceExhausted(name + ": cannot create a libpng reader");
  png_set_read_fn(png, &input, PngReadCallback);

  uint32_t width = 0, height = 0;
  size_t row_bytes = 0;
  if (!PngReadInfo(png, info, &width, &height, &row_bytes)) {
    return DataLoss(name + ": corrupt PNG: " + input.message);
  }
  if (width != static_cast<uint32_t>(header.width) ||
      height != static_cast<uint32_t>(header.height) || row_bytes != size_t{width} * 3) {
    return DataLoss(name + ": corrupt PNG: unexpected layout after conversion to 8-bit RGB (" +
                    std::to_string(width) + "x" + std::to_string(height) + ", " +
                    std::to_string(row_bytes) + " bytes per row)");
  }
  uint8_t* pixels = buffer.Reserve(row_bytes * height);
  std::unique_ptr<png_bytep[]> rows(new png_bytep[height]);
  for (uint32_t y = 0; y < height; ++y) rows[y] = pixels + row_bytes * y;
  if (!PngReadRows(png, info, rows.get())) {
    return DataLoss(name + ": corrupt PNG: " + input.message);
  }
  image->width = static_cast<int>(width);
  image->height = static_cast<int>(height);
  image->pixels = pixels;
  return Status::Ok();
}

}  // namespace

uint8_t* PixelBuffer::Reserve(size_t bytes) {
  if (bytes > capacity_) {
    data_.reset();
    data_.reset(new uint8_t[bytes]);
    capacity_ = bytes;
  }
  return data_.get();
}

void PixelBuffer::ShrinkTo(size_t bytes) {
  if (capacity_ > bytes) {
    data_.reset();
    capacity_ = 0;
  }
}

Result<ImageHeader> ReadImageHeader(const std::string& name, const uint8_t* data, size_t size,
                                    const ImageDecodeOptions& options) {
  ImageHeader header;
  if (IsJpeg(data, size)) {
    header.format = ImageFormat::kJpeg;
    EMBER_ASSIGN_OR_RETURN(tjhandle handle, DecompressorHandle());
    EMBER_ASSIGN_OR_RETURN(JpegHeader jpeg, ReadJpegHeader(handle, name, data, size));
    header.width = jpeg.width;
    header.height = jpeg.height;
  } else if (IsPng(data, size)) {
    header.format = ImageFormat::kPng;
    // The signature, then IHDR: length (13), type, width, height, ...
    constexpr size_t kIhdrEnd = 8 + 4 + 4 + 13 + 4;
    if (size < kIhdrEnd) {
      return DataLoss(name + ": truncated PNG: " + std::to_string(size) +
                      " bytes, too short for the IHDR chunk");
    }
    if (BigEndian32(data + 8) != 13 || std::memcmp(data + 12, "IHDR", 4) != 0) {
      return DataLoss(name + ": corrupt PNG: the first chunk is not a 13-byte IHDR");
    }
    const uint32_t width = BigEndian32(data + 16);
    const uint32_t height = BigEndian32(data + 20);
    if (width > 0x7fffffff || height > 0x7fffffff) {
      return DataLoss(name + ": corrupt PNG: image is " + std::to_string(width) + "x" +
                      std::to_string(height) + " pixels (PNG allows at most 2^31-1 per side)");
    }
    header.width = static_cast<int>(width);
    header.height = static_cast<int>(height);
  } else {
    return DataLoss(name + ": not a JPEG or PNG file (starts with " + FirstBytes(data, size) +
                    ")");
  }
  EMBER_RETURN_IF_ERROR(CheckPixels(name, header.width, header.height, options));
  return header;
}

JpegScale ChooseJpegScale(double min_scale) {
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  JpegScale best;  // 1/1
  if (factors == nullptr || !(min_scale < 1.0)) return best;
  double best_value = 1.0;
  for (int i = 0; i < count; ++i) {
    const double value = static_cast<double>(factors[i].num) / factors[i].denom;
    // The tolerance keeps a scale computed as 224/896 from missing 1/4 by rounding.
    if (value <= 1.0 && value >= min_scale - 1e-9 && value < best_value) {
      best_value = value;
      best = JpegScale{factors[i].num, factors[i].denom};
    }
  }
  return best;
}

Status DecodeImage(const std::string& name, const uint8_t* data, size_t size,
                   const ImageDecodeOptions& options, double min_scale, PixelBuffer& buffer,
                   RgbImage* image) {
  if (IsJpeg(data, size)) return DecodeJpeg(name, data, size, options, min_scale, buffer, image);
  if (IsPng(data, size)) return DecodePng(name, data, size, options, buffer, image);
  return ReadImageHeader(name, data, size, options).status();
}

}  // namespace ember::daemon

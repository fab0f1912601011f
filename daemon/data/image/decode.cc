#include "daemon/data/image/decode.h"

#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <numeric>

// After <cstdio>: jpeglib.h uses FILE and size_t without including their headers.
#include <jpeglib.h>

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

// ---- JPEG (libjpeg) ----
//
// libjpeg reports errors by calling error_exit, which must not return: it leaves with
// longjmp to the setjmp of the function that called into libjpeg. As with libpng below,
// the functions that call setjmp hold only trivially destructible objects; C++ objects
// live in their caller, DecodeJpeg.

// As TurboJPEG's TJFLAG_LIMITSCANS: a progressive JPEG of thousands of tiny scans costs
// far more to decode than its size suggests.
constexpr int kMaxJpegScans = 500;

// Pixels decoded around a requested region. Smooth ("fancy") chroma upsampling computes
// the first and last pixel of a cropped row, and the first row after skipped ones, from
// replicated edge samples instead of their real neighbours: those pixels must fall
// outside the region the caller needs. libjpeg-turbo upsamples smoothly only by 2 (4:2:2,
// 4:2:0, 4:4:0), where the difference reaches 1 pixel (decode_test checks every
// subsampling and scale against a whole decode).
constexpr int kJpegRegionMargin = 1;

// Rows per batch of row pointers for jpeg_read_scanlines.
constexpr int kJpegRowBatch = 16;

// Zero bytes after the copy of a file decoded on libjpeg-turbo's fast Huffman path; see
// UsePaddedCopy.
constexpr size_t kJpegPadding = 512 * D_MAX_BLOCKS_IN_MCU;
// Larger files are decoded in place: the copy's cost grows with the file, the fast path's
// saving does not (at 64 KB the copy takes about a third of it).
constexpr size_t kMaxPaddedJpeg = size_t{64} << 10;

struct JpegErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg holds a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

JpegErrorManager* ErrorManager(j_common_ptr cinfo) {
  return reinterpret_cast<JpegErrorManager*>(cinfo->err);
}

[[noreturn]] void JpegErrorExit(j_common_ptr cinfo) {
  JpegErrorManager* err = ErrorManager(cinfo);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Fails the libjpeg call in progress with `message`, as JpegErrorExit.
[[noreturn]] void JpegFail(j_common_ptr cinfo, const char* message) {
  JpegErrorManager* err = ErrorManager(cinfo);
  std::snprintf(err->message, sizeof(err->message), "%s", message);
  std::longjmp(err->jump, 1);
}

// A warning (level -1: corrupt data that libjpeg would paper over) is an error; trace
// messages (level >= 0) are ignored.
void JpegEmitMessage(j_common_ptr cinfo, int level) {
  if (level < 0) JpegErrorExit(cinfo);
}

void JpegProgressMonitor(j_common_ptr cinfo) {
  if (cinfo->is_decompressor &&
      reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > kMaxJpegScans) {
    JpegErrorManager* err = ErrorManager(cinfo);
    std::snprintf(err->message, sizeof(err->message),
                  "progressive JPEG image has more than %d scans", kMaxJpegScans);
    std::longjmp(err->jump, 1);
  }
}

bool JpegCreate(j_decompress_ptr cinfo) {
  if (setjmp(ErrorManager(reinterpret_cast<j_common_ptr>(cinfo))->jump)) return false;
  jpeg_create_decompress(cinfo);
  return true;
}

// One libjpeg decompressor per thread, made on first use and reused (libjpeg keeps its
// memory pools and tables between images); jpeg_abort_decompress returns it to the start
// state after each image, whether it succeeded or failed.
class JpegDecompressor {
 public:
  JpegDecompressor() {
    cinfo_.err = jpeg_std_error(&err_.pub);
    err_.pub.error_exit = JpegErrorExit;
    err_.pub.emit_message = JpegEmitMessage;
    err_.message[0] = '\0';
    progress_.progress_monitor = JpegProgressMonitor;
    created_ = JpegCreate(&cinfo_);
    if (created_) cinfo_.progress = &progress_;
  }
  ~JpegDecompressor() {
    if (created_) jpeg_destroy_decompress(&cinfo_);
  }
  JpegDecompressor(const JpegDecompressor&) = delete;
  JpegDecompressor& operator=(const JpegDecompressor&) = delete;

  j_decompress_ptr get() { return created_ ? &cinfo_ : nullptr; }
  std::string message() const { return err_.message; }
  // Memory for a padded copy of the file (UsePaddedCopy).
  PixelBuffer& copy() { return copy_; }

 private:
  jpeg_decompress_struct cinfo_;
  JpegErrorManager err_;
  jpeg_progress_mgr progress_;
  bool created_ = false;
  PixelBuffer copy_;
};

Result<JpegDecompressor*> ThreadDecompressor() {
  thread_local JpegDecompressor decompressor;
  if (decompressor.get() == nullptr) {
    return ResourceExhausted("cannot create a libjpeg decompressor: " + decompressor.message());
  }
  return &decompressor;
}

// jpeg_read_header over `data`. False on error (the message is in the error manager);
// the decompressor is then back at its start state.
bool JpegReadHeader(j_decompress_ptr cinfo, const uint8_t* data, size_t size) {
  if (setjmp(ErrorManager(reinterpret_cast<j_common_ptr>(cinfo))->jump)) {
    jpeg_abort_decompress(cinfo);
    return false;
  }
  jpeg_abort_decompress(cinfo);  // whatever an earlier caller left
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  return true;
}

// Sets the output scale and colour space and starts decompressing; then, if `*width` is
// less than the output width, restricts decoding to columns [*x, *x + *width) (which
// libjpeg widens to the left to a block boundary, updating *x and *width).
bool JpegStart(j_decompress_ptr cinfo, JpegScale scale, bool cmyk, JDIMENSION* x,
               JDIMENSION* width) {
  if (setjmp(ErrorManager(reinterpret_cast<j_common_ptr>(cinfo))->jump)) {
    jpeg_abort_decompress(cinfo);
    return false;
  }
  cinfo->scale_num = static_cast<unsigned int>(scale.num);
  cinfo->scale_denom = static_cast<unsigned int>(scale.denom);
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(cinfo);
  if (*width < cinfo->output_width) jpeg_crop_scanline(cinfo, x, width);
  return true;
}

// Decodes output rows [first, first + count) into `pixels` (rows of `row_bytes`), then
// reads the rest of the image with `spare_row` as scratch and finishes. Every
// entropy-coded byte is read, so corrupt data anywhere fails: jpeg_skip_scanlines only
// entropy-decodes the rows it skips, but skipping to the very end would mark the image
// complete without reading its rest, so the last row is read instead.
bool JpegReadRows(j_decompress_ptr cinfo, JDIMENSION first, JDIMENSION count, uint8_t* pixels,
                  size_t row_bytes, uint8_t* spare_row) {
  if (setjmp(ErrorManager(reinterpret_cast<j_common_ptr>(cinfo))->jump)) {
    jpeg_abort_decompress(cinfo);
    return false;
  }
  // A memory source never suspends, so every read returns rows; a guard all the same.
  auto read = [cinfo](JSAMPARRAY rows, JDIMENSION count) {
    const JDIMENSION got = jpeg_read_scanlines(cinfo, rows, count);
    if (got == 0) JpegFail(reinterpret_cast<j_common_ptr>(cinfo), "libjpeg returned no rows");
    return got;
  };
  if (first > 0) jpeg_skip_scanlines(cinfo, first);
  JSAMPROW rows[kJpegRowBatch];
  for (JDIMENSION done = 0; done < count;) {
    const JDIMENSION batch = std::min<JDIMENSION>(kJpegRowBatch, count - done);
    for (JDIMENSION i = 0; i < batch; ++i) rows[i] = pixels + (done + i) * row_bytes;
    // Smooth upsampling returns one or two rows per call.
    for (JDIMENSION got = 0; got < batch;) got += read(rows + got, batch - got);
    done += batch;
  }
  const JDIMENSION height = cinfo->output_height;
  if (cinfo->output_scanline < height) {
    if (cinfo->output_scanline < height - 1) {
      jpeg_skip_scanlines(cinfo, height - 1 - cinfo->output_scanline);
    }
    JSAMPROW spare = spare_row;
    read(&spare, 1);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

struct JpegHeader {
  int width = 0;
  int height = 0;
  bool cmyk = false;  // CMYK or YCCK
};

// Reads the header into the thread's decompressor, which is left ready to decode.
Result<JpegHeader> ReadJpegHeader(JpegDecompressor& decompressor, const std::string& name,
                                  const uint8_t* data, size_t size) {
  j_decompress_ptr cinfo = decompressor.get();
  if (!JpegReadHeader(cinfo, data, size)) {
    return DataLoss(name + ": corrupt JPEG header: " + decompressor.message());
  }
  JpegHeader header;
  header.width = static_cast<int>(cinfo->image_width);
  header.height = static_cast<int>(cinfo->image_height);
  header.cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  if (header.width <= 0 || header.height <= 0) {
    jpeg_abort_decompress(cinfo);
    return DataLoss(name + ": corrupt JPEG header: no frame header before the end of the data");
  }
  return header;
}

// libjpeg-turbo's Huffman decoder (jdhuff.c, decode_mcu) takes its fast path for an MCU
// only while the source's buffer holds at least 512 bytes per block of the MCU: the fast
// path reads ahead without checking for the buffer's end. With the file as the buffer,
// the last 512 * blocks_in_MCU bytes (3 KB for 4:2:0 colour: half of a 6 KB file) take the
// slow path, which gives the same coefficients more slowly. So after the header, a small
// file of one sequential Huffman scan without restart markers (the only kind the fast
// path serves) that ends with its EOI marker (0xFF 0xD9) is read from a copy followed by
// kJpegPadding zero bytes:
// - the entropy decoder never reads past a marker, so it stops at the final EOI and never
//   reaches the padding; a file cut short does not end with an EOI marker and is read in
//   place;
// - libjpeg reads the padding only for a marker segment that runs over the final 0xFF
//   0xD9 (a file cut inside a segment after the scan data), and then still fails: zeros
//   hold no marker, so it cannot find an EOI in them (it may fail with another message:
//   DecodeJpeg decodes a file that fails from the copy again in place);
// - a corrupt scan can fail differently: the fast path decodes an invalid Huffman code as
//   0 where the slow path reports it (as it always did for all but the last few KB of a
//   file, now for those too), and reads fewer bytes ahead, so it reports stray bytes
//   before the EOI marker that the slow path swallows. Of random single-byte corruptions
//   of the last 3 KB of 2,000 small files, 27.8% failed in place, 27.2% from the copy.
// Returns false (read in place) or true (cinfo now reads the copy, at the same offset).
bool UsePaddedCopy(JpegDecompressor& decompressor, const uint8_t* data, size_t size) {
  j_decompress_ptr cinfo = decompressor.get();
  const bool ends_with_eoi = size >= 2 && data[size - 2] == 0xff && data[size - 1] == JPEG_EOI;
  if (!ends_with_eoi || size > kMaxPaddedJpeg || cinfo->progressive_mode || cinfo->arith_code ||
      cinfo->comps_in_scan != cinfo->num_components || cinfo->restart_interval != 0) {
    return false;
  }
  uint8_t* copy = decompressor.copy().Reserve(size + kJpegPadding);
  std::memcpy(copy, data, size);
  std::memset(copy + size, 0, kJpegPadding);
  // jpeg_mem_src's reader keeps its position in these two fields alone.
  jpeg_source_mgr* src = cinfo->src;
  src->next_input_byte = copy + (src->next_input_byte - data);
  src->bytes_in_buffer += kJpegPadding;
  return true;
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

int ScaledSide(int side, JpegScale scale) {
  return static_cast<int>((int64_t{side} * scale.num + scale.denom - 1) / scale.denom);
}

// Decodes the pixels `want` (within the image at `scale`) of the JPEG whose header the
// thread's decompressor has read.
Status DecodeJpegRegion(JpegDecompressor& decompressor, const std::string& name,
                        const JpegHeader& header, JpegScale scale, const PixelRect& want,
                        PixelBuffer& buffer, RgbImage* image) {
  j_decompress_ptr cinfo = decompressor.get();
  const int width = ScaledSide(header.width, scale);
  const int height = ScaledSide(header.height, scale);
  JDIMENSION x = static_cast<JDIMENSION>(want.x);
  JDIMENSION columns = static_cast<JDIMENSION>(want.width);
  if (!JpegStart(cinfo, scale, header.cmyk, &x, &columns)) {
    return DataLoss(name + ": corrupt JPEG: " + decompressor.message());
  }
  // libjpeg's output size (cropped: `columns`) is the one planned.
  if (cinfo->output_width != columns || static_cast<int>(cinfo->output_height) != height) {
    jpeg_abort_decompress(cinfo);
    return Internal(name + ": libjpeg decodes at " + std::to_string(cinfo->output_width) + "x" +
                    std::to_string(cinfo->output_height) + ", expected " +
                    std::to_string(width) + "x" + std::to_string(height));
  }
  const size_t channels = header.cmyk ? 4 : 3;
  const size_t row_bytes = size_t{columns} * channels;
  // The rows wanted, then one spare row for reading the rest of the image.
  uint8_t* pixels = buffer.Reserve(row_bytes * (size_t(want.height) + 1));
  if (!JpegReadRows(cinfo, static_cast<JDIMENSION>(want.y), static_cast<JDIMENSION>(want.height),
                    pixels, row_bytes, pixels + row_bytes * size_t(want.height))) {
    return DataLoss(name + ": corrupt JPEG: " + decompressor.message());
  }
  if (header.cmyk) InvertedCmykToRgb(pixels, size_t{columns} * want.height);
  image->width = width;
  image->height = height;
  image->pixels = pixels;
  image->region = PixelRect{static_cast<int>(x), want.y, static_cast<int>(columns), want.height};
  return Status::Ok();
}

Status DecodeJpeg(const std::string& name, const uint8_t* data, size_t size,
                  const ImageDecodeOptions& options, const DecodeChooser& choose,
                  PixelBuffer& buffer, RgbImage* image) {
  EMBER_ASSIGN_OR_RETURN(JpegDecompressor * decompressor, ThreadDecompressor());
  EMBER_ASSIGN_OR_RETURN(JpegHeader header, ReadJpegHeader(*decompressor, name, data, size));
  Status status = CheckPixels(name, header.width, header.height, options);
  if (!status.ok()) {
    jpeg_abort_decompress(decompressor->get());
    return status;
  }
  const DecodeRequest request =
      choose(ImageHeader{ImageFormat::kJpeg, header.width, header.height});
  const JpegScale scale = ChooseJpegScale(request.min_scale);
  const int width = ScaledSide(header.width, scale);
  const int height = ScaledSide(header.height, scale);

  // The rows and columns to decode: the region and a margin, within the image.
  const PixelRect& region = request.region;
  const int x0 = std::max(0, region.x - kJpegRegionMargin);
  const int y0 = std::max(0, region.y - kJpegRegionMargin);
  const int x1 = std::min(width, region.x + region.width + kJpegRegionMargin);
  const int y1 = std::min(height, region.y + region.height + kJpegRegionMargin);
  // An empty region (nothing of the image is needed) still reads the whole file.
  const PixelRect want =
      x0 < x1 && y0 < y1 ? PixelRect{x0, y0, x1 - x0, y1 - y0} : PixelRect{0, 0, 1, 1};
  const bool padded = UsePaddedCopy(*decompressor, data, size);
  status = DecodeJpegRegion(*decompressor, name, header, scale, want, buffer, image);
  if (status.ok() || !padded) return status;
  // Failed from the padded copy: decoded again in place, a file that fails there fails with
  // that message (the copy may meet another error first). One that does not is corrupt
  // all the same: the fast path reads fewer bytes ahead than the slow one, so it can find
  // stray bytes before the EOI marker that the other swallows.
  EMBER_ASSIGN_OR_RETURN(header, ReadJpegHeader(*decompressor, name, data, size));
  const Status in_place = DecodeJpegRegion(*decompressor, name, header, scale, want, buffer, image);
  return in_place.ok() ? status : in_place;
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

// `header`: ReadImageHeader's.
Status DecodePng(const std::string& name, const uint8_t* data, size_t size,
                 const ImageHeader& header, PixelBuffer& buffer, RgbImage* image) {
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
  *image = RgbImage::Whole(static_cast<int>(width), static_cast<int>(height), pixels);
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
    EMBER_ASSIGN_OR_RETURN(JpegDecompressor * decompressor, ThreadDecompressor());
    EMBER_ASSIGN_OR_RETURN(JpegHeader jpeg, ReadJpegHeader(*decompressor, name, data, size));
    jpeg_abort_decompress(decompressor->get());
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
  // libjpeg scales by k/8, k = 1..16, but libjpeg-turbo has SIMD inverse DCTs only for
  // k = 1, 2, 4, 8; the others are plain C, and in a 4:2:0 file the chroma is scaled up
  // through a 2k x 2k one (jpeg_idct_14x14 for 7/8). On the photo folder (crops of
  // 300-500 px, RandomResizedCrop 224) decoding at 7/8 ... 3/8 took 19-26% more CPU per
  // image than decoding at the next power of two and resampling the larger image.
  JpegScale best;  // 1/1
  if (!(min_scale < 1.0)) return best;
  for (int k = 1; k < 8; k *= 2) {
    // The tolerance keeps a scale computed as 224/896 from missing 1/4 by rounding.
    if (k / 8.0 >= min_scale - 1e-9) {
      const int common = std::gcd(k, 8);
      return JpegScale{k / common, 8 / common};
    }
  }
  return best;
}

void DecodedSize(const ImageHeader& header, double min_scale, int* width, int* height) {
  const JpegScale scale =
      header.format == ImageFormat::kJpeg ? ChooseJpegScale(min_scale) : JpegScale{};
  *width = ScaledSide(header.width, scale);
  *height = ScaledSide(header.height, scale);
}

Status DecodeImage(const std::string& name, const uint8_t* data, size_t size,
                   const ImageDecodeOptions& options, double min_scale, PixelBuffer& buffer,
                   RgbImage* image) {
  const auto whole = [min_scale](const ImageHeader& header) {
    DecodeRequest request{min_scale, PixelRect{}};
    DecodedSize(header, min_scale, &request.region.width, &request.region.height);
    return request;
  };
  return DecodeImageRegion(name, data, size, options, whole, buffer, image);
}

Status DecodeImageRegion(const std::string& name, const uint8_t* data, size_t size,
                         const ImageDecodeOptions& options, double min_scale,
                         const PixelRect& region, PixelBuffer& buffer, RgbImage* image) {
  return DecodeImageRegion(
      name, data, size, options,
      [min_scale, &region](const ImageHeader&) { return DecodeRequest{min_scale, region}; },
      buffer, image);
}

Status DecodeImageRegion(const std::string& name, const uint8_t* data, size_t size,
                         const ImageDecodeOptions& options, const DecodeChooser& choose,
                         PixelBuffer& buffer, RgbImage* image) {
  if (IsJpeg(data, size)) return DecodeJpeg(name, data, size, options, choose, buffer, image);
  EMBER_ASSIGN_OR_RETURN(ImageHeader header, ReadImageHeader(name, data, size, options));
  choose(header);  // a PNG is always decoded whole
  return DecodePng(name, data, size, header, buffer, image);
}

}  // namespace ember::daemon

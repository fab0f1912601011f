#include "daemon/data/image/decode.h"

#include <turbojpeg.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "daemon/data/image/image_testing.h"

namespace ember::daemon {
namespace {

const uint8_t* Bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

struct Decoded {
  Status status;
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // RGB

  int at(int x, int y, int c) const { return pixels[(size_t(y) * width + x) * 3 + c]; }
};

Decoded Decode(const std::string& bytes, double min_scale = 1.0,
               const ImageDecodeOptions& options = {}) {
  PixelBuffer buffer;
  RgbImage image;
  Decoded out;
  out.status = DecodeImage("img", Bytes(bytes), bytes.size(), options, min_scale, buffer, &image);
  if (out.status.ok()) {
    out.width = image.width;
    out.height = image.height;
    out.pixels.assign(image.pixels, image.pixels + size_t(image.width) * image.height * 3);
  }
  return out;
}

// The largest difference between a decoded image and an RGB reference of the same size.
int MaxError(const Decoded& decoded, const TestImage& reference) {
  int worst = 0;
  for (int y = 0; y < reference.height; ++y)
    for (int x = 0; x < reference.width; ++x)
      for (int c = 0; c < 3; ++c)
        worst = std::max(worst, std::abs(decoded.at(x, y, c) - reference.at(x, y, c)));
  return worst;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// An RGB image of fine texture (every pixel differs from its neighbours): a region
// decode that got any pixel from the wrong neighbours shows it.
TestImage TexturedImage(int width, int height) {
  TestImage image{width, height, 3, {}};
  std::mt19937 random(width * 1000 + height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const int value = (x * 7 + y * 5 + c * 80) % 200 + static_cast<int>(random() % 56);
        image.pixels.push_back(static_cast<uint8_t>(value));
      }
    }
  }
  return image;
}

// A JPEG with the given chroma subsampling (TJSAMP_*), optionally progressive.
std::string EncodeSampledJpeg(const TestImage& image, int subsampling, bool progressive) {
  std::string bytes = EncodeJpeg(image, 90, subsampling, progressive);
  REQUIRE(!bytes.empty());
  return bytes;
}

Decoded DecodeRegion(const std::string& bytes, double min_scale, const PixelRect& region,
                     RgbImage* image) {
  static thread_local PixelBuffer buffer;
  Decoded out;
  out.status = DecodeImageRegion("img", Bytes(bytes), bytes.size(), {}, min_scale, region,
                                 buffer, image);
  if (out.status.ok()) {
    out.width = image->region.width;
    out.height = image->region.height;
    out.pixels.assign(image->pixels,
                      image->pixels + size_t(image->region.width) * image->region.height * 3);
  }
  return out;
}

TEST_CASE("a solid-colour JPEG decodes to its colour") {
  const TestImage image = SolidImage(40, 24, {200, 30, 120});
  const Decoded decoded = Decode(EncodeJpeg(image));
  REQUIRE(decoded.status.ok());
  CHECK(decoded.width == 40);
  CHECK(decoded.height == 24);
  CHECK(MaxError(decoded, image) <= 3);
}

TEST_CASE("a gradient JPEG decodes close to its pixels") {
  const TestImage image = GradientImage(64, 48);
  const Decoded decoded = Decode(EncodeJpeg(image, 98));
  REQUIRE(decoded.status.ok());
  CHECK(MaxError(decoded, image) <= 6);
}

TEST_CASE("a grayscale JPEG becomes three equal channels") {
  const Decoded decoded = Decode(EncodeJpeg(SolidImage(16, 16, {90})));
  REQUIRE(decoded.status.ok());
  for (int c = 0; c < 3; ++c) CHECK(std::abs(decoded.at(5, 7, c) - 90) <= 2);
}

TEST_CASE("a CMYK JPEG converts to RGB") {
  // Adobe-style inverted CMYK, as libjpeg stores it: 255 is no ink.
  const Decoded decoded = Decode(EncodeJpeg(SolidImage(16, 16, {200, 100, 50, 128})));
  REQUIRE(decoded.status.ok());
  CHECK(std::abs(decoded.at(3, 3, 0) - 200 * 128 / 255) <= 4);
  CHECK(std::abs(decoded.at(3, 3, 1) - 100 * 128 / 255) <= 4);
  CHECK(std::abs(decoded.at(3, 3, 2) - 50 * 128 / 255) <= 4);
}

TEST_CASE("PNG decodes losslessly: RGB, gray to RGB, alpha dropped") {
  const TestImage rgb = GradientImage(33, 17);
  const Decoded decoded = Decode(EncodePng(rgb));
  REQUIRE(decoded.status.ok());
  CHECK(decoded.width == 33);
  CHECK(decoded.height == 17);
  CHECK(MaxError(decoded, rgb) == 0);

  const Decoded gray = Decode(EncodePng(SolidImage(5, 4, {77})));
  REQUIRE(gray.status.ok());
  CHECK(MaxError(gray, SolidImage(5, 4, {77, 77, 77})) == 0);

  const Decoded rgba = Decode(EncodePng(SolidImage(5, 4, {10, 20, 30, 0})));
  REQUIRE(rgba.status.ok());
  CHECK(MaxError(rgba, SolidImage(5, 4, {10, 20, 30})) == 0);
}

TEST_CASE("the format comes from the bytes, not the name") {
  const std::string png = EncodePng(SolidImage(3, 2, {1, 2, 3}));
  const std::string jpeg = EncodeJpeg(SolidImage(9, 7, {1, 2, 3}));
  auto png_header = ReadImageHeader("x.jpg", Bytes(png), png.size(), {});
  REQUIRE(png_header.ok());
  CHECK(png_header->format == ImageFormat::kPng);
  CHECK(png_header->width == 3);
  CHECK(png_header->height == 2);
  auto jpeg_header = ReadImageHeader("x.png", Bytes(jpeg), jpeg.size(), {});
  REQUIRE(jpeg_header.ok());
  CHECK(jpeg_header->format == ImageFormat::kJpeg);
  CHECK(jpeg_header->width == 9);
  CHECK(jpeg_header->height == 7);

  const std::string text = "hello, world";
  const Decoded decoded = Decode(text);
  CHECK(decoded.status.code() == StatusCode::kDataLoss);
  CHECK(Contains(decoded.status.message(), "img: not a JPEG or PNG file (starts with 0x68"));
  CHECK(Decode("").status.code() == StatusCode::kDataLoss);
}

TEST_CASE("ChooseJpegScale picks the smallest power-of-two DCT scale that keeps enough resolution") {
  auto value = [](JpegScale s) { return static_cast<double>(s.num) / s.denom; };
  CHECK(value(ChooseJpegScale(1.0)) == 1.0);
  CHECK(value(ChooseJpegScale(3.0)) == 1.0);
  CHECK(value(ChooseJpegScale(0.9)) == 1.0);
  CHECK(value(ChooseJpegScale(0.8)) == 1.0);  // not 7/8: libjpeg-turbo has no SIMD for it
  CHECK(value(ChooseJpegScale(0.5)) == 0.5);
  CHECK(value(ChooseJpegScale(0.51)) == 1.0);
  CHECK(value(ChooseJpegScale(224.0 / 896.0)) == 0.25);
  CHECK(value(ChooseJpegScale(0.3)) == 0.5);
  CHECK(value(ChooseJpegScale(0.2)) == 0.25);
  CHECK(value(ChooseJpegScale(0.1)) == 0.125);
  CHECK(value(ChooseJpegScale(0.0)) == 0.125);
}

TEST_CASE("a 1024x1024 JPEG needed at a quarter of its size decodes at 1/4 scale") {
  const TestImage image = SolidImage(1024, 1024, {30, 160, 220});
  const Decoded decoded = Decode(EncodeJpeg(image, 90), 224.0 / 896.0);
  REQUIRE(decoded.status.ok());
  CHECK(decoded.width == 256);
  CHECK(decoded.height == 256);
  CHECK(MaxError(decoded, SolidImage(256, 256, {30, 160, 220})) <= 3);
  // PNG has no reduced decode: always full size.
  const Decoded png = Decode(EncodePng(SolidImage(64, 64, {1, 2, 3})), 0.25);
  REQUIRE(png.status.ok());
  CHECK(png.width == 64);
}

TEST_CASE("a region decode gives the whole decode's pixels in the region") {
  struct Case {
    int subsampling;
    const char* name;
  };
  const Case cases[] = {{TJSAMP_444, "4:4:4"}, {TJSAMP_422, "4:2:2"}, {TJSAMP_420, "4:2:0"},
                        {TJSAMP_440, "4:4:0"}, {TJSAMP_411, "4:1:1"}, {TJSAMP_GRAY, "gray"}};
  const TestImage image = TexturedImage(203, 157);
  std::mt19937 random(7);
  for (const Case& c : cases) {
    for (bool progressive : {false, true}) {
      const std::string jpeg = EncodeSampledJpeg(image, c.subsampling, progressive);
      for (double min_scale : {1.0, 0.8, 0.5, 0.3, 0.125}) {
        const Decoded whole = Decode(jpeg, min_scale);
        REQUIRE(whole.status.ok());
        for (int trial = 0; trial < 12; ++trial) {
          std::uniform_int_distribution<int> x_at(0, whole.width - 1), y_at(0, whole.height - 1);
          PixelRect region;
          region.x = x_at(random);
          region.y = y_at(random);
          region.width = std::uniform_int_distribution<int>(1, whole.width - region.x)(random);
          region.height = std::uniform_int_distribution<int>(1, whole.height - region.y)(random);
          INFO(c.name << (progressive ? " progressive" : "") << ", scale " << min_scale
                      << ", region " << region.x << "," << region.y << " " << region.width
                      << "x" << region.height);
          RgbImage held;
          const Decoded part = DecodeRegion(jpeg, min_scale, region, &held);
          REQUIRE(part.status.ok());
          CHECK(held.width == whole.width);
          CHECK(held.height == whole.height);
          REQUIRE(held.region.x <= region.x);
          REQUIRE(held.region.y <= region.y);
          REQUIRE(held.region.x + held.region.width >= region.x + region.width);
          REQUIRE(held.region.y + held.region.height >= region.y + region.height);
          int differing = 0;
          for (int y = region.y; y < region.y + region.height; ++y) {
            for (int x = region.x; x < region.x + region.width; ++x) {
              for (int ch = 0; ch < 3; ++ch) {
                const int held_value = part.at(x - held.region.x, y - held.region.y, ch);
                differing += held_value != whole.at(x, y, ch);
              }
            }
          }
          CHECK(differing == 0);
        }
      }
    }
  }
}

TEST_CASE("a region decode of a CMYK JPEG converts the region as a whole decode does") {
  TestImage cmyk{77, 45, 4, {}};
  std::mt19937 random(9);
  for (int i = 0; i < 77 * 45 * 4; ++i) cmyk.pixels.push_back(static_cast<uint8_t>(random()));
  const std::string jpeg = EncodeJpeg(cmyk);
  for (double min_scale : {1.0, 0.5}) {
    const Decoded whole = Decode(jpeg, min_scale);
    REQUIRE(whole.status.ok());
    const PixelRect region{whole.width / 3, whole.height / 4, whole.width / 2, whole.height / 2};
    RgbImage held;
    const Decoded part = DecodeRegion(jpeg, min_scale, region, &held);
    REQUIRE(part.status.ok());
    for (int y = region.y; y < region.y + region.height; ++y) {
      for (int x = region.x; x < region.x + region.width; ++x) {
        for (int c = 0; c < 3; ++c) {
          REQUIRE(part.at(x - held.region.x, y - held.region.y, c) == whole.at(x, y, c));
        }
      }
    }
  }
}

TEST_CASE("a region decode still reads the whole file: corruption outside the region fails") {
  const TestImage image = TexturedImage(64, 256);
  const std::string jpeg = EncodeSampledJpeg(image, TJSAMP_420, false);
  const PixelRect top{0, 0, 16, 16};
  RgbImage held;
  REQUIRE(DecodeRegion(jpeg, 1.0, top, &held).status.ok());
  // Cut in the last quarter of the scan data, far below the region.
  const Decoded truncated = DecodeRegion(jpeg.substr(0, jpeg.size() * 7 / 8), 1.0, top, &held);
  CHECK(truncated.status.code() == StatusCode::kDataLoss);
  CHECK(Contains(truncated.status.message(), "img: corrupt JPEG: "));
  // A marker in the scan data below the region.
  std::string bad = jpeg;
  const size_t at = bad.size() * 7 / 8;
  bad[at] = static_cast<char>(0xff);
  bad[at + 1] = static_cast<char>(0xd9);
  const Decoded corrupt = DecodeRegion(bad, 1.0, top, &held);
  CHECK(corrupt.status.code() == StatusCode::kDataLoss);
  // Only the end-of-image marker missing: found only by reading to the very end.
  const std::string no_end = jpeg.substr(0, jpeg.size() - 2);
  CHECK(Decode(no_end).status.code() == StatusCode::kDataLoss);
  const Decoded unfinished = DecodeRegion(no_end, 1.0, top, &held);
  CHECK(unfinished.status.code() == StatusCode::kDataLoss);
  CHECK(Contains(unfinished.status.message(), "img: corrupt JPEG: "));
  // The same for an empty region and one at the bottom.
  for (const PixelRect& region : {PixelRect{}, PixelRect{40, 250, 24, 6}}) {
    CHECK(DecodeRegion(jpeg, 1.0, region, &held).status.ok());
    CHECK(DecodeRegion(jpeg.substr(0, jpeg.size() / 2), 1.0, region, &held).status.code() ==
          StatusCode::kDataLoss);
    CHECK(DecodeRegion(no_end, 1.0, region, &held).status.code() == StatusCode::kDataLoss);
  }
  // A progressive JPEG with a truncated final scan.
  const std::string progressive = EncodeSampledJpeg(image, TJSAMP_420, true);
  CHECK(DecodeRegion(progressive.substr(0, progressive.size() - 40), 1.0, top, &held)
            .status.code() == StatusCode::kDataLoss);
}

TEST_CASE("a JPEG decodes the same with or without bytes after its end") {
  // A file ending with its EOI marker is decoded from a padded copy (libjpeg-turbo's fast
  // Huffman path to the end); one with bytes after the marker in place.
  const TestImage image = TexturedImage(96, 80);
  for (int subsampling : {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_GRAY}) {
    INFO("subsampling " << subsampling);
    const std::string jpeg = EncodeSampledJpeg(image, subsampling, false);
    const std::string trailed = jpeg + std::string("\0after the end", 15);
    const Decoded whole = Decode(jpeg);
    REQUIRE(whole.status.ok());
    const Decoded in_place = Decode(trailed);
    REQUIRE(in_place.status.ok());
    CHECK(whole.pixels == in_place.pixels);
    RgbImage held;
    const PixelRect region{10, 20, 30, 40};
    const Decoded part = DecodeRegion(jpeg, 1.0, region, &held);
    REQUIRE(part.status.ok());
    const Decoded part_in_place = DecodeRegion(trailed, 1.0, region, &held);
    REQUIRE(part_in_place.status.ok());
    CHECK(part.pixels == part_in_place.pixels);
  }
}

TEST_CASE("a JPEG cut inside a segment after its scan data fails, even if it ends like one") {
  // Segments after the scan, cut short by the end of the file just after bytes 0xff 0xd9
  // (an EOI marker's, but inside the segment): libjpeg runs out of data reading them.
  const std::string jpeg = EncodeSampledJpeg(TexturedImage(64, 48), TJSAMP_420, false);
  REQUIRE(jpeg.substr(jpeg.size() - 2) == "\xff\xd9");
  const std::string scan = jpeg.substr(0, jpeg.size() - 2);
  const std::string eoi = "\xff\xd9";
  // Marker, length (big-endian, counting itself), then the bytes the file still has.
  const auto segment = [](uint8_t marker, int length, const std::string& bytes) {
    return std::string{'\xff', static_cast<char>(marker), static_cast<char>(length >> 8),
                       static_cast<char>(length & 0xff)} +
           bytes;
  };
  const std::string cut_segments[] = {
      segment(0xfe, 1024, "a comment" + eoi),          // COM
      segment(0xe1, 9000, "Exif" + eoi),               // APP1
      segment(0xc4, 512, std::string(1, '\0') + eoi),  // DHT
      segment(0xdb, 67, std::string(1, '\0') + eoi),   // DQT
  };
  for (const std::string& cut : cut_segments) {
    INFO("segment " << std::hex << int(uint8_t(cut[1])));
    const Decoded decoded = Decode(scan + cut);
    CHECK(decoded.status.code() == StatusCode::kDataLoss);
    CHECK(decoded.status.message() == "img: corrupt JPEG: Premature end of JPEG file");
  }
  // Whole, such a segment is fine.
  CHECK(Decode(scan + segment(0xfe, 7, "hello") + eoi).status.ok());
}

TEST_CASE("DecodeImageRegion with a chooser plans from the header, read once") {
  const TestImage image = TexturedImage(120, 90);
  const std::string jpeg = EncodeSampledJpeg(image, TJSAMP_420, false);
  const std::string png = EncodePng(image);
  for (const std::string* bytes : {&jpeg, &png}) {
    const bool is_jpeg = bytes == &jpeg;
    INFO(std::string(is_jpeg ? "JPEG" : "PNG"));
    int calls = 0;
    const auto choose = [&calls](const ImageHeader& header) {
      ++calls;
      CHECK(header.width == 120);
      CHECK(header.height == 90);
      // Half the resolution; the decoded image's middle.
      return DecodeRequest{0.5, PixelRect{15, 10, 30, 20}};
    };
    PixelBuffer buffer;
    RgbImage image_out;
    REQUIRE(DecodeImageRegion("img", Bytes(*bytes), bytes->size(), {}, choose, buffer, &image_out)
                .ok());
    CHECK(calls == 1);
    // As the fixed-region call gives.
    RgbImage fixed;
    const Decoded expected = DecodeRegion(*bytes, 0.5, PixelRect{15, 10, 30, 20}, &fixed);
    REQUIRE(expected.status.ok());
    CHECK(image_out.width == (is_jpeg ? 60 : 120));
    CHECK(image_out.width == fixed.width);
    CHECK(image_out.height == fixed.height);
    CHECK(image_out.region.x == fixed.region.x);
    CHECK(image_out.region.y == fixed.region.y);
    REQUIRE(image_out.region.width == fixed.region.width);
    REQUIRE(image_out.region.height == fixed.region.height);
    CHECK(std::equal(expected.pixels.begin(), expected.pixels.end(), image_out.pixels));
  }
  // Not called for a corrupt header, nor one over the pixel limit.
  int calls = 0;
  const auto count = [&calls](const ImageHeader&) {
    ++calls;
    return DecodeRequest{};
  };
  PixelBuffer buffer;
  RgbImage out;
  CHECK(DecodeImageRegion("img", Bytes(jpeg), 40, {}, count, buffer, &out).code() ==
        StatusCode::kDataLoss);
  ImageDecodeOptions small;
  small.max_pixels = 100;
  CHECK(DecodeImageRegion("img", Bytes(jpeg), jpeg.size(), small, count, buffer, &out).code() ==
        StatusCode::kDataLoss);
  CHECK(DecodeImageRegion("img", Bytes(png), png.size(), small, count, buffer, &out).code() ==
        StatusCode::kDataLoss);
  CHECK(calls == 0);
}

TEST_CASE("a JPEG header claiming 60000x60000 pixels fails before allocating") {
  std::string jpeg = EncodeJpeg(SolidImage(16, 16, {1, 2, 3}));
  const size_t sof = FindJpegMarker(jpeg, 0xc0);
  REQUIRE(sof != std::string::npos);
  // SOF0: marker, length (2), precision (1), height (2), width (2).
  for (size_t at : {sof + 5, sof + 7}) {
    jpeg[at] = static_cast<char>(0xea);
    jpeg[at + 1] = static_cast<char>(0x60);
  }
  auto header = ReadImageHeader("big.jpg", Bytes(jpeg), jpeg.size(), {});
  REQUIRE(!header.ok());
  CHECK(header.status().code() == StatusCode::kDataLoss);
  CHECK(header.status().message() ==
        "big.jpg: image is 60000x60000 pixels, over the limit of 64000000 pixels");

  PixelBuffer buffer;
  RgbImage image;
  Status status = DecodeImage("big.jpg", Bytes(jpeg), jpeg.size(), {}, 1.0, buffer, &image);
  CHECK(status.code() == StatusCode::kDataLoss);
  CHECK(Contains(status.message(), "60000x60000"));
  CHECK(buffer.capacity() == 0);

  // The limit is configurable.
  const std::string small = EncodeJpeg(SolidImage(100, 100, {1, 2, 3}));
  ImageDecodeOptions options;
  options.max_pixels = 9999;
  const Decoded refused = Decode(small, 1.0, options);
  CHECK(refused.status.code() == StatusCode::kDataLoss);
  CHECK(Contains(refused.status.message(), "100x100 pixels, over the limit of 9999"));
  options.max_pixels = 10000;
  CHECK(Decode(small, 1.0, options).status.ok());
}

TEST_CASE("a PNG header over the pixel limit fails the same way") {
  std::string png = EncodePng(SolidImage(4, 4, {1, 2, 3}));
  const size_t ihdr = FindPngChunk(png, "IHDR");
  REQUIRE(ihdr == 8);
  // Width and height follow the length and type; CRC left stale: the limit comes first.
  const unsigned char big[4] = {0x00, 0x00, 0xea, 0x60};
  std::memcpy(&png[ihdr + 8], big, 4);
  std::memcpy(&png[ihdr + 12], big, 4);
  const Decoded decoded = Decode(png);
  CHECK(decoded.status.code() == StatusCode::kDataLoss);
  CHECK(decoded.status.message() ==
        "img: image is 60000x60000 pixels, over the limit of 64000000 pixels");
}

TEST_CASE("a truncated JPEG is data loss") {
  const std::string jpeg = EncodeJpeg(GradientImage(64, 64));
  const Decoded decoded = Decode(jpeg.substr(0, jpeg.size() / 2));
  CHECK(decoded.status.code() == StatusCode::kDataLoss);
  CHECK(Contains(decoded.status.message(), "img: corrupt JPEG: "));
  // Cut inside the header.
  const Decoded header_cut = Decode(jpeg.substr(0, 40));
  INFO(header_cut.status.message());
  CHECK(header_cut.status.code() == StatusCode::kDataLoss);
  CHECK(Contains(header_cut.status.message(), "img: corrupt JPEG header: "));
}

TEST_CASE("a corrupt JPEG is data loss") {
  const std::string jpeg = EncodeJpeg(GradientImage(64, 64));
  SECTION("garbage tables") {
    std::string bad = jpeg;
    const size_t dqt = FindJpegMarker(bad, 0xdb);
    REQUIRE(dqt != std::string::npos);
    bad[dqt + 2] = bad[dqt + 3] = 0;  // a DQT segment of length 0
    const Decoded decoded = Decode(bad);
    CHECK(decoded.status.code() == StatusCode::kDataLoss);
    CHECK(Contains(decoded.status.message(), "img: corrupt JPEG"));
  }
  SECTION("a marker in the middle of the scan data") {
    std::string bad = jpeg;
    const size_t sos = FindJpegMarker(bad, 0xda);
    REQUIRE(sos != std::string::npos);
    const size_t middle = sos + (bad.size() - sos) / 2;
    bad[middle] = static_cast<char>(0xff);
    bad[middle + 1] = static_cast<char>(0xd9);  // EOI, far too early
    const Decoded decoded = Decode(bad);
    INFO(decoded.status.message());
    CHECK(decoded.status.code() == StatusCode::kDataLoss);
    CHECK(Contains(decoded.status.message(), "img: corrupt JPEG: "));
  }
}

TEST_CASE("a PNG with a bad CRC is data loss") {
  const std::string png = EncodePng(GradientImage(32, 32));
  const size_t idat = FindPngChunk(png, "IDAT");
  REQUIRE(idat != std::string::npos);
  const auto* p = reinterpret_cast<const unsigned char*>(png.data() + idat);
  const size_t idat_length =
      (size_t(p[0]) << 24) | (size_t(p[1]) << 16) | (size_t(p[2]) << 8) | p[3];
  SECTION("of the image data chunk") {
    std::string bad = png;
    bad[idat + 8 + idat_length] ^= 0x01;  // the first byte of IDAT's CRC
    const Decoded decoded = Decode(bad);
    CHECK(decoded.status.code() == StatusCode::kDataLoss);
    CHECK(decoded.status.message() == "img: corrupt PNG: IDAT: CRC error");
  }
  SECTION("of the image data, with the data changed") {
    std::string bad = png;
    bad[idat + 8 + idat_length / 2] ^= 0x01;
    const Decoded decoded = Decode(bad);
    CHECK(decoded.status.code() == StatusCode::kDataLoss);
    CHECK(Contains(decoded.status.message(), "img: corrupt PNG: IDAT: "));
  }
  SECTION("in the header") {
    std::string bad = png;
    bad[8 + 8 + 3] ^= 0x02;  // width 32 -> 34, same CRC
    const Decoded decoded = Decode(bad);
    CHECK(decoded.status.code() == StatusCode::kDataLoss);
    CHECK(decoded.status.message() == "img: corrupt PNG: IHDR: CRC error");
  }
  SECTION("truncated") {
    const Decoded decoded = Decode(png.substr(0, png.size() - 30));
    CHECK(decoded.status.code() == StatusCode::kDataLoss);
    CHECK(Contains(decoded.status.message(), "img: corrupt PNG: "));
  }
}

TEST_CASE("a failed decode leaves the buffer usable for the next image") {
  PixelBuffer buffer;
  RgbImage image;
  const std::string bad = EncodePng(GradientImage(8, 8)).substr(0, 50);
  CHECK(!DecodeImage("bad", Bytes(bad), bad.size(), {}, 1.0, buffer, &image).ok());
  const std::string good = EncodePng(SolidImage(8, 8, {9, 8, 7}));
  REQUIRE(DecodeImage("good", Bytes(good), good.size(), {}, 1.0, buffer, &image).ok());
  CHECK(image.pixels[0] == 9);
  CHECK(image.pixels[8 * 8 * 3 - 1] == 7);

  // TurboJPEG keeps state across calls on one thread: a corrupt header must not poison
  // the next file.
  std::string bad_jpeg = EncodeJpeg(GradientImage(16, 16));
  const size_t dqt = FindJpegMarker(bad_jpeg, 0xdb);
  REQUIRE(dqt != std::string::npos);
  bad_jpeg[dqt + 2] = bad_jpeg[dqt + 3] = 0;
  for (int i = 0; i < 3; ++i) {
    CHECK(!Decode(bad_jpeg).status.ok());
    CHECK(!Decode(bad_jpeg.substr(0, 40)).status.ok());
    const Decoded decoded = Decode(EncodeJpeg(SolidImage(8, 8, {50, 60, 70})));
    REQUIRE(decoded.status.ok());
    CHECK(MaxError(decoded, SolidImage(8, 8, {50, 60, 70})) <= 3);
  }
}

}  // namespace
}  // namespace ember::daemon

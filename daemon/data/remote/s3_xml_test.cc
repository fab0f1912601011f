#include "daemon/data/remote/s3_xml.h"

#include <catch2/catch.hpp>

#include <string>

namespace ember::daemon {
namespace {

// Documents as S3 documents them (docs.aws.amazon.com, "Error responses", ListObjectsV2)
// and as radosgw sends them.
TEST_CASE("S3 error documents give their Code and Message") {
  auto error = ParseS3Error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>ExpiredToken</Code>"
      "<Message>The provided token has expired.</Message><RequestId>4442587FB7D0A2F9</RequestId>"
      "</Error>");
  REQUIRE(error.has_value());
  CHECK(error->code == "ExpiredToken");
  CHECK(error->message == "The provided token has expired.");
  error = ParseS3Error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NoSuchKey</Code><Message></Message>"
      "<BucketName>data</BucketName><RequestId>tx0</RequestId><HostId>x</HostId></Error>");
  REQUIRE(error.has_value());
  CHECK(error->code == "NoSuchKey");
  CHECK(error->message.empty());
  CHECK(ParseS3Error("<Error><Message>no code</Message></Error>") == std::nullopt);
  CHECK(ParseS3Error("<html><body>502 Bad Gateway</body></html>") == std::nullopt);
  CHECK(ParseS3Error("Service Unavailable") == std::nullopt);
  CHECK(ParseS3Error("") == std::nullopt);
  // No entity from a DTD is expanded: a document with one is not S3's.
  CHECK(ParseS3Error("<?xml version=\"1.0\"?><!DOCTYPE Error [<!ENTITY a \"aaaaaaaa\">]>"
                     "<Error><Code>&a;</Code></Error>") == std::nullopt);
}

TEST_CASE("ListObjectsV2 pages give keys, sizes, sub-prefixes and the continuation") {
  auto page = ParseListObjectsV2(
      "listing s3://data/pre/",
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult "
      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>data</Name><Prefix>pre/</Prefix>"
      "<MaxKeys>2</MaxKeys><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>"
      "<CommonPrefixes><Prefix>pre/sub/</Prefix></CommonPrefixes>"
      "<Contents><Key>pre/a &amp; b.tar</Key><ETag>&quot;18b7&quot;</ETag><Size>3</Size></Contents>"
      "<Contents><Key>pre/c.tar</Key><Size>12345678901</Size></Contents>"
      "<NextContinuationToken>pre/c.tar</NextContinuationToken><KeyCount>2</KeyCount>"
      "</ListBucketResult>");
  REQUIRE(page.ok());
  REQUIRE(page->objects.size() == 2);
  CHECK(page->objects[0].key == "pre/a & b.tar");
  CHECK(page->objects[0].size == 3);
  CHECK(page->objects[1].size == 12345678901ull);
  CHECK(page->prefixes == std::vector<std::string>{"pre/sub/"});
  CHECK(page->truncated);
  CHECK(page->next_token == "pre/c.tar");

  page = ParseListObjectsV2("l", "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
  REQUIRE(page.ok());
  CHECK(page->objects.empty());
  CHECK_FALSE(page->truncated);

  CHECK(ParseListObjectsV2("l", "<Error><Code>AccessDenied</Code></Error>").status().message() ==
        "l: the listing's document is <Error>, not <ListBucketResult>");
  CHECK(ParseListObjectsV2("l", "<ListBucketResult><Contents>").status().message() ==
        "l: the listing is not well-formed XML");
  CHECK(ParseListObjectsV2("l", "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size>"
                                "</Contents></ListBucketResult>")
            .status()
            .code() == StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ember::daemon

#include "daemon/data/remote/s3_xml.h"

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <charconv>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>

namespace ember::daemon {
namespace {

struct DocFree {
  void operator()(xmlDoc* doc) const { xmlFreeDoc(doc); }
};
using Doc = std::unique_ptr<xmlDoc, DocFree>;

// `body` as a document: no network, no entities substituted, no DTD loaded, nothing
// printed; null if it is not well-formed XML or declares a DTD.
Doc Parse(const std::string& body) {
  static std::once_flag once;
  std::call_once(once, [] { xmlInitParser(); });  // before threads parse
  if (body.empty() || body.size() > INT_MAX) return nullptr;
  Doc doc(xmlReadMemory(body.data(), static_cast<int>(body.size()), "s3.xml", nullptr,
                        XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
  // S3 sends no DTD; one could only declare entities to expand.
  if (doc != nullptr && doc->intSubset != nullptr) return nullptr;
  return doc;
}

bool Named(const xmlNode* node, const char* name) {
  return node != nullptr && node->type == XML_ELEMENT_NODE &&
         std::strcmp(reinterpret_cast<const char*>(node->name), name) == 0;
}

// The first child element of `parent` named `name`, or null.
const xmlNode* Child(const xmlNode* parent, const char* name) {
  for (const xmlNode* node = parent->children; node != nullptr; node = node->next)
    if (Named(node, name)) return node;
  return nullptr;
}

std::string Text(const xmlNode* node) {
  if (node == nullptr) return "";
  xmlChar* content = xmlNodeGetContent(node);
  if (content == nullptr) return "";
  std::string text(reinterpret_cast<const char*>(content));
  xmlFree(content);
  return text;
}

}  // namespace

std::optional<S3Error> ParseS3Error(const std::string& body) {
  const Doc doc = Parse(body);
  if (doc == nullptr) return std::nullopt;
  const xmlNode* root = xmlDocGetRootElement(doc.get());
  if (!Named(root, "Error")) return std::nullopt;
  S3Error error{Text(Child(root, "Code")), Text(Child(root, "Message"))};
  if (error.code.empty()) return std::nullopt;
  return error;
}

Result<S3ListPage> ParseListObjectsV2(const std::string& what, const std::string& body) {
  const Doc doc = Parse(body);
  if (doc == nullptr) return DataLoss(what + ": the listing is not well-formed XML");
  const xmlNode* root = xmlDocGetRootElement(doc.get());
  if (!Named(root, "ListBucketResult")) {
    return DataLoss(what + ": the listing's document is <" +
                    (root != nullptr ? reinterpret_cast<const char*>(root->name) : "") +
                    ">, not <ListBucketResult>");
  }
  S3ListPage page;
  page.truncated = Text(Child(root, "IsTruncated")) == "true";
  page.next_token = Text(Child(root, "NextContinuationToken"));
  for (const xmlNode* node = root->children; node != nullptr; node = node->next) {
    if (Named(node, "Contents")) {
      const xmlNode* key = Child(node, "Key");
      const std::string size_text = Text(Child(node, "Size"));
      S3Object object{Text(key), 0};
      const char* end = size_text.data() + size_text.size();
      const auto [at, error] = std::from_chars(size_text.data(), end, object.size);
      if (key == nullptr || object.key.empty() || error != std::errc() || at != end) {
        return DataLoss(what + ": an object of the listing without a Key or a Size ('" +
                        object.key + "', size '" + size_text + "')");
      }
      page.objects.push_back(std::move(object));
    } else if (Named(node, "CommonPrefixes")) {
      page.prefixes.push_back(Text(Child(node, "Prefix")));
    }
  }
  return page;
}

}  // namespace ember::daemon

#include "daemon/data/remote/s3_config.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace ember::daemon {
namespace {

using Section = std::map<std::string, std::string>;

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// One of the two AWS files: where it is (empty: ~ could not be expanded) and what it holds.
struct IniFile {
  std::string path;
  std::string shown;  // for messages: the path, with "(absent)" or "(HOME is unset)"
  AwsIni ini;
};

// `variable`'s path, else ~/`default_name`.
Result<IniFile> ReadIni(Env& env, const EnvLookup& var, const char* variable,
                        const std::string& default_name) {
  IniFile file;
  std::string path = var(variable).value_or("~/" + default_name);
  if (StartsWith(path, "~/")) {
    const std::optional<std::string> home = var("HOME");
    if (!home) {
      file.shown = path + " (HOME is unset)";
      return file;
    }
    path = *home + path.substr(1);
  }
  file.path = path;
  if (!env.FileExists(path)) {
    file.shown = path + " (absent)";
    return file;
  }
  file.shown = path;
  Result<std::string> text = env.ReadFile(path);
  if (!text.ok()) return text.status().WithContext(std::string("AWS file (") + variable + ")");
  EMBER_ASSIGN_OR_RETURN(file.ini, ParseAwsIni(path, *text));
  return file;
}

const Section* Find(const AwsIni& ini, const std::string& name) {
  const auto it = ini.find(name);
  return it == ini.end() ? nullptr : &it->second;
}

std::optional<std::string> Get(const Section* section, const std::string& key) {
  if (section == nullptr) return std::nullopt;
  const auto it = section->find(key);
  if (it == section->end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// What a profile uses instead of static keys, if anything emberd knows of.
std::string OtherProvider(const Section* profile) {
  for (const char* key : {"role_arn", "credential_process", "sso_session", "sso_start_url",
                          "web_identity_token_file", "credential_source"}) {
    if (Get(profile, key)) return key;
  }
  return "";
}

// http(s)://HOST[:PORT] from what `from` gave, without a trailing '/'.
Result<std::string> NormalizeEndpoint(const std::string& value, const std::string& from) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument(from + ": '" + value + "' " + why);
  };
  const size_t scheme_end = value.find("://");
  if (scheme_end == std::string::npos) return bad("is not an http(s):// URL");
  const std::string scheme = Lower(value.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https") return bad("is not an http(s):// URL");
  const std::string rest = value.substr(scheme_end + 3);
  const size_t path = rest.find_first_of("/?#");
  const std::string authority = rest.substr(0, path);
  if (path != std::string::npos && rest.substr(path) != "/") {
    return bad("has a path, query or fragment (an S3 endpoint is http(s)://HOST[:PORT]; "
               "buckets are addressed path-style under it)");
  }
  if (authority.empty()) return bad("names no host");
  if (authority.find('@') != std::string::npos) {  // not quoted: it may hold a password
    return InvalidArgument(from + ": the endpoint holds a user name (credentials come from "
                           "the AWS variables or files, never from the URL)");
  }
  if (authority.find_first_of(" \t") != std::string::npos) return bad("holds blanks");
  return scheme + "://" + authority;
}

bool ValidRegion(const std::string& region) {
  return !region.empty() && region.size() <= 64 &&
         std::all_of(region.begin(), region.end(), [](unsigned char c) {
           return std::isalnum(c) || c == '-' || c == '_' || c == '.';
         });
}

bool HasControl(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

}  // namespace

std::optional<std::string> ProcessEnvironment(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

Result<AwsIni> ParseAwsIni(const std::string& file, const std::string& text) {
  AwsIni ini;
  Section* section = nullptr;
  std::string section_name;
  std::string parent;  // a key with no value: indented lines under it are its settings
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    // Messages never quote a line: it may hold a secret.
    auto bad = [&](const std::string& what) {
      return InvalidArgument(file + ":" + std::to_string(number) + ": " + what);
    };
    const std::string trimmed = Trim(line);
    if (trimmed.empty() || trimmed[0] == '#' || trimmed[0] == ';') continue;
    if (trimmed[0] == '[') {
      if (trimmed.back() != ']') return bad("a section header that does not end with ']'");
      section_name = Trim(trimmed.substr(1, trimmed.size() - 2));
      if (section_name.empty()) return bad("a section without a name");
      if (ini.count(section_name) != 0) return bad("section [" + section_name + "] again");
      section = &ini[section_name];
      parent.clear();
      continue;
    }
    if (section == nullptr) return bad("a setting before any [section]");
    const size_t eq = trimmed.find('=');
    if (eq == std::string::npos) return bad("not a section, a comment nor NAME = VALUE");
    std::string key = Lower(Trim(trimmed.substr(0, eq)));
    const std::string value = Trim(trimmed.substr(eq + 1));
    if (key.empty()) return bad("a setting without a name");
    if (line[0] == ' ' || line[0] == '\t') {
      if (parent.empty()) {
        return bad("an indented setting that is not under a 'NAME =' line with no value");
      }
      key = parent + "." + key;
    } else {
      parent = value.empty() ? key : "";
    }
    if (section->count(key) != 0) return bad("'" + key + "' again in [" + section_name + "]");
    (*section)[key] = value;
  }
  return ini;
}

Result<S3Config> LoadS3Config(Env& env, const EnvLookup& lookup) {
  const EnvLookup var = [&lookup](const std::string& name) -> std::optional<std::string> {
    std::optional<std::string> value = lookup(name);
    if (value && value->empty()) return std::nullopt;
    return value;
  };
  S3Config config;
  const std::optional<std::string> named_profile = var("AWS_PROFILE");
  const std::string profile = named_profile.value_or("default");
  EMBER_ASSIGN_OR_RETURN(IniFile credentials_file,
                         ReadIni(env, var, "AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"));
  EMBER_ASSIGN_OR_RETURN(IniFile config_file, ReadIni(env, var, "AWS_CONFIG_FILE", ".aws/config"));
  const Section* in_credentials = Find(credentials_file.ini, profile);
  const Section* in_config = Find(config_file.ini, "profile " + profile);
  if (in_config == nullptr && profile == "default") in_config = Find(config_file.ini, "default");
  if (named_profile && in_credentials == nullptr && in_config == nullptr) {
    return InvalidArgument("AWS_PROFILE names profile '" + profile + "', which neither " +
                           credentials_file.shown + " nor " + config_file.shown + " has");
  }
  const std::string profile_text = "profile '" + profile + "'";

  // Credentials: the variables, then the profile in either file.
  const std::optional<std::string> key = var("AWS_ACCESS_KEY_ID");
  const std::optional<std::string> secret = var("AWS_SECRET_ACCESS_KEY");
  if (key || secret) {
    if (!key || !secret) {
      return InvalidArgument(std::string(key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") +
                             " is set but " + (key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") +
                             " is not: S3 needs both");
    }
    config.access_key = *key;
    config.secret_key = *secret;
    config.session_token = var("AWS_SESSION_TOKEN").value_or("");
    config.credentials_from = config.session_token.empty()
                                  ? "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
                                  : "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN";
  } else {
    for (const auto& [section, file] :
         {std::make_pair(in_credentials, &credentials_file), std::make_pair(in_config, &config_file)}) {
      const std::optional<std::string> id = Get(section, "aws_access_key_id");
      const std::optional<std::string> secret_key = Get(section, "aws_secret_access_key");
      if (!id && !secret_key) continue;
      if (!id || !secret_key) {
        return InvalidArgument(file->path + ": " + profile_text + " has " +
                               (id ? "aws_access_key_id but no aws_secret_access_key"
                                   : "aws_secret_access_key but no aws_access_key_id"));
      }
      config.access_key = *id;
      config.secret_key = *secret_key;
      config.session_token =
          Get(section, "aws_session_token").value_or(Get(section, "aws_security_token").value_or(""));
      config.credentials_from = profile_text + " of " + file->path;
      break;
    }
  }
  if (HasControl(config.access_key) || HasControl(config.secret_key) ||
      HasControl(config.session_token)) {
    return InvalidArgument("the S3 credentials from " + config.credentials_from +
                           " hold a control character (a stray newline?)");
  }

  // Region: the variables, then the config file's profile.
  if (std::optional<std::string> region = var("AWS_REGION")) {
    config.region = *region;
    config.region_from = "AWS_REGION";
  } else if ((region = var("AWS_DEFAULT_REGION"))) {
    config.region = *region;
    config.region_from = "AWS_DEFAULT_REGION";
  } else if ((region = Get(in_config, "region"))) {
    config.region = *region;
    config.region_from = profile_text + " of " + config_file.path;
  } else {
    config.region = "us-east-1";
    config.region_from = "the default";
  }
  if (!ValidRegion(config.region)) {
    return InvalidArgument(config.region_from + ": region '" + config.region +
                           "' is not a region name (letters, digits, '-', '_', '.')");
  }

  // Endpoint: the variables, then the config file's profile (its services section first).
  const bool ignore_configured =
      Lower(var("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
                .value_or(Get(in_config, "ignore_configured_endpoint_urls").value_or(""))) == "true";
  std::optional<std::string> endpoint;
  if (!ignore_configured) {
    for (const char* variable : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
      if ((endpoint = var(variable))) {
        config.endpoint_from = variable;
        break;
      }
    }
    if (!endpoint) {
      if (const std::optional<std::string> services = Get(in_config, "services")) {
        const std::string name = "services " + *services;
        if ((endpoint = Get(Find(config_file.ini, name), "s3.endpoint_url")))
          config.endpoint_from = "[" + name + "] s3 endpoint_url of " + config_file.path;
      }
    }
    if (!endpoint && (endpoint = Get(in_config, "endpoint_url")))
      config.endpoint_from = profile_text + " of " + config_file.path + ": endpoint_url";
  }
  if (endpoint) {
    EMBER_ASSIGN_OR_RETURN(config.endpoint, NormalizeEndpoint(*endpoint, config.endpoint_from));
  } else {
    config.endpoint = "https://s3." + config.region + ".amazonaws.com" +
                      (StartsWith(config.region, "cn-") ? ".cn" : "");
    config.endpoint_from = "the default for region " + config.region;
  }

  if (config.access_key.empty()) {
    std::string message =
        "emberd has no S3 credentials: it looked at AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (unset), and for " + profile_text + " (AWS_PROFILE" +
        (named_profile ? ")" : " unset)") + " at " + credentials_file.shown +
        " (AWS_SHARED_CREDENTIALS_FILE) and " + config_file.shown + " (AWS_CONFIG_FILE)";
    for (const Section* section : {in_credentials, in_config}) {
      const std::string other = OtherProvider(section);
      if (!other.empty()) {
        message += "; " + profile_text + " has " + other +
                   ", which emberd does not use (static keys only)";
        break;
      }
    }
    for (const char* variable : {"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"}) {
      if (var(variable)) {
        message += std::string("; ") + variable +
                   " is set, which emberd does not use (static keys only)";
      }
    }
    config.unusable = FailedPrecondition(
        message + ". Set them in emberd's environment or files and restart it (it reads "
        "them once, at start)");
  }
  return config;
}

bool IsS3Path(const std::string& path) { return StartsWith(path, "s3://"); }

bool UsesS3Credentials(const std::string& path) {
  const std::string head = Lower(path.substr(0, 12));
  return StartsWith(head, "s3://") || StartsWith(head, "s3+");
}

Result<S3Location> ParseS3Path(const std::string& path) {
  if (!IsS3Path(path)) return InvalidArgument("'" + path + "' is not an s3:// URL");
  const std::string rest = path.substr(5);
  const size_t slash = rest.find('/');
  S3Location location{rest.substr(0, slash), slash == std::string::npos ? "" : rest.substr(slash + 1)};
  const bool valid_bucket =
      !location.bucket.empty() && location.bucket.size() <= 255 &&
      std::all_of(location.bucket.begin(), location.bucket.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '.' || c == '-' || c == '_';
      });
  if (!valid_bucket) {
    return InvalidArgument(path + ": '" + location.bucket +
                           "' is not a bucket name (s3://BUCKET/KEY; a bucket is of letters, "
                           "digits, '.', '-' and '_')");
  }
  return location;
}

bool IsS3ObjectUrl(const std::string& url) {
  return StartsWith(url, "s3+http://") || StartsWith(url, "s3+https://");
}

std::string S3UriEncode(const std::string& text, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string S3ObjectUrl(const S3Config& config, const S3Location& location) {
  return S3ObjectUrl(config.endpoint, location);
}

std::string S3ObjectUrl(const std::string& endpoint, const S3Location& location) {
  const bool slash = !endpoint.empty() && endpoint.back() == '/';
  return "s3+" + endpoint.substr(0, endpoint.size() - slash) + "/" + location.bucket + "/" +
         S3UriEncode(location.key, true);
}

std::optional<S3Location> S3LocationOf(const std::string& url) {
  if (!IsS3ObjectUrl(url)) return std::nullopt;
  const size_t host = url.find("://") + 3;
  const size_t path = url.find('/', host);
  if (path == std::string::npos) return std::nullopt;
  const size_t end = url.find_first_of("?#", path);
  const std::string object = url.substr(path + 1, end == std::string::npos ? end : end - path - 1);
  const size_t slash = object.find('/');
  S3Location location{object.substr(0, slash), ""};
  if (slash == std::string::npos) return location;
  const std::string key = object.substr(slash + 1);
  for (size_t i = 0; i < key.size(); ++i) {
    if (key[i] == '%' && i + 2 < key.size() && std::isxdigit(static_cast<unsigned char>(key[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(key[i + 2]))) {
      location.key += static_cast<char>(std::stoi(key.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      location.key += key[i];
    }
  }
  return location;
}

}  // namespace ember::daemon

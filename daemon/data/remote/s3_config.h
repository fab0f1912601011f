// Where emberd reads S3 from, and with which credentials: found once, at start, the way
// the AWS SDKs and CLI find them.
//
//   credentials  AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN); else
//                the profile's aws_access_key_id, aws_secret_access_key (aws_session_token)
//                in the shared credentials file, else in the config file. Static keys only:
//                a profile that names a role, SSO, a process or a web identity instead is
//                reported as such (emberd never asks an instance's metadata service).
//   profile      AWS_PROFILE, else "default": section [NAME] of the credentials file,
//                [profile NAME] (or [default]) of the config file. A profile that
//                AWS_PROFILE names must exist in one of them.
//   files        AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials; AWS_CONFIG_FILE,
//                else ~/.aws/config ("~/" is $HOME); a missing file is an empty one
//   region       AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else us-east-1
//   endpoint     AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's services section's
//                `s3 = / endpoint_url = ...`, the profile's `endpoint_url` (none of these
//                if AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true), else
//                https://s3.REGION.amazonaws.com
// Empty variables count as unset. Objects are addressed path-style at the endpoint
// (S3ObjectUrl). The secret key and the session token never appear in a message, a log
// line or a URL: requests carry them to libcurl's own SigV4 signing (http_fetch.h).
#ifndef EMBER_DAEMON_DATA_REMOTE_S3_CONFIG_H_
#define EMBER_DAEMON_DATA_REMOTE_S3_CONFIG_H_

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "common/env.h"
#include "ember/status.h"

namespace ember::daemon {

struct S3Config {
  std::string endpoint;  // "http(s)://HOST[:PORT]": no path, no trailing '/'
  std::string region;    // what requests are signed for ("aws:amz:REGION:s3")
  std::string access_key;
  std::string secret_key;     // never shown
  std::string session_token;  // never shown; empty if none
  // Where each came from, for messages: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
  // "profile 'dev' of /home/u/.aws/credentials", "AWS_REGION", "the default".
  std::string credentials_from;
  std::string endpoint_from;
  std::string region_from;
  // Why s3:// paths cannot be read with this configuration, OK when they can:
  // kFailedPrecondition naming the variables and files looked at when no credentials
  // were found (or why LoadS3Config failed, where the daemon keeps that instead).
  Status unusable;
};

// A variable of the process's environment, nullopt if unset (std::getenv unless a test
// injects another).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
std::optional<std::string> ProcessEnvironment(const std::string& name);

// Reads the configuration as the header says, the files through `env`. A configuration
// without credentials is returned (endpoint and region set) with `unusable` saying what
// was looked at. Errors (kInvalidArgument, naming the file and line or the variable):
// a file that is not an AWS INI file (a line outside a section, one without '=', a
// section or key twice), a profile that AWS_PROFILE names but no file has, half a key
// pair, an endpoint that is not http(s)://HOST[:PORT], a region not of [a-z0-9-];
// a file that cannot be read.
Result<S3Config> LoadS3Config(Env& env, const EnvLookup& lookup = ProcessEnvironment);

// An AWS INI file: section -> key -> value; keys are lowercased; an indented
// "  sub = value" under "key =" (the config file's nested settings) is key "key.sub".
// Lines starting with '#' or ';' are comments. kInvalidArgument "FILE:LINE: ..." as above.
using AwsIni = std::map<std::string, std::map<std::string, std::string>>;
Result<AwsIni> ParseAwsIni(const std::string& file, const std::string& text);

// s3://BUCKET/KEY: the bucket and the key (empty for s3://BUCKET or s3://BUCKET/).
struct S3Location {
  std::string bucket;
  std::string key;
};

// Whether `path` is an s3:// URL.
bool IsS3Path(const std::string& path);

// Whether reading `path` would use emberd's S3 credentials: an s3:// URL or the internal
// s3+http(s):// form, in any letter case.
bool UsesS3Credentials(const std::string& path);

// The bucket and key of an s3:// URL. kInvalidArgument naming the path if it is not
// one, or its bucket name is empty or not of [A-Za-z0-9._-] (at most 255 bytes).
Result<S3Location> ParseS3Path(const std::string& path);

// Whether `url` is the internal form of an S3 object, s3+http(s)://HOST[:PORT]/BUCKET/KEY,
// which HttpFetcher signs (its options' S3Config) and fetches at http(s)://... .
bool IsS3ObjectUrl(const std::string& url);

// "s3+" + endpoint + "/" + bucket + "/" + key, the key URI-encoded as SigV4 wants it
// (every byte but A-Z a-z 0-9 - . _ ~ and '/' as %XX). Shard caches key on this string,
// so another endpoint makes another object.
std::string S3ObjectUrl(const S3Config& config, const S3Location& location);
// The same at `endpoint` ("http(s)://HOST[:PORT]", a trailing '/' dropped) instead of the
// configuration's: a dataset's own endpoint.
std::string S3ObjectUrl(const std::string& endpoint, const S3Location& location);

// The bucket and key (decoded) of an internal URL; nullopt if `url` is not one.
std::optional<S3Location> S3LocationOf(const std::string& url);

// SigV4's URI encoding of `text` (RFC 3986 unreserved bytes kept; '/' kept if `keep_slash`).
std::string S3UriEncode(const std::string& text, bool keep_slash);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_REMOTE_S3_CONFIG_H_

#include "daemon/data/remote/s3_config.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "common/mem_env.h"

namespace ember::daemon {
namespace {

using Vars = std::map<std::string, std::string>;

EnvLookup LookupIn(const Vars& vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

S3Config MustLoad(MemEnv& env, const Vars& vars) {
  Result<S3Config> config = LoadS3Config(env, LookupIn(vars));
  INFO((config.ok() ? std::string() : config.status().ToString()));
  REQUIRE(config.ok());
  return *config;
}

Status LoadError(MemEnv& env, const Vars& vars) {
  Result<S3Config> config = LoadS3Config(env, LookupIn(vars));
  REQUIRE_FALSE(config.ok());
  return config.status();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("credentials, region and endpoint from the environment") {
  MemEnv env;
  const S3Config config = MustLoad(env, {{"AWS_ACCESS_KEY_ID", "AKID"},
                                         {"AWS_SECRET_ACCESS_KEY", "s3cr3t"},
                                         {"AWS_SESSION_TOKEN", "t0ken"},
                                         {"AWS_REGION", "eu-west-3"},
                                         {"AWS_ENDPOINT_URL_S3", "HTTP://127.0.0.1:7480/"}});
  CHECK(config.unusable.ok());
  CHECK(config.access_key == "AKID");
  CHECK(config.secret_key == "s3cr3t");
  CHECK(config.session_token == "t0ken");
  CHECK(config.credentials_from == "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN");
  CHECK(config.region == "eu-west-3");
  CHECK(config.region_from == "AWS_REGION");
  CHECK(config.endpoint == "http://127.0.0.1:7480");
  CHECK(config.endpoint_from == "AWS_ENDPOINT_URL_S3");

  // Defaults: us-east-1 and AWS's own endpoint for the region; empty variables are unset.
  const S3Config plain = MustLoad(env, {{"AWS_ACCESS_KEY_ID", "AKID"},
                                        {"AWS_SECRET_ACCESS_KEY", "s3cr3t"},
                                        {"AWS_SESSION_TOKEN", ""},
                                        {"AWS_REGION", ""}});
  CHECK(plain.session_token.empty());
  CHECK(plain.credentials_from == "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  CHECK(plain.region == "us-east-1");
  CHECK(plain.region_from == "the default");
  CHECK(plain.endpoint == "https://s3.us-east-1.amazonaws.com");
  CHECK(MustLoad(env, {{"AWS_DEFAULT_REGION", "cn-north-1"}}).endpoint ==
        "https://s3.cn-north-1.amazonaws.com.cn");
}

TEST_CASE("a profile's keys from the credentials file, its region and endpoint from the config file") {
  MemEnv env;
  env.AddFile("/home/u/.aws/credentials",
              "# keys\n[default]\naws_access_key_id = DEFAULTID\naws_secret_access_key = defaultsecret\n"
              "\n[dev]\nAWS_ACCESS_KEY_ID=DEVID\naws_secret_access_key=devsecret\n"
              "aws_session_token = devtoken\n");
  env.AddFile("/home/u/.aws/config",
              "[default]\nregion = us-west-2\n\n"
              "[profile dev]\nregion = eu-central-1\nservices = local-ceph\n"
              "endpoint_url = https://global.example\n\n"
              "[services local-ceph]\ns3 =\n  endpoint_url = http://ceph.local:8080\n"
              "  addressing_style = path\n; the end\n");
  const S3Config by_default = MustLoad(env, {{"HOME", "/home/u"}});
  CHECK(by_default.unusable.ok());
  CHECK(by_default.access_key == "DEFAULTID");
  CHECK(by_default.secret_key == "defaultsecret");
  CHECK(by_default.credentials_from == "profile 'default' of /home/u/.aws/credentials");
  CHECK(by_default.region == "us-west-2");
  CHECK(by_default.region_from == "profile 'default' of /home/u/.aws/config");
  CHECK(by_default.endpoint == "https://s3.us-west-2.amazonaws.com");

  const S3Config dev = MustLoad(env, {{"HOME", "/home/u"}, {"AWS_PROFILE", "dev"}});
  CHECK(dev.access_key == "DEVID");
  CHECK(dev.session_token == "devtoken");
  CHECK(dev.credentials_from == "profile 'dev' of /home/u/.aws/credentials");
  CHECK(dev.region == "eu-central-1");
  CHECK(dev.endpoint == "http://ceph.local:8080");  // the services section before endpoint_url
  CHECK(dev.endpoint_from == "[services local-ceph] s3 endpoint_url of /home/u/.aws/config");

  // Files named by the variables; keys in the config file when the credentials file has none.
  env.AddFile("/etc/ember/aws-config",
              "[profile train]\naws_access_key_id = TRAINID\naws_secret_access_key = trainsecret\n"
              "endpoint_url = http://10.0.0.5:7480\n");
  const S3Config train = MustLoad(env, {{"AWS_CONFIG_FILE", "/etc/ember/aws-config"},
                                        {"AWS_SHARED_CREDENTIALS_FILE", "/nowhere/credentials"},
                                        {"AWS_PROFILE", "train"}});
  CHECK(train.access_key == "TRAINID");
  CHECK(train.credentials_from == "profile 'train' of /etc/ember/aws-config");
  CHECK(train.endpoint == "http://10.0.0.5:7480");
}

TEST_CASE("the variables come before the files, as in the AWS SDKs") {
  MemEnv env;
  env.AddFile("/h/.aws/credentials", "[default]\naws_access_key_id = FILEID\naws_secret_access_key = filesecret\n");
  env.AddFile("/h/.aws/config",
              "[default]\nregion = us-west-2\nendpoint_url = http://from-file:1\n"
              "aws_access_key_id = CONFIGID\naws_secret_access_key = configsecret\n");
  Vars vars = {{"HOME", "/h"}};
  CHECK(MustLoad(env, vars).access_key == "FILEID");  // credentials file before config file
  vars["AWS_ACCESS_KEY_ID"] = "ENVID";
  vars["AWS_SECRET_ACCESS_KEY"] = "envsecret";
  vars["AWS_DEFAULT_REGION"] = "ap-south-1";
  vars["AWS_ENDPOINT_URL"] = "http://from-env:2";
  S3Config config = MustLoad(env, vars);
  CHECK(config.access_key == "ENVID");
  CHECK(config.region == "ap-south-1");
  CHECK(config.region_from == "AWS_DEFAULT_REGION");
  CHECK(config.endpoint == "http://from-env:2");
  CHECK(config.endpoint_from == "AWS_ENDPOINT_URL");
  vars["AWS_REGION"] = "sa-east-1";
  vars["AWS_ENDPOINT_URL_S3"] = "https://from-env-s3";
  config = MustLoad(env, vars);
  CHECK(config.region == "sa-east-1");
  CHECK(config.endpoint == "https://from-env-s3");
  vars["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"] = "true";
  CHECK(MustLoad(env, vars).endpoint == "https://s3.sa-east-1.amazonaws.com");
}

TEST_CASE("no credentials: usable for nothing, saying what was looked at") {
  MemEnv env;
  S3Config config = MustLoad(env, {{"HOME", "/home/u"}});
  CHECK(config.access_key.empty());
  REQUIRE(config.unusable.code() == StatusCode::kFailedPrecondition);
  CHECK(config.unusable.message() ==
        "emberd has no S3 credentials: it looked at AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
        "(unset), and for profile 'default' (AWS_PROFILE unset) at /home/u/.aws/credentials "
        "(absent) (AWS_SHARED_CREDENTIALS_FILE) and /home/u/.aws/config (absent) "
        "(AWS_CONFIG_FILE). Set them in emberd's environment or files and restart it (it reads "
        "them once, at start)");
  CHECK(config.endpoint == "https://s3.us-east-1.amazonaws.com");

  // A profile of another kind of credentials, and no HOME.
  env.AddFile("/etc/aws/config",
              "[profile ml]\nrole_arn = arn:aws:iam::1:role/x\nsource_profile = base\n");
  config = MustLoad(env, {{"AWS_CONFIG_FILE", "/etc/aws/config"},
                          {"AWS_PROFILE", "ml"},
                          {"AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"}});
  CHECK(Contains(config.unusable.message(), "profile 'ml' (AWS_PROFILE) at ~/.aws/credentials "
                                            "(HOME is unset) (AWS_SHARED_CREDENTIALS_FILE) and "
                                            "/etc/aws/config (AWS_CONFIG_FILE)"));
  CHECK(Contains(config.unusable.message(),
                 "profile 'ml' has role_arn, which emberd does not use (static keys only)"));
  CHECK(Contains(config.unusable.message(),
                 "AWS_WEB_IDENTITY_TOKEN_FILE is set, which emberd does not use"));
}

TEST_CASE("bad files and values are refused naming the file and line or the variable, never a secret") {
  MemEnv env;
  auto file_error = [&](const std::string& text) {
    env.AddFile("/c", text);
    const Status status = LoadError(env, {{"AWS_SHARED_CREDENTIALS_FILE", "/c"}});
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK_FALSE(Contains(status.message(), "hush"));
    return status.message();
  };
  CHECK(file_error("aws_secret_access_key = hush\n") == "/c:1: a setting before any [section]");
  CHECK(file_error("[default]\naws_secret_access_key hush\n") ==
        "/c:2: not a section, a comment nor NAME = VALUE");
  CHECK(file_error("[default]\n[default]\n") == "/c:2: section [default] again");
  CHECK(file_error("[a]\nx = 1\nX = hush\n") == "/c:3: 'x' again in [a]");
  CHECK(file_error("[a\n") == "/c:1: a section header that does not end with ']'");
  CHECK(file_error("[a]\nx = 1\n  y = hush\n") ==
        "/c:3: an indented setting that is not under a 'NAME =' line with no value");
  CHECK(file_error("[default]\naws_access_key_id = ID\n") ==
        "/c: profile 'default' has aws_access_key_id but no aws_secret_access_key");

  CHECK(LoadError(env, {{"AWS_PROFILE", "nope"}, {"HOME", "/h"}}).message() ==
        "AWS_PROFILE names profile 'nope', which neither /h/.aws/credentials (absent) nor "
        "/h/.aws/config (absent) has");
  CHECK(LoadError(env, {{"AWS_SECRET_ACCESS_KEY", "hush"}}).message() ==
        "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not: S3 needs both");
  const Vars keys = {{"AWS_ACCESS_KEY_ID", "ID"}, {"AWS_SECRET_ACCESS_KEY", "hush"}};
  auto with = [&](const std::string& name, const std::string& value) {
    Vars vars = keys;
    vars[name] = value;
    const Status status = LoadError(env, vars);
    CHECK_FALSE(Contains(status.message(), "hush"));
    return status.message();
  };
  CHECK(with("AWS_ENDPOINT_URL", "ftp://x") == "AWS_ENDPOINT_URL: 'ftp://x' is not an http(s):// URL");
  CHECK(Contains(with("AWS_ENDPOINT_URL_S3", "http://h:1/prefix"), "has a path"));
  CHECK(with("AWS_ENDPOINT_URL_S3", "http://user:hush@h") ==
        "AWS_ENDPOINT_URL_S3: the endpoint holds a user name (credentials come from the AWS "
        "variables or files, never from the URL)");
  CHECK(with("AWS_REGION", "us east:1") ==
        "AWS_REGION: region 'us east:1' is not a region name (letters, digits, '-', '_', '.')");
  CHECK(with("AWS_SESSION_TOKEN", "a\nb") ==
        "the S3 credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN "
        "hold a control character (a stray newline?)");
}

TEST_CASE("s3:// paths and their internal URLs") {
  auto location = ParseS3Path("s3://data/train/shard-000.tar");
  REQUIRE(location.ok());
  CHECK(location->bucket == "data");
  CHECK(location->key == "train/shard-000.tar");
  location = ParseS3Path("s3://data");
  REQUIRE(location.ok());
  CHECK(location->key.empty());
  CHECK(ParseS3Path("s3:///key").status().message() ==
        "s3:///key: '' is not a bucket name (s3://BUCKET/KEY; a bucket is of letters, digits, "
        "'.', '-' and '_')");
  CHECK(ParseS3Path("s3://a?b/key").status().code() == StatusCode::kInvalidArgument);

  S3Config config;
  config.endpoint = "http://127.0.0.1:7480";
  const std::string url = S3ObjectUrl(config, S3Location{"data", "a b/c+d%é~.tar"});
  CHECK(url == "s3+http://127.0.0.1:7480/data/a%20b/c%2Bd%25%C3%A9~.tar");
  CHECK(IsS3ObjectUrl(url));
  const std::optional<S3Location> back = S3LocationOf(url);
  REQUIRE(back.has_value());
  CHECK(back->bucket == "data");
  CHECK(back->key == "a b/c+d%é~.tar");
  CHECK_FALSE(S3LocationOf("http://127.0.0.1/data/x").has_value());

  CHECK(IsS3Path("s3://b/k"));
  CHECK_FALSE(IsS3Path("http://b/k"));
  for (const char* path : {"s3://b/k", "S3://b/k", "s3+http://h/b/k", "S3+HTTPS://h/b/k"})
    CHECK(UsesS3Credentials(path));
  for (const char* path : {"/data/s3", "http://s3.amazonaws.com/b/k", "s3", "gs://b/k"})
    CHECK_FALSE(UsesS3Credentials(path));
}

}  // namespace
}  // namespace ember::daemon

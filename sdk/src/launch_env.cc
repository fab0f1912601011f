#include "ember/launch_env.h"

#include <cstdlib>
#include <exception>

namespace ember {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

}  // namespace

Result<int> EnvInt(const char* name, int fallback, int min) {
  const std::string text = EnvOr(name, std::to_string(fallback));
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < min) {
    return InvalidArgument(std::string(name) + "='" + text + "' is not an integer >= " +
                           std::to_string(min));
  }
  return value;
}

Result<LaunchEnv> ReadLaunchEnv(const std::string& default_job) {
  LaunchEnv env;
  EMBER_ASSIGN_OR_RETURN(env.rank, EnvInt("EMBER_RANK", 0, 0));
  EMBER_ASSIGN_OR_RETURN(env.world_size, EnvInt("EMBER_WORLD_SIZE", 1, 1));
  if (env.rank >= env.world_size) {
    return InvalidArgument("EMBER_RANK='" + std::to_string(env.rank) +
                           "' is not below EMBER_WORLD_SIZE=" + std::to_string(env.world_size));
  }
  EMBER_ASSIGN_OR_RETURN(env.local_rank, EnvInt("EMBER_LOCAL_RANK", env.rank, 0));
  env.job = EnvOr("EMBER_JOB", default_job);
  return env;
}

}  // namespace ember

// Code run as another user: a forked child of the test that drops to a given uid, gid and
// groups (setresgid, setgroups, setresuid: a real second uid, as the kernel sees it) and
// runs a function there. For isolation tests, which run as root (CI does) and need
// clients of several users. The test process must not hold threads or Clients when it
// forks: every Client lives in a child.
#ifndef EMBER_TESTS_SUPPORT_AS_USER_H_
#define EMBER_TESTS_SUPPORT_AS_USER_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace ember::testing {

struct User {
  uid_t uid;
  gid_t gid;
  std::vector<gid_t> groups;  // supplementary
};

// Whether this process may become other users (root); tests skip, saying so, if not.
bool CanSwitchUsers();

// A child running `body` as `user`. `body` reports what it saw by returning a string
// (its result), and may call `checkpoint(text)` to tell the test something midway and
// wait for it to go on (Continue). The child ends when `body` returns.
class AsUser {
 public:
  using Checkpoint = std::function<void(const std::string& text)>;
  using Body = std::function<std::string(const Checkpoint& checkpoint)>;

  AsUser(const User& user, Body body);
  ~AsUser();  // kills the child if it still runs
  AsUser(const AsUser&) = delete;
  AsUser& operator=(const AsUser&) = delete;

  // The text of the child's next checkpoint, or of its result once it returned; throws
  // if neither comes within `timeout` or the child died without a word.
  std::string Next(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Lets the child go on from its checkpoint.
  void Continue();

 private:
  pid_t pid_ = -1;
  int from_child_ = -1;
  int to_child_ = -1;
};

// Runs `body` as `user` and returns its result (Next of an AsUser without checkpoints).
std::string RunAs(const User& user, const std::function<std::string()>& body);

}  // namespace ember::testing

#endif  // EMBER_TESTS_SUPPORT_AS_USER_H_

// Status and Result<T>: how Ember library code reports errors.
//
// A Status is a code plus a human-readable message that names what went wrong (the
// file, field or value). Each layer that passes an error up adds its own context with
// WithContext(), so a message reads outermost-first:
//   "dataset 'fmnist': images file /x/train-images-idx3-ubyte.gz: truncated at byte 1024"
// Exceptions are used only at boundaries (RPC adapters, CLI, the torch-facing SDK).
#ifndef EMBER_STATUS_H_
#define EMBER_STATUS_H_

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace ember {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad input from the caller: a value, a field, a file's content
  kNotFound,           // a named thing (dataset, file, key) does not exist
  kAlreadyExists,      // a named thing exists and must not be replaced
  kFailedPrecondition, // the system is not in a state that allows the call
  kResourceExhausted,  // a budget (shared memory, slots) is used up
  kDeadlineExceeded,   // a wait ran past its timeout
  kUnavailable,        // the peer (daemon, another rank) cannot be reached
  kDataLoss,           // data is corrupt or truncated
  kCancelled,          // the operation was stopped (stream closed, shutdown)
  kInternal,           // a bug or an unexpected OS error
  kPermissionDenied,   // the caller may not do this to that (another user's dataset, job)
};

// Returns a stable lower-case name for `code`, e.g. "invalid_argument".
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<context>: <message>"; OK stays OK.
  Status WithContext(const std::string& context) const;

  // "<code name>: <message>", or "ok".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }

// Converts an errno value once, where it happens: "<what>: <strerror(err)>".
// ENOENT maps to kNotFound, EACCES/EPERM to kPermissionDenied, ENOMEM/ENOSPC to
// kResourceExhausted, everything else to kInternal.
Status ErrnoStatus(const std::string& what, int err);

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: must not be OK

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace ember

// Returns early from the enclosing function with the Status of `expr` if it is not OK.
#define EMBER_RETURN_IF_ERROR(expr)          \
  do {                                       \
    ::ember::Status ember_status_ = (expr);  \
    if (!ember_status_.ok()) return ember_status_; \
  } while (0)

#define EMBER_CONCAT_INNER_(a, b) a##b
#define EMBER_CONCAT_(a, b) EMBER_CONCAT_INNER_(a, b)

// `EMBER_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a Result or returns its Status.
#define EMBER_ASSIGN_OR_RETURN(lhs, expr)                              \
  auto EMBER_CONCAT_(ember_result_, __LINE__) = (expr);                \
  if (!EMBER_CONCAT_(ember_result_, __LINE__).ok())                    \
    return EMBER_CONCAT_(ember_result_, __LINE__).status();            \
  lhs = std::move(EMBER_CONCAT_(ember_result_, __LINE__)).value()

#endif  // EMBER_STATUS_H_

// Status -> Python exceptions: a non-ok Status raised from a binding becomes the
// ember.Error subclass of its code (ember/_errors.py), carrying the daemon's message.
#ifndef EMBER_SDK_PYTHON_SRC_ERRORS_H_
#define EMBER_SDK_PYTHON_SRC_ERRORS_H_

#include <pybind11/pybind11.h>

#include <exception>
#include <string>
#include <utility>

#include "ember/status.h"

namespace ember::python {

// Thrown by Raise; the translator RegisterErrors installs turns it into the Python error.
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)), what_(status_.ToString()) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  Status status_;
  std::string what_;
};

[[noreturn]] void Raise(const Status& status);

// `result`'s value, or Raise(its status).
template <typename T>
T ValueOrRaise(Result<T> result) {
  if (!result.ok()) Raise(result.status());
  return std::move(result).value();
}

inline void OkOrRaise(const Status& status) {
  if (!status.ok()) Raise(status);
}

// Runs `f` with the GIL released (f must not touch Python objects) and returns its result.
template <typename F>
auto WithoutGil(F&& f) {
  pybind11::gil_scoped_release release;
  return f();
}

// Installs the translator of StatusError. The classes come from ember._errors, imported
// when the first error is raised (the package imports it before the module anyway).
void RegisterErrors();

}  // namespace ember::python

#endif  // EMBER_SDK_PYTHON_SRC_ERRORS_H_

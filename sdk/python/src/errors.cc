#include "sdk/python/src/errors.h"

namespace ember::python {

namespace py = pybind11;

void Raise(const Status& status) { throw StatusError(status); }

void RegisterErrors() {
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const StatusError& e) {
      // ember._errors.error_class(code) -> the class for the code's name.
      py::object cls = py::module_::import("ember._errors")
                           .attr("error_class")(StatusCodeName(e.status().code()));
      py::object error = cls(e.status().message());
      error.attr("code") = StatusCodeName(e.status().code());
      PyErr_SetObject(cls.ptr(), error.ptr());
    }
  });
}

}  // namespace ember::python

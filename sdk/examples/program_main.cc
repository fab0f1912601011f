#include "sdk/examples/program_main.h"

#include <cstdio>
#include <exception>

#include "sdk/sync/error_message.h"

namespace ember::examples {

int ProgramMain(CLI::App& app, int argc, char** argv, const char* program,
                const std::function<int()>& run) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;  // --help is a ParseError that exits 0
  }
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, sdk::ErrorMessage(e).c_str());
    return 1;
  }
}

}  // namespace ember::examples

// LoaderState: where a job stands in its data, as a small value to save beside the model
// and resume from, also on another world size or batch size.
//
//   ember::LoaderState state = loader.state();      // after a training step
//   save(model, optimizer, state.ToString());
//   ...
//   auto state = ember::LoaderState::Parse(saved).value();
//   ember::Loader loader(client, options, state);   // the samples not yet consumed
//
// `position` counts the positions of the epoch's order (a function of seed and epoch only)
// that the whole job consumed: the global steps up to this rank's last consumed batch. In
// synchronous data-parallel training every rank has finished the same steps after an
// optimizer step, so every rank's state is the same and any one (rank 0's) can be saved.
#ifndef EMBER_LOADER_STATE_H_
#define EMBER_LOADER_STATE_H_

#include <cstdint>
#include <string>

#include "ember/status.h"

namespace ember {

struct LoaderState {
  uint64_t fingerprint = 0;  // the dataset's (DatasetInfo::fingerprint); 0: not checked
  uint64_t seed = 0;
  uint64_t epoch = 0;        // the epoch in progress
  uint64_t position = 0;     // positions of it the job consumed (0: at its start)

  // One line: "ember-loader-state 1 fingerprint=<16 hex> seed=<n> epoch=<n> position=<n>".
  std::string ToString() const;
  // The inverse. kInvalidArgument naming what is wrong (an unknown version, a missing or
  // malformed field).
  static Result<LoaderState> Parse(const std::string& text);

  bool operator==(const LoaderState& o) const {
    return fingerprint == o.fingerprint && seed == o.seed && epoch == o.epoch &&
           position == o.position;
  }
};

}  // namespace ember

#endif  // EMBER_LOADER_STATE_H_

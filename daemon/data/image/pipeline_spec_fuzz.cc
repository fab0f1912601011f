// Fuzzes the pipeline YAML parser (ParsePipelineSpec; no plugins) on the input as text,
// then plans the geometry of every accepted pipeline for a few source sizes (the parser's
// bounds are what keeps that arithmetic in range).
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/random.h"
#include "daemon/data/image/geometry.h"
#include "daemon/data/image/pipeline_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  using namespace ember::daemon;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<PipelineSpec> spec = ParsePipelineSpec(text);
  if (!spec.ok()) return 0;
  constexpr int kSources[][2] = {{1, 1}, {500, 375}, {65535, 1}, {1, 65535}, {65535, 65535}};
  SplitMix64 random(size);
  for (const auto& source : kSources) {
    const SamplePlan plan = PlanGeometry(spec->steps, source[0], source[1], random);
    (void)MinDecodeScale(plan);
  }
  return 0;
}

// Binary schedule file (reshard plan -o FILE.rsched): read whole, then, when it claims small-moe-ep's
// piece count, checked against the scenario (GPUs, full validation) and estimated, as
// simulate/exec/check do. A GPU's part read through the index must be the whole schedule filtered
// to that GPU; a difference escapes as std::logic_error, which libFuzzer reports.
#include "fuzz_common.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule_file.hpp"

using namespace reshard::model;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const LoadedScenario sc = load_scenario(std::filesystem::path(reshard::fuzz::source_path("scenarios/small-moe-ep.yaml")));
  static const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  const std::string bytes = reshard::fuzz::text_of(data, size);
  try {
    const Schedule s = schedule_from_binary(bytes, "fuzz.rsched");
    const std::string path = reshard::fuzz::write_scratch("fuzz.rsched", bytes).string();
    for (GpuId g : {0, 5, 15})
      if (!(read_rank_schedule(path, g) == rank_schedule(s, g)))
        throw std::logic_error("GPU " + std::to_string(g) + ": the part read through the index differs");
    if (s.piece_count != static_cast<std::int32_t>(ts.pieces.size())) return 0;
    check_gpus(s, sc.topology.gpu_count());
    validate(s, ts, sc.inventory, sc.source, sc.destination);
    estimate(s, ts, sc.inventory, sc.topology, CostParams{});
  } catch (const Error&) {
  }
  return 0;
}

// Binary schedule file (reshard plan -o FILE.rsched): its content digest stamped first (else almost
// every mutation would stop at the digest check and nothing behind it would be fuzzed; the check
// itself is covered by tests/test_schedule_file.cpp), read whole, then, when it claims small-moe-ep's
// piece count, checked against the scenario (GPUs, full validation) and estimated, as
// simulate/exec/check do. A GPU's part read through the index must be the whole schedule filtered
// to that GPU; a difference escapes as std::logic_error, which libFuzzer reports.
#include "fuzz_schedule_check.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/schedule_file.hpp"

using namespace reshard::model;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string bytes = reshard::fuzz::text_of(data, size);
  stamp_binary_digest(bytes);
  try {
    const Schedule s = schedule_from_binary(bytes, "fuzz.rsched");
    const std::string path = reshard::fuzz::write_scratch("fuzz.rsched", bytes).string();
    for (GpuId g : {0, 5, 15})
      if (!(read_rank_schedule(path, g) == rank_schedule(s, g)))
        throw std::logic_error("GPU " + std::to_string(g) + ": the part read through the index differs");
    reshard::fuzz::check_against_small_moe_ep(s);
  } catch (const Error&) {
  }
  return 0;
}

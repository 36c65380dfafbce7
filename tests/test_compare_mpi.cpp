// `mpirun -np N reshard compare`: the rows and the tuner's candidates spread over N processes, the
// same JSON as one process's (less a "timings" object, wall times), printed once; an error in the
// input said once, with the exit code of one process.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

namespace {

const std::string kSource = RESHARD_SOURCE_DIR;

// Tests may run as root in containers, with more processes than cores.
std::string mpirun(int processes) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  return std::string(RESHARD_MPIEXEC) + " --oversubscribe -np " + std::to_string(processes) + " ";
}

// The JSON `compare` prints (stdout only), without its wall times.
nlohmann::json compare_json(const std::string& launcher, const std::string& args) {
  int st = 0;
  const std::string out =
      reshard::test::run_command(launcher + RESHARD_BINARY + " compare " + args + " --json 2>/dev/null", &st);
  EXPECT_EQ(st, 0) << launcher << args << "\n" << out;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << out;  // one document: process 0 alone prints
  if (j.is_object()) j.erase("timings");
  return j;
}

TEST(CompareMpi, SameJsonAsOneProcess) {
  for (const std::string& args : {kSource + "/scenarios/qwen3-235b-h100.yaml -j 1 --systems all",
                                 kSource + "/scenarios/small-moe-ep.yaml -j 1 --simulate",
                                 kSource + "/scenarios/small-gqa-megatron-tp8.yaml -j 2 --strategy \"domain_chain max_chain=2\""}) {
    SCOPED_TRACE(args);
    const nlohmann::json one = compare_json("", args);
    ASSERT_TRUE(one.contains("strategies"));
    for (int n : {2, 3}) EXPECT_EQ(compare_json(mpirun(n), args).dump(2), one.dump(2)) << n << " processes";
  }
}

TEST(CompareMpi, BadInputSaidOnce) {
  int st = 0;
  const std::string out = reshard::test::run_command(
      mpirun(2) + RESHARD_BINARY + " compare " + kSource + "/scenarios/small-moe-ep.yaml --set destination.tpp=16 2>&1", &st);
  EXPECT_NE(st, 0) << out;
  const std::string said = "reshard: error: --set destination.tpp=16: ";
  const auto first = out.find(said);
  ASSERT_NE(first, std::string::npos) << out;
  EXPECT_EQ(out.find(said, first + 1), std::string::npos) << out;
}

}  // namespace

// Losing GPUs: the recovery terms against their published sources, a failure priced by hand, and
// `plan`, `compare` and `simulate` with --without and --fail on shipped scenarios (hand-checked
// serving units and bytes; one clear error for each kind of bad input). The property test over
// random layouts and lost GPUs is PlannerProperty.RandomLostGpusReplanExactly.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reshard/model/recovery.hpp"
#include "run_command.hpp"

using namespace reshard::model;

namespace {

std::string run(const std::string& args, int* status) {
  return reshard::test::run_command(std::string(RESHARD_BINARY) + " " + args + " 2>&1", status);
}

nlohmann::json run_json(const std::string& args) {
  int status = 0;
  const std::string out = reshard::test::run_command(std::string(RESHARD_BINARY) + " " + args + " --json 2>/dev/null", &status);
  EXPECT_EQ(status, 0) << args;
  return nlohmann::json::parse(out);
}

const std::string kQwen = RESHARD_SOURCE_DIR "/scenarios/qwen3-235b-h100.yaml";
const std::string kKimi = RESHARD_SOURCE_DIR "/scenarios/kimi-k3-gb200.yaml";

}  // namespace

TEST(Recovery, ShrinkTermIsTheLeastSquaresLineThroughThePublishedTimes) {
  // ncclCommShrink in a refit group (NVIDIA-NeMo/RL PR #3186): ranks -> seconds.
  const std::vector<std::pair<double, double>> published = {{32, 1.53}, {64, 1.38}, {128, 1.44}, {256, 1.67}, {512, 2.03}, {1024, 2.02}};
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(published.size());
  for (const auto& [ranks, s] : published) {
    const double x = std::log2(ranks);
    sx += x;
    sy += s;
    sxx += x * x;
    sxy += x * s;
  }
  const double b = (n * sxy - sx * sy) / (n * sxx - sx * sx), a = (sy - b * sx) / n;
  const RecoveryTerms t;
  EXPECT_NEAR(t.shrink_per_doubling.value, b, 5e-4);
  EXPECT_NEAR(t.shrink_fixed.value, a, 5e-4);
  // Every published point within 0.25 s of the line (the demo's own scatter).
  for (const auto& [ranks, s] : published) EXPECT_NEAR(t.shrink(static_cast<std::int64_t>(ranks)).value, s, 0.25) << ranks;
}

TEST(Recovery, InitTermMeetsItsCalibrationPoint) {
  // 2.5 min at large scale (NVIDIA/nccl #1156), read as 4 096 ranks; 8 ranks: the logged phases of
  // NVIDIA/nccl #1646 without kernel loading (0.41 + 0.57 + 0.08 + 1.10 + 0.01 + 0.39 = 2.56 s).
  const RecoveryTerms t;
  EXPECT_NEAR(t.init(4096).value, 150, 0.5);
  EXPECT_NEAR(t.init_fixed.value, 0.41 + 0.57 + 0.08 + 1.10 + 0.01 + 0.39, 1e-9);
  EXPECT_LT(t.init(8).value, 3);
}

TEST(Recovery, FailurePricedByHand) {
  // Lost at 1 s with a quarter of the work done; the survivors' refit 2 s moving 100 GB; 1 024
  // ranks, 1 020 left; detection 15 s.
  //   abort + rebuild:  1 + 15 + (2.56 + 0.036 x 1020 = 39.28) + 2        = 57.28 s, 100 GB
  //   shrink + resume:  1 + 15 + (0.686 + 0.132 x log2 1024 = 2.006) + 0.75 x 2 = 19.506 s, 75 GB
  FailureInputs in;
  in.fail_at = Seconds{1};
  in.done = 0.25;
  in.refit = Seconds{2.1};
  in.survivors_refit = Seconds{2};
  in.survivors_bytes = Bytes{100'000'000'000};
  in.ranks = 1024;
  in.survivor_ranks = 1020;
  const FailureCost c = price_failure(in);
  EXPECT_NEAR(c.rebuild.total().value, 57.28, 1e-9);
  EXPECT_NEAR(c.resume.total().value, 19.506, 1e-9);
  EXPECT_NEAR(c.saving().value, 57.28 - 19.506, 1e-9);
  EXPECT_EQ(c.rebuild.bytes, Bytes{100'000'000'000});
  EXPECT_EQ(c.resume.bytes, Bytes{75'000'000'000});
  // A longer detection timeout adds the same to both paths.
  RecoveryTerms slow;
  slow.detect = Seconds{1800};
  const FailureCost d = price_failure(in, slow);
  EXPECT_NEAR(d.rebuild.total().value - c.rebuild.total().value, 1785, 1e-9);
  EXPECT_NEAR(d.saving().value, c.saving().value, 1e-9);
}

TEST(MembershipCli, LostInferenceGpuTakesItsEngineOut) {
  // Qwen3-235B: vLLM TP8 x DP16 on GPUs 128-255, engines of 8 ranks. GPU 130 is destination rank 2,
  // in engine 0: 15 engines are served, and each needs the whole model as before, so the bytes
  // needed are 15/16 of the full plan's.
  const auto full = run_json("plan " + kQwen);
  const auto j = run_json("plan " + kQwen + " --without 130");
  EXPECT_EQ(j["membership"]["unit_ranks"], 8);
  EXPECT_EQ(j["membership"]["units_dropped"], nlohmann::json::array({0}));
  EXPECT_EQ(j["membership"]["units_served"].size(), 15u);
  EXPECT_EQ(j["membership"]["lost_source"].size(), 0u);
  EXPECT_EQ(j["bytes_needed"].get<std::int64_t>() * 16, full["bytes_needed"].get<std::int64_t>() * 15);
  // compare and simulate report the same membership.
  const auto c = run_json("compare " + kQwen + " --without 130 -j 1");
  EXPECT_EQ(c["membership"], j["membership"]);
  EXPECT_FALSE(run_json("compare " + kQwen + " -j 1").contains("membership"));
}

TEST(MembershipCli, LostTrainingNodeIsServedFromDataParallelReplicas) {
  // Kimi-K3: Megatron TP8 PP8 EP64 ETP1 on 4 608 GPUs, DP 72 and experts over 9 EP groups: every
  // shard of GPUs 0-3 (one compute tray) has 8 other holders at least, so nothing is missing and
  // every destination still needs what it needed.
  const auto full = run_json("plan " + kKimi);
  const auto j = run_json("plan " + kKimi + " --without 0-3");
  EXPECT_EQ(j["membership"]["lost_source"], nlohmann::json::array({0, 1, 2, 3}));
  EXPECT_EQ(j["membership"]["units_dropped"].size(), 0u);
  EXPECT_GT(j["membership"]["source_bytes_lost"].get<double>(), 0);
  EXPECT_EQ(j["bytes_needed"], full["bytes_needed"]);
  EXPECT_EQ(j["pieces"], full["pieces"]);
}

TEST(MembershipCli, FailurePricedOnAShippedScenario) {
  const auto j = run_json("simulate " + kQwen + " --strategy direct --fail 130@0.2s");
  const auto& f = j["failure"];
  EXPECT_GT(f["done"].get<double>(), 0);
  EXPECT_LT(f["done"].get<double>(), 1);
  EXPECT_EQ(f["ranks"], 256);
  EXPECT_EQ(f["survivor_ranks"], 255);
  for (const char* path : {"abort_rebuild", "revoke_shrink_resume"}) {
    const auto& p = f[path];
    EXPECT_NEAR(p["total_s"].get<double>(), p["until_failure_s"].get<double>() + p["detect_s"].get<double>() +
                                                p["communicator_s"].get<double>() + p["transfer_s"].get<double>(), 1e-9);
    EXPECT_EQ(p["detect_s"], 15.0);
  }
  EXPECT_LT(f["revoke_shrink_resume"]["total_s"].get<double>(), f["abort_rebuild"]["total_s"].get<double>());
  EXPECT_LT(f["revoke_shrink_resume"]["bytes"].get<double>(), f["abort_rebuild"]["bytes"].get<double>());
  const auto slow = run_json("simulate " + kQwen + " --strategy direct --fail 130@0.2s --detect 1800s");
  EXPECT_NEAR(slow["failure"]["abort_rebuild"]["total_s"].get<double>() - f["abort_rebuild"]["total_s"].get<double>(), 1785, 1e-6);
  // A measured init replaces the init term.
  const auto measured = run_json("simulate " + kQwen + " --strategy direct --fail 130@0.2s --init 20s");
  EXPECT_EQ(measured["failure"]["abort_rebuild"]["communicator_s"], 20.0);
}

TEST(MembershipCli, BadInputIsOneClearError) {
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"plan " + kQwen + " --without 9999", "--without: 9999: GPU 9999 is not in topology"},
      {"plan " + kQwen + " --without 1-x", "--without: 1-x: expected GPU indices"},
      {"plan " + kQwen + " --without 130 --strategy direct -o x.json", "--without: cannot go with -o"},
      {"compare " + kQwen + " --without 0", "--without 0: no surviving GPU holds"},
      {"plan " + kQwen + " --without 128-255", "--without 128-255: every destination serving unit"},
      {"simulate " + kQwen + " --strategy direct --fail 130", "--fail: 130: expected GPUS@TIME"},
      {"simulate " + kQwen + " --strategy direct --fail 130@soon", "--fail: 130@soon: 'soon' is not a time"},
      {"simulate " + kQwen + " --strategy direct --fail 130@-1s", "--fail: 130@-1s: '-1s' is not a time"},
      {"simulate " + kQwen + " --strategy direct --fail 130@100s", "--fail: 130@100s: the refit ends at"},
      {"simulate " + kQwen + " --strategy direct --fail 0@0.1s", "--fail 0@0.1s: no surviving GPU holds"},
      {"simulate " + kQwen + " --strategy direct --detect 5s", "--detect: 5s: needs --fail"},
      {"simulate " + kQwen + " --strategy direct --fail 130@0.1s --init 2min", "--init: 2min: '2min' is not a time"},
  };
  for (const auto& c : cases) {
    int status = 0;
    const std::string out = run(c.args, &status);
    EXPECT_NE(status, 0) << c.args << "\n" << out;
    EXPECT_NE(out.find(c.expect), std::string::npos) << c.args << "\n" << out;
  }
}

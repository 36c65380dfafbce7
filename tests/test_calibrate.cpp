// Calibration: least squares recovers known parameters, respects non-negativity, warns when it fits
// as many constants as it has points and says what each constant rests on, and the shipped nemo_rl
// profile reproduces NVIDIA's published refit times within 15 % (in-sample: they are its fit).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "reshard/study/calibrate.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/systems.hpp"
#include "run_command.hpp"

using namespace reshard::model;
using namespace reshard::study;

TEST(Calibrate, RecoversKnownOverheads) {
  // Three observations generated with per_bucket = 10 ms and per_stage = 50 ms:
  //   t = h + 0.010 * buckets + 0.050 * stages
  //   (1.0 + 0.010*100 + 0.050*8  = 2.4), (2.0 + 0.010*40 + 0.050*16 = 3.2), (0.5 + 0 + 0.050*4 = 0.7)
  std::vector<Observation> obs(3);
  obs[0] = {"a", Seconds{2.4}, Seconds{1.0}, {0, 0, 100, 8}};
  obs[1] = {"b", Seconds{3.2}, Seconds{2.0}, {0, 0, 40, 16}};
  obs[2] = {"c", Seconds{0.7}, Seconds{0.5}, {0, 0, 0, 4}};
  const auto c = calibrate(obs, CostParams{}, {"per_bucket", "per_stage"});
  EXPECT_NEAR(c.params.per_bucket.value, 0.010, 1e-12);
  EXPECT_NEAR(c.params.per_stage.value, 0.050, 1e-12);
  EXPECT_NEAR(c.rms_relative_error, 0, 1e-12);
}

TEST(Calibrate, OverheadsStayNonNegative) {
  // Measured below the hardware time: the unconstrained fit would want a negative overhead; the
  // constrained fit keeps it at 0.
  std::vector<Observation> obs(2);
  obs[0] = {"a", Seconds{0.9}, Seconds{1.0}, {10, 0, 0, 0}};
  obs[1] = {"b", Seconds{1.8}, Seconds{2.0}, {20, 0, 0, 0}};
  const auto c = calibrate(obs, CostParams{}, {"per_tensor"});
  EXPECT_EQ(c.params.per_tensor.value, 0);
  EXPECT_NEAR(c.rows[0].relative_error, 0.1 / 0.9, 1e-12);
}

TEST(Calibrate, WarnsWhenItFitsAsManyConstantsAsPoints) {
  // One measurement (a host run, say), every overhead free: one equation in four unknowns,
  //   0.1 + 10 a + 20 b + 3 c + 1 d = 0.5,
  // solved exactly by per_tensor a = 0.04 alone (the first subset that fits, the others 0). The rms
  // error is 0 by construction, which is no evidence: the fit must say so.
  std::vector<Observation> obs(1);
  obs[0] = {"host run", Seconds{0.5}, Seconds{0.1}, {10, 20, 3, 1}};
  const auto c = calibrate(obs, CostParams{});
  EXPECT_NEAR(c.params.per_tensor.value, 0.04, 1e-12);
  EXPECT_NEAR(c.rms_relative_error, 0, 1e-12);
  EXPECT_EQ(c.fitted_constants, 4);
  for (int k = 0; k < 4; ++k) {
    EXPECT_TRUE(c.fitted[k]) << kOverheadNames[k];
    EXPECT_EQ(c.points[k], 1) << kOverheadNames[k];
  }
  // copy_passes has no term here (no copy time per pass): not fitted, and, not named by --fit,
  // not warned about either.
  EXPECT_FALSE(c.fitted[4]);
  EXPECT_EQ(c.points[4], 0);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("fitting 4 constants (per_tensor, per_broadcast_tensor, per_bucket, per_stage) to 1 "
                               "measurement"),
            std::string::npos)
      << c.warnings[0];
  EXPECT_NE(c.warnings[0].find("cannot check the fit"), std::string::npos) << c.warnings[0];

  // Two points, two constants: still no freedom left to check the fit ("as many").
  std::vector<Observation> two(2);
  two[0] = {"a", Seconds{2.4}, Seconds{1.0}, {0, 0, 100, 8}};
  two[1] = {"b", Seconds{3.2}, Seconds{2.0}, {0, 0, 40, 16}};
  const auto c2 = calibrate(two, CostParams{}, {"per_bucket", "per_stage"});
  ASSERT_EQ(c2.warnings.size(), 1u);
  EXPECT_NE(c2.warnings[0].find("fitting 2 constants (per_bucket, per_stage) to 2 measurements"), std::string::npos)
      << c2.warnings[0];
}

TEST(Calibrate, SaysHowManyPointsEachConstantRestsOn) {
  // Three measurements; the counts (reshard tensors, broadcast tensors, buckets, stages) are
  //   a: 0 0 100 8     b: 5 0 40 16     c: 0 0 0 4
  // so per_tensor rests on 1 point (b), per_broadcast_tensor on none, per_bucket on 2 (a, b),
  // per_stage on 3. Fitting per_bucket and per_stage: 2 constants on 3 points, no warning; the
  // values are those the data was made with (per_tensor fixed at the base's 0 adds nothing):
  //   2.4 = 1.0 + 0.010*100 + 0.050*8,  3.2 = 2.0 + 0.010*40 + 0.050*16,  0.7 = 0.5 + 0.050*4.
  std::vector<Observation> obs(3);
  obs[0] = {"a", Seconds{2.4}, Seconds{1.0}, {0, 0, 100, 8}};
  obs[1] = {"b", Seconds{3.2}, Seconds{2.0}, {5, 0, 40, 16}};
  obs[2] = {"c", Seconds{0.7}, Seconds{0.5}, {0, 0, 0, 4}};
  const auto c = calibrate(obs, CostParams{}, {"per_bucket", "per_stage"});
  const int points[kOverheadParams] = {1, 0, 2, 3};
  const bool fitted[kOverheadParams] = {false, false, true, true};
  for (int k = 0; k < kOverheadParams; ++k) {
    EXPECT_EQ(c.points[k], points[k]) << kOverheadNames[k];
    EXPECT_EQ(c.fitted[k], fitted[k]) << kOverheadNames[k];
  }
  EXPECT_EQ(c.fitted_constants, 2);
  EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
  EXPECT_NEAR(c.params.per_bucket.value, 0.010, 1e-12);
  EXPECT_NEAR(c.params.per_stage.value, 0.050, 1e-12);

  // A constant named free that no point informs is not fitted (it keeps the base's value), and
  // the fit says so.
  CostParams base;
  base.per_broadcast_tensor = Seconds{7e-6};
  const auto d = calibrate(obs, base, {"per_broadcast_tensor", "per_stage"});
  EXPECT_FALSE(d.fitted[1]);
  EXPECT_EQ(d.points[1], 0);
  EXPECT_EQ(d.params.per_broadcast_tensor.value, 7e-6);
  EXPECT_EQ(d.fitted_constants, 1);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0].rfind("per_broadcast_tensor was to be fitted, but no measurement has a term for it", 0), 0u)
      << d.warnings[0];
}

#ifdef RESHARD_BINARY
TEST(Calibrate, CommandReportsPointsAndWarnsOnStderrAndInJson) {
  // One measured run of a small scenario, every overhead free: the command prints the warning on
  // stderr and in the JSON, and each constant with the points it rests on.
  const auto dir = std::filesystem::temp_directory_path() / "reshard-calibrate-command";
  std::filesystem::create_directories(dir);
  const auto csv = dir / "one.csv";
  std::ofstream(csv) << "scenario,strategy,measured_s\n"
                     << RESHARD_SOURCE_DIR << "/scenarios/small-gqa-megatron-vllm.yaml,gather_broadcast,0.05\n";
  const auto err = dir / "stderr.txt";
  int status = 0;
  const std::string out = reshard::test::run_command(
      std::string(RESHARD_BINARY) + " calibrate " + csv.string() + " --json 2>" + err.string(), &status);
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["points"], 1);
  ASSERT_EQ(j["constants"].size(), 5u);  // per_tensor, per_broadcast_tensor, per_bucket, per_stage, copy_passes
  int fitted = 0;
  for (const auto& k : j["constants"]) {
    EXPECT_LE(k["points"].get<int>(), 1) << k.dump();
    if (k["fitted"].get<bool>()) {
      ++fitted;
      EXPECT_EQ(k["points"], 1) << k.dump();
    }
  }
  EXPECT_EQ(j["fitted_constants"], fitted);
  ASSERT_GE(fitted, 1);
  ASSERT_FALSE(j["warnings"].empty());
  EXPECT_NE(j["warnings"][0].get<std::string>().find("to 1 measurement"), std::string::npos) << j["warnings"].dump();
  std::ifstream e(err);
  const std::string stderr_text((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  EXPECT_NE(stderr_text.find("reshard: warning: fitting "), std::string::npos) << stderr_text;

  // The readable table names the points beside each constant.
  const std::string table =
      reshard::test::run_command(std::string(RESHARD_BINARY) + " calibrate " + csv.string() + " 2>/dev/null", &status);
  ASSERT_EQ(status, 0) << table;
  EXPECT_NE(table.find("(fitted on 1 of 1 point)"), std::string::npos) << table;
  std::filesystem::remove_all(dir);
}
#endif

TEST(Calibrate, NemoRlProfileMatchesPublishedRefitTimes) {
  // NVIDIA's DGX H100 numbers (docs/validation.md): Qwen3-235B 6.4 s gather-broadcast, 1.9 s reshard;
  // DeepSeek-V3 14.9 s and 2.6 s: the calibration subset (params/published-refit.csv, nrl-anchor-*).
  // The shipped profile must land within 25 % of each (in-sample), and a refit of its three
  // constants from the published CSV must reproduce the shipped ones (model/systems.cpp).
  const std::string csv = std::string(RESHARD_SOURCE_DIR) + "/params/nemo_rl-published.csv";
  const CostParams shipped = CostParams::profile_named("nemo_rl");
  // The observations start from the profile itself: its fixed terms (two call streams, no step
  // barriers) stay, the fitted ones are the unknowns.
  const auto obs = observations_from_csv(csv, shipped);
  ASSERT_EQ(obs.size(), 4u);
  const auto refit = calibrate(obs, shipped, {"per_tensor", "per_broadcast_tensor", "copy_passes"});
  // Its predictions (the larger of the host's and the GPUs' time: host_overlaps) with the refit
  // constants, which equal the shipped ones (below).
  for (const auto& r : refit.rows) EXPECT_NEAR(r.predicted.value / r.measured.value, 1.0, 0.25) << r.label;
  EXPECT_EQ(refit.fitted_constants, 3);
  EXPECT_TRUE(refit.warnings.empty()) << refit.warnings.front();  // 3 constants, 4 points
  EXPECT_NEAR(refit.params.per_tensor.value, shipped.per_tensor.value, 1e-3 * shipped.per_tensor.value);
  EXPECT_NEAR(refit.params.per_broadcast_tensor.value, shipped.per_broadcast_tensor.value,
              1e-3 * shipped.per_broadcast_tensor.value);
  EXPECT_NEAR(refit.params.copy_passes, shipped.copy_passes, 1e-3 * shipped.copy_passes);
}

TEST(Calibrate, ReaderChecksRowsBeforeAnythingIsPlanned) {
  // read_measured_runs parses every row (lines counted from 1, comments and the header included)
  // without opening a scenario; observe_runs then loads the first row's scenario and names it.
  const auto dir = std::filesystem::temp_directory_path() / "reshard-calibrate-reader";
  std::filesystem::create_directories(dir);
  const auto csv = dir / "runs.csv";
  std::ofstream(csv) << "# measured on the test cluster\n"
                        "scenario,strategy,measured_s\n"
                        "no-such-scenario.yaml,domain_chain max_chain=2, 0.5 \n"
                        "\n"
                        "other.yaml,gather_broadcast channels=2,3.5e-3\n";
  const auto runs = read_measured_runs(csv);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].line, 3);
  EXPECT_EQ(runs[0].scenario, dir / "no-such-scenario.yaml");
  EXPECT_EQ(runs[0].strategy.strategy, Strategy::DomainChain);
  EXPECT_EQ(runs[0].strategy.max_chain, 2);
  EXPECT_EQ(runs[0].measured.value, 0.5);
  EXPECT_EQ(runs[1].line, 5);
  EXPECT_EQ(runs[1].strategy.channels, 2);
  EXPECT_EQ(runs[1].measured.value, 3.5e-3);
  try {
    observe_runs(csv, runs, CostParams{});
    ADD_FAILURE() << "a missing scenario was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-scenario.yaml"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Calibrate, OverlappingHostWorkIsFittedSideBySide) {
  // A profile whose host work overlaps the GPUs' (host_overlaps): each time is
  // max(hardware + copy_passes x T_copy(1 pass), per_tensor x calls). Three observations made from
  // per_tensor = 2 ms and copy_passes = 4:
  //   a: hardware 1 s, 1000 calls, 0.1 s per pass -> max(1.4, 2.0) = 2.0 s (host side)
  //   b: hardware 1 s,  100 calls, 0.5 s per pass -> max(3.0, 0.2) = 3.0 s (GPU side)
  //   c: hardware 0.5 s, 500 calls, 0.2 s per pass -> max(1.3, 1.0) = 1.3 s (GPU side)
  // An additive fit cannot match them; the side-by-side fit finds both constants exactly.
  auto obs = [](const char* label, double hardware, double calls, double per_pass, double measured) {
    Observation o;
    o.label = label;
    o.hardware = Seconds{hardware};
    o.counts[0] = calls;
    o.counts[4] = per_pass;
    o.measured = Seconds{measured};
    return o;
  };
  const std::vector<Observation> points = {obs("a", 1, 1000, 0.1, 2.0), obs("b", 1, 100, 0.5, 3.0), obs("c", 0.5, 500, 0.2, 1.3)};
  CostParams base = CostParams::profile_named("reshard");
  base.host_overlaps = true;
  const auto c = calibrate(points, base, {"per_tensor", "copy_passes"});
  EXPECT_NEAR(c.params.per_tensor.value, 2e-3, 1e-9);
  EXPECT_NEAR(c.params.copy_passes, 4, 1e-6);
  EXPECT_LT(c.rms_relative_error, 1e-9);
  EXPECT_TRUE(c.warnings.empty());
  base.host_overlaps = false;  // the same points, every term added: no exact fit
  EXPECT_GT(calibrate(points, base, {"per_tensor", "copy_passes"}).rms_relative_error, 0.05);
}

TEST(SystemProfiles, EachIsAScheduleAndDocumentedConstants) {
  // Every implementation profile (model/systems.hpp): its strategy line parses, --profile finds its
  // cost terms, every constant says its value, meaning and source, and at most 4 are fitted.
  ASSERT_GE(system_profiles().size(), 8u);
  for (const auto& p : system_profiles()) {
    SCOPED_TRACE(p.name);
    EXPECT_NO_THROW(parse_strategy(p.strategy));
    EXPECT_FALSE(p.system.empty());
    EXPECT_FALSE(p.schedule.empty());
    EXPECT_EQ(CostParams::profile_named(p.name).per_tensor, p.cost.per_tensor);
    EXPECT_FALSE(p.cost.step_barriers);  // none of these systems runs reshard's steps
    int fitted = 0;
    ASSERT_FALSE(p.constants.empty());
    for (const auto& k : p.constants) {
      EXPECT_FALSE(k.value.empty() || k.meaning.empty() || k.source.empty()) << k.name;
      fitted += k.fitted ? 1 : 0;
    }
    EXPECT_LE(fitted, 4);
  }
  EXPECT_EQ(find_system_profile("no_such_system"), nullptr);
  try {
    CostParams::profile_named("no_such_system");
    ADD_FAILURE() << "an unknown profile was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("nccl_m2n_hierarchical"), std::string::npos) << e.what();
  }
}

TEST(Calibrate, MilesProfileIsItsCalibrationSubsetsRefit) {
  // The miles cost terms (slime's broadcast, Mooncake P2P) are the refit of their calibration
  // subset, miles' Qwen3-30B-A3B pair (params/miles-published.csv): two constants on two points.
  const std::string csv = std::string(RESHARD_SOURCE_DIR) + "/params/miles-published.csv";
  const CostParams shipped = CostParams::profile_named("miles");
  const auto obs = observations_from_csv(csv, shipped);
  ASSERT_EQ(obs.size(), 2u);
  const auto refit = calibrate(obs, shipped, {"per_tensor", "per_broadcast_tensor"});
  EXPECT_NEAR(refit.params.per_tensor.value, shipped.per_tensor.value, 1e-3 * shipped.per_tensor.value);
  EXPECT_NEAR(refit.params.per_broadcast_tensor.value, shipped.per_broadcast_tensor.value,
              1e-3 * shipped.per_broadcast_tensor.value);
  EXPECT_EQ(refit.warnings.size(), 1u);  // as many constants as points: said
}

// Calibration: least squares recovers known parameters, respects non-negativity, warns when it fits
// as many constants as it has points and says what each constant rests on, and the shipped nemo_rl
// profile reproduces NVIDIA's published refit times within 15 % (in-sample: they are its fit).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "reshard/model/calibrate.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"
#include "run_command.hpp"

using namespace reshard::model;

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
  for (int k = 0; k < kOverheadParams; ++k) {
    EXPECT_TRUE(c.fitted[k]) << kOverheadNames[k];
    EXPECT_EQ(c.points[k], 1) << kOverheadNames[k];
  }
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
  ASSERT_EQ(j["constants"].size(), 4u);
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
  // DeepSeek-V3 14.9 s and 2.6 s. The shipped profile must land within 15 % of each, and a refit
  // from the published CSV must reproduce the shipped constants.
  const std::string csv = std::string(RESHARD_SOURCE_DIR) + "/params/nemo_rl-published.csv";
  // The fit starts from the reshard profile's hardware constants without its step barriers (NeMo
  // RL's refit runs no steps), as params/nemo_rl.yaml was fitted.
  CostParams zero = CostParams::profile_named("reshard");
  zero.step_barriers = false;
  const auto obs = observations_from_csv(csv, zero);
  ASSERT_EQ(obs.size(), 4u);
  const CostParams shipped = CostParams::profile_named("nemo_rl");
  for (const auto& o : obs) {
    double pred = o.hardware.value + o.counts[0] * shipped.per_tensor.value + o.counts[1] * shipped.per_broadcast_tensor.value +
                  o.counts[2] * shipped.per_bucket.value + o.counts[3] * shipped.per_stage.value;
    EXPECT_NEAR(pred / o.measured.value, 1.0, 0.15) << o.label;
  }
  const auto refit = calibrate(obs, zero, {"per_bucket", "per_stage"});
  EXPECT_NEAR(refit.params.per_bucket.value, shipped.per_bucket.value, 1e-3 * shipped.per_bucket.value);
  EXPECT_NEAR(refit.params.per_stage.value, shipped.per_stage.value, 1e-3 * shipped.per_stage.value);
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

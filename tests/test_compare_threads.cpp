// Threads change nothing: compare() and the tuner give the same rows, the same choice, the same
// candidates in the same order and the same progress lines on 1 thread as on several (the
// tuner evaluates candidates ahead of its search and uses them only where the sequential search
// goes, model/tuner.hpp), with and without budgets that stop the search, and with simulation.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "reshard/model/parallel.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule_basis.hpp"
#include "reshard/model/tuner.hpp"
#include "reshard/study/compare.hpp"

namespace {

using namespace reshard::model;
using namespace reshard::study;

const std::string kSource = RESHARD_SOURCE_DIR;

struct Outcome {
  std::string json;
  std::vector<std::string> progress;
};

Outcome compare_on(const LoadedScenario& sc, int threads, bool simulate) {
  CompareOptions options;
  options.threads = threads;
  options.simulate = simulate;
  Outcome run;
  options.progress = [&](const ProgressStep& p) {
    run.progress.push_back(p.stage + " " + std::to_string(p.done) + "/" + std::to_string(p.total) + " " + p.item);
  };
  run.json = to_json(compare(sc, options)).dump(2);
  return run;
}

TEST(CompareThreads, SameJsonAndProgressOnAnyThreadCount) {
  const LoadedScenario sc = load_scenario(kSource + "/scenarios/qwen3-235b-h100.yaml");
  const Outcome one = compare_on(sc, 1, false);
  const auto j = nlohmann::json::parse(one.json);
  EXPECT_GT(j.at("candidates").get<int>(), 4);  // the four starting points, then descent moves
  for (int threads : {2, 3}) {
    SCOPED_TRACE(threads);
    const Outcome many = compare_on(sc, threads, false);
    EXPECT_EQ(many.json, one.json);
    EXPECT_EQ(many.progress, one.progress);
  }
}

TEST(CompareThreads, SameSimulatedRowsAndConfirmationOnAnyThreadCount) {
  // With simulate, the rows are simulated at once and auto's best candidates confirmed at once.
  const LoadedScenario sc = load_scenario(kSource + "/scenarios/small-moe-ep.yaml");
  const Outcome one = compare_on(sc, 1, true);
  const Outcome two = compare_on(sc, 2, true);
  // Confirmations run at once and are said as each ends: the same ones, in any order; every other
  // step the same, in the same order.
  auto split = [](std::vector<std::string> lines) {
    std::vector<std::string> confirm;
    std::erase_if(lines, [&](const std::string& l) {
      if (l.rfind("confirm ", 0) != 0) return false;
      confirm.push_back(l.substr(l.find(' ', 8)));  // without the count
      return true;
    });
    std::sort(confirm.begin(), confirm.end());
    return std::pair{lines, confirm};
  };
  EXPECT_EQ(two.json, one.json);
  EXPECT_EQ(split(two.progress), split(one.progress));
  EXPECT_FALSE(split(one.progress).second.empty());
  EXPECT_FALSE(nlohmann::json::parse(one.json).at("strategies").back().at("simulated_s").is_null());
}

TEST(CompareThreads, TunerBudgetsStopTheSameSearchOnAnyThreadCount) {
  // Budgets that stop the search half way: candidates evaluated ahead on other threads past the
  // point where the search stops are neither counted nor listed.
  const LoadedScenario sc = load_scenario(kSource + "/scenarios/qwen3-235b-h100.yaml");
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  const ScheduleBasis basis(ts, sc.inventory, sc.source, sc.destination, sc.topology);
  const CostParams cost = CostParams::profile_named("reshard");
  for (const auto& [budget, operation_budget] : {std::pair<std::int32_t, std::int64_t>{7, 150'000'000}, {40, 60'000}}) {
    SCOPED_TRACE(std::to_string(budget) + " schedules, " + std::to_string(operation_budget) + " operations");
    TuneOptions options;
    options.budget = budget;
    options.operation_budget = operation_budget;
    options.threads = 1;
    const TuneResult one = tune(basis, cost, options);
    EXPECT_EQ(one.built, static_cast<std::int32_t>(one.evaluated.size()));
    // The named strategies it builds as seeds are not counted against the budgets.
    EXPECT_LE(one.built, budget + static_cast<std::int32_t>(all_strategies().size()));
    EXPECT_GE(one.built, static_cast<std::int32_t>(all_strategies().size()));
    for (int threads : {2, 4}) {
      options.threads = threads;
      const TuneResult many = tune(basis, cost, options);
      ASSERT_EQ(many.evaluated.size(), one.evaluated.size()) << threads;
      EXPECT_EQ(many.built, one.built);
      for (std::size_t i = 0; i < one.evaluated.size(); ++i) {
        EXPECT_EQ(describe(many.evaluated[i].params), describe(one.evaluated[i].params)) << i;
        EXPECT_EQ(many.evaluated[i].prediction.time, one.evaluated[i].prediction.time) << i;
      }
      EXPECT_EQ(describe(many.best.params), describe(one.best.params));
    }
  }
}

TEST(ParallelFor, EveryIndexOnceAndTheLowestFailureRethrown) {
  std::vector<int> hits(100, 0);
  parallel_for(hits.size(), 3, [&](std::size_t i) { hits[i] += 1; });
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 100);
  // Indices 7 and 40 throw: 7's exception comes out, as from a loop in order; every index ran.
  std::vector<int> ran(50, 0);
  try {
    parallel_for(ran.size(), 4, [&](std::size_t i) {
      ran[i] = 1;
      if (i == 7 || i == 40) throw std::runtime_error("index " + std::to_string(i));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "index 7");
  }
  EXPECT_EQ(std::count(ran.begin(), ran.end(), 1), 50);
  parallel_for(0, 4, [](std::size_t) { FAIL() << "called on no index"; });
}

}  // namespace

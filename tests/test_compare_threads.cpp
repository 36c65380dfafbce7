// Threads change nothing: compare() and the tuner give the same rows, the same choice, the same
// candidates in the same order and the same progress lines on 1 thread as on several (the
// tuner evaluates candidates ahead of its search and uses them only where the sequential search
// goes, model/tuner.hpp), with and without budgets that stop the search, and with simulation.
// Processes change nothing either: compare() and the tuner spread over processes (played here by
// threads that exchange their results as text, as exec::ProcessGroup's processes do) give every
// process the result of one process; the values that cross (Prediction, StrategyParams, errors)
// read back exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "reshard/model/errors.hpp"

#include "reshard/model/parallel.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/strategies.hpp"
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

// The processes of a launch played by threads of this one: all_gather returns once every rank has
// given its text.
class Launch {
 public:
  explicit Launch(int size) : texts_(static_cast<std::size_t>(size)) {}
  std::vector<std::string> all_gather(int rank, const std::string& mine) {
    std::unique_lock lock(mutex_);
    const auto round = round_;
    texts_[static_cast<std::size_t>(rank)] = mine;
    if (++arrived_ == static_cast<int>(texts_.size())) {
      gathered_ = texts_;
      arrived_ = 0;
      ++round_;
      done_.notify_all();
      return gathered_;
    }
    done_.wait(lock, [&] { return round_ != round; });
    return gathered_;  // the next round cannot end before this rank has joined it
  }
  int size() const { return static_cast<int>(texts_.size()); }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<std::string> texts_, gathered_;
  int arrived_ = 0;
  std::uint64_t round_ = 0;
};

class LaunchProcess : public Processes {
 public:
  LaunchProcess(Launch& launch, int rank) : launch_(launch), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return launch_.size(); }
  std::vector<std::string> all_gather(const std::string& mine) const override { return launch_.all_gather(rank_, mine); }

 private:
  Launch& launch_;
  int rank_;
};

// run(processes) on every rank of a launch of `size`, at once; each rank's result (its exception's
// message when it threw).
template <class T>
std::vector<T> on_every_rank(int size, const std::function<T(const Processes&)>& run) {
  Launch launch(size);
  std::vector<T> out(static_cast<std::size_t>(size));
  std::vector<std::string> errors(out.size());
  std::vector<std::thread> ranks;
  for (int r = 0; r < size; ++r)
    ranks.emplace_back([&, r] {
      const LaunchProcess me(launch, r);
      try {
        out[static_cast<std::size_t>(r)] = run(me);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  return out;
}

Outcome compare_on(const LoadedScenario& sc, int threads, bool simulate, const Processes* processes = nullptr) {
  CompareOptions options;
  options.threads = threads;
  options.simulate = simulate;
  options.processes = processes;
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

TEST(CompareProcesses, EveryProcessGetsTheJsonOfOneProcess) {
  // The rows, the tuner's named strategies, its candidates evaluated ahead and (with simulate) its
  // confirmations and the systems' rows, spread over 2 and 3 processes of one thread each.
  for (const auto& [file, simulate] : {std::pair{"qwen3-235b-h100.yaml", false}, {"small-moe-ep.yaml", true}}) {
    SCOPED_TRACE(file);
    const LoadedScenario sc = load_scenario(kSource + "/scenarios/" + file);
    CompareOptions options;
    options.threads = 1;
    options.simulate = simulate;
    options.systems = {"all"};
    const std::string one = to_json(compare(sc, options)).dump(2);
    for (int size : {2, 3}) {
      SCOPED_TRACE(size);
      const auto all = on_every_rank<std::string>(size, [&](const Processes& processes) {
        CompareOptions mine = options;
        mine.processes = &processes;
        return to_json(compare(sc, mine)).dump(2);
      });
      for (const auto& json : all) EXPECT_EQ(json, one);
    }
  }
}

TEST(CompareProcesses, TunerBudgetsStopTheSameSearchOnAnyProcessCount) {
  const LoadedScenario sc = load_scenario(kSource + "/scenarios/qwen3-235b-h100.yaml");
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  const ScheduleBasis basis(ts, sc.inventory, sc.source, sc.destination, sc.topology);
  const CostParams cost = CostParams::profile_named("reshard");
  TuneOptions options;
  options.budget = 7;
  options.threads = 1;
  auto listing = [](const TuneResult& r) {
    std::string s = std::to_string(r.built) + " built, best " + describe(r.best.params) + "\n";
    for (const auto& c : r.evaluated) s += describe(c.params) + ": " + to_json(c.prediction).dump() + "\n";
    return s;
  };
  const std::string one = listing(tune(basis, cost, options));
  const auto all = on_every_rank<std::string>(3, [&](const Processes& processes) {
    TuneOptions mine = options;
    mine.threads = 2;  // 6 workers: candidates evaluated further ahead
    mine.processes = &processes;
    return listing(tune(basis, cost, mine));
  });
  for (const auto& l : all) EXPECT_EQ(l, one);
}

TEST(CompareProcesses, PredictionsAndParamsReadBackExactly) {
  const LoadedScenario sc = load_scenario(kSource + "/scenarios/small-moe-ep.yaml");
  CompareOptions options;
  options.threads = 1;
  options.systems = {"all"};
  const CompareResult r = compare(sc, options);
  auto same = [](const Prediction& a, const Prediction& b) { return to_json(a).dump() == to_json(b).dump(); };
  for (const auto* rows : {&r.rows, &r.systems})
    for (const auto& row : *rows) {
      SCOPED_TRACE(row.name);
      const Prediction back = prediction_from_json(nlohmann::json::parse(to_json(row.prediction).dump()));
      EXPECT_TRUE(same(back, row.prediction));
      EXPECT_EQ(back.time.value, row.prediction.time.value);  // bit for bit, not within a tolerance
      EXPECT_EQ(back.bottleneck, row.prediction.bottleneck);
      EXPECT_EQ(back.staging_peak, row.prediction.staging_peak);
      EXPECT_EQ(back.steps, row.prediction.steps);
      EXPECT_EQ(strategy_params_from_json(nlohmann::json::parse(to_json(row.params).dump())), row.params);
    }
  // Every field its own value, awkward doubles among them.
  Prediction p;
  double t = 0.1;
  for (Seconds* s : {&p.time, &p.bandwidth_bound, &p.pipeline, &p.latency_path, &p.critical_path, &p.overheads, &p.host,
                     &p.device, &p.barrier, &p.copies, &p.convert_source, &p.convert_destination, &p.fill, &p.steps_bound})
    *s = Seconds{t /= 3.7};
  p.overheads = Seconds{std::numeric_limits<double>::infinity()};
  p.copies = Seconds{-0.0};
  p.fill = Seconds{std::numeric_limits<double>::denorm_min()};
  p.bottleneck = 17;
  p.network_bytes = Bytes{(std::int64_t{1} << 62) + 1};
  p.nvlink_bytes = Bytes{3};
  p.staging_peak = Bytes{5};
  std::int64_t n = 11;
  for (std::int64_t* c : {&p.operations, &p.reshard_tensors, &p.broadcast_tensors, &p.broadcast_buckets, &p.broadcast_stages})
    *c = n++;
  p.chain_depth = 21;
  p.staging_gpu = 22;
  p.steps = 23;
  p.over_budget = 24;
  const nlohmann::json j = to_json(p);
  const Prediction back = prediction_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(to_json(back).dump(), j.dump());
  EXPECT_TRUE(std::isinf(back.overheads.value));
  EXPECT_TRUE(std::signbit(back.copies.value));
  EXPECT_EQ(back.fill.value, std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(back.network_bytes, p.network_bytes);
  EXPECT_EQ(back.time.value, p.time.value);
  EXPECT_EQ(back.steps_bound.value, p.steps_bound.value);
  EXPECT_EQ(back.broadcast_stages, 15);
  EXPECT_EQ(back.over_budget, 24);
  EXPECT_THROW(prediction_from_json(nlohmann::json{{"time_s", 1.0}}), ConfigError);
  EXPECT_TRUE(std::isnan(time_from_json(nlohmann::json::parse(time_json(Seconds{std::nan("")}).dump())).value));
  EXPECT_EQ(time_from_json(nlohmann::json::parse(time_json(Seconds{-INFINITY}).dump())).value, -INFINITY);
  EXPECT_THROW(time_from_json(nlohmann::json("1 s")), ConfigError);
}

TEST(CompareProcesses, ErrorsCrossWithTheirClassAndMessage) {
  auto round_trip = [](const std::exception_ptr& e) {
    return error_from_json(nlohmann::json::parse(error_json(e).dump()));
  };
  auto message = [](const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      return std::string(x.what());
    }
  };
  const ConfigError config("f.yaml", 3, "topology.gpus", "not a number");
  const std::exception_ptr errors[] = {
      std::make_exception_ptr(PlanError("no plan")), std::make_exception_ptr(ScheduleError("bad op")),
      std::make_exception_ptr(IndexError("GPU 9")), std::make_exception_ptr(Error("plain")),
      std::make_exception_ptr(config), std::make_exception_ptr(OverrideError("--set topology.gpus=x", config)),
      std::make_exception_ptr(std::logic_error("internal"))};
  for (const auto& e : errors) {
    const std::exception_ptr back = round_trip(e);
    EXPECT_EQ(message(back), message(e));
    EXPECT_EQ(error_json(back), error_json(e));  // the same class (and a ConfigError's parts)
  }
  EXPECT_THROW(std::rethrow_exception(round_trip(errors[0])), PlanError);
  EXPECT_THROW(std::rethrow_exception(round_trip(errors[5])), OverrideError);

  // Over processes, every process rethrows the lowest index's exception, whichever process threw it.
  const auto caught = on_every_rank<std::string>(3, [](const Processes& processes) {
    std::vector<int> got(10, 0);
    try {
      parallel_for(
          processes, got.size(), 2,
          [&](std::size_t i) {
            if (i == 4 || i == 8) throw PlanError("index " + std::to_string(i));
            got[i] = static_cast<int>(i) * 10;
          },
          [&](std::size_t i) { return nlohmann::json(got[i]); },
          [&](std::size_t i, const nlohmann::json& j) { got[i] = j.get<int>(); });
    } catch (const PlanError& e) {
      return std::string(e.what()) + " " + std::to_string(got[9]);
    }
    return std::string("no exception");
  });
  for (const auto& c : caught) EXPECT_EQ(c, "index 4 90");
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

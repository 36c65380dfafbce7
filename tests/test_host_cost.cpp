// The host backend's cost model (model/host_cost.hpp) and the cuda backend's (model/device_cost.hpp):
// hand-worked cases of their equations, and their profile files (every key required, each error
// naming the file, line and key).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "config_error.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/device_cost.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/host_cost.hpp"

namespace {

using namespace reshard::model;

// Round numbers: 2 cores, measured with 4 processes (s = min(4, 2) = 2).
HostProfile profile() {
  HostProfile p;
  p.machine = "test";
  p.cores = 2;
  p.processes = 4;
  p.copy_rate = BytesPerSecond{10e9};
  p.copy_rate_all = BytesPerSecond{20e9};
  p.touch_rate_all = BytesPerSecond{1e9};
  p.transport_rate = BytesPerSecond{1e9};
  p.transport_rate_all = BytesPerSecond{2e9};
  p.connect_time = Seconds{100e-6};
  p.message_time = Seconds{10e-6};
  p.message_latency = Seconds{50e-6};
  p.barrier = Seconds{1e-3};
  return p;
}

constexpr std::int64_t kMiB = 1 << 20;

// Plain transfers (no buffers needed: the model reads ops, chains, after, slots and chunk).
Schedule transfers(const std::vector<std::tuple<GpuId, GpuId, std::int64_t, std::vector<std::int64_t>>>& ops) {
  Schedule s;
  s.params.chunk = Bytes{512 << 10};
  for (const auto& [src, dst, bytes, after] : ops) {
    Op o;
    o.src = src;
    o.dst = dst;
    o.bytes = Bytes{bytes};
    s.add_op(o, after);
  }
  return s;
}

// Two transfers of 1 MiB (2 chunks each), GPU 0 -> 2 and 1 -> 3, one process per GPU:
//   X = 2 MiB, Y = 2 MiB packed + 2 MiB unpacked = 4 MiB, M = 4 messages, K = 2 pairs, f = 2/2 = 1
//   T_mach = 2 MiB / 2 GB/s + 4 MiB / 20 GB/s + 2 x 100 us + 4 x 10 us
//          = 1.048576 + 0.2097152 + 0.2 + 0.04 ms = 1.4982912 ms
//   T_proc = the receivers: 1 MiB / 1 GB/s + 1 MiB / 10 GB/s + 1 x 100 us x 2 = 1.3534336 ms
//   T_path = 50 us + 1 MiB / 1 GB/s = 1.098576 ms
//   T      = max = T_mach (one step, nothing allocated after the clock starts)
TEST(HostCost, TwoTransfersOneProcessPerGpuAreBoundByTheMachine) {
  const Schedule s = transfers({{0, 2, kMiB, {}}, {1, 3, kMiB, {}}});
  const HostPrediction p = estimate_host(s, {0, 1, 2, 3}, 4, profile());
  ASSERT_EQ(p.steps.size(), 1u);
  const HostStep& st = p.steps[0];
  EXPECT_EQ(st.transported.value, 2 * kMiB);
  EXPECT_EQ(st.copied.value, 4 * kMiB);
  EXPECT_EQ(st.messages, 4);
  EXPECT_EQ(st.pairs, 2);
  EXPECT_EQ(st.touched.value, 0);
  EXPECT_NEAR(st.machine.value, 1.4982912e-3, 1e-12);
  EXPECT_NEAR(st.process.value, 1.3534336e-3, 1e-12);
  EXPECT_NEAR(st.path.value, 1.098576e-3, 1e-12);
  EXPECT_NEAR(p.time.value, 1.4982912e-3, 1e-12);
}

// The same GPUs folded onto 2 processes (GPU i in process i mod 2): both transfers stay inside a
// process (0 -> 2 in process 0, 1 -> 3 in process 1), so nothing crosses:
//   X = 0, M = 0, K = 0, Y = 2 MiB packed + 2 unpacked + 2 copied in place by MPI = 6 MiB
//   T_mach = 6 MiB / 20 GB/s = 0.3145728 ms;  T_proc = 3 MiB / 10 GB/s = 0.3145728 ms
//   T_path = 1 MiB / 10 GB/s (every hop inside one process) = 0.1048576 ms
// and on one process f = 2 / min(1, 2) = 2: T_mach = 2 x 0.3145728 = T_proc = 6 MiB / 10 GB/s.
TEST(HostCost, GpusFoldedOntoFewerProcessesCopyInPlace) {
  const Schedule s = transfers({{0, 2, kMiB, {}}, {1, 3, kMiB, {}}});
  const HostPrediction two = estimate_host(s, {0, 1, 2, 3}, 2, profile());
  EXPECT_EQ(two.steps[0].transported.value, 0);
  EXPECT_EQ(two.steps[0].copied.value, 6 * kMiB);
  EXPECT_EQ(two.steps[0].pairs, 0);
  EXPECT_NEAR(two.steps[0].machine.value, 0.3145728e-3, 1e-12);
  EXPECT_NEAR(two.steps[0].process.value, 0.3145728e-3, 1e-12);
  EXPECT_NEAR(two.steps[0].path.value, 0.1048576e-3, 1e-12);
  EXPECT_NEAR(two.time.value, 0.3145728e-3, 1e-12);
  const HostPrediction one = estimate_host(s, {0, 1, 2, 3}, 1, profile());
  EXPECT_NEAR(one.steps[0].machine.value, 0.6291456e-3, 1e-12);
  EXPECT_NEAR(one.steps[0].process.value, 0.6291456e-3, 1e-12);
  EXPECT_NEAR(one.time.value, 0.6291456e-3, 1e-12);
}

// A gather and a forward: GPU 1 -> 0 (step 0), then 0 -> 2 after it (step 1), 1 MiB each, one
// process per GPU (f = 2 / min(3, 2) = 1). GPU 0 keeps its receive of op 0 (op 1 packs from it):
//   staging  step 0: GPU 0 holds the kept 1 MiB (before the clock), GPU 1 its ring (1 MiB)
//            step 1: GPU 0 holds the kept 1 MiB + op 1's ring 1 MiB = 2 MiB: 1 MiB beyond its mark,
//                    GPU 2's ring is its first step (before the clock)
//   T_open(1) = 1 MiB x 2 / 1 GB/s = 2.097152 ms
//   each step: X = 1 MiB, Y = 2 MiB, M = 2, K = 1 (a new pair)
//     T_mach = 1 MiB / 2 GB/s + 2 MiB / 20 GB/s + 100 us + 2 x 10 us = 0.7491456 ms
//     T_proc = the receiver: 1.048576 + 0.1048576 + 0.2 = 1.3534336 ms;  T_path = 1.098576 ms
//   T = 1.3534336 + (2.097152 + 1.3534336) + 1 x 50 us = 4.8540192 ms
TEST(HostCost, StepsPayTheirFreshStagingAndOnePollEach) {
  const Schedule s = transfers({{1, 0, kMiB, {}}, {0, 2, kMiB, {0}}});
  const HostPrediction p = estimate_host(s, {0, 1, 2}, 3, profile());
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0].touched.value, 0);
  EXPECT_EQ(p.steps[1].touched.value, kMiB);
  EXPECT_NEAR(p.steps[0].open.value, 0, 1e-15);
  EXPECT_NEAR(p.steps[1].open.value, 2.097152e-3, 1e-12);
  for (const HostStep& st : p.steps) {
    EXPECT_NEAR(st.machine.value, 0.7491456e-3, 1e-12);
    EXPECT_NEAR(st.process.value, 1.3534336e-3, 1e-12);
    EXPECT_EQ(st.pairs, 1);
  }
  EXPECT_NEAR(p.steps[0].time.value, 1.3534336e-3, 1e-12);
  EXPECT_NEAR(p.steps[1].time.value, 3.4505856e-3, 1e-12);
  EXPECT_NEAR(p.time.value, 4.8540192e-3, 1e-12);
}

// A chain op of 1 MiB in 512 KiB chunks along 0 -> 1 -> 2 -> 3 (depth 3): its path pays a poll per
// hop and the pipeline fill, 3 x 50 us + (1 MiB + 2 x 512 KiB) / 1 GB/s = 2.247152 ms; the machine
// moves it three times (X = 3 MiB, M = 6, K = 3).
TEST(HostCost, ChainPaysAPollPerHopAndItsFill) {
  Schedule s;
  s.chains.push_back(Chain{{{0, 1}, {1, 2}, {2, 3}}, Bytes{512 << 10}});
  Op o;
  o.src = 0;
  o.dst = 3;
  o.chain = 0;
  o.bytes = Bytes{kMiB};
  s.add_op(o, {});
  const HostPrediction p = estimate_host(s, {0, 1, 2, 3}, 4, profile());
  EXPECT_EQ(p.steps[0].transported.value, 3 * kMiB);
  EXPECT_EQ(p.steps[0].messages, 6);
  EXPECT_EQ(p.steps[0].pairs, 3);
  EXPECT_NEAR(p.steps[0].path.value, 2.247152e-3, 1e-12);
}

TEST(HostCost, GpuOutsideTheRunIsRefused) {
  const Schedule s = transfers({{0, 5, kMiB, {}}});
  try {
    estimate_host(s, {0, 1, 2, 3}, 4, profile());
    FAIL() << "no error";
  } catch (const ScheduleError& e) {
    EXPECT_HAS(std::string(e.what()), "operation 0 names GPU 5");
  }
  EXPECT_THROW(estimate_host(s, {0, 5}, 0, profile()), PlanError);
}

std::filesystem::path write(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path;
}

TEST(HostProfile, SavedProfileReadsBackWithItsConstantsAndComments) {
  const auto path = std::filesystem::temp_directory_path() / "reshard_test_host_profile.yaml";
  profile().save(path);
  const HostProfile p = HostProfile::load(path);
  EXPECT_TRUE(HostProfile::is_host_profile(path));
  EXPECT_EQ(p.machine, "test");
  EXPECT_EQ(p.cores, 2);
  EXPECT_EQ(p.processes, 4);
  EXPECT_NEAR(p.copy_rate_all.value, 20e9, 1);
  EXPECT_NEAR(p.transport_rate.value, 1e9, 1);
  EXPECT_NEAR(p.connect_time.value, 100e-6, 1e-12);
  EXPECT_NEAR(p.message_latency.value, 50e-6, 1e-12);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_HAS(text, "# One-way time of a small message");
  EXPECT_HAS(text, "message_latency: 50us");
}

TEST(HostProfile, BadFilesNameFileLineAndKey) {
  const auto good = std::filesystem::temp_directory_path() / "reshard_test_host_profile_good.yaml";
  profile().save(good);
  std::ifstream in(good);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto without = [&](const std::string& key) {
    std::string t;
    std::istringstream lines(text);
    for (std::string l; std::getline(lines, l);)
      if (l.rfind(key + ":", 0) != 0) t += l + "\n";
    return t;
  };
  auto replaced = [&](const std::string& key, const std::string& value) {
    std::string t;
    std::istringstream lines(text);
    for (std::string l; std::getline(lines, l);) t += (l.rfind(key + ":", 0) == 0 ? key + ": " + value : l) + "\n";
    return t;
  };
  const auto missing = write("reshard_test_host_missing.yaml", without("connect_time"));
  EXPECT_HAS(reshard::test::config_error([&] { HostProfile::load(missing); }),
             missing.string() + ":");
  EXPECT_HAS(reshard::test::config_error([&] { HostProfile::load(missing); }), "connect_time: required key is missing");
  const auto negative = write("reshard_test_host_negative.yaml", replaced("message_latency", "-5us"));
  const std::string neg = reshard::test::config_error([&] { HostProfile::load(negative); });
  EXPECT_HAS(neg, negative.string() + ":");
  EXPECT_HAS(neg, "message_latency");
  const auto zero = write("reshard_test_host_zero.yaml", replaced("transport_rate_all", "0GBps"));
  EXPECT_HAS(reshard::test::config_error([&] { HostProfile::load(zero); }), "transport_rate_all: must be a positive rate");
  const auto other = write("reshard_test_host_other.yaml", replaced("profile", "reshard"));
  EXPECT_FALSE(HostProfile::is_host_profile(other));
  EXPECT_HAS(reshard::test::config_error([&] { HostProfile::load(other); }), "a host profile says 'profile: host'");
  const auto unknown = write("reshard_test_host_unknown.yaml", text + "per_op: 3us\n");
  EXPECT_HAS(reshard::test::config_error([&] { HostProfile::load(unknown); }), "per_op: unknown key");
  const auto cores = write("reshard_test_host_cores.yaml", replaced("cores", "0"));
  EXPECT_HAS(reshard::test::config_error([&] { HostProfile::load(cores); }), "cores");
}

// The cuda backend's model (model/device_cost.hpp), round constants: t_call = 1 us, R = 1 GB/s.
DeviceProfile device_profile() {
  DeviceProfile p;
  p.machine = "test";
  p.call_time = Seconds{1e-6};
  p.copy_rate = BytesPerSecond{1e9};
  return p;
}

// A transfer of 1 MiB + 1 B, GPU 0 -> 1 (H = 1 hop), one step:
//   calls  = 1 (the step's launch)                  T_issue = 1 us
//   copied = (1 MiB + 1) (1 + 2 x 1) = 3 145 731 B   T_copy  = 3.145731 ms
//   T      = max = T_copy
// The same with t_call = 10 ms: T_issue = 10 ms, the larger.
// (A model that counted calls per chunk gives 27 at 512 KiB chunks; one that forgot the pack or the
// unpack copies 2 097 154 B: both differ here.)
TEST(DeviceCost, TransferIsTheLargerOfTheLaunchAndCopying) {
  const Schedule s = transfers({{0, 1, kMiB + 1, {}}});
  const DevicePrediction p = estimate_device(s, device_profile());
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].calls, 1);
  EXPECT_EQ(p.steps[0].copied.value, 3 * (kMiB + 1));
  EXPECT_NEAR(p.steps[0].issue.value, 1e-6, 1e-15);
  EXPECT_NEAR(p.steps[0].copy.value, 3.145731e-3, 1e-15);
  EXPECT_NEAR(p.time.value, 3.145731e-3, 1e-15);
  DeviceProfile slow = device_profile();
  slow.call_time = Seconds{10e-3};
  EXPECT_NEAR(estimate_device(s, slow).time.value, 10e-3, 1e-12);
}

// A chain of 1 MiB in 256 KiB chunks (its own chunk, not the schedule's 512 KiB) along 0 -> 1 and
// 1 -> 2, 1 -> 3, then a transfer 2 -> 3 of 512 KiB after it (step 1).
Schedule chain_then_transfer() {
  Schedule s;
  s.params.chunk = Bytes{512 << 10};
  s.chains.push_back(Chain{{{0, 1}, {1, 2}, {1, 3}}, Bytes{256 << 10}});
  Op o;
  o.src = 0;
  o.dst = 3;
  o.chain = 0;
  o.bytes = Bytes{kMiB};
  s.add_op(o, {});
  Op t;
  t.src = 2;
  t.dst = 3;
  t.bytes = Bytes{512 << 10};
  const std::vector<std::int64_t> after_chain{0};
  s.add_op(t, after_chain);
  return s;
}

// A chain of 1 MiB along 0 -> 1 and 1 -> 2, 1 -> 3 (a tree: H = 3 hops): copied = 1 MiB (1 + 2 x 3)
// = 7 MiB, whatever its chunks; and a transfer 2 -> 3 of 512 KiB after it (step 1): copied =
// 1.5 MiB. One launch per step; with t_call = 2 ms: step 0 = max(2 ms, 7.340032 ms), step 1 =
// max(2 ms, 1.572864 ms) = 2 ms: T = 9.340032 ms.
TEST(DeviceCost, ChainHopsCopyPerHopAndStepsAdd) {
  const Schedule s = chain_then_transfer();
  DeviceProfile prof = device_profile();
  prof.call_time = Seconds{2e-3};
  const DevicePrediction p = estimate_device(s, prof);
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0].calls, 1);
  EXPECT_EQ(p.steps[0].copied.value, 7 * kMiB);
  EXPECT_EQ(p.steps[1].calls, 1);
  EXPECT_EQ(p.steps[1].copied.value, 3 * (512 << 10));
  EXPECT_NEAR(p.steps[0].time.value, 7.340032e-3, 1e-12);
  EXPECT_NEAR(p.steps[1].time.value, 2e-3, 1e-12);
  EXPECT_NEAR(p.time.value, 9.340032e-3, 1e-12);
  EXPECT_EQ(p.calls, 2);
}

// reshard's engine over NCCL (T_issue, model/cost.hpp), on the chain and transfer above, S = 8
// slots: the chain (1 MiB in 256 KiB chunks, n = 4) moves in windows of S / 2 = 4 chunks: x = 1,
// along 0 -> 1 (depth 1) and 1 -> 2, 1 -> 3 (depth 2) in step 0, then 2 -> 3 (512 KiB, n = 1, a
// transfer's window S = 8 chunks: x = 1) in step 1. A hop of depth d carries window c in wave
// c + d - 1: 0 -> 1 in wave 0, 1 -> 2 and 1 -> 3 in wave 1.
//   GPU 0: start event 1, sends 0 -> 1: 1; wave 0, packs: (2 + 1) x 1 + 1 = 4            -> 6
//   GPU 1: receives 0 -> 1: x + 1 = 2; sends 1 -> 2, 1 -> 3: 2; waves 0-1, unpacks: 3 x 2 + 1 = 7
//                                                                                         -> 11
//   GPU 2: receives 1 -> 2: 2; wave 1: 3 + 1 = 4; step 1 sender: x + 1 = 2, wave 0, packs: 4 -> 12
//   GPU 3: receives 1 -> 3: 2 + 4; step 1 receiver: 2 + 4                                   -> 12
// With S = 2 the chain's window is 1 chunk: x = 4, waves 0-3 (0 -> 1) and 1-4 (the others); the
// transfer's window 2 chunks: x = 1.
//   GPU 0: 1 + 4 sends; waves 0-3, packs: 3 x 4 + 1 = 13                                     -> 18
//   GPU 1: receives 4 + 1; sends 2 x 4; waves 0-4, unpacks: 3 x 5 + 1 = 16                  -> 29
//   GPU 2: receives 4 + 1; waves 1-4: 3 x 4 + 1 = 13; step 1: 2 + 4                         -> 24
//   GPU 3: the same as GPU 2                                                                 -> 24
// A wrong rule fails here: a call per chunk instead of per window (S = 8, GPU 0: 9), groups over
// the whole step's waves (S = 2, GPU 0: 5 waves, 21), a forwarder packing as a root does (S = 2,
// GPU 1: 34).
TEST(EngineCalls, ChainAndTransferPerGpuWindowWaveAndStep) {
  Schedule s = chain_then_transfer();
  ASSERT_EQ(s.slots, 8);
  EXPECT_EQ(engine_calls(s, 5), (std::vector<std::int64_t>{6, 11, 12, 12, 0}));
  s.slots = 2;
  EXPECT_EQ(engine_calls(s, 5), (std::vector<std::int64_t>{18, 29, 24, 24, 0}));
  // Two transfers from GPU 0 in one step, 3 and 1 chunks (one window each): 2 + 2 sends and start
  // events, wave 0, packs: 4 -> 8; GPUs 1 and 2: 2 + 4 = 6; a local copy issues nothing.
  const Schedule two = transfers({{0, 1, kMiB + 1, {}}, {0, 2, 512 << 10, {}}, {3, 3, kMiB, {}}});
  EXPECT_EQ(engine_calls(two, 4), (std::vector<std::int64_t>{8, 6, 6, 0}));
}

TEST(DeviceProfile, ShippedProfileReadsAndBadFilesNameFileLineAndKey) {
  const auto shipped = std::filesystem::path(RESHARD_SOURCE_DIR) / "params" / "gpu-check-h200.yaml";
  ASSERT_TRUE(DeviceProfile::is_device_profile(shipped));
  const DeviceProfile p = DeviceProfile::load(shipped);
  EXPECT_NEAR(p.call_time.value, 2.3096e-6, 1e-12);
  EXPECT_NEAR(p.copy_rate.value, 2148e9, 1);
  EXPECT_HAS(p.call_time_source, "fitted");
  EXPECT_FALSE(HostProfile::is_host_profile(shipped));
  const std::string text = "profile: device\nmachine: m\ncall_time: 2us\ncopy_rate: 1000GBps\n"
                           "call_time_source: a\ncopy_rate_source: b\n";
  EXPECT_NEAR(DeviceProfile::load(write("reshard_test_device_good.yaml", text)).copy_rate.value, 1e12, 1);
  const auto missing = write("reshard_test_device_missing.yaml", "profile: device\nmachine: m\ncopy_rate: 1000GBps\n"
                                                                 "call_time_source: a\ncopy_rate_source: b\n");
  const std::string e = reshard::test::config_error([&] { DeviceProfile::load(missing); });
  EXPECT_HAS(e, missing.string() + ":");
  EXPECT_HAS(e, "call_time: required key is missing");
  std::string zero = text;
  zero.replace(zero.find("2us"), 3, "0us");
  EXPECT_HAS(reshard::test::config_error([&] { DeviceProfile::load(write("reshard_test_device_zero.yaml", zero)); }),
             "call_time: must be a positive duration");
  const auto other = write("reshard_test_device_other.yaml", "profile: host\n" + text.substr(text.find('\n') + 1));
  EXPECT_FALSE(DeviceProfile::is_device_profile(other));
  EXPECT_HAS(reshard::test::config_error([&] { DeviceProfile::load(other); }), "a device profile says 'profile: device'");
  EXPECT_HAS(reshard::test::config_error([&] { DeviceProfile::load(write("reshard_test_device_unknown.yaml", text + "per_op: 3us\n")); }),
             "per_op: unknown key");
}

}  // namespace

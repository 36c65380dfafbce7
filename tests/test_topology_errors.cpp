// Bad topology files: each gives one ConfigError naming the file, the line and the key or device;
// the command prints it as one line on stderr and exits non-zero. Also the command's JSON contract.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "reshard/model/errors.hpp"
#include "reshard/model/topology.hpp"

using namespace reshard::model;

namespace {

struct Expected {
  int line;
  std::string key;
  std::string says;  // a fragment of the reason
};

void expect_error(const std::string& text, const Expected& e) {
  try {
    (void)Topology::parse(text, "bad.yaml");
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const ConfigError& err) {
    EXPECT_EQ(err.file(), "bad.yaml");
    EXPECT_EQ(err.line(), e.line) << err.what();
    EXPECT_EQ(err.key(), e.key) << err.what();
    EXPECT_NE(err.reason().find(e.says), std::string::npos) << err.what();
  }
}

const std::string kGenerated = "name: x\ncluster:\n  template: dgx-h100\n  nodes: 2\nfabric:\n  spines: 4\n";

// A tiny explicit topology: two single-GPU nodes, each with a NIC, on one leaf.
std::string explicit_topology(const std::string& second_nic_link) {
  return "devices:\n"                                           // 1
         "  - {name: a/gpu0, kind: gpu, node: a}\n"             // 2
         "  - {name: b/gpu0, kind: gpu, node: b}\n"             // 3
         "  - {name: a/nic0, kind: nic, node: a}\n"             // 4
         "  - {name: b/nic0, kind: nic, node: b}\n"             // 5
         "  - {name: leaf0, kind: leaf}\n"                      // 6
         "links:\n"                                             // 7
         "  - {from: a/gpu0, to: a/nic0, kind: pcie, bandwidth: 64GBps}\n"        // 8
         "  - {from: b/gpu0, to: b/nic0, kind: pcie, bandwidth: 64GBps}\n"        // 9
         "  - {from: a/nic0, to: leaf0, kind: network, bandwidth: 400Gbps}\n" +  // 10
         second_nic_link;                                                          // 11
}

struct CommandResult {
  int status = -1;
  std::string out, err;
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CommandResult run_reshard(const std::string& args) {
  const auto dir = std::filesystem::temp_directory_path() / ("reshard-topo-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cmd = std::string("'") + RESHARD_BINARY + "' " + args + " > '" + (dir / "out").string() +
                          "' 2> '" + (dir / "err").string() + "'";
  const int raw = std::system(cmd.c_str());
  CommandResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  return r;
}

}  // namespace

TEST(TopologyErrors, UnknownKey) {
  expect_error(kGenerated + "  colour: red\n", {7, "fabric.colour", "unknown key"});
  expect_error("cluster:\n  template: dgx-h100\n  nodes: 2\n  gpus: 8\n", {4, "cluster.gpus", "unknown key"});
  expect_error(kGenerated + "latency:\n  nvswitch: 1us\n", {8, "latency.nvswitch", "unknown key"});
  expect_error(explicit_topology("  - {from: b/nic0, to: leaf0, kind: network, bandwidth: 400Gbps, speed: 1}\n"),
               {11, "links[3].speed", "unknown key"});
}

TEST(TopologyErrors, MissingOrWrongUnit) {
  expect_error("cluster:\n  template: dgx-h100\n  nodes: 2\n  nic_speed: 400\n", {4, "cluster.nic_speed", "no unit"});
  expect_error("cluster:\n  template: dgx-h100\n  nodes: 2\n  nic_speed: 400GB\n",
               {4, "cluster.nic_speed", "unknown bandwidth unit"});
  expect_error(kGenerated + "latency:\n  nvlink: 2\n", {8, "latency.nvlink", "no unit"});
  expect_error(kGenerated + "latency:\n  pcie: 2GBps\n", {8, "latency.pcie", "unknown duration unit"});
  expect_error(explicit_topology("  - {from: b/nic0, to: leaf0, kind: network, bandwidth: 50}\n"),
               {11, "links[3].bandwidth", "no unit"});
}

TEST(TopologyErrors, NegativeOrZeroBandwidth) {
  expect_error(explicit_topology("  - {from: b/nic0, to: leaf0, kind: network, bandwidth: -400Gbps}\n"),
               {11, "links[3].bandwidth", "negative bandwidth"});
  expect_error(explicit_topology("  - {from: b/nic0, to: leaf0, kind: network, bandwidth: 0Gbps}\n"),
               {11, "links[3].bandwidth", "must be positive"});
  expect_error("cluster:\n  template: dgx-h100\n  nodes: 2\n  nic_speed: -1Gbps\n",
               {4, "cluster.nic_speed", "negative bandwidth"});
  expect_error(kGenerated + "  oversubscription: -2\n", {7, "fabric.oversubscription", "positive"});
}

// Found by fuzz_topology: a finite but huge bandwidth (6.3e97 GB/s) overflowed the integer
// capacities of the network cuts (a signed overflow under UBSan). Bandwidths are at most 1 PB/s, and
// the links around one GPU may not add up past 2^60 B/s (1 153 links of 1 PB/s do).
TEST(TopologyErrors, HugeBandwidthIsRefusedNotOverflowed) {
  expect_error(explicit_topology("  - {from: b/nic0, to: leaf0, kind: network, bandwidth: 63333333333333333333GBps}\n"),
               {11, "links[3].bandwidth", "above 1 PB/s"});
  expect_error("cluster:\n  template: dgx-h100\n  nodes: 2\n  nic_speed: 8001Tbps\n",
               {4, "cluster.nic_speed", "above 1 PB/s"});
  // 1 PB/s itself is a bandwidth (8000 Tb/s = 1e15 B/s).
  EXPECT_NO_THROW(Topology::parse(explicit_topology("  - {from: b/nic0, to: leaf0, kind: network, bandwidth: 1000TBps}\n"),
                                  "ok.yaml"));
  // 1 200 parallel 1 PB/s links from a/gpu0 to its NIC: 1.2e18 B/s > 2^60 B/s.
  std::string many = explicit_topology("  - {from: b/nic0, to: leaf0, kind: network, bandwidth: 400Gbps}\n");
  for (int i = 0; i < 1200; ++i) many += "  - {from: a/gpu0, to: a/nic0, kind: pcie, bandwidth: 1000TBps}\n";
  expect_error(many, {0, "links", "add up to more than 10^18 B/s"});
}

TEST(TopologyErrors, UnknownTemplate) {
  expect_error("name: x\ncluster:\n  template: dgx-a100\n  nodes: 2\n",
               {3, "cluster.template", "unknown node template 'dgx-a100'; known templates: dgx-h100"});
}

TEST(TopologyErrors, GeneratorShape) {
  expect_error("cluster:\n  template: gb200-nvl72\n  nodes: 18\n", {3, "cluster.nodes", "counted in racks"});
  expect_error("cluster:\n  template: dgx-h100\n  racks: 2\n", {3, "cluster.racks", "counted in nodes"});
  expect_error("cluster:\n  template: dgx-h100\n  nodes: 0\n", {3, "cluster.nodes", "positive integer"});
  // (Several leaves without fabric.spines: one spine per rail, tests/test_no_silent_guess.cpp.)
  expect_error(kGenerated + "  core: {leaf_groups_per_pod: 1, switches: 6}\n",
               {7, "fabric.core.switches", "multiple of the spines"});
  expect_error("name: x\n", {1, "cluster", "required key is missing"});
}

TEST(TopologyErrors, ExplicitDevicesAndLinks) {
  expect_error(explicit_topology("  - {from: b/nic0, to: leaf9, kind: network, bandwidth: 400Gbps}\n"),
               {11, "links[3].to", "unknown device 'leaf9'"});
  expect_error(explicit_topology("  - {from: b/nic0, to: leaf0, kind: ethernet, bandwidth: 400Gbps}\n"),
               {11, "links[3].kind", "unknown link kind"});
  expect_error("devices:\n  - {name: g, kind: gpu, node: a}\n  - {name: g, kind: nic}\nlinks: []\n",
               {3, "devices[1].name", "duplicate device name 'g'"});
  expect_error("devices:\n  - {name: g, kind: gpu}\nlinks: []\n", {2, "devices[0].node", "must name its node"});
  expect_error("devices:\n  - {name: g, kind: tpu, node: a}\nlinks: []\n", {2, "devices[0].kind", "unknown device kind"});
}

TEST(TopologyErrors, UnreachableGpuNamesBothDevices) {
  // b/nic0 is never connected to the leaf: b/gpu0 cannot be reached from a/gpu0.
  expect_error(explicit_topology(""), {3, "b/gpu0", "GPU 'a/gpu0' cannot reach GPU 'b/gpu0'"});
  // One-way link leaf -> b/nic0 only: b/gpu0 is reached, but cannot send back.
  expect_error(explicit_topology("  - {from: leaf0, to: b/nic0, kind: network, bandwidth: 400Gbps, duplex: false}\n"),
               {3, "b/gpu0", "GPU 'b/gpu0' cannot reach GPU 'a/gpu0'"});
  // With the link in both directions it loads.
  EXPECT_EQ(Topology::parse(explicit_topology("  - {from: b/nic0, to: leaf0, kind: network, bandwidth: 400Gbps}\n"),
                            "ok.yaml")
                .gpu_count(),
            2);
}

TEST(TopologyCommand, BadFileIsOneLineOnStderrAndNonZeroExit) {
  const auto dir = std::filesystem::temp_directory_path() / ("reshard-topo-bad-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto bad = dir / "bad.yaml";
  std::ofstream(bad) << "name: bad\ncluster:\n  template: dgx-h100\n  nodes: 2\n  nic_speed: 400\n";
  const auto r = run_reshard("topo '" + bad.string() + "'");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(r.out.empty()) << r.out;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(bad.string() + ":5: cluster.nic_speed:"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

TEST(TopologyCommand, JsonAcceptance) {
  struct Case {
    const char* file;
    int gpus, domains;
    double nvlink, nic;
  };
  for (const auto& c : {Case{"dgx-h100-64n.yaml", 512, 64, 4.5e11, 5e10}, Case{"gb200-nvl72-16r.yaml", 1152, 16, 9e11, 5e10}}) {
    SCOPED_TRACE(c.file);
    const auto r = run_reshard(std::string("topo '") + RESHARD_SOURCE_DIR + "/topologies/" + c.file + "' --json");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("gpus").get<int>(), c.gpus);
    EXPECT_EQ(j.at("nvlink_domains").get<int>(), c.domains);
    EXPECT_DOUBLE_EQ(j.at("gpu_nvlink_Bps").get<double>(), c.nvlink);
    EXPECT_DOUBLE_EQ(j.at("gpu_nic_Bps").get<double>(), c.nic);
    EXPECT_TRUE(j.contains("nodes"));
    EXPECT_TRUE(j.contains("links"));
    EXPECT_TRUE(j.contains("bisection_Bps"));
  }
  // The readable form is a table, not JSON.
  const auto r = run_reshard(std::string("topo '") + RESHARD_SOURCE_DIR + "/topologies/dgx-h100-2n.yaml'");
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("NVLink domains: 2 (8 GPUs each)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bisection:      400 GB/s per direction"), std::string::npos) << r.out;
}

// A NIC faster than its host link: the library returns the warning, each command prints it once on
// stderr (and still succeeds); topo shows what the host link leaves usable, plan names the host
// links in the binding cut.
TEST(TopologyCommand, FastNicWarningAndHostLinkBound) {
  const auto dir = std::filesystem::temp_directory_path() / ("reshard-topo-warn-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto topo = dir / "fast.yaml";
  std::ofstream(topo) << "name: fast\ncluster:\n  template: dgx-h100\n  nodes: 2\n  nic_speed: 1600Gbps\n"
                         "fabric:\n  spines: 4\n";
  const std::string warning = "reshard: warning: " + topo.string() +
                              ":5: cluster.nic_speed: 200 GB/s exceeds the GPU<->NIC host link (PCIe 64.0 GB/s of the "
                              "dgx-h100 template): the host link caps each GPU's network bandwidth at 64.0 GB/s\n";
  auto r = run_reshard("topo '" + topo.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, warning);
  EXPECT_NE(r.out.find("GPU NIC:        200 GB/s per direction (host link PCIe 64.0 GB/s: 64.0 GB/s usable)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("GPU host link:  PCIe 64.0 GB/s per direction"), std::string::npos) << r.out;
  // JSON on stdout stays parseable; the warning goes to stderr and into "warnings".
  r = run_reshard("topo '" + topo.string() + "' --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, warning);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j.at("gpu_nic_Bps").get<double>(), 200e9);
  EXPECT_DOUBLE_EQ(j.at("gpu_host_link_Bps").get<double>(), 64e9);
  EXPECT_DOUBLE_EQ(j.at("gpu_network_Bps").get<double>(), 64e9);
  EXPECT_DOUBLE_EQ(j.at("gpu_network_max_Bps").get<double>(), 64e9);
  EXPECT_EQ(j.at("host_link_kind").get<std::string>(), "pcie");
  ASSERT_EQ(j.at("warnings").size(), 1u);

  // plan: node 0 holds the model 8 times (Megatron DP8), node 1 needs it 8 times (vLLM DP8). The
  // model enters domain 1 through 8 host links of 64 GB/s.
  const auto scenario = dir / "s.yaml";
  std::ofstream(scenario) << "name: s\nmodel: " << RESHARD_SOURCE_DIR << "/models/tiny-gqa.yaml\ntopology: fast.yaml\n"
                          << "source: {framework: megatron, tp: 1, gpus: 0-7}\n"
                          << "destination: {framework: vllm, tp: 1, dp: 8, gpus: 8-15}\n";
  r = run_reshard("plan '" + scenario.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, warning);
  EXPECT_NE(r.out.find("(dest_domain_ingress, domain 1: host links PCIe 64.0 GB/s per GPU)"), std::string::npos) << r.out;
  r = run_reshard("plan '" + scenario.string() + "' --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto p = nlohmann::json::parse(r.out);
  EXPECT_EQ(p.at("bound_where").get<std::string>(), "domain 1: host links PCIe 64.0 GB/s per GPU");
  std::filesystem::remove_all(dir);
}

// topo --json: the host link keys on shipped clusters. DGX H100: 64 GB/s PCIe, NIC 50 GB/s usable
// in full. The irregular example: a GPU without a NIC (0), PCIe 32-64 GB/s, 25-50 GB/s usable.
TEST(TopologyCommand, JsonHostLinkKeys) {
  auto r = run_reshard(std::string("topo '") + RESHARD_SOURCE_DIR + "/topologies/dgx-h100-64n.yaml' --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j.at("gpu_host_link_Bps").get<double>(), 64e9);
  EXPECT_DOUBLE_EQ(j.at("gpu_network_Bps").get<double>(), 50e9);
  EXPECT_EQ(j.at("host_link_kind").get<std::string>(), "pcie");
  EXPECT_TRUE(j.at("warnings").empty());
  r = run_reshard(std::string("topo '") + RESHARD_SOURCE_DIR + "/topologies/irregular-example.yaml' --json");
  ASSERT_EQ(r.status, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j.at("gpu_host_link_Bps").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j.at("gpu_host_link_max_Bps").get<double>(), 64e9);
  EXPECT_DOUBLE_EQ(j.at("gpu_network_Bps").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j.at("gpu_network_max_Bps").get<double>(), 50e9);
}

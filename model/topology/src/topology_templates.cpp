// Node templates: the published figures of each system, one row per template. Sources are cited
// per value and collected in docs/topology.md ("Hardware figures and their sources").
//
// Per-direction figures: a full-duplex link is two directed links each with this bandwidth.
// "NVLink per GPU" is the GPU's total NVLink bandwidth to its domain's NVSwitch fabric, modelled as
// one GPU <-> fabric link pair (the fabric vertex stands for all NVSwitch chips of the domain).
#include "topology_impl.hpp"

namespace reshard::model::detail {

using namespace reshard::model::literals;

const std::vector<NodeTemplate>& node_templates() {
  static const std::vector<NodeTemplate> table{
      // DGX H100: 8 GPUs (vendor datasheet); NVLink 4, 18 links, 900 GB/s bidirectional =
      // 450 GB/s per direction (datasheet); 8 x ConnectX-7 400 Gb/s = 50 GB/s, one per GPU, paired
      // 1:1 through a PCIe Gen5 switch (datasheet); PCIe Gen5 x16 about 64 GB/s per direction
      // (non-datasheet source).
      // HBM: H100 SXM 3.35 TB/s (datasheet); 80 GB per GPU (H100 SXM datasheet; DGX H100 640 GB
      // of GPU memory in all).
      {"dgx-h100", 8, 1, false, 450_GBps, 400_Gbps, 64_GBps, LinkKind::PCIe, 3350_GBps, 80_GB},
      // DGX H200: same NVLink 4 fabric and NICs as DGX H100 (one datasheet for DGX H100 and H200).
      // HBM: H200 4.8 TB/s (datasheet); 141 GB HBM3e per GPU (H200 datasheet; DGX H200 1128 GB in
      // all).
      {"dgx-h200", 8, 1, false, 450_GBps, 400_Gbps, 64_GBps, LinkKind::PCIe, 4800_GBps, 141_GB},
      // HGX H800: 8 GPUs; NVLink 4 with 8 links, 400 GB/s bidirectional = 200 GB/s per direction
      // (H800 SXM datasheet); HBM 3.35 TB/s and 80 GB as H100 SXM (datasheet). NICs: the
      // datasheet sets none; 8 x 400 Gb/s ConnectX-7, one per GPU behind a PCIe Gen5 switch, as
      // DGX H100 (an assumption, docs/topology.md).
      {"hgx-h800", 8, 1, false, 200_GBps, 400_Gbps, 64_GBps, LinkKind::PCIe, 3350_GBps, 80_GB},
      // HGX H20: 8 GPUs; NVLink 4, 900 GB/s bidirectional = 450 GB/s per direction; HBM3 4.0 TB/s,
      // 96 GB (H20 datasheet). NICs: 8 x 400 Gb/s, one per GPU, as DGX H100 (an assumption).
      {"hgx-h20", 8, 1, false, 450_GBps, 400_Gbps, 64_GBps, LinkKind::PCIe, 4000_GBps, 96_GB},
      // DGX B200: 8 GPUs; NVLink 5, 1.8 TB/s bidirectional = 900 GB/s per direction; 8 x ConnectX-7
      // 400 Gb/s (datasheet); host link PCIe Gen5 x16 about 64 GB/s (non-datasheet source).
      // HBM: B200 8 TB/s (datasheet); 180 GB per GPU (DGX B200 datasheet: 1440 GB of GPU memory
      // over 8 GPUs).
      {"dgx-b200", 8, 1, false, 900_GBps, 400_Gbps, 64_GBps, LinkKind::PCIe, 8000_GBps, 180_GB},
      // GB200 NVL72: 18 compute trays x 4 GPUs = 72 GPUs in one NVLink domain; 1.8 TB/s
      // bidirectional = 900 GB/s per direction per GPU; 4 x ConnectX-7 400 Gb/s per tray = one per
      // GPU (datasheet); NIC host link PCIe Gen5 x16 about 64 GB/s (non-datasheet source).
      // HBM: 8 TB/s per GB200 GPU (datasheet); 186 GB HBM3e per GPU (datasheet: up to 13.4 TB per
      // rack over its 72 GPUs).
      {"gb200-nvl72", 4, 18, true, 900_GBps, 400_Gbps, 64_GBps, LinkKind::PCIe, 8000_GBps, 186_GB},
      // GB300 NVL72: NVLink as GB200 (datasheet); 4 x ConnectX-8 per tray at 800 Gb/s per GPU
      // (third-party figure). ConnectX-8 has a PCIe Gen6 x16 host interface, about
      // 128 GB/s per direction (twice Gen5 x16; ConnectX-8 product brief), so the
      // host link does not cap the 100 GB/s NIC.
      // HBM: 8 TB/s per GB300 GPU (datasheet); 288 GB HBM3e per Blackwell Ultra GPU (datasheet).
      {"gb300-nvl72", 4, 18, true, 900_GBps, 800_Gbps, 128_GBps, LinkKind::PCIe, 8000_GBps, 288_GB},
  };
  return table;
}

const NodeTemplate* find_template(const std::string& name) {
  for (const auto& t : node_templates())
    if (name == t.name) return &t;
  return nullptr;
}

}  // namespace reshard::model::detail

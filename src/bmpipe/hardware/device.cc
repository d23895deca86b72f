#include "bmpipe/hardware/device.h"

#include <filesystem>

#include <fmt/format.h>

#include "bmpipe/core/document.h"
#include "bmpipe/core/json_cursor.h"

namespace bmpipe {
namespace {

constexpr Bytes kMiB = Bytes{1} << 20;

// Memory sizes are what nvidia-smi reports as total; bandwidths are per direction (NVLink3 600 GB/s
// and NVLink4 900 GB/s are both directions together); inter-node is one NIC per device
// (InfiniBand HDR 200 Gb/s for A100 systems, NDR 400 Gb/s for H100/H200).
std::vector<DeviceSpec> Presets() {
  std::vector<DeviceSpec> presets;
  auto add = [&](const char* name, double tflops, Bytes memory, double hbm_tb_s, double intra_gb_s, double inter_gb_s,
                 bool approximate = false) {
    DeviceSpec d;
    d.name = name;
    d.approximate = approximate;
    d.peak_flops = tflops * 1e12;
    d.memory_bytes = memory;
    d.memory_bandwidth_bytes_per_s = hbm_tb_s * 1e12;
    d.intra_node_bandwidth_bytes_per_s = intra_gb_s * 1e9;
    d.intra_node_latency_s = 5e-6;
    d.inter_node_bandwidth_bytes_per_s = inter_gb_s * 1e9;
    d.inter_node_latency_s = 10e-6;
    presets.push_back(d);
  };
  // Efficiencies fitted by `bmpipe validate` on its calibration runs (docs/fidelity.md): A100 on
  // Korthikanti et al.'s per-layer times of GPT-22B, H100 (GEMM only) on Llama 3 405B's
  // 8192-GPU run. tests/validate keeps these equal to the fit. H200 is the H100's chip.
  const Efficiencies ampere{0.681, 0.50, 0.984, 0.80};
  const Efficiencies hopper{0.577, 0.50, 0.984, 0.80};
  add("a100-40gb", 312, 40960 * kMiB, 1.555, 300, 25);
  presets.back().efficiency = ampere;
  add("a100-80gb", 312, 81920 * kMiB, 2.039, 300, 25);
  presets.back().efficiency = ampere;
  add("h100-80gb", 989, 81559 * kMiB, 3.35, 450, 50);
  presets.back().efficiency = hopper;
  add("h200-141gb", 989, 143771 * kMiB, 4.8, 450, 50);
  presets.back().efficiency = hopper;
  // L4: PCIe Gen4 x16 between devices, 100 Gb/s Ethernet between nodes.
  add("l4", 121, 23034 * kMiB, 0.3, 32, 12.5);
  // Ascend 910B: secondary sources differ (about 320 TFLOP/s FP16, 64 GB HBM, HCCS inside a
  // node, 200 Gb/s RoCE between nodes).
  add("ascend-910b", 320, 65536 * kMiB, 1.6, 196, 25, /*approximate=*/true);
  return presets;
}

std::string PresetList() { return fmt::format("{}", fmt::join(DevicePresetNames(), ", ")); }

// A rate between `min` and `max`: wide enough for any real device, narrow enough that a unit
// mistake (FLOP/s given in TFLOP/s, say) is caught here, not as an absurd plan.
double ReadRate(const JsonCursor& c, double min, double max, const char* fix) {
  const double v = c.Number();
  if (!(v >= min && v <= max)) c.Fail(fmt::format("must lie between {:g} and {:g}; {}", min, max, fix));
  return v;
}

double ReadFraction(const JsonCursor& c) {
  const double v = c.Number();
  if (!(v >= 0.01 && v <= 1)) c.Fail("an efficiency is a fraction of the peak in [0.01, 1]");
  return v;
}

DeviceSpec ReadDeviceTree(const Json& doc) {
  JsonCursor root(doc, "");
  root.ExpectKeys({"name", "based_on", "approximate", "peak_flops", "memory_bytes", "memory_bandwidth_bytes_per_s",
                   "devices_per_node", "intra_node_bandwidth_bytes_per_s", "intra_node_latency_s",
                   "inter_node_bandwidth_bytes_per_s", "inter_node_latency_s", "efficiency"});
  DeviceSpec d;
  const bool based = root.Has("based_on");
  if (based) {
    JsonCursor b = root.Required("based_on", "a device preset");
    Result<DeviceSpec> preset = DevicePreset(b.String());
    if (!preset.ok()) b.Fail(preset.error().message);
    d = preset.value();
  }
  // Without a preset to start from, every figure is required.
  auto field = [&](const char* key, const char* what) -> std::optional<JsonCursor> {
    if (based) return root.Optional(key);
    return root.Required(key, what);
  };
  d.name = root.Has("name") ? root.Required("name", "").String() : (based ? d.name + " (modified)" : "custom device");
  if (auto a = root.Optional("approximate")) d.approximate = a->Bool();
  if (auto v = field("peak_flops", "dense 16-bit FLOP/s, e.g. 989e12")) {
    d.peak_flops = ReadRate(*v, 1e9, 1e18, "give the dense 16-bit peak in FLOP/s, e.g. 989e12");
  }
  if (auto v = field("memory_bytes", "device memory in bytes")) {
    d.memory_bytes = v->ByteCount();
    if (d.memory_bytes == 0) v->Fail("give the device memory in bytes, e.g. 80e9");
  }
  if (auto v = field("memory_bandwidth_bytes_per_s", "HBM bandwidth in bytes/s")) {
    d.memory_bandwidth_bytes_per_s = ReadRate(*v, 1e8, 1e15, "give the HBM bandwidth in bytes/s, e.g. 3.35e12");
  }
  if (auto v = field("devices_per_node", "devices in one node")) {
    d.devices_per_node = static_cast<int>(v->Integer(1, 1 << 16, "give how many devices share a node, e.g. 8"));
  }
  if (auto v = field("intra_node_bandwidth_bytes_per_s", "per-device bandwidth inside a node, one direction")) {
    d.intra_node_bandwidth_bytes_per_s = ReadRate(*v, 1e6, 1e15, "give bytes/s per device and direction, e.g. 450e9");
  }
  if (auto v = field("intra_node_latency_s", "latency of one message inside a node, seconds")) {
    d.intra_node_latency_s = ToSeconds(v->Seconds());
  }
  if (auto v = field("inter_node_bandwidth_bytes_per_s", "per-device bandwidth between nodes, one direction")) {
    d.inter_node_bandwidth_bytes_per_s = ReadRate(*v, 1e6, 1e15, "give bytes/s per device and direction, e.g. 50e9");
  }
  if (auto v = field("inter_node_latency_s", "latency of one message between nodes, seconds")) {
    d.inter_node_latency_s = ToSeconds(v->Seconds());
  }
  if (auto e = root.Optional("efficiency")) {
    e->ExpectKeys({"gemm", "attention", "memory", "link"});
    if (auto v = e->Optional("gemm")) d.efficiency.gemm = ReadFraction(*v);
    if (auto v = e->Optional("attention")) d.efficiency.attention = ReadFraction(*v);
    if (auto v = e->Optional("memory")) d.efficiency.memory = ReadFraction(*v);
    if (auto v = e->Optional("link")) d.efficiency.link = ReadFraction(*v);
  }
  return d;
}

}  // namespace

std::vector<std::string> DevicePresetNames() {
  std::vector<std::string> names;
  for (const DeviceSpec& d : Presets()) names.push_back(d.name);
  return names;
}

Result<DeviceSpec> DevicePreset(const std::string& name) {
  for (const DeviceSpec& d : Presets()) {
    if (d.name == name) return d;
  }
  return InvalidInput(fmt::format("unknown device preset '{}'{}; presets: {}", name,
                                  DidYouMean(name, DevicePresetNames()), PresetList()));
}

Result<DeviceSpec> LoadDeviceFile(const std::string& path) {
  Result<Json> doc = LoadDocument(path);
  if (!doc.ok()) return doc.error();
  return ReadDocument<DeviceSpec>(path, [&] { return ReadDeviceTree(doc.value()); });
}

Result<DeviceSpec> LoadDevice(const std::string& name_or_path) {
  for (const std::string& n : DevicePresetNames()) {
    if (n == name_or_path) return DevicePreset(n);
  }
  std::error_code ec;
  if (std::filesystem::exists(name_or_path, ec)) return LoadDeviceFile(name_or_path);
  return InvalidInput(fmt::format("--device '{}' is neither a preset{} nor a device file; presets: {}", name_or_path,
                                  DidYouMean(name_or_path, DevicePresetNames()), PresetList()));
}

}  // namespace bmpipe

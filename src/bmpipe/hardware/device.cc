#include "bmpipe/hardware/device.h"

#include <filesystem>

#include <fmt/format.h>

#include "bmpipe/core/document.h"
#include "bmpipe/core/json_cursor.h"

namespace bmpipe {

// The peaks a device file may state (README, "Limits"): beyond them a figure is a unit mistake.
constexpr double kMinPeakFlops = 1e9;
constexpr double kMaxPeakFlops = 1e18;
namespace {

constexpr Bytes kMiB = Bytes{1} << 20;

// Memory sizes are what nvidia-smi reports as total (or the vendor's figure where no report is at
// hand); bandwidths are per direction (NVLink3 600 GB/s, NVLink4 900 GB/s and NVLink5 1.8 TB/s
// are both directions together); inter-node is one NIC per device (InfiniBand HDR 200 Gb/s for
// A100 systems, NDR 400 Gb/s after). Peaks are dense (without 2:4 sparsity). The host link is
// PCIe per direction (Gen4 x16 32 GB/s, Gen5 x16 64 GB/s) or NVLink-C2C (GB200, 450 GB/s); host
// memory is the node's divided by its devices (DGX A100 1 TB, DGX H100/H200/B200 2 TB, a GB200
// superchip's 480 GB Grace memory for two GPUs).
std::vector<DeviceSpec> Presets() {
  std::vector<DeviceSpec> presets;
  struct Figures {
    double tflops, fp8_tflops;
    Bytes memory;
    double hbm_tb_s, intra_gb_s, inter_gb_s, host_gb_s;
    double host_memory_gb;
    int devices_per_node = 8;
    bool approximate = false;
    bool mx_formats = false;
    double fp4_tflops = 0;
  };
  auto add = [&](const char* name, const Figures& f) {
    DeviceSpec d;
    d.name = name;
    d.approximate = f.approximate;
    d.mx_formats = f.mx_formats;
    d.peak_fp4_flops = f.fp4_tflops * 1e12;
    d.peak_flops = f.tflops * 1e12;
    d.peak_fp8_flops = f.fp8_tflops * 1e12;
    d.memory_bytes = f.memory;
    d.memory_bandwidth_bytes_per_s = f.hbm_tb_s * 1e12;
    d.devices_per_node = f.devices_per_node;
    d.intra_node_bandwidth_bytes_per_s = f.intra_gb_s * kGigabyte;
    d.intra_node_latency_s = 5e-6;
    d.inter_node_bandwidth_bytes_per_s = f.inter_gb_s * kGigabyte;
    d.inter_node_latency_s = 10e-6;
    d.host_bandwidth_bytes_per_s = f.host_gb_s * kGigabyte;
    d.host_memory_bytes = static_cast<Bytes>(f.host_memory_gb * kGigabyte);
    presets.push_back(d);
  };
  // Efficiencies fitted by `bmpipe validate` on its calibration runs (docs/fidelity.md): A100 on
  // Korthikanti et al.'s per-layer times of GPT-22B; H100's GEMMs on Llama 3 405B's 8192-GPU run,
  // its attention on a 128K-token context-parallel run, its FP8 GEMMs and the host wait of an FP8
  // layer on two Llama 3 70B FP8 runs of one layout at 8192 and 4096 tokens;
  // B200's and GB200's FP8 GEMMs on one dense run each; the host time of a MoE layer pass with CUDA
  // graphs of its router on a Qwen3-30B expert-parallel run, and without (a fixed part and one per
  // local expert) on that run in FP8 and a GPT-OSS-120B run, all on H100, which Blackwell keeps (no
  // MoE run calibrates the A100). tests/validate keeps these equal to the fit.
  // H200, H800 and the 96 GB H100 are the H100's chip.
  const Efficiencies ampere{0.681, 0.50, 0.984, 0.80};
  const Efficiencies hopper{0.549, 0.394, 0.984, 0.80, 0.649, 0.010, 0.210, 0.860, 0.730};
  // NVFP4 GEMMs: GB200's and GB300's fits on one Llama 3 70B NVFP4 run each; B200 and B300,
  // which no NVFP4 run calibrates, take them as their NVL72 siblings' (uncalibrated).
  Efficiencies b200 = hopper, gb200 = hopper;
  b200.fp8_gemm = 0.512;
  gb200.fp8_gemm = 0.500;
  gb200.fp4_gemm = b200.fp4_gemm = 0.442;
  // Blackwell Ultra (B300, GB300) has Blackwell's dense BF16 and FP8 peaks and no calibration run
  // in the table beyond GB300's NVFP4 GEMMs: it borrows B200's and GB200's fits otherwise
  // (docs/fidelity.md).
  Efficiencies b300 = b200, gb300 = gb200;
  gb300.fp4_gemm = b300.fp4_gemm = 0.516;
  //                       BF16  FP8   memory           HBM   intra  inter  host  host memory
  add("a100-40gb",  {312,  0,    40960 * kMiB,  1.555, 300,  25,   32,   128});
  presets.back().efficiency = ampere;
  add("a100-80gb",  {312,  0,    81920 * kMiB,  2.039, 300,  25,   32,   128});
  presets.back().efficiency = ampere;
  add("h100-80gb",  {989,  1979, 81559 * kMiB,  3.35,  450,  50,   64,   256});
  presets.back().efficiency = hopper;
  // H100 SXM with 96 GB (Meta's Grand Teton hosts, torchtitan's benchmarks), run at 500 W; the
  // H100's peaks, which the lower power limit may not sustain.
  add("h100-96gb",  {989,  1979, 98304 * kMiB,  3.35,  450,  50,   64,   256, 8, true});
  presets.back().efficiency = hopper;
  add("h200-141gb", {989,  1979, 143771 * kMiB, 4.8,   450,  50,   64,   256});
  presets.back().efficiency = hopper;
  // H800: the H100 chip with NVLink cut to 400 GB/s both directions (DeepSeek-V3's cluster: 8
  // GPUs a node, one 400 Gb/s InfiniBand NIC each).
  add("h800-80gb",  {989,  1979, 81559 * kMiB,  3.35,  200,  50,   64,   256});
  presets.back().efficiency = hopper;
  // Dense NVFP4 (Blackwell's FP4 tensor cores): 9 PFLOP/s on B200 and 10 on GB200, twice FP8;
  // Blackwell Ultra 13.5 on B300 and 15 on GB300, three times FP8 (the HGX and NVL72 datasheets'
  // dense figures; NVIDIA's dgxc-benchmarking MFU table lists 9000, 9800, 13500 and 14700 TFLOP/s).
  // HGX/DGX B200: 2.25 PFLOP/s BF16 and 4.5 PFLOP/s FP8 dense, 180 GB HBM3e at 8 TB/s, NVLink5.
  add("b200-180gb", {2250, 4500, 183359 * kMiB, 8.0,   900,  50,   64,   256, 8, false, true, 9000});
  presets.back().efficiency = b200;
  // GB200 NVL72: 2.5 PFLOP/s BF16 and 5 PFLOP/s FP8 dense, 186 GB, one NVLink domain of 72 GPUs,
  // NVLink-C2C to the Grace CPU's memory.
  add("gb200",      {2500, 5000, 189440 * kMiB, 8.0,   900,  50,   450,  240, 72, false, true, 10000});
  presets.back().efficiency = gb200;
  // HGX/DGX B300 (Blackwell Ultra): 2.25 PFLOP/s BF16 and 4.5 PFLOP/s FP8 dense (the HGX
  // datasheet's 36 and 72 PFLOP/s sparse for 8 GPUs), 288 GB HBM3e at 8 TB/s, NVLink5, one
  // ConnectX-8 800 Gb/s NIC per GPU.
  add("b300-288gb", {2250, 4500, 274658 * kMiB, 8.0,   900,  100,  64,   256, 8, false, true, 13500});
  presets.back().efficiency = b300;
  // GB300 NVL72: 2.5 PFLOP/s BF16 and 5 PFLOP/s FP8 dense (360 and 720 PFLOP/s sparse for 72
  // GPUs), 288 GB HBM3e, one NVLink domain of 72 GPUs, ConnectX-8 800 Gb/s, NVLink-C2C to a
  // Grace CPU's memory (17 TB LPDDR5X for 36 Grace, two GPUs each).
  add("gb300",      {2500, 5000, 274658 * kMiB, 8.0,   900,  100,  450,  236, 72, false, true, 15000});
  presets.back().efficiency = gb300;
  // MI300X: 1307 TFLOP/s BF16 and 2615 FP8 dense, 192 GB HBM3 at 5.3 TB/s, Infinity Fabric
  // 448 GB/s per direction to its 7 peers together.
  add("mi300x-192gb", {1307, 2615, 196608 * kMiB, 5.3, 448,  50,   64,   256});
  // L4: PCIe Gen4 x16 between devices, 100 Gb/s Ethernet between nodes.
  add("l4",         {121,  242,  23034 * kMiB,  0.3,   32,   12.5, 32,   48});
  // Ascend 910B and 910C: secondary sources differ (about 320 and 780 TFLOP/s FP16, 64 and
  // 128 GB HBM, HCCS inside a node, RoCE between nodes); no FP8 matrix units.
  add("ascend-910b", {320, 0,    65536 * kMiB,  1.6,   196,  25,   32,   192, 8, true});
  add("ascend-910c", {780, 0,    131072 * kMiB, 3.2,   196,  50,   32,   192, 8, true});
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
  root.ExpectKeys({"name", "based_on", "approximate", "peak_flops", "peak_fp8_flops", "peak_fp4_flops", "mx_formats",
                   "memory_bytes",
                   "memory_bandwidth_bytes_per_s", "devices_per_node", "intra_node_bandwidth_bytes_per_s",
                   "intra_node_latency_s", "inter_node_bandwidth_bytes_per_s", "inter_node_latency_s",
                   "host_bandwidth_bytes_per_s", "host_memory_bytes", "efficiency"});
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
    d.peak_flops = ReadRate(*v, kMinPeakFlops, kMaxPeakFlops, "give the dense 16-bit peak in FLOP/s, e.g. 989e12");
  }
  // Optional even without a preset: 0 means no FP8 units, no host link for offloading.
  if (auto v = root.Optional("peak_fp8_flops")) {
    d.peak_fp8_flops = v->Number() == 0 ? 0 : ReadRate(*v, kMinPeakFlops, kMaxPeakFlops, "give the dense FP8 peak in FLOP/s, e.g. 1979e12, or 0 for none");
  }
  if (auto v = root.Optional("peak_fp4_flops")) {
    d.peak_fp4_flops = v->Number() == 0 ? 0 : ReadRate(*v, kMinPeakFlops, kMaxPeakFlops, "give the dense NVFP4 peak in FLOP/s, e.g. 9e15, or 0 for none");
  }
  if (auto v = root.Optional("mx_formats")) d.mx_formats = v->Bool();
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
  if (auto v = root.Optional("host_bandwidth_bytes_per_s")) {
    d.host_bandwidth_bytes_per_s =
        v->Number() == 0 ? 0 : ReadRate(*v, 1e6, 1e15, "give bytes/s per device and direction, e.g. 64e9, or 0 for none");
  }
  if (auto v = root.Optional("host_memory_bytes")) d.host_memory_bytes = v->ByteCount();
  if (auto e = root.Optional("efficiency")) {
    std::vector<std::string> names;
    for (const EfficiencyField& f : EfficiencyFields()) names.push_back(f.name);
    e->ExpectKeys(names);
    for (const EfficiencyField& f : EfficiencyFields()) {
      if (auto v = e->Optional(f.name)) {
        d.efficiency.*f.member = f.milliseconds ? ReadRate(*v, 0, 100, f.fix.c_str()) : ReadFraction(*v);
      }
    }
  }
  return d;
}

}  // namespace

const std::vector<EfficiencyField>& EfficiencyFields() {
  static const std::vector<EfficiencyField> fields = {
      {"gemm", &Efficiencies::gemm, false, ""},
      {"attention", &Efficiencies::attention, false, ""},
      {"memory", &Efficiencies::memory, false, ""},
      {"link", &Efficiencies::link, false, ""},
      {"fp8_gemm", &Efficiencies::fp8_gemm, false, ""},
      {"moe_host_ms", &Efficiencies::moe_host_ms, true,
       "give the milliseconds an eager MoE layer pass waits for the host, e.g. 0.1"},
      {"moe_host_expert_ms", &Efficiencies::moe_host_expert_ms, true,
       "give the milliseconds a MoE layer pass waits for the host per expert on the rank, e.g. 0.2"},
      {"moe_host_graphed_ms", &Efficiencies::moe_host_graphed_ms, true,
       "give the milliseconds a MoE layer pass waits for the host with its router graphed, e.g. 0.9"},
      {"fp8_host_ms", &Efficiencies::fp8_host_ms, true,
       "give the milliseconds an FP8 decoder layer's pass waits for the host, e.g. 0.7"},
      {"fp4_gemm", &Efficiencies::fp4_gemm, false, ""},
  };
  return fields;
}

std::string DeviceFileText(const DeviceSpec& d) {
  // "{}" writes the shortest text that reads back to the same double.
  std::string out = fmt::format("name: \"{}\"\n", d.name);
  if (d.approximate) out += "approximate: true\n";
  out += fmt::format("peak_flops: {}\npeak_fp8_flops: {}\npeak_fp4_flops: {}\nmx_formats: {}\n", d.peak_flops,
                     d.peak_fp8_flops, d.peak_fp4_flops, d.mx_formats);
  out += fmt::format("memory_bytes: {}\nmemory_bandwidth_bytes_per_s: {}\ndevices_per_node: {}\n", d.memory_bytes,
                     d.memory_bandwidth_bytes_per_s, d.devices_per_node);
  out += fmt::format("intra_node_bandwidth_bytes_per_s: {}\nintra_node_latency_s: {}\n",
                     d.intra_node_bandwidth_bytes_per_s, d.intra_node_latency_s);
  out += fmt::format("inter_node_bandwidth_bytes_per_s: {}\ninter_node_latency_s: {}\n",
                     d.inter_node_bandwidth_bytes_per_s, d.inter_node_latency_s);
  out += fmt::format("host_bandwidth_bytes_per_s: {}\nhost_memory_bytes: {}\nefficiency:\n", d.host_bandwidth_bytes_per_s,
                     d.host_memory_bytes);
  for (const EfficiencyField& f : EfficiencyFields()) out += fmt::format("  {}: {}\n", f.name, d.efficiency.*f.member);
  return out;
}

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

// An accelerator and the links around it, as the cost model sees them: peak dense 16-bit FLOP/s,
// memory and its bandwidth, the links inside and between nodes, and the fractions of those peaks
// that real kernels and collectives reach. Built-in presets, or a JSON/YAML file.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/core/error.h"
#include "bmpipe/core/units.h"

namespace bmpipe {

// Achievable fractions of the peaks (0 < e <= 1), and the host waits of MoE and FP8 layers. These
// defaults are uncalibrated guesses; the presets carry values fitted on published measurements
// (docs/fidelity.md).
struct Efficiencies {
  double gemm = 0.70;       // large matrix multiplies (FACTS: A100 reaches ~70-80 %)
  double attention = 0.50;  // fused (flash) attention kernels
  double memory = 0.80;     // streaming elementwise kernels, of the HBM bandwidth
  double link = 0.80;       // collectives and p2p, of the link bandwidth
  double fp8_gemm = 0.55;   // FP8 matrix multiplies, of the FP8 peak (scaling and casts included)
  // Not fractions: milliseconds each pass of a MoE layer waits for the host. Dropless routing
  // copies the per-expert token counts to the host, which then launches the exchange and the
  // grouped GEMMs: the device idles while it does. With every kernel launched eagerly (Megatron's
  // default) that is moe_host_ms plus moe_host_expert_ms for each expert on the rank (the grouped
  // GEMMs are launched expert by expert from the counts); with the router and the dispatch
  // preprocessing replayed as CUDA graphs (TrainingSetup::moe_cuda_graphs), whose counts stay on
  // the device, moe_host_graphed_ms.
  double moe_host_ms = 0;
  double moe_host_expert_ms = 0;
  double moe_host_graphed_ms = 0;
  // Milliseconds each pass of a decoder layer with FP8 GEMMs waits for the host: Transformer
  // Engine's scaling bookkeeping and the quantization kernels it launches beside them.
  double fp8_host_ms = 0;
  double fp4_gemm = 0.40;  // NVFP4 matrix multiplies, of the FP4 peak (quantization and Hadamard transforms included)
};

// Every field of Efficiencies by its name in device files and calibration tables: a fraction of a
// peak, or a host wait in milliseconds, with what a wait out of range should be.
struct EfficiencyField {
  std::string name;
  double Efficiencies::*member;
  bool milliseconds;
  std::string fix;  // a host wait's message when out of range
};
const std::vector<EfficiencyField>& EfficiencyFields();

struct DeviceSpec {
  std::string name;
  bool approximate = false;  // figures from secondary sources; say so in reports
  double peak_flops = 0;     // dense BF16/FP16 FLOP/s
  double peak_fp8_flops = 0;  // dense FP8 FLOP/s; 0: the device has no FP8 matrix units
  bool mx_formats = false;    // block-scaled (MX) FP8 in its tensor cores: MXFP8 runs at the FP8 peak (Blackwell)
  double peak_fp4_flops = 0;  // dense NVFP4 FLOP/s; 0: the device has no FP4 tensor cores
  Bytes memory_bytes = 0;    // device memory the framework can see
  double memory_bandwidth_bytes_per_s = 0;
  int devices_per_node = 8;
  double intra_node_bandwidth_bytes_per_s = 0;  // per device, one direction
  double intra_node_latency_s = 0;
  double inter_node_bandwidth_bytes_per_s = 0;  // per device, one direction
  double inter_node_latency_s = 0;
  // Between the device and its host, for offloading: per device, one direction (PCIe Gen5 x16
  // about 55 GB/s in practice; NVLink-C2C on GB200 far more), and the host memory one device may
  // use (the node's memory divided by its devices).
  double host_bandwidth_bytes_per_s = 0;
  Bytes host_memory_bytes = 0;
  Efficiencies efficiency;
};

// The names of the built-in presets, in a fixed order.
std::vector<std::string> DevicePresetNames();

// A built-in preset by name ("h100-80gb"), or an error listing the presets.
Result<DeviceSpec> DevicePreset(const std::string& name);

// Reads a device file (JSON or YAML; docs/cost-model.md lists the keys). `based_on` names a
// preset whose values the file's keys override; without it every figure is required.
Result<DeviceSpec> LoadDeviceFile(const std::string& path);

// The device as a complete device file (YAML, every figure, no `based_on`) that LoadDeviceFile
// reads back to the same DeviceSpec.
std::string DeviceFileText(const DeviceSpec& device);

// A preset name, or else a path to a device file.
Result<DeviceSpec> LoadDevice(const std::string& name_or_path);

}  // namespace bmpipe

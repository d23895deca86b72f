// Device presets and device files.
#include "bmpipe/hardware/device.h"

#include <fstream>

#include <gtest/gtest.h>

#include "test_support.h"

namespace bmpipe {
namespace {

std::string WriteDevice(const std::string& text, const std::string& name = "device.yaml") {
  const std::string path = testing::MakeTempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Device, PresetsHaveTheFactsTableFigures) {
  const DeviceSpec a100 = DevicePreset("a100-80gb").value();
  EXPECT_EQ(a100.peak_flops, 312e12);
  EXPECT_DOUBLE_EQ(a100.memory_bandwidth_bytes_per_s, 2.039e12);
  EXPECT_EQ(a100.memory_bytes, 81920LL << 20);
  const DeviceSpec h100 = DevicePreset("h100-80gb").value();
  EXPECT_EQ(h100.peak_flops, 989e12);
  EXPECT_DOUBLE_EQ(DevicePreset("h200-141gb").value().memory_bandwidth_bytes_per_s, 4.8e12);
  EXPECT_TRUE(DevicePreset("ascend-910b").value().approximate);
  EXPECT_FALSE(h100.approximate);
  // Blackwell Ultra: Blackwell's dense peaks, 288 GB, ConnectX-8; GB300 a 72-GPU NVLink domain.
  const DeviceSpec b300 = DevicePreset("b300-288gb").value(), gb300 = DevicePreset("gb300").value();
  EXPECT_EQ(b300.peak_flops, 2250e12);
  EXPECT_EQ(b300.peak_fp8_flops, 4500e12);
  EXPECT_EQ(gb300.peak_flops, 2500e12);
  EXPECT_EQ(gb300.devices_per_node, 72);
  EXPECT_NEAR(static_cast<double>(b300.memory_bytes), 288e9, 1e6);
  EXPECT_EQ(b300.inter_node_bandwidth_bytes_per_s, 100e9);
  EXPECT_EQ(b300.efficiency.fp8_gemm, DevicePreset("b200-180gb").value().efficiency.fp8_gemm);
  EXPECT_EQ(gb300.efficiency.fp8_gemm, DevicePreset("gb200").value().efficiency.fp8_gemm);
  // Dense NVFP4: twice FP8 on Blackwell, three times on Blackwell Ultra; none before Blackwell.
  EXPECT_EQ(DevicePreset("b200-180gb").value().peak_fp4_flops, 9000e12);
  EXPECT_EQ(DevicePreset("gb200").value().peak_fp4_flops, 10000e12);
  EXPECT_EQ(b300.peak_fp4_flops, 13500e12);
  EXPECT_EQ(gb300.peak_fp4_flops, 15000e12);
  EXPECT_EQ(h100.peak_fp4_flops, 0);
  EXPECT_EQ(b300.efficiency.fp4_gemm, gb300.efficiency.fp4_gemm);
  for (const std::string& name : DevicePresetNames()) {
    const DeviceSpec d = DevicePreset(name).value();
    EXPECT_GT(d.peak_flops, 0) << name;
    EXPECT_GT(d.inter_node_bandwidth_bytes_per_s, 0) << name;
  }
}

TEST(Device, UnknownPresetSuggestsTheClosest) {
  const Result<DeviceSpec> d = LoadDevice("h100-80g");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("did you mean 'h100-80gb'"), std::string::npos) << d.error().message;
  EXPECT_NE(d.error().message.find("a100-40gb"), std::string::npos);
}

TEST(Device, FileOverridesItsPreset) {
  const DeviceSpec d = LoadDevice(WriteDevice("based_on: h100-80gb\n"
                                              "name: h100-pcie\n"
                                              "intra_node_bandwidth_bytes_per_s: 64e9\n"
                                              "efficiency: {gemm: 0.6}\n"))
                           .value();
  const DeviceSpec fp4 = LoadDevice(WriteDevice("based_on: b200-180gb\npeak_fp4_flops: 10e15\nefficiency: {fp4_gemm: 0.3}\n"))
                             .value();
  EXPECT_EQ(fp4.peak_fp4_flops, 10e15);
  EXPECT_EQ(fp4.efficiency.fp4_gemm, 0.3);
  EXPECT_EQ(d.name, "h100-pcie");
  EXPECT_EQ(d.intra_node_bandwidth_bytes_per_s, 64e9);
  EXPECT_EQ(d.efficiency.gemm, 0.6);
  EXPECT_EQ(d.efficiency.memory, DevicePreset("h100-80gb").value().efficiency.memory);  // kept from the preset
  EXPECT_EQ(d.peak_flops, 989e12);
}

TEST(Device, FileWithoutPresetNeedsEveryFigure) {
  const Result<DeviceSpec> d = LoadDevice(WriteDevice("peak_flops: 1e15\nmemory_bytes: 8e10\n"));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("memory_bandwidth_bytes_per_s"), std::string::npos) << d.error().message;
}

TEST(Device, BadValuesNameTheKey) {
  Result<DeviceSpec> d = LoadDevice(WriteDevice("based_on: a100-80gb\nefficiency: {gemm: 1.5}\n"));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("efficiency.gemm = 1.5"), std::string::npos) << d.error().message;
  d = LoadDevice(WriteDevice("based_on: a100-80gb\npeak_flop: 1e15\n"));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("did you mean 'peak_flops'"), std::string::npos) << d.error().message;
  d = LoadDevice(WriteDevice("based_on: b200\n"));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("based_on"), std::string::npos) << d.error().message;
}

}  // namespace
}  // namespace bmpipe

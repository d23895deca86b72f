// PyTorch profiler traces into layer costs: the forward's range, the backward functions matched by
// sequence number, the recomputation inside them, the accelerator's kernels where there are any,
// and the memory a forward leaves allocated. (python/tests/test_torch.py checks real traces.)
#include "bmpipe/frameworks/torch/profiler_trace.h"

#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace bmpipe {
namespace {

// One layer's forward [0, 100] us with a GEMM (sequence 5) and its backward function [200, 260]
// running the backward GEMM and a recomputed region [215, 230]; memory on the accelerator.
Json Trace(bool kernels) {
  Json events = Json::array();
  auto x = [&](const std::string& name, const std::string& cat, double ts, double dur, int tid, Json args) {
    events.push_back({{"ph", "X"}, {"name", name}, {"cat", cat}, {"ts", ts}, {"dur", dur}, {"tid", tid}, {"args", args}});
  };
  x("bmpipe.layer 0 param_bytes 4096 params 1024", "user_annotation", 0, 100, 1, Json::object());
  x("aten::mm", "cpu_op", 10, 40, 1, {{"Sequence number", 5}, {"External id", 100}});
  x("autograd::engine::evaluate_function: MmBackward0", "cpu_op", 200, 60, 1, {{"Sequence number", 5}});
  x("aten::mm", "cpu_op", 235, 15, 1, {{"External id", 101}});
  x("bmpipe.region", "user_annotation", 210, 20, 1, Json::object());
  x("aten::mm", "cpu_op", 212, 10, 1, {{"Sequence number", 9}, {"External id", 102}});
  if (kernels) {
    x("sm90_gemm", "kernel", 20, 30, 7, {{"External id", 100}});
    x("sm90_gemm", "kernel", 240, 40, 7, {{"External id", 101}});
    x("sm90_gemm", "kernel", 215, 12, 7, {{"External id", 102}});
  }
  for (const auto& [ts, total, device] : std::vector<std::tuple<double, int, int>>{
           {0, 1000, 1}, {60, 1500, 1}, {80, 1800, 1}, {90, 1600, 1}, {95, 99999, 0}}) {
    events.push_back({{"ph", "i"}, {"name", "[memory]"}, {"ts", ts}, {"tid", 1},
                      {"args", {{"Total Allocated", total}, {"Device Type", device}}}});
  }
  return Json{{"traceEvents", events}};
}

TEST(TorchTrace, HostTimesFromRangesAndBackwardFunctions) {
  const std::vector<TracedLayer> layers = ReadTorchTrace(Trace(false), "t.json").value();
  ASSERT_EQ(layers.size(), 1u);
  const TracedLayer& l = layers[0];
  EXPECT_EQ(l.param_bytes, 4096);
  EXPECT_EQ(l.params, 1024);
  ASSERT_EQ(l.forward_s.size(), 1u);
  EXPECT_NEAR(l.forward_s[0], 100e-6, 1e-12);
  EXPECT_NEAR(l.recompute_s[0], 20e-6, 1e-12);
  EXPECT_NEAR(l.backward_s[0], 40e-6, 1e-12);  // the backward function less the recomputation in it
  // The accelerator's memory (device type 1), not the host's.
  EXPECT_EQ(l.kept_bytes[0], 600);
  EXPECT_EQ(l.peak_extra_bytes[0], 200);
}

TEST(TorchTrace, AcceleratorTimesFromKernels) {
  const TracedLayer l = ReadTorchTrace(Trace(true), "t.json").value()[0];
  EXPECT_NEAR(l.forward_s[0], 30e-6, 1e-12);
  EXPECT_NEAR(l.backward_s[0], 40e-6, 1e-12);
  EXPECT_NEAR(l.recompute_s[0], 12e-6, 1e-12);
}

TEST(TorchTrace, AProblemFromOneTracePerOption) {
  Problem base = TraceBaseProblem(2, 1, 4, "1f1b", 80e9, 1e9, 0.001).value();
  Json two = Trace(false);
  // A second layer, with a backward of its own.
  two["traceEvents"].push_back({{"ph", "X"}, {"name", "bmpipe.layer 1 param_bytes 8 params 2"}, {"cat", "user_annotation"},
                                {"ts", 100}, {"dur", 50}, {"tid", 1}, {"args", Json::object()}});
  two["traceEvents"].push_back({{"ph", "X"}, {"name", "aten::relu"}, {"cat", "cpu_op"}, {"ts", 110}, {"dur", 5},
                                {"tid", 1}, {"args", {{"Sequence number", 6}}}});
  two["traceEvents"].push_back({{"ph", "X"}, {"name", "autograd::engine::evaluate_function: ReluBackward0"},
                                {"cat", "cpu_op"}, {"ts", 170}, {"dur", 10}, {"tid", 1}, {"args", {{"Sequence number", 6}}}});
  const Problem p = ProblemFromTraces({{"none", "a.json", two}, {"full", "b.json", two}}, base, 12).value();
  ASSERT_EQ(p.num_layers(), 2);
  EXPECT_EQ(p.layers[0].static_bytes, 2 * 4096 + 12 * 1024);
  ASSERT_EQ(p.layers[1].options.size(), 2u);
  EXPECT_EQ(p.layers[1].options[1].name, "full");
  EXPECT_EQ(p.layers[1].options[0].backward_ns, 10'000);
  EXPECT_EQ(p.p2p_ns, 1'000'000);
  const Result<Problem> twice = ProblemFromTraces({{"none", "a.json", two}, {"none", "b.json", two}}, base, 0);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("given twice"), std::string::npos);
}

TEST(TorchTrace, TracesItCannotUseAreRefusedWithTheFix) {
  for (const auto& [trace, says] : std::vector<std::pair<Json, std::string>>{
           {Json::object(), "no traceEvents"},
           {Json{{"traceEvents", Json::array()}}, "bmpipe.torch.annotate"},
       }) {
    const auto r = ReadTorchTrace(trace, "t.json");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  }
  Json forward_only = Trace(false);
  Json& events = forward_only["traceEvents"];
  events.erase(std::remove_if(events.begin(), events.end(),
                              [](const Json& e) { return e["name"].get<std::string>().find("evaluate_function") != std::string::npos; }),
               events.end());
  const auto r = ReadTorchTrace(forward_only, "t.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("profile training steps"), std::string::npos) << r.error().message;
  Json bad = Trace(false);
  bad["traceEvents"].push_back({{"ph", "X"}, {"name", "bmpipe.layer x"}, {"ts", 1}, {"dur", 1}, {"tid", 1}});
  EXPECT_NE(ReadTorchTrace(bad, "t.json").error().message.find("expected 'bmpipe.layer <index>"), std::string::npos);
}

}  // namespace
}  // namespace bmpipe

namespace bmpipe {
namespace {

// Times that are not finite, memory counters no device holds and times past a problem's limit
// are refused (profile wrote a 2e6 s forward, accepted ts NaN, and turned ±2^63 counters into 0).
TEST(TorchTrace, NumbersOutsideAProblemsLimitsAreRefused) {
  Json nan_ts = Trace(false);
  nan_ts["traceEvents"][0]["ts"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(ReadTorchTrace(nan_ts, "t.json").error().message.find("ts is not a finite number"), std::string::npos);
  Json huge = Trace(false);
  for (Json& e : huge["traceEvents"]) {
    if (e["name"] == "[memory]") e["args"]["Total Allocated"] = std::numeric_limits<std::int64_t>::min();
  }
  EXPECT_NE(ReadTorchTrace(huge, "t.json").error().message.find("is no device's memory"), std::string::npos);
  Json slow = Trace(false);
  slow["traceEvents"][0]["dur"] = 2e12;  // microseconds: a 2e6 s forward
  const Problem base = TraceBaseProblem(2, 1, 4, "1f1b", 80e9, 1e9, 0.001).value();
  const Result<Problem> p = ProblemFromTraces({{"none", "a.json", slow}}, base, 12);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("layer 0's forward takes 2e+06 s"), std::string::npos) << p.error().message;
}

}  // namespace
}  // namespace bmpipe

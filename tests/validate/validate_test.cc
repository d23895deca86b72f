// The fidelity check: the bundled table reads, the held-out errors stay within the targets,
// the presets carry the fit, the fit recovers known efficiencies, measurements convert as stated,
// and bad tables are rejected with messages that name the field.
#include <algorithm>
#include <cmath>

#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bmpipe/cost/layer_ops.h"
#include "bmpipe/io/output_file.h"
#include "bmpipe/report/validate_report.h"
#include "bmpipe/validate/validate.h"
#include "test_support.h"

namespace bmpipe {
namespace {

const RunTable& Bundled() {
  static const RunTable table = LoadRunTable("").value();
  return table;
}

const Validation& BundledValidation() {
  static const Validation v = Validate(Bundled()).value();
  return v;
}

Result<RunTable> TableFrom(const std::string& yaml) {
  Result<Json> doc = ParseDocument(yaml, "table.yaml");
  if (!doc.ok()) return doc.error();
  return ReadRunTable(doc.value(), "table.yaml");
}

// One run of GPT-22B on A100 (TP 8, micro-batch 4), as Korthikanti et al.'s Table 4 measures it.
std::string LayerRun(const std::string& id, const std::string& recompute, bool sp, double forward_ms,
                     double backward_ms) {
  return "  - {id: " + id + ", source: test, states: test, model: gpt-22b, device: a100-80gb, tp: 8, pp: 1, dp: 1, " +
         "mbs: 4, gbs: 4, seq: 2048, recompute: " + recompute + ", sequence_parallel: " + (sp ? "true" : "false") +
         ", measured: {layer_forward_ms: " + std::to_string(forward_ms) +
         ", layer_backward_ms: " + std::to_string(backward_ms) + "}}\n";
}

TEST(Validate, BundledTableCitesEveryRun) {
  const RunTable& table = Bundled();
  EXPECT_GE(table.runs.size(), 50u);
  for (const PublishedRun& run : table.runs) {
    EXPECT_FALSE(run.source.empty()) << run.id;
    EXPECT_FALSE(run.states.empty()) << run.id;
    EXPECT_FALSE(run.measured.empty()) << run.id;
  }
  // Every source the issue names contributes rows.
  for (const char* prefix : {"korthikanti-", "narayanan-", "zb-", "bloom-", "llama3-", "megascale-"}) {
    int n = 0;
    for (const PublishedRun& run : table.runs) n += run.id.rfind(prefix, 0) == 0;
    EXPECT_GT(n, 0) << prefix;
  }
}

TEST(Validate, HeldOutErrorsMeetTheTargets) {
  BMPIPE_SLOW_TEST();
  const Validation& v = BundledValidation();
  EXPECT_GE(v.held_out_time.count, 40);
  EXPECT_GE(v.held_out_memory.count, 10);
  EXPECT_LE(v.held_out_time.mean_abs, 0.10);
  EXPECT_LE(v.held_out_memory.mean_abs, 0.10);
  EXPECT_LE(v.calibration.mean_abs, 0.05);
  // Each kind of setup, time and memory: issue 16's target of 10 %. The kinds that the 2025-26
  // hybrid, NVFP4 and Blackwell MXFP8 runs (held out, predicted as they were written) push past it
  // are bounded at what they measure now, so that they cannot grow unnoticed; issue 38's target is
  // 10 % for them too.
  const std::map<std::string, double> open_gaps = {{"moe", 0.133}, {"hybrid", 0.143}, {"cp", 0.112},
                                                   {"fp8", 0.101}, {"fp4", 0.115}, {"sharded", 0.110}};
  for (const KindSummary& k : v.held_out_by_kind) {
    const auto gap = open_gaps.find(k.kind);
    EXPECT_LE(k.time.mean_abs, gap == open_gaps.end() ? 0.10 : gap->second) << k.kind;
    EXPECT_LE(k.memory.mean_abs, 0.10) << k.kind;
  }
}

// Megatron's --cpu-offloading-num-layers N: the first N decoder layers run the offload option, the
// rest none.
TEST(Validate, OffloadLayersOffloadTheFirstLayers) {
  const Result<RunTable> table = TableFrom(
      "calibration: []\nruns:\n  - {id: r, source: test, states: test, model: llama3-8b, device: h100-80gb, tp: 1, "
      "pp: 1, dp: 8, mbs: 1, gbs: 8, seq: 4096, recompute: none, flash_attention: true, distributed_optimizer: true, "
      "offload_layers: 4, measured: {iteration_time_s: 1}}\n");
  ASSERT_TRUE(table.ok()) << table.error().message;
  EXPECT_EQ(RunKinds(table.value().runs[0]), std::vector<std::string>{"sharded"});
  const Result<Validation> v = Validate(table.value());
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_NE(v.value().outcomes[0].flags.find("the first 4 decoder layers' activations offloaded"), std::string::npos)
      << v.value().outcomes[0].flags;
  // Megatron refuses the offload with pipeline parallelism.
  const Result<RunTable> refused = TableFrom(
      "calibration: []\nruns:\n  - {id: r, source: test, states: test, model: llama3-8b, device: h100-80gb, tp: 1, "
      "pp: 2, dp: 4, mbs: 1, gbs: 8, seq: 4096, recompute: none, flash_attention: true, distributed_optimizer: true, "
      "offload_layers: 4, measured: {iteration_time_s: 1}}\n");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("refuses recomputation and pipeline parallelism"), std::string::npos)
      << refused.error().message;
}

// Megatron's recomputation as runs state it: a set of modules, or full by the block method; paths
// only from a table that is a file.
TEST(Validate, RunsStateMegatronsRecomputationAndTheirOwnFiles) {
  const std::string run = "calibration: []\nruns:\n  - {id: r, source: test, states: test, model: llama3-8b, device: "
                          "h100-80gb, tp: 1, pp: 4, dp: 2, mbs: 1, gbs: 16, seq: 4096, flash_attention: true, ";
  const Result<RunTable> block =
      TableFrom(run + "recompute: full, recompute_num_layers: 3, measured: {iteration_time_s: 1}}\n");
  ASSERT_TRUE(block.ok()) << block.error().message;
  const Result<Validation> v = Validate(block.value());
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_NE(v.value().outcomes[0].flags.find("--recompute-method block --recompute-num-layers 3"), std::string::npos)
      << v.value().outcomes[0].flags;
  const Result<RunTable> modules = TableFrom(run + "recompute: norm+mlp_act, measured: {iteration_time_s: 1}}\n");
  ASSERT_TRUE(modules.ok()) << modules.error().message;
  EXPECT_NE(Validate(modules.value()).value().outcomes[0].flags.find("every decoder layer recomputes norm+mlp_act"),
            std::string::npos);
  const Result<RunTable> not_full =
      TableFrom(run + "recompute: selective, recompute_num_layers: 3, measured: {iteration_time_s: 1}}\n");
  ASSERT_FALSE(not_full.ok());
  EXPECT_NE(not_full.error().message.find("block method"), std::string::npos);
  const Result<RunTable> path = TableFrom(
      "calibration: []\nruns:\n  - {id: r, source: test, states: test, model: models/mine.json, device: h100-80gb, "
      "tp: 1, pp: 1, dp: 8, mbs: 1, gbs: 8, seq: 4096, recompute: none, measured: {iteration_time_s: 1}}\n");
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.error().message.find("this table is not a file"), std::string::npos) << path.error().message;
}

// A run timed by single layers ran those layers: the whole model's fit is not held against it.
TEST(Validate, OnlyWholeRunsAreJudgedForFit) {
  BMPIPE_SLOW_TEST();
  const Validation& v = BundledValidation();
  for (const RunOutcome& o : v.outcomes) {
    if (o.run->id != "korthikanti-22b-layer-none") continue;
    EXPECT_FALSE(o.fits);
    EXPECT_EQ(std::count(v.not_fitting.begin(), v.not_fitting.end(), o.run->id), 0);
  }
}

// Another framework's run is timed under Megatron's execution of its layout; whether that
// execution fits says nothing of the run, so it is reported apart, with what Megatron would need.
TEST(Validate, OtherFrameworksRunsAreComparedForTimeOnly) {
  auto table = [](const std::string& framework) {
    return TableFrom("calibration: []\nruns:\n  - {id: r, source: test, states: test, " + framework +
                     "model: llama3-70b, device: h100-80gb, tp: 1, pp: 1, dp: 8, mbs: 1, gbs: 8, seq: 8192, "
                     "recompute: none, flash_attention: true, measured: {iteration_time_s: 10}}\n");
  };
  const Result<RunTable> megatron = table("");
  ASSERT_TRUE(megatron.ok()) << megatron.error().message;
  Result<Validation> v = Validate(megatron.value());
  ASSERT_TRUE(v.ok()) << v.error().message;
  ASSERT_FALSE(v.value().outcomes[0].fits);  // 70B on one H100
  EXPECT_EQ(v.value().not_fitting, std::vector<std::string>{"r"});
  EXPECT_TRUE(v.value().other_frameworks_not_fitting.empty());

  const Result<RunTable> other = table("framework: Stack X, ");
  ASSERT_TRUE(other.ok()) << other.error().message;
  v = Validate(other.value());
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v.value().not_fitting.empty());
  EXPECT_EQ(v.value().other_frameworks_not_fitting, std::vector<std::size_t>{0});
  EXPECT_EQ(v.value().held_out_time.count, 1);  // its time still counts
  const std::string report = FormatValidation(other.value(), v.value());
  EXPECT_NE(report.find("Megatron's execution of their layout would not fit: r (Stack X: "), std::string::npos)
      << report;
  EXPECT_NE(report.find("Every other run is predicted to fit"), std::string::npos) << report;
  EXPECT_EQ(ValidationToJson(other.value(), v.value())["other_frameworks_not_fitting"], Json::array({"r"}));

  const Result<RunTable> unnamed = table("framework: '', ");
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.error().message.find("runs[0].framework = \"\": must not be empty"), std::string::npos) << unnamed.error().message;
}

// The bundled table's Llama 3 405B rows are Meta's runs: by Megatron's execution they need more
// than an H100 holds, which is not held against them.
TEST(Validate, BundledOtherFrameworksRunsAreMetasLlama3) {
  BMPIPE_SLOW_TEST();
  const Validation& v = BundledValidation();
  std::vector<std::string> ids;
  for (std::size_t i : v.other_frameworks_not_fitting) ids.push_back(v.outcomes[i].run->id);
  EXPECT_EQ(ids, (std::vector<std::string>{"llama3-405b-8192gpu", "llama3-405b-16384gpu"}));
  // One run that ran is predicted not to fit: Nemotron-H 56B at dp 4, whose setup (fp32 gradients,
  // no FP8 weights) the source does not state (docs/fidelity.md). No other may join it.
  EXPECT_EQ(v.not_fitting, (std::vector<std::string>{"dgxc2504-h100-nemotronh-56b-32gpu"}));
}

TEST(Validate, CalibrationRunsAreNotCountedAsHeldOut) {
  BMPIPE_SLOW_TEST();
  const Validation& v = BundledValidation();
  int calibration = 0, held_out = 0;
  for (const RunOutcome& o : v.outcomes) {
    const int n = static_cast<int>(o.run->measured.size());
    (o.calibration ? calibration : held_out) += n;
  }
  EXPECT_EQ(calibration, v.calibration.count);
  EXPECT_EQ(held_out, v.held_out_time.count + v.held_out_memory.count);
  int listed = 0;
  for (const FittedDevice& f : v.fitted) listed += f.measurements;
  EXPECT_EQ(listed, calibration);
}

TEST(Validate, PresetsCarryTheFittedEfficiencies) {
  BMPIPE_SLOW_TEST();
  // If this fails, the cost model or the calibration runs changed: copy the fitted values that
  // `bmpipe validate` prints into src/bmpipe/hardware/device.cc.
  // A device's last entry holds every efficiency its entries fitted.
  std::map<std::string, Efficiencies> last;
  for (const FittedDevice& f : BundledValidation().fitted) last[f.device] = f.after;
  EXPECT_GE(last.size(), 4u);
  for (const auto& [device, after] : last) {
    const Efficiencies preset = DevicePreset(device).value().efficiency;
    EXPECT_NEAR(preset.gemm, after.gemm, 1e-9) << device;
    EXPECT_NEAR(preset.attention, after.attention, 1e-9) << device;
    EXPECT_NEAR(preset.memory, after.memory, 1e-9) << device;
    EXPECT_NEAR(preset.link, after.link, 1e-9) << device;
    EXPECT_NEAR(preset.fp8_gemm, after.fp8_gemm, 1e-9) << device;
    EXPECT_NEAR(preset.moe_host_ms, after.moe_host_ms, 1e-9) << device;
    EXPECT_NEAR(preset.moe_host_graphed_ms, after.moe_host_graphed_ms, 1e-9) << device;
    EXPECT_NEAR(preset.moe_host_expert_ms, after.moe_host_expert_ms, 1e-9) << device;
    EXPECT_NEAR(preset.fp8_host_ms, after.fp8_host_ms, 1e-9) << device;
  }
}

TEST(Validate, PredictionsStateTheHeldOutErrorOfTheirKinds) {
  BMPIPE_SLOW_TEST();
  // If this fails, the held-out errors moved: copy `bmpipe validate`'s "Held out, by kind of
  // setup" and "by device" numbers into BundledHeldOutErrors and BundledHeldOutErrorsByDevice
  // (src/bmpipe/validate/validate.cc).
  const Validation& v = BundledValidation();
  // Each compiled-in table against validate's summaries of the same groups.
  auto same = [](const std::vector<HeldOutError>& bundled, const std::vector<KindSummary>& measured) {
    ASSERT_EQ(bundled.size(), measured.size());
    for (std::size_t i = 0; i < measured.size(); ++i) {
      const KindSummary& k = measured[i];
      const HeldOutError& e = bundled[i];
      EXPECT_EQ(e.kind, k.kind);
      EXPECT_EQ(e.time_count, k.time.count) << k.kind;
      EXPECT_EQ(e.memory_count, k.memory.count) << k.kind;
      EXPECT_NEAR(e.time_mean_abs, k.time.mean_abs, 5e-4) << k.kind;
      EXPECT_NEAR(e.memory_mean_abs, k.memory.mean_abs, 5e-4) << k.kind;
    }
  };
  same(BundledHeldOutErrors(), v.held_out_by_kind);
  // The per-device table states time only.
  std::vector<KindSummary> devices = v.held_out_by_device;
  for (KindSummary& k : devices) k.memory = {};
  same(BundledHeldOutErrorsByDevice(), devices);
}

TEST(Validate, UncertaintyIsTheLargestOfTheSetupsKinds) {
  TrainingSetup dense;
  EXPECT_EQ(PredictionUncertainty(ModelPreset("llama3-8b").value(), dense),
            "±6.4 % time (dense, 64 held out), ±3.7 % memory (dense, 17 held out): mean |error| on published runs "
            "not fitted on (docs/fidelity.md)");
  TrainingSetup fp8_cp;
  fp8_cp.precision = Precision::kFp8;
  fp8_cp.cp = 2;
  const std::string both = PredictionUncertainty(ModelPreset("mixtral-8x7b").value(), fp8_cp);
  EXPECT_NE(both.find("±13.2 % time (moe, 12 held out), ±8.5 % memory (fp8, 2 held out)"),
            std::string::npos)
      << both;
  // A hybrid stack takes the hybrid runs' error, the largest of its kinds.
  const std::string hybrid = PredictionUncertainty(ModelPreset("nemotron-3-nano-30b-a3b").value(), dense);
  EXPECT_NE(hybrid.find("±14.2 % time (hybrid, 7 held out)"), std::string::npos) << hybrid;
  // A device whose held-out runs miss by more says so; one with none says that.
  const std::string gb300 = PredictionUncertainty(ModelPreset("llama3-8b").value(), dense, "gb300");
  EXPECT_NE(gb300.find("±6.4 % time (dense, 64 held out), ±3.7 % memory (dense, 17 held out), ±18.8 % time (on "
                       "gb300, 4 held out)"),
            std::string::npos)
      << gb300;
  EXPECT_EQ(PredictionUncertainty(ModelPreset("llama3-8b").value(), dense, "a100-80gb"),
            PredictionUncertainty(ModelPreset("llama3-8b").value(), dense));
  EXPECT_NE(PredictionUncertainty(ModelPreset("llama3-8b").value(), dense, "l4").find("no held-out run on l4"),
            std::string::npos);
}

TEST(Validate, FitRecoversEfficienciesThatMadeTheMeasurements) {
  BMPIPE_SLOW_TEST();
  // Measurements made by the model itself with known efficiencies: the fit must find them.
  DeviceSpec truth = DevicePreset("a100-80gb").value();
  truth.efficiency = Efficiencies{0.63, 0.5, 0.85, Efficiencies{}.link};
  const ModelSpec model = ModelPreset("gpt-22b").value();
  std::string runs;
  for (auto [recompute, sp] : {std::pair{"none", false}, {"none", true}, {"full", false}, {"selective", true}}) {
    TrainingSetup s;
    s.tp = 8;
    s.micro_batch_size = 4;
    s.global_batch_size = 4;
    s.seq = 2048;
    s.sequence_parallel = sp;
    const OptionCost c = EvaluateOption(DecoderLayerGraph(model, truth, s, false), recompute);
    runs += LayerRun(std::string(recompute) + (sp ? "-sp" : ""), recompute, sp, 1e3 * c.forward_s,
                     1e3 * (c.backward_s + c.recompute_s));
  }
  Result<RunTable> table = TableFrom("calibration:\n  - {device: a100-80gb, fit: [gemm, memory], runs: [none, "
                                     "none-sp, full, selective-sp]}\nruns:\n" + runs);
  ASSERT_TRUE(table.ok()) << table.error().message;
  Result<Validation> v = Validate(table.value());
  ASSERT_TRUE(v.ok()) << v.error().message;
  const Efficiencies& fitted = v.value().fitted[0].after;
  EXPECT_NEAR(fitted.gemm, 0.63, 0.002);
  EXPECT_NEAR(fitted.memory, 0.85, 0.005);
  EXPECT_EQ(fitted.link, Efficiencies{}.link);  // not fitted
  EXPECT_LT(v.value().calibration.max_abs, 0.002);
}

TEST(Validate, ThroughputBecomesIterationTimeWithTheSourcesFlopCount) {
  const std::string run =
      "  - {id: r, source: s, states: s, model: gpt-175b, device: a100-80gb, tp: 8, pp: 8, dp: 2, vpp: 3, mbs: 1, "
      "gbs: 64, seq: 2048, recompute: full, measured: {tflops_per_gpu: 150, flops: megatron-96, samples_per_gpu_per_s: "
      "0.02, iteration_time_s: 9.5}}\n";
  Result<RunTable> table = TableFrom("calibration: []\nruns:\n" + run);
  ASSERT_TRUE(table.ok()) << table.error().message;
  const PublishedRun& r = table.value().runs[0];
  ASSERT_EQ(r.measured.size(), 3u);
  // 96 B s l h² (1 + s/6h + V/16lh) over 128 GPUs at 150 TFLOP/s.
  const double b = 64, s = 2048, l = 96, h = 12288, v = 51200;
  const double flops = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
  EXPECT_NEAR(r.measured[1].value, flops / (150e12 * 128), 1e-9);
  EXPECT_NEAR(r.measured[2].value, 64 / (0.02 * 128), 1e-9);  // samples/s per GPU
  EXPECT_EQ(r.measured[0].value, 9.5);
  Result<Validation> val = Validate(table.value());
  ASSERT_TRUE(val.ok()) << val.error().message;
  EXPECT_TRUE(val.value().fitted.empty());  // nothing calibrated: the preset's efficiencies
  EXPECT_EQ(val.value().held_out_time.count, 3);
}

TEST(Validate, BadTablesNameTheField) {
  auto error = [](const std::string& yaml) {
    Result<RunTable> t = TableFrom(yaml);
    return t.ok() ? std::string("(accepted)") : t.error().message;
  };
  const std::string ok_run = LayerRun("a", "none", false, 7.7, 11.9);
  EXPECT_NE(error("calibration: []\nruns:\n" + ok_run + "  - {id: b}\n").find("runs[1]: missing required key 'source'"), std::string::npos);
  std::string bad = ok_run;
  bad.replace(bad.find("recompute: none"), 15, "recompute: partial");
  EXPECT_NE(error("calibration: []\nruns:\n" + bad).find("none, selective or full"), std::string::npos);
  bad = ok_run;
  bad.replace(bad.find("tp: 8"), 5, "tp: 7");
  EXPECT_NE(error("calibration: []\nruns:\n" + bad).find("--tp 7"), std::string::npos);
  EXPECT_NE(error("calibration: []\nruns:\n" + ok_run + ok_run).find("two runs have this id"), std::string::npos);
  EXPECT_NE(error("calibration: [{device: a100-80gb, fit: [gem], runs: [a]}]\nruns:\n" + ok_run).find("did you mean 'gemm'"),
            std::string::npos);
  EXPECT_NE(error("calibration: [{device: a100-80gb, fit: [gemm], runs: [zz]}]\nruns:\n" + ok_run).find("no run has this id"),
            std::string::npos);
  EXPECT_NE(error("calibration: [{device: h100-80gb, fit: [gemm], runs: [a]}]\nruns:\n" + ok_run).find("runs on a100-80gb"),
            std::string::npos);
  bad = ok_run;
  bad.replace(bad.find("layer_forward_ms"), 16, "tflops_per_gpu");
  EXPECT_NE(error("calibration: []\nruns:\n" + bad).find("give `flops`"), std::string::npos);
  EXPECT_NE(error("calibration: []\nruns:\n" + ok_run + "extra: 1\n").find("extra"), std::string::npos);
}

}  // namespace
// The frontier setups a run declares reach the cost model, and each run counts in its kinds.
TEST(Validate, ReadsTheFrontierSetupKeys) {
  const Result<RunTable> table = TableFrom(
      "calibration: []\nruns:\n"
      "  - {id: moe, source: test, states: test, model: mixtral-8x7b, device: h100-80gb, tp: 2, pp: 2, cp: 2, dp: 4, "
      "ep: 8, etp: 1, mbs: 1, gbs: 64, seq: 8192, recompute: norm+mlp_act, sequence_parallel: true, "
      "flash_attention: true, zero: 2, precision: fp8, grad_dtype: bf16, optimizer_dtype: bf16, tp_comm_overlap: 0.8, "
      "dp_overlap: 0.9, moe_capacity_factor: 1.25, moe_cuda_graphs: true, no_fp8_transpose_cache: true, "
      "offload_optimizer: true, offload_keeps_master: true, "
      "measured: {tokens_per_gpu_per_s: 1000}}\n"
      "  - {id: dense, source: test, states: test, model: llama3-8b, device: h100-80gb, tp: 1, pp: 1, dp: 8, mbs: 1, "
      "gbs: 8, seq: 4096, recompute: none, flash_attention: true, distributed_optimizer: true, "
      "measured: {iteration_time_s: 1}}\n");
  ASSERT_TRUE(table.ok()) << table.error().message;
  const PublishedRun& moe = table.value().runs[0];
  const TrainingSetup& s = moe.setup;
  EXPECT_EQ(s.cp, 2);
  EXPECT_EQ(s.ep, 8);
  EXPECT_EQ(s.etp, 1);
  EXPECT_EQ(s.zero, 2);
  EXPECT_EQ(s.precision, Precision::kFp8);
  EXPECT_EQ(s.grad_dtype, StateDtype::kBf16);
  EXPECT_EQ(s.optimizer_dtype, StateDtype::kBf16);
  EXPECT_DOUBLE_EQ(s.tp_comm_overlap, 0.8);
  EXPECT_DOUBLE_EQ(s.moe_capacity_factor, 1.25);
  EXPECT_EQ(s.recompute, std::vector<std::string>{"norm+mlp_act"});
  EXPECT_TRUE(s.moe_cuda_graphs);
  EXPECT_TRUE(s.no_fp8_transpose_cache);
  EXPECT_TRUE(s.offload_keeps_master);
  // 64 sequences of 8192 tokens at 1000 tokens/s on each of 2 x 2 x 2 x 4 = 32 devices.
  EXPECT_DOUBLE_EQ(moe.measured.at(0).value, 64.0 * 8192 / (1000.0 * 32));
  EXPECT_EQ(RunKinds(moe), (std::vector<std::string>{"moe", "cp", "fp8", "sharded"}));
  EXPECT_EQ(RunKinds(table.value().runs[1]), std::vector<std::string>{"dense"});
  // Predicted with every decoder layer on its one option, and summarized by kind.
  const Result<Validation> v = Validate(table.value());
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_NE(v.value().outcomes[0].flags.find("every decoder layer recomputes norm+mlp_act"), std::string::npos)
      << v.value().outcomes[0].flags;
  ASSERT_EQ(v.value().held_out_by_kind.size(), 5u);
  EXPECT_EQ(v.value().held_out_by_kind[0].kind, "dense");
  EXPECT_EQ(v.value().held_out_by_kind[1].kind, "moe");
  EXPECT_EQ(v.value().held_out_by_kind[1].time.count, 1);
  EXPECT_EQ(v.value().held_out_by_kind[1].time.worst, "moe");
}

// A run table's MoE rows are force-balanced benchmarks unless they say moe_routing natural (the
// command line's default); moe_imbalance overrides both.
TEST(Validate, TableRoutingIsBalancedUnlessARowSaysOtherwise) {
  auto setup = [](const std::string& extra) {
    const Result<RunTable> t = TableFrom(
        "calibration: []\nruns:\n  - {id: r, source: test, states: test, model: mixtral-8x7b, device: h100-80gb, "
        "tp: 1, pp: 1, dp: 8, ep: 8, mbs: 1, gbs: 8, seq: 4096, recompute: none, flash_attention: true" +
        extra + ", measured: {iteration_time_s: 1}}\n");
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
    return t.ok() ? t.value().runs[0].setup : TrainingSetup{};
  };
  EXPECT_EQ(MoeImbalance(setup("")), 1.0);
  EXPECT_EQ(MoeImbalance(setup(", moe_routing: natural")), kNaturalRoutingImbalance);
  EXPECT_EQ(MoeImbalance(setup(", moe_routing: natural, moe_imbalance: 1.5")), 1.5);
  EXPECT_EQ(MoeImbalance(TrainingSetup{}), kNaturalRoutingImbalance);  // the command line's default
}

// Memory as it was read: torch's peak allocated (memory_gb, memory_gib) against the model's peak,
// and the device's reading (memory_reserved_gb, memory_reserved_gib: nvidia-smi, or max reserved)
// against that peak and the framework reserve the plans are checked with.
TEST(Validate, ReservedMemoryIsThePeakAndTheReserve) {
  const Result<RunTable> table = TableFrom(
      "calibration: []\nruns:\n  - {id: r, source: test, states: test, model: llama3-8b, device: h100-80gb, tp: 1, "
      "pp: 1, dp: 8, mbs: 1, gbs: 8, seq: 4096, recompute: full, flash_attention: true, distributed_optimizer: true, "
      "measured: {memory_gb: 40, memory_reserved_gb: 50}}\n");
  ASSERT_TRUE(table.ok()) << table.error().message;
  const Result<Validation> v = Validate(table.value());
  ASSERT_TRUE(v.ok()) << v.error().message;
  const RunOutcome& o = v.value().outcomes[0];
  ASSERT_EQ(o.predicted.size(), 2u);
  EXPECT_EQ(table.value().runs[0].measured[1].quantity, Quantity::kReservedMemory);
  EXPECT_EQ(QuantityName(Quantity::kReservedMemory), "memory reserved");
  EXPECT_NEAR(o.predicted[1] - o.predicted[0],
              static_cast<double>(ReservedBytesDefault(DevicePreset("h100-80gb").value())), 1);
  EXPECT_EQ(v.value().held_out_memory.count, 2);
}

TEST(Validate, FrontierKeysRejectBadValues) {
  auto error = [](const std::string& extra) {
    const Result<RunTable> t = TableFrom(
        "calibration: []\nruns:\n  - {id: r, source: test, states: test, model: llama3-8b, device: h100-80gb, tp: 1, "
        "pp: 1, dp: 8, mbs: 1, gbs: 8, seq: 4096, recompute: none, flash_attention: true, " +
        extra + ", measured: {iteration_time_s: 1}}\n");
    return t.ok() ? std::string("accepted") : t.error().message;
  };
  EXPECT_NE(error("zero: 4").find("zero"), std::string::npos) << error("zero: 4");
  EXPECT_NE(error("precision: fp4").find("use bf16, fp8, mxfp8 or nvfp4"), std::string::npos) << error("precision: fp4");
  EXPECT_NE(error("moe_routing: even").find("use natural or balanced"), std::string::npos) << error("moe_routing: even");
  EXPECT_NE(error("grad_dtype: fp16").find("use fp32 or bf16"), std::string::npos) << error("grad_dtype: fp16");
  EXPECT_NE(error("tp_comm_overlap: 2").find("between 0 and 1"), std::string::npos) << error("tp_comm_overlap: 2");
  EXPECT_NE(error("recompute: everything").find("recompute"), std::string::npos) << error("recompute: everything");
  EXPECT_NE(error("ep: 2").find("--ep"), std::string::npos) << error("ep: 2");  // a dense model
  EXPECT_EQ(error("offload_layers: 4"), "accepted");
  EXPECT_NE(error("offload_layers: 40").find("offload_layers"), std::string::npos) << error("offload_layers: 40");
}

TEST(Validate, EveryFrontierKindHasHeldOutRuns) {
  BMPIPE_SLOW_TEST();
  std::map<std::string, int> runs;
  for (const KindSummary& k : BundledValidation().held_out_by_kind) runs[k.kind] = k.runs;
  for (const char* kind : {"moe", "cp", "fp8", "sharded"}) EXPECT_GE(runs[kind], 5) << kind;
  // The summaries are the outcomes regrouped.
  int moe = 0;
  for (const RunOutcome& o : BundledValidation().outcomes) {
    const std::vector<std::string> kinds = RunKinds(*o.run);
    if (!o.calibration && std::find(kinds.begin(), kinds.end(), "moe") != kinds.end()) ++moe;
  }
  EXPECT_EQ(runs["moe"], moe);
}

// `bmpipe calibrate`: the runs of a GPT-22B layout on H100, measured at times the preset predicts
// (then the fit finds the preset's GEMM efficiency again) or 25 % slower (a lower one that
// predicts them), and the device file it writes reads back with that efficiency.
std::string RunOn(const std::string& device, const std::string& id, int tp, double seconds) {
  return fmt::format("  - {{id: {}, source: test, states: test, model: gpt-22b, device: {}, tp: {}, pp: 2, dp: 4, "
                     "mbs: 1, gbs: 64, seq: 2048, recompute: selective, sequence_parallel: true, flash_attention: true, "
                     "measured: {{iteration_time_s: {:.9f}}}}}\n",
                     id, device, tp, seconds);
}

std::string H100Run(const std::string& id, int tp, double seconds) { return RunOn("h100-80gb", id, tp, seconds); }

TEST(Calibrate, FitsThePresetToItsOwnPredictionsAndASlowerDevice) {
  const RunTable probe = TableFrom("runs:\n" + H100Run("a", 4, 1) + H100Run("b", 8, 1)).value();
  const DeviceCalibration first = CalibrateDevice(probe, {"gemm"}).value();
  const double a = first.before_outcomes[0].predicted[0], b = first.before_outcomes[1].predicted[0];
  const double preset = DevicePreset("h100-80gb").value().efficiency.gemm;
  EXPECT_EQ(first.before.gemm, preset);

  const RunTable same = TableFrom("runs:\n" + H100Run("a", 4, a) + H100Run("b", 8, b)).value();
  const DeviceCalibration c = CalibrateDevice(same, {"gemm"}).value();
  EXPECT_NEAR(c.device.efficiency.gemm, preset, 0.0015);

  const RunTable slower = TableFrom("runs:\n" + H100Run("a", 4, 1.25 * a) + H100Run("b", 8, 1.25 * b)).value();
  const DeviceCalibration s = CalibrateDevice(slower, {"gemm"}).value();
  EXPECT_LT(s.device.efficiency.gemm, preset - 0.05);
  for (std::size_t i = 0; i < 2; ++i) {
    const double measured = slower.runs[i].measured[0].value;
    EXPECT_LT(std::abs(RelativeError(s.after_outcomes[i].predicted[0], measured)),
              std::abs(RelativeError(s.before_outcomes[i].predicted[0], measured)));
  }
  // The device file: the preset with the fitted efficiency.
  const std::string yaml = CalibratedDeviceYaml(slower, s);
  const std::string path = ::testing::TempDir() + "/calibrated-h100.yaml";
  ASSERT_TRUE(WriteFileAtomically(path, yaml).ok());
  const DeviceSpec device = LoadDevice(path).value();
  EXPECT_NEAR(device.efficiency.gemm, s.device.efficiency.gemm, 0.0005);
  EXPECT_EQ(device.efficiency.attention, s.device.efficiency.attention);
  EXPECT_EQ(device.memory_bytes, s.device.memory_bytes);
  EXPECT_NE(FormatCalibration(slower, s).find("predicted after"), std::string::npos);
  EXPECT_EQ(CalibrationToJson(slower, s)["runs"].size(), 2u);
}

TEST(Calibrate, RefusesMixedDevicesAndUnknownEfficiencies) {
  const RunTable mixed = TableFrom("runs:\n" + H100Run("a", 4, 1) + RunOn("a100-80gb", "b", 4, 1)).value();
  const Result<DeviceCalibration> m = CalibrateDevice(mixed, {"gemm"});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("one device at a time"), std::string::npos) << m.error().message;
  const RunTable one = TableFrom("runs:\n" + H100Run("a", 4, 1)).value();
  const Result<DeviceCalibration> u = CalibrateDevice(one, {"gem"});
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.error().message.find("did you mean 'gemm'"), std::string::npos) << u.error().message;
  EXPECT_FALSE(CalibrateDevice(one, {"gemm", "memory", "link"}).ok());
  EXPECT_FALSE(CalibrateDevice(one, {}).ok());
}

}  // namespace bmpipe

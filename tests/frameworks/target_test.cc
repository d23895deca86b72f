// Targets (the frameworks that run plans): on small problems, every contiguous partition and every
// per-layer option assignment is enumerated here, independently of the planner, and
//  - PlanForTarget's plan is the best fitting one each target runs (its status optimal; infeasible
//    where none fits);
//  - TargetRunsPlan agrees with each framework's rule written out here from the framework's own
//    semantics (Megatron's global settings and block recomputation, MindFormers' per-stage counts
//    from the stage's first layer, DeepSpeed's per-layer checkpointing, torchtitan's mode);
//  - stock Megatron's best (RunBaseline, Compare's row) is no slower than any stock Megatron
//    configuration (every layout with every global setting, enumerated here);
// and on cost-model problems every target's plan exports and reads back to itself.
#include "bmpipe/frameworks/settings.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bmpipe/baselines/baselines.h"
#include "bmpipe/baselines/compare.h"
#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/hardware/device.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/model/model.h"
#include "bmpipe/sim/simulator.h"
#include "test_support.h"

namespace bmpipe {
namespace {

constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();

// ---------------------------------------------------------------------------------------------
// Small problems: an embedding, decoder layers with recomputation options named by what they
// recompute (problem/recompute.h), and a head.

struct OptionSpec {
  std::string name;
  TimeNs recompute_pct;  // percent of the forward redone in the backward
  Bytes saved;           // kept per micro-batch (per unit of the layer's scale)
  Bytes transient;
};

// Costs consistent with the parts each option drops: core attention 300, the MLP 450 (its
// activation 200 of that), the norms 150, of 1000 saved without recomputation.
const std::vector<OptionSpec>& AllDecoderOptions() {
  static const std::vector<OptionSpec> k = {
      {"none", 0, 1000, 100},         {"selective", 10, 700, 150},     {"mlp", 40, 550, 200},
      {"mlp_act", 8, 800, 120},       {"norm", 5, 850, 110},           {"selective+mlp", 50, 250, 250},
      {"mlp_act+norm", 13, 650, 130}, {"full", 100, 100, 1000},
  };
  return k;
}

std::vector<std::string> AllDecoderOptionNames() {
  std::vector<std::string> names;
  for (const OptionSpec& o : AllDecoderOptions()) names.push_back(o.name);
  return names;
}

// A decoder layer with forward `f` and activations scaled by `scale`, with the named options.
Layer Decoder(const std::string& name, TimeNs f, Bytes scale, const std::vector<std::string>& options) {
  Layer l;
  l.name = name;
  l.static_bytes = 1000;
  l.p2p_ns = 10;
  for (const std::string& want : options) {
    for (const OptionSpec& o : AllDecoderOptions()) {
      if (o.name != want) continue;
      l.options.push_back({o.name, f, 2 * f, f * o.recompute_pct / 100, o.saved * scale, o.transient * scale});
    }
  }
  EXPECT_EQ(l.options.size(), options.size());
  return l;
}

struct SmallCase {
  std::string name;
  Problem problem;
};

// Embedding (heavy static memory), the decoders, and a head with `head_options` (none first).
Problem Small(ScheduleKind schedule, int ranks, int chunks, int m, const std::vector<Layer>& decoders, TimeNs head_ns,
              const std::vector<std::string>& head_options = {"none"}) {
  Problem p;
  p.name = "small";
  p.pipeline = {schedule, ranks, chunks, m};
  p.p2p_ns = 10;
  p.memory_bytes = Bytes{1} << 40;
  Layer embedding;
  embedding.name = "embedding";
  embedding.static_bytes = 3000;
  embedding.p2p_ns = 10;
  embedding.options.push_back({"none", 20, 40, 0, 300, 50});
  p.layers.push_back(embedding);
  for (const Layer& d : decoders) p.layers.push_back(d);
  Layer head;
  head.name = "head";
  head.static_bytes = 3000;
  head.p2p_ns = 10;
  for (const std::string& o : head_options) {
    if (o == "none") head.options.push_back({"none", head_ns, 2 * head_ns, 0, 400, 100});
    if (o == "full") head.options.push_back({"full", head_ns, 2 * head_ns, head_ns, 50, 400});
    if (o == "offload") head.options.push_back({"offload", head_ns, 2 * head_ns, head_ns / 4, 80, 150});  // no known meaning
  }
  p.layers.push_back(head);
  EXPECT_TRUE(ValidateProblem(p).ok());
  return p;
}

std::vector<Layer> Identical(int n, const std::vector<std::string>& options) {
  return std::vector<Layer>(static_cast<std::size_t>(n), Decoder("decoder", 100, 1, options));
}

// ---------------------------------------------------------------------------------------------
// Enumeration: every contiguous partition into p*v non-empty stages, every option per layer.

std::vector<std::vector<LayerIdx>> AllPartitions(int layers, int stages) {
  std::vector<std::vector<LayerIdx>> out;
  std::vector<LayerIdx> begin(stages + 1, 0);
  begin[stages] = layers;
  std::function<void(int)> place = [&](int s) {
    if (s == stages) {
      out.push_back(begin);
      return;
    }
    for (LayerIdx x = begin[s - 1] + 1; x <= layers - (stages - s); ++x) {
      begin[s] = x;
      place(s + 1);
    }
  };
  if (stages == 1) {
    out.push_back(begin);
  } else {
    place(1);
  }
  return out;
}

// Calls fn on every option assignment (a mixed-radix counter over the layers' option counts).
void ForEachAssignment(const Problem& p, const std::function<void(const std::vector<OptionIdx>&)>& fn) {
  std::vector<OptionIdx> option(p.num_layers(), 0);
  while (true) {
    fn(option);
    LayerIdx l = 0;
    while (l < p.num_layers() && ++option[l] == static_cast<OptionIdx>(p.layers[l].options.size())) option[l++] = 0;
    if (l == p.num_layers()) return;
  }
}

struct Simulated {
  Plan plan;
  TimeNs time;
  bool fits;
};

std::vector<Simulated> EnumerateAll(const Problem& p) {
  std::vector<Simulated> out;
  for (const std::vector<LayerIdx>& begin : AllPartitions(p.num_layers(), p.pipeline.stages())) {
    ForEachAssignment(p, [&](const std::vector<OptionIdx>& option) {
      Plan plan{begin, option};
      const SimResult sim = SimulatePlan(p, plan).value();
      out.push_back({std::move(plan), sim.iteration_ns, sim.fits});
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Each framework's rule, written from its own semantics (not from StageSpace or TargetRunsPlan).
// The embedding is layer 0 and the head the last layer (their names occur once); the rest are the
// decoder layers ("layers" to every framework).

bool IsDecoder(const Problem& p, LayerIdx l) { return l > 0 && l + 1 < p.num_layers(); }
const std::string& NameOf(const Problem& p, const Plan& plan, LayerIdx l) { return p.layers[l].options[plan.option[l]].name; }

// The embedding and the head at their no-recomputation option.
bool EndsAtNone(const Problem& p, const Plan& plan) {
  return NameOf(p, plan, 0) == "none" && NameOf(p, plan, p.num_layers() - 1) == "none";
}

// Megatron: one global setting. Either every decoder layer takes the same option among `uniform`
// (none, selective = core_attn, the selective module sets the spec honours, full uniform with
// --recompute-num-layers 1), or full block N: in every stage (chunk) the first N decoder layers
// recompute fully and the rest not at all, the same N everywhere.
bool MegatronRule(const Problem& p, const Plan& plan, const std::set<std::string>& uniform) {
  if (!EndsAtNone(p, plan)) return false;
  std::set<std::string> used;
  for (LayerIdx l = 1; l + 1 < p.num_layers(); ++l) used.insert(NameOf(p, plan, l));
  if (used.size() == 1 && uniform.count(*used.begin())) return true;
  // Block N.
  std::optional<int> n;  // fixed by a stage that has a layer without recomputation
  int at_least = 0;      // stages recomputing all their decoder layers need N >= their count
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    int full = 0, none = 0;
    for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
      if (!IsDecoder(p, l)) continue;
      const std::string& o = NameOf(p, plan, l);
      if (o == "full" && none == 0) {
        ++full;
      } else if (o == "none") {
        ++none;
      } else {
        return false;  // another option, or full after a layer without recomputation
      }
    }
    if (none > 0) {
      if (n && *n != full) return false;
      n = full;
    } else {
      at_least = std::max(at_least, full);
    }
  }
  return !n || *n >= at_least;
}

const std::set<std::string> kMegatronTe = {"none", "selective", "mlp", "selective+mlp", "full"};
const std::set<std::string> kMegatronLocal = {"none",           "selective",     "mlp",
                                              "norm",           "selective+mlp", "selective+norm",
                                              "mlp+norm",       "selective+mlp+norm", "full"};

// MindFormers: per stage, recompute (full), select_recompute (the MLP activation) and
// select_comm_recompute (the norms) each count layers from the stage's first decoder layer; a
// layer under full recomputes whole, else under both lists both. So in layer order: full layers,
// then both, then select-only or comm-only (never both kinds in one stage), then none. Every stage
// holds a decoder layer. With `ordered` false, only the multiset of options per stage is checked.
bool MindFormersRule(const Problem& p, const Plan& plan, bool ordered) {
  if (p.pipeline.schedule == ScheduleKind::kGPipe || !EndsAtNone(p, plan)) return false;
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    int decoders = 0, last_rank = 0;
    bool select = false, comm = false;
    for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
      if (!IsDecoder(p, l)) continue;
      ++decoders;
      const std::string& o = NameOf(p, plan, l);
      int rank;
      if (o == "full") {
        rank = 0;
      } else if (o == "mlp_act+norm") {
        rank = 1;
      } else if (o == "mlp_act") {
        rank = 2;
        select = true;
      } else if (o == "norm") {
        rank = 2;
        comm = true;
      } else if (o == "none") {
        rank = 3;
      } else {
        return false;
      }
      if (ordered && rank < last_rank) return false;
      last_rank = rank;
    }
    if (decoders == 0 || (select && comm)) return false;
  }
  return true;
}

// DeepSpeed: a PipelineModule checkpoints whole layers, chosen per layer; no interleaving.
bool DeepSpeedRule(const Problem& p, const Plan& plan) {
  if (p.pipeline.chunks > 1 || !EndsAtNone(p, plan)) return false;
  for (LayerIdx l = 1; l + 1 < p.num_layers(); ++l) {
    const std::string& o = NameOf(p, plan, l);
    if (o != "none" && o != "full") return false;
  }
  return true;
}

// torchtitan: activation_checkpoint mode none or full, on every transformer block.
bool TorchTitanRule(const Problem& p, const Plan& plan) {
  if (!EndsAtNone(p, plan)) return false;
  std::set<std::string> used;
  for (LayerIdx l = 1; l + 1 < p.num_layers(); ++l) used.insert(NameOf(p, plan, l));
  return used.size() == 1 && (*used.begin() == "none" || *used.begin() == "full");
}

// torch: the model's own checkpointing code, per layer, for options with a known meaning.
bool TorchRule(const Problem& p, const Plan& plan) {
  const std::set<std::string> known = {"none", "selective", "mlp",          "mlp_act", "norm",
                                       "selective+mlp", "mlp_act+norm", "full"};
  for (LayerIdx l = 0; l < p.num_layers(); ++l) {
    if (!known.count(NameOf(p, plan, l))) return false;
  }
  return true;
}

bool Rule(TargetKind kind, const Problem& p, const Plan& plan) {
  switch (kind) {
    case TargetKind::kAny:
      return true;
    case TargetKind::kTorch:
      return TorchRule(p, plan);
    case TargetKind::kMegatron:
      return MegatronRule(p, plan, kMegatronTe);
    case TargetKind::kMegatronLocal:
      return MegatronRule(p, plan, kMegatronLocal);
    case TargetKind::kMindFormers:
      return MindFormersRule(p, plan, true);
    case TargetKind::kDeepSpeed:
      return DeepSpeedRule(p, plan);
    case TargetKind::kTorchTitan:
      return TorchTitanRule(p, plan);
  }
  return false;
}

std::string Describe(const Problem& p, const Plan& plan) {
  std::string out;
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    out += s == 0 ? "[" : " | [";
    for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
      out += fmt::format("{}{}:{}", l == plan.begin(s) ? "" : " ", p.layers[l].name, NameOf(p, plan, l));
    }
    out += "]";
  }
  return out;
}

PlannerOptions Exact() {
  PlannerOptions o;
  o.time_limit_s = 30;
  return o;
}

// ---------------------------------------------------------------------------------------------
// 1 and 2: brute force on small problems, for every target.

struct BruteCase {
  std::string name;
  std::function<Problem()> make;
  std::set<TargetKind> infeasible;  // the targets none of whose plans fit
  bool needs_recompute;             // no plan without recomputation fits
};

Problem WithMemory(Problem p, Bytes bytes) {
  p.memory_bytes = bytes;
  return p;
}

std::vector<BruteCase> BruteCases() {
  const std::vector<std::string> all = AllDecoderOptionNames();
  const std::vector<std::string> six = {"none", "selective", "mlp_act", "norm", "mlp_act+norm", "full"};
  // Capacities lie below the least any plan without recomputation needs (9500, 7500, 10500, 8200
  // and 13600 bytes in the first five cases) and above the least any plan needs (6850, 4900, 7600,
  // 5400, 8900).
  return {
      // Identical decoders with all eight options; 1F1B on 2 and 3 ranks.
      {"identical_p2", [=] { return WithMemory(Small(ScheduleKind::kOneFOneB, 2, 1, 4, Identical(4, all), 150), 8400); },
       {}, true},
      {"identical_p3", [=] { return WithMemory(Small(ScheduleKind::kOneFOneB, 3, 1, 6, Identical(4, all), 60), 7000); },
       {}, true},
      // Interleaved, 2 ranks x 2 chunks.
      {"interleaved",
       [=] { return WithMemory(Small(ScheduleKind::kInterleavedOneFOneB, 2, 2, 4, Identical(5, six), 120), 9000); },
       {}, true},
      // Mixed decoders (a heavier one in the middle), a head that can recompute, and an option
      // without a known meaning on the head (torch cannot run it).
      {"mixed",
       [=] {
         std::vector<Layer> d = {Decoder("decoder", 100, 1, all), Decoder("decoder", 100, 1, all),
                                 Decoder("wide", 200, 2, all), Decoder("decoder", 100, 1, all)};
         return WithMemory(Small(ScheduleKind::kOneFOneB, 3, 1, 6, d, 100, {"none", "full", "swap"}), 7000);
       },
       {}, true},
      // Mixed decoders interleaved.
      {"mixed_interleaved",
       [=] {
         std::vector<Layer> d = {Decoder("wide", 200, 2, six), Decoder("decoder", 100, 1, six),
                                 Decoder("decoder", 100, 1, six), Decoder("wide", 200, 2, six),
                                 Decoder("decoder", 100, 1, six)};
         return WithMemory(Small(ScheduleKind::kInterleavedOneFOneB, 2, 2, 4, d, 80), 11000);
       },
       {}, true},
      // The embedding nearly fills a device: only a stage holding the embedding alone fits (its
      // static bytes and its activations with 3 micro-batches in flight), which MindFormers cannot
      // run (every stage holds a decoder layer).
      {"embedding_alone",
       [=] {
         Problem p = Small(ScheduleKind::kOneFOneB, 3, 1, 6, Identical(4, {"none", "mlp_act", "mlp_act+norm", "full"}), 60);
         p.layers[0].static_bytes = 20'000;
         return WithMemory(p, 20'000 + 3 * 300 + 50 + 1000);
       },
       {TargetKind::kMindFormers}, false},
      // Nothing fits at all.
      {"nothing_fits",
       [=] { return WithMemory(Small(ScheduleKind::kOneFOneB, 2, 1, 4, Identical(4, all), 100), 4000); },
       {TargetKind::kAny, TargetKind::kTorch, TargetKind::kMegatron, TargetKind::kMegatronLocal,
        TargetKind::kMindFormers, TargetKind::kDeepSpeed, TargetKind::kTorchTitan},
       false},
  };
}

class BruteForce : public ::testing::TestWithParam<BruteCase> {};

TEST_P(BruteForce, TargetPlanningIsExactAndTheRulesAreTheFrameworks) {
  // The enumerations take up to 3 s each; the fast tier keeps the quickest case.
  if (GetParam().name != "embedding_alone") BMPIPE_SLOW_TEST();
  const Problem p = GetParam().make();
  const auto began = std::chrono::steady_clock::now();
  const std::vector<Simulated> plans = EnumerateAll(p);
  std::size_t fitting = 0;
  bool none_fits = false;
  for (const Simulated& x : plans) {
    fitting += x.fits;
    bool none = true;
    for (LayerIdx l = 0; l < p.num_layers(); ++l) none = none && NameOf(p, x.plan, l) == "none";
    none_fits = none_fits || (none && x.fits);
  }
  // Recomputation matters: no plan without it fits, and some plan fits.
  if (GetParam().needs_recompute) {
    EXPECT_FALSE(none_fits);
    EXPECT_GT(fitting, 0u);
  }
  std::string summary;
  for (const Target& target : Targets()) {
    SCOPED_TRACE(std::string(target.name));
    const bool pipeline_ok = !(p.pipeline.chunks > 1 && !target.Interleaves());
    TimeNs best_runs = kNever, best_rule = kNever;
    const Simulated* best_plan = nullptr;
    int disagreements = 0, order_only = 0, runs_count = 0;
    std::string first_disagreement;
    for (const Simulated& x : plans) {
      const bool runs = TargetRunsPlan(p, x.plan, target.kind);
      const bool rule = pipeline_ok && Rule(target.kind, p, x.plan);
      runs_count += runs;
      if (runs != rule) {
        // MindFormers: TargetRunsPlan checks the counts of each stage; the order of the options
        // within a stage is the framework's (full first, ...). A plan whose options could be
        // reordered into one MindFormers runs differs on order alone.
        const bool unordered = target.kind == TargetKind::kMindFormers && MindFormersRule(p, x.plan, false);
        if (runs && !rule && unordered) {
          ++order_only;
        } else {
          if (disagreements++ == 0) {
            first_disagreement = fmt::format("{}: TargetRunsPlan {}, the framework's rule {}", Describe(p, x.plan), runs, rule);
          }
        }
      }
      if (!x.fits) continue;
      if (runs && x.time < best_runs) {
        best_runs = x.time;
        best_plan = &x;
      }
      if (rule) best_rule = std::min(best_rule, x.time);
    }
    EXPECT_EQ(disagreements, 0) << "first: " << first_disagreement;
    EXPECT_EQ(best_runs == kNever, GetParam().infeasible.count(target.kind) > 0 || !pipeline_ok);
    summary += fmt::format(" {} {} ({} runs, {} order only);", target.name, best_runs == kNever ? -1 : best_runs,
                           runs_count, order_only);
    if (target.kind != TargetKind::kMindFormers) {
      EXPECT_EQ(order_only, 0);
    }

    const Result<TargetPlan> planned = PlanForTarget(p, target.kind, Exact());
    if (!pipeline_ok) {
      EXPECT_FALSE(planned.ok());
      EXPECT_EQ(runs_count, 0);
      continue;
    }
    ASSERT_TRUE(planned.ok()) << planned.error().message;
    const PlannerResult& r = planned.value().planner;
    if (best_runs == kNever) {
      EXPECT_EQ(r.status, ModelStatus::kInfeasible) << "no enumerated plan the target runs fits";
      EXPECT_EQ(best_rule, kNever);
      continue;
    }
    ASSERT_EQ(r.status, ModelStatus::kOptimal) << "the best enumerated plan: " << Describe(p, best_plan->plan);
    EXPECT_EQ(r.iteration_ns, best_runs) << "planned: " << Describe(p, r.plan)
                                         << "\nbest enumerated: " << Describe(p, best_plan->plan);
    EXPECT_EQ(SimulatePlan(p, r.plan).value().iteration_ns, r.iteration_ns);
    EXPECT_TRUE(SimulatePlan(p, r.plan).value().fits);
    EXPECT_TRUE(TargetRunsPlan(p, r.plan, target.kind)) << Describe(p, r.plan);
    // The plan is one the framework runs as planned (MindFormers: in its order).
    EXPECT_TRUE(Rule(target.kind, p, r.plan)) << Describe(p, r.plan);
    // The best the framework's own rule allows is as fast.
    EXPECT_EQ(best_rule, best_runs) << "planned: " << Describe(p, r.plan);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::printf("%s: %zu plans (%zu fit), %.2f s; best:%s\n", GetParam().name.c_str(), plans.size(), fitting, seconds,
              summary.c_str());
}

INSTANTIATE_TEST_SUITE_P(Target, BruteForce, ::testing::ValuesIn(BruteCases()),
                         [](const ::testing::TestParamInfo<BruteCase>& c) { return c.param.name; });

// ---------------------------------------------------------------------------------------------
// 3: stock Megatron's best is no slower than any stock Megatron configuration: every layout
// (--pipeline-model-parallel-layout: any contiguous split into p*v stages, the embedding on the
// first and the head on the last) with every global recomputation setting, enumerated here.

struct Stock {
  TimeNs time = kNever;
  std::string config;
};

OptionIdx OptionNamed(const Layer& layer, const std::string& name) {
  for (OptionIdx o = 0; o < static_cast<OptionIdx>(layer.options.size()); ++o) {
    if (layer.options[o].name == name) return o;
  }
  return -1;
}

// The best fitting configuration over the given stage splits and every setting the spec has.
Stock BestStock(const Problem& p, const std::vector<std::vector<LayerIdx>>& splits, const std::set<std::string>& modules) {
  Stock best;
  for (const std::vector<LayerIdx>& begin : splits) {
    Plan plan{begin, std::vector<OptionIdx>(p.num_layers(), 0)};
    for (LayerIdx l = 0; l < p.num_layers(); ++l) plan.option[l] = OptionNamed(p.layers[l], "none");
    int most = 0;
    for (StageIdx s = 0; s < plan.num_stages(); ++s) {
      int decoders = 0;
      for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) decoders += IsDecoder(p, l);
      most = std::max(most, decoders);
    }
    auto consider = [&](const Plan& candidate, const std::string& setting) {
      const SimResult sim = SimulatePlan(p, candidate).value();
      if (sim.fits && sim.iteration_ns < best.time) best = {sim.iteration_ns, Describe(p, candidate) + ", " + setting};
    };
    // Uniform: the same option on every decoder layer.
    for (const std::string& o : modules) {
      Plan uniform = plan;
      bool every = true;
      for (LayerIdx l = 1; l + 1 < p.num_layers(); ++l) {
        uniform.option[l] = OptionNamed(p.layers[l], o);
        every = every && uniform.option[l] >= 0;
      }
      if (every) consider(uniform, o);
    }
    // Full block N: the first N decoder layers of every stage.
    for (int n = 1; n < most; ++n) {
      Plan block = plan;
      for (StageIdx s = 0; s < plan.num_stages(); ++s) {
        int left = n;
        for (LayerIdx l = plan.begin(s); l < plan.end(s) && left > 0; ++l) {
          if (!IsDecoder(p, l)) continue;
          block.option[l] = OptionNamed(p.layers[l], "full");
          --left;
        }
      }
      consider(block, fmt::format("block {}", n));
    }
  }
  return best;
}

// The splits Megatron's older flags give (before --pipeline-model-parallel-layout): the even split,
// the embedding and/or the loss counted as a layer, and without interleaving
// --decoder-first/last-pipeline-num-layers with equal middle stages.
std::vector<std::vector<LayerIdx>> OldSplits(const Problem& p) {
  const int stages = p.pipeline.stages(), decoders = p.num_layers() - 2;
  std::vector<std::vector<int>> counts;
  for (int extra_first = 0; extra_first <= 1; ++extra_first) {
    for (int extra_last = 0; extra_last <= 1; ++extra_last) {
      const int total = decoders + extra_first + extra_last;
      if (total % stages != 0) continue;
      std::vector<int> c(stages, total / stages);
      c.front() -= extra_first;
      c.back() -= extra_last;
      counts.push_back(c);
    }
  }
  if (p.pipeline.chunks == 1 && stages >= 2) {
    for (int first = 1; first < decoders; ++first) {
      for (int last = 1; first + last <= decoders; ++last) {
        const int middle = decoders - first - last;
        if (stages == 2 ? middle != 0 : (middle <= 0 || middle % (stages - 2) != 0)) continue;
        std::vector<int> c(stages, stages == 2 ? 0 : middle / (stages - 2));
        c.front() = first;
        c.back() = last;
        counts.push_back(c);
      }
    }
  }
  std::vector<std::vector<LayerIdx>> splits;
  for (const std::vector<int>& c : counts) {
    std::vector<LayerIdx> begin = {0};
    LayerIdx at = 1;
    bool ok = true;
    for (int s = 0; s < stages; ++s) {
      at += c[s];
      const LayerIdx end = s + 1 == stages ? p.num_layers() : at;
      ok = ok && c[s] >= 0 && end > begin.back();
      begin.push_back(end);
    }
    if (ok) splits.push_back(begin);
  }
  return splits;
}

struct MegatronCase {
  std::string name;
  Problem problem;
  std::string winner;    // the setting of the best stock configuration, when the case is about it
  bool layout_matters;   // the older flags' splits are strictly slower than the best layout
};

std::vector<MegatronCase> MegatronCases() {
  const std::vector<std::string> all = AllDecoderOptionNames();
  std::vector<MegatronCase> cases;
  cases.push_back({"identical_p2", WithMemory(Small(ScheduleKind::kOneFOneB, 2, 1, 4, Identical(4, all), 150), 8400), "", false});
  cases.push_back({"selective_mlp", WithMemory(Small(ScheduleKind::kOneFOneB, 2, 1, 4, Identical(6, all), 100), 9000),
                   "selective+mlp", false});
  cases.push_back({"heavy_head_interleaved",
                   Small(ScheduleKind::kInterleavedOneFOneB, 2, 2, 4, Identical(6, all), 400), "none", true});
  cases.push_back({"heavy_head_p4", Small(ScheduleKind::kOneFOneB, 4, 1, 8, Identical(9, all), 300), "none", true});
  return cases;
}

// PlanForTarget walks a target's settings pruning some: a setting whose rank-load floor (with a
// block setting's recomputed first decoder layer of every stage) is no faster than the best so
// far, and block settings past the one whose block covers every stage of a faster plan. On random
// problems, most memory-tight (where block recomputation wins), its plan is as fast as the best
// of every setting planned alone, its bound is no higher, and it is proven optimal when each
// setting is.
TEST(Target, PruningSettingsKeepsTheBestSetting) {
  BMPIPE_SLOW_TEST();
  std::mt19937_64 rng(20261205);
  const std::vector<std::string> options = {"none", "selective", "mlp", "full"};
  int block_wins = 0;
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(trial);
    const int ranks = 2 + static_cast<int>(rng() % 2);
    const int chunks = 1 + static_cast<int>(rng() % 2);
    const int m = ranks * (2 + static_cast<int>(rng() % 3));
    const int decoders = ranks * chunks + 1 + static_cast<int>(rng() % 5);
    std::vector<Layer> d;
    for (int i = 0; i < decoders; ++i) {
      const TimeNs f = 60 + static_cast<TimeNs>(rng() % 140);
      d.push_back(Decoder("decoder", f, 1 + static_cast<Bytes>(rng() % 2), options));
    }
    Problem p = Small(chunks > 1 ? ScheduleKind::kInterleavedOneFOneB : ScheduleKind::kOneFOneB, ranks, chunks, m, d,
                      80 + static_cast<TimeNs>(rng() % 100));
    // Memory from what every layer fully recomputed needs to what none needs (a plan's peak with
    // every decoder at one option on the even split), so that each kind of setting wins somewhere.
    auto even_peak = [&](const std::string& option) {
      Plan plan = EvenPlan(p);
      for (LayerIdx l = 1; l + 1 < p.num_layers(); ++l) plan.option[l] = OptionNamed(p.layers[l], option);
      const SimResult sim = SimulatePlan(p, plan).value();
      Bytes peak = 0;
      for (const RankResult& rank : sim.ranks) peak = std::max(peak, rank.peak_memory_bytes);
      return peak;
    };
    const Bytes lo = even_peak("full"), hi = even_peak("none");
    p.memory_bytes = lo + static_cast<Bytes>(rng() % static_cast<std::uint64_t>(std::max<Bytes>(1, (hi - lo) / 3 + 1)));
    for (TargetKind kind : {TargetKind::kMegatron, TargetKind::kMegatronLocal}) {
      TimeNs best = kNever;
      std::string best_flags;
      bool all_optimal = true;
      int settings = 0;
      ASSERT_TRUE(ForEachTargetSetting(p, kind, [&](const TargetSetting& setting) {
                    ++settings;
                    PlannerOptions one = Exact();
                    one.space = setting.space;
                    const PlannerResult r = PlanPipeline(p, one).value();
                    all_optimal = all_optimal && (r.status == ModelStatus::kOptimal || r.status == ModelStatus::kInfeasible);
                    if ((r.status == ModelStatus::kOptimal || r.status == ModelStatus::kFeasible) && r.iteration_ns < best) {
                      best = r.iteration_ns;
                      best_flags = setting.flags;
                    }
                    return true;
                  }, MostDecodersThatFit(p)).ok());
      ASSERT_TRUE(all_optimal);
      const TargetPlan planned = PlanForTarget(p, kind, Exact()).value();
      const PlannerResult& r = planned.planner;
      if (best == kNever) {
        EXPECT_EQ(r.status, ModelStatus::kInfeasible);
        continue;
      }
      EXPECT_EQ(r.status, ModelStatus::kOptimal) << best_flags;
      EXPECT_EQ(r.iteration_ns, best) << "best alone: " << best_flags << "; planned: " << planned.setting;
      EXPECT_LE(r.bound_ns, static_cast<double>(best));
      block_wins += best_flags.find("block") != std::string::npos;
      EXPECT_LE(planned.settings, settings);
    }
  }
  std::printf("block settings best in %d of 80 runs\n", block_wins);
  EXPECT_GT(block_wins, 0);
}

// The floor of a block setting counts the recomputed first decoder layer of every stage but the
// first and the last: it stays below each block setting's optimum, above the floor that leaves it
// out, and with many micro-batches (little bubble) within a few percent of block 1's optimum
// (doubling the counted work would put it above).
TEST(Target, BlockSettingFloorCountsEachStagesRecomputedLayer) {
  const Problem p = Small(ScheduleKind::kInterleavedOneFOneB, 2, 3, 32, Identical(10, {"none", "full"}), 20);
  const Schedule schedule(p.pipeline);
  int checked = 0;
  ASSERT_TRUE(ForEachTargetSetting(p, TargetKind::kMegatron, [&](const TargetSetting& setting) {
                if (setting.space.block < 0) return true;
                SCOPED_TRACE(setting.flags);
                PlannerOptions one = Exact();
                one.space = setting.space;
                const PlannerResult r = PlanPipeline(p, one).value();
                EXPECT_EQ(r.status, ModelStatus::kOptimal);
                const TimeNs floor = SpaceFloor(p, setting.space, schedule);
                StageSpace without_block = setting.space;
                without_block.block = -1;
                const TimeNs loose = SpaceFloor(p, without_block, schedule);
                std::printf("%s: optimum %lld, floor %lld, without the recomputed layers %lld\n", setting.flags.c_str(),
                            static_cast<long long>(r.iteration_ns), static_cast<long long>(floor),
                            static_cast<long long>(loose));
                EXPECT_LE(floor, r.iteration_ns);
                EXPECT_GT(floor, loose);
                // Block 1 recomputes exactly one decoder layer per stage: what the floor counts.
                if (setting.space.block == 1) {
                  EXPECT_GE(static_cast<double>(floor), 0.92 * static_cast<double>(r.iteration_ns));
                }
                ++checked;
                return true;
              }, MostDecodersThatFit(p)).ok());
  EXPECT_GT(checked, 0);
}

TEST(Target, MegatronBaselineIsNoSlowerThanAnyStockConfiguration) {
  for (const MegatronCase& c : MegatronCases()) {
    SCOPED_TRACE(c.name);
    const Problem& p = c.problem;
    const std::vector<std::vector<LayerIdx>> layouts = AllPartitions(p.num_layers(), p.pipeline.stages());
    for (const TargetKind spec : {TargetKind::kMegatron, TargetKind::kMegatronLocal}) {
      SCOPED_TRACE(std::string(TargetOf(spec).name));
      const Stock best = BestStock(p, layouts, spec == TargetKind::kMegatron ? kMegatronTe : kMegatronLocal);
      ASSERT_NE(best.time, kNever) << "no stock configuration fits";
      BaselineOptions options;
      options.megatron_target = spec;
      const BaselineResult r = RunBaseline(BaselineKind::kMegatron, p, options);
      ASSERT_TRUE(r.has_plan && r.fits) << r.config;
      const TimeNs baseline = SimulatePlan(p, r.plan).value().iteration_ns;
      EXPECT_LE(baseline, best.time) << r.config << "\nbest stock: " << best.config;
      // And it is a stock configuration itself, so no faster either.
      EXPECT_TRUE(MegatronRule(p, r.plan, spec == TargetKind::kMegatron ? kMegatronTe : kMegatronLocal)) << r.config;
      EXPECT_EQ(baseline, best.time) << r.config << "\nbest stock: " << best.config;
      if (!c.winner.empty()) {
        EXPECT_NE(best.config.find(", " + c.winner), std::string::npos) << best.config;
        if (c.winner == "selective+mlp") {
          EXPECT_NE(r.config.find("--recompute-granularity selective --recompute-modules core_attn mlp"), std::string::npos)
              << r.config;
        }
      }
      if (c.layout_matters) {
        const Stock old = BestStock(p, OldSplits(p), spec == TargetKind::kMegatron ? kMegatronTe : kMegatronLocal);
        EXPECT_LT(best.time, old.time) << "best: " << best.config << "\nolder flags' best: " << old.config;
      }
      std::printf("%s/%s: best stock %s: %ld\n", c.name.c_str(), std::string(TargetOf(spec).name).c_str(),
                  best.config.c_str(), static_cast<long>(best.time));
    }
    // Compare's "megatron" row (the Transformer Engine spec) is the same configuration's time.
    CompareOptions compare;
    compare.time_limit_s = 10;
    compare.target = TargetKind::kMegatron;
    compare.baselines = {BaselineKind::kMegatron};
    const std::vector<CompareRow> rows = Compare(p, compare).value();
    const CompareRow* row = MegatronRow(rows);
    ASSERT_NE(row, nullptr);
    EXPECT_LE(row->sim.iteration_ns, BestStock(p, layouts, kMegatronTe).time) << row->note;
  }
}

// ---------------------------------------------------------------------------------------------
// 4: on cost-model problems, every target's plan exports in its framework's format and reads back
// to the same stages and the same simulated iteration (and, where the format states options per
// layer or globally, the same options).

Problem Llama8b(int vpp) {
  TrainingSetup s;
  s.tp = 2;
  s.pp = 4;
  s.dp = 2;
  s.vpp = vpp;
  s.micro_batch_size = 1;
  s.global_batch_size = 64;
  s.seq = 4096;
  s.flash_attention = true;
  s.distributed_optimizer = true;  // a setup every target runs (DeepSpeed keeps fp32 gradients only with ZeRO)
  for (const Target& t : Targets()) {
    for (const std::string& o : TargetRecomputeOptions(t.kind)) {
      if (std::find(s.recompute.begin(), s.recompute.end(), o) == s.recompute.end()) s.recompute.push_back(o);
    }
  }
  return BuildProblem(ModelPreset("llama3-8b").value(), DevicePreset("a100-80gb").value(), s).value();
}

TEST(Target, ExportsReadBackToThePlanForEveryTarget) {
  BMPIPE_SLOW_TEST();
  int checked = 0;
  for (const int vpp : {1, 2}) {
    const Problem p = Llama8b(vpp);
    SCOPED_TRACE(fmt::format("vpp {}", vpp));
    for (const Target& target : Targets()) {
      const std::optional<FrameworkId> format = ReadBackFormat(target.kind);
      if (!format) continue;
      SCOPED_TRACE(std::string(target.name));
      PlannerOptions options;
      options.time_limit_s = 0.5;
      const Result<TargetPlan> planned = PlanForTarget(p, target.kind, options);
      if (!target.Interleaves() && vpp > 1) {
        EXPECT_FALSE(planned.ok());
        continue;
      }
      ASSERT_TRUE(planned.ok()) << planned.error().message;
      const PlannerResult& r = planned.value().planner;
      ASSERT_TRUE(r.status == ModelStatus::kOptimal || r.status == ModelStatus::kFeasible);
      ASSERT_TRUE(TargetRunsPlan(p, r.plan, target.kind));
      const Result<std::string> text = ExportPlan(p, r.plan, *format, target.kind);
      ASSERT_TRUE(text.ok()) << text.error().message;
      const Result<PlanFormat> detected = DetectPlanFormat(text.value());
      ASSERT_TRUE(detected.ok()) << detected.error().message;
      const Result<Plan> back = ReadLauncherPlan(text.value(), detected.value(), p, "export");
      ASSERT_TRUE(back.ok()) << back.error().message << "\n" << text.value();
      EXPECT_EQ(back.value().stage_begin, r.plan.stage_begin);
      EXPECT_EQ(SimulatePlan(p, back.value()).value().iteration_ns, r.iteration_ns) << text.value();
      if (target.kind != TargetKind::kMindFormers) {
        EXPECT_EQ(back.value().option, r.plan.option) << text.value();
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5 + 4);  // DeepSpeed has no interleaved schedule
}

// Until then, on that problem, the MindFormers target never returns a plan MindFormers would run
// differently: it returns what MindFormers runs from the plan's counts, not claimed optimal, or
// no plan (here the order MindFormers imposes does not fit).
TEST(Target, MindFormersNeverClaimsAPlanItRunsDifferently) {
  const std::vector<std::string> mf = {"none", "mlp_act", "norm", "mlp_act+norm", "full"};
  for (const Bytes memory : {Bytes{12040}, Bytes{20000}}) {
    SCOPED_TRACE(memory);
    const Problem p = WithMemory(
        Small(ScheduleKind::kOneFOneB, 1, 1, 2, {Decoder("decoder", 100, 1, mf), Decoder("wide", 100, 3, mf)}, 100),
        memory);
    const PlannerResult r = PlanForTarget(p, TargetKind::kMindFormers, Exact()).value().planner;
    if (r.status == ModelStatus::kNoSolution) {
      // Only at the tight capacity: at 20,000 bytes the order MindFormers imposes fits too.
      EXPECT_EQ(memory, Bytes{12040});
      EXPECT_NE(r.stopped_by.find("layer order"), std::string::npos) << r.stopped_by;
      continue;
    }
    ASSERT_TRUE(r.status == ModelStatus::kOptimal || r.status == ModelStatus::kFeasible);
    EXPECT_TRUE(MindFormersRule(p, r.plan, true)) << Describe(p, r.plan);
    EXPECT_TRUE(TargetRunsPlan(p, r.plan, TargetKind::kMindFormers));
    const std::string text = ExportPlan(p, r.plan, FrameworkId::kMindFormers, TargetKind::kMindFormers).value();
    const Plan back = ReadLauncherPlan(text, DetectPlanFormat(text).value(), p, "export").value();
    EXPECT_EQ(back.option, r.plan.option) << text;
    EXPECT_TRUE(SimulatePlan(p, back).value().fits);
  }
}

// ---------------------------------------------------------------------------------------------
// Found by the brute force above (disabled until fixed): with decoder layers that differ, a
// MindFormers stage's options are fixed by its counts, in layer order (full, then both, then one
// kind, then none). PlanForTarget only counts options per family (TargetRunsPlan agrees), and its
// canonical order sorts only runs of identical layers, so here it plans [decoder: none, wide:
// mlp_act+norm] (1946 ns). Its export (select_recompute [1], select_comm_recompute [1]) makes
// MindFormers run [decoder: mlp_act+norm, wide: none], which does not fit the 12,040 bytes. The
// best plan MindFormers runs as planned takes 1972 ns.
TEST(Target, DISABLED_MindFormersRunsMixedStagesInItsOrder) {
  const std::vector<std::string> mf = {"none", "mlp_act", "norm", "mlp_act+norm", "full"};
  const Problem p = WithMemory(
      Small(ScheduleKind::kOneFOneB, 1, 1, 2, {Decoder("decoder", 100, 1, mf), Decoder("wide", 100, 3, mf)}, 100), 12040);
  const PlannerResult r = PlanForTarget(p, TargetKind::kMindFormers, Exact()).value().planner;
  ASSERT_EQ(r.status, ModelStatus::kOptimal);
  EXPECT_TRUE(MindFormersRule(p, r.plan, true)) << Describe(p, r.plan);
  EXPECT_EQ(r.iteration_ns, 1972) << Describe(p, r.plan);
  const std::string text = ExportPlan(p, r.plan, FrameworkId::kMindFormers, TargetKind::kMindFormers).value();
  const Plan back = ReadLauncherPlan(text, DetectPlanFormat(text).value(), p, "export").value();
  const SimResult sim = SimulatePlan(p, back).value();
  EXPECT_EQ(back.option, r.plan.option) << "read back: " << Describe(p, back) << "\n" << text;
  EXPECT_TRUE(sim.fits) << "read back: " << Describe(p, back);
  EXPECT_EQ(sim.iteration_ns, r.iteration_ns);
}

}  // namespace
}  // namespace bmpipe

#include "bmpipe/search/search_reader.h"

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/cost/setup_reader.h"

namespace bmpipe {
namespace {

std::vector<int> ReadSizes(const JsonCursor& c, const char* key, std::int64_t lo, std::int64_t hi, const char* what) {
  std::vector<int> out;
  if (auto list = c.Optional(key)) {
    for (const JsonCursor& e : list->Elements()) out.push_back(static_cast<int>(e.Integer(lo, hi, what)));
  }
  return out;
}

}  // namespace

Result<SearchOptions> ReadSearchOptions(const Json& doc, const std::string& source) {
  return ReadDocument<SearchOptions>(source, [&] {
    const JsonCursor c(doc, "");
    std::vector<std::string> keys = {"devices", "gbs", "seq", "top", "time_budget", "threads", "plan_count",
                                     "node_limit", "exhaustive", "target", "mfu_attention", "tp", "pp", "vpp", "mbs",
                                     "cp", "ep", "etp", "zero", "precision", "schedules"};
    keys.insert(keys.end(), SetupSwitchKeys().begin(), SetupSwitchKeys().end());
    keys.insert(keys.end(), SetupMemoryKeys().begin(), SetupMemoryKeys().end());
    c.ExpectKeys(keys);
    SearchOptions o;
    o.devices = static_cast<int>(c.Required("devices", "the number of devices to train on").Integer(1, kMaxDataParallel, "at least 1"));
    o.base.global_batch_size = static_cast<int>(c.Required("gbs", "the global batch size").Integer(1, kMaxBatch, "sequences per iteration"));
    o.base.seq = static_cast<int>(c.Required("seq", "the sequence length").Integer(1, kMaxSequence, "tokens"));
    if (auto v = c.Optional("top")) o.top = static_cast<int>(v->Integer(1, 1000, "configurations to rank"));
    if (auto v = c.Optional("time_budget")) {
      o.time_budget_s = v->Number();
      if (!(o.time_budget_s >= 0)) v->Fail("give seconds, 0 for none");
    }
    if (auto v = c.Optional("threads")) o.threads = static_cast<int>(v->Integer(0, 4096, "planner threads, 0 for all"));
    if (auto v = c.Optional("plan_count")) o.plan_count = static_cast<int>(v->Integer(-1, 1 << 20, "-1 for every one"));
    if (auto v = c.Optional("node_limit")) o.node_limit = static_cast<long>(v->Integer(-1, 1L << 40, "-1 for none"));
    if (auto v = c.Optional("exhaustive")) o.exhaustive = v->Bool();
    if (auto v = c.Optional("target")) {
      Result<TargetKind> kind = ParseTarget(v->String());
      if (!kind.ok()) v->Fail(kind.error().message);
      o.target = kind.value();
    }
    if (auto v = c.Optional("mfu_attention")) {
      const std::string a = v->String();
      if (a != "causal" && a != "full") v->Fail("use causal or full");
      o.mfu_attention = a == "full" ? AttentionFlops::kFull : AttentionFlops::kCausal;
    }
    o.tp = ReadSizes(c, "tp", 1, kMaxTensorParallel, "a tensor-parallel size");
    o.pp = ReadSizes(c, "pp", 1, kMaxRanks, "a pipeline size");
    o.vpp = ReadSizes(c, "vpp", 1, kMaxStages, "chunks per rank");
    o.mbs = ReadSizes(c, "mbs", 1, kMaxBatch, "a micro-batch size");
    o.cp = ReadSizes(c, "cp", 1, kMaxTensorParallel, "a context-parallel size");
    o.ep = ReadSizes(c, "ep", 1, kMaxDataParallel, "an expert-parallel size");
    o.etp = ReadSizes(c, "etp", 1, kMaxTensorParallel, "an expert tensor-parallel size");
    o.zero = ReadSizes(c, "zero", 0, 3, "a ZeRO stage 0..3");
    if (auto list = c.Optional("precision")) {
      for (const JsonCursor& e : list->Elements()) {
        const std::optional<Precision> p = ParsePrecision(e.String());
        if (!p) e.Fail("use bf16 or fp8");
        o.precision.push_back(*p);
      }
    }
    if (auto list = c.Optional("schedules")) {
      for (const JsonCursor& e : list->Elements()) {
        const std::optional<ScheduleKind> kind = ScheduleFromName(e.String());
        if (!kind || *kind == ScheduleKind::kGPipe || *kind == ScheduleKind::kInterleavedOneFOneB) {
          e.Fail(fmt::format("use one of {} but gpipe (1f1b is interleaved where vpp > 1)", ScheduleNames()));
        }
        o.schedules.push_back(*kind);
      }
    }
    ReadSetupSwitches(c, o.base);
    ReadSetupMemory(c, {}, o.base);
    if (!c.Has("recompute")) AddTargetRecomputeOptions({o.target}, o.base.recompute);
    return o;
  });
}

}  // namespace bmpipe

#include "bmpipe/report/chrome_trace.h"
#include "bmpipe/core/document.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bmpipe/schedule/schedule.h"

namespace bmpipe {
namespace {

// Microseconds with nanosecond digits: exact for integer nanoseconds.
std::string Micros(TimeNs ns) { return fmt::format("{}.{:03d}", ns / 1000, static_cast<int>(ns % 1000)); }

std::string Quoted(const std::string& s) { return DumpJson(Json(s)); }

const char* KindLetter(OpKind kind) { return kind == OpKind::kForward ? "F" : kind == OpKind::kBackward ? "B" : "W"; }

const char* KindCategory(OpKind kind, bool split_backward) {
  switch (kind) {
    case OpKind::kForward:
      return "forward";
    case OpKind::kBackward:
      return split_backward ? "backward (input gradient)" : "backward";
    case OpKind::kWeightGrad:
      return "backward (weight gradient)";
  }
  return "op";
}

}  // namespace

Status CheckTraceSize(const Problem& problem) {
  const Pipeline& p = problem.pipeline;
  const std::int64_t ops = static_cast<std::int64_t>(p.ranks) * p.chunks * p.micro_batches * (p.SplitBackward() ? 3 : 2);
  if (ops <= kMaxTraceOps) return {};
  return TooLarge(fmt::format("the trace would hold {} ops (at most {}): trace a pipeline with fewer micro-batches or "
                              "stages",
                              ops, kMaxTraceOps));
}

std::string ChromeTraceJson(const Problem& problem, const Plan& plan, const SimResult& sim, const std::string& title) {
  const Pipeline& p = problem.pipeline;
  const Schedule schedule(p);
  const std::vector<StageCost> costs = ComputeStageCosts(problem, plan);
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto event = [&](const std::string& e) {
    out += first ? "" : ",\n";
    out += e;
    first = false;
  };
  for (RankIdx r = 0; r < p.ranks; ++r) {
    const int pid = r + 1;
    event(fmt::format(R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":"rank {}"}}}})", pid, r));
    event(fmt::format(R"({{"ph":"M","pid":{},"name":"process_sort_index","args":{{"sort_index":{}}}}})", pid, r));
    event(fmt::format(R"({{"ph":"M","pid":{},"tid":1,"name":"thread_name","args":{{"name":"compute"}}}})", pid));
    const std::vector<Op>& ops = schedule.ops_of(r);
    for (std::size_t k = 0; k < ops.size(); ++k) {
      const Op& op = ops[k];
      const OpTiming& t = sim.op_timing[r][k];
      const int chunk = p.ChunkOf(op.stage);
      event(fmt::format(R"({{"ph":"X","pid":{},"tid":1,"name":"{} stage {} mb {}","cat":"{}","ts":{},"dur":{},)"
                        R"("args":{{"stage":{},"chunk":{},"micro_batch":{}}}}})",
                        pid, KindLetter(op.kind), op.stage, op.micro_batch, KindCategory(op.kind, p.SplitBackward()),
                        Micros(t.start_ns), Micros(t.end_ns - t.start_ns), op.stage, chunk, op.micro_batch));
      const TimeNs recompute = op.kind == OpKind::kBackward ? costs[op.stage].recompute_ns : 0;
      if (recompute > 0) {
        event(fmt::format(R"({{"ph":"X","pid":{},"tid":1,"name":"recompute stage {} mb {}","cat":"recompute","ts":{},)"
                          R"("dur":{},"args":{{"stage":{},"micro_batch":{}}}}})",
                          pid, op.stage, op.micro_batch, Micros(t.start_ns), Micros(recompute), op.stage,
                          op.micro_batch));
      }
    }
    const RankResult& rank = sim.ranks[r];
    // Overlapped pairs: each one's all-to-all beside the other op's compute, on a thread of its own.
    if (!rank.pair_comm.empty()) {
      event(fmt::format(R"({{"ph":"M","pid":{},"tid":2,"name":"thread_name","args":{{"name":"all-to-all of overlapped pairs"}}}})",
                        pid));
    }
    for (const CommSpan& c : rank.pair_comm) {
      event(fmt::format(R"({{"ph":"X","pid":{},"tid":2,"name":"all-to-all {} stage {} mb {}","cat":"pair comm","ts":{},)"
                        R"("dur":{},"args":{{"stage":{},"micro_batch":{},"hidden_us":{}}}}})",
                        pid, KindLetter(c.op.kind), c.op.stage, c.op.micro_batch, Micros(c.start_ns),
                        Micros(c.end_ns - c.start_ns), c.op.stage, c.op.micro_batch, Micros(c.hidden_ns)));
    }
    if (rank.update_ns > 0) {
      event(fmt::format(R"({{"ph":"X","pid":{},"tid":1,"name":"update","cat":"update","ts":{},"dur":{}}})", pid,
                        Micros(rank.compute_end_ns), Micros(rank.update_ns)));
    }
    if (r < static_cast<RankIdx>(sim.memory.size())) {
      for (const MemoryPoint& point : sim.memory[r]) {
        event(fmt::format(R"({{"ph":"C","pid":{},"name":"memory","ts":{},"args":{{"GB":{:.9f}}}}})", pid,
                          Micros(point.time_ns), ToGigabytes(point.bytes)));
      }
    }
  }
  out += fmt::format(
      "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{{\"title\":{},\"schedule\":\"{}\",\"ranks\":{},\"chunks\":{},"
      "\"micro_batches\":{},\"iteration_s\":{:.9f},\"capacity_GB\":{:.9f}}}\n}}\n",
      Quoted(title), ScheduleName(p.schedule), p.ranks, p.chunks, p.micro_batches,
      ToSeconds(sim.iteration_ns), ToGigabytes(sim.capacity_bytes));
  return out;
}

Result<std::string> PlanChromeTrace(const Problem& problem, const Plan& plan, const std::string& title) {
  if (Status size = CheckTraceSize(problem); !size.ok()) return size.error();
  SimOptions options;
  options.record_memory = true;
  Result<SimResult> sim = SimulatePlan(problem, plan, options);
  if (!sim.ok()) return sim.error();
  return ChromeTraceJson(problem, plan, sim.value(), title);
}

}  // namespace bmpipe

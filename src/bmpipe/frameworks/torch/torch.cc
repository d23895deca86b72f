#include "bmpipe/frameworks/torch/torch.h"

#include <cctype>
#include <vector>

#include <fmt/format.h>

#include "bmpipe/frameworks/settings.h"
#include "bmpipe/schedule/schedule.h"

namespace bmpipe {
namespace {

bool IsScheduleCsvRow(const std::string& line) {
  // Cells <stage><action><micro-batch>, e.g. 0F3, 2B1, 1SEND_F0, or empty (idle).
  std::size_t i = 0;
  bool any = false;
  while (i <= line.size()) {
    std::size_t end = line.find(',', i);
    if (end == std::string::npos) end = line.size();
    const std::string cell = line.substr(i, end - i);
    if (!cell.empty()) {
      std::size_t k = 0;
      while (k < cell.size() && std::isdigit(static_cast<unsigned char>(cell[k]))) ++k;
      const std::size_t letters = k;
      while (k < cell.size() && (std::isupper(static_cast<unsigned char>(cell[k])) || cell[k] == '_')) ++k;
      while (k < cell.size() && std::isdigit(static_cast<unsigned char>(cell[k]))) ++k;
      if (letters == 0 || k == letters || k != cell.size()) return false;
      any = true;
    }
    i = end + 1;
  }
  return any;
}

}  // namespace

Status TorchSettings(const Problem& problem, const Target&, const SettingSink& offer, int) {
  TargetSetting setting;
  std::vector<std::uint16_t> family(problem.num_layers());
  for (LayerIdx l = 0; l < problem.num_layers(); ++l) {
    family[l] = OptionMask(problem.layers[l], [](Recompute) { return true; });
    if (family[l] == 0) {
      return InvalidInput(fmt::format("target torch: layer {} ('{}') has no option with a known meaning ({}); name its "
                                      "options by what they recompute, or use --target any",
                                      l, problem.layers[l].name, fmt::join(RecomputeOptionNames(), ", ")));
    }
  }
  setting.space.families.push_back(std::move(family));
  offer(setting);
  return {};
}

Result<std::string> ExportTorchCsv(const Problem& problem, const Plan&, TargetKind) {
  const Schedule schedule = Schedule(problem.pipeline);
  std::string out;
  // torch.distributed.pipelining's actions: F forward, B whole backward, I input gradient, W weight
  // gradient; an action of several ops (Op::joined) is a full backward (B joined by its W, "B") or
  // an overlapped forward and full backward ("(<F>;<B>)OVERLAP_F_B").
  const bool split = problem.pipeline.SplitBackward();
  auto action = [](const Op& op, char kind) { return fmt::format("{}{}{}", op.stage, kind, op.micro_batch); };
  for (const std::vector<Op>& ops : schedule.rank_ops()) {
    std::string row;
    for (std::size_t i = 0; i < ops.size();) {
      std::size_t end = i + 1;
      while (end < ops.size() && ops[end].joined) ++end;
      std::string text;
      if (end - i == 1) {
        const OpKind kind = ops[i].kind;
        text = action(ops[i], kind == OpKind::kForward ? 'F' : kind == OpKind::kWeightGrad ? 'W' : split ? 'I' : 'B');
      } else if (end - i == 2) {  // B and its W
        text = action(ops[i], 'B');
      } else {  // F, then B and its W
        text = fmt::format("({};{})OVERLAP_F_B", action(ops[i], 'F'), action(ops[i + 1], 'B'));
      }
      row += (row.empty() ? "" : ",") + text;
      i = end;
    }
    out += row + "\n";
  }
  return out;
}

Result<bool> DetectTorchCsv(const PlanText& text) { return !text.code.empty() && IsScheduleCsvRow(text.code.front()); }

}  // namespace bmpipe

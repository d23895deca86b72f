#include "bmpipe/problem/recompute.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"

namespace bmpipe {
namespace {

// Every accepted word and the parts it stands for; the first word of a part is its canonical name.
constexpr std::array<std::pair<std::string_view, unsigned>, 16> kWords = {{
    {"none", 0},
    {"selective", kRecomputeCoreAttention},
    {"attn", kRecomputeAttention},
    {"mlp", kRecomputeMlp},
    {"mlp_act", kRecomputeMlpActivation},
    {"norm", kRecomputeNorms},
    {"mla_up_proj", kRecomputeMlaUpProjection},
    {"offload", kOffloadActivations},
    {"full", kRecomputeLayer},
    {"core_attn", kRecomputeCoreAttention},
    {"layernorm", kRecomputeNorms},
    {"select", kRecomputeMlpActivation},
    {"select_comm", kRecomputeNorms},
    {"both", kRecomputeMlpActivation | kRecomputeNorms},
    {"moe", kRecomputeMlp},
    {"moe_act", kRecomputeMlpActivation},
}};

}  // namespace

Result<Recompute> ParseRecompute(std::string_view name) {
  Recompute r;
  std::size_t at = 0;
  while (at <= name.size()) {
    const std::size_t plus = name.find('+', at);
    const std::string_view part = name.substr(at, plus == std::string_view::npos ? std::string_view::npos : plus - at);
    bool known = false;
    for (const auto& [word, parts] : kWords) {
      if (word == part) {
        r.parts |= parts;
        known = true;
      }
    }
    if (!known) {
      return InvalidInput(fmt::format("unknown recomputation option '{}'{} in '{}'; options: {} (or several joined by "
                                      "'+', e.g. selective+norm)",
                                      part, DidYouMean(part, RecomputeOptionNames()), name, fmt::join(RecomputeOptionNames(), ", ")));
    }
    if (plus == std::string_view::npos) break;
    at = plus + 1;
  }
  // The whole layer covers every part; a block covers its kernel or activation.
  if (r.parts & kRecomputeLayer) r.parts &= kRecomputeLayer | kOffloadActivations;
  if (r.parts & kRecomputeAttention) r.parts &= ~unsigned{kRecomputeCoreAttention | kRecomputeMlaUpProjection};
  if (r.parts & kRecomputeMlp) r.parts &= ~unsigned{kRecomputeMlpActivation};
  return r;
}

std::string RecomputeName(Recompute recompute) {
  if (recompute.none()) return "none";
  if (recompute.full()) return "full";
  if (recompute.parts == (kRecomputeLayer | kOffloadActivations)) return "full+offload";
  std::string name;
  for (const auto& [word, parts] : kWords) {
    if (word == "full") break;
    if (parts != 0 && (recompute.parts & parts) == parts) name += (name.empty() ? "" : "+") + std::string(word);
  }
  return name;
}

std::vector<std::string> RecomputeOptionNames() { return {"none", "selective", "attn", "mlp", "mlp_act", "norm", "mla_up_proj", "offload", "full"};
}

}  // namespace bmpipe

#include "bmpipe/baselines/baselines.h"

#include <chrono>

namespace bmpipe {

BaselineResult RunMegatron(const Problem& problem);
BaselineResult RunPipeDream(const Problem& problem);
BaselineResult RunMerak(const Problem& problem);
BaselineResult RunAdaPipe(const Problem& problem);
BaselineResult RunMist(const Problem& problem, double time_limit_s);
BaselineResult RunMindFormersTool(const Problem& problem, double time_limit_s);

std::vector<BaselineKind> AllBaselines() {
  return {BaselineKind::kMegatron, BaselineKind::kPipeDream, BaselineKind::kMerak,
          BaselineKind::kAdaPipe,  BaselineKind::kMist,      BaselineKind::kMindFormersTool};
}

std::string BaselineName(BaselineKind kind) {
  switch (kind) {
    case BaselineKind::kMegatron:
      return "megatron";
    case BaselineKind::kPipeDream:
      return "pipedream";
    case BaselineKind::kMerak:
      return "merak";
    case BaselineKind::kAdaPipe:
      return "adapipe";
    case BaselineKind::kMist:
      return "mist";
    case BaselineKind::kMindFormersTool:
      return "mindformers-tool";
  }
  return "?";
}

BaselineResult RunBaseline(BaselineKind kind, const Problem& problem, const BaselineOptions& options) {
  const auto began = std::chrono::steady_clock::now();
  BaselineResult r;
  switch (kind) {
    case BaselineKind::kMegatron:
      r = RunMegatron(problem);
      break;
    case BaselineKind::kPipeDream:
      r = RunPipeDream(problem);
      break;
    case BaselineKind::kMerak:
      r = RunMerak(problem);
      break;
    case BaselineKind::kAdaPipe:
      r = RunAdaPipe(problem);
      break;
    case BaselineKind::kMist:
      r = RunMist(problem, options.time_limit_s);
      break;
    case BaselineKind::kMindFormersTool:
      r = RunMindFormersTool(problem, options.time_limit_s);
      break;
  }
  r.name = BaselineName(kind);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return r;
}

}  // namespace bmpipe

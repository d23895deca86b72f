#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace bmpipe::testing {

Problem UniformProblem(ScheduleKind schedule, int ranks, int chunks, int micro_batches, int num_layers,
                       TimeNs forward_ns, TimeNs backward_ns, TimeNs p2p_ns, Bytes saved_bytes) {
  Problem p;
  p.pipeline = Pipeline{schedule, ranks, chunks, micro_batches};
  p.memory_bytes = Bytes{1} << 50;
  p.p2p_ns = p2p_ns;
  for (int l = 0; l < num_layers; ++l) {
    Layer layer;
    layer.name = "layer";
    layer.p2p_ns = p2p_ns;
    layer.options.push_back(LayerOption{"none", forward_ns, backward_ns, 0, saved_bytes, 0});
    p.layers.push_back(layer);
  }
  return p;
}

Plan OneLayerPerStage(const Problem& problem) {
  Plan plan;
  for (int s = 0; s <= problem.num_layers(); ++s) plan.stage_begin.push_back(s);
  plan.option.assign(problem.num_layers(), 0);
  return plan;
}

RandomCase MakeRandomCase(std::mt19937_64& rng) {
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  RandomCase c;
  Problem& p = c.problem;
  const int kind = static_cast<int>(uniform(0, 8));
  p.pipeline.ranks = static_cast<int>(uniform(1, 6));
  if (kind == 0) {
    p.pipeline.schedule = ScheduleKind::kGPipe;
    p.pipeline.micro_batches = static_cast<int>(uniform(1, 10));
  } else if (kind == 1) {
    p.pipeline.schedule = ScheduleKind::kOneFOneB;
    p.pipeline.micro_batches = static_cast<int>(uniform(1, 12));
  } else if (kind == 2 || kind == 5) {
    p.pipeline.schedule = kind == 2 ? ScheduleKind::kInterleavedOneFOneB : ScheduleKind::kInterleavedZeroBubble;
    p.pipeline.chunks = static_cast<int>(uniform(2, 3));
    if (uniform(0, 1) == 0) {
      p.pipeline.micro_batches = p.pipeline.ranks * static_cast<int>(uniform(1, 3));
    } else {
      // Megatron's micro-batch groups: any count of at least p, a group size that runs.
      const int ranks = p.pipeline.ranks;
      p.pipeline.micro_batches = static_cast<int>(uniform(ranks, 3 * ranks + 2));
      std::vector<int> groups;
      for (int g = ranks; g <= p.pipeline.micro_batches; ++g) {
        const int rest = p.pipeline.micro_batches % g;
        if (rest == 0 || rest >= ranks) groups.push_back(g);
      }
      p.pipeline.micro_batch_group = groups[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(groups.size()) - 1))];
    }
  } else if (kind == 3 || kind == 6) {
    p.pipeline.schedule = kind == 3 ? ScheduleKind::kZeroBubbleH1 : ScheduleKind::kZeroBubbleH2;
    p.pipeline.micro_batches = static_cast<int>(uniform(1, 12));
  } else if (kind == 4) {
    p.pipeline.schedule = ScheduleKind::kZeroBubbleV;
    p.pipeline.chunks = 2;
    p.pipeline.micro_batches = static_cast<int>(uniform(1, 12));
  } else if (kind == 7) {
    p.pipeline.schedule = ScheduleKind::kDualPipeV;
    p.pipeline.chunks = 2;
    p.pipeline.micro_batches = static_cast<int>(uniform(2 * p.pipeline.ranks, 2 * p.pipeline.ranks + 10));
  } else {
    // DualPipe: an even number of ranks and of micro-batches, at least 2p.
    p.pipeline.schedule = ScheduleKind::kDualPipe;
    p.pipeline.ranks = 2 * static_cast<int>(uniform(1, 3));
    p.pipeline.chunks = 2;
    p.pipeline.micro_batches = 2 * static_cast<int>(uniform(p.pipeline.ranks, p.pipeline.ranks + 5));
  }
  const int stages = p.pipeline.stages();
  const int n = stages + static_cast<int>(uniform(0, 8));
  p.memory_bytes = Bytes{1} << 40;
  p.reserved_bytes = uniform(0, 1000);
  p.p2p_ns = uniform(0, 50);
  for (int l = 0; l < n; ++l) {
    Layer layer;
    layer.name = "L" + std::to_string(l);
    layer.static_bytes = uniform(0, 5000);
    layer.update_ns = uniform(0, 3) == 0 ? uniform(0, 500) : 0;
    layer.p2p_ns = uniform(0, 1) == 0 ? p.p2p_ns : uniform(0, 200);
    const int options = static_cast<int>(uniform(1, 3));
    for (int o = 0; o < options; ++o) {
      layer.options.push_back(LayerOption{"opt" + std::to_string(o), uniform(1, 300), uniform(1, 600), uniform(0, 200),
                                          uniform(0, 2000), uniform(0, 1500)});
    }
    // The weight-gradient part of the backward: at most every option's backward (and some layers
    // without one), with what it holds from B to W.
    TimeNs least_backward = layer.options[0].backward_ns;
    for (const LayerOption& o : layer.options) least_backward = std::min(least_backward, o.backward_ns);
    layer.weight_grad_ns = uniform(0, 3) == 0 && l > 0 ? 0 : uniform(1, least_backward);
    layer.weight_grad_bytes = uniform(0, 1500);
    p.layers.push_back(layer);
  }
  // Random cut points: choose stages-1 distinct boundaries among 1..n-1.
  std::vector<int> cuts;
  for (int l = 1; l < n; ++l) cuts.push_back(l);
  std::shuffle(cuts.begin(), cuts.end(), rng);
  cuts.resize(stages - 1);
  std::sort(cuts.begin(), cuts.end());
  c.plan.stage_begin.push_back(0);
  for (int cut : cuts) c.plan.stage_begin.push_back(cut);
  c.plan.stage_begin.push_back(n);
  for (int l = 0; l < n; ++l) {
    c.plan.option.push_back(static_cast<int>(uniform(0, static_cast<std::int64_t>(p.layers[l].options.size()) - 1)));
  }
  return c;
}

std::string SourcePath(const std::string& relative) { return std::string(BMPIPE_SOURCE_DIR) + "/" + relative; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string MakeTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base ? base : "/tmp") + "/bmpipe-test-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

CommandResult RunBmpipe(const std::string& args, const std::string& cwd) {
  const std::string dir = MakeTempDir();
  const std::string err_path = dir + "/stderr";
  const std::string command = "cd '" + (cwd.empty() ? std::string(BMPIPE_SOURCE_DIR) : cwd) + "' && '" +
                              BMPIPE_BINARY + "' " + args + " 2>'" + err_path + "'";
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed");
  char buffer[4096];
  std::size_t got;
  while ((got = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, got);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.err = ReadFile(err_path);
  std::remove(err_path.c_str());
  rmdir(dir.c_str());
  return result;
}

}  // namespace bmpipe::testing

namespace bmpipe::testing {

bool FastTier() {
  const char* fast = std::getenv("BMPIPE_FAST");
  return fast != nullptr && *fast != '\0' && std::string(fast) != "0";
}

::testing::AssertionResult MatchesGolden(const std::string& name, const std::string& actual) {
  const std::string path = SourcePath("tests/golden/" + name);
  const char* update = std::getenv("BMPIPE_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    return ::testing::AssertionSuccess() << "updated " << path;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return ::testing::AssertionFailure() << "no golden file " << path << "; run with BMPIPE_UPDATE_GOLDEN=1";
  std::ostringstream expected;
  expected << in.rdbuf();
  if (expected.str() == actual) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "output differs from " << path << " (rerun with BMPIPE_UPDATE_GOLDEN=1 to "
                                       << "accept it)\n--- actual ---\n" << actual;
}

}  // namespace bmpipe::testing

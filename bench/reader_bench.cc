// Every reader on its worst shapes at a given size: a document of one object with as many keys as
// fit, a YAML mapping and a TOML table likewise, a Hugging Face config whose id2label map fills
// it, Megatron and torchtitan argument files of unknown flags, a DeepSpeed module of assignments
// and a dict literal, a Megatron layout and a torch trace of recomputed regions with the
// backward on its own thread. Prints a Markdown table of seconds per reader (docs/limits.md); the
// readers are linear, so each takes about as long as reading its bytes.
//
//   build/bench/reader_bench [MIB]      # default 64
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bmpipe/core/document.h"
#include "bmpipe/core/toml.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/frameworks/torch/profiler_trace.h"
#include "bmpipe/model/model.h"
#include "bmpipe/problem/problem_reader.h"

namespace bmpipe {
namespace {

struct Case {
  std::string reader, shape;
  std::function<std::string(std::size_t)> make;  // the input of about that many bytes
  std::function<std::string(const std::string&)> read;  // "ok" or the error's start
};


template <typename T>
std::string Outcome(const Result<T>& r) {
  return r.ok() ? "read" : "refused: " + r.error().message.substr(0, 48);
}

std::string Keys(std::size_t bytes, const char* open, const char* item, const char* sep, const char* close) {
  std::string out = open;
  for (std::size_t i = 0; out.size() < bytes; ++i) out += (i == 0 ? "" : sep) + fmt::format(fmt::runtime(item), i);
  return out + close;
}

std::string Trace(std::size_t bytes) {
  // One layer's forward on thread 1, then its backward function on thread 2 (a GPU's autograd
  // thread) holding recomputed regions, over and over; memory events on the device.
  std::string out = R"({"traceEvents": [)";
  auto x = [&](const std::string& name, const std::string& cat, double ts, double dur, int tid, const std::string& args) {
    out += fmt::format(R"({{"ph": "X", "name": "{}", "cat": "{}", "ts": {}, "dur": {}, "tid": {}, "args": {{{}}}}},)",
                       name, cat, ts, dur, tid, args);
  };
  double t = 0;
  for (int step = 0; out.size() < bytes; ++step) {
    x("bmpipe.layer 0 param_bytes 4096 params 1024", "user_annotation", t, 100, 1, "");
    x("aten::mm", "cpu_op", t + 10, 40, 1, fmt::format(R"("Sequence number": {})", step));
    x("autograd::engine::evaluate_function: MmBackward0", "cpu_op", t + 200, 1000, 2,
      fmt::format(R"("Sequence number": {})", step));
    for (int r = 0; r < 20; ++r) x("bmpipe.region", "user_annotation", t + 210 + 40 * r, 20, 2, "");
    out += fmt::format(R"({{"ph": "i", "name": "[memory]", "ts": {}, "tid": 1, "args": {{"Total Allocated": {}, "Device Type": 1}}}},)",
                       t + 50, 1000 + step % 7);
    t += 2000;
  }
  out.pop_back();
  return out + "]}";
}

int Main(int argc, char** argv) {
  const double mib = argc > 1 ? std::atof(argv[1]) : 64;
  const std::size_t bytes = static_cast<std::size_t>(mib * (1 << 20));
  const Problem tiny = LoadProblem(std::string(BMPIPE_SOURCE_DIR) + "/examples/tiny/problem.json").value();
  const std::string hf = [] {
    std::FILE* f = std::fopen(BMPIPE_SOURCE_DIR "/tests/data/hf/llama3-8b.json", "rb");
    std::string s;
    char buf[4096];
    std::size_t n;
    while (f && (n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    if (f) std::fclose(f);
    return s;
  }();
  const std::vector<Case> cases = {
      {"JSON (problem, plan, device, run table)", "one object of unknown keys",
       [](std::size_t n) { return Keys(n, "{", "\"key{0}\": {0}", ", ", "}"); },
       [](const std::string& t) { return Outcome(ParseDocument(t, "x.json")); }},
      {"YAML (problem, plan, device, run table)", "one mapping of unknown keys",
       [](std::size_t n) { return Keys(n, "", "key{0}: {0}", "\n", "\n"); },
       [](const std::string& t) { return Outcome(ParseDocument(t, "x.yaml")); }},
      {"TOML (torchtitan job)", "one table of keys",
       [](std::size_t n) { return Keys(n, "[t]\n", "key{0} = {0}", "\n", "\n"); },
       [](const std::string& t) { return Outcome(ParseToml(t, "x.toml")); }},
      {"Hugging Face config.json", "an id2label map of the whole size",
       [&hf](std::size_t n) {
         std::string out = hf.substr(0, hf.rfind('}')) + ", \"id2label\": {";
         for (std::size_t i = 0; out.size() < n; ++i) out += fmt::format("{}\"{}\": \"LABEL_{}\"", i ? ", " : "", i, i);
         return out + "}}";
       },
       [](const std::string& t) {
         Result<Json> doc = ParseDocument(t, "config.json");
         if (!doc.ok()) return Outcome(doc);
         return Outcome(ReadHuggingFaceConfig(doc.value(), "config.json"));
       }},
      {"Megatron-LM arguments (--setup-from)", "unknown flags",
       [](std::size_t n) { return Keys(n, "--tensor-model-parallel-size 2\n", "--unknown-flag-{} v", "\n", "\n"); },
       [](const std::string& t) { return Outcome(ReadLauncherSetup(t, "x.args")); }},
      {"Megatron-LM arguments (--plan)", "a pipeline layout of the whole size",
       [](std::size_t n) { return Keys(n, "--pipeline-model-parallel-size 4\n--pipeline-model-parallel-layout \"E", "t", "|", "L\"\n"); },
       [&tiny](const std::string& t) { return Outcome(ReadLauncherPlan(t, PlanFormat{FrameworkId::kMegatron}, tiny, "x.args")); }},
      {"torchtitan arguments (--setup-from)", "unknown flags",
       [](std::size_t n) { return Keys(n, "--parallelism.tensor_parallel_degree 2\n", "--unknown.flag_{} v", "\n", "\n"); },
       [](const std::string& t) { return Outcome(ReadLauncherSetup(t, "x.args")); }},
      {"DeepSpeed module (--plan)", "assignments, then a dict literal",
       [](std::size_t n) {
         std::string out = "import deepspeed\n";
         for (std::size_t i = 0; out.size() < n / 2; ++i) out += fmt::format("x{0} = {0}\n", i);
         out += "ds_config = {";
         for (std::size_t i = 0; out.size() < n; ++i) out += fmt::format("\"k{0}\": {0}, ", i);
         return out + "}\n";
       },
       [&tiny](const std::string& t) { return Outcome(ReadLauncherPlan(t, PlanFormat{FrameworkId::kDeepSpeed}, tiny, "x.py")); }},
      {"torch profiler trace (profile)", "recomputed regions, the backward on its own thread", Trace,
       [](const std::string& t) {
         Result<Json> doc = ParseDocument(t, "trace.json");
         if (!doc.ok()) return Outcome(doc);
         return Outcome(ReadTorchTrace(doc.value(), "trace.json"));
       }},
  };
  std::printf("| reader | worst shape | MiB | seconds | outcome |\n|---|---|---:|---:|---|\n");
  for (const Case& c : cases) {
    const std::string input = c.make(bytes - 4096);  // within the document limit, with room to close
    const auto start = std::chrono::steady_clock::now();
    const std::string outcome = c.read(input);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("| %s | %s | %.1f | %.2f | %s |\n", c.reader.c_str(), c.shape.c_str(),
                static_cast<double>(input.size()) / (1 << 20), seconds, outcome.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace bmpipe

int main(int argc, char** argv) { return bmpipe::Main(argc, argv); }

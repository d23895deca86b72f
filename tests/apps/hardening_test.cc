// The command line fed what a careless user or an attacker would feed it (issue 14's reproducers):
// every case ends in a clear error with its documented exit code, promptly, and leaves no file.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "test_support.h"

namespace bmpipe {
namespace {

using testing::CommandResult;
using testing::RunBmpipe;

// A scratch directory, removed with everything in it at the end of the test.
class Scratch {
 public:
  Scratch() : dir_(testing::MakeTempDir()) {}
  ~Scratch() { EXPECT_EQ(std::system(("rm -rf '" + dir_ + "'").c_str()), 0); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(Path(name), std::ios::binary) << text;
    return Path(name);
  }
  // The names in the directory, one per line, sorted.
  std::string Listing() const {
    std::string out;
    FILE* ls = popen(("ls -A '" + dir_ + "'").c_str(), "r");
    char buffer[256];
    while (fgets(buffer, sizeof buffer, ls) != nullptr) out += buffer;
    pclose(ls);
    return out;
  }

 private:
  std::string dir_;
};

// A one-layer-kind problem in JSON.
std::string ProblemJson(int stages, int micro_batches, const std::string& schedule, int layers, double forward_s,
                        double saved_bytes) {
  return "{\"pipeline\": {\"stages\": " + std::to_string(stages) +
         ", \"micro_batches\": " + std::to_string(micro_batches) + ", \"schedule\": \"" + schedule +
         "\"}, \"device\": {\"memory_bytes\": 1e15}, \"p2p_s\": 0, \"layers\": [{\"name\": \"d\", \"repeat\": " +
         std::to_string(layers) + ", \"static_bytes\": 0, \"options\": [{\"name\": \"none\", \"forward_s\": " +
         std::to_string(forward_s) + ", \"backward_s\": " + std::to_string(forward_s) +
         ", \"saved_bytes\": " + std::to_string(saved_bytes) + "}]}]}";
}

// Runs `args`, expects `exit_code` and `message` in standard error.
void ExpectError(const std::string& args, int exit_code, const std::string& message) {
  const CommandResult r = RunBmpipe(args);
  EXPECT_EQ(r.exit_code, exit_code) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
  EXPECT_EQ(r.err.find("bug in bmpipe"), std::string::npos) << r.err;
}

TEST(Hardening, UnreadableDocumentsAreInputErrors) {
  Scratch s;
  std::mt19937_64 rng(14);
  std::string garbage(4096, '\0');
  for (char& c : garbage) c = static_cast<char>(rng() & 0xFF);
  ExpectError("plan --problem '" + s.Write("garbage", garbage) + "'", 2, "is not valid UTF-8");

  std::string tiny = testing::ReadFile(testing::SourcePath("examples/tiny/problem.json"));
  std::string huge = tiny;
  huge.replace(huge.find("\"forward_s\": 0.002"), 18, "\"forward_s\": 1e400");
  ExpectError("plan --problem '" + s.Write("huge.json", huge) + "'", 2, "number overflow parsing '1e400'");

  std::string yaml = testing::ReadFile(testing::SourcePath("examples/mindformers-demo/problem.yaml"));
  yaml.replace(yaml.find("name:"), 5, "name: \xff\xfe");
  ExpectError("simulate --json --problem '" + s.Write("bad.yaml", yaml) + "'", 2, "byte 0xFF is not valid UTF-8");

  const std::string config = s.Write("config.json", "{\"model_type\": \"llama\", \"name\": \"\xc3\x28\"}");
  ExpectError("plan --model '" + config + "' --device h100-80gb --gbs 8 --seq 1024", 2, "not valid UTF-8");

  ExpectError("plan --problem '" + s.Write("deep.json", std::string(100000, '[') + std::string(100000, ']')) + "'", 2,
              "nest more than 64 levels deep");

  std::string laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 12; ++i) {
    const std::string p = "*a" + std::to_string(i - 1);
    laughs += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + p + ", " + p + ", " + p + ", " + p + ", " +
              p + ", " + p + ", " + p + ", " + p + ", " + p + ", " + p + "]\n";
  }
  ExpectError("plan --problem '" + s.Write("laughs.yaml", laughs) + "'", 2, "YAML aliases expand the document");
}

TEST(Hardening, FilesThatAreNotRegularCannotHangOrExhaustMemory) {
  Scratch s;
  ExpectError("plan --problem /dev/zero", 2, "bmpipe reads documents of at most 64 MiB");
  ASSERT_EQ(mkfifo(s.Path("fifo").c_str(), 0600), 0);
  ExpectError("plan --problem '" + s.Path("fifo") + "'", 2, "the document is empty");
  ExpectError("plan --problem '" + s.Path("") + "'", 3, "is a directory; give a file");
}

TEST(Hardening, SumsThatWouldOverflowAreRefused) {
  Scratch s;
  ExpectError("simulate --problem '" + s.Write("long.json", ProblemJson(8, 10000, "1f1b", 8, 5e5, 0)) + "'", 2,
              "the iteration could last up to 8e+10 s");
  ExpectError("simulate --problem '" + s.Write("wide.json", ProblemJson(2, 60000, "gpipe", 2, 1e-6, 1e15)) + "'", 2,
              "a rank could hold up to 1.2e+20 bytes");
  ExpectError("simulate --problem '" + s.Write("mb.json", ProblemJson(2, 1 << 20, "gpipe", 2, 1e-6, 1e15)) + "'", 2,
              "pipeline.micro_batches = 1048576: must be between 1 and 65536");
  ExpectError("simulate --problem '" + s.Write("layers.json", ProblemJson(2, 1, "1f1b", 1000000, 5e5, 0)) + "'", 2,
              "layers[0].repeat = 1000000: must be between 1 and 100000");
  ExpectError("plan --time-limit 5 --problem '" + s.Write("ranks.json", ProblemJson(65536, 1, "1f1b", 65536, 1e-3, 0)) +
                  "'",
              2, "pipeline.stages = 65536: must be between 1 and 1024");
  ExpectError("compare --problem '" + s.Write("million.json", ProblemJson(8, 8, "1f1b", 1000000, 1e-3, 0)) + "'", 2,
              "layers[0].repeat = 1000000: must be between 1 and 100000");
  ExpectError("simulate --problem '" + s.Write("ops.json", ProblemJson(1024, 65536, "1f1b", 1024, 1e-3, 0)) + "'", 2,
              "1024 stages x 65536 micro-batches make 134217728 ops under schedule '1f1b'; bmpipe schedules at most "
              "16777216");

  const std::string slow = s.Write("slow.json", "{\"based_on\": \"h100-80gb\", \"peak_flops\": 2e4}");
  ExpectError("simulate --model llama3-8b --device '" + slow + "' --pp 2 --gbs 8 --seq 2048", 2,
              "peak_flops = 20000.0: must lie between 1e+09 and 1e+18");
  ExpectError("simulate --model llama3-8b --device h100-80gb --pp 2 --gbs 2147483640 --seq 2048", 2,
              "--gbs = 2147483640 must be between 1 and 16777216");
  ExpectError("plan --model llama3-8b --device h100-80gb --pp 2 --gbs 2147483647 --seq 2048", 2,
              "--gbs = 2147483647 must be between 1 and 16777216");
  ExpectError("simulate --model llama3-8b --device h100-80gb --pp 2 --gbs 64 --seq 2048 --reserved-gb 1e300", 2,
              "--reserved-gb 1e+300 is more than any device holds");
  ExpectError("search --model llama3-8b --device h100-80gb --devices 8 --gbs 64 --seq 2147483647 -q", 2,
              "--seq = 2147483647 must be between 1 and 16777216");
  ExpectError("search --model llama3-8b --device h100-80gb --devices 8 --gbs 64 --seq 16777216 -q", 2,
              "configurations the setup rules accept can be planned; the first: the cost model gives the decoder's "
              "option 'none' saved activations of 1.8e+16 bytes");

  std::string table = testing::ReadFile(testing::SourcePath("data/published-runs.yaml"));
  table.replace(table.find("tp: 8"), 5, "tp: 1073741824");
  ExpectError("validate --table '" + s.Write("runs.yaml", table) + "'", 2, ".tp = 1073741824: must be between 1 and 1024");

  std::string init = testing::ReadFile(testing::SourcePath("examples/mindformers-demo/init_demo.yaml"));
  init.replace(init.find("body: 90"), 8, "body: 1e12");
  ExpectError("plan --sapp '" + s.Write("init.yaml", init) + "' -s 16 -mb 16 -mem 56000", 2,
              "a time of 1e+12 ms: times must lie between 0 and 1e+09 ms");

  std::string lists = testing::ReadFile(testing::SourcePath("examples/mindformers-demo/tool-plan-mindformers.yaml"));
  lists.replace(lists.find("offset: [-1, 0,"), 15, "offset: [-1, 2000000000,");
  ExpectError("simulate --problem examples/mindformers-demo/problem.yaml --plan '" + s.Write("plan.yaml", lists) + "'",
              2, "offset[1] = 2000000000: must be between -96 and 96");
}

TEST(Hardening, TimeLimitHoldsOnAModelOfAHundredThousandLayers) {
  BMPIPE_SLOW_TEST();
  Scratch s;
  const std::string config = s.Write(
      "config.json",
      "{\"model_type\": \"llama\", \"num_hidden_layers\": 99998, \"hidden_size\": 256, \"intermediate_size\": 512, "
      "\"num_attention_heads\": 8, \"num_key_value_heads\": 8, \"vocab_size\": 1024, "
      "\"max_position_embeddings\": 8192}");
  // At 4096 tokens no plan fits: even with full recomputation every layer keeps its 2 MB input
  // per micro-batch in flight beside its 1.9 MB of static memory, and the 8 ranks' 80 GB hold
  // about 72,000 such layers, not 100,000. No quick plan (one option on every layer) fits, and
  // proving that no plan does takes longer than the limit (about 12 s here, ending with the
  // candidates' memory budget, exit 6): the run stops at its limit without a plan (exit 5), and
  // writes nothing.
  auto began = std::chrono::steady_clock::now();
  CommandResult r = RunBmpipe("plan --model '" + config + "' --device h100-80gb --tp 8 --pp 8 --gbs 64 --seq 4096 " +
                              "--time-limit 2 --out '" + s.Path("plan.json") + "'");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.err.find("no plan found: the search was stopped by time limit 2 s"), std::string::npos) << r.err;
  EXPECT_LT(seconds, 2 + 6.0 * testing::kSlowdown);
  EXPECT_EQ(s.Listing(), "config.json\n");
  // At 128 tokens the plan without recomputation fits: the quick plan's first try, which always
  // runs however short the limit, is a plan, so the run returns one within a few seconds of the
  // limit.
  began = std::chrono::steady_clock::now();
  r = RunBmpipe("plan --model '" + config + "' --device h100-80gb --tp 8 --pp 8 --gbs 64 --seq 128 " +
                "--time-limit 2 --out '" + s.Path("plan.json") + "'");
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(seconds, 2 + 6.0 * testing::kSlowdown);
  EXPECT_EQ(s.Listing(), "config.json\nplan.json\n");
  ExpectError("plan --model '" + s.Write("more.json", testing::ReadFile(config).replace(45, 5, "99999")) +
                  "' --device h100-80gb --tp 8 --pp 8 --gbs 64 --seq 4096",
              2, "the model has 99999 decoder layers; with the embedding and the head bmpipe plans at most 100000");
}

// The largest schedules the limits allow (16.7M ops: DualPipeV over 64 ranks and 43,690
// micro-batches): one simulation takes about a second, and the planner leaves the time of the
// report's own simulation before the limit, so that the run, a plan or none, ends within 2 s of it
// (it took 6.9 s).
TEST(Hardening, TimeLimitHoldsOnTheLargestSchedules) {
  BMPIPE_SLOW_TEST();
  Scratch s;
  for (const char* schedule : {"dualpipev", "zb-v"}) {
    const auto began = std::chrono::steady_clock::now();
    const CommandResult r = RunBmpipe(
        std::string("plan --model llama3-405b --device h100-80gb --tp 8 --pp 64 --vpp 2 --schedule ") + schedule +
        " --gbs 43690 --seq 4096 --flash-attn --distributed-optimizer --time-limit 2 --progress none --out '" +
        s.Path("plan.json") + "'");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 5) << schedule << ": " << r.err;
    if (r.exit_code == 0) {
      EXPECT_NE(r.out.find("stopped by time limit 2 s"), std::string::npos) << r.out.substr(0, 2000);
    }
    EXPECT_LT(seconds, 2 + 2.0 * testing::kSlowdown) << schedule;
    std::remove(s.Path("plan.json").c_str());
  }
}

TEST(Hardening, FailedRunsLeaveNoFile) {
  Scratch s;
  ExpectError("plan --problem examples/tiny/problem.json --svg '" + s.Path("t.svg") + "' --export bogus", 2,
              "bogus");
  ExpectError("simulate --problem '" + s.Write("big.json", ProblemJson(64, 2048, "1f1b", 64, 1e-3, 0)) + "' --svg '" +
                  s.Path("t.svg") + "'",
              2, "--svg: the timeline would draw 262144 ops, more than the 200000 it can show readably");
  std::remove(s.Path("big.json").c_str());
  ExpectError("plan --model llama3-70b --device l4 --pp 2 --gbs 8 --seq 8192 --dump-problem '" + s.Path("dump.json") +
                  "'",
              4, "");
  ExpectError("simulate --model llama3-8b --device h100-80gb --pp 4 --vpp 3 --gbs 6 --seq 2048 --dump-problem '" +
                  s.Path("y.json") + "'",
              2, "--vpp");
  // The integer program is written only when the run succeeds.
  std::string tiny = testing::ReadFile(testing::SourcePath("examples/tiny/problem.json"));
  tiny.replace(tiny.find("16e9"), 4, "7e9");
  ExpectError("plan --solver cbc --problem '" + s.Write("small.json", tiny) + "' --lp-file '" + s.Path("model.lp") +
                  "' --out '" + s.Path("plan.json") + "'",
              4, "");
  EXPECT_EQ(s.Listing(), "small.json\n");
  ExpectError("plan --problem examples/tiny/problem.json --lp-file '" + s.Path("model.lp") + "'", 2,
              "--lp-file writes the integer program CBC solves; add --solver cbc");

  const CommandResult ok = RunBmpipe("plan --solver cbc --problem examples/tiny/problem.json --lp-file '" +
                                     s.Path("model.lp") + "' --out '" + s.Path("plan.json") + "'");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(testing::ReadFile(s.Path("model.lp")).find("Minimize"), std::string::npos);
  EXPECT_EQ(s.Listing(), "model.lp\nplan.json\nsmall.json\n");  // no temporary file left
  ExpectError("plan --problem examples/tiny/problem.json --out '" + s.Path("x.json") + "' --export csv --export-out '" +
                  s.Path("x.json") + "'",
              2, "x.json is given for two outputs; give each output its own file");
}

TEST(Hardening, OutputsGoWhereTheUserPointedThem) {
  Scratch s;
  const std::string expected = RunBmpipe("simulate --json --problem examples/tiny/problem.json").out;
  // A link to a regular file: the file behind it is replaced, the link stays.
  s.Write("real.json", "old");
  ASSERT_EQ(symlink(s.Path("real.json").c_str(), s.Path("link.json").c_str()), 0);
  CommandResult r = RunBmpipe("simulate --problem examples/tiny/problem.json --out '" + s.Path("link.json") + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  struct stat st;
  ASSERT_EQ(lstat(s.Path("link.json").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(testing::ReadFile(s.Path("real.json")), expected);

  // A named pipe stays a pipe: a reader gets the plan through it.
  ASSERT_EQ(mkfifo(s.Path("fifo").c_str(), 0600), 0);
  std::string piped;
  std::thread reader([&] { piped = testing::ReadFile(s.Path("fifo")); });
  // The reader's open may come after bmpipe's: retry until it is there (bmpipe refuses a pipe
  // without a reader rather than wait).
  for (int attempt = 0; attempt < 100; ++attempt) {
    r = RunBmpipe("simulate --problem examples/tiny/problem.json --out '" + s.Path("fifo") + "'");
    if (r.exit_code == 0) break;
    usleep(50000);
  }
  reader.join();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(piped, expected);
  ASSERT_EQ(lstat(s.Path("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  // Without a reader: an error at once, not a wait.
  ExpectError("simulate --problem examples/tiny/problem.json --out '" + s.Path("fifo") + "'", 3,
              "a named pipe that no program is reading");

  // "-" is standard output.
  r = RunBmpipe("export --problem examples/tiny/problem.json --plan examples/tiny/plan.json --to csv --out -");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, RunBmpipe("export --problem examples/tiny/problem.json --plan examples/tiny/plan.json --to csv").out);
}

}  // namespace
}  // namespace bmpipe

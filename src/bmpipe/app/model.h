// Where a command's problem comes from: a problem file, the built-in example, or the analytic cost
// model (--model, --device and a training setup). The setup's options are one table, which plan,
// simulate, compare and search share with the Python package's Problem.from_model.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "bmpipe/app/command.h"
#include "bmpipe/core/options.h"
#include "bmpipe/cost/training_setup.h"
#include "bmpipe/frameworks/framework.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe::app {

// The setup's switches given as words or in GB (what the command line and Python give as words).
struct SetupWords {
  std::string precision = "bf16";
  std::string grad_dtype = "fp32";
  std::string optimizer_dtype = "fp32";
  std::string moe_dispatcher = "alltoall";
  std::string moe_routing = "natural";
  std::vector<std::string> offload;
  double headroom_gb = -1;  // < 0: not given: 0, or the default of plan and search (DefaultHeadroomBytes)
};

// The words into the setup: --precision, --grad-dtype, --optimizer-dtype, --moe-dispatcher,
// --moe-routing, --offload, --memory-headroom-gb.
Status ApplySetupWords(const SetupWords& words, TrainingSetup& setup);
// --reserved-gb in bytes; `gb` < 0 (not given) leaves the default.
Status SetReservedBytes(double gb, TrainingSetup& setup);

// The memory plan and search keep free on every rank when --memory-headroom-gb is not given: the
// share of the usable memory (the device's less the reserve) that the cost model's held-out memory
// error `error` (MemoryUncertainty) may add to a peak, usable x error / (1 + error), rounded up
// to 0.1 GB. A plan that uses the rest then fits even when its peak is that error higher.
Bytes DefaultHeadroomBytes(const DeviceSpec& device, const TrainingSetup& setup, double error);
// The report's "headroom" line for the default headroom `bytes` from `error`.
std::string DefaultHeadroomLine(Bytes bytes, double error);

// The help texts of the parallel sizes that `search` takes as lists and the others as one value.
extern const char* const kCpHelp;
extern const char* const kEpHelp;
extern const char* const kEtpHelp;
extern const char* const kZeroHelp;
// What --precision takes, and what each means.
std::vector<std::string> PrecisionNames();
std::string PrecisionHelp();

// MoE routing, state dtypes, overlap, offloading and headroom (every command with a cost model),
// in `group`, each needing `needs` on the command line when not empty.
void AddSetupOptions(OptionTable& table, TrainingSetup& setup, SetupWords& words, const std::string& group,
                     const std::string& needs);

// --model, --device and the training setup of one configuration.
struct ModelRequest {
  std::string model;
  std::string device;
  TrainingSetup setup;
  SetupWords words;
  bool recompute_given = false;  // --recompute was given
  std::string schedule = "1f1b";
  double reserved_gb = -1;       // < 0: the default
  std::string dump_problem;      // the command line's --dump-problem
  std::string setup_from;        // --setup-from: a launcher's file stating the setup
  std::string defaults;          // --defaults: a framework version's profile (profiles.h)
  std::set<std::string> given;   // the keywords of the options given (command line or Python)
  std::set<std::string> from_file;  // ResolveSetup: the keywords the file set
  std::string setup_source;         // ResolveSetup: the file they came from
  std::set<std::string> from_profile;  // ResolveSetup: the keywords the profile set
  std::string profile_source;          // ResolveSetup: its name
  std::vector<std::pair<std::string, std::int64_t>> file_model_shape;  // ResolveSetup: checked against --model
  std::string setup_plan;  // ResolveSetup: the configuration holding the file's plan (for simulate)
  FrameworkId setup_plan_format = FrameworkId::kMegatron;  // and its format
  int recompute_layers = 0;      // simulate's --recompute-num-layers (Megatron's block method)
  // The file's recomputation is the one setting simulated (simulate), rather than an option the
  // planner may choose beside the others (plan, compare).
  bool file_recompute_only = false;
  // Without --memory-headroom-gb, keep DefaultHeadroomBytes free (plan, which chooses a plan);
  // else 0 (simulate and compare judge plans, the report warning of a rank within the error).
  bool default_headroom = false;
};

// The cost model's options (group "Cost model (instead of --problem)"), each excluded by or needing
// --model on the command line; `problem_flag` (--problem) excludes --model.
void AddModelOptions(OptionTable& table, ModelRequest& m, const std::string& problem_flag);

// The request with --setup-from's file and --defaults' profile applied: bmpipe's defaults, then
// the profile, then what the file states, then what was given (each override of the file in
// `lines`, with the file's notes and the profile's name). The request itself without either.
Result<ModelRequest> ResolveSetup(const ModelRequest& request, std::vector<std::pair<std::string, std::string>>& lines);
// The report's lines listing every setting of the resolved request with where it came from: given
// (the command line or Python), the --setup-from file, or bmpipe's default.
// `origins`, when given, gets each setting with its origin ("given", "file", "profile", "default").
std::vector<std::pair<std::string, std::string>> SettingLines(const ModelRequest& resolved,
                                                               std::vector<TrainingInfo::Setting>* origins = nullptr);

// The problem of --model, --device and the setup (ResolveSetup first); `lines` gets what the report says about where the
// costs came from, `files` the --dump-problem file. Without --recompute the setup also offers the
// options the settings of `targets` use.
Result<Problem> BuildModelProblem(const ModelRequest& request, std::vector<std::pair<std::string, std::string>>& lines,
                                  std::vector<std::pair<std::string, std::string>>& files,
                                  const std::vector<TargetKind>& targets);

// A problem file, its notes (old key names) told to the context at once.
Result<Problem> LoadProblemFile(const std::string& path, const Context& context);
// The problem file at `path`, or the built-in example when empty; `shown` says which.
Result<Problem> LoadProblemOrExample(const std::string& path, const Context& context, std::string& shown);
// The built-in example (the MindFormers tool's demo).
Result<Problem> BuiltinExample();

}  // namespace bmpipe::app

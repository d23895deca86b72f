// bmpipe._core: bindings of the application layer (src/bmpipe/app) for the Python package
// (python/bmpipe). A command runs as on the command line: its keywords are read through the same
// option table, its documents cross as the command line's JSON text, its errors become the package's
// exceptions with the same messages. Long work releases the GIL, reports progress to a Python
// callable, and on Ctrl-C (from the main thread) stops and returns its best, as the command does.
#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bmpipe/app/builtin_example.h"
#include "bmpipe/app/command.h"
#include "bmpipe/app/model.h"
#include "bmpipe/app/views.h"
#include "bmpipe/frameworks/framework.h"
#include "bmpipe/io/problem_json.h"
#include "bmpipe/problem/problem_reader.h"
#include "bmpipe/report/progress_printer.h"

namespace nb = nanobind;

namespace bmpipe {
namespace {

// One C++ type per Python exception (python/bmpipe/errors.py names them), told apart by a tag.
template <int Tag>
struct Raised : std::runtime_error {
  using std::runtime_error::runtime_error;
};
using InvalidInputException = Raised<0>;
using FileException = Raised<1>;
using TooLargeException = Raised<2>;
using InternalException = Raised<3>;
using NoFitException = Raised<4>;
using NoPlanException = Raised<5>;

[[noreturn]] void Raise(app::Exit exit, const std::string& message) {
  switch (exit) {
    case app::Exit::kBadInput:
      throw InvalidInputException(message);
    case app::Exit::kIo:
      throw FileException(message);
    case app::Exit::kTooLarge:
      throw TooLargeException(message);
    case app::Exit::kNoFit:
      throw NoFitException(message);
    case app::Exit::kNoPlan:
      throw NoPlanException(message);
    case app::Exit::kOk:
    case app::Exit::kInternal:
      break;
  }
  throw InternalException(message + " (a bug in bmpipe; please report it with the input and this message)");
}

template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Raise(app::ExitOf(r.error().kind), r.error().message);
  return std::move(r).value();
}

void Check(const Status& s) {
  if (!s.ok()) Raise(app::ExitOf(s.error().kind), s.error().message);
}

using Notes = std::vector<std::string>;

std::pair<Problem, Notes> ProblemFromText(const std::string& text, const std::string& source) {
  Notes notes;
  Problem problem = Take(ReadProblem(Take(ParseDocument(text, source)), source, &notes));
  return {std::move(problem), std::move(notes)};
}

std::pair<Problem, Notes> ProblemFromFile(const std::string& path) {
  Notes notes;
  Problem problem = Take(LoadProblem(path, &notes));
  return {std::move(problem), std::move(notes)};
}

// Ctrl-C while long work runs: with the GIL released Python's own handler cannot run, so a C
// handler sets the work's stop flag (the work returns its best, as the command line does) and
// Python's handler comes back afterwards. Only on the main thread, where Python handles signals.
std::atomic<bool> g_interrupted{false};
extern "C" void OnInterrupt(int) { g_interrupted.store(true); }

class InterruptScope {
 public:
  explicit InterruptScope(bool active) : active_(active) {
    g_interrupted.store(false);
    if (active_) previous_ = std::signal(SIGINT, OnInterrupt);
  }
  ~InterruptScope() {
    if (active_) std::signal(SIGINT, previous_);
  }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  bool active_;
  void (*previous_)(int) = SIG_DFL;
};

// The work's progress to a Python callable, one JSON object a report (the fields of the command
// line's --progress lines). An exception in the callable stops the work and is raised after it.
class ProgressBridge {
 public:
  explicit ProgressBridge(nb::object callback) : callback_(std::move(callback)), began_(Deadline::Clock::now()) {}
  ProgressSink Sink(std::string_view command) {
    if (callback_.is_none()) return nullptr;
    return [this, command = std::string(command)](const Progress& p) {
      const double elapsed = std::chrono::duration<double>(Deadline::Clock::now() - began_).count();
      const std::string line = ProgressJson(command, p, elapsed);
      nb::gil_scoped_acquire gil;
      std::lock_guard<std::mutex> guard(lock_);
      if (error_) return;
      try {
        callback_(line);
      } catch (nb::python_error& e) {
        error_.emplace(std::move(e));
        g_interrupted.store(true);
      }
    };
  }
  // With the GIL held, after the work: the callable's exception, if it raised one.
  void RaiseIfFailed() {
    if (error_) {
      nb::python_error e = std::move(*error_);
      error_.reset();
      throw e;
    }
  }

 private:
  nb::object callback_;
  Deadline::Clock::time_point began_;
  std::mutex lock_;
  std::optional<nb::python_error> error_;
};

using Documents = std::vector<std::pair<std::string, std::string>>;

// Runs the command `name` with the keywords `options` (JSON text) on `problem` (or none), as the
// command line would: returns its document (what --json prints), its further documents (notes,
// a device file) and its messages for standard error; a failing exit raises with the messages.
std::tuple<std::string, Documents, std::vector<std::string>> Run(const std::string& name, const Problem* problem,
                                                                 const std::string& options, nb::object progress,
                                                                 bool catch_interrupt) {
  const app::Command* command = app::FindCommand(name);
  if (command == nullptr) Raise(app::Exit::kInternal, "no command '" + name + "'");
  std::unique_ptr<app::Invocation> invocation = command->make();
  Check(ReadOptions(invocation->options(), Take(ParseDocument(options, name)), "bmpipe." + name));
  if (problem != nullptr) Check(invocation->GiveProblem(*problem));
  InterruptScope scope(catch_interrupt);
  ProgressBridge bridge(std::move(progress));
  Notes notes;
  app::Context context;
  context.wants_json = true;
  context.stop = Deadline::Never().StoppedBy(&g_interrupted);
  context.progress = [&bridge](std::string_view command_name, const std::string&) { return bridge.Sink(command_name); };
  context.note = [&notes](const std::string& note) { notes.push_back(note); };
  std::optional<Result<app::Output>> result;
  {
    nb::gil_scoped_release release;
    result.emplace(invocation->Run(context));
  }
  bridge.RaiseIfFailed();
  app::Output out = Take(std::move(*result));
  for (const std::string& note : notes) out.extras.push_back({"note", note});
  if (out.exit != app::Exit::kOk) {
    std::string message;
    for (const std::string& m : out.messages) message += (message.empty() ? "" : "\n") + m;
    Raise(out.exit, message);
  }
  return {out.json, out.extras, out.messages};
}

std::vector<std::vector<std::tuple<int, int, std::string, double, double>>> Timeline(const Problem& problem,
                                                                                     const std::string& plan) {
  std::vector<std::vector<std::tuple<int, int, std::string, double, double>>> out;
  for (const std::vector<app::TimedOp>& ops : Take(app::Timeline(problem, plan))) {
    out.emplace_back();
    for (const app::TimedOp& op : ops) out.back().emplace_back(op.stage, op.micro_batch, std::string(1, op.kind), op.start_s, op.end_s);
  }
  return out;
}

std::string KeywordsOf(const std::string& name) {
  const app::Command* command = app::FindCommand(name);
  if (command == nullptr) Raise(app::Exit::kInternal, "no command '" + name + "'");
  return KeywordHelp(command->make()->options());
}

}  // namespace
}  // namespace bmpipe

NB_MODULE(_core, m) {
  using namespace bmpipe;
  m.doc() = "bmpipe's C++ core; use the package bmpipe, not this module.";

  nb::object base = nb::module_::import_("bmpipe._errorbase").attr("Error");
  // Shown as bmpipe.errors.X (where the package exports them).
  const auto named = [](nb::handle type) { type.attr("__module__") = "bmpipe.errors"; };
  named(nb::exception<InvalidInputException>(m, "InvalidInputError", base));
  named(nb::exception<FileException>(m, "FileError", base));
  named(nb::exception<TooLargeException>(m, "TooLargeError", base));
  named(nb::exception<InternalException>(m, "InternalError", base));
  named(nb::exception<NoFitException>(m, "NoFitError", base));
  named(nb::exception<NoPlanException>(m, "NoPlanError", base));

  nb::class_<Problem>(m, "Problem")
      .def_ro("name", &Problem::name)
      .def_prop_ro("num_layers", &Problem::num_layers)
      .def_prop_ro("ranks", [](const Problem& p) { return p.pipeline.ranks; })
      .def_prop_ro("chunks", [](const Problem& p) { return p.pipeline.chunks; })
      .def_prop_ro("stages", [](const Problem& p) { return p.pipeline.stages(); })
      .def_prop_ro("micro_batches", [](const Problem& p) { return p.pipeline.micro_batches; })
      .def_prop_ro("schedule", [](const Problem& p) { return std::string(ScheduleName(p.pipeline.schedule)); })
      .def_prop_ro("memory_bytes", [](const Problem& p) { return p.memory_bytes; });

  m.def("problem_from_text", &ProblemFromText, nb::arg("text"), nb::arg("source"));
  m.def("problem_from_file", &ProblemFromFile, nb::arg("path"));
  m.def("builtin_example", [] { return Take(app::BuiltinExample()); });
  m.def("problem_from_model", [](const std::string& keywords) { return Take(app::ModelProblem(Take(ParseDocument(keywords, "Problem.from_model")))); },
        nb::arg("keywords"));
  m.def("problem_json", &ProblemJsonText, nb::arg("problem"), nb::arg("description"));
  m.def("run", &Run, nb::arg("command"), nb::arg("problem").none(), nb::arg("options"), nb::arg("progress").none(),
        nb::arg("catch_interrupt"));
  m.def("keywords", &KeywordsOf, nb::arg("command"));
  m.def("timeline", &Timeline, nb::arg("problem"), nb::arg("plan"));
  m.def("chrome_trace", [](const Problem& p, const std::string& plan, const std::string& title) {
    return Take(app::ChromeTrace(p, plan, title));
  }, nb::arg("problem"), nb::arg("plan"), nb::arg("title"));
  m.def("format_names", &FormatNames);
  m.def("target_names", &TargetNames);
  m.def("model_presets", &ModelPresetNames);
  m.def("device_presets", &DevicePresetNames);
  m.def("version", [] { return std::string(app::Version()); });
}

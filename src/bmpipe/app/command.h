// The commands as one application layer that the command line (apps/bmpipe) and the Python
// package (python/src/core.cc) both call: each command is a request (its options, one table), a
// function that does the work and says everything it produced, and a row in Commands(). The
// callers only parse and print, so the two cannot drift: the same request gives the same plan,
// report and errors.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bmpipe/core/deadline.h"
#include "bmpipe/core/error.h"
#include "bmpipe/core/options.h"
#include "bmpipe/core/progress.h"

namespace bmpipe {

struct Problem;

namespace app {

// The exit codes (README, "Exit codes"), in one place.
enum class Exit : int {
  kOk = 0,
  kInternal = 1,
  kBadInput = 2,  // bad command line or invalid input file
  kIo = 3,        // a file could not be read or written
  kNoFit = 4,     // proven: no plan fits in memory
  kNoPlan = 5,    // the time limit (or Ctrl-C) stopped the search before any plan or result
  kTooLarge = 6,  // the work does not fit in the memory available
};
// The exit code of an error.
Exit ExitOf(ErrorKind kind);

// What a command's caller gives it besides its options.
struct Context {
  // Stops the work, which returns what it has (Ctrl-C); its flag tells whether it did.
  Deadline stop;
  // Where the progress of long work goes: the command's name ("plan", "compare", "search") and
  // its --progress word ("auto", "bar", "lines", "none"); an empty sink for none.
  std::function<ProgressSink(std::string_view command, const std::string& mode)> progress;
  // A note for the user as soon as it is known (an old key name read): "bmpipe: note: ..." on
  // the command line, a bmpipe.Note warning in Python.
  std::function<void(const std::string&)> note;
  // The caller reads Output::json (Python): commands build it even when no option asks for it.
  bool wants_json = false;
  // What stopped the work when `stop` did: "Ctrl-C" (SIGINT), "SIGTERM"; read once it has.
  std::function<std::string()> stopped_by = [] { return std::string("Ctrl-C"); };

  bool Interrupted() const { return stop.Stopped(); }
  ProgressSink Progress(std::string_view command, const std::string& mode) const {
    return progress ? progress(command, mode) : ProgressSink{};
  }
  void Note(const std::string& text) const {
    if (note) note(text);
  }
};

// Everything a command produced. The command line writes `files` (all or none; only when `exit` is
// kOk or `keep_files`), prints `out` on standard output and each of `messages` on standard error
// ("bmpipe: " first), and exits with `exit`. Python reads `json` (and `extras`), warns the
// messages, and raises when `exit` is a failure.
struct Output {
  Exit exit = Exit::kOk;
  std::string out;                   // standard output
  std::string json;                  // the command's document (what --json prints), for Python
  std::vector<std::pair<std::string, std::string>> extras;  // more documents for Python, by name
  std::vector<std::string> messages;  // for standard error, without "bmpipe: "
  std::vector<std::pair<std::string, std::string>> files;  // path, content
  bool keep_files = false;            // write the files even when `exit` is a failure
};

// One command run: its request, with the option table bound to it.
class Invocation {
 public:
  virtual ~Invocation() = default;
  virtual OptionTable& options() = 0;
  // After the options are set: the work. An error is the command's failure (bad input, a file).
  virtual Result<Output> Run(const Context& context) = 0;
  // Python only: the problem to work on instead of a --problem file or --model (plan, simulate,
  // compare, export); an error for commands that take none.
  virtual Status GiveProblem(const Problem& problem);
};

struct Command {
  std::string_view name;
  std::string help;  // its --help description
  std::function<std::unique_ptr<Invocation>()> make;
};

// Every command, in the order --help lists them.
const std::vector<Command>& Commands();
const Command* FindCommand(std::string_view name);

// The version string of the command line and the package.
std::string_view Version();
// The top-level --help description.
std::string_view ProgramHelp();

}  // namespace app
}  // namespace bmpipe

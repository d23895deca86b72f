// The bmpipe command line: parsing and printing only. Every command is a row of app::Commands():
// its options table becomes the subcommand's flags, and its Output is written here (files all or
// none, standard output, standard error, the exit code).
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

#include "bmpipe/app/command.h"
#include "bmpipe/io/output_file.h"
#include "bmpipe/report/progress_printer.h"

namespace bmpipe {
namespace {

int Code(app::Exit exit) { return static_cast<int>(exit); }

int Fail(const Error& error) {
  std::cerr << "bmpipe: error: " << error.message << "\n";
  if (error.kind == ErrorKind::kInternal) {
    std::cerr << "bmpipe: this is a bug in bmpipe; please report it with the command line, the input files and this "
                 "message\n";
  }
  return Code(app::ExitOf(error.kind));
}

// Ctrl-C or SIGTERM: the first stops the work, which returns what it has (the best plan so far,
// with its gap); a second ends the process as usual. The handler only sets flags; the main flow
// writes the result (and removes its temporaries). Armed by the commands that report progress.
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};

extern "C" void OnInterrupt(int signal) {
  g_signal.store(signal);
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

// The option's flags on `cmd`, from its row: the same names, help, checks and defaults.
CLI::Option* AddFlag(CLI::App& cmd, const Option& o) {
  CLI::Option* opt = std::visit(
      [&](auto* field) -> CLI::Option* {
        if constexpr (std::is_same_v<decltype(field), bool*>) {
          return cmd.add_flag(o.flags, *field, o.help);
        } else {
          return cmd.add_option(o.flags, *field, o.help);
        }
      },
      o.field);
  const bool integral = std::holds_alternative<int*>(o.field) || std::holds_alternative<long*>(o.field) ||
                        std::holds_alternative<std::vector<int>*>(o.field);
  if (o.comma_separated) opt->delimiter(',');
  // A number flag takes a finite number: "nan" and "inf" parse as doubles and pass the range
  // checks, and would mean no limit at all.
  if (std::holds_alternative<double*>(o.field)) {
    opt->check(CLI::Validator(
        [](std::string& text) {
          const double x = std::strtod(text.c_str(), nullptr);
          return std::isfinite(x) ? std::string() : std::string("give a finite number, not " + text);
        },
        "NUMBER"));
  }
  if (!o.choices.empty()) opt->check(CLI::IsMember(o.choices));
  switch (o.check) {
    case OptionCheck::kNone:
      break;
    case OptionCheck::kPositive:
      opt->check(CLI::PositiveNumber);
      break;
    case OptionCheck::kNonNegative:
      opt->check(CLI::NonNegativeNumber);
      break;
    case OptionCheck::kRange:
      if (integral) {
        opt->check(CLI::Range(static_cast<int>(o.min), static_cast<int>(o.max)));
      } else {
        opt->check(CLI::Range(o.min, o.max));
      }
      break;
  }
  if (o.show_default) opt->capture_default_str();
  if (o.required) opt->required();
  if (!o.group.empty()) opt->group(o.group);
  if (o.given || o.given_keys) {
    opt->each([given = o.given, keys = o.given_keys, key = o.key](const std::string&) {
      if (given) *given = true;
      if (keys && !key.empty()) keys->insert(key);
    });
  }
  return opt;
}

// "--device,--gbs": each name's option on `cmd`.
std::vector<CLI::Option*> Named(CLI::App& cmd, const std::string& names) {
  std::vector<CLI::Option*> out;
  for (std::size_t at = 0; at < names.size();) {
    std::size_t end = names.find(',', at);
    if (end == std::string::npos) end = names.size();
    out.push_back(cmd.get_option(names.substr(at, end - at)));
    at = end + 1;
  }
  return out;
}

void Register(CLI::App& cmd, const OptionTable& table) {
  std::vector<std::pair<CLI::Option*, const Option*>> added;
  for (const Option& o : table.options()) {
    if (!o.flags.empty()) added.push_back({AddFlag(cmd, o), &o});
  }
  for (const auto& [opt, o] : added) {
    for (CLI::Option* other : Named(cmd, o->excludes)) opt->excludes(other);
    for (CLI::Option* other : Named(cmd, o->needs)) opt->needs(other);
  }
}

// Writes what the command produced: its files (all or none), then standard output and error.
int Write(const Result<app::Output>& result) {
  if (!result.ok()) return Fail(result.error());
  const app::Output& o = result.value();
  if (o.exit == app::Exit::kOk || o.keep_files) {
    OutputFiles files;
    for (const auto& [path, content] : o.files) files.Add(path, content);
    if (Status written = files.Commit(); !written.ok()) {
      // Interrupted while writing: said, and the exit is the signal's (128 + its number) as if
      // it had ended the process, which it does at once where no handler catches it.
      if (written.error().kind == ErrorKind::kStopped && g_signal.load() != 0) {
        std::cerr << "bmpipe: " << written.error().message << "\n";
        return 128 + g_signal.load();
      }
      return Fail(written.error());
    }
  }
  std::cout << o.out << std::flush;
  for (const std::string& m : o.messages) std::cerr << "bmpipe: " << m << "\n";
  if (!std::cout) {
    // Standard output closed early (a pipe's reader quit): said, not killed by SIGPIPE.
    return Fail(IoError("standard output: error while writing (its reader closed it)"));
  }
  return Code(o.exit);
}

int Main(int argc, char** argv) {
  // A pipe whose reader quits is a write error, reported with exit 3 and no temporary left, not a
  // silent death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App cli{std::string(app::ProgramHelp())};
  cli.set_version_flag("--version", "bmpipe " + std::string(app::Version()));
  cli.require_subcommand(1);
  std::vector<std::pair<CLI::App*, std::unique_ptr<app::Invocation>>> commands;
  for (const app::Command& c : app::Commands()) {
    commands.push_back({cli.add_subcommand(std::string(c.name), c.help), c.make()});
    Register(*commands.back().first, commands.back().second->options());
  }
  // The MindFormers tool spells two of its options with one dash: accept them as it does.
  std::vector<std::string> words(argv, argv + argc);
  for (std::string& w : words) {
    if (w == "-mb") w = "--mb";
    if (w == "-mem") w = "--mem";
  }
  std::vector<char*> word_ptrs;
  for (std::string& w : words) word_ptrs.push_back(w.data());
  try {
    cli.parse(static_cast<int>(word_ptrs.size()), word_ptrs.data());
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? Code(app::Exit::kOk) : Code(app::Exit::kBadInput);
  }
  for (auto& [cmd, invocation] : commands) {
    if (!cmd->parsed()) continue;
    std::unique_ptr<ProgressPrinter> printer;
    app::Context context;
    context.stop = Deadline::Never().StoppedBy(&g_interrupted);
    context.note = [](const std::string& note) { std::cerr << "bmpipe: note: " << note << "\n"; };
    context.stopped_by = [] { return std::string(g_signal.load() == SIGTERM ? "SIGTERM" : "Ctrl-C"); };
    context.progress = [&printer](std::string_view command, const std::string& mode) {
      std::signal(SIGINT, OnInterrupt);
      std::signal(SIGTERM, OnInterrupt);
      printer = std::make_unique<ProgressPrinter>(std::cerr, ProgressModeOf(mode, isatty(STDERR_FILENO) != 0),
                                                  std::string(command));
      return printer->Sink();
    };
    Result<app::Output> result = invocation->Run(context);
    if (printer) printer->Finish();
    return Write(result);
  }
  return Code(app::Exit::kBadInput);
}

}  // namespace
}  // namespace bmpipe

// No exception leaves main unmapped: running out of memory is a size the user can lower, anything
// else is a bug to report.
int main(int argc, char** argv) {
  try {
    return bmpipe::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    return bmpipe::Fail(bmpipe::TooLarge(
        "out of memory: the problem is too large to plan in the memory available; fewer layers (merge identical "
        "ones with 'repeat'), stages, micro-batches or recomputation options would help"));
  } catch (const std::exception& e) {
    return bmpipe::Fail(bmpipe::InternalError(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return bmpipe::Fail(bmpipe::InternalError("unexpected exception of unknown type"));
  }
}

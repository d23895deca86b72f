#include "bmpipe/app/command.h"

#include "bmpipe/app/commands.h"

namespace bmpipe::app {

Exit ExitOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput:
      return Exit::kBadInput;
    case ErrorKind::kIo:
      return Exit::kIo;
    case ErrorKind::kTooLarge:
      return Exit::kTooLarge;
    case ErrorKind::kStopped:
      return Exit::kNoPlan;
    case ErrorKind::kInternal:
      return Exit::kInternal;
  }
  return Exit::kInternal;
}

Status Invocation::GiveProblem(const Problem&) {
  return InvalidInput("this command takes no problem");
}

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {SimulateCommand(), ValidateCommand(), PlanCommand(),
                                                ExportCommand(),   CompareCommand(),  SearchCommand(),
                                                ProfileCommand(),  CalibrateCommand()};
  return commands;
}

const Command* FindCommand(std::string_view name) {
  for (const Command& c : Commands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string_view Version() { return BMPIPE_VERSION; }

std::string_view ProgramHelp() {
  return "bmpipe: pipeline-parallel planner for LLM training. It chooses the stage partition and per-layer "
         "recomputation together, and checks every plan with an exact simulation of the pipeline schedule.\n\n"
         "Exit codes: 0 success, 1 internal error, 2 bad command line or invalid input, 3 file not readable or "
         "writable, 4 no plan fits in memory (proven), 5 no plan found before the time limit, 6 the problem is too "
         "large for the memory available.";
}

}  // namespace bmpipe::app

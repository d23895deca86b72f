// The rows of Commands(), one per command file (app/<command>.cc).
#pragma once

#include "bmpipe/app/command.h"

namespace bmpipe::app {

Command SimulateCommand();
Command ValidateCommand();
Command PlanCommand();
Command ExportCommand();
Command CompareCommand();
Command SearchCommand();
Command ProfileCommand();
Command CalibrateCommand();

}  // namespace bmpipe::app

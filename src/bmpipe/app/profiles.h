// Framework-version profiles (--defaults NAME): the settings a framework's own recipes run with when
// a user states only the layout, as data with the source of each value (data/profiles.yaml,
// compiled in). ResolveSetup (model.h) applies one between bmpipe's defaults and what a launcher
// file or the command line states.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"
#include "bmpipe/core/options.h"
#include "bmpipe/cost/training_setup.h"

namespace bmpipe::app {

struct ProfileSetting {
  std::string key;  // a keyword of the cost model's options
  Json value;
  // empty (always), "tp > 1", "ep > 1", "ep > 1 and interleaved" (pp 1 or vpp > 1), "quantized"
  // (a precision other than bf16) or "fp8" (per-tensor FP8)
  std::string when;
  std::string source;
};

struct Profile {
  std::string name, describes;
  std::vector<ProfileSetting> settings;
};

// data/profiles.yaml's text, and the profiles it holds (read once; a test checks every keyword).
const std::string& BundledProfilesText();
const std::vector<Profile>& Profiles();
std::vector<std::string> ProfileNames();
// The profile named `name`, or an error listing them.
Result<Profile> FindProfile(const std::string& name);
// Sets the setting's keyword through `table` (the command's options, bound to its request); a
// keyword the table refuses is a defect of data/profiles.yaml (an internal error).
Status ApplyProfileSetting(const OptionTable& table, const std::string& profile, const ProfileSetting& setting);
// Whether the setting's condition holds for `setup` (its precision as `setup.precision`).
bool ProfileSettingApplies(const ProfileSetting& setting, const TrainingSetup& setup);

}  // namespace bmpipe::app

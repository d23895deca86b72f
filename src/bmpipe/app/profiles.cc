#include "bmpipe/app/profiles.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/core/text.h"

namespace bmpipe::app {
namespace {

std::vector<Profile> ReadProfiles(const Json& doc) {
  const JsonCursor root(doc, "");
  root.ExpectKeys({"profiles"});
  std::vector<Profile> out;
  for (const JsonCursor& p : root.Required("profiles", "the profiles").Elements()) {
    p.ExpectKeys({"name", "describes", "settings"});
    Profile profile;
    profile.name = p.Required("name", "the profile's name").String();
    profile.describes = p.Required("describes", "what the profile stands for").String();
    for (const JsonCursor& s : p.Required("settings", "its settings").Elements()) {
      s.ExpectKeys({"key", "value", "when", "source"});
      ProfileSetting setting;
      setting.key = s.Required("key", "an option keyword").String();
      setting.value = s.Required("value", "the keyword's value").json();
      if (auto w = s.Optional("when")) {
        setting.when = w->String();
        if (setting.when != "tp > 1" && setting.when != "ep > 1" && setting.when != "ep > 1 and interleaved" &&
            setting.when != "quantized" && setting.when != "fp8" && setting.when != "pp > 1" &&
            setting.when != "pp == 1") {
          w->Fail("give tp > 1, ep > 1, ep > 1 and interleaved, quantized, fp8, pp > 1 or pp == 1");
        }
      }
      setting.source = s.Required("source", "where the value comes from").String();
      profile.settings.push_back(std::move(setting));
    }
    out.push_back(std::move(profile));
  }
  return out;
}

}  // namespace

const std::vector<Profile>& Profiles() {
  static const std::vector<Profile> profiles = [] {
    Result<Json> doc = ParseDocument(BundledProfilesText(), "data/profiles.yaml");
    Result<std::vector<Profile>> read =
        doc.ok() ? ReadDocument<std::vector<Profile>>("data/profiles.yaml", [&] { return ReadProfiles(doc.value()); })
                 : Result<std::vector<Profile>>(doc.error());
    // The file is compiled in and checked by a test: an unreadable one is a build defect.
    return read.ok() ? read.value() : std::vector<Profile>{};
  }();
  return profiles;
}

std::vector<std::string> ProfileNames() {
  std::vector<std::string> names;
  for (const Profile& p : Profiles()) names.push_back(p.name);
  return names;
}

Result<Profile> FindProfile(const std::string& name) {
  for (const Profile& p : Profiles()) {
    if (p.name == name) return p;
  }
  return InvalidInput(fmt::format("--defaults {}: no such profile{}; the profiles: {}", name,
                                  DidYouMean(name, ProfileNames()), fmt::join(ProfileNames(), ", ")));
}

Status ApplyProfileSetting(const OptionTable& table, const std::string& profile, const ProfileSetting& setting) {
  Json one = Json::object();
  one[setting.key] = setting.value;
  if (Status read = ReadOptions(table, one, "--defaults " + profile); !read.ok()) {
    return InternalError("data/profiles.yaml: " + read.error().message);
  }
  return {};
}

bool ProfileSettingApplies(const ProfileSetting& setting, const TrainingSetup& setup) {
  if (setting.when == "tp > 1") return setup.tp > 1;
  if (setting.when == "ep > 1") return setup.ep > 1;
  if (setting.when == "ep > 1 and interleaved") return setup.ep > 1 && (setup.pp == 1 || setup.vpp > 1);
  if (setting.when == "quantized") return setup.precision != Precision::kBf16;
  if (setting.when == "fp8") return setup.precision == Precision::kFp8;
  if (setting.when == "pp > 1") return setup.pp > 1;
  if (setting.when == "pp == 1") return setup.pp == 1;
  return true;
}

}  // namespace bmpipe::app

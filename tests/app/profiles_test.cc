// The framework-version profiles (data/profiles.yaml): the compiled-in file reads, and every setting
// is a keyword the cost model's option table takes with its value.
#include <gtest/gtest.h>

#include "bmpipe/app/model.h"
#include "bmpipe/app/profiles.h"

namespace bmpipe::app {
namespace {

TEST(Profiles, EverySettingIsAnOptionTheTableTakes) {
  ASSERT_GE(Profiles().size(), 2u);  // the file read (an unreadable one gives none)
  for (const Profile& profile : Profiles()) {
    EXPECT_FALSE(profile.describes.empty());
    for (const ProfileSetting& setting : profile.settings) {
      ModelRequest request;
      OptionTable table;
      AddModelOptions(table, request, "--problem");
      const Status read = ApplyProfileSetting(table, profile.name, setting);
      EXPECT_TRUE(read.ok()) << profile.name << ": " << read.error().message;
      EXPECT_FALSE(setting.source.empty()) << profile.name << " " << setting.key;
    }
  }
  EXPECT_TRUE(FindProfile("megatron-bridge-perf").ok());
  EXPECT_NE(FindProfile("megatron-bridge").error().message.find("megatron-bridge-perf"), std::string::npos);
}

TEST(Profiles, ConditionsFollowTheSetup) {
  ProfileSetting s;
  TrainingSetup setup;
  s.when = "tp > 1";
  EXPECT_FALSE(ProfileSettingApplies(s, setup));
  setup.tp = 2;
  EXPECT_TRUE(ProfileSettingApplies(s, setup));
  s.when = "pp > 1";
  EXPECT_FALSE(ProfileSettingApplies(s, setup));
  s.when = "pp == 1";
  EXPECT_TRUE(ProfileSettingApplies(s, setup));
  s.when = "ep > 1 and interleaved";
  setup.ep = 8;
  setup.pp = 4;
  EXPECT_FALSE(ProfileSettingApplies(s, setup));  // megatron-core needs interleaving with pp > 1
  setup.vpp = 2;
  EXPECT_TRUE(ProfileSettingApplies(s, setup));
  s.when = "quantized";
  EXPECT_FALSE(ProfileSettingApplies(s, setup));
  setup.precision = Precision::kMxFp8;
  EXPECT_TRUE(ProfileSettingApplies(s, setup));
  s.when = "fp8";
  EXPECT_FALSE(ProfileSettingApplies(s, setup));  // MXFP8 names its own scaling
}

}  // namespace
}  // namespace bmpipe::app

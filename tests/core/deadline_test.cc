// The deadline every long-running step takes.
#include "bmpipe/core/deadline.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include <gtest/gtest.h>

namespace bmpipe {
namespace {

TEST(Deadline, NeverExpires) {
  const Deadline never;
  EXPECT_TRUE(never.IsNever());
  EXPECT_FALSE(never.Expired());
  EXPECT_EQ(never.SecondsLeft(), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(never.Share(0.25).IsNever());
}

TEST(Deadline, LimitsTooLargeToCountAreNone) {
  EXPECT_TRUE(Deadline::In(std::numeric_limits<double>::infinity()).IsNever());
  EXPECT_TRUE(Deadline::In(std::nan("")).IsNever());
  EXPECT_TRUE(Deadline::In(1e300).IsNever());
  EXPECT_FALSE(Deadline::In(1e6).IsNever());
}

TEST(Deadline, ZeroOrNegativeHasAlreadyPassed) {
  EXPECT_TRUE(Deadline::In(0).Expired());
  EXPECT_TRUE(Deadline::In(-5).Expired());
  EXPECT_EQ(Deadline::In(-5).SecondsLeft(), 0);
}

TEST(Deadline, ExpiresAfterItsTime) {
  const Deadline soon = Deadline::In(0.02);
  EXPECT_FALSE(soon.Expired());
  EXPECT_GT(soon.SecondsLeft(), 0);
  EXPECT_LE(soon.SecondsLeft(), 0.02);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_TRUE(soon.Expired());
}

TEST(Deadline, EarlierAndShare) {
  const Deadline hour = Deadline::In(3600), minute = Deadline::In(60);
  EXPECT_LE(hour.Earlier(minute).SecondsLeft(), 60);
  EXPECT_LE(minute.Earlier(hour).SecondsLeft(), 60);
  EXPECT_LE(Deadline().Earlier(minute).SecondsLeft(), 60);
  EXPECT_LE(hour.Share(0.25).SecondsLeft(), 900);
  EXPECT_GT(hour.Share(0.25).SecondsLeft(), 800);
  // A grace after it: later by that much; an expired one too; never stays never.
  EXPECT_GT(minute.Extended(60).SecondsLeft(), 110);
  EXPECT_LE(minute.Extended(60).SecondsLeft(), 120);
  EXPECT_FALSE(Deadline::In(0).Extended(60).Expired());
  EXPECT_TRUE(Deadline().Extended(60).IsNever());
}

TEST(Deadline, AStopFlagEndsItBeforeItsTime) {
  std::atomic<bool> stop{false};
  const Deadline hour = Deadline::In(3600).StoppedBy(&stop);
  const Deadline flag_only = Deadline::Never().StoppedBy(&stop);
  EXPECT_FALSE(flag_only.IsNever());  // it must be polled
  EXPECT_FALSE(hour.Expired());
  EXPECT_FALSE(flag_only.Expired());
  EXPECT_EQ(flag_only.SecondsLeft(), std::numeric_limits<double>::infinity());
  // Copies derived from it watch the same flag.
  const Deadline share = hour.Share(0.5), earlier = Deadline::In(60).Earlier(flag_only), later = hour.Extended(60);
  stop = true;
  for (const Deadline& d : {hour, flag_only, share, earlier, later}) {
    EXPECT_TRUE(d.Expired());
    EXPECT_TRUE(d.Stopped());
    EXPECT_EQ(d.SecondsLeft(), 0);
  }
  EXPECT_FALSE(Deadline::In(0).Stopped());  // the clock ended that one
  DeadlinePoll poll(flag_only, 2);
  EXPECT_FALSE(poll.Expired());
  EXPECT_TRUE(poll.Expired());
}

TEST(Deadline, PollReadsTheClockEveryPeriodAndStaysExpired) {
  DeadlinePoll poll(Deadline::In(0), 4);
  EXPECT_FALSE(poll.Expired());  // calls 1..3 do not read the clock
  EXPECT_FALSE(poll.Expired());
  EXPECT_FALSE(poll.Expired());
  EXPECT_TRUE(poll.Expired());
  EXPECT_TRUE(poll.Expired());
  DeadlinePoll never{Deadline()};
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(never.Expired());
}

}  // namespace
}  // namespace bmpipe

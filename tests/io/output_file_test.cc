#include "bmpipe/io/output_file.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "test_support.h"

namespace bmpipe {
namespace {

std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> names;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.insert(n);
  }
  closedir(d);
  return names;
}

TEST(OutputFiles, NothingAppearsUntilEveryFileCanBeWritten) {
  const std::string dir = testing::MakeTempDir();
  OutputFiles files;
  files.Add(dir + "/a.json", "A");
  files.Add(dir + "/missing/b.json", "B");  // its directory does not exist
  Status written = files.Commit();
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.error().kind, ErrorKind::kIo);
  EXPECT_NE(written.error().message.find(dir + "/missing/b.json: cannot create the file in " + dir + "/missing"),
            std::string::npos)
      << written.error().message;
  EXPECT_TRUE(Names(dir).empty());  // neither a.json nor a temporary file

  OutputFiles good;
  good.Add(dir + "/a.json", "A");
  good.Add(dir + "/b.json", "B");
  ASSERT_TRUE(good.Commit().ok());
  EXPECT_EQ(Names(dir), (std::set<std::string>{"a.json", "b.json"}));
  EXPECT_EQ(testing::ReadFile(dir + "/b.json"), "B");
  std::remove((dir + "/a.json").c_str());
  std::remove((dir + "/b.json").c_str());
  rmdir(dir.c_str());
}

TEST(OutputFiles, ReplacesAFileWithTheModeANewFileGets) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/plan.json";
  std::ofstream(path) << "a much longer old content";
  const mode_t mask = umask(022);
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  umask(mask);
  EXPECT_EQ(testing::ReadFile(path), "new");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(Names(dir), std::set<std::string>{"plan.json"});
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST(OutputFiles, DirectoriesAndDanglingLinksAreErrors) {
  const std::string dir = testing::MakeTempDir();
  Status to_dir = WriteFileAtomically(dir, "x");
  ASSERT_FALSE(to_dir.ok());
  EXPECT_EQ(to_dir.error().message, dir + ": is a directory; give a file name");
  const std::string link = dir + "/link";
  ASSERT_EQ(symlink((dir + "/nowhere").c_str(), link.c_str()), 0);
  Status dangling = WriteFileAtomically(link, "x");
  ASSERT_FALSE(dangling.ok());
  EXPECT_NE(dangling.error().message.find("a symbolic link to a file that cannot be reached"), std::string::npos);
  EXPECT_EQ(Names(dir), std::set<std::string>{"link"});
  std::remove(link.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace bmpipe

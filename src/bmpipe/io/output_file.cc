#include "bmpipe/io/output_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

namespace bmpipe {
namespace {

std::string Reason() { return std::strerror(errno); }

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Where the bytes for one output path go.
struct Target {
  std::string path;     // as the user gave it, for messages
  std::string file;     // the file replaced (the path, or the regular file a link names)
  bool direct = false;  // written in place: a pipe, a device, standard output
  std::string temporary;
  bool existed = false;  // a regular file is replaced: its mode is kept, and it is restored on a failure
  mode_t mode = 0;
  std::string backup;    // a second link to the replaced file while the outputs are put in place
};

// What names the same file under any spelling: device and inode of an existing file, else the
// real directory and the name (./o.json and o.json are one file).
std::string Identity(const Target& t) {
  struct stat st {};
  if (::stat(t.file.c_str(), &st) == 0) return fmt::format("inode {}:{}", st.st_dev, st.st_ino);
  const std::size_t slash = t.file.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : t.file.substr(0, slash));
  char* real = ::realpath(dir.c_str(), nullptr);
  std::string out = real ? std::string(real) : dir;
  std::free(real);
  return "path " + out + "/" + (slash == std::string::npos ? t.file : t.file.substr(slash + 1));
}

Result<Target> Resolve(const std::string& path) {
  if (path.empty()) return InvalidInput("an output file name is empty; give a path");
  if (path == "-") return Target{path, path, true, "", false, 0, ""};
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Target{path, path, false, "", false, 0, ""};  // a new file
    return IoError(fmt::format("{}: cannot write the file ({})", path, Reason()));
  }
  if (S_ISDIR(st.st_mode)) return IoError(fmt::format("{}: is a directory; give a file name", path));
  if (S_ISREG(st.st_mode)) return Target{path, path, false, "", true, static_cast<mode_t>(st.st_mode & 07777), ""};
  if (S_ISLNK(st.st_mode)) {
    struct stat target {};
    if (::stat(path.c_str(), &target) != 0) {
      return IoError(fmt::format("{}: a symbolic link to a file that cannot be reached ({}); give the file's own path",
                                 path, Reason()));
    }
    if (S_ISDIR(target.st_mode)) return IoError(fmt::format("{}: is a link to a directory; give a file name", path));
    // /dev/stdout and /proc/self/fd/N name a file the shell already has open: replacing it would
    // lose whatever else is written there, so it is written in place like a pipe.
    if (!S_ISREG(target.st_mode) || StartsWith(path, "/dev/") || StartsWith(path, "/proc/")) {
      return Target{path, path, true, "", false, 0, ""};
    }
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr) return IoError(fmt::format("{}: cannot follow the link ({})", path, Reason()));
    std::string file = real;
    std::free(real);
    return Target{path, file, false, "", true, static_cast<mode_t>(target.st_mode & 07777), ""};
  }
  return Target{path, path, true, "", false, 0, ""};  // a named pipe, a device, a socket
}

// Whether SIGINT, SIGTERM or SIGHUP arrived while held (HeldSignals): the outputs are then not
// put in place.
// A signal the process ignores (SIGINT in a background job of a script, SIGHUP under nohup) stops
// nothing, though Linux keeps it pending while held.
bool StopPending() {
  sigset_t pending;
  if (::sigpending(&pending) != 0) return false;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction action {};
    if (sigismember(&pending, sig) == 1 && ::sigaction(sig, nullptr, &action) == 0 && action.sa_handler != SIG_IGN) {
      return true;
    }
  }
  return false;
}

Error Interrupted(const std::string& path) {
  return Stopped(fmt::format("{}: interrupted while the outputs were written; no output was changed", path));
}

// Writes in slices, looking for a held signal between them: a 330 MB trace is not finished
// before an interruption takes effect.
constexpr std::size_t kWriteSlice = std::size_t{8} << 20;

Status WriteAll(int fd, const std::string& content, const std::string& path) {
  std::size_t done = 0;
  while (done < content.size()) {
    if (done > 0 && StopPending()) return Interrupted(path);
    const ssize_t n = ::write(fd, content.data() + done, std::min(kWriteSlice, content.size() - done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(fmt::format("{}: error while writing the file ({})", path, Reason()));
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

Status WriteDirect(const Target& t, const std::string& content) {
  if (t.path == "-" || t.path == "/dev/stdout") {
    std::cout << content << std::flush;
    return std::cout ? Status{} : IoError(fmt::format("{}: error while writing standard output", t.path));
  }
  // Non-blocking open: a pipe with no reader fails at once (ENXIO) instead of waiting for one.
  const int fd = ::open(t.path.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENXIO) return IoError(fmt::format("{}: a named pipe that no program is reading; start the reader first", t.path));
    return IoError(fmt::format("{}: cannot write the file ({})", t.path, Reason()));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  Status written = WriteAll(fd, content, t.path);
  if (::close(fd) != 0 && written.ok()) {
    return IoError(fmt::format("{}: error while writing the file ({})", t.path, Reason()));
  }
  return written;
}

// Writes `content` to a new file beside t.file, created exclusively under a random name.
Status WriteTemporary(Target& t, const std::string& content) {
  const std::size_t slash = t.file.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : t.file.substr(0, slash));
  const std::string base = slash == std::string::npos ? t.file : t.file.substr(slash + 1);
  std::string name = (dir == "/" ? "" : dir) + "/." + base + ".bmpipe-XXXXXX";
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    return IoError(fmt::format("{}: cannot create the file in {} ({}); check that the directory exists and is writable",
                               t.path, dir, Reason()));
  }
  t.temporary = name;
  // mkostemp makes the file private; give it the permissions of the file it replaces, or those
  // any new file gets.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  const mode_t mode = t.existed ? t.mode : (0666 & ~mask);
  Status written = WriteAll(fd, content, t.path);
  if (written.ok() && (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0)) {
    written = IoError(fmt::format("{}: error while writing the file ({})", t.path, Reason()));
  }
  if (::close(fd) != 0 && written.ok()) {
    written = IoError(fmt::format("{}: error while writing the file ({})", t.path, Reason()));
  }
  return written;
}

}  // namespace

void OutputFiles::Add(const std::string& path, std::string content) {
  files_.emplace_back(path, std::move(content));
}

namespace {

// Holds SIGINT, SIGTERM and SIGHUP while the outputs are written and put in place: one arriving
// then stops the writing (StopPending) and takes effect after, when no temporary is left and no
// output changed (or, arriving during the renames, every output is complete).
class HeldSignals {
 public:
  HeldSignals() {
    sigset_t held;
    sigemptyset(&held);
    sigaddset(&held, SIGINT);
    sigaddset(&held, SIGTERM);
    sigaddset(&held, SIGHUP);
    ::pthread_sigmask(SIG_BLOCK, &held, &before_);
  }
  ~HeldSignals() { ::pthread_sigmask(SIG_SETMASK, &before_, nullptr); }
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

 private:
  sigset_t before_;
};

}  // namespace

Status OutputFiles::Commit() {
  const HeldSignals held;
  std::vector<Target> targets;
  for (std::size_t i = 0; i < files_.size(); ++i) {
    for (std::size_t k = 0; k < i; ++k) {
      if (files_[k].first == files_[i].first) {
        return InvalidInput(fmt::format("{} is given for two outputs; give each output its own file", files_[i].first));
      }
    }
    Result<Target> t = Resolve(files_[i].first);
    if (!t.ok()) return t.error();
    targets.push_back(t.value());
  }
  // One file under two spellings is still one file.
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].path == "-") continue;
    for (std::size_t k = 0; k < i; ++k) {
      if (targets[k].path != "-" && Identity(targets[k]) == Identity(targets[i])) {
        return InvalidInput(fmt::format("{} and {} are the same file, given for two outputs; give each output its "
                                        "own file",
                                        targets[k].path, targets[i].path));
      }
    }
  }
  auto remove_temporaries = [&] {
    for (const Target& t : targets) {
      if (!t.temporary.empty()) ::unlink(t.temporary.c_str());
      if (!t.backup.empty()) ::unlink(t.backup.c_str());
    }
  };
  // Every regular file is written before any is put in place, so a failure leaves none behind.
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].direct) continue;
    Status written = WriteTemporary(targets[i], files_[i].second);
    if (!written.ok()) {
      remove_temporaries();
      return written;
    }
  }
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (!targets[i].direct) continue;
    Status written = WriteDirect(targets[i], files_[i].second);
    if (!written.ok()) {
      remove_temporaries();
      return written;
    }
  }
  // An interruption while they were written: none is put in place.
  if (StopPending()) {
    remove_temporaries();
    return Interrupted(targets.empty() ? std::string("the outputs") : targets.front().path);
  }
  // A second link to each file replaced, so that a rename failing after others succeeded can put
  // every output back as it was (without one, say on a file system without hard links, that
  // file is not restored).
  for (Target& t : targets) {
    if (t.direct || !t.existed) continue;
    std::string name = t.temporary;
    name.replace(name.size() - 6, 6, "XXXXXX");
    const int fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd < 0) continue;
    ::close(fd);
    ::unlink(name.c_str());
    if (::link(t.file.c_str(), name.c_str()) == 0) t.backup = name;
  }
  for (std::size_t i = 0; i < targets.size(); ++i) {
    Target& t = targets[i];
    if (t.direct) continue;
    if (std::rename(t.temporary.c_str(), t.file.c_str()) != 0) {
      const std::string reason = Reason();
      // Put back the outputs already in place: the file each replaced, or none.
      for (std::size_t k = 0; k < i; ++k) {
        Target& done = targets[k];
        if (done.direct) continue;
        if (!done.backup.empty() && std::rename(done.backup.c_str(), done.file.c_str()) == 0) {
          done.backup.clear();
        } else if (!done.existed) {
          ::unlink(done.file.c_str());
        }
      }
      remove_temporaries();
      return IoError(fmt::format("{}: cannot write the file ({}); no output was changed", t.path, reason));
    }
    t.temporary.clear();
  }
  for (Target& t : targets) {
    if (!t.backup.empty()) ::unlink(t.backup.c_str());
    t.backup.clear();
  }
  files_.clear();
  return {};
}

Status WriteFileAtomically(const std::string& path, const std::string& content) {
  OutputFiles files;
  files.Add(path, content);
  return files.Commit();
}

}  // namespace bmpipe

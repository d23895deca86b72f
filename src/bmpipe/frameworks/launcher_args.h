// A launcher's argument file read as its command line would be (Megatron-LM's arguments,
// torchtitan's): shell words, then the flags a reader knows, everything else set aside for its
// notes. Readers run inside ReadDocument: a bad value fails through the cursor with a message
// naming the flag, its value and the fix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bmpipe {

struct ShellWord {
  std::string text;
  int line = 1;
};

// Splits `text` into words as a POSIX shell does for a command line: blanks and newlines separate,
// '#' at the start of a word comments out the rest of the line, backslash-newline continues the
// line, backslash quotes the next character, '...' is literal, "..." keeps \" \\ \$ \` escapes.
std::vector<ShellWord> ShellWords(const std::string& text);

enum class Arity { kNone, kOne, kMany };

struct Flag {
  std::string name;  // "--num-layers", or the part before ':' of a subcommand word
  std::vector<std::string> values;
};

struct Flags {
  std::map<std::string, Flag> given;  // the flags read (the last of a repeated flag, as argparse)
  std::vector<std::string> ignored;   // the flags and words not read, in order of appearance

  const Flag* Get(const std::string& name) const {
    auto it = given.find(name);
    return it == given.end() ? nullptr : &it->second;
  }
};

// Reads `--flag value`, `--flag=value`, `--flag v1 v2 ...` (kMany: up to the next flag or
// subcommand word) and `section:choice` subcommand words for the flags in `known`; everything
// else is collected in `ignored` (an unknown flag with the words after it).
Flags ReadFlags(const std::vector<ShellWord>& words, const std::map<std::string, Arity>& known);

// The flag's (first) value as a whole number in [min, max].
std::int64_t IntegerValue(const Flag& flag, std::int64_t min, std::int64_t max);

// The flags bmpipe reads as they are absent: fails naming both values when a flag (or its
// default, `absent`) differs from the problem's run (`key` = `want`).
void CheckValue(const Flags& flags, const std::string& name, std::int64_t absent, std::int64_t want,
                const std::string& key, std::int64_t max);
void CheckSwitch(const Flags& flags, const std::string& name, bool want, const std::string& key);

// "not read (<what>): <the ignored words>" (the first kListedWords, then how many more).
std::string IgnoredNote(const std::vector<std::string>& ignored, const std::string& what);
// Words a message lists: the first kListedWords joined by spaces, then "... and N more".
inline constexpr std::size_t kListedWords = 40;
std::string ListedWords(const std::vector<std::string>& words);

// Fails the reader running inside ReadDocument with `message`.
[[noreturn]] void FailConfiguration(const std::string& message);

}  // namespace bmpipe

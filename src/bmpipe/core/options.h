// A command's options as one table: each option's command-line flag, its keyword in Python, its
// help, its checks, and the field of the command's request it sets. The command line registers its
// flags from the table (apps/bmpipe), the Python package reads its keywords through it
// (ReadOptions), and --help and the package's docstrings are written from it: no option is
// declared twice.
#pragma once

#include <set>
#include <string>
#include <variant>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"

namespace bmpipe {

// Where an option's value goes: a field of the command's request.
using OptionField = std::variant<bool*, int*, long*, double*, std::string*, std::vector<std::string>*, std::vector<int>*>;

enum class OptionCheck { kNone, kPositive, kNonNegative, kRange };

struct Option {
  std::string flags;  // the command line's names, e.g. "--time-limit" or "-s,--stages"; empty: a keyword only
  std::string key;    // the Python keyword, e.g. "time_limit"; empty: the command line only
  std::string help;
  OptionField field;
  std::string group;                 // the --help section; empty: the command's own options
  std::vector<std::string> choices;  // the words allowed (each of a list's); empty: any
  OptionCheck check = OptionCheck::kNone;
  double min = 0, max = 0;           // kRange: the bounds, inclusive
  bool required = false;
  bool show_default = false;         // --help shows the default value
  bool comma_separated = false;      // a list given as one comma-separated argument
  std::string needs;                 // the flag it needs on the command line (--device needs --model)
  std::string excludes;              // the flag it cannot be given with
  bool* given = nullptr;             // set when it is given
  std::set<std::string>* given_keys = nullptr;  // gets its keyword when it is given (OptionTable::RecordGiven)

  // Chained setters, for tables that read as a list of options.
  Option& Choices(std::vector<std::string> words) { choices = std::move(words); return *this; }
  Option& Positive() { check = OptionCheck::kPositive; return *this; }
  Option& NonNegative() { check = OptionCheck::kNonNegative; return *this; }
  Option& Range(double lo, double hi) { check = OptionCheck::kRange; min = lo; max = hi; return *this; }
  Option& Required() { required = true; return *this; }
  Option& ShowDefault() { show_default = true; return *this; }
  Option& CommaSeparated() { comma_separated = true; return *this; }
  Option& Group(std::string name) { group = std::move(name); return *this; }
  Option& Needs(std::string flag) { needs = std::move(flag); return *this; }
  Option& Excludes(std::string flag) { excludes = std::move(flag); return *this; }
  Option& Given(bool* flag) { given = flag; return *this; }
  Option& Help(std::string text) { help = std::move(text); return *this; }
};

class OptionTable {
 public:
  // Adds an option and returns it for its setters (valid until the next Add).
  Option& Add(std::string flags, std::string key, OptionField field, std::string help);
  void Append(const OptionTable& more);
  const std::vector<Option>& options() const { return options_; }
  std::vector<Option>& options() { return options_; }
  // The option named `flag` (one of its flags) or keyword; nullptr when none.
  Option* Find(const std::string& flag_or_key);
  // The options added from now on put their keyword in `keys` when given, on the command line or
  // as a keyword (nullptr: no longer): what a command tells apart from defaults and files.
  void RecordGiven(std::set<std::string>* keys) { record_ = keys; }

 private:
  std::vector<Option> options_;
  std::set<std::string>* record_ = nullptr;
};

// Sets the fields of the options whose keywords `keywords` (a JSON object) names, as the command
// line sets them from flags; `command` names the call in messages. Errors name the keyword, the
// value and what it takes: an unknown keyword, a value of the wrong type, a word not among the
// choices, a number that fails the check. Null values count as not given.
Status ReadOptions(const OptionTable& table, const Json& keywords, const std::string& command);

// The keywords of the table, one line each ("  time_limit: Seconds ..."), for docstrings.
std::string KeywordHelp(const OptionTable& table);

}  // namespace bmpipe

#include "bmpipe/core/document.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <yaml.h>

namespace bmpipe {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Thrown from inside a parser when the document passes a limit; carries the finished message.
struct DocumentLimit {
  std::string message;
};

std::string TooDeep(std::string_view format) {
  return fmt::format("lists and objects nest more than {} levels deep; a {} input never needs that many",
                     kMaxDocumentDepth, format);
}

std::string TooManyValues() {
  return fmt::format("the document holds more than {} values; use 'repeat' for identical layers", kMaxDocumentValues);
}

// Builds the tree as nlohmann's own DOM parser does, in linear time: each object's keys go to a
// hash set (a duplicate is reported, not silently dropped), members are appended without a
// search; values and depth are counted and stop the parse at a limit.
class LinearJsonBuilder : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return Add(nullptr); }
  bool boolean(bool v) override { return Add(v); }
  bool number_integer(number_integer_t v) override { return Add(v); }
  bool number_unsigned(number_unsigned_t v) override { return Add(v); }
  bool number_float(number_float_t v, const string_t&) override { return Add(v); }
  bool string(string_t& v) override { return Add(std::move(v)); }
  bool binary(binary_t& v) override { return Add(Json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return Open(Json::object()); }
  bool key(string_t& k) override {
    if (!keys_.back().insert(k).second && duplicate_.empty()) duplicate_ = k;
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(Json::array()); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = e.what();
    out_of_range_ = e.id == 406;  // a number beyond the range of a double
    return false;
  }

  Json& root() { return root_; }
  const std::string& duplicate() const { return duplicate_; }
  const std::string& error() const { return error_; }
  bool out_of_range() const { return out_of_range_; }

 private:
  Json* Place(Json&& value) {
    if (++values_ > kMaxDocumentValues) throw DocumentLimit{TooManyValues()};
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Json& top = *open_.back();
    if (top.is_array()) {
      top.push_back(std::move(value));
      return &top.back();
    }
    // Only the member just added to an open container is written to later: earlier members'
    // addresses may move, the open containers' do not.
    return &AppendMember(top, std::move(key_), std::move(value));
  }
  bool Add(Json&& value) {
    Place(std::move(value));
    return true;
  }
  bool Open(Json&& container) {
    if (open_.size() >= static_cast<std::size_t>(kMaxDocumentDepth)) throw DocumentLimit{TooDeep("JSON")};
    const bool object = container.is_object();
    open_.push_back(Place(std::move(container)));
    if (object) keys_.emplace_back();
    return true;
  }
  bool Close() {
    if (open_.back()->is_object()) keys_.pop_back();
    open_.pop_back();
    return true;
  }

  Json root_;
  std::vector<Json*> open_;
  std::vector<std::unordered_set<std::string>> keys_;
  std::string key_;
  std::size_t values_ = 0;
  std::string duplicate_;
  std::string error_;
  bool out_of_range_ = false;
};

Result<Json> ParseJson(const std::string& text, const std::string& path) {
  LinearJsonBuilder builder;
  try {
    const bool parsed = Json::sax_parse(text, &builder);
    if (!parsed) {
      if (builder.out_of_range()) {
        return InvalidInput(fmt::format("{}: not valid JSON: {}; numbers must lie within +-1.7e308", path,
                                        builder.error()));
      }
      return InvalidInput(fmt::format("{}: not valid JSON: {}", path, builder.error()));
    }
    if (!builder.duplicate().empty()) {
      return InvalidInput(
          fmt::format("{}: key '{}' appears twice in the same object; keep one", path, builder.duplicate()));
    }
    return std::move(builder.root());
  } catch (const DocumentLimit& limit) {
    return InvalidInput(fmt::format("{}: {}", path, limit.message));
  } catch (const Json::exception& e) {
    return InvalidInput(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
}

// A YAML string as the parser gives it, which must be UTF-8.
const std::string& CheckedYamlString(const std::string& s, int line) {
  if (FirstInvalidUtf8(s) != std::string_view::npos) {
    throw DocumentLimit{fmt::format("line {}: a string that is not valid UTF-8; write the characters themselves", line)};
  }
  return s;
}

// YAML 1.2 core schema for plain scalars: null, booleans, integers, floats; all else strings.
// A quoted (or block) scalar is always a string.
Json YamlScalar(const std::string& value, bool plain, int line) {
  const std::string& s = CheckedYamlString(value, line);
  if (!plain) return s;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  const char* begin = s.c_str();
  char* end = nullptr;
  errno = 0;
  long long i = std::strtoll(begin, &end, 10);
  if (*end == '\0' && errno == 0 && !std::isspace(static_cast<unsigned char>(s[0]))) return i;
  errno = 0;
  double d = std::strtod(begin, &end);
  if (*end == '\0' && !std::isspace(static_cast<unsigned char>(s[0])) && s.find_first_of("xXpP") == std::string::npos &&
      std::isfinite(d)) {
    // Underflow to zero is harmless; overflow is not a number bmpipe can use.
    if (errno == 0 || std::abs(d) < 1) return d;
  }
  if (*end == '\0' && errno == ERANGE && std::isinf(d)) {
    throw DocumentLimit{fmt::format("line {}: the number {} lies beyond +-1.7e308", line, s)};
  }
  if (s == ".inf" || s == "+.inf" || s == ".Inf") return std::numeric_limits<double>::infinity();
  if (s == "-.inf" || s == "-.Inf") return -std::numeric_limits<double>::infinity();
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return std::numeric_limits<double>::quiet_NaN();
  return s;
}

struct YamlDuplicateKey {
  std::string key;
  int line;
};

// Builds the tree from libyaml's parser events (yaml-cpp's node graph took 22 s on 64 MiB, its
// scanner alone 6 s; libyaml scans it in under one): mappings and sequences as frames on a stack,
// each value appended as it ends. An alias is a copy of the value its anchor named; every value
// produced is counted, so that aliases cannot expand a small text into a huge tree.
class YamlBuilder {
 public:
  explicit YamlBuilder(std::size_t text_bytes) : budget_(std::min(kMaxDocumentValues, text_bytes + kMaxAliasValues)) {}

  Json& root() { return root_; }

  // One event of the first document; false once that document has ended.
  bool Take(const yaml_event_t& e) {
    const int line = static_cast<int>(e.start_mark.line) + 1;
    switch (e.type) {
      case YAML_DOCUMENT_END_EVENT:
      case YAML_STREAM_END_EVENT:
        return false;
      case YAML_ALIAS_EVENT: {
        const auto it = anchors_.find(Text(e.data.alias.anchor));
        if (it == anchors_.end()) throw DocumentLimit{fmt::format("line {}: an alias to no anchor", line)};
        const std::string* scalar = it->second.scalar ? &it->second.text : nullptr;
        if (TakeKey(line, scalar)) return true;  // keys are not counted
        Value(Json(it->second.value), it->second.values, "", scalar);
        return true;
      }
      case YAML_SCALAR_EVENT: {
        const std::string text(reinterpret_cast<const char*>(e.data.scalar.value), e.data.scalar.length);
        const bool plain = e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        const std::string anchor = Text(e.data.scalar.anchor);
        if (TakeKey(line, &text)) {
          // A key is typed only when an alias may use it as a value.
          if (!anchor.empty()) anchors_[anchor] = {YamlScalar(text, plain, line), 1, true, text};
          return true;
        }
        Value(YamlScalar(text, plain, line), 1, anchor, &text);
        return true;
      }
      case YAML_SEQUENCE_START_EVENT:
        Open(Json::array(), line, Text(e.data.sequence_start.anchor));
        return true;
      case YAML_MAPPING_START_EVENT:
        Open(Json::object(), line, Text(e.data.mapping_start.anchor));
        return true;
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        Close();
        return true;
      default:  // stream and document start, no event
        return true;
    }
  }

 private:
  struct Frame {
    Json value;
    std::string anchor;
    std::size_t values = 1;  // values under it, itself included (an alias to it counts them)
    bool key_next = true;    // a mapping: the next event is a key
    std::string key;
    int key_line = 0;
    std::unordered_set<std::string> keys;  // linear in the mapping's size, not quadratic
  };
  struct Anchored {
    Json value;
    std::size_t values = 1;
    bool scalar = false;
    std::string text;  // a scalar's text, for an alias used as a mapping key
  };

  static std::string Text(const yaml_char_t* s) { return s == nullptr ? std::string() : reinterpret_cast<const char*>(s); }

  void Count(std::size_t values) {
    values_ += values;
    if (values_ > budget_) {
      if (budget_ == kMaxDocumentValues) throw DocumentLimit{TooManyValues()};
      throw DocumentLimit{fmt::format("YAML aliases expand the document to more than {} values ({} more than it has "
                                      "bytes); use 'repeat' for identical layers instead of aliases",
                                      budget_, kMaxAliasValues)};
    }
  }

  // A mapping's key, or false when the event is a value.
  bool TakeKey(int line, const std::string* scalar) {
    if (stack_.empty() || !stack_.back().value.is_object() || !stack_.back().key_next) return false;
    Frame& f = stack_.back();
    if (scalar == nullptr) throw DocumentLimit{fmt::format("line {}: a mapping key must be a plain name, not a list or mapping", line)};
    f.key = CheckedYamlString(*scalar, line);
    f.key_line = line;
    f.key_next = false;
    return true;
  }

  void Open(Json value, int line, std::string anchor) {
    TakeKey(line, nullptr);  // a list or mapping where a key belongs is refused
    if (static_cast<int>(stack_.size()) >= kMaxDocumentDepth) throw DocumentLimit{TooDeep("YAML")};
    Count(1);
    Frame frame;
    frame.value = std::move(value);
    frame.anchor = std::move(anchor);
    stack_.push_back(std::move(frame));
  }

  void Close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    Place(std::move(f.value), f.values, f.anchor, nullptr);
  }

  // A value (not a key: Take has placed those) counted and placed.
  void Value(Json value, std::size_t values, const std::string& anchor, const std::string* scalar) {
    Count(values);
    Place(std::move(value), values, anchor, scalar);
  }

  // A finished value into its parent (or as the root); kept for aliases when anchored.
  void Place(Json value, std::size_t values, const std::string& anchor, const std::string* scalar) {
    if (!anchor.empty()) anchors_[anchor] = {value, values, scalar != nullptr, scalar != nullptr ? *scalar : ""};
    if (stack_.empty()) {
      root_ = std::move(value);
      return;
    }
    Frame& parent = stack_.back();
    parent.values += values;
    if (parent.value.is_array()) {
      parent.value.push_back(std::move(value));
      return;
    }
    if (!parent.keys.insert(parent.key).second) throw YamlDuplicateKey{parent.key, parent.key_line};
    AppendMember(parent.value, parent.key, std::move(value));
    parent.key_next = true;
  }

  std::size_t budget_;
  std::size_t values_ = 0;
  std::vector<Frame> stack_;
  std::unordered_map<std::string, Anchored> anchors_;
  Json root_;
};

// Nesting is checked on the text first, so that a deeply nested document is refused before the
// parser's stacks grow with it. Flow brackets and block indentation both count: a crude but safe
// over-estimate of the nesting.
bool YamlTooDeep(const std::string& text) {
  int flow = 0;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      std::size_t indent = 0;
      while (line_start + indent < i && (text[line_start + indent] == ' ' || text[line_start + indent] == '-')) ++indent;
      if (indent / 2 > static_cast<std::size_t>(kMaxDocumentDepth) * 4) return true;
      line_start = i + 1;
      continue;
    }
    const char c = text[i];
    if (c == '[' || c == '{') {
      if (++flow > kMaxDocumentDepth) return true;
    } else if ((c == ']' || c == '}') && flow > 0) {
      --flow;
    }
  }
  return false;
}

Result<Json> ParseYaml(const std::string& text, const std::string& path) {
  if (YamlTooDeep(text)) return InvalidInput(fmt::format("{}: {}", path, TooDeep("YAML")));
  try {
    struct Parser {
      yaml_parser_t p;
      Parser() { yaml_parser_initialize(&p); }
      ~Parser() { yaml_parser_delete(&p); }
    } parser;
    yaml_parser_set_input_string(&parser.p, reinterpret_cast<const unsigned char*>(text.data()), text.size());
    YamlBuilder builder(text.size());
    while (true) {
      yaml_event_t event;
      if (yaml_parser_parse(&parser.p, &event) == 0) {
        const yaml_mark_t& mark = parser.p.problem_mark;
        const char* problem = parser.p.problem != nullptr ? parser.p.problem : "unreadable";
        const char* context = parser.p.context;
        return InvalidInput(fmt::format("{}: not valid YAML: line {}, column {}: {}{}", path, mark.line + 1,
                                        mark.column + 1, problem,
                                        context != nullptr ? fmt::format(" ({})", context) : std::string()));
      }
      struct Event {
        yaml_event_t* e;
        ~Event() { yaml_event_delete(e); }
      } owned{&event};
      if (!builder.Take(event)) break;
    }
    return std::move(builder.root());
  } catch (const YamlDuplicateKey& d) {
    return InvalidInput(
        fmt::format("{}: line {}: key '{}' appears twice in the same mapping; keep one", path, d.line, d.key));
  } catch (const DocumentLimit& limit) {
    return InvalidInput(fmt::format("{}: {}", path, limit.message));
  }
}

// Line and column (1-based) of byte `offset` of `text`.
std::pair<std::size_t, std::size_t> LineAndColumn(std::string_view text, std::size_t offset) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// Reads at most kMaxDocumentBytes + 1 bytes of `fd`, waiting at most kMaxDocumentWaitSeconds at a
// time for a pipe or device to deliver.
Result<std::string> ReadBounded(int fd, const std::string& path) {
  std::string text;
  char buffer[1 << 16];
  while (text.size() <= kMaxDocumentBytes) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      return text;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, kMaxDocumentWaitSeconds * 1000);
      if (ready == 0) {
        return IoError(fmt::format("{}: no data arrived for {} s; give a regular file, or a pipe whose writer is "
                                   "running",
                                   path, kMaxDocumentWaitSeconds));
      }
      if (ready < 0 && errno != EINTR) {
        return IoError(fmt::format("{}: error while waiting for data ({})", path, std::strerror(errno)));
      }
    } else if (errno != EINTR) {
      return IoError(fmt::format("{}: error while reading the file ({})", path, std::strerror(errno)));
    }
  }
  return text;
}

std::string TooLong(const std::string& path, std::string_view size) {
  return fmt::format("{}: the file is {}; bmpipe reads documents of at most {} MiB", path, size,
                     kMaxDocumentBytes >> 20);
}

}  // namespace

std::size_t FirstInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) low = 0xA0;   // no overlong forms
      if (c == 0xED) high = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) low = 0x90;   // no overlong forms
      if (c == 0xF4) high = 0x8F;  // nothing past U+10FFFF
    } else {
      return i;
    }
    if (i + length > n || s[i + 1] < low || s[i + 1] > high) return i;
    for (std::size_t k = 2; k < length; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

Status CheckDocumentText(const std::string& text, const std::string& path) {
  if (text.size() > kMaxDocumentBytes) return InvalidInput(TooLong(path, fmt::format("{} bytes", text.size())));
  if (const std::size_t bad = FirstInvalidUtf8(text); bad != std::string_view::npos) {
    const auto [line, column] = LineAndColumn(text, bad);
    return InvalidInput(fmt::format("{}: line {}, column {}: byte 0x{:02X} is not valid UTF-8; save the file as UTF-8",
                                    path, line, column, static_cast<unsigned char>(text[bad])));
  }
  // A NUL byte is valid UTF-8 but no text holds one, and it would make the YAML parser take the
  // text for UTF-16 or UTF-32 and convert it to bytes that are not UTF-8.
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos) {
    const auto [line, column] = LineAndColumn(text, nul);
    return InvalidInput(fmt::format("{}: line {}, column {}: a NUL byte; a document is text", path, line, column));
  }
  return {};
}

Result<Json> ParseDocument(const std::string& text, const std::string& path) {
  if (Status valid = CheckDocumentText(text, path); !valid.ok()) return valid.error();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return InvalidInput(fmt::format("{}: the document is empty", path));
  }
  if (EndsWith(path, ".json")) return ParseJson(text, path);
  if (EndsWith(path, ".yaml") || EndsWith(path, ".yml")) return ParseYaml(text, path);
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    if (c == '{' || c == '[') return ParseJson(text, path);
    break;
  }
  return ParseYaml(text, path);
}

Json& AppendMember(Json& object, std::string key, Json value) {
  auto& members = object.get_ref<Json::object_t&>();
  members.Json::object_t::Container::emplace_back(std::move(key), std::move(value));
  return members.Json::object_t::Container::back().second;
}

std::string DumpJson(const Json& doc, int indent) {
  return doc.dump(indent, ' ', false, Json::error_handler_t::replace);
}

Result<std::string> LoadText(const std::string& path) {
  // Opened without blocking, so that a named pipe with no writer cannot hang the open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return IoError(fmt::format("{}: cannot open file for reading ({})", path, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return IoError(fmt::format("{}: cannot read the file ({})", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) return IoError(fmt::format("{}: is a directory; give a file", path));
  if (S_ISREG(st.st_mode) && static_cast<std::size_t>(st.st_size) > kMaxDocumentBytes) {
    return InvalidInput(TooLong(path, fmt::format("{} bytes", st.st_size)));
  }
  Result<std::string> text = ReadBounded(fd, path);
  if (!text.ok()) return text.error();
  if (text.value().size() > kMaxDocumentBytes) {
    return InvalidInput(TooLong(path, fmt::format("more than {} bytes", kMaxDocumentBytes)));
  }
  return text;
}

Result<Json> LoadDocument(const std::string& path) {
  Result<std::string> text = LoadText(path);
  if (!text.ok()) return text.error();
  return ParseDocument(text.value(), path);
}

}  // namespace bmpipe

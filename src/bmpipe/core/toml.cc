#include "bmpipe/core/toml.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <set>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace bmpipe {
namespace {

struct TomlError {
  std::string message;
};

class TomlParser {
 public:
  explicit TomlParser(const std::string& text) : s_(text) {}

  Json Parse() {
    Json root = Json::object();
    Json* table = &root;
    while (true) {
      SkipBlankLines();
      if (AtEnd()) break;
      if (s_[i_] == '[') {
        table = &Header(root);
      } else {
        KeyValue(*table, 0);
      }
      EndOfLine();
    }
    return root;
  }

  int line() const { return line_; }

 private:
  [[noreturn]] void Fail(const std::string& message) const { throw TomlError{message}; }

  bool AtEnd() const { return i_ >= s_.size(); }
  char Peek(std::size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }

  void SkipSpaces() {
    while (!AtEnd() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  void SkipComment() {
    if (Peek() != '#') return;
    while (!AtEnd() && s_[i_] != '\n') {
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) Fail("a control character in a comment");
      ++i_;
    }
  }
  // Newline: "\n" or "\r\n".
  bool Newline() {
    if (Peek() == '\n') {
      ++i_;
      ++line_;
      return true;
    }
    if (Peek() == '\r' && Peek(1) == '\n') {
      i_ += 2;
      ++line_;
      return true;
    }
    return false;
  }
  void SkipBlankLines() {
    while (true) {
      SkipSpaces();
      SkipComment();
      if (!Newline()) return;
    }
  }
  // Spaces, comments and newlines (inside arrays).
  void SkipArraySpace() {
    while (true) {
      SkipSpaces();
      SkipComment();
      if (!Newline()) return;
    }
  }
  void EndOfLine() {
    SkipSpaces();
    SkipComment();
    if (AtEnd() || Newline()) return;
    Fail(fmt::format("unexpected '{}' after the value; one key = value or [table] a line", Printable(Peek())));
  }

  static std::string Printable(char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }

  // A key: bare, basic or literal, with dots between parts.
  std::vector<std::string> Key() {
    std::vector<std::string> parts;
    while (true) {
      SkipSpaces();
      const char c = Peek();
      if (c == '"') {
        if (Peek(1) == '"' && Peek(2) == '"') Fail("a multi-line string cannot be a key");
        parts.push_back(BasicString());
      } else if (c == '\'') {
        if (Peek(1) == '\'' && Peek(2) == '\'') Fail("a multi-line string cannot be a key");
        parts.push_back(LiteralString());
      } else {
        const std::size_t start = i_;
        while (!AtEnd() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '-')) ++i_;
        if (i_ == start) {
          Fail(AtEnd() || c == '\n' ? std::string("a key is missing") : fmt::format("'{}' cannot start a key", Printable(c)));
        }
        parts.push_back(s_.substr(start, i_ - start));
      }
      if (parts.size() > static_cast<std::size_t>(kMaxDocumentDepth)) {
        Fail(fmt::format("a key of more than {} dotted parts", kMaxDocumentDepth));
      }
      SkipSpaces();
      if (Peek() != '.') return parts;
      ++i_;
    }
  }

  static std::string Dotted(const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& p : parts) out += (out.empty() ? "" : ".") + p;
    return out;
  }

  // [a.b.c]: the table, made where missing; defined once.
  Json& Header(Json& root) {
    ++i_;
    if (Peek() == '[') Fail("arrays of tables ([[...]]) are not read; torchtitan's configurations have none");
    const std::vector<std::string> path = Key();
    if (Peek() != ']') Fail("a table header needs its closing ']'");
    ++i_;
    const std::string name = Dotted(path);
    if (!defined_.insert(name).second || implicit_inline_.count(name)) Fail(fmt::format("table [{}] is defined twice", name));
    Json* node = &root;
    std::string walked;
    for (const std::string& part : path) {
      walked += (walked.empty() ? "" : ".") + part;
      Json* child = Child(*node, part);
      if (child == nullptr) {
        child = &Add(*node, part, Json::object());
      } else if (!child->is_object() || implicit_inline_.count(walked)) {
        Fail(fmt::format("[{}]: '{}' is already a value", name, walked));
      }
      node = child;
    }
    table_path_ = name;
    return *node;
  }

  // key = value into `table`.
  void KeyValue(Json& table, int depth) {
    const std::vector<std::string> path = Key();
    if (Peek() != '=') Fail(fmt::format("'{}' needs '= value'", Dotted(path)));
    ++i_;
    SkipSpaces();
    Json* node = &table;
    // Inside an inline table the path is the table's own; at the top, the [table]'s.
    std::string walked = depth == 0 ? table_path_ : "";
    for (std::size_t k = 0; k + 1 < path.size(); ++k) {
      walked += (walked.empty() ? "" : ".") + path[k];
      Json* child = Child(*node, path[k]);
      if (child == nullptr) {
        child = &Add(*node, path[k], Json::object());
      } else if (!child->is_object() || (depth == 0 && implicit_inline_.count(walked))) {
        Fail(fmt::format("'{}' is already a value", path[k]));
      }
      node = child;
    }
    if (Child(*node, path.back()) != nullptr) Fail(fmt::format("'{}' is given twice", Dotted(path)));
    const bool inline_table = Peek() == '{';
    // The value first: parsing it adds to no table but its own (an inline table is new).
    Json value = Value(depth);
    Add(*node, path.back(), std::move(value));
    if (depth == 0 && inline_table) implicit_inline_.insert(walked + (walked.empty() ? "" : ".") + path.back());
  }

  Json Value(int depth) {
    const char c = Peek();
    if (c == '"') {
      if (Peek(1) == '"' && Peek(2) == '"') Fail("multi-line strings (\"\"\") are not read; write the string on one line");
      return BasicString();
    }
    if (c == '\'') {
      if (Peek(1) == '\'' && Peek(2) == '\'') Fail("multi-line strings (''') are not read; write the string on one line");
      return LiteralString();
    }
    if (c == '[') return Array(depth + 1);
    if (c == '{') return InlineTable(depth + 1);
    return Scalar();
  }

  void CheckDepth(int depth) const {
    if (depth > kMaxDocumentDepth) Fail(fmt::format("arrays and inline tables nest more than {} deep", kMaxDocumentDepth));
  }

  Json Array(int depth) {
    CheckDepth(depth);
    ++i_;
    Json out = Json::array();
    while (true) {
      SkipArraySpace();
      if (AtEnd()) Fail("an array needs its closing ']'");
      if (Peek() == ']') break;
      out.push_back(Value(depth));
      SkipArraySpace();
      if (Peek() == ',') {
        ++i_;
        continue;
      }
      if (Peek() != ']') Fail("array values are separated by ','");
      break;
    }
    ++i_;
    return out;
  }

  Json InlineTable(int depth) {
    CheckDepth(depth);
    ++i_;
    Json out = Json::object();
    SkipSpaces();
    if (Peek() == '}') {
      ++i_;
      return out;
    }
    while (true) {
      KeyValue(out, depth);
      SkipSpaces();
      if (Peek() == ',') {
        ++i_;
        continue;
      }
      if (Peek() != '}') Fail("an inline table needs '}' on its line, its entries separated by ','");
      ++i_;
      return out;
    }
  }

  void AppendUtf8(std::string& out, std::uint32_t cp) const {
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) Fail(fmt::format("\\u{:x} is not a Unicode scalar value", cp));
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  void StringChar(char c) const {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r') Fail("a string must end on its line");
    if ((u < 0x20 && c != '\t') || u == 0x7f) Fail(fmt::format("a control character ({}) in a string", Printable(c)));
  }

  std::string BasicString() {
    ++i_;
    std::string out;
    while (true) {
      if (AtEnd()) Fail("a string needs its closing '\"'");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (c != '\\') {
        StringChar(c);
        out += c;
        continue;
      }
      const char e = Peek();
      ++i_;
      switch (e) {
        case 'b': out += '\b'; break;
        case 't': out += '\t'; break;
        case 'n': out += '\n'; break;
        case 'f': out += '\f'; break;
        case 'r': out += '\r'; break;
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'u':
        case 'U': {
          const int digits = e == 'u' ? 4 : 8;
          std::uint32_t cp = 0;
          for (int d = 0; d < digits; ++d) {
            const char h = Peek();
            if (!std::isxdigit(static_cast<unsigned char>(h))) Fail(fmt::format("\\{} needs {} hex digits", e, digits));
            cp = cp * 16 + static_cast<std::uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                                                                                                   : (std::tolower(h) - 'a' + 10));
            ++i_;
          }
          AppendUtf8(out, cp);
          break;
        }
        default:
          Fail(fmt::format("unknown escape \\{} in a string", Printable(e)));
      }
    }
  }

  std::string LiteralString() {
    ++i_;
    const std::size_t start = i_;
    while (true) {
      if (AtEnd()) Fail("a string needs its closing \"'\"");
      const char c = s_[i_];
      if (c == '\'') break;
      StringChar(c);
      ++i_;
    }
    std::string out = s_.substr(start, i_ - start);
    ++i_;
    return out;
  }

  // Digits with single underscores between them.
  static bool Digits(const std::string& t, int base) {
    if (t.empty() || t.front() == '_' || t.back() == '_') return false;
    for (std::size_t k = 0; k < t.size(); ++k) {
      const char c = t[k];
      if (c == '_') {
        if (t[k - 1] == '_') return false;
        continue;
      }
      const bool ok = base == 16  ? std::isxdigit(static_cast<unsigned char>(c)) != 0
                      : base == 8 ? (c >= '0' && c <= '7')
                      : base == 2 ? (c == '0' || c == '1')
                                  : std::isdigit(static_cast<unsigned char>(c)) != 0;
      if (!ok) return false;
    }
    return true;
  }
  static std::string NoUnderscores(const std::string& t) {
    std::string out;
    for (char c : t) {
      if (c != '_') out += c;
    }
    return out;
  }

  Json Scalar() {
    const std::size_t start = i_;
    while (!AtEnd() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '+' ||
                        s_[i_] == '-' || s_[i_] == '.' || s_[i_] == ':')) {
      ++i_;
    }
    const std::string t = s_.substr(start, i_ - start);
    if (t.empty()) Fail(AtEnd() || Peek() == '\n' ? std::string("a value is missing")
                                                   : fmt::format("'{}' cannot start a value", Printable(Peek())));
    if (t == "true") return true;
    if (t == "false") return false;
    const bool negative = t[0] == '-';
    const std::string body = t[0] == '+' || t[0] == '-' ? t.substr(1) : t;
    if (body == "inf") return negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    if (body == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (t.find(':') != std::string::npos ||
        (t.size() >= 10 && std::isdigit(static_cast<unsigned char>(t[0])) && t[4] == '-' && t[7] == '-')) {
      Fail(fmt::format("'{}': dates and times are not read; quote it as a string", t));
    }
    const std::string bad = fmt::format("'{}' is not a TOML value (a number, true, false, a quoted string, an array "
                                        "or an inline table)",
                                        t);
    if (body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'o' || body[1] == 'b')) {
      if (t[0] == '+' || t[0] == '-') Fail(bad);
      const int base = body[1] == 'x' ? 16 : body[1] == 'o' ? 8 : 2;
      const std::string digits = body.substr(2);
      if (!Digits(digits, base)) Fail(bad);
      errno = 0;
      const unsigned long long v = std::strtoull(NoUnderscores(digits).c_str(), nullptr, base);
      if (errno == ERANGE || v > static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max())) {
        Fail(fmt::format("'{}' is out of the range of a 64-bit integer", t));
      }
      return static_cast<std::int64_t>(v);
    }
    const std::size_t dot = body.find('.');
    const std::size_t exp = body.find_first_of("eE");
    if (dot == std::string::npos && exp == std::string::npos) {
      if (!Digits(body, 10) || (body.size() > 1 && body[0] == '0')) Fail(bad);
      errno = 0;
      const long long v = std::strtoll(NoUnderscores(t).c_str(), nullptr, 10);
      if (errno == ERANGE) Fail(fmt::format("'{}' is out of the range of a 64-bit integer", t));
      return static_cast<std::int64_t>(v);
    }
    // A float: integer part, then .fraction and/or e[+-]exponent, each digits.
    const std::string whole = body.substr(0, std::min(dot, exp));
    if (!Digits(whole, 10) || (whole.size() > 1 && whole[0] == '0')) Fail(bad);
    if (dot != std::string::npos) {
      if (exp != std::string::npos && exp < dot) Fail(bad);
      if (!Digits(body.substr(dot + 1, exp == std::string::npos ? std::string::npos : exp - dot - 1), 10)) Fail(bad);
    }
    if (exp != std::string::npos) {
      std::string e = body.substr(exp + 1);
      if (!e.empty() && (e[0] == '+' || e[0] == '-')) e = e.substr(1);
      if (!Digits(e, 10)) Fail(bad);
    }
    errno = 0;
    const double v = std::strtod(NoUnderscores(t).c_str(), nullptr);
    if (errno == ERANGE && std::isinf(v)) Fail(fmt::format("'{}' is out of the range of a double", t));
    return v;
  }

  // A table's member `key`, or null; found through the table's index, so reading stays linear.
  Json* Child(Json& table, const std::string& key) {
    auto& members = table.get_ref<Json::object_t&>();
    auto idx = index_.find(&members);
    if (idx == index_.end()) return nullptr;
    auto it = idx->second.find(key);
    return it == idx->second.end() ? nullptr : &members.Json::object_t::Container::operator[](it->second).second;
  }
  // Appends a member the caller has checked is new (AppendMember), indexed for Child.
  Json& Add(Json& table, const std::string& key, Json value) {
    auto& members = table.get_ref<Json::object_t&>();
    index_[&members][key] = members.size();
    return AppendMember(table, key, std::move(value));
  }

  const std::string& s_;
  // Each table's members by key (a table's members live on the heap: their address is stable).
  std::unordered_map<const Json::object_t*, std::unordered_map<std::string, std::size_t>> index_;
  std::size_t i_ = 0;
  int line_ = 1;
  std::set<std::string> defined_;          // tables given a [header]
  std::set<std::string> implicit_inline_;  // inline tables: values, never reopened
  std::string table_path_;                 // the current [table]'s dotted name
};

}  // namespace

Result<Json> ParseToml(const std::string& text, const std::string& path) {
  if (Status valid = CheckDocumentText(text, path); !valid.ok()) return valid.error();
  TomlParser parser(text);
  try {
    return parser.Parse();
  } catch (const TomlError& e) {
    return InvalidInput(fmt::format("{}: line {}: {}", path, parser.line(), e.message));
  }
}

bool HasTomlTable(const std::string& text, const std::string& name) {
  const std::string header = "[" + name + "]";
  std::size_t at = 0;
  while ((at = text.find(header, at)) != std::string::npos) {
    std::size_t b = at;
    while (b > 0 && (text[b - 1] == ' ' || text[b - 1] == '\t')) --b;
    std::size_t e = at + header.size();
    while (e < text.size() && (text[e] == ' ' || text[e] == '\t' || text[e] == '\r')) ++e;
    if ((b == 0 || text[b - 1] == '\n') && (e == text.size() || text[e] == '\n' || text[e] == '#')) return true;
    at += header.size();
  }
  return false;
}

}  // namespace bmpipe

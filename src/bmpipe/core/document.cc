#include "bmpipe/core/document.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace bmpipe {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<Json> ParseJson(const std::string& text, const std::string& path) {
  // nlohmann keeps the last of duplicate keys; a parser callback tracks the keys of every open
  // object so a duplicate is reported instead of silently dropped.
  std::vector<std::vector<std::string>> open_objects;
  std::string duplicate;
  auto callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key: {
        const std::string key = parsed.get<std::string>();
        auto& keys = open_objects.back();
        for (const auto& k : keys) {
          if (k == key && duplicate.empty()) duplicate = key;
        }
        keys.push_back(key);
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    Json doc = Json::parse(text, callback);
    if (!duplicate.empty()) {
      return InvalidInput(fmt::format("{}: key '{}' appears twice in the same object; keep one", path, duplicate));
    }
    return doc;
  } catch (const Json::parse_error& e) {
    return InvalidInput(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
}

// YAML 1.2 core schema for plain scalars: null, booleans, integers, floats; all else strings.
Json YamlScalar(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: always a string
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
  if (*end == '\0' && errno == 0 && !std::isspace(static_cast<unsigned char>(s[0])) && std::isfinite(d) &&
      s.find_first_of("xXpP") == std::string::npos) {
    return d;
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

Json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return YamlScalar(node);
    case YAML::NodeType::Sequence: {
      Json out = Json::array();
      for (const auto& child : node) out.push_back(YamlToJson(child));
      return out;
    }
    case YAML::NodeType::Map: {
      Json out = Json::object();
      for (const auto& kv : node) {
        const std::string key = kv.first.Scalar();
        if (out.contains(key)) throw YamlDuplicateKey{key, kv.first.Mark().line + 1};
        out[key] = YamlToJson(kv.second);
      }
      return out;
    }
  }
  return nullptr;
}

Result<Json> ParseYaml(const std::string& text, const std::string& path) {
  try {
    return YamlToJson(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    return InvalidInput(fmt::format("{}: not valid YAML: line {}, column {}: {}", path, e.mark.line + 1,
                                    e.mark.column + 1, e.msg));
  } catch (const YamlDuplicateKey& d) {
    return InvalidInput(
        fmt::format("{}: line {}: key '{}' appears twice in the same mapping; keep one", path, d.line, d.key));
  }
}

}  // namespace

Result<Json> ParseDocument(const std::string& text, const std::string& path) {
  if (EndsWith(path, ".json")) return ParseJson(text, path);
  if (EndsWith(path, ".yaml") || EndsWith(path, ".yml")) return ParseYaml(text, path);
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    if (c == '{' || c == '[') return ParseJson(text, path);
    break;
  }
  return ParseYaml(text, path);
}

Result<Json> LoadDocument(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(fmt::format("{}: cannot open file for reading", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError(fmt::format("{}: error while reading the file", path));
  return ParseDocument(text.str(), path);
}

}  // namespace bmpipe

// `bmpipe search` output: the pruning statistics, the top configurations as a table, and the same
// as JSON.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/search/search.h"

namespace bmpipe {

// Header lines (label, value) and the table of the ranked configurations.
std::string FormatSearch(const std::vector<std::pair<std::string, std::string>>& header, const SearchOptions& options,
                         const SearchResult& result);

// The statistics, the bound over the space, the ranking (each with its metrics and plan), and the
// place of every configuration's verdict ("configurations": null, SearchJsonText writes them).
Json SearchToJson(const SearchOptions& options, const SearchResult& result);

// `search --json`'s document: SearchToJson and, when a configuration has a plan, "best_plan": the
// best one's plan file (plan_json.h) for its problem.
Json SearchDocument(const ModelSpec& model, const DeviceSpec& device, const SearchOptions& options,
                    const SearchResult& result);

// The document's text (DumpJson, indent 2, and a newline) with every configuration's verdict in
// "configurations", written one at a time (hundreds of thousands on a large space).
std::string SearchJsonText(const Json& doc, const SearchResult& result);

}  // namespace bmpipe

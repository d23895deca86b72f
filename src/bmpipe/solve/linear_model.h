// Plain data for linear and mixed-integer programs, independent of any solver library. Rows and
// columns carry names so that a dumped LP file can be read.
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace bmpipe {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct LinearTerm {
  int column;
  double coefficient;
};

struct LinearRow {
  std::string name;
  double lower = -kInfinity;
  double upper = kInfinity;
  std::vector<LinearTerm> terms;
};

struct LinearModel {
  std::vector<std::string> column_names;
  std::vector<double> column_lower;
  std::vector<double> column_upper;
  std::vector<double> objective;  // minimized
  std::vector<bool> integer;
  std::vector<LinearRow> rows;

  int num_columns() const { return static_cast<int>(column_names.size()); }
  int num_rows() const { return static_cast<int>(rows.size()); }

  int AddColumn(std::string name, double lower, double upper, double objective_coefficient, bool is_integer) {
    column_names.push_back(std::move(name));
    column_lower.push_back(lower);
    column_upper.push_back(upper);
    objective.push_back(objective_coefficient);
    integer.push_back(is_integer);
    return num_columns() - 1;
  }
  int AddRow(LinearRow row) {
    rows.push_back(std::move(row));
    return num_rows() - 1;
  }
};

}  // namespace bmpipe

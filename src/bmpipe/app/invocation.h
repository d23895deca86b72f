// The Invocation of a command file: its request, the option table bound to it, and its work. A
// request with a `given` member (a const Problem*) takes Python's problem instead of a file.
#pragma once

#include <type_traits>
#include <utility>

#include "bmpipe/app/command.h"

namespace bmpipe::app {

template <typename Request, typename = void>
struct TakesProblem : std::false_type {};
template <typename Request>
struct TakesProblem<Request, std::void_t<decltype(std::declval<Request&>().given = nullptr)>> : std::true_type {};

template <typename Request, OptionTable (*Table)(Request&), Result<Output> (*Work)(const Request&, const Context&)>
class RequestInvocation : public Invocation {
 public:
  RequestInvocation() : table_(Table(request_)) {}
  OptionTable& options() override { return table_; }
  Result<Output> Run(const Context& context) override { return Work(request_, context); }
  Status GiveProblem(const Problem& problem) override {
    if constexpr (TakesProblem<Request>::value) {
      request_.given = &problem;
      return {};
    } else {
      return Invocation::GiveProblem(problem);
    }
  }

 private:
  Request request_;
  OptionTable table_;
};

// The Command row of a command file.
template <typename Request, OptionTable (*Table)(Request&), Result<Output> (*Work)(const Request&, const Context&)>
Command MakeCommand(std::string_view name, std::string help) {
  return {name, std::move(help), [] { return std::make_unique<RequestInvocation<Request, Table, Work>>(); }};
}

}  // namespace bmpipe::app

// AccessRecorder: ModuleHooks for tests that record every checked parameter access (which module
// used which parameter) and otherwise behave like plain unsharded training.
#pragma once
#include <vector>

#include "core/autograd/context.h"
#include "core/nn/module.h"

namespace zero3 {

class AccessRecorder : public ModuleHooks {
 public:
  struct Access {
    Module* user;
    Parameter* param;
  };

  Tensor checked_access(Context& ctx, Module& user, Parameter& param) override {
    accesses.push_back({&user, &param});
    return ModuleHooks::checked_access(ctx, user, param);
  }

  std::vector<Access> accesses;
};

}  // namespace zero3

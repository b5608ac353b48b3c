// Parameter construction.
#include "core/nn/parameter.h"

namespace zero3 {

Parameter::Parameter(Module* owner, std::string local_name, Shape shape, Init init, float init_std)
    : owner_(owner), local_name_(std::move(local_name)), name_(local_name_), shape_(std::move(shape)),
      init_(init), init_std_(init_std) {}

}  // namespace zero3

// Property 7, a model-based stateful test of the parameter lifecycle: random sequences of module
// entries and exits, parameter uses (checked and raw), backward passes, optimizer steps and
// allocation faults drive the real engine through a tiny model's module hooks on W simulated
// ranks, and after every command each parameter's status and the live elements equal what
// LifecycleModel (lifecycle_model.h) predicts; every value a use returns is this rank's master
// shard where it owns it; a raw use of a partitioned parameter obeys the placeholder policy; an
// armed allocation fault ends the sequence in an OutOfMemoryError at the next gather. With each
// lifecycle bug of core/zero3/bug_injection.h injected, the same property finds a failing sequence.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/detail/TestListenerAdapter.h>
#include <rapidcheck/state.h>

#include <cstdio>

#include "core/base/errors.h"
#include "core/models/model_zoo.h"
#include "core/autograd/ops.h"
#include "core/sharding/partition.h"
#include "core/zero3/zero3_engine.h"
#include "props/generators.h"
#include "props/lifecycle/lifecycle_model.h"
#include "sim/sim_world.h"

namespace zero3 {
namespace {

// Three layers and their container: weights of 6 elements (uneven over 4 ranks), a bias of 2 and
// a scale of 3, so persistence thresholds 2 and 3 keep some of them gathered.
const nlohmann::json kTinySpec = {
    {"zero3_model_spec", 1}, {"kind", "sequential"}, {"input_width", 3}, {"loss", "mse"},
    {"layers",
     {{{"type", "linear"}, {"out", 2}}, {{"type", "linear"}, {"out", 3}, {"bias", false}},
      {{"type", "scale"}, {"shape", {3}}}}}};
const std::vector<std::string> kModuleNames = {"layers.0", "layers.1", "layers.2", "layers"};

BuiltModel build_tiny() { return build_model_from_spec(kTinySpec, "tiny", {.seed = 5}); }

// For show(): commands name parameters as a reader would, not by id.
const std::string& param_name(int id) {
  static const std::vector<std::string> names = [] {
    const BuiltModel built = build_tiny();
    return built.model->parameter_names();
  }();
  return names[static_cast<size_t>(id)];
}

LifecycleModel initial_model(const LifecycleSettings& settings) {
  const BuiltModel built = build_tiny();
  std::vector<ModelModule> modules;
  std::vector<int64_t> numels(built.model->parameters().size());
  std::vector<int> owners(numels.size(), -1);
  for (const std::string& name : kModuleNames) modules.push_back({name, {}});
  for (const Parameter* param : built.model->parameters()) {
    numels[static_cast<size_t>(param->id())] = param->numel();
    for (size_t m = 0; m < modules.size(); ++m) {
      if (param->owner().name() != modules[m].name) continue;
      modules[m].own_params.push_back(static_cast<int>(param->id()));
      owners[static_cast<size_t>(param->id())] = static_cast<int>(m);
    }
  }
  return LifecycleModel(modules, numels, owners, settings);
}

TrainConfig engine_config(const LifecycleSettings& settings) {
  TrainConfig config;
  ZeroConfig& zero = config.zero;
  zero.overlap_comm = settings.prefetch_and_reuse;
  zero.max_live_elements = settings.prefetch_and_reuse ? 1'000'000'000 : 0;
  zero.persistence_threshold = settings.persistence_threshold;
  zero.placeholder = settings.placeholder;
  return config;
}

// Passes every acquire through, except that once armed it refuses the next gathered parameter.
class FaultableAllocator : public Allocator {
 public:
  explicit FaultableAllocator(Allocator& inner) : inner_(inner) {}
  void acquire(MemoryCategory category, int64_t bytes, const std::string& what) override {
    if (armed_ && category == MemoryCategory::gathered_param) {
      armed_ = false;
      throw OutOfMemoryError("injected: no memory to gather '" + what + "'");
    }
    inner_.acquire(category, bytes, what);
  }
  void release(MemoryCategory category, int64_t bytes) override { inner_.release(category, bytes); }
  void arm() { armed_ = true; }

 private:
  Allocator& inner_;
  bool armed_ = false;
};

// The system under test on one rank: the tiny model under a real engine.
struct LifecycleSut {
  LifecycleSut(SimRank& sim, const LifecycleSettings& settings, const BugInjections& bugs)
      : allocator(sim.allocator()),
        built(build_tiny()),
        engine(init(built), sim.comm(), allocator, sim.kernels(), engine_config(settings), bugs),
        ctx(sim.kernels(), &engine, sim.rank()),
        rank(sim.rank()),
        world(sim.world()) {
    for (const std::string& name : kModuleNames) modules.push_back(find_module(built.model->root(), name));
    engine.begin_step(ctx, 0);
  }
  // The engine's phase order (engine_phase.h): a micro-step opens at its first module entry and
  // closes with its backward, so a step may end between micro-steps.
  void open_micro_step() {
    if (in_micro_step) return;
    engine.begin_micro_step(ctx);
    in_micro_step = true;
  }
  static Model& init(BuiltModel& model) {
    model.model->initialize(5);
    return *model.model;
  }
  static Module* find_module(Module& module, const std::string& name) {
    if (module.name() == name) return &module;
    for (const auto& child : module.children()) {
      if (Module* found = find_module(*child, name)) return found;
    }
    return nullptr;
  }
  Parameter& param(int id) const { return *built.model->parameters()[static_cast<size_t>(id)]; }

  FaultableAllocator allocator;
  BuiltModel built;
  Zero3Engine engine;
  Context ctx;
  int rank;
  int world;
  std::vector<Module*> modules;
  std::vector<int64_t> invocations;  // of the modules on the stack
  std::vector<Var> use_sums;         // one scalar per use this micro-step: the loss adds them
  int64_t step = 0;
  bool in_micro_step = false;
};

using LifecycleCommand = rc::state::Command<LifecycleModel, LifecycleSut>;

void check_statuses(const LifecycleModel& expected, const LifecycleSut& sut) {
  for (int p = 0; p < expected.param_count(); ++p) {
    const ParamStatus actual = sut.engine.status(sut.param(p));
    if (actual != expected.status(p)) {
      RC_FAIL("rank " + std::to_string(sut.rank) + ": '" + sut.param(p).name() + "' is " + param_status_name(actual) +
              ", the model expects " + param_status_name(expected.status(p)));
    }
  }
  RC_ASSERT(sut.engine.live_elements() == expected.live_elements());
}

// A gathered value's owned elements are this rank's f32 master shard, bit for bit.
void check_gathered_value(const LifecycleSut& sut, int p, const Tensor& value) {
  const Parameter& param = sut.param(p);
  RC_ASSERT(value.shape() == param.shape());
  const ShardRange range = shard_range(param.numel(), sut.world, sut.rank);
  const auto master = sut.engine.slot(param).master.values();
  for (int64_t i = 0; i < range.owned(); ++i) {
    RC_ASSERT(value.values()[static_cast<size_t>(range.begin + i)] == master[static_cast<size_t>(i)]);
  }
}

// Runs `action`, which must throw OutOfMemoryError exactly when the model says the armed
// allocation fault fires during this command; otherwise checks the statuses afterwards.
template <class Action>
void run_checked(const LifecycleCommand& command, const LifecycleModel& before, LifecycleSut& sut, Action&& action) {
  const LifecycleModel after = command.nextState(before);
  if (after.allocation_failed()) {
    RC_ASSERT_THROWS_AS(action(), OutOfMemoryError);
    return;
  }
  action();
  check_statuses(after, sut);
}

struct Enter : LifecycleCommand {
  int module;
  explicit Enter(const LifecycleModel& model)
      : module(static_cast<int>(*gen_uniform(0, static_cast<int64_t>(model.modules().size())))) {}
  void checkPreconditions(const LifecycleModel& model) const override {
    RC_PRE(!model.allocation_failed() && !model.on_stack(module));
  }
  void apply(LifecycleModel& model) const override { model.enter(module); }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    run_checked(*this, model, sut, [&] {
      sut.open_micro_step();
      sut.invocations.push_back(sut.ctx.enter_module(*sut.modules[static_cast<size_t>(module)]));
    });
  }
  void show(std::ostream& os) const override { os << "Enter(\"" << kModuleNames[static_cast<size_t>(module)] << "\")"; }
};

struct Exit : LifecycleCommand {
  void checkPreconditions(const LifecycleModel& model) const override {
    RC_PRE(!model.allocation_failed() && !model.stack().empty());
  }
  void apply(LifecycleModel& model) const override { model.exit_top(); }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    Module& module = *sut.modules[static_cast<size_t>(model.stack().back())];
    run_checked(*this, model, sut, [&] {
      sut.ctx.exit_module(module, sut.invocations.back());
      sut.invocations.pop_back();
    });
  }
  void show(std::ostream& os) const override { os << "Exit()"; }
};

struct Use : LifecycleCommand {
  int param;
  explicit Use(const LifecycleModel& model) : param(static_cast<int>(*gen_uniform(0, model.param_count()))) {}
  void checkPreconditions(const LifecycleModel& model) const override {
    RC_PRE(!model.allocation_failed() && !model.stack().empty());
  }
  void apply(LifecycleModel& model) const override { model.use(param); }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    Module& user = *sut.modules[static_cast<size_t>(model.stack().back())];
    run_checked(*this, model, sut, [&] {
      const Var value = sut.ctx.param(user, sut.param(param));
      check_gathered_value(sut, param, value.value());
      // Summed inside the module, so that its backward reads the value after re-gathering it.
      sut.use_sums.push_back(sum(sut.ctx, value));
    });
  }
  void show(std::ostream& os) const override { os << "Use(\"" << param_name(param) << "\")"; }
};

struct Raw : LifecycleCommand {
  int param;
  explicit Raw(const LifecycleModel& model) : param(static_cast<int>(*gen_uniform(0, model.param_count()))) {}
  void checkPreconditions(const LifecycleModel& model) const override { RC_PRE(!model.allocation_failed()); }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    Parameter& target = sut.param(param);
    if (model.status(param) == ParamStatus::available) {
      check_gathered_value(sut, param, sut.ctx.raw(target));
      return;
    }
    switch (model.settings().placeholder) {
      case PlaceholderPolicy::error:
        try {
          sut.ctx.raw(target);
          RC_FAIL("a raw use of partitioned '" + target.name() + "' did not raise under the error policy");
        } catch (const CorrectnessError& error) {
          RC_ASSERT(std::string(error.what()).find("'" + target.name() + "'") != std::string::npos);
        }
        break;
      case PlaceholderPolicy::empty: RC_ASSERT(sut.ctx.raw(target).shape() == Shape{0}); break;
      case PlaceholderPolicy::scalar: {
        const Tensor value = sut.ctx.raw(target);
        RC_ASSERT(value.shape() == Shape{1});
        RC_ASSERT(value.item() == 1.0f);
        break;
      }
    }
    check_statuses(model, sut);
  }
  void show(std::ostream& os) const override { os << "Raw(\"" << param_name(param) << "\")"; }
};

struct Backward : LifecycleCommand {
  void checkPreconditions(const LifecycleModel& model) const override {
    RC_PRE(!model.allocation_failed() && model.stack().empty() && model.uses_since_backward() > 0);
  }
  void apply(LifecycleModel& model) const override { model.backward(); }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    run_checked(*this, model, sut, [&] {
      Var loss = sut.use_sums.front();
      for (size_t i = 1; i < sut.use_sums.size(); ++i) loss = add(sut.ctx, loss, sut.use_sums[i]);
      sut.use_sums.clear();
      sut.engine.begin_backward();
      backward(sut.ctx, loss);
      sut.engine.end_micro_step(sut.ctx);
      sut.in_micro_step = false;
    });
  }
  void show(std::ostream& os) const override { os << "Backward()"; }
};

struct Step : LifecycleCommand {
  void checkPreconditions(const LifecycleModel& model) const override {
    RC_PRE(!model.allocation_failed() && model.stack().empty() && model.micro_steps_since_step() > 0 &&
           !model.entered_since_backward());
  }
  void apply(LifecycleModel& model) const override { model.step(); }
  void run(const LifecycleModel& model, LifecycleSut& sut) const override {
    run_checked(*this, model, sut, [&] {
      sut.engine.end_step(sut.ctx);
      sut.engine.begin_step(sut.ctx, ++sut.step);
    });
  }
  void show(std::ostream& os) const override { os << "Step()"; }
};

struct ArmAllocationFault : LifecycleCommand {
  void checkPreconditions(const LifecycleModel& model) const override {
    RC_PRE(!model.allocation_failed() && !model.allocation_fault_armed());
  }
  void apply(LifecycleModel& model) const override { model.arm_allocation_fault(); }
  void run(const LifecycleModel&, LifecycleSut& sut) const override { sut.allocator.arm(); }
  void show(std::ostream& os) const override { os << "ArmAllocationFault()"; }
};

rc::Gen<LifecycleSettings> gen_settings() {
  return rc::gen::exec([] {
    LifecycleSettings settings;
    settings.world = *rc::gen::element(1, 2, 3, 4);
    settings.prefetch_and_reuse = *rc::gen::element(false, true);
    settings.persistence_threshold = *rc::gen::element<int64_t>(0, 2, 3);
    settings.placeholder =
        *rc::gen::element(PlaceholderPolicy::error, PlaceholderPolicy::empty, PlaceholderPolicy::scalar);
    return settings;
  });
}

// Commands weighted by what the state allows, so that sequences go through whole micro-steps and
// steps instead of being discarded for their preconditions.
rc::Gen<std::shared_ptr<const LifecycleCommand>> gen_command(const LifecycleModel& model) {
  using rc::state::gen::execOneOfWithArgs;
  const auto make = [&](auto command_types) { return command_types(model); };
  const auto enter = make(execOneOfWithArgs<Enter>());
  const auto raw = make(execOneOfWithArgs<Raw>());
  const auto fault = make(execOneOfWithArgs<ArmAllocationFault>());
  if (!model.stack().empty()) {
    return rc::gen::weightedOneOf<std::shared_ptr<const LifecycleCommand>>(
        {{4, make(execOneOfWithArgs<Use>())}, {3, make(execOneOfWithArgs<Exit>())}, {2, enter}, {1, raw}});
  }
  if (model.uses_since_backward() > 0) {
    return rc::gen::weightedOneOf<std::shared_ptr<const LifecycleCommand>>(
        {{4, make(execOneOfWithArgs<Backward>())}, {2, enter}, {1, raw}});
  }
  if (model.micro_steps_since_step() > 0 && !model.entered_since_backward()) {
    return rc::gen::weightedOneOf<std::shared_ptr<const LifecycleCommand>>(
        {{3, make(execOneOfWithArgs<Step>())}, {3, enter}, {1, raw}, {1, fault}});
  }
  return rc::gen::weightedOneOf<std::shared_ptr<const LifecycleCommand>>({{6, enter}, {1, raw}, {1, fault}});
}

// The property: generated settings and a command sequence, run on every rank of a simulated world.
void check_a_command_sequence(const BugInjections& bugs) {
  const LifecycleSettings settings = *gen_settings();
  const LifecycleModel initial = initial_model(settings);
  // Generated here, in the test thread; every rank then runs the same sequence.
  const auto commands = *rc::state::gen::commands(initial, gen_command);
  SimWorld world({.world = settings.world, .seed = 1, .fiber_stack_bytes = 1 << 20});
  const SimResult result = world.run([&](SimRank& sim) {
    LifecycleSut sut(sim, settings, bugs);
    rc::state::runAll(commands, initial, sut);
  });
  if (!result.all_ok()) {
    std::rethrow_exception(result.ranks[static_cast<size_t>(result.root_cause_rank)].exception);
  }
}

RC_GTEST_PROP(LifecycleStateMachine, TheEngineFollowsTheLifecycleModelThroughAnyCommandSequence, ()) {
  check_a_command_sequence({});
}

// The bugs that break the lifecycle itself (the others live in gradients, buckets and checkpoints,
// which the stateful test does not model; gather-gated-on-numel needs a zero-sized parameter).
// gather-order-by-arrival is the engine's own bucket-order check firing: it needs a module that
// registered an external parameter and gathers it again with its own.
TEST(LifecycleStateMachine, FindsAFailingSequenceForEveryLifecycleBug) {
  constexpr int kSequences = 300;
  for (Bug bug : {Bug::external_not_registered, Bug::invalidate_without_wait, Bug::release_while_in_use,
                  Bug::missing_gather_wait, Bug::prefetch_silently_off, Bug::never_release,
                  Bug::gather_order_by_arrival}) {
    BugInjections bugs;
    bugs.set(bug);
    rc::detail::TestParams params;
    params.seed = 20240601;
    params.maxSuccess = kSequences;
    params.maxSize = 100;
    rc::detail::TestListenerAdapter quiet;
    const rc::detail::TestResult result = rc::detail::checkProperty(
        rc::detail::toProperty([&] { check_a_command_sequence(bugs); }), {.id = bug_name(bug), .description = ""},
        params, quiet, {});
    const bool caught = result.is<rc::detail::FailureResult>();
    EXPECT_TRUE(caught) << bug_name(bug) << ": no failing sequence in " << kSequences << " sequences";
    if (!caught) continue;
    const auto& failure = result.get<rc::detail::FailureResult>();
    std::printf("%-24s caught at sequence %d: %s\n", bug_name(bug), failure.numSuccess + 1, failure.description.c_str());
    for (const auto& [type, value] : failure.counterExample) {
      std::string indented = value;
      for (size_t at = indented.find('\n'); at != std::string::npos; at = indented.find('\n', at + 1)) {
        indented.insert(at + 1, "    ");
      }
      std::printf("    %s\n", indented.c_str());
    }
  }
}

}  // namespace
}  // namespace zero3

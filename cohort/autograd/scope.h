#pragma once
// Scopes: which traced module a piece of the graph belongs to, so that a profiler (the trainer's
// timeline trace) can show forward and backward per module.
//
// A module that is traced runs its forward under a ScopeGuard, which opens a frame of its scope
// whose parent is the frame open when that forward began (the traced module that called it, if
// any: nesting as it ran, not as modules are registered); every graph node created on that
// thread meanwhile carries the innermost frame. The engine then reports, while it runs nodes,
// when it enters and leaves each scope (and its enclosing ones): a module's backward span runs
// from the first of its nodes the engine executes to the last one before it runs a node of
// another scope (the engine runs nodes in reverse creation order, so a module's nodes run in
// one stretch unless its graph interleaves with another's). Nodes created outside any traced
// module (the loss, glue ops between layers) close every open scope.
//
// Cost when nothing is traced: one thread-local read per node created, one null check per node
// run. The thread-local pointer is set only while a traced forward runs (the guard restores it),
// so it holds nothing once the forward returns.
#include <memory>
#include <string>
#include <vector>

namespace cohort::autograd {

enum class Pass { forward, backward };

struct Scope;

// Told when a scope begins and ends (nesting properly, on the thread that runs the pass).
class ScopeObserver {
 public:
  virtual ~ScopeObserver() = default;
  virtual void begin(const Scope& scope, Pass pass) = 0;
  virtual void end(const Scope& scope, Pass pass) = 0;
};

struct Scope {
  std::string name;                       // the module's full name ("blocks.0")
  std::shared_ptr<const Scope> parent;    // in a frame: the frame that was open (null: none)
  std::weak_ptr<ScopeObserver> observer;  // gone: the scope reports nothing
};

// The scope nodes created on this thread now carry (null outside any traced forward).
const std::shared_ptr<const Scope>& current_scope();

// Opens a frame of `scope` (its parent: the current frame) for its lifetime and reports the
// forward span to its observer. One allocation per traced forward call.
class ScopeGuard {
 public:
  explicit ScopeGuard(std::shared_ptr<const Scope> scope);
  ~ScopeGuard();
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  std::shared_ptr<const Scope> prev_;
  std::shared_ptr<ScopeObserver> observer_;
};

// The engine's side: follows the scopes of the nodes it runs and reports backward spans.
class ScopeTracker {
 public:
  ScopeTracker() = default;
  ~ScopeTracker() { leave_all(); }  // also when the pass throws: spans stay balanced
  ScopeTracker(const ScopeTracker&) = delete;
  ScopeTracker& operator=(const ScopeTracker&) = delete;
  // Before running a node of `scope` (null: none).
  void enter(const std::shared_ptr<const Scope>& scope) {
    if (scope == nullptr && open_.empty()) return;  // the untraced case stays this cheap
    enter_slow(scope);
  }
  void leave_all();

 private:
  void enter_slow(const std::shared_ptr<const Scope>& scope);
  std::vector<std::shared_ptr<const Scope>> open_;  // outermost first
};

}  // namespace cohort::autograd

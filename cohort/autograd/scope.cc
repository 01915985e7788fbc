#include "cohort/autograd/scope.h"

#include <algorithm>

namespace cohort::autograd {
namespace {

// Set only while a traced forward runs on this thread (ScopeGuard restores it).
thread_local std::shared_ptr<const Scope> t_scope;

void report(const Scope& s, Pass pass, bool begin) {
  std::shared_ptr<ScopeObserver> o = s.observer.lock();
  if (!o) return;
  if (begin) {
    o->begin(s, pass);
  } else {
    o->end(s, pass);
  }
}

}  // namespace

const std::shared_ptr<const Scope>& current_scope() {
  return t_scope;
}

ScopeGuard::ScopeGuard(std::shared_ptr<const Scope> scope)
    : prev_(t_scope), observer_(scope->observer.lock()) {
  t_scope = std::make_shared<const Scope>(Scope{scope->name, prev_, scope->observer});
  if (!observer_) return;
  try {
    observer_->begin(*t_scope, Pass::forward);
  } catch (...) {  // the destructor will not run: put the enclosing scope back
    t_scope = std::move(prev_);
    throw;
  }
}

ScopeGuard::~ScopeGuard() {
  if (observer_) observer_->end(*t_scope, Pass::forward);
  t_scope = std::move(prev_);
}

// Closes the open scopes that do not enclose `scope`, then opens those of its chain that are
// not open yet (outermost first), so that begin/end pairs nest.
void ScopeTracker::enter_slow(const std::shared_ptr<const Scope>& scope) {
  std::vector<std::shared_ptr<const Scope>> chain;  // innermost first
  for (auto s = scope; s; s = s->parent) chain.push_back(s);
  std::reverse(chain.begin(), chain.end());
  size_t keep = 0;
  while (keep < open_.size() && keep < chain.size() && open_[keep] == chain[keep]) ++keep;
  while (open_.size() > keep) {
    report(*open_.back(), Pass::backward, false);
    open_.pop_back();
  }
  for (size_t i = keep; i < chain.size(); ++i) {
    report(*chain[i], Pass::backward, true);
    open_.push_back(chain[i]);
  }
}

void ScopeTracker::leave_all() {
  while (!open_.empty()) {
    report(*open_.back(), Pass::backward, false);
    open_.pop_back();
  }
}

}  // namespace cohort::autograd

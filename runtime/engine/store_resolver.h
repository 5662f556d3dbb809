// The production resolver for the Dispatcher: the tuning record of this device for (spec,
// bucket) when there is one, else the family default — said once per spec, with the command
// that tunes it — compiled through the cache and loaded on the current GPU.
#pragma once
#include "cache/store.h"
#include "runtime/engine/dispatch.h"
#include "runtime/jit/service.h"

namespace onecat {

Dispatcher::Resolver store_resolver(Store& store, JitService& jit, const DeviceFingerprint& device);

}  // namespace onecat
